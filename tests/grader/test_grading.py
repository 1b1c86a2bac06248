"""The grading pipeline, end to end, on real submissions built from the release notebooks:
fair answers keep full marks, each wrong answer loses its own TODO's points and only those,
every kind of broken submission still gets a row, nothing leaks, runs resume and agree."""

import csv
import html
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from autograde.course import Course
from autograde.publish.leaks import secret_lines

from hostile import grade_leaving_nothing
from submissions import (
    GRADED_MISTAKES,
    MISTAKES,
    NOTEBOOKS,
    SOLUTIONS,
    answer,
    build,
    drop_cell,
    insert_after,
    mutate,
    run_grade,
    solution_ids,
    write,
)

pytestmark = pytest.mark.slow

POINTS = {
    "todo0_check_overlap": 3,
    "todo1_exposed_interval": 3,
    "todo2_estimate_handoff": 3,
    "todo3_validate_state": 3,
    "todo4_plan_decode": 2,
    "todo5_decide_overlap": 2,
    "todo6_stream_layers": 3,
    "todo7_handoff_step": 3,
    "todo8_ttft_percentiles": 2,
}
NB_OF = {
    "todo0_check_overlap": NOTEBOOKS[0],
    "todo1_exposed_interval": NOTEBOOKS[1],
    "todo2_estimate_handoff": NOTEBOOKS[1],
    "todo3_validate_state": NOTEBOOKS[2],
    "todo4_plan_decode": NOTEBOOKS[3],
    "todo5_decide_overlap": NOTEBOOKS[4],
    "todo6_stream_layers": NOTEBOOKS[5],
    "todo7_handoff_step": NOTEBOOKS[5],
    "todo8_ttft_percentiles": NOTEBOOKS[5],
}
# automatic points; the reflections add one point per answer, graded by a person
FULL = sum(POINTS.values())
MANUAL = [
    c.metadata["nbgrader"]["grade_id"]
    for n in NOTEBOOKS
    for c in nbformat.read(SOLUTIONS / f"{n}.ipynb", 4).cells
    if c.metadata.get("nbgrader", {}).get("grade") and c.metadata["nbgrader"].get("solution")
]  # reflections, 1 point each

# The plausible wrong answers graded through the whole pipeline (the full list, with the ideas each
# must lose, is tests/submissions.py's MISTAKES; tests/grader/judging/test_idea_isolation.py checks
# every one in-process).
WRONG = [m for m in MISTAKES if m[0] in GRADED_MISTAKES]


def read_grades(out: Path) -> dict[str, dict[str, float]]:
    with open(out / "grades.csv", encoding="utf-8") as handle:
        return {
            row["student_id"]: {
                k: (v if v == "pending" or k == "edition" else float(v))
                for k, v in row.items()
                if k != "student_id"
            }
            for row in csv.DictReader(handle)
        }


def full_student(subs: Path, student: str) -> None:
    for name in NOTEBOOKS:
        write(subs, student, name, build(name))


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """One class with every kind of submission, graded once with 2 workers."""
    subs = tmp_path_factory.mktemp("class") / "submissions"
    out = subs.parent / "out"
    full_student(subs, "20230001")  # numeric id, all correct
    for name in NOTEBOOKS:
        write(subs, "untouched", name, build(name, fill=False))
    for student, cell, solution, old, new, _ in WRONG:
        name = NB_OF[cell]
        write(subs, student, name, build(name, mutate(solution, old, new)))
    # one wrong TODO in an otherwise complete submission: loses exactly that TODO
    full_student(subs, "w3_complete")
    write(subs, "w3_complete", NOTEBOOKS[2], build(NOTEBOOKS[2], mutate(*WRONG[7][2:5])))
    # an endless loop in its own cell: interrupted at the cell timeout, the rest graded
    write(
        subs,
        "loop",
        NOTEBOOKS[0],
        insert_after(build(NOTEBOOKS[0]), "todo0_solution", "while True:\n    pass"),
    )
    write(subs, "loop", NOTEBOOKS[2], build(NOTEBOOKS[2]))
    # a loop that ignores SIGINT: that notebook is stopped, the others graded
    write(
        subs,
        "sigint",
        NOTEBOOKS[1],
        insert_after(
            build(NOTEBOOKS[1]),
            "todo1_solution",
            "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile "
            "True:\n    time.sleep(0.01)",
        ),
    )
    write(subs, "sigint", NOTEBOOKS[0], build(NOTEBOOKS[0]))
    # kernels that die: os._exit and a segfault
    write(
        subs,
        "exits",
        NOTEBOOKS[2],
        insert_after(build(NOTEBOOKS[2]), "todo3_solution", "import os\nos._exit(1)"),
    )
    write(subs, "exits", NOTEBOOKS[3], build(NOTEBOOKS[3]))
    write(
        subs,
        "segfault",
        NOTEBOOKS[3],
        insert_after(build(NOTEBOOKS[3]), "todo4_solution", "import ctypes\nctypes.string_at(0)"),
    )
    write(subs, "segfault", NOTEBOOKS[4], build(NOTEBOOKS[4]))
    # a syntax error in TODO 2 only
    broken = answer("todo2_solution").replace("bytes_per_ms =", "bytes_per_ms ==(")
    write(subs, "syntax", NOTEBOOKS[1], build(NOTEBOOKS[1], {"todo2_solution": broken}))
    # renamed by platforms, and a stray extra copy
    write(
        subs, "renamed", NOTEBOOKS[1], build(NOTEBOOKS[1]), filename=f"Copy of {NOTEBOOKS[1]}.ipynb"
    )
    write(subs, "renamed", NOTEBOOKS[2], build(NOTEBOOKS[2]), filename=f"{NOTEBOOKS[2]} (1).ipynb")
    write(subs, "renamed", NOTEBOOKS[3], build(NOTEBOOKS[3]), filename="my work.ipynb")
    # tampering: a weakened test cell with a wrong answer; a deleted test cell with a wrong answer;
    # a deleted test cell with a right answer
    weak = build(NOTEBOOKS[2], mutate(*WRONG[6][2:5]))
    for cell in weak.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "todo3_validate_state":
            cell.source = "pass"
    write(subs, "tamper", NOTEBOOKS[2], weak)
    write(
        subs,
        "tamper",
        NOTEBOOKS[3],
        drop_cell(build(NOTEBOOKS[3], mutate(*WRONG[8][2:5])), "todo4_plan_decode"),
    )
    write(subs, "deleted_ok", NOTEBOOKS[3], drop_cell(build(NOTEBOOKS[3]), "todo4_plan_decode"))
    # a correct answer that writes warnings and prints to stderr
    noisy = answer("todo3_solution").replace(
        "    required = [",
        "    import sys, warnings\n    warnings.warn('noisy answer')\n    "
        "print('debug', file=sys.stderr)\n    required = [",
    )
    write(subs, "stderr", NOTEBOOKS[2], build(NOTEBOOKS[2], {"todo3_solution": noisy}))
    # one kernel serves a student's notebooks: names never carry over; a thread or a process left
    # running gets the next notebook a fresh kernel
    write(
        subs,
        "leaky",
        NOTEBOOKS[0],
        insert_after(
            build(NOTEBOOKS[0]),
            "todo0_solution",
            "LEAKED = 1\nimport threading, time\nthreading.Thread(target=time.sleep, "
            "args=(600,), daemon=True).start()",
        ),
    )
    write(
        subs,
        "leaky",
        NOTEBOOKS[1],
        insert_after(
            build(NOTEBOOKS[1]),
            "todo1_solution",
            "print('names from notebook 01:', 'LEAKED' in globals())\nimport "
            "subprocess\nsubprocess.Popen(['sleep', '600'])",
        ),
    )
    write(
        subs,
        "leaky",
        NOTEBOOKS[2],
        insert_after(
            build(NOTEBOOKS[2]),
            "todo3_solution",
            "get_ipython().events.register('post_run_cell', "
            "lambda result: print('10 / 10 "
            "points'))",
        ),
    )
    # a hook disguised as a library's outlives the reset and kills the kernel in the next notebook:
    # that notebook runs again in a fresh kernel
    write(
        subs,
        "saboteur",
        NOTEBOOKS[0],
        insert_after(
            build(NOTEBOOKS[0]),
            "todo0_solution",
            "import os\ndef trap(info):\n    if 'exposed_interval(' in info.raw_cell:\n   "
            "     os._exit(1)\n"
            "trap.__module__ = 'matplotlib'\nget_ipython().events.register('pre_run_cell', trap)",
        ),
    )
    write(subs, "saboteur", NOTEBOOKS[1], build(NOTEBOOKS[1]))
    # a patched course module that fakes the public checks does not reach the next notebook's page
    write(
        subs,
        "patcher",
        NOTEBOOKS[0],
        insert_after(
            build(NOTEBOOKS[0]),
            "todo0_solution",
            "import tools.checks as checks\nclass Fake:\n    def __init__(self, *args, "
            "**kwargs): pass\n"
            "    def __getattr__(self, name): return lambda *args, **kwargs: print('all "
            "checks passed')\n"
            "checks.PublicChecks = Fake",
        ),
    )
    write(subs, "patcher", NOTEBOOKS[1], build(NOTEBOOKS[1], mutate(*WRONG[2][2:5])))
    # a patched course module kills the next notebook's kernel and the judge's runner: both run it
    # again
    write(
        subs,
        "saboteur2",
        NOTEBOOKS[0],
        insert_after(
            build(NOTEBOOKS[0]),
            "todo0_solution",
            "import os, tools.notebook_runtime as runtime\nruntime.course_setup = lambda "
            "*args, **kwargs: os._exit(1)",
        ),
    )
    write(subs, "saboteur2", NOTEBOOKS[1], build(NOTEBOOKS[1]))
    write(subs, "leaky", NOTEBOOKS[3], build(NOTEBOOKS[3]))
    # not a notebook at all
    (subs / "garbage").mkdir()
    (subs / "garbage" / f"{NOTEBOOKS[0]}.ipynb").write_text("this is not json")
    proc = run_grade(
        subs, out, "--workers", "2", "--cell-timeout", "10", "--notebook-timeout", "60"
    )
    return {
        "subs": subs,
        "out": out,
        "grades": read_grades(out),
        "stdout": proc.stdout,
        "summary": json.loads((out / "summary.json").read_text()),
        "log": [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()],
    }


def test_grades_csv_has_the_promised_columns(batch):
    header = (batch["out"] / "grades.csv").read_text().splitlines()[0].split(",")
    assert header == [
        "student_id",
        *POINTS,
        *MANUAL,
        "auto_total",
        "total",
        "max_total",
        "pending",
        "needs_review",
        "late_penalty",
        "final_total",
        "edition",
    ]
    assert all(row["max_total"] == FULL + len(MANUAL) for row in batch["grades"].values())
    # the edition each student wrote in: English here (a student with no readable notebook has none)
    assert {row["edition"] for row in batch["grades"].values()} <= {"en", ""}
    assert batch["grades"]["20230001"]["edition"] == "en"


def test_a_row_for_every_student(batch):
    students = {p.name for p in batch["subs"].iterdir() if p.is_dir()}
    assert set(batch["grades"]) == students


def test_full_marks_and_zero(batch):
    assert batch["grades"]["20230001"]["total"] == FULL, batch["grades"]["20230001"]
    assert batch["grades"]["20230001"]["pending"] == len(MANUAL), (
        "written answers wait for a person"
    )
    assert (
        batch["grades"]["untouched"]["total"] == 0 and batch["grades"]["untouched"]["pending"] == 0
    )


def _ideas(batch, student: str, cell: str) -> list[dict]:
    return next(
        r["ideas"][cell]
        for r in batch["log"]
        if r["student_id"] == student and cell in r.get("ideas", {})
    )


@pytest.mark.parametrize("student,cell,failing", [(w[0], w[1], w[5]) for w in WRONG])
def test_a_wrong_answer_loses_the_points_of_the_ideas_it_breaks(batch, student, cell, failing):
    row = batch["grades"][student]
    ideas = _ideas(batch, student, cell)
    assert {i["id"] for i in ideas if i["status"] != "passed"} == failing
    lost = sum(i["points"] for i in ideas if i["id"] in failing)
    assert 0 < lost < POINTS[cell]
    assert row[cell] == POINTS[cell] - lost, (
        f"{student}: expected {POINTS[cell] - lost} on {cell}, got {row[cell]}"
    )
    for other, notebook in NB_OF.items():
        if other != cell and notebook == NB_OF[cell]:
            assert row[other] == POINTS[other], (
                f"{student}: {other} in the same notebook must keep its points"
            )


def test_one_wrong_todo_in_a_full_submission(batch):
    row = batch["grades"]["w3_complete"]
    assert (
        row["todo3_validate_state"]
        == batch["grades"]["w3_version_only"]["todo3_validate_state"]
        < 3
    )
    assert row["total"] == FULL - (3 - row["todo3_validate_state"])


def test_endless_loop_is_interrupted_and_the_rest_graded(batch):
    row = batch["grades"]["loop"]
    assert row["todo0_check_overlap"] == 3 and row["todo3_validate_state"] == 3


def test_sigint_ignoring_loop_costs_only_its_notebook(batch):
    row = batch["grades"]["sigint"]
    assert row["todo0_check_overlap"] == 3
    assert row["todo1_exposed_interval"] == 0 and row["todo2_estimate_handoff"] == 0
    problem = [
        p
        for p in batch["summary"]["problems"]
        if p["student_id"] == "sigint" and p["notebook"] == NOTEBOOKS[1]
    ]
    assert problem and problem[0]["status"] == "timeout"


def test_dead_kernels_are_reported_and_other_notebooks_graded(batch):
    assert batch["grades"]["exits"]["todo4_plan_decode"] == 2
    assert batch["grades"]["segfault"]["todo5_decide_overlap"] == 2
    statuses = {(p["student_id"], p["notebook"]): p["status"] for p in batch["summary"]["problems"]}
    assert statuses[("exits", NOTEBOOKS[2])] == "kernel_died"
    assert statuses[("segfault", NOTEBOOKS[3])] == "kernel_died"
    assert "kernel died" in batch["stdout"]


def test_one_kernel_serves_a_students_notebooks_and_nothing_carries_over(batch):
    starts = {
        (r["student_id"], r["notebook"]): r.get("timings", {}).get("kernel_starts")
        for r in batch["log"]
    }
    # started once, reset in between
    assert [starts[("20230001", name)] for name in NOTEBOOKS] == [1] * len(NOTEBOOKS)
    # a thread left by 01, a process by 02, an IPython hook by 03: each following notebook got a
    # fresh kernel
    assert [starts[("leaky", name)] for name in NOTEBOOKS[:4]] == [1, 2, 3, 4]
    row = batch["grades"]["leaky"]
    assert (
        row["todo0_check_overlap"] == 3
        and row["todo1_exposed_interval"] == 3
        and row["todo4_plan_decode"] == 2
    )
    kept = (
        batch["out"] / "autograded" / "leaky" / Course.load().assignment / f"{NOTEBOOKS[1]}.ipynb"
    )
    printed = "".join(
        o.get("text", "")
        for c in nbformat.read(kept, 4).cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    )
    assert "names from notebook 01: False" in printed
    # the endless loop's cell was stopped at the limit: the next notebook did not get that kernel
    assert starts[("loop", NOTEBOOKS[2])] == 2
    # notebook 02 died in the kernel 01 had left a hook in, ran again in a fresh one, and kept its
    # points
    saboteur = {r["notebook"]: r for r in batch["log"] if r["student_id"] == "saboteur"}
    assert (
        saboteur[NOTEBOOKS[1]]["status"] == "graded"
        and saboteur[NOTEBOOKS[1]]["timings"]["retried_in_fresh_kernel"] == 1
    )
    assert (
        batch["grades"]["saboteur"]["todo1_exposed_interval"] == 3
        and batch["grades"]["saboteur"]["todo2_estimate_handoff"] == 3
    )
    patched = (
        batch["out"] / "autograded" / "patcher" / Course.load().assignment / f"{NOTEBOOKS[1]}.ipynb"
    )
    shown = "".join(
        o.get("text", "")
        for c in nbformat.read(patched, 4).cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    )
    assert starts[("patcher", NOTEBOOKS[1])] == 1 and "all checks passed" not in shown
    assert batch["grades"]["patcher"]["todo1_exposed_interval"] < 3
    assert (
        batch["grades"]["saboteur2"]["todo1_exposed_interval"] == 3
        and batch["grades"]["saboteur2"]["todo2_estimate_handoff"] == 3
    )


def test_syntax_error_costs_only_what_depends_on_it(batch):
    row = batch["grades"]["syntax"]
    assert row["todo1_exposed_interval"] == 3 and row["todo2_estimate_handoff"] == 0


def test_renamed_notebooks_are_graded(batch):
    row = batch["grades"]["renamed"]
    assert row["todo1_exposed_interval"] == 3 and row["todo2_estimate_handoff"] == 3
    assert row["todo3_validate_state"] == 3 and row["todo4_plan_decode"] == 2, (
        "matched by name or by its graded cells"
    )
    notes = " ".join(batch["summary"]["matching_notes"]["renamed"])
    assert "renamed" in notes and "matched by its graded cells" in notes


def test_missing_notebooks_score_zero_with_a_note(batch):
    missing = {
        (p["student_id"], p["notebook"])
        for p in batch["summary"]["problems"]
        if p["status"] == "missing"
    }
    assert ("renamed", NOTEBOOKS[0]) in missing and ("loop", NOTEBOOKS[4]) in missing
    assert batch["grades"]["renamed"]["todo0_check_overlap"] == 0


def test_tests_cannot_be_weakened_or_deleted(batch):
    g = batch["grades"]
    assert g["tamper"]["todo3_validate_state"] == g["w3_absent_only"]["todo3_validate_state"] < 3, (
        "an edited test cell gains nothing"
    )
    assert g["tamper"]["todo4_plan_decode"] == g["w4_strict_deadline"]["todo4_plan_decode"] < 2, (
        "a deleted test cell gains nothing"
    )
    assert g["deleted_ok"]["todo4_plan_decode"] == 2, "deleting a test cell never costs points"


def test_stderr_from_a_correct_answer_costs_nothing(batch):
    assert batch["grades"]["stderr"]["todo3_validate_state"] == 3


def test_an_unreadable_notebook_is_a_grade_not_a_crash(batch):
    assert batch["grades"]["garbage"]["total"] == 0
    statuses = {(p["student_id"], p["notebook"]): p["status"] for p in batch["summary"]["problems"]}
    assert statuses[("garbage", NOTEBOOKS[0])] == "invalid_notebook"


def test_feedback_shows_failures_but_no_hidden_test(batch):
    # a student's feedback shows the student's own answer; it must never show a hidden test
    secrets = {
        line
        for line, where in secret_lines(Course.load()).items()
        if where.startswith("hidden test")
    }
    pages = sorted((batch["out"] / "feedback").rglob("*.html"))
    assert len(pages) >= 20
    for page in pages:
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
        lines = {line.strip() for line in text.splitlines()}
        leaked = [s for s in secrets if s in lines]
        assert not leaked, f"{page}: {leaked[:3]}"
        assert "BEGIN HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text
    full = html.unescape(
        re.sub(
            r"<[^>]+>",
            "",
            (batch["out"] / "feedback" / "20230001" / f"{NOTEBOOKS[1]}.html").read_text(),
        )
    )
    assert re.search(r"public checks (\d+)/\1 passed", full) and "checks.run()" in full, (
        "the visible checks are shown (the scan above can fail)"
    )
    assert "Graded ideas (hidden tests, run outside your notebook): 3 / 3 points" in full
    wrong = html.unescape(
        re.sub(
            r"<[^>]+>",
            "",
            (batch["out"] / "feedback" / "w4_strict_deadline" / f"{NOTEBOOKS[3]}.html").read_text(),
        )
    )
    assert "ready exactly at the deadline is in time" in wrong, (
        "a failed hidden test shows its hint"
    )
    assert "✗ Missing pieces are waited for when they land no later than the deadline" in wrong, (
        "and names its idea"
    )
    assert "plan_decode_start(MISSING, 10.0, 10.0)" not in wrong


def test_feedback_shows_a_figure_as_its_title_never_as_a_repr(batch):
    """The grading kernel draws no figures; one that a cell displays (the explorer's static view,
    the simulator panel) shows its title, as formgrader and the feedback page render it."""
    pages = {
        name: html.unescape(
            (batch["out"] / "feedback" / "20230001" / f"{name}.html").read_text(encoding="utf-8")
        )
        for name in NOTEBOOKS
    }
    assert not [name for name, text in pages.items() if "<Figure size" in text]
    assert any("[figure" in text and "not while grading)]" in text for text in pages.values())


def test_log_is_machine_readable(batch):
    statuses = {r["status"] for r in batch["log"]}
    assert {"graded", "missing", "timeout", "kernel_died", "invalid_notebook"} <= statuses
    assert all({"student_id", "notebook", "status", "scores"} <= set(r) for r in batch["log"])


def test_class_report_on_the_graded_batch(batch):
    """`report` on a real graded folder: each idea's pass rate is what the log's judge results
    count, the problems name the students they hit, written answers are pending."""
    proc = subprocess.run(
        [sys.executable, "-m", "autograde", "report", str(batch["out"])],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((batch["out"] / "report.json").read_text(encoding="utf-8"))
    page = (batch["out"] / "report.html").read_text(encoding="utf-8")
    assert data["students"] == len(batch["grades"])
    judged, passed = {}, {}
    for record in batch["log"]:
        if record["status"] == "graded":
            for gid, items in record["ideas"].items():
                for item in items:
                    judged[(gid, item["id"])] = judged.get((gid, item["id"]), 0) + 1
                    passed[(gid, item["id"])] = passed.get((gid, item["id"]), 0) + (
                        item["status"] == "passed"
                    )
    ideas = {(i["grade_id"], i["idea"]): i for i in data["ideas"]}
    assert judged and all(
        (ideas[k]["passed"], ideas[k]["judged"]) == (passed[k], judged[k]) for k in judged
    )
    deadline = ideas[("todo4_plan_decode", "deadline_inclusive")]
    assert deadline["passed"] < deadline["judged"], "w4_strict_deadline and tamper miss it"
    assert html.escape(deadline["text"]) in page
    kinds = {p["kind"]: {i["student_id"] for i in p["items"]} for p in data["problems"]}
    assert {"exits", "segfault"} <= kinds["kernel_died"] and "sigint" in kinds["timeout"]
    assert "garbage" in kinds["invalid_notebook"] and "renamed" in kinds["matching_note"]
    for e in data["scores"]["exercises"]:
        if e["grade_id"] in MANUAL:
            assert e["pending"] == sum(
                row[e["grade_id"]] == "pending" for row in batch["grades"].values()
            )
    assert (
        data["scores"]["exercises"][0]["pending"] == 0
        and sum(e["pending"] for e in data["scores"]["exercises"]) > 0
    )
    assert data["timing"]["slowest"][0]["seconds"] == max(r.get("seconds", 0) for r in batch["log"])


def test_rerun_is_idempotent(batch):
    before = (batch["out"] / "grades.csv").read_text()

    def written() -> dict[Path, int]:
        """What grading a notebook writes (its signed result and its feedback page), with the time
        each was written."""
        files = [
            *(batch["out"] / ".state").rglob("*.json"),
            *(batch["out"] / "feedback").rglob("*.html"),
        ]
        return {p: p.stat().st_mtime_ns for p in files}

    graded = written()
    assert len(graded) > 40, len(graded)
    proc = run_grade(
        batch["subs"],
        batch["out"],
        "--workers",
        "2",
        "--cell-timeout",
        "10",
        "--notebook-timeout",
        "60",
    )
    assert (batch["out"] / "grades.csv").read_text() == before
    summary = json.loads((batch["out"] / "summary.json").read_text())
    ran = [r for r in batch["log"] if r["status"] not in ("missing", "invalid_student_id")]
    assert summary["notebooks_reused"] == len(ran) > 40, (
        "every notebook that ran before is reused, failures included"
    )
    assert f"{len(ran)} reused" in proc.stdout, proc.stdout
    assert written() == graded, "nothing was graded again: no result or page was written anew"


def test_unusable_input_exits_2(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograde",
            "grade",
            str(tmp_path / "nope"),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "no such folder or zip file" in proc.stderr
    (tmp_path / "empty").mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograde",
            "grade",
            str(tmp_path / "empty"),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "no student folders" in proc.stderr


def test_wall_clock_limit_kills_a_stuck_kernel(tmp_path):
    subs = tmp_path / "subs"
    write(
        subs,
        "stuck",
        NOTEBOOKS[0],
        insert_after(
            build(NOTEBOOKS[0]),
            "todo0_solution",
            "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile "
            "True:\n    time.sleep(0.01)",
        ),
    )
    write(subs, "stuck", NOTEBOOKS[3], build(NOTEBOOKS[3]))
    _, left = grade_leaving_nothing(
        subs,
        tmp_path / "out",
        "--workers",
        "2",
        "--cell-timeout",
        "120",
        "--notebook-timeout",
        "15",
    )
    grades = read_grades(tmp_path / "out")["stuck"]
    assert grades["todo0_check_overlap"] == 0 and grades["todo4_plan_decode"] == 2
    # the notebook's limit (15 s) ended it, not the cell's (120 s): the worker was killed at it
    records = {
        r["notebook"]: r
        for r in map(json.loads, (tmp_path / "out" / "log.jsonl").read_text().splitlines())
    }
    stuck = records[NOTEBOOKS[0]]
    assert stuck["status"] == "timeout" and "killed after 15 s" in stuck["detail"], stuck
    assert records[NOTEBOOKS[3]]["status"] == "graded", records[NOTEBOOKS[3]]
    assert left == [], "the stuck kernel, or anything of this grading, outlived it"


def test_interrupted_batch_resumes_and_workers_agree(tmp_path):
    subs = tmp_path / "subs"
    for student in ("a", "b", "c"):
        write(subs, student, NOTEBOOKS[3], build(NOTEBOOKS[3]))
        write(
            subs,
            student,
            NOTEBOOKS[2],
            build(NOTEBOOKS[2], mutate(*WRONG[6][2:5])) if student == "b" else build(NOTEBOOKS[2]),
        )
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autograde",
            "grade",
            str(subs),
            "--out",
            str(out),
            "--workers",
            "1",
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list((out / ".state").rglob("*.json"))) < 2:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "resume" in err
    kept = len(list((out / ".state").rglob("*.json")))
    assert 2 <= kept < 6
    resumed = run_grade(subs, out, "--workers", "2")
    assert f"{kept} reused" in resumed.stdout
    fresh = tmp_path / "fresh"
    run_grade(subs, fresh, "--workers", "1")
    assert (out / "grades.csv").read_text() == (fresh / "grades.csv").read_text(), (
        "2 workers + resume = 1 worker from scratch"
    )
    assert (
        read_grades(fresh)["b"]["todo3_validate_state"] < 3
        and read_grades(fresh)["a"]["todo3_validate_state"] == 3
    )


def test_check_command_passes():
    proc = subprocess.run(
        [sys.executable, "-m", "autograde", "check"], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        f"instructor sources score {FULL}/{FULL} automatic points, {len(MANUAL)} "
        f"answer(s) ({len(MANUAL)} points) "
        "left for a person; untouched release scores 0"
    ) in proc.stdout


def test_validate_reports_public_checks_only(root, tmp_path):
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograde",
            "validate",
            str(root / "solutions" / f"{NOTEBOOKS[1]}.ipynb"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.search(r"public checks (\d+)/\1 passed; hidden tests run at grading", ok.stdout), (
        ok.stdout
    )
    learner = write(tmp_path, "me", NOTEBOOKS[3], build(NOTEBOOKS[3], mutate(*WRONG[8][2:5])))
    # a notebook whose kernel dies is reported as such, with the cell, and the next files are still
    # validated; validating notebook 05 writes no result file into the course (a learner's measured
    # one stays)
    dying = write(
        tmp_path,
        "dies",
        NOTEBOOKS[3],
        insert_after(build(NOTEBOOKS[3]), solution_ids(NOTEBOOKS[3])[0], "import os; os._exit(3)"),
    )
    measured = write(tmp_path, "measured", NOTEBOOKS[4], build(NOTEBOOKS[4]))
    results = root / "benchmarks" / "results"
    before = {p.name: p.stat().st_mtime_ns for p in results.glob("*.json")}
    partial = subprocess.run(
        [sys.executable, "-m", "autograde", "validate", str(dying), str(learner), str(measured)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert partial.returncode == 1, (
        "the strict-deadline bug breaks a stated rule, so a public check catches it"
    )
    assert (
        "[deadline_inclusive]" in partial.stdout
        and "all tests passed" not in partial.stdout.lower()
    )
    assert partial.stdout.count("ipynb: public checks") == 3, partial.stdout
    assert "✗ the kernel died in code cell 3 (`import os; os._exit(3)`)" in partial.stdout, (
        partial.stdout
    )
    assert f"{dying}: public checks 0/0 passed; the run stopped early (above)" in partial.stdout, (
        partial.stdout
    )
    assert f"{measured}: public checks 7/7 passed; hidden tests run at grading" in partial.stdout, (
        partial.stdout
    )
    assert {p.name: p.stat().st_mtime_ns for p in results.glob("*.json")} == before, (
        "validate wrote into the course's results"
    )
    assert "Traceback" not in partial.stderr, partial.stderr[-2000:]
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograde",
            "validate",
            str(root / "notebooks" / f"{NOTEBOOKS[1]}.ipynb"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    counts = re.search(r"ipynb: public checks (\d+)/(\d+) passed", bad.stdout)
    assert bad.returncode == 1 and int(counts.group(1)) < int(counts.group(2)) / 4, bad.stdout


def test_bundle_holds_no_answer(root, tmp_path):
    import zipfile

    target = tmp_path / "pack.zip"
    proc = subprocess.run(
        [sys.executable, "-m", "autograde", "bundle", "--out", str(target)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = zipfile.ZipFile(target).namelist()
    assert "serving-overlap-course/notebooks/02_total_vs_exposed_time.ipynb" in names
    assert (
        "serving-overlap-course/tools/overlap/lab.py" in names
        and "serving-overlap-course/environment.yml" in names
    )
    assert not [n for n in names if "/solutions/" in n or "/autograde/" in n or "/tests/" in n]
    from autograde.publish.leaks import scan_zip

    assert scan_zip(Course.load(), target) == []
    readme = zipfile.ZipFile(target).read("serving-overlap-course/README.md").decode()
    assert readme.startswith("# ") and "<!-- course:" not in readme and "Six notebooks" in readme
    assert "notebook 06 loads your functions from notebooks 03 and 04" in readme
    # the scan would catch a solution smuggled into the pack
    with zipfile.ZipFile(target, "a") as zf:
        zf.write(
            root / "solutions" / f"{NOTEBOOKS[2]}.ipynb",
            "serving-overlap-course/notebooks/extra.ipynb",
        )
    assert scan_zip(Course.load(), target)


def test_public_checks_catch_every_wrong_answer(tmp_path):
    """Fairness: each plausible mistake (all of MISTAKES) breaks a stated rule, so the public checks
    that a learner runs before submitting fail; and, as the hidden ideas do, they name exactly the
    idea the mistake loses among the checks of its own exercise, so one slip reads as one
    problem."""
    from autograde.judging.ideas import course_tests, load

    tests = course_tests([SOLUTIONS / f"{n}.ipynb" for n in NOTEBOOKS]).cells
    ideas_of = {
        gid: {i.id for i in load(t.hidden, gid, t.points).ideas} for gid, t in tests.items()
    }
    files = []
    for student, cell, solution, old, new, _ in MISTAKES:
        files.append(
            write(tmp_path, student, NB_OF[cell], build(NB_OF[cell], mutate(solution, old, new)))
        )
        # TODO 7's checks call the learner's 03 and 04, found beside it
        if NB_OF[cell] == NOTEBOOKS[5]:
            for name in NOTEBOOKS[2:4]:
                write(tmp_path, student, name, build(name))
    # two validate processes on the two halves at once: the machine has two cores and nothing else
    # runs
    half = (len(files) + 1) // 2
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "autograde", "validate", *map(str, part)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for part in (files[:half], files[half:])
    ]
    outputs = [proc.communicate(timeout=900) for proc in procs]
    assert [proc.returncode for proc in procs] == [1, 1], [err[-2000:] for _, err in outputs]
    blocks, current = [], []
    for line in "\n".join(out for out, _ in outputs).splitlines():
        current.append(line)
        if re.match(r"\S+\.ipynb: public checks", line):
            blocks.append("\n".join(current))
            current = []
    errors = [
        "\n".join(line for line in err.splitlines() if "eavesdropping" not in line)[-3000:]
        for _, err in outputs
    ]
    assert len(blocks) == len(MISTAKES), (blocks[-3:], errors)
    for (student, cell, *_, failing), text in zip(MISTAKES, blocks):
        named = set(re.findall(r"✗ .*\[([a-z_]+)\]", text)) & ideas_of[cell]
        assert named == failing, (
            f"{student}: the public checks of {cell} name {named}, the "
            f"mistake loses {failing}\n{text}"
        )


def test_a_split_answer_cell_and_an_unknown_grade_id_cost_no_points(root, tmp_path):
    import copy

    subs, out, name = tmp_path / "subs", tmp_path / "out", NOTEBOOKS[0]
    nb = build(name)
    reflection = next(
        gid
        for gid in MANUAL
        if any(c.metadata.get("nbgrader", {}).get("grade_id") == gid for c in nb.cells)
    )
    i = next(
        i
        for i, c in enumerate(nb.cells)
        if c.metadata.get("nbgrader", {}).get("grade_id") == reflection
    )
    first = nb.cells[i]
    second = copy.deepcopy(first)  # Jupyter's "Split Cell": both halves keep the metadata
    second["id"] = first["id"] + "x"
    whole = first.source
    first.source, second.source = whole[: len(whole) // 2], whole[len(whole) // 2 :]
    nb.cells.insert(i + 1, second)
    stray = copy.deepcopy(first)  # a cell carrying a grade id the course does not have
    stray["id"] = first["id"] + "y"
    stray.metadata["nbgrader"]["grade_id"] = "my_own_cell"
    nb.cells.append(stray)
    original = write(subs, "splitter", name, nb).read_bytes()
    run_grade(subs, out, "--workers", "1", "--cell-timeout", "10")
    grades = read_grades(out)["splitter"]
    assert grades["todo0_check_overlap"] == POINTS["todo0_check_overlap"], grades
    assert grades[reflection] == "pending", "the joined answer waits for a person"
    summary = json.loads((out / "summary.json").read_text())
    assert not [p for p in summary["problems"] if p["notebook"] == name], summary["problems"]
    notes = " ".join(summary["matching_notes"]["splitter"])
    assert (
        f"answer cell {reflection} was split in two" in notes
        and ("(my_own_cell) was graded as an ordinary cell") in notes
    )
    kept = nbformat.read(
        out / "submitted" / "splitter" / Course.load(root).assignment / f"{name}.ipynb", 4
    )
    joined = [
        c.source for c in kept.cells if c.metadata.get("nbgrader", {}).get("grade_id") == reflection
    ]
    assert len(joined) == 1 and joined[0].replace("\n\n", "") == whole.replace("\n\n", ""), joined
    assert (subs / "splitter" / f"{name}.ipynb").read_bytes() == original, (
        "the student's file is never changed"
    )


def test_feedback_marks_written_answers_that_wait_for_a_person():
    """nbgrader's page says "Score: 0.0 / 1.0" for an answer nobody has graded yet; ours says
    pending, and a person's score, once given, is the page's (the heading's total counts it)."""
    from feedback_pages import page_data

    from autograde.record.pages import render_page

    # q2 was left as released: its 0 is a real score
    marked = render_page(page_data(), {}, "en", {"refl_q1": "pending", "refl_q2": 0.0})
    assert "(Score: 0.75 / 4.5; 1.5 point(s) wait for a person's grading)</h4>" in marked
    assert (
        '<a href="#refl_q1">Written response</a> (pending: a person grades it, 1.5 point(s))</li>'
    ) in marked
    assert '<a href="#refl_q2">Written response</a> (Score: 0.0 / 1.0)</li>' in marked
    assert marked.count("Pending: a person grades it (1.5 point(s))") == 1
    assert marked.count("Score: 0.0 / 1.0 <a") == 1
    # q2 changed since it was scored
    scored = render_page(page_data(), {}, "en", {"refl_q1": 1.25, "refl_q2": "review"})
    assert (
        "<h4>04_decode_start_gate (Score: 2.0 / 4.5; 1 point(s) wait for a person's grading)</h4>"
    ) in scored
    assert (
        '<a href="#refl_q1">Written response</a> (Score: 1.25 / 1.5)</li>' in scored
        and "Score: 1.25 / 1.5 <a" in scored
    )
    assert (
        '<a href="#refl_q2">Written response</a> (pending: a person grades it, 1.0 point(s))</li>'
    ) in scored
    assert "wait for a person" not in render_page(
        page_data(), {}, "en", {"refl_q1": 0.0, "refl_q2": 0.0}
    )


def test_a_page_drafted_as_its_notebook_settles_is_the_page_written(batch):
    """The pages drafted while the workers run are the pages rendered after the batch, byte for
    byte, and a draft is taken only with the values it was rendered with (else rendered again)."""
    from autograde.course import exercises
    from autograde.ledger.folder import Ledger
    from autograde.ledger.late import Policy, late_text
    from autograde.record.pages import Drafts, page_words, person_values

    course = Course.load()
    ledger = Ledger(batch["out"], course)
    cells, policy = exercises(course), Policy("none")
    drafts = Drafts(ledger.out, course, cells, secret_lines(course), policy)
    graded = [r for r in ledger.records if r.student_id == "20230001" and r.graded]
    assert len(graded) == len(NOTEBOOKS)
    words = page_words(course)
    for record in graded:
        drafts.draft(record)
        said = words.of(record.edition or "en")
        line = late_text(record.late, policy, said)
        taken = drafts.take(record, person_values(cells, {}, record), line)
        assert taken is not None, f"{record.notebook}: no draft"
        page = ledger.out.page(record.student_id, record.notebook).read_text(encoding="utf-8")
        assert taken[0] == page, f"{record.notebook}: the draft differs from the page written"
        drafts.draft(record)
        assert drafts.take(record, person_values(cells, {}, record), line + " (late)") is None
