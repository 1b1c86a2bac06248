"""The similarity report (``python -m autograde similarity OUT``), on folders shaped as ``grade``
leaves them (OUT/submitted/<student>/<assignment>/<notebook>.ipynb) and built from the release
notebooks with answers filled in, as a learner would.

The test class (tests/data/similarity/<TODO>/*.txt, each file a whole answer cell) holds, for every
TODO, five answers written independently in different styles (``v1`` to ``v5``, ``v5`` the way most
learners would write it) next to the course's own answer, and two disguised copies (``copy_of_v1``,
``copy_of_v3``: identifiers renamed, whitespace, comments and brackets changed, independent lines
reordered). Every one of them is correct: it passes every hidden idea of its TODO. Every copy whose
answers are long enough to compare must be flagged, and no pair of independent answers may be.

The measurement set adds, in <TODO>/generated/, copies of each of the six independent answers made
by tests/data/similarity/make_copies.py, one kind of disguise each (renamed, reordered, split,
loops, comments, deadcode, all of them at once); benchmarks/bench_similarity.py prints its numbers.
Here: the generated copies are correct and are what the program makes, every reordered copy is
flagged, and no pair of answers from different origins is, in any class of the set."""

from __future__ import annotations

import functools
import html
import importlib.util
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograde.course import Course, UnusableInput
from autograde.judging.ideas import course_tests, load
from autograde.record.exporters import add_csp
from autograde.term import similarity

from submissions import MISTAKES, NOTEBOOKS, RELEASE, SOLUTIONS, answer, build, drop_cell

COURSE = Course.load()
DATA = Path(__file__).resolve().parents[2] / "data" / "similarity"
TODOS = sorted(p.name for p in DATA.iterdir() if p.is_dir())
NOTEBOOK_OF = {
    c.metadata["nbgrader"]["grade_id"]: name
    for name in NOTEBOOKS
    for c in nbformat.read(RELEASE / f"{name}.ipynb", 4).cells
    if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
}
HOSTILE = "<img src=x onerror=alert(1)>"  # a folder name can hold this (no slash)
# of generated copies
KINDS = ("renamed", "reordered", "split", "loops", "comments", "deadcode", "all")


def variants(todo: str) -> dict[str, str]:
    """{student: answer cell} of the test class for one TODO: the files, and the course's own
    answer."""
    found = {p.stem: p.read_text(encoding="utf-8") for p in sorted((DATA / todo).glob("*.txt"))}
    found["course"] = answer(todo)
    return found


def generated(todo: str, kind: str = "*") -> dict[str, str]:
    """{student: answer cell} of the generated copies of one TODO (``kind``: one kind of
    disguise)."""
    return {
        p.stem: p.read_text(encoding="utf-8")
        for p in sorted((DATA / todo / "generated").glob(f"{kind}_of_*.txt"))
    }


def is_copy(a: str, b: str) -> bool:
    return a == f"copy_of_{b}" or b == f"copy_of_{a}"


def write_class(out: Path, answers: dict[str, dict[str, str]]) -> Path:
    """An OUT folder whose submitted notebooks are the release with ``answers`` ({student: {TODO:
    answer cell}}) filled in (a TODO not given keeps the release's scaffold)."""
    for student in sorted(answers):
        for name in NOTEBOOKS:
            edits = {
                gid: source
                for gid, source in answers.get(student, {}).items()
                if NOTEBOOK_OF[gid] == name
            }
            target = out / "submitted" / student / COURSE.assignment / f"{name}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(build(name, edits, fill=False), target)
    return out


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory) -> dict:
    """The test class graded: every student answers every TODO with the variant of their name."""
    names = sorted(variants(TODOS[0]))
    answers = {student: {todo: variants(todo)[student] for todo in TODOS} for student in names}
    out = write_class(tmp_path_factory.mktemp("class") / "out", answers)
    page, numbers, found = similarity.write_similarity(COURSE, out)
    return {
        "out": out,
        "page": page.read_text(encoding="utf-8"),
        "data": found.to_json(),
        "numbers": numbers,
    }


# ------------------------------------------------------------------ the test class is what it
# claims


@functools.cache
def _course() -> dict:
    found = course_tests(sorted(SOLUTIONS.glob("*.ipynb")))
    return {
        "tests": found.cells,
        "solutions": found.solutions,
        "cell_of": {row[2]: row[1] for row in MISTAKES},  # solution cell -> its grade cell
    }


def failed_ideas(todo: str, source: str) -> dict[str, str]:
    """The hidden ideas of ``todo`` that ``source`` fails, run in-process as the judge runs them
    (tests/grader/judging/test_idea_isolation.py), with the course's answers standing in where the
    judge's do."""
    test = _course()["tests"][_course()["cell_of"][todo]]
    spec = load(test.hidden, test.grade_id, test.points)
    for source_id in spec.stand_ins.values():
        exec(_course()["solutions"][source_id], spec.namespace)  # noqa: S102 - the course's own answer
    exec(source, spec.namespace)  # noqa: S102 - an answer of the test class, written for this test
    failed = {}
    for item in spec.ideas:
        try:
            item.check()
        except Exception as exc:  # an idea fails by raising anything
            failed[item.id] = f"{type(exc).__name__}: {exc}"[:200]
    return failed


@pytest.mark.parametrize("todo", TODOS)
def test_every_answer_of_the_test_class_is_correct(todo):
    assert len(variants(todo)) >= 8, "five independent answers, the course's, and two copies"
    for student, source in variants(todo).items():
        assert not failed_ideas(todo, source), (todo, student, failed_ideas(todo, source))


def test_the_test_class_covers_every_todo():
    assert TODOS == sorted(NOTEBOOK_OF), (
        "a TODO of the course without answers in tests/data/similarity"
    )


@pytest.mark.parametrize("todo", TODOS)
def test_every_generated_copy_is_correct(todo):
    copies = generated(todo)
    assert len(copies) == len(KINDS) * 6, (
        "each kind of disguise of v1 to v5 and of the course's answer"
    )
    for student, source in copies.items():
        assert not failed_ideas(todo, source), (todo, student, failed_ideas(todo, source))


def test_the_generated_copies_are_what_the_program_makes():
    """make_copies.py is deterministic and the stored copies are its output (the set can be
    remade)."""
    spec = importlib.util.spec_from_file_location("make_copies", DATA / "make_copies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    made = module.generated()
    assert len(made) == len(TODOS) * len(KINDS) * 6
    stale = [
        str(path.relative_to(DATA))
        for path, text in made.items()
        if path.read_text(encoding="utf-8") != text
    ]
    assert stale == [], "run python tests/data/similarity/make_copies.py"
    assert tuple(module.KINDS) == KINDS


# ------------------------------------------------------------------ copies flagged, independent
# answers not


def rates(data: dict) -> dict:
    """Over the pairs whose two answers are both compared (neither too short): copies flagged, and
    independent answers flagged; with the pairs each rate counts."""
    copies, independent = [0, 0], [0, 0]
    for todo in data["todos"]:
        flagged = {(p["a"], p["b"]) for p in todo["pairs"]}
        short = set(todo["left_out"]["too_short"])
        students = sorted(set(variants(todo["grade_id"])) - short)
        for a, b in itertools.combinations(students, 2):
            tally = copies if is_copy(a, b) else independent
            tally[0] += (a, b) in flagged
            tally[1] += 1
    return {"copies": copies, "independent": independent}


def test_copies_are_flagged_and_independent_answers_are_not(graded_class, capsys):
    data = graded_class["data"]
    found = rates(data)
    (copies_flagged, copies), (independent_flagged, independent) = (
        found["copies"],
        found["independent"],
    )
    with capsys.disabled():
        print(
            f"\nsimilarity at threshold {data['threshold']}: {copies_flagged}/{copies} "
            "disguised copies flagged "
            f"({100 * copies_flagged / copies:.0f}%), {independent_flagged}/{independent} "
            "pairs of independent correct "
            f"answers flagged ({100 * independent_flagged / independent:.0f}%)"
        )
    assert copies >= 10 and independent >= 100, "the rates count enough pairs to mean something"
    assert copies_flagged == copies, [t["pairs"] for t in data["todos"]]
    assert independent_flagged == 0, [t["pairs"] for t in data["todos"]]
    long_answers = {
        "todo0_solution",
        "todo5_solution",
        "todo6_solution",
        "todo7_solution",
        "todo8_solution",
    }
    for todo in data["todos"]:
        # every copy of a whole function is compared, and caught
        if todo["grade_id"] in long_answers:
            assert not todo["left_out"]["too_short"] and todo["pairs_above_threshold"] == 2, todo


def test_a_copy_is_caught_with_a_margin_and_independent_answers_stay_well_below(
    graded_class, capsys
):
    """The scores, not only the verdicts: the threshold is not balanced on an edge of the test
    class."""
    threshold = graded_class["data"]["threshold"]
    lowest = min(p["score"] for todo in graded_class["data"]["todos"] for p in todo["pairs"])
    cache: dict[str, int] = {}
    todos = {t.grade_id: t for t in similarity.course_todos(COURSE, cache)}
    highest = 0.0
    for gid in TODOS:
        kept, _ = similarity.class_answers(todos[gid], variants(gid), cache)
        for x, y in itertools.combinations(kept, 2):
            if not is_copy(x.student, y.student):
                highest = max(highest, len(x.prints & y.prints) / min(len(x.prints), len(y.prints)))
    with capsys.disabled():
        print(
            f"\nsimilarity scores: lowest of a disguised copy {lowest:.2f}, highest of two "
            f"independent answers {highest:.2f}"
        )
    assert lowest >= threshold + 0.05 and highest <= threshold - 0.05, (lowest, highest)


def test_short_answers_are_not_compared(graded_class):
    """TODO 2 and 4 are one or two lines: every answer is too short to compare, copies included,
    and the page says so. The course's answer to TODO 1 and the usual way to write it are the same
    tokens, written apart: they are not compared either."""
    todos = {t["grade_id"]: t for t in graded_class["data"]["todos"]}
    for gid in ("todo2_solution", "todo4_solution"):
        assert todos[gid]["compared"] == 0 and todos[gid]["pairs"] == [], todos[gid]
        assert todos[gid]["too_short"] == len(variants(gid))
    assert {"course", "v5"} <= set(todos["todo1_solution"]["left_out"]["too_short"])
    section = (
        graded_class["page"].split('<section id="todo4_solution"', 1)[1].split("</section>", 1)[0]
    )
    assert "Every answer to this TODO is too short to compare." in section


def origin(student: str) -> str:
    """The independent answer a student's answer comes from: ``reordered_of_v2`` and ``copy_of_v2``
    from ``v2``."""
    return student.rsplit("_of_", 1)[-1]


@pytest.fixture(scope="module")
def measured() -> dict:
    """Every pair of the measurement set scored by the report's own code: per TODO and kind of
    disguise, one class (the eight answers of the test class and the six copies of that kind).
    {"copies": {kind: [score of each copy against its original, both compared]}, "independent":
    [score of each pair of answers from different origins, both compared, not two generated
    copies]}."""
    cache: dict[str, int] = {}
    todos = {t.grade_id: t for t in similarity.course_todos(COURSE, cache)}
    copies: dict[str, list[float]] = {kind: [] for kind in KINDS}
    independent: dict[tuple[str, str, str], float] = {}
    for gid in TODOS:
        for kind in KINDS:
            sources = {**variants(gid), **generated(gid, kind)}
            # lists every pair sharing a fingerprint
            section = similarity.todo_section(todos[gid], sources, 1e-9, cache)
            scores = {(p.a, p.b): p.score for p in section.pairs}
            short = set(section.left_out.too_short)
            for a, b in itertools.combinations(sorted(set(sources) - short), 2):
                score = scores.get((a, b), 0.0)
                if {a, b} == {origin(a), f"{kind}_of_{origin(a)}"}:  # a copy and its original
                    copies[kind].append(score)
                elif origin(a) != origin(b) and not (
                    a.startswith(f"{kind}_of_") and b.startswith(f"{kind}_of_")
                ):
                    independent[(gid, a, b)] = max(score, independent.get((gid, a, b), 0.0))
    return {"copies": copies, "independent": list(independent.values())}


def test_a_copy_with_its_independent_lines_reordered_is_flagged(measured, capsys):
    """The reported case: a copy whose independent statements were shuffled scored 0.62 and was
    missed. Statements that do not depend on each other are now read in one canonical order."""
    threshold = similarity.THRESHOLD
    scores = measured["copies"]["reordered"]
    with capsys.disabled():
        print(
            f"\nreordered copies: {sum(s >= threshold for s in scores)}/{len(scores)} "
            f"flagged, lowest score {min(scores):.2f}"
        )
    assert len(scores) >= 30, "enough reordered copies long enough to compare"
    assert min(scores) >= threshold + 0.05, sorted(scores)[:5]


def test_no_independent_pair_of_the_measurement_set_is_flagged(measured, capsys):
    threshold = similarity.THRESHOLD
    independent = measured["independent"]
    flagged = {
        kind: sum(s >= threshold for s in scores) for kind, scores in measured["copies"].items()
    }
    total = sum(len(scores) for scores in measured["copies"].values())
    with capsys.disabled():
        print(
            f"\nmeasurement set at {threshold}: copies flagged "
            + ", ".join(f"{kind} {flagged[kind]}/{len(measured['copies'][kind])}" for kind in KINDS)
            + f"; {sum(s >= threshold for s in independent)}/{len(independent)} independent "
            f"pairs flagged, highest {max(independent):.2f}"
        )
    assert len(independent) >= 1000
    assert max(independent) <= threshold - 0.05, sorted(independent)[-5:]
    # what only moves or renames code is always caught
    for kind in ("renamed", "reordered", "comments", "deadcode"):
        assert flagged[kind] == len(measured["copies"][kind]) >= 30, (
            kind,
            measured["copies"][kind],
        )
    # split, loops and all: see docs/instructors.md
    assert sum(flagged.values()) >= 0.75 * total, flagged


def test_statements_that_depend_on_each_other_keep_their_order():
    """Independent statements in another order read as the same tokens; statements one of which
    uses what the other assigns or changes do not (their order is part of the code)."""

    def tokens(code: str, order: bool = True) -> list[str]:
        found = similarity.normalized(code)
        return [t.text for t in (similarity.canonical_order(code, found) if order else found)]

    plain = (
        "def f(xs):\n    total = sum(xs)\n    top = max(xs)\n    low = min(xs)\n    spread = "
        "top - low\n    return total, spread\n"
    )
    moved = (
        "def g(ys):\n    low = min(ys)\n    top = max(ys)\n    spread = top - low\n    total "
        "= sum(ys)\n    return total, spread\n"
    )
    assert tokens(plain, order=False) != tokens(moved, order=False), (
        "the control: in source order they differ"
    )
    assert tokens(plain) == tokens(moved)
    first = "def f(out):\n    out.append(1)\n    out.append(2)\n    n = len(out)\n    return n\n"
    swapped = "def f(out):\n    out.append(2)\n    out.append(1)\n    n = len(out)\n    return n\n"
    assert tokens(first) != tokens(swapped), "two changes of one list keep their order"
    used = "def f(x):\n    y = x + 1\n    x = 0\n    return x, y\n"
    after = "def f(x):\n    x = 0\n    y = x + 1\n    return x, y\n"
    assert tokens(used) != tokens(after), "a name read before it is assigned again keeps its place"
    decorated = "@a\ndef f():\n    return 1\n\n\n@b\ndef g(x):\n    return [x]\n"
    moved = "@b\ndef g(x):\n    return [x]\n\n\n@a\ndef f():\n    return 1\n"
    assert tokens(decorated) == tokens(moved), "a decorator moves with its function"
    broken = "def f(:\n    b = 2\n    a = 1\n"
    assert tokens(broken) == tokens(broken, order=False), "code Python cannot parse keeps its order"


# ------------------------------------------------------------------ what is not compared


def test_unanswered_and_missing_answers_are_not_compared(tmp_path):
    """Two students who answered nothing (the release's scaffold, as handed out) are not a pair,
    whatever the scaffold holds; a missing notebook, a missing cell, a file that is not a notebook
    and one past the object limit count as missing."""
    full = {todo: variants(todo)["v1"] for todo in TODOS}
    answers = {
        "blank1": {},
        "blank2": {},
        "done": full,
        "copied": {todo: variants(todo)["copy_of_v1"] for todo in TODOS},
    }
    out = write_class(tmp_path / "out", answers)
    folder = out / "submitted"
    (folder / "gone" / COURSE.assignment).mkdir(parents=True)  # no notebooks at all
    partial = folder / "partial" / COURSE.assignment
    partial.mkdir(parents=True)
    nbformat.write(
        drop_cell(build("06_handoff_simulator", {}, fill=True), "todo7_solution"),
        partial / "06_handoff_simulator.ipynb",
    )
    (partial / "01_what_can_overlap.ipynb").write_text("not a notebook {", encoding="utf-8")
    (partial / "05_cuda_stream_overlap.ipynb").write_text("[" * 400_000, encoding="utf-8")
    _, _, found = similarity.write_similarity(COURSE, out)
    todos = {t.grade_id: t for t in found.todos}
    for todo in todos.values():
        assert todo.left_out.unanswered == ["blank1", "blank2"], todo
        assert "gone" in todo.left_out.missing
        assert all("blank" not in p.a + p.b for p in todo.pairs)
    for gid in ("todo0_solution", "todo5_solution", "todo7_solution"):
        assert "partial" in todos[gid].left_out.missing, gid
    assert "partial" not in todos["todo6_solution"].left_out.missing, "its other cells are read"
    assert {(p.a, p.b) for p in todos["todo0_solution"].pairs} == {("copied", "done")}


def test_a_copy_of_the_scaffold_is_not_code_of_ones_own():
    """The release's own lines of a cell are left out (whitespace aside), each as often as the
    release has it: an answer that only reformats the scaffold has nothing to compare."""
    cache: dict[str, int] = {}
    todo = {t.grade_id: t for t in similarity.course_todos(COURSE, cache)}["todo1_solution"]
    release = next(
        c.source
        for c in nbformat.read(RELEASE / "02_total_vs_exposed_time.ipynb", 4).cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "todo1_solution"
    )
    spaced = "\n".join(f"{line}   " for line in release.splitlines())
    assert similarity.normalized(spaced, similarity.given_lines(spaced, todo.release)) == []
    twice = release.replace("    merged = []\n", "    merged = []\n    merged = []\n")
    left = similarity.normalized(twice, similarity.given_lines(twice, todo.release))
    assert [t.text for t in left] == ["V", "=", "[", "]"], (
        "a line the release has once is taken once"
    )


# ------------------------------------------------------------------ the page and the numbers


def test_a_hostile_name_and_code_stay_inert(tmp_path):
    evil_code = variants("todo7_solution")["v2"].replace(
        "raise ValueError(f\"bad policy {handoff['policy']!r}\")",
        "raise ValueError('</script><script>alert(1)</script><img src=x "
        "onerror=alert(2)>')  # </pre><b onmouseover=alert(3)>",
    )
    answers = {HOSTILE: {"todo7_solution": evil_code}, 'q"uote&amp': {"todo7_solution": evil_code}}
    out = write_class(tmp_path / "out", answers)
    page_path, _, found = similarity.write_similarity(COURSE, out)
    page = page_path.read_text(encoding="utf-8")
    todo7 = next(t for t in found.todos if t.grade_id == "todo7_solution")
    assert [(p.a, p.b, p.score) for p in todo7.pairs] == [(HOSTILE, 'q"uote&amp', 1.0)], (
        "the two are on the page"
    )
    lowered = page.lower()
    assert "<script" not in lowered and "<img" not in lowered and "<b onmouseover" not in lowered
    assert (
        html.escape(HOSTILE, quote=False) in page
        and "&lt;/script&gt;&lt;script&gt;alert(1)" in page
    )
    assert "q&#34;uote&amp;amp" in page, "a quote and an ampersand in a name are escaped too"
    assert page == add_csp(page, similarity.SIMILARITY_POLICY), "the policy is there, once"
    head = page.split("<head>", 1)[1]
    assert head.startswith('<meta http-equiv="Content-Security-Policy"'), (
        "first in the head, before the title"
    )
    assert "default-src 'none'" in head.split(">", 1)[0]


def test_the_shared_code_is_marked_side_by_side(graded_class):
    page = graded_class["page"]
    section = page.split('<section id="todo0_solution"', 1)[1].split("</section>", 1)[0]
    pairs = re.findall(r'<div class="pair (flagged|near)">', section)
    assert pairs[:2] == ["flagged", "flagged"] and "flagged" not in pairs[2:]
    first = section.split('<div class="pair flagged">', 2)[1]
    assert first.count("<pre>") == 2 and first.count("<mark>") >= 4
    marked = html.unescape("".join(re.findall(r"<mark>(.*?)</mark>", first, re.S)))
    assert "reasons.append" in marked and "# TODO 0" not in marked, (
        "the learner's code is marked, the scaffold is not"
    )
    assert '<span class="given">def check_overlap(first, second):' in first


def test_the_json_has_every_todo_with_its_counts_and_pairs(graded_class):
    data = json.loads(graded_class["numbers"].read_text(encoding="utf-8"))
    assert data == json.loads(json.dumps(graded_class["data"]))
    assert data["assignment"] == COURSE.assignment and data["students"] == len(variants(TODOS[0]))
    assert data["threshold"] == similarity.THRESHOLD and data["warnings"] == []
    assert set(data["method"]) == {
        "score",
        "order",
        "k",
        "window",
        "min_fingerprints",
        "common_share",
        "common_min",
    }
    assert [t["grade_id"] for t in data["todos"]] == TODOS
    for todo in data["todos"]:
        assert todo["notebook"] == NOTEBOOK_OF[todo["grade_id"]]
        left = todo["left_out"]
        assert set(left) == {"too_short", "unanswered", "missing"}
        assert (
            todo["compared"] + todo["too_short"] + todo["unanswered"] + todo["missing"]
            == todo["students"]
            == data["students"]
        )
        assert [todo[k] for k in ("too_short", "unanswered", "missing")] == [
            len(left[k]) for k in ("too_short", "unanswered", "missing")
        ]
        assert todo["pairs_listed"] == len(todo["pairs"]) == todo["pairs_above_threshold"]
        scores = [p["score"] for p in todo["pairs"]]
        assert scores == sorted(scores, reverse=True) and all(
            data["threshold"] <= s <= 1 for s in scores
        )
        for p in todo["pairs"]:
            assert p["a"] < p["b"] and 0 < p["shared"] <= min(p["fingerprints"])
        assert todo["students_flagged"] == len({s for p in todo["pairs"] for s in (p["a"], p["b"])})


def test_a_threshold_outside_0_to_1_is_refused(tmp_path):
    out = write_class(tmp_path / "out", {"a": {}})
    for bad in (0, -0.5, 1.5):
        with pytest.raises(UnusableInput):
            similarity.write_similarity(COURSE, out, bad)
    with pytest.raises(UnusableInput, match="no submitted"):
        similarity.write_similarity(COURSE, tmp_path)


# ------------------------------------------------------------------ the fingerprints


def test_renaming_and_reformatting_give_the_same_tokens():
    plain = "def f(a):\n    total = a + 1  # add one\n    return sorted(total.items())\n"
    disguised = (
        'def g(x):\n    """Docstring."""\n    s = ((x + 1))\n\n    return sorted( s.items() ); \n'
    )
    assert [t.text for t in similarity.normalized(plain)] == [
        t.text for t in similarity.normalized(disguised)
    ]
    assert [t.text for t in similarity.normalized("x = 'a'; y = 1_000")] == [
        t.text for t in similarity.normalized('z = "a"\nw = 1000')
    ]
    broken = "def f(:\n    x = 'unclosed\n    return [x for x in y  # comment\n"
    assert [t.text for t in similarity.normalized(broken)][:4] == ["def", "V", ":", "V"], (
        "code Python cannot tokenize is still read"
    )


def test_common_code_does_not_count_and_a_shared_copy_still_does():
    """A passage in most of the class's different answers is the way everyone writes it: left out.
    Many students with the very same answer count as one answer, so their copy is not 'common'."""
    shared = set(range(40))
    answers = [
        similarity.Answer(
            f"s{i}", "", set(), [], [], frozenset(shared | {1000 * (i + 1) + j for j in range(30)})
        )
        for i in range(30)
    ]
    assert similarity.common_prints(answers) == shared
    ring = [similarity.Answer(f"r{i}", "", set(), [], [], frozenset(shared)) for i in range(30)]
    assert similarity.common_prints(ring + answers[:5]) == set()
    assert similarity.common_prints(answers[:10]) == set(), "a small class has no common code"


def test_fingerprints_are_the_same_in_every_process():
    """Scores do not depend on Python's string hash seed (a report run twice says the same)."""
    code = variants("todo8_solution")["v1"]
    script = (
        "import sys; from autograde.term import similarity as s\n"
        "t = s.normalized(sys.stdin.read()); "
        "print(sorted(s.winnow(s.kgram_hashes(s.token_ids(t, {})))))"
    )
    runs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-c", script],
            input=code,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            cwd=COURSE.root,
        )
        assert proc.returncode == 0, proc.stderr
        runs.add(proc.stdout)
    assert len(runs) == 1
