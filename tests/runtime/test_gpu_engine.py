"""Every line of Step 5's GPU engine, run here on a stand-in for torch.cuda (``tests/fake_cuda.py``:
a deterministic timing model, no GPU): ``run_experiment('real_gpu')`` end to end, its controls, the
pipeline sweep, the bandwidth curve, the profiler cross-check and ``benchmarks/gpu_check.py``.

The assertions are what the model implies (work on distinct streams overlaps, one stream serialises,
a copy's time is its latency plus bytes over bandwidth), and that a stand-in's result can never pass
for a measurement. A real GPU is not exercised here: ``test_overlap.py``'s gpu-marked test is."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import fake_cuda
import jsonschema
import pytest

from tools.overlap import gpu as overlap_gpu
from tools.overlap import lab as overlap_lab
from tools.overlap import sweep as overlap_sweep
from tools.overlap.results import STAND_IN_EVIDENCE, STAND_IN_NOTE

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(payload_mib=[0.5, 1], matrix_size=16, warmup_steps=1, repeat_steps=3, progress=False)


@pytest.fixture
def stand_in(monkeypatch):
    with fake_cuda.installed(monkeypatch) as installed:
        yield installed


def _gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _decide():
    return _gpu_check().reference_rule()


# ---------------------------------------------------------------- the stand-in itself


def test_the_stand_in_overlaps_distinct_streams_and_serialises_one(stand_in):
    import torch

    cuda, model = stand_in.torch.cuda, stand_in.model
    host = torch.ones(2**18, dtype=torch.bfloat16).pin_memory()  # 0.5 MiB
    dev = torch.empty_like(host, device="cuda")
    a = torch.ones(64, 64, device="cuda")
    out = torch.empty(64, 64, device="cuda")
    copy_ms, mm_ms = model.copy_ms(2**19, "h2d", True), model.matmul_ms(2 * 64**3)

    def total(copy_stream, compute_stream) -> float:
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        cuda.synchronize()
        cuda._sleep(model.clock_khz)  # 1 ms: every launch is queued before the work starts
        start.record()
        for s in (copy_stream, compute_stream):
            s.wait_stream(cuda.current_stream())
        with cuda.stream(copy_stream):
            dev.copy_(host, non_blocking=True)
        with cuda.stream(compute_stream):
            torch.mm(a, a, out=out)
        for s in (copy_stream, compute_stream):
            cuda.current_stream().wait_stream(s)
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    one, other = cuda.Stream(), cuda.Stream()
    assert total(one, other) == pytest.approx(max(copy_ms, mm_ms))
    assert total(one, one) == pytest.approx(copy_ms + mm_ms)
    assert torch.equal(dev.cpu(), host) and host.is_pinned() and not dev.cpu().is_pinned()
    assert torch.equal(out.cpu(), torch.full((64, 64), 64.0)), (
        "the data are torch's, computed for real"
    )


def test_the_stand_in_refuses_what_cuda_refuses(stand_in):
    import torch

    cuda = stand_in.torch.cuda
    start, end, untimed = (
        cuda.Event(enable_timing=True),
        cuda.Event(enable_timing=True),
        cuda.Event(),
    )
    with pytest.raises(RuntimeError, match="recorded"):
        start.elapsed_time(end)
    start.record()
    cuda._sleep(1000)
    end.record()
    with pytest.raises(RuntimeError, match="not ready"):
        start.elapsed_time(end)  # the host has not waited for the sleep
    end.synchronize()
    assert start.elapsed_time(end) == pytest.approx(
        stand_in.model.launch_ms + 1000 / stand_in.model.clock_khz
    )
    untimed.record()
    with pytest.raises(RuntimeError, match="enable_timing"):
        start.elapsed_time(untimed)
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(4, device="cuda") + torch.ones(4)
    moved = torch.ones(4).cuda()
    assert stand_in.device.on_device(moved) and stand_in.device.on_device(torch.ones(4).to("cuda"))
    assert (
        not stand_in.device.on_device(moved.to("cpu"))
        and moved.to(torch.float64).dtype == torch.float64
    )
    assert stand_in.device.on_device(moved.to(torch.float64)), "a dtype change stays on the device"
    assert moved.cuda() is moved and float(moved.sum()) == 4.0


def test_the_stand_in_catches_unordered_work_on_the_same_bytes(stand_in):
    """A matmul that reads a buffer a copy on another stream is still writing, without waiting for
    it, is a race; so is the host writing pinned memory that an async copy still reads. Ordered by
    an event, or by the host waiting, neither is."""
    import torch

    cuda = stand_in.torch.cuda
    host = torch.ones(2**16, dtype=torch.bfloat16).pin_memory()
    dev = torch.empty_like(host, device="cuda")
    weight, out = (
        torch.ones(64, 64, device="cuda", dtype=torch.bfloat16),
        torch.empty(2**10, 64, device="cuda", dtype=torch.bfloat16),
    )
    copy_stream, compute_stream = cuda.Stream(), cuda.Stream()

    def pipeline(wait: bool) -> None:
        cuda.synchronize()
        with cuda.stream(copy_stream):
            dev.copy_(host, non_blocking=True)
            done = copy_stream.record_event()
        with cuda.stream(compute_stream):
            if wait:
                compute_stream.wait_event(done)
            torch.mm(dev.view(-1, 64), weight, out=out)

    pipeline(wait=True)
    with pytest.raises(fake_cuda.DataRace, match="gemm .* races Memcpy HtoD"):
        pipeline(wait=False)
    cuda.synchronize()
    with cuda.stream(copy_stream):
        dev.copy_(host, non_blocking=True)
    with pytest.raises(fake_cuda.DataRace, match="host access"):
        host.fill_(2.0)
    cuda.synchronize()
    host.fill_(2.0)
    assert float(out.float().sum()) == 64 * 2**16, "the matmuls computed on the copied ones"


def test_without_the_stand_in_the_engine_drives_torch_itself():
    import torch

    rt = overlap_gpu.runtime()
    assert (
        rt.torch is torch
        and rt.provenance == "device"
        and rt.facts_source.startswith("cuDeviceGetAttribute")
    )


def test_the_driver_version_is_read_from_the_driver_file(tmp_path):
    version = tmp_path / "version"
    version.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Tue Jan 7 "
        "2025\nGCC version: gcc 12\n"
    )
    assert overlap_gpu._driver_version_text(version) == "570.86.15"
    version.write_text("no version here\n")
    assert overlap_gpu._driver_version_text(version) == "unknown"
    assert overlap_gpu._driver_version_text(tmp_path / "absent") == "unknown"


# ---------------------------------------------------------------- run_experiment('real_gpu')


def test_real_gpu_on_the_stand_in_overlaps_and_its_controls_do_not(stand_in):
    result = overlap_lab.run_experiment("real_gpu", **TINY)
    assert result["failure"] is None, result["failure"]
    overlap_lab.validate_result(result)  # the real schema and consistency checks
    hw = result["hardware"]
    assert (
        hw["provenance"] == "stand_in"
        and hw["device"].startswith("stand-in")
        and result["evidence_level"] == STAND_IN_EVIDENCE
    )
    assert hw["async_engine_count"] == 2 and hw["cuda_available"] and hw["nvml"] is None
    assert hw["pinned_h2d_gbytes_per_s"] == pytest.approx(
        max(c["copy_gbytes_per_s"] for c in result["cases"])
    )
    assert [(c["payload_mib"], c["window"]) for c in result["cases"]] == [
        (0.5, "fixed"),
        (0.5, "calibrated"),
        (1, "fixed"),
        (1, "calibrated"),
    ]
    model = stand_in.model
    for case in result["cases"]:
        assert case["copy_correct"] and case["compute_correct"] and case["preconditions_met"], case
        nbytes = case["payload_mib"] * 2**20
        # the gate hides the launch
        assert case["copy_alone_ms"] == pytest.approx(model.copy_ms(nbytes, "h2d", True))
        assert case["compute_alone_ms"] == pytest.approx(
            case["matmul_count"] * model.matmul_ms(2 * 16**3)
        )
        # one stream: copy then compute, nothing hidden; distinct streams: only the longer side is
        # left
        assert case["serial_median_ms"] == pytest.approx(
            case["copy_alone_ms"] + case["compute_alone_ms"]
        )
        assert case["overlap_median_ms"] == pytest.approx(
            max(case["copy_alone_ms"], case["compute_alone_ms"])
        )
        assert case["gate_held_fraction"] == 1.0 and case["launch_overhead_ms"] == pytest.approx(
            model.launch_ms * (1 + case["matmul_count"])
        )
    for case in (c for c in result["cases"] if c["window"] == "calibrated"):
        assert case["path_confirmed"] and abs(case["compute_copy_balance"] - 1) <= 0.05, case
        assert case["latency_ratio"] == pytest.approx(0.5, abs=0.03)
        exposed = case["overlap_median_ms"] - case["compute_alone_ms"]
        assert abs(exposed) <= 0.05 * case["serial_median_ms"], (
            "balanced and overlapped: almost nothing exposed"
        )
    assert result["workload"]["gate_ms"] == overlap_gpu.gate_length_ms(
        result["cases"][-1]["matmul_count"]
    )
    controls = {c["name"]: c for c in result["controls"]}
    assert list(controls) == list(overlap_gpu.GPU_CONTROLS)
    assert not any(c["overlap_confirmed"] for c in controls.values())
    assert controls["one_stream"]["latency_ratio"] == pytest.approx(1.0), (
        "one_stream is the serial program itself"
    )
    # the host waits for the copy, then launches the matmuls
    for name in ("pageable_source", "blocking_copy"):
        assert (
            controls[name]["overlap_evidence"]["overlapped_repeats"] == 0
            and controls[name]["latency_ratio"] > 1
        )
    pageable = model.copy_ms(2**20, "h2d", False) / model.copy_ms(2**20, "h2d", True)
    assert controls["pageable_source"]["overlap_evidence"]["copy_slowdown"] == pytest.approx(
        pageable
    )


def test_a_stand_in_result_never_passes_for_a_measurement(stand_in, tmp_path):
    result = overlap_lab.finalize(overlap_lab.run_experiment("real_gpu", **TINY), _decide())
    assert result["decision"] == "accept_physical_overlap", (
        "TODO 5's reference rule accepts what the model overlapped"
    )
    assert (
        result["decision_reason"].startswith(STAND_IN_NOTE)
        and "Modelled:" in result["decision_reason"]
    )
    overlap_lab.validate_result(result)  # honest as it is ...
    relabelled = {**result, "evidence_level": "local_mechanism_benchmark"}
    claimed = {**result, "hardware": {**result["hardware"], "provenance": "device"}}
    renamed = {**result, "hardware": {**result["hardware"], "device": "NVIDIA H100"}}
    unlabelled = {
        **relabelled,
        "hardware": {k: v for k, v in result["hardware"].items() if k != "provenance"},
    }
    for bad in (relabelled, claimed, renamed, unlabelled):  # ... and refused as anything else
        with pytest.raises(jsonschema.ValidationError):
            overlap_lab.validate_result(bad)
    (tmp_path / "course.toml").write_text("[course]\n")
    for shown in (
        result,
        {**result, "hardware": {k: v for k, v in result["hardware"].items() if k != "provenance"}},
    ):
        with pytest.raises(ValueError, match="stand-in"):
            overlap_lab.write_result(shown, tmp_path)
    assert list(tmp_path.rglob("*.json")) == [], "no verdict file is written from a stand-in"


def test_the_evidence_needs_a_free_copy_engine_not_just_two_streams(monkeypatch):
    """Copies that run on the SMs (no copy engine) serialise with compute on distinct streams: the
    preconditions hold, but the timelines show no overlap, and the rule does not accept."""
    with fake_cuda.installed(monkeypatch, model=fake_cuda.Model(copy_engines=0)):
        result = overlap_lab.finalize(overlap_lab.run_experiment("real_gpu", **TINY), _decide())
    overlap_lab.validate_result(result)
    calibrated = [c for c in result["cases"] if c["window"] == "calibrated"]
    assert all(c["preconditions_met"] and not c["overlap_confirmed"] for c in calibrated)
    assert all(c["latency_ratio"] == pytest.approx(1.0) for c in calibrated)
    assert (
        result["decision"] == "tune_overlap_window"
        and result["hardware"]["async_engine_count"] == 0
    )


def test_slow_launches_outrun_the_gate_and_it_says_so(monkeypatch):
    """Host launches slower than the gate allows for (20 µs a launch): the gate is not held."""
    with fake_cuda.installed(monkeypatch, model=fake_cuda.Model(launch_ms=0.2)) as slow:
        result = overlap_lab.run_experiment("real_gpu", **TINY)
    case = result["cases"][-1]
    assert case["gate_held_fraction"] == 0.0
    gate = overlap_gpu.gate_length_ms(case["matmul_count"])
    assert (
        case["launch_overhead_ms"]
        == pytest.approx(slow.model.launch_ms * (1 + case["matmul_count"]))
        and case["launch_overhead_ms"] > gate
    )


def test_the_progress_bar_counts_every_run(stand_in):
    class Bar:
        totals, done = [], 0

        def __init__(self, total, desc):
            Bar.totals.append(total)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def update(self, n=1):
            Bar.done += n

    for warmup in (0, 2):
        Bar.totals, Bar.done = [], 0
        workload = {
            "payload_mib": [0.5],
            "matrix_size": 16,
            "seed": 1,
            "warmup_steps": warmup,
            "repeat_steps": 2,
        }
        result = overlap_lab.new_result("real_gpu", "bar", "x", workload)
        overlap_gpu.run_gpu(result, Bar, controls=False)
        assert Bar.totals == [Bar.done], (
            f"warmup {warmup}: the bar's total is not the runs it counts"
        )
        assert result["controls"] == []


@pytest.mark.parametrize(
    "options, message",
    [
        ({"available": False}, "CUDA is not available"),
        ({"driver_error": True}, "cannot read device facts from the CUDA driver: libcuda"),
    ],
)
def test_a_failed_gpu_run_is_recorded_not_raised(monkeypatch, options, message):
    with fake_cuda.installed(monkeypatch, **options):
        result = overlap_lab.run_experiment("real_gpu", **TINY)
    overlap_lab.validate_result(result)
    assert result["failure"]["type"] == "RuntimeError" and message in result["failure"]["message"]
    assert (
        result["evidence_level"] == "failed_real_gpu_attempt"
        and result["cases"] == []
        and result["decision"] == "reject_until_environment_fixed"
    )


def test_nvml_facts_fill_in_the_driver_and_the_link(monkeypatch):
    nvml = {
        "driver_version": "570.86.15",
        "pcie_gen_max": 5,
        "pcie_width_max": 16,
        "pcie_nominal_gbytes_per_s": 63.0,
        "sm_clock_mhz": None,
    }
    with fake_cuda.installed(monkeypatch, nvml=nvml):
        result = overlap_lab.run_experiment("real_gpu", **{**TINY, "payload_mib": [0.5]})
    hw = result["hardware"]
    assert (
        hw["nvml"] == nvml
        and hw["driver_version"] == "570.86.15"
        and hw["pcie_nominal_gbytes_per_s"] == 63.0
    )
    overlap_lab.validate_result(result)


# ---------------------------------------------------------------- profiler, sweep, bandwidth curve


def test_the_profiler_sees_kernels_during_the_memcpy_only_when_overlapped(stand_in, tmp_path):
    result = overlap_lab.run_experiment(
        "real_gpu", **{**TINY, "payload_mib": [1]}, controls=False, profile_dir=tmp_path
    )
    profiles = json.loads((tmp_path / "overlap_profile.json").read_text())
    over, serial = profiles["overlap"], profiles["serial"]
    count = result["cases"][-1]["matmul_count"]
    assert (
        over["memcpy_spans"] == serial["memcpy_spans"] == 1
        and over["kernel_spans"] == serial["kernel_spans"] == count
    )
    assert over["memcpy_ms"] == pytest.approx(stand_in.model.copy_ms(2**20, "h2d", True))
    assert over["overlap_fraction"] == pytest.approx(1.0) and serial["overlap_fraction"] == 0.0
    trace = json.loads(Path(over["trace"]).read_text())
    assert any(e["name"].startswith("Memcpy HtoD (Pinned") for e in trace["traceEvents"])


def test_a_plan_runs_alone_and_profiles_without_a_trace(stand_in):
    """A GpuPlan built by hand: its controls, and a profile that saves no trace."""
    import torch

    n = 16
    left, right, product = (torch.ones(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    host = torch.ones(2**18, dtype=torch.bfloat16).pin_memory()
    streams = (stand_in.torch.cuda.Stream(), stand_in.torch.cuda.Stream())
    plan = overlap_gpu.GpuPlan(
        host,
        torch.empty_like(host, device="cuda"),
        left,
        right,
        product,
        10,
        streams,
        stand_in.model.clock_khz,
    )
    copy_alone, compute_alone = (
        [plan.copy_alone() for _ in range(3)],
        [plan.compute_alone() for _ in range(3)],
    )
    rows = overlap_gpu.run_gpu_controls(0.5, plan, copy_alone, compute_alone, repeats=2)
    assert [r["name"] for r in rows] == list(overlap_gpu.GPU_CONTROLS) and not any(
        r["overlap_confirmed"] for r in rows
    )
    profile = overlap_gpu.profile_overlap(plan)
    assert (
        profile["trace"] is None
        and profile["kernel_spans"] == 10
        and profile["overlap_fraction"] == pytest.approx(1.0)
    )
    assert (
        stand_in.device.on_device(plan.dev)
        and torch.equal(plan.dev.cpu(), host)
        and not plan.pageable.is_pinned()
    )


def test_the_pipeline_sweep_hides_copy_behind_chunks(stand_in):
    sweep = overlap_sweep.pipeline_sweep_gpu(payload_mib=0.25, chunk_counts=(1, 2, 4, 8), repeats=2)
    assert sweep["device"].startswith("stand-in") and sweep["warnings"] == []
    model, exposed = stand_in.model, sweep["exposed_ms"]
    # one chunk: the whole copy is exposed (compute alone and the sweep both pay one launch); two:
    # about half
    assert exposed[0] == pytest.approx(model.copy_ms(sweep["payload_mib"] * 2**20, "h2d", True))
    assert exposed[1] < exposed[0] and sweep["best_chunks"] == 2
    assert exposed[-1] > exposed[1], "eight chunks pay eight latencies and launches"
    assert sweep["per_chunk_cost_ms"] >= model.launch_ms and sweep["width"] == 1024


def test_the_pipeline_sweep_widens_compute_until_it_lasts_as_long_as_the_copy(monkeypatch):
    """On a faster device (40 TFLOP/s) compute at width 1024 is shorter than the copy: the sweep
    widens."""
    with fake_cuda.installed(monkeypatch, model=fake_cuda.Model(matmul_tflops=40.0)):
        sweep = overlap_sweep.pipeline_sweep_gpu(payload_mib=0.25, chunk_counts=(1, 2), repeats=1)
    assert sweep["width"] > 1024 and sweep["compute_alone_ms"] >= sweep["copy_alone_ms"]


def test_the_bandwidth_curve_recovers_the_models_latency_and_bandwidth(stand_in):
    curve = overlap_sweep.bandwidth_curve_gpu(max_mib=1, repeats=2)
    model = stand_in.model
    assert curve["device"].startswith("stand-in") and curve["warnings"] == []
    for name, series in curve["series"].items():
        direction, memory = name.split("_")
        assert series["bytes"] == [64 * 2**10, 256 * 2**10, 2**20]
        assert series["gbytes_per_s"] == pytest.approx(getattr(model, f"{name}_gbps"))
        assert series["t0_ms"] == pytest.approx(model.copy_latency_ms + model.launch_ms), (
            f"{direction} {memory}: one launch + latency"
        )
        assert series["r2"] == pytest.approx(1.0)
    assert (
        curve["series"]["h2d_pinned"]["gbytes_per_s"]
        > curve["series"]["h2d_pageable"]["gbytes_per_s"]
    )


# ---------------------------------------------------------------- benchmarks/gpu_check.py


def test_gpu_check_runs_whole_on_the_stand_in_and_fails_only_as_a_stand_in(
    stand_in, tmp_path, capsys
):
    sizes = [
        "--payload-mib",
        "0.5",
        "1",
        "--matrix-size",
        "16",
        "--warmup",
        "1",
        "--repeats",
        "3",
        "--sweep-mib",
        "0.25",
        "--bandwidth-mib",
        "1",
    ]
    results = sorted((ROOT / "benchmarks" / "results").iterdir())
    gpu_check = _gpu_check()
    assert gpu_check.main(["--out", str(ROOT / "benchmarks" / "results"), *sizes]) == 1
    assert "stand-in for torch.cuda is installed" in capsys.readouterr().out
    assert gpu_check.main(["--out", str(tmp_path), *sizes]) == 1
    table = capsys.readouterr().out

    def failed(text):
        rows = [line for line in text.splitlines() if line.startswith(("PASS", "FAIL"))]
        assert len(rows) > 20, text
        return [
            line.split("  ")[1]
            for line in rows
            if line.startswith("FAIL") and "finished within" not in line
        ]

    assert failed(table) == ["measured on a device (not a stand-in)"], table
    written = json.loads((tmp_path / "inf_serving_overlap_gpu_check.json").read_text())
    assert (
        written["hardware"]["provenance"] == "stand_in"
        and written["evidence_level"] == STAND_IN_EVIDENCE
    )
    extras = json.loads((tmp_path / "gpu_check_extras.json").read_text())
    assert (
        set(extras) == {"sweep", "bandwidth", "profile"}
        and (tmp_path / "overlap_trace_overlap.json").is_file()
    )
    assert gpu_check.main(["--validate", str(tmp_path / "inf_serving_overlap_gpu_check.json")]) == 1
    validated = capsys.readouterr().out
    assert (
        failed(validated) == ["measured on a device (not a stand-in)"]
        and "PASS  schema" in validated
    )
    assert sorted((ROOT / "benchmarks" / "results").iterdir()) == results, (
        "nothing written into the course's results"
    )


# ---------------------------------------------------------------- coverage


@pytest.mark.slow
def test_every_line_of_the_gpu_engine_runs_here(tmp_path):
    """This file's tests, under coverage.py, run every line of tools/overlap/gpu.py."""
    pytest.importorskip("coverage")
    data = tmp_path / ".coverage"
    run = [
        sys.executable,
        "-m",
        "coverage",
        "run",
        f"--data-file={data}",
        "--include=*/tools/overlap/gpu.py",
    ]
    tests = [
        "-m",
        "pytest",
        __file__,
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-k",
        "not every_line",
    ]
    done = subprocess.run(run + tests, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = [
        sys.executable,
        "-m",
        "coverage",
        "report",
        f"--data-file={data}",
        "--show-missing",
        "--fail-under=100",
    ]
    shown = subprocess.run(report, cwd=ROOT, capture_output=True, text=True, timeout=60)
    print(shown.stdout)  # the figure, with any line not run
    assert shown.returncode == 0 and "gpu.py" in shown.stdout, shown.stdout + shown.stderr
