"""Host term: the CPU time a rank spends issuing one layer's kernels, and where it adds to GPU time.

An eager PyTorch step costs host time per kernel (Python, op dispatch, allocator, launch).  While the
GPU has queued work the CPU runs ahead and this time hides; it shows when the GPU drains faster than
the CPU refills it (small per-layer GEMMs, many local experts, FP8 quantisation kernels), and at every
host sync.  Megatron's dropless MoE syncs the tokens-per-expert counts to the host in every MoE
layer's forward (Megatron-Core DeepSeek-V3 GB200 write-up §3.1), so the CPU cannot run ahead of an MoE
layer: each MoE forward costs max(GPU, host) plus the sync.  Backward needs no sync and overlaps as a
whole.  CUDA graphs replay captured kernels with one launch: partial graphs (attention, router,
preprocess) cut part of the host time, full-iteration graphs all of it and need static shapes (no
sync).  This is why lower TP (more GPU work per kernel) or a larger micro-batch helps a host-bound
MoE job, which the README of Megatron-Core MoE recommends for CPU overhead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.cost import constants as C
from placement.cost.context import Ctx
from placement.cost.layer import KERNELS_PER_EXPERT_BIAS
from placement.specs.recipe import CudaGraphs
from placement.specs.recipe import RecomputeModule as M

GRAPHED_HOST_SHARE = 0.02
"""Host time left of a captured region: one graph launch instead of its kernels."""


@dataclass(frozen=True)
class HostTerm:
    """Host seconds per layer per micro-batch (forward + backward + recompute forwards)."""

    dense_s: np.ndarray
    moe_s: np.ndarray
    forward_share: float
    """Share of a layer's host time spent in its forward (the part a sync serializes)."""
    syncs_per_moe_layer: np.ndarray
    """Host syncs per MoE layer per micro-batch (0 with full graphs or a static capacity)."""


def host_term(x: Ctx, graphs: CudaGraphs, ep_overlap: bool) -> HostTerm:
    t = x.topo.cluster.host_s_per_kernel or C.HOST_S_PER_KERNEL
    if not x.recipe.cpu_affinity:
        t *= C.HOST_UNBOUND_SLOWDOWN
    w = x.w
    fwd_units = 1.0 + C.BACKWARD_KERNELS_PER_FORWARD
    recompute = x.full * x.full_layers_share
    attn_k = C.KERNELS_ATTN_FORWARD * (fwd_units + np.maximum(recompute, x.module(M.CORE_ATTN)))
    mlp_k = C.KERNELS_MLP_FORWARD * (fwd_units + np.maximum(recompute, x.module(M.MLP) | x.module(M.MLP_UP)))
    # partial graphs capture attention, the router and the MoE preprocess (`--cuda-graph-scope attn
    # moe_router moe_preprocess`); the dispatch, the experts and the shared experts stay eager (write-up §2.3)
    graphed = GRAPHED_HOST_SHARE if graphs is not CudaGraphs.NONE else 1.0
    eager = GRAPHED_HOST_SHARE if graphs is CudaGraphs.FULL else 1.0
    dense = (attn_k + mlp_k) * graphed * t
    if w.num_experts:
        per_expert = 0
        if x.fp8 is not None:
            quant = C.KERNELS_PER_EXPERT_FP8_QUANT_FUSED if x.recipe.moe_fusions else C.KERNELS_PER_EXPERT_FP8_QUANT
            per_expert = C.KERNELS_PER_EXPERT_FORWARD + quant
        if w.linear_bias and not x.recipe.fused_model_ops:  # the expert-bias loop (cost.layer.eager_model_ops)
            per_expert = per_expert + KERNELS_PER_EXPERT_BIAS
        router = C.KERNELS_ROUTER_FORWARD_FUSED if x.recipe.moe_fusions else C.KERNELS_ROUTER_FORWARD_UNFUSED
        eager_fwd = (C.KERNELS_DISPATCH_FORWARD + per_expert * (w.num_experts / x.ep)
                     + (C.KERNELS_MLP_FORWARD if w.shared_ffn_total else 0))
        units = fwd_units + np.maximum(recompute, x.module(M.MOE))
        moe_k = router * units * graphed + eager_fwd * units * eager
        if ep_overlap:
            moe_k = moe_k * (1.0 + C.EP_OVERLAP_HOST_SHARE)
        moe = attn_k * graphed * t + moe_k * t
        static = graphs is CudaGraphs.FULL or x.recipe.moe_capacity_factor is not None
        syncs = np.where(static, 0.0, 1.0 + np.maximum(recompute, x.module(M.MOE)))
    else:
        moe = dense
        syncs = np.zeros_like(x.tokens)
    return HostTerm(dense_s=np.broadcast_to(dense, x.tokens.shape), moe_s=np.broadcast_to(moe, x.tokens.shape),
                    forward_share=1.0 / fwd_units, syncs_per_moe_layer=np.broadcast_to(syncs, x.tokens.shape))
