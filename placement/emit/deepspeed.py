"""DeepSpeed 0.19.8: `ds_config.json`, a `hostfile` in the planned host order, and `deepspeed.sh` with the
launch line and the parts DeepSpeed takes in code (the rank topology, the pipeline module, the experts).

Facts read from DeepSpeed 0.19.8's own code (reference/frameworks.md §4; checked by tests/verify/test_deepspeed.py):
- `runtime/config.py` DeepSpeedConfig: `train_batch_size == micro * gas * dp` (`_batch_assertion`), where dp is
  `mpu.get_data_parallel_world_size()` when an mpu is passed and the whole world otherwise; top-level keys it does
  not know are ignored, which is where the JSON carries its header (`_comment`).
- `runtime/pipe/topology.py`: `ProcessTopology` is row-major (last axis fastest);
  `PipeModelDataParallelTopology(num_pp, num_mp, num_dp)` has axes [pipe, data, model], i.e. TP innermost, then
  data, then pipe: placement's rank order when cp = 1.  `PipelineParallelGrid` builds the groups and is the mpu.
- `runtime/pipe/engine.py` PipelineEngine: asserts ZeRO stage < 2; seeds the module's
  `activation_checkpoint_interval` from `pipeline.activation_checkpoint_interval`; never reads `pipeline.stages`;
  one plain 1F1B schedule, no interleaved stages, each send and receive a blocking call of its own
  (`runtime/pipe/schedule.py`, `p2p.py`); under TP it sends activations and gradients as 1/tp shares of the TP
  group and all-gathers them on arrival unless `pipeline.pipe_partitioned` / `grad_partitioned` are false, which
  these files set under sequence parallelism (the pieces gathered would come from different ranks' shards).
  `runtime/pipe/module.py` partitions layers by 'parameters', 'uniform' or 'type:<regex>' only.
- `runtime/zero/config.py`: `overlap_comm` defaults to True only for stage 3; `runtime/engine.py`
  `allreduce_gradients` all-reduces after backward when ZeRO is off.
- `moe/layer.py` MoE: the expert-parallel degree is the model code's, `MoE(..., ep_size=N)` (default 1; `num_experts
  % ep_size == 0` asserted); `deepspeed.initialize` calls each MoE layer's `set_deepspeed_parallelism`
  (`runtime/engine.py` `_configure_distributed_model`), which builds the groups `utils/groups.py` names
  `ep_size_N`.  No JSON key sets it: ds_topology.py states `ep_size` for the training script to pass.
- `utils/groups.py::_get_expert_parallel_ranks`: EP groups are runs of `ep` ranks taken from each stage's
  data-parallel ranks at one TP index (stride tp); MoE experts are whole on each rank (no expert TP).
- `launcher/runner.py::_parse_hostfile` keeps line order; `launch.py` numbers ranks host by host in that order and
  sets CUDA_VISIBLE_DEVICES to the host's slots, sorted (`parse_node_config_list`): node order is free, a GPU
  order inside a node is not.
"""

from __future__ import annotations

import json

import numpy as np

from placement.cost.constants import GiB
from placement.cost.dp import default_bucket_params
from placement.emit.common import (
    ALLOCATOR_EXPORT,
    ALLOCATOR_NOTE,
    CORE_ATTN_ONLY,
    OVER_CAPACITY,
    EmitContext,
    Runs,
    attention_features,
    gpt_oss_features,
    header,
    header_runs,
    matters,
    numa_binding,
    recipe_warnings,
    refusal,
    runs_model,
    runs_recipe,
    torchrun_lines,
    warn_block,
)
from placement.frameworks import DEEPSPEED_BUCKET_ELEMENTS
from placement.plan import Plan
from placement.specs.recipe import EinsumDispatch, GradAccumulation

VERSION = "DeepSpeed 0.19.8"
BUCKET_ELEMENTS = DEEPSPEED_BUCKET_ELEMENTS
"""ZeRO reduce/all-gather bucket, in elements (frameworks.DEEPSPEED_BUCKET_ELEMENTS: the plan's ddp_bucket_params)."""
MASTER_PORT = 29500
OPTIMIZER_NOTE = ("optimizer: AdamW, the Adam the plan prices; its params are left to FusedAdam's defaults (lr 1e-3, "
                  "betas 0.9/0.999, eps 1e-8, no weight decay; deepspeed/ops/adam/fused_adam.py), not a training "
                  "choice of placement's: set your own")
"""What ds_config.json says of its optimizer block, whose values are DeepSpeed's defaults, not the plan's."""
TRAIN_SCRIPT = '"${TRAIN_SCRIPT:-train.py}"'


def megatron_default_bucket(lay) -> int:
    """The bucket a plan that sets none was priced with: Megatron-Core's max(40M, 1M x dp x cp)
    (cost.dp.bucket_params)."""
    return int(default_bucket_params(lay.dp, lay.cp))


def reduce_bucket_elements(ctx: EmitContext) -> int:
    """zero_optimization.reduce_bucket_size the file writes at ZeRO-1/2: the bucket the plan priced where its recipe
    sets one (BUCKET_ELEMENTS for a DeepSpeed plan: frameworks.CAPABILITIES); else the Megatron-Core default it was
    priced with (`megatron_default_bucket`) up to BUCKET_ELEMENTS, which `files_run` prices where it is less.  Not
    that default above it: DeepSpeed allocates its reduce buckets whole, two of reduce_bucket_size elements under
    overlap_comm and contiguous_gradients (`ipg_bucket_bytes`), which at dp 8,192 (8.2e9 elements) were 30.5 GiB a
    GPU the plan's memory never held."""
    if ctx.recipe.ddp_bucket_params is not None:
        return ctx.recipe.ddp_bucket_params
    return min(megatron_default_bucket(ctx.plan.layout), BUCKET_ELEMENTS)


IPG_BUFFERS = 2
"""Reduce buckets a ZeRO-1/2 rank allocates: DeepSpeed 0.19's stage_1_and_2.py setup_buckets makes one
torch.empty(reduce_bucket_size) in the optimizer's dtype under contiguous_gradients, and a second ("double buffers to
avoid data access conflict") under overlap_comm, as config() writes both."""


def ipg_bucket_bytes(ctx: EmitContext) -> float:
    """Bytes of the reduce buckets the file's ZeRO-1/2 optimizer allocates on each GPU (IPG_BUFFERS of
    reduce_bucket_elements, 16-bit: the bf16 the file trains in), which the plan's memory does not price."""
    return IPG_BUFFERS * reduce_bucket_elements(ctx) * 2.0


def config(ctx: EmitContext) -> dict:
    """The ds_config.json settings of the plan (without the header); what `placement audit` diffs."""
    lay = ctx.plan.layout
    zero: dict = {"stage": lay.zero_stage}
    if lay.zero_stage == 3:
        # stage 3 reads neither reduce_scatter nor allgather_bucket_size (DeepSpeed 0.19.8 runtime/engine.py: its
        # DeepSpeedZeroOptimizer_Stage3 takes reduce_bucket_size and prefetch_bucket_size, the gathers' bucket; a
        # user trial read the stage-1/2 keys in a ZeRO-3 file)
        zero |= {"overlap_comm": True, "contiguous_gradients": True, "reduce_bucket_size": BUCKET_ELEMENTS,
                 "stage3_prefetch_bucket_size": BUCKET_ELEMENTS}
    elif lay.zero_stage > 0:
        # the reduce bucket the plan priced (its ddp_bucket_params, BUCKET_ELEMENTS for a DeepSpeed plan)
        zero |= {"overlap_comm": True, "contiguous_gradients": True, "reduce_scatter": True,
                 "reduce_bucket_size": reduce_bucket_elements(ctx), "allgather_bucket_size": BUCKET_ELEMENTS}
    out = {
        "train_batch_size": ctx.plan.global_batch,
        "train_micro_batch_size_per_gpu": lay.micro_batch_size,
        "gradient_accumulation_steps": lay.num_microbatches,
        "zero_optimization": zero,
        "bf16": {"enabled": True},  # fp8 too: DeepSpeed's FP8 comes from model code (see the warning)
        # the optimizer the plan prices (Adam: fp32 master weights and moments, 12 bytes a parameter).  Without one
        # here or in the call, deepspeed.initialize gives ZeRO-1/2 a DummyOptim it refuses ("zero stage {} requires
        # an optimizer", runtime/engine.py:2659) and ZeRO-3 an offload wrapper that updates nothing; one from the
        # JSON also gets MoE's parameter groups split (configure_moe_param_groups, engine.py:2331).  No params:
        # FusedAdam's defaults, for the user's own
        "optimizer": {"type": "AdamW", "params": {}},
    }
    if ctx.recipe.grad_reduce_fp32:  # unset, the engine reduces in the bf16 above (runtime/engine.py)
        out["communication_data_type"] = "fp32"
    if bf16_optimizer(ctx):
        # the BF16_Optimizer stage 0 builds under a pipeline, with its gradient buffer in fp32: DeepSpeed builds it
        # for bf16 at stage 1 with grad_accum_dtype fp32 (runtime/engine.py _do_optimizer_sanity_check) and refuses
        # fp32 at stage 0; at stage 0 with grad_accum_dtype unset its buffer is bf16, which DeepSpeed warns "is not
        # safe numerically with large number of accumulation steps"
        zero["stage"] = 1
        out["data_types"] = {"grad_accum_dtype": "fp32"}
    if lay.recompute == "full":
        # read by deepspeed.checkpointing.configure().  No partitioning of the checkpointed inputs: it keeps each TP
        # rank's 1/tp slice of its own input and all-gathers the slices back in backward (runtime/
        # activation_checkpointing/checkpointing.py partition_activations, gather_partitioned_activations), which
        # rebuilds the input only where every TP rank holds the same one; under sequence parallelism each holds its
        # own sequence shard (already the 1/tp share the plan prices), so the rebuilt input would mix shards and the
        # recompute run on it (Megatron-Core refuses the same pair: distribute_saved_activations "must be false when
        # sequence parallel is enabled", transformer_config.py); without it the plan prices the whole input, as kept
        out["activation_checkpointing"] = {"partition_activations": False,
                                           "contiguous_memory_optimization": False, "cpu_checkpointing": False,
                                           # torch.cuda.synchronize() around every checkpointed layer, as priced
                                           "synchronize_checkpoint_boundary": ctx.recipe.checkpoint_sync}
    if lay.pp > 1:
        # `stages` is not read by DeepSpeed (the topology sets it); it records the plan's value
        r = ctx.recipe
        # how the plan's stage-to-stage sends were priced: 1/tp shares unless whole.  Never partitioned under
        # sequence parallelism: the engine splits each TP rank's own tensor and all-gathers one piece from every
        # rank on arrival (runtime/pipe/engine.py:708-715 and :732-745, runtime/utils.py PartitionedTensor), which
        # rebuilds the input only where the ranks hold the same tensor; each holds its own sequence shard there, so
        # the next stage would compute on pieces of different shards.  Unpartitioned, each rank sends its shard:
        # the 1/tp share the plan prices
        shards = lay.sequence_parallel and lay.tp > 1
        out["pipeline"] = {"stages": lay.pp, "activation_checkpoint_interval": _interval(ctx),
                           "pipe_partitioned": not (r.pipeline_p2p_whole or shards),
                           "grad_partitioned": not (r.pipeline_p2p_whole or r.pipeline_grads_whole or shards)}
    return out


def _interval(ctx: EmitContext) -> int:
    """The PipelineModule's activation_checkpoint_interval: the plan's checkpointed chunk under full recompute, 0
    (no checkpointing) otherwise."""
    return ctx.recipe.checkpoint_interval if ctx.plan.layout.recompute == "full" else 0


def topology(ctx: EmitContext) -> str:
    """DeepSpeed's rank topology of the plan, as a Python expression over `deepspeed.runtime.pipe.topology`."""
    lay = ctx.plan.layout
    if lay.cp == 1:
        return f"PipeModelDataParallelTopology(num_pp={lay.pp}, num_mp={lay.tp}, num_dp={lay.dp})"
    return (f'ProcessTopology(axes=["pipe", "data", "context", "model"], '
            f"dims=[{lay.pp}, {lay.dp}, {lay.cp}, {lay.tp}])")


def node_slots(ctx: EmitContext) -> list[tuple[str, list[int]]]:
    """(host, local GPU of each of its ranks in rank order) for node rank 0, 1, ...; ranks are numbered host by
    host, so node rank k holds ranks k*gpus_per_host onwards."""
    gph = ctx.topo.gpus_per_host
    gpus = ctx.gpu_of_rank
    out = []
    for start in range(0, len(gpus), gph):
        block = gpus[start:start + gph]
        out.append((ctx.topo.host_names[int(block[0]) // gph], [int(g) % gph for g in block]))
    return out


def hostfile(ctx: EmitContext) -> tuple[str, str | None]:
    """(hostfile text, --include value or None).  The include names the slots of hosts that use other GPUs than
    their first ones (DeepSpeed runs a host's ranks on its listed slots in ascending order)."""
    gph = ctx.topo.gpus_per_host
    nodes = node_slots(ctx)
    lines = [f"# DeepSpeed hostfile: node rank k is line k (placement {ctx.plan.tool_version}, "
             f"{ctx.plan.model} on {ctx.plan.num_gpus} GPUs)\n"]
    partial = any(sorted(local) != list(range(len(local))) for _, local in nodes)
    for host, local in nodes:
        lines.append(f"{host} slots={gph if partial else len(local)}\n")
    include = "@".join(f"{h}:{','.join(map(str, sorted(local)))}" for h, local in nodes) if partial else None
    return "".join(lines), include


def _ep_groups_match(lay) -> bool:
    """DeepSpeed's EP groups (stride tp) equal placement's (etp innermost, then ep) iff etp == tp."""
    return lay.tp == 1 or lay.etp == lay.tp


def _hosts_spanned(ctx: EmitContext, ranks: list[int]) -> int:
    return len(set((ctx.gpu_of_rank[ranks] // ctx.topo.gpus_per_host).tolist()))


def warnings_for(ctx: EmitContext) -> list[str]:
    """What DeepSpeed cannot express of this plan, each with the numbers and what to do."""
    lay, plan = ctx.plan.layout, ctx.plan
    out = []
    nodes = node_slots(ctx)
    gph = ctx.topo.gpus_per_host
    split = [k for k in range(len(nodes))
             if len(set((ctx.gpu_of_rank[k * gph:(k + 1) * gph] // gph).tolist())) > 1]
    if split:
        out.append(f"node rank {split[0]}'s ranks lie on several hosts ({len(split)} such node ranks): a hostfile "
                   f"gives each host one block of {gph} consecutive ranks, so DeepSpeed cannot launch this mapping")
    permuted = [(k, h, local) for k, (h, local) in enumerate(nodes) if local != sorted(local) and k not in split]
    if permuted:
        k, host, local = permuted[0]
        out.append(f"the mapping orders GPUs inside {len(permuted)} node(s) (first: {host}, ranks {k * gph}.. on "
                   f"local GPUs {','.join(map(str, local))}); the DeepSpeed launcher sorts a host's slots and sets "
                   f"CUDA_VISIBLE_DEVICES to them, so it would run rank {k * gph} on GPU {sorted(local)[0]}. "
                   f"deepspeed.sh launches with torchrun instead, exporting each node's CUDA_VISIBLE_DEVICES in the "
                   f"planned order (DeepSpeed reads RANK and LOCAL_RANK from torchrun)")
    if lay.cp > 1:
        out.append(f"cp {lay.cp}: DeepSpeed has no ring context parallelism (its Ulysses sequence parallelism is an "
                   f"all-to-all over heads, priced differently, on a world of sp x dp only). The topology keeps a "
                   f"'context' axis so ranks and batch arithmetic match the plan, but the ring attention and the "
                   f"gradient all-reduce over topology.get_axis_comm_lists('context') must come from your model code "
                   f"(DeepSpeed reduces gradients and shards ZeRO over 'data' only)")
    if ctx.moe and lay.ep > 1:
        if lay.etp > 1:
            out.append(f"etp {lay.etp}: DeepSpeed MoE has no expert tensor parallelism; each rank holds whole "
                       f"experts, {lay.etp}x the plan's expert weight memory")
        if not _ep_groups_match(lay):
            ds = [lay.tp * j for j in range(lay.ep)]
            ours = list(range(lay.ep))  # etp 1: ep innermost within the stage's ranks
            out.append(f"DeepSpeed forms EP groups from one TP index of the data-parallel ranks (stride tp {lay.tp}: "
                       f"rank 0 with {ds[1]}, {ds[2] if lay.ep > 2 else ds[1]}, ...), the plan from consecutive "
                       f"ranks (etp {lay.etp}); its EP all-to-all spans {_hosts_spanned(ctx, ds)} hosts instead of "
                       f"{_hosts_spanned(ctx, ours)}. Plan with etp = tp to match DeepSpeed")
    if ctx.moe and lay.zero_stage == 3:
        out.append(refusal("DeepSpeed refuses ZeRO-3 with its native MoE layers, which this file builds (runtime/"
                           "engine.py _validate_zero3_moe_compatibility: \"Native DeepSpeed MoE is not supported with "
                           "ZeRO Stage 3. Use AutoEP or choose ZeRO stage 1/2\"): deepspeed.initialize fails; plan "
                           "with --zero 1 or --zero 2 (DeepSpeed 0.19.8's AutoEP, the JSON's `expert_parallel` "
                           "section, replaces a model's own MoE layers and runs with ZeRO-3; placement neither writes "
                           "nor prices it)"))
    if lay.zero_stage == 3 and lay.dp_shard < lay.dp:
        out.append(f"HSDP (shard {lay.dp_shard} of dp {lay.dp}) is not expressed: DeepSpeed 0.19.8 removed MiCS, so "
                   f"ZeRO-3 shards over the whole data-parallel group of {lay.dp}")
    if lay.pp > 1 and lay.zero_stage >= 2:
        out.append(refusal(f"DeepSpeed's PipelineEngine refuses ZeRO-{lay.zero_stage} with pipeline parallelism (it "
                           f"asserts stage < 2): deepspeed.initialize fails; plan with --zero 0 or --zero 1"))
    if lay.pp > 1 and len(set(lay.stage_layers)) > 1:
        split_at = np.cumsum([0, *lay.per_rank_layers()]).tolist()
        out.append(f"uneven stages (layers first/middle/last {'/'.join(map(str, lay.stage_layers))}): PipelineModule "
                   f"partitions by 'parameters', 'uniform' or 'type:<regex>' only, which balance the layers; for "
                   f"this split override its _partition_layers to set self.parts at transformer layers "
                   f"{', '.join(map(str, split_at))} (plus your embedding and head)")
    if lay.vpp > 1:
        out.append(f"vpp {lay.vpp}: DeepSpeed's pipeline has no interleaved stages; it runs plain 1F1B, whose bubble "
                   f"is about {lay.vpp}x the plan's {plan.breakdown.bubble:.3f} s/step")
    # (a ZeRO-0 pipeline runs the BF16_Optimizer, which the file states as stage 1: its runs line prices the
    # whole-gradient all-reduce after the flush; a QA run found this line saying "without ZeRO" beside a stage 1 and
    # proposing overlap_comm, which the PipelineEngine's reduction after the flush never uses)
    if lay.zero_stage == 0 and plan.breakdown.overlapped.dp > 0 and not bf16_optimizer(ctx):
        remedy = ("ZeRO-1 with overlap_comm hides it" if lay.pp == 1 else
                  "the PipelineEngine reduces after the pipeline flush at every ZeRO stage (runtime/pipe/schedule.py "
                  "TrainSchedule: ReduceGrads after the last backward), so no stage hides it")
        out.append(f"without ZeRO DeepSpeed all-reduces gradients after backward, not during it: the "
                   f"{plan.breakdown.overlapped.dp:.3f} s/step of DP communication the plan hides is exposed; "
                   f"{remedy}")
    free = plan.memory_capacity_bytes - plan.peak_memory_bytes
    if lay.zero_stage in (1, 2) and ipg_bucket_bytes(ctx) > max(free, 0.0):
        size = reduce_bucket_elements(ctx)
        out.append(f"zero_optimization.reduce_bucket_size {size:,} (the plan's ddp_bucket_params): DeepSpeed allocates "
                   f"{IPG_BUFFERS} reduce buckets of that many 16-bit elements on each GPU (stage_1_and_2.py "
                   f"setup_buckets, under contiguous_gradients and overlap_comm), {IPG_BUFFERS} x {size:,} x 2 B = "
                   f"{ipg_bucket_bytes(ctx) / GiB:.1f} GiB that the plan's memory does not hold ("
                   f"{max(free, 0.0) / GiB:.1f} GiB free of {plan.memory_capacity_bytes / GiB:.1f}): the job likely "
                   f"runs out of memory; plan with a smaller --ddp-bucket-params")
    if lay.recompute == "selective":
        modules = "+".join(m.value for m in ctx.recipe.recompute_modules) or "core_attn"
        what = ("torchtitan's per-op policy" if modules == "per_op" else
                "the attention core" if modules == "core_attn" else f"the modules {modules}")
        out.append(f"selective recompute is model code (the plan recomputes {what}); DeepSpeed's checkpointing "
                   f"recomputes whole layers")
    if lay.pp > 1 and ctx.recipe.pipeline_sends_mask:
        mib = 2 * plan.seq_len ** 2 / 2**20
        out.append(f"the plan is priced with the {plan.seq_len} x {plan.seq_len} attention mask sent with every "
                   f"activation ({mib:,.0f} MiB per micro-batch from each rank, as GPT-NeoX's GPT2ModelPipe does); "
                   f"the engine sends whatever your PipelineModule's layers return, so layers that return the hidden "
                   f"states alone run faster than the header")
    return out


FP8_WHY = ("the DeepSpeed config has no FP8 switch (bf16 is set); FP8 GEMMs come only from model code such as "
           "Transformer Engine layers")


def _code_lines(ctx: EmitContext) -> list[str]:
    """The training-script side, as comment lines."""
    lay = ctx.plan.layout
    topo = topology(ctx)
    vocab = f" (the plan priced a vocabulary of {ctx.model.vocab_size:,})" if ctx.model else ""
    # as Megatron's file says what stays the user's (emit.megatron.worker): DeepSpeed takes an LR schedule from the
    # config's `scheduler` section (runtime/constants.py:31) and checkpoints from engine.save_checkpoint
    # (runtime/engine.py:4869)
    lines = [f"yours to add: the training script (TRAIN_SCRIPT) with the model code, data, the tokenizer{vocab}, the "
             "LR schedule (a `scheduler` section in ds_config.json, or your own) and checkpoints "
             "(engine.save_checkpoint(DIR))",
             "In the training script (DeepSpeed takes these in code; args carry --deepspeed_config):",
             f"  # ds_config.json's {OPTIMIZER_NOTE} (an optimizer passed to deepspeed.initialize replaces it, and an "
             "MoE model's then needs its expert parameter groups split by hand)",
             "  import deepspeed",
             "  from deepspeed.runtime.pipe.topology import PipelineParallelGrid" if lay.pp == 1 else None,
             "  deepspeed.init_distributed()",
             f"  from ds_topology import topology  # ds_topology.py: {topo}"]
    lines = [x for x in lines if x is not None]
    if lay.pp > 1:
        lines += ["  from deepspeed.pipe import PipelineModule  # TransformerLayer: your transformer block's class",
                  '  model = PipelineModule(layers, topology=topology, partition_method="type:TransformerLayer",',
                  f"                         activation_checkpoint_interval={_interval(ctx)}, "
                  "loss_fn=loss_fn)",
                  "  engine, _, _, _ = deepspeed.initialize(args=args, model=model,",
                  "                                         model_parameters=model.parameters())",
                  "  mpu = model.mpu()  # the module's PipelineParallelGrid"]
        if lay.recompute == "full":  # the module checkpoints through deepspeed.checkpointing, which reads the JSON
            lines += ["  deepspeed.checkpointing.configure(mpu, deepspeed_config=args.deepspeed_config)"]
    else:
        lines += ["  mpu = PipelineParallelGrid(topology=topology)  # data and tensor groups in the planned rank order",
                  "  engine, _, _, _ = deepspeed.initialize(args=args, model=model,",
                  "                                         model_parameters=model.parameters(), mpu=mpu)"]
        if lay.recompute == "full":
            lines += ["  deepspeed.checkpointing.configure(mpu, deepspeed_config=args.deepspeed_config)",
                      "  # and run each transformer layer through deepspeed.checkpointing.checkpoint(layer, x)"
                      if _interval(ctx) == 1 else
                      f"  # and run each chunk of {_interval(ctx)} transformer layers through "
                      f"deepspeed.checkpointing.checkpoint(chunk, x)"]
    if lay.tp > 1:
        lines.append(f"  # tensor parallelism (tp {lay.tp}) is model code over mpu.get_slice_parallel_group()"
                     + (", with sequence parallelism" if lay.sequence_parallel else ""))
    if ctx.moe:
        lines.append(f"  from ds_topology import ep_size  # {lay.ep}: each MoE layer's expert-parallel degree")
        top_k = ctx.model.moe.top_k if ctx.model is not None and ctx.model.moe is not None else "top_k"
        cf = ctx.recipe.moe_capacity_factor
        routing = f"capacity_factor={cf:g}" if cf is not None else "drop_tokens=False"
        lines.append(f"  # experts: deepspeed.moe.layer.MoE(..., num_experts=N, ep_size=ep_size, k={top_k}, "
                     f"{routing}), as priced (MoE's defaults are k=1 and drop_tokens=True: top-1 routing that "
                     f"drops tokens past capacity_factor 1.0, moe/layer.py); deepspeed.initialize builds the EP "
                     f"groups from it (without it, MoE's default ep_size 1)")
    rope = ctx.model.llama3_rope if ctx.model is not None else None
    if rope is not None:  # the architecture is the model code's: the JSON has no RoPE key
        lines.append(f"  # RoPE: the model's llama3 scaling (factor {rope.factor:g}, low_freq_factor "
                     f"{rope.low_freq_factor:g}, high_freq_factor {rope.high_freq_factor:g}, "
                     f"original_max_position_embeddings {rope.original_max_position_embeddings}) is model code, no "
                     f"DeepSpeed key (transformers' LlamaRotaryEmbedding applies config.json's rope_scaling); "
                     f"without it the model trains plain RoPE")
    features = gpt_oss_features(ctx.model)
    if features:  # model code too: the JSON has no key for an activation, a softmax or a RoPE
        lines.append(f"  # architecture ({'; '.join(features)}): model code, no DeepSpeed key (transformers' "
                     f"modeling_gpt_oss.py runs GPT-OSS's); without it the model trains another model")
    attention = attention_features(ctx.model)
    if attention:  # a window or partial RoPE is model code as well (transformers applies config.json's)
        lines.append(f"  # attention ({'; '.join(attention)}): model code, no DeepSpeed key (transformers' modeling "
                     f"code applies config.json's sliding_window and partial_rotary_factor where its model has "
                     f"them); without it the model trains another model")
    return lines


RUNS_INSTEAD = {
    "moe_dispatcher": "DeepSpeed-MoE runs its all-to-all dispatch",
    "grad_buckets": "its ZeRO optimizer fills the reduce buckets by size (reduce_bucket_size), in the order the "
                    "gradients arrive",
    "cuda_graphs": "the engine runs without CUDA graphs, with the host launch time the plan priced away",
    "tp_comm_overlap": "TP collectives run exposed",
    "pp_comm_overlap": "its PipelineEngine has no interleaved schedule (the files run one chunk per stage), where "
                       "the overlap prices nothing",
    "ep_comm_overlap": "the EP all-to-all runs exposed",
    "align_param_gather": "its PipelineEngine has no interleaved schedule (the files run one chunk per stage), where "
                          "the aligned gather prices nothing",
    "delay_wgrad": "expert weight gradients are computed in place",
    "pipeline_layout": "the pipeline engine partitions layers by its partition_method",
    "fp8_params": "weights stay BF16", "optimizer_state_bf16": "Adam moments stay FP32",
    "optimizer_master_weights": "its ZeRO optimizer keeps float32 master weights",
    "activation_func_fp8_input_store": "the MLP activation input stays BF16",
    "loss_chunks": "the model code's LM head and loss run on the whole micro-batch at once",
    "loss_eager_float32": "the model code's own loss runs, priced as the audit of these files prices it (6 bytes a "
                          "logit held, not an eager float32 upcast's 12)",
    "pipeline_unsharded_grads": "its ZeRO-2/3 reduce-scatters each micro-batch's gradients into the shard",
    "zero0_as_fsdp": "its ZeRO stage 0 is plain data parallelism: the gradients all-reduced at the accumulation "
                     "boundary, no FSDP wrapper",
    "dp_reduce_every_microbatch": "it has no HSDP all-reduce (0.19.8 removed MiCS): ZeRO-0/1 reduce at the "
                                  "accumulation boundary, ZeRO-2/3 into the shard every micro-batch",
    "fp32_weights": "its weights are 16-bit (bf16 enabled), with the float32 master copy in its optimizer",
    "fp32_weights_autocast": "its weights are 16-bit (bf16 enabled): no float32 weights under autocast",
    "optimizer_over_replicas": "its ZeRO-3 shards the optimizer state over the whole data-parallel group, with the "
                               "weights (it has no HSDP: 0.19.8 removed MiCS)",
    "reshard_after_backward": "its ZeRO-2 keeps every weight whole (it shards gradients and optimizer state), so "
                              "it gathers the weights once a step, after the optimizer",
    "grad_all_reduce": "its ZeRO optimizer reduce-scatters the gradients (its BF16_Optimizer, which these files "
                       "build at ZeRO stage 0 with a pipeline, all-reduces them: files_run prices that)",
    "cp_comm_type": "the files' 'context' axis is your model code's exchange, with ZeRO over 'data' alone; "
                    "DeepSpeed-Ulysses (all-to-all) is deepspeed.sequence's DistributedAttention in the model code, "
                    "whose ZeRO spans sequence x data, which these files do not configure",
    "dispatch_fp8": "DeepSpeed-MoE dispatches bf16 tokens",
    "fp8_recipe": "a DeepSpeed config has no FP8 recipe",
    "recompute_num_layers": "its activation checkpointing recomputes every layer",
    "mtp_layers": "it trains without multi-token prediction modules",
    "pipeline_schedule": "its PipelineEngine runs 1F1B (TrainSchedule)",
    "cross_entropy_fusion": "the model code's own loss runs",
    "moe_capacity_factor": "the MoE layers of the model code route as they are written",
    "dp_overlap": "its ZeRO optimizer overlaps the gradient reduction (overlap_comm, as these files set it)",
}
"""What DeepSpeed runs instead of each recipe feature it cannot be told (selective recompute, whatever its
modules, has its own warning in warnings_for)."""
STATED = frozenset({"param_gather_overlap", "moe_einsum_dispatch", "attention_kernel", "ddp_bucket_params",
                    "grad_accumulation", "pipeline_p2p_whole", "pipeline_grads_whole", "pipeline_p2p_blocking",
                    "pipeline_p2p_scatter",
                    "cpu_affinity", "grad_reduce_fp32", "cuda_launch_blocking", "checkpoint_sync",
                    "checkpoint_interval", "grad_buffer_passes"})
"""Recipe fields the files state (ds_config.json, the launcher line; ds_topology.py the attention kernel, for the
model code, which the audit reads back) or re-price in `render` themselves.  The launch
lines carry CUDA_LAUNCH_BLOCKING=1 where the plan was priced with it: run on each node, the launcher passes its
environment to the ranks (runner.py, launch.py); only its pdsh runner, offered as a comment, would not."""
YOURS = frozenset({"recompute_modules", "account_for_embedding", "account_for_loss", "pipeline_sends_mask",
                   "fp8_saves_16bit_inputs", "fp8_lm_head", "fp8_recasts_weights", "sp_saves_gathered_inputs",
                   "tp_gathers_16bit",
                   "tp_async_backward"})
"""Recipe fields the model code decides: selective recompute, the stage split, which the PipelineModule's
partition_method makes, and what a stage returns, which the engine sends on (a mask too, GPT-NeoX's
GPT2ModelPipe) (`warnings_for` says each).  How its loss holds the logits is the model code's too
(Megatron-DeepSpeed's works in place on one float32 copy, a transformers model's upcasts them and runs PyTorch's
cross-entropy eagerly), but nothing in the files states it: RUNS_INSTEAD prices it as their audit does."""


def zero_over_data(plan: Plan) -> tuple[Plan, str]:
    """A plan with cp > 1 as DeepSpeed runs it, and that in words: the ring attention is the model code's, its time
    priced as the plan's ring, and the memory of ZeRO over the 'data' ranks alone priced: the shards the plan spread
    over cp x dp ranks are cp times larger (the optimizer state; ZeRO-2's gradients too; ZeRO-3's weights too: a user
    trial's 77.4 GiB plan held 83.0, a ZeRO-3 header's 7.9 GiB about 11).  The emitted file's header and the audit
    of such files both use it (a user trial: the header said 114.7 GiB, does not fit, and the audit of the same
    files 67.1, fits)."""
    lay, m = plan.layout, plan.memory
    shards = {1: "optimizer state", 2: "optimizer state and gradients",
              3: "weight, gradient and optimizer shards"}.get(lay.zero_stage, "")
    # the plan's shard group is cp x dp (ZeRO-3: cp x dp_shard, HSDP), DeepSpeed's the dp 'data' ranks
    group = lay.cp * ((lay.dp_shard or lay.dp) if lay.zero_stage == 3 else lay.dp)
    factor = max(group / lay.dp, 1.0)
    grown = {1: ("optimizer_bytes",), 2: ("optimizer_bytes", "grads_bytes"),
             3: ("weights_bytes", "grads_bytes", "optimizer_bytes")}.get(lay.zero_stage, ())
    extra = (factor - 1.0) * sum(getattr(m, f) for f in grown)
    held = plan.peak_memory_bytes + extra
    memory = (f": its {shards} {factor:g}x as large as over cp x dp, {extra / GiB:.1f} GiB more a GPU, "
              f"{held / GiB:.1f} of {plan.memory_capacity_bytes / GiB:.1f} GiB"
              + (f" {OVER_CAPACITY}" if held > plan.memory_capacity_bytes else "")) if extra else ""
    words = (f"cp {lay.cp} only as your model code's ring attention (its time priced as the plan's ring), with ZeRO "
             f"over the {lay.dp} 'data' ranks (not cp x dp = {lay.cp * lay.dp}){memory}")
    as_run = plan.model_copy(update={
        "peak_memory_bytes": held, "fits": plan.fits and held <= plan.memory_capacity_bytes,
        "memory": m.model_copy(update={f: getattr(m, f) * factor for f in grown})})
    return as_run, words


def bf16_optimizer(ctx: EmitContext) -> bool:
    """Whether the files run DeepSpeed's BF16_Optimizer for the plan: a ZeRO-0 plan under the PipelineEngine, which
    DeepSpeed runs as its BF16_Optimizer whatever the files say (runtime/engine.py:2316-2320
    `_do_optimizer_sanity_check` returns BFLOAT16 for a bf16 model whose gradient accumulation dtype is its own when
    `pipeline_parallelism`; without a pipeline, DDP_BFLOAT16).  The files state it as stage 1 with an fp32 gradient
    buffer (config), which DeepSpeed also builds it for, so that the buffer is not bf16."""
    return ctx.plan.layout.zero_stage == 0 and ctx.plan.layout.pp > 1


def _runs_bf16_optimizer(ctx: EmitContext, runs: Runs) -> None:
    """What the BF16_Optimizer runs of a ZeRO-0 plan, as the audit of these files reads it (audit/readers/common.py
    deepspeed_grad_accumulation): the fp32 master weights and Adam state sharded over the data-parallel ranks, as
    ZeRO-1 (runtime/bf16_optimizer.py:179-188, a partition per dp rank), each micro-batch's gradient copied into the
    optimizer's own buffer after its backward (runtime/pipe/engine.py:859-862 `update_hp_grads`), the whole gradient
    all-reduced at the step boundary (runtime/pipe/engine.py:287-298 `_bf16_reduce_grads`) and the updated weights
    all-gathered inside step() (runtime/bf16_optimizer.py:593-600 `update_lp_params`).  A plan priced at stage 0
    held every rank's whole optimizer state (a QA run: the header said 65.9 GiB, the audit of its files 49.1)."""
    lay = ctx.plan.layout
    runs.set_layout("zero_stage", 1, f"DeepSpeed's BF16_Optimizer, which zero_optimization.stage 1 with "
                                     f"data_types.grad_accum_dtype fp32 builds (bf16; runtime/engine.py "
                                     f"_do_optimizer_sanity_check; at stage 0 it keeps its gradients in bf16): "
                                     f"the fp32 master "
                                     f"weights and Adam state sharded over the {lay.dp} data-parallel ranks as ZeRO-1 "
                                     f"(not ZeRO-0), the whole gradient all-reduced, the updated weights all-gathered "
                                     f"inside step()")
    runs.recipe["grad_all_reduce"] = True
    runs.what[:] = [w for w in runs.what if not w.startswith("grad_all_reduce ")]  # runs_recipe's ZeRO-optimizer word
    if ctx.recipe.param_gather_overlap:
        runs.recipe["param_gather_overlap"] = False
    if ctx.recipe.grad_accumulation is not GradAccumulation.FP32_COPY:
        # its buffer in fp32: config() writes zero_optimization.stage 1 with data_types.grad_accum_dtype fp32
        runs.recipe["grad_accumulation"] = GradAccumulation.FP32_COPY
        runs.what.append(f"each micro-batch's gradients added into the BF16_Optimizer's fp32 buffer after its "
                         f"backward (bf16_optimizer.py update_hp_grads), not {ctx.recipe.grad_accumulation.value}")


def files_run(ctx: EmitContext) -> Runs:
    """What the files run where DeepSpeed cannot be told the plan (each is also a warning)."""
    lay, plan = ctx.plan.layout, ctx.plan
    # no attention of DeepSpeed's own: its context parallelism is the model code's (warnings_for), so Transformer
    # Engine's context-parallel refusals, Megatron-Core's, do not apply (a QA run: gpt-oss-120b at cp 2 with
    # --cp-comm-type a2a was refused, exit 2, for TE's sinks rule, naming the flag it was given, and got no file)
    runs = Runs(runs_te=False)
    if plan.precision == "fp8":
        runs.set_precision(plan, "bf16")
    if lay.vpp > 1:
        runs.set_layout("vpp", 1, f"plain 1F1B (not {lay.vpp} interleaved stages)")
    # ZeRO-3 partitions over the engine's seq_data_parallel_group (runtime/engine.py:2768), the mpu's 'data'
    # axis: all dp ranks (no MiCS in 0.19.8, and hpZ only adds a secondary weight copy)
    runs.shard_whole_dp(plan, "DeepSpeed 0.19.8")
    if lay.cp > 1:  # no ring attention in DeepSpeed: the model code's, priced as the plan's ring; ZeRO over 'data'
        runs.as_run = zero_over_data
    runs_recipe(ctx, RUNS_INSTEAD, runs)
    priced = megatron_default_bucket(lay)
    if (lay.zero_stage in (1, 2) and ctx.recipe.ddp_bucket_params is None and priced > BUCKET_ELEMENTS
            and matters("ddp_bucket_params", lay)):
        # a plan priced with a Megatron-Core default bucket larger than placement's DeepSpeed bucket, which the file
        # writes instead (reduce_bucket_elements): its layer-0 tail is what the file runs
        runs.recipe["ddp_bucket_params"] = BUCKET_ELEMENTS
        runs.what.append(f"reduce buckets of {BUCKET_ELEMENTS:,} elements (zero_optimization.reduce_bucket_size; not "
                         f"the {priced:,}-parameter buckets of Megatron-Core's default, max(40M, 1M x dp {lay.dp} x "
                         f"cp {lay.cp}), the plan was priced with)")
    if lay.zero_stage <= 1 and ctx.recipe.grad_buffer_passes:
        runs.recipe["grad_buffer_passes"] = 0
        runs.what.append(f"no Megatron-Core gradient buffer to zero, scale and NaN-check (not "
                         f"{ctx.recipe.grad_buffer_passes} passes a step: its ZeRO optimizer frees the gradients, "
                         f"zero_grad set_to_none; its own copies are not priced)")
    if lay.zero_stage in (1, 2) and ctx.recipe.param_gather_overlap:
        runs.recipe["param_gather_overlap"] = False
        runs.what.append("the updated weights all-gathered inside optimizer.step(), before the next forward (not "
                         "behind it: stage_1_and_2.py all_gather_dp_groups)")
    if lay.pp > 1 and not ctx.recipe.pipeline_p2p_blocking:
        runs.recipe["pipeline_p2p_blocking"] = True
        runs.what.append("each send and receive between pipeline stages as a blocking call of its own (not paired "
                         "with the opposite transfer: PipelineEngine's p2p)")
    if lay.pp > 1 and lay.tp > 1 and not lay.sequence_parallel and not ctx.recipe.pipeline_p2p_scatter \
            and not ctx.recipe.pipeline_p2p_whole:
        runs.recipe["pipeline_p2p_scatter"] = True
        runs.what.append("each TP rank's 1/tp share of a stage's output sent and all-gathered on arrival (not the "
                         "whole activation: PipelineEngine's partitioned sends, pipe_partitioned true)")
    if bf16_optimizer(ctx):
        _runs_bf16_optimizer(ctx, runs)
    elif ctx.recipe.grad_accumulation is not GradAccumulation.AUTOGRAD:  # its ZeRO optimizer (stage >= 1)
        runs.recipe["grad_accumulation"] = GradAccumulation.AUTOGRAD
        runs.what.append(f"gradients accumulated by autograd in .grad (not {ctx.recipe.grad_accumulation.value})")
    if ctx.moe and ctx.recipe.moe_einsum_dispatch is not EinsumDispatch.MICRO_BATCH:
        # its native MoE layer (sharded_moe.py MOELayer): one-hot mask GEMMs over the micro-batch's tokens
        runs.recipe["moe_einsum_dispatch"] = EinsumDispatch.MICRO_BATCH
        runs.what.append(f"each MoE layer's tokens dispatched and combined by one-hot mask GEMMs over the "
                         f"micro-batch (DeepSpeed-MoE's MOELayer einsums), not "
                         f"{ctx.recipe.moe_einsum_dispatch.value}")
    runs_model(ctx, "deepspeed", runs)  # your model code runs the model as given
    return runs


def render(ctx: EmitContext) -> tuple[str, list[str], dict[str, str]]:
    lay, plan = ctx.plan.layout, ctx.plan
    warnings = warnings_for(ctx) + recipe_warnings(ctx, "DeepSpeed 0.19.8", RUNS_INSTEAD)
    if plan.precision == "fp8":
        warnings.insert(0, f"{FP8_WHY}: this file runs bf16")
    runs = files_run(ctx)
    line, warn = header_runs("DeepSpeed", warnings, *ctx.runs_as(runs))
    if warn:
        warnings.insert(0, warn)
    head = header(ctx, VERSION, runs=line)
    host_text, include = hostfile(ctx)
    cfg = {"_comment": [line[2:] for line in head.splitlines()] + [f"WARNING: {w}" for w in warnings]
           + [OPTIMIZER_NOTE]}
    cfg |= config(ctx)
    world = plan.num_gpus
    derived = [f"DeepSpeed derives data parallelism {lay.dp} from the topology's 'data' axis "
               f"(world {world} / (pp {lay.pp} x cp {lay.cp} x tp {lay.tp})) and requires",
               f"train_batch_size {plan.global_batch} = micro-batch {lay.micro_batch_size} x "
               f"gradient_accumulation_steps {lay.num_microbatches} x dp {lay.dp}"]
    if world != lay.dp:
        derived.append(f"without that mpu it takes dp = world size {world} and rejects the JSON")
    axes = "pipe, data, context, model = pp, dp, cp, tp" if lay.cp > 1 else "pipe, data, model = pp, dp, tp"
    body = [f"rank order: the topology's axes run outermost to innermost ({axes}), placement's order",
            "files: ds_config.json (batch, ZeRO, precision, checkpointing, pipeline), hostfile (node rank k = line k)",
            *derived, "", *_code_lines(ctx)]
    text = head + warn_block(warnings) + "".join(f"# {x}\n" if x else "#\n" for x in body)
    launch = launch_lines(ctx, include, runs)
    if _permuted(ctx):
        text += "# the DeepSpeed launcher would lose the planned GPU order (see WARNING):\n"
        text += "".join(f"# {x}\n" if not x.startswith("#") else f"{x}\n" for x in launch.splitlines())
        text += _torchrun_permuted(ctx)
    else:
        text += launch
    return text, warnings, {"ds_config.json": json.dumps(cfg, indent=2) + "\n", "hostfile": host_text,
                            TOPOLOGY_FILE: topology_module(ctx)}


TOPOLOGY_FILE = "ds_topology.py"
ATTENTION_KERNELS = ("flash: cuDNN or FlashAttention-3; flash2: FlashAttention-2 or PyTorch's "
                     "scaled_dot_product_attention; unfused: the scores in HBM")
"""What each `attention_kernel` of ds_topology.py means for the model code (placement/specs/training.py)."""


def topology_module(ctx: EmitContext) -> str:
    """`ds_topology.py`: the plan's DeepSpeed topology as a module the training script imports, and the file
    `placement audit` reads TP, CP, DP and PP from (DeepSpeed takes them in code, not in its JSON); for an MoE model
    also `ep_size`, which the model code passes to each `deepspeed.moe.layer.MoE` (the only place DeepSpeed takes
    expert parallelism: moe/layer.py) and the audit reads as ep."""
    lay, plan = ctx.plan.layout, ctx.plan
    cls = "PipeModelDataParallelTopology" if lay.cp == 1 else "ProcessTopology"
    use = ("model = PipelineModule(layers, topology=topology, ...)" if lay.pp > 1 else
           "mpu = PipelineParallelGrid(topology=topology)")
    ep = f", ep {lay.ep}" if ctx.moe else ""
    return (f'"""DeepSpeed rank topology of a placement plan (placement {plan.tool_version}): {plan.model} on '
            f'{plan.num_gpus} GPUs,\ntp {lay.tp}, cp {lay.cp}, pp {lay.pp}, dp {lay.dp}{ep}; axes outermost first, tp '
            f'innermost (placement\'s rank order).\n\n'
            f'Import it from the training script after deepspeed.init_distributed():\n'
            f'    from ds_topology import topology\n    {use}\n"""\n\n'
            f"from deepspeed.runtime.pipe.topology import {cls}\n\n"
            f"topology = {topology(ctx)}\n"
            f"\n# for your data loader: the sequence length the plan is priced with (tokens per sample)\n"
            f"seq_len = {plan.seq_len}\n"
            f"\n# for your model code: the attention kernel the plan is priced with ({ATTENTION_KERNELS})\n"
            f"attention_kernel = {ctx.recipe.attention_kernel.value!r}\n"
            + (f"\n# for your tensor-parallel layers over mpu.get_slice_parallel_group(): shard the norm/dropout "
               f"activations\n# along the sequence (all-gather before, reduce-scatter after each TP block)\n"
               f"sequence_parallel = {lay.sequence_parallel}\n" if lay.tp > 1 else "")
            + (f"\n# for your MoE layers: deepspeed.moe.layer.MoE(..., num_experts={ctx.model.moe.num_experts}, "
               f"ep_size=ep_size);\n# deepspeed.initialize builds the expert-parallel groups from it (MoE's own "
               f"default is ep_size 1)\nep_size = {lay.ep}\n" if ctx.moe else "")
            # without a pipeline, recompute is the training code's: the JSON cannot say it
            + (f"\n# for your training loop: run each transformer layer through "
               f"deepspeed.checkpointing.checkpoint(layer, x)\nrecompute = {lay.recompute!r}\n"
               if lay.pp == 1 and lay.recompute == "full" and _interval(ctx) == 1 else "")
            + (f"\n# for your training loop: run each chunk of checkpoint_interval transformer layers through "
               f"deepspeed.checkpointing.checkpoint(chunk, x)\nrecompute = {lay.recompute!r}\n"
               f"checkpoint_interval = {_interval(ctx)}\n"
               if lay.pp == 1 and lay.recompute == "full" and _interval(ctx) > 1 else "")
            # selective recompute is model code at any pp: the modules priced, which the audit reads back (a user
            # trial: the header priced them, the files said nothing, and the audit priced none, 2x the memory)
            + (f"\n# for your model code: rerun these modules of each layer in backward "
               f"(deepspeed.checkpointing.checkpoint around each)\nrecompute = 'selective'\n"
               f"recompute_modules = {[m.value for m in ctx.recipe.recompute_modules or CORE_ATTN_ONLY]!r}\n"
               if lay.recompute == "selective" else ""))


def _permuted(ctx: EmitContext) -> bool:
    """Whether the mapping orders GPUs inside a node, which the deepspeed launcher (it sorts a host's slots) would
    lose: the file then launches with torchrun instead (`_torchrun_permuted`)."""
    return any(local != sorted(local) for _, local in node_slots(ctx))


def launcher_line(ctx: EmitContext, include: str | None, node_rank: str | None, master: str, port: str,
                  hostfile_path: str = "hostfile", config_path: str = "ds_config.json", env: bool = True) -> str:
    """One deepspeed launcher command: the plan's binding (`--bind_cores_to_rank` where it was priced bound), the
    hostfile and its slot filter, and `--no_ssh --node_rank` (runner.py then runs launch.py for
    that node here, which keeps the binding and this environment: with `env`, CUDA_LAUNCH_BLOCKING=1 where the plan
    was priced with it)."""
    blocking = "CUDA_LAUNCH_BLOCKING=1 " if env and ctx.recipe.cuda_launch_blocking else ""
    bind = "--bind_cores_to_rank " if ctx.recipe.cpu_affinity else ""
    files = f"--hostfile {hostfile_path}{f' --include {include}' if include else ''}"
    node = f" --no_ssh --node_rank {node_rank}" if node_rank is not None else ""
    return (f"{blocking}deepspeed {bind}{files}{node} --master_addr {master} --master_port {port} {TRAIN_SCRIPT} "
            f"--deepspeed --deepspeed_config {config_path}")


def sbatch_task(ctx: EmitContext) -> str:
    """The command each node's task of launch.sbatch execs ($NODE_RANK, $MASTER_ADDR, $MASTER_PORT, $NNODES,
    $GPUS_PER_NODE and $PLAN_DIR set; launch.sbatch exports CUDA_LAUNCH_BLOCKING itself): the deepspeed launcher
    without ssh for that node, as `launch_lines` writes it; torchrun where the launcher would lose the planned GPU
    order (`_permuted`; launch.sbatch sets the node's CUDA_VISIBLE_DEVICES)."""
    if _permuted(ctx):
        return ('torchrun --nnodes "$NNODES" --nproc-per-node "$GPUS_PER_NODE" --node-rank "$NODE_RANK" '
                f'--master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" {numa_binding(ctx)}{TRAIN_SCRIPT} '
                f'--deepspeed --deepspeed_config "$PLAN_DIR/ds_config.json"')
    return launcher_line(ctx, hostfile(ctx)[1], '"$NODE_RANK"', '"$MASTER_ADDR"', '"$MASTER_PORT"',
                         '"$PLAN_DIR/hostfile"', '"$PLAN_DIR/ds_config.json"', env=False)


def launch_lines(ctx: EmitContext, include: str | None, runs: Runs) -> str:
    """The deepspeed launcher lines.  One host: one line, without ssh too (`--no_ssh --node_rank 0`): with a hostfile
    runner.py checks passwordless ssh to its first host before it sees that one host needs none (launcher/runner.py:
    483-492, "Using hostfile at hostfile but host=... was not reachable via ssh"; a QA run of the emitted line).
    Several: one line per node, run on that host, the launcher
    starting that node's ranks itself (`--no_ssh --node_rank k`, node rank k = hostfile line k: runner.py then runs
    launch.py locally, which passes --bind_cores_to_rank on); its pdsh runner, which starts every node from one
    line, drops --bind_cores_to_rank and the environment (launcher/multinode_runner.py PDSHRunner passes only the
    NCCL/PYTHON/UCX/MV2 variables and .deepspeed_env), so that line is only offered, with its own price, where the
    plan binds or blocks."""
    hosts = ctx.hosts_in_rank_order
    port = str(MASTER_PORT)
    if len(hosts) == 1:
        return ALLOCATOR_NOTE + ALLOCATOR_EXPORT + launcher_line(ctx, include, "0", hosts[0], port) + "\n"
    out = ["# one line per node, run on that host (no ssh: each starts its own node's ranks; node rank k = hostfile "
           "line k), or `sbatch launch.sbatch deepspeed`", (ALLOCATOR_NOTE + ALLOCATOR_EXPORT).rstrip("\n")]
    for k, host in enumerate(hosts):
        out += [f"# on {host}", launcher_line(ctx, include, str(k), hosts[0], port)]
    if ctx.recipe.cpu_affinity or ctx.recipe.cuda_launch_blocking:
        pdsh = {"cpu_affinity": False, "cuda_launch_blocking": False}
        other = ctx.priced_as(runs.precision, runs.layout, runs.recipe | pdsh, runs.model, runs_te=runs.runs_te)
        price = "" if other is None else f": {other.step_time_s:.3f} s/step"
        plain = launcher_line(ctx.with_recipe(pdsh), include, None, hosts[0], port, env=False)
        lost = [what for what, on in (("unbound processes", ctx.recipe.cpu_affinity),
                                      ("asynchronous launches", ctx.recipe.cuda_launch_blocking)) if on]
        out += [f"# or one line on {hosts[0]} that starts every node over pdsh, whose runner passes on neither "
                f"--bind_cores_to_rank nor this environment (launcher/multinode_runner.py PDSHRunner): "
                f"{', '.join(lost)}{price} (the export above reaches the other nodes only through a .deepspeed_env "
                f"line PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)", f"#   {plain}"]
    return "\n".join(out) + "\n"


def _torchrun_permuted(ctx: EmitContext) -> str:
    """torchrun per node, each node whose GPU order is not 0, 1, ... with CUDA_VISIBLE_DEVICES in the planned order
    (common.torchrun_lines)."""
    return torchrun_lines(ctx, f"{TRAIN_SCRIPT} --deepspeed --deepspeed_config ds_config.json", MASTER_PORT)
