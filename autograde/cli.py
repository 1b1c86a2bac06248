"""python -m autograde {release,check,grade,export,feedback,report,similarity,validate,bundle,translations}"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tools.i18n import EDITIONS

from .course import Course, UnusableInput

EXIT_OK, EXIT_FAILED, EXIT_UNUSABLE, EXIT_INTERRUPTED = 0, 1, 2, 130


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
        "--layout", choices=("folders", "exchange", "canvas", "moodle", "pattern"), help="the layout of SUBMISSIONS (default: recognised)"
    )
    grade.add_argument("--pattern", metavar="REGEX", help="with --layout pattern: named groups student_id, optional file_id and timestamp")
    grade.add_argument("--roster", type=Path, metavar="CSV", help="student_id, lms_id, name: LMS ids to student ids; lists who sent nothing")
    grade.add_argument("--timestamps", type=Path, metavar="CSV", help="student_id, [notebook,] submitted_at: submission times")
    grade.add_argument(
        "--trust-owners",
        action="store_true",
        help="exchange inbound/: take a submission folder owned by another account than the student it names (refused by default)",
    )
    grade.add_argument("--deadline", metavar="TIME", help="ISO 8601 with a time zone, e.g. 2026-12-20T23:59:00+08:00 (or [grading] deadline)")
    grade.add_argument(
        "--late-policy", metavar="POLICY", help="none (the default: lateness is reported, nothing taken), zero, or deduct:10%%/day[,floor:50%%]"
    )
    grade.add_argument("--extensions", type=Path, metavar="CSV", help="student_id,deadline: a student's own deadline")


def _export_arguments(export: argparse.ArgumentParser) -> None:
    """export's options: which gradebook, which table, and the LMS's ids, column and rules."""
    export.add_argument("out", type=Path, metavar="OUT", help="the folder `grade` wrote")
    export.add_argument("--db-url", metavar="URL", help="the gradebook, if not the one OUT records")
    export.add_argument(
        "--to",
        type=Path,
        help="the CSV to write (default: OUT/final_grades.csv, OUT/canvas_grades.csv, OUT/moodle_grades.csv; moodle_worksheet.csv beside it)",
    )
    export.add_argument(
        "--format",
        choices=("csv", "canvas", "moodle"),
        default="csv",
        help="csv (every column); canvas (its gradebook import); moodle (the gradebook's CSV import and the assignment's offline grading worksheet)",
    )
    export.add_argument(
        "--roster",
        type=Path,
        metavar="CSV",
        help="student_id, lms_id (Canvas user id, or Moodle participant id), and optionally name, email, section, login, sis_user_id, id_number",
    )
    export.add_argument("--column", metavar="NAME", help="the grade column's title (Canvas: 'Title (assignment id)' also gives the id)")
    export.add_argument("--assignment-id", metavar="N", help="Canvas: the assignment's id (the N of /assignments/N); 'new' lets Canvas create one")
    export.add_argument(
        "--late-unknown",
        choices=("refuse", "least-penalty"),
        default="refuse",
        help="an LMS file under a late policy when a student's lateness is unknown: refuse (the default: exit 2, naming them), "
        "or take the least penalty the facts allow (none without a time; one started day or hour for the LMS's late mark)",
    )
    export.add_argument(
        "--omit-unmatched", action="store_true", help="leave students without the LMS's id out of an LMS file (default: exit 2, naming them)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograde", description="Instructor command for Serving Overlap and State Handoff.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("release", help="regenerate notebooks/ from solutions/ with nbgrader")
    check = sub.add_parser("check", help="release in sync, nothing leaked, sources score full marks, untouched release scores zero")
    check.add_argument("--workers", type=_positive, default=max(1, os.cpu_count() or 1))
    grade = sub.add_parser("grade", help="grade SUBMISSIONS (a folder per student, nbgrader's exchange, a Canvas or Moodle download) into OUT")
    grade.add_argument("submissions", type=Path, help="a folder or a .zip: its layout is recognised (or give --layout)")
    grade.add_argument("--out", type=Path, required=True)
    grade.add_argument("--workers", type=_positive, default=max(1, os.cpu_count() or 1), help="students graded at once (default: cores)")
    grade.add_argument("--cell-timeout", type=_positive, default=30, help="seconds per cell before it is interrupted")
    grade.add_argument("--notebook-timeout", type=_positive, default=300, help="seconds per notebook before its kernel is killed")
    grade.add_argument(
        "--memory-limit",
        type=_gib,
        default=4.0,
        metavar="GIB",
        help="memory per notebook in GiB (default 4); past it the notebook is stopped and reported",
    )
    grade.add_argument("--process-limit", type=_positive, default=256, help="processes per notebook (default 256)")
    grade.add_argument(
        "--max-notebook-mb",
        type=_positive,
        default=20,
        metavar="MB",
        help="a submitted notebook larger than this is refused unread as invalid_notebook (default 20)",
    )
    grade.add_argument(
        "--no-sandbox", action="store_true", help="UNSAFE: run submissions without the sandbox (only for code you trust; recorded in summary.json)"
    )
    grade.add_argument(
        "--db-url",
        metavar="URL",
        help="the course gradebook, as nbgrader's db_url (e.g. postgresql://user@host/db; the password "
        "may come from PGPASSWORD or ~/.pgpass); default: OUT/gradebook.db, or the one OUT used before",
    )
    grade.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="grade on a Dask cluster: the scheduler's address (tcp://HOST:8786, or tls://... with the "
        "--tls-* files); one task per student, each worker with the course installed",
    )
    grade.add_argument("--tls-ca-file", metavar="PEM", help="with a tls:// scheduler: the CA that signed the cluster's certificates")
    grade.add_argument("--tls-cert", metavar="PEM", help="with a tls:// scheduler: this client's certificate")
    grade.add_argument("--tls-key", metavar="PEM", help="with a tls:// scheduler: this client's private key")
    grade.add_argument("--no-progress", action="store_true")
    _term_arguments(grade)
    _export_arguments(sub.add_parser("export", help="the final table from the gradebook: automatic and manual scores together (CSV)"))
    similarity = sub.add_parser("similarity", help="OUT/similarity.html and .json: the most similar answers per TODO (reads OUT, runs nothing)")
    similarity.add_argument("out", type=Path, metavar="OUT", help="the folder `grade` wrote")
    similarity.add_argument("--threshold", type=float, help="the score from which a pair is flagged (default 0.7)")
    feedback = sub.add_parser("feedback", help="hand the feedback pages back: a zip per student, or the LMS's or nbgrader's upload layout")
    feedback.add_argument("out", type=Path, metavar="OUT", help="the folder `grade` wrote")
    feedback.add_argument("--format", choices=("zip", "canvas", "moodle", "exchange"), default="zip")
    report = sub.add_parser("report", help="the class report: OUT/report.html (figures, per-idea pass rates, problems) and OUT/report.json")
    report.add_argument("out", type=Path, metavar="OUT", help="the folder `grade` wrote")
    report.add_argument("--language", choices=EDITIONS, default="en", help="the language of the graded ideas' texts (default en)")
    validate = sub.add_parser("validate", help="run a notebook's public checks (exit 1 when one fails)")
    validate.add_argument("files", type=Path, nargs="+")
    translations = sub.add_parser("translations", help="the translation catalogs: `update` them from the sources, or show their `status`")
    translations.add_argument("action", choices=("update", "status", "font"), help="font: rebuild the CJK font subset the runtime ships")
    translations.add_argument("--font", type=Path, help="with font: the Noto Sans CJK file to cut it from (default: Debian's fonts-noto-cjk)")
    translations.add_argument("--only", metavar="NAME", action="append", help="one catalog: a notebook's name, `grader` or `runtime` (repeatable)")
    translations.add_argument("--show", action="store_true", help="with status: name every unit left to do")
    bundle = sub.add_parser("bundle", help="build the learner zip and prove it leaks nothing")
    bundle.add_argument("--out", type=Path, default=Path("dist/serving-overlap-course.zip"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
            "bundle": cmd_bundle,
            "translations": cmd_translations,
        }[args.command](course, args)
    except UnusableInput as exc:
        from .record.gradebook import mask_text

        print(f"error: {mask_text(str(exc), getattr(args, 'db_url', None))}", file=sys.stderr)
        return EXIT_UNUSABLE
    except KeyboardInterrupt:
        print("\ninterrupted: what was graded is kept; run the same command again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED


def cmd_release(course: Course, args) -> int:
    from .publish.release import write_release

    for path in write_release(course):
        print(f"wrote {path.relative_to(course.root)}")
    return EXIT_OK


def cmd_translations(course: Course, args) -> int:
    """Update the catalogs from the sources (new units added, changed ones fuzzy, gone ones obsolete),
    or only report; either way, say what is left to translate."""
    from .publish import catalogs, editions

    if args.action == "font":
        from .publish import fonts

        runtime = [spec for spec in editions.course_catalogs(course) if spec.path.stem == "runtime"]
        texts = [text for spec in runtime for text in catalogs.translations(spec).get(None, {}).values()]
        count, size = fonts.build_subset(texts, *([args.font] if args.font else []))
        print(f"wrote {fonts.FONT_FILE.relative_to(course.root)}: {count} characters, {size / 1024:.0f} KiB")
        return EXIT_OK
    left = 0
    for spec in editions.course_catalogs(course):
        if args.only and spec.path.stem not in args.only:
            continue
        if args.action == "update":
            counts = catalogs.update(spec)
        else:
            todo = catalogs.problems(spec)
            counts = {"units": len(spec.units), "to do": len(todo)}
            for problem in todo if args.show else ():
                print(f"  {problem}")
        left += counts.get("untranslated", 0) + counts.get("fuzzy", 0) + counts.get("to do", 0)
        print(f"{spec.path.relative_to(course.root)}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    print("every unit is translated" if not left else f"{left} unit(s) to translate or review")
    return EXIT_OK


def cmd_check(course: Course, args) -> int:
    from .grading import Options, grade_batch
    from .publish.leaks import scan_learner_tree
    from .publish.release import release_differences

    failures = []
    stale = release_differences(course)
    print("release in sync with solutions/: " + ("yes" if not stale else "NO"))
    failures += stale
    from .publish import catalogs, editions, fonts

    untranslated = [problem for spec in editions.course_catalogs(course) for problem in catalogs.problems(spec)]
    runtime = [spec for spec in editions.course_catalogs(course) if spec.path.stem == "runtime"]
    drawn = [text for spec in runtime for text in catalogs.translations(spec).get(None, {}).values()] if not untranslated else []
    missing = fonts.missing_glyphs(drawn)
    if missing:
        untranslated.append(f"the shipped CJK font lacks {''.join(missing[:20])}: run `python -m autograde translations font`")
    print("every edition's catalogs complete, and its figure glyphs shipped: " + ("yes" if not untranslated else "NO"))
    failures += untranslated
    leaks = scan_learner_tree(course)
    print("learner tree free of answers and hidden tests: " + ("yes" if not leaks else "NO"))
    failures += leaks
    from .judging.ideas import check_course

    format_problems = check_course(course.source_paths())
    print("hidden tests follow the ideas format and their points add up: " + ("yes" if not format_problems else "NO"))
    failures += format_problems
    with tempfile.TemporaryDirectory(prefix="course-check-") as tmp:
        subs = Path(tmp) / "submissions"
        for student, folder in (("solutions", course.solutions), ("untouched", course.release)):
            (subs / student).mkdir(parents=True)
            for name in course.notebooks:
                shutil.copy(folder / f"{name}.ipynb", subs / student / f"{name}.ipynb")
        import nbformat

        for lang in editions.translated_editions():  # the same answers in each translated edition
            (subs / f"solutions_{lang}").mkdir(parents=True)
            for path in course.source_paths():
                nbformat.write(editions.edition_source(path, lang, course), subs / f"solutions_{lang}" / path.name)
        summary = grade_batch(course, subs, Path(tmp) / "out", Options(workers=args.workers, progress=False))
        import csv

        rows = {r["student_id"]: r for r in csv.DictReader(open(Path(tmp) / "out" / "grades.csv", encoding="utf-8"))}
    full, zero = float(rows["solutions"]["auto_total"]), float(rows["untouched"]["total"])
    waiting = int(rows["solutions"]["pending"])
    print(
        f"instructor sources score {full:g}/{summary['max_auto']:g} automatic points, {waiting} answer(s) "
        f"({summary['max_manual']:g} points) left for a person; untouched release scores {zero:g}"
    )
    if full != summary["max_auto"]:
        failures.append(f"the sources lose points: {rows['solutions']}")
    for lang in editions.translated_editions():
        same = {k: v for k, v in rows[f"solutions_{lang}"].items() if k not in ("student_id", "edition")}
        if same != {k: v for k, v in rows["solutions"].items() if k not in ("student_id", "edition")}:
            failures.append(f"the {lang} edition of the sources grades differently: {rows[f'solutions_{lang}']}")
    print("each translated edition of the sources grades the same: " + ("yes" if not any("grades differently" in f for f in failures) else "NO"))
    if waiting != len(summary["manual_columns"]):
        failures.append(f"the sources' written answers are not all left for a person: {rows['solutions']}")
    if zero != 0 or int(rows["untouched"]["pending"]):
        failures.append(f"the untouched release earns points or asks a person to grade blank answers: {rows['untouched']}")
    for problem in summary["problems"]:
        failures.append(f"{problem['student_id']}/{problem['notebook']}: {problem['what_happened']} {problem['detail']}")
    for failure in failures:
        print(f"  ✗ {failure}")
    print("check passed" if not failures else f"check FAILED ({len(failures)} problem(s))")
    return EXIT_OK if not failures else EXIT_FAILED


def cmd_grade(course: Course, args) -> int:
    from .grading import Options, grade_batch

    begin = time.monotonic()
    options = Options(
        workers=args.workers,
        cell_timeout=args.cell_timeout,
        notebook_timeout=args.notebook_timeout,
        progress=not args.no_progress,
        sandbox=not args.no_sandbox,
        memory_limit=int(args.memory_limit * (1 << 30)),
        process_limit=args.process_limit,
        db_url=args.db_url,
        max_notebook_bytes=args.max_notebook_mb * 1024 * 1024,
        scheduler=args.scheduler,
        tls_ca_file=args.tls_ca_file,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
    )
    if not args.scheduler and (args.tls_ca_file or args.tls_cert or args.tls_key):
        raise UnusableInput("--tls-ca-file, --tls-cert and --tls-key are for a cluster: give --scheduler tls://HOST:PORT too")
    from .executors import executor_for

    executor = executor_for(options)  # chosen once: this machine, or the Dask cluster at --scheduler
    from .record.late import late_spec

    late = late_spec(course.grading, args.deadline, args.late_policy, args.extensions)
    with tempfile.TemporaryDirectory(prefix="course-intake-") as scratch:
        intake = _take_in(course, args, Path(scratch) / "submissions")
        _check_extensions(late.extensions, intake)
        late.times = intake.times
        summary = grade_batch(course, intake.folder, args.out, options, executor=executor, late=late, absent=intake.missing)
    elapsed = time.monotonic() - begin
    print(
        f"graded {summary['students']} student(s) in {elapsed:.1f} s "
        f"({summary['notebooks_graded']} notebooks graded, {summary['notebooks_reused']} reused from an earlier run)"
    )
    print(f"grades: {args.out / 'grades.csv'}   feedback: {args.out / 'feedback'}   log: {args.out / 'log.jsonl'}")
    book = summary["gradebook"]
    print(
        f"gradebook: {book.get('db_url')} ({book.get('notebooks_recorded', 0)} notebook(s) recorded); "
        f"{summary['manual_pending']} written answer(s) wait for a person: formgrader (`jupyter lab` in {args.out}), "
        f"then `python -m autograde export {args.out}`"
    )
    if summary["problems"]:
        print(f"{len(summary['problems'])} notebook(s) need a look (details in {args.out / 'summary.json'}):")
        for p in summary["problems"]:
            print(f"  {p['student_id']:<16} {p['notebook']:<28} {p['what_happened']}")
    for student, notes in summary["matching_notes"].items():
        for note in notes:
            print(f"  note {student}: {note}")
    for item in summary.get("late_problems", []):
        print(f"  late {item['student_id']}/{item['notebook']}: {item['problem']}")
    return EXIT_OK


def _check_extensions(extensions: dict, intake) -> None:
    """An extension keyed by a student's LMS id instead of their student id would be given to nobody: the
    run stops and says whose id it is."""
    students = {p.name for p in intake.folder.iterdir() if p.is_dir()} | set(intake.roster)
    by_lms = {str(who.get("lms_id")): s for s, who in {**intake.students, **intake.roster}.items() if who.get("lms_id")}
    wrong = [f"{key} (the LMS id of {by_lms[key]})" for key in sorted(extensions) if key not in students and key in by_lms]
    if wrong:
        raise UnusableInput(
            f"the extensions file names students by their LMS id: {', '.join(wrong[:5])}. Its student_id column must hold the grader's student ids"
        )


def _take_in(course: Course, args, dest: Path):
    """SUBMISSIONS in any layout, as the grader's folders; what the intake found goes to OUT/intake.json."""
    from tools.project_runtime import write_json_atomic

    from .intake import read_submissions

    intake = read_submissions(
        args.submissions,
        dest,
        course.notebooks,
        course.assignment,
        args.layout,
        args.pattern,
        args.roster,
        args.timestamps,
        trust_owners=args.trust_owners,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    found = {
        "layout": intake.layout,
        "students": intake.students,
        "missing": intake.missing,
        "late_in_lms": intake.late,
        "problems": intake.problems,
        "notes": intake.notes,
    }
    write_json_atomic(args.out / "intake.json", found)
    if intake.layout != "folders" or intake.problems:
        print(f"intake: {intake.layout} layout, {len(intake.students) or '?'} student(s) named by the LMS, {len(intake.problems)} problem(s)")
    for problem in intake.problems:
        print(f"  intake problem: {problem.get('file') or problem.get('student_id')}: {problem['problem']}")
    for note in intake.notes:
        print(f"  intake note: {note}")
    return intake


def cmd_export(course: Course, args) -> int:
    from .record.export import export

    roster = None
    if args.roster:
        from .intake import read_roster

        problems: list[dict] = []
        roster = read_roster(args.roster, problems)  # the rows grade accepted, the same rows named
        for problem in problems:
            print(f"roster problem: {problem['file']}: {problem['problem']}", file=sys.stderr)
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
    written = " and ".join(str(path) for path in info["written"])
    print(f"wrote {written}: {info['students']} student(s) from {info['db_url']}, {info['pending']} written answer(s) still pending")
    if info["omitted"]:
        print(f"WARNING: left out of the LMS file (no LMS id): {', '.join(info['omitted'])}", file=sys.stderr)
    for warning in info["warnings"]:
        print(f"WARNING: {warning}", file=sys.stderr)
    if info["least_penalty"]:
        print(f"note: the least late penalty was taken for {', '.join(info['least_penalty'])} (their lateness is unknown)", file=sys.stderr)
    if args.format == "canvas" and args.assignment_id == "new":
        print("WARNING: no assignment id: Canvas's import will create a NEW assignment", file=sys.stderr)
    if info["needs_review"]:
        shown = ", ".join(info["needs_review"][:10]) + (" ..." if len(info["needs_review"]) > 10 else "")
        print(
            f"WARNING: {len(info['needs_review'])} score(s) a person gave are marked `review` and not counted: the "
            f"answer changed since it was scored ({shown}). Score them again in formgrader, then export again.",
            file=sys.stderr,
        )
    return EXIT_OK


def cmd_feedback(course: Course, args) -> int:
    from .record.handback import hand_back

    where, info = hand_back(course, args.out, args.format)
    print(f"wrote {where}: {info['pages']} page(s) of {info['students']} student(s)")
    zipped = set(info.get("zipped", []))
    others = [s for s in info["unmatched"] if s not in zipped]
    if others:
        print(f"not in the {args.format} layout (their files did not come from that LMS): {', '.join(others)}", file=sys.stderr)
    if zipped:
        print(
            f"sent a zip of notebooks, which nbgrader's fetch_feedback cannot match to a page: {', '.join(sorted(zipped))} "
            "(released all the same; hand theirs back with --format zip)",
            file=sys.stderr,
        )
    return EXIT_OK


def cmd_similarity(course: Course, args) -> int:
    from .record.similarity import write_similarity

    page, numbers, data = write_similarity(course, args.out, args.threshold)
    flagged = sum(todo["pairs_above_threshold"] for todo in data["todos"])
    print(f"wrote {page} and {numbers}: {flagged} pair(s) at or above {data['threshold']:g} over {len(data['todos'])} TODO(s)")
    return EXIT_OK


def cmd_report(course: Course, args) -> int:
    from .record.report import write_report

    page, numbers, data = write_report(course, args.out, args.language)
    print(
        f"wrote {page} and {numbers}: {data['students']} student(s), {len(data['ideas'])} graded idea(s), "
        f"{sum(p['count'] for p in data['problems'])} problem(s) in {len(data['problems'])} kind(s)"
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
