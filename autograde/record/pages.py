"""The feedback page handed back to a learner, rendered once from its template.

The worker's feedback step writes a notebook's page data (``exporters.PageDataExporter``: the
notebook as nbgrader's feedback preprocessors leave it, and its scores); the grader keeps it in OUT
(``Out.page_data``) and renders the page after the batch, when everything the page says is known:
the answers that wait for a person, a person's scores from the gradebook, the submission's language
and the late line (the penalty ``late.settle`` took on the score the table counts). They come in as
data (:class:`PageView`) to the template's blocks (``feedback.html.j2``); nothing is patched into
the page afterwards. A page is drafted as soon as its notebook is settled (:class:`Drafts`), and the
draft is what is written only when the page, rendered after the batch, would be the same: rendered
from the same data, language, person's values and late line. Two checks read the rendered page
before it is written, as a last line of defence whatever the template or a learner's output held:
any line of a hidden test or reference answer that the learner's own notebook does not hold is
removed, and links of unsafe schemes point at ``#`` (attributes read by Python's HTML parser). A
page is cut at 1 MB."""

from __future__ import annotations

import functools
import html
import json
import os
import re
import threading
import zlib
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from ..course import Course, Exercise
from ..ledger.gradebook import Book, Grade
from ..ledger.late import Policy, late_text
from ..ledger.layout import Out
from ..ledger.tables import cell_value
from ..matching import read_graded
from ..model import HIDDEN_NOTE, HIDDEN_NOTE_TEXT, Record
from ..publish.editions import FeedbackWords, feedback_translations
from .exporters import PageView, feedback_exporter, html_lang, number_shown, page_css

MAX_PAGE = 1_000_000  # characters in one feedback page
CUT_NOTE = "\n<p>[the page was cut at 1 MB]</p></body></html>\n"
REMOVED_LINE = "<span>[line removed from this page: it quoted the grader's tests or answers]</span>"


@functools.lru_cache(maxsize=4)
def page_words(course: Course) -> FeedbackWords:
    """The feedback translations (read once per batch: every page of an edition uses them)."""
    return feedback_translations(course)


# -------------------------------------------------------------- the page data


def keep_page_data(
    source: Path, out: Out, student: str, notebook: str, graded: Path, secrets: dict[str, str]
) -> bool:
    """Keep the page data a worker wrote (``source``) in OUT, with the lines of the grader's secrets
    that the learner's own answers hold (``graded``: the graded notebook; those lines stay on the
    page). False when there is none, or it cannot be read."""
    try:
        with open(source, "rb") as handle:
            data = json.loads(handle.read(8 * MAX_PAGE + 1).decode("utf-8"))
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("notebook"), dict)
            or not isinstance(data.get("nbgrader"), dict)
        ):
            return False
    except (OSError, ValueError):
        return False
    nb = read_graded(graded)
    own = {
        line.strip()
        for cell in (nb.cells if nb else [])
        if cell.metadata.get("nbgrader", {}).get("solution")
        for line in cell.source.splitlines()
    }
    data["own_secret_lines"] = sorted(line for line in own if line in secrets)
    target = out.page_data(student, notebook)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, target)
    return True


@dataclass(frozen=True)
class PageData:
    """A feedback page's data as kept in OUT (``keep_page_data``): the graded notebook (its JSON, as
    the worker's page-data exporter wrote it), nbgrader's numbers for the page (notebook, score,
    max_score, late_penalty) and the lines of the grader's secrets that the learner's own answers
    hold."""

    notebook: dict
    nbgrader: dict
    own_secret_lines: frozenset[str] = frozenset()

    @classmethod
    def from_json(cls, data) -> PageData | None:
        """The data as any version kept it (None when it is not page data)."""
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("notebook"), dict)
            or not isinstance(data.get("nbgrader"), dict)
        ):
            return None
        own = data.get("own_secret_lines")
        return cls(
            data["notebook"],
            data["nbgrader"],
            frozenset(str(line) for line in own) if isinstance(own, list) else frozenset(),
        )


def read_page_data(out: Out, student: str, notebook: str) -> PageData | None:
    try:
        data = json.loads(out.page_data(student, notebook).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return PageData.from_json(data)


# -------------------------------------------------------------- rendering


def render_page(
    data: PageData,
    words: dict[str, str],
    language: str,
    person: dict[str, object] | None = None,
    late_line: str = "",
) -> str:
    """A feedback page from its data (``keep_page_data``), rendered once. ``person``: the value of
    each answer a person grades as the score table counts it (``tables.cell_value``: a person's
    score; ``pending`` while it waits, or ``review`` when the answer changed since it was scored:
    both shown as waiting; the worker's 0 for an answer left as released). ``words``: the
    edition's feedback translations (empty for English)."""
    import nbformat

    nb = nbformat.from_dict(data.notebook)
    info = {
        key: data.nbgrader.get(key, 0) for key in ("notebook", "score", "max_score", "late_penalty")
    }
    pending, waiting, score = set(), 0.0, float(info["score"] or 0)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        given = (person or {}).get(meta.get("grade_id")) if meta.get("grade") else None
        if isinstance(given, str):
            pending.add(meta["grade_id"])
            waiting += float(number_shown(meta.get("points")))
        elif given is not None:
            score += float(given) - float(meta.get("score") or 0)
            meta["score"] = float(given)
        if HIDDEN_NOTE_TEXT in words and cell.cell_type == "code" and HIDDEN_NOTE in cell.source:
            cell.source = cell.source.replace(HIDDEN_NOTE, "# " + words[HIDDEN_NOTE_TEXT])
    info["score"] = round(score, 6)
    view = PageView(
        lang=html_lang(language),
        words=words,
        pending=frozenset(pending),
        waiting=waiting,
        late_line=late_line,
    )
    page, _ = feedback_exporter().from_notebook_node(
        nb, {"nbgrader": info, "page": view, "inlining": {"css": page_css()}}
    )
    return page


def finish_page(
    text: str, secrets: dict[str, str], own: set[str] | frozenset[str] = frozenset()
) -> tuple[str, int]:
    """The last checks of a rendered page: cut at ``MAX_PAGE``, every line that quotes a secret (a
    line of a hidden test or a reference answer) that is not one of the learner's own (``own``)
    replaced, links of unsafe schemes pointed at ``#``. Returns the page and how many lines were
    removed."""
    if len(text) > MAX_PAGE:
        text = text[:MAX_PAGE] + CUT_NOTE
    lines, removed = text.split("\n"), 0
    for i, line in enumerate(lines):
        plain = html.unescape(_text_of(line)).strip()
        if plain and plain in secrets and plain not in own:
            lines[i] = REMOVED_LINE
            removed += 1
    return safe_links("\n".join(lines)), removed


def write_feedback(
    out: Out,
    record: Record,
    secrets: dict[str, str],
    words: dict[str, str],
    person=None,
    late_line: str = "",
    drafts: Drafts | None = None,
) -> int | None:
    """Render a notebook's page from its kept data into its place in OUT (``Out.page``), or take the
    page ``drafts`` rendered from the same data and values. Returns how many lines were removed, or
    None when the notebook has no page data."""
    drafted = drafts.take(record, person or {}, late_line) if drafts else None
    if drafted is not None:
        text, removed = drafted
    else:
        data = read_page_data(out, record.student_id, record.notebook)
        if data is None:
            return None
        page = render_page(data, words, record.edition or "en", person, late_line)
        text, removed = finish_page(page, secrets, data.own_secret_lines)
    target = out.page(record.student_id, record.notebook)
    try:
        if target.read_text(encoding="utf-8") == text:
            # the same page: left as it was (a rerun that changes nothing writes nothing)
            return removed
    except (OSError, ValueError):
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return removed


class Drafts:
    """Pages rendered while the batch runs, each as its notebook is settled, so that the pages are
    not all rendered one after another once the batch is done. A draft is rendered with the values
    known then: a person's scores as an empty gradebook gives them, the late line of the record as
    saved (no penalty settled yet). After the batch, a page whose data file, language, person's
    values and late line are still those of its draft takes the draft (:func:`write_feedback`); any
    other is rendered again. The drafts are kept compressed, in memory only."""

    def __init__(
        self,
        out: Out,
        course: Course,
        cells: list[Exercise],
        secrets: dict[str, str],
        policy: Policy,
    ):
        self.out, self.words, self.cells, self.secrets, self.policy = (
            out,
            page_words(course),
            cells,
            secrets,
            policy,
        )
        self._pages: dict[tuple[str, str], tuple[tuple, bytes, int]] = {}
        self._rendering = threading.Lock()  # one page at a time: the exporter is shared

    def _stamp(self, record: Record) -> tuple | None:
        try:
            stat = self.out.page_data(record.student_id, record.notebook).stat()
        except OSError:
            return None
        return (stat.st_mtime_ns, stat.st_size, stat.st_ino)

    def draft(self, record: Record) -> None:
        """Render a settled notebook's page (nothing for one not graded, or without page data)."""
        if not record.graded:
            return
        stamp = self._stamp(record)
        data = read_page_data(self.out, record.student_id, record.notebook)
        if data is None or stamp is None:
            return
        said = self.words.of(record.edition or "en")
        person = person_values(self.cells, {}, record)
        late_line = late_text(record.late, self.policy, said)
        try:
            with self._rendering:
                page = render_page(data, said, record.edition or "en", person, late_line)
            text, removed = finish_page(page, self.secrets, data.own_secret_lines)
        # no draft: the page is rendered after the batch, where what fails says so
        except Exception:
            return
        key = (stamp, record.edition, json.dumps(person, sort_keys=True), late_line)
        self._pages[(record.student_id, record.notebook)] = (
            key,
            zlib.compress(text.encode("utf-8"), 1),
            removed,
        )

    def take(self, record: Record, person: dict, late_line: str) -> tuple[str, int] | None:
        """The draft of ``record``'s page when it was rendered from what the page is rendered from
        now."""
        kept = self._pages.pop((record.student_id, record.notebook), None)
        if kept is None:
            return None
        key, packed, removed = kept
        if key != (
            self._stamp(record),
            record.edition,
            json.dumps(person, sort_keys=True),
            late_line,
        ):
            return None
        return zlib.decompress(packed).decode("utf-8"), removed


def person_values(
    cells: list[Exercise], stored: dict[str, Grade], record: Record
) -> dict[str, object]:
    """{grade id: its value as the score table counts it} of a notebook's answers that a person
    grades (``stored``: the student's grades in the gradebook, ``gradebook.Book.of``)."""
    return {
        e.grade_id: cell_value(e, stored.get(e.grade_id), record)
        for e in cells
        if e.manual and e.notebook == record.notebook
    }


def write_pages(
    out: Out,
    course: Course,
    cells: list[Exercise],
    records: list[Record],
    secrets: dict[str, str],
    policy: Policy,
    book: Book,
    drafts=None,
):
    """Every graded notebook's page, rendered once after the batch: with a person's scores from the
    gradebook (``book``, as the batch read it; empty when it could not be: a page then shows the
    record's own values), and the late line of the penalty the table settled (each record's
    ``late``); a page ``drafts`` rendered from the same is taken as it is. Returns {(student,
    notebook): lines removed} for the pages that removed any."""
    words = page_words(course)
    removed = {}
    for record in records:
        if not record.graded:
            continue
        said = words.of(record.edition or "en")
        person = person_values(cells, book.of(record.student_id), record)
        lines = write_feedback(
            out, record, secrets, said, person, late_text(record.late, policy, said), drafts
        )
        if lines:
            removed[(record.student_id, record.notebook)] = lines
    return removed


def page_kept(out: Out, record: Record) -> bool:
    """Whether a saved record's page can be rendered: it was not graded, or its page data is kept
    (a record from before pages were rendered from their data has its page only)."""
    if not record.graded or out.page_data(record.student_id, record.notebook).is_file():
        return True
    return not out.page(record.student_id, record.notebook).is_file()


def note_redactions(records: list[Record], removed: dict[tuple[str, str], int]) -> list[Record]:
    """The records with each one's count of lines its page removed (None when it removed none)."""
    return [
        record.but(redacted_lines=removed.get((record.student_id, record.notebook)) or None)
        for record in records
    ]


# -------------------------------------------------------------- the last checks


def _text_of(line: str) -> str:
    """A line's text without its tags (what ``<...>`` holds, ``<`` and ``>`` excluded inside), in
    one pass."""
    first, *rest = line.split("<")
    kept = [first]
    for part in rest:
        end = part.find(">")
        kept.append(part[end + 1 :] if end >= 0 else "<" + part)
    return "".join(kept)


SAFE_SCHEMES = {"http", "https", "mailto"}
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "poster", "background"}
_IMAGE_DATA = ("data:image/png;base64,", "data:image/jpeg;base64,", "data:image/gif;base64,")


def _safe_url(value: str, image: bool = False) -> bool:
    """True for a relative path, a ``#`` fragment, or an http/https/mailto URL (and, for an image
    source, a base64 PNG/JPEG/GIF). Browsers ignore whitespace and control characters in a scheme,
    so this does too (``value``: the attribute as the browser reads it, entities decoded)."""
    plain = "".join(
        ch for ch in value if ch > " " and ch != "\x7f" and not ch.isspace() and ch.isprintable()
    )
    head, colon, _ = plain.partition(":")
    if not colon or not head or not head[0].isascii() or not head[0].isalpha():
        return True  # no scheme: a path or a fragment
    if not all(ch.isascii() and (ch.isalnum() or ch in "+.-") for ch in head):
        return True  # not a scheme (a ':' later in a path)
    return head.lower() in SAFE_SCHEMES or (image and plain.lower().startswith(_IMAGE_DATA))


class _UnsafeLinks(HTMLParser):
    """The start tags of a page that carry a link or source of a scheme not allowed: (offset,
    length, the tag written again with those pointed at ``#``)."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[int, int, str]] = []
        self._starts = [0]
        for line in text.split("\n")[:-1]:
            self._starts.append(self._starts[-1] + len(line) + 1)
        self.feed(text)
        self.close()

    def _check(self, tag: str, attrs, closed: bool) -> None:
        bad = [
            name  # an attribute of a namespace too (SVG's xlink:href)
            for name, value in attrs
            if name.rpartition(":")[2] in URL_ATTRIBUTES
            and value is not None
            and not _safe_url(value, image=name == "src")
        ]
        if not bad:
            return
        raw = self.get_starttag_text() or ""
        line, column = self.getpos()
        parts = [tag] + [
            name if value is None else f'{name}="{"#" if name in bad else html.escape(value)}"'
            for name, value in attrs
        ]
        self.found.append(
            (
                self._starts[line - 1] + column,
                len(raw),
                "<" + " ".join(parts) + (" />" if closed else ">"),
            )
        )

    def handle_starttag(self, tag, attrs):
        self._check(tag, attrs, False)

    def handle_startendtag(self, tag, attrs):
        self._check(tag, attrs, True)


# where an attribute named as a URL attribute may start (on the page lowered), and its value as
# Python's HTML parser reads it (its own pattern for what follows an attribute's name)
# no name starts as another does
_URL_NAME = re.compile(r"(?=(" + "|".join(sorted(URL_ATTRIBUTES)) + r")\s*=)")
_VALUE = re.compile(r"""\s*=+\s*('[^']*'|"[^"]*"|(?!['"])[^>\s]*)""")
_NAME_START = re.compile(r"""['"\s/]""")


def _may_hold_unsafe(text: str) -> bool:
    """False only when no tag of ``text`` can hold a link of a scheme not allowed: every place where
    an attribute named as a URL attribute could end (its name lowered as the parser lowers it, a
    namespace too), followed by a value as the parser reads it, holds a safe URL. Each attribute the
    parser checks is one of these places and its value the same, so the page then needs no parse; a
    place that is not an attribute only makes this say True, and the page is parsed."""
    low = text.lower()
    if len(low) != len(text):
        return True  # a character that lowers to more than one: offsets differ, read it all
    for found in _URL_NAME.finditer(low):
        at, name = found.start(), found.group(1)
        given = _VALUE.match(text, at + len(name))
        if given is None:
            continue  # a quote never closed: the parser reads no value there
        value = given.group(1)
        if value[:1] == "'" == value[-1:] or value[:1] == '"' == value[-1:]:
            value = value[1:-1]
        image = name == "src" and at > 0 and _NAME_START.match(text, at - 1) is not None
        if not _safe_url(html.unescape(value) if value else value, image=image):
            return True
    return False


def safe_links(text: str) -> str:
    """``text`` with every link or source whose scheme is not allowed (``javascript:``, ``data:``,
    ``vbscript:`` ...) pointed at ``#``; the rest of the page as it is. A page that cannot hold one
    (:func:`_may_hold_unsafe`) is not parsed."""
    if not _may_hold_unsafe(text):
        return text
    found = _UnsafeLinks(text).found
    for at, length, tag in reversed(found):
        text = text[:at] + tag + text[at + length :]
    return text
