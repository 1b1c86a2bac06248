"""The command line's own rules: one base for the grader's errors, said as ``error: ...`` with exit
2."""

from __future__ import annotations

import importlib
import inspect
import logging
import pkgutil

import pytest

import autograde
from autograde import cli
from autograde.errors import GraderError
from autograde.model import GiB, MiB, Options
from autograde.publish.release import ReleaseFailed

# Signals, not errors: BaseExceptions so that a learner's ``except Exception`` cannot swallow them
SIGNALS = {"autograde.judging.judge.RunnerFailed", "autograde.judging.runner.CellTimeout"}


def grader_exceptions() -> dict[str, type]:
    """Every exception class defined in a module of autograde/ (nbgrader's configuration file and
    the entry point are not modules to import)."""
    found = {}
    for info in pkgutil.walk_packages(autograde.__path__, "autograde."):
        if info.name in ("autograde.nbgrader_config", "autograde.__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
            ):
                found[f"{info.name}.{name}"] = value
    return found


def test_every_grader_exception_derives_from_one_base():
    found = grader_exceptions()
    assert len(found) >= 15, sorted(found)
    assert SIGNALS <= set(found), "the two signals moved: update SIGNALS and autograde/errors.py"
    loose = sorted(
        name
        for name, cls in found.items()
        if not issubclass(cls, GraderError) and name not in SIGNALS and cls is not GraderError
    )
    assert not loose, f"derive these from autograde.errors.GraderError: {loose}"
    assert not any(issubclass(found[name], Exception) for name in SIGNALS)


def test_a_grader_error_is_said_with_exit_2_not_a_traceback(monkeypatch, capsys):
    def fails(course, args):
        raise ReleaseFailed("nbgrader generate_assignment failed:\nno such notebook")

    monkeypatch.setattr(cli, "cmd_release", fails)
    assert cli.main(["release"]) == cli.EXIT_UNUSABLE
    err = capsys.readouterr().err
    assert err.startswith("error: nbgrader generate_assignment failed") and "Traceback" not in err


def test_an_error_that_is_not_the_graders_still_raises(monkeypatch):
    def breaks(course, args):
        raise KeyError("a bug")

    monkeypatch.setattr(cli, "cmd_release", breaks)
    with pytest.raises(KeyError):
        cli.main(["release"])


def test_warnings_go_to_stderr_as_the_commands_said_them(capsys):
    cli.configure_logging()
    cli.configure_logging()  # once per process, however often main runs
    logging.getLogger("autograde.grading").warning("grading WITHOUT the sandbox")
    logging.getLogger("autograde.cli").info("note: the least late penalty was taken for ana")
    logging.getLogger("autograde.cli").error("not a database URL")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "WARNING: grading WITHOUT the sandbox\nnote: the least late penalty "
        "was taken for ana\nerror: not a database URL\n"
    )


def test_grade_defaults_are_the_models_options():
    parser = cli.build_parser()
    assert cli.grading_options(parser.parse_args(["grade", "subs", "--out", "out"])) == Options()
    given = cli.grading_options(
        parser.parse_args(
            ["grade", "subs", "--out", "out", "--memory-limit", "0.5", "--max-notebook-mb", "3"]
        )
    )
    assert (given.memory_limit, given.max_notebook_bytes) == (GiB // 2, 3 * MiB)
    with pytest.raises(GraderError, match="--scheduler"):
        cli.grading_options(
            parser.parse_args(["grade", "subs", "--out", "out", "--tls-cert", "c.pem"])
        )


def test_choices_come_from_the_modules_that_own_them():
    from autograde.term import registry
    from tools.i18n import EDITIONS

    choices = {
        (command, action.dest): tuple(action.choices)
        for command, sub in cli.build_parser()._subparsers._group_actions[0].choices.items()
        for action in sub._actions
        if action.choices
    }
    assert choices[("grade", "layout")] == tuple(registry.layouts())
    assert choices[("export", "format")] == (registry.PLAIN_EXPORT, *registry.export_formats())
    assert choices[("feedback", "format")] == tuple(registry.handback_formats())
    assert choices[("report", "language")] == EDITIONS
