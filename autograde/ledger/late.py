"""Deadlines and late penalties, in the shapes Canvas's late policy offers.

A policy is ``none``, ``zero`` (nothing counts after the deadline) or a deduction such as
``deduct:10%/day`` or ``deduct:2%/hour,floor:50%``: a percentage of the notebook's maximum for each
started day or hour late (one second late is one day late, as Canvas counts it), never taking the
score below the floor (a percentage of the maximum; a score already under it loses nothing more).
On time to the second is on time.

The deadline is one for the module or one per notebook; an extension moves one student's deadline.
The submission time comes from the intake (nbgrader's exchange timestamp, a file name, a timestamps
CSV). A notebook with a deadline and no known submission time is a named problem: it is never
taken to be on time silently (its penalty is left at zero and its row says ``unknown``).

An LMS's own late mark (Canvas's ``LATE_`` in its download: OUT/intake.json ``late_in_lms``) counts
when no time is known for that notebook: it says late, not how late. It is charged the least penalty
lateness implies (one second late: all of it under ``zero``, one started day or hour under a
deduction); when more lateness could cost more, the notebook stays ``unknown`` (the least penalty is
a lower bound) until its time is given or the instructor accepts the least penalty. A time, when
there is one, wins over the mark. Each notebook's ``basis`` says which: ``time``, ``lms_flag``,
``unknown``.

The penalty is taken from the notebook's score as the table counts it: the judge's scores and a
person's where present (``settle``); every table, the gradebook, the feedback page and the class
report take it from there.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..course import UnusableInput
from ..model import Disputed, JsonRecord, LateFacts
from ..settings import GradingTable, choose

UNITS = {"day": 86_400, "hour": 3_600}
POLICY = re.compile(
    r"^deduct:(?P<percent>\d+(?:\.\d+)?)%/(?P<unit>day|hour)(?:,floor:(?P<floor>\d+(?:\.\d+)?)%)?$"
)


@dataclass(frozen=True)
class Policy:
    kind: str  # none | zero | deduct
    percent: float = 0.0  # of the maximum, per unit late
    unit_seconds: int = 86_400
    floor: float = 0.0  # percent of the maximum

    def describe(self) -> str:
        if self.kind != "deduct":
            return {"none": "no late penalty", "zero": "no points after the deadline"}[self.kind]
        unit = "day" if self.unit_seconds == UNITS["day"] else "hour"
        return f"{self.percent:g}% of the maximum per {unit} late" + (
            f", not below {self.floor:g}%" if self.floor else ""
        )


def parse_policy(text: str) -> Policy:
    """``none``, ``zero`` or ``deduct:P%/day|hour[,floor:F%]``; anything else is refused, saying the
    shapes."""
    text = (text or "none").strip().lower().replace(" ", "")
    if text in ("none", "zero"):
        return Policy(text)
    match = POLICY.match(text)
    if not match or not 0 < float(match["percent"]) <= 100 or float(match["floor"] or 0) > 100:
        raise UnusableInput(
            f"late policy {text!r}: use none, zero, or deduct:P%/day or deduct:P%/hour, "
            "optionally ,floor:F% (e.g. deduct:10%/day,floor:50%)"
        )
    return Policy(
        "deduct", float(match["percent"]), UNITS[match["unit"]], float(match["floor"] or 0)
    )


def parse_time(text: str, what: str) -> dt.datetime:
    """An ISO 8601 time with its zone (a time without one is refused: whose midnight would it be?),
    kept at the UTC offset it was written with: a deadline is compared as an instant, and shown to
    people as the instructor gave it (``deadline_shown``)."""
    try:
        value = dt.datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise UnusableInput(
            f"{what}: {text!r} is not an ISO 8601 time (e.g. 2026-12-01T23:59:00+08:00)"
        ) from None
    if value.tzinfo is None:
        raise UnusableInput(f"{what}: {text!r} has no time zone (write it with +08:00, Z, ...)")
    try:
        value.astimezone(dt.UTC)
    except OverflowError:  # 0001-01-01 east of UTC, 9999-12-31 west of it
        raise UnusableInput(
            f"{what}: {text!r} is outside the times UTC can hold (years 1 to 9999)"
        ) from None
    return value


def read_extensions(path: Path) -> dict[str, dt.datetime]:
    """``student_id, deadline`` rows: each student's own deadline."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as exc:
        raise UnusableInput(f"cannot read the extensions file {path}: {exc}") from None
    if rows and not {"student_id", "deadline"} <= set(rows[0]):
        raise UnusableInput(
            f"{path}: the extensions file needs the columns student_id and deadline"
        )
    return {
        row["student_id"].strip(): parse_time(row["deadline"], f"{path} line {n}")
        for n, row in enumerate(rows, start=2)
    }


def late_spec(
    grading: GradingTable, deadline: str | None, policy: str | None, extensions: Path | None
) -> LateSpec:
    """The spec from course.toml's ``[grading]`` table (``deadline``, ``late_policy``,
    ``extensions``, ``[grading.deadlines]`` per notebook) with the command line's values winning."""
    chosen = choose(grading, deadline, policy, extensions)  # which source wins: settings.choose
    spec = LateSpec(
        parse_policy(chosen.late_policy),
        parse_time(chosen.deadline, "the deadline") if chosen.deadline else None,
        {
            nb: parse_time(when, f"[grading.deadlines] {nb}")
            for nb, when in chosen.deadlines.items()
        },
        read_extensions(chosen.extensions) if chosen.extensions else {},
    )
    if spec.policy.kind != "none" and spec.deadline is None and not spec.deadlines:
        raise UnusableInput(
            f"a late policy ({chosen.late_policy}) needs a deadline: --deadline "
            "or [grading] deadline in course.toml"
        )
    return spec


@dataclass
class LateSpec(JsonRecord):
    """The term's late rule as ``grade`` settled it (``.late.json``): the policy, the deadline and
    each notebook's own, each student's extension, and each submission's time (and its times, where
    they disagreed), written by the shared codec and read back by ``from_json``."""

    policy: Policy = Policy("none")
    deadline: dt.datetime | None = None
    deadlines: dict[str, dt.datetime] = field(default_factory=dict)  # notebook -> its own deadline
    extensions: dict[str, dt.datetime] = field(default_factory=dict)  # student -> their deadline
    # student -> notebook -> submitted at
    times: dict[str, dict[str, dt.datetime]] = field(default_factory=dict)
    # student -> notebook -> its times, which disagreed
    disputed: dict[str, dict[str, Disputed]] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.deadline is not None or bool(self.deadlines)

    def one_deadline(self) -> dt.datetime | None:
        """The one due date nbgrader can hold: the module's deadline, or the notebooks' when they
        share one."""
        shared = set(self.deadlines.values())
        return self.deadline or (shared.pop() if len(shared) == 1 else None)

    def deadline_for(self, student: str, notebook: str) -> dt.datetime | None:
        if student in self.extensions:
            return self.extensions[student]
        return self.deadlines.get(notebook, self.deadline)

    @classmethod
    def from_json(cls, data: dict) -> LateSpec:
        when = dt.datetime.fromisoformat
        return cls(
            Policy(**data["policy"]),
            when(data["deadline"]) if data.get("deadline") else None,
            {k: when(v) for k, v in data.get("deadlines", {}).items()},
            {k: when(v) for k, v in data.get("extensions", {}).items()},
            {s: {n: when(t) for n, t in per.items()} for s, per in data.get("times", {}).items()},
            {
                s: {n: d for n, v in per.items() if (d := Disputed.from_json(v))}
                for s, per in (data.get("disputed") or {}).items()
            },
        )


def penalty_points(policy: Policy, late_seconds: float, score: float, max_points: float) -> float:
    """The points a notebook scored ``score`` of ``max_points`` loses, ``late_seconds`` late."""
    if late_seconds <= 0 or policy.kind == "none" or score <= 0:
        return 0.0
    if policy.kind == "zero":
        return score
    units = math.ceil(late_seconds / policy.unit_seconds)
    deduction = max_points * min(100.0, policy.percent * units) / 100
    floor = max_points * policy.floor / 100
    return round(max(0.0, min(deduction, score - floor, score)), 6)


FOREVER = 1e12  # seconds: late past any deduction's reach


def offset_text(when: dt.datetime) -> str:
    """An aware time's UTC offset as ISO 8601 writes it: ``+08:00``, ``-05:00``, ``+00:00``."""
    offset = when.utcoffset() or dt.timedelta(0)
    sign, offset = ("-", -offset) if offset < dt.timedelta(0) else ("+", offset)
    minutes, seconds = divmod(int(offset.total_seconds()), 60)
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}" + (f":{seconds:02d}" if seconds else "")


def notebook_late(
    spec: LateSpec,
    student: str,
    notebook: str,
    score: float,
    max_points: float,
    flagged: bool = False,
) -> LateFacts:
    """The late facts of one notebook scored ``score`` (as the table counts it) of ``max_points``:
    submitted_at, deadline (in UTC, with the offset it was given at beside it), seconds late,
    penalty and its ``basis``, or a problem. ``flagged``: the LMS marked the submission late (used
    only when no time is known)."""
    given = spec.deadline_for(student, notebook)
    if not spec.active or given is None:
        return LateFacts()
    deadline, offset = given.astimezone(dt.UTC), offset_text(given)
    submitted = spec.times.get(student, {}).get(notebook) or spec.times.get(student, {}).get("*")
    if submitted is None and flagged:
        least, most = (
            penalty_points(spec.policy, 1, score, max_points),
            penalty_points(spec.policy, FOREVER, score, max_points),
        )
        problem = None
        if most > least:  # how late decides how much: the least is only a lower bound
            unit = "hour" if spec.policy.unit_seconds == UNITS["hour"] else "day"
            problem = (
                f"marked late by the LMS, not how late: at least {least:g} point(s) (one "
                f"started {unit}), up to {most:g}; "
                "give the submission time in a timestamps CSV"
            )
        return LateFacts(
            least,
            deadline.isoformat(),
            basis="lms_flag",
            lms_late=True,
            problem=problem,
            deadline_offset=offset,
        )
    if submitted is None:
        problem = "no submission time is known: give it in a timestamps CSV"
        return LateFacts(
            0.0, deadline.isoformat(), basis="unknown", problem=problem, deadline_offset=offset
        )
    late = (submitted - deadline).total_seconds()
    # its own times and its arrival disagreed: the latest counts
    disputed = spec.disputed.get(student, {}).get(notebook)
    return LateFacts(
        penalty_points(spec.policy, late, score, max_points),
        deadline.isoformat(),
        submitted.astimezone(dt.UTC).isoformat(),
        max(0.0, late),
        "time",
        disputed=disputed,
        deadline_offset=offset,
    )


def submitted_at(spec: LateSpec, student: str, notebook: str) -> dt.datetime | None:
    """When ``student`` submitted ``notebook``, where a deadline applies to it (nbgrader's gradebook
    keeps the time: ``timestamp.txt`` for formgrader); no penalty is worked out."""
    if not spec.active or spec.deadline_for(student, notebook) is None:
        return None
    return spec.times.get(student, {}).get(notebook) or spec.times.get(student, {}).get("*")


# what an LMS export does with a lateness nobody knows
UNKNOWN_CHOICES = ("refuse", "least-penalty")


@dataclass
class Settled:
    """One student's late penalty: each submitted notebook's facts, the penalty taken (the least
    one where lateness is unknown) and the notebooks whose lateness is unknown."""

    facts: dict[str, LateFacts]
    penalty: float
    unknown: list[str]

    def shown(self, accept_unknown: bool = False) -> float | str:
        """The table's ``late_penalty``: ``unknown`` while a notebook's lateness is, unless the
        instructor accepted the least penalty; else the penalty taken (the table's ``final_total``
        is its total less it)."""
        return "unknown" if self.unknown and not accept_unknown else self.penalty

    def basis(self, accept_unknown: bool = False) -> str:
        """How each notebook's penalty was decided, for the table: ``notebook=time`` (a submission
        time), ``=lms_flag`` (the LMS's late mark, no time), ``=unknown`` (neither); ``(least)``
        when the instructor accepted the least penalty for one whose lateness is unknown."""
        parts = []
        for notebook, facts in sorted(self.facts.items()):
            if facts.basis is not None:
                accepted = "(least)" if accept_unknown and notebook in self.unknown else ""
                parts.append(f"{notebook}={facts.basis}{accepted}")
        return " ".join(parts)


def settle(
    spec: LateSpec,
    student: str,
    scores: dict[str, tuple[float, float]],
    flagged: Iterable[str] = (),
) -> Settled:
    """The one rule from scores to a penalty: ``scores`` maps each notebook the student submitted to
    (its score as the table counts it: the judge's and a person's where present, max points);
    ``flagged``: the notebooks the LMS marked late. Every writer (grades.csv, the export, the
    gradebook, the feedback page, the class report) takes its penalty from here."""
    flagged = set(flagged)
    facts = {
        nb: notebook_late(spec, student, nb, score, top, nb in flagged)
        for nb, (score, top) in scores.items()
    }
    penalty = round(sum(f.penalty for f in facts.values()), 6)
    return Settled(facts, penalty, sorted(nb for nb, f in facts.items() if f.problem is not None))


LATE_LINE = (
    "Submitted {hours} hour(s) after the deadline ({deadline}): late penalty {points} "
    "point(s) ({policy})."
)
DEADLINE_SHOWN = "{time}, {zone}"  # the late line's deadline: 2026-12-20 23:59, UTC+08:00
# a submission whose own times (timestamp.txt, its folder's name) and its arrival on the exchange
# disagreed (term/exchange.py)
DISPUTED_LINE = (
    "This submission gives {claimed} as its time, but it reached the exchange at "
    "{arrived}: the latest, {used}, counts."
)
DISPUTED_CLAIMS_LINE = (
    "The times this submission gives disagree ({claimed} and {used}): the later counts."
)


def _said_policy(policy: Policy, words: dict[str, str]) -> str:
    """``policy.describe()`` in the language of ``words`` (editions.POLICY_TEXTS are its keys)."""
    if policy.kind != "deduct":
        english = policy.describe()
        return words.get(english, english)
    unit = "day" if policy.unit_seconds == UNITS["day"] else "hour"
    english = f"{{percent}}% of the maximum per {unit} late" + (
        ", not below {floor}%" if policy.floor else ""
    )
    return words.get(english, english).format(
        percent=f"{policy.percent:g}", floor=f"{policy.floor:g}"
    )


def late_text(late: LateFacts | None, policy: Policy, words: dict[str, str] | None = None) -> str:
    """The late line for a feedback page, in the page's language, after the sentence saying which
    time counted when the submission's times disagreed (empty when on time, agreed, or without a
    deadline)."""
    late = late or LateFacts()
    seconds = late.late_seconds or 0
    words = words or {}
    said = _disputed_text(late.disputed, words)
    if not seconds:
        return said
    values = {
        "hours": f"{seconds / 3600:.2f}",
        "deadline": deadline_shown(late, words),
        "points": f"{late.penalty:g}",
        "policy": _said_policy(policy, words),
    }
    return " ".join(t for t in (said, words.get(LATE_LINE, LATE_LINE).format(**values)) if t)


def deadline_shown(late: LateFacts, words: dict[str, str] | None = None) -> str:
    """The deadline for people, as the instructor gave it: its date and time at the UTC offset it
    was written with (``late.deadline_offset``; the time's own without one), then that offset, in
    the language of ``words``: ``2026-12-20 23:59, UTC+08:00`` (seconds only when there are any; a
    deadline given in UTC says ``UTC``). The deadline as stored when it cannot be read."""
    try:
        when = dt.datetime.fromisoformat(str(late.deadline))
        if late.deadline_offset:
            when = when.astimezone(
                dt.datetime.fromisoformat("2000-01-01T00:00:00" + late.deadline_offset).tzinfo
            )
    except (ValueError, OverflowError):
        return str(late.deadline)
    if when.tzinfo is None:
        return str(late.deadline)
    offset = offset_text(when)
    zone = "UTC" if offset == "+00:00" else f"UTC{offset}"
    shown = when.strftime("%Y-%m-%d %H:%M" + (":%S" if when.second else ""))
    return (words or {}).get(DEADLINE_SHOWN, DEADLINE_SHOWN).format(time=shown, zone=zone)


def _disputed_text(disputed: Disputed | None, words: dict[str, str]) -> str:
    def said(iso: str | None) -> str:
        try:
            return (
                dt.datetime.fromisoformat(str(iso))
                .astimezone(dt.UTC)
                .strftime("%Y-%m-%d %H:%M:%S UTC")
            )
        except ValueError:
            return "?"

    if disputed is None or not disputed.used or not disputed.claimed:
        return ""
    line = DISPUTED_LINE if disputed.arrived else DISPUTED_CLAIMS_LINE
    return words.get(line, line).format(
        claimed=said(disputed.claimed), arrived=said(disputed.arrived), used=said(disputed.used)
    )
