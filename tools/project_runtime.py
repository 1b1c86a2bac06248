"""Where the project lives, and where results go.

The project root is the folder that holds ``course.toml``. It is resolved once, from
an override variable or by walking up, never guessed from the working directory alone:
a notebook run from another folder must not write its results somewhere unexpected.
"""
from __future__ import annotations

import json
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

MARKER = "course.toml"
ROOT_ENV = "LLM_ALGO_PROJECT_ROOT"  # the series' override variable


class ProjectRootNotFound(FileNotFoundError):
    """No folder holding the course marker was found."""


def _has_marker(folder: Path) -> bool:
    return (folder / MARKER).is_file()


def resolve_project_root(start: str | os.PathLike | None = None) -> Path:
    """Return the course's root folder (the one holding ``course.toml``).

    Order: the ``LLM_ALGO_PROJECT_ROOT`` variable when set; then ``start`` (default:
    the working directory) and its parents; then the folders above this installed
    package. Raises ProjectRootNotFound with what to do when none has the marker.
    """
    override = os.environ.get(ROOT_ENV)
    if override:
        root = Path(override).expanduser().resolve()
        if not _has_marker(root):
            raise ProjectRootNotFound(
                f"{ROOT_ENV}={override!r} does not point at the course folder: "
                f"{root / MARKER} is missing. Unset the variable or point it at the "
                f"folder that holds {MARKER}."
            )
        return root
    begin = Path(start if start is not None else Path.cwd()).expanduser().resolve()
    if begin.is_file():
        begin = begin.parent
    candidates = [begin, *begin.parents]
    package_home = Path(__file__).resolve().parent
    candidates += [package_home, *package_home.parents]
    for folder in candidates:
        if _has_marker(folder):
            return folder
    raise ProjectRootNotFound(
        f"No {MARKER} found above {begin} nor above the installed course runtime. "
        f"Open the notebooks from the course folder, or set {ROOT_ENV} to that folder."
    )


def course_manifest(root: Path | None = None) -> dict[str, Any]:
    """The parsed ``course.toml``: course id, assignment name, notebook order."""
    root = root or resolve_project_root()
    with open(root / MARKER, "rb") as handle:
        return tomllib.load(handle)


def results_dir(root: Path | None = None) -> Path:
    """``<root>/benchmarks/results``, created if needed (the series' convention)."""
    path = (root or resolve_project_root()) / "benchmarks" / "results"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_json_atomic(path: str | os.PathLike, payload: Any) -> Path:
    """Write JSON so that a reader never sees half a file: temp file, fsync, rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, ensure_ascii=False, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
