"""Pages say their language: a Chinese submission's feedback page and the class report of
`report --language zh` are ``lang="zh-CN"``, the English ones ``lang="en"`` (screen readers,
fonts and browsers' translation offers read it)."""

from __future__ import annotations

from html.parser import HTMLParser

import nbformat
import pytest

from autograde import grading
from autograde.course import Course
from autograde.ledger.facts import SandboxInfo
from autograde.ledger.results import write_results
from autograde.record import exporters
from autograde.term import report


class _Lang(HTMLParser):
    """The ``lang`` attribute of a page's first ``<html>`` element (None when it has none)."""

    def __init__(self):
        super().__init__()
        self.seen, self.lang = False, None

    def handle_starttag(self, tag, attrs):
        if tag == "html" and not self.seen:
            self.seen, self.lang = True, dict(attrs).get("lang")


def page_lang(page: str) -> str | None:
    parser = _Lang()
    parser.feed(page)
    assert parser.seen, "the page has no <html> element"
    return parser.lang


@pytest.mark.parametrize(("edition", "lang"), [("zh", "zh-CN"), ("en", "en")])
def test_a_feedback_page_carries_its_editions_language(edition, lang, monkeypatch):
    """The exporter nbgrader's feedback step uses, with nbgrader's feedback template, in a worker
    whose COURSE_LANG is the submission's edition (as job.py sets it)."""
    monkeypatch.setenv("COURSE_LANG", edition)
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# 标题\n\n说明。"),
            nbformat.v4.new_code_cell("x = 1"),
        ]
    )
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    page, _ = exporters._feedback_exporter().from_notebook_node(
        nb, {"nbgrader": {"notebook": "01", "score": 0, "max_score": 1, "late_penalty": 0}}
    )
    assert page_lang(page) == lang
    assert page.count("<html") == 1, "one html element"
    assert exporters.add_csp(page).index('http-equiv="Content-Security-Policy"') < page.index(
        "<title>"
    ), "the policy still opens the head"


@pytest.mark.parametrize(("language", "lang"), [("zh", "zh-CN"), ("en", "en")])
def test_the_class_report_carries_its_language(language, lang, tmp_path):
    course = Course.load()
    cells = grading.exercises(course)
    write_results(
        course,
        tmp_path,
        graded_cells=cells,
        records=[],
        notes={},
        n_students=0,
        sandbox=SandboxInfo(enabled=False),
    )
    page, _, data = report.write_report(course, tmp_path, language)
    assert data.language == language
    assert page_lang(page.read_text(encoding="utf-8")) == lang
