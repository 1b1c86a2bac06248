"""The similarity page (``OUT/similarity.html``): one self-contained file, its own styles, no
scripts, no images; every text from OUT escaped. The findings it shows come from
``similarity.py``."""

from __future__ import annotations

import math
from pathlib import Path

from markupsafe import Markup

from ..record.exporters import add_csp, base_style
from .similarity_findings import Similarity, TodoView

# the page is one self-contained file: its own styles, no scripts, no images
SIMILARITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
)
SHOWN_ALSO = 30  # names listed for students with the same answer
# the page's template (similarity.html.j2: text, markup and its words, kept as written)
PAGE = (Path(__file__).with_name("similarity.html.j2")).read_text(encoding="utf-8")


def _pct(value) -> str:
    """A score as a percentage, rounded down to 0.1% (69.96% is not shown as 70%, the threshold)."""
    return "–" if value is None else f"{math.floor(1000 * value + 1e-9) / 10:g}%"


def render(data: Similarity, views: list[TodoView]) -> str:
    from jinja2 import Environment, StrictUndefined

    env = Environment(autoescape=True, undefined=StrictUndefined)
    env.globals.update(pct=_pct)
    page = env.from_string(PAGE).render(
        data=data, views=views, shown_also=SHOWN_ALSO, base_style=Markup(base_style("90em"))
    )
    return add_csp(page, SIMILARITY_POLICY)
