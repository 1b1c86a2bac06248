"""The base of the grader's own errors.

Every exception class of ``autograde/`` derives from :class:`GraderError` (keeping its other
base, ``ValueError`` or ``RuntimeError``, for the callers that catch those), so that the command
line catches one name and says what went wrong (``error: ...``, exit 2) instead of a traceback.
Two classes are not errors but signals, and stay ``BaseException`` so that a learner's
``except Exception`` cannot swallow them: ``judging.judge.RunnerFailed`` and, in the untrusted
runner that imports nothing of the grader, ``judging.runner.CellTimeout``.
"""

from __future__ import annotations


class GraderError(Exception):
    """Something the grader cannot do or use: the instructor's input, a release, a gradebook, a
    worker."""
