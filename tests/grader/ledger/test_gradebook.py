"""The course's nbgrader gradebook, on SQLite and on a real PostgreSQL server: what `grade`
writes there equals grades.csv, reruns and resumed batches add no rows, a person's score
survives a regrade and reaches the exports, `nbgrader export` agrees, and the database
password appears in no file and no output. Reflections are manually graded answer cells."""

import csv
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from autograde.course import Course
from autograde.judging.ideas import check_course, check_manual
from autograde.ledger.gradebook import (
    Grade,
    mask_text,
    mask_url,
    password_free,
    read_book,
    write_course_config,
)
from autograde.ledger.layout import Out
from autograde.publish.leaks import secret_lines
from autograde.record.pages import finish_page

from submissions import NOTEBOOKS, RELEASE, SOLUTIONS, build, grade_command, mutate, troubles, write

ROOT = Path(__file__).resolve().parents[3]
ASSIGNMENT = Course.load(ROOT).assignment
REFLECTIONS = {
    n: [
        c.metadata["nbgrader"]["grade_id"]
        for c in nbformat.read(SOLUTIONS / f"{n}.ipynb", 4).cells
        if c.metadata.get("nbgrader", {}).get("grade") and c.metadata["nbgrader"].get("solution")
    ]
    for n in NOTEBOOKS
}
AUTO_POINTS = sum(
    c.metadata["nbgrader"].get("points", 0)
    for n in NOTEBOOKS
    for c in nbformat.read(SOLUTIONS / f"{n}.ipynb", 4).cells
    if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")
)
# TODO points, then one point per reflection answer
MAX_TOTAL = AUTO_POINTS + sum(len(ids) for ids in REFLECTIONS.values())
GRADED = [NOTEBOOKS[0], NOTEBOOKS[2]]  # two quick notebooks keep the class small
STUDENTS = ("ana", "ben", "cho")


# ---------------------------------------------------------------- fast: the cells and the helpers


def test_every_reflection_is_a_manually_graded_answer_with_a_rubric():
    for name in NOTEBOOKS:
        source = nbformat.read(SOLUTIONS / f"{name}.ipynb", 4)
        release = nbformat.read(RELEASE / f"{name}.ipynb", 4)
        for nb, is_release in ((source, False), (release, True)):
            cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
            question = cells[f"reflection_{name[:2]}"]
            assert question.metadata["nbgrader"]["locked"], (
                "graders and learners read the rubric from a read-only cell"
            )
            assert len(REFLECTIONS[name]) >= 2
            assert question.source.count("Graded by a person, 1 point: ½") == len(
                REFLECTIONS[name]
            ), "a rubric per answer"
            assert REFLECTIONS[name] == [
                f"reflection_{name[:2]}_q{q}" for q in range(1, len(REFLECTIONS[name]) + 1)
            ]
            for gid in REFLECTIONS[name]:
                answer = cells[gid]
                meta = answer.metadata["nbgrader"]
                assert answer.cell_type == "markdown"
                assert (meta["grade"], meta["solution"], meta["locked"], meta["points"]) == (
                    True,
                    True,
                    False,
                    1,
                )
                if is_release:
                    assert (
                        "YOUR ANSWER HERE" in answer.source
                        and "BEGIN SOLUTION" not in answer.source
                    )
                else:
                    assert len(answer.source.split("### BEGIN SOLUTION")[1]) > 200, (
                        "a model answer for the grader"
                    )
    assert check_course([SOLUTIONS / f"{n}.ipynb" for n in NOTEBOOKS]) == []


def test_the_manual_cell_check_refuses_a_broken_answer_cell(tmp_path):
    nb = nbformat.read(SOLUTIONS / f"{NOTEBOOKS[0]}.ipynb", 4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "reflection_01_q1":
            cell.source = "*Your answer:*"
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "reflection_01_q2":
            cell.metadata["nbgrader"]["points"] = 0
    nbformat.write(nb, tmp_path / "nb.ipynb")
    problems = check_manual([tmp_path / "nb.ipynb"])
    assert any("reflection_01_q1" in p and "model answer" in p for p in problems)
    assert any("reflection_01_q2" in p and "no points" in p for p in problems)


def test_a_model_answer_is_removed_from_a_feedback_page(tmp_path):
    """The reference answers of the reflections are secrets for the feedback scan."""
    secrets_ = secret_lines(Course.load(ROOT))
    model = next(line for line in secrets_ if line.startswith("They share the H2D copy engine"))
    page = f"<html><body>\n<p>{model}</p>\n<p>my own words</p>\n</body></html>\n"
    written, removed = finish_page(page, secrets_)
    assert removed == 1 and model not in written and "my own words" in written
    assert finish_page(page, secrets_, own={model}) == (page, 0), (
        "a line of the learner's own answer stays"
    )


def test_urls_are_masked_and_stored_without_the_password():
    url = "postgresql://grader:s3cret-pw@db.example:5432/course"
    assert "s3cret-pw" not in mask_url(url) and "***" in mask_url(url)
    assert password_free(url) == "postgresql://grader@db.example:5432/course"
    assert "s3cret-pw" not in mask_text(
        f"could not connect to {url}: password s3cret-pw rejected", url
    )
    assert Grade(auto=None, manual=None, extra=None).score is None
    assert Grade(auto=2.0, manual=0.5, extra=0.25).score == 0.75


def test_a_password_in_the_query_is_masked_and_never_stored(tmp_path):
    url = "postgresql://grader@dbhost:5432/course?password=hunter2&sslmode=require"
    assert (
        "hunter2" not in mask_url(url)
        and "password=***" in mask_url(url)
        and "sslmode=require" in mask_url(url)
    )
    assert password_free(url) == "postgresql://grader@dbhost:5432/course?sslmode=require"
    assert "hunter2" not in mask_text(f"connect to {url} failed: password hunter2 rejected", url)
    # any case of the key, sslpassword and passfile too; a percent-encoded value in any spelling
    url = "postgresql://grader@dbhost/course?PassWord=hun%20t%2Fer2&SSLPASSWORD=k3y-pw&passfile=%2Fsecret%2Fpgpass&application_name=grader"
    for shown in (
        mask_url(url),
        password_free(url),
        mask_text(
            f"{url} | hun t/er2 | hun%20t%2Fer2 | hun+t%2Fer2 | k3y-pw | /secret/pgpass", url
        ),
    ):
        assert not [
            s for s in ("hun t/er2", "hun%20t", "hun+t", "k3y-pw", "pgpass") if s in shown
        ], shown
    assert password_free(url) == "postgresql://grader@dbhost/course?application_name=grader"
    assert mask_text("a percent-encoded p%40ss, or p@ss", "postgresql://grader:p%40ss@db/c") == (
        "a percent-encoded ***, or ***"
    )
    # the files a graded course keeps hold none of it
    master = tmp_path / ".course"
    write_course_config(
        Out(tmp_path),
        "postgresql://grader:pw-one@dbhost/course?password=pw-two",
        master,
        "serving-overlap",
    )
    for name in (".gradebook.json", "nbgrader_config.py"):
        text = (tmp_path / name).read_text()
        assert "pw-one" not in text and "pw-two" not in text and "?password" not in text, text


def test_a_huge_notebook_is_refused_unread_and_a_crowded_folder_is_capped(tmp_path):
    from autograde.grading import Options
    from autograde.ledger.store import fingerprint as _fingerprint
    from autograde.matching import NotebookTooLarge, grade_ids, match_notebooks
    from autograde.model import new_record
    from autograde.run.student import _prepare

    student = tmp_path / "alice"
    student.mkdir()
    name = NOTEBOOKS[0]
    huge = student / f"{name}.ipynb"
    with open(huge, "wb") as handle:  # sparse: 21 MB that cost nothing to write, and are not JSON
        handle.truncate(21 * 1024 * 1024)
    # stat, not parse: _prepare refuses it before any course folder is needed
    with pytest.raises(
        NotebookTooLarge,
        match=r"the file is 21\.0 MB, over the 20 MB limit for a " r"submitted notebook",
    ):
        _prepare(None, None, tmp_path, "alice", new_record("alice", name), huge)
    assert _fingerprint(huge, "d", Options()) != _fingerprint(
        huge, "d", Options(max_notebook_bytes=30 * 1024 * 1024)
    )
    ids = {name: grade_ids(SOLUTIONS / f"{name}.ipynb")}
    assert ids[name] and grade_ids(huge, max_bytes=1024) == set()
    renamed = student / "mine.ipynb"
    shutil.copy(SOLUTIONS / f"{name}.ipynb", renamed)
    # neither is parsed
    assert match_notebooks(student, (name,), ids, max_bytes=1024)[0][name] == huge
    assert "over the" in " ".join(match_notebooks(student, (name,), ids, max_bytes=1024)[1])
    # the exact name still wins; _prepare refuses it
    assert match_notebooks(student, (name,), ids)[0][name] == huge
    # many files: only max_files are looked at, those named like a course notebook first
    for i in range(60):
        (student / f"junk{i:02d}.ipynb").write_text("{}")
    (student / f"Copy of {name}.ipynb").write_text("{}")
    chosen, notes = match_notebooks(student, (name,), ids, max_files=5)
    assert chosen[name] == huge and notes[0].startswith("63 .ipynb files: only 5 were looked at")
    assert sum("junk" in n for n in notes) == 3 and any(
        "Copy of" in n and "renamed" in n for n in notes
    )


def test_export_refuses_a_folder_that_was_never_graded(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "autograde", "export", str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "no gradebook" in proc.stderr


# ---------------------------------------------------------------- slow: a small class, graded


def _pg_bin() -> str | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    if shutil.which("pg_ctl"):
        candidates.append(str(Path(shutil.which("pg_ctl")).parent))
    return next(
        (
            d
            for d in candidates
            if os.access(Path(d) / "pg_ctl", os.X_OK) and os.access(Path(d) / "initdb", os.X_OK)
        ),
        None,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """A throwaway PostgreSQL server in a temporary folder (as the `postgres` user when run as
    root: the server refuses to run as root), with password authentication over TCP."""

    def __init__(self):
        bindir = _pg_bin()
        if bindir is None:
            pytest.skip(
                "PostgreSQL server binaries (initdb, pg_ctl) not found; install "
                "postgresql to run this test"
            )
        import importlib.util

        if importlib.util.find_spec("psycopg") is None:
            pytest.skip(
                "no PostgreSQL driver for SQLAlchemy: install psycopg[binary] (the "
                "instructor extra)"
            )
        self.prefix: list[str] = []
        owner = None
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                pytest.skip("running as root and there is no 'postgres' user to run the server as")
            if not shutil.which("runuser"):
                pytest.skip("running as root and `runuser` is missing")
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.folder = Path(tempfile.mkdtemp(prefix="course-pg-", dir="/tmp"))
        self.password = "pw-" + secrets.token_hex(10)
        (self.folder / "pwfile").write_text(self.password + "\n")
        if owner:
            for path in (self.folder, self.folder / "pwfile"):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        self.bin, self.port = Path(bindir), _free_port()
        self._run(
            "initdb",
            "-D",
            str(self.folder / "data"),
            "-U",
            "grader",
            f"--pwfile={self.folder / 'pwfile'}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.folder / "data"),
            "-l",
            str(self.folder / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1",
            "start",
        )
        self.url = f"postgresql://grader:{self.password}@127.0.0.1:{self.port}/course"
        self._run(
            "createdb", "-h", str(self.folder), "-p", str(self.port), "-U", "grader", "course"
        )

    def _run(self, tool: str, *args: str) -> None:
        proc = subprocess.run(
            [*self.prefix, str(self.bin / tool), *args], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, f"{tool}: {proc.stdout}{proc.stderr}"

    def stop(self) -> None:
        subprocess.run(
            [
                *self.prefix,
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.folder / "data"),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(self.folder, ignore_errors=True)


def _grade(
    subs: Path, out: Path, db: list[str], check: bool = True, **popen
) -> subprocess.CompletedProcess:
    # two workers: the class's students at once (the batch's one gradebook writer keeps the rows
    # whole)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograde",
            "grade",
            str(subs),
            "--out",
            str(out),
            "--workers",
            "2",
            "--cell-timeout",
            "10",
            "--no-progress",
            *db,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _grades(path: Path) -> dict[str, dict[str, str]]:
    with open(path, encoding="utf-8") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle)}


def _counts(url: str) -> dict[str, int]:
    from nbgrader.api import Comment, Grade, Student, SubmittedAssignment, SubmittedNotebook

    from autograde.ledger.gradebook import open_gradebook

    with open_gradebook(url) as gb:
        return {
            model.__name__: gb.db.query(model).count()
            for model in (Student, SubmittedAssignment, SubmittedNotebook, Grade, Comment)
        }


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def graded(request, tmp_path_factory):
    """A class of three graded into one OUT: interrupted after its first notebooks, resumed,
    rerun; then a person scores a reflection and one student is regraded."""
    server = Postgres() if request.param == "postgresql" else None
    try:
        tmp = tmp_path_factory.mktemp(request.param)
        subs, out = tmp / "subs", tmp / "out"
        for name in GRADED:
            write(subs, "ana", name, build(name))  # right answers, reflections written
            write(subs, "ben", name, build(name, fill=False))  # the release, untouched
        write(
            subs,
            "cho",
            GRADED[0],
            build(GRADED[0], mutate("todo0_solution", "reasons.append('shared_state')", "pass")),
        )
        db = ["--db-url", server.url] if server else []
        url = server.url if server else f"sqlite:///{out / 'gradebook.db'}"
        outputs = []
        proc = subprocess.Popen(
            grade_command(subs, out, "--workers", "1", "--cell-timeout", "10", *db),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 300
        while (
            time.monotonic() < deadline
            and len(list((out / ".state").rglob("*.json"))) < 2
            and proc.poll() is None
        ):
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        outputs += proc.communicate(timeout=120)
        interrupted = _counts(url)
        resumed = _grade(subs, out, db)
        after_resume = _counts(url)
        rerun = _grade(subs, out, db)
        after_rerun = _counts(url)
        before_regrade = _grades(out / "grades.csv")
        # a person grades ana's first reflection in formgrader (through the same API)
        from autograde.ledger.gradebook import open_gradebook

        with open_gradebook(url) as gb:
            grade = gb.find_grade("reflection_01_q1", GRADED[0], ASSIGNMENT, "ana")
            grade.manual_score = 0.5
            grade.needs_manual_grade = False
            gb.db.commit()
        shutil.rmtree(out / ".state" / "ana")  # force a regrade of ana
        regrade = _grade(subs, out, db)
        export = subprocess.run(
            [sys.executable, "-m", "autograde", "export", str(out), *db],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert export.returncode == 0, export.stdout + export.stderr
        nbx = tmp / "nbgrader_export.csv"
        env = _env()
        if server:
            # the config in OUT holds the URL without its password
            env["PGPASSWORD"] = server.password
        nbexport = subprocess.run(
            [str(Path(sys.executable).parent / "nbgrader"), "export", "--to", str(nbx)],
            cwd=out,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert nbexport.returncode == 0, nbexport.stdout + nbexport.stderr
        outputs += [
            resumed.stdout,
            resumed.stderr,
            rerun.stdout,
            rerun.stderr,
            regrade.stdout,
            regrade.stderr,
            export.stdout,
            export.stderr,
            nbexport.stdout,
            nbexport.stderr,
        ]
        yield {
            "out": out,
            "url": url,
            "server": server,
            "interrupted": interrupted,
            "after_resume": after_resume,
            "after_rerun": after_rerun,
            "after_regrade": _counts(url),
            "before_regrade": before_regrade,
            "grades": _grades(out / "grades.csv"),
            "final": _grades(out / "final_grades.csv"),
            "nbgrader": {r["student_id"]: r for r in csv.DictReader(open(nbx, encoding="utf-8"))},
            "scores": read_book(url, ASSIGNMENT).grades,
            "outputs": outputs,
            "rerun": rerun.stdout,
            "db": db,
        }
    finally:
        if server:
            server.stop()


@pytest.mark.slow
def test_the_gradebook_holds_what_grades_csv_shows(graded):
    rows, scores = graded["grades"], graded["scores"]
    assert set(rows) == set(scores) == set(STUDENTS)
    for student, row in rows.items():
        for gid, entry in scores[student].items():
            score = entry.score
            assert row[gid] == ("pending" if score is None else f"{score:g}"), (
                student,
                gid,
                entry,
                row[gid],
            )
    # 01 and 03: 3 + 3
    assert rows["ana"]["auto_total"] == "6" and rows["ana"]["pending"] == "3", rows["ana"]
    assert rows["ana"]["reflection_01_q1"] == "0.5" and rows["ana"]["total"] == "6.5"
    assert rows["ben"]["total"] == "0" and rows["ben"]["pending"] == "0", (
        "blank answers are zero, not pending"
    )
    assert (
        0 < float(rows["cho"]["todo0_check_overlap"]) < 3 and rows["cho"]["reflection_03_q1"] == "0"
    ), "03 missing"
    assert all(row["max_total"] == str(MAX_TOTAL) for row in rows.values())


@pytest.mark.slow
def test_reruns_and_resumes_add_no_rows(graded):
    expected = {"Student": 3, "SubmittedAssignment": 3, "SubmittedNotebook": 3 * len(NOTEBOOKS)}
    for stage in ("after_resume", "after_rerun", "after_regrade"):
        counts = graded[stage]
        assert {k: counts[k] for k in expected} == expected, (stage, counts)
        assert counts == graded["after_resume"], stage
    assert graded["interrupted"]["Student"] <= 3
    assert "5 reused from an earlier run" in graded["rerun"], graded["rerun"] + troubles(
        graded["out"]
    )


@pytest.mark.slow
def test_a_regrade_keeps_the_score_a_person_gave(graded):
    before, after = graded["before_regrade"]["ana"], graded["grades"]["ana"]
    assert before["reflection_01_q1"] == "pending" and after["reflection_01_q1"] == "0.5"
    entry = graded["scores"]["ana"]["reflection_01_q1"]
    assert entry.manual == 0.5 and entry.auto is None, "the regrade left the manual score alone"
    # no deadline here: final_total is the total
    changed = {"reflection_01_q1", "total", "pending", "final_total"}
    assert {k: v for k, v in after.items() if k not in changed} == {
        k: v for k, v in before.items() if k not in changed
    }
    assert after["final_total"] == after["total"] and after["late_penalty"] == "0"
    assert (float(after["total"]), int(after["pending"])) == (
        float(before["total"]) + 0.5,
        int(before["pending"]) - 1,
    )
    final = graded["final"]["ana"]
    assert (
        final["reflection_01_q1"] == "0.5"
        and final["manual_total"] == "0.5"
        and final["total"] == "6.5"
    )
    assert final["pending"] == "3" and graded["final"]["ben"]["pending"] == "0"


@pytest.mark.slow
def test_nbgrader_export_agrees_with_grades_csv(graded):
    for student, row in graded["grades"].items():
        theirs = graded["nbgrader"][student]
        assert float(theirs["score"]) == float(row["total"]), (student, theirs, row)
        assert float(theirs["max_score"]) == float(row["max_total"])
        assert float(graded["final"][student]["total"]) == float(row["total"])


@pytest.mark.slow
def test_out_is_a_course_formgrader_can_open(graded):
    """The API behind formgrader sees every submission, its autograded notebooks and what waits for
    a person."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    out = graded["out"]
    for student in STUDENTS:
        for name in GRADED if student != "cho" else GRADED[:1]:
            assert (out / "autograded" / student / ASSIGNMENT / f"{name}.ipynb").is_file()
    previous, env = os.getcwd(), dict(os.environ)
    try:
        os.chdir(out)
        os.environ.update(_env())
        if graded["server"]:
            os.environ["PGPASSWORD"] = graded["server"].password
        config = PyFileConfigLoader("nbgrader_config.py", path=str(out)).load_config()
        api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
        subs = {s["student"]: s for s in api.get_submissions(ASSIGNMENT)}
        assert api.get_assignment(ASSIGNMENT)["num_submissions"] == 3
    finally:
        os.chdir(previous)
        os.environ.clear()
        os.environ.update(env)
    assert all(s["autograded"] for s in subs.values())
    assert subs["ana"]["needs_manual_grade"] and not subs["ben"]["needs_manual_grade"]
    assert subs["ana"]["score"] == float(graded["grades"]["ana"]["total"])


@pytest.mark.slow
def test_the_password_is_in_no_file_and_no_output(graded):
    if not graded["server"]:
        pytest.skip("SQLite has no password")
    password = graded["server"].password.encode()
    leaked = [
        str(p) for p in graded["out"].rglob("*") if p.is_file() and password in p.read_bytes()
    ]
    assert not leaked
    assert not [text for text in graded["outputs"] if graded["server"].password in (text or "")]
    assert "***" in graded["rerun"] or "@127.0.0.1" in graded["rerun"]


@pytest.mark.slow
def test_formgrader_shows_the_course_and_a_grade_given_there_reaches_the_export(graded):
    """The real formgrader (nbgrader's Jupyter server extension) started in OUT: it lists the
    submissions with grades.csv's totals, shows a notebook with the rubric and the judge's ideas,
    and a score a grader enters there comes out of `python -m autograde export`."""
    import json
    import urllib.request

    out, port = graded["out"], _free_port()
    env = _env()
    if graded["server"]:
        env["PGPASSWORD"] = graded["server"].password
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "jupyter"),
            "server",
            "--no-browser",
            "--allow-root",
            f"--port={port}",
            "--ServerApp.token=t0k",
            f"--ServerApp.root_dir={out}",
        ],
        cwd=out,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def call(path: str, body: dict | None = None):
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}",
            headers={"Authorization": "token t0k"},
            data=None if body is None else json.dumps(body).encode(),
            method="GET" if body is None else "PUT",
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.read().decode()

    try:
        for _ in range(600):  # tries, half a second apart: until the server answers, or exits
            try:
                call("/api/status")
                break
            except OSError:
                assert server.poll() is None, (
                    f"the Jupyter server exited ({server.returncode}) before it answered"
                )
                time.sleep(0.5)
        else:
            pytest.fail("the Jupyter server never answered")
        listed = {
            s["student"]: s for s in json.loads(call(f"/formgrader/api/submissions/{ASSIGNMENT}"))
        }
        assert {k: float(v["score"]) for k, v in listed.items()} == {
            k: float(r["total"]) for k, r in graded["grades"].items()
        }
        assert all(s["autograded"] for s in listed.values())
        notebooks = json.loads(
            call(f"/formgrader/api/submitted_notebooks/{ASSIGNMENT}/{GRADED[1]}")
        )
        ana = next(n for n in notebooks if n["student"] == "ana")
        page = call(f"/formgrader/submissions/{ana['id']}/")
        assert (
            "Graded by a person" in page
            and "Graded ideas" in page
            and f"reflection_{GRADED[1][:2]}_q1" in page
        )
        grades = json.loads(call(f"/formgrader/api/grades?submission_id={ana['id']}"))
        target = next(g for g in grades if g["name"] == f"reflection_{GRADED[1][:2]}_q1")
        assert target["auto_score"] is None and target["needs_manual_grade"]
        call(f"/formgrader/api/grade/{target['id']}", {"manual_score": 1})
    finally:
        server.terminate()
        server.wait(timeout=60)
    export = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograde",
            "export",
            str(out),
            "--to",
            str(out / "after.csv"),
            *graded["db"],
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert export.returncode == 0, export.stderr
    row = _grades(out / "after.csv")["ana"]
    assert row[f"reflection_{GRADED[1][:2]}_q1"] == "1"
    assert float(row["total"]) == float(graded["final"]["ana"]["total"]) + 1
    assert int(row["pending"]) == int(graded["final"]["ana"]["pending"]) - 1


@pytest.mark.slow
def test_an_unreachable_database_is_a_clear_error_without_the_password(tmp_path):
    subs = tmp_path / "subs"
    write(subs, "ana", NOTEBOOKS[0], build(NOTEBOOKS[0]))
    url = f"postgresql://grader:hunter2-secret@127.0.0.1:{_free_port()}/course"
    proc = _grade(subs, tmp_path / "out", ["--db-url", url], check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        "cannot open the gradebook" in proc.stderr
        and "hunter2-secret" not in proc.stdout + proc.stderr
    )


@pytest.mark.slow
def test_a_manual_score_on_a_changed_answer_is_marked_review_until_a_person_looks_again(tmp_path):
    from autograde.ledger.gradebook import open_gradebook

    name, gid = GRADED[0], REFLECTIONS[GRADED[0]][0]
    subs, out = tmp_path / "subs", tmp_path / "out"
    url, export_cmd = (
        f"sqlite:///{out / 'gradebook.db'}",
        [sys.executable, "-m", "autograde", "export", str(out)],
    )
    write(subs, "ana", name, build(name))
    _grade(subs, out, [])

    def score(value: float) -> None:  # a person scores the reflection in formgrader (the same API)
        with open_gradebook(url) as gb:
            grade = gb.find_grade(gid, name, ASSIGNMENT, "ana")
            grade.manual_score, grade.needs_manual_grade = value, False
            gb.db.commit()

    score(1.0)
    _grade(subs, out, [])  # nothing changed: reused, the score stands
    row = _grades(out / "grades.csv")["ana"]
    assert row[gid] == "1" and row["needs_review"] == "0", row
    total = float(row["total"])
    write(
        subs,
        "ana",
        name,
        build(name, {gid: "A different answer, written after the grade was given."}),
    )
    _grade(subs, out, [])
    row = _grades(out / "grades.csv")["ana"]
    assert (
        row[gid] == "review" and row["needs_review"] == "1" and float(row["total"]) == total - 1
    ), row
    assert read_book(url, ASSIGNMENT).grades["ana"][gid].needs_manual_grade is True
    _grade(subs, out, [])  # a rerun that reuses the record keeps the flag
    assert _grades(out / "grades.csv")["ana"][gid] == "review"
    export = subprocess.run(export_cmd, capture_output=True, text=True, timeout=300)
    assert (
        export.returncode == 0
        and "WARNING: 1 score(s)" in export.stderr
        and f"ana/{gid}" in export.stderr
    ), export
    final = _grades(out / "final_grades.csv")["ana"]
    assert (
        final[gid] == "review" and final["needs_review"] == "1" and final["manual_total"] == "0"
    ), final
    score(0.5)  # looked at again: counted, no warning
    export = subprocess.run(export_cmd, capture_output=True, text=True, timeout=300)
    final = _grades(out / "final_grades.csv")["ana"]
    assert (
        "WARNING" not in export.stderr and final[gid] == "0.5" and final["needs_review"] == "0"
    ), (export.stderr, final)
