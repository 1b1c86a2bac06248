"""The class report's words in its language: its texts through the edition's feedback translations
(``report_words``), a problem's detail part by part, and numbers as the page and the figures show
them."""

from __future__ import annotations

from ..course import Course
from ..publish.editions import feedback_translations

# the grader's notes on a graded notebook (grading.finish_record) and the report's own details, as
# patterns: a detail is shown in the report's language part by part ("; " apart), and a part that
# is none of these (a worker's or the intake's own words) as it was written
DETAILS = (
    "part of it went over the {n} GiB memory limit and was stopped",
    "{n} cell(s) of its code failed when loaded for the judge",
    "{n} line(s) removed from the feedback page",
    "{n} score(s) to look at again",
    "{n} not found in the submission",
)


def say(words: dict[str, str], english: str, **values) -> str:
    """``english`` in the report's language (``words``: the edition's feedback translations, empty
    for English), its ``{name}`` fields filled with ``values``."""
    return words.get(english, english).format(**values)


def kind_name(words: dict[str, str], code: str) -> str:
    """A record's status or a problem's kind in the report's language: its name and code in another
    language (``缺少 notebook（missing）``), the code in English."""
    return words.get(f"report:kind:{code}", code)


def say_detail(words: dict[str, str], detail: str) -> str:
    """A problem's detail in the report's language: each "; "-separated part that is one of
    ``DETAILS`` (its value kept), the rest as written."""
    if not words:
        return detail
    parts = []
    for part in detail.split("; "):
        for english in DETAILS:
            head, tail = english.split("{n}")
            if (
                part.startswith(head)
                and part.endswith(tail)
                and len(part) > len(head) + len(tail)
                and english in words
            ):
                part = say(words, english, n=part[len(head) : len(part) - len(tail)])
                break
        parts.append(part)
    return say(words, "{first}; {second}", first="", second="").join(parts)


def report_words(course: Course, language: str) -> dict[str, str]:
    """The report's translations in ``language`` (the edition's feedback translations; none for
    English)."""
    return feedback_translations(course).of(language) if language != "en" else {}


def num(value) -> str:
    return "–" if value is None else f"{value:g}"


def mean(value) -> str:
    """A mean (or median) of scores as a person reads it: one decimal at most (13.9, not 13.917);
    report.json keeps the number to 3 decimals."""
    return "–" if value is None else f"{round(value, 1):g}"


def pct(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"
