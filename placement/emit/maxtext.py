"""MaxText 0.2.5 on JAX 0.10.2: `maxtext.yml` (config overrides on top of MaxText's base.yml) and `jax_mesh.py`.

Facts used (MaxText 0.2.5 wheel, JAX 0.10.2, XLA; reference/frameworks.md §5):

* The mesh is `mesh_axes` (outermost first) with one size per axis from the `ici_<axis>_parallelism` and
  `dcn_<axis>_parallelism` keys (`configs/types.py` ici_map / dcn_map; the axis `stage` is read from
  `*_pipeline_parallelism`).  `utils/maxtext_utils.py::create_device_mesh` fills at most one -1 per list
  (`max_utils.fill_unspecified_mesh_axes`: product of ICI = devices per slice, product of DCN = slices) and
  calls `mesh_utils.create_hybrid_device_mesh(ici, dcn, devices)`, which groups devices by `slice_index`
  and tiles one ICI mesh per slice over the DCN shape (DCN outer, ICI inner on every axis).
* On GPUs a slice is a host: XLA gives every host (boot id) its own `slice_index` in process order and
  numbers devices process by process (`xla/pjrt/distributed/topology_util.cc::BuildGlobalTopology`);
  inside a slice JAX sorts GPUs by id (`mesh_utils.create_device_mesh`).  So MaxText's ICI axes live inside
  one host, DCN axes across hosts, and the planned host order is realised by the process id of each
  host (`NODE_RANK`, which MaxText's `max_utils.initialize_jax_for_gpu` passes to
  `jax.distributed.initialize`).  A within-host GPU order needs CUDA_VISIBLE_DEVICES set before the
  process starts: `local_device_ids` cannot reorder (XLA's `GpuClientOptions.allowed_devices` is a set).
* With every axis's ICI part inside the innermost `gpus_per_host` positions, the row-major index of a
  device's mesh coordinate equals process id x gpus_per_host + local index; with `mesh_axes` in
  placement's rank order (pp, dp, cp, tp) that index is the placement rank, so every MaxText axis group
  is a placement group.  MaxText itself moves `stage` before `data` when pipelining (types.py).
* Batch: global batch = per_device_batch_size x devices x gradient_accumulation_steps; with a pipeline,
  each step's batch is cut into num_pipeline_microbatches (a multiple of the stages), and
  layers = stages x num_pipeline_repeats x num_layers_per_pipeline_stage (circular = interleaved).
* Sharding rules (base.yml logical_axis_rules): weights' `embed` dimension is sharded over fsdp, context
  and expert; `data` shards only the batch; expert MLPs are sharded over `tensor` (`mlp_moe`), so the
  expert tensor-parallel size is tp.  `shard_optimizer_over_data` is MaxText's ZeRO-1 over `data` alone, and
  beside fsdp (HSDP) shards the optimizer state and float32 weights over the replicas too.  So a mesh with
  context > 1 runs ZeRO-3 over the context ranks whatever the plan's stage (`placement.audit.maxtext.zero_as_run`,
  with the MaxText source lines): the header prices that as what the file runs, and the audit reads it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

import numpy as np

from placement.audit.maxtext import (
    CUSTOM_NAMES,
    MOE_NAMES,
    REMAT_SAVES,
    WEIGHT_AXES,
    WEIGHTS_GATHERED,
    exact_per_device,
    experts_unsaved,
    framework_rank,
    over_data_priced,
    remat_reruns,
    trained_batch,
    zero_as_run,
)
from placement.cost.constants import GiB
from placement.emit import common
from placement.emit.common import (
    MINIMAL_RECOMPUTES,
    EmitContext,
    Runs,
    header,
    header_runs,
    recipe_warnings,
    refusal,
    runs_recipe,
    warn_block,
)
from placement.frameworks import CAPABILITIES, MAXTEXT_SP
from placement.specs import ModelSpec
from placement.specs.recipe import RecomputeModule
from placement.specs.training import AttentionKernel

VERSION = "MaxText 0.2.5 (JAX 0.10.2)"

# MaxText 0.2.5 configs/base.yml `mesh_axes`, outermost (least network-intensive) first
DEFAULT_MESH_AXES = ("diloco", "data", "stage", "fsdp", "fsdp_transpose", "context", "context_usp_ulysses",
                     "context_autoregressive", "tensor", "tensor_sequence", "expert", "autoregressive")

# mesh axis -> the word in its ici_*/dcn_* key (configs/types.py ici_map)
KEY_WORD = {axis: axis for axis in DEFAULT_MESH_AXES} | {"stage": "pipeline"}

# placement catalog name -> (MaxText model_name, leading dense layers MaxText does not pipeline).
# MaxText pipelines only the MoE layers of a DeepSeek model (types.py: pipeline_parallel_layers defaults
# to num_decoder_layers - first_num_dense_layers; configs/models/deepseek3-671b.yml has 3).
MODELS = {
    "llama3-8b": ("llama3-8b", 0),
    "llama3-70b": ("llama3-70b", 0),
    "llama3-405b": ("llama3-405b", 0),
    "deepseek-v3": ("deepseek3-671b", 3),
    "mixtral-8x7b": ("mixtral-8x7b", 0),
    "mixtral-8x22b": ("mixtral-8x22b", 0),
    "qwen3-235b-a22b": ("qwen3-235b-a22b", 0),
    # the dimensions of these three match the catalog's (maxtext-v0.2.4 configs/models/<name>.yml: hidden, heads,
    # layers, experts, top-k, expert width, shared experts, dense layers, MLA ranks, vocabulary)
    # qwen3-30b-a3b-base.yml is qwen3-30b-a3b.yml with rope_max_timescale 1_000_000 (:37), Qwen3-30B-A3B's HF
    # rope_theta and the catalog's, where qwen3-30b-a3b.yml has 10_000_000 (:37, the 2507 release's); every other key
    # is the same (tests/test_rope_config_mismatch.py)
    "qwen3-30b-a3b": ("qwen3-30b-a3b-base", 0),
    "kimi-k2": ("kimi-k2-1t", 1),
    "deepseek-v2": ("deepseek2-236b", 1),
    "gpt3-175b": ("gpt3-175b", 0),
    # the 0.2.5 wheel's configs/models/gpt-oss-120b.yml (configs/types.py:308 lists the name) has every number of
    # models/gpt-oss-120b.yaml: 36 layers (:52), hidden 2880 (:21), 64 query / 8 KV heads of 64 (:22-24), 128 experts
    # (:48) top-4 (:49) of width 2880 (:42-43), vocabulary 201088 (:53), untied (:56), RMSNorm eps 1e-5 (:54), biased
    # projections (:26, :46-47), a 128-key window (:25; layers/attention_op.py:1177 keeps keys under 128 back, the
    # query's own included, as HF) on every other layer from the first (inhomogeneous_layer_cycle_interval 2, :58;
    # models/gpt_oss.py:45-48 sliding first), sinks (:27), YaRN theta 150000, factor 32, original 4096, beta_fast 32,
    # beta_slow 1, truncate false (:30-38), the quick-GeGLU clamped at 7 with +1 on the linear branch (:44-45;
    # layers/moe.py:1444-1453, sigmoid(1.702 x)), and the router's top-4 of its biased logits with a softmax over
    # the four (layers/moe.py:1328, :1340), as HF's GptOssTopKRouter (tests/test_maxtext_gpt_oss_config.py reads the
    # wheel's file)
    "gpt-oss-120b": ("gpt-oss-120b", 0),
}

# placement recompute -> MaxText remat_policy (layers/nnx_decoders.py::get_remat_policy, :1278-1387).
# get_remat_policy returns None for "none" and "full" alike, and the scanned decoder (scan_layers, base.yml
# default true) wraps every layer in jax.checkpoint(layer_fn, policy=None) unless skip_block_remat
# (_apply_layers_sequentially, :1154-1159), which the standard layers' scan (:2130, :2144) does not set: policy None
# saves only the layer's input, a full recompute.  Only the unscanned loop calls the layer without jax.checkpoint
# for "none" (:2248-2251), so recompute none is remat_policy "none" with scan_layers false (SCAN_LAYERS).
# "minimal" saves the named matmul outputs (minimal_policy, :1258-1276: query/key/value_proj, out_proj,
# mlpwi_0/1, mlpwo) and nothing else of the layer: the attention core (its "context" residual), both norms and
# the MLP's activation function run again in backward (MINIMAL_RECOMPUTES, ACTIVATION_RECOMPUTED).
REMAT = {"none": "none", "selective": "minimal", "full": "full"}
WRITTEN_POLICIES = ("minimal", "minimal_with_context", "save_dot_with_context_except_mlp", "save_dot_except_mlp",
                    "save_qkv_proj", "save_out_proj")
"""The named-save remat policies a file writes for a selective plan, each where the plan's recompute modules are the
ones it reruns (audit.maxtext.remat_reruns: the same table the audit reads them with); minimal otherwise."""
POLICY_OF = {frozenset(remat_reruns(set(REMAT_SAVES[p][0]))): p for p in WRITTEN_POLICIES}
SCAN_LAYERS = {"none": False}
"""scan_layers where the remat_policy needs it (base.yml's true otherwise)."""
ACTIVATION_RECOMPUTED = ("remat_policy {} also recomputes the MLP's activation function (it saves mlpwi_0 and "
                         "mlpwi_1, not their product, and saves the MLP output mlpwo): the plan's price keeps the "
                         "activation output, so expect slightly less activation memory and a few more elementwise "
                         "kernels than the numbers above")

COORDINATOR_PORT = 1234
ENTRYPOINT = "python3 -m maxtext.trainers.pre_train.train"


@dataclass(frozen=True)
class MaxTextMesh:
    axes: tuple[str, ...]
    """mesh_axes, outermost first."""
    sizes: dict[str, int]
    """Every axis's full size."""
    ici: dict[str, int]
    """Part of each axis inside one host (a JAX process, MaxText's slice on GPUs)."""
    dcn: dict[str, int]
    """Part of each axis across hosts; ici x dcn = sizes."""


def mesh_sizes(ctx: EmitContext) -> tuple[dict[str, int], list[str]]:
    """MaxText axis -> size: tp -> tensor, cp -> context, pp -> stage, dp -> data (ZeRO-0/1/2) or fsdp
    (ZeRO-3; HSDP = data x fsdp), ep -> expert carved from the innermost data-parallel ranks."""
    lay = ctx.plan.layout
    warnings = []
    sizes = dict.fromkeys(DEFAULT_MESH_AXES, 1)
    sizes |= {"tensor": lay.tp, "context": lay.cp, "stage": lay.pp}
    if lay.zero_stage == 3:
        sizes |= {"data": lay.dp // lay.dp_shard, "fsdp": lay.dp_shard}
    elif lay.zero_stage == 2 and not zero2_as_zero1(ctx):
        sizes["fsdp"] = lay.dp
    else:
        sizes["data"] = lay.dp
    if lay.ep > 1:
        inner = "fsdp" if sizes["fsdp"] > 1 else "data"
        if sizes[inner] % lay.ep:
            warnings.append(f"ep {lay.ep} does not divide MaxText's {inner} axis ({sizes[inner]}): experts are not "
                            f"sharded (expert axis 1); set ici/dcn_expert_parallelism by hand")
        else:
            sizes[inner] //= lay.ep
            sizes["expert"] = lay.ep
        if lay.cp > 1 and lay.etp == lay.tp:  # else the etp warning below names MaxText's expert group
            warnings.append(f"ep {lay.ep} with cp {lay.cp}: the plan's expert groups span the context ranks, MaxText's "
                            f"expert axis cannot (it is carved from the data-parallel ranks only)")
    if lay.etp != lay.tp and ctx.routed_experts:
        warnings.append(f"etp {lay.etp} != tp {lay.tp}: MaxText shards every expert's MLP over 'tensor' too "
                        f"(base.yml rule mlp_moe), also at ep 1, so experts run with etp {lay.tp} (priced so in "
                        f"\"this file runs\"), the expert group being the {lay.ep} ranks of one tensor coordinate")
    return sizes, warnings


def mesh_axes(ctx: EmitContext) -> tuple[str, ...]:
    """MaxText's default order, put in placement's rank order (pp, dp, cp, tp outermost first)."""
    axes = list(DEFAULT_MESH_AXES)
    if ctx.plan.layout.pp > 1:  # what MaxText does itself when pipelining (types.py)
        i, j = axes.index("stage"), axes.index("data")
        axes[i], axes[j] = axes[j], axes[i]
    if ctx.plan.layout.ep > 1:  # expert = innermost data-parallel ranks, outside context and tensor
        axes.remove("expert")
        axes.insert(axes.index("fsdp_transpose") + 1, "expert")
    return tuple(axes)


def split_ici_dcn(axes: tuple[str, ...], sizes: dict[str, int], per_host: int) -> tuple[dict, dict, list[str]]:
    """ICI takes the innermost `per_host` positions of the mesh (one axis may be split); DCN the rest."""
    ici = dict.fromkeys(axes, 1)
    left = per_host
    for axis in reversed(axes):
        size = sizes[axis]
        if left == 1 or size == 1:
            continue
        if left % size == 0:
            ici[axis], left = size, left // size
        elif size % left == 0:
            ici[axis], left = left, 1
        else:
            break
    warnings = []
    if left != 1:
        warnings.append(f"the mesh {dict((a, sizes[a]) for a in axes if sizes[a] > 1)} does not tile hosts of "
                        f"{per_host} GPUs in rank order: ICI/DCN split by greatest common divisor instead, so groups "
                        f"differ from the plan's")
        ici, left = dict.fromkeys(axes, 1), per_host
        for axis in reversed(axes):
            ici[axis] = math.gcd(sizes[axis], left)
            left //= ici[axis]
        if left != 1:
            warnings.append(refusal(f"no ICI split multiplies to {per_host} GPUs per host: MaxText will reject "
                                    f"this mesh"))
    dcn = {a: sizes[a] // ici[a] for a in axes}
    return ici, dcn, warnings


def build_mesh(ctx: EmitContext) -> tuple[MaxTextMesh, list[str]]:
    sizes, warnings = mesh_sizes(ctx)
    axes = mesh_axes(ctx)
    # a job smaller than one host runs on part of it: the slice is then the whole job
    ici, dcn, more = split_ici_dcn(axes, sizes, min(ctx.topo.gpus_per_host, ctx.plan.num_gpus))
    return MaxTextMesh(axes, sizes, ici, dcn), warnings + more


def zero2_as_zero1(ctx: EmitContext) -> bool:
    """MaxText has no gradient-only sharding: ZeRO-2 becomes ZeRO-1 (shard_optimizer_over_data) when the
    unsharded gradients still fit, else FSDP."""
    p = ctx.plan
    extra = p.memory.grads_bytes * (p.layout.dp - 1)
    return p.peak_memory_bytes + extra <= p.memory_capacity_bytes


def sharding_warnings(ctx: EmitContext, mesh: MaxTextMesh, runs: Runs) -> list[str]:
    """ZeRO mapping, and what MaxText's sharding rules do to weight, gradient and optimizer memory that the price of
    what the file runs (`runs`: the plan's layout with its ZeRO stage as MaxText runs it) does not hold."""
    p, lay = ctx.plan, ctx.plan.layout
    s = mesh.sizes
    warnings = []
    if lay.zero_stage == 2:
        if s["fsdp"] > 1:
            warnings.append(f"MaxText has no ZeRO-2: emitted as FSDP (ZeRO-3, fsdp {s['fsdp']}) because unsharded "
                            f"gradients would not fit; parameters are all-gathered for every micro-batch")
        else:
            extra = p.memory.grads_bytes * (lay.dp - 1)
            warnings.append(f"MaxText has no ZeRO-2: emitted as ZeRO-1 (shard_optimizer_over_data), gradients are "
                            f"not sharded: +{extra / GiB:.1f} GiB per GPU, peak about "
                            f"{(p.peak_memory_bytes + extra) / GiB:.1f} of {p.memory_capacity_bytes / GiB:.1f} GiB")
    if s["context"] > 1 and s["fsdp"] == 1 and lay.zero_stage < 3:
        warnings.append(f"MaxText's context axis shards every weight, its gradient and its optimizer state and "
                        f"gathers them for each use ({WEIGHTS_GATHERED}): this file runs ZeRO-3 over the "
                        f"{s['context']} context ranks, not the plan's ZeRO-{lay.zero_stage}; the 'this file runs' "
                        f"line prices it")
    # dense weights: MaxText shards `embed` over fsdp x context x expert; ZeRO-1 adds `data` for the optimizer
    weights_way = math.prod(s[a] for a in WEIGHT_AXES)
    opt_way = weights_way * (s["data"] if optimizer_over_data(ctx, mesh) else 1)
    # the shards as priced: over the context ranks too (cost.step dense_shard: cp x dp_shard under ZeRO-3,
    # cp x dp otherwise, Megatron's dp-cp group)
    priced = lay.model_copy(update=runs.layout)
    shard = priced.cp * (priced.dp_shard if priced.zero_stage == 3 else priced.dp)
    priced_weights = shard if priced.zero_stage == 3 else 1
    priced_grads = shard if priced.zero_stage >= 2 else 1
    priced_opt = shard if priced.zero_stage >= 1 else 1
    if priced.zero_stage == 3 and runs.recipe.get("optimizer_over_replicas", ctx.recipe.optimizer_over_replicas):
        priced_opt = priced.cp * priced.dp  # and over the HSDP replicas (cost.memory optimizer_over_replicas)
    if (weights_way, weights_way, opt_way) != (priced_weights, priced_grads, priced_opt):
        m = p.memory
        planned = m.weights_bytes + m.grads_bytes + m.optimizer_bytes
        maxtext = (m.weights_bytes * priced_weights / weights_way + m.grads_bytes * priced_grads / weights_way
                   + m.optimizer_bytes * priced_opt / opt_way)
        # the GiB where the price is the plan's: the plan's memory parts are of its own layout
        note = "" if ctx.moe or runs.layout else (f"; weights + gradients + optimizer state about "
                                                  f"{maxtext / GiB:.1f} GiB per GPU instead of {planned / GiB:.1f}")
        warnings.append(f"MaxText shards weights and gradients {weights_way}-way and optimizer state {opt_way}-way "
                        f"over its data-parallel, context and expert axes (base.yml rule embed -> fsdp, context, "
                        f"expert; shard_optimizer_over_data adds data), the price holds weights "
                        f"{priced_weights}-way, gradients {priced_grads}-way and optimizer state {priced_opt}-way"
                        f"{note}; cross-rank weight traffic differs from the prediction")
    return warnings


def optimizer_over_data(ctx: EmitContext, mesh: MaxTextMesh) -> bool:
    """Whether the file sets shard_optimizer_over_data: MaxText's ZeRO-1 over data, and beside an fsdp (HSDP) mesh,
    where it shards the optimizer over the replicas too (recipe optimizer_over_replicas, a MaxText framework row)."""
    lay, s = ctx.plan.layout, mesh.sizes
    sharded = any(s[a] > 1 for a in WEIGHT_AXES)  # a ZeRO-3 plan whose mesh shards the weights (HSDP)
    # never beside an fsdp axis: MaxText 0.2.5 refuses the pair at start-up (MAXTEXT_HSDP; a user trial: every HSDP
    # file whose shard group was wider than its expert axis, llama3-8b z3/hsdp8 on 64 H100, set both)
    # under ZeRO-3 only where the plan shards the optimizer over the replicas (a QA run: --no-optimizer-over-replicas
    # was refused; its data x expert HSDP file now leaves the key out and runs plain HSDP, as priced)
    return s["data"] > 1 and s["fsdp"] == 1 and (lay.zero_stage in (1, 2) or (
        lay.zero_stage == 3 and sharded and ctx.recipe.optimizer_over_replicas))


MAXTEXT_HSDP_WORDS = ("MaxText 0.2.5 refuses beside an fsdp axis at start-up (the 0.2.5 wheel's configs/types.py:"
                      "5605-5621: \"`shard_optimizer_over_data` (Zero-1) cannot be combined with FSDP\")")
"""Why an HSDP file with an fsdp axis does not shard its optimizer over the replicas."""


def plain_hsdp(ctx: EmitContext, mesh: MaxTextMesh) -> bool:
    """An HSDP plan (ZeRO-3 over part of dp) whose file shards the optimizer over the fsdp (and expert, context) ranks
    alone, as placement's HSDP without optimizer_over_replicas: its mesh has an fsdp axis, beside which MaxText
    refuses shard_optimizer_over_data (`optimizer_over_data`), so the framework row does not hold there."""
    lay = ctx.plan.layout
    return lay.zero_stage == 3 and lay.dp_shard < lay.dp and not optimizer_over_data(ctx, mesh)


def rows_written(ctx: EmitContext, mesh: MaxTextMesh) -> frozenset[str]:
    """The framework rows these files do not run at the row's value: `written_rows`, and optimizer_over_replicas (with
    the rule of the layouts it holds on, optimizer_over_replicas_beside_fsdp) for a `plain_hsdp` file, which `runs`
    prices as it runs."""
    plain = frozenset({"optimizer_over_replicas", "optimizer_over_replicas_beside_fsdp"})  # the file leaves the key out
    return (written_rows(ctx) | (plain if plain_hsdp(ctx, mesh) else frozenset())
            | (frozenset({"expert_w1_rerun"}) if w1_rerun(ctx) else frozenset()))


def w1_rerun(ctx: EmitContext) -> bool:
    """Whether the file's experts rerun their second up-projection (recipe expert_w1_rerun): an MLA model's named
    policy that saves mlpwi_1, which `custom` cannot replace (`remat_keys`), under MaxText's sparse path."""
    policy = remat_policy(ctx)[0]
    return bool(moe_names_unsaved(ctx, policy)) and ctx.model is not None and ctx.model.mla is not None


def batch_keys(ctx: EmitContext) -> tuple[dict[str, object], list[str], str]:
    """per_device_batch_size, gradient_accumulation_steps, num_pipeline_microbatches; and the arithmetic."""
    p, lay = ctx.plan, ctx.plan.layout
    m = lay.num_microbatches
    warnings = []
    if lay.pp > 1:  # every micro-batch of the step goes through the pipeline together
        accumulation, keys = 1, {"num_pipeline_microbatches": m}
        if m % lay.pp:
            warnings.append(refusal(f"MaxText needs num_pipeline_microbatches ({m}) to be a multiple of the stages "
                                    f"({lay.pp}); it will reject this config"))
    else:
        accumulation, keys = m, {}
    if p.precision == "fp8" and accumulation > 1:
        warnings.append(refusal(
            f"quantization fp8 with gradient_accumulation_steps {accumulation} ({m} micro-batches of "
            f"{lay.micro_batch_size} per data-parallel rank): {CAPABILITIES['maxtext'].fp8_accumulation}; plan with "
            f"--framework maxtext, which keeps FP8 jobs to one micro-batch a step, or emit bf16"))
    per_device = Fraction(p.global_batch, p.num_gpus * accumulation)
    micro = p.global_batch // accumulation  # the sequences of one micro-batch over all devices
    exact = exact_per_device(micro, p.num_gpus)
    value = float(per_device) if exact is None else exact
    trains = trained_batch(value, p.num_gpus, accumulation)
    if exact is None:  # unreachable below MAX_GLOBAL_BATCH (EXACT_BATCH_ULPS); said, and not priced, if it happens
        warnings.append(common.unpriceable(
            f"no float per_device_batch_size gives {micro} sequences on {p.num_gpus} devices: MaxText 0.2.5 trains "
            f"int({p.num_gpus} x {value!r}) x {accumulation} = {trains} (configs/types.py "
            f"calculate_global_batch_sizes), not the plan's {p.global_batch}, a batch the plan's layout does not "
            f"split"))
    if value < 1.0:  # a user trial: 2,048 sequences loaded to train on 64, unsaid
        loaded = p.num_gpus * accumulation
        warnings.append(f"per_device_batch_size {value:g} is below 1: MaxText 0.2.5 loads one sequence per device "
                        f"({loaded:,} a step) and trains on {p.global_batch:,} of them (configs/types.py "
                        f"calculate_global_batch_sizes), so its data pipeline reads {loaded / p.global_batch:g}x the "
                        f"sequences it trains on (not priced: the input pipeline is not in the step)")
    keys = {"per_device_batch_size": value, "gradient_accumulation_steps": accumulation} | keys
    nearest, said = float(per_device), f"{value:g}" if value.is_integer() else repr(value)
    if value != nearest:  # the nearest float to the quotient truncates one sequence short
        said += (f", the float after {per_device}'s nearest {nearest!r}, whose product MaxText truncates to "
                 f"{trained_batch(nearest, p.num_gpus, accumulation)}")
    elif Fraction(value) != per_device:
        said += f", the nearest float to {per_device}"
    arithmetic = (f"batch: int({p.num_gpus} devices x per_device_batch_size {said}) x gradient_accumulation_steps "
                  f"{accumulation} = {trains} sequences (MaxText's float arithmetic, configs/types.py "
                  f"calculate_global_batch_sizes; the plan's global batch = micro-batch {lay.micro_batch_size} x {m} "
                  f"micro-batches x dp {lay.dp})")
    return keys, warnings, arithmetic


def pipeline_keys(ctx: EmitContext) -> tuple[dict[str, object], list[str]]:
    lay = ctx.plan.layout
    if lay.pp == 1:
        return {}, []
    warnings = []
    _, dense = MODELS.get(catalog_model(ctx), (None, 0))
    layers = ctx.num_layers - dense
    if dense:
        warnings.append(common.unpriceable(
            f"MaxText pipelines only the {layers} MoE layers of this model; its {dense} dense layers run outside the "
            f"pipeline with 'stage' acting as data parallelism, which placement does not price"))
    chunks = lay.pp * lay.vpp
    per_stage = layers // chunks if layers else 0
    uneven = len(set(lay.stage_layers)) > 1
    if per_stage == 0:
        warnings.append(f"cannot pipeline {layers} layers over {lay.pp} stages x {lay.vpp} virtual stages")
        per_stage = 1
    if per_stage * chunks != layers:
        warnings.append(common.unpriceable(
            f"MaxText pipelines equal stages only: the plan's stages hold {lay.stage_layers} layers; emitted "
            f"{lay.pp} stages x {lay.vpp} repeats x {per_stage} layers = {per_stage * chunks} pipelined layers, the "
            f"other {layers - per_stage * chunks} run outside the pipeline, which placement does not price"))
    elif uneven:
        warnings.append(f"MaxText pipelines equal stages only: the plan's stages hold {lay.stage_layers} layers; "
                        f"emitted {lay.pp} stages x {lay.vpp} repeats x {per_stage} layers")
    warnings.append("MaxText's pipeline runs every micro-batch's forward before the backward (a jax.lax.scan "
                    "differentiated by JAX, layers/pipeline.py), not the plan's 1F1B; with its default per-iteration "
                    "checkpoint (set_remat_policy_on_pipeline_iterations) it keeps each iteration's input and "
                    "recomputes the stage forward, so expect memory below and step time above the prediction")
    keys = {"num_layers_per_pipeline_stage": per_stage, "num_pipeline_repeats": lay.vpp,
            "pipeline_parallel_layers": per_stage * chunks}
    return keys, warnings


def catalog_model(ctx: EmitContext) -> str | None:
    """The catalog model whose MaxText config (MODELS) runs the context's model (`catalog_model_of`)."""
    return catalog_model_of(ctx.model_name, ctx.model)


def catalog_model_of(model_name: str, model: ModelSpec | None) -> str | None:
    """The catalog model whose MaxText config (MODELS) runs the model: its own name, or, for a model read from
    elsewhere (a HF config.json, a user's YAML), the catalog model of the same architecture (the torchtitan emitter's
    test: dimensions, vocabulary, experts, MLA, window, partial RoPE); None where MaxText ships none."""
    if model_name in MODELS or model is None:
        return model_name if model_name in MODELS else None
    from placement.emit.torchtitan import same_architecture

    return next((name for name, spec in _catalog_models() if same_architecture(spec, model)), None)


def config_name(ctx: EmitContext) -> str | None:
    """The model_name the file writes (`config_name_of` the context's model)."""
    return config_name_of(ctx.model_name, ctx.model)


def config_name_of(model_name: str, model: ModelSpec | None) -> str | None:
    """The model_name the files write for the model: the MODELS config of its catalog model, or the config of the same
    architecture (SAME_SHAPE) whose RoPE theta is the model's where that one's is not (CONFIG_ROPE: a Qwen3-30B-A3B of
    the 2507 release, theta 1e7, trains under qwen3-30b-a3b, not qwen3-30b-a3b-base); None where MaxText ships none.
    `plan --framework maxtext` takes it for the rows of that config (CONFIG_RECIPE)."""
    name = MODELS.get(catalog_model_of(model_name, model), (None, 0))[0]
    theta = model.rope_base if model is not None else None
    other = SAME_SHAPE.get(name)
    if other is not None and theta is not None and CONFIG_ROPE[name].timescale != theta == CONFIG_ROPE[other].timescale:
        return other
    return name


@cache
def _catalog_models() -> tuple[tuple[str, ModelSpec], ...]:
    """The catalog models of MODELS, read once (catalog_model runs several times a file)."""
    from placement.catalog import load_model

    return tuple((name, load_model(name)) for name in MODELS)


MODEL_VOCABULARY = {"mixtral-8x22b": 32768, "gpt3-175b": 50304}
"""The vocabulary MaxText's config of a catalog model trains where it is not the catalog's (maxtext-v0.2.4
configs/models/mixtral-8x22b.yml 32768 against Mixtral 8x22B v0.1's 32000; gpt3-175b.yml 50304, GPT-3's 50257
padded): a key of the model config, which maxtext.yml cannot override (pyconfig.py merges base, then the model
config, then command-line overrides), so the header prices it (`runs`)."""

OVERRIDE_MODEL_CONFIG = "override_model_config"
"""The key that lets the command line set a model config's keys (configs/types.py:334; pyconfig.py:486-493)."""

SINKS_RUN = frozenset({"gpt-oss-120b"})
"""The model configs of MODELS that train attention sinks (configs/models/gpt-oss-120b.yml:27 attention_sink)."""

MLA_MOE_CONFIGS = frozenset({"deepseek3-671b", "deepseek2-236b", "kimi-k2-1t"})
"""The model configs of MODELS with MLA and routed experts, whose files keep a named remat policy (`custom` cannot
name MLA's kv_proj, which `minimal` saves), so their experts rerun the second up-projection (recipe expert_w1_rerun)."""
EXPERT_W1_WHY = ("MaxText 0.2.5's sparse_matmul path names the routed experts' second up-projection moe_mlpwi_1 only "
                 "(layers/moe.py:2916, :2942), which the named remat policy placement's files write for an MLA model "
                 "does not save (remat_policy custom, which could, has no kv_proj for MLA: configs/types.py), so each "
                 "MoE layer reruns that GEMM in backward")
CONFIG_RECIPE = ({name: (("attention_kernel", AttentionKernel.FLASH,
                          f"model_name {name} trains attention sinks, which MaxText 0.2.5 on GPUs runs only under "
                          f"attention: cudnn_flash_te (layers/attention_op.py:153-157; the default 'autoselected' "
                          f"raises a ValueError), which placement's files write: cuDNN's fused attention"),)
                  for name in SINKS_RUN}
                 | {name: (("expert_w1_rerun", True, f"model_name {name}: {EXPERT_W1_WHY}"),)
                    for name in MLA_MOE_CONFIGS})
"""model_name -> the framework rows (frameworks.CAPABILITIES["maxtext"].recipe) its files run otherwise, for
frameworks.recipe_rows: a config that trains attention sinks runs cuDNN's attention, which the files write
(written_rows), not the Triton kernel of base.yml's 'autoselected' (a QA run: `plan --framework maxtext` priced
gpt-oss-120b's 128 H100 with flash2 at 2.707 s/step, its own maxtext.yml ran cuDNN's at 2.654 s, and the audit of that
file agreed with the file)."""

GPT_OSS_RUNS = ("a gated quick-GELU MLP (gate * sigmoid(1.702 gate) * (up + 1))", "the MLP's inputs clamped at 7",
                "learnable attention sinks (one logit per head)",
                "YaRN RoPE (factor 32, original_max_position_embeddings 4096, beta_fast 32, beta_slow 1, truncate "
                "false)")
"""What model_name gpt-oss-120b trains, in common.gpt_oss_features' words: mlp_activations [sigmoid, linear] as
gate * sigmoid(1.702 gate) * (up + 1) with mlp_activations_limit 7 (configs/models/gpt-oss-120b.yml:44-45,
layers/moe.py:1444-1453), attention_sink (:27) and YaRN (:30-38)."""


def sinks_need_cudnn(ctx: EmitContext, name: str) -> bool:
    """The named config trains attention sinks and the plan's kernel is not cuDNN's, which the file would write
    (written_rows): MaxText 0.2.5 on GPUs runs sinks only under attention: cudnn_flash_te, and raises a ValueError in
    every other flash kernel, the default 'autoselected' too (layers/attention_op.py:153-157, :1733, :1742)."""
    return name in SINKS_RUN and "attention_kernel" not in written_rows(ctx)


GROUP_ROUTED = ("deepseek3", "deepseek4", "kimi-k2")
"""The model_name prefixes whose routers MaxText 0.2.5 limits to groups (layers/moe.py:1321 calls deepseek_routing,
which masks all but the top topk_routing_group of n_routing_groups groups, :1406-1431); every other model_name takes
the top-k of all experts (:1328), whatever the keys."""


def routing_keys(ctx: EmitContext, name: str) -> tuple[dict[str, int], list[str]]:
    """(keys, warnings) for the model's group-limited routing (moe.num_expert_groups, groups_per_token: DeepSeek-V3
    routes to 4 of 8 groups).  base.yml disables it (n_routing_groups and topk_routing_group -1, :387-389) and no
    model config of MODELS sets them (configs/models/deepseek3-671b.yml:17-18 asks for them on the command line), so
    maxtext.yml writes them (a QA run: the file routed DeepSeek-V3 over all 256 experts, its Megatron file over 4 of
    8 groups); a model_name MaxText routes without groups (GROUP_ROUTED) is warned."""
    moe = ctx.model.moe if ctx.model is not None else None
    if moe is None or not moe.num_expert_groups or moe.num_expert_groups <= 1:
        return {}, []
    if not name.startswith(GROUP_ROUTED):
        return {}, [f"the model routes each token to experts of {moe.groups_per_token} of {moe.num_expert_groups} "
                    f"groups, but MaxText 0.2.5 limits routing to groups only for model_names starting "
                    f"{', '.join(GROUP_ROUTED)} (layers/moe.py:1321; model_name {name} takes the top "
                    f"{moe.top_k} of all {moe.num_experts} experts, :1328), and no key changes that: this file "
                    f"trains other routing than the model's, its all-to-all reaching more experts' ranks than priced"]
    return {"n_routing_groups": moe.num_expert_groups, "topk_routing_group": moe.groups_per_token}, []


@dataclass(frozen=True)
class ConfigRope:
    """The RoPE a MaxText 0.2.5 model config trains (configs/models/<name>.yml)."""

    timescale: int
    """rope_max_timescale, RoPE's theta (configs/types.py:2624, an int)."""
    yarn: dict[str, float | int | bool] | None
    """rope_type "yarn"'s numbers in ModelSpec.yarn_rope's names (rope_factor as factor, rope_truncate as truncate;
    the ones the file leaves are base.yml's, :1156-1163), applied by YarnRotaryEmbedding (layers/attentions.py:946-963)
    and under MLA also in the softmax scale (layers/attention_mla.py:756-758); None: rope_type "default"."""
    where: str
    """The config's rope_max_timescale line (its rope_type line where it runs YaRN)."""


CONFIG_ROPE = {
    "llama3-8b": ConfigRope(500_000, None, "configs/models/llama3-8b.yml:28"),
    "llama3-70b": ConfigRope(500_000, None, "configs/models/llama3-70b.yml:28"),
    "llama3-405b": ConfigRope(500_000, None, "configs/models/llama3-405b.yml:29"),
    "deepseek3-671b": ConfigRope(10_000, {"factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                                          "beta_slow": 1, "truncate": True},
                                 "configs/models/deepseek3-671b.yml:48-55"),
    "mixtral-8x7b": ConfigRope(1_000_000, None, "configs/models/mixtral-8x7b.yml:32"),
    "mixtral-8x22b": ConfigRope(1_000_000, None, "configs/models/mixtral-8x22b.yml:32"),
    "qwen3-235b-a22b": ConfigRope(5_000_000, None, "configs/models/qwen3-235b-a22b.yml:38"),
    "qwen3-30b-a3b-base": ConfigRope(1_000_000, None, "configs/models/qwen3-30b-a3b-base.yml:37"),
    "qwen3-30b-a3b": ConfigRope(10_000_000, None, "configs/models/qwen3-30b-a3b.yml:37"),
    "kimi-k2-1t": ConfigRope(50_000, {"factor": 32, "original_max_position_embeddings": 4096, "beta_fast": 1,
                                      "beta_slow": 1, "truncate": True}, "configs/models/kimi-k2-1t.yml:47-53"),
    "deepseek2-236b": ConfigRope(10_000, {"factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                                          "beta_slow": 1, "truncate": True},
                                 "configs/models/deepseek2-236b.yml:45-53"),
    "gpt-oss-120b": ConfigRope(150_000, {"factor": 32, "original_max_position_embeddings": 4096, "beta_fast": 32,
                                         "beta_slow": 1, "truncate": False}, "configs/models/gpt-oss-120b.yml:30-38"),
}
"""The RoPE each model config of MODELS and SAME_SHAPE trains (gpt3-175b's learned positions have none; tests/
test_rope_config_mismatch.py reads each from the 0.2.5 wheel).  maxtext.yml cannot change a key its model config
sets: MaxText merges base.yml and this file, then the model config over them, then the command line's key=value
(configs/pyconfig.py:521), and takes a command-line key the model config also sets only beside
override_model_config=true (:486-493, validate_no_keys_overridden_twice :128-150).  So where the model's RoPE is
another (Qwen3-235B-A22B's theta 1e6 against 5,000,000, the 2507 release's; DeepSeek's pre-training without the
YaRN of their long-context stage), the launch lines pass it (`rope_cli`)."""

SAME_SHAPE = {"qwen3-30b-a3b-base": "qwen3-30b-a3b"}
"""A model config of MODELS -> the config MaxText 0.2.5 ships of the same model with another RoPE theta only (every
other key the same, tests/test_rope_config_mismatch.py), which `config_name` names for a model of its theta."""


def rope_cli(ctx: EmitContext, name: str) -> tuple[dict[str, int], list[str]]:
    """(the command line's RoPE keys, warnings) that make model_name `name` train the model's RoPE where its config
    (CONFIG_ROPE) trains another: the model's theta as rope_max_timescale, and for a model without YaRN under a config
    with it rope_factor 1, which YarnRotaryEmbedding turns into plain RoPE (layers/embeddings.py:691, `freqs /
    rope_factor * (1 - smooth) + freqs * smooth`) and MLA's softmax scale into 1 (layers/attention_mla.py:757, 0.1
    mscale ln(rope_factor) + 1).  Each override is also a warning: maxtext.yml cannot hold it, so a launcher of the
    user's own must pass it.  An MLA model with YaRN numbers of its own is warned (a non-MLA model's YaRN is the
    GPT-OSS features' warning)."""
    m, rope = ctx.model, CONFIG_ROPE.get(name)
    if m is None or rope is None:
        return {}, []
    cli: dict[str, int] = {}
    why = []
    if m.rope_base is not None and m.rope_base != rope.timescale and float(m.rope_base).is_integer():
        cli["rope_max_timescale"] = int(m.rope_base)
        why.append(f"RoPE theta {m.rope_base:,.0f} (not rope_max_timescale {rope.timescale:,}, {rope.where})")
    warnings = []
    if rope.yarn is not None and m.yarn_rope is None and m.rope_scaling is None:
        cli["rope_factor"] = 1
        why.append(f"plain RoPE (not YaRN with rope_factor {rope.yarn['factor']}, {rope.where}: the model states no "
                   f"YaRN, and placement's Megatron-LM files train it unscaled too; rope_factor 1 makes MaxText's YaRN "
                   f"the plain rotation, layers/embeddings.py:691, with an unscaled softmax under MLA, "
                   f"layers/attention_mla.py:757)")
    elif rope.yarn is not None and m.yarn_rope is not None and m.mla is not None:
        differ = common.differs_from_fixed(m.yarn_rope, rope.yarn)
        if differ is not None:
            warnings.append(f"the model's YaRN has {differ[0]}, but model_name {name} trains {differ[1]} "
                            f"({rope.where}), keys of the model config that maxtext.yml cannot override: pass them "
                            f"on the command line with {OVERRIDE_MODEL_CONFIG}=true (configs/pyconfig.py:486-493)")
    if cli:
        words = " ".join(f"{k}={v}" for k, v in ({OVERRIDE_MODEL_CONFIG: "true"} | cli).items())
        warnings.insert(0, f"model_name {name}'s config trains other RoPE than the model's; the launch lines below "
                           f"pass the model's, {'; '.join(why)}, as `{words}`: MaxText merges configs/models/"
                           f"{name}.yml over this file (configs/pyconfig.py:521), so only the command line sets "
                           f"them (with {OVERRIDE_MODEL_CONFIG}, :486-493); a launcher of your own must pass them too")
    return cli, warnings


RUNS_INSTEAD = {
    "checkpoint_interval": "XLA synchronizes nothing around rematerialised layers, so the chunk size prices nothing",
    "grad_buckets": "XLA schedules the gradient reductions itself (priced as one bucket per parameter: "
                    "frameworks.CAPABILITIES['maxtext'])",
    "loss_chunks": "its loss takes the whole micro-batch's logits (num_vocab_tiling 1, its default in base.yml)",
    "checkpoint_sync": "XLA does not synchronize the host around rematerialised layers",
    "moe_dispatcher": "XLA runs its own all-to-all (or ragged all-to-all) token dispatch",
    "cuda_graphs": "XLA compiles the step into its own executable; there are no CUDA-graph scopes to choose",
    "pp_comm_overlap": "its files run no pipeline (pp 1), where the overlap prices nothing",
    "align_param_gather": "its files run no pipeline (pp 1), where the aligned gather prices nothing",
    "tp_comm_overlap": "XLA schedules the TP collectives itself",
    "ep_comm_overlap": "XLA schedules the EP all-to-all itself",
    "recompute_modules": "remat_policy minimal recomputes the attention core and both norms",
    "delay_wgrad": "XLA orders the weight-gradient GEMMs itself",
    "pipeline_layout": "MaxText pipelines equal stages",
    "grad_accumulation": "XLA accumulates the gradients in its own compiled step",
    "grad_all_reduce": "XLA reduces the gradients to the sharded optimizer state itself",
    "dispatch_fp8": "its token dispatch moves bf16",
    "fp8_params": "it keeps its weights in weight_dtype (float32)",
    "optimizer_state_bf16": "its Adam moments stay float32",
    "optimizer_master_weights": "its files keep weight_dtype float32, the master copy",
    "activation_func_fp8_input_store": "XLA keeps the MLP activation input as it compiles it",
    "recompute_num_layers": "remat_policy full recomputes every layer",
    "mtp_layers": "it trains multi-token prediction (mtp_num_layers, base.yml:235, which these files write at cp 1) "
                  "but refuses it on a batch its context-parallel load balancing reordered (\"MTP does not support "
                  "context_parallel_load_balance\", layers/multi_token_prediction.py:504-509; base.yml:1348 true, "
                  "which these files keep): at cp > 1 it trains without the modules",
    "moe_capacity_factor": "its MoE runs base.yml's sparse_matmul path, which these files keep and which never reads "
                           "capacity_factor (only dense_matmul does: layers/moe.py generate_masks): the experts take "
                           "every routed token",
    "cross_entropy_fusion": "XLA compiles the loss itself",
    "loss_eager_float32": "XLA compiles the loss itself",
    "moe_einsum_dispatch": "its files leave base.yml's sparse_matmul true, the ragged-dot path: no one-hot mask GEMMs",
    "dp_overlap": "XLA overlaps the gradient reduction with the backward itself",
    "param_gather_overlap": "XLA schedules the weight gathers beside compute itself",
    "reshard_after_backward": "MaxText has no ZeRO-2: it shards the weights of every step (ZeRO-3) or none",
    "zero0_as_fsdp": "its unsharded data parallelism is XLA's gradient reduction, with no FSDP wrapper at a shard "
                     "of one",
    "dp_reduce_every_microbatch": "XLA schedules the gradient reduction over the data-parallel ranks itself",
}
"""What MaxText runs instead of each recipe feature it cannot be told."""
FORCED = common.forced_fields("maxtext")
"""Recipe fields MaxText runs at one value whatever the plan (frameworks.CAPABILITIES["maxtext"].recipe)."""
STATED = frozenset({"cuda_launch_blocking"})
"""Recipe fields the files state (the environment line)."""
YOURS = frozenset({"cpu_affinity", "account_for_embedding", "account_for_loss", "pipeline_schedule",
                   "pipeline_p2p_whole", "pipeline_grads_whole", "pipeline_p2p_blocking", "pipeline_sends_mask",
                   "pipeline_p2p_scatter",
                   "fp8_saves_16bit_inputs", "fp8_lm_head", "fp8_recasts_weights", "sp_saves_gathered_inputs",
                   "pipeline_unsharded_grads", "tp_async_backward"})
"""Recipe fields the files cannot touch and the job's own setup decides: process binding (MaxText's processes are
started by your launcher), and the pipeline's sends and split, which only priced pipelines have (MaxText plans
run pp 1: frameworks.CAPABILITIES)."""


TE_MAX_SEGMENTS = 32
"""max_segments_per_seq beside attention: cudnn_flash_te (written_rows)."""


RUNS_AT_SOME_LAYOUTS = frozenset({"mtp_layers"})
"""RUNS_INSTEAD entries these files run at some layouts (`runs_instead`): a model's own MTP modules are priced, not left
out before the layout is known (frameworks.model_recipe)."""


def runs_instead(ctx: EmitContext) -> dict[str, str]:
    """RUNS_INSTEAD for this plan: at cp 1 the files state its multi-token prediction (mtp_num_layers, `overrides`),
    which MaxText 0.2.5 builds as MultiTokenPredictionBlock beside the decoder (models/models.py:142-154; a user
    trial: the file said MaxText "cannot be told" it and priced the plan without it)."""
    if ctx.plan.layout.cp == 1:
        return {k: v for k, v in RUNS_INSTEAD.items() if k != "mtp_layers"}
    return RUNS_INSTEAD


def written_rows(ctx: EmitContext) -> frozenset[str]:
    """The framework rows (frameworks.CAPABILITIES["maxtext"].recipe) these files override with the plan's value: a
    plan priced with cuDNN's fused attention (flash) on a model without MLA gets `attention: "cudnn_flash_te"`,
    Transformer Engine's cuDNN attention, which MaxText 0.2.5's own GPU configs run (configs/gpu/models/
    mixtral_8x7b.yml:25, llama2_7b.yml:10), instead of the default Triton kernel (a user trial: the best plan of an
    audited mixtral_8x7b.yml was priced with the Triton kernel, and the file said it "cannot run" cuDNN's), with
    `max_segments_per_seq: 32` as those configs set it (:36, :16): with packing on, MaxText refuses TE attention
    without it (configs/types.py:5329-5330; base.yml:865-867, "something like 32 for GPUs").  MLA's unequal query
    and value head widths stay on the default kernel, and so does context parallelism: TE's attention over packed
    sequences refuses it unless the ring strategy load-balances (layers/attention_op.py:2693-2695, "Packing is only
    supported for load balanced ring attention with context parallelism"), and these files keep base.yml's
    all-gather."""
    mla = ctx.model is not None and ctx.model.mla is not None
    cudnn = ctx.recipe.attention_kernel is AttentionKernel.FLASH and not mla and ctx.plan.layout.cp == 1
    return frozenset({"attention_kernel"}) if cudnn else frozenset()


def overrides(ctx: EmitContext) -> tuple[dict[str, object], MaxTextMesh, list[str], list[str]]:
    """(key -> value in order, the mesh, warnings, explanatory comment lines)."""
    p, lay = ctx.plan, ctx.plan.layout
    mesh, warnings = build_mesh(ctx)
    warnings += sharding_warnings(ctx, mesh, runs(ctx, mesh))
    model = config_name(ctx)
    keys: dict[str, object] = {"base_config": "base.yml", "hardware": "gpu"}
    if model is None:
        warnings.append(common.other_model(
            f"MaxText 0.2.5 ships no model config matching {ctx.model_name}, and model_name \"default\" trains "
            f"base.yml's own model; name a config of yours in model_name, or set the base_* dimensions"))
        model = "default"
    keys["model_name"] = model
    warnings += architecture_warnings(ctx, model)
    if ctx.model is not None and ctx.model.llama3_rope is not None:
        keys["rope_type"] = "llama3.1"  # MaxText's own llama3-* configs leave base.yml's "default", plain RoPE
        warnings += rope_warnings(ctx)
    warnings += rope_cli(ctx, model)[1]
    routing, warn_routing = routing_keys(ctx, model)
    keys |= routing
    warnings += warn_routing
    keys["max_target_length"] = p.seq_len
    if p.precision == "fp8":
        keys["quantization"] = "nanoo_fp8" if p.accelerator.startswith("mi") else "fp8"
    keys["num_slices"] = len(ctx.hosts_in_rank_order)
    keys["mesh_axes"] = list(mesh.axes)
    if mesh.axes != mesh_axes_default_for(lay.pp):
        keys["data_sharding"] = [[a for a in mesh.axes if a != "diloco"]]
    for prefix, part in (("ici", mesh.ici), ("dcn", mesh.dcn)):
        for axis in DEFAULT_MESH_AXES:
            keys[f"{prefix}_{KEY_WORD[axis]}_parallelism"] = part[axis]
    if optimizer_over_data(ctx, mesh):
        keys["shard_optimizer_over_data"] = True
    batch, more, arithmetic = batch_keys(ctx)
    keys |= batch
    pipe, more2 = pipeline_keys(ctx)
    keys |= pipe
    policy, reruns = remat_policy(ctx)
    keys["remat_policy"] = policy
    if "attention_kernel" in written_rows(ctx) or (sinks_need_cudnn(ctx, model) and lay.cp == 1):
        keys["attention"] = "cudnn_flash_te"
        keys["max_segments_per_seq"] = TE_MAX_SEGMENTS
    unsaved = moe_names_unsaved(ctx, policy)
    mla = ctx.model is not None and ctx.model.mla is not None
    if unsaved and mla:
        # MaxText's custom list (configs/types.py tensors) has no kv_proj, which minimal saves for MLA: custom would
        # save less than the policy it stands for, so the file keeps it and says what reruns (a review)
        warnings.append(f"remat_policy {policy} does not save the routed experts' {', '.join(unsaved)} (MaxText's "
                        f"sparse_matmul path tags the experts' second up-projection with that name only, "
                        f"layers/moe.py), so each MoE layer reruns that GEMM in backward; remat_policy custom, which "
                        f"could keep it, cannot name MLA's kv_proj"
                        + ("" if ctx.recipe.expert_w1_rerun else ": the 'this file runs' line prices the rerun"))
        unsaved = ()
    if unsaved:
        # MaxText's ragged (sparse_matmul) expert path tags the second up-projection moe_mlpwi_1 only, which no named
        # policy saves: the file names each tensor (remat_policy custom) so the experts keep what the price keeps (a
        # user trial: minimal priced the experts' w1 output as kept, which MaxText reruns)
        named = set(REMAT_SAVES[policy][0])
        saved = named | set(unsaved) | {moe for dense, moe in MOE_NAMES.items() if dense in named}
        keys["remat_policy"] = "custom"
        keys |= {name: "device" if name in saved else "remat" for name in CUSTOM_NAMES}
        notes_custom = (f"remat_policy custom: {policy}'s tensors and the routed experts' {', '.join(unsaved)} kept "
                        f"on the device (layers/moe.py tags the ragged path's second up-projection moe_mlpwi_1 only, "
                        f"which {policy} does not name)")
    else:
        notes_custom = None
    if lay.recompute in SCAN_LAYERS:
        keys["scan_layers"] = SCAN_LAYERS[lay.recompute]
    if ctx.recipe.mtp_layers and "mtp_layers" not in runs_instead(ctx):
        keys["mtp_num_layers"] = ctx.recipe.mtp_layers  # base.yml:235; no model config sets it
    warnings += more + more2 + recipe_warnings(ctx, "MaxText 0.2.5", runs_instead(ctx), reruns)
    if lay.recompute == "selective" and RecomputeModule.MLP_UP not in reruns:
        warnings.append(ACTIVATION_RECOMPUTED.format(keys["remat_policy"]))
    warnings += common.forced_warnings(ctx, "maxtext", written=rows_written(ctx, mesh))
    notes = [
        f"placement -> MaxText axes: tp -> tensor, cp -> context, pp -> stage, dp -> {zero_words(ctx, mesh)}"
        + (f", ep -> expert (the innermost {lay.ep} data-parallel ranks)" if lay.ep > 1 else ""),
        f"mesh (outermost first): {', '.join(f'{a} {mesh.sizes[a]}' for a in mesh.axes if mesh.sizes[a] > 1)}; "
        f"ICI = inside one host ({math.prod(mesh.ici.values())} GPUs, one JAX process, MaxText's slice on GPUs), "
        f"DCN = across hosts ({keys['num_slices']})",
        arithmetic,
    ]
    if notes_custom:
        notes.append(notes_custom)
    if routing:
        notes.append(f"n_routing_groups {routing['n_routing_groups']}, topk_routing_group "
                     f"{routing['topk_routing_group']}: the model's group-limited routing, which base.yml disables "
                     f"(-1, :387-389) and configs/models/{model}.yml does not set")
    if lay.tp > 1:
        notes.append("MaxText's tensor axis also shards the activations between layers (rule activation_embed -> "
                     "tensor), which is what sequence parallelism saves in memory")
    return keys, mesh, warnings, notes


def architecture_warnings(ctx: EmitContext, name: str) -> list[str]:
    """The model's GPT-OSS features (common.gpt_oss_features) model_name `name` does not train: all of them under a
    config other than gpt-oss-120b, which the file cannot add (it writes no architecture key), those other than
    GPT_OSS_RUNS under it (keys of its model config, which maxtext.yml cannot override: pyconfig.py:521); and with sinks
    under context parallelism, where the cuDNN attention sinks need refuses this file's packed all-gather."""
    features = common.gpt_oss_features(ctx.model, mla_yarn=False)
    out = []
    if name == "gpt-oss-120b":
        other = [f for f in features if f not in GPT_OSS_RUNS]
        if other:
            out.append(f"the model has {'; '.join(other)}, but model_name gpt-oss-120b trains "
                       f"{'; '.join(GPT_OSS_RUNS)} (configs/models/gpt-oss-120b.yml:27-45), keys of the model "
                       f"config that maxtext.yml cannot override: this file trains another model; pass yours on the "
                       f"command line with {OVERRIDE_MODEL_CONFIG}=true (configs/pyconfig.py:486-493)")
    elif features:  # none of the other model configs this file names runs them, and it writes no architecture key
        out.append(f"the model has {'; '.join(features)}, which model_name {name} does not run: MaxText runs "
                   f"them in its gpt-oss model (configs/models/gpt-oss-120b.yml: decoder_block gpt_oss, "
                   f"mlp_activations [sigmoid, linear], mlp_activations_limit, attention_sink, rope_type yarn "
                   f"with rope_factor, beta_fast, beta_slow, rope_truncate; the 0.2.5 wheel), set them in your "
                   f"model config"
                   + ("; with attention sinks MaxText 0.2.5 on GPUs runs only attention: cudnn_flash_te "
                      "(layers/attention_op.py validate_gpu_flash_attention raises a ValueError for this file's "
                      "default 'autoselected'): set it too (the price is FlashAttention-2's class, errs slow)"
                      if ctx.model is not None and ctx.model.attention_sinks
                      and "attention_kernel" not in written_rows(ctx) else ""))
    if sinks_need_cudnn(ctx, name) and ctx.plan.layout.cp > 1:
        out.append(refusal(f"model_name {name} trains attention sinks, which MaxText 0.2.5 on GPUs runs only under "
                           f"attention: cudnn_flash_te (layers/attention_op.py:153-157; the default 'autoselected' "
                           f"raises), and that attention refuses context parallelism over packed sequences unless "
                           f"context_parallel_strategy is a load-balanced \"ring\" (layers/attention_op.py:2693-2695; "
                           f"this file keeps base.yml's \"all_gather\"): plan it with cp 1"))
    return out


def remat_policy(ctx: EmitContext) -> tuple[str, tuple[RecomputeModule, ...]]:
    """(remat_policy the file writes, the modules it reruns): none and full as they are; a selective plan the
    named-save policy that reruns its modules (POLICY_OF), minimal where none does."""
    lay = ctx.plan.layout
    if lay.recompute != "selective":
        return REMAT[lay.recompute], ()
    modules = frozenset(m.value for m in ctx.recipe.recompute_modules or MINIMAL_RECOMPUTES)
    policy = POLICY_OF.get(modules, "minimal")
    return policy, tuple(RecomputeModule(m) for m in remat_reruns(set(REMAT_SAVES[policy][0])))


def moe_names_unsaved(ctx: EmitContext, policy: str) -> tuple[str, ...]:
    """The routed experts' tensors a named policy leaves to rerun though it saves their dense counterparts: MaxText's
    sparse_matmul path (base.yml's default, which these files keep) tags the experts' first up-projection and their
    down-projection with both names (mlpwi_0 / moe_mlpwi_0, mlpwo / moe_mlpwo) but the second up-projection
    moe_mlpwi_1 only (MaxText 0.2.5 layers/moe.py sparse_matmul), so a policy saving mlpwi_1 reruns it."""
    if not ctx.moe or policy not in REMAT_SAVES:
        return ()
    return tuple(experts_unsaved(set(REMAT_SAVES[policy][0])))


def zero_words(ctx: EmitContext, mesh: MaxTextMesh) -> str:
    """The plan's data-parallel degree and ZeRO stage as the MaxText axes and keys the file writes, and what they
    run where that is not the plan's stage (`zero_as_run`)."""
    lay, s = ctx.plan.layout, mesh.sizes
    over = optimizer_over_data(ctx, mesh)
    if s["fsdp"] > 1:
        words = (f"data {s['data']} x fsdp {s['fsdp']} (HSDP)" if s["data"] > 1
                 else "fsdp (ZeRO-2 emitted as ZeRO-3)" if lay.zero_stage == 2 else "fsdp (ZeRO-3)")
    elif over and lay.zero_stage == 3:
        words = (f"data {s['data']} + shard_optimizer_over_data (HSDP replicas; the optimizer state and float32 "
                 f"weights sharded over them too)")
    elif over:
        words = ("data + shard_optimizer_over_data (ZeRO-2 emitted as ZeRO-1)" if lay.zero_stage == 2
                 else "data + shard_optimizer_over_data (ZeRO-1)")
    elif lay.zero_stage == 0:
        words = "data (DDP)"
    else:  # ZeRO-1/2 with data 1, or ZeRO-3 with fsdp 1: no key to write
        words = (f"data {s['data']} (ZeRO-{lay.zero_stage} has no data-parallel ranks of its own to shard over: "
                 f"no shard_optimizer_over_data or fsdp key)")
    zero, _ = zero_as_run(s, over)
    if s["context"] > 1 and s["fsdp"] == 1:
        words += f"; context {s['context']} shards the weights, gradients and optimizer state (ZeRO-3 over it)"
    elif zero != lay.zero_stage and lay.zero_stage != 2:
        words += f"; runs as ZeRO-{zero}"
    return words


MAXTEXT_LLAMA3_ROPE = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192}
"""The Llama 3.1 RoPE scaling MaxText runs under `rope_type: llama3.1` (base.yml; layers/attentions.py picks
LLaMARotaryEmbedding): its four numbers are constants of `LLaMARotaryEmbedding._apply_scaling_factor`
(layers/embeddings.py: scale_factor 8, low_freq_factor 1, high_freq_factor 4, old_context_len 8192), no key."""


def rope_warnings(ctx: EmitContext) -> list[str]:
    """The model's llama3 RoPE factors MaxText's fixed ones (MAXTEXT_LLAMA3_ROPE) are not."""
    spec = ctx.model.llama3_rope if ctx.model is not None else None
    if spec is None:
        return []
    differ = common.differs_from_fixed(spec, MAXTEXT_LLAMA3_ROPE)
    if differ is None:
        return []
    return [f"the model's llama3 RoPE scaling has {differ[0]}, but "
            f"MaxText 0.2.5's rope_type llama3.1 fixes {differ[1]} "
            f"(LLaMARotaryEmbedding._apply_scaling_factor; no key sets them): this file trains other RoPE frequencies "
            f"than the model's"]


def mesh_axes_default_for(pp: int) -> tuple[str, ...]:
    """The order MaxText would use by itself (it moves stage first when pipelining)."""
    axes = list(DEFAULT_MESH_AXES)
    if pp > 1:
        axes.remove("stage")
        axes.insert(axes.index("data"), "stage")
    return tuple(axes)


def _yaml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    return str(value)


def jax_visible(ctx: EmitContext) -> list[str | None]:
    """CUDA_VISIBLE_DEVICES of each host's JAX process (None: unset): the plan's GPU order (EmitContext.
    visible_devices), and for a job on part of one host its GPUs even in numbered order.  JAX's one process per host
    takes every GPU it sees, and MaxText counts them all as the slice: create_device_mesh divides len(jax.devices())
    by num_slices (utils/maxtext_utils.py:2038-2040) and fill_unspecified_mesh_axes asserts the ICI product equals
    it (utils/max_utils.py:480), so a 4-GPU plan's ICI of 4 on an 8-GPU host does not start without the list (a QA
    run: `--gpus 4` on dgx-h100 wrote no CUDA_VISIBLE_DEVICES; torchrun's --nproc-per-node needs none)."""
    visible = ctx.visible_devices
    gph = ctx.topo.gpus_per_host
    if ctx.plan.num_gpus >= gph:
        return visible
    return [v if v is not None else ",".join(str(g % gph) for g in ctx.gpu_of_rank) for v in visible]


UNSET_NEW_FRACTION = "unset XLA_CLIENT_MEM_FRACTION"
"""Where the files export JAX's pool as XLA_PYTHON_CLIENT_MEM_FRACTION (the name every JAX reads), the newer
XLA_CLIENT_MEM_FRACTION goes first: with both set jaxlib raises ValueError at its first GPU use (jaxlib 0.10.2
xla_client.py generate_pjrt_gpu_plugin_options, 'Remove the latter one, it is deprecated'), so a user environment
that exports the newer name (AlphaFold 3's docs tell unified-memory users to) would stop the job."""


def mem_fraction(ctx: EmitContext) -> float:
    """XLA_PYTHON_CLIENT_MEM_FRACTION for the priced capacity: the share of HBM JAX's allocator may hold, the plan's
    capacity (HBM less the fragmentation allowance and any headroom) less the reserve the plan keeps for the CUDA
    context and the libraries' workspaces, which live outside JAX's pool; rounded up to a ten-thousandth, so the
    pool holds every byte the plan prices as fitting (rounded down to a hundredth, 0.95 of an H100 held 0.4 GiB less
    than a plan priced to fit, and `placement audit` of the files, which prices the pool they set, said so).  Unset,
    JAX preallocates 75 % of the GPU (jax.readthedocs.io gpu_memory_allocation: "JAX will preallocate 75% of the
    total GPU memory"; its newer 0.75+ policy grows the pool past that), so a plan priced to fit in more would not
    (MaxText's own GPU scripts set it, e.g. tools/orchestration/gpu_multi_process_run.sh 0.85, the H100 benchmarks
    0.94)."""
    plan = ctx.plan
    reserve = plan.memory.reserve_bytes or 0.0
    return math.ceil(10000 * (plan.memory_capacity_bytes - reserve) / ctx.topo.accelerator.hbm_bytes) / 10000


def launch_lines(ctx: EmitContext) -> list[str]:
    """MaxText's GPU launch: one process per host; NODE_RANK is JAX's process id, so the planned host order."""
    hosts = ctx.hosts_in_rank_order
    blocking = " CUDA_LAUNCH_BLOCKING=1" if ctx.recipe.cuda_launch_blocking else ""  # as priced
    lines = [f"on every host: {UNSET_NEW_FRACTION}; export JAX_COORDINATOR_IP={hosts[0]} "
             f"JAX_COORDINATOR_PORT={COORDINATOR_PORT} "
             f"NNODES={len(hosts)} XLA_PYTHON_CLIENT_MEM_FRACTION={mem_fraction(ctx):.4f}{blocking}",
             "then one line per host (NODE_RANK = JAX process id; CUDA_VISIBLE_DEVICES where the plan reorders GPUs "
             "or uses part of a host):"]
    extra = train_overrides(ctx)
    for k, (host, visible) in enumerate(zip(hosts, jax_visible(ctx), strict=True)):
        prefix = "" if visible is None else f"CUDA_VISIBLE_DEVICES={visible} "
        lines.append(f"  {host}: {prefix}NODE_RANK={k} {ENTRYPOINT} maxtext.yml run_name=RUN "
                     f"base_output_directory=DIR{extra}")
    return lines


def train_overrides(ctx: EmitContext) -> str:
    """The train command's key=value overrides after the config (" k=v ..."; "" for none): the RoPE settings the
    config cannot state (`rope_cli`), with override_model_config, which MaxText needs to take a model key there."""
    cli = rope_cli(ctx, config_name(ctx) or "default")[0]
    return "".join(f" {k}={v}" for k, v in ({OVERRIDE_MODEL_CONFIG: "true"} | cli if cli else {}).items())


def sbatch_env(ctx: EmitContext) -> list[str]:
    """The lines launch.sbatch's MaxText task runs before its `exec` ($MASTER_ADDR, $NNODES and $NODE_RANK set from
    hosts.txt, the node's CUDA_VISIBLE_DEVICES from cuda_visible_devices.txt where the plan reorders GPUs): the
    variables MaxText's GPU start reads, as `launch_lines` exports them (utils/max_utils.py:318-346
    initialize_jax_for_gpu: jax.distributed.initialize at JAX_COORDINATOR_IP:JAX_COORDINATOR_PORT with NNODES
    processes, process id NODE_RANK), and for a job on part of one host its GPUs (`jax_visible`)."""
    lines = [f'{UNSET_NEW_FRACTION}  # JAX refuses both names set (audit.readers.maxtext.JAX_FRACTION_READ): '
             f'the pool is the one below',
             f'export JAX_COORDINATOR_IP="$MASTER_ADDR" JAX_COORDINATOR_PORT={COORDINATOR_PORT} NNODES NODE_RANK '
             f'XLA_PYTHON_CLIENT_MEM_FRACTION={mem_fraction(ctx):.4f}  # JAX\'s pool: the priced capacity less the '
             f'reserve (unset: 75 % of the GPU, grown where JAX runs its 0.75+ policy)']
    partial = jax_visible(ctx)[0]
    if len(ctx.hosts_in_rank_order) == 1 and partial is not None and ctx.visible_devices[0] is None:
        lines.append(f"export CUDA_VISIBLE_DEVICES={partial}  # JAX's one process takes every GPU it sees")
    return lines


def sbatch_task(ctx: EmitContext) -> str:
    """The command each node's task of launch.sbatch execs after `sbatch_env`: the train command of `launch_lines`,
    with the config from the plan folder and the run name and output directory from the environment."""
    return (f'{ENTRYPOINT} "$PLAN_DIR/maxtext.yml" run_name="${{MAXTEXT_RUN_NAME:-placement-{ctx.plan.model}}}" '
            f'base_output_directory="${{MAXTEXT_OUTPUT_DIR:-$PLAN_DIR/maxtext_output}}"{train_overrides(ctx)}')


def sbatch_warnings(ctx: EmitContext) -> list[str]:
    """maxtext.yml's warnings (its refusals make launch.sbatch's line say it does not start)."""
    return overrides(ctx)[2]


def files_run(ctx: EmitContext) -> Runs:
    """What maxtext.yml runs (`runs`), for launch.sbatch's line on it."""
    return runs(ctx, overrides(ctx)[1])


def runs(ctx: EmitContext, mesh: MaxTextMesh) -> Runs:
    """What the file runs where MaxText cannot be told the plan and placement can price the substitute: the ZeRO
    stage its mesh runs (`zero_as_run`: ZeRO-2 as ZeRO-1 or FSDP, any stage as ZeRO-3 over the context ranks where
    cp > 1, ZeRO-1/3 with nothing to shard over as ZeRO-0), with shard_optimizer_over_data beside ZeRO-3 the optimizer
    state and float32 weights sharded over data too (recipe optimizer_over_replicas), and the recipe features (each
    is also a warning).  Its pipeline schedule stays a warning: the cost model has no forward-all-then-backward
    schedule."""
    lay, s = ctx.plan.layout, mesh.sizes
    # MaxText's own attention and context parallelism (context_parallel_strategy all_gather); its Transformer Engine
    # attention (cudnn_flash_te) is written only at cp 1 (written_rows): TE's context-parallel refusals do not apply
    out = Runs(runs_te=False)
    over = optimizer_over_data(ctx, mesh)
    zero, shard = zero_as_run(s, over)
    if zero != lay.zero_stage or (zero == 3 and shard != lay.dp_shard):
        if zero == 3 and s["context"] > 1 and s["fsdp"] == 1:
            by = " x ".join(f"{s[a]} {a}" for a in WEIGHT_AXES if s[a] > 1)
            out.set_layout("zero_stage", 3, f"ZeRO-3 over the {by} ranks (not ZeRO-{lay.zero_stage}: MaxText's "
                                            f"context axis shards the weights)")
        elif zero == 3:
            by = " x ".join(f"{s[a]} {a}" for a in WEIGHT_AXES if s[a] > 1)
            replicas = f", replicated over {s['data']} data" if s["data"] > 1 else ""
            out.set_layout("zero_stage", 3, f"FSDP (ZeRO-3 over the {by} ranks{replicas}; not "
                                            f"ZeRO-{lay.zero_stage})")
        elif lay.zero_stage == 2 and zero == 1:
            out.set_layout("zero_stage", 1, "ZeRO-1 (not ZeRO-2)")
        else:  # nothing for the keys to shard over
            why = ("data 1, nothing for shard_optimizer_over_data to shard" if lay.zero_stage < 3
                   else "fsdp 1 and context 1, nothing shards the weights")
            out.set_layout("zero_stage", zero, f"ZeRO-{zero} (not ZeRO-{lay.zero_stage}: {why})")
        if zero == 3:
            out.layout["dp_shard"] = shard
    if lay.etp != lay.tp and ctx.routed_experts:
        # a user trial: ep 1 etp 1 at tp 2 was priced 249.8 s; MaxText runs etp 2, and the audit of the same file
        # priced 155.4 s
        out.set_layout("etp", lay.tp, f"etp {lay.tp} (not {lay.etp}: MaxText shards every expert's MLP over "
                                      f"'tensor', base.yml rule mlp_moe)")
    if lay.tp > 1 and not lay.sequence_parallel:  # a user trial: the same file priced two ways by the plan's SP
        out.set_layout("sequence_parallel", True, f"sequence parallelism (not off: {MAXTEXT_SP})")
    if lay.pp > 1:  # a user trial: the header priced the plan's 1F1B as what this file runs, then warned it does not
        out.unpriced.append(f"MaxText's pipeline of {lay.pp} stages: every micro-batch's forward before the "
                            f"backward, each iteration's stage forward recomputed (layers/pipeline.py), not the "
                            f"1F1B the plan prices")
    runs_recipe(ctx, runs_instead(ctx), out, remat_policy(ctx)[1])
    placed = mesh_gpu_of_rank(ctx, mesh)
    if placed is not None:  # a user trial: tp 6 on 8-GPU hosts was priced on the plan's groups, which the mesh's
        # greatest-common-divisor split does not build (29.4 s; the audit of the same files priced 17.0 s)
        out.gpu_of_rank = placed
        out.what.append("the groups MaxText's hybrid mesh builds on these hosts (its ICI/DCN split, not the plan's "
                        "rank order: create_hybrid_device_mesh)")
    if over_data_priced(s, over) and not ctx.recipe.optimizer_over_replicas:  # said in these words, not the row's
        out.recipe["optimizer_over_replicas"] = True
        out.what.append(f"the optimizer state and float32 weights sharded over data {s['data']} too (this file's "
                        f"shard_optimizer_over_data: true beside the weights' sharding)")
    name = config_name(ctx) or "default"
    if sinks_need_cudnn(ctx, name) and lay.cp == 1 and ctx.recipe.attention_kernel is not AttentionKernel.FLASH:
        out.recipe["attention_kernel"] = AttentionKernel.FLASH
        out.what.append(f"cuDNN's attention (attention: cudnn_flash_te, not {ctx.recipe.attention_kernel.value}: "
                        f"model_name {name} trains attention sinks, which MaxText 0.2.5 on GPUs runs only under it, "
                        f"layers/attention_op.py:153-157)")
    if w1_rerun(ctx) and not ctx.recipe.expert_w1_rerun:  # a QA pass: warned, never priced
        out.recipe["expert_w1_rerun"] = True
        out.what.append(f"the routed experts' second up-projection rerun in backward (remat_policy "
                        f"{remat_policy(ctx)[0]} does not save moe_mlpwi_1: {EXPERT_W1_WHY})")
    if plain_hsdp(ctx, mesh) and ctx.recipe.optimizer_over_replicas:
        out.recipe["optimizer_over_replicas"] = False
        out.what.append(f"the optimizer state over the {lay.dp_shard} shard ranks alone (not over the HSDP replicas "
                        f"too: no shard_optimizer_over_data, which {MAXTEXT_HSDP_WORDS})")
    common.runs_forced(ctx, "maxtext", out, written=rows_written(ctx, mesh))
    common.runs_model(ctx, "maxtext", out)
    vocab = MODEL_VOCABULARY.get(catalog_model(ctx))
    if vocab is not None and ctx.model is not None and vocab != ctx.model.vocab_size:
        name = config_name(ctx)
        out.model["vocab_size"] = vocab
        out.what.append(f"a vocabulary of {vocab:,} (not {ctx.model.vocab_size:,}: model_name {name}'s config sets "
                        f"it, configs/models/{name}.yml)")
    return out


def mesh_gpu_of_rank(ctx: EmitContext, mesh: MaxTextMesh) -> np.ndarray | None:
    """The GPU each of placement's ranks runs on under the mesh MaxText builds from these files, where that is not the
    plan's mapping: create_hybrid_device_mesh numbers a mesh position's device as its DCN index x GPUs per host + its
    ICI index (audit.maxtext.framework_rank, which the audit of these files prices with), and the launch lines make
    device d the GPU the plan gives rank d (each host's JAX process id, CUDA_VISIBLE_DEVICES).  None where the mesh
    tiles the hosts in rank order (every device is its rank's)."""
    lay = ctx.plan.layout
    spec = {"axes": mesh.axes, "ici": {a: mesh.ici.get(a, 1) for a in mesh.axes},
            "dcn": {a: mesh.dcn.get(a, 1) for a in mesh.axes}, "num_slices": -1}
    device = framework_rank(spec, lay.tp, lay.cp, lay.dp, lay.pp, lay.ep, ctx.topo.gpus_per_host, ctx.plan.num_gpus)
    if np.array_equal(device, np.arange(ctx.plan.num_gpus)):
        return None
    return np.asarray(ctx.gpu_of_rank)[device]


def render(ctx: EmitContext) -> tuple[str, list[str], dict[str, str]]:
    keys, mesh, warnings, notes = overrides(ctx)
    if any(w.startswith(common.DOES_NOT_START) for w in warnings):
        # header_runs prices nothing for a file that does not start; re-pricing it could raise on the very layout
        # MaxText refuses (a sinks model's cp > 1, which Transformer Engine's rules refuse outside a2a)
        line, warn = "", ""
    else:
        line, warn = ctx.runs_as(runs(ctx, mesh))
    line, warn = header_runs("MaxText", warnings, line, warn)
    if warn:
        warnings.insert(0, warn)
    head = header(ctx, VERSION, runs=line, order_where="of the launch lines (each host's JAX process id)") + \
        warn_block(warnings)
    head += "".join(f"# {n}\n" for n in notes)
    head += f"# {yours(ctx)}\n"
    head += "".join(f"# {line}\n" for line in launch_lines(ctx))
    body = "".join(f"{k}: {_yaml(v)}\n" for k, v in keys.items())
    return head + body, warnings, {"jax_mesh.py": mesh_snippet(ctx, mesh, warnings, line)}


def yours(ctx: EmitContext) -> str:
    """What stays the user's, as Megatron's file says (emit.megatron.worker), in MaxText 0.2.5's base.yml keys: its
    dataset_type is `synthetic` (configs/base.yml:891), so a file without one trains on generated tokens;
    tokenizer_path and tokenizer_type (:822, :825), learning_rate, warmup_steps_fraction and steps (:994, :999,
    :960), enable_checkpointing, checkpoint_period and load_parameters_path (:54, :58, :41)."""
    vocab = f": the plan priced a vocabulary of {ctx.model.vocab_size:,}" if ctx.model else ""
    return ("yours to add: data (dataset_type, base.yml's `synthetic` until set: the job trains on generated tokens; "
            "hf with hf_path, or tfds/grain with dataset_path), the tokenizer (tokenizer_path and tokenizer_type"
            f"{vocab}), the LR schedule (learning_rate, warmup_steps_fraction, steps), checkpoints "
            "(enable_checkpointing, checkpoint_period, load_parameters_path; base_output_directory on the launch "
            "lines)")


def mesh_snippet(ctx: EmitContext, mesh: MaxTextMesh, warnings: list[str], runs: str = "") -> str:
    """The same mesh built by hand with JAX: initialize in the planned process order, then the hybrid mesh."""
    hosts = ctx.hosts_in_rank_order
    visible = {h: v for h, v in zip(hosts, jax_visible(ctx), strict=True) if v is not None}
    host_list = "".join(f"    {h!r},\n" for h in hosts)
    return (
        # the same "this file runs" line as maxtext.yml: the mesh is that job's (a user trial found it only there)
        header(ctx, f"JAX mesh for {VERSION}", runs=runs, order_where="in HOSTS below (each host's JAX process id)")
        + warn_block(warnings)
        + '"""Run on every host before any other JAX call: `initialize()` then `build_mesh()`.\n\n'
        "Process k runs on HOSTS[k]: XLA numbers devices process by process and gives each host its own\n"
        "slice_index, so this list realises the planned host order; ICI_SHAPE is the part of each axis inside\n"
        'one host, DCN_SHAPE the part across hosts (same axis order).\n"""\n\n'
        "import os\nimport socket\n\nimport jax\nfrom jax.experimental import mesh_utils\n"
        "from jax.sharding import Mesh\n\n"
        f"HOSTS = [\n{host_list}]\n"
        "# GPU order inside a host, set before JAX starts CUDA (local_device_ids cannot reorder: XLA keeps a set)\n"
        f"CUDA_VISIBLE_DEVICES = {visible!r}\n"
        f'COORDINATOR_ADDRESS = "{hosts[0]}:{COORDINATOR_PORT}"\n'
        f"AXES = {mesh.axes!r}\n"
        f"ICI_SHAPE = {tuple(mesh.ici[a] for a in mesh.axes)!r}\n"
        f"DCN_SHAPE = {tuple(mesh.dcn[a] for a in mesh.axes)!r}\n\n\n"
        "def initialize(host=None):\n"
        "    host = host or socket.gethostname()\n"
        "    if host not in HOSTS:\n"
        '        raise SystemExit(f"jax_mesh.py: host {host!r} is not in this plan\'s HOSTS; "\n'
        '                         "pass initialize(host=...) with its name there")\n'
        "    if host in CUDA_VISIBLE_DEVICES:\n"
        '        os.environ["CUDA_VISIBLE_DEVICES"] = CUDA_VISIBLE_DEVICES[host]\n'
        "    process_id = HOSTS.index(host)\n"
        "    jax.distributed.initialize(coordinator_address=COORDINATOR_ADDRESS, num_processes=len(HOSTS),\n"
        "                               process_id=process_id)\n"
        "    return process_id\n\n\n"
        "def build_mesh(devices=None):\n"
        "    devices = jax.devices() if devices is None else devices\n"
        "    grid = mesh_utils.create_hybrid_device_mesh(ICI_SHAPE, DCN_SHAPE, devices=devices,\n"
        "                                                process_is_granule=True)\n"
        "    return Mesh(grid, AXES)\n\n\n"
        'if __name__ == "__main__":\n'
        "    initialize()\n"
        "    print(dict(build_mesh().shape))\n"
    )
