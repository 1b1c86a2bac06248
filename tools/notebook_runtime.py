"""What every notebook of the course uses: set-up, versions, and the learner's own
functions from an earlier notebook."""
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

from .project_runtime import resolve_project_root


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


def course_setup(quiet: bool = False) -> dict[str, Any]:
    """Apply the course figure style and print one line about the runtime.

    torch is not imported here (it costs seconds and notebooks 01-04 never use it);
    notebook 05 reports the device it actually ran on in its result file.
    """
    from .plotting import apply_style

    apply_style()
    summary: dict[str, Any] = {"python": platform.python_version(), "torch": package_version("torch")}
    if grading_mode():  # the grader needs no runtime report
        summary["grading"] = grading_mode()
        return summary
    summary["nvidia_driver"] = nvidia_driver_present()
    if not quiet:
        torch = f"torch {summary['torch']}" if summary["torch"] else "torch not installed (only notebook 05 needs it)"
        gpu = "NVIDIA driver found" if summary["nvidia_driver"] else "no NVIDIA GPU (CPU only: every exercise works)"
        print(f"Python {summary['python']} · {torch} · {gpu}")
    return summary


class LearnerFunctionMissing(RuntimeError):
    """An earlier notebook's function is not available (file absent or name absent)."""


def _notebook_path(notebook: str, search: list[Path] | None) -> Path:
    name = notebook if notebook.endswith(".ipynb") else f"{notebook}.ipynb"
    folders = list(search or [])
    folders.append(Path.cwd())
    try:
        folders.append(resolve_project_root() / "notebooks")
    except FileNotFoundError:
        pass
    for folder in folders:
        candidate = Path(folder) / name
        if candidate.is_file():
            return candidate
    raise LearnerFunctionMissing(
        f"Could not find your notebook {name} next to this one. Keep the course notebooks "
        f"in one folder and finish {name} first."
    )


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
                exec(compile(source, f"<{path.name}>", "exec"), namespace)
        except SyntaxError as exc:
            raise LearnerFunctionMissing(f"{path.name} has a syntax error at line {exc.lineno}: fix it first.") from exc
        except Exception as exc:
            raise LearnerFunctionMissing(
                f"Running the exercise cells of {path.name} failed ({type(exc).__name__}: {exc}). "
                "Make that notebook run top to bottom first."
            ) from exc
    missing = [name for name in names if not callable(namespace.get(name))]
    if missing:
        raise LearnerFunctionMissing(f"{path.name} does not define {', '.join(missing)}: finish it first.")
    return {name: namespace[name] for name in names}
