"""The figure-text checker the figure tests and the class report's tests share: every text drawn
lies inside its figure, none is cut by the axes it is clipped to, none is drawn over another."""

from __future__ import annotations

from unittest import mock

from matplotlib.text import Text
from matplotlib.transforms import Bbox

TOLERANCE_PX = 1.0  # anti-aliasing and rounding; a clipped glyph is cut by far more


def _drawn_texts(fig) -> list[tuple[Text, object]]:
    """(text, window extent) for every non-empty text that a full draw of ``fig`` draws."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)  # a figure closed by pyplot keeps a bare canvas that draws nothing
    drawn = []
    original = Text.draw

    def spy(self, renderer):
        original(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn.append((self, self.get_window_extent(renderer)))

    with mock.patch.object(Text, "draw", spy):  # Annotation.draw calls Text.draw too
        fig.canvas.draw()  # runs the layout engine, then draws exactly what a viewer sees
    return drawn


def _overflow(inner, outer) -> dict[str, float]:
    """Pixels by which box ``inner`` extends past box ``outer``, per side (only the sides that
    do)."""
    sides = {
        "left": outer.x0 - inner.x0,
        "right": inner.x1 - outer.x1,
        "bottom": outer.y0 - inner.y0,
        "top": inner.y1 - outer.y1,
    }
    return {side: round(float(px), 1) for side, px in sides.items() if px > TOLERANCE_PX}


def _visible_part(text: Text, extent):
    """The part of ``extent`` that is drawn: inside the text's clip box when it has one (None if
    nothing)."""
    clip = text.get_clip_box() if text.get_clip_on() else None
    return extent if clip is None else Bbox.intersection(extent, clip)


def text_problems(fig) -> list[str]:
    """What is wrong with the text of ``fig``: two texts drawn over each other, and each text cut
    by the figure's edge, by the clip box it is drawn in (a bar label past its axes, say), or
    spilling out of the bar it labels (``inside_box``, set by the course's bar labels). Empty
    when all is well."""
    problems = []
    drawn = _drawn_texts(fig)
    if not drawn:
        return ["the figure drew no text at all: nothing was checked"]
    visible = [(text, _visible_part(text, extent)) for text, extent in drawn]
    visible = [(text, extent) for text, extent in visible if extent is not None]
    for i, (text, extent) in enumerate(visible):
        for other, other_extent in visible[i + 1 :]:
            width = min(extent.x1, other_extent.x1) - max(extent.x0, other_extent.x0)
            height = min(extent.y1, other_extent.y1) - max(extent.y0, other_extent.y0)
            if width > TOLERANCE_PX and height > TOLERANCE_PX:
                problems.append(
                    f"{type(text).__name__} {text.get_text()!r} and {type(other).__name__} "
                    f"{other.get_text()!r} overlap by {width:.0f} x {height:.0f} px"
                )
    for text, extent in drawn:
        label = f"{type(text).__name__} {text.get_text()!r}"
        bar = getattr(text, "inside_box", None)  # a label drawn inside its bar must fit in it
        if bar is not None and _overflow(extent, bar):
            problems.append(f"{label} spills out of its bar by {_overflow(extent, bar)} px")
            continue
        clip = text.get_clip_box() if text.get_clip_on() else None
        if clip is not None:  # drawn only inside its clip box (an axes), itself inside the figure
            cut = _overflow(extent, clip)
            if cut:
                problems.append(f"{label} is cut by its axes by {cut} px")
            continue
        past_figure = _overflow(extent, fig.bbox)
        if past_figure:
            problems.append(f"{label} extends past the figure by {past_figure} px")
    return problems
