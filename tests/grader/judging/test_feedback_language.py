"""What a learner gets back from grading, in the language of the edition they wrote in.

The judge compiles a grade cell with each of its texts (an assert's message, a helper's description)
made an ``ideas.Said``: the English text with its catalog key and its values. The result keeps the
English message and the keys with their values (``said``); the page renders the keys' translations
(translations/zh/grader.po for the hidden tests and the judge's own lines, the runtime catalog for
the public checks) with the same values. Nothing is matched against text the learner's code made.
"""

from __future__ import annotations

import json

import pytest

from autograde.judging import ideas, judge
from autograde.model import CellResult
from autograde.publish import catalogs, editions
from autograde.run.job import ideas_report

from submissions import MISTAKES, InProcessRunner, judge_in_process, mutate


@pytest.fixture(scope="module")
def course(root):
    from autograde.course import Course

    return Course.load(root)


@pytest.fixture(scope="module")
def zh_words(course):
    return editions.feedback_translations(course).of("zh")


def _mistake(name: str) -> dict:
    row = next(m for m in MISTAKES if m[0] == name)
    result = judge_in_process(row[1], mutate(row[2], row[3], row[4]))
    return {"cell": row[1], "lost": row[5], "result": result}


def test_a_hidden_tests_message_is_shown_in_chinese_with_its_values(zh_words):
    case = _mistake("w2_bits_as_bytes")
    failed = next(i for i in case["result"].ideas if i.status == "failed")
    assert failed.id in case["lost"]
    english = (
        "1 Gbit/s moves 125,000 bytes per ms: expected 1.0 ms, got 0.125 (bits or bytes? "
        "seconds or ms?)"
    )
    assert failed.message == english
    assert failed.said == {
        "t": "1 Gbit/s moves 125,000 bytes per ms: expected 1.0 ms, got {0} "
        "(bits or bytes? seconds or ms?)",
        "v": ["0.125"],
    }
    zh = ideas_report(case["result"], case["cell"], zh_words)
    assert (
        "→ 1 Gbit/s 每 ms 传输 125,000 字节：应为 1.0 ms，实际为 "
        "0.125（是比特还是字节？是秒还是毫秒？）"
    ) in zh
    assert "expected" not in zh and "评分要点" in zh
    en = ideas_report(case["result"], case["cell"], {})
    assert f"→ {english}" in en and "应为" not in en
    # the same result makes both pages: the grade does not depend on the language
    assert "[0/1.25]" in zh and "[0/1.25]" in en


def test_a_helpers_description_is_translated_inside_the_message(zh_words):
    """notebook 06's helper takes what it checks as a text ('exposed with T_tx ...'): that text is a
    catalog key of its own, nested in the assert's message."""
    case = _mistake("w6_no_last_layer")
    failed = next(i for i in case["result"].ideas if i.status == "failed")
    assert failed.said["t"] == "{0}: expected {1}, got {2}"
    assert failed.said["v"][0]["t"] == "exposed with T_tx {0}, T_prefill {1}, L {2}"
    line = next(
        x for x in ideas_report(case["result"], case["cell"], zh_words).splitlines() if "→" in x
    )
    values = failed.said["v"][0]["v"] + failed.said["v"][1:]
    assert line.strip() == "→ exposed_ms（T_tx {}，T_prefill {}，L {}）：应为 {}，实际为 {}".format(
        *values
    )


CELL_OPEN = '''
from tools.checks import PublicChecks
checks = PublicChecks('TODO 9 · double')

@checks.case(idea='doubles')
def doubles_two():
    """double(2) is 4"""
    got = double(2)
    assert got == 4, f"double(2): expected 4, got {got}"

checks.run()
'''
CELL_HIDDEN = """
from tools.checks import idea, uses
uses('double')

def _near(got, want, what):
    assert got == want, f"{what}: expected {want!r}, got {got!r}"

@idea('doubles', 1.0, 'double returns twice its argument')
def _():
    for x in (0, 1):
        _near(double(x), 2 * x, f"double of {x}")
"""


def _score(double, open_part=CELL_OPEN, hidden=CELL_HIDDEN) -> dict:
    spec = ideas.load(hidden, "todo9", 1.0)
    spec.namespace["double"] = double
    public = ideas.load_public(open_part, "todo9", {"double": double})
    return judge.score_ideas(spec, public, 1.0).ideas[0]


def test_a_public_checks_failure_names_its_label_in_the_learners_language():
    # the hidden inputs 0 and 1 pass; the public check's 2 does not
    entry = _score(lambda x: 2 * x if x < 2 else 5)
    assert entry.status == "failed" and entry.earned == 0
    assert entry.message == "public check “double(2) is 4”: double(2): expected 4, got 5"
    words = {
        judge.PUBLIC: "公开检查“{0}”：{1}",
        "double(2) is 4": "double(2) 等于 4",
        "double(2): expected 4, got {0}": "double(2)：应为 4，实际为 {0}",
    }
    assert ideas.render_message(entry.said, words) == (
        "公开检查“double(2) 等于 4”：double(2)：应为 4，实际为 5"
    )
    assert ideas.render_message(entry.said, {}) == entry.message
    # a translation that lost a field shows the English, never an error
    assert ideas.render_message(entry.said, {judge.PUBLIC: "公开检查"}) == entry.message


def test_a_nested_description_keeps_its_own_key_and_values():
    entry = _score(lambda x: x)  # double(1) returns 1
    assert entry.message == "double of 1: expected 2, got 1"
    assert entry.said == {
        "t": "{0}: expected {1}, got {2}",
        "v": [{"t": "double of {0}", "v": ["1"]}, "2", "1"],
    }
    words = {
        "{0}: expected {1}, got {2}": "{0}：应为 {1}，实际为 {2}",
        "double of {0}": "{0} 的两倍",
    }
    assert ideas.render_message(entry.said, words) == "1 的两倍：应为 2，实际为 1"


def test_what_the_learners_code_raises_is_never_looked_up():
    """An AssertionError raised inside the learner's function comes back as plain text, even when it
    reads like a catalog key: only a message the judge's compiled cell made carries keys."""

    def sly(x):
        raise AssertionError("{0}: expected {1}, got {2}")

    entry = _score(sly)
    assert entry.status == "failed" and entry.said is None
    assert entry.message == "{0}: expected {1}, got {2}"
    result = CellResult(0.0, 1.0, "graded", (entry,))
    assert "→ {0}: expected {1}, got {2}" in ideas_report(
        result, "todo9", {"{0}: expected {1}, got {2}": "{0}：应为 {1}，实际为 {2}"}
    )


def test_a_values_length_is_capped_as_the_english_message_is():
    entry = _score(lambda x: "x" * 5000 if x else 0)
    value = entry.said["v"][2]
    assert len(value) <= judge.MAX_TEXT and len(entry.message) <= judge.MAX_TEXT
    result = CellResult(0.0, 1.0, "graded", (entry,))
    line = next(
        x
        for x in ideas_report(
            result, "todo9", {"{0}: expected {1}, got {2}": "{0}：应为 {1}，实际为 {2}"}
        ).splitlines()
        if "→" in x
    )
    assert len(line.strip()) <= judge.MAX_TEXT + 2 and "应为 2" in line


def test_the_judges_own_messages_are_translated():
    runner_failed = judge.RunnerFailed(ideas.said(judge.TIMED_OUT, "20"))
    assert str(runner_failed) == "your code did not answer in time (20 s per call)"
    spec = ideas.load(CELL_HIDDEN, "todo9", 1.0)

    def stuck(x):
        raise runner_failed

    spec.namespace["double"] = stuck
    entry = judge.score_ideas(spec, [], 1.0).ideas[0]
    assert entry.status == "error" and entry.message == str(runner_failed)
    words = {judge.TIMED_OUT: "你的代码没有按时返回（每次调用限 {0} s）"}
    assert ideas.render_message(entry.said, words) == "你的代码没有按时返回（每次调用限 20 s）"


def test_a_function_the_runner_did_not_find_is_named_in_the_learners_language(zh_words):
    """runner.py names the function it did not find and nothing more; the judge words it
    (UNDEFINED), so a Chinese page says it in Chinese while the English message reads as it always
    did."""
    runner = InProcessRunner({"__name__": "__main__"})  # runner.py's own call, with no cell run
    with pytest.raises(NameError) as raised:
        runner.call("double", (1,), {}, {})
    assert (
        type(raised.value.args[0]) is ideas.Said
        and raised.value.args[0].template == judge.UNDEFINED
    )
    spec = ideas.load(CELL_HIDDEN, "todo9", 1.0)
    spec.namespace["double"] = lambda x: runner.call("double", (x,), {}, {})
    entry = judge.score_ideas(spec, [], 1.0).ideas[0]
    assert entry.status == "error"
    assert entry.message == (
        "NameError: name 'double' is not defined: the cell that defines it did not run to the end"
    )
    assert ideas.render_message(entry.said, zh_words) == (
        "NameError：名称 'double' 未定义：定义它的单元格没有运行完"
    )
    assert ideas.render_message(entry.said, {}) == entry.message


def test_a_name_error_of_the_learners_own_code_is_never_looked_up():
    def broken(x):
        return undefined_helper(x)  # noqa: F821 - the learner's own NameError

    runner = InProcessRunner({"__name__": "__main__", "double": broken})
    spec = ideas.load(CELL_HIDDEN, "todo9", 1.0)
    spec.namespace["double"] = lambda x: runner.call("double", (x,), {}, {})
    entry = judge.score_ideas(spec, [], 1.0).ideas[0]
    assert entry.status == "error" and entry.said is None
    assert entry.message == "NameError: name 'undefined_helper' is not defined"


def test_every_failure_message_has_a_chinese_translation(course):
    """The hidden tests' messages and the judge's own lines are units of grader.po, all translated;
    the public checks' labels and messages the page quotes are translated in the runtime catalog."""
    grader = editions.catalog_for(course, "zh", "grader")
    keys = {unit.msgid for unit in grader.units}
    assert set(judge.MESSAGES) <= keys and set(editions.LABELS) <= keys
    hidden = [u for u in grader.units if u.comment.startswith("hidden test's failure message")]
    assert len(hidden) > 120, len(hidden)
    assert (
        "1 Gbit/s moves 125,000 bytes per ms: expected 1.0 ms, got {0} (bits or bytes? "
        "seconds or ms?)"
    ) in keys
    assert catalogs.problems(grader) == []
    words = editions.feedback_translations(course).of("zh")
    public = catalogs.public_check_texts(course.source_paths())
    assert public and [text for text in public if text not in words] == []


def test_check_refuses_a_message_without_a_translation(course, tmp_path):
    grader = editions.catalog_for(course, "zh", "grader")
    missing = (
        "1 Gbit/s moves 125,000 bytes per ms: expected 1.0 ms, got {0} (bits or bytes? "
        "seconds or ms?)"
    )
    text = grader.path.read_text(encoding="utf-8")
    start = text.index(f'msgid "{missing}"')
    end = text.index("\n", text.index("msgstr", start))
    copy = tmp_path / "grader.po"
    copy.write_text(text[:start] + f'msgid "{missing}"\nmsgstr ""' + text[end:], encoding="utf-8")
    found = catalogs.problems(catalogs.CatalogFile(copy, grader.units, "zh"))
    assert len(found) == 1 and "untranslated" in found[0] and "1 Gbit/s moves" in found[0]


def test_check_refuses_a_message_the_catalog_cannot_hold():
    hidden = (
        "assert double(2) == 4\nassert double(3) == 6, 'double(3): got ' + "
        "str(double(3))\nassert double(1) == 2, f'got {double(1)}'\n"
    )
    found = ideas.message_problems(hidden, "hidden tests of todo9")
    assert (
        len(found) == 2
        and "has no message" in found[0]
        and "write its message as a text" in found[1]
    )


def test_the_results_said_is_plain_json():
    case = _mistake("w7_fail_recomputes")
    written = case["result"].to_json()
    assert (
        json.loads(json.dumps(written)) == written
        and CellResult.from_json(written) == case["result"]
    )


def test_the_pages_labels_and_score_lines_are_in_chinese_with_full_width_punctuation(zh_words):
    from feedback_pages import page_data

    from autograde.record.pages import render_page

    zh = render_page(
        page_data(late_penalty=1.0), zh_words, "zh", {"refl_q1": "pending", "refl_q2": "pending"}
    )
    assert "<h4>04_decode_start_gate（得分：0.75 / 4.5；另有 2.5 分等待人工评分）</h4>" in zh
    assert (
        '<a href="#todo4_plan_decode">测试单元格：TODO 4 · plan_decode_start</a>（得分：0.75 '
        "/ 2.0）</li>"
    ) in zh
    assert "（得分：-1.0）" in zh
    assert '<span class="nbgrader-label">评分单元格：<code>todo4_plan_decode</code></span>' in zh
    assert '得分：0.75 / 2.0 <a href="#top">（回到顶部）</a>' in zh
    assert (
        '<span class="c1"># 隐藏测试在评分时于这个 notebook '
        "之外运行：它们检查的评分要点和你的结果见下方。</span>"
    ) in zh
    # the learner's own text
    body = zh[zh.index("<body>") :].replace("Test cell Score: 1.0 / 2.0", "")
    assert (
        "Score" not in body
        and "Grade cell" not in body
        and "Hidden tests" not in body
        and "(Top)" not in body
    )
    english = render_page(
        page_data(late_penalty=1.0), {}, "en", {"refl_q1": "pending", "refl_q2": "pending"}
    )
    assert (
        "<h4>04_decode_start_gate (Score: 0.75 / 4.5; 2.5 point(s) wait for a person's "
        "grading)</h4>"
    ) in english
    assert '<html lang="en">' in english and '<html lang="zh-CN">' in zh
