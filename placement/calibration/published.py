"""The published runs a plan's throughput can be checked against: the calibration runs' own MFU.

`placement validate` prices each published run at its published layout and recipe; the error band a sweep prints
comes from those errors.  A searched plan is another matter: the search picks the layout and recipe the model
prices fastest, and where it prices a job above every published run of its kind (same accelerator, precision,
dense or MoE) that margin is the model's extrapolation, which no run measured.  A user trial found searched plans
19-68 % above the published figures for the same hardware while the band said +-9-17 % (llama3-405b on 16,384 H100
at 54.3 % MFU against Llama 3's 41 %).  This module gives each plan the best published MFU of its kind, from the
same calibration files, so the output can say when a plan is above all of them and by how much.

MFU here is placement's: model FLOPs per token (`Workload.model_flops_per_token`, PaLM's count) times the step's
tokens, over the published step time, the GPUs and the dense peak at the run's precision (`cost.step.peak_flops`),
as a plan's own `mfu`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache

from placement.specs.training import Precision


@dataclass(frozen=True)
class PublishedRun:
    """One calibration run's published throughput, as MFU in placement's counting."""

    run_id: str
    citation: str
    accelerator: str
    precision: str
    moe: bool
    mfu: float
    job: tuple = ()
    """(model, accelerator, GPUs, sequence, global batch, precision, tp, cp, ep, pp, dp): what `same_job` matches."""
    step_time_s: float = 0.0
    """The published step."""


@lru_cache(maxsize=1)
def published_runs() -> tuple[PublishedRun, ...]:
    """Every calibration run (runs.yaml, runs-moe.yaml) with its published MFU."""
    from placement.calibration.validate import load_runs
    from placement.catalog import load_accelerator, load_cluster, load_model
    from placement.workload import workload

    out = []
    for run in load_runs():
        model = load_model(run.model)
        acc = load_accelerator(load_cluster(run.cluster).accelerator)
        peak = acc.peak_flops_fp8 if run.precision is Precision.FP8 and acc.peak_flops_fp8 else acc.peak_flops_bf16
        flops = workload(model).model_flops_per_token(run.seq_len) * run.global_batch * run.seq_len
        out.append(PublishedRun(run.id, run.citation, acc.name, run.precision.value, model.moe is not None,
                                flops / (run.published_step_time_s * run.num_gpus * peak),
                                job_key(model.name, acc.name, run.num_gpus, run.seq_len, run.global_batch,
                                        run.precision.value, run.layout),
                                run.published_step_time_s))
    return tuple(out)


@cache
def _published_workloads() -> tuple[tuple[str, object], ...]:
    """(catalog name, its Workload) of every model a published run trained."""
    from placement.calibration.validate import load_runs
    from placement.catalog import load_model
    from placement.workload import workload

    names = sorted({run.model for run in load_runs()})
    return tuple((name, _priced_as(workload(load_model(name)))) for name in names)


def _priced_as(w):
    """A Workload without what changes the numerics only (RoPE scaling): the model as the cost model prices it."""
    import dataclasses

    return dataclasses.replace(w, yarn_rope=False)


def published_model_name(model) -> str:
    """The catalog name the published runs know `model` by: its own, or that of the catalog model it prices as (a
    user trial: DeepSeek-V3, GPT-OSS-120B and Qwen3-30B-A3B given as HuggingFace configs lost every comparison with
    their published runs, which were matched on the name alone)."""
    from placement.workload import workload

    known = _published_workloads()
    if any(name == model.name for name, _ in known):
        return model.name
    mine = _priced_as(workload(model))
    return next((name for name, w in known if w == mine), model.name)


@cache
def _published_specs() -> tuple:
    """The catalog ModelSpec of every model a published run trained."""
    from placement.calibration.validate import load_runs
    from placement.catalog import load_model

    return tuple(load_model(name) for name in sorted({run.model for run in load_runs()}))


@lru_cache(maxsize=64)
def other_vocabulary_names(model) -> tuple[str, ...]:
    """Catalog names of the models published runs trained that are `model` but for the vocabulary (Megatron's
    padded 51,200 beside GPT-3's 50,257: Korthikanti's 175B rows ran megatron-gpt-175b, the gpt3-175b architecture),
    so a plan of one can be set beside the other's runs, said to be another vocabulary."""
    from placement.workload import workload

    out = []
    for spec in _published_specs():
        if spec.name == model.name or spec.vocab_size == model.vocab_size:
            continue
        mine = _priced_as(workload(model.model_copy(update={"vocab_size": spec.vocab_size})))
        if mine == _priced_as(workload(spec)):
            out.append(spec.name)
    return tuple(out)


def job_key(model: str, accelerator: str, num_gpus: int, seq_len: int, global_batch: int, precision: str,
            layout: dict) -> tuple:
    """What makes a plan the very job a published run measured: the model, the accelerator, the GPUs, the batch and
    sequence, the precision and the parallel degrees (a degree a run leaves out is 1; dp is derived)."""
    deg = {k: int(layout.get(k, 1) or 1) for k in ("tp", "cp", "ep", "pp")}
    dp = int(layout.get("dp") or num_gpus // (deg["tp"] * deg["cp"] * deg["pp"]))
    return (model, accelerator, num_gpus, seq_len, global_batch, precision, deg["tp"], deg["cp"], deg["ep"],
            deg["pp"], dp)


MIN_GROUP_RUNS = 3
"""Fewer published runs of a plan's kind on its accelerator than this: its family's runs at the precision make the
group (a user trial: B200's one BF16 MoE run, GPT-OSS-120B at 12.6 % MFU, set the slow end of every B200 MoE cell,
Mixtral and DeepSeek-V3 alike, to 2-3.4x its point, where GB200 had Qwen3-235B's 33.8 %)."""
WORKLOAD_FIELDS = 6
"""The first fields of a job key (`job_key`) that name the workload without the parallel degrees."""


LAYOUT_FIELDS = {"zero_stage": "ZeRO stage", "micro_batch_size": "micro-batch", "recompute": "recompute",
                 "vpp": "vpp", "sequence_parallel": "sequence parallel", "etp": "expert TP", "dp_shard": "ZeRO-3 shard"}
"""The layout beside the degrees (which `job_key` matches) that a published run states and a plan must share to be
its job: a user trial matched the SC21 1.7B row (full recompute) to a launch priced without recompute, -50.9 %."""
MOE_ONLY = frozenset({"moe_dispatcher", "dispatch_fp8", "moe_fusions", "ep_comm_overlap", "routing_imbalance",
                      "moe_capacity_factor"})
"""Recipe fields that price nothing in a dense model: a dense plan and run are not told apart by them."""
DEGREE_ONLY = {"tp": frozenset({"tp_comm_overlap", "tp_async_backward", "sp_saves_gathered_inputs",
                                "tp_gathers_16bit"}),
               "cp": frozenset({"cp_comm_type"}),
               "pp": frozenset({"pipeline_unsharded_grads", "pipeline_layout", "pipeline_schedule",
                                "pipeline_p2p_whole", "pipeline_grads_whole", "pipeline_p2p_blocking",
                                "pipeline_p2p_scatter",
                                "pipeline_sends_mask", "account_for_embedding", "account_for_loss"}),
               "vpp": frozenset({"pp_comm_overlap", "align_param_gather"})}
"""Recipe fields that price nothing where that degree is 1 (a user trial: a tp 1, cp 1, pp 1 plan was told a
published run of its degrees "ran otherwise" for tp_async_backward, cp_comm_type and pipeline_unsharded_grads)."""


SHARDED_ONLY = frozenset({"param_gather_overlap", "align_param_gather"})
"""Recipe fields that price nothing at ZeRO-0, where no optimizer shard gathers updated weights (a user trial: the SC21
1.7B arguments, ZeRO-0, were told the published run "ran otherwise" for param_gather_overlap)."""
UNSHARDED_GRADS_ONLY = frozenset({"grad_buffer_passes"})
"""Recipe fields that price nothing from ZeRO-2 on, where a rank keeps only its shard of the gradients."""


@cache
def _memory_as_validated(run_id: str) -> tuple[float, float] | None:
    """(peak GiB, capacity GiB) where `validate`'s memory model puts a published run over its GPUs' capacity (the run
    fit, so the model over-counts it: `validate` says "over"); None where it fits as modelled."""
    from placement.calibration.validate import load_runs, predict

    run = next(r for r in load_runs() if r.id == run_id)
    res = predict(run)
    if res.fits or res.peak_memory_gib is None or res.capacity_gib is None:
        return None
    return round(res.peak_memory_gib, 1), round(res.capacity_gib, 1)


@cache
def _as_validated(run_id: str) -> tuple[dict, dict] | None:
    """(stated layout beside the degrees, whole recipe) of a calibration run as `validate` prices it;
    the fields the source leaves open (validate's `searched`) are not stated, so they never tell a plan apart."""
    from placement.calibration.validate import load_runs, predict
    from placement.specs.recipe import Recipe

    run = next(r for r in load_runs() if r.id == run_id)
    res = predict(run)
    if res.layout is None:
        return None
    open_fields = set(res.searched or {})
    stated = {k: res.layout.get(k) for k in LAYOUT_FIELDS if k in res.layout and k not in open_fields
              and (k in run.layout or k == "vpp")}
    return stated, Recipe.model_validate(res.recipe or {}).model_dump(mode="json")


def _show(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) or "none"
    return "none" if value is None else str(value)


def job_differences(run_id: str, layout: dict, recipe: dict, moe: bool) -> list[str]:
    """What a plan runs otherwise than the published run whose degrees it shares: each stated layout field and each
    recipe field (as `validate` prices the run) that differs, as "NAME RUN'S VALUE there, PLAN'S VALUE here"."""
    got = _as_validated(run_id)
    if got is None:
        return []
    stated, run_recipe = got
    out = [f"{LAYOUT_FIELDS[k]} {_show(v)} there, {_show(layout.get(k))} here" for k, v in stated.items()
           if layout.get(k) != v and not (k == "dp_shard" and layout.get(k) in (None, layout.get("dp")))]
    selective = layout.get("recompute") == "selective"
    for k, v in run_recipe.items():
        mine = recipe.get(k, v)
        if isinstance(v, list) or isinstance(mine, (list, tuple)):
            v, mine = list(v or ()), list(mine or ())
        idle = any(k in fields and int(layout.get(d) or 1) == 1 for d, fields in DEGREE_ONLY.items()) or (
            k in SHARDED_ONLY and int(layout.get("zero_stage") or 0) == 0) or (
            k in UNSHARDED_GRADS_ONLY and int(layout.get("zero_stage") or 0) >= 2)
        if mine == v or (k in MOE_ONLY and not moe) or (k == "recompute_modules" and not selective) or idle:
            continue
        out.append(f"recipe {k} {_show(v)} there, {_show(mine)} here")
    return out


def published_best(moe: bool, accelerator: str, precision: str, mfu: float, job: tuple | None = None,
                   step_time_s: float | None = None, layout: dict | None = None,
                   recipe: dict | None = None, model_spec=None) -> dict | None:
    """The best published MFU of a plan's kind and where the plan stands against it: the runs on the same
    accelerator at the same precision, dense or MoE alike, else (fewer than MIN_GROUP_RUNS) those of its family
    (sweep.band.FAMILIES); None
    where no calibration run is of its kind.  `above`: the plan's MFU is higher than every one of them.
    `same_job`: the published run of this very job (`job_key`, and, where `layout` and `recipe` are given, every
    layout field the run states and its whole recipe as `validate` prices it), its measured step and the plan's error
    against it, where one is; `similar_job`: a run with the same degrees that ran otherwise, with its `differences`
    and no error (the two are not the same job); `same_workload`: where neither is, a run of the same model, GPUs,
    batch, sequence and precision at other degrees, its measured step and the plan's priced speed-up over it (a user
    trial: a sweep's 405B plan on 8,192 H100 was priced 1.29x faster than Llama 3's measured run of that workload,
    and said nothing of it).  `model_spec`, the plan's model, lets `same_model` fall back on a model that differs from
    it in the vocabulary alone."""
    from placement.sweep.band import family

    kind = "MoE" if moe else "dense"
    same = [r for r in published_runs() if r.moe == moe and r.precision == precision]
    group = [r for r in same if r.accelerator == accelerator]
    where = accelerator
    if len(group) < MIN_GROUP_RUNS:
        fam = family(accelerator)
        wider = [r for r in same if fam is not None and family(r.accelerator) == fam]
        if len(wider) > len(group):
            group = wider
            where = f"{fam} ({', '.join(sorted({r.accelerator for r in group}))})"
    if not group:
        return None
    best = max(group, key=lambda r: (r.mfu, r.run_id))
    # of several published runs of these degrees (a baseline and its tuned recipe), the one the plan runs as, else
    # the one it differs from least (a user trial: DeepSeek-V3's tuned GB200 plan was set beside the baseline run
    # that comes first in the file, "ran otherwise", and not the 8.46 s run of its very recipe)
    candidates = [r for r in published_runs() if job is not None and r.job == job]
    ranked = [(([] if layout is None or recipe is None else job_differences(r.run_id, layout, recipe, moe)), k, r)
              for k, r in enumerate(candidates)]
    differences, _, same = min(ranked, key=lambda t: (len(t[0]), t[1]), default=([], 0, None))
    similar = None
    if differences:
        similar = {"run": same.run_id, "citation": same.citation, "published_step_time_s": same.step_time_s,
                   "differences": differences}
        same = None
    workload = None
    if job is not None and same is None and similar is None and step_time_s is not None:
        # the fastest measured run of the workload: the plan's speed-up over a slower one (a baseline) overstates it
        other = min((r for r in published_runs() if r.job[:WORKLOAD_FIELDS] == job[:WORKLOAD_FIELDS]),
                    key=lambda r: (r.step_time_s, r.run_id), default=None)
        if other is not None:
            workload = {"run": other.run_id, "citation": other.citation, "published_step_time_s": other.step_time_s,
                        "degrees": dict(zip(("tp", "cp", "ep", "pp", "dp"), other.job[WORKLOAD_FIELDS:],
                                            strict=True)),
                        "plan_speedup": round(other.step_time_s / step_time_s, 4),
                        "memory_over_counted": _memory_as_validated(other.run_id)}
    model = None
    if job is not None and same is None and similar is None and workload is None:
        model = same_model(job[0], accelerator, precision, mfu, model_spec)
    return {"group": f"{kind} / {where} / {precision}", "accelerator": accelerator, "runs": len(group),
            "best_run": best.run_id,
            "best_citation": best.citation, "best_mfu": round(best.mfu, 4), "plan_mfu": round(mfu, 4),
            "ratio": round(mfu / best.mfu, 4), "above": mfu > best.mfu,
            "same_job": None if same is None or step_time_s is None else {
                "run": same.run_id, "citation": same.citation, "published_step_time_s": same.step_time_s,
                "error": round(step_time_s / same.step_time_s - 1.0, 4),
                "memory_over_counted": _memory_as_validated(same.run_id)},
            "similar_job": similar, "same_workload": workload, "same_model": model}


def same_model(model: str, accelerator: str, precision: str, mfu: float, spec=None) -> dict | None:
    """The published run of this model on this accelerator at this precision with the best MFU, at whatever GPUs,
    batch and sequence it ran, and the plan's MFU against it; None where none ran.  A user trial: GPT-OSS-120B on 64
    B200 at batch 1,280 was priced 2.4x the tokens per GPU Megatron-Bridge measured for it, and said nothing, since
    no run had that very batch and the best MFU of all B200 MoE runs (other models) was higher still.

    Where none of the model itself ran and `spec` (its ModelSpec) is given, the runs of a model that is it but for
    the vocabulary (`other_vocabulary_names`), with `run_model` and both vocabularies said (a QA run: gpt3-175b on
    256 A100 at 70.2 % MFU was set beside nothing, though Korthikanti's 175B rows ran its architecture with Megatron's
    51,200-token vocabulary at 64 GPUs); `run_model` is the plan's own model otherwise.  Where neither ran on the
    accelerator, those on the others of its family (sweep.band.FAMILIES: MFU is over each one's own peak), with
    `run_accelerator` said (a QA run: gpt3-175b on 512 A100 40GB was set beside nothing, though the 175B rows ran
    on A100 80GB); `run_accelerator` is the plan's own otherwise."""
    from placement.sweep.band import family

    fam = family(accelerator)
    kin = tuple(sorted({r.accelerator for r in published_runs() if fam is not None and r.accelerator != accelerator
                        and family(r.accelerator) == fam}))

    def runs_of(names, accelerators) -> list[PublishedRun]:
        return [r for r in published_runs() if r.job and r.job[0] in names and r.accelerator in accelerators
                and r.precision == precision]

    others = other_vocabulary_names(spec) if spec is not None else ()
    runs = next((found for names, accs in (((model,), (accelerator,)), (others, (accelerator,)), ((model,), kin),
                                           (others, kin)) if (found := runs_of(names, accs))), [])
    if not runs:
        return None
    top = max(runs, key=lambda r: (r.mfu, r.run_id))
    other_vocab = None
    if top.job[0] != model:
        from placement.catalog import load_model

        other_vocab = load_model(top.job[0]).vocab_size
    return {"run": top.run_id, "citation": top.citation, "mfu": round(top.mfu, 4), "num_gpus": top.job[2],
            "seq_len": top.job[3], "global_batch": top.job[4], "runs": len(runs), "ratio": round(mfu / top.mfu, 4),
            "above": mfu > top.mfu, "run_model": top.job[0], "run_accelerator": top.accelerator,
            "run_vocab_size": other_vocab,
            "plan_vocab_size": None if other_vocab is None else spec.vocab_size}


def _over_counted(run: dict, what: str) -> str:
    """The caveat of a published run whose layout the memory model puts over capacity: it ran, so layouts the search
    leaves out as over capacity may run too (a user trial: Llama 3's own 8,192-GPU layout "DOES NOT FIT", unsaid
    outside `validate`, and plans steered to another one)."""
    over = run.get("memory_over_counted")
    if not over:
        return ""
    return (f"\n  memory: placement's memory model puts {what} at {over[0]:.1f} GiB per GPU, over the "
            f"{over[1]:.1f} GiB capacity, yet the run fit: the model over-counts it (`placement validate` lists it), "
            f"so a layout it calls over capacity near there may run")


def above_ratio(best: dict | None) -> float | None:
    """The plan's MFU over the best published run of its kind, where it is above every one of them and no published
    run measured this very job (then that run's error is the statement); None otherwise.  `plan`, the sweep's
    summary, CSV and report all say it from here."""
    if not best or not best.get("above") or best.get("same_job"):
        return None
    return best["ratio"]


def published_line(best: dict | None) -> str:
    """`published run of this job: ...` where a published run measured this very job; else the published run with
    these degrees that ran otherwise, or of this workload at other degrees, and `above published: ...` for a plan
    above every published run of its kind (a review: a plan with a similar run never said it was above)."""
    if not best:
        return ""
    same = best.get("same_job")
    if same:
        return (f"published run of this job: {same['run']} measured {same['published_step_time_s']:.2f} s/step; "
                f"placement prices it {same['error']:+.1%} ({same['citation']})" + _over_counted(same, "it"))
    lines = []
    similar = best.get("similar_job")
    workload = best.get("same_workload")
    if similar:
        diff = "; ".join(similar["differences"])
        lines.append(f"published run with these degrees: {similar['run']} measured "
                     f"{similar['published_step_time_s']:.2f} s/step, but it ran otherwise ({diff}), so it is not this "
                     f"job and no error against it is given ({similar['citation']})")
    elif workload:
        degrees = " ".join(f"{k}{v}" for k, v in workload["degrees"].items())
        lines.append(f"published run of this workload at other degrees: {workload['run']} measured "
                     f"{workload['published_step_time_s']:.2f} s/step at {degrees}; this plan is priced "
                     f"{workload['plan_speedup']:.2f}x its speed, a layout none of the runs placement validates "
                     f"measured ({workload['citation']})" + _over_counted(workload, "that run's layout"))
    model = best.get("same_model")
    if model and model["above"]:
        what = "this model" if not model.get("run_vocab_size") else (
            f"this architecture with another vocabulary ({model['run_model']}: {model['run_vocab_size']:,} tokens "
            f"against this model's {model['plan_vocab_size']:,}, the same layers)")
        acc = model.get("run_accelerator")
        where = "this accelerator" if acc is None or acc == best.get("accelerator", acc) else (
            f"{acc} (this accelerator's family)")
        lines.append(f"published runs of {what} on {where} at {best['group'].rsplit(' / ', 1)[-1]}: the "
                     f"best of {model['runs']}, {model['run']}, measured MFU {model['mfu']:.1%} ({model['num_gpus']:,} "
                     f"GPUs, batch {model['global_batch']:,}, sequence {model['seq_len']:,}); this plan is priced at "
                     f"MFU {best['plan_mfu']:.1%}, {model['ratio']:.2f}x it, at a scale, batch or layout none of the "
                     f"published runs placement validates measured ({model['citation']})")
    if above_ratio(best) is not None:
        lines.append(f"above published: MFU {best['plan_mfu']:.1%} is {best['ratio']:.2f}x the best of the "
                     f"{best['runs']} published {best['group']} runs placement validates ({best['best_mfu']:.1%}, "
                     f"{best['best_run']}); the margin is the model's extrapolation of this layout and recipe, which "
                     f"none of those runs measured (`placement validate` lists them; a run of your own, `validate "
                     f"--runs`, checks it)")
    return "\n".join(lines)
