"""A public check's failure in the Chinese edition reads in Chinese, its description included: a
check that names what it compares (notebook 06's ``_close(got, want, 'end (prefill end +
exposed)')``) puts that text inside its message (``{0}: expected {1} ms, got {2}``); the runtime
translates the message's template and then each value that is a description the catalog knows. A
value that is code or the learner's own (a number, ``wait``, a repr, a list of words) stays as it
is. The learner sees these lines in the notebook, and on the feedback page, which shows the graded
notebook's output."""

from __future__ import annotations

import pytest
from english import english_words

from tools import i18n

from submissions import MISTAKES, mutate, public_failures


@pytest.fixture
def zh():
    i18n.set_language("zh")
    yield
    i18n.set_language(None)


def test_every_one_slip_answers_failing_checks_read_in_chinese(zh):
    """Each plausible mistake (submissions.MISTAKES: one per rule, in every TODO) run against its
    cell's public checks, as the notebook runs them: no English word in a failing check's line."""
    failing, english = 0, {}
    for student, cell, solution, old, new, _ideas in MISTAKES:
        for case in public_failures(cell, mutate(solution, old, new)):
            failing += 1
            if words := english_words(case.get("message") or "") + english_words(
                case.get("name") or ""
            ):
                english[student] = (words, case.get("message"))
    assert failing >= 40  # most mistakes fail a public check: the scan read real failures
    assert not english, english


def test_a_description_inside_a_message_is_translated(zh):
    said = i18n.localize(
        "end: layers 1-2 out by 141, layer 3 by 160, layer 4 waits for 200, "
        "lands at 210: expected 210 ms, got 161.0"
    )
    assert said == (
        "结束时刻：第 1～2 层到 141 时已发出，第 3 层到 160 时已发出，第 4 层要等到 "
        "200 才发出，在 210 到达：应为 210 ms，实际为 161.0"
    )
    said = i18n.localize(
        "exposed with T_tx = 20.0 ms, T_prefill = 200 ms, L = 8: expected 2.5 ms, got -155.0"
    )
    assert said == (
        "T_tx = 20.0 ms、T_prefill = 200 ms、L = 8 时的暴露时间：应为 2.5 ms，实际为 -155.0"
    )


def test_code_and_the_learners_values_stay_as_they_are(zh):
    """A value is translated only when it is a description: a learner's words joined by a comma are
    not split by a joiner template ({first}, {second}), a code value is not a word to translate."""
    said = i18n.localize("end (prefill end + exposed): expected 202.5 ms, got ready, wait")
    assert said == "结束时刻（预填充结束 + 暴露时间）：应为 202.5 ms，实际为 ready, wait"
    said = i18n.localize(
        "end (prefill end + exposed): expected 202.5 ms, got 'layers must be a whole number'"
    )
    assert said.endswith("实际为 'layers must be a whole number'")
    assert i18n.localize("start_ms: expected 300 ms, got 150.0") == (
        "start_ms：应为 300 ms，实际为 150.0"
    )
