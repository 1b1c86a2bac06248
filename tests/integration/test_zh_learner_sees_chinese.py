"""What a Chinese learner sees is Chinese: the six Chinese notebooks run headless as a learner's
Jupyter runs them (widgets live): answered, unanswered, notebooks 04 and 06 without the earlier ones
beside them, and notebook 05 measured on a busy machine. Every printed line, every rich output,
every text matplotlib draws (hooked at ``Text.draw``, so a tick label the axis re-sets at draw time
is read as it is drawn) and every widget's labels and options (the widget state the frontend
renders) are scanned for English with the strict finder (``tests/english.py``: a single English
word counts; code, units, names and the glossary's English terms are allowed, each with its reason).

``english_phrases`` below is the older, looser finder (two or more ordinary English words in a row),
kept with its own tests; no scan uses it now (the feedback pages' test reads with the strict one).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import nbformat
import pytest
from english import english_words

from submissions import NOTEBOOKS, build, write

CJK_OR_FULL_WIDTH = re.compile(
    r"([\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f·→←×✓✗—…“”‘’])"
)
ORDINARY = re.compile(r"[A-Za-z][a-z]*(?:-[a-z]+)*")
OPENING = "([{<"
CODE_QUOTES = "`'\""
# Spans a learner reads as they are in Chinese text too: removed before the scan.
ALLOWED = [
    (re.compile(r"`[^`\n]*`"), "inline code"),
    (
        re.compile(r"（[^（）\u4e00-\u9fff]*）"),
        "a gloss of the Chinese term before it, in full-width parentheses",
    ),
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
        # a table's columns (two spaces or more apart) are no phrase
        for token in re.split(r"( {2,}|\t)", line.strip()):
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
    # a quoted value: code, a repr's key or string
    if any(ch in CODE_QUOTES for ch in token[:lead]):
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


# ----------------------------------------------------------------- the finder can fail, and allows
# what it should


def test_the_finder_finds_english_phrases():
    assert english_phrases("copy engine H2D") == ["copy engine"]
    assert english_phrases("real_cpu on cpu · reference measurement shipped with the course") == [
        "on cpu",
        "reference measurement shipped with the course",
    ]
    assert english_phrases("决定：wait，because the state is late") == ["because the state is late"]
    assert english_phrases("prefill finalize / decode start") == [
        "prefill finalize",
        "decode start",
    ]
    assert english_phrases("Read the ✗ lines above: each says what") == [
        "Read the",
        "lines above",
        "each says what",
    ]


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


# ----------------------------------------------------------------- the strict finder


def test_the_strict_finder_finds_single_english_words_and_allows_code_and_names():
    assert english_words("KV 发送方式 whole：请求 993～1004") == ["whole"]
    assert english_words("TTFT P50 505 ms · 250 ok, 150 recomputed · 平均暴露传输") == [
        "ok",
        "recomputed",
    ]
    assert english_words("触发的条件：64 MiB calibrated: 串行 P95") == ["calibrated"]
    assert english_words("提交的语言版本：zh 4") == ["zh"]
    assert english_words("运行  ok/rec/fail/rej  TTFT") == ["ok rec fail rej"]
    allowed = (
        "ready=True  missing=[] incompatible=[]",
        "Llama-3-70B 的 KV 缓存：640 MiB，经 PCIe Gen5 传输，4 req/s",
        "重算策略（recompute）下的决策：ready 5 个，wait 3 个",
        "已写入 /tmp/x/inf_serving_overlap_default.json",
        "请运行 `python -m autograde check`，或者 Run All；decide_overlap 抛出了 ValueError：'x'",
        "notebook 02 的 payload：8192 个 token，t0 = 2.1 µs",
    )
    assert [english_words(text) for text in allowed] == [[]] * len(allowed)


DECISIONS = [
    "accept_physical_overlap",
    "tune_overlap_window",
    "rerun_on_quiet_machine",
    "reject_incorrect_path",
    "reject_instrument_fault",
]


@pytest.mark.parametrize("decision", DECISIONS)
def test_each_decisions_reason_is_shown_in_chinese(decision, root):
    """Notebook 05 shows a measured run's reason: what the rule says, what fired with its numbers,
    and a busy machine's note, rebuilt in Chinese from the result (its file keeps the English):
    no English word, and no ASCII ; or . after a Chinese character."""
    import copy
    import re

    from tools import i18n
    from tools.overlap import results

    reference = json.loads(
        (root / "benchmarks" / "reference" / "inf_serving_overlap_cpu_reference.json").read_text(
            encoding="utf-8"
        )
    )
    result = copy.deepcopy(reference)
    # a busy machine: its note is added
    result["hardware"].update(load_average_1m=3.0, other_cpu_cores=1.5)
    if decision == "tune_overlap_window":
        result["cases"][1]["latency_ratio"] = 0.9  # a calibrated case misses the bar
    if decision == "rerun_on_quiet_machine":
        for case in result["cases"]:
            # both noise conditions' neighbours: several joined
            case["serial_p95_ms"] = 2 * case["serial_median_ms"]
    results.finalize(result, lambda cases, controls: decision)
    assert "Busy machine" in result["decision_reason"]
    i18n.set_language("zh")
    try:
        shown = results.explain(result)
    finally:
        i18n.set_language(None)
    assert english_words(shown) == [], shown
    assert "calibrated" not in shown and not re.search(r"[\u4e00-\u9fff）][;.]", shown), shown
    assert results.explain(result) == result["decision_reason"], "English is what the file records"


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

WIDGET_TEXT = (
    "description",
    "_options_labels",
    "tooltip",
    "placeholder",
    "_titles",
    "button_style_label",
)
WIDGET_VALUE_SHOWN = {"HTMLModel", "HTMLMathModel", "LabelModel", "TextareaModel", "TextModel"}


def _output_texts(outputs) -> list[str]:
    """What the frontend shows of each output: its richest text (HTML without tags, markdown or
    plain text), streams, and errors; nothing for a widget's view (its text/plain is a repr no one
    sees)."""
    texts = []
    for out in outputs:
        if out.get("output_type") == "stream":
            texts.append(out.get("text", ""))
        # its message (the traceback under it is Python's listing of the code)
        elif out.get("output_type") == "error":
            texts.append(f"{out.get('ename', '')}: {out.get('evalue', '')}")
        else:
            data = out.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data or any(
                k.startswith("image/") for k in data
            ):
                continue
            for kind in ("text/html", "text/markdown", "text/plain"):
                if kind in data:
                    text = "".join(data[kind]) if isinstance(data[kind], list) else data[kind]
                    texts.append(
                        html.unescape(re.sub(r"<[^>]+>", " ", text))
                        if kind == "text/html"
                        else text
                    )
                    break
    return texts


def _widget_texts(nb) -> list[str]:
    """Every label, option, tooltip and shown value of the widgets the run left (nbclient stores
    their state as the frontend gets it), and what their Output widgets show."""
    state = (
        nb.metadata.get("widgets", {})
        .get("application/vnd.jupyter.widget-state+json", {})
        .get("state", {})
    )
    texts = []
    for model in state.values():
        fields = model.get("state", {})
        for key in WIDGET_TEXT:
            value = fields.get(key)
            texts += (
                [value]
                if isinstance(value, str)
                else [v for v in value or () if isinstance(v, str)]
                if isinstance(value, list)
                else []
            )
        if model.get("model_name") in WIDGET_VALUE_SHOWN and isinstance(fields.get("value"), str):
            texts.append(html.unescape(re.sub(r"<[^>]+>", " ", fields["value"])))
        texts += _output_texts(fields.get("outputs", []))
    return texts


def _drawn(log: Path) -> str:
    """The texts the figures drew, one a line (a label broken over lines is one phrase: joined)."""
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return "\n".join(" ".join(json.loads(line).split("\n")) for line in lines)


BUSY_MACHINE = """
import os as _os
_os.getloadavg = lambda: (5.53, 5.0, 4.0)
import tools.overlap.load as _load
def _busy_exit(self, *exc):
    self.other_cores = 1.59
_load.OtherCpuMeter.__exit__ = _busy_exit
"""


def learner_sees_english(
    folder: Path,
    tmp_path: Path,
    monkeypatch,
    names=NOTEBOOKS,
    startup_extra: str = "",
    seen: dict | None = None,
) -> dict[str, list[str]]:
    """Run each Chinese notebook of ``names`` in ``folder``; {where: English} of what it showed
    (``english_words``). ``startup_extra``: code the kernel runs first (a busy machine, faked);
    ``seen`` gets {where: text} of everything shown."""
    from nbclient import NotebookClient

    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-record-drawn-text.py").write_text(STARTUP, encoding="utf-8")
    (startup / "01-extra.py").write_text(startup_extra, encoding="utf-8")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("LLM_ALGO_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("COURSE_WIDGETS", "live")  # a learner's Jupyter renders the widgets
    monkeypatch.delenv("COURSE_LANG", raising=False)  # the set-up cell names the edition
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend shows each figure
    found: dict[str, list[str]] = {}
    for name in names:
        drawn = tmp_path / f"{name}.drawn.jsonl"
        monkeypatch.setenv("ZH_SCAN_DRAWN_TEXT", str(drawn))
        nb = nbformat.read(folder / f"{name}.ipynb", 4)
        NotebookClient(
            nb,
            timeout=300,
            kernel_name="python3",
            allow_errors=True,
            resources={"metadata": {"path": str(folder)}},
        ).execute()
        shown = {
            **{
                f"{name} cell {i} output": "\n".join(_output_texts(c.outputs))
                for i, c in enumerate(nb.cells)
                if c.cell_type == "code"
            },
            f"{name} widgets": "\n".join(_widget_texts(nb)),
            f"{name} figures": _drawn(drawn),
        }
        if seen is not None:
            seen.update(shown)
        for where, text in shown.items():
            words = english_words(text)
            if words:
                found[where] = words
    return found


def _report(found: dict[str, list[str]]) -> str:
    distinct = {(where.split()[0], word) for where, words in found.items() for word in words}
    report = "\n".join(f"{where}: {sorted(set(words))}" for where, words in found.items())
    return (
        f"{len(distinct)} distinct English run(s) a Chinese learner sees (per notebook):\n{report}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["answered", "unanswered", "alone"])
def test_a_chinese_learner_sees_no_english(variant, tmp_path, monkeypatch):
    """Answered, every exercise left as released, and 04 and 06 without the notebooks they load."""
    folder = tmp_path / "learner"
    names = ["04_decode_start_gate", "06_handoff_simulator"] if variant == "alone" else NOTEBOOKS
    for name in names:
        write(
            folder.parent,
            folder.name,
            name,
            build(name, fill=variant != "unanswered", edition="zh"),
        )
    seen: dict[str, str] = {}
    found = learner_sees_english(folder, tmp_path, monkeypatch, names, seen=seen)
    assert [where for where, text in seen.items() if where.endswith("figures") and text], (
        "no figure text was recorded: the scan would pass vacuously"
    )
    assert not found, _report(found)


@pytest.mark.slow
def test_a_measured_run_on_a_busy_machine_is_chinese_too(tmp_path, monkeypatch):
    """Notebook 05 measured (real_cpu) on a machine that other programs keep busy (faked: the meter
    reads 1.59 other cores and the load average 5.53): the reason, the busy-machine warnings of 5.5
    and 5.6 and their figures' titles are Chinese. The control: the English run says "busy
    machine"."""
    folder = tmp_path / "learner"
    nb = build("05_cuda_stream_overlap", edition="zh")
    setup = next(cell for cell in nb.cells if cell.get("id") == "05-05")
    setup.source = setup.source.replace("RUN_MODE = 'dry_run'", "RUN_MODE = 'real_cpu'").replace(
        "RUN_LABEL = 'default'", "RUN_LABEL = 'zh_busy'"
    )
    assert "'real_cpu'" in setup.source
    write(folder.parent, folder.name, "05_cuda_stream_overlap", nb)
    seen: dict[str, str] = {}
    found = learner_sees_english(
        folder, tmp_path, monkeypatch, ["05_cuda_stream_overlap"], BUSY_MACHINE, seen
    )
    assert not found, _report(found)
    text = "\n".join(seen.values())
    assert (
        "机器负载高：运行期间其他程序平均占用约 1.59 个 CPU" in text
        and "警告：机器负载高" in text
        and "原因：" in text
    ), text[-3000:]
