"""The exact changes from the audited launch to the best plan: the framework's own arguments, as
placement's emitter writes them for each of the two plans, compared setting by setting, plus the node
order when the best mapping puts node ranks on other hosts."""

from __future__ import annotations

import numpy as np

from placement.audit.readers.neox_keys import KEYS as NEOX_KNOWN_KEYS
from placement.emit.common import EmitContext

NODE_ORDER = "node order (torchrun --node-rank / hostfile lines)"
SHOWN_HOSTS = 8
"""Hosts quoted in a node-order change (the full order goes to the --out files)."""


SUBCOMMANDS = ("activation-checkpoint:",)
"""torchtitan 0.3.0 CLI subcommand tokens (`activation-checkpoint:MODE`): a setting of their own, never the
value of the flag before them."""


def _settings(tokens: list[str]) -> dict[str, str]:
    """`--flag value` / `--flag` / `name:value` tokens as {setting: value} ("true" for a bare flag)."""
    out: dict[str, str] = {}
    k = 0
    while k < len(tokens):
        tok = tokens[k]
        if tok.startswith("--"):
            if "=" in tok:
                key, value = tok.split("=", 1)
                out[key] = value
            elif k + 1 < len(tokens) and not tokens[k + 1].startswith(("--", *SUBCOMMANDS)):
                out[tok] = tokens[k + 1]
                k += 1
            else:
                out[tok] = "true"
        elif ":" in tok:
            key, value = tok.split(":", 1)
            out[key] = value
        k += 1
    return out


def _flatten(prefix: str, value: object, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = str(value).lower() if isinstance(value, bool) else str(value)


def neox_settings(ctx: EmitContext) -> dict[str, str]:
    """The plan in a GPT-NeoX config's keys (megatron/neox_arguments/neox_args.py), as the DeepSpeed files placement
    writes for it run it: the parallel degrees, batch, ZeRO stage and activation checkpointing (partition_activations,
    which the audit does not price, is left as the file has it)."""
    lay, r = ctx.plan.layout, ctx.recipe
    full = lay.recompute == "full"

    def word(v: bool) -> str:
        return str(v).lower()

    out = {"pipe_parallel_size": str(lay.pp), "model_parallel_size": str(lay.tp),
           "train_micro_batch_size_per_gpu": str(lay.micro_batch_size),
           "gradient_accumulation_steps": str(lay.num_microbatches), "zero_optimization.stage": str(lay.zero_stage),
           "checkpoint_activations": word(full)}
    if full:
        out |= {"checkpoint_num_layers": str(r.checkpoint_interval), "synchronize_each_layer": word(r.checkpoint_sync)}
    if lay.tp > 1:
        out["sequence_parallel"] = word(lay.sequence_parallel)
    if lay.cp > 1:
        out["context parallelism (no GPT-NeoX key: DeepSpeed's ProcessTopology, ds_topology.py)"] = str(lay.cp)
    return out


def framework_settings(framework: str, ctx: EmitContext) -> dict[str, str]:
    """The layout-setting arguments placement writes for this plan in this framework (or dialect: gpt-neox)."""
    if framework == "gpt-neox":
        return neox_settings(ctx)
    if framework == "megatron":
        from placement.emit import megatron

        args, env, _ = megatron.arguments(ctx)
        return _settings(args) | {f"env {k}": v for k, v in env.items()}
    if framework == "torchtitan":
        from placement.emit import torchtitan

        args, _ = torchtitan.flags(ctx)
        return _settings(args)
    if framework == "maxtext":
        from placement.emit import maxtext

        keys, _, _, _ = maxtext.overrides(ctx)
        return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in keys.items()}
    from placement.emit import deepspeed

    out: dict[str, str] = {"topology (ds_topology.py)": deepspeed.topology(ctx)}
    if ctx.plan.layout.tp > 1:
        out["sequence_parallel (ds_topology.py)"] = str(ctx.plan.layout.sequence_parallel)
    _flatten("", deepspeed.config(ctx), out)
    return out


NOT_IN_FILES = "not in the launch files: placement's spelling of the launched layout"
GLOBAL_BATCH = {"megatron": "--global-batch-size", "torchtitan": "--training.global_batch_size"}
"""The setting that fixes the global batch, where leaving it out makes it micro-batch x dp (Megatron) or local
batch x dp (torchtitan): a best plan that changes either must state it."""


def _token(framework: str, key: str) -> str:
    """The text a launch file holds when it states `key` (a flag, a dotted key's last part, an env variable)."""
    if key.startswith("env "):
        return key[4:]
    if framework == "torchtitan":  # a TOML key or a 0.3.0 flag; the subcommand's table is [activation_checkpoint]
        return key.rsplit(".", 1)[-1] if key.startswith("--") else key.replace("-", "_")
    return key


NEOX_DEFAULTS = {"sequence_parallel": "false", "checkpoint_num_layers": "1", "synchronize_each_layer": "false"}
"""GPT-NeoX's defaults (megatron/neox_arguments/neox_args.py) of the keys neox_settings leaves out of a plan where
they do nothing: what a config that does not state them runs when the best plan needs them."""


def _neox_changes(a: dict[str, str], b: dict[str, str], stated: dict[str, str]) -> list[dict]:
    """The changes from the launched plan's GPT-NeoX keys `a` to the best plan's `b`, the launched side as the
    config states it (`stated`, LaunchLayout.config_keys).  A key the best plan leaves out does nothing there
    (sequence_parallel under model_parallel_size 1, whose TP collectives are no-ops; checkpoint_num_layers and
    synchronize_each_layer without checkpoint_activations): the config's line may stay as it is, so no change.  A
    key the launched plan leaves out did nothing as launched: the best plan's value against the config's own, or
    GPT-NeoX's default where the config does not state it (then `from` is None: the key is to be added)."""
    out = []
    for k in list(a) + [k for k in b if k not in a]:
        if k not in b:
            continue
        if k in a:
            if a[k] != b[k]:
                out.append({"argument": k, "from": stated.get(k, a[k]), "to": b[k]})
        elif stated.get(k, NEOX_DEFAULTS.get(k)) != b[k]:
            out.append({"argument": k, "from": stated.get(k), "to": b[k]})
    return out


def launch_changes(framework: str, now: EmitContext, best: EmitContext, files_text: str | None = None,
                   stated: dict[str, str] | None = None) -> list[dict]:
    """[{"argument", "from", "to"}] for every setting that differs (None = absent on that side).  With the launch
    files' text, a "from" value the files do not state is marked (NOT_IN_FILES), and a global batch the files
    leave to the framework is stated where the best plan needs it.  `stated`: a GPT-NeoX config's own keys
    (LaunchLayout.config_keys), for framework "gpt-neox"."""
    a, b = framework_settings(framework, now), framework_settings(framework, best)
    if framework == "gpt-neox":
        changes = _neox_changes(a, b, stated or {})
    else:
        changes = [{"argument": k, "from": a.get(k), "to": b.get(k)}
                   for k in list(a) + [k for k in b if k not in a] if a.get(k) != b.get(k)]
    if framework == "gpt-neox":  # the config's own keys say what it states
        for c in changes:
            if c["from"] is not None and c["argument"] not in (stated or {}):
                c["note"] = NOT_IN_FILES
    elif files_text is not None and framework in ("megatron", "torchtitan", "maxtext"):
        # torchtitan's CLI takes - and _ (tyro), and its subcommand activation-checkpoint:MODE is the TOML's
        # [activation_checkpoint]
        spelled = files_text + "\n" + files_text.replace("-", "_") if framework == "torchtitan" else files_text
        for c in changes:
            if c["from"] is not None and _token(framework, c["argument"]) not in spelled:
                c["note"] = NOT_IN_FILES
        key = GLOBAL_BATCH.get(framework)
        if key and key in b and a.get(key) == b.get(key) and _token(framework, key) not in files_text:
            changes.append({"argument": key, "from": None, "to": b[key],
                            "note": "the launch files leave the global batch to the framework, which derives it "
                                    "from the layout this plan changes"})
    ha, hb = now.hosts_in_rank_order, best.hosts_in_rank_order
    if ha != hb:
        moved = sum(x != y for x, y in zip(ha, hb, strict=True))
        changes.append({"argument": NODE_ORDER, "from": " ".join(ha[:SHOWN_HOSTS]) + (" ..." if len(ha) > SHOWN_HOSTS
                                                                                        else ""),
                        "to": " ".join(hb[:SHOWN_HOSTS]) + (" ..." if len(hb) > SHOWN_HOSTS else ""),
                        "note": f"{moved} of {len(ha)} node ranks move; --out DIR writes the full order"})
    gph = now.topo.gpus_per_host
    local_a, local_b = now.gpu_of_rank % gph, best.gpu_of_rank % gph
    if not np.array_equal(local_a, local_b):
        changes.append({"argument": "CUDA_VISIBLE_DEVICES", "from": ",".join(map(str, local_a[:gph])),
                        "to": ",".join(map(str, local_b[:gph])),
                        "note": "GPU order inside each node (first node shown; --out DIR writes every node's)"})
    return changes


def spell_neox_keys(changes: list[dict], spelling: dict[str, str]) -> None:
    """Name each GPT-NeoX key of `changes` as the config spells it (LaunchLayout.config_spelling): its own spelling
    for a key it states, dashes for one it does not where its keys are written with dashes.  GPT-NeoX reads `-` as
    `_` and does not refuse a key written both ways, so a line added in the other spelling might not be the one it
    takes."""
    for c in changes:
        key = c["argument"]
        if key in spelling:
            c["argument"] = spelling[key]
        elif "-" in spelling and key in NEOX_KNOWN_KEYS:  # not CUDA_VISIBLE_DEVICES and the like
            c["argument"] = key.replace("_", "-")


def neox_requirements(changes: list[dict], stated: dict[str, str], best: EmitContext) -> None:
    """Mark (`requires`) each change that writes a GPT-NeoX key not every version takes, where the config's own keys
    leave open whether its version does (readers.neox.version_takes): the first version with the key, and for
    sequence_parallel what the best plan runs without it, which an older GPT-NeoX is left with."""
    from placement.audit.readers.neox import KEYS, since, version_takes, version_window
    from placement.cost.constants import GiB

    newest, _ = version_window(stated)
    for c in changes:
        key = c["argument"].split(".", 1)[0]
        if c["to"] is None or key not in KEYS or version_takes(key, stated) is not None:
            continue
        commit, date = since(key)
        dated = (f"the config's keys say only that its GPT-NeoX is {newest[1]} ({newest[2]}) or later, by "
                 f"{newest[0]}") if newest else "the config's keys do not date its GPT-NeoX"
        text = f"GPT-NeoX {commit} ({date}) or later: an older one has no {key} and refuses the config ({dated})"
        if key == "sequence_parallel" and c["to"] == "true":
            without = best.priced_as(layout={"sequence_parallel": False})
            if without is not None:
                fit = "fits" if without.fits else "does not fit"
                text += (f"; without it the best plan takes {without.step_time_s:.3f} s per step and {fit} "
                         f"({without.peak_memory_bytes / GiB:.1f} of {without.memory_capacity_bytes / GiB:.1f} GiB)")
        c["requires"] = text
