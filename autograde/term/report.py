"""``python -m autograde report OUT``: the class report, one self-contained HTML page
(``OUT/report.html``) and the same numbers in ``OUT/report.json``.

It reads what ``grade`` wrote through the ledger: the latest score table (``grades.csv``, or
``final_grades.csv`` when ``export`` wrote it after the last grading run, so that a person's scores
count), each notebook's record (its status, the judge's result for every idea, its time) and the
summary. Idea texts and the points of each exercise come from the course's
own sources. Everything read from OUT is data: nothing in it is run, and every text from it
(student ids, messages) is escaped in the page, which also forbids scripts outright.

The page shows the score distribution (totals, and each exercise, with answers that wait for a
person as pending, not as 0), each graded idea's pass rate across the class, most missed
first, the problems by kind with the students they hit, and the slowest notebooks.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

from ..course import Course, Exercise, UnusableInput, exercises
from ..ledger.facts import Summary
from ..ledger.folder import Ledger, unusable
from ..ledger.layout import Out
from ..ledger.tables import ScoreRow
from ..model import PENDING, REVIEW, STATUS_TEXT, LateFacts, Record
from .report_figures import draw_figures, figures
from .report_numbers import (
    ExerciseStats,
    Histogram,
    IdeaRate,
    LateSection,
    ProblemItem,
    ProblemKind,
    Report,
    ScoreSection,
    SlowNotebook,
    Stats,
    Timing,
    TotalStats,
)
from .report_page import REPORT_POLICY, render
from .report_text import report_words, say

__all__ = [
    "REPORT_POLICY",
    "Report",
    "build_report",
    "course_ideas",
    "draw_figures",
    "render",
    "write_report",
]

NEEDED = ("student_id", "total", "max_total", "pending", "needs_review")
SLOWEST = 15
OTHER_KINDS = {
    "graded_with_notes": "graded, with a note (part of it over the memory limit, code the judge "
    "could not load, or no feedback page)",
    "redacted": "lines removed from the feedback page: they quoted the grader's tests or answers",
    "matching_note": "a notebook found under another name, or answer cells repaired for grading",
    "needs_review": "a person's score on an answer that changed since: not counted until scored "
    "again in formgrader",
}


SOURCES_CHANGED = (
    "the course's sources changed since this folder was graded: idea texts and points are today's; "
    "grade again for results against the current sources"
)
UNKNOWN_COLUMNS = "{file} has column(s) the course does not have: {columns}"
UNKNOWN_KIND = "an outcome this report does not know"


IDEA_STATUSES = ("passed", "failed", "error", "not_started", "skipped")


@dataclass(frozen=True)
class IdeaInfo:
    notebook: str
    grade_id: str
    id: str
    points: float
    text: str
    order: int


def course_ideas(course: Course) -> list[IdeaInfo]:
    """Every graded idea of the course, in course order, with the text learners read
    (parsed from the instructor sources' hidden tests, as the grader does)."""
    from ..judging.ideas import course_tests, load

    found = []
    for notebook, tests in course_tests(course.source_paths()).notebooks.items():
        for test in tests.tests:
            for item in load(test.hidden, test.grade_id, test.points).ideas:
                found.append(
                    IdeaInfo(notebook, test.grade_id, item.id, item.points, item.text, len(found))
                )
    return found


# ---------------------------------------------------------------- the numbers


def _histogram(values: list[float], top: float) -> Histogram:
    """Equal bins from 0 to ``top`` (a full score falls in the last bin)."""
    import numpy

    bins = max(1, math.ceil(top) if top <= 40 else 20)  # one point wide, up to 40 points
    counts, edges = numpy.histogram(values, bins=bins, range=(0.0, top if top > 0 else 1.0))
    return Histogram([round(float(e), 4) for e in edges], [int(c) for c in counts])


def _exercise(name: str, info: Exercise | None, rows: list[ScoreRow]) -> ExerciseStats:
    points = info.points if info else None
    values = [row.cells[name] for row in rows]
    numbers = [v for v in values if not isinstance(v, str)]
    counts = {"full": 0, "partial": 0, "zero": 0}
    for v in numbers:
        counts[
            "zero" if v <= 0 else "full" if points is not None and v >= points else "partial"
        ] += 1
    scores: dict[str, int] = {}
    for v in sorted(numbers):
        scores[f"{v:g}"] = scores.get(f"{v:g}", 0) + 1
    return ExerciseStats(
        grade_id=name,
        notebook=info.notebook if info else None,
        points=points,
        kind="manual" if info and info.manual else "auto" if info else "unknown",
        scored=len(numbers),
        **counts,
        pending=values.count(PENDING),
        review=values.count(REVIEW),
        mean=round(statistics.fmean(numbers), 3) if numbers else None,
        scores=scores,
    )


def _idea_rates(
    course: Course, records: list[Record], n_students: int, words: dict[str, str] | None = None
) -> list[IdeaRate]:
    """Each idea's results over the notebooks the judge ran, the most missed first; each idea's text
    in the report's language (``words``: that edition's feedback translations, empty for
    English)."""
    words = words or {}
    rows = {
        (info.grade_id, info.id): IdeaRate(
            info.notebook,
            info.grade_id,
            info.id,
            words.get(f"{info.grade_id}:{info.id}", info.text),
            info.points,
        )
        for info in course_ideas(course)
    }
    tally: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for record in records:
        if record.status != "graded":
            continue
        for grade_id, items in (record.ideas or {}).items():
            for item in items:
                key = (grade_id, item["id"])
                if key not in rows:  # an idea the sources no longer have
                    rows[key] = IdeaRate(
                        record.notebook, grade_id, item["id"], None, item.get("points")
                    )
                tally[key][item["status"] if item["status"] in IDEA_STATUSES else "error"] += 1
    ideas = []
    for order, (key, row) in enumerate(rows.items()):
        counts = {s: tally[key][s] for s in IDEA_STATUSES}
        judged = sum(counts.values())
        rate = round(counts["passed"] / judged, 4) if judged else None
        ideas.append(
            (
                replace(
                    row,
                    **counts,
                    judged=judged,
                    missed=judged - counts["passed"],
                    not_judged=max(0, n_students - judged),
                    pass_rate=rate,
                ),
                order,
            )
        )
    ideas.sort(
        key=lambda pair: (
            pair[0].pass_rate is None,
            pair[0].pass_rate if pair[0].pass_rate is not None else 0,
            pair[1],
        )
    )
    return [idea for idea, _ in ideas]


def _problems(records: list[Record], summary: Summary, rows: list[ScoreRow]) -> list[ProblemKind]:
    """The problems by kind (the commonest first), each with its students."""
    kinds: dict[str, list[ProblemItem]] = {}

    def add(kind: str, student: str, notebook: str, detail: str) -> None:
        kinds.setdefault(kind, []).append(ProblemItem(student, notebook, str(detail)[:500]))

    for record in records:
        student, notebook, status = record.student_id, record.notebook, record.status
        if status != "graded":
            add(status, student, notebook, record.detail)
        elif record.detail:
            add("graded_with_notes", student, notebook, record.detail)
        if isinstance(record.redacted_lines, int) and record.redacted_lines > 0:
            add(
                "redacted",
                student,
                notebook,
                f"{record.redacted_lines} line(s) removed from the feedback page",
            )
    notes = summary.matching_notes
    for student, found in notes.items():
        for note in found if isinstance(found, list) else []:
            add("matching_note", str(student), "", note)
    for row in rows:
        if row.needs_review > 0:
            add(
                "needs_review",
                row.student_id,
                "",
                f"{row.needs_review:g} score(s) to look at again",
            )
    problems = [
        ProblemKind(
            kind,
            STATUS_TEXT.get(kind) or OTHER_KINDS.get(kind) or UNKNOWN_KIND,
            len(items),
            len({i.student_id for i in items}),
            items,
        )
        for kind, items in kinds.items()
    ]
    problems.sort(key=lambda p: (-p.count, p.kind))
    return problems


def _timing(records: list[Record]) -> Timing:
    """Seconds per notebook: statistics, the total, P90 and the slowest."""
    timed = [r for r in records if r.seconds is not None]
    seconds = [r.seconds for r in timed]
    slowest = sorted(timed, key=lambda r: (-r.seconds, r.student_id, r.notebook))[:SLOWEST]
    return Timing.of(
        seconds,
        total=round(sum(seconds), 2),
        p90=round(statistics.quantiles(seconds, n=10, method="inclusive")[-1], 3)
        if len(seconds) >= 2
        else None,
        slowest=[
            SlowNotebook(
                r.student_id,
                r.notebook,
                r.seconds,
                r.status,
                bool(r.cached),
                {k: v for k, v in r.timings.items() if isinstance(v, (int, float))}
                if isinstance(r.timings, dict)
                else {},
            )
            for r in slowest
        ],
    )


def _records(ledger: Ledger) -> list[Record]:
    """Every record of the last grading; the report stops at a line that is not one."""
    log = ledger.log
    if not log.present:
        raise unusable(ledger.root, f"it has no {Out.LOG}")
    if log.problem:
        raise UnusableInput(log.problem)
    return log.records


def build_report(course: Course, out: Path, language: str = "en") -> Report:
    """Read a graded folder and compute the report's numbers (what report.json holds); the graded
    ideas' texts in ``language`` (an edition of the course)."""
    if not out.is_dir():
        raise UnusableInput(
            f"{out} is not a folder (run `python -m autograde grade SUBMISSIONS --out {out}` first)"
        )
    ledger = Ledger(out, course)
    summary = ledger.summary
    sheet = ledger.scores_sheet()
    columns, rows = sheet.columns, sheet.rows
    records = _records(ledger)
    words = report_words(course, language)
    warnings = []
    graded = ledger.graded_sources()
    if graded is not None and graded != course.sources_digest():
        warnings.append(say(words, SOURCES_CHANGED))

    cells = {e.grade_id: e for e in exercises(course)}
    unknown = [c for c in columns if c not in cells]
    if unknown:
        warnings.append(say(words, UNKNOWN_COLUMNS, file=sheet.name, columns=", ".join(unknown)))
    max_total = max((row.max_total for row in rows), default=float(summary.max_total or 0))
    totals = [row.total for row in rows]
    score_section = ScoreSection(
        source=sheet.name,
        max_total=max_total,
        total=TotalStats.of(totals, histogram=_histogram(totals, max_total)),
        pending_answers=int(sum(row.pending for row in rows)),
        pending_points=sum(
            cells[c].points
            for row in rows
            for c in columns
            if row.cells[c] == PENDING and c in cells
        ),
        students_with_pending=sum(row.pending > 0 for row in rows),
        review_answers=int(sum(row.needs_review for row in rows)),
        exercises=[_exercise(name, cells.get(name), rows) for name in columns],
        final=Stats.of([row.final_total for row in rows]),
    )
    lates = [r.late or LateFacts() for r in records]
    late = LateSection(
        late_notebooks=sum(bool(x.late_seconds or x.lms_late) for x in lates),
        # the scores file's own penalty (total less final_total), so the report and the table agree
        penalty_points=round(sum(row.total - row.final_total for row in rows), 6),
        unknown_times=sum(x.problem is not None for x in lates),
        students_unknown=sum(row.late_penalty == "unknown" for row in rows),
    )
    # the editions from the log, as grades.csv has them (final_grades.csv has none)
    written: dict[str, set] = {}
    for record in records:
        if isinstance(record.edition, str) and record.edition:
            written.setdefault(record.student_id, set()).add(record.edition)
    editions: dict[str, int] = {}
    for row in rows:
        edition = "+".join(sorted(written.get(row.student_id, ()))) or row.edition or "none"
        editions[edition] = editions.get(edition, 0) + 1
    return Report(
        assignment=course.assignment,
        students=len(rows),
        language=language,
        editions=editions,
        late=late,
        notebooks=list(course.notebooks),
        records=len(records),
        notebooks_graded=sum(r.status == "graded" for r in records),
        scores=score_section,
        ideas=_idea_rates(course, records, len(rows), words),
        problems=_problems(records, summary, rows),
        timing=_timing(records),
        warnings=warnings,
    )


def write_report(course: Course, out: Path, language: str = "en") -> tuple[Path, Path, Report]:
    """Write OUT/report.html and OUT/report.json. Returns (page, numbers file, numbers)."""
    report = build_report(course, out, language)
    words = report_words(course, language)
    page = render(report, figures(report, words), words)
    target, numbers = Ledger(out, course).write_page_and_numbers(Out.REPORT, page, report.to_json())
    return target, numbers, report
