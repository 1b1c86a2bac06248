"""Model, GPU and link presets for the handoff notebooks, with every number's source.

Units: bytes, milliseconds, FLOPs; link speeds in Gbit/s (as ``estimate_handoff`` in notebook 02
takes them), converted with :func:`bytes_per_ms`. Derived figures (KV bytes per token, parameter
counts, FLOPs per token) are computed from the architecture fields, never typed in.
"""

from __future__ import annotations

import math

# the byte units of the whole runtime (tools/explorer.py, tools/overlap/ import them from here)
KiB = 2**10
MiB = 2**20
GiB = 2**30

# ------------------------------------------------------------------ models
# Architecture fields from each model's published config.json on the Hugging Face Hub:
#   meta-llama/Meta-Llama-3-8B  : num_hidden_layers 32, hidden_size 4096, num_attention_heads 32,
#                                 num_key_value_heads 8, intermediate_size 14336, vocab_size 128256
#   meta-llama/Meta-Llama-3-70B : num_hidden_layers 80, hidden_size 8192, num_attention_heads 64,
#                                 num_key_value_heads 8, intermediate_size 28672, vocab_size 128256
#   Qwen/Qwen2.5-7B             : num_hidden_layers 28, hidden_size 3584, num_attention_heads 28,
#                                 num_key_value_heads 4, intermediate_size 18944, vocab_size 152064
# head_dim = hidden_size / num_attention_heads = 128 for all three. dtype bf16 = 2 bytes.
# Llama-3-70B's bf16 weights (about 141 GB, computed below) do not fit one 80 GB H100, so it is
# served tensor-parallel; tp = 4 is the smallest power of two that leaves room for the KV cache
# on 80 GB cards (2 cards would leave almost none). Its 8 KV heads split 2 per rank.
_ARCH = {
    "Llama-3-8B": dict(
        layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256, tp=1, tied=False
    ),
    "Llama-3-70B": dict(
        layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=128256, tp=4, tied=False
    ),
    "Qwen2.5-7B": dict(
        layers=28, hidden=3584, heads=28, kv_heads=4, ffn=18944, vocab=152064, tp=1, tied=False
    ),
}
DTYPE_BYTES = 2  # bf16


def _model(name: str, a: dict) -> dict:
    head_dim = a["hidden"] // a["heads"]
    kv_width = a["kv_heads"] * head_dim
    # Per layer: q and o projections (hidden x hidden), k and v (hidden x kv_width), the SwiGLU MLP
    # (gate, up, down: 3 x hidden x ffn). Norms and Qwen's qkv biases are under 0.01% and left out.
    layer_params = (
        2 * a["hidden"] * a["hidden"] + 2 * a["hidden"] * kv_width + 3 * a["hidden"] * a["ffn"]
    )
    embed_params = a["vocab"] * a["hidden"] * (1 if a["tied"] else 2)  # embedding + LM head
    return {
        "name": name,
        "layers": a["layers"],
        "kv_heads": a["kv_heads"],
        "head_dim": head_dim,
        "dtype_bytes": DTYPE_BYTES,
        "tp": a["tp"],
        "hidden": a["hidden"],
        "attn_width": a["heads"] * head_dim,  # width of Q (and of the attention output)
        # KV bytes per token: K and V, every layer, the KV heads only (GQA), bf16.
        "kv_bytes_per_token": 2 * a["layers"] * a["kv_heads"] * head_dim * DTYPE_BYTES,
        "params": a["layers"] * layer_params + embed_params,
        # FLOPs per prompt token in the weight matmuls (2 FLOPs per multiply-add); the embedding is
        # a lookup, and the LM head runs for the last token only, so neither is counted per token.
        "linear_flops_per_token": 2 * a["layers"] * layer_params,
    }


MODEL_PRESETS: dict[str, dict] = {name: _model(name, a) for name, a in _ARCH.items()}


def prefill_flops(model: dict, prompt_tokens: int) -> float:
    """FLOPs of one prefill of ``prompt_tokens`` tokens (causal attention, the whole model).

    Weight matmuls: linear_flops_per_token per token. Attention: token i attends to i tokens, and
    QK^T and softmax x V cost 2 x attn_width FLOPs per (query, key) pair each, so one layer costs
    4 x attn_width x P(P+1)/2. This is the usual 2N + attention-term estimate (Kaplan et al. 2020,
    "Scaling Laws for Neural Language Models", table 1), with causal masking counted.
    """
    p = int(prompt_tokens)
    if p < 0:
        raise ValueError(f"prompt_tokens must be >= 0, got {prompt_tokens}")
    attention = 2 * model["layers"] * model["attn_width"] * p * (p + 1)
    return float(model["linear_flops_per_token"] * p + attention)


# ------------------------------------------------------------------ GPUs
# NVIDIA H100 and H200 datasheets (SXM): dense BF16 tensor throughput 989 TFLOP/s (1,979 is the
# sparse figure); HBM3 3.35 TB/s and 80 GB (H100), HBM3e 4.8 TB/s and 141 GB (H200).
GPU_PRESETS: dict[str, dict] = {
    "H100 SXM": {"bf16_flops_per_s": 989e12, "hbm_bytes_per_s": 3.35e12, "hbm_bytes": 80e9},
    "H200 SXM": {"bf16_flops_per_s": 989e12, "hbm_bytes_per_s": 4.8e12, "hbm_bytes": 141e9},
}
# Stated assumptions, not measurements: prefill reaches half the dense peak (model FLOPs
# utilisation 0.5: an 8k-token Llama-3-8B prefill then takes about 270 ms on one H100, inside the
# 200-300 ms range the course quotes); decode reads the weights at 80% of the HBM bandwidth.
PREFILL_EFFICIENCY = 0.5
DECODE_BANDWIDTH_EFFICIENCY = 0.8
# Fraction of HBM the serving engine may use (vLLM's gpu_memory_utilization defaults to 0.9).
GPU_MEMORY_UTILIZATION = 0.9
BLOCK_TOKENS = 16  # tokens per KV block (vLLM's default block_size)


def prefill_ms(
    model: dict,
    prompt_tokens: int,
    gpu: dict,
    tp: int | None = None,
    efficiency: float = PREFILL_EFFICIENCY,
) -> float:
    """Prefill time in ms on ``tp`` GPUs at ``efficiency`` of peak (tensor-parallel communication
    not modelled)."""
    tp = model["tp"] if tp is None else tp
    if tp < 1 or not 0 < efficiency <= 1:
        raise ValueError(f"tp must be >= 1 and efficiency in (0, 1], got {tp=}, {efficiency=}")
    return prefill_flops(model, prompt_tokens) / (tp * gpu["bf16_flops_per_s"] * efficiency) * 1e3


def decode_ms_per_token(
    model: dict, gpu: dict, tp: int | None = None, efficiency: float = DECODE_BANDWIDTH_EFFICIENCY
) -> float:
    """One decode step in ms: every weight read once from HBM (memory-bound; KV reads not
    counted)."""
    tp = model["tp"] if tp is None else tp
    if tp < 1 or not 0 < efficiency <= 1:
        raise ValueError(f"tp must be >= 1 and efficiency in (0, 1], got {tp=}, {efficiency=}")
    weight_bytes = model["params"] * model["dtype_bytes"] / tp
    return weight_bytes / (gpu["hbm_bytes_per_s"] * efficiency) * 1e3


def kv_blocks_per_instance(
    model: dict,
    gpu: dict,
    tp: int | None = None,
    block_tokens: int = BLOCK_TOKENS,
    memory_utilization: float = GPU_MEMORY_UTILIZATION,
) -> int:
    """KV blocks one decode instance (``tp`` GPUs) holds after its weights (activations not
    counted)."""
    tp = model["tp"] if tp is None else tp
    # bytes per GPU
    free = gpu["hbm_bytes"] * memory_utilization - model["params"] * model["dtype_bytes"] / tp
    block_bytes = block_tokens * model["kv_bytes_per_token"] / tp  # bytes per GPU
    if free <= 0:
        raise ValueError(
            f"{model['name']} does not fit {tp} GPU(s) of {gpu['hbm_bytes'] / 1e9:.0f} GB"
        )
    return int(math.floor(free / block_bytes))


# ------------------------------------------------------------------ links gbps: the speed the
# simulator uses, in Gbit/s, one direction: a published measurement where one is cited below (PCIe
# Gen5, NVLink 4; the course measured neither), else the nominal line rate; notebook 02's explorer
# uses the same numbers. latency_ms: a fixed cost paid once per handoff.
#   PCIe Gen5 x16: 32 GT/s x 16 lanes with 128b/130b coding = 63 GB/s per direction (PCI-SIG PCIe
#     5.0 base specification); pinned host-to-device copies measured 55 GB/s on an H200.
#   NVLink 4 (H100/H200): 18 links, 900 GB/s both directions together, so 450 GB/s per direction
#     (NVIDIA H100 datasheet). Measured GPU to GPU, one direction: 371-377 GB/s with CUDA's
#     p2pBandwidthLatencyTest on an 8-GPU HGX H100 SXM (NVIDIA/nccl issue #1264, April 2024);
#     the course uses 375 GB/s.
#   InfiniBand NDR: 400 Gb/s per port, one ConnectX-7 NIC (NVIDIA ConnectX-7 user manual).
#   RoCE 200G: 200 Gb/s per port (ConnectX-7 NDR200/200GbE mode, same manual).
# Latencies: a copy-engine transfer costs about 5-7 us per cudaMemcpyAsync call (DualPath, Wu et
# al. 2026, arXiv 2602.21548, section 5.2), so 0.007 ms for PCIe and NVLink. For the RDMA links the
# course keeps notebook 02's default of 0.05 ms: an order-of-magnitude modelling choice for one RDMA
# write plus its completion notification through the serving software, not a measurement.
LINK_PRESETS: dict[str, dict] = {
    "PCIe Gen5 x16": {"gbps": 55 * 8, "nominal_gbps": 63 * 8, "latency_ms": 0.007},
    "NVLink 4": {"gbps": 375 * 8, "nominal_gbps": 450 * 8, "latency_ms": 0.007},
    "InfiniBand NDR": {"gbps": 400, "nominal_gbps": 400, "latency_ms": 0.05},
    "RoCE 200G": {"gbps": 200, "nominal_gbps": 200, "latency_ms": 0.05},
    # a commodity cloud NIC, slower than prefill produces KV for large prompts: the link decides
    "Ethernet 25G": {"gbps": 25, "nominal_gbps": 25, "latency_ms": 0.05},
}


def bytes_per_ms(gbps: float) -> float:
    """A link speed in Gbit/s as bytes per millisecond (1 Gbit = 1e9 bits)."""
    if not gbps > 0:
        raise ValueError(f"link speed must be > 0 Gbit/s, got {gbps}")
    return gbps * 1e9 / 8 / 1e3


def model_preset(name: str) -> dict:
    """A copy of one model preset; unknown names list the known ones."""
    if name not in MODEL_PRESETS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODEL_PRESETS)}")
    return dict(MODEL_PRESETS[name])


def link_preset(name: str) -> dict:
    """A copy of one link preset; unknown names list the known ones."""
    if name not in LINK_PRESETS:
        raise ValueError(f"unknown link {name!r}; known: {', '.join(LINK_PRESETS)}")
    return {"name": name, **LINK_PRESETS[name]}


def gpu_preset(name: str) -> dict:
    """A copy of one GPU preset; unknown names list the known ones."""
    if name not in GPU_PRESETS:
        raise ValueError(f"unknown GPU {name!r}; known: {', '.join(GPU_PRESETS)}")
    return {"name": name, **GPU_PRESETS[name]}
