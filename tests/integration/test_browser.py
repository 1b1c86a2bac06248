"""JupyterLab in a real browser: open the Step 2 notebook and the simulator notebook (06, with the
notebooks 03 and 04 it loads next to it), run all, check that the widgets render, that no cell
shows an error, and that moving a control changes the readout."""

import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from page_attacks import BROWSER_ARGS, CHROMIUM  # one Chromium set-up for every browser test

pytestmark = pytest.mark.browser
NOTEBOOK = "02_total_vs_exposed_time.ipynb"
SIMULATOR = "06_handoff_simulator.ipynb"
COPIED = (NOTEBOOK, "03_handoff_state_contract.ipynb", "04_decode_start_gate.ipynb", SIMULATOR)


LEARNER_CONFIG = "jupyter/learner"  # what `make lab` puts on JUPYTER_CONFIG_PATH (see the Makefile)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(root, tmp_path_factory):
    if not CHROMIUM:
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser test: chromium is missing (.ci/run installs it)")
        pytest.skip(
            "Debian's chromium is not installed (apt-get install chromium); the browser "
            "test needs it"
        )
    workdir = tmp_path_factory.mktemp("lab")
    for name in COPIED:  # copies: autosave must not touch the sources
        shutil.copy(root / "solutions" / name, workdir / name)
    # the Chinese edition of the Step 2 notebook, answered (the instructor's source with the
    # catalog's text)
    import nbformat

    from autograde.course import Course
    from autograde.publish.editions import edition_source

    (workdir / "zh").mkdir()
    nbformat.write(
        edition_source(root / "solutions" / NOTEBOOK, "zh", Course.load()),
        workdir / "zh" / NOTEBOOK,
    )
    # every cell in the page, not only those in view (JupyterLab 4 renders a long notebook lazily)
    settings = workdir / ".jupyter" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    port, token = _free_port(), secrets.token_hex(16)
    # the learner's lab, as `make lab` opens it: without nbgrader's instructor extensions
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(workdir / ".jupyter"),
        "JUPYTER_RUNTIME_DIR": str(workdir / ".runtime"),
        "JUPYTER_CONFIG_PATH": str(root / LEARNER_CONFIG),
    }
    env.pop("COURSE_WIDGETS", None)
    env.pop("MPLBACKEND", None)  # the learner's default: inline figures
    log = open(workdir / "lab.log", "w")
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "jupyter"),
            "lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={workdir}",
            "--LabApp.news_url=",
            *(["--allow-root"] if os.geteuid() == 0 else []),
        ],
        cwd=workdir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("JupyterLab did not start:\n" + (workdir / "lab.log").read_text()[-3000:])
    yield {
        "url": f"{base}/lab/tree/{NOTEBOOK}?token={token}",
        "workdir": workdir,
        "base": base,
        "token": token,
        "simulator_url": f"{base}/lab/tree/{SIMULATOR}?token={token}&reset",
        "chinese_url": f"{base}/lab/tree/zh/{NOTEBOOK}?token={token}&reset",
    }
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def _open_and_run_all(page, url: str) -> None:
    from playwright.sync_api import expect

    page.goto(url)
    page.locator(".jp-Notebook").first.wait_for(timeout=90_000)
    # the kernel must be connected and idle before Run All (a first start in a new venv is slow)
    expect(page.locator(".jp-StatusBar-TextItem", has_text="| Idle").first).to_be_visible(
        timeout=120_000
    )
    # prompts of the notebook in front only: a tab the workspace restored keeps its own in the page
    executed = page.locator(".jp-InputPrompt:visible", has_text="[1]")
    for _attempt in range(3):
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        try:
            expect(executed.first).to_be_attached(timeout=60_000)
            break
        except AssertionError:
            continue  # the request was dropped while the kernel was still connecting: run all again


@contextlib.contextmanager
def _lab_page(root: Path, name: str):
    """A Chromium page on the lab; on failure, a screenshot and every output's text under
    artifacts/<name>_failure.*"""
    from playwright.sync_api import sync_playwright

    artifacts = root / "artifacts"
    artifacts.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            yield page, artifacts
        except Exception:
            page.screenshot(path=str(artifacts / f"{name}_failure.png"))
            outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
            (artifacts / f"{name}_failure.txt").write_text("\n-----\n".join(outputs))
            raise
        finally:
            browser.close()


def _run_all_until(page, url: str, readout_class: str, word: str):
    """Open ``url``, Run All, and wait until the widget's readout holds ``word`` and no cell runs;
    no cell may show an error. Returns the readout."""
    from playwright.sync_api import expect

    _open_and_run_all(page, url)
    readout = page.locator(readout_class)
    expect(readout).to_contain_text(word, timeout=120_000)
    expect(page.locator(".jp-InputPrompt:visible", has_text="[*]")).to_have_count(
        0, timeout=120_000
    )
    errors = page.locator(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']:visible"
    )
    assert errors.count() == 0, errors.all_inner_texts()[:3]
    return readout


def _move_layers_and_capture(page, readout, label: str, word: str, shot: Path) -> None:
    """Press the explorer's layers slider ten steps right: the readout must change (and still hold
    ``word``) and the live figure redraw; then a screenshot of the explorer."""
    from playwright.sync_api import expect

    before = readout.inner_text()
    slider = page.locator(".widget-slider", has_text=label)
    slider.scroll_into_view_if_needed()
    handle = slider.locator(".noUi-handle")
    handle.focus()
    for _ in range(10):
        handle.press("ArrowRight")
    expect(readout).not_to_have_text(before, timeout=30_000)
    after = readout.inner_text()
    assert word in after and after != before
    page.wait_for_timeout(2000)  # let the last redraw land before the screenshot
    explorer = page.locator(".widget-vbox", has=readout).last
    expect(explorer.locator("img")).to_have_count(1, timeout=30_000)  # the live matplotlib timeline
    explorer.screenshot(path=str(shot))


def test_explorer_in_jupyterlab(lab, root):

    with _lab_page(root, "jupyterlab_explorer") as (page, artifacts):
        readout = _run_all_until(page, lab["url"], ".handoff-readout", "exposed")
        assert page.locator(".widget-slider").count() >= 6, "the explorer's sliders render"
        # TODO 1 and TODO 2, every public check passed (N/N, whatever N is)
        assert page.get_by_text(re.compile(r"public checks (\d+)/\1 passed")).count() >= 2
        _move_layers_and_capture(
            page,
            readout,
            "layers (1 = send after)",
            "exposed",
            artifacts / "jupyterlab_explorer.png",
        )


def test_simulator_panel_in_jupyterlab(lab, root):
    """Notebook 06 loads the learner's Step 3 and 4 functions from the notebooks next to it, runs
    the simulator, and its panel reruns when a control changes."""
    from playwright.sync_api import expect

    with _lab_page(root, "jupyterlab_simulator") as (page, artifacts):
        readout = _run_all_until(page, lab["simulator_url"], ".sim-readout", "TTFT P50/P95/P99")
        assert page.get_by_text("loaded your validate_handoff_state").count() >= 1, (
            "notebooks 03 and 04 were loaded"
        )
        assert page.locator(".widget-slider").count() >= 2, "the panel's sliders render"
        before = readout.inner_text()
        # the panel opens on 'whole'
        layerwise = page.locator(".widget-toggle-buttons button", has_text="layerwise")
        layerwise.scroll_into_view_if_needed()
        layerwise.click()
        expect(readout).not_to_have_text(before, timeout=30_000)
        assert "TTFT P50/P95/P99" in readout.inner_text()
        page.wait_for_timeout(2000)  # let the last redraw land before the screenshot
        panel = page.locator(".widget-vbox", has=readout).last
        expect(panel.locator("img")).to_have_count(1, timeout=30_000)  # the live figure
        panel.screenshot(path=str(artifacts / "jupyterlab_simulator.png"))


def test_the_chinese_explorer_in_jupyterlab(lab, root):
    """The Chinese edition in the lab: the kernel finds the edition in the notebook's metadata by
    itself; the checks print in Chinese; the explorer's labels and readout are Chinese, and a slider
    still changes the output."""

    from tools import i18n

    i18n.set_language("zh")
    try:
        layers = i18n.tr("layers (1 = send after)")
        exposed = i18n.tr(
            "transfer {transfer} ms · hidden {hidden} ms · exposed {exposed} ms · overlap "
            "ratio {ratio}",
            transfer="1.00",
            hidden="0.00",
            exposed="1.00",
            ratio="0.00",
        )
    finally:
        i18n.set_language(None)
    assert layers != "layers (1 = send after)" and "暴露" in exposed
    with _lab_page(root, "jupyterlab_explorer_zh") as (page, artifacts):
        readout = _run_all_until(page, lab["chinese_url"], ".handoff-readout", "暴露")
        assert page.get_by_text("隐藏测试").count() >= 2, "the check lines are in Chinese"
        assert page.get_by_text("hidden tests run at grading").count() == 0
        _move_layers_and_capture(
            page, readout, layers, "暴露", artifacts / "jupyterlab_explorer_zh.png"
        )


def test_the_learners_lab_has_no_instructor_tools(lab, root):
    """`make lab` opens JupyterLab without nbgrader's extensions: no formgrader page, no nbgrader
    menu or sidebar, and no nbgrader line (its course-folder error included) in the server log."""
    assert f"JUPYTER_CONFIG_PATH=$(CURDIR)/{LEARNER_CONFIG}" in (root / "Makefile").read_text()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{lab['base']}/formgrader?token={lab['token']}", timeout=10)
    assert refused.value.code == 404
    page = (
        urllib.request.urlopen(f"{lab['base']}/lab?token={lab['token']}", timeout=10)
        .read()
        .decode()
    )
    assert '"@jupyter/nbgrader"' in page.split('"disabledExtensions"', 1)[1].split("]", 1)[0]
    log = (lab["workdir"] / "lab.log").read_text(encoding="utf-8", errors="replace")
    assert "nbgrader" not in log.lower(), [
        line for line in log.splitlines() if "nbgrader" in line.lower()
    ][:5]
