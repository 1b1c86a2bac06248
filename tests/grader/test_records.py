"""The typed spine: a notebook's Record and a worker's JobOutcome read what earlier versions of the
grader wrote (tests/data/records: a signed record from OUT/.state and log.jsonl lines, as the grader
wrote them before records were typed), write it back key for key, and keep the signature valid; and
the executor protocol the batch runs its jobs through."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autograde.ledger.store import cached_record, save_record
from autograde.model import JobOutcome, MalformedResult, Record, new_record

DATA = Path(__file__).resolve().parents[1] / "data" / "records"


def _saved(name: str) -> dict:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "name", ["graded.json", "invalid_notebook.json", "logged_late.json", "logged_missing.json"]
)
def test_a_record_written_before_reads_and_writes_back_key_for_key(name):
    data = _saved(name)
    record = Record.from_json(data)
    assert (record.student_id, record.notebook, record.status) == (
        data["student_id"],
        data["notebook"],
        data["status"],
    )
    # the same keys, values and order: log.jsonl unchanged
    assert list(record.to_json().items()) == list(data.items())


def test_the_fields_of_a_graded_record_are_typed():
    record = Record.from_json(_saved("graded.json"))
    assert record.graded and record.submitted and not record.cached
    assert record.total() == pytest.approx(sum(record.scores.values())) and record.total() > 0
    assert record.manual == {"reflection_01_q1": None, "reflection_01_q2": None}
    assert record.edition == "en" and isinstance(record.seconds, float) and record.signature
    late = Record.from_json(_saved("logged_late.json"))
    assert late.late.basis == "time" and late.late.penalty > 0
    missing = Record.from_json(_saved("logged_missing.json"))
    assert not missing.submitted and missing.total() == 0.0 and missing.file is None


def test_an_older_record_without_the_newer_keys_reads_with_their_defaults():
    oldest = {
        "student_id": "ana",
        "notebook": "01_what_can_overlap",
        "scores": {"todo0_check_overlap": 1.5},
        "status": "graded",
    }
    record = Record.from_json(oldest)
    assert (
        record.detail == ""
        and record.edition is None
        and record.changed_answers is None
        and record.late is None
    )
    assert record.to_json() == {**oldest, "detail": ""}


def test_a_key_this_version_does_not_know_is_kept():
    data = {**_saved("logged_late.json"), "reviewed_by": "a grader"}
    record = Record.from_json(data)
    assert record.extra == {"reviewed_by": "a grader"} and record.to_json() == data


@pytest.mark.parametrize("bad", [[], {"notebook": "x"}, {"student_id": 3, "notebook": "x"}])
def test_what_is_not_a_record_is_refused(bad):
    with pytest.raises(ValueError, match="not a grading record"):
        Record.from_json(bad)


def test_a_record_signed_before_is_reused_and_one_signed_now_reads_back_the_same(tmp_path):
    data = _saved("graded.json")
    state = tmp_path / ".state"
    (state / data["student_id"]).mkdir(parents=True)
    shutil.copy(DATA / "signing.key", state / ".key")
    shutil.copy(DATA / "graded.json", state / data["student_id"] / f"{data['notebook']}.json")
    reused = cached_record(tmp_path, data["student_id"], data["notebook"], data["fingerprint"])
    assert reused is not None and reused.to_json() == data
    assert cached_record(tmp_path, data["student_id"], data["notebook"], "another file") is None
    saved = save_record(
        tmp_path,
        new_record(
            "bo",
            "02_total_vs_exposed_time",
            "missing",
            "not found",
            file="x.ipynb",
            fingerprint="f",
        ),
        1.234,
    )
    again = cached_record(tmp_path, "bo", "02_total_vs_exposed_time", "f")
    assert again == saved and again.seconds == 1.23 and again.signature
    tampered = {**saved.to_json(), "status": "graded"}
    (state / "bo" / "02_total_vs_exposed_time.json").write_text(json.dumps(tampered))
    assert cached_record(tmp_path, "bo", "02_total_vs_exposed_time", "f") is None


# a result.json as run/job.py writes one for a graded notebook (its logs cut short)
RESULT = {
    "autograde": {"success": True, "log": "[AutogradeApp] Autograding\n", "error": ""},
    "timings": {"autograde": 1.5, "kernel_starts": 1, "judge": 0.3, "feedback": 0.4},
    "out_of_memory": False,
    "judge": {
        "todo0_check_overlap": {
            "score": 3.0,
            "points": 3.0,
            "status": "passed",
            "ideas": [
                {
                    "id": "minimal_items",
                    "status": "passed",
                    "earned": 3.0,
                    "points": 3.0,
                    "text": "t",
                    "message": "",
                    "said": None,
                }
            ],
        }
    },
    "load_errors": [],
    "runner_out_of_memory": False,
    "scores": {"todo0_check_overlap": 3.0},
    "manual": {"reflection_01_q1": None},
    "feedback": {"success": True, "log": "", "error": ""},
}


def test_one_parser_reads_a_workers_result():
    outcome = JobOutcome.from_json(RESULT)
    assert (
        outcome.scores == {"todo0_check_overlap": 3.0}
        and outcome.status is None
        and not outcome.out_of_memory
    )
    assert outcome.ideas() == {
        "todo0_check_overlap": [
            {"id": "minimal_items", "status": "passed", "earned": 3.0, "points": 3.0}
        ]
    }
    assert JobOutcome.from_json(outcome.to_json()) == outcome
    nothing = JobOutcome.from_json({})  # no result.json: the judge never scored it
    assert nothing.scores is None and nothing.log() == ""
    stopped = JobOutcome.from_json(
        {
            "outcome": {"status": "output_limit", "detail": "over 2 MB of output"},
            "autograde": {"log": "x"},
        }
    )
    assert (stopped.status, stopped.detail, stopped.scores) == (
        "output_limit",
        "over 2 MB of output",
        None,
    )
    unknown = JobOutcome.from_json({"outcome": {"status": "not a status", "detail": ""}})
    # the batch then says "error", with the log's last error line
    assert unknown.status is None and unknown.detail is None


def test_the_ranges_are_checked_when_the_points_are_given():
    points, manual = {"todo0_check_overlap": 3.0, "reflection_01_q1": 1.0}, {"reflection_01_q1"}
    JobOutcome.from_json(RESULT, points, manual)
    with pytest.raises(MalformedResult, match="score 'todo0_check_overlap'=4.0"):
        JobOutcome.from_json({**RESULT, "scores": {"todo0_check_overlap": 4.0}}, points, manual)
    with pytest.raises(MalformedResult, match="timings"):
        JobOutcome.from_json({**RESULT, "timings": {"autograde": "slow"}})


def test_both_executors_answer_the_batchs_protocol_and_the_options_choose_one():
    """The batch asks an executor five things (grading.Executor); the local and the cluster executor
    answer each with the same parameters, and ``executor_for`` picks one from the options alone."""
    import inspect

    from autograde.executors import executor_for
    from autograde.executors.cluster import ClusterExecutor
    from autograde.grading import Executor, LocalExecutor
    from autograde.model import Options

    asked = [
        name
        for name in ("check", "prestart", "sandbox", "prepare", "run")
        if callable(getattr(Executor, name, None))
    ]
    assert len(asked) == 5
    for executor in (LocalExecutor, ClusterExecutor):
        for name in asked:
            theirs = list(inspect.signature(getattr(Executor, name)).parameters)
            assert list(inspect.signature(getattr(executor, name)).parameters) == theirs, (
                executor.__name__,
                name,
            )
    assert isinstance(executor_for(Options()), LocalExecutor)
    assert isinstance(executor_for(Options(scheduler="tcp://127.0.0.1:1")), ClusterExecutor)
    with pytest.raises(ValueError, match="needs options.scheduler"):
        ClusterExecutor().check(Options())
    with pytest.raises(ValueError, match="ClusterExecutor"):
        LocalExecutor().check(Options(scheduler="tcp://127.0.0.1:1"))


def test_the_shared_codec_writes_fields_in_order_and_leaves_out_omitted_defaults():
    from autograde.model import CellResult, Disputed, IdeaResult, LateFacts, StepLog

    assert StepLog().to_json() == {} and StepLog(False, None, "x").to_json() == {
        "success": False,
        "log": "x",
    }
    late = LateFacts(
        1.5, "2026-12-03T10:00:00+00:00", lms_late=False, disputed=Disputed(None, "a", "b")
    )
    assert json.dumps(late.to_json()) == (
        '{"penalty": 1.5, "deadline": "2026-12-03T10:00:00+00:00", "disputed": '
        '{"claimed": null, "arrived": "a", "used": "b"}}'
    )
    assert (
        LateFacts.from_json(late.to_json()) == late
        and LateFacts.from_json({"penalty": 0, "disputed": {}}).disputed is None
    )
    cell = CellResult(
        3.0,
        3.0,
        "graded",
        (IdeaResult("a", "t", 3.0, 3.0), IdeaResult("b", "u", 0.0, said={"t": "x"})),
    )
    assert list(cell.to_json()) == ["score", "points", "status", "ideas"]
    assert [list(i) for i in cell.to_json()["ideas"]] == [
        ["id", "text", "points", "earned", "status", "message"],
        [*"id text points earned status message said".split()],
    ]
    assert CellResult.from_json(json.loads(json.dumps(cell.to_json()))) == cell


def test_the_shared_codec_writes_a_nested_plain_record_by_its_fields_and_a_renamed_field_first():
    from dataclasses import dataclass, field

    from autograde.model import JsonRecord, json_named

    @dataclass(frozen=True)
    class Inner:
        a: int
        b: tuple[int, ...] = ()

    @dataclass(frozen=True)
    class Outer(JsonRecord):
        x: str
        source: str = json_named("from")
        inner: list[Inner] = field(default_factory=list)

    assert json.dumps(Outer("x", "table", [Inner(1, (2, 3))]).to_json()) == (
        '{"from": "table", "x": "x", "inner": [{"a": 1, "b": [2, 3]}]}'
    )


def test_the_codec_writes_an_empty_object_at_a_default_and_a_flattened_mapping_last():
    from dataclasses import dataclass

    from autograde.model import JsonRecord, empty_at_default, flattened, omitted

    @dataclass(frozen=True)
    class Inner(JsonRecord):
        a: int = 0

    @dataclass(frozen=True)
    class Outer(JsonRecord):
        kept: Inner = empty_at_default(factory=Inner)
        maybe: Inner | None = empty_at_default()
        names: dict[str, str] = omitted(factory=dict)
        extra: dict = flattened()

    assert json.dumps(Outer(extra={"later": 1}).to_json()) == (
        '{"kept": {}, "maybe": {}, "later": 1}'
    )
    assert json.dumps(Outer(Inner(2), Inner(), {"x": "y"}).to_json()) == (
        '{"kept": {"a": 2}, "maybe": {"a": 0}, "names": {"x": "y"}}'
    )


def test_the_run_facts_write_what_they_always_wrote():
    import dataclasses

    from autograde.ledger.facts import (
        BookInfo,
        ClusterInfo,
        IntakeFacts,
        LmsStudent,
        SandboxInfo,
        Summary,
    )

    student = LmsStudent("canvas", "7", name="", zipped=("01",), extra={"new": True})
    assert json.dumps(student.to_json()) == (
        '{"layout": "canvas", "lms_id": "7", "name": "", "zipped": ["01"], "new": true}'
    )
    assert (
        LmsStudent.from_json(student.to_json()) == student
        and IntakeFacts(students={"s": student}).to_json()["students"]["s"] == student.to_json()
    )
    summary = Summary(students=1, columns=["a"])
    assert (
        summary.to_json()["gradebook"] == {}
        and summary.to_json()["sandbox"] == {}
        and "cluster" not in summary.to_json()
    )
    assert list(summary.to_json())[-2:] == ["sandbox", "redactions"]
    full = Summary(
        gradebook=BookInfo("x", 2),
        sandbox=SandboxInfo(True),
        cluster=ClusterInfo("tcp://h:1", 2),
        columns=["a"],
    )
    assert list(full.to_json())[-3:] == ["sandbox", "redactions", "cluster"] and full.to_json()[
        "gradebook"
    ] == {
        "db_url": "x",
        "notebooks_recorded": 2,
        "error": None,
    }
    # cluster: written, not read
    assert Summary.from_json(json.loads(json.dumps(full.to_json()))) == dataclasses.replace(
        full, cluster=None
    )
