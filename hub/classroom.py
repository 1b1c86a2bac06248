"""A class on JupyterHub on this machine: bring it up, release to it, hand feedback back, bring it
down.

    sudo .venv/bin/python hub/classroom.py up [--learners 3]     # prints the logins
    sudo .venv/bin/python hub/classroom.py release               # notebooks/ to the exchange
    sudo .venv/bin/python hub/classroom.py grade [-- grade options]
    sudo .venv/bin/python hub/classroom.py export [-- export options]   # after formgrader's scores
    sudo .venv/bin/python hub/classroom.py feedback              # pages back through the exchange
    sudo .venv/bin/python hub/classroom.py down                  # hub, users and class removed

Run as root: the hub's spawner starts each person's server as that Unix user. Everything lives under
HUB_ROOT (default /srv/serving-overlap-hub), which every user can traverse, wherever this repository
sits:

    env/        the Python of the hub and of every single-user server: JupyterHub, JupyterLab,
                nbgrader and the course runtime (the learner wheel), pinned as the course is;
                built once, kept (stamped)
    proxy/      configurable-http-proxy from the npm registry (hub/package-lock.json)
    class/      one class (a test makes its own beside it): state/ (root only: the hub's
                database, secrets, logs, class.json with the logins), config/ (each role's
                Jupyter configuration, from hub/), exchange/ (nbgrader's exchange root),
                home/<user>/ (0700 each)

The instructor's account owns the course folder (~/course, nbgrader's release/: each edition an
assignment of its own) and the graded OUT (the class's grading/, 0700), which formgrader serves as a
hub service whose server's root is grading/ itself (as `cd OUT && jupyter lab`). Grading itself runs
as root with this repository's grader (``python -m autograde grade``): the exchange's folders are
the learners' own."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# nbgrader's course id (autograde/nbgrader_config.py); the formgrader service's name
COURSE_ID = "serving-overlap"
HUB_ROOT = Path(os.environ.get("HUB_ROOT", "/srv/serving-overlap-hub"))
ROLES = ("learner", "instructor", "grader")  # hub/<role>/: each role's Jupyter configuration
# in env/, beside the learner wheel
SERVER_PACKAGES = ["jupyterhub", "jupyterlab", "notebook", "nbgrader"]


def assignment() -> str:
    return tomllib.loads((REPO / "course.toml").read_text(encoding="utf-8"))["course"]["assignment"]


def editions() -> dict[str, str]:
    """{edition: nbgrader assignment} of the release, English first: course.toml's ``assignment``
    and ``[course.editions]`` (each edition besides English released as an assignment of its own,
    e.g. ``zh``)."""
    course = tomllib.loads((REPO / "course.toml").read_text(encoding="utf-8"))["course"]
    return {"en": course["assignment"], **course.get("editions", {})}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ClassRoom:
    """One class: where it lives, who is in it and where its hub listens (state/class.json)."""

    folder: str
    instructor: str
    learners: list[str]
    passwords: dict[str, str]
    ports: dict[str, int] = field(default_factory=dict)
    hub_root: str = str(HUB_ROOT)

    @property
    def root(self) -> Path:
        return Path(self.folder)

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def exchange(self) -> Path:
        return self.root / "exchange"

    @property
    def inbound(self) -> Path:
        return self.exchange / COURSE_ID / "inbound"

    @property
    def env(self) -> Path:
        return Path(self.hub_root) / "env"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports['hub']}"

    def home(self, user: str) -> Path:
        return self.root / "home" / user

    @property
    def course(self) -> Path:
        return self.home(self.instructor) / "course"

    @property
    def grading(self) -> Path:
        """The graded OUT, the instructor's (0700) but outside their home: the grader's sandbox (an
        unprivileged user namespace) cannot enter another user's 0700 home, so the grading runs
        while root owns it."""
        return self.root / "grading"

    @property
    def users(self) -> list[str]:
        return [self.instructor, *self.learners]

    def save(self) -> None:
        self.state.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.state / "class.json"
        path.write_text(json.dumps(asdict(self), indent=1))
        path.chmod(0o600)

    @classmethod
    def load(cls, folder: Path) -> ClassRoom:
        path = Path(folder) / "state" / "class.json"
        if not path.is_file():
            raise SystemExit(
                f"no class at {folder} (no state/class.json): bring one up with "
                "`hub/classroom.py up`"
            )
        return cls(**json.loads(path.read_text()))


# ---- the shared environment: one Python for the hub and every single-user server, one proxy


def pins() -> list[str]:
    """The course's own pins for what the servers and the runtime import (pyproject.toml): the same
    versions as the instructor's .venv, as constraints."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    wanted = [
        *project["dependencies"],
        *extras["hub"],
        *(p for p in extras["instructor"] if p.startswith("nbgrader")),
    ]
    return sorted(p.split(";")[0].split("#")[0].strip() for p in wanted)


def _tree_hash(*parts: bytes, folders: tuple[Path, ...] = ()) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    for folder in folders:
        for path in sorted(
            p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
        ):
            digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def hub_python() -> str:
    """A Python every user can run (this repository's may sit under a folder they cannot enter):
    HUB_PYTHON, else the system's python3 (3.11 or newer, with venv)."""
    python = (
        os.environ.get("HUB_PYTHON")
        or shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
        or ""
    )
    check = (
        subprocess.run(
            [python, "-c", "import sys, venv; assert sys.version_info >= (3, 11)"],
            capture_output=True,
        )
        if python
        else None
    )
    if not check or check.returncode:
        raise SystemExit(
            "the hub needs a system Python 3.11+ with venv that every user can run "
            "(Debian: apt-get install python3-venv); or set HUB_PYTHON to one"
        )
    return python


def ensure_env(hub_root: Path = HUB_ROOT, log=print) -> Path:
    """hub_root/env: JupyterHub, JupyterLab, nbgrader and the course runtime (the learner wheel
    built from this checkout), with the course's pins; rebuilt only when the pins or the runtime
    change."""
    env = hub_root / "env"
    stamp = _tree_hash("\n".join(pins()).encode(), folders=(REPO / "tools",))
    if (env / ".stamp").is_file() and (env / ".stamp").read_text() == stamp:
        return env
    log(f"building the hub's Python environment in {env} (once; about a minute)")
    shutil.rmtree(env, ignore_errors=True)
    hub_root.mkdir(parents=True, exist_ok=True)
    hub_root.chmod(0o755)
    subprocess.run([hub_python(), "-m", "venv", "--without-pip", str(env)], check=True)
    sys.path.insert(0, str(REPO))
    from autograde.authoring.bundle import build_learner_wheel
    from autograde.course import Course

    wheels = hub_root / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    wheel = build_learner_wheel(Course.load(), wheels)
    constraints = hub_root / "constraints.txt"
    constraints.write_text("\n".join(pins()) + "\n")
    pip = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(env / "bin" / "python"),
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]
    run = subprocess.run(
        [*pip, "-c", str(constraints), *SERVER_PACKAGES, str(wheel)], capture_output=True, text=True
    )
    if run.returncode:
        raise SystemExit(
            f"installing the hub's environment failed:\n{run.stdout[-3000:]}{run.stderr[-3000:]}"
        )
    subprocess.run(["chmod", "-R", "a+rX", str(env)], check=True)
    (env / ".stamp").write_text(stamp)
    return env


def ensure_proxy(hub_root: Path = HUB_ROOT, log=print) -> Path:
    """hub_root/proxy: configurable-http-proxy as hub/package-lock.json pins it."""
    proxy = hub_root / "proxy"
    stamp = _tree_hash((HERE / "package-lock.json").read_bytes())
    command = proxy / "node_modules" / ".bin" / "configurable-http-proxy"
    if (
        command.exists()
        and (proxy / ".stamp").is_file()
        and (proxy / ".stamp").read_text() == stamp
    ):
        return command
    if not shutil.which("npm"):
        raise SystemExit(
            "the hub's proxy (configurable-http-proxy) installs with npm: install "
            "Node.js 20 and npm"
        )
    log(f"installing configurable-http-proxy into {proxy}")
    shutil.rmtree(proxy, ignore_errors=True)
    proxy.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(HERE / name, proxy / name)
    run = subprocess.run(
        ["npm", "ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund"],
        cwd=proxy,
        capture_output=True,
        text=True,
    )
    if run.returncode:
        raise SystemExit(f"npm ci failed in {proxy}:\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    (proxy / ".stamp").write_text(stamp)
    return command


# ---- users and the class folder


def make_user(name: str, home: Path, password: str) -> None:
    """A real Unix user with its own group and a home only it can enter (Debian's useradd would make
    it world-readable: HOME_MODE unset, UMASK 022), and a password for the hub's PAM login."""
    try:
        pwd.getpwnam(name)
        raise SystemExit(f"a user named {name} exists already: choose another --prefix")
    except KeyError:
        pass
    subprocess.run(
        [
            "useradd",
            "--create-home",
            "--home-dir",
            str(home),
            "--shell",
            "/bin/bash",
            "--user-group",
            name,
        ],
        check=True,
    )
    home.chmod(0o700)
    subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True)


def remove_user(name: str) -> None:
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    stop_processes_of({uid})
    subprocess.run(["userdel", name], capture_output=True)


def stop_processes_of(uids: set[int], grace: float = 5.0) -> None:
    """End every process that runs as one of ``uids`` (this class's own users), each by its pid."""

    def owned() -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if entry.stat().st_uid in uids:
                        found.append(int(entry.name))
                except OSError:
                    pass
        return found

    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in owned():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + grace
        while owned() and time.monotonic() < end:
            time.sleep(0.1)


def as_user(
    user: str,
    argv: list[str],
    cls: ClassRoom,
    cwd: Path | None = None,
    role: str = "learner",
    **kwargs,
) -> subprocess.CompletedProcess:
    """Run ``argv`` as ``user`` (its uid, group and groups), in its home, with the class's Python
    and the Jupyter configuration of ``role``: as that person would in a terminal of their own
    lab."""
    entry = pwd.getpwnam(user)
    env = {
        "HOME": entry.pw_dir,
        "USER": user,
        "LOGNAME": user,
        "PATH": f"{cls.env / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "JUPYTER_CONFIG_PATH": str(cls.root / "config" / role),
        "PYTHONPATH": str(cls.root / "config" / "lib"),
        **kwargs.pop("env", {}),
    }
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("timeout", 600)
    return subprocess.run(
        argv,
        cwd=cwd or entry.pw_dir,
        env=env,
        user=entry.pw_uid,
        group=entry.pw_gid,
        extra_groups=[],
        umask=0o022,
        **kwargs,
    )


def nbgrader(
    cls: ClassRoom, user: str, *args: str, cwd: Path | None = None, role: str = "learner"
) -> subprocess.CompletedProcess:
    """nbgrader's own command, run as ``user``; refuses quietly never: a failure raises with its
    output."""
    run = as_user(user, [str(cls.env / "bin" / "nbgrader"), *args], cls, cwd=cwd, role=role)
    if run.returncode:
        raise RuntimeError(
            f"nbgrader {' '.join(args)} as {user} failed "
            f"({run.returncode}):\n{run.stdout[-3000:]}{run.stderr[-3000:]}"
        )
    return run


def _write_role_configs(cls: ClassRoom) -> None:
    """config/<role>/ from hub/<role>/, each with the nbgrader configuration of this class;
    config/lib/ the learner's submit checks (hub/course_exchange.py)."""
    config = cls.root / "config"
    shutil.rmtree(config, ignore_errors=True)
    for role in ROLES:
        shutil.copytree(HERE / role, config / role)
        course_root = {"grader": cls.grading, "instructor": cls.course}.get(role)
        lines = [
            "# written by hub/classroom.py for this class",
            "c = get_config()  # noqa: F821",
            f"c.CourseDirectory.course_id = {COURSE_ID!r}",
            f"c.Exchange.root = {str(cls.exchange)!r}",
            f"c.CourseSubmit.editions = {list(editions().values())!r}",
            *([f"c.CourseDirectory.root = {str(course_root)!r}"] if course_root else []),
            "c.ExchangeFactory.submit = 'course_exchange.CourseSubmit'",
        ]
        (config / role / "nbgrader_config.py").write_text("\n".join(lines) + "\n")
    (config / "lib").mkdir()
    shutil.copy(HERE / "course_exchange.py", config / "lib" / "course_exchange.py")
    subprocess.run(["chmod", "-R", "a+rX,go-w", str(config)], check=True)


def create(
    folder: Path, prefix: str, learners: int | list[str], hub_root: Path = HUB_ROOT, log=print
) -> ClassRoom:
    """A new class in ``folder``: its users (``<prefix>instructor``, ``<prefix>learner1``... or the
    names given), each role's configuration and the exchange with the permissions nbgrader
    documents."""
    if folder.exists():
        raise SystemExit(f"{folder} exists: bring that class down first (hub/classroom.py down)")
    names = (
        [f"{prefix}{n}" for n in learners]
        if isinstance(learners, list)
        else [f"{prefix}learner{i + 1}" for i in range(learners)]
    )
    cls = ClassRoom(
        str(folder),
        f"{prefix}instructor",
        names,
        {n: secrets.token_urlsafe(9) for n in [f"{prefix}instructor", *names]},
    )
    cls.hub_root = str(hub_root)
    ensure_env(hub_root, log)
    ensure_proxy(hub_root, log)
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    cls.save()
    (folder / "home").mkdir(mode=0o755)
    for user in cls.users:
        make_user(user, cls.home(user), cls.passwords[user])
    cls.exchange.mkdir()
    # nbgrader's exchange root: everyone writes (release_assignment resets any other mode)
    cls.exchange.chmod(0o777)
    _write_role_configs(cls)
    ins = pwd.getpwnam(cls.instructor)
    for path in (cls.course, cls.grading):
        path.mkdir(mode=0o700)
        os.chown(path, ins.pw_uid, ins.pw_gid)
    shutil.copy(
        cls.root / "config" / "instructor" / "nbgrader_config.py", cls.course / "nbgrader_config.py"
    )
    os.chown(cls.course / "nbgrader_config.py", ins.pw_uid, ins.pw_gid)
    cls.ports = {
        "hub": free_port(),
        "api": free_port(),
        "internal": free_port(),
        "formgrader": free_port(),
    }
    cls.save()
    return cls


# ---- the term's steps that cross between the instructor's account and this repository


def release(
    cls: ClassRoom, notebooks: list[str] | None = None
) -> dict[str, subprocess.CompletedProcess]:
    """The learner release (written by `python -m autograde release`) into the instructor's course
    folder, each edition as an assignment of its own (``editions``: notebooks/ as the course's
    assignment, notebooks/zh/ as ``<assignment>-zh``, each with its notebooks at its top), then
    nbgrader's release_assignment of each as the instructor. A learner fetches the edition they
    read; `grade` takes either as the course's assignment."""
    release_dir = REPO / "notebooks"
    chosen = notebooks or sorted(p.stem for p in release_dir.glob("*.ipynb"))
    for edition, name in editions().items():
        target = cls.course / "release" / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for stem in chosen:
            shutil.copy(
                (release_dir if edition == "en" else release_dir / edition) / f"{stem}.ipynb",
                target / f"{stem}.ipynb",
            )
    chown_tree(cls.course, cls.instructor)
    return {
        name: nbgrader(
            cls,
            cls.instructor,
            "release_assignment",
            name,
            "--force",
            cwd=cls.course,
            role="instructor",
        )
        for name in editions().values()
    }


def chown_tree(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    subprocess.run(["chown", "-R", f"{entry.pw_uid}:{entry.pw_gid}", str(path)], check=True)


def grade(cls: ClassRoom, *options: str) -> subprocess.CompletedProcess:
    """`python -m autograde grade` on the exchange's inbound/ into the class's grading/ (as root,
    with this repository's grader; the owner check compares each folder's owner with the learner it
    names), then grading/ handed back to the instructor, whose formgrader serves it."""
    subprocess.run(["chown", "-R", "0:0", str(cls.grading)], check=True)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograde",
            "grade",
            str(cls.inbound),
            "--out",
            str(cls.grading),
            "--no-progress",
            *options,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    chown_tree(cls.grading, cls.instructor)
    return run


def export(cls: ClassRoom, *options: str) -> subprocess.CompletedProcess:
    """`python -m autograde export` on grading/ (as root, as `grade` runs): ``final_grades.csv``
    with the scores given in formgrader; then grading/ back to the instructor."""
    run = subprocess.run(
        [sys.executable, "-m", "autograde", "export", str(cls.grading), *options],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    chown_tree(cls.grading, cls.instructor)
    return run


def feedback(cls: ClassRoom) -> dict[str, subprocess.CompletedProcess]:
    """The pages of grading/ handed back: `autograde feedback --format exchange` (each learner's
    pages under the edition's assignment they submitted to), then nbgrader's release_feedback of
    each assignment that has pages, as the instructor (it owns the exchange's feedback/)."""
    argv = [sys.executable, "-m", "autograde", "feedback", str(cls.grading), "--format", "exchange"]
    run = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    if run.returncode:
        raise RuntimeError(f"autograde feedback failed:\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    chown_tree(cls.grading, cls.instructor)
    # the course-folder layout release_feedback reads
    course = cls.grading / "handback" / "exchange"
    return {
        name: nbgrader(
            cls,
            cls.instructor,
            "release_feedback",
            name,
            f"--CourseDirectory.root={course}",
            cwd=course,
            role="instructor",
        )
        for name in editions().values()
        if any((course / "feedback").glob(f"*/{name}"))
    }


# ---- the hub


def start(cls: ClassRoom, timeout: float = 120) -> int:
    """Start JupyterHub (and, through it, the proxy and the formgrader service) for ``cls``; wait
    until it answers."""
    proxy = Path(cls.hub_root) / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
    env = {
        "PATH": f"{cls.env / 'bin'}:{proxy.parent}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "SERVING_OVERLAP_CLASS": str(cls.state / "class.json"),
        "CONFIGPROXY_AUTH_TOKEN": secrets.token_hex(32),
        "HUB_CONFIG_DIR": str(HERE),
    }
    log = open(cls.state / "hub.log", "ab")
    proc = subprocess.Popen(
        [str(cls.env / "bin" / "jupyterhub"), "-f", str(HERE / "jupyterhub_config.py")],
        cwd=cls.state,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        umask=0o022,
    )
    (cls.state / "hub.pid").write_text(str(proc.pid))
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(
                f"JupyterHub exited ({proc.returncode}):\n{tail(cls.state / 'hub.log')}"
            )
        try:
            urllib.request.urlopen(f"{cls.url}/hub/api/", timeout=5)
            return proc.pid
        except OSError:
            time.sleep(0.5)
    stop(cls)
    raise RuntimeError(
        f"JupyterHub did not answer within {timeout:.0f} s:\n{tail(cls.state / 'hub.log')}"
    )


def tail(path: Path, size: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return "(no log)"


def stop(cls: ClassRoom) -> None:
    """Stop the hub (it stops the servers and the service it started), then anything left of its
    process group and of the class's users."""
    pid_file = cls.state / "hub.pid"
    if pid_file.is_file():
        pid = int(pid_file.read_text())
        try:
            os.kill(pid, signal.SIGTERM)
            end = time.monotonic() + 30
            while (
                time.monotonic() < end
                and Path(f"/proc/{pid}").exists()
                and "zombie" not in _state_of(pid)
            ):
                time.sleep(0.2)
            os.killpg(pid, signal.SIGKILL)  # the proxy, if the hub left it
        except ProcessLookupError:
            pass
        pid_file.unlink()
    uids = set()
    for user in cls.users:
        try:
            uids.add(pwd.getpwnam(user).pw_uid)
        except KeyError:
            pass
    stop_processes_of(uids)


def _state_of(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/status").read_text().split("State:", 1)[1].split("\n", 1)[0].lower()
        )
    except (OSError, IndexError):
        return "zombie"


def remove(cls: ClassRoom) -> None:
    """Stop the class and remove its users, their homes and the class folder (the shared env/ and
    proxy/ stay)."""
    stop(cls)
    for user in cls.users:
        remove_user(user)
    shutil.rmtree(cls.root, ignore_errors=True)


def logins(cls: ClassRoom) -> str:
    lines = [
        f"JupyterHub: {cls.url}/hub/login  (formgrader: "
        f"{cls.url}/services/{COURSE_ID}/formgrader, for {cls.instructor})"
    ]
    lines += [f"  {user:<24} {cls.passwords[user]}" for user in cls.users]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hub/classroom.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "command", choices=["up", "down", "release", "grade", "export", "feedback", "status"]
    )
    parser.add_argument(
        "--class-dir",
        type=Path,
        default=HUB_ROOT / "class",
        help="the class folder (default: HUB_ROOT/class)",
    )
    parser.add_argument("--learners", type=int, default=3)
    parser.add_argument(
        "--prefix", default="so-", help="the start of every user name of the class (default so-)"
    )
    args, rest = parser.parse_known_args(argv)
    if os.geteuid() != 0:
        raise SystemExit(
            "run as root: the hub starts each person's server as their own Unix user "
            "(sudo make hub-up)"
        )
    os.umask(0o022)
    if args.command == "up":
        cls = create(args.class_dir, args.prefix, args.learners)
        start(cls)
        release(cls)
        print(logins(cls))
        print("stop it with: make hub-down")
    elif args.command == "down":
        if args.class_dir.exists():
            remove(ClassRoom.load(args.class_dir))
        print(f"the class in {args.class_dir} is down")
    else:
        cls = ClassRoom.load(args.class_dir)
        if args.command == "release":
            print("".join(run.stderr[-2000:] for run in release(cls).values()))
        elif args.command == "grade":
            run = grade(cls, *[r for r in rest if r != "--"])
            print(run.stdout[-4000:], run.stderr[-4000:])
            return run.returncode
        elif args.command == "export":
            run = export(cls, *[r for r in rest if r != "--"])
            print(run.stdout[-4000:], run.stderr[-4000:])
            return run.returncode
        elif args.command == "feedback":
            print("".join(run.stderr[-2000:] for run in feedback(cls).values()))
        else:
            print(logins(cls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
