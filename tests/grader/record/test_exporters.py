"""The feedback exporter writes the page nbconvert writes, only faster (its markdown rendered as
written, math as MathML, then sanitized: record/markup.py)."""

import copy

import nbformat
from bs4 import BeautifulSoup
from jinja2 import pass_context
from nbconvert.exporters import HTMLExporter
from traitlets.config import Config

from autograde.record.exporters import FeedbackExporter, has_images
from autograde.record.markup import render_markdown

from submissions import NOTEBOOKS, build


class _NbconvertsPath(HTMLExporter):
    """nbconvert's HTML exporter, all of it (its second pass over the page included), with the
    page's markdown filter: what FeedbackExporter skips must not change the page."""

    @pass_context
    def markdown2html(self, context, source):
        return render_markdown(
            source,
            anchor_link_text=self.anchor_link_text,
            exclude_anchor_links=self.exclude_anchor_links,
        )


def _pages(nb):
    config = Config()
    config.HTMLExporter.template_name = "classic"
    # nbconvert's classic page, not the feedback page's
    config.FeedbackExporter.template_file = "index.html.j2"
    ours, _ = FeedbackExporter(config=config).from_notebook_node(copy.deepcopy(nb))
    theirs, _ = _NbconvertsPath(config=config).from_notebook_node(copy.deepcopy(nb))
    return ours, theirs


def test_a_page_without_images_is_nbconverts_page():
    nb = build(NOTEBOOKS[0])
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "print('hello')", outputs=[nbformat.v4.new_output("stream", text="hello\n")]
        )
    )
    assert not has_images(nb)
    ours, theirs = _pages(nb)
    assert ours != theirs  # not parsed and written again ...
    assert str(BeautifulSoup(ours, features="html.parser")) == theirs  # ... but the same page


def test_a_page_with_an_image_takes_nbconverts_whole_path():
    nb = build(NOTEBOOKS[0])
    png = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"
        "z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "show()", outputs=[nbformat.v4.new_output("display_data", data={"image/png": png})]
        )
    )
    assert has_images(nb)
    ours, theirs = _pages(nb)
    assert ours == theirs and 'alt="No description has been provided for this image"' in ours
    markdown = build(NOTEBOOKS[0])
    markdown.cells.append(nbformat.v4.new_markdown_cell("![a figure](figure.png)"))
    assert has_images(markdown)


def test_kept_fragments_give_the_same_page_and_only_a_learners_own_cells_are_rendered_again(root):
    """Code and markdown are rendered once per source: once a page of the course's own cells (its
    release, as the feedback step shows them) is rendered, a learner's page renders only what the
    learner wrote (the answers), yet is the page rendered with nothing kept."""
    from autograde.record import exporters
    from autograde.run.preprocessors import SanitizeOutputs, ShortenErrors

    nb = build(NOTEBOOKS[0])
    # as the grading kernel sets it
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    nb, _ = ShortenErrors().preprocess(nb, {})
    nb, _ = SanitizeOutputs(enabled=True).preprocess(nb, {})
    config = Config()
    config.HTMLExporter.template_name = "classic"
    config.FeedbackExporter.template_file = "index.html.j2"

    def page():
        return FeedbackExporter(config=config).from_notebook_node(copy.deepcopy(nb))[0]

    kept = (exporters._HIGHLIGHTED, exporters._MARKDOWN)
    try:
        for fragments in kept:
            fragments.clear()
        cold = page()
        for fragments in kept:
            fragments.clear()
        release = nbformat.read(root / "notebooks" / f"{NOTEBOOKS[0]}.ipynb", 4)
        release.metadata["language_info"] = nb.metadata["language_info"]
        release, _ = SanitizeOutputs(enabled=True).preprocess(
            ShortenErrors().preprocess(release, {})[0], {}
        )
        FeedbackExporter(config=config).from_notebook_node(release)
        before = [len(fragments) for fragments in kept]
        assert before[0] > 0 and before[1] > 0
        assert page() == cold
        answers = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
        made = [len(fragments) - n for fragments, n in zip(kept, before)]
        assert made == [
            sum(c.cell_type == "code" for c in answers),
            sum(c.cell_type == "markdown" for c in answers),
        ]
        assert made[0] >= 1 and made[1] >= 1
    finally:
        for fragments in kept:
            fragments.clear()


def test_kept_fragments_are_nbconverts_own_and_bounded(monkeypatch):
    """A kept highlight is the one nbconvert makes for the same source and metadata: a cell whose
    magics_language is null is not one without it. A source longer than FRAGMENT_MAX_SOURCE (a
    learner's huge cell or output) is never kept, and the kept HTML has a character budget."""
    import warnings

    from nbconvert.filters.highlight import Highlight2HTML

    from autograde.record import exporters

    ours, theirs = (
        exporters.KeptHighlight2HTML(pygments_lexer="ipython3"),
        Highlight2HTML(pygments_lexer="ipython3"),
    )
    exporters._HIGHLIGHTED.clear()
    try:
        with warnings.catch_warnings():  # nbconvert warns that a null language is plain text
            warnings.simplefilter("ignore", UserWarning)
            for metadata in (
                {},
                {"magics_language": None},
                {},
                {"magics_language": "bash"},
                {"magics_language": None},
            ):
                assert ours("x = 1  # same source", None, metadata) == theirs(
                    "x = 1  # same source", None, metadata
                )
        assert len(exporters._HIGHLIGHTED) == 2  # absent and bash kept; null takes nbconvert's path
        huge = "y = 2\n" * (exporters.FRAGMENT_MAX_SOURCE // 6 + 1)
        assert ours(huge) == theirs(huge) and len(exporters._HIGHLIGHTED) == 2
        monkeypatch.setattr(exporters, "FRAGMENTS_MAX_CHARS", 3 * len(ours("z = 3")))
        for i in range(10):
            ours(f"z = {i}")
        assert (
            1 <= len(exporters._HIGHLIGHTED) <= 3
            and exporters._HIGHLIGHTED._chars <= exporters.FRAGMENTS_MAX_CHARS
        )
    finally:
        exporters._HIGHLIGHTED.clear()
