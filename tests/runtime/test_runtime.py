"""The runtime a notebook imports: the course folder and results, public checks, loading a learner's
functions from earlier notebooks, matching renamed notebooks, and the before-you-submit check."""

import json
import sys

import pytest

from tools import checks, integrity, notebook_runtime, project_runtime
from tools.checks import PublicChecks, PublicChecksFailed

# ---------------------------------------------------------------- project root and results


def test_root_found_by_walking_up(root, tmp_path, monkeypatch):
    monkeypatch.delenv(project_runtime.ROOT_ENV, raising=False)
    assert project_runtime.resolve_project_root(root / "notebooks") == root
    assert project_runtime.resolve_project_root(root / "tools" / "plotting.py") == root


def test_root_override_must_hold_the_marker(tmp_path, monkeypatch):
    monkeypatch.setenv(project_runtime.ROOT_ENV, str(tmp_path))
    with pytest.raises(project_runtime.ProjectRootNotFound, match="course.toml"):
        project_runtime.resolve_project_root()
    (tmp_path / "course.toml").write_text("[course]\n")
    assert project_runtime.resolve_project_root("/") == tmp_path.resolve()


def test_root_not_found_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv(project_runtime.ROOT_ENV, raising=False)
    monkeypatch.setattr(project_runtime, "__file__", str(tmp_path / "x" / "project_runtime.py"))
    with pytest.raises(project_runtime.ProjectRootNotFound, match=project_runtime.ROOT_ENV):
        project_runtime.resolve_project_root(tmp_path)


def test_results_dir_and_atomic_write(tmp_path):
    (tmp_path / "course.toml").write_text("[course]\n")
    target = project_runtime.results_dir(tmp_path) / "x.json"
    assert target.parent == tmp_path / "benchmarks" / "results"
    project_runtime.write_json_atomic(target, {"a": "交接"})
    assert json.loads(target.read_text(encoding="utf-8")) == {"a": "交接"}
    assert [p.name for p in target.parent.iterdir()] == ["x.json"], "no temp file left behind"
    with pytest.raises(TypeError):
        project_runtime.write_json_atomic(target, {"bad": object()})
    assert json.loads(target.read_text(encoding="utf-8")) == {"a": "交接"}, (
        "a failed write keeps the old file"
    )
    assert [p.name for p in target.parent.iterdir()] == ["x.json"]


def test_manifest_lists_six_notebooks_in_order(root):
    manifest = project_runtime.course_manifest(root)
    names = [nb["name"] for nb in manifest["notebooks"]]
    assert names == sorted(names) and len(names) == 6
    assert all((root / "solutions" / f"{n}.ipynb").is_file() for n in names)


def test_package_version():
    assert notebook_runtime.package_version("nbgrader") == "0.9.6"
    assert notebook_runtime.package_version("surely-not-installed-xyz") is None


# ---------------------------------------------------------------- public checks


def test_public_checks_report_each_kind_of_result(capsys, tmp_path, monkeypatch):
    report = tmp_path / "r.jsonl"
    monkeypatch.setenv(checks.REPORT_ENV, str(report))
    suite = PublicChecks("demo")

    @suite.case
    def good():
        """passes"""

    @suite.case
    def wrong():
        """fails with a message"""
        assert 1 == 2, "one is not two"

    @suite.case
    def todo():
        """not started"""
        raise NotImplementedError()

    @suite.case
    def crash():
        """crashes"""
        {}["missing"]

    with pytest.raises(
        PublicChecksFailed,
        match="public checks 1/4 passed, 1 not started; hidden tests run at grading",
    ):
        suite.run()
    out = capsys.readouterr()
    assert (
        "one is not two" in out.out and "not implemented yet" in out.out and "KeyError" in out.out
    )
    assert out.err == "", "checks must not write to stderr (nbgrader would zero the cell)"
    record = json.loads(report.read_text())
    assert [c["status"] for c in record["cases"]] == ["pass", "fail", "not_started", "error"]


def test_public_checks_never_claim_hidden_tests_passed(capsys, monkeypatch):
    monkeypatch.delenv(checks.REPORT_ENV, raising=False)
    suite = PublicChecks("ok")
    suite.case(lambda: None)
    assert suite.run() is None, (
        "run() must return None: a value on a test cell's last line is partial credit"
    )
    out = capsys.readouterr().out
    assert (
        "1/1 passed; hidden tests run at grading" in out and "all tests passed" not in out.lower()
    )


def test_unstarted_exercise_says_finish_it(monkeypatch):
    monkeypatch.delenv(checks.REPORT_ENV, raising=False)
    suite = PublicChecks("todo")

    @suite.case
    def todo():
        """x"""
        raise NotImplementedError()

    with pytest.raises(PublicChecksFailed, match="Finish the exercise"):
        suite.run()


def test_an_unfinished_earlier_notebook_is_named_not_this_exercise(capsys, monkeypatch, root):
    """Notebook 06's TODO 7 calls validate_handoff_state loaded from notebook 03: when that copy of
    03 is unfinished, the checks name 03 and its function, not "replace `raise
    NotImplementedError()`" (the learner's own TODO 7 may be done). A NotImplementedError of this
    cell's own code still says so."""
    monkeypatch.delenv(checks.REPORT_ENV, raising=False)
    loaded = notebook_runtime.load_learner_functions(
        "03_handoff_state_contract", ["validate_handoff_state"], search=[root / "notebooks"]
    )
    validate_handoff_state = loaded["validate_handoff_state"]  # the release's unanswered copy

    def handoff_step(state):  # a finished TODO 7 that calls notebook 03's function
        return validate_handoff_state(state, "r1", 3)

    suite = PublicChecks("TODO 7 · handoff_step")

    @suite.case
    def calls_the_earlier_notebook():
        """uses notebook 03"""
        handoff_step({})

    @suite.case
    def own_todo():
        """not started here"""
        raise NotImplementedError()

    with pytest.raises(PublicChecksFailed, match="1 waiting for an earlier notebook's exercise"):
        suite.run()
    out = capsys.readouterr().out
    lines = out.splitlines()
    earlier = lines[lines.index("  … uses notebook 03") + 1]
    assert (
        "validate_handoff_state, loaded from 03_handoff_state_contract.ipynb, is not finished there"
    ) in earlier, out
    assert "replace `raise NotImplementedError()`" not in earlier, (
        f"the message blames this exercise: {earlier}"
    )
    own = lines[lines.index("  … not started here") + 1]
    assert "replace `raise NotImplementedError()`" in own, (
        f"this cell's own unfinished code must still say so: {own}"
    )


def test_a_suite_that_cannot_run_says_why_and_lets_the_notebook_go_on(capsys, monkeypatch):
    """TODO 7's checks when notebooks 03 and 04 are not loaded: in a learner's notebook the reason
    is printed in red (in the learner's language) and Run All goes on; where failures stop (a
    script, a test, COURSE_CHECKS_STOP=1, grading) it raises as a failed run does."""
    from tools import i18n

    monkeypatch.delenv(checks.REPORT_ENV, raising=False)
    reason = (
        "plan_decode_start not defined: run the cell that loads your notebooks 03 and 04 "
        "(above TODO 7) first, then this cell again."
    )
    suite = PublicChecks("TODO 7 · handoff_step")
    suite.case(lambda: None)
    with pytest.raises(PublicChecksFailed, match="plan_decode_start not defined"):
        suite.cannot_run(reason)
    monkeypatch.setattr(checks, "stops_on_failure", lambda: False)  # as in a Jupyter kernel
    assert suite.cannot_run(reason) is None
    out = capsys.readouterr()
    assert out.out == "" and f"✗ {reason}" in out.err and "at grading this cell fails" in out.err
    i18n.set_language("zh")
    try:
        suite.cannot_run(reason)
    finally:
        i18n.set_language(None)
    err = capsys.readouterr().err
    assert "plan_decode_start" in err and "not defined" not in err, (
        f"the reason is not in the learner's language: {err}"
    )


# ---------------------------------------------------------------- learner functions


def test_load_learner_functions_from_answers_and_release(root):
    funcs = notebook_runtime.load_learner_functions(
        "02_total_vs_exposed_time",
        ["compute_exposed_interval", "estimate_handoff"],
        search=[root / "solutions"],
    )
    assert funcs["estimate_handoff"](125_000, 1.0, 0.0, 0.0, [])["transfer_ms"] == 1.0
    stub = notebook_runtime.load_learner_functions(
        "02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "notebooks"]
    )
    with pytest.raises(NotImplementedError):
        stub["estimate_handoff"](1, 1.0, 0.0, 0.0, [])


def test_load_learner_functions_clear_errors(tmp_path, root):
    with pytest.raises(notebook_runtime.LearnerFunctionMissing, match="finish"):
        notebook_runtime.load_learner_functions(
            "02_total_vs_exposed_time", ["no_such_function"], search=[root / "solutions"]
        )
    broken = json.loads((root / "notebooks" / "03_handoff_state_contract.ipynb").read_text())
    for cell in broken["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            cell["source"] = "def validate_handoff_state(:\n"
    (tmp_path / "03_handoff_state_contract.ipynb").write_text(json.dumps(broken))
    with pytest.raises(notebook_runtime.LearnerFunctionMissing, match="syntax error"):
        notebook_runtime.load_learner_functions(
            "03_handoff_state_contract", ["validate_handoff_state"], search=[tmp_path]
        )


def test_find_learner_notebook_names_the_file_that_is_loaded(tmp_path, root):
    found = notebook_runtime.find_learner_notebook(
        "03_handoff_state_contract", search=[root / "solutions"]
    )
    assert found == root / "solutions" / "03_handoff_state_contract.ipynb"
    # the folder searched first wins, as in load_learner_functions
    copy = tmp_path / "03_handoff_state_contract.ipynb"
    copy.write_text((root / "notebooks" / "03_handoff_state_contract.ipynb").read_text())
    assert (
        notebook_runtime.find_learner_notebook(
            "03_handoff_state_contract", search=[tmp_path, root / "solutions"]
        )
        == copy
    )
    with pytest.raises(notebook_runtime.LearnerFunctionMissing, match="Could not find"):
        notebook_runtime.find_learner_notebook("99_no_such_notebook", search=[tmp_path])


# ---------------------------------------------------------------- matching renamed notebooks


def test_renamed_notebooks_are_matched(tmp_path):
    from autograde.matching import match_notebooks, normalize

    assert normalize("Copy of 02_total_vs_exposed_time") == "02_total_vs_exposed_time"
    assert normalize("02_total_vs_exposed_time (1)") == "02_total_vs_exposed_time"
    assert normalize("02_total_vs_exposed_time-Copy1") == "02_total_vs_exposed_time"
    names = ("01_a", "02_b")
    (tmp_path / "Copy of 01_a.ipynb").write_text("{}")
    (tmp_path / "02_b.ipynb").write_text("{}")
    (tmp_path / "02_b (1).ipynb").write_text("{}")
    (tmp_path / "mine.ipynb").write_text(
        json.dumps({"cells": [{"metadata": {"nbgrader": {"grade_id": "x"}}}]})
    )
    chosen, notes = match_notebooks(tmp_path, names, {"01_a": {"y"}, "02_b": {"z"}})
    assert chosen["01_a"].name == "Copy of 01_a.ipynb"
    assert chosen["02_b"].name == "02_b.ipynb", "the exact name wins over a copy"
    assert any("ignored mine.ipynb" in n for n in notes)


# ---------------------------------------------------------------- before submitting: which file is
# checked


def _release_copy(root, tmp_path, name, as_name, broken=False):
    """A copy of release notebook ``name`` saved as ``as_name`` in tmp_path (its answer cell's
    metadata dropped, as a platform does, when ``broken``)."""
    nb = json.loads((root / "notebooks" / f"{name}.ipynb").read_text())
    if broken:
        next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution"))[
            "metadata"
        ] = {}
    path = tmp_path / as_name
    path.write_text(json.dumps(nb))
    return path


@pytest.fixture
def no_frontend(monkeypatch):
    """No Jupyter session name, no VS Code file name, not Colab: what a plain test process is."""
    import IPython

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    monkeypatch.setattr(notebook_runtime, "_colab_notebook", lambda: None)


def test_renamed_copies_are_recognised_by_their_grade_ids(root, tmp_path):
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        assert integrity.identify_notebook(json.loads(path.read_text())) == path.stem
    assert integrity.identify_notebook({"cells": []}) is None
    assert (
        integrity.identify_notebook(
            {"cells": [{"metadata": {"nbgrader": {"grade_id": "elsewhere"}}}]}
        )
        is None
    )
    assert integrity.identify_notebook({"not": "a notebook"}) is None


def test_terminal_check_of_a_renamed_file_gives_a_verdict_not_a_traceback(root, tmp_path):
    import subprocess

    _release_copy(root, tmp_path, "01_what_can_overlap", "Copy of 01.ipynb")
    _release_copy(root, tmp_path, "03_handoff_state_contract", "mine.ipynb", broken=True)
    (tmp_path / "notes.ipynb").write_text(json.dumps({"cells": [], "metadata": {}}))
    env = {**__import__("os").environ, "PYTHONPATH": str(root)}

    def run(*names):
        done = subprocess.run(
            [sys.executable, "-m", "tools.notebook_runtime", *names],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.returncode, done.stdout + done.stderr

    rc, out = run("Copy of 01.ipynb")
    assert rc == 0 and "Traceback" not in out, out
    assert "recognised as 01_what_can_overlap" in out and "all 5 graded cells are intact" in out, (
        out
    )
    rc, out = run("mine.ipynb")
    assert (
        rc == 1
        and "recognised as 03_handoff_state_contract" in out
        and "lost its grading metadata" in out
    ), out
    rc, out = run("notes.ipynb", "absent.ipynb")
    assert rc == 1 and "Traceback" not in out, out
    assert "notes.ipynb" in out and "not a notebook of this course" in out and "grade ids" in out, (
        out
    )
    assert "there is no file absent.ipynb" in out, out


def test_in_notebook_check_reads_the_running_copy_that_jupyter_names(
    root, tmp_path, monkeypatch, no_frontend, capsys
):
    name = "02_total_vs_exposed_time"
    _release_copy(root, tmp_path, name, f"{name}.ipynb")  # the original: intact
    # the one being edited
    _release_copy(root, tmp_path, name, f"Copy of {name}.ipynb", broken=True)
    monkeypatch.chdir(tmp_path)  # a kernel runs in its notebook's folder
    # relative to the server's root
    monkeypatch.setenv("JPY_SESSION_NAME", f"course/Copy of {name}.ipynb")
    problems = notebook_runtime.check_submission(name)
    out = capsys.readouterr().out
    assert len(problems) == 1 and "lost its grading metadata" in problems[0], out
    assert out.startswith(f"✗ Copy of {name}.ipynb"), out
    # an absolute path to the original
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / f"{name}.ipynb"))
    assert notebook_runtime.check_submission(name) == []
    assert capsys.readouterr().out.startswith(f"✓ {name}.ipynb"), "the running original is checked"


def test_in_notebook_check_reads_the_file_vscode_names(
    root, tmp_path, monkeypatch, no_frontend, capsys
):
    import IPython

    name = "03_handoff_state_contract"
    _release_copy(root, tmp_path, name, f"{name}.ipynb")
    elsewhere = tmp_path / "drafts"
    elsewhere.mkdir()
    copy = _release_copy(root, elsewhere, name, f"{name} (1).ipynb", broken=True)

    class Shell:
        user_ns = {"__vsc_ipynb_file__": str(copy)}

    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    monkeypatch.chdir(tmp_path)
    problems = notebook_runtime.check_submission(name)
    assert len(problems) == 1 and capsys.readouterr().out.startswith(f"✗ {name} (1).ipynb")


def test_in_notebook_check_warns_when_it_cannot_read_the_running_notebook(
    root, tmp_path, monkeypatch, no_frontend, capsys
):
    name = "04_decode_start_gate"
    _release_copy(root, tmp_path, name, f"{name}.ipynb")
    monkeypatch.chdir(tmp_path)
    # named, not on this disk
    monkeypatch.setenv("JPY_SESSION_NAME", f"/somewhere/else/Copy of {name}.ipynb")
    assert notebook_runtime.check_submission(name) == []
    out = capsys.readouterr().out
    assert out.startswith(f"⚠ CHECKED {name}.ipynb, BUT THIS NOTEBOOK IS Copy of {name}.ipynb"), out
    assert "python -m tools.notebook_runtime" in out

    monkeypatch.delenv("JPY_SESSION_NAME")  # a frontend that names nothing, and two copies here
    _release_copy(root, tmp_path, name, f"{name}-Copy1.ipynb", broken=True)
    notebook_runtime.check_submission(name)
    out = capsys.readouterr().out
    assert (
        out.startswith("⚠ 2 copies of this notebook")
        and f"{name}-Copy1.ipynb" in out
        and f"checked {name}.ipynb" in out
    ), out

    (tmp_path / f"{name}-Copy1.ipynb").unlink()  # one file, no frontend name: nothing to warn about
    notebook_runtime.check_submission(name)
    assert capsys.readouterr().out.startswith(f"✓ {name}.ipynb")


def test_in_notebook_check_names_an_unknown_course_name(tmp_path, monkeypatch, no_frontend):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="not a notebook of this course"):
        notebook_runtime.check_submission("99_nothing", tmp_path / "absent.ipynb")
