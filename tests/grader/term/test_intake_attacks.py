"""Attacks on the intake, each beside a control: a learner's own bytes (a name, a file, a folder, a
time) never put a notebook under another student, never switch the class's layout, never stop the
class, and whatever they cost is named in the problems and costs only that learner. The grader's
layout that comes out is compared byte for byte with what each honest student sent, which decides
their grade."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from test_intake import (
    ASSIGNMENT,
    NB1,
    NB2,
    NB3,
    NOTEBOOKS,
    intake,
    just_now,
    nbgrader_time,
    notebook,
    roster_csv,
    tree,
    write_zip,
)

from autograde.course import UnusableInput
from autograde.term.canvas import canvas_files
from autograde.term.intake import Limits, choose_layout, exchange_time, pattern_time, zip_directory

ROOT = Path(__file__).resolve().parents[3]
NB4, NB6 = NOTEBOOKS[3], NOTEBOOKS[5]


def problems_of(result, student: str | None = None) -> list[str]:
    return [p.problem for p in result.problems if student is None or p.student_id == student]


# -- 1. Canvas: a sortable name ending in _<user id of another learner>
# ------------------------------------------------


def canvas_class(attacker_files: dict[str, bytes]) -> dict[str, bytes]:
    """The victim (user 1001, "victim") sent only notebook 04; an honest bystander (1003) sent
    01."""
    return {
        f"victim_1001_7001_{NB4}.ipynb": notebook("victim", NB4),
        f"carol_1003_7002_{NB1}.ipynb": notebook("carol", NB1),
        **attacker_files,
    }


def test_canvas_a_name_ending_in_another_users_id_files_nothing_under_them(tmp_path):
    # the attacker (user 1002) set their sortable name to "lory_1001": Canvas writes
    # lory_1001_1002_<file id>_...
    attack = {
        f"lory_1001_1002_5001_{NB6}.ipynb": notebook("lory", NB6),
        f"lory_1001_1002_5002_{NB1}.ipynb": notebook("lory", NB1),
    }
    result = intake(write_zip(tmp_path / "canvas.zip", canvas_class(attack)), tmp_path)
    control = intake(write_zip(tmp_path / "control.zip", canvas_class({})), tmp_path / "c")
    got = tree(result.folder)
    # only her own notebook
    assert got["1001"] == tree(control.folder)["1001"] == {f"{NB4}.ipynb": notebook("victim", NB4)}
    assert got["1003"] == tree(control.folder)["1003"]
    # the victim's own files fix user 1001's name ("victim"), so "lory" + 1001 is not a reading: the
    # files are lory's
    assert got["1002"] == {
        f"{NB6}.ipynb": notebook("lory", NB6),
        f"{NB1}.ipynb": notebook("lory", NB1),
    }
    assert result.students["1002"]["name"] == "lory_1001"


def test_canvas_a_name_that_nothing_disambiguates_is_nobodys(tmp_path):
    # the same attacker's name mimics the victim's exactly ("lory" is the victim, user 1001): two
    # readings agree with the download; the file is a named problem, never given to the victim
    members = {
        f"lory_1001_7001_{NB4}.ipynb": notebook("victim", NB4),
        f"lory_1001_1002_5001_{NB6}.ipynb": notebook("attacker", NB6),
    }
    result = intake(write_zip(tmp_path / "canvas.zip", members), tmp_path)
    assert tree(result.folder) == {"1001": {f"{NB4}.ipynb": notebook("victim", NB4)}}
    [why] = [p for p in result.problems if p.file.startswith("lory_1001_1002")]
    assert why.student_id is None and "1001 or 1002" in why.problem and "not used" in why.problem
    # with the victim absent from the download, the same file is still nobody's
    alone = intake(
        write_zip(
            tmp_path / "alone.zip", {f"lory_1001_1002_5001_{NB6}.ipynb": notebook("attacker", NB6)}
        ),
        tmp_path / "a",
    )
    assert (
        tree(alone.folder) == {}
        and "nothing else in the download tells which" in problems_of(alone)[0]
    )


def test_canvas_readings_follow_the_download_not_the_first_digits():
    found = canvas_files([f"x_5_y_1004_9003_{NB3}.ipynb", f"ann_1005_9004_{NB1}.ipynb"])
    chosen, why = found.chosen, found.why
    assert why == {} and chosen[f"x_5_y_1004_9003_{NB3}.ipynb"].name == "x_5_y"
    # the course's own file names start with a zero, which no Canvas id has: "9004" + "01_..." is
    # the only reading
    assert chosen[f"ann_1005_9004_{NB1}.ipynb"].file == f"{NB1}.ipynb"
    # a name ending in _<digits> with no file to fix it allows two users: each file is named,
    # neither is guessed
    found = canvas_files([f"doe_2024_1001_9001_{NB1}.ipynb", f"doe_2024_1001_9002_{NB2}.ipynb"])
    chosen, why = found.chosen, found.why
    assert chosen == {} and all("1001 or 2024" in text for text in why.values())
    # a file of user 2024 under another name fixes that user: the files are user 1001's
    found = canvas_files(
        [
            f"doe_2024_1001_9001_{NB1}.ipynb",
            f"doe_2024_1001_9002_{NB2}.ipynb",
            "smith_2024_7000_notes.ipynb",
        ]
    )
    chosen, why = found.chosen, found.why
    assert why == {} and [c.user for c in chosen.values()].count("1001") == 2


# -- 2. Moodle without folders: a learner's own file name shaped like Moodle's
# ---------------------------------------------


def test_moodle_flat_the_id_is_the_second_field_never_the_learners_file_name(tmp_path):
    def moodle(attack: bool) -> dict[str, bytes]:
        members = {f"Vera Victim_1001_assignsubmission_file_{NB4}.ipynb": notebook("vera", NB4)}
        if attack:  # the attacker (participant 1002) uploads a file named like the victim's
            members[
                f"Arno Attacker_1002_assignsubmission_file_x_1001_assignsubmission_file_{NB4}.ipynb"
            ] = notebook("arno", NB4, version=9)
        return members

    result = intake(write_zip(tmp_path / "moodle.zip", moodle(True)), tmp_path)
    control = intake(write_zip(tmp_path / "control.zip", moodle(False)), tmp_path / "c")
    assert (
        tree(result.folder)["1001"]
        == tree(control.folder)["1001"]
        == {f"{NB4}.ipynb": notebook("vera", NB4)}
    )
    # the attacker's own folder
    assert list(tree(result.folder)["1002"].values()) == [notebook("arno", NB4, version=9)]


# -- 3. one learner's file cannot switch the layout
# --------------------------------------------------------------------------


def test_a_canvas_file_named_like_moodle_does_not_make_the_zip_moodle(tmp_path):
    members = {
        f"doealice_1001_9001_{NB1}.ipynb": notebook("alice", NB1),
        f"roebob_1002_9002_{NB1}.ipynb": notebook("bob", NB1),
        # carol's sortable name "x_1003._assignsubmission_file" (punctuation removed after Canvas's
        # _<digits>_ rule)
        f"x_1003_assignsubmission_file_1003_9003_{NB1}.ipynb": notebook("carol", NB1),
    }
    result = intake(write_zip(tmp_path / "canvas.zip", members), tmp_path)
    assert result.layout == "canvas" and set(tree(result.folder)) == {"1001", "1002", "1003"}
    assert tree(result.folder)["1003"] == {f"{NB1}.ipynb": notebook("carol", NB1)}


def test_an_assignment_folder_inside_one_students_folder_does_not_make_an_exchange(tmp_path):
    folder = tmp_path / "subs"
    for student in ("alice", "bob", "carol"):
        (folder / student).mkdir(parents=True)
        (folder / student / f"{NB1}.ipynb").write_bytes(notebook(student, NB1))
    (folder / "carol" / ASSIGNMENT).mkdir()
    (folder / "carol" / ASSIGNMENT / "timestamp.txt").write_text("2026-12-01 10:00:00.000000 UTC")
    result = intake(folder, tmp_path)
    # used as it is: everyone's folder is read
    assert result.layout == "folders" and result.folder == folder
    moodle = {
        f"{n}_{i}_assignsubmission_file/{NB1}.ipynb": notebook(n, NB1)
        for i, n in ((501, "Ann"), (502, "Ben"))
    }
    moodle[f"Ben_502_assignsubmission_file/{ASSIGNMENT}/timestamp.txt"] = (
        b"2026-12-01 10:00:00.000000 UTC"
    )
    result = intake(write_zip(tmp_path / "moodle.zip", moodle), tmp_path / "m")
    assert result.layout == "moodle" and set(tree(result.folder)) == {"501", "502"}


def test_names_that_split_with_no_majority_stop_with_the_entries_and_layout():
    with pytest.raises(UnusableInput, match="--layout") as raised:
        choose_layout(
            [(f"doealice_1001_9001_{NB1}.ipynb",), (f"Ann_501_assignsubmission_file_{NB1}.ipynb",)],
            ASSIGNMENT,
        )
    assert "canvas 1" in str(raised.value) and "moodle 1" in str(raised.value)
    # a majority reads the odd entry under its own layout (a named problem there), and says so
    paths = [(f"s{i}+{ASSIGNMENT}+2026-12-01 10:00:00 UTC+r", "a.ipynb") for i in range(3)] + [
        ("Ann_501_assignsubmission_file", "a.ipynb")
    ]
    assert choose_layout(paths, ASSIGNMENT) == ("exchange", (), ["Ann_501_assignsubmission_file"])


# -- 4. a folder named submitted inside the writable inbound/
# ----------------------------------------------------------------


def inbound_class(tmp_path: Path, extra=lambda inbound, now: None) -> Path:
    """alice and bob submitted just now (their folders are made within seconds of the time they
    give); ``extra(inbound, now)`` adds the attack."""
    inbound = tmp_path / "exchange" / "course101" / "inbound"
    now = just_now()
    for student in ("alice", "bob"):
        folder = inbound / f"{student}+{ASSIGNMENT}+{nbgrader_time(now)}+r{student}"
        folder.mkdir(parents=True)
        (folder / f"{NB1}.ipynb").write_bytes(notebook(student, NB1))
        (folder / "timestamp.txt").write_text(nbgrader_time(now))
    extra(inbound, now)
    return inbound


@pytest.mark.parametrize("layout", [None, "exchange"])
@pytest.mark.parametrize("given", ["inbound", "course"])
def test_a_folder_named_submitted_in_inbound_reads_nobody_in_anyones_place(tmp_path, given, layout):
    # mallory makes inbound/submitted/alice/<assignment>/ and her own submission
    def plant(inbound: Path, now: datetime) -> None:
        fake = inbound / "submitted" / "alice" / ASSIGNMENT
        fake.mkdir(parents=True)
        (fake / f"{NB1}.ipynb").write_bytes(notebook("mallory", NB1))
        (inbound / "alice" / ASSIGNMENT).mkdir(parents=True)
        (inbound / "alice" / ASSIGNMENT / f"{NB2}.ipynb").write_bytes(notebook("mallory", NB2))

    inbound = inbound_class(tmp_path, plant)
    control = inbound_class(tmp_path / "c")
    pick = (lambda i: i) if given == "inbound" else (lambda i: i.parent)
    result = intake(pick(inbound), tmp_path, layout=layout)
    expected = intake(pick(control), tmp_path / "c", layout=layout)
    assert (
        tree(result.folder)
        == tree(expected.folder)
        == {s: {f"{NB1}.ipynb": notebook(s, NB1)} for s in ("alice", "bob")}
    )
    assert {p.file.split("/")[0] for p in result.problems} == {"submitted", "alice"}


# -- 5. times out of range
# -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["9999-12-31 23:59:59 -14:00", "9999-12-31 23:59:59.999999 -1400"])
def test_a_time_out_of_range_is_a_problem_never_an_exception(tmp_path, text):
    for wrong in (text, "0001-01-01 00:00:00 +14:00"):
        with pytest.raises(ValueError, match="not a time"):
            exchange_time(wrong)
    with pytest.raises(ValueError, match="not a time UTC can hold"):
        pattern_time("0001-01-01T00:00:00+14:00")

    # the time in eve's folder name and in her timestamp.txt
    def bad(inbound: Path, now: datetime) -> None:
        folder = inbound / f"eve+{ASSIGNMENT}+{text}+r"
        folder.mkdir()
        (folder / f"{NB1}.ipynb").write_bytes(notebook("eve", NB1))
        (folder / "timestamp.txt").write_text(text)

    result = intake(inbound_class(tmp_path, bad), tmp_path)
    assert set(tree(result.folder)) == {"alice", "bob", "eve"}
    alice = next((tmp_path / "exchange" / "course101" / "inbound").glob("alice+*"))
    # her own time: it agrees with her arrival
    assert result.times["alice"][NB1] == exchange_time((alice / "timestamp.txt").read_text())
    assert len(problems_of(result, "eve")) == 2  # its timestamp.txt and its folder's name
    # neither time eve wrote can be read: her time is when her submission arrived (a change time:
    # now)
    assert abs(result.times["eve"][NB1] - datetime.now(UTC)) < timedelta(minutes=1)
    inbound = tmp_path / "exchange" / "course101" / "inbound"
    zipped = write_zip(
        tmp_path / "inbound.zip",
        {
            str(p.relative_to(inbound.parent)): p.read_bytes()
            for p in inbound.rglob("*")
            if p.is_file()
        },
    )
    from_zip = intake(zipped, tmp_path / "z")
    # a zip carries no arrival: not known
    assert set(tree(from_zip.folder)) == {"alice", "bob", "eve"} and "eve" not in from_zip.times


def test_the_instructors_deadline_out_of_range_exits_2_with_a_message(tmp_path):
    subs = tmp_path / "subs" / "alice"
    subs.mkdir(parents=True)
    (subs / f"{NB1}.ipynb").write_bytes(notebook("alice", NB1))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograde",
            "grade",
            str(subs.parent),
            "--out",
            str(tmp_path / "out"),
            "--deadline",
            "0001-01-01T00:00:00+14:00",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        run.returncode == 2
        and "Traceback" not in run.stderr
        and ("outside the times UTC can hold") in run.stderr + run.stdout
    )


# -- 6. one learner's many files cost only that learner
# ------------------------------------------------------------------------


def test_a_crowded_inbound_folder_costs_only_its_owner(tmp_path):
    def crowd(inbound: Path, now: datetime) -> None:
        folder = inbound / f"eve+{ASSIGNMENT}+{nbgrader_time(now)}+r"
        folder.mkdir()
        for i in range(60):
            (folder / f"junk{i}.txt").write_text("x")

    limits = Limits(per_folder=50)  # the same rule as the default 1,000, on a smaller folder
    result = intake(inbound_class(tmp_path, crowd), tmp_path, limits=limits)
    assert set(tree(result.folder)) == {"alice", "bob"}
    assert any(
        "more files and folders than one student's folder may hold" in p
        for p in problems_of(result, "eve")
    )
    # zips too: one top-level folder over the cap is refused alone
    members = {f"eve/junk{i}.txt": b"x" for i in range(60)} | {
        f"alice/{NB1}.ipynb": notebook("alice", NB1)
    }
    zipped = intake(write_zip(tmp_path / "crowd.zip", members), tmp_path / "z", limits=limits)
    assert set(tree(zipped.folder)) == {"alice"} and problems_of(zipped, "eve")
    assert Limits().per_folder == 1_000 and Limits().folder_files == 200_000


# -- 7. the exchange: collect's order, and folders owned by someone else
# ------------------------------------------------------


def test_inbound_newest_is_by_the_folder_names_time_not_the_learners_timestamp_file(tmp_path):
    def two(inbound: Path, now: datetime) -> None:
        early = inbound / f"eve+{ASSIGNMENT}+{nbgrader_time(now - timedelta(seconds=30))}+a"
        late = inbound / f"eve+{ASSIGNMENT}+{nbgrader_time(now)}+b"
        for folder, version, stamp in (
            (early, 0, "2030-01-01 00:00:00.000000 UTC"),
            (late, 1, nbgrader_time(now)),
        ):
            folder.mkdir()
            (folder / f"{NB1}.ipynb").write_bytes(notebook("eve", NB1, version=version))
            # the older one claims a later time in its own file
            (folder / "timestamp.txt").write_text(stamp)

    result = intake(inbound_class(tmp_path, two), tmp_path)
    assert tree(result.folder)["eve"] == {f"{NB1}.ipynb": notebook("eve", NB1, version=1)}
    assert any("as nbgrader collect keeps it" in note for note in result.notes)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another uid needs root")
def test_an_inbound_folder_owned_by_someone_else_is_not_taken_without_the_instructors_word(
    tmp_path,
):
    # a folder claiming to be bob's, owned by another account
    def forge(inbound: Path, now: datetime) -> None:
        folder = inbound / f"bob+{ASSIGNMENT}+{nbgrader_time(now + timedelta(seconds=10))}+forged"
        folder.mkdir()
        (folder / f"{NB1}.ipynb").write_bytes(notebook("mallory", NB1))
        os.chown(folder, 4242, 4242)

    inbound = inbound_class(tmp_path, forge)
    result = intake(inbound, tmp_path)
    # his own, older, submission
    assert tree(result.folder)["bob"] == {f"{NB1}.ipynb": notebook("bob", NB1)}
    assert any(
        "is owned by uid 4242" in p and "--trust-owners" in p for p in problems_of(result, "bob")
    )
    trusted = intake(inbound, tmp_path / "t", trust_owners=True)
    assert tree(trusted.folder)["bob"] == {f"{NB1}.ipynb": notebook("mallory", NB1)}


# -- 9. a zip whose end record hides its directory's size
# -----------------------------------------------------------------------


def test_the_zip_limits_read_the_directory_the_zip_library_reads(tmp_path):
    path = write_zip(tmp_path / "many.zip", {f"s{i}/{NB1}.ipynb": b"{}" for i in range(40)})
    data = bytearray(path.read_bytes())
    end = len(data) - 22
    assert data[end : end + 4] == b"PK\x05\x06"
    # the end record's own offset field made to read "PK\x05\x06": a search for the last such bytes
    # finds that one (22 bytes would run past the file's end), while ZipFile reads the record where
    # it is and lists every entry
    data[end + 16 : end + 20] = b"PK\x05\x06"
    path.write_bytes(bytes(data))
    assert len(zipfile.ZipFile(path).infolist()) == 40
    assert zip_directory(path)[0] == 40
    with pytest.raises(UnusableInput, match="40 entries"):
        intake(path, tmp_path, limits=Limits(files=39))


# -- minor: what the Moodle hand-back names, read as Moodle's feedback importer reads it
# --------------------------------------


def moodle_participant(path: str) -> str | None:
    """feedback/file/importziplib.php: the first path part split on "_" (at most 5 parts), the id
    second."""
    for part in path.split("/"):
        info = part.split("_", 4)
        if (
            len(info) >= 4
            and info[1].isdigit()
            and (info[2], info[3]) == ("assignsubmission", "file")
        ):
            return info[1]
    return None


@pytest.mark.parametrize("name", ["Ada Lovelace", "Ann_Lee", "..\\..\\evil", "../../x"])
def test_moodle_handback_names_reach_their_participant(name):
    from autograde.ledger.facts import LmsStudent
    from autograde.ledger.folder import Page
    from autograde.term.handback import lms_name as _lms_name

    for folder in ("", f"{name}_501_assignsubmission_file"):
        path = _lms_name(
            "moodle", LmsStudent("moodle", "501", name, folder=folder), Page("s", Path("01.html"))
        )
        assert moodle_participant(path) == "501", path
        assert ".." not in path.split("/") and "\\" not in path and path.endswith("/01.html")


# -- an instructor's roster or extensions keyed by the wrong id stop the run instead of zeroing the
# class --------------------


def test_a_roster_of_the_wrong_ids_stops_with_the_id_the_download_uses(tmp_path):
    members = {
        f"{n}_{i}_assignsubmission_file/{NB1}.ipynb": notebook(n, NB1)
        for i, n in ((501, "Ann"), (502, "Ben"), (503, "Cy"))
    }
    zipped = write_zip(tmp_path / "moodle.zip", members)
    by_user_id = roster_csv(
        tmp_path, [("ann", "9001", "Ann"), ("ben", "9002", "Ben"), ("cy", "9003", "Cy")]
    )
    with pytest.raises(UnusableInput, match="matches 0 of the 3 students.*participant id"):
        intake(zipped, tmp_path, roster=by_user_id)
    right = roster_csv(
        tmp_path, [("ann", "501", "Ann"), ("ben", "502", "Ben"), ("cy", "503", "Cy")]
    )
    assert set(tree(intake(zipped, tmp_path, roster=right).folder)) == {"ann", "ben", "cy"}


def test_extensions_keyed_by_lms_id_stop_the_run(tmp_path):
    members = {
        f"{n}_{i}_assignsubmission_file/{NB1}.ipynb": notebook(n, NB1)
        for i, n in ((501, "Ann"), (502, "Ben"))
    }
    (tmp_path / "ext.csv").write_text("student_id,deadline\n501,2026-12-30T00:00:00+00:00\n")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograde",
            "grade",
            str(write_zip(tmp_path / "m.zip", members)),
            "--out",
            str(tmp_path / "out"),
        ]
        + ["--roster", str(roster_csv(tmp_path, [("ann", "501", "Ann"), ("ben", "502", "Ben")]))]
        + ["--deadline", "2026-12-20T00:00:00+00:00", "--extensions", str(tmp_path / "ext.csv")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "501 (the LMS id of ann)" in run.stderr + run.stdout, run.stderr


# -- a student who uploads one zip of their notebooks
# ---------------------------------------------------------------------------


def test_a_students_zip_of_notebooks_is_unpacked_with_the_lms_zips_limits(tmp_path):
    inner = write_zip(
        tmp_path / "mine.zip",
        {f"work/{NB1}.ipynb": notebook("alice", NB1), f"{NB2}.ipynb": notebook("alice", NB2)},
    )
    nested = write_zip(
        tmp_path / "nested.zip", {"again.zip": inner.read_bytes(), "../up.ipynb": b"{}"}
    )
    members = {
        "doealice_1001_9001_mine.zip": inner.read_bytes(),
        f"roebob_1002_9002_{NB1}.ipynb": notebook("bob", NB1),
        "roebob_1002_9003_nested.zip": nested.read_bytes(),
    }
    result = intake(write_zip(tmp_path / "canvas.zip", members), tmp_path)
    assert tree(result.folder) == {
        "1001": {f"{NB1}.ipynb": notebook("alice", NB1), f"{NB2}.ipynb": notebook("alice", NB2)},
        "1002": {f"{NB1}.ipynb": notebook("bob", NB1)},
    }
    bob = dict((p.file, p.problem) for p in result.problems if p.student_id == "1002")
    assert bob == {
        "roebob_1002_9003_nested.zip/again.zip": "a zip inside a zip: not opened",
        "roebob_1002_9003_nested.zip/../up.ipynb": "a path that climbs out of the archive (..): "
        "refused",
    }
    many = write_zip(tmp_path / "many.zip", {f"n{i}.ipynb": b"{}" for i in range(30)})
    result = intake(
        write_zip(tmp_path / "c2.zip", {"doealice_1001_9001_many.zip": many.read_bytes()}),
        tmp_path / "b",
        limits=Limits(files=29),
    )
    assert tree(result.folder) == {} and "30 entries" in problems_of(result, "1001")[0]
