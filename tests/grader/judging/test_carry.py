"""Nothing one grading, or one notebook, learned is of use to another: each notebook is judged in a
runner of its own, and the hidden inputs are salted with the student's whole submission, so a change
to any notebook gives every notebook other inputs (and the whole submission is graded again)."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from autograde.ledger.store import submission_digest

from submissions import (
    NOTEBOOKS,
    answer,
    build,
    insert_after,
    run_grade,
    solution_ids,
    troubles,
    write,
)

NB1, NB2 = NOTEBOOKS[:2]
PLANT = (
    "import sys, types\nsys.modules['carried'] = types.ModuleType('carried')  # what a later "
    "notebook's code would find"
)
# TODO 1 answers right only where an earlier cell (of any notebook judged before) left the module
# behind
CONDITIONAL = (
    answer("todo1_solution").replace("def compute_exposed_interval(", "def _reference_answer(")
    + "\n\nimport sys\n\n\ndef compute_exposed_interval(transfer_interval, cover_intervals):\n"
    "    if 'carried' in sys.modules:\n"
    "        return _reference_answer(transfer_interval, cover_intervals)\n"
    "    raise RuntimeError('nothing was carried here')\n"
)


def todo1_points(out: Path, student: str) -> float:
    for line in (out / "log.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["student_id"] == student and record["notebook"] == NB2:
            return sum(v for k, v in record["scores"].items() if k.startswith("todo1"))
    raise AssertionError(f"no record of {student}/{NB2}")


@pytest.mark.slow
def test_a_module_one_notebook_leaves_is_gone_when_the_next_is_judged(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    first = solution_ids(NB1)[0]
    # notebook 01 is judged first
    write(subs, "planter", NB1, insert_after(build(NB1), first, PLANT))
    write(subs, "planter", NB2, build(NB2, {"todo1_solution": CONDITIONAL}))
    write(subs, "control", NB1, build(NB1))
    write(subs, "control", NB2, build(NB2, {"todo1_solution": CONDITIONAL}))
    # the same code planting in its own notebook: the trick itself works
    write(subs, "positive", NB1, build(NB1))
    write(
        subs,
        "positive",
        NB2,
        insert_after(build(NB2, {"todo1_solution": CONDITIONAL}), "todo1_solution", PLANT),
    )
    run_grade(subs, out, "--workers", "2")
    planted, control, positive = (todo1_points(out, s) for s in ("planter", "control", "positive"))
    assert positive > control, troubles(out)
    assert planted == control, (planted, control, troubles(out))

    # a change to notebook 01 alone: notebook 02 is graded again, under other inputs, never reused
    changed = build(NB1)
    changed.cells.append(nbformat.v4.new_markdown_cell("a note the learner added"))
    write(subs, "control", NB1, changed)
    again = run_grade(subs, out)
    # planter's and positive's two each; control's two again
    assert "4 reused from an earlier run" in again.stdout, again.stdout


def test_the_salt_is_the_whole_submissions(tmp_path):
    files = {}
    for name, text in ((NB1, "one"), (NB2, "two")):
        files[name] = tmp_path / f"{name}.ipynb"
        files[name].write_text(text)
    whole = submission_digest({**files, NOTEBOOKS[2]: None}, 1 << 20)
    # the same submission, the same salt
    assert whole == submission_digest({**files, NOTEBOOKS[2]: None}, 1 << 20)
    files[NB1].write_text("one, saved again")
    # notebook 01 changed: 02's salt too
    assert submission_digest({**files, NOTEBOOKS[2]: None}, 1 << 20) != whole
    assert submission_digest(dict(files), 1 << 20) != submission_digest(
        {**files, NOTEBOOKS[2]: None}, 1 << 20
    )
