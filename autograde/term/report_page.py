"""The class report's page (``OUT/report.html``): one self-contained file, its own styles and data:
images, nothing else; every value put into a text escaped."""

from __future__ import annotations

from markupsafe import Markup

from ..publish.editions import REPORT_CONTEXTS
from ..record.exporters import add_csp, base_style, html_lang
from .report_numbers import Figures, Report
from .report_text import kind_name, mean, num, pct, say, say_detail

SHOWN_PER_KIND = 100  # rows per problem kind on the page (report.json has them all)


# the page is one self-contained file: its own styles and data: images, nothing else
REPORT_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
PAGE = """<!DOCTYPE html>
<html lang="{{ lang }}"><head><meta charset="utf-8">
<title>{{ tr("Class report · {assignment}", assignment=data.assignment) }}</title>
<style>
{{ base_style }}
img { max-width: 100%; } .warn { background: #fff3cd; padding: 0.5em; border: 1px solid #e0c36a; }
.pending { color: #546e7a; } details { margin-bottom: 1em; }
</style></head><body>
<h1>{{ tr("Class report | 班级报告") }} · {{ data.assignment }}</h1>
<p>{{ tr("{students} student(s), {graded} of {records} notebook(s) graded.",
        students=data.students, graded=data.notebooks_graded, records=data.records) }}
{{ tr("Editions submitted: {editions}.", editions=listed(data.editions|dictsort)) }}
{{ tr("Late notebooks: {late} ({points} penalty point(s) in {file}; final totals after it: mean {mean}, median {median}){unknown}.",
      late=data.late.late_notebooks, points=num(data.late.penalty_points), file=code(s.source), mean=mean(s.final.mean), median=mean(s.final.median),
      unknown=tr("; {count} without a known submission time", count=data.late.unknown_times) if data.late.unknown_times else "") }}
{{ tr("Scores from {file}.", file=code(s.source)) }}</p>
{% for w in data.warnings %}<p class="warn">{{ w }}</p>{% endfor %}

<h2 id="scores">{{ tr("Score distribution | 分数分布") }}</h2>
<table id="totals"><tr>{{ headers("students", "mean", "median", "min", "max", "of", "answers pending a person", "scores to review") }}</tr>
<tr><td class="n">{{ s.total.count }}</td><td class="n">{{ mean(s.total.mean) }}</td><td class="n">{{ mean(s.total.median) }}</td>
<td class="n">{{ num(s.total.min) }}</td><td class="n">{{ num(s.total.max) }}</td><td class="n">{{ num(s.max_total) }}</td>
<td class="n pending">{{ tr("{answers} ({points} points, {students} student(s))",
    answers=s.pending_answers, points=num(s.pending_points), students=s.students_with_pending) }}</td>
<td class="n">{{ s.review_answers }}</td></tr></table>
<p class="pending">{{ tr("A written answer that waits for a person is shown as {pending}, not as 0; "
    ~ "until it is scored the totals leave its points out.", pending=em(tr("pending"))) }}</p>
{% if figs.totals %}<img alt="{{ tr("histogram of the class's totals") }}" src="{{ figs.totals }}">{% endif %}
{% if figs.exercises %}<img alt="{{ tr("each exercise's scores") }}" src="{{ figs.exercises }}">{% endif %}
<table id="exercises"><tr>{{ headers("exercise", "notebook", "kind", "points", "mean") }}
{{ headers(*counts) }}</tr>
{% for e in s.exercises %}<tr data-exercise="{{ e.grade_id }}"><td>{{ e.grade_id }}</td><td>{{ e.notebook or "" }}</td>
<td>{{ tr(e.kind) }}</td><td class="n">{{ num(e.points) }}</td><td class="n">{{ mean(e.mean) }}</td><td class="n full">{{ e.full }}</td>
<td class="n partial">{{ e.partial }}</td><td class="n zero">{{ e.zero }}</td><td class="n pending">{{ e.pending }}</td>
<td class="n review">{{ e.review }}</td></tr>
{% endfor %}</table>

<h2 id="ideas">{{ tr("Graded ideas: which did learners miss? | 评分要点:哪些没有掌握?") }}</h2>
<p>{{ tr("Each TODO's hidden tests are named ideas. The pass rate counts the notebooks the judge ran "
    ~ "(a missing or stopped notebook is not judged); most missed first.") }}</p>
{% if figs.ideas %}<img alt="{{ tr("pass rate of each graded idea") }}" src="{{ figs.ideas }}">{% endif %}
<table id="idea-table"><tr>{{ headers("exercise · idea", "what it checks", "points", "passed", "judged") }}
{{ headers("pass rate", "failed", "error", "not started", "skipped", "not judged") }}</tr>
{% for i in data.ideas %}<tr data-idea="{{ i.grade_id }}/{{ i.idea }}"><td>{{ i.grade_id }} · {{ i.idea }}</td>
<td class="text">{{ i.text if i.text is not none else tr("(not in the current sources)") }}</td><td class="n">{{ num(i.points) }}</td>
<td class="n passed">{{ i.passed }}</td><td class="n judged">{{ i.judged }}</td>
<td class="n rate">{{ pct(i.pass_rate) }}</td><td class="n failed">{{ i.failed }}</td><td class="n error">{{ i.error }}</td>
<td class="n not_started">{{ i.not_started }}</td><td class="n skipped">{{ i.skipped }}</td><td class="n">{{ i.not_judged }}</td></tr>
{% endfor %}</table>

<h2 id="problems">{{ tr("Problems | 问题") }}</h2>
{% if not data.problems %}<p>{{ tr("None: every notebook was graded, with nothing to note.") }}</p>{% endif %}
{% if figs.problems %}<img alt="{{ tr("problems by kind") }}" src="{{ figs.problems }}">{% endif %}
{% if data.problems %}<table id="problem-kinds"><tr>{{ headers("kind", "what happened", "count", "students") }}</tr>
{% for p in data.problems %}<tr data-kind="{{ p.kind }}"><td>{{ kind(p.kind) }}</td><td>{{ tr(p.what) }}</td>
<td class="n count">{{ p.count }}</td><td class="n students">{{ p.students }}</td></tr>
{% endfor %}</table>{% endif %}
{% for p in data.problems %}<details><summary>{{ tr("{kind}: {count} ({what})", kind=kind(p.kind), count=p.count, what=tr(p.what)) }}</summary>
<table><tr>{{ headers("student", "notebook", "detail") }}</tr>
{% for item in p.items[:shown] %}<tr><td class="student">{{ item.student_id }}</td><td>{{ item.notebook }}</td>
<td>{{ detail(item.detail) }}</td></tr>
{% endfor %}</table>{% if p.items|length > shown %}
<p>{{ tr("… and {count} more (all in report.json)", count=p.items|length - shown) }}</p>{% endif %}
</details>
{% endfor %}

<h2 id="time">{{ tr("The slowest notebooks | 最慢的 notebook") }}</h2>
<p>{{ tr("{count} notebook(s) timed: median {median} s, 90th percentile {p90} s, slowest {max} s, {total} s in all "
        ~ "(a reused result keeps the time of the run that graded it).",
        count=t.count, median=num(t.median), p90=num(t.p90), max=num(t.max), total=num(t.total)) }}</p>
{% if figs.slowest %}<img alt="{{ tr("the slowest notebooks") }}" src="{{ figs.slowest }}">{% endif %}
<table id="slowest"><tr>{{ headers("student", "notebook", "seconds", "status", "autograde / judge / feedback (s)") }}</tr>
{% for r in t.slowest %}<tr><td class="student">{{ r.student_id }}</td><td>{{ r.notebook }}</td><td class="n">{{ num(r.seconds) }}</td>
<td>{{ kind(r.status) }}{% if r.reused %}{{ tr(" (reused)") }}{% endif %}</td>
<td class="n">{{ num(r.timings.get('autograde')) }} / {{ num(r.timings.get('judge')) }} / {{ num(r.timings.get('feedback')) }}</td></tr>
{% endfor %}</table>
</body></html>
"""


def render(data: Report, figs: Figures[str], words: dict[str, str] | None = None) -> str:
    """The report's page, its own text in the language of ``words`` (the edition's feedback
    translations; English without). Every value put into a text is escaped."""
    from jinja2 import Environment, StrictUndefined
    from markupsafe import escape

    words = words or {}

    def tr(english: str, **values) -> Markup:  # a key of REPORT_CONTEXTS is its msgctxt: English shows its English
        return Markup(escape(words.get(english, REPORT_CONTEXTS.get(english, english)))).format(**values)  # noqa: S704 (escaped, values escaped by format)

    def listed(pairs) -> str:  # "zh 3, en 1" with the language's list separator, each edition by its name
        named = ((" + ".join(say(words, part) for part in name.split("+")), count) for name, count in pairs)  # "en+zh": both
        return say(words, "{first}, {second}", first="", second="").join(
            say(words, "{edition} {count}", edition=name, count=count) for name, count in named
        )

    env = Environment(autoescape=True, undefined=StrictUndefined)
    env.globals.update(
        num=num,
        pct=pct,
        mean=mean,
        tr=tr,
        headers=lambda *keys: Markup("").join(Markup("<th>{}</th>").format(tr(key)) for key in keys),  # noqa: S704 (escaped)
        listed=listed,
        kind=lambda code: kind_name(words, code),
        counts=[context for context in REPORT_CONTEXTS if context.startswith("report:students")],
        detail=lambda text: say_detail(words, text),
        code=lambda text: Markup("<code>{}</code>").format(text),  # noqa: S704 (the value is escaped)
        em=lambda text: Markup("<em>{}</em>").format(text),  # noqa: S704 (the value is escaped)
    )
    template = env.from_string(PAGE)
    style = Markup(base_style("72em"))  # noqa: S704 (the course's own constant styles)
    page = template.render(data=data, s=data.scores, t=data.timing, figs=figs, shown=SHOWN_PER_KIND, base_style=style, lang=html_lang(data.language))
    return add_csp(page, REPORT_POLICY)
