"""Unit tests of the runtime the notebooks import (tools/) and small autograde pieces."""
import json
import math
import os
import sys
from pathlib import Path

import pytest

from tools import checks, notebook_runtime, overlap_lab, project_runtime, timeline
from tools.checks import PublicChecks, PublicChecksFailed

# ---------------------------------------------------------------- project root and results

def test_root_found_by_walking_up(root, tmp_path, monkeypatch):
    monkeypatch.delenv(project_runtime.ROOT_ENV, raising=False)
    assert project_runtime.resolve_project_root(root / "notebooks") == root
    assert project_runtime.resolve_project_root(root / "tools" / "plotting.py") == root


def test_root_override_must_hold_the_marker(tmp_path, monkeypatch):
    monkeypatch.setenv(project_runtime.ROOT_ENV, str(tmp_path))
    with pytest.raises(project_runtime.ProjectRootNotFound, match="course.toml"):
        project_runtime.resolve_project_root()
    (tmp_path / "course.toml").write_text("[course]\n")
    assert project_runtime.resolve_project_root("/") == tmp_path.resolve()


def test_root_not_found_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv(project_runtime.ROOT_ENV, raising=False)
    monkeypatch.setattr(project_runtime, "__file__", str(tmp_path / "x" / "project_runtime.py"))
    with pytest.raises(project_runtime.ProjectRootNotFound, match=project_runtime.ROOT_ENV):
        project_runtime.resolve_project_root(tmp_path)


def test_results_dir_and_atomic_write(tmp_path):
    (tmp_path / "course.toml").write_text("[course]\n")
    target = project_runtime.results_dir(tmp_path) / "x.json"
    assert target.parent == tmp_path / "benchmarks" / "results"
    project_runtime.write_json_atomic(target, {"a": "交接"})
    assert json.loads(target.read_text(encoding="utf-8")) == {"a": "交接"}
    assert [p.name for p in target.parent.iterdir()] == ["x.json"], "no temp file left behind"
    with pytest.raises(TypeError):
        project_runtime.write_json_atomic(target, {"bad": object()})
    assert json.loads(target.read_text(encoding="utf-8")) == {"a": "交接"}, "a failed write keeps the old file"
    assert [p.name for p in target.parent.iterdir()] == ["x.json"]


def test_manifest_lists_six_notebooks_in_order(root):
    manifest = project_runtime.course_manifest(root)
    names = [nb["name"] for nb in manifest["notebooks"]]
    assert names == sorted(names) and len(names) == 6
    assert all((root / "solutions" / f"{n}.ipynb").is_file() for n in names)


def test_package_version():
    assert notebook_runtime.package_version("nbgrader") == "0.9.6"
    assert notebook_runtime.package_version("surely-not-installed-xyz") is None


# ---------------------------------------------------------------- public checks

def test_public_checks_report_each_kind_of_result(capsys, tmp_path, monkeypatch):
    report = tmp_path / "r.jsonl"
    monkeypatch.setenv(checks.REPORT_ENV, str(report))
    suite = PublicChecks("demo")

    @suite.case
    def good():
        """passes"""

    @suite.case
    def wrong():
        """fails with a message"""
        assert 1 == 2, "one is not two"

    @suite.case
    def todo():
        """not started"""
        raise NotImplementedError()

    @suite.case
    def crash():
        """crashes"""
        {}["missing"]

    with pytest.raises(PublicChecksFailed, match="public checks 1/4 passed; hidden tests run at grading"):
        suite.run()
    out = capsys.readouterr()
    assert "one is not two" in out.out and "not implemented yet" in out.out and "KeyError" in out.out
    assert out.err == "", "checks must not write to stderr (nbgrader would zero the cell)"
    record = json.loads(report.read_text())
    assert [c["status"] for c in record["cases"]] == ["pass", "fail", "not_started", "error"]


def test_public_checks_never_claim_hidden_tests_passed(capsys, monkeypatch):
    monkeypatch.delenv(checks.REPORT_ENV, raising=False)
    suite = PublicChecks("ok")
    suite.case(lambda: None)
    assert suite.run() is None, "run() must return None: a value on a test cell's last line is partial credit"
    out = capsys.readouterr().out
    assert "1/1 passed; hidden tests run at grading" in out and "all tests passed" not in out.lower()


def test_unstarted_exercise_says_finish_it(monkeypatch):
    monkeypatch.delenv(checks.REPORT_ENV, raising=False)
    suite = PublicChecks("todo")

    @suite.case
    def todo():
        """x"""
        raise NotImplementedError()

    with pytest.raises(PublicChecksFailed, match="Finish the exercise"):
        suite.run()


# ---------------------------------------------------------------- learner functions

def test_load_learner_functions_from_answers_and_release(root):
    funcs = notebook_runtime.load_learner_functions("02_total_vs_exposed_time", ["compute_exposed_interval", "estimate_handoff"],
                                                    search=[root / "solutions"])
    assert funcs["estimate_handoff"](125_000, 1.0, 0.0, 0.0, [])["transfer_ms"] == 1.0
    stub = notebook_runtime.load_learner_functions("02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "notebooks"])
    with pytest.raises(NotImplementedError):
        stub["estimate_handoff"](1, 1.0, 0.0, 0.0, [])


def test_load_learner_functions_clear_errors(tmp_path, root):
    with pytest.raises(notebook_runtime.LearnerFunctionMissing, match="finish"):
        notebook_runtime.load_learner_functions("02_total_vs_exposed_time", ["no_such_function"], search=[root / "solutions"])
    broken = json.loads((root / "notebooks" / "03_handoff_state_contract.ipynb").read_text())
    for cell in broken["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            cell["source"] = "def validate_handoff_state(:\n"
    (tmp_path / "03_handoff_state_contract.ipynb").write_text(json.dumps(broken))
    with pytest.raises(notebook_runtime.LearnerFunctionMissing, match="syntax error"):
        notebook_runtime.load_learner_functions("03_handoff_state_contract", ["validate_handoff_state"], search=[tmp_path])



def test_find_learner_notebook_names_the_file_that_is_loaded(tmp_path, root):
    found = notebook_runtime.find_learner_notebook("03_handoff_state_contract", search=[root / "solutions"])
    assert found == root / "solutions" / "03_handoff_state_contract.ipynb"
    # the folder searched first wins, as in load_learner_functions
    copy = tmp_path / "03_handoff_state_contract.ipynb"
    copy.write_text((root / "notebooks" / "03_handoff_state_contract.ipynb").read_text())
    assert notebook_runtime.find_learner_notebook("03_handoff_state_contract", search=[tmp_path, root / "solutions"]) == copy
    with pytest.raises(notebook_runtime.LearnerFunctionMissing, match="Could not find"):
        notebook_runtime.find_learner_notebook("99_no_such_notebook", search=[tmp_path])


# ---------------------------------------------------------------- timeline

def test_schedule_greedy_uses_the_given_rule():
    items = [{"name": "a", "engine": "sm"}, {"name": "b", "engine": "sm"}, {"name": "c", "engine": "cpu"}]
    durations = {"a": 2.0, "b": 3.0, "c": 1.0}
    def same_engine(x, y):
        return {"can_overlap": x["engine"] != y["engine"], "reasons": []}
    bars = timeline.schedule_greedy(items, durations, same_engine)
    assert [(b["start"], b["end"]) for b in bars] == [(0.0, 2.0), (2.0, 5.0), (0.0, 1.0)]
    assert timeline.makespan(bars) == 5.0
    assert timeline.makespan(timeline.nominal_schedule(items, durations)) == 3.0


# ---------------------------------------------------------------- experiment runtime

def test_experiment_rejects_bad_configuration():
    with pytest.raises(ValueError, match="RUN_MODE"):
        overlap_lab.run_experiment("gpu")
    with pytest.raises(ValueError, match="RUN_LABEL"):
        overlap_lab.run_experiment("dry_run", run_label="../escape")
    with pytest.raises(ValueError, match="PAYLOAD_MIB"):
        overlap_lab.run_experiment("dry_run", payload_mib=[16, -1])
    with pytest.raises(ValueError, match="REPEAT_STEPS"):
        overlap_lab.run_experiment("dry_run", repeat_steps=0)
    with pytest.raises(ValueError, match="intra_op_threads"):
        overlap_lab.run_experiment("dry_run", intra_op_threads=0)


def test_dry_run_and_missing_gpu_follow_the_schema():
    dry = overlap_lab.run_experiment("dry_run")
    overlap_lab.validate_result(dry)
    assert dry["decision"] == "not_measured" and dry["cases"] == [] and dry["controls"] == []
    gpu = overlap_lab.run_experiment("real_gpu")
    overlap_lab.validate_result(gpu)
    if not gpu["hardware"]["cuda_available"]:
        assert gpu["failure"]["type"] == "RuntimeError" and "CUDA is not available" in gpu["failure"]["message"]
        assert gpu["decision"] == "reject_until_environment_fixed" and gpu["evidence_level"] == "failed_real_gpu_attempt"


# ---------------------------------------------------------------- evidence on synthetic timelines

def _serialized(copy_ms=4.0, unit_ms=1.0, units=4, gap=0.05):
    """Copy, then compute: what a timeline looks like when nothing overlaps."""
    return {"copy_start": 0.0, "copy_ends": [copy_ms], "unit_ends": [copy_ms + gap + unit_ms * (i + 1) for i in range(units)],
            "total": copy_ms + gap + unit_ms * units}


def _overlapped(copy_ms=4.0, unit_ms=1.0, units=4):
    """Copy and compute side by side from t = 0."""
    return {"copy_start": 0.0, "copy_ends": [copy_ms * 1.02], "unit_ends": [unit_ms * (i + 1) for i in range(units)],
            "total": max(copy_ms * 1.02, unit_ms * units)}


def test_serialized_timeline_is_not_confirmed():
    ev = overlap_lab.overlap_evidence([_serialized()] * 5, unit_ms=1.0, copy_alone_ms=4.0)
    assert ev["confirmed"] is False and ev["overlapped_repeats"] == 0 and ev["covered_fraction_median"] == 0.0
    reverse = {"copy_start": 4.0, "copy_ends": [8.05], "unit_ends": [1.0, 2.0, 3.0, 4.0], "total": 8.05}  # compute, then copy
    assert overlap_lab.overlap_evidence([reverse] * 5, 1.0, 4.0)["confirmed"] is False


def test_overlapped_timeline_is_confirmed():
    ev = overlap_lab.overlap_evidence([_overlapped()] * 5, unit_ms=1.0, copy_alone_ms=4.0)
    assert ev["confirmed"] is True and ev["overlapped_repeats"] == 5 and ev["covered_fraction_median"] > 0.9


def test_start_events_cannot_fake_overlap():
    """The old evidence read stream-level start events: a serialized run whose compute 'started'
    at t = 0 (it passed a wait) looked intersecting. Completions alone decide now."""
    fake = {**_serialized(), "compute_start": 0.0, "compute_end": 8.05}
    assert overlap_lab.overlap_evidence([fake] * 5, 1.0, 4.0)["confirmed"] is False


def test_evidence_needs_most_repeats_and_an_unslowed_copy():
    mixed = [_overlapped(), _serialized(), _serialized()]
    assert overlap_lab.overlap_evidence(mixed, 1.0, 4.0)["confirmed"] is False, "one overlapped repeat in three is not most"
    assert overlap_lab.overlap_evidence([_overlapped()] * 2 + [_serialized()], 1.0, 4.0)["confirmed"] is True
    slowed = {"copy_start": 0.0, "copy_ends": [6.0], "unit_ends": [1.0, 2.0, 3.0, 4.0], "total": 6.0}  # copy 50% slower
    ev = overlap_lab.overlap_evidence([slowed] * 3, 1.0, 4.0)
    assert ev["copy_slowdown"] == pytest.approx(1.5) and ev["confirmed"] is False
    assert overlap_lab.overlap_evidence([slowed] * 3, 1.0, 4.0, max_copy_slowdown=1.6)["confirmed"] is True


def test_a_duration_measured_on_a_busier_machine_cannot_fake_overlap():
    """Copy (8 slices of 1 ms), then compute (8 units of 1 ms). If 'unit alone' was measured while
    the machine was busier (8 ms), stretching the first unit back by 8 ms would put 7 copy slices
    inside the compute interval; the run's own completion pace says the units took 1 ms."""
    serial = {"copy_start": 0.0, "copy_ends": [float(i) for i in range(1, 9)],
              "unit_ends": [8.0 + i for i in range(1, 9)], "total": 16.0}
    assert overlap_lab.overlap_evidence([serial] * 5, unit_ms=8.0, copy_alone_ms=8.0)["confirmed"] is False
    assert overlap_lab.overlap_evidence([serial] * 5, unit_ms=1.0, copy_alone_ms=64.0)["confirmed"] is False
    side_by_side = {"copy_start": 0.0, "copy_ends": [float(i) for i in range(1, 9)],
                    "unit_ends": [float(i) for i in range(1, 9)], "total": 8.0}
    assert overlap_lab.overlap_evidence([side_by_side] * 5, unit_ms=8.0, copy_alone_ms=8.0)["confirmed"] is True


def test_copy_chunks_inside_one_long_unit_count():
    """One long matmul cannot complete inside a short copy; the copy's chunks complete inside it."""
    long_unit = {"copy_start": 0.0, "copy_ends": [0.5, 1.0, 1.5, 2.0], "unit_ends": [6.0], "total": 6.0}
    assert overlap_lab.overlap_evidence([long_unit] * 3, unit_ms=6.0, copy_alone_ms=2.0)["confirmed"] is True
    after = {"copy_start": 0.0, "copy_ends": [0.5, 1.0, 1.5, 2.0], "unit_ends": [8.1], "total": 8.1}
    assert overlap_lab.overlap_evidence([after] * 3, unit_ms=6.0, copy_alone_ms=2.0)["confirmed"] is False


def test_evidence_rejects_bad_input():
    with pytest.raises(ValueError, match="at least one timeline"):
        overlap_lab.overlap_evidence([], 1.0, 4.0)
    with pytest.raises(ValueError, match="completion order"):
        overlap_lab.overlap_evidence([{**_overlapped(), "unit_ends": [2.0, 1.0]}], 1.0, 4.0)
    with pytest.raises(ValueError, match="> 0"):
        overlap_lab.overlap_evidence([_overlapped()], 0.0, 4.0)


# ---------------------------------------------------------------- a measured CPU run, and the schema's honesty

@pytest.fixture(scope="module")
def cpu_result():
    result = overlap_lab.run_experiment("real_cpu", payload_mib=[8], warmup_steps=1, repeat_steps=5, progress=False)
    assert result["failure"] is None, result["failure"]
    return result


def test_real_cpu_interleaves_the_cases_rounds(monkeypatch):
    """Round i times every case once (rotating order), so a slow spell of the machine is shared by all cases."""
    from tools import overlap_cpu

    seen = []
    original = overlap_cpu.CaseSamples.measure_once

    def logged(self, i):
        seen.append((i, self.plan.src.numel(), self.plan.left.shape[0]))
        original(self, i)

    monkeypatch.setattr(overlap_cpu.CaseSamples, "measure_once", logged)
    result = overlap_lab.run_experiment("real_cpu", payload_mib=[1, 2], warmup_steps=0, repeat_steps=3, progress=False)
    assert result["failure"] is None and result["workload"]["interleaved_cases"] is True
    assert [i for i, *_ in seen] == [0] * 4 + [1] * 4 + [2] * 4, "one sample of each of the 4 cases per round"
    rounds = [[case for _, *case in seen[k:k + 4]] for k in (0, 4, 8)]
    assert all(sorted(r) == sorted(rounds[0]) for r in rounds) and len(set(map(tuple, rounds[0]))) == 4
    assert rounds[1] == rounds[0][1:] + rounds[0][:1], "the order of the cases rotates from round to round"
    assert all(c["bound_factor"] == 1.3 for c in result["cases"])


def test_cpu_calibration_balances_each_plan_and_alternates_copy_and_compute():
    from tools.overlap_cpu import calibrate

    class FakePlan:
        def __init__(self, copy_ms, unit_ms, count):
            self.copy_ms, self.unit_ms, self.count, self.calls = copy_ms, unit_ms, count, []

        def copy_alone(self):
            self.calls.append("copy")
            return self.copy_ms

        def compute_alone(self):
            self.calls.append("compute")
            return self.unit_ms * self.count

    a, b, stuck = FakePlan(10.0, 0.5, 5), FakePlan(40.0, 0.25, 400), FakePlan(10.0, 7.0, 1)
    balances = calibrate([a, b, stuck], samples=3)
    assert (a.count, b.count) == (20, 160) and balances[id(a)] == balances[id(b)] == 1.0
    assert stuck.count == 1 and balances[id(stuck)] == pytest.approx(0.7), "one matmul cannot be split: it stops there"
    assert a.calls[:6] == ["copy", "compute"] * 3, "copy alone and compute alone alternate"


def test_real_cpu_measures_cases_and_controls(cpu_result):
    overlap_lab.validate_result(cpu_result)
    assert cpu_result["evidence_level"] == "cpu_analogue_benchmark" and cpu_result["decision"] == "not_decided"
    assert [c["window"] for c in cpu_result["cases"]] == ["fixed", "calibrated"]
    for case in cpu_result["cases"]:
        assert case["copy_correct"] and case["compute_correct"]
        assert case["preconditions"] == {"distinct_workers": True, "pinned_source": None, "non_blocking": None}
        assert case["path_confirmed"] == (case["preconditions_met"] and case["overlap_evidence"]["confirmed"])
        assert math.isclose(case["latency_ratio"], case["overlap_median_ms"] / case["serial_median_ms"])
        assert case["predicted_overlap_ms"] == pytest.approx(max(case["copy_alone_ms"], case["compute_alone_ms"]))
    assert cpu_result["workload"]["cpu_block"] == 128, "the calibrated matmuls' operands must fit in L2"
    for case in cpu_result["cases"]:
        assert 0 <= case["launch_overhead_ms"] < case["overlap_median_ms"], "the copy thread's wake-up lag, reported"
    if sys.platform.startswith("linux"):
        assert cpu_result["hardware"]["other_cpu_cores"] >= 0
    assert [c["name"] for c in cpu_result["controls"]] == ["one_thread", "joined_thread"]
    for control in cpu_result["controls"]:
        # its latency ratio should sit near 1, but on a shared machine 5 repeats can stray: the
        # verdict is what must hold (benchmarks/bench_cpu_overlap.py reports the ratios)
        assert control["overlap_confirmed"] is False, f"a serial control came out confirmed: {control}"


def _variants(good):
    """(what is dishonest, the result) pairs built from a valid measured CPU result."""
    import copy

    def edit(fn):
        r = copy.deepcopy(good)
        fn(r)
        return r

    def first_case(fn):
        return edit(lambda r: fn(r["cases"][0]))

    return [
        ("CPU run claiming the GPU evidence level", edit(lambda r: r.update(evidence_level="local_mechanism_benchmark"))),
        ("CPU run carrying the GPU decision", edit(lambda r: r.update(decision="accept_physical_overlap"))),
        ("GPU run carrying the CPU decision", edit(lambda r: r.update(run_mode="real_gpu", evidence_level="local_mechanism_benchmark",
                                                                     decision="accept_cpu_analogue_overlap"))),
        ("GPU run without device facts", edit(lambda r: r.update(run_mode="real_gpu", evidence_level="local_mechanism_benchmark"))),
        ("path confirmed without evidence", first_case(lambda c: c.update(path_confirmed=True, overlap_confirmed=False,
                                                                          overlap_evidence={**c["overlap_evidence"], "confirmed": False}))),
        ("evidence confirmed against its own counts", first_case(lambda c: c.update(
            overlap_confirmed=True, path_confirmed=True,
            overlap_evidence={**c["overlap_evidence"], "confirmed": True, "overlapped_repeats": 0, "overlapped_fraction": 0.0}))),
        ("path confirmed with a false precondition", first_case(lambda c: c.update(
            preconditions={**c["preconditions"], "distinct_workers": False}))),
        ("measured run without cases", edit(lambda r: r.update(cases=[]))),
        ("measured run without controls", edit(lambda r: r.update(controls=[]))),
        ("unknown top-level field", edit(lambda r: r.update(speedup="2x"))),
        ("unknown case field", first_case(lambda c: c.update(confidence=0.99))),
        ("CPU case claiming a looser bar than its engine's", first_case(lambda c: c.update(bound_factor=2.0))),
        ("case without its bound_factor", first_case(lambda c: c.pop("bound_factor"))),
        ("latency ratio not from the medians", first_case(lambda c: c.update(latency_ratio=c["latency_ratio"] * 0.5))),
        ("acceptance with a confirmed control", edit(lambda r: (r.update(decision="accept_cpu_analogue_overlap"),
                                                                r["controls"][0].update(overlap_confirmed=True, overlap_evidence={
                                                                    **r["controls"][0]["overlap_evidence"], "confirmed": True,
                                                                    "overlapped_repeats": r["controls"][0]["overlap_evidence"]["repeats"],
                                                                    "overlapped_fraction": 1.0, "copy_slowdown": 1.0})))),
        ("dry run with cases", edit(lambda r: r.update(run_mode="dry_run", evidence_level="dry_run", decision="not_measured"))),
        ("failure with a measured decision", edit(lambda r: r.update(failure={"type": "X", "message": "y"}, cases=[], controls=[],
                                                                    evidence_level="failed_real_cpu_attempt"))),
    ]


def test_schema_rejects_each_dishonest_variant(cpu_result):
    import jsonschema

    overlap_lab.validate_result(cpu_result)  # the honest original passes
    for what, bad in _variants(cpu_result):
        with pytest.raises(jsonschema.ValidationError):
            overlap_lab.validate_result(bad)
            pytest.fail(f"accepted: {what}")


def test_schema_rejects_inconsistent_dry_runs():
    import jsonschema

    dry = overlap_lab.run_experiment("dry_run")
    for bad in ({**dry, "decision": "accept_physical_overlap"}, {**dry, "schema_version": "v0"},
                {**dry, "failure": {"type": "X", "message": "y"}}, {k: v for k, v in dry.items() if k != "cases"}):
        with pytest.raises(jsonschema.ValidationError):
            overlap_lab.validate_result(bad)


def test_finalize_gives_the_cpu_its_own_decision(cpu_result):
    import copy

    result = copy.deepcopy(cpu_result)
    seen = []

    def accept(cases, controls):
        seen.append((len(cases), len(controls)))
        cases.clear()  # the learner's function gets copies: this must not touch the result
        return "accept_physical_overlap"

    decided = overlap_lab.finalize(result, accept)
    assert seen == [(2, 2)] and len(decided["cases"]) == 2
    assert decided["decision"] == "accept_cpu_analogue_overlap" and "CPU analogue" in decided["decision_reason"]
    overlap_lab.validate_result(decided)
    with pytest.raises(ValueError, match="decide_overlap returned"):
        overlap_lab.finalize(copy.deepcopy(cpu_result), lambda cases, controls: "maybe")
    noisy = overlap_lab.finalize(copy.deepcopy(cpu_result), lambda cases, controls: "rerun_on_quiet_machine")
    assert "close other programs" in noisy["decision_reason"]


def test_unfinished_todo5_leaves_the_run_undecided(cpu_result):
    import copy

    def stub(cases, controls):
        raise NotImplementedError()

    result = overlap_lab.finalize(copy.deepcopy(cpu_result), stub)
    assert result["decision"] == "not_decided"
    overlap_lab.validate_result(result)


def test_percentile_nearest_rank():
    assert overlap_lab.percentile(list(range(1, 21)), 95) == 19
    assert overlap_lab.percentile([5.0], 95) == 5.0
    with pytest.raises(ValueError):
        overlap_lab.percentile([], 50)


def test_write_result_validates_first(tmp_path):
    (tmp_path / "course.toml").write_text("[course]\n")
    bad = {**overlap_lab.run_experiment("dry_run"), "decision": "accept_physical_overlap"}
    with pytest.raises(Exception):  # noqa: B017 - whatever the schema validator raises, nothing is written
        overlap_lab.write_result(bad, tmp_path)
    assert not overlap_lab.result_path("default", tmp_path).exists()
    path = overlap_lab.write_result(overlap_lab.run_experiment("dry_run", run_label="ok"), tmp_path)
    assert path.name == "inf_serving_overlap_ok.json"


def test_progress_bar_is_silent_when_disabled_or_grading(monkeypatch, capsys):
    from tools.overlap_results import progress_bar

    with progress_bar(10, False, "x") as bar:
        bar.update(5)
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with progress_bar(10, True, "x") as bar:
        bar.update(5)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_device_fact_helpers():
    from tools import overlap_device

    assert overlap_device.pci_bus_id(0, 0x3B, 0) == "00000000:3B:00.0"
    assert overlap_device.nominal_gbytes_per_s(5, 16) == 63.0
    assert overlap_device.nominal_gbytes_per_s(99, 16) == 0.0


def test_device_facts_fail_clearly_without_a_driver():
    from tools import overlap_device

    try:
        overlap_device._libcuda()
    except overlap_device.DriverError:
        with pytest.raises(overlap_device.DriverError, match="libcuda"):
            overlap_device.driver_facts()
    else:
        pytest.skip("an NVIDIA driver is present")


# ---------------------------------------------------------------- on a CUDA machine only

def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs CUDA")
def test_real_gpu_overlaps_and_its_controls_do_not():
    result = overlap_lab.run_experiment("real_gpu", payload_mib=[16, 64], warmup_steps=2, repeat_steps=10, progress=False)
    assert result["failure"] is None, result["failure"]
    overlap_lab.validate_result(result)
    hw = result["hardware"]
    assert hw["async_engine_count"] >= 1 and hw["sm_count"] >= 1 and hw["pci_bus_id"]
    assert all(c["copy_correct"] and c["compute_correct"] for c in result["cases"])
    assert {c["name"] for c in result["controls"]} == {"pageable_source", "one_stream", "blocking_copy"}
    assert not any(c["overlap_confirmed"] for c in result["controls"]), result["controls"]
    for case in result["cases"]:
        if case["window"] == "calibrated":
            assert case["path_confirmed"], case["overlap_evidence"]
            assert abs(case["compute_copy_balance"] - 1) <= 0.1
            assert case["gate_held_fraction"] >= 0.9


# ---------------------------------------------------------------- explorer

def test_explorer_static_without_a_live_frontend(monkeypatch, capsys, root):
    from tools import explorer

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.delenv("COURSE_WIDGETS", raising=False)
    funcs = notebook_runtime.load_learner_functions("02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "solutions"])
    assert explorer.handoff_explorer(funcs["estimate_handoff"]) is None
    assert "Static view" in capsys.readouterr().out
    widget = explorer.handoff_explorer(funcs["estimate_handoff"], mode="live")
    readout = [w for w in widget.children if "handoff-readout" in w._dom_classes][0]
    before = readout.value
    sliders = {w.description: w for w in widget.children if hasattr(w, "description")}
    sliders["layers (1 = send after)"].value = 32
    assert readout.value != before and "exposed" in readout.value


def test_explorer_streaming_floor(root):
    from tools import explorer

    funcs = notebook_runtime.load_learner_functions("02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "solutions"])
    r = explorer.evaluate(funcs["estimate_handoff"], 1024, 440, 0.0, 250.0, 0.0, 32)
    assert r["exposed_ms"] == pytest.approx(r["transfer_ms"] / 32), "the last layer's share stays exposed"
    after = explorer.evaluate(funcs["estimate_handoff"], 1024, 440, 0.0, 250.0, 0.0, 1)
    assert after["exposed_ms"] == pytest.approx(after["transfer_ms"]) and after["overlap_ratio"] == pytest.approx(0.0)


def test_explorer_waits_for_the_learner(capsys, root):
    from tools import explorer

    stub = notebook_runtime.load_learner_functions("02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "notebooks"])
    assert explorer.handoff_explorer(stub["estimate_handoff"], mode="live") is None
    assert "Finish TODO 1 and TODO 2" in capsys.readouterr().out


class _Kernel:
    """Stands in for ipykernel: answers get_parent() with the current execute_request."""

    def __init__(self, allow_stdin):
        self.allow_stdin = allow_stdin

    def get_parent(self, channel="shell"):
        return {"header": {"msg_type": "execute_request"}, "content": {"code": "", "allow_stdin": self.allow_stdin}}


class _Shell:
    def __init__(self, kernel):
        self.kernel, self.user_ns = kernel, {}


def _frontend_env(monkeypatch, kernel=None, **env):
    """A kernel (or none) and exactly the environment variables that the detection reads."""
    import sys

    import IPython

    for name in ("COURSE_WIDGETS", "NBGRADER_EXECUTION", "VSCODE_PID", "VSCODE_CWD", "JPY_SESSION_NAME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(IPython, "get_ipython", lambda: _Shell(kernel) if kernel else None)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setattr("tools.explorer._in_colab", lambda: False)


@pytest.mark.parametrize("kernel, env, expected", [
    (None, {}, None),  # a script or a terminal: no frontend
    (_Kernel(True), {"JPY_SESSION_NAME": "02.ipynb"}, "jupyter"),  # JupyterLab, Notebook 7
    (_Kernel(True), {}, "jupyter"),  # any other person's frontend that allows input
    (_Kernel(False), {"JPY_SESSION_NAME": "02.ipynb"}, None),  # nbclient, nbconvert, papermill send allow_stdin false
    (_Kernel(True), {"VSCODE_PID": "4242"}, "vscode"),
    (_Kernel(True), {"VSCODE_CWD": "/home/me"}, "vscode"),  # remote or container kernels lack VSCODE_PID
    (_Kernel(False), {"VSCODE_PID": "4242"}, None),  # nbconvert run from VS Code's terminal
    (_Kernel(True), {"NBGRADER_EXECUTION": "autograde"}, None),
    (_Kernel(True), {"COURSE_WIDGETS": "static"}, None),
    (None, {"COURSE_WIDGETS": "live"}, "jupyter"),
    (_Kernel(False), {"COURSE_WIDGETS": "live", "NBGRADER_EXECUTION": "validate"}, "jupyter"),
])
def test_widget_frontend_detection(monkeypatch, kernel, env, expected):
    from tools import explorer

    _frontend_env(monkeypatch, kernel, **env)
    assert explorer.widget_frontend() == expected


def test_widget_frontend_override_must_be_known(monkeypatch):
    from tools import explorer

    _frontend_env(monkeypatch, _Kernel(True), COURSE_WIDGETS="sometimes")
    with pytest.raises(ValueError, match="COURSE_WIDGETS"):
        explorer.widget_frontend()


def test_explorer_in_colab_enables_the_widget_manager(monkeypatch, root):
    import sys
    import types

    from tools import explorer

    funcs = notebook_runtime.load_learner_functions("02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "solutions"])
    _frontend_env(monkeypatch, _Kernel(True))
    enabled = []
    output = types.SimpleNamespace(enable_custom_widget_manager=lambda: enabled.append(True))
    colab = types.ModuleType("google.colab")
    colab.output = output
    google = types.ModuleType("google")
    google.colab = colab
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setattr("tools.explorer._in_colab", lambda: "google.colab" in sys.modules)
    assert explorer.widget_frontend() == "colab"
    widget = explorer.handoff_explorer(funcs["estimate_handoff"])
    assert widget is not None and enabled == [True], "in Colab the custom widget manager is enabled before the widgets show"


def test_explorer_static_in_headless_runs_live_in_a_frontend(monkeypatch, capsys, root):
    from tools import explorer

    funcs = notebook_runtime.load_learner_functions("02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "solutions"])
    _frontend_env(monkeypatch, _Kernel(False), JPY_SESSION_NAME="02.ipynb")
    assert explorer.handoff_explorer(funcs["estimate_handoff"]) is None
    assert "Static view" in capsys.readouterr().out
    _frontend_env(monkeypatch, _Kernel(True), VSCODE_PID="4242")
    assert explorer.handoff_explorer(funcs["estimate_handoff"]) is not None
    assert "Static view" not in capsys.readouterr().out


def test_explorer_model_preset_sets_payload_and_layers(root):
    from tools import explorer

    funcs = notebook_runtime.load_learner_functions("02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "solutions"])
    controls = explorer.controls_of(explorer.handoff_explorer(funcs["estimate_handoff"], mode="live"))
    model, tokens, payload, layers = (controls[k] for k in ("model preset", "prompt tokens", "payload (MiB)", "layers (1 = send after)"))
    assert model.value == "custom" and tokens.disabled, "prompt tokens do nothing until a model is chosen"
    for name, (per_token, n_layers) in explorer.MODEL_PRESETS.items():
        model.value = name
        assert not tokens.disabled
        assert layers.value == n_layers, f"{name} streams one chunk per layer: expected {n_layers} layers, got {layers.value}"
        assert payload.value == pytest.approx(tokens.value * per_token / explorer.MiB)
    layers.value = 1  # compare with sending after prefill: the model stays chosen
    tokens.value = 32768
    assert payload.value == pytest.approx(32768 * per_token / explorer.MiB) and layers.value == 1
    payload.value = payload.value * 1.004  # the frontend echoes a value snapped to the slider's steps: same preset
    assert model.value == name
    payload.value = 100.0  # a hand-set payload is no longer the model's
    assert model.value == "custom" and tokens.disabled
    link, gbps = controls["link preset"], controls["link (Gbit/s)"]
    assert link.value == "PCIe Gen5 (55 GB/s)" and gbps.value == pytest.approx(440)
    link.value = "RoCE 200G"
    assert gbps.value == pytest.approx(200)
    gbps.value = 200.3
    assert link.value == "RoCE 200G", "a value within one slider step is still the preset's"
    gbps.value = 1000
    assert link.value == "custom", "a hand-set link speed is no longer the preset's"
    plain = explorer.handoff_explorer(funcs["estimate_handoff"], mode="live")._repr_mimebundle_()["text/plain"]
    assert "cannot show widgets" in plain and "exposed" in plain, "a frontend without widgets prints what to do, not VBox(...)"


def test_explorer_readouts_are_rounded(root):
    from tools import explorer
    from tools.plotting import readable

    assert [readable(v) for v in (1.07e-14, -1e-12, 19.6, -3.25, 1234.5)] == ["0", "0", "19.6", "-3.25", "1.23e+03"]
    assert [readable(v, 2, fixed=True) for v in (-0.001, -4e-15, 0.996, 12.345)] == ["0.00", "0.00", "1.00", "12.35"]
    noisy = {"transfer_ms": 19.62, "hidden_ms": 1.07e-14, "exposed_ms": 19.62, "overlap_ratio": -2e-16}
    assert explorer.readout_text(noisy) == "transfer 19.62 ms · hidden 0.00 ms · exposed 19.62 ms · overlap ratio 0.00"
    funcs = notebook_runtime.load_learner_functions("02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "solutions"])
    for layers in (1, 7, 32, 80):
        r = explorer.evaluate(funcs["estimate_handoff"], **{**explorer.DEFAULTS, "layers": layers})
        assert r["hidden_ms"] >= 0 and 0 <= r["overlap_ratio"] <= 1, r
        text = explorer.readout_text(r)
        assert "-0.00" not in text and "e-" not in text, text
    after = explorer.evaluate(funcs["estimate_handoff"], **explorer.DEFAULTS)  # sent after prefill: nothing hidden
    assert after["hidden_ms"] == 0.0 and after["overlap_ratio"] == 0.0


# ---------------------------------------------------------------- matching renamed notebooks

def test_renamed_notebooks_are_matched(tmp_path):
    from autograde.matching import match_notebooks, normalize

    assert normalize("Copy of 02_total_vs_exposed_time") == "02_total_vs_exposed_time"
    assert normalize("02_total_vs_exposed_time (1)") == "02_total_vs_exposed_time"
    assert normalize("02_total_vs_exposed_time-Copy1") == "02_total_vs_exposed_time"
    names = ("01_a", "02_b")
    (tmp_path / "Copy of 01_a.ipynb").write_text("{}")
    (tmp_path / "02_b.ipynb").write_text("{}")
    (tmp_path / "02_b (1).ipynb").write_text("{}")
    (tmp_path / "mine.ipynb").write_text(json.dumps({"cells": [{"metadata": {"nbgrader": {"grade_id": "x"}}}]}))
    chosen, notes = match_notebooks(tmp_path, names, {"01_a": {"y"}, "02_b": {"z"}})
    assert chosen["01_a"].name == "Copy of 01_a.ipynb"
    assert chosen["02_b"].name == "02_b.ipynb", "the exact name wins over a copy"
    assert any("ignored mine.ipynb" in n for n in notes)


# ---------------------------------------------------------------- the GPU check script, on synthetic data

def _gpu_check_module(root):
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", root / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _as_gpu_result(cpu_result):
    """A CPU result dressed as a GPU one: enough for the check table's logic, not a measurement."""
    import copy

    r = copy.deepcopy(cpu_result)
    r.update(run_mode="real_gpu", evidence_level="local_mechanism_benchmark", decision="accept_physical_overlap")
    r["hardware"] = {"cuda_available": True, "device": "synthetic", "cuda": "12.8", "driver_version": "570.0",
                     "cuda_driver_version": "12.8", "compute_capability": "9.0", "sm_count": 132, "async_engine_count": 3,
                     "concurrent_kernels": True, "pci_bus_id": "00000000:3B:00.0"}
    for c in r["cases"]:
        c.update(preconditions={"distinct_workers": True, "pinned_source": True, "non_blocking": True}, preconditions_met=True,
                 gate_held_fraction=1.0, launch_overhead_ms=0.05, compute_copy_balance=1.0, bound_factor=1.15)
        c["overlap_evidence"].update(confirmed=True, overlapped_repeats=c["overlap_evidence"]["repeats"], overlapped_fraction=1.0,
                                     copy_slowdown=1.0)
        c.update(overlap_confirmed=True, path_confirmed=True)
    r["controls"] = [{**r["controls"][0], "name": name} for name in ("pageable_source", "one_stream", "blocking_copy")]
    return r


def test_gpu_check_table_fails_when_it_should(root, cpu_result):
    gpu_check = _gpu_check_module(root)
    good = _as_gpu_result(cpu_result)
    overlap_lab.validate_result(good)
    rows = gpu_check.checks_for(good, {})
    assert all(passed for _, passed, _ in rows), [r for r in rows if not r[1]]
    bad = _as_gpu_result(cpu_result)
    bad["controls"][1]["overlap_confirmed"] = True
    bad["cases"][1]["copy_correct"] = False
    bad["hardware"]["async_engine_count"] = 0
    failed = {name for name, passed, _ in gpu_check.checks_for(bad, {}) if not passed}
    assert {"control one_stream not confirmed", "every case correct", "a free copy engine (async_engine_count >= 1)"} <= failed


def test_gpu_check_loads_the_rule_without_ipython_or_matplotlib(root):
    """The GPU machine may have only torch: the rule comes from the solution cell alone."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "for name in ('IPython', 'matplotlib', 'nbformat', 'jsonschema'): sys.modules[name] = None\n"
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('gpu_check', {str(root / 'benchmarks' / 'gpu_check.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "decide = m.reference_rule()\n"
        "case = dict(window='calibrated', copy_correct=True, compute_correct=True, preconditions_met=True, overlap_confirmed=True,\n"
        "            copy_alone_ms=10.0, compute_alone_ms=10.0, predicted_serial_ms=20.0, serial_median_ms=20.0, serial_p95_ms=21.0,\n"
        "            overlap_median_ms=11.0, overlap_p95_ms=12.0, latency_ratio=0.55, bound_factor=1.15)\n"
        "print(decide([case], [dict(name='c', overlap_confirmed=False)]))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "accept_physical_overlap"


def test_gpu_check_validate_reports_a_schema_failure_as_a_row(root, cpu_result, tmp_path, capsys):
    gpu_check = _gpu_check_module(root)
    bad = _as_gpu_result(cpu_result)
    bad["cases"][0]["bound_factor"] = 2.0  # a looser bar than the GPU's
    path = tmp_path / "inf_serving_overlap_gpu_check.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    assert gpu_check.main(["--validate", str(path)]) == 1
    assert any(line.startswith("FAIL  schema") for line in capsys.readouterr().out.splitlines())


def test_gpu_check_profiler_row_needs_a_memcpy(root, cpu_result):
    gpu_check = _gpu_check_module(root)
    good = _as_gpu_result(cpu_result)
    span = {"memcpy_spans": 1, "kernel_spans": 4, "memcpy_ms": 1.0, "kernel_ms_during_memcpy": 0.0, "overlap_fraction": 0.0}
    extras = {"profile": {"overlap": {**span, "kernel_ms_during_memcpy": 0.9, "overlap_fraction": 0.9}, "serial": span}}
    rows = {name: passed for name, passed, _ in gpu_check.checks_for(good, extras)}
    assert rows["profiler: none during the memcpy (serial run)"]
    extras["profile"]["serial"] = {**span, "memcpy_spans": 0, "memcpy_ms": 0.0}
    rows = {name: passed for name, passed, _ in gpu_check.checks_for(good, extras)}
    assert not rows["profiler: none during the memcpy (serial run)"], "no memcpy captured proves nothing"


def test_cpu_benchmark_summary_and_its_quiet_rule(root):
    import collections
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_cpu_overlap", root / "benchmarks" / "bench_cpu_overlap.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    verdicts = collections.Counter(["accept_cpu_analogue_overlap"] * 4 + ["tune_overlap_window"])
    line = bench.stability_line(verdicts, [0.12, 0.3, 0.2, 0.25, 0.18], [0.0, 0.04, None, 0.01, 0.02])
    assert line == ("verdicts over 5 runs: accept_cpu_analogue_overlap 4/5, tune_overlap_window 1/5 "
                    "(load before runs: 0.12-0.30; other processes during runs: 0.00-0.04 cores)")
    assert bench.quiet_enough(0.2, 0.1) == (True, "")
    assert not bench.quiet_enough(0.3, 0.0)[0] and not bench.quiet_enough(0.1, 0.25)[0]
    assert not bench.quiet_enough(None, None)[0] and bench.quiet_enough(None, 0.1)[0]


def test_gpu_check_says_when_there_is_no_cuda(root, tmp_path, capsys):
    if _cuda():
        pytest.skip("CUDA present: the gpu-marked test covers the real run")
    gpu_check = _gpu_check_module(root)
    assert gpu_check.main(["--out", str(tmp_path)]) == 1
    assert "CUDA is not available" in capsys.readouterr().out


# ---------------------------------------------------------------- pipeline sweep and bandwidth fits

def test_bandwidth_fit_recovers_t0_and_bandwidth():
    from tools import overlap_sweep

    sizes = [64 * 1024 * 4**i for i in range(6)]
    fit = overlap_sweep.fit_bandwidth(sizes, [0.01 + b / 25e9 * 1e3 for b in sizes])  # 10 µs + 25 GB/s
    assert fit["t0_ms"] == pytest.approx(0.01) and fit["gbytes_per_s"] == pytest.approx(25.0)
    assert overlap_sweep.fit_bandwidth(sizes, [b / 10e9 * 1e3 * 1.01 - 0.001 for b in sizes])["t0_ms"] == 0.0, "no negative t0"
    with pytest.raises(ValueError, match="does not grow"):
        overlap_sweep.fit_bandwidth(sizes, [1.0 / (i + 1) for i in range(6)])


def test_pipeline_model_finds_where_overlap_stops_paying():
    from tools import overlap_sweep

    chunks, copy, cost = [1, 2, 4, 8, 16, 32, 64], 16.0, 0.25
    exposed = [overlap_sweep.model_exposed_ms(copy, n, cost) for n in chunks]
    s = overlap_sweep.summarize_sweep(chunks, [20.0 + e for e in exposed], copy, 20.0)
    assert s["per_chunk_cost_ms"] == pytest.approx(cost) and s["best_chunks"] == 8 and s["model_best_chunks"] == 8
    assert s["exposed_ms"][0] == pytest.approx(16.25) and s["exposed_ms"][-1] > s["exposed_ms"][3], "64 chunks cost more than 8"


def test_pipeline_sweep_runs_on_the_cpu():
    from tools import overlap_sweep

    s = overlap_sweep.pipeline_sweep_cpu(payload_mib=2, chunk_counts=(1, 4, 16), repeats=2)
    assert s["correct"] and s["chunks"] == [1, 4, 16] and len(s["exposed_ms"]) == 3 and s["per_chunk_cost_ms"] >= 0
    curve = overlap_sweep.bandwidth_curve_cpu(max_mib=1, repeats=2)
    assert curve["series"]["memcpy"]["gbytes_per_s"] > 0


def test_progress_bar_leaves_no_output_in_a_headless_notebook():
    """nbclient (like papermill and nbconvert) sends allow_stdin=False: no one watches, no bar is drawn."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(
        "from tools.overlap_results import progress_bar\nwith progress_bar(10, True, 'timelines') as bar:\n    bar.update(10)\nprint('done')"))
    NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    assert [o.get("text") for o in nb.cells[0].outputs] == ["done\n"], nb.cells[0].outputs


def test_nvml_facts_read_the_device_by_its_bus_id(monkeypatch):
    """NVML is optional; with it, the device in use is found by PCI bus id (a stand-in module here)."""
    import sys
    import types

    from tools import overlap_device

    asked = []
    fake = types.SimpleNamespace(
        NVML_CLOCK_SM=0, NVML_CLOCK_MEM=1, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: b"570.86.15",
        nvmlDeviceGetHandleByPciBusId=lambda bus: asked.append(bus) or "h",
        nvmlDeviceGetCurrPcieLinkGeneration=lambda h: 5, nvmlDeviceGetMaxPcieLinkGeneration=lambda h: 5,
        nvmlDeviceGetCurrPcieLinkWidth=lambda h: 16, nvmlDeviceGetMaxPcieLinkWidth=lambda h: 16,
        nvmlDeviceGetClockInfo=lambda h, kind: 1980 if kind == 0 else 2619, nvmlDeviceGetMaxClockInfo=lambda h, kind: 1980)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    facts = overlap_device.nvml_facts("00000000:3B:00.0")
    assert asked == ["00000000:3B:00.0"]
    assert facts["driver_version"] == "570.86.15" and facts["pcie_gen_current"] == 5 and facts["pcie_width_max"] == 16
    assert facts["pcie_nominal_gbytes_per_s"] == 63.0 and facts["sm_clock_mhz"] == 1980
    monkeypatch.setitem(sys.modules, "pynvml", None)  # absent: the facts are simply missing
    assert overlap_device.nvml_facts("00000000:3B:00.0") is None


def test_profiler_spans_overlap_counts_each_instant_once():
    from tools.overlap_evidence import spans_overlap_ms

    assert spans_overlap_ms([(0.0, 4.0)], [(1.0, 2.0), (1.5, 3.0), (5.0, 6.0)]) == pytest.approx(2.0), "merged: 1..3 inside 0..4"
    assert spans_overlap_ms([(0.0, 4.0)], [(4.0, 8.0)]) == 0.0, "serial spans touch but do not overlap"
    assert spans_overlap_ms([(0.0, 1.0), (2.0, 3.0)], [(0.5, 2.5)]) == pytest.approx(1.0)


def test_decision_reason_names_a_busy_machine(cpu_result):
    import copy

    def reason(**hardware):
        r = copy.deepcopy(cpu_result)
        r["hardware"].pop("other_cpu_cores", None)
        r["hardware"].update(logical_cpus=2, **hardware)
        return overlap_lab.finalize(r, lambda cases, controls: "tune_overlap_window")["decision_reason"]

    # only the load average before the run is known (no /proc/stat)
    assert "load average 1.9 on 2 CPUs before the run" in reason(load_average_1m=1.9)
    assert "Busy machine" not in reason(load_average_1m=0.1)
    # the cores other processes used during the run decide when known, whatever the load average before
    assert "other programs kept 0.9 of 2 CPUs busy during the run (load average 0.1 before it)" in reason(
        load_average_1m=0.1, other_cpu_cores=0.9)
    assert "Busy machine" not in reason(load_average_1m=1.9, other_cpu_cores=0.05)


def test_copy_worker_runs_jobs_on_one_thread_and_hands_back_errors():
    import threading

    from tools.overlap_cpu import CopyWorker

    worker = CopyWorker()
    try:
        seen = []
        for _ in range(3):
            worker.submit(lambda: seen.append(threading.get_ident()))
            worker.wait()
        assert len(seen) == 3 and set(seen) == {worker.ident} and worker.ident != threading.get_ident()
        worker.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            worker.wait()
        worker.submit(lambda: seen.append(0))  # still usable after a failed job
        worker.wait()
        assert seen[-1] == 0
    finally:
        worker.close()
    with pytest.raises(RuntimeError, match="closed"):
        worker.submit(lambda: None)


def test_busy_machine_leaves_out_the_runs_own_threads():
    from tools.overlap_load import busy_machine

    # the CPU analogue's two threads on two cores leave no core free: any other work beyond 0.25 core is busy
    assert not busy_machine(0.2, 2) and busy_machine(0.3, 2) and busy_machine(None, 2, other_cores=0.5)
    assert not busy_machine(1.9, 2, other_cores=0.1), "the measurement during the run wins over the load before it"
    # on 16 cores the run's 2 threads leave 14 free
    assert not busy_machine(None, 16, other_cores=14.0) and busy_machine(None, 16, other_cores=14.5)
    assert not busy_machine(None, 2) and not busy_machine(None, None, other_cores=3.0)


def test_other_cpu_meter_subtracts_this_process(tmp_path, monkeypatch):
    """/proc/stat's busy time minus this process's CPU time, over the wall time: only other processes."""
    from tools import overlap_load

    stat = tmp_path / "stat"
    ticks = overlap_load.os.sysconf("SC_CLK_TCK")
    clock = {"wall": 100.0, "own": 5.0}
    monkeypatch.setattr(overlap_load.time, "perf_counter", lambda: clock["wall"])
    monkeypatch.setattr(overlap_load.time, "process_time", lambda: clock["own"])

    def write(busy_s, idle_s):  # user nice system idle iowait irq softirq steal
        stat.write_text(f"cpu  {int(busy_s * ticks)} 0 0 {int(idle_s * ticks)} 0 0 0 0 0 0\ncpu0 1 2 3\n")

    write(1000, 5000)
    with overlap_load.OtherCpuMeter(str(stat)) as meter:
        clock["wall"] += 10.0  # 10 s of wall time on 2 cores
        clock["own"] += 19.0  # the run's own threads: 1.9 cores
        write(1000 + 19.0 + 6.0, 5000 - 5.0)  # the machine was busy 25 s: 6 s of it other processes
    assert meter.other_cores == pytest.approx(0.6)
    with overlap_load.OtherCpuMeter(str(tmp_path / "missing")) as meter:
        pass
    assert meter.other_cores is None

# ---------------------------------------------------------------- before submitting: which file is checked

def _release_copy(root, tmp_path, name, as_name, broken=False):
    """A copy of release notebook ``name`` saved as ``as_name`` in tmp_path (its answer cell's
    metadata dropped, as a platform does, when ``broken``)."""
    nb = json.loads((root / "notebooks" / f"{name}.ipynb").read_text())
    if broken:
        next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution"))["metadata"] = {}
    path = tmp_path / as_name
    path.write_text(json.dumps(nb))
    return path


@pytest.fixture
def no_frontend(monkeypatch):
    """No Jupyter session name, no VS Code file name, not Colab: what a plain test process is."""
    import IPython

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    monkeypatch.setattr(notebook_runtime, "_colab_notebook", lambda: None)


def test_renamed_copies_are_recognised_by_their_grade_ids(root, tmp_path):
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        assert notebook_runtime.identify_notebook(json.loads(path.read_text())) == path.stem
    assert notebook_runtime.identify_notebook({"cells": []}) is None
    assert notebook_runtime.identify_notebook({"cells": [{"metadata": {"nbgrader": {"grade_id": "elsewhere"}}}]}) is None
    assert notebook_runtime.identify_notebook({"not": "a notebook"}) is None


def test_terminal_check_of_a_renamed_file_gives_a_verdict_not_a_traceback(root, tmp_path):
    import subprocess
    import sys

    _release_copy(root, tmp_path, "01_what_can_overlap", "Copy of 01.ipynb")
    _release_copy(root, tmp_path, "03_handoff_state_contract", "mine.ipynb", broken=True)
    (tmp_path / "notes.ipynb").write_text(json.dumps({"cells": [], "metadata": {}}))
    env = {**__import__("os").environ, "PYTHONPATH": str(root)}

    def run(*names):
        done = subprocess.run([sys.executable, "-m", "tools.notebook_runtime", *names], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        return done.returncode, done.stdout + done.stderr

    rc, out = run("Copy of 01.ipynb")
    assert rc == 0 and "Traceback" not in out, out
    assert "recognised as 01_what_can_overlap" in out and "all 5 graded cells are intact" in out, out
    rc, out = run("mine.ipynb")
    assert rc == 1 and "recognised as 03_handoff_state_contract" in out and "lost its grading metadata" in out, out
    rc, out = run("notes.ipynb", "absent.ipynb")
    assert rc == 1 and "Traceback" not in out, out
    assert "notes.ipynb" in out and "not a notebook of this course" in out and "grade ids" in out, out
    assert "there is no file absent.ipynb" in out, out


def test_in_notebook_check_reads_the_running_copy_that_jupyter_names(root, tmp_path, monkeypatch, no_frontend, capsys):
    name = "02_total_vs_exposed_time"
    _release_copy(root, tmp_path, name, f"{name}.ipynb")  # the original: intact
    _release_copy(root, tmp_path, name, f"Copy of {name}.ipynb", broken=True)  # the one being edited
    monkeypatch.chdir(tmp_path)  # a kernel runs in its notebook's folder
    monkeypatch.setenv("JPY_SESSION_NAME", f"course/Copy of {name}.ipynb")  # relative to the server's root
    problems = notebook_runtime.check_submission(name)
    out = capsys.readouterr().out
    assert len(problems) == 1 and "lost its grading metadata" in problems[0], out
    assert out.startswith(f"✗ Copy of {name}.ipynb"), out
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / f"{name}.ipynb"))  # an absolute path to the original
    assert notebook_runtime.check_submission(name) == []
    assert capsys.readouterr().out.startswith(f"✓ {name}.ipynb"), "the running original is checked"


def test_in_notebook_check_reads_the_file_vscode_names(root, tmp_path, monkeypatch, no_frontend, capsys):
    import IPython

    name = "03_handoff_state_contract"
    _release_copy(root, tmp_path, name, f"{name}.ipynb")
    elsewhere = tmp_path / "drafts"
    elsewhere.mkdir()
    copy = _release_copy(root, elsewhere, name, f"{name} (1).ipynb", broken=True)

    class Shell:
        user_ns = {"__vsc_ipynb_file__": str(copy)}

    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    monkeypatch.chdir(tmp_path)
    problems = notebook_runtime.check_submission(name)
    assert len(problems) == 1 and capsys.readouterr().out.startswith(f"✗ {name} (1).ipynb")


def test_in_notebook_check_warns_when_it_cannot_read_the_running_notebook(root, tmp_path, monkeypatch, no_frontend, capsys):
    name = "04_decode_start_gate"
    _release_copy(root, tmp_path, name, f"{name}.ipynb")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JPY_SESSION_NAME", f"/somewhere/else/Copy of {name}.ipynb")  # named, not on this disk
    assert notebook_runtime.check_submission(name) == []
    out = capsys.readouterr().out
    assert out.startswith(f"⚠ CHECKED {name}.ipynb, BUT THIS NOTEBOOK IS Copy of {name}.ipynb"), out
    assert "python -m tools.notebook_runtime" in out

    monkeypatch.delenv("JPY_SESSION_NAME")  # a frontend that names nothing, and two copies here
    _release_copy(root, tmp_path, name, f"{name}-Copy1.ipynb", broken=True)
    notebook_runtime.check_submission(name)
    out = capsys.readouterr().out
    assert out.startswith("⚠ 2 copies of this notebook") and f"{name}-Copy1.ipynb" in out and f"checked {name}.ipynb" in out, out

    (tmp_path / f"{name}-Copy1.ipynb").unlink()  # one file, no frontend name: nothing to warn about
    notebook_runtime.check_submission(name)
    assert capsys.readouterr().out.startswith(f"✓ {name}.ipynb")


def test_in_notebook_check_names_an_unknown_course_name(tmp_path, monkeypatch, no_frontend):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="not a notebook of this course"):
        notebook_runtime.check_submission("99_nothing", tmp_path / "absent.ipynb")


# ---------------------------------------------------------------- step 5: honest CPU curves, reasons and labels

def test_cpu_curve_uses_one_thread_and_restores_the_setting():
    from unittest import mock

    import torch

    from tools import overlap_sweep

    before = torch.get_num_threads()
    seen = []
    real = torch.Tensor.copy_
    with mock.patch.object(torch.Tensor, "copy_", lambda self, src: seen.append(torch.get_num_threads()) or real(self, src)):
        curve = overlap_sweep.bandwidth_curve_cpu(max_mib=0.0625, repeats=2)
    assert seen and set(seen) == {1}, f"copies timed with {set(seen)} intra-op threads, not 1"
    assert torch.get_num_threads() == before, "the intra-op setting is restored"
    s = curve["series"]["memcpy"]
    assert s["bytes"][0] == 4 * 1024, "the CPU curve starts at 4 KiB, where one call's fixed cost shows"
    assert curve["statistic"] == "min" and 0 <= s["r2"] <= 1 and isinstance(curve["warnings"], list)


def test_cpu_timings_keep_the_fastest_repeat():
    from unittest import mock

    from tools import overlap_sweep

    times = iter([9.0, 5.0, 1.0, 7.0])  # the warm-up call, then three repeats (s)
    clock = iter([0.0, next(times), 10.0, 10.0 + next(times), 20.0, 20.0 + next(times), 30.0, 30.0 + next(times)])
    with mock.patch.object(overlap_sweep.time, "perf_counter", lambda: next(clock)):
        calls = []
        best = overlap_sweep._best_ms(lambda: calls.append(1), 3)
    assert len(calls) == 4 and best == 1000.0, "one warm-up, then the minimum of the repeats (in ms)"


def test_fit_quality_and_its_warnings():
    from tools import overlap_sweep

    sizes = [4096 * 4**i for i in range(7)]
    good = overlap_sweep.fit_bandwidth(sizes, [0.002 + b / 15e9 * 1e3 for b in sizes])
    assert good["r2"] == pytest.approx(1.0) and overlap_sweep.fit_warnings("memcpy", good) == []
    flat = overlap_sweep.fit_bandwidth(sizes[2:], [0.0048, 7.97, 7.99, 7.98, 7.97])  # 2 threads on a busy machine, measured
    warned = " ".join(overlap_sweep.fit_warnings("memcpy", flat))
    assert flat["t0_ms"] == 0.0 and "t0 came out 0" in warned and "fits poorly" in warned, warned
    assert overlap_sweep.load_warnings(1.9, 2) and not overlap_sweep.load_warnings(0.2, 2) and not overlap_sweep.load_warnings(None, 2)
    assert not overlap_sweep.load_warnings(1.9, 2, other_cores=0.1), "the cores others used during the sweep decide"
    assert "kept 0.8 of 2 CPUs busy" in overlap_sweep.load_warnings(0.1, 2, other_cores=0.8)[0]
    assert not overlap_sweep.load_warnings(None, 2, other_cores=0.8, threads=1), "one thread of its own leaves a core free"


def test_sweep_warns_when_one_chunk_exposes_far_more_than_the_copy():
    from tools import overlap_sweep

    sweep = overlap_sweep.summarize_sweep([1, 2, 4], [14.0, 9.0, 8.0], 1.0, 3.4)  # 10.6 ms exposed against a 1 ms copy
    assert "one chunk exposed 10.60 ms against 1.00 ms" in overlap_sweep.sweep_warnings(sweep)[0]
    quiet = overlap_sweep.summarize_sweep([1, 2, 4], [4.5, 4.0, 3.8], 1.0, 3.4)
    assert overlap_sweep.sweep_warnings(quiet) == []


def test_sweep_and_curve_plots_print_their_warnings(capsys, monkeypatch):
    import matplotlib.pyplot as plt

    from tools import overlap_plots, overlap_sweep

    monkeypatch.setattr(plt, "show", lambda: None)
    sweep = overlap_sweep.summarize_sweep([1, 2, 4], [14.0, 9.0, 8.0], 1.0, 3.4)
    sweep.update(device="cpu", payload_mib=8, warnings=overlap_sweep.sweep_warnings(sweep))
    overlap_plots.plot_pipeline(sweep)
    assert "WARNING: one chunk exposed" in capsys.readouterr().out
    assert "Not trustworthy" in plt.gcf()._suptitle.get_text()
    plt.close("all")


def test_rerun_reason_names_the_noise_condition_that_fired(cpu_result):
    import copy

    noisy = copy.deepcopy(cpu_result)
    case = next(c for c in noisy["cases"] if c["window"] == "calibrated")
    case["serial_median_ms"], case["serial_p95_ms"] = case["predicted_serial_ms"], 2.7 * case["predicted_serial_ms"]
    reason = overlap_lab.finalize(noisy, lambda cases, controls: "rerun_on_quiet_machine")["decision_reason"]
    assert (f"serial P95 {case['serial_p95_ms']:.2f} ms > 1.5 x serial median {case['serial_median_ms']:.2f} ms" in reason), reason
    assert "overlapped P95" not in reason, "the rerun reason names rule 3's condition, not the overlapped P95"
    quiet = copy.deepcopy(cpu_result)
    for c in quiet["cases"]:
        c["serial_median_ms"] = c["serial_p95_ms"] = c["predicted_serial_ms"]
    reason = overlap_lab.finalize(quiet, lambda cases, controls: "rerun_on_quiet_machine")["decision_reason"]
    assert "no calibrated case meets either noise condition: check TODO 5's rule 3" in reason, reason


def test_reason_names_each_rule_with_its_numbers():
    from tools.overlap_results import what_fired

    case = {"payload_mib": 16, "window": "calibrated", "copy_alone_ms": 3.0, "compute_alone_ms": 3.58,
            "predicted_serial_ms": 6.58, "serial_median_ms": 9.0, "serial_p95_ms": 9.5, "overlap_median_ms": 6.9,
            "overlap_p95_ms": 7.0, "latency_ratio": 6.9 / 9.0, "overlap_confirmed": True, "bound_factor": 1.3,
            "copy_correct": True, "compute_correct": False, "preconditions_met": True}
    assert "serial median 9.00 ms is 37% above copy + compute 6.58 ms (> 25%)" in what_fired("rerun_on_quiet_machine", [case], [])
    tune = what_fired("tune_overlap_window", [case], [])
    assert "ratio 0.77 > 0.75" in tune and "overlapped median 6.90 ms > 1.3 x max(copy, compute) 3.58 ms" in tune, tune
    assert "compute_correct not true" in what_fired("reject_incorrect_path", [case], [])
    assert "control one_thread: overlap_confirmed is True" in what_fired(
        "reject_instrument_fault", [case], [{"name": "one_thread", "overlap_confirmed": True}])
    assert what_fired("reject_instrument_fault", [case], []) == "no negative control ran"


def test_evidence_label_states_each_limit():
    from tools.overlap_plots import evidence_label

    ev = {"confirmed": False, "overlapped_repeats": 12, "repeats": 20, "copy_slowdown": 1.88, "max_copy_slowdown": 1.30}
    assert evidence_label(ev) == "not confirmed · 12/20 repeats (> 10 needed)\ncopy x1.88 > 1.30 limit"
    assert evidence_label({**ev, "confirmed": True, "copy_slowdown": 1.05}).endswith("copy x1.05 ≤ 1.30 limit")


def test_results_sentence_says_when_the_course_folder_is_not_the_notebooks(tmp_path, monkeypatch):
    from pathlib import Path

    monkeypatch.delenv(project_runtime.ROOT_ENV, raising=False)
    monkeypatch.delenv(project_runtime.RESULTS_ENV, raising=False)
    root = project_runtime.find_project_root(Path(project_runtime.__file__))
    if root is None:
        pytest.skip("the runtime is installed outside a course folder")
    monkeypatch.chdir(tmp_path)  # a notebook copied out of the course folder
    sentence = project_runtime.where_results_go()
    assert str(root / "benchmarks" / "results") in sentence and "not next to this notebook" in sentence and str(tmp_path.resolve()) in sentence
    monkeypatch.chdir(root)
    assert "the course folder this notebook runs in" in project_runtime.where_results_go()


def test_a_dry_run_on_a_machine_without_a_driver_never_imports_torch(monkeypatch):
    """Importing torch costs a learner about a second of a dry run; without an NVIDIA driver torch
    cannot see a GPU, so a dry run records cuda_available False without asking it."""
    import subprocess
    import sys

    code = ("import sys; from tools import notebook_runtime, overlap_lab\n"
            "notebook_runtime.nvidia_driver_present = lambda: False\n"
            "r = overlap_lab.run_experiment(run_mode='dry_run')\n"
            "print(r['hardware']['cuda_available'], 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[1], env={**os.environ, "MPLBACKEND": "agg"})
    assert out.stdout.split() == ["False", "False"], out.stdout + out.stderr


def test_a_scheduler_without_a_cluster_executor_is_refused_before_anything_runs(tmp_path):
    """The command line chooses the executor once; a caller who names a scheduler but passes no
    executor is told what to pass, instead of grading locally by surprise."""
    from autograde.course import Course
    from autograde.grading import Options, grade_batch

    with pytest.raises(ValueError, match="grade_on_cluster_executor"):
        grade_batch(Course.load(), tmp_path, tmp_path / "out", Options(scheduler="tcp://127.0.0.1:1"))
    assert not (tmp_path / "out").exists()
