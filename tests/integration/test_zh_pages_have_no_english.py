"""What an instructor and a learner of the Chinese edition read after grading is Chinese: a small
class of Chinese submissions is graded by the command (one late with a wrong answer, one whose code
cannot be loaded, one left as released, every written reflection pending a person), the class report
is built with ``report --language zh``, and every feedback page and the report (its page and the
text of its figures) are scanned for English with the strict finder the runtime tests use
(``tests/english.py``: a single English word counts; identifiers, code, units, names and glosses in
full-width parentheses are allowed, each with its reason)."""

from __future__ import annotations

import base64
import html
import re
import subprocess
import sys

import nbformat
import pytest
from english import english_words
from markdown_it import MarkdownIt

from submissions import build, mutate, run_grade, troubles, write

NB = "01_what_can_overlap"
# graded alone, as its page says in the learner's language; zh_full submits it too
NB06 = "06_handoff_simulator"
DEADLINE = "2026-12-20T23:59:00+08:00"
# student -> (the edits to the answered notebook, submitted at)
# written reflections in Chinese: a learner's own text is not the grader's to translate
ZH_ANSWERS = {
    "reflection_01_q1": "*问题 1 的回答：*\n\n批次 N+1 的 CPU 准备需要批次 N 在 GPU 上采样的 "
    "token，所以要等它。",
    "reflection_01_q2": "*问题 2 的回答：*\n\n两者共用同一方向的拷贝引擎，通常只能轮流执行。",
}
ZH_ANSWERS_06 = {
    "reflection_06_q1": "*问题 1 "
    "的回答：*\n\n逐层发送让传输与预填充重叠，链路上的排队少了，尾部的 TTFT "
    "下降得比平均暴露时间多。",
    "reflection_06_q2": "*问题 2 的回答：*\n\n失败的请求没有 TTFT，去掉它们会让 P99 "
    "看起来更好；应同时报告成功与失败的比例。",
}
CLASS = {
    "zh_full": (ZH_ANSWERS, "2026-12-20T20:00:00+08:00"),
    "zh_late_wrong": (
        {**ZH_ANSWERS, **mutate("todo0_solution", "reasons.append('shared_state')", "pass")},
        "2026-12-23T10:00:00+08:00",
    ),
    "zh_broken": (
        {**ZH_ANSWERS, "todo0_solution": "def check_overlap(:\n    pass\n"},
        "2026-12-20T21:00:00+08:00",
    ),
    # every answer left as released (None: the notebook unanswered)
    "zh_blank": (None, "2026-12-20T22:00:00+08:00"),
}
# English a Chinese page still shows, each with its reason (none: the runner's NameError for a
# function whose cell did not run is worded by the judge from the name alone, judge.UNDEFINED, a
# catalog key)
KNOWN_ENGLISH: dict[str, str] = {}
# Python's own message for an exception the learner's code raised ("NameError: name 'f' is not
# defined"), up to where the grader's words begin after it (": " or "："): not the page's to
# translate
PYTHON_ERROR = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b[:：] ?[^：（\n]*?(?=: |：|（|$)", re.M)
TAG = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.S | re.I)
SVG_TEXT = re.compile(r"<text\b[^>]*>(.*?)</text>|<!-- (.*?) -->", re.S)
# Read as they are on a Chinese page, removed before the scan (each with its reason)
PAGE_ALLOWED = [
    (
        re.compile(r"\bIn\s\[\d*\]:"),
        "Jupyter's input prompt, as nbconvert writes it beside each code cell",
    ),
    (
        re.compile(r"\b[a-z]\w*_\w+ · [a-z][a-z_]*\b"),
        "a graded idea, named by its cell's grade id and its own id",
    ),
]


def english_phrases(text: str) -> list[str]:
    """The strict finder's English (``english.english_words``), with one allowance narrowed: a gloss
    in full-width parentheses is a term or two (（prefill）, （T_tx 1，L 2）), so a parenthesis
    holding three English words or more (a sentence such as a late policy's) is read as text."""

    def gloss_or_text(m: re.Match) -> str:
        return m.group(0) if len(re.findall(r"[A-Za-z]+", m.group(1))) < 3 else f" {m.group(1)} "

    for pattern, _reason in PAGE_ALLOWED:
        text = pattern.sub(" ", text)
    return english_words(re.sub(r"（([^（）]*)）", gloss_or_text, text))


def ascii_parentheses(text: str) -> list[str]:
    """ASCII parentheses opened or closed against Chinese text (Chinese takes full-width ones)."""
    return re.findall(r"\([\u4e00-\u9fff][^()\n]{0,40}|[^()\n]{0,40}[\u4e00-\u9fff]\)", text)


def course_phrases() -> set[str]:
    """The phrases of the course's own Chinese markdown (its bilingual headings, the titles of the
    chapters and guides it cites), which every page quotes: the Chinese edition's catalogs are
    checked on their own (tests/integration/test_chinese_edition.py), this scan is of the grader."""
    from submissions import RELEASE

    cells = [
        cell
        for name in (NB, NB06)
        for cell in nbformat.read(RELEASE / "zh" / f"{name}.ipynb", 4).cells
    ]
    return {
        p
        for cell in cells
        if cell.cell_type == "markdown"
        for p in english_phrases(page_text(markdown(cell.source)))
    }


def page_text(page: str) -> str:
    """What a reader sees of an HTML page: its text without tags, styles and code blocks."""
    # code
    page = re.sub(
        r'<div class="\s*highlight[^"]*">\s*<pre>.*?</pre>|<code\b.*?</code>',
        " ",
        page,
        flags=re.S | re.I,
    )
    # Python's traceback
    page = re.sub(
        r'<div class="output_subarea output_text output_error">\s*<pre>.*?</pre>',
        " ",
        page,
        flags=re.S,
    )
    # a formula: the notebook's notation (MathML from its TeX)
    page = re.sub(r"<math\b.*?</math>", " ", page, flags=re.S | re.I)
    text = html.unescape(TAG.sub("\n", page))
    return PYTHON_ERROR.sub(" ", text)


def figure_texts(page: str) -> list[str]:
    """The text drawn in the report's SVG figures (kept as text: svg.fonttype none)."""
    texts = []
    for data in re.findall(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', page):
        svg = base64.b64decode(data).decode("utf-8")
        texts += [
            html.unescape(a or b)
            for a, b in SVG_TEXT.findall(svg)
            if "Created with" not in (a or b)
        ]
    return texts


def markdown(source: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(source)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    subs = tmp_path_factory.mktemp("subs")
    out = tmp_path_factory.mktemp("out") / "out"
    times = subs.parent / "times.csv"
    rows = ["student_id,notebook,submitted_at"]
    for student, (edits, when) in CLASS.items():
        write(subs, student, NB, build(NB, edits, fill=edits is not None, edition="zh"))
        rows.append(f"{student},{NB},{when}")
    write(subs, "zh_full", NB06, build(NB06, ZH_ANSWERS_06, edition="zh"))
    rows.append(f"zh_full,{NB06},{CLASS['zh_full'][1]}")
    times.write_text("\n".join(rows) + "\n", encoding="utf-8")
    run_grade(
        subs,
        out,
        "--deadline",
        DEADLINE,
        "--late-policy",
        "deduct:10%/day",
        "--timestamps",
        str(times),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "autograde", "report", str(out), "--language", "zh"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_the_class_was_graded_as_meant(graded):
    log = (graded / "log.jsonl").read_text(encoding="utf-8")
    assert log.count('"status": "graded"') == len(CLASS) + 1, troubles(graded)
    late = (graded / "feedback" / "zh_late_wrong" / f"{NB}.html").read_text(encoding="utf-8")
    assert 'class="late-note"' in late  # the late line is on the page the scan reads
    assert (
        "在截止时间（2026-12-20 23:59，UTC+08:00）之后" in late
    )  # the deadline as the instructor gave it
    blank = (graded / "feedback" / "zh_blank" / f"{NB}.html").read_text(encoding="utf-8")
    # nbgrader's comment on each answer left as released, in Chinese
    assert blank.count("<b>评语：</b> <p>未作答。</p>") == 3
    alone = (graded / "feedback" / "zh_full" / f"{NB06}.html").read_text(encoding="utf-8")
    assert (
        "评分时跳过公开检查" in alone
    )  # 06 graded without 03 and 04 beside it says so, in Chinese
    broken = (graded / "feedback" / "zh_broken" / f"{NB}.html").read_text(encoding="utf-8")
    assert "SyntaxError" in broken  # the load error is on the page the scan reads


def test_no_feedback_page_has_english(graded):
    found, known = {}, course_phrases()
    assert known  # the course's own text was read
    for page in sorted((graded / "feedback").glob("*/*.html")):
        text = page_text(page.read_text(encoding="utf-8"))
        assert re.search(r"[\u4e00-\u9fff]", text), f"{page.name}: no Chinese at all"
        if phrases := [
            p for p in english_phrases(text) if p not in known and p not in KNOWN_ENGLISH
        ]:
            found[f"{page.parent.name}/{page.name}"] = sorted(set(phrases))
        # a Chinese label or sentence takes full-width ones (评语：)
        if marks := re.findall(r"[\u4e00-\u9fff][:;]", text):
            found[f"{page.parent.name}/{page.name}: half-width punctuation"] = sorted(set(marks))
    assert len(list((graded / "feedback").glob("*/*.html"))) == len(CLASS) + 1
    assert not found, found


def test_the_class_report_has_no_english(graded):
    page = (graded / "report.html").read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in page
    # a value's markup is the page's, its text escaped
    assert "<code>grades.csv</code>" in page and "&lt;code" not in page
    # the late count and a problem's kind, in Chinese
    assert "迟交的 notebook：1 个" in page and "提交中缺少这个 notebook" in page
    figures = figure_texts(page)
    assert len(figures) > 10  # the figures' titles, labels and legends were read
    phrases = english_phrases(page_text(page)) + [
        p for text in figures for p in english_phrases(text)
    ]
    assert not phrases, sorted(set(phrases))
    assert "笔记本" not in page  # docs/glossary.md's term is another


def test_the_pages_pending_answers_and_nbgraders_late_line_are_chinese(root):
    """The page's list with a pending answer and nbgrader's own late line (shown when the gradebook
    holds a penalty): full-width parentheses, no space before them, the values kept; an English
    page says them in English."""
    from feedback_pages import page_data

    from autograde.course import Course
    from autograde.publish.editions import feedback_translations
    from autograde.record.pages import render_page

    words = feedback_translations(Course.load(root)).of("zh")
    zh = render_page(
        page_data(late_penalty=0.75), words, "zh", {"refl_q1": "pending", "refl_q2": 0.0}
    )
    assert "</a>（待人工评分，1.5 分）</li>" in zh
    assert '<li class="late-penalty">迟交扣分（得分：-0.75）</li>' in zh
    toc = zh[zh.index('<div id="toc">') : zh.index("</ol>")]
    assert not english_phrases(page_text(toc)), toc
    en = render_page(page_data(late_penalty=0.75), {}, "en", {"refl_q1": "pending", "refl_q2": 0.0})
    assert (
        "</a> (pending: a person grades it, 1.5 point(s))</li>" in en
        and ("Late submission penalty (Score: -0.75)") in en
    )


def test_the_late_lines_policy_is_said_in_the_pages_language(root):
    from autograde.course import Course
    from autograde.ledger.late import late_text, parse_policy
    from autograde.model import LateFacts
    from autograde.publish.editions import feedback_translations

    words = feedback_translations(Course.load(root)).of("zh")
    late = LateFacts(0.5, "2026-12-20T15:59:00+00:00", late_seconds=7200, deadline_offset="+08:00")
    for policy, said in (
        ("deduct:10%/hour,floor:40%", "每迟交一小时扣满分的 10%，最低保留 40%"),
        ("deduct:5%/day", "每迟交一天扣满分的 5%"),
        ("zero", "截止时间之后提交不得分"),
    ):
        zh = late_text(late, parse_policy(policy), words)
        assert f"（{said}）" in zh and "2.00 小时" in zh and "0.5 分" in zh, zh
        # the deadline as given, not in UTC
        assert zh.startswith("在截止时间（2026-12-20 23:59，UTC+08:00）之后"), zh
        assert not english_phrases(zh), zh
        english = late_text(late, parse_policy(policy), {})
        assert english.endswith(f"({parse_policy(policy).describe()}).")  # English as before
        assert "after the deadline (2026-12-20 23:59, UTC+08:00)" in english


def test_a_report_text_left_untranslated_is_refused(root, tmp_path):
    """The report's text is grader.po's (editions.REPORT_TEXTS): a catalog that lacks one of its
    translations cannot make the Chinese edition (``check`` and ``feedback_translations`` refuse
    it)."""
    from autograde.course import Course
    from autograde.publish import catalogs
    from autograde.publish.editions import catalog_for

    spec = catalog_for(Course.load(root), "zh", "grader")
    assert catalogs.problems(spec) == []
    text = spec.path.read_text(encoding="utf-8")
    entry = 'msgid "Totals across the class"\nmsgstr "全班总分"'
    assert entry in text
    broken = tmp_path / "grader.po"
    broken.write_text(
        text.replace(entry, 'msgid "Totals across the class"\nmsgstr ""'), encoding="utf-8"
    )
    found = catalogs.problems(catalogs.CatalogFile(broken, spec.units, "zh"))
    assert (
        len(found) == 1 and "Totals across the class" in found[0] and "untranslated" in found[0]
    ), found
