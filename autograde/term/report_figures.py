"""The class report's figures (matplotlib, drawn apart from their encoding so that their text can be
checked), each as a data: URI of an SVG image, their text in the report's language."""

from __future__ import annotations

import base64
import io
import warnings
from typing import TYPE_CHECKING

from ..model import PENDING, REVIEW
from .report_numbers import Figures, Report
from .report_text import kind_name, mean, say

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _plain(text: str) -> str:
    """A label matplotlib draws as it is (no mathtext)."""
    return str(text).replace("$", r"\$")


def _svg(fig) -> str:
    """The figure as a data: URI of an SVG shown as an image (nothing in it can run). Its text stays
    text (``svg.fonttype`` none): the reader's browser draws every glyph with its own fonts, so a
    Chinese character the course's font subset lacks (the subset is the learner runtime's) is only
    measured less exactly by matplotlib, and its warning about that is not shown."""
    import matplotlib

    buffer = io.StringIO()
    with (
        matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "class-report"}),
        warnings.catch_warnings(),
    ):
        warnings.filterwarnings(
            "ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning
        )
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue().encode()).decode()


COLOURS = {
    "full": "#2e7d32",
    "partial": "#f9a825",
    "zero": "#c62828",
    PENDING: "#90a4ae",
    REVIEW: "#6a1b9a",
}


def figures(data: Report, words: dict[str, str] | None = None) -> Figures[str]:
    """The report's figures as data: URIs of SVG images."""
    return Figures(**{name: _svg(fig) for name, fig in draw_figures(data, words).shown()})


def draw_figures(data: Report, words: dict[str, str] | None = None) -> Figures[Figure]:
    """The report's matplotlib figures by name (drawn apart from their encoding, so that their
    text can be checked), their text in the language of ``words`` (the edition's feedback
    translations; English without); a figure with nothing to show is left out."""
    import matplotlib

    words = words or {}
    with matplotlib.rc_context():
        # Chinese text measured with the course's CJK font (its text stays text in the SVG: _svg)
        if words:
            from tools.i18n import use_course_font

            use_course_font()
        return Figures(
            totals=_totals_figure(data, words),
            exercises=_exercises_figure(data, words),
            ideas=_ideas_figure(data, words),
            problems=_problems_figure(data, words),
            slowest=_slowest_figure(data, words),
        )


def _totals_figure(data: Report, words: dict[str, str]):
    """The class's totals: a histogram, with the mean."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    if not data.students:
        return None
    scores = data.scores
    hist = scores.total.histogram
    fig = Figure(figsize=(7.5, 3.2), layout="constrained")
    ax = fig.add_subplot()
    edges = hist.edges
    ax.bar(
        edges[:-1],
        hist.counts,
        width=[b - a for a, b in zip(edges, edges[1:])],
        align="edge",
        color="#1565c0",
        edgecolor="white",
        label=say(words, "students"),
    )
    if scores.total.mean is not None:
        ax.axvline(
            scores.total.mean,
            color="black",
            linestyle="--",
            label=say(words, "mean {mean}", mean=mean(scores.total.mean)),
        )
    ax.set_xlabel(
        say(
            words,
            "total points (of {points}; answers pending a person are not in these totals)",
            points=f"{scores.max_total:g}",
        )
    )
    ax.set_ylabel(say(words, "students"))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # students come whole: no 0.5 tick
    ax.set_title(say(words, "Totals across the class"))
    ax.legend(loc="upper right")
    return fig


def _exercises_figure(data: Report, words: dict[str, str]):
    """Each exercise's scores: full, partial, zero, pending, review."""
    from matplotlib.figure import Figure

    exercises_ = data.scores.exercises
    if not exercises_:
        return None
    fig = Figure(figsize=(7.5, 0.32 * len(exercises_) + 1.6), layout="constrained")
    ax = fig.add_subplot()
    labels = [_plain(e.grade_id) for e in exercises_][::-1]
    left = [0] * len(exercises_)
    for part, label in (
        ("full", "full marks"),
        ("partial", "part of the points"),
        ("zero", "0 points"),
        (PENDING, "pending: waits for a person"),
        (REVIEW, "review: to score again"),
    ):
        widths = [getattr(e, part) for e in exercises_][::-1]
        ax.barh(labels, widths, left=left, color=COLOURS[part], label=say(words, label))
        left = [a + b for a, b in zip(left, widths)]
    ax.set_xlabel(say(words, "students"))
    ax.set_title(say(words, "Each exercise's scores"))
    fig.legend(loc="outside lower center", ncols=3, fontsize="small")
    return fig


# two lines: long idea names leave the axes narrower than this label on one line
IDEAS_AXIS = (
    "% of judged notebooks that passed the idea\n(red under 50%, amber under 80%, green from 80%)"
)


def _ideas_figure(data: Report, words: dict[str, str]):
    """Each graded idea's pass rate, most missed at the top."""
    from matplotlib.figure import Figure

    ideas = [i for i in data.ideas if i.pass_rate is not None]
    if not ideas:
        return None
    fig = Figure(figsize=(7.5, 0.24 * len(ideas) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    ax.barh(
        [_plain(f"{i.grade_id} · {i.idea}") for i in ideas][::-1],
        [100 * i.pass_rate for i in ideas][::-1],
        color=[
            "#c62828" if i.pass_rate < 0.5 else "#f9a825" if i.pass_rate < 0.8 else "#2e7d32"
            for i in ideas
        ][::-1],
    )
    ax.set_xlim(0, 100)
    ax.set_xlabel(say(words, IDEAS_AXIS))
    ax.set_title(say(words, "Graded ideas, most missed at the top"))
    ax.tick_params(axis="y", labelsize="small")
    return fig


def _problems_figure(data: Report, words: dict[str, str]):
    """Problems by kind."""
    from matplotlib.figure import Figure

    if not data.problems:
        return None
    problems = data.problems
    fig = Figure(figsize=(7.5, 0.32 * len(problems) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    ax.barh(
        [_plain(kind_name(words, p.kind)) for p in problems][::-1],
        [p.count for p in problems][::-1],
        color="#ef6c00",
    )
    ax.set_xlabel(say(words, "notebooks (or students, for notes and reviews)"))
    ax.set_title(say(words, "Problems by kind"))
    return fig


def _slowest_figure(data: Report, words: dict[str, str]):
    """The slowest notebooks, with the median of all."""
    from matplotlib.figure import Figure

    timing = data.timing
    seconds = [s.seconds for s in timing.slowest]
    if not timing.count:
        return None
    fig = Figure(figsize=(7.5, 0.3 * len(seconds) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    slow = timing.slowest
    ax.barh(
        [_plain(f"{s.student_id[:24]} · {s.notebook[:28]}") for s in slow][::-1],
        seconds[::-1],
        color=["#c62828" if s.status != "graded" else "#1565c0" for s in slow][::-1],
    )
    ax.axvline(
        timing.median,
        color="black",
        linestyle="--",
        label=say(
            words,
            "median of all {count} notebooks: {median} s",
            count=timing.count,
            median=f"{timing.median:g}",
        ),
    )
    ax.set_xlabel(say(words, "seconds to grade (red: not graded, e.g. stopped at the time limit)"))
    ax.set_title(say(words, "The slowest notebooks"))
    ax.tick_params(axis="y", labelsize="small")
    ax.legend(loc="lower right", fontsize="small")
    return fig
