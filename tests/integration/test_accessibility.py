"""Every kind of page the grader writes passes axe-core's WCAG 2 A and AA rules in Chromium: a
feedback page of each edition (every notebook, with a late line and answers that wait for a person),
the class report in English and in Chinese, and the similarity page. axe-core is the one
axe-playwright-python ships (4.12.1); a failure lists each violation's rule, element and message."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from page_attacks import BROWSER_ARGS, CHROMIUM
from submissions import NOTEBOOKS, build, run_grade, troubles, write

pytestmark = [pytest.mark.browser, pytest.mark.slow]
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
LATE = "04_decode_start_gate"


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """A graded class (an English and a Chinese submission of every notebook, a late one of each
    edition), its class report in both languages and its similarity page: {name: page}."""
    subs = tmp_path_factory.mktemp("subs")
    out = tmp_path_factory.mktemp("out") / "out"
    for notebook in NOTEBOOKS:
        write(subs, "en", notebook, build(notebook))
        write(subs, "zh", notebook, build(notebook, edition="zh"))
    write(subs, "en_late", LATE, build(LATE))
    write(subs, "zh_late", LATE, build(LATE, edition="zh"))
    times = subs.parent / "times.csv"
    times.write_text(
        "student_id,submitted_at\nen,2026-12-01T10:00:00Z\nzh,2026-12-01T10:00:00Z\nen_late,2026-12-03T10:00:00Z\nzh_late,2026-12-03T10:00:00Z\n"
    )
    run_grade(subs, out, "--deadline", "2026-12-01T23:59:00Z", "--late-policy", "deduct:10%/day", "--timestamps", str(times))
    found = {f"feedback {p.parent.name}/{p.stem}": p for p in sorted((out / "feedback").glob("*/*.html"))}
    assert len(found) == 2 * len(NOTEBOOKS) + 2, troubles(out)
    for language in ("en", "zh"):
        command = [sys.executable, "-m", "autograde", "report", str(out), "--language", language]
        made = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert made.returncode == 0, made.stdout + made.stderr
        found[f"report.html ({language})"] = shutil.copy(out / "report.html", out / f"report-{language}.html")
    made = subprocess.run([sys.executable, "-m", "autograde", "similarity", str(out)], capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stdout + made.stderr
    found["similarity.html"] = out / "similarity.html"
    return {name: Path(path) for name, path in found.items()}


def _violations(page) -> list[dict]:
    from axe_playwright_python.sync_playwright import Axe

    options = {"runOnly": {"type": "tag", "values": WCAG_TAGS}, "resultTypes": ["violations"]}
    return Axe().run(page, options=options).response["violations"]


def _said(name: str, violations: list[dict]) -> list[str]:
    """Each violation as a line: the page, the rule, its impact, the element and axe's message."""
    lines = []
    for violation in violations:
        for node in violation["nodes"]:
            message = " ".join(node.get("failureSummary", "").split())
            lines.append(f"{name}: {violation['id']} ({violation['impact']}) at {' '.join(map(str, node['target']))}: {message}")
    return lines


def test_every_page_passes_axe_cores_wcag_2_a_and_aa_rules(pages):
    from playwright.sync_api import sync_playwright

    if not CHROMIUM:
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser tests: chromium is missing (.ci/run installs it)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    found, checked = [], {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        try:
            # the pages forbid every script: axe is put in by the browser's own protocol, past the policy
            page = browser.new_context(bypass_csp=True).new_page()
            for name, path in pages.items():
                page.goto(path.resolve().as_uri())
                checked[name] = page.evaluate("() => document.documentElement.lang")
                found += _said(name, _violations(page))
        finally:
            browser.close()
    print("\n".join(found))
    assert not found, f"{len(found)} violation(s) of WCAG 2 A/AA:\n" + "\n".join(found[:60])
    assert {name: lang for name, lang in checked.items() if "zh" in name} == {
        **{name: "zh-CN" for name in pages if name.startswith("feedback zh")},
        "report.html (zh)": "zh-CN",
    }
    assert all(lang == "en" for name, lang in checked.items() if "zh" not in name), checked
