"""The ledger: one command's OUT. Every command (``grade``, ``feedback``, ``export``, ``report``,
``similarity``) opens one, and reads what an earlier command left through it, each file once, as
typed objects: the intake's facts (``intake.json``), the late spec (``.late.json``), the records
(``log.jsonl``), the summary (``summary.json``), the latest score table (``grades.csv`` or
``final_grades.csv``), the gradebook's URL, the feedback pages and the kept notebooks. What a
command writes for the next goes through it too, so what it wrote is what it reads back (from
memory: ``grade`` hands the intake's facts to the batch so).

A file that is missing or unreadable reads as empty for a command that can go on without it (the
export without the intake's names); ``report`` asks for what it cannot do without, and is told what
is wrong in the words it always used."""

from __future__ import annotations

import json
import math
import os
import time
import zipfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from tools.project_runtime import write_json_atomic

from ..course import Course, UnusableInput
from ..model import PENDING, REVIEW, Record
from . import gradebook
from .facts import IntakeFacts, Summary
from .late import LateSpec
from .layout import Out
from .tables import NOT_EXERCISES, ScoreRow


def unusable(out: Path, why: str) -> UnusableInput:
    return UnusableInput(
        f"{out} is not a graded course folder: {why} (run `python -m autograde "
        f"grade SUBMISSIONS --out {out}` first)"
    )


@dataclass
class Log:
    """log.jsonl as read: each record that could be read, and what was wrong with the first line
    that could not (None when every line could be)."""

    records: list[Record] = field(default_factory=list)
    present: bool = False
    problem: str | None = None


@dataclass
class ScoreSheet:
    """The latest score table as written (``final_grades.csv`` when ``export`` wrote it after the
    last grading, else ``grades.csv``): its name, its exercise columns, its rows."""

    name: str
    columns: list[str]
    rows: list[ScoreRow]


@dataclass(frozen=True)
class Page:
    """A feedback page handed back: whose, which notebook (``stem``), its file name."""

    student: str
    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def stem(self) -> str:
        return self.path.stem

    def data(self) -> bytes:
        return self.path.read_bytes()

    def zip_into(self, archive: zipfile.ZipFile, name: str) -> None:
        archive.write(self.path, name)


class Ledger:
    """OUT, for one command: its layout (``out``) and what the last commands left in it, each read
    once."""

    def __init__(self, root: Path, course: Course | None = None, intake: IntakeFacts | None = None):
        self.root = Path(root)
        self.out = Out(self.root, course.assignment if course else "")
        if intake is not None:
            self.__dict__["intake"] = intake

    # ---------------------------------------------------------------- what grading left
    @cached_property
    def intake(self) -> IntakeFacts:
        """What the last intake found (empty when it wrote nothing: a folder graded as it was)."""
        return IntakeFacts.from_json(_json(self.out.intake))

    def write_intake(self, facts: IntakeFacts) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.out.intake, facts.to_json())
        self.__dict__["intake"] = facts

    @cached_property
    def late_spec(self) -> LateSpec:
        """The deadlines, policy and times the last grading used (none when it wrote none)."""
        try:
            return LateSpec.from_json(json.loads(self.out.late_spec.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return LateSpec()

    def save_late_spec(self, spec: LateSpec) -> None:
        write_json_atomic(self.out.late_spec, spec.to_json())
        self.__dict__["late_spec"] = spec

    @cached_property
    def log(self) -> Log:
        """log.jsonl: one record per (student, notebook) as the grader wrote it."""
        try:
            handle = open(self.out.log, encoding="utf-8", errors="replace")
        except OSError:
            return Log()
        found = Log(present=True)
        with handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    record, why = _record(line, f"{self.out.log} line {number}")
                    if record is not None:
                        found.records.append(record)
                    elif found.problem is None:
                        found.problem = why
        return found

    @property
    def records(self) -> list[Record]:
        return self.log.records

    def unsubmitted(self) -> set[tuple[str, str]]:
        """(student, notebook) pairs the last grading found nothing for: never late."""
        return {(r.student_id, r.notebook) for r in self.records if not r.submitted}

    def editions(self) -> dict[str, str]:
        """{student: the edition their notebooks were written in}, where there is one (not
        mixed)."""
        found: dict[str, set] = {}
        for record in self.records:
            if record.edition:
                found.setdefault(record.student_id, set()).add(record.edition)
        return {s: next(iter(e)) for s, e in found.items() if len(e) == 1}

    @cached_property
    def summary(self) -> Summary:
        try:
            data = json.loads(self.out.summary.read_text(encoding="utf-8"))
        except OSError:
            raise unusable(self.root, f"it has no {Out.SUMMARY}") from None
        except ValueError as exc:
            raise unusable(self.root, f"{Out.SUMMARY} is not JSON ({exc})") from None
        try:
            return Summary.from_json(data)
        except (ValueError, TypeError):
            raise unusable(
                self.root, f"{Out.SUMMARY} is not the summary `grade` writes (no list of columns)"
            ) from None

    def graded_sources(self) -> str | None:
        """The digest of the course's sources the folder was graded against (None when no grading
        master's record can be read; '' when it names none)."""
        stamp = _json(self.out.master_digest)
        return str(stamp.get("sources") or "") if isinstance(stamp, dict) else None

    # ---------------------------------------------------------------- the tables
    def gradebook_url(self, db_url: str | None) -> str:
        """The gradebook to read: the one given, else the one OUT recorded, else OUT's own; refused
        when OUT holds none and none was given."""
        if not self.root.is_dir():
            raise UnusableInput(
                f"{self.root} is not a graded course folder (run `python -m "
                f"autograde grade ... --out {self.root}` first)"
            )
        if not db_url and not self.out.gradebook_url.is_file() and not self.out.gradebook.is_file():
            raise UnusableInput(
                f"{self.root} holds no gradebook: grade into it first, or pass --db-url"
            )
        return gradebook.resolve_url(self.out, db_url)

    def scores_sheet(self) -> ScoreSheet:
        """The latest score table, read back into rows (a float, ``pending`` or ``review`` in each
        exercise's column)."""
        grades, final = self.out.grades, self.out.final
        if not grades.is_file():
            raise unusable(self.root, f"it has no {Out.GRADES}")
        path = (
            final if final.is_file() and final.stat().st_mtime >= grades.stat().st_mtime else grades
        )
        import csv

        with open(path, newline="", encoding="utf-8", errors="replace") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            absent = [
                name
                for name in ("student_id", "total", "max_total", "pending", "needs_review")
                if name not in header
            ]
            if absent:
                raise unusable(self.root, f"{path.name} has no {', '.join(absent)} column(s)")
            columns = [name for name in header if name not in NOT_EXERCISES]
            rows = [
                _score_row(raw, columns, f"{path.name} line {line}")
                for line, raw in enumerate(reader, start=2)
            ]
        return ScoreSheet(path.name, columns, rows)

    # ---------------------------------------------------------------- pages and notebooks
    def pages(self) -> dict[str, list[Page]]:
        """{student: their feedback pages} (links left out)."""
        folder = self.out.pages
        if not folder.is_dir():
            raise UnusableInput(
                f"{self.root} has no feedback/ folder: grade into it first (`python -m "
                f"autograde grade SUBMISSIONS --out {self.root}`)"
            )
        found = {}
        for student in sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()):
            pages = sorted(p for p in student.glob("*.html") if p.is_file() and not p.is_symlink())
            if pages:
                found[student.name] = [Page(student.name, p) for p in pages]
        return found

    def kept_students(self, limit: int) -> list[str]:
        """The students whose submitted notebooks grading kept (links and hidden folders left out),
        sorted."""
        folder = self.root / Out.SUBMITTED
        if not folder.is_dir() or folder.is_symlink():
            raise unusable(self.root, "it has no submitted/ folder")
        try:
            with os.scandir(folder) as entries:
                names = sorted(
                    e.name
                    for e in entries
                    if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
                )
        except OSError as exc:
            raise unusable(
                self.root, f"its submitted/ folder cannot be read ({type(exc).__name__})"
            ) from None
        return names[:limit]

    def kept_notebook(self, student: str, notebook: str, max_bytes: int) -> bytes | None:
        """The bytes of a notebook grading kept; None when it is missing, a link, or over
        ``max_bytes``."""
        path = self.out.submitted(student, notebook)
        try:
            if (
                path.is_symlink()
                or path.parent.is_symlink()
                or not path.is_file()
                or path.stat().st_size > max_bytes
            ):
                return None
            return path.read_bytes()
        except OSError:
            return None

    def write_page_and_numbers(self, name: str, page: str, data: dict) -> tuple[Path, Path]:
        """A class page (``Out.REPORT``, ``Out.SIMILARITY``) and its numbers, each written whole or
        not at all."""
        target, numbers = self.out.page_and_numbers(name)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, target)
        return target, Path(write_json_atomic(numbers, data))


def keep_fault(out: Path, student: str, exc: BaseException, again: bool) -> None:
    """Append a grader fault's traceback to the student's faults log in OUT (``Out.faults``, for
    whoever looks into it: the feedback page and grades.csv carry only its one-line summary)."""
    import traceback

    path = Out(out).faults(student)
    path.parent.mkdir(parents=True, exist_ok=True)
    then = "graded once more" if again else "its notebooks left are marked error"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')}: a fault of the grader ({then})\n")
        handle.write("".join(traceback.format_exception(exc))[-20_000:])


def _json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _record(line: str, where: str) -> tuple[Record | None, str]:
    """A log line's record, or why it is not one (the report's words)."""
    try:
        data = json.loads(line)
    except ValueError:
        return None, f"{where} is not JSON; grade again to rewrite the log"
    if not (
        isinstance(data, dict)
        and isinstance(data.get("student_id"), str)
        and isinstance(data.get("notebook"), str)
        and isinstance(data.get("status"), str)
    ):
        return None, f"{where} is not a record the grader writes (student_id, notebook, status)"
    ideas = data.get("ideas", {})
    if not isinstance(ideas, dict) or not all(
        isinstance(items, list)
        and all(
            isinstance(i, dict)
            and isinstance(i.get("id"), str)
            and isinstance(i.get("status"), str)
            for i in items
        )
        for items in ideas.values()
    ):
        return None, f"{where}: its ideas are not the judge's results (grade cell -> list of ideas)"
    seconds = data.get("seconds")
    data["seconds"] = (
        float(seconds) if isinstance(seconds, (int, float)) and math.isfinite(seconds) else None
    )
    return Record.from_json(data), ""


def _number(text, where: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UnusableInput(f"{where}: {text!r} is not a score") from None
    if not math.isfinite(value):
        raise UnusableInput(f"{where}: {text!r} is not a score")
    return value


def _float(text) -> float:
    """A column no reader relies on (the automatic and manual totals), read as a number when it is
    one."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return 0.0
    return value if math.isfinite(value) else 0.0


def _score_row(raw: dict, columns: list[str], where: str) -> ScoreRow:
    """A row of a score table as written (numbers read back as floats)."""
    cells = {}
    for name in columns:
        value = raw.get(name)
        cells[name] = (
            value if value in (PENDING, REVIEW) else _number(value, f"{where}, column {name}")
        )
    total = _number(raw.get("total"), f"{where}, column total")
    final = raw.get("final_total")
    return ScoreRow(
        str(raw["student_id"] or ""),
        cells,
        auto_total=_float(raw.get("auto_total")),
        manual_total=_float(raw.get("manual_total")),
        total=total,
        max_total=_number(raw.get("max_total"), f"{where}, column max_total"),
        pending=_number(raw.get("pending"), f"{where}, column pending"),
        needs_review=_number(raw.get("needs_review"), f"{where}, column needs_review"),
        # the final score as the table settled it: the report never works a penalty out itself
        final_total=_number(final, f"{where}, column final_total")
        if final not in (None, "")
        else total,
        late_penalty=raw.get("late_penalty") or "",
        edition=str(raw.get("edition") or ""),
    )
