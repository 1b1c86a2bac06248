"""A feedback page's markdown as the notebook has it written: rendered once, math as MathML, then
sanitized.

nbconvert's ``SanitizeHTML`` preprocessor cleans a markdown cell's *source* with bleach, which
escapes every ``<``, ``>`` and ``&`` of it before the markdown is rendered; the renderer then
escapes them again inside code, so a page read ``latency_ratio &lt;= 0.75`` and a blockquote's
``>`` came out as a literal mark. Here the source is rendered as written (nbconvert's own
markdown renderer) and the *HTML it makes* is sanitized (bleach, an allow-list of the tags and
attributes markdown and MathML produce), so nothing is escaped twice and a learner's markup is
still shown as text, never run.

Math is rendered at grading, with no script: each ``$...$``, ``$$...$$`` and LaTeX environment
becomes MathML (latex2mathml, MIT licence, pinned in ``pyproject.toml``), which the browser lays
out itself (MathML Core), with its TeX kept as the formula's annotation (not shown; read by
assistive technology and copy). A formula the converter cannot read is shown as its TeX, in
``<code>``. The page keeps its policy that forbids every script, and loads nothing."""

from __future__ import annotations

import html
import re
from xml.etree.ElementTree import Element

import bleach
from bleach.css_sanitizer import CSSSanitizer
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

MATHML_NAMESPACE = "http://www.w3.org/1998/Math/MathML"
TEX_ANNOTATION = "application/x-tex"

# what markdown makes (nbconvert's renderer with its plugins: tables, strikethrough, task lists,
# definition lists, code highlighted by Pygments, heading anchors), and a few inline tags a learner
# writes
HTML_TAGS = frozenset(
    "a abbr b blockquote br caption code dd del details div dl dt em h1 h2 h3 h4 h5 h6 hr "
    "i img input kbd li ol p pre "
    "q s samp small span strong sub summary sup table tbody td tfoot th thead tr u ul".split()
)
# what tex_to_mathml makes (MathML Core's elements; semantics and annotation for the TeX)
MATHML_TAGS = frozenset(
    "math semantics annotation mrow mi mo mn ms mtext mspace msub msup msubsup munder "
    "mover munderover mfrac "
    "msqrt mroot mstyle mpadded mphantom menclose mtable mtr mtd merror".split()
)
MATHML_ATTRIBUTES = [
    "display", "xmlns", "mathvariant", "stretchy", "fence", "separator", "form", "lspace", "rspace",
    "width", "height", "depth", "columnalign", "rowalign", "columnspacing", "rowspacing",
    "columnlines", "rowlines", "frame", "linethickness", "accent", "accentunder", "displaystyle",
    "scriptlevel", "minsize", "maxsize", "movablelimits", "symmetric", "largeop", "notation",
    "encoding",
]  # fmt: skip
_CLASSED = ("div", "span", "pre", "code", "a", "li", "ul", "ol", "table")
ATTRIBUTES: dict[str, list[str]] = {
    **{tag: ["class"] for tag in _CLASSED},
    "a": ["class", "href", "title"],
    "img": ["src", "alt", "title", "width", "height"],
    **{f"h{n}": ["id"] for n in range(1, 7)},
    "th": ["style", "align", "colspan", "rowspan"],
    "td": ["style", "align", "colspan", "rowspan"],
    "ol": ["class", "start"],
    "details": ["open"],
    # a task list's box: a checkbox, disabled (_allowed)
    "input": ["class", "type", "disabled", "checked"],
    **{tag: MATHML_ATTRIBUTES for tag in MATHML_TAGS},
}
LINK_SCHEMES = frozenset({"http", "https", "mailto"})
IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif);base64,[A-Za-z0-9+/=\s]*", re.I)
_TABLE_STYLE = CSSSanitizer(allowed_css_properties=["text-align"])
_SCHEME = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.-]*):")


def _allowed(tag: str, name: str, value: str) -> bool:
    """bleach's attribute filter: the allow-list, and a link or image source only of a safe kind (a
    path, a ``#`` fragment, http/https/mailto; an image may also be a base64 PNG, JPEG or GIF)."""
    if name not in ATTRIBUTES.get(tag, ()):
        return False
    if tag == "input" and name == "type":
        return value.lower() == "checkbox"
    if name in ("href", "src"):
        plain = "".join(ch for ch in value if ch > " " and ch.isprintable())
        scheme = _SCHEME.match(plain)
        if scheme is None:
            return True
        return scheme.group(1).lower() in LINK_SCHEMES or (
            tag == "img" and name == "src" and IMAGE_DATA.fullmatch(plain) is not None
        )
    return True


def sanitize(fragment: str) -> str:
    """Rendered HTML with only the allowed tags and attributes kept; any other tag is shown as
    text (escaped once), comments dropped. Text and entities already escaped stay as they are."""
    return bleach.clean(
        fragment,
        tags=HTML_TAGS | MATHML_TAGS,
        attributes=_allowed,
        protocols=LINK_SCHEMES | {"data"},  # data: only for an image, as _allowed decides
        strip=False,
        strip_comments=True,
        css_sanitizer=_TABLE_STYLE,
    )


# ---------------------------------------------------------------- math

# a TeX escape in text mode (\_ in \text{kv\_heads}): the character
_TEXT_ESCAPES = re.compile(r"\\([_%&#${}])")
_TEXT_TAGS = {"mtext", "ms"}


def _serialize(element: Element, out: list[str]) -> None:
    """MathML from latex2mathml's tree, each text escaped once: the converter writes a symbol as a
    character reference in the text (``&#x02248;``) and serializes by unescaping the whole output,
    which would leave a ``<`` of ``\\text{a<b}`` raw; here each text is decoded, then escaped."""
    attributes = "".join(
        f' {name}="{html.escape(str(value), quote=True)}"' for name, value in element.attrib.items()
    )
    out.append(f"<{element.tag}{attributes}>")
    text = html.unescape(element.text or "")
    out.append(
        html.escape(
            _TEXT_ESCAPES.sub(r"\1", text) if element.tag in _TEXT_TAGS else text, quote=False
        )
    )
    for child in element:
        _serialize(child, out)
        out.append(html.escape(html.unescape(child.tail or ""), quote=False))
    out.append(f"</{element.tag}>")


def tex_to_mathml(tex: str, display: bool) -> str:
    """``tex`` as a MathML formula (block or inline) with its TeX as the annotation; a formula the
    converter cannot read (or one nested too deep to write) comes back as its TeX in ``<code>``
    (escaped)."""
    try:
        return _mathml(tex, display)
    # latex2mathml raises its own errors, and others (RecursionError), on TeX it cannot read
    except Exception:
        delimiter = "$$" if display else "$"
        return f'<code class="tex">{html.escape(delimiter + tex + delimiter, quote=False)}</code>'


def _mathml(tex: str, display: bool) -> str:
    from latex2mathml.converter import convert_to_element

    math = convert_to_element(tex, display="block" if display else "inline")
    rows = list(math)
    for row in rows:
        math.remove(row)
    semantics = Element("semantics")
    semantics.extend(rows)
    annotation = Element("annotation", {"encoding": TEX_ANNOTATION})
    annotation.text = html.escape(tex, quote=False)  # _serialize decodes a text before escaping it
    semantics.append(annotation)
    math.append(semantics)
    out: list[str] = []
    _serialize(math, out)
    return "".join(out)


class MathMLRenderer(IPythonRenderer):
    """nbconvert's markdown renderer, with its math (left as TeX for MathJax) as MathML."""

    def block_math(self, body: str) -> str:
        return tex_to_mathml(body, display=True)

    def inline_math(self, body: str) -> str:
        return tex_to_mathml(body, display=False)

    def latex_environment(self, name: str, body: str) -> str:
        return tex_to_mathml(f"\\begin{{{name}}}{body}\\end{{{name}}}", display=True)


def render_markdown(source: str, **renderer_options) -> str:
    """``source`` (markdown) as HTML, math as MathML, sanitized (``renderer_options``: nbconvert's
    ``IPythonRenderer``'s, as its HTML exporter passes them)."""
    return sanitize(
        MarkdownWithMath(renderer=MathMLRenderer(escape=False, **renderer_options)).render(source)
    )
