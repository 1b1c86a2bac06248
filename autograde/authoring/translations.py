"""``python -m autograde translations``: bring the catalogs up to date with the sources (new units
added, changed ones fuzzy, gone ones obsolete) or only report on them, saying what is left to
translate; and cut the CJK font subset the runtime ships from the characters its catalog draws."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path

from ..course import Course
from ..publish import catalogs, editions, fonts

Say = Callable[[str], None]


def drawn_texts(course: Course) -> list[str]:
    """Every text of every catalog (fonts.catalog_texts): what a figure, a widget, a printed line or
    the class report's figures may show."""
    return fonts.catalog_texts(editions.course_catalogs(course))


def build_font(course: Course, source: Path | None = None, say: Say = print) -> None:
    """The shipped font subset, cut from ``source`` (default: Debian's fonts-noto-cjk)."""
    count, size = fonts.build_subset(drawn_texts(course), *([source] if source else []))
    say(
        f"wrote {fonts.FONT_FILE.relative_to(course.root)}: {count} characters, "
        f"{size / 1024:.0f} KiB"
    )


def update_or_report(
    course: Course,
    update: bool,
    only: Iterable[str] | None = None,
    show: bool = False,
    say: Say = print,
) -> int:
    """Update each catalog (or, without ``update``, count what it lacks; ``show`` names each unit),
    one line per catalog and one for the whole; returns the units left to translate or review."""
    left = 0
    for spec in editions.course_catalogs(course):
        if only and spec.path.stem not in only:
            continue
        if update:
            counts = dataclasses.asdict(catalogs.update(spec))
        else:
            todo = catalogs.problems(spec)
            counts = {"units": len(spec.units), "to do": len(todo)}
            for problem in todo if show else ():
                say(f"  {problem}")
        left += counts.get("untranslated", 0) + counts.get("fuzzy", 0) + counts.get("to do", 0)
        say(
            f"{spec.path.relative_to(course.root)}: "
            + ", ".join(f"{v} {k}" for k, v in counts.items())
        )
    say("every unit is translated" if not left else f"{left} unit(s) to translate or review")
    return left
