"""Recipe: what the framework runs besides the parallel degrees.

The same degrees run 20-100 % apart depending on the MoE dispatcher, the communication overlaps, CUDA
graphs, the FP8 recipe, which modules are recomputed, MTP and the pipeline layout (Megatron-Core
DeepSeek-V3 GB200 write-up: 494 -> 970 TFLOP/s/GPU on one layout, docs/discussions/
deepseek-v3-gb200-optimization).  They are part of a job: validated here once, priced by the cost
model, searched by `plan` where they are a choice, and reported under the PLAN JSON's `recipe` key.

Names follow Megatron-Core's arguments where one exists (`--moe-token-dispatcher-type`,
`--recompute-modules`, `--pipeline-model-parallel-layout`, `--mtp-num-layers`, `--fp8-recipe`).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Final

from pydantic import Field, field_validator, model_validator

from placement.specs._base import Frozen
from placement.specs.training import AttentionKernel


class Dispatcher(StrEnum):
    """How MoE tokens reach their experts (Megatron `--moe-token-dispatcher-type`, `--moe-flex-dispatcher-backend`)."""

    ALLTOALL = "alltoall"
    """NCCL all-to-all: a token is copied once per routed expert rank, over whatever link that rank is on."""
    ALLGATHER = "allgather"
    """All-gather every token to every EP rank, each keeps its own (Megatron's `allgather`)."""
    DEEPEP = "deepep"
    """DeepEP (flex dispatcher): a token crosses the network once per destination node, then fans out
    over NVLink once per destination GPU (DeepEP README, "normal kernels")."""
    HYBRIDEP = "hybridep"
    """HybridEP (flex dispatcher): DeepEP's dedup on multi-node NVLink (GB200) with fewer SMs."""


class CudaGraphs(StrEnum):
    NONE = "none"
    PARTIAL = "partial"
    """TE/MCore graphs of the parts before the dropless sync: attention, router, MoE preprocess
    (`--cuda-graph-scope attn moe_router moe_preprocess`)."""
    FULL = "full"
    """Full-iteration graphs (`--cuda-graph-impl local`, MLPerf v6.0): needs a static expert capacity, no
    host sync left."""


class Fp8Recipe(StrEnum):
    TENSORWISE = "tensorwise"
    """Per-tensor current/delayed scaling (Hopper and Blackwell)."""
    BLOCKWISE = "blockwise"
    """1x128 activations, 128x128 weights (DeepSeek-V3; dequantisation on CUDA cores on Hopper)."""
    MXFP8 = "mxfp8"
    """1x32 blocks with E8M0 scales, dequantised inside Blackwell tensor cores."""
    ROWWISE = "rowwise"
    """torchao's dynamic row-wise scaling (one scale per row of each GEMM operand, the CUTLASS row-wise
    `torch._scaled_mm`): what torchtitan 0.3.0's Float8 converters run, and the only FP8 they have
    (components/quantization/float8.py:58, `recipe_name: Literal["rowwise", "rowwise_with_gw_hp"]`)."""


class RecomputeModule(StrEnum):
    """Megatron-Core `--recompute-modules` names (selective granularity), and torchtitan's per-op policy."""

    CORE_ATTN = "core_attn"
    MLA_UP_PROJ = "mla_up_proj"
    MLP = "mlp"
    MOE_ACT = "moe_act"
    LAYERNORM = "layernorm"
    MOE = "moe"
    SHARED_EXPERTS = "shared_experts"
    PER_OP = "per_op"
    """torchtitan's per-op selective activation checkpointing (0.3.0 distributed/activation_checkpoint.py
    SelectiveAC, its `activation-checkpoint:selective`; 0.2.x `selective_ac_option = "op"`): in each transformer
    block it saves the outputs of the matmuls, the attention kernel and the reduce-scatter / all-to-all
    collectives, except every second matmul in the block's order (its policy counts aten.mm and aten.linear; the
    MoE router's gate is always recomputed and not counted; a biased projection, addmm, is always saved), and
    recomputes everything else in backward: the other matmuls (Llama: wo and w3 of wqkv, wo, w1, w3, w2), every
    element-wise op, the routed experts' grouped GEMMs (torch._grouped_mm is not among PyTorch's
    compute-intensive ops it saves) and the all-gathers or all-reduces around recomputed matmuls, and the
    context-parallel K/V all-gather.  A policy of its own: not combined with Megatron's module names
    (cost.layer.per_op_gemms)."""
    QKV_PROJ = "qkv_proj"
    """The attention's input projections (query, key and value; MLA's down- and up-projections), rerun in backward
    because their outputs are not saved: JAX rematerialization under a MaxText remat policy that does not name
    query_proj/key_proj/value_proj/qkv_proj (save_out_proj, or `custom`).  Not a Megatron-Core module."""
    OUT_PROJ = "out_proj"
    """The attention's output projection, rerun in backward (its output, with the residual the input of the MLP's
    norm, is not saved): MaxText remat policies that do not name out_proj (save_qkv_proj, qkv_proj_offloaded,
    `custom`).  Not a Megatron-Core module."""
    MLP_UP = "mlp_up"
    """The MLP's up-projection(s) and its activation function, dense and expert, rerun in backward: MaxText remat
    policies that do not name mlpwi/mlpwi_0/mlpwi_1 (save_dot_except_mlp, save_dot_except_mlpwi,
    save_dot_with_context_except_mlp, save_qkv_proj, save_out_proj).  JAX reruns only what backward needs, and the
    down-projection's output is not needed, so unlike Megatron's `mlp` the down-projection is not rerun.  Not a
    Megatron-Core module."""


MEGATRON_MODULES = (RecomputeModule.CORE_ATTN, RecomputeModule.MLA_UP_PROJ, RecomputeModule.MLP,
                    RecomputeModule.MOE_ACT, RecomputeModule.LAYERNORM, RecomputeModule.MOE,
                    RecomputeModule.SHARED_EXPERTS)
"""The `--recompute-modules` names Megatron-Core takes (TransformerConfig refuses any other)."""


class PipelineSchedule(StrEnum):
    ONE_F_ONE_B = "1f1b"
    """Megatron's 1F1B; interleaved when vpp > 1."""
    DUALPIPE = "dualpipe"
    """DeepSeek-V3's DualPipe: bidirectional, forward and backward chunks overlap EP all-to-all
    (arXiv:2412.19437 §3.2.1)."""
    ZERO_BUBBLE = "zero_bubble"
    """Zero-bubble pipeline (Qi et al. 2023, arXiv:2401.10241), as DeepSeek-V2 ran."""


class GradBuckets(StrEnum):
    """How the data-parallel reduction under DDP and ZeRO-1 groups a rank's gradients into buckets, each reduced once
    its last gradient is ready in the step's last backward: what of the gradient waits for the end of the backward
    (cost.dp.tail_bucket_params)."""

    BY_SIZE = "by_size"
    """In reverse parameter order, each bucket closed once it holds `ddp_bucket_params` parameters: Megatron-Core's
    DDP and distributed optimizer (core_r0.8.0 distributed/param_and_grad_buffer.py:296-341), PyTorch DDP
    (`bucket_cap_mb`) and DeepSpeed's ZeRO (`reduce_bucket_size`) alike.  The bucket holding layer 0 and the
    embedding's wait for the end (the default)."""
    PER_LAYER = "per_layer"
    """One bucket per decoder layer, in reverse, with every parameter outside the layers (the embedding, the final
    norm, the LM head) added to the last, layer 0's: NeMo 1's Apex DistributedFusedAdam (`distributed_fused_adam`,
    MegatronGPTModel.configure_optimizers builds `distributed_adam_buckets` so: "Initialize a bucket for each
    Transformer layer", buckets.reverse(), buckets[-1].extend(the rest)).  Layer 0, the embedding and the head wait
    for the end."""


class GradAccumulation(StrEnum):
    """How each micro-batch's weight gradients reach the gradient buffer the optimizer reads."""

    FUSED = "fused"
    """The weight-gradient GEMM accumulates into the buffer in its own epilogue (Megatron-LM
    `--gradient-accumulation-fusion`, its default; Transformer Engine `fuse_wgrad_accumulation`): no pass of
    its own (the default)."""
    AUTOGRAD = "autograd"
    """PyTorch's AccumulateGrad adds each micro-batch's 16-bit gradient into the parameter's `.grad` after the
    first (read 2 + 2, write 2 bytes per parameter): DeepSpeed's PipelineEngine with its ZeRO-1 optimizer, which
    reduces only at the step boundary (GPT-NeoX)."""
    FP32_COPY = "fp32_copy"
    """DeepSpeed's BF16_Optimizer: after every micro-batch's backward each bf16 gradient is cast to fp32 and added
    into the fp32 gradient (`update_hp_grads`: read 2, write 4, read 4 + 4, write 4 = 18 bytes per parameter),
    one parameter at a time (deepspeed/runtime/bf16_optimizer.py and pipe/engine.py `_exec_backward_pass`, from
    "bf16+pipeline parallelism" #1801 for BigScience's BLOOM to today's releases)."""
    BF16_COPY = "bf16_copy"
    """The same BF16_Optimizer where its gradient buffer is bf16: current DeepSpeed at ZeRO stage 0 under a pipeline
    with `data_types.grad_accum_dtype` unset, which defaults to the model's dtype (DeepSpeed 0.19.8
    runtime/engine.py get_data_types, and `_do_optimizer_sanity_check`, which warns "BF16 gradient accumulation is
    not safe numerically"): `hp_grad.add_(lp.grad.to(hp_grad.dtype))` with no cast, read 2 + 2, write 2 bytes per
    parameter (bf16_optimizer.py `_update_hp_grad`), into a 2-byte buffer beside the bf16 .grad."""


class CpCommType(StrEnum):
    P2P = "p2p"
    """Ring attention: K/V blocks passed around the CP ring, each hop hidden behind the attention of the
    block before (Megatron/Transformer Engine `--cp-comm-type p2p`, the default)."""
    ALL_GATHER = "all_gather"
    """K and V of the whole sequence all-gathered before the attention core, dK/dV reduce-scattered after:
    the collective sits on the critical path (Llama 3 §3.3.2 "Context parallelism": "the all-gather
    communication latency is exposed in the critical path"; Megatron `--cp-comm-type all_gather`)."""
    A2A = "a2a"
    """Ulysses: Q, K and V all-to-all'd from sequence shards to head shards before the attention core, and its output
    back after, each rank running the whole sequence for heads / cp heads (DeepSpeed-Ulysses, Jacobs et al. 2023,
    arXiv:2309.14509 §3: "an all-to-all ... on the query, key and value" and one on the output, 4 N h / P per link;
    Megatron `--cp-comm-type a2a`, "Like DeepSpeed Ulysses"; Megatron-DeepSpeed `--ds-sequence-parallel-size`;
    accelerate's `cp_backend: deepspeed`).  The all-to-alls sit on the critical path, forward and backward."""


class EinsumDispatch(StrEnum):
    NONE = "none"
    """Tokens reach their experts by permutation (Megatron-Core's token dispatchers, torchtitan): no GEMM."""
    MICRO_BATCH = "micro_batch"
    """DeepSpeed-MoE (deepspeed/moe/sharded_moe.py MOELayer): one-hot dispatch and combine masks over every token of
    the rank's micro-batch, applied as GEMMs (`einsum("sec,sm->ecm")` and `einsum("sec,ecm->sm")`, each a
    torch.matmul of the s x E*C mask)."""
    SEQUENCE = "sequence"
    """MaxText's dense MoE path (sparse_matmul False, layers/moe.py dense_matmul with a capacity factor): the same
    masks per sequence (`BSM,BSEC -> EBCM`, `EBCM,BSEC -> BSM`), the capacity ceil(seq * top_k / E) * factor."""


LAYOUT_TOKENS: Final = frozenset("EtmL")
"""Megatron pipeline layout symbols: E embedding, t transformer layer, m MTP layer, L loss (LM head)."""
_LAYOUT_CHARS = re.compile(r"^[EtmL|()*0-9 ,]*$")


class Recipe(Frozen):
    attention_kernel: AttentionKernel = AttentionKernel.FLASH
    """How the framework runs the attention core: today's stacks fuse it (flash); the 2019-2022 Megatron runs
    materialised the scores (unfused; Megatron `--attention-backend unfused`)."""
    moe_dispatcher: Dispatcher = Dispatcher.ALLTOALL
    dispatch_fp8: bool = False
    """Forward dispatch moves FP8 activations (DeepSeek-V3 §3.3; needs an FP8 recipe); combine stays 16-bit."""
    cuda_graphs: CudaGraphs = CudaGraphs.NONE
    moe_einsum_dispatch: EinsumDispatch = EinsumDispatch.NONE
    """How an MoE layer's tokens reach their experts where it is by one-hot mask GEMMs, and over which group of tokens
    (EinsumDispatch): each of the two costs 2 s E C h FLOPs for a group of s tokens, E experts of capacity
    C = s k f / E, so 2 s^2 k f h, quadratic in the group (cost.layer)."""
    fused_model_ops: bool = True
    """The model's own element-wise extras run fused: YaRN RoPE, a partial RoPE's concatenation back into the head,
    the clamp of a clamped SwiGLU, expert output biases, bias-dropout-add with biased projections.  False prices
    them as the eager ops Megatron-Core 0.15-0.17 runs for GPT-OSS, or GPT-NeoX runs for a partial RoPE and,
    without `bias_dropout_fusion`, its biases (cost.layer.eager_model_ops; plain RoPE's rotation counts as fused
    either way); Megatron-Core fused the clamp later ("Complete clamped SwiGLU across expert paths", #5940,
    2026-08), so True is today's default."""
    moe_fusions: bool = True
    """Permute, router and quantisation fusions (`--moe-permute-fusion --moe-router-fusion`, TE fused
    MXFP8 allocation): fewer, larger kernels per MoE layer."""
    tp_comm_overlap: bool = False
    """TP all-gather / reduce-scatter split into chunks hidden behind the GEMMs (`--tp-comm-overlap`, TE
    userbuffers)."""
    tp_async_backward: bool = True
    """Without `tp_comm_overlap`, each column-parallel linear's backward launches the collective of its input
    gradient (all-reduce, or reduce-scatter under sequence parallelism) asynchronously and computes its weight
    gradient beside it: Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication (on by default since
    NVIDIA/Megatron-LM 3f65246911 of 2021-09-02, `--no-async-tensor-model-parallel-allreduce` turning it off;
    megatron/mpu/layers.py at 2755bcb8 of 2022-06; always on in Megatron-Core, tensor_parallel/layers.py
    `allreduce_dgrad`).  False: the collective runs on its own before the backward moves on, as in Megatron-LM
    before it (the PTD-P runs of 2021), GPT-NeoX and BigScience's Megatron-DeepSpeed (`copy_to_model_parallel_region`,
    whose backward is a plain all-reduce), and torchtitan's DTensor tensor parallelism (cost.comm.column_backward)."""
    ep_comm_overlap: bool = False
    """EP all-to-all of one micro-batch hidden behind another's compute (`--overlap-moe-expert-parallel-comm`,
    1F1B A2A overlap)."""
    delay_wgrad: bool = False
    """Expert weight-gradient GEMMs delayed to hide the backward combine (`--delay-wgrad-compute`)."""
    grad_accumulation: GradAccumulation = GradAccumulation.FUSED
    """How micro-batch gradients are accumulated (GradAccumulation): in the GEMM (Megatron), by autograd into
    16-bit `.grad`, or copied into fp32 after each backward (DeepSpeed's BF16_Optimizer)."""
    cp_comm_type: CpCommType = CpCommType.P2P
    """How context parallelism moves K and V: a ring hidden behind the attention core, an exposed all-gather, or
    Ulysses' exposed all-to-alls over heads (CpCommType)."""
    dp_overlap: bool = True
    """Gradient reduce-scatter and parameter all-gather overlap compute (`--overlap-grad-reduce
    --overlap-param-gather`; FSDP prefetch)."""
    grad_buckets: GradBuckets = GradBuckets.BY_SIZE
    """How the DDP / ZeRO-1 gradient reduction buckets the gradients (GradBuckets)."""
    ddp_bucket_params: int | None = Field(default=None, ge=1)
    """Parameters per gradient bucket of the data-parallel reduction under DDP and ZeRO-1 (Megatron-LM
    `--ddp-bucket-size`, Megatron-Core DistributedDataParallelConfig.bucket_size).  None: Megatron-Core's default,
    max(40,000,000, 1,000,000 x the dp x cp group's size) "to ensure that chunks used in NCCL ring-reduce
    implementations are large enough to remain bandwidth-bound" (core_r0.8.0 distributed/distributed_data_parallel.py,
    over dp alone there; core_v0.19.0 training.py resolve_ddp_bucket_size, over dp x cp).  NeMo 2's and
    Megatron-Bridge's comm-overlap configs set 128 Mi (134,217,728) with the distributed optimizer at dp > 1
    (NeMo lightning/pytorch/callbacks/megatron_comm_overlap.py, Megatron-Bridge training/comm_overlap.py
    _get_optimizer_overlap_cfgs).  The buckets fill in reverse parameter order and each closes once it reaches the
    size (core_r0.8.0 distributed/param_and_grad_buffer.py:296-341), so the bucket holding the rank's first layer
    closes only when the step's last backward ends: `cost.dp.tail_bucket_params`."""
    param_gather_overlap: bool = True
    """ZeRO-1/2's all-gather of the updated weights after the optimizer step hides behind the next forward
    (Megatron `--overlap-param-gather`, under dp_overlap).  Off, it runs before that forward: Megatron-LM's distributed
    optimizer without `--overlap-param-gather` (its default), and DeepSpeed 0.19.8's ZeRO-1/2, which all-gathers inside
    `step()` (runtime/zero/stage_1_and_2.py step -> all_gather_dp_groups, a blocking all_gather_into_tensor,
    runtime/utils.py)."""
    align_param_gather: bool = True
    """Under an interleaved schedule (vpp > 1) with ZeRO-1's gather behind the forward (param_gather_overlap), each
    rank dispatches its first two model chunks' whole gathers when the schedule starts, at the same time across the
    pipeline, output end first (Megatron-Core `align_param_gather`: core_r0.9.0 pipeline_parallel/schedules.py:
    685-688 and distributed_data_parallel.py start_param_sync, the buckets in reverse parameter order), so chunk 0's
    first forward waits for chunk 0's whole gather; the later chunks' gathers run beside earlier chunks' forwards.
    Megatron-LM's command line has it on under virtual stages from core_r0.9.0 (`--no-align-param-gather`; before
    4e3840535b of 2024-08-23 nothing aligned, `--delay-param-gather` was an opt-in), and NeMo 2's comm-overlap
    callback (from 1d5de59460, 2024-09-06) and Megatron-Bridge's set it with vpp > 1, dp > 1 and the distributed
    optimizer; megatron-core's DistributedDataParallelConfig default is False.  False: the forward pre-hook gathers
    each bucket behind the one before, and only the first bucket's gather waits (Megatron before core_r0.9.0).
    Prices nothing at vpp 1, outside ZeRO-1, or without param_gather_overlap."""
    fp8_recipe: Fp8Recipe | None = None
    """FP8 scaling recipe when precision is fp8 (None: the accelerator's default, mxfp8 on Blackwell,
    tensorwise on Hopper)."""
    fp8_params: bool = False
    """Primary weights kept in FP8 only (`--fp8-param-gather`): 1 byte per weight instead of 2 + 1."""
    grad_reduce_fp32: bool = False
    """Gradients accumulated and reduce-scattered in fp32: 4 bytes per parameter in the gradient buffer and on
    the wire.  Megatron-LM sets it under --bf16 (`accumulate_allreduce_grads_in_fp32`, DDP config
    `grad_reduce_in_fp32`), FSDP2 with `reduce_dtype=float32` (torchtitan's default `mixed_precision_reduce`)
    likewise; False is ZeRO's 16-bit gradient (2 bytes)."""
    grad_buffer_passes: int = Field(default=3, ge=0, le=8)
    """Passes over the rank's whole gradient buffer every step at ZeRO-0/1 (whose buffer holds every local
    parameter's gradient), reads and writes counted, each moving the buffer once through HBM beside the compute (4
    bytes a parameter under grad_reduce_fp32, else 2).  Megatron-Core's DDP zeroes the buffer before each step (1
    write: `zero_grad_buffer` -> `grad_data.zero_()`, core_r0.8.0 distributed/param_and_grad_buffer.py:508,
    core_v0.19.0 :1615) and scales each bucket by 1/dp before its reduction (1 read + 1 write: `grad_data *=
    gradient_scaling_factor`, core_r0.8.0 :122-123, core_v0.19.0 :660-661; skipped under
    `--ddp-average-in-collective` or `--calculate-per-token-loss`, whose factor is 1): 3, the defaults of
    DistributedDataParallelConfig, which NeMo 1 and Megatron-Bridge's performance recipes keep
    (perf_recipes/_common.py sets check_for_nan_in_grad False).  Its NaN check reads each bucket once more for its
    norm (check_for_nan_in_grad: core_r0.8.0 :109-117, core_v0.19.0 check_grads :339-346): 4, Megatron-LM's
    command line, which sets it from `--check-for-nan-in-loss-and-grad`, on unless
    `--no-check-for-nan-in-loss-and-grad` (training.py:450 in r0.8.0, :1989 in v0.19.0), and NeMo 2's
    MegatronStrategy default.  Frameworks without Megatron-Core's buffer say 0 (their own gradient passes are
    not priced)."""
    grad_all_reduce: bool = False
    """Under ZeRO-1 the whole gradient is all-reduced, not reduce-scattered, before each rank updates its shard and
    all-gathers the weights: twice the gradient traffic.  DeepSpeed's BF16_Optimizer (bf16 with ZeRO stage 0, which
    shards the optimizer state) reduces with `buffered_allreduce_fallback` (`runtime/pipe/engine.py`
    `_bf16_reduce_grads`), and so did DeepSpeed 0.3's PipelineEngine for its ZeRO-1 (`_exec_reduce_grads`, the
    DeeperSpeed GPT-NeoX-20B trained on).  No effect at other ZeRO stages (ZeRO-0 all-reduces anyway)."""
    fp8_saves_16bit_inputs: bool = False
    """Under FP8 each GEMM keeps its 16-bit input for backward and quantises it again there (torchao Float8Linear:
    `save_for_backward(input_hp, weight_hp_t)`), not the 1-byte copy Transformer Engine keeps: no activation memory
    saved by FP8 (torchtitan's own benchmark, benchmarks/llama3_h100_202412_torchtitan.md Table 1: 77.0 GiB in BF16
    against 76.8 with Float8)."""
    fp8_lm_head: bool = False
    """Under FP8 the LM head's GEMMs (forward and both backward) run FP8 too, their input quantised like every other
    FP8 GEMM's: torchtitan 0.3.0's llama3_8b_mxfp8 converts every linear layer, lm_head included (its
    MXFP8LinearConverter has no fqns, components/quantization/mx.py:55-60, 82-83).  Off (the default), the head
    stays 16-bit, as Transformer Engine's FP8 autocast leaves Megatron-Core's output layer and torchtitan's Float8
    configs filter it out (filter_fqns ["lm_head"])."""
    fp8_recasts_weights: bool = False
    """Under FP8 each GEMM casts its 16-bit weight to FP8 in every forward and again for the backward's input
    gradient, every micro-batch, and keeps no FP8 copy: torchao's Float8Linear (float8/float8_linear.py
    matmul_with_hp_or_float8_args casts the weight inside each forward and backward) and MXFP8Linear, which
    torchtitan runs (constants.FP8_WEIGHT_CAST_BYTES_PER_ELEMENT, cost.layer.fp8_weight_recasts).  Transformer
    Engine casts once a step and caches the 1-byte copy across micro-batches (`is_first_microbatch`; False)."""
    sp_saves_gathered_inputs: bool = False
    """Under sequence parallelism the attention's and the MLP's projections keep their gathered, whole-sequence
    input for backward, not the sequence shard: torchtitan redistributes each block's input to Replicate before its
    projections (0.3.0 models/common/decoder_sharding.py in_dst_shardings Replicate; 0.2.x PrepareModuleInput), and
    autograd keeps that gathered tensor for the weight gradients, where Megatron keeps the shard and gathers it
    again in backward (Korthikanti et al. 2022 §4.2.2)."""
    tp_gathers_16bit: bool = False
    """Under FP8 with sequence parallelism the tensor-parallel all-gathers move 16-bit activations: torchtitan's
    rowwise Float8 runs plain ColwiseParallel, whose gather happens in high precision before the FP8 cast (v0.2.2
    models/llama3/infra/parallelize.py:83-86; 0.3.0 has only the rowwise recipes).  Off (the default), Transformer
    Engine quantises first and gathers FP8, 1 byte an element: the norm's output before the column-parallel GEMMs
    (v1.11 module/layernorm_linear.py:125-164; v2.9 :246-265), its re-gather in backward (v2.9 :669-674) and the
    row-parallel linears' output gradient (v1.11 module/base.py grad_output_preprocess; v2.9 the same), while the
    reduce-scatters stay 16-bit (cost.comm.tp_term)."""
    pipeline_unsharded_grads: bool = False
    """Under pipeline parallelism, ZeRO-2/3 reduces the gradients once per step, after the stage's last backward, and
    keeps the unsharded gradient in its reduce width until then (4 bytes per parameter of the stage in float32),
    with the parameters left unsharded after each backward.  torch.distributed.pipelining's PipelineStage with FSDP2
    (torchtitan) calls set_requires_gradient_sync(False) and set_reshard_after_backward(False) before every backward
    but the last (stage.py backward_maybe_with_nosync, PyTorch 2.10), and FSDP2 accumulates the unsynchronized
    gradient unsharded in reduce_dtype (_fsdp_param.py to_accumulated_grad_if_needed); the step's reduce-scatter then
    runs after all the stage's compute.  Megatron-FSDP and DeepSpeed reduce every micro-batch (False).  Under DDP
    (ZeRO-0) the same call leaves DDP's reduction hooks on in each stage's last backward only (no_sync before the
    others), so under interleaving each chunk's all-reduce runs beside its own last backward, where Megatron's
    --align-grad-reduce launches it after that backward (cost.dp)."""
    reshard_after_backward: bool = False
    """ZeRO-2 frees its gathered weights after each micro-batch's backward and gathers them again for the next
    micro-batch's forward: m gathers a step, not one.  FSDP2's default (fully_shard keeps reshard_after_backward on;
    PyTorch 2.10 FSDPParamGroup.post_backward reshards when it is), which torchtitan 0.3.0 keeps through gradient
    accumulation: its step runs each accumulation micro-batch's forward and backward in turn (trainer.py:905-907)
    and turns resharding off only for the chunked loss's head (components/loss.py:730).  DeepSpeed's ZeRO-2 and
    Megatron-FSDP's optim_grads never shard the weights, so they gather nothing between micro-batches (False).
    Under pipeline_unsharded_grads the weights stay gathered anyway."""
    zero0_as_fsdp: bool = False
    """ZeRO-0 runs as FSDP2 over one-rank shard groups, its data-parallel ranks HSDP replicas: torchtitan 0.3.0
    applies fully_shard whatever the shard degree ("with shard_degree=1 it is a no-op for the all-gather but still
    installs the MixedPrecisionPolicy", models/llama3/parallelize.py:69-89), where 0.2.x ran DDP or nothing
    (v0.2.2 models/llama3/infra/parallelize.py:125-152).  Priced as ZeRO-3 over a shard of one (cost.context
    `priced_batch`): the float32 weights are the master copy, each unit is cast to 16 bits when FSDP2 unshards it
    (FSDPParamGroup.wait_for_unshard copies at one rank), the float32 gradients are all-reduced over the replicas
    (dp_reduce_every_microbatch says how often), and under a pipeline they accumulate unsharded until each stage's
    last backward (pipeline_unsharded_grads)."""
    dp_reduce_every_microbatch: bool = False
    """The all-reduce over data-parallel replicas (FSDP2's over HSDP replicas: ZeRO-3 with dp_shard below dp, or a
    ZeRO-0 run as FSDP2; DDP's at ZeRO-0) runs in every micro-batch's backward, not once a step, each beside that
    backward only (both wait for it before the backward returns).  FSDP2 reduces in each post-backward unless
    set_requires_gradient_sync or set_requires_all_reduce turns it off (PyTorch 2.10 FSDPParamGroup.post_backward,
    foreach_reduce's all_reduce_group), and torchtitan 0.3.0's accumulation loop calls neither (trainer.py:905-930;
    only the chunked loss's head, components/loss.py:730; pytorch/torchtitan#1929 reports it, and #4505, after 0.3.0,
    calls set_requires_all_reduce on the last micro-batch only); torchtitan before 0.3.0 runs DDP at ZeRO-0 and calls
    no no_sync either (v0.2.2 train.py).  ZeRO-2/3's reduce-scatter is priced every micro-batch anyway; under
    pipeline_unsharded_grads torch's PipelineStage defers the reduction to each stage's last backward."""
    optimizer_over_replicas: bool = False
    """Under HSDP (ZeRO-3 with dp_shard below dp), the optimizer state and the stored master weights are sharded over
    the replicas too, not only over the shard group: MaxText's `shard_optimizer_over_data` beside a mesh whose
    fsdp, context or expert axis already shards the weights adds the `data` axis to the AdamW moments' sharding
    (utils/sharding.py add_data_to_sharding, called from utils/maxtext_utils.py get_abstract_state) and gives the
    stored float32 weights that sharding (maybe_update_params_sharding_with_opt; AI-Hypercomputer/maxtext e591f30).
    The weights the step computes with are gathered over the replicas to the shard group's sharding once a step, in
    bf16 before a gradient-accumulation loop (utils/gradient_accumulation.py:93-103), in float32 without one, and
    held through the step; so the replicas reduce-scatter the gradients and all-gather those weights, where plain
    HSDP all-reduces the gradients."""
    expert_w1_rerun: bool = False
    """Under selective recompute with named saves (`remat_saves_named_only`), the routed experts' second
    up-projection (w1) reruns in backward and its output is not kept, where the policy keeps mlpwi_1 but not
    moe_mlpwi_1: MaxText 0.2.5's sparse_matmul path (base.yml's default) names that output moe_mlpwi_1 only (the
    wheel's layers/moe.py:2916, :2942; w0 and wo carry both names, :2915, :3229), so `minimal` and the other
    named policies rerun it.  The audit reads it from a MaxText config's remat_policy, and placement's MaxText
    files that cannot name it (MLA models: `custom` has no kv_proj) are re-priced with it.  Priced as one more
    expert GEMM forward (per token-expert pair, hidden x expert_ffn / etp) a MoE layer, its output freed; no
    effect where `mlp_up` reruns both up-projections anyway."""
    optimizer_over_replicas_beside_fsdp: bool = True
    """`optimizer_over_replicas` holds also where the HSDP shard group has ranks beyond the expert ranks (dp_shard
    above ep: fsdp ranks), as Megatron-FSDP's `--outer-dp-sharding-strategy optim` shards over any instances.  Off:
    only where the expert (or, at ep 1, context) ranks are the whole shard group (dp_shard <= ep), and such a layout
    with fsdp ranks runs plain HSDP, the optimizer over the shard group alone: MaxText 0.2.5 shards over data through
    `shard_optimizer_over_data` only, which it refuses at start-up beside an fsdp axis (the 0.2.5 wheel's
    configs/types.py:5605-5621), so placement's files leave it out there (a MaxText framework row; `plan --framework
    maxtext` decides it per layout: cost.memory.over_replicas)."""
    activation_func_fp8_input_store: bool = False
    """The MLP activation's input (the up-projection output) kept for backward as FP8, 1 byte instead of 2
    (Megatron-Core TransformerConfig `activation_func_fp8_input_store`, fused SwiGLU only; DeepSeek-V3 §3.3.2
    caches the SwiGLU input in FP8).  Works under BF16 training too."""
    optimizer_state_bf16: bool = False
    """Adam moments in BF16 (`--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16`): 8 bytes/param of state, not 12."""
    optimizer_master_weights: bool = True
    """The optimizer keeps a float32 master copy of the 16-bit weights (4 of its 12 bytes a parameter).  False: it
    updates the 16-bit weights themselves, as MaxText does with weight_dtype bfloat16 (no master; its AdamW moments
    take mu_dtype, which follows weight_dtype: configs/base.yml mu_dtype, AI-Hypercomputer/maxtext e591f30cb).  No
    effect under fp32_weights, whose float32 weights are the master."""
    norms_fused: bool = True
    """Each norm runs fused into the projection after it, so `layernorm` recompute (Megatron's
    `--recompute-modules layernorm`) frees only a norm that is a module of its own: Megatron-Core's Transformer
    Engine layer spec puts the attention's and a dense MLP's norm inside TELayerNormColumnParallelLinear and keeps
    IdentityOp in their place (core_v0.19.0 models/gpt/gpt_layer_specs.py:145, :157), and the layer recomputes a norm
    only when it is not IdentityOp (transformer/transformer_layer.py:451, :499); MLA's input norm and an MoE layer's
    pre-MLP norm, which the router reads, are modules of their own (gpt_layer_specs.py:295, :157).  The fused GEMM
    keeps the norm's output for its backward.  False where every norm is its own op (MaxText's `minimal` remat
    policy reruns them all)."""
    remat_saves_named_only: bool = False
    """Selective recompute is JAX rematerialization under a named-save policy (MaxText's `remat_policy`: each decoder
    layer under jax.checkpoint with jax.checkpoint_policies.save_only_these_names, layers/nnx_decoders.py:1160
    get_remat_policy and :1904, AI-Hypercomputer/maxtext e591f30cb): backward keeps each layer's input and the
    tensors the policy names, nothing else; every unnamed value (the norms' inputs and outputs, the residual sums,
    the MoE's permuted tokens, the MLP activation's output) is rerun from them.  Each module the recompute does not
    rerun keeps its named outputs: query/key/value (`qkv_proj`), the attention output and its log-sum-exp
    (`context`, `core_attn`), `out_proj`, and the up-projections with the down-projection's output (mlpwi_0,
    mlpwi_1, mlpwo: `mlp_up`).  False: the modules keep what Megatron-Core's and PyTorch's autograd keep
    (Korthikanti et al. Table 2)."""
    fp32_weights: bool = False
    """The weights live in float32 and are themselves the optimizer's master copy; each layer casts them to its
    16-bit compute dtype at use (MaxText 0.2.5: configs/base.yml `weight_dtype` float32 (line 194) beside `dtype`
    bfloat16; its gradients `grad_dtype` float32 (line 125); AdamW's `mu_dtype` inherits `weight_dtype`
    (line 1123, configs/pyconfig.py:346)).  A parameter then holds 4 bytes of weight, 4 of gradient and 8 of
    optimizer state (the two moments; no separate master), each sharded as its ZeRO stage shards it, where the
    16-bit-weights recipe holds 2 + 2 or 4 + 12.  Under ZeRO-1/2 (`shard_optimizer_over_data`) MaxText shards the
    stored weights as the optimizer state (utils/sharding.py maybe_update_params_sharding_with_opt) and gathers them
    for the step: cast to bf16 once before the gradient-accumulation loop (utils/gradient_accumulation.py:96-103),
    in float32 without one: 2 (or 4) more bytes a parameter, whole, through the step."""
    fp32_weights_autocast: bool = False
    """The float32 weights (`fp32_weights`) are torch's own parameters under bf16 autocast (PyTorch Lightning's
    `precision: bf16`), as the FlashAttention-2 rows run them: each GEMM casts its weight to bf16 in forward and keeps
    that copy for its backward (flash_attn/ops/fused_dense.py FusedDenseFunc.forward:51-66, Dao-AILab/flash-attention
    0251105a; torch's autocast caches the cast of a leaf weight likewise), 2 bytes a weight held whole from the
    micro-batch's forward to its backward (one micro-batch's: a pipeline's in-flight micro-batches each casting theirs
    is not priced); and under ZeRO-1/2 the weights stay whole on every rank, only the optimizer's moments sharded,
    every rank's updated shard sent to the others in float32 once a step, accumulation loop or not: torch's
    `ZeroRedundancyOptimizer` steps its shard and broadcasts the parameters themselves from each rank
    (torch/distributed/optim/zero_redundancy_optimizer.py `_sync_params`, `_broadcast_params_from_rank`).  Off:
    MaxText's float32 weights, which XLA casts inside its compiled step, stored sharded under
    `shard_optimizer_over_data` with a copy gathered for the step (bf16 before an accumulation loop).  No effect
    without fp32_weights or at ZeRO-3 (FSDP's own mixed precision, priced as fp32_weights alone)."""
    recompute_modules: tuple[RecomputeModule, ...] = ()
    """Modules recomputed under selective recompute; the layout's `selective` with none named is core_attn."""
    recompute_num_layers: int | None = Field(default=None, ge=1)
    """Full recompute of only this many layers per virtual stage (`--recompute-num-layers`, block method)."""
    mtp_layers: int = Field(default=0, ge=0, le=8)
    """Multi-token-prediction layers; they sit on the last pipeline stage with their own LM head and loss."""
    pipeline_layout: str | None = None
    """Megatron `--pipeline-model-parallel-layout`, e.g. `Et|(tt|)*30L`: one `|`-separated group per virtual
    stage, in virtual-stage order."""
    account_for_embedding: bool = False
    """`--account-for-embedding-in-pipeline-split`: the embedding counts as a layer of the first stage."""
    account_for_loss: bool = False
    """`--account-for-loss-in-pipeline-split`: the loss counts as a layer of the last stage."""
    pipeline_schedule: PipelineSchedule = PipelineSchedule.ONE_F_ONE_B
    pipeline_p2p_whole: bool = False
    """Each TP rank sends the tensor it holds, unpartitioned, forward and back between pipeline stages, even under
    pipeline_p2p_scatter: DeepSpeed's PipelineEngine with the config's `pipeline.pipe_partitioned` and
    `pipeline.grad_partitioned` both false (v0.12.3, c2074b34, on; true by default).  Without sequence parallelism
    that is the whole activation from every TP rank; with it each rank's own sequence shard, the 1/tp share."""
    pipeline_p2p_scatter: bool = False
    """Without sequence parallelism each TP rank still sends only its 1/tp share between pipeline stages, and the
    receiver all-gathers it over the TP group: DeepSpeed's PipelineEngine under TP (`runtime/pipe/engine.py`
    PartitionedTensor; always since microsoft/DeepSpeed e2fdd254 of 2021-09-29, and from v0.12.3 unless the
    config says otherwise) and Megatron-LM's `scatter_gather_tensors_in_pipeline` (on by default from 2021 until
    Megatron-Core's own pipeline communication replaced it in 39b83c7953 of 2023-01, which never read the flag).
    False (Megatron-Core, NeMo 2, Megatron-Bridge, torchtitan): a stage sends the tensor its TP plan leaves, the
    sequence-parallel shard, or without sequence parallelism the whole activation from every TP rank
    (megatron-core 0.19.2 `pipeline_parallel/schedules.py` get_tensor_shapes divides the sequence by the TP size
    only under `config.sequence_parallel`)."""
    pipeline_grads_whole: bool = False
    """Activations go forward in 1/tp shares but each TP rank sends the whole gradient back: DeepSpeed's
    PipelineEngine before 2021-09-29 (`is_grad_partitioned = False` until microsoft/DeepSpeed e2fdd254, "Big science
    related changes"; the DeeperSpeed GPT-NeoX-20B trained on), or `pipeline.grad_partitioned: false` (v0.12.3 on)."""
    pp_comm_overlap: bool = True
    """Under an interleaved schedule (vpp > 1), each stage's send of a chunk's output and receive of the next chunk's
    input run beside that chunk's forward or backward, and only what outlasts it is exposed: Megatron-LM's
    `overlap_p2p_comm` (`--no-overlap-p2p-communication` turns it off), added in f9283c5a8a (2023-05-31) and on by
    default since 4eeff55d1f (2023-10-12); core_r0.8.0 `megatron/training/arguments.py`:254-277 and core_v0.19.0
    :1001-1016 set it off without virtual stages, and the schedule then posts batched send/receive pairs and waits
    on them.  Megatron-Bridge and NeMo 2 set it with vpp > 1 (Bridge v0.4.2 `training/comm_overlap.py`:453-457).
    False: every transfer exposed (Megatron before 2023-10, or turned off; the frameworks that do not run it:
    frameworks.py)."""
    pipeline_p2p_blocking: bool = False
    """Each send and each receive between pipeline stages is a blocking call of its own, run one after another:
    DeepSpeed's PipelineEngine issues RecvActivation, SendGrad, SendActivation and RecvGrad as separate
    instructions (`runtime/pipe/schedule.py` TrainSchedule; "The communication is blocking and must be paired",
    its SendActivation docstring) over `runtime/pipe/p2p.py` send/recv with `async_op` False (torch.distributed
    broadcast in 2-rank groups before torch 1.8, send/recv after).  A stage with neighbours on both sides so spends
    four transfer times per micro-batch, where Megatron pairs each send with a receive in one batched call
    (`send_forward_recv_backward`, `batch_isend_irecv`) and spends two; a two-stage pipeline's end stages spend
    two against Megatron's one.  Megatron-DeepSpeed, GPT-NeoX and DeepSpeed pipeline jobs."""
    pipeline_sends_mask: bool = False
    """Every forward send between pipeline stages also carries the s x s attention mask, whole from each TP rank:
    GPT-NeoX's layers return (hidden_states, attention_mask) (megatron/model/transformer.py
    ParallelTransformerLayerPipe; the mask is [1, 1, s, s], megatron/utils.py get_attn_mask), and DeepSpeed's
    PipelineEngine sends every tensor a stage returns, the mask cast to 16 bits for NCCL for a module named
    GPT2ModelPipe (runtime/pipe/engine.py `has_attention_mask`, _exec_send_activations; the gradient sends drop
    it).  2 s^2 bytes per micro-batch whatever its size, 8 MiB at s = 2048, 2 GiB at s = 32,768, plus the casts
    and copies around each send and receive (constants.MASK_COPY_BYTES_PER_TRANSFER), and s^2 bytes kept per
    micro-batch in flight (cost.memory).  Megatron-DeepSpeed under DeepSpeed keeps its causal mask out of the
    pipe (pretrain_gpt.py sets pretrain_causal_attention), Megatron-LM and torchtitan send hidden states only."""
    cross_entropy_fusion: bool = False
    """Fused vocab-parallel cross-entropy (`--cross-entropy-loss-fusion`): no fp32 copy of the logits is kept."""
    loss_eager_float32: bool = False
    """The loss is PyTorch's cross-entropy on a float32 upcast of the logits, run eagerly: torchtitan's
    `cross_entropy_loss` (`F.cross_entropy(pred.flatten(0, 1).float(), ...)`, components/loss.py) where nothing
    compiles it (torch.compile only with compile.enable and "loss" in compile.components, from 08b8b244; before it
    with training.compile, except from e8977b00, 2024-12-18, to bbb1b616, 2025-04-02, when it never was).  Autograd
    keeps log_softmax's float32 output for backward, and that backward holds it, its float32 gradient and the input's
    float32 gradient at once: the memory model prices cost.constants.LOGITS_BYTES_EAGER_FLOAT32 a logit, not the 6
    of Megatron's loss, which works in place on one float32 copy (cost.memory).  Its time is about that of
    Megatron's unfused loss (cost.constants.CROSS_ENTROPY_BYTES_PER_LOGIT)."""
    cpu_affinity: bool = True
    """Each rank's process bound to the CPU cores and NUMA node of its GPU and NIC (`bindpcie`, `numactl`):
    unbound processes issue kernels slower (Megatron-Core DeepSeek-V3 GB200 write-up §2.4: +70 TFLOP/s/GPU)."""
    cuda_launch_blocking: bool = False
    """The job runs with `CUDA_LAUNCH_BLOCKING=1` in its environment: every kernel launch returns only when the
    kernel has finished (CUDA's debugging switch, "disables asynchronous kernel launches", CUDA C Programming
    Guide, Asynchronous Concurrent Execution).  The CPU can no longer run ahead, so each kernel's host time adds
    to its GPU time, and no communication kernel overlaps compute.  BigScience's BLOOM-176B launch script
    exports it (bigscience-workshop/bigscience train/tr11-176B-ml/tr11-176B-ml.slurm)."""
    checkpoint_sync: bool = False
    """DeepSpeed activation checkpointing synchronizes the device around every checkpointed chunk
    (`synchronize_checkpoint_boundary`; GPT-NeoX `synchronize_each_layer`, Megatron-DeepSpeed
    `--synchronize-each-layer`): chunks + 1 idle refills per pass (forward, backward) per micro-batch
    (constants.CHECKPOINT_SYNC_PASSES), each constants.HOST_SYNC_S; nothing under `cuda_launch_blocking`.  Only
    with full recompute (nothing is checkpointed otherwise).  GPT-NeoX-20B trained with it on (configs/20B.yml)."""
    checkpoint_interval: int = Field(default=1, ge=1, le=1024)
    """Layers DeepSpeed checkpoints as one chunk (`pipeline.activation_checkpoint_interval`; GPT-NeoX
    `checkpoint_num_layers`, Megatron-DeepSpeed `--checkpoint-num-layers`): one saved input per chunk, and backward
    rebuilds a whole chunk's activations at once (cost.memory); it also sets how often `checkpoint_sync`
    synchronizes.  Under full recompute only."""
    loss_chunks: int = Field(default=1, ge=1, le=1024)
    """Chunks the LM head and loss run in, each chunk's forward and backward before the next (torchtitan 0.3.0's
    ChunkedLossWrapper, num_chunks 8 in every config: components/loss.py): the logits and their float32 copy held
    at once are one chunk's, 1/loss_chunks of the micro-batch's (cost.memory); the FLOPs are the same."""
    routing_imbalance: float | None = Field(default=None, ge=1.0, le=64.0)
    """Tokens on the busiest expert rank over the mean.  1.0 is force-balanced routing (every vendor MoE
    benchmark table, `--moe-router-force-load-balancing`); None is real data, priced at
    cost.constants.REAL_ROUTING_IMBALANCE."""
    moe_capacity_factor: float | None = Field(default=None, gt=0.0, le=64.0)
    """Token dropping at this capacity factor (`--moe-expert-capacity-factor`); None is dropless."""

    @field_validator("recompute_modules", mode="before")
    @classmethod
    def _modules(cls, v):
        if isinstance(v, str):
            v = [x for x in re.split(r"[,\s]+", v) if x]
        if isinstance(v, (list, tuple)):
            # Megatron's own spelling of the MLA module is `up_proj`
            v = ["mla_up_proj" if x == "up_proj" else x for x in v]
            v = tuple(dict.fromkeys(v))
            if "per_op" in v and len(v) > 1:
                raise ValueError(f"recompute_modules {','.join(map(str, v))}: per_op is torchtitan's whole "
                                 f"per-op policy and takes no Megatron module beside it; give per_op alone")
            return v
        return v

    @field_validator("pipeline_layout")
    @classmethod
    def _layout(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not v.strip() or not _LAYOUT_CHARS.match(v):
            raise ValueError(
                f"pipeline_layout {v!r}: use Megatron's symbols E (embedding), t (layer), m (MTP), L (loss), "
                f"'|' between virtual stages and (...)*N repeats, e.g. 'Et|(tt|)*30L'"
            )
        from placement.cost.pipeline import expand_layout  # its repeats unrolled within the size bound, codes known

        expand_layout(v)
        return v

    @model_validator(mode="after")
    def _check(self) -> Recipe:
        if self.account_for_embedding or self.account_for_loss:
            if self.pipeline_layout is not None:
                raise ValueError(
                    "pipeline_layout and account_for_embedding/account_for_loss both place the embedding and "
                    "loss; give the layout alone"
                )
        return self

    @property
    def modules(self) -> frozenset[RecomputeModule]:
        return frozenset(self.recompute_modules)
