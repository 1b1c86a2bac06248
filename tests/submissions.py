"""The tests' shared helpers. Build real submissions from the learner release: the release
notebook, with its exercise cells filled in the way a learner would (from the instructor's answer,
or a mutation of it); the plausible single mistakes (MISTAKES); grading a class (run_grade); and
the simulator's reference steps (the instructor's TODO 3, 4 and 6-8)."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from autograde.judging import judge
from autograde.model import CellResult
from tools.handoff.sim import STEPS
from tools.notebook_runtime import load_learner_functions

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "notebooks"
SOLUTIONS = ROOT / "solutions"
NOTEBOOKS = [
    "01_what_can_overlap",
    "02_total_vs_exposed_time",
    "03_handoff_state_contract",
    "04_decode_start_gate",
    "05_cuda_stream_overlap",
    "06_handoff_simulator",
]
_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$\n?", re.M)


def answer(grade_id: str) -> str:
    """The instructor's answer for a solution cell, as a learner would type it (no markers)."""
    for name in NOTEBOOKS:
        for cell in nbformat.read(SOLUTIONS / f"{name}.ipynb", 4).cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
                return _MARKER.sub("", cell.source)
    raise KeyError(grade_id)


def solution_ids(name: str) -> list[str]:
    return [
        c.metadata["nbgrader"]["grade_id"]
        for c in nbformat.read(RELEASE / f"{name}.ipynb", 4).cells
        if c.metadata.get("nbgrader", {}).get("solution")
    ]


def build(
    name: str, edits: dict[str, str] | None = None, fill: bool = True, edition: str = "en"
) -> nbformat.NotebookNode:
    """The release notebook ``name`` (of ``edition``: ``en`` or ``zh``) with every exercise answered
    (``fill``), then ``edits`` ({grade_id: new source}) applied."""
    nb = nbformat.read((RELEASE if edition == "en" else RELEASE / edition) / f"{name}.ipynb", 4)
    edits = dict(edits or {})
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in edits:
            cell.source = edits.pop(gid)
        elif fill and cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = answer(gid)
    assert not edits, f"unknown cells {list(edits)}"
    return nb


def mutate(grade_id: str, old: str, new: str) -> dict[str, str]:
    """An edit that replaces ``old`` by ``new`` in the answer of ``grade_id`` (must occur)."""
    source = answer(grade_id)
    assert old in source, f"{old!r} not in the answer of {grade_id}"
    return {grade_id: source.replace(old, new)}


def insert_after(nb: nbformat.NotebookNode, grade_id: str, source: str) -> nbformat.NotebookNode:
    """Add a plain code cell after the cell ``grade_id``."""
    for i, cell in enumerate(nb.cells):
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            nb.cells.insert(i + 1, nbformat.v4.new_code_cell(source))
            return nb
    raise KeyError(grade_id)


def drop_cell(nb: nbformat.NotebookNode, grade_id: str) -> nbformat.NotebookNode:
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != grade_id]
    return nb


def grade_command(subs: Path, out: Path, *extra: str) -> list[str]:
    """The command line ``python -m autograde grade SUBS --out OUT --no-progress`` with ``extra``
    options."""
    return [
        sys.executable,
        "-m",
        "autograde",
        "grade",
        str(subs),
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


def run_grade(
    subs: Path, out: Path, *extra: str, check: bool = True
) -> subprocess.CompletedProcess:
    """``python -m autograde grade SUBS --out OUT`` with ``extra`` options; asserts success when
    ``check``."""
    proc = subprocess.run(
        grade_command(subs, out, *extra),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def troubles(out: Path) -> str:
    """What went wrong in a graded OUT, for an assertion's message: every record neither graded nor
    missing, with its detail, and the grader's own fault tracebacks
    (OUT/logs/*/grader-faults.log)."""
    lines = []
    log = out / "log.jsonl"
    for line in log.read_text(encoding="utf-8").splitlines() if log.is_file() else []:
        record = json.loads(line)
        if record.get("status") not in ("graded", "missing"):
            lines.append(
                f"{record['student_id']}/{record['notebook']}: {record['status']}: "
                f"{record.get('detail', '')}"
            )
    for fault in sorted(out.glob("logs/*/grader-faults.log")):
        lines.append(f"{fault}:\n{fault.read_text(encoding='utf-8')[-4000:]}")
    return "\n".join(lines) or "(no notebook failed and the grader had no fault)"


def write(folder: Path, student: str, name: str, nb, filename: str | None = None) -> Path:
    target = folder / student / (filename or f"{name}.ipynb")
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return target


# Plausible single mistakes, one per learner: (student, grade cell, solution cell, old, new, the
# hidden ideas it must lose). Each loses its own idea and no other
# (tests/grader/judging/test_idea_isolation.py checks every row in-process); the rows named in
# GRADED_MISTAKES also go through the whole grading pipeline in tests/grader/test_grading.py, which
# checks the points.
MISTAKES = [
    # TODO 0 · check_overlap
    (
        "w0_no_state",
        "todo0_check_overlap",
        "todo0_solution",
        "reasons.append('shared_state')",
        "pass",
        {"state_conflicts"},
    ),
    (
        "w0_one_way_dep",
        "todo0_check_overlap",
        "todo0_solution",
        "if first['name'] in second.get('after', []) or second['name'] in first.get('after', []):",
        "if first['name'] in second.get('after', []):",
        {"dependency"},
    ),
    (
        "w0_readers_conflict",
        "todo0_check_overlap",
        "todo0_solution",
        "if set(first.get('writes', [])) & second_touches or set(second.get('writes', "
        "[])) & first_touches:",
        "if first_touches & second_touches:",
        {"state_conflicts"},
    ),
    (
        "w0_keys_required",
        "todo0_check_overlap",
        "todo0_solution",
        "set(first.get('links', [])) & set(second.get('links', []))",
        "set(first['links']) & set(second['links'])",
        {"minimal_items"},
    ),
    (
        "w0_engine_last",
        "todo0_check_overlap",
        "todo0_solution",
        "    if first['engine'] == second['engine']:\n        reasons.append('same_engine')\n"
        "    if set(first.get('links', [])) & set(second.get('links', [])):\n        "
        "reasons.append('shared_link')\n",
        "    if set(first.get('links', [])) & set(second.get('links', [])):\n        "
        "reasons.append('shared_link')\n"
        "    if first['engine'] == second['engine']:\n        reasons.append('same_engine')\n",
        {"reason_order"},
    ),
    # TODO 1 · compute_exposed_interval
    (
        "w1_no_merge",
        "todo1_exposed_interval",
        "todo1_solution",
        "in merged)",
        "in clipped)",
        {"merge"},
    ),
    (
        "w1_no_clip",
        "todo1_exposed_interval",
        "todo1_solution",
        "clipped = sorted((max(start, a), min(end, b)) for a, b in cover_intervals if "
        "min(end, b) > max(start, a))",
        "clipped = sorted((a, b) for a, b in cover_intervals if b > a)",
        {"clip"},
    ),
    (
        "w1_keeps_empty",
        "todo1_exposed_interval",
        "todo1_solution",
        " for a, b in cover_intervals if min(end, b) > max(start, a))",
        " for a, b in cover_intervals)",
        {"clip"},
    ),
    (
        "w1_no_sort",
        "todo1_exposed_interval",
        "todo1_solution",
        "clipped = sorted((max(start, a), min(end, b)) for a, b in cover_intervals if "
        "min(end, b) > max(start, a))",
        "clipped = [(max(start, a), min(end, b)) for a, b in cover_intervals if min(end, "
        "b) > max(start, a)]",
        {"sorted"},
    ),
    (
        "w1_relative_clip",
        "todo1_exposed_interval",
        "todo1_solution",
        "clipped = sorted((max(start, a), min(end, b)) for a, b in cover_intervals if "
        "min(end, b) > max(start, a))",
        "clipped = sorted((max(0.0, a), min(end - start, b)) for a, b in cover_intervals "
        "if min(end - start, b) > max(0.0, a))",
        {"absolute_timeline"},
    ),
    # TODO 2 · estimate_handoff
    (
        "w2_bits_as_bytes",
        "todo2_estimate_handoff",
        "todo2_solution",
        "bandwidth_gbps * 1e9 / 8 / 1000",
        "bandwidth_gbps * 1e9 / 1000",
        {"units"},
    ),
    (
        "w2_latency_scaled",
        "todo2_estimate_handoff",
        "todo2_solution",
        "transfer_ms = fixed_latency_ms + payload_bytes / bytes_per_ms",
        "transfer_ms = (fixed_latency_ms * 1000 + payload_bytes) / bytes_per_ms",
        {"latency_added"},
    ),
    (
        "w2_per_second",
        "todo2_estimate_handoff",
        "todo2_solution",
        "bandwidth_gbps * 1e9 / 8 / 1000",
        "bandwidth_gbps * 1e9 / 8",
        {"units"},
    ),
    (
        "w2_binary_giga",
        "todo2_estimate_handoff",
        "todo2_solution",
        "bandwidth_gbps * 1e9 / 8 / 1000",
        "bandwidth_gbps * 2**30 / 8 / 1000",
        {"units"},
    ),
    (
        "w2_latency_divided",
        "todo2_estimate_handoff",
        "todo2_solution",
        "transfer_ms = fixed_latency_ms + payload_bytes / bytes_per_ms",
        "transfer_ms = (fixed_latency_ms + payload_bytes) / bytes_per_ms",
        {"latency_added"},
    ),
    # TODO 3 · validate_handoff_state
    (
        "w3_absent_only",
        "todo3_validate_state",
        "todo3_solution",
        "if not handoff_state.get(name, False)]",
        "if name not in handoff_state]",
        {"falsy_missing"},
    ),
    (
        "w3_version_only",
        "todo3_validate_state",
        "todo3_solution",
        "if handoff_state.get('request_id') != expected_request_id:\n        "
        "incompatible.append('request_id')\n    ",
        "",
        {"identity"},
    ),
    (
        "w3_is_true",
        "todo3_validate_state",
        "todo3_solution",
        "if not handoff_state.get(name, False)]",
        "if handoff_state.get(name) is not True]",
        {"truthy_ready"},
    ),
    (
        "w3_sorted_names",
        "todo3_validate_state",
        "todo3_solution",
        "for name in required if",
        "for name in sorted(required) if",
        {"missing_in_order"},
    ),
    (
        "w3_loose_version",
        "todo3_validate_state",
        "todo3_solution",
        "if handoff_state.get('version') != expected_version:",
        "if str(handoff_state.get('version')) != str(expected_version):",
        {"identity"},
    ),
    # TODO 4 · plan_decode_start
    (
        "w4_strict_deadline",
        "todo4_plan_decode",
        "todo4_solution",
        "ready_at_ms <= deadline_ms",
        "ready_at_ms < deadline_ms",
        {"deadline_inclusive"},
    ),
    (
        "w4_reversed",
        "todo4_plan_decode",
        "todo4_solution",
        "ready_at_ms <= deadline_ms",
        "deadline_ms <= ready_at_ms",
        {"deadline_inclusive"},
    ),
    # TODO 5 · decide_overlap
    (
        "w5_ignores_controls",
        "todo5_decide_overlap",
        "todo5_solution",
        "    if not controls or any(control.get('overlap_confirmed') is not False for "
        "control in controls):\n"
        "        return 'reject_instrument_fault'\n",
        "",
        {"controls_behave"},
    ),
    (
        "w5_truthy_controls",
        "todo5_decide_overlap",
        "todo5_solution",
        " is not False for control",
        " for control",
        {"controls_behave"},
    ),
    (
        "w5_strict_ratio",
        "todo5_decide_overlap",
        "todo5_solution",
        "<= 0.75",
        "< 0.75",
        {"calibrated_bar"},
    ),
    (
        "w5_any_payload",
        "todo5_decide_overlap",
        "todo5_solution",
        "all(meets_bar(case) for case in calibrated)",
        "any(meets_bar(case) for case in calibrated)",
        {"every_payload"},
    ),
    (
        "w5_fixed_bound",
        "todo5_decide_overlap",
        "todo5_solution",
        "case['bound_factor'] * bound",
        "1.15 * bound",
        {"calibrated_bar"},
    ),
    (
        "w5_ignores_preconditions",
        "todo5_decide_overlap",
        "todo5_solution",
        " and case.get('preconditions_met')",
        "",
        {"correctness_first"},
    ),
    (
        "w5_one_sided_noise",
        "todo5_decide_overlap",
        "todo5_solution",
        "abs(case['serial_median_ms'] / case['predicted_serial_ms'] - 1) > 0.25",
        "case['serial_median_ms'] / case['predicted_serial_ms'] - 1 > 0.25",
        {"noisy_machine"},
    ),
    # TODO 6 · stream_layers
    (
        "w6_no_last_layer",
        "todo6_stream_layers",
        "todo6_solution",
        "end = max(start + transfer, prefill_done + payload_ms / layers)",
        "end = start + transfer",
        {"layerwise_bound"},
    ),
    (
        "w6_latency_per_layer",
        "todo6_stream_layers",
        "todo6_solution",
        "transfer = latency_ms + payload_ms",
        "transfer = latency_ms * layers + payload_ms",
        {"latency_once"},
    ),
    (
        "w6_exposed_from_prefill_end",
        "todo6_stream_layers",
        "todo6_solution",
        "exposed = end - max(start, prefill_done)",
        "exposed = end - prefill_done",
        {"whole_send"},
    ),
    (
        "w6_hidden_sign",
        "todo6_stream_layers",
        "todo6_solution",
        "'hidden_ms': transfer - exposed",
        "'hidden_ms': exposed - transfer",
        {"hidden_is_rest"},
    ),
    # TODO 7 · handoff_step
    (
        "w7_wait_starts_now",
        "todo7_handoff_step",
        "todo7_solution",
        "'act_ms': ready_at, 'decode_start_ms': ready_at}",
        "'act_ms': now, 'decode_start_ms': now}",
        {"ready_and_wait"},
    ),
    (
        "w7_never_given_up_now",
        "todo7_handoff_step",
        "todo7_solution",
        "max(now, deadline) if decision == 'fallback' and ready_at is None else now",
        "now",
        {"never_lands"},
    ),
    (
        "w7_recompute_waits_for_never",
        "todo7_handoff_step",
        "todo7_solution",
        "max(now, deadline) if decision == 'fallback' and ready_at is None else now",
        "max(now, deadline) if ready_at is None else now",
        {"give_up_now"},
    ),
    (
        "w7_fail_recomputes",
        "todo7_handoff_step",
        "todo7_solution",
        "if handoff['policy'] == 'fail':",
        "if False:",
        {"failure_policy"},
    ),
    (
        "w7_any_policy",
        "todo7_handoff_step",
        "todo7_solution",
        "if handoff['policy'] not in ('recompute', 'fail'):",
        "if False:",
        {"policy_checked"},
    ),
    # TODO 8 · ttft_percentiles
    (
        "w8_nearest_rank",
        "todo8_ttft_percentiles",
        "todo8_solution",
        "result.append(values[below] + (values[above] - values[below]) * (rank - below))",
        "result.append(values[round(rank)])",
        {"linear_interpolation"},
    ),
    (
        "w8_negative_q",
        "todo8_ttft_percentiles",
        "todo8_solution",
        "if not 0 <= q <= 100:",
        "if q > 100:",
        {"bad_input"},
    ),
]
# the rows graded through the whole pipeline (the ones the grading tests used before the full list)
GRADED_MISTAKES = (
    "w0_no_state",
    "w0_one_way_dep",
    "w1_no_merge",
    "w1_no_clip",
    "w2_bits_as_bytes",
    "w2_latency_scaled",
    "w3_absent_only",
    "w3_version_only",
    "w4_strict_deadline",
    "w5_ignores_controls",
    "w5_truthy_controls",
    "w5_strict_ratio",
    "w5_any_payload",
    "w5_fixed_bound",
    "w5_ignores_preconditions",
    "w5_one_sided_noise",
    "w6_no_last_layer",
    "w6_latency_per_layer",
    "w7_wait_starts_now",
    "w7_never_given_up_now",
    "w7_fail_recomputes",
    "w8_nearest_rank",
    "w8_negative_q",
)


# ------------------------------------------------------------------ the simulator's reference steps
# The instructor's answers to TODO 3 and TODO 4: the gate the reference handoff_step runs on.
GATE = {
    **load_learner_functions("03_handoff_state_contract", ["validate_handoff_state"], [SOLUTIONS]),
    **load_learner_functions("04_decode_start_gate", ["plan_decode_start"], [SOLUTIONS]),
}


def reference_steps(validate=None, plan=None) -> dict:
    """The instructor's answers to TODO 6-8, read from notebook 06's solution cells (the simulator,
    which learners receive, ships none), with handoff_step running on the given Step 3 and Step 4
    functions (by default the instructor's)."""
    scope = {
        "validate_handoff_state": validate or GATE["validate_handoff_state"],
        "plan_decode_start": plan or GATE["plan_decode_start"],
    }
    for grade_id in ("todo6_solution", "todo7_solution", "todo8_solution"):
        exec(compile(answer(grade_id), f"<{grade_id}>", "exec"), scope)
    return {name: scope[name] for name in STEPS}


REFERENCE = reference_steps()


# ------------------------------------------------------------------ the judge, in this process
# The judge's own code (judge_cell: the ideas and the public checks that name them, _Proxy,
# Runner.call with its callbacks for stand-ins, encode/decode, the arguments mirrored back) talks
# to runner.py's own code (runner.call, its encode and its stand-in callbacks) over the same JSON
# lines; only the process in between is missing: the answer is defined by exec in the namespace the
# runner calls from (as runner.load does), and a call that runs past its time is stopped by SIGALRM
# instead of a killed process. Fast enough to judge hundreds of answers in one process.


class _CallTimeout(BaseException):
    """A call in the in-process runner ran past its time."""


class InProcessRunner(judge.Runner):
    """judge.Runner's protocol with runner.py answering in this process, from ``namespace``."""

    # no process: replies are queued here
    def __init__(self, namespace: dict, call_timeout: float = 5.0):
        self.namespace, self.call_timeout, self.loaded, self.died, self._pending = (
            namespace,
            call_timeout,
            None,
            False,
            None,
        )
        self._replies: list[str] = []
        self._answers: list[dict] = []
        self._stand_ins: dict = {}

    def alive(self) -> bool:
        return True

    def kill(self) -> None:
        pass

    def close(self) -> None:
        pass

    def call(self, name, args, kwargs, stand_ins):
        self._stand_ins = stand_ins
        return super().call(name, args, kwargs, stand_ins)

    def send(self, message, deadline=None) -> None:
        message = json.loads(json.dumps(message))  # the wire
        if message.get("op") == "call":
            self._replies.append(_runner_answers(self, message))
        else:  # a callback's answer, read by the runner's stand-in
            self._answers.append(message)

    def receive(self, timeout) -> dict:
        return json.loads(self._replies.pop(0))


def _runner_answers(judge_side: InProcessRunner, message: dict) -> str:
    """What runner.py's main loop replies to one call (its stand-ins' callbacks answered by the
    judge's own _answer_callback), as the JSON line it would write."""
    import signal

    from autograde.judging import runner as sandbox_side

    namespace, call_timeout = judge_side.namespace, judge_side.call_timeout

    def runner_send(reply):  # the runner's stand-in asks the judge: answered at once, in order
        judge_side._answer_callback(
            json.loads(json.dumps(reply)), judge_side._stand_ins, time.monotonic() + call_timeout
        )

    def runner_receive():
        return judge_side._answers.pop(0)

    def on_alarm(signum, frame):
        raise _CallTimeout()

    saved = sandbox_side.NAMESPACE, sandbox_side.send, sandbox_side.receive
    sandbox_side.NAMESPACE, sandbox_side.send, sandbox_side.receive = (
        namespace,
        runner_send,
        runner_receive,
    )
    previous = signal.signal(signal.SIGALRM, on_alarm)
    # an outer alarm (pytest-timeout) is put back after
    started, (outer, _) = time.monotonic(), signal.setitimer(signal.ITIMER_REAL, call_timeout)
    try:
        try:
            reply = sandbox_side.call(message)
        except _CallTimeout:
            raise judge.RunnerFailed(
                f"your code did not answer in time ({call_timeout:g} s per call)"
            ) from None
        except BaseException as exc:  # noqa: BLE001 - as runner.main: anything the learner's code raises is an answer
            reply = {"op": "exception", "mro": sandbox_side._mro(exc), "message": str(exc)[:2000]}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001))
        sandbox_side.NAMESPACE, sandbox_side.send, sandbox_side.receive = saved
    try:
        return json.dumps(reply, allow_nan=True)
    except (TypeError, ValueError) as exc:
        return json.dumps(
            {"op": "exception", "mro": sandbox_side._mro(exc), "message": str(exc)[:2000]}
        )


class _InProcessSession:
    def __init__(self, runner):
        self.runner = runner

    def ready(self, cells):
        return self.runner, []


@functools.cache
def course_cells() -> tuple[dict, dict]:
    """({grade cell id: its test, as judge.json holds it}, {solution cell id: its source})."""
    from autograde.judging.ideas import course_tests

    found = course_tests([SOLUTIONS / f"{name}.ipynb" for name in NOTEBOOKS])
    tests = found.cells
    solutions = {
        sid: source for sid, source in found.solutions.items() if not sid.startswith("reflection_")
    }
    return tests, solutions


def judge_in_process(cell: str, answers: dict[str, str], public: bool = True) -> CellResult:
    """judge.judge_cell's result for the grade cell ``cell`` against ``answers`` ({solution cell id:
    source}, defined on top of the course's answers), run in this process (above); ``public=False``
    runs the hidden ideas alone."""
    tests, solutions = course_cells()
    namespace = {"__name__": "__main__"}
    for source in {**solutions, **answers}.values():
        exec(compile(source, "<answer>", "exec"), namespace)  # noqa: S102 - the course's answers, or one with a mutation
    test = tests[cell] if public else dataclasses.replace(tests[cell], public="")
    return judge.judge_cell(test, solutions, _InProcessSession(InProcessRunner(namespace)), [])


def lost_in_judge(cell: str, answers: dict[str, str], public: bool = True) -> set[str]:
    """The ideas of ``cell`` that ``answers`` do not earn in the judge (judge_in_process)."""
    result = judge_in_process(cell, answers, public)
    return {i.id for i in result.ideas if i.earned < i.points}


def public_failures(cell: str, answers: dict[str, str], wrap=None) -> list[dict]:
    """The public checks of ``cell`` that fail in a learner's notebook with ``answers`` ({solution
    cell id: source}, on top of the course's answers): the cell's open part run as the notebook runs
    it (tools.checks.PublicChecks, the functions called directly). ``wrap(namespace)``, if given,
    may replace the answers' functions before the checks run. Returns [{name, status, message}]."""
    import contextlib
    import io
    import os
    import tempfile

    from tools import checks

    tests, solutions = course_cells()
    namespace = {"__name__": "__main__"}
    for source in {**solutions, **answers}.values():
        exec(compile(source, "<answer>", "exec"), namespace)  # noqa: S102
    if wrap is not None:
        wrap(namespace)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "checks.jsonl"
        saved = {k: os.environ.get(k) for k in (checks.REPORT_ENV, checks.STOP_ENV)}
        os.environ[checks.REPORT_ENV], os.environ[checks.STOP_ENV] = str(report), "1"
        try:
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                try:
                    exec(
                        compile(tests[cell].public, f"<public checks of {cell}>", "exec"), namespace
                    )  # noqa: S102
                except checks.PublicChecksFailed:
                    pass
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        suites = (
            [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()]
            if report.exists()
            else []
        )
    assert len(suites) == 1, f"{cell}: the public checks did not run ({len(suites)} reports)"
    return [case for case in suites[0]["cases"] if case["status"] != checks.PASS]


# A learner who never solves a TODO but makes its public checks pass: run the public checks once
# against the course's answer, keep every call and what it returned (or raised), and submit
# functions that look each call up in that table. The learner's notebook shows every check green;
# the hidden ideas call with other inputs and must find nothing behind the table.
_REPLAY = """import json as _json, pickle as _pickle
_TABLE = {table!r}


def _replay(name, args, kwargs):
    found = _TABLE.get(_json.dumps([name, args, kwargs], sort_keys=True, default=repr))
    if found is None:
        return None
    how, value = _pickle.loads(found)
    if how == "raise":
        raise value
    return value
"""


def _call_key(name: str, args: tuple, kwargs: dict) -> str:
    # tuples and lists alike, as on the judge's wire
    return json.dumps([name, args, kwargs], sort_keys=True, default=repr)


def replay_answer(cell: str, solution_id: str) -> str:
    """The source of an answer for ``solution_id`` that replays the public checks of grade cell
    ``cell`` (see _REPLAY), and returns None for any call the checks did not make."""
    import ast
    import pickle

    tests, solutions = course_cells()
    names = [
        node.name
        for node in ast.parse(solutions[solution_id]).body
        if isinstance(node, ast.FunctionDef)
    ]
    table: dict[str, bytes] = {}

    def recorded(name, fn):
        def call(*args, **kwargs):
            try:
                value = fn(*args, **kwargs)
            except Exception as exc:
                table[_call_key(name, args, kwargs)] = pickle.dumps(("raise", exc))
                raise
            table[_call_key(name, args, kwargs)] = pickle.dumps(("return", value))
            return value

        return call

    public_failures(
        cell,
        {},
        wrap=lambda namespace: namespace.update({n: recorded(n, namespace[n]) for n in names}),
    )
    assert table, f"{cell}: the public checks called none of {names}"
    functions = "".join(
        f"\n\ndef {n}(*args, **kwargs):\n    return _replay({n!r}, args, kwargs)\n" for n in names
    )
    return _REPLAY.format(table=table) + functions


def do_nothing_answer(solution_id: str) -> str:
    """The control for replay_answer: the same functions, each returning None."""
    import ast

    _, solutions = course_cells()
    names = [
        node.name
        for node in ast.parse(solutions[solution_id]).body
        if isinstance(node, ast.FunctionDef)
    ]
    return "".join(f"def {n}(*args, **kwargs):\n    return None\n\n\n" for n in names)
