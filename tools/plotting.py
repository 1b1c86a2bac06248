"""One figure style for every notebook: labelled axes with units, a colour-blind-safe
palette (Okabe-Ito, plus one red), sizes readable at notebook width.

matplotlib is imported by the functions that draw, not by this module: the notebooks' set-up
cells import from here, and the grader's judge, which loads those cells to call the learner's
functions, never draws (matplotlib's import is about half a second per student)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence

from .i18n import N_, tr

# Okabe & Ito (2008): distinguishable with the common forms of colour-blindness.
PALETTE = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "green": "#009E73",
    "vermillion": "#D55E00",
    "sky": "#56B4E9",
    "purple": "#CC79A7",
    "yellow": "#F0E442",
    "black": "#000000",
    "grey": "#999999",
    # Not Okabe-Ito: the prose calls exposed time red, and vermillion reads as orange next to the
    # copy engine's orange. This red stays apart from the green, orange and blue above under
    # deuteranopia and protanopia, and white text on it keeps a 5.9:1 contrast.
    "red": "#CC0000",
}
# What each colour means, everywhere in the course.
ROLE = {
    "cpu": PALETTE["purple"],
    "compute": PALETTE["blue"],
    "copy": PALETTE["orange"],
    "network": PALETTE["sky"],
    "hidden": PALETTE["green"],
    "exposed": PALETTE["red"],
    "wait": PALETTE["grey"],
}
# What the notebooks' prose calls a role's colour ("the red part is exposed").
COLOUR_NAME = {
    "cpu": "purple",
    "compute": "blue",
    "copy": "orange",
    "network": "light blue",
    "hidden": "green",
    "exposed": "red",
    "wait": "grey",
}
# What a legend calls each role.
ROLE_LABEL = {
    "cpu": N_("CPU work"),
    "compute": N_("GPU compute (SMs)"),
    "copy": N_("copy engine (DMA)"),
    "network": N_("network transfer"),
    "hidden": N_("hidden transfer"),
    "exposed": N_("exposed transfer"),
    "wait": N_("waiting"),
}
FIGSIZE = (9.0, 3.6)
TIME_MS = N_("time (ms)")
# below this a value in ms is floating-point noise: 0.1 ns is far below any timing here
NOISE = 1e-9


def readable(value: float, digits: int = 3, fixed: bool = False) -> str:
    """``value`` for a label or readout: ``digits`` significant digits (or, with ``fixed``,
    decimals), floating-point noise (|value| < 1e-9) shown as 0, and never ``-0``."""
    value = float(value)
    if abs(value) < NOISE:
        value = 0.0
    text = f"{value:.{digits}f}" if fixed else f"{value:.{digits}g}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def binary_size(n_bytes: float) -> str:
    """``n_bytes`` in the largest binary unit that keeps it at least 1: ``4 KiB``, ``16 MiB``, ``1.5
    GiB``."""
    value, unit = float(n_bytes), "B"
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024:
            break
        value, unit = value / 1024, larger
    return f"{readable(value, 3)} {unit}"


def apply_style() -> None:
    """Set the course's matplotlib defaults (idempotent)."""
    import matplotlib

    matplotlib.rcParams.update(
        {
            "figure.figsize": FIGSIZE,
            "figure.dpi": 100,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.titlesize": 12,
            "axes.labelsize": 11,
            "legend.fontsize": 9,
            "xtick.labelsize": 9,
            "ytick.labelsize": 9,
            "axes.prop_cycle": matplotlib.cycler(
                color=[
                    PALETTE[k]
                    for k in ("blue", "orange", "green", "vermillion", "sky", "purple", "black")
                ]
            ),
        }
    )


def draw_lanes(
    ax,
    bars: Iterable[dict],
    lanes: Sequence[str],
    title: str = "",
    xlabel: str | None = None,
    legend: bool = False,
    extra_handles: Sequence = (),
) -> None:
    """Draw a lane timeline. Each bar: {'lane', 'start', 'end', 'label', 'role'}, times in ms.

    The lanes' names and the bars' labels are catalog keys (marked ``N_`` where they are written),
    drawn in the learner's language (``tr``); a name the catalog does not know (a work item's id)
    is drawn as it is. ``title`` and ``xlabel`` are drawn as given (made with ``tr``); the x label
    is "time (ms)" unless given.

    A bar with ``'hatch': True`` is drawn hatched (work that waits for a conflict; a legend says
    so); ``'color'`` overrides the role's colour. Labels go inside their bars when they fit, else
    beside them (see BarLabel). ``legend=True`` adds what each drawn role's colour means
    (``ROLE_LABEL``), and ``extra_handles`` (markers the caller draws) join that legend, right of
    the axes."""
    index = {lane: i for i, lane in enumerate(lanes)}
    bars = list(bars)
    # an unknown role is named here, not a KeyError below
    role_handles(bar.get("role", "compute") for bar in bars)
    rows = _sub_rows(bars)  # bars that overlap in one lane are stacked, so none hides another
    right = 0.0
    for bar, (row, count) in zip(bars, rows):
        height = 0.7 / count
        y = index[bar["lane"]] - 0.35 + row * height + height / 2
        width = bar["end"] - bar["start"]
        right = max(right, bar["end"])
        ax.broken_barh(
            [(bar["start"], width)],
            (y - height / 2, height),
            facecolors=bar.get("color") or ROLE[bar.get("role", "compute")],
            edgecolor="black",
            linewidth=0.6,
            hatch="//" if bar.get("hatch") else None,
            alpha=0.9,
        )
        if bar.get("label"):
            light_text = bar.get("role") in ("compute", "cpu", "exposed") and "color" not in bar
            ax.add_artist(
                _bar_label_class()(
                    bar["start"],
                    bar["end"],
                    y,
                    height,
                    tr(bar["label"]),
                    inside_color="white" if light_text else "black",
                    backdrop=(bar.get("color") or ROLE[bar.get("role", "compute")])
                    if bar.get("hatch")
                    else None,
                )
            )
    ax.set_yticks(range(len(lanes)), [tr(lane) for lane in lanes])
    ax.set_ylim(len(lanes) - 0.4, -0.6)
    ax.set_xlim(0, right * 1.04 if right else 1)
    ax.set_xlabel(tr(TIME_MS) if xlabel is None else xlabel)
    ax.grid(axis="y", visible=False)
    handles = (
        role_handles([bar.get("role", "compute") for bar in bars if "color" not in bar])
        if legend
        else []
    )
    if any(bar.get("hatch") for bar in bars):
        from matplotlib.patches import Patch

        handles.append(
            Patch(facecolor="white", edgecolor="black", hatch="//", label=tr("waited (a conflict)"))
        )
    handles += list(extra_handles)
    if handles:
        add_legend(ax, handles)
    if title:
        ax.set_title(title)


def role_handles(roles: Iterable[str]) -> list:
    """One legend patch per role in ``roles`` (each once, in ``ROLE``'s order), labelled by
    ``ROLE_LABEL``."""
    from matplotlib.patches import Patch

    used = set(roles)
    unknown = used - set(ROLE)
    if unknown:
        raise ValueError(f"unknown role(s) {sorted(unknown)}; expected some of {list(ROLE)}")
    return [
        Patch(facecolor=ROLE[role], edgecolor="black", linewidth=0.6, label=tr(ROLE_LABEL[role]))
        for role in ROLE
        if role in used
    ]


def add_legend(ax, handles: Sequence, title: str | None = None):
    """A legend to the right of ``ax``, outside the data (the constrained layout makes room for
    it)."""
    return ax.legend(
        handles=list(handles),
        title=title,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        borderaxespad=0.0,
        frameon=False,
        fontsize=8,
        title_fontsize=8,
    )


def color_legend(
    ax, colors: dict[str, str], title: str | None = None, lines: dict[str, str] | None = None
):
    """A legend right of ``ax`` saying what each colour means (``{meaning: colour}``), plus
    ``lines`` (``{meaning: colour}``) drawn as line markers. The meanings are drawn as given (a
    decision's code, or text made with ``tr``)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Patch(facecolor=color, edgecolor="black", linewidth=0.6, label=name)
        for name, color in colors.items()
    ]
    handles += [
        Line2D([], [], color=color, linewidth=2, label=name)
        for name, color in (lines or {}).items()
    ]
    return add_legend(ax, handles, title=title)


def __getattr__(name: str):
    if name == "BarLabel":  # a matplotlib Text: made when first asked for (see the module's text)
        return _bar_label_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _bar_label_class():
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox

    class BarLabel(Text):
        """A bar's label, placed when the figure is drawn (after the layout and any later axis
        limits): centred inside the bar when it fits (font shrunk to at least ``MIN_SIZE`` for thin
        bars), else in black just after the bar's end, or before its start when the axes end first.
        ``backdrop`` (a colour) draws a plain patch behind an inside label (for hatched bars). After
        a draw, ``inside_box`` is the bar's box in pixels when the label sits inside, else None."""

        PAD_PX = 3.0
        MIN_SIZE = 6.5

        def __init__(
            self,
            start: float,
            end: float,
            y: float,
            height: float,
            text: str,
            inside_color: str = "white",
            fontsize: float = 8,
            backdrop: str | None = None,
        ):
            super().__init__(
                (start + end) / 2,
                y,
                text,
                ha="center",
                va="center",
                fontsize=fontsize,
                clip_on=True,
            )
            self._bar = (start, end, y, height)
            self._inside_color, self._size, self._backdrop = inside_color, fontsize, backdrop
            self.inside_box: Bbox | None = None

        def _place(self, renderer) -> None:
            box = _bar_box_px(self)
            extent = _fit_label_on_bar(self, box, renderer)
            if extent.width + 2 * self.PAD_PX <= box.width and extent.height <= box.height + 1:
                _keep_label_inside(self, box)
            else:
                _move_label_outside(self, box, extent)

        def draw(self, renderer):
            if self.get_visible() and self.axes is not None:
                self._place(renderer)
            super().draw(renderer)

    BarLabel.__qualname__ = "BarLabel"
    return BarLabel


def _bar_box_px(label):
    """A BarLabel's bar as a box in display pixels."""
    from matplotlib.transforms import Bbox

    start, end, y, height = label._bar
    corners = label.axes.transData.transform([(start, y - height / 2), (end, y + height / 2)])
    return Bbox.from_extents(*corners.min(axis=0), *corners.max(axis=0))


def _fit_label_on_bar(label, box, renderer):
    """Centre a BarLabel on its bar in its inside colour, the font shrunk (to at least
    ``MIN_SIZE``) where the bar is thinner than the text; returns the text's extent in pixels."""
    from matplotlib.text import Text

    start, end, y, _ = label._bar
    label.set_fontsize(label._size)
    label.set_position(((start + end) / 2, y))
    label.set_horizontalalignment("center")
    label.set_color(label._inside_color)
    label.set_bbox(None)
    extent = Text.get_window_extent(label, renderer)
    if extent.height > box.height:
        label.set_fontsize(max(label.MIN_SIZE, label._size * box.height / extent.height))
        extent = Text.get_window_extent(label, renderer)
    return extent


def _keep_label_inside(label, box) -> None:
    """Leave a BarLabel inside its bar, with its backdrop if it has one."""
    # a plain patch behind the text, so a hatched bar does not cross it
    if label._backdrop:
        label.set_bbox(
            {
                "boxstyle": "square,pad=0.15",
                "facecolor": label._backdrop,
                "edgecolor": "none",
            }
        )
    label.inside_box = box


def _move_label_outside(label, box, extent) -> None:
    """Put a BarLabel in black just after its bar's end, or before its start when the axes end
    first."""
    ax = label.axes
    label.inside_box = None
    label.set_color("black")
    to_data = ax.transData.inverted()
    if box.x1 + label.PAD_PX + extent.width <= ax.bbox.x1:
        label.set_horizontalalignment("left")
        label.set_x(to_data.transform((box.x1 + label.PAD_PX, box.y0))[0])
    elif box.x0 - label.PAD_PX - extent.width >= ax.bbox.x0:
        label.set_horizontalalignment("right")
        label.set_x(to_data.transform((box.x0 - label.PAD_PX, box.y0))[0])


def _sub_rows(bars: Sequence[dict]) -> list[tuple[int, int]]:
    """(row, rows in lane) for each bar: greedy interval partitioning per lane."""
    placement: list[int] = []
    row_ends: dict[str, list[float]] = {}
    for bar in bars:
        ends = row_ends.setdefault(bar["lane"], [])
        for row, end in enumerate(ends):
            if end <= bar["start"] + 1e-12:
                ends[row] = bar["end"]
                break
        else:
            ends.append(bar["end"])
            row = len(ends) - 1
        placement.append(row)
    return [(row, len(row_ends[bar["lane"]])) for bar, row in zip(bars, placement)]


def draw_transfer_timeline(
    ax,
    start_ms: float,
    end_ms: float,
    cover_intervals: Sequence[Sequence[float]],
    hidden_ms: float,
    exposed_ms: float,
    title: str = "",
    segments: Sequence[Sequence[float]] | None = None,
) -> None:
    """Transfer lane over the independent-work lane, hidden part green, exposed part red.

    ``segments`` draws the transfer as several pieces (one per layer) instead of one bar.
    The shading is drawn, not computed: windows are painted over each transfer bar and
    clipped to it by matplotlib. The numbers in the legend come from the caller.
    """
    from matplotlib.patches import Patch, Rectangle

    covers = [tuple(map(float, w)) for w in cover_intervals]
    lefts = [start_ms] + [a for a, _ in covers]
    rights = [end_ms] + [b for _, b in covers]
    lo, hi = min(lefts), max(rights)
    pad = 0.04 * (hi - lo or 1.0)
    for a, b in covers:
        ax.broken_barh(
            [(a, b - a)],
            (1.15, 0.6),
            facecolors=ROLE["compute"],
            edgecolor="black",
            linewidth=0.6,
            alpha=0.85,
        )
    for seg_start, seg_end in segments or [(start_ms, end_ms)]:
        frame = Rectangle(
            (seg_start, 0.15),
            seg_end - seg_start,
            0.7,
            facecolor=ROLE["exposed"],
            edgecolor="black",
            linewidth=0.8 if not segments or len(segments) < 12 else 0.2,
        )
        ax.add_patch(frame)
        for a, b in covers:
            patch = Rectangle((a, 0.15), b - a, 0.7, facecolor=ROLE["hidden"], edgecolor="none")
            ax.add_patch(patch)
            patch.set_clip_path(frame)
    ax.set_yticks([0.5, 1.45], [tr("transfer"), tr("independent\ncompute")])
    ax.set_ylim(2.0, -0.1)
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_xlabel(tr(TIME_MS))
    ax.grid(axis="y", visible=False)
    total = end_ms - start_ms
    ax.legend(
        handles=[
            Patch(facecolor=ROLE["hidden"], label=tr("hidden {ms} ms", ms=readable(hidden_ms))),
            Patch(facecolor=ROLE["exposed"], label=tr("exposed {ms} ms", ms=readable(exposed_ms))),
            Patch(facecolor=ROLE["compute"], label=tr("overlap window")),
        ],
        loc="upper left",
        ncols=3,
        frameon=False,
        bbox_to_anchor=(0.0, -0.28),
    )
    ax.set_title(title or tr("transfer {ms} ms", ms=readable(total)), loc="left")


def decision_map(
    ax,
    decide: Callable[[float, float], str],
    ready_at: Sequence[float],
    deadlines: Sequence[float],
    colors: dict[str, str],
    title: str = "",
    legend: bool = True,
) -> list[str]:
    """Colour a grid of (ready_at, deadline) by the action that ``decide`` returns. Returns the
    actions drawn (in the order of ``colors``); the legend lists those (never an action that no
    cell of the map shows) right of the axes, or is left out with ``legend=False`` (to draw one
    legend for several maps from what they return)."""
    import matplotlib.colors
    import numpy as np

    names = list(colors)
    grid = np.zeros((len(deadlines), len(ready_at)))
    for j, deadline in enumerate(deadlines):
        for i, ready in enumerate(ready_at):
            action = decide(ready, deadline)
            if action not in colors:
                raise ValueError(
                    tr(
                        "the decision at ready {ready}, deadline {deadline} is {action}; "
                        "expected one of {names}",
                        ready=ready,
                        deadline=deadline,
                        action=repr(action),
                        names=names,
                    )
                )
            grid[j, i] = names.index(action)
    cmap = matplotlib.colors.ListedColormap([colors[n] for n in names])
    ax.pcolormesh(
        ready_at, deadlines, grid, cmap=cmap, vmin=-0.5, vmax=len(names) - 0.5, shading="nearest"
    )
    ax.set_xlabel(tr("state ready at (ms)"))
    ax.set_ylabel(tr("decode deadline (ms)"))
    ax.grid(False)
    drawn = [name for i, name in enumerate(names) if (grid == i).any()]
    if legend:
        color_legend(ax, {name: colors[name] for name in drawn}, title=tr("action"))
    if title:
        ax.set_title(title)
    return drawn


def new_figure(rows: int = 1, cols: int = 1, height: float | None = None, **kwargs):
    """``plt.subplots`` with the course's width and a constrained layout (no text falls off the
    figure)."""
    import matplotlib.pyplot as plt

    apply_style()
    size = (FIGSIZE[0], height or FIGSIZE[1] * rows)
    made = plt.subplots(rows, cols, figsize=size, layout="constrained", **kwargs)
    _one_draw_per_inline_figure()
    return made


def _one_draw_per_inline_figure() -> None:
    """Under Jupyter's inline backend, stop pyplot redrawing each new figure after every cell.

    pyplot's post-cell hook (connected when pyplot picks its backend) draws every figure it
    manages; the inline backend's own hook then draws the figure again, twice, to lay it out and
    render the PNG the notebook shows, and closes it. The first draw lands on a canvas nobody sees
    and costs a third of a figure cell's time. Other backends (``%matplotlib widget``, a GUI) keep
    the hook: there it is what redraws a figure. Choosing a backend again connects it again.
    """
    import matplotlib
    import matplotlib.pyplot as plt

    if "inline" in str(matplotlib.get_backend(auto_select=False)).lower():
        plt.uninstall_repl_displayhook()
