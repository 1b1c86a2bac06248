"""A whole term for a class of 8, from each source the course reads: a Canvas "Download submissions"
zip, a Moodle "Download all submissions" zip (a folder per participant), and nbgrader's exchange
filled by ``nbgrader submit`` itself (one account, each learner under their own ``--student`` id and
cache, which nbgrader allows). The class: full, partial (a TODO wrong), late (Canvas's LATE_ mark
too), resubmitted (two files for one notebook: the newest is full, the older partial), extended (an
extensions CSV), missing (on the roster, sent nothing), a zipped upload (one zip of notebooks) and
one ordinary.

Each source is graded under a deadline and a deduction, handed back and exported; the files are then
read with the importers' own rules as oracles (Canvas's gradebook_importer and re-upload, Moodle's
offline grading worksheet and feedback zip, nbgrader's release_feedback and fetch_feedback), and
every student must carry the same final score in grades.csv, final_grades.csv, the LMS file and the
report."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
from test_export_lms import moodle_import

from autograde.course import Course, exercises
from autograde.ledger.late import parse_policy, penalty_points
from autograde.ledger.layout import Out
from autograde.term.report import build_report

from submissions import MISTAKES, RELEASE, build, mutate, run_grade

pytestmark = pytest.mark.slow
COURSE = Course.load()
ASSIGNMENT = COURSE.assignment
NB = "04_decode_start_gate"
MAX = sum(e.points for e in exercises(COURSE) if e.notebook == NB)
POLICY = "deduct:25%/hour"
DEADLINE = dt.datetime(2026, 12, 20, 16, 0, tzinfo=dt.UTC)
CLASS = ("full", "partial", "late", "resubmitted", "extended", "missing", "zipped", "ordinary")
STUDENTS = {kind: f"s0{i}" for i, kind in enumerate(CLASS, start=1)}
NAMES = {kind: f"{kind.title()} Learner" for kind in CLASS}
SENT = [k for k in CLASS if k != "missing"]
# the times the LMS downloads do not hold (given as the timestamps CSV): late is 90 min late (two
# started hours), extended is two hours after the deadline and a day inside its extension
OFFSETS = {
    "full": -60,
    "partial": -60,
    "late": 90,
    "resubmitted": -30,
    "extended": 120,
    "zipped": -10,
    "ordinary": -5,
}
EXCHANGE_COURSE = "course101"


def _partial():
    row = next(m for m in MISTAKES if m[0] == "w4_strict_deadline")
    return build(NB, mutate(row[2], row[3], row[4]))


def _bytes(nb) -> bytes:
    return nbformat.writes(nb).encode()


def _zip_of(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _files(kind: str) -> list[tuple[str, bytes]]:
    """What the learner of ``kind`` sent, oldest first: (file name, bytes)."""
    full = _bytes(build(NB))
    if kind == "partial":
        return [(f"{NB}.ipynb", _bytes(_partial()))]
    if kind == "resubmitted":
        return [(f"{NB}.ipynb", _bytes(_partial())), (f"{NB}.ipynb", full)]
    if kind == "zipped":
        return [("notebooks.zip", _zip_of({f"{NB}.ipynb": full}))]
    return [(f"{NB}.ipynb", full)]


def _write_csvs(
    base: Path, lms_ids: dict[str, str], deadline: dt.datetime, times: dict[str, dt.datetime] | None
) -> list[str]:
    """The roster, the extensions CSV and (when given) the timestamps CSV; returns grade's options
    for them."""
    roster = base / "roster.csv"
    rows = "".join(
        f"{STUDENTS[k]},{lms_ids.get(k, '')},{NAMES[k]},{STUDENTS[k]}@example.org\n" for k in CLASS
    )
    roster.write_text("student_id,lms_id,name,email\n" + rows, encoding="utf-8")
    extensions = base / "extensions.csv"
    later = (deadline + dt.timedelta(days=1)).isoformat()
    extensions.write_text(
        f"student_id,deadline\n{STUDENTS['extended']},{later}\n", encoding="utf-8"
    )
    options = [
        "--roster",
        str(roster),
        "--extensions",
        str(extensions),
        "--deadline",
        deadline.isoformat(),
        "--late-policy",
        POLICY,
    ]
    if times is not None:
        stamps = base / "timestamps.csv"
        stamps.write_text(
            "student_id,submitted_at\n"
            + "".join(f"{STUDENTS[k]},{t.isoformat()}\n" for k, t in times.items()),
            encoding="utf-8",
        )
        options += ["--timestamps", str(stamps)]
    return options


def _canvas(base: Path) -> dict:
    """Canvas's download: flat ``<sortable name>_[LATE_]<user id>_<attachment id>_<file>``, a
    resubmitted file renamed ``-1`` with a newer attachment id; no times (the timestamps CSV gives
    them)."""
    ids = {k: str(1000 + i) for i, k in enumerate(CLASS, start=1)}
    members, attachment = {}, 5000
    kept = {}
    for kind in SENT:
        sortable = re.sub(r"\W", "", f"{NAMES[kind].split()[1]}{NAMES[kind].split()[0]}".lower())
        for n, (name, data) in enumerate(_files(kind)):
            attachment += 1
            shown = name if n == 0 else name.replace(".ipynb", f"-{n}.ipynb")
            late = "LATE_" if kind == "late" else ""
            members[f"{sortable}_{late}{ids[kind]}_{attachment}_{shown}"] = data
            kept[STUDENTS[kind]] = str(attachment)  # the newest file's attachment
    archive = base / "canvas.zip"
    archive.write_bytes(_zip_of(members))
    times = {k: DEADLINE + dt.timedelta(minutes=OFFSETS[k]) for k in SENT}
    return {
        "source": archive,
        "options": _write_csvs(base, ids, DEADLINE, times),
        "ids": ids,
        "attachments": kept,
        "deadline": DEADLINE,
    }


def _moodle(base: Path) -> dict:
    """Moodle's download with "download in folders": ``<Full Name>_<participant
    id>_assignsubmission_file/``; a resubmission is a second file in the folder, newer by its zip
    date; no times (the CSV gives them)."""
    ids = {k: str(2000 + i) for i, k in enumerate(CLASS, start=1)}
    archive = base / "moodle.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for kind in SENT:
            folder = f"{NAMES[kind]}_{ids[kind]}_assignsubmission_file"
            for n, (name, data) in enumerate(_files(kind)):
                shown = name if n == 0 else name.replace(".ipynb", f" ({n}).ipynb")
                zf.writestr(
                    zipfile.ZipInfo(f"{folder}/{shown}", date_time=(2026, 12, 20, 10 + n, 0, 0)),
                    data,
                )
    times = {k: DEADLINE + dt.timedelta(minutes=OFFSETS[k]) for k in SENT}
    return {
        "source": archive,
        "options": _write_csvs(base, ids, DEADLINE, times),
        "ids": ids,
        "deadline": DEADLINE,
    }


def nbgrader(cwd: Path, *args: str, exchange: Path, cache: Path) -> subprocess.CompletedProcess:
    argv = [
        sys.executable,
        "-m",
        "nbgrader",
        *args,
        f"--course={EXCHANGE_COURSE}",
        f"--Exchange.root={exchange}",
        f"--Exchange.cache={cache}",
    ]
    run = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return run


def _exchange(base: Path) -> dict:
    """nbgrader's exchange filled by ``nbgrader fetch_assignment`` and ``nbgrader submit`` run as
    each learner (``--student``, a cache of their own). The times are nbgrader's own (now): the
    deadline falls between the on-time submissions and the late and extended ones, a second
    apart."""
    exchange = base / "exchange"
    outbound = exchange / EXCHANGE_COURSE / "outbound" / ASSIGNMENT
    outbound.mkdir(parents=True)
    (exchange / EXCHANGE_COURSE / "inbound").mkdir()
    (exchange / EXCHANGE_COURSE / "feedback").mkdir()
    (outbound / f"{NB}.ipynb").write_bytes((RELEASE / f"{NB}.ipynb").read_bytes())
    learners = {}

    def submit(kind: str) -> None:
        learner, cache = base / "learners" / kind, base / "caches" / kind
        learner.mkdir(parents=True, exist_ok=True)
        student = f"--student={STUDENTS[kind]}"
        if not (learner / ASSIGNMENT).is_dir():
            nbgrader(
                learner, "fetch_assignment", ASSIGNMENT, student, exchange=exchange, cache=cache
            )
        learners[kind] = (learner, cache)
        for name, data in _files(kind):
            for old in (learner / ASSIGNMENT).glob("*.ipynb"):
                old.unlink()
            (learner / ASSIGNMENT / name).write_bytes(data)
            nbgrader(learner, "submit", ASSIGNMENT, student, exchange=exchange, cache=cache)
            # each submission its own timestamp (nbgrader's folder names differ by it)
            time.sleep(0.01)

    for kind in ("full", "partial", "resubmitted", "zipped", "ordinary"):
        submit(kind)
    time.sleep(1.0)
    deadline = dt.datetime.now(dt.UTC)
    time.sleep(1.0)
    for kind in ("late", "extended"):
        submit(kind)
    source = exchange / EXCHANGE_COURSE / "inbound"
    return {
        "source": source,
        "options": _write_csvs(base, {}, deadline, None),
        "learners": learners,
        "exchange": exchange,
        "deadline": deadline,
    }


SOURCES = {"canvas": _canvas, "moodle": _moodle, "exchange": _exchange}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autograde", *args], capture_output=True, text=True, timeout=600
    )


def _table(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


@pytest.fixture(scope="module", params=list(SOURCES))
def term(request, tmp_path_factory):
    name = request.param
    base = tmp_path_factory.mktemp(name)
    made = SOURCES[name](base)
    out = base / "out"
    graded = run_grade(made["source"], out, *made["options"])
    return {"name": name, "base": base, "out": out, "graded": graded, **made}


def _grades(out: Path) -> dict[str, dict]:
    return {r["student_id"]: r for r in _table(out / "grades.csv")[1]}


def _expected(term) -> dict[str, float]:
    """Each student's final score by the class's design, from the full notebook's total: the partial
    notebook scores less; the late one loses its started hours; missing scores nothing."""
    rows = _grades(term["out"])
    full = float(rows[STUDENTS["full"]]["total"])
    # the mistake costs points: the cases differ
    assert float(rows[STUDENTS["partial"]]["total"]) < full
    expected = {STUDENTS[k]: full for k in SENT}
    expected[STUDENTS["partial"]] = float(rows[STUDENTS["partial"]]["total"])
    expected[STUDENTS["missing"]] = 0.0
    # the exchange's learner is a second or so late: one started hour
    late_seconds = 90 * 60 if term["name"] != "exchange" else 1.0
    expected[STUDENTS["late"]] = full - penalty_points(
        parse_policy(POLICY), late_seconds, full, MAX
    )
    return expected


def test_every_student_is_graded_with_the_final_score_the_class_was_built_for(term):
    rows = _grades(term["out"])
    assert sorted(rows) == sorted(STUDENTS.values()), term["graded"].stdout
    expected = _expected(term)
    assert {s: float(r["final_total"]) for s, r in rows.items()} == pytest.approx(expected)
    # after the deadline, inside the extension
    assert rows[STUDENTS["extended"]]["late_penalty"] == "0"
    assert float(rows[STUDENTS["late"]]["late_penalty"]) > 0
    intake = json.loads((term["out"] / "intake.json").read_text(encoding="utf-8"))
    assert intake["missing"] == [STUDENTS["missing"]]
    if term["name"] == "canvas":
        assert intake["late_in_lms"] == {STUDENTS["late"]: [NB]}
        assert (
            intake["students"][STUDENTS["resubmitted"]]["attachments"][NB]
            == term["attachments"][STUDENTS["resubmitted"]]
        )


def test_the_lms_file_final_grades_and_the_report_carry_the_same_final_score(term):
    out, expected = term["out"], _expected(term)
    proc = _cli("export", str(out))
    assert proc.returncode == 0, proc.stderr
    final = {r["student_id"]: float(r["final_total"]) for r in _table(out / "final_grades.csv")[1]}
    assert final == pytest.approx(expected)
    roster = term["options"][term["options"].index("--roster") + 1]
    if term["name"] == "canvas":
        proc = _cli("export", str(out), "--format", "canvas", "--roster", roster)
        # no id: refused, never a new assignment
        assert proc.returncode == 2 and "NEW assignment" in proc.stderr
        proc = _cli(
            "export", str(out), "--format", "canvas", "--assignment-id", "77", "--roster", roster
        )
        assert proc.returncode == 0, proc.stderr
        header, table = _table(out / "canvas_grades.csv")
        # gradebook_importer.rb: the student columns, then "Title (id)" matched by its own pattern
        assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
        match = re.match(r"\A(.*)\s\((\d+)\)\Z", header[-1])
        assert match and match[2] == "77" and match[1] == ASSIGNMENT
        by_id = {term["ids"][k]: STUDENTS[k] for k in CLASS}
        assert {by_id[r["ID"]]: float(r[header[-1]]) for r in table} == pytest.approx(expected)
    elif term["name"] == "moodle":
        proc = _cli("export", str(out), "--format", "moodle", "--roster", roster)
        assert proc.returncode == 0, proc.stderr
        header, sheet = _table(out / "moodle_worksheet.csv")
        participants = {term["ids"][k]: STUDENTS[k] for k in CLASS}
        assert moodle_import(header, sheet, participants, MAX, {}) == pytest.approx(expected)
        missing = next(
            r for r in sheet if r["Identifier"] == f"Participant {term['ids']['missing']}"
        )
        assert missing["Status"] == "No submission"
    else:
        proc = _cli(
            "export", str(out), "--format", "canvas", "--assignment-id", "77", "--roster", roster
        )
        # the exchange gave no Canvas ids: named, not guessed
        assert proc.returncode == 2 and "Canvas user id" in proc.stderr
    report = build_report(COURSE, out)
    assert report.scores.source == "final_grades.csv"
    assert report.scores.final.mean == pytest.approx(
        round(sum(expected.values()) / len(expected), 3)
    )
    grades = _grades(out)
    assert report.late.penalty_points == pytest.approx(
        sum(float(r["total"]) - expected[s] for s, r in grades.items())
    )


def test_nbgraders_gradebook_holds_the_deadline_and_the_extension(term):
    """nbgrader's own API: the assignment's duedate is the deadline (naive UTC), the extended
    student's submission carries the extension, and nbgrader's own lateness says who was late."""
    from autograde.ledger import gradebook

    assert _cli("export", str(term["out"])).returncode == 0
    with gradebook.open_gradebook(gradebook.resolve_url(Out(term["out"]), None)) as book:
        found = book.find_assignment(ASSIGNMENT)
        assert found.duedate == term["deadline"].astimezone(dt.UTC).replace(tzinfo=None)
        extended = book.find_submission(ASSIGNMENT, STUDENTS["extended"])
        assert extended.extension == dt.timedelta(days=1)
        if term["name"] == "exchange":  # the one source whose times nbgrader itself wrote
            assert book.find_submission(ASSIGNMENT, STUDENTS["late"]).total_seconds_late > 0
            assert (
                extended.total_seconds_late == 0
                and book.find_submission(ASSIGNMENT, STUDENTS["full"]).total_seconds_late == 0
            )


def test_the_hand_back_reaches_each_student_by_the_lms_rules(term):
    out = term["out"]
    pages = {
        s: sorted(p.name for p in (out / "feedback" / s).glob("*.html"))
        for s in STUDENTS.values()
        if (out / "feedback" / s).is_dir()
    }
    assert set(pages) >= {STUDENTS[k] for k in SENT}
    proc = _cli("feedback", str(out), "--format", term["name"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if term["name"] == "canvas":
        with zipfile.ZipFile(out / "handback" / "canvas_feedback.zip") as zf:
            names = zf.namelist()
        # Canvas's re-upload: the first two all-digit "_" fields are the user id and the
        # submission's attachment
        read = {}
        for name in names:
            digits = [f for f in name.split("_") if f.isdigit()]
            read.setdefault(digits[0], set()).add(digits[1])
        students = {term["ids"][k]: STUDENTS[k] for k in CLASS}
        assert {students[u]: a for u, a in read.items()} == {
            s: {a} for s, a in term["attachments"].items()
        }
    elif term["name"] == "moodle":
        with zipfile.ZipFile(out / "handback" / "moodle_feedback.zip") as zf:
            names = zf.namelist()
        # importziplib.php: a path part split on "_" (at most five parts) is
        # fullname_participantid_plugintype_pluginname, the participant id numeric; the rest of the
        # path is the feedback file's name
        taken = {}
        for name in names:
            parts = name.split("/")[0].split("_", 4)
            assert (
                len(parts) >= 4
                and parts[1].isdigit()
                and parts[2] == "assignsubmission"
                and parts[3] == "file"
            ), name
            taken.setdefault(parts[1], []).append(name.split("/")[-1])
        participants = {term["ids"][k]: STUDENTS[k] for k in CLASS}
        assert {participants[p]: sorted(n) for p, n in taken.items()} == {
            s: pages[s] for s in (STUDENTS[k] for k in SENT)
        }
    else:
        course_folder = out / "handback" / "exchange"
        released = nbgrader(
            course_folder,
            "release_feedback",
            ASSIGNMENT,
            exchange=term["exchange"],
            cache=term["base"] / "instructor-cache",
        )
        assert released.stderr.count("Feedback released to") == len(SENT), released.stderr
        for kind, (learner, cache) in term["learners"].items():
            student = STUDENTS[kind]
            nbgrader(
                learner,
                "fetch_feedback",
                ASSIGNMENT,
                f"--student={student}",
                exchange=term["exchange"],
                cache=cache,
            )
            arrived = {
                p.name: p.read_bytes() for p in (learner / ASSIGNMENT / "feedback").glob("*/*.html")
            }
            # nbgrader finds a page only by a .ipynb of the learner's own submission: the hand-back
            # names them
            if kind == "zipped":
                assert arrived == {} and STUDENTS[kind] in proc.stderr, proc.stderr
                continue
            assert arrived == {
                f"{NB}.html": (out / "feedback" / student / f"{NB}.html").read_bytes()
            }, kind
        # the zipped learner alone is named
        assert re.findall(r"\bs0\d\b", proc.stderr) == [STUDENTS["zipped"]], proc.stderr


def test_no_misconfiguration_exits_0_silently(term):
    out = term["out"]
    other = {"canvas": "moodle", "moodle": "canvas", "exchange": "moodle"}[term["name"]]
    proc = _cli("feedback", str(out), "--format", other)
    # no student came from that LMS
    assert proc.returncode != 0 and other in (proc.stdout + proc.stderr)
    proc = _cli(
        "grade", str(term["source"]), "--out", str(term["base"] / "again"), "--late-policy", POLICY
    )
    assert proc.returncode == 2 and "deadline" in proc.stderr  # a late policy without a deadline


# -- the fixes this term found, each on its own
# ------------------------------------------------------------------------


def test_a_zipped_upload_is_recorded_and_the_exchange_hand_back_names_it(tmp_path):
    """A notebook that came in the student's own zip: the intake records it (``zipped``), and the
    exchange hand-back lists that student, whose page nbgrader's fetch_feedback cannot find (it
    hashes the secret with a .ipynb of the learner's cached submission, and a zip is none); the
    others are handed back as before."""
    from test_intake import NB1, intake, notebook, write_zip

    from autograde.term.handback import hand_back

    members = {
        "doealice_1001_9001_mine.zip": _zip_of({f"{NB1}.ipynb": notebook("alice", NB1)}),
        f"roebob_1002_9002_{NB1}.ipynb": notebook("bob", NB1),
    }
    result = intake(write_zip(tmp_path / "canvas.zip", members), tmp_path)
    assert result.students["1001"]["zipped"] == [NB1] and "zipped" not in result.students["1002"]

    out = tmp_path / "out"
    for student in ("alice", "bob"):
        page = out / "feedback" / student / f"{NB1}.html"
        page.parent.mkdir(parents=True)
        page.write_text(f"<p>{student}</p>")
    sent = {"layout": "exchange", "secret": "s3cret", "timestamp": "2026-12-20 15:00:00.000000 UTC"}
    (out / "intake.json").write_text(
        json.dumps(
            {"layout": "exchange", "students": {"alice": {**sent, "zipped": [NB1]}, "bob": sent}}
        )
    )
    where, info = hand_back(COURSE, out, "exchange")
    assert info.unmatched == ["alice"] and info.zipped == {"alice": [NB1]} and info.students == 1
    assert (
        where / "feedback" / "bob" / ASSIGNMENT / "submission_secret.txt"
    ).read_text() == "s3cret"


def test_the_export_sets_nbgraders_duedate_and_extensions(tmp_path):
    """gradebook.record_duedate through nbgrader's own API: the assignment's duedate (naive UTC),
    each extended student's submission extension, and nbgrader's total_seconds_late computed from
    them."""
    from autograde.ledger import gradebook

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with gradebook.open_gradebook(url) as book:
        book.add_assignment(ASSIGNMENT)
        for student in ("ada", "bob"):
            book.add_student(student)
            # nbgrader builds the submission before adding it to the session
            with book.db.no_autoflush:
                submission = book.add_submission(ASSIGNMENT, student)
            # two hours after the deadline, in naive UTC
            submission.timestamp = dt.datetime(2026, 12, 20, 18, 0)
        book.db.commit()
    # 16:00 UTC
    deadline = dt.datetime(2026, 12, 21, 0, 0, tzinfo=dt.timezone(dt.timedelta(hours=8)))
    assert gradebook.record_duedate(
        url, ASSIGNMENT, deadline, {"bob": deadline + dt.timedelta(days=1)}
    )
    with gradebook.open_gradebook(url) as book:
        assert book.find_assignment(ASSIGNMENT).duedate == dt.datetime(2026, 12, 20, 16, 0)
        ada, bob = (book.find_submission(ASSIGNMENT, s) for s in ("ada", "bob"))
        assert ada.extension is None and bob.extension == dt.timedelta(days=1)
        assert ada.total_seconds_late == 7200 and bob.total_seconds_late == 0
    # nothing changed
    assert not gradebook.record_duedate(
        url, ASSIGNMENT, deadline, {"bob": deadline + dt.timedelta(days=1)}
    )
    assert not gradebook.record_duedate(url, ASSIGNMENT, None)  # no deadline: left as it is


def test_a_canvas_name_ending_in_digits_hands_back_to_its_own_user(tmp_path):
    """Canvas's download writes a sortable name "lory_1001" of user 1002 as lory_1001_1002_<file
    id>_...; its re-upload reads the first two all-digit fields, so the page's name must not start
    that way: each page reaches user 1002 under the file sent for it, and the victim, user 1001,
    gets only her own."""
    from test_handback import canvas_reupload, graded_out
    from test_intake import NB1, notebook
    from test_intake_attacks import NB4, NB6, canvas_class

    from autograde.term.handback import hand_back

    attack = {
        f"lory_1001_1002_5001_{NB6}.ipynb": notebook("lory", NB6),
        f"lory_1001_1002_5002_{NB1}.ipynb": notebook("lory", NB1),
    }
    out = graded_out(tmp_path, canvas_class(attack))
    where, info = hand_back(COURSE, out, "canvas")
    with zipfile.ZipFile(where) as zf:
        read = sorted(canvas_reupload(name) for name in zf.namelist())
    victim = json.loads((out / "intake.json").read_text())["students"]["1001"]["attachments"][NB4]
    assert [r for r in read if r[0] == "1002"] == [("1002", "5001"), ("1002", "5002")]
    assert [r for r in read if r[0] == "1001"] == [("1001", victim)] and info.unmatched == []
