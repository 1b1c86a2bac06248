"""Notebook 02's explorer (tools/explorer.py): its figure, presets, sliders and static fallback."""

import sys

import pytest

from tools import notebook_runtime

# ---------------------------------------------------------------- explorer


def test_explorer_static_without_a_live_frontend(monkeypatch, capsys, root):
    from tools import explorer

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.delenv("COURSE_WIDGETS", raising=False)
    funcs = notebook_runtime.load_learner_functions(
        "02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "solutions"]
    )
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

    funcs = notebook_runtime.load_learner_functions(
        "02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "solutions"]
    )
    r = explorer.evaluate(funcs["estimate_handoff"], 1024, 440, 0.0, 250.0, 0.0, 32)
    assert r["exposed_ms"] == pytest.approx(r["transfer_ms"] / 32), (
        "the last layer's share stays exposed"
    )
    after = explorer.evaluate(funcs["estimate_handoff"], 1024, 440, 0.0, 250.0, 0.0, 1)
    assert after["exposed_ms"] == pytest.approx(after["transfer_ms"]) and after[
        "overlap_ratio"
    ] == pytest.approx(0.0)


def test_explorer_waits_for_the_learner(capsys, root):
    from tools import explorer

    stub = notebook_runtime.load_learner_functions(
        "02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "notebooks"]
    )
    assert explorer.handoff_explorer(stub["estimate_handoff"], mode="live") is None
    assert "Finish TODO 1 and TODO 2" in capsys.readouterr().out


class _Kernel:
    """Stands in for ipykernel: answers get_parent() with the current execute_request."""

    def __init__(self, allow_stdin):
        self.allow_stdin = allow_stdin

    def get_parent(self, channel="shell"):
        return {
            "header": {"msg_type": "execute_request"},
            "content": {"code": "", "allow_stdin": self.allow_stdin},
        }


class _Shell:
    def __init__(self, kernel):
        self.kernel, self.user_ns = kernel, {}


def _frontend_env(monkeypatch, kernel=None, **env):
    """A kernel (or none) and exactly the environment variables that the detection reads."""

    import IPython

    for name in (
        "COURSE_WIDGETS",
        "NBGRADER_EXECUTION",
        "VSCODE_PID",
        "VSCODE_CWD",
        "JPY_SESSION_NAME",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(IPython, "get_ipython", lambda: _Shell(kernel) if kernel else None)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setattr("tools.explorer._in_colab", lambda: False)


@pytest.mark.parametrize(
    "kernel, env, expected",
    [
        (None, {}, None),  # a script or a terminal: no frontend
        (_Kernel(True), {"JPY_SESSION_NAME": "02.ipynb"}, "jupyter"),  # JupyterLab, Notebook 7
        (_Kernel(True), {}, "jupyter"),  # any other person's frontend that allows input
        # nbclient, nbconvert, papermill send allow_stdin false
        (_Kernel(False), {"JPY_SESSION_NAME": "02.ipynb"}, None),
        (_Kernel(True), {"VSCODE_PID": "4242"}, "vscode"),
        # remote or container kernels lack VSCODE_PID
        (_Kernel(True), {"VSCODE_CWD": "/home/me"}, "vscode"),
        (_Kernel(False), {"VSCODE_PID": "4242"}, None),  # nbconvert run from VS Code's terminal
        (_Kernel(True), {"NBGRADER_EXECUTION": "autograde"}, None),
        (_Kernel(True), {"COURSE_WIDGETS": "static"}, None),
        (None, {"COURSE_WIDGETS": "live"}, "jupyter"),
        (_Kernel(False), {"COURSE_WIDGETS": "live", "NBGRADER_EXECUTION": "validate"}, "jupyter"),
    ],
)
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
    import types

    from tools import explorer

    funcs = notebook_runtime.load_learner_functions(
        "02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "solutions"]
    )
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
    assert widget is not None and enabled == [True], (
        "in Colab the custom widget manager is enabled before the widgets show"
    )


def test_explorer_static_in_headless_runs_live_in_a_frontend(monkeypatch, capsys, root):
    from tools import explorer

    funcs = notebook_runtime.load_learner_functions(
        "02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "solutions"]
    )
    _frontend_env(monkeypatch, _Kernel(False), JPY_SESSION_NAME="02.ipynb")
    assert explorer.handoff_explorer(funcs["estimate_handoff"]) is None
    assert "Static view" in capsys.readouterr().out
    _frontend_env(monkeypatch, _Kernel(True), VSCODE_PID="4242")
    assert explorer.handoff_explorer(funcs["estimate_handoff"]) is not None
    assert "Static view" not in capsys.readouterr().out


def test_explorer_model_preset_sets_payload_and_layers(root):
    from tools import explorer

    funcs = notebook_runtime.load_learner_functions(
        "02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "solutions"]
    )
    controls = explorer.controls_of(
        explorer.handoff_explorer(funcs["estimate_handoff"], mode="live")
    )
    model, tokens, payload, layers = (
        controls[k]
        for k in ("model preset", "prompt tokens", "payload (MiB)", "layers (1 = send after)")
    )
    assert model.value == "custom" and tokens.disabled, (
        "prompt tokens do nothing until a model is chosen"
    )
    for name, (per_token, n_layers) in explorer.MODEL_PRESETS.items():
        model.value = name
        assert not tokens.disabled
        assert layers.value == n_layers, (
            f"{name} streams one chunk per layer: expected {n_layers} layers, got {layers.value}"
        )
        assert payload.value == pytest.approx(tokens.value * per_token / explorer.MiB)
    layers.value = 1  # compare with sending after prefill: the model stays chosen
    tokens.value = 32768
    assert payload.value == pytest.approx(32768 * per_token / explorer.MiB) and layers.value == 1
    # the frontend echoes a value snapped to the slider's steps: same preset
    payload.value = payload.value * 1.004
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
    plain = explorer.handoff_explorer(funcs["estimate_handoff"], mode="live")._repr_mimebundle_()[
        "text/plain"
    ]
    assert "cannot show widgets" in plain and "exposed" in plain, (
        "a frontend without widgets prints what to do, not VBox(...)"
    )


def test_explorer_readouts_are_rounded(root):
    from tools import explorer
    from tools.plotting import readable

    assert [readable(v) for v in (1.07e-14, -1e-12, 19.6, -3.25, 1234.5)] == [
        "0",
        "0",
        "19.6",
        "-3.25",
        "1.23e+03",
    ]
    assert [readable(v, 2, fixed=True) for v in (-0.001, -4e-15, 0.996, 12.345)] == [
        "0.00",
        "0.00",
        "1.00",
        "12.35",
    ]
    noisy = {
        "transfer_ms": 19.62,
        "hidden_ms": 1.07e-14,
        "exposed_ms": 19.62,
        "overlap_ratio": -2e-16,
    }
    assert explorer.readout_text(noisy) == (
        "transfer 19.62 ms · hidden 0.00 ms · exposed 19.62 ms · overlap ratio 0.00"
    )
    funcs = notebook_runtime.load_learner_functions(
        "02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "solutions"]
    )
    for layers in (1, 7, 32, 80):
        r = explorer.evaluate(funcs["estimate_handoff"], **{**explorer.DEFAULTS, "layers": layers})
        assert r["hidden_ms"] >= 0 and 0 <= r["overlap_ratio"] <= 1, r
        text = explorer.readout_text(r)
        assert "-0.00" not in text and "e-" not in text, text
    # sent after prefill: nothing hidden
    after = explorer.evaluate(funcs["estimate_handoff"], **explorer.DEFAULTS)
    assert after["hidden_ms"] == 0.0 and after["overlap_ratio"] == 0.0
