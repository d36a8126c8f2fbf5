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
0.65 of MAMF (about 52 % of H100 peak) stands for forward and backward together, on the FLOPs each
executes (backward counted at FUSED_ATTENTION_BACKWARD_TO_FORWARD times the forward)."""
FUSED_ATTENTION_BACKWARD_TO_FORWARD = 2.5
"""A fused (flash) attention backward executes 2.5 times its forward's FLOPs, not the 2 of a GEMM: it
recomputes the scores QK^T from the saved softmax statistics before the four gradient matmuls (five
against the forward's two); FlashAttention's own benchmark counts backward FLOPs as 2.5 x forward
(Dao-AILab/flash-attention benchmarks/benchmark_flash_attention.py, `flops`).  An unfused core keeps its
probabilities, so its backward is the ordinary 2 x."""
CAUSAL_EXECUTED_FRACTION = 0.5
"""Causal fused attention skips the blocks above the diagonal: it executes about half of the s x s
FLOPs that MFU counts (FlashAttention-2 §3.1, causal masking).  A sliding-window layer skips the keys below its
window too, and so executes its whole window for each query past the first w - 1 (Workload.causal_keys)."""
ELEMENTWISE_BYTES_PER_HIDDEN = 48.0
"""HBM bytes moved per token per hidden element per layer in a forward pass by the memory-bound ops
(norms, residual adds, activation function, dropout, bias): about two dozen 2-byte read/writes
(calibrated; the count of such ops in a Megatron GPT layer is of this order).  Of these,
`sp_sharded_bytes_per_hidden` run on the whole hidden state, replicated over the TP group unless sequence
parallelism splits them; the rest (the activation function on the FFN width, the per-head work) is already
split over the TP group (`compute.elementwise_time`)."""
NORM_BYTES_PER_HIDDEN = 8.0
"""Of ELEMENTWISE_BYTES_PER_HIDDEN, the two RMS/LayerNorms of a layer (read 2 + write 2 bytes each):
what `layernorm` recompute runs again."""
RESIDUAL_ADD_BYTES_PER_HIDDEN = 6.0
"""A bias-dropout-add after the attention or the MLP, per hidden element: read the branch's output and the residual
(2 + 2), write the sum (2) (Megatron's fused `bias_dropout_add`; no bias to read in the models that have none)."""
DROPOUT_MASK_BYTES_PER_HIDDEN = 1.0
"""The same op's dropout mask where the model trains with hidden dropout: one byte an element (Korthikanti §4)."""
CP_RING_COPY_PASSES_FORWARD = (3.5, 1.5)
"""HBM passes (read + write of the whole tensor counts one) of the rank's local query-sized and K/V-sized tensors
that ring attention's eager bookkeeping makes per CP step in a forward: Transformer Engine's `AttnFuncWithCP`
(v1.8 `pytorch/attention.py`; the p2p path Megatron-Core runs) concatenates K and V into the send buffer,
copies the half of Q or of K/V a causal step attends into contiguous tensors, zeroes the output and merges
each step's partial output into it (`flash_attn_fwd_out_correction`).  Counted from the source, about."""
CP_RING_COPY_PASSES_BACKWARD = (4.0, 5.5)
"""The same for a backward: the K/V send buffer copied again, contiguous halves of Q, the output and its
gradient, dQ copied/accumulated per step, dK and dV concatenated and accumulated (v1.8 `AttnFuncWithCP.backward`)."""
UNFUSED_SCORE_BYTES_FORWARD = 11.0
"""HBM bytes per attention score (one query, key, head) in an unfused forward: write the scores (2),
softmax read and write (4), dropout mask (1) and output (2), read by the AV GEMM (2)."""
UNFUSED_SCORE_DROPOUT_BYTES = 3.0
"""Of UNFUSED_SCORE_BYTES_FORWARD, the attention dropout's mask and output: a model trained without dropout does
not move them (PyTorch's dropout returns its input at p = 0, `_dropout_impl`), as the memory model keeps 2 bytes
per score for it instead of 5 (Korthikanti Table 2)."""
CROSS_ENTROPY_BYTES_PER_LOGIT = 52.0
"""HBM traffic per logit of the unfused vocabulary-parallel cross-entropy, forward and backward together, one
eager kernel per op (Megatron-Core core_r0.8.0 tensor_parallel/cross_entropy.py, counted): the fp32 upcast (read
2, write 4), the max (read 4), the subtraction (read 4, write 4), exp (4 + 4), the sum (4), the division into the
saved softmax (4 + 4), the backward's update and scaling by the loss gradient (4 + 4) and the cast of the
gradient to 16 bits (4 + 2)."""
CROSS_ENTROPY_FUSED_BYTES_PER_LOGIT = 28.0
"""The same with `--cross-entropy-loss-fusion` (core_r0.8.0 fusions/fused_cross_entropy.py, counted): four
jit-fused kernels, the upcast with the max (2 + 4), the subtraction with exp and the sum (4 + 4), the division (4 +
4) and the backward with its 16-bit cast (4 + 2)."""
GRAD_ACCUMULATION_BYTES_PER_PARAM = {"fused": 0.0, "autograd": 6.0, "fp32_copy": 18.0, "bf16_copy": 6.0}
"""HBM bytes per local parameter per micro-batch of each way of accumulating gradients (specs.recipe
GradAccumulation): none beyond the GEMM for Megatron's fused path; `.grad += g` in 16 bits (read 2 + 2,
write 2; not on a step's first micro-batch, which assigns); BF16_Optimizer's cast to fp32 (read 2, write 4)
and add (read 4 + 4, write 4); with its buffer in bf16 the add alone (read 2 + 2, write 2), on every micro-batch."""
AUTOCAST_WEIGHT_CAST_BYTES_PER_PARAM = 6.0
"""HBM bytes per local parameter per micro-batch of bf16 autocast over float32 weights (recipe fp32_weights_autocast):
each GEMM reads its float32 weight (4) and writes the bf16 cast (2) in forward, once a micro-batch, since each
micro-batch's forward is an autocast region of its own (flash_attn/ops/fused_dense.py FusedDenseFunc.forward:51-52,
Dao-AILab/flash-attention 0251105a; torch autocast's cast cache lives for one region); backward reads the kept cast
inside its GEMMs."""
UNSHARDED_ACCUMULATION_BYTES_PER_PARAM = {True: (6.0, 10.0), False: (0.0, 6.0)}
"""HBM bytes per stage parameter of FSDP2's unsynchronized gradient accumulation (recipe pipeline_unsharded_grads),
(a step's first micro-batch, each later one), by whether it reduces in float32: the bf16 gradient cast to the fp32
buffer (read 2, write 4; _fsdp_param.py to_accumulated_grad_if_needed), then added to it (read 2 + 4, write 4;
accumulate_unsharded_grad_if_needed); in 16 bits autograd's `.grad +=` (read 2 + 2, write 2) from the second."""
BACKWARD_TO_FORWARD = 2.0
"""Backward costs twice the forward (gradients w.r.t. inputs and weights; PTD-P §5.1)."""

# --- communication -----------------------------------------------------------------------------------
COLLECTIVE_BASE_LATENCY_S = 8.4e-6
"""NCCL 2.30 baseLat of Ring/Tree, Simple protocol (src/graph/tuning.cc)."""
NCCL_NET_OVERHEAD_S = 1.0e-6
"""The least a step of a ring that spans nodes costs, its steps inside a node too: NCCL's tuning model prices each of
an inter-node ring's steps at no less than the proxy's network overhead ("inter-node rings still have to launch
nsteps * net overhead": src/graph/tuning.cc, getNetOverhead, 1 us on Intel and other hosts, 2 us on AMD x86; NCCL
master 5067397c)."""
TP_OVERLAP_BUFFERS_AG = 6
TP_OVERLAP_BUFFERS_RS = 4
"""Userbuffers Transformer Engine's TP comm overlap allocates, one per overlapped GEMM, each the size of the layer's
whole-sequence activation: six all-gather ones (qkv_fprop, qkv_dgrad, proj_dgrad, fc1_fprop, fc1_dgrad, fc2_dgrad; FP8
under an FP8 recipe) and four reduce-scatter ones (proj_fprop, fc2_fprop, qkv_wgrad, fc1_wgrad) (NVIDIA/
TransformerEngine transformer_engine/pytorch/module/base.py initialize_ub, `add_ub` of a sample buffer of `shape` per
layer name, commit 0004dbd; later versions keep the ten).  A user trial found a plan with the overlap at 99.99 % of
HBM that left them out."""
TP_OVERLAP_WORKSPACE_BYTES = 2 * 32 * 1024**2
"""initialize_ub grows the 32 MiB cuBLAS workspace (Hopper and later) threefold, one per overlap stream
(_NUM_MAX_UB_STREAMS): 64 MiB more."""
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
ALLOCATOR_FRAGMENTATION = 0.02
"""Share of HBM lost to the caching allocator's fragmentation.  PyTorch's expandable segments
(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, set by the Megatron-Bridge performance scripts and the
MLPerf v6.0 NVIDIA configs) grow one mapping in pages instead of caching fixed blocks, so little is lost;
recalibrated (from 0.05) so that every production layout of both calibration files fits: the tightest,
Megatron-Bridge's GPT-OSS-120B on 64 B200 at micro-batch 4, needs 97.5 % of what the 2 % leaves."""
LOGITS_BYTES_PER_ELEMENT = 6
"""LM-head output kept for the loss: bf16 logits plus their fp32 copy in the cross-entropy."""
LOGITS_BYTES_EAGER_FLOAT32 = 12
"""The same for an eager PyTorch cross-entropy on a float32 upcast (recipe loss_eager_float32: torchtitan's
`F.cross_entropy(pred.float())` not compiled): log_softmax's backward holds its saved float32 output (4), nll_loss's
float32 gradient of it (4) and the float32 input gradient it writes (4) at once; the 16-bit logits are freed by then
(torchtitan's step deletes `pred` before backward, train.py), and the upcast copy after the forward.  Counted from
PyTorch's autograd formulas (log_softmax saves its result; its backward `_log_softmax_backward_data` allocates the
gradient); a user trial measured torchtitan's December 2024 benchmarks (eager loss) 20-36 % above the 6-byte price,
and 4-8 % off once the 6 bytes missing here were added."""
LOGITS_BYTES_CHUNK_LOOP_HELD = 2
"""Beside LOGITS_BYTES_EAGER_FLOAT32 where the loss runs in chunks (torchtitan 0.3.0's ChunkedLossWrapper): the loop
keeps the chunk's 16-bit logits referenced (`logits = lm_head(h_chunk)`) through `chunk_loss.backward()`
(components/loss.py, ChunkedLossWrapper.__call__)."""

# --- optimizer -------------------------------------------------------------------------------------
OPTIMIZER_BYTES_PER_PARAM_STEP = 36
"""HBM traffic of one fused Adam step per parameter: read and write fp32 master, m, v (24), read the
gradient (2-4), write bf16 weights (2), plus the fp32 gradient upcast; memory-bound."""

GRAD_BUFFER_BYTES_PER_PARAM = {True: 4.0, False: 2.0}
"""Bytes one pass over the DDP gradient buffer moves per parameter, by grad_reduce_fp32 (the buffer's dtype:
Megatron-Core `grad_reduce_in_fp32`, else the parameters' 16-bit dtype)."""

# --- host: launch, sync and Python time (MoE and recipe terms) --------------------------------------
HOST_S_PER_KERNEL = 19.5e-6
"""Host time per kernel an eager PyTorch/Megatron step issues (Python, the op's dispatch, allocator, the
CUDA launch): "a simple torch.empty ... will generate a few microseconds of overhead on the host side",
and host-bound gaps between kernels are the largest loss of the un-graphed DeepSeek-V3 baseline
(Megatron-Core DeepSeek-V3 GB200 write-up §2).  Fitted on the MoE calibration group's x86 hosts (H100,
H800, B200); Grace hosts (GB200/GB300 trays) carry their own fitted value in the cluster file."""
KERNELS_ATTN_FORWARD = 20
"""Kernels of one attention block's forward (norm, projections, RoPE, core, residual, TE bookkeeping);
backward issues BACKWARD_KERNELS_PER_FORWARD times as many."""
KERNELS_MLP_FORWARD = 8
"""Kernels of one dense MLP's forward (norm, two GEMMs, activation, residual)."""
KERNELS_ROUTER_FORWARD_UNFUSED = 72
"""Kernels of one MoE router's forward (gating, top-k, scores, aux-loss bookkeeping) without the router
fusion (write-up §2.1.4)."""
KERNELS_ROUTER_FORWARD_FUSED = 31
"""The same with `--moe-router-fusion`: 72 -> 31 kernels (write-up §2.1.4)."""
KERNELS_DISPATCH_FORWARD = 20
"""Permute, dispatch, combine and unpermute kernels of one MoE layer's forward (the token dispatcher's
own bookkeeping included); partial CUDA graphs leave them eager, since the dispatch follows the host sync."""
KERNELS_PER_EXPERT_FORWARD = 5
"""Kernels per local expert in one FP8 forward: the MXFP8 grouped GEMM is "multi-stream + cuBLAS" (write-up
§1 item 3): fc1, the activation slice and fc2 per expert, and the stream event record/wait around them.
Fitted within that count on the published B200 DeepSeek-V3 pair of Megatron-Bridge 26.04/26.04.01: pp16 x
ep8 (32 local experts) 2815 tokens/s/GPU against pp8 x vpp2 x ep32 (8 local experts) 3328 (3 gives the wrong
order, 5 gives 24.4 s against 19.4 s, published 23.3 s against 19.7 s).  A 16-bit grouped GEMM is one
Transformer Engine/CUTLASS launch for all local experts (`--moe-grouped-gemm`), counted in the dispatch
kernels."""
KERNELS_PER_EXPERT_FP8_QUANT = 6
"""FP8 adds, per local expert, the quantisation of its two GEMM inputs with the scale-factor allocations
(`torch.zeros`) and swizzles the write-up found as "a large number of small, fragmented kernels" before the
expert GEMMs (§2.1.2-2.1.3)."""
KERNELS_PER_EXPERT_FP8_QUANT_FUSED = 2
"""With the MoE fusions (fused MXFP8 buffer allocation, one swizzle kernel for several inputs; write-up
§2.1.2-2.1.3): one quantisation per input."""
BACKWARD_KERNELS_PER_FORWARD = 2.0
"""Backward issues about twice the forward's kernels (grad-input and grad-weight GEMMs)."""
HOST_SYNC_S = 500e-6
"""One host sync inside a layer's work: the CPU waits for the GPU to drain, then the GPU idles while the
queue refills.  Dropless MoE copies the tokens-per-expert counts to the host in every MoE layer's forward
(device-to-host sync, write-up §3.1); DeepSpeed's checkpoint-boundary synchronize does it around every
checkpointed chunk (CHECKPOINT_SYNC_PASSES).  Fitted (0.5 ms) on the MoE group; its error moves by under a
point from 0.1 to 0.8 ms, so it is the least certain constant here."""
CHECKPOINT_SYNC_PASSES = 2
"""Passes per micro-batch over a stage's checkpointed chunks that synchronize (forward, and backward with its
recompute) under DeepSpeed activation checkpointing's `synchronize_checkpoint_boundary` (GPT-NeoX
`synchronize_each_layer`, Megatron-DeepSpeed `--synchronize-each-layer`): it calls torch.cuda.synchronize() at the
start and end of each chunk's forward and of its backward (EleutherAI/DeeperSpeed eb7f5cff, the 0.3.15 fork GPT-NeoX-20B
trained on, runtime/activation_checkpointing/checkpointing.py lines 377, 554, 581, 676).  A chunk's start follows
the previous chunk's end with no GPU work between (pipe/module.py runs the chunks back to back), so a pass over N
chunks drains the GPU at N + 1 points (before the first chunk, between chunks, after the last), each an idle gap
of HOST_SYNC_S."""
MASK_COPY_BYTES_PER_TRANSFER = 7.5
"""HBM bytes per mask element around each send or receive of `pipeline_sends_mask`, the mean of the two: the sender
casts the bool mask to half and back (read 1 + write 2, read 2 + write 1 = 6); the receiver clones what arrived
(2 + 2), casts it back to bool (2 + 1) and the forward pass clones its inputs again (1 + 1 = 9)
(DeepSpeed runtime/pipe/engine.py _exec_send_activations, _exec_recv_activations, _exec_forward_pass, the same at
DeeperSpeed eb7f5cff and DeepSpeed 0.19.8).  A middle stage does both per micro-batch: 15."""
CUDA_GRAPH_PARTIAL_BYTES = 2 * GiB
"""Memory of partial graphs' private pool and static buffers: "typically adding a few GB"
(Megatron-Bridge docs/training/cuda-graphs.md, Memory Impact)."""
CUDA_GRAPH_FULL_BYTES = 6 * GiB
"""Full-iteration graphs: the largest footprint, "over 10 GB" with PP > 1 (same page); MLPerf v6.0
pages its stash to fit (MOE_PAGED_STASH)."""

# --- MoE dispatch ---------------------------------------------------------------------------------
A2A_EFFICIENCY = {"alltoall": 0.5, "allgather": 0.5, "deepep": 0.95, "hybridep": 0.76}
"""Share of a level's collective bandwidth each dispatcher's all-to-all reaches (NVLink inside a host, or the
network; MULTI_HOST_NVLINK_A2A_EFFICIENCY across NVL72 trays).  DeepEP normal kernels: 153/158 GB/s of H800's
160 GB/s NVLink and 43-58 GB/s of 50 GB/s RDMA (deepseek-ai/DeepEP, docs/legacy.md "Performance").  NCCL's
all-to-all with Megatron's per-expert chunks: fitted on the MoE group (0.5; with the explicit permutes
priced apart).  HybridEP: fitted on the GB200 rows, 0.76 of the NVL72 ring bandwidth, which is itself 0.76
of line rate (gb200-nvl72.yaml)."""
CP_A2A_EFFICIENCY = 1.0
"""Share of a level's collective bandwidth Ulysses' all-to-alls reach: one `all_to_all_single` of equal chunks per
tensor (deepspeed/sequence/layer.py single_all_to_all; Transformer Engine's a2a context parallelism), which NCCL
runs at its ring bus bandwidth, not the 0.5 of Megatron's per-expert MoE chunks (A2A_EFFICIENCY): "NCCL can get an
effective NVLink bandwidth of 370GB/s, which you can observe as BusBw when running non-allreduce operations"
(sjeaugey, NVIDIA/nccl-tests#212, H100), the nvlink4 level's collective bandwidth; across nodes one NIC's
(NETWORK_A2A_EFFICIENCY)."""
NETWORK_A2A_EFFICIENCY = {"alltoall": 1.0, "allgather": 1.0}
"""Share of the network level's collective bandwidth NCCL's all-to-all reaches on the bytes that leave the
scale-up domain, where it differs from A2A_EFFICIENCY.  NCCL's maintainers on nccl-tests `alltoall_perf`
across nodes: it "cannot aggregate the bandwidth of multiple NICs, so the performance you should see is the
performance of a single NIC", and "CX-7 NICs at NDR rate (400Gbps) should achieve up to 48-49GB/s per NIC"
(NVIDIA/nccl-tests#267), with busBw = algBw (n-1)/n (NVIDIA/nccl-tests#130): each GPU's own NIC at the rate
its ring collectives reach (the cluster's nic_collective_efficiency), not the 0.5 NCCL's all-to-all reaches
over NVLink.  The value is the citation's, not a fit; the one calibration run it checks is the B200 GPT-OSS
EP64 row (8 nodes), the only run whose NCCL dispatch crosses a network."""
DISPATCHER_SMS = {"alltoall": 0, "allgather": 0, "deepep": 24, "hybridep": 16}
"""SMs the dispatch kernels hold while they run: DeepEP 24 (DeepEP example `Buffer.set_num_sms(24)`;
DeepSeek-V3 §3.2.2: 20 SMs), HybridEP fewer (write-up §2.5); NCCL's channels are counted in the generic
overlap slowdown."""
PERMUTE_BYTES_PER_ELEMENT = 8.0
"""HBM bytes per token-copy element of the explicit global permute and unpermute the NCCL all-to-all
dispatcher needs (read and write, forward and backward: 2 + 2 + 2 + 2); the flex dispatchers fuse it
into the communication kernel (write-up §2.1.1)."""

# --- overlaps ----------------------------------------------------------------------------------------
EP_OVERLAP_HIDDEN = 0.95
"""Share of the EP all-to-all the 1F1B A2A overlap hides behind the other micro-batch's compute
(`--overlap-moe-expert-parallel-comm`); partial: the write-up found its net effect negative on GB200
where the all-to-all is already short (§3.2) because it adds host work (EP_OVERLAP_HOST_SHARE), so the
hiding itself can be near complete; fitted."""
EP_OVERLAP_HOST_SHARE = 0.15
"""Extra host time the A2A overlap's two-stream scheduling adds per MoE layer (write-up §3.2)."""
TP_OVERLAP_HIDDEN = 0.8
"""Share of TP all-gather/reduce-scatter hidden by --tp-comm-overlap (TE userbuffers pipelining the
GEMM in chunks; the first and last chunk stay exposed)."""

# --- FP8 ---------------------------------------------------------------------------------------------
FP8_QUANT_BYTES_PER_ELEMENT = {"tensorwise": 6.0, "blockwise": 4.0, "mxfp8": 4.0, "rowwise": 6.0}
"""HBM bytes per element of each FP8 GEMM input quantised: read 2, write 1 row-wise and 1 column-wise
(for the transposed wgrad operand); per-tensor scaling reads once more for the amax (Transformer
Engine current scaling), and row-wise scaling reads once more for the column-wise scales of the transposed
operand (torchao float8 rowwise: each operand cast along both axes, each axis its own amax)."""
FP8_WEIGHT_CAST_BYTES_PER_ELEMENT = {"tensorwise": 5.0, "rowwise": 5.0, "mxfp8": 3.0, "blockwise": 3.0}
"""HBM bytes per weight element of one cast to FP8 where the recipe recasts weights every pass (recipe
fp8_recasts_weights): read 2 and write 1, plus a read for the scale where it is one amax over a whole row or
tensor (torchao Float8Linear's tensorwise and rowwise: the amax, then the cast); an MXFP8 or blockwise scale is
its 32- or 128-element block's, computed in the same pass."""
MXFP8_REQUANTISED_BYTES_PER_ELEMENT = 6.0
"""HBM bytes per element of an MXFP8 GEMM input that is kept 16-bit for backward (recipe fp8_saves_16bit_inputs):
torchao's MXFP8Linear casts the input along its rows in forward (read 2, write 1: torchao 0.18.0
prototype/moe_training/mxfp8_linear.py:123-130) and the saved 16-bit input again along its columns in backward (read
2, write 1: mxfp8_linear.py:108, 234-243), where Transformer Engine writes both in one pass (4)."""
BLOCKWISE_FP8_HOPPER_EFFICIENCY = 0.95
"""Blockwise FP8 on Hopper promotes partial sums to FP32 on CUDA cores every 128 elements
(DeepSeek-V3 §3.3.2), so its GEMMs run a little below per-tensor FP8: DeepGEMM reports 1350+ of 1979
dense FP8 TFLOP/s on H800 (deepseek-ai/DeepGEMM README), 0.68 of peak against the 0.709 MAMF of
per-tensor FP8 (ml-engineering MAMF table): 0.95 of it."""

ROWWISE_FP8_EFFICIENCY = 0.82
"""Row-wise scaled FP8 GEMMs (torchao `rowwise`, CUTLASS row-wise `torch._scaled_mm`) run below per-tensor FP8:
torchao's float8 README (pytorch/ao, "Training benchmarks", NVIDIA H100) measures torchtitan Llama3-8B on 8xH100
(seq 8192, batch 1, FSDP2, per-op SAC, torch.compile) at 6150 tokens/s in bf16, 7689.5 tensorwise and 6768
rowwise: rowwise runs at 0.880 of tensorwise.  Its benchmark script runs each recipe with its best settings:
tensorwise with FSDP's float8 all-gather (the weight cast on the shard), rowwise with each pass casting the
gathered weight again (recipe fp8_recasts_weights).  0.82 of the FP8 GEMM efficiency gives that ratio for the same
job priced so here (tests/test_emit_torchtitan_run.py; 0.78 before the weight casts were priced); fitted on
Hopper and applied elsewhere for want of a measurement."""

MXFP8_GEMM_EFFICIENCY = 0.95
"""MXFP8 GEMM kernels (1x32 block scales, E8M0) run below per-tensor FP8 ones on the same Blackwell tensor cores:
Transformer Engine's GEMM profiling guide (NVIDIA/TransformerEngine docs/examples/gemm_profiling/gemm_profiling.rst,
commit 8f2e635, "Autocast vs Pre-quantized") times the 12 GEMMs of a 5B layer (hidden 4096, FFN 16384, 15872 tokens)
on a B300 with the inputs quantised beforehand, kernel time only: 6.812 ms per layer with FP8 current scaling against
7.161 ms with MXFP8, 0.951.  The quantisation itself is priced apart (FP8_QUANT_BYTES_PER_ELEMENT: MXFP8's is the
cheaper, as the guide's autocast times show, 8.984 against 9.147 ms).  Megatron-Bridge 25.11 publishes the same
rows both ways and MXFP8 is the slower: Llama3 8B 29521 against 30624 tokens/s/GPU on 8 B200, 29789 against 31508 on
GB200, 36108 against 37556 on GB300 (docs/performance-summary-archive.md, the parentheses)."""

# --- routing -------------------------------------------------------------------------------------------
REAL_ROUTING_IMBALANCE = 1.2
"""Tokens on the busiest EP rank over the mean with real data.  Forced balance (1.0) is what every
vendor MoE table measures (`--moe-router-force-load-balancing`, "only for benchmark").  Global MaxVio of
the auxiliary-loss-free balancer is 0.04 (arXiv:2408.15664 Table 2) per expert over a validation set,
a lower bound per step and rank; MLPerf v6.0's real-data DeepSeek-V3 sizes its expert stash at 1.5x
the mean (MOE_PAGED_STASH_BUFFER_SIZE_FACTOR_CUDA).  1.2 sits between; an engineering default."""

# --- pipeline schedules ---------------------------------------------------------------------------
ZERO_BUBBLE_FRACTION = 1.0 / 3.0
"""ZB-H1 leaves about a third of 1F1B's bubble (Qi et al. 2023, arXiv:2401.10241, §3)."""

# --- memory ----------------------------------------------------------------------------------------------
BYTES_OPTIMIZER_BF16_MOMENTS = 8
"""fp32 master weights with BF16 Adam moments (precision-aware optimizer, DeepSeek-V3 §3.3)."""
FP8_WEIGHT_COPY_BYTES = 1
"""FP8 GEMMs keep a 1-byte quantised copy of every weight beside the 16-bit one, unless the primary
weights are FP8 (write-up §1 item 6)."""
FP8_BLOCK_SCALE_BYTES_PER_ELEMENT = 1.0 / 32.0
"""Scale bytes a block-scaled FP8 tensor carries per element through a gather: MXFP8 one E8M0 byte per 32 values,
Transformer Engine's 1D blockwise one float32 per 128 (4 / 128); Transformer Engine gathers them beside the data
(v2.9 distributed.py _all_gather_mxfp8, _all_gather_fp8_blockwise).  A per-tensor scale is one float: nothing."""
HOST_UNBOUND_SLOWDOWN = 1.19
"""Host time per kernel of a process not bound to its GPU's CPU cores and NUMA node, relative to a bound
one: binding (bindpcie) gave +70.6 TFLOP/s/GPU, 10 % of the step, on the host-bound DeepSeek-V3 GB200
run (write-up §2.4, ladder 691 -> 762); fitted."""
UNFUSED_PERMUTE_SLOWDOWN = 10.0
"""The permute kernel before its fusion ran far below HBM speed when top-k is much smaller than the expert
count: Transformer Engine PR 1927 gave "up to a 10x unit speedup" (write-up §2.1.1; with the scale
allocation fusion, +35 TFLOP/s/GPU on the DeepSeek-V3 GB200 ladder)."""
HOST_GPU_OVERLAP_SHARPNESS = 3.0
"""How sharply GPU and host time overlap (cost.step._overlapped): infinite is a hard max (the CPU either
keeps the GPU fed or it does not); a finite p lets both sides count when they are close, as the
DeepSeek-V3 GB200 ladder shows: every host-side step (fusions, binding, graphs) and every GPU-side step
(DeepEP, less recompute) moved the step time on the same un-graphed layout (write-up §3).  Fitted."""
MULTI_HOST_NVLINK_A2A_EFFICIENCY = {"alltoall": 0.3, "allgather": 0.3, "deepep": 0.43}
"""All-to-all across the trays of one NVL72 rack, where it differs from A2A_EFFICIENCY.  DeepEP: "about 400 GB/s
dispatch and 190 GB/s combine" with 24 SMs at EP32 against 900 GB/s unidirectional (write-up §2.2.1), i.e. 295
of the 684 GB/s ring bandwidth the NVL72 level carries (gb200-nvl72.yaml collective_efficiency 0.76).  NCCL's:
fitted on the GB200 ladder's dispatcher steps (494 -> 566 TFLOP/s with DeepEP, 830 -> 944 with HybridEP)."""
