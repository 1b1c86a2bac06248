"""Notebooks that work where learners are: a cloud platform or a Jupyter with only the learner
wheel.

The slow test simulates such a platform: a fresh virtual environment (no system site-packages)
with Jupyter's kernel parts and torch, nothing of this repository; each release notebook copied
into an empty folder and answered; the set-up cell installs the learner wheel from the bundle with
``%pip``; every notebook runs top to bottom. The fast tests cover the pieces one by one.
"""

import io
import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import nbformat
import pytest

from tools import notebook_runtime, project_runtime

from submissions import NOTEBOOKS, build

BOOT_END = "RUNTIME = course_setup()\n"


def wheel_name(root: Path) -> str:
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    return f"{project['name'].replace('-', '_')}-{project['version']}-py3-none-any.whl"


def setup_cell(path: Path) -> str:
    return next(c for c in nbformat.read(path, 4).cells if c.cell_type == "code").source


# ---------------------------------------------------------------- the set-up cell


def test_setup_cells_share_one_bootstrap(root):
    boots = {
        name: setup_cell(root / "solutions" / f"{name}.ipynb").split(BOOT_END)[0]
        for name in NOTEBOOKS
    }
    assert len(set(boots.values())) == 1, "every set-up cell must bootstrap the same way"
    boot = boots[NOTEBOOKS[0]]
    assert f"WHEEL = '{wheel_name(root)}'" in boot, (
        "the set-up cell names the wheel that the bundle builds"
    )
    assert "%pip install" in boot and "NBGRADER_EXECUTION" in boot
    for platform in ("Colab:", "Kaggle:", "local Jupyter:"):
        assert platform in boot, (
            f"the one-line install for {platform} is printed when no wheel is found"
        )


# ---------------------------------------------------------------- results and siblings without a
# course folder


@pytest.fixture
def no_course(tmp_path, monkeypatch):
    """A working directory with no course folder above it, and a runtime not installed in one."""
    monkeypatch.delenv(project_runtime.ROOT_ENV, raising=False)
    monkeypatch.delenv(project_runtime.RESULTS_ENV, raising=False)
    monkeypatch.setattr(
        project_runtime, "__file__", str(tmp_path / "site" / "tools" / "project_runtime.py")
    )
    work = tmp_path / "content"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def test_results_go_next_to_the_notebook_without_a_course_folder(no_course, tmp_path, monkeypatch):
    assert project_runtime.find_project_root() is None
    assert project_runtime.results_dir() == no_course / "results"
    assert (
        "no course folder" in project_runtime.where_results_go()
        and project_runtime.RESULTS_ENV in project_runtime.where_results_go()
    )
    monkeypatch.setenv(project_runtime.RESULTS_ENV, str(tmp_path / "mine"))
    assert (
        project_runtime.results_dir() == (tmp_path / "mine").resolve()
        and (tmp_path / "mine").is_dir()
    )
    assert "is set" in project_runtime.where_results_go()


def test_results_stay_in_the_course_folder(root, monkeypatch):
    monkeypatch.delenv(project_runtime.ROOT_ENV, raising=False)
    monkeypatch.delenv(project_runtime.RESULTS_ENV, raising=False)
    monkeypatch.chdir(root / "notebooks")
    assert project_runtime.results_dir() == root / "benchmarks" / "results"
    assert project_runtime.reference_file("inf_serving_overlap_cpu_reference.json").is_file()


def test_a_wrong_root_variable_is_still_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv(project_runtime.ROOT_ENV, str(tmp_path))
    with pytest.raises(project_runtime.ProjectRootNotFound):
        project_runtime.find_project_root()


def test_notebook_04_finds_its_siblings_in_the_working_folder(no_course, root):
    """On Colab the working folder is /content; platforms rename copies ("Copy of …")."""
    (no_course / "02_total_vs_exposed_time.ipynb").write_bytes(
        (root / "solutions" / "02_total_vs_exposed_time.ipynb").read_bytes()
    )
    (no_course / "Copy of 03_handoff_state_contract.ipynb").write_bytes(
        (root / "solutions" / "03_handoff_state_contract.ipynb").read_bytes()
    )
    funcs = notebook_runtime.load_learner_functions(
        "02_total_vs_exposed_time", ["estimate_handoff"]
    )
    assert funcs["estimate_handoff"](125_000, 1.0, 0.0, 0.0, [])["transfer_ms"] == 1.0
    assert callable(
        notebook_runtime.load_learner_functions(
            "03_handoff_state_contract", ["validate_handoff_state"]
        )["validate_handoff_state"]
    )
    (no_course / "Copy of 03_handoff_state_contract.ipynb").unlink()
    with pytest.raises(notebook_runtime.LearnerFunctionMissing, match="Colab"):
        notebook_runtime.load_learner_functions(
            "03_handoff_state_contract", ["validate_handoff_state"]
        )


def test_an_imports_cell_with_a_magic_still_loads(tmp_path, root):
    nb = json.loads((root / "solutions" / "02_total_vs_exposed_time.ipynb").read_text())
    setup = next(c for c in nb["cells"] if c["cell_type"] == "code")
    assert "%pip" in "".join(setup["source"]), "the set-up cell (tagged imports) holds a %pip line"
    (tmp_path / "02_total_vs_exposed_time.ipynb").write_text(json.dumps(nb))
    assert notebook_runtime.load_learner_functions(
        "02_total_vs_exposed_time", ["estimate_handoff"], search=[tmp_path]
    )


# ---------------------------------------------------------------- before submitting


def test_check_submission_passes_an_intact_notebook_and_names_what_a_platform_broke(
    root, tmp_path, capsys
):
    name = "03_handoff_state_contract"
    path = tmp_path / f"{name}.ipynb"
    path.write_bytes((root / "notebooks" / f"{name}.ipynb").read_bytes())
    assert notebook_runtime.check_submission(name, path) == []
    out = capsys.readouterr().out
    assert "all" in out and "still to do" in out and "todo3_solution" in out, (
        "intact is not finished: the stub is named"
    )
    nbformat.write(build(name), path)  # answered: nothing left to do
    assert (
        notebook_runtime.check_submission(name, path) == []
        and "still to do" not in capsys.readouterr().out
    )
    path.write_bytes((root / "notebooks" / f"{name}.ipynb").read_bytes())
    nb = json.loads(path.read_text())
    answer = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution"))
    test = next(
        c
        for c in nb["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade")
        and not c["metadata"]["nbgrader"].get("solution")
    )
    answer["metadata"] = {}  # what a platform that drops metadata does
    test["metadata"]["nbgrader"]["points"] = 0
    nb["cells"].append(json.loads(json.dumps(test)))  # a copied test cell
    path.write_text(json.dumps(nb))
    problems = notebook_runtime.check_submission(name, path)
    out = capsys.readouterr().out
    assert len(problems) == 3, problems
    assert "lost its grading metadata" in out and "validate_handoff_state" in out
    assert "changed grading metadata (points 3 → 0)" in out and "appears 2 times" in out


def test_check_submission_reads_nothing_while_grading(monkeypatch, tmp_path):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert (
        notebook_runtime.check_submission("02_total_vs_exposed_time", tmp_path / "absent.ipynb")
        == []
    )


def test_check_submission_rejects_an_unknown_notebook(root, tmp_path):
    with pytest.raises(ValueError, match="not a notebook of this course"):
        notebook_runtime.check_submission("99_nothing", tmp_path / "x.ipynb")


# ---------------------------------------------------------------- a cloud platform, simulated

DRIVER = r"""
import os, sys
import nbformat
from nbclient import NotebookClient

path = sys.argv[1]
nb = nbformat.read(path, 4)
NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
               resources={"metadata": {"path": os.path.dirname(path)}}).execute()
nbformat.write(nb, path)
"""

PROBE = """import sys, tools
from tools.project_runtime import find_project_root, reference_file
print('PROBE', sys.prefix, tools.__file__, find_project_root(), \
reference_file('inf_serving_overlap_cpu_reference.json').is_file())"""


# the notebooks that load the learner's functions from earlier ones
SIBLINGS = {
    "04_decode_start_gate": ("02_total_vs_exposed_time", "03_handoff_state_contract"),
    "06_handoff_simulator": ("03_handoff_state_contract", "04_decode_start_gate"),
}


def _errors(nb) -> list[str]:
    return [
        f"{o.ename}: {o.evalue}"
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.output_type == "error"
    ]


def _text(nb) -> str:
    return "".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.output_type == "stream"
    )


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_cloud_platform_with_the_learner_wheel_only(root, tmp_path):
    # the bundle, as a learner downloads it
    pack = tmp_path / "pack.zip"
    proc = subprocess.run(
        [sys.executable, "-m", "autograde", "bundle", "--out", str(pack)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel_arc = f"serving-overlap-course/{wheel_name(root)}"
    with zipfile.ZipFile(pack) as zf:
        assert wheel_arc in zf.namelist(), "the bundle holds the learner wheel"
        wheel_bytes = zf.read(wheel_arc)
    with zipfile.ZipFile(io.BytesIO(wheel_bytes)) as wheel:
        names = wheel.namelist()
        assert not [n for n in names if n.split("/")[0] in ("autograde", "solutions", "tests")], (
            names
        )
        meta = wheel.read(next(n for n in names if n.endswith("/METADATA"))).decode()
        assert "Requires-Dist: torch>=2.1" in meta and "nbgrader" not in meta.lower()

    # a platform's Python: a fresh environment, Jupyter's kernel parts and torch, nothing of this
    # repository
    venv = tmp_path / "platform-env"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "PYTHONPATH",
            "VIRTUAL_ENV",
            "JPY_SESSION_NAME",
            "NBGRADER_EXECUTION",
            project_runtime.ROOT_ENV,
            project_runtime.RESULTS_ENV,
        )
    }
    env.update(
        MPLBACKEND="agg",
        JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
    )
    install = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "torch==2.13.0",
            "ipykernel",
            "nbclient",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    assert (
        subprocess.run(
            [str(python), "-c", "import tools"], env=env, cwd=tmp_path, capture_output=True
        ).returncode
        != 0
    ), "no runtime yet"
    driver = tmp_path / "run_notebook.py"
    driver.write_text(DRIVER)

    def run(folder: Path, name: str, nb, extra_env: dict | None = None):
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.ipynb"
        nbformat.write(nb, path)
        done = subprocess.run(
            [str(python), str(driver), str(path)],
            cwd=folder,
            env={**env, **(extra_env or {})},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return nbformat.read(path, 4)

    setup_only = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(setup_cell(root / "notebooks" / "01_what_can_overlap.ipynb"))
        ]
    )
    # no wheel next to the notebook: a clear error with the one-line installs, nothing installed
    lost = run(tmp_path / "no-wheel", "01_what_can_overlap", setup_only)
    assert any("The course runtime is not installed" in e for e in _errors(lost)), _errors(lost)
    evalue = "".join(_errors(lost))
    assert "Colab:" in evalue and "Kaggle:" in evalue and "local Jupyter:" in evalue
    # while grading, nothing is installed even when the wheel is there
    graded = tmp_path / "grading"
    graded.mkdir()
    (graded / wheel_name(root)).write_bytes(wheel_bytes)
    assert _errors(
        run(graded, "01_what_can_overlap", setup_only, {"NBGRADER_EXECUTION": "autograde"})
    )
    assert (
        subprocess.run(
            [str(python), "-c", "import tools"], env=env, cwd=tmp_path, capture_output=True
        ).returncode
        != 0
    )

    # 01 opened on its own, the wheel uploaded next to it: the set-up cell installs it with %pip
    first = tmp_path / "nb01"
    first.mkdir()
    (first / wheel_name(root)).write_bytes(wheel_bytes)
    ran = {}
    for name in NOTEBOOKS:
        folder = tmp_path / f"nb{name[:2]}"
        # the learner's earlier notebooks sit next to it, as in /content on Colab
        if name in SIBLINGS:
            folder.mkdir()
            for sibling in SIBLINGS[name]:
                nbformat.write(build(sibling), folder / f"{sibling}.ipynb")
        nb = build(name)
        nb.cells.append(nbformat.v4.new_code_cell(PROBE))
        ran[name] = run(folder, name, nb)
        assert _errors(ran[name]) == [], f"{name}: {_errors(ran[name])}"
        text = _text(ran[name])
        assert "hidden tests run at grading" in text, name
        assert "the grader will find every answer" in text, (
            f"{name}: the before-you-submit check passes"
        )
        probe = next(line for line in text.splitlines() if line.startswith("PROBE"))
        prefix, tools_file, found_root, reference = probe.split()[1:5]
        assert Path(prefix) == venv and Path(tools_file).is_relative_to(venv), (
            f"{name}: runtime from {tools_file}, not the wheel"
        )
        assert found_root == "None", f"{name}: a course folder was found at {found_root}"
        assert reference == "True", (
            "the wheel carries the reference measurement that notebook 05 shows"
        )

    # 05 wrote its result where it said: results/ next to the notebook
    text05 = _text(ran["05_cuda_stream_overlap"])
    result = tmp_path / "nb05" / "results" / "inf_serving_overlap_default.json"
    assert result.is_file(), text05
    assert f"Results go to {result.parent}" in text05 and f"wrote {result}" in text05
    assert json.loads(result.read_text(encoding="utf-8"))["run_mode"] == "dry_run"
