# nbgrader configuration for every nbgrader run of this course. The instructor command
# copies this file into each course folder it builds; the values below that depend on a
# run (time limits) come from environment variables that the command sets.
import os

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import ClearHiddenTests, GetGrades

from autograde.preprocessors import ShortenErrors

c = get_config()  # noqa: F821 (provided by traitlets when the file is loaded)

c.CourseDirectory.course_id = "serving-overlap"
c.CourseDirectory.root = os.getcwd()

# Release: the stub a learner sees in place of each solution region.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# Autograde: a cell that runs longer than this is interrupted and the notebook goes on.
c.Execute.timeout = int(os.environ.get("COURSE_CELL_TIMEOUT", "30"))
c.Execute.interrupt_on_timeout = True
# A deleted test cell is put back (from the gradebook), so deleting one never helps.
c.OverwriteCells.add_missing_cells = True
# Grades come from errors, never from stderr: a warning printed by a correct answer
# (torch, numpy, warnings.warn) must not zero the cell.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"[\s\S]*"

# Feedback: show the visible checks and the failure messages, never the hidden tests'
# source nor tracebacks that quote it.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, ShortenErrors, CSSHTMLHeaderPreprocessor]
c.ClearHiddenTests.enforce_metadata = False
