"""Which layout a source is in, decided for the whole source from the names at its top, never switched by
one learner's file.

Each top-level entry is told by its own name only, the part that the LMS or nbgrader wrote: a Canvas file,
a Moodle participant's folder or file, an exchange submission folder (``<student>+<assignment>+<time>``).
What is inside a student's folder never decides, except for one shape that is all nbgrader's: every folder
of the source holding ``<assignment>/`` (``submitted/`` as ``nbgrader collect`` writes it). A layout needs a
strict majority of the named entries; the others are then read under it and named as problems. A source
whose names split with no majority stops with a message naming them and ``--layout``.

Also here: the rules each LMS's own importer reads its names by (Canvas's user and attachment ids, Moodle's
participant id, the exchange's folder names), used by the readers (``readers.py``).
"""

from __future__ import annotations

import re
from collections import Counter

from ..course import UnusableInput
from .source import shown

LAYOUTS = ("folders", "exchange", "canvas", "moodle", "pattern")
COURSE_FOLDERS = ("submitted", "inbound")  # a course folder (collect's submitted/) or an exchange course folder (inbound/)

# Canvas (lib/content_zipper.rb): [sortable name, "LATE" when late, user id].join("_"), then "_<attachment
# id>_<file name>". The name is lower-cased and keeps only word characters (Canvas takes "_<digits>_" out
# of it first, but punctuation removed afterwards can leave "_1001" or "_1001_7" at its end), so the name
# alone cannot tell which digits are the user id: readers.canvas_files reads every split the name allows and
# keeps the one the rest of the download agrees with. Ids are printed integers (no leading zero). With
# anonymous grading the name is left out and the id is "anon_<anonymous id>". Older Canvas wrote "late".
CANVAS_ID = re.compile(r"0|[1-9]\d{0,19}")
CANVAS_NAME = re.compile(r"\w*")
CANVAS_ANON = re.compile(r"(?P<late>(?i:late)_)?(?P<user>anon_[A-Za-z0-9]+)_(?P<attachment>0|[1-9]\d{0,19})_(?P<file>.+)")
CANVAS_TEXT = re.compile(r"(?:\w*_)?(?:(?i:late)_)?(?P<user>0|[1-9]\d{0,19}|anon_[A-Za-z0-9]+)_(?:text|link)\.html")
# Moodle (mod/assign/classes/downloader.php): clean_filename(full name with "_" made " ", "_", participant
# id), then "_assignsubmission_file" and "/" and the file's path (a "_" before the "/" up to Moodle 4.0),
# or, with "download submissions in folders" off, "_" and the file name. The name holds no "_", so the
# id is the second "_" field, as Moodle's own feedback importer reads it.
MOODLE_FOLDER = re.compile(r"(?P<name>[^_]*)_(?P<user>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?")
MOODLE_FLAT = re.compile(r"(?P<name>[^_]*)_(?P<user>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<file>.+)")


def inbound_name(assignment: str) -> re.Pattern:
    """An exchange inbound folder's name: ``<student>+<assignment>+<timestamp>[+<random>]``."""
    return re.compile(rf"(?P<user>.+)\+{re.escape(assignment)}\+(?P<stamp>[^+]+)(?:\+[^+]*)?")


def canvas_splits(name: str) -> list[dict]:
    """Every way a flat file's name can be read as Canvas writes it: ``<name>_[LATE_]<user>_<attachment>_<file>``."""
    fields = name.split("_")
    found = []
    for at in range(len(fields) - 2):
        user, attachment, file = fields[at], fields[at + 1], "_".join(fields[at + 2 :])
        if not (CANVAS_ID.fullmatch(user) and CANVAS_ID.fullmatch(attachment) and file):
            continue
        head = fields[:at]
        late = bool(head) and head[-1].lower() == "late"
        slug = "_".join(head[:-1] if late else head)
        if CANVAS_NAME.fullmatch(slug):
            found.append({"name": slug, "late": late, "user": user, "attachment": attachment, "file": file})
    return found


def shapes(name: str, folder: bool, assignment: str) -> set[str]:
    """The layouts a top-level entry can belong to, by its own name."""
    found = set()
    if folder:
        if inbound_name(assignment).fullmatch(name):
            found.add("exchange")
        if MOODLE_FOLDER.fullmatch(name):
            found.add("moodle")
    else:
        if MOODLE_FLAT.fullmatch(name):
            found.add("moodle")
        if CANVAS_ANON.fullmatch(name) or canvas_splits(name) or CANVAS_TEXT.fullmatch(name):
            found.add("canvas")
    return found


def _tops(paths: list[tuple[str, ...]]) -> dict[str, set[str]]:
    """{top-level name: the names inside it (empty for a file)}; a folder's set holds "/" as a mark."""
    tops: dict[str, set[str]] = {}
    for p in paths:
        inside = tops.setdefault(p[0], set())
        if len(p) > 1:
            inside.update(("/", p[1]))
    return tops


def look(paths: list[tuple[str, ...]], assignment: str) -> tuple[str | None, tuple[str, ...], list[str]]:
    """(layout, the folder it starts in, entries named like another layout) that ``paths`` look like; None
    when the top holds no name of any layout. UnusableInput when their names split with no majority."""
    tops = _tops(paths)
    told = {name: shapes(name, "/" in inside, assignment) for name, inside in tops.items()}
    named = {name: kinds for name, kinds in told.items() if kinds}
    folders = [name for name, inside in tops.items() if "/" in inside]
    if not named:
        for course_folder in COURSE_FOLDERS:  # a course folder: its top is the instructor's, not a learner's
            if course_folder in folders:
                return "exchange", (course_folder,), []
        if folders and all(assignment in tops[name] for name in folders):
            return "exchange", (), []  # submitted/ itself: <student>/<assignment>/ in every folder
        return ("folders" if folders else None), (), []
    votes = Counter(kind for kinds in named.values() for kind in kinds)
    (best, count), *rest = votes.most_common() + [(None, 0)]
    if count * 2 <= len(named) or rest[0][1] == count:
        split = ", ".join(f"{kind} {n}" for kind, n in votes.most_common())
        odd = sorted(name for name, kinds in named.items() if best not in kinds or rest[0][0] in kinds)[:10]
        raise UnusableInput(
            f"the names at the top of the submissions split between layouts ({split} of {len(named)} named entries), "
            f"e.g. {', '.join(shown(n, 80) for n in odd)}: give --layout (folders, exchange, canvas, moodle or pattern)"
        )
    return best, (), sorted(name for name, kinds in named.items() if best not in kinds)


def root_for(layout: str, paths: list[tuple[str, ...]], assignment: str) -> tuple[str, ...]:
    """Where ``layout``, given by the instructor, starts: a course or exchange folder is read from its
    submitted/ or inbound/, unless submission folders of the exchange lie at the top itself."""
    if layout != "exchange":
        return ()
    tops = _tops(paths)
    if any("exchange" in shapes(name, "/" in inside, assignment) for name, inside in tops.items()):
        return ()
    return next(((name,) for name in COURSE_FOLDERS if "/" in tops.get(name, ())), ())


def choose_layout(paths: list[tuple[str, ...]], assignment: str, layout: str | None = None) -> tuple[str, tuple[str, ...], list[str]]:
    """(layout, the folder it starts in, entries named like another layout): ``layout`` when given, else
    the one the names at the top say. A download re-zipped inside one folder (a single folder holding
    named entries, or folders, and no file of its own) is looked into."""
    if layout == "pattern":
        return "pattern", (), []
    tops = {p[0] for p in paths}
    wrapped = len(tops) == 1 and all(len(p) > 1 for p in paths)
    if layout is not None:
        if wrapped and not root_for(layout, paths, assignment) and not shapes(next(iter(tops)), True, assignment):
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
            "the layout of the submissions could not be told from their names: give it (folders, exchange, canvas, moodle, "
            "or pattern with a regular expression)"
        )
    return found, root, odd
