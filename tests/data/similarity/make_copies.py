"""Disguised copies of the test class's answers, made by a fixed program so that anyone can remake
them.

For every TODO folder here and every independent answer in it (``v1`` ... ``v5`` and the course's
own, ``course``), writes ``<TODO>/generated/<kind>_of_<answer>.txt``, one file per kind of disguise:

- ``renamed``: every name of the learner's own (not the release's, not a builtin) renamed;
- ``reordered``: independent statements of each block shuffled (a statement that reads or writes
  what another one writes stays on its side of it; ``return``, ``raise``, ``break`` and
  ``continue``, and the release's own lines, stay where they are);
- ``split``: expressions split in two (``a = b + c`` becomes ``t = b`` then ``a = t + c``);
- ``loops``: ``for`` loops rewritten as ``while`` loops over an index, and comprehensions (and
  generators passed to a call) as loops that build a list;
- ``comments``: comments dropped and others, and blank lines, added;
- ``deadcode``: statements that do nothing inserted here and there;
- ``all``: every one of the above, in that order.

The program is deterministic (each file's random choices are seeded by its name) and every copy
it writes must still pass every hidden idea of its TODO (``tests/grader/term/test_similarity.py``).

    python tests/data/similarity/make_copies.py          # rewrites the generated/ folders
    python tests/data/similarity/make_copies.py --check  # exits 1 if a stored file differs
"""

from __future__ import annotations

import argparse
import ast
import builtins
import io
import random
import re
import sys
import tokenize
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
KINDS = ("renamed", "reordered", "split", "loops", "comments", "deadcode", "all")
SOURCES = ("v1", "v2", "v3", "v4", "v5", "course")
KEPT = set(dir(builtins))
WORDS = "acc buf cur elem entry item key node part piece rec res row slot span tmp val vals".split()
WORDS.append("work")
_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$\n?", re.M)


# ---------------------------------------------------------------- names


def release_names(release: str) -> set[str]:
    """Every name the release's code of the cell uses (parameters, given variables, called
    functions)."""
    found = set()
    for tok in tokenize.generate_tokens(io.StringIO(release).readline):
        if tok.type == tokenize.NAME:
            found.add(tok.string)
    return found


class Fresh:
    """New names no answer uses, from a seeded pool."""

    def __init__(self, rng: random.Random, taken: set[str]):
        self.rng, self.taken = rng, set(taken)

    def __call__(self) -> str:
        while True:
            name = f"{self.rng.choice(WORDS)}_{self.rng.randrange(100)}"
            if name not in self.taken:
                self.taken.add(name)
                return name


def names_of(tree: ast.AST, bound: bool = False) -> set[str]:
    """Every name in ``tree`` (``bound``: only those it assigns, takes as a parameter or
    defines)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and (not bound or isinstance(node.ctx, ast.Store)):
            found.add(node.id)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, ast.FunctionDef):
            found.add(node.name)
    return found


def line(stmt: ast.stmt) -> int:
    return getattr(stmt, "lineno", 0)


def rename(tree: ast.Module, given: set[str], fresh: Fresh) -> None:
    """Renames the names the learner's code binds, everywhere in ``tree`` (the release's names, the
    functions of other cells it calls and the modules it imports keep theirs)."""
    own = {n for n in names_of(tree, bound=True) if n not in given and n not in KEPT}
    mapping = {n: fresh() for n in sorted(own)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in mapping:
            node.id = mapping[node.id]
        elif isinstance(node, ast.arg) and node.arg in mapping:
            node.arg = mapping[node.arg]
        elif isinstance(node, ast.FunctionDef) and node.name in mapping:
            node.name = mapping[node.name]


# ---------------------------------------------------------------- statements


def blocks(tree: ast.AST):
    """Every list of statements in ``tree`` (bodies, else branches, handlers), innermost first: a
    block is rewritten before the statement that holds it."""
    found = []
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            value = getattr(node, name, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                found.append((node, name, value))
    return found[::-1]


def touches(stmt: ast.stmt) -> tuple[set[str], set[str]]:
    """(names read, names written or changed) by a statement: a name whose method is called, or that
    is subscripted or has an attribute set, counts as changed."""
    reads, writes = set(), set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name):
            (writes if isinstance(node.ctx, (ast.Store, ast.Del)) else reads).add(node.id)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
        ):
            writes.add(node.func.value.id)
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            base = node.value
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                base = base.value
            if isinstance(base, ast.Name):
                writes.add(base.id)
        elif isinstance(node, (ast.FunctionDef, ast.Import, ast.ImportFrom)):
            writes.update(
                names_of(node)
                if isinstance(node, ast.FunctionDef)
                else {a.asname or a.name.split(".")[0] for a in node.names}
            )
    return reads, writes


def is_barrier(stmt: ast.stmt, given: set[int]) -> bool:
    flow = (
        ast.Return,
        ast.Raise,
        ast.Break,
        ast.Continue,
        ast.Yield,
        ast.YieldFrom,
        ast.Global,
        ast.Nonlocal,
    )
    return line(stmt) in given or any(isinstance(n, flow) for n in ast.walk(stmt))


def shuffle_block(body: list[ast.stmt], given: set[int], rng: random.Random) -> list[ast.stmt]:
    """``body`` in a random order that keeps every dependency: a topological order of the
    statements, a statement waiting for each earlier one it reads, writes or is a barrier to."""
    info = [touches(s) for s in body]
    before = [set() for _ in body]
    for j in range(len(body)):
        for i in range(j):
            (ri, wi), (rj, wj) = info[i], info[j]
            if (
                is_barrier(body[i], given)
                or is_barrier(body[j], given)
                or wi & (rj | wj)
                or wj & ri
            ):
                before[j].add(i)
    placed, order = set(), []
    while len(order) < len(body):
        ready = [j for j in range(len(body)) if j not in placed and before[j] <= placed]
        pick = rng.choice(ready)
        placed.add(pick)
        order.append(pick)
    return [body[j] for j in order]


def reorder(tree: ast.Module, given: set[int], rng: random.Random) -> None:
    for node, name, body in list(blocks(tree)):
        for _ in range(8):  # a few tries for an order that differs
            new = shuffle_block(body, given, rng)
            if new != body:
                break
        setattr(node, name, new)


# ---------------------------------------------------------------- splitting expressions


def first_part(value: ast.expr) -> tuple[ast.AST, str] | None:
    """(node, field) of the part of ``value`` Python evaluates first, when it can be computed one
    statement earlier without changing anything: the left operand, the first argument, the first
    value, the test of a condition."""
    if isinstance(value, (ast.BinOp, ast.Compare)):
        return value, "left"
    if isinstance(value, ast.BoolOp):
        return value.values, 0
    if isinstance(value, ast.Call) and value.args and not isinstance(value.args[0], ast.Starred):
        return value.args, 0
    if (
        isinstance(value, (ast.Tuple, ast.List))
        and value.elts
        and not isinstance(value.elts[0], ast.Starred)
    ):
        return value.elts, 0
    if (
        isinstance(value, ast.Dict)
        and value.keys
        and value.keys[0] is not None
        and isinstance(value.keys[0], ast.Constant)
    ):
        return value.values, 0
    if isinstance(value, ast.UnaryOp):
        return value, "operand"
    return None


def statement_value(stmt: ast.stmt) -> tuple[ast.AST, str] | None:
    if (
        isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr))
        and stmt.value is not None
    ):
        return stmt, "value"
    if isinstance(stmt, ast.If):
        return stmt, "test"
    return None


def split_statement(stmt: ast.stmt, fresh: Fresh) -> list[ast.stmt] | None:
    where = statement_value(stmt)
    if where is None:
        return None
    holder, field = where
    part = first_part(getattr(holder, field))
    if part is None:
        return None
    owner, key = part
    node = owner[key] if isinstance(owner, list) else getattr(owner, key)
    if isinstance(node, (ast.Name, ast.Constant, ast.Lambda, ast.Starred)) or any(
        isinstance(n, ast.NamedExpr) for n in ast.walk(node)
    ):
        return None
    temp = fresh()
    if isinstance(owner, list):
        owner[key] = ast.Name(temp, ast.Load())
    else:
        setattr(owner, key, ast.Name(temp, ast.Load()))
    return [ast.Assign([ast.Name(temp, ast.Store())], node, lineno=0), stmt]


def split(tree: ast.Module, given: set[int], rng: random.Random, fresh: Fresh) -> None:
    for node, name, body in list(blocks(tree)):
        new = []
        for stmt in body:
            parts = (
                None if line(stmt) in given or rng.random() < 0.3 else split_statement(stmt, fresh)
            )
            new.extend(parts or [stmt])
        setattr(node, name, new)


# ---------------------------------------------------------------- loops


class Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.Name(self.mapping.get(node.id, node.id), node.ctx)


def comprehension_loop(comp: ast.expr, out: str, fresh: Fresh) -> list[ast.stmt]:
    """Statements that build ``out`` (a list, a set or a dict) as the comprehension ``comp`` does,
    its loop variables renamed so that none leaks over a name of the function."""
    targets = {n.id for g in comp.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
    rename_map = {n: fresh() for n in sorted(targets)}
    swap = Rename(rename_map)
    if isinstance(comp, ast.DictComp):
        item = ast.Subscript(ast.Name(out, ast.Load()), swap.visit(comp.key), ast.Store())
        init, add = ast.Dict([], []), ast.Assign([item], swap.visit(comp.value), lineno=0)
    else:
        method = "add" if isinstance(comp, ast.SetComp) else "append"
        init = (
            ast.Call(ast.Name("set", ast.Load()), [], [])
            if method == "add"
            else ast.List([], ast.Load())
        )
        add = ast.Expr(
            ast.Call(
                ast.Attribute(ast.Name(out, ast.Load()), method, ast.Load()),
                [swap.visit(comp.elt)],
                [],
            )
        )
    inner: list[ast.stmt] = [add]
    for gen in reversed(comp.generators):
        for cond in reversed(gen.ifs):
            inner = [ast.If(swap.visit(cond), inner, [])]
        inner = [ast.For(swap.visit(gen.target), swap.visit(gen.iter), inner, [], lineno=0)]
    return [ast.Assign([ast.Name(out, ast.Store())], init, lineno=0), *inner]


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def unroll_comprehension(stmt: ast.stmt, fresh: Fresh) -> list[ast.stmt] | None:
    """A statement whose value is a comprehension, or a call with one as an argument, preceded by
    the loop that builds it."""
    where = statement_value(stmt)
    if where is None or isinstance(stmt, ast.If):
        return None
    holder, field = where
    value = getattr(holder, field)
    if isinstance(value, (ast.ListComp, ast.SetComp, ast.DictComp)):
        owner, key = holder, field
    elif isinstance(value, ast.Call) and any(isinstance(a, COMPREHENSIONS) for a in value.args):
        owner, key = (
            value.args,
            next(i for i, a in enumerate(value.args) if isinstance(a, COMPREHENSIONS)),
        )
    else:
        return None
    comp = owner[key] if isinstance(owner, list) else getattr(owner, key)
    out = fresh()
    loop = comprehension_loop(comp, out, fresh)
    if isinstance(owner, list):
        owner[key] = ast.Name(out, ast.Load())
    else:
        setattr(owner, key, ast.Name(out, ast.Load()))
    return [*loop, stmt]


def for_to_while(stmt: ast.For, fresh: Fresh) -> list[ast.stmt]:
    """``for x in it: body`` as ``seq = list(it); i = 0; while i < len(seq): x = seq[i]; i += 1;
    body``."""
    seq, index = fresh(), fresh()

    def load(name):
        return ast.Name(name, ast.Load())

    step = [
        ast.Assign([stmt.target], ast.Subscript(load(seq), load(index), ast.Load()), lineno=0),
        ast.AugAssign(ast.Name(index, ast.Store()), ast.Add(), ast.Constant(1)),
    ]
    test = ast.Compare(load(index), [ast.Lt()], [ast.Call(load("len"), [load(seq)], [])])
    return [
        ast.Assign([ast.Name(seq, ast.Store())], ast.Call(load("list"), [stmt.iter], []), lineno=0),
        ast.Assign([ast.Name(index, ast.Store())], ast.Constant(0), lineno=0),
        ast.While(test, step + stmt.body, []),
    ]


def loops(tree: ast.Module, given: set[int], fresh: Fresh) -> None:
    for node, name, body in list(blocks(tree)):
        new = []
        for stmt in body:
            if line(stmt) in given:
                new.append(stmt)
            elif isinstance(stmt, ast.For) and not stmt.orelse:
                new.extend(for_to_while(stmt, fresh))
            else:
                new.extend(unroll_comprehension(stmt, fresh) or [stmt])
        setattr(node, name, new)


# ---------------------------------------------------------------- dead code


def dead_statements(fresh: Fresh, rng: random.Random) -> list[ast.stmt]:
    name = fresh()
    pool = [
        f"{name} = 0",
        f"{name} = None\nif {name} is not None:\n    print({name})",
        f"if False:\n    {name} = []",
        f"{name} = []\ndel {name}",
        f"{name} = {rng.randrange(2, 99)} * 2",
    ]
    return ast.parse(rng.choice(pool)).body


def deadcode(tree: ast.Module, given: set[int], rng: random.Random, fresh: Fresh) -> None:
    spots = [
        (node, name, i)
        for node, name, body in blocks(tree)
        if not isinstance(node, ast.Module)
        for i in range(len(body))
    ]
    for node, name, i in sorted(
        rng.sample(spots, min(len(spots), rng.randint(2, 4))), key=lambda s: -s[2]
    ):
        body = getattr(node, name)
        if not is_barrier(body[i], set()):
            body[i + 1 : i + 1] = dead_statements(fresh, rng)


# ---------------------------------------------------------------- text


def restore_release_lines(source: str, release: str) -> str:
    """``source`` (code as ``ast.unparse`` writes it) with the release's one-line statements written
    as the release writes them (its comments are not put back: they are not code)."""
    spelled = {}
    for text in release.splitlines():
        try:
            spelled[ast.unparse(ast.parse(text.strip())).strip()] = text.strip()
        except SyntaxError:
            continue
    out = []
    for text in source.splitlines():
        indent = text[: len(text) - len(text.lstrip())]
        out.append(indent + spelled[text.strip()] if text.strip() in spelled else text)
    return "\n".join(out) + "\n"


def recomment(source: str, rng: random.Random) -> str:
    """``source`` with its own comments dropped, comments of another wording added at the end of
    some lines, and blank lines here and there."""
    lines = []
    for text in source.splitlines():
        if text.strip().startswith("#") and rng.random() < 0.5:
            continue
        if (
            text.strip()
            and not text.rstrip().endswith((":", ",", "(", "[", "{", "\\"))
            and '"""' not in text
            and rng.random() < 0.25
        ):
            text = (
                f"{text}  # "
                f"{rng.choice(['ok', 'the main step', 'see above', 'careful here', 'edge case'])}"
            )
        lines.append(text)
        if rng.random() < 0.15:
            lines.append("")
    return "\n".join(lines) + "\n"


def disguise(source: str, release: str, kind: str, seed: str) -> str:
    rng = random.Random(seed)
    if kind == "comments":
        return recomment(source, rng)
    tree = ast.parse(source)
    given_text = {"".join(text.split()) for text in release.splitlines() if text.strip()}
    given = {
        i + 1 for i, text in enumerate(source.splitlines()) if "".join(text.split()) in given_text
    }
    fresh = Fresh(rng, names_of(tree) | KEPT | release_names(release))
    steps = KINDS[:-1] if kind == "all" else (kind,)
    if "renamed" in steps:
        rename(tree, release_names(release), fresh)
    if "reordered" in steps:
        reorder(tree, given, rng)
    if "split" in steps:
        split(tree, given, rng, fresh)
    if "loops" in steps:
        loops(tree, given, fresh)
    if "deadcode" in steps:
        deadcode(tree, given, rng, fresh)
    text = restore_release_lines(ast.unparse(ast.fix_missing_locations(tree)), release)
    return recomment(text, rng) if "comments" in steps else text


# ---------------------------------------------------------------- the files


def release_cell(grade_id: str) -> str:
    """The release's source of the answer cell ``grade_id`` (as the learner receives it)."""
    import nbformat

    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, 4).cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
                return cell.source
    raise KeyError(grade_id)


def course_answer(grade_id: str) -> str:
    import nbformat

    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        for cell in nbformat.read(path, 4).cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
                return _MARKER.sub("", cell.source)
    raise KeyError(grade_id)


def generated() -> dict[Path, str]:
    """{path: text} of every generated copy."""
    found = {}
    for folder in sorted(p for p in HERE.iterdir() if p.is_dir()):
        release = release_cell(folder.name)
        for origin in SOURCES:
            source = (
                course_answer(folder.name)
                if origin == "course"
                else (folder / f"{origin}.txt").read_text(encoding="utf-8")
            )
            for kind in KINDS:
                name = f"{kind}_of_{origin}"
                found[folder / "generated" / f"{name}.txt"] = disguise(
                    source, release, kind, f"{folder.name}/{name}"
                )
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="compare with the stored files, write nothing"
    )
    args = parser.parse_args()
    files = generated()
    stale = [
        p for p, text in files.items() if not p.is_file() or p.read_text(encoding="utf-8") != text
    ]
    if args.check:
        print(
            "\n".join(str(p.relative_to(HERE)) for p in stale)
            or f"all {len(files)} generated copies are up to date"
        )
        return 1 if stale else 0
    for path, text in files.items():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} copies ({len(stale)} changed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
