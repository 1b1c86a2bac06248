"""A class on a real JupyterHub (hub/): real Unix users log in through PAM, and in Chromium, in
nbgrader's Assignments tab of their own JupyterLab, fetch, validate and submit, one in English, one
in the Chinese edition, released as an assignment of its own (one on time, one late and twice); the
instructor's account releases and hands feedback back with nbgrader's own commands, the exchange is
graded by `autograde grade`, the instructor scores a reflection in formgrader (the hub service, in
Chromium) and `autograde export` carries it into final_grades.csv, and each learner fetches and
opens their own feedback page in the assignment they submitted to. Then what each user can read is
checked as that user, the formgrader service is the instructor's alone, and a submission that cannot
be graded is refused in the lab with nothing lost.

Needs root (useradd, the spawner's setuid), npm (configurable-http-proxy) and Debian's chromium; in
CI each is required (.ci/run installs chromium), elsewhere the module is skipped without them."""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import nbformat
import pytest

from page_attacks import BROWSER_ARGS, CHROMIUM
from submissions import ROOT, build

sys.path.insert(0, str(ROOT / "hub"))
import classroom  # noqa: E402 (hub/classroom.py: the class's bring-up, as `make hub-up` runs it)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(1800)]
NOTEBOOK = "01_what_can_overlap"
ASSIGNMENT = classroom.assignment()
ZH = classroom.editions()["zh"]  # the Chinese edition, an assignment of its own
SUBMIT_REFUSED = "Invalid Submission"
FORMGRADER = "/services/serving-overlap/formgrader"
AMY_REFLECTION = (
    "Amy's reflection: batch N+1 needs the tokens batch N samples, so it waits on "
    "N's event for those alone."
)
# JupyterLab's "Would you like to get notified about official Jupyter news?"
NEWS = "official Jupyter news"


def _needs() -> str:
    if os.geteuid() != 0:
        return "the hub test makes Unix users and spawns servers as them: run it as root"
    if not CHROMIUM:
        return "Debian's chromium is not installed (apt-get install chromium)"
    if not shutil.which("npm"):
        return (
            "npm is not installed (the hub's proxy, configurable-http-proxy, comes from the "
            "npm registry)"
        )
    return ""


@pytest.fixture(scope="module")
def room():
    missing = _needs()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the hub test: {missing}")
        pytest.skip(missing)
    prefix = f"t{secrets.token_hex(2)}-"
    cls = classroom.create(
        classroom.HUB_ROOT / f"test-{prefix[:-1]}", prefix, ["amy", "ben"], log=lambda *_: None
    )
    try:
        classroom.start(cls)
        classroom.release(cls, [NOTEBOOK])
        yield cls
    finally:
        classroom.remove(cls)
        assert not cls.root.exists()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        yield chromium
        chromium.close()


class Lab:
    """One person's JupyterLab on the hub, in their own browser context (their own login cookie)."""

    def __init__(self, browser, cls: classroom.ClassRoom, user: str):
        self.cls, self.user = cls, user
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.page = self.context.new_page()
        self.base = f"{cls.url}/user/{user}"

    def login(self, then: str = "") -> Lab:
        """Log in through the hub's form; to their own lab (which the hub starts), or to ``then`` on
        the hub."""
        page = self.page
        page.goto(f"{self.cls.url}/hub/login" + (f"?next={then}" if then else ""))
        page.fill("#username_input", self.user)
        page.fill("#password_input", self.cls.passwords[self.user])
        page.click("#login_submit")
        if then:
            return self
        page.wait_for_url("**/lab**", timeout=240_000)
        page.locator(".jp-LabShell").wait_for(timeout=120_000)
        return self

    def assignments(self):
        """nbgrader's Assignments tab (Nbgrader > Assignment List), loaded, in the lab."""
        page = self.page
        if "/lab" not in page.url:
            page.goto(f"{self.base}/lab")
            page.locator(".jp-LabShell").wait_for(timeout=120_000)
        page.get_by_role("menuitem", name="Nbgrader", exact=True).click()
        page.get_by_role("menuitem", name="Assignment List").click()
        page.locator("#released_assignments_list_loading").wait_for(state="hidden", timeout=60_000)
        return page

    def row(self, listing: str, name: str = ASSIGNMENT):
        """The row of the assignment ``name`` exactly (``serving_overlap`` is the start of
        ``serving_overlap-zh``)."""
        exact = self.page.locator(".item_name", has_text=re.compile(rf"^\s*{re.escape(name)}\s*$"))
        return self.page.locator(f"#{listing}_assignments_list .list_item", has=exact).first

    def press(self, listing: str, button: str, name: str = ASSIGNMENT):
        self.row(listing, name).get_by_role("button", name=button, exact=True).click()

    def put(self, path: str, nb) -> None:
        """Save a notebook into the learner's folder through their own Jupyter session (the contents
        API)."""
        xsrf = next(c["value"] for c in self.context.cookies() if c["name"] == "_xsrf")
        reply = self.page.request.put(
            f"{self.base}/api/contents/{path}",
            data=json.dumps({"type": "notebook", "format": "json", "content": nb}),
            headers={"X-XSRFToken": xsrf, "Content-Type": "application/json"},
        )
        assert reply.ok, (reply.status, reply.text()[:500])

    def dialog_text(self, title: str) -> str:
        from playwright.sync_api import expect

        dialog = self.page.locator(".jp-Dialog", has_text=title)
        expect(dialog).to_be_visible(timeout=240_000)
        text = dialog.inner_text()
        dialog.get_by_role("button", name="Ok").click()
        expect(dialog).to_have_count(0)
        return text

    def submit(self, name: str = ASSIGNMENT) -> None:
        """Press Submit in the fetched assignment's row; wait until the tab lists one more
        submission."""
        from playwright.sync_api import expect

        before = self.page.locator("#submitted_assignments_list .nested_list_item").count()
        self.press("fetched", "Submit", name)
        expect(self.page.locator("#submitted_assignments_list .nested_list_item")).to_have_count(
            before + 1, timeout=120_000
        )

    def refused(self, name: str = ASSIGNMENT) -> str:
        """Press Submit, expect the Invalid Submission dialog; its text."""
        self.press("fetched", "Submit", name)
        return self.dialog_text(SUBMIT_REFUSED)

    def no_news_popup(self) -> None:
        """JupyterLab's news question is switched off (the announcements plugin, in the role's page
        config) and not shown, checked once the lab has long been restored (the Assignments tab
        loaded)."""
        config = json.loads(self.page.locator("#jupyter-config-data").text_content())
        assert "@jupyterlab/apputils-extension:announcements" in config.get(
            "disabledExtensions", []
        ), config.get("disabledExtensions")
        assert self.page.get_by_text(NEWS).count() == 0, "JupyterLab asked about its news"

    def shot(self, name: str) -> None:
        artifacts = ROOT / "artifacts"
        artifacts.mkdir(exist_ok=True)
        self.page.screenshot(path=str(artifacts / f"hub_{name}.png"))


def inbound_of(cls: classroom.ClassRoom, user: str) -> list[str]:
    return sorted(p.name for p in cls.inbound.iterdir() if p.name.startswith(f"{user}+"))


def foreign_notebook() -> nbformat.NotebookNode:
    """A notebook of another course's assignment: graded cells, none of them this assignment's."""
    nb = nbformat.v4.new_notebook()
    meta = {
        "schema_version": 3,
        "grade": False,
        "solution": True,
        "locked": False,
        "grade_id": "hw0_answer",
    }
    nb.cells = [nbformat.v4.new_code_cell("answer = 42", metadata={"nbgrader": meta})]
    return nb


STATE: dict = {}  # what one step leaves for the next (the tests run in order, in one process)


def test_formgrader_opens_on_a_class_with_nothing_graded(room, browser):
    """formgrader's server has the graded course folder as its root (it refuses a course root
    outside its server's root, answering every page "Sorry, the formgrader encountered an error",
    with status 200)."""
    cls = room
    # the service alone: no lab of their own started
    instructor = Lab(browser, cls, cls.instructor).login(then=FORMGRADER)
    instructor.page.locator("#main-table").get_by_text("No data available").wait_for(
        timeout=120_000
    )
    assert "/formgrader/manage_assignments" in instructor.page.url
    assert "encountered an error" not in instructor.page.locator("body").inner_text()
    STATE["instructor"] = instructor


def test_learners_fetch_validate_and_submit_in_the_assignments_tab(room, browser):
    from playwright.sync_api import expect

    cls, (amy, ben) = room, room.learners
    lab = Lab(browser, cls, amy).login()
    lab.assignments()
    expect(lab.row("released", ZH)).to_be_visible(timeout=60_000)  # both editions are offered
    lab.press("released", "Fetch")
    expect(lab.row("fetched")).to_be_visible(timeout=60_000)
    lab.no_news_popup()
    assert (
        cls.home(amy) / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    ).stat().st_uid == classroom.pwd.getpwnam(amy).pw_uid
    # English alone
    assert sorted(p.name for p in (cls.home(amy) / ASSIGNMENT).iterdir()) == [f"{NOTEBOOK}.ipynb"]

    # bad input, refused in the lab with nothing sent: nothing answered, then another assignment's
    # notebook
    assert "nothing is answered" in lab.refused()
    lab.put(f"{ASSIGNMENT}/{NOTEBOOK}.ipynb", foreign_notebook())
    assert f"is not {ASSIGNMENT}'s {NOTEBOOK}.ipynb" in lab.refused()
    assert inbound_of(cls, amy) == [], "a refused submission reached the exchange"

    # her answers, Validate in the tab (nbgrader runs the notebook in her kernel), Submit
    lab.put(
        f"{ASSIGNMENT}/{NOTEBOOK}.ipynb",
        build(NOTEBOOK, edits={"reflection_01_q1": AMY_REFLECTION}),
    )
    lab.row("fetched").locator(".assignment-notebooks-link").click()
    lab.page.locator(".nested_list_item", has_text=NOTEBOOK).get_by_role(
        "button", name="Validate"
    ).click()
    assert "Success! Your notebook passes all the tests." in lab.dialog_text("Validation Results")
    lab.submit()
    lab.shot("amy_submitted")
    assert len(inbound_of(cls, amy)) == 1

    # ben takes the Chinese edition: its own assignment, the notebooks at its top; Validate on the
    # notebook's toolbar
    ben_lab = Lab(browser, cls, ben).login()
    ben_lab.assignments()
    ben_lab.press("released", "Fetch", ZH)
    expect(ben_lab.row("fetched", ZH)).to_be_visible(timeout=60_000)
    # no English copies beside it
    assert sorted(p.name for p in (cls.home(ben) / ZH).iterdir()) == [f"{NOTEBOOK}.ipynb"]
    assert not (cls.home(ben) / ASSIGNMENT).exists()
    draft = build(
        NOTEBOOK,
        fill=False,
        edition="zh",
        edits={"reflection_01_q1": "我的初步想法：拷贝和计算争用同一资源时不能重叠。"},
    )
    ben_lab.put(f"{ZH}/{NOTEBOOK}.ipynb", draft)
    ben_lab.page.goto(f"{ben_lab.base}/lab/tree/{ZH}/{NOTEBOOK}.ipynb")
    ben_lab.page.locator(".validate-button").first.click()
    failed = ben_lab.dialog_text("Validation Results")
    assert "failed" in failed.lower() or "NotImplementedError" in failed, failed[:500]
    ben_lab.assignments()
    ben_lab.submit(ZH)  # on time, with TODO 0 unanswered
    STATE["deadline"] = datetime.now(UTC).isoformat(timespec="seconds")
    time.sleep(2)
    ben_lab.put(f"{ZH}/{NOTEBOOK}.ipynb", build(NOTEBOOK, edition="zh"))
    ben_lab.submit(ZH)  # late, answered
    ben_lab.shot("ben_submitted_twice")
    assert [name.split("+")[1] for name in inbound_of(cls, ben)] == [ZH, ZH]
    STATE["labs"] = {amy: lab, ben: ben_lab}


def test_the_instructor_grades_the_exchange(room):
    cls, (amy, ben) = room, room.learners
    assert "labs" in STATE, "the submissions step failed"
    graded = classroom.grade(cls, "--deadline", STATE["deadline"], "--late-policy", "zero")
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    assert "exchange layout, 2 student(s)" in graded.stdout, graded.stdout
    rows = {
        r["student_id"]: r
        for r in csv.DictReader((cls.grading / "grades.csv").open(encoding="utf-8"))
    }
    assert set(rows) == {amy, ben}
    full = float(rows[amy]["auto_total"])
    assert full > 0 and float(rows[amy]["late_penalty"]) == 0 and rows[amy]["edition"] == "en"
    # ben: graded on his newest submission (TODO 0 answered there only), in Chinese, late: zero
    assert float(rows[ben]["auto_total"]) == full and rows[ben]["edition"] == "zh"
    assert float(rows[ben]["late_penalty"]) == float(rows[ben]["total"]) > 0, rows[ben]
    intake = json.loads((cls.grading / "intake.json").read_text())
    # the owner check passed each folder to its own learner
    assert not intake["problems"], intake["problems"]
    assert any(f"{ben}: an older submission" in note for note in intake["notes"]), intake["notes"]
    assert (
        intake["students"][ben]["assignment"] == ZH
        and intake["students"][amy]["assignment"] == ASSIGNMENT
    )
    STATE["graded"] = True


def test_the_instructor_scores_a_reflection_in_formgrader_and_export_carries_it(room, browser):
    """formgrader (the hub service) after grading: the assignment and its two submissions, amy's
    reflection answer beside its score box; the score typed there is saved by formgrader's own page,
    and `autograde export` puts it in final_grades.csv (ben's answer, not scored, stays pending)."""
    from playwright.sync_api import expect

    cls, (amy, ben) = room, room.learners
    assert STATE.get("graded"), "the grading step failed"
    page = STATE["instructor"].page
    page.goto(f"{cls.url}{FORMGRADER}")
    listed = page.locator("#main-table tr", has_text=ASSIGNMENT)
    # one assignment: the Chinese edition's submissions are in it
    expect(listed).to_have_count(1, timeout=120_000)
    expect(listed.locator("td").nth(8)).to_have_text("2")  # its "# Submissions"
    page.goto(f"{cls.url}{FORMGRADER}/gradebook/{ASSIGNMENT}/{NOTEBOOK}")
    # "Submission #1", "#2"
    expect(page.locator("#main-table a.name-hidden")).to_have_count(2, timeout=60_000)
    page.get_by_text("Show All Names").click()
    expect(page.locator("#main-table a.name-shown").first).to_be_visible()
    assert sorted(page.locator("#main-table a.name-shown").all_inner_texts()) == sorted([amy, ben])
    page.locator("#main-table a.name-shown", has_text=amy).click()
    score = page.locator("input.score#reflection_01_q1")
    # formgrader's page has loaded her grades
    expect(score).to_have_class(re.compile("needs_manual_grade"), timeout=120_000)
    answer = page.locator(".nbgrader_cell", has=score)
    expect(answer).to_contain_text(AMY_REFLECTION)
    with page.expect_response(
        lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT"
    ) as saved:
        score.fill("0.5")
        score.press("Tab")
    assert (
        saved.value.ok
        and saved.value.json()["manual_score"] == 0.5
        and saved.value.json()["student"] == amy
    )
    STATE["instructor"].shot("formgrader_scored")

    exported = classroom.export(cls)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    final = {
        r["student_id"]: r
        for r in csv.DictReader((cls.grading / "final_grades.csv").open(encoding="utf-8"))
    }
    assert final[amy]["reflection_01_q1"] == "0.5" and float(final[amy]["manual_total"]) == 0.5
    assert float(final[amy]["total"]) == float(final[amy]["auto_total"]) + 0.5
    assert final[ben]["reflection_01_q1"] == "pending" and float(final[ben]["manual_total"]) == 0
    STATE["exported"] = True


def test_each_learner_fetches_and_opens_only_their_own_feedback(room):
    from playwright.sync_api import expect

    cls, (amy, ben) = room, room.learners
    assert STATE.get("graded"), "the grading step failed"
    released = classroom.feedback(cls)  # each page under the assignment its learner submitted to
    assert {name: run.stderr.count("Feedback released to") for name, run in released.items()} == {
        ASSIGNMENT: 1,
        ZH: 1,
    }
    pages = {}
    for user, name in ((amy, ASSIGNMENT), (ben, ZH)):
        lab = STATE["labs"][user]
        lab.assignments()
        lab.press("submitted", "Fetch Feedback", name)
        link = lab.page.locator("#submitted_assignments_list a", has_text="view feedback")
        expect(link.first).to_be_visible(timeout=60_000)
        link.first.click()  # the folder of the page, in the file browser
        folder = cls.home(user) / name / "feedback"
        (stamp,) = [p.name for p in folder.iterdir()]
        expect(lab.page.locator(".jp-DirListing-item", has_text=f"{NOTEBOOK}.html")).to_be_visible(
            timeout=30_000
        )
        lab.page.goto(f"{lab.base}/files/{name}/feedback/{stamp}/{NOTEBOOK}.html")
        pages[user] = lab.page.locator("body").inner_text()
        lab.shot(f"{user.split('-', 1)[1]}_feedback")
        # his page, hers: the exact bytes the grader wrote for this learner
        assert (folder / stamp / f"{NOTEBOOK}.html").read_bytes() == (
            cls.grading / "feedback" / user / f"{NOTEBOOK}.html"
        ).read_bytes()
    # each page is that learner's own (the bytes graded for them, above), in the edition they
    # submitted
    assert pages[amy] != pages[ben]
    assert "Score: 3.0" in pages[amy] and "得分" not in pages[amy], pages[amy][:300]
    assert "得分" in pages[ben] and "测试单元格" in pages[ben], pages[ben][:300]
    assert [p.name for p in (cls.home(amy) / ASSIGNMENT / "feedback").rglob("*.html")] == [
        f"{NOTEBOOK}.html"
    ]

    # a submission after the feedback: refused in the lab, nothing lost; in the other edition too
    lab = STATE["labs"][amy]
    before = inbound_of(cls, amy)
    lab.assignments()
    assert "has been released" in lab.refused()
    assert inbound_of(cls, amy) == before
    ben_lab, before = STATE["labs"][ben], inbound_of(cls, ben)
    ben_lab.assignments()
    ben_lab.press("released", "Fetch")
    expect(ben_lab.row("fetched")).to_be_visible(timeout=60_000)
    assert f"your submission to {ZH}" in ben_lab.refused() and inbound_of(cls, ben) == before
    # another learner's server is not hers
    other = lab.page.request.get(f"{cls.url}/user/{ben}/api/contents")
    assert other.status in (403, 404) or "login" in other.url, (other.status, other.url)


PROBE = """
import json, os, sys
found = {}
for path in json.loads(sys.argv[1]):
    try:
        found[path] = sorted(os.listdir(path))[:3] if os.path.isdir(path) else open(path, \
'rb').read(10).decode('latin-1')
    except OSError as exc:
        found[path] = type(exc).__name__
print(json.dumps(found))
"""


def read_as(cls, user: str, paths: list[Path]) -> dict[str, str]:
    run = classroom.as_user(
        user,
        [str(cls.env / "bin" / "python"), "-c", PROBE, json.dumps([str(p) for p in paths])],
        cls,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_what_each_learner_can_read(room):
    cls, (amy, ben) = room, room.learners
    assert STATE.get("graded"), "the grading step failed"
    (ben_folder, *_) = inbound_of(cls, ben)
    secret_of = {
        "ben's home": cls.home(ben),
        "ben's answers": cls.home(ben) / ZH / f"{NOTEBOOK}.ipynb",
        "the inbound listing": cls.inbound,
        "the released feedback's listing": cls.exchange / "serving-overlap" / "feedback",
        "the instructor's course folder": cls.course,
        "the grading OUT": cls.grading,
        "the course gradebook (hidden tests)": cls.grading / "gradebook.db",
        "ben's feedback page in OUT": cls.grading / "feedback" / ben / f"{NOTEBOOK}.html",
        "the hub's state (logins)": cls.state / "class.json",
    }
    readable = {
        "her own answers": cls.home(amy) / ASSIGNMENT / f"{NOTEBOOK}.ipynb",
        "the release": cls.exchange / "serving-overlap" / "outbound",
    }
    seen = read_as(cls, amy, [*secret_of.values(), *readable.values()])
    leaks = {
        what: seen[str(path)]
        for what, path in secret_of.items()
        if seen[str(path)] != "PermissionError"
    }
    assert not leaks, f"{amy} can read: {leaks}"
    assert all(
        seen[str(p)] not in ("PermissionError", "FileNotFoundError") for p in readable.values()
    ), seen
    # the submission folder is found only by its name, and its name ends in a random string nbgrader
    # chose
    assert len(ben_folder.rsplit("+", 1)[-1]) >= 12, ben_folder
    assert (
        os.stat(cls.inbound).st_mode & 0o777 == 0o733
        and os.stat(cls.inbound / ben_folder).st_uid == classroom.pwd.getpwnam(ben).pw_uid
    )


def test_formgrader_is_a_service_of_the_instructor_alone(room):
    cls = room
    assert "instructor" in STATE and "labs" in STATE, "an earlier step failed"
    learner = STATE["labs"][cls.learners[0]]
    refused = learner.page.goto(f"{cls.url}{FORMGRADER}")
    assert refused.status == 403 or "formgrader" not in learner.page.content().lower(), (
        refused.status
    )
    # and the learner's lab has no formgrader, no Create Assignment
    assert learner.page.request.get(f"{learner.base}/formgrader").status == 404
