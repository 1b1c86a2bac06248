"""nbconvert preprocessors that the course adds to nbgrader's autograde and feedback steps."""
from __future__ import annotations

import json

from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Integer

HIDDEN_NOTE = "# Hidden tests ran outside this notebook at grading: the ideas they check, and your result, are below."


class CappedExecute(Execute):
    """nbgrader's Execute, keeping at most ``stream_cap`` characters of a notebook's outputs
    while it runs: the rest is dropped as it arrives, so a learner's output flood cannot fill
    the grader's memory (a note says where output was dropped)."""

    stream_cap = Integer(2_000_000, help="characters of output kept while a notebook runs").tag(config=True)

    def output(self, outs, msg, display_id, cell_index):
        content = msg.get("content", {})
        size = len(str(content.get("text", ""))) + sum(len(str(v)) for v in content.get("data", {}).values())
        self._seen = getattr(self, "_seen", 0) + size
        if self._seen > self.stream_cap and msg.get("msg_type") in ("stream", "display_data", "execute_result", "update_display_data"):
            noted = self.__dict__.setdefault("_noted", set())
            if cell_index not in noted:
                noted.add(cell_index)
                outs.append(new_output("stream", name="stdout", text="\n[output dropped: this notebook printed more than the grader keeps]\n"))
            return None
        return super().output(outs, msg, display_id, cell_index)


class CapOutputs(NbGraderPreprocessor):
    """Cut outputs to a byte budget, with a visible note where something was cut.

    nbgrader's LimitOutput counts lines, so one 60 MB line passes it; this counts
    characters, per output and per notebook, so no feedback page grows past about 1 MB.
    """

    per_output = Integer(20_000, help="characters kept of one output").tag(config=True)
    per_notebook = Integer(400_000, help="characters kept of all outputs together").tag(config=True)

    def preprocess(self, nb, resources):
        self._left = self.per_notebook
        return super().preprocess(nb, resources)

    def _cut(self, text: str) -> str:
        keep = max(0, min(self.per_output, self._left))
        self._left -= min(len(text), keep)
        if len(text) <= keep:
            return text
        return text[:keep] + f"\n[output cut: {len(text) - keep:,} more characters were not kept]\n"

    def preprocess_cell(self, cell, resources, index):
        if len(cell.source) > self.per_output:  # a learner's cell may be huge too (markdown included)
            cell.source = cell.source[:self.per_output] + f"\n[cell cut: {len(cell.source) - self.per_output:,} more characters]"
        if cell.cell_type != "code":
            return cell, resources
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                output["text"] = self._cut(output.get("text", ""))
            elif output.get("output_type") == "error":
                output["evalue"] = self._cut(str(output.get("evalue", "")))
                output["traceback"] = [self._cut(str(line)) for line in output.get("traceback", [])[-20:]]
            elif "data" in output:
                for mime, value in list(output["data"].items()):
                    if not isinstance(value, (str, list)):  # JSON data (widgets): kept whole when small
                        if len(json.dumps(value)) > self.per_output:
                            output["data"] = {"text/plain": "[an output too large to keep was removed]"}
                            break
                        continue
                    text = value if isinstance(value, str) else "".join(map(str, value))
                    if mime.startswith("image/") and len(text) > self.per_output:
                        output["data"] = {"text/plain": "[a figure too large to keep was removed]"}
                        break
                    output["data"][mime] = self._cut(text)
        return cell, resources


class ShortenErrors(NbGraderPreprocessor):  # nbgrader's base is enabled by default
    """Replace each traceback with its last line (``Name: message``).

    A traceback quotes the source lines of the frames it passes through; the message that
    an assert carries is the hint the learner needs, so it stays.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution") and HIDDEN_NOTE not in cell.source:
            cell.source = cell.source.rstrip() + "\n" + HIDDEN_NOTE
        return cell, resources
