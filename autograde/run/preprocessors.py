"""nbconvert preprocessors that the course adds to nbgrader's autograde and feedback steps."""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Bool, Integer, List, Set, Unicode

from ..model import JsonRecord, flattened, omitted, with_hidden_note
from .kernels import OutputLimitExceeded, kill_now


def message_size(value, budget: int = 1 << 40) -> int:
    """Roughly how many bytes ``value`` (a decoded kernel message: dicts, lists, strings,
    numbers, binary buffers) takes, without copying it. An iterative walk (a message nested
    a thousand deep does not recurse); it stops counting once past ``budget``."""
    total, stack = 0, [value]
    while stack and total <= budget:
        item = stack.pop()
        if isinstance(item, (str, bytes, bytearray)):
            total += len(item) + 2
        elif isinstance(item, memoryview):
            total += item.nbytes
        elif isinstance(item, dict):
            total += 2 + 2 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            total += 2 + len(item)
            stack.extend(item)
        else:
            total += 8
    return total


# kernel messages that add to what nbclient keeps: outputs, display updates, widget (comm) state
_KEPT = frozenset(
    {
        "stream",
        "display_data",
        "execute_result",
        "update_display_data",
        "error",
        "comm_open",
        "comm_msg",
    }
)


class CappedExecute(Execute):
    """nbgrader's Execute, with the kernel's messages counted while a notebook runs, so that
    no notebook can fill the grading process's memory, whatever it sends.

    Every message that nbclient would keep (outputs, display updates, widget comm messages,
    errors) is counted whole: content, metadata and binary buffers.
    - Past ``stream_cap`` bytes kept, further such messages are dropped as they arrive (a note
      says where): an honest notebook that prints a lot is still graded.
    - Past ``message_cap`` bytes received (kept or dropped), the notebook is stopped:
      OutputLimitExceeded ends it and its kernel is killed (it is never reused).
    A single message is at most job.MAX_KERNEL_MESSAGE bytes (the sockets refuse larger ones)."""

    stream_cap = Integer(2_000_000, help="bytes of kernel output kept while a notebook runs").tag(
        config=True
    )
    message_cap = Integer(
        64 << 20, help="bytes of kernel messages one notebook may send before it is stopped"
    ).tag(config=True)
    # set by the grading worker (job.py): a kernels.StudentKernel that lends one running kernel to
    # each of a student's notebooks in turn; None: start and shut down a kernel per notebook
    shared_kernel = None

    # why the last notebook's run stopped, as the place that caught it knows it (None: it ran to its
    # end): the worker writes it into result.json, and the record's status is read from there
    failure: Stopped | None = None

    def preprocess(self, nb, resources=None, km=None):
        CappedExecute.failure = None
        self._kept, self._received, self._noted = 0, 0, set()
        lender = type(self).shared_kernel
        if lender is None or km is not None:
            return self._run(nb, resources, km)
        clean = False
        try:
            result = self._run(nb, resources, lender.acquire())
            clean = not any(
                out.get("ename") == self.error_on_timeout.get("ename")
                for cell in nb.cells
                if cell.cell_type == "code"
                for out in cell.get("outputs", [])
            )
            return result
        finally:
            if self.kc is not None:  # a lent kernel's client is left open by nbclient
                self.kc.stop_channels()
                self.kc = None
            lender.release(clean)

    def _run(self, nb, resources, km):
        try:
            return self._stopped_at_limits(nb, resources, km)
        except BaseException as exc:
            CappedExecute.failure = failure_of(exc, self.timeout)
            raise

    def _stopped_at_limits(self, nb, resources, km):
        try:
            return super().preprocess(nb, resources, km)
        except OutputLimitExceeded:
            raise
        except Exception as exc:
            budget = getattr(type(self).shared_kernel, "budget", None)
            # the kernel was killed at the session's limit
            if budget is not None and budget.exceeded:
                raise OutputLimitExceeded(budget.why) from exc
            # the kernel was killed at the limit: say why it stopped
            if self._received > self.message_cap:
                raise OutputLimitExceeded(self._why()) from exc
            raise

    def _why(self) -> str:
        return (
            f"OutputLimitExceeded: the notebook sent more than {self.message_cap >> 20} "
            "MiB of output (outputs, "
            "display updates and widget messages together); it was stopped"
        )

    def handle_comm_msg(self, outs, msg, cell_index):
        """nbclient's widget bookkeeping, which raises on a malformed widget message (a missing
        ``_model_module``, say): such a message is ignored, as a browser would ignore it."""
        try:
            return super().handle_comm_msg(outs, msg, cell_index)
        except Exception:
            return None

    def process_message(self, msg, cell, cell_index):
        kind = msg.get("msg_type")
        if kind not in _KEPT:
            return super().process_message(msg, cell, cell_index)
        size = message_size(
            [msg.get("content"), msg.get("metadata"), msg.get("buffers")], self.message_cap
        )
        self._received += size
        if self._received > self.message_cap:
            kill_now(self.km)
            raise OutputLimitExceeded(self._why())
        if self._kept + size > self.stream_cap and kind == "error":  # an error is kept, cut short
            content = msg.get("content") or {}
            content["evalue"] = str(content.get("evalue", ""))[:2000]
            content["traceback"] = [
                str(line)[:2000] for line in list(content.get("traceback") or [])[-5:]
            ]
        elif self._kept + size > self.stream_cap:
            if kind not in ("comm_open", "comm_msg") and cell_index not in self._noted:
                self._noted.add(cell_index)
                cell.outputs.append(
                    new_output(
                        "stream",
                        name="stdout",
                        text="\n[output dropped: this notebook "
                        "printed more than the grader "
                        "keeps]\n",
                    )
                )
            return None
        self._kept += size
        return super().process_message(msg, cell, cell_index)


@dataclass(frozen=True)
class Stopped:
    """Why a notebook's run stopped, as the place that caught it knows it: the record's status (a
    key of model.STATUS_TEXT) and its detail."""

    status: str
    detail: str


def failure_of(exc: BaseException, cell_timeout) -> Stopped:
    """A record's status and detail for what stopped a notebook's run (model.STATUS_TEXT's keys)."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    text = " ".join(str(exc).split())[:300]
    if isinstance(exc, OutputLimitExceeded):
        return Stopped("output_limit", text.removeprefix("OutputLimitExceeded: "))
    if isinstance(exc, DeadKernelError) or "Kernel died" in text:
        return Stopped("kernel_died", text or "the kernel died")
    if isinstance(exc, CellTimeoutError) and "IOPub" in text:
        return Stopped(
            "timeout",
            "a cell's output did not arrive in time after it finished (a machine too busy?)",
        )
    if isinstance(exc, CellTimeoutError):
        return Stopped("timeout", f"a cell ran past {cell_timeout} s and ignored the interrupt")
    if isinstance(exc, MemoryError):
        return Stopped(
            "out_of_memory", "the grading process ran out of memory on this notebook's output"
        )
    return Stopped("error", f"{type(exc).__name__}: {text}")


class CapOutputs(NbGraderPreprocessor):
    """Cut outputs to a byte budget, with a visible note where something was cut.

    nbgrader's LimitOutput counts lines, so one 60 MB line passes it; this counts
    characters, per output and per notebook, so no feedback page grows past about 1 MB.
    """

    per_output = Integer(20_000, help="characters kept of one output").tag(config=True)
    per_notebook = Integer(400_000, help="characters kept of all outputs together").tag(config=True)
    cut_code = Bool(
        True, help="cut a long code cell's source too (a learner's cell may be huge)"
    ).tag(config=True)

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
        if len(cell.source) > self.per_output and (cell.cell_type != "code" or self.cut_code):
            cell.source = cell.source[: self.per_output] + (
                f"\n[cell cut: {len(cell.source) - self.per_output:,} more characters]"
            )
        if cell.cell_type != "code":
            return cell, resources
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                output["text"] = self._cut(output.get("text", ""))
            elif output.get("output_type") == "error":
                output["evalue"] = self._cut(str(output.get("evalue", "")))
                output["traceback"] = [
                    self._cut(str(line)) for line in output.get("traceback", [])[-20:]
                ]
            elif "data" in output:
                for mime, value in list(output["data"].items()):
                    # JSON data (widgets): kept whole when small
                    if not isinstance(value, (str, list)):
                        if len(json.dumps(value)) > self.per_output:
                            output["data"] = {
                                "text/plain": "[an output too large to keep was removed]"
                            }
                            break
                        continue
                    text = value if isinstance(value, str) else "".join(map(str, value))
                    if mime.startswith("image/") and len(text) > self.per_output:
                        output["data"] = {"text/plain": "[a figure too large to keep was removed]"}
                        break
                    output["data"][mime] = self._cut(text)
        return cell, resources


class CapGradedOutputs(CapOutputs):
    """CapOutputs for the notebook that is graded: every code cell's source stays whole, since
    the judge loads the learner's code from it (a long answer cut short would not run). The
    feedback step, whose page shows the code, uses CapOutputs and cuts it there."""

    cut_code = Bool(False).tag(config=True)


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
                output["traceback"] = [
                    f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"
                ]
        cell.source = with_hidden_note(cell)
        return cell, resources


class SanitizeOutputs(SanitizeHTML):
    """nbconvert's SanitizeHTML for what is HTML already (raw cells, a code output's ``text/html``),
    never for markdown: bleach would escape every ``<``, ``>`` and ``&`` of a markdown cell's source
    before it is rendered, and the renderer escapes them again inside code, so the page would read
    ``latency_ratio &lt;= 0.75``. A markdown cell and a ``text/markdown`` output stay as written
    here; the grader sanitizes the HTML their markdown makes, as it renders the page
    (``record/markup.py``). Scripts and other outputs are removed as before."""

    safe_output_keys = Set(
        {
            "metadata",
            "text/plain",
            "text/latex",
            "application/json",
            "image/png",
            "image/jpeg",
            "text/markdown",
        },
        help="output types kept as they are (text/markdown: sanitized once rendered)",
    ).tag(config=True)
    sanitized_output_types = Set({"text/html"}, help="output types sanitized here").tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "markdown":
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)


_DIGITS = re.compile(r"[0-9]{1,9}")
SIZE_KEYS = ("width", "height")


def _size(value) -> int | float | None:
    """A width or height as a number; None for anything else (booleans, NaN, '100px', ...)."""
    if isinstance(value, bool):
        return None
    # not NaN nor infinite
    if isinstance(value, int) or (isinstance(value, float) and abs(value) < float("inf")):
        return value
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        return int(value)
    return None


@dataclass(frozen=True)
class FigureSize(JsonRecord):
    """A figure's width and height as numbers (``_size``), each left out when it is not one."""

    width: int | float | None = omitted()
    height: int | float | None = omitted()

    @classmethod
    def read(cls, metadata) -> FigureSize:
        """The numeric width and height of a metadata mapping (neither: it is not one)."""
        if not isinstance(metadata, dict):
            return cls()
        return cls(_size(metadata.get("width")), _size(metadata.get("height")))


@dataclass(frozen=True)
class OutputSizes(JsonRecord):
    """An output's metadata cut to numeric ``width``/``height``, at the top level and under each
    mime type (``{"image/png": {"width": 640}}``), the only keys a page needs to show a figure."""

    width: int | float | None = omitted()
    height: int | float | None = omitted()
    by_type: dict[str, FigureSize] = flattened()  # mime type -> its figure's size (one with any)

    @classmethod
    def read(cls, metadata) -> OutputSizes:
        top = FigureSize.read(metadata)
        items = metadata.items() if isinstance(metadata, dict) else ()
        by_type = {
            key: size
            for key, value in items
            if key not in SIZE_KEYS and (size := FigureSize.read(value)) != FigureSize()
        }
        return cls(top.width, top.height, by_type)


class SafeOutputMetadata(NbGraderPreprocessor):
    """Keep only numeric image sizes in the metadata of every code cell's outputs.

    nbconvert writes an image's width and height into ``<img ... width=VALUE>`` unquoted, so a
    learner's output whose width is ``"1 onerror=..."`` adds a live event handler to the
    feedback page. Its other output metadata steers the page too (``filenames`` becomes the
    image's source, ``isolated`` puts HTML in a frame of its own) and a figure needs none of it.
    The notebook's saved widget state goes as well: it is data for a widget manager script,
    which a feedback page never runs.
    """

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        for output in cell.get("outputs", []):
            if "metadata" in output:  # stream and error outputs have none
                output["metadata"] = nbformat.from_dict(
                    OutputSizes.read(output["metadata"]).to_json()
                )
        return cell, resources


_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")
# rendered as <img src="data:...;base64,..."> (escaped): kept when plain base64
SAFE_IMAGES = ("image/png", "image/jpeg")
SAFETY_NOTE = "_Written by the learner; shown as plain text for safety._"


def _text(value) -> str:
    return (
        value
        if isinstance(value, str)
        else "".join(map(str, value))
        if isinstance(value, list)
        else str(value)
    )


def fenced(text: str) -> str:
    """``text`` as a markdown fenced code block: its fence is longer than any run of
    backticks in the text, so nothing in it can close the block, and it renders escaped."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "\ufffd")
    runs = [len(run) for run in re.findall(r"`+", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{SAFETY_NOTE}\n\n{fence}text\n{text}\n{fence}"


class NeutraliseForDisplay(NbGraderPreprocessor):
    """Make a graded notebook safe to show to the instructor (formgrader renders it unsanitised).

    - code outputs keep only ``text/plain`` and base64 PNG/JPEG images; stream and error
      outputs stay (the templates escape them); html, javascript, svg, markdown, latex and
      widget data, and all output metadata, are dropped with a note;
    - a markdown or raw cell whose source is not one of the course's own (``trusted_markdown``)
      becomes a fenced code block with a one-line note, so the browser shows it as text;
    - attachments go; nbgrader metadata stays only on cells whose ``grade_id`` is the
      course's (the template writes it into the page unescaped); odd cell ids are replaced;
      notebook metadata keeps only the kernel and language.
    Scores are already decided: this changes only what is displayed.
    """

    trusted_markdown = List(Unicode(), help="markdown sources of the course's own notebook").tag(
        config=True
    )
    trusted_ids = List(Unicode(), help="grade ids of the course's own notebook").tag(config=True)

    def preprocess(self, nb, resources):
        self._trusted = {source.strip() for source in self.trusted_markdown}
        self._ids = set(self.trusted_ids)
        nb.metadata = nbformat.from_dict(
            {k: nb.metadata[k] for k in ("kernelspec", "language_info") if k in nb.metadata}
        )
        nb.cells = [
            cell for cell in nb.cells if cell.get("cell_type") in ("code", "markdown", "raw")
        ]
        for index, cell in enumerate(nb.cells):
            nb.cells[index], resources = self.preprocess_cell(cell, resources, index)
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        cell.pop("attachments", None)
        if "id" in cell and not _SAFE_ID.match(str(cell.id)):
            cell.id = f"cell-{index}"
        meta = cell.metadata.get("nbgrader")
        if meta is not None and (
            not isinstance(meta, dict)
            or meta.get("grade_id") not in self._ids
            or not _SAFE_ID.match(str(meta.get("grade_id")))
        ):
            del cell.metadata["nbgrader"]
        source = _text(cell.get("source", ""))
        if cell.cell_type == "raw":
            cell.cell_type = "markdown"
            cell.metadata.pop("raw_mimetype", None)
            cell.metadata.pop("format", None)
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
        if cell.cell_type == "markdown":
            cell.source = source if source.strip() in self._trusted else fenced(source)
            return cell, resources
        cell.source = source
        cell.outputs = [
            kept
            for kept in (self._output(out) for out in cell.get("outputs", []))
            if kept is not None
        ]
        return cell, resources

    @staticmethod
    def _output(output):
        kind = output.get("output_type")
        if kind == "stream":
            name = output.get("name") if output.get("name") in ("stdout", "stderr") else "stdout"
            return new_output("stream", name=name, text=_text(output.get("text", "")))
        if kind == "error":
            return new_output(
                "error",
                ename=_text(output.get("ename", "")),
                evalue=_text(output.get("evalue", "")),
                traceback=[_text(line) for line in output.get("traceback", [])],
            )
        if kind not in ("execute_result", "display_data"):
            return None
        data = output.get("data", {}) if isinstance(output.get("data"), dict) else {}
        kept = {}
        if "text/plain" in data:
            kept["text/plain"] = _text(data["text/plain"])
        for mime in SAFE_IMAGES:
            value = data.get(mime)
            if isinstance(value, (str, list)) and _BASE64.match(_text(value)):
                kept[mime] = _text(value)
        dropped = sorted(set(data) - set(kept))
        if dropped:
            note = (
                "[not shown for safety: "
                f"{', '.join(m for m in dropped if _SAFE_MIME.match(m)) or 'rich'} output]"
            )
            kept["text/plain"] = (
                (kept["text/plain"] + "\n" + note) if "text/plain" in kept else note
            )
        if kind == "execute_result":
            count = output.get("execution_count")
            return new_output(
                kind, data=kept, execution_count=count if isinstance(count, int) else None
            )
        return new_output(kind, data=kept)


_SAFE_MIME = re.compile(r"^[A-Za-z0-9.+/-]{1,80}$")


def keep_for_display(source: Path, target: Path, master: Path, assignment: str) -> None:
    """Keep a graded notebook for formgrader, which renders it without sanitizing: learner
    markdown becomes plain text, outputs plain text or images (NeutraliseForDisplay). The
    course's own markdown and grade ids come from the master's source and release copies."""
    if not source.is_file():
        return
    trusted, ids = [], []
    for folder in ("source", "release"):
        path = master / folder / assignment / source.name
        if path.is_file():
            stat = path.stat()
            markdown, known = _trusted_cells(path, (stat.st_mtime_ns, stat.st_size, stat.st_ino))
            trusted += markdown
            ids += known
    from ..matching import read_graded

    nb = read_graded(source)
    if nb is None:
        return
    nb, _ = NeutraliseForDisplay(trusted_markdown=trusted, trusted_ids=ids).preprocess(nb, {})
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    nbformat.write(nb, tmp)
    os.replace(tmp, target)


@functools.lru_cache(maxsize=64)
def _trusted_cells(
    path: Path, stamp: tuple[int, int, int]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A master notebook's markdown and grade ids (read once per batch for the class: ``stamp``, the
    file's time, size and inode, makes a changed master read again)."""
    cells = nbformat.read(path, as_version=4).cells
    markdown = tuple(cell.source for cell in cells if cell.cell_type == "markdown")
    return markdown, tuple(
        gid for cell in cells if (gid := cell.metadata.get("nbgrader", {}).get("grade_id"))
    )
