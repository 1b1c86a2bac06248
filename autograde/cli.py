"""python -m autograde
{release,check,grade,export,feedback,report,similarity,validate,rules,bundle,translations}"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

from tools.i18n import EDITIONS

from .course import Course, UnusableInput
from .errors import GraderError
from .ledger.layout import Out
from .model import GiB, MiB, Options
from .term import registry

DEFAULTS = Options()  # every grading limit's default, as the grader's model holds it

EXIT_OK, EXIT_FAILED, EXIT_UNUSABLE, EXIT_INTERRUPTED = 0, 1, 2, 130
log = logging.getLogger("autograde.cli")


class _Stderr(logging.StreamHandler):
    """The grader's warnings on stderr (whatever sys.stderr is when one is written), as the commands
    always said them: ``WARNING: ...``, ``error: ...``, a note as it is."""

    PREFIX = {logging.WARNING: "WARNING: ", logging.ERROR: "error: "}

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass

    def format(self, record: logging.LogRecord) -> str:
        return self.PREFIX.get(record.levelno, "") + super().format(record)


def configure_logging() -> None:
    """The ``autograde`` loggers' warnings and notes to stderr (once per process)."""
    logger = logging.getLogger("autograde")
    logger.setLevel(logging.INFO)
    if not any(isinstance(handler, _Stderr) for handler in logger.handlers):
        logger.addHandler(_Stderr())


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _gib(text: str) -> float:
    value = float(text)
    if not 0.25 <= value <= 1024:
        raise argparse.ArgumentTypeError("give the limit in GiB, between 0.25 and 1024")
    return value


def _term_arguments(grade: argparse.ArgumentParser) -> None:
    """grade's options for a term: the intake's layout and the deadlines."""
    grade.add_argument(
        "--layout",
        choices=registry.layouts(),
        help="the layout of SUBMISSIONS (default: recognised)",
    )
    grade.add_argument(
        "--pattern",
        metavar="REGEX",
        help="with --layout pattern: named groups student_id, optional file_id and timestamp",
    )
    grade.add_argument(
        "--roster",
        type=Path,
        metavar="CSV",
        help="student_id, lms_id, name: LMS ids to student ids; lists who sent nothing",
    )
    grade.add_argument(
        "--timestamps",
        type=Path,
        metavar="CSV",
        help="student_id, [notebook,] submitted_at: submission times",
    )
    grade.add_argument(
        "--trust-owners",
        action="store_true",
        help="exchange inbound/: take a submission folder owned by another account than the "
        "student it names (refused by default)",
    )
    grade.add_argument(
        "--deadline",
        metavar="TIME",
        help="ISO 8601 with a time zone, e.g. 2026-12-20T23:59:00+08:00 (or [grading] deadline)",
    )
    grade.add_argument(
        "--late-policy",
        metavar="POLICY",
        help="none (the default: lateness is reported, nothing "
        "taken), zero, or deduct:10%%/day[,floor:50%%]",
    )
    grade.add_argument(
        "--extensions",
        type=Path,
        metavar="CSV",
        help="student_id,deadline: a student's own deadline",
    )


def _export_arguments(export: argparse.ArgumentParser) -> None:
    """export's options: which gradebook, which table, and the LMS's ids, column and rules."""
    from .ledger.late import UNKNOWN_CHOICES

    _out_argument(export)
    export.add_argument("--db-url", metavar="URL", help="the gradebook, if not the one OUT records")
    export.add_argument(
        "--to",
        type=Path,
        help="the CSV to write (default: OUT/final_grades.csv, OUT/canvas_grades.csv, "
        "OUT/moodle_grades.csv; moodle_worksheet.csv beside it)",
    )
    export.add_argument(
        "--format",
        choices=(registry.PLAIN_EXPORT, *registry.export_formats()),
        default=registry.PLAIN_EXPORT,
        help="csv (every column); canvas (its gradebook import); moodle (the gradebook's CSV "
        "import and the assignment's offline grading worksheet)",
    )
    export.add_argument(
        "--roster",
        type=Path,
        metavar="CSV",
        help="student_id, lms_id (Canvas user id, or Moodle participant id), and optionally "
        "name, email, section, login, sis_user_id, id_number",
    )
    export.add_argument(
        "--column",
        metavar="NAME",
        help="the grade column's title (Canvas: 'Title (assignment id)' also gives the id)",
    )
    export.add_argument(
        "--assignment-id",
        metavar="N",
        help="Canvas: the assignment's id (the N of /assignments/N); 'new' lets Canvas create one",
    )
    export.add_argument(
        "--late-unknown",
        choices=UNKNOWN_CHOICES,
        default=UNKNOWN_CHOICES[0],
        help="an LMS file under a late policy when a student's lateness is unknown: refuse "
        "(the default: exit 2, naming them), "
        "or take the least penalty the facts allow (none without a time; one started day "
        "or hour for the LMS's late mark)",
    )
    export.add_argument(
        "--omit-unmatched",
        action="store_true",
        help="leave students without the LMS's id out of "
        "an LMS file (default: exit 2, naming them)",
    )


def _grade_arguments(grade: argparse.ArgumentParser) -> None:
    """grade's options: where, how many at once, the grading limits (defaults: the model's Options),
    where to grade."""
    grade.add_argument(
        "submissions",
        type=Path,
        help="a folder or a .zip: its layout is recognised (or give --layout)",
    )
    grade.add_argument("--out", type=Path, required=True)
    grade.add_argument(
        "--workers",
        type=_positive,
        default=DEFAULTS.workers,
        help="students graded at once (default: cores)",
    )
    _limit_arguments(grade)
    _where_arguments(grade)
    grade.add_argument("--no-progress", action="store_true")
    _term_arguments(grade)


def _limit_arguments(grade: argparse.ArgumentParser) -> None:
    """grade's limits on each notebook (defaults: the model's Options) and the sandbox switch."""
    grade.add_argument(
        "--cell-timeout",
        type=_positive,
        default=DEFAULTS.cell_timeout,
        help="seconds per cell before it is interrupted",
    )
    grade.add_argument(
        "--notebook-timeout",
        type=_positive,
        default=DEFAULTS.notebook_timeout,
        help="seconds per notebook before its kernel is killed",
    )
    grade.add_argument(
        "--memory-limit",
        type=_gib,
        default=DEFAULTS.memory_limit / GiB,
        metavar="GIB",
        help="memory per notebook in GiB (default %(default)g); past it the notebook is "
        "stopped and reported",
    )
    grade.add_argument(
        "--process-limit",
        type=_positive,
        default=DEFAULTS.process_limit,
        help="processes per notebook (default %(default)s)",
    )
    grade.add_argument(
        "--max-notebook-mb",
        type=_positive,
        default=DEFAULTS.max_notebook_bytes // MiB,
        metavar="MB",
        help="a submitted notebook larger than this is refused unread as invalid_notebook "
        "(default %(default)s)",
    )
    grade.add_argument(
        "--no-sandbox",
        action="store_true",
        help="UNSAFE: run submissions without the sandbox (only for code you trust; recorded in "
        "summary.json)",
    )


def _where_arguments(grade: argparse.ArgumentParser) -> None:
    """Where grade keeps the gradebook and where it grades: this machine or a Dask cluster."""
    grade.add_argument(
        "--db-url",
        metavar="URL",
        help="the course gradebook, as nbgrader's db_url (e.g. postgresql://user@host/db; the "
        "password may come from PGPASSWORD or ~/.pgpass); default: OUT/gradebook.db, or the one "
        "OUT used before",
    )
    grade.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="grade on a Dask cluster: the scheduler's address (tcp://HOST:8786, or tls://... "
        "with the --tls-* files); one task per student, each worker with the course installed",
    )
    grade.add_argument(
        "--tls-ca-file",
        metavar="PEM",
        help="with a tls:// scheduler: the CA that signed the cluster's certificates",
    )
    grade.add_argument(
        "--tls-cert", metavar="PEM", help="with a tls:// scheduler: this client's certificate"
    )
    grade.add_argument(
        "--tls-key", metavar="PEM", help="with a tls:// scheduler: this client's private key"
    )


def _out_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", type=Path, metavar="OUT", help="the folder `grade` wrote")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m autograde",
        description="Instructor command for Serving Overlap and State Handoff.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("release", help="regenerate notebooks/ from solutions/ with nbgrader")
    check = sub.add_parser(
        "check",
        help="release in sync, nothing leaked, sources score full "
        "marks, untouched release scores zero",
    )
    check.add_argument("--workers", type=_positive, default=DEFAULTS.workers)
    _grade_arguments(
        sub.add_parser(
            "grade",
            help="grade SUBMISSIONS (a folder per student, nbgrader's "
            "exchange, a Canvas or Moodle download) into OUT",
        )
    )
    _export_arguments(
        sub.add_parser(
            "export",
            help="the final table from the gradebook: automatic and manual scores together (CSV)",
        )
    )
    _out_commands(sub)
    sub.add_parser(
        "rules",
        help="the graded rules no public check stands behind, each with a "
        "wrong answer that shows it",
    )
    validate = sub.add_parser(
        "validate", help="run a notebook's public checks (exit 1 when one fails)"
    )
    validate.add_argument("files", type=Path, nargs="+")
    _translations_command(sub)
    bundle = sub.add_parser("bundle", help="build the learner zip and prove it leaks nothing")
    bundle.add_argument("--out", type=Path, default=Path("dist/serving-overlap-course.zip"))
    return parser


def _out_commands(sub) -> None:
    """The commands that read what grade wrote in OUT: similarity, feedback, report."""
    similarity = sub.add_parser(
        "similarity",
        help="OUT/similarity.html and .json: the most "
        "similar answers per TODO (reads OUT, runs "
        "nothing)",
    )
    _out_argument(similarity)
    similarity.add_argument(
        "--threshold",
        type=float,
        help="the score from which a pair is flagged (default: the "
        "course's threshold, which similarity.json records)",
    )
    feedback = sub.add_parser(
        "feedback",
        help="hand the feedback pages back: a zip per student, "
        "or the LMS's or nbgrader's upload layout",
    )
    _out_argument(feedback)
    feedback.add_argument("--format", choices=tuple(registry.handback_formats()), default="zip")
    report = sub.add_parser(
        "report",
        help=f"the class report: OUT/{Out.REPORT}.html (figures, "
        "per-idea pass rates, problems) and its .json",
    )
    _out_argument(report)
    report.add_argument(
        "--language",
        choices=EDITIONS,
        default=EDITIONS[0],
        help="the language of the graded ideas' texts (default %(default)s)",
    )


def _translations_command(sub) -> None:
    """translations: update the catalogs from the sources, show their status, cut the font."""
    translations = sub.add_parser(
        "translations",
        help="the translation catalogs: `update` them from the sources, or show their `status`",
    )
    translations.add_argument(
        "action",
        choices=("update", "status", "font"),
        help="font: rebuild the CJK font subset the runtime ships",
    )
    translations.add_argument(
        "--font",
        type=Path,
        help="with font: the Noto Sans CJK file to cut it from (default: Debian's fonts-noto-cjk)",
    )
    translations.add_argument(
        "--only",
        metavar="NAME",
        action="append",
        help="one catalog: a notebook's name, `grader` or `runtime` (repeatable)",
    )
    translations.add_argument(
        "--show", action="store_true", help="with status: name every unit left to do"
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging()
    try:
        course = Course.load()
        return {
            "release": cmd_release,
            "check": cmd_check,
            "grade": cmd_grade,
            "export": cmd_export,
            "feedback": cmd_feedback,
            "similarity": cmd_similarity,
            "report": cmd_report,
            "validate": cmd_validate,
            "rules": cmd_rules,
            "bundle": cmd_bundle,
            "translations": cmd_translations,
        }[args.command](course, args)
    # the instructor's input, a release, a gradebook, a worker: said, not a traceback
    except GraderError as exc:
        from .ledger.gradebook import mask_text

        log.error(mask_text(str(exc), getattr(args, "db_url", None)))
        return EXIT_UNUSABLE
    except KeyboardInterrupt:
        print(
            "\ninterrupted: what was graded is kept; run the same command again to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


def cmd_release(course: Course, args) -> int:
    from .publish.release import write_release

    for path in write_release(course):
        print(f"wrote {path.relative_to(course.root)}")
    return EXIT_OK


def cmd_translations(course: Course, args) -> int:
    from .authoring import translations

    if args.action == "font":
        translations.build_font(course, args.font)
    else:
        translations.update_or_report(course, args.action == "update", args.only, args.show)
    return EXIT_OK


def cmd_rules(course: Course, args) -> int:
    from .authoring.rules import print_rules

    return EXIT_OK if print_rules(course) else EXIT_FAILED


def cmd_check(course: Course, args) -> int:
    from .authoring.check import check_release

    failures = check_release(course, args.workers)
    for failure in failures:
        print(f"  ✗ {failure}")
    print("check passed" if not failures else f"check FAILED ({len(failures)} problem(s))")
    return EXIT_OK if not failures else EXIT_FAILED


def grading_options(args) -> Options:
    """grade's command line as the model's Options (GiB and MB as bytes)."""
    if not args.scheduler and (args.tls_ca_file or args.tls_cert or args.tls_key):
        raise UnusableInput(
            "--tls-ca-file, --tls-cert and --tls-key are for a cluster: give "
            "--scheduler tls://HOST:PORT too"
        )
    return Options(
        workers=args.workers,
        cell_timeout=args.cell_timeout,
        notebook_timeout=args.notebook_timeout,
        progress=not args.no_progress,
        sandbox=not args.no_sandbox,
        memory_limit=int(args.memory_limit * GiB),
        process_limit=args.process_limit,
        db_url=args.db_url,
        max_notebook_bytes=args.max_notebook_mb * MiB,
        scheduler=args.scheduler,
        tls_ca_file=args.tls_ca_file,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
    )


def cmd_grade(course: Course, args) -> int:
    from .executors import executor_for
    from .grading import grade_batch

    begin = time.monotonic()
    options = grading_options(args)
    # chosen once: this machine, or the Dask cluster at --scheduler
    executor = executor_for(options)
    from .ledger.folder import Ledger
    from .ledger.late import late_spec
    from .term.intake import check_extensions, take_in

    late = late_spec(course.grading, args.deadline, args.late_policy, args.extensions)
    ledger = Ledger(args.out, course)
    with tempfile.TemporaryDirectory(prefix="course-intake-") as scratch:
        intake = take_in(
            course,
            args.submissions,
            Path(scratch) / "submissions",
            ledger,
            args.layout,
            args.pattern,
            args.roster,
            args.timestamps,
            trust_owners=args.trust_owners,
        )
        check_extensions(late.extensions, intake)
        late.times, late.disputed = intake.times, intake.disputed
        summary = grade_batch(
            course,
            intake.folder,
            args.out,
            options,
            executor=executor,
            late=late,
            absent=intake.missing,
            intake=ledger.intake,
            found=intake.found,
        )
    elapsed = time.monotonic() - begin
    print(
        f"graded {summary.students} student(s) in {elapsed:.1f} s "
        f"({summary.notebooks_graded} notebooks graded, {summary.notebooks_reused} reused "
        "from an earlier run)"
    )
    print(f"grades: {ledger.out.grades}   feedback: {ledger.out.pages}   log: {ledger.out.log}")
    book = summary.gradebook
    print(
        f"gradebook: {book.db_url} ({book.notebooks_recorded} notebook(s) recorded); "
        f"{summary.manual_pending} written answer(s) wait for a person: formgrader "
        f"(`jupyter lab` in {args.out}), "
        f"then `python -m autograde export {args.out}`"
    )
    if summary.problems:
        print(f"{len(summary.problems)} notebook(s) need a look (details in {ledger.out.summary}):")
        for p in summary.problems:
            print(f"  {p.student_id:<16} {p.notebook:<28} {p.what_happened}")
    for student, notes in summary.matching_notes.items():
        for note in notes:
            print(f"  note {student}: {note}")
    for item in summary.late_problems:
        print(f"  late {item.student_id}/{item.notebook}: {item.problem}")
    return EXIT_OK


def cmd_export(course: Course, args) -> int:
    from .term.export import export

    roster = None
    if args.roster:
        from .ledger.facts import IntakeProblem
        from .term.intake import read_roster

        problems: list[IntakeProblem] = []
        roster = read_roster(args.roster, problems)  # the rows grade accepted, the same rows named
        for problem in problems:
            log.warning(f"roster problem: {problem.file}: {problem.problem}")
    target, info = export(
        course,
        args.out,
        args.db_url,
        args.to,
        args.format,
        roster,
        args.column,
        assignment_id=args.assignment_id,
        late_unknown=args.late_unknown,
        omit_unmatched=args.omit_unmatched,
    )
    written = " and ".join(str(path) for path in info.written)
    print(
        f"wrote {written}: {info.students} student(s) from {info.db_url}, {info.pending} "
        "written answer(s) still pending"
    )
    if info.omitted:
        log.warning(f"left out of the LMS file (no LMS id): {', '.join(info.omitted)}")
    for warning in info.warnings:
        log.warning(warning)
    if info.least_penalty:
        log.info(
            f"note: the least late penalty was taken for {', '.join(info.least_penalty)} "
            "(their lateness is unknown)"
        )
    if args.format == "canvas" and args.assignment_id == "new":
        log.warning("no assignment id: Canvas's import will create a NEW assignment")
    if info.needs_review:
        shown = ", ".join(info.needs_review[:10]) + (" ..." if len(info.needs_review) > 10 else "")
        log.warning(
            f"{len(info.needs_review)} score(s) a person gave are marked `review` and not "
            "counted: the "
            f"answer changed since it was scored ({shown}). Score them again in "
            "formgrader, then export again."
        )
    return EXIT_OK


def cmd_feedback(course: Course, args) -> int:
    from .term.handback import hand_back

    where, info = hand_back(course, args.out, args.format)
    print(f"wrote {where}: {info.pages} page(s) of {info.students} student(s)")
    zipped = set(info.zipped)
    others = [s for s in info.unmatched if s not in zipped]
    if others:
        log.warning(
            f"not in the {args.format} layout (their files did not come from that LMS): "
            f"{', '.join(others)}"
        )
    if zipped:
        log.warning(
            "sent a zip of notebooks, which nbgrader's fetch_feedback cannot match to a "
            f"page: {', '.join(sorted(zipped))} "
            "(released all the same; hand theirs back with --format zip)"
        )
    return EXIT_OK


def cmd_similarity(course: Course, args) -> int:
    from .term.similarity import write_similarity

    page, numbers, data = write_similarity(course, args.out, args.threshold)
    flagged = sum(todo.pairs_above_threshold for todo in data.todos)
    print(
        f"wrote {page} and {numbers}: {flagged} pair(s) at or above {data.threshold:g} over "
        f"{len(data.todos)} TODO(s)"
    )
    return EXIT_OK


def cmd_report(course: Course, args) -> int:
    from .term.report import write_report

    page, numbers, data = write_report(course, args.out, args.language)
    print(
        f"wrote {page} and {numbers}: {data.students} student(s), {len(data.ideas)} "
        "graded idea(s), "
        f"{sum(p.count for p in data.problems)} problem(s) in {len(data.problems)} kind(s)"
    )
    return EXIT_OK


def cmd_validate(course: Course, args) -> int:
    from .authoring.validate import validate_notebook

    ok_all = True
    for path in args.files:
        if not path.is_file():
            raise UnusableInput(f"{path} is not a file")
        ok, lines = validate_notebook(path)
        ok_all &= ok
        print("\n".join(lines))
    return EXIT_OK if ok_all else EXIT_FAILED


def cmd_bundle(course: Course, args) -> int:
    from .authoring.bundle import build_bundle
    from .publish.leaks import scan_zip

    archive = build_bundle(course, args.out)
    problems = scan_zip(course, archive)
    for problem in problems:
        print(f"  ✗ {problem}")
    if problems:
        archive.unlink()
        print("bundle REFUSED: it would leak answers or hidden tests")
        return EXIT_FAILED
    print(f"wrote {archive} (no solution, no hidden test)")
    return EXIT_OK
