"""What every emitted file shares: the header that says which plan it realizes, and the host order."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from placement import __version__
from placement.cost.constants import ALLOCATOR_FRAGMENTATION, GiB
from placement.cost.step import peak_flops
from placement.plan import Plan
from placement.specs import FfnKind, Layout, ModelSpec, TrainingSpec
from placement.specs.recipe import CudaGraphs, Dispatcher, Recipe, RecomputeModule
from placement.specs.training import Precision
from placement.topology import Topology

OVER_CAPACITY = "(DOES NOT FIT)"
"""Ends the "this file runs" line of a file whose run is over the GPU's memory (`plan`/`evaluate` then exit 1)."""


@dataclass(frozen=True)
class EmitContext:
    plan: Plan
    topo: Topology
    gpu_of_rank: np.ndarray
    model_name: str
    num_layers: int = 0
    moe: bool = False
    model: ModelSpec | None = None
    """The model as the user gave it (what model code of the user's own runs); the plan may have been priced with
    some of its features as a framework's layers run them (`priced_model`, Plan.model_features)."""
    train: TrainingSpec | None = None
    """The job, to price what a file runs when it cannot state the plan (None: warnings without numbers)."""
    job_environment: tuple[str, ...] = ()
    """An audited job's runtime variables (`NAME=value`, LaunchLayout.launch_environment), which its best plan's files
    do not set and whose headers name (audit --out; none for `plan`)."""

    @property
    def routed_experts(self) -> bool:
        """Whether the model has routed experts; for a plan given without its model, whether its layout shards any
        (MaxText and torchtitan shard experts over 'tensor' even at ep 1: maxtext.mesh_sizes, torchtitan.run_etp)."""
        lay = self.plan.layout
        return self.model.moe is not None if self.model is not None else lay.ep > 1 or lay.etp > 1

    @classmethod
    def of(cls, plan: Plan, topo: Topology, gpu_of_rank: np.ndarray, model: ModelSpec,
           train: TrainingSpec | None = None) -> EmitContext:
        """The context of `plan` for `model`; with `train`, files that cannot state the plan are priced."""
        return cls(plan, topo, gpu_of_rank, model.name, model.num_layers, model.is_moe, model, train)

    def priced_as(self, precision: str | None = None, layout: dict | None = None,
                  recipe: dict | None = None, model: dict | None = None, torch_pipeline: bool = False,
                  runs_te: bool = True, gpu_of_rank: np.ndarray | None = None) -> Plan | None:
        """The plan's layout and recipe with `layout` and `recipe` changes (and the model with `model`'s), on the
        ranks the files place, priced at `precision` (default: the plan's): what a file that cannot state the plan
        runs (`torch_pipeline`: its pipeline is torch.distributed.pipelining's, evaluate.check_layout's; `runs_te`:
        its attention is Transformer Engine's, whose context-parallel refusals apply, evaluate.check_layout's)."""
        if self.model is None or self.train is None:
            return None
        from placement.evaluate import evaluate_layout

        train = self.train.model_copy(update={"precision": Precision(precision or self.plan.precision)})
        spec = self.plan.layout_spec()
        lay = Layout.model_validate(spec.model_dump() | (layout or {}))
        rec = Recipe.model_validate(self.recipe.model_dump() | (recipe or {}))
        spec_model = self.priced_model.model_copy(update=model or {})
        mapping = self.gpu_of_rank if gpu_of_rank is None else gpu_of_rank
        return evaluate_layout(spec_model, train, self.topo.with_mapping(mapping), lay, rec,
                               runs_te=runs_te, torch_pipeline=torch_pipeline)

    def with_recipe(self, update: dict) -> EmitContext:
        """The same context with the plan's recipe fields in `update` changed (what a variant of the files runs)."""
        return dataclasses.replace(self, plan=self.plan.model_copy(update={"recipe": {**(self.plan.recipe or {}),
                                                                                      **update}}))

    @property
    def priced_model(self) -> ModelSpec | None:
        """The model as the plan was priced: the given one with the plan's model features."""
        if self.model is None:
            return None
        features = self.plan.model_features or {}
        return self.model.model_copy(update={name: f["value"] for name, f in features.items()})

    def runs_as(self, runs: Runs) -> tuple[str, str]:
        """(header line, warning) for a file that runs `runs` instead of the plan: both times.  ("", "") when
        the file runs the plan."""
        unpriced = f"; and {', '.join(runs.unpriced)} (not priced)" if runs.unpriced else ""
        if not runs.what and runs.as_run is None:
            if not unpriced:
                return "", ""
            what = ", ".join(runs.unpriced)
            return (f"this file runs {what} (not priced: the cost model has no such run); the warnings say why",
                    f"this file runs {what} (not priced)")
        p = self.plan
        other = self.priced_as(runs.precision, runs.layout, runs.recipe, runs.model, runs.torch_pipeline, runs.runs_te,
                               runs.gpu_of_rank) if runs.what else p
        if other is None:
            what = ", ".join(runs.what)
            return f"this file runs {what} (not priced: no job given){unpriced}", f"this file runs {what}{unpriced}"
        said = list(runs.what)
        if runs.as_run is not None:
            other, words = runs.as_run(other)
            said.append(words)
        what = ", ".join(said)
        fits = "" if other.fits else f" {OVER_CAPACITY}"
        change = other.step_time_s / p.step_time_s - 1
        # its MFU too: the `predicted:` line above is the plan's (a user trial looked for the file's own)
        # what the numbers leave out said as such (a user trial read the file's 30.07 s as the price of a MaxText
        # pipeline that the same line then called "not priced")
        left_out = f"; these numbers leave out {', '.join(runs.unpriced)} (not priced)" if runs.unpriced else ""
        line = (f"this file runs {what}: {other.step_time_s:.3f} s/step ({change:+.1%}), "
                f"{other.tokens_per_s:,.0f} tokens/s, MFU {self._mfu_words(other)}, "
                f"{other.peak_memory_bytes / GiB:.1f} of "
                f"{other.memory_capacity_bytes / GiB:.1f} GiB per GPU{fits}{left_out}; the warnings say why")
        return line, (f"this file runs {what}: {other.step_time_s:.3f} s/step against the plan's "
                      f"{p.step_time_s:.3f} s/step{fits}{unpriced}")

    def _mfu_words(self, other: Plan) -> str:
        """The MFU of what a file runs; where its precision is not the plan's, of which peak, and beside it on the
        plan's peak (a user trial read a faster FP8 file's 29.8 % against the bf16 plan's 56.8 %: the FP8 peak is
        twice the BF16 one)."""
        if other.precision == self.plan.precision:
            return f"{other.mfu:.1%}"
        peaks = {str(p): peak_flops(self.topo, p) for p in Precision}
        on_plan = other.mfu * peaks[str(other.precision)] / peaks[str(self.plan.precision)]
        if on_plan == other.mfu:  # no FP8 peak on this accelerator: one basis
            return f"{other.mfu:.1%}"
        return (f"{other.mfu:.1%} of the {str(other.precision).upper()} peak ({on_plan:.1%} of the "
                f"{str(self.plan.precision).upper()} peak, the plan's basis)")

    @property
    def recipe(self) -> Recipe:
        """The recipe the plan is priced with (the default recipe for a plan that carries none)."""
        return self.plan.recipe_spec()

    @property
    def hosts_in_rank_order(self) -> list[str]:
        """Host of node_rank k (the k-th block of gpus_per_host ranks)."""
        gph = self.topo.gpus_per_host
        return [self.topo.host_names[h] for h in (self.gpu_of_rank[::gph] // gph)]

    @cached_property
    def visible_devices(self) -> list[str | None]:
        """CUDA_VISIBLE_DEVICES of node rank k in the priced GPU order, None where it is the identity
        (mapping.report.visible_devices: the same rule as cuda_visible_devices.txt)."""
        from placement.mapping.report import visible_devices

        return visible_devices(self.gpu_of_rank, self.topo.gpus_per_host)

    def visible_prefix(self, node_rank: int) -> str:
        """`CUDA_VISIBLE_DEVICES=... ` to put before node rank `node_rank`'s launch command, "" where its ranks run
        on the GPUs in numbered order (torchrun keeps the parent's list and LOCAL_RANK indexes it, reference/
        frameworks.md §6; JAX and MaxText see the listed GPUs in that order)."""
        visible = self.visible_devices[node_rank]
        return "" if visible is None else f"CUDA_VISIBLE_DEVICES={visible} "


@dataclass
class Runs:
    """What an emitted file runs where it cannot state the plan: the precision, layout and recipe changes, and
    each change in words ("bf16 (not fp8)")."""

    precision: str | None = None
    layout: dict = dataclasses.field(default_factory=dict)
    recipe: dict = dataclasses.field(default_factory=dict)
    what: list[str] = dataclasses.field(default_factory=list)
    model: dict = dataclasses.field(default_factory=dict)
    """Model fields the files run otherwise than the plan was priced (`runs_model`)."""
    unpriced: list[str] = dataclasses.field(default_factory=list)
    """What the files run otherwise that the cost model cannot price, in words (the header says so beside the
    numbers it can give)."""
    torch_pipeline: bool = False
    """The files' pipeline is torch.distributed.pipelining's (torchtitan): its micro-batch rules, not Megatron's
    (cost.rules.Facts.torch_pipeline)."""
    runs_te: bool = True
    """The files' attention is Transformer Engine's (Megatron's): its context-parallel refusals apply to what they run
    (cost.rules.Facts.cp_refused); False for a framework with attention of its own (torchtitan's FlexAttention,
    MaxText's) or none (DeepSpeed's context parallelism is the model code's)."""
    gpu_of_rank: np.ndarray | None = None
    """The GPU each of placement's ranks runs on where the framework places the ranks otherwise than the plan's
    mapping (MaxText's hybrid mesh on hosts its axes do not tile in rank order); None: the plan's."""
    as_run: Callable[[Plan], tuple[Plan, str]] | None = None
    """A change to the re-priced plan that the cost model's own fields cannot state, with its words: DeepSpeed's ZeRO
    over the 'data' ranks alone under cp > 1 (emit.deepspeed.zero_over_data), whose larger shards the header's
    memory holds (a QA run: the header led with the plan's 68.9 GiB and then said the file holds 81.2, not
    priced, where the audit of the file prices 81.2)."""

    def set_precision(self, plan: Plan, precision: str) -> None:
        self.precision = precision
        self.what.append(f"{precision} (not {plan.precision})")

    def set_layout(self, name: str, value: int, words: str) -> None:
        self.layout[name] = value
        self.what.append(words)

    def shard_whole_dp(self, plan: Plan, framework: str) -> None:
        """ZeRO-3 over the whole data-parallel group (dp_shard = dp) where `framework` has no HSDP and the plan
        shards over part of it."""
        lay = plan.layout
        if lay.zero_stage == 3 and lay.dp_shard < lay.dp:
            self.set_layout("dp_shard", lay.dp, f"ZeRO-3 over all {lay.dp} data-parallel ranks (not HSDP shard "
                                                f"{lay.dp_shard}: {framework} has no HSDP here)")


CORE_ATTN_ONLY = (RecomputeModule.CORE_ATTN,)
"""What selective recompute reruns where a framework cannot be told a module list (the layout's default)."""


def _modules_differ(ctx: EmitContext, runs_instead: dict[str, str], selective: tuple) -> bool:
    """Whether the plan's selective recompute reruns other modules than the framework's `selective` does."""
    r, lay = ctx.recipe, ctx.plan.layout
    return ("recompute_modules" in runs_instead and lay.recompute == "selective"
            and set(r.recompute_modules or CORE_ATTN_ONLY) != set(selective))


def runs_recipe(ctx: EmitContext, runs_instead: dict[str, str], runs: Runs,
                selective: tuple[RecomputeModule, ...] = CORE_ATTN_ONLY) -> None:
    """Add to `runs` each recipe feature of the plan that `runs_instead` says the framework cannot be told (the
    same test as recipe_warnings), set to what the framework runs: the feature's default, and for selective
    recompute the modules its own selective policy reruns (`selective`)."""
    r, lay = ctx.recipe, ctx.plan.layout
    for name, default in _FEATURE_DEFAULT.items():
        if name in runs_instead and getattr(r, name) != default and (name != "tp_comm_overlap" or lay.tp > 1):
            runs.recipe[name] = default
            runs.what.append(f"{name} {_word(default, name)} (not {_word(getattr(r, name), name)})")
    if _modules_differ(ctx, runs_instead, selective):
        modules = r.recompute_modules or CORE_ATTN_ONLY
        runs.recipe["recompute_modules"] = tuple(selective)
        runs.what.append(f"selective recompute of {'+'.join(m.value for m in selective)} (not "
                         + "+".join(m.value for m in modules) + ")")
    from placement.frameworks import row_applies

    for name in runs_instead:
        if name in _FEATURE_DEFAULT or name == "recompute_modules" or not matters(name, lay):
            continue
        if not row_applies(name, runs.precision or ctx.plan.precision):  # an FP8 setting of a file run in bf16
            continue
        default = Recipe.model_fields[name].default
        if name == "fp8_recipe" and default is None:  # the framework's own: the accelerator's, as the plan's default
            from placement.cost.context import fp8_recipe

            default = fp8_recipe(ctx.topo, Recipe(), Precision.FP8)
        if getattr(r, name) != default:
            runs.recipe[name] = default
            runs.what.append(f"{name} {_word(default, name)} (not {_word(getattr(r, name), name)})")


def runs_model(ctx: EmitContext, framework: str, runs: Runs) -> None:
    """Add to `runs` the model fields the files run otherwise than the plan was priced: the framework's own layers
    run a parallel residual in sequence (frameworks.model_as_run); the user's model code (DeepSpeed, a device
    mesh) runs the model as given, also where the plan was priced for a framework's layers."""
    if ctx.model is None:
        return
    from placement.frameworks import model_as_run

    run, why = model_as_run(framework, ctx.model)
    priced = ctx.priced_model
    if run.parallel_residual == priced.parallel_residual:
        return
    runs.model["parallel_residual"] = run.parallel_residual
    if run.parallel_residual:
        runs.what.append("the model's parallel residual (its own model code), not attention then the MLP")
    else:
        runs.what.append(f"attention, then the MLP (not the model's parallel residual: {why['parallel_residual']})")


def forced_fields(framework: str) -> tuple[str, ...]:
    """Recipe fields the framework runs at one value whatever the plan (frameworks.CAPABILITIES' recipe row)."""
    from placement.frameworks import CAPABILITIES

    cap = CAPABILITIES[framework]
    return tuple(name for name, _, _ in cap.recipe + cap.moe_recipe)


def forced(ctx: EmitContext, framework: str, precision: str | None = None,
           config: str | None = None, runs: Runs | None = None,
           written: frozenset[str] = frozenset()) -> list[tuple[str, object, str]]:
    """(field, value, why) for each recipe value the framework always runs (frameworks.recipe_rows: its
    CAPABILITIES rows, and those of the torchtitan `config` the files name) where the plan was priced with another,
    for files that run `precision` (default: the plan's); not the fields in `written`, which the files set to the
    plan's value themselves (MaxText's attention: cudnn_flash_te).

    For the warnings (`runs` None) a row of one precision's (an FP8 recipe) holds where the plan and the files are
    both at it: a file at another precision than the plan says so in a warning of its own.  For what the files run
    (`runs`: the layout and recipe changes already found) every row of the files' precision holds, tested against
    the layout the files run: torchtitan runs a ZeRO-1 plan as ZeRO-2, whose reshard after backward and, under a
    pipeline, unsharded gradients the files then run although the plan's ZeRO-1 has neither; a field already
    changed stays as changed."""
    from placement.frameworks import recipe_rows, row_applies

    lay = ctx.plan.layout if runs is None else ctx.plan.layout.model_copy(update=runs.layout)
    taken = set() if runs is None else set(runs.recipe)
    rows = recipe_rows(framework, False, precision or ctx.plan.precision, config, ctx.moe)
    # the recipe the files run: the plan's, with the framework's rows and the changes already found
    run = ctx.recipe.model_copy(update={name: value for name, value, _ in rows}
                                | ({} if runs is None else runs.recipe))
    return [(name, value, why) for name, value, why in rows
            if (runs is not None or row_applies(name, ctx.plan.precision)) and name not in taken
            and priced_value(ctx, name) != value and matters(name, lay, run) and name not in written
            and not (name in PRICES_NOTHING_AT and value == PRICES_NOTHING_AT[name]
                     and not matters(name, ctx.plan.layout))]


PRICES_NOTHING_AT = {"grad_buffer_passes": 0}
"""A framework row's value that prices nothing, as the plan's own layout did not price the field either: a ZeRO-2
plan (no whole gradient buffer) that MaxText runs as ZeRO-1 without Megatron-Core's buffer runs no passes as priced."""


def priced_value(ctx: EmitContext, name: str):
    """The plan's recipe value of `name` as it prices: an FP8 recipe left to the accelerator is the one it runs
    (cost.context.fp8_recipe: mxfp8 on Blackwell, tensorwise before)."""
    value = getattr(ctx.recipe, name)
    if name == "fp8_recipe" and value is None:
        from placement.cost.context import fp8_recipe

        return fp8_recipe(ctx.topo, ctx.recipe, Precision.FP8)
    return value


def runs_forced(ctx: EmitContext, framework: str, runs: Runs, precision: str | None = None,
                config: str | None = None, written: frozenset[str] = frozenset()) -> None:
    """Add to `runs` each value the framework always runs where the plan was priced with another (`forced`)."""
    for name, value, _ in forced(ctx, framework, precision, config, runs, written):
        runs.recipe[name] = value
        runs.what.append(f"{name} {_word(value, name)} (not {_word(priced_value(ctx, name), name)})")


def forced_warnings(ctx: EmitContext, framework: str, precision: str | None = None,
                    config: str | None = None, written: frozenset[str] = frozenset()) -> list[str]:
    """A warning for each value the framework always runs where the plan was priced with another (`forced`)."""
    return [f"the plan is priced with {name} = {_word(priced_value(ctx, name), name)}, which this file cannot run: "
            f"{why}" for name, _, why in forced(ctx, framework, precision, config, written=written)]


NOT_SETTINGS = frozenset({"routing_imbalance", "fused_model_ops", "moe_fusions", "norms_fused",
                          "remat_saves_named_only", "optimizer_over_replicas_beside_fsdp", "expert_w1_rerun"})
"""Recipe fields no launch file states: the data's expert load (routing_imbalance), and the model code's own eager
ops and MoE kernels, which the code the user runs decides (Megatron's files do state its MoE fusions).  Every other
field is, for each emitter, written into its files, re-priced as the framework runs it (RUNS_INSTEAD, FORCED), or
the user's (a DeviceMesh's or MaxText's launcher).  `norms_fused` is the model code's too (Megatron-Core's
Transformer Engine spec fuses them; MaxText's JAX layers do not, a framework row), and so is
`remat_saves_named_only` (JAX rematerialization keeps what its policy names: MaxText's, a framework row), and
`optimizer_over_replicas_beside_fsdp` (which layouts optimizer_over_replicas holds on: the framework's own rule,
MaxText's refusal of shard_optimizer_over_data beside fsdp, a framework row), and `expert_w1_rerun` (which of its
tensors the model code names: MaxText's sparse_matmul path, read by the audit, re-priced by its emitter)."""

_MATTERS = {"checkpoint_sync": lambda lay: lay.recompute == "full",
            "checkpoint_interval": lambda lay: lay.recompute == "full",
            "pipeline_p2p_whole": lambda lay: lay.pp > 1 and lay.tp > 1,
            "pipeline_p2p_scatter": lambda lay: lay.pp > 1 and lay.tp > 1 and not lay.sequence_parallel,
            "pipeline_grads_whole": lambda lay: lay.pp > 1 and lay.tp > 1,
            "pipeline_sends_mask": lambda lay: lay.pp > 1,
            "sp_saves_gathered_inputs": lambda lay: lay.tp > 1 and lay.sequence_parallel,
            "tp_gathers_16bit": lambda lay: lay.tp > 1 and lay.sequence_parallel,
            "tp_async_backward": lambda lay: lay.tp > 1,
            # a ZeRO-0 that runs as FSDP2 (zero0_as_fsdp) defers its reduction under a pipeline too
            "pipeline_unsharded_grads": lambda lay: lay.pp > 1 and lay.zero_stage != 1,
            "zero0_as_fsdp": lambda lay: lay.zero_stage == 0,
            # from ZeRO-2 on a rank holds only its gradient shard, no whole buffer to pass over
            "grad_buffer_passes": lambda lay: lay.zero_stage <= 1,
            "optimizer_over_replicas": lambda lay: lay.zero_stage == 3 and lay.dp_shard < lay.dp,
            # which HSDP layouts it holds on: those with fsdp ranks beside the expert ranks (cost.context.over_replicas)
            "optimizer_over_replicas_beside_fsdp": lambda lay: lay.zero_stage == 3 and lay.ep < lay.dp_shard < lay.dp,
            # the replicas' all-reduce: HSDP, or a ZeRO-0 run as FSDP2; once a step under a pipeline anyway
            "dp_reduce_every_microbatch": lambda lay: (lay.pp == 1 and lay.num_microbatches > 1 and lay.dp > 1
                                                       and (lay.zero_stage == 0 or
                                                            (lay.zero_stage == 3 and lay.dp_shard < lay.dp))),
            # under a pipeline torch's PipelineStage turns FSDP2's reshard off until the last backward
            # (pipeline_unsharded_grads), so the row prices nothing there
            "reshard_after_backward": lambda lay: lay.zero_stage == 2 and lay.pp == 1,
            # float32 master weights change what a rank holds below ZeRO-3 (recipe-aware: _MATTERS_RECIPE)
            "fp32_weights": lambda lay: lay.zero_stage < 3,
            # autocast's held casts and whole float32 weights: below ZeRO-3, under fp32_weights (_MATTERS_RECIPE)
            "fp32_weights_autocast": lambda lay: lay.zero_stage < 3,
            "pipeline_p2p_blocking": lambda lay: lay.pp > 2 or (lay.pp == 2 and lay.vpp == 1),
            "grad_all_reduce": lambda lay: lay.zero_stage == 1,
            # the buckets of a DDP or ZeRO-1 reduction during the last backward (cost.dp.tail_bucket_params)
            "grad_buckets": lambda lay: lay.dp > 1 and lay.zero_stage <= 1,
            "ddp_bucket_params": lambda lay: lay.dp > 1 and lay.zero_stage <= 1,
            "cp_comm_type": lambda lay: lay.cp > 1,
            "pipeline_schedule": lambda lay: lay.pp > 1,
            "pp_comm_overlap": lambda lay: lay.pp > 1 and lay.vpp > 1,
            "align_param_gather": lambda lay: lay.zero_stage == 1 and lay.pp > 1 and lay.vpp > 1 and lay.dp > 1,
            "account_for_embedding": lambda lay: lay.pp > 1,
            "account_for_loss": lambda lay: lay.pp > 1,
            # JAX's named saves change what selective recompute keeps only (cost.memory._named_kept)
            "remat_saves_named_only": lambda lay: lay.recompute == "selective"}
"""Recipe fields that price nothing outside these layouts (cost.comm.pp_term, cost.dp.dp_term, cost.comm.cp_term):
a file need not say it runs without them there."""


_MATTERS_RECIPE = {
    # under ZeRO-3 float32 weights hold 4 + 4 + 8 bytes a parameter where 16-bit ones hold 2 + 2 + 12: the same 16
    # where the gradients are reduced in float32 anyway (4 + 4 + 8 against 2 + 2 + 12 is 16 either way only then:
    # cost.memory gives ZeRO-3's 16-bit weights 2-byte gradients), unless the optimizer is sharded over HSDP replicas
    # that do not shard the weights and gradients (optimizer_over_replicas)
    "fp32_weights": lambda lay, r: (lay.zero_stage < 3 or not r.grad_reduce_fp32
                                    or (r.optimizer_over_replicas and lay.dp_shard < lay.dp)),
    "fp32_weights_autocast": lambda lay, r: lay.zero_stage < 3 and r.fp32_weights,
    # the experts' w1 rerun prices something only under a selective recompute that keeps the up-projections
    # (cost.context.expert_w1_rerun)
    "expert_w1_rerun": lambda lay, r: lay.recompute == "selective" and "mlp_up" not in r.recompute_modules,
}
"""Recipe fields whose effect on a layout depends on other recipe fields, given the recipe the files run."""


def matters(name: str, lay, recipe: Recipe | None = None) -> bool:
    """Whether recipe field `name` changes what layout `lay` runs (a pipeline field without a pipeline does not),
    under `recipe` (the one the files run) where the answer depends on it (_MATTERS_RECIPE)."""
    if recipe is not None and name in _MATTERS_RECIPE:
        return _MATTERS_RECIPE[name](lay, recipe)
    return _MATTERS.get(name, lambda _: True)(lay)


NONE_WORDS = {"ddp_bucket_params": "Megatron-Core's default, max(40M, 1M x dp x cp)"}
"""What a recipe field left unset (None) prices, where that is not a value a file can be said to run: a MaxText
file of a ZeRO-2 plan run as ZeRO-1 said `ddp_bucket_params 1 (not None)`."""


def _word(value, name: str = "") -> str:
    if value is None and name in NONE_WORDS:
        return NONE_WORDS[name]
    return str(value.value if hasattr(value, "value") else value)


# Which recipe choices each framework launches as priced (Megatron-Core all of them).  Emitting a plan
# for a framework restricts the search to these; a plan that still holds another value (pinned by the
# user) gets a warning naming the feature and what the framework runs instead.
MINIMAL_RECOMPUTES = (RecomputeModule.CORE_ATTN, RecomputeModule.LAYERNORM)
"""The modules MaxText's selective recompute (remat_policy "minimal") reruns in placement's terms: no names save
the attention output (layers/attention_op.py "context") or the norm outputs (emit.maxtext)."""
PLAIN = {"moe_dispatcher": (Dispatcher.ALLTOALL,), "cuda_graphs": (CudaGraphs.NONE,), "tp_comm_overlap": (False,),
         "ep_comm_overlap": (False,), "recompute_modules": ((RecomputeModule.CORE_ATTN,),)}
PER_OP_ONLY = (RecomputeModule.PER_OP,)
"""torchtitan's selective activation checkpointing: its per-op policy (0.3.0 SelectiveAC)."""
RECIPE_SUPPORT: dict[str, dict[str, tuple]] = {
    "megatron": {},
    "torchtitan": PLAIN | {"recompute_modules": (PER_OP_ONLY,), "cuda_graphs": (CudaGraphs.NONE, CudaGraphs.FULL)},
    "deepspeed": PLAIN, "devicemesh": PLAIN,
    "maxtext": PLAIN | {"recompute_modules": (MINIMAL_RECOMPUTES,)},
}
"""framework -> {recipe field: the values it can launch}; a field not listed launches every value."""
GRAPHS_WITHOUT_PP_EP = frozenset({"torchtitan"})
"""Formats whose full CUDA graphs run only without pipeline and expert parallelism (torchtitan 0.3.0 captures its one
graph of forward and backward by default, trainer.py:613-614, and refuses it with PP or EP, trainer.py:179-210;
emit.torchtitan.graph_args turns it off there): the search prices them so (RecipeChoices.full_graphs_without_pp_ep)."""


def framework_choices(formats: list[str], choices, modules: tuple | None):
    """(RecipeChoices, SearchConfig.module_sets) restricted to what every format in `formats` launches as
    priced.  A field pinned to one value stays pinned (the emitter warns); `modules` is the user's
    recompute-module list (None: searched)."""
    from placement.search import SEARCHED_FIELDS

    update = {}
    for fmt in formats:
        support = RECIPE_SUPPORT.get(fmt, {})
        for field, attr in SEARCHED_FIELDS.items():
            options = update.get(attr, getattr(choices, attr))
            if field in support and len(options) > 1:
                kept = tuple(o for o in options if o in support[field])
                update[attr] = kept or options[:1]
    if GRAPHS_WITHOUT_PP_EP & set(formats) and CudaGraphs.FULL in update.get("cuda_graphs", choices.cuda_graphs):
        update["full_graphs_without_pp_ep"] = True
    return dataclasses.replace(choices, **update), (tuple(modules),) if modules else launchable_module_sets(formats)


def launchable_module_sets(formats: list[str]) -> tuple[tuple[RecomputeModule, ...], ...] | None:
    """The selective-recompute module lists every format in `formats` launches as priced: the lists the formats
    that restrict them share (RECIPE_SUPPORT), less torchtitan's per-op policy where a format without a restriction
    (Megatron-LM, whose --recompute-modules names modules) is among them; None where none restricts (the search's
    own lists, none of them per_op); () where they share none, so selective recompute is not searched (a user trial:
    `--emit all` took torchtitan's per_op, which the Megatron-LM and MaxText files ran as other modules, out of
    memory)."""
    restricted = [RECIPE_SUPPORT[f]["recompute_modules"] for f in formats
                  if "recompute_modules" in RECIPE_SUPPORT.get(f, {})]
    if not restricted:
        return None
    shared = tuple(ms for ms in restricted[0] if all(ms in sets for sets in restricted[1:]))
    if any("recompute_modules" not in RECIPE_SUPPORT.get(f, {}) for f in formats):
        shared = tuple(ms for ms in shared if RecomputeModule.PER_OP not in ms)
    return shared


_FEATURE_DEFAULT = {"moe_dispatcher": Dispatcher.ALLTOALL, "cuda_graphs": CudaGraphs.NONE, "tp_comm_overlap": False,
                    "ep_comm_overlap": False}


def recipe_warnings(ctx: EmitContext, framework: str, runs_instead: dict[str, str],
                    selective: tuple[RecomputeModule, ...] = CORE_ATTN_ONLY) -> list[str]:
    """A warning for each recipe feature of the plan the framework cannot launch: the feature, and what
    the framework runs instead (`runs_instead`: field -> that text; `selective`: the modules its selective
    recompute reruns)."""
    r = ctx.recipe
    lay = ctx.plan.layout
    out = []
    values = {"moe_dispatcher": r.moe_dispatcher, "cuda_graphs": r.cuda_graphs, "tp_comm_overlap": r.tp_comm_overlap,
              "ep_comm_overlap": r.ep_comm_overlap}
    names = {"moe_dispatcher": f"the {r.moe_dispatcher.value} MoE dispatcher",
             "cuda_graphs": f"{r.cuda_graphs.value} CUDA graphs", "tp_comm_overlap": "TP communication overlap",
             "ep_comm_overlap": "EP all-to-all overlap"}
    for field, value in values.items():
        if field in runs_instead and value != _FEATURE_DEFAULT[field] and (field != "tp_comm_overlap" or lay.tp > 1):
            out.append(f"the plan is priced with {names[field]}, which {framework} cannot be told to run here: "
                       f"{runs_instead[field]}")
    if _modules_differ(ctx, runs_instead, selective):
        modules = r.recompute_modules or CORE_ATTN_ONLY
        out.append(f"the plan recomputes the modules {', '.join(m.value for m in modules)} (selective); {framework} "
                   f"cannot be told that module list: {runs_instead['recompute_modules']}")
    for field, text in runs_instead.items():
        if field in values or field == "recompute_modules" or not matters(field, lay):
            continue
        value = getattr(r, field)
        if value != Recipe.model_fields[field].default:
            out.append(f"the plan is priced with {field} = {value.value if hasattr(value, 'value') else value}, "
                       f"which {framework} cannot be told here: {text}")
    return out


def header(ctx: EmitContext, framework: str, comment: str = "#", runs: str = "", order_where: str = "below",
           exports: Collection[str] = ()) -> str:
    """Which plan the file realizes and its predicted numbers; `runs`: what the file runs instead, when it
    cannot state the plan (EmitContext.runs_as), right under the prediction; the audited job's runtime variables the
    file does not set (those but `exports`, the names it sets itself)."""
    p = ctx.plan
    lay = p.layout
    lines = [
        f"{framework} launch for a placement plan (placement {__version__})",
        f"model {p.model} on {p.num_gpus} x {p.accelerator}{'' if p.cluster == p.accelerator else f' ({p.cluster})'}"
        # priced with its nodes N at a time from one rack (sbatch --segment): the launch must ask for it too
        + (f", segment {p.segment_nodes} nodes (sbatch --segment={p.segment_nodes})" if p.segment_nodes else "")
        + f", seq {p.seq_len}, global batch "
        f"{p.global_batch}, {p.precision}",
        f"layout: tp {lay.tp}, cp {lay.cp}, ep {lay.ep}, etp {lay.etp}, pp {lay.pp} (vpp {lay.vpp}), dp {lay.dp}, "
        f"ZeRO-{lay.zero_stage}"
        # HSDP: the shard group the files' replicate x shard degrees build (a user trial read ZeRO-3 over all dp)
        + (f" in shard groups of {lay.dp_shard} (HSDP: {lay.dp // lay.dp_shard} replicas)"
           if lay.dp_shard != lay.dp else "")
        + f", micro-batch {lay.micro_batch_size}, recompute {lay.recompute}, "
        f"sequence parallel {lay.sequence_parallel}",
        f"predicted: {p.step_time_s:.3f} s/step, {p.tokens_per_s:,.0f} tokens/s, MFU {p.mfu:.1%}, "
        f"{p.peak_memory_bytes / GiB:.1f} of {p.memory_capacity_bytes / GiB:.1f} GiB per GPU"
        + p.headroom_note
        # an evaluated layout that does not fit still gets its files (a user trial: the header gave the memory
        # above capacity without a word)
        + ("" if p.fits else " -- DOES NOT FIT: the job runs out of memory as planned"),
        *([runs] if runs else []),
        # where the host order is: the launch lines below, or (a file with none: the device mesh, MaxText's YAML)
        # the launcher's (a user trial read "below" in a file that has no host order)
        "ranks: tp innermost, then cp, dp, pp (placement's rank order, as Megatron-Core and torchtitan number them);",
        "the rank -> GPU mapping is applied by the host order (node ranks)"
        + (" and each node's CUDA_VISIBLE_DEVICES" if any(ctx.visible_devices) else "")
        + f" {order_where}, never by renumbering ranks inside the framework",
    ]
    dropped = [v for v in ctx.job_environment if v.split("=", 1)[0] not in exports]
    if dropped:
        lines.append(f"not set here, though the audited job's launch sets them: {' '.join(dropped)}; the prediction "
                     f"above runs without them (NCCL's and the frameworks' defaults): export the ones your site needs "
                     f"before the launch")
    return "\n".join(f"{comment} {line}" for line in lines) + "\n"


ALLOCATOR_EXPORT = "export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}\n"
"""Before the per-node launch lines: PyTorch's expandable segments, which the memory price assumes
(cost.constants.ALLOCATOR_FRAGMENTATION), kept where the environment sets its own.  launch.sbatch exports it, and
torchtitan's own run_train.sh sets it (PYTORCH_ALLOC_CONF="expandable_segments:True", pytorch/torchtitan b5bcd76c6);
a user trial found torchtitan.sh and deepspeed.sh without it, their plans at 78.0 of 78.1 GiB."""
ALLOCATOR_NOTE = (f"# the memory price assumes PyTorch's expandable segments ({ALLOCATOR_FRAGMENTATION:.0%} of HBM "
                  f"lost to fragmentation; without them it can take several GiB more): run this export on each node "
                  f"first (kept where your environment sets its own)\n")


def torchrun_lines(ctx: EmitContext, command: str, master_port: int = 29500, blocking: bool | None = None) -> str:
    """One `torchrun` line per node, run on that host; node ranks follow the planned host order, and a node whose
    ranks run on its GPUs in another order than 0, 1, ... gets CUDA_VISIBLE_DEVICES in the priced order
    (`EmitContext.visible_prefix`).  `blocking` (default: the recipe's cuda_launch_blocking) prefixes
    CUDA_LAUNCH_BLOCKING=1."""
    hosts = ctx.hosts_in_rank_order
    lines = ["# one line per node, run on that host (static rendezvous; node ranks follow the planned host order"
             + ("; CUDA_VISIBLE_DEVICES: the GPU order inside the node the plan is priced with"
                if any(ctx.visible_devices) else "") + ")\n"]
    if ctx.recipe.cpu_affinity:
        lines.append("# --numa-binding node: torchrun's flag since PyTorch 2.9 (older: bind with numactl, or plan "
                     "with --no-cpu-affinity)\n")
    lines.append(ALLOCATOR_NOTE + ALLOCATOR_EXPORT)
    # the plan was priced with blocking launches (recipe cuda_launch_blocking): the files run that way
    env = "CUDA_LAUNCH_BLOCKING=1 " if (ctx.recipe.cuda_launch_blocking if blocking is None else blocking) else ""
    for k, host in enumerate(hosts):
        lines.append(f"# on {host}\n{env}{ctx.visible_prefix(k)}torchrun --nnodes {len(hosts)} "
                     f"--nproc-per-node {min(ctx.topo.gpus_per_host, ctx.plan.num_gpus)} "
                     f"--node-rank {k} --master-addr {hosts[0]} --master-port {master_port} {numa_binding(ctx)}"
                     f"{command}\n")
    return "".join(lines)


def numa_binding(ctx: EmitContext) -> str:
    """torchrun's `--numa-binding node` (each worker on the CPUs of its GPU's NUMA node; PyTorch "NUMA Binding",
    torch.distributed.run since 2.9) where the plan was priced with bound processes (recipe cpu_affinity)."""
    return "--numa-binding node " if ctx.recipe.cpu_affinity else ""


DOES_NOT_START = "does not start: "
NOT_STARTING = "this file does not start:"
"""Begins the header line of a file its framework refuses at start-up (`plan`/`evaluate`/`audit` then exit 1)."""
"""How an emitter's warning begins when the framework refuses the file at start-up (`refusal`)."""


def refusal(text: str) -> str:
    """A warning that the framework refuses the emitted file at start-up: `header_runs` then promises no step time."""
    return DOES_NOT_START + text


OTHER_MODEL = "trains another model: "
UNPRICEABLE = "cannot be priced: "


def unpriceable(text: str) -> str:
    """A warning that the file runs something the cost model cannot price (a MaxText pipeline with layers outside
    it, which the audit refuses to price too): `header_runs` then promises no step time (a user trial: the header
    gave one for a job it described otherwise)."""
    return UNPRICEABLE + text


def other_model(text: str) -> str:
    """A warning that the emitted file starts but trains a model other than the plan's: `header_runs` then promises
    no step time (a user trial: a MaxText file naming base.yml's default model under a header priced for qwen3)."""
    return OTHER_MODEL + text


def header_runs(framework: str, warnings: list[str], line: str, warn: str) -> tuple[str, str]:
    """The header's line on what the file runs (EmitContext.runs_as) and its warning; where a warning is a
    `refusal`, the file does not start, so the line says so and prices nothing (a user trial: a header priced a
    MaxText file MaxText rejects); where it is `other_model`, the file trains another model, likewise."""
    reasons = [w[len(DOES_NOT_START):] for w in warnings if w.startswith(DOES_NOT_START)]
    if reasons:
        return (f"{NOT_STARTING} {framework} refuses it at start-up ({'; '.join(reasons)}), so no step "
                f"time is promised for it; the prediction above is the plan's, which {framework} cannot run as "
                f"written"), ""
    others = [w[len(OTHER_MODEL):] for w in warnings if w.startswith(OTHER_MODEL)]
    if others:
        return (f"this file trains another model than the plan's ({'; '.join(others)}), so no step time is "
                f"promised for it; the prediction above is for the plan's model"), ""
    unpriced = [w[len(UNPRICEABLE):] for w in warnings if w.startswith(UNPRICEABLE)]
    if unpriced:
        return (f"this file runs what placement cannot price ({'; '.join(unpriced)}), so no step time is promised "
                f"for it; the prediction above is the plan's"), ""
    return line, warn


def warn_block(warnings: list[str], comment: str = "#") -> str:
    if not warnings:
        return ""
    return "".join(f"{comment} WARNING: {w}\n" for w in warnings)


def gpt_oss_features(model: ModelSpec | None, mla_yarn: bool = True) -> list[str]:
    """The model's GPT-OSS-style features that change the numerics and not the cost, in words with their numbers
    (gated quick-GELU with its offset and clamp, learnable attention sinks, YaRN's numbers; an MLA model's YaRN only
    with `mla_yarn`, for frameworks whose MLA configs do not run it themselves); empty for a model without them."""
    if model is None:
        return []
    out = []
    if model.ffn_kind is FfnKind.QUICK_GEGLU:
        out.append("a gated quick-GELU MLP (gate * sigmoid(1.702 gate)"
                   + (f" * (up + {model.glu_linear_offset:g})" if model.glu_linear_offset else " * up") + ")")
    elif model.glu_linear_offset:
        out.append(f"a GLU offset {model.glu_linear_offset:g} on the linear branch")
    if model.swiglu_clamp is not None:
        out.append(f"the MLP's inputs clamped at {model.swiglu_clamp:g}")
    if model.attention_sinks:
        out.append("learnable attention sinks (one logit per head)")
    y = model.yarn_rope
    if y is not None and (mla_yarn or model.mla is None):
        out.append(f"YaRN RoPE (factor {y.factor:g}, original_max_position_embeddings "
                   f"{y.original_max_position_embeddings}, beta_fast {y.beta_fast:g}, beta_slow {y.beta_slow:g}, "
                   f"truncate {str(y.truncate).lower()}"
                   + (f", mscale {y.mscale:g}" if y.mscale is not None else "")
                   + (f", mscale_all_dim {y.mscale_all_dim:g}" if y.mscale_all_dim is not None else "") + ")")
    return out


def attention_features(model: ModelSpec | None) -> list[str]:
    """The model's sliding-window attention and partial RoPE, in words with their numbers: what a file whose model
    code is the user's (a DeepSpeed script, a torchtitan config of their own) must build, the window priced as
    attending `sliding_window` keys; empty for a model without them."""
    if model is None:
        return []
    out = []
    if model.sliding_window is not None and model.sliding_window_layers:
        layers = ("every layer" if model.sliding_window_layers == model.num_layers
                  else f"{model.sliding_window_layers} of {model.num_layers} layers")
        out.append(f"sliding-window attention ({model.sliding_window} keys on {layers}; priced so, and full attention "
                   f"there runs slower than priced)")
    if model.rotary_percent is not None and model.rotary_percent < 1:
        out.append(f"RoPE on {model.rotary_percent:g} of each head's dimensions, the rest passed through")
    return out


def differs_from_fixed(spec: object, fixed: dict[str, object]) -> tuple[str, str] | None:
    """Where `spec` (a RoPE scaling spec) differs from the numbers a framework fixes for it: (the spec's values, the
    framework's), each as "name value, ..."; None where it runs the spec's own."""
    def text(v: object) -> str:
        return str(v).lower() if isinstance(v, bool) else f"{v:g}"

    differ = {k: v for k, v in fixed.items() if getattr(spec, k) != v}
    if not differ:
        return None
    return (", ".join(f"{k} {text(getattr(spec, k))}" for k in differ),
            ", ".join(f"{k} {text(v)}" for k, v in differ.items()))
