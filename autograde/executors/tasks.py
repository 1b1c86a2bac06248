"""What goes to a Dask worker and what comes back, typed: a student's ``Task`` (the notebooks' bytes
and the grading limits, never the key that signs records nor the database URL) and the worker's
``Answer`` (per notebook, whether it ran, how, and the files its job left). The task is written by
``make_task`` and read by the worker's ``grade_task``; the answer travels as plain data, written by
``Answer.to_wire`` and read, its shape checked (a worker is not trusted blindly), by
``Answer.read``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from tools.i18n import EDITIONS

from ..model import MalformedResult

# what a notebook that never ran may come back as
STATUSES_BEFORE_RUN = {"invalid_notebook", "error"}
# a job's files that travel back (ledger.layout.JobFolder.returned)
RETURNED = ("result", "autograded", "submitted", "feedback")


@dataclass(frozen=True)
class TaskSettings:
    """The grading limits a worker needs; nothing else of the instructor's options leaves this
    machine."""

    cell_timeout: int
    notebook_timeout: int
    sandbox: bool
    memory_limit: int
    process_limit: int
    max_notebook_bytes: int

    @classmethod
    def of(cls, options) -> TaskSettings:
        return cls(**{f.name: getattr(options, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class Task:
    """One student's grading on a worker: the course version it must match, the limits, each
    notebook's bytes, and the digest of the student's whole submission (the salt of its hidden
    inputs)."""

    student: str
    digest: str
    settings: TaskSettings
    notebooks: tuple[tuple[str, bytes], ...]
    submission: str = ""


def _number(value, low: float = -math.inf, high: float = math.inf) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low - 1e-9 <= value <= high + 1e-9
    )


@dataclass
class NotebookAnswer:
    """A notebook of a worker's answer: whether it ran; if not, its status and detail; if it did,
    whether it was killed, its log, seconds, edition and its job's files (``RETURNED``, each bytes
    or None); the notes on cells repaired."""

    notebook: str
    ran: bool
    killed: bool = False
    log: str = ""
    seconds: float = 0.0
    matching_notes: tuple[str, ...] = ()
    edition: str = "en"
    files: dict[str, bytes | None] = field(default_factory=dict)
    status: str | None = None
    detail: str | None = None

    def to_wire(self) -> dict:
        if not self.ran:
            return {
                "notebook": self.notebook,
                "ran": False,
                "status": self.status,
                "detail": self.detail,
                "matching_notes": list(self.matching_notes),
            }
        return {
            "notebook": self.notebook,
            "ran": True,
            "killed": self.killed,
            "log": self.log,
            "seconds": self.seconds,
            "matching_notes": list(self.matching_notes),
            "edition": self.edition,
            "files": self.files,
        }

    @classmethod
    def read(cls, item, need, file_limit: int) -> NotebookAnswer:
        need(isinstance(item, dict), "no list of notebooks")
        notes = item.get("matching_notes", [])
        need(isinstance(notes, list) and all(isinstance(n, str) for n in notes), "matching notes")
        if item.get("ran") is False:
            need(
                item.get("status") in STATUSES_BEFORE_RUN and isinstance(item.get("detail"), str),
                "status",
            )
            return cls(
                str(item.get("notebook")),
                False,
                matching_notes=tuple(notes),
                status=item["status"],
                detail=item["detail"],
            )
        need(
            item.get("ran") is True
            and isinstance(item.get("killed"), bool)
            and isinstance(item.get("log"), str)
            and _number(item.get("seconds"), 0),
            "run fields",
        )
        need(item.get("edition", "en") in EDITIONS, "edition")
        files = item.get("files")
        need(isinstance(files, dict) and set(files) == set(RETURNED), "files")
        for name, data in files.items():
            need(
                data is None or (isinstance(data, bytes) and len(data) <= file_limit),
                f"file {name}",
            )
        return cls(
            str(item["notebook"]),
            True,
            item["killed"],
            item["log"],
            float(item["seconds"]),
            tuple(notes),
            item.get("edition", "en"),
            files,
        )


@dataclass
class Answer:
    """A worker's answer for one student: who, which worker, and each notebook's."""

    student: str
    worker: str
    notebooks: list[NotebookAnswer] = field(default_factory=list)

    def to_wire(self) -> dict:
        return {
            "student": self.student,
            "worker": self.worker,
            "notebooks": [item.to_wire() for item in self.notebooks],
        }

    @classmethod
    def read(cls, result, student: str, names: set[str], file_limit: int) -> Answer:
        """A worker's answer, once its shape is what ``to_wire`` writes (else MalformedResult): for
        this student, one entry per notebook sent, each file within ``file_limit`` bytes."""

        def need(ok: bool, what: str) -> None:
            if not ok:
                raise MalformedResult(f"the worker's answer for {student}: {what}")

        need(
            isinstance(result, dict) and result.get("student") == student,
            "not an answer for this student",
        )
        items = result.get("notebooks")
        need(
            isinstance(items, list) and all(isinstance(i, dict) for i in items),
            "no list of notebooks",
        )
        need(
            sorted(str(i.get("notebook")) for i in items) == sorted(names),
            "not one entry per notebook sent",
        )
        return cls(
            student,
            str(result.get("worker", "")),
            [NotebookAnswer.read(item, need, file_limit) for item in items],
        )
