"""Plain folders, and any flat naming: the layouts of no LMS.

- ``folders``: the grader's own layout, a folder per student (``<student_id>/<notebook>.ipynb``, any
  file names: matched by name, then by grade ids). A folder is used as it is; a zip of one is
  extracted. Its times come from a timestamps CSV. Handing back (``feedback --format zip``):
  ``OUT/handback/<student_id>.zip``, one per student, holding that student's pages.
- ``pattern``: any other naming, through a regular expression with the named groups ``student_id``
  (required), ``file_id`` (which notebook; the file's own name when absent) and ``timestamp``,
  matched from the start of each file's path, as nbgrader's ``FileNameCollectorPlugin`` matches it.
"""

from __future__ import annotations

import logging
import os
import re
from datetime import UTC, datetime
from pathlib import Path

from ..course import UnusableInput
from .adapter import Adapter, HandBack, HandBackJob, write_zip
from .candidates import Candidate, exchange_time, unreadable, why_not
from .source import Entry, Source, problem, shown


def read_folders(files: Source, entries: list[Entry], context: dict) -> list[Candidate]:
    found = []
    for entry in entries:
        if len(entry.parts) < 2:
            files.problems.append(
                problem(shown(entry.name), None, "a file outside any student's folder: not used")
            )
            continue
        why = why_not(entry, context["limits"])
        if why:
            files.problems.append(problem(shown(entry.name), shown(entry.parts[0]), why))
        else:
            found.append(Candidate(entry.parts[0], entry, entry.parts[-1], order=entry.date))
    return found


def hand_back(job: HandBackJob) -> HandBack:
    """One zip per student, holding that student's pages."""
    for student, files in job.pages.items():
        write_zip(job.out.student_zip(student), [(f"{student}/{p.name}", p) for p in files])
    return HandBack(job.out.handback)


# -- a pattern of the instructor's
# ---------------------------------------------------------------------------------------


class _Quiet(logging.Logger):
    """nbgrader's plugin logs a warning for each file its pattern misses: each is a problem here
    instead."""

    def __init__(self) -> None:
        super().__init__("autograde.term.pattern", logging.CRITICAL + 1)


def pattern_time(text: str) -> tuple[datetime, bool]:
    """A file name's timestamp (ISO 8601, or what nbgrader's parse_utc reads) in UTC, and whether it
    had a zone; ValueError when it is neither, or not a time UTC can hold."""
    if not text.isascii():  # datetime reads any script's digits: a time is read from 0-9 only
        raise ValueError(f"{shown(text, 60)!r} is not a time{unreadable(text)}")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return exchange_time(text), True  # nbgrader's reading; ValueError when it fails too
    try:
        return (when.astimezone(UTC), True) if when.tzinfo else (when.replace(tzinfo=UTC), False)
    except OverflowError:
        raise ValueError(f"{shown(text, 60)!r} is not a time UTC can hold") from None


def read_pattern(files: Source, entries: list[Entry], context: dict) -> list[Candidate]:
    """Files named as the pattern says, matched by nbgrader's FileNameCollectorPlugin (``re.match``
    on the file's path from the top of the source, where nbgrader gives it the absolute path)."""
    from nbgrader.plugins.zipcollect import FileNameCollectorPlugin

    pattern = context["pattern"]
    try:
        groups = re.compile(pattern).groupindex
    except re.error as exc:
        raise UnusableInput(f"the pattern is not a regular expression: {exc}") from None
    if "student_id" not in groups:
        raise UnusableInput(
            "the pattern needs a (?P<student_id>...) group (and may have file_id and timestamp)"
        )
    plugin = FileNameCollectorPlugin(named_regexp=pattern, valid_ext=[".ipynb"], log=_Quiet())
    found, naive = [], 0
    for entry in entries:
        path = entry.name[:-6] + ".ipynb" if entry.name.lower().endswith(".ipynb") else entry.name
        # the plugin skips other files unmatched: matched here only to say whose they are
        info = (
            plugin.collect(path)
            if path.endswith(".ipynb")
            else (m.groupdict() if (m := re.match(pattern, path)) else None)
        )
        student = (info or {}).get("student_id")
        why = why_not(entry, context["limits"]) or (
            "" if student else "does not match the pattern (or its student_id is empty): not used"
        )
        if why:
            files.problems.append(
                problem(shown(entry.name), shown(student) if student else None, why)
            )
            continue
        file_id = info.get("file_id")
        filename = (
            Path(os.path.splitext(file_id)[0]).name + ".ipynb" if file_id else entry.parts[-1]
        )
        when = None
        if info.get("timestamp"):
            try:
                when, zoned = pattern_time(info["timestamp"])
                naive += not zoned
            except ValueError as exc:
                files.problems.append(
                    problem(
                        shown(entry.name),
                        shown(student),
                        f"its timestamp is not understood ({exc}): its time is not known",
                    )
                )
        found.append(Candidate(student, entry, filename, when=when, order=entry.date))
    if naive:
        files.notes.append(
            f"{naive} timestamps without a time zone were read as UTC, as nbgrader does"
        )
    return found


FOLDERS = Adapter("folders", read_folders, handback_format="zip", handback=hand_back)
PATTERN = Adapter("pattern", read_pattern)
