"""The grader's model: the grading limits and options, what a notebook's status means, and the
score-table marks. Standard library only, so that every layer can use it (the sandbox's launcher too).
Every option that can change a grade is hashed into the fingerprint that decides whether a saved result
may be reused (grading._fingerprint, tested by test_every_grading_limit_is_in_the_fingerprint)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

MiB = 1 << 20
GiB = 1 << 30

# matched whole (fullmatch): "$" alone would let a trailing newline through, and nbgrader reads an id as a glob
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
HIDDEN_NOTE_TEXT = "Hidden tests ran outside this notebook at grading: the ideas they check, and your result, are below."
HIDDEN_NOTE = "# " + HIDDEN_NOTE_TEXT


def with_hidden_note(cell) -> str:
    """A cell's source as the feedback page shows it: a graded cell that is not an answer (a visible
    check) ends with HIDDEN_NOTE, once; any other cell's source is unchanged."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    source = cell.get("source", "")
    if isinstance(meta, dict) and meta.get("grade") and not meta.get("solution") and HIDDEN_NOTE not in source:
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
    db_url: str | None = None  # the course gradebook (nbgrader's db_url); None: OUT/gradebook.db, or the one used before
    max_notebook_bytes: int = MAX_NOTEBOOK_BYTES  # a larger submitted file is refused unread (invalid_notebook)
    scheduler: str | None = None  # a Dask scheduler's address: grade there (cluster.py), one task per student
    tls_ca_file: str | None = None  # TLS to the scheduler: CA, this client's certificate and key (PEM files)
    tls_cert: str | None = None
    tls_key: str | None = None


PENDING = "pending"  # grades.csv: an answer that waits for a person in formgrader
REVIEW = "review"  # grades.csv: a person's score on an answer that changed since: not counted until they look again


def new_record(
    student: str, notebook: str, status: str = "graded", detail: str = "", file: str | None = None, fingerprint: str | None = None
) -> dict:
    """A notebook's record: graded unless ``status`` (a key of STATUS_TEXT) says otherwise, with the
    submitted file's name and fingerprint when it was read. A worker's outcome fills in scores,
    status, detail, timings and ideas (grading.finish_record); the record is saved as signed JSON
    (record.store.save_record) and read back by reuse, export and report. Every record is made here."""
    record: dict = {"student_id": student, "notebook": notebook}
    if file is not None:
        record.update(file=file, fingerprint=fingerprint)
    record.update(scores={}, status=status, detail=detail)
    return record
