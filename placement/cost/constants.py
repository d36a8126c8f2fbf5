"""Named constants of the cost model, each with its value and its source or calibration reason.

Calibrated constants were fitted once against the Megatron-LM calibration rows (PTD-P Table 1 and
Korthikanti Table 5, `placement validate`); they describe the hardware and software stack, never a
single run.  Hardware numbers (peak FLOP/s, bandwidths, MAMF) live in hardware/*.yaml, not here.
"""

GiB = 1024**3

# --- bytes ----------------------------------------------------------------------------------------
BYTES_PER_ACTIVATION = 2
"""bf16/fp16 activations, also under FP8 GEMMs (Transformer Engine keeps activations 16-bit)."""
BYTES_WEIGHT = 2
BYTES_GRAD = 2
BYTES_OPTIMIZER = 12
"""Mixed-precision Adam: fp32 master weights, momentum and variance (ZeRO §3, K = 12): 16 B/param total."""

# --- compute ---------------------------------------------------------------------------------------
ATTENTION_CORE_EFFICIENCY = 0.65
"""Fused (flash) attention throughput on the FLOPs it really executes, as a fraction of MAMF:
FlashAttention-2 reaches 50-73 % of A100 peak in forward and less in backward (Dao 2023,
arXiv:2307.08691 §4), FlashAttention-3 about 75 % of H100 BF16 peak in forward (arXiv:2407.08608);
0.65 of MAMF (about 52 % of H100 peak) stands for forward and backward together."""
CAUSAL_EXECUTED_FRACTION = 0.5
"""Causal fused attention skips the blocks above the diagonal: it executes about half of the s x s
FLOPs that MFU counts (FlashAttention-2 §3.1, causal masking)."""
ELEMENTWISE_BYTES_PER_HIDDEN = 48.0
"""HBM bytes moved per token per hidden element per layer in a forward pass by the memory-bound ops
(norms, residual adds, activation function, dropout, bias): about two dozen 2-byte read/writes
(calibrated; the count of such ops in a Megatron GPT layer is of this order)."""
UNFUSED_SCORE_BYTES_FORWARD = 11.0
"""HBM bytes per attention score (one query, key, head) in an unfused forward: write the scores (2),
softmax read and write (4), dropout mask (1) and output (2), read by the AV GEMM (2)."""
CROSS_ENTROPY_BYTES_PER_LOGIT = 24.0
"""HBM traffic per logit of the vocabulary-parallel cross-entropy, forward and backward together
(fp32 upcast, max, exp-sum, loss, gradient: about six 4-byte passes)."""
BACKWARD_TO_FORWARD = 2.0
"""Backward costs twice the forward (gradients w.r.t. inputs and weights; PTD-P §5.1)."""

# --- communication -----------------------------------------------------------------------------------
COLLECTIVE_BASE_LATENCY_S = 8.4e-6
"""NCCL 2.30 baseLat of Ring/Tree, Simple protocol (src/graph/tuning.cc)."""
TP_COMM_OVERLAP = 0.0
"""Fraction of TP/SP collectives hidden behind GEMMs.  0: Megatron's default runs them in the critical
path (tp-comm-overlap is opt-in)."""
EP_COMM_OVERLAP = 0.0
"""Fraction of MoE all-to-all hidden; 0 without DeepSeek-style dual-batch overlap."""
OVERLAP_COMPUTE_SLOWDOWN = 0.189
"""Compute runs this much slower while a collective overlaps it (NCCL kernels hold SMs and HBM
bandwidth): 18.9 % on average over GPT and Llama training on A100/H100/MI250/MI210, Lee et al. 2025,
"Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep Learning",
arXiv:2507.03114 (abstract)."""
DP_OVERLAP_FRACTION = 1.0
"""Share of the last micro-batch's backward that the bucketed gradient reduction can hide behind
(Megatron --overlap-grad-reduce, PyTorch DDP buckets)."""

# --- memory ------------------------------------------------------------------------------------------
MEMORY_RESERVE_BYTES = 2 * GiB
"""CUDA context, cuBLAS/NCCL workspaces and communication buffers, per GPU."""
ALLOCATOR_FRAGMENTATION = 0.05
"""Share of HBM lost to the caching allocator's fragmentation."""
LOGITS_BYTES_PER_ELEMENT = 6
"""LM-head output kept for the loss: bf16 logits plus their fp32 copy in the cross-entropy."""

# --- optimizer -------------------------------------------------------------------------------------
OPTIMIZER_BYTES_PER_PARAM_STEP = 36
"""HBM traffic of one fused Adam step per parameter: read and write fp32 master, m, v (24), read the
gradient (2-4), write bf16 weights (2), plus the fp32 gradient upcast; memory-bound."""
