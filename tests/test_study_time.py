"""Each notebook's expected time is said in four places (its header, course.toml, both READMEs) and
comes from one method (benchmarks/estimate_study_time.py, described in docs/learners.md): the four
agree, and each stays within a few minutes of what the method gives for the notebook as it is now,
so a notebook that grows or shrinks by a quarter of an hour cannot keep its old time."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
# stated times are rounded to 5 minutes, and Run All (under a minute each) is left out here
TOLERANCE_MIN = 6


def _estimator():
    spec = importlib.util.spec_from_file_location(
        "estimate_study_time", ROOT / "benchmarks" / "estimate_study_time.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stated() -> dict[str, dict[str, int]]:
    """{notebook: {where: minutes}} from the four places that state it."""
    manifest = tomllib.loads((ROOT / "course.toml").read_text(encoding="utf-8"))["notebooks"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    readme_zh = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    stated = {}
    for nb in manifest:
        name, number = nb["name"], nb["name"][:2]
        header = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4).cells[0].source
        found = {
            "course.toml": nb["minutes"],
            "header": int(re.search(r"Expected time: about (\d+) minutes", header).group(1)),
            "README.md": int(
                re.search(rf"^\| {number} \|.*\| (\d+) min \|$", readme, re.M).group(1)
            ),
            "README.zh-CN.md": int(
                re.search(rf"^\| {number} \|.*\| (\d+) 分钟 \|$", readme_zh, re.M).group(1)
            ),
        }
        stated[name] = found
    return stated


def test_every_place_states_the_same_time():
    for name, found in _stated().items():
        assert len(set(found.values())) == 1, f"{name}: the expected time differs between {found}"


@pytest.mark.parametrize("name", list(_stated()))
def test_the_stated_time_follows_the_method(name):
    est = _estimator()
    minutes = est.estimate_minutes(est.counts(name))["total"]
    stated = _stated()[name]["course.toml"]
    assert abs(stated - minutes) <= TOLERANCE_MIN, (
        f"{name}: stated {stated} min, but the method gives {minutes:.0f} min for the "
        "notebook as it is now: "
        "run `python benchmarks/estimate_study_time.py` and update the header, "
        "course.toml and both READMEs"
    )
