"""The exporter nbgrader's feedback step uses (``c.GenerateFeedback.exporter_class``)."""
from __future__ import annotations

from jinja2 import BytecodeCache
from nbconvert.exporters import HTMLExporter


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


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter with its templates compiled once per process. nbgrader makes
    a new exporter for every feedback page, and each compiled the nine templates of the page
    again (0.2-0.4 s a notebook); a grading worker writes six pages one after another."""

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = _TEMPLATES
        return environment
