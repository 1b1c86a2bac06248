"""Prove that what learners receive holds no answer and no hidden test."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import nbformat

from tools.i18n import EDITIONS

from ..course import Course
from .catalogs import CatalogError
from .editions import edition_source

MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
_MIN_LINE = 20  # shorter lines (`try:`, `pass`) are too common to mean anything


def _edition_sources(course: Course):
    """(label, notebook) of every instructor source in every edition whose catalog is complete: a
    translated edition's model answers are secrets as much as the English ones."""
    for path in course.source_paths():
        yield path.name, nbformat.read(path, as_version=4)
        for lang in EDITIONS[1:]:
            try:
                yield f"{path.name} ({lang})", edition_source(path, lang, course)
            except CatalogError:  # an edition that cannot be released yet leaks nothing either
                continue


def secret_lines(course: Course) -> dict[str, str]:
    """Distinctive lines of every solution region and hidden-test region: line -> where."""
    secrets: dict[str, str] = {}
    public: set[str] = set()  # lines that the release shows anyway (given scaffolding)
    for label, nb in _edition_sources(course):
        for cell in nb.cells:
            outside = cell.source
            for kind, begin, end in (
                ("solution", "### BEGIN SOLUTION", "### END SOLUTION"),
                ("hidden test", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"),
            ):
                pattern = re.escape(begin) + r"(.*?)" + re.escape(end)
                for region in re.findall(pattern, cell.source, flags=re.S):
                    for line in region.splitlines():
                        line = line.strip()
                        if len(line) >= _MIN_LINE and not line.startswith("#"):
                            secrets[line] = f"{kind} line of {label}"
                outside = re.sub(pattern, "", outside, flags=re.S)
            public |= {line.strip() for line in outside.splitlines()}
    return {line: where for line, where in secrets.items() if line not in public}


def scan_texts(texts: dict[str, str], secrets: dict[str, str]) -> list[str]:
    """Markers anywhere; secret lines as whole lines (a comment that quotes a value is no leak)."""
    problems = []
    for name, text in texts.items():
        for marker in MARKERS:
            if marker in text:
                problems.append(f"{name}: contains the marker '{marker}'")
        lines = {line.strip() for line in text.splitlines()}
        for line, where in secrets.items():
            if line in lines:
                problems.append(f"{name}: contains a {where}: {line[:70]}")
    return problems


def _notebook_code(path: Path) -> str:
    try:
        return "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
    except Exception:
        return path.read_text(encoding="utf-8", errors="replace")


def learner_tree_texts(course: Course) -> dict[str, str]:
    notebooks = sorted(course.release.glob("*.ipynb")) + sorted(course.release.glob("*/*.ipynb"))
    texts = {p.relative_to(course.root).as_posix(): _notebook_code(p) for p in notebooks}
    for path in sorted((course.root / "tools").rglob("*")):
        if path.is_file() and path.suffix in (".py", ".json", ".md", ".txt", ".po"):
            texts[str(path.relative_to(course.root))] = path.read_text(
                encoding="utf-8", errors="replace"
            )
    return texts


def scan_learner_tree(course: Course) -> list[str]:
    return scan_texts(learner_tree_texts(course), secret_lines(course))


_INSTRUCTOR_TOPS = ("solutions", "autograde", "tests", ".course_build")


def _archive_texts(
    label: str, zf: zipfile.ZipFile, problems: list[str], depth: int = 0
) -> dict[str, str]:
    """Every file of an archive as text (notebooks as their cells' code), wheels inside it opened
    too."""
    texts = {}
    for info in zf.infolist():
        parts = info.filename.split("/")
        if any(part in _INSTRUCTOR_TOPS for part in parts[: 2 if depth == 0 else 1]):
            problems.append(f"{label}: holds instructor folder {info.filename}")
        if info.is_dir():
            continue
        raw = zf.read(info)
        name = f"{label}:{info.filename}"
        if info.filename.endswith(".whl"):
            if depth:
                problems.append(f"{name}: a wheel inside a wheel")
                continue
            try:
                with zipfile.ZipFile(io.BytesIO(raw)) as inner:
                    texts.update(_archive_texts(name, inner, problems, depth + 1))
            except zipfile.BadZipFile:
                problems.append(f"{name}: not a readable wheel")
            continue
        text = raw.decode("utf-8", errors="replace")
        if info.filename.endswith(".ipynb"):
            try:
                text = "\n".join(c.source for c in nbformat.reads(text, as_version=4).cells)
            except Exception:
                pass
        texts[name] = text
    return texts


def scan_zip(course: Course, archive: Path) -> list[str]:
    """Scan the learner zip, and every wheel inside it, for instructor folders, markers and secret
    lines."""
    problems: list[str] = []
    with zipfile.ZipFile(archive) as zf:
        texts = _archive_texts(archive.name, zf, problems)
    return problems + scan_texts(texts, secret_lines(course))
