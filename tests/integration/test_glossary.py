"""One term per concept in the Chinese edition: docs/glossary.md names the chosen term and the
variants to avoid, and the catalogs' check refuses a translation that uses a variant."""

from __future__ import annotations

import pytest

from autograde.course import Course
from autograde.publish import catalogs, editions
from autograde.publish.catalogs import CatalogFile, Unit

# The chapter's own terms (the specification), each of which the glossary must choose
CHAPTER_TERMS = [
    "预填充",
    "解码",
    "暴露时间",
    "请求标识",
    "KV 缓存",
    "重叠窗口",
    "状态交接",
    "所有权",
    "回退",
    "截止时间",
]


@pytest.fixture(scope="module")
def terms(root):
    return catalogs.read_glossary(root / catalogs.GLOSSARY)


def test_the_glossary_chooses_the_chapters_terms_and_never_avoids_a_chosen_one(terms):
    chosen = {c for term in terms for c in term.chosen}
    assert set(CHAPTER_TERMS) <= chosen, set(CHAPTER_TERMS) - chosen
    for term in terms:
        assert term.chosen, f"{term.english}: no Chinese term"
        assert not set(term.avoid) & chosen, f"{term.english}: avoids a term another row chooses"
    pd = next(t for t in terms if t.english == "PD disaggregation")
    assert pd.chosen == ("预填充—解码分离",) and {
        "预填充与解码分离",
        "预填充分离",
        "分离式预填充",
        "PD 分离",
    } <= set(pd.avoid)


def _catalog(tmp_path, root, translations: dict[str, str]) -> CatalogFile:
    units = [Unit(english, None) for english in translations]
    spec = CatalogFile(
        tmp_path / "translations" / "zh" / "x.po", units, "zh", root / catalogs.GLOSSARY
    )
    catalogs.update(spec)
    catalog = catalogs._read(spec.path, "zh")
    for message in catalog:
        if message.id in translations:
            message.string = translations[message.id]
    catalogs.write_catalog(spec.path, catalog)
    return spec


def test_a_catalog_that_uses_a_variant_is_refused_naming_the_term(tmp_path, root):
    spec = _catalog(
        tmp_path,
        root,
        {
            "In PD disaggregation, prefill hands the state to decode.": (
                "在 PD 分离部署中，预填充把状态交给解码。"
            ),
            "Check the request id.": "检查请求身份。",
            # 笔记本 inside laptop's own term: not a variant
            "Run it on a laptop.": "在笔记本电脑上运行它。",
            "Open the notebook.": "打开 notebook。",
        },
    )
    found = catalogs.problems(spec)
    assert len(found) == 2, found
    assert "says 'PD 分离'" in found[0] and "'预填充—解码分离'" in found[0] and "(line " in found[0]
    assert "says '请求身份'" in found[1] and "'请求标识'" in found[1]
    fixed = _catalog(tmp_path / "fixed", root, {"Open the notebook.": "打开笔记本。"})
    assert [p for p in catalogs.problems(fixed) if "'笔记本'" in p], (
        "笔记本 alone is the variant notebook avoids"
    )
    # no glossary given: this check is not asked for
    unchecked = CatalogFile(spec.path, spec.units, "zh")
    assert catalogs.problems(unchecked) == []


def test_a_missing_glossary_is_a_problem_not_a_pass(tmp_path, root):
    spec = _catalog(tmp_path, root, {"Open the notebook.": "打开 notebook。"})
    missing = CatalogFile(spec.path, spec.units, "zh", tmp_path / "docs" / "glossary.md")
    found = catalogs.problems(missing)
    assert len(found) == 1 and "glossary cannot be read" in found[0], found


def test_the_shipped_catalogs_use_the_glossarys_terms(root):
    specs = editions.course_catalogs(Course.load())
    assert {spec.glossary for spec in specs} == {root / catalogs.GLOSSARY}, (
        "check reads the glossary for every catalog"
    )
    found = [
        p
        for spec in specs
        for p in catalogs.problems(spec)
        if "the glossary's term" in p or "glossary cannot" in p
    ]
    assert found == [], "\n".join(found)
