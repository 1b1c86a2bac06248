"""The commands the README and docs/ tell people to type still exist, with the options they show:
each ``python -m autograde ...`` parses with the command line's own parser, each ``make`` target is
in the Makefile, and each ``python <script>`` names a file that is there (and a benchmark's options
parse with its own ``--help``). Running them is left to the tests of each command; this catches a
renamed option, a dropped target or a moved script that the docs still show."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import mistune
import pytest

from autograde.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "README.zh-CN.md", *sorted((ROOT / "docs").glob("*.md"))]
# a placeholder in the docs and a value the parser accepts in its place
PLACEHOLDERS = {
    "SUBMISSIONS": "subs",
    "OUT": "out",
    "URL": "sqlite:///g.db",
    "ADDRESS": "tcp://host:8786",
    "REV": "HEAD",
}
COMMAND = re.compile(r"^(python -m autograde\b|make [a-z]|python (?:benchmarks|tests)/)")


def _code(tokens: list) -> list[str]:
    """The text of every code span and every line of every code block, in a mistune syntax tree."""
    found = []
    for token in tokens:
        if token["type"] == "codespan":
            found.append(token["raw"])
        elif token["type"] == "block_code":
            found.extend(token["raw"].splitlines())
        found.extend(_code(token.get("children", [])))
    return found


def documented_commands() -> list[tuple[str, str]]:
    """(file name, command) for every command in a code span or a code block of the docs (read with
    mistune, the Markdown parser nbconvert uses)."""
    parse = mistune.create_markdown(renderer=None, plugins=["table"])
    found = []
    for path in DOCS:
        for line in _code(parse(path.read_text(encoding="utf-8"))):
            line = line.split("#", 1)[0].strip().removeprefix("$ ").strip()
            if COMMAND.match(line):
                found.append((path.name, line))
    return sorted(set(found))


def _tokens(command: str) -> list[str]:
    command = command.replace("[", " ").replace("]", " ").replace("...", " ")
    tokens = [t for t in shlex.split(command) if not t.startswith("$")]
    return [PLACEHOLDERS.get(t, t) for t in tokens]


def test_the_docs_show_commands():
    kinds = {
        command.split()[0] + " " + command.split()[1].split("/")[0]
        for _, command in documented_commands()
    }
    assert {"python -m", "make lab", "make test"} <= kinds, kinds


@pytest.mark.parametrize("where,command", documented_commands())
def test_a_documented_command_still_exists(where, command):
    tokens = _tokens(command)
    if tokens[:3] == ["python", "-m", "autograde"]:
        try:
            build_parser().parse_args(tokens[3:])
        except SystemExit:
            pytest.fail(f"{where}: `{command}` is not a command `python -m autograde` accepts")
    elif tokens[0] == "make":
        targets = set(
            re.findall(
                r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(encoding="utf-8"), flags=re.M
            )
        )
        assert tokens[1] in targets, (
            f"{where}: `{command}`: the Makefile has no target {tokens[1]!r}"
        )
    else:
        script = ROOT / tokens[1]
        assert script.is_file(), f"{where}: `{command}`: {tokens[1]} is not there"
        if tokens[1].startswith("benchmarks/") and len(tokens) > 2:
            shown = subprocess.run(
                [sys.executable, str(script), "--help"],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=ROOT,
            )
            assert shown.returncode == 0, shown.stderr[-2000:]
            for option in (t for t in tokens[2:] if t.startswith("--")):
                assert option in shown.stdout, (
                    f"{where}: `{command}`: {tokens[1]} has no option {option}"
                )


def test_the_check_can_fail():
    """A renamed option and a missing target are caught."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(_tokens("python -m autograde grade SUBMISSIONS --output OUT")[3:])
    targets = set(
        re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(encoding="utf-8"), flags=re.M)
    )
    assert "test" in targets and "tests" not in targets
