"""The untrusted side of judging: runs a learner's notebook code and answers calls.

This file runs inside the sandbox, under the learner's control once their code has run:
nothing it says is believed. It imports nothing of the grader. The trusted judge
(``autograde/judging/judge.py``) never imports it; the two talk over the process's standard input
and output, one JSON object per line, every value plain data:

    judge -> runner  {"op": "load", "cells": [source, ...], "cell_timeout": s}
    runner -> judge  {"op": "loaded", "errors": [{"cell": i, "error": "Name: message"}]}
    judge -> runner  {"op": "call", "name": f, "args": [...], "kwargs": {...},
                      "stand_ins": [g, ...]}
    runner -> judge  {"op": "callback", "name": g, "args": [...], "kwargs": {...}}   (zero or more)
    judge -> runner  {"op": "callback_result", "value": v}
                   | {"op": "callback_error", "mro": [...], "message": m}
    runner -> judge  {"op": "result", "value": v, "args_after": [...] | null,
                      "kwargs_after": {...} | null}
                   | {"op": "exception", "mro": ["ValueError", "Exception", ...], "message": m}
                   | {"op": "exception", "mro": ["NameError", ...], "message": m, "undefined": f}
                     (f was not defined: the cell that defines it did not run to the end)

Tuples travel as {"$tuple": [...]}, dicts with keys that are not strings as {"$dict": [[k, v],
...]}. A value that is not plain data (an object with a custom ``__eq__``, a set, a function) is
refused here with a TypeError, so the judge only ever compares plain data."""

import json
import os
import signal
import sys

_CHANNEL = None  # the private copy of stdout that carries messages


def encode(value, depth=0):
    if depth > 64:
        raise TypeError("the value is nested more than 64 levels deep")
    if value is None or type(value) in (bool, str):
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, depth + 1) for v in value]}
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if all(type(k) is str for k in value):
            return {str(k): encode(v, depth + 1) for k, v in value.items()}
        return {"$dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    raise TypeError(
        f"a {type(value).__name__} is not plain data: return only None, bool, int, "
        "float, str, list, tuple and dict values"
    )


def decode(value):
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"$tuple"} and isinstance(value["$tuple"], list):
            return tuple(decode(v) for v in value["$tuple"])
        if set(value) == {"$dict"} and isinstance(value["$dict"], list):
            return {_hashable(decode(k)): decode(v) for k, v in value["$dict"]}
        return {k: decode(v) for k, v in value.items()}
    return value


def _hashable(key):
    return tuple(_hashable(k) for k in key) if isinstance(key, (list, tuple)) else key


def send(message):
    data = (json.dumps(message, allow_nan=True) + "\n").encode("utf-8")
    os.write(_CHANNEL, data)


_BUFFER = b""


def receive():
    global _BUFFER
    while b"\n" not in _BUFFER:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            sys.exit(0)
        _BUFFER += chunk
    line, _BUFFER = _BUFFER.split(b"\n", 1)
    return json.loads(line)


def _mro(exc):
    return [cls.__name__ for cls in type(exc).__mro__]


def _describe(exc):
    return f"{type(exc).__name__}: {str(exc)[:2000]}"


class CellTimeout(BaseException):
    """A cell ran past its time limit while the notebook's code was loaded."""


def _on_alarm(signum, frame):
    raise CellTimeout()


class _Magics:
    """Just enough of IPython for notebook code that uses magics: cell magics such as
    %%time run their body; everything else does nothing."""

    def run_line_magic(self, *args, **kwargs):
        return None

    def run_cell_magic(self, name, line, body):
        if name in ("time", "timeit", "capture", "prun"):
            exec(compile(body, "<cell>", "exec"), NAMESPACE)

    def system(self, *args, **kwargs):
        return None

    getoutput = system


NAMESPACE = {}


def _transform(source):
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(source)
    except Exception:
        return source


def load(cells, cell_timeout):
    global NAMESPACE
    NAMESPACE = {"__name__": "__main__", "get_ipython": _Magics}
    errors = []
    signal.signal(signal.SIGALRM, _on_alarm)
    for index, source in enumerate(cells):
        try:
            signal.setitimer(signal.ITIMER_REAL, cell_timeout)
            try:
                exec(compile(_transform(source), f"<cell {index}>", "exec"), NAMESPACE)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except CellTimeout:
            errors.append(
                {"cell": index, "error": f"TimeoutError: the cell ran past {cell_timeout} s"}
            )
        except BaseException as exc:  # a learner's cell may raise anything, SystemExit included
            errors.append({"cell": index, "error": _describe(exc)})
    send({"op": "loaded", "errors": errors})


def _stand_in(name):
    def call_judge(*args, **kwargs):
        send(
            {
                "op": "callback",
                "name": name,
                "args": encode(list(args)),
                "kwargs": encode(dict(kwargs)),
            }
        )
        reply = receive()
        if reply.get("op") == "callback_result":
            return decode(reply.get("value"))
        error = {"ValueError": ValueError, "TypeError": TypeError, "KeyError": KeyError}.get(
            next(
                (n for n in reply.get("mro", []) if n in ("ValueError", "TypeError", "KeyError")),
                "",
            ),
            RuntimeError,
        )
        raise error(reply.get("message", ""))

    call_judge.__name__ = name
    return call_judge


def call(message):
    name = message["name"]
    function = NAMESPACE.get(name)
    # the judge words it (in the submission's language) from the name alone
    if not callable(function):
        text = f"name {name!r} is not defined: the cell that defines it did not run to the end"
        return {"op": "exception", "mro": _mro(NameError()), "message": text, "undefined": name}
    args, kwargs = decode(message.get("args", [])), decode(message.get("kwargs", {}))
    saved = {g: NAMESPACE.get(g) for g in message.get("stand_ins", [])}
    for g in saved:
        NAMESPACE[g] = _stand_in(g)
    try:
        value = function(*args, **kwargs)
    finally:
        for g, previous in saved.items():
            NAMESPACE[g] = previous
    after, kw_after = encode(list(args)), encode(kwargs)
    return {
        "op": "result",
        "value": encode(value),
        "args_after": after if after != message.get("args", []) else None,
        "kwargs_after": kw_after if kw_after != message.get("kwargs", {}) else None,
    }


def main():
    global _CHANNEL
    _CHANNEL = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the learner's prints must not mix with messages
    os.dup2(devnull, 2)
    sys.setrecursionlimit(10_000)
    while True:
        message = receive()
        op = message.get("op")
        if op == "load":
            load(message.get("cells", []), float(message.get("cell_timeout", 30)))
        elif op == "call":
            try:
                reply = call(message)
            except BaseException as exc:
                reply = {"op": "exception", "mro": _mro(exc), "message": str(exc)[:2000]}
            try:
                send(reply)
            except (TypeError, ValueError) as exc:
                send({"op": "exception", "mro": _mro(exc), "message": str(exc)[:2000]})
        elif op == "exit":
            return


if __name__ == "__main__":
    main()
