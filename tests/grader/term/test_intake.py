"""The intake: an LMS download, nbgrader's exchange or a folder of named files becomes the grader's
layout (SUBMISSIONS/<student_id>/<notebook>.ipynb) byte for byte; hostile archives are refused or
named; duplicates, late files, the roster and the timestamps are reported. Nothing is graded
here."""

from __future__ import annotations

import functools
import os
import stat
import time
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat
import pytest

from autograde.course import Course, UnusableInput
from autograde.model import MAX_NOTEBOOK_BYTES
from autograde.term.intake import (
    MARKER,
    Limits,
    Source,
    choose_layout,
    exchange_time,
    read_roster,
    read_submissions,
    zip_directory,
)

ROOT = Path(__file__).resolve().parents[3]
COURSE = Course.load(ROOT)
NOTEBOOKS = COURSE.notebooks
ASSIGNMENT = COURSE.assignment
NB1, NB2, NB3 = NOTEBOOKS[:3]
CANVAS_IDS = {"alice": ("doealice", "1001"), "bob": ("roebob", "1002")}
MOODLE_IDS = {"alice": ("Alice Doe", "501"), "bob": ("Bob Roe", "502")}


@functools.cache
def notebook(student: str, name: str, version: int = 1) -> bytes:
    """A small real notebook of the course: the release's first cells and one of the student's
    own."""
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    nb.cells = nb.cells[:3] + [
        nbformat.v4.new_code_cell(f"# {student}'s answer to {name}, version {version}", id="answer")
    ]
    return nbformat.writes(nb).encode()


# each student's notebooks: alice sent three, bob two
SENT = {"alice": (NB1, NB2, NB3), "bob": (NB1, NB3)}
EXPECTED = {
    student: {f"{name}.ipynb": notebook(student, name) for name in names}
    for student, names in SENT.items()
}


def tree(folder: Path) -> dict[str, dict[str, bytes]]:
    """{student: {file: bytes}} of a folder in the grader's layout (the intake's own marker left
    out)."""
    return {
        student.name: {f.name: f.read_bytes() for f in sorted(student.iterdir())}
        for student in sorted(folder.iterdir())
        if student.is_dir()
    }


def write_zip(path: Path, members: dict[str, bytes], dates: dict[str, tuple] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(
                zipfile.ZipInfo(name, (dates or {}).get(name, (2026, 12, 1, 10, 0, 0))),
                data,
                zipfile.ZIP_DEFLATED,
            )
    return path


def today(tmp_path: Path, name: str = "today") -> Path:
    """The same notebooks in the grader's own layout."""
    folder = tmp_path / name
    for student, files in EXPECTED.items():
        (folder / student).mkdir(parents=True)
        for name, data in files.items():
            (folder / student / name).write_bytes(data)
    return folder


def canvas_members() -> dict[str, bytes]:
    members, attachment = {}, 9000
    for student, names in SENT.items():
        slug, uid = CANVAS_IDS[student]
        for name in names:
            attachment += 1
            members[f"{slug}_{uid}_{attachment}_{name}.ipynb"] = notebook(student, name)
    return members


def roster_csv(tmp_path: Path, rows: list[tuple[str, str, str]]) -> Path:
    path = tmp_path / "roster.csv"
    path.write_text(
        "student_id,lms_id,name,email\n"
        + "".join(f"{s},{lms},{n},{s}@example.org\n" for s, lms, n in rows),
        encoding="utf-8",
    )
    return path


def intake(source: Path, tmp_path: Path, **kwargs):
    return read_submissions(source, tmp_path / "dest", NOTEBOOKS, ASSIGNMENT, **kwargs)


# -- each layout gives the same folders
# -------------------------------------------------------------------------------


def test_todays_layout_is_used_as_it_is(tmp_path):
    folder = today(tmp_path)
    result = intake(folder, tmp_path)
    assert result.layout == "folders" and result.folder == folder
    assert not (tmp_path / "dest").exists() and result.problems == []
    assert tree(folder) == EXPECTED


def test_a_zip_of_todays_layout_is_extracted(tmp_path):
    members = {
        f"submissions/{s}/{name}": data
        for s, files in EXPECTED.items()
        for name, data in files.items()
    }
    result = intake(write_zip(tmp_path / "class.zip", members), tmp_path)
    assert result.layout == "folders" and result.folder == tmp_path / "dest"
    assert tree(result.folder) == EXPECTED and (result.folder / MARKER).is_file()


def test_canvas_zip_with_a_roster(tmp_path):
    roster = roster_csv(
        tmp_path,
        [(s, uid, slug) for s, (slug, uid) in CANVAS_IDS.items()] + [("carol", "1003", "Carol")],
    )
    result = intake(write_zip(tmp_path / "canvas.zip", canvas_members()), tmp_path, roster=roster)
    assert result.layout == "canvas"
    assert tree(result.folder) == EXPECTED
    assert result.problems == [] and result.missing == ["carol"]
    assert (
        result.roster["alice"].lms_id == "1001"
        and result.roster["alice"].other["email"] == "alice@example.org"
    )
    # each file's own id: a page handed back goes under it
    attachments = {NB1: "9001", NB2: "9002", NB3: "9003"}
    assert result.students["alice"] == {
        "layout": "canvas",
        "lms_id": "1001",
        "name": "doealice",
        "submission_id": "9003",
        "attachments": attachments,
    }


def test_canvas_without_a_roster_uses_the_canvas_user_id(tmp_path):
    result = intake(write_zip(tmp_path / "canvas.zip", canvas_members()), tmp_path)
    assert tree(result.folder) == {CANVAS_IDS[s][1]: files for s, files in EXPECTED.items()}


def test_moodle_zip_both_folder_names_and_flat_files(tmp_path):
    """Moodle up to 4.0 ends the folder in "_", later ones do not; with "download in folders" off
    the files are flat."""
    members = {}
    for name in SENT["alice"]:
        members[f"Alice Doe_501_assignsubmission_file_/{name}.ipynb"] = notebook("alice", name)
    members[f"Bob Roe_502_assignsubmission_file/{NB1}.ipynb"] = notebook("bob", NB1)
    members[f"Bob Roe_502_assignsubmission_file_{NB3}.ipynb"] = notebook("bob", NB3)
    members["Bob Roe_502_assignsubmission_onlinetext/onlinetext.html"] = b"<p>hello</p>"
    roster = roster_csv(tmp_path, [(s, pid, n) for s, (n, pid) in MOODLE_IDS.items()])
    result = intake(write_zip(tmp_path / "moodle.zip", members), tmp_path, roster=roster)
    assert result.layout == "moodle"
    assert tree(result.folder) == EXPECTED
    assert [(p.student_id, p.file) for p in result.problems] == [
        ("502", "Bob Roe_502_assignsubmission_onlinetext/onlinetext.html")
    ]
    assert result.students["alice"] == {
        "layout": "moodle",
        "lms_id": "501",
        "name": "Alice Doe",
        "folder": "Alice Doe_501_assignsubmission_file_",
    }


def exchange_course(tmp_path: Path) -> Path:
    """An nbgrader course folder after `nbgrader collect`, with other folders that are not
    submissions."""
    course = tmp_path / "course"
    for student, files in EXPECTED.items():
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        (folder / "timestamp.txt").write_text("2026-12-01 10:00:00.000000 UTC")
        (folder / "submission_secret.txt").write_text("0" * 128)
        (course / "submitted" / student / "ps0").mkdir()
        (course / "submitted" / student / "ps0" / "old.ipynb").write_text("{}")
        (course / "autograded" / student / ASSIGNMENT).mkdir(parents=True)
        (course / "autograded" / student / ASSIGNMENT / f"{NB1}.ipynb").write_text("{}")
    (course / "source" / ASSIGNMENT).mkdir(parents=True)
    return course


@pytest.mark.parametrize("given", ["course", "submitted", "zip"])
def test_nbgrader_exchange_as_course_folder_submitted_folder_or_zip(tmp_path, given):
    course = exchange_course(tmp_path)
    source = {"course": course, "submitted": course / "submitted"}.get(given)
    if given == "zip":
        members = {
            str(p.relative_to(course)): p.read_bytes() for p in course.rglob("*") if p.is_file()
        }
        source = write_zip(tmp_path / "course.zip", members)
    result = intake(source, tmp_path)
    assert result.layout == "exchange"
    assert tree(result.folder) == EXPECTED
    assert result.problems == []
    assert result.times["alice"][NB1] == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    assert any("another assignment (ps0)" in note for note in result.notes)


def nbgrader_time(when: datetime) -> str:
    """A time as nbgrader submit writes it (timestamp.txt, an inbound folder's name)."""
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def just_now() -> datetime:
    """A time a few seconds ago, to the second: an inbound folder made now arrives within the
    tolerance of it."""
    return datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)


def test_nbgrader_inbound_keeps_each_students_newest_submission(tmp_path):
    inbound = tmp_path / "exchange" / "course101" / "inbound"
    now = just_now()
    for student, names in SENT.items():
        for stamp, suffix in (
            (nbgrader_time(now - timedelta(seconds=20)), "+x1"),
            (nbgrader_time(now), ""),
        ):
            folder = inbound / f"{student}+{ASSIGNMENT}+{stamp}{suffix}"
            folder.mkdir(parents=True)
            for name in names:
                (folder / f"{name}.ipynb").write_bytes(
                    notebook(student, name, version=0 if suffix else 1)
                )
    result = intake(inbound.parent, tmp_path)
    assert result.layout == "exchange" and tree(result.folder) == EXPECTED
    assert result.times["bob"][NB3] == now and result.problems == []
    assert sum("an older submission" in note for note in result.notes) == 2


def test_pattern_named_folder_through_nbgraders_collector(tmp_path):
    folder = tmp_path / "named"
    folder.mkdir()
    for student, names in SENT.items():
        for name in names:
            (folder / f"{student}__{name}__2026-12-01T1000Z.ipynb").write_bytes(
                notebook(student, name)
            )
    (folder / "notes.txt").write_text("not a notebook")
    (folder / "stray.ipynb").write_bytes(b"{}")
    pattern = r"(?P<student_id>[a-z]+)__(?P<file_id>\w+)__(?P<timestamp>[0-9TZ-]+)"
    result = intake(folder, tmp_path, pattern=pattern)
    assert result.layout == "pattern" and tree(result.folder) == EXPECTED
    assert sorted((p.file, p.problem.split(" (")[0].split(":")[0]) for p in result.problems) == [
        ("notes.txt", "not a notebook"),
        ("stray.ipynb", "does not match the pattern"),
    ]
    assert result.times["alice"][NB2] == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def test_each_layout_is_recognised_by_its_names():
    paths = {
        "canvas": [("doejane_1001_9001_01.ipynb",), ("LATE_anon_Ab3x_9002_01.ipynb",)],
        "moodle": [("Jane Doe_501_assignsubmission_file", "01.ipynb")],
        "exchange": [("jane", ASSIGNMENT, "timestamp.txt"), ("jane", ASSIGNMENT, "01.ipynb")],
        "folders": [("jane", "01.ipynb"), ("joe", "x", "01.ipynb")],
    }
    for layout, found in paths.items():
        assert choose_layout(found, ASSIGNMENT) == (layout, (), []), layout
    assert choose_layout([("download", "doejane_1001_9001_01.ipynb")], ASSIGNMENT) == (
        "canvas",
        ("download",),
        [],
    )
    assert choose_layout(
        [("wrap", "jane", "01.ipynb"), ("wrap", "joe", "01.ipynb")], ASSIGNMENT
    ) == ("folders", ("wrap",), [])
    with pytest.raises(UnusableInput, match="could not be told"):
        choose_layout([("readme.txt",)], ASSIGNMENT)


# -- duplicates, late files, roster, timestamps
# -------------------------------------------------------------------------


def test_canvas_resubmission_newest_file_wins_and_late_is_flagged(tmp_path):
    members = {
        f"doealice_1001_9001_{NB1}.ipynb": notebook("alice", NB1, version=0),
        f"doealice_LATE_1001_9007_{NB1}-1.ipynb": notebook("alice", NB1),
        f"LATE_anon_Xy12Z_9008_{NB2}.ipynb": notebook("anon", NB2),
        "doealice_1001_text.html": b"<p>typed answer</p>",
        "readme.txt": b"hello",
    }
    result = intake(write_zip(tmp_path / "canvas.zip", members), tmp_path)
    assert tree(result.folder) == {
        "1001": {f"{NB1}.ipynb": notebook("alice", NB1)},
        "anon_Xy12Z": {f"{NB2}.ipynb": notebook("anon", NB2)},
    }
    assert any(
        note.startswith(f"newest of 2 files for 1001/{NB1} kept") and "Canvas file id" in note
        for note in result.notes
    )
    assert result.late == {"1001": [NB1], "anon_Xy12Z": [NB2]}
    assert sum("marked late" in note for note in result.notes) == 2
    assert sorted((p.file, p.student_id) for p in result.problems) == [
        ("doealice_1001_text.html", "1001"),
        ("readme.txt", None),
    ]


def test_duplicates_by_date_and_by_timestamp(tmp_path):
    """In a folder zip the newer zip entry wins; with timestamps in the names the newer timestamp
    wins over a newer file date."""
    members = {
        f"alice/{NB1}.ipynb": notebook("alice", NB1, 0),
        f"alice/Copy of {NB1}.ipynb": notebook("alice", NB1),
    }
    dates = {
        f"alice/{NB1}.ipynb": (2026, 1, 1, 0, 0, 0),
        f"alice/Copy of {NB1}.ipynb": (2026, 2, 1, 0, 0, 0),
    }
    result = intake(write_zip(tmp_path / "class.zip", members, dates), tmp_path)
    assert tree(result.folder) == {"alice": {f"{NB1}.ipynb": notebook("alice", NB1)}}
    assert any(
        f"newest of 2 files for alice/{NB1} kept (alice/Copy of {NB1}.ipynb, by file date)" in note
        for note in result.notes
    )

    folder = tmp_path / "named"
    folder.mkdir()
    (folder / f"alice_{NB1}_2026-12-02T10:00:00+00:00.ipynb").write_bytes(notebook("alice", NB1))
    # written last: the newer mtime
    (folder / f"alice_{NB1}_2026-12-01T10:00:00+00:00.ipynb").write_bytes(notebook("alice", NB1, 0))
    pattern = r"(?P<student_id>[a-z]+)_(?P<file_id>\d\d_[a-z_]+?)_(?P<timestamp>[^_]+)\.ipynb"
    result = read_submissions(folder, tmp_path / "dest2", NOTEBOOKS, ASSIGNMENT, pattern=pattern)
    assert tree(result.folder) == {"alice": {f"{NB1}.ipynb": notebook("alice", NB1)}}
    assert any("by submission time" in note for note in result.notes)
    assert result.times["alice"][NB1] == datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def test_roster_missing_unknown_and_invalid_ids(tmp_path):
    members = canvas_members() | {f"x_1009_9999_{NB1}.ipynb": notebook("x", NB1)}
    roster = roster_csv(
        tmp_path,
        [
            ("alice", "1001", "Alice"),
            ("bob", "1002", "Bob"),
            ("carol", "1003", "Carol"),
            ("bad id", "1004", "B"),
        ],
    )
    result = intake(write_zip(tmp_path / "canvas.zip", members), tmp_path, roster=roster)
    # an LMS id the roster lacks is kept, and named
    assert sorted(tree(result.folder)) == ["1009", "alice", "bob"]
    assert result.missing == ["carol"]
    assert [(p.file, p.student_id) for p in result.problems] == [
        ("roster.csv:5", None),
        (f"x_1009_9999_{NB1}.ipynb", "1009"),
    ]
    assert "not on the roster" in result.problems[1].problem
    with pytest.raises(UnusableInput, match="line 5"):
        read_roster(roster)  # without a list for its problems, a bad row is an error

    folder = tmp_path / "named"
    folder.mkdir()
    (folder / f"bad!id__{NB1}.ipynb").write_bytes(notebook("x", NB1))
    result = read_submissions(
        folder,
        tmp_path / "dest2",
        NOTEBOOKS,
        ASSIGNMENT,
        pattern=r"(?P<student_id>[^_]+)__(?P<file_id>\w+)",
    )
    assert tree(result.folder) == {} and "cannot be a student id" in result.problems[0].problem


def test_roster_renames_lms_id_folders_and_lists_missing(tmp_path):
    folder = tmp_path / "today"
    for student, files in EXPECTED.items():
        (folder / CANVAS_IDS[student][1]).mkdir(parents=True)
        for name, data in files.items():
            (folder / CANVAS_IDS[student][1] / name).write_bytes(data)
    roster = roster_csv(
        tmp_path, [("alice", "1001", "A"), ("bob", "1002", "B"), ("carol", "1003", "C")]
    )
    result = intake(folder, tmp_path, roster=roster)
    assert (
        result.folder == tmp_path / "dest"
        and tree(result.folder) == EXPECTED
        and result.missing == ["carol"]
    )
    result = read_submissions(
        today(tmp_path, "named"), tmp_path / "dest3", NOTEBOOKS, ASSIGNMENT, roster=roster
    )
    # already named by student id: used as it is
    assert result.folder == tmp_path / "named" and result.missing == ["carol"]


def test_timestamps_csv_fills_the_times(tmp_path):
    stamps = tmp_path / "times.csv"
    stamps.write_text(
        "student_id,notebook,submitted_at\n"
        f"alice,{NB1},2026-12-01T11:00:00+01:00\n"
        "bob,,2026-12-02T09:30:00Z\n"
        f"alice,{NB2},2026-12-01T11:00:00\n"
        "alice,99_not_a_notebook,2026-12-01T11:00:00Z\n"
        f"dave,{NB1},2026-12-01T11:00:00Z\n"
    )
    result = intake(today(tmp_path), tmp_path, timestamps=stamps)
    assert result.folder == tmp_path / "today"  # times alone rewrite nothing
    assert result.times == {
        "alice": {NB1: datetime(2026, 12, 1, 10, 0, tzinfo=UTC)},
        "bob": {"*": datetime(2026, 12, 2, 9, 30, tzinfo=UTC)},
    }
    assert [p.file for p in result.problems] == ["times.csv:4", "times.csv:5", "times.csv:6"]
    assert "no time zone" in result.problems[0].problem


def test_exchange_times_through_nbgrader():
    assert exchange_time("2026-12-01 10:00:00.000000 UTC") == datetime(
        2026, 12, 1, 10, 0, tzinfo=UTC
    )
    assert exchange_time("2026-12-01 10:00:00.000000 -0500") == datetime(
        2026, 12, 1, 15, 0, tzinfo=UTC
    )
    assert exchange_time("2026-12-01 10:00:00 America/New_York") == datetime(
        2026, 12, 1, 15, 0, tzinfo=UTC
    )
    for bad in (
        "2026-12-01 10:00:00 NOTAZONE",
        "2026-12-01 10:00:00 /dev/zero",
        "yesterday",
        "2026-12-01 10:00:00 ../../x",
    ):
        with pytest.raises(ValueError):
            exchange_time(bad)


def test_a_bad_timestamp_file_is_named(tmp_path):
    course = exchange_course(tmp_path)
    (course / "submitted" / "bob" / ASSIGNMENT / "timestamp.txt").write_text("next tuesday")
    result = intake(course, tmp_path)
    assert "bob" not in result.times and tree(result.folder) == EXPECTED
    assert [(p.file, p.student_id) for p in result.problems] == [
        (f"bob/{ASSIGNMENT}/timestamp.txt", "bob")
    ]


def test_files_named_like_no_notebook_are_kept_for_the_grader_to_match(tmp_path):
    members = {
        f"alice/Copy of {NB1}.ipynb": notebook("alice", NB1),
        "alice/my work (final).ipynb": notebook("alice", NB2),
    }
    result = intake(write_zip(tmp_path / "class.zip", members), tmp_path)
    assert tree(result.folder) == {
        "alice": {
            f"{NB1}.ipynb": notebook("alice", NB1),
            "my_work_final.ipynb": notebook("alice", NB2),
        }
    }
    assert any("named like no notebook of the course" in note for note in result.notes)


# -- hostile input
# --------------------------------------------------------------------------------------------------


def special(name: str, mode: int, data: bytes = b"/etc/passwd") -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name, (2026, 12, 1, 10, 0, 0))
    info.create_system, info.external_attr = 3, mode << 16
    return info, data


def test_hostile_members_are_refused_and_named(tmp_path):
    good = {f"alice/{NB1}.ipynb": notebook("alice", NB1)}
    path = write_zip(tmp_path / "class.zip", good)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("../escaped.ipynb", b"{}")
        archive.writestr("/etc/cron.d/escaped.ipynb", b"{}")
        archive.writestr("C:\\Windows\\escaped.ipynb", b"{}")
        archive.writestr(*special(f"alice/{NB2}.ipynb", stat.S_IFLNK | 0o777))
        archive.writestr(*special(f"bob/{NB1}.ipynb", stat.S_IFCHR | 0o644, b""))
        archive.writestr("bob/inner.zip", (tmp_path / "class.zip").read_bytes()[:100])
    result = intake(path, tmp_path)
    assert tree(result.folder) == {"alice": {f"{NB1}.ipynb": notebook("alice", NB1)}}
    found = {p.file: (p.student_id, p.problem) for p in result.problems}
    assert "climbs out" in found["../escaped.ipynb"][1]
    assert (
        "absolute" in found["/etc/cron.d/escaped.ipynb"][1]
        and "absolute" in found["C:\\Windows\\escaped.ipynb"][1]
    )
    assert found[f"alice/{NB2}.ipynb"] == (
        "alice",
        "a symbolic link: refused (submissions must be plain files)",
    )
    assert (
        found[f"bob/{NB1}.ipynb"][0] == "bob" and "not a plain file" in found[f"bob/{NB1}.ipynb"][1]
    )
    assert (
        found["bob/inner.zip"][0] == "bob"
        and ("a zip of notebooks that cannot be opened: it is not a readable zip")
        in found["bob/inner.zip"][1]
    )
    assert not (tmp_path / "escaped.ipynb").exists() and not any(tmp_path.rglob("escaped.ipynb"))


def test_symlinks_and_pipes_in_a_folder_are_refused(tmp_path):
    folder = today(tmp_path)
    (folder / "alice" / "link.ipynb").symlink_to("/etc/passwd")
    os.mkfifo(folder / "bob" / "pipe.ipynb")
    roster = roster_csv(tmp_path, [("alice", "1001", "A"), ("bob", "b", "B")])
    # an LMS id the roster maps: the folder is rewritten, and so read file by file
    (folder / "1001").mkdir()
    result = intake(folder, tmp_path, roster=roster)
    assert tree(result.folder) == EXPECTED
    found = {p.file: p.problem for p in result.problems}
    assert (
        "symbolic link" in found["alice/link.ipynb"]
        and "not a plain file" in found["bob/pipe.ipynb"]
    )


def test_bomb_by_declared_size_costs_only_its_student(tmp_path):
    path = write_zip(
        tmp_path / "bomb.zip",
        {f"alice/{NB1}.ipynb": b"\0" * (3 << 20), f"bob/{NB1}.ipynb": notebook("bob", NB1)},
    )
    assert path.stat().st_size < 30_000
    # over alice's budget: her problem alone
    result = intake(path, tmp_path, limits=Limits(student_bytes=2 << 20))
    assert tree(result.folder) == {"bob": {f"{NB1}.ipynb": notebook("bob", NB1)}}
    [why] = [p.problem for p in result.problems if p.student_id == "alice"]
    assert "3.0 MiB" in why and "more than the 2 MiB one learner's submission may take" in why
    # under the budget, over the per-file cap: named
    result = intake(path, tmp_path / "b", limits=Limits(file_bytes=1 << 20))
    assert (
        set(tree(result.folder)) == {"bob"} and "over the 1 MB limit" in result.problems[0].problem
    )


def test_the_default_limits():
    assert (
        Limits().student_bytes == 48 << 20
        and Limits().files == 20_000
        and Limits().file_bytes == MAX_NOTEBOOK_BYTES
    )


def lying(path: Path, name: str, real: bytes, declared: int) -> Path:
    """A zip whose headers say ``name`` is ``declared`` bytes while it inflates to all of
    ``real``."""
    write_zip(path, {name: real})
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.index(signature)
        data[at + offset : at + offset + 4] = declared.to_bytes(4, "little")
    path.write_bytes(bytes(data))
    return path


def test_bomb_by_a_lying_size_header_is_stopped(tmp_path):
    """The headers declare 1,000 bytes of a member that inflates to 8 MB: no more than the declared
    size ever comes out (zipfile stops there and its CRC check fails), and the file is named, not
    written."""
    path = lying(tmp_path / "liar.zip", f"alice/{NB1}.ipynb", b"{" + b" " * (8 << 20) + b"}", 1000)
    with zipfile.ZipFile(path) as archive:
        assert archive.getinfo(f"alice/{NB1}.ipynb").file_size == 1000
    result = intake(path, tmp_path, limits=Limits(file_bytes=4096))
    assert tree(result.folder) == {}
    assert (
        result.problems[0].student_id == "alice"
        and "could not be extracted" in result.problems[0].problem
    )


@pytest.mark.parametrize("change", ["grow", "shrink", "rewrite", "replace"])
def test_a_file_changed_after_it_was_listed_is_not_copied(tmp_path, change):
    """The second guard, the one the intake itself keeps: a file that grows, shrinks, is written to
    in place (same size) or is replaced after it was listed is refused, and nothing is left where it
    was to go."""
    folder = today(tmp_path)
    path = folder / "alice" / f"{NB1}.ipynb"
    with Source(folder, Limits()) as files:
        entry = next(e for e in files.entries if e.parts == ("alice", f"{NB1}.ipynb"))
        original = path.read_bytes()
        if change == "grow":
            path.write_bytes(original + b" " * (2 << 20))
        elif change == "shrink":
            path.write_bytes(original[:100])
        elif change == "rewrite":
            # past the file clock's tick (a few ms): the same size, a new modification time
            time.sleep(0.05)
            with open(path, "r+b") as handle:
                handle.write(b" ")
        else:
            (folder / "alice" / "new.ipynb").write_bytes(original)
            os.replace(folder / "alice" / "new.ipynb", path)
        with pytest.raises(ValueError, match="not the file that was listed any more"):
            files.copy(entry, tmp_path / "out" / "x.ipynb")
    assert not (tmp_path / "out" / "x.ipynb").exists()


def test_too_many_files_is_refused_before_reading_the_directory(tmp_path):
    path = write_zip(tmp_path / "many.zip", {f"s{i}/{NB1}.ipynb": b"{}" for i in range(30)})
    assert zip_directory(path)[0] == 30
    with pytest.raises(UnusableInput, match="30 entries"):
        intake(path, tmp_path, limits=Limits(files=29))
    folder = tmp_path / "many"
    for i in range(30):
        (folder / f"s{i}").mkdir(parents=True)
    (folder / "1001").mkdir()
    # read file by file (a roster renames 1001)
    with pytest.raises(UnusableInput, match="more than 29 files"):
        intake(
            folder,
            tmp_path,
            roster=roster_csv(tmp_path, [("alice", "1001", "A")]),
            limits=Limits(folder_files=29),
        )


def test_not_a_zip_and_a_dest_of_someone_elses_files(tmp_path):
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"not a zip at all")
    with pytest.raises(UnusableInput, match="not a readable zip"):
        intake(junk, tmp_path)
    path = write_zip(tmp_path / "canvas.zip", canvas_members())
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "thesis.tex").write_text("keep me")
    with pytest.raises(UnusableInput, match="did not write"):
        intake(path, tmp_path)
    assert (tmp_path / "dest" / "thesis.tex").read_text() == "keep me"
    (tmp_path / "dest" / "thesis.tex").unlink()
    first = intake(path, tmp_path)
    (first.folder / "1001" / "stale.ipynb").write_text("{}")
    again = intake(path, tmp_path)  # an earlier intake's folder is replaced
    assert tree(again.folder) == {CANVAS_IDS[s][1]: files for s, files in EXPECTED.items()}
    with pytest.raises(UnusableInput, match="outside"):
        read_submissions(tmp_path, tmp_path / "inside", NOTEBOOKS, ASSIGNMENT, layout="canvas")


def test_the_intake_decides_each_notebook_once_and_grading_takes_it(tmp_path, monkeypatch):
    """One identity per notebook: a file named like no notebook is known at the intake by its graded
    cells, and of two files for one notebook the newest is kept, as of two files of one name;
    grading takes that decision as it is and runs no matching of its own on a download the intake
    placed."""
    from autograde import grading
    from autograde.grading import Options
    from autograde.ledger.folder import Ledger
    from autograde.matching import grade_ids

    release = (ROOT / "notebooks" / f"{NB1}.ipynb").read_bytes()
    ids = {name: grade_ids(ROOT / "solutions" / f"{name}.ipynb") for name in NOTEBOOKS}
    members = {
        f"alice/{NB1}.ipynb": release,
        "alice/my work.ipynb": release + b"\n",
        "bob/notes.ipynb": notebook("bob", NB2),
    }
    dates = {
        f"alice/{NB1}.ipynb": (2026, 1, 1, 10, 0, 0),
        "alice/my work.ipynb": (2026, 1, 2, 10, 0, 0),
        "bob/notes.ipynb": (2026, 1, 1, 10, 0, 0),
    }
    found = read_submissions(
        write_zip(tmp_path / "d.zip", members, dates),
        tmp_path / "dest",
        NOTEBOOKS,
        COURSE.assignment,
        ids_by_name=ids,
    )
    alice, bob = found.found["alice"], found.found["bob"]
    assert alice.files[NB1].read_bytes() == release + b"\n", (
        "the newest of the two files for the notebook"
    )
    assert f"my_work.ipynb matched by its graded cells → {NB1}.ipynb" in alice.notes
    assert any(
        note.startswith(f"2 files for {NB1}.ipynb; graded my_work.ipynb") for note in alice.notes
    )
    assert set(bob.files.values()) == {None} and bob.notes == [
        "ignored notes.ipynb: not a notebook of this course"
    ]
    # without the grade ids (the intake's own tests) nothing is decided: grading reads the folder
    # itself
    assert (
        read_submissions(
            write_zip(tmp_path / "e.zip", members, dates),
            tmp_path / "dest2",
            NOTEBOOKS,
            COURSE.assignment,
        ).found
        == {}
    )

    def refused(*args, **kwargs):
        raise AssertionError("grading decided a placed download's notebooks again")

    monkeypatch.setattr(grading, "match_notebooks", refused)
    (tmp_path / "out").mkdir()
    students = sorted(p for p in found.folder.iterdir() if p.is_dir())
    records, notes, todo = grading._intake(
        COURSE,
        found.folder,
        students,
        Ledger(tmp_path / "out", COURSE),
        Options(),
        "d",
        found.found,
    )
    assert [(item.notebook, item.path.name) for item in todo["alice"]] == [(NB1, "my_work.ipynb")]
    assert notes["alice"] == alice.notes and "bob" not in todo
    assert {r.notebook for r in records if r.student_id == "bob" and r.status == "missing"} == set(
        NOTEBOOKS
    )
