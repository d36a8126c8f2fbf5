"""Megatron-LM (megatron-core 0.19.2): the argument list and environment of `pretrain_gpt.py`.

Flags and rules from reference/frameworks.md §3 (read from Megatron's own parser): rank order
tp-cp-ep-dp-pp, TP innermost, as placement orders ranks; experts on a second generator
(etp, ep, edp, pp).  Uneven pipelines use --decoder-first/last-pipeline-num-layers, interleaving
--num-virtual-stages-per-pipeline-rank (the layers-per-stage flag is not allowed with uneven stages).
With TP or CP > 1 on Hopper and older, Megatron requires CUDA_DEVICE_MAX_CONNECTIONS=1, except under
Megatron-FSDP, which refuses it (found by running Megatron's validate_args on the emitted arguments), and the EP
all-to-all overlap, which wants more; Blackwell has no such requirement (`max_connections`).

The recipe (placement/specs/recipe.py) is written as Megatron-Core 0.19.2 arguments, read from its
arguments.py and TransformerConfig: `--moe-token-dispatcher-type alltoall|allgather|flex` (flex with
`--moe-flex-dispatcher-backend deepep|hybridep`), CUDA graphs partial as `--cuda-graph-impl
transformer_engine --cuda-graph-modules attn [moe_router moe_preprocess]` (`--cuda-graph-scope` is its
deprecated alias) and full as `--cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad`,
`--tp-comm-overlap`, `--overlap-moe-expert-parallel-comm`, `--delay-wgrad-compute`, `--fp8-format e4m3
--fp8-recipe R`, `--fp8-param-gather`, `--use-precision-aware-optimizer --exp-avg-dtype bf16
--exp-avg-sq-dtype bf16`, `--recompute-modules`, `--mtp-num-layers`, `--pipeline-model-parallel-layout`,
`--account-for-{embedding,loss}-in-pipeline-split`, `--moe-expert-capacity-factor`,
`--cross-entropy-loss-fusion`, `--moe-permute-fusion --moe-router-fusion`, and the gradient width as
`--grad-reduce-in-bf16` or `--accumulate-allreduce-grads-in-fp32` (under `--bf16` Megatron's default is
fp32, which a plan priced with 16-bit gradients would not run), under Megatron-FSDP as
`--megatron-fsdp-main-grads-dtype` and `--megatron-fsdp-grad-comm-dtype`.  The routing imbalance is a
property of the data, never forced (`--moe-router-force-load-balancing` is for benchmarks only).
`placement.audit.readers.megatron` reads every one of them back.
"""

from __future__ import annotations

import re
import shlex

from placement.cost.context import fp8_recipe
from placement.cost.dp import MEGATRON_BUCKET_PARAMS_PER_DP_RANK
from placement.cost.pipeline import default_layout, format_layout
from placement.emit.common import (
    EmitContext,
    Runs,
    differs_from_fixed,
    header,
    header_runs,
    recipe_warnings,
    refusal,
    runs_model,
    runs_recipe,
    torchrun_lines,
    warn_block,
)
from placement.frameworks import absent_modules, seq_divisor
from placement.specs.model import FfnKind, ModelSpec, MoESpec, Normalization, PositionEmbedding, RopeScaling
from placement.specs.recipe import MEGATRON_MODULES, CpCommType, CudaGraphs, Dispatcher, Fp8Recipe, RecomputeModule
from placement.specs.training import AttentionKernel, Precision

FLEX_BACKENDS = (Dispatcher.DEEPEP, Dispatcher.HYBRIDEP)
EXPERT_RANK_CAPACITY = 4.0
"""`--moe-expert-rank-capacity-factor` of a dropless MoE plan's full-iteration graphs under HybridEP: each expert rank
takes at most 4x the mean rank's tokens (past it HybridEP drops them, core_v0.19.0 transformer_config.py), as MLPerf
Training v6.0 NVIDIA's DeepSeek-V3 GB200 run set it (placement's calibration row
mlperf-v6.0-nvidia-gb200-deepseek-v3-512gpu); the price assumes no token past it."""
PARTIAL_GRAPH_MODULES = ("attn",)
PARTIAL_GRAPH_MODULES_MOE = ("attn", "moe_router", "moe_preprocess")
"""`--cuda-graph-modules` of the recipe's partial graphs: what runs before the dropless MoE sync."""


def arguments(ctx: EmitContext) -> tuple[list[str], dict[str, str], list[str]]:
    """(arguments, environment, warnings)."""
    lay = ctx.plan.layout
    args = ["--tensor-model-parallel-size", str(lay.tp), "--pipeline-model-parallel-size", str(lay.pp),
            "--context-parallel-size", str(lay.cp), "--num-layers", str(ctx.num_layers),
            "--seq-length", str(ctx.plan.seq_len), "--micro-batch-size", str(lay.micro_batch_size),
            "--global-batch-size", str(ctx.plan.global_batch)]
    warnings = []
    if ctx.moe:
        args += ["--expert-model-parallel-size", str(lay.ep), "--expert-tensor-parallel-size", str(lay.etp)]
    if lay.sequence_parallel:
        args.append("--sequence-parallel")
    divisor = int(seq_divisor(lay.tp, lay.cp, lay.sequence_parallel, per_cp_rank=True))
    if ctx.plan.seq_len % divisor:  # frameworks.CAPABILITIES["megatron"].seq_split
        warnings.append(refusal(f"Megatron-Core asserts at the first forward that the sequence ({ctx.plan.seq_len}) "
                                f"splits into 2cp chunks and, under sequence parallelism, a CP rank's share over tp: "
                                f"it must divide by {divisor} ('First dimension of the tensor should be divisible by "
                                f"tensor parallel size', tensor_parallel/mappings.py)"))
    r = ctx.recipe
    args += split_arguments(ctx)
    if lay.zero_stage == 1:
        args += ["--use-distributed-optimizer"]
        args += (["--overlap-grad-reduce"] + (["--overlap-param-gather"] if r.param_gather_overlap else [])
                 if r.dp_overlap else [])
    elif lay.zero_stage == 0 and r.dp_overlap and lay.dp > 1:
        args += ["--overlap-grad-reduce"]
    elif lay.zero_stage in (2, 3):
        args += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy",
                 "optim_grads" if lay.zero_stage == 2 else "optim_grads_params",
                 "--ckpt-format", "fsdp_dtensor"]  # validate_args: Megatron-FSDP checkpoints only this way
        # what Megatron-FSDP runs whatever the flags: it turns the reduce-scatter overlap on when it shards the
        # gradients, and the gather overlap when it shards the weights (MEGATRON_FSDP_OVERLAPS); the file says so
        # rather than leave them out (a review: an audit's Bridge changes then set ddp.overlap_grad_reduce false)
        args += ["--overlap-grad-reduce"] + (["--overlap-param-gather"] if lay.zero_stage == 3 else [])
        if lay.zero_stage == 3 and lay.dp_shard < lay.dp:
            warnings.append(f"HSDP (shard {lay.dp_shard} of dp {lay.dp}) is not expressed: Megatron-FSDP shards "
                            f"over the whole data-parallel group here (the file sets no "
                            f"--num-distributed-optimizer-instances, its hybrid mode)")
    if lay.zero_stage <= 1:
        args += GRAD_BUFFER_FLAGS.get(r.grad_buffer_passes, [])
    if lay.zero_stage <= 1 and r.dp_overlap and lay.dp > 1 and r.ddp_bucket_params is not None:
        # the plan's bucket size; without the flag Megatron-Core's default, max(40M, 1M x dp x cp), which the plan
        # then prices (cost.dp.bucket_params)
        args += ["--ddp-bucket-size", str(r.ddp_bucket_params)]
        floor = MEGATRON_BUCKET_PARAMS_PER_DP_RANK * lay.dp * lay.cp
        if r.ddp_bucket_params < floor:
            warnings.append(f"--ddp-bucket-size {r.ddp_bucket_params:,} is under 1M parameters per data-parallel "
                            f"rank ({floor:,} at dp {lay.dp} x cp {lay.cp}), where Megatron-Core expects the ring's "
                            f"chunks to turn latency-bound (distributed_data_parallel.py sizes its default buckets "
                            f"so); placement prices one collective's latency for all the buckets, so this file may "
                            f"reduce slower than its header says")
    if lay.recompute == "full":
        if r.recompute_num_layers is not None:
            args += ["--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers",
                     str(r.recompute_num_layers)]
        else:
            args += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    elif lay.recompute == "selective":
        modules = megatron_recompute_modules(ctx)
        if RecomputeModule.PER_OP in r.recompute_modules:
            warnings.append(PER_OP_WHY)
        absent = {} if ctx.model is None else absent_modules(ctx.model, modules)
        if absent:  # a user trial's Llama file with mla_up_proj and moe_act, priced as recomputing nothing
            warnings.append(refusal(f"Megatron-Core refuses --recompute-modules {' '.join(absent)} on this model: "
                                    f"{'; '.join(absent.values())} (core_v0.19.0 transformer_config.py:1784-1793); "
                                    f"drop them"))
        args += ["--recompute-granularity", "selective", "--recompute-modules", *(m.value for m in modules)]
    more, warn = recipe_arguments(ctx)
    args += [f for f in more if f != "--no-check-for-nan-in-loss-and-grad" or f not in args]  # full graphs' and
    # the gradient buffer's (GRAD_BUFFER_FLAGS) switch, once
    warnings += warn
    connections = max_connections(ctx)
    env = {} if connections is None else {"CUDA_DEVICE_MAX_CONNECTIONS": connections}
    if r.cuda_graphs is CudaGraphs.PARTIAL:
        # launch.sbatch keeps PyTorch's expandable segments (the memory price assumes them), beside which Megatron-LM
        # refuses per-layer graphs unless NCCL's graph registration is off (core_v0.19.0 arguments.py:1880-1887,
        # "Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access ..."; a user trial's file did not start)
        env["NCCL_GRAPH_REGISTER"] = "0"
    return args, env, warnings


def max_connections(ctx: EmitContext) -> str | None:
    """CUDA_DEVICE_MAX_CONNECTIONS as Megatron-LM wants it.  validate_args (core_v0.19.0 arguments.py:1413-1438)
    asserts 1 where TP or CP > 1 on Hopper and older, except under Megatron-FSDP (which refuses 1) or the EP
    all-to-all overlap (which wants more: "requires setting a larger CUDA_DEVICE_MAX_CONNECTIONS"); "the requirement
    no longer exists since the Blackwell architecture".  Otherwise Megatron-Bridge's launcher rule
    (scripts/performance/utils/overrides.py): 32 on Blackwell and with the DeepEP/HybridEP dispatcher, 8 with the
    overlap on another dispatcher."""
    lay, r = ctx.plan.layout, ctx.recipe
    overlap = ctx.moe and r.ep_comm_overlap
    if ctx.topo.accelerator.mxfp8:  # Blackwell and later (block-scaled FP8 tensor cores)
        return "32"
    if overlap:
        return "32" if r.moe_dispatcher in FLEX_BACKENDS else "8"
    if (lay.tp > 1 or lay.cp > 1) and lay.zero_stage not in (2, 3):
        return "1"  # asserted on Hopper and older
    if ctx.moe and r.moe_dispatcher in FLEX_BACKENDS:
        return "32"
    return None


def recipe_arguments(ctx: EmitContext) -> tuple[list[str], list[str]]:
    """The recipe's Megatron-Core arguments besides recompute and the pipeline layout, and warnings for
    what Megatron would refuse or cannot express."""
    lay, r = ctx.plan.layout, ctx.recipe
    args: list[str] = []
    warnings: list[str] = []
    if ctx.moe:
        if r.moe_dispatcher in FLEX_BACKENDS:
            args += ["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", r.moe_dispatcher.value]
        else:
            args += ["--moe-token-dispatcher-type", r.moe_dispatcher.value]
        if r.moe_fusions:
            args += ["--moe-permute-fusion", "--moe-router-fusion"]
        if r.moe_capacity_factor is not None:
            args += ["--moe-expert-capacity-factor", f"{r.moe_capacity_factor:g}"]
        if r.ep_comm_overlap:
            args.append("--overlap-moe-expert-parallel-comm")
            if lay.pp > 1 and lay.vpp == 1:
                warnings.append(refusal("Megatron's EP overlap (--overlap-moe-expert-parallel-comm) needs virtual "
                                        "pipeline stages when pp > 1; add them or drop the overlap"))
            if lay.recompute == "full" or lay.ep == 1:
                warnings.append(refusal("Megatron refuses --overlap-moe-expert-parallel-comm with full recompute or "
                                        "ep 1"))
        if r.delay_wgrad:
            args.append("--delay-wgrad-compute")
            if not r.ep_comm_overlap:
                warnings.append(refusal("Megatron-Core refuses --delay-wgrad-compute without "
                                        "--overlap-moe-expert-parallel-comm (transformer_config.py, since ae1c88296f "
                                        "of 2025-08-01); add the overlap or drop it"))
    if r.cuda_graphs is CudaGraphs.PARTIAL:
        modules = PARTIAL_GRAPH_MODULES_MOE if ctx.moe else PARTIAL_GRAPH_MODULES
        args += ["--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", *modules]
        padded = "--moe-router-padding-for-fp8" in args
        if ctx.moe and "moe_preprocess" in modules and r.moe_dispatcher is Dispatcher.ALLTOALL \
                and (r.moe_capacity_factor is not None or padded):
            # a user trial's capacity-factor file: its alltoall preprocess copies counts to the host
            warnings.append(refusal(
                "Megatron-Core refuses the moe_preprocess graph with the alltoall dispatcher where "
                + ("the router pads for FP8" if padded else "a capacity factor without padding to it is set")
                + " ('moe_preprocess cuda graph is not supported when there are DtoH copies and synchronizations "
                  "in the preprocess step', core_v0.19.0 transformer_config.py:2505-2519); use another dispatcher, "
                  "full-iteration graphs or none"))
    elif r.cuda_graphs is CudaGraphs.FULL:
        args += ["--cuda-graph-impl", "full_iteration", "--no-check-for-nan-in-loss-and-grad"]
        if ctx.moe:  # static MoE shapes (evaluate.full_graph_moe_error): every expert padded to the capacity priced
            if r.moe_capacity_factor is not None:
                args.append("--moe-pad-expert-input-to-capacity")
            elif r.moe_dispatcher is Dispatcher.HYBRIDEP:  # or HybridEP's expert-rank budget, as MLPerf v6.0 ran
                args += ["--moe-expert-rank-capacity-factor", f"{EXPERT_RANK_CAPACITY:g}", "--moe-paged-stash",
                         "--use-transformer-engine-op-fuser"]
                # placement's value, not the plan's or the user's: said with its source (never substituted silently)
                warnings.append(f"--moe-expert-rank-capacity-factor {EXPERT_RANK_CAPACITY:g} is placement's choice "
                                f"for full-iteration graphs on a dropless MoE model, as MLPerf Training v6.0 NVIDIA's "
                                f"DeepSeek-V3 set it: each expert rank takes at most {EXPERT_RANK_CAPACITY:g}x the "
                                f"mean rank's tokens and HybridEP drops the rest, which the price assumes none of")
    if not r.pp_comm_overlap and lay.pp > 1 and lay.vpp > 1:
        # Megatron overlaps an interleaved pipeline's sends and receives unless told not to (overlap_p2p_comm)
        args.append("--no-overlap-p2p-communication")
        if lay.pp == 2:
            warnings.append(refusal("Megatron-LM refuses an interleaved schedule on 2 pipeline stages with "
                                    "--no-overlap-p2p-communication (core_v0.19.0 megatron/training/arguments.py:"
                                    "972-975: 'pipeline-model-parallel size should be greater than 2')"))
    if (not r.align_param_gather and lay.zero_stage == 1 and lay.pp > 1 and lay.vpp > 1 and r.dp_overlap
            and r.param_gather_overlap):
        # Megatron-LM aligns an interleaved pipeline's weight gathers unless told not to (align_param_gather,
        # core_v0.19.0 megatron/training/arguments.py --no-align-param-gather)
        args.append("--no-align-param-gather")
    if r.tp_comm_overlap and lay.tp > 1:
        args.append("--tp-comm-overlap")
        if not lay.sequence_parallel:
            warnings.append(refusal("Megatron's --tp-comm-overlap needs --sequence-parallel, which this plan has off "
                                    "(validate_args asserts it)"))
    # Megatron's default is FP32 weights and GEMMs: both precisions run BF16 weights, FP8 only in the GEMMs
    # (Megatron-LM arguments.py: --bf16 "Run model in bfloat16 mode"; --fp8-format on top of it)
    args.append("--bf16")
    # the gradient width as priced: under --bf16 Megatron's DDP accumulates and reduces in fp32 unless told
    # --grad-reduce-in-bf16 (megatron/training/arguments.py, core_v0.19.0 :1181-1194); Megatron-FSDP takes its own
    # dtypes (auto: the model's 16 bits; arguments.py :3524-3532)
    if lay.zero_stage >= 2:
        width = "fp32" if r.grad_reduce_fp32 else "bf16"
        args += ["--megatron-fsdp-main-grads-dtype", width, "--megatron-fsdp-grad-comm-dtype", width]
    else:
        args.append("--accumulate-allreduce-grads-in-fp32" if r.grad_reduce_fp32 else "--grad-reduce-in-bf16")
    if ctx.plan.precision == Precision.FP8.value:
        recipe = megatron_fp8_recipe(ctx)
        args += ["--fp8-format", "e4m3"] + (["--fp8-recipe", recipe.value] if recipe is not None else [])
        if recipe is not fp8_recipe(ctx.topo, r, Precision.FP8):
            warnings.append(f"the plan is priced with fp8_recipe = {r.fp8_recipe.value}, which {VERSION} has no "
                            f"recipe for (megatron/core/enums.py Fp8Recipe): it runs {recipe.value}")
    elif r.fp8_recipe is not None:
        warnings.append(f"fp8_recipe {r.fp8_recipe.value} is set but the plan runs {ctx.plan.precision}: no FP8 "
                        f"arguments written")
    if r.fp8_params:
        args.append("--fp8-param-gather")
        if lay.zero_stage == 0:  # a user trial's file exited 0 with this as a stderr warning alone
            warnings.append(refusal("Megatron-LM refuses --fp8-param-gather without the distributed optimizer or "
                                    "Megatron-FSDP (core_v0.19.0 arguments.py:1060-1062, 'only supported with "
                                    "distributed optimizer, torch fsdp2, megatron fsdp, or inference mode'); plan it "
                                    "at ZeRO >= 1 or drop --fp8-params"))
    if r.attention_kernel is AttentionKernel.UNFUSED:
        args += ["--attention-backend", "unfused"]
    elif r.attention_kernel is AttentionKernel.FLASH2:  # the flash-attn package; its installed version decides 2 or 3
        args += ["--attention-backend", "flash"]
        warnings.append("attention_kernel flash2 is written as --attention-backend flash: Megatron then runs the "
                        "installed flash-attn package, FlashAttention-2 only if that is version 2.x")
    if lay.cp > 1 and r.cp_comm_type is not CpCommType.P2P:
        args += ["--cp-comm-type", r.cp_comm_type.value]
    if r.optimizer_state_bf16:
        args += ["--use-precision-aware-optimizer", "--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "bf16"]
        if lay.zero_stage == 0:  # DDP: no --use-distributed-optimizer (Megatron-FSDP sets it itself)
            warnings.append(refusal("Megatron-Core refuses --use-precision-aware-optimizer without the distributed "
                                    "optimizer (core_v0.19.0 megatron/core/optimizer/optimizer_config.py:430-436, "
                                    "OptimizerConfig.__post_init__: '--use-precision-aware-optimizer only supported "
                                    "with distributed optimizer'); plan it at ZeRO >= 1 or drop "
                                    "--optimizer-state-bf16"))
    if r.mtp_layers:
        # validate_args: MTP needs rope (or no) position embeddings; the MTP models (DeepSeek-V3 and kin) use rope
        args += ["--mtp-num-layers", str(r.mtp_layers)]
        if ctx.model is None or ctx.model.position_embedding is None:  # else the model's arguments state it
            args += ["--position-embedding-type", "rope"]
    if r.cross_entropy_fusion:
        args.append("--cross-entropy-loss-fusion")
    return args, warnings


def split_arguments(ctx: EmitContext) -> list[str]:
    """The arguments that give Megatron exactly the pipeline split the plan priced.

    Megatron's own flags where it takes them (megatron-core 0.19.2 validate_args): an even split needs none;
    `--account-for-embedding/loss-in-pipeline-split` need the layers plus the accounted units to split evenly
    over pp x vpp; `--decoder-first/last-pipeline-num-layers` take an uneven split without interleaving whose middle
    ranks hold as many layers each.  Any
    other split (uneven with interleaving, accounted units that do not divide) goes as the explicit
    `--pipeline-model-parallel-layout` of the priced stages, which fixes the virtual stages itself."""
    lay, r = ctx.plan.layout, ctx.recipe
    if r.pipeline_layout is not None:
        return ["--pipeline-model-parallel-layout", r.pipeline_layout]
    if lay.pp == 1:
        return []
    virtual = ["--num-virtual-stages-per-pipeline-rank", str(lay.vpp)] if lay.vpp > 1 else []
    accounted = int(r.account_for_embedding) + int(r.account_for_loss)
    units = ctx.num_layers + accounted
    if accounted and units % (lay.pp * lay.vpp) == 0:
        return virtual + (["--account-for-embedding-in-pipeline-split"] if r.account_for_embedding else []) + (
            ["--account-for-loss-in-pipeline-split"] if r.account_for_loss else [])
    stages = lay.stage_layers
    if not accounted and len(set(stages)) == 1 and ctx.num_layers % (lay.pp * lay.vpp) == 0:
        return virtual
    # Megatron's first/last flags deal the middle ranks equal shares: a split whose middle ranks differ (placement's
    # balanced split, pp near the layer count) goes as the explicit layout
    if not accounted and lay.vpp == 1 and len(set(lay.per_rank_layers()[1:-1])) <= 1:
        return ["--decoder-first-pipeline-num-layers", str(stages[0]), "--decoder-last-pipeline-num-layers",
                str(stages[-1])]
    priced = default_layout(ctx.num_layers, lay.pp, lay.vpp, r.account_for_embedding, r.account_for_loss,
                            r.mtp_layers)
    return ["--pipeline-model-parallel-layout", format_layout(priced)]


_NORM = {Normalization.RMSNORM: "RMSNorm", Normalization.LAYERNORM: "LayerNorm"}
ACTIVATION_ARGS = {FfnKind.SWIGLU: ["--swiglu"], FfnKind.QUICK_GEGLU: ["--quick-geglu"],
                   FfnKind.SQUARED_RELU: ["--squared-relu"], FfnKind.GELU: []}
"""Megatron-LM's activation switches (arguments.py:2365-2370, argument_utils.py:314-326 in core_v0.19.0):
--quick-geglu is a gated MLP with quick_gelu, x * sigmoid(1.702 x), GPT-OSS's; GeLU is its default (no switch).
The audit reads and names the same switches (audit.readers.megatron, audit.core)."""


def window_skip_args(m: ModelSpec) -> list[str]:
    """--window-attn-skip-freq for a model with `sliding_window_layers` of its layers windowed, as Megatron-Core counts
    them (transformer/utils.py is_layer_window_attention: every layer without the flag, layer l (from 1) where
    l % N != 0 with N, a list's 1s): none where every layer has the window (a user trial: Mistral's file passed 1,
    under which no layer has it), N where the full layers are every N-th (GPT-OSS 2, Gemma 3 6), else the list with
    the full layers spread evenly."""
    full = m.num_layers - m.sliding_window_layers
    if full == 0:
        return []
    if m.num_layers % full == 0:
        return ["--window-attn-skip-freq", str(m.num_layers // full)]
    at = {round((k + 1) * m.num_layers / full) for k in range(full)}
    pattern = ",".join("0" if n in at else "1" for n in range(1, m.num_layers + 1))
    return ["--window-attn-skip-freq", f"[{pattern}]"]


def model_arguments(ctx: EmitContext) -> tuple[list[str], list[str]]:
    """(the model's architecture as Megatron-LM arguments, what the model spec leaves unstated).

    Megatron-Core's defaults are GPT-2's (LayerNorm, learned positions, biases, GeLU, dropout 0.1, tied
    embeddings), so every difference is written out; the vocabulary comes from the user's tokenizer."""
    m = ctx.model
    if m is None:
        return [], ["the model architecture (no model spec given)"]
    heads, kv = m.num_attention_heads, m.num_kv_heads or m.num_attention_heads
    args = ["--hidden-size", str(m.hidden_size), "--ffn-hidden-size", str(m.ffn_hidden_size),
            "--num-attention-heads", str(heads), "--max-position-embeddings", str(ctx.plan.seq_len)]
    unstated = []
    if kv != heads:
        args += ["--group-query-attention", "--num-query-groups", str(kv)]
    if m.head_dim is not None and m.head_dim * heads != m.hidden_size:
        args += ["--kv-channels", str(m.head_dim)]
    if m.ffn_kind in ACTIVATION_ARGS:
        args += ACTIVATION_ARGS[m.ffn_kind]
    else:
        unstated.append(f"the {m.ffn_kind.value} activation (no Megatron-LM argument)")
    # TransformerConfig fields the ArgumentGroupFactory makes arguments of (arguments.py:2195-2291;
    # transformer_config.py:224 glu_linear_offset, :228 activation_func_clamp_value, :163 softmax_type)
    if m.glu_linear_offset:
        args += ["--glu-linear-offset", f"{m.glu_linear_offset:g}"]
    if m.swiglu_clamp is not None:
        args += ["--activation-func-clamp-value", f"{m.swiglu_clamp:g}"]
    if not m.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if not m.dropout:  # Megatron's defaults are 0.1
        args += ["--hidden-dropout", "0", "--attention-dropout", "0"]
    if m.normalization is not None:
        args += ["--normalization", _NORM[m.normalization]]
    else:
        unstated.append("--normalization")
    if m.norm_epsilon is not None:  # a user trial: DeepSeek-V3's 1e-6 left to Megatron's 1e-5, unsaid
        args += ["--norm-epsilon", f"{m.norm_epsilon:g}"]
    else:
        unstated.append("--norm-epsilon (Megatron's default 1e-5 runs)")
    if m.position_embedding is PositionEmbedding.ROPE:
        yarn = m.rope_scaling is RopeScaling.YARN and m.mla is None  # MLA applies YaRN itself (--rope-type)
        args += ["--position-embedding-type", "yarn" if yarn else "rope"]
        if m.rope_base:  # Megatron-LM parses it as an int
            args += ["--rotary-base", str(round(m.rope_base))]
        if m.rotary_percent is not None and m.rotary_percent < 1:
            args += ["--rotary-percent", f"{m.rotary_percent:g}"]
        args += yarn_arguments(m)
        if m.rope_scaling is RopeScaling.YARN and m.yarn_rope is None:  # a models/*.yaml without yarn_rope
            unstated.append("the YaRN factors (the model file states none: --rotary-scaling-factor, "
                            "--yarn-original-max-position-embeddings, --yarn-beta-fast, --yarn-beta-slow; "
                            "Megatron-LM's defaults 1, 4096, 32, 1 scale nothing)")
        if m.llama3_rope is not None:  # the other three factors are fixed (MEGATRON_LLAMA3_ROPE)
            args += ["--use-rope-scaling", "--rope-scaling-factor", f"{m.llama3_rope.factor:g}"]
    elif m.position_embedding is PositionEmbedding.LEARNED:
        args += ["--position-embedding-type", "learned_absolute"]
    else:
        unstated.append("--position-embedding-type" + (" (ALiBi has no Megatron-Core equivalent)"
                                                        if m.position_embedding is PositionEmbedding.ALIBI else ""))
    if m.linear_bias is False:
        args.append("--disable-bias-linear")
    elif m.linear_bias is None:
        unstated.append("--disable-bias-linear or not")
    if m.qkv_bias and not m.linear_bias:  # every linear biased already covers q, k and v
        args.append("--add-qkv-bias")
    if m.qk_layernorm or m.mla is not None:
        # under MLA the flag is the norms of the compressed query and key-value (DeepSeek's q_a_layernorm and
        # kv_a_layernorm, which every MLA model has): without it Megatron builds the up-projections bare
        # (core_v0.19.0 megatron/core/models/gpt/gpt_layer_specs.py:244-256), another model (a user trial)
        args.append("--qk-layernorm")
    if m.attention_sinks:
        args += ["--softmax-type", "learnable"]
    if m.sliding_window and m.sliding_window_layers:
        # a window of W tokens (HF's sliding_window, the query's own included) is Megatron's window_size (W - 1, 0):
        # W - 1 tokens to the left (Megatron-Bridge #2656, "Fix off-by-one in sliding window size for Gemma2,
        # Gemma3, Mistral, and GPT-OSS", gpt_oss_bridge.py: window_size = (sliding_window - 1, 0))
        args += ["--window-size", f"{m.sliding_window - 1},0", *window_skip_args(m)]
    if m.mla is not None:
        a = m.mla
        args += ["--multi-latent-attention", "--kv-lora-rank", str(a.kv_lora_rank), "--qk-head-dim",
                 str(a.qk_nope_head_dim), "--qk-pos-emb-head-dim", str(a.qk_rope_head_dim), "--v-head-dim",
                 str(a.v_head_dim)] + (["--q-lora-rank", str(a.q_lora_rank)] if a.q_lora_rank else [])
    if m.moe is not None:
        e = m.moe
        args += ["--num-experts", str(e.num_experts), "--moe-router-topk", str(e.top_k), "--moe-ffn-hidden-size",
                 str(e.expert_ffn_hidden_size), "--moe-grouped-gemm"]
        if e.num_shared_experts:
            width = e.num_shared_experts * (e.shared_expert_ffn_hidden_size or e.expert_ffn_hidden_size)
            args += ["--moe-shared-expert-intermediate-size", str(width)]
        if e.num_dense_layers:
            args += ["--moe-layer-freq", f"([0]*{e.num_dense_layers}+[1]*{m.num_layers - e.num_dense_layers})"]
        if e.num_expert_groups and e.groups_per_token:
            args += ["--moe-router-num-groups", str(e.num_expert_groups), "--moe-router-group-topk",
                     str(e.groups_per_token)]
        router_args, router_unstated = router_arguments(e)
        args += router_args
        unstated += router_unstated
    return args, unstated


def router_arguments(e: MoESpec) -> tuple[list[str], list[str]]:
    """How the router scores and weighs the experts, as Megatron-LM arguments, and what of it the model file leaves
    unstated or Megatron-Core cannot run (moe_utils.py topk_routing_with_score_function, core_v0.19.0): a softmax
    score over all experts before the top-k (--moe-router-pre-softmax) keeps the raw weights, after it renormalizes
    them; a sigmoid score always renormalizes (top-k > 1); an expert bias needs the sigmoid score
    (transformer_config.py: "Expert bias for aux-loss-free routing only supports 'sigmoid'"); the scaling factor
    multiplies the weights.  The costs do not depend on any of it: the routing's FLOPs and tokens are the same."""
    args: list[str] = []
    unstated: list[str] = []
    score = e.router_score_function
    if score == "sigmoid":
        args += ["--moe-router-score-function", "sigmoid"]
    elif score is None:
        unstated.append("the router's score function (--moe-router-score-function; Megatron-LM's default softmax "
                        "runs; the model file states none)")
    normalized = e.router_topk_normalized
    if normalized is None and e.top_k > 1:
        unstated.append("whether the top-k weights are renormalized (--moe-router-pre-softmax for raw softmax "
                        "weights; the model file states neither)")
    if score != "sigmoid" and (normalized is False or e.top_k == 1):
        # top-1 under a softmax after the top-k would weigh every token 1 with no gradient: Megatron refuses it
        args.append("--moe-router-pre-softmax")
        if normalized and e.top_k == 1:
            unstated.append("renormalized top-1 weights (the model's weight is always 1; Megatron-Core requires "
                            "--moe-router-pre-softmax at top-k 1, which weighs each token by its softmax score)")
    elif score == "sigmoid" and normalized is False and e.top_k > 1:
        unstated.append("raw sigmoid top-k weights (the model does not renormalize them; Megatron-Core's sigmoid "
                        "router always does, so these files train renormalized weights)")
    if e.router_expert_bias:
        args.append("--moe-router-enable-expert-bias")
        if score != "sigmoid":
            unstated.append("the expert bias under a softmax score (Megatron-Core refuses "
                            "--moe-router-enable-expert-bias without --moe-router-score-function sigmoid)")
    elif e.router_expert_bias is None:
        unstated.append("the router's expert bias (--moe-router-enable-expert-bias; none by Megatron-LM's default; "
                        "the model file states none)")
    if e.router_topk_scaling_factor is not None and e.router_topk_scaling_factor != 1:
        args += ["--moe-router-topk-scaling-factor", f"{e.router_topk_scaling_factor:g}"]
    elif e.router_topk_scaling_factor is None:
        unstated.append("the top-k scaling (--moe-router-topk-scaling-factor; none by Megatron-LM's default; the "
                        "model file states none)")
    return args, unstated


MEGATRON_LLAMA3_ROPE = {"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
"""The Llama 3.1 RoPE scaling factors Megatron-LM fixes: `--use-rope-scaling` and `--rope-scaling-factor` are its only
arguments, and RotaryEmbedding calls `_apply_scaling(inv_freq, factor=rope_scaling_factor)`, leaving its defaults
low_freq_factor=1, high_freq_factor=4, original_max_position_embeddings=8192 (megatron/core/models/common/embeddings/
rotary_pos_embedding.py, core_v0.19.0 and main d98e8a64)."""


MEGATRON_YARN_MSCALE = (1.0, 0.0)
"""--mscale and --mscale-all-dim defaults (arguments.py:3393-3396, core_v0.19.0): YaRN's cos/sin scale
0.1 ln(factor) + 1, what transformers derives when a config states no pair of mscales."""
MEGATRON_MLA_YARN = {"original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": True}
"""The YaRN numbers Megatron-LM fixes for MLA: MLATransformerConfig's original_max_position_embeddings 4096,
beta_fast 32 and beta_slow 1 have no argument (the factory builds TransformerConfig's fields only, and
--yarn-original-max-position-embeddings and the --yarn-beta-* set the non-MLA yarn_* attributes), and
MultiLatentAttention builds YarnRotaryEmbedding without correction_range_round_to_int, which defaults to True
(transformer_config.py:2936-2952, multi_latent_attention.py:190-200, core_v0.19.0)."""


def yarn_arguments(m: ModelSpec) -> list[str]:
    """YaRN's numbers as Megatron-LM arguments.  Without MLA (--position-embedding-type yarn): the factor, original
    context, betas and rounding (arguments.py:2317-2326, :3391; argument_utils.py _apply_yarn_config_from_args fills
    1, 4096, 32, 1 and True for what is not given); the mscales only as a pair, as transformers uses them.  With MLA
    (which runs YaRN by its own rope_type, default yarn): --rotary-scaling-factor, whose argument default 1.0 would
    otherwise replace MLATransformerConfig's 40 and scale nothing, and the mscales where the model's differ from the
    arguments' defaults; the rest MEGATRON_MLA_YARN fixes."""
    y = m.yarn_rope
    if y is None or m.rope_scaling is not RopeScaling.YARN:
        return []
    args = ["--rotary-scaling-factor", f"{y.factor:g}"]
    pair = (y.mscale, y.mscale_all_dim)
    if m.mla is not None:
        if y.mscale is not None and y.mscale != MEGATRON_YARN_MSCALE[0]:
            args += ["--mscale", f"{y.mscale:g}"]
        if y.mscale_all_dim is not None and y.mscale_all_dim != MEGATRON_YARN_MSCALE[1]:
            args += ["--mscale-all-dim", f"{y.mscale_all_dim:g}"]
        return args
    args += ["--yarn-original-max-position-embeddings", str(y.original_max_position_embeddings),
             "--yarn-beta-fast", f"{y.beta_fast:g}", "--yarn-beta-slow", f"{y.beta_slow:g}"]
    if not y.truncate:
        args.append("--no-yarn-correction-range-round-to-int")
    if all(pair) and pair != MEGATRON_YARN_MSCALE:  # transformers: the ratio only when both are set and non-zero
        args += ["--mscale", f"{y.mscale:g}", "--mscale-all-dim", f"{y.mscale_all_dim:g}"]
    return args


def model_warnings(ctx: EmitContext) -> list[str]:
    """What the file runs otherwise than the model spec says, of the model arguments it writes."""
    m = ctx.model
    if m is None:
        return []
    out = []
    differ = differs_from_fixed(m.llama3_rope, MEGATRON_LLAMA3_ROPE) if m.llama3_rope is not None else None
    if differ:
        out.append(f"the model's llama3 RoPE scaling has {differ[0]}, but {VERSION} fixes {differ[1]} "
                   f"(--use-rope-scaling and --rope-scaling-factor are its only arguments; "
                   f"RotaryEmbedding._apply_scaling): this file trains other RoPE frequencies than the model's; change "
                   f"them in rotary_pos_embedding.py or accept Megatron's")
    differ = differs_from_fixed(m.yarn_rope, MEGATRON_MLA_YARN) if m.yarn_rope is not None and m.mla else None
    if differ:
        out.append(f"the model's YaRN has {differ[0]}, but {VERSION}'s multi-latent attention fixes {differ[1]} "
                   f"(MLATransformerConfig; no argument sets them): this file trains other RoPE frequencies than "
                   f"the model's; set them in your copy of the config or accept Megatron's")
    if m.swiglu_clamp is not None and m.ffn_kind is not FfnKind.QUICK_GEGLU:
        out.append(f"the model clamps its {m.ffn_kind.value} MLP's inputs at {m.swiglu_clamp:g}, and the file writes "
                   f"--activation-func-clamp-value {m.swiglu_clamp:g}, but {VERSION}'s fused bias-SwiGLU and grouped "
                   f"experts apply it to quick-GeGLU only (transformer_config.py:228-230, mlp.py:309, "
                   f"moe/experts.py:485-510); only the unfused GLU (--no-bias-swiglu-fusion) clamps a SwiGLU")
    return out


VERSION = "Megatron-LM (megatron-core 0.19.2)"
RUNS_INSTEAD = {
    "checkpoint_interval": "its checkpointing synchronizes nothing, so the chunk size prices nothing",
    "checkpoint_sync": "Megatron-LM does not synchronize the device around checkpointed layers",
    "grad_buckets": "its DDP fills the gradient buckets by size in reverse parameter order (--ddp-bucket-size), not "
                    "one per layer with the embedding and head in layer 0's",
    "grad_accumulation": "Megatron-LM accumulates gradients inside the weight-gradient GEMM "
                         "(--gradient-accumulation-fusion, its default)",
    "grad_all_reduce": "its distributed optimizer reduce-scatters the gradients",
    "pipeline_p2p_whole": "its stages send each TP rank's sequence-parallel shard of the activation under sequence "
                          "parallelism",
    "pipeline_p2p_scatter": "without sequence parallelism its stages send the whole activation from every TP rank "
                            "(megatron-core 0.19.2 pipeline_parallel/schedules.py get_tensor_shapes)",
    "pipeline_grads_whole": "its stages send each TP rank's share of the gradient, not the whole gradient",
    "pipeline_sends_mask": "its stages send the hidden states only, no attention mask",
    "fp8_saves_16bit_inputs": "Transformer Engine keeps each FP8 GEMM's quantised input for backward, 1 byte",
    "fp8_recasts_weights": "Transformer Engine casts each weight to FP8 once a step and keeps the 1-byte copy across "
                           "micro-batches",
    "fp8_lm_head": "its output layer runs BF16 GEMMs (a plain ColumnParallelLinear: these files leave megatron-core's "
                   "MXFP8 fp8_output_proj off)",
    "tp_async_backward": "its column-parallel linears always run the input gradient's collective beside their own "
                         "GEMMs (megatron-core 0.19.2 tensor_parallel/layers.py allreduce_dgrad; Transformer "
                         "Engine's Linear)",
    "sp_saves_gathered_inputs": "it keeps the sequence-parallel shard of each projection's input and gathers it "
                                "again in backward",
    "tp_gathers_16bit": "under FP8 Transformer Engine quantises before its sequence-parallel all-gathers, 1 byte an "
                        "element (module/layernorm_linear.py, base.py grad_output_preprocess)",
    "loss_chunks": "its LM head and loss run on the whole micro-batch at once",
    "optimizer_master_weights": "its optimizer keeps a float32 master copy of the weights",
    "moe_einsum_dispatch": "its token dispatcher permutes each token to its experts: no one-hot mask GEMMs",
    "loss_eager_float32": "its vocab-parallel cross-entropy works in place on one float32 copy of the logits "
                          "(megatron-core 0.19.2 tensor_parallel/cross_entropy.py)",
    "pipeline_unsharded_grads": "Megatron-FSDP reduce-scatters each micro-batch's gradients and keeps only its "
                                "shard",
    "zero0_as_fsdp": "its ZeRO-0 is DDP: one float32 gradient buffer beside the 16-bit weights, all-reduced once a "
                     "step",
    "dp_reduce_every_microbatch": "it reduces the gradients once a step, in the last micro-batch's backward (no_sync "
                                  "before the others), and has no HSDP",
    "fp32_weights": "its weights are 16-bit, with the float32 master copy in the optimizer state (--bf16)",
    "fp32_weights_autocast": "its weights are 16-bit (--bf16): no float32 weights under autocast",
    "optimizer_over_replicas": "its Megatron-FSDP shards the optimizer state with the weights, over the whole "
                               "data-parallel group (these files set no hybrid mode)",
    "reshard_after_backward": "its ZeRO-2 (Megatron-FSDP optim_grads) keeps every weight whole, so it gathers "
                              "the weights once a step, after the optimizer",
    "pipeline_p2p_blocking": "its stages pair each send with the opposite receive in one batched call "
                             "(p2p_communication, batch_isend_irecv)",
    "pipeline_schedule": "Megatron-Core has no argument for it: it runs 1F1B (interleaved when vpp > 1), with a "
                         "larger bubble",
    "activation_func_fp8_input_store": "activation_func_fp8_input_store has no Megatron-LM 0.19.2 argument (a "
                                       "TransformerConfig field that megatron/training/arguments.py:2246 keeps off "
                                       "the command line; forks and Megatron-Bridge recipes set it in code): the MLP "
                                       "activation's input stays BF16 unless you set it in the model provider",
    "dispatch_fp8": "megatron-core 0.19.2 has no FP8 dispatch: every dispatcher sends the 16-bit hidden states and "
                    "the expert GEMMs quantise them after the all-to-all (DeepEP's fused_dispatch sends x as "
                    "given, HybridEP's buffer is built with fp8_dispatch = False, transformer/moe/fused_a2a.py:401 "
                    "and :326, and NCCL-EP's receive buffers are bfloat16, token_dispatcher.py:1643-1646)",
}
"""What Megatron-LM runs instead of each recipe feature it cannot be told."""
STATED = frozenset({
    "attention_kernel", "moe_dispatcher", "cuda_graphs", "moe_fusions", "tp_comm_overlap",
    "ep_comm_overlap", "delay_wgrad", "cp_comm_type", "dp_overlap",
    "param_gather_overlap", "fp8_recipe", "fp8_params", "grad_reduce_fp32",
    "optimizer_state_bf16", "recompute_modules", "recompute_num_layers",
    "mtp_layers", "pipeline_layout", "account_for_embedding", "account_for_loss", "cross_entropy_fusion",
    "moe_capacity_factor", "cpu_affinity", "cuda_launch_blocking", "pp_comm_overlap",
    "align_param_gather", "ddp_bucket_params", "grad_buffer_passes"})
"""Recipe fields the files state: the `arguments` flags, the torchrun line's binding and environment."""


def megatron_recompute_modules(ctx: EmitContext) -> tuple[RecomputeModule, ...]:
    """The --recompute-modules the file writes for selective recompute: the plan's (core_attn where it names none),
    core_attn for torchtitan's per-op policy, which Megatron-LM has no name for (PER_OP_WHY), and of MaxText's
    names `mlp` for `mlp_up` (the whole MLP again) and none for the projections, which Megatron-Core cannot
    rerun alone (`runs` re-prices what the file runs)."""
    modules = ctx.recipe.recompute_modules or (RecomputeModule.CORE_ATTN,)
    if RecomputeModule.PER_OP in modules:
        return (RecomputeModule.CORE_ATTN,)
    written = tuple(dict.fromkeys(RecomputeModule.MLP if m is RecomputeModule.MLP_UP else m for m in modules
                                  if m in MEGATRON_MODULES or m is RecomputeModule.MLP_UP))
    return written or (RecomputeModule.CORE_ATTN,)


def megatron_fp8_recipe(ctx: EmitContext) -> Fp8Recipe | None:
    """The FP8 recipe the file writes: the plan's, or the accelerator's own for torchao's row-wise scaling, which
    Megatron-Core does not have (delayed, tensorwise, mxfp8, blockwise, custom: megatron/core/enums.py)."""
    recipe = fp8_recipe(ctx.topo, ctx.recipe, Precision.FP8)
    if recipe is Fp8Recipe.ROWWISE:
        return fp8_recipe(ctx.topo, ctx.recipe.model_copy(update={"fp8_recipe": None}), Precision.FP8)
    return recipe


GRAD_BUFFER_FLAGS = {4: [], 3: ["--no-check-for-nan-in-loss-and-grad"], 2: ["--ddp-average-in-collective"],
                     1: ["--no-check-for-nan-in-loss-and-grad", "--ddp-average-in-collective"]}
"""The flags that make Megatron-LM's DDP pass over its gradient buffer as often as the plan was priced (recipe
grad_buffer_passes): it zeroes the buffer every step (1); scales it by 1/dp before the reduction (2) unless
`--ddp-average-in-collective` (training.py:1997, core_v0.19.0); checks each bucket's norm for NaN (1) unless
`--no-check-for-nan-in-loss-and-grad` (:1989).  Any other count is not a Megatron-LM job: re-priced at 4 (3 under
full-iteration CUDA graphs, which run without the check)."""

MEGATRON_FSDP_OVERLAPS = ("Megatron-FSDP overlaps them whatever the flags say: megatron_fsdp.py sets "
                          "overlap_grad_reduce where it shards the gradients (optim_grads, optim_grads_params) and "
                          "overlap_param_gather where it shards the weights (optim_grads_params; core d98e8a64 "
                          "megatron_fsdp.py:328-337)")
"""Why a Megatron-FSDP file overlaps the DP collectives a plan priced without the overlap."""


def runs(ctx: EmitContext) -> Runs:
    """What the file runs where Megatron-LM cannot be told the plan (each is also a warning)."""
    out = Runs()
    lay, r = ctx.plan.layout, ctx.recipe
    full = r.cuda_graphs is CudaGraphs.FULL  # Megatron-LM then runs no NaN check
    if lay.zero_stage <= 1 and r.grad_buffer_passes not in GRAD_BUFFER_FLAGS:
        out.recipe["grad_buffer_passes"] = 3 if full else 4
        out.what.append(f"{3 if full else 4} passes over the gradient buffer a step: zeroed, scaled by 1/dp"
                        f"{'' if full else ' and NaN-checked'} (not {r.grad_buffer_passes}: Megatron-Core's DDP "
                        f"buffer)")
    elif lay.zero_stage <= 1 and full and r.grad_buffer_passes in (4, 2):
        out.recipe["grad_buffer_passes"] = r.grad_buffer_passes - 1
        out.what.append(f"{r.grad_buffer_passes - 1} passes over the gradient buffer a step, no NaN check (not "
                        f"{r.grad_buffer_passes}: Megatron-LM requires --no-check-for-nan-in-loss-and-grad with "
                        f"--cuda-graph-impl full_iteration, core_v0.19.0 arguments.py:1196-1197)")
    if lay.zero_stage in (2, 3) and not r.dp_overlap:
        out.recipe["dp_overlap"] = True
        out.what.append(f"the data-parallel collectives overlapped with compute ({MEGATRON_FSDP_OVERLAPS})")
    # the emitted --use-megatron-fsdp shards over the whole dp-cp group: its hybrid mode needs
    # --num-distributed-optimizer-instances > 1 (core/distributed/fsdp/mcore_fsdp_adapter.py:343), which these
    # files do not set
    out.shard_whole_dp(ctx.plan, "Megatron-FSDP")
    if ctx.plan.precision == Precision.FP8.value and ctx.recipe.fp8_recipe is Fp8Recipe.ROWWISE:
        written = megatron_fp8_recipe(ctx)
        out.recipe["fp8_recipe"] = written
        out.what.append(f"fp8_recipe {written.value} (not rowwise)")
    runs_recipe(ctx, RUNS_INSTEAD, out)
    written = megatron_recompute_modules(ctx)
    if ctx.plan.layout.recompute == "selective" and written != (ctx.recipe.recompute_modules or written):
        out.recipe["recompute_modules"] = written
        out.what.append(f"selective recompute of {'+'.join(m.value for m in written)} (not "
                        f"{'+'.join(m.value for m in ctx.recipe.recompute_modules)})")
    runs_model(ctx, "megatron", out)
    return out


PER_OP_WHY = ("the plan recomputes with torchtitan's per-op policy (per_op), which Megatron-LM has no "
              "--recompute-modules name for: this file recomputes the attention core (core_attn) and is priced so")
"""The warning of a Megatron-LM file for a plan priced with torchtitan's per-op checkpointing."""


def worker(ctx: EmitContext) -> tuple[str, str, list[str], list[str]]:
    """(shell preamble: exports and the PLACEMENT_ARGS array, the command after `torchrun ...`, the line of what
    stays the user's, warnings): what every node runs, for megatron.sh and launch.sbatch alike."""
    args, env, warnings = arguments(ctx)
    warnings = warnings + recipe_warnings(ctx, VERSION, RUNS_INSTEAD) + model_warnings(ctx)
    model, unstated = model_arguments(ctx)
    yours = ("# yours to add: data (--data-path or --mock-data), the tokenizer (the plan priced a vocabulary of "
             f"{ctx.model.vocab_size:,}), optimizer hyper-parameters, checkpoint paths" if ctx.model else
             "# yours to add: data, tokenizer, optimizer hyper-parameters, checkpoint paths")
    if unstated:
        yours += "; and, not in the model spec: " + ", ".join(unstated)
    exports = "".join(f"export {k}={v}\n" for k, v in env.items())
    preamble = exports + f"PLACEMENT_ARGS=({' '.join(shlex.quote(a) for a in args + model)})\n"
    return preamble, 'pretrain_gpt.py "${PLACEMENT_ARGS[@]}"', [yours], warnings


def render(ctx: EmitContext) -> tuple[str, list[str]]:
    preamble, command, yours, warnings = worker(ctx)
    line, warn = header_runs("Megatron-LM", warnings, *ctx.runs_as(runs(ctx)))
    if warn:
        warnings.insert(0, warn)
    sets = re.findall(r"^export (\w+)=", preamble, re.M)
    text = header(ctx, VERSION, runs=line, exports=sets) + warn_block(warnings) + "\n".join(yours) + "\n" + preamble
    return text + torchrun_lines(ctx, command), warnings
