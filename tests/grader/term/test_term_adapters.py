"""A new LMS is one new module and one line in the registry: a toy system, registered here only, has
its download recognised and read by the intake, its pages handed back and its grades exported
through the same commands as Canvas and Moodle, with no other change to the term."""

from __future__ import annotations

import csv
import zipfile
from pathlib import Path

import pytest
from test_export_lms import FAKE_URL, _class
from test_intake import NB1, NB2, NOTEBOOKS, notebook, tree, write_zip

from autograde import cli
from autograde.course import Course, UnusableInput
from autograde.ledger.facts import LmsStudent
from autograde.ledger.folder import Page
from autograde.term import export as export_mod
from autograde.term import registry
from autograde.term.adapter import Adapter, ExportJob, lms_zip
from autograde.term.candidates import Candidate, why_not
from autograde.term.handback import hand_back, lms_name
from autograde.term.intake import read_submissions
from autograde.term.source import problem, shown

COURSE = Course.load()


# -- the toy system: its download names each file "<user>__<file>", its grades go in
# "toy_grades.csv" ------------------


def _claims(name: str, folder: bool, assignment: str) -> bool:
    return not folder and name.count("__") == 1 and name.split("__")[0].isdigit()


def _read(files, entries, context) -> list[Candidate]:
    found = []
    for entry in entries:
        user, _, filename = entry.parts[-1].partition("__")
        why = (
            why_not(entry, context["limits"], filename)
            if len(entry.parts) == 1 and user.isdigit()
            else "not a toy file"
        )
        if why:
            files.problems.append(problem(shown(entry.name), None, why))
            continue
        found.append(
            Candidate(
                user,
                entry,
                filename,
                order=entry.date,
                lms={"layout": "toy", "lms_id": user, "name": f"user {user}"},
            )
        )
    return found


def _page_name(lms: LmsStudent, page) -> str:
    return f"{lms.lms_id}__{page.name}"


def _export(job: ExportJob) -> tuple[list[Path], list[str]]:
    target = job.target or job.out.root / "toy_grades.csv"
    with open(target, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["user", "grade"])
        writer.writerows(
            (
                job.people[r.student_id].lms_id if r.student_id in job.people else r.student_id,
                r.final_total,
            )
            for r in job.table.rows
        )
    return [target], []


TOY = Adapter(
    "toy",
    _read,
    claims=_claims,
    id_kind="the toy system names each student by its user number",
    handback_format="toy",
    handback=lambda job: lms_zip("toy", _page_name, job),
    page_name=_page_name,
    export_format="toy",
    export=_export,
)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(registry.ADAPTERS, "toy", TOY)  # the one registry line a new system adds
    return TOY


def test_the_intake_recognises_and_reads_a_registered_system(tmp_path, toy):
    download = write_zip(
        tmp_path / "toy.zip",
        {
            f"101__{NB1}.ipynb": notebook("a", NB1),
            f"102__{NB2}.ipynb": notebook("b", NB2),
            "readme.txt": b"x",
        },
    )
    found = read_submissions(download, tmp_path / "dest", NOTEBOOKS, COURSE.assignment)
    assert found.layout == "toy"
    assert tree(found.folder) == {
        "101": {f"{NB1}.ipynb": notebook("a", NB1)},
        "102": {f"{NB2}.ipynb": notebook("b", NB2)},
    }
    assert found.students["101"]["layout"] == "toy"
    assert [p.file for p in found.problems] == ["readme.txt"], (
        "what the toy reader cannot use is named"
    )


def test_a_roster_that_matches_none_of_its_ids_stops_with_its_id_kind(tmp_path, toy):
    download = write_zip(
        tmp_path / "toy.zip",
        {f"101__{NB1}.ipynb": notebook("a", NB1), f"102__{NB1}.ipynb": notebook("b", NB1)},
    )
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,lms_id\nada,9001\nbob,9002\n", encoding="utf-8")
    with pytest.raises(UnusableInput, match="the toy system names each student by its user number"):
        read_submissions(download, tmp_path / "dest", NOTEBOOKS, COURSE.assignment, roster=roster)


def test_without_the_registry_line_the_download_is_not_recognised(tmp_path):
    download = write_zip(tmp_path / "toy.zip", {f"101__{NB1}.ipynb": notebook("a", NB1)})
    with pytest.raises(UnusableInput, match="could not be told"):
        read_submissions(download, tmp_path / "dest", NOTEBOOKS, COURSE.assignment)
    with pytest.raises(UnusableInput, match="layout 'toy'"):
        read_submissions(download, tmp_path / "dest", NOTEBOOKS, COURSE.assignment, layout="toy")


def test_hand_back_and_export_use_a_registered_system(tmp_path, monkeypatch, toy):
    out, _ = _class(
        tmp_path,
        monkeypatch,
        "none",
        {},
        {"ada": True, "bob": False},
        people={"ada": {"layout": "toy", "lms_id": "101"}},
    )
    (out / "intake.json").write_text(
        '{"students": {"ada": {"layout": "toy", "lms_id": "101", "name": "Ada"}}}', encoding="utf-8"
    )
    for student in ("ada", "bob"):
        (out / "feedback" / student).mkdir(parents=True, exist_ok=True)
        (out / "feedback" / student / f"{NB1}.html").write_text(
            f"<p>{student}</p>", encoding="utf-8"
        )
    where, info = hand_back(COURSE, out, "toy")
    assert where == out / "handback" / "toy_feedback.zip" and info.unmatched == ["bob"]
    assert (
        zipfile.ZipFile(where).namelist()
        == [f"101__{NB1}.html"]
        == [lms_name("toy", LmsStudent(lms_id="101"), Page("ada", Path(f"{NB1}.html")))]
    )
    target, info = export_mod.export(COURSE, out, FAKE_URL, format="toy")
    with open(target, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert target == out / "toy_grades.csv" and info.written == [target]
    assert [r["user"] for r in rows] == ["101", "bob"] and all(float(r["grade"]) > 0 for r in rows)


def test_the_commands_offer_a_registered_system(toy):
    parser = cli.build_parser()
    assert (
        parser.parse_args(["grade", "SUBMISSIONS", "--out", "OUT", "--layout", "toy"]).layout
        == "toy"
    )
    assert parser.parse_args(["feedback", "OUT", "--format", "toy"]).format == "toy"
    assert parser.parse_args(["export", "OUT", "--format", "toy"]).format == "toy"
