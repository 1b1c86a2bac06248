"""What the runtime does differently while nbgrader runs a notebook (``NBGRADER_EXECUTION``):
no runtime report and no figure style, a figure shown as its title, nothing to check before
submitting. The learner's helpers (``notebook_runtime``) branch here; the notebooks ask
:func:`grading_mode` themselves to skip a long measurement."""

from __future__ import annotations

from typing import Any

from . import settings
from .i18n import install, tr


def grading_mode() -> str | None:
    """'autograde' or 'validate' while nbgrader runs the notebook, else None."""
    return settings.grading()


def setup_for_grading(summary: dict[str, Any]) -> dict[str, Any]:
    """The set-up cell under the grader: figures as their titles, no runtime report and no figure
    style."""
    install()
    summary["grading"] = grading_mode()
    show_figures_as_text()
    return summary


def figure_placeholder(fig) -> str:
    """What a figure shows where it is not drawn (at grading): its title, never a Python repr."""
    title = fig.get_suptitle()
    title = title or next((ax.get_title() for ax in fig.axes if ax.get_title()), "")
    # made in the learner's language (tr) where the figure was
    title = title.splitlines()[0] if title else ""
    return (
        tr("[figure: {title} (drawn in your notebook, not while grading)]", title=title)
        if title
        else tr("[figure (drawn in your notebook, not while grading)]")
    )


def show_figures_as_text() -> None:
    """At grading the kernel draws no figures (a non-interactive backend): a figure that a cell
    displays would show as ``<Figure size 900x280 with 1 Axes>`` in formgrader and on the feedback
    page. Show its title instead."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    # the judge's runner: nothing is displayed
    if shell is None or not hasattr(shell, "display_formatter"):
        return
    from matplotlib.figure import Figure

    shell.display_formatter.formatters["text/plain"].for_type(
        Figure, lambda fig, printer, cycle: printer.text(figure_placeholder(fig))
    )
