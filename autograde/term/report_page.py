"""The class report's page (``OUT/report.html``): one self-contained file, its own styles and data:
images, nothing else; every value put into a text escaped."""

from __future__ import annotations

from pathlib import Path

from markupsafe import Markup

from ..publish.editions import REPORT_CONTEXTS
from ..record.exporters import add_csp, base_style, html_lang
from .report_numbers import Figures, Report
from .report_text import kind_name, mean, num, pct, say, say_detail

SHOWN_PER_KIND = 100  # rows per problem kind on the page (report.json has them all)


# the page is one self-contained file: its own styles and data: images, nothing else
REPORT_POLICY = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; "
    "form-action 'none'"
)
# the page's template (report.html.j2: text, markup and its words, kept as written)
PAGE = (Path(__file__).with_name("report.html.j2")).read_text(encoding="utf-8")


def render(data: Report, figs: Figures[str], words: dict[str, str] | None = None) -> str:
    """The report's page, its own text in the language of ``words`` (the edition's feedback
    translations; English without). Every value put into a text is escaped."""
    from jinja2 import Environment, StrictUndefined
    from markupsafe import escape

    words = words or {}

    # a key of REPORT_CONTEXTS is its msgctxt: English shows its English
    def tr(english: str, **values) -> Markup:
        return Markup(escape(words.get(english, REPORT_CONTEXTS.get(english, english)))).format(
            **values
        )  # noqa: S704 (escaped, values escaped by format)

    # "zh 3, en 1" with the language's list separator, each edition by its name
    def listed(pairs) -> str:
        # "en+zh": both
        named = (
            (" + ".join(say(words, part) for part in name.split("+")), count)
            for name, count in pairs
        )
        return say(words, "{first}, {second}", first="", second="").join(
            say(words, "{edition} {count}", edition=name, count=count) for name, count in named
        )

    env = Environment(autoescape=True, undefined=StrictUndefined)
    env.globals.update(
        num=num,
        pct=pct,
        mean=mean,
        tr=tr,
        headers=lambda *keys: Markup("").join(
            Markup("<th>{}</th>").format(tr(key)) for key in keys
        ),  # noqa: S704 (escaped)
        listed=listed,
        kind=lambda code: kind_name(words, code),
        counts=[context for context in REPORT_CONTEXTS if context.startswith("report:students")],
        detail=lambda text: say_detail(words, text),
        code=lambda text: Markup("<code>{}</code>").format(text),  # noqa: S704 (the value is escaped)
        em=lambda text: Markup("<em>{}</em>").format(text),  # noqa: S704 (the value is escaped)
    )
    template = env.from_string(PAGE)
    style = Markup(base_style("72em"))  # noqa: S704 (the course's own constant styles)
    page = template.render(
        data=data,
        s=data.scores,
        t=data.timing,
        figs=figs,
        shown=SHOWN_PER_KIND,
        base_style=style,
        lang=html_lang(data.language),
    )
    return add_csp(page, REPORT_POLICY)
