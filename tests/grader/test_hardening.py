"""Submissions that attack the grader rather than the grade (tests/hostile.py), graded in one
batch next to an honest student and a control, with the grading processes' memory sampled
from /proc while it runs. The batch must finish; the honest student keeps full marks; no
attack scores above its control; each attack ends as a named problem of its own student; the
grading parent and every grading process stay under 1 GiB of resident memory; no CSV cell
reads as a formula; and no page runs script.

The fast tests at the end check each limit on its own, without grading."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from hostile import (
    FORMULA_ID,
    PeakMemory,
    build_hardening_batch,
    deep_json,
    nested_folders,
    remove_nested,
)
from submissions import NOTEBOOKS, grade_command

ROOT = Path(__file__).resolve().parents[2]
GiB = 1 << 30
NB01, NB02 = NOTEBOOKS[0], NOTEBOOKS[1]
FULL_AUTO = sum(
    c.metadata["nbgrader"]["points"]
    for n in NOTEBOOKS
    for c in nbformat.read(ROOT / "solutions" / f"{n}.ipynb", 4).cells
    if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")
)


@pytest.fixture(scope="module")
def hardened(tmp_path_factory):
    base = tmp_path_factory.mktemp("hardening")
    subs, out = base / "submissions", base / "out"
    plan = build_hardening_batch(subs)
    command = grade_command(
        subs,
        out,
        "--workers",
        "2",
        "--memory-limit",
        "1",
        "--cell-timeout",
        "20",
        "--notebook-timeout",
        "120",
    )
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    with PeakMemory(proc.pid) as memory:
        output, _ = proc.communicate(timeout=1500)
    # pytest's own clean-up would recurse through them
    for student in ("atk_deep_dirs", "atk_deep_both"):
        remove_nested(subs / student)
    assert proc.returncode == 0, f"the batch did not finish:\n{output[-4000:]}"
    with open(out / "grades.csv", encoding="utf-8", newline="") as handle:
        table = list(csv.reader(handle))
    log = [
        json.loads(line) for line in (out / "log.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    return {
        "out": out,
        "plan": plan,
        "peaks": memory.peaks,
        "table": table,
        "rows": {row[0]: dict(zip(table[0], row)) for row in table[1:]},
        "records": {(r["student_id"], r["notebook"]): r for r in log},
        "summary": json.loads((out / "summary.json").read_text(encoding="utf-8")),
    }


pytestmark_batch = pytest.mark.slow


@pytestmark_batch
def test_the_batch_finishes_and_the_honest_student_keeps_full_marks(hardened):
    assert float(hardened["rows"]["honest"]["auto_total"]) == FULL_AUTO
    assert all(hardened["records"][("honest", nb)]["status"] == "graded" for nb in NOTEBOOKS)


@pytestmark_batch
def test_grading_memory_stays_under_one_gib(hardened):
    peaks = hardened["peaks"]
    print(
        f"peak RSS: parent {peaks['parent'] / 2**20:.0f} MiB, grading process "
        f"{peaks['worker'] / 2**20:.0f} MiB"
    )
    assert 0 < peaks["parent"] < GiB and 0 < peaks["worker"] < GiB


@pytestmark_batch
@pytest.mark.parametrize(
    "student",
    ["atk_out_metadata", "atk_out_updates", "atk_out_comms", "atk_out_orphans", "atk_out_objects"],
)
def test_an_output_flood_stops_its_own_notebook(hardened, student):
    record = hardened["records"][(student, NB01)]
    assert record["status"] == "output_limit", record
    assert "MiB of output" in record["detail"] or "JSON objects" in record["detail"]
    assert float(hardened["rows"][student]["auto_total"]) <= float(
        hardened["rows"]["honest"]["auto_total"]
    )


@pytestmark_batch
def test_writing_past_ipythons_capture_reaches_no_one(hardened):
    """700 MB written to the kernel's own standard output land in the grading process's log,
    of which the parent reads only the end (the memory test above holds the parent to it)."""
    record = hardened["records"][("atk_out_fd", NB01)]
    assert record["status"] == "graded", record
    assert record["scores"] == hardened["records"][("honest", NB01)]["scores"]


@pytestmark_batch
def test_a_huge_error_is_kept_cut_short(hardened):
    record = hardened["records"][("atk_out_error", NB01)]
    assert record["status"] == "graded", record
    assert (
        record["scores"]["todo0_check_overlap"]
        == hardened["records"][("honest", NB01)]["scores"]["todo0_check_overlap"]
    )
    page = hardened["out"] / "feedback" / "atk_out_error" / f"{NB01}.html"
    assert page.stat().st_size < 1_200_000


@pytestmark_batch
def test_a_callback_flood_ends_at_the_call_limit(hardened):
    record = hardened["records"][("atk_callback_flood", NB02)]
    # not a "timeout": the notebook limit (120 s) never struck
    assert record["status"] == "graded", record
    assert any(idea["status"] == "error" for idea in record["ideas"]["todo2_estimate_handoff"]), (
        record["ideas"]
    )
    control = hardened["records"][("ctl_wrong2", NB02)]["scores"]["todo2_estimate_handoff"]
    assert record["scores"]["todo2_estimate_handoff"] <= control
    page = (hardened["out"] / "feedback" / "atk_callback_flood" / f"{NB02}.html").read_text(
        encoding="utf-8"
    )
    # the per-call limit (20 s) ended the flooding call: the page says so, naming it
    assert "did not answer in time (20 s per call): it stopped reading what the grader sent" in page


@pytestmark_batch
def test_a_kernel_left_deaf_is_replaced_before_the_next_notebook(hardened):
    """Notebook 01 leaves its kernel deaf to kernel_info requests: the reset after it sees that, and
    notebook 02 runs in a fresh kernel at once, graded as the honest student's, without first
    failing in the deaf one (nbclient would wait a minute for it) and running again."""
    records, honest = hardened["records"], hardened["records"][("honest", NB02)]
    first, second = records[("atk_deaf_kernel", NB01)], records[("atk_deaf_kernel", NB02)]
    assert first["status"] == second["status"] == "graded", (first, second)
    assert (
        first["scores"] == hardened["records"][("honest", NB01)]["scores"]
        and second["scores"] == honest["scores"]
    )
    # one kernel ran notebook 01; notebook 02 ran in the second one, started when the reset found
    # the first deaf, and ran once: had it been lent the deaf kernel, nbclient would have waited a
    # minute, failed, and run it again in a fresh one (retried_in_fresh_kernel)
    assert (
        first["timings"]["kernel_starts"] == 1 and "retried_in_fresh_kernel" not in first["timings"]
    ), first
    assert (
        second["timings"]["kernel_starts"] == 2
        and "retried_in_fresh_kernel" not in second["timings"]
    ), second


@pytestmark_batch
def test_deep_json_and_deep_folders_cost_only_their_own_student(hardened):
    records, notes = hardened["records"], hardened["summary"]["matching_notes"]
    assert records[("atk_deep_json", NB01)]["status"] == "invalid_notebook"
    assert "RecursionError" in records[("atk_deep_json", NB01)]["detail"]
    assert records[("atk_deep_dirs", NB02)]["status"] == "graded"
    assert any("levels down were not looked at" in n for n in notes["atk_deep_dirs"])
    assert any("levels down were not looked at" in n for n in notes["atk_deep_both"])
    assert all(records[("atk_deep_both", nb)]["status"] == "missing" for nb in NOTEBOOKS)


@pytestmark_batch
def test_a_folder_of_100000_files_is_looked_at_within_limits(hardened):
    assert hardened["records"][("atk_many_files", NB01)]["status"] == "graded"
    notes = hardened["summary"]["matching_notes"]["atk_many_files"]
    assert any("only 50 were looked at" in n for n in notes) and len(notes) < 15


@pytestmark_batch
def test_no_csv_cell_reads_as_a_formula_and_refused_names_stay_out_of_it(hardened):
    cells = [cell for row in hardened["table"] for cell in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    assert not [c for c in cells if "HYPERLINK" in c or "\n" in c]
    rejected = json.loads((hardened["out"] / "rejected_ids.json").read_text(encoding="utf-8"))
    assert {entry["folder"] for entry in rejected} == {FORMULA_ID, "newline\n", ".hidden"}
    assert {entry["student_id"] for entry in rejected if entry["student_id"]} <= set(
        hardened["rows"]
    )


@pytestmark_batch
def test_an_id_named_like_a_grader_file_is_graded_like_anyone(hardened):
    assert hardened["records"][("settings.json", NB01)]["status"] == "graded"
    assert (
        hardened["records"][("settings.json", NB01)]["scores"]
        == hardened["records"][("honest", NB01)]["scores"]
    )


def _inputs_shown(out: Path, student: str) -> str:
    text = (out / "feedback" / student / f"{NB01}.html").read_text(encoding="utf-8")
    start = text.index("Same engine, and any link in common")  # the first idea with random pairs
    return text[start : text.index("\n", text.index("inputs: ", start))]


@pytestmark_batch
def test_hidden_inputs_follow_the_submission(hardened):
    """The same file gets the same hidden inputs (and grade); a changed file gets others, so
    what one grading showed is no use for the next submission."""
    out = hardened["out"]
    assert _inputs_shown(out, "atk_inputs_a1") == _inputs_shown(out, "atk_inputs_a2")
    assert _inputs_shown(out, "atk_inputs_a1") != _inputs_shown(out, "atk_inputs_b")
    assert _inputs_shown(out, "atk_inputs_a1") != _inputs_shown(out, "atk_inputs_a3"), (
        "a re-save is a new submission"
    )


@pytestmark_batch
def test_a_small_file_of_millions_of_objects_is_refused_unparsed(hardened):
    record = hardened["records"][("atk_object_bomb", NB01)]
    assert record["status"] == "invalid_notebook" and "TooManyObjects" in record["detail"], record


@pytestmark_batch
def test_a_long_answer_is_judged_whole(hardened):
    assert (
        hardened["records"][("learner_long_answer", NB01)]["scores"]
        == hardened["records"][("honest", NB01)]["scores"]
    )


@pytestmark_batch
@pytest.mark.browser
def test_no_page_runs_script(hardened):
    from page_attacks import scripts_ran

    report = subprocess.run(
        [sys.executable, "-m", "autograde", "report", str(hardened["out"])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stdout + report.stderr
    pages = sorted(hardened["out"].glob("feedback/*/*.html")) + sorted(
        hardened["out"].glob("*.html")
    )
    assert any(p.parent.name == "atk_pages" for p in pages) and any(
        p.name == "report.html" for p in pages
    )
    assert len(pages) >= 15
    assert scripts_ran(pages) == {}


@pytestmark_batch
def test_grading_never_runs_a_learners_measurement(hardened):
    """Notebook 05 submitted in real_cpu mode grades in the dry run: nothing measured, full marks,
    and its feedback says why (a real_cpu run takes about 40 s, past a cell's 30 s limit)."""
    nb05 = NOTEBOOKS[4]
    record, honest = (
        hardened["records"][("learner_real_cpu", nb05)],
        hardened["records"][("honest", nb05)],
    )
    assert record["status"] == "graded" and record["scores"] == honest["scores"]
    page = (hardened["out"] / "feedback" / "learner_real_cpu" / f"{nb05}.html").read_text(
        encoding="utf-8"
    )
    assert "Grading runs the dry run whatever RUN_MODE says" in page
    # the result the notebook wrote and read back is the dry run's: nothing was measured
    assert re.search(r"run_mode: dry_run\b", page) and "Dry run: nothing was measured." in page
    assert not re.search(r"run_mode: real_cpu\b", page)


# ------------------------------------------------------------------ each limit on its own
def test_walking_a_folder_never_recurses_and_stops_at_its_limits(tmp_path):
    from autograde.matching import match_notebooks, walk_notebooks

    nested_folders(tmp_path, 1_300)
    try:
        found, notes = walk_notebooks(tmp_path, 100)
    finally:
        remove_nested(tmp_path)
    assert found == [] and any("levels down" in n for n in notes)
    crowd = tmp_path / "crowd"
    crowd.mkdir()
    for i in range(3_000):
        os.close(os.open(crowd / f"f{i}.txt", os.O_WRONLY | os.O_CREAT))
    found, notes = walk_notebooks(tmp_path, 100, max_entries=1_000)
    assert any("more than 1,000 entries" in n for n in notes)
    chosen, notes = match_notebooks(tmp_path, ("01_a",), {"01_a": {"x"}})
    assert chosen == {"01_a": None}


def test_deep_json_is_not_a_notebook_and_raises_nothing(tmp_path):
    from autograde.matching import grade_ids, match_notebooks, read_graded

    (tmp_path / "work.ipynb").write_text(deep_json())
    assert grade_ids(tmp_path / "work.ipynb") == set()
    assert read_graded(tmp_path / "work.ipynb") is None
    chosen, notes = match_notebooks(tmp_path, ("01_a",), {"01_a": {"x"}})
    assert chosen == {"01_a": None} and "not a notebook of this course" in notes[0]


def test_spreadsheet_cells_are_neutralised(tmp_path):
    from autograde.ledger.tables import spreadsheet_safe, write_csv

    for bad in ("=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1"):
        assert spreadsheet_safe(bad) == "'" + bad
    assert (
        spreadsheet_safe("ada") == "ada"
        and spreadsheet_safe(0.25) == "0.25"
        and spreadsheet_safe(3) == 3
    )
    write_csv(tmp_path / "t.csv", ["student_id", "score"], [{"student_id": "=cmd", "score": 1.0}])
    assert (tmp_path / "t.csv").read_text().splitlines() == ["student_id,score", "'=cmd,1"]


def test_student_ids_are_matched_whole():
    from autograde.grading import STUDENT_ID, rejected_id

    assert STUDENT_ID.fullmatch("ada.l@x-1") and not STUDENT_ID.fullmatch("ada\n")
    assert not STUDENT_ID.fullmatch(".settings.json"), "the grader's own files start with a dot"
    assert rejected_id("=cmd") == rejected_id("=cmd") and rejected_id("=cmd")[:1].isalpha()
    assert not STUDENT_ID.fullmatch(rejected_id("Mary Lee")), (
        "a folder named like a stand-in id is refused itself"
    )


class _MeteredCell(nbformat.NotebookNode):
    """A cell that counts what is read from it or written to it: the characters of its source
    (``meter["source"]``) and the reads of its metadata (``meter["metadata"]``). A join that
    rebuilt the growing source for each part, or looked back over the cells for each one, would
    touch a number of them that grows with the square of the cells' count."""

    meter = {"source": 0, "metadata": 0}

    def _count(self, key, value):
        if key == "source":
            self.meter["source"] += len(value)
        elif key == "metadata":
            self.meter["metadata"] += 1
        return value

    def __getitem__(self, key):
        return self._count(key, super().__getitem__(key))

    def get(self, key, default=None):
        return self._count(key, super().get(key, default)) if key in self else default

    def __setitem__(self, key, value):
        super().__setitem__(key, self._count(key, value))


def test_split_cells_are_joined_in_linear_time_with_one_note_per_answer():
    from autograde.matching import repair_cells as _repair_cells

    meta = {
        "nbgrader": {
            "grade_id": "a",
            "solution": True,
            "grade": False,
            "locked": False,
            "schema_version": 3,
        }
    }
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _MeteredCell(
            nbformat.v4.new_code_cell(f"x{i} = {i}\n", metadata=json.loads(json.dumps(meta)))
        )
        for i in range(60_000)
    ]
    size = sum(len(dict.__getitem__(cell, "source")) for cell in nb.cells)
    _MeteredCell.meter.update(source=0, metadata=0)
    notes = _repair_cells(nb, {"a"})
    work = dict(_MeteredCell.meter)
    assert len(nb.cells) == 1 and nb.cells[0].source.endswith("x59999 = 59999\n")
    assert notes == ["answer cell a was split in 60,000 parts; the parts were joined for grading"]
    # linear: every part's source read about once and the joined one written once; a few metadata
    # reads per cell (a quadratic join touches about 60,000 times more)
    assert size <= work["source"] <= 4 * size, (work, size)
    assert work["metadata"] <= 10 * 60_000, work


def test_a_dict_of_colliding_keys_is_refused_before_it_is_built():
    from autograde.judging import judge

    collide = {"$dict": [[k * (2**61 - 1), 0] for k in range(1, judge.MAX_PAIRS + 2)]}
    with pytest.raises(judge.RunnerFailed, match="more than"):
        judge.decode(collide)


def test_message_size_counts_everything_without_recursing():
    from autograde.run.preprocessors import message_size

    assert message_size({"metadata": {"pad": "x" * 10_000}}) > 10_000
    assert message_size([b"y" * 5_000, memoryview(b"z" * 5_000)]) >= 10_000
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert message_size(deep) > 100_000


def test_a_log_is_read_from_its_end_only(tmp_path):
    from autograde.matching import read_tail

    log = tmp_path / "worker.log"
    log.write_bytes(b"x" * 5_000_000 + b"the end")
    tail = read_tail(log, 1000)
    assert len(tail) == 1000 and tail.endswith("the end")


FLOODER = r"""
import json, os, sys
line = (json.dumps({"op": "callback", "name": "g", "args": [], "kwargs": {}}) + "\n").encode()
sys.stdin.readline()
while True:
    os.write(1, line)
"""


def test_a_runner_that_floods_callbacks_is_stopped_at_the_call_limit(tmp_path):
    from autograde.judging import judge

    runner = judge.Runner(
        [sys.executable, "-c", FLOODER], dict(os.environ), str(tmp_path), call_timeout=2.0
    )
    deadlines, send = [], runner.send
    runner.send = lambda message, deadline=None: (
        deadlines.append(deadline) or send(message, deadline)
    )
    try:
        with pytest.raises(judge.RunnerFailed, match=r"\(2 s per call\): it stopped reading"):
            runner.call("f", (), {}, {"g": lambda: "x" * 10_000})
        # the call and every callback answered during it shared one deadline: answering callbacks
        # never extends the call past its limit, and the runner was stopped there
        assert len(deadlines) > 1 and len(set(deadlines)) == 1 and None not in deadlines, deadlines
        assert not runner.alive()
    finally:
        runner.kill()


def test_hidden_random_inputs_depend_on_the_salt_only_when_grading():
    import random

    from tools import checks

    assert checks.hidden_random(7).random() == random.Random(7).random()
    checks.set_input_salt("a")
    try:
        first = checks.hidden_random(7).random()
        assert first == checks.hidden_random(7).random() != random.Random(7).random()
        checks.set_input_salt("b")
        assert checks.hidden_random(7).random() != first
    finally:
        checks.set_input_salt(None)


def test_every_grading_limit_is_in_the_fingerprint(tmp_path):
    import dataclasses

    from autograde.grading import Options
    from autograde.ledger.store import fingerprint as _fingerprint

    path = tmp_path / "nb.ipynb"
    path.write_text("{}")
    base = Options()
    changed = {
        "cell_timeout": 31,
        "notebook_timeout": 301,
        "sandbox": False,
        "memory_limit": base.memory_limit + 1,
        "process_limit": base.process_limit + 1,
        "max_notebook_bytes": base.max_notebook_bytes + 1,
    }
    for field, value in changed.items():
        assert _fingerprint(path, "d", dataclasses.replace(base, **{field: value})) != _fingerprint(
            path, "d", base
        ), field
