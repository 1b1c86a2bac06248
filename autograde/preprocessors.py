"""nbconvert preprocessors that the course adds to nbgrader's feedback step."""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

HIDDEN_NOTE = "# Hidden tests ran here at grading. Their code is not shown; their messages are below."


class ShortenErrors(NbGraderPreprocessor):  # nbgrader's base is enabled by default
    """Replace each traceback with its last line (``Name: message``).

    A traceback quotes the source lines of the frames it passes through, which for a
    failing hidden test is the hidden test itself. The message that an assert carries
    is the hint the learner needs, so it stays.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution") and HIDDEN_NOTE not in cell.source:
            # ClearHiddenTests has removed the region; say so where it was.
            cell.source = cell.source.rstrip() + "\n" + HIDDEN_NOTE
        return cell, resources
