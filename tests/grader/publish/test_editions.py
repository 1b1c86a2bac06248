"""Grading either edition: the same answers earn the same row from the English and the Chinese
notebook; a Chinese submission is graded against the Chinese master (its read-only cells stay
Chinese), even when a platform dropped its metadata, and its feedback page is in Chinese."""

from __future__ import annotations

import csv
import html
import json
import re

import nbformat
import pytest

from submissions import MISTAKES, build, mutate, run_grade, troubles, write

pytestmark = pytest.mark.slow

NB = "04_decode_start_gate"
# a slip whose hidden test's message carries values: ready at 0 with the deadline at 0 does not wait
ZERO_NEVER_WAITS = mutate(
    "todo4_solution",
    "can_wait = ready_at_ms <= deadline_ms",
    "can_wait = ready_at_ms <= deadline_ms and ready_at_ms != 0",
)


def _mistake(student: str) -> dict[str, str]:
    row = next(m for m in MISTAKES if m[0] == student)
    return mutate(row[2], row[3], row[4])


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    subs = tmp_path_factory.mktemp("subs")
    out = tmp_path_factory.mktemp("out") / "out"
    write(subs, "en", NB, build(NB))
    write(subs, "zh", NB, build(NB, edition="zh"))
    dropped = build(NB, edition="zh")
    del dropped.metadata["course"]  # a platform that rewrites metadata (Colab) drops the edition
    write(subs, "zh_no_metadata", NB, dropped)
    hostile = build(NB)
    # no edition: decided by its cells
    hostile.metadata["course"] = {"language": ["zh"] * 10_000, "edition": "../../etc"}
    write(subs, "odd_metadata", NB, hostile)
    spoofed = build(NB)
    # claims Chinese, holds English: graded as it claims, scored the same
    spoofed.metadata["course"] = {"language": "zh"}
    write(subs, "claims_zh", NB, spoofed)
    write(subs, "en_wrong", NB, build(NB, _mistake("w4_strict_deadline")))
    write(subs, "zh_wrong", NB, build(NB, _mistake("w4_strict_deadline"), edition="zh"))
    write(subs, "en_zero", NB, build(NB, ZERO_NEVER_WAITS))
    write(subs, "zh_zero", NB, build(NB, ZERO_NEVER_WAITS, edition="zh"))
    run_grade(subs, out)
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    return {"out": out, "rows": rows}


def _scores(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in ("student_id", "edition")}


def test_the_same_answers_get_the_same_row_from_either_edition(graded):
    rows = graded["rows"]
    assert (
        _scores(rows["en"])
        == _scores(rows["zh"])
        == _scores(rows["zh_no_metadata"])
        == _scores(rows["odd_metadata"])
        == _scores(rows["claims_zh"])
    ), troubles(graded["out"])
    assert _scores(rows["en_wrong"]) == _scores(rows["zh_wrong"])
    assert _scores(rows["en_zero"]) == _scores(rows["zh_zero"]) and float(
        rows["en_zero"]["auto_total"]
    ) < float(rows["en"]["auto_total"])
    assert float(rows["en_wrong"]["auto_total"]) < float(rows["en"]["auto_total"])
    assert {s: rows[s]["edition"] for s in rows} == {
        "en": "en",
        "zh": "zh",
        "zh_no_metadata": "zh",
        "odd_metadata": "en",
        "claims_zh": "zh",
        "en_wrong": "en",
        "zh_wrong": "zh",
        "en_zero": "en",
        "zh_zero": "zh",
    }
    log = [json.loads(line) for line in (graded["out"] / "log.jsonl").read_text().splitlines()]
    assert {r["student_id"]: r["edition"] for r in log if r["notebook"] == NB} == {
        s: rows[s]["edition"] for s in rows
    }


def test_the_gradebook_holds_the_same_scores_for_either_edition(graded):
    from nbgrader.api import Gradebook

    url = f"sqlite:///{graded['out'] / 'gradebook.db'}"
    with Gradebook(url) as book:

        def scores(student):
            nb = book.find_submission_notebook(NB, book.assignments[0].name, student)
            return {g.name: (g.auto_score, g.manual_score) for g in nb.grades}

        assert scores("en") == scores("zh") == scores("zh_no_metadata")
        assert scores("en_wrong") == scores("zh_wrong")
        assert scores("en_zero") == scores("zh_zero")


def _page(out, student) -> str:
    return html.unescape(
        re.sub(
            r"<[^>]+>", "", (out / "feedback" / student / f"{NB}.html").read_text(encoding="utf-8")
        )
    )


def test_a_chinese_submissions_feedback_is_in_chinese(graded):
    zh, en = _page(graded["out"], "zh_wrong"), _page(graded["out"], "en_wrong")
    assert "评分要点" in zh and "Graded ideas" not in zh
    assert "Graded ideas" in en and "评分要点" not in en
    # the failed idea's rule, in Chinese on the Chinese page, in English on the English one
    assert "Missing pieces are waited for when they land no later than the deadline" in en
    assert "Missing pieces are waited for" not in zh and "截止时间" in zh
    # the public checks ran in Chinese too, and the notebook's own text is the Chinese edition's
    assert "公开检查" in zh and "public checks" not in zh
    assert "解码启动闸门" in zh
    # nbgrader's own headings on the page, in the submission's language
    assert "Student's answer" in en and "Score: " in en
    assert "Student's answer" not in zh and "你的答案" in zh and "Score: " not in zh
    # the score lines with full-width punctuation, the grade cells' labels, the hidden-tests note
    assert "（得分：" in zh and "得分: " not in zh and "(Score: " in en
    assert "评分单元格：todo4_plan_decode" in zh and "Grade cell: todo4_plan_decode" in en
    assert (
        "# 隐藏测试在评分时于这个 notebook 之外运行" in zh and "Hidden tests ran outside" not in zh
    )
    assert "# Hidden tests ran outside this notebook at grading" in en
    # a hidden test's failure message: in Chinese with the values the English one shows
    assert (
        "→ 恰好在截止时间就绪仍算及时：应为 'wait'" in zh
        and ("→ ready exactly at the deadline is in time: expected 'wait'") in en
    )


def test_a_failure_messages_values_are_the_same_on_either_page(graded):
    zh, en = _page(graded["out"], "zh_zero"), _page(graded["out"], "en_zero")
    assert "→ ready at 0, deadline 0: expected 'wait'" in en
    assert "→ 就绪于 0，截止时间 0：应为 'wait'" in zh and "expected" not in zh


def _locked_markdown(path) -> list[str]:
    return [
        c.source
        for c in nbformat.read(path, 4).cells
        if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("locked")
    ]


def test_a_chinese_submission_keeps_its_chinese_read_only_cells(graded, root):
    """nbgrader restores read-only cells from the master it grades against: the Chinese one."""
    chinese = _locked_markdown(root / "notebooks" / "zh" / f"{NB}.ipynb")
    assert chinese and chinese != _locked_markdown(root / "notebooks" / f"{NB}.ipynb")
    for student in ("zh", "zh_no_metadata"):
        path = next((graded["out"] / "autograded" / student).rglob(f"{NB}.ipynb"))
        assert _locked_markdown(path) == chinese


def test_the_class_report_counts_the_editions_and_speaks_the_instructors_language(graded):
    import subprocess
    import sys

    for language, text in (("en", "Missing pieces are waited for"), ("zh", "截止时间")):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "autograde",
                "report",
                str(graded["out"]),
                "--language",
                language,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        data = json.loads((graded["out"] / "report.json").read_text(encoding="utf-8"))
        assert data["editions"] == {"en": 4, "zh": 5} and data["language"] == language, troubles(
            graded["out"]
        )
        idea = next(
            i
            for i in data["ideas"]
            if i["grade_id"] == "todo4_plan_decode" and i["idea"] == "deadline_inclusive"
        )
        assert text in idea["text"], idea
    # the last one: --language zh, all Chinese
    page = (graded["out"] / "report.html").read_text(encoding="utf-8")
    assert (
        "提交的语言版本：英文版 4 份，中文版 5 份。" in page
        and "截止时间" in page
        and "Editions submitted" not in page
    )
