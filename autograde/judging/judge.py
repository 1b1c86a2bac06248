"""The trusted judge: where a TODO's score is decided.

Hidden tests run here, in the grading worker, never in the learner's kernel. The learner's
functions live in a sandboxed runner (``runner.py``, never imported here) that has loaded the
learner's notebook code; each call from a hidden test crosses a pipe as one JSON message,
with a byte limit and a time limit, and comes back as plain data. So a patched
``math.isclose``, a hooked IPython, an object whose ``==`` always says yes, or a test cell
turned into ``pass`` change nothing here.

A TODO's score is the sum of the points of its ideas that passed (``ideas.py``), except
that a TODO still raising ``NotImplementedError`` (left as released) earns nothing. An idea
passes when its hidden asserts and the public checks that name it (the grade cell's open part,
read from the instructor's source and run here with the same proxies) all pass: an answer that
fails a public check the learner could see never keeps that idea's points.
"""

from __future__ import annotations

import builtins
import json
import os
import select
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..errors import GraderError
from ..model import CellResult, IdeaResult, LoadError
from . import ideas as idea_format
from .ideas import GradeCellTests, Said, said

# The judge's own failure messages, keys of the feedback catalog (translations/<lang>/grader.po):
# ``{0}``, ``{1}``... are their values. A page renders one in the submission's language
# (``ideas.render_message``), the values filled in.
TIMED_OUT = "your code did not answer in time ({0} s per call)"
STOPPED_READING = (
    "your code did not answer in time ({0} s per call): it stopped reading what the grader sent"
)
EXITED = "the process running your code stopped (it exited or crashed)"
DIED = "the process running your code stopped (it exited, crashed or ran out of memory)"
TOO_LONG = "your code answered with more than {0} bytes"
NOT_A_MESSAGE = "the runner sent something that is not a message"
NOT_LOADED = "the runner did not load the notebook"
NOT_GIVEN = "the runner asked for a function it was not given"
PROTOCOL = "the runner broke the protocol"
BIG_DICT = "a dict of more than {0} entries with keys that are not strings came back"
BAD_DICT = "a malformed dict came back"
BAD_TYPE = "a {0} came back"
NOT_RUN = "not run: {0}"
UNFINISHED = "not implemented yet: replace `raise NotImplementedError()` with your code"
NO_MESSAGE = "a check failed"
PUBLIC = "public check “{0}”: {1}"
RAISED = "your function raised {0}"
UNLOADABLE = "your notebook's code could not be loaded: {0}"
# the runner names only the function
UNDEFINED = "name {0} is not defined: the cell that defines it did not run to the end"
# an exception's type and its message, when the judge wrote the message (UNDEFINED)
RAISED_AS = "{0}: {1}"
MESSAGES = (
    TIMED_OUT, STOPPED_READING, EXITED, DIED, TOO_LONG, NOT_A_MESSAGE, NOT_LOADED, NOT_GIVEN,
    PROTOCOL, BIG_DICT, BAD_DICT, BAD_TYPE, NOT_RUN, UNFINISHED, NO_MESSAGE, PUBLIC, RAISED,
    UNLOADABLE, UNDEFINED, RAISED_AS,
)  # fmt: skip

MAX_MESSAGE = 1 << 20  # bytes in one message from the runner
# entries of one dict with keys that are not strings (whose hashes a runner can make collide)
MAX_PAIRS = 10_000
MAX_TEXT = 400  # characters of a message shown to the learner
# exceptions a learner's function may raise that hidden tests can catch by type
CATCHABLE = (
    "NotImplementedError",
    "RecursionError",
    "ZeroDivisionError",
    "UnboundLocalError",
    "KeyError",
    "IndexError",
    "ValueError",
    "TypeError",
    "AttributeError",
    "NameError",
    "LookupError",
    "ArithmeticError",
    "OverflowError",
    "AssertionError",
    "MemoryError",
    "RuntimeError",
)


class RunnerFailed(BaseException):
    """The runner timed out, died, or broke the protocol: nothing it said is used.
    (A BaseException, so that a hidden test's ``except Exception`` cannot swallow it.)"""


class LearnerError(GraderError):
    """The learner's function raised an exception that hidden tests do not catch by type."""


def encode(value: Any, depth: int = 0) -> Any:
    if depth > 64:
        raise TypeError("value nested too deeply")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, depth + 1) for v in value]}
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: encode(v, depth + 1) for k, v in value.items()}
        return {"$dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    raise TypeError(f"hidden tests may pass only plain data, not {type(value).__name__}")


def decode(value: Any) -> Any:
    """Plain data back from the runner: only JSON's types, tuples and non-string keys restored.
    (runner.py has its own copy of this format on purpose: the two sides share no code.)"""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"$tuple"} and isinstance(value["$tuple"], list):
            return tuple(decode(v) for v in value["$tuple"])
        if set(value) == {"$dict"} and isinstance(value["$dict"], list):
            if len(value["$dict"]) > MAX_PAIRS:
                raise RunnerFailed(said(BIG_DICT, f"{MAX_PAIRS:,}"))
            pairs = {}
            for pair in value["$dict"]:
                if not (isinstance(pair, list) and len(pair) == 2):
                    raise RunnerFailed(said(BAD_DICT))
                key = decode(pair[0])
                pairs[_hashable(key)] = decode(pair[1])
            return pairs
        return {k: decode(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise RunnerFailed(said(BAD_TYPE, type(value).__name__))


def _hashable(key: Any) -> Any:
    return tuple(_hashable(k) for k in key) if isinstance(key, (list, tuple)) else key


def _mirror(original: Any, after: Any) -> None:
    """Make a hidden test's argument look as the learner's function left it."""
    if isinstance(original, list) and isinstance(after, list):
        original[:] = after
    elif isinstance(original, dict) and isinstance(after, dict):
        original.clear()
        original.update(after)


def shorten(text: str) -> str:
    """A message as a page shows it: one line, at most MAX_TEXT characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


class Runner:
    """A runner process and the channel to it."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, call_timeout: float):
        self.call_timeout = call_timeout
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        # writes wait in select, under a deadline (send)
        os.set_blocking(self.proc.stdin.fileno(), False)
        self._buffer = b""
        self.loaded: list[str] | None = None
        self.died = False  # the process stopped by itself (exited, crashed, ran out of memory)
        self._pending: float | None = None  # a preload's reply is owed, within this many seconds

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, message: dict, deadline: float | None = None) -> None:
        """Write one message, giving up at ``deadline`` (a time.monotonic() value; default: one
        call's time from now). The pipe is non-blocking: a runner that stops reading while it
        floods the judge with requests cannot block the judge past the deadline."""
        deadline = time.monotonic() + self.call_timeout if deadline is None else deadline
        data = memoryview((json.dumps(message) + "\n").encode())
        fd = self.proc.stdin.fileno()
        try:
            while data:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.kill()
                    raise RunnerFailed(said(STOPPED_READING, f"{self.call_timeout:g}"))
                _, ready, _ = select.select([], [fd], [], left)
                if ready:
                    try:
                        data = data[os.write(fd, data) :]
                    except BlockingIOError:
                        continue
        except (BrokenPipeError, OSError, ValueError) as exc:
            self.died = True
            self.kill()
            raise RunnerFailed(said(EXITED)) from exc

    def receive(self, timeout: float) -> dict[str, object]:
        """The runner's next message, a JSON object (each reader checks the fields it uses)."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise RunnerFailed(said(TIMED_OUT, f"{self.call_timeout:g}"))
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                self.died = True
                self.kill()
                raise RunnerFailed(said(DIED))
            self._buffer += chunk
            if len(self._buffer) > MAX_MESSAGE and b"\n" not in self._buffer:
                self.kill()
                raise RunnerFailed(said(TOO_LONG, MAX_MESSAGE))
        line, self._buffer = self._buffer.split(b"\n", 1)
        if len(line) > MAX_MESSAGE:
            self.kill()
            raise RunnerFailed(said(TOO_LONG, MAX_MESSAGE))
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as exc:
            self.kill()
            raise RunnerFailed(said(NOT_A_MESSAGE)) from exc
        if not isinstance(message, dict):
            self.kill()
            raise RunnerFailed(said(NOT_A_MESSAGE))
        return message

    def preload(self, cells: list[str], cell_timeout: float) -> None:
        """Ask the runner to load ``cells`` (trusted set-up code) without waiting for it: it imports
        what they import while the judge has other work. ``collect_preload`` takes the reply."""
        self.send({"op": "load", "cells": cells, "cell_timeout": cell_timeout})
        self._pending = cell_timeout * max(1, len(cells)) + 10

    def collect_preload(self) -> None:
        """Take a preload's reply. Whatever went wrong in it (the runner then no longer runs)
        is left to the next load, which starts a new runner."""
        if self._pending is not None:
            timeout, self._pending = self._pending, None
            try:
                self.receive(timeout)
            except RunnerFailed:
                pass

    def load(self, cells: list[str], cell_timeout: float) -> list[LoadError]:
        self.collect_preload()
        self.send({"op": "load", "cells": cells, "cell_timeout": cell_timeout})
        reply = self.receive(cell_timeout * max(1, len(cells)) + 10)
        if reply.get("op") != "loaded":
            self.kill()
            raise RunnerFailed(said(NOT_LOADED))
        self.loaded = cells
        errors = reply.get("errors")
        return (
            [LoadError.from_json(e) for e in errors if isinstance(e, dict)][:50]
            if isinstance(errors, list)
            else []
        )

    def call(self, name: str, args: tuple, kwargs: dict, stand_ins: dict[str, Callable]) -> Any:
        encoded_args, encoded_kwargs = encode(list(args)), encode(dict(kwargs))
        # for the whole call: writes, reads and callbacks
        deadline = time.monotonic() + self.call_timeout
        self.send(
            {
                "op": "call",
                "name": name,
                "args": encoded_args,
                "kwargs": encoded_kwargs,
                "stand_ins": sorted(stand_ins),
            },
            deadline,
        )
        while True:
            reply = self.receive(max(0.0, deadline - time.monotonic()))
            op = reply.get("op")
            if op == "callback":
                self._answer_callback(reply, stand_ins, deadline)
            elif op == "result":
                if isinstance(reply.get("args_after"), list):
                    for original, after in zip(args, decode(reply["args_after"])):
                        _mirror(original, after)
                if isinstance(reply.get("kwargs_after"), dict):
                    for key, after in decode(reply["kwargs_after"]).items():
                        if key in kwargs:
                            _mirror(kwargs[key], after)
                value = decode(reply.get("value"))
                if time.monotonic() > deadline:  # decoding counts too
                    self.kill()
                    raise RunnerFailed(said(TIMED_OUT, f"{self.call_timeout:g}"))
                return value
            elif op == "exception":
                mro = (
                    [m for m in reply.get("mro", []) if isinstance(m, str)]
                    if isinstance(reply.get("mro"), list)
                    else []
                )
                message = shorten(reply.get("message", ""))
                catchable = next((m for m in mro if m in CATCHABLE), None)
                # a name is a value, never a key
                if catchable == "NameError" and isinstance(reply.get("undefined"), str):
                    raise NameError(said(UNDEFINED, repr(shorten(reply["undefined"])[:100])))
                if catchable:
                    raise getattr(builtins, catchable)(message)
                raise LearnerError(f"{mro[0] if mro else 'Exception'}: {message}")
            else:
                self.kill()
                raise RunnerFailed(said(PROTOCOL))

    def _answer_callback(
        self, reply: dict, stand_ins: dict[str, Callable], deadline: float
    ) -> None:
        function = stand_ins.get(reply.get("name"))
        if function is None:
            self.kill()
            raise RunnerFailed(said(NOT_GIVEN))
        try:
            value = function(*decode(reply.get("args", [])), **decode(reply.get("kwargs", {})))
            self.send({"op": "callback_result", "value": encode(value)}, deadline)
        except RunnerFailed:
            raise
        except Exception as exc:
            self.send(
                {
                    "op": "callback_error",
                    "mro": [c.__name__ for c in type(exc).__mro__],
                    "message": shorten(exc),
                },
                deadline,
            )

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        if self.alive():
            try:
                self.send({"op": "exit"}, time.monotonic() + 2)
                self.proc.wait(timeout=2)
            except (RunnerFailed, subprocess.TimeoutExpired):
                pass
        self.kill()


@dataclass
class Session:
    """A runner for one student's notebooks, restarted when it fails."""

    start: Callable[[], Runner]
    cell_timeout: float
    runner: Runner | None = None

    def ready(self, cells: list[str]) -> tuple[Runner, list[LoadError]]:
        errors: list[LoadError] = []
        if self.runner is not None:
            self.runner.collect_preload()
        if self.runner is None or not self.runner.alive():
            self.runner = self.start()
        if self.runner.loaded != cells:
            errors = self.runner.load(cells, self.cell_timeout)
        return self.runner, errors

    def warm(self, setup: list[str] | None = None) -> None:
        """Start the runner now, so that it boots while the first notebook runs in its kernel,
        and have it run ``setup`` (the course's set-up cells, never a learner's) meanwhile: their
        imports are then done when the first notebook's code is loaded."""
        if self.runner is None:
            self.runner = self.start()
            if setup:
                try:
                    self.runner.preload(setup, self.cell_timeout)
                except RunnerFailed:
                    pass  # the first load starts a new runner

    def close(self) -> None:
        if self.runner is not None:
            self.runner.close()
            self.runner = None


class _Proxy:
    """A learner's function, as hidden tests see it."""

    def __init__(
        self, name: str, session: Session, cells: list[str], stand_ins: dict[str, Callable]
    ):
        self.name, self.session, self.cells, self.stand_ins = name, session, cells, stand_ins
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        runner, _ = self.session.ready(self.cells)
        return runner.call(self.name, args, kwargs, self.stand_ins)


def _stand_ins(spec: idea_format.HiddenTests, solutions: dict[str, str]) -> dict[str, Callable]:
    found = {}
    for name, grade_id in spec.stand_ins.items():
        scope: dict[str, Any] = {"__name__": f"reference_{grade_id}"}
        exec(compile(solutions[grade_id], f"<reference {grade_id}>", "exec"), scope)
        found[name] = scope[name]
    return found


def judge_cell(
    test: GradeCellTests, solutions: dict[str, str], session: Session, cells: list[str]
) -> CellResult:
    """Run one grade cell's ideas, each with the public checks that name it, against the learner's
    functions. Returns its result."""
    spec = idea_format.load(test.hidden, test.grade_id, test.points)
    stand_ins = _stand_ins(spec, solutions)
    proxies = {name: _Proxy(name, session, cells, stand_ins) for name in spec.uses}
    spec.namespace.update(proxies)
    public = idea_format.load_public(test.public, test.grade_id, {**stand_ins, **proxies})
    return score_ideas(spec, public, test.points)


def score_ideas(
    spec: idea_format.HiddenTests, public: list[idea_format.PublicCase], points: float
) -> CellResult:
    """Run each idea of ``spec``: its hidden asserts (whose messages are written for the feedback),
    then the public checks that name it, the learner's functions already bound in both namespaces.
    Returns the cell's result: each idea's ``message`` in English and, as ``said``, the same message
    as catalog keys and values (``ideas.Said.to_json``) for a page in another language."""
    results, unfinished, broken = [], False, None
    for item in spec.ideas:
        entry = IdeaResult(item.id, item.text, item.points)
        if broken:
            results.append(_told(entry, "skipped", said(NOT_RUN, broken)))
            continue
        # which check failed: a public one is named by its label, as the learner saw it
        label = None
        try:
            item.check()
            for case in (c for c in public if c.idea == item.id):
                label = case.label
                case.check()
            entry = entry.but(earned=item.points)
        except NotImplementedError:
            unfinished = True
            entry = _told(entry, "not_started", said(UNFINISHED))
        except AssertionError as exc:
            entry = _told(entry, "failed", _where(label, _assertion_message(exc)))
        except RunnerFailed as exc:
            broken = _message(exc)
            entry = _told(entry, "error", broken)
        except LearnerError as exc:
            entry = _told(entry, "error", _where(label, said(RAISED, shorten(exc))))
        # the learner's value broke the check (a missing key, a wrong type)
        except Exception as exc:
            entry = _told(entry, "error", _where(label, _raised_as(exc)))
        results.append(entry)
    earned = 0.0 if unfinished else sum(r.earned for r in results)
    return CellResult(
        round(earned, 6), points, "not_started" if unfinished else "graded", tuple(results)
    )


def _assertion_message(exc: AssertionError) -> Said | str:
    """A failed assert's message: the ``Said`` the judge's compiled cell made (only the grader's
    own code makes one: what a learner's function raises comes back as a plain string), else its
    text, else NO_MESSAGE."""
    message = exc.args[0] if len(exc.args) == 1 else None
    if type(message) is Said:
        return _capped(message)
    return shorten(exc) if str(exc) else said(NO_MESSAGE)


def _raised_as(exc: Exception) -> Said | str:
    """An exception as the page names it, its type first: translated when the judge wrote its
    message (a ``Said``: a function the runner did not find), else the text it came with."""
    message = exc.args[0] if len(exc.args) == 1 else None
    if type(message) is Said:
        return said(RAISED_AS, type(exc).__name__, _capped(message))
    return shorten(f"{type(exc).__name__}: {exc}")


def _message(exc: BaseException) -> Said | str:
    """A RunnerFailed's message, as the judge made it."""
    message = exc.args[0] if len(exc.args) == 1 else None
    return message if type(message) is Said else shorten(exc)


def _capped(message: Said) -> Said:
    """``message`` with each value cut as a page shows it (MAX_TEXT characters)."""
    if message.plain or not message.values:
        return message
    return Said(
        message.template, [_capped(v) if type(v) is Said else shorten(v) for v in message.values]
    )


def _where(label: str | None, message: Said | str) -> Said | str:
    """A public check's failure says which check: its label, as the learner saw it."""
    return message if label is None else Said(PUBLIC, (Said(label, plain=True), message))


def _told(entry: IdeaResult, status: str, message: Said | str) -> IdeaResult:
    """``entry`` with ``status`` and ``message`` (and, for a ``Said``, its catalog keys and
    values)."""
    return entry.but(
        status=status,
        message=shorten(message),
        said=message.to_json() if type(message) is Said else entry.said,
    )


class Judged(NamedTuple):
    """The judge's result for each grade cell of a notebook (grade id -> result), and the errors met
    loading its code."""

    results: dict[str, CellResult]
    load_errors: list[LoadError]


def judge_notebook(
    tests: tuple[GradeCellTests, ...], solutions: dict[str, str], session: Session, cells: list[str]
) -> Judged:
    """Every grade cell of one notebook: each one's result, and the errors met loading the code.

    A runner that served an earlier notebook and stops by itself (exits, crashes, runs out of
    memory) while serving this one is not trusted with it: the notebook is judged again in a
    fresh runner, so what an earlier notebook left in a module cannot cost this one points."""
    runner = session.runner
    inherited = (
        runner
        if runner is not None and runner.alive() and runner.loaded not in (None, cells)
        else None
    )
    judged = _judge_notebook(tests, solutions, session, cells)
    if inherited is not None and inherited.died:
        session.close()
        judged = _judge_notebook(tests, solutions, session, cells)
    return judged


def _judge_notebook(
    tests: tuple[GradeCellTests, ...], solutions: dict[str, str], session: Session, cells: list[str]
) -> Judged:
    try:
        _, load_errors = session.ready(cells)
    except RunnerFailed as exc:  # the notebook's code never finished loading: nothing can be judged
        why = said(UNLOADABLE, _message(exc))
        results = {}
        for test in tests:
            spec = idea_format.load(test.hidden, test.grade_id, test.points)
            skipped = tuple(
                _told(IdeaResult(i.id, i.text, i.points), "skipped", why) for i in spec.ideas
            )
            results[test.grade_id] = CellResult(0.0, test.points, "error", skipped)
        return Judged(results, [LoadError(-1, shorten(why))])
    return Judged(
        {test.grade_id: judge_cell(test, solutions, session, cells) for test in tests}, load_errors
    )


def learner_cells(notebook, given: set[str]) -> list[str]:
    """The code cells the runner loads: the set-up (tagged ``imports``), every answer cell,
    and every cell the learner added or changed. Given cells that only draw or print are
    left out (they cost time and define nothing an answer needs), and so are test cells. A given
    cell is known by its code alone: the Chinese edition words its comments in Chinese."""
    given = {idea_format.code_only(source) for source in given}
    chosen = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        tags = cell.metadata.get("tags", [])
        if meta.get("grade") and not meta.get("solution"):
            continue
        if (
            meta.get("solution")
            or "imports" in tags
            or idea_format.code_only(cell.source) not in given
        ):
            chosen.append(cell.source)
    return chosen
