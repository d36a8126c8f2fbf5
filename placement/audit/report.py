"""Audit output: the JSON contract of issue #5 and a readable report."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

from placement import __version__
from placement.audit.changes import NOT_IN_FILES, PRE3_DEFAULT_NOTE
from placement.audit.core import Audit
from placement.audit.readers.reading import LaunchLayout
from placement.audit.shell import WITHHELD_MARK
from placement.cost.constants import GiB
from placement.emit.common import EmitContext
from placement.intranode import is_nvlink
from placement.report import group_label, single_plan_table, text_table
from placement.specs import TrainingSpec
from placement.topology import Topology

FRAMEWORK_FORMAT = {"megatron": "megatron", "torchtitan": "torchtitan", "deepspeed": "deepspeed", "maxtext": "maxtext"}


def unstated(a: Audit) -> dict[str, str]:
    """Layout values the launch files do not state, each with where its value comes from: the data-parallel degree
    derived from the GPU count, the others the framework's default (or the command line)."""
    lay, where = a.estimate.layout, a.launch.sources
    out = {}
    moe = lay.ep > 1 or "ep" in where or a.model.is_moe
    for name in ("tp", "cp", "ep", "etp", "pp", "vpp", "micro_batch_size", "zero_stage", "recompute",
                 "sequence_parallel"):
        if name in where or (name in ("ep", "etp") and not moe) or (name == "vpp" and lay.pp == 1):
            continue
        if name == "vpp" and "layers_per_virtual_stage" in where:
            out["vpp"] = _vpp_derived(a)
            continue
        value = getattr(lay, name)
        out[name] = (f"not stated by the files: {a.launch.framework}'s default or the command line "
                     f"({value.value if hasattr(value, 'value') else value})")
    if "dp" not in where:
        out["dp"] = (f"derived: {a.estimate.num_gpus} GPUs / (tp {lay.tp} x cp {lay.cp} x pp {lay.pp}) = {lay.dp}")
    return out | a.assumed


def _vpp_derived(a: Audit) -> str:
    """How the files' layers per stage give the model chunks per pipeline rank (LaunchLayout.virtual_stages)."""
    launch, lay, layers = a.launch, a.estimate.layout, a.model.num_layers
    lps = launch.layers_per_virtual_stage
    if launch.framework == "torchtitan":
        first, last = launch.first_stage_less_layers, launch.last_stage_less_layers
        stages = -(-(layers + first + last) // lps)
        return (f"derived: ceil(({layers} layers + first_stage_less_layers {first} + last_stage_less_layers {last}) "
                f"/ pipeline_parallel_layers_per_stage {lps}) = {stages} stages / pp {lay.pp} = {lay.vpp} (torchtitan "
                f"_get_pipeline_metadata)")
    return f"derived: {layers} layers / pp {lay.pp} / {lps} layers per virtual stage = {lay.vpp}"


def audit_json(a: Audit) -> dict:
    lay = a.estimate.layout
    layout = {"framework": a.launch.framework, "dialect": a.launch.dialect, **lay.model_dump(mode="json"),
              "num_gpus": a.estimate.num_gpus, "unstated": unstated(a),
              "host_order": a.host_order, "hosts_in_files": list(a.launch.hosts), "sources": dict(a.launch.sources),
              "ignored": list(a.launch.ignored), "unknown_keys": [k.model_dump() for k in a.launch.unknown_keys]}
    return {"layout": layout, "estimate": a.estimate.model_dump(mode="json"),
            "findings": [f.as_json() for f in a.findings], "best": a.best.model_dump(mode="json"),
            "speedup": a.speedup, "changes": a.changes, "changes_note": changes_note(a),
            "no_better_plan": a.no_better_plan, "changes_withheld": a.changes_withheld} | (
        {} if a.measured is None else {"measured_step": a.measured.model_dump(mode="json")})


MEGATRON_DEEPSPEED_NOTE = ("the job runs Megatron-DeepSpeed (--deepspeed: DeepSpeed's engine under Megatron's layers); "
                           "the changes are Megatron-LM arguments and the best plan runs Megatron-LM's own pipeline "
                           "schedule, DDP and optimizer: a move to Megatron-LM, not edits to this script (flags such "
                           "as --use-distributed-optimizer, --overlap-grad-reduce or --cuda-graph-impl do not exist in "
                           "Megatron-DeepSpeed)")


def megatron_deepspeed_kept_note(lacks: str) -> str:
    """The changes note of a Megatron-DeepSpeed job whose model Megatron-LM cannot build (core.megatron_lm_lacks)."""
    return (f"the job runs Megatron-DeepSpeed (--deepspeed: DeepSpeed's engine under Megatron's layers), and "
            f"Megatron-LM cannot build this model: {lacks}; so the best plan stays on Megatron-DeepSpeed, priced on "
            f"the job's own engine and recipe, and the changes are edits to this script's arguments (and its "
            f"DeepSpeed config)")


def launch_label(a: Audit) -> str:
    """The framework the audited files run: `megatron-deepspeed` for Megatron's arguments under --deepspeed."""
    from placement.audit.core import is_megatron_deepspeed

    return "megatron-deepspeed" if is_megatron_deepspeed(a.launch) else a.launch.framework


NEOX_NOTE = ("the changes are the GPT-NeoX config's keys, to edit in the config; --out DIR writes the config files "
             "with them applied, and a DeepSpeed hostfile in the best host order")


TORCHTITAN_PRE3_NOTE = ("the changes are the keys of the files' torchtitan (before 0.3.0), named as the version their "
                        "keys date takes them: a TOML `section.key` (strings quoted as TOML writes them) where a TOML "
                        "file states the job, the flag where the files state it so; --out DIR writes the plan for "
                        "torchtitan 0.3.0, whose flags and config functions that version does not take")


def changes_note(a: Audit) -> str | None:
    """What the argument diff is, where it is not edits to the launched files (None: it is)."""
    from placement.audit.core import is_megatron_deepspeed, megatron_lm_lacks

    if is_megatron_deepspeed(a.launch):
        lacks = megatron_lm_lacks(a.model, a.launch)
        return MEGATRON_DEEPSPEED_NOTE if lacks is None else megatron_deepspeed_kept_note(lacks)
    if a.launch.framework == "torchtitan" and a.launch.torchtitan_form is not None:
        return TORCHTITAN_PRE3_NOTE
    if a.launch.dialect == "gpt-neox":
        return NEOX_NOTE + neox_version_note(a.launch.config_keys)
    if a.launch.framework == "megatron":
        return megatron_version_note(a.changes)
    return None


MEGATRON_FLAG_SINCE = {
    "--num-virtual-stages-per-pipeline-rank": ("core_v0.11.0", "2025-03-14", ""),
    "--pipeline-model-parallel-layout": ("core_v0.13.0", "2025-07-25", ""),
    "--cuda-graph-impl": ("core_v0.15.0", "2025-12-05", ""),
    "--cuda-graph-modules": ("core_v0.18.0", "2026-06-22", ", --cuda-graph-scope before it"),
}
"""Megatron-LM flags the best plan may write, with the first release whose megatron/training/arguments.py defines each
(NVIDIA/Megatron-LM tags, read with `git grep`) and its date."""


def megatron_version_note(changes: list[dict]) -> str | None:
    """Where the change list adds flags of recent Megatron-LM releases, which release each needs (a user trial: the
    diff added --cuda-graph-modules, which Megatron-LM before core_v0.18.0 refuses, with no word of a version)."""
    recent = [(c["argument"], *MEGATRON_FLAG_SINCE[c["argument"]]) for c in changes
              if c.get("to") is not None and c["argument"] in MEGATRON_FLAG_SINCE]
    if not recent:
        return None
    named = "; ".join(f"{flag} since {tag} ({date}{before})" for flag, tag, date, before in recent)
    return (f"spelled for megatron-core 0.19.2, as placement's files are: {named}; an older Megatron-LM refuses a "
            f"flag it does not define")


def neox_version_note(stated: dict[str, str]) -> str:
    """Why a GPT-NeoX config's best plan has no sequence parallelism where its keys date its GPT-NeoX before
    sequence_parallel (audit.core.neox_space), else ""."""
    from placement.audit.readers.neox import since, version_takes, version_window

    if version_takes("sequence_parallel", stated) is not False:
        return ""
    _, oldest = version_window(stated)
    commit, date = since("sequence_parallel")
    by = f" ({oldest[0]} is last in {oldest[1]} of {oldest[2]})" if oldest else ""
    return (f"; the best plan runs without sequence parallelism: the config's keys date its GPT-NeoX before {commit} "
            f"({date}), which added sequence_parallel{by}")


def ranks_text(ranks: list[int]) -> str:
    """A group's ranks, the first 8 and the count past that."""
    return " ".join(map(str, ranks)) if len(ranks) <= 8 else " ".join(map(str, ranks[:8])) + f" ... ({len(ranks)})"


def _layout_line(p) -> str:
    lay = p.layout
    # HSDP: the shard group inside dp (a user trial: the line said dp 16, ZeRO-3 where the change list set 2 x 8)
    hsdp = (f" (sharded over {lay.dp_shard}, {lay.dp // lay.dp_shard} replicas)"
            if lay.zero_stage == 3 and lay.dp_shard and lay.dp_shard < lay.dp else "")
    return (f"tp {lay.tp}, cp {lay.cp}, ep {lay.ep}/etp {lay.etp}, pp {lay.pp} (vpp {lay.vpp}), dp {lay.dp}, "
            f"ZeRO-{lay.zero_stage}{hsdp}, micro-batch {lay.micro_batch_size}, recompute {lay.recompute}")


UNPRICED_KINDS = frozenset({"not_priced_as_run", "base_config_unread", "unknown_config_key",
                            "pipeline_partitioned_shards"})
"""Findings that say what the estimate does not describe, or that the job trains on wrong inputs: no saving to
print (their JSON cost_s is 0)."""


NOT_COMPARED = frozenset({("pipeline_bubble", "info")})
"""(kind, severity) of findings with nothing to compare against: no layout of the job's degrees was searched (their
JSON cost_s is 0)."""


def finding_cost(f) -> str:
    """A finding's cost as printed: `0.123 s/step`, `not priced`, `not compared`, `cannot run` or `may not run`."""
    if f.kind in UNPRICED_KINDS:
        return "not priced"
    if (f.kind, f.severity) in NOT_COMPARED:
        return "not compared"
    if f.cost_s is None:  # an over-capacity verdict: certain as an error, conditional as a warning (in the margin
        # --memory-headroom-gib keeps, or at defaults the files' unread base configuration may set otherwise)
        return "cannot run" if f.severity == "error" else "may not run"
    return f"{f.cost_s:.3f} s/step"


def best_lines(a: Audit) -> str:
    """The best plan for the same job against the job as launched: layout, step, speed-up, memory."""
    est, best = a.estimate, a.best
    if a.no_better_plan is not None:
        return (f"best plan for the same job: none searched ({a.no_better_plan}); the job as launched is the only "
                f"plan priced")
    return (f"best plan for the same job: {_layout_line(best)}\n"
            f"step {best.step_time_s:.3f} s vs {est.step_time_s:.3f} s as launched: speed-up x{a.speedup:.3f}; "
            f"memory {best.peak_memory_bytes / GiB:.1f} of {best.memory_capacity_bytes / GiB:.1f} GiB"
            f"{best.headroom_note}")


def change_lines(a: Audit) -> list[tuple[str, str]]:
    """The argument diff as ("-" or "+", text) pairs: the launch's setting removed, the best plan's added."""
    def setting(arg: str, value: str) -> str:  # a bare flag shows as itself
        return arg if value == "true" and arg.startswith("--") else f"{arg} {value}"

    lines = []
    for c in a.changes:
        note = c.get("note")
        on_from = note in (NOT_IN_FILES, PRE3_DEFAULT_NOTE)
        if c["from"] is not None:
            text = c.get("from_arg") or setting(c["argument"], c["from"])  # a subcommand's token as pasted
            # the note of a removal with nothing added (a Megatron virtual-pipeline flag the best plan states otherwise)
            said_here = note if on_from or (note and c["to"] is None) else None
            lines.append(("-", text + (f"    # {said_here}" if said_here else "")))
        if c["to"] is not None:
            said = [x for x in (None if on_from else note, c.get("requires")) if x]
            text = c.get("to_arg") or setting(c["argument"], c["to"])
            lines.append(("+", text + (f"    # {'; '.join(said)}" if said else "")))
    return lines


def allocator_setter_of(a: Audit) -> str:
    """Who sets the expandable segments the capacity assumes (report.capacity_note), as the job's files do."""
    from placement.audit.core import allocator_expandable

    conf = a.launch.allocator_conf
    on = allocator_expandable(conf)
    kept = on is False and not conf and WITHHELD_MARK in a.launch.sources.get("allocator_conf", "")
    return ("which srun's --export keeps from the ranks (see allocator_segments_unset)" if kept else
            "which the launch files do not set (see allocator_segments_unset)" if on is False else
            f"which the launch files set ({a.launch.sources.get('allocator_conf')})" if on else
            f"which the launch sets from {conf}, a value the files leave to the environment" if conf else
            "which the job's environment must set (the files have no launch line)")


def offloaded_note(a: Audit) -> str | None:
    """What the memory as priced keeps on the GPU that the files offload (a user trial read "DOES NOT FIT" beside a
    warning that the memory is smaller)."""
    if not a.launch.offloaded:
        return None
    return (f"(memory as priced keeps what the files offload to the host, {' and '.join(a.launch.offloaded)}, on the "
            f"GPU: the findings give the job's own)")


def audit_table(a: Audit) -> str:
    est = a.estimate
    table = single_plan_table(est, allocator_setter_of(a))
    if a.measured is not None:  # beside the estimate's step line, above its terms
        head, _, terms = table.partition("\n\n")
        table = f"{head}\n{a.measured.summary()}\n\n{terms}"
    if a.launch.offloaded:
        table += "\n" + offloaded_note(a)
    parts = [f"audit of a {launch_label(a)} launch (placement {__version__})", table,
             *([crossings_block(est)] if est.crossings else []), _sources_block(a)]
    if a.findings:
        blocks = []
        for f in a.findings:
            text = textwrap.fill(f.message, width=110, initial_indent="    ", subsequent_indent="    ")
            groups = "".join(f"\n    e.g. ranks {ranks_text(g['ranks'])} on {', '.join(g['hosts'])}"
                             for g in f.groups[:2])
            blocks.append(f"[{f.severity}] {f.kind} ({finding_cost(f)})\n{text}{groups}")
        parts.append("findings:\n" + "\n".join(blocks))
    else:
        parts.append("no findings")
    parts.append(best_lines(a))
    if a.changes:
        note = changes_note(a)
        head = ["changes to the launch:"] + ([f"  ({note})"] if note else [])
        parts.append("\n".join([*head, *(f"{sign} {text}" for sign, text in change_lines(a))]))
    else:
        parts.append(no_changes_text(a))
    return "\n\n".join(parts)


def no_changes_text(a: Audit) -> str:
    """Why the audit proposes no change (the text and the HTML page): the job runs the best plan, no plan was
    searched, or the best plan saves too little to be worth its changes (audit.core.MIN_CHANGE_GAIN)."""
    if a.changes_withheld:
        from placement.audit.core import MIN_CHANGE_GAIN

        saved = a.estimate.step_time_s - a.best.step_time_s
        return (f"no changes proposed: the best plan saves {saved * 1e3:.1f} ms of {a.estimate.step_time_s:.3f} s a "
                f"step ({saved / a.estimate.step_time_s:.2%}), under the {MIN_CHANGE_GAIN:.0%} a change must save to "
                f"be worth the {len(a.changes_withheld)} it would take (the JSON lists them as changes_withheld)")
    return NO_CHANGES if a.no_better_plan is None else NO_CHANGES_UNSEARCHED


TRAFFIC_TITLE = "where the groups' traffic goes (groups by the highest tier of the network they cross)"


def crossings_block(p) -> str:
    """Which groups cross which tier of the network, as the job lands (a user trial asked "which group crosses the
    slow network" and found the answer only in the JSON's crossings): per group kind, how many groups reach each
    level at most, the bytes each member sends per step, and what of its time the step does not hide."""
    return f"{TRAFFIC_TITLE}:\n" + text_table(*crossings_rows(p))


def crossings_rows(p) -> tuple[list[str], list[list[str]]]:
    """`crossings_block`'s header and rows (the HTML page's table too)."""
    levels = list(next(iter(p.crossings.values()))["highest_level"])
    exposed = p.breakdown.exposed.model_dump() if p.breakdown is not None else {}
    rows = []
    for kind, c in p.crossings.items():
        reach = [lv for lv in levels if c["highest_level"][lv]]
        rows.append([group_label(kind, p.layout.cp), f"{c['groups']:,} x {c['group_size']}",
                     *(f"{c['highest_level'][lv]:,}" for lv in levels),
                     _slowest(c, reach[-1] if reach else "-", levels[0]),
                     f"{c['bytes_per_member_per_step'] / 1e9:,.2f}",
                     f"{exposed[kind]:.3f}" if kind in exposed else "-"])
    head = ["groups", "count x size", *(f"up to {lv}" for lv in levels), "slowest tier", "GB/member/step",
            "exposed s"]
    return head, rows


def _slowest(c: dict, tier: str, node_level: str) -> str:
    """A kind's slowest tier, and inside a node whose links are measured (--node-topo) the link its ring runs over
    where that is not NVLink (crossings' `in_node`): a group that stays in the node may still ring over PCIe."""
    ring = c.get("in_node")
    if tier != node_level or ring is None or is_nvlink(ring["bandwidth_bytes_per_s"]):
        return tier
    return f"{tier}: {ring['link']} {ring['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s"


NO_CHANGES = "no changes: the job already runs the best plan placement knows for it"
NO_CHANGES_UNSEARCHED = "no changes: placement found no other plan for this job to compare it with"


def sources_lines(a: Audit) -> list[str]:
    """Where each value of the audited layout came from (the lines of the text report's sources block)."""
    return _sources_block(a).splitlines()


def _overridden(a: Audit, name: str) -> str:
    """", priced with V (a flag)" for a recipe value the files state that a flag or --recipe file replaced: the
    files' value is listed as read, the price is the flag's (a flag once replaced an attention kernel read from a
    TOML with nothing on the line to say so)."""
    field = name.removeprefix("recipe.")
    where = (a.estimate.recipe_sources or {}).get(field, "")
    if not name.startswith("recipe.") or where.startswith("launch:") or where in ("", "default"):
        return ""
    if where == a.launch.sources.get(name):  # a reader's own "default (...)" for what the files leave out, as read
        return ""
    priced = (a.estimate.recipe or {}).get(field)
    shown = "a flag" if where == "flag" else where.removeprefix("file:")
    return f"; priced with {_shown(priced)} instead ({shown})"


def _sources_block(a: Audit) -> str:
    """Where each value of the audited layout came from (file:line, or the rule that derived it), what the files
    leave to defaults, and what they set that placement does not model."""
    launch = a.launch
    lines = ["where each value comes from (file:line, flag or default):"]
    for name, where in sorted(launch.sources.items()):
        value = getattr(launch, name, None) if "." not in name else launch.recipe.get(name.split(".", 1)[1])
        if name in ("recipe.ddp_bucket_hidden_squared", "recipe.ddp_num_buckets"):  # as launch_recipe resolved them
            name, value = "recipe.ddp_bucket_params", (a.estimate.recipe or {}).get("ddp_bucket_params")
            where = (a.estimate.recipe_sources or {}).get("ddp_bucket_params", where).removeprefix("launch:")
        if value is None and name in ("global_batch", "num_gpus", "seq_len", "precision"):  # the job's own value
            value = getattr(a.estimate, name)
        if name == "cuda_visible_devices":  # one line per node: the orders they list
            value = "; ".join(dict.fromkeys(str(n) for n in value))
        shown = ("" if value is None or isinstance(value, dict) else
                 f" {','.join(str(v) for v in value)}" if isinstance(value, (list, tuple)) else f" {value}")
        lines.append(f"  {name}{shown}: {where}{_overridden(a, name)}")
    # recipe values the framework runs when the files leave them out (launch_recipe), each with its source
    from placement.emit.common import matters

    for field, where in sorted((a.estimate.recipe_sources or {}).items()):
        if where != "default" and not where.startswith("launch:") and f"recipe.{field}" not in launch.sources \
                and matters(field, a.estimate.layout):
            lines.append(f"  recipe.{field} {_shown((a.estimate.recipe or {}).get(field))}: {where}")
    left = unstated(a)
    derived = [f for f in ("vpp", "dp") if f in left and left[f].startswith("derived")]
    named = [f for f in left if f not in derived and f not in a.assumed]
    if named:
        lines.append(f"  not stated by the files (the framework's default, or the command line): {', '.join(named)}")
    lines += [f"  {f} {getattr(a.estimate.layout, f)}: {left[f]}" for f in derived]
    lines += [f"  {name}: {text}" for name, text in a.assumed.items()]
    if launch.ignored:
        lines.append("seen but not modelled (priced without them):")
        lines += [f"  - {x}" for x in launch.ignored]
    return "\n".join(lines)


def _shown(value: object) -> str:
    """A recipe value as the sources block prints it (an enum by its value)."""
    return str(getattr(value, "value", value))


JOB_HOSTS = "job-hosts.txt"
"""The audited job's own layout on a better host order (its host_order_crossings finding), as hosts.txt writes one."""


def write_job_hosts(a: Audit, out: Path) -> list[Path]:
    """JOB_HOSTS where a finding's remedy is a host order alone: the fix the job can take without changing a line of
    its files (a user trial: that order was only in --json, and --out wrote the best plan's files only)."""
    from placement.outfiles import write_atomic

    finding = next((f for f in a.findings if f.kind == "host_order_crossings" and f.host_order), None)
    if finding is None:
        (out / JOB_HOSTS).unlink(missing_ok=True)  # an earlier audit's order into the same folder is not this job's
        return []
    step = a.estimate.step_time_s
    header = (f"placement {__version__} audit: the audited job's own layout and files on this host order, node rank k "
              f"on the host of line k (torchrun --node-rank k there, MASTER_ADDR node rank 0's host): saves "
              f"{finding.cost_s:.3f} s per step ({step:.3f} -> {step - finding.cost_s:.3f} s), the best plan's files "
              f"aside")
    text = "".join(f"# {line}\n" for line in textwrap.wrap(header, 116)) + "".join(
        f"{k} {host}\n" for k, host in enumerate(finding.host_order))
    return [write_atomic(out / JOB_HOSTS, text)]


OWN_JSON = "ds_config.json"
"""The job's own DeepSpeed JSON as `audit --out` writes it back for a job that runs its own program
(write_own_program_files)."""


def own_program(launch: LaunchLayout) -> str | None:
    """The program a DeepSpeed job runs that placement's DeepSpeed files (a deepspeed.initialize template for model code
    of the user's own) would not: an HF Trainer script, GPT-NeoX's deepy.py, Megatron-DeepSpeed's pretrain script; in
    words, None for a script of the user's own, which that template is for."""
    if launch.framework != "deepspeed":
        return None
    if launch.dialect == "hf-trainer":
        return "an HF Trainer job runs its own script"
    if launch.dialect == "gpt-neox":
        return "a GPT-NeoX job runs deepy.py on its own config"
    if launch.megatron_deepspeed:
        return "a Megatron-DeepSpeed job runs its own pretrain script"
    return None


def best_changes(a: Audit) -> list[dict]:
    """The best plan's changes: the change list, or the changes withheld as too small to list (the --out files are the
    best plan's either way)."""
    return a.changes or a.changes_withheld


def command_changes(a: Audit) -> list[dict]:
    """The best plan's changes that the written JSON does not carry (script flags, an accelerate config's key, a
    GPT-NeoX config's; all of them where the files gave no DeepSpeed JSON): the job's own command or config takes
    them."""
    from placement.audit.changes import apply_json_changes

    if a.launch.neox_configs:
        return neox_config_changes(a)[1]
    if a.launch.deepspeed_json is None:
        return list(best_changes(a))
    return apply_json_changes({}, best_changes(a))[1]


def write_own_program_files(a: Audit, ctx: EmitContext, out: Path) -> list[Path]:
    """The best plan of a job that runs its own program (own_program) as files its own command takes: its DeepSpeed
    JSON with the change list's keys applied (changes.apply_json_changes; "auto" values and AutoTP's autotp_size
    kept, which placement's own ds_config.json lacks) and a DeepSpeed hostfile in the best host order.  The flags stay
    the job's command's to change (own_program_note says which); a job that gave no DeepSpeed JSON gets the hostfile
    alone."""
    from placement.audit.changes import apply_json_changes
    from placement.audit.readers.deepspeed import read_config_text
    from placement.emit.deepspeed import hostfile
    from placement.outfiles import write_atomic

    written = [write_atomic(out / "hostfile", hostfile(ctx)[0])]
    if a.launch.neox_configs:
        return [*written, *write_neox_configs(a, out)]
    if a.launch.deepspeed_json is None:
        return written
    source = Path(a.launch.deepspeed_json)
    data, _ = apply_json_changes(read_config_text(source.read_text(), source), best_changes(a))
    return [*written, write_atomic(out / OWN_JSON, json.dumps(data, indent=2) + "\n")]


def neox_config_changes(a: Audit) -> tuple[list[tuple[Path, dict, list[dict]]], list[dict]]:
    """A GPT-NeoX job's config files (path, keys as loaded, the changes each takes) and the changes none takes: a key
    goes to the file that states it (GPT-NeoX refuses a key in two files), one no file states to the first."""
    from placement.audit.changes import NEOX_CONFIG_KEYS, config_key
    from placement.loaders.files import parse_yaml

    taken = [(Path(p), parse_yaml(Path(p).read_text(), Path(p), "YAML config", False), [])
             for p in a.launch.neox_configs]
    left = []
    for c in best_changes(a):
        if not config_key(c["argument"], NEOX_CONFIG_KEYS):  # the command's (the host order)
            left.append(c)
            continue
        top = c["argument"].split(".")[0].replace("-", "_")
        home = next((t for t in taken if top in {str(k).replace("-", "_") for k in t[1]}), taken[0])
        home[2].append(c)
    return taken, left


def write_neox_configs(a: Audit, out: Path) -> list[Path]:
    """A GPT-NeoX job's config files, each with the best plan's keys applied (neox_config_changes), under their own
    names, with a header that says what they are; YAML as GPT-NeoX loads it (its comments are not kept)."""
    import yaml

    from placement.audit.changes import NEOX_CONFIG_KEYS, apply_json_changes
    from placement.outfiles import write_atomic

    header = (f"# placement {__version__} audit: {{name}}, the job's GPT-NeoX config with the best plan's keys applied "
              f"({{keys}}); predicted step {a.best.step_time_s:.3f} s (x{a.speedup:.3f} over the audited launch)\n")
    written = []
    for path, data, changes in neox_config_changes(a)[0]:
        changed, _ = apply_json_changes(data, changes, NEOX_CONFIG_KEYS)
        keys = ", ".join(c["argument"] for c in changes) or "none of its keys changes"
        text = header.format(name=path.name, keys=keys) + yaml.safe_dump(changed, sort_keys=False)
        written.append(write_atomic(out / path.name, text))
    return written


def best_context(a: Audit, train: TrainingSpec, topo: Topology) -> EmitContext:
    """The best plan as the emitters take it, with the audited job's runtime environment."""
    return dataclasses.replace(EmitContext.of(a.best, topo, a.best_gpu_of_rank, a.model, train),
                               job_environment=a.launch.launch_environment)


def own_program_note(a: Audit, train: TrainingSpec, topo: Topology, out: Path, left: list[dict]) -> str:
    """What `audit --out` of a job that runs its own program (own_program) leaves to the job, in one line: the JSON or
    config and hostfile to pass, and each flag or key to change (`left`, command_changes), with the best plan's
    predicted step that holds once all are done."""
    from placement.emit.deepspeed import hostfile

    include = hostfile(best_context(a, train, topo))[1]
    configs = ", ".join(str(out / Path(p).name) for p in a.launch.neox_configs)
    given = (f"{configs} {'is' if len(a.launch.neox_configs) == 1 else 'are'} the job's GPT-NeoX config with the "
             f"best plan's keys applied: run deepy.py with {'it' if len(a.launch.neox_configs) == 1 else 'them'}"
             if a.launch.neox_configs else
             f"{out / OWN_JSON} is the job's DeepSpeed JSON ({a.launch.deepspeed_json}) with the best plan's keys "
             f"applied: pass it where the job passes that file (where the script writes that file from a template "
             f"at each run, as DeepSpeed's example scripts do, make the same key changes in the template or its "
             f"variables instead)" if a.launch.deepspeed_json is not None else
             f"the job's DeepSpeed JSON is the here-document its script writes at each run ("
             f"{a.launch.deepspeed_json_written}), so none is written: make the change list's keys there or in the "
             f"variables it expands" if a.launch.deepspeed_json_written is not None else
             "no DeepSpeed JSON was among the files (a GPT-NeoX or accelerate config, or a script that builds its "
             "own), so none is written")
    flags = "; ".join(f"{c['argument']} {c['from'] if c['from'] is not None else '(unset)'} -> "
                      f"{c['to'] if c['to'] is not None else '(drop it)'}" for c in left)
    where = f"the deepspeed launcher's --hostfile{f' with --include {include}' if include else ''}"
    where = {"gpt-neox": f"GPT-NeoX's hostfile key{f', with include {include}' if include else ''}",
             "hf-trainer": f"{where}, or accelerate's deepspeed_config.deepspeed_hostfile"}.get(a.launch.dialect, where)
    return (f"{own_program(a.launch)}, not a DeepSpeed program of placement's: {given}; "
            f"{out / 'hostfile'} is its DeepSpeed hostfile in the best host order ({where})"
            + (f"; change in the job's own command or config: {flags}" if flags else "")
            + f". The best plan's {a.best.step_time_s:.3f} s/step is priced with all of these.")


def write_best(a: Audit, train: TrainingSpec, topo: Topology, out: Path) -> tuple[list[Path], list[str]]:
    """The best plan's launch files for the audited framework (its model as the launch files run it), and the
    host-order files; and each framework file's own "this file ..." header line where it runs other than the best
    plan (emit.writer.write)."""
    from placement.emit.writer import write
    from placement.mapping.report import write_launch_files

    best = a.best
    header = (f"placement {__version__} audit: best plan for {best.model} on {best.num_gpus} x {best.accelerator}, "
              f"predicted step {best.step_time_s:.3f} s (x{a.speedup:.3f} over the audited launch)\n"
              f"ranks: tp innermost, then cp, dp, pp")
    paths = write_launch_files(out, topo, a.best_gpu_of_rank, header)
    paths += write_job_hosts(a, out)
    from placement.audit.core import stays_on_megatron_deepspeed

    if stays_on_megatron_deepspeed(a.launch, a.model):  # its changes are edits to the job's own script
        return paths, []
    ctx = best_context(a, train, topo)
    if own_program(a.launch):  # the job's own program runs, not a DeepSpeed program of ours
        return paths + write_own_program_files(a, ctx, out), []
    written, _, runs = write(ctx, [FRAMEWORK_FORMAT[a.launch.framework]], out)
    return paths + written, runs

