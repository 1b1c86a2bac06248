"""The signed record store: each notebook's record in ``OUT/.state``, signed with a key kept there (readable
by the instructor only), and reused only when it is for the very same file and its signature verifies."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path

from tools.project_runtime import write_json_atomic

_KEYS: dict[Path, bytes] = {}


def signing_key(out: Path) -> bytes:
    """The secret that signs saved records (kept in OUT/.state, readable by the instructor only).
    Made before any worker starts (under the run's lock), then read once."""
    if out not in _KEYS:
        path = out / ".state" / ".key"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(os.urandom(32))
        _KEYS[out] = path.read_bytes()
    return _KEYS[out]


def _signature(out: Path, record: dict) -> str:
    body = json.dumps({k: v for k, v in record.items() if k not in ("signature", "cached")}, sort_keys=True)
    return hmac.new(signing_key(out), body.encode(), hashlib.sha256).hexdigest()


def save_record(out: Path, record: dict, seconds: float) -> dict:
    record["seconds"] = round(seconds, 2)
    record["signature"] = _signature(out, record)
    write_json_atomic(out / ".state" / record["student_id"] / f"{record['notebook']}.json", record)
    return record


def cached_record(out: Path, student: str, notebook: str, fingerprint: str) -> dict | None:
    """A saved record, when it is for this very file and its signature verifies."""
    path = out / ".state" / student / f"{notebook}.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("fingerprint") != fingerprint:
        return None
    return record if hmac.compare_digest(str(record.get("signature", "")), _signature(out, record)) else None
