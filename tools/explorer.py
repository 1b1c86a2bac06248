"""Step 2 explorer: move the sliders, watch the exposed part of a handoff change.

It runs on the learner's own ``estimate_handoff`` (passed in). Wherever a widget frontend
renders ipywidgets (JupyterLab, Notebook 7, VS Code, Colab) it shows live widgets; where
none does (nbconvert or nbclient execution, nbgrader, feedback HTML, a plain Python) it
draws one static figure for the default settings instead, and never fails.
``COURSE_WIDGETS=live|static`` overrides the detection.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import matplotlib.pyplot as plt

from . import presets, settings
from .at_grading import grading_mode
from .i18n import N_, error_text, say, tr
from .plotting import NOISE, draw_transfer_timeline, new_figure, readable
from .presets import MiB

# The course's presets (tools/presets.py, with their sources), under the explorer's labels.
# Link speeds in Gbit/s (measured where known, else nominal).
LINK_PRESETS = {
    "PCIe Gen5 (55 GB/s)": presets.LINK_PRESETS["PCIe Gen5 x16"]["gbps"],
    "NVLink 4 (375 GB/s)": presets.LINK_PRESETS["NVLink 4"]["gbps"],
    "InfiniBand NDR": presets.LINK_PRESETS["InfiniBand NDR"]["gbps"],
    "RoCE 200G": presets.LINK_PRESETS["RoCE 200G"]["gbps"],
}
# (KV bytes per token, layers): bf16, GQA: 2 * layers * kv_heads * head_dim * 2.
MODEL_PRESETS = {
    name: (m["kv_bytes_per_token"], m["layers"]) for name, m in presets.MODEL_PRESETS.items()
}
# relative: a slider value this close to a preset's is the frontend's echo of it
ECHO_TOLERANCE = 0.005
DEFAULTS = {
    "payload_mib": 1024.0,
    "gbps": 55 * 8,
    "latency_ms": 0.05,
    "window_ms": 250.0,
    "other_ms": 0.0,
    "layers": 1,
}


def widget_frontend() -> str | None:
    """The widget frontend this kernel serves: 'colab', 'vscode', 'jupyter', or None where none
    renders widgets (then the explorer draws a static figure).

    In order: ``COURSE_WIDGETS=static|live`` decides; nbgrader's execution (``NBGRADER_EXECUTION``)
    is static; outside an IPython kernel (a terminal, a script) nothing renders widgets; a kernel
    whose current request came from a client that allows no input (nbclient, nbconvert, papermill
    and nbgrader all send ``allow_stdin: false``, a person's frontend sends true) has no one to
    show them to. Otherwise Colab is told by ``google.colab``, VS Code by ``VSCODE_PID`` or
    ``VSCODE_CWD`` in the kernel's environment, and any other interactive client (JupyterLab,
    Notebook 7, nbclassic) is taken to be a Jupyter frontend.
    """
    forced = settings.widgets()
    if forced:
        if forced not in ("live", "static"):
            raise ValueError(
                f"COURSE_WIDGETS={forced!r}: expected 'live' or 'static' (or unset it)"
            )
        if forced == "static":
            return None
    if grading_mode() and forced != "live":
        return None
    if forced != "live" and not _interactive_kernel():
        return None
    if _in_colab():
        return "colab"
    if settings.in_vscode():
        return "vscode"
    return "jupyter"


def _interactive_kernel() -> bool:
    """True inside an IPython kernel whose current execute request allows input (a person's
    frontend)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None:
        return False  # a terminal IPython or a plain script: no frontend to render widgets
    try:
        parent = kernel.get_parent()  # the execute_request being answered
    except Exception:
        parent = getattr(kernel, "_parent", None)
    content = (parent or {}).get("content") or {}
    if "allow_stdin" in content:
        return bool(content["allow_stdin"])
    return bool(getattr(kernel, "_allow_stdin", True))


def _in_colab() -> bool:
    import importlib.util
    import sys

    if "google.colab" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("google.colab") is not None
    except (ImportError, ValueError):
        return False


def enable_colab_widgets() -> None:
    """Colab renders ipywidgets through its custom widget manager once it is enabled."""
    try:
        from google.colab import output
    except ImportError:
        return
    output.enable_custom_widget_manager()


def evaluate(
    estimate_handoff: Callable,
    payload_mib: float,
    gbps: float,
    latency_ms: float,
    window_ms: float,
    other_ms: float,
    layers: int,
) -> dict:
    """One explorer setting, computed with the learner's ``estimate_handoff``.

    Independent compute runs on [0, window_ms] (prefill), then other requests' work on
    [window_ms, window_ms + other_ms]. The KV is sent in ``layers`` chunks, one per layer,
    each once its layer is done and the link is free; layers = 1 means one transfer after
    compute ends. The fixed latency is paid once, by the first chunk. So the last chunk
    always starts after prefill: streaming leaves about transfer / layers exposed unless
    other work covers it.
    """
    windows = [(0.0, window_ms)] + ([(window_ms, window_ms + other_ms)] if other_ms > 0 else [])
    chunk = int(payload_mib * MiB) / layers
    link_free, chunks = 0.0, []
    for i in range(layers):
        ready = window_ms * (i + 1) / layers
        r = estimate_handoff(
            int(round(chunk)), gbps, latency_ms if i == 0 else 0.0, max(ready, link_free), windows
        )
        chunks.append(r)
        link_free = r["end_ms"]
    transfer = sum(c["transfer_ms"] for c in chunks)
    exposed = min(sum(c["exposed_ms"] for c in chunks), transfer)
    hidden = transfer - exposed  # a sum of pieces: 1e-14 ms of rounding is no hidden time
    if hidden < NOISE:
        hidden = 0.0
    return {
        "transfer_ms": transfer,
        "exposed_ms": exposed,
        "hidden_ms": hidden,
        "overlap_ratio": min(max(hidden / transfer, 0.0), 1.0) if transfer else 1.0,
        "segments": [(c["start_ms"], c["end_ms"]) for c in chunks],
        "windows": windows,
        "start_ms": chunks[0]["start_ms"],
        "end_ms": chunks[-1]["end_ms"],
    }


def readout_text(r: dict) -> str:
    """One line of numbers: ms to 2 decimals, the ratio to 2, noise shown as 0, never -0.00."""
    ms = {
        key: readable(r[key], 2, fixed=True) for key in ("transfer_ms", "hidden_ms", "exposed_ms")
    }
    return tr(
        "transfer {transfer} ms · hidden {hidden} ms · exposed {exposed} ms · overlap "
        "ratio {ratio}",
        transfer=ms["transfer_ms"],
        hidden=ms["hidden_ms"],
        exposed=ms["exposed_ms"],
        ratio=readable(r["overlap_ratio"], 2, fixed=True),
    )


def _draw(r: dict, title: str) -> None:
    from IPython.display import display

    fig, ax = new_figure(height=2.8)
    draw_transfer_timeline(
        ax,
        r["start_ms"],
        r["end_ms"],
        r["windows"],
        r["hidden_ms"],
        r["exposed_ms"],
        title=title,
        segments=r["segments"],
    )
    display(fig)  # explicit, so it shows inside an Output widget whatever the backend
    plt.close(fig)


def show_live_or_static(
    mode: str | None,
    first_run: Callable,
    *,
    unfinished: str,
    failed: str,
    static: str,
    describe: Callable,
    draw_static: Callable,
    build_live: Callable,
):
    """What the explorer and notebook 06's panel share: run the learner's functions once on the
    defaults; say what to do when they are unfinished (``unfinished``) or raise (``failed``, with
    ``{error}``); then live widgets where a widget frontend renders them (``build_live(first)``),
    else the static figure (``draw_static(first)``) after ``static`` and ``describe(first)``. The
    three messages are catalog templates (marked ``N_`` by the caller), printed in the learner's
    language. ``mode='live'|'static'`` decides instead of ``widget_frontend``. Returns the widget or
    None."""
    if mode not in (None, "live", "static"):
        raise ValueError(f"mode must be 'live', 'static' or None, got {mode!r}")
    try:
        first = first_run()
    except NotImplementedError:
        say(unfinished)
        return None
    except Exception as exc:  # a wrong answer must not break the page
        say(failed, error=error_text(exc))
        return None
    frontend = widget_frontend() if mode is None else ("jupyter" if mode == "live" else None)
    if frontend is None:
        say(static, readout=describe(first))
        draw_static(first)
        return None
    if frontend == "colab":
        enable_colab_widgets()
    return build_live(first)


def handoff_explorer(estimate_handoff: Callable, mode: str | None = None):
    """Show the explorer: live widgets where a widget frontend renders them, else a static
    figure (see ``widget_frontend``; ``mode='live'|'static'`` decides instead). Returns the
    widget, or None when it drew the static figure or the learner's function is unfinished."""
    return show_live_or_static(
        mode,
        lambda: evaluate(estimate_handoff, **DEFAULTS),
        unfinished=N_("Finish TODO 1 and TODO 2 above: the explorer runs on your own functions."),
        failed=N_("Your estimate_handoff raised {error}. Fix it, then run this cell again."),
        static=N_(
            "Static view (the sliders need a live notebook: JupyterLab, Notebook 7, VS Code "
            "or Colab): {readout}"
        ),
        describe=readout_text,
        draw_static=lambda first: _draw(
            first, tr("1 GiB over PCIe Gen5, sent after a 250 ms prefill")
        ),
        build_live=lambda first: _build_widgets(estimate_handoff),
    )


def controls_of(explorer) -> dict:
    """The explorer's controls by description (the presets' too): for tests and for scripting it."""
    return {
        child.description: child for child in explorer.children if getattr(child, "description", "")
    }


def _build_widgets(estimate_handoff: Callable):
    import ipywidgets as w

    controls = _make_controls(w)
    _wire(controls, estimate_handoff)
    return _boxed(w, controls)


def _make_controls(w) -> dict:
    """The explorer's widgets by name: six sliders, the prompt-token slider, two preset rows, the
    readout and the figure's output area."""
    style = {"description_width": "170px"}
    layout = w.Layout(width="560px")
    c = {}
    c.update(_make_link_sliders(w, style, layout))
    c.update(_make_timing_sliders(w, style, layout))
    c.update(_make_preset_rows(w))
    c["readout"] = w.HTML()
    c["readout"].add_class("handoff-readout")
    c["out"] = w.Output()
    return c


def _make_link_sliders(w, style: dict, layout) -> dict:
    """The payload and link-speed sliders (log scales)."""
    c = {}
    # Log steps this fine put a step within 0.5 of every whole MiB or Gbit/s in range, so the
    # frontend, which snaps a value to a step, still shows a preset's 640 MiB as 640 (a 0.01 step
    # showed 639).
    c["payload"] = w.FloatLogSlider(
        value=DEFAULTS["payload_mib"],
        base=2,
        min=0,
        max=16,
        step=1e-5,
        description=tr("payload (MiB)"),
        readout_format=".0f",
        style=style,
        layout=layout,
    )
    c["gbps"] = w.FloatLogSlider(
        value=DEFAULTS["gbps"],
        base=10,
        min=1,
        max=3.7,
        step=1e-5,
        description=tr("link (Gbit/s)"),
        readout_format=".0f",
        style=style,
        layout=layout,
    )
    return c


def _make_timing_sliders(w, style: dict, layout) -> dict:
    """The latency, prefill-window, other-work, layer and prompt-token sliders."""
    c = {}
    c["latency"] = w.FloatSlider(
        value=DEFAULTS["latency_ms"],
        min=0,
        max=5,
        step=0.05,
        description=tr("fixed latency (ms)"),
        style=style,
        layout=layout,
    )
    c["window"] = w.FloatSlider(
        value=DEFAULTS["window_ms"],
        min=0,
        max=1000,
        step=5,
        description=tr("prefill window (ms)"),
        style=style,
        layout=layout,
    )
    c["other"] = w.FloatSlider(
        value=DEFAULTS["other_ms"],
        min=0,
        max=500,
        step=5,
        description=tr("other requests' work (ms)"),
        style=style,
        layout=layout,
    )
    c["layers"] = w.IntSlider(
        value=DEFAULTS["layers"],
        min=1,
        max=128,
        description=tr("layers (1 = send after)"),
        style=style,
        layout=layout,
    )
    c["tokens"] = w.IntSlider(
        value=8192,
        min=512,
        max=131072,
        step=512,
        description=tr("prompt tokens"),
        style=style,
        layout=layout,
        disabled=True,
        tooltip=tr(
            "choose a model preset: the payload is then prompt tokens × the model's KV "
            "bytes per token"
        ),
    )
    return c


def _make_preset_rows(w) -> dict:
    """The link and model preset rows."""
    c = {}
    # a toggle button is 148 px wide unless told otherwise, which cuts "PCIe Gen5 (55 GB/s)": each
    # is as wide as its label, and the row wraps where a narrow output has no room for all of them
    buttons = {"button_width": "auto"}
    c["link_buttons"] = w.ToggleButtons(
        options=_preset_options(LINK_PRESETS),
        value="PCIe Gen5 (55 GB/s)",
        description=tr("link preset"),
        style=buttons,
    )
    c["model_buttons"] = w.ToggleButtons(
        options=_preset_options(MODEL_PRESETS),
        value="custom",
        description=tr("model preset"),
        style=buttons,
    )
    return c


def _wire(c: dict, estimate_handoff: Callable) -> None:
    """Redraw on every slider; a preset sets its sliders, and a slider moved by hand sets its preset
    row back to 'custom'."""
    wiring = _ExplorerWiring(c, estimate_handoff)
    c["link_buttons"].observe(wiring.on_link, names="value")
    c["model_buttons"].observe(wiring.on_model, names="value")
    c["tokens"].observe(wiring.on_tokens, names="value")
    c["payload"].observe(
        wiring.back_to_custom(c["model_buttons"], wiring.model_payload), names="value"
    )
    c["gbps"].observe(wiring.back_to_custom(c["link_buttons"], LINK_PRESETS.get), names="value")
    for name in ("payload", "gbps", "latency", "window", "other", "layers"):
        c[name].observe(wiring.redraw, names="value")
    wiring.redraw()


class _ExplorerWiring:
    """The explorer's callbacks: they share its controls ``c`` (by name) and the learner's
    ``estimate_handoff``."""

    def __init__(self, c: dict, estimate_handoff: Callable):
        self.c = c
        self.estimate_handoff = estimate_handoff
        # non-empty while a preset sets sliders, so those changes do not reset the preset
        self.applying = []

    def redraw(self, *_):
        """Run the learner's function on the sliders' values; show its readout and figure."""
        if self.applying:
            return
        c = self.c
        payload, gbps, layers, readout, out = (
            c["payload"],
            c["gbps"],
            c["layers"],
            c["readout"],
            c["out"],
        )
        try:
            r = evaluate(
                self.estimate_handoff,
                payload.value,
                gbps.value,
                c["latency"].value,
                c["window"].value,
                c["other"].value,
                layers.value,
            )
        except Exception as exc:
            readout.value = tr(
                "<b>error</b> from your estimate_handoff: {error}", error=error_text(exc)
            )
            return
        readout.value = "<b>" + readout_text(r) + "</b>"
        with out:
            out.clear_output(wait=True)
            size = {
                "payload": readable(payload.value, 0, fixed=True),
                "gbps": readable(gbps.value, 0, fixed=True),
                "layers": layers.value,
            }
            if layers.value > 1:
                _draw(r, tr("{payload} MiB at {gbps} Gbit/s, {layers} layers", **size))
            else:
                _draw(r, tr("{payload} MiB at {gbps} Gbit/s, 1 layer", **size))

    def apply(self, **values):
        """Set sliders by name (a preset's values) without resetting the preset, then redraw."""
        self.applying.append(True)
        try:
            for slider, value in values.items():
                self.c[slider].value = value
        finally:
            self.applying.pop()
        self.redraw()

    def on_link(self, change):
        """A link preset sets the link's speed."""
        if change["new"] in LINK_PRESETS:
            self.apply(gbps=LINK_PRESETS[change["new"]])

    def on_model(self, *_):
        """A model preset sets the payload and the layers."""
        model = self.c["model_buttons"].value
        # prompt tokens size the payload only through a model
        self.c["tokens"].disabled = model not in MODEL_PRESETS
        if model in MODEL_PRESETS:
            # stream one chunk per model layer
            self.apply(payload=self.model_payload(model), layers=MODEL_PRESETS[model][1])

    def on_tokens(self, *_):
        """Prompt tokens set the payload while a model preset is chosen."""
        if self.c["model_buttons"].value in MODEL_PRESETS:
            self.apply(payload=self.model_payload(self.c["model_buttons"].value))

    def back_to_custom(self, preset_buttons, preset_value):
        """A slider handler that sets ``preset_buttons`` back to 'custom' when the slider moves
        away from the chosen preset's value (``preset_value(preset)``)."""

        def handler(change):  # a slider moved by hand no longer matches the preset
            expected = preset_value(preset_buttons.value)
            if self.applying or expected is None:
                return
            # the frontend snaps a preset's value to the slider's log steps and may send it back:
            # within ECHO_TOLERANCE it is still the preset (a drag moves these sliders 2% or more a
            # pixel)
            if max(change["new"], expected) / min(change["new"], expected) > 1 + ECHO_TOLERANCE:
                preset_buttons.value = "custom"

        return handler

    def model_payload(self, model):
        """The payload in MiB of the prompt's KV cache for a model preset, else None."""
        if model not in MODEL_PRESETS:
            return None
        return self.c["tokens"].value * MODEL_PRESETS[model][0] / MiB


def _preset_options(presets: dict) -> list[tuple[str, str]]:
    """A preset row's (label, value) pairs: 'custom' is shown in the learner's language, its value
    stays 'custom'."""
    return [(tr("custom"), "custom"), *((name, name) for name in presets)]


def _boxed(w, c: dict):
    order = (
        "link_buttons",
        "model_buttons",
        "tokens",
        "payload",
        "gbps",
        "latency",
        "window",
        "other",
        "layers",
        "readout",
        "out",
    )
    return widget_box(w, tr("Handoff explorer"), [c[name] for name in order], c["readout"])


def widget_box(w, title: str, children: list, readout):
    """The controls in one box, which prints ``title`` and its readout's text where a frontend
    cannot show widgets (shared by the explorer and notebook 06's panel). The controls' labels
    and ``title`` are made in the learner's language (``tr``) by the caller."""

    class Box(w.VBox):
        # what a frontend without widget support prints instead
        def _repr_mimebundle_(self, **kwargs):
            data = super()._repr_mimebundle_(**kwargs)
            if data:
                cannot = tr(
                    "{title}: this frontend cannot show widgets (JupyterLab, Notebook 7, "
                    "VS Code and Colab can; ",
                    title=title,
                )
                data["text/plain"] = (
                    cannot
                    + tr("COURSE_WIDGETS=static draws a figure). ")
                    + re.sub(r"<[^>]+>", "", readout.value)
                )
            return data

    return Box(children)
