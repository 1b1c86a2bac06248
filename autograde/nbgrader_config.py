# nbgrader configuration for every nbgrader run of this course. The instructor command copies this
# file into each course folder it builds; the values below that depend on a run (time limits, the
# sandbox) come from environment variables that the command sets (autograde/settings.py).
import os

from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (
    CheckCellMetadata,
    ClearHiddenTests,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)

from autograde import settings
from autograde.record.exporters import PageDataExporter
from autograde.run.preprocessors import (
    CapGradedOutputs,
    CapOutputs,
    CappedExecute,
    SafeOutputMetadata,
    SanitizeOutputs,
    ShortenErrors,
)

c = get_config()  # noqa: F821 (provided by traitlets when the file is loaded)

c.CourseDirectory.course_id = "serving-overlap"
c.CourseDirectory.root = os.getcwd()

# Release: the stub a learner sees in place of each solution region. A translated edition's release
# (publish/release.py writes its language into the course folder's EDITION file) words the comment
# and the written-answer prompt in its language; `raise NotImplementedError()` stays (the runtime
# looks for it).
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
EDITION_STUBS = {
    "zh": ({"python": "# 在此处编写你的代码\nraise NotImplementedError()"}, "在此处作答")
}
_edition = open("EDITION", encoding="utf-8").read().strip() if os.path.isfile("EDITION") else "en"
if _edition in EDITION_STUBS:
    c.ClearSolutions.code_stub, c.ClearSolutions.text_stub = EDITION_STUBS[_edition]

# Autograde: a cell that runs longer than this is interrupted and the notebook goes on.
c.Execute.timeout = settings.cell_timeout()
c.Execute.interrupt_on_timeout = True
# After a cell's reply, its output must arrive on IOPub within this many seconds, or nbgrader (which
# raises on it) fails the notebook. nbclient's 4 s failed a correct notebook's set-up cell on a
# machine at load 15; the notebook's own wall-clock limit still ends one that never finishes.
c.Execute.iopub_timeout = max(60, c.Execute.timeout)
# A deleted test cell is put back (from the gradebook), so deleting one never helps.
c.OverwriteCells.add_missing_cells = True
# Errors, never stderr, fail a cell: a warning printed by a correct answer must not count.
# (The scores that count come from the trusted judge, outside the kernel; see judge.py.)
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"[\s\S]*"
# Outputs are cut to a byte budget before the graded notebook is saved. (Code cells keep their whole
# source here: the judge loads the learner's code from this notebook.) No AssignLatePenalties: a
# job's gradebook is a scratch copy, and late penalties are the grader's own (record/late.py),
# written into the course gradebook (record/gradebook.py).
c.Autograde.autograde_preprocessors = [
    CappedExecute,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    CapGradedOutputs,
    SaveAutoGrades,
    CheckCellMetadata,
]
if settings.sandboxed():
    # The learner's kernel runs in bubblewrap (autograde/run/sandbox.py). It has no network, so
    # it talks to nbgrader over Unix sockets in a folder bound into the sandbox.
    # The connection file and the sockets go to this job's runtime folder (bound inside);
    # left to itself, jupyter_client would put the file in /tmp, which the sandbox hides.
    c.Execute.kernel_name = "serving-overlap-sandbox"  # CappedExecute inherits Execute's settings
    c.KernelManager.transport = "ipc"
    c.KernelManager.connection_file = os.path.join(settings.runtime_dir(), "kernel.json")

# Feedback: the visible checks, the failure messages and the judge's ideas, never the hidden tests
# (they are not in the graded notebook at all) nor tracebacks. HTML outputs are sanitized here,
# markdown once it is rendered (record/markup.py: sanitizing its source would escape its text
# twice), so no <script> reaches the page; outputs keep no metadata but numeric image sizes
# (nbconvert writes them into <img> unquoted), and the grader gives every page a policy that forbids
# scripts (its template's <meta>). The feedback step writes the page's data (the notebook so
# prepared, and its scores); the grader renders the page once it knows the rest: a person's scores,
# the late line (record/pages.py).
c.GenerateFeedback.exporter_class = PageDataExporter
c.GenerateFeedback.preprocessors = [
    GetGrades,
    ClearHiddenTests,
    ShortenErrors,
    CapOutputs,
    SafeOutputMetadata,
    SanitizeOutputs,
]
c.ClearHiddenTests.enforce_metadata = False
c.SanitizeOutputs.enabled = True  # nbconvert's preprocessors are off unless enabled
