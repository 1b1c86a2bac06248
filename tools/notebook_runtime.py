"""What every notebook of the course uses: set-up, versions, and the learner's own
functions from an earlier notebook."""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import re
from importlib import metadata
from pathlib import Path
from types import FunctionType
from typing import Any

from .i18n import localize, tr
from .project_runtime import find_project_root


def package_version(name: str) -> str | None:
    """The installed version of distribution ``name``, or None when it is absent."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def grading_mode() -> str | None:
    """'autograde' or 'validate' while nbgrader runs the notebook, else None."""
    return os.environ.get("NBGRADER_EXECUTION") or None


def runtime_summary() -> dict[str, Any]:
    """Python, torch and accelerator facts, for the set-up cell and result files."""
    summary: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": package_version("torch"),
        "cuda_available": False,
        "device": "cpu",
    }
    try:
        import torch

        summary["cuda_available"] = bool(torch.cuda.is_available())
        if summary["cuda_available"]:
            summary["device"] = torch.cuda.get_device_name(0)
            summary["cuda"] = torch.version.cuda
    except ImportError:
        summary["torch"] = None
    return summary


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
    from .i18n import install, set_edition

    if language is not None:
        set_edition(language)

    summary: dict[str, Any] = {"python": platform.python_version(), "torch": package_version("torch")}
    if grading_mode():  # the grader needs no runtime report, and draws no figure (so no style)
        install()  # the Chinese edition: printed lines in the learner's language
        summary["grading"] = grading_mode()
        _figures_as_short_text()
        return summary
    from .plotting import apply_style

    apply_style()
    install()  # the Chinese edition: the course's CJK font, figure text translated as drawn
    summary["nvidia_driver"] = nvidia_driver_present()
    if not quiet:
        torch = f"torch {summary['torch']}" if summary["torch"] else tr("torch not installed (only notebook 05 needs it)")
        gpu = tr("NVIDIA driver found") if summary["nvidia_driver"] else tr("no NVIDIA GPU (CPU only: every exercise works)")
        print(localize(f"Python {summary['python']} · {torch} · {gpu}"))
    return summary


def figure_placeholder(fig) -> str:
    """What a figure shows where it is not drawn (at grading): its title, never a Python repr."""
    title = fig.get_suptitle()
    title = title or next((ax.get_title() for ax in fig.axes if ax.get_title()), "")
    title = localize(title.splitlines()[0]) if title else ""
    return (
        tr("[figure: {title} (drawn in your notebook, not while grading)]", title=title)
        if title
        else tr("[figure (drawn in your notebook, not while grading)]")
    )


def _figures_as_short_text() -> None:
    """At grading the kernel draws no figures (a non-interactive backend): a figure that a cell
    displays would show as ``<Figure size 900x280 with 1 Axes>`` in formgrader and on the feedback
    page. Show its title instead."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):  # the judge's runner: nothing is displayed
        return
    from matplotlib.figure import Figure

    shell.display_formatter.formatters["text/plain"].for_type(Figure, lambda fig, printer, cycle: printer.text(figure_placeholder(fig)))


class LearnerFunctionMissing(RuntimeError):
    """An earlier notebook's function is not available (file absent or name absent)."""


# What platforms and Jupyter do to a name: "Copy of X", "X (1)", "X-Copy1", "X copy", "X_copy2".
_RENAMES = [re.compile(p, re.IGNORECASE) for p in (r"^copy of\s+", r"\s*\(\d+\)$", r"[-_ ]copy\d*$")]


def release_stem(stem: str) -> str:
    """The release name a renamed notebook most likely had (lower case); the grader matches
    submitted files by the same rule."""
    previous = None
    stem = stem.strip()
    while previous != stem:
        previous = stem
        for pattern in _RENAMES:
            stem = pattern.sub("", stem).strip()
    return stem.lower()


def notebook_folders() -> list[Path]:
    """Where the running notebook's siblings are: the working directory (the notebook's folder
    in Jupyter, ``/content`` on Colab), the folder Jupyter or VS Code says the notebook is in,
    and the course folder's ``notebooks/``."""
    folders = [Path.cwd()]
    session = os.environ.get("JPY_SESSION_NAME", "")
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
        f"Could not find your notebook {name} next to this one (looked in "
        f"{', '.join(str(f) for f in dict.fromkeys(Path(f) for f in folders))}). Keep the course notebooks "
        f"in one folder (on Colab: upload {name} to /content with the Files pane) and finish {name} first."
    )


def find_learner_notebook(notebook: str, search: list[Path] | None = None) -> Path:
    """The file ``load_learner_functions(notebook, ...)`` reads (same search), so a notebook can
    say which copy it loaded. Raises LearnerFunctionMissing when there is none."""
    return _notebook_path(notebook, search)


def _python_source(source: str) -> str:
    """A cell's code as plain Python: IPython magics (``%pip``) become calls, as a kernel would run them."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return source
    return TransformerManager().transform_cell(source)


def load_learner_functions(notebook: str, names: list[str], search: list[Path] | None = None) -> dict[str, FunctionType]:
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
            raise LearnerFunctionMissing(f"{path.name} has a syntax error at line {exc.lineno}: fix it first.") from exc
        except Exception as exc:
            raise LearnerFunctionMissing(
                f"Running the exercise cells of {path.name} failed ({type(exc).__name__}: {exc}). Make that notebook run top to bottom first."
            ) from exc
    missing = [name for name in names if not callable(namespace.get(name))]
    if missing:
        raise LearnerFunctionMissing(f"{path.name} does not define {', '.join(missing)}: finish it first.")
    return {name: namespace[name] for name in names}


# ----------------------------------------------------------------------------- before submitting

RELEASE_CELLS = Path(__file__).with_name("release_cells.json")  # written into the learner wheel by the bundle
_NBGRADER_KEYS = ("grade", "solution", "locked", "points")


def describe_release_cells(notebook: dict) -> list[dict[str, Any]]:
    """The graded cells of a release notebook, as :func:`submission_problems` compares them."""
    cells = []
    for cell in notebook.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader") or {}
        if not meta.get("grade_id"):
            continue
        source = "".join(cell.get("source", ""))
        cells.append(
            {
                "grade_id": meta["grade_id"],
                **{key: meta.get(key) for key in _NBGRADER_KEYS},
                "defines": re.findall(r"^def (\w+)\(", source, re.M) if meta.get("solution") else [],
            }
        )
    return cells


def _known_release_cells() -> dict[str, list[dict[str, Any]]]:
    """{release name (lower case): its graded cells}: from the learner wheel's data, else from
    the course folder's ``notebooks/``."""
    if RELEASE_CELLS.is_file():
        known = json.loads(RELEASE_CELLS.read_text(encoding="utf-8"))["notebooks"]
    else:
        root = find_project_root()
        folder = root / "notebooks" if root else None
        known = (
            {p.stem: describe_release_cells(json.loads(p.read_text(encoding="utf-8"))) for p in sorted(folder.glob("*.ipynb"))}
            if folder and folder.is_dir()
            else {}
        )
    return {name.lower(): cells for name, cells in known.items()}


def release_cells(notebook: str) -> list[dict[str, Any]]:
    """The graded cells that notebook ``notebook`` (a release name, or a platform's rename of
    one) must keep."""
    stem = release_stem(Path(notebook).stem)
    known = _known_release_cells()
    if stem not in known:
        raise ValueError(f"{notebook!r} is not a notebook of this course; expected one of: {', '.join(sorted(known)) or '(none found)'}")
    return known[stem]


def identify_notebook(notebook: dict) -> str | None:
    """Which course notebook a notebook's JSON is, by the grade ids its cells carry (any file
    name): the release name that shares the most grade ids with it, or None when it shares none
    (or two notebooks share as many)."""
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    ids = {
        str(meta["grade_id"])
        for cell in (cells if isinstance(cells, list) else [])
        if isinstance(cell, dict) and isinstance(meta := (cell.get("metadata") or {}).get("nbgrader"), dict) and meta.get("grade_id")
    }
    scores = sorted(((len(ids & {c["grade_id"] for c in cells}), name) for name, cells in _known_release_cells().items()), reverse=True)
    if not scores or scores[0][0] == 0 or (len(scores) > 1 and scores[1][0] == scores[0][0]):
        return None
    return scores[0][1]


def submission_problems(notebook: dict, expected: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(problems that cost points at grading, notes that do not) for a notebook's JSON."""
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        return ["this file is not a Jupyter notebook (no list of cells)"], []
    problems, notes = [], []
    found: dict[str, list[dict]] = {}
    for cell in cells:
        meta = (cell.get("metadata") or {}).get("nbgrader") if isinstance(cell, dict) else None
        if isinstance(meta, dict) and meta.get("grade_id"):
            found.setdefault(str(meta["grade_id"]), []).append(cell)
    for want in expected:
        gid, answer = want["grade_id"], bool(want["solution"])
        kind = "answer cell" if answer else "test cell"
        present = found.get(gid, [])
        if not present:
            if not answer:
                notes.append(f"test cell '{gid}' is gone; the grader puts it back")
                continue
            orphan = [
                c
                for c in cells
                if isinstance(c, dict)
                and c.get("cell_type") == "code"
                and not (c.get("metadata") or {}).get("nbgrader")
                and any(re.search(rf"^def {re.escape(f)}\(", "".join(c.get("source", "")), re.M) for f in want["defines"])
            ]
            if orphan:
                problems.append(
                    f"the answer cell that defines {', '.join(want['defines'])} lost its grading metadata "
                    f"(nbgrader grade_id '{gid}'; your platform rewrote it): the grader cannot find your answer. "
                    "Paste your code into that cell of a fresh copy of the release notebook."
                )
            else:
                problems.append(
                    f"answer cell '{gid}' is missing: the grader finds no answer for it. "
                    "Take the cell from a fresh copy of the release notebook and put your code back in."
                )
            continue
        if len(present) > 1:
            problems.append(f"{kind} '{gid}' appears {len(present)} times (a copied cell): keep one and delete the copies")
        meta = present[0]["metadata"]["nbgrader"]
        changed = [
            f"{key} {want[key]!r} → {meta.get(key)!r}"
            for key in _NBGRADER_KEYS
            if key in want and want[key] is not None and meta.get(key) != want[key]
        ]
        if changed:
            problems.append(
                f"{kind} '{gid}' has changed grading metadata ({', '.join(changed)}): take the cell from a fresh copy of the release notebook"
            )
        if answer and "raise NotImplementedError()" in "".join(present[0].get("source", "")):
            notes.append(f"answer cell '{gid}' still raises NotImplementedError: that exercise is not done yet")
    known = {want["grade_id"] for want in expected}
    for gid in sorted(set(found) - known):
        problems.append(f"cell '{gid}' is not a graded cell of this notebook (pasted from another one?): remove its metadata or the cell")
    return problems, notes


def _colab_notebook() -> dict | None:
    """On Colab, the notebook being edited (Colab keeps it in Drive, not on the kernel's disk)."""
    try:
        from google.colab import _message  # type: ignore[import-not-found]

        return _message.blocking_request("get_ipynb", timeout_sec=30)["ipynb"]
    except Exception:
        return None


def running_notebook() -> Path | None:
    """The file of the notebook this kernel runs, when the frontend says: VS Code sets
    ``__vsc_ipynb_file__`` (a full path), Jupyter sets ``__session__`` and ``JPY_SESSION_NAME`` (the
    notebook's path, often relative to the server's root, while the kernel runs in the notebook's
    folder). None outside a notebook, on frontends that say nothing, or when the name given is
    not a file here; see :func:`running_notebook_name` for the name alone."""
    name = running_notebook_name()
    if name is None:
        return None
    given = Path(name).expanduser()
    for candidate in (given, Path.cwd() / given, Path.cwd() / given.name):
        if candidate.suffix == ".ipynb" and candidate.is_file():
            return candidate.resolve()
    return None


def running_notebook_name() -> str | None:
    """The path or name the frontend gives for the running notebook (see :func:`running_notebook`), or None."""
    names = []
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            names += [shell.user_ns.get("__vsc_ipynb_file__"), shell.user_ns.get("__session__")]
    except ImportError:
        pass
    names.append(os.environ.get("JPY_SESSION_NAME"))
    return next((str(n) for n in names if isinstance(n, (str, os.PathLike)) and str(n).endswith(".ipynb")), None)


def _read_notebook(file: Path) -> tuple[dict | None, str]:
    """(the notebook's JSON, "") or (None, why it cannot be read)."""
    try:
        return json.loads(file.read_text(encoding="utf-8")), ""
    except FileNotFoundError:
        return None, f"there is no file {file}"
    except (OSError, ValueError) as exc:
        return None, f"cannot read {file}: {exc}"


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
                print(localize(f"✗ {localize(str(exc))}"))
                return [str(exc)]
            warnings += _checked_file_warnings(notebook, file)
    if data is None:
        data, why = _read_notebook(file)
        if data is None:
            try:
                release_cells(notebook)
            except ValueError:
                raise ValueError(f"{why}; and {notebook!r} is not a notebook of this course") from None
            print(localize(f"✗ {localize(why)}"))
            return [why]
        import time

        where = tr("{name}, saved {time} (save first)", name=file.name, time=time.strftime("%H:%M:%S", time.localtime(file.stat().st_mtime)))
    try:
        expected = release_cells(notebook)
    except ValueError as exc:
        identified = identify_notebook(data)
        if identified is None:
            raise ValueError(
                f"{exc}; nor do the cells of {file.name if file else 'the open notebook'} carry the grade ids of one "
                "(is it a notebook of this course?)"
            ) from None
        expected = release_cells(identified)
        where += tr(", recognised as {notebook} by its graded cells", notebook=identified)
    for line in warnings:
        print(localize(f"⚠ {localize(line)}"))
    problems, notes = submission_problems(data, expected)
    if problems:
        print(localize(f"✗ {where}: {len(problems)} problem(s) would cost points at grading:"))
    else:
        print(localize(f"✓ {where}: all {len(expected)} graded cells are intact; the grader will find every answer."))
    for line in problems:
        print(localize(f"  ✗ {localize(line)}"))
    for line in notes:
        print(localize(f"  · {localize(line)}"))
    unfinished = [
        cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        for cell in data.get("cells", [])
        if cell.get("cell_type") == "code"
        and cell.get("metadata", {}).get("nbgrader", {}).get("solution")
        and "raise NotImplementedError" in "".join(cell.get("source", ""))
    ]
    if unfinished:  # intact cells are not finished answers: say which still hold the stub
        print(localize(f"  · still to do (they hold `raise NotImplementedError()`, which earns nothing): {', '.join(map(str, unfinished))}"))
    return problems


def _checked_file_warnings(notebook: str, checked: Path) -> list[str]:
    """Why the file found by its course name may not be the one the learner works in."""
    terminal = 'python -m tools.notebook_runtime "YOUR FILE.ipynb"'
    running = running_notebook_name()
    if running is not None and Path(running).name != checked.name:
        return [
            f"CHECKED {checked.name}, BUT THIS NOTEBOOK IS {Path(running).name}: the report below is about "
            f"{checked.name}. Save this notebook, then check it from a terminal: {terminal}"
        ]
    stem = release_stem(checked.stem)
    copies = sorted(p.name for p in checked.parent.glob("*.ipynb") if release_stem(p.stem) == stem)
    if running is None and len(copies) > 1:
        return [
            f"{len(copies)} copies of this notebook lie in {checked.parent} ({', '.join(copies)}) and this "
            f"frontend does not say which one is open: checked {checked.name}. If you work in another "
            f"one, check it from a terminal: {terminal}"
        ]
    return []


if __name__ == "__main__":  # python -m tools.notebook_runtime NOTEBOOK.ipynb ...: the same check from a terminal
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
