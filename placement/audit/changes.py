"""The exact changes from the audited launch to the best plan: the framework's own arguments, as
placement's emitter writes them for each of the two plans, compared setting by setting, plus the node
order when the best mapping puts node ranks on other hosts."""

from __future__ import annotations

import numpy as np

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
    if framework == "gpt-neox":  # a dotted key's last part; GPT-NeoX also reads - for _
        return key.rsplit(".", 1)[-1]
    if framework == "torchtitan":  # a TOML key or a 0.3.0 flag; the subcommand's table is [activation_checkpoint]
        return key.rsplit(".", 1)[-1] if key.startswith("--") else key.replace("-", "_")
    return key


def launch_changes(framework: str, now: EmitContext, best: EmitContext, files_text: str | None = None) -> list[dict]:
    """[{"argument", "from", "to"}] for every setting that differs (None = absent on that side).  With the launch
    files' text, a "from" value the files do not state is marked (NOT_IN_FILES), and a global batch the files
    leave to the framework is stated where the best plan needs it."""
    a, b = framework_settings(framework, now), framework_settings(framework, best)
    changes = [{"argument": k, "from": a.get(k), "to": b.get(k)}
               for k in list(a) + [k for k in b if k not in a] if a.get(k) != b.get(k)]
    if files_text is not None and framework in ("megatron", "torchtitan", "maxtext", "gpt-neox"):
        spelled = files_text.replace("-", "_") if framework == "gpt-neox" else files_text
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
