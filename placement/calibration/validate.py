"""`placement validate`: predicted vs published step time for every calibration run.

Each run's published layout and recipe are pinned.  A pipeline schedule the source does not state is the
framework's default (non-interleaved, vpp 1; a source that says "interleaved" without the chunk count
lets the search pick it); the other fields it leaves out (micro-batch size, ZeRO stage, recompute,
sequence parallelism) are chosen by the search within that layout.  Dense runs of 2021-2022 stacks know
one selective recompute, Korthikanti's core_attn.  Nothing here is tuned per run: the same constants
price every row.

Two files: runs.yaml (dense, the PTD-P / Korthikanti tables and later dense runs) and runs-moe.yaml (the
MoE group, with each run's recipe: dispatcher, overlaps, CUDA graphs, FP8 recipe, recompute modules,
pipeline layout, MTP, segment).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import resources

import yaml
from pydantic import Field, model_validator

from placement.catalog import load_accelerator, load_cluster, load_model
from placement.errors import PlacementInfeasible
from placement.search import FixNames, SearchConfig, search
from placement.specs import AcceleratorSpec, ClusterSpec, ModelSpec
from placement.specs._base import Frozen
from placement.specs.layout import PinnedLayout
from placement.specs.recipe import Recipe, RecomputeModule
from placement.specs.training import AttentionKernel, Precision, TrainingSpec
from placement.topology import Topology

TARGET_GROUPS = ("ptdp-2021-table1", "korthikanti-2022-table5")
MOE_GROUP = "moe"
RUN_FILES = ("runs.yaml", "runs-moe.yaml")


class CalibrationRun(Frozen):
    id: str
    group: str
    citation: str
    location: str | None = None
    model: str
    cluster: str
    num_gpus: int = Field(ge=1)
    seq_len: int = Field(ge=1)
    global_batch: int = Field(ge=1)
    precision: Precision
    attention_kernel: AttentionKernel
    layout: dict[str, int | bool | str]
    """The fields the source states (PinnedLayout's: strict types, no unknown key, degrees that split the GPUs)."""
    interleaved: bool = False
    """The source says the schedule is interleaved but not with how many chunks: the search picks vpp."""
    published_step_time_s: float = Field(gt=0)
    step_time_basis: str
    published_tflops_per_gpu: float | None = None
    tflops_kind: str | None = None
    notes: str = ""
    recipe: Recipe = Field(default_factory=Recipe)
    """What the framework ran besides the degrees, as the source (or its recipe files) states it."""
    recipe_sources: str = ""
    """Where each recipe value was read."""
    assumptions: str = ""
    """What no source states and the run assumes (said in the output)."""
    segment_nodes: int | None = Field(default=None, ge=0)
    """Trays per NVL72 rack segment of the job (SLURM --segment); None: the cluster's default."""

    @model_validator(mode="after")
    def _check_layout(self) -> CalibrationRun:
        PinnedLayout.model_validate(self.layout).check_gpus(self.num_gpus)
        return self

    @property
    def job_recipe(self) -> Recipe:
        """The recipe with the run's attention kernel (a row states it beside the recipe)."""
        return self.recipe.model_copy(update={"attention_kernel": self.attention_kernel})


@dataclass(frozen=True)
class RunResult:
    run: CalibrationRun
    predicted_step_time_s: float | None
    fits: bool
    layout: dict | None
    peak_memory_gib: float | None
    capacity_gib: float | None = None
    recipe: dict | None = None
    searched: dict | None = None
    """The layout fields the source leaves open, as the search chose them (the row's stated assumption)."""
    why: str | None = None
    """Where no layout was priced: the binding constraint (a rule the stated layout breaks, or memory)."""
    slowest_schedule: dict | None = None
    """Where the source leaves the schedule open (vpp or micro-batch size): the slowest legal one that fits, every
    other field as priced (`step_time_s` and the values), so a row shows the span its unstated schedule covers."""
    least_memory: dict | None = None
    """Where no layout fits the memory model (`fits` False) and the run leaves the micro-batch open: the searched fields
    taken at the value the memory model puts lowest, not the fastest ({"micro_batch_size": 1})."""

    @property
    def error(self) -> float | None:
        if self.predicted_step_time_s is None:
            return None
        return (self.predicted_step_time_s - self.run.published_step_time_s) / self.run.published_step_time_s


UNBOUND_MEMORY = 64
"""HBM multiple a run is re-priced with when its stated layout (recompute included) does not fit the memory
model: the published run fit, so its time is still the row's, and the row says it does not fit."""


def load_runs() -> list[CalibrationRun]:
    runs = []
    for name in RUN_FILES:
        text = resources.files("placement.calibration").joinpath(name).read_text()
        runs += [CalibrationRun.model_validate(r) for r in yaml.safe_load(text)]
    return runs


def run_topology(run: CalibrationRun, cluster: ClusterSpec | None = None,
                 accelerator: AcceleratorSpec | None = None) -> Topology:
    """The run's GPUs on its catalog cluster (or on the given cluster design)."""
    cluster = cluster or load_cluster(run.cluster)
    return Topology(cluster, accelerator or load_accelerator(cluster.accelerator), num_gpus=run.num_gpus,
                    segment_nodes=run.segment_nodes)


def predict(run: CalibrationRun, model: ModelSpec | None = None, topo: Topology | None = None) -> RunResult:
    """The run priced with its layout and recipe pinned, on its catalog model and cluster unless given."""
    model = model or load_model(run.model)
    topo = topo or run_topology(run)
    train = TrainingSpec(seq_len=run.seq_len, global_batch=run.global_batch, precision=run.precision)
    fixed = dict(run.layout) if run.interleaved else {"vpp": 1, **run.layout}
    # a 2021-2022 dense run's `selective` is Korthikanti's: the attention core
    sets = None if run.recipe.recompute_modules or run.group == MOE_GROUP else ((RecomputeModule.CORE_ATTN,),)
    # an unstated pipeline split is the framework's default, like an unstated schedule
    # a source that says "interleaved" without the chunk count: the fastest interleaving, never vpp 1
    cfg = SearchConfig(top_k=1, fixed=fixed, recipe=run.job_recipe, module_sets=sets, pipeline_policies=(0,),
                       min_vpp=2 if run.interleaved else 1, fix_names=RUN_FIX_NAMES)
    fits = True
    least_memory = None
    try:
        res = search(model, train, topo, cfg)
    except PlacementInfeasible as err:
        if err.binding != "memory":  # the stated layout breaks a rule (a micro-batch that does not divide...)
            return RunResult(run, None, False, None, None,
                             why=_broken_rule(model, train, fixed, run.num_gpus) or str(err))
        if "recompute" not in fixed:
            return RunResult(run, None, False, None, None, why=str(err))
        # the run ran this layout, recompute included: price it where the memory model says it does not fit,
        # and say so (fits False, its modelled peak against the real capacity) rather than price another one
        acc = topo.accelerator
        roomy = run_topology(run, topo.cluster, acc.model_copy(update={"hbm_bytes": acc.hbm_bytes * UNBOUND_MEMORY}))
        if "micro_batch_size" not in fixed:
            # no micro-batch fits, yet the run ran: the one nearest fitting (1: activations grow with it), not the
            # fastest the roomy memory allows (a QA trial: Llama 3 70B at tp 4, recompute none, on 64 H100s was
            # priced at mbs 4, 253.4 GiB a GPU and 6.61 s, where mbs 1 is 123.4 GiB and 6.85 s, and the row said
            # "priced at the fastest legal value ... priced at its stated layout")
            least_memory = {"micro_batch_size": 1}
            cfg = replace(cfg, fixed={**cfg.fixed, **least_memory})
        try:
            res = search(model, train, roomy, cfg)
        except PlacementInfeasible:
            return RunResult(run, None, False, None, None)
        fits = False
    i = int(res.ranked[0])
    lay = res.batch.layout(i)
    est = res.estimates
    recipe = est.recipe_of(i).model_copy(update={"recompute_modules": res.batch.modules(i)})
    chosen = lay.model_dump(mode="json")
    capacity = est.memory_capacity_bytes / (1 if fits else UNBOUND_MEMORY)
    slowest = _slowest_schedule(model, train, topo, cfg, chosen, res.batch.modules(i)) if fits else None
    return RunResult(run, float(est.step_time_s[i]), fits, chosen,
                     float(est.peak_memory_bytes[i]) / 2**30, capacity / 2**30,
                     recipe.model_dump(mode="json", exclude_defaults=True),
                     {k: v for k, v in chosen.items() if k not in fixed and v is not None
                      and k not in (("dp",) if model.moe else ("dp", "ep", "etp"))},
                     slowest_schedule=slowest, least_memory=least_memory)


SCHEDULE_FIELDS = ("vpp", "micro_batch_size")
"""The layout fields of a run's schedule: where its source leaves one open, the row shows the slowest legal value
beside the fastest it is priced at."""
SCHEDULE_SPAN_CANDIDATES = 10_000
"""More than any one layout has schedules (vpp x micro-batch sizes): every one that fits is ranked."""


def _slowest_schedule(model: ModelSpec, train: TrainingSpec, topo: Topology, cfg: SearchConfig, chosen: dict,
                      modules) -> dict | None:
    """The slowest schedule (vpp, micro-batch size) that fits with every other field as `chosen`, where the run
    leaves one of them open; None where it states both, or where no other schedule fits."""
    open_fields = [k for k in SCHEDULE_FIELDS if k not in cfg.fixed]
    if not open_fields:
        return None
    pinned = {k: v for k, v in chosen.items() if k not in open_fields and v is not None}
    span_cfg = replace(cfg, top_k=SCHEDULE_SPAN_CANDIDATES, fixed=pinned, bound=False, prune_dominated=False,
                       module_sets=(tuple(modules),) if modules else cfg.module_sets,
                       hsdp=chosen.get("dp_shard") is not None)
    try:
        res = search(model, train, topo, span_cfg)
    except PlacementInfeasible:
        return None
    j = int(res.ranked[-1])
    lay = res.batch.layout(j).model_dump(mode="json")
    return {"step_time_s": float(res.estimates.step_time_s[j]), **{k: lay[k] for k in open_fields}}


RUN_FIX_NAMES = FixNames(gpus="the run's `num_gpus: {}`", global_batch="a run `global_batch`",
                         seq_len="the run's `seq_len: {}`", micro_batch="`micro_batch_size: {}` in its layout")
"""A run's fixes, named as its file's fields (`validate` takes no --gpus or --mbs: a user trial was told them)."""


def _broken_rule(model: ModelSpec, train: TrainingSpec, fixed: dict, num_gpus: int) -> str | None:
    """The rule a stated layout breaks, in words (cost.rules.layout_error), or None (then the search's message):
    only where the run states every field a rule reads, dp taken as num_gpus / (tp x cp x pp) where unstated (a
    review: a partial layout was told dp 1)."""
    from placement.cost.rules import layout_error
    from placement.specs import Layout

    need = ("tp", "cp", "pp", "micro_batch_size")
    if any(k not in fixed for k in need if k != "cp"):
        return None
    fixed = {"cp": 1, **fixed}
    per = fixed["tp"] * fixed["cp"] * fixed["pp"]
    if num_gpus % per:
        return None
    fixed.setdefault("dp", num_gpus // per)
    try:
        layout = Layout(**{k: v for k, v in fixed.items() if k in Layout.model_fields})
    except (TypeError, ValueError) as err:
        return str(err).splitlines()[0]
    return layout_error(model, train, layout)


def validate(progress: Callable[[int], None] | None = None) -> list[RunResult]:
    """Every calibration run priced; `progress(1)` after each (the CLI's bar)."""
    out = []
    for r in load_runs():
        out.append(predict(r))
        if progress is not None:
            progress(1)
    return out


def summary(results: list[RunResult], groups: tuple[str, ...] = TARGET_GROUPS) -> tuple[float, float]:
    errs = [abs(r.error) for r in results if r.run.group in groups and r.error is not None]
    if not errs:
        return float("nan"), float("nan")
    return sum(errs) / len(errs), max(errs)
