"""The exact changes from the audited launch to the best plan: the framework's own arguments, as
placement's emitter writes them for each of the two plans, compared setting by setting, plus the node
order when the best mapping puts node ranks on other hosts.  The audited files' own spelling where the emitter's
is another version's: a GPT-NeoX config's keys, a torchtitan TOML file's or 0.2.x command line's keys
(torchtitan_pre3_settings) for placement's torchtitan 0.3.0 flags, a Megatron-Bridge config's `section.key`s
(bridge_changes) for Megatron-LM's flags."""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Callable, Sequence

import numpy as np

from placement.audit.readers.neox_keys import KEYS as NEOX_KNOWN_KEYS
from placement.emit.common import EmitContext

NODE_ORDER = "node order (torchrun --node-rank / hostfile lines)"
CUDA_DEVICES = "CUDA_VISIBLE_DEVICES"
NODE_ORDER_ASSUMED = "node order (assumed: the allocation's; the files name no host per node rank, --hosts gives it)"
"""The launched side of a node-order change where the files state no host order (Audit.assumed["host_order"])."""
NODE_ORDER_SLURM = ("node order (assumed: SLURM's, the nodelist sorted as SLURM numbers the job's nodes; the node "
                    "ranks are SLURM's, --hosts gives the order if they ran otherwise)")
"""The same where the node ranks are SLURM's (LaunchLayout.slurm_node_order) and the nodelist is written in another
order."""
SHOWN_HOSTS = 8
"""Hosts quoted in a node-order change (the full order goes to the --out files)."""


SUBCOMMANDS = ("activation-checkpoint:",)
"""torchtitan 0.3.0 CLI subcommand tokens (`activation-checkpoint:MODE`): a setting of their own, never the
value of the flag before them."""


def _settings(tokens: list[str], multi: bool = False) -> dict[str, str]:
    """`--flag value` / `--flag` / `name:value` tokens as {setting: value} ("true" for a bare flag); `multi`: a flag
    takes every word up to the next flag, space-joined (Megatron-LM's nargs="+" lists, `--recompute-modules mla_up_proj
    moe`; a user trial's change list kept `moe` where only the first word was compared)."""
    out: dict[str, str] = {}
    k = 0
    while k < len(tokens):
        tok = tokens[k]
        if tok.startswith("--"):
            if "=" in tok:
                key, value = tok.split("=", 1)
                out[key] = value
            elif k + 1 < len(tokens) and not tokens[k + 1].startswith(("--", *SUBCOMMANDS)):
                end = k + 2
                while multi and end < len(tokens) and not tokens[end].startswith("--"):
                    end += 1
                out[tok] = " ".join(tokens[k + 1:end])
                k = end - 1
            else:
                out[tok] = "true"
        elif ":" in tok:
            key, value = tok.split(":", 1)
            out[key] = value
        k += 1
    return out


def _subcommand_text(changes: list[dict]) -> None:
    """A torchtitan 0.3.0 subcommand change (`activation-checkpoint`) gets `from_arg`/`to_arg`: the token as the
    command line takes it, `activation-checkpoint:none` (tyro's subcommand of distributed/activation_checkpoint.py
    ActivationCheckpointingConfig; `activation-checkpoint none` is refused), where a flag's is `argument value`."""
    names = {s.rstrip(":") for s in SUBCOMMANDS}
    for c in changes:
        if c["argument"] in names:
            for side in ("from", "to"):
                if c[side] is not None:
                    c[f"{side}_arg"] = f"{c['argument']}:{c[side]}"


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
        return _settings(args, multi=True) | {f"env {k}": v for k, v in env.items()}
    if framework == "torchtitan":
        from placement.emit import torchtitan

        args, _ = torchtitan.flags(ctx)
        return _settings(args)
    if framework == "maxtext":
        from placement.emit import maxtext

        keys, _, _, _ = maxtext.overrides(ctx)
        # a whole per_device_batch_size as MaxText's configs write it (4, not 4.0)
        return {k: str(v).lower() if isinstance(v, bool) else str(int(v)) if isinstance(v, float) and v.is_integer()
                else str(v) for k, v in keys.items()}
    from placement.emit import deepspeed

    # recompute is the model code's (each layer wrapped in deepspeed.checkpointing.checkpoint, or the attention core
    # alone): named as a setting so a change of it is listed (a user trial's audit listed only the
    # activation_checkpointing keys, not the recompute that made the job fit)
    out: dict[str, str] = {"topology (ds_topology.py)": deepspeed.topology(ctx),
                           "recompute (model code)": ctx.plan.layout.recompute}
    if ctx.plan.layout.tp > 1:
        out["sequence_parallel (ds_topology.py)"] = str(ctx.plan.layout.sequence_parallel)
    if ctx.moe:  # the model code's MoE(..., ep_size=N), which ds_topology.py states
        out["ep_size (ds_topology.py)"] = str(ctx.plan.layout.ep)
    _flatten("", deepspeed.config(ctx), out)
    return out


NOT_IN_FILES = "not in the launch files: placement's spelling of the launched layout"
BASE_DEFAULT = "base.yml default"
"""How a MaxText change's note ends where its launched side is base.yml's default (audit.maxtext.BASE_SOURCE)."""


def _maxtext_stated(text: str, key: str) -> str | None:
    """The value a MaxText YAML (`key: value`) or command line (`key=value`) states for `key`, as written (quotes
    off), the last one winning as MaxText's overrides do; None where none does.  A change's launched side quotes it
    (a user trial: `- remat_policy minimal` where the file says minimal_with_context, which placement prices the
    same)."""
    found = None
    for m in re.finditer(rf"(?:^|\s){re.escape(key)}\s*[:=]\s*(\"[^\"]*\"|'[^']*'|[^\s#]+)", text, re.M):
        found = m.group(1).strip("\"'")
    return found
def _maxtext_runs(live: str, job) -> Callable[[str], str | None]:
    """The value, as written, that a MaxText job runs for a key: the line LaunchLayout.maxtext_keys names for it (the
    command's key=value over the model file over the config over its base_config, whatever order the files were
    given in), else None where the merged config states none.  A user trial's change list quoted base.yml's
    `ici_fsdp_parallelism: -1`, given after the script, for a job whose command passed ici_fsdp_parallelism=8, which
    its own sources named.  Without the merged keys (no LaunchLayout), the files' text read last to first."""
    merged = job.maxtext_keys if job is not None and job.maxtext_keys else None
    if merged is None:
        return lambda key: _maxtext_stated(live, key)
    return lambda key: _maxtext_stated(merged[key], key) if key in merged else None


GLOBAL_BATCH = {"megatron": "--global-batch-size", "torchtitan": "--training.global_batch_size"}
"""The setting that fixes the global batch, where leaving it out makes it micro-batch x dp (Megatron) or local
batch x dp (torchtitan): a best plan that changes either must state it."""


def uncommented(text: str) -> str:
    """Launch text without its shell comments: whole `#` lines and a ` # ...` tail (a flag commented out, as
    Megatron-LM's example scripts list the options they leave off, is not stated)."""
    return "\n".join(re.sub(r"(^|\s)#.*$", "", line) for line in text.splitlines())


def megatron_flag_in(flag: str, text: str) -> bool:
    """Whether launch text holds Megatron argument `flag` as a whole argument (not a prefix of a longer one)."""
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


def _token(framework: str, key: str) -> str:
    """The text a launch file holds when it states `key` (a flag, a dotted key's last part, an env variable)."""
    if key.startswith("env "):
        return key[4:]
    if framework == "torchtitan":  # a TOML key or a 0.3.0 flag; the subcommand's table is [activation_checkpoint]
        return key.rsplit(".", 1)[-1] if key.startswith("--") else key.replace("-", "_")
    return key


BRIDGE_FIELDS = {"--num-virtual-stages-per-pipeline-rank": "virtual_pipeline_model_parallel_size",
                 "--accumulate-allreduce-grads-in-fp32": "grad_reduce_in_fp32",
                 "--cuda-graph-modules": "cuda_graph_scope", "--fp8-param-gather": "fp8_param_gather",
                 "--recompute-activations": "recompute_granularity",
                 "--decoder-first-pipeline-num-layers": "num_layers_in_first_pipeline_stage",
                 "--decoder-last-pipeline-num-layers": "num_layers_in_last_pipeline_stage",
                 "--ddp-bucket-size": "bucket_size"}
"""Megatron-LM flags whose Megatron-Bridge field has another name; every other flag's field is its name with `_`
for `-` (Megatron-Bridge's ConfigContainer sections hold megatron-core's TransformerConfig, DDP and optimizer
fields, which Megatron-LM's arguments fill by name: megatron/training/arguments.py
core_transformer_config_from_args).  `--ddp-bucket-size` is megatron-core DistributedDataParallelConfig.bucket_size
(Megatron-LM training.py:2639 `kwargs["bucket_size"] = args.ddp_bucket_size`), which a Bridge config states as
`ddp.bucket_size` and `comm_overlap.bucket_size` (CommOverlapConfig's, written over the DDP config's: Megatron-Bridge
training/comm_overlap.py _apply_cfgs); a review found the DeepSeek-V3 dump's change list adding `--ddp-bucket-size
134217728` with a note that the config states no such field."""
BRIDGE_SECTIONS = ("model", "train", "comm_overlap", "mixed_precision", "ddp", "optimizer", "dist", "checkpoint",
                   "dataset", "rerun_state_machine", "logger")
"""Where a field is looked for when the files state it in more than one section: the section Megatron-Bridge reads
last wins (a mixed_precision or comm_overlap value over the model's: readers.megatron._bridge_value)."""
BRIDGE_NOT_IN_FILES = ("Megatron-LM's flag: the Megatron-Bridge config states no field of this name; set the "
                       "matching field of its ConfigContainer")


BRIDGE_UNSTATED_SECTIONS = {
    "use_distributed_optimizer": ("ddp", "optimizer"), "overlap_grad_reduce": ("ddp",),
    "overlap_param_gather": ("ddp",), "grad_reduce_in_fp32": ("ddp",), "tp_comm_overlap": ("comm_overlap",),
    "sequence_parallel": ("model",), "cuda_graph_impl": ("model",), "cuda_graph_scope": ("model",),
    "cross_entropy_loss_fusion": ("model",), "check_for_nan_in_loss": ("rerun_state_machine",),
    "check_for_nan_in_grad": ("ddp",), "use_megatron_fsdp": ("ddp", "dist"),
    "data_parallel_sharding_strategy": ("ddp",), "align_param_gather": ("comm_overlap",),
    "overlap_p2p_comm": ("comm_overlap",), "megatron_fsdp_main_grads_dtype": ("ddp",),
    "megatron_fsdp_grad_comm_dtype": ("ddp",), "ckpt_format": ("checkpoint",),
    **{field: ("model",) for field in (
        "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
        "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size",
        "recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_modules",
        "moe_token_dispatcher_type", "moe_flex_dispatcher_backend", "moe_permute_fusion", "moe_router_fusion",
        "moe_grouped_gemm", "pipeline_model_parallel_layout")},
    "micro_batch_size": ("train",),
}
"""Where a Megatron-Bridge ConfigContainer holds a field (named from its flag as `_bridge_names` names it) that the
files do not state (an override YAML leaves it to the recipe): the sections as Megatron-Bridge names them
(training/config.py ConfigContainer: ddp is megatron-core's DistributedDataParallelConfig, optimizer its
OptimizerConfig, model the provider's TransformerConfig; comm_overlap.py CommOverlapConfig.tp_comm_overlap;
config.py:1508-1512 names rerun_state_machine.check_for_nan_in_loss beside full-iteration graphs, config.py:1068-1069
sets ddp. and dist.use_megatron_fsdp together and :1107 wants checkpoint.ckpt_format fsdp_dtensor with it;
megatron-core distributed_data_parallel_config.py holds the Megatron-FSDP fields; the degrees, recompute and MoE
dispatch fields are the model provider's TransformerConfig's and the micro-batch the train section's, where a saved
ConfigContainer states them), each written where the best plan needs it.  A QA run: the Llama 3 8B Megatron-FSDP
override example's best plan at tp 2 listed `--tensor-model-parallel-size 2` in Megatron-LM's spelling, "no field of
this name"; another, Hydra overrides of llama3_70b_pretrain_config, its `--pipeline-model-parallel-layout`, which is
the model provider's pipeline_model_parallel_layout (read back by readers.megatron.bridge_settings)."""
BRIDGE_UNSTATED_NOTE = ("not in the files: Megatron-Bridge's field for it, priced at Megatron-LM's default; where the "
                        "files override a recipe (base_config_unread), the recipe may set it already")
BRIDGE_EVERY_SECTION = frozenset({"use_distributed_optimizer", "use_megatron_fsdp"})
"""Fields a Megatron-Bridge config states in two sections that must agree (ddp and optimizer; ddp and dist): a change
names each."""
BRIDGE_NEGATED = {"--no-check-for-nan-in-loss-and-grad": ("check_for_nan_in_grad", "check_for_nan_in_loss"),
                  "--grad-reduce-in-bf16": ("grad_reduce_in_fp32",),
                  "--no-align-param-gather": ("align_param_gather",),
                  "--no-overlap-p2p-communication": ("overlap_p2p_comm",)}
"""Megatron-LM `--no-...` flags -> the Bridge fields they set false (ddp's gradient check, the rerun state machine's
loss check; the interleaved pipeline's aligned weight gathers and overlapped transfers, which a comm_overlap section
writes over the ddp and model fields: Megatron-Bridge training/comm_overlap.py _get_optimizer_overlap_cfgs,
_get_model_comm_overlap_cfgs).  A QA run: a saved GB200 config with ddp.align_param_gather and
comm_overlap.align_param_gather was told `+ --no-align-param-gather`, "no field of this name"."""


def _bridge_names(flag: str) -> tuple[str, ...]:
    """The Megatron-Bridge field names Megatron-LM's `flag` sets: each field a negated flag sets (BRIDGE_NEGATED), else
    its BRIDGE_FIELDS name or its own with `_` for `-`."""
    if flag in BRIDGE_NEGATED:
        return BRIDGE_NEGATED[flag]
    return (BRIDGE_FIELDS.get(flag, flag.removeprefix("--").replace("-", "_")),)


def bridge_unstated_keys(flag: str) -> list[str]:
    """The `section.key`s a change to `flag` writes where the files state none of its fields (BRIDGE_UNSTATED_SECTIONS);
    empty for a flag whose fields' sections are not known."""
    names = _bridge_names(flag)
    if not all(n in BRIDGE_UNSTATED_SECTIONS for n in names):
        return []
    return [f"{section}.{n}" for n in names for section in BRIDGE_UNSTATED_SECTIONS[n]]


def _bridge_keys(flag: str, stated: dict[str, str]) -> list[str]:
    """The `section.key`s of the Megatron-Bridge config that state Megatron-LM's `flag` (none if the config has no
    field of its name): a mixed_precision or comm_overlap key (set, not null) before the model's, as Megatron-Bridge
    applies them; every section's where two must agree (BRIDGE_EVERY_SECTION); each field a negated flag sets."""
    if flag in BRIDGE_NEGATED:
        return [k for k in stated if k.rsplit(".", 1)[-1] in _bridge_names(flag)]
    (name,) = _bridge_names(flag)
    found = [k for k in stated if k.rsplit(".", 1)[-1] == name and k.split(".", 1)[0] in BRIDGE_SECTIONS]
    if len(found) <= 1 or name in BRIDGE_EVERY_SECTION:
        return found
    # a mixed_precision or comm_overlap section writes its fields over the model's and the DDP config's, its null
    # too where it decides the field (readers.megatron._bridge_value): the change goes there
    override = [k for k in found if k.split(".", 1)[0] in ("mixed_precision", "comm_overlap")]
    if override:
        return override[:1]
    return [min(found, key=lambda k: BRIDGE_SECTIONS.index(k.split(".", 1)[0]))]


BRIDGE_DTYPES = {"fp32": "torch.float32", "bf16": "torch.bfloat16", "fp16": "torch.float16"}
"""A Megatron-LM dtype word -> the torch dtype a Megatron-Bridge YAML names (`{_call_: false, _target_: ...}`)."""


BRIDGE_FLAG_DEFAULTS = {"--ckpt-format": "torch_dist", "--data-parallel-sharding-strategy": "no_shard",
                        "--moe-token-dispatcher-type": "allgather", "--moe-flex-dispatcher-backend": "deepep",
                        "--cuda-graph-impl": "none"}
"""The value a Megatron-Bridge field takes where Megatron-LM's flag is left out, for the fields whose default is not
null (megatron/training/config/training_config.py:486 `ckpt_format ... = "torch_dist"`; megatron-core
distributed_data_parallel_config.py:103 `data_parallel_sharding_strategy: str = 'no_shard'`; transformer_config.py:891,
:898 and :1075 the dispatcher `"allgather"`, its backend `"deepep"` and `cuda_graph_impl` `"none"`): a change that
leaves Megatron-FSDP writes `checkpoint.ckpt_format torch_dist`, not null, which the Literal field does not take (a QA
run listed `- --ckpt-format fsdp_dtensor` in Megatron-LM's spelling and `ddp.data_parallel_sharding_strategy null`)."""
BRIDGE_FSDP_ONLY = frozenset({"--megatron-fsdp-main-grads-dtype", "--megatron-fsdp-grad-comm-dtype"})
"""Megatron-LM flags whose DDP fields only Megatron-FSDP reads (megatron-core distributed_data_parallel_config.py:195,
:201, default null): a best plan without Megatron-FSDP needs nothing written where the config does not state them."""


def _bridge_flag_value(flag: str, value: str | None) -> str:
    """A Megatron-LM flag's value as the Bridge field takes it: a bare flag is true, a flag left out is false
    (switch), the field's default (BRIDGE_FLAG_DEFAULTS) or null (valued), a list of words [a, b]."""
    if flag in BRIDGE_NEGATED:
        return "true" if value is None else "false"
    if value is None:
        return "false" if flag in _SWITCHES else BRIDGE_FLAG_DEFAULTS.get(flag, "null")
    if flag == "--recompute-activations":
        return "selective"
    if flag in ("--recompute-modules", "--cuda-graph-modules", "--cp-comm-type") and value != "true":
        return "[" + ", ".join(value.split()) + "]"
    return value


_SWITCHES = frozenset({"--sequence-parallel", "--use-distributed-optimizer", "--use-megatron-fsdp", "--tp-comm-overlap",
                       "--overlap-grad-reduce", "--overlap-param-gather", "--accumulate-allreduce-grads-in-fp32",
                       "--fp8-param-gather", "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute",
                       "--cross-entropy-loss-fusion", "--moe-permute-fusion", "--moe-router-fusion",
                       "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
                       "--activation-func-fp8-input-store", "--moe-grouped-gemm", "--use-tp-pp-dp-mapping",
                       "--moe-shared-expert-overlap", "--use-torch-fsdp2"})
"""Megatron-LM's store_true flags placement writes (and --moe-shared-expert-overlap and --use-torch-fsdp2, which a
change removes: DROPPED_SWITCHES, TORCH_FSDP2_DROPPED): their Bridge field is a bool."""


def _bridge_graph_api(changes: list[dict], stated: dict[str, str]) -> None:
    """A full-iteration CUDA graph in the config's own megatron-core API: where the YAML has no cuda_graph_modules
    (the older API), cuda_graph_impl `local` with cuda_graph_scope [full_iteration], as Megatron-Bridge's
    set_full_iteration_cuda_graph writes it (utils/cuda_graph.py); with cuda_graph_modules (the newer API, which
    deprecates cuda_graph_scope), impl full_iteration and the modules field."""
    impl = next((c for c in changes if c["argument"] == "model.cuda_graph_impl"), None)
    if impl is None or impl["to"] != "full_iteration" or "model.cuda_graph_modules" in stated:
        for c in changes:
            if c["argument"] == "model.cuda_graph_scope" and "model.cuda_graph_modules" in stated:
                c["argument"], c["from"] = "model.cuda_graph_modules", stated["model.cuda_graph_modules"]
        return
    impl["to"] = "local"
    if impl["from"] == "local":
        changes.remove(impl)
    scope = next((c for c in changes if c["argument"] == "model.cuda_graph_scope"), None)
    if scope is None:
        # marked as the impl's change is where the files leave the field to the recipe (a QA run: the Megatron-FSDP
        # override's `+ model.cuda_graph_scope [full_iteration]` alone had no note beside its impl's)
        scope = {"argument": "model.cuda_graph_scope", "from": stated.get("model.cuda_graph_scope"), "to": None,
                 **({} if "model.cuda_graph_scope" in stated else {"note": BRIDGE_UNSTATED_NOTE})}
        changes.append(scope)
    scope["to"] = "[full_iteration]"


def _bridge_distributed(changes: list[dict], stated: dict[str, str]) -> bool:
    """Whether the best plan runs Megatron-Core's distributed optimizer: a change of --use-distributed-optimizer
    says so, else the config's own ddp (or optimizer) field."""
    for c in changes:
        if c["argument"] == "--use-distributed-optimizer":
            return c["to"] is not None
    return stated.get("ddp.use_distributed_optimizer", stated.get("optimizer.use_distributed_optimizer")) == "true"


BRIDGE_FSDP_DISTRIBUTED = ("Megatron-Bridge turns the distributed optimizer on itself under Megatron-FSDP "
                           "(training/config.py:1082-1085, _validate_and_apply_megatron_fsdp_v1_configs: 'Megatron-"
                           "FSDP always uses a distributed optimizer'); written so the config states what runs")


def _bridge_fsdp_distributed(changes: list[dict], stated: dict[str, str]) -> list[dict]:
    """The distributed optimizer's change as Megatron-Bridge runs it beside Megatron-FSDP.  Megatron-FSDP v1
    (megatron-core DistributedDataParallelConfig.megatron_fsdp_version's default 1) sets ddp. and
    optimizer.use_distributed_optimizer true whatever the config says (Megatron-Bridge training/config.py:1082-1085 at
    067f987 of 2026-08-22, as Megatron-LM's validate_args does, arguments.py:1124-1135), so placement's Megatron-LM
    files of a ZeRO-2/3 plan leave `--use-distributed-optimizer` out: a best plan entering Megatron-FSDP needs it
    true (a QA run: a saved Llama 3 8B config with both fields true was told to set them false beside
    `use_megatron_fsdp true`, a change Bridge undoes), and one leaving it for ZeRO-0 needs it false where the saved
    config states it true, as Bridge saved it.  Megatron-FSDP v2 (`ddp.megatron_fsdp_version 2`) turns both off
    itself (:1190-1192): left as the changes have it."""
    if stated.get("ddp.megatron_fsdp_version", "1") != "1":
        return changes
    launched = any(stated.get(f"{s}.use_megatron_fsdp") == "true" for s in ("ddp", "dist"))
    fsdp = next((c for c in changes if c["argument"] == "--use-megatron-fsdp"), None)
    best = fsdp["to"] is not None if fsdp is not None else launched
    flag = "--use-distributed-optimizer"
    own = next((c for c in changes if c["argument"] == flag), None)
    if best:
        kept = [c for c in changes if c is not own]
        if any(stated.get(f"{s}.use_distributed_optimizer") == "false" for s in ("ddp", "optimizer")):
            kept.append({"argument": flag, "from": None if own is None else own["from"], "to": "true",
                         "note": BRIDGE_FSDP_DISTRIBUTED})
        return kept  # true already, or left to Megatron-Bridge, which turns it on: nothing to write
    if launched and own is None:  # leaving Megatron-FSDP for a plan whose files pass no --use-distributed-optimizer
        return [*changes, {"argument": flag, "from": None, "to": None}]
    return changes


BRIDGE_ENV = ("an environment variable, not a config field: Megatron-Bridge's launcher sets it (its recipes' env_vars; "
              "scripts/performance/utils/overrides.py)")


def bridge_changes(changes: list[dict], stated: dict[str, str]) -> list[dict]:
    """Megatron-LM flag changes named in the Megatron-Bridge config's own keys: the field that states the flag's
    setting, its value as the config has it on the launched side and as the best plan needs it on the other.  A
    change to a setting the config states as the best plan already has it is dropped; a flag with no field in the
    config stays in Megatron-LM's spelling with a note."""
    out = []
    changes = _bridge_fsdp_distributed(changes, stated)
    fsdp_width = any(c["argument"] == "--megatron-fsdp-grad-comm-dtype" and c["to"] is not None for c in changes)
    for c in changes:
        flag = c["argument"]
        if fsdp_width and flag in ("--grad-reduce-in-bf16", "--accumulate-allreduce-grads-in-fp32") and c["to"] is None:
            continue  # Megatron-FSDP's own dtype fields state the gradient width; the config's field may stay
        keys = _bridge_keys(flag, stated) if flag.startswith("--") else []
        if flag == "--ddp-bucket-size" and not _bridge_distributed(changes, stated):
            # CommOverlapConfig's bucket reaches the DDP config only with the distributed optimizer (Megatron-Bridge
            # comm_overlap.py setup): without it the DDP config's own field holds the size
            keys = [k for k in stated if k == "ddp.bucket_size"]
        if flag.startswith("env "):  # no config field states the environment: the launcher's (env_vars)
            out.append({**c, "note": c.get("note") or BRIDGE_ENV})
            continue
        to = _bridge_flag_value(flag, c["to"])
        if flag.endswith("-dtype") and to in BRIDGE_DTYPES:  # a dtype field as the YAML spells one
            to = f"{{_call_: false, _target_: {BRIDGE_DTYPES[to]}}}"
        if not keys and c["to"] is None and flag in BRIDGE_FSDP_ONLY:
            continue  # a Megatron-FSDP field the config leaves at its null, which a plan without Megatron-FSDP runs
        unstated = bridge_unstated_keys(flag) if not keys and (
            c["to"] is not None or flag in _SWITCHES or flag in BRIDGE_FLAG_DEFAULTS) else []
        if keys and _bridge_names(flag)[0] in BRIDGE_EVERY_SECTION:
            # the sections that must agree and the config leaves to the recipe: Megatron-Bridge runs Megatron-FSDP
            # where either ddp's or dist's field is true (training/config.py:1484), so a plan that leaves it sets both
            out += [{"argument": key, "from": None, "to": to, "note": BRIDGE_UNSTATED_NOTE}
                    for key in bridge_unstated_keys(flag) if key not in stated]
        if unstated:
            # a field the files leave to the recipe: the change names Bridge's own field, to be added
            out += [{"argument": key, "from": None, "to": to, "note": BRIDGE_UNSTATED_NOTE} for key in unstated]
            continue
        if not keys:
            out.append(c if not flag.startswith("--") else {**c, "note": BRIDGE_NOT_IN_FILES})
            continue
        # a flag the best plan leaves out is Megatron-LM's default; a field the config leaves null is already
        # Megatron-Bridge's: nothing to write
        out += [{"argument": key, "from": stated[key], "to": to, **({"note": c["note"]} if "note" in c else {})}
                for key in keys if stated[key] != to and not (c["to"] is None and stated[key] == "null")]
    _bridge_graph_api(out, stated)
    merged: dict[str, dict] = {}  # two flags of one field (--recompute-activations, --recompute-granularity)
    for c in out:
        merged.setdefault(c["argument"], c)
    return list(merged.values())


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


HF_FLAGS = {"train_micro_batch_size_per_gpu": "--per_device_train_batch_size",
            "gradient_accumulation_steps": "--gradient_accumulation_steps"}
"""DeepSpeed JSON keys the HF Trainer fills from its TrainingArguments (transformers integrations/deepspeed.py
HfTrainerDeepSpeedConfig.trainer_config_process: fill_match), whose value is the flag's."""
HF_SCRIPT_FLAGS = {"zero_optimization.stage": "--zero_stage"}
"""DeepSpeed JSON keys a training script may take as its own flag and build its config from (DeepSpeed-Chat's
main.py: get_train_ds_config(stage=args.zero_stage))."""
HF_MUST_MATCH = ("the HF Trainer refuses a DeepSpeed config value that differs from its argument (transformers "
                 "integrations/deepspeed.py fill_match: 'Please correct the following DeepSpeed config values that "
                 "mismatch TrainingArguments values'): set it \"auto\" or to the same value")
HF_RECOMPUTE = ("HF Trainer's gradient checkpointing (model.gradient_checkpointing_enable: every decoder layer "
                "recomputed whole), not DeepSpeed's activation_checkpointing section, which only "
                "deepspeed.checkpointing calls in the model code read")


def hf_trainer_changes(a: dict[str, str], b: dict[str, str], now: EmitContext, best: EmitContext,
                       json_keys: dict[str, str], files_text: str | None) -> list[dict]:
    """The changes from the launched plan to the best one for a HuggingFace Trainer job under DeepSpeed, spelled as
    that job states them: the micro-batch and accumulation as the Trainer's flags (they fill the JSON's "auto"
    and must match a value it states), recompute as --gradient_checkpointing, train_batch_size only where the JSON
    states a number (the Trainer fills it otherwise), and the rest (ZeRO) as the JSON's keys.  `json_keys`: the
    DeepSpeed JSON's own keys (LaunchLayout.config_keys of the hf-trainer dialect)."""
    live = uncommented(files_text) if files_text is not None else None
    out: list[dict] = []
    for k in list(a) + [k for k in b if k not in a]:
        if a.get(k) == b.get(k) or k.startswith(("activation_checkpointing.", "topology ", "sequence_parallel ",
                                                  "recompute ", "ep_size ")):
            # (placement's own program's settings: the Trainer's recompute is --gradient_checkpointing, below)
            continue
        stated = json_keys.get(k)
        if k in HF_FLAGS:
            change = {"argument": HF_FLAGS[k], "from": a.get(k), "to": b.get(k)}
            if live is not None and HF_FLAGS[k] not in live and HF_FLAGS[k].replace("_", "-") not in live:
                change["note"] = f"not in the launch files: TrainingArguments' default {a.get(k)}"
            out.append(change)
            if stated is not None and stated != "auto":
                out.append({"argument": k, "from": stated, "to": b.get(k), "note": HF_MUST_MATCH})
            continue
        if k == "train_batch_size" and (stated is None or stated == "auto"):
            continue  # the Trainer fills it: world size x micro-batch x accumulation
        if k in ("bf16.enabled", "fp16.enabled") and stated == "auto":
            continue  # the Trainer fills it from --bf16 / --fp16, which the plan keeps
        if k == "zero_optimization.stage" and stated is None and "deepspeed_config.zero_stage" in json_keys:
            # accelerate's config states the plugin's stage (readers.deepspeed.ACCELERATE_ZERO)
            out.append({"argument": "deepspeed_config.zero_stage", "from": json_keys["deepspeed_config.zero_stage"],
                        "to": b.get(k), "note": "in the accelerate config"})
            continue
        if k.startswith("zero_optimization.") and stated is None and "deepspeed_config.zero_stage" in json_keys:
            continue  # accelerate's plugin builds the rest of its DeepSpeed config itself: no key of it to write
        own = HF_SCRIPT_FLAGS.get(k)
        if stated is None and own is not None and live is not None and re.search(rf"{own}\b", live):
            # a script that builds its DeepSpeed config from its own flag (DeepSpeed-Chat's --zero_stage)
            out.append({"argument": own, "from": a.get(k), "to": b.get(k)})
            continue
        change = {"argument": k, "from": stated if stated is not None else a.get(k), "to": b.get(k)}
        if stated is None and a.get(k) is not None:
            change["note"] = NOT_IN_FILES
        offload = json_keys.get("zero_optimization.offload_param.device")
        if k == "zero_optimization.stage" and b.get(k) != "3" and offload not in (None, "none"):
            change["note"] = (f"and drop zero_optimization.offload_param (device {offload}): DeepSpeed takes it with "
                              f"stage 3 only")
        out.append(change)
    moved = json_keys.get("zero_optimization.offload_optimizer.device")
    if moved not in (None, "none") and any(c["argument"] == "zero_optimization.stage" for c in out):
        # the best plan is priced with the optimizer state on the GPUs (a user trial: the change list dropped
        # offload_param beside a stage change and left offload_optimizer cpu)
        out.append({"argument": "zero_optimization.offload_optimizer.device", "from": moved, "to": "none",
                    "note": "the best plan is priced with the optimizer state and step on the GPUs"})
    full = (now.plan.layout.recompute == "full", best.plan.layout.recompute == "full")
    if full[0] != full[1]:
        # stated both ways: dropping the flag leaves TRL's SFTConfig default (True) on (a QA run)
        note = HF_RECOMPUTE
        if full[0] and live is not None and "--gradient_checkpointing" not in live \
                and "--gradient-checkpointing" not in live:
            note += "; not in the launch files: the script's default (TRL's SFTConfig: True)"
        # DeepSpeed-Chat's main.py declares it store_true: "false" is no value it takes, so off is the flag dropped
        from placement.audit.readers.megatron import DS_CHAT_FLAGS

        # its own flags, less the --dtype TRL shares
        chat = live is not None and any(re.search(rf"{f}\b", live) for f in DS_CHAT_FLAGS - {"--dtype"})
        off = None if chat else "false"
        out.append({"argument": "--gradient_checkpointing", "from": "true" if full[0] else None,
                    "to": "true" if full[1] else off, "note": note})
    return out


def _json_value(text: str, like: object):
    """A change's value as a JSON value: a boolean where the key is one in the file (or the text is true/false), else a
    number where the text is one (a whole number as an integer: "1e9" is 1000000000), else the text ("none", an
    offload device)."""
    if isinstance(like, bool) or text in ("true", "false"):
        return text == "true"
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() and not isinstance(like, float) else number


NEOX_CONFIG_KEYS = frozenset(NEOX_KNOWN_KEYS)
"""GPT-NeoX's config keys ("_" spelling): what apply_json_changes writes into a GPT-NeoX config."""


def config_key(argument: str, known: frozenset[str]) -> bool:
    """A change's argument is a key of a config whose top-level names are `known` ("-" read as "_"), dotted into its
    sections (`zero_optimization.stage`): not a flag, an environment variable or the host order."""
    return argument.split(".")[0].replace("-", "_") in known and " " not in argument


def apply_json_changes(data: dict, changes: Sequence[dict], known: frozenset[str] | None = None,
                       ) -> tuple[dict, list[dict]]:
    """A job's own config (its DeepSpeed JSON, or a GPT-NeoX config file, as loaded) with the change list's keys
    applied, and the changes left for the job's own command (a flag, CUDA_VISIBLE_DEVICES, an accelerate config's key),
    which the config does not state.  `known`: the config's top-level key names, "-" read as "_" (default: DeepSpeed's).
    A key's new value takes the type it has in the file; `to` None drops it; a ZeRO stage other than 3 drops
    offload_param, which DeepSpeed takes with stage 3 only (the stage change's note says so)."""
    from placement.audit.readers.deepspeed import DEEPSPEED_KEYS

    known = DEEPSPEED_KEYS if known is None else known
    out = copy.deepcopy(data)
    left = []
    for c in changes:
        key = c["argument"]
        if not config_key(key, known):
            left.append(c)
            continue
        *parents, last = key.split(".")
        node = out
        for p in parents:
            if not isinstance(node.get(p), dict):  # absent, or null in the file
                node[p] = {}
            node = node[p]
        if c["to"] is None:
            node.pop(last, None)
        else:
            node[last] = _json_value(str(c["to"]), node.get(last))
        if key == "zero_optimization.stage" and str(c["to"]) != "3":
            node.pop("offload_param", None)
    return out, left


DEEPSPEED_ZERO_DEFAULTS = {"zero_optimization.contiguous_gradients": "true",
                           "zero_optimization.reduce_scatter": "true",
                           "zero_optimization.reduce_bucket_size": "500000000",
                           "zero_optimization.allgather_bucket_size": "500000000",
                           "zero_optimization.stage3_prefetch_bucket_size": "50000000"}
"""What DeepSpeed runs for a zero_optimization key placement writes where a JSON leaves it out (DeepSpeed 0.19.8
runtime/zero/config.py:102, 108, 113, 132, 222); overlap_comm's depends on the stage (_deepspeed_default)."""


def _deepspeed_default(key: str, stage: str | None) -> str | None:
    """DeepSpeed's value of `key` at ZeRO `stage` where the JSON leaves it out: overlap_comm is on at stage 3 alone
    (runtime/zero/config.py:384-386 overlap_comm_valid), the others DEEPSPEED_ZERO_DEFAULTS; None for another key."""
    if key == "zero_optimization.overlap_comm":
        return "true" if stage == "3" else "false"
    return DEEPSPEED_ZERO_DEFAULTS.get(key)


def _same(x: str | None, y: str | None) -> bool:
    """Two JSON values as written, numbers compared as numbers (5e7 is 50000000)."""
    try:
        return float(x) == float(y)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return x == y


def _deepspeed_defaults(changes: list[dict], b: dict[str, str], stated: dict[str, str], overlap: bool) -> None:
    """Make the change list of a DeepSpeed JSON run what the best plan's settings `b` write, where the JSON leaves a
    ZeRO key to DeepSpeed's default at the best plan's stage: a change to that default is none, and a key the best
    plan writes otherwise is added even where placement's spelling of the launched plan has it too.  overlap_comm
    follows the best plan's priced `overlap` (its recipe's dp_overlap, on for DeepSpeed's best plans: audit.core
    recipe_space), not placement's files, which always set it (emit.deepspeed NOT_EXPRESSED).  A QA run: a ZeRO-3
    JSON without overlap_comm (on by default at stage 3) whose best plan, ZeRO-1 priced with the overlapped
    reduction, listed no `overlap_comm true`, which DeepSpeed turns off at stage 1; and `reduce_scatter true`, its
    default, was listed as a change."""
    stage = b.get("zero_optimization.stage", stated.get("zero_optimization.stage"))
    want = dict(b)
    if "zero_optimization.overlap_comm" in want:
        want["zero_optimization.overlap_comm"] = "true" if overlap else "false"
    for key, to in want.items():
        default = _deepspeed_default(key, stage)
        if default is None:
            continue
        runs = stated.get(key, default)  # what the job's JSON runs at the best plan's stage, unchanged
        named = next((c for c in changes if c["argument"] == key), None)
        if _same(runs, to):
            if named is not None:
                changes.remove(named)
        elif named is not None:
            named["to"] = to
        else:
            changes.append({"argument": key, "from": stated.get(key), "to": to, **(
                {} if key in stated else
                {"note": f"not in the launch files: DeepSpeed's default at ZeRO-{stage} is {default}"})})


def _hf_overlap_comm(changes: list[dict], b: dict[str, str], json_keys: dict[str, str], best: EmitContext) -> None:
    """A HuggingFace Trainer's DeepSpeed JSON below stage 3 that leaves overlap_comm to DeepSpeed's default (off):
    the best plan is priced with the overlapped reduction (audit.core recipe_space), so the list adds the key, as
    _deepspeed_defaults does for a DeepSpeed job (placement's spelling of both sides holds it, so the comparison of
    the two plans names nothing; a QA run: a Trainer's ZeRO-1 JSON on 32 H100 got a best plan at ZeRO-2 priced
    overlapped, 1.812 s, and only `zero_optimization.stage 2` to change).  Not for accelerate's plugin, which
    builds its own config, nor a pipelined best plan (its engine reduces after the flush)."""
    stage = b.get("zero_optimization.stage")
    if not (best.recipe.dp_overlap and best.plan.layout.pp == 1 and stage in ("1", "2")) \
            or "deepspeed_config.zero_stage" in json_keys or json_keys.get("zero_optimization.overlap_comm") == "true" \
            or any(c["argument"] == "zero_optimization.overlap_comm" for c in changes):
        return
    stated = json_keys.get("zero_optimization.overlap_comm")
    changes.append({"argument": "zero_optimization.overlap_comm", "from": stated, "to": "true", **(
        {} if stated is not None else {"note": f"not in the launch files: DeepSpeed's default at ZeRO-{stage} is "
                                               f"false"})})


def launch_changes(framework: str, now: EmitContext, best: EmitContext, files_text: str | None = None,
                   stated: dict[str, str] | None = None,
                   torchtitan: tuple[dict[str, tuple[str, str]], str] | None = None,
                   bridge: dict[str, str] | None = None, job=None,
                   launched_gpu: np.ndarray | None = None) -> list[dict]:
    """[{"argument", "from", "to"}] for every setting that differs (None = absent on that side).  With the launch
    files' text, a "from" value the files do not state is marked (NOT_IN_FILES), and a global batch the files
    leave to the framework is stated where the best plan needs it.  `stated`: a GPT-NeoX config's own keys
    (LaunchLayout.config_keys), for framework "gpt-neox".  `torchtitan`: the keys a torchtitan TOML file or 0.2.x
    command line states and its form (LaunchLayout.torchtitan_stated, torchtitan_form), whose changes are named in
    that torchtitan's keys (torchtitan_pre3_settings), not placement's 0.3.0 flags.  `bridge`: the `section.key`s a
    Megatron-Bridge config states (LaunchLayout.bridge_keys), whose changes are named in those keys (bridge_changes).
    `job`: the audited LaunchLayout, whose running command's arguments and environment say what the launch passes.
    `launched_gpu`: the GPU of each of the job's own (launcher) ranks, which its node order and CUDA_VISIBLE_DEVICES
    are compared in, where the framework numbers its groups in another order than placement's (`now.gpu_of_rank` is
    indexed by placement's rank)."""
    a, b = (framework_settings("deepspeed" if framework == "hf-trainer" else framework, ctx) for ctx in (now, best))
    if framework == "hf-trainer":
        changes = hf_trainer_changes(a, b, now, best, stated or {}, files_text)
        _hf_overlap_comm(changes, b, stated or {}, best)
    elif framework == "torchtitan" and torchtitan is not None:
        keys, form = torchtitan
        changes = torchtitan_pre3_changes(torchtitan_pre3_settings(a, keys, form),
                                          torchtitan_pre3_settings(b, keys, form), keys)
    elif framework == "gpt-neox":
        changes = _neox_changes(a, b, stated or {})
    else:
        changes = [{"argument": k, "from": a.get(k), "to": b.get(k)}
                   for k in list(a) + [k for k in b if k not in a] if a.get(k) != b.get(k)]
        if framework == "torchtitan":
            _subcommand_text(changes)
    if framework == "deepspeed" and stated:
        # the launched side in the JSON's own values where it states them (placement writes no
        # activation_checkpointing section for a job without recompute; a user trial's config had one), and no
        # change where the JSON already holds the value the best plan writes
        from placement.audit.readers.deepspeed import DEEPSPEED_KEYS

        unwritten = []  # a JSON key the file does not state, which the best plan leaves out: nothing to remove
        for c in changes:  # the JSON's own value, not placement's spelling of the launched plan (a review: a
            if c["argument"] in stated:  # `partition_activations: true` was quoted as "from false")
                c["from"] = stated[c["argument"]]
            elif c["from"] is not None and config_key(c["argument"], DEEPSPEED_KEYS):
                # placement's spelling of the launched plan (a QA run: DeepSpeedExamples' bf16_full.json, ZeRO-3
                # with no stage3_prefetch_bucket_size, was told to remove `stage3_prefetch_bucket_size 50000000`)
                if c["to"] is None:
                    unwritten.append(c)
                else:
                    c["note"] = NOT_IN_FILES
        changes = [c for c in changes if c["from"] != c["to"] and c not in unwritten]
        # the PipelineEngine reduces after the flush whatever overlap_comm says (cost.dp engine_flush): a pipelined
        # best plan needs no key it would not use
        _deepspeed_defaults(changes, b, stated, best.recipe.dp_overlap and best.plan.layout.pp == 1)
    if framework == "gpt-neox":  # the config's own keys say what it states
        for c in changes:
            if c["from"] is not None and c["argument"] not in (stated or {}):
                c["note"] = NOT_IN_FILES
    if framework == "megatron" and bridge is not None:
        split_keys = {flag: f"model.{BRIDGE_FIELDS[flag]}" for flag in STATED_SPLIT_FLAGS} | {
            "--pipeline-model-parallel-layout": "model.pipeline_model_parallel_layout"}
        _megatron_stated_split(changes, {flag: bridge[key] for flag, key in split_keys.items() if key in bridge})
        if files_text is not None:
            _megatron_virtual_flags(changes, b, files_text)
        _bridge_dropped_switches(changes, best, bridge)
        _bridge_stated_vpp(changes, best, bridge)
        if "--use-megatron-fsdp" not in b and bridge.get("dist.use_torch_fsdp2") == "true":
            # torch FSDP2, which no plan of placement's runs, named as the config's field set false (bridge_changes)
            changes.append({"argument": "--use-torch-fsdp2", "from": "true", "to": None, "note": TORCH_FSDP2_DROPPED})
        _moe_fusion_pair(changes, b, lambda flag: any(bridge[k] == "true" for k in _bridge_keys(flag, bridge)))
        changes = bridge_changes(changes, bridge)
        for c in changes:
            if c["argument"].startswith("env ") and c["from"] is not None and files_text is not None \
                    and _token(framework, c["argument"]) not in files_text:
                c["note"] = NOT_IN_FILES
        if "train.global_batch_size" not in bridge and "--global-batch-size" in b:
            changes.append({"argument": "train.global_batch_size", "from": None, "to": b["--global-batch-size"],
                            "note": "the launch files leave the global batch to the framework, which derives it "
                                    "from the layout this plan changes"})
    elif files_text is not None and framework in ("megatron", "torchtitan", "maxtext") and torchtitan is None:
        # torchtitan's CLI takes - and _ (tyro), and its subcommand activation-checkpoint:MODE is the TOML's
        # [activation_checkpoint]; a commented-out line states nothing
        live = uncommented(files_text)
        spelled = live + "\n" + live.replace("-", "_") if framework == "torchtitan" else live
        if framework == "maxtext":
            from placement.audit.maxtext import BASE as MAXTEXT_BASE
            from placement.audit.maxtext import BASE_SOURCE as MAXTEXT_BASE_SOURCE
        given = dict(job.command_args) if framework == "megatron" and job is not None else {}
        runs = _maxtext_runs(live, job)
        for c in changes:
            if c["from"] is not None and _token(framework, c["argument"]) not in spelled:
                c["note"] = NOT_IN_FILES
                if framework == "maxtext":  # a key the files leave to base.yml runs its default, not placement's
                    # spelling (a user trial: `- shard_optimizer_over_data true` for a job that ran base.yml's false)
                    default = MAXTEXT_BASE.get(c["argument"])
                    if isinstance(default, bool):
                        c["from"], c["note"] = str(default).lower(), f"not in the launch files: {MAXTEXT_BASE_SOURCE}"
            elif c["from"] is not None and framework == "maxtext":
                c["from"] = runs(c["argument"]) or c["from"]
            elif c["from"] is not None and given.get(c["argument"]):
                # the launched side as the files spell it, not placement's spelling of what they run (a user trial:
                # `- --cuda-graph-modules attn` for a script passing `attn mlp`)
                c["from"] = given[c["argument"]]
        if given:  # a change the files' own spelling already makes is none
            changes = [c for c in changes if not (c["from"] is not None and c["to"] is not None
                                                  and c["argument"] in given and same_value(c["from"], c["to"]))]
        if framework == "maxtext":  # a default the best plan leaves out, or a key the files do not have, changes
            # nothing (a user trial's list removed the fifteen custom remat keys placement would spell the launched
            # minimal policy with, none of which the file had)
            changes = [c for c in changes if not (c["to"] is None and (
                (c.get("note") or "").endswith(BASE_DEFAULT) or c.get("note") == NOT_IN_FILES))]
        if framework == "maxtext":  # a key the best plan adds that the files already state (a user trial's
            # `+ scan_layers false` beside llama2_7b.yml's scan_layers: false) is no change, or changes their value
            kept = []
            for c in changes:
                stated = runs(c["argument"]) if c["from"] is None else c["from"]
                if stated is not None and stated.lower() == str(c["to"]).lower():
                    continue
                kept.append(c if stated is None else {**c, "from": stated})
            changes = kept
        if framework == "torchtitan":  # the launched side as the files write it, then every degree whose product
            # torchtitan asserts is the world size
            changes = torchtitan_stated_changes(changes, b, live)
            changes = torchtitan_world_degrees(changes, b, job, spelled)
        if framework == "megatron":  # a flag the best plan adds that the launch already passes is no change (the
            # running command's arguments where the audit read them: a flag in a branch that does not run is not
            # passed, a review's --use-megatron-fsdp under USE_MEGATRON_FSDP=0)
            passed = ({f for f, _ in job.command_args}.__contains__ if job is not None and job.command_args
                      else lambda flag: megatron_flag_in(flag, live))
            changes = [c for c in changes if not (c["from"] is None and c["to"] == "true" and passed(c["argument"]))]
            _moe_fusion_pair(changes, b, passed)
        if framework == "megatron":
            split_flags = (*STATED_SPLIT_FLAGS, "--pipeline-model-parallel-layout")
            _megatron_stated_split(changes, {f: v for f in split_flags
                                             if (v := stated_flag_value(f, live)) is not None})
            _megatron_virtual_flags(changes, b, files_text)
            _megatron_dropped_switches(changes, best, live)
            _megatron_recompute_switch(changes, b, live)
            _megatron_fsdp_only(changes, b, live)
            _megatron_optimizer_instances(changes, b, job)
            changes = _env_from_files(changes, live)
            _megatron_fsdp_connections(changes, b, live, job.device_max_connections if job else None,
                                       job is not None and bool(job.command_args))
            changes = _megatron_stated_values(changes, live, job.command_args if job and job.command_args else None)
        key = GLOBAL_BATCH.get(framework)
        if key and key in b and a.get(key) == b.get(key) and _token(framework, key) not in files_text:
            changes.append({"argument": key, "from": None, "to": b[key],
                            "note": "the launch files leave the global batch to the framework, which derives it "
                                    "from the layout this plan changes"})
    if now.plan.layout.pp == 1 and best.plan.layout.pp == 1:  # no pipeline on either side: its keys change nothing
        if framework == "torchtitan" and torchtitan is None and files_text is not None:
            # the written file's own flags: said, as changing nothing that runs (a QA run: --out rewrote the files'
            # pipeline_parallel_microbatch_size 2 as 1 with no word in the change list)
            for c in changes:
                if any(k in c["argument"] for k in PIPELINE_ONLY):
                    c["note"] = PIPELINE_ONLY_NOTE
        else:
            changes = [c for c in changes if not any(k in c["argument"] for k in PIPELINE_ONLY)]
    # the job's ranks as its launcher numbers them, which the best plan's files number as placement does (a QA run:
    # under --use-tp-pp-dp-mapping the list read `- node order host0 host0` and `- CUDA_VISIBLE_DEVICES
    # 0,1,4,5,0,1,4,5`, placement's rank order spelled as node ranks, for a job whose ranks move nowhere)
    launched = now.gpu_of_rank if launched_gpu is None else np.asarray(launched_gpu)
    gph = now.topo.gpus_per_host
    ha = [now.topo.host_names[h] for h in (launched[::gph] // gph)]
    hb = best.hosts_in_rank_order
    if ha != hb:
        moved = sum(x != y for x, y in zip(ha, hb, strict=True))
        changes.append({"argument": NODE_ORDER, "from": " ".join(ha[:SHOWN_HOSTS]) + (" ..." if len(ha) > SHOWN_HOSTS
                                                                                        else ""),
                        "to": " ".join(hb[:SHOWN_HOSTS]) + (" ..." if len(hb) > SHOWN_HOSTS else ""),
                        "note": f"{moved} of {len(ha)} node ranks move; --out DIR writes the full order"})
    local_a, local_b = launched % gph, best.gpu_of_rank % gph
    if not np.array_equal(local_a, local_b):
        changes.append({"argument": CUDA_DEVICES, "from": ",".join(map(str, local_a[:gph])),
                        "to": ",".join(map(str, local_b[:gph])),
                        "note": "GPU order inside each node (first node shown; --out DIR writes every node's)"})
    return changes


_FLAG = r"(?<![\w-])(--[a-z][a-z0-9_-]*)"
"""A command-line flag in a launch file (Megatron-LM reads `--foo_bar` as `--foo-bar`: normalised by the readers)."""


def _flags(text: str) -> list[str]:
    return [f.replace("_", "-") for f in re.findall(_FLAG, uncommented(text))]


def megatron_flags_not_carried(job_args: Sequence[tuple[str, str | None]], written: str,
                               changes: list[dict]) -> list[str]:
    """The Megatron-LM flags the job's training command passes (LaunchLayout.command_args) that the megatron.sh
    written for its best plan does not, in the command's order, but for those the change list removes on purpose (a
    user trial: the written file dropped --moe-router-load-balancing-type aux_loss and --moe-aux-loss-coeff 1e-3, so
    it trained without the job's load balancing loss, and no line said so).  The command as the shell runs it: a
    profiler's options on its line and an `if` branch not taken are not the job's arguments (a later trial)."""
    removed = {c["argument"] for c in changes if c["to"] is None}
    ours = set(_flags(written))
    out = []
    for flag, _ in job_args:
        if flag not in ours and flag not in removed and flag not in out and flag not in LAUNCHER_FLAGS:
            out.append(flag)
    return out


def megatron_values_changed(job_args: Sequence[tuple[str, str | None]], written: str,
                            changes: list[dict]) -> list[dict]:
    """[{"argument", "job", "written"}]: the Megatron-LM flags the job's training command and the written megatron.sh
    both pass with a literal value each, the values differing, where the change list does not name the flag (a user
    trial: the written file set --max-position-embeddings 4096 where the job's had 40960, unsaid).  A value the
    script takes from a variable is not compared."""
    named = {c["argument"] for c in changes}
    ours = written_arguments(written)
    last = dict(job_args)  # argparse keeps a repeated flag's last value (a review: the first was compared)
    out = []
    for flag, value in last.items():
        if value is None or flag in named or flag in LAUNCHER_FLAGS or not ours.get(flag):
            continue
        if not same_value(ours[flag], value):
            out.append({"argument": flag, "job": value, "written": ours[flag]})
    return out


def written_arguments(written: str) -> dict[str, str | None]:
    """The flags of a megatron.sh placement wrote (its PLACEMENT_ARGS array, as the shell splits it; without one, its
    command lines), each with its values space-separated (None for a switch).  A user trial: a pattern over the text
    read the array's closing `)` into its last value (`--moe-router-topk-scaling-factor 2.5)`) and one word of a list
    (`--cuda-graph-modules attn` of `attn mlp`)."""
    array = re.search(r"^PLACEMENT_ARGS=\((.*)\)$", written, re.M)
    # else its command lines, one at a time: a flag's values end with its line (not the next line's `export ...`)
    lines = [array.group(1)] if array else uncommented(written).replace("\\\n", " ").splitlines()
    out: dict[str, str | None] = {}
    for line in lines:
        try:
            words = shlex.split(line)
        except ValueError:  # an unbalanced quote: words as they stand
            words = line.split()
        flag = None
        for w in words:
            if w.startswith("--"):
                flag = w.replace("_", "-")
                out[flag] = None
            elif flag is not None:
                out[flag] = w if out[flag] is None else f"{out[flag]} {w}"
    return out


def same_value(a: str, b: str) -> bool:
    """One value spelled two ways: `0` and `0.0`, `1e-3` and `0.001`; `RMSNorm` and Megatron-DeepSpeed's `rmsnorm`
    (the same choice, in another case); `([0]*3+[1]*58)` and `[0]*3+[1]*58` (one Python expression, which
    --moe-layer-freq evaluates)."""
    def bare(v: str) -> str:  # words kept apart (`attn mlp` is not `attnmlp`); an expression's spaces dropped
        v = " ".join(v.split()).casefold()
        if v.startswith(("(", "[")):
            v = "".join(v.split())
        return v[1:-1] if v.startswith("(") and v.endswith(")") else v

    if bare(a) == bare(b):
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


LAUNCHER_FLAGS = frozenset({"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port",
                            "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--rdzv-conf", "--standalone",
                            "--max-restarts", "--monitor-interval", "--nodes", "--ntasks-per-node", "--gpus-per-node",
                            "--container-image", "--container-mounts", "--exclusive", "--job-name", "--output",
                            "--error", "--time", "--partition", "--account", "--mem", "--cpus-per-task",
                            "--gres", "--ntasks", "--mpi", "--export", "--no-container-mount-home"})
"""torchrun's and SLURM's own flags (the launcher's, not Megatron-LM's), which the written file's launch lines state
their own way."""


PIPELINE_ONLY = ("pipeline_parallel_microbatch_size", "pipeline_parallel_schedule", "pipeline_parallel_microbatches")
"""Spellings of torchtitan settings that only a pipeline reads (its micro-batch size or count, its schedule): with no
pipeline before or after the change they are no change (a user trial saw the micro-batch size listed at pp 1)."""


PIPELINE_ONLY_NOTE = ("torchtitan reads it only under pipeline parallelism, which neither plan has: the written "
                      "file's value, changing nothing that runs")


def _torchtitan_key(flag: str) -> str:
    """A torchtitan 0.3.0 flag as tyro reads it, `-` and `_` alike (`--compile.no-enable-async-tensor-parallel`)."""
    return flag.replace("-", "_")


def torchtitan_stated(live: str) -> dict[str, str]:
    """{flag (_torchtitan_key): value} that the launch text's torchtitan 0.3.0 command lines give (`--flag V`,
    `--flag=V`, a bare switch "true", `activation-checkpoint:MODE`), a line continued with `\\` read as one."""
    out: dict[str, str] = {}
    for line in live.replace("\\\n", " ").splitlines():
        if "torchtitan" not in line and "--parallelism." not in line and "--training." not in line:
            continue
        try:
            tokens = shlex.split(line)
        except ValueError:  # an unbalanced quote: the words as they stand
            tokens = line.split()
        out |= {_torchtitan_key(k): v for k, v in _settings(tokens).items()}
    return out


def torchtitan_stated_changes(changes: list[dict], best: dict[str, str], live: str) -> list[dict]:
    """torchtitan 0.3.0 flags: each change's launched side as the files write it, not placement's spelling of the
    launched layout (a QA run: `- --parallelism.pipeline_parallel_schedule Interleaved1F1B` for a file running
    ZBVZeroBubble), a flag the files state that the best plan's file writes with another value listed too (the same
    placement spelling on both sides hid it), and no change where the files already write the best plan's value.
    The degrees torchtitan multiplies to the world size are torchtitan_world_degrees' (a shard degree of -1 that
    resolves to the best plan's is no change)."""
    stated = torchtitan_stated(live)
    out = []
    for c in changes:
        given = stated.get(_torchtitan_key(c["argument"]))
        if c["from"] is not None and given is not None:
            c = {**c, "from": given}
        if c["from"] is not None and c["to"] is not None and same_value(c["from"], c["to"]):
            continue
        out.append(c)
    listed = {_torchtitan_key(c["argument"]) for c in changes}
    degrees = {_torchtitan_key("--" + d) for d in WORLD_DEGREES}
    for flag, value in best.items():
        key = _torchtitan_key(flag)
        given = stated.get(key)
        if key in listed or key in degrees or given is None or same_value(given, value):
            continue
        out.append({"argument": flag, "from": given, "to": value})
    _subcommand_text(out)
    return out


def stated_flag_value(flag: str, text: str) -> str | None:
    """The one value the launch text gives Megatron-LM's `flag` (`--flag V` or `--flag=V`), or None: a one-line
    argument list holds the next flags after it on the same line, so the value ends at whitespace."""
    stated = re.search(rf"{re.escape(flag)}(?:=|[ \t]+)([^\s\\#]+)", text)
    return stated.group(1).strip() if stated else None


VIRTUAL_PIPELINE_FLAGS = ("--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
                          "--pipeline-model-parallel-layout")
"""Megatron-LM's three ways of stating the virtual pipeline, of which it takes at most one (megatron/training/
arguments.py validate_args asserts it)."""


def _megatron_virtual_flags(changes: list[dict], best: dict[str, str], files_text: str) -> None:
    """Where the best plan's virtual pipeline changes, drop the one the launch files state another way: placement
    spells the launched side its own way, so a file with --num-layers-per-virtual-pipeline-stage would keep it beside
    the best plan's flag, which Megatron-LM refuses."""

    if not any(c["argument"] in VIRTUAL_PIPELINE_FLAGS for c in changes):
        return
    for flag in VIRTUAL_PIPELINE_FLAGS:
        if flag in best or any(c["argument"] == flag for c in changes):
            continue
        stated = stated_flag_value(flag, files_text)
        if stated is not None:
            changes.append({"argument": flag, "from": stated, "to": None,
                            "note": "Megatron-LM takes one of " + ", ".join(VIRTUAL_PIPELINE_FLAGS) + " (arguments.py "
                                    "validate_args): the files' own must go for the one this plan writes"})


STATED_SPLIT_FLAGS = ("--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers")
"""Megatron-LM's uneven-split flags: the audit prices them as the pipeline layout Megatron-Core builds
(audit.core._megatron_launched_split), which the launched side's arguments then spell as a layout."""


def _megatron_stated_split(changes: list[dict], stated: dict[str, str]) -> None:
    """Where the launch files state their split with STATED_SPLIT_FLAGS (`stated`: flag -> value as written) and no
    layout, the launched side's --pipeline-model-parallel-layout is placement's spelling of that split: the change
    is to those flags, which go (a best plan that writes its own split names it), not to a layout the files never
    pass (a user trial: `- --pipeline-model-parallel-layout Et*6|...` for a script of --decoder-first/last flags)."""
    flags = {f: v for f, v in stated.items() if f in STATED_SPLIT_FLAGS}
    if not flags or "--pipeline-model-parallel-layout" in stated:
        return
    for c in [c for c in changes if c["argument"] == "--pipeline-model-parallel-layout" and c["from"] is not None]:
        if c["to"] is None:
            changes.remove(c)
        else:
            c["from"] = None
            c.pop("note", None)
    for flag, value in flags.items():
        c = next((c for c in changes if c["argument"] == flag), None)
        if c is None:
            changes.append({"argument": flag, "from": value, "to": None})
        elif c["to"] == value:
            changes.remove(c)
        else:
            c["from"] = value
            c.pop("note", None)


def _megatron_optimizer_instances(changes: list[dict], best: dict[str, str], job) -> None:
    """`- --num-distributed-optimizer-instances N` where the launch passes N > 1 and the best plan's files do not write
    it: they shard over the whole data-parallel group, so the flag would keep the job on its hybrid (HSDP) sharding
    or partial distributed optimizer, which the best plan is not priced with (a QA trial: a Megatron-FSDP job with 4
    instances was told to change its micro-batch and strategy and keep the flag)."""
    flag = "--num-distributed-optimizer-instances"
    if job is None or not job.command_args or flag in best or any(c["argument"] == flag for c in changes):
        return
    value = next((v for f, v in reversed(job.command_args) if f == flag), None)
    if value is not None and value.strip() not in ("1", ""):
        changes.append({"argument": flag, "from": value, "to": None,
                        "note": "the best plan shards over the whole data-parallel group"})


DROPPED_SWITCHES = {
    "--no-async-tensor-model-parallel-allreduce": (
        "tp_async_backward",
        "Megatron-Core runs each column-parallel input-gradient collective beside the weight-gradient GEMM, as this "
        "plan is priced; the switch that turned it off is gone from Megatron-LM since 2024 (placement's files target "
        "megatron-core 0.19.2, which refuses it)"),
    "--moe-shared-expert-overlap": (
        "ep_comm_overlap",
        "Megatron-Core refuses it beside --overlap-moe-expert-parallel-comm, which this plan runs (megatron-core "
        "0.19.2 transformer/transformer_config.py:2706-2708: 'disable moe_shared_expert_overlap when enabling "
        "overlap_moe_expert_parallel_comm'; Megatron-Bridge training/comm_overlap.py:513-515 too); placement does "
        "not price it"),
}
"""Megatron-LM switches a launch passes that turn off what the best plan is priced with, which placement's files
never write (the Megatron-LM they target has no such flag): flag -> (the Recipe field it turns off, why it goes).
Without this, the change list would leave the flag in and the job would not run what the best plan prices."""


def _env_from_files(changes: list[dict], live: str) -> list[dict]:
    """An environment variable's change from the value the launch files set (their last `NAME=value`), or from
    nothing where they set none: placement's spelling of the launched layout says what placement's files would
    export, which a user trial found contradicting the script's own `export CUDA_DEVICE_MAX_CONNECTIONS=1`."""
    out = []
    for c in changes:
        if c["argument"].startswith("env "):
            name = c["argument"][4:]
            set_to = re.findall(rf"(?<![\w$]){re.escape(name)}=[\"']?([^\s\"';]*)", live)
            # `NAME=${NAME:-1}` sets 1 unless the environment has it: the value the files give is the default
            given = [re.sub(rf"^\$\{{{re.escape(name)}:?-([^}}]*)\}}$", r"\1", v) for v in set_to]
            c = {**c, "from": given[-1] if given else None}
            c.pop("note", None)
            if c["from"] == c["to"]:
                continue
        out.append(c)
    return out


BRIDGE_VPP_WITH_LAYOUT = ("Megatron-Core asserts a stated virtual_pipeline_model_parallel_size equals the stages of "
                          "pipeline_model_parallel_layout over pipeline_model_parallel_size (transformer/"
                          "transformer_config.py:2275-2287 at d98e8a64dd; null takes the layout's)")


def _bridge_stated_vpp(changes: list[dict], best: EmitContext, stated: dict[str, str]) -> None:
    """The config's own model.virtual_pipeline_model_parallel_size where the best plan runs another: placement's files
    spell a pipeline layout without the virtual size, so where both sides run a layout no flag change names it, and
    the config would keep its old size beside a layout of another (a QA run: the saved DeepSeek-V3 config, pp 8 x vpp
    4 with `Et|(tt|)*30mL`, best plan pp 4 x vpp 8, was told to change pp alone, which Megatron-Core refuses at
    start: BRIDGE_VPP_WITH_LAYOUT)."""
    flag, key = "--num-virtual-stages-per-pipeline-rank", "model.virtual_pipeline_model_parallel_size"
    value = stated.get(key, "null")
    vpp = best.plan.layout.vpp
    if value == "null" or any(c["argument"] == flag for c in changes) or value == str(vpp):
        return
    changes.append({"argument": flag, "from": value, "to": str(vpp) if vpp > 1 else None,
                    "note": BRIDGE_VPP_WITH_LAYOUT})


def _bridge_dropped_switches(changes: list[dict], best: EmitContext, stated: dict[str, str]) -> None:
    """The DROPPED_SWITCHES a Megatron-Bridge config sets true (its field of the flag's name) where the best plan runs
    what they turn off: a removal of the flag, which bridge_changes names as the config's field set false (a review:
    a DeepSeek-V3 config with model.moe_shared_expert_overlap true got comm_overlap.overlap_moe_expert_parallel_comm
    true and kept it, a config Megatron-Bridge and Megatron-Core refuse)."""
    recipe = best.plan.recipe_spec()
    for flag, (field, why) in DROPPED_SWITCHES.items():
        if getattr(recipe, field) and any(stated[k] == "true" for k in _bridge_keys(flag, stated)) \
                and not any(c["argument"] == flag for c in changes):
            changes.append({"argument": flag, "from": "true", "to": None, "note": why})


MOE_FUSION_NOTE = ("the best plan is priced with both MoE fusions, and Megatron-Core runs each only where its own "
                   "switch is on (TransformerConfig.moe_permute_fusion, moe_router_fusion: default False)")


def _moe_fusion_pair(changes: list[dict], best: dict[str, str], passed: Callable[[str], bool]) -> None:
    """The MoE fusion switch the best plan writes (placement writes --moe-permute-fusion with --moe-router-fusion)
    that the launch does not pass, where it passes the other: the launched side is read as one field from
    --moe-permute-fusion (readers.megatron.MOE_FUSION_FLAGS), so no diff names it (a review: a DeepSeek-V3 job with
    --moe-permute-fusion alone got a best plan priced with the fused router and no --moe-router-fusion to add)."""
    for flag in ("--moe-permute-fusion", "--moe-router-fusion"):
        if best.get(flag) == "true" and not passed(flag) and not any(c["argument"] == flag for c in changes):
            changes.append({"argument": flag, "from": None, "to": "true", "note": MOE_FUSION_NOTE})


def _megatron_dropped_switches(changes: list[dict], best: EmitContext, live: str) -> None:
    """Remove the DROPPED_SWITCHES the launch files pass where the best plan runs what they turn off."""
    recipe = best.plan.recipe_spec()
    for flag, (field, why) in DROPPED_SWITCHES.items():
        if getattr(recipe, field):
            _drop_switch(changes, flag, live, why)


def _drop_switch(changes: list[dict], flag: str, live: str, why: str) -> None:
    """A removal of `flag`, with why, where the launch files pass it and the change list does not name it yet."""
    if megatron_flag_in(flag, live) and not any(c["argument"] == flag for c in changes):
        changes.append({"argument": flag, "from": "true", "to": None, "note": why})


RECOMPUTE_SWITCH = ("Megatron-LM sets recompute_granularity 'selective' wherever --recompute-activations is passed, "
                    "after parsing and over any --recompute-granularity (megatron/training/arguments.py validate_args, "
                    "core_v0.19.0 :589-591): kept, the job recomputes selectively whatever this plan writes")
"""Why a best plan without selective recompute removes the files' --recompute-activations (a trial: a Llama-3 70B
script's --recompute-activations stayed under `- --recompute-granularity selective`, a line the files do not have,
so the changed job still recomputed)."""


def _megatron_recompute_switch(changes: list[dict], best: dict[str, str], live: str) -> None:
    """Remove the launch files' --recompute-activations where the best plan runs other than selective recompute."""
    if best.get("--recompute-granularity") != "selective":
        _drop_switch(changes, "--recompute-activations", live, RECOMPUTE_SWITCH)


MEGATRON_FSDP_ONLY = {
    "--fsdp-manual-registration": "Megatron-LM asserts it runs only under Megatron-FSDP (arguments.py:1189-1191 at "
                                  "d98e8a64dd: 'FSDP manual registration is only supported with Megatron FSDP.')",
}
"""Megatron-LM flags a launch under Megatron-FSDP may pass that Megatron-LM refuses without it, which placement's files
never write: a best plan without Megatron-FSDP must drop them too (a user trial's change list removed
--use-megatron-fsdp and left --fsdp-manual-registration, a job that does not start)."""


TORCH_FSDP2_DROPPED = ("this plan runs no FSDP, and placement's files never run torch FSDP2: kept, it shards weights, "
                       "gradients and optimizer state (ZeRO-3) whatever else the plan writes, and Megatron-LM refuses "
                       "it beside the distributed optimizer ('--use-torch-fsdp2 is not supported with MCore's "
                       "distributed optimizer', megatron/training/arguments.py:1038 at d98e8a64dd), beside which "
                       "Megatron-Bridge's FSDP2 model holds no shard to update (optimizer/__init__.py "
                       "_get_param_groups_and_buffers)")
"""Why a best plan without Megatron-FSDP removes the launch's torch FSDP2 (a QA run: a Megatron-LM script and a saved
Megatron-Bridge config with it were told to add the distributed optimizer for a ZeRO-1 plan and kept FSDP2 on)."""


def _megatron_fsdp_only(changes: list[dict], best: dict[str, str], live: str) -> None:
    """Remove the MEGATRON_FSDP_ONLY flags the launch files pass, and torch FSDP2 (TORCH_FSDP2_DROPPED), where the best
    plan runs no Megatron-FSDP."""
    if "--use-megatron-fsdp" in best:
        return
    for flag, why in MEGATRON_FSDP_ONLY.items():
        _drop_switch(changes, flag, live, why)
    _drop_switch(changes, "--use-torch-fsdp2", live, TORCH_FSDP2_DROPPED)


def _megatron_fsdp_connections(changes: list[dict], best: dict[str, str], live: str,
                               job_connections: str | None = None, job_read: bool = False) -> None:
    """Where the best plan runs FSDP and the launch sets CUDA_DEVICE_MAX_CONNECTIONS=1, which Megatron-LM refuses
    under it (audit.core.CONNECTIONS_CHECK) and placement's files leave unset: its removal (a user trial's change list
    to Megatron-FSDP kept the script's `export CUDA_DEVICE_MAX_CONNECTIONS=${...:-1}`, and the audit refused it).
    `job_read`: the value is the running command's as the audit read it (`job_connections`, None where it sets none),
    not the files' last `NAME=value`, which may sit in a branch that does not run."""
    name = "env CUDA_DEVICE_MAX_CONNECTIONS"
    if not any(f in best for f in ("--use-megatron-fsdp", "--use-torch-fsdp2")) or name in best \
            or any(c["argument"] == name for c in changes):
        return
    if job_read:
        value = job_connections
    else:
        set_to = _env_from_files([{"argument": name, "from": None, "to": None}], live)
        value = set_to[0]["from"] if set_to else None
    if value == "1":
        changes.append({"argument": name, "from": "1", "to": None,
                        "note": "Megatron-LM refuses 1 under FSDP ('FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or "
                                "unset', megatron/training/arguments.py validate_args): unset it, as placement's files "
                                "do, or set it above 1"})


STATED_UNFIXED = "the launch passes it already, with a value the files leave open: replace that one"


def _megatron_stated_values(changes: list[dict], live: str,
                            job_args: Sequence[tuple[str, str | None]] | None = None) -> list[dict]:
    """A flag the best plan writes that the launch already passes with a value: the change is from that value (a
    user trial: `--ckpt-format` shown as added to a script passing `--ckpt-format torch_dist`, which then kept both,
    argparse taking the later), and no change where it is the value the best plan writes.  `job_args`: the running
    command's arguments as the audit read them (LaunchLayout.command_args: a value the files do not fix is None),
    not a flag's text anywhere in the files, which may sit in a branch that does not run (a review)."""
    given = dict(job_args) if job_args is not None else None
    out = []
    for c in changes:
        if c["argument"].startswith("--") and c["from"] is None and c["to"] not in (None, "true"):
            if given is not None:
                if c["argument"] not in given:
                    out.append(c)
                    continue
                stated = given[c["argument"]]
                if stated is None:
                    out.append({**c, "note": STATED_UNFIXED})
                    continue
            else:
                stated = stated_flag_value(c["argument"], live)
            if stated is not None and stated.strip("'\"") == c["to"]:
                continue
            if stated is not None:
                c = {**c, "from": stated}
        out.append(c)
    return out


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


PRE3_STRINGS = frozenset({"parallelism.fsdp_reshard_after_forward", "parallelism.pipeline_parallel_schedule",
                          "activation_checkpoint.mode", "activation_checkpoint.selective_ac_option"})
"""JobConfig keys (by their newest name) whose TOML value is a string, quoted; the others placement writes are
integers."""


def _pre3_names(flag: str) -> tuple[str, ...]:
    """The JobConfig keys that state the setting of one of placement's 0.3.0 flags, newest first: its own dotted key
    (`activation-checkpoint:MODE` is activation_checkpoint.mode), then its older names (readers.torchtitan
    OLDER_NAMES), and for the micro-batch size the keys that counted micro-batches before it (MICROBATCH_COUNTS)."""
    from placement.audit.readers.torchtitan import MICROBATCH_COUNTS, OLDER_NAMES

    key = "activation_checkpoint.mode" if flag == "activation-checkpoint" else flag.removeprefix("--")
    counts = MICROBATCH_COUNTS if key == "parallelism.pipeline_parallel_microbatch_size" else ()
    return (key, *OLDER_NAMES.get(key, ()), *counts)


PRE3_DROPPED = frozenset({"--module", "--config", "--compile.no-enable-async-tensor-parallel"})
"""0.3.0 settings the change list leaves out for older material: --module/--config name the files' own model (their
[model] name and flavor), which the best plan keeps; async TP is priced off in both plans (its collectives exposed),
so the files' own setting, noted as not modelled, is no change the plan asks for."""
PRE3_NO_KEY = {
    "--parallelism.no-enable-sequence-parallel": (
        "sequence parallelism", "off", "on", "torchtitan before 0.3.0 has no key for it: its TP always shards the "
                                             "sequence (v0.2.2 models/llama3/infra/parallelize.py apply_tp); only "
                                             "0.3.0 turns it off"),
    "--training.disable_cuda_graphs": (
        "CUDA graphs", "off", "full", "torchtitan before 0.3.0 has no CUDA graphs (0.3.0 trainer.py "
                                      "wrap_with_cuda_graph)"),
}
"""placement's 0.3.0 switches no key before 0.3.0 takes -> (the setting in words, its value with the flag, without it,
the change's note)."""
ACCUMULATION = ("torchtitan before 8570415c (2025-06-05) has no gradient accumulation and no "
                "training.global_batch_size: it trains local batch x dp sequences a step")
SELECTIVE_OP = ("torchtitan before 0.3.0 runs selective checkpointing as selective_ac_option says: the default \"2\" "
                "fully checkpoints every second block, \"op\" is the per-op policy the plan prices (v0.2.2 "
                "distributed/activation_checkpoint.py)")


def _pre3_name(names: tuple[str, ...], stated: dict[str, tuple[str, str]], lo: int, hi: int
               ) -> tuple[str | None, str | None]:
    """(the key of `names` the files' torchtitan takes, or None; the caveat where their keys leave that open): the
    one they state, else the newest whose JobConfig span (SPANS) meets the versions their keys allow (JobConfig
    versions lo..hi of HISTORY)."""
    from placement.audit.readers.torchtitan import JOBCONFIG_DATES, JOBCONFIG_ORDER
    from placement.audit.readers.torchtitan_keys import SPANS

    for n in names:
        if n in stated:
            return n, None
    fits = [n for n in names if n in SPANS and JOBCONFIG_ORDER[SPANS[n][0]] <= hi
            and JOBCONFIG_ORDER[SPANS[n][1]] >= lo]
    if not fits:
        return None, None
    name, first = fits[0], SPANS[fits[0]][0]
    if JOBCONFIG_ORDER[first] <= lo:
        return name, None
    older = f", before it {' or '.join(fits[1:])}" if fits[1:] else ", no key before it"
    return name, (f"torchtitan {first} ({JOBCONFIG_DATES[first]}) or later{older}; the files' keys do not show "
                  f"which their torchtitan is")


def _pre3_flag(key: str, stated: dict[str, tuple[str, str]]) -> str:
    """`key` as a 0.2.x flag, dashed where the files' flags are (tyro reads `-` as `_`)."""
    flags = [how for _, how in stated.values() if how.startswith("--")]
    dashed = any("-" in f[2:] for f in flags) and not any("_" in f for f in flags)
    return "--" + (key.replace("_", "-") if dashed else key)


def _accumulation(settings: dict[str, str]) -> int:
    """The gradient-accumulation steps of placement's 0.3.0 flags: global batch / (local batch x dp)."""
    dp = (int(settings.get("--parallelism.data_parallel_replicate_degree", "1"))
          * int(settings.get("--parallelism.data_parallel_shard_degree", "1")))
    return int(settings["--training.global_batch_size"]) // (int(settings["--training.local_batch_size"]) * dp)


Spelled = tuple[str | None, str, str | None, str | None]
"""A setting in the keys of the files' torchtitan: (its JobConfig key, None for a setting no key takes; its value as
the files would write it; the note; what it requires of the version)."""


def torchtitan_pre3_settings(settings: dict[str, str], stated: dict[str, tuple[str, str]], form: str
                             ) -> dict[str, Spelled]:
    """placement's 0.3.0 flags (framework_settings) in the keys of the torchtitan the files run (TOML files or 0.2.x
    flags; LaunchLayout.torchtitan_stated and torchtitan_form), by the argument the change list names.  Each setting
    takes the name the files' torchtitan has (_pre3_names, by the files' own key or their version:
    readers.torchtitan.version_window), as the files state it: their own key where they state it, else a TOML
    `section.key` where a TOML file states the job, a 0.2.x flag where flags alone do.  A setting no key of that
    torchtitan takes is named in words, with a note saying so."""
    from placement.audit.readers.torchtitan import JOBCONFIG_DATES, JOBCONFIG_ORDER, MICROBATCH_COUNTS, version_window
    from placement.audit.readers.torchtitan_keys import SPANS

    newest, oldest = version_window(stated)
    lo = JOBCONFIG_ORDER[newest[1]] if newest else 0
    hi = JOBCONFIG_ORDER[oldest[1]] if oldest else len(JOBCONFIG_ORDER) - 1
    out: dict[str, Spelled] = {}

    def put(key: str, value: str, string: bool, note: str | None = None, requires: str | None = None) -> None:
        how = stated[key][1] if key in stated else "toml" if form == "toml" else _pre3_flag(key, stated)
        out[key if how == "toml" else how] = (key, f'"{value}"' if how == "toml" and string else value, note,
                                              requires)

    for flag, value in settings.items():
        if flag in PRE3_DROPPED or flag in PRE3_NO_KEY:
            continue
        names = tuple(n for n in _pre3_names(flag) if n in SPANS)
        name, requires = _pre3_name(names, stated, lo, hi)
        if name is None and flag == "--training.global_batch_size":
            out["gradient accumulation"] = (None, str(_accumulation(settings)), ACCUMULATION, None)
        elif name is None and names:
            added = min(names, key=lambda n: JOBCONFIG_ORDER[SPANS[n][0]])
            first = SPANS[added][0]
            out[f"{names[0]} (no key before {first})"] = (
                None, value, f"no key of the files' torchtitan takes it: their keys date it before {first} "
                             f"({JOBCONFIG_DATES[first]}), whose JobConfig added {added}", None)
        elif name is None:
            out[f"{flag} (torchtitan 0.3.0)"] = (None, value, "no key of torchtitan before 0.3.0 takes it", None)
        else:
            if flag == "--parallelism.pipeline_parallel_microbatch_size":  # older keys count the local batch's
                count = str(int(settings["--training.local_batch_size"]) // int(value))
                value = count if name in MICROBATCH_COUNTS else value
                for key in MICROBATCH_COUNTS:
                    requires = requires and requires.replace(key, f"{key} {count} (the micro-batch count)")
            put(name, value, _pre3_names(flag)[0] in PRE3_STRINGS, requires=requires)
            if name == "activation_checkpoint.mode" and value == "selective":
                put("activation_checkpoint.selective_ac_option", "op", True, SELECTIVE_OP)
    for flag, (words, on, off, note) in PRE3_NO_KEY.items():
        if flag in settings:
            out[words] = (None, on, note, None)
        elif flag != "--parallelism.no-enable-sequence-parallel" or int(
                settings.get("--parallelism.tensor_parallel_degree", "1")) > 1:
            out[words] = (None, off, note, None)
    return out


PRE3_DEFAULTS = {"parallelism.pipeline_parallel_first_stage_less_layers": 1,
                 "parallelism.pipeline_parallel_last_stage_less_layers": 1,
                 "parallelism.pipeline_parallel_microbatch_size": 1,
                 "parallelism.pipeline_parallel_schedule": "1F1B",
                 "parallelism.fsdp_reshard_after_forward": "default",
                 "training.local_batch_size": 8, "training.seq_len": 2048,
                 "parallelism.data_parallel_replicate_degree": 1, "parallelism.data_parallel_shard_degree": -1,
                 "parallelism.tensor_parallel_degree": 1, "parallelism.pipeline_parallel_degree": 1,
                 "parallelism.context_parallel_degree": 1}
"""torchtitan's own values of keys the change list may name where the files leave them out (v0.2.2
config/job_config.py:336, 377, 383, 396, 412; the batch, sequence and degrees :253, 261, 313, 324, 351, 360, 428): the
job runs these, so a change starts from them.  A user trial's
best plan wrote layers_per_stage 1 over pp 8 beside first/last_stage_less_layers left at their default 1: 82 virtual
stages, which torchtitan refuses (not divisible by pp), while placement's own spelling of the launched side (0 and
0) hid the change."""
PRE3_DEFAULT_NOTE = "not in the launch files: torchtitan's default"
WORLD_DEGREES = ("parallelism.data_parallel_replicate_degree", "parallelism.data_parallel_shard_degree",
                 "parallelism.context_parallel_degree", "parallelism.tensor_parallel_degree",
                 "parallelism.pipeline_parallel_degree")
"""The degrees whose product torchtitan asserts is the world size, by their newest names: data_parallel_shard_degree
-1 takes world // (dp_replicate * cp * tp * pp), then "Invalid parallel dims: dp_replicate(..) * dp_shard(..) * cp(..)
* tp(..) * pp(..) != WORLD_SIZE(..)" (v0.2.2 distributed/parallel_dims.py:48-56)."""


def _degrees_left(running: list[int], target: list[int], never: bool) -> list[int]:
    """The indices of WORLD_DEGREES whose value the job still runs (`running`: each change's value, else the files',
    else torchtitan's default; -1 for dp_shard's "the rest") where the best plan's `target` needs another: none where
    the degrees torchtitan then builds (dp_shard -1 resolved as parallel_dims resolves it) are the best plan's, or
    under its ZeRO-2 (`never`: resharding "never") split its dp as replicas x shards another way, which placement
    prices the same (HSDP without resharding is ZeRO-2 over them all: readers.torchtitan).  A dp_shard of -1 is never
    one of them: it takes what the others leave."""
    world = int(np.prod(target))
    built = list(running)
    rest = int(np.prod([v for i, v in enumerate(built) if i != 1]))
    if built[1] == -1 and rest and world % rest == 0:
        built[1] = world // rest
    split = never and built[2:] == target[2:] and built[0] * built[1] == target[0] * target[1]
    if built == target or split:
        return []
    return [i for i, (v, t) in enumerate(zip(running, target, strict=True)) if v not in (-1, t)]


def _world_degrees(out: list[dict], b: dict[str, Spelled], stated: dict[str, tuple[str, str]]) -> None:
    """Add to the changes `out` every degree the files state that the job must change to run the best plan `b`
    (_degrees_left).  A stated degree no change names keeps the files' value, which placement's spelling of the
    launched plan may not be (HSDP without resharding is priced as ZeRO-2 over replicas x shards and spelled
    data_parallel_replicate_degree 1).  A user trial's best plan, dp 4 as dp_shard 4, changed
    data_parallel_shard_degree -1 -> 4, cp 1 -> 4 and pp 8 -> 32 and left the files' data_parallel_replicate_degree
    = 4: 16384 ranks on 4096 GPUs, which torchtitan refuses."""
    from placement.audit.readers.torchtitan import OLDER_NAMES

    newest = {old: new for new, olds in OLDER_NAMES.items() for old in olds}
    spelled = {newest.get(v[0], v[0]): (k, v) for k, v in b.items() if v[0] is not None}
    if not all(key in spelled for key in WORLD_DEGREES):
        return
    changed = {c["argument"]: c["to"] for c in out}
    target, running = [], []
    for key in WORLD_DEGREES:
        k, (name, to, _, _) = spelled[key]
        value = changed[k] if k in changed else stated[name][0] if name in stated else PRE3_DEFAULTS[key]
        try:
            target.append(int(to))
            running.append(int(value))
        except ValueError:  # not a number: the reader has refused it already
            return
    reshard = spelled.get("parallelism.fsdp_reshard_after_forward", (None, (None, "", None, None)))[1][1]
    degrees = {spelled[key][0] for key in WORLD_DEGREES}
    at = next((i for i, c in enumerate(out) if c["argument"] in degrees), len(out))  # beside the other degrees
    for i in _degrees_left(running, target, reshard.strip('"') == "never"):
        k, (name, to, _, _) = spelled[WORLD_DEGREES[i]]
        out.insert(at, {"argument": k, "from": stated[name][0], "to": to})  # (an unstated degree is at its default)
        at += 1


def torchtitan_world_degrees(changes: list[dict], b: dict[str, str], job, stated_text: str) -> list[dict]:
    """torchtitan 0.3.0 flags: the changes with every degree the job must change too (_degrees_left), the launched
    side of a degree as the job runs it (`job`: its LaunchLayout), and data_parallel_shard_degree's from the files'
    -1 where they state that, not placement's resolved count."""
    flags = ["--" + key for key in WORLD_DEGREES]
    if job is None or not all(f in b for f in flags):
        return changes
    launched = [job.dp_replicate, job.dp_shard or -1, job.cp, job.tp, job.pp]
    shard_stated = _token("torchtitan", flags[1]) in stated_text
    for c in changes:
        if c["argument"] == flags[1] and job.dp_shard is None and shard_stated:
            c["from"] = "-1"
    changed = {c["argument"]: c["to"] for c in changes}
    running = [int(changed.get(f, v)) for f, v in zip(flags, launched, strict=True)]
    never = b.get("--parallelism.fsdp_reshard_after_forward") == "never"
    at = next((i for i, c in enumerate(changes) if c["argument"] in flags), len(changes))
    for i in _degrees_left(running, [int(b[f]) for f in flags], never):
        if flags[i] not in changed:
            changes.insert(at, {"argument": flags[i], "from": str(launched[i]), "to": b[flags[i]]})
            at += 1
    return changes


def _pre3_pipelined(b: dict[str, Spelled]) -> bool:
    """Whether the best plan's settings `b` run a pipeline: torchtitan's fsdp_reshard_after_forward "default" is
    then "never", else "always" (v0.2.2 models/llama3/infra/parallelize.py:319-327, `not pp_enabled`).  A user trial:
    the Llama 3 70B TOML's best plan at pp 1 changed the policy it leaves at "default" to "always", the same one."""
    from placement.audit.readers.torchtitan import OLDER_NAMES

    names = ("parallelism.pipeline_parallel_degree", *OLDER_NAMES["parallelism.pipeline_parallel_degree"])
    degree = next((v[1] for v in b.values() if v[0] in names), "1")
    return degree.strip('"').lstrip("-").isdigit() and int(degree.strip('"')) > 1


def _pre3_derived_batch(b: dict[str, Spelled]) -> str | None:
    """The global batch torchtitan derives for the best plan's settings `b` where no training.global_batch_size is
    given: local batch x dp_replicate x dp_shard (v0.2.2 train.py: `global_batch_size < 0` -> local_batch_size *
    dp_degree, one step without accumulation); None where `b` does not spell them.  A QA run: the DeepSeek-V3 671B
    TOML's best plan, which changed expert_parallel_degree and the checkpointing mode only, added
    `training.global_batch_size 1024` "derived from the layout this plan changes", the 4 x 256 it already runs."""
    from placement.audit.readers.torchtitan import OLDER_NAMES

    def value(key: str) -> int | None:
        names = (key, *OLDER_NAMES.get(key, ()))
        v = next((v[1] for v in b.values() if v[0] in names), None)
        return int(v) if v is not None and v.isdigit() else None

    parts = [value("training.local_batch_size"), value("parallelism.data_parallel_replicate_degree"),
             value("parallelism.data_parallel_shard_degree")]
    return None if None in parts else str(int(np.prod(parts)))


def torchtitan_pre3_changes(a: dict[str, Spelled], b: dict[str, Spelled], stated: dict[str, tuple[str, str]]
                            ) -> list[dict]:
    """The changes from the launched plan's settings `a` to the best plan's `b` (torchtitan_pre3_settings), the
    launched side as the files state it (LaunchLayout.torchtitan_stated), or placement's spelling of the launched
    layout marked NOT_IN_FILES.  A key the best plan leaves out does nothing there (selective_ac_option without
    selective checkpointing): the files' line may stay.  A value the files already state is no change; where they
    leave the global batch to torchtitan (local batch x dp x accumulation), a plan that changes the layout states
    it."""
    from placement.audit.readers.torchtitan import OLDER_NAMES

    out = []
    reshard_names = ("parallelism.fsdp_reshard_after_forward", *OLDER_NAMES["parallelism.fsdp_reshard_after_forward"])
    for k in list(a) + [k for k in b if k not in a]:
        if k not in b:
            continue
        key, to, note, requires = b[k]
        said = stated[key][0] if key in stated else None
        default = PRE3_DEFAULTS.get(key) if said is None else None
        if default is not None:  # what torchtitan runs where the files leave the key out, not placement's spelling
            quoted = to.startswith('"')
            said = f'"{default}"' if quoted and isinstance(default, str) else str(default)
            if said == to:
                continue
            note = PRE3_DEFAULT_NOTE if note is None else note
        if key in reshard_names and said is not None:
            # "default" is `not pp_enabled`: what it means at the best plan's pipeline degree, which placement's
            # spelling of the launched side ("always" for ZeRO-3 at any degree) does not say
            meant = said.strip('"\'')
            if meant == "default":
                meant = "never" if _pre3_pipelined(b) else "always"
            if meant == to.strip('"'):
                continue
        elif (k in a and a[k][1] == to and default is None) or said == to:
            continue
        change: dict = {"argument": k, "from": said if said is not None else a[k][1] if k in a else None, "to": to}
        if note is None and said is None and k in a and key is not None:
            note = NOT_IN_FILES
        if note is not None:
            change["note"] = note
        if requires is not None:
            change["requires"] = requires
        out.append(change)
    _world_degrees(out, b, stated)
    batch = next((k for k, v in b.items() if v[0] == "training.global_batch_size"), None)
    if out and batch is not None and batch not in [c["argument"] for c in out] and b[batch][0] not in stated \
            and _pre3_derived_batch(b) != b[batch][1]:
        out.append({"argument": batch, "from": None, "to": b[batch][1],
                    "note": "the launch files leave the global batch to the framework, which derives it from the "
                            "layout this plan changes"})
    return out
