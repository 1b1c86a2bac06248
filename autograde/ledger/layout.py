"""OUT's layout: every file and folder the grader keeps in OUT, named here once.

OUT is an nbgrader course folder (formgrader and ``nbgrader export`` work in it), and so is every
job folder a notebook is graded in: :class:`CourseFolder` names nbgrader's layout for both,
:class:`Out` the grader's own files beside it, and :class:`JobFolder` what a grading process leaves
in its job folder. A cluster's worker lays its task folder out as OUT (``Out`` on its folder). No
other module names these files: each takes its paths from here, and reads and writes OUT through the
ledger."""

from __future__ import annotations

from pathlib import Path

NOTEBOOK = ".ipynb"


class CourseFolder:
    """nbgrader's course-folder layout under ``root``: the config and gradebook it reads, and each
    step's notebook of a student (``submitted``, ``autograded``, ``feedback``), per assignment."""

    CONFIG = "nbgrader_config.py"
    GRADEBOOK = "gradebook.db"
    SUBMITTED, AUTOGRADED, FEEDBACK = "submitted", "autograded", "feedback"
    TIMESTAMP = "timestamp.txt"  # beside a submission: its time, as nbgrader writes it
    # beside a submission on the exchange: the key fetch_feedback finds pages by
    SECRET = "submission_secret.txt"

    def __init__(self, root: Path, assignment: str):
        self.root, self.assignment = Path(root), assignment

    @property
    def config(self) -> Path:
        return self.root / self.CONFIG

    @property
    def gradebook(self) -> Path:
        return self.root / self.GRADEBOOK

    def _step(self, step: str, student: str, notebook: str | None, suffix: str) -> Path:
        folder = self.root / step / student / self.assignment
        return folder if notebook is None else folder / f"{notebook}{suffix}"

    def submitted(self, student: str, notebook: str | None = None) -> Path:
        """The submitted notebook (the folder of a student's submission when ``notebook`` is
        None)."""
        return self._step(self.SUBMITTED, student, notebook, NOTEBOOK)

    def autograded(self, student: str, notebook: str | None = None) -> Path:
        return self._step(self.AUTOGRADED, student, notebook, NOTEBOOK)

    def feedback(self, student: str, notebook: str | None = None, suffix: str = ".html") -> Path:
        """nbgrader's feedback of a notebook (in a job folder, its page data: ``suffix`` .json)."""
        return self._step(self.FEEDBACK, student, notebook, suffix)

    def timestamp(self, student: str, step: str = SUBMITTED) -> Path:
        return self.root / step / student / self.assignment / self.TIMESTAMP

    def secret(self, student: str, step: str = FEEDBACK) -> Path:
        return self.root / step / student / self.assignment / self.SECRET


class JobFolder(CourseFolder):
    """The course folder one notebook is graded in (``Out.job``): what the grader prepares in it for
    its grading process, and what that process leaves there."""

    RESULT = "result.json"  # model.JobOutcome, as the grading process writes it
    STARTED = "started"  # the time the grading process started the notebook
    SUBMISSION_DIGEST = "submission.sha256"  # the digest of the student's whole submission as sent
    EDITION = "edition"  # the language of the edition the submission was written in

    @property
    def result(self) -> Path:
        return self.root / self.RESULT

    @property
    def started(self) -> Path:
        return self.root / self.STARTED

    @property
    def submission_digest(self) -> Path:
        return self.root / self.SUBMISSION_DIGEST

    @property
    def edition(self) -> Path:
        return self.root / self.EDITION

    def returned(self, student: str, notebook: str) -> dict[str, str]:
        """The files of a job that travel back from a cluster's worker, by the name they travel
        under, each as a path relative to the job folder."""
        return {
            "result": self.RESULT,
            "autograded": self.autograded(student, notebook).relative_to(self.root).as_posix(),
            "submitted": self.submitted(student, notebook).relative_to(self.root).as_posix(),
            "feedback": self.feedback(student, notebook, ".json").relative_to(self.root).as_posix(),
        }


class Out(CourseFolder):
    """OUT: nbgrader's course folder, and the grader's own files in it."""

    # what a command reads of the last grading, and writes for the next
    GRADES, FINAL = "grades.csv", "final_grades.csv"
    LOG, SUMMARY, INTAKE, REJECTED = "log.jsonl", "summary.json", "intake.json", "rejected_ids.json"
    LATE_SPEC, GRADEBOOK_URL = ".late.json", ".gradebook.json"
    STATE, KEY, PAGE_DATA = ".state", ".key", ".pages"
    LOGS, FAULTS = "logs", "grader-faults.log"
    HANDBACK = "handback"
    REPORT, SIMILARITY = "report", "similarity"  # .html and .json each
    LMS_FEEDBACK = "{system}_feedback.zip"  # in HANDBACK: one zip of every page for an LMS's upload
    CANVAS_GRADES, MOODLE_GRADES, MOODLE_WORKSHEET = (
        "canvas_grades.csv",
        "moodle_grades.csv",
        "moodle_worksheet.csv",
    )
    # the grader's own scratch and caches
    MASTER, MASTER_DIGEST = ".course", ".course.digest"
    WORK, SETTINGS = ".work", ".settings.json"
    WORKER_LOG, SANDBOX_LEDGER = "worker.log", "sandbox.ledger"
    SANDBOX, LOCK, PROBE = ".sandbox", ".lock", ".probe"

    def __init__(self, root: Path, assignment: str = ""):
        super().__init__(root, assignment)

    @classmethod
    def own_names(cls) -> frozenset[str]:
        """The names the grader gives its own files and folders in OUT and in a job folder (a job's
        ``started`` and ``edition`` aside: words too common to tell apart): no module outside the
        ledger names one (tests/test_layout.py). nbgrader's course-folder names (``CourseFolder``)
        are OUT's too, and every job folder's: no module outside the ledger builds a path with
        one."""
        plain = {
            value for key, value in vars(cls).items() if key.isupper() and isinstance(value, str)
        }
        pages = {
            f"{name}{suffix}"
            for name in (cls.REPORT, cls.SIMILARITY)
            for suffix in (".html", ".json")
        }
        job = {JobFolder.RESULT, JobFolder.SUBMISSION_DIGEST}
        return frozenset(
            (plain - {cls.REPORT, cls.SIMILARITY, cls.LMS_FEEDBACK})
            | pages
            | job
            | {cls.LMS_FEEDBACK.format(system="")}
        )

    @staticmethod
    def course_folder_names() -> frozenset[str]:
        return frozenset(
            value
            for key, value in vars(CourseFolder).items()
            if key.isupper() and isinstance(value, str)
        )

    # -- the tables and what grading found
    @property
    def grades(self) -> Path:
        return self.root / self.GRADES

    @property
    def final(self) -> Path:
        return self.root / self.FINAL

    @property
    def log(self) -> Path:
        return self.root / self.LOG

    @property
    def summary(self) -> Path:
        return self.root / self.SUMMARY

    @property
    def intake(self) -> Path:
        return self.root / self.INTAKE

    @property
    def rejected(self) -> Path:
        return self.root / self.REJECTED

    @property
    def late_spec(self) -> Path:
        return self.root / self.LATE_SPEC

    @property
    def gradebook_url(self) -> Path:
        return self.root / self.GRADEBOOK_URL

    # -- each notebook's record, page and logs
    @property
    def state(self) -> Path:
        return self.root / self.STATE

    @property
    def key(self) -> Path:
        return self.state / self.KEY

    def record(self, student: str, notebook: str) -> Path:
        return self.state / student / f"{notebook}.json"

    def page_data(self, student: str, notebook: str) -> Path:
        return self.root / self.PAGE_DATA / student / f"{notebook}.json"

    @property
    def pages(self) -> Path:
        """The feedback pages handed back: ``pages/<student>/<notebook>.html``."""
        return self.root / self.FEEDBACK

    def page(self, student: str, notebook: str) -> Path:
        return self.pages / student / f"{notebook}.html"

    def notebook_log(self, student: str, notebook: str) -> Path:
        return self.root / self.LOGS / student / f"{notebook}.log"

    def faults(self, student: str) -> Path:
        return self.root / self.LOGS / student / self.FAULTS

    def shown(self, path: Path) -> str:
        """``path`` as a page or a message names it: relative to OUT."""
        return path.relative_to(self.root).as_posix()

    # -- what the commands after grading write
    @property
    def handback(self) -> Path:
        return self.root / self.HANDBACK

    def student_zip(self, student: str) -> Path:
        return self.handback / f"{student}.zip"

    def lms_feedback(self, system: str) -> Path:
        """The one zip of every page for an LMS's upload (``canvas``, ``moodle``)."""
        return self.handback / self.LMS_FEEDBACK.format(system=system)

    @property
    def exchange_feedback(self) -> CourseFolder:
        """The course folder nbgrader's ``release_feedback`` hands pages out from."""
        return CourseFolder(self.handback / "exchange", self.assignment)

    def page_and_numbers(self, name: str) -> tuple[Path, Path]:
        """A page of the class (``REPORT``, ``SIMILARITY``) and its numbers: ``name``.html and
        .json."""
        return self.root / f"{name}.html", self.root / f"{name}.json"

    @property
    def canvas_grades(self) -> Path:
        return self.root / self.CANVAS_GRADES

    @property
    def moodle_grades(self) -> Path:
        return self.root / self.MOODLE_GRADES

    # -- scratch and caches
    @property
    def master(self) -> Path:
        return self.root / self.MASTER

    @property
    def master_digest(self) -> Path:
        return self.root / self.MASTER_DIGEST

    @property
    def work(self) -> Path:
        return self.root / self.WORK

    @property
    def worker_settings(self) -> Path:
        return self.work / self.SETTINGS

    def work_of(self, student: str) -> Path:
        return self.work / student

    def job(self, student: str, notebook: str) -> JobFolder:
        return JobFolder(self.work / student / notebook, self.assignment)

    def worker_log(self, student: str) -> Path:
        return self.work_of(student) / self.WORKER_LOG

    def sandbox_ledger(self, student: str) -> Path:
        return self.work_of(student) / self.SANDBOX_LEDGER

    @property
    def sandbox(self) -> Path:
        return self.root / self.SANDBOX

    @property
    def lock(self) -> Path:
        return self.root / self.LOCK

    @property
    def probe(self) -> Path:
        return self.root / self.PROBE
