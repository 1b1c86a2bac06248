"""A cell's comment on a feedback page: nbgrader's own comment on an answer left as released ("No
response.", preprocessors/saveautogrades.py) is shown in the page's language, after a label that
holds its punctuation (Chinese: 评语：未作答。); a person's comment is shown as they wrote it, and
the English page is as nbgrader writes it."""

from __future__ import annotations

import pytest
from feedback_pages import page_data

from autograde.record.pages import PageData, render_page

FOOTER = '<div class="panel-footer">'


@pytest.fixture(scope="module")
def zh_words(root):
    from autograde.course import Course
    from autograde.publish.editions import feedback_translations

    return feedback_translations(Course.load(root)).of("zh")


def _commented(comment: str) -> PageData:
    data = page_data()
    # refl_q2, as the learner left it
    data.notebook.cells[3].metadata["nbgrader"]["comment"] = comment
    return data


def _footer(page: str) -> str:
    start = page.index(FOOTER)
    return " ".join(page[start : page.index("</div>\n</div>", start)].split())


def test_nbgraders_comment_on_an_answer_left_as_released_is_in_the_pages_language(zh_words):
    zh = render_page(
        _commented("No response."), zh_words, "zh", {"refl_q1": "pending", "refl_q2": 0.0}
    )
    assert "<b>评语：</b> <p>未作答。</p>" in _footer(zh)
    assert "No response" not in zh and "评语:" not in zh
    en = render_page(_commented("No response."), {}, "en", {"refl_q1": "pending", "refl_q2": 0.0})
    assert "<b>Comments:</b> <p>No response.</p>" in _footer(en)


def test_a_persons_comment_is_shown_as_they_wrote_it(zh_words):
    written = "No response. Please write your answer next time."
    zh = render_page(_commented(written), zh_words, "zh", {"refl_q1": "pending", "refl_q2": 0.0})
    assert f"<b>评语：</b> <p>{written}</p>" in _footer(zh)
    zh = render_page(
        _commented("写得很好。"), zh_words, "zh", {"refl_q1": "pending", "refl_q2": 1.0}
    )
    assert "<b>评语：</b> <p>写得很好。</p>" in _footer(zh)
