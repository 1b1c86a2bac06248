"""The one format for hidden tests: named *ideas*, each with its share of a TODO's points.

In ``solutions/``, a grade cell keeps its public checks in the open and its hidden tests
between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``. The hidden region declares
which learner functions it calls and groups its asserts into ideas::

    ### BEGIN HIDDEN TESTS
    from tools.checks import idea, uses
    uses('estimate_handoff', stand_ins={'compute_exposed_interval': 'todo1_solution'})

    @idea('latency_added', 0.5, 'The fixed latency is added once, not scaled by the bandwidth')
    def _():
        assert ...
    ### END HIDDEN TESTS

Both names come from ``tools.checks``: in the instructor's own notebook an idea runs where
it stands; at grading the judge collects the ideas instead and runs them itself.

- ``uses(*names, stand_ins={})``: the functions the ideas call. Each ``stand_ins`` entry
  replaces a function of another TODO, while these ideas run, by the instructor's answer
  in the named solution cell, so a mistake there costs only its own TODO.
- ``idea(id, points, text)``: an idea, passed when its function returns without error.
  The points of a cell's ideas add up to the cell's points (``python -m autograde check``
  verifies it). The text is what the learner reads in the feedback, so it states the rule,
  as the prompt does.

The region never runs in a learner's kernel: the trusted judge (``judge.py``) runs it, with
the learner's functions answering from the sandbox.

The public checks in the open part of the cell belong to the ideas too: each
``@checks.case(idea='...')`` names the idea it is about, and the judge runs it (from the
instructor's source, not the learner's copy) as part of that idea, after the idea's hidden
asserts. An answer that fails a public check therefore never keeps that idea's points. So that
the judge can run it outside the learner's kernel, the open part is self-contained: it imports
what it uses, and reads nothing of the notebook but the learner's functions that ``uses`` names
and their stand-ins (``check_course`` verifies both).

Every assert carries a message, written in the assert (or in a helper's description of what it
checks) as a string or an f-string: the feedback shows it in the submission's language, its values
filled in (``Said`` below), and ``check`` refuses one the catalog cannot hold or has not translated.
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import string
import symtable
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..model import JsonRecord

HIDDEN = re.compile(
    r"^[ \t]*### BEGIN HIDDEN TESTS[ \t]*\n(.*?)^[ \t]*### END HIDDEN TESTS[ " r"\t]*\n?",
    re.S | re.M,
)
IDEA_ID = re.compile(r"^[a-z][a-z0-9_]{0,40}$")


@dataclass
class Idea:
    id: str
    points: float
    text: str
    check: Callable[[], None] | None = None


@dataclass
class PublicCase:
    """A public check of a grade cell's open part: the idea it names, its label, its function."""

    idea: str | None
    label: str
    check: Callable[[], None]


@dataclass
class HiddenTests:
    """A grade cell's hidden tests, parsed."""

    grade_id: str
    points: float
    source: str
    uses: list[str] = field(default_factory=list)
    stand_ins: dict[str, str] = field(default_factory=dict)  # function name -> solution grade id
    ideas: list[Idea] = field(default_factory=list)
    namespace: dict = field(default_factory=dict, repr=False)  # the ideas' globals


# ---------------------------------------------------------------- failure messages
# A grade cell's failure messages (hidden or public) are English text that the feedback page shows
# in the submission's language. The judge compiles the cell with each of its texts (a string or an
# f-string of words, not a docstring: an assert's message, a helper's description of what it checks)
# turned into a ``Said``: the same English text, carrying its catalog key (an f-string as a template
# whose ``{0}``, ``{1}``... stand for its values, as ``message_template`` writes it) and its values,
# each formatted as the f-string formats it, a value that is itself a ``Said`` kept as one. The page
# renders the key's translation with the values: nothing is matched against text, and the cells are
# the same in every edition.

# the names a compiled cell calls to make a message and keep a value
MESSAGE_CALL = "__course_said__"
VALUE_CALL = "__course_value__"
# calls whose text arguments are not messages
NOT_MESSAGES = {"idea", "uses", "hidden_random", "case"}


class Said(str):
    """A message's English text, with the catalog key it was made from and its values (plain
    strings, or a nested ``Said`` for a text that is translated on its own, such as a label).
    A ``plain`` message is its key as written (a string literal, whose braces are text)."""

    template: str
    values: tuple
    plain: bool

    def __new__(cls, template: str, values=(), plain: bool = False):
        values = tuple(values)
        said = super().__new__(cls, template if plain else template.format(*values))
        said.template, said.values, said.plain = template, values, plain
        return said

    def to_json(self) -> dict:
        data = {
            "t": self.template,
            "v": [v.to_json() if type(v) is Said else str(v) for v in self.values],
        }
        return {**data, "plain": True} if self.plain else data


def said(template: str, *values) -> Said:
    """A message of the grader's own, ``{0}``, ``{1}``... its values (see MESSAGES in judge.py)."""
    return Said(template, values)


def _value(value) -> str:
    """An f-string's value as a message keeps it: a ``Said`` as it is, anything else formatted."""
    return value if type(value) is Said else format(value)


def render_message(data, words: dict[str, str] | None = None, limit: int = 400) -> str:
    """A message recorded by ``Said.to_json`` in the language of ``words`` (a key's translation,
    else its English), each plain value cut to ``limit`` characters; a translation that lost a
    field falls back to the English template."""
    words = words or {}
    if isinstance(data, str):
        return data
    if not isinstance(data, dict) or not isinstance(data.get("t"), str):
        return ""
    template = data["t"]
    translated = words.get(template, template)
    if data.get("plain"):
        return translated
    values = [
        render_message(v, words, limit) if isinstance(v, dict) else str(v)[:limit]
        for v in data.get("v", [])
    ]
    try:
        if _fields(translated) == _fields(template):
            return translated.format(*values)
    except (IndexError, KeyError, ValueError):
        pass
    try:
        return template.format(*values)
    except (IndexError, KeyError, ValueError):
        return template


def _fields(template: str) -> set[str]:
    """The fields a template names (ValueError when it does not parse)."""
    return {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}


@dataclass(frozen=True)
class Comment:
    """A comment of a source: the column of its ``#``, its text (the ``#`` kept), and whether its
    line holds nothing else."""

    column: int
    text: str
    alone: bool


@dataclass(frozen=True)
class Comments:
    """The comments of a source, by line index (from 0): a line holds one comment at most."""

    by_line: dict[int, Comment]

    def alone(self, line: int) -> str | None:
        """The comment of ``line`` when the line holds nothing else (None: it holds code, or no
        comment)."""
        found = self.by_line.get(line)
        return found.text if found and found.alone else None

    def after_code(self, line: int) -> Comment | None:
        """The comment that follows code on ``line`` (None: there is none)."""
        found = self.by_line.get(line)
        return found if found and not found.alone else None


def source_comments(source: str) -> Comments | None:
    """The comments of ``source`` (a ``#`` inside a string is no comment); None when it does not
    tokenize."""
    lines = source.split("\n")
    found = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            row, column = token.start
            if token.type == tokenize.COMMENT:
                found[row - 1] = Comment(column, token.string, not lines[row - 1][:column].strip())
    except (tokenize.TokenError, SyntaxError):
        return None
    return Comments(found)


def docstrings(source: str) -> list[tuple[int, int, int, int, str]]:
    """Each docstring of a function or class in ``source``: (first line, its column, last line, the
    column after it, its text as ``ast.get_docstring`` cleans it), lines counted from 0, columns in
    characters; none when ``source`` does not parse (a line of IPython magic counts as empty)."""
    try:
        tree = ast.parse(re.sub(r"^\s*[%!].*$", "", source, flags=re.M))
    except SyntaxError:
        return []
    lines, found = source.split("\n"), []
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and ast.get_docstring(node) is not None
        ):
            value = node.body[0].value
            start = len(lines[value.lineno - 1].encode()[: value.col_offset].decode())
            end = len(lines[value.end_lineno - 1].encode()[: value.end_col_offset].decode())
            found.append(
                (value.lineno - 1, start, value.end_lineno - 1, end, ast.get_docstring(node))
            )
    return sorted(found)


def without_docstrings(source: str) -> str:
    """``source`` with each docstring (docstrings) written as ``""``: an edition may word them."""
    lines = source.split("\n")
    for first, start, last, end, _ in reversed(docstrings(source)):
        lines[first : last + 1] = [lines[first][:start] + '""' + lines[last][end:]]
    return "\n".join(lines)


def code_only(source: str) -> str:
    """``source`` without its comments (comment-only lines dropped, a trailing comment cut off its
    line) and with its docstrings empty (without_docstrings): what runs, the same in every edition
    (an edition may word a code cell's comments and docstrings in its language). A source that does
    not tokenize loses the lines that start with ``#``."""
    source = without_docstrings(source)
    lines = source.split("\n")
    comments = source_comments(source)
    if comments is None:
        return "\n".join(line for line in lines if not line.lstrip().startswith("#")).strip()
    kept = []
    for i, line in enumerate(lines):
        if comments.alone(i) is None:
            trailing = comments.after_code(i)
            kept.append(line if trailing is None else line[: trailing.column].rstrip())
    return "\n".join(kept).strip()


def is_text(text: str | None) -> bool:
    """Words a person reads, not a key, a colour or a format string."""
    return bool(text) and bool(re.search(r"[A-Za-z]{3,}", text)) and " " in text.strip()


def message_template(node: ast.expr) -> str | None:
    """A string literal's text, or an f-string as a template with ``{0}``, ``{1}``... for its
    values."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts, n = [], 0
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value).replace("{", "{{").replace("}", "}}"))
            else:
                parts.append(f"{{{n}}}")
                n += 1
        return "".join(parts)
    return None


def message_nodes(tree: ast.AST) -> list[ast.expr]:
    """The texts of a grade cell that a failure message may show (each a catalog key): every string
    or f-string of words (``is_text``), whole, but docstrings, a piece of an f-string, a format
    spec, and the arguments of ``idea``, ``uses``, ``hidden_random`` and ``case``."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.body
        ):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        elif isinstance(node, ast.JoinedStr):
            skip |= {id(v) for v in node.values if isinstance(v, ast.Constant)}
        elif isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            skip |= {id(n) for n in ast.walk(node.format_spec)}
        elif isinstance(node, ast.Call):
            name = (
                node.func.attr
                if isinstance(node.func, ast.Attribute)
                else getattr(node.func, "id", "")
            )
            if name in NOT_MESSAGES:
                skip |= {
                    id(n)
                    for arg in [*node.args, *(k.value for k in node.keywords)]
                    for n in ast.walk(arg)
                }
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.Constant, ast.JoinedStr))
        and id(node) not in skip
        and is_text(message_template(node))
    ]


def message_templates(tree: ast.AST) -> list[str]:
    """The catalog keys of a grade cell's texts (``message_nodes``), each once, in order."""
    return list(dict.fromkeys(message_template(node) for node in message_nodes(tree)))


class _Messages(ast.NodeTransformer):
    """Each text of ``message_nodes`` made a ``Said`` where it stands."""

    def __init__(self, tree: ast.AST):
        self.chosen = {id(node) for node in message_nodes(tree)}

    def visit_Constant(self, node: ast.Constant):
        if id(node) not in self.chosen:
            return node
        return ast.copy_location(self._call(node.value, [], plain=True), node)

    def visit_JoinedStr(self, node: ast.JoinedStr):
        chosen = id(node) in self.chosen
        self.generic_visit(node)  # a text inside one of its values is a message of its own
        if not chosen:
            return node
        values = [
            ast.Call(ast.Name(VALUE_CALL, ast.Load()), [v.value], [])
            if v.conversion == -1 and v.format_spec is None
            else ast.JoinedStr([v])
            for v in node.values
            if isinstance(v, ast.FormattedValue)
        ]
        return ast.copy_location(self._call(message_template(node), values), node)

    @staticmethod
    def _call(template: str, values: list, plain: bool = False) -> ast.Call:
        args = [ast.Constant(template), ast.Tuple(values, ast.Load())] + (
            [ast.Constant(True)] if plain else []
        )
        return ast.Call(ast.Name(MESSAGE_CALL, ast.Load()), args, [])


def compile_cell(source: str, filename: str):
    """A grade cell's code compiled as the judge runs it: each of its texts a ``Said`` (the
    namespace it runs in needs ``MESSAGE_CALL`` and ``VALUE_CALL``: ``cell_scope`` gives them)."""
    tree = ast.parse(source, filename)
    return compile(ast.fix_missing_locations(_Messages(tree).visit(tree)), filename, "exec")


def cell_scope(name: str, **given) -> dict[str, object]:
    """The namespace a grade cell's code runs in (``compile_cell``): its module name, the calls its
    texts became, and ``given``."""
    return {"__name__": name, MESSAGE_CALL: Said, VALUE_CALL: _value, **given}


def message_problems(source: str, where: str) -> list[str]:
    """Failure messages the feedback cannot show translated: an assert without a message, or one put
    together at run time (``+``, ``%``, ``.format``, ``.join``) rather than written as a text."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            msg = node.msg
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "AssertionError":
            msg = node.args[0] if node.args else None
        else:
            continue
        code = " ".join(ast.unparse(node).split())[:80]
        if msg is None:
            problems.append(
                f"{where}: {code!r} has no message: say what is wrong, in the learner's terms"
            )
        elif isinstance(msg, ast.BinOp) or (
            isinstance(msg, ast.Call) and getattr(msg.func, "attr", "") in ("format", "join")
        ):
            problems.append(
                f"{where}: {code!r}: write its message as a text (a string or an "
                "f-string), so the catalog can translate it"
            )
    return problems


def split_hidden(source: str) -> tuple[str, str]:
    """(the cell without its hidden regions, the hidden regions joined)."""
    hidden = "\n".join(m.group(1) for m in HIDDEN.finditer(source))
    return HIDDEN.sub("", source), hidden


def load(source: str, grade_id: str = "?", points: float = 0.0) -> HiddenTests:
    """Run a hidden region's definitions (not its ideas) and collect what it declares."""
    from tools import checks

    spec = HiddenTests(grade_id, points, source)

    class Collector:
        @staticmethod
        def uses(names, stand_ins):
            spec.uses.extend(names)
            spec.stand_ins.update(stand_ins)

        @staticmethod
        def idea(idea_id, share, text, fn):
            spec.ideas.append(Idea(idea_id, float(share), text, fn))

    scope = cell_scope(f"hidden_tests_{grade_id}")
    with checks.collecting(Collector()):
        exec(compile_cell(source, f"<hidden tests of {grade_id}>"), scope)
    spec.namespace = scope  # the judge puts the learner's functions here
    return spec


def load_public(source: str, grade_id: str = "?", given: dict | None = None) -> list[PublicCase]:
    """Run a grade cell's open part (its hidden regions removed) the way the judge does: ``given``
    (the learner's functions as the judge calls them, and their stand-ins) is put in its namespace
    first; ``PublicChecks.case`` hands each case here and ``PublicChecks.run`` runs nothing.
    Returns the cases, in the cell's order."""
    from tools import checks

    cases: list[PublicCase] = []

    class Collector:
        @staticmethod
        def uses(names, stand_ins):
            pass

        @staticmethod
        def idea(idea_id, share, text, fn):
            pass

        @staticmethod
        def public(idea_id, label, fn):
            cases.append(PublicCase(idea_id, label, fn))

    scope = cell_scope(f"public_checks_{grade_id}", **(given or {}))
    with checks.collecting(Collector()):
        exec(compile_cell(source, f"<public checks of {grade_id}>"), scope)
    return cases


def free_names(source: str) -> set[str]:
    """The global names that ``source`` reads and neither defines nor imports (builtins
    excepted)."""
    table = symtable.symtable(source, "<cell>", "exec")
    defined = {
        s.get_name()
        for s in table.get_symbols()
        if s.is_assigned() or s.is_imported() or s.is_namespace()
    }
    read: set[str] = set()

    def walk(scope: symtable.SymbolTable) -> None:
        for symbol in scope.get_symbols():
            if symbol.is_referenced() and (scope is table or symbol.is_global()):
                read.add(symbol.get_name())
        for child in scope.get_children():
            walk(child)

    walk(table)
    return read - defined - set(dir(builtins))


def check_public(spec: HiddenTests, public: str) -> list[str]:
    """What stops the judge from running a cell's public checks with its ideas: a name the open
    part reads from the notebook (other than the learner's functions and their stand-ins), a part
    that does not run, a case that names no idea or an idea the cell does not grade, an idea with
    no public case."""
    where = f"public checks of {spec.grade_id}"
    try:
        outside = free_names(public) - set(spec.uses) - set(spec.stand_ins)
    except SyntaxError as exc:
        return [f"{where}: do not parse ({exc})"]
    if outside:
        return [
            f"{where}: read {sorted(outside)} from the notebook: import them in the cell, so "
            "the judge can run it"
        ]
    dummies = {name: _not_called for name in [*spec.uses, *spec.stand_ins]}
    try:
        cases = load_public(public, spec.grade_id, dummies)
    except Exception as exc:
        return [f"{where}: do not run as the judge runs them ({type(exc).__name__}: {exc})"]
    graded = {item.id for item in spec.ideas}
    problems = []
    for case in cases:
        if case.idea is None:
            problems.append(f"{where}: {case.label!r} names no idea (@checks.case(idea='...'))")
        elif case.idea not in graded:
            problems.append(
                f"{where}: {case.label!r} names {case.idea!r}, which is not an idea of this cell"
            )
    for missing in sorted(graded - {case.idea for case in cases}):
        problems.append(f"{where}: no public check names the idea {missing!r}")
    return problems


def _not_called(*args, **kwargs):
    raise AssertionError(
        "the open part of a grade cell must not call the learner's functions as it loads"
    )


def validate(spec: HiddenTests) -> list[str]:
    """What is wrong with a cell's ideas (empty when the format holds)."""
    problems = []
    where = f"hidden tests of {spec.grade_id}"
    if not spec.uses:
        problems.append(
            f"{where}: no uses('function', ...) line: the judge would not know what to call"
        )
    if not spec.ideas:
        problems.append(f"{where}: no @idea(...) groups")
    seen = set()
    for item in spec.ideas:
        if not IDEA_ID.match(item.id):
            problems.append(f"{where}: idea id {item.id!r} must be lower_snake_case")
        if item.id in seen:
            problems.append(f"{where}: idea id {item.id!r} appears twice")
        seen.add(item.id)
        if item.points <= 0:
            problems.append(f"{where}: idea {item.id!r} has {item.points:g} points (must be > 0)")
        if len(item.text.strip()) < 10:
            problems.append(f"{where}: idea {item.id!r} needs a sentence the learner can read")
    total = sum(item.points for item in spec.ideas)
    if spec.ideas and abs(total - spec.points) > 1e-9:
        problems.append(
            f"{where}: the ideas add up to {total:g} points, the cell is worth {spec.points:g}"
        )
    return problems


@dataclass(frozen=True)
class GradeCellTests(JsonRecord):
    """One grade cell's tests, as the judge runs them (``judge.json`` keeps them so): its grade id,
    its points, its hidden tests and its open part, the public checks."""

    grade_id: str
    points: float
    hidden: str
    public: str = ""

    @classmethod
    def from_json(cls, data: dict) -> GradeCellTests:
        return cls(
            str(data["grade_id"]),
            float(data["points"]),
            str(data["hidden"]),
            str(data.get("public", "")),
        )


@dataclass(frozen=True)
class NotebookTests:
    """One instructor notebook's grade cells' tests, in order, and its solution cells' sources by
    grade id."""

    tests: tuple[GradeCellTests, ...]
    solutions: dict[str, str]


@dataclass(frozen=True)
class CourseTests:
    """Every notebook's tests (by notebook stem, in course order), and, of the whole course, every
    grade cell's tests and every solution cell's source, by grade id."""

    notebooks: dict[str, NotebookTests]
    cells: dict[str, GradeCellTests]
    solutions: dict[str, str]


def course_tests(paths: list[Path]) -> CourseTests:
    """Every grade cell's hidden tests and public checks and every solution cell, from the
    instructor sources."""
    notebooks = {}
    for path in paths:
        tests, solutions = [], {}
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("solution"):
                solutions[meta["grade_id"]] = cell.source
            elif meta.get("grade"):
                public, hidden = split_hidden(cell.source)
                tests.append(
                    GradeCellTests(meta["grade_id"], float(meta["points"]), hidden, public)
                )
        notebooks[path.stem] = NotebookTests(tuple(tests), solutions)
    cells = {test.grade_id: test for notebook in notebooks.values() for test in notebook.tests}
    return CourseTests(
        notebooks,
        cells,
        {
            gid: source
            for notebook in notebooks.values()
            for gid, source in notebook.solutions.items()
        },
    )


@dataclass(frozen=True)
class NotebookSpec(JsonRecord):
    """What the judge needs of one notebook: its grade cells' tests and the code cells the release
    gives."""

    tests: tuple[GradeCellTests, ...]
    given: tuple[str, ...]


@dataclass(frozen=True)
class JudgeSpec(JsonRecord):
    """``judge.json``, what the trusted judge is given (written with the grading master, read by
    each grading worker): each notebook's tests and given cells, every solution cell's source by
    grade id, and each edition's feedback translations."""

    notebooks: dict[str, NotebookSpec]
    solutions: dict[str, str]
    translations: dict[str, dict[str, str]]

    @classmethod
    def from_json(cls, data: dict) -> JudgeSpec:
        notebooks = {
            name: NotebookSpec(
                tuple(GradeCellTests.from_json(t) for t in spec["tests"]), tuple(spec["given"])
            )
            for name, spec in data["notebooks"].items()
        }
        return cls(notebooks, dict(data["solutions"]), dict(data.get("translations", {})))


def check_manual(paths: list[Path]) -> list[str]:
    """Each answer graded by a person is a markdown cell with points and a model answer
    between the solution markers, and no hidden tests (a person, not the judge, scores it)."""
    problems = []
    for path in paths:
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if not (meta.get("grade") and meta.get("solution")):
                continue
            where = f"{path.name}: answer cell {meta.get('grade_id')}"
            if cell.cell_type != "markdown":
                problems.append(f"{where}: a manually graded answer must be a markdown cell")
            if float(meta.get("points", 0)) <= 0:
                problems.append(f"{where}: has no points")
            if not re.search(r"### BEGIN SOLUTION\n.*\S.*\n### END SOLUTION", cell.source, re.S):
                problems.append(
                    f"{where}: needs a model answer between ### BEGIN SOLUTION and ### END SOLUTION"
                )
            if HIDDEN.search(cell.source):
                problems.append(
                    f"{where}: holds hidden tests; a person grades it, the judge does not"
                )
    return problems


def check_course(paths: list[Path]) -> list[str]:
    """Every hidden region parses, follows the format, adds up, and names real solution cells;
    every public check names one of its cell's ideas and can run in the judge (check_public);
    answers graded by a person have none (check_manual)."""
    problems = check_manual(paths)
    found = course_tests(paths)
    for test in (test for notebook in found.notebooks.values() for test in notebook.tests):
        try:
            spec = load(test.hidden, test.grade_id, test.points)
        except Exception as exc:
            problems.append(
                f"hidden tests of {test.grade_id}: do not run ({type(exc).__name__}: {exc})"
            )
            continue
        problems += validate(spec)
        problems += check_public(spec, test.public)
        problems += message_problems(test.hidden, f"hidden tests of {test.grade_id}")
        problems += message_problems(test.public, f"public checks of {test.grade_id}")
        for name, source_id in spec.stand_ins.items():
            if source_id not in found.solutions:
                problems.append(
                    f"hidden tests of {test.grade_id}: stand-in {name} names no "
                    f"solution cell {source_id!r}"
                )
    return problems


def public_ideas(source: str) -> set[str]:
    """The idea ids that a grade cell's public checks name (``@checks.case(idea='...')``)."""
    return set(re.findall(r"@checks\.case\(\s*idea\s*=\s*['\"]([a-z0-9_]+)['\"]", source))
