"""Every output of a mixed class's term, recorded, so that two versions of the grader can be
compared byte for byte (a refactoring's proof that it changed no result, page, table or LMS file).

The class, sent once as a Canvas "Download submissions" zip and once as a Moodle "Download all
submissions" zip (notebooks 01 and 04 of the course):

- ``s01`` on time, both notebooks full; a person scores one of its reflections (0.5 of 1);
- ``s02`` 90 minutes late (two started hours under ``deduct:25%/hour``; Canvas's ``LATE_`` too); a
  person scores one of its reflections (1 of 1), so the penalty is settled on a score a person gave;
- ``s03`` the Chinese edition, one TODO wrong, 30 minutes late (its late lines in Chinese);
- ``s04`` both editions (01 in Chinese, 04 in English), two hours after the deadline inside its
  extension;
- ``s05`` a kernel that dies (``os._exit``) in 04;
- ``s06`` an unreadable notebook (not JSON);
- ``s07`` on the roster, sent nothing;
- ``s08`` no submission time (Canvas marks it ``LATE_``: lateness from the LMS's mark; Moodle:
  unknown);
- ``s09`` renamed files: ``Copy of 04_decode_start_gate.ipynb`` and ``my work.ipynb`` (01, found by
  its cells).

Each source goes through the real commands, in order: ``grade`` (roster, timestamps, extensions, a
deadline and a deduction); a person's scores set through nbgrader's ``Gradebook`` API as
formgrader's handler sets them; ``grade`` again (every result reused, every page rendered again with
those scores); ``export`` as csv, then ``--format canvas`` refused (unknown lateness), then canvas
and moodle with ``--late-unknown least-penalty``; ``feedback`` as zip and in the source's LMS
format; ``report`` in English and in Chinese; ``similarity``. After every command, every file in OUT
(and the command's output) is recorded, masked only where a run must differ:

- the times of the run: ``seconds`` and ``timings`` of each record (``log.jsonl``, ``.state``), the
  seconds ``grade`` prints, the worksheet's ``Last modified (grade)`` (the time of the export); the
  report's timing section reads ``log.jsonl``, so before ``report`` its ``seconds`` and ``timings``
  are set to fixed values (the same in every run);
- the records' ``signature`` (the signing key is made at random in each OUT);
- what the learners' kernels made differently from run to run: each cell's ``execution`` times in
  the page data (``.pages``), and where the kernel sent one stdout stream in two messages, the two
  output areas a page shows for it are joined (a page's text is otherwise compared as it is);
- zips are compared by their members' names and bytes (a member's date is the time the page was
  written);
- nbgrader's ``gradebook.db`` is compared as the rows formgrader shows (its ids are random): each
  grade's scores, each notebook's late penalty, each submission's time and extension, the due date;
- not recorded: the grading master (``.course/``), scratch (``.work/``, ``.sandbox*``, ``.lock``),
  the signing key, the autograded notebooks and the grading logs (outputs of the learners' runs).

Paths are fixed (the term runs in ``<temp>/term-outputs/<source>`` on every run), so no path needs
masking.

    python benchmarks/term_outputs.py record DIR [--root TREE]  # TREE: the grader (default: here)
    python benchmarks/term_outputs.py compare DIR_A DIR_B
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

NB1, NB4 = "01_what_can_overlap", "04_decode_start_gate"
DEADLINE = dt.datetime(2026, 12, 20, 16, 0, tzinfo=dt.UTC)
POLICY = "deduct:25%/hour"
STUDENTS = [f"s0{i}" for i in range(1, 10)]
NAMES = {s: f"Learner {s.upper()}" for s in STUDENTS}
# minutes from the deadline
OFFSETS = {"s01": -60, "s02": 90, "s03": 30, "s04": 120, "s05": -20, "s06": -10, "s09": -5}
LATE_MARK = {"s02", "s08"}  # Canvas's LATE_
MANUAL = {("s01", NB1, "reflection_01_q1"): 0.5, ("s02", NB4, "reflection_04_q1"): 1.0}
SKIPPED = (
    ".course/",
    ".work/",
    ".sandbox",
    ".lock",
    ".state/.key",
    "autograded/",
    "logs/",
    ".probe",
)
RUN_KEYS = ("seconds", "timings", "signature")
WORK = Path(tempfile.gettempdir()) / "term-outputs"
# one stdout stream the kernel sent in two messages: two output areas on a page (joined before
# comparing)
SPLIT_STREAM = (
    '</pre>\n</div>\n</div>\n\n<div class="output_area">\n\n    <div class="prompt"></div>\n\n\n'
    '<div class="output_subarea output_stream output_stdout output_text">\n<pre>'
)


# ---------------------------------------------------------------- the class


def _files(student: str) -> list[tuple[str, bytes]]:
    """(file name, bytes) of what ``student`` sent."""
    import nbformat

    from submissions import MISTAKES, build, insert_after, mutate

    def data(nb) -> bytes:
        return nbformat.writes(nb).encode()

    full1, full4 = data(build(NB1)), data(build(NB4))
    wrong = next(m for m in MISTAKES if m[0] == "w4_strict_deadline")
    dies = insert_after(build(NB4), "todo4_solution", "import os\nos._exit(1)")
    for cell in dies.cells:
        if cell.source == "import os\nos._exit(1)":
            cell.id = "oracle-exit"  # a new cell's id is random
    return {
        "s01": [(f"{NB1}.ipynb", full1), (f"{NB4}.ipynb", full4)],
        "s02": [(f"{NB4}.ipynb", full4)],
        "s03": [(f"{NB4}.ipynb", data(build(NB4, mutate(*wrong[2:5]), edition="zh")))],
        "s04": [(f"{NB1}.ipynb", data(build(NB1, edition="zh"))), (f"{NB4}.ipynb", full4)],
        "s05": [(f"{NB4}.ipynb", data(dies))],
        "s06": [(f"{NB4}.ipynb", b"this is not a notebook {")],
        "s07": [],
        "s08": [(f"{NB4}.ipynb", full4)],
        "s09": [(f"Copy of {NB4}.ipynb", full4), ("my work.ipynb", full1)],
    }[student]


def _csvs(base: Path, lms: dict[str, str]) -> list[str]:
    """The roster, the timestamps and the extensions; returns grade's options for them."""
    (base / "roster.csv").write_text(
        "student_id,lms_id,name,email\n"
        + "".join(f"{s},{lms[s]},{NAMES[s]},{s}@example.org\n" for s in STUDENTS),
        encoding="utf-8",
    )
    times = "".join(
        f"{s},{(DEADLINE + dt.timedelta(minutes=m)).isoformat()}\n" for s, m in OFFSETS.items()
    )
    (base / "timestamps.csv").write_text("student_id,submitted_at\n" + times, encoding="utf-8")
    (base / "extensions.csv").write_text(
        f"student_id,deadline\ns04,{(DEADLINE + dt.timedelta(days=1)).isoformat()}\n",
        encoding="utf-8",
    )
    return [
        "--roster", str(base / "roster.csv"), "--timestamps", str(base / "timestamps.csv"),
        "--extensions", str(base / "extensions.csv"), "--deadline", DEADLINE.isoformat(),
        "--late-policy", POLICY,
    ]  # fmt: skip


def canvas(base: Path) -> tuple[Path, dict[str, str]]:
    lms = {s: str(1000 + i) for i, s in enumerate(STUDENTS, start=1)}
    archive, attachment = base / "canvas.zip", 5000
    with zipfile.ZipFile(archive, "w") as zf:
        for student in STUDENTS:
            for name, data in _files(student):
                attachment += 1
                late = "LATE_" if student in LATE_MARK else ""
                zf.writestr(
                    zipfile.ZipInfo(
                        f"learner{student}_{late}{lms[student]}_{attachment}_{name}",
                        (2026, 12, 20, 10, 0, 0),
                    ),
                    data,
                )
    return archive, lms


def moodle(base: Path) -> tuple[Path, dict[str, str]]:
    lms = {s: str(2000 + i) for i, s in enumerate(STUDENTS, start=1)}
    archive = base / "moodle.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for student in STUDENTS:
            for name, data in _files(student):
                zf.writestr(
                    zipfile.ZipInfo(
                        f"{NAMES[student]}_{lms[student]}_assignsubmission_file/{name}",
                        (2026, 12, 20, 10, 0, 0),
                    ),
                    data,
                )
    return archive, lms


SOURCES = {"canvas": canvas, "moodle": moodle}


# ---------------------------------------------------------------- the term, through the real
# commands


def _command(root: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(root), "LLM_ALGO_PROJECT_ROOT": str(root)}
    run = subprocess.run(
        [sys.executable, "-m", "autograde", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    said = f"$ autograde {' '.join(args)}\nexit {run.returncode}\n{run.stdout}{run.stderr}"
    return re.sub(r"in \d+(\.\d+)? s\b", "in <s> s", said)


def _score_as_formgrader(out: Path) -> None:
    """A person's scores, set as formgrader's GradeHandler.put sets them (nbgrader's Gradebook
    API)."""
    from nbgrader.api import Gradebook

    url = json.loads((out / ".gradebook.json").read_text(encoding="utf-8"))["db_url"]
    assignment = json.loads((out / ".gradebook.json").read_text(encoding="utf-8"))["assignment"]
    with Gradebook(url, "serving-overlap") as book:
        for (student, notebook, cell), score in MANUAL.items():
            grade = book.find_grade(cell, notebook, assignment, student)
            grade.manual_score = score
            grade.needs_manual_grade = grade.manual_score is None and grade.auto_score is None
        book.db.commit()


def _fixed_times(out: Path) -> None:
    """log.jsonl with fixed ``seconds`` and ``timings`` (the report's timing section reads them)."""
    lines = (out / "log.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    for n, record in enumerate(records):
        if "seconds" in record:
            record["seconds"] = float(n + 1)
        if "timings" in record:
            record["timings"] = {"autograde": float(n + 1)}
    (out / "log.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )


def steps(root: Path, source: str, base: Path):
    """(name, what the command said) after each command of the term; OUT is ``base/out``."""
    archive, _ = SOURCES[source](base)
    options = _csvs(base, _)
    out = base / "out"
    limits = [
        "--no-progress",
        "--workers",
        "2",
        "--cell-timeout",
        "120",
        "--notebook-timeout",
        "900",
    ]
    yield "grade", _command(root, "grade", str(archive), "--out", str(out), *limits, *options)
    _score_as_formgrader(out)
    yield "regrade", _command(root, "grade", str(archive), "--out", str(out), *limits, *options)
    roster = ["--roster", str(base / "roster.csv")]
    yield "export-csv", _command(root, "export", str(out))
    yield (
        "export-refused",
        _command(root, "export", str(out), "--format", "canvas", "--assignment-id", "77", *roster),
    )
    least = ["--late-unknown", "least-penalty"]
    yield (
        "export-canvas",
        _command(
            root, "export", str(out), "--format", "canvas", "--assignment-id", "77", *least, *roster
        ),
    )
    yield "export-moodle", _command(root, "export", str(out), "--format", "moodle", *least, *roster)
    yield "feedback-zip", _command(root, "feedback", str(out), "--format", "zip")
    yield f"feedback-{source}", _command(root, "feedback", str(out), "--format", source)
    _fixed_times(out)
    yield "report-en", _command(root, "report", str(out))
    yield "report-zh", _command(root, "report", str(out), "--language", "zh")
    yield "similarity", _command(root, "similarity", str(out))


# ---------------------------------------------------------------- what is recorded


def _masked_json(data):
    if isinstance(data, dict):
        return {k: _masked_json(v) for k, v in data.items() if k not in RUN_KEYS}
    return data


def _gradebook_rows(path: Path) -> bytes:
    """The gradebook as formgrader shows it, by names (nbgrader's ids are random)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    queries = {
        "assignment": "SELECT name, duedate FROM assignment ORDER BY name",
        "submission": "SELECT s.student_id, a.name, s.timestamp, s.extension FROM "
        "submitted_assignment s "
        "JOIN assignment a ON a.id = s.assignment_id ORDER BY s.student_id",
        "notebook": "SELECT s.student_id, n.name, sn.late_submission_penalty FROM "
        "submitted_notebook sn "
        "JOIN submitted_assignment s ON s.id = sn.assignment_id JOIN notebook n ON n.id = "
        "sn.notebook_id ORDER BY 1, 2",
        "grade": "SELECT s.student_id, n.name, c.name, g.auto_score, g.manual_score, "
        "g.extra_credit, g.needs_manual_grade FROM grade g "
        "JOIN submitted_notebook sn ON sn.id = g.notebook_id JOIN submitted_assignment s "
        "ON s.id = sn.assignment_id "
        "JOIN notebook n ON n.id = sn.notebook_id JOIN base_cell c ON c.id = g.cell_id "
        "ORDER BY 1, 2, 3",
    }
    try:
        found = {name: [list(row) for row in db.execute(query)] for name, query in queries.items()}
    finally:
        db.close()
    return json.dumps(found, indent=1, default=str).encode()


def _page_data(data: bytes) -> bytes:
    """Page data without the kernel's execution times, its stdout streams joined as nbformat joins
    them."""
    found = json.loads(data)
    for cell in found.get("notebook", {}).get("cells", []):
        cell.get("metadata", {}).pop("execution", None)
        joined: list = []
        for output in cell.get("outputs", []):
            if (
                joined
                and output.get("output_type") == "stream" == joined[-1].get("output_type")
                and output["name"] == joined[-1]["name"]
            ):
                joined[-1]["text"] = "".join((joined[-1]["text"], output["text"]))
            else:
                joined.append(output)
        if "outputs" in cell:
            cell["outputs"] = joined
    return json.dumps(found, ensure_ascii=False, sort_keys=True).encode()


def _page(data: bytes) -> bytes:
    return data.decode("utf-8").replace(SPLIT_STREAM, "").encode("utf-8")


def _worksheet(data: bytes) -> bytes:
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    if rows and "Last modified (grade)" in rows[0]:
        at = rows[0].index("Last modified (grade)")
        for row in rows[1:]:
            row[at] = "<the export's time>"
    buffer = io.StringIO(newline="")
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue().encode()


def recorded(out: Path) -> dict[str, bytes]:
    """{path in OUT: bytes as compared} of every file OUT holds, masked as the module says."""
    found: dict[str, bytes] = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        name = path.relative_to(out).as_posix()
        if name.startswith(SKIPPED) or name.endswith(".tmp"):
            continue
        data = path.read_bytes()
        if name == "gradebook.db":
            found[name + " (rows)"] = _gradebook_rows(path)
        elif name.endswith(".zip"):
            with zipfile.ZipFile(path) as zf:
                for member in sorted(zf.namelist()):
                    found[f"{name}!{member}"] = (
                        _page(zf.read(member)) if member.endswith(".html") else zf.read(member)
                    )
        elif name == "log.jsonl":
            found[name] = b"".join(
                json.dumps(_masked_json(json.loads(line)), ensure_ascii=False).encode() + b"\n"
                for line in data.splitlines()
            )
        elif name.startswith(".state/") and name.endswith(".json"):
            found[name] = json.dumps(_masked_json(json.loads(data)), sort_keys=True).encode()
        elif name.startswith(".pages/"):
            found[name] = _page_data(data)
        elif name.startswith("feedback/") and name.endswith(".html"):
            found[name] = _page(data)
        elif name.endswith("moodle_worksheet.csv"):
            found[name] = _worksheet(data)
        else:
            found[name] = data
    return found


def record(target: Path, root: Path) -> None:
    """Run each source's term with the grader in ``root``; keep each step's files in ``target``."""
    manifest: dict[str, dict[str, str]] = {}
    blobs = target / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    for source in SOURCES:
        base = WORK / source
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        for step, said in steps(root, source, base):
            files = {
                "(what the command said)": said.replace(str(base), "<base>").encode(),
                **recorded(base / "out"),
            }
            key = f"{source}/{step}"
            manifest[key] = {}
            for name, data in files.items():
                digest = hashlib.sha256(data).hexdigest()
                (blobs / digest).write_bytes(data)
                manifest[key][name] = digest
            print(f"{key}: {len(files)} files; {said.splitlines()[1]}", flush=True)
    (target / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")


def compare(a: Path, b: Path) -> int:
    """Every step's files in ``a`` against ``b``: the same names, the same bytes. Prints each
    difference."""
    import difflib

    left, right = (json.loads((d / "manifest.json").read_text(encoding="utf-8")) for d in (a, b))
    differences = 0
    for step in sorted(set(left) | set(right)):
        one, two = left.get(step, {}), right.get(step, {})
        for name in sorted(set(one) | set(two)):
            if one.get(name) == two.get(name):
                continue
            differences += 1
            if name not in one or name not in two:
                print(f"{step}: {name} only in {a if name in one else b}")
                continue
            old, new = ((d / "blobs" / h).read_bytes() for d, h in ((a, one[name]), (b, two[name])))
            print(f"{step}: {name} differs ({len(old)} and {len(new)} bytes)")
            try:
                lines = difflib.unified_diff(
                    old.decode().splitlines(), new.decode().splitlines(), lineterm="", n=1
                )
                print("\n".join(line[:300] for line in list(lines)[2:40]))
            except UnicodeDecodeError:
                pass
    steps_compared = len(set(left) & set(right))
    files = sum(len(left[s]) for s in set(left) & set(right))
    print(
        f"{steps_compared} steps, {files} files compared: "
        + ("byte-identical" if not differences else f"{differences} difference(s)")
    )
    return 1 if differences else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("target", type=Path)
    rec.add_argument(
        "--root", type=Path, default=ROOT, help="the tree whose grader runs (default: this one)"
    )
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("a", type=Path)
    cmp_.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.action == "record":
        record(args.target.resolve(), args.root.resolve())
        return 0
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
