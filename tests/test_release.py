"""The release is generated, in sync, stripped and leak-free; the environment files agree."""
import json
import re
import subprocess
import tomllib

import nbformat
import pytest

from autograde.course import Course
from autograde.leaks import scan_learner_tree, scan_texts, secret_lines
from autograde.release import release_differences


@pytest.mark.slow
def test_release_is_in_sync_with_solutions():
    assert release_differences(Course.load()) == []


def test_release_detects_a_stale_notebook(root, tmp_path, monkeypatch):
    course = Course.load()
    copy = tmp_path / "course"
    for part in ("solutions", "notebooks"):
        (copy / part).mkdir(parents=True)
        for p in (root / part).glob("*.ipynb"):
            (copy / part / p.name).write_bytes(p.read_bytes())
    nb = json.loads((copy / "notebooks" / "04_decode_start_gate.ipynb").read_text())
    nb["cells"][0]["source"] = ["# edited by hand\n"]
    (copy / "notebooks" / "04_decode_start_gate.ipynb").write_text(json.dumps(nb))
    stale = Course(copy, course.assignment, course.notebooks)
    assert release_differences(stale) == ["notebooks/04_decode_start_gate.ipynb is stale: run `python -m autograde release`"]


def test_learner_tree_leaks_nothing():
    assert scan_learner_tree(Course.load()) == []


def test_leak_scan_can_fail():
    course = Course.load()
    secrets = secret_lines(course)
    assert len(secrets) > 50
    some_answer = next(line for line, where in secrets.items() if "solution" in where)
    assert scan_texts({"x": f"def f():\n    {some_answer}\n"}, secrets)
    assert scan_texts({"y": "### BEGIN HIDDEN TESTS"}, secrets)


def test_committed_notebooks_have_no_outputs(root):
    tracked = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=root, capture_output=True, text=True).stdout.split()
    if not tracked:  # not a git checkout (an unpacked bundle): check what is there
        tracked = [str(p.relative_to(root)) for p in root.glob("*/*.ipynb")]
    assert tracked
    for name in tracked:
        nb = json.loads((root / name).read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            assert not cell.get("outputs") and cell.get("execution_count") is None, f"{name} has outputs"


def test_every_notebook_follows_the_course_skeleton(root):
    for path in sorted((root / "solutions").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        headings = [line for c in nb["cells"] if c["cell_type"] == "markdown" for line in "".join(c["source"]).splitlines() if line.startswith("#")]
        assert re.match(r"^# \d\d\. .+ \| .+", headings[0]), f"{path.name}: title 'NN. English | 中文'"
        for section in ("Overview | 本节导读", "Objectives | 学习目标", "Prerequisites | 前置阅读", "Reflection | 思考", "Summary | 小结", "Further reading | 相关阅读"):
            assert any(section in h for h in headings), f"{path.name} lacks '{section}'"
        grade_cells = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
        assert grade_cells, path.name
        for cell in grade_cells:
            source = "".join(cell["source"])
            assert source.startswith('"""'), f"{path.name}: a test cell starts with a one-line docstring"
            assert "### BEGIN HIDDEN TESTS" in source, f"{path.name}: every graded cell has hidden tests"
            last = [line for line in source.splitlines() if line.strip()][-1]
            assert last.strip() == "### END HIDDEN TESTS"


def test_environment_yml_matches_pyproject(root):
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    pins = {re.split(r"[=<>]", d)[0].lower(): d for d in pyproject["project"]["dependencies"]}
    env = (root / "environment.yml").read_text()
    listed = {m.group(1).lower(): m.group(0) for m in re.finditer(r"^\s+- ([A-Za-z0-9_.-]+)([=<>!].*)?$", env, re.M)}
    for name, spec in pins.items():
        assert name in listed, f"environment.yml lacks {name}"
        assert listed[name].strip().lstrip("- ").replace(" ", "") == spec.replace(" ", ""), f"{name}: {listed[name]!r} vs {spec!r}"
    assert re.search(r"python\s*[>=]=\s*3\.11", env)


def test_hidden_tests_follow_the_ideas_format(root):
    """Every hidden region declares its ideas, and their points add up to the cell's."""
    from autograde.course import Course
    from autograde.ideas import check_course

    assert check_course(Course.load(root).source_paths()) == []


def test_every_graded_idea_has_a_public_check(root):
    """A learner can see every rule that earns points: each idea a hidden test grades is named by at
    least one public check (``@checks.case(idea=...)``). The one exception is ``many_cases``, a
    randomized comparison of rules the public checks already state, worth at most half a point."""
    from autograde.ideas import load, public_ideas, split_hidden

    for path in sorted((root / "solutions").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if not meta.get("grade") or meta.get("solution"):
                continue
            public, hidden = split_hidden(cell.source)
            spec = load(hidden, meta["grade_id"], meta["points"])
            graded = {i.id for i in spec.ideas}
            assert graded - {"many_cases"} <= public_ideas(public), f"{meta['grade_id']}: no public check for {graded - public_ideas(public)}"
            assert all(i.points <= 0.5 for i in spec.ideas if i.id == "many_cases")
            assert public_ideas(public) <= graded, f"{meta['grade_id']}: public checks name ideas that are not graded"
