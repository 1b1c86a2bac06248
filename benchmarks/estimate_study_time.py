"""Benchmark: how long each notebook takes a learner, estimated by a stated method.

Nobody has timed a class, so the course's "Expected time" is an estimate, built from what can be
counted and measured, at rates stated here (change them with the flags and the estimate follows):

- reading: the words of the notebook's markdown a learner reads on the way (the reflection answers
  and the optional appendix left out) at ``--words-per-minute`` (120: about half the 238 words a
  minute of silent reading of English non-fiction in Brysbaert's 2019 meta-analysis, since a learner
  studies the text, its tables and formulas, rather than reads it through);
- code: the lines of the given code cells (set-up, figures, the scaffolds around the answers) at
  ``--code-lines-per-minute`` (15); the check cells are not counted, since a learner reads what
  they print, which ``--minutes-per-todo`` covers;
- the exercises: ``--minutes-per-todo`` (5) for each TODO, to run its checks and read what they say,
  plus ``--minutes-per-answer-line`` (1) for each line of the reference answer, to write it;
- the reflections: ``--minutes-per-reflection`` (5) for each question;
- Run All: measured, each notebook answered and run once with nbclient, as ``bench_course_speed.py``
  does (notebook 05 with ``RUN_MODE = 'real_cpu'``, which a learner runs at least once).

    python benchmarks/estimate_study_time.py [--no-run]

``--no-run`` leaves Run All out (it is a minute at most per notebook, so the total moves little).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from submissions import NOTEBOOKS, build  # noqa: E402

SOLUTIONS = ROOT / "solutions"
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_'’.\-]*")
ANSWER = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
HIDDEN = "### BEGIN HIDDEN TESTS"


def counts(name: str) -> dict:
    """What a learner reads and writes in notebook ``name``: prose words, code lines, TODOs, answer
    lines and reflection questions (from the instructor's source, read as the release shows it)."""
    out = {
        "words": 0,
        "appendix_words": 0,
        "code_lines": 0,
        "todos": 0,
        "answer_lines": 0,
        "reflections": 0,
    }
    appendix = False
    for cell in nbformat.read(SOLUTIONS / f"{name}.ipynb", as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        source = cell.source
        if cell.cell_type == "markdown":
            if meta.get("solution"):  # a reflection's answer cell: the learner writes it
                out["reflections"] += 1
                continue
            if source.startswith("## Appendix"):
                appendix = True
            elif source.startswith("## Before you submit"):
                appendix = False
            out["appendix_words" if appendix else "words"] += len(WORD.findall(source))
            continue
        # a check cell: the learner reads what it prints
        if meta.get("grade") and not meta.get("solution"):
            continue
        if meta.get("solution"):
            out["todos"] += 1
            out["answer_lines"] += sum(
                len([line for line in block.splitlines() if line.strip()])
                for block in ANSWER.findall(source)
            )
        shown = ANSWER.sub("", source.split(HIDDEN)[0])
        out["code_lines"] += len(
            [
                line
                for line in shown.splitlines()
                if line.strip() and not line.strip().startswith("#")
            ]
        )
    return out


# the stated rates (each a flag of the same name): words and code lines a minute, minutes per TODO,
# per line of the reference answer and per reflection question
RATES = {
    "words_per_minute": 120.0,
    "code_lines_per_minute": 15.0,
    "minutes_per_todo": 5.0,
    "minutes_per_answer_line": 1.0,
    "minutes_per_reflection": 5.0,
}


def estimate_minutes(c: dict, rates: dict = RATES, run_all_s: float = 0.0) -> dict:
    """The estimate's parts and total, in minutes, for one notebook's ``counts``."""
    parts = {
        "read": c["words"] / rates["words_per_minute"],
        "code": c["code_lines"] / rates["code_lines_per_minute"],
        "exercise": c["todos"] * rates["minutes_per_todo"]
        + c["answer_lines"] * rates["minutes_per_answer_line"],
        "reflect": c["reflections"] * rates["minutes_per_reflection"],
        "run": run_all_s / 60,
    }
    return {**parts, "total": sum(parts.values())}


def run_all_seconds(name: str, folder: Path) -> float:
    """Seconds for one answered notebook, kernel start to shut-down (05 with RUN_MODE =
    'real_cpu')."""
    from nbclient import NotebookClient

    nb = build(name)
    if name.startswith("05"):
        for cell in nb.cells:
            if "parameters" in cell.metadata.get("tags", []):
                cell.source = cell.source.replace("RUN_MODE = 'dry_run'", "RUN_MODE = 'real_cpu'")
    path = folder / f"{name}.ipynb"
    nbformat.write(nb, path)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    begin = time.perf_counter()
    client.execute()
    return time.perf_counter() - begin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for rate, default in RATES.items():
        parser.add_argument("--" + rate.replace("_", "-"), type=float, default=default)
    parser.add_argument(
        "--no-run", action="store_true", help="leave Run All out instead of measuring it"
    )
    args = parser.parse_args(argv)
    columns = [
        ("words", 6),
        ("code", 5),
        ("TODO", 4),
        ("ans", 4),
        ("refl", 4),
        ("run s", 6),
        ("read", 5),
        ("code", 5),
        ("ex", 4),
        ("refl", 4),
        ("total", 6),
    ]
    head = f"{'notebook':34s} " + " ".join(f"{name:>{width}}" for name, width in columns)
    print(head + "\n" + "-" * len(head))
    with tempfile.TemporaryDirectory(prefix="study-time-") as tmp:
        import os

        # a measured 05 writes its result file here, not into the course
        os.environ.setdefault("LLM_ALGO_RESULTS_DIR", tmp)
        for name in NOTEBOOKS:
            c = counts(name)
            seconds = 0.0 if args.no_run else run_all_seconds(name, Path(tmp))
            m = estimate_minutes(c, {rate: getattr(args, rate) for rate in RATES}, seconds)
            print(
                f"{name:34s} {c['words']:6d} {c['code_lines']:5d} {c['todos']:4d} "
                f"{c['answer_lines']:4d} {c['reflections']:4d} "
                f"{seconds:6.1f} {m['read']:5.1f} {m['code']:5.1f} {m['exercise']:4.0f} "
                f"{m['reflect']:4.0f} {m['total']:6.1f}",
                flush=True,
            )
            if c["appendix_words"]:
                extra = c["appendix_words"] / args.words_per_minute
                print(
                    f"{'':34s} (an optional appendix of {c['appendix_words']} words, "
                    f"{extra:.0f} min more, not counted)"
                )
    print(
        f"\nminutes; rates: {args.words_per_minute:g} words/min, "
        f"{args.code_lines_per_minute:g} code lines/min, "
        f"{args.minutes_per_todo:g} min per TODO + {args.minutes_per_answer_line:g} per "
        "answer line, "
        f"{args.minutes_per_reflection:g} per reflection; Run All "
        f"{'not run' if args.no_run else 'measured once on this machine'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
