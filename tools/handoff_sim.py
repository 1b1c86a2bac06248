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

from . import presets

INF = math.inf
FAULTS = ("lost_metadata", "version_skew", "slow_link", "stalled_link", "out_of_blocks")
DECISIONS = ("ready", "wait", "fallback", "recompute", "rejected")
OUTCOMES = ("ok", "recomputed", "failed", "rejected")
DEFAULT_QS = (50, 95, 99)

DEFAULTS: dict = {
    "seed": 0,
    "n_requests": 1000,        # Poisson arrivals only
    "rate_per_s": 4.0,         # Poisson arrivals only
    "prompt_tokens": 2048,     # an int, or [low, high] drawn uniformly (inclusive)
    "output_tokens": 128,      # an int, or [low, high]
    "trace": None,             # rows [arrival_ms, prompt_tokens, output_tokens]; replaces Poisson
    "model": "Llama-3-8B",     # a name in presets.MODEL_PRESETS, or a dict shaped like one
    "gpu": "H100 SXM",
    "tp": None,                # None: the model preset's
    "prefill_efficiency": presets.PREFILL_EFFICIENCY,
    "prefill_workers": 4,
    "link": "InfiniBand NDR",  # a name in presets.LINK_PRESETS
    "gbps": None,              # None: the link preset's
    "latency_ms": None,        # None: the link preset's
    "link_sharing": "fifo",    # 'fifo' or 'fair'
    "streaming": "whole",      # 'whole' or 'layerwise'
    "deadline_ms": 50.0,       # after the request's prefill end
    "decode_blocks": None,     # None: presets.kv_blocks_per_instance x decode_instances
    "decode_instances": 1,
    "block_tokens": presets.BLOCK_TOKENS,
    "block_policy": "wait",    # 'wait' or 'reject'
    "decode_ms_per_token": None,  # None: presets.decode_ms_per_token
    "faults": {},              # fault name -> rate in [0, 1]
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
#       handoff_input in _run), and what decode does about the answer under failure_policy.
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
            "notebooks 03 and 04)")
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
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
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
    for key, allowed in (("link_sharing", ("fifo", "fair")), ("streaming", ("whole", "layerwise")),
                         ("block_policy", ("wait", "reject")), ("failure_policy", ("recompute", "fail"))):
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

# Event kinds, in the order they run at equal times: transfers land before decode frees blocks,
# before checks and timeouts, before new requests ask for blocks.
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
        return _run(c, chosen, records)
    finally:
        if collecting:
            gc.enable()


def _run(c: dict, step: dict, records: bool) -> dict:
    """The event loop of :func:`simulate`, on a checked configuration."""
    stream, handoff = step["stream_layers"], step["handoff_step"]
    model, gpu, tp = c["model"], c["gpu"], c["tp"]
    rng = random.Random(c["seed"])

    # ---- arrivals and per-request draws (all from the seed, in request order)
    if c["trace"] is None:
        n = c["n_requests"]
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
    else:
        rows = sorted(c["trace"], key=lambda r: r[0])  # stable: equal arrivals keep their order
        n = len(rows)
        arrival = [float(r[0]) for r in rows]
        prompt = [int(r[1]) for r in rows]
        output = [int(r[2]) for r in rows]
    fault_rates = [(name, c["faults"].get(name, 0.0)) for name in FAULTS]
    fault = {name: [False] * n for name in FAULTS}
    for name, rate in fault_rates:
        if rate > 0:
            flags, draw = fault[name], rng.random
            for i in range(n):
                flags[i] = draw() < rate
    lost, skew, slow, stall, oob = (fault[name] for name in FAULTS)

    # ---- prefill pool: FIFO over identical workers, independent of everything downstream
    layers = model["layers"] if c["streaming"] == "layerwise" else 1
    workers = [0.0] * c["prefill_workers"]
    pf_ms_of: dict[int, float] = {}
    bpm = presets.bytes_per_ms(c["gbps"])
    kv_tok = model["kv_bytes_per_token"]
    pf_start, pf_ms, pay_ms = [0.0] * n, [0.0] * n, [0.0] * n
    latency = c["latency_ms"]
    events = []
    heappush, heappop, heapreplace = heapq.heappush, heapq.heappop, heapq.heapreplace
    for i in range(n):
        p = prompt[i]
        d = pf_ms_of.get(p)
        if d is None:
            d = pf_ms_of[p] = presets.prefill_ms(model, p, gpu, tp, c["prefill_efficiency"])
        s = max(arrival[i], workers[0])
        heapreplace(workers, s + d)
        pf_start[i], pf_ms[i] = s, d
        pay_ms[i] = p * kv_tok / tp / bpm  # each of the tp links carries 1/tp of the KV
    # When a request asks for decode blocks and the link: at prefill end when sent whole; when
    # streamed, at the latest moment from which its layers go out without a pause and still land
    # one layer's bytes after prefill ends, i.e. max(first layer done, prefill end + one layer's
    # bytes - latency - payload). Asking earlier would not land it sooner, only hold the link idle
    # between layers (the formula gives prefill end for layers = 1, since latency >= 0).
    # Prefill starts are in request order and a request never asks before its prefill starts, so
    # READY events enter the heap lazily, just before anything later is popped: the heap holds
    # only the requests in flight, not all n.
    ready_time = [max(pf_start[i] + pf_ms[i] / layers, pf_start[i] + pf_ms[i] + pay_ms[i] / layers - latency - pay_ms[i])
                  for i in range(n)]

    block_tokens, capacity = c["block_tokens"], c["decode_blocks"]
    need = [-(-(prompt[i] + output[i]) // block_tokens) for i in range(n)]
    tpot, deadline_after = c["decode_ms_per_token"], c["deadline_ms"]
    policy, version, slow_factor = c["failure_policy"], c["version"], c["slow_factor"]
    reject_on_full = c["block_policy"] == "reject"
    fair = c["link_sharing"] == "fair"

    # ---- per-request results
    ready_ms = [None] * n
    admit_ms = [None] * n
    tx_start = [None] * n
    tx_end = [None] * n
    tx_ms = [None] * n
    exposed = [None] * n
    decision = [None] * n
    outcome = [None] * n
    decode_start = [None] * n
    first_token = [None] * n
    done_ms = [None] * n

    free_blocks = capacity
    admitted = 0  # requests holding blocks
    block_q: deque = deque()
    link_q: deque = deque()
    busy_ms = 0.0
    first_grant, last_release = INF, 0.0

    def reject(i, t):
        decision[i] = "rejected"
        outcome[i] = "rejected"
        done_ms[i] = t

    def finish(i, res):
        """Record the gate's action; schedule the decode (or the blocks' return on failure)."""
        decision[i] = res["decision"]
        outcome[i] = res["outcome"]
        start = res["decode_start_ms"]
        if start is None:
            done_ms[i] = res["act_ms"]
            heappush(events, (res["act_ms"], _DECODE_DONE, i))
            return
        decode_start[i] = start
        first_token[i] = start + tpot
        done_ms[i] = start + output[i] * tpot
        heappush(events, (done_ms[i], _DECODE_DONE, i))

    def deadline_of(i):
        """Decode gives a handoff deadline_ms from the later of prefill end and its block grant."""
        return max(admit_ms[i], pf_start[i] + pf_ms[i]) + deadline_after

    def handoff_input(i, now, landed, ready_at):
        return {
            "state": {"payload_ready": landed, "metadata_ready": landed and not lost[i],
                      "ownership_ready": landed, "request_id": i,
                      "version": "skewed-" + version if skew[i] else version},
            "request_id": i, "version": version, "now_ms": now,
            "ready_at_ms": None if (lost[i] or stall[i]) else ready_at,
            "deadline_ms": deadline_of(i),
            "policy": policy, "recompute_ms": pf_ms[i],
        }

    def gate(i, now, landed, ready_at):
        """The handoff step for request i, with its answer checked (a replaced step may be wrong)."""
        res = handoff(handoff_input(i, now, landed, ready_at))
        try:
            ok = (res["decision"] in DECISIONS[:4] and res["outcome"] in OUTCOMES[:3]
                  and (res["decode_start_ms"] is None) == (res["outcome"] == "failed")
                  and res["act_ms"] >= now - 1e-9
                  and (res["decode_start_ms"] is None or res["decode_start_ms"] >= res["act_ms"] - 1e-9))
        except (TypeError, KeyError):
            ok = False
        if not ok:
            raise ValueError(f"handoff_step returned {res!r} for request {i} at {now} ms: expected a decision in "
                             f"{DECISIONS[:4]}, an outcome in {OUTCOMES[:3]}, act_ms >= now_ms, and a "
                             "decode_start_ms >= act_ms (None exactly when the outcome is 'failed')")
        return res

    # ---- FIFO link. A request joins the queue when it has its blocks; decode checks it when it
    # would have landed had the link been free then. Once granted, its transfer is known exactly.
    waiting = [False] * n         # decode said 'wait' before the bytes landed
    link = {"cur": -1, "start": 0.0, "release": INF, "version": 0, "queued_in": 0.0, "queued_out": 0.0}
    granted = [False] * n
    cancelled = [False] * n       # gave up while still queued: never sent
    give_up_ms = [None] * n       # a decided give-up time still ahead (the link is cut then)
    land_fifo = [INF] * n         # when the last byte lands (INF: never, a stalled link)
    actual_fifo = [None] * n      # stream_layers' answer for the transfer as it ran
    queued_mark = [0.0] * n       # nominal work queued ahead of a request when it joined
    work = [latency + pay_ms[i] for i in range(n)]  # link time at full speed (a stream never pauses)

    def link_release(t):
        """Schedule (or move) the current transfer's end."""
        link["version"] += 1
        link["release"] = t
        if t < INF:
            heappush(events, (t, _LINK_FREE, link["version"]))

    def close_fifo(i, end):
        nonlocal last_release
        start = tx_start[i]
        tx_end[i] = end
        full = latency + pay_ms[i] * (slow_factor if slow[i] else 1.0)
        if end == land_fifo[i]:
            tx_ms[i], exposed[i] = full, actual_fifo[i]["exposed_ms"]
        else:  # cut short: what it sent before the request gave up
            tx_ms[i] = min(full, end - start)
            exposed[i] = max(0.0, end - max(start, pf_start[i] + pf_ms[i]))
        last_release = max(last_release, end)

    def cut_fifo(i, t):
        """Request i gives up at t: drop it from the queue, or end its transfer there."""
        if not granted[i]:
            cancelled[i] = True
            return
        if link["cur"] == i and t < link["release"]:
            link_release(t)
        close_fifo(i, min(land_fifo[i], t))

    def grant_fifo(i, g):
        nonlocal first_grant
        granted[i] = True
        link["cur"], link["start"] = i, g
        pay = pay_ms[i] * (slow_factor if slow[i] else 1.0)
        actual = stream(g, pf_start[i], pf_ms[i], layers, pay, latency)
        actual_fifo[i] = actual
        land_fifo[i] = INF if stall[i] else actual["end_ms"]
        tx_start[i] = actual["start_ms"]
        first_grant = min(first_grant, tx_start[i])
        deadline = deadline_of(i)
        if give_up_ms[i] is not None:  # decided already; sends until then at most
            link_release(min(land_fifo[i], give_up_ms[i]))
            close_fifo(i, link["release"])
        elif waiting[i] and land_fifo[i] <= deadline:  # decode is waiting, and it lands in time
            waiting[i] = False
            link_release(land_fifo[i])
            close_fifo(i, land_fifo[i])
            finish(i, {"decision": "wait", "outcome": "ok", "act_ms": land_fifo[i], "decode_start_ms": land_fifo[i]})
        else:  # its check is still ahead, or decode times out at the deadline
            link_release(land_fifo[i])

    def next_fifo(t):
        """The link is free at t: grant the next request that still wants it."""
        while link_q:
            j = link_q.popleft()
            link["queued_out"] += work[j]
            if give_up_ms[j] is not None and give_up_ms[j] <= t:
                cancelled[j] = True
            if not cancelled[j]:
                grant_fifo(j, t)
                return

    def enqueue_fifo(i, t):
        nominal = stream(t, pf_start[i], pf_ms[i], layers, pay_ms[i], latency)
        heappush(events, (nominal["end_ms"], _CHECK, i))
        if link["cur"] < 0 and not link_q:
            grant_fifo(i, t)
        else:
            queued_mark[i] = link["queued_in"]
            link["queued_in"] += work[i]
            link_q.append(i)

    def check_fifo(i, t):
        if granted[i]:
            ready_at = land_fifo[i]  # exact
        else:  # an estimate: the link's current transfer, then the nominal work queued ahead
            cur = link["cur"]
            free_at = t if cur < 0 else link["release"]
            if free_at == INF:  # a stalled transfer: cut at its deadline at the latest
                free_at = max(t, deadline_of(cur))
            grant_at = max(t, free_at + queued_mark[i] - link["queued_out"])
            ready_at = stream(grant_at, pf_start[i], pf_ms[i], layers, pay_ms[i], latency)["end_ms"]
        landed = granted[i] and land_fifo[i] <= t
        res = gate(i, t, landed, ready_at)
        if res["outcome"] == "ok":
            if granted[i]:  # it lands by then (ready) or by the deadline (wait)
                close_fifo(i, land_fifo[i])
                finish(i, res)
            else:
                waiting[i] = True
                heappush(events, (deadline_of(i), _TIMEOUT, i))
            return
        act = res["act_ms"]
        if act <= t or granted[i]:
            cut_fifo(i, act)
        else:
            give_up_ms[i] = act
            heappush(events, (act, _ABORT, i))
        finish(i, res)

    def timeout_fifo(i, t):
        if not waiting[i]:
            return
        waiting[i] = False
        cut_fifo(i, t)
        finish(i, gate(i, t, False, INF))  # still missing at the deadline

    # ---- fair-shared link: processor sharing by virtual time (ms of full-speed service per flow)
    ps = {"v": 0.0, "t": 0.0, "n": 0, "version": 0}
    tags: list = []          # (finish tag, request)
    in_flow = [False] * n
    flow_tag = [0.0] * n
    flow_pay = [0.0] * n     # the payload's time at full speed, slowed by a slow_link fault
    land_ms = [None] * n     # when a fair-shared transfer's last byte lands

    def ps_advance(t):
        nonlocal busy_ms
        if ps["n"]:
            ps["v"] += (t - ps["t"]) / ps["n"]
            busy_ms += t - ps["t"]
        ps["t"] = t

    def ps_reschedule():
        while tags and not in_flow[tags[0][1]]:
            heappop(tags)
        ps["version"] += 1
        if tags and tags[0][0] < INF:
            heappush(events, (ps["t"] + (tags[0][0] - ps["v"]) * ps["n"], _PS, ps["version"]))

    def ps_complete_due():
        eps = 1e-9 * max(1.0, abs(ps["v"]))
        while tags and (not in_flow[tags[0][1]] or tags[0][0] <= ps["v"] + eps):
            _, i = heappop(tags)
            if not in_flow[i]:
                continue
            in_flow[i] = False
            ps["n"] -= 1
            t = ps["t"]
            # the second term never binds (a stream starts late enough that each layer is ready
            # before its turn); it keeps the physical bound explicit
            land_ms[i] = max(t + latency, pf_start[i] + pf_ms[i] + flow_pay[i] / layers)
            if waiting[i] and land_ms[i] <= deadline_of(i):
                waiting[i] = False
                fair_close(i, land_ms[i])
                finish(i, {"decision": "wait", "outcome": "ok", "act_ms": land_ms[i], "decode_start_ms": land_ms[i]})

    def ps_remove(i, t):
        ps_advance(t)
        in_flow[i] = False
        ps["n"] -= 1
        ps_reschedule()

    def fair_close(i, end):
        nonlocal last_release
        tx_end[i] = end
        work = latency + flow_pay[i]
        tx_ms[i] = work if end == land_ms[i] else min(work, end - tx_start[i])
        exposed[i] = max(0.0, end - max(tx_start[i], pf_start[i] + pf_ms[i]))
        last_release = max(last_release, end)

    def grant_fair(i, g):
        nonlocal first_grant
        ps_advance(g)
        flow_pay[i] = pay_ms[i] * (slow_factor if slow[i] else 1.0)
        size = INF if stall[i] else flow_pay[i]
        flow_tag[i] = ps["v"] + size
        heappush(tags, (flow_tag[i], i))
        in_flow[i] = True
        ps["n"] += 1
        ps_reschedule()
        nominal = stream(g, pf_start[i], pf_ms[i], layers, pay_ms[i], latency)
        tx_start[i] = nominal["start_ms"]
        first_grant = min(first_grant, tx_start[i])
        heappush(events, (nominal["end_ms"], _CHECK, i))

    def check_fair(i, t):
        ps_advance(t)
        ps_complete_due()
        ps_reschedule()
        if land_ms[i] is not None:
            ready_at = land_ms[i]
        elif stall[i]:
            ready_at = INF
        else:  # an estimate: the remaining bytes at today's share
            ready_at = max(t + (flow_tag[i] - ps["v"]) * ps["n"] + latency, pf_start[i] + pf_ms[i] + flow_pay[i] / layers)
        landed = land_ms[i] is not None and land_ms[i] <= t
        res = gate(i, t, landed, ready_at)
        if res["outcome"] == "ok":
            if landed or land_ms[i] is not None:
                fair_close(i, land_ms[i])
                finish(i, {**res, "act_ms": max(t, land_ms[i]), "decode_start_ms": max(t, land_ms[i])})
            else:  # wait for the bytes, or for the deadline
                waiting[i] = True
                heappush(events, (deadline_of(i), _TIMEOUT, i))
            return
        act = res["act_ms"]
        if in_flow[i]:
            if act <= t:
                ps_remove(i, t)
            else:
                heappush(events, (act, _ABORT, i))
        fair_close(i, min(land_ms[i] if land_ms[i] is not None else INF, act))
        finish(i, res)

    def timeout_fair(i, t):
        if not waiting[i]:
            return
        waiting[i] = False
        if in_flow[i]:
            ps_remove(i, t)
        fair_close(i, t)
        verdict = gate(i, t, False, INF)  # still missing at the deadline
        finish(i, verdict)

    def to_link(i, t):
        if fair:
            grant_fair(i, t)
        else:
            enqueue_fifo(i, t)

    def admit(i, t):
        nonlocal free_blocks, admitted
        free_blocks -= need[i]
        admitted += 1
        admit_ms[i] = t
        to_link(i, t)

    def drain(t):
        while block_q and free_blocks >= need[block_q[0]]:
            admit(block_q.popleft(), t)

    # ---- the event loop
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
        if kind == _READY:
            ready_ms[i] = t
            if need[i] > capacity:
                reject(i, t)
            elif oob[i] or block_q or free_blocks < need[i]:
                if reject_on_full:
                    reject(i, t)
                else:
                    block_q.append(i)
                    if admitted == 0:  # nothing will free blocks: the decoder's shortage clears now
                        drain(t)
            else:
                admit(i, t)
        elif kind == _LINK_FREE:
            if i == link["version"]:
                busy_ms += t - link["start"]
                link["cur"] = -1
                next_fifo(t)
        elif kind == _DECODE_DONE:
            free_blocks += need[i]
            admitted -= 1
            drain(t)
        elif kind == _PS:
            if i == ps["version"]:
                ps_advance(t)
                ps_complete_due()
                ps_reschedule()
        elif kind == _CHECK:
            if fair:
                check_fair(i, t)
            else:
                check_fifo(i, t)
        elif kind == _TIMEOUT:
            if fair:
                timeout_fair(i, t)
            else:
                timeout_fifo(i, t)
        elif kind == _ABORT:
            if fair:
                if in_flow[i]:
                    ps_remove(i, t)
            elif not granted[i]:
                cancelled[i] = True

    # ---- results
    ttft = [None if first_token[i] is None else first_token[i] - arrival[i] for i in range(n)]
    cols = {
        "id": list(range(n)), "arrival_ms": arrival, "prompt_tokens": prompt, "output_tokens": output,
        "prefill_start_ms": pf_start, "prefill_end_ms": [pf_start[i] + pf_ms[i] for i in range(n)],
        "handoff_ready_ms": ready_ms, "blocks_ms": admit_ms,
        "transfer_start_ms": tx_start, "transfer_end_ms": tx_end,
        "link_held_ms": [None if tx_end[i] is None else tx_end[i] - tx_start[i] for i in range(n)],
        "transfer_ms": tx_ms, "exposed_ms": exposed,
        "decision": decision, "outcome": outcome, "decode_start_ms": decode_start,
        "first_token_ms": first_token, "ttft_ms": ttft, "done_ms": done_ms,
        "faults": [[name for name in FAULTS if fault[name][i]] for i in range(n)],
    }
    summary = _summarize(cols, step["ttft_percentiles"], busy_ms, first_grant, last_release, n, c["prefill_workers"])
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
    ttft = dict(zip(("p50_ms", "p95_ms", "p99_ms"), percentiles(ttft_rows, list(DEFAULT_QS)))) if ttft_rows else \
        {"p50_ms": None, "p95_ms": None, "p99_ms": None}
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
