"""What every notebook of the course uses: set-up, versions, the learner's own functions from an
earlier notebook, and the check before submitting.

The learner's side only: what changes while nbgrader runs a notebook is in ``at_grading``, the
graded cells a submission must keep in ``integrity``, the running notebook's file in ``frontend``.
Run as ``python -m tools.notebook_runtime NOTEBOOK.ipynb`` it checks a saved notebook from a
terminal."""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
from importlib import metadata
from pathlib import Path
from types import FunctionType
from typing import Any

from . import settings
from .at_grading import grading_mode, setup_for_grading
from .frontend import running_notebook, running_notebook_name
from .i18n import LIST, error_text, install, joined, say, set_edition, tr
from .integrity import (
    UNFINISHED,
    identify_notebook,
    release_cells,
    release_stem,
    submission_findings,
)
from .project_runtime import find_project_root

__all__ = [  # what the notebooks import from here
    "LearnerFunctionMissing",
    "check_submission",
    "course_setup",
    "find_learner_notebook",
    "grading_mode",
    "load_learner_functions",
]


def package_version(name: str) -> str | None:
    """The installed version of distribution ``name``, or None when it is absent."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def nvidia_driver_present() -> bool:
    """True when an NVIDIA driver is loaded (Linux) or ``nvidia-smi`` is on PATH.

    A cheap probe: importing torch to ask costs seconds, and only notebook 05 needs torch.
    """
    import shutil

    return Path("/proc/driver/nvidia/version").is_file() or shutil.which("nvidia-smi") is not None


def course_setup(quiet: bool = False, language: str | None = None) -> dict[str, Any]:
    """Apply the course figure style and print one line about the runtime.

    ``language`` is the notebook's edition (a translated edition's set-up cell passes it; the
    English one passes nothing): the learner's language unless ``COURSE_LANG`` says otherwise.
    torch is not imported here (it costs seconds and notebooks 01-04 never use it);
    notebook 05 reports the device it actually ran on in its result file.
    """
    if language is not None:
        set_edition(language)

    summary: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": package_version("torch"),
    }
    if grading_mode():  # the grader needs no runtime report, and draws no figure (so no style)
        return setup_for_grading(summary)
    from .plotting import apply_style

    apply_style()
    install()  # the Chinese edition: the course's CJK font
    summary["nvidia_driver"] = nvidia_driver_present()
    if not quiet:
        torch = (
            f"torch {summary['torch']}"
            if summary["torch"]
            else tr("torch not installed (only notebook 05 needs it)")
        )
        gpu = (
            tr("NVIDIA driver found")
            if summary["nvidia_driver"]
            else tr("no NVIDIA GPU (CPU only: every exercise works)")
        )
        say("Python {python} · {torch} · {gpu}", python=summary["python"], torch=torch, gpu=gpu)
    return summary


class LearnerFunctionMissing(RuntimeError):
    """An earlier notebook's function is not available (file absent or name absent)."""


def notebook_folders() -> list[Path]:
    """Where the running notebook's siblings are: the working directory (the notebook's folder
    in Jupyter, ``/content`` on Colab), the folder Jupyter or VS Code says the notebook is in,
    and the course folder's ``notebooks/``."""
    folders = [Path.cwd()]
    session = settings.session_name() or ""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        session = (shell.user_ns.get("__vsc_ipynb_file__") if shell else None) or session
    except ImportError:
        pass
    if session.endswith(".ipynb") and Path(session).is_file():
        folders.append(Path(session).resolve().parent)
    root = find_project_root()
    if root is not None:
        folders.append(root / "notebooks")
    return folders


def _notebook_path(notebook: str, search: list[Path] | None) -> Path:
    name = notebook if notebook.endswith(".ipynb") else f"{notebook}.ipynb"
    folders = [*(search or []), *notebook_folders()]
    for folder in folders:
        candidate = Path(folder) / name
        if candidate.is_file():
            return candidate
    stem = release_stem(Path(name).stem)
    for folder in folders:  # a platform's renamed copy ("Copy of …", "… (1)"): the newest one
        renamed = [p for p in Path(folder).glob("*.ipynb") if release_stem(p.stem) == stem]
        if renamed:
            return max(renamed, key=lambda p: p.stat().st_mtime)
    raise LearnerFunctionMissing(
        tr(
            "Could not find your notebook {name} next to this one (looked in {folders}). "
            "Keep the course notebooks "
            "in one folder (on Colab: upload {name} to /content with the Files pane) and "
            "finish {name} first.",
            name=name,
            folders=joined([str(f) for f in dict.fromkeys(Path(f) for f in folders)], LIST),
        )
    )


def find_learner_notebook(notebook: str, search: list[Path] | None = None) -> Path:
    """The file ``load_learner_functions(notebook, ...)`` reads (same search), so a notebook can
    say which copy it loaded. Raises LearnerFunctionMissing when there is none."""
    return _notebook_path(notebook, search)


def _python_source(source: str) -> str:
    """A cell's code as plain Python: IPython magics (``%pip``) become calls, as a kernel would run
    them."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return source
    return TransformerManager().transform_cell(source)


def load_learner_functions(
    notebook: str, names: list[str], search: list[Path] | None = None
) -> dict[str, FunctionType]:
    """Load functions that the learner wrote in an earlier notebook.

    Reads ``notebook`` (saved on disk: save it first) and runs, in a fresh namespace,
    its import cells and the exercise (solution) cells that define the requested names.
    Returns ``{name: function}``. An unfinished exercise still loads: calling it raises
    NotImplementedError, which the caller turns into a "finish TODO n first" message.
    Raises LearnerFunctionMissing when the file or a name is absent, or a cell has a
    syntax error.
    """
    path = _notebook_path(notebook, search)
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    namespace: dict[str, Any] = {"__name__": f"learner_{path.stem}"}
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell.get("source", ""))
        meta = cell.get("metadata", {}).get("nbgrader", {})
        tags = cell.get("metadata", {}).get("tags", [])
        if not (meta.get("solution") or "imports" in tags):
            continue
        if meta.get("grade") and not meta.get("solution"):
            continue  # test cells are never re-run here
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # set-up cells print; not wanted here
                exec(compile(_python_source(source), f"<{path.name}>", "exec"), namespace)
        except SyntaxError as exc:
            raise LearnerFunctionMissing(
                tr(
                    "{file} has a syntax error at line {line}: fix it first.",
                    file=path.name,
                    line=exc.lineno,
                )
            ) from exc
        except Exception as exc:
            raise LearnerFunctionMissing(
                tr(
                    "Running the exercise cells of {file} failed ({error}). Make that "
                    "notebook run top to bottom first.",
                    file=path.name,
                    error=error_text(exc),
                )
            ) from exc
    missing = [name for name in names if not callable(namespace.get(name))]
    if missing:
        raise LearnerFunctionMissing(
            tr(
                "{file} does not define {names}: finish it first.",
                file=path.name,
                names=joined(missing, LIST),
            )
        )
    return {name: namespace[name] for name in names}


# ----------------------------------------------------------------------------- before submitting


def _colab_notebook() -> dict | None:
    """On Colab, the notebook being edited (Colab keeps it in Drive, not on the kernel's disk)."""
    try:
        from google.colab import _message  # type: ignore[import-not-found]

        return _message.blocking_request("get_ipynb", timeout_sec=30)["ipynb"]
    except Exception:
        return None


def _read_notebook(file: Path) -> tuple[dict | None, str]:
    """(the notebook's JSON, "") or (None, why it cannot be read, in the learner's language)."""
    try:
        return json.loads(file.read_text(encoding="utf-8")), ""
    except FileNotFoundError:
        return None, tr("there is no file {file}", file=file)
    except (OSError, ValueError) as exc:
        return None, tr("cannot read {file}: {error}", file=file, error=exc)


def check_submission(notebook: str, path: str | os.PathLike | None = None) -> list[str]:
    """Before submitting: are the graded cells of ``notebook`` intact (grade ids, nbgrader
    metadata that a platform may rewrite or drop)? Prints a report and returns the problems
    (empty when the grader will find every answer).

    Reads ``path`` when given. Else, on Colab, the open notebook; else the running notebook's own
    file when the frontend names it (a renamed copy included); else the file found next to this
    one by its course name, with a loud warning when the running notebook has another name or
    several copies lie there. ``notebook`` is a release name; a file whose name is none
    (``Copy of 01.ipynb``) is recognised by its graded cells' ids. Raises ValueError when it is
    neither a course name nor a file recognisable as a course notebook.
    """
    if grading_mode():
        return []
    data, where, warnings = None, "", []
    file = Path(path) if path is not None else None
    if file is None:
        data, where = _colab_notebook(), tr("the open notebook")
    if data is None and file is None:
        file = running_notebook()
        if file is None:
            try:
                file = _notebook_path(notebook, None)
            except LearnerFunctionMissing as exc:
                say("✗ {problem}", problem=str(exc))
                return [str(exc)]
            warnings += _checked_file_warnings(notebook, file)
    if data is None:
        data, why = _read_notebook(file)
        if data is None:
            try:
                release_cells(notebook)
            except ValueError:
                raise ValueError(
                    tr(
                        "{why}; and {notebook} is not a notebook of this course",
                        why=why,
                        notebook=repr(notebook),
                    )
                ) from None
            say("✗ {problem}", problem=why)
            return [why]
        import time

        where = tr(
            "{name} as saved at {time} (unsaved edits are not checked: save, then run "
            "this cell again)",
            name=file.name,
            time=time.strftime("%H:%M:%S", time.localtime(file.stat().st_mtime)),
        )
    try:
        expected = release_cells(notebook)
    except ValueError as exc:
        identified = identify_notebook(data)
        if identified is None:
            raise ValueError(
                tr(
                    "{error}; nor do the cells of {file} carry the grade ids of one (is "
                    "it a notebook of this course?)",
                    error=exc,
                    file=file.name if file else tr("the open notebook"),
                )
            ) from None
        expected = release_cells(identified)
        where += tr(", recognised as {notebook} by its graded cells", notebook=identified)
    return _report(where, data, expected, warnings)


def _report(where: str, data: dict, expected: list[dict], warnings: list[str]) -> list[str]:
    """Print what check_submission found in ``data`` (the notebook's JSON); returns the problems."""
    for line in warnings:
        say("⚠ {warning}", warning=line)
    problems, notes = submission_findings(data, expected)
    if problems:
        say(
            "✗ {where}: {count} problem(s) would cost points at grading:",
            where=where,
            count=len(problems),
        )
    else:
        say(
            "✓ {where}: all {count} graded cells are intact; the grader will find every answer.",
            where=where,
            count=len(expected),
        )
    for line in problems:
        say("  ✗ {problem}", problem=line)
    for line in notes:
        if line.template != UNFINISHED:  # an unfinished answer is said once, on the line below
            say("  · {note}", note=line)
    unfinished = [
        cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        for cell in data.get("cells", [])
        if cell.get("cell_type") == "code"
        and cell.get("metadata", {}).get("nbgrader", {}).get("solution")
        and "raise NotImplementedError" in "".join(cell.get("source", ""))
    ]
    if unfinished:  # intact cells are not finished answers: say which still hold the stub
        say(
            "  · still to do (they hold `raise NotImplementedError()`, which earns "
            "nothing): {cells}",
            cells=joined([str(gid) for gid in unfinished], LIST),
        )
    return [p.english() for p in problems]


def _checked_file_warnings(notebook: str, checked: Path) -> list[str]:
    """Why the file found by its course name may not be the one the learner works in."""
    terminal = 'python -m tools.notebook_runtime "YOUR FILE.ipynb"'
    running = running_notebook_name()
    if running is not None and Path(running).name != checked.name:
        return [
            tr(
                "CHECKED {checked}, BUT THIS NOTEBOOK IS {running}: the report below is "
                "about {checked}. "
                "Save this notebook, then check it from a terminal: {command}",
                checked=checked.name,
                running=Path(running).name,
                command=terminal,
            )
        ]
    stem = release_stem(checked.stem)
    copies = sorted(p.name for p in checked.parent.glob("*.ipynb") if release_stem(p.stem) == stem)
    if running is None and len(copies) > 1:
        return [
            tr(
                "{count} copies of this notebook lie in {folder} ({names}) and this "
                "frontend does not say which one is open: "
                "checked {checked}. If you work in another one, check it from a terminal: "
                "{command}",
                count=len(copies),
                folder=checked.parent,
                names=joined(copies, LIST),
                checked=checked.name,
                command=terminal,
            )
        ]
    return []


# python -m tools.notebook_runtime NOTEBOOK.ipynb ...: the same check from a terminal
if __name__ == "__main__":
    import sys

    if len(sys.argv) < 2:
        sys.exit("usage: python -m tools.notebook_runtime NOTEBOOK.ipynb [...]")
    failed = False
    for arg in sys.argv[1:]:
        try:
            failed = bool(check_submission(arg, arg)) or failed
        except ValueError as exc:
            print(f"✗ {arg}: {exc}")
            failed = True
    sys.exit(1 if failed else 0)
