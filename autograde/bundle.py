"""The zip handed to learners: release notebooks, the runtime, the environment files."""
from __future__ import annotations

import zipfile
from pathlib import Path

from .course import Course

LEARNER_README = Path(__file__).with_name("LEARNER_README.md")


def learner_files(course: Course) -> list[tuple[Path, str]]:
    root = course.root
    files = [(p, f"notebooks/{p.name}") for p in sorted(course.release.glob("*.ipynb"))]
    for path in sorted((root / "tools").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files.append((path, str(path.relative_to(root))))
    for name in ("course.toml", "pyproject.toml", "environment.yml"):
        files.append((root / name, name))
    for path in sorted((root / "benchmarks" / "reference").glob("*.json")):
        files.append((path, str(path.relative_to(root))))
    files.append((root / "benchmarks" / "results" / "README.md", "benchmarks/results/README.md"))
    files.append((LEARNER_README, "README.md"))
    return files


def build_bundle(course: Course, target: Path) -> Path:
    """Write the learner zip (one top folder, ``serving-overlap-course/``)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path, arcname in learner_files(course):
            zf.write(path, f"serving-overlap-course/{arcname}")
    tmp.replace(target)
    return target
