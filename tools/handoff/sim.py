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
  stream is computed in closed form (the ``stream_layers`` step), one event per request, never one per
  layer. Exposed transfer time is Step 2's: the link time not covered by the request's own
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
  ``failure_policy``: ``'recompute'`` reruns prefill on the decoder (vLLM's
  ``kv_load_failure_policy='recompute'``), ``'fail'`` ends the request (vLLM's default). An
  abandoned transfer frees the link when the request gives up.
* **Decode**: ``decode_ms_per_token`` per output token (continuous batching: requests decode side
  by side, bounded by blocks only). The first token comes one decode step after decode starts;
  TTFT = first token - arrival.

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
            "steps={'stream_layers': ..., 'handoff_step': ..., 'ttft_percentiles': ...}: in notebook 06 your own "
            "(TODO 6-8, with handoff_step calling your validate_handoff_state and plan_decode_start from "
            "notebooks 03 and 04)"
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
            raise ValueError(f"{path}: the header must name {sorted(need)}, got {reader.fieldnames}")
        for line, row in enumerate(reader, start=2):
            try:
                rows.append([float(row["arrival_ms"]), int(row["prompt_tokens"]), int(row["output_tokens"])])
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{path}, line {line}: {exc}") from None
    return rows


def _check_range(name, value):
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an int or [low, high], got {value!r}")
    if isinstance(value, int):
        value = [value, value]
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValueError(f"{name} must be an int or [low, high] of ints, got {value!r}")
    if not 1 <= value[0] <= value[1]:
        raise ValueError(f"{name} needs 1 <= low <= high, got {value!r}")
    return [value[0], value[1]]


def make_config(config: dict | None = None, **overrides) -> dict:
    """The full, checked configuration: DEFAULTS, then ``config``, then ``overrides``."""
    merged = dict(DEFAULTS)
    for source in (config or {}, overrides):
        unknown = set(source) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown setting(s) {sorted(unknown)}; known: {', '.join(DEFAULTS)}")
        merged.update(source)
    c = merged
    model = presets.model_preset(c["model"]) if isinstance(c["model"], str) else dict(c["model"])
    for key in ("layers", "kv_bytes_per_token", "tp", "params", "dtype_bytes", "linear_flops_per_token", "attn_width"):
        if key not in model:
            raise ValueError(f"a model dict needs {key!r} (see tools.presets.MODEL_PRESETS)")
    model.setdefault("name", "custom model")
    gpu = presets.gpu_preset(c["gpu"]) if isinstance(c["gpu"], str) else dict(c["gpu"])
    link = presets.link_preset(c["link"]) if isinstance(c["link"], str) else dict(c["link"])
    tp = model["tp"] if c["tp"] is None else c["tp"]
    if not isinstance(tp, int) or tp < 1:
        raise ValueError(f"tp must be an int >= 1, got {tp!r}")
    gbps = link["gbps"] if c["gbps"] is None else c["gbps"]
    latency = link["latency_ms"] if c["latency_ms"] is None else c["latency_ms"]
    if not (isinstance(gbps, (int, float)) and gbps > 0):
        raise ValueError(f"gbps must be > 0, got {gbps!r}")
    if not (isinstance(latency, (int, float)) and latency >= 0):
        raise ValueError(f"latency_ms must be >= 0, got {latency!r}")
    for key, allowed in (
        ("link_sharing", ("fifo", "fair")),
        ("streaming", ("whole", "layerwise")),
        ("block_policy", ("wait", "reject")),
        ("failure_policy", ("recompute", "fail")),
    ):
        if c[key] not in allowed:
            raise ValueError(f"{key} must be one of {allowed}, got {c[key]!r}")
    for key in ("prefill_workers", "decode_instances", "block_tokens"):
        if not isinstance(c[key], int) or isinstance(c[key], bool) or c[key] < 1:
            raise ValueError(f"{key} must be an int >= 1, got {c[key]!r}")
    if not 0 < c["prefill_efficiency"] <= 1:
        raise ValueError(f"prefill_efficiency must lie in (0, 1], got {c['prefill_efficiency']!r}")
    if not (isinstance(c["deadline_ms"], (int, float)) and c["deadline_ms"] >= 0):
        raise ValueError(f"deadline_ms must be >= 0, got {c['deadline_ms']!r}")
    if not isinstance(c["version"], str):
        raise ValueError(f"version must be a string, got {c['version']!r}")
    if not c["slow_factor"] >= 1:
        raise ValueError(f"slow_factor must be >= 1, got {c['slow_factor']!r}")
    faults = dict(c["faults"] or {})
    for name, rate in faults.items():
        if name not in FAULTS:
            raise ValueError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}")
        if not (isinstance(rate, (int, float)) and 0 <= rate <= 1):
            raise ValueError(f"fault rate for {name} must lie in [0, 1], got {rate!r}")
    c["prompt_tokens"] = _check_range("prompt_tokens", c["prompt_tokens"])
    c["output_tokens"] = _check_range("output_tokens", c["output_tokens"])
    if c["trace"] is None:
        if not isinstance(c["n_requests"], int) or c["n_requests"] < 1:
            raise ValueError(f"n_requests must be an int >= 1, got {c['n_requests']!r}")
        if not (isinstance(c["rate_per_s"], (int, float)) and c["rate_per_s"] > 0):
            raise ValueError(f"rate_per_s must be > 0, got {c['rate_per_s']!r}")
    else:
        if not c["trace"]:
            raise ValueError("the trace is empty")
        for i, row in enumerate(c["trace"]):
            try:
                bad = len(row) != 3 or not float(row[0]) >= 0 or int(row[1]) < 1 or int(row[2]) < 1
            except (TypeError, ValueError):
                bad = True
            if bad:
                raise ValueError(f"trace row {i} must be [arrival_ms >= 0, prompt_tokens >= 1, output_tokens >= 1], got {row!r}")
        c["trace"] = [[float(a), int(p), int(o)] for a, p, o in c["trace"]]
    if c["decode_blocks"] is None:
        c["decode_blocks"] = c["decode_instances"] * presets.kv_blocks_per_instance(model, gpu, tp, c["block_tokens"])
    if not isinstance(c["decode_blocks"], int) or c["decode_blocks"] < 1:
        raise ValueError(f"decode_blocks must be an int >= 1, got {c['decode_blocks']!r}")
    if c["decode_ms_per_token"] is None:
        c["decode_ms_per_token"] = presets.decode_ms_per_token(model, gpu, tp)
    if not c["decode_ms_per_token"] >= 0:
        raise ValueError(f"decode_ms_per_token must be >= 0, got {c['decode_ms_per_token']!r}")
    c.update(model=model, gpu=gpu, link=link, tp=tp, gbps=float(gbps), latency_ms=float(latency), faults=faults)
    return c


# ======================================================================= the engine
# The engine is a short loop over a heap of events (_Engine.run). Each event kind has one handler;
# what happens on the link lives in the link's class (_FifoLink, _FairLink), as a queueing policy
# lives in a resource class; a request's inputs are drawn up front (_Requests) and its results kept
# in one ledger (_Ledger), which also runs the handoff step. Event kinds, in the order they run at
# equal times: transfers land before decode frees blocks, before checks and timeouts, before new
# requests ask for blocks.
_LINK_FREE, _PS, _DECODE_DONE, _CHECK, _TIMEOUT, _ABORT, _READY = range(7)


def simulate(config: dict | None = None, *, steps: dict | None = None, records: bool = True, **overrides) -> dict:
    """Run one simulation. Returns {'config', 'summary', 'records'} (records omitted if ``records=False``).

    ``steps`` must hold 'stream_layers', 'handoff_step' (one argument: the handoff) and
    'ttft_percentiles', with the contracts stated at :data:`STEPS`.
    """
    c = make_config(config, **overrides)
    chosen = _steps(steps)
    # The run allocates a few objects per request and frees none until it ends, so the cyclic
    # garbage collector would rescan the growing live set again and again: with it on, 300,000
    # requests cost about 1.5x more per request than 10,000 (measured); off, the cost is linear.
    # Nothing here needs it mid-run; it is restored on the way out.
    collecting = gc.isenabled()
    gc.disable()
    try:
        engine = _Engine(c, chosen)
        engine.run()
        return engine.result(records)
    finally:
        if collecting:
            gc.enable()


class _Requests:
    """Every request's inputs, drawn from the seed in request order (or read from the trace), and
    its prefill: FIFO over identical workers, independent of everything downstream."""

    def __init__(self, c: dict):
        rng = random.Random(c["seed"])
        if c["trace"] is None:
            self._poisson(c, rng)
        else:
            rows = sorted(c["trace"], key=lambda r: r[0])  # stable: equal arrivals keep their order
            self.n = len(rows)
            self.arrival = [float(r[0]) for r in rows]
            self.prompt = [int(r[1]) for r in rows]
            self.output = [int(r[2]) for r in rows]
        n = self.n
        self.fault = {name: [False] * n for name in FAULTS}
        for name in FAULTS:
            rate = c["faults"].get(name, 0.0)
            if rate > 0:
                flags, draw = self.fault[name], rng.random
                for i in range(n):
                    flags[i] = draw() < rate
        self.lost, self.skew, self.slow, self.stall, self.oob = (self.fault[name] for name in FAULTS)
        self._prefill(c)
        self.need = [-(-(self.prompt[i] + self.output[i]) // c["block_tokens"]) for i in range(n)]

    def _poisson(self, c: dict, rng: random.Random) -> None:
        n = self.n = c["n_requests"]
        per_ms = c["rate_per_s"] / 1e3
        (p_lo, p_hi), (o_lo, o_hi) = c["prompt_tokens"], c["output_tokens"]
        arrival, prompt, output = [0.0] * n, [p_lo] * n, [o_lo] * n
        t = 0.0
        expo, randint = rng.expovariate, rng.randint
        for i in range(n):
            t += expo(per_ms)
            arrival[i] = t
            if p_hi > p_lo:
                prompt[i] = randint(p_lo, p_hi)
            if o_hi > o_lo:
                output[i] = randint(o_lo, o_hi)
        self.arrival, self.prompt, self.output = arrival, prompt, output

    def _prefill(self, c: dict) -> None:
        model, gpu, tp, n = c["model"], c["gpu"], c["tp"], self.n
        self.layers = layers = model["layers"] if c["streaming"] == "layerwise" else 1
        workers = [0.0] * c["prefill_workers"]
        pf_ms_of: dict[int, float] = {}
        bpm = presets.bytes_per_ms(c["gbps"])
        kv_tok = model["kv_bytes_per_token"]
        pf_start, pf_ms, pay_ms = [0.0] * n, [0.0] * n, [0.0] * n
        latency = c["latency_ms"]
        arrival, prompt, heapreplace = self.arrival, self.prompt, heapq.heapreplace
        for i in range(n):
            p = prompt[i]
            d = pf_ms_of.get(p)
            if d is None:
                d = pf_ms_of[p] = presets.prefill_ms(model, p, gpu, tp, c["prefill_efficiency"])
            s = max(arrival[i], workers[0])
            heapreplace(workers, s + d)
            pf_start[i], pf_ms[i] = s, d
            pay_ms[i] = p * kv_tok / tp / bpm  # each of the tp links carries 1/tp of the KV
        self.pf_start, self.pf_ms, self.pay_ms = pf_start, pf_ms, pay_ms
        # When a request asks for decode blocks and the link: at prefill end when sent whole; when
        # streamed, at the latest moment from which its layers go out without a pause and still land
        # one layer's bytes after prefill ends, i.e. max(first layer done, prefill end + one layer's
        # bytes - latency - payload). Asking earlier would not land it sooner, only hold the link idle
        # between layers (the formula gives prefill end for layers = 1, since latency >= 0).
        self.ready_time = [max(pf_start[i] + pf_ms[i] / layers, pf_start[i] + pf_ms[i] + pay_ms[i] / layers - latency - pay_ms[i]) for i in range(n)]


class _Ledger:
    """Each request's results, and the handoff step that decides them (Steps 3 and 4)."""

    def __init__(self, c: dict, req: _Requests, events: list, handoff):
        n = req.n
        self.req, self.events, self.handoff = req, events, handoff
        self.tpot, self.deadline_after = c["decode_ms_per_token"], c["deadline_ms"]
        self.policy, self.version = c["failure_policy"], c["version"]
        for name in (
            "ready_ms",
            "admit_ms",
            "tx_start",
            "tx_end",
            "tx_ms",
            "exposed",
            "decision",
            "outcome",
            "decode_start",
            "first_token",
            "done_ms",
        ):
            setattr(self, name, [None] * n)

    def reject(self, i, t):
        self.decision[i] = "rejected"
        self.outcome[i] = "rejected"
        self.done_ms[i] = t

    def finish(self, i, res):
        """Record the gate's action; schedule the decode (or the blocks' return on failure)."""
        self.decision[i] = res["decision"]
        self.outcome[i] = res["outcome"]
        start = res["decode_start_ms"]
        if start is None:
            self.done_ms[i] = res["act_ms"]
            heapq.heappush(self.events, (res["act_ms"], _DECODE_DONE, i))
            return
        tpot = self.tpot
        self.decode_start[i] = start
        self.first_token[i] = start + tpot
        self.done_ms[i] = done = start + self.req.output[i] * tpot
        heapq.heappush(self.events, (done, _DECODE_DONE, i))

    def deadline_of(self, i):
        """Decode gives a handoff deadline_ms from the later of prefill end and its block grant."""
        req = self.req
        return max(self.admit_ms[i], req.pf_start[i] + req.pf_ms[i]) + self.deadline_after

    def handoff_input(self, i, now, landed, ready_at):
        req, version = self.req, self.version
        lost = req.lost[i]
        return {
            "state": {
                "payload_ready": landed,
                "metadata_ready": landed and not lost,
                "ownership_ready": landed,
                "request_id": i,
                "version": "skewed-" + version if req.skew[i] else version,
            },
            "request_id": i,
            "version": version,
            "now_ms": now,
            "ready_at_ms": None if (lost or req.stall[i]) else ready_at,
            "deadline_ms": self.deadline_of(i),
            "policy": self.policy,
            "recompute_ms": req.pf_ms[i],
        }

    def gate(self, i, now, landed, ready_at):
        """The handoff step for request i, with its answer checked (a replaced step may be wrong)."""
        res = self.handoff(self.handoff_input(i, now, landed, ready_at))
        try:
            ok = (
                res["decision"] in DECISIONS[:4]
                and res["outcome"] in OUTCOMES[:3]
                and (res["decode_start_ms"] is None) == (res["outcome"] == "failed")
                and res["act_ms"] >= now - 1e-9
                and (res["decode_start_ms"] is None or res["decode_start_ms"] >= res["act_ms"] - 1e-9)
            )
        except (TypeError, KeyError):
            ok = False
        if not ok:
            raise ValueError(
                f"handoff_step returned {res!r} for request {i} at {now} ms: expected a decision in "
                f"{DECISIONS[:4]}, an outcome in {OUTCOMES[:3]}, act_ms >= now_ms, and a "
                "decode_start_ms >= act_ms (None exactly when the outcome is 'failed')"
            )
        return res


class _Link:
    """What the two link policies share: the transfer's inputs and the link's busy time.
    A policy answers ``admit`` (a request got its blocks), ``check`` (decode looks at the state),
    ``timeout`` (a wait reached its deadline), ``abort`` (a give-up time came) and ``tick``
    (its own scheduled event: the link fell free, or a fair share finished)."""

    def __init__(self, c: dict, req: _Requests, ledger: _Ledger, events: list, stream):
        self.req, self.ledger, self.events, self.stream = req, ledger, events, stream
        self.latency, self.slow_factor, self.layers = c["latency_ms"], c["slow_factor"], req.layers
        self.waiting = [False] * req.n  # decode said 'wait' before the bytes landed
        self.busy_ms = 0.0
        self.first_grant, self.last_release = INF, 0.0

    def nominal(self, i, g):
        """stream_layers' answer for request i granted the link at g, at full speed."""
        req = self.req
        return self.stream(g, req.pf_start[i], req.pf_ms[i], self.layers, req.pay_ms[i], self.latency)

    def wait_ok(self, i, landed_at):
        """Decode was waiting and the bytes landed in time: it starts then."""
        self.waiting[i] = False
        self.close(i, landed_at)
        self.ledger.finish(i, {"decision": "wait", "outcome": "ok", "act_ms": landed_at, "decode_start_ms": landed_at})


class _FifoLink(_Link):
    """One transfer at a time, in the order requests reach the link. A request joins the queue when
    it has its blocks; decode checks it when it would have landed had the link been free then.
    Once granted, its transfer is known exactly."""

    def __init__(self, c, req, ledger, events, stream):
        super().__init__(c, req, ledger, events, stream)
        n = req.n
        self.cur, self.start, self.release, self.version = -1, 0.0, INF, 0
        self.queued_in = self.queued_out = 0.0
        self.queue: deque = deque()
        self.granted = [False] * n
        self.cancelled = [False] * n  # gave up while still queued: never sent
        self.give_up_ms = [None] * n  # a decided give-up time still ahead (the link is cut then)
        self.land = [INF] * n  # when the last byte lands (INF: never, a stalled link)
        self.actual = [None] * n  # stream_layers' answer for the transfer as it ran
        self.queued_mark = [0.0] * n  # nominal work queued ahead of a request when it joined
        latency = self.latency
        self.work = [latency + p for p in req.pay_ms]  # link time at full speed (a stream never pauses)

    def _release_at(self, t):
        """Schedule (or move) the current transfer's end."""
        self.version += 1
        self.release = t
        if t < INF:
            heapq.heappush(self.events, (t, _LINK_FREE, self.version))

    def close(self, i, end):
        req, led = self.req, self.ledger
        start = led.tx_start[i]
        led.tx_end[i] = end
        full = self.latency + req.pay_ms[i] * (self.slow_factor if req.slow[i] else 1.0)
        if end == self.land[i]:
            led.tx_ms[i], led.exposed[i] = full, self.actual[i]["exposed_ms"]
        else:  # cut short: what it sent before the request gave up
            led.tx_ms[i] = min(full, end - start)
            led.exposed[i] = max(0.0, end - max(start, req.pf_start[i] + req.pf_ms[i]))
        self.last_release = max(self.last_release, end)

    def _cut(self, i, t):
        """Request i gives up at t: drop it from the queue, or end its transfer there."""
        if not self.granted[i]:
            self.cancelled[i] = True
            return
        if self.cur == i and t < self.release:
            self._release_at(t)
        self.close(i, min(self.land[i], t))

    def _grant(self, i, g):
        req, led = self.req, self.ledger
        self.granted[i] = True
        self.cur, self.start = i, g
        pay = req.pay_ms[i] * (self.slow_factor if req.slow[i] else 1.0)
        actual = self.stream(g, req.pf_start[i], req.pf_ms[i], self.layers, pay, self.latency)
        self.actual[i] = actual
        land = self.land[i] = INF if req.stall[i] else actual["end_ms"]
        led.tx_start[i] = actual["start_ms"]
        self.first_grant = min(self.first_grant, led.tx_start[i])
        deadline = led.deadline_of(i)
        if self.give_up_ms[i] is not None:  # decided already; sends until then at most
            self._release_at(min(land, self.give_up_ms[i]))
            self.close(i, self.release)
        elif self.waiting[i] and land <= deadline:  # decode is waiting, and it lands in time
            self._release_at(land)
            self.wait_ok(i, land)
        else:  # its check is still ahead, or decode times out at the deadline
            self._release_at(land)

    def tick(self, version, t):
        """The link is free at t (unless the transfer's end moved since): grant the next request
        that still wants it."""
        if version != self.version:
            return
        self.busy_ms += t - self.start
        self.cur = -1
        queue = self.queue
        while queue:
            j = queue.popleft()
            self.queued_out += self.work[j]
            if self.give_up_ms[j] is not None and self.give_up_ms[j] <= t:
                self.cancelled[j] = True
            if not self.cancelled[j]:
                self._grant(j, t)
                return

    def admit(self, i, t):
        heapq.heappush(self.events, (self.nominal(i, t)["end_ms"], _CHECK, i))
        if self.cur < 0 and not self.queue:
            self._grant(i, t)
        else:
            self.queued_mark[i] = self.queued_in
            self.queued_in += self.work[i]
            self.queue.append(i)

    def _estimate(self, i, t):
        """When a queued request would land: the link's current transfer, then the nominal work
        queued ahead of it."""
        cur = self.cur
        free_at = t if cur < 0 else self.release
        if free_at == INF:  # a stalled transfer: cut at its deadline at the latest
            free_at = max(t, self.ledger.deadline_of(cur))
        grant_at = max(t, free_at + self.queued_mark[i] - self.queued_out)
        return self.nominal(i, grant_at)["end_ms"]

    def check(self, i, t):
        led, granted = self.ledger, self.granted[i]
        ready_at = self.land[i] if granted else self._estimate(i, t)  # exact once granted
        res = led.gate(i, t, granted and self.land[i] <= t, ready_at)
        if res["outcome"] == "ok":
            if granted:  # it lands by then (ready) or by the deadline (wait)
                self.close(i, self.land[i])
                led.finish(i, res)
            else:
                self.waiting[i] = True
                heapq.heappush(self.events, (led.deadline_of(i), _TIMEOUT, i))
            return
        act = res["act_ms"]
        if act <= t or granted:
            self._cut(i, act)
        else:
            self.give_up_ms[i] = act
            heapq.heappush(self.events, (act, _ABORT, i))
        led.finish(i, res)

    def timeout(self, i, t):
        if not self.waiting[i]:
            return
        self.waiting[i] = False
        self._cut(i, t)
        self.ledger.finish(i, self.ledger.gate(i, t, False, INF))  # still missing at the deadline

    def abort(self, i, t):
        if not self.granted[i]:
            self.cancelled[i] = True


class _FairLink(_Link):
    """Every active transfer gets an equal share: processor sharing by virtual time (ms of
    full-speed service per flow)."""

    def __init__(self, c, req, ledger, events, stream):
        super().__init__(c, req, ledger, events, stream)
        n = req.n
        self.v, self.t, self.flows, self.version = 0.0, 0.0, 0, 0
        self.tags: list = []  # (finish tag, request)
        self.in_flow = [False] * n
        self.flow_tag = [0.0] * n
        self.flow_pay = [0.0] * n  # the payload's time at full speed, slowed by a slow_link fault
        self.land = [None] * n  # when a fair-shared transfer's last byte lands

    def _advance(self, t):
        if self.flows:
            self.v += (t - self.t) / self.flows
            self.busy_ms += t - self.t
        self.t = t

    def _reschedule(self):
        tags, in_flow = self.tags, self.in_flow
        while tags and not in_flow[tags[0][1]]:
            heapq.heappop(tags)
        self.version += 1
        if tags and tags[0][0] < INF:
            heapq.heappush(self.events, (self.t + (tags[0][0] - self.v) * self.flows, _PS, self.version))

    def _complete_due(self):
        tags, in_flow, req = self.tags, self.in_flow, self.req
        eps = 1e-9 * max(1.0, abs(self.v))
        while tags and (not in_flow[tags[0][1]] or tags[0][0] <= self.v + eps):
            _, i = heapq.heappop(tags)
            if not in_flow[i]:
                continue
            in_flow[i] = False
            self.flows -= 1
            t = self.t
            # the second term never binds (a stream starts late enough that each layer is ready
            # before its turn); it keeps the physical bound explicit
            land = self.land[i] = max(t + self.latency, req.pf_start[i] + req.pf_ms[i] + self.flow_pay[i] / self.layers)
            if self.waiting[i] and land <= self.ledger.deadline_of(i):
                self.wait_ok(i, land)

    def _settle(self, t):
        """Bring the shares up to t: finish the transfers due, schedule the next completion."""
        self._advance(t)
        self._complete_due()
        self._reschedule()

    def _remove(self, i, t):
        self._advance(t)
        self.in_flow[i] = False
        self.flows -= 1
        self._reschedule()

    def close(self, i, end):
        req, led = self.req, self.ledger
        led.tx_end[i] = end
        work = self.latency + self.flow_pay[i]
        led.tx_ms[i] = work if end == self.land[i] else min(work, end - led.tx_start[i])
        led.exposed[i] = max(0.0, end - max(led.tx_start[i], req.pf_start[i] + req.pf_ms[i]))
        self.last_release = max(self.last_release, end)

    def admit(self, i, g):
        req, led = self.req, self.ledger
        self._advance(g)
        self.flow_pay[i] = req.pay_ms[i] * (self.slow_factor if req.slow[i] else 1.0)
        size = INF if req.stall[i] else self.flow_pay[i]
        self.flow_tag[i] = self.v + size
        heapq.heappush(self.tags, (self.flow_tag[i], i))
        self.in_flow[i] = True
        self.flows += 1
        self._reschedule()
        nominal = self.nominal(i, g)
        led.tx_start[i] = nominal["start_ms"]
        self.first_grant = min(self.first_grant, led.tx_start[i])
        heapq.heappush(self.events, (nominal["end_ms"], _CHECK, i))

    def tick(self, version, t):
        if version == self.version:
            self._settle(t)

    def check(self, i, t):
        req, led = self.req, self.ledger
        self._settle(t)
        land = self.land[i]
        if land is not None:
            ready_at = land
        elif req.stall[i]:
            ready_at = INF
        else:  # an estimate: the remaining bytes at today's share
            ready_at = max(
                t + (self.flow_tag[i] - self.v) * self.flows + self.latency, req.pf_start[i] + req.pf_ms[i] + self.flow_pay[i] / self.layers
            )
        landed = land is not None and land <= t
        res = led.gate(i, t, landed, ready_at)
        if res["outcome"] == "ok":
            if landed or land is not None:
                self.close(i, land)
                led.finish(i, {**res, "act_ms": max(t, land), "decode_start_ms": max(t, land)})
            else:  # wait for the bytes, or for the deadline
                self.waiting[i] = True
                heapq.heappush(self.events, (led.deadline_of(i), _TIMEOUT, i))
            return
        act = res["act_ms"]
        if self.in_flow[i]:
            if act <= t:
                self._remove(i, t)
            else:
                heapq.heappush(self.events, (act, _ABORT, i))
        self.close(i, min(land if land is not None else INF, act))
        led.finish(i, res)

    def timeout(self, i, t):
        if not self.waiting[i]:
            return
        self.waiting[i] = False
        if self.in_flow[i]:
            self._remove(i, t)
        self.close(i, t)
        self.ledger.finish(i, self.ledger.gate(i, t, False, INF))  # still missing at the deadline

    def abort(self, i, t):
        if self.in_flow[i]:
            self._remove(i, t)


class _Blocks:
    """The decode pool's KV blocks: a request holds ceil((prompt + output) / block_tokens) of them
    from its grant to its last token (or its failure); when they are short it waits in a FIFO queue
    or is rejected (block_policy)."""

    def __init__(self, c: dict, req: _Requests, ledger: _Ledger, link: _Link):
        self.req, self.ledger, self.link = req, ledger, link
        self.capacity = self.free = c["decode_blocks"]
        self.reject_on_full = c["block_policy"] == "reject"
        self.admitted = 0  # requests holding blocks
        self.queue: deque = deque()

    def ready(self, i, t):
        """Request i asks for blocks (and then the link) at t."""
        led, need = self.ledger, self.req.need[i]
        led.ready_ms[i] = t
        if need > self.capacity:
            led.reject(i, t)
        elif self.req.oob[i] or self.queue or self.free < need:
            if self.reject_on_full:
                led.reject(i, t)
            else:
                self.queue.append(i)
                if self.admitted == 0:  # nothing will free blocks: the decoder's shortage clears now
                    self._drain(t)
        else:
            self._admit(i, t)

    def done(self, i, t):
        """Request i's decode ended (or its handoff failed): its blocks return."""
        self.free += self.req.need[i]
        self.admitted -= 1
        self._drain(t)

    def _admit(self, i, t):
        self.free -= self.req.need[i]
        self.admitted += 1
        self.ledger.admit_ms[i] = t
        self.link.admit(i, t)

    def _drain(self, t):
        queue, need = self.queue, self.req.need
        while queue and self.free >= need[queue[0]]:
            self._admit(queue.popleft(), t)


class _Engine:
    """One simulation: the requests, their ledger, the link, the decode blocks, and the loop."""

    def __init__(self, c: dict, step: dict):
        self.c, self.step = c, step
        self.events: list = []
        self.req = _Requests(c)
        self.ledger = _Ledger(c, self.req, self.events, step["handoff_step"])
        policy = _FairLink if c["link_sharing"] == "fair" else _FifoLink
        self.link = policy(c, self.req, self.ledger, self.events, step["stream_layers"])
        self.blocks = _Blocks(c, self.req, self.ledger, self.link)
        link, blocks = self.link, self.blocks
        handlers = {
            _LINK_FREE: link.tick,
            _PS: link.tick,
            _DECODE_DONE: blocks.done,
            _CHECK: link.check,
            _TIMEOUT: link.timeout,
            _ABORT: link.abort,
            _READY: blocks.ready,
        }
        self.handlers = [handlers[kind] for kind in range(len(handlers))]

    def run(self) -> None:
        """Pop events in time order and hand each to its handler. Prefill starts are in request order
        and a request never asks before its prefill starts, so READY events enter the heap lazily,
        just before anything later is popped: the heap holds only the requests in flight, not all n."""
        events, handlers, heappush, heappop = self.events, self.handlers, heapq.heappush, heapq.heappop
        n, pf_start, ready_time = self.req.n, self.req.pf_start, self.req.ready_time
        nxt = 0
        while True:
            horizon = events[0][0] if events else INF
            while nxt < n and pf_start[nxt] <= horizon:
                heappush(events, (ready_time[nxt], _READY, nxt))
                horizon = min(horizon, ready_time[nxt])
                nxt += 1
            if not events:
                break
            t, kind, i = heappop(events)
            handlers[kind](i, t)

    def result(self, records: bool) -> dict:
        c, req, led, n = self.c, self.req, self.ledger, self.req.n
        arrival, tx_start, tx_end = req.arrival, led.tx_start, led.tx_end
        cols = {
            "id": list(range(n)),
            "arrival_ms": arrival,
            "prompt_tokens": req.prompt,
            "output_tokens": req.output,
            "prefill_start_ms": req.pf_start,
            "prefill_end_ms": [req.pf_start[i] + req.pf_ms[i] for i in range(n)],
            "handoff_ready_ms": led.ready_ms,
            "blocks_ms": led.admit_ms,
            "transfer_start_ms": tx_start,
            "transfer_end_ms": tx_end,
            "link_held_ms": [None if tx_end[i] is None else tx_end[i] - tx_start[i] for i in range(n)],
            "transfer_ms": led.tx_ms,
            "exposed_ms": led.exposed,
            "decision": led.decision,
            "outcome": led.outcome,
            "decode_start_ms": led.decode_start,
            "first_token_ms": led.first_token,
            "ttft_ms": [None if led.first_token[i] is None else led.first_token[i] - arrival[i] for i in range(n)],
            "done_ms": led.done_ms,
            "faults": [[name for name in FAULTS if req.fault[name][i]] for i in range(n)],
        }
        link = self.link
        summary = _summarize(cols, self.step["ttft_percentiles"], link.busy_ms, link.first_grant, link.last_release, n, c["prefill_workers"])
        config_out = {k: v for k, v in c.items() if k != "trace"}
        config_out["trace_rows"] = None if c["trace"] is None else len(c["trace"])
        result = {"config": config_out, "summary": summary}
        if records:
            names = list(cols)
            result["records"] = [dict(zip(names, row)) for row in zip(*cols.values())]
        return result


def _summarize(cols, percentiles, busy_ms, first_grant, last_release, n, prefill_workers) -> dict:
    outcomes = {k: 0 for k in OUTCOMES}
    for o in cols["outcome"]:
        outcomes[o] += 1
    decisions = {k: 0 for k in DECISIONS}
    for d in cols["decision"]:
        decisions[d] += 1
    ttft_rows = [{"ttft_ms": v} for v in cols["ttft_ms"] if v is not None]
    ttft = (
        dict(zip(("p50_ms", "p95_ms", "p99_ms"), percentiles(ttft_rows, list(DEFAULT_QS))))
        if ttft_rows
        else {"p50_ms": None, "p95_ms": None, "p99_ms": None}
    )
    sent = [i for i in range(n) if cols["transfer_ms"][i] is not None]
    total_tx = sum(cols["transfer_ms"][i] for i in sent)
    total_exposed = sum(cols["exposed_ms"][i] for i in sent)
    span = last_release - first_grant if sent else 0.0
    # the prefill pool's busy share from the first arrival to the last prefill's end: near 1, prefill
    # (not the link) decides the TTFT, and requests queue for a prefill worker
    prefilled = [i for i in range(n) if cols["prefill_start_ms"][i] is not None]
    prefill_busy = sum(cols["prefill_end_ms"][i] - cols["prefill_start_ms"][i] for i in prefilled)
    prefill_span = max((cols["prefill_end_ms"][i] for i in prefilled), default=0.0) - cols["arrival_ms"][0] if n else 0.0
    return {
        "requests": n,
        "outcomes": outcomes,
        "decisions": decisions,
        "ttft": ttft,
        "transfers": len(sent),
        "transfer_ms_total": total_tx,
        "exposed_ms_total": total_exposed,
        "exposed_fraction": total_exposed / total_tx if total_tx else 0.0,
        "transfer_ms_mean": total_tx / len(sent) if sent else None,
        "exposed_ms_mean": total_exposed / len(sent) if sent else None,
        # the time the link carried at least one transfer, and its fraction of [first start, last end]
        "link_busy_ms": busy_ms,
        "link_utilization": busy_ms / span if span > 0 else 0.0,
        "prefill_utilization": prefill_busy / (prefill_workers * prefill_span) if prefill_span > 0 else 0.0,
        "makespan_ms": max(v for v in cols["done_ms"] if v is not None) - cols["arrival_ms"][0],
    }
