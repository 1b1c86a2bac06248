"""A late policy through the real pipeline: the penalty in grades.csv, nbgrader's gradebook, the
feedback page, the export and the class report, at the deadline's boundaries."""

from __future__ import annotations

import csv
import datetime as dt
import html
import json
import re
from collections import Counter
from contextlib import contextmanager

import pytest

from autograde.course import Course, exercises
from autograde.grading import Options, grade_batch
from autograde.ledger.late import LateSpec, parse_policy, parse_time, penalty_points

from submissions import build, write

pytestmark = pytest.mark.slow
NB = "04_decode_start_gate"
DEADLINE = parse_time("2026-12-20T23:59:00+08:00", "test")
SUBMITTED = {
    "on_time": DEADLINE,  # to the second
    "one_second_late": DEADLINE + dt.timedelta(seconds=1),
    "ten_days_late": DEADLINE + dt.timedelta(days=10),  # past the floor
}


@contextmanager
def counting_settles():
    """Each time the late rule works a notebook's penalty out (``late.notebook_late``), by (student,
    notebook)."""
    from autograde.ledger import late

    rule, counted = late.notebook_late, Counter()

    def counting(spec, student, notebook, *args, **kwargs):
        counted[(student, notebook)] += 1
        return rule(spec, student, notebook, *args, **kwargs)

    late.notebook_late = counting
    try:
        yield counted
    finally:
        late.notebook_late = rule


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    subs = tmp_path_factory.mktemp("subs")
    out = tmp_path_factory.mktemp("out") / "out"
    for student in [*SUBMITTED, "no_time"]:
        write(subs, student, NB, build(NB))
    spec = LateSpec(
        parse_policy("deduct:10%/day,floor:20%"),
        DEADLINE,
        times={s: {NB: t} for s, t in SUBMITTED.items()},
    )
    with counting_settles() as settled:
        summary = grade_batch(
            Course.load(), subs, out, Options(workers=2, progress=False), late=spec
        )
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    return {
        "out": out,
        "rows": rows,
        "summary": summary.to_json(),
        "spec": spec,
        "subs": subs,
        "settled": settled,
    }


def test_the_penalty_is_settled_once_per_command(graded, tmp_path):
    """``grade`` works each submitted notebook's penalty out once, after the batch, on the score its
    table counts (the gradebook, the tables and the pages all take it from there), and ``export``
    once again on today's scores: never once per table or per reader."""
    from autograde.term.export import export

    assert set(graded["settled"]) == {(s, NB) for s in [*SUBMITTED, "no_time"]}
    assert set(graded["settled"].values()) == {1}, graded["settled"]
    for format in ("csv", "moodle"):
        with counting_settles() as settled:
            export(
                Course.load(),
                graded["out"],
                target=tmp_path / f"{format}.csv",
                format=format,
                late_unknown="least-penalty",
                omit_unmatched=True,
            )
        assert set(settled) == set(graded["settled"]) and set(settled.values()) == {1}, (
            format,
            settled,
        )


def _expected(rows: dict, student: str, seconds: float) -> float:
    course = Course.load()
    max_points = sum(e.points for e in exercises(course) if e.notebook == NB)
    auto = float(rows[student]["auto_total"])
    return penalty_points(parse_policy("deduct:10%/day,floor:20%"), seconds, auto, max_points)


def test_grades_csv_has_raw_penalty_and_final(graded):
    rows = graded["rows"]
    assert float(rows["on_time"]["late_penalty"]) == 0.0
    one = _expected(rows, "one_second_late", 1)
    assert one > 0 and float(rows["one_second_late"]["late_penalty"]) == pytest.approx(one)
    ten = _expected(rows, "ten_days_late", 10 * 86_400)
    assert ten > one and float(rows["ten_days_late"]["late_penalty"]) == pytest.approx(ten)
    for student in SUBMITTED:
        assert float(rows[student]["final_total"]) == pytest.approx(
            float(rows[student]["total"]) - float(rows[student]["late_penalty"])
        )
        # the raw score is untouched
        assert rows[student]["auto_total"] == rows["on_time"]["auto_total"]
    assert rows["no_time"]["late_penalty"] == "unknown"  # never on time by default
    assert [(p["student_id"], p["notebook"]) for p in graded["summary"]["late_problems"]] == [
        ("no_time", NB)
    ]


def test_the_gradebook_holds_nbgraders_late_penalty_and_time(graded):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{graded['out'] / 'gradebook.db'}") as book:
        assignment = book.assignments[0].name
        for student in SUBMITTED:
            nb = book.find_submission_notebook(NB, assignment, student)
            assert (nb.late_submission_penalty or 0.0) == pytest.approx(
                float(graded["rows"][student]["late_penalty"])
            )
            stamp = book.find_submission(assignment, student).timestamp
            assert stamp == SUBMITTED[student].astimezone(dt.UTC).replace(tzinfo=None)


def test_the_feedback_page_says_how_late_and_what_it_cost(graded):
    def page(student):
        return html.unescape(
            re.sub(
                r"<[^>]+>",
                "",
                (graded["out"] / "feedback" / student / f"{NB}.html").read_text(encoding="utf-8"),
            )
        )

    assert "hour(s) after the deadline" not in page("on_time")
    late, penalty = (
        page("one_second_late"),
        float(graded["rows"]["one_second_late"]["late_penalty"]),
    )
    assert (
        "Submitted 0.00 hour(s) after the deadline" in late
        and (f"late penalty {penalty:g} point(s)") in late
    )


def test_the_export_and_the_report_carry_the_penalty(graded):
    import json
    import subprocess
    import sys

    out = graded["out"]
    proc = subprocess.run(
        [sys.executable, "-m", "autograde", "export", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    final = {
        r["student_id"]: r for r in csv.DictReader(open(out / "final_grades.csv", encoding="utf-8"))
    }
    for student in SUBMITTED:
        assert final[student]["late_penalty"] == graded["rows"][student]["late_penalty"]
        assert float(final[student]["final_total"]) == pytest.approx(
            float(graded["rows"][student]["final_total"])
        )
    proc = subprocess.run(
        [sys.executable, "-m", "autograde", "report", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    late = json.loads((out / "report.json").read_text(encoding="utf-8"))["late"]
    assert late["late_notebooks"] == 2 and late["unknown_times"] == 1
    assert late["penalty_points"] == pytest.approx(
        sum(float(graded["rows"][s]["late_penalty"]) for s in SUBMITTED)
    )


def test_lms_exports_match_the_import_layouts(graded, tmp_path):
    """Canvas's gradebook import (its export's first columns, then 'Assignment (id)') and Moodle's
    CSV import (an identifier column and a grade column), with the LMS ids from a roster; the grade
    is the final total, after the late penalty. A student whose lateness is unknown (no_time) stops
    an LMS file until the instructor accepts the least penalty. (No real LMS import was tried
    here.)"""
    import subprocess
    import sys

    out = graded["out"]
    roster = tmp_path / "roster.csv"
    people = (
        "on_time,1001,Ada Lovelace\none_second_late,1002,Alan "
        "Turing\nten_days_late,1003,Grace Hopper\nno_time,1004,Ed Dijkstra\n"
    )
    roster.write_text("student_id,lms_id,name\n" + people, encoding="utf-8")
    for fmt, header in (
        (
            "canvas",
            ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Serving Overlap (4242)"],
        ),
        ("moodle", ["ID number", "Full name", "Email address", "Serving Overlap (4242)"]),
    ):
        command = [
            sys.executable,
            "-m",
            "autograde",
            "export",
            str(out),
            "--format",
            fmt,
            "--roster",
            str(roster),
        ]
        command += ["--column", "Serving Overlap (4242)"]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
        # its lateness is unknown
        assert proc.returncode == 2 and "no_time (" in proc.stderr, proc.stderr
        proc = subprocess.run(
            [*command, "--late-unknown", "least-penalty"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        with open(out / f"{fmt}_grades.csv", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            assert reader.fieldnames == header
            rows = list(reader)
        by_id = {r["ID" if fmt == "canvas" else "ID number"]: r for r in rows}
        late = by_id["1002" if fmt == "canvas" else "one_second_late"]
        assert float(late["Serving Overlap (4242)"]) == pytest.approx(
            float(graded["rows"]["one_second_late"]["final_total"])
        )
        if fmt == "canvas":
            assert late["Student"] == "Alan Turing" and late["SIS User ID"] == ""


def test_a_persons_score_is_in_the_penalty_of_every_table_and_the_gradebook(graded, tmp_path):
    """A person scores ten_days_late's reflections in the gradebook (as formgrader does: one in
    part, one in full): the export takes the floor's penalty from the total with them, and writes
    the same penalty into nbgrader's gradebook; grading the class again gives grades.csv and the
    feedback page's late line the same penalty, and the page shows the person's scores (its notebook
    reused, not run again)."""
    import shutil
    import subprocess
    import sys

    from nbgrader.api import Gradebook

    out = tmp_path / "out"
    shutil.copytree(graded["out"], out, ignore=shutil.ignore_patterns("*.lock"))
    (out / ".gradebook.json").unlink()  # the copy's own gradebook, not the original's
    url = f"sqlite:///{out / 'gradebook.db'}"
    course = Course.load()
    manual = [e for e in exercises(course) if e.notebook == NB and e.manual]
    given = {e.grade_id: e.points / 2 if i == 0 else e.points for i, e in enumerate(manual)}
    assert len(given) == 2, "the notebook has two reflections"
    before = (out / "feedback" / "ten_days_late" / f"{NB}.html").read_text(encoding="utf-8")
    # as graded: both wait for a person
    assert before.count("Pending: a person grades it") == len(manual)
    with Gradebook(url) as book:
        for e in manual:
            grade = book.find_grade(e.grade_id, NB, course.assignment, "ten_days_late")
            grade.manual_score, grade.needs_manual_grade = given[e.grade_id], False
        book.db.commit()
    proc = subprocess.run(
        [sys.executable, "-m", "autograde", "export", str(out), "--db-url", url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    final = {
        r["student_id"]: r for r in csv.DictReader(open(out / "final_grades.csv", encoding="utf-8"))
    }
    row = final["ten_days_late"]
    counted = float(row["auto_total"]) + sum(given.values())
    assert float(row["total"]) == pytest.approx(counted)
    max_points = sum(e.points for e in exercises(course) if e.notebook == NB)
    penalty = penalty_points(
        parse_policy("deduct:10%/day,floor:20%"), 10 * 86_400, counted, max_points
    )
    # the automatic points alone would lose less
    assert penalty > float(graded["rows"]["ten_days_late"]["late_penalty"])
    assert float(row["late_penalty"]) == pytest.approx(penalty) and float(
        row["final_total"]
    ) == pytest.approx(counted - penalty)
    with Gradebook(url) as book:
        assert book.find_submission_notebook(
            NB, course.assignment, "ten_days_late"
        ).late_submission_penalty == pytest.approx(penalty)
    summary = grade_batch(
        course,
        graded["subs"],
        out,
        Options(workers=2, progress=False, db_url=url),
        late=graded["spec"],
    )
    assert summary.notebooks_graded == len(SUBMITTED) + 1
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    assert float(rows["ten_days_late"]["late_penalty"]) == pytest.approx(penalty)
    assert float(rows["ten_days_late"]["final_total"]) == pytest.approx(float(row["final_total"]))
    written = (out / "feedback" / "ten_days_late" / f"{NB}.html").read_text(encoding="utf-8")
    page = html.unescape(re.sub(r"<[^>]+>", "", written))
    # the page's late line takes the same penalty
    assert f"late penalty {penalty:g} point(s)" in page
    log = [
        json.loads(line) for line in (out / "log.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    reused = {(r["student_id"], r["notebook"]): r.get("cached") for r in log}
    assert reused[("ten_days_late", NB)], (
        "the notebook was reused: its page was rendered again from its kept data"
    )
    for e in manual:  # the person's scores, in the page's list and in each answer's heading
        shown = f"{round(given[e.grade_id], 2)} / {round(float(e.points), 2)}"
        assert f'<a href="#{e.grade_id}">Written response</a> (Score: {shown})</li>' in written
        assert f"Score: {shown} <a" in written
    assert "Pending: a person grades it" not in page and "wait for a person" not in page
    # the heading counts them
    assert f"{NB} (Score: {round(counted, 2)} / {round(float(max_points), 2)})" in page


def _feedback(out, fmt: str):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "autograde", "feedback", str(out), "--format", fmt],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_feedback_is_handed_back_as_zips_and_for_nbgraders_exchange(graded):
    import zipfile

    out = graded["out"]
    proc = _feedback(out, "zip")
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(out / "handback" / "on_time.zip") as zf:
        assert zf.namelist() == [f"on_time/{NB}.html"]
        assert (
            zf.read(f"on_time/{NB}.html")
            == (out / "feedback" / "on_time" / f"{NB}.html").read_bytes()
        )
    proc = _feedback(out, "exchange")
    assert proc.returncode == 0, proc.stderr
    assert (
        out
        / "handback"
        / "exchange"
        / "feedback"
        / "ten_days_late"
        / Course.load().assignment
        / f"{NB}.html"
    ).is_file()
    proc = _feedback(out, "canvas")
    # these came as folders, not from Canvas
    assert proc.returncode == 2 and "came from a canvas download" in proc.stderr
