"""Rendering: JSON objects for machines (the contract in README), readable tables for people."""

from __future__ import annotations

import dataclasses
import itertools

from placement.calibration.published import published_line
from placement.calibration.validate import MOE_GROUP, SCHEDULE_FIELDS, TARGET_GROUPS, RunResult
from placement.catalog import accelerator_file_given
from placement.cost.constants import ALLOCATOR_FRAGMENTATION, GiB
from placement.cost.context import priced_zero
from placement.cost.step import BLOCKWISE_TP_OVERLAP_OFF
from placement.plan import Plan
from placement.planner import Planned
from placement.specs import ModelSpec
from placement.topology import Topology
from placement.workload import workload


def plan_json(planned: Planned) -> dict:
    seconds = planned.search.seconds
    return {
        "plans": [p.model_dump(mode="json") for p in planned.plans],
        "search": {"candidates": planned.search.num_candidates, "enumerated": planned.search.num_enumerated,
                   "seconds": None if seconds is None else round(seconds, 4),
                   "bounds": list(planned.search.bounds)},
    }


def without_timings(planned: Planned) -> Planned:
    """The same result with its wall-clock fields set to None (`--reproducible`): everything else in the
    output is a function of the input alone."""
    plans = [p if not p.mapping_solver or "wall_s" not in p.mapping_solver
             else p.model_copy(update={"mapping_solver": p.mapping_solver | {"wall_s": None}})
             for p in planned.plans]
    return dataclasses.replace(planned, plans=plans,
                               search=dataclasses.replace(planned.search, seconds=None))


def layout_cell(p: Plan) -> str:
    """`tp4 cp1 pp2x8 dp8 z2 mbs1 rc:none sp`: the layout in one cell."""
    return layout_text(p.layout.model_dump(), p.recipe or {})


def layout_text(lay: dict, recipe: dict) -> str:
    """`layout_cell` from a PLAN's JSON `layout` and `recipe` (a sweep's cached plans): every field the price depends
    on (expert TP, the HSDP shard, recompute modules, sequence parallelism, the embedding/loss split or the pipeline
    layout), so the layout a table prints is the one `evaluate` reproduces (a user trial: a sweep's row without its
    etp 2 did not fit)."""
    parts = [f"tp{lay['tp']}", f"cp{lay['cp']}", f"pp{lay['pp']}" + (f"x{lay['vpp']}" if lay["vpp"] > 1 else ""),
             f"dp{lay['dp']}"]
    if lay["ep"] > 1:
        parts.insert(2, f"ep{lay['ep']}" + (f"/etp{lay['etp']}" if lay["etp"] > 1 else ""))
    shard = lay.get("dp_shard")
    z = f"z{lay['zero_stage']}" + (f"/hsdp{shard}" if shard is not None and shard != lay["dp"] else "")
    sp = " sp" if lay["sequence_parallel"] else ""
    modules = recipe.get("recompute_modules") or []
    rc = f"rc:{lay['recompute']}" + (f"({'+'.join(modules)})" if lay["recompute"] == "selective" and modules
                                     and modules != ["core_attn"] else "")
    accounted = "+".join(code for code, key in (("E", "account_for_embedding"), ("L", "account_for_loss"))
                         if recipe.get(key))
    split = f" split:{accounted}" if accounted else ""
    if recipe.get("pipeline_layout"):
        split += f" layout:{recipe['pipeline_layout']}"
    return " ".join(parts) + f" {z} mbs{lay['micro_batch_size']} {rc}{sp}{split}"


def text_table(header: list[str], rows: list[list[str]]) -> str:
    """Rows under a header and a rule, each column padded to its widest cell: the text tables of plan, evaluate,
    audit and validate."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def breakdown_rows(p: Plan) -> list[list[str]]:
    """The step-time table's rows: term, total, exposed, overlapped (s/step, as printed)."""
    b = p.breakdown
    # the accumulation row only where the recipe prices one (Megatron's fused accumulation has none)
    casts = p.recipe_spec().fp32_weights_autocast and p.recipe_spec().fp32_weights and p.layout.zero_stage < 3
    label = "gradient accumulation, weight casts" if casts else "gradient accumulation"
    accumulation = ([[label, f"{b.grad_accumulation:.3f}", f"{b.grad_accumulation:.3f}", ""]]
                    if b.grad_accumulation > 0 else [])
    # the slowest-GPU row only where the accelerator prices a spread (AcceleratorSpec.speed_variability)
    variability = ([["GPU variability (slowest GPU)", f"{b.variability:.3f}", f"{b.variability:.3f}", ""]]
                   if b.variability > 0 else [])
    return [
        ["compute", f"{b.compute:.3f}", "", ""],
        ["tp (TP/SP collectives)", f"{b.tp:.3f}", f"{b.exposed.tp:.3f}", f"{b.overlapped.tp:.3f}"],
        ["cp (context-parallel KV)", f"{b.cp:.3f}", f"{b.exposed.cp:.3f}", f"{b.overlapped.cp:.3f}"],
        ["ep (MoE all-to-all)", f"{b.ep:.3f}", f"{b.exposed.ep:.3f}", f"{b.overlapped.ep:.3f}"],
        ["pp (point-to-point)", f"{b.pp:.3f}", f"{b.exposed.pp:.3f}", f"{b.overlapped.pp:.3f}"],
        ["dp (gradients / ZeRO)", f"{b.dp:.3f}", f"{b.exposed.dp:.3f}", f"{b.overlapped.dp:.3f}"],
        ["host (launches, syncs)", f"{b.host:.3f}", f"{b.host:.3f}", ""],
        *accumulation,
        ["pipeline bubble", f"{b.bubble:.3f}", f"{b.bubble:.3f}", ""],
        ["optimizer step, gradient buffer", f"{b.optimizer:.3f}", f"{b.optimizer:.3f}", ""],
        ["overlap slowdown", f"{b.overlap_slowdown:.3f}", f"{b.overlap_slowdown:.3f}", ""],
        *variability,
    ]


BREAKDOWN_HEADER = ["term (s/step)", "total", "exposed", "overlapped"]
MEMORY_HEADER = ["memory per GPU (GiB)", ""]


def optimizer_label(p: Plan) -> str:
    """The optimizer-state row's label, naming the optimizer priced: placement prices Adam (fp32 master weights and two
    moments, 12 bytes a parameter, or 8 with BF16 moments) and no other (a user trial: Kimi-K2's Muon run was shown
    Adam's state with nothing to say so)."""
    r = p.recipe_spec()
    moments = "bf16" if r.optimizer_state_bf16 else "fp32"
    if r.fp32_weights:  # the float32 weights are the master copy, in the weights row
        return f"optimizer state (Adam: {moments} moments; the fp32 weights are the master)"
    if not r.optimizer_master_weights:
        return f"optimizer state (Adam: {moments} moments, no master copy)"
    return f"optimizer state (Adam: fp32 master + {moments} moments)"


def weights_label(p: Plan) -> str:
    """The weights row's label: what the row holds where the weights are float32 (recipe fp32_weights), whose row
    is otherwise the 16-bit weights alone (a QA run: 1.3B parameters' 7.3 GiB read as 6 bytes a weight, unsaid)."""
    r, lay = p.recipe_spec(), p.layout
    if not r.fp32_weights:
        return "weights"
    if lay.zero_stage < 3 and r.fp32_weights_autocast:
        return "weights (fp32, whole; with the bf16 casts autocast keeps for backward)"
    copy = "bf16" if lay.num_microbatches > 1 else "fp32"
    shard = lay.dp if lay.dp_shard is None else lay.dp_shard
    over = (r.optimizer_over_replicas and lay.zero_stage == 3 and shard < lay.dp
            and (r.optimizer_over_replicas_beside_fsdp or shard <= lay.ep))  # cost.context.over_replicas
    if lay.zero_stage in (1, 2) or over:
        return f"weights (fp32 shard; with the {copy} copy gathered for the step)"
    return "weights (fp32)"


def logits_label(p: Plan) -> str:
    """The logits row's label, with the bytes a logit the loss holds and why (cost.memory.logits_bytes_per_element):
    an eager float32 loss holds twice Megatron's (a user trial: torchtitan's eager loss was priced at Megatron's 6
    bytes with nothing to say so)."""
    from placement.cost.memory import logits_bytes_per_element

    r = p.recipe_spec()
    per = logits_bytes_per_element(r)
    why = ("fused loss" if r.cross_entropy_fusion else "eager float32 loss" if r.loss_eager_float32 else
           "16-bit + float32 copy")
    chunks = f"; 1 of {r.loss_chunks} chunks" if r.loss_chunks > 1 else ""
    return f"logits held for the loss ({per:g} B a logit: {why}{chunks})"


def memory_rows(p: Plan) -> list[list[str]]:
    """The memory table's rows (GiB per GPU, as printed): the lump of logits, reserve and buffers split (a user trial
    could not tell 23.5 GiB of logits from the buffers), the gradients' width named, and what the capacity assumes."""
    m = p.memory
    grads = f"gradients ({m.gradient_dtype})" if m.gradient_dtype else "gradients"
    if m.logits_bytes is None:
        other = [["buffers, logits, reserve", f"{m.other_bytes / GiB:.1f}"]]
    else:
        other = [[logits_label(p), f"{m.logits_bytes / GiB:.1f}"],
                 [f"reserve (CUDA context, cuBLAS/NCCL workspaces: {m.reserve_bytes / GiB:.0f} GiB fixed)",
                  f"{m.reserve_bytes / GiB:.1f}"],
                 ["buffers (FSDP prefetch, CUDA graphs, TP overlap, masks)", f"{m.buffers_bytes / GiB:.1f}"]]
    return [
        [weights_label(p), f"{m.weights_bytes / GiB:.1f}"], [grads, f"{m.grads_bytes / GiB:.1f}"],
        [optimizer_label(p), f"{m.optimizer_bytes / GiB:.1f}"], ["activations", f"{m.activations_bytes / GiB:.1f}"],
        *other,
        *([["kept free (--memory-headroom-gib)", f"{p.memory_headroom_bytes / GiB:.1f}"]]
          if p.memory_headroom_bytes else []),
        ["peak / capacity", f"{p.peak_memory_bytes / GiB:.1f} / {p.memory_capacity_bytes / GiB:.1f}"],
    ]


LAUNCH_SBATCH_SETS = "which launch.sbatch sets"
"""Who sets the expandable segments, as `plan` and `evaluate` say it (their files do); the audit says the job's."""


def allocator_setter(formats: list[str] | None, framework: str | None) -> str:
    """Who sets PyTorch's expandable segments for `plan` and `evaluate`'s capacity note, by the files written: their
    launch.sbatch; a MaxText job's JAX keeps a pool of its own instead, which its launch lines size
    (emit.maxtext.mem_fraction); launch.sbatch launches nothing for a device mesh alone (a QA note: both were told
    launch.sbatch sets it)."""
    written = set(formats or ([framework] if framework else []))
    if written == {"maxtext"}:
        return ("which PyTorch's launch.sbatch sets; MaxText's JAX keeps a pool of its own instead, which its launch "
                "lines size to this capacity less the reserve (XLA_PYTHON_CLIENT_MEM_FRACTION)")
    if written == {"devicemesh"}:
        return "which your launcher must set (launch.sbatch launches nothing for device_mesh.py alone)"
    return LAUNCH_SBATCH_SETS


def capacity_note(p: Plan, setter: str = LAUNCH_SBATCH_SETS) -> str:
    """What the capacity assumes: the HBM less the allocator's fragmentation allowance, which holds only with PyTorch's
    expandable segments (a user trial: a Megatron-Bridge layout published as an OOM from fragmentation without them
    was priced as fitting, and nothing said what the capacity assumed)."""
    kept = f", less {p.memory_headroom_bytes / GiB:.1f} GiB kept free" if p.memory_headroom_bytes else ""
    pool = p.memory_pool
    if pool is not None and pool["pool_bytes"] is None:  # JAX's allocator, uncapped: the GPU bounds the job
        return (f"capacity: {pool['hbm_bytes'] / GiB:.1f} GiB of HBM less {ALLOCATOR_FRAGMENTATION:.0%} for "
                f"fragmentation{kept}; MaxText runs on JAX's allocator, not PyTorch's, with no memory fraction capping "
                f"it ({pool['note']})")
    if pool is not None:  # the framework's own pool, not PyTorch's caching allocator (an audited MaxText job's JAX)
        usable = pool["hbm_bytes"] * (1.0 - ALLOCATOR_FRAGMENTATION) - p.memory_headroom_bytes
        bound = ("which bounds it" if pool["pool_bytes"] + pool["reserve_bytes"] < usable else
                 f"under the {usable / GiB:.1f} GiB the GPU holds for the job{kept}, which bounds it")
        return (f"capacity: JAX's memory pool of {pool['pool_bytes'] / GiB:.1f} GiB ({pool['note']}) plus the "
                f"{pool['reserve_bytes'] / GiB:.0f} GiB reserve the CUDA context and NCCL's buffers hold outside it, "
                f"{bound}")
    hbm = (p.memory_capacity_bytes + p.memory_headroom_bytes) / (1.0 - ALLOCATOR_FRAGMENTATION)
    setter, _, besides = setter.partition("; ")  # what follows a "; " is said after the fragmentation's caveat
    return (f"capacity: {hbm / GiB:.1f} GiB of HBM less {ALLOCATOR_FRAGMENTATION:.0%} for the caching allocator's "
            f"fragmentation{kept}; the {ALLOCATOR_FRAGMENTATION:.0%} assumes "
            f"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, {setter} (without it fragmentation can take several "
            f"GiB more)" + (f"; {besides}" if besides else ""))


def _breakdown(p: Plan, setter: str = LAUNCH_SBATCH_SETS) -> str:
    return (text_table(BREAKDOWN_HEADER, breakdown_rows(p)) + "\n\n" + text_table(MEMORY_HEADER, memory_rows(p))
            + "\n" + capacity_note(p, setter))


def headline(p: Plan) -> str:
    """The plan's first lines: job, layout, step, memory, recipe."""
    lay = p.layout
    stages = "/".join(str(x) for x in lay.stage_layers)
    segment = f", segment {p.segment_nodes} nodes" if p.segment_nodes is not None else ""
    if p.node_topo is not None:
        segment += f", in-node links from --node-topo {p.node_topo['path']} ({p.node_topo['in_node_level']})"
    # a mixed allocation's accelerator is named after its designs, as the cluster is: said once
    cluster = "" if p.cluster == p.accelerator and not segment else f" ({p.cluster}{segment})" \
        if p.cluster != p.accelerator else f" ({segment[2:]})"
    precision = p.precision if p.precision_as_run in (None, p.precision) else \
        f"{p.precision_as_run} (priced as {p.precision}: the same tensor-core rate)"
    # stage_layers is (first, busiest middle, last) rank: a user trial read 20/21/19 as the pipeline's three stages
    which = {1: "", 2: " (first/last rank)"}.get(len(lay.stage_layers), " (first/busiest middle/last rank)")
    return (f"{p.model} on {p.num_gpus} x {p.accelerator}{cluster}, seq {p.seq_len}, global batch "
            f"{p.global_batch}, {precision}\n"
            f"layout: {layout_cell(p)}; {lay.num_microbatches} micro-batches; layers per stage {stages}{which}\n"
            f"step {p.step_time_s:.3f} s, {p.tokens_per_s:,.0f} tokens/s, MFU {p.mfu:.1%}, HFU {p.hfu:.1%}, "
            f"memory {p.peak_memory_bytes / GiB:.1f} of {p.memory_capacity_bytes / GiB:.1f} GiB"
            + p.headroom_note
            + ("" if p.fits else "  ** DOES NOT FIT **") + ("\n" + recipe_line(p) if recipe_line(p) else "")
            + ("\n" + model_line(p) if p.model_features else "")
            + "".join(f"\nassumed: {k} {v}" for k, v in (p.accelerator_assumptions or {}).items())
            + ("\n" + published_line(p.published_best) if published_line(p.published_best) else "")
            + ("\n" + unanchored_line(p) if p.unpublished_kind else ""))


def unanchored_line(p: Plan) -> str:
    """The line of a plan no published run of its kind checks (`published_best` null): its price rests on the cost
    model's constants for that part alone (a user trial: GB200 dense BF16 plans at 58.9 % MFU said nothing where
    no published dense BF16 run on GB200, or on its family, exists)."""
    return (f"published runs: none of this kind ({p.unpublished_kind}, or its accelerator's family) among those "
            f"placement validates: no measured run bounds this price")


def model_line(p: Plan) -> str:
    """`model: parallel residual on (model gpt-neox-20b)`: the model features a framework or launch file decides,
    as priced, with their source."""
    items = [f"{name.replace('_', ' ')} {'on' if f['value'] else 'off'} ({f['source']})"
             for name, f in (p.model_features or {}).items()]
    return "model: " + "; ".join(items)


def recipe_line(p: Plan) -> str:
    """`recipe: dispatcher hybridep (searched), cuda graphs partial, ...`: the recipe's choices that were
    searched or differ from the default, and its other non-default fields; "" when all are defaults."""
    if p.recipe is None:
        return ""
    from placement.specs.recipe import Recipe

    r, sources, default = p.recipe_spec(), p.recipe_sources or {}, Recipe()

    def onoff(v: bool) -> str:
        return "on" if v else "off"

    items = []
    for field, label, text in (
            ("moe_dispatcher", "dispatcher", r.moe_dispatcher.value),
            ("cuda_graphs", "cuda graphs", r.cuda_graphs.value),
            ("moe_einsum_dispatch", "einsum dispatch per", r.moe_einsum_dispatch.value.replace("_", "-")),
            ("tp_comm_overlap", "tp overlap", onoff(r.tp_comm_overlap)),
            ("ep_comm_overlap", "ep overlap", onoff(r.ep_comm_overlap))):
        searched = sources.get(field) == "searched"
        if sources.get(field) == BLOCKWISE_TP_OVERLAP_OFF:  # not a choice: the FP8 recipe forbids it
            items.append(f"{label} {text} (forced by fp8 blockwise: Transformer Engine's userbuffers refuse its "
                         f"quantizers)")
        elif searched or getattr(r, field) != getattr(default, field):
            items.append(f"{label} {text}" + (" (searched)" if searched else ""))
    if r.recompute_modules:
        items.append("recompute " + "+".join(m.value for m in r.recompute_modules)
                     + (" (searched)" if sources.get("recompute_modules") == "searched" else ""))
    if r.recompute_num_layers is not None:
        items.append(f"full recompute of {r.recompute_num_layers} layers per stage")
    if r.fp8_recipe is not None:
        items.append(f"fp8 {r.fp8_recipe.value}" if p.fp8_recipe_as_run in (None, r.fp8_recipe.value) else
                     f"fp8 {p.fp8_recipe_as_run} (priced as {r.fp8_recipe.value})")
    if r.grad_accumulation != default.grad_accumulation:
        items.append(f"gradient accumulation {r.grad_accumulation.value}")
    for field, label in (("delay_wgrad", "delayed wgrad"), ("dispatch_fp8", "fp8 dispatch"),
                         ("fp8_params", "fp8 params"), ("fp8_lm_head", "fp8 LM head"),
                         ("optimizer_state_bf16", "bf16 optimizer state"),
                         ("cross_entropy_fusion", "fused cross-entropy"),
                         ("loss_eager_float32", "eager float32 loss"),
                         ("cuda_launch_blocking", "CUDA_LAUNCH_BLOCKING=1"),
                         ("account_for_embedding", "embedding counted in the split"),
                         ("account_for_loss", "loss counted in the split")):
        if getattr(r, field):
            items.append(label)
    for field, label in (("dp_overlap", "dp overlap off"), ("moe_fusions", "moe fusions off"),
                         ("cpu_affinity", "no cpu affinity"), ("fused_model_ops", "eager model ops")):
        if not getattr(r, field):
            items.append(label)
    checkpointed = p.layout.recompute == "full"
    if r.checkpoint_interval != default.checkpoint_interval:
        items.append(f"checkpointed chunks of {r.checkpoint_interval} layers" if checkpointed
                     else f"checkpoint interval {r.checkpoint_interval} (no layer checkpointed: prices nothing)")
    if r.checkpoint_sync:
        if not checkpointed:
            items.append("checkpoint sync (no layer checkpointed: prices nothing)")
        elif r.cuda_launch_blocking:
            items.append("checkpoint sync (free under CUDA_LAUNCH_BLOCKING=1)")
        else:
            items.append("sync at each checkpointed " + ("layer" if r.checkpoint_interval == 1 else "chunk"))
    if r.pipeline_sends_mask:
        items.append("s x s mask sent with each activation" if p.layout.pp > 1
                     else "pipeline sends mask (one stage: prices nothing)")
    lay = p.layout
    if r.attention_kernel != default.attention_kernel:
        items.append(f"attention {r.attention_kernel.value}")
    if r.cp_comm_type != default.cp_comm_type and lay.cp > 1:
        window = "sliding window" in sources.get("cp_comm_type", "")
        items.append(f"cp {r.cp_comm_type.value}" + (" (the model's sliding window)" if window else ""))
    if r.grad_reduce_fp32:
        items.append("fp32 gradient reduce")
    # the buckets of the first rank's reduction, which only that rank prices without interleaving (cost.dp): the
    # recipe's, or Megatron-Core's default where it grows past its 40M floor (at dp 8,192 one bucket of 8.2e9
    # parameters, the whole of an 8B model's rank, which decides the DP time: a QA note)
    if lay.dp > 1 and lay.zero_stage <= 1 and r.dp_overlap and lay.vpp == 1 and not r.zero0_as_fsdp:
        from placement.cost.dp import MEGATRON_MIN_BUCKET_PARAMS, default_bucket_params

        grown = int(default_bucket_params(lay.dp, lay.cp))
        if r.grad_buckets != default.grad_buckets:
            items.append(f"gradient buckets {r.grad_buckets.value}")
        elif r.ddp_bucket_params == 1:
            items.append("a gradient bucket per parameter")
        elif r.ddp_bucket_params is not None:
            items.append(f"gradient buckets of {r.ddp_bucket_params:,} params")
        elif grown > MEGATRON_MIN_BUCKET_PARAMS:
            items.append(f"gradient buckets of {grown:,} params (Megatron-Core's default, 1M x dp x cp)")
    if r.loss_chunks > 1:
        items.append(f"loss in {r.loss_chunks} chunks")
    if r.fp8_recasts_weights and p.precision == "fp8":
        items.append("fp8 weights cast every pass")
    if r.fp8_saves_16bit_inputs and p.precision == "fp8":
        items.append("fp8 GEMMs keep 16-bit inputs")
    if not r.tp_async_backward and lay.tp > 1 and not r.tp_comm_overlap:
        items.append("tp backward collectives on their own")
    if r.sp_saves_gathered_inputs and lay.tp > 1 and lay.sequence_parallel:
        items.append("sp keeps gathered inputs")
    if r.tp_gathers_16bit and p.precision == "fp8" and lay.tp > 1 and lay.sequence_parallel:
        items.append("tp gathers 16-bit")
    if lay.zero_stage <= 1 and r.grad_buffer_passes != Recipe.model_fields["grad_buffer_passes"].default:
        items.append(f"{r.grad_buffer_passes} passes over the gradient buffer a step")
    zero = priced_zero(r, lay.zero_stage)
    if zero != lay.zero_stage:
        items.append("zero-0 as fsdp2 over one-rank shards")
    deferred = r.pipeline_unsharded_grads and lay.pp > 1 and zero >= 2
    if deferred:
        items.append("unsharded grads until each stage's last backward")
    elif r.dp_reduce_every_microbatch and lay.pp == 1 and lay.num_microbatches > 1 and lay.dp > 1:
        if zero == 0:
            items.append("ddp all-reduce every micro-batch")
        elif zero == 3 and (1 if zero != lay.zero_stage else lay.dp_shard) < lay.dp:
            items.append("hsdp all-reduce every micro-batch")
    if r.reshard_after_backward and lay.zero_stage == 2 and not deferred:
        items.append("weights gathered again each micro-batch")
    if r.fp32_weights:
        items.append("fp32 weights as master copy")
        if r.fp32_weights_autocast and lay.zero_stage < 3:
            items.append("fp32 weights under bf16 autocast (casts held to backward"
                         + ("; whole on every rank, shards broadcast in fp32)" if lay.zero_stage else ")"))
    if r.optimizer_over_replicas and lay.zero_stage == 3 and lay.dp_shard < lay.dp:
        items.append("optimizer sharded over the hsdp replicas too")
    if r.mtp_layers:
        items.append(f"mtp {r.mtp_layers}")
    if r.pipeline_schedule != default.pipeline_schedule:
        items.append(f"schedule {r.pipeline_schedule.value}")
    if r.routing_imbalance != default.routing_imbalance:
        items.append(f"routing imbalance {r.routing_imbalance:g}")
    if r.moe_capacity_factor is not None:
        items.append(f"capacity factor {r.moe_capacity_factor:g}")
    if r.pipeline_layout is not None:
        items.append(f"pipeline layout {r.pipeline_layout}")
    return "recipe: " + ", ".join(items) if items else ""


def mapping_parts(p: Plan) -> tuple[str, list[list[str]], list[str], list[list[str]]] | None:
    """The mapping section's parts, as printed: the verdict line, the step of each order (planned, baselines),
    the level names, and how many groups of each kind stay within each level.  None without crossings."""
    if not p.crossings:
        return None
    solver = p.mapping_solver or {}
    base = p.baselines or {}
    chosen = solver.get("chosen", "")
    alloc = base.get("allocation_order", {}).get("step_time_s")
    if chosen == "allocation_order" and alloc is not None:
        # the mapper compares the orders it builds (CP-SAT on its traffic proxy, Megatron's order), not every order
        verdict = (f"hosts keep the allocation order ({alloc:.3f} s/step): none of the orders the mapper built "
                   f"(CP-SAT on its proxy, the baselines below) prices faster; an order it did not build may")
    elif chosen in ("cpsat", "megatron_order", "block_order", "pipeline_order") and alloc is not None:
        verdict = (f"hosts reordered ({chosen.replace('_', ' ')}): {alloc - p.step_time_s:.3f} s/step faster than "
                   f"the allocation order's {alloc:.3f} s")
    else:
        verdict = chosen.replace("_", " ")
    solved = ""
    if solver.get("status") == "SKIPPED":
        solved = "; no CP-SAT solve: on a flat fabric, the bound for every host order, it prices the same"
    if solver.get("objective_s") is not None:
        solved = (f"; CP-SAT {solver.get('status', '')}: objective {solver['objective_s']:.3f} s, the group "
                  f"traffic that leaves a leaf (switch or NVLink domain) summed over the levels above (the "
                  f"solver's proxy, not the step)"
                  + (f", bound {solver['bound_s']:.3f} s" if solver.get("bound_s") is not None else "")
                  + (f", gap {solver['gap']:.2%}" if solver.get("gap") is not None else "")
                  + (f", {solver['wall_s']:.2f} s" if solver.get("wall_s") is not None else ""))
    rows = [["planned mapping", f"{p.step_time_s:.3f}"]] + [[k.replace("_", " "), f"{v['step_time_s']:.3f}"]
                                                            for k, v in base.items()]
    levels = list(next(iter(p.crossings.values()))["highest_level"])
    crows = [[group_label(k, p.layout.cp), f"{v['groups']} x {v['group_size']}",
              *(str(v["highest_level"][lv]) for lv in levels)]
             + ([_in_node_cell(v)] if p.node_topo is not None else []) for k, v in p.crossings.items()]
    return f"mapping: {verdict}{solved}", rows, levels, crows


def group_label(kind: str, cp: int) -> str:
    """A group kind as the tables name it: the gradient group is the data-parallel ranks times the context-parallel
    ones where cp > 1 (Megatron reduces gradients over dp x cp), so `dp x cp`, not `dp` (a user trial read "dp 64 x
    256" beside a layout of dp128 cp2)."""
    return "dp x cp" if kind == "dp" and cp > 1 else kind


def _in_node_cell(c: dict) -> str:
    """The in-node ring of a kind where the node's links are measured (--node-topo): its link and raw rate per GPU."""
    ring = c.get("in_node")
    if ring is None:
        return "-"
    return f"{ring['gpus']} GPUs: {ring['link']} {ring['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s"


def crossings_section(p: Plan) -> str:
    """How many groups of each kind stay within each level (`evaluate`: the layout as launched, no mapper)."""
    parts = mapping_parts(p)
    return "" if parts is None else _groups_table(p, parts[2], parts[3])


def _groups_table(p: Plan, levels: list[str], crows: list[list[str]]) -> str:
    ring = ["in-node ring (--node-topo)"] if p.node_topo is not None else []
    return text_table(["groups", "count x size", *(f"within {lv}" for lv in levels), *ring], crows)


def _mapping_section(p: Plan) -> str:
    parts = mapping_parts(p)
    if parts is None:
        return ""
    verdict, rows, levels, crows = parts
    return "\n\n".join([verdict, text_table(["order", "step s"], rows), _groups_table(p, levels, crows)])


def top_k_rows(planned: Planned) -> list[list[str]]:
    """The ranked plans' table rows: #, layout, step s, MFU, mem GiB."""
    return [[str(k + 1), layout_cell(p), f"{p.step_time_s:.3f}", f"{p.mfu:.1%}",
             f"{p.peak_memory_bytes / GiB:.1f}"] for k, p in enumerate(planned.plans)]


TOP_K_HEADER = ["#", "layout", "step s", "MFU", "mem GiB"]


def search_line(planned: Planned) -> str:
    """`searched N layouts (M priced, the rest bounded out) in S s`."""
    result = planned.search
    return (f"searched {result.num_enumerated or result.num_candidates:,} layouts"
            + (f" ({result.num_candidates:,} priced, the rest bounded out)"
               if result.num_enumerated and result.num_enumerated > result.num_candidates else "")
            + (f" in {result.seconds:.2f} s" if result.seconds is not None else ""))


def plan_table(planned: Planned, exhaustive: bool = False, setter: str = LAUNCH_SBATCH_SETS) -> str:
    """`exhaustive`: also state what the search leaves untried (`plan --exhaustive`)."""
    ps = planned.plans
    mapping = _mapping_section(ps[0])
    return (headline(ps[0]) + "\n\n" + _breakdown(ps[0], setter) + "\n\n" + (mapping + "\n\n" if mapping else "")
            + text_table(TOP_K_HEADER, top_k_rows(planned))
            + "\n\n" + search_line(planned)
            + ("".join(f"\n  bound: {b}" for b in planned.search.bounds) if exhaustive else ""))


def single_plan_table(p: Plan, setter: str = LAUNCH_SBATCH_SETS) -> str:
    """`setter`: who sets the expandable segments the capacity assumes (`capacity_note`)."""
    return headline(p) + "\n\n" + _breakdown(p, setter)


def model_facts(model: ModelSpec, seq_len: int) -> dict:
    w = workload(model)
    return {
        "name": model.name,
        "source": model.source,
        "num_layers": model.num_layers,
        "hidden_size": model.hidden_size,
        "num_attention_heads": model.num_attention_heads,
        "num_kv_heads": model.kv_heads,
        "moe": model.moe.model_dump(mode="json") if model.moe else None,
        "parallel_residual": model.parallel_residual,
        # what a reader checks a config against (a user trial could not see the window, the head size, the tying or
        # the MTP modules short of planning)
        "head_dim": None if model.mla else model.head_dim or model.hidden_size // model.num_attention_heads,
        "ffn_hidden_size": model.ffn_hidden_size,
        "vocab_size": model.vocab_size,
        "tied_embeddings": model.tied_embeddings,
        "sliding_window": model.sliding_window,
        "sliding_window_layers": model.sliding_window_layers,
        "attention_sinks": model.attention_sinks,
        "mla": model.mla.model_dump(mode="json") if model.mla else None,
        "mtp_modules": model.mtp_modules,
        "total_params": w.total_params,
        "active_params": w.active_params_per_token,
        "seq_len": seq_len,
        "model_flops_per_token": w.model_flops_per_token(seq_len),
        "bytes_per_param": {"weights": 2, "grads": 2, "optimizer": 12, "total_mixed_precision_adam": 16},
        "training_state_bytes": 16 * w.total_params,
    }


def router_text(moe: dict) -> str:
    """How the router scores and weighs its experts, as the model file states it ("not stated" for what it leaves
    to the framework's default): `sigmoid, renormalized, bias, x2.5`."""
    score = moe.get("router_score_function") or "score not stated"
    weights = {True: "renormalized", False: "raw"}.get(moe.get("router_topk_normalized"), "weights not stated")
    bias = {True: "bias", False: "no bias"}.get(moe.get("router_expert_bias"), "bias not stated")
    scale = moe.get("router_topk_scaling_factor")
    return f"{score}, {weights}, {bias}, " + (f"x{scale:g}" if scale is not None else "scaling not stated")


def model_table(f: dict) -> str:
    rows = [
        ["layers / hidden / heads / kv heads", f"{f['num_layers']} / {f['hidden_size']} / "
                                              f"{f['num_attention_heads']} / {f['num_kv_heads']}"],
        ["parameters (total)", f"{f['total_params'] / 1e9:,.2f} B"],
        # the official active counts (GPT-OSS 5.1B, DeepSeek-V3 37B) leave the input embedding out: a user trial read
        # 5.71 B against GPT-OSS's 5.13 B with nothing to say why
        ["parameters (active per token, input embedding and LM head included)",
         f"{f['active_params'] / 1e9:,.2f} B"],
        [f"model FLOPs per token (seq {f['seq_len']})", f"{f['model_flops_per_token'] / 1e9:,.1f} GFLOP"],
        ["bytes per parameter (Adam, mixed precision)", "2 weights + 2 grads + 12 optimizer = 16"],
        ["training state (unsharded)", f"{f['training_state_bytes'] / GiB:,.0f} GiB"],
    ]
    if f["moe"]:
        moe = f["moe"]
        rows.insert(1, ["experts (routed, top-k, shared)",
                        f"{moe['num_experts']}, {moe['top_k']}, {moe['num_shared_experts']}"])
        rows.insert(2, ["router (score, top-k weights, expert bias, scaling)", router_text(moe)])
    q_rank = f"q rank {f['mla']['q_lora_rank']}" if f.get("mla") and f["mla"]["q_lora_rank"] else "no q rank"
    attention = (f"MLA (kv rank {f['mla']['kv_lora_rank']}, {q_rank})" if f.get("mla")
                 else f"head dim {f['head_dim']}")
    if f.get("sliding_window"):
        attention += (f"; window {f['sliding_window']} keys on {f['sliding_window_layers']} of "
                      f"{f['num_layers']} layers")
    if f.get("attention_sinks"):
        attention += "; sinks"
    rows.insert(1, ["attention", attention])
    rows.insert(2, ["FFN width / vocabulary (embeddings)",
                    f"{f['ffn_hidden_size']} / {f['vocab_size']:,} ({'tied' if f['tied_embeddings'] else 'untied'})"])
    if f.get("mtp_modules"):
        rows.append(["multi-token-prediction modules", f"{f['mtp_modules']} (the recipe's mtp_layers; not in the "
                                                       f"counts above)"])
    if f.get("parallel_residual"):
        rows.insert(1, ["residual", "parallel: attention + MLP, one forward TP all-reduce per layer"])
    source = f"\nsource: {f['source']}" if f["source"] else ""
    return f"{f['name']}\n" + text_table(["quantity", "value"], rows) + source


def cluster_facts(topo: Topology) -> dict:
    c = topo.cluster
    acc = topo.accelerator
    return {
        "name": c.name, "accelerator": acc.name, "num_gpus": topo.num_gpus, "gpus_per_node": c.gpus_per_node,
        "peak_flops_bf16": acc.peak_flops_bf16, "peak_flops_fp8": acc.peak_flops_fp8, "hbm_bytes": acc.hbm_bytes,
        "levels": topo.describe(), "source": c.source, "segment_nodes": topo.segment_nodes,
        # the part's file where the cluster names one of the user's (catalog parts: None)
        "accelerator_file": c.accelerator if accelerator_file_given(c.accelerator) else None,
    }


def cluster_table(f: dict) -> str:
    rows = [[str(lv["level"]), lv["name"], f"{lv['block_gpus']:,}", f"{lv['bandwidth_bytes_per_s'] / 1e9:.1f}",
             f"{lv['latency_s'] * 1e6:.1f}"] for lv in f["levels"]]
    segment = f", segment {f['segment_nodes']} nodes" if f.get("segment_nodes") is not None else ""
    head = (f"{f['name']}: {f['num_gpus']:,} x {f['accelerator']} ({f['gpus_per_node']} per node{segment}), "
            # in GiB, as nvidia-smi's MiB and the memory tables count it (a buyer read "86 GB" against an 80 GB part)
            f"{f['peak_flops_bf16'] / 1e12:,.0f} TFLOP/s bf16, {f['hbm_bytes'] / 2**30:.1f} GiB HBM"
            + (f" (accelerator from {f['accelerator_file']})" if f.get("accelerator_file") else ""))
    return head + "\n" + text_table(["level", "name", "GPUs per block", "GB/s per GPU (effective)", "latency us"], rows)


def validate_json(results: list[RunResult], mean: float, worst: float) -> dict:
    runs = []
    for r in results:
        runs.append({
            "id": r.run.id, "group": r.run.group,
            "predicted_step_time_s": None if r.predicted_step_time_s is None else round(r.predicted_step_time_s, 4),
            "published_step_time_s": r.run.published_step_time_s,
            # 6 digits: a percentage rounded from it is the text's (BLOOM read -9.2 % from 4 digits, -9.1 % in text)
            "error": None if r.error is None else round(r.error, 6),
            "fits": r.fits, "layout": r.layout,
            "peak_memory_gib": None if r.peak_memory_gib is None else round(r.peak_memory_gib, 2),
            "memory_capacity_gib": None if r.capacity_gib is None else round(r.capacity_gib, 2),
            "recipe": r.recipe, "assumptions": r.run.assumptions or None,
            "searched": r.searched, "searched_least_memory": r.least_memory,
            "slowest_schedule": _slowest_json(r),
            "citation": r.run.citation, "step_time_basis": r.run.step_time_basis,
        })
    return {"runs": runs, "mean_abs_error": round(mean, 4), "max_abs_error": round(worst, 4),
            "error_groups": list(TARGET_GROUPS), "groups": group_accuracy(results),
            "scale_pairs": scale_pairs(results)}


def scale_pairs(results: list[RunResult]) -> list[dict]:
    """Published runs of one job at two GPU counts that differ in data parallelism alone: the same model, cluster,
    precision, sequence, recipe and stated layout but dp, and the same batch per GPU (weak scaling, as the DGX Cloud
    benchmarking tables run each recipe at a small and a large count).  For each pair, the step's change from the
    smaller count to the larger, published and predicted: what scaling out costs that the cost model does or does not
    price."""
    by_job: dict[tuple, list[RunResult]] = {}
    for r in results:
        run = r.run
        if r.predicted_step_time_s is None:
            continue
        stated = tuple(sorted((k, v) for k, v in run.layout.items() if k != "dp"))
        key = (run.model, run.cluster, run.precision, run.seq_len, run.attention_kernel, run.interleaved, stated,
               run.recipe.model_dump_json(), run.global_batch / run.num_gpus)
        by_job.setdefault(key, []).append(r)
    pairs = []
    for rows in by_job.values():
        rows = sorted(rows, key=lambda r: r.run.num_gpus)
        for small, large in itertools.pairwise(rows):
            pairs.append({
                "small": small.run.id, "large": large.run.id,
                "num_gpus": [small.run.num_gpus, large.run.num_gpus],
                "published_change": round(large.run.published_step_time_s / small.run.published_step_time_s - 1, 6),
                "predicted_change": round(large.predicted_step_time_s / small.predicted_step_time_s - 1, 6)})
    return sorted(pairs, key=lambda p: p["small"])


def scale_pairs_line(pairs: list[dict]) -> str | None:
    """validate's summary line of `scale_pairs`: the mean change published and predicted, and the pairs."""
    if not pairs:
        return None
    published = sum(p["published_change"] for p in pairs) / len(pairs)
    predicted = sum(p["predicted_change"] for p in pairs) / len(pairs)
    each = "; ".join(f"{p['small']} -> {p['num_gpus'][1]} GPUs {p['published_change']:+.1%} published, "
                     f"{p['predicted_change']:+.1%} predicted" for p in pairs)
    return (f"scaling out (the same job at two GPU counts, dp alone grown, the batch per GPU held): the step grows "
            f"{published:+.1%} on average published and {predicted:+.1%} predicted over {len(pairs)} pairs, so the "
            f"cost model prices little of what scaling out costs these runs: {each}")


def group_accuracy(results: list[RunResult]) -> dict:
    """Accuracy per calibration group, the dense target groups together, every dense row, and the MoE group."""
    groups = sorted({r.run.group for r in results})
    named = {"ptdp+korthikanti": TARGET_GROUPS, "dense (all)": tuple(g for g in groups if g != MOE_GROUP),
             "moe": (MOE_GROUP,)}
    named.update({g: (g,) for g in groups})
    out = {}
    for name, members in named.items():
        rows = [r for r in results if r.run.group in members]
        errs = [abs(r.error) for r in rows if r.error is not None]
        out[name] = {"runs": len(rows), "priced": len(errs), "fit": sum(r.fits for r in rows),
                     "mean_abs_error": round(sum(errs) / len(errs), 6) if errs else None,
                     "max_abs_error": round(max(errs), 6) if errs else None}
    return out


def _slowest_json(r: RunResult) -> dict | None:
    """A row's slowest legal unstated schedule (validate.RunResult.slowest_schedule) with its error."""
    slow = r.slowest_schedule
    if slow is None:
        return None
    published = r.run.published_step_time_s
    return {**slow, "step_time_s": round(slow["step_time_s"], 4),
            "error": round((slow["step_time_s"] - published) / published, 6)}


def schedule_text(slow: dict) -> str:
    """The schedule fields of a row's `slowest_schedule` in the searched column's words ("vpp 2, mbs 1")."""
    return searched_text({k: v for k, v in slow.items() if k in SCHEDULE_FIELDS})


def slowest_text(r: RunResult) -> str:
    """The slowest unstated schedule of a validate row, as the table prints it ("+5.3% vpp 2, mbs 1")."""
    slow = _slowest_json(r)
    if slow is None:
        return ""
    return f"{slow['error']:+.1%} " + schedule_text(slow)


def schedule_spans(results: list[RunResult]) -> tuple[list[str], list[str]]:
    """(inside, outside): the rows with an unstated schedule whose published time lies between their fastest
    and slowest legal schedule, and those whose published time lies beyond both."""
    inside, outside = [], []
    for r in results:
        if r.slowest_schedule is None or r.predicted_step_time_s is None:
            continue
        low, high = sorted((r.predicted_step_time_s, r.slowest_schedule["step_time_s"]))
        (inside if low <= r.run.published_step_time_s <= high else outside).append(r.run.id)
    return inside, outside


_SEARCHED_LABELS = {"vpp": "vpp {}", "micro_batch_size": "mbs {}", "recompute": "rc {}", "zero_stage": "z{}",
                    "dp_shard": "shard {}"}


def searched_text(searched: dict | None) -> str:
    """The knobs a validate row's source leaves unstated and their searched values, as the table prints them
    ("vpp 16, mbs 2, rc none"); SP as "sp" / "no sp"."""
    parts = []
    for key, value in (searched or {}).items():
        if key == "sequence_parallel":
            parts.append("sp" if value else "no sp")
        else:
            parts.append(_SEARCHED_LABELS.get(key, key + " {}").format(value))
    return ", ".join(parts)


def validate_table(results: list[RunResult], mean: float, worst: float) -> str:
    rows = []
    for r in results:
        pred = "does not fit" if r.predicted_step_time_s is None else f"{r.predicted_step_time_s:.2f}"
        err = "" if r.error is None else f"{r.error:+.1%}"
        mem = "" if r.peak_memory_gib is None else f"{r.peak_memory_gib:.1f}/{r.capacity_gib:.0f}"
        if r.predicted_step_time_s is not None and not r.fits:
            mem += " over"
        rows.append([r.run.id, r.run.group, f"{r.run.published_step_time_s:.2f}", pred, err, mem,
                     searched_text(r.searched), slowest_text(r)])
    lines = [f"{name}: {g['priced']} of {g['runs']} runs priced, {g['fit']} fit; mean |error| "
             f"{g['mean_abs_error']:.1%}, max |error| {g['max_abs_error']:.1%}"
             for name, g in group_accuracy(results).items()
             if name in ("ptdp+korthikanti", "dense (all)", "moe") and g["priced"]]
    left_out = [r.run.id for r in results if r.predicted_step_time_s is None]
    lines.append("left out of every summary (no layout of the run could be priced): "
                 + (", ".join(left_out) if left_out else "none"))
    over = [r.run.id for r in results if r.predicted_step_time_s is not None and not r.fits]
    if over:
        lines.append("priced at their stated recompute though the memory model puts them over capacity (\"over\"; the "
                     "runs fit, so the model over-counts their memory; an unstated micro-batch is taken at 1, the "
                     "least memory, not the fastest): " + ", ".join(over))
    lines.append("searched: what the source does not state, priced at the fastest legal value (vpp, mbs, recompute, "
                 "ZeRO, SP, FSDP shard); a run on a slower choice is slower than its row predicts")
    inside, outside = schedule_spans(results)
    if inside or outside:
        lines.append("slowest schedule: where the source leaves vpp or mbs open, the slowest legal value that fits, "
                     "the rest as priced; the published time lies within that span for "
                     f"{len(inside)} of {len(inside) + len(outside)} such rows; beyond it: "
                     + (", ".join(outside) if outside else "none"))
    pairs_line = scale_pairs_line(scale_pairs(results))
    if pairs_line:
        lines.append(pairs_line)
    return (text_table(["run", "group", "published s", "predicted s", "error", "mem GiB/cap", "searched",
                        "slowest schedule"], rows)
            + "\n\n" + "\n".join(lines)
            + f"\n\nptdp-2021-table1 + korthikanti-2022-table5: mean |error| {mean:.1%}, max |error| {worst:.1%}")
