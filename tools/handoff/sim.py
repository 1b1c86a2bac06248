"""A discrete-event simulator of the prefill-to-decode handoff, for many requests at once.

What is modelled
----------------
* **Arrivals**: a Poisson process at ``rate_per_s`` (prompt and output lengths fixed or uniform in
  a range), or a trace of (arrival ms, prompt tokens, output tokens) rows, e.g. from
  :func:`read_trace` (CSV).
* **Prefill pool**: ``prefill_workers`` identical instances, first come first served. A prefill
  takes the model's FLOPs (:func:`tools.presets.prefill_flops`) at ``prefill_efficiency`` of the
  GPU's dense peak, split evenly over ``tp`` GPUs and over the model's layers. A worker is free
  again when its compute ends (it keeps the KV blocks until decode has read them, as vLLM's
  "delay free" does, but prefill-side memory is not a limit here).
* **Decode blocks**: a request needs ceil((prompt + output) / block_tokens) blocks of the decode
  pool before its KV may be sent (DistServe admits a migrating request only with free blocks).
  When they are short it waits in a FIFO queue (``block_policy='wait'``) or is rejected
  (``'reject'``). Blocks return when the request's last token is out or it fails.
* **The link**: ``gbps`` and a fixed ``latency_ms`` paid once per handoff (both from
  :mod:`tools.presets`). With ``tp`` > 1 every rank sends its 1/tp share of the KV over its own
  link at the same time, so one link model carries payload/tp. ``link_sharing='fifo'``: one
  transfer at a time, in the order requests reach the link, holding it from grant to last byte.
  ``'fair'``: every active transfer gets an equal share (processor sharing, by virtual time).
* **Sending the KV**: ``streaming='whole'`` sends it in one piece once prefill ends;
  ``'layerwise'`` sends each layer's KV once that layer is computed, while later layers compute
  (Mooncake streams layer by layer; Splitwise overlaps per-layer transfer with compute). A stream
  asks for the link at the latest moment from which its layers go out back to back and still land
  one layer's bytes after prefill ends: it lands exactly when sending each layer the moment it is
  ready would, without holding the link idle between layers (real streams leave those gaps to
  other requests' layers; here the other requests get the time before the stream starts). The
  stream is computed in closed form (the ``stream_layers`` step), one event per request, never one
  per layer. Exposed transfer time is Step 2's: the link time not covered by the request's own
  prefill compute.
* **The handoff protocol and gate** (Steps 3 and 4, the ``handoff_step`` step): once it has reserved
  blocks, decode checks the state when the transfer would have landed had it had the link to
  itself from then, at full speed. Payload, metadata and ownership are there once the bytes
  landed (metadata travels with the payload: SGLang reports success only after it; ownership
  passes when decode has read the blocks, as with vLLM's delay free); the request id and the
  configuration version must match. Then ready / wait (the missing pieces land by the deadline:
  ``deadline_ms`` after the later of prefill end and the block grant, so waiting for decode blocks
  does not count against it) / fallback / recompute. The landing time the gate is given is exact
  for a transfer already on a FIFO link; for one still queued it is an estimate (the transfer on
  the link, then the queued work ahead at full speed), and on a fair-shared link too (the
  remaining bytes at the current share). A wait whose bytes miss the deadline after all falls
  back at the deadline; a request that gives up while queued never sends.
* **Faults**, each drawn per request at its rate from the seed: ``lost_metadata`` (never arrives),
  ``version_skew`` (the state carries another configuration), ``slow_link`` (its bytes take
  ``slow_factor`` times longer), ``stalled_link`` (its bytes never land; the decoder learns it only
  when the deadline passes, like SGLang's waiting timeout), ``out_of_blocks`` (the decoder finds no
  blocks on its first try; then ``block_policy`` applies). A failed handoff follows
  ``failure_policy``: ``'recompute'`` reruns the whole prefill on the decoder (vLLM's
  ``kv_load_failure_policy='recompute'`` reruns only from the first block that failed to load: the
  model charges the worst case), ``'fail'`` ends the request (vLLM's default since February 2026;
  before that, ``'recompute'`` was). An abandoned transfer frees the link when the request gives up.
* **Decode**: ``decode_ms_per_token`` per output token (continuous batching: requests decode side
  by side, bounded by blocks only). The first token comes one decode step after decode starts
  (SGLang ships the first token with the handoff, so it has no such step: the model charges every
  request the same one step more); TTFT = first token - arrival.

Not modelled: prefill batching and chunked prefill, tensor-parallel all-reduce time, decode
slowdown with batch size, prefill-side KV memory, a recompute's use of decode compute (it takes the
request's prefill time and nothing else waits for it), network congestion beyond the one shared
link, retries, interleaving the layers of different requests on the link.

Units: milliseconds for time, bytes for sizes, Gbit/s for link speeds.

Outputs
-------
``simulate`` returns ``{'config', 'summary', 'records'}``. A record per request: ``arrival_ms``,
``prompt_tokens``, ``output_tokens``, ``prefill_start_ms``, ``prefill_end_ms``,
``handoff_ready_ms`` (when it asks for blocks and the link, see above), ``blocks_ms`` (decode
blocks granted), ``transfer_start_ms``, ``transfer_end_ms`` (last byte, or when it was abandoned),
``link_held_ms`` (end - start), ``transfer_ms`` (Step 2's transfer time: latency + bytes at link
speed, slowed by a ``slow_link`` fault), ``exposed_ms``, ``decision`` (the gate's last word, or
``'rejected'``), ``outcome`` (``'ok'``, ``'recomputed'``, ``'failed'`` or ``'rejected'``: exactly
one), ``decode_start_ms``, ``first_token_ms``, ``ttft_ms`` (None without a token), ``done_ms``,
``faults``. The summary: outcome and decision counts, TTFT p50/p95/p99, total and mean transfer and
exposed time, the exposed fraction, link utilization (the share of time from the first transfer's
start to the last one's end during which the link carries one), prefill utilization (the prefill
workers' busy share from the first arrival to the last prefill's end) and the makespan.

Steps that take and return plain data
-------------------------------------
``stream_layers``, ``handoff_step`` and ``ttft_percentiles`` are the per-request steps (their
contracts are under :data:`STEPS`). :func:`simulate` calls the ones the caller passes in ``steps``:
they are the course's exercises TODO 6-8 (notebook 06), and ``handoff_step`` runs on Step 3's
``validate_handoff_state`` and Step 4's ``plan_decode_start`` (TODO 3 and 4), so this runtime, which
learners receive, holds no answer to any of them. Everything :func:`simulate` returns is JSON-able.
"""

from __future__ import annotations

import csv
import gc
import heapq
import math
import random
from collections import deque
from pathlib import Path

from .. import presets

INF = math.inf
FAULTS = ("lost_metadata", "version_skew", "slow_link", "stalled_link", "out_of_blocks")
DECISIONS = ("ready", "wait", "fallback", "recompute", "rejected")
OUTCOMES = ("ok", "recomputed", "failed", "rejected")
DEFAULT_QS = (50, 95, 99)

DEFAULTS: dict = {
    "seed": 0,
    "n_requests": 1000,  # Poisson arrivals only
    "rate_per_s": 4.0,  # Poisson arrivals only
    "prompt_tokens": 2048,  # an int, or [low, high] drawn uniformly (inclusive)
    "output_tokens": 128,  # an int, or [low, high]
    "trace": None,  # rows [arrival_ms, prompt_tokens, output_tokens]; replaces Poisson
    "model": "Llama-3-8B",  # a name in presets.MODEL_PRESETS, or a dict shaped like one
    "gpu": "H100 SXM",
    "tp": None,  # None: the model preset's
    "prefill_efficiency": presets.PREFILL_EFFICIENCY,
    "prefill_workers": 4,
    "link": "InfiniBand NDR",  # a name in presets.LINK_PRESETS
    "gbps": None,  # None: the link preset's
    "latency_ms": None,  # None: the link preset's
    "link_sharing": "fifo",  # 'fifo' or 'fair'
    "streaming": "whole",  # 'whole' or 'layerwise'
    "deadline_ms": 50.0,  # after the request's prefill end
    "decode_blocks": None,  # None: presets.kv_blocks_per_instance x decode_instances
    "decode_instances": 1,
    "block_tokens": presets.BLOCK_TOKENS,
    "block_policy": "wait",  # 'wait' or 'reject'
    "decode_ms_per_token": None,  # None: presets.decode_ms_per_token
    "faults": {},  # fault name -> rate in [0, 1]
    "slow_factor": 4.0,
    "failure_policy": "recompute",  # 'recompute' or 'fail'
    "version": "cfg-7",
}


# ======================================================================= the per-request steps
# The three per-request steps are the course's exercises TODO 6-8 (notebook 06): this runtime, which
# learners receive, holds no answer to them, and simulate() runs on the ones it is given.
#   stream_layers(grant_ms, prefill_start_ms, prefill_ms, layers, payload_ms, latency_ms)
#       -> {'start_ms', 'end_ms', 'transfer_ms', 'exposed_ms', 'hidden_ms'}: one request's KV over
#       the link, layer by layer (layers=1: whole, after prefill); the latency is paid once.
#   handoff_step(handoff) -> {'decision', 'outcome', 'act_ms', 'decode_start_ms'}: Step 3's
#       validation and Step 4's gate on one request's handoff (its input is described at
#       _Ledger.handoff_input), and what decode does about the answer under failure_policy.
#   ttft_percentiles(records, qs) -> one TTFT per q, linear interpolation, requests without a TTFT
#       left out.
STEPS = ("stream_layers", "handoff_step", "ttft_percentiles")


def _steps(steps: dict | None) -> dict:
    given = dict(steps or {})
    unknown = set(given) - set(STEPS)
    if unknown:
        raise ValueError(f"unknown step(s) {sorted(unknown)}; known: {', '.join(STEPS)}")
    missing = [name for name in STEPS if not callable(given.get(name))]
    if missing:
        raise ValueError(
            f"the simulator runs on the steps it is given; missing: {', '.join(missing)}. Pass "
            "steps={'stream_layers': ..., 'handoff_step': ..., 'ttft_percentiles': ...}: "
            "in notebook 06 your own (TODO 6-8, with handoff_step calling your "
            "validate_handoff_state and plan_decode_start from notebooks 03 and 04)"
        )
    return given


# ======================================================================= inputs


def read_trace(path) -> list[list]:
    """Rows [arrival_ms, prompt_tokens, output_tokens] from a CSV file with those three columns."""
    rows = []
    with open(Path(path), newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        need = {"arrival_ms", "prompt_tokens", "output_tokens"}
        if not reader.fieldnames or not need <= set(reader.fieldnames):
            raise ValueError(
                f"{path}: the header must name {sorted(need)}, got {reader.fieldnames}"
            )
        for line, row in enumerate(reader, start=2):
            try:
                arrival_ms = float(row["arrival_ms"])
                rows.append([arrival_ms, int(row["prompt_tokens"]), int(row["output_tokens"])])
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{path}, line {line}: {exc}") from None
    return rows


def _token_range(name: str, value) -> list[int]:
    """An int, or [low, high] of ints with 1 <= low <= high, as [low, high]."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an int or [low, high], got {value!r}")
    if isinstance(value, int):
        value = [value, value]
    is_pair = isinstance(value, (list, tuple)) and len(value) == 2
    if not is_pair or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValueError(f"{name} must be an int or [low, high] of ints, got {value!r}")
    if not 1 <= value[0] <= value[1]:
        raise ValueError(f"{name} needs 1 <= low <= high, got {value!r}")
    return [value[0], value[1]]


def _one_of(config: dict, key: str, allowed: tuple) -> None:
    if config[key] not in allowed:
        raise ValueError(f"{key} must be one of {allowed}, got {config[key]!r}")


def _positive_int(config: dict, key: str) -> None:
    value = config[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{key} must be an int >= 1, got {value!r}")


MODEL_KEYS = ("layers", "kv_bytes_per_token", "tp", "params", "dtype_bytes")
MODEL_KEYS += ("linear_flops_per_token", "attn_width")


def _hardware(config: dict) -> dict:
    """The model, GPU and link the settings name (or give as dicts), and the tp, Gbit/s and latency
    they imply unless the settings override them."""
    model = config["model"]
    model = presets.model_preset(model) if isinstance(model, str) else dict(model)
    for key in MODEL_KEYS:
        if key not in model:
            raise ValueError(f"a model dict needs {key!r} (see tools.presets.MODEL_PRESETS)")
    model.setdefault("name", "custom model")
    gpu = config["gpu"]
    gpu = presets.gpu_preset(gpu) if isinstance(gpu, str) else dict(gpu)
    link = config["link"]
    link = presets.link_preset(link) if isinstance(link, str) else dict(link)
    tp = model["tp"] if config["tp"] is None else config["tp"]
    if not isinstance(tp, int) or tp < 1:
        raise ValueError(f"tp must be an int >= 1, got {tp!r}")
    gbps = link["gbps"] if config["gbps"] is None else config["gbps"]
    latency_ms = link["latency_ms"] if config["latency_ms"] is None else config["latency_ms"]
    if not (isinstance(gbps, (int, float)) and gbps > 0):
        raise ValueError(f"gbps must be > 0, got {gbps!r}")
    if not (isinstance(latency_ms, (int, float)) and latency_ms >= 0):
        raise ValueError(f"latency_ms must be >= 0, got {latency_ms!r}")
    return {
        "model": model,
        "gpu": gpu,
        "link": link,
        "tp": tp,
        "gbps": gbps,
        "latency_ms": latency_ms,
    }


def _check_policies(config: dict) -> None:
    _one_of(config, "link_sharing", ("fifo", "fair"))
    _one_of(config, "streaming", ("whole", "layerwise"))
    _one_of(config, "block_policy", ("wait", "reject"))
    _one_of(config, "failure_policy", ("recompute", "fail"))
    for key in ("prefill_workers", "decode_instances", "block_tokens"):
        _positive_int(config, key)
    if not 0 < config["prefill_efficiency"] <= 1:
        raise ValueError(
            f"prefill_efficiency must lie in (0, 1], got {config['prefill_efficiency']!r}"
        )
    deadline_ms = config["deadline_ms"]
    if not (isinstance(deadline_ms, (int, float)) and deadline_ms >= 0):
        raise ValueError(f"deadline_ms must be >= 0, got {deadline_ms!r}")
    if not isinstance(config["version"], str):
        raise ValueError(f"version must be a string, got {config['version']!r}")
    if not config["slow_factor"] >= 1:
        raise ValueError(f"slow_factor must be >= 1, got {config['slow_factor']!r}")


def _checked_faults(config: dict) -> dict:
    faults = dict(config["faults"] or {})
    for name, rate in faults.items():
        if name not in FAULTS:
            raise ValueError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}")
        if not (isinstance(rate, (int, float)) and 0 <= rate <= 1):
            raise ValueError(f"fault rate for {name} must lie in [0, 1], got {rate!r}")
    return faults


def _checked_trace(trace: list) -> list[list]:
    if not trace:
        raise ValueError("the trace is empty")
    for row_number, row in enumerate(trace):
        try:
            usable = len(row) == 3 and float(row[0]) >= 0 and int(row[1]) >= 1 and int(row[2]) >= 1
        except (TypeError, ValueError):
            usable = False
        if not usable:
            raise ValueError(
                f"trace row {row_number} must be [arrival_ms >= 0, prompt_tokens >= "
                f"1, output_tokens >= 1], got {row!r}"
            )
    return [[float(arrival), int(prompt), int(output)] for arrival, prompt, output in trace]


def _check_arrivals(config: dict) -> None:
    if config["trace"] is not None:
        config["trace"] = _checked_trace(config["trace"])
        return
    n_requests, rate_per_s = config["n_requests"], config["rate_per_s"]
    if not isinstance(n_requests, int) or n_requests < 1:
        raise ValueError(f"n_requests must be an int >= 1, got {n_requests!r}")
    if not (isinstance(rate_per_s, (int, float)) and rate_per_s > 0):
        raise ValueError(f"rate_per_s must be > 0, got {rate_per_s!r}")


def _decode_side(config: dict, hardware: dict) -> None:
    """The decode pool's blocks and its time per token, from the presets unless given."""
    model, gpu, tp = hardware["model"], hardware["gpu"], hardware["tp"]
    if config["decode_blocks"] is None:
        per_instance = presets.kv_blocks_per_instance(model, gpu, tp, config["block_tokens"])
        config["decode_blocks"] = config["decode_instances"] * per_instance
    if not isinstance(config["decode_blocks"], int) or config["decode_blocks"] < 1:
        raise ValueError(f"decode_blocks must be an int >= 1, got {config['decode_blocks']!r}")
    if config["decode_ms_per_token"] is None:
        config["decode_ms_per_token"] = presets.decode_ms_per_token(model, gpu, tp)
    if not config["decode_ms_per_token"] >= 0:
        raise ValueError(f"decode_ms_per_token must be >= 0, got {config['decode_ms_per_token']!r}")


def make_config(config: dict | None = None, **overrides) -> dict:
    """The full, checked configuration: DEFAULTS, then ``config``, then ``overrides``."""
    merged = dict(DEFAULTS)
    for source in (config or {}, overrides):
        unknown = set(source) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown setting(s) {sorted(unknown)}; known: {', '.join(DEFAULTS)}")
        merged.update(source)
    hardware = _hardware(merged)
    _check_policies(merged)
    faults = _checked_faults(merged)
    merged["prompt_tokens"] = _token_range("prompt_tokens", merged["prompt_tokens"])
    merged["output_tokens"] = _token_range("output_tokens", merged["output_tokens"])
    _check_arrivals(merged)
    _decode_side(merged, hardware)
    hardware["gbps"], hardware["latency_ms"] = (
        float(hardware["gbps"]),
        float(hardware["latency_ms"]),
    )
    merged.update(hardware, faults=faults)
    return merged


# ======================================================================= the engine
# The engine is a short loop over a heap of events (_Engine.run). Each event kind has one handler;
# what happens on the link lives in the link's class (_FifoLink, _FairLink), as a queueing policy
# lives in a resource class; a request's inputs are drawn up front (_Requests) and its results kept
# in one ledger (_Ledger), which also runs the handoff step. Event kinds, in the order they run at
# equal times: transfers land before decode frees blocks, before checks and timeouts, before new
# requests ask for blocks. Every event is (time in ms, kind, request id or link version).
_LINK_FREE, _SHARE_DONE, _DECODE_DONE, _CHECK, _TIMEOUT, _ABORT, _READY = range(7)


def simulate(
    config: dict | None = None, *, steps: dict | None = None, records: bool = True, **overrides
) -> dict:
    """Run one simulation. Returns {'config', 'summary', 'records'} (no records if
    ``records=False``).

    ``steps`` must hold 'stream_layers', 'handoff_step' (one argument: the handoff) and
    'ttft_percentiles', with the contracts stated at :data:`STEPS`.
    """
    checked = make_config(config, **overrides)
    chosen = _steps(steps)
    # The run allocates a few objects per request and frees none until it ends, so the cyclic
    # garbage collector would rescan the growing live set again and again: with it on, 300,000
    # requests cost about 1.5x more per request than 10,000 (measured); off, the cost is linear.
    # Nothing here needs it mid-run; it is restored on the way out.
    collecting = gc.isenabled()
    gc.disable()
    try:
        engine = _Engine(checked, chosen)
        engine.run()
        return engine.result(records)
    finally:
        if collecting:
            gc.enable()


def handoff_ready_time(
    prefill_start_ms: float, prefill_ms: float, payload_ms: float, latency_ms: float, layers: int
) -> float:
    """When a request asks for decode blocks and the link (``handoff_ready_ms``).

    Sent whole (``layers`` = 1), that is when its prefill ends. Streamed, it is the latest moment
    from which its layers can go out back to back and still land one layer's bytes after prefill
    ends: asking earlier would not land it sooner, only hold the link idle between layers. It is
    never before the first layer is computed.
    """
    first_layer_done_ms = prefill_start_ms + prefill_ms / layers
    prefill_end_ms = prefill_start_ms + prefill_ms
    last_layer_lands_ms = prefill_end_ms + payload_ms / layers
    back_to_back_start_ms = last_layer_lands_ms - latency_ms - payload_ms
    return max(first_layer_done_ms, back_to_back_start_ms)


class _Requests:
    """Every request's inputs, drawn from the seed in request order (or read from the trace), and
    its prefill: FIFO over identical workers, independent of everything downstream. Each attribute
    is a list indexed by request id."""

    def __init__(self, config: dict):
        rng = random.Random(config["seed"])
        if config["trace"] is None:
            self._poisson(config, rng)
        else:
            rows = sorted(config["trace"], key=lambda row: row[0])  # stable: ties keep their order
            self.n = len(rows)
            self.arrival_ms = [float(row[0]) for row in rows]
            self.prompt_tokens = [int(row[1]) for row in rows]
            self.output_tokens = [int(row[2]) for row in rows]
        self.faults = {
            name: self._draw_fault(config["faults"].get(name, 0.0), rng) for name in FAULTS
        }
        self.lost_metadata = self.faults["lost_metadata"]
        self.version_skew = self.faults["version_skew"]
        self.slow_link = self.faults["slow_link"]
        self.stalled_link = self.faults["stalled_link"]
        self.out_of_blocks = self.faults["out_of_blocks"]
        self._prefill(config)
        block_tokens = config["block_tokens"]
        self.blocks_needed = [
            -(-(prompt + output) // block_tokens)  # ceil((prompt + output) / block_tokens)
            for prompt, output in zip(self.prompt_tokens, self.output_tokens)
        ]

    def _draw_fault(self, rate: float, rng: random.Random) -> list[bool]:
        """Whether each request suffers a fault of this rate (no draw at all for a rate of 0)."""
        if rate <= 0:
            return [False] * self.n
        draw = rng.random
        return [draw() < rate for _ in range(self.n)]

    def _poisson(self, config: dict, rng: random.Random) -> None:
        n = self.n = config["n_requests"]
        arrivals_per_ms = config["rate_per_s"] / 1e3
        prompt_low, prompt_high = config["prompt_tokens"]
        output_low, output_high = config["output_tokens"]
        arrival_ms, prompt_tokens, output_tokens = [0.0] * n, [prompt_low] * n, [output_low] * n
        now_ms = 0.0
        gap_ms, uniform = rng.expovariate, rng.randint
        for request in range(n):
            now_ms += gap_ms(arrivals_per_ms)
            arrival_ms[request] = now_ms
            if prompt_high > prompt_low:
                prompt_tokens[request] = uniform(prompt_low, prompt_high)
            if output_high > output_low:
                output_tokens[request] = uniform(output_low, output_high)
        self.arrival_ms, self.prompt_tokens, self.output_tokens = (
            arrival_ms,
            prompt_tokens,
            output_tokens,
        )

    def _prefill(self, config: dict) -> None:
        """Each request's prefill start and length (FIFO over the workers), its payload's time on
        the link at full speed, and when it asks for blocks and the link."""
        model, gpu, tp, n = config["model"], config["gpu"], config["tp"], self.n
        self.layers = layers = model["layers"] if config["streaming"] == "layerwise" else 1
        latency_ms = config["latency_ms"]
        link_bytes_per_ms = presets.bytes_per_ms(config["gbps"])
        kv_bytes_per_token = model["kv_bytes_per_token"]
        prefill_ms_of_prompt: dict[int, float] = {}
        # a heap: the earliest free worker first
        workers_free_ms = [0.0] * config["prefill_workers"]
        prefill_start_ms, prefill_ms, payload_ms = [0.0] * n, [0.0] * n, [0.0] * n
        for request in range(n):
            prompt = self.prompt_tokens[request]
            compute_ms = prefill_ms_of_prompt.get(prompt)
            if compute_ms is None:
                compute_ms = presets.prefill_ms(
                    model, prompt, gpu, tp, config["prefill_efficiency"]
                )
                prefill_ms_of_prompt[prompt] = compute_ms
            start_ms = max(self.arrival_ms[request], workers_free_ms[0])
            heapq.heapreplace(workers_free_ms, start_ms + compute_ms)
            prefill_start_ms[request], prefill_ms[request] = start_ms, compute_ms
            # each of the tp links carries 1/tp of the KV
            payload_ms[request] = prompt * kv_bytes_per_token / tp / link_bytes_per_ms
        self.prefill_start_ms, self.prefill_ms, self.payload_ms = (
            prefill_start_ms,
            prefill_ms,
            payload_ms,
        )
        self.handoff_ready_ms = [
            handoff_ready_time(start, compute, payload, latency_ms, layers)
            for start, compute, payload in zip(prefill_start_ms, prefill_ms, payload_ms)
        ]

    def prefill_end_ms(self, request: int) -> float:
        return self.prefill_start_ms[request] + self.prefill_ms[request]


class _Ledger:
    """Each request's results, one list per record field, and the handoff step that decides them
    (Steps 3 and 4)."""

    FIELDS = (
        "handoff_ready_ms",
        "blocks_ms",
        "transfer_start_ms",
        "transfer_end_ms",
        "transfer_ms",
        "exposed_ms",
        "decision",
        "outcome",
        "decode_start_ms",
        "first_token_ms",
        "done_ms",
    )

    def __init__(self, config: dict, requests: _Requests, events: list, handoff_step):
        self.requests, self.events, self.handoff_step = requests, events, handoff_step
        self.decode_ms_per_token = config["decode_ms_per_token"]
        self.deadline_after_ms = config["deadline_ms"]
        self.failure_policy, self.version = config["failure_policy"], config["version"]
        for name in self.FIELDS:
            setattr(self, name, [None] * requests.n)

    def reject(self, request: int, now_ms: float) -> None:
        self.decision[request] = "rejected"
        self.outcome[request] = "rejected"
        self.done_ms[request] = now_ms

    def finish(self, request: int, answer: dict) -> None:
        """Record the gate's action; schedule the decode (or the blocks' return on failure)."""
        self.decision[request] = answer["decision"]
        self.outcome[request] = answer["outcome"]
        decode_start_ms = answer["decode_start_ms"]
        if decode_start_ms is None:
            self.done_ms[request] = answer["act_ms"]
            heapq.heappush(self.events, (answer["act_ms"], _DECODE_DONE, request))
            return
        per_token_ms = self.decode_ms_per_token
        self.decode_start_ms[request] = decode_start_ms
        self.first_token_ms[request] = decode_start_ms + per_token_ms
        done_ms = decode_start_ms + self.requests.output_tokens[request] * per_token_ms
        self.done_ms[request] = done_ms
        heapq.heappush(self.events, (done_ms, _DECODE_DONE, request))

    def deadline_of(self, request: int) -> float:
        """Decode gives a handoff deadline_ms from the later of prefill end and its block grant."""
        waited_from_ms = max(self.blocks_ms[request], self.requests.prefill_end_ms(request))
        return waited_from_ms + self.deadline_after_ms

    def handoff_input(self, request: int, now_ms: float, landed: bool, ready_at_ms: float) -> dict:
        """What the handoff step is given: the state as decode sees it at ``now_ms``."""
        requests, version = self.requests, self.version
        lost = requests.lost_metadata[request]
        never_lands = lost or requests.stalled_link[request]
        return {
            "state": {
                "payload_ready": landed,
                "metadata_ready": landed and not lost,
                "ownership_ready": landed,
                "request_id": request,
                "version": "skewed-" + version if requests.version_skew[request] else version,
            },
            "request_id": request,
            "version": version,
            "now_ms": now_ms,
            "ready_at_ms": None if never_lands else ready_at_ms,
            "deadline_ms": self.deadline_of(request),
            "policy": self.failure_policy,
            "recompute_ms": requests.prefill_ms[request],
        }

    def gate(self, request: int, now_ms: float, landed: bool, ready_at_ms: float) -> dict:
        """The handoff step for a request, its answer checked (a replaced step may be wrong)."""
        answer = self.handoff_step(self.handoff_input(request, now_ms, landed, ready_at_ms))
        try:
            decode_start_ms = answer["decode_start_ms"]
            usable = (
                answer["decision"] in DECISIONS[:4]
                and answer["outcome"] in OUTCOMES[:3]
                and (decode_start_ms is None) == (answer["outcome"] == "failed")
                and answer["act_ms"] >= now_ms - 1e-9
                and (decode_start_ms is None or decode_start_ms >= answer["act_ms"] - 1e-9)
            )
        except (TypeError, KeyError):
            usable = False
        if not usable:
            raise ValueError(
                f"handoff_step returned {answer!r} for request {request} at {now_ms} ms: "
                "expected a "
                f"decision in {DECISIONS[:4]}, an outcome in {OUTCOMES[:3]}, act_ms >= "
                "now_ms, and a "
                "decode_start_ms >= act_ms (None exactly when the outcome is 'failed')"
            )
        return answer


class _Link:
    """What the two link policies share: the transfer's inputs and the link's busy time.
    A policy answers ``admit`` (a request got its blocks), ``check`` (decode looks at the state),
    ``timeout`` (a wait reached its deadline), ``abort`` (a give-up time came) and ``tick``
    (its own scheduled event: the link fell free, or a fair share finished)."""

    def __init__(
        self, config: dict, requests: _Requests, ledger: _Ledger, events: list, stream_layers
    ):
        self.requests, self.ledger, self.events = requests, ledger, events
        self.stream_layers = stream_layers
        self.latency_ms, self.slow_factor = config["latency_ms"], config["slow_factor"]
        self.layers = requests.layers
        self.waiting = [False] * requests.n  # decode said 'wait' before the bytes landed
        self.busy_ms = 0.0
        self.first_grant_ms, self.last_release_ms = INF, 0.0

    def payload_ms(self, request: int) -> float:
        """The payload's time on the link at full speed, slowed by a slow_link fault."""
        slowdown = self.slow_factor if self.requests.slow_link[request] else 1.0
        return self.requests.payload_ms[request] * slowdown

    def stream(self, request: int, grant_ms: float, payload_ms: float) -> dict:
        """stream_layers' answer for a request granted the link at ``grant_ms``."""
        requests = self.requests
        prefill_start_ms, prefill_ms = (
            requests.prefill_start_ms[request],
            requests.prefill_ms[request],
        )
        return self.stream_layers(
            grant_ms, prefill_start_ms, prefill_ms, self.layers, payload_ms, self.latency_ms
        )

    def nominal(self, request: int, grant_ms: float) -> dict:
        """stream_layers' answer for a request granted the link at ``grant_ms``, at full speed."""
        return self.stream(request, grant_ms, self.requests.payload_ms[request])

    def last_layer_ready_ms(self, request: int, payload_ms: float) -> float:
        """The earliest its last layer can land: one layer's bytes after prefill ends."""
        return self.requests.prefill_end_ms(request) + payload_ms / self.layers

    def wait_ok(self, request: int, landed_ms: float) -> None:
        """Decode was waiting and the bytes landed in time: it starts then."""
        self.waiting[request] = False
        self.close(request, landed_ms)
        answer = {
            "decision": "wait",
            "outcome": "ok",
            "act_ms": landed_ms,
            "decode_start_ms": landed_ms,
        }
        self.ledger.finish(request, answer)

    def record_transfer(self, request: int, end_ms: float, transfer_ms: float) -> None:
        ledger = self.ledger
        ledger.transfer_end_ms[request] = end_ms
        ledger.transfer_ms[request] = transfer_ms
        self.last_release_ms = max(self.last_release_ms, end_ms)

    def exposed_after_prefill(self, request: int, end_ms: float) -> float:
        """The link time past the later of the transfer's start and the request's prefill end."""
        start_ms = self.ledger.transfer_start_ms[request]
        return max(0.0, end_ms - max(start_ms, self.requests.prefill_end_ms(request)))


class _FifoLink(_Link):
    """One transfer at a time, in the order requests reach the link. A request joins the queue when
    it has its blocks; decode checks it when it would have landed had the link been free then.
    Once granted, its transfer is known exactly."""

    def __init__(self, config, requests, ledger, events, stream_layers):
        super().__init__(config, requests, ledger, events, stream_layers)
        n = requests.n
        self.current = -1  # the request on the link (-1: none)
        self.current_start_ms = 0.0
        self.release_ms = INF  # when the current transfer frees the link
        self.version = 0  # bumped when the release moves: older _LINK_FREE events are stale
        self.queued_in_ms = self.queued_out_ms = 0.0  # link time that joined / left the queue
        self.queue: deque = deque()
        self.granted = [False] * n
        self.cancelled = [False] * n  # gave up while still queued: never sent
        self.give_up_ms = [None] * n  # a decided give-up time still ahead (the link is cut then)
        self.land_ms = [INF] * n  # when the last byte lands (INF: never, a stalled link)
        self.actual = [None] * n  # stream_layers' answer for the transfer as it ran
        # nominal link time queued ahead of a request when it joined
        self.queued_ahead_ms = [0.0] * n
        # link time at full speed (a stream never pauses)
        self.work_ms = [self.latency_ms + payload for payload in requests.payload_ms]

    def _release_at(self, now_ms: float) -> None:
        """Schedule (or move) the current transfer's end."""
        self.version += 1
        self.release_ms = now_ms
        if now_ms < INF:
            heapq.heappush(self.events, (now_ms, _LINK_FREE, self.version))

    def close(self, request: int, end_ms: float) -> None:
        full_ms = self.latency_ms + self.payload_ms(request)
        if end_ms == self.land_ms[request]:
            self.record_transfer(request, end_ms, full_ms)
            self.ledger.exposed_ms[request] = self.actual[request]["exposed_ms"]
        else:  # cut short: what it sent before the request gave up
            start_ms = self.ledger.transfer_start_ms[request]
            self.record_transfer(request, end_ms, min(full_ms, end_ms - start_ms))
            self.ledger.exposed_ms[request] = self.exposed_after_prefill(request, end_ms)

    def _cut(self, request: int, now_ms: float) -> None:
        """The request gives up at ``now_ms``: drop it from the queue, or end its transfer there."""
        if not self.granted[request]:
            self.cancelled[request] = True
            return
        if self.current == request and now_ms < self.release_ms:
            self._release_at(now_ms)
        self.close(request, min(self.land_ms[request], now_ms))

    def _grant(self, request: int, grant_ms: float) -> None:
        ledger = self.ledger
        self.granted[request] = True
        self.current, self.current_start_ms = request, grant_ms
        actual = self.stream(request, grant_ms, self.payload_ms(request))
        self.actual[request] = actual
        land_ms = INF if self.requests.stalled_link[request] else actual["end_ms"]
        self.land_ms[request] = land_ms
        ledger.transfer_start_ms[request] = actual["start_ms"]
        self.first_grant_ms = min(self.first_grant_ms, actual["start_ms"])
        give_up_ms = self.give_up_ms[request]
        if give_up_ms is not None:  # decided already; sends until then at most
            self._release_at(min(land_ms, give_up_ms))
            self.close(request, self.release_ms)
        elif self.waiting[request] and land_ms <= ledger.deadline_of(request):
            self._release_at(land_ms)  # decode is waiting, and it lands in time
            self.wait_ok(request, land_ms)
        else:  # its check is still ahead, or decode times out at the deadline
            self._release_at(land_ms)

    def tick(self, version: int, now_ms: float) -> None:
        """The link is free at ``now_ms`` (unless the transfer's end moved since): grant the next
        request that still wants it."""
        if version != self.version:
            return
        self.busy_ms += now_ms - self.current_start_ms
        self.current = -1
        while self.queue:
            request = self.queue.popleft()
            self.queued_out_ms += self.work_ms[request]
            give_up_ms = self.give_up_ms[request]
            if give_up_ms is not None and give_up_ms <= now_ms:
                self.cancelled[request] = True
            if not self.cancelled[request]:
                self._grant(request, now_ms)
                return

    def admit(self, request: int, now_ms: float) -> None:
        heapq.heappush(self.events, (self.nominal(request, now_ms)["end_ms"], _CHECK, request))
        if self.current < 0 and not self.queue:
            self._grant(request, now_ms)
        else:
            self.queued_ahead_ms[request] = self.queued_in_ms
            self.queued_in_ms += self.work_ms[request]
            self.queue.append(request)

    def _estimate(self, request: int, now_ms: float) -> float:
        """When a queued request would land: the link's current transfer, then the nominal work
        queued ahead of it."""
        free_ms = now_ms if self.current < 0 else self.release_ms
        if free_ms == INF:  # a stalled transfer: cut at its deadline at the latest
            free_ms = max(now_ms, self.ledger.deadline_of(self.current))
        # the link time queued ahead of it that has not left the queue yet
        grant_ms = max(now_ms, free_ms + self.queued_ahead_ms[request] - self.queued_out_ms)
        return self.nominal(request, grant_ms)["end_ms"]

    def check(self, request: int, now_ms: float) -> None:
        ledger, granted = self.ledger, self.granted[request]
        # exact once granted
        ready_at_ms = self.land_ms[request] if granted else self._estimate(request, now_ms)
        landed = granted and self.land_ms[request] <= now_ms
        answer = ledger.gate(request, now_ms, landed, ready_at_ms)
        if answer["outcome"] == "ok":
            if granted:  # it lands by then (ready) or by the deadline (wait)
                self.close(request, self.land_ms[request])
                ledger.finish(request, answer)
            else:
                self.waiting[request] = True
                heapq.heappush(self.events, (ledger.deadline_of(request), _TIMEOUT, request))
            return
        act_ms = answer["act_ms"]
        if act_ms <= now_ms or granted:
            self._cut(request, act_ms)
        else:
            self.give_up_ms[request] = act_ms
            heapq.heappush(self.events, (act_ms, _ABORT, request))
        ledger.finish(request, answer)

    def timeout(self, request: int, now_ms: float) -> None:
        if not self.waiting[request]:
            return
        self.waiting[request] = False
        self._cut(request, now_ms)
        # still missing at the deadline
        self.ledger.finish(request, self.ledger.gate(request, now_ms, False, INF))

    def abort(self, request: int, now_ms: float) -> None:
        if not self.granted[request]:
            self.cancelled[request] = True


class _FairLink(_Link):
    """Every active transfer gets an equal share: processor sharing by virtual time (ms of
    full-speed service each flow has had since the run began)."""

    def __init__(self, config, requests, ledger, events, stream_layers):
        super().__init__(config, requests, ledger, events, stream_layers)
        n = requests.n
        self.virtual_ms = 0.0  # full-speed service each active flow has had
        self.now_ms = 0.0  # the time virtual_ms was brought up to
        self.flows = 0  # active transfers
        self.version = 0  # bumped at each reschedule: older _SHARE_DONE events are stale
        self.finish_tags: list = []  # a heap of (virtual finish time, request)
        self.in_flow = [False] * n
        self.finish_tag = [0.0] * n
        self.flow_payload_ms = [0.0] * n  # the payload at full speed, slowed by a slow_link fault
        self.land_ms = [None] * n  # when a fair-shared transfer's last byte lands

    def _advance(self, now_ms: float) -> None:
        if self.flows:
            self.virtual_ms += (now_ms - self.now_ms) / self.flows
            self.busy_ms += now_ms - self.now_ms
        self.now_ms = now_ms

    def _reschedule(self) -> None:
        """Schedule the next flow's completion (stale tags, of flows gone, are dropped first)."""
        tags, in_flow = self.finish_tags, self.in_flow
        while tags and not in_flow[tags[0][1]]:
            heapq.heappop(tags)
        self.version += 1
        if tags and tags[0][0] < INF:
            next_done_ms = self.now_ms + (tags[0][0] - self.virtual_ms) * self.flows
            heapq.heappush(self.events, (next_done_ms, _SHARE_DONE, self.version))

    def _complete_due(self) -> None:
        tags, in_flow = self.finish_tags, self.in_flow
        tolerance = 1e-9 * max(1.0, abs(self.virtual_ms))
        while tags and (not in_flow[tags[0][1]] or tags[0][0] <= self.virtual_ms + tolerance):
            _, request = heapq.heappop(tags)
            if not in_flow[request]:
                continue
            in_flow[request] = False
            self.flows -= 1
            # the second term never binds (a stream starts late enough that each layer is ready
            # before its turn); it keeps the physical bound explicit
            ready_ms = self.last_layer_ready_ms(request, self.flow_payload_ms[request])
            land_ms = max(self.now_ms + self.latency_ms, ready_ms)
            self.land_ms[request] = land_ms
            if self.waiting[request] and land_ms <= self.ledger.deadline_of(request):
                self.wait_ok(request, land_ms)

    def _settle(self, now_ms: float) -> None:
        """Bring the shares up to now: finish the transfers due, schedule the next completion."""
        self._advance(now_ms)
        self._complete_due()
        self._reschedule()

    def _remove(self, request: int, now_ms: float) -> None:
        self._advance(now_ms)
        self.in_flow[request] = False
        self.flows -= 1
        self._reschedule()

    def close(self, request: int, end_ms: float) -> None:
        full_ms = self.latency_ms + self.flow_payload_ms[request]
        if end_ms == self.land_ms[request]:
            transfer_ms = full_ms
        else:
            transfer_ms = min(full_ms, end_ms - self.ledger.transfer_start_ms[request])
        self.record_transfer(request, end_ms, transfer_ms)
        self.ledger.exposed_ms[request] = self.exposed_after_prefill(request, end_ms)

    def admit(self, request: int, grant_ms: float) -> None:
        self._advance(grant_ms)
        payload_ms = self.flow_payload_ms[request] = self.payload_ms(request)
        size_ms = INF if self.requests.stalled_link[request] else payload_ms
        self.finish_tag[request] = self.virtual_ms + size_ms
        heapq.heappush(self.finish_tags, (self.finish_tag[request], request))
        self.in_flow[request] = True
        self.flows += 1
        self._reschedule()
        nominal = self.nominal(request, grant_ms)
        self.ledger.transfer_start_ms[request] = nominal["start_ms"]
        self.first_grant_ms = min(self.first_grant_ms, nominal["start_ms"])
        heapq.heappush(self.events, (nominal["end_ms"], _CHECK, request))

    def tick(self, version: int, now_ms: float) -> None:
        if version == self.version:
            self._settle(now_ms)

    def _estimate(self, request: int, now_ms: float) -> float:
        """When a flow still sending would land: its remaining bytes at today's share."""
        if self.requests.stalled_link[request]:
            return INF
        remaining_ms = (self.finish_tag[request] - self.virtual_ms) * self.flows
        ready_ms = self.last_layer_ready_ms(request, self.flow_payload_ms[request])
        return max(now_ms + remaining_ms + self.latency_ms, ready_ms)

    def check(self, request: int, now_ms: float) -> None:
        ledger = self.ledger
        self._settle(now_ms)
        land_ms = self.land_ms[request]
        ready_at_ms = land_ms if land_ms is not None else self._estimate(request, now_ms)
        landed = land_ms is not None and land_ms <= now_ms
        answer = ledger.gate(request, now_ms, landed, ready_at_ms)
        if answer["outcome"] == "ok":
            if land_ms is not None:
                self.close(request, land_ms)
                start_ms = max(now_ms, land_ms)
                ledger.finish(request, {**answer, "act_ms": start_ms, "decode_start_ms": start_ms})
            else:  # wait for the bytes, or for the deadline
                self.waiting[request] = True
                heapq.heappush(self.events, (ledger.deadline_of(request), _TIMEOUT, request))
            return
        act_ms = answer["act_ms"]
        if self.in_flow[request]:
            if act_ms <= now_ms:
                self._remove(request, now_ms)
            else:
                heapq.heappush(self.events, (act_ms, _ABORT, request))
        self.close(request, min(land_ms if land_ms is not None else INF, act_ms))
        ledger.finish(request, answer)

    def timeout(self, request: int, now_ms: float) -> None:
        if not self.waiting[request]:
            return
        self.waiting[request] = False
        if self.in_flow[request]:
            self._remove(request, now_ms)
        self.close(request, now_ms)
        # still missing at the deadline
        self.ledger.finish(request, self.ledger.gate(request, now_ms, False, INF))

    def abort(self, request: int, now_ms: float) -> None:
        if self.in_flow[request]:
            self._remove(request, now_ms)


class _Blocks:
    """The decode pool's KV blocks: a request holds ceil((prompt + output) / block_tokens) of them
    from its grant to its last token (or its failure); when they are short it waits in a FIFO queue
    or is rejected (block_policy)."""

    def __init__(self, config: dict, requests: _Requests, ledger: _Ledger, link: _Link):
        self.requests, self.ledger, self.link = requests, ledger, link
        self.capacity = self.free = config["decode_blocks"]
        self.reject_on_full = config["block_policy"] == "reject"
        self.holders = 0  # requests holding blocks
        self.queue: deque = deque()

    def ready(self, request: int, now_ms: float) -> None:
        """The request asks for blocks (and then the link) at ``now_ms``."""
        needed = self.requests.blocks_needed[request]
        self.ledger.handoff_ready_ms[request] = now_ms
        if needed > self.capacity:
            self.ledger.reject(request, now_ms)
            return
        short = self.requests.out_of_blocks[request] or self.queue or self.free < needed
        if not short:
            self._admit(request, now_ms)
        elif self.reject_on_full:
            self.ledger.reject(request, now_ms)
        else:
            self.queue.append(request)
            if self.holders == 0:  # nothing will free blocks: the decoder's shortage clears now
                self._drain(now_ms)

    def done(self, request: int, now_ms: float) -> None:
        """The request's decode ended (or its handoff failed): its blocks return."""
        self.free += self.requests.blocks_needed[request]
        self.holders -= 1
        self._drain(now_ms)

    def _admit(self, request: int, now_ms: float) -> None:
        self.free -= self.requests.blocks_needed[request]
        self.holders += 1
        self.ledger.blocks_ms[request] = now_ms
        self.link.admit(request, now_ms)

    def _drain(self, now_ms: float) -> None:
        queue, needed = self.queue, self.requests.blocks_needed
        while queue and self.free >= needed[queue[0]]:
            self._admit(queue.popleft(), now_ms)


class _Engine:
    """One simulation: the requests, their ledger, the link, the decode blocks, and the loop."""

    def __init__(self, config: dict, steps: dict):
        self.config, self.steps = config, steps
        self.events: list = []
        self.requests = _Requests(config)
        self.ledger = _Ledger(config, self.requests, self.events, steps["handoff_step"])
        policy = _FairLink if config["link_sharing"] == "fair" else _FifoLink
        self.link = policy(config, self.requests, self.ledger, self.events, steps["stream_layers"])
        self.blocks = _Blocks(config, self.requests, self.ledger, self.link)
        handlers = {
            _LINK_FREE: self.link.tick,
            _SHARE_DONE: self.link.tick,
            _DECODE_DONE: self.blocks.done,
            _CHECK: self.link.check,
            _TIMEOUT: self.link.timeout,
            _ABORT: self.link.abort,
            _READY: self.blocks.ready,
        }
        self.handlers = [handlers[kind] for kind in range(len(handlers))]

    def run(self) -> None:
        """Pop events in time order and hand each to its handler. Prefill starts are in request
        order and a request never asks before its prefill starts, so READY events enter the heap
        lazily, just before anything later is popped: the heap holds only the requests in flight,
        not all n."""
        events, handlers = self.events, self.handlers
        n, prefill_start_ms = self.requests.n, self.requests.prefill_start_ms
        handoff_ready_ms = self.requests.handoff_ready_ms
        next_request = 0
        while True:
            horizon_ms = events[0][0] if events else INF
            while next_request < n and prefill_start_ms[next_request] <= horizon_ms:
                ready_ms = handoff_ready_ms[next_request]
                heapq.heappush(events, (ready_ms, _READY, next_request))
                horizon_ms = min(horizon_ms, ready_ms)
                next_request += 1
            if not events:
                break
            now_ms, kind, subject = heapq.heappop(events)
            handlers[kind](subject, now_ms)

    def result(self, records: bool) -> dict:
        config, requests, ledger, n = self.config, self.requests, self.ledger, self.requests.n
        arrival_ms = requests.arrival_ms
        first_token_ms, start_ms, end_ms = (
            ledger.first_token_ms,
            ledger.transfer_start_ms,
            ledger.transfer_end_ms,
        )
        columns = {
            "id": list(range(n)),
            "arrival_ms": arrival_ms,
            "prompt_tokens": requests.prompt_tokens,
            "output_tokens": requests.output_tokens,
            "prefill_start_ms": requests.prefill_start_ms,
            "prefill_end_ms": [requests.prefill_end_ms(request) for request in range(n)],
            "handoff_ready_ms": ledger.handoff_ready_ms,
            "blocks_ms": ledger.blocks_ms,
            "transfer_start_ms": start_ms,
            "transfer_end_ms": end_ms,
            "link_held_ms": [
                None if end is None else end - start for start, end in zip(start_ms, end_ms)
            ],
            "transfer_ms": ledger.transfer_ms,
            "exposed_ms": ledger.exposed_ms,
            "decision": ledger.decision,
            "outcome": ledger.outcome,
            "decode_start_ms": ledger.decode_start_ms,
            "first_token_ms": first_token_ms,
            "ttft_ms": [
                None if token is None else token - arrival
                for token, arrival in zip(first_token_ms, arrival_ms)
            ],
            "done_ms": ledger.done_ms,
            "faults": [
                [name for name in FAULTS if requests.faults[name][request]] for request in range(n)
            ],
        }
        link = self.link
        span = (link.busy_ms, link.first_grant_ms, link.last_release_ms)
        summary = _summarize(
            columns, self.steps["ttft_percentiles"], span, config["prefill_workers"]
        )
        config_out = {key: value for key, value in config.items() if key != "trace"}
        config_out["trace_rows"] = None if config["trace"] is None else len(config["trace"])
        result = {"config": config_out, "summary": summary}
        if records:
            names = list(columns)
            result["records"] = [dict(zip(names, row)) for row in zip(*columns.values())]
        return result


def _counts(values: list, keys: tuple) -> dict:
    counts = dict.fromkeys(keys, 0)
    for value in values:
        counts[value] += 1
    return counts


def _summarize(columns: dict, percentiles, link_span: tuple, prefill_workers: int) -> dict:
    busy_ms, first_grant_ms, last_release_ms = link_span
    n = len(columns["id"])
    ttft_rows = [{"ttft_ms": value} for value in columns["ttft_ms"] if value is not None]
    if ttft_rows:
        ttft = dict(zip(("p50_ms", "p95_ms", "p99_ms"), percentiles(ttft_rows, list(DEFAULT_QS))))
    else:
        ttft = {"p50_ms": None, "p95_ms": None, "p99_ms": None}
    sent = [request for request in range(n) if columns["transfer_ms"][request] is not None]
    total_transfer_ms = sum(columns["transfer_ms"][request] for request in sent)
    total_exposed_ms = sum(columns["exposed_ms"][request] for request in sent)
    span_ms = last_release_ms - first_grant_ms if sent else 0.0
    # the prefill pool's busy share from the first arrival to the last prefill's end: near 1,
    # prefill (not the link) decides the TTFT, and requests queue for a prefill worker
    starts, ends = columns["prefill_start_ms"], columns["prefill_end_ms"]
    prefill_busy_ms = sum(ends[request] - starts[request] for request in range(n))
    prefill_span_ms = max(ends, default=0.0) - columns["arrival_ms"][0] if n else 0.0
    prefill_capacity_ms = prefill_workers * prefill_span_ms
    return {
        "requests": n,
        "outcomes": _counts(columns["outcome"], OUTCOMES),
        "decisions": _counts(columns["decision"], DECISIONS),
        "ttft": ttft,
        "transfers": len(sent),
        "transfer_ms_total": total_transfer_ms,
        "exposed_ms_total": total_exposed_ms,
        "exposed_fraction": total_exposed_ms / total_transfer_ms if total_transfer_ms else 0.0,
        "transfer_ms_mean": total_transfer_ms / len(sent) if sent else None,
        "exposed_ms_mean": total_exposed_ms / len(sent) if sent else None,
        # the time the link carried at least one transfer, and its fraction of [first start, last
        # end]
        "link_busy_ms": busy_ms,
        "link_utilization": busy_ms / span_ms if span_ms > 0 else 0.0,
        "prefill_utilization": prefill_busy_ms / prefill_capacity_ms
        if prefill_span_ms > 0
        else 0.0,
        "makespan_ms": max(value for value in columns["done_ms"] if value is not None)
        - columns["arrival_ms"][0],
    }
