"""Where the project lives, and where results go.

The project root is the folder that holds ``course.toml``. It is resolved once, from
an override variable or by walking up, never guessed from the working directory alone:
a notebook run from another folder must not write its results somewhere unexpected.

A notebook opened on its own (a cloud platform with only the learner wheel installed)
has no course folder. Its results then go to a ``results/`` folder in the working
directory, which is the notebook's folder in Jupyter and ``/content`` on Colab; the
variable ``LLM_ALGO_RESULTS_DIR`` chooses another folder in every case.
"""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from . import settings
from .i18n import tr

MARKER = "course.toml"
ROOT_ENV = settings.PROJECT_ROOT  # the series' override variable
RESULTS_ENV = settings.RESULTS_DIR  # the course's override for where result files go
# the folder, in the working directory, used when there is no course folder
STANDALONE_RESULTS = "results"


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
    override = settings.project_root()
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


def find_project_root(start: str | os.PathLike | None = None) -> Path | None:
    """Like :func:`resolve_project_root`, but None when there is no course folder.

    A wrong ``LLM_ALGO_PROJECT_ROOT`` still raises: a variable set by mistake must be seen.
    """
    try:
        return resolve_project_root(start)
    except ProjectRootNotFound:
        if settings.project_root():
            raise
        return None


def results_dir(root: Path | None = None) -> Path:
    """Where result files go, created if needed.

    ``LLM_ALGO_RESULTS_DIR`` when set; else ``<root>/benchmarks/results`` (the series'
    convention) when a course folder is found; else ``results/`` in the working directory
    (a notebook opened on its own, on a cloud platform say).
    """
    override = settings.results_dir()
    if root is None and override:
        path = Path(override).expanduser().resolve()
    else:
        root = root or find_project_root()
        path = root / "benchmarks" / "results" if root else Path.cwd() / STANDALONE_RESULTS
    path.mkdir(parents=True, exist_ok=True)
    return path


def where_results_go() -> str:
    """One sentence for the learner: where result files go, and why."""
    path = results_dir()
    if settings.results_dir():
        return tr("Results go to {path} ({variable} is set).", path=path, variable=RESULTS_ENV)
    root = find_project_root()
    if root:
        if settings.project_root():
            found = tr("the course folder {variable} names", variable=ROOT_ENV)
        elif Path.cwd().resolve().is_relative_to(root):
            found = tr("the course folder this notebook runs in")
        # found above the installed runtime, not above the notebook: say so, it is not next to the
        # notebook
        else:
            found = tr(
                "the course folder of the installed course runtime, not next to this "
                "notebook (which runs in {folder})",
                folder=Path.cwd().resolve(),
            )
        return tr(
            "Results go to {path}: {found}; set {variable} to choose another folder.",
            path=path,
            found=found,
            variable=RESULTS_ENV,
        )
    return tr(
        "Results go to {path}: no course folder here, so a {folder}/ folder next to the "
        "notebook (set {variable} to choose another folder).",
        path=path,
        folder=STANDALONE_RESULTS,
        variable=RESULTS_ENV,
    )


def reference_file(name: str) -> Path:
    """A reference measurement shipped with the course: ``<root>/benchmarks/reference/<name>``, or,
    without a course folder, the copy inside the learner wheel (``tools/reference/``). The path may
    not exist."""
    root = find_project_root()
    if root is not None and (root / "benchmarks" / "reference" / name).is_file():
        return root / "benchmarks" / "reference" / name
    return Path(__file__).resolve().parent / "reference" / name


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
