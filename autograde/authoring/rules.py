"""Every graded rule checked in public: the hidden asserts that no public check stands behind.

A TODO's hidden ideas grade rules its prompt states; its public checks (the grade cell's open
part) are what a learner can run before submitting. A rule graded in secret and checked nowhere
in public costs points that no green check warned of: an answer that rejects ``layers=4.0``, or
lets an incorrect fixed-window case through, passed every public check and lost 0.25 and 0.5.
A mutation table of the answers cannot find these (they are rules an answer must *add*, not
operators to flip), and a reader finds them by chance. This finds them by running both.

**Classes of input.** The learner's function is called by the ideas' asserts and by the public
checks. Each call has *facts*, each about one part of its arguments: a number's kind and sign
(negative or not; NaN and infinities apart), a string when the reference answer names it as a
literal (``'calibrated'``, a verdict's label; any other string is just "a string"), a boolean or
``None``, a list empty or not, a dict having or lacking a key; and the reference answer's
*decision* on it (the exception it raises, or the label, flag or dict of labels and flags it
returns). A *class* is one fact with one decision. So ``stream_layers(…, 4.0, …)`` that returns is
not ``stream_layers(…, 2.5, …)`` that raises, and an incorrect ``'fixed'`` window rejected is not
an incorrect ``'calibrated'`` one. How finely the facts are cut is the reference answer's own
(``rule_classes.py``, which says why each merge hides no rule): int and float are one kind of
number unless the answer asks a value's type, a value the answer never reads is no fact, a value
it only compares with other values is one class whatever its kind, and a dict's keys are facts
one at a time. Two facts that hold on the same calls are one class.

**A wrong answer for each class.** For each class an idea calls, the check makes *wrong
answers*: the reference answer, except that on every call of that class (and on no other) it
raises ``ValueError``, or returns another value (another label the function returns, a number
plus one, a boolean flipped, a key of its dict left out or changed, an item dropped), or, where
the reference raises, returns ``None`` or raises another exception. A wrong answer that makes the
idea fail is one the idea grades. Then every public check of the cell runs against that same
wrong answer. If none fails, the class is **unchecked in public**: here is an answer that
differs from the reference only on inputs that the idea grades, and every public check is green.

**Sound, not vacuous.** Nothing is compared as text: the ideas and the public checks run, as
the judge runs them (the stand-ins in place). A public check counts only if it goes red on the
wrong answer, so a check that calls the function and ignores its result (``inputs_unchanged``)
covers nothing, and neither does a case that swallows the error. The reference answer must pass
every idea and every public check first, and every idea must be failed by some wrong answer of
its own classes: an idea the check cannot make fail is reported, never passed. What it does not
see: a rule inside one class (a boundary such as ``<= 0.75`` against ``< 0.75``, which the
mutation table of the answers covers), a rule about how two values relate (``'3'`` is not ``3``, a
request id equal to the expected one: no class of one value states a relation), a rule about two
facts at once, and a class that no idea calls.

``python -m autograde check`` asks it ("every graded rule is checked in public") and passes only
when there is no gap at all; ``python -m autograde rules`` prints every gap with its wrong answer.
"""

from __future__ import annotations

import ast
import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..judging.ideas import GradeCellTests, HiddenTests, PublicCase, course_tests, load, load_public
from .rule_classes import ANY, Classes, Outcome, asks_kind, before_call, learn, said_fact

MAX_EXAMPLE = 160  # characters of an example call in a report
MAX_DEPTH = 2  # how deep into a returned dict or list the wrong values go


@dataclass
class Call:
    name: str
    args: tuple
    kwargs: dict
    outcome: Outcome
    copied: bool  # its arguments are a copy made before the call
    facts: frozenset = frozenset()  # of its arguments (``Classes.facts``)
    result: Any = None  # the outcome's shape (``Outcome.shaped``)

    def classed(self, classes: Classes) -> None:
        self.facts, self.result = (
            classes.facts(self.args, self.kwargs),
            self.outcome.shaped(classes),
        )

    def within(self, target: Target) -> bool:
        return (
            self.name == target.name and self.result == target.result and target.fact in self.facts
        )

    def written(self) -> str:
        shown = ", ".join([*map(repr, self.args), *(f"{k}={v!r}" for k, v in self.kwargs.items())])
        text = f"{self.name}({shown})"
        return text if len(text) <= MAX_EXAMPLE else text[: MAX_EXAMPLE - 1] + "…"


# ---------------------------------------------------------------- wrong answers


@dataclass(frozen=True)
class Wrong:
    """A wrong outcome on the calls of one class: ``describe`` says it, ``make`` gives it for a
    call's own reference outcome (a value to return, or an exception to raise)."""

    describe: str
    make: Callable[[Outcome], Outcome] = field(compare=False)


def _at(value: Any, path: tuple) -> Any:
    for step in path:
        value = value[step]
    return value


def _replaced(value: Any, path: tuple, change: Callable[[Any], Any]) -> Any:
    """``value`` with the item at ``path`` changed (a copy; the reference's own value is left
    alone)."""
    if not path:
        return change(value)
    made = copy.deepcopy(value)
    parent = _at(made, path[:-1])
    parent[path[-1]] = change(parent[path[-1]])
    return made


def _changes(
    value: Any, labels: set[str], path: tuple = ()
) -> list[tuple[str, Callable[[Any], Any], tuple]]:
    """(what, change, where) for each wrong value of ``value``, and of its items down to MAX_DEPTH:
    a decision changed (a flag flipped, another label, a number plus one, a list's last item
    dropped), never its form (a key left out is a slip the learner's own run shows, not a rule)."""
    where = "".join(f"[{step!r}]" for step in path) or "the result"
    found: list[tuple[str, Callable[[Any], Any], tuple]] = []
    if isinstance(value, bool):
        found.append((f"{where} flipped", lambda v: not v, path))
    elif isinstance(value, (int, float)) and math.isfinite(value):
        found.append((f"{where} plus 1", lambda v: v + 1, path))
    elif isinstance(value, str):
        found += [
            (f"{where} {other!r}", lambda v, other=other: other, path)
            for other in sorted(labels - {value})
        ]
    elif isinstance(value, dict) and len(path) < MAX_DEPTH:
        for key in value:
            found += _changes(value[key], labels, (*path, key))
    elif isinstance(value, (list, tuple)) and value and len(path) < MAX_DEPTH:
        found.append((f"{where} without its last item", lambda v: v[:-1], path))
        if isinstance(value, list):
            found += _changes(value[0], labels, (*path, 0))
    return found


def wrong_outcomes(example: Outcome, labels: set[str]) -> list[Wrong]:
    """The wrong outcomes tried on a class whose reference outcome is like ``example``."""
    if example.error is not None:
        wrong = [Wrong("returns None", lambda o: Outcome(None))]
        for kind in (ValueError, TypeError):
            if not isinstance(example.error, kind):
                wrong.append(
                    Wrong(
                        f"raises {kind.__name__}",
                        lambda o, kind=kind: Outcome(error=kind("a wrong answer")),
                    )
                )
        return wrong
    wrong = [Wrong("raises ValueError", lambda o: Outcome(error=ValueError("a wrong answer")))]
    for what, change, path in _changes(example.value, labels):
        wrong.append(
            Wrong(
                f"returns {what}",
                lambda o, change=change, path=path: Outcome(_replaced(o.value, path, change)),
            )
        )
    return wrong


def _labels(value: Any, found: set[str], depth: int = 0) -> None:
    """The strings a reference answer returned (a verdict's labels): another one is a wrong
    value."""
    if isinstance(value, str):
        found.add(value)
    elif isinstance(value, dict) and depth <= MAX_DEPTH:
        for item in value.values():
            _labels(item, found, depth + 1)
    elif isinstance(value, (list, tuple)) and depth <= MAX_DEPTH:
        for item in value:
            _labels(item, found, depth + 1)


# ---------------------------------------------------------------- the probe


@dataclass(frozen=True)
class Target:
    """The calls a wrong answer is wrong on: of the function ``name``, whose arguments have
    ``fact`` and whose reference outcome has the shape ``result``."""

    name: str
    fact: tuple
    result: Any


class Probe:
    """The learner's function as the ideas and the public checks call it: the reference answer,
    each call recorded, and, while ``wrong`` is set, a wrong outcome on the calls within ``target``.
    Its calls are classed once ``classes`` is learned (``learn``) from the calls of the baseline."""

    def __init__(self, name: str, reference: Callable, literals: frozenset[str], kinds_apart: bool):
        self.name, self.reference, self.literals, self.kinds_apart = (
            name,
            reference,
            literals,
            kinds_apart,
        )
        self.classes: Classes | None = None
        self.calls: list[Call] | None = None
        self.target: Target | None = None
        self.wrong: Wrong | None = None

    def __call__(self, *args, **kwargs):
        before = before_call(args, kwargs)
        try:
            outcome = Outcome(self.reference(*args, **kwargs))
        except Exception as exc:
            outcome = Outcome(error=exc)
        call = Call(self.name, before.args, before.kwargs, outcome, before.copied)
        if self.classes is not None:
            call.classed(self.classes)
        if self.calls is not None:
            self.calls.append(call)
        if self.wrong is not None and call.within(self.target):
            outcome = self.wrong.make(outcome)
        if outcome.error is not None:
            raise outcome.error
        return outcome.value


@dataclass
class Cell:
    """A grade cell ready to run in this process: its ideas and public cases bound to probes."""

    grade_id: str
    spec: HiddenTests
    public: list[PublicCase]
    probes: dict[str, Probe]


def _defines(source: str) -> set[str]:
    try:
        return {
            node.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)
        }
    except SyntaxError:
        return set()


def _literals(source: str) -> frozenset[str]:
    try:
        return frozenset(
            n.value
            for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        )
    except SyntaxError:
        return frozenset()


def load_cell(test: GradeCellTests, solutions: dict[str, str]) -> Cell:
    """A grade cell's ideas and public cases, the learner's functions the instructor's answers (each
    behind a probe), the stand-ins the instructor's answers too, as the judge binds them."""
    spec = load(test.hidden, test.grade_id, test.points)
    scope: dict[str, Any] = {"__name__": f"reference_{test.grade_id}"}
    for source_id in dict.fromkeys(spec.stand_ins.values()):
        exec(compile(solutions[source_id], f"<reference {source_id}>", "exec"), scope)  # noqa: S102 - the course's own answer
    stand_ins = {name: scope[name] for name in spec.stand_ins}
    own = [gid for gid, source in solutions.items() if set(spec.uses) & _defines(source)]
    for gid in own:
        exec(compile(solutions[gid], f"<reference {gid}>", "exec"), scope)  # noqa: S102 - the course's own answer
    # the reference answer is its own code and the course's answers it calls (the stand-ins)
    sources = [solutions[gid] for gid in dict.fromkeys([*own, *spec.stand_ins.values()])]
    literals = frozenset().union(*(_literals(source) for source in sources))
    probes = {name: Probe(name, scope[name], literals, asks_kind(sources)) for name in spec.uses}
    spec.namespace.update({**stand_ins, **probes})
    public = load_public(test.public, test.grade_id, {**stand_ins, **probes})
    return Cell(test.grade_id, spec, public, probes)


def _fails(check: Callable[[], None]) -> str | None:
    """None when ``check`` passes, else what it said (its first line)."""
    try:
        check()
    except Exception as exc:  # an idea or a case fails by raising anything
        return (f"{type(exc).__name__}: {exc}".splitlines() or [""])[0][:200]
    return None


def _recorded(cell: Cell, check: Callable[[], None]) -> tuple[str | None, list[Call]]:
    for probe in cell.probes.values():
        probe.calls = []
    try:
        failed = _fails(check)
        return failed, [call for probe in cell.probes.values() for call in probe.calls or []]
    finally:
        for probe in cell.probes.values():
            probe.calls = None


# ---------------------------------------------------------------- the check


@dataclass(frozen=True)
class Gap:
    """Calls an idea grades that no public check does, with the wrong answer that shows it."""

    grade_id: str
    idea: str
    points: float
    fact: str  # what the calls' arguments have (said_fact)
    result: str  # what the reference answer does on them
    example: str  # one such call, as the idea makes it
    wrong: str  # the wrong answer on those calls
    said: str  # what the idea said of it
    decision: str  # the reference's decision on them (said_decision)

    def line(self) -> str:
        return (
            f"{self.grade_id}: idea {self.idea!r} ({self.points:g} point(s)) grades calls "
            f"where {self.fact} and the "
            f"answer {self.result}, such as {self.example}; no public check does: an "
            f"answer that {self.wrong} on them "
            f"passes every public check and fails the idea ({self.said})"
        )


def _said_part(value: Any) -> str:
    if isinstance(value, tuple) and value[:1] == ("str",):
        return repr(value[1]) if len(value) > 1 else "a string"
    return (
        repr(value)
        if value is None or isinstance(value, bool)
        else f"a {value}"
        if isinstance(value, str)
        else repr(value)
    )


def said_decision(shaped: Any) -> str:
    """An outcome's shape (``Outcome.shaped``) in words: ``returns {'can_overlap': False, 'reasons':
    a list}``."""
    if shaped[0] == "raises":
        return f"raises {shaped[1]}"
    if shaped[1] == "dict":
        return (
            "returns {"
            + ", ".join(f"{key!r}: {_said_part(item)}" for key, item in sorted(shaped[2], key=repr))
            + "}"
        )
    value = shaped[1]
    return f"returns {_said_part(value)}" if not (isinstance(value, str)) else f"returns a {value}"


def said_result(outcome: Outcome) -> str:
    if outcome.error is not None:
        return f"raises {type(outcome.error).__name__}"
    text = repr(outcome.value)
    return "returns " + (text if len(text) <= 60 else text[:59] + "…")


@dataclass
class CellReport:
    grade_id: str
    gaps: list[Gap] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    targets: int = 0  # (fact, outcome) pairs of the calls the ideas make
    tried: int = 0  # wrong answers run against an idea
    graded: int = 0  # of which the idea failed


def _try(cell: Cell, target: Target, wrong: Wrong, check: Callable[[], None]) -> str | None:
    probe = cell.probes[target.name]
    probe.target, probe.wrong = target, wrong
    try:
        return _fails(check)
    finally:
        probe.target, probe.wrong = None, None


@dataclass
class Baseline:
    """Every call the reference answer got: from each idea (by its id), and from the public
    checks."""

    by_idea: dict[str, list[Call]]
    public: list[Call]

    def graded(self) -> list[Call]:
        """The calls the ideas make, idea by idea."""
        return [call for calls in self.by_idea.values() for call in calls]


def _baseline(cell: Cell, report: CellReport) -> Baseline:
    """Every call the ideas and the public checks make of the reference answer, which must pass them
    all; then each function's classes learned from them, and the calls classed."""
    ideas, public = {}, []
    for item in cell.spec.ideas:
        said, ideas[item.id] = _recorded(cell, item.check)
        if said:
            report.problems.append(
                f"{cell.grade_id}: the reference answer fails idea {item.id!r}: {said}"
            )
    for case in cell.public:
        said, calls = _recorded(cell, case.check)
        public += calls
        if said:
            report.problems.append(
                f"{cell.grade_id}: the reference answer fails the public check "
                f"{case.label!r}: {said}"
            )
    baseline = Baseline(ideas, public)
    graded = baseline.graded()
    for name, probe in cell.probes.items():
        mine = (
            [call for call in graded if call.name == name],
            [call for call in public if call.name == name],
        )
        probe.classes = learn(probe.reference, *mine, probe.literals, probe.kinds_apart)
        for call in mine[0] + mine[1]:
            call.classed(probe.classes)
    return baseline


def _distinct(
    targets: dict[Target, Call], graded: list[Call], public: list[Call]
) -> list[tuple[Target, Call]]:
    """One target for each set of calls, with its example call: two facts that hold on the same
    calls of the idea and of the public checks make the same wrong answers, which fail the same
    checks (``has the key 'name'`` on every call is ``any arguments``). Any arguments first, then
    the facts in their order."""
    kept: list[tuple[Target, Call]] = []
    extents = set()
    for target, example in sorted(targets.items(), key=lambda item: item[0].fact != ANY):
        extent = (
            tuple(call.within(target) for call in graded),
            tuple(call.within(target) for call in public),
        )
        if extent not in extents:
            extents.add(extent)
            kept.append((target, example))
    return kept


def check_cell(cell: Cell) -> CellReport:
    """The gaps of one grade cell (see the module's text)."""
    report = CellReport(cell.grade_id)
    baseline = _baseline(cell, report)
    if report.problems:
        return report
    labels: dict[str, set[str]] = {name: set() for name in cell.probes}
    for call in baseline.graded():
        if call.outcome.error is None:
            _labels(call.outcome.value, labels[call.name])
    caught: dict[tuple, bool] = {}  # (target, wrong answer) -> a public check went red
    for item in cell.spec.ideas:
        targets: dict[Target, Call] = {}
        for call in baseline.by_idea[item.id]:
            for fact in sorted(call.facts, key=lambda fact: (fact != ANY, repr(fact))):
                targets.setdefault(Target(call.name, fact, call.result), call)
        kept = _distinct(targets, baseline.by_idea[item.id], baseline.public)
        report.targets += len(kept)
        failed_any, whole = False, set()  # whole: (function, decision) whose every call is a gap
        for target, example in kept:
            if (target.name, target.result) in whole:
                continue  # a narrower gap of a decision already unchecked for any arguments
            seen = any(call.within(target) for call in baseline.public)
            for wrong in wrong_outcomes(example.outcome, labels[target.name]):
                report.tried += 1
                said = _try(cell, target, wrong, item.check)
                if said is None:
                    continue
                failed_any, report.graded = True, report.graded + 1
                mark = (target, wrong.describe)
                # a public check that never makes such a call cannot go red: it runs all the same
                if mark not in caught:
                    caught[mark] = any(
                        _try(cell, target, wrong, case.check) is not None for case in cell.public
                    )
                    assert seen or not caught[mark], (
                        f"{target}: a public check went red on calls it does not make"
                    )
                if not caught[mark]:
                    found = Gap(
                        cell.grade_id,
                        item.id,
                        item.points,
                        said_fact(target.fact),
                        said_result(example.outcome),
                        example.written(),
                        wrong.describe,
                        said,
                        said_decision(target.result),
                    )
                    report.gaps.append(found)
                    if target.fact == ANY:
                        whole.add((target.name, target.result))
                    break  # one wrong answer shows it
        if not failed_any:
            report.problems.append(
                f"{cell.grade_id}: no wrong answer on the calls of idea {item.id!r} makes "
                "it fail: the check cannot see its asserts"
            )
    return report


def course_reports(paths: list[Path]) -> list[CellReport]:
    """Every grade cell's report, in course order."""
    found = course_tests(paths)
    reports = []
    for notebook in found.notebooks.values():
        for test in notebook.tests:
            try:
                cell = load_cell(test, found.solutions)
            except Exception as exc:
                reports.append(
                    CellReport(
                        test.grade_id,
                        problems=[
                            f"{test.grade_id}: cannot be loaded ({type(exc).__name__}: {exc})"
                        ],
                    )
                )
                continue
            reports.append(check_cell(cell))
    return reports


def summarized(gaps: list[Gap]) -> list[str]:
    return [gap.line() for gap in gaps]


def rule_problems(paths: list[Path]) -> list[str]:
    """``check``'s question: what keeps every graded rule from being checked in public (every gap,
    and every problem that keeps the check from answering)."""
    reports = course_reports(paths)
    gaps = [gap for report in reports for gap in report.gaps]
    problems = [problem for report in reports for problem in report.problems]
    return problems + [
        line + " (add a public case for it to the TODO's test cell)" for line in summarized(gaps)
    ]


def print_rules(course, say: Callable[[str], None] = print) -> bool:
    """``python -m autograde rules``: each grade cell's counts, then every gap and problem. True
    when there is none."""
    reports = course_reports(course.source_paths())
    for report in reports:
        say(
            f"{report.grade_id}: {report.targets} kind(s) of call graded, {report.tried} "
            "wrong answer(s) run, "
            f"{report.graded} failed an idea, {len(report.gaps)} kind(s) unchecked in public"
        )
    gaps = [gap for report in reports for gap in report.gaps]
    lines = [problem for report in reports for problem in report.problems] + summarized(gaps)
    say("\n".join(lines) if lines else "every graded rule is checked in public")
    return not lines
