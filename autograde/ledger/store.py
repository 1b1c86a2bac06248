"""The signed record store: each notebook's record in OUT (``Out.record``), signed with a key kept
beside them (``Out.key``, readable by the instructor only), and reused only when it is for the very
same file and its signature verifies."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path

from tools.project_runtime import write_json_atomic

from ..model import Options, Record
from .layout import Out

_KEYS: dict[Path, bytes] = {}


def signing_key(out: Path) -> bytes:
    """The secret that signs saved records (kept in OUT, readable by the instructor only).
    Made before any worker starts (under the run's lock), then read once."""
    if out not in _KEYS:
        path = Out(out).key
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(os.urandom(32))
        _KEYS[out] = path.read_bytes()
    return _KEYS[out]


def _signature(out: Path, data: dict) -> str:
    """The signature of a record's JSON (every key but the signature and the reuse mark)."""
    body = json.dumps(
        {k: v for k, v in data.items() if k not in ("signature", "cached")}, sort_keys=True
    )
    return hmac.new(signing_key(out), body.encode(), hashlib.sha256).hexdigest()


def save_record(out: Path, record: Record, seconds: float) -> Record:
    """``record`` with its seconds and signature, saved in OUT (as JSON: ``Record.to_json``)."""
    record = record.but(seconds=round(seconds, 2), signature=None, cached=False)
    record = record.but(signature=_signature(out, record.to_json()))
    write_json_atomic(Out(out).record(record.student_id, record.notebook), record.to_json())
    return record


def cached_record(out: Path, student: str, notebook: str, fingerprint: str) -> Record | None:
    """A saved record, when it is for this very file and its signature verifies (checked on the JSON
    as saved, so a record an earlier version wrote is reused as it is)."""
    path = Out(out).record(student, notebook)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("fingerprint") != fingerprint:
        return None
    if not hmac.compare_digest(str(data.get("signature", "")), _signature(out, data)):
        return None
    try:
        return Record.from_json(data)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------- what decides reuse


def _file_digest(path: Path, max_bytes: int) -> str:
    """sha256 of a submitted file's bytes (of its size and time when it is over ``max_bytes``: it is
    refused unread anyway)."""
    h = hashlib.sha256()
    stat = path.stat()
    if stat.st_size > max_bytes:
        h.update(f"too large|{stat.st_size}|{stat.st_mtime_ns}".encode())
    else:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def submission_digest(chosen: dict[str, Path | None], max_bytes: int) -> str:
    """The digest of a student's whole submission: every notebook found for them, by name and bytes.
    It salts the hidden random inputs of each of their notebooks, so what one grading showed of
    them is no use in the next once anything in the submission changes, and it is part of every
    notebook's fingerprint, so a changed submission is graded again whole (the same submission
    always gets the same inputs and the same grade)."""
    h = hashlib.sha256()
    for notebook in sorted(chosen):
        path = chosen[notebook]
        h.update(
            f"{notebook}|{_file_digest(path, max_bytes) if path is not None else '-'}\n".encode()
        )
    return h.hexdigest()


def fingerprint(path: Path, digest: str, options: Options) -> str:
    """What decides whether a saved record may be reused: the file, the sources and the whole
    submission (``digest``), and every grading limit (tested by
    test_every_grading_limit_is_in_the_fingerprint)."""
    h = hashlib.sha256()
    h.update(_file_digest(path, options.max_notebook_bytes).encode())
    h.update(
        f"{digest}|{options.cell_timeout}|{options.notebook_timeout}|{options.sandbox}|{options.memory_limit}"
        f"|{options.process_limit}|{options.max_notebook_bytes}".encode()
    )
    return h.hexdigest()
