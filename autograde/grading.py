"""Grade a batch of submissions through nbgrader, one isolated course folder per
(student, notebook).

Why one folder per notebook: nbgrader deletes a student's whole autograded folder when a
kernel dies, and a kernel that ignores SIGINT stalls the run. Here each notebook runs in
its own nbgrader course folder with its own copy of the gradebook, under a wall-clock
limit, so one broken notebook costs only its own points. Results are saved per notebook
as they finish (signed, so a record is reused only when it verifies), an interrupted batch
resumes where it stopped, and a rerun is idempotent.

Submissions are untrusted code: learner kernels and the judge's runner run in the sandbox
(sandbox.py), hidden tests run in the trusted judge (judge.py), and every feedback page is
scanned for hidden-test and reference-answer lines before it is written.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import hmac
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import nbformat

from tools.i18n import EDITIONS, notebook_language
from tools.project_runtime import write_json_atomic

from .course import Course, Exercise, UnusableInput, exercises, kill_live_runs, kill_tree, reap  # noqa: F401 (Exercise: for importers)
from .judging.ideas import course_tests
from .matching import check_nodes, grade_ids, match_notebooks
from .model import MAX_NOTEBOOK_BYTES, PENDING, REVIEW, STATUS_TEXT, STUDENT_ID, GiB, Options, new_record  # noqa: F401 (the batch's names)
from .publish.editions import feedback_translations
from .publish.leaks import secret_lines
from .publish.release import generate
from .record import gradebook
from .record.exporters import add_csp, add_wrapping, localize_labels
from .record.late import LateSpec, late_text, lms_flags, load_spec, notebook_late, save_spec
from .record.tables import cell_value, late_columns, score_row, write_csv
from .run.job import EDITION_FILE, SUBMISSION_DIGEST
from .run.launch import prestart as start_worker_server
from .run.launch import start_worker
from .run.preprocessors import NeutraliseForDisplay

# the grader's own files beside the students' folders start with a dot, which no student id can
SETTINGS = ".settings.json"  # in OUT/.work: what each grading process reads

# a grading process's address space, at least (its soft limit, and above the kernel's; the kernel and
# the runner have their own, in the sandbox): it holds nbgrader, one notebook and its capped outputs
WORKER_MEMORY = 3 * GiB


class NotebookTooLarge(ValueError):
    """A submitted file over the size limit: refused before the trusted parent parses it."""


def check_size(path: Path, limit: int) -> None:
    """Raise NotebookTooLarge when ``path`` is over ``limit`` bytes (stat only, nothing is read)."""
    size = path.stat().st_size
    if size > limit:
        raise NotebookTooLarge(
            f"the file is {size / 2**20:.1f} MB, over the {limit / 2**20:g} MB limit for a submitted "
            "notebook (clear its outputs, or raise --max-notebook-mb)"
        )


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def grading_master(course: Course, out: Path) -> Path:
    """The course folder generated from the sources without their hidden tests (its
    gradebook restores the public test cells), plus ``judge.json``: the hidden tests,
    reference answers and given cells the trusted judge needs. Rebuilt when the sources
    or the config changed, and whenever its files no longer match their recorded digest.

    It is built once per state of the sources (copy_shared_master) and copied into each OUT: a
    second OUT graded from the same sources saves the two ``nbgrader generate_assignment`` runs."""
    master = out / ".course"
    record = out / ".course.digest"
    digest = course.sources_digest()
    try:
        stamp = json.loads(record.read_text())
        valid = stamp.get("sources") == digest and stamp.get("tree") == _tree_digest(master)
    except (OSError, ValueError):
        valid = False
    if not valid:
        shutil.rmtree(master, ignore_errors=True)
        if not copy_shared_master(course, digest, master):  # the course folder is not writable: build in OUT itself
            build_master(course, master)
        write_json_atomic(record, {"sources": digest, "tree": _tree_digest(master)})
    return master


MASTERS_KEPT = 4  # states of the sources whose masters stay in the course's build folder


def master_cache_key(digest: str) -> str:
    """A master's name in the cache: the sources' digest and the nbgrader that generated it."""
    from nbgrader import __version__ as nbgrader_version

    return f"{digest}-nbgrader{nbgrader_version}"


def copy_shared_master(course: Course, digest: str, into: Path) -> bool:
    """Copy the grading master of these sources from ``.course_build/masters/`` (the instructor's own
    folder, never visible inside the sandbox) into ``into``: built by the first grading run that needs
    it while the others wait on a lock, checked against its recorded tree digest before each use (a
    changed file means a rebuild), and copied under the same lock. False when the course folder
    cannot be written."""
    cache = course.root / ".course_build" / "masters"
    key = master_cache_key(digest)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        lock = open(cache / f"{key}.lock", "a+")
    except OSError:
        return False
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        folder, stamp = cache / key, cache / f"{key}.json"
        try:
            valid = json.loads(stamp.read_text()).get("tree") == _tree_digest(folder)
        except (OSError, ValueError):
            valid = False
        if not valid:
            building = cache / f".{key}.{os.getpid()}"
            shutil.rmtree(building, ignore_errors=True)
            build_master(course, building)
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(building, folder)
            write_json_atomic(stamp, {"sources": digest, "tree": _tree_digest(folder)})
            _forget_old_masters(cache, keep=key)
        shutil.copytree(folder, into)
    return True


def _forget_old_masters(cache: Path, keep: str) -> None:
    """Keep the newest MASTERS_KEPT masters (the sources of earlier states are rarely graded again)."""
    stamps = sorted(cache.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in stamps[MASTERS_KEPT:]:
        if stale.stem == keep:
            continue
        with open(cache / f"{stale.stem}.lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # a grading run is copying it now: left for a later clean-up
                continue
            shutil.rmtree(cache / stale.stem, ignore_errors=True)
            stale.unlink(missing_ok=True)


def build_master(course: Course, master: Path) -> None:
    """Generate a grading master into ``master``: one nbgrader course folder per edition, and judge.json."""
    released = generate(course, master, strip_hidden=True)
    for lang in EDITIONS[1:]:  # each translated edition's own master: its read-only cells are in its language
        generate(course, edition_master(master, lang), strip_hidden=True, language=lang)
    tests = course_tests(course.source_paths())
    spec = {"notebooks": {}, "solutions": {}, "translations": feedback_translations(course)}
    for name in course.notebooks:
        given = []
        for cell in nbformat.read(released / f"{name}.ipynb", as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and not meta.get("solution") and "imports" not in cell.metadata.get("tags", []):
                given.append(cell.source.strip())
        spec["notebooks"][name] = {"tests": tests[name]["tests"], "given": given}
        spec["solutions"].update(tests[name]["solutions"])
    write_json_atomic(master / "judge.json", spec)


@functools.lru_cache(maxsize=4)
def page_words(course: Course) -> dict[str, dict[str, str]]:
    """{language: feedback translations} (read once per batch: every page of an edition uses them)."""
    return feedback_translations(course)


def edition_master(master: Path, language: str) -> Path:
    """The grading master of one edition (English: ``master`` itself)."""
    return master if language == "en" else master / "editions" / language


def submission_edition(nb, master: Path, assignment: str, notebook: str) -> str:
    """The edition a submission was written in: its metadata says (the release records it), else,
    when a platform dropped the metadata, the edition whose read-only markdown cells it holds."""
    recorded = notebook_language(nb)
    if recorded is not None:
        return recorded
    held = {c.source.strip() for c in nb.cells if c.cell_type == "markdown"}
    best, best_count = "en", -1
    for lang in EDITIONS:
        source = edition_master(master, lang) / "source" / assignment / f"{notebook}.ipynb"
        if not source.is_file():
            continue
        locked = [
            c.source.strip()
            for c in nbformat.read(source, as_version=4).cells
            if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("locked")
        ]
        count = sum(text in held for text in locked)
        if count > best_count:
            best, best_count = lang, count
    return best


class Item(NamedTuple):
    """A notebook to grade: which, the submitted file, its fingerprint (reuse), and the digest of the
    student's whole submission (the salt of its hidden inputs)."""

    notebook: str
    path: Path
    fingerprint: str
    submission: str


def _file_digest(path: Path, max_bytes: int) -> str:
    """sha256 of a submitted file's bytes (of its size and time when it is over ``max_bytes``: it is
    refused unread anyway)."""
    h = hashlib.sha256()
    stat = path.stat()
    if stat.st_size > max_bytes:
        h.update(f"too large|{stat.st_size}|{stat.st_mtime_ns}".encode())
    else:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def submission_digest(chosen: dict[str, Path | None], max_bytes: int) -> str:
    """The digest of a student's whole submission: every notebook found for them, by name and bytes.
    It salts the hidden random inputs of each of their notebooks, so what one grading showed of
    them is no use in the next once anything in the submission changes, and it is part of every
    notebook's fingerprint, so a changed submission is graded again whole (the same submission
    always gets the same inputs and the same grade)."""
    h = hashlib.sha256()
    for notebook in sorted(chosen):
        path = chosen[notebook]
        h.update(f"{notebook}|{_file_digest(path, max_bytes) if path is not None else '-'}\n".encode())
    return h.hexdigest()


def _fingerprint(path: Path, digest: str, options: Options) -> str:
    h = hashlib.sha256()
    h.update(_file_digest(path, options.max_notebook_bytes).encode())
    h.update(
        f"{digest}|{options.cell_timeout}|{options.notebook_timeout}|{options.sandbox}|{options.memory_limit}"
        f"|{options.process_limit}|{options.max_notebook_bytes}".encode()
    )
    return h.hexdigest()


MAX_LOG_BYTES = 200_000  # bytes of a worker's log read back (its end)
MAX_RESULT_BYTES = 16 << 20  # a grading process's result.json (its logs are cut to 100,000 characters each)


def _read_json(path: Path, max_bytes: int | None = None) -> dict:
    """A JSON object from ``path``; {} when it is missing, unreadable, not an object, or over
    ``max_bytes`` (checked before it is read)."""
    try:
        if max_bytes is not None and path.stat().st_size > max_bytes:
            return {}
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return found if isinstance(found, dict) else {}


MAX_GRADED_BYTES = 48 << 20  # a graded notebook (outputs are capped while it runs, so far below this)


def read_notebook(path: Path, max_bytes: int):
    """A notebook from a file that a submission made or shaped, read within bounds: its size is
    checked before it is read, and its count of JSON objects before they are built
    (matching.check_nodes). Raises NotebookTooLarge, TooManyObjects, or what nbformat raises."""
    check_size(path, max_bytes)
    raw = path.read_bytes()
    check_nodes(raw)
    return nbformat.reads(raw.decode("utf-8"), as_version=4)


def read_graded(path: Path):
    """A graded notebook, or None when it is missing, unreadable, or over MAX_GRADED_BYTES or
    MAX_JSON_NODES (both checked before it is parsed)."""
    try:
        return read_notebook(path, MAX_GRADED_BYTES)
    except Exception:  # not JSON, nested too deep, too large, not a notebook
        return None


def read_tail(path: Path, limit: int) -> str:
    """The last ``limit`` bytes of a file that a sandboxed process may have grown (a worker's
    log holds what its kernel wrote to its own stdout): never the whole of it."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def _answers(nb) -> dict[str, str]:
    """{grade id: digest of the answer} for every answer cell (nbgrader solution cell) of a notebook."""
    found = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and meta.get("grade_id"):
            found[str(meta["grade_id"])] = hashlib.sha256(cell.source.strip().encode()).hexdigest()
    return found


def changed_answers(before: Path, nb) -> list[str] | None:
    """The answer cells whose text differs from ``before`` (the copy graded last time, kept in
    OUT/submitted); None when there is no readable earlier copy."""
    if not before.is_file():
        return None
    old_nb = read_graded(before)
    if old_nb is None:
        return None
    old = _answers(old_nb)
    new = _answers(nb)
    return sorted(gid for gid in {*old, *new} if old.get(gid) != new.get(gid))


def _repair_cells(nb, known: set[str]) -> list[str]:
    """Make a submitted notebook's nbgrader cells what nbgrader can grade (on the copy that is
    graded, never the student's file): consecutive cells that share an answer's grade id (what
    Jupyter's "Split Cell" leaves) are joined, sources separated by a blank line; a cell whose
    grade id the course does not know, or that repeats one met earlier, loses its nbgrader
    metadata and counts as an ordinary cell. Returns a note for each kind of change (at most a
    few: a notebook split into thousands of cells gets one line per answer, not per cell)."""
    cells, seen, parts = [], set(), {}  # parts: id(cell) -> the sources joined into that cell, in order
    ordinary: dict[str, int] = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader")
        gid = str(meta.get("grade_id", "")) if isinstance(meta, dict) else ""
        if not isinstance(meta, dict) or not (gid or meta.get("grade") or meta.get("solution") or meta.get("locked")):
            cells.append(cell)
            continue
        last = cells[-1] if cells else None
        last_meta = last.metadata.get("nbgrader", {}) if last is not None else {}
        if (
            meta.get("solution")
            and last is not None
            and isinstance(last_meta, dict)
            and last_meta.get("solution")
            and str(last_meta.get("grade_id", "")) == gid
            and last.cell_type == cell.cell_type
            and gid in known
        ):
            parts.setdefault(id(last), [last.source]).append(cell.source)
            continue
        if gid not in known or gid in seen:
            why = "a grade id this course does not have" if gid not in known else "a grade id used by an earlier cell"
            del cell.metadata["nbgrader"]
            key = f"{why} ({safe_text(gid) or 'none'})"
            ordinary[key] = ordinary.get(key, 0) + 1
        else:
            seen.add(gid)
        cells.append(cell)
    notes = []
    for cell in cells:
        joined = parts.get(id(cell))
        if joined:  # one join per answer: linear in the notebook's size
            inner = [text.strip("\n") for text in joined[1:-1]]
            cell.source = "\n\n".join([joined[0].rstrip("\n"), *inner, joined[-1].lstrip("\n")])
            gid = safe_text(str(cell.metadata["nbgrader"].get("grade_id", "")))
            pieces = "two" if len(joined) == 2 else f"{len(joined):,} parts"
            notes.append(f"answer cell {gid} was split in {pieces}; the parts were joined for grading")
    for key, count in list(ordinary.items())[:20]:
        times = "" if count == 1 else f" ({count:,} cells)"
        notes.append(f"a cell with {key} was graded as an ordinary cell{times}")
    if len(ordinary) > 20:
        notes.append(f"{len(ordinary) - 20} more grade ids this course does not have were graded as ordinary cells")
    nb.cells = cells
    return notes


def _prepare(
    course: Course, master: Path, out: Path, student: str, notebook: str, path: Path, max_bytes: int = MAX_NOTEBOOK_BYTES, record: dict | None = None
) -> Path:
    """A fresh nbgrader course folder holding one submitted notebook (raises on an unreadable
    one, and on one over ``max_bytes`` before reading it). ``record`` gets the answer cells
    changed since the last grading (a manual score on one of them is then flagged for review)."""
    nb = read_notebook(path, max_bytes)
    edition = submission_edition(nb, master, course.assignment, notebook)
    if record is not None:
        record["edition"] = edition
    master = edition_master(master, edition)
    repairs = _repair_cells(nb, grade_ids(master / "source" / course.assignment / f"{notebook}.ipynb"))
    if record is not None and repairs:
        record["matching_notes"] = repairs
    if record is not None:
        changed = changed_answers(out / "submitted" / student / course.assignment / f"{notebook}.ipynb", nb)
        if changed is not None:
            record["changed_answers"] = changed
    job = out / ".work" / student / notebook
    if job.exists():
        shutil.rmtree(job)
    job.mkdir(parents=True)
    # the salt of its hidden random inputs (job.py): the student's whole submission as sent (every notebook's
    # bytes before nbformat rewrites them), or this file's bytes where no submission digest is known
    salt = (record or {}).get("submission") or hashlib.sha256(path.read_bytes()).hexdigest()
    (job / SUBMISSION_DIGEST).write_text(salt)
    (job / EDITION_FILE).write_text(edition)  # the language its kernel and feedback page use (job.py)
    shutil.copy(master / "nbgrader_config.py", job / "nbgrader_config.py")
    # the job folder is the project root for the graded notebook: files it writes stay in the job
    shutil.copy(course.root / "course.toml", job / "course.toml")
    shutil.copy(master / "gradebook.db", job / "gradebook.db")
    shutil.copytree(master / "source", job / "source")
    submitted = job / "submitted" / student / course.assignment
    submitted.mkdir(parents=True)
    nbformat.write(nb, submitted / f"{notebook}.ipynb")
    return job


def finish_record(course: Course, out: Path, record: dict, job: Path, killed: bool, log: str, options: Options, secrets: dict[str, str]) -> None:
    """Turn a job folder's outcome into the record (scores, ideas, status, feedback page)."""
    student, notebook = record["student_id"], record["notebook"]
    outcome = _read_json(job / "result.json", MAX_RESULT_BYTES)
    auto = outcome.get("autograde", {})
    text = auto.get("log", "") + auto.get("error", "") + log
    graded = job / "autograded" / student / course.assignment / f"{notebook}.ipynb"
    kept = out / "autograded" / student / course.assignment / f"{notebook}.ipynb"  # what formgrader shows
    kept.unlink(missing_ok=True)
    _keep(
        job / "submitted" / student / course.assignment / f"{notebook}.ipynb", out / "submitted" / student / course.assignment / f"{notebook}.ipynb"
    )  # formgrader counts submissions there
    if killed:
        record.update(status="timeout", detail=f"killed after {options.notebook_timeout} s")
    elif outcome.get("out_of_memory") and "scores" not in outcome:
        record.update(status="out_of_memory", detail=f"over the {options.memory_limit / GiB:g} GiB limit: the kernel was stopped")
    elif not graded.is_file() or "scores" not in outcome:
        # why it stopped, as the worker wrote it where it caught it; with no word from the worker, an error
        # whose detail is the last error line of its logs (a status is never read from log text)
        said = outcome.get("outcome") if isinstance(outcome.get("outcome"), dict) else {}
        status = said.get("status") if said.get("status") in STATUS_TEXT else "error"
        detail = said.get("detail") if isinstance(said.get("detail"), str) and said.get("detail") else _last_error(text)
        record.update(status=status, detail=detail[:300])
    else:
        record["scores"] = outcome["scores"]
        record["manual"] = outcome.get("manual", {})
        record["timings"] = outcome.get("timings", {})
        record["ideas"] = {
            gid: [{"id": i["id"], "status": i["status"], "earned": i["earned"], "points": i["points"]} for i in result["ideas"]]
            for gid, result in outcome.get("judge", {}).items()
        }
        notes = []
        if outcome.get("out_of_memory") or outcome.get("runner_out_of_memory"):
            notes.append(f"part of it went over the {options.memory_limit / GiB:g} GiB memory limit and was stopped")
        if outcome.get("load_errors"):
            notes.append(f"{len(outcome['load_errors'])} cell(s) of its code failed when loaded for the judge")
        page = job / "feedback" / student / course.assignment / f"{notebook}.html"
        if page.is_file():
            target = out / "feedback" / student / f"{notebook}.html"
            pending_ids = {gid for gid, score in record["manual"].items() if score is None}
            words = page_words(course).get(record.get("edition", "en"), {})
            redacted = _write_feedback(page, target, secrets, graded, pending_ids, words)
            if redacted:
                record["redacted_lines"] = redacted
        else:
            fb = outcome.get("feedback", {})
            notes.append("feedback could not be generated: " + _last_error(fb.get("log", "") + fb.get("error", "")))
        record["detail"] = "; ".join(notes)
        _keep_for_display(graded, kept, edition_master(out / ".course", record.get("edition", "en")), course.assignment)
    if record["status"] != "graded":
        log_copy = out / "logs" / student / f"{notebook}.log"
        log_copy.parent.mkdir(parents=True, exist_ok=True)
        log_copy.write_text(text[-200_000:], encoding="utf-8")


def _keep(source: Path, target: Path) -> None:
    """Copy a notebook into OUT's nbgrader course folder (atomically)."""
    if source.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target.with_suffix(".tmp"))
        os.replace(target.with_suffix(".tmp"), target)


def _keep_for_display(source: Path, target: Path, master: Path, assignment: str) -> None:
    """Keep a graded notebook for formgrader, which renders it without sanitizing: learner
    markdown becomes plain text, outputs plain text or images (NeutraliseForDisplay). The
    course's own markdown and grade ids come from the master's source and release copies."""
    if not source.is_file():
        return
    trusted, ids = [], []
    for folder in ("source", "release"):
        path = master / folder / assignment / source.name
        if path.is_file():
            for cell in nbformat.read(path, as_version=4).cells:
                if cell.cell_type == "markdown":
                    trusted.append(cell.source)
                gid = cell.metadata.get("nbgrader", {}).get("grade_id")
                if gid:
                    ids.append(gid)
    nb = read_graded(source)
    if nb is None:
        return
    nb, _ = NeutraliseForDisplay(trusted_markdown=trusted, trusted_ids=ids).preprocess(nb, {})
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    nbformat.write(nb, tmp)
    os.replace(tmp, target)


_LINK = re.compile(r"(?<![\w.-])(href|src|action|formaction|poster|background)(\s*=\s*)(\"[^\"]*\"|'[^']*'|[^\s>\"']+)", re.IGNORECASE)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
SAFE_SCHEMES = {"http", "https", "mailto"}


_IMAGE_DATA = re.compile(r"^data:image/(png|jpeg|gif);base64,", re.IGNORECASE)


def _safe_url(value: str, image: bool = False) -> bool:
    """True for a relative path, a ``#`` fragment, or an http/https/mailto URL (and, for an
    image source, a base64 PNG/JPEG/GIF). Browsers decode entities and ignore whitespace and
    control characters in a scheme, so this does too."""
    plain = "".join(ch for ch in html.unescape(value) if ch > " " and ch != "\x7f" and not ch.isspace() and ch.isprintable())
    scheme = _SCHEME.match(plain)
    return scheme is None or scheme.group(1).lower() in SAFE_SCHEMES or (image and bool(_IMAGE_DATA.match(plain)))


def _safe_links(text: str) -> str:
    """Point every link or source whose scheme is not allowed (``javascript:``, ``data:``,
    ``vbscript:`` ...) at ``#``."""

    def fix(match: re.Match) -> str:
        value = match.group(3)
        inner = value[1:-1] if value[:1] in "\"'" else value
        return match.group(0) if _safe_url(inner, image=match.group(1).lower() == "src") else f'{match.group(1)}{match.group(2)}"#"'

    return _LINK.sub(fix, text)


MAX_PAGE = 1_000_000  # characters in one feedback page
_TAG = re.compile(r"<[^<>]*>")  # linear: a run of '<' without '>' cannot make it backtrack


def safe_text(text: str) -> str:
    """A name or note from a submission, fit for JSON, CSV and a terminal: undecodable bytes
    and control characters (terminal escapes) are replaced."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return "".join(ch if ch.isprintable() else "?" for ch in text)[:300]


_ID = r"[A-Za-z0-9_-]+"
_NUM = r"[0-9]+(?:\.[0-9]+)?"


def mark_pending(text: str, pending: set[str]) -> str:
    """Show answers that wait for a person as pending, not as "Score: 0.0 / 1.0".

    nbgrader's feedback gives an ungraded written answer a score of 0; the page then reads as if
    the learner had lost those points. Each pending answer's score becomes "pending", and the
    notebook's heading says how many points still wait for a person."""
    waiting = 0.0

    def in_list(m: re.Match) -> str:
        nonlocal waiting
        if m.group(1) not in pending:
            return m.group(0)
        waiting += float(m.group(2))
        return f'<li><a href="#{m.group(1)}">Written response</a> (pending: a person grades it, {m.group(2)} point(s))</li>'

    text = re.sub(rf'<li><a href="#({_ID})">Written response</a> \(Score: {_NUM} / ({_NUM})\)</li>', in_list, text)
    for gid in pending:
        text = re.sub(
            rf'(<a name="{re.escape(gid)}"></a><div class="panel-heading">.{{0,400}}?)Score: {_NUM} / ({_NUM}) ',
            r"\1Pending: a person grades it (\2 point(s)) ",
            text,
            count=1,
            flags=re.S,
        )
    if waiting:
        text = re.sub(
            rf"(<h4>[^<]{{1,200}} \(Score: {_NUM} / {_NUM})\)</h4>", rf"\1; {waiting:g} point(s) wait for a person's grading)</h4>", text, count=1
        )
    return text


_PAGE_HEADINGS = (  # (pattern in nbgrader's feedback template, English): only the template's own text is touched
    (r'(<a href="#{id}">){text}(</a>)', ("Test cell", "Coding free-response", "Written response", "Task")),
    (r'(<a href="#comment-{id}">){text}(</a>)', ("Comment",)),
    (r'(<span class="nbgrader-label">){text}(</span>)', ("Student's answer",)),
    (r"(<b>){text}(:</b>)", ("Comments",)),
    (r'(<a href="#top">\(){text}(\)</a>)', ("Top",)),
)


def localize_page(text: str, words: dict[str, str]) -> str:
    """A feedback page's own headings in the submission's language (``words``: its edition's
    feedback translations; empty for English, which leaves the page as it is)."""
    if not words:
        return text
    text = localize_labels(text, words)  # its score lines, grade-cell labels and hidden-tests note
    for pattern, english in _PAGE_HEADINGS:
        for item in english:
            if item in words:
                regex = pattern.format(id=_ID, text=re.escape(item))
                text = re.sub(regex, lambda m, w=words[item]: m.group(1) + html.escape(w) + m.group(2), text)
    score = html.escape(words.get("Score", "Score"))
    text = re.sub(rf"(\(|<h4>[^<]{{1,200}} \(|</div>\s*|\n\s*)Score: ({_NUM} / {_NUM})", rf"\1{score}: \2", text)
    for template in (
        "pending: a person grades it, {points} point(s)",
        "Pending: a person grades it ({points} point(s))",
        "{points} point(s) wait for a person's grading",
    ):
        if template in words:
            regex = re.escape(template).replace(re.escape("{points}"), f"({_NUM})")
            text = re.sub(regex, lambda m, t=words[template]: html.escape(t.format(points=m.group(1))), text)
    return text


def _write_feedback(
    page: Path, target: Path, secrets: dict[str, str], graded: Path, pending: set[str] = frozenset(), words: dict[str, str] | None = None
) -> int:
    """Copy a feedback page, first removing any line of a hidden test or of a reference answer
    that the learner's own notebook does not hold, and marking answers that wait for a person
    as pending. Returns how many lines were removed."""
    with open(page, "rb") as handle:  # cut first: the scan below must stay cheap whatever the page holds
        raw = handle.read(4 * MAX_PAGE + 4).decode("utf-8", "replace")
    if len(raw) > MAX_PAGE:
        raw = raw[:MAX_PAGE] + "\n<p>[the page was cut at 1 MB]</p></body></html>\n"
    nb = read_graded(graded)
    own = {
        line.strip() for cell in (nb.cells if nb else []) if cell.metadata.get("nbgrader", {}).get("solution") for line in cell.source.splitlines()
    }
    lines, removed = raw.split("\n"), 0
    for i, line in enumerate(lines):
        plain = html.unescape(_TAG.sub("", line)).strip()
        if plain and plain in secrets and plain not in own:
            lines[i] = "<span>[line removed from this page: it quoted the grader's tests or answers]</span>"
            removed += 1
    text = add_csp(add_wrapping(_safe_links(localize_page(mark_pending("\n".join(lines), set(pending)), words or {}))))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return removed


def grade_student(
    course: Course,
    master: Path,
    out: Path,
    student: str,
    items: list[Item],
    options: Options,
    on_done=lambda record: None,
    secrets: dict[str, str] | None = None,
) -> list[dict]:
    """Grade a student's notebooks here: run_student grades them, and each finished one is
    turned into its record, feedback page and kept notebooks under ``out``, signed and saved."""
    records = []

    def settle(record: dict, job: Path, killed: bool = False, log: str = "") -> None:
        """Record one finished (or stopped) notebook at once, so an interruption keeps it."""
        seconds = elapsed_since(job)
        finish_record(course, out, record, job, killed, log, options, secrets or {})
        records.append(save_record(out, record, seconds))
        on_done(record)
        shutil.rmtree(job, ignore_errors=True)

    def fail(record: dict) -> None:  # refused before it ran (unreadable), or its worker never started
        records.append(save_record(out, record, 0.0))
        on_done(record)

    entries = []
    for item in items:
        record = new_record(student, item.notebook, file=safe_text(item.path.name), fingerprint=item.fingerprint)
        entries.append(({**record, "submission": item.submission}, item.path))
    run_student(course, master, out, student, entries, options, settle, fail)
    return records


# Set while the batch is being stopped (Ctrl-C, SIGTERM): its workers are killed, and a notebook
# they were on is left unrecorded (not saved as an error the next run would reuse).
INTERRUPTED = threading.Event()


class Stopped(Exception):
    """A student's grading was called off (a cluster task the batch cancelled): its processes were killed."""


def run_student(
    course: Course, master: Path, out: Path, student: str, entries: list[tuple[dict, Path]], options: Options, settle, fail, stop=None
) -> None:
    """Grade a student's notebooks (``entries``: (record, submitted file)): one worker process
    runs them one after the other, each in its own course folder under ``out/.work``. A notebook
    past the wall-clock limit has the worker and its kernel killed; a new worker then takes the
    notebooks that are left. Each notebook ends in ``settle(record, job folder, killed, log)``
    or, when it never ran, ``fail(record)``. The same loop runs on a cluster's worker (cluster.py),
    which passes ``stop``: when it returns True the grading process is killed and Stopped raised."""
    pending = []
    for record, path in entries:
        try:
            pending.append((record, _prepare(course, master, out, student, record["notebook"], path, options.max_notebook_bytes, record)))
        except Exception as exc:  # not JSON, not a notebook: a grade of 0, not a crash
            record.update(status="invalid_notebook", detail=f"{type(exc).__name__}: {str(exc)[:300]}")
            fail(record)
    # the worker dies with this process (parent-death signal in job.py), however this one ends
    env = {"COURSE_CELL_TIMEOUT": str(options.cell_timeout), "COURSE_PARENT_PID": str(os.getpid())}
    false_starts = 0
    try:
        while pending:
            before = len(pending)
            log_path = out / ".work" / student / "worker.log"
            with open(log_path, "w", encoding="utf-8") as log:
                proc = start_worker(
                    [str(out / ".work" / SETTINGS), student, *[str(job) for _, job in pending]], out / ".work" / student, env, log_path, log
                )
                try:
                    current, killed = _watch(proc, pending, options.notebook_timeout, settle, stop)
                finally:
                    reap(proc)
                    _sweep(out / ".work" / student / "sandbox.ledger")
            worker_log = read_tail(log_path, MAX_LOG_BYTES)
            _settle_finished(pending, settle)  # any that finished after the last poll
            if INTERRUPTED.is_set():  # the batch is stopping (Ctrl-C, SIGTERM): what it cut short is
                return  # not recorded, so that the next run grades it
            stopped = [(record, job) for record, job in pending if job == current]
            for record, job in stopped:  # killed at the limit, or the worker broke during it
                settle(record, job, killed, worker_log)
                pending.remove((record, job))
            if len(pending) == before:  # the worker died before starting anything (no learner code ran yet)
                false_starts += 1
                if false_starts == 1:  # a fault of the grader's own start-up: one more worker, then no loop
                    continue
                for record, _job in pending:
                    record.update(status="error", detail=_last_error(worker_log))
                    fail(record)
                break
    finally:
        shutil.rmtree(out / ".work" / student, ignore_errors=True)


def _sweep(ledger: Path) -> None:
    """After a worker ends, however it ended, remove what its sandboxes left behind."""
    if ledger.is_file():
        from .run.sandbox import sweep

        sweep(ledger)
        ledger.unlink(missing_ok=True)


def _settle_finished(pending: list, settle) -> None:
    for record, job in list(pending):
        if (job / "result.json").is_file():
            settle(record, job)
            pending.remove((record, job))


def _watch(proc, pending: list, limit: float, settle, stop=None) -> tuple[Path | None, bool]:
    """Wait for the worker, settling each notebook as it finishes. Returns (the job it was
    on when it stopped, whether it was killed at the wall-clock limit)."""
    while True:
        _settle_finished(pending, settle)
        current = next((job for _, job in pending if (job / "started").is_file()), None)
        if proc.poll() is not None:
            return current, False
        if current is not None and elapsed_since(current) > limit:
            kill_tree(proc.pid)
            return current, True
        if stop is not None and stop():
            kill_tree(proc.pid)
            raise Stopped("called off")
        _pause(proc, 0.2)


def _pause(proc, seconds: float) -> None:
    """Wait ``seconds``, or less: until the worker ``proc`` ends (its student's next one then starts
    at once, not at the next look)."""
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        pass


def elapsed_since(job: Path) -> float:
    """Seconds since the worker started ``job`` (0 while the marker is being written)."""
    try:
        return max(0.0, time.time() - float((job / "started").read_text()))
    except (OSError, ValueError):
        return 0.0


def _last_error(log: str, prefer: tuple[str, ...] = ()) -> str:
    lines = [line.strip() for line in log.splitlines() if any(word in line for word in prefer)]
    lines = lines or [line for line in log.splitlines() if "ERROR" in line or "Error" in line]
    return (lines[-1] if lines else log.strip().splitlines()[-1] if log.strip() else "no output")[:300]


_KEYS: dict[Path, bytes] = {}


def _key(out: Path) -> bytes:
    """The secret that signs saved records (kept in OUT/.state, readable by the instructor only).
    Made before any worker starts (under the run's lock), then read once."""
    if out not in _KEYS:
        path = out / ".state" / ".key"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(os.urandom(32))
        _KEYS[out] = path.read_bytes()
    return _KEYS[out]


def _signature(out: Path, record: dict) -> str:
    body = json.dumps({k: v for k, v in record.items() if k not in ("signature", "cached")}, sort_keys=True)
    return hmac.new(_key(out), body.encode(), hashlib.sha256).hexdigest()


def save_record(out: Path, record: dict, seconds: float) -> dict:
    record["seconds"] = round(seconds, 2)
    record["signature"] = _signature(out, record)
    write_json_atomic(out / ".state" / record["student_id"] / f"{record['notebook']}.json", record)
    return record


def _cached(out: Path, student: str, notebook: str, fingerprint: str) -> dict | None:
    """A saved record, when it is for this very file and its signature verifies."""
    path = out / ".state" / student / f"{notebook}.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("fingerprint") != fingerprint:
        return None
    return record if hmac.compare_digest(str(record.get("signature", "")), _signature(out, record)) else None


class GraderFault(Exception):
    """A student's grading raised twice: ``settled`` records were kept, ``left`` items were not graded."""

    def __init__(self, settled: list[dict], left: list, cause: BaseException):
        super().__init__(str(cause))
        self.settled, self.left, self.cause = settled, left, cause


def keep_fault(out: Path, student: str, exc: BaseException, again: bool) -> None:
    """Append a grader fault's traceback to OUT/logs/<student>/grader-faults.log (for whoever
    looks into it: the feedback page and grades.csv carry only its one-line summary)."""
    import traceback

    path = out / "logs" / student / "grader-faults.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    then = "graded once more" if again else "its notebooks left are marked error"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')}: a fault of the grader ({then})\n")
        handle.write("".join(traceback.format_exception(exc))[-20_000:])


def grade_locally(
    course: Course, master: Path, out: Path, by_student: dict, options: Options, done, fault, secrets: dict[str, str]
) -> tuple[list[dict], None]:
    """The local executor: each student's jobs on a pool of ``options.workers`` threads, each
    thread driving its own worker processes. A student whose grading raises (a fault of the
    grader, not of the submission) is graded once more, the notebooks already settled kept; when
    it raises again the rest goes to ``fault``. Each fault's traceback is kept in OUT/logs."""
    records: list[dict] = []

    def attempt(student: str, items: list) -> list[dict]:
        settled: list[dict] = []

        def on_done(record: dict) -> None:
            settled.append(record)
            done(record)

        def left() -> list:
            return [item for item in items if item[0] not in {r["notebook"] for r in settled}]

        for tries in (1, 2):
            try:
                grade_student(course, master, out, student, left(), options, on_done, secrets)
                break
            except Exception as exc:
                keep_fault(out, student, exc, again=tries == 1)
                if tries == 2:
                    raise GraderFault(settled, left(), exc) from exc
        return settled

    INTERRUPTED.clear()
    with ThreadPoolExecutor(max_workers=max(1, options.workers)) as pool:
        futures = {pool.submit(attempt, s, items): (s, items) for s, items in by_student.items()}
        try:
            for future in as_completed(futures):
                try:
                    records.extend(future.result())
                except GraderFault as failed:  # the rest goes on
                    records.extend(failed.settled)
                    fault(futures[future][0], failed.left, failed.cause)
                except Exception as exc:
                    fault(*futures[future], exc)
        except BaseException:
            INTERRUPTED.set()  # before the kill: a thread that sees its worker die must not record the notebook
            pool.shutdown(wait=False, cancel_futures=True)
            kill_live_runs()
            raise
    return records, None


def grade_batch(
    course: Course,
    submissions: Path,
    out: Path,
    options: Options = Options(),
    executor=None,
    late: LateSpec | None = None,
    absent: list[str] | tuple[str, ...] = (),
) -> dict:
    """Grade every student folder under ``submissions``; write grades.csv, feedback/,
    log.jsonl and summary.json under ``out``. Returns the summary.

    ``executor`` runs the students' jobs: ``executor(course, master, out, by_student, options, done,
    fault, secrets) -> (records, extra summary or None)``. The default, :func:`grade_locally`, runs
    them in a pool of ``options.workers`` threads here; the command line passes
    ``cluster.grade_on_cluster_executor`` for ``--scheduler``. ``late``: the deadlines, the late
    policy and the submission times (record/late.py); penalties are worked out on every run, never
    cached, so a changed deadline applies to results reused from an earlier run. ``absent``: students
    on the roster who sent nothing (a row of ``missing`` notebooks each)."""
    if options.scheduler and executor is None:
        raise ValueError("options.scheduler needs a cluster executor: pass executor=cluster.grade_on_cluster_executor (the grade command does)")
    executor = executor or grade_locally
    if not submissions.is_dir():
        raise UnusableInput(f"{submissions} is not a folder of student folders")
    students = sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not students and not absent:
        raise UnusableInput(f"{submissions} holds no student folders (expected SUBMISSIONS/<student_id>/<notebook>.ipynb)")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / ".probe").write_text("ok")
        (out / ".probe").unlink()
    except OSError as exc:
        raise UnusableInput(f"cannot write to {out}: {exc}") from exc
    if out.resolve() == submissions.resolve() or submissions.resolve() in out.resolve().parents:
        raise UnusableInput("OUT must not be inside SUBMISSIONS")
    with _locked(out):
        return _grade_locked(course, submissions, students, out, options, executor, late or LateSpec(), absent)


@contextmanager
def _locked(out: Path):
    """One grading run per OUT folder at a time."""
    handle = open(out / ".lock", "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise UnusableInput(
            f"another grading run is using {out} (it holds {out / '.lock'}); wait for it to finish, or grade into another folder"
        ) from None
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def _sandbox_settings(out: Path, options: Options) -> dict:
    """Check that the sandbox runs here (or that the instructor chose to go without)."""
    if not options.sandbox:
        print(
            "WARNING: grading WITHOUT the sandbox (--no-sandbox): submissions run with your rights, can read "
            "and change your files, and can reach the network. Use this only for code you trust.",
            file=sys.stderr,
        )
        return {"enabled": False, "warning": "graded with --no-sandbox: submissions were not isolated"}
    from .run.sandbox import Limits, Sandbox, probe

    limits = Limits(options.memory_limit, options.process_limit)
    why = probe(out / ".sandbox", limits)
    if why:
        raise UnusableInput(
            f"the grading sandbox cannot run here: {why}. Submissions are untrusted code; grade on "
            "Linux with user namespaces (bubblewrap), or pass --no-sandbox to grade code you trust."
        )
    box = Sandbox(out / ".sandbox", limits)
    try:
        return box.describe()
    finally:
        box.close()


def job_settings(course: Course, master: Path, home: Path, options: Options) -> dict:
    """What a grading process (job.py) reads from .work/.settings.json."""
    return {
        "assignment": course.assignment,
        "judge": str(master / "judge.json"),
        "sandbox": options.sandbox,
        "home": str(home),
        "memory_limit": options.memory_limit,
        "process_limit": options.process_limit,
        "cell_timeout": options.cell_timeout,
        "worker_memory_limit": max(WORKER_MEMORY, options.memory_limit + GiB),
    }


def _intake(
    course: Course, submissions: Path, students: list[Path], out: Path, options: Options, digest: str, ids_by_name: dict[str, set[str]]
) -> tuple[list[dict], dict[str, list[str]], dict[str, list[tuple[str, Path, str]]]]:
    """Read every student folder: a row for each refused id, missing notebook, unreadable folder and
    reused result; the notebooks left to grade, per student (notebook, file, fingerprint); the
    matching notes. Writes ``OUT/rejected_ids.json``. Whatever one folder holds costs only its student."""
    records: list[dict] = []
    notes: dict[str, list[str]] = {}
    by_student: dict[str, list[tuple[str, Path, str]]] = {}  # the notebooks to grade now
    rejected = []
    for folder in students:
        student = safe_text(folder.name)
        if not STUDENT_ID.fullmatch(folder.name) or folder.is_symlink():
            why = "a student folder may not be a symbolic link" if folder.is_symlink() else "use letters, digits, '_', '.', '@', '+' or '-'"
            rejected.append(
                {
                    "student_id": rejected_id(folder.name),
                    "reason": why,
                    "folder": folder.name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"),
                }
            )
            records += [new_record(rejected[-1]["student_id"], nb, "invalid_student_id", why) for nb in course.notebooks]
            continue
        try:
            chosen, found_notes = match_notebooks(folder, course.notebooks, ids_by_name, max_bytes=options.max_notebook_bytes)
            notes[student] = [safe_text(note) for note in found_notes]
            todo, done_here = [], []
            whole = submission_digest(chosen, options.max_notebook_bytes)
            for notebook, path in chosen.items():
                if path is None:
                    done_here.append(new_record(student, notebook, "missing", f"{notebook}.ipynb not found in the submission"))
                    continue
                fingerprint = _fingerprint(path, f"{digest}|{whole}", options)
                cached = _cached(out, student, notebook, fingerprint)
                if cached:
                    done_here.append({**cached, "cached": True})
                else:
                    todo.append(Item(notebook, path, fingerprint, whole))
        except Exception as exc:  # whatever a folder holds, it costs its own student, never the class
            why = safe_text(f"{type(exc).__name__}: {exc}")
            records += [new_record(student, nb, "invalid_submission", why) for nb in course.notebooks]
            continue
        records += done_here
        if todo:
            by_student[student] = todo
    for name in sorted(p.name for p in submissions.iterdir() if p.name.startswith(".") and p.is_dir()):
        rejected.append(
            {
                "student_id": None,
                "reason": "a hidden folder (its name starts with '.'): not graded",
                "folder": name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"),
            }
        )
    write_json_atomic(out / "rejected_ids.json", rejected)
    return records, notes, by_student


def _set_up_batch(course: Course, out: Path, options: Options) -> tuple[Path, str, gradebook.Writer, dict]:
    """The grading master in OUT, the gradebook's URL and its writer, and the sandbox's settings.
    The worker server, the gradebook and the sandbox's check start together: each waits on its
    own process or thread, so none waits for another."""
    if not options.scheduler:
        start_worker_server()  # it imports what workers need while the rest of the set-up runs
    master = grading_master(course, out)
    db_url = gradebook.resolve_url(out, options.db_url)
    # the course gradebook, written by this process only (one writer thread), prepared meanwhile
    writer = gradebook.Writer(db_url, master / "gradebook.db", course.assignment, wait=False)
    try:
        sandbox = _batch_sandbox(out, options)
        writer.ready()
    except gradebook.GradebookError as exc:
        raise UnusableInput(str(exc)) from None
    except BaseException:
        with contextlib.suppress(gradebook.GradebookError):
            writer.close()
        raise
    return master, db_url, writer, sandbox


def _grade_locked(course: Course, submissions: Path, students: list[Path], out: Path, options: Options, executor, late: LateSpec, absent=()) -> dict:
    master, db_url, writer, sandbox = _set_up_batch(course, out, options)
    page_words(course)  # read here, once: the workers' threads then share it instead of each reading it at once
    graded_cells = exercises(course)
    # every grade id (test and exercise cells) identifies a notebook that a platform renamed
    ids_by_name = {name: grade_ids(course.solutions / f"{name}.ipynb") for name in course.notebooks}
    digest = course.sources_digest()
    secrets = secret_lines(course)
    _key(out)
    gradebook.write_course_config(out, db_url, master, course.assignment)
    if not options.scheduler:  # on a cluster each worker writes its own
        write_json_atomic(out / ".work" / SETTINGS, job_settings(course, master, out / ".sandbox", options))

    records, notes, by_student = _intake(course, submissions, students, out, options, digest, ids_by_name)
    unseen = sorted(set(absent) - {folder.name for folder in students})
    records += [new_record(s, nb, "missing", "nothing was submitted (on the roster)") for s in unseen for nb in course.notebooks]

    _install_sigterm()
    from tqdm import tqdm

    total = sum(len(items) for items in by_student.values())
    bar = tqdm(total=total, desc="grading notebooks", unit="nb", disable=not options.progress)

    save_spec(out, late)
    max_points = {nb: sum(e.points for e in graded_cells if e.notebook == nb) for nb in course.notebooks}

    def record_in_gradebook(record: dict) -> None:
        if record["status"] == "invalid_student_id":
            return
        record["late"] = late_of(late, record, max_points)
        if record["status"] != "graded":  # no autograded notebook left from an earlier run
            (out / "autograded" / record["student_id"] / course.assignment / f"{record['notebook']}.ipynb").unlink(missing_ok=True)
        writer.put(record)

    for record in records:  # reused and missing ones: a new or changed gradebook gets them too
        record_in_gradebook(record)

    def done(record: dict) -> None:
        record_in_gradebook(record)
        bar.update(1)
        bar.set_postfix_str(f"{record['student_id']}/{record['notebook']}", refresh=False)

    def fault(student: str, items: list, exc: BaseException) -> None:
        """A grader fault for one student: a row for each notebook (not saved: the next run grades them again)."""
        kept = out / "logs" / student / "grader-faults.log"
        where = f" (traceback: logs/{student}/grader-faults.log)" if kept.is_file() else ""
        for notebook, *_rest in items:
            records.append(new_record(student, notebook, "error", safe_text(f"a fault of the grader: {type(exc).__name__}: {exc}"[:400] + where)))
            record_in_gradebook(records[-1])
            bar.update(1)

    cluster = None
    try:
        if by_student:
            graded, cluster = executor(course, master, out, by_student, options, done, fault, secrets)
            records.extend(graded)
    finally:
        bar.close()
        try:
            writer.close()  # every finished notebook is in the gradebook (also on Ctrl-C)
            gradebook_error = None
        except gradebook.GradebookError as exc:
            gradebook_error = str(exc)
    if gradebook_error:
        print(f"WARNING: {gradebook_error}. The results are kept in {out / '.state'}; run the same command again to record them.", file=sys.stderr)
    else:
        with contextlib.suppress(gradebook.GradebookError):
            gradebook.keep_submitted_times(db_url, course.assignment, out)
    book = {"db_url": gradebook.mask_url(db_url), "notebooks_recorded": writer.merged, "error": gradebook_error}
    for record in records:
        record["late"] = late_of(late, record, max_points)
    summary = _report(course, out, graded_cells, records, notes, len(students) + len(unseen), sandbox, db_url, book, late)
    for record in records:  # the late line: the penalty _report settled on the score grades.csv counts
        note_late(out, record, late, page_words(course).get(record.get("edition", "en"), {}))
    if cluster:
        summary["cluster"] = cluster
        write_json_atomic(out / "summary.json", summary)
    return summary


def _batch_sandbox(out: Path, options: Options) -> dict:
    """The sandbox's settings; on a cluster, each worker checks its own (cluster.py) and refuses tasks without one."""
    if options.scheduler and options.sandbox:
        return {"enabled": True, "isolation": "bubblewrap on every worker (each checked before the batch)"}
    return _sandbox_settings(out, options)


def rejected_id(name: str) -> str:
    """A stand-in id for a folder whose name is refused: safe in a spreadsheet, the same on every
    run, and never a valid id (a folder named like it is refused itself). It names no file: a
    refused folder is not graded. The folder's name itself is kept only in rejected_ids.json."""
    raw = name.encode("utf-8", "surrogateescape")
    return f"rejected:{hashlib.sha256(raw).hexdigest()[:10]}"  # ':' is in no valid id: no folder can take it


def _install_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt so a killed batch stops its nbgrader runs too."""

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (a test calling us from a thread)
        pass


TOTAL_COLUMNS = ("auto_total", "total", "max_total", "pending", "needs_review", "late_penalty", "final_total")  # grades.csv after the cells
EDITION_COLUMN = "edition"  # grades.csv's last column: the edition(s) a student's notebooks were written in


_LATE_NOTE = re.compile(r'\n?<p class="late-note">[^<]*</p>')


def note_late(out: Path, record: dict, spec: LateSpec, words: dict[str, str]) -> None:
    """Put the late line under the feedback page's heading (or take an old one away: a page kept
    from an earlier run may carry another deadline's)."""
    page = out / "feedback" / record["student_id"] / f"{record['notebook']}.html"
    if not page.is_file():
        return
    text = page.read_text(encoding="utf-8")
    updated = _LATE_NOTE.sub("", text)
    line = late_text(record.get("late", {}), spec.policy, words)
    if line:
        updated = updated.replace("</h4>", f'</h4>\n<p class="late-note">{html.escape(line)}</p>', 1)
    if updated != text:
        tmp = page.with_suffix(".tmp")
        tmp.write_text(updated, encoding="utf-8")
        os.replace(tmp, page)


def late_of(spec: LateSpec, record: dict, max_points: dict[str, float]) -> dict:
    """A notebook's late facts (record/late.py) from its automatic score, for the gradebook while the
    batch runs; ``_report`` settles the penalty again on the score grades.csv counts (a person's too)."""
    if record.get("status") in ("missing", "invalid_student_id"):
        return {"penalty": 0.0}  # nothing was submitted: nothing was late
    score = sum(float(v) for v in record.get("scores", {}).values()) if record.get("status") == "graded" else 0.0
    return notebook_late(spec, record["student_id"], record["notebook"], score, max_points.get(record["notebook"], 0.0))


def _student_row(student: str, per_nb: dict[str, dict], graded_cells: list[Exercise], stored: dict, late: LateSpec, flagged=()) -> dict:
    """A student's row of grades.csv (tables.score_row, without the export's manual_total); the late
    penalty settled on the scores the row counts (tables.late_columns), kept in each record's facts."""
    row = score_row(student, graded_cells, lambda e: cell_value(e, stored.get(e.grade_id), per_nb.get(e.notebook, {})))
    del row["manual_total"]
    submitted = [nb for nb, r in per_nb.items() if r.get("status") not in ("missing", "invalid_student_id")]
    settled = late_columns(row, graded_cells, late, submitted, flagged)
    for notebook in submitted:
        per_nb[notebook]["late"] = settled.facts[notebook]
    row[EDITION_COLUMN] = "+".join(sorted({r["edition"] for r in per_nb.values() if r.get("edition")}))
    return row


def _problem(student: str, notebook: str, record: dict) -> dict:
    return {
        "student_id": student,
        "notebook": notebook,
        "status": record["status"],
        "what_happened": STATUS_TEXT[record["status"]],
        "detail": record.get("detail", ""),
    }


def _write_log(out: Path, records: list[dict]) -> None:
    with open(out / "log.jsonl.tmp", "w", encoding="utf-8") as handle:
        for r in sorted(records, key=lambda r: (r["student_id"], r["notebook"])):
            handle.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(out / "log.jsonl.tmp", out / "log.jsonl")


def _report(
    course: Course,
    out: Path,
    graded_cells: list[Exercise],
    records: list[dict],
    notes: dict[str, list[str]],
    n_students: int,
    sandbox: dict,
    db_url: str | None = None,
    book: dict | None = None,
    late: LateSpec | None = None,
) -> dict:
    """grades.csv (one row per student: each cell's score, a reflection not yet graded by a
    person as ``pending``, a person's score on an answer changed since as ``review`` (not
    counted), ``auto_total``, ``total`` = every score so far, ``max_total``, how many answers
    are ``pending`` and how many ``needs_review``), log.jsonl, summary.json."""
    max_total = sum(e.points for e in graded_cells)
    auto_cells = [e for e in graded_cells if not e.manual]
    manual_cells = [e for e in graded_cells if e.manual]
    stored = {}
    if db_url and not (book or {}).get("error"):
        try:
            stored = gradebook.read_scores(db_url, course.assignment)
        except gradebook.GradebookError as exc:
            book = {**(book or {}), "error": str(exc)}
    by_student: dict[str, dict[str, dict]] = {}
    notes = {student: list(found) for student, found in notes.items()}
    for r in records:
        by_student.setdefault(r["student_id"], {})[r["notebook"]] = r
        notes.setdefault(r["student_id"], []).extend(f"{r['notebook']}.ipynb: {note}" for note in r.get("matching_notes", []))
    late = late or load_spec(out)
    flags = lms_flags(out)
    rows = [
        _student_row(student, per_nb, graded_cells, stored.get(student, {}), late, flags.get(student, ()))
        for student, per_nb in sorted(by_student.items())
    ]
    if db_url and not (book or {}).get("error") and late.active:  # nbgrader's own penalty: the one grades.csv took
        try:
            gradebook.record_penalties(
                db_url, course.assignment, {s: {nb: r.get("late", {}).get("penalty", 0.0) for nb, r in per.items()} for s, per in by_student.items()}
            )
        except gradebook.GradebookError as exc:
            book = {**(book or {}), "error": str(exc)}
    problems = [
        _problem(student, nb, per_nb[nb])
        for student, per_nb in sorted(by_student.items())
        for nb in course.notebooks
        if nb in per_nb and per_nb[nb]["status"] != "graded"
    ]
    fields = ["student_id", *[e.grade_id for e in auto_cells], *[e.grade_id for e in manual_cells], *TOTAL_COLUMNS, EDITION_COLUMN]
    late_problems = [
        {"student_id": r["student_id"], "notebook": r["notebook"], "problem": r["late"]["problem"]} for r in records if "problem" in r.get("late", {})
    ]
    write_csv(out / "grades.csv", fields, rows)
    _write_log(out, records)
    summary = {
        "students": n_students,
        "notebooks_graded": sum(r["status"] == "graded" for r in records),
        "notebooks_reused": sum(bool(r.get("cached")) for r in records),
        "max_total": max_total,
        "max_auto": sum(e.points for e in auto_cells),
        "max_manual": sum(e.points for e in manual_cells),
        "manual_columns": [e.grade_id for e in manual_cells],
        "manual_pending": sum(row["pending"] for row in rows),
        "needs_review": sum(row["needs_review"] for row in rows),
        "gradebook": book or {},
        "problems": problems,
        "late_problems": late_problems,
        "matching_notes": {s: n for s, n in notes.items() if n},
        "columns": fields,
        "sandbox": sandbox,
        "redactions": [
            {"student_id": r["student_id"], "notebook": r["notebook"], "lines": r["redacted_lines"]} for r in records if r.get("redacted_lines")
        ],
    }
    write_json_atomic(out / "summary.json", summary)
    return summary
