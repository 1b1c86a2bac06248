"""The strict English finder: every English word a Chinese learner reads in a run's output, a
single word included ("whole", "calibrated:", "250 ok, 150 recomputed").

A word is a run of Latin letters. It is not English to a Chinese reader when it is code or a name
(each allowed here with its reason):

- code: in backticks or quotes (``'ok'``, ``"x"``), a file's path or name, a URL, a call with its
  arguments (``decide_overlap([], controls)``), a graded idea's id in brackets (``[clip]``), a word
  with a digit or an underscore (``real_cpu``, ``Llama-3-8B``, ``x86_64``, ``P99``), a unit right
  after its number (``64Mi``), a word joined to code by a dot, ``=``, ``+``, ``%`` or ``(``
  (``torch.cuda``, ``ready=True``, ``2.5.1+cpu``, ``%pip``), a single letter but a, A and I;
- an acronym in capitals (``GPU``, ``TTFT``, ``KV``, ``SMs``, ``TODO``), a name with a capital
  inside (an exception's class, ``ValueError``; a product, ``NVLink``);
- a term in full-width parentheses after the Chinese word it glosses (``重算策略（recompute）``);
- ALLOWED_WORDS and ALLOWED_NAMES: units, product and model names, the course's code values a
  notebook shows as they are (a decision, a verdict's key, a result file's key), and the terms the
  glossary keeps in English (``docs/glossary.md``: notebook, payload).

Everything else is reported, one entry per run of adjacent English words.
"""

from __future__ import annotations

import re

# Names and code values a Chinese learner reads as they are, each with its reason.
ALLOWED_WORDS = {
    # units
    **dict.fromkeys(
        ["ms", "µs", "s", "KiB", "MiB", "GiB", "TiB", "MB", "GB", "Gb", "Gbit", "req", "B"],
        "a unit",
    ),
    # products, libraries, models, platforms
    **dict.fromkeys(
        [
            "NVLink",
            "PCIe",
            "InfiniBand",
            "RoCE",
            "Ethernet",
            "NVIDIA",
            "CUDA",
            "Llama",
            "Qwen",
            "Python",
            "torch",
            "Colab",
            "Kaggle",
            "Jupyter",
            "JupyterLab",
            "nbgrader",
            "formgrader",
            "ipywidgets",
            "matplotlib",
            "Linux",
            "vLLM",
            "SGLang",
            "Mooncake",
            "NIXL",
            "DistServe",
            "Splitwise",
            "HGX",
            "SXM",
            "GQA",
            "memcpy",
            "bf16",
        ],
        "a product, library, model or platform's name",
    ),
    # what the glossary keeps in English
    **dict.fromkeys(
        ["notebook", "payload", "token", "connector"], "a term docs/glossary.md keeps in English"
    ),
    # the course's code values, shown as its functions return them
    **dict.fromkeys(
        ["ready", "wait", "fallback", "recompute"],
        "a decision plan_decode_start and handoff_step return",
    ),
    **dict.fromkeys(
        ["missing", "incompatible", "version"],
        "a key of validate_handoff_state's verdict, or a field it names",
    ),
    **dict.fromkeys(["dependency"], "a reason check_overlap returns"),
    **dict.fromkeys(["True", "False", "None"], "a Python value"),
    **dict.fromkeys(["t0"], "the fit's fixed cost, as 5.6 names it"),
    **dict.fromkeys(["zip"], "an archive's format"),
    **dict.fromkeys(
        ["failure", "decision"], "a key of notebook 05's result file, printed as the file has it"
    ),
    **dict.fromkeys(["default"], "RUN_LABEL's value in 5.1, printed as the file has it"),
    **dict.fromkeys(
        ["all-reduce", "all-gather", "all-to-all"], "a collective, named as NCCL names it"
    ),
}
# Names of more than one word, removed before the scan
ALLOWED_NAMES = {
    "VS Code": "an editor's name",
    "Notebook 7": "Jupyter's notebook interface",
    "Run All": "Jupyter's menu command, as the learner's menu names it",
    "max(copy, compute)": "TODO 5's bound, a formula the notebook writes as it is",
    "pip install": "a command the learner types",
}
_SPANS = [
    re.compile(r"https?://\S+"),  # a link
    re.compile(r"`[^`\n]*`"),  # inline code
    re.compile(r"(?<![A-Za-z])'[^'\n]{0,80}'"),  # a quoted value (a repr, a key)
    re.compile(r'"[^"\n]{0,80}"'),
    re.compile(r"(?<![\w.])(?:~|\.{1,2})?(?:/[^\s/，。；：（）]+)+/?"),  # a path
    re.compile(r"[\w.\-]+\.(?:ipynb|json|py|whl|po|csv|zip|html|png|toml)\b"),  # a file's name
    re.compile(r"（[A-Za-z_][\w\- ./']{0,30}）"),  # a gloss of the Chinese term before it
    re.compile(r"\b[A-Z][a-z]+ et al\.?"),  # a citation's authors
    re.compile(r"\[[a-z_]+\]"),  # a graded idea's id, as a check line names it: [clip]
    re.compile(r"\b[A-Za-z_]\w*\([^()\n]*\)"),  # a call: decide_overlap([], controls)
    re.compile(r"\b[A-Z]+(?:-[A-Z]+)+\b"),  # an id in capitals: INF-CUDA-MECHANISM
]
_WORD = re.compile(r"[A-Za-zµ²][A-Za-z0-9_µ²'’\-]*")
_ACRONYM = re.compile(r"[A-Z][A-Z0-9]+s?")
# a class or a brand: ValueError, NVLink, JupyterLab
_CAMEL = re.compile(r"[A-Za-z][a-z]*[A-Z][A-Za-z]*")


def _allowed(word: str, before: str, after: str) -> bool:
    if (len(word) == 1 and word not in "aAI") or any(ch.isdigit() or ch == "_" for ch in word):
        return True
    # 64Mi, 8k; 2.5.1+cpu; COURSE_WIDGETS=static; %pip
    if before[-1:].isdigit() or before[-1:] in ("+", "=", "%"):
        return True
    if _ACRONYM.fullmatch(word) or word in ALLOWED_WORDS or _CAMEL.fullmatch(word):
        return True
    if (
        after[:1] in ("=", "(", ".")
        and after[1:2].strip()
        or before[-1:] in (".", "_")
        or after[:1] == "_"
    ):
        return True  # code: ready=True, check_overlap(...), torch.cuda
    return False


def english_words(text: str) -> list[str]:
    """The English of ``text``: each run of English words (adjacent, apart by spaces or Latin
    punctuation only), as it stands in the text, code and names left out."""
    for name in ALLOWED_NAMES:
        text = text.replace(name, " ")
    for span in _SPANS:
        text = span.sub(" ", text)
    found: list[str] = []
    run: list[str] = []
    last_end = -1
    for match in _WORD.finditer(text):
        word = match.group(0).rstrip("'’-")
        before, after = (
            text[max(0, match.start() - 1) : match.start()],
            text[match.end() : match.end() + 2],
        )
        if _allowed(word, before, after):
            if run:
                found.append(" ".join(run))
                run = []
            continue
        gap = text[last_end : match.start()] if last_end >= 0 else ""
        if run and not re.fullmatch(r"[ ,.;:!?()/\-]*", gap):
            found.append(" ".join(run))
            run = []
        run.append(word)
        last_end = match.end()
    if run:
        found.append(" ".join(run))
    return found
