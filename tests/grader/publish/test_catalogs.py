"""The translation catalogs: updated from the sources, refused when broken, incomplete or stale,
naming the catalog, the unit and the line."""

from __future__ import annotations

import nbformat
import pytest

from autograde.judging import ideas
from autograde.publish import catalogs
from autograde.publish.catalogs import CatalogFile, Unit


def _catalog(tmp_path, units, translations=None) -> CatalogFile:
    spec = CatalogFile(tmp_path / "translations" / "zh" / "x.po", units, "zh")
    catalogs.update(spec)
    if translations:
        catalog = catalogs._read(spec.path, "zh")
        for message in catalog:
            if message.id in translations:
                message.string = translations[message.id]
        catalogs.write_catalog(spec.path, catalog)
    return spec


def test_update_adds_new_units_keeps_translations_and_marks_changed_english_fuzzy(tmp_path):
    spec = _catalog(
        tmp_path,
        [Unit("Hello world", "c1"), Unit("Gone soon", "c2")],
        {"Hello world": "你好，世界", "Gone soon": "很快消失"},
    )
    assert catalogs.problems(spec) == []
    changed = CatalogFile(spec.path, [Unit("Hello, world!", "c1"), Unit("Brand new", "c3")], "zh")
    counts = catalogs.update(changed)
    assert counts == catalogs.CatalogCounts(translated=0, fuzzy=1, untranslated=1, obsolete=2)
    found = catalogs.problems(changed)
    assert any("msgctxt 'c1'" in p and "fuzzy" in p for p in found) and any(
        "msgctxt 'c3'" in p and "untranslated" in p for p in found
    )
    assert all(p.startswith("translations/zh/x.po: ") and "(line " in p for p in found), found
    # obsolete, kept for the translator
    assert '#~ msgctxt "c2"' in spec.path.read_text(encoding="utf-8")


def test_an_update_that_changes_no_unit_leaves_the_file_as_it_is(tmp_path):
    """Two branches that each ran an update must not differ in the header's creation date alone."""
    spec = _catalog(tmp_path, [Unit("Hello world", "c1")], {"Hello world": "你好，世界"})
    dated = spec.path.read_text(encoding="utf-8").replace(
        "POT-Creation-Date: 20", "POT-Creation-Date: 19", 1
    )
    spec.path.write_text(dated, encoding="utf-8")
    catalogs.update(spec)
    assert spec.path.read_text(encoding="utf-8") == dated  # nothing but the date would change: kept
    catalogs.update(CatalogFile(spec.path, [Unit("Hello world", "c1"), Unit("New", "c2")], "zh"))
    # a real change: written anew
    assert "POT-Creation-Date: 19" not in spec.path.read_text(encoding="utf-8")


def test_a_translation_that_loses_a_placeholder_or_a_code_span_is_refused(tmp_path):
    units = [
        Unit("{n} checks failed", None),
        Unit("call `estimate_handoff(payload)` first", None),
        Unit("a `span\nover two lines`", None),
    ]
    spec = _catalog(
        tmp_path,
        units,
        {
            "{n} checks failed": "{count} 项检查失败",
            "call `estimate_handoff(payload)` first": "先调用 estimate_handoff",
            "a `span\nover two lines`": "一个 `span over two lines`",
        },
    )
    found = catalogs.problems(spec)
    assert len(found) == 2, found
    assert "lost {n}" in found[0] and "lost `estimate_handoff(payload)`" in found[1]


def test_a_catalog_that_does_not_parse_is_named_with_its_line(tmp_path):
    spec = _catalog(tmp_path, [Unit("Hello world", None)], {"Hello world": "你好"})
    text = spec.path.read_text(encoding="utf-8")
    spec.path.write_text(text.replace('msgstr "你好"', 'msgstr "你好'), encoding="utf-8")
    found = catalogs.problems(spec)
    assert (
        len(found) == 1
        and found[0].startswith("translations/zh/x.po: does not parse")
        and "line" in found[0]
    ), found


def test_code_strings_are_the_message_calls_and_a_public_checks_texts():
    grade_cell = (
        "checks = PublicChecks('TODO 9 · thing')\n"
        "@checks.case\n"
        "def f():\n"
        '    """The thing works as told"""\n'
        "    assert x == 1, f'expected 1, got {x!r} from {y}'\n"
        "    d = {'ready': 1}\n"
    )
    assert sorted(catalogs.code_strings(grade_cell)) == sorted(
        ["TODO 9 · thing", "The thing works as told", "expected 1, got {0} from {1}"]
    )
    cell = (
        "ax.set_title(tr('Serial vs overlapped'))\nsay('{n:>5} copies made', n=3)\nLANES = "
        "[N_('copy engine'), 'not marked']\n"
    )
    assert sorted(catalogs.code_strings(cell)) == [
        "Serial vs overlapped",
        "copy engine",
        "{n:>5} copies made",
    ]
    # text that does not go through the catalog is no unit
    # (test_notebooks_print_and_draw_through_the_catalog refuses it)
    assert catalogs.code_strings("ax.set_title('Serial vs overlapped')\nprint('a message')") == []


def test_a_template_that_is_not_a_literal_is_refused():
    """An f-string (or a concatenation) as a template is made before the catalog is asked: no
    catalog can hold it. A variable is allowed (a label marked N_ where it was written)."""
    found = catalogs.unliteral_templates(
        "say(f'wrote {path}')\ntr('a' + b)\ntr(label)\nN_(f'{x} ms')\nsay('wrote {path}', path=p)"
    )
    assert [line.split(":")[0] for line in found] == ["line 1", "line 2", "line 4"], found


def test_the_feedback_pages_own_headings_are_translated_and_nothing_else():
    from feedback_pages import LEARNERS_OWN, page_data

    from autograde.record.pages import render_page

    words = {
        "Score: {score}": "得分: {score}",
        "(Score: {score})": "(得分: {score})",
        "Student's answer": "你的答案",
    }
    words["Test cell: {todo}"] = "测试单元格：{todo}"
    out = render_page(page_data(), words, "zh")
    assert "<h4>04_decode_start_gate (得分: 0.75 / 4.5)</h4>" in out and "你的答案" in out
    assert ">测试单元格：TODO 4 · plan_decode_start</a> (得分: 0.75 / 2.0)" in out
    assert "得分: 0.75 / 2.0 <a" in out
    english = render_page(page_data(), {}, "en")
    at = english.index("Test cell Score")
    # the learner's own text is left alone
    assert english[at - 200 : at + 100] in out and "Test cell Score: 1.0 / 2.0" in LEARNERS_OWN
    assert "Student's answer" in english and "(Score: 0.75 / 4.5)</h4>" in english


@pytest.mark.parametrize("name", ["01_what_can_overlap", "grader"])
def test_the_committed_catalogs_are_complete(name):
    from autograde.course import Course
    from autograde.publish import editions

    assert catalogs.problems(editions.catalog_for(Course.load(), "zh", name)) == []


def test_the_shipped_font_draws_every_character_of_every_catalog():
    """The font subset covers what every catalog holds (figure text, widget labels, the class
    report's figures, the notebooks' text): a character a catalog adds without `translations font`
    fails here, named, as `check` refuses it."""
    from autograde.course import Course
    from autograde.publish import editions, fonts

    specs = editions.course_catalogs(Course.load())
    assert {spec.path.stem for spec in specs} >= {"grader", "runtime", "01_what_can_overlap"}
    for spec in specs:
        texts = fonts.catalog_texts([spec])
        assert len(fonts.characters(texts)) > 20, spec.label
        assert fonts.missing_glyphs(texts) == [], spec.label
    # and the check can fail: a character no catalog holds is found missing
    assert fonts.missing_glyphs(["鼹鼠"]) == ["鼠", "鼹"]


CODE_CELL = '''def f(x):
    """# not a comment: a docstring"""
    # TODO 9: return twice `x`,
    # as an int.
    ### BEGIN SOLUTION
    # the model answer's own note
    return 2 * x  # trailing: stays
    ### END SOLUTION
text = """
# inside a string
"""
# YOUR CODE HERE
#   indented hint'''


def test_a_code_cells_comment_blocks_are_translated_and_its_code_is_untouched():
    blocks = catalogs.comment_blocks(CODE_CELL)
    assert [b[3] for b in blocks] == ["TODO 9: return twice `x`,\nas an int.", "  indented hint"]
    table = catalogs.Translations(
        {
            "c:comment:0": {blocks[0][3]: "TODO 9：返回 `x` 的两倍（int）。"},
            "c:comment:1": {blocks[1][3]: "  缩进的提示"},
        }
    )
    translated = catalogs.translate_comments(CODE_CELL, "c", table)
    assert (
        "    # TODO 9：返回 `x` 的两倍（int）。\n    ### BEGIN SOLUTION" in translated
        and "#   缩进的提示" in translated
    )
    assert (
        "# the model answer's own note" in translated
        and "# inside a string" in translated
        and "# YOUR CODE HERE" in translated
    )
    assert ideas.code_only(translated) == ideas.code_only(CODE_CELL) and translated != CODE_CELL
    assert ideas.code_only(CODE_CELL.replace("2 * x", "3 * x")) != ideas.code_only(CODE_CELL)
    with pytest.raises(KeyError):
        catalogs.translate_comments(CODE_CELL, "other", table)


def test_every_code_comment_a_learner_reads_is_a_unit_of_its_notebooks_catalog():
    from autograde.course import Course

    course = Course.load()
    units = [
        u
        for path in course.source_paths()
        for u in catalogs.notebook_units(path)
        if ":comment:" in (u.context or "")
    ]
    assert len(units) >= 15 and any(u.msgid.startswith("TODO 0:") for u in units)
    assert not any("YOUR CODE HERE" in u.msgid or "BEGIN SOLUTION" in u.msgid for u in units)


TRAILING_CELL = """WARMUP = 5  # untimed runs before measuring
x = "# not a comment"  # the string's note
def f(x):
    ### BEGIN SOLUTION
    return 2 * x  # the model answer's note
    ### END SOLUTION
y = 1  # noqa: E501"""


def test_a_comment_after_code_is_a_unit_and_only_its_words_change():
    notes = catalogs.trailing_notes(TRAILING_CELL)
    assert [(row, text) for row, _, text in notes] == [
        (0, "untimed runs before measuring"),
        (1, "the string's note"),
    ]
    table = catalogs.Translations(
        {
            "c:trailing:0": {notes[0][2]: "计时前的预热次数"},
            "c:trailing:1": {notes[1][2]: "字符串的说明"},
        }
    )
    translated = catalogs.translate_comments(TRAILING_CELL, "c", table)
    assert translated.split("\n")[:2] == [
        "WARMUP = 5  # 计时前的预热次数",
        'x = "# not a comment"  # 字符串的说明',
    ]
    assert "# the model answer's note" in translated and "# noqa: E501" in translated
    assert ideas.code_only(translated) == ideas.code_only(TRAILING_CELL)
    assert ideas.code_only(TRAILING_CELL.replace("WARMUP = 5", "WARMUP = 6")) != ideas.code_only(
        TRAILING_CELL
    )
    assert 'x = "# not a comment"\n' in ideas.code_only(TRAILING_CELL)


def test_an_answer_cells_given_errors_are_runtime_units_and_its_solution_is_not(tmp_path):
    cell = nbformat.v4.new_code_cell(
        "def f(x):\n"
        "    if x < 0:\n"
        "        raise ValueError(localize(f'x must be >= 0, got {x!r}'))\n"
        "    ### BEGIN SOLUTION\n"
        "    print('the model answer says this')\n"
        "    ### END SOLUTION"
    )
    cell.metadata["nbgrader"] = {
        "solution": True,
        "grade": False,
        "grade_id": "f",
        "locked": False,
        "schema_version": 3,
    }
    path = tmp_path / "nb.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    assert [unit.msgid for unit in catalogs.code_units([path])] == ["x must be >= 0, got {0}"]


def test_a_given_functions_docstring_is_a_unit_and_check_reads_past_it():
    source = (
        'def f(x):\n    """Twice `x`\n    (an int)."""\n'
        '    ### BEGIN SOLUTION\n    def g():\n        """the model answer\'s own"""\n    '
        "### END SOLUTION\n"
        "    return 2 * x"
    )
    cell = nbformat.v4.new_code_cell(source)
    assert catalogs.given_docstrings(cell) == ["Twice `x`\n(an int)."]
    table = catalogs.Translations(
        {"c:docstring:0": {"Twice `x`\n(an int).": "`x` 的两倍\n（int）。"}}
    )
    translated = catalogs.translate_docstrings(source, "c", table)
    assert (
        translated.startswith(
            'def f(x):\n    """`x` 的两倍\n    （int）。"""\n    ### BEGIN SOLUTION'
        )
        and "the model answer's own" in translated
    )
    assert ideas.code_only(translated) == ideas.code_only(source) and translated != source
    assert ideas.code_only(source.replace("2 * x", "3 * x")) != ideas.code_only(source)
    cell.metadata["nbgrader"] = {
        "grade": True,
        "solution": False,
        "grade_id": "t",
        "locked": True,
        "schema_version": 3,
        "points": 1,
    }
    # a public check's docstring is its label: the runtime translates it
    assert catalogs.given_docstrings(cell) == []
    with pytest.raises(ValueError):
        catalogs.translate_docstrings(
            source,
            "c",
            catalogs.Translations({"c:docstring:0": {"Twice `x`\n(an int).": 'a "quote"'}}),
        )


def test_check_refuses_an_entry_no_source_uses_and_a_template_no_catalog_can_hold(tmp_path):
    """A catalog entry that no code uses any more (a template the matcher could never reach, say)
    is refused, and so is a tr/say call whose template is made before the catalog is asked (an
    f-string); the control, the same catalog without either, passes."""
    spec = _catalog(tmp_path, [Unit("wrote {path}", None)], {"wrote {path}": "已写入 {path}"})
    assert catalogs.problems(spec) == []
    catalog = catalogs._read(spec.path, "zh")
    catalog.add("{0} MiB for {1} tokens", "{0} MiB（{1} 个 token）")
    catalogs.write_catalog(spec.path, catalog)
    (dead,) = catalogs.problems(spec)
    assert "'{0} MiB for {1} tokens' is used by no source" in dead and "(line " in dead
    refused = CatalogFile(
        spec.path, spec.units, "zh", refused=("tools/x.py line 3: say(f'wrote {p}'...)",)
    )
    assert any(
        "tools/x.py line 3" in p and "string literal" in p for p in catalogs.problems(refused)
    )


def _runtime_spec():
    from autograde.course import Course
    from autograde.publish import editions

    return next(
        spec for spec in editions.course_catalogs(Course.load()) if spec.path.name == "runtime.po"
    )


def test_every_runtime_template_is_used_and_every_template_the_code_uses_is_in_the_catalog():
    """runtime.po holds exactly the templates the runtime and the notebooks' code cells use: each
    literal first argument of tr, say, Message and N_ (and each public check's text) is a
    translated entry, and no entry is left that no code uses (a dead one)."""
    spec = _runtime_spec()
    assert catalogs.problems(spec) == []
    catalog = catalogs._read(spec.path, "zh")
    entries = {(m.id, m.context) for m in catalog if m.id}
    units = {(u.msgid, u.context) for u in spec.units}
    assert entries == units, (sorted(entries - units)[:5], sorted(units - entries)[:5])
    assert spec.refused == ()
    # the units are what the code says: a template written in a notebook's cell and one in the
    # runtime
    assert ("{model:<12} {kib:6.0f} KiB/token   {mib:7.0f} MiB for {tokens} tokens", None) in units
    assert ("{first}, {second}", "list") in units and (
        "{name:>9} decisions: {counts}",
        None,
    ) in units


def test_every_template_that_localize_matches_reaches_its_line():
    """The templates with positional values (a public check's f-string message, a scaffold's error,
    the set-up cell's message): each, filled with values, is found by localize and shown in Chinese.
    A template the matcher cannot reach (two values apart by spaces only, say) would fail here."""
    from tools import i18n

    catalog = catalogs._read(_runtime_spec().path, "zh")
    i18n.set_language("zh")
    try:
        unreachable = []
        for message in catalog:
            layout = (
                i18n._template_layout(i18n._merge_adjacent_fields(message.id, message.string)[0])
                if message.id and not message.context
                else None
            )
            if layout is None or not any(isinstance(part, int) for part in layout):
                continue
            values = [f"<v{i}>" for i in range(max(p for p in layout if isinstance(p, int)) + 1)]
            line = message.id.format(*values)
            if i18n.localize(line) != message.string.format(*values):
                unreachable.append(message.id)
        assert unreachable == []
    finally:
        i18n.set_language(None)
