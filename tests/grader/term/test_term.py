"""A term's intake through the real pipeline: a Canvas download and nbgrader's exchange grade to the
same rows as the same notebooks in the course's own folder layout, with the roster's ids, the
exchange's submission times against a deadline, and a roster student who sent nothing."""

from __future__ import annotations

import csv
import json
import zipfile

import nbformat
import pytest

from autograde.course import Course

from submissions import MISTAKES, build, mutate, run_grade, write

pytestmark = pytest.mark.slow
NB = "04_decode_start_gate"


def _notebooks():
    row = next(m for m in MISTAKES if m[0] == "w4_strict_deadline")
    return {"s001": build(NB), "s002": build(NB, mutate(row[2], row[3], row[4]))}


def _rows(out):
    with open(out / "grades.csv", encoding="utf-8") as handle:
        return {r["student_id"]: r for r in csv.DictReader(handle)}


def _scores(row):
    return {k: v for k, v in row.items() if k not in ("late_penalty", "final_total")}


def _grade_lms_zip(
    base, lms: str, names: dict[str, str], notebooks: dict, roster_rows: str
) -> None:
    """Grade a zip laid out as ``lms`` downloads it (each student's notebook under
    ``names[student]``) with a roster, into ``base/out_<lms>``."""
    archive = base / f"{lms}.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for student, name in names.items():
            zf.writestr(name, nbformat.writes(notebooks[student]))
    roster = base / f"{lms}_roster.csv"
    roster.write_text("student_id,lms_id,name\n" + roster_rows, encoding="utf-8")
    run_grade(archive, base / f"out_{lms}", "--roster", str(roster))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("term")
    notebooks = _notebooks()
    # the course's own layout
    for student, nb in notebooks.items():
        write(base / "folders", student, NB, nb)
    run_grade(base / "folders", base / "out_folders")
    # a Canvas download: flat files <name>_<canvas user id>_<file id>_<original name>, one of them
    # late
    canvas_names = {
        "s001": f"lovelaceada_1001_5001_{NB}.ipynb",
        "s002": f"turingalan_LATE_1002_5002_{NB}.ipynb",
    }
    roster = "s001,1001,Ada Lovelace\ns002,1002,Alan Turing\ns003,1003,Grace Hopper\n"
    _grade_lms_zip(base, "canvas", canvas_names, notebooks, roster)
    # nbgrader's exchange after `nbgrader collect`: submitted/<student>/<assignment>/, with
    # timestamp.txt
    assignment = Course.load().assignment
    times = {"s001": "2026-12-20 15:59:00.000000 UTC", "s002": "2026-12-20 17:00:00.000000 UTC"}
    for student, nb in notebooks.items():
        folder = base / "exchange" / "submitted" / student / assignment
        write(folder.parent, assignment, NB, nb)
        (folder / "timestamp.txt").write_text(times[student])
    run_grade(
        base / "exchange",
        base / "out_exchange",
        "--deadline",
        "2026-12-20T16:00:00Z",
        "--late-policy",
        "deduct:25%/hour",
    )
    # a Moodle download: a folder per participant, <Full Name>_<participant
    # id>_assignsubmission_file_
    moodle_names = {
        "s001": f"Ada Lovelace_2001_assignsubmission_file_/{NB}.ipynb",
        "s002": f"Alan Turing_2002_assignsubmission_file_/{NB}.ipynb",
    }
    _grade_lms_zip(
        base, "moodle", moodle_names, notebooks, "s001,2001,Ada Lovelace\ns002,2002,Alan Turing\n"
    )
    # any other flat naming, through a pattern with named groups
    for student, nb in notebooks.items():
        write(
            base / "pattern", ".", NB, nb, filename=f"{student}__2026-12-20T15:00:00Z__{NB}.ipynb"
        )
    pattern = r"(?P<student_id>s\d+)__(?P<timestamp>[^_]+)__(?P<file_id>.+)\.ipynb"
    run_grade(base / "pattern", base / "out_pattern", "--layout", "pattern", "--pattern", pattern)
    return {
        "base": base,
        **{
            name: _rows(base / f"out_{name}")
            for name in ("folders", "canvas", "exchange", "moodle", "pattern")
        },
    }


def test_a_canvas_download_grades_as_the_folders_do(graded):
    canvas, folders = graded["canvas"], graded["folders"]
    assert _scores(canvas["s001"]) == _scores(folders["s001"]) and _scores(
        canvas["s002"]
    ) == _scores(folders["s002"])
    # the roster's student who sent nothing has a row of zeros and missing notebooks
    assert canvas["s003"]["total"] == "0"
    log = [
        json.loads(line)
        for line in (graded["base"] / "out_canvas" / "log.jsonl").read_text().splitlines()
    ]
    assert {r["status"] for r in log if r["student_id"] == "s003"} == {"missing"}
    intake = json.loads((graded["base"] / "out_canvas" / "intake.json").read_text())
    assert (
        intake["layout"] == "canvas"
        and intake["students"]["s002"]["lms_id"] == "1002"
        and intake["missing"] == ["s003"]
    )
    assert NB in intake["late_in_lms"]["s002"]  # Canvas's LATE_ mark is kept for the instructor


def test_the_exchange_grades_as_the_folders_do_and_its_times_meet_the_deadline(graded):
    exchange, folders = graded["exchange"], graded["folders"]
    assert _scores(exchange["s001"]) == _scores(folders["s001"]) and _scores(
        exchange["s002"]
    ) == _scores(folders["s002"])
    assert float(exchange["s001"]["late_penalty"]) == 0.0  # a minute early
    # an hour late: 25% of the notebook's maximum, within its score
    assert float(exchange["s002"]["late_penalty"]) > 0.0
    assert float(exchange["s002"]["final_total"]) == pytest.approx(
        float(exchange["s002"]["total"]) - float(exchange["s002"]["late_penalty"])
    )


@pytest.mark.parametrize("layout", ["moodle", "pattern"])
def test_a_moodle_download_and_a_pattern_named_folder_grade_as_the_folders_do(graded, layout):
    for student in ("s001", "s002"):
        assert _scores(graded[layout][student]) == _scores(graded["folders"][student])


def test_canvas_feedback_is_named_for_canvas(graded):
    import subprocess
    import sys

    out = graded["base"] / "out_canvas"
    proc = subprocess.run(
        [sys.executable, "-m", "autograde", "feedback", str(out), "--format", "canvas"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(out / "handback" / "canvas_feedback.zip") as zf:
        names = sorted(zf.namelist())
    assert names == [
        f"lovelaceada_1001_5001_feedback_{NB}.html",
        f"turingalan_1002_5002_feedback_{NB}.html",
    ], names


def test_the_similarity_command_reads_a_graded_folder(graded):
    """The command on a graded class: two students, one TODO each, different answers: the page and
    the JSON are written, and nothing is flagged."""
    import subprocess
    import sys

    out = graded["base"] / "out_folders"
    proc = subprocess.run(
        [sys.executable, "-m", "autograde", "similarity", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "similarity.json").read_text(encoding="utf-8"))
    assert (out / "similarity.html").is_file() and data["threshold"] == 0.7
    assert sum(todo["pairs_above_threshold"] for todo in data["todos"]) == 0


def _export(out, *args):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "autograde", "export", str(out), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_canvas_zip_with_a_late_policy_reaches_canvas_only_with_the_instructors_word(
    graded, tmp_path
):
    """The Canvas zip again, under a deadline and a deduction, with no times CSV: Canvas's zip holds
    no times, so s001's lateness is unknown and s002's LATE_ mark says late, not how late (one hour
    costs less than its score: how late matters). The Canvas file is refused, naming both; accepting
    the least penalty takes one started hour from s002 only. The ids come from the download itself
    (no roster at export); the roster's s003, who sent nothing, has no Canvas id in it and is
    named."""
    base = graded["base"]
    out = tmp_path / "out"
    roster = base / "canvas_roster.csv"
    run_grade(
        base / "canvas.zip",
        out,
        "--roster",
        str(roster),
        "--deadline",
        "2026-12-20T16:00:00Z",
        "--late-policy",
        "deduct:5%/hour",
    )
    rows = _rows(out)
    assert rows["s001"]["late_penalty"] == "unknown" and rows["s002"]["late_penalty"] == "unknown"
    # no time, no mark: nothing taken
    assert float(rows["s001"]["final_total"]) == float(rows["s001"]["total"])
    # the mark: at least one started hour
    assert float(rows["s002"]["final_total"]) < float(rows["s002"]["total"])
    proc = _export(out, "--format", "canvas", "--assignment-id", "55")
    assert proc.returncode == 2 and "s001 (" in proc.stderr and "s002 (" in proc.stderr, proc.stderr
    proc = _export(
        out, "--format", "canvas", "--assignment-id", "55", "--late-unknown", "least-penalty"
    )
    assert proc.returncode == 2 and "s003" in proc.stderr and "Canvas user id" in proc.stderr, (
        proc.stderr
    )
    proc = _export(
        out,
        "--format",
        "canvas",
        "--assignment-id",
        "55",
        "--late-unknown",
        "least-penalty",
        "--roster",
        str(roster),
    )
    assert proc.returncode == 0, proc.stderr
    with open(out / "canvas_grades.csv", encoding="utf-8") as handle:
        canvas = {r["ID"]: r for r in csv.DictReader(handle)}
    column = f"{Course.load().assignment} (55)"
    assert float(canvas["1002"][column]) == pytest.approx(float(rows["s002"]["final_total"]))
    assert float(canvas["1001"][column]) == pytest.approx(float(rows["s001"]["total"]))
    assert all(r["SIS User ID"] == "" for r in canvas.values())
