"""The feedback page handed back to a learner: nbgrader's page with any line of a hidden test or a
reference answer removed, links of unsafe schemes pointed at ``#``, a size cap, the answers that wait for
a person shown as pending, its headings in the submission's language, and the late line."""

from __future__ import annotations

import functools
import html
import os
import re
from pathlib import Path

from ..course import Course
from ..matching import read_graded
from ..model import Record
from ..publish.editions import feedback_translations
from .exporters import add_csp, add_wrapping, localize_labels
from .late import LateSpec, late_text


@functools.lru_cache(maxsize=4)
def page_words(course: Course) -> dict[str, dict[str, str]]:
    """{language: feedback translations} (read once per batch: every page of an edition uses them)."""
    return feedback_translations(course)


_LINK = re.compile(r"(?<![\w.-])(href|src|action|formaction|poster|background)(\s*=\s*)(\"[^\"]*\"|'[^']*'|[^\s>\"']+)", re.IGNORECASE)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
SAFE_SCHEMES = {"http", "https", "mailto"}


_IMAGE_DATA = re.compile(r"^data:image/(png|jpeg|gif);base64,", re.IGNORECASE)


def _safe_url(value: str, image: bool = False) -> bool:
    """True for a relative path, a ``#`` fragment, or an http/https/mailto URL (and, for an
    image source, a base64 PNG/JPEG/GIF). Browsers decode entities and ignore whitespace and
    control characters in a scheme, so this does too."""
    plain = "".join(ch for ch in html.unescape(value) if ch > " " and ch != "\x7f" and not ch.isspace() and ch.isprintable())
    scheme = _SCHEME.match(plain)
    return scheme is None or scheme.group(1).lower() in SAFE_SCHEMES or (image and bool(_IMAGE_DATA.match(plain)))


def _safe_links(text: str) -> str:
    """Point every link or source whose scheme is not allowed (``javascript:``, ``data:``,
    ``vbscript:`` ...) at ``#``."""

    def fix(match: re.Match) -> str:
        value = match.group(3)
        inner = value[1:-1] if value[:1] in "\"'" else value
        return match.group(0) if _safe_url(inner, image=match.group(1).lower() == "src") else f'{match.group(1)}{match.group(2)}"#"'

    return _LINK.sub(fix, text)


MAX_PAGE = 1_000_000  # characters in one feedback page
_TAG = re.compile(r"<[^<>]*>")  # linear: a run of '<' without '>' cannot make it backtrack


_ID = r"[A-Za-z0-9_-]+"
_NUM = r"[0-9]+(?:\.[0-9]+)?"


def mark_pending(text: str, pending: set[str]) -> str:
    """Show answers that wait for a person as pending, not as "Score: 0.0 / 1.0".

    nbgrader's feedback gives an ungraded written answer a score of 0; the page then reads as if
    the learner had lost those points. Each pending answer's score becomes "pending", and the
    notebook's heading says how many points still wait for a person."""
    waiting = 0.0

    def in_list(m: re.Match) -> str:
        nonlocal waiting
        if m.group(1) not in pending:
            return m.group(0)
        waiting += float(m.group(2))
        return f'<li><a href="#{m.group(1)}">Written response</a> (pending: a person grades it, {m.group(2)} point(s))</li>'

    text = re.sub(rf'<li><a href="#({_ID})">Written response</a> \(Score: {_NUM} / ({_NUM})\)</li>', in_list, text)
    for gid in pending:
        text = re.sub(
            rf'(<a name="{re.escape(gid)}"></a><div class="panel-heading">.{{0,400}}?)Score: {_NUM} / ({_NUM}) ',
            r"\1Pending: a person grades it (\2 point(s)) ",
            text,
            count=1,
            flags=re.S,
        )
    if waiting:
        text = re.sub(
            rf"(<h4>[^<]{{1,200}} \(Score: {_NUM} / {_NUM})\)</h4>", rf"\1; {waiting:g} point(s) wait for a person's grading)</h4>", text, count=1
        )
    return text


_PAGE_HEADINGS = (  # (pattern in nbgrader's feedback template, English): only the template's own text is touched
    (r'(<a href="#{id}">){text}(</a>)', ("Test cell", "Coding free-response", "Written response", "Task")),
    (r'(<a href="#comment-{id}">){text}(</a>)', ("Comment",)),
    (r'(<span class="nbgrader-label">){text}(</span>)', ("Student's answer",)),
    (r"(<b>){text}(:</b>)", ("Comments",)),
    (r'(<a href="#top">\(){text}(\)</a>)', ("Top",)),
)


def localize_page(text: str, words: dict[str, str]) -> str:
    """A feedback page's own headings in the submission's language (``words``: its edition's
    feedback translations; empty for English, which leaves the page as it is)."""
    if not words:
        return text
    text = localize_labels(text, words)  # its score lines, grade-cell labels and hidden-tests note
    for pattern, english in _PAGE_HEADINGS:
        for item in english:
            if item in words:
                regex = pattern.format(id=_ID, text=re.escape(item))
                text = re.sub(regex, lambda m, w=words[item]: m.group(1) + html.escape(w) + m.group(2), text)
    score = html.escape(words.get("Score", "Score"))
    text = re.sub(rf"(\(|<h4>[^<]{{1,200}} \(|</div>\s*|\n\s*)Score: ({_NUM} / {_NUM})", rf"\1{score}: \2", text)
    for template in (
        "pending: a person grades it, {points} point(s)",
        "Pending: a person grades it ({points} point(s))",
        "{points} point(s) wait for a person's grading",
    ):
        if template in words:
            regex = re.escape(template).replace(re.escape("{points}"), f"({_NUM})")
            text = re.sub(regex, lambda m, t=words[template]: html.escape(t.format(points=m.group(1))), text)
    return text


def write_feedback(
    page: Path, target: Path, secrets: dict[str, str], graded: Path, pending: set[str] = frozenset(), words: dict[str, str] | None = None
) -> int:
    """Copy a feedback page, first removing any line of a hidden test or of a reference answer
    that the learner's own notebook does not hold, and marking answers that wait for a person
    as pending. Returns how many lines were removed."""
    with open(page, "rb") as handle:  # cut first: the scan below must stay cheap whatever the page holds
        raw = handle.read(4 * MAX_PAGE + 4).decode("utf-8", "replace")
    if len(raw) > MAX_PAGE:
        raw = raw[:MAX_PAGE] + "\n<p>[the page was cut at 1 MB]</p></body></html>\n"
    nb = read_graded(graded)
    own = {
        line.strip() for cell in (nb.cells if nb else []) if cell.metadata.get("nbgrader", {}).get("solution") for line in cell.source.splitlines()
    }
    lines, removed = raw.split("\n"), 0
    for i, line in enumerate(lines):
        plain = html.unescape(_TAG.sub("", line)).strip()
        if plain and plain in secrets and plain not in own:
            lines[i] = "<span>[line removed from this page: it quoted the grader's tests or answers]</span>"
            removed += 1
    text = add_csp(add_wrapping(_safe_links(localize_page(mark_pending("\n".join(lines), set(pending)), words or {}))))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return removed


_LATE_NOTE = re.compile(r'\n?<p class="late-note">[^<]*</p>')


def note_late(out: Path, record: Record, spec: LateSpec, words: dict[str, str]) -> None:
    """Put the late line under the feedback page's heading (or take an old one away: a page kept
    from an earlier run may carry another deadline's)."""
    page = out / "feedback" / record.student_id / f"{record.notebook}.html"
    if not page.is_file():
        return
    text = page.read_text(encoding="utf-8")
    updated = _LATE_NOTE.sub("", text)
    line = late_text(record.late or {}, spec.policy, words)
    if line:
        updated = updated.replace("</h4>", f'</h4>\n<p class="late-note">{html.escape(line)}</p>', 1)
    if updated != text:
        tmp = page.with_suffix(".tmp")
        tmp.write_text(updated, encoding="utf-8")
        os.replace(tmp, page)
