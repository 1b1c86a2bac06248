"""The grading master: the course folder generated from the sources without their hidden tests (one
nbgrader course folder per edition) and ``judge.json``, what the trusted judge needs. It is built
once per state of the sources in the course's ``.course_build/masters`` and copied into each OUT;
and the edition a submission was written in, read against each edition's master."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path

import nbformat

from tools.i18n import EDITIONS, notebook_language
from tools.project_runtime import write_json_atomic

from ..course import Course
from ..judging.ideas import JudgeSpec, NotebookSpec, course_tests
from ..ledger.layout import Out
from .editions import feedback_translations
from .release import generate


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def grading_master(course: Course, out: Path) -> Path:
    """In ``out`` (OUT, or a cluster worker's folder laid out as OUT): the course folder generated
    from the sources without their hidden tests (its gradebook restores the public test cells), plus
    ``judge.json``: the hidden tests, reference answers and given cells the trusted judge needs.
    Rebuilt when the sources or the config changed, and whenever its files no longer match their
    recorded digest.

    It is built once per state of the sources (copy_shared_master) and copied into each OUT: a
    second OUT graded from the same sources saves the two ``nbgrader generate_assignment`` runs
    (benchmarks/bench_caches.py: built 10.7 s, copied 0.01 s, 15-25% of a class of 6's first
    grading)."""
    master, record = Out(out).master, Out(out).master_digest
    digest = course.sources_digest()
    try:
        stamp = json.loads(record.read_text())
        valid = stamp.get("sources") == digest and stamp.get("tree") == _tree_digest(master)
    except (OSError, ValueError):
        valid = False
    if not valid:
        shutil.rmtree(master, ignore_errors=True)
        # the course folder is not writable: build in OUT itself
        if not copy_shared_master(course, digest, master):
            build_master(course, master)
        write_json_atomic(record, {"sources": digest, "tree": _tree_digest(master)})
    return master


MASTERS_KEPT = 4  # states of the sources whose masters stay in the course's build folder


def master_cache_key(digest: str) -> str:
    """A master's name in the cache: the sources' digest and the nbgrader that generated it."""
    from nbgrader import __version__ as nbgrader_version

    return f"{digest}-nbgrader{nbgrader_version}"


def copy_shared_master(course: Course, digest: str, into: Path) -> bool:
    """Copy the grading master of these sources from ``.course_build/masters/`` (the instructor's
    own folder, never visible inside the sandbox) into ``into``: built by the first grading run that
    needs it while the others wait on a lock, checked against its recorded tree digest before each
    use (a changed file means a rebuild), and copied under the same lock. False when the course
    folder cannot be written."""
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
    """Keep the newest MASTERS_KEPT masters (the sources of earlier states are rarely graded
    again)."""
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
    """Generate a grading master into ``master``: one nbgrader course folder per edition, and
    judge.json."""
    released = generate(course, master, strip_hidden=True)
    # each translated edition's own master: its read-only cells are in its language
    for lang in EDITIONS[1:]:
        generate(course, edition_master(master, lang), strip_hidden=True, language=lang)
    tests = course_tests(course.source_paths())
    notebooks, solutions = {}, {}
    for name in course.notebooks:
        given = []
        for cell in nbformat.read(released / f"{name}.ipynb", as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if (
                cell.cell_type == "code"
                and not meta.get("solution")
                and "imports" not in cell.metadata.get("tags", [])
            ):
                given.append(cell.source.strip())
        notebooks[name] = NotebookSpec(tests.notebooks[name].tests, tuple(given))
        solutions.update(tests.notebooks[name].solutions)
    write_json_atomic(
        master / "judge.json",
        JudgeSpec(notebooks, solutions, feedback_translations(course).by_language).to_json(),
    )


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
