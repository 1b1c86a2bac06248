"""The CJK font the learner runtime ships: Noto Sans CJK SC, regular and bold, subset to every
character of every catalog (``catalog_texts``: figure text and widget labels, the class report's
figures and the feedback pages' lines, the notebooks' text), renamed as the SIL Open Font License
asks of a modified font. A fresh Colab or Kaggle kernel has no CJK font; without this,
Chinese figure text is boxes, and without the bold weight a bold title mixes bold Latin with
regular Chinese."""

from __future__ import annotations

from pathlib import Path

from tools.i18n import BOLD_FONT_FILE, FONT_FAMILY, FONT_FILE

# where Debian's fonts-noto-cjk puts the collection (index 2 is Simplified Chinese)
SYSTEM_FONT = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
SC_INDEX = 2
ALWAYS = "，。：；？！“”‘’（）、《》【】…—·％～"


def catalog_texts(specs) -> list[str]:
    """Every text of the catalogs ``specs`` (``catalogs.CatalogFile``): each translated unit's
    English and its translation, whatever its context (an English text may hold Chinese too, as the
    class report's bilingual headings do). What the shipped subset must draw."""
    from .catalogs import translations

    texts = []
    for spec in specs:
        for entries in translations(spec).by_context.values():
            for english, translated in entries.items():
                texts += [english, translated]
    return texts


def characters(texts) -> set[str]:
    """The characters of ``texts`` that are not ASCII (the rest is drawn in DejaVu Sans)."""
    return {ch for text in texts for ch in text if ord(ch) > 0x7F and not ch.isspace()}


def missing_glyphs(texts, font: Path = FONT_FILE, bold: Path | None = BOLD_FONT_FILE) -> list[str]:
    """The CJK characters of ``texts`` that the shipped font (either of its weights) cannot draw."""
    from fontTools.ttLib import TTFont

    wanted = {ch for ch in characters(texts) if _is_cjk(ch)}
    missing: set[str] = set()
    for file in (font, bold) if bold is not None else (font,):
        cmap = TTFont(file, lazy=True).getBestCmap() if file.is_file() else {}
        missing |= {ch for ch in wanted if ord(ch) not in cmap}
    return sorted(missing)


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return (
        0x2E80 <= code <= 0x9FFF
        or 0xF900 <= code <= 0xFAFF
        or 0xFF00 <= code <= 0xFFEF
        or 0x3000 <= code <= 0x303F
    )


def build_subset(texts, source: Path = SYSTEM_FONT, target: Path = FONT_FILE) -> tuple[int, int]:
    """Write the subset of ``source`` that draws ``texts``, and of its bold sibling (the same file
    name with ``Bold`` for ``Regular``, as Debian installs them) beside it; returns (characters,
    bytes of the regular subset)."""
    bold = source.with_name(source.name.replace("Regular", "Bold"))
    if bold == source or not bold.is_file():
        raise FileNotFoundError(
            f"{bold} is not here: the bold weight is cut from the file next "
            f"to {source.name} (Debian's fonts-noto-cjk has both)"
        )
    count, size = _subset(texts, source, target, "Regular")
    _subset(
        texts,
        bold,
        target.with_name(BOLD_FONT_FILE.name)
        if target == FONT_FILE
        else target.with_name(target.stem + "-Bold" + target.suffix),
        "Bold",
    )
    return count, size


def _subset(texts, source: Path, target: Path, weight: str) -> tuple[int, int]:
    """Write the subset of ``source`` (of ``weight``) that draws ``texts``; returns (characters,
    bytes)."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    if not source.is_file():
        raise FileNotFoundError(
            f"{source} is not here: install Debian's fonts-noto-cjk (apt-get "
            "install fonts-noto-cjk) or pass --font"
        )
    wanted = sorted(characters(texts) | set(ALWAYS))
    font = TTFont(source, fontNumber=SC_INDEX if source.suffix == ".ttc" else -1)
    options = subset.Options()
    options.layout_features = ["*"]
    options.name_IDs = ["*"]
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[ord(ch) for ch in wanted])
    subsetter.subset(font)
    names = font["name"]
    for record in names.names:  # a modified OFL font must not keep its Reserved Font Name
        if record.nameID in (1, 16):
            record.string = FONT_FAMILY
        elif record.nameID in (3, 4, 6):
            record.string = (
                FONT_FAMILY.replace(" ", "") + f"-{weight}"
                if record.nameID == 6
                else f"{FONT_FAMILY} {weight}"
            )
        elif record.nameID in (2, 17):
            record.string = weight
    target.parent.mkdir(parents=True, exist_ok=True)
    font.save(target)
    return len(wanted), target.stat().st_size
