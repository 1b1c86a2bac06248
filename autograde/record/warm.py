"""Imported by the worker server alone (``launch.PRELOAD``): what every worker would otherwise make
again on its first notebook is made once, in the server, and shared by every worker forked from it."""

from ..course import Course
from ..publish.release import release_folder
from .exporters import warm_feedback


def _release_notebooks() -> list:
    try:
        from tools.i18n import EDITIONS

        course = Course.load()
        return [path for language in EDITIONS for name in course.notebooks if (path := release_folder(course, language) / f"{name}.ipynb").is_file()]
    except Exception:  # no course found from here: the templates are still made
        return []


warm_feedback(_release_notebooks())
