"""Plan: a layout with its estimate and provenance, the unit every command prints (`--json` contract)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from placement import __version__
from placement.calibration.published import job_key, published_best, published_model_name
from placement.cost.batch import LayoutBatch
from placement.cost.constants import MEMORY_RESERVE_BYTES, GiB
from placement.cost.context import fp8_recipe
from placement.cost.memory import gradient_dtype
from placement.cost.pipeline import rank_layer_counts
from placement.cost.step import BLOCKWISE_TP_OVERLAP_OFF, Estimates
from placement.specs import Layout, ModelSpec, TrainingSpec
from placement.specs.recipe import Fp8Recipe, Recipe
from placement.specs.training import Precision
from placement.topology import Topology

TIGHT_MEMORY_SHARE = 0.03
"""A plan whose peak is within this share of the capacity says so in its headline when it keeps no headroom: the
memory model is an estimate (`validate` checks step times, not peaks), and an out-of-memory costs a restart."""


def tight_spare(capacity_bytes: float, peak_bytes: float, fits: bool, headroom_bytes: float) -> float | None:
    """The bytes a plan leaves free where it fits within TIGHT_MEMORY_SHARE of its capacity keeping no headroom, the
    case its text warns of; None otherwise."""
    spare = capacity_bytes - peak_bytes
    if fits and not headroom_bytes and spare < TIGHT_MEMORY_SHARE * capacity_bytes:
        return spare
    return None


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LayoutOut(_Out):
    tp: int
    cp: int
    ep: int
    etp: int
    pp: int
    vpp: int
    dp: int
    micro_batch_size: int
    zero_stage: int
    recompute: str
    sequence_parallel: bool
    dp_shard: int
    """ZeRO-3 sharding group within dp (HSDP when < dp)."""
    num_microbatches: int
    stage_layers: list[int]
    """Layers on the first, the fullest middle, and the last pipeline stage."""
    rank_layers: list[int] | None = None
    """Decoder layers on every pipeline rank, over all its model chunks (the recipe's pipeline layout)."""

    def per_rank_layers(self) -> list[int]:
        """Decoder layers on each pipeline rank, first to last (`rank_layers`; rebuilt from `stage_layers` for a
        plan written without it)."""
        if self.rank_layers is not None:
            return list(self.rank_layers)
        first, *rest = self.stage_layers
        return [first] if self.pp == 1 else [first, *[rest[0]] * (self.pp - 2), rest[-1]]


class TermsOut(_Out):
    tp: float
    cp: float
    ep: float
    pp: float
    dp: float


class BreakdownOut(_Out):
    """Seconds per step.  `compute` .. `dp` are each term's full time on the critical stage; `exposed`
    is what adds to the step, `overlapped` what hides behind compute."""

    compute: float
    tp: float
    cp: float
    ep: float
    pp: float
    dp: float
    bubble: float
    optimizer: float
    overlap_slowdown: float
    """Compute lost to the overlapped communication (kernels sharing the GPU)."""
    exposed: TermsOut
    overlapped: TermsOut
    host: float = 0.0
    """Host time that adds to the step on the critical rank: kernel launches the GPU waits for, and the
    MoE host syncs (cost.host)."""
    grad_accumulation: float = 0.0
    """Weight gradients accumulated outside the GEMMs, per micro-batch, on the critical rank (recipe
    grad_accumulation: autograd's 16-bit `+=`, DeepSpeed BF16_Optimizer's fp32 copy)."""
    variability: float = 0.0
    """What waiting for the job's slowest GPU adds: the accelerator's `speed_variability` times the expected largest
    of num_gpus normal draws, on the compute and the bubble it paces (cost.step.variability_s)."""


class MemoryOut(_Out):
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    other_bytes: float
    """Reserve (CUDA context, NCCL and cuBLAS buffers), logits, ZeRO-3 gather buffers: logits_bytes + reserve_bytes +
    buffers_bytes."""
    logits_bytes: float | None = None
    """Of other_bytes, the logits the loss holds (cost.constants.LOGITS_BYTES_PER_ELEMENT a logit, 2 where the loss
    is fused; one chunk's under recipe loss_chunks)."""
    reserve_bytes: float | None = None
    """Of other_bytes, the fixed reserve for the CUDA context, cuBLAS and NCCL workspaces (MEMORY_RESERVE_BYTES)."""
    buffers_bytes: float | None = None
    """Of other_bytes, the rest: ZeRO-3/FSDP prefetch of two layers, CUDA-graph pools, TP-overlap userbuffers and
    pipeline masks."""
    gradient_dtype: str | None = None
    """The width the gradients are held in, as grads_bytes prices them (cost.memory.gradient_dtype)."""


class Plan(_Out):
    layout: LayoutOut
    num_gpus: int
    step_time_s: float
    tokens_per_s: float
    mfu: float
    hfu: float
    peak_memory_bytes: float
    memory_capacity_bytes: float
    """Bytes a GPU can hold for the job: its HBM less the allocator's fragmentation and `memory_headroom_bytes`."""
    fits: bool
    breakdown: BreakdownOut
    memory: MemoryOut
    model: str
    cluster: str
    accelerator: str
    seq_len: int
    global_batch: int
    precision: str
    tool_version: str
    mapping: list[dict] | None = None
    """Rank table: {"rank", "host", "local_gpu", "coords": {axis: index}} ordered by rank."""
    mapping_compact: dict | None = None
    """The mapping as host order plus local GPU order ({"rank_order", "gpus_per_host", "host_order": [host of node
    rank k], "local_gpu_order": {host: [local GPU of each of its ranks]} for permuted hosts only}): every plan
    has it at any size; scripts should read it.  `mapping` (the full rank table) is left out at scale."""
    mapping_solver: dict | None = None
    """How the mapping was found: status, objective, bound, wall time, solver and seed."""
    baselines: dict[str, dict] | None = None
    """The same layout under plain launch orders: {"allocation_order": {"step_time_s"}, "megatron_order": ...}."""
    crossings: dict[str, dict] | None = None
    """Per kind of group, how many groups reach each level of the topology at most."""
    fabric: str | None = None
    """`plan` and `evaluate`: each level priced and where it came from (cli.fabric_priced); null from `audit` (its
    sources give it) and `sweep`."""
    fabric_levels: list[dict] | None = None
    """`plan` and `evaluate`: the same levels as numbers (Topology.describe: level, name, block_gpus,
    bandwidth_bytes_per_s, latency_s, oversubscription); null where `fabric` is."""
    node_topo: dict | None = None
    """With --node-topo: {"path": the `nvidia-smi topo -m` file the in-node links are priced from, "in_node_level":
    the name of the in-node level as that matrix links its GPUs ("pcie", "nvlink bridge", or the catalog's
    scale-up fabric where every pair is on NVLink)}; None without one."""
    segment_nodes: int | None = None
    """SLURM segment (`sbatch --segment`) the job's GPUs were laid out in, in nodes; None: racks filled whole."""
    recipe: dict | None = None
    """The whole recipe the plan is priced with (`Recipe` fields, the searched choices resolved, the recompute
    modules of its selective recompute)."""
    recipe_sources: dict[str, str] | None = None
    """Recipe field -> where its value came from: "flag", "file:PATH", "launch:FILE:LINE: TEXT" (audit),
    "searched" (the search chose it) or "default"."""
    job_defaults: dict[str, str] | None = None
    """`evaluate`: the sequence length and global batch from neither a flag nor the model file (placement's own
    defaults), each with its value and fix (cli.job_defaults); `plan` puts them at the top of its JSON."""

    memory_headroom_bytes: float = 0.0
    """HBM per GPU the plan keeps free (`--memory-headroom-gib`), already taken out of `memory_capacity_bytes`."""
    memory_pool: dict | None = None
    """Where the job's launch caps the framework's own memory pool below the HBM (an audited MaxText job's JAX pool,
    TrainingSpec.memory_pool_bytes): {"pool_bytes" (null: the launch sets no cap, as "note" says), "reserve_bytes"
    (outside the pool), "hbm_bytes", "note" (the setting and where it is)}; `memory_capacity_bytes` is at most pool +
    reserve.  None: the framework keeps no pool of its own, or the files have no launch line to say."""
    published_best: dict | None = None
    """The best published run of the plan's kind among the calibration runs `placement validate` prices (same
    accelerator, or else family, same precision, dense or MoE) and the plan against it: {"group", "runs", "best_run",
    "best_citation", "best_mfu", "plan_mfu", "ratio", "above"} (calibration.published); `above` true means the plan's
    MFU is higher than every such run: that margin is the model's extrapolation.  None where no run is of its kind."""
    unpublished_kind: str | None = None
    """Where no published run is of the plan's kind (`published_best` null), that kind, "dense / gb200 / bf16": the
    text says no measured run bounds the price.  None where one is."""
    model_features: dict[str, dict] | None = None
    """Model fields that change the price and that a framework or a launch file may decide, as priced:
    field -> {"value": ..., "source": "model <name>" or why the files run another value}.  Only
    `parallel_residual`, and only where it is on in the model or was turned off; None otherwise."""
    accelerator_assumptions: dict[str, str] | None = None
    """Accelerator constants the price takes in place of one the accelerator's file leaves unset: field -> what was
    used and why (`--precision fp8` on an accelerator without `matmul_efficiency_fp8`: its BF16 efficiency, of the FP8
    peak).  None where every constant the price uses is the file's own."""
    fp8_recipe_as_run: str | None = None
    """The FP8 recipe an audited job runs where it is priced as another (Megatron's `delayed` scaling, priced as
    per-tensor `tensorwise`); None where `recipe.fp8_recipe` is what runs."""
    precision_as_run: str | None = None
    """The 16-bit mode an audited job runs where it is priced as another (FP16 with loss scaling, priced as BF16: the
    same tensor-core rate); None where `precision` is what runs."""

    @property
    def headroom_note(self) -> str:
        """` (4.0 GiB more kept free)` after the memory figures where the plan keeps headroom, else ""."""
        if self.memory_headroom_bytes:
            return f" ({self.memory_headroom_bytes / GiB:.1f} GiB more kept free)"
        spare = tight_spare(self.memory_capacity_bytes, self.peak_memory_bytes, self.fits, 0.0)
        if spare is not None:
            return (f" (within {spare / GiB:.1f} GiB: an estimate, no headroom kept; --memory-headroom-gib G plans "
                    f"with G GiB free)")
        return ""

    def recipe_spec(self) -> Recipe:
        """`recipe` as a validated Recipe (the default recipe when the plan carries none)."""
        return Recipe.model_validate(self.recipe) if self.recipe is not None else Recipe()

    def layout_spec(self) -> Layout:
        """The plan's layout as the input `evaluate` takes (to price it again under another precision)."""
        lay = self.layout
        return Layout(tp=lay.tp, cp=lay.cp, ep=lay.ep, etp=lay.etp, pp=lay.pp, vpp=lay.vpp, dp=lay.dp,
                      micro_batch_size=lay.micro_batch_size, zero_stage=lay.zero_stage, dp_shard=lay.dp_shard,
                      recompute=lay.recompute, sequence_parallel=lay.sequence_parallel)


def _r(x: float, digits: int = 6) -> float:
    """Round for stable, readable JSON (the model is not that precise)."""
    return float(f"{float(x):.{digits}g}")


def plan_recipe(batch: LayoutBatch, est: Estimates, i: int) -> Recipe:
    """The whole recipe candidate i is priced with: the estimate's choices and the batch's recompute modules."""
    if est.dispatcher is None:  # an estimate without per-candidate choices: its recipe as given
        return est.recipe.model_copy(update={"recompute_modules": batch.modules(i)})
    return est.recipe_of(i).model_copy(update={"recompute_modules": batch.modules(i)})


def _other_parts(est: Estimates, i: int, recipe: Recipe, zero: int, pp: int) -> dict:
    """other_bytes split into the logits, the fixed reserve and the buffers, and the gradients' width."""
    other = float(est.other_bytes[i])
    logits = float(est.logits_bytes[i]) if est.logits_bytes is not None else 0.0
    reserve = float(MEMORY_RESERVE_BYTES)
    return {"logits_bytes": _r(logits, 8), "reserve_bytes": _r(reserve, 8),
            "buffers_bytes": _r(max(other - logits - reserve, 0.0), 8),
            "gradient_dtype": gradient_dtype(recipe, zero, pp)}


def make_plan(batch: LayoutBatch, est: Estimates, i: int, model: ModelSpec, train: TrainingSpec,
              topo: Topology, recipe_sources: dict[str, str] | None = None,
              model_sources: dict[str, str] | None = None) -> Plan:
    """Plan of candidate i.  `recipe_sources`: field -> source of the recipe's values; fields it leaves out
    are "default".  `model_sources`: model field -> why the priced model differs from the model given
    (frameworks.model_as_run, the audit's launch files)."""
    lay = batch.layout(i)
    recipe = plan_recipe(batch, est, i)  # the candidate's own split (the search may account the embedding)
    # an FP8 recipe left to the accelerator is written as the one priced (a user trial: null in the JSON while the
    # files wrote --fp8-recipe tensorwise, or mxfp8 on Blackwell); its source stays "default"
    if recipe.fp8_recipe is None:
        recipe = recipe.model_copy(update={"fp8_recipe": fp8_recipe(topo, recipe, train.precision)})
    per_rank = rank_layer_counts(model.num_layers, lay.pp, lay.vpp, recipe.pipeline_layout,
                                 recipe.account_for_embedding, recipe.account_for_loss, recipe.mtp_layers)
    sources = {f: (recipe_sources or {}).get(f, "default") for f in Recipe.model_fields}
    if train.precision is Precision.FP8 and recipe.fp8_recipe is Fp8Recipe.BLOCKWISE and lay.tp > 1 \
            and sources["tp_comm_overlap"] in ("searched", "default"):
        # the search tried it on and estimate priced every candidate off (cost.step._no_userbuffers_under_blockwise):
        # a QA run's plan said "tp overlap off (searched)", as if it had lost on time
        sources["tp_comm_overlap"] = BLOCKWISE_TP_OVERLAP_OFF
    best = _published_best(model, topo, train, est, i, lay, recipe)
    stages = [per_rank[0]]
    stages += [max(per_rank[1:-1])] if lay.pp > 2 else []
    stages += [per_rank[-1]] if lay.pp > 1 else []
    terms = {k: float(getattr(est, f"{k}_s")[i]) for k in ("tp", "cp", "ep", "pp")}
    cp_total = float(est.cp_total_s[i])
    dp_total, dp_exp = float(est.dp_s[i]), float(est.dp_exposed_s[i])
    tp_total, ep_total = float(est.tp_total_s[i]), float(est.ep_total_s[i])
    exposed = TermsOut(tp=_r(terms["tp"]), cp=_r(terms["cp"]), ep=_r(terms["ep"]), pp=_r(terms["pp"]), dp=_r(dp_exp))
    overlapped = TermsOut(tp=_r(max(tp_total - terms["tp"], 0.0)), cp=_r(max(cp_total - terms["cp"], 0.0)),
                          ep=_r(max(ep_total - terms["ep"], 0.0)),
                          pp=_r(max(float(est.pp_total_s[i]) - terms["pp"], 0.0)), dp=_r(max(dp_total - dp_exp, 0.0)))
    return Plan(
        layout=LayoutOut(
            tp=lay.tp, cp=lay.cp, ep=lay.ep, etp=lay.etp, pp=lay.pp, vpp=lay.vpp, dp=lay.dp,
            micro_batch_size=lay.micro_batch_size, zero_stage=lay.zero_stage, recompute=lay.recompute.value,
            sequence_parallel=lay.sequence_parallel, dp_shard=lay.shard_degree,
            num_microbatches=int(est.num_microbatches[i]), stage_layers=stages, rank_layers=per_rank,
        ),
        num_gpus=lay.num_gpus,
        step_time_s=_r(est.step_time_s[i]),
        tokens_per_s=_r(est.tokens_per_s[i]),
        mfu=_r(est.mfu[i], 4),
        hfu=_r(est.hfu[i], 4),
        peak_memory_bytes=_r(est.peak_memory_bytes[i], 8),
        memory_capacity_bytes=_r(est.memory_capacity_bytes, 8),
        fits=bool(est.fits[i]),
        breakdown=BreakdownOut(
            compute=_r(est.compute_s[i]), tp=_r(max(tp_total, terms["tp"])), cp=_r(cp_total),
            ep=_r(max(ep_total, terms["ep"])), pp=_r(max(float(est.pp_total_s[i]), terms["pp"])),
            dp=_r(dp_total), bubble=_r(est.bubble_s[i]),
            optimizer=_r(est.optimizer_s[i]), overlap_slowdown=_r(est.overlap_slowdown_s[i]),
            exposed=exposed, overlapped=overlapped, host=_r(est.host_s[i]),
            grad_accumulation=_r(est.grad_accumulation_s[i]), variability=_r(est.variability_s[i]),
        ),
        memory=MemoryOut(
            weights_bytes=_r(est.weights_bytes[i], 8), grads_bytes=_r(est.grads_bytes[i], 8),
            optimizer_bytes=_r(est.optimizer_bytes[i], 8), activations_bytes=_r(est.activations_bytes[i], 8),
            other_bytes=_r(est.other_bytes[i], 8), **_other_parts(est, i, recipe, lay.zero_stage, lay.pp),
        ),
        model=model.name, cluster=topo.cluster.name, accelerator=topo.accelerator.name,
        seq_len=train.seq_len, global_batch=train.global_batch, precision=train.precision.value,
        tool_version=__version__,
        segment_nodes=topo.segment_nodes,
        node_topo=None if topo.node_topo_source is None else {"path": topo.node_topo_source,
                                                              "in_node_level": topo.levels[0].name,
                                                              "note": topo.node_topo_note},
        recipe=recipe.model_dump(mode="json"),
        recipe_sources=sources,
        model_features=model_features(model, model_sources),
        accelerator_assumptions=accelerator_assumptions(topo, train),
        memory_headroom_bytes=train.memory_headroom_bytes,
        memory_pool=None if train.memory_pool_note is None else {
            "pool_bytes": train.memory_pool_bytes, "reserve_bytes": MEMORY_RESERVE_BYTES,
            "hbm_bytes": topo.accelerator.hbm_bytes, "note": train.memory_pool_note or ""},
        unpublished_kind=None if best is not None else (f"{'MoE' if model.moe is not None else 'dense'} / "
                                                        f"{topo.accelerator.name} / {train.precision.value}"),
        published_best=best,
    )


def _published_best(model: ModelSpec, topo: Topology, train: TrainingSpec, est: Estimates, i: int, lay: Layout,
                    recipe: Recipe) -> dict | None:
    """Plan.published_best of candidate i."""
    acc, precision = topo.accelerator.name, train.precision.value
    degrees = {"tp": lay.tp, "cp": lay.cp, "ep": lay.ep, "pp": lay.pp, "dp": lay.dp}
    job = job_key(published_model_name(model), acc, topo.num_gpus, train.seq_len, train.global_batch, precision,
                  degrees)
    return published_best(model.moe is not None, acc, precision, float(est.mfu[i]), job, float(est.step_time_s[i]),
                          lay.model_dump(mode="json"), recipe.model_dump(mode="json"), model_spec=model)


def accelerator_assumptions(topo: Topology, train: TrainingSpec) -> dict[str, str] | None:
    """Plan.accelerator_assumptions: an FP8 plan on an accelerator whose file gives no FP8 GEMM efficiency is priced
    at its BF16 efficiency of the FP8 peak (cost.context.gemm_rates), which no measurement of the part backs (a user
    trial: MI300X FP8 plans at 1.7x BF16's speed, the substitution unsaid)."""
    acc = topo.accelerator
    if train.precision is not Precision.FP8 or acc.matmul_efficiency_fp8 is not None:
        return None
    return {"matmul_efficiency_fp8": f"{acc.matmul_efficiency_bf16:g}, {acc.name}'s BF16 efficiency: its file gives no "
                                     f"FP8 one (no FP8 GEMM measurement of the part), so FP8 GEMMs are priced at "
                                     f"{acc.matmul_efficiency_bf16:g} of its FP8 peak; set matmul_efficiency_fp8 in "
                                     f"its file, or run `placement calibrate --gemm` with FP8 rows"}


def model_features(model: ModelSpec, model_sources: dict[str, str] | None) -> dict[str, dict] | None:
    """Plan.model_features: the parallel residual as priced, where the model has one or the files turned it off."""
    why = (model_sources or {}).get("parallel_residual")
    if not model.parallel_residual and why is None:
        return None
    return {"parallel_residual": {"value": model.parallel_residual, "source": why or f"model {model.name}"}}
