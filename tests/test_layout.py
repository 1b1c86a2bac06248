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
                        found.append(
                            f"{_shown(path)}:{node.lineno}: from {base} import {alias.name}"
                        )
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
    (package / "b.py").write_text(
        "from .a import _secret\nfrom . import a\nprint(a._secret, _secret)\n"
    )
    (package / "sub").mkdir()
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "c.py").write_text(
        "from ..a import _secret\nfrom .. import a\nprint(a._secret, _secret)\n"
    )
    found = private_uses(_modules(tmp_path, ("pkg",)))
    assert [f.split(": ", 1)[1] for f in found] == ["from pkg.a import _secret", "a._secret"] * 2, (
        found
    )


def long_functions(paths, limit: int = 80) -> list[str]:
    """Functions (methods and nested ones included) longer than ``limit`` lines, as 'file:line name
    N'."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.end_lineno - node.lineno + 1 > limit
            ):
                found.append(
                    f"{path.name}:{node.lineno} {node.name} {node.end_lineno - node.lineno + 1}"
                )
    return found


def test_every_function_fits_on_a_screen():
    """No function of the grader or of the runtime is over 80 lines: the batch reads as named steps
    (intake, executor, record, report), and the simulator as a short loop over its event
    handlers."""
    assert long_functions(sorted((ROOT / "autograde").rglob("*.py"))) == []
    assert long_functions(sorted((ROOT / "tools").rglob("*.py"))) == []
    assert long_functions([ROOT / "tests" / "test_layout.py"], limit=5), "the check can fail"


# ---------------------------------------------------------------- OUT has one owner: the ledger

# a module outside the ledger that names a course folder of nbgrader's own that is not OUT, and why
NOT_OUT = {
    "autograde/course.py": "the nbgrader configuration copied into the course folders the release "
    "and the master are built in",
}
PATH_CALLS = {"joinpath", "glob", "rglob", "with_name"}


def out_names(path: Path, own: frozenset[str], course_folder: frozenset[str]) -> list[str]:
    """Each literal of ``path`` (docstrings aside) that names an OUT file or folder: one of the
    grader's own names (``own``) wherever a literal holds it as a path part (an f-string read as one
    text), and one of nbgrader's course-folder names (``course_folder``) where the literal is a
    path: an operand of ``/``, an argument of joinpath, glob, rglob or with_name, or text with a
    ``/`` in it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    as_path: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            as_path.update(id(side) for side in (node.left, node.right))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in PATH_CALLS
        ):
            as_path.update(id(arg) for arg in node.args)
    skipped = {
        id(value)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for value in node.values
    }
    skipped |= {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        parts = [part for part in text.split("/") if part]
        mine = any(
            part in own or any(part.endswith(name) for name in own if name.startswith("_"))
            for part in parts
        )
        theirs = (id(node) in as_path or "/" in text) and any(
            part in course_folder for part in parts
        )
        if mine or theirs:
            found.append((node.lineno, f"{_shown(path)}:{node.lineno}: {text[:80]!r}"))
    return [line for _, line in sorted(found)]


def test_no_module_outside_the_ledger_names_an_out_file():
    """Every OUT path is named in autograde/ledger/ (layout.py) and nowhere else: the commands, the
    executors, the workers and the adapters take their paths from there."""
    from autograde.ledger.layout import Out

    found = []
    for path in sorted((ROOT / "autograde").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("autograde/ledger/") or relative in NOT_OUT:
            continue
        found += out_names(path, Out.own_names(), Out.course_folder_names())
    assert found == []


def test_the_out_scan_finds_each_way_of_naming_an_out_file(tmp_path):
    """The scan can fail: a table's name, a dotted folder in an f-string, an LMS zip's suffix and a
    course folder's name in a path are each found; the same words as a dict key, a docstring or a
    command's name are not."""
    from autograde.ledger.layout import Out

    module = tmp_path / "m.py"
    module.write_text(
        '"""writes grades.csv"""\n'
        'a = out / "grades.csv"\n'
        'b = f"{out}/.state/{student}.json"\n'
        'c = target / f"{system}_feedback.zip"\n'
        'd = job / "autograded" / student\n'
        'e = {"feedback": 1, "report": 2}\n'
        'f = parser.add_parser("feedback")\n'
    )
    found = out_names(module, Out.own_names(), Out.course_folder_names())
    assert [line.split(":")[1] for line in found] == ["2", "3", "4", "5"], found


# ---------------------------------------------------------------- the grader's tests mirror its
# packages


def unmirrored(tests: Path, code: Path) -> list[str]:
    """Each folder under ``tests`` that holds a test file but is no package at the same path under
    ``code`` (tests/grader/ledger/test_late.py tests autograde/ledger/; a test file directly in
    ``tests`` tests a top-level module, such as grading.py or cli.py)."""
    folders = {path.parent.relative_to(tests) for path in tests.rglob("test_*.py")} - {Path(".")}
    return sorted(
        str(folder) for folder in folders if not (code / folder / "__init__.py").is_file()
    )


def test_the_graders_tests_mirror_its_packages(tmp_path):
    assert unmirrored(ROOT / "tests" / "grader", ROOT / "autograde") == []
    # the check can fail: a test folder named for no package, and one whose namesake is a plain
    # folder
    for folder in (
        "tests/ledger",
        "tests/legder",
        "tests/record/pages",
        "code/ledger",
        "code/record/pages",
    ):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "code" / "ledger" / "__init__.py").write_text("")
    for test in (
        "ledger/test_late.py",
        "legder/test_late_2.py",
        "record/pages/test_pages.py",
        "test_cli.py",
    ):
        (tmp_path / "tests" / test).write_text("")
    assert unmirrored(tmp_path / "tests", tmp_path / "code") == ["legder", "record/pages"]
