"""Step 5's result files: a new result, the learner's decision filled in, written atomically.

The decision itself is the learner's TODO 5 (``decide_overlap(cases, controls)``); ``finalize``
only calls it, checks what it returned, maps an acceptance of a CPU run to the CPU analogue's
own decision, and records the reason for the verdict.

A run on the tests' stand-in for ``torch.cuda`` (``hardware.provenance`` ``'stand_in'``) is a timing
model, not a measurement: its evidence level says so, its reason starts by saying so, and
``write_result`` never writes it.
"""

from __future__ import annotations

import copy
import platform
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from ..at_grading import grading_mode
from ..i18n import (
    AND,
    COMMA,
    LIST,
    N_,
    SEMICOLON,
    SENTENCES,
    Message,
    english,
    joined,
    localize,
    tr,
)
from ..notebook_runtime import package_version
from ..project_runtime import results_dir, write_json_atomic
from .load import busy_machine, describe_load
from .schema import CPU_ACCEPT, LEARNER_DECISIONS, SCHEMA_VERSION, SEMANTIC_ID, validate_result

# the decision's reason in English in the result file; translated where a notebook prints it
REASONS = {
    "accept_physical_overlap": N_(
        "every case is correct, the controls came out unconfirmed, and each payload's "
        "calibrated case overlapped: ratio <= 0.75, overlapped median within its bound_factor "
        "(1.15 on a GPU) x max(copy, compute), overlapped P95 below the serial median"
    ),
    CPU_ACCEPT: N_(
        "the CPU analogue overlapped (the GPU's rule, with the CPU's bound_factor 1.30: "
        "two threads "
        "share the memory bus); this says nothing about copy engines, pinned memory or streams"
    ),
    "tune_overlap_window": N_(
        "correct and the controls behave, but at least one payload's calibrated case did not "
        "meet the bar (see its ratio, its bound and its P95): resize the window or the payload"
    ),
    "reject_incorrect_path": N_(
        "a case copied or computed a wrong result, or was not issued on the overlap path "
        "(distinct streams or threads, pinned source, non_blocking): a fast wrong answer "
        "is no evidence"
    ),
    "reject_instrument_fault": N_(
        "a negative control (which cannot overlap) came out confirmed, or no control ran: "
        "the instrument cannot be trusted, so neither can the cases"
    ),
    "rerun_on_quiet_machine": N_(
        "the machine was too noisy to measure (a serial median far from copy + compute, or a "
        "wide spread): close other programs and rerun; this is not a verdict on the path"
    ),
}


STAND_IN_EVIDENCE = "stand_in_timing_model"
STAND_IN = N_(
    "Stand-in for torch.cuda: a timing model, not a measurement. TODO 5's rule on its "
    "numbers: {reason}"
)
STAND_IN_NOTE = STAND_IN.split("{")[0]  # how a stand-in's reason begins


def is_stand_in(result: dict) -> bool:
    """Whether ``result`` came from a stand-in for ``torch.cuda`` (a test's timing model)."""
    return (
        result.get("hardware", {}).get("provenance") == "stand_in"
        or result.get("evidence_level") == STAND_IN_EVIDENCE
    )


def evidence_level(result: dict) -> str:
    """What a finished run's numbers are: the CPU analogue's, a GPU's, or a stand-in's timing
    model."""
    if result["run_mode"] == "real_cpu":
        return "cpu_analogue_benchmark"
    return STAND_IN_EVIDENCE if is_stand_in(result) else "local_mechanism_benchmark"


def cuda_available(cheap: bool = False) -> bool:
    """Whether torch sees a CUDA device. ``cheap`` (a dry run): without an NVIDIA driver torch
    cannot see one, so say False without importing torch (seconds on a CPU-only machine); with a
    driver, ask torch."""
    if cheap:
        from ..notebook_runtime import nvidia_driver_present

        if not nvidia_driver_present():
            return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


def new_result(run_mode: str, run_label: str, environment_profile: str, workload: dict) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "semantic_id": SEMANTIC_ID,
        "run_mode": run_mode,
        "run_label": run_label,
        "environment_profile": environment_profile,
        "framework": {"torch": package_version("torch"), "python": platform.python_version()},
        # a graded dry run never touches the device: importing torch alone costs seconds per
        # notebook
        "hardware": {
            "cuda_available": False
            if run_mode == "dry_run" and grading_mode()
            else cuda_available(cheap=run_mode == "dry_run")
        },
        "workload": workload,
        "cases": [],
        "controls": [],
        "failure": None,
        "evidence_level": "dry_run",
        "decision": "not_measured",
        "decision_reason": None,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


# TODO 5's thresholds, as its prompt states them: the reason names the condition that fired, with
# its numbers.
NOISE_OFF_MODEL = 0.25  # rule 3: serial median more than 25% away from copy + compute
NOISE_SPREAD = 1.5  # rule 3: serial P95 more than 1.5 x the serial median
BAR_RATIO = 0.75  # rule 4: latency ratio at most 0.75
# rule 4: overlapped median within the case's bound_factor x max(copy, compute) (1.15 on a GPU, 1.30
# on the CPU)


# a case's window as a reason names it ("64 MiB calibrated"): translated where it is shown
WINDOW_NAMES = {"fixed": N_("fixed"), "calibrated": N_("calibrated")}


def case_label(case: dict) -> Message:
    window = case.get("window", "?")
    return Message(
        "{mib} MiB {window}",
        mib=format(case["payload_mib"], "g"),
        window=Message(WINDOW_NAMES.get(window, window)),
    )


def _calibrated_summary(cases: list[dict]):
    parts = []
    for c in cases:
        if c.get("window") == "calibrated":
            bound = max(c["copy_alone_ms"], c["compute_alone_ms"])
            parts.append(
                Message(
                    "{mib} MiB: ratio {ratio}, overlapped median / max(copy, compute) "
                    "{share} (bound {bound}), "
                    "overlapped P95 {p95} ms {sign} serial median {serial} ms",
                    mib=format(c["payload_mib"], "g"),
                    ratio=format(c["latency_ratio"], ".2f"),
                    share=format(c["overlap_median_ms"] / bound, ".2f"),
                    bound=format(c["bound_factor"], "g"),
                    p95=format(c["overlap_p95_ms"], ".2f"),
                    sign="<" if c["overlap_p95_ms"] < c["serial_median_ms"] else ">=",
                    serial=format(c["serial_median_ms"], ".2f"),
                )
            )
    return joined(parts, SEMICOLON)


def noise_conditions(case: dict) -> list[Message]:
    """Rule 3's conditions that hold for ``case``, each with its numbers (empty on a quiet
    machine)."""
    out = []
    serial, predicted, p95 = (
        case["serial_median_ms"],
        case["predicted_serial_ms"],
        case["serial_p95_ms"],
    )
    off = serial / predicted - 1
    if abs(off) > NOISE_OFF_MODEL:
        template = (
            N_("serial median {serial} ms is {off} above copy + compute {predicted} ms (> {limit})")
            if off > 0
            else N_(
                "serial median {serial} ms is {off} below copy + compute {predicted} ms (> {limit})"
            )
        )
        out.append(
            Message(
                template,
                serial=format(serial, ".2f"),
                off=format(abs(off), ".0%"),
                predicted=format(predicted, ".2f"),
                limit=format(NOISE_OFF_MODEL, ".0%"),
            )
        )
    if p95 > NOISE_SPREAD * serial:
        out.append(
            Message(
                "serial P95 {p95} ms > {factor} x serial median {serial} ms",
                p95=format(p95, ".2f"),
                factor=format(NOISE_SPREAD, "g"),
                serial=format(serial, ".2f"),
            )
        )
    return out


def bar_misses(case: dict) -> list[Message]:
    """Rule 4's conditions that ``case`` misses, each with its numbers (empty when it meets the
    bar)."""
    out = []
    bound = max(case["copy_alone_ms"], case["compute_alone_ms"])
    if not case.get("overlap_confirmed"):
        out.append(Message("overlap not confirmed"))
    if case["latency_ratio"] > BAR_RATIO:
        out.append(
            Message(
                "ratio {ratio} > {bar}",
                ratio=format(case["latency_ratio"], ".2f"),
                bar=format(BAR_RATIO, "g"),
            )
        )
    if case["overlap_median_ms"] > case["bound_factor"] * bound:
        out.append(
            Message(
                "overlapped median {median} ms > {factor} x max(copy, compute) {bound} ms",
                median=format(case["overlap_median_ms"], ".2f"),
                factor=format(case["bound_factor"], "g"),
                bound=format(bound, ".2f"),
            )
        )
    if case["overlap_p95_ms"] >= case["serial_median_ms"]:
        out.append(
            Message(
                "overlapped P95 {p95} ms >= serial median {serial} ms",
                p95=format(case["overlap_p95_ms"], ".2f"),
                serial=format(case["serial_median_ms"], ".2f"),
            )
        )
    return out


def what_fired(decision: str, cases: list[dict], controls: list[dict]):
    """The measured conditions behind ``decision``, with their numbers (a Message); when none holds,
    says so (the decision then came from a TODO 5 that does not follow its rule)."""
    calibrated = [c for c in cases if c.get("window") == "calibrated"]

    def listed(found: list, rule: int, none: str):
        return (
            joined(found, SEMICOLON)
            if found
            else Message("{what}: check TODO 5's rule {rule}", what=Message(none), rule=rule)
        )

    def named(case: dict, what) -> Message:
        return Message("{case}: {what}", case=case_label(case), what=what)

    if decision == "reject_incorrect_path":
        fields = ("copy_correct", "compute_correct", "preconditions_met")
        found = [
            named(
                c,
                Message(
                    "{fields} not true", fields=joined([f for f in fields if not c.get(f)], LIST)
                ),
            )
            for c in cases
            if not all(c.get(f) for f in fields)
        ]
        return listed(found, 1, N_("every case is correct and on the overlap path"))
    if decision == "reject_instrument_fault":
        if not controls:
            return Message("no negative control ran")
        found = [
            Message(
                "control {name}: overlap_confirmed is {value}",
                name=c.get("name", "?"),
                value=repr(c.get("overlap_confirmed")),
            )
            for c in controls
            if c.get("overlap_confirmed") is not False
        ]
        return listed(found, 2, N_("every control came out not confirmed"))
    if decision == "rerun_on_quiet_machine":
        found = [named(c, joined(conds, AND)) for c in calibrated if (conds := noise_conditions(c))]
        return listed(found, 3, N_("no calibrated case meets either noise condition"))
    if decision == "tune_overlap_window":
        if not calibrated:
            return Message("no calibrated case was measured")
        found = [named(c, joined(misses, COMMA)) for c in calibrated if (misses := bar_misses(c))]
        return listed(found, 4, N_("every calibrated case meets the bar"))
    return _calibrated_summary(cases)


def _load_note(result: dict) -> Message | None:
    """On the CPU, a busy machine takes the copy thread's core: say so when other programs were
    busy.

    The run's own threads never count: ``load_average_1m`` is sampled before the run starts and
    ``other_cpu_cores`` is the machine's busy time during the run minus the run's own CPU time
    (``overlap_load``)."""
    hw = result["hardware"]
    load, cpus, others = (
        hw.get("load_average_1m"),
        hw.get("logical_cpus"),
        hw.get("other_cpu_cores"),
    )
    # the matmul threads and the copy thread
    threads = result["workload"].get("intra_op_threads", 1) + 1
    if result["run_mode"] != "real_cpu" or not busy_machine(load, cpus, others, threads):
        return None
    return Message(
        "Busy machine: {load}; other programs were using the cores that the copy thread "
        "and the matmul thread need, "
        "so they take turns instead of overlapping",
        load=describe_load(load, cpus, others),
    )


# TODO 5 raised, returned something that is not a decision, or is not done: the measurement is kept,
# undecided
NOT_DONE = N_("TODO 5 is not done yet")
RAISED = N_(
    "decide_overlap raised {error}. The measurement is kept but not decided: fix TODO 5, "
    "then run 5.2 again."
)
RETURNED = N_(
    "decide_overlap returned {value}, not one of {decisions}. The measurement is kept "
    "but not decided: fix TODO 5, then run 5.2 again."
)


def decision_reason(result: dict) -> Message:
    """Why a decided result got its decision, from its own data (the rule's reason, then the
    conditions that fired with their numbers, then a busy machine's note): a Message, recorded in
    English by ``finalize`` and shown in the learner's language by ``explain``."""
    decision = result["decision"]
    fired = joined(
        [
            what_fired(decision, result["cases"], result["controls"]),
            *filter(None, [_load_note(result)]),
        ],
        SENTENCES,
    )
    stand_in = is_stand_in(result)
    head = Message(REASONS[decision])
    if stand_in:
        head = Message(STAND_IN, reason=head)
    if decision in ("accept_physical_overlap", CPU_ACCEPT):
        return Message(
            N_("{reason}. Modelled: {fired}") if stand_in else N_("{reason}. Measured: {fired}"),
            reason=head,
            fired=fired,
        )
    return Message("{reason}. What fired: {fired}", reason=head, fired=fired)


def explain(result: dict) -> str:
    """A result's reason in the learner's language: a decided result's rebuilt from its data
    (``decision_reason``), an undecided one's from the recorded English, whose values (the error
    your TODO 5 raised) came from outside the runtime (``localize``); "" when it has none."""
    if result.get("decision") in REASONS and result.get("cases"):
        return str(decision_reason(result))
    text = result.get("decision_reason")
    return localize(text) if text else ""


def finalize(result: dict, decide: Callable[[list, list], str]) -> dict:
    """Fill in ``decision`` with the learner's ``decide(cases, controls)`` when cases were measured.
    When ``decide`` raises, or returns something that is not a decision, the measurement is kept
    with decision ``'not_decided'`` and a reason that names what went wrong. The reason is recorded
    in English (``explain`` shows it in the learner's language)."""
    if result["failure"] is None and result["cases"]:
        try:
            decision = decide(copy.deepcopy(result["cases"]), copy.deepcopy(result["controls"]))
        except NotImplementedError:
            result["decision"], result["decision_reason"] = "not_decided", NOT_DONE
            return result
        # a bug in TODO 5 must not lose the measurement: it is kept, undecided
        except Exception as exc:
            result["decision"] = "not_decided"
            result["decision_reason"] = RAISED.format(error=f"{type(exc).__name__}: {exc}")
            return result
        if not isinstance(decision, str) or decision not in LEARNER_DECISIONS:
            result["decision"] = "not_decided"
            result["decision_reason"] = RETURNED.format(
                value=repr(decision), decisions=", ".join(LEARNER_DECISIONS)
            )
            return result
        if decision == "accept_physical_overlap" and result["run_mode"] == "real_cpu":
            decision = CPU_ACCEPT
        result["decision"] = decision
        result["decision_reason"] = english(decision_reason(result))
    return result


def result_path(run_label: str, root: Path | None = None) -> Path:
    return results_dir(root) / f"inf_serving_overlap_{run_label}.json"


def write_result(result: dict, root: Path | None = None) -> Path:
    """Validate against the schema, then write atomically to the results folder. A stand-in's
    result (a timing model) is refused: no file of the results folder ever holds one."""
    if is_stand_in(result):
        raise ValueError(
            "this result came from a stand-in for torch.cuda (a timing model, not a "
            "measurement): it is never written as a result file"
        )
    validate_result(result)
    return write_json_atomic(result_path(result["run_label"], root), result)


# ----------------------------------------------------------------------------- progress


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


@contextmanager
def progress_bar(total: int, enabled: bool, desc: str):
    """A progress bar that leaves no output behind.

    Off under nbgrader, and in a kernel that no person is watching (nbclient, nbconvert,
    papermill: the explorer's ``widget_frontend`` tells), so a notebook executed headless saves
    no stale "0%" bar. With a live frontend, an ipywidgets bar shown through a display handle that
    is blanked at the end; in a terminal, tqdm on stderr with ``leave=False``.
    """
    if not enabled or grading_mode():
        yield _NoBar()
        return
    if _in_kernel():
        from ..explorer import widget_frontend

        try:
            if widget_frontend() is None:
                raise ImportError("no frontend renders widgets here")
            from IPython.display import display
            from tqdm.notebook import tqdm as notebook_tqdm

            bar = notebook_tqdm(
                total=total, desc=desc, unit=tr("progress unit\x04run"), leave=False, display=False
            )
        # no widgets, or no one to show them to: no bar rather than a stale one
        except (ImportError, ValueError):
            yield _NoBar()
            return
        handle = display(bar.container, display_id=True)
        try:
            yield bar
        finally:
            bar.close()
            if handle is not None:
                handle.update({"text/plain": ""}, raw=True)
        return
    from tqdm import tqdm

    with tqdm(total=total, desc=desc, unit=tr("progress unit\x04run"), leave=False) as bar:
        yield bar
