"""The batch's own machinery, without running a notebook.

A fault of the grader itself (an exception while it drives a student's notebooks, not anything the
submission did) costs nobody a grade when it does not happen again: the student is graded once more,
the notebooks already settled kept. A fault that repeats marks only the notebooks left, and each
fault's traceback is kept in OUT/logs (the student's grading is replaced by a stand-in). The grading
master is built once per state of the sources. A worker forked from the preloaded server starts as a
new interpreter would: its own session, folder, environment and log."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autograde import grading
from autograde.model import Options, new_record
from autograde.publish import master as masters
from autograde.run import student as student_run


def _items(*notebooks: str) -> list[tuple[str, Path, str]]:
    return [(nb, Path(f"{nb}.ipynb"), f"fp-{nb}") for nb in notebooks]


def test_a_fault_that_does_not_repeat_costs_nothing_and_one_that_repeats_only_whats_left(
    tmp_path, monkeypatch
):
    calls: dict[str, list[list[str]]] = {}

    def stand_in(course, master, out, student, items, options, on_done, secrets=None):
        calls.setdefault(student, []).append([item[0] for item in items])
        records = []
        for number, (notebook, _path, _fp) in enumerate(items):
            if number == 1 and (student == "always" or len(calls[student]) == 1):
                raise RuntimeError(f"lost the worker's pipe ({student})")
            records.append(new_record(student, notebook, "graded", ""))
            on_done(records[-1])
        return records

    monkeypatch.setattr(grading, "grade_student", stand_in)
    done, faults = [], []
    by_student = {
        "once": _items("a", "b", "c"),
        "always": _items("a", "b", "c"),
        "fine": _items("a"),
    }
    records, _ = grading.grade_locally(
        None,
        tmp_path,
        tmp_path,
        by_student,
        Options(workers=2),
        done.append,
        lambda s, items, exc: faults.append((s, items, exc)),
        {},
    )
    graded = sorted((r.student_id, r.notebook) for r in records)
    # once: a settled before the fault, b and c in the second try; nothing graded twice
    assert calls["once"] == [["a", "b", "c"], ["b", "c"]]
    assert [("once", nb) for nb in "abc"] == [g for g in graded if g[0] == "once"]
    # always: a settled in the first try, b in the second; only c is left to the fault handler
    assert calls["always"] == [["a", "b", "c"], ["b", "c"]]
    assert [g for g in graded if g[0] == "always"] == [("always", "a"), ("always", "b")]
    assert (
        len(faults) == 1 and faults[0][0] == "always" and [nb for nb, _, _ in faults[0][1]] == ["c"]
    )
    assert "lost the worker's pipe" in str(faults[0][2])
    # every settled notebook reached the batch's callback exactly once
    assert sorted((r.student_id, r.notebook) for r in done) == graded
    # the tracebacks are kept: two for the student whose fault repeated, one for the other
    assert (tmp_path / "logs" / "always" / "grader-faults.log").read_text().count("Traceback") == 2
    once_log = (tmp_path / "logs" / "once" / "grader-faults.log").read_text()
    assert (
        once_log.count("Traceback") == 1
        and "graded once more" in once_log
        and "stand_in" in once_log
    )
    assert not (tmp_path / "logs" / "fine").exists()


def test_one_master_per_state_of_the_sources_copied_into_each_out(tmp_path, monkeypatch):
    """The grading master is generated once per state of the sources (in the course's build folder)
    and copied into each OUT; a changed file, in the shared copy or in an OUT's, is never used."""
    from types import SimpleNamespace

    builds = []

    def fake_build(course, master):
        builds.append(master)
        master.mkdir(parents=True)
        (master / "judge.json").write_text(f'{{"tests": "{course.state}"}}')
        (master / "source").mkdir()
        (master / "source" / "01.ipynb").write_text("{}")

    monkeypatch.setattr(masters, "build_master", fake_build)
    course = SimpleNamespace(root=tmp_path / "course", state="one")
    course.sources_digest = lambda: f"digest-{course.state}"
    course.root.mkdir()
    first = masters.grading_master(course, tmp_path / "out1")
    second = masters.grading_master(course, tmp_path / "out2")
    assert (
        len(builds) == 1
        and (first / "judge.json").read_text()
        == (second / "judge.json").read_text()
        == '{"tests": "one"}'
    )
    # a valid OUT keeps its own
    assert masters.grading_master(course, tmp_path / "out1") == first and len(builds) == 1
    # an OUT's master edited: copied again from the shared one, not rebuilt
    (first / "judge.json").write_text('{"tests": "forged"}')
    assert (
        masters.grading_master(course, tmp_path / "out1") / "judge.json"
    ).read_text() == '{"tests": "one"}' and len(builds) == 1
    # the shared master edited: rebuilt before anyone uses it
    shared = next(p for p in (course.root / ".course_build" / "masters").iterdir() if p.is_dir())
    (shared / "judge.json").write_text('{"tests": "forged"}')
    assert (
        masters.grading_master(course, tmp_path / "out3") / "judge.json"
    ).read_text() == '{"tests": "one"}' and len(builds) == 2
    # new sources: a master of their own; the older one stays while it is among the newest kept
    course.state = "two"
    assert (
        masters.grading_master(course, tmp_path / "out1") / "judge.json"
    ).read_text() == '{"tests": "two"}' and len(builds) == 3
    assert (
        len([p for p in (course.root / ".course_build" / "masters").iterdir() if p.is_dir()]) == 2
    )
    # the newest MASTERS_KEPT states stay; older ones are removed
    for state in ("s3", "s4", "s5", "s6"):
        course.state = state
        masters.grading_master(course, tmp_path / f"out-{state}")
    kept = sorted(
        p.name.split("-nbgrader")[0]
        for p in (course.root / ".course_build" / "masters").iterdir()
        if p.is_dir()
    )
    assert kept == [f"digest-{s}" for s in ("s3", "s4", "s5", "s6")] and masters.MASTERS_KEPT == 4
    # a course folder whose build folder cannot be made: the master is built in OUT itself
    course.root = tmp_path / "other"
    course.root.mkdir()
    (course.root / ".course_build").write_text("a file where the folder would be")
    course.state = "three"
    assert (
        masters.grading_master(course, tmp_path / "out4") / "judge.json"
    ).read_text() == '{"tests": "three"}'
    assert builds[-1] == tmp_path / "out4" / ".course"


def test_a_forked_worker_starts_as_a_new_interpreter_would(tmp_path, monkeypatch):
    """Both ways of starting a worker run the job in the folder, environment and log given, in a
    session of their own, and report its exit status; a missing settings file fails the job."""
    import os

    from autograde.run import launch

    for forked in ("1", "0"):
        monkeypatch.setenv("COURSE_FORKSERVER", forked)
        log_path = tmp_path / f"worker-{forked}.log"
        missing = tmp_path / "no-settings.json"
        with open(log_path, "w", encoding="utf-8") as log:
            worker = launch.start_worker(
                [str(missing), "s1"], tmp_path, {"COURSE_WORKER_PROBE": "yes"}, log_path, log
            )
            assert isinstance(worker, launch.ForkedWorker) == (forked == "1")
            assert worker.wait(timeout=120) == 1 and worker.poll() == 1 and worker.returncode == 1
        text = log_path.read_text(encoding="utf-8")
        assert "FileNotFoundError" in text and str(missing) in text, text
        assert worker.pid != os.getpid()
        from autograde import course

        # registered: Ctrl-C kills it (reap forgets it)
        assert course._LIVE.get(worker.pid) is worker
        course.reap(worker)
        assert worker.pid not in course._LIVE


def _probe(argv: list[str]) -> int:
    """Stands in for the job in a forked worker: writes down what it sees."""
    import json
    import os
    import sys

    print("printed by the probe")
    print("and its errors", file=sys.stderr)
    Path(argv[0]).write_text(
        json.dumps(
            {"cwd": os.getcwd(), "env": dict(os.environ), "sid": os.getsid(0), "pid": os.getpid()}
        )
    )
    return 3


def test_a_forked_worker_has_its_own_session_folder_and_environment(tmp_path):
    import json
    import os

    from autograde.run import launch

    log_path = tmp_path / "probe.log"
    env = {"COURSE_WORKER_PROBE": "yes", "PATH": os.environ["PATH"]}
    process = launch._context().Process(
        target=launch._worker_main,
        args=(
            [str(tmp_path / "seen.json")],
            str(tmp_path),
            env,
            str(log_path),
            f"{__name__}:_probe",
        ),
    )
    process.start()
    process.join(120)
    assert process.exitcode == 3, log_path.read_text()
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert (
        seen["cwd"] == str(tmp_path)
        and seen["env"] == env
        and seen["sid"] == seen["pid"] != os.getsid(0)
    )
    assert (
        "printed by the probe" in log_path.read_text() and "and its errors" in log_path.read_text()
    )


def test_workers_starting_together_never_read_a_half_written_kernelspec(tmp_path, monkeypatch):
    """Every worker of a batch writes the sandbox's kernelspec when it starts; a reader at the same
    moment (another worker's jupyter_client) must always find it whole. The writers here alternate
    two interpreters, so that each write really replaces the file."""
    import json
    import sys
    import threading
    from types import SimpleNamespace

    from autograde.run import sandbox

    # only its home is needed to write the kernelspec
    box = sandbox.Sandbox.__new__(sandbox.Sandbox)
    box.home = tmp_path
    box.write_kernelspec()
    path = next(tmp_path.rglob("kernel.json"))
    stop, broken = threading.Event(), []
    interpreters = [
        SimpleNamespace(executable=sys.executable),
        SimpleNamespace(executable=sys.executable + "-other"),
    ]

    def write(turn: int):
        while not stop.is_set():
            turn += 1
            monkeypatch.setattr(sandbox, "sys", interpreters[turn % 2])
            try:
                box.write_kernelspec()
            except OSError as exc:  # a writer that fails is a failure too
                broken.append(exc)

    writers = [threading.Thread(target=write, args=(n,)) for n in range(2)]
    for thread in writers:
        thread.start()
    try:
        for _ in range(3000):
            try:
                json.loads(path.read_text())
            except (ValueError, FileNotFoundError) as exc:
                broken.append(exc)
    finally:
        stop.set()
        for thread in writers:
            thread.join()
    assert not broken, f"{len(broken)} of 3000 reads found the kernelspec half written or missing"


def test_a_worker_that_dies_before_starting_anything_is_started_once_more(tmp_path, monkeypatch):
    """No learner code runs before a worker starts its first notebook, so a worker that dies then
    failed for the grader's own reasons: one more worker is started before the notebooks are
    marked."""

    class DeadOnArrival:
        pid = 2**22 + 1  # never a live process's id here: nothing may be killed by it

        def poll(self):
            return 1

        def wait(self, timeout=None):
            return 1

    starts, failed = [], []

    def fake_prepare(course, master, out, student, record, path, max_bytes):
        job = out / ".work" / student / record.notebook
        job.mkdir(parents=True)
        return record, job

    def fake_start(argv, cwd, env, log_path, log):
        starts.append(argv)
        log.write("RuntimeError: the worker could not start\n")
        log.flush()
        return DeadOnArrival()

    monkeypatch.setattr(student_run, "_prepare", fake_prepare)
    monkeypatch.setattr(student_run, "start_worker", fake_start)
    entries = [(new_record("s1", nb, "pending", ""), Path(f"{nb}.ipynb")) for nb in ("a", "b")]
    student_run.run_student(
        None, tmp_path, tmp_path, "s1", entries, Options(), lambda *args: None, failed.append
    )
    assert len(starts) == 2, "one more worker after the first died before starting anything"
    assert [r.notebook for r in failed] == ["a", "b"] and all(r.status == "error" for r in failed)
    assert "could not start" in failed[0].detail


# ----------------------------------------------------------------- set-up that waits on nothing


def test_a_new_gradebook_is_stamped_with_the_migration_head_alembic_names(tmp_path, root):
    """The course gradebook's migration stamp is read in process (nbgrader runs `alembic heads`
    in a new Python for it, about a second): it must be what that command prints."""
    import os
    import sqlite3
    import subprocess

    from autograde.course import bin_dir
    from autograde.ledger import gradebook

    with gradebook.open_gradebook(f"sqlite:///{tmp_path / 'fresh.db'}") as book:
        assert book.db is not None
    stamped = (
        sqlite3.connect(tmp_path / "fresh.db")
        .execute("SELECT version_num FROM alembic_version")
        .fetchall()
    )
    # nbgrader's own way, in a new process
    code = "import nbgrader.api as api; print(api.get_alembic_version())"
    env = {**os.environ, "PATH": f"{bin_dir()}{os.pathsep}{os.environ.get('PATH', '')}"}
    printed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()
    assert stamped == [(gradebook.alembic_head(),)] and printed == gradebook.alembic_head()


def test_a_gradebook_prepared_in_the_background_still_refuses_before_grading(tmp_path):
    from autograde.ledger import gradebook

    writer = gradebook.Writer(
        f"sqlite:///{tmp_path / 'no' / 'such' / 'folder' / 'g.db'}",
        tmp_path / "master.db",
        "a",
        wait=False,
    )
    with pytest.raises(gradebook.GradebookError, match="cannot"):
        writer.ready()
    assert not writer._thread.is_alive()


def test_only_a_workers_scratch_gradebooks_skip_waiting_for_the_disk(tmp_path):
    """In a worker, SQLite commits without fdatasync; elsewhere (the course gradebook) SQLite's
    defaults stand: FULL sync (2) and a journal file."""
    import subprocess

    probe = (
        "import sys; from sqlalchemy import create_engine, text\n"
        "def pragmas():\n"
        f"    with create_engine('sqlite:///{tmp_path / 'g.db'}').connect() as c:\n"
        "        return [c.execute(text(f'PRAGMA {p}')).scalar() for p in ('synchronous', "
        "'journal_mode')]\n"
        "before = pragmas()\n"
        "from autograde.run.job import scratch_gradebooks; scratch_gradebooks()\n"
        "print(before, pragmas())"
    )
    printed = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[3],
    ).stdout
    assert printed.strip() == "[2, 'delete'] [0, 'memory']"


def test_a_worker_reuses_one_engine_per_gradebook_and_reads_a_replaced_one_afresh(
    tmp_path, monkeypatch
):
    """nbgrader opens a Gradebook about eleven times a notebook: in a worker they share the
    engine of their database (and the SQL it compiled); a gradebook file replaced in between is
    read as the new file it is, and another file gets an engine of its own."""
    import nbgrader.api
    from nbgrader.api import Gradebook

    from autograde.ledger.gradebook import alembic_head
    from autograde.run.job import one_engine_per_gradebook

    # put back afterwards
    monkeypatch.setattr(nbgrader.api, "create_engine", nbgrader.api.create_engine)
    # no `alembic` command needed
    monkeypatch.setattr(nbgrader.api, "get_alembic_version", alembic_head)
    one_engine_per_gradebook()
    one_engine_per_gradebook()  # a second call changes nothing
    url, other = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    with Gradebook(url) as first:
        first.add_student("ada")
        engine = first.engine
    with Gradebook(url) as again:
        assert again.engine is engine and [s.id for s in again.students] == ["ada"]
    (tmp_path / "a.db").unlink()  # a job folder's gradebook, rebuilt
    with Gradebook(url) as rebuilt:
        assert rebuilt.engine is engine and rebuilt.students == []
        rebuilt.add_student("bo")
    with Gradebook(other) as elsewhere:
        assert elsewhere.engine is not engine and elsewhere.students == []
    with Gradebook(url) as last:
        assert [s.id for s in last.students] == ["bo"]


RUNNER = Path(__file__).parents[3] / "autograde" / "judging" / "runner.py"


def _session(tmp_path, **extra):
    import os

    from autograde.judging import judge

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3]), **extra}
    return judge.Session(
        lambda: judge.Runner([sys.executable, "-I", str(RUNNER)], env, str(tmp_path), 5.0), 5.0
    )


def test_the_runner_runs_the_set_up_while_booting_and_then_loads_the_notebook(tmp_path):
    """The set-up given to ``warm`` runs before the first notebook is loaded (its imports stay);
    the notebook is then loaded in a fresh namespace, as without it."""
    session = _session(tmp_path)
    try:
        session.warm(["import tabnanny\nSET_UP = 1"])
        runner, errors = session.ready(
            ["import sys\ndef f():\n    return ('tabnanny' in sys.modules, 'SET_UP' in globals())"]
        )
        assert errors == [] and runner.call("f", (), {}, {}) == (True, False)
    finally:
        session.close()


@pytest.mark.parametrize("set_up", ["raise ValueError('set-up broke')", "import os\nos._exit(3)"])
def test_a_set_up_that_fails_in_the_runner_costs_the_notebook_nothing(tmp_path, set_up):
    session = _session(tmp_path)
    try:
        session.warm([set_up])
        runner, errors = session.ready(["def f(x):\n    return x + 1"])
        assert errors == [] and runner.call("f", (41,), {}, {}) == 42
    finally:
        session.close()


def test_catalogs_are_parsed_one_at_a_time_whatever_the_threads(monkeypatch, root):
    """The grading process reads the feedback page's catalog from a thread per worker. On CPython
    3.11 two threads in ``ast.parse`` at once can fail with "AST constructor recursion depth
    mismatch" (a grader fault seen in CI and in a benchmark here), so the catalogs parse under one
    lock."""
    import ast
    import threading
    import time

    from autograde.publish import catalogs

    real, inside, most = ast.parse, [0], [0]
    counting = threading.Lock()

    def slow_parse(source, *args, **kwargs):
        with counting:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.01)
        try:
            return real(source, *args, **kwargs)
        finally:
            with counting:
                inside[0] -= 1

    monkeypatch.setattr(ast, "parse", slow_parse)
    paths = [root / "solutions" / "01_what_can_overlap.ipynb"]
    threads = [threading.Thread(target=catalogs.grader_units, args=(paths, [])) for _ in range(4)]
    threads += [
        threading.Thread(
            target=catalogs.code_strings, args=("assert x, 'a message for the learner'",)
        )
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1, f"{most[0]} threads were in ast.parse at once"


def test_the_runner_loads_every_set_up_cell_without_matplotlib(tmp_path, root):
    """The judge's runner loads each notebook's set-up cell (and the answers) only to call the
    learner's functions: nothing there may import matplotlib (about half a second per student),
    which the course runtime imports only where a figure is drawn."""
    import nbformat

    from submissions import NOTEBOOKS

    # as job.py starts it
    session = _session(tmp_path, NBGRADER_EXECUTION="autograde", MPLBACKEND="agg")
    probe = (
        "def probe():\n    import sys\n    return sorted(m for m in sys.modules if "
        "m.split('.')[0] in ('matplotlib', 'torch'))"
    )
    try:
        for name in NOTEBOOKS:
            nb = nbformat.read(root / "solutions" / f"{name}.ipynb", as_version=4)
            code = [c for c in nb.cells if c.cell_type == "code"]
            cells = [
                c.source
                for c in code
                if "imports" in c.metadata.get("tags", [])
                or c.metadata.get("nbgrader", {}).get("solution")
            ]
            runner, errors = session.ready([*cells, probe])
            assert errors == [] and runner.call("probe", (), {}, {}) == [], (
                f"{name}: {errors or runner.call('probe', (), {}, {})[:5]}"
            )
    finally:
        session.close()


def test_the_worker_server_preloads_no_page_rendering():
    """Workers write a page's data, never the page (the grader renders it after the batch): the
    server imports what their feedback step needs and renders nothing."""
    from autograde.run import launch

    assert "autograde.record.exporters" in launch.PRELOAD and not any(
        "warm" in name for name in launch.PRELOAD
    )


def test_a_notebook_cut_short_by_stopping_the_batch_is_left_for_the_next_run(tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM kills the workers; a thread that then sees its worker gone must not record
    the notebook it was on as an error (a resumed run would reuse that and never grade it). The
    control, the same death without the batch stopping, is recorded."""

    class KilledMidNotebook:
        pid = 2**22 + 1  # never a live process's id here: nothing may be killed by it

        def poll(self):
            return -15

        def wait(self, timeout=None):
            return -15

    def fake_prepare(course, master, out, student, record, path, max_bytes):
        job = out / ".work" / student / record.notebook
        job.mkdir(parents=True)
        (job / "started").write_text("0")  # the worker had begun it
        return record, job

    monkeypatch.setattr(student_run, "_prepare", fake_prepare)
    monkeypatch.setattr(student_run, "start_worker", lambda *args: KilledMidNotebook())
    for stopping in (True, False):
        taken = []
        student_run.INTERRUPTED.clear()
        if stopping:
            student_run.INTERRUPTED.set()
        entries = [(new_record("s1", "a", "pending", ""), Path("a.ipynb"))]
        try:
            finished = lambda r, *a, into=taken: into.append(r)  # noqa: E731
            student_run.run_student(
                None,
                tmp_path,
                tmp_path / str(stopping),
                "s1",
                entries,
                Options(),
                finished,
                lambda r: None,
            )
        finally:
            student_run.INTERRUPTED.clear()
        assert [r.notebook for r in taken] == ([] if stopping else ["a"]), (stopping, taken)


def _kernel_and_client():
    """A plain kernel (no sandbox) and a started client of the grading's kernel manager."""
    from jupyter_core.utils import run_sync

    from autograde.run.kernels import BudgetedKernelManager

    km = BudgetedKernelManager(kernel_name="python3")
    run_sync(km.start_kernel)()
    kc = km.client()
    kc.start_channels()
    return km, kc, run_sync


def _counting(channel, miss: int = 0):
    """Wrap a channel's ``get_msg``: count the waits that ran out, and make the first ``miss`` calls
    find nothing (a subscription that missed the message)."""
    from queue import Empty

    seen = {"calls": 0, "empty": 0, "last": None}
    original = channel.get_msg

    async def get_msg(*args, **kwargs):
        seen["calls"] += 1
        if seen["calls"] <= miss:
            seen["empty"] += 1
            seen["last"] = "empty"
            raise Empty
        try:
            msg = await original(*args, **kwargs)
        except Empty:
            seen["empty"] += 1
            seen["last"] = "empty"
            raise
        seen["last"] = msg
        return msg

    channel.get_msg = get_msg
    return seen


@pytest.mark.slow
def test_a_kernels_client_is_ready_once_both_channels_answered_with_no_quiet_period_waited_out():
    """nbclient asks for each notebook whether the kernel is ready. jupyter_client's answer reads
    IOPub until it has been quiet for 0.2 s, so its last wait always runs out; the grading's client
    returns on a status of its kernel_info request (its last read is that message), and IOPub
    really carries the next cell's output."""
    from autograde.run.kernels import PromptClient

    km, kc, run_sync = _kernel_and_client()
    try:
        assert isinstance(kc, PromptClient)
        seen = _counting(kc.iopub_channel)
        run_sync(kc.wait_for_ready)(timeout=60)
        last = seen["last"]
        assert (
            last != "empty"
            and last["msg_type"] == "status"
            and last["parent_header"]["msg_type"] == "kernel_info_request"
        )
        msg_id = kc.execute("print('after ready')")
        texts = []
        while not any("after ready" in t for t in texts):
            msg = run_sync(kc.iopub_channel.get_msg)(timeout=10)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
                texts.append(msg["content"]["text"])
    finally:
        kc.stop_channels()
        run_sync(km.shutdown_kernel)(now=True)


@pytest.mark.slow
def test_a_client_that_missed_the_status_asks_again_and_a_dead_kernel_is_reported():
    from autograde.run.kernels import IOPUB_TRY

    km, kc, run_sync = _kernel_and_client()
    try:
        # the kernel is up: what follows does not depend on its boot
        run_sync(kc.wait_for_ready)(timeout=60)
        asked = []
        original = kc.kernel_info
        kc.kernel_info = lambda: asked.append(1) or original()
        seen = _counting(kc.iopub_channel, miss=1)  # the first status is "missed"
        run_sync(kc.wait_for_ready)(timeout=60)
        assert len(asked) >= 2 and seen["empty"] >= 1 and seen["last"] != "empty" and IOPUB_TRY <= 1
        run_sync(km.shutdown_kernel)(now=True)
        with pytest.raises(RuntimeError, match="died|respond"):
            run_sync(kc.wait_for_ready)(timeout=3)
    finally:
        kc.stop_channels()
        if run_sync(km.is_alive)():
            run_sync(km.shutdown_kernel)(now=True)


def test_the_ready_check_ends_at_its_deadline_while_a_kernel_sends_other_messages(monkeypatch):
    """A kernel that keeps sending messages meant for nobody keeps neither phase of the readiness
    check (the reply on the shell channel, then the status on IOPub) past its deadline. The check's
    clock is a fake one that moves 10 ms each time it is read, so the deadline comes after a fixed
    number of messages however busy the machine is; a check that ignored its deadline would read
    messages for ever (here: until the kernel's 10,000th, which fails the test)."""
    import asyncio

    from autograde.run import kernels
    from autograde.run.kernels import PromptClient

    class Clock:
        now = 1000.0

        @classmethod
        def monotonic(cls):
            cls.now += 0.01
            return cls.now

    monkeypatch.setattr(kernels, "time", Clock)

    class Chatter:
        sent = 0

        async def get_msg(self, timeout=None):
            await asyncio.sleep(0)
            Chatter.sent += 1
            assert Chatter.sent < 10_000, "the check read messages past its deadline"
            return {
                "parent_header": {"msg_id": "someone-else"},
                "msg_type": "status",
                "content": {"execution_state": "idle"},
            }

    class Answers:
        async def get_msg(self, timeout=None):
            return {
                "parent_header": {"msg_id": "mine"},
                "msg_type": "kernel_info_reply",
                "content": {"protocol_version": "5.3"},
            }

    class Client:
        def __init__(self, shell):
            self.shell_channel, self.iopub_channel = shell, Chatter()

        def _handle_kernel_info_reply(self, reply):
            pass

    for shell in (Chatter(), Answers()):
        Chatter.sent = 0
        deadline = Clock.monotonic() + 0.3
        assert asyncio.run(PromptClient._answered(Client(shell), {"mine"}, deadline)) is False
        assert Clock.now > deadline and 0 < Chatter.sent < 100, (Clock.now, deadline, Chatter.sent)


def test_a_kernel_info_reply_the_client_cannot_read_is_no_answer():
    """A notebook can make its kernel answer kernel_info with a reply lacking the protocol version:
    the readiness check reads that as no answer (so the reset replaces the kernel) instead of
    failing with the reply's KeyError."""
    import asyncio
    import time

    from autograde.run.kernels import PromptClient

    class Broken:
        async def get_msg(self, timeout=None):
            return {
                "parent_header": {"msg_id": "mine"},
                "msg_type": "kernel_info_reply",
                "content": {},
            }

    class Client:
        shell_channel = Broken()

        def _handle_kernel_info_reply(self, reply):
            PromptClient._handle_kernel_info_reply(self, reply)

    assert asyncio.run(PromptClient._answered(Client(), {"mine"}, time.monotonic() + 5)) is False


def test_a_stopped_notebooks_status_is_said_where_it_was_caught():
    """The worker writes why a notebook stopped (result.json's outcome), from the exception it
    caught; grading reads the status from there, never from the words of a log."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from autograde.run.kernels import OutputLimitExceeded
    from autograde.run.preprocessors import failure_of

    said = {
        "output_limit": failure_of(
            OutputLimitExceeded("OutputLimitExceeded: the notebook sent more than 64 MiB"), 30
        ),
        "kernel_died": failure_of(DeadKernelError("Kernel died"), 30),
        "timeout": failure_of(
            CellTimeoutError("A cell timed out while it was being executed, after 30 seconds."), 30
        ),
        "out_of_memory": failure_of(MemoryError(), 30),
        "error": failure_of(
            ValueError("a log that mentions DeadKernelError and OutputLimitExceeded"), 30
        ),
    }
    assert {status: found.status for status, found in said.items()} == {
        status: status for status in said
    }
    assert said["output_limit"].detail == "the notebook sent more than 64 MiB"
    assert said["timeout"].detail == "a cell ran past 30 s and ignored the interrupt"
    late_output = failure_of(
        CellTimeoutError("A cell timed out ... The message was: Timeout waiting for IOPub output."),
        30,
    )
    assert late_output.status == "timeout" and "did not arrive in time" in late_output.detail
