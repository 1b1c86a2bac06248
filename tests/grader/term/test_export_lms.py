"""One penalty, one total, on the way to the LMS: a class with a late student whose reflections a
person scored gives the same final score in grades.csv, final_grades.csv, Canvas's and Moodle's
files, nbgrader's gradebook penalty and the class report, under ``zero`` and under a deduction;
an LMS file refuses a lateness nobody knows (Canvas's LATE_ mark says late, not how late) and a
student without the LMS's id; Canvas's column carries the assignment's id; Moodle's offline grading
worksheet is read here as Moodle's importer reads it.

OUT is written by the grader's own writers (``grading._report``, ``export``, ``report``); the
gradebook is the one thing stood in for: its scores (as ``gradebook.read_book`` returns them, a
person's reflection scores included) and the penalties written back to it."""

from __future__ import annotations

import csv
import datetime as dt
import json
import re
import shutil
import subprocess

import pytest

from autograde import cli
from autograde.course import Course, UnusableInput, exercises
from autograde.ledger import gradebook
from autograde.ledger.facts import SandboxInfo
from autograde.ledger.folder import Ledger
from autograde.ledger.late import LateSpec, parse_policy, parse_time, penalty_points
from autograde.ledger.results import write_results
from autograde.term import canvas as export_mod
from autograde.term.report import build_report

COURSE = Course.load()
CELLS = exercises(COURSE)
NB = "04_decode_start_gate"
MINE = [e for e in CELLS if e.notebook == NB]
AUTO = {e.grade_id: e.points for e in MINE if not e.manual}
MANUAL = [e for e in MINE if e.manual]
MAX = sum(e.points for e in MINE)
DEADLINE = parse_time("2026-12-20T23:59:00+08:00", "test")
HOUR = dt.timedelta(hours=1)
FAKE_URL = "sqlite:///stand-in-gradebook.db"


def _record(student: str, notebook: str, edition: str = "en") -> dict:
    if notebook != NB:
        return {
            "student_id": student,
            "notebook": notebook,
            "status": "missing",
            "scores": {},
            "detail": "nothing was submitted",
        }
    manual = {e.grade_id: None for e in MANUAL}
    record = {
        "student_id": student,
        "notebook": NB,
        "status": "graded",
        "scores": dict(AUTO),
        "manual": manual,
        "ideas": {},
        "seconds": 1.0,
    }
    return record | {"edition": edition}


def _stored(scored: dict[str, bool]) -> gradebook.Book:
    """The gradebook's scores: the judge's for the automatic cells, a person's full marks on the
    reflections of each student with ``scored`` true (pending otherwise)."""
    found = {}
    for student, person in scored.items():
        per = {gid: gradebook.Grade(auto=pts) for gid, pts in AUTO.items()}
        for e in MANUAL:
            per[e.grade_id] = gradebook.Grade(
                manual=e.points if person else None, needs_manual_grade=not person
            )
        found[student] = per
    return gradebook.Book(found)


def _class(
    tmp_path,
    monkeypatch,
    policy: str,
    times: dict,
    scored: dict,
    flagged=None,
    people=None,
    editions=None,
):
    """Grade a class into OUT with the grader's own writer; returns (OUT, the penalties the
    gradebook was given)."""
    out = tmp_path / "out"
    out.mkdir()
    stored = _stored(scored)
    given: dict = {}
    monkeypatch.setattr(gradebook, "read_book", lambda url, assignment: stored)
    monkeypatch.setattr(
        gradebook, "record_penalties", lambda url, assignment, settled: given.update(settled) or 0
    )
    spec = LateSpec(parse_policy(policy), DEADLINE, times={s: {NB: t} for s, t in times.items()})
    Ledger(out).save_late_spec(spec)
    (out / "intake.json").write_text(
        json.dumps({"layout": "canvas", "students": people or {}, "late_in_lms": flagged or {}}),
        encoding="utf-8",
    )
    records = [
        _record(s, nb, (editions or {}).get(s, "en")) for s in scored for nb in COURSE.notebooks
    ]
    write_results(
        COURSE, out, CELLS, records, {}, len(scored), SandboxInfo(enabled=False), FAKE_URL, {}, spec
    )
    return out, given


def _taken(settled: dict) -> dict[str, float]:
    """Each student's penalty over their notebooks, as the gradebook was given it."""
    return {s: sum(facts.penalty for facts in found.facts.values()) for s, found in settled.items()}


def _csv(path) -> tuple[list[str], list[dict]]:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def _export(out, *args) -> int:
    return cli.main(["export", str(out), "--db-url", FAKE_URL, *args])


CANVAS_PEOPLE = {
    s: {"layout": "canvas", "lms_id": str(1000 + i), "name": s}
    for i, s in enumerate(["ada", "bob", "cal", "cy", "dee"], start=1)
}
MOODLE_ROSTER = (
    "student_id,lms_id,name,email\nada,2001,Ada L,ada@example.org\nbob,2002,Bob "
    "K,bob@example.org\ncal,2003,Cal M,cal@example.org\n"
)


@pytest.mark.parametrize("policy", ["zero", "deduct:25%/hour,floor:50%"])
def test_one_penalty_one_total_in_every_table(tmp_path, monkeypatch, policy):
    """bob is an hour late with his reflections scored by a person: the penalty is taken from the
    total the tables show (automatic + a person's), not from the automatic points alone; cal is as
    late with his reflections pending; ada is on time."""
    times = {"ada": DEADLINE, "bob": DEADLINE + HOUR, "cal": DEADLINE + HOUR}
    out, given = _class(
        tmp_path,
        monkeypatch,
        policy,
        times,
        {"ada": True, "bob": True, "cal": False},
        people=CANVAS_PEOPLE,
    )
    rule = parse_policy(policy)
    auto = sum(AUTO.values())
    expected = {
        "ada": MAX,
        "bob": MAX - penalty_points(rule, 3600, MAX, MAX),
        "cal": auto - penalty_points(rule, 3600, auto, MAX),
    }
    # the automatic-only penalty would differ: the case bites
    assert expected["bob"] != MAX - penalty_points(rule, 3600, auto, MAX)

    _, grades = _csv(out / "grades.csv")
    assert {r["student_id"]: float(r["final_total"]) for r in grades} == pytest.approx(expected)
    taken = {r["student_id"]: float(r["total"]) - expected[r["student_id"]] for r in grades}
    assert _taken(given) == pytest.approx(taken)  # the gradebook's penalty, after grading
    given.clear()

    roster = tmp_path / "roster.csv"
    roster.write_text(MOODLE_ROSTER, encoding="utf-8")
    assert _export(out) == 0
    assert _export(out, "--format", "canvas", "--assignment-id", "4242") == 0
    assert _export(out, "--format", "moodle", "--roster", str(roster)) == 0
    _, final = _csv(out / "final_grades.csv")
    _, canvas = _csv(out / "canvas_grades.csv")
    _, moodle = _csv(out / "moodle_grades.csv")
    _, sheet = _csv(out / "moodle_worksheet.csv")
    by_participant = {"2001": "ada", "2002": "bob", "2003": "cal"}
    tables = {
        "final_grades.csv": {r["student_id"]: float(r["final_total"]) for r in final},
        "canvas_grades.csv": {
            r["Student"]: float(r[f"{COURSE.assignment} (4242)"]) for r in canvas
        },
        "moodle_grades.csv": {r["ID number"]: float(r[COURSE.assignment]) for r in moodle},
        "moodle_worksheet.csv": {
            by_participant[r["Identifier"].removeprefix("Participant ")]: float(r["Grade"])
            for r in sheet
        },
    }
    for name, finals in tables.items():
        assert finals == pytest.approx(expected), name
    penalties = {r["student_id"]: float(r["total"]) - float(r["final_total"]) for r in final}
    assert _taken(given) == pytest.approx(penalties)  # the gradebook's penalty, after the export

    report = build_report(COURSE, out)
    assert report.scores.source == "final_grades.csv"
    assert report.late.penalty_points == pytest.approx(sum(penalties.values()))
    assert report.scores.final.mean == pytest.approx(round(sum(expected.values()) / 3, 3))
    assert report.editions == {"en": 3}  # from the log: final_grades.csv has no edition column


def test_an_unknown_lateness_stops_an_lms_file_until_the_instructor_says(
    tmp_path, monkeypatch, capsys
):
    """Under a deduction, dee has no submission time and Canvas marked cy LATE_ (late, not how
    late): the Canvas file is refused, naming both; --late-unknown least-penalty takes none from dee
    and one started hour from cy, and final_grades.csv says how each was decided."""
    policy = "deduct:25%/hour"
    times = {"ada": DEADLINE}
    out, _ = _class(
        tmp_path,
        monkeypatch,
        policy,
        times,
        {"ada": True, "cy": True, "dee": True},
        flagged={"cy": [NB]},
        people=CANVAS_PEOPLE,
    )
    _, grades = _csv(out / "grades.csv")
    assert {r["student_id"]: r["late_penalty"] for r in grades} == {
        "ada": "0",
        "cy": "unknown",
        "dee": "unknown",
    }

    assert _export(out, "--format", "canvas", "--assignment-id", "7") == 2
    err = capsys.readouterr().err
    assert (
        "cy (" in err
        and "dee (" in err
        and "ada" not in err
        and "marked late by the LMS" in err
        and "--late-unknown" in err
    )
    assert not (out / "canvas_grades.csv").exists()

    # the instructor's table takes the same word
    assert _export(out, "--late-unknown", "least-penalty") == 0
    _, final = _csv(out / "final_grades.csv")
    rows = {r["student_id"]: r for r in final}
    one_hour = penalty_points(parse_policy(policy), 1, MAX, MAX)
    assert (
        float(rows["cy"]["late_penalty"]) == one_hour
        and float(rows["cy"]["final_total"]) == MAX - one_hour
    )
    assert float(rows["dee"]["late_penalty"]) == 0 and float(rows["dee"]["final_total"]) == MAX
    assert (
        rows["cy"]["late_basis"] == f"{NB}=lms_flag(least)"
        and rows["dee"]["late_basis"] == f"{NB}=unknown(least)"
    )
    assert rows["ada"]["late_basis"] == f"{NB}=time"

    assert (
        _export(
            out, "--format", "canvas", "--assignment-id", "7", "--late-unknown", "least-penalty"
        )
        == 0
    )
    _, canvas = _csv(out / "canvas_grades.csv")
    assert {r["ID"]: float(r[f"{COURSE.assignment} (7)"]) for r in canvas} == {
        "1001": MAX,
        "1004": MAX - one_hour,
        "1005": MAX,
    }


def test_under_zero_the_lms_mark_decides_and_only_a_missing_time_stops_the_file(
    tmp_path, monkeypatch, capsys
):
    out, _ = _class(
        tmp_path,
        monkeypatch,
        "zero",
        {},
        {"cy": True, "dee": True},
        flagged={"cy": [NB]},
        people=CANVAS_PEOPLE,
    )
    _, grades = _csv(out / "grades.csv")
    rows = {r["student_id"]: r for r in grades}
    # late at all: nothing counts
    assert float(rows["cy"]["late_penalty"]) == MAX and float(rows["cy"]["final_total"]) == 0
    assert _export(out, "--format", "moodle") == 2
    err = capsys.readouterr().err
    assert "1 student(s) whose lateness is unknown: dee (" in err and " cy (" not in err


def test_a_late_policy_of_none_never_stops_a_file(tmp_path, monkeypatch):
    out, _ = _class(tmp_path, monkeypatch, "none", {}, {"dee": True}, people=CANVAS_PEOPLE)
    assert _export(out, "--format", "canvas", "--assignment-id", "7") == 0


def test_canvas_needs_the_assignment_id_and_every_student_id(tmp_path, monkeypatch, capsys):
    """Canvas's gradebook importer matches 'Title (123)' by id (\\A(.*)\\s\\((\\d+)\\)\\z), else by
    title, else makes a new assignment: the column carries the id or the file is refused. A student
    without a Canvas user id is named (exit 2) or left out on request; SIS User ID is never a Canvas
    id."""
    people = {
        "ada": {"layout": "canvas", "lms_id": "1001", "name": "lovelaceada"},
        "1009": {"layout": "canvas", "lms_id": "1009", "name": "x"},
    }
    out, _ = _class(
        tmp_path, monkeypatch, "none", {}, {"ada": True, "1009": True, "eve": True}, people=people
    )
    assert _export(out, "--format", "canvas") == 2
    assert "NEW assignment" in capsys.readouterr().err
    assert (
        _export(out, "--format", "canvas", "--column", "Overlap (12)", "--assignment-id", "13") == 2
    )
    # eve has no Canvas id
    assert _export(out, "--format", "canvas", "--column", "Overlap (12)") == 2
    assert "eve" in capsys.readouterr().err
    assert _export(out, "--format", "canvas", "--column", "Overlap (12)", "--omit-unmatched") == 0
    assert "eve" in capsys.readouterr().err  # named as left out
    header, rows = _csv(out / "canvas_grades.csv")
    assert header == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Overlap (12)"]
    match = re.match(r"\A(.*)\s\((\d+)\)\Z", header[-1])  # the importer's own pattern
    assert match and match[2] == "12"
    assert {r["ID"] for r in rows} == {"1001", "1009"} and all(r["ID"] for r in rows)
    # 1009 came off-roster: its Canvas id is not an SIS id
    assert all(r["SIS User ID"] == "" for r in rows)

    roster = tmp_path / "roster.csv"
    roster.write_text(
        "student_id,lms_id,name,sis_user_id,login,section\neve,1010,Eve N,S-77,eve@uni,B\n",
        encoding="utf-8",
    )
    assert _export(out, "--format", "canvas", "--assignment-id", "12", "--roster", str(roster)) == 0
    _, rows = _csv(out / "canvas_grades.csv")
    eve = next(r for r in rows if r["ID"] == "1010")
    assert (eve["Student"], eve["SIS User ID"], eve["SIS Login ID"], eve["Section"]) == (
        "Eve N",
        "S-77",
        "eve@uni",
        "B",
    )
    # eve unmatched again without the roster
    assert _export(out, "--format", "canvas", "--assignment-id", "new") == 2
    with pytest.raises(UnusableInput, match="NEW"):
        export_mod._canvas_column(COURSE, "Overlap", None)
    assert export_mod._canvas_column(COURSE, "Overlap", "new") == "Overlap"


# Moodle's offline grading worksheet importer (mod/assign/feedback/offline/importgradeslib.php and
# locallib.php), as the oracle: exact header names; Identifier, Grade and Last modified (grade)
# required; the id is what follows get_string('hiddenuser', 'assign') = "Participant "; the grade is
# skipped when empty, negative or over the assignment's maximum; a row is skipped as stale when
# Moodle's grade changed more than 60 s after the row's strtotime(Last modified (grade)); a feedback
# column at index 0 is never read (its `!empty($details['index'])`). The time is in the format
# Moodle's own worksheet has (mod/assign/gradingtable.php: userdate, strftimedaydatetime) followed
# by its zone, UTC, which strtotime reads the same on a server in any zone
# (test_php_reads_the_worksheet_time_on_any_server).
MOODLE_TIME = re.compile(
    r"\A(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), ([1-9]|[12]\d|3[01]) "
    r"(January|February|March|April|May|June|July|August|September|October|November|December) "
    r"(\d{4}), "
    r"(1[0-2]|[1-9]):([0-5]\d) (AM|PM) UTC\Z"
)


def _strtotime(text: str) -> dt.datetime:
    match = MOODLE_TIME.match(text)
    assert match, f"{text!r} is not in Moodle's date format"
    when = dt.datetime.strptime(
        f"{match[2]} {match[3]} {match[4]} {match[5]}:{match[6]} {match[7]}", "%d %B %Y %I:%M %p"
    ).replace(tzinfo=dt.UTC)
    assert when.strftime("%A") == match[1], "the weekday names the date"
    return when


def moodle_import(
    header: list[str],
    rows: list[dict],
    participants: dict[str, str],
    maximum: float,
    moodle_changed: dict[str, dt.datetime],
):
    """{student: grade} that Moodle's importer takes from the worksheet."""
    assert {"Identifier", "Grade", "Last modified (grade)"} <= set(header), (
        "the importer's required columns"
    )
    assert header.index("Feedback comments") != 0
    taken = {}
    for row in rows:
        student = participants.get(row["Identifier"][len("Participant ") :])
        if student is None:
            continue
        grade = row["Grade"]
        if grade == "" or float(grade) < 0 or float(grade) > maximum:
            continue
        modified = _strtotime(row["Last modified (grade)"])
        if student in moodle_changed and moodle_changed[student] > modified + dt.timedelta(
            seconds=60
        ):
            continue
        taken[student] = float(grade)
    return taken


def test_moodle_writes_the_offline_grading_worksheet_its_importer_reads(tmp_path, monkeypatch):
    times = {"ada": DEADLINE, "bob": DEADLINE + HOUR}
    people = {
        "ada": {"layout": "moodle", "lms_id": "31", "name": "Ada L"},
        "bob": {"layout": "moodle", "lms_id": "32", "name": "Bob K"},
    }
    out, _ = _class(
        tmp_path,
        monkeypatch,
        "deduct:25%/hour",
        times,
        {"ada": True, "bob": True},
        people=people,
        editions={"bob": "zh"},
    )
    before = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "student_id,lms_id,name,email,id_number\nada,31,Ada "
        "Lovelace,ada@example.org,U-1\nbob,32,Bob K,bob@example.org,U-2\n"
    )
    assert _export(out, "--format", "moodle", "--roster", str(roster)) == 0
    header, rows = _csv(out / "moodle_worksheet.csv")
    assert header == [
        "Identifier",
        "Full name",
        "Email address",
        "Status",
        "Grade",
        "Maximum Grade",
        "Grade can be changed",
        "Last modified (submission)",
        "Last modified (grade)",
        "Feedback comments",
    ]
    maximum = float(rows[0]["Maximum Grade"])
    assert maximum == sum(e.points for e in CELLS)
    taken = moodle_import(header, rows, {"31": "ada", "32": "bob"}, maximum, {})
    one_hour = penalty_points(parse_policy("deduct:25%/hour"), 3600, MAX, MAX)
    assert taken == {"ada": MAX, "bob": MAX - one_hour}
    # the grade's last change is this export: a grade a person changed in Moodle a minute before it
    # is overwritten, one changed after it is kept (Moodle skips the row)
    assert (
        moodle_import(
            header,
            rows,
            {"31": "ada", "32": "bob"},
            maximum,
            {"ada": before - dt.timedelta(minutes=1)},
        )
        == taken
    )
    assert "ada" not in moodle_import(
        header, rows, {"31": "ada", "32": "bob"}, maximum, {"ada": before + dt.timedelta(hours=1)}
    )
    by_id = {r["Identifier"]: r for r in rows}
    assert (
        by_id["Participant 31"]["Email address"] == "ada@example.org"
        and by_id["Participant 31"]["Full name"] == "Ada Lovelace"
    )
    assert by_id["Participant 31"]["Feedback comments"] == ""  # on time: nothing to say
    bob = by_id["Participant 32"]["Feedback comments"]
    # the page's late line, in bob's edition
    assert bob.startswith(f"{NB}: ") and f"迟交扣 {one_hour:g} 分" in bob
    assert _strtotime(by_id["Participant 32"]["Last modified (submission)"]) == (
        DEADLINE + HOUR
    ).replace(second=0)
    _, gradebook_rows = _csv(out / "moodle_grades.csv")
    # the roster's id_number, for the gradebook import
    assert {r["ID number"] for r in gradebook_rows} == {"U-1", "U-2"}


def test_moodle_names_a_student_without_a_participant_id(tmp_path, monkeypatch, capsys):
    people = {"ada": {"layout": "moodle", "lms_id": "31", "name": "Ada L"}}
    out, _ = _class(tmp_path, monkeypatch, "none", {}, {"ada": True, "zed": True}, people=people)
    assert _export(out, "--format", "moodle") == 2
    assert "zed" in capsys.readouterr().err
    assert _export(out, "--format", "moodle", "--omit-unmatched") == 0
    _, rows = _csv(out / "moodle_worksheet.csv")
    assert [r["Identifier"] for r in rows] == ["Participant 31"]


def test_a_gradebook_that_cannot_take_the_penalties_is_a_warning_not_a_lost_table(
    tmp_path, monkeypatch, capsys
):
    out, _ = _class(
        tmp_path, monkeypatch, "zero", {"bob": DEADLINE + HOUR}, {"bob": True}, people=CANVAS_PEOPLE
    )

    def read_only(url, assignment, settled):
        raise gradebook.GradebookError(
            "cannot record the late penalties in the gradebook (read-only)"
        )

    monkeypatch.setattr(gradebook, "record_penalties", read_only)
    assert _export(out) == 0
    assert "WARNING: cannot record the late penalties" in capsys.readouterr().err
    _, final = _csv(out / "final_grades.csv")
    assert float(final[0]["final_total"]) == 0.0


@pytest.mark.skipif(
    shutil.which("php") is None, reason="PHP is not installed (CI installs php-cli for this test)"
)
@pytest.mark.parametrize(
    "server_zone", ["UTC", "Asia/Shanghai", "America/Los_Angeles", "Pacific/Kiritimati"]
)
def test_php_reads_the_worksheet_time_on_any_server(server_zone):
    """The worksheet's time read by PHP's own strtotime, as Moodle's importer reads it, on a server
    in ``server_zone``: the same instant, to the minute, at any hour of the day (12 AM and 12 PM
    included)."""
    from autograde.term.moodle import moodle_time

    times = [dt.datetime(2026, 12, 2, hour, 7 * hour % 60, tzinfo=dt.UTC) for hour in range(24)]
    # another zone, past midnight UTC
    times.append(dt.datetime(2027, 2, 28, 23, 59, tzinfo=dt.timezone(dt.timedelta(hours=-10))))
    script = (
        "date_default_timezone_set($argv[1]); foreach (array_slice($argv, 2) as $t) { echo "
        'strtotime($t), "\\n"; }'
    )
    read = subprocess.run(
        ["php", "-r", script, server_zone, *map(moodle_time, times)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert [int(line) for line in read.stdout.split()] == [int(t.timestamp()) for t in times]


def test_without_its_zone_the_time_would_move_with_the_server():
    """The control for the test above: Moodle's format without the zone is read as the server's
    local time."""
    if shutil.which("php") is None:
        pytest.skip("PHP is not installed")
    read = subprocess.run(
        [
            "php",
            "-r",
            "date_default_timezone_set('Asia/Shanghai'); echo strtotime($argv[1]);",
            "Wednesday, 2 December 2026, 4:30 PM",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(read.stdout) == int(dt.datetime(2026, 12, 2, 8, 30, tzinfo=dt.UTC).timestamp())
