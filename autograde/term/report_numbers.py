"""The class report's numbers, typed: what ``report.build_report`` works out and the page, its
figures and ``OUT/report.json`` show; and the page's figures (``Figures``). Each field is a key of
report.json, in its order; :meth:`Report.to_json` is its one writer (the JSON is what earlier
versions wrote, key for key)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, fields
from typing import Generic, Self, TypeVar

from ..model import JsonRecord, json_named


@dataclass(frozen=True)
class Stats:
    """How many values, their mean and median (to 3 decimals), least and greatest (None: no
    value)."""

    count: int = 0
    mean: float | None = None
    median: float | None = None
    min: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: list[float], **more) -> Self:
        """The statistics of ``values`` (and ``more``: the fields of a type that extends these)."""
        if not values:
            return cls(**more)
        return cls(
            len(values),
            round(statistics.fmean(values), 3),
            round(statistics.median(values), 3),
            min(values),
            max(values),
            **more,
        )


@dataclass(frozen=True)
class Histogram:
    """Equal bins: their edges and how many values fell in each."""

    edges: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class TotalStats(Stats):
    """The class's totals: their statistics and histogram."""

    histogram: Histogram = field(default_factory=Histogram)


@dataclass(frozen=True)
class ExerciseStats:
    """One column of the scores table: its exercise, how many students scored it fully, partly or 0,
    how many wait for a person (``pending``) or for a look again (``review``), the mean, and each
    score's count."""

    grade_id: str
    notebook: str | None
    points: float | None
    kind: str  # auto, manual, unknown (a column the course does not have)
    scored: int
    full: int
    partial: int
    zero: int
    pending: int
    review: int
    mean: float | None
    scores: dict[str, int]  # a score as written ("1.5") -> how many students have it


@dataclass(frozen=True)
class IdeaRate:
    """One graded idea over the class: how many notebooks the judge ran passed it, failed it, and so
    on, how many it did not judge, and the pass rate (None: none judged). ``text`` is None for an
    idea the course's sources no longer have."""

    notebook: str
    grade_id: str
    idea: str
    text: str | None
    points: float | None
    passed: int = 0
    failed: int = 0
    error: int = 0
    not_started: int = 0
    skipped: int = 0
    judged: int = 0
    missed: int = 0
    not_judged: int = 0
    pass_rate: float | None = None


@dataclass(frozen=True)
class ProblemItem:
    """A student's notebook with a problem of one kind, and the detail (cut at 500 characters)."""

    student_id: str
    notebook: str
    detail: str


@dataclass(frozen=True)
class ProblemKind:
    """One kind of problem: its name, what it means, how many notebooks and students it hit, and
    each."""

    kind: str
    what: str
    count: int
    students: int
    items: list[ProblemItem]


@dataclass(frozen=True)
class SlowNotebook:
    """One of the slowest notebooks: whose, which, its seconds, status, whether it was reused, its
    timings."""

    student_id: str
    notebook: str
    seconds: float
    status: str
    reused: bool
    timings: dict[str, float]


@dataclass(frozen=True)
class Timing(Stats):
    """Seconds per notebook: their statistics, the total, the 90th percentile (two or more), the
    slowest."""

    total: float = 0.0
    p90: float | None = None
    slowest: list[SlowNotebook] = field(default_factory=list)


@dataclass(frozen=True)
class LateSection:
    """The late notebooks, the penalty points the scores table took off, the notebooks whose
    submission time is not known, and the students whose penalty is therefore unknown."""

    late_notebooks: int
    penalty_points: float
    unknown_times: int
    students_unknown: int


@dataclass(frozen=True)
class ScoreSection:
    """The scores: the table they come from (``source``: report.json's ``from``), the maximum, the
    totals, what waits for a person, the scores to review, each exercise's column, and the totals
    after the penalty."""

    source: str = json_named("from")
    max_total: float
    total: TotalStats
    pending_answers: int
    pending_points: float
    students_with_pending: int
    review_answers: int
    exercises: list[ExerciseStats]
    final: Stats


@dataclass(frozen=True)
class Report(JsonRecord):
    """The class report's numbers (``OUT/report.json``): the assignment, how many students, the
    report's language, the editions submitted, the late notebooks, the course's notebooks, the
    records and how many were graded, the scores, each graded idea's pass rate (the most missed
    first), the problems by kind (the commonest first), the time per notebook, and warnings."""

    assignment: str
    students: int
    language: str
    editions: dict[str, int]
    late: LateSection
    notebooks: list[str]
    records: int
    notebooks_graded: int
    scores: ScoreSection
    ideas: list[IdeaRate]
    problems: list[ProblemKind]
    timing: Timing
    warnings: list[str]


T = TypeVar("T")


@dataclass(frozen=True)
class Figures(Generic[T]):
    """The report's figures, each drawn (a matplotlib ``Figure``) or encoded (a data: URI of an SVG
    image); None where it has nothing to show."""

    totals: T | None = None
    exercises: T | None = None
    ideas: T | None = None
    problems: T | None = None
    slowest: T | None = None

    def shown(self) -> list[tuple[str, T]]:
        """(name, figure) of each figure there is, in the page's order."""
        return [
            (f.name, getattr(self, f.name))
            for f in fields(self)
            if getattr(self, f.name) is not None
        ]
