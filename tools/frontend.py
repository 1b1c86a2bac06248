"""What the frontend says about the running notebook: its file, when Jupyter or VS Code names it.

A leaf of the runtime (it imports nothing of ``tools``): the language (``i18n``) asks it for the
notebook whose metadata names the edition, and the learner's helpers (``notebook_runtime``) for
the file to check before submitting.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import settings


def running_notebook() -> Path | None:
    """The file of the notebook this kernel runs, when the frontend says: VS Code sets
    ``__vsc_ipynb_file__`` (a full path), Jupyter sets ``__session__`` and ``JPY_SESSION_NAME`` (the
    notebook's path, often relative to the server's root, while the kernel runs in the notebook's
    folder). None outside a notebook, on frontends that say nothing, or when the name given is
    not a file here; see :func:`running_notebook_name` for the name alone."""
    name = running_notebook_name()
    if name is None:
        return None
    given = Path(name).expanduser()
    for candidate in (given, Path.cwd() / given, Path.cwd() / given.name):
        if candidate.suffix == ".ipynb" and candidate.is_file():
            return candidate.resolve()
    return None


def running_notebook_name() -> str | None:
    """The path or name the frontend gives for the running notebook (see :func:`running_notebook`),
    or None."""
    names = []
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            names += [shell.user_ns.get("__vsc_ipynb_file__"), shell.user_ns.get("__session__")]
    except ImportError:
        pass
    names.append(settings.session_name())
    return next(
        (str(n) for n in names if isinstance(n, (str, os.PathLike)) and str(n).endswith(".ipynb")),
        None,
    )
