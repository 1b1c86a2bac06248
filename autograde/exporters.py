"""The exporter nbgrader's feedback step uses (``c.GenerateFeedback.exporter_class``)."""
from __future__ import annotations

from jinja2 import BytecodeCache
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter


class _MemoryBytecodeCache(BytecodeCache):
    """Compiled Jinja templates kept in memory, keyed by template and source checksum (Jinja
    checks the checksum, so a changed template is compiled again)."""

    def __init__(self):
        self._store: dict[str, bytes] = {}

    def load_bytecode(self, bucket) -> None:
        code = self._store.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket) -> None:
        self._store[bucket.key] = bucket.bytecode_to_string()

    def clear(self) -> None:
        self._store.clear()


_TEMPLATES = _MemoryBytecodeCache()


def has_images(nb) -> bool:
    """Whether a notebook's page may hold an ``<img>``: an image output, HTML that has one, a
    Markdown image, or an attachment."""
    for cell in nb.cells:
        if "<img" in cell.source.lower() or "![" in cell.source or cell.get("attachments"):
            return True
        for out in cell.get("outputs", []):
            for key, value in out.get("data", {}).items():
                if key.startswith("image/") or "<img" in str(value).lower():
                    return True
    return False


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter, less two costs that buy nothing on a feedback page:

    - templates compiled once per process: nbgrader makes a new exporter for every page, and
      each compiled the page's nine templates again (0.2-0.4 s a notebook);
    - no second pass over a page without images: after rendering, nbconvert parses the whole
      page with BeautifulSoup to give images alt text and JupyterLab-template cells a tabindex,
      and writes it out again (0.2-0.5 s a page here). nbgrader's feedback template is the
      classic one (no JupyterLab cells), and a page without ``<img`` has nothing to change, so
      such a page is the rendered one as is; a page with an image takes nbconvert's whole path.
    """

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = _TEMPLATES
        return environment

    def from_notebook_node(self, nb, resources=None, **kw):
        if has_images(nb):
            return super().from_notebook_node(nb, resources, **kw)
        # HTMLExporter.from_notebook_node's set-up (nbconvert 7), then the rendering alone
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        highlight_code = self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self))
        resources = self._init_resources(resources)
        filter_data_type = WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self, resources=resources)
        self.register_filter("highlight_code", highlight_code)
        self.register_filter("filter_data_type", filter_data_type)
        return TemplateExporter.from_notebook_node(self, nb, resources, **kw)
