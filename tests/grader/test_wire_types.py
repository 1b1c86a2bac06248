"""The types that replaced records passed as dicts: each writes the JSON the grader has always
written, key for key and in its order, and reads back what earlier versions wrote."""

from __future__ import annotations

import json

import pytest

from autograde.ledger.facts import SandboxInfo, Summary

# summary.json's sandbox, as each kind of run has written it
SANDBOXES = [
    {
        "enabled": True,
        "isolation": "bubblewrap",
        "bwrap": "/usr/bin/bwrap",
        "limits_by": "rlimit",
        "memory_limit_bytes": 4294967296,
        "process_limit": 256,
        "process_limit_enforced": True,
        "cpu_limit_cores": None,
        "disk_limit_bytes": 1073741824,
    },
    {"enabled": True, "isolation": "bubblewrap on every worker (each checked before the batch)"},
    {"enabled": False, "warning": "graded with --no-sandbox: submissions were not isolated"},
]


@pytest.mark.parametrize("written", SANDBOXES)
def test_a_sandbox_description_reads_back_as_it_was_written(written):
    info = SandboxInfo.from_json(written)
    assert json.dumps(info.to_json()) == json.dumps(written)
    assert info.enabled is written["enabled"]


def test_a_summary_without_a_sandbox_keeps_its_empty_object():
    summary = Summary.from_json({"columns": ["student_id"], "sandbox": {}})
    assert summary.sandbox is None and summary.to_json()["sandbox"] == {}
    described = Summary.from_json({"columns": [], "sandbox": SANDBOXES[0]})
    assert (
        described.sandbox.limits_by == "rlimit" and described.to_json()["sandbox"] == SANDBOXES[0]
    )


# the judge's result for a grade cell, as result.json has always held it
CELL = {
    "score": 1.0,
    "points": 2.0,
    "status": "graded",
    "ideas": [
        {
            "id": "first",
            "text": "t1",
            "points": 1.0,
            "earned": 1.0,
            "status": "passed",
            "message": "",
        },
        {
            "id": "second",
            "text": "t2",
            "points": 1.0,
            "earned": 0.0,
            "status": "failed",
            "message": "m",
            "said": {"t": "m", "v": []},
        },
    ],
}


def test_the_judges_result_reads_back_as_it_was_written():
    from autograde.model import CellResult, JobOutcome, LoadError

    result = CellResult.from_json(CELL)
    assert json.dumps(result.to_json()) == json.dumps(CELL)
    assert [i.status for i in result.ideas] == ["passed", "failed"] and result.ideas[1].said == {
        "t": "m",
        "v": [],
    }
    written = {
        "autograde": {},
        "timings": {},
        "judge": {"todo": CELL},
        "load_errors": [{"cell": 3, "error": "NameError"}],
        "scores": {"todo": 1.0},
    }
    outcome = JobOutcome.from_json(written)
    assert outcome.judge["todo"] == result and outcome.load_errors == (LoadError(3, "NameError"),)
    assert (
        outcome.to_json()["judge"] == {"todo": CELL}
        and outcome.to_json()["load_errors"] == written["load_errors"]
    )


def test_the_intakes_problems_read_back_as_they_were_written():
    from autograde.ledger.facts import IntakeFacts, IntakeProblem

    written = {
        "layout": "canvas",
        "students": {},
        "missing": ["s07"],
        "late_in_lms": {},
        "problems": [
            {"file": "readme.txt", "student_id": None, "problem": "not used"},
            {"file": "a.ipynb", "student_id": "s01", "problem": "x"},
        ],
        "notes": [],
    }
    facts = IntakeFacts.from_json(written)
    assert facts.problems == (
        IntakeProblem("readme.txt", None, "not used"),
        IntakeProblem("a.ipynb", "s01", "x"),
    )
    assert json.dumps(facts.to_json()) == json.dumps(written)


def test_a_kernels_counts_are_read_from_its_execute_reply():
    from autograde.run.kernels import KernelCounts

    def reply(status: str, threads="3", hooks="1") -> dict:
        said = {
            name: {"status": "ok", "data": {"text/plain": value}}
            for name, value in (("threads", threads), ("hooks", hooks))
        }
        return {"content": {"status": status, "user_expressions": said}}

    assert KernelCounts.of(reply("ok")) == KernelCounts(3, 1)
    assert (
        KernelCounts.of(reply("error")) == KernelCounts()
        and KernelCounts.of(None) == KernelCounts()
    )
    assert KernelCounts.of(reply("ok", hooks="not a number")) == KernelCounts(3, None)


@pytest.mark.parametrize(
    "said",
    [
        {"success": True, "log": "[INFO] done"},
        {"success": False, "error": "Traceback ...", "log": "[ERROR] x"},
        {},
    ],
)
def test_an_nbgrader_steps_log_is_written_as_nbgrader_returned_it(said):
    from autograde.model import JobOutcome, StepLog

    step = StepLog.from_json(said)
    assert json.dumps(step.to_json()) == json.dumps(said)
    written = JobOutcome(autograde=step, feedback=step).cut(5).to_json()
    assert written["autograde"] == {k: v[-5:] if isinstance(v, str) else v for k, v in said.items()}
    assert ("feedback" in written) == bool(said), "a step that did not run is left out, as before"


def test_a_summarys_late_problems_and_redactions_read_back_as_they_were_written():
    from autograde.ledger.facts import LateProblem, Redaction

    written = {
        "columns": ["student_id"],
        "late_problems": [{"student_id": "s08", "notebook": "01", "problem": "no submission time"}],
        "redactions": [{"student_id": "s01", "notebook": "04", "lines": 2}],
    }
    summary = Summary.from_json(written)
    assert summary.late_problems == [
        LateProblem("s08", "01", "no submission time")
    ] and summary.redactions == [Redaction("s01", "04", 2)]
    again = summary.to_json()
    assert (
        again["late_problems"] == written["late_problems"]
        and again["redactions"] == written["redactions"]
    )
