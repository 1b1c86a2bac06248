"""What the commands hand each other through OUT, typed: what the intake found (``intake.json``: the
layout, each student's names in their LMS, who sent nothing, the LMS's late marks, problems and
notes) and what a grading run says of itself (``summary.json``). Each has one writer and one reader,
here (``to_json``, ``from_json``); the JSON is what earlier versions wrote, key for key."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..model import JsonRecord, empty_at_default, flattened, omitted

# an LMS student's keys in the order the intake has always written them
_LMS_KEYS = (
    "layout",
    "lms_id",
    "name",
    "submission_id",
    "folder",
    "timestamp",
    "secret",
    "assignment",
    "attachments",
    "zipped",
)


@dataclass(frozen=True)
class LmsStudent(JsonRecord):
    """What a download said of one student: the system (``layout``), its id and name for them, and
    what handing their pages back through it needs: Canvas's submission and each notebook's
    attachment ids, Moodle's folder, the exchange's ``timestamp.txt``, secret and assignment name,
    and the notebooks that came in the student's own zip. ``extra``: keys this version does not know
    (kept as they were)."""

    layout: str = ""
    lms_id: str | None = omitted()
    name: str | None = omitted()
    submission_id: str | None = omitted()
    folder: str | None = omitted()
    timestamp: str | None = omitted()
    secret: str | None = omitted()
    # the exchange: the nbgrader assignment (or edition's) submitted to
    assignment: str | None = omitted()
    # notebook -> the attachment id its file came as
    attachments: dict[str, str] = omitted(factory=dict)
    zipped: tuple[str, ...] = omitted(())
    extra: dict = flattened()

    @classmethod
    def from_json(cls, data) -> LmsStudent:
        if not isinstance(data, dict):
            return cls()
        known = {key: data[key] for key in _LMS_KEYS if key in data}
        known = {
            k: (str(v) if v is not None and k not in ("attachments", "zipped") else v)
            for k, v in known.items()
        }
        attachments = known.pop("attachments", None)
        zipped = known.pop("zipped", None)
        return cls(
            **known,
            attachments={str(k): str(v) for k, v in attachments.items()}
            if isinstance(attachments, dict)
            else {},
            zipped=tuple(str(nb) for nb in zipped) if isinstance(zipped, list) else (),
            extra={k: v for k, v in data.items() if k not in _LMS_KEYS},
        )


@dataclass(frozen=True)
class IntakeProblem(JsonRecord):
    """What the intake could not use, named: the file (as the source names it, or a roster's or a
    times file's ``file:line``), whose it is (None: nobody's it can tell), and why."""

    file: str
    student_id: str | None
    problem: str

    @classmethod
    def from_json(cls, data: dict) -> IntakeProblem:
        student = data.get("student_id")
        return cls(
            str(data.get("file", "")),
            None if student is None else str(student),
            str(data.get("problem", "")),
        )


@dataclass(frozen=True)
class IntakeFacts(JsonRecord):
    """What ``grade``'s intake found (``intake.json``): the layout, each student's names in their
    LMS, who is on the roster and sent nothing, the notebooks the LMS marked late, the problems and
    notes."""

    layout: str = ""
    students: dict[str, LmsStudent] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    late_in_lms: dict[str, tuple[str, ...]] = field(default_factory=dict)
    problems: tuple[IntakeProblem, ...] = ()
    notes: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data) -> IntakeFacts:
        """The facts as any version wrote them; what is not of their shape is left out."""
        data = data if isinstance(data, dict) else {}
        students = data.get("students") if isinstance(data.get("students"), dict) else {}
        late = data.get("late_in_lms") if isinstance(data.get("late_in_lms"), dict) else {}

        def listed(key: str) -> list:
            value = data.get(key)
            return value if isinstance(value, list) else []

        return cls(
            layout=str(data.get("layout") or ""),
            students={
                str(s): LmsStudent.from_json(who)
                for s, who in students.items()
                if isinstance(who, dict)
            },
            missing=tuple(str(s) for s in listed("missing")),
            late_in_lms={
                str(s): tuple(str(nb) for nb in nbs)
                for s, nbs in late.items()
                if isinstance(nbs, list)
            },
            problems=tuple(
                IntakeProblem.from_json(p) for p in listed("problems") if isinstance(p, dict)
            ),
            notes=tuple(str(n) for n in listed("notes")),
        )


@dataclass(frozen=True)
class BookInfo(JsonRecord):
    """What a grading run says of the course gradebook: its URL (masked), how many notebooks it
    recorded, and what could not be written (None: nothing)."""

    db_url: str | None = None
    notebooks_recorded: int = 0
    error: str | None = None

    @classmethod
    def from_json(cls, data) -> BookInfo:
        data = data if isinstance(data, dict) else {}
        return cls(data.get("db_url"), int(data.get("notebooks_recorded") or 0), data.get("error"))


@dataclass(frozen=True)
class ClusterInfo(JsonRecord):
    """Where a cluster ran a batch's jobs: the scheduler, how many workers, those left out and why,
    TLS."""

    scheduler: str
    workers: int
    left_out: dict[str, str] = field(default_factory=dict)
    tls: bool = False


@dataclass(frozen=True)
class SandboxInfo:
    """How a grading run isolated the learners' code (summary.json's ``sandbox``): bubblewrap here,
    with the limits and what enforces them (``run.sandbox.Sandbox.describe``); bubblewrap on every
    worker of a cluster; or nothing (``--no-sandbox``: ``enabled`` False and the ``warning``). What
    a run did not say is absent from its JSON, except the CPU limit, which a local description
    states even when none."""

    enabled: bool = False
    warning: str | None = None
    isolation: str | None = None
    bwrap: str | None = None
    limits_by: str | None = None  # cgroup-v1, cgroup-v2 or rlimit (None: not described here)
    memory_limit_bytes: int | None = None
    process_limit: int | None = None
    process_limit_enforced: bool | None = None
    cpu_limit_cores: float | None = None
    disk_limit_bytes: int | None = None

    def to_json(self) -> dict:
        data: dict = {"enabled": self.enabled}
        for f in fields(self)[1:]:
            value = getattr(self, f.name)
            if value is not None or (f.name == "cpu_limit_cores" and self.limits_by is not None):
                data[f.name] = value
        return data

    @classmethod
    def from_json(cls, data) -> SandboxInfo | None:
        """The description as any version wrote it (None: there is none, ``{}``)."""
        if not isinstance(data, dict) or not data:
            return None
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class Problem(JsonRecord):
    """A notebook that needs a look: whose, which, its status, what that means, and the detail."""

    student_id: str
    notebook: str
    status: str
    what_happened: str
    detail: str


@dataclass(frozen=True)
class LateProblem(JsonRecord):
    """A notebook whose lateness the late rule could not settle: whose, which, and why."""

    student_id: str
    notebook: str
    problem: str


@dataclass(frozen=True)
class Redaction(JsonRecord):
    """A feedback page with lines removed (they quoted the grader's tests or answers): whose, which,
    how many."""

    student_id: str
    notebook: str
    lines: int


def _listed(value) -> list:
    """The objects of a JSON list (nothing, when it is not one)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


@dataclass(frozen=True)
class Summary(JsonRecord):
    """What a grading run says of itself (``summary.json``): how many students and notebooks, the
    points, what waits for a person, the gradebook, the problems, the late problems, the matching
    notes, the grades table's columns, the sandbox, the redactions and, on a cluster, where the jobs
    ran."""

    students: int = 0
    notebooks_graded: int = 0
    notebooks_reused: int = 0
    max_total: float = 0.0
    max_auto: float = 0.0
    max_manual: float = 0.0
    manual_columns: list[str] = field(default_factory=list)
    manual_pending: int = 0
    needs_review: int = 0
    gradebook: BookInfo = empty_at_default(factory=BookInfo)
    problems: list[Problem] = field(default_factory=list)
    late_problems: list[LateProblem] = field(default_factory=list)
    matching_notes: dict[str, list[str]] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    sandbox: SandboxInfo | None = empty_at_default()
    redactions: list[Redaction] = field(default_factory=list)
    cluster: ClusterInfo | None = omitted()

    @classmethod
    def from_json(cls, data) -> Summary:
        """A summary as any version wrote it. Raises ValueError when it is not one (no list of
        columns)."""
        if not isinstance(data, dict) or not isinstance(data.get("columns"), list):
            raise ValueError("not the summary `grade` writes (no list of columns)")
        known = {
            f.name: data[f.name] for f in fields(cls) if f.name in data and f.name != "cluster"
        }
        if not isinstance(known.get("matching_notes"), dict):
            known["matching_notes"] = {}
        known["gradebook"] = BookInfo.from_json(known.get("gradebook"))
        known["sandbox"] = SandboxInfo.from_json(known.get("sandbox"))
        problems = known.get("problems") if isinstance(known.get("problems"), list) else []
        known["problems"] = [
            Problem(**{f.name: str(p.get(f.name, "")) for f in fields(Problem)})
            for p in problems
            if isinstance(p, dict)
        ]
        known["late_problems"] = [
            LateProblem(
                str(p.get("student_id", "")), str(p.get("notebook", "")), str(p.get("problem", ""))
            )
            for p in _listed(known.get("late_problems"))
        ]
        known["redactions"] = [
            Redaction(
                str(r.get("student_id", "")),
                str(r.get("notebook", "")),
                r["lines"] if isinstance(r.get("lines"), int) else 0,
            )
            for r in _listed(known.get("redactions"))
        ]
        return cls(**known)
