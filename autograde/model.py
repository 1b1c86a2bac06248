"""The grader's model: the grading limits and options, what a notebook's status means, the
score-table marks, and the typed records every layer passes on: a notebook's ``Record`` and a
worker's ``JobOutcome`` (the one parser of result.json). Standard library only, so that every layer
can use it (the sandbox's launcher too). Every option that can change a grade is hashed into the
fingerprint that decides whether a saved result may be reused (ledger.store.fingerprint, tested by
test_every_grading_limit_is_in_the_fingerprint)."""

from __future__ import annotations

import datetime
import math
import os
import re
from dataclasses import MISSING, dataclass, field, fields, is_dataclass, replace

from .errors import GraderError

# a field's metadata: left out of its type's JSON while it holds the field's default; written as {}
# while it does
OMIT_DEFAULT = {"omit": "default"}
EMPTY_DEFAULT = {"omit": "empty"}


def omitted(default=None, factory=None):
    """A field left out of its type's JSON (``JsonRecord.to_json``) while it holds ``default`` (or
    what ``factory`` makes, for a mutable default)."""
    if factory is not None:
        return field(default_factory=factory, metadata=OMIT_DEFAULT)
    return field(default=default, metadata=OMIT_DEFAULT)


def empty_at_default(default=None, factory=None):
    """A field written in its type's JSON as ``{}`` while it holds ``default`` (or what ``factory``
    makes)."""
    if factory is not None:
        return field(default_factory=factory, metadata=EMPTY_DEFAULT)
    return field(default=default, metadata=EMPTY_DEFAULT)


def flattened():
    """A mapping written key by key at its record's top level, after the fields: the keys that this
    version does not know, kept as they were read; a figure's size under each mime type."""
    return field(default_factory=dict, metadata={"flat": True})


def json_named(name: str):
    """A field written in its type's JSON (``JsonRecord.to_json``) under ``name``, first of its
    fields."""
    return field(metadata={"json": name})


def _default(f):
    """A field's default value (MISSING: it has none)."""
    return f.default_factory() if f.default_factory is not MISSING else f.default


def _json_value(value):
    """A field's value as JSON: a dataclass by its own ``to_json`` (by its fields, as ``JsonRecord``
    writes them, when it has none), a time in ISO 8601, a tuple as a list, mappings and lists item
    by item, anything else as it is."""
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if is_dataclass(value) and not isinstance(value, type):
        return value.to_json() if hasattr(value, "to_json") else JsonRecord.to_json(value)
    if isinstance(value, (tuple, list)):
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_value(item) for key, item in value.items()}
    return value


class JsonRecord:
    """The JSON codec of a frozen dataclass whose JSON is its fields: each field in order under its
    name, a nested record by its own ``to_json``, a tuple as a list, a field made by ``omitted``
    left out while it holds its default, one made by ``empty_at_default`` written as ``{}`` while it
    does, one made by ``json_named`` first under its JSON name, the keys of one made by
    ``flattened`` last. A type whose JSON is that and no more takes its ``to_json`` from here."""

    def to_json(self) -> dict:
        data, flat = {}, {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.metadata.get("flat"):
                flat.update({key: _json_value(item) for key, item in value.items()})
            elif "omit" not in f.metadata or _default(f) is MISSING or value != _default(f):
                data[f.name] = _json_value(value)
            elif f.metadata["omit"] == "empty":
                data[f.name] = {}
        named = {f.metadata["json"]: data.pop(f.name) for f in fields(self) if "json" in f.metadata}
        return {**named, **data, **flat}


MiB = 1 << 20
GiB = 1 << 30

# matched whole (fullmatch): "$" alone would let a trailing newline through, and nbgrader reads an
# id as a glob
STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,127}")
STATUS_TEXT = {
    "graded": "graded",
    "missing": "notebook missing from the submission",
    "invalid_notebook": "not a readable notebook",
    "timeout": "stopped: a cell ignored the interrupt, or the notebook ran past its time limit",
    "kernel_died": "the kernel died (os._exit or a crash)",
    "out_of_memory": "stopped: the notebook used more memory than the grading limit",
    "error": "nbgrader could not grade it",
    "invalid_student_id": "the folder name cannot be a student id",
    "invalid_submission": "the student's folder could not be read",
    "output_limit": "stopped: the notebook sent more output than the grader accepts",
}


# the line a visible check cell ends with on a feedback page (its hidden tests ran in the judge): a
# comment, whose text a page in another language shows translated (a feedback catalog key)
HIDDEN_NOTE_TEXT = (
    "Hidden tests ran outside this notebook at grading: the ideas they check, and "
    "your result, are below."
)
HIDDEN_NOTE = "# " + HIDDEN_NOTE_TEXT


def with_hidden_note(cell) -> str:
    """A cell's source as the feedback page shows it: a graded cell that is not an answer (a visible
    check) ends with HIDDEN_NOTE, once; any other cell's source is unchanged."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    source = cell.get("source", "")
    if (
        isinstance(meta, dict)
        and meta.get("grade")
        and not meta.get("solution")
        and HIDDEN_NOTE not in source
    ):
        return source.rstrip() + "\n" + HIDDEN_NOTE
    return source


MAX_NOTEBOOK_BYTES = 20 * MiB  # default: a course notebook with outputs is well under 1 MB


@dataclass(frozen=True)
class Options:
    workers: int = max(1, os.cpu_count() or 1)
    cell_timeout: int = 30
    notebook_timeout: int = 300
    progress: bool = True
    sandbox: bool = True
    memory_limit: int = 4 * GiB
    process_limit: int = 256
    # the course gradebook (nbgrader's db_url); None: OUT/gradebook.db, or the one used before
    db_url: str | None = None
    # a larger submitted file is refused unread (invalid_notebook)
    max_notebook_bytes: int = MAX_NOTEBOOK_BYTES
    # a Dask scheduler's address: grade there (cluster.py), one task per student
    scheduler: str | None = None
    # TLS to the scheduler: CA, this client's certificate and key (PEM files)
    tls_ca_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None


PENDING = "pending"  # grades.csv: an answer that waits for a person in formgrader
# grades.csv: a person's score on an answer that changed since: not counted until they look again
REVIEW = "review"


# ---------------------------------------------------------------- the records

# a record's keys in the order its JSON has always had them (log.jsonl and OUT/.state keep this
# order)
RECORD_KEYS = (
    "student_id",
    "notebook",
    "file",
    "fingerprint",
    "scores",
    "status",
    "detail",
    "submission",
    "edition",
    "matching_notes",
    "changed_answers",
    "manual",
    "timings",
    "ideas",
    "redacted_lines",
    "seconds",
    "signature",
    "cached",
    "late",
)
NOT_SUBMITTED = ("missing", "invalid_student_id")  # statuses of a notebook nobody sent: never late


@dataclass(frozen=True)
class Disputed(JsonRecord):
    """A submission's times that disagreed (its own against its arrival): the earliest it gave
    itself (None: none), when it arrived (None: not known) and the time counted, the latest (ISO
    times)."""

    claimed: str | None
    arrived: str | None
    used: str

    @classmethod
    def from_json(cls, data) -> Disputed | None:
        """The times as the late spec and the records keep them (None when they say nothing to
        show)."""
        if not isinstance(data, dict) or not data.get("used"):
            return None
        claimed, arrived = (data.get(key) for key in ("claimed", "arrived"))
        return cls(
            None if claimed is None else str(claimed),
            None if arrived is None else str(arrived),
            str(data["used"]),
        )


@dataclass(frozen=True)
class LateFacts(JsonRecord):
    """One notebook's lateness as the late rule settled it (``ledger.late.notebook_late``): its
    penalty, the deadline that applied (in UTC, the UTC offset it was given at beside it), when it
    was submitted and how late, how that was known (``basis``: ``time``, ``lms_flag``, ``unknown``),
    the LMS's late mark, a problem (lateness unknown), and what its times said when they disagreed.
    A record's ``late``; its JSON holds the facts that apply, in this order."""

    penalty: float = 0.0
    deadline: str | None = omitted()
    submitted_at: str | None = omitted()
    late_seconds: float | None = omitted()
    basis: str | None = omitted()
    lms_late: bool = omitted(False)
    problem: str | None = omitted()
    disputed: Disputed | None = omitted()
    # the UTC offset the deadline was given at ("+08:00"): the late line shows it there
    deadline_offset: str | None = omitted()

    @classmethod
    def from_json(cls, data) -> LateFacts | None:
        """The facts as a log.jsonl line holds them (None when they are not an object)."""
        if not isinstance(data, dict):
            return None
        known = {key: data[key] for key in cls.__dataclass_fields__ if key in data}
        if "disputed" in known:
            known["disputed"] = Disputed.from_json(known["disputed"])
        return cls(**known)


@dataclass(frozen=True)
class Record:
    """One notebook's graded record for one student: what grades.csv, log.jsonl, the gradebook, the
    feedback page and reuse read. Made by :func:`new_record`, filled in by a job's outcome
    (grading.finish_record), signed and saved as JSON (ledger.store); ``late`` is worked out on
    every run (ledger.late). A field that is None (``cached``: False) is absent from its JSON, as
    it always was; ``extra`` keeps the keys of a record this version does not know, so a record
    read back is written back as it was."""

    student_id: str
    notebook: str
    status: str = "graded"
    detail: str = ""
    scores: dict = field(default_factory=dict)  # grade id -> the judge's score
    file: str | None = None  # the submitted file's name (None: nothing was read)
    fingerprint: str | None = None  # what decides reuse (ledger.store.fingerprint)
    # the digest of the student's whole submission (the hidden inputs' salt)
    submission: str | None = None
    edition: str | None = None  # the language of the edition it was written in
    # cells repaired, a notebook found under another name
    matching_notes: tuple[str, ...] | None = None
    # answers changed since the copy graded last (None: no copy)
    changed_answers: tuple[str, ...] | None = None
    # grade id -> the answer a person grades (None: written, 0: left as released)
    manual: dict | None = None
    timings: dict | None = None
    ideas: dict | None = None  # grade id -> each idea's id, status, earned, points
    redacted_lines: int | None = None
    seconds: float | None = None
    signature: str | None = None
    cached: bool = False  # reused from an earlier run (never signed, never saved)
    late: LateFacts | None = None  # the late rule's facts, settled on every run
    extra: dict = field(default_factory=dict)

    @property
    def graded(self) -> bool:
        return self.status == "graded"

    @property
    def submitted(self) -> bool:
        """Whether anything was sent for this notebook (a missing one is never late)."""
        return self.status not in NOT_SUBMITTED

    def total(self) -> float:
        """The judge's points (0 unless graded)."""
        return sum(float(v) for v in self.scores.values()) if self.graded else 0.0

    def but(self, **changes) -> Record:
        """This record with ``changes``."""
        return replace(self, **changes)

    def to_json(self) -> dict:
        """The record as saved and logged: its keys in RECORD_KEYS order, absent ones left out."""
        data: dict = {}
        for key in RECORD_KEYS:
            value = getattr(self, key)
            if key in ("file", "fingerprint") and self.file is None and self.fingerprint is None:
                continue
            if isinstance(value, LateFacts):
                value = value.to_json()
            if key in ("student_id", "notebook", "scores", "status", "detail") or (
                value is not None and value is not False
            ):
                data[key] = list(value) if isinstance(value, tuple) else value
        return {**data, **self.extra}

    @classmethod
    def from_json(cls, data: dict) -> Record:
        """A record from its JSON, as any version of the grader wrote it (a key it lacks takes its
        default; a key this version does not know is kept in ``extra``). Raises ValueError when it
        is not a record at all."""
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("student_id"), str)
            or not isinstance(data.get("notebook"), str)
        ):
            raise ValueError("not a grading record (no student_id and notebook)")
        known = {key: data[key] for key in RECORD_KEYS if key in data}
        for key in ("matching_notes", "changed_answers"):
            if isinstance(known.get(key), list):
                known[key] = tuple(known[key])
        known["scores"] = known.get("scores") if isinstance(known.get("scores"), dict) else {}
        known["status"] = known.get("status") if isinstance(known.get("status"), str) else "error"
        known["detail"] = known.get("detail") if isinstance(known.get("detail"), str) else ""
        known["cached"] = bool(known.get("cached", False))
        if "late" in known:
            known["late"] = LateFacts.from_json(known["late"])
        return cls(**known, extra={k: v for k, v in data.items() if k not in RECORD_KEYS})


def new_record(
    student: str,
    notebook: str,
    status: str = "graded",
    detail: str = "",
    file: str | None = None,
    fingerprint: str | None = None,
) -> Record:
    """A notebook's record: graded unless ``status`` (a key of STATUS_TEXT) says otherwise, with the
    submitted file's name and fingerprint when it was read. A worker's outcome fills in scores,
    status, detail, timings and ideas (grading.finish_record); the record is saved as signed JSON
    (ledger.store.save_record) and read back by reuse, export and report. Every record is made
    here."""
    return Record(student, notebook, status, detail, file=file, fingerprint=fingerprint)


# ---------------------------------------------------------------- a job's outcome


class MalformedResult(GraderError, ValueError):
    """A job's result.json (or a cluster worker's answer) is not what a grading worker writes."""


def _number(value, low: float = -math.inf, high: float = math.inf) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low - 1e-9 <= value <= high + 1e-9
    )


@dataclass(frozen=True)
class StepLog(JsonRecord):
    """What one of nbgrader's steps (autograde, feedback) said, as its API returns it: whether it
    succeeded, the traceback of an error and its captured log (None: not said; ``StepLog()``: the
    step did not run)."""

    success: bool | None = omitted()
    error: str | None = omitted()
    log: str | None = omitted()

    def text(self) -> str:
        """The step's log, then its error."""
        return (self.log or "") + (self.error or "")

    def cut(self, limit: int) -> StepLog:
        """The step with its log and error cut to their last ``limit`` characters."""
        return replace(
            self,
            error=None if self.error is None else self.error[-limit:],
            log=None if self.log is None else self.log[-limit:],
        )

    @classmethod
    def from_json(cls, data: dict) -> StepLog:
        """A step as nbgrader's API returns it (or result.json keeps it: log and error checked by
        ``JobOutcome``)."""
        success = data.get("success")
        return cls(
            success if isinstance(success, bool) else None, data.get("error"), data.get("log")
        )


# ---------------------------------------------------------------- the judge's results


@dataclass(frozen=True)
class IdeaResult(JsonRecord):
    """One graded idea as the judge decided it (``judging.judge.score_ideas``): its id, the text the
    learner reads, its points and what it earned, its status (passed, failed, error, not_started,
    skipped), the message in English and, as ``said``, the same message as catalog keys and values
    (``ideas.Said.to_json``) for a page in another language (None: a message of no catalog's, or
    none)."""

    id: str
    text: str
    points: float
    earned: float = 0.0
    status: str = "passed"
    message: str = ""
    said: dict | None = omitted()

    def but(self, **changes) -> IdeaResult:
        return replace(self, **changes)

    @classmethod
    def from_json(cls, data: dict) -> IdeaResult:
        """An idea as result.json holds it (its id, status, earned and points checked by
        ``JobOutcome.from_json``)."""
        said = data.get("said")
        return cls(
            data["id"],
            str(data.get("text", "")),
            data["points"],
            data["earned"],
            data["status"],
            str(data.get("message", "")),
            said if isinstance(said, dict) else None,
        )


@dataclass(frozen=True)
class CellResult(JsonRecord):
    """The judge's result for one grade cell: its score (0 while the TODO is unfinished), its
    points, its status (graded, not_started, or error when the code could not be loaded) and each
    idea's result."""

    score: float
    points: float
    status: str
    ideas: tuple[IdeaResult, ...] = ()

    @classmethod
    def from_json(cls, data: dict) -> CellResult:
        """A cell's result as result.json holds it (its ideas checked by
        ``JobOutcome.from_json``)."""
        score, points = (
            data.get(key) if _number(data.get(key)) else 0.0 for key in ("score", "points")
        )
        return cls(
            score,
            points,
            str(data.get("status", "")),
            tuple(IdeaResult.from_json(i) for i in data["ideas"]),
        )


@dataclass(frozen=True)
class LoadError(JsonRecord):
    """A cell of the learner's code that failed as the judge's runner loaded it: its index and the
    error."""

    cell: int
    error: str

    @classmethod
    def from_json(cls, data) -> LoadError:
        data = data if isinstance(data, dict) else {}
        cell = data.get("cell")
        return cls(
            cell if isinstance(cell, int) and not isinstance(cell, bool) else -1,
            str(data.get("error", "")),
        )


@dataclass(frozen=True)
class JobOutcome:
    """What a grading worker (run/job.py) says of one notebook in its result.json: nbgrader's
    autograde and feedback steps (their logs), the judge's results and scores, the answers a person
    grades, timings, whether memory ran out, and, where it caught it, why the notebook stopped
    (``status`` and ``detail``, the JSON's ``outcome``). ``scores`` is None when the judge never
    scored it. The grading process writes result.json through :meth:`to_json`; :meth:`from_json` is
    its one parser: the local executor and the cluster's both read it through it."""

    autograde: StepLog = field(default_factory=StepLog)
    feedback: StepLog = field(default_factory=StepLog)
    timings: dict = field(default_factory=dict)
    out_of_memory: bool = False
    runner_out_of_memory: bool = False
    judge: dict[str, CellResult] = field(default_factory=dict)  # grade id -> the judge's result
    load_errors: tuple[LoadError, ...] = ()
    scores: dict | None = None
    manual: dict = field(default_factory=dict)
    status: str | None = None  # why it stopped, as the worker caught it (a key of STATUS_TEXT)
    detail: str | None = None

    def log(self) -> str:
        """nbgrader's autograde log and error, as the worker kept them."""
        return self.autograde.text()

    def feedback_log(self) -> str:
        return self.feedback.text()

    def ideas(self) -> dict[str, list[dict]]:
        """Each graded cell's ideas as a record keeps them: id, status, earned, points."""
        return {
            gid: [
                {"id": i.id, "status": i.status, "earned": i.earned, "points": i.points}
                for i in result.ideas
            ]
            for gid, result in self.judge.items()
        }

    def cut(self, limit: int) -> JobOutcome:
        """This outcome with each of nbgrader's logs cut to its last ``limit`` characters."""
        return replace(self, autograde=self.autograde.cut(limit), feedback=self.feedback.cut(limit))

    def to_json(self) -> dict:
        """result.json as the grading process writes it (run/job.py), read back by
        :meth:`from_json`."""
        data = {"autograde": self.autograde.to_json(), "timings": self.timings}
        if self.feedback != StepLog():
            data["feedback"] = self.feedback.to_json()
        if self.status is not None:
            data["outcome"] = {"status": self.status, "detail": self.detail or ""}
        for key in ("out_of_memory", "runner_out_of_memory"):
            if getattr(self, key):
                data[key] = True
        if self.scores is not None:
            judge = {gid: result.to_json() for gid, result in self.judge.items()}
            data.update(
                judge=judge,
                load_errors=[e.to_json() for e in self.load_errors],
                scores=self.scores,
                manual=self.manual,
            )
        return data

    @classmethod
    def from_json(
        cls, data, points: dict[str, float] | None = None, manual_ids: set[str] | None = None
    ) -> JobOutcome:
        """Parse a result.json (``{}``: none was written). Raises MalformedResult unless it has the
        types that job.py writes; with ``points`` (grade id -> points) and ``manual_ids``, also the
        ranges: scores only for the course's automatic cells, within their points (a cluster
        worker's answer is checked so)."""

        _need(isinstance(data, dict), "not an object")
        parts = {key: data.get(key, {}) for key in ("autograde", "feedback")}
        for key, part in parts.items():
            _need(
                isinstance(part, dict)
                and all(isinstance(part.get(k, ""), str) for k in ("log", "error")),
                f"{key} malformed",
            )
        for key in ("out_of_memory", "runner_out_of_memory"):
            _need(isinstance(data.get(key, False), bool), f"{key} not a boolean")
        scores, manual = data.get("scores"), data.get("manual", {})
        _check_scores(scores, manual, points, manual_ids)
        timings = data.get("timings", {})
        _need(
            isinstance(timings, dict)
            and all(isinstance(k, str) and _number(v) for k, v in timings.items()),
            "timings",
        )
        judge = data.get("judge", {})
        _check_judge(judge, points)
        _need(isinstance(data.get("load_errors", []), list), "load_errors not a list")
        said = data.get("outcome", {}) or {}
        _need(
            isinstance(said, dict)
            and all(isinstance(said.get(k, ""), str) for k in ("status", "detail")),
            "outcome malformed",
        )
        return cls(
            autograde=StepLog.from_json(parts["autograde"]),
            feedback=StepLog.from_json(parts["feedback"]),
            timings=timings,
            out_of_memory=data.get("out_of_memory", False),
            runner_out_of_memory=data.get("runner_out_of_memory", False),
            judge={gid: CellResult.from_json(result) for gid, result in judge.items()},
            load_errors=tuple(LoadError.from_json(e) for e in data.get("load_errors", [])),
            scores=scores,
            manual=manual,
            status=said.get("status") if said.get("status") in STATUS_TEXT else None,
            detail=said.get("detail") or None,
        )


def _need(ok: bool, what: str) -> None:
    """Raise MalformedResult, naming ``what``, unless ``ok``."""
    if not ok:
        raise MalformedResult(f"result.json: {what}")


def _check_scores(
    scores, manual, points: dict[str, float] | None, manual_ids: set[str] | None
) -> None:
    """The judge's and a person's scores are objects; with ``points``, only of the course's cells
    (the judge's of its automatic ones, a person's of its manual ones) and within their points."""
    _need(scores is None or isinstance(scores, dict), "scores not an object")
    _need(isinstance(manual, dict), "manual not an object")
    if points is None:
        return
    manual_ids = manual_ids or set()
    for gid, score in (scores or {}).items():
        _need(
            gid in points and gid not in manual_ids and _number(score, 0, points[gid]),
            f"score {gid!r}={score!r}",
        )
    for gid, score in manual.items():
        _need(
            gid in manual_ids and (score is None or _number(score, 0, points[gid])),
            f"manual score {gid!r}={score!r}",
        )


def _check_judge(judge, points: dict[str, float] | None) -> None:
    """The judge's results are an object of cells (of the course's, with ``points``), each with a
    list of ideas that have an id, a status, and numbers earned and points."""
    _need(isinstance(judge, dict), "judge not an object")
    for gid, result in judge.items():
        _need(
            (points is None or gid in points)
            and isinstance(result, dict)
            and isinstance(result.get("ideas"), list),
            f"judge {gid!r}",
        )
        for idea in result["ideas"]:
            _need(
                isinstance(idea, dict)
                and isinstance(idea.get("id"), str)
                and isinstance(idea.get("status"), str)
                and _number(idea.get("earned"))
                and _number(idea.get("points")),
                f"an idea of {gid!r}",
            )
