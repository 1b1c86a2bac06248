"""The feedback exporter writes the page nbconvert writes, only faster."""

import copy

import nbformat
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter
from traitlets.config import Config

from autograde.record.exporters import FeedbackExporter, has_images

from submissions import NOTEBOOKS, build


def _pages(nb):
    config = Config()
    config.HTMLExporter.template_name = "classic"
    ours, _ = FeedbackExporter(config=config).from_notebook_node(copy.deepcopy(nb))
    theirs, _ = HTMLExporter(config=config).from_notebook_node(copy.deepcopy(nb))
    return ours, theirs


def test_a_page_without_images_is_nbconverts_page():
    nb = build(NOTEBOOKS[0])
    nb.cells.append(nbformat.v4.new_code_cell("print('hello')", outputs=[nbformat.v4.new_output("stream", text="hello\n")]))
    assert not has_images(nb)
    ours, theirs = _pages(nb)
    assert ours != theirs  # not parsed and written again ...
    assert str(BeautifulSoup(ours, features="html.parser")) == theirs  # ... but the same page


def test_a_page_with_an_image_takes_nbconverts_whole_path():
    nb = build(NOTEBOOKS[0])
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    nb.cells.append(nbformat.v4.new_code_cell("show()", outputs=[nbformat.v4.new_output("display_data", data={"image/png": png})]))
    assert has_images(nb)
    ours, theirs = _pages(nb)
    assert ours == theirs and 'alt="No description has been provided for this image"' in ours
    markdown = build(NOTEBOOKS[0])
    markdown.cells.append(nbformat.v4.new_markdown_cell("![a figure](figure.png)"))
    assert has_images(markdown)
