"""The CSV files the grader writes (``grades.csv``, ``final_grades.csv``), safe to open in a
spreadsheet.

A cell that starts with ``=``, ``+``, ``-`` or ``@`` (or a tab or carriage return before one)
is read by Excel, LibreOffice and Google Sheets as a formula, and a formula can fetch URLs or
run commands on the instructor's machine (OWASP: CSV injection). Any such text cell is written
with a leading ``'``, which spreadsheets show as text; numbers are written as numbers.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value):
    """``value`` as a CSV cell: a float as its shortest form (``1``, ``0.25``), a text that a
    spreadsheet would read as a formula behind a ``'``, anything else as it is."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def write_csv(path: Path, fields: list[str], rows: list[dict]) -> None:
    """Write ``rows`` under the header ``fields``, every cell through ``spreadsheet_safe``,
    atomically (a reader never sees half a table)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writerow({field: spreadsheet_safe(field) for field in fields})
        for row in rows:
            writer.writerow({key: spreadsheet_safe(value) for key, value in row.items()})
    os.replace(tmp, path)
