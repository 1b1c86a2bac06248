"""Mutation testing of the grading: do the public checks and the graded ideas agree, both ways?

Each TODO's answer (its solution cell in solutions/, the markers removed, as a learner would type
it) is written as a module into a temporary folder, and mutmut 3 (its own mutation operators and
visitor: ``mutmut.mutation.file_mutation.create_mutations``) makes every single mutant of it, each
applied with mutmut's ``deep_replace``. mutmut's runner is not used: it forks a process per mutant
and runs pytest, while here every mutant is judged in this one process:

- the public checks, as a learner's notebook runs them (the grade cell's open part with
  ``tools.checks.PublicChecks``, the mutant's functions called directly);
- the judge (``judge.judge_cell``) with the judge's and runner.py's own code talking JSON in this
  process (tests/submissions.py ``judge_in_process``): the ideas, each with the public checks
  that name it, and the hidden ideas alone.

The other TODOs' functions are the course's answers, in the notebook and as the judge's stand-ins.
The hidden random inputs are the instructor's fixed ones (no grading salt).

Per TODO it prints: mutants generated; equivalent (listed, each with its reason, in
benchmarks/mutation_equivalents.json, and checked to pass everything); killed by the public checks;
killed by the hidden ideas alone; survivors (no idea lost in the judge, and not equivalent);
"public-killed, no idea lost" (a public check fails and the judge keeps full marks: 0 by
construction); "hidden-only" (a hidden idea lost while every public check passes); "no lost idea
named" (hidden ideas lost, and no failing public check names any of them); and, as notes
(listed with --details), "idea not named" (some public check fails, but not one naming an idea that
the hidden asserts take: mostly a mutant that breaks the function for several ideas at once) and
"> 1 idea" (a mutant that costs more than one idea; a plausible single slip, MISTAKES in
tests/submissions.py, costs one).

    python benchmarks/mutation_report.py [--details] [--todo todo1_solution]

It exits 1 when a survivor, a public-killed mutant with no idea lost, a hidden-only mutant, a mutant
whose failing public checks name none of the ideas it loses, or a stale equivalent (listed, but no
longer made or now killed) is found.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from submissions import answer, course_cells, judge_in_process, public_failures  # noqa: E402

EQUIVALENTS = Path(__file__).with_name("mutation_equivalents.json")
CELLS = {  # solution cell -> its grade cell
    "todo0_solution": "todo0_check_overlap",
    "todo1_solution": "todo1_exposed_interval",
    "todo2_solution": "todo2_estimate_handoff",
    "todo3_solution": "todo3_validate_state",
    "todo4_solution": "todo4_plan_decode",
    "todo5_solution": "todo5_decide_overlap",
    "todo6_solution": "todo6_stream_layers",
    "todo7_solution": "todo7_handoff_step",
    "todo8_solution": "todo8_ttft_percentiles",
}
COLUMNS = [
    "generated",
    "equivalent",
    "killed by public",
    "killed by hidden",
    "survivors",
    "public-killed, no idea lost",
    "hidden-only",
    "no lost idea named",
    "idea not named",
    "> 1 idea",
]


def mutants(solution: str) -> list[tuple[str, str]]:
    """[(key, mutant source)] of one answer: mutmut's mutants, keyed by the lines they change."""
    from mutmut.mutation.file_mutation import create_mutations, deep_replace

    source = answer(solution)
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        (Path(tmp) / "answers").mkdir()
        (Path(tmp) / "answers" / f"{solution}.py").write_text(source, encoding="utf-8")
        (Path(tmp) / "setup.cfg").write_text("[mutmut]\nsource_paths=answers\n", encoding="utf-8")
        here = os.getcwd()
        os.chdir(tmp)  # mutmut reads its configuration from the working directory
        try:
            module, mutations, *_ = create_mutations(f"answers/{solution}.py", source)
            made = [deep_replace(module, m.original_node, m.mutated_node).code for m in mutations]
        finally:
            os.chdir(here)
    found, seen = [], {}
    for code in made:
        diff = [
            line
            for line in difflib.unified_diff(
                source.splitlines(), code.splitlines(), lineterm="", n=0
            )
            if line[:1] in "+-"
        ]
        key = " / ".join(
            " ".join(line.split()) for line in diff if not line.startswith(("+++", "---"))
        )
        seen[key] = seen.get(key, 0) + 1
        found.append((key if seen[key] == 1 else f"{key} #{seen[key]}", code))
    return found


def judge_mutant(solution: str, code: str) -> dict:
    """What one mutant gets: its failing public checks, the ideas it loses in the judge (with the
    public checks) and with the hidden ideas alone."""
    cell = CELLS[solution]
    answers = {solution: code}
    try:
        compile(code, "<mutant>", "exec")
    except SyntaxError as exc:  # mutmut makes none, but a learner could
        return {
            "public": [f"SyntaxError: {exc}"],
            "named": set(),
            "judge": {"(syntax)"},
            "hidden": {"(syntax)"},
        }
    public = [case["name"] for case in public_failures(cell, answers)]
    named = {m.group(1) for m in (re.search(r"\[([a-z0-9_]+)\]$", name) for name in public) if m}
    full = judge_in_process(cell, answers)
    alone = judge_in_process(cell, answers, public=False)

    def lost(result):
        if result.status == "not_started":
            return {"(not started)"}
        return {i.id for i in result.ideas if i.earned < i.points}

    return {"public": public, "named": named, "judge": lost(full), "hidden": lost(alone)}


def run(solutions: list[str], details: bool) -> tuple[list[list], list[str], list[str]]:
    equivalents = (
        json.loads(EQUIVALENTS.read_text(encoding="utf-8")) if EQUIVALENTS.exists() else {}
    )
    rows, problems, notes = [], [], []
    for solution in solutions:
        known = equivalents.get(solution, {})
        counts = dict.fromkeys(COLUMNS, 0)
        made = mutants(solution)
        counts["generated"] = len(made)
        keys = set()
        for key, code in made:
            keys.add(key)
            got = judge_mutant(solution, code)
            killed_public, killed_hidden = bool(got["public"]), bool(got["hidden"])
            counts["killed by public"] += killed_public
            counts["killed by hidden"] += killed_hidden
            counts["> 1 idea"] += len(got["judge"]) > 1
            if key in known:
                counts["equivalent"] += 1
                if killed_public or got["judge"]:
                    problems.append(
                        f"{solution}: listed as equivalent but killed "
                        f"({sorted(got['judge'])}): {key}"
                    )
            elif not got["judge"] and not killed_public:
                counts["survivors"] += 1
                problems.append(f"{solution}: survivor: {key}")
            if killed_public and not got["judge"]:
                counts["public-killed, no idea lost"] += 1
                problems.append(f"{solution}: public checks fail, no idea lost: {key}")
            if killed_hidden and not killed_public:
                counts["hidden-only"] += 1
                problems.append(
                    f"{solution}: hidden ideas {sorted(got['hidden'])} lost, every "
                    f"public check passes: {key}"
                )
            if got["hidden"] and not got["hidden"] & got["named"]:
                counts["no lost idea named"] += 1
                problems.append(
                    f"{solution}: hidden ideas {sorted(got['hidden'])} lost, the "
                    f"failing public checks name none of them: {key}"
                )
            unnamed = got["hidden"] - got["named"]
            if killed_public and unnamed:
                counts["idea not named"] += 1
                notes.append(
                    f"{solution}: hidden ideas {sorted(unnamed)} lost, no failing public "
                    f"check names them: {key}"
                )
            if details:
                print(f"{solution}: {key}\n    public fails: {got['public']}")
                print(
                    f"    judge loses: {sorted(got['judge'])}; hidden alone: "
                    f"{sorted(got['hidden'])}"
                )
        stale = set(known) - keys
        problems += [
            f"{solution}: an equivalent mutmut no longer makes: {key}" for key in sorted(stale)
        ]
        rows.append([solution, *counts.values()])
    return rows, problems, notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--details", action="store_true", help="print every mutant's result")
    parser.add_argument(
        "--todo", action="append", choices=sorted(CELLS), help="only these answers (repeatable)"
    )
    args = parser.parse_args()
    course_cells()  # the course's sources, read once
    clock = time.perf_counter()
    rows, problems, notes = run(args.todo or list(CELLS), args.details)
    seconds = time.perf_counter() - clock
    widths = [
        max(len(str(r[i])) for r in rows + [["answer", *COLUMNS]]) for i in range(len(COLUMNS) + 1)
    ]
    print(" | ".join(h.ljust(w) for h, w in zip(["answer", *COLUMNS], widths)))
    print("-|-".join("-" * w for w in widths))
    for row in rows + [["total", *[sum(r[i] for r in rows) for i in range(1, len(COLUMNS) + 1)]]]:
        print(" | ".join(str(v).ljust(w) for v, w in zip(row, widths)))
    print(f"\n{sum(r[1] for r in rows)} mutants judged in {seconds:.1f} s (one process)")
    for note in notes if args.details else []:
        print("·", note)
    for problem in problems:
        print("✗", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
