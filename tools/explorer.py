"""Step 2 explorer: move the sliders, watch the exposed part of a handoff change.

It runs on the learner's own ``estimate_handoff`` (passed in). In a live JupyterLab it
shows ipywidgets; where widgets cannot render (nbconvert, CI, feedback HTML) it draws one
static figure for the default settings instead, and never fails.
"""
from __future__ import annotations

import os
from typing import Callable

import matplotlib.pyplot as plt

from .plotting import draw_transfer_timeline, new_figure

MiB = 2**20
# Link speeds in Gbit/s (measured where known, else nominal).
LINK_PRESETS = {
    "PCIe Gen5 (55 GB/s)": 55 * 8,
    "NVLink 4 (396 GB/s)": 396 * 8,
    "InfiniBand NDR": 400,
    "RoCE 200G": 200,
}
# KV bytes per token, bf16, GQA: 2 * layers * kv_heads * head_dim * 2.
MODEL_PRESETS = {
    "Llama-3-8B": (2 * 32 * 8 * 128 * 2, 32),
    "Llama-3-70B": (2 * 80 * 8 * 128 * 2, 80),
    "Qwen2.5-7B": (2 * 28 * 4 * 128 * 2, 28),
}
DEFAULTS = {"payload_mib": 1024.0, "gbps": 55 * 8, "latency_ms": 0.05, "window_ms": 250.0, "other_ms": 0.0, "layers": 1}


def _frontend_is_live() -> bool:
    """True inside a kernel that a Jupyter server started for a user (widgets render)."""
    forced = os.environ.get("COURSE_WIDGETS")
    if forced in ("live", "static"):
        return forced == "live"
    return bool(os.environ.get("JPY_SESSION_NAME")) and not os.environ.get("NBGRADER_EXECUTION")


def evaluate(estimate_handoff: Callable, payload_mib: float, gbps: float, latency_ms: float,
             window_ms: float, other_ms: float, layers: int) -> dict:
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
        r = estimate_handoff(int(round(chunk)), gbps, latency_ms if i == 0 else 0.0, max(ready, link_free), windows)
        chunks.append(r)
        link_free = r["end_ms"]
    transfer = sum(c["transfer_ms"] for c in chunks)
    exposed = sum(c["exposed_ms"] for c in chunks)
    return {"transfer_ms": transfer, "exposed_ms": exposed, "hidden_ms": transfer - exposed,
            "overlap_ratio": 1 - exposed / transfer if transfer else 1.0,
            "segments": [(c["start_ms"], c["end_ms"]) for c in chunks], "windows": windows,
            "start_ms": chunks[0]["start_ms"], "end_ms": chunks[-1]["end_ms"]}


def readout_text(r: dict) -> str:
    return (f"transfer {r['transfer_ms']:.2f} ms · hidden {r['hidden_ms']:.2f} ms · "
            f"exposed {r['exposed_ms']:.2f} ms · overlap ratio {r['overlap_ratio']:.2f}")


def _draw(r: dict, title: str) -> None:
    from IPython.display import display

    fig, ax = new_figure(height=2.8)
    draw_transfer_timeline(ax, r["start_ms"], r["end_ms"], r["windows"], r["hidden_ms"], r["exposed_ms"], title=title,
                           segments=r["segments"])
    display(fig)  # explicit, so it shows inside an Output widget whatever the backend
    plt.close(fig)


def handoff_explorer(estimate_handoff: Callable, mode: str | None = None):
    """Show the explorer (live widgets or a static figure). Returns the widget or None."""
    try:
        first = evaluate(estimate_handoff, **DEFAULTS)
    except NotImplementedError:
        print("Finish TODO 1 and TODO 2 above: the explorer runs on your own functions.")
        return None
    except Exception as exc:  # a wrong answer must not break the page
        print(f"Your estimate_handoff raised {type(exc).__name__}: {exc}. Fix it, then run this cell again.")
        return None
    live = (mode == "live") if mode else _frontend_is_live()
    if not live:
        print("Static view (widgets need a live JupyterLab): " + readout_text(first))
        _draw(first, "1 GiB over PCIe Gen5, sent after a 250 ms prefill")
        return None
    return _build_widgets(estimate_handoff)


def _build_widgets(estimate_handoff: Callable):
    import ipywidgets as w

    style = {"description_width": "170px"}
    layout = w.Layout(width="560px")
    payload = w.FloatLogSlider(value=DEFAULTS["payload_mib"], base=2, min=0, max=16, step=0.25, description="payload (MiB)", readout_format=".0f", style=style, layout=layout)
    gbps = w.FloatLogSlider(value=DEFAULTS["gbps"], base=10, min=1, max=3.7, step=0.001, description="link (Gbit/s)", readout_format=".0f", style=style, layout=layout)
    latency = w.FloatSlider(value=DEFAULTS["latency_ms"], min=0, max=5, step=0.05, description="fixed latency (ms)", style=style, layout=layout)
    window = w.FloatSlider(value=DEFAULTS["window_ms"], min=0, max=1000, step=5, description="prefill window (ms)", style=style, layout=layout)
    other = w.FloatSlider(value=DEFAULTS["other_ms"], min=0, max=500, step=5, description="other requests' work (ms)", style=style, layout=layout)
    layers = w.IntSlider(value=DEFAULTS["layers"], min=1, max=128, description="layers (1 = send after)", style=style, layout=layout)
    tokens = w.IntSlider(value=8192, min=512, max=131072, step=512, description="prompt tokens", style=style, layout=layout)
    link_buttons = w.ToggleButtons(options=["custom", *LINK_PRESETS], value="PCIe Gen5 (55 GB/s)", description="link preset")
    model_buttons = w.ToggleButtons(options=["custom", *MODEL_PRESETS], value="custom", description="model preset")
    readout = w.HTML()
    readout.add_class("handoff-readout")
    out = w.Output()

    def redraw(*_):
        try:
            r = evaluate(estimate_handoff, payload.value, gbps.value, latency.value, window.value, other.value, layers.value)
        except Exception as exc:
            readout.value = f"<b>error</b> from your estimate_handoff: {type(exc).__name__}: {exc}"
            return
        readout.value = "<b>" + readout_text(r) + "</b>"
        with out:
            out.clear_output(wait=True)
            _draw(r, f"{payload.value:.0f} MiB at {gbps.value:.0f} Gbit/s")

    def on_link(change):
        if change["new"] in LINK_PRESETS:
            gbps.value = LINK_PRESETS[change["new"]]

    def on_model(*_):
        if model_buttons.value in MODEL_PRESETS:
            per_token, n_layers = MODEL_PRESETS[model_buttons.value]
            payload.value = tokens.value * per_token / MiB
            layers.max = max(layers.max, n_layers)

    link_buttons.observe(on_link, names="value")
    model_buttons.observe(on_model, names="value")
    tokens.observe(on_model, names="value")
    for slider in (payload, gbps, latency, window, other, layers):
        slider.observe(redraw, names="value")
    redraw()
    return w.VBox([link_buttons, model_buttons, tokens, payload, gbps, latency, window, other, layers, readout, out])
