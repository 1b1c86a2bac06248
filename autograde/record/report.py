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

import base64
import csv
import io
import json
import math
import statistics
import warnings
from dataclasses import dataclass
from pathlib import Path

from markupsafe import Markup

from ..course import Course, Exercise, UnusableInput, exercises
from ..model import PENDING, REVIEW, STATUS_TEXT
from ..publish.editions import feedback_translations
from .exporters import add_csp, base_style, html_lang, write_page_and_numbers
from .tables import NOT_EXERCISES

NEEDED = ("student_id", "total", "max_total", "pending", "needs_review")
SHOWN_PER_KIND = 100  # rows per problem kind on the page (report.json has them all)
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
UNKNOWN_KIND = "an outcome this report does not know"


def say(words: dict[str, str], english: str, **values) -> str:
    """``english`` in the report's language (``words``: the edition's feedback translations, empty
    for English), its ``{name}`` fields filled with ``values``."""
    return words.get(english, english).format(**values)


def say_detail(words: dict[str, str], detail: str) -> str:
    """A problem's detail in the report's language: each "; "-separated part that is one of
    ``DETAILS`` (its value kept), the rest as written."""
    if not words:
        return detail
    parts = []
    for part in detail.split("; "):
        for english in DETAILS:
            head, tail = english.split("{n}")
            if part.startswith(head) and part.endswith(tail) and len(part) > len(head) + len(tail) and english in words:
                part = say(words, english, n=part[len(head) : len(part) - len(tail)])
                break
        parts.append(part)
    return say(words, "{first}; {second}", first="", second="").join(parts)


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


# ---------------------------------------------------------------- figures


def _plain(text: str) -> str:
    """A label matplotlib draws as it is (no mathtext)."""
    return str(text).replace("$", r"\$")


def _svg(fig) -> str:
    """The figure as a data: URI of an SVG shown as an image (nothing in it can run). Its text stays
    text (``svg.fonttype`` none): the reader's browser draws every glyph with its own fonts, so a
    Chinese character the course's font subset lacks (the subset is the learner runtime's) is only
    measured less exactly by matplotlib, and its warning about that is not shown."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "class-report"}), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue().encode()).decode()


COLOURS = {"full": "#2e7d32", "partial": "#f9a825", "zero": "#c62828", PENDING: "#90a4ae", REVIEW: "#6a1b9a"}


def figures(data: dict, words: dict[str, str] | None = None) -> dict[str, str]:
    """The report's figures as data: URIs of SVG images, by name."""
    return {name: _svg(fig) for name, fig in draw_figures(data, words).items()}


def draw_figures(data: dict, words: dict[str, str] | None = None) -> dict:
    """The report's matplotlib figures by name (drawn apart from their encoding, so that their
    text can be checked), their text in the language of ``words`` (the edition's feedback
    translations; English without); a figure with nothing to show is left out."""
    import matplotlib

    words = words or {}
    with matplotlib.rc_context():
        if words:  # Chinese text measured with the course's CJK font (its text stays text in the SVG: _svg)
            from tools.i18n import use_course_font

            use_course_font()
        drawn = {
            "totals": _totals_figure(data, words),
            "exercises": _exercises_figure(data, words),
            "ideas": _ideas_figure(data, words),
            "problems": _problems_figure(data, words),
            "slowest": _slowest_figure(data, words),
        }
    return {name: fig for name, fig in drawn.items() if fig is not None}


def _totals_figure(data: dict, words: dict[str, str]):
    """The class's totals: a histogram, with the mean."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    if not data["students"]:
        return None
    scores = data["scores"]
    hist = scores["total"]["histogram"]
    fig = Figure(figsize=(7.5, 3.2), layout="constrained")
    ax = fig.add_subplot()
    edges = hist["edges"]
    ax.bar(
        edges[:-1],
        hist["counts"],
        width=[b - a for a, b in zip(edges, edges[1:])],
        align="edge",
        color="#1565c0",
        edgecolor="white",
        label=say(words, "students"),
    )
    if scores["total"]["mean"] is not None:
        ax.axvline(scores["total"]["mean"], color="black", linestyle="--", label=say(words, "mean {mean}", mean=_mean(scores["total"]["mean"])))
    ax.set_xlabel(say(words, "total points (of {points}; answers pending a person are not in these totals)", points=f"{scores['max_total']:g}"))
    ax.set_ylabel(say(words, "students"))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # students come whole: no 0.5 tick
    ax.set_title(say(words, "Totals across the class"))
    ax.legend(loc="upper right")
    return fig


def _exercises_figure(data: dict, words: dict[str, str]):
    """Each exercise's scores: full, partial, zero, pending, review."""
    from matplotlib.figure import Figure

    exercises_ = data["scores"]["exercises"]
    if not exercises_:
        return None
    fig = Figure(figsize=(7.5, 0.32 * len(exercises_) + 1.6), layout="constrained")
    ax = fig.add_subplot()
    labels = [_plain(e["grade_id"]) for e in exercises_][::-1]
    left = [0] * len(exercises_)
    for part, label in (
        ("full", "full marks"),
        ("partial", "part of the points"),
        ("zero", "0 points"),
        (PENDING, "pending: waits for a person"),
        (REVIEW, "review: to score again"),
    ):
        widths = [e[part] for e in exercises_][::-1]
        ax.barh(labels, widths, left=left, color=COLOURS[part], label=say(words, label))
        left = [a + b for a, b in zip(left, widths)]
    ax.set_xlabel(say(words, "students"))
    ax.set_title(say(words, "Each exercise's scores"))
    fig.legend(loc="outside lower center", ncols=3, fontsize="small")
    return fig


# two lines: long idea names leave the axes narrower than this label on one line
IDEAS_AXIS = "% of judged notebooks that passed the idea\n(red under 50%, amber under 80%, green from 80%)"


def _ideas_figure(data: dict, words: dict[str, str]):
    """Each graded idea's pass rate, most missed at the top."""
    from matplotlib.figure import Figure

    ideas = [i for i in data["ideas"] if i["pass_rate"] is not None]
    if not ideas:
        return None
    fig = Figure(figsize=(7.5, 0.24 * len(ideas) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    ax.barh(
        [_plain(f"{i['grade_id']} · {i['idea']}") for i in ideas][::-1],
        [100 * i["pass_rate"] for i in ideas][::-1],
        color=["#c62828" if i["pass_rate"] < 0.5 else "#f9a825" if i["pass_rate"] < 0.8 else "#2e7d32" for i in ideas][::-1],
    )
    ax.set_xlim(0, 100)
    ax.set_xlabel(say(words, IDEAS_AXIS))
    ax.set_title(say(words, "Graded ideas, most missed at the top"))
    ax.tick_params(axis="y", labelsize="small")
    return fig


def _problems_figure(data: dict, words: dict[str, str]):
    """Problems by kind."""
    from matplotlib.figure import Figure

    if not data["problems"]:
        return None
    problems = data["problems"]
    fig = Figure(figsize=(7.5, 0.32 * len(problems) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    ax.barh([_plain(p["kind"]) for p in problems][::-1], [p["count"] for p in problems][::-1], color="#ef6c00")
    ax.set_xlabel(say(words, "notebooks (or students, for notes and reviews)"))
    ax.set_title(say(words, "Problems by kind"))
    return fig


def _slowest_figure(data: dict, words: dict[str, str]):
    """The slowest notebooks, with the median of all."""
    from matplotlib.figure import Figure

    seconds = [s["seconds"] for s in data["timing"]["slowest"]]
    if not data["timing"]["count"]:
        return None
    fig = Figure(figsize=(7.5, 0.3 * len(seconds) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    slow = data["timing"]["slowest"]
    ax.barh(
        [_plain(f"{s['student_id'][:24]} · {s['notebook'][:28]}") for s in slow][::-1],
        seconds[::-1],
        color=["#c62828" if s["status"] != "graded" else "#1565c0" for s in slow][::-1],
    )
    ax.axvline(
        data["timing"]["median"],
        color="black",
        linestyle="--",
        label=say(words, "median of all {count} notebooks: {median} s", count=data["timing"]["count"], median=f"{data['timing']['median']:g}"),
    )
    ax.set_xlabel(say(words, "seconds to grade (red: not graded, e.g. stopped at the time limit)"))
    ax.set_title(say(words, "The slowest notebooks"))
    ax.tick_params(axis="y", labelsize="small")
    ax.legend(loc="lower right", fontsize="small")
    return fig


# ---------------------------------------------------------------- the page

# the page is one self-contained file: its own styles and data: images, nothing else
REPORT_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
PAGE = """<!DOCTYPE html>
<html lang="{{ lang }}"><head><meta charset="utf-8">
<title>{{ tr("Class report · {assignment}", assignment=data.assignment) }}</title>
<style>
{{ base_style }}
img { max-width: 100%; } .warn { background: #fff3cd; padding: 0.5em; border: 1px solid #e0c36a; }
.pending { color: #546e7a; } details { margin-bottom: 1em; }
</style></head><body>
<h1>{{ tr("Class report | 班级报告") }} · {{ data.assignment }}</h1>
<p>{{ tr("{students} student(s), {graded} of {records} notebook(s) graded.",
        students=data.students, graded=data.notebooks_graded, records=data.records) }}
{{ tr("Editions submitted: {editions}.", editions=listed(data.editions|dictsort)) }}
{{ tr("Late notebooks: {late} ({points} penalty point(s) in {file}; final totals after it: mean {mean}, median {median}){unknown}.",
      late=data.late.late_notebooks, points=num(data.late.penalty_points), file=code(s.from), mean=mean(s.final.mean), median=mean(s.final.median),
      unknown=tr("; {count} without a known submission time", count=data.late.unknown_times) if data.late.unknown_times else "") }}
{{ tr("Scores from {file}.", file=code(s.from)) }}</p>
{% for w in data.warnings %}<p class="warn">{{ w }}</p>{% endfor %}

<h2 id="scores">{{ tr("Score distribution | 分数分布") }}</h2>
<table id="totals"><tr>{{ headers("students", "mean", "median", "min", "max", "of", "answers pending a person", "scores to review") }}</tr>
<tr><td class="n">{{ s.total.count }}</td><td class="n">{{ mean(s.total.mean) }}</td><td class="n">{{ mean(s.total.median) }}</td>
<td class="n">{{ num(s.total.min) }}</td><td class="n">{{ num(s.total.max) }}</td><td class="n">{{ num(s.max_total) }}</td>
<td class="n pending">{{ tr("{answers} ({points} points, {students} student(s))",
    answers=s.pending_answers, points=num(s.pending_points), students=s.students_with_pending) }}</td>
<td class="n">{{ s.review_answers }}</td></tr></table>
<p class="pending">{{ tr("A written answer that waits for a person is shown as {pending}, not as 0; "
    ~ "until it is scored the totals leave its points out.", pending=em(tr("pending"))) }}</p>
{% if figs.get('totals') %}<img alt="{{ tr("histogram of the class's totals") }}" src="{{ figs.totals }}">{% endif %}
{% if figs.get('exercises') %}<img alt="{{ tr("each exercise's scores") }}" src="{{ figs.exercises }}">{% endif %}
<table id="exercises"><tr>{{ headers("exercise", "notebook", "kind", "points", "mean", "full marks", "part") }}<th>0</th>
{{ headers("pending", "review") }}</tr>
{% for e in s.exercises %}<tr data-exercise="{{ e.grade_id }}"><td>{{ e.grade_id }}</td><td>{{ e.notebook or "" }}</td>
<td>{{ tr(e.kind) }}</td><td class="n">{{ num(e.points) }}</td><td class="n">{{ mean(e.mean) }}</td><td class="n full">{{ e.full }}</td>
<td class="n partial">{{ e.partial }}</td><td class="n zero">{{ e.zero }}</td><td class="n pending">{{ e.pending }}</td>
<td class="n review">{{ e.review }}</td></tr>
{% endfor %}</table>

<h2 id="ideas">{{ tr("Graded ideas: which did learners miss? | 评分要点:哪些没有掌握?") }}</h2>
<p>{{ tr("Each TODO's hidden tests are named ideas. The pass rate counts the notebooks the judge ran "
    ~ "(a missing or stopped notebook is not judged); most missed first.") }}</p>
{% if figs.get('ideas') %}<img alt="{{ tr("pass rate of each graded idea") }}" src="{{ figs.ideas }}">{% endif %}
<table id="idea-table"><tr>{{ headers("exercise · idea", "what it checks", "points", "passed", "judged") }}
{{ headers("pass rate", "failed", "error", "not started", "skipped", "not judged") }}</tr>
{% for i in data.ideas %}<tr data-idea="{{ i.grade_id }}/{{ i.idea }}"><td>{{ i.grade_id }} · {{ i.idea }}</td>
<td class="text">{{ i.text if i.text is not none else tr("(not in the current sources)") }}</td><td class="n">{{ num(i.points) }}</td>
<td class="n passed">{{ i.passed }}</td><td class="n judged">{{ i.judged }}</td>
<td class="n rate">{{ pct(i.pass_rate) }}</td><td class="n failed">{{ i.failed }}</td><td class="n error">{{ i.error }}</td>
<td class="n not_started">{{ i.not_started }}</td><td class="n skipped">{{ i.skipped }}</td><td class="n">{{ i.not_judged }}</td></tr>
{% endfor %}</table>

<h2 id="problems">{{ tr("Problems | 问题") }}</h2>
{% if not data.problems %}<p>{{ tr("None: every notebook was graded, with nothing to note.") }}</p>{% endif %}
{% if figs.get('problems') %}<img alt="{{ tr("problems by kind") }}" src="{{ figs.problems }}">{% endif %}
{% if data.problems %}<table id="problem-kinds"><tr>{{ headers("kind", "what happened", "count", "students") }}</tr>
{% for p in data.problems %}<tr data-kind="{{ p.kind }}"><td>{{ p.kind }}</td><td>{{ tr(p.what) }}</td>
<td class="n count">{{ p.count }}</td><td class="n students">{{ p.students }}</td></tr>
{% endfor %}</table>{% endif %}
{% for p in data.problems %}<details><summary>{{ tr("{kind}: {count} ({what})", kind=p.kind, count=p.count, what=tr(p.what)) }}</summary>
<table><tr>{{ headers("student", "notebook", "detail") }}</tr>
{% for item in p["items"][:shown] %}<tr><td class="student">{{ item.student_id }}</td><td>{{ item.notebook }}</td>
<td>{{ detail(item.detail) }}</td></tr>
{% endfor %}</table>{% if p["items"]|length > shown %}
<p>{{ tr("… and {count} more (all in report.json)", count=p["items"]|length - shown) }}</p>{% endif %}
</details>
{% endfor %}

<h2 id="time">{{ tr("The slowest notebooks | 最慢的 notebook") }}</h2>
<p>{{ tr("{count} notebook(s) timed: median {median} s, 90th percentile {p90} s, slowest {max} s, {total} s in all "
        ~ "(a reused result keeps the time of the run that graded it).",
        count=t.count, median=num(t.median), p90=num(t.p90), max=num(t.max), total=num(t.total)) }}</p>
{% if figs.get('slowest') %}<img alt="{{ tr("the slowest notebooks") }}" src="{{ figs.slowest }}">{% endif %}
<table id="slowest"><tr>{{ headers("student", "notebook", "seconds", "status", "autograde / judge / feedback (s)") }}</tr>
{% for r in t.slowest %}<tr><td class="student">{{ r.student_id }}</td><td>{{ r.notebook }}</td><td class="n">{{ num(r.seconds) }}</td>
<td>{{ r.status }}{% if r.reused %}{{ tr(" (reused)") }}{% endif %}</td>
<td class="n">{{ num(r.timings.get('autograde')) }} / {{ num(r.timings.get('judge')) }} / {{ num(r.timings.get('feedback')) }}</td></tr>
{% endfor %}</table>
</body></html>
"""


def _num(value) -> str:
    return "–" if value is None else f"{value:g}"


def _mean(value) -> str:
    """A mean (or median) of scores as a person reads it: one decimal at most (13.9, not 13.917);
    report.json keeps the number to 3 decimals."""
    return "–" if value is None else f"{round(value, 1):g}"


def _pct(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def render(data: dict, figs: dict[str, str], words: dict[str, str] | None = None) -> str:
    """The report's page, its own text in the language of ``words`` (the edition's feedback
    translations; English without). Every value put into a text is escaped."""
    from jinja2 import Environment, StrictUndefined
    from markupsafe import escape

    words = words or {}

    def tr(english: str, **values) -> Markup:
        return Markup(escape(words.get(english, english))).format(**values)  # noqa: S704 (escaped, values escaped by format)

    def listed(pairs) -> str:  # "zh 3, en 1" with the language's list separator
        return say(words, "{first}, {second}", first="", second="").join(f"{name} {count}" for name, count in pairs)

    env = Environment(autoescape=True, undefined=StrictUndefined)
    env.globals.update(
        num=_num,
        pct=_pct,
        mean=_mean,
        tr=tr,
        headers=lambda *keys: Markup("").join(Markup("<th>{}</th>").format(tr(key)) for key in keys),  # noqa: S704 (escaped)
        listed=listed,
        detail=lambda text: say_detail(words, text),
        code=lambda text: Markup("<code>{}</code>").format(text),  # noqa: S704 (the value is escaped)
        em=lambda text: Markup("<em>{}</em>").format(text),  # noqa: S704 (the value is escaped)
    )
    template = env.from_string(PAGE)
    style = Markup(base_style("72em"))  # noqa: S704 (the course's own constant styles)
    page = template.render(
        data=data, s=data["scores"], t=data["timing"], figs=figs, shown=SHOWN_PER_KIND, base_style=style, lang=html_lang(data.get("language", "en"))
    )
    return add_csp(page, REPORT_POLICY)


def report_words(course: Course, language: str) -> dict[str, str]:
    """The report's translations in ``language`` (the edition's feedback translations; none for English)."""
    return feedback_translations(course).get(language, {}) if language != "en" else {}


def write_report(course: Course, out: Path, language: str = "en") -> tuple[Path, Path, dict]:
    """Write OUT/report.html and OUT/report.json. Returns (page, numbers file, numbers)."""
    data = build_report(course, out, language)
    words = report_words(course, language)
    page = render(data, figures(data, words), words)
    target, numbers = write_page_and_numbers(out, "report", page, data)
    return target, numbers, data
