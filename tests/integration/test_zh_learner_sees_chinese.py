"""What a Chinese learner sees is Chinese: the six Chinese notebooks, answered, run headless as a
learner's Jupyter runs them (widgets live), and every printed line, every rich output, every text
matplotlib draws (hooked at ``Text.draw``, so a tick label the axis re-sets at draw time is read as
it is drawn) and every widget's labels and options (the widget state the frontend renders) are
scanned for English phrases: two or more ordinary English words in a row.

An ordinary word is lower case or capitalised letters (``copy``, ``Decode``), so identifiers
(``real_cpu``, ``handoff_step``), acronyms and units (``GPU``, ``SMs``, ``MiB``, ``H2D``) and model
names with digits (``Llama-3-70B``) are never one. Allowed besides (ALLOWED, each with its reason):
code in backticks or quotes, a gloss in full-width parentheses (``（prefill）``), and the few names
a Chinese learner meets in English elsewhere.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from submissions import NOTEBOOKS, build, write

CJK_OR_FULL_WIDTH = re.compile(r"([\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f·→←×✓✗—…“”‘’])")
ORDINARY = re.compile(r"[A-Za-z][a-z]*(?:-[a-z]+)*")
OPENING = "([{<"
CODE_QUOTES = "`'\""
# Spans a learner reads as they are in Chinese text too: removed before the scan.
ALLOWED = [
    (re.compile(r"`[^`\n]*`"), "inline code"),
    (re.compile(r"（[^（）\u4e00-\u9fff]*）"), "a gloss of the Chinese term before it, in full-width parentheses"),
    (re.compile(r"\b[A-Z][a-z]+ et al\.?"), "a citation's authors"),
    (re.compile(r"\bRun All\b"), "Jupyter's menu command, named as the learner's menu names it"),
    (re.compile(r"https?://\S+"), "a link"),
]


def english_phrases(text: str) -> list[str]:
    """The English phrases of ``text``: runs of two or more ordinary words separated by single
    spaces, not broken by punctuation, code, digits or Chinese."""
    for pattern, _reason in ALLOWED:
        text = pattern.sub(" ", text)
    text = CJK_OR_FULL_WIDTH.sub(r" \1 ", text)
    found: list[str] = []
    run: list[str] = []

    def close() -> None:
        if len(run) >= 2:
            found.append(" ".join(run))
        run.clear()

    for line in text.splitlines():
        for token in re.split(r"( {2,}|\t)", line.strip()):  # a table's columns (two spaces or more apart) are no phrase
            if not token.strip():
                close()
                continue
            for word in token.split():
                _word(word, run, close)
        close()
    return found


def _word(token: str, run: list[str], close) -> None:
    """Add one whitespace-free token to the current run of ordinary words, or end the run."""
    lead = len(token) - len(token.lstrip(OPENING + CODE_QUOTES))
    if any(ch in CODE_QUOTES for ch in token[:lead]):  # a quoted value: code, a repr's key or string
        close()
        return
    if lead:
        close()
    word = token[lead:].rstrip(",.;:!?)]}>" + CODE_QUOTES)
    if not ORDINARY.fullmatch(word):
        close()
        return
    run.append(word)
    if word != token[lead:]:  # punctuation after the word ends the phrase
        close()


# ----------------------------------------------------------------- the finder can fail, and allows what it should


def test_the_finder_finds_english_phrases():
    assert english_phrases("copy engine H2D") == ["copy engine"]
    assert english_phrases("real_cpu on cpu · reference measurement shipped with the course") == [
        "on cpu",
        "reference measurement shipped with the course",
    ]
    assert english_phrases("决定：wait，because the state is late") == ["because the state is late"]
    assert english_phrases("prefill finalize / decode start") == ["prefill finalize", "decode start"]
    assert english_phrases("Read the ✗ lines above: each says what") == ["Read the", "lines above", "each says what"]


def test_the_finder_allows_chinese_identifiers_units_glosses_and_code():
    assert english_phrases("预填充（prefill）在 12.5 ms 后完成，GPU SMs 空闲") == []
    assert english_phrases("handoff_step 返回 {'action': 'wait', 'reason': 'late'}") == []
    assert english_phrases("Llama-3-70B 的 KV 缓存：640 MiB，经 PCIe Gen5 传输") == []
    assert english_phrases("请运行 `python -m autograde check` 或者 Run All") == []
    assert english_phrases("见 Zhong et al. 的 DistServe") == []
    assert english_phrases("模式：real_cpu，设备：cpu") == []


def test_the_finder_reads_a_tables_columns_apart():
    assert english_phrases("link   transfer   prefill") == []
    assert english_phrases("run  exposed transfer") == ["exposed transfer"]


# ----------------------------------------------------------------- what a real_cpu run prints

DECISIONS = ["accept_physical_overlap", "tune_overlap_window", "rerun_on_quiet_machine", "reject_incorrect_path", "reject_instrument_fault"]


@pytest.mark.parametrize("decision", DECISIONS)
def test_each_decisions_reason_is_printed_in_chinese(decision, monkeypatch, root):
    """Notebook 05 prints the result's decision_reason (English in the file) on a measured run:
    the reason, what fired with its numbers, and a busy machine's note read in Chinese."""
    import copy

    from tools import i18n
    from tools.overlap import results

    reference = json.loads((root / "benchmarks" / "reference" / "inf_serving_overlap_cpu_reference.json").read_text(encoding="utf-8"))
    result = copy.deepcopy(reference)
    result["hardware"].update(load_average_1m=3.0, other_cpu_cores=1.5)  # a busy machine: its note is added
    if decision == "tune_overlap_window":
        result["cases"][1]["latency_ratio"] = 0.9  # a calibrated case misses the bar
    results.finalize(result, lambda cases, controls: decision)
    english = result["decision_reason"]
    assert "Busy machine" in english, english
    i18n.set_language("zh")
    try:
        shown = i18n.localize_lines(f"{'reason':>15}: {english}")
    finally:
        i18n.set_language(None)
    assert english_phrases(shown) == [], shown
    assert shown.startswith(" " * 9 + "reason: "), "the line keeps its own indentation"


# ----------------------------------------------------------------- what the learner sees

STARTUP = """
import json as _json, os as _os
from matplotlib.text import Text as _Text

_drawn_log = open(_os.environ["ZH_SCAN_DRAWN_TEXT"], "a", encoding="utf-8")
_text_draw = _Text.draw


def _draw_and_record(self, renderer):
    _text_draw(self, renderer)
    if self.get_visible() and self.get_text().strip():
        _drawn_log.write(_json.dumps(self.get_text(), ensure_ascii=False) + "\\n")
        _drawn_log.flush()


_Text.draw = _draw_and_record
"""

WIDGET_TEXT = ("description", "_options_labels", "tooltip", "placeholder", "_titles", "button_style_label")
WIDGET_VALUE_SHOWN = {"HTMLModel", "HTMLMathModel", "LabelModel", "TextareaModel", "TextModel"}


def _output_texts(outputs) -> list[str]:
    """What the frontend shows of each output: its richest text (HTML without tags, markdown or plain
    text), streams, and errors; nothing for a widget's view (its text/plain is a repr no one sees)."""
    texts = []
    for out in outputs:
        if out.get("output_type") == "stream":
            texts.append(out.get("text", ""))
        elif out.get("output_type") == "error":
            texts += [out.get("evalue", ""), *out.get("traceback", [])]
        else:
            data = out.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data or any(k.startswith("image/") for k in data):
                continue
            for kind in ("text/html", "text/markdown", "text/plain"):
                if kind in data:
                    text = "".join(data[kind]) if isinstance(data[kind], list) else data[kind]
                    texts.append(re.sub(r"<[^>]+>", " ", text) if kind == "text/html" else text)
                    break
    return texts


def _widget_texts(nb) -> list[str]:
    """Every label, option, tooltip and shown value of the widgets the run left (nbclient stores
    their state as the frontend gets it), and what their Output widgets show."""
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    texts = []
    for model in state.values():
        fields = model.get("state", {})
        for key in WIDGET_TEXT:
            value = fields.get(key)
            texts += [value] if isinstance(value, str) else [v for v in value or () if isinstance(v, str)] if isinstance(value, list) else []
        if model.get("model_name") in WIDGET_VALUE_SHOWN and isinstance(fields.get("value"), str):
            texts.append(re.sub(r"<[^>]+>", " ", fields["value"]))
        texts += _output_texts(fields.get("outputs", []))
    return texts


def _drawn(log: Path) -> str:
    """The texts the figures drew, one a line (a label broken over lines is one phrase: joined)."""
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return "\n".join(" ".join(json.loads(line).split("\n")) for line in lines)


def learner_sees_english(folder: Path, tmp_path: Path, monkeypatch) -> dict[str, list[str]]:
    """Run each answered Chinese notebook in ``folder``; {where: English phrases} of what it showed."""
    from nbclient import NotebookClient

    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-record-drawn-text.py").write_text(STARTUP, encoding="utf-8")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("COURSE_WIDGETS", "live")  # a learner's Jupyter renders the widgets
    monkeypatch.delenv("COURSE_LANG", raising=False)  # the set-up cell names the edition
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend shows each figure
    found: dict[str, list[str]] = {}
    for name in NOTEBOOKS:
        drawn = tmp_path / f"{name}.drawn.jsonl"
        monkeypatch.setenv("ZH_SCAN_DRAWN_TEXT", str(drawn))
        nb = nbformat.read(folder / f"{name}.ipynb", 4)
        NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
        shown = {
            **{f"{name} cell {i} output": "\n".join(_output_texts(c.outputs)) for i, c in enumerate(nb.cells) if c.cell_type == "code"},
            f"{name} widgets": "\n".join(_widget_texts(nb)),
            f"{name} figures": _drawn(drawn),
        }
        assert shown[f"{name} figures"], f"{name}: no figure text was recorded: the scan would pass vacuously"
        for where, text in shown.items():
            phrases = english_phrases(text)
            if phrases:
                found[where] = phrases
    return found


@pytest.mark.slow
def test_a_chinese_learner_sees_no_english_phrase(tmp_path, monkeypatch):
    folder = tmp_path / "learner"
    for name in NOTEBOOKS:
        write(folder.parent, folder.name, name, build(name, edition="zh"))
    found = learner_sees_english(folder, tmp_path, monkeypatch)
    distinct = {(where.split()[0], phrase) for where, phrases in found.items() for phrase in phrases}
    report = "\n".join(f"{where}: {sorted(set(phrases))}" for where, phrases in found.items())
    assert not found, f"{len(distinct)} distinct English phrase(s) a Chinese learner sees (per notebook):\n{report}"
