"""The systems the term knows, by name: each layout (``grade --layout``), hand-back format
(``feedback --format``) and export format (``export --format``) is one adapter's (``adapter.py``). A
new LMS is one new module with an ``ADAPTER`` and one line in ``ADAPTERS`` below."""

from __future__ import annotations

from ..course import UnusableInput
from . import canvas, exchange, folders, moodle
from .adapter import Adapter

ADAPTERS: dict[str, Adapter] = {
    a.name: a
    for a in (folders.FOLDERS, exchange.ADAPTER, canvas.ADAPTER, moodle.ADAPTER, folders.PATTERN)
}
PLAIN_EXPORT = "csv"  # export's own table (final_grades.csv), for no LMS


def layouts() -> tuple[str, ...]:
    return tuple(ADAPTERS)


def adapter(layout: str) -> Adapter:
    """The adapter of ``layout``; UnusableInput naming the known ones when there is none."""
    if layout not in ADAPTERS:
        raise UnusableInput(f"layout {layout!r}: use one of {', '.join(ADAPTERS)}")
    return ADAPTERS[layout]


def handback_formats() -> dict[str, Adapter]:
    return {a.handback_format: a for a in ADAPTERS.values() if a.handback is not None}


def export_formats() -> dict[str, Adapter]:
    return {a.export_format: a for a in ADAPTERS.values() if a.export is not None}
