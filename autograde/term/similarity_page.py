"""The similarity page (``OUT/similarity.html``): one self-contained file, its own styles, no scripts, no
images; every text from OUT escaped. The findings it shows come from ``similarity.py``."""

from __future__ import annotations

import math

from markupsafe import Markup

from ..record.exporters import add_csp, base_style
from .similarity_findings import Similarity, TodoView

# the page is one self-contained file: its own styles, no scripts, no images
SIMILARITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
SHOWN_ALSO = 30  # names listed for students with the same answer
PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Similar answers · {{ data.assignment }}</title>
<style>
{{ base_style }}
.pair { border: 1px solid #ccc; margin: 1em 0; padding: 0 0.8em 0.5em; } .pair.flagged { border-color: #c62828; }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #fafafa; padding: 0.5em; margin: 0; font-size: 0.85em; }
.warn { background: #fff3cd; padding: 0.5em; border: 1px solid #e0c36a; }
mark { background: #ffe082; } .given { color: #6b6b6b; } .cut { color: #c62828; } .note { color: #546e7a; }
</style></head><body>
<h1>Similar answers | 相似答案 · {{ data.assignment }}</h1>
<p>{{ data.students }} student(s). Each TODO's answers are compared two by two on their code alone: the release's own
lines, comments, docstrings and brackets are left out, every name counts as the same name and statements that do
not depend on each other are read in one order, so a renamed, reformatted or reordered copy still matches. The score
is the share of the smaller answer's fingerprints (runs of {{ data.method.k }} tokens) found in the other; a pair is
flagged at {{ pct(data.threshold) }} or more. Code that many different answers share is not counted, and an answer
with fewer than {{ data.method.min_fingerprints }} fingerprints of its own is <em>too short to compare</em>: two correct
answers of a few lines can be the same without anyone copying.
A high score is a reason to read the two answers, not proof.</p>
{% for w in data.warnings %}<p class="warn">{{ w }}</p>{% endfor %}
<table id="summary"><tr><th>TODO</th><th>notebook</th><th>compared</th><th>too short to compare</th><th>unanswered</th>
<th>missing</th><th>pairs flagged</th><th>students in them</th></tr>
{% for t in data.todos %}<tr data-todo="{{ t.grade_id }}"><td><a href="#{{ t.grade_id }}">{{ t.grade_id }}</a></td><td>{{ t.notebook }}</td>
<td class="n">{{ t.compared }}</td><td class="n too_short">{{ t.too_short }}</td><td class="n">{{ t.unanswered }}</td>
<td class="n">{{ t.missing }}</td><td class="n flagged">{{ t.pairs_above_threshold }}</td><td class="n">{{ t.students_flagged }}</td></tr>
{% endfor %}</table>
{% for t in views %}<section id="{{ t.grade_id }}" data-todo="{{ t.grade_id }}"><h2>{{ t.grade_id }} · {{ t.notebook }}</h2>
<p>{{ t.compared }} answer(s) compared ({{ t.distinct_answers }} different), {{ t.too_short }} too short to compare,
{{ t.unanswered }} unanswered (the release's code only), {{ t.missing }} missing. {{ t.pairs_above_threshold }} pair(s) flagged.</p>
{% if t.too_short and not t.compared %}<p class="note">Every answer to this TODO is too short to compare.</p>{% endif %}
{% if t.compared and not t.entries %}<p class="note">No pair at or near the threshold.</p>{% endif %}
{% if t.pairs_above_threshold > t.entries|selectattr("flagged")|list|length %}<p class="note">The {{ t.entries|length }} most
similar shown; similarity.json lists {{ t.pairs_listed }} of the {{ t.pairs_above_threshold }} flagged pairs.</p>{% endif %}
{% for e in t.entries %}<div class="pair {{ 'flagged' if e.flagged else 'near' }}">
<h3><span class="student">{{ e.a }}</span> · <span class="student">{{ e.b }}</span>: <span class="score">{{ pct(e.score) }}</span>
{{ "flagged" if e.flagged else "below the threshold" }} ({{ e.shared }} shared fingerprints)</h3>
<div class="sides">{% for who, also, code in ((e.a, e.a_also, e.a_code), (e.b, e.b_also, e.b_code)) %}<div>
<p><b class="student">{{ who }}</b>{% if also %} <span class="note">(the same answer, renamed or reformatted, also from
{% for s in also[:shown_also] %}{{ s }}{{ ", " if not loop.last }}{% endfor %}{% if also|length > shown_also %} and
{{ also|length - shown_also }} more{% endif %})</span>{% endif %}</p>
<pre>{% for text, kind in code -%}
{% if kind == "shared" %}<mark>{{ text }}</mark>{% elif kind %}<span class="{{ kind }}">{{ text }}</span>
{%- else %}{{ text }}{% endif %}{% endfor %}</pre>
</div>{% endfor %}</div></div>
{% endfor %}</section>
{% endfor %}
</body></html>
"""


def _pct(value) -> str:
    """A score as a percentage, rounded down to 0.1% (69.96% is not shown as 70%, the threshold)."""
    return "–" if value is None else f"{math.floor(1000 * value + 1e-9) / 10:g}%"


def render(data: Similarity, views: list[TodoView]) -> str:
    from jinja2 import Environment, StrictUndefined

    env = Environment(autoescape=True, undefined=StrictUndefined)
    env.globals.update(pct=_pct)
    page = env.from_string(PAGE).render(data=data, views=views, shown_also=SHOWN_ALSO, base_style=Markup(base_style("90em")))
    return add_csp(page, SIMILARITY_POLICY)
