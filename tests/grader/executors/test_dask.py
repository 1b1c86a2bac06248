"""Grading on a Dask cluster (grade --scheduler): a real scheduler and workers, started as
separate processes on this machine, grade a class exactly like a local run; a worker killed
mid-batch loses nothing and takes its grading processes with it; a worker that cannot sandbox
is left out; what travels to the workers holds neither the signing key nor a database password;
what comes back is checked before the parent uses it; TLS between the grader and the cluster."""

import csv
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from autograde.course import Course, UnusableInput

from submissions import NOTEBOOKS, build, mutate, write

BIN = Path(sys.executable).parent
WRONG_DEADLINE = mutate("todo4_solution", "ready_at_ms <= deadline_ms", "ready_at_ms < deadline_ms")


def cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def read_grades(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "grades.csv", encoding="utf-8") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle)}


def grade(
    subs: Path, out: Path, *extra: str, check: bool = True, timeout: float = 600
) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograde",
            "grade",
            str(subs),
            "--out",
            str(out),
            "--no-progress",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def seeded(classroom, name: str) -> Path:
    """A new OUT holding the grading master the local run built (grade rebuilds it only when it
    no longer verifies), so that each test does not spend half a minute on nbgrader's generate."""
    out = classroom["root"] / name
    shutil.copytree(classroom["root"] / "local" / ".course", out / ".course")
    shutil.copy(classroom["root"] / "local" / ".course.digest", out / ".course.digest")
    return out


class Cluster:
    """A dask scheduler and workers, each a process group of its own (killed in the finalizer)."""

    def __init__(self, folder: Path, tls: list[str] = ()):
        self.folder, self.tls, self.procs, self.workers = folder, list(tls), [], {}
        folder.mkdir(parents=True, exist_ok=True)
        self.file = folder / "scheduler.json"
        self._start(
            "scheduler",
            [
                str(BIN / "dask"),
                "scheduler",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(self.file),
                *(["--protocol", "tls"] if tls else []),
                *self.tls,
            ],
            {},
        )

    def _start(self, name: str, argv: list[str], env: dict) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "w")
        proc = subprocess.Popen(
            argv,
            cwd=self.folder,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "COURSE_WORKER_DIR": str(self.folder / "worker-files"), **env},
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def add_worker(self, name: str, **env: str) -> None:
        self.workers[name] = self._start(
            name,
            [
                str(BIN / "dask"),
                "worker",
                "--scheduler-file",
                str(self.file),
                "--nthreads",
                "1",
                "--nworkers",
                "1",
                "--no-dashboard",
                "--name",
                name,
                *self.tls,
            ],
            env,
        )

    @property
    def address(self) -> str:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                return json.loads(self.file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.2)
        raise AssertionError(
            "the scheduler did not start: " + (self.folder / "scheduler.log").read_text()
        )

    def wait_for_workers(self, n: int, security=None) -> None:
        from distributed import Client

        with Client(self.address, security=security, timeout=60) as client:
            client.wait_for_workers(n, timeout=180)

    def close(self) -> None:
        for proc in reversed(self.procs):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                    proc.wait(timeout=15)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue
            proc.wait()


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    """A small class, graded locally; meanwhile a scheduler and three workers start (one cannot
    sandbox: its bubblewrap is /bin/false)."""
    root = tmp_path_factory.mktemp("dask")
    cluster = Cluster(root / "cluster")
    try:
        for name in ("w1", "w2"):
            cluster.add_worker(name)
        cluster.add_worker("nosandbox", COURSE_BWRAP="/bin/false")
        subs = root / "submissions"
        write(subs, "a", NOTEBOOKS[3], build(NOTEBOOKS[3]))
        write(subs, "b", NOTEBOOKS[3], build(NOTEBOOKS[3], WRONG_DEADLINE))
        write(subs, "c", NOTEBOOKS[3], build(NOTEBOOKS[3], fill=False))
        (subs / "c" / f"{NOTEBOOKS[1]}.ipynb").write_text("not a notebook")
        begin = time.monotonic()
        grade(subs, root / "local", "--workers", "2")
        local_seconds = time.monotonic() - begin
        cluster.wait_for_workers(3)
        yield {
            "root": root,
            "subs": subs,
            "cluster": cluster,
            "local": read_grades(root / "local"),
            "local_seconds": local_seconds,
        }
    finally:
        cluster.close()


@pytest.mark.slow
def test_a_cluster_grades_like_a_local_run(classroom):
    out = seeded(classroom, "on_cluster")
    begin = time.monotonic()
    proc = grade(classroom["subs"], out, "--scheduler", classroom["cluster"].address)
    seconds = time.monotonic() - begin
    print(f"local {classroom['local_seconds']:.1f} s, cluster {seconds:.1f} s for the same class")
    grades = read_grades(out)
    assert grades == classroom["local"]
    assert grades["a"]["todo4_plan_decode"] == "2"
    assert grades["b"]["todo4_plan_decode"] not in ("0", "2") and grades["c"]["auto_total"] == "0"
    # the worker without a sandbox refused, and was left out with a message saying why
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cluster"]["workers"] == 2
    [(refused, why)] = summary["cluster"]["left_out"].items()
    assert (
        "cannot run the grading sandbox" in why
        and "unsandboxed" in why
        and (f"WARNING: Dask worker {refused} is left out") in proc.stderr
    )
    # the same files as a local run: feedback pages, formgrader's copies, problems
    local = classroom["root"] / "local"
    for folder in ("feedback", "autograded", "submitted"):
        assert sorted(
            p.relative_to(local / folder) for p in (local / folder).rglob("*.*")
        ) == sorted(p.relative_to(out / folder) for p in (out / folder).rglob("*.*")), folder
    assert "Graded ideas" in (out / "feedback" / "b" / f"{NOTEBOOKS[3]}.html").read_text()
    statuses = {(p["student_id"], p["notebook"], p["status"]) for p in summary["problems"]}
    assert ("c", NOTEBOOKS[1], "invalid_notebook") in statuses
    # records were signed here: a rerun reuses every one without asking the cluster
    grade(classroom["subs"], out, "--scheduler", "tcp://127.0.0.1:9")
    assert (
        json.loads((out / "summary.json").read_text())["notebooks_reused"] == 4
        and read_grades(out) == grades
    )


@pytest.mark.slow
def test_a_worker_killed_mid_batch_loses_nothing(classroom):
    cluster, out = classroom["cluster"], seeded(classroom, "survives")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autograde",
            "grade",
            str(classroom["subs"]),
            "--out",
            str(out),
            "--no-progress",
            "--scheduler",
            cluster.address,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    victim = None
    deadline = time.monotonic() + 300
    while victim is None and time.monotonic() < deadline and proc.poll() is None:
        for name in ("w1", "w2"):
            try:
                found = psutil.Process(cluster.workers[name].pid).children(recursive=True)
            except psutil.NoSuchProcess:
                continue
            if any("autograde.run.job" in cmdline(p) for p in found):
                victim = name
                break
        time.sleep(0.1)
    assert victim, "no grading process started on a worker"
    deadline = time.monotonic() + 60  # kill it while the learner's kernel runs in the sandbox
    while time.monotonic() < deadline and not any(
        "ipykernel_launcher" in cmdline(p)
        for p in psutil.Process(cluster.workers[victim].pid).children(recursive=True)
    ):
        time.sleep(0.1)
    family = {
        p: cmdline(p) for p in psutil.Process(cluster.workers[victim].pid).children(recursive=True)
    }
    # the dask worker and its nanny: not the grading session
    os.killpg(cluster.workers[victim].pid, signal.SIGKILL)
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output
    assert read_grades(out) == classroom["local"], "every student graded, with a local run's grades"
    # the grading processes of the dead worker died with it (parent-death signal, bwrap
    # --die-with-parent)
    graders = [p for p, line in family.items() if "autograde.run.job" in line]
    assert graders and any("ipykernel_launcher" in line for line in family.values()), (
        "the worker was grading (a grading process and a sandboxed kernel) when it was killed"
    )
    _, alive = psutil.wait_procs(family, timeout=30)
    alive = [p for p in alive if running(p)]
    assert not alive, [family[p] for p in alive]
    print(
        f"killed {victim} with {len(family)} processes under it: "
        + "; ".join(sorted(set(line.split(" -- ")[-1][:60] for line in family.values())))
    )


def test_a_workers_folders_of_other_course_versions_are_removed_unless_in_use(tmp_path):
    import fcntl

    from autograde.executors.cluster import _remove_other_versions

    current, old, busy = (tmp_path / name for name in ("v3", "v1", "v2"))
    for folder in (current, old, busy):
        (folder / "tasks" / "t1").mkdir(parents=True)
        (folder / "tasks" / "t1" / "result.json").write_text("{}")
    with open(busy / "tasks" / "t1" / ".lock", "a+") as held:  # a task of version 2 is grading now
        fcntl.flock(held, fcntl.LOCK_EX)
        _remove_other_versions(current)
    assert not old.exists()
    assert (busy / "tasks" / "t1" / "result.json").is_file() and (
        current / "tasks" / "t1" / "result.json"
    ).is_file()
    _remove_other_versions(current)  # no longer in use
    assert not busy.exists() and current.is_dir()


def test_tasks_carry_neither_the_signing_key_nor_the_database_password(tmp_path):
    from autograde.executors.cluster import make_task, task_settings
    from autograde.grading import Options
    from autograde.ledger.store import signing_key

    key = signing_key(tmp_path)
    options = Options(
        db_url="postgresql://grader:s3cret-Pa55@db.example/course", scheduler="tcp://h:8786"
    )
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text('{"cells": []}')
    payload = pickle.dumps(
        make_task("a", [(NOTEBOOKS[0], notebook, "f" * 64)], "digest", task_settings(options))
    )
    assert key not in payload and key.hex().encode() not in payload
    assert b"s3cret" not in payload and b"postgresql" not in payload and b"tcp://h" not in payload
    assert set(vars(task_settings(options))) == {
        "cell_timeout",
        "notebook_timeout",
        "sandbox",
        "memory_limit",
        "process_limit",
        "max_notebook_bytes",
    }


def _answer(outcome: dict | None = None, **fields) -> dict:
    files = {
        "result": json.dumps(outcome or {"scores": {"todo4_plan_decode": 2.0}}).encode(),
        "autograded": b"{}",
        "submitted": b"{}",
        "feedback": None,
    }
    item = {
        "notebook": NOTEBOOKS[3],
        "ran": True,
        "killed": False,
        "log": "",
        "seconds": 3.5,
        "matching_notes": [],
        "files": files,
        **fields,
    }
    return {"student": "a", "worker": "w", "notebooks": [item]}


@pytest.mark.parametrize(
    "bad",
    [
        {"scores": {"todo4_plan_decode": 3.0}},  # more than the cell's points
        {"scores": {"not_a_cell": 1.0}},  # a cell the course does not have
        {"scores": {"todo4_plan_decode": True}},  # not a number
        {"scores": {"reflection_04_q1": 1.0}},  # a person's cell scored by the machine
        {"manual": {"todo4_plan_decode": None}},  # an automatic cell as a written answer
        {"out_of_memory": "no"},
        {
            "judge": {
                "todo4_plan_decode": {
                    "ideas": [{"id": "x", "status": "passed", "earned": "2", "points": 2}]
                }
            }
        },
        [],
    ],
)
def test_a_workers_malformed_outcome_is_refused(bad):
    from autograde.course import exercises
    from autograde.executors.cluster import MalformedResult, check_outcome

    cells = exercises(Course.load())
    points = {e.grade_id: e.points for e in cells}
    manual = {e.grade_id for e in cells if e.manual}
    check_outcome(
        {"scores": {"todo4_plan_decode": 2.0}, "manual": {"reflection_04_q1": None}}, points, manual
    )
    with pytest.raises(MalformedResult):
        check_outcome(bad, points, manual)


def test_a_workers_malformed_answer_is_refused():
    from autograde.executors.cluster import MalformedResult, check_result

    names = {NOTEBOOKS[3]}
    assert check_result(_answer(), "a", names, 1 << 20)[0].notebook == NOTEBOOKS[3]
    bad = [
        (_answer(), "b", names),  # another student's answer
        (_answer(), "a", {NOTEBOOKS[3], NOTEBOOKS[0]}),  # a notebook missing
        (_answer(seconds=float("nan")), "a", names),
        (_answer(killed="yes"), "a", names),
        (_answer(files={"result": "text"}), "a", names),
        # only a notebook that ran is graded
        (_answer(ran=False, status="graded", detail=""), "a", names),
        ({"student": "a", "notebooks": "x"}, "a", names),
    ]
    for answer, student, expected in bad:
        with pytest.raises(MalformedResult):
            check_result(answer, student, expected, 1 << 20)
    with pytest.raises(MalformedResult):
        check_result(
            _answer(
                files={
                    "result": b"x" * 2048,
                    "autograded": None,
                    "submitted": None,
                    "feedback": None,
                }
            ),
            "a",
            names,
            1024,
        )


def test_tls_options_are_checked_and_wired(tmp_path):
    from distributed.security import Security

    from autograde.executors.cluster import _security
    from autograde.grading import Options

    files = {}
    for name in ("ca.pem", "cert.pem", "key.pem"):
        files[name] = tmp_path / name
        files[name].write_text("x")
    security = _security(
        Options(
            scheduler="tls://h:8786",
            tls_ca_file=str(files["ca.pem"]),
            tls_cert=str(files["cert.pem"]),
            tls_key=str(files["key.pem"]),
        )
    )
    assert isinstance(security, Security) and security.require_encryption
    assert (security.tls_ca_file, security.tls_client_cert, security.tls_client_key) == (
        str(files["ca.pem"]),
        str(files["cert.pem"]),
        str(files["key.pem"]),
    )
    with pytest.raises(UnusableInput, match="--tls-key"):
        _security(
            Options(
                scheduler="tls://h:8786",
                tls_ca_file=str(files["ca.pem"]),
                tls_cert=str(files["cert.pem"]),
            )
        )
    with pytest.raises(UnusableInput, match="no such file"):
        _security(
            Options(
                scheduler="tls://h:8786",
                tls_ca_file=str(tmp_path / "none"),
                tls_cert=str(files["cert.pem"]),
                tls_key=str(files["key.pem"]),
            )
        )
    (tmp_path / "subs" / "a").mkdir(parents=True)
    proc = grade(
        tmp_path / "subs", tmp_path / "out", "--tls-cert", str(files["cert.pem"]), check=False
    )
    assert proc.returncode == 2 and "--scheduler" in proc.stderr


def _certificates(folder: Path) -> list[str]:
    """A self-signed CA and one certificate it signed (for the scheduler, workers and grader)."""

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=course grading CA",
    )
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "key.pem",
        "-out",
        "node.csr",
        "-subj",
        "/CN=grading node",
    )
    (folder / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl(
        "x509",
        "-req",
        "-in",
        "node.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "cert.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    )
    return [str(folder / "ca.pem"), str(folder / "cert.pem"), str(folder / "key.pem")]


@pytest.mark.slow
def test_a_tls_cluster_is_reached_with_the_certificates_and_a_worker_without_sandbox_refuses(
    classroom, tmp_path
):
    from autograde.executors.cluster import (
        _usable_workers,
        connect,
        course_digest,
        pack_master,
        task_settings,
    )
    from autograde.grading import Options

    ca, cert, key = _certificates(tmp_path)
    cluster = Cluster(tmp_path / "tls", ["--tls-ca-file", ca, "--tls-cert", cert, "--tls-key", key])
    try:
        cluster.add_worker("nosandbox", COURSE_BWRAP="/bin/false")
        address = cluster.address
        assert address.startswith("tls://")
        options = Options(scheduler=address, tls_ca_file=ca, tls_cert=cert, tls_key=key)
        client = connect(options)
        try:
            client.wait_for_workers(1, timeout=180)
            assert client.submit(sum, [1, 2], pure=False).result(timeout=60) == 3
            with pytest.raises(
                UnusableInput, match="no Dask worker can grade(.|\n)*cannot run the grading sandbox"
            ):
                _usable_workers(
                    client,
                    course_digest(Course.load()),
                    task_settings(options),
                    pack_master(classroom["root"] / "local"),
                )
        finally:
            client.close()
        # no certificates: no connection
        with pytest.raises(UnusableInput, match="it speaks TLS; give --tls-ca-file"):
            connect(Options(scheduler=address))
    finally:
        cluster.close()


def test_a_scheduler_without_a_cluster_executor_is_refused_before_anything_runs(tmp_path):
    """The command line chooses the executor once; a caller who names a scheduler but passes no
    executor is told what to pass, instead of grading locally by surprise."""
    from autograde.course import Course
    from autograde.grading import Options, grade_batch

    with pytest.raises(ValueError, match="ClusterExecutor"):
        grade_batch(
            Course.load(), tmp_path, tmp_path / "out", Options(scheduler="tcp://127.0.0.1:1")
        )
    assert not (tmp_path / "out").exists()
