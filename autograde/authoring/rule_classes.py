"""The classes of input and of outcome that ``rules.py`` cuts a function's calls into.

A call's *facts* are what can be said of one part of its arguments at a time (``args[3]`` is a float
>= 0, ``args[0]`` lacks the key ``'links'``, ``args[0]['after']`` is a non-empty list), and its
*decision* the shape of what the reference answer did (``Outcome.shaped``). How fine those classes
are cut is learned once per function from the calls the ideas and the public checks make
(``learn``), by asking the reference answer itself:

- **keys one at a time**: a dict has, or lacks, each key the answer names (a key it does not name is
  "a key the answer does not name"). A dict's exact set of keys is not a class: every rule the
  prompts state about keys is about one key (an optional key absent means none, a missing flag is
  not ready, an extra field is ignored), and each key's presence and absence stays a class of its
  own, so a rule about one key is found as before. What is merged is a rule about two keys' absence
  at once, which no prompt states;
- **int and float are one kind of number** unless the reference answer asks a value's type
  (``isinstance``, ``type``, ``issubclass`` in its code). Python's arithmetic and comparisons treat
  ``4`` and ``4.0`` alike; a prompt that makes the kind a rule (TODO 6: ``layers=4.0`` is a layer
  count, ``True`` is not) has an answer that asks it, and there the kinds stay apart: the
  ``layers=4.0`` gap is still found. A returned ``0`` and ``0.0`` are one decision likewise;
- **a value the reference never reads is no class**: with it replaced by a value that raises on
  any use (compared, hashed, tested for truth, printed, copied), the reference decides every call
  exactly as before. Its decision is then no function of that value, so no rule of the reference's
  can turn on it (a record's ``id``, a field the prompt calls extra); whether the key is present
  stays a fact;
- **a value the reference only compares with others is one class, of whatever kind**: where the
  values at a place are of more than one kind (``request_id`` 7 in one call, ``'r1'`` in another),
  and renaming each of them, everywhere it occurs in the call's arguments, to a token equal only to
  itself leaves every decision as it was, what decides is whether it *equals* another value (a
  relation, which no class of one value states: see what ``rules.py`` does not see), not its kind.

Each refinement makes every class a union of the classes of the plain cut (the one that tells every
kind, every sign and every set of keys apart: one key's absence is every key set without it), so it
can miss what the plain cut finds and never invents a rule; that is why each is held to what can be
proved. The unread values and the compared ones are proved on every
recorded call by running the reference answer (a call whose arguments cannot be copied, and so
cannot be replayed, keeps every class apart); the kinds of number follow from Python's arithmetic
where the answer asks no type; the keys from what the prompts' rules are about. A merge cannot hide
a rule about one value: the values merged are ones the reference answer decides alike on every call
it is asked (the same decision, the same value returned), and every class left is still checked
against every decision the ideas grade. What a merge does give up is a learner's distinction the
answer does not draw (an answer that rejects an int request id where the prompt speaks only of
comparing ids); ``rules.py`` names what it does not see.
"""

from __future__ import annotations

import ast
import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import GraderError

OTHER = "a key the answer does not name"  # a dict's key that no literal of the answer names
ANY = ("", "any call")  # the fact every call has: a gap of it is one of the decision alone


@dataclass(frozen=True)
class Outcome:
    """What the reference answer did on a call: returned ``value``, or raised ``error``."""

    value: Any = None
    error: BaseException | None = None

    def shaped(self, classes: Classes) -> Any:
        """The decision the outcome says: the exception raised; or the value returned, as its kind
        and, for a label or a flag (a string the answer names, a boolean), its value; for a dict,
        its keys and the labels and flags among its values (``{'can_overlap': False, ...}``: a
        number or a list in it is a detail of the decision, not the decision)."""
        if self.error is not None:
            return ("raises", type(self.error).__name__)
        value = self.value
        if isinstance(value, dict):
            return (
                "returns",
                "dict",
                frozenset(
                    (
                        k,
                        v
                        if isinstance(v, bool) or v is None
                        else classes.leaf(v, "")
                        if isinstance(v, str)
                        else classes.kind(v),
                    )
                    for k, v in value.items()
                    if isinstance(k, str)
                ),
            )
        if isinstance(value, (bool, str)) or value is None:
            return ("returns", classes.leaf(value, ""))
        return ("returns", classes.kind(value))


@dataclass
class Classes:
    """How one function's calls are classed (see the module's text)."""

    literals: frozenset[str]  # the strings the reference answer names
    kinds_apart: bool  # int and float told apart: the reference answer asks a value's type
    # where -> the named keys the ideas' dicts have there
    keys: dict[str, frozenset[str]] = field(default_factory=dict)
    unread: frozenset[str] = frozenset()  # where the reference reads nothing
    # where the reference only compares values with others
    identifiers: frozenset[str] = frozenset()

    def kind(self, value: Any) -> str:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not self.kinds_apart:
            return "number"
        return type(value).__name__

    def leaf(self, value: Any, where: str) -> Any:
        """A leaf value as its class sees it: hashable, numbers by kind and sign, strings only when
        named."""
        if value is None or isinstance(value, bool):
            return value
        if where in self.identifiers and _comparable(value, self.literals):
            return ("id",)
        if isinstance(value, (int, float)):
            if isinstance(value, float) and math.isnan(value):
                return (self.kind(value), "nan")
            infinite = isinstance(value, float) and math.isinf(value)
            return (self.kind(value), ("-" if value < 0 else "+") + ("inf" if infinite else ""))
        if isinstance(value, str):
            return ("str", value) if value in self.literals else ("str",)
        return (type(value).__name__,)

    def facts(self, args: tuple, kwargs: dict) -> frozenset:
        """What can be said of one part of the arguments at a time: (where, what) for each leaf (its
        ``leaf``), each dict's having or lacking each key, each list's being empty or not.
        Where: ``args[0]`` an argument (``[0]`` a tuple's position), ``['key']`` a dict's key,
        ``[*]`` any item of a list or set."""
        found: set = {ANY}
        self._facts(args, "args", found)
        if kwargs:
            self._facts(kwargs, "kwargs", found)
        return frozenset(found)

    def _facts(self, value: Any, where: str, found: set) -> None:
        if where in self.unread:
            return
        if isinstance(value, dict):
            for key in value:
                if isinstance(key, str):
                    found.add(
                        (where, "has", key if key in self.literals or where == "kwargs" else OTHER)
                    )
            for key in self.keys.get(where, frozenset()) - value.keys():
                found.add((where, "lacks", key))
            for key, item in value.items():
                self._facts(item, _item(where, key), found)
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                self._facts(item, f"{where}[{i}]", found)
        elif isinstance(value, (list, set, frozenset)):
            found.add((where, type(value).__name__, "empty" if not value else "not empty"))
            for item in value:
                self._facts(item, f"{where}[*]", found)
        else:
            found.add((where, self.leaf(value, where)))


def said_fact(fact: tuple) -> str:
    """A fact as a reader says it: ``args[3] is a float >= 0``, ``kwargs['policy'] is 'fail'``."""
    if fact == ANY:
        return "any arguments"
    where, *what = fact
    if len(what) == 2 and what[0] in ("has", "lacks"):
        return (
            f"{where} has {OTHER}"
            if what[1] == OTHER
            else (f"{where} {what[0]} the key {what[1]!r}")
        )
    if len(what) == 2:
        return f"{where} is {'an empty' if what[1] == 'empty' else 'a non-empty'} {what[0]}"
    value = what[0]
    if value == ("id",):
        return f"{where} is a value the answer only compares with others (of any kind)"
    if isinstance(value, tuple) and value[0] in ("int", "float", "number"):
        sign = {"-": " < 0", "+": " >= 0", "nan": " NaN", "+inf": " +inf", "-inf": " -inf"}[
            value[1]
        ]
        return (
            f"{where} is an {value[0]}{sign}"
            if value[0] == "int"
            else (f"{where} is a {value[0]}{sign}")
        )
    if isinstance(value, tuple) and value[0] == "str":
        return (
            f"{where} is {value[1]!r}"
            if len(value) > 1
            else (f"{where} is a string the answer does not name")
        )
    return f"{where} is {value!r}"


def _item(where: str, key: Any) -> str:
    return f"{where}[{key!r}]" if isinstance(key, str) else f"{where}[*]"


def _under(where: str, place: str) -> bool:
    return where == place or where.startswith(place + "[")


def _comparable(value: Any, literals: frozenset[str]) -> bool:
    """A value whose kind an identifier's class merges: a number or a string the answer does not
    name."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) or (isinstance(value, str) and value not in literals)


# ---------------------------------------------------------------- what the reference reads


def asks_kind(sources: Iterable[str]) -> bool:
    """Whether the reference answer's code asks a value's type (``isinstance``, ``type``,
    ``issubclass``)."""
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return True  # unread code: keep the kinds apart
        calls = (
            node.func.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        )
        if any(name in ("isinstance", "type", "issubclass") for name in calls):
            return True
    return False


class Touched(GraderError):
    """A value the reference answer was not to read was read (raised inside it while ``learn``
    replays a call, and caught there: its own class, so that it is never taken for an exception the
    answer raises)."""


def _touched(*_args, **_kwargs):
    raise Touched("read")


class _Unread:
    """Stands for a value the reference answer must not read: every use raises."""

    __slots__ = ()


_ORDER_AND_ARITHMETIC = (
    "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__len__", "__iter__", "__contains__",
    "__getitem__", "__getattr__", "__index__", "__int__", "__float__", "__add__", "__radd__",
    "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__", "__neg__",
    "__abs__", "__round__",
)  # fmt: skip
for _use in (
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__bool__", "__len__",
    "__iter__", "__contains__", "__getitem__", "__getattr__", "__repr__", "__str__", "__format__",
    "__index__", "__int__", "__float__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
    "__rmul__", "__truediv__", "__rtruediv__", "__neg__", "__abs__", "__round__", "__copy__",
    "__deepcopy__", "__reduce_ex__", "__reduce__",
):  # fmt: skip
    setattr(_Unread, _use, _touched)
UNREAD = _Unread()


class _Same:
    """A token for a value: equal only to a token of an equal value of the same kind; any other use
    raises."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Same)
            and type(other.value) is type(self.value)
            and other.value == self.value
        )

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((type(self.value), self.value))

    def __repr__(self) -> str:
        return f"<{self.value!r}>"


for _use in _ORDER_AND_ARITHMETIC:
    setattr(_Same, _use, _touched)


def _mapped(value: Any, where: str, change: Callable[[str, Any], Any]) -> Any:
    """``value`` rebuilt with ``change(where, node)`` applied to each node, outermost first (a
    node it returns changed is not entered)."""
    changed = change(where, value)
    if changed is not value:
        return changed
    if isinstance(value, dict):
        return {key: _mapped(item, _item(where, key), change) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(_mapped(item, f"{where}[{i}]", change) for i, item in enumerate(value))
    if isinstance(value, (list, set, frozenset)):
        return type(value)(_mapped(item, f"{where}[*]", change) for item in value)
    return value


def _places(value: Any, where: str, found: dict[str, list]) -> None:
    """Every place in ``value`` (a node's where), with the leaves found there."""
    found.setdefault(where, [])
    if isinstance(value, dict):
        for key, item in value.items():
            _places(item, _item(where, key), found)
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            _places(item, f"{where}[{i}]", found)
    elif isinstance(value, (list, set, frozenset)):
        for item in value:
            _places(item, f"{where}[*]", found)
    else:
        found[where].append(value)


def _restored(value: Any) -> Any:
    if isinstance(value, _Same):
        return value.value
    if isinstance(value, dict):
        return {_restored(k): _restored(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_restored(item) for item in value)
    return value


def _same(a: Any, b: Any) -> bool:
    """Exactly the same value: the same kinds all the way down (``0`` is not ``0.0`` here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    try:
        return bool(a == b)
    except Exception:
        return False


class Recorded:
    """What ``learn`` needs of a recorded call (``rules.Call`` has it)."""

    args: tuple
    kwargs: dict
    outcome: Outcome
    copied: bool


def _decides_alike(reference: Callable, call: Recorded, change: Callable[[str, Any], Any]) -> bool:
    """Whether the reference decides ``call`` exactly as before with its arguments changed."""
    try:
        args = _mapped(call.args, "args", change)
        kwargs = _mapped(call.kwargs, "kwargs", change) if call.kwargs else {}
    except Exception:
        return False
    try:
        got = Outcome(_restored(reference(*args, **kwargs)))
    except Exception as exc:
        got = Outcome(error=exc)
    if call.outcome.error is not None or got.error is not None:
        return type(got.error) is type(call.outcome.error) and not isinstance(got.error, Touched)
    return _same(got.value, call.outcome.value)


def learn(
    reference: Callable,
    ideas: list[Recorded],
    public: list[Recorded],
    literals: frozenset[str],
    kinds_apart: bool,
) -> Classes:
    """How this function's calls are classed, proved on the calls the ideas and the public checks
    make of the reference answer (see the module's text)."""
    classes = Classes(literals, kinds_apart)
    calls = [call for call in ideas + public if call.copied]
    keys: dict[str, set[str]] = {}
    places: list[dict[str, list]] = []
    for call in calls:
        found: dict[str, list] = {}
        _places(call.args, "args", found)
        if call.kwargs:
            _places(call.kwargs, "kwargs", found)
        places.append(found)
    for call in ideas:
        _keys(call.args, "args", keys, literals)
    classes.keys = {where: frozenset(named) for where, named in keys.items()}
    if len(calls) < len(ideas) + len(public):
        return classes  # a call that cannot be replayed: every class kept apart
    everywhere = (
        sorted(set().union(*places), key=lambda where: (where.count("["), where)) if places else []
    )
    unread: set[str] = set()
    for where in everywhere:
        if any(_under(where, done) for done in unread) or where in ("args", "kwargs"):
            continue
        mine = [call for call, found in zip(calls, places) if where in found]
        if all(
            _decides_alike(
                reference, call, lambda at, node, where=where: UNREAD if at == where else node
            )
            for call in mine
        ):
            unread.add(where)
    classes.unread = frozenset(unread)
    identifiers = set()
    for where in everywhere:
        if any(_under(where, done) for done in unread):
            continue
        values = [
            (call, [v for v in found[where] if _comparable(v, literals)])
            for call, found in zip(calls, places)
            if where in found
        ]
        kinds = {classes.leaf(v, where) for _, some in values for v in some}
        if len(kinds) < 2:
            continue  # one class already: nothing to merge
        if all(
            _decides_alike(reference, call, _renaming(some, literals))
            for call, some in values
            if some
        ):
            identifiers.add(where)
    classes.identifiers = frozenset(identifiers)
    return classes


def _renaming(values: list, literals: frozenset[str]) -> Callable[[str, Any], Any]:
    """Each of ``values`` (and every equal value of its kind, wherever it occurs) made a token."""
    names = {(type(v), v) for v in values}

    def change(where: str, node: Any) -> Any:
        if _comparable(node, literals) and (type(node), node) in names:
            return _Same(node)
        return node

    return change


def _keys(value: Any, where: str, found: dict[str, set[str]], literals: frozenset[str]) -> None:
    if isinstance(value, dict):
        found.setdefault(where, set()).update(
            k for k in value if isinstance(k, str) and k in literals
        )
        for key, item in value.items():
            _keys(item, _item(where, key), found, literals)
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            _keys(item, f"{where}[{i}]", found, literals)
    elif isinstance(value, (list, set, frozenset)):
        for item in value:
            _keys(item, f"{where}[*]", found, literals)


@dataclass(frozen=True)
class Arguments:
    """A call's arguments as they were before the call: a deep copy (``copied``), or, when one
    cannot be made (a generator), the arguments themselves, read after the call."""

    args: tuple[object, ...]
    kwargs: dict[str, object]
    copied: bool


def before_call(args: tuple[object, ...], kwargs: dict[str, object]) -> Arguments:
    """The arguments as they are now, before the call (``Arguments``)."""
    try:
        return Arguments(*copy.deepcopy((args, kwargs)), True)
    except Exception:
        return Arguments(args, kwargs, False)
