"""Script payloads a learner can leave in a notebook, and a browser check that none of them runs
in a page the grader writes.

``PAYLOAD_CELLS`` are code cells: run in an IPython kernel, they emit every kind of output a
feedback page renders (images whose width/height metadata carries an attribute, HTML, SVG,
Markdown, LaTeX, JavaScript, JSON, widget views, streams, an error), each carrying script.
``PAYLOAD_MARKDOWN`` are markdown cells with raw HTML. Every payload, if it runs, leaves a mark
the page did not have: an attribute ``data-owned-<payload>`` on ``<body>``, the page's title or
``window.name`` set to ``owned:<payload>``, a console message or a dialog.

``scripts_ran(paths)`` opens each page in headless Chromium and says what changed in it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SETTLE_MS = 300  # after the load event: time for timers, animations and image events to fire

# a 1x1 PNG, base64
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"
    "z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def mark(name: str) -> str:
    """JavaScript (no spaces, so it also fits an unquoted attribute) that marks ``<body>``."""
    return f"document.body.setAttribute('data-owned-{name}','1')"


PAYLOAD_CELLS: list[str] = [
    # nbconvert writes width=/height= unquoted: a space in the value starts a new attribute
    f'''from IPython.display import display
display({{"image/png": "{PNG}", "text/plain": "a figure"}}, raw=True,
        metadata={{"image/png": {{"width": "1 onload={mark("png-width")}"}}}})''',
    # a JPEG that does not decode fires onerror; metadata at the top level, not under the mime type
    """from IPython.display import display
display({"image/jpeg": "AAAA", "text/plain": "a photo"}, raw=True,
        metadata={"height": "1 onerror=document.title='owned:jpeg-height'"})""",
    # the same through IPython's own Image, and nbconvert's filenames/alt metadata
    f'''from IPython.display import Image, display
import base64
display(Image(data=base64.b64decode("{PNG}"), format="png", width="1 onload={mark("image-width")}"))
display({{"image/png": "{PNG}"}}, raw=True, metadata={{"filenames": {{"image/png": \
"javascript:{mark("png-filename")}"}},
        "image/png": {{"alt": "\\" onload=\\"{mark("png-alt")}"}}}})''',
    f'''from IPython.display import HTML, display
display(HTML("<script>{mark("html-script")}</script><b>bold text</b>"))
display(HTML("<img src=x onerror=\\"{mark("html-img")}\\">"))
display({{"text/html": "<script>console.log('owned:html-isolated')</script>", "text/plain": \
"isolated"}}, raw=True,
        metadata={{"text/html": {{"isolated": True}}}})
HTML("<script>{mark("html-result")}</script><i>an HTML result</i>")''',
    f'''from IPython.display import SVG, display
display(SVG("<svg xmlns='http://www.w3.org/2000/svg' width='20' height='20' \
onload=\\"{mark("svg-onload")}\\">"
            "<script>{mark("svg-script")}</script><rect width='20' height='20' \
fill='teal'/></svg>"))''',
    f'''from IPython.display import Markdown, display
display(Markdown("**markdown output** <img src=x onerror=\\"{mark("markdown-img")}\\">\\n\\n"
                 "<script>{mark("markdown-script")}</script>\\n\\n"
                 "<details open \
ontoggle=\\"window.name='owned:markdown-details'\\">more</details>"))''',
    rf"""from IPython.display import Latex, display
display(Latex(r"$x^2$ </div><img src=x onerror=\"{mark("latex-img")}\">"
              r"<script>{mark("latex-script")}</script>"))""",
    f'''from IPython.display import Javascript, display
display(Javascript("{mark("javascript")}; console.log('owned:javascript')"))''',
    f"""from IPython.display import display
display({{"application/json": {{"a": "</script><script>{mark("json")}</script>"}}, "text/plain": \
"some JSON"}}, raw=True)""",
    f'''from IPython.display import display
display({{"application/vnd.jupyter.widget-view+json": {{"version_major": 2, "version_minor": 0,
         "model_id": "</script><script>{mark("widget-view")}</script>"}}, "text/plain": "a \
widget"}}, raw=True)
try:
    import ipywidgets
    display(ipywidgets.HTML("<img src=x \
onerror=\\"{mark("widget-html")}\\"><script>{mark("widget-script")}</script>"))
except ImportError:
    pass''',
    f"""import sys
print("\\x1b[31m<script>{mark("stdout")}</script>\\x1b[0m <img src=x \
onerror=\\"document.title='owned:stdout'\\">")
print("\\x1b[38;2;255;0;0m<script>alert('owned:stderr')</script>\\x1b[0m", file=sys.stderr)""",
    # last: it stops a run that does not allow errors
    f"""raise ValueError("<script>{mark("error")}</script><img src=x """
    """onerror=\\"alert('owned:error')\\">")""",
]

PAYLOAD_MARKDOWN: list[str] = [
    f"My answer, with <script>{mark('md-script')}</script> in it.",
    f'<img src=x onerror="{mark("md-img")}"> and <b onmouseover="{mark("md-hover")}">bold</b>',
    f'<details open ontoggle="{mark("md-details")}">more</details>',
    f'<iframe srcdoc="<script>parent.{mark("md-iframe")}</script>"></iframe>',
    f'<svg><animate onbegin="{mark("md-svg")}" attributeName="x" dur="1s"/></svg>',
    "<object data=\"data:text/html,<script>alert('owned:md-object')</script>\"></object>",
    f'![a figure](x" onerror="{mark("md-image")}) and <a '
    f'href="javascript:{mark("md-link")}">a link</a>',
]

# what the browser itself logs when it blocks or cannot fetch something: no script ran
_BROWSER_NOTICE = re.compile(
    r"Refused to|Content Security Policy|Failed to load " r"resource|net::ERR_", re.I
)

_STATE = """() => ({
    title: document.title,
    name: window.name,
    body: document.body ? Object.fromEntries([...document.body.attributes].map(a => [a.name, \
a.value])) : {},
})"""

# a policy in a <meta> applies only to what comes after it: it must precede every script
_CSP = """() => {
    const metas = [...document.head.querySelectorAll('meta[http-equiv]')]
        .filter(m => m.httpEquiv.toLowerCase() === 'content-security-policy');
    const forbids = m => /(^|;)\\s*script-src\\s+'none'\\s*(;|$)/i.test(m.content)
        || (/(^|;)\\s*default-src\\s+'none'\\s*(;|$)/i.test(m.content) && \
!/(^|;)\\s*script-src\\s/i.test(m.content));
    const first = document.querySelector('script');
    return metas.some(m => forbids(m) && (!first || (m.compareDocumentPosition(first) & \
Node.DOCUMENT_POSITION_FOLLOWING)));
}"""


def _state(browser, url: str, scripts: bool, events: list[str] | None = None) -> dict:
    """The page's title, window name and body attributes after load (and ``SETTLE_MS``), with
    scripts on or off; with ``events``, every console message, dialog and uncaught error that
    shows script ran is appended to it. The network is cut: a page is one file."""
    context = browser.new_context(java_script_enabled=scripts)
    try:
        page = context.new_page()
        page.route(re.compile(r"^(https?|wss?|ftp)://"), lambda route: route.abort())
        if events is not None:
            page.on(
                "console",
                lambda m: (
                    None
                    if _BROWSER_NOTICE.search(m.text)
                    else events.append(f"console {m.type}: {m.text}")
                ),
            )
            page.on("pageerror", lambda error: events.append(f"uncaught error: {error}"))
            page.on(
                "dialog",
                lambda dialog: (
                    events.append(f"dialog {dialog.type}: {dialog.message}"),
                    dialog.dismiss(),
                ),
            )
        page.goto(url, wait_until="load")
        page.wait_for_timeout(SETTLE_MS)
        state = page.evaluate(_STATE)
        state["csp"] = page.evaluate(_CSP)
        return state
    finally:
        context.close()


def _changes(before: dict, after: dict) -> list[str]:
    """What scripts changed: the title, window.name, attributes on <body>."""
    found = [
        f"{key} {before[key]!r} -> {after[key]!r}"
        for key in ("title", "name")
        if before[key] != after[key]
    ]
    found += [
        f"body[{name}={value!r}]"
        for name, value in sorted(after["body"].items())
        if before["body"].get(name) != value
    ]
    found += [f"body[{name}] removed" for name in sorted(set(before["body"]) - set(after["body"]))]
    return found


def scripts_ran(paths: list[Path]) -> dict[str, str]:
    """{page: what happened} for each HTML page in which a script ran (a change to the title,
    window.name or <body>'s attributes against the same page with scripts off, a console
    message, a dialog, an uncaught error), or that lacks a Content-Security-Policy <meta>
    forbidding scripts ahead of its first script. Empty: no script ran anywhere."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM:
        raise RuntimeError("Chromium is not installed (Debian: apt-get install chromium)")
    found = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        try:
            for path in paths:
                url = Path(path).resolve().as_uri()
                events: list[str] = []
                after = _state(browser, url, True, events)
                problems = _changes(_state(browser, url, False), after) + events
                if not after["csp"]:
                    problems.append(
                        "no Content-Security-Policy <meta> forbidding scripts before "
                        "the first script"
                    )
                if problems:
                    found[str(path)] = "; ".join(problems)
        finally:
            browser.close()
    return found
