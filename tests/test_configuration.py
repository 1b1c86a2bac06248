"""The course's configuration in one place per side: only ``autograde/settings.py`` and
``tools/settings.py`` read the environment, each variable they read is in their ``VARIABLES``, no
other module writes a variable's name itself, and docs/instructors.md's "Configuration" table agrees
with those modules and with ``grade``'s command line (names and defaults)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import mistune
import pytest

from autograde import settings as grader
from autograde.cli import DEFAULTS, build_parser
from autograde.model import Options
from tools import settings as runtime

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {ROOT / "autograde" / "settings.py": grader, ROOT / "tools" / "settings.py": runtime}
DOC = ROOT / "docs" / "instructors.md"
# a variable's name written out: the course's own and the frontends' that the runtime reads
VARIABLE_NAME = re.compile(r"(COURSE|JPY|NBGRADER|LLM_ALGO|VSCODE)_[A-Z0-9_]+")


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ``."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    ) or (isinstance(node, ast.Name) and node.id == "environ")


def environment_reads(tree: ast.AST) -> list[tuple[int, ast.AST | None]]:
    """(line, the name's expression or None) of every read of one variable: ``os.environ.get(X)``,
    ``os.getenv(X)``, ``os.environ[X]`` (read, not set), ``X in os.environ``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if (node.func.attr == "get" and _is_environ(node.func.value)) or (
                node.func.attr == "getenv"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "os"
            ):
                found.append((node.lineno, node.args[0] if node.args else None))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getenv"
        ):
            found.append((node.lineno, node.args[0] if node.args else None))
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and _is_environ(node.value)
        ):
            found.append((node.lineno, node.slice))
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, ast.In | ast.NotIn) for op in node.ops
        ):
            if any(_is_environ(c) for c in node.comparators):
                found.append((node.lineno, node.left))
    return found


def written_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every string that is a whole variable name (``"COURSE_BWRAP"``)."""
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and VARIABLE_NAME.fullmatch(node.value)
    ]


def _code_files() -> list[Path]:
    return sorted(p for package in ("autograde", "tools") for p in (ROOT / package).rglob("*.py"))


def test_only_the_settings_modules_read_the_environment():
    found = []
    for path in _code_files():
        if path in SETTINGS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        shown = path.relative_to(ROOT)
        found += [
            f"{shown}:{line}: reads the environment (ask the settings module)"
            for line, _ in environment_reads(tree)
        ]
        found += [
            f"{shown}:{line}: writes the name {name!r} (use the settings module's constant)"
            for line, name in written_names(tree)
        ]
    assert not found, "\n".join(found)


def _name_read(module, expression: ast.AST | None) -> str | None:
    """The variable's name an expression in a settings module stands for (a constant of the module,
    or a string)."""
    if isinstance(expression, ast.Name):
        return getattr(module, expression.id, None)
    if isinstance(expression, ast.Constant):
        return expression.value
    return None


@pytest.mark.parametrize("path", list(SETTINGS), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_variable_a_settings_module_reads_is_in_its_table(path):
    module = SETTINGS[path]
    names = {v.name for v in module.VARIABLES}
    reads = environment_reads(ast.parse(path.read_text(encoding="utf-8")))
    read = [_name_read(module, expression) for _, expression in reads]
    assert None not in read and set(read) == names, (set(read) ^ names, read)
    assert len(names) == len(module.VARIABLES), "a variable listed twice"


def test_the_scan_finds_each_kind_of_read():
    sample = """
import os
from os import environ, getenv
a = os.environ.get("X")
b = os.getenv("Y")
c = os.environ["Z"]
d = "W" in os.environ
e = environ.get("V")
f = getenv("U")
os.environ["SET"] = "1"
g = {**os.environ}
h = "COURSE_SOMETHING"
"""
    tree = ast.parse(sample)
    assert [line for line, _ in environment_reads(tree)] == [4, 5, 6, 7, 8, 9]
    assert written_names(tree) == [(12, "COURSE_SOMETHING")]


def documented_settings() -> dict[str, tuple[str, str]]:
    """{setting: (where it is read, default)} of the table under "Configuration" in
    docs/instructors.md, read with mistune (code spans unwrapped)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    table = next(
        t
        for t in mistune.create_markdown(renderer=None, plugins=["table"])(section)
        if t["type"] == "table"
    )

    def cell(node) -> str:
        return (
            "".join(child.get("raw", "") or cell(child) for child in node.get("children", []))
            if "children" in node
            else node.get("raw", "")
        )

    rows = {}
    for row in next(part for part in table["children"] if part["type"] == "table_body")["children"]:
        name, where, default, _meaning = (cell(c).strip() for c in row["children"])
        assert name not in rows, f"{name} twice in the table"
        rows[name] = (where, default)
    return rows


def readers(path: Path) -> dict[str, set[str]]:
    """{variable: the functions of a settings module that read it}."""
    module, found = SETTINGS[path], {}
    for function in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(function, ast.FunctionDef):
            for _, expression in environment_reads(function):
                found.setdefault(_name_read(module, expression), set()).add(f"{function.name}()")
    return found


def test_the_doc_lists_every_variable_with_its_module_reader_and_default():
    rows = documented_settings()
    documented = {name: value for name, value in rows.items() if name.isupper()}
    assert {
        name: (where.split(" ")[0], default) for name, (where, default) in documented.items()
    } == {
        v.name: (str(path.relative_to(ROOT)), v.default)
        for path, module in SETTINGS.items()
        for v in module.VARIABLES
    }
    for path in SETTINGS:
        for name, functions in readers(path).items():
            assert documented[name][0].split(" ")[1] in functions, (
                f"{name}: the table names another reader than {functions}"
            )


def _shown(dest: str, value) -> str:
    """A default as the table writes it."""
    if dest == "workers":
        assert value == DEFAULTS.workers
        return "cores"
    if value is None:
        return "unset"
    if value is False:
        return "off"
    return f"{value:g}"


def test_the_doc_lists_every_grading_option_with_the_command_lines_default():
    rows = documented_settings()
    parsed = vars(build_parser().parse_args(["grade", "subs", "--out", "out"]))
    options = {name: value for name, value in rows.items() if name.startswith("--")}
    assert len(options) == len(Options.__dataclass_fields__), "one option per field of Options"
    for flag, (_, default) in options.items():
        dest = flag.removeprefix("--").replace("-", "_")
        assert _shown(dest, parsed[dest]) == default, flag
    fields = {f"Options.{name}" for name in Options.__dataclass_fields__}
    text = DOC.read_text(encoding="utf-8").split("## Configuration", 1)[1]
    assert {field for field in fields if f"`{field}`" in text} == fields, (
        "every Options field has its row"
    )


def test_the_doc_lists_the_grading_table_as_choose_reads_it():
    rows = documented_settings()
    table = {
        re.sub(r"^\[grading\.?(\w*)\]\s*", r"\1 ", name).strip(): value
        for name, value in rows.items()
        if name.startswith("[grading")
    }
    assert set(table) == set(grader.GRADING_KEYS)
    chosen = grader.choose(grader.GradingTable())  # nothing given anywhere
    assert {key: default for key, (_, default) in table.items()} == {
        key: getattr(chosen, key) or "unset" for key in grader.GRADING_KEYS
    }


def test_the_command_line_wins_over_course_toml(tmp_path):
    grading = {
        "deadline": "2026-12-20T23:59:00+08:00",
        "late_policy": "zero",
        "extensions": "ext.csv",
        "deadlines": {"01": "2026-12-01T00:00:00Z"},
    }
    from_toml = grader.choose(grader.GradingTable.from_toml(grading))
    assert (from_toml.deadline, from_toml.late_policy, from_toml.extensions) == (
        grading["deadline"],
        "zero",
        Path("ext.csv"),
    )
    given = grader.choose(
        grader.GradingTable.from_toml(grading),
        "2027-01-01T00:00:00Z",
        "deduct:5%/day",
        tmp_path / "mine.csv",
    )
    assert (given.deadline, given.late_policy, given.extensions) == (
        "2027-01-01T00:00:00Z",
        "deduct:5%/day",
        tmp_path / "mine.csv",
    )
    # only course.toml names a notebook's own deadline
    assert given.deadlines == {"01": "2026-12-01T00:00:00Z"}
    assert grader.choose(grader.GradingTable()) == grader.TermChoice(None, "none", None, {})


def test_the_settings_read_the_environment_when_asked(monkeypatch):
    monkeypatch.setenv(grader.CELL_TIMEOUT, "7")
    monkeypatch.setenv(runtime.LANGUAGE, " ZH_cn ")
    assert grader.cell_timeout() == 7 and runtime.language() == "zh_cn"
    monkeypatch.delenv(grader.CELL_TIMEOUT)
    monkeypatch.delenv(runtime.LANGUAGE)
    assert (
        grader.cell_timeout() == Options().cell_timeout == grader.CELL_TIMEOUT_DEFAULT
        and runtime.language() == ""
    )
    assert grader.parent_pid({grader.PARENT_PID: "12"}) == "12" and grader.parent_pid({}) is None
