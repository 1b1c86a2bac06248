"""``python -m autograde report OUT``: the class report, one self-contained HTML page
(``OUT/report.html``) and the same numbers in ``OUT/report.json``.

It reads what ``grade`` wrote: the scores from ``grades.csv`` (or from ``final_grades.csv``
when ``export`` wrote it after the last grading run, so that a person's scores count),
each notebook's record from ``log.jsonl`` (its status, the judge's result for every idea, its
time) and ``summary.json``. Idea texts and the points of each exercise come from the course's
own sources. Everything read from OUT is data: nothing in it is run, and every text from it
(student ids, messages) is escaped in the page, which also forbids scripts outright.

The page shows the score distribution (totals, and each exercise, with answers that wait for a
person as pending, not as 0), each graded idea's pass rate across the class, most missed
first, the problems by kind with the students they hit, and the slowest notebooks.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..course import Course, Exercise, UnusableInput, exercises
from ..ledger.tables import NOT_EXERCISES
from ..model import PENDING, REVIEW, STATUS_TEXT
from ..record.exporters import write_page_and_numbers
from .report_figures import draw_figures, figures
from .report_page import REPORT_POLICY, render
from .report_text import report_words, say

__all__ = ["REPORT_POLICY", "build_report", "course_ideas", "draw_figures", "render", "write_report"]

NEEDED = ("student_id", "total", "max_total", "pending", "needs_review")
SLOWEST = 15
OTHER_KINDS = {
    "graded_with_notes": "graded, with a note (part of it over the memory limit, code the judge could not load, or no feedback page)",
    "redacted": "lines removed from the feedback page: they quoted the grader's tests or answers",
    "matching_note": "a notebook found under another name, or answer cells repaired for grading",
    "needs_review": "a person's score on an answer that changed since: not counted until scored again in formgrader",
}


SOURCES_CHANGED = (
    "the course's sources changed since this folder was graded: idea texts and points are today's; "
    "grade again for results against the current sources"
)
UNKNOWN_COLUMNS = "{file} has column(s) the course does not have: {columns}"
UNKNOWN_KIND = "an outcome this report does not know"


def _unusable(out: Path, why: str) -> UnusableInput:
    return UnusableInput(f"{out} is not a graded course folder: {why} (run `python -m autograde grade SUBMISSIONS --out {out}` first)")


# ---------------------------------------------------------------- reading OUT (data only)


def _read_summary(out: Path) -> dict:
    path = out / "summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        raise _unusable(out, "it has no summary.json") from None
    except ValueError as exc:
        raise _unusable(out, f"summary.json is not JSON ({exc})") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("columns"), list):
        raise _unusable(out, "summary.json is not the summary `grade` writes (no list of columns)")
    return summary


def _scores_file(out: Path) -> Path:
    """final_grades.csv when `export` wrote it after the last grading run, else grades.csv."""
    grades, final = out / "grades.csv", out / "final_grades.csv"
    if not grades.is_file():
        raise _unusable(out, "it has no grades.csv")
    if final.is_file() and final.stat().st_mtime >= grades.stat().st_mtime:
        return final
    return grades


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UnusableInput(f"{where}: {text!r} is not a score") from None
    if not math.isfinite(value):
        raise UnusableInput(f"{where}: {text!r} is not a score")
    return value


def _read_scores(out: Path, path: Path) -> tuple[list[str], list[dict]]:
    """(the exercise columns, one row per student: a float, 'pending' or 'review' per column)."""
    with open(path, newline="", encoding="utf-8", errors="replace") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        absent = [name for name in NEEDED if name not in header]
        if absent:
            raise _unusable(out, f"{path.name} has no {', '.join(absent)} column(s)")
        columns = [name for name in header if name not in NOT_EXERCISES]
        rows = []
        for line, raw in enumerate(reader, start=2):
            where = f"{path.name} line {line}"
            row = {"student_id": str(raw["student_id"] or ""), "edition": str(raw.get("edition") or "")}
            for name in columns:
                value = raw.get(name)
                row[name] = value if value in (PENDING, REVIEW) else _number(value, f"{where}, column {name}")
            for name in ("total", "max_total", "pending", "needs_review"):
                row[name] = _number(raw.get(name), f"{where}, column {name}")
            # the final score as the table settled it (tables.late_columns): the report never works a penalty out itself
            final = raw.get("final_total")
            row["final_total"] = _number(final, f"{where}, column final_total") if final not in (None, "") else row["total"]
            row["late_penalty"] = raw.get("late_penalty") or ""
            rows.append(row)
    return columns, rows


IDEA_STATUSES = ("passed", "failed", "error", "not_started", "skipped")


def _read_log(out: Path) -> list[dict]:
    """log.jsonl: one record per (student, notebook), as the grader wrote it."""
    path = out / "log.jsonl"
    if not path.is_file():
        raise _unusable(out, "it has no log.jsonl")
    records = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path} line {number}"
            try:
                record = json.loads(line)
            except ValueError:
                raise UnusableInput(f"{where} is not JSON; grade again to rewrite the log") from None
            if not (
                isinstance(record, dict)
                and isinstance(record.get("student_id"), str)
                and isinstance(record.get("notebook"), str)
                and isinstance(record.get("status"), str)
            ):
                raise UnusableInput(f"{where} is not a record the grader writes (student_id, notebook, status)")
            ideas = record.get("ideas", {})
            if not isinstance(ideas, dict) or not all(
                isinstance(items, list)
                and all(isinstance(i, dict) and isinstance(i.get("id"), str) and isinstance(i.get("status"), str) for i in items)
                for items in ideas.values()
            ):
                raise UnusableInput(f"{where}: its ideas are not the judge's results (grade cell -> list of ideas)")
            seconds = record.get("seconds")
            record["seconds"] = float(seconds) if isinstance(seconds, (int, float)) and math.isfinite(seconds) else None
            records.append(record)
    return records


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
    for notebook, tests in course_tests(course.source_paths()).items():
        for test in tests["tests"]:
            for item in load(test["hidden"], test["grade_id"], test["points"]).ideas:
                found.append(IdeaInfo(notebook, test["grade_id"], item.id, item.points, item.text, len(found)))
    return found


# ---------------------------------------------------------------- the numbers


def _stats(values: list[float]) -> dict:
    if not values:
        return {"count": 0, "mean": None, "median": None, "min": None, "max": None}
    return {
        "count": len(values),
        "mean": round(statistics.fmean(values), 3),
        "median": round(statistics.median(values), 3),
        "min": min(values),
        "max": max(values),
    }


def _histogram(values: list[float], top: float) -> dict:
    """Equal bins from 0 to ``top`` (a full score falls in the last bin)."""
    import numpy

    bins = max(1, math.ceil(top) if top <= 40 else 20)  # one point wide, up to 40 points
    counts, edges = numpy.histogram(values, bins=bins, range=(0.0, top if top > 0 else 1.0))
    return {"edges": [round(float(e), 4) for e in edges], "counts": [int(c) for c in counts]}


def _exercise(name: str, info: Exercise | None, rows: list[dict]) -> dict:
    points = info.points if info else None
    values = [row[name] for row in rows]
    numbers = [v for v in values if not isinstance(v, str)]
    counts = {"full": 0, "partial": 0, "zero": 0, PENDING: values.count(PENDING), REVIEW: values.count(REVIEW)}
    for v in numbers:
        counts["zero" if v <= 0 else "full" if points is not None and v >= points else "partial"] += 1
    scores: dict[str, int] = {}
    for v in sorted(numbers):
        scores[f"{v:g}"] = scores.get(f"{v:g}", 0) + 1
    return {
        "grade_id": name,
        "notebook": info.notebook if info else None,
        "points": points,
        "kind": "manual" if info and info.manual else "auto" if info else "unknown",
        "scored": len(numbers),
        **counts,
        "mean": round(statistics.fmean(numbers), 3) if numbers else None,
        "scores": scores,
    }


def _idea_rates(course: Course, records: list[dict], n_students: int, words: dict[str, str] | None = None) -> list[dict]:
    """Each idea's results over the notebooks the judge ran, the most missed first; each idea's text
    in the report's language (``words``: that edition's feedback translations, empty for English)."""
    known = course_ideas(course)
    words = words or {}
    tally: dict[tuple[str, str], dict] = {}
    for info in known:
        tally[(info.grade_id, info.id)] = {
            "notebook": info.notebook,
            "grade_id": info.grade_id,
            "idea": info.id,
            "text": words.get(f"{info.grade_id}:{info.id}", info.text),
            "points": info.points,
            "order": info.order,
        }
    for record in records:
        if record["status"] != "graded":
            continue
        for grade_id, items in record.get("ideas", {}).items():
            for item in items:
                key = (grade_id, item["id"])
                if key not in tally:  # an idea the sources no longer have
                    tally[key] = {
                        "notebook": record["notebook"],
                        "grade_id": grade_id,
                        "idea": item["id"],
                        "text": None,
                        "points": item.get("points"),
                        "order": len(tally),
                    }
                entry = tally[key]
                status = item["status"] if item["status"] in IDEA_STATUSES else "error"
                entry[status] = entry.get(status, 0) + 1
    ideas = []
    for entry in tally.values():
        counts = {s: entry.pop(s, 0) for s in IDEA_STATUSES}
        judged = sum(counts.values())
        ideas.append(
            {
                **entry,
                **counts,
                "judged": judged,
                "missed": judged - counts["passed"],
                "not_judged": max(0, n_students - judged),
                "pass_rate": round(counts["passed"] / judged, 4) if judged else None,
            }
        )
    ideas.sort(key=lambda i: (i["pass_rate"] is None, i["pass_rate"] if i["pass_rate"] is not None else 0, i["order"]))
    for i in ideas:
        del i["order"]

    return ideas


def _problems(records: list[dict], summary: dict, rows: list[dict]) -> list[dict]:
    """The problems by kind (the commonest first), each with its students."""
    kinds: dict[str, list[dict]] = {}

    def add(kind: str, student: str, notebook: str, detail: str) -> None:
        kinds.setdefault(kind, []).append({"student_id": student, "notebook": notebook, "detail": str(detail)[:500]})

    for record in records:
        student, notebook, status = record["student_id"], record["notebook"], record["status"]
        if status != "graded":
            add(status, student, notebook, record.get("detail", ""))
        elif record.get("detail"):
            add("graded_with_notes", student, notebook, record["detail"])
        if isinstance(record.get("redacted_lines"), int) and record["redacted_lines"] > 0:
            add("redacted", student, notebook, f"{record['redacted_lines']} line(s) removed from the feedback page")
    notes = summary.get("matching_notes") if isinstance(summary.get("matching_notes"), dict) else {}
    for student, found in notes.items():
        for note in found if isinstance(found, list) else []:
            add("matching_note", str(student), "", note)
    for row in rows:
        if row["needs_review"] > 0:
            add("needs_review", row["student_id"], "", f"{row['needs_review']:g} score(s) to look at again")
    problems = [
        {
            "kind": kind,
            "what": STATUS_TEXT.get(kind) or OTHER_KINDS.get(kind) or UNKNOWN_KIND,
            "count": len(items),
            "students": len({i["student_id"] for i in items}),
            "items": items,
        }
        for kind, items in kinds.items()
    ]
    problems.sort(key=lambda p: (-p["count"], p["kind"]))

    return problems


def _timing(records: list[dict]) -> dict:
    """Seconds per notebook: statistics, the total, P90 and the slowest."""
    timed = [r for r in records if r["seconds"] is not None]
    seconds = [r["seconds"] for r in timed]
    slowest = sorted(timed, key=lambda r: (-r["seconds"], r["student_id"], r["notebook"]))[:SLOWEST]
    return {
        **_stats(seconds),
        "total": round(sum(seconds), 2),
        "p90": round(statistics.quantiles(seconds, n=10)[-1], 3) if len(seconds) >= 2 else None,
        "slowest": [
            {
                "student_id": r["student_id"],
                "notebook": r["notebook"],
                "seconds": r["seconds"],
                "status": r["status"],
                "reused": bool(r.get("cached")),
                "timings": {k: v for k, v in r.get("timings", {}).items() if isinstance(v, (int, float))}
                if isinstance(r.get("timings"), dict)
                else {},
            }
            for r in slowest
        ],
    }


def build_report(course: Course, out: Path, language: str = "en") -> dict:
    """Read a graded folder and compute the report's numbers (what report.json holds); the graded
    ideas' texts in ``language`` (an edition of the course)."""
    if not out.is_dir():
        raise UnusableInput(f"{out} is not a folder (run `python -m autograde grade SUBMISSIONS --out {out}` first)")
    summary = _read_summary(out)
    scores_path = _scores_file(out)
    columns, rows = _read_scores(out, scores_path)
    records = _read_log(out)
    words = report_words(course, language)
    warnings = []
    try:
        stamp = json.loads((out / ".course.digest").read_text(encoding="utf-8"))
        if isinstance(stamp, dict) and stamp.get("sources") != course.sources_digest():
            warnings.append(say(words, SOURCES_CHANGED))
    except (OSError, ValueError):
        pass

    cells = {e.grade_id: e for e in exercises(course)}
    unknown = [c for c in columns if c not in cells]
    if unknown:
        warnings.append(say(words, UNKNOWN_COLUMNS, file=scores_path.name, columns=", ".join(unknown)))
    per_exercise = [_exercise(name, cells.get(name), rows) for name in columns]
    max_total = max((row["max_total"] for row in rows), default=float(summary.get("max_total") or 0))
    totals = [row["total"] for row in rows]
    pending_points = sum(cells[c].points for row in rows for c in columns if row[c] == PENDING and c in cells)
    score_section = {
        "from": scores_path.name,
        "max_total": max_total,
        "total": {**_stats(totals), "histogram": _histogram(totals, max_total)},
        "pending_answers": int(sum(row["pending"] for row in rows)),
        "pending_points": pending_points,
        "students_with_pending": sum(row["pending"] > 0 for row in rows),
        "review_answers": int(sum(row["needs_review"] for row in rows)),
        "exercises": per_exercise,
    }

    n_students = len(rows)
    ideas = _idea_rates(course, records, n_students, words)
    lates = [r.get("late", {}) for r in records]
    late = {
        "late_notebooks": sum(bool(x.get("late_seconds") or x.get("lms_late")) for x in lates),
        # the scores file's own penalty (total less final_total), so the report and the table agree
        "penalty_points": round(sum(row["total"] - row["final_total"] for row in rows), 6),
        "unknown_times": sum("problem" in x for x in lates),
        "students_unknown": sum(row["late_penalty"] == "unknown" for row in rows),
    }
    score_section["final"] = _stats([row["final_total"] for row in rows])
    written: dict[str, set] = {}  # the editions from the log, as grades.csv has them (final_grades.csv has none)
    for record in records:
        if isinstance(record.get("edition"), str) and record["edition"]:
            written.setdefault(record["student_id"], set()).add(record["edition"])
    editions: dict[str, int] = {}
    for row in rows:
        edition = "+".join(sorted(written.get(row["student_id"], ()))) or row["edition"] or "none"
        editions[edition] = editions.get(edition, 0) + 1
    problems = _problems(records, summary, rows)
    timing = _timing(records)

    return {
        "assignment": course.assignment,
        "students": n_students,
        "language": language,
        "editions": editions,
        "late": late,
        "notebooks": list(course.notebooks),
        "records": len(records),
        "notebooks_graded": sum(r["status"] == "graded" for r in records),
        "scores": score_section,
        "ideas": ideas,
        "problems": problems,
        "timing": timing,
        "warnings": warnings,
    }


def write_report(course: Course, out: Path, language: str = "en") -> tuple[Path, Path, dict]:
    """Write OUT/report.html and OUT/report.json. Returns (page, numbers file, numbers)."""
    data = build_report(course, out, language)
    words = report_words(course, language)
    page = render(data, figures(data, words), words)
    target, numbers = write_page_and_numbers(out, "report", page, data)
    return target, numbers, data
