"""A learner's live folder in the exchange's inbound/, raced against the intake as a learner on a
hub can race it: tests/grader/term/test_intake_live.py.

- ``Watcher``: inotify on a folder (the kernel's own notice that a file in it was opened; any user
  may watch their own folder), through ctypes, so that the learner's side reacts to the intake
  reading it.
- ``swap``: the learner's move once the intake has opened a file of theirs: their folder renamed
  away and a symbolic link to a folder the grader can read (the course's ``solutions/``) put under
  its name. Run as its own process: ``python tests/live_exchange.py swap FOLDER TARGET DONE``.
- ``hold_after_first_open``: the intake made to wait, after it first opens a file of the learner's
  folder, until the learner's process says it has swapped (a line on the FIFO ``DONE``). That pause
  stands for the seconds that copying a large sparse file of the learner's took in the review, so
  the race is lost or won by the intake's design, never by the machine's speed.
- ``python tests/live_exchange.py grade FOLDER DONE -- ARGS``: ``python -m autograde ARGS`` with
  that pause.
- ``sparse``: a file of an apparent size that takes no disk (``truncate``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
import subprocess
import sys
import time
from pathlib import Path

IN_OPEN = 0x20
IN_ACCESS = 0x01
IN_ISDIR = 0x40000000
EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)


class Watcher:
    """inotify on ``folder``: ``wait`` returns the name of the first file opened in it."""

    def __init__(self, folder: Path, mask: int = IN_OPEN | IN_ACCESS):
        self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if self.libc.inotify_add_watch(self.fd, os.fsencode(folder), mask) < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder}")

    def wait(self, timeout: float) -> str | None:
        """The name of the first file (not the folder itself, which listing it opens) opened or read
        in it."""
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return None
            data, at = os.read(self.fd, 65536), 0
            while at < len(data):
                _wd, mask, _cookie, size = EVENT.unpack_from(data, at)
                name = data[at + EVENT.size : at + EVENT.size + size].rstrip(b"\0")
                at += EVENT.size + size
                if name and not mask & IN_ISDIR:
                    return name.decode("utf-8", "surrogateescape")
        return None

    def close(self) -> None:
        os.close(self.fd)


def swap(folder: Path, target: Path, done: Path, timeout: float = 120.0) -> int:
    """The learner's side: watch ``folder``; when the intake opens a file in it, move the folder
    away and leave a link to ``target`` under its name; say so on ``done``. Prints what it did."""
    watcher = Watcher(folder)
    print("watching", flush=True)
    opened = watcher.wait(timeout)
    watcher.close()
    if opened is None:
        print("nothing was opened", flush=True)
        return 1
    began = time.monotonic()
    os.rename(folder, folder.with_name(folder.name + ".mine"))
    os.symlink(target, folder)
    print(
        f"swapped after {opened} was opened ({(time.monotonic() - began) * 1000:.1f} ms)",
        flush=True,
    )
    with open(done, "w") as fifo:
        fifo.write(f"swapped {opened}\n")
    return 0


def start_swap(folder: Path, target: Path, done: Path) -> subprocess.Popen:
    """The learner's process, started and watching (its watch is in place when this returns)."""
    os.mkfifo(done)
    racer = subprocess.Popen(
        [sys.executable, __file__, "swap", str(folder), str(target), str(done)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert racer.stdout.readline().strip() == "watching", "the learner's watcher did not start"
    return racer


def hold_after_first_open(
    folder_name: str, done: Path, timeout: float = 60.0, patch=setattr
) -> list[str]:
    """Make the intake (this process) wait, after it first opens a file whose path runs through a
    folder named ``folder_name``, until a line arrives on the FIFO ``done``. Returns the list of
    what it heard (filled in then). ``patch``: how ``Source.open`` is replaced (pytest's
    ``monkeypatch.setattr`` in a test)."""
    from autograde.term import source

    real_open = source.Source.open
    heard: list[str] = []

    def open_and_hold(self, entry):
        handle = real_open(self, entry)
        path = getattr(entry.ref, "path", entry.ref)
        if not heard and isinstance(path, Path) and folder_name in path.parts:
            fd = os.open(done, os.O_RDONLY | os.O_NONBLOCK)
            try:
                ready, _, _ = select.select([fd], [], [], timeout)
                line = os.read(fd, 4096).decode() if ready else ""
            finally:
                os.close(fd)
            heard.append(line.strip() or "no word from the learner")
        return handle

    patch(source.Source, "open", open_and_hold)
    return heard


def sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes (its apparent size) that holds no data blocks."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


if __name__ == "__main__":
    if sys.argv[1] == "swap":
        sys.exit(swap(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])))
    if sys.argv[1] == "grade":  # grade FOLDER DONE -- ARGS
        folder_name, done, args = (
            sys.argv[2],
            Path(sys.argv[3]),
            sys.argv[sys.argv.index("--") + 1 :],
        )
        heard = hold_after_first_open(folder_name, done)
        from autograde.cli import main

        code = main(args)
        print(f"intake held: {heard}", flush=True)
        sys.exit(code)
    raise SystemExit(f"unknown command {sys.argv[1]}")
