"""The class report (`python -m autograde report OUT`), on graded folders written by the grader's
own writer (grades.csv, log.jsonl and summary.json from ``grading._report``) out of per-notebook
records shaped as the grader makes them: each idea's pass rate is the count of judged notebooks
that passed it, problems are counted by kind, written answers waiting for a person are pending
(not 0), every text from OUT is inert in the page, and a folder that `grade` did not write is
refused with exit code 2."""

from __future__ import annotations

import base64
import csv
import html
import json
import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from autograde import grading
from autograde.course import Course
from autograde.ledger.facts import SandboxInfo
from autograde.ledger.results import write_results
from autograde.term.report import build_report, course_ideas

ROOT = Path(__file__).resolve().parents[3]
COURSE = Course.load()
CELLS = grading.exercises(COURSE)
IDEAS = course_ideas(COURSE)
EVIL = "<script>alert(1)</script>"


def ideas_of(notebook: str) -> dict[str, list]:
    found: dict[str, list] = {}
    for info in IDEAS:
        if info.notebook == notebook:
            found.setdefault(info.grade_id, []).append(info)
    return found


def graded(
    student: str,
    notebook: str,
    failing: dict[tuple[str, str], str] | None = None,
    seconds: float = 5.0,
    **extra,
) -> dict:
    """A graded notebook's record as grade_student/finish_record leave it: the judge's ideas per
    grade cell, scores = the points of the ideas passed, written answers waiting (None)."""
    failing = failing or {}
    ideas, scores = {}, {}
    for gid, infos in ideas_of(notebook).items():
        ideas[gid] = [
            {
                "id": i.id,
                "status": failing.get((gid, i.id), "passed"),
                "earned": 0.0 if (gid, i.id) in failing else i.points,
                "points": i.points,
            }
            for i in infos
        ]
        scores[gid] = sum(i["earned"] for i in ideas[gid])
    manual = {c.grade_id: None for c in CELLS if c.manual and c.notebook == notebook}
    record = {
        "student_id": student,
        "notebook": notebook,
        "file": f"{notebook}.ipynb",
        "fingerprint": "0" * 64,
        "scores": scores,
        "status": "graded",
        "detail": "",
        "manual": manual,
        "timings": {
            "autograde": round(seconds * 0.6, 3),
            "judge": round(seconds * 0.2, 3),
            "feedback": round(seconds * 0.2, 3),
        },
        "ideas": ideas,
        "seconds": seconds,
        "signature": "f" * 64,
    }
    record.update(extra)
    return record


def stopped(
    student: str, notebook: str, status: str, detail: str, seconds: float | None = 1.0
) -> dict:
    record = {
        "student_id": student,
        "notebook": notebook,
        "scores": {},
        "status": status,
        "detail": detail,
    }
    if status != "missing":
        record.update(
            file=f"{notebook}.ipynb", fingerprint="0" * 64, seconds=seconds, signature="f" * 64
        )
    return record


def write_out(out: Path, records: list[dict], notes: dict[str, list[str]] | None = None) -> dict:
    """Write OUT's files with the grader's own writer."""
    out.mkdir(parents=True, exist_ok=True)
    n_students = len({r["student_id"] for r in records})
    return write_results(
        COURSE,
        out,
        graded_cells=CELLS,
        records=records,
        notes=notes or {},
        n_students=n_students,
        sandbox=SandboxInfo(enabled=False),
    )


def run_report(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autograde", "report", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def expected_ideas(records: list[dict]) -> dict[tuple[str, str], tuple[int, int]]:
    """{(grade id, idea id): (passed, judged)}, counted straight from the records."""
    passed, judged = Counter(), Counter()
    for record in records:
        if record["status"] != "graded":
            continue
        for gid, items in record["ideas"].items():
            for item in items:
                judged[(gid, item["id"])] += 1
                passed[(gid, item["id"])] += item["status"] == "passed"
    return {key: (passed[key], judged[key]) for key in judged}


def cells_of(row_html: str) -> dict[str, str]:
    """{class: text} of a table row's cells that carry a class."""
    return {
        m.group(1).split()[-1]: html.unescape(m.group(2).strip())
        for m in re.finditer(r"<td " r'class="([^"]+)">(.*?)</td>', row_html, re.S)
    }


NB = COURSE.notebooks
FIRST = ideas_of(NB[0])  # todo0's ideas
TODO0 = next(iter(FIRST))
A, B = FIRST[TODO0][0].id, FIRST[TODO0][1].id


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "out"
    records = []
    for nb in NB:  # full marks everywhere
        records.append(graded("s_full", nb, seconds=4.0))
    # misses idea A (failed) and B (error) of TODO 0; everything else right
    records.append(
        graded("s_part", NB[0], {(TODO0, A): "failed", (TODO0, B): "error"}, seconds=6.0)
    )
    records += [graded("s_part", nb) for nb in NB[1:]]
    # misses A as well, and was not finished elsewhere
    records.append(graded("s_weak", NB[0], {(TODO0, A): "failed"}, seconds=3.0))
    records += [
        stopped("s_weak", nb, "missing", f"{nb}.ipynb not found in the submission") for nb in NB[1:]
    ]
    # stopped in every way the grader names
    records.append(graded("s_stopped", NB[0], seconds=2.0))
    records.append(stopped("s_stopped", NB[1], "timeout", "killed after 300 s", seconds=301.5))
    records.append(
        stopped("s_stopped", NB[2], "kernel_died", "DeadKernelError: Kernel died", seconds=7.0)
    )
    records.append(
        stopped(
            "s_stopped", NB[3], "out_of_memory", "over the 4 GiB limit: the kernel was stopped", 9.0
        )
    )
    records.append(
        stopped("s_stopped", NB[4], "invalid_notebook", "JSONDecodeError: <b>not json</b>", 0.0)
    )
    # a feedback page with lines removed, and a note on a graded notebook
    records.append(graded("s_redacted", NB[0], redacted_lines=2))
    records.append(
        graded("s_redacted", NB[1], detail="1 cell(s) of its code failed when loaded for the judge")
    )
    records += [graded("s_redacted", nb) for nb in NB[2:]]
    # a folder name that cannot be a student id: as the grader records it (safe_text keeps '<' and
    # '>')
    records += [
        {
            "student_id": EVIL,
            "notebook": nb,
            "scores": {},
            "status": "invalid_student_id",
            "detail": "use letters, digits, '_', '.', '@', '+' or '-'",
        }
        for nb in NB
    ]
    write_out(
        out,
        records,
        notes={"s_part": [f"{NB[1]}.ipynb: found as 'Copy of {NB[1]}.ipynb' (renamed)"]},
    )
    # a person scored one written answer, and another was flagged for review: as grades.csv shows
    # them
    manual = [c.grade_id for c in CELLS if c.manual]
    rows = list(csv.DictReader(open(out / "grades.csv", encoding="utf-8")))
    for row in rows:
        if row["student_id"] == "s_full":
            row[manual[0]], row[manual[1]] = "1", "review"
            row["total"] = f"{float(row['total']) + 1:g}"
            row["pending"], row["needs_review"] = str(int(row["pending"]) - 2), "1"
    with open(out / "grades.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    proc = run_report(out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {
        "out": out,
        "records": records,
        "rows": {r["student_id"]: r for r in rows},
        "manual": manual,
        "data": json.loads((out / "report.json").read_text(encoding="utf-8")),
        "report": build_report(COURSE, out),
        "page": (out / "report.html").read_text(encoding="utf-8"),
        "stdout": proc.stdout,
    }


def test_each_idea_pass_rate_is_the_count_of_judged_notebooks_that_passed(small):
    expected = expected_ideas(small["records"])
    got = {(i["grade_id"], i["idea"]): i for i in small["data"]["ideas"]}
    assert set(got) == {(i.grade_id, i.id) for i in IDEAS}, "every idea of the course, once"
    for key, (passed, judged) in expected.items():
        assert (got[key]["passed"], got[key]["judged"]) == (passed, judged), key
        assert got[key]["pass_rate"] == pytest.approx(passed / judged, abs=1e-4)
    # A: failed by s_part and s_weak among the 5 judged todo0 notebooks; B: an error for s_part
    assert (got[(TODO0, A)]["passed"], got[(TODO0, A)]["judged"], got[(TODO0, A)]["failed"]) == (
        3,
        5,
        2,
    )
    assert (got[(TODO0, B)]["passed"], got[(TODO0, B)]["error"]) == (4, 1)
    ranked = small["data"]["ideas"]
    assert (ranked[0]["grade_id"], ranked[0]["idea"]) == (TODO0, A), (
        "the most missed idea comes first"
    )
    assert (ranked[1]["grade_id"], ranked[1]["idea"]) == (TODO0, B)
    assert [i["pass_rate"] for i in ranked] == sorted(i["pass_rate"] for i in ranked)
    assert ranked[0]["text"] == FIRST[TODO0][0].text


def test_the_page_shows_the_same_idea_numbers_and_texts(small):
    rows = dict(re.findall(r'<tr data-idea="([^"]+)">(.*?)</tr>', small["page"], re.S))
    assert len(rows) == len(small["data"]["ideas"])
    order = re.findall(r'<tr data-idea="([^"]+)">', small["page"])
    assert [html.unescape(k) for k in order] == [
        f"{i['grade_id']}/{i['idea']}" for i in small["data"]["ideas"]
    ]
    for idea in small["data"]["ideas"]:
        cells = cells_of(rows[f"{idea['grade_id']}/{idea['idea']}"])
        assert cells["text"] == idea["text"], (
            "the idea's text, escaped in the page, reads back the same"
        )
        assert (
            int(cells["passed"]),
            int(cells["judged"]),
            int(cells["failed"]),
            int(cells["error"]),
        ) == (
            idea["passed"],
            idea["judged"],
            idea["failed"],
            idea["error"],
        )
        assert cells["rate"] == f"{100 * idea['pass_rate']:.1f}%"


def test_problems_are_counted_by_kind_with_their_students(small):
    kinds = {p["kind"]: p for p in small["data"]["problems"]}
    assert {k: p["count"] for k, p in kinds.items()} == {
        "missing": len(NB) - 1,
        "timeout": 1,
        "kernel_died": 1,
        "out_of_memory": 1,
        "invalid_notebook": 1,
        "invalid_student_id": len(NB),
        "redacted": 1,
        "graded_with_notes": 1,
        "matching_note": 1,
        "needs_review": 1,
    }
    assert {i["student_id"] for i in kinds["timeout"]["items"]} == {"s_stopped"}
    assert kinds["invalid_student_id"]["students"] == 1
    assert kinds["needs_review"]["items"][0]["student_id"] == "s_full"
    assert small["data"]["problems"][0]["kind"] == "invalid_student_id", "the commonest kind first"
    table = dict(re.findall(r'<tr data-kind="([^"]+)">(.*?)</tr>', small["page"], re.S))
    for kind, problem in kinds.items():
        assert int(cells_of(table[kind])["count"]) == problem["count"]


def test_written_answers_waiting_for_a_person_are_pending_not_zero(small):
    per = {e["grade_id"]: e for e in small["data"]["scores"]["exercises"]}
    rows = small["rows"].values()
    for gid in small["manual"]:
        column = [r[gid] for r in rows]
        assert per[gid]["pending"] == column.count("pending") and per[gid][
            "review"
        ] == column.count("review")
        assert per[gid]["zero"] == sum(
            v not in ("pending", "review") and float(v) == 0 for v in column
        )
    first, second = small["manual"][:2]
    assert per[first]["full"] == 1 and per[second]["review"] == 1
    # the first notebook was graded for all but the bad folder name: its answers wait, s_full's was
    # scored
    assert (per[first]["pending"], per[first]["full"], per[first]["zero"]) == (4, 1, 1)
    scores = small["data"]["scores"]
    assert scores["pending_answers"] == sum(int(r["pending"]) for r in rows)
    assert scores["review_answers"] == 1
    row = re.search(rf'<tr data-exercise="{first}">(.*?)</tr>', small["page"], re.S).group(1)
    assert (int(cells_of(row)["pending"]), int(cells_of(row)["full"])) == (4, 1)
    totals = sorted(float(r["total"]) for r in rows)
    assert scores["total"]["max"] == totals[-1] and sum(
        scores["total"]["histogram"]["counts"]
    ) == len(totals)


def test_text_from_the_graded_folder_is_inert(small):
    page = small["page"]
    assert "<script" not in page.lower(), "a student id like <script> is escaped"
    assert html.escape(EVIL, quote=False) in page
    assert "<b>not json</b>" not in page and "&lt;b&gt;not json&lt;/b&gt;" in page
    assert "default-src 'none'" in page, "and the page forbids scripts outright"
    links = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert links and all(link.startswith("data:image/svg+xml;base64,") for link in links), (
        "one self-contained file"
    )
    svgs = [base64.b64decode(link.split(",", 1)[1]).decode() for link in links]
    assert len(svgs) == 5 and all("<svg" in svg and "<script" not in svg for svg in svgs)
    assert "Graded ideas, most missed at the top" in "".join(svgs)


def test_the_slowest_notebooks(small):
    slowest = small["data"]["timing"]["slowest"]
    assert (slowest[0]["student_id"], slowest[0]["notebook"], slowest[0]["status"]) == (
        "s_stopped",
        NB[1],
        "timeout",
    )
    timed = [r["seconds"] for r in small["records"] if "seconds" in r]
    assert [s["seconds"] for s in slowest] == sorted(timed, reverse=True)[: len(slowest)]
    assert small["data"]["timing"]["count"] == len(timed)
    assert (
        "report.html" in small["stdout"] and f"{len(small['rows'])} student(s)" in small["stdout"]
    )


def test_a_folder_grade_did_not_write_exits_2(tmp_path):
    proc = run_report(tmp_path / "absent")
    assert proc.returncode == 2 and "is not a folder" in proc.stderr
    proc = run_report(tmp_path)
    assert (
        proc.returncode == 2
        and "not a graded course folder" in proc.stderr
        and "summary.json" in proc.stderr
    )
    out = tmp_path / "out"
    write_out(out, [graded("s1", nb) for nb in NB])
    (out / "log.jsonl").write_text((out / "log.jsonl").read_text() + "{not json\n")
    proc = run_report(out)
    assert proc.returncode == 2 and f"log.jsonl line {len(NB) + 1} is not JSON" in proc.stderr
    write_out(out, [graded("s1", nb) for nb in NB])
    text = (out / "grades.csv").read_text()
    (out / "grades.csv").write_text(text.replace("\ns1,", "\ns1,__import__('os'),", 1))
    proc = run_report(out)
    assert (
        proc.returncode == 2
        and "grades.csv line 2" in proc.stderr
        and "is not a score" in proc.stderr
    )
    (out / "grades.csv").unlink()
    proc = run_report(out)
    assert proc.returncode == 2 and "no grades.csv" in proc.stderr


def test_a_class_of_a_thousand(tmp_path):
    """1,000 students, every notebook each: read and reported in one run (no tqdm, no time limit
    asserted: its figure is printed by `pytest -s`)."""
    rng = random.Random(12)
    # how often each idea is missed
    miss = {(i.grade_id, i.id): rng.uniform(0.02, 0.5) for i in IDEAS}
    records = []
    for n in range(1000):
        student = f"learner{n:04d}"
        for nb in NB:
            roll = rng.random()
            if roll < 0.03:
                records.append(
                    stopped(student, nb, "missing", f"{nb}.ipynb not found in the submission")
                )
            elif roll < 0.04:
                records.append(
                    stopped(
                        student, nb, "timeout", "killed after 300 s", seconds=300.0 + rng.random()
                    )
                )
            else:
                failing = {
                    (gid, i.id): rng.choice(["failed", "error"])
                    for gid, infos in ideas_of(nb).items()
                    for i in infos
                    if rng.random() < miss[(gid, i.id)]
                }
                records.append(graded(student, nb, failing, seconds=round(rng.uniform(3, 20), 2)))
    out = tmp_path / "out"
    write_out(out, records)
    begin = time.monotonic()
    proc = run_report(out)
    print(f"report on 1,000 students ({len(records)} records): {time.monotonic() - begin:.1f} s")
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "report.json").read_text())
    assert data["students"] == 1000 and data["records"] == 1000 * len(NB)
    expected = expected_ideas(records)
    for idea in data["ideas"]:
        assert (idea["passed"], idea["judged"]) == expected[(idea["grade_id"], idea["idea"])]
    kinds = {p["kind"]: p["count"] for p in data["problems"]}
    assert kinds["missing"] == sum(r["status"] == "missing" for r in records)
    assert kinds["timeout"] == sum(r["status"] == "timeout" for r in records)
    assert data["timing"]["slowest"][0]["seconds"] == max(r.get("seconds", 0) for r in records)
    page = (out / "report.html").read_text()
    assert page.count("<tr data-idea=") == len(IDEAS)
    assert "… and" in page, "a long problem list is cut on the page (report.json has it all)"
    assert (
        len(next(p for p in data["problems"] if p["kind"] == "missing")["items"])
        == kinds["missing"]
    )


def test_a_class_with_nobody_graded_yet_still_gets_a_page(tmp_path):
    from autograde.term.report import write_report

    write_out(tmp_path, [])
    (tmp_path / ".course.digest").write_text(
        json.dumps({"sources": "an older digest", "tree": "x"})
    )
    page, numbers, report = write_report(COURSE, tmp_path)
    data = report.to_json()
    assert (
        data["warnings"] and "sources changed since this folder was graded" in data["warnings"][0]
    )
    assert data["students"] == 0 and data["timing"]["count"] == 0 and data["problems"] == []
    assert all(i["judged"] == 0 and i["pass_rate"] is None for i in data["ideas"])
    text = page.read_text(encoding="utf-8")
    assert "None: every notebook was graded" in text and text.count("<tr data-idea=") == len(IDEAS)
    assert json.loads(numbers.read_text(encoding="utf-8")) == data


# ---------------------------------------------------------------- what the page shows is readable


def _drawn(fig):
    """``fig`` on a canvas that renders (the report's figures are drawn without pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig


def test_no_report_figure_clips_its_text(small):
    """The pass-rate axis label (and every other text of the report's figures) lies inside its
    figure."""
    from autograde.term.report import draw_figures

    from figure_text import text_problems

    figs = draw_figures(small["report"])
    assert [name for name, _ in figs.shown()] == [
        "totals",
        "exercises",
        "ideas",
        "problems",
        "slowest",
    ]
    problems = [f"{name}: {p}" for name, fig in figs.shown() for p in text_problems(_drawn(fig))]
    assert not problems, "\n".join(problems)


def test_the_histogram_counts_whole_students(small):
    """A count of students has no half: the histogram's y ticks are whole numbers."""
    from autograde.term.report import draw_figures

    ax = _drawn(draw_figures(small["report"]).totals).axes[0]
    low, high = ax.get_ylim()
    ticks = [t for t in ax.get_yticks() if low <= t <= high]
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks


def test_means_are_shown_with_one_decimal_at_most(small):
    """The class mean is read as a score: 13.9, not 13.917 (report.json keeps the exact number)."""
    from dataclasses import replace

    from autograde.term.report import draw_figures, render
    from autograde.term.report_numbers import Figures

    scores = small["report"].scores
    exercises = [replace(exercise, mean=0.667) for exercise in scores.exercises]
    data = replace(
        small["report"],
        scores=replace(scores, total=replace(scores.total, mean=13.917), exercises=exercises),
    )
    page = render(data, Figures())
    totals = re.search(r'<table id="totals">.*?</table>', page, re.S).group(0)
    assert [html.unescape(c) for c in re.findall(r'<td class="n">(.*?)</td>', totals)][1] == "13.9"
    exercises = re.search(r'<table id="exercises">.*?</table>', page, re.S).group(0)
    assert "0.667" not in exercises and "0.7" in exercises
    legend = [t.get_text() for t in draw_figures(data).totals.axes[0].get_legend().get_texts()]
    assert "mean 13.9" in legend, legend


def test_the_chinese_report_names_its_columns_kinds_and_editions_in_words(small, tmp_path):
    """report --language zh: the totals' maximum is 总分值 and the exercise table's columns count
    students (满分人数 …), never the same word for two things; a problem's kind and a record's
    status are named in Chinese with the code after them; an edition is named (英文版 … 份, not
    "en 5"). The English page keeps the codes and the headers as they were."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(small["out"], out)
    proc = subprocess.run(
        [sys.executable, "-m", "autograde", "report", str(out), "--language", "zh"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    page = (out / "report.html").read_text(encoding="utf-8")
    headers = re.findall(r"<th>(.*?)</th>", page)
    for word in ("总分值", "满分人数", "部分得分人数", "0 分人数", "待评人数", "复核人数"):
        assert headers.count(word) == 1, (word, headers)
    assert "满分" not in headers and "0" not in headers
    assert "<td>缺少 notebook（missing）</td>" in page and "超时停止（timeout）：" in page
    assert re.search(r"提交的语言版本：未知 \d+ 份", page), re.findall(r"提交的语言版本[^<]*", page)
    english = small["page"]
    assert (
        "<th>0</th>" in english
        and "<th>full marks</th>" in english
        and "<td>missing</td>" in english
    )
    assert re.search(r"Editions submitted: none \d+\.", english)


def test_the_90th_percentile_never_exceeds_the_slowest_time(tmp_path):
    """Inclusive quantiles (the rule TODO 8 teaches): with four timed notebooks the 90th percentile
    lies between the two slowest, where the default exclusive method extrapolated past the
    slowest."""
    import statistics

    out = tmp_path / "out"
    times = {"s1": 9.25, "s2": 10.5, "s3": 11.97, "s4": 13.22}
    write_out(
        out,
        [
            graded(student, NB[0], seconds=s, edition="zh" if student != "s4" else "en")
            for student, s in times.items()
        ],
    )
    assert run_report(out).returncode == 0
    assert re.search(
        r"Editions submitted: (en 1, zh 3|zh 3, en 1)\.",
        (out / "report.html").read_text(encoding="utf-8"),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "autograde", "report", str(out), "--language", "zh"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0 and "提交的语言版本：英文版 1 份，中文版 3 份。" in (
        out / "report.html"
    ).read_text(encoding="utf-8")
    timing = json.loads((out / "report.json").read_text(encoding="utf-8"))["timing"]
    seconds = [9.25, 10.5, 11.97, 13.22]
    assert statistics.quantiles(seconds, n=10)[-1] > max(seconds), (
        "the control: the exclusive method overshoots"
    )
    assert (
        timing["p90"]
        == round(statistics.quantiles(seconds, n=10, method="inclusive")[-1], 3)
        <= timing["max"]
    )
