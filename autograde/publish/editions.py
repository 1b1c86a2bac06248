"""The course's editions: English from ``solutions/``, and each translated edition from the same
sources with the catalogs' text (``catalogs.py``). Every edition has the same code cells but for
their comments' words and its set-up cell, so the same grade ids and graded code: a translated
edition's set-up cell (tagged ``imports``, never graded nor locked) calls
``course_setup(language='zh')``, so that its kernel knows the edition however the notebook is run
(nbclient, papermill, Colab and Kaggle name no file), and raises its message for a missing course
runtime in the edition's words (the runtime catalog's; the runtime, missing, cannot translate
it)."""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from tools.i18n import EDITIONS, runtime_catalog_path

from ..course import Course
from ..errors import GraderError
from ..judging.ideas import code_only, message_template
from ..judging.judge import MESSAGES
from ..ledger.late import DEADLINE_SHOWN
from ..model import HIDDEN_NOTE_TEXT, STATUS_TEXT
from . import catalogs

# The labels nbgrader's feedback template writes around scores and grade cells: a page in another
# language shows their translations, its punctuation included (Chinese: （得分：0.75 / 4.0）); the
# page's template says them (record.exporters.PageView)
SCORE_IN_PARENS = "(Score: {score})"
SCORE_WITH_PENDING = "(Score: {score}; {pending})"
SCORE = "Score: {score}"
GRADE_CELL = "Grade cell: {grade_id}"
# a test cell in the page's list, named by its TODO ("TODO 5 · decide_overlap")
TEST_CELL = "Test cell: {todo}"
TOP = "(Top)"
# a pending answer in the page's list (exporters.PageView)
PENDING_IN_PARENS = " (pending: a person grades it, {points} point(s))"
# nbgrader's late line in the page's list
LATE_PENALTY = "Late submission penalty (Score: -{points})"
COMMENTS = "Comments:"  # the label before a cell's comment, its colon with it (Chinese: 评语：)
# nbgrader's own comment on an answer left as released (preprocessors/saveautogrades.py's
# auto_comment): the page shows it in its language (exporters.PageView.comment); a person's comment
# as they wrote it
NO_RESPONSE = "No response."
LABELS = (
    SCORE_IN_PARENS,
    SCORE_WITH_PENDING,
    SCORE,
    GRADE_CELL,
    TEST_CELL,
    TOP,
    PENDING_IN_PARENS,
    LATE_PENALTY,
    COMMENTS,
    NO_RESPONSE,
)

# a late policy as a late line says it (late.Policy.describe's English)
POLICY_TEXTS = (
    "no late penalty",
    "no points after the deadline",
    "{percent}% of the maximum per day late",
    "{percent}% of the maximum per hour late",
    "{percent}% of the maximum per day late, not below {floor}%",
    "{percent}% of the maximum per hour late, not below {floor}%",
)

# the class report's text (term/report*.py: its page, figures, warnings and problems' details)
REPORT_TEXTS = (
    "Class report · {assignment}",
    "Class report | 班级报告",
    "{students} student(s), {graded} of {records} notebook(s) graded.",
    "Editions submitted: {editions}.",
    "{edition} {count}",  # an edition and how many notebooks were submitted in it ("zh 4")
    "zh",
    "en",
    "none",  # a student whose edition the log does not know
    "{first}, {second}",
    "{first}; {second}",
    "Late notebooks: {late} ({points} penalty point(s) in {file}; final totals after it: "
    "mean {mean}, median {median}){unknown}.",
    "; {count} without a known submission time",
    "Scores from {file}.",
    "Score distribution | 分数分布",
    "students",
    "student",
    "mean",
    "median",
    "min",
    "max",
    "of",
    "answers pending a person",
    "scores to review",
    "{answers} ({points} points, {students} student(s))",
    "A written answer that waits for a person is shown as {pending}, not as 0; until it "
    "is scored the totals leave its points out.",
    "pending",
    "histogram of the class's totals",
    "each exercise's scores",
    "exercise",
    "notebook",
    "kind",
    "points",
    "full marks",
    "part",
    "review",
    "manual",
    "auto",
    "unknown",
    "Graded ideas: which did learners miss? | 评分要点:哪些没有掌握?",
    "Each TODO's hidden tests are named ideas. The pass rate counts the notebooks the judge ran "
    "(a missing or stopped notebook is not judged); most missed first.",
    "pass rate of each graded idea",
    "exercise · idea",
    "what it checks",
    "passed",
    "judged",
    "pass rate",
    "failed",
    "error",
    "not started",
    "skipped",
    "not judged",
    "(not in the current sources)",
    "Problems | 问题",
    "None: every notebook was graded, with nothing to note.",
    "problems by kind",
    "what happened",
    "count",
    "{kind}: {count} ({what})",
    "detail",
    "… and {count} more (all in report.json)",
    "The slowest notebooks | 最慢的 notebook",
    "{count} notebook(s) timed: median {median} s, 90th percentile {p90} s, slowest {max} "
    "s, {total} s in all "
    "(a reused result keeps the time of the run that graded it).",
    "the slowest notebooks",
    "seconds",
    "status",
    "autograde / judge / feedback (s)",
    " (reused)",
    # figures
    "mean {mean}",
    "total points (of {points}; answers pending a person are not in these totals)",
    "Totals across the class",
    "part of the points",
    "0 points",
    "pending: waits for a person",
    "review: to score again",
    "Each exercise's scores",
    "% of judged notebooks that passed the idea\n(red under 50%, amber under 80%, green from 80%)",
    "Graded ideas, most missed at the top",
    "notebooks (or students, for notes and reviews)",
    "Problems by kind",
    "median of all {count} notebooks: {median} s",
    "seconds to grade (red: not graded, e.g. stopped at the time limit)",
    "The slowest notebooks",
    # warnings
    "the course's sources changed since this folder was graded: idea texts and points are today's; "
    "grade again for results against the current sources",
    "{file} has column(s) the course does not have: {columns}",
    # what each kind of problem is (model.STATUS_TEXT, report.OTHER_KINDS) and the details' patterns
    # (report.DETAILS)
    *STATUS_TEXT.values(),
    "graded, with a note (part of it over the memory limit, code the judge could not "
    "load, or no feedback page)",
    "lines removed from the feedback page: they quoted the grader's tests or answers",
    "a notebook found under another name, or answer cells repaired for grading",
    "a person's score on an answer that changed since: not counted until scored again in "
    "formgrader",
    "an outcome this report does not know",
    "part of it went over the {n} GiB memory limit and was stopped",
    "{n} cell(s) of its code failed when loaded for the judge",
    "{n} line(s) removed from the feedback page",
    "{n} score(s) to look at again",
    "{n} not found in the submission",
)

# the class report's words that share their English with another's (a column that counts students, a
# problem's kind): each with a msgctxt of its own, the key the page looks it up by; English shows
# the English
REPORT_CONTEXTS = {
    "report:students with full marks": "full marks",
    "report:students with part": "part",
    "report:students with 0": "0",
    "report:students pending": "pending",
    "report:students to review": "review",
    **{
        f"report:kind:{kind}": kind
        # report.OTHER_KINDS
        for kind in (*STATUS_TEXT, "graded_with_notes", "redacted", "matching_note", "needs_review")
    },
}

# The feedback page's own lines, translated in grader.po (run/job.py's ideas_report writes them)
FEEDBACK_TEXTS: tuple[str | tuple[str, str], ...] = (
    "Graded ideas (hidden tests, run outside your notebook): {score} / {points} points",
    "This TODO still raises NotImplementedError, so it earns no points yet.",
    # the headings of nbgrader's feedback page and the grader's notes on it
    # (record/feedback.html.j2)
    "Score",
    "Test cell",
    "Coding free-response",
    "Written response",
    "Task",
    "Comment",
    "Student's answer",
    "Top",
    "pending: a person grades it, {points} point(s)",
    "Pending: a person grades it ({points} point(s))",
    "{points} point(s) wait for a person's grading",
    "Submitted {hours} hour(s) after the deadline ({deadline}): late penalty {points} "
    "point(s) ({policy}).",
    # the late line's deadline, as the instructor gave it: its date and time, then its UTC offset
    # (late.DEADLINE_SHOWN)
    DEADLINE_SHOWN,
    # a submission whose own times and its arrival on the exchange disagreed (ledger/late.py
    # late_text)
    "This submission gives {claimed} as its time, but it reached the exchange at "
    "{arrived}: the latest, {used}, counts.",
    "The times this submission gives disagree ({claimed} and {used}): the later counts.",
    # the page's score lines and grade-cell labels (exporters.LABELS), and the line its visible
    # checks end with (model.HIDDEN_NOTE)
    *LABELS,
    HIDDEN_NOTE_TEXT,
    # the judge's own failure messages, {0}, {1}... their values (judge.MESSAGES)
    *MESSAGES,
    # a late line's policy (ledger/late.py late_text)
    *POLICY_TEXTS,
    # the class report's own text (term/report*.py), its outcomes' descriptions included
    *REPORT_TEXTS,
    *((english, context) for context, english in REPORT_CONTEXTS.items()),
)


# the English set-up cell's line that names the edition elsewhere
SETUP_CALL = "RUNTIME = course_setup()"


class EditionError(GraderError, ValueError):
    """An instructor source whose set-up cell cannot carry its edition."""


def setup_call(language: str) -> str:
    """The set-up cell's line in ``language``'s edition."""
    return SETUP_CALL if language == "en" else f"RUNTIME = course_setup(language={language!r})"


def is_setup_cell(cell) -> bool:
    return cell.cell_type == "code" and "imports" in cell.metadata.get("tags", [])


def edition_setup(source: str, language: str, messages: catalogs.Translations | None = None) -> str:
    """The set-up cell's code in ``language``'s edition: the English one with its one ``RUNTIME =
    course_setup()`` line replaced (EditionError unless there is exactly one), and the message it
    raises when the course runtime is missing in the edition's words (setup_message: ``messages`` is
    the runtime catalog's translations; the runtime cannot translate it, being missing)."""
    lines = source.split("\n")
    found = [i for i, line in enumerate(lines) if line.strip() == SETUP_CALL]
    if len(found) != 1:
        raise EditionError(
            f"the set-up cell must hold the line {SETUP_CALL!r} exactly once (found {len(found)})"
        )
    indent = lines[found[0]][: len(lines[found[0]]) - len(lines[found[0]].lstrip())]
    lines[found[0]] = indent + setup_call(language)
    return setup_message(
        "\n".join(lines), messages if messages is not None else catalogs.Translations()
    )


# what the set-up cell raises when the course runtime is missing
SETUP_ERROR = "ModuleNotFoundError"
_PLACEHOLDER = re.compile(r"\{(\d+)\}")


def setup_message(source: str, messages: catalogs.Translations) -> str:
    """``source`` with the text of its ``raise ModuleNotFoundError(...)`` replaced by the text's
    translation in ``messages`` (keyed by its catalog template, ``{0}``... its f-string's values,
    which the translation keeps), one string a line as in English; unchanged when there is none."""
    try:
        # a %pip line: same line numbers
        tree = catalogs.parse(re.sub(r"^\s*[%!].*$", "", source, flags=re.M))
    except SyntaxError as exc:
        raise EditionError(f"the set-up cell is not Python: {exc}") from None
    nodes = [
        node.exc.args[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Raise)
        and isinstance(node.exc, ast.Call)
        and getattr(node.exc.func, "id", "") == SETUP_ERROR
        and node.exc.args
    ]
    if len(nodes) != 1 or (translated := messages.find(message_template(nodes[0]) or "")) is None:
        return source
    node = nodes[0]
    values = (
        [v for v in node.values if isinstance(v, ast.FormattedValue)]
        if isinstance(node, ast.JoinedStr)
        else []
    )
    if any(v.format_spec is not None for v in values):
        raise EditionError(
            f"the set-up cell's {SETUP_ERROR} message formats a value: write it as {{value}}"
        )
    shown = [
        "{" + ast.unparse(v.value) + (f"!{chr(v.conversion)}" if v.conversion != -1 else "") + "}"
        for v in values
    ]
    pieces = []
    # its lines, each \n kept
    for line in (part for part in re.split(r"(?<=\n)", translated) if part):
        text = _PLACEHOLDER.sub(lambda m: shown[int(m.group(1))], line)
        pieces.append(("f" if text != line or "{{" in text or "}}" in text else "") + repr(text))
    lines = source.split("\n")
    first, last = lines[node.lineno - 1].encode(), lines[node.end_lineno - 1].encode()
    head, tail = first[: node.col_offset].decode(), last[node.end_col_offset :].decode()
    indent = " " * len(head)
    lines[node.lineno - 1 : node.end_lineno] = [head + f"\n{indent}".join(pieces) + tail]
    return "\n".join(lines)


def setup_messages(course: Course, language: str) -> catalogs.Translations:
    """The runtime catalog's translations in ``language`` (none in English or without the catalog):
    the set-up cell's message is one of them (edition_setup)."""
    path = runtime_catalog_path(language, course.root / "tools")
    if language == "en" or not path.is_file():
        return catalogs.Translations()
    return catalogs.translations(catalogs.CatalogFile(path, [], language))


def translated_editions() -> list[str]:
    return [lang for lang in EDITIONS if lang != "en"]


def course_catalogs(course: Course) -> list[catalogs.CatalogFile]:
    return catalogs.course_catalogs(course.root, course.source_paths(), FEEDBACK_TEXTS)


def catalog_for(course: Course, language: str, name: str) -> catalogs.CatalogFile:
    """One catalog of an edition: a notebook stem or ``grader`` (built alone: the runtime's is not
    needed)."""
    folder = course.root / "translations" / language
    if name == "grader":
        return catalogs.CatalogFile(
            folder / "grader.po",
            catalogs.grader_units(course.source_paths(), FEEDBACK_TEXTS),
            language,
        )
    path = course.solutions / f"{name}.ipynb"
    return catalogs.CatalogFile(folder / f"{name}.po", catalogs.notebook_units(path), language)


def edition_source(path: Path, language: str, course: Course) -> nbformat.NotebookNode:
    """An instructor source in ``language``: its markdown and its code cells' comment blocks from
    the catalog (catalogs.translate_comments: the code itself unchanged), the docstrings of its
    given functions too (catalogs.translate_docstrings), the set-up cell's edition line
    (edition_setup), and ``metadata.course.language`` recording the edition."""
    nb = nbformat.read(path, as_version=4)
    if language != "en":
        spec = catalog_for(course, language, path.stem)
        found = catalogs.problems(spec)
        if found:
            raise catalogs.CatalogError(found)
        table = catalogs.translations(spec)
        messages = setup_messages(course, language)
        setups = [cell for cell in nb.cells if is_setup_cell(cell)]
        if len(setups) != 1:
            raise EditionError(
                f"{path.name}: {len(setups)} set-up cells (tagged 'imports'), expected one"
            )
        for cell in nb.cells:
            if cell.cell_type == "markdown" and cell.source.strip():
                cell.source = table.text(cell.source, cell.id)
            elif is_setup_cell(cell):
                try:
                    cell.source = catalogs.translate_comments(
                        edition_setup(cell.source, language, messages), cell.id, table
                    )
                except EditionError as exc:
                    raise EditionError(f"{path.name}: {exc}") from None
            elif cell.cell_type == "code":
                cell.source = catalogs.translate_comments(cell.source, cell.id, table)
                if catalogs.given_docstrings(cell):
                    cell.source = catalogs.translate_docstrings(cell.source, cell.id, table)
    nb.metadata["course"] = {**copy.deepcopy(nb.metadata.get("course", {})), "language": language}
    return nb


def code_differences(
    english: Path, other: Path, language: str, messages: catalogs.Translations | None = None
) -> list[str]:
    """Where two editions of one notebook differ in anything but markdown text, the comments and
    docstrings of code cells (``ideas.code_only``) and the set-up cell's edition line and translated
    message (edition_setup, ``messages`` the runtime catalog's translations: setup_messages) (empty
    when none)."""
    a, b = nbformat.read(english, as_version=4), nbformat.read(other, as_version=4)
    if len(a.cells) != len(b.cells):
        return [f"{other.name}: {len(b.cells)} cells, the English edition has {len(a.cells)}"]
    found = []
    for index, (x, y) in enumerate(zip(a.cells, b.cells)):
        if x.cell_type != y.cell_type or x.get("id") != y.get("id"):
            found.append(
                f"{other.name}: cell {index} is a {y.cell_type} cell {y.get('id')!r}, in "
                f"English a {x.cell_type} cell {x.get('id')!r}"
            )
        elif is_setup_cell(x) != is_setup_cell(y):
            found.append(
                f"{other.name}: cell {index} ({x.get('id')}) is the set-up cell in one edition only"
            )
        elif is_setup_cell(x):
            try:
                expected = edition_setup(x.source, language, messages)
            except EditionError as exc:
                found.append(f"{english.name}: {exc}")
                continue
            if code_only(y.source) != code_only(expected):
                more = f"{setup_call(language)!r} and its translated message"
                found.append(
                    f"{other.name}: the set-up cell ({x.get('id')}) differs from the "
                    f"English one by more than {more}"
                )
        elif x.cell_type == "code" and code_only(x.source) != code_only(y.source):
            found.append(
                f"{other.name}: code cell {index} ({x.get('id')}) differs from the "
                "English edition's"
            )
        elif (gx := x.metadata.get("nbgrader", {}).get("grade_id")) != (
            gy := y.metadata.get("nbgrader", {}).get("grade_id")
        ):
            found.append(f"{other.name}: cell {index} has grade id {gy!r}, in English {gx!r}")
    return found


@dataclass(frozen=True)
class FeedbackWords:
    """The feedback's translations by language, each {key: text}: an idea's text keyed
    ``grade_id:idea``, a feedback line keyed by its English. English has none (a page shows the
    English text)."""

    by_language: dict[str, dict[str, str]] = field(default_factory=dict)

    def of(self, language: str) -> dict[str, str]:
        """``language``'s words: none (the English text stands) for English or a language without a
        catalog."""
        return self.by_language.get(language, {})


def feedback_translations(course: Course) -> FeedbackWords:
    """The feedback pages' translations in each translated edition. Only complete catalogs reach
    here (the release checks)."""
    table: dict[str, dict[str, str]] = {}
    for lang in translated_editions():
        spec = catalog_for(course, lang, "grader")
        found = catalogs.problems(spec)
        if found:
            raise catalogs.CatalogError(found)
        merged = table.setdefault(lang, {})
        for context, entries in catalogs.translations(spec).by_context.items():
            for english, text in entries.items():
                merged[context or english] = text
        merged.update(public_check_translations(course, lang))
    return FeedbackWords(table)


def public_check_translations(course: Course, language: str) -> dict[str, str]:
    """{English: translation} of the public checks' labels and failure messages that the feedback
    quotes, from the runtime catalog that translates them in the learner's kernel (a text it does
    not translate stays English; ``check`` refuses such a catalog)."""
    path = runtime_catalog_path(language, course.root / "tools")
    if not path.is_file():
        return {}
    known = catalogs.translations(catalogs.CatalogFile(path, [], language))
    return {
        text: found
        for text in catalogs.public_check_texts(course.source_paths())
        if (found := known.find(text)) is not None
    }
