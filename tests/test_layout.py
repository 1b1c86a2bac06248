"""The shape of the code: no module uses another module's private names (``_name``), so that what
one module keeps to itself can change without breaking another. (Import cycles and the import
rules between packages are checked by import-linter in ``make lint``.)"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("autograde", "tools")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def private_uses(modules: dict[str, Path]) -> list[str]:
    """Each use, in one of ``modules`` ({dotted name: file}), of another of them's private name:
    ``from .other import _name`` or ``other._name`` on a name bound to a module by an import."""
    found = []
    for name, path in sorted(modules.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        bound: dict[str, str] = {}  # local name -> the project module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # from .x (level 1: this package), from ..x (its parent), ...
                    above = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{above}.{base}" if base else above
                for alias in node.names:
                    if f"{base}.{alias.name}" in modules:
                        bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                    elif _private(alias.name) and base in modules and base != name:
                        found.append(f"{_shown(path)}:{node.lineno}: from {base} import {alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules:
                        bound[alias.asname or alias.name.rsplit(".", 1)[-1]] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and _private(node.attr)
                and isinstance(node.value, ast.Name)
                and bound.get(node.value.id, name) != name
            ):
                found.append(f"{_shown(path)}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def _modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """Every module of ``packages`` under ``root``, subpackages included, by dotted name."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def test_no_module_uses_another_modules_private_names():
    assert private_uses(_modules(ROOT)) == []


def test_the_scan_finds_both_kinds_of_private_use(tmp_path):
    """The check can fail: a module that imports another's private name, and one that reads it as
    an attribute, are both reported; a module's own private names are not."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("_secret = 1\n_own = 2\nprint(_own)\n")
    (package / "b.py").write_text("from .a import _secret\nfrom . import a\nprint(a._secret, _secret)\n")
    (package / "sub").mkdir()
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "c.py").write_text("from ..a import _secret\nfrom .. import a\nprint(a._secret, _secret)\n")
    found = private_uses(_modules(tmp_path, ("pkg",)))
    assert [f.split(": ", 1)[1] for f in found] == ["from pkg.a import _secret", "a._secret"] * 2, found


def long_functions(paths, limit: int = 80) -> list[str]:
    """Functions (methods and nested ones included) longer than ``limit`` lines, as 'file:line name N'."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > limit:
                found.append(f"{path.name}:{node.lineno} {node.name} {node.end_lineno - node.lineno + 1}")
    return found


def test_every_function_fits_on_a_screen():
    """No function of the grader or of the runtime is over 80 lines: the batch reads as named steps
    (intake, executor, record, report), and the simulator as a short loop over its event handlers."""
    assert long_functions(sorted((ROOT / "autograde").rglob("*.py"))) == []
    assert long_functions(sorted((ROOT / "tools").rglob("*.py"))) == []
    assert long_functions([ROOT / "tests" / "test_layout.py"], limit=5), "the check can fail"
