"""The zip handed to learners: release notebooks, the runtime, the environment files, and a
learner wheel that a notebook opened on its own (Colab, Kaggle, a local Jupyter) installs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tools.integrity import describe_release_cells

from ..course import Course
from ..model import JsonRecord

LEARNER_README = Path(__file__).resolve().parents[1] / "LEARNER_README.md"
TOP = "serving-overlap-course"

# Loose on purpose: a platform's own torch and matplotlib satisfy them (Colab ships both, and
# installing torch again costs gigabytes). The instructor's install keeps the exact pins.
LEARNER_DEPENDENCIES = [
    "torch>=2.1",
    "matplotlib>=3.7",
    "numpy",
    "ipywidgets>=8",
    "tqdm",
    "jsonschema",
    "babel",
]

_WHEEL_PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = {name}
version = {version}
description = {description}
requires-python = {python}
dependencies = {dependencies}

[tool.setuptools.packages.find]
include = ["tools*"]

[tool.setuptools.package-data]
tools = ["schemas/*.json", "reference/*.json", "release_cells.json", "locale/*/*.po", "fonts/*"]
"""


def learner_files(course: Course) -> list[tuple[Path, str]]:
    root = course.root
    files = [
        (p, p.relative_to(root).as_posix())
        for p in sorted(course.release.glob("*.ipynb")) + sorted(course.release.glob("*/*.ipynb"))
    ]
    for path in sorted((root / "tools").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files.append((path, str(path.relative_to(root))))
    for name in ("course.toml", "pyproject.toml", "environment.yml"):
        files.append((root / name, name))
    for path in sorted((root / "benchmarks" / "reference").glob("*.json")):
        files.append((path, str(path.relative_to(root))))
    files.append((root / "benchmarks" / "results" / "README.md", "benchmarks/results/README.md"))
    return files


_COUNTS = {
    1: "One",
    2: "Two",
    3: "Three",
    4: "Four",
    5: "Five",
    6: "Six",
    7: "Seven",
    8: "Eight",
    9: "Nine",
}


def learner_readme(course: Course) -> str:
    """The learner pack's README, its notebook count, learning path and dependencies filled in
    from the course manifest (course.toml), so that they cannot drift from the notebooks."""
    from tools.project_runtime import course_manifest

    notebooks = course_manifest(course.root)["notebooks"]
    path = "\n".join(
        f"{i}. `{nb['name']}.ipynb`: {nb['title']} ({nb['minutes']} min)"
        for i, nb in enumerate(notebooks, 1)
    )
    needs = [(nb["name"][:2], [n[:2] for n in nb["needs"]]) for nb in notebooks if nb.get("needs")]
    said = "; ".join(
        f"notebook {nb} loads your functions from notebooks {' and '.join(deps)}"
        for nb, deps in needs
    )
    upload = "; ".join(
        f"upload {' and '.join(deps)} to `/content` next to {nb}" for nb, deps in needs
    )
    text = LEARNER_README.read_text(encoding="utf-8")
    text = text.replace("<!-- course:count -->", _COUNTS.get(len(notebooks), str(len(notebooks))))
    text = text.replace("<!-- course:path -->", path)
    return text.replace("<!-- course:needs -->", f"{said} (on Colab, {upload}).")


@dataclass(frozen=True)
class ReleaseCells(JsonRecord):
    """The graded cells each release notebook must keep (``tools/release_cells.json``, shipped in
    the wheel and read by the runtime's ``check_submission``): the course's assignment, each
    notebook's cells as ``tools.integrity.describe_release_cells`` describes them."""

    course: str
    notebooks: dict[str, list]


def release_cells_data(course: Course) -> ReleaseCells:
    """The graded cells of the course's release notebooks."""
    release = {
        name: json.loads((course.release / f"{name}.ipynb").read_text(encoding="utf-8"))
        for name in course.notebooks
    }
    return ReleaseCells(
        course.assignment, {name: describe_release_cells(nb) for name, nb in release.items()}
    )


def build_learner_wheel(course: Course, out_dir: Path) -> Path:
    """Build the learner wheel into ``out_dir``: the runtime ``tools`` with its schema, the
    reference measurement and the release's graded-cell ids; no instructor command, no grader.

    A minimal pyproject in a temporary folder, built by pip with the setuptools already
    installed (no build isolation, so nothing is downloaded)."""
    project = tomllib.loads((course.root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    with tempfile.TemporaryDirectory(prefix="learner-wheel-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(
            course.root / "tools",
            src / "tools",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        reference = src / "tools" / "reference"
        reference.mkdir(exist_ok=True)
        for path in sorted((course.root / "benchmarks" / "reference").glob("*.json")):
            shutil.copy(path, reference / path.name)
        (src / "tools" / "release_cells.json").write_text(
            json.dumps(release_cells_data(course).to_json(), ensure_ascii=False, indent=1) + "\n",
            encoding="utf-8",
        )
        (src / "pyproject.toml").write_text(
            _WHEEL_PYPROJECT.format(
                name=json.dumps(project["name"]),
                version=json.dumps(project["version"]),
                description=json.dumps(
                    project["description"] + " (learner runtime)", ensure_ascii=False
                ),
                python=json.dumps(project["requires-python"]),
                dependencies=json.dumps(LEARNER_DEPENDENCIES),
            ),
            encoding="utf-8",
        )
        wheels = Path(tmp) / "wheels"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-build-isolation",
                "--disable-pip-version-check",
                "--quiet",
                "--wheel-dir",
                str(wheels),
                str(src),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        built = sorted(wheels.glob("*.whl"))
        if proc.returncode != 0 or len(built) != 1:
            raise RuntimeError(
                f"building the learner wheel failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
            )
        out_dir.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy(built[0], out_dir / built[0].name))


def build_bundle(course: Course, target: Path) -> Path:
    """Write the learner zip (one top folder, ``serving-overlap-course/``, with the learner wheel in
    it)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".zip.tmp")
    with tempfile.TemporaryDirectory(prefix="learner-bundle-") as scratch:
        wheel = build_learner_wheel(course, Path(scratch))
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for path, arcname in learner_files(course):
                zf.write(path, f"{TOP}/{arcname}")
            zf.write(wheel, f"{TOP}/{wheel.name}")
            zf.writestr(f"{TOP}/README.md", learner_readme(course))
    tmp.replace(target)
    return target
