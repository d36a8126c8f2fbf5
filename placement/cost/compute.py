"""Compute time of the per-micro-batch work on one GPU (vectorized).

Roofline per GEMM: FLOPs / (peak * MAMF * shape efficiency), with the MAMF ceiling from the
accelerator file (ml-engineering MAMF table) and a shape efficiency set by the accelerator's
`gemm_half_efficiency_dim`.
Memory-bound element-wise work: bytes / HBM bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.cost.constants import (
    ATTENTION_CORE_EFFICIENCY,
    CAUSAL_EXECUTED_FRACTION,
    CROSS_ENTROPY_BYTES_PER_LOGIT,
    CROSS_ENTROPY_FUSED_BYTES_PER_LOGIT,
    DROPOUT_MASK_BYTES_PER_HIDDEN,
    ELEMENTWISE_BYTES_PER_HIDDEN,
    NORM_BYTES_PER_HIDDEN,
    RESIDUAL_ADD_BYTES_PER_HIDDEN,
    UNFUSED_SCORE_BYTES_FORWARD,
    UNFUSED_SCORE_DROPOUT_BYTES,
)


def shape_efficiency(m: np.ndarray, n: np.ndarray, k: np.ndarray, half_dim: float) -> np.ndarray:
    """Fraction of MAMF a (m x k) @ (k x n) GEMM reaches: prod over dims of d / (d + half_dim), with the
    accelerator's `gemm_half_efficiency_dim`."""
    return (m / (m + half_dim)) * (n / (n + half_dim)) * (k / (k + half_dim))


@dataclass(frozen=True)
class GemmRate:
    """Where GEMMs run: peak times MAMF (FLOP/s) and the accelerator's half-efficiency dimension."""

    peak_flops: float
    half_dim: float


def gemm_time(m, n, k, count, rate: GemmRate) -> np.ndarray:
    """`count` GEMMs of (m x k) @ (k x n)."""
    m, n, k = (np.maximum(np.asarray(x, dtype=np.float64), 1.0) for x in (m, n, k))
    return count * 2.0 * m * n * k / (rate.peak_flops * shape_efficiency(m, n, k, rate.half_dim))


def attention_core_time(tokens, seq_len: int, core_dim_local, peak_flops: float,
                        efficiency: float | None = None) -> np.ndarray:
    """Fused causal QK^T and AV of `tokens` queries against `seq_len` keys: PaLM/Megatron count the full
    s x s (2 * s * heads * (d_qk + d_v) per token), the kernel executes about half of it."""
    flops = 2.0 * tokens * seq_len * core_dim_local * CAUSAL_EXECUTED_FRACTION
    return flops / (peak_flops * (efficiency or ATTENTION_CORE_EFFICIENCY))


def unfused_attention_time(tokens, seq_len: int, heads_local, qk_dim: int, v_dim: int, peak_gemm: GemmRate,
                           hbm_bytes_per_s: float, dropout: bool = True) -> np.ndarray:
    """Forward of an unfused attention core: two batched GEMMs per head (QK^T, AV) at GEMM efficiency,
    plus the softmax (and the dropout, where the model has one) streaming the s x s scores through HBM."""
    qk = gemm_time(tokens, seq_len, qk_dim, heads_local, peak_gemm)
    av = gemm_time(tokens, v_dim, seq_len, heads_local, peak_gemm)
    per_score = UNFUSED_SCORE_BYTES_FORWARD - (0.0 if dropout else UNFUSED_SCORE_DROPOUT_BYTES)
    scores = tokens * seq_len * heads_local * per_score / hbm_bytes_per_s
    return qk + av + scores


def cross_entropy_time(tokens, vocab_local, hbm_bytes_per_s: float, fused: bool = False) -> np.ndarray:
    """Loss over the (vocabulary-sharded) logits, forward and backward: memory-bound, one pass per eager op or
    four where the loss is fused."""
    per_logit = CROSS_ENTROPY_FUSED_BYTES_PER_LOGIT if fused else CROSS_ENTROPY_BYTES_PER_LOGIT
    return tokens * vocab_local * per_logit / hbm_bytes_per_s


def sp_sharded_bytes_per_hidden(dropout: bool) -> float:
    """Of ELEMENTWISE_BYTES_PER_HIDDEN, the ops on the whole hidden state, which every TP rank runs on the whole
    sequence unless sequence parallelism splits it (Korthikanti et al., arXiv:2205.05198 §4, sequence
    parallelism: the layer norms and the dropouts): the two norms (read 2 + write 2 bytes each) and the two
    bias-dropout-adds after the attention and the MLP (RESIDUAL_ADD_BYTES_PER_HIDDEN, plus the mask where the model
    has hidden dropout): 22 bytes a hidden element for a GPT-3-style model, 20 without dropout."""
    return NORM_BYTES_PER_HIDDEN + 2.0 * (RESIDUAL_ADD_BYTES_PER_HIDDEN + (DROPOUT_MASK_BYTES_PER_HIDDEN if dropout
                                                                            else 0.0))


def elementwise_time(tokens, hidden: int, sp_shard, tp, hbm_bytes_per_s: float, dropout: bool) -> np.ndarray:
    """Norms, residuals, activation and dropout of one layer's forward (memory-bound): the ops on the whole hidden
    state split over the TP group only under sequence parallelism (`sp_shard` = tp there, else 1), the rest
    (the activation function on the FFN width, the per-head work) over the TP group always.  So sequence parallelism
    saves only the first part: on Korthikanti's 22B (h 6,144, TP 8, A100) 7/8 of 22 bytes a hidden element, 0.48 ms
    of a 7.7 ms layer forward at the A100's 2.04 TB/s, as its Table 4 measures (7.7 -> 7.2 ms, "Sequence
    Parallelism"); splitting all 48 bytes would save twice that."""
    sharded = sp_sharded_bytes_per_hidden(dropout)
    return tokens * hidden * (sharded / sp_shard + (ELEMENTWISE_BYTES_PER_HIDDEN - sharded) / tp) / hbm_bytes_per_s

