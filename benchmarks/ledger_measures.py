"""Four measures of how the grader's commands share the OUT folder, for one tree (this one, or
another given by ``--root``):

- **OUT paths named outside the ledger** (static): string literals (docstrings aside) in
  ``autograde/`` outside ``autograde/ledger/`` that name an OUT file or folder. A grader's own OUT
  name (``grades.csv``, ``.state``, ``intake.json``...: ``GRADER_NAMES``) counts wherever a literal
  holds it as a path part; a name of nbgrader's course-folder layout, which OUT shares with every
  job folder (``feedback``, ``submitted``, ``autograded``, ``gradebook.db``, ``nbgrader_config.py``,
  ``timestamp.txt``: ``COURSE_FOLDER_NAMES``), counts where the literal is a path: an operand of
  ``/``, an argument of ``joinpath``, ``glob``, ``rglob`` or ``with_name``, or text with a ``/`` in
  it.
- **dict-shaped returns** (static): functions in ``autograde/`` with a return annotation, and among
  them those whose annotation mentions ``dict``; and among those, the ones with an untyped dict in
  them (``-> dict``, ``list[dict]``, ``dict[str, dict]``: a record passed as a dict), apart from
  typed mappings. Also the same share with each type's own serialiser set aside (in both counts): a
  ``to_json`` or ``to_wire`` method defined in a class, annotated ``-> dict`` (the JSON of that
  type, written by the type itself).
- **reads of OUT per command** and **settles of the late penalty per command** (``--run``): the
  mixed class of ``benchmarks/term_outputs.py`` (its Canvas download) taken through ``grade``, a
  person's scores, ``grade`` again, ``export`` (csv, canvas, moodle), ``feedback``, ``report`` and
  ``similarity``, each command run in this process (``autograde.cli.main``) with an audit hook that
  sees every file the grader's process opens (``open`` and ``sqlite3.connect`` events; the workers
  are other processes and read only their job folders) and a profile hook that counts calls of the
  penalty rule (``notebook_late`` in a ``late.py``), per (student, notebook). For each command: how
  many times an OUT file was opened to be read, from how many modules, which files were read more
  than once; and the most times one notebook's penalty was worked out.
- **module steps** (``--run``): the distinct (calling module, called module) pairs of ``autograde``
  modules seen while ``grade`` and ``export --format canvas`` run: the steps from a download to an
  LMS file.

    python benchmarks/ledger_measures.py [--root TREE] [--run]
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import re
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

GRADER_NAMES = frozenset({
    "grades.csv", "final_grades.csv", "canvas_grades.csv", "moodle_grades.csv",
    "moodle_worksheet.csv", "log.jsonl", "summary.json", "intake.json", "rejected_ids.json",
    ".late.json", ".gradebook.json", ".state", ".pages", ".work", ".settings.json", ".course",
    ".course.digest", ".lock", ".probe", ".sandbox", ".key", "logs", "grader-faults.log",
    "handback", "report.html", "report.json", "similarity.html", "similarity.json", "result.json",
    "worker.log", "sandbox.ledger", "canvas_feedback.zip", "moodle_feedback.zip",
})  # fmt: skip
GRADER_SUFFIXES = ("_feedback.zip",)
COURSE_FOLDER_NAMES = frozenset(
    {"feedback", "submitted", "autograded", "gradebook.db", "nbgrader_config.py", "timestamp.txt"}
)
PATH_CALLS = {"joinpath", "glob", "rglob", "with_name"}


def _parts(text: str) -> list[str]:
    return [part for part in text.replace("\\", "/").split("/") if part]


def _names_out(text: str, as_path: bool) -> bool:
    parts = _parts(text)
    if any(part in GRADER_NAMES or part.endswith(GRADER_SUFFIXES) for part in parts):
        return True
    return (as_path or "/" in text) and any(part in COURSE_FOLDER_NAMES for part in parts)


def out_literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each string literal in ``path`` that names an OUT file or folder."""
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
    inside = {
        id(value)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for value in node.values
    }
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in docstrings or id(node) in inside:
            continue
        if isinstance(node, ast.JoinedStr):  # an f-string as one text, each placeholder as {}
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if _names_out(text, id(node) in as_path):
            found.append((node.lineno, text))
    return sorted(set(found))


def named_outside(root: Path) -> dict[str, list[tuple[int, str]]]:
    """{module: its OUT literals} for every module of autograde/ outside autograde/ledger/."""
    found = {}
    for path in sorted((root / "autograde").rglob("*.py")):
        if (root / "autograde" / "ledger") in path.parents:
            continue
        hits = out_literals(path)
        if hits:
            found[path.relative_to(root).as_posix()] = hits
    return found


# a dict whose keys and values say nothing: -> dict, list[dict], dict[str, dict]
UNTYPED = re.compile(r"\bdict\b(?!\[)")


def dict_returns(root: Path) -> tuple[int, list[str]]:
    """(functions with a return annotation, those whose annotation mentions dict)."""
    total, dicts = 0, []
    for path in sorted((root / "autograde").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.returns is not None
            ):
                total += 1
                if "dict" in ast.unparse(node.returns):
                    dicts.append(
                        f"{path.relative_to(root).as_posix()}:{node.lineno} {node.name} "
                        f"-> {ast.unparse(node.returns)}"
                    )
    return total, dicts


SERIALISERS = {"to_json", "to_wire"}


def serialisers(root: Path) -> list[str]:
    """The dict-shaped returns (as ``dict_returns`` names them) that are a type's own serialiser: a
    method named in SERIALISERS, defined in a class body, annotated ``-> dict``."""
    found = []
    for path in sorted((root / "autograde").rglob("*.py")):
        for cls in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(cls, ast.ClassDef):
                continue
            for node in cls.body:
                own = isinstance(node, ast.FunctionDef) and node.name in SERIALISERS
                if own and node.returns is not None and ast.unparse(node.returns) == "dict":
                    found.append(
                        f"{path.relative_to(root).as_posix()}:{node.lineno} {node.name} -> dict"
                    )
    return found


def untyped(dicts: list[str]) -> list[str]:
    """Of the dict-shaped returns, those with an untyped dict in them (a record as a dict: ``->
    dict``, ``list[dict]``, ``dict[str, dict]``), as against a mapping whose values are typed
    (``dict[str, Grade]``)."""
    return [line for line in dicts if UNTYPED.search(line.split(" -> ", 1)[1])]


# ---------------------------------------------------------------- the commands, watched


class Watch:
    """What the grader's process does to OUT while one command runs."""

    def __init__(self, root: Path, out: Path):
        self.package, self.out = root / "autograde", out.resolve()
        self.command = ""
        # (command, OUT file, module) -> opens to read
        self.reads: collections.Counter = collections.Counter()
        # (command, student, notebook) -> penalties worked out
        self.settles: collections.Counter = collections.Counter()
        self.edges: set[tuple[str, str]] = set()
        self.edge_commands: set[str] = set()

    def module(self, filename: str) -> str | None:
        path = Path(filename)
        if self.package in path.parents:
            return ".".join(path.relative_to(self.package.parent).with_suffix("").parts)
        return None

    def caller(self) -> str:
        frame = sys._getframe(2)
        while frame is not None:
            found = self.module(frame.f_code.co_filename)
            if found:
                return found
            frame = frame.f_back
        return "(not the grader)"

    def audit(self, event: str, args) -> None:
        if not self.command or event not in ("open", "sqlite3.connect"):
            return
        target = args[0]
        if event == "open":
            if not isinstance(target, (str, bytes, os.PathLike)) or isinstance(target, int):
                return
            mode = args[1] if len(args) > 1 and isinstance(args[1], str) else "r"
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            if any(c in mode for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                return
        path = (
            Path(os.fsdecode(target))
            if not str(target).startswith("file:")
            else Path(str(target)[5:].split("?")[0])
        )
        try:
            relative = path.resolve().relative_to(self.out)
        except (ValueError, OSError):
            return
        if relative.parts and relative.parts[0] in (".course", ".work", ".sandbox"):
            return  # the grading master and scratch: not what the commands hand each other
        self.reads[(self.command, relative.as_posix(), self.caller())] += 1

    def profile(self, frame, event, arg):
        if event != "call" or not self.command:
            return
        code = frame.f_code
        if code.co_name == "notebook_late" and code.co_filename.endswith("late.py"):
            args = frame.f_locals
            self.settles[(self.command, args.get("student"), args.get("notebook"))] += 1
        if self.command in self.edge_commands and frame.f_back is not None:
            callee, caller = (
                self.module(code.co_filename),
                self.module(frame.f_back.f_code.co_filename),
            )
            if callee and caller and callee != caller:
                self.edges.add((caller, callee))


def run_commands(root: Path, work: Path) -> Watch:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import term_outputs

    sys.path.insert(0, str(root))
    os.environ["LLM_ALGO_PROJECT_ROOT"] = str(root)
    os.environ["PYTHONPATH"] = str(root)  # the grading workers' autograde too
    from autograde import cli

    base = work / "canvas"
    import shutil

    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    archive, lms = term_outputs.canvas(base)
    options = term_outputs._csvs(base, lms)
    out = base / "out"
    watch = Watch(root, out)
    watch.edge_commands = {"grade", "export canvas"}
    sys.addaudithook(watch.audit)
    limits = [
        "--no-progress",
        "--workers",
        "2",
        "--cell-timeout",
        "120",
        "--notebook-timeout",
        "900",
    ]
    roster = ["--roster", str(base / "roster.csv")]
    least = ["--late-unknown", "least-penalty"]
    commands = [
        ("grade", ["grade", str(archive), "--out", str(out), *limits, *options]),
        ("regrade", ["grade", str(archive), "--out", str(out), *limits, *options]),
        ("export csv", ["export", str(out)]),
        (
            "export canvas",
            ["export", str(out), "--format", "canvas", "--assignment-id", "77", *least, *roster],
        ),
        ("export moodle", ["export", str(out), "--format", "moodle", *least, *roster]),
        ("feedback canvas", ["feedback", str(out), "--format", "canvas"]),
        ("report", ["report", str(out)]),
        ("similarity", ["similarity", str(out)]),
    ]
    sys.setprofile(watch.profile)
    threading.setprofile(watch.profile)
    try:
        for name, argv in commands:
            watch.command = name
            code = cli.main(argv)
            watch.command = ""
            assert code == 0, f"{name}: exit {code}"
            if name == "grade":
                term_outputs._score_as_formgrader(out)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return watch


def report_run(watch: Watch) -> dict:
    per: dict[str, dict] = {}
    for (command, file, module), count in watch.reads.items():
        entry = per.setdefault(
            command, {"opens": 0, "modules": set(), "files": collections.Counter()}
        )
        entry["opens"] += count
        entry["modules"].add(module)
        entry["files"][file] += count
    settles: dict[str, int] = {}
    for (command, _student, _notebook), count in watch.settles.items():
        settles[command] = max(settles.get(command, 0), count)
    found = {}
    for command in dict.fromkeys([c for c, *_ in watch.reads] + list(settles)):
        entry = per.get(command, {"opens": 0, "modules": set(), "files": collections.Counter()})
        found[command] = {
            "OUT reads": entry["opens"],
            "modules reading OUT": sorted(entry["modules"]),
            "files read more than once": {f: n for f, n in sorted(entry["files"].items()) if n > 1},
            "most settles of one notebook's penalty": settles.get(command, 0),
        }
    found["module steps (grade, export canvas)"] = len(watch.edges)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument(
        "--run", action="store_true", help="also run the mixed class's commands, watched (minutes)"
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/ledger-measures"))
    parser.add_argument("--json", type=Path, help="write the measures here too")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    named = named_outside(root)
    total, dicts = dict_returns(root)
    own = serialisers(root)
    other = [line for line in dicts if line not in own]
    found: dict = {
        "OUT literals outside the ledger": sum(len(v) for v in named.values()),
        "modules naming OUT outside the ledger": len(named),
        "by module": {
            module: [f"{line}: {text}" for line, text in hits] for module, hits in named.items()
        },
        "annotated returns": total,
        "dict-shaped returns": len(dicts),
        "dict-shaped share": round(len(dicts) / total, 4) if total else 0,
        "untyped dict returns (-> dict, list[dict], dict[str, dict])": len(untyped(dicts)),
        "types' own serialisers (to_json, to_wire -> dict)": len(own),
        "dict-shaped returns, serialisers aside": f"{len(other)} of {total - len(own)}",
        "dict-shaped share, serialisers aside": round(len(other) / (total - len(own)), 4)
        if total > len(own)
        else 0,
        "dict-shaped": dicts,
    }
    if args.run:
        found["commands"] = report_run(run_commands(root, args.work.resolve()))
    text = json.dumps(found, indent=1, ensure_ascii=False, default=sorted)
    if args.json:
        args.json.write_text(text, encoding="utf-8")
    print(
        json.dumps(
            {k: v for k, v in found.items() if k not in ("by module", "dict-shaped")},
            indent=1,
            ensure_ascii=False,
            default=sorted,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
