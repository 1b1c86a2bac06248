"""What ``similarity`` finds, typed: each TODO's findings and the pairs it flags
(``OUT/similarity.json``, written by :meth:`Similarity.to_json`, key for key as earlier versions
wrote it), and the page's view of each TODO (its findings and the pairs shown side by side, with
their code)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..model import JsonRecord


@dataclass(frozen=True)
class Method:
    """How answers were compared: the score, the order statements are read in, the fingerprints' K
    and window, the fingerprints an answer needs of its own, and what counts as code most of the
    class shares."""

    score: str
    order: str
    k: int
    window: int
    min_fingerprints: int
    common_share: float
    common_min: int


@dataclass(frozen=True)
class LeftOut:
    """The students whose answer to a TODO was not compared, by why: no notebook or no such cell,
    nothing but the release's lines, too short to compare."""

    missing: list[str] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    too_short: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PairFound:
    """Two students whose answers share ``score`` of the smaller one's fingerprints (``shared`` of
    them), and how many fingerprints each answer has."""

    a: str
    b: str
    score: float
    shared: int
    fingerprints: list[int]


@dataclass(frozen=True)
class TodoFindings:
    """One TODO's findings: how many students, how many answers were compared or left out (and who,
    by why), how many different answers, the pairs flagged (all counted, the first of them listed)
    and their students."""

    grade_id: str
    notebook: str
    students: int
    compared: int
    too_short: int
    unanswered: int
    missing: int
    distinct_answers: int
    pairs_above_threshold: int
    pairs_listed: int
    students_flagged: int
    pairs: list[PairFound]
    left_out: LeftOut


@dataclass(frozen=True)
class PairShown:
    """A pair as the page shows it: its score and shared fingerprints, whether it is flagged, the
    two students (and those with the same answer as each), and each answer in pieces (text, kind:
    ``shared``, ``given``, ``cut`` or '')."""

    score: float
    shared: int
    flagged: bool
    a: str
    b: str
    a_also: list[str]
    b_also: list[str]
    a_code: list[tuple[str, str]]
    b_code: list[tuple[str, str]]


@dataclass(frozen=True)
class TodoView(TodoFindings):
    """A TODO on the page: its findings, and the most similar pairs with their code."""

    entries: list[PairShown] = field(default_factory=list)

    def findings(self) -> TodoFindings:
        """What similarity.json holds of this TODO."""
        return TodoFindings(**{f.name: getattr(self, f.name) for f in fields(TodoFindings)})


@dataclass(frozen=True)
class Similarity(JsonRecord):
    """What ``similarity`` found in a graded folder (``OUT/similarity.json``): the assignment, how
    many students, the threshold, the method, each TODO's findings, and warnings."""

    assignment: str
    students: int
    threshold: float
    method: Method
    todos: list[TodoFindings]
    warnings: list[str]
