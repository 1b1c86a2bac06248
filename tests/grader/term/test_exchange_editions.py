"""An edition released on nbgrader's exchange as an assignment of its own (course.toml's
``[course.editions]``: the Chinese notebooks as ``<assignment>-zh``, at its top, under the same
names and grade ids) is read by the intake as the course's assignment, with every defence of the
exchange kept, and its feedback goes back under the name it was submitted to. Each attack beside its
control."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from test_intake import ASSIGNMENT, COURSE, NB1, intake, just_now, nbgrader_time, notebook, tree

from autograde.course import Course, UnusableInput
from autograde.term import exchange

ROOT = Path(__file__).resolve().parents[3]
ZH = dict(COURSE.editions)["zh"]  # the Chinese edition's assignment


def submit(
    inbound: Path, student: str, to: str, when: datetime, version: int = 1, suffix: str = "r"
) -> Path:
    """A submission folder as ``nbgrader submit`` leaves it in inbound/, to the assignment
    ``to``."""
    folder = inbound / f"{student}+{to}+{nbgrader_time(when)}+{suffix}{student}"
    folder.mkdir(parents=True)
    (folder / f"{NB1}.ipynb").write_bytes(notebook(student, NB1, version))
    (folder / "timestamp.txt").write_text(nbgrader_time(when))
    (folder / "submission_secret.txt").write_text(f"secret{student}{version}")
    return folder


def inbound_of(tmp_path: Path) -> Path:
    return tmp_path / "exchange" / "course101" / "inbound"


def problems_of(result, student: str) -> list[str]:
    return [p.problem for p in result.problems if p.student_id == student]


def test_the_course_names_its_editions_assignments():
    assert COURSE.assignment_names() == {ASSIGNMENT: "en", ZH: "zh"}
    assert ZH != ASSIGNMENT and "+" not in ZH


def test_a_submission_to_the_chinese_editions_assignment_is_one_of_the_course(tmp_path):
    inbound = inbound_of(tmp_path)
    now = just_now()
    submit(inbound, "alice", ASSIGNMENT, now)
    submit(inbound, "bob", ZH, now)
    # control: a name the course does not give is another assignment
    submit(inbound, "carol", f"{ASSIGNMENT}-fr", now)
    result = intake(inbound.parent, tmp_path)
    assert result.layout == "exchange" and result.problems == []
    assert tree(result.folder) == {s: {f"{NB1}.ipynb": notebook(s, NB1)} for s in ("alice", "bob")}
    assert (
        result.students["bob"]["assignment"] == ZH
        and result.students["alice"]["assignment"] == ASSIGNMENT
    )
    assert any(f"another assignment ({ASSIGNMENT}-fr)" in note for note in result.notes), (
        result.notes
    )


def test_an_inbound_of_the_chinese_edition_alone_is_still_the_exchange(tmp_path):
    inbound = inbound_of(tmp_path)
    submit(inbound, "bob", ZH, just_now())
    result = intake(inbound, tmp_path)
    assert result.layout == "exchange" and tree(result.folder) == {
        "bob": {f"{NB1}.ipynb": notebook("bob", NB1)}
    }


@pytest.mark.parametrize("newer", [ASSIGNMENT, ZH])
def test_a_student_who_submitted_to_both_editions_is_graded_on_the_newest_and_it_is_named(
    tmp_path, newer
):
    inbound = inbound_of(tmp_path)
    now = just_now()
    older = ZH if newer == ASSIGNMENT else ASSIGNMENT
    submit(inbound, "bob", older, now - timedelta(seconds=30), version=0, suffix="a")
    kept = submit(inbound, "bob", newer, now, version=1, suffix="b")
    result = intake(inbound, tmp_path)
    assert tree(result.folder)["bob"] == {f"{NB1}.ipynb": notebook("bob", NB1, 1)}
    assert (
        result.students["bob"]["assignment"] == newer
        and result.students["bob"]["secret"] == "secretbob1"
    )
    (note,) = [n for n in result.notes if n.startswith("bob: an older submission")]
    assert (
        f"to {older}) was not used" in note
        and f"({kept.name}, to {newer}) is graded" in note
        and "two editions" in note
    )


def test_two_submissions_to_one_edition_keep_the_plain_note(tmp_path):
    """The control of the note above: resubmitting within one edition says what it always said."""
    inbound = inbound_of(tmp_path)
    now = just_now()
    submit(inbound, "bob", ZH, now - timedelta(seconds=30), version=0, suffix="a")
    submit(inbound, "bob", ZH, now, version=1, suffix="b")
    result = intake(inbound, tmp_path)
    assert tree(result.folder)["bob"] == {f"{NB1}.ipynb": notebook("bob", NB1, 1)}
    (note,) = [n for n in result.notes if n.startswith("bob: an older submission")]
    assert "as nbgrader collect keeps it" in note and "two editions" not in note


def test_collects_submitted_folders_of_both_editions_keep_the_newest_by_timestamp(tmp_path):
    """``nbgrader collect`` of each edition's assignment: submitted/<student>/<name>/, no time in a
    folder name."""
    course = tmp_path / "course"
    now = just_now()
    for to, version, when in ((ASSIGNMENT, 0, now - timedelta(minutes=5)), (ZH, 1, now)):
        folder = course / "submitted" / "bob" / to
        folder.mkdir(parents=True)
        (folder / f"{NB1}.ipynb").write_bytes(notebook("bob", NB1, version))
        (folder / "timestamp.txt").write_text(nbgrader_time(when))
    result = intake(course, tmp_path)
    assert result.layout == "exchange" and tree(result.folder)["bob"] == {
        f"{NB1}.ipynb": notebook("bob", NB1, 1)
    }
    assert result.students["bob"]["assignment"] == ZH
    assert any("by its timestamp.txt" in n for n in result.notes), result.notes


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another uid needs root")
@pytest.mark.parametrize("to", [ASSIGNMENT, ZH])
def test_a_folder_in_someone_elses_name_fails_the_owner_check_in_either_edition(tmp_path, to):
    inbound = inbound_of(tmp_path)
    now = just_now()
    submit(inbound, "bob", ASSIGNMENT, now)
    # newer: it would win
    forged = submit(inbound, "bob", to, now + timedelta(seconds=10), version=2, suffix="f")
    for path in (forged, *forged.iterdir()):
        os.chown(path, 4242, 4242)
    result = intake(inbound, tmp_path / "attack")
    # his own, older, submission
    assert tree(result.folder)["bob"] == {f"{NB1}.ipynb": notebook("bob", NB1)}
    assert any("is owned by uid 4242" in p for p in problems_of(result, "bob")), result.problems
    # the instructor's word: it is his
    control = intake(inbound, tmp_path / "control", trust_owners=True)
    assert tree(control.folder)["bob"] == {f"{NB1}.ipynb": notebook("bob", NB1, 2)}


def test_feedback_goes_back_under_the_assignment_submitted_to(tmp_path):
    from autograde.ledger.facts import LmsStudent
    from autograde.ledger.folder import Page
    from autograde.ledger.layout import Out
    from autograde.term.adapter import HandBackJob

    out = Out(tmp_path / "out", ASSIGNMENT)
    pages = {}
    for student in ("alice", "bob", "mallory"):
        (out.pages / student).mkdir(parents=True)
        page = out.pages / student / f"{NB1}.html"
        page.write_text(f"<p>{student}</p>")
        pages[student] = [Page(student, page)]
    sent = {"layout": "exchange", "timestamp": "2026-12-01 10:00:00.000000 UTC", "secret": "abc"}
    names = {
        "alice": LmsStudent.from_json({**sent, "assignment": ASSIGNMENT}),
        "bob": LmsStudent.from_json({**sent, "assignment": ZH}),
        # an intake.json edited by hand: no path is taken from it
        "mallory": LmsStudent.from_json({**sent, "assignment": "../../../escaped"}),
    }
    done = exchange.hand_back(HandBackJob(COURSE, out, pages, names))
    feedback = done.where / "feedback"
    assert sorted(str(p.relative_to(feedback)) for p in feedback.rglob("*.html")) == [
        f"alice/{ASSIGNMENT}/{NB1}.html",
        f"bob/{ZH}/{NB1}.html",
        f"mallory/{ASSIGNMENT}/{NB1}.html",
    ]
    assert (feedback / "bob" / ZH / "submission_secret.txt").read_text() == "abc"
    assert not (tmp_path / "escaped").exists() and not done.unmatched


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('zh = "serving_overlap+zh"', "without '+'"),
        ('zh = "../zh"', "without '+', '/'"),
        ('zh = "serving_overlap"', "other than serving_overlap"),
        ('fr = "serving_overlap-fr"', "besides English are zh"),
        ('en = "serving_overlap-en"', "besides English are zh"),
    ],
)
def test_an_edition_name_nbgrader_or_the_course_cannot_use_is_refused_saying_why(
    tmp_path, table, said
):
    root = tmp_path / "course"
    root.mkdir()
    text = (ROOT / "course.toml").read_text(encoding="utf-8")
    start = text.index("[course.editions]")
    end = text.index("\n\n", start)
    (root / "course.toml").write_text(
        text[:start] + "[course.editions]\n" + table + text[end:], encoding="utf-8"
    )
    with pytest.raises(UnusableInput, match=r"course.toml: \[course.editions\]") as caught:
        Course.load(root)
    assert said in str(caught.value)
    # control: the course's own table loads
    (root / "course.toml").write_text(text, encoding="utf-8")
    assert Course.load(root).editions == COURSE.editions


def test_a_course_without_editions_reads_its_own_assignment_only(tmp_path):
    root = tmp_path / "course"
    root.mkdir()
    text = (ROOT / "course.toml").read_text(encoding="utf-8")
    start = text.index("[course.editions]")
    (root / "course.toml").write_text(
        text[:start] + text[text.index("\n\n", start) + 2 :], encoding="utf-8"
    )
    course = Course.load(root)
    assert course.editions == () and course.assignment_names() == {ASSIGNMENT: "en"}
