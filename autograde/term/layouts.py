"""Which layout a source is in, decided for the whole source from the names at its top, never
switched by one learner's file.

Each top-level entry is told by its own name only, the part that the LMS or nbgrader wrote: a Canvas
file, a Moodle participant's folder or file, an exchange submission folder
(``<student>+<assignment>+<time>``). What is inside a student's folder never decides, except for one
shape that is all nbgrader's: every folder of the source holding ``<assignment>/`` (``submitted/``
as ``nbgrader collect`` writes it). A layout needs a strict majority of the named entries; the
others are then read under it and named as problems. A source whose names split with no majority
stops with a message naming them and ``--layout``.

The rules each system's own importer reads its names by (Canvas's user and attachment ids, Moodle's
participant id, the exchange's folder names) are its adapter's (``canvas.py``, ``moodle.py``,
``exchange.py``)."""

from __future__ import annotations

from collections import Counter

from ..course import UnusableInput
from .registry import ADAPTERS
from .source import shown


def shapes(name: str, folder: bool, assignment: str) -> set[str]:
    """The layouts a top-level entry can belong to, by its own name (each adapter's ``claims``)."""
    return {
        a.name
        for a in ADAPTERS.values()
        if a.claims is not None and a.claims(name, folder, assignment)
    }


def _tops(paths: list[tuple[str, ...]]) -> dict[str, set[str]]:
    """{top-level name: the names inside it (empty for a file)}; a folder's set holds "/" as a
    mark."""
    tops: dict[str, set[str]] = {}
    for p in paths:
        inside = tops.setdefault(p[0], set())
        if len(p) > 1:
            inside.update(("/", p[1]))
    return tops


def look(
    paths: list[tuple[str, ...]], assignment: str
) -> tuple[str | None, tuple[str, ...], list[str]]:
    """(layout, the folder it starts in, entries named like another layout) that ``paths`` look
    like; None when the top holds no name of any layout. UnusableInput when their names split with
    no majority."""
    tops = _tops(paths)
    told = {name: shapes(name, "/" in inside, assignment) for name, inside in tops.items()}
    named = {name: kinds for name, kinds in told.items() if kinds}
    folders = [name for name, inside in tops.items() if "/" in inside]
    if not named:
        # a source naming no layout can still be one system's (nbgrader's course folder)
        for one in ADAPTERS.values():
            root = one.unnamed(tops, assignment) if one.unnamed is not None else None
            if root is not None:
                return one.name, root, []
        return ("folders" if folders else None), (), []
    votes = Counter(kind for kinds in named.values() for kind in kinds)
    (best, count), *rest = votes.most_common() + [(None, 0)]
    if count * 2 <= len(named) or rest[0][1] == count:
        split = ", ".join(f"{kind} {n}" for kind, n in votes.most_common())
        odd = sorted(
            name for name, kinds in named.items() if best not in kinds or rest[0][0] in kinds
        )[:10]
        raise UnusableInput(
            f"the names at the top of the submissions split between layouts ({split} of "
            f"{len(named)} named entries), "
            f"e.g. {', '.join(shown(n, 80) for n in odd)}: give --layout "
            f"({', '.join([*ADAPTERS][:-1])} or {[*ADAPTERS][-1]})"
        )
    return best, (), sorted(name for name, kinds in named.items() if best not in kinds)


def root_for(layout: str, paths: list[tuple[str, ...]], assignment: str) -> tuple[str, ...]:
    """Where ``layout``, given by the instructor, starts (its adapter's ``start``: the exchange's
    course folder is read from its submitted/ or inbound/)."""
    one = ADAPTERS.get(layout)
    return one.start(_tops(paths), assignment) if one is not None and one.start is not None else ()


def choose_layout(
    paths: list[tuple[str, ...]], assignment: str, layout: str | None = None
) -> tuple[str, tuple[str, ...], list[str]]:
    """(layout, the folder it starts in, entries named like another layout): ``layout`` when given,
    else the one the names at the top say. A download re-zipped inside one folder (a single folder
    holding named entries, or folders, and no file of its own) is looked into."""
    if layout == "pattern":
        return "pattern", (), []
    tops = {p[0] for p in paths}
    wrapped = len(tops) == 1 and all(len(p) > 1 for p in paths)
    if layout is not None:
        if (
            wrapped
            and not root_for(layout, paths, assignment)
            and not shapes(next(iter(tops)), True, assignment)
        ):
            inner = [p[1:] for p in paths]
            if layout != "folders" or all(len(p) > 1 for p in inner):
                return layout, (*tops, *root_for(layout, inner, assignment)), []
        return layout, root_for(layout, paths, assignment), []
    found, root, odd = look(paths, assignment)
    if wrapped and found in (None, "folders"):
        inner, inner_root, inner_odd = look([p[1:] for p in paths], assignment)
        if inner is not None and (inner != "folders" or all(len(p) > 2 for p in paths)):
            return inner, (*tops, *inner_root), inner_odd
    if found is None:
        raise UnusableInput(
            "the layout of the submissions could not be told from their names: give it "
            "(folders, exchange, canvas, moodle, "
            "or pattern with a regular expression)"
        )
    return found, root, odd
