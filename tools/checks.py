"""Public checks that a learner can run anywhere, with or without nbgrader.

A test cell in a notebook builds a ``PublicChecks`` suite, registers a few cases and
calls ``run()``. It prints one line per case and a summary such as::

    TODO 1 · compute_exposed_interval: public checks 3/4 passed; hidden tests run at grading

When any case fails, it raises ``PublicChecksFailed`` (an AssertionError) at grading, so
nbgrader scores the cell 0, and outside a notebook. While a learner works in a notebook it
prints the failure in red instead and lets the notebook go on: Run All on a fresh notebook
reaches every figure and widget, each check cell saying what is left to do. Passing the
public checks never claims that the hidden tests passed.

When the variable ``COURSE_CHECK_REPORT`` names a file, each suite also appends one JSON
line to it; ``python -m autograde validate`` reads those lines.
"""

from __future__ import annotations

import json
import random
import sys
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

from . import settings
from .at_grading import grading_mode
from .i18n import localize, tr

REPORT_ENV = settings.CHECK_REPORT
STOP_ENV = settings.CHECKS_STOP

PASS, FAIL, TODO, ERROR = "pass", "fail", "not_started", "error"
ELSEWHERE = "waits_for_other_notebook"  # the TODO raised in a function loaded from another notebook
_MARKS = {PASS: "✓", FAIL: "✗", TODO: "…", ERROR: "✗", ELSEWHERE: "…"}


def unfinished_elsewhere(exc: BaseException) -> tuple[str, str] | None:
    """(notebook file, function) when ``exc`` (a NotImplementedError) was raised in a function that
    ``notebook_runtime.load_learner_functions`` loaded from another notebook (its code is compiled
    as ``<NAME.ipynb>``), else None: the exercise left to do is that notebook's, not this cell's."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    where = frames[-1]
    if where.filename.startswith("<") and where.filename.endswith(".ipynb>"):
        return where.filename[1:-1], where.name
    return None


def stops_on_failure() -> bool:
    """Whether a failed suite raises: at grading (nbgrader sets ``NBGRADER_EXECUTION``), outside
    a Jupyter kernel (a script, a test), or when ``COURSE_CHECKS_STOP=1`` asks for it. In a
    learner's notebook it does not, so that one unfinished TODO does not stop Run All."""
    if grading_mode() or settings.checks_stop():
        return True
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    # a Jupyter kernel's shell has one; a plain IPython shell not
    return getattr(shell, "kernel", None) is None


class PublicChecksFailed(AssertionError):
    """At least one public check of a suite failed."""

    def _render_traceback_(self) -> list[str]:
        # IPython shows these lines instead of a traceback: the ✗ lines above already say
        # what failed, and a stack through this module would only add noise.
        return [f"\x1b[0;31m{type(self).__name__}\x1b[0m: {self}"]


def _fail(message: str) -> None:
    """A suite failed with ``message``: raise where failures stop (see ``stops_on_failure``), else
    say it in red and let the notebook go on."""
    if stops_on_failure():
        raise PublicChecksFailed(message)
    goes_on = tr(
        "(The notebook goes on, so Run All shows every figure; at grading this cell fails.)"
    )
    print(f"✗ {message}\n  {goes_on}", file=sys.stderr)


@dataclass
class CaseResult:
    name: str
    status: str
    message: str = ""


@dataclass(frozen=True)
class SuiteReport:
    """One suite's run as it is reported to ``COURSE_CHECK_REPORT`` (one JSON line each, which
    ``validate`` reads back): its title, how many of its cases passed, how many there are, and each
    case's result."""

    title: str
    passed: int
    total: int
    cases: tuple[CaseResult, ...] = ()

    def to_json(self) -> dict:
        return {
            "title": self.title,
            "passed": self.passed,
            "total": self.total,
            "cases": [c.__dict__ for c in self.cases],
        }

    @classmethod
    def from_json(cls, data: dict) -> SuiteReport:
        return cls(
            data["title"],
            data["passed"],
            data["total"],
            tuple(CaseResult(**case) for case in data["cases"]),
        )


@dataclass
class PublicChecks:
    """A named group of public checks for one exercise."""

    title: str
    cases: list[tuple[str, Callable[[], None]]] = field(default_factory=list)

    def case(self, fn: Callable[[], None] | None = None, *, idea: str | None = None):
        """Decorator: register ``fn`` as a check. Its docstring is the check's label.

        ``@checks.case(idea='sorted')`` names the graded idea the check is about: the
        feedback after grading lists the same ideas, each with its points. At grading the
        trusted judge runs the case again, outside the learner's kernel, as part of that idea:
        an answer that fails it loses the idea's points."""

        def register(fn: Callable[[], None]) -> Callable[[], None]:
            first_line = (fn.__doc__ or fn.__name__).strip().splitlines()[0]
            # the judge reads the cell: it runs the case itself
            if _COLLECTOR is not None and hasattr(_COLLECTOR, "public"):
                _COLLECTOR.public(idea, first_line, fn)
                return fn
            label = localize(first_line)
            self.cases.append((f"{label} [{idea}]" if idea else label, fn))
            return fn

        return register(fn) if fn is not None else register

    def _run_one(self, label: str, fn: Callable[[], None]) -> CaseResult:
        try:
            fn()
        except NotImplementedError as exc:
            elsewhere = unfinished_elsewhere(exc)
            if elsewhere:
                notebook, function = elsewhere
                return CaseResult(
                    label,
                    ELSEWHERE,
                    tr(
                        "{function}, loaded from {notebook}, is not finished there (it "
                        "still raises NotImplementedError): "
                        "finish it in {notebook}, save that notebook, run the cell that "
                        "loads it, then this cell again",
                        function=function,
                        notebook=notebook,
                    ),
                )
            return CaseResult(
                label,
                TODO,
                tr("not implemented yet: replace `raise NotImplementedError()` with your code"),
            )
        except AssertionError as exc:
            return CaseResult(
                label,
                FAIL,
                localize(str(exc)) if str(exc) else tr("an assertion failed without a message"),
            )
        # a crash in the learner's code is a failed check, not a crash here
        except Exception as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            return CaseResult(
                label,
                ERROR,
                tr(
                    "{error}: {detail} (line {line} of {function})",
                    error=type(exc).__name__,
                    detail=localize(str(exc)),
                    line=where.lineno,
                    function=where.name,
                ),
            )
        return CaseResult(label, PASS)

    def run(self) -> None:
        """Run every case, print the results, raise PublicChecksFailed if any failed. While the
        judge reads a grade cell (``collecting``), nothing runs: the judge runs each case with its
        idea."""
        if _COLLECTOR is not None:
            return
        results = [self._run_one(label, fn) for label, fn in self.cases]
        passed = sum(r.status == PASS for r in results)
        for r in results:
            line = f"  {_MARKS[r.status]} {r.name}"
            if r.message:
                line += f"\n      → {r.message}"
            print(line)
        # the given input checks pass before any work: say the rest wait
        waiting = sum(r.status == TODO for r in results)
        elsewhere = sum(r.status == ELSEWHERE for r in results)
        title = localize(self.title)
        if elsewhere:
            summary = tr(
                "{title}: public checks {passed}/{total} passed, {elsewhere} waiting for "
                "an earlier notebook's exercise; hidden tests run at grading",
                title=title,
                passed=passed,
                total=len(results),
                elsewhere=elsewhere,
            )
        elif waiting:
            summary = tr(
                "{title}: public checks {passed}/{total} passed, {waiting} not started; "
                "hidden tests run at grading",
                title=title,
                passed=passed,
                total=len(results),
                waiting=waiting,
            )
        else:
            summary = tr(
                "{title}: public checks {passed}/{total} passed; hidden tests run at grading",
                title=title,
                passed=passed,
                total=len(results),
            )
        print(summary)
        self._report(results, passed)
        if passed != len(results):
            if elsewhere and all(r.status in (PASS, TODO, ELSEWHERE) for r in results):
                message = tr(
                    "{summary}. Finish that notebook first (the → lines above name it), "
                    "then run this cell again.",
                    summary=summary,
                )
            elif all(r.status in (PASS, TODO) for r in results):
                message = tr(
                    "{summary}. Finish the exercise above, then run this cell again.",
                    summary=summary,
                )
            else:
                message = tr(
                    "{summary}. Read the ✗ lines above: each says what is wrong.", summary=summary
                )
            _fail(message)

    def cannot_run(self, reason: str) -> None:
        """The suite cannot run yet (a function it calls is not defined): say ``reason``, in the
        learner's language, as a failed run says its summary. In a learner's notebook Run All goes
        on; at grading, outside a notebook or with ``COURSE_CHECKS_STOP=1``, it raises
        ``PublicChecksFailed``. While the judge reads a grade cell, nothing is said."""
        if _COLLECTOR is not None:
            return
        _fail(localize(reason))

    def _report(self, results: list[CaseResult], passed: int) -> None:
        target = settings.check_report()
        if not target:
            return
        record = SuiteReport(self.title, passed, len(results), tuple(results))
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")


# ---------------------------------------------------------------- hidden tests
# Hidden tests group their asserts into named ideas (see the grader's ``ideas.py``). In an
# instructor's own notebook an idea runs where it stands, so the source notebook checks
# its own answers; at grading, the trusted judge installs a collector here and runs the
# ideas itself, against the learner's functions.
_COLLECTOR = None
_INPUT_SALT: str | None = None


@contextmanager
def collecting(collector):
    """The judge, while it reads a grade cell: ``uses`` and ``idea`` hand what they declare to
    ``collector`` (its ``uses(names, stand_ins)`` and ``idea(id, points, text, fn)``) instead of
    running it, and so does ``PublicChecks.case`` when the collector has ``public(idea, label, fn)``
    (``PublicChecks.run`` then runs nothing); the previous collector comes back afterwards."""
    global _COLLECTOR
    previous, _COLLECTOR = _COLLECTOR, collector
    try:
        yield collector
    finally:
        _COLLECTOR = previous


def set_input_salt(salt: str | None) -> None:
    """The judge, before it runs a submission's hidden tests: the salt its random inputs are
    drawn with (None: the instructor's fixed inputs)."""
    global _INPUT_SALT
    _INPUT_SALT = salt or None


def hidden_random(seed: int) -> random.Random:
    """Hidden tests: the generator of their random inputs.

    In the instructor's notebook it is ``random.Random(seed)``: the same inputs on every run.
    At grading the judge salts it with a value derived from the submission's bytes and the
    course's instructor sources (which learners do not have): the same submission always gets
    the same inputs and so the same grade, and a changed one gets other inputs, so values that
    a learner's code saw in one grading are no use in the next."""
    return random.Random(seed if _INPUT_SALT is None else f"{_INPUT_SALT}:{seed}")


def uses(*names: str, stand_ins: dict[str, str] | None = None) -> None:
    """Hidden tests: the learner's functions that the ideas below call."""
    if _COLLECTOR is not None:
        _COLLECTOR.uses(names, dict(stand_ins or {}))


def idea(idea_id: str, points: float, text: str):
    """Hidden tests: a graded idea worth ``points``, passed when the function raises nothing."""

    def register(fn: Callable[[], None]) -> Callable[[], None]:
        if _COLLECTOR is not None:
            _COLLECTOR.idea(idea_id, points, text, fn)
        else:
            fn()
        return fn

    return register
