"""torchtitan launch material: 0.3.0 flags (`--module M --config F`, `--section.key value` or `=value`, `--no-`
booleans, the `activation-checkpoint:MODE` subcommand) and 0.2.x flags (`--job.config_file`, `--model.name`...),
and 0.2.x TOML files; CLI flags win over the TOML, as in torchtitan.  The join reads the merged dotted keys
into the layout and derives micro-batch, dp, ZeRO stage, vpp and sequence parallelism by torchtitan's rules.  A TOML
file or 0.2.x command line is read in its version's key names (OLDER_NAMES), priced with the attention kernel its
model flavor and version run (_attention_kernel: the version its keys date, version_window), and keeps its keys as
stated (stated_keys) for the change list to name its changes that way."""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placement.audit.readers.common import nearest_key, read_int, typo_error, typo_of, word_check
from placement.audit.readers.reading import Reading, Settings, UnknownKey
from placement.audit.readers.torchtitan_configs import CONFIGS, DEFAULTS
from placement.audit.readers.torchtitan_keys import HISTORY, KEYS, SPANS, VERSIONS
from placement.audit.shell import Word
from placement.emit.torchtitan import fsdp_enabled
from placement.errors import InputError
from placement.loaders.files import read_text

_TT_SINGLE_STAGE = {"1f1b", "gpipe", "pipelineschedulesingle"}
_TT_MULTI_STAGE = {"interleaved1f1b", "loopedbfs", "interleavedzerobubble", "zbvzerobubble", "dualpipev",
                   "pipelineschedulemulti"}
_TT_NOT_PRICED_AS_RUN = {
    "interleavedzerobubble": "priced as Interleaved1F1B, whose bubble is (p - 1) / v micro-batch times; its split of "
                             "each backward into input and weight gradients, which fills most of that bubble, is "
                             "not priced (the estimate errs slow)",
    "zbvzerobubble": "priced as Interleaved1F1B with two stages per rank; its V placement (the last rank's two "
                     "stages hand over in place, no wrap-around send) and its split of each backward into input and "
                     "weight gradients, which fill most of the bubble, are not priced (the estimate errs slow)",
    "dualpipev": "priced as Interleaved1F1B with two stages per rank; its V placement and its overlap of one "
                 "micro-batch's forward with another's backward are not priced (the estimate errs slow)",
}
"""torch.distributed.pipelining schedules placement prices as another (placement's schedules: specs.recipe
PipelineSchedule), with what that leaves out: said in the audit, not substituted silently."""
_TRUE = (True, "true", "True")
"""A boolean key's value as TOML or the command line spells true."""
_TT_BOOL = {"training.disable_cuda_graphs", "parallelism.enable_sequence_parallel",
            "parallelism.enable_async_tensor_parallel", "compile.enable", "compile.enable_async_tensor_parallel",
            "training.compile", "parallelism.disable_loss_parallel"}


def _tt_key(flag: str) -> tuple[str, bool]:
    """`--parallelism.no-enable-sequence-parallel` -> ("parallelism.enable_sequence_parallel", False): tyro reads a
    flag's `-` as `_`, and `--section.no-KEY` as KEY false."""
    key = flag[2:].replace("-", "_")
    section, _, name = key.rpartition(".")
    value = True
    if name.startswith("no_") and (f"{section}.{name[3:]}" in _TT_BOOL or (
            f"{section}.{name[3:]}" in KEYS and f"{section}.{name}" not in KEYS)):
        name, value = name[3:], False
    return (f"{section}.{name}" if section else name), value


def flags(words: list[Word], sites: dict[str, tuple[str, str, int | None]] | None = None
          ) -> dict[str, tuple[Any, str]]:
    """Dotted keys from torchtitan CLI flags (0.3.0 tyro and 0.2.x); `sites`, where given, gets each key's flag as
    written, with the file and line that write it (check_keys)."""
    out: dict[str, tuple[Any, str]] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if w.text.startswith("activation-checkpoint:") or w.text.startswith("activation_checkpoint:"):
            out["activation_checkpoint.mode"] = (w.text.split(":", 1)[1].replace("-", "_"), w.evidence)
            i += 1
            continue
        if not w.text.startswith("--"):
            raise InputError(f"{w.site}: unexpected argument {w.text!r}; expected --section.key value flags")
        flag, eq, inline = w.text.partition("=")
        key, truth = _tt_key(flag)
        if sites is not None:
            sites[key] = (flag, w.origin.path, w.origin.line)
        if eq:
            word_check(w, flag)
            out[key] = (inline, w.evidence)
            i += 1
            continue
        nxt = words[i + 1] if i + 1 < len(words) else None
        takes_value = (key not in _TT_BOOL and key not in ("module", "config")) or key in ("module", "config")
        if key in _TT_BOOL or not takes_value:
            out[key] = (truth, w.evidence)
            i += 1
            continue
        if nxt is None or nxt.text.startswith("--") or nxt.text.startswith("activation-checkpoint:"):
            raise InputError(f"{w.site}: {flag} is missing its value")
        word_check(nxt, flag)
        ev = w.evidence if nxt.origin in (w.origin, w.site) else f"{w.site} [{flag} value from {nxt.origin}]"
        out[key] = (nxt.text, ev)
        i += 2
    return out


def toml_keys(path: Path, sites: dict[str, tuple[str, str, int | None]] | None = None
              ) -> dict[str, tuple[Any, str]]:
    """Dotted keys of a torchtitan TOML file, each with its line; `sites`, where given, gets each key as written,
    with the file and line (check_keys)."""
    text = read_text(path, "torchtitan config", "expected a TOML file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"{path}: not valid TOML ({err}); expected torchtitan's [job]/[model]/[parallelism] "
                         f"sections") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise InputError(f"{path}: the TOML nests arrays or tables deeper than the reader can follow; expected "
                         f"torchtitan's [job]/[model]/[parallelism] sections: look for unclosed brackets") from None
    lines = text.splitlines()
    out: dict[str, tuple[Any, str]] = {}
    for section, table in data.items():
        if not isinstance(table, dict):
            continue
        for key, value in _flatten(table, path):
            dotted = f"{section}.{key}"
            evidence, line = _toml_evidence(path, lines, section, key.rsplit(".", 1)[-1])
            name = dotted.rsplit(".", 1)[-1]
            if isinstance(value, str) and (name.endswith("_degree") or name in TOML_INT_NAMES) \
                    and re.fullmatch(r"\s*-?\d+\s*", value):
                raise InputError(f"{evidence}: {dotted} is the TOML string {value!r}; torchtitan keeps a TOML value as "
                                 f"written (config/manager.py _dict_to_dataclass, v0.2.2), so its layout arithmetic "
                                 f"gets a string: write {value.strip()} without quotes")
            out[dotted] = (value, evidence)
            if sites is not None:
                sites[dotted] = (dotted, str(path), line)
    return out


TOML_INT_NAMES = frozenset({"seq_len", "local_batch_size", "batch_size", "global_batch_size",
                            "pipeline_parallel_microbatch_size", "pipeline_parallel_layers_per_stage",
                            "pipeline_parallel_first_stage_less_layers", "pipeline_parallel_last_stage_less_layers",
                            "pipeline_parallel_microbatches", "pipeline_parallel_num_microbatches"})
"""Integer keys the reader takes from a torchtitan TOML (with every `*_degree`): a quoted number there is an error."""
TOML_MAX_DEPTH = 64
"""Deepest table nesting read from a torchtitan TOML (its real sections are two levels deep)."""


def _flatten(table: dict, path: Path) -> list[tuple[str, Any]]:
    """Every leaf of a TOML table as (dotted key, value) in file order, walked with an explicit stack (no
    recursion over user data)."""
    items: list[tuple[str, Any]] = []
    stack = [("", iter(table.items()))]
    while stack:
        prefix, rest = stack[-1]
        k, v = next(rest, (None, None))
        if k is None:
            stack.pop()
        elif isinstance(v, dict):
            if len(stack) >= TOML_MAX_DEPTH:
                raise InputError(f"{path}: TOML tables nest deeper than {TOML_MAX_DEPTH} levels (at "
                                 f"{prefix[:60]}...); torchtitan's sections are two levels deep: look for a "
                                 f"runaway dotted key")
            stack.append((f"{prefix}{k}.", iter(v.items())))
        else:
            items.append((f"{prefix}{k}", v))
    return items


def _toml_evidence(path: Path, lines: list[str], section: str, key: str) -> tuple[str, int | None]:
    """("file:line: text", line) of `key` in table `section` (or one nested in it); (file: [section] key, None) where
    no line of its own states it."""
    in_section = False
    for n, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("["):
            in_section = stripped.strip("[] ").split(".")[0] == section
        elif in_section and re.match(rf"[\"']?{re.escape(key)}[\"']?\s*=", stripped):
            return f"{path}:{n}: {stripped}", n
    return f"{path}: [{section}] {key}", None


@dataclass(frozen=True)
class _Pipeline:
    """torchtitan keys the join turns into other fields, as (value, evidence)."""

    shard: tuple[int, str] | None = None
    """data_parallel_shard_degree (-1 = the rest)."""
    reshard: tuple[str, str] | None = None
    """fsdp_reshard_after_forward."""
    local_batch: tuple[int, str] | None = None
    pp_microbatch: tuple[int, str] | None = None
    schedule: tuple[str, str] | None = None
    """pipeline_parallel_schedule, lower case."""
    named_config: str | None = None
    """A 0.3.0 launch's `--module M --config F` (its config function sets batch, sequence and checkpointing)."""


def _settings(keys: dict[str, tuple[Any, str]], s: Settings) -> _Pipeline:
    """The layout fields the merged keys state, into `s`; the keys the join step derives from, returned."""
    def get(key: str):
        return keys.get(key, (None, None))

    def degree(key: str, field: str, *, allow_negative: bool = False) -> int | None:
        value, ev = get(key)
        if value is None:
            return None
        v = read_int(value, key, ev, minimum=-1 if allow_negative else 0)
        if v == 0 or (v < 0 and not (allow_negative and v == -1)):
            raise InputError(f"{ev}: {key} must be >= 1{' or -1' if allow_negative else ''}, got {v}")
        if field:
            s.put(field, v, ev)
        return v

    version3 = "module" in keys or "config" in keys
    facts: dict[str, tuple] = {}
    if version3:  # the named config's keys under the line's (get reads `keys` as rebound here)
        keys, facts = named_config(keys)
    for key, field in (("parallelism.tensor_parallel_degree", "tp"), ("parallelism.context_parallel_degree", "cp"),
                       ("parallelism.expert_parallel_degree", "ep"), ("parallelism.pipeline_parallel_degree", "pp"),
                       ("parallelism.expert_tensor_parallel_degree", "etp"),
                       ("parallelism.data_parallel_replicate_degree", "dp_replicate"),
                       ("training.seq_len", "seq_len")):
        degree(key, field)
    pipeline = _Pipeline(named_config=f"{get('module')[0]}:{get('config')[0]}" if version3 else None)
    shard = degree("parallelism.data_parallel_shard_degree", "", allow_negative=True)
    if shard is not None:
        ev = get("parallelism.data_parallel_shard_degree")[1]
        if shard > 0:
            s.put("dp_shard", shard, ev)
        pipeline = dataclasses.replace(pipeline, shard=(shard, ev))
    reshard, rev = get("parallelism.fsdp_reshard_after_forward")
    if reshard is not None:
        pipeline = dataclasses.replace(pipeline, reshard=(str(reshard), rev))
    local = get("training.local_batch_size")
    if local[0] is not None:
        pipeline = dataclasses.replace(pipeline, local_batch=(
            read_int(local[0], "training.local_batch_size", local[1]), local[1]))
    pmb = get("parallelism.pipeline_parallel_microbatch_size")
    if pmb[0] is not None:
        pipeline = dataclasses.replace(pipeline, pp_microbatch=(
            read_int(pmb[0], "parallelism.pipeline_parallel_microbatch_size", pmb[1]), pmb[1]))
    count = next((k for k in MICROBATCH_COUNTS if k in keys), None)
    if pmb[0] is None and count is not None and pipeline.local_batch is not None:
        n, cev = read_int(keys[count][0], count, keys[count][1]), keys[count][1]
        if n < 1 or pipeline.local_batch[0] % n:
            raise InputError(f"{cev}: {count} {n} does not divide the local batch {pipeline.local_batch[0]}; "
                             f"torchtitan splits each step's batch into that many micro-batches")
        pipeline = dataclasses.replace(pipeline, pp_microbatch=(pipeline.local_batch[0] // n, f"{cev} (the local "
                                                                f"batch in {n} micro-batches)"))
    gbs = get("training.global_batch_size")
    if gbs[0] is not None and read_int(gbs[0], "training.global_batch_size", gbs[1], minimum=-1) > 0:
        s.put("global_batch", int(gbs[0]), gbs[1])
    sched = get("parallelism.pipeline_parallel_schedule")
    if sched[0] is not None:
        name = str(sched[0]).lower()
        if name not in _TT_SINGLE_STAGE | _TT_MULTI_STAGE:
            raise InputError(f"{sched[1]}: unknown pipeline_parallel_schedule {sched[0]!r}; expected one of "
                             f"1F1B, GPipe, Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble, "
                             f"DualPipeV")
        pipeline = dataclasses.replace(pipeline, schedule=(name, sched[1]))
        if name in _TT_NOT_PRICED_AS_RUN:
            s.ignored.append(f"pipeline_parallel_schedule {sched[0]} ({sched[1]}): {_TT_NOT_PRICED_AS_RUN[name]}")
    lps = get("parallelism.pipeline_parallel_layers_per_stage")
    if lps[0] is not None:
        s.put("layers_per_virtual_stage", read_int(lps[0], "pipeline_parallel_layers_per_stage", lps[1]), lps[1])
    for key, field in (("parallelism.pipeline_parallel_first_stage_less_layers", "first_stage_less_layers"),
                       ("parallelism.pipeline_parallel_last_stage_less_layers", "last_stage_less_layers")):
        v, ev = get(key)
        if v is not None:
            s.put(field, read_int(v, key.split(".")[1], ev), ev)
    if version3:
        _converters(facts, get, s)
    _activation_checkpoint(get, s, version3)
    _cuda_graphs(get, s, version3)
    if not version3:  # torchtitan's chunked loss (ChunkedLossWrapper, 8 chunks) came after v0.2.2
        s.put("recipe.loss_chunks", 1, "torchtitan before 0.3.0 computes the loss over the whole micro-batch's "
                                       "logits (v0.2.2 components/loss.py has no ChunkedLossWrapper)")
        _rotate_method(get, s)
    if not version3:
        _attention_kernel(keys, s)
    sp, spev = get("parallelism.enable_sequence_parallel")
    if sp is not None:
        s.put("sequence_parallel", sp in _TRUE, spev)
    conv, cev = get("model.converters")
    if conv is not None:
        names = conv if isinstance(conv, list) else [c for c in str(conv).split(",") if c]
        if any("float8" in str(c) or str(c).split(".")[-1] == "mx" for c in names):
            s.put("precision", "fp8", cev)
        if any(str(c).split(".")[-1] == "mx" for c in names):  # 0.2.x MXLinearConverter: MXFP8 (recipe mxfp8_cublas,
            s.put("recipe.fp8_recipe", "mxfp8", cev)           # v0.2.2 config/job_config.py:777)
        elif not version3 and any("float8" in str(c) for c in names):
            _float8_before_030(get, s)
    name, nev = get("model.name")
    flavor, fev = get("model.flavor")
    module, mev2 = get("module")
    config, cfev = get("config")
    if name is not None or flavor is not None:
        s.put("model_ref", f"{name or '?'}:{flavor or '?'}", nev or fev)
    if module is not None or config is not None:
        s.put("model_ref", f"{module or '?'}:{config or '?'}", mev2 or cfev)
    for key, why in (("parallelism.enable_async_tensor_parallel", "async tensor parallelism"),
                     ("compile.enable_async_tensor_parallel", "async tensor parallelism"),
                     ("compile.enable", _compiled(get, version3)),
                     ("training.compile", "torch.compile of the model (priced as its eager kernels)")):
        v, ev = get(key)
        if v in _TRUE:
            s.ignored.append(f"{key}: {why} ({ev})")
    cfg, cev2 = get("job.config_file")
    if cfg is not None:
        s.config_file = (str(cfg), cev2)
    return pipeline


def _compiled(get, version3: bool) -> str:
    """What compile.enable compiles: the model and the loss, or 0.3.0's compile.components (default ["model",
    "loss"], config/configs.py:298; deepseek_v3_671b compiles the loss only)."""
    if not version3:
        return "torch.compile of the model (priced as its eager kernels)"
    parts, ev = get("compile.components")
    if parts is None:
        parts, where = DEFAULTS["compile.components"]
        ev = f"torchtitan 0.3.0 default compile.components = {_shown(parts)} ({where})"
    parts = parts if isinstance(parts, (list, tuple)) else [p for p in str(parts).split(",") if p]
    return f"torch.compile of the {' and the '.join(map(str, parts)) or 'nothing'} (priced as eager kernels; {ev})"


def _activation_checkpoint(get, s: Settings, version3: bool) -> None:
    """The recompute torchtitan runs.  Its default is selective (v0.2.2 config/job_config.py ActivationCheckpoint
    mode 'selective'; 0.3.0 trainer.py activation_checkpoint SelectiveAC).  Up to 0.2.x, selective_ac_option (default
    "2") is an integer k, a full checkpoint of every k-th block (distributed/activation_checkpoint.py
    _apply_layer_sac: the k-th, 2k-th, ... block it wraps), or "op", the per-op policy; 0.3.0's selective is the
    per-op policy (SelectiveAC: saves the matmul, attention and collective outputs but every second matmul,
    recomputes the rest), priced as such (recompute module per_op)."""
    mode, mev = get("activation_checkpoint.mode")  # 0.3.0: the line's, its named config's or 0.3.0's default
    if mode is None:
        mode, mev = "selective", ("torchtitan default activation_checkpoint mode 'selective' (v0.2.2 "
                                  "config/job_config.py)")
    mode = str(mode).replace("-", "_")
    if mode == "memory_budget":
        s.ignored.append(f"activation checkpointing memory_budget: recompute chosen by the compiler ({mev})")
        return
    if mode not in ("none", "selective", "full"):
        raise InputError(f"{mev}: activation checkpoint mode must be none, selective, full or memory_budget, "
                         f"got {mode!r}")
    if mode != "selective":
        s.put("recompute", mode, mev)
        return
    option, oev = get("activation_checkpoint.selective_ac_option")
    if not version3 and option is None:
        option, oev = "2", "torchtitan default selective_ac_option '2' (v0.2.2 config/job_config.py)"
    if not version3 and str(option).isdigit():
        k = int(str(option))  # 0 checkpoints every block, as 1 does (`not ac_freq`)
        s.put("recompute", "full", f"{mev}; {oev} (a full checkpoint of one transformer block in {max(k, 1)})")
        if k > 1:
            s.put("recipe.ac_layer_interval", k, oev)
        return
    if not version3 and str(option) != "op":
        raise InputError(f"{oev}: selective_ac_option must be a positive integer or 'op', got {option!r}")
    where = mev if version3 else f"{mev}; {oev}"
    s.put("recompute", "selective", where)
    if not version3:
        s.ignored.append(f"per-op checkpointing of torchtitan 0.2.x, whose attention runs wq, wk and wv apart: it "
                         f"also recomputes wk and keeps wq's and wv's outputs, priced as 0.3.0's fused wqkv, kept "
                         f"whole ({oev})")
    s.put("recipe.recompute_modules", "per_op", f"{where} (torchtitan's per-op policy: the matmul, attention and "
                                                f"collective outputs saved but every second matmul's, the rest "
                                                f"recomputed)")


NAMED_CONFIG_SETS = ("parallelism.tensor_parallel_degree", "parallelism.pipeline_parallel_degree",
                     "parallelism.context_parallel_degree", "parallelism.expert_parallel_degree",
                     "training.local_batch_size", "training.seq_len")
"""Keys a torchtitan 0.3.0 named config may set that the audit prices (models/*/config_registry.py: llama3_70b
tensor_parallel_degree 8, llama3_8b local_batch_size 1 and seq_len 8192, ...): read from torchtitan_configs.CONFIGS
for the configs of torchtitan's own models, stated on the line for a config module the audit has no table of."""
NAMED_SECTIONS = ("training", "parallelism", "compile", "activation_checkpoint")
"""The sections of a named config's keys read under the line's flags (tyro parses the flags over the config
function's Trainer.Config: config/manager.py ConfigManager, "CLI args > config_registry function defaults")."""
NAMED_DEFAULTS = (*NAMED_CONFIG_SETS, "parallelism.data_parallel_replicate_degree",
                  "parallelism.data_parallel_shard_degree", "activation_checkpoint.mode")
"""Keys read at torchtitan 0.3.0's default (torchtitan_configs.DEFAULTS) where neither the line nor its named config
sets them, each with that default's file and line."""


def _shown(value: Any) -> str:
    """A config value as config_registry.py writes it (a tuple read from a list as a list)."""
    return repr(list(value) if isinstance(value, tuple) else value)


def named_config(keys: dict[str, tuple[Any, str]]) -> tuple[dict[str, tuple[Any, str]], dict[str, tuple]]:
    """(the line's keys over what its `--module M --config F` sets, that config's facts): each key of
    NAMED_SECTIONS the config function sets (torchtitan_configs.CONFIGS, read statically from torchtitan 0.3.0's
    models/M/config_registry.py) and each of NAMED_DEFAULTS it leaves at 0.3.0's default (DEFAULTS), with the
    function, file and line as its source.  A config module the table does not hold (an experiment's, the user's)
    must state what the audit prices (_named_config_stated); a config name its module does not define is an
    InputError naming the module's configs, as torchtitan stops there (config/manager.py _load_config)."""
    (module, mev), (config, cev) = keys.get("module", (None, None)), keys.get("config", (None, None))
    if module is None or config is None:
        raise InputError(f"{mev or cev}: torchtitan 0.3.0 takes --module and --config together (config/manager.py "
                         f"ConfigManager._load_config: both are required); add the missing one")
    module, config = str(module), str(config)
    registry = CONFIGS.get(module.removeprefix("torchtitan.models.").removesuffix(".config_registry"))
    if registry is None:
        _named_config_stated(keys, lambda k: keys.get(k, (None, None)))
        return keys, {}
    if config not in registry:
        raise InputError(f"{cev}: torchtitan 0.3.0's models/{module}/config_registry.py has no config {config!r}, "
                         f"so torchtitan stops at start (config/manager.py _load_config); its configs are "
                         f"{', '.join(registry)}: pass one of them with --config")
    facts = registry[config]
    out = dict(keys)
    for key, (value, fn, line) in facts.items():
        if key.split(".")[0] in NAMED_SECTIONS and key not in out:
            called = "" if fn == config else f" (--config {config} calls {fn})"
            out[key] = (value, f"torchtitan 0.3.0 models/{module}/config_registry.py:{line} {fn}: {key} = "
                               f"{_shown(value)}{called}")
    for key in NAMED_DEFAULTS:
        if key not in out:
            value, where = DEFAULTS[key]
            out[key] = (value, f"torchtitan 0.3.0 default {key} = {_shown(value)} ({where}; --config {config} "
                               f"leaves it)")
    return out, {k: (v, f"models/{module}/config_registry.py:{line} {fn}") for k, (v, fn, line) in facts.items()}


def _named_config_stated(keys, get) -> None:
    """A torchtitan 0.3.0 command line naming a config module the audit has no table of (not one of
    torchtitan_configs.CONFIGS: an experiment's, the user's): every key such a config may set that the audit
    prices (NAMED_CONFIG_SETS) and the activation-checkpoint subcommand must be on the line, else an InputError
    names what is missing and the flags that state it."""
    missing = [k for k in NAMED_CONFIG_SETS if k not in keys]
    if get("activation_checkpoint.mode")[0] is None:
        missing.append("activation-checkpoint:MODE")
    if missing:
        named = f"--module {get('module')[0]} --config {get('config')[0]}"
        needed = ", ".join(k if k.startswith("activation") else f"--{k} N" for k in missing)
        raise InputError(f"{named}: the audit reads the named configs of torchtitan 0.3.0's own models "
                         f"({', '.join(CONFIGS)}), not this module's, whose config may set "
                         f"{', '.join(missing)} where this command line does not: state them on the line "
                         f"({needed}, with the values its config has) to audit the job it runs")


FLOAT8_CONVERTERS = ("Float8LinearConverter", "Float8GroupedExpertsConverter")
"""torchtitan 0.3.0's Float8 converters (components/quantization): row-wise scaled FP8 GEMMs, priced as fp8."""
MXFP8_CONVERTERS = ("MXFP8LinearConverter", "MXFP8GroupedExpertsConverter")
"""torchtitan 0.3.0's MXFP8 converters (components/quantization/mx.py): torchao's MXFP8 GEMMs, 1x32 blocks with E8M0
scales, Blackwell only (mx.py:70-71, 175-176), priced as fp8 with fp8_recipe mxfp8."""


def _converters(facts: dict[str, tuple], get, s: Settings) -> None:
    """Precision from the named config's model converters (model_registry(..., converters=[...])): fp8 where it
    converts to Float8 (FLOAT8_CONVERTERS: llama3_405b, deepseek_v3_671b_float8, ...) or MXFP8 (MXFP8_CONVERTERS,
    with fp8_recipe mxfp8 and the other recipe values the config runs, emit.torchtitan.CONFIG_RECIPE:
    llama3_8b_mxfp8's converted LM head); a note for a converter the audit does not price (NVFP4, LoRA), priced
    without it."""
    from placement.emit.torchtitan import CONFIG_RECIPE

    names, where = facts.get("model.converters", ((), ""))
    config, cev = get("config")
    fp8 = [n for n in names if n in FLOAT8_CONVERTERS + MXFP8_CONVERTERS]
    kind = "MXFP8" if any(n in MXFP8_CONVERTERS for n in fp8) else "Float8"
    if fp8 and not s.has("precision"):
        s.put("precision", "fp8", f"{cev} (torchtitan 0.3.0 {where}: model_registry converters {', '.join(fp8)}: "
                                  f"the linear layers run {kind})")
    if kind == "MXFP8":
        s.put("recipe.fp8_recipe", "mxfp8", f"{cev} (torchtitan 0.3.0 {where}: model_registry converters "
                                            f"{', '.join(fp8)}: torchao's MXFP8 GEMMs, components/quantization/mx.py)")
        for field, value, why in CONFIG_RECIPE.get(str(config), ()):
            if field != "fp8_recipe":
                s.put(f"recipe.{field}", value.value if hasattr(value, "value") else value, f"{cev} ({why})")
    other = [n for n in names if n not in FLOAT8_CONVERTERS + MXFP8_CONVERTERS]
    if other:
        s.ignored.append(f"model converters {', '.join(other)} (torchtitan 0.3.0 {where}): not priced: priced "
                         f"without them")


def _cuda_graphs(get, s: Settings, version3: bool) -> None:
    """torchtitan 0.3.0 captures each micro-batch's forward and backward in one CUDA graph unless told
    (training.disable_cuda_graphs False, config/configs.py:66; trainer.py:613-614 wrap_with_cuda_graph), and
    refuses to start with pipeline parallelism, or expert parallelism under a host-syncing dispatcher, unless told
    (trainer.py:179-210 _validate_cuda_graphs).  The setting is the line's, its named config's or the default, with
    its source.  0.2.x has no graphs."""
    off, ev = get("training.disable_cuda_graphs")
    if not version3:
        return
    if off in _TRUE:
        s.put("recipe.cuda_graphs", "none", ev)
        return
    where = ev or (f"torchtitan 0.3.0 default training.disable_cuda_graphs = False "
                   f"({DEFAULTS['training.disable_cuda_graphs'][1]})")
    if s.value("pp", 1) > 1 or s.value("ep", 1) > 1:
        s.ignored.append(f"CUDA graphs: torchtitan 0.3.0 refuses them with pipeline parallelism, and with expert "
                         f"parallelism unless its dispatcher is MinimalAsyncEP or HybridEP with a "
                         f"non_blocking_capacity_factor, and stops at start (trainer.py:179-210 "
                         f"_validate_cuda_graphs) unless --training.disable_cuda_graphs ({where}); priced without "
                         f"graphs")
        return
    s.put("recipe.cuda_graphs", "full", f"{where}: the forward and backward of each micro-batch run as one CUDA "
                                        f"graph (trainer.py:613-614 wrap_with_cuda_graph)")


JOBCONFIG_ORDER = {commit: i for i, (commit, _) in enumerate(HISTORY)}
"""torchtitan_keys.HISTORY commit -> its place on torchtitan's main line."""
JOBCONFIG_DATES = dict(HISTORY)
"""torchtitan_keys.HISTORY commit -> its date."""
JOBCONFIG_FIRST = min((first for first, _ in SPANS.values()), key=JOBCONFIG_ORDER.__getitem__)
JOBCONFIG_LAST = max((last for _, last in SPANS.values()), key=JOBCONFIG_ORDER.__getitem__)
"""The first and the last JobConfig read (HISTORY's last commit, 9810191b, removed it for 0.3.0)."""


def version_window(stated: Iterable[str]) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
    """What the keys a TOML file or 0.2.x command line states say of the torchtitan that runs it, as (key, commit) of
    torchtitan_keys.SPANS: the key its JobConfig took last (the version has that commit's JobConfig or a later one),
    and the key it dropped first (that commit's JobConfig or an earlier one); None where no stated key bounds it (one
    in every JobConfig from the first read, or to the last).  Before eadca483 (2025-08-28) torchtitan dropped a TOML
    key it did not know, unread: a key in a TOML file dates it so for a torchtitan from eadca483 on only."""
    known = [k for k in stated if k in SPANS]
    added = [(k, SPANS[k][0]) for k in known if SPANS[k][0] != JOBCONFIG_FIRST]
    dropped = [(k, SPANS[k][1]) for k in known if SPANS[k][1] != JOBCONFIG_LAST]
    newest = max(added, key=lambda x: (JOBCONFIG_ORDER[x[1]], x[0]), default=None)
    oldest = min(dropped, key=lambda x: (JOBCONFIG_ORDER[x[1]], x[0]), default=None)
    return newest, oldest


SDPA_CUDNN_FIRST = "6a3a9da9"
"""torchtitan #1776 (2025-10-09, before v0.2.0), from which its SDPA tries CUDNN_ATTENTION, FLASH_ATTENTION,
EFFICIENT_ATTENTION in that order on every GPU (models/attention.py ScaledDotProductAttentionWrapper,
sdpa_kernel(..., set_priority=True)): cuDNN's fused attention, priced as `flash`."""
SDPA_CUDNN_FIRST_JOBCONFIG = "b2763873"
"""The JobConfig 6a3a9da9 runs with (the last change to its file before it, 2025-10-09): keys date a file to JobConfig
versions, so one dropped before b2763873 dates it before 6a3a9da9, and one added after it (a82b77ad on), after."""
SDPA_FLASH_FIRST = ("torchtitan before 6a3a9da9 runs SDPA with FLASH_ATTENTION (PyTorch's bundled FlashAttention-2) "
                    "first on GPUs below compute capability 10.0: from 3b85aa31 (2025-05-14) by its own backend list "
                    "(models/attention.py ScaledDotProductAttention at e7c0cae and v0.1.0: "
                    "sdpa_kernel([FLASH_ATTENTION, EFFICIENT_ATTENTION, MATH], set_priority=True), CUDNN_ATTENTION "
                    "put first only where has_cuda_capability(10, 0)), before it by the PyTorch of its time, whose "
                    "own order has put CUDNN_ATTENTION last since pytorch#138522 (2024-10)")
"""What torchtitan's SDPA runs before SDPA_CUDNN_FIRST, for sources and notes."""
SDPA_PRICED = ("priced as FlashAttention-2 on Hopper, as fused attention on other GPUs (the accelerator's "
               "flash2_attention_efficiency)")
FLASH2_CLASS = ("kernels of FlashAttention-2's class (FlexAttention a Triton one, PyTorch's varlen attention its "
                "flash backend), priced as FlashAttention-2 as frameworks.py prices torchtitan 0.3.0's")
FLEX = "FlexAttention"
FLEX_FLAVORS: dict[tuple[str, str], str] = {
    ("llama3", "debugmodel_flex_attn"): f"{FLEX} (models/llama3/__init__.py: use_flex_attn=True, attn_type 'flex' "
                                        f"from v0.2.1)",
    ("llama3", "8B_flex"): f"{FLEX} (models/llama3/__init__.py attn_type 'flex', v0.2.1 on)",
    ("llama3", "debugmodel_varlen_attn"): "PyTorch's varlen attention (models/llama3/__init__.py attn_type 'varlen', "
                                          "v0.2.1 on)",
    ("llama3", "8B_varlen"): "PyTorch's varlen attention (models/llama3/__init__.py attn_type 'varlen', v0.2.1 on)",
    **{("llama4", f): f"{FLEX} (models/llama4/__init__.py, experiments/llama4 up to v0.1.0: use_flex_attn=True)"
       for f in ("debugmodel_irope", "17bx16e_irope", "17bx128e_irope")},
    ("deepseek_v3", "debugmodel_flex_attn"): f"{FLEX} (models/deepseek_v3/__init__.py: use_flex_attn=True)",
    **{("deepseek_v3", f): f"{FLEX} from f738a03b (2025-08-22; models/deepseek_v3/__init__.py use_flex_attn=True); "
                           f"before it SDPA, whose FLASH_ATTENTION refuses MLA's unequal head dims (192 for q and k, "
                           f"128 for v; PyTorch sdp_utils.cpp check_head_dim_size_flash), so EFFICIENT_ATTENTION "
                           f"runs on GPUs below compute capability 10.0, slower than the FlashAttention-2 it is "
                           f"priced as" for f in ("16B", "236B", "671B")},
}
"""torchtitan 0.1.0 to 0.2.2 (name, flavor) -> the attention its model args run where it is not SDPA
(models/*/__init__.py at v0.1.0, v0.2.0, v0.2.1, v0.2.2 and the main-line commits between that changed them)."""
FLEX_MODELS = {"gpt_oss": f"{FLEX} (models/gpt_oss/model/args.py attn_type 'flex': gpt-oss supports only "
                          f"FlexAttention)"}
"""torchtitan model names whose every flavor runs FlexAttention."""
SDPA_FLAVORS = {"llama3": ("debugmodel", "8B", "70B", "405B"), "llama4": ("debugmodel", "17bx16e", "17bx128e"),
                "deepseek_v3": ("debugmodel",), "deepseek3": ("debugmodel",),
                "qwen3": ("debugmodel", "0.6B", "1.7B", "4B", "8B", "14B", "32B", "debugmodel_moe", "30B-A3B",
                          "235B-A22B")}
"""The flavors torchtitan 0.1.0 to 0.2.2 ships that run SDPA (the default attention of their model args)."""


def _attention_kernel(keys: dict[str, tuple[Any, str]], s: Settings) -> None:
    """recipe.attention_kernel of a TOML file or 0.2.x command line, with its source: FlexAttention or the varlen
    kernel where model.use_flex_attn (JobConfig, 986f6800..f64cf3c1) or the model's flavor runs it (FLEX_FLAVORS),
    priced as FlashAttention-2; SDPA else (_sdpa_kernel).  Always set, so that the 0.3.0 row of
    frameworks.CAPABILITIES (FlexAttention for every config) does not stand for an older torchtitan."""
    flex, fev = keys.get("model.use_flex_attn", (None, ""))
    name, nev = keys.get("model.name", ("llama3", ""))
    flavor, flev = keys.get("model.flavor", ("debugmodel", ""))
    name, flavor = str(name), str(flavor)
    if flex in _TRUE:
        s.put("recipe.attention_kernel", "flash2", f"{fev} (model.use_flex_attn: {FLEX}; {FLASH2_CLASS})")
        return
    why = FLEX_MODELS.get(name) or FLEX_FLAVORS.get((name, flavor))
    if why is not None:
        s.put("recipe.attention_kernel", "flash2", f"{flev or nev} (torchtitan's {name}:{flavor} runs {why}; "
                                                   f"{FLASH2_CLASS})")
        return
    if (nev or flev) and flavor not in SDPA_FLAVORS.get(name, ()):
        s.ignored.append(f"attention of model {name}:{flavor} ({flev or nev}): no flavor torchtitan 0.1.0 to 0.2.2 "
                         f"ships, so whether its model args run SDPA or FlexAttention (use_flex_attn, attn_type) is "
                         f"not read: priced as SDPA")
    _sdpa_kernel(keys, s)


def _sdpa_kernel(keys: dict[str, tuple[Any, str]], s: Settings) -> None:
    """The kernel torchtitan's SDPA runs, by the version the files' keys date (version_window): before
    SDPA_CUDNN_FIRST, FlashAttention-2 below compute capability 10.0 (flash2, which the audit prices as such on
    Hopper); from it, cuDNN's fused attention (flash); where the keys leave it open, flash, torchtitan 0.2.0 to
    0.2.2's, with a note on what an older one runs."""
    newest, oldest = version_window(s.torchtitan_stated)  # the files' own keys, not the names they are read as
    cut = JOBCONFIG_ORDER[SDPA_CUDNN_FIRST_JOBCONFIG]
    if oldest is not None and JOBCONFIG_ORDER[oldest[1]] < cut:
        key, commit = oldest
        s.put("recipe.attention_kernel", "flash2",
              f"{keys[key][1]} ({key} is last in torchtitan's JobConfig at {commit}, {JOBCONFIG_DATES[commit]}, "
              f"before {SDPA_CUDNN_FIRST}, 2025-10-09: {SDPA_FLASH_FIRST}; {SDPA_PRICED})")
        return
    if newest is not None and JOBCONFIG_ORDER[newest[1]] > cut:
        key, commit = newest
        dropped = ("" if s.torchtitan_stated.get(key, ("", "toml"))[1] != "toml" else
                   "; a torchtitan older than eadca483, 2025-08-28, would drop the TOML key unread and run "
                   "FLASH_ATTENTION first")
        s.put("recipe.attention_kernel", "flash",
              f"{keys[key][1]} ({key} is first in torchtitan's JobConfig at {commit}, {JOBCONFIG_DATES[commit]}, "
              f"after {SDPA_CUDNN_FIRST}, 2025-10-09, from which its SDPA tries CUDNN_ATTENTION first on every GPU: "
              f"cuDNN's fused attention (models/attention.py ScaledDotProductAttentionWrapper){dropped})")
        return
    s.put("recipe.attention_kernel", "flash",
          f"torchtitan default SDPA from {SDPA_CUDNN_FIRST} (2025-10-09; v0.2.0 to v0.2.2): CUDNN_ATTENTION first on "
          f"every GPU, cuDNN's fused attention (models/attention.py ScaledDotProductAttentionWrapper); the files' "
          f"keys do not date their torchtitan against {SDPA_CUDNN_FIRST}")
    bounds = [f"{k}, in torchtitan's JobConfig from {c} ({JOBCONFIG_DATES[c]})" for k, c in [newest or ("", "")] if k]
    bounds += [f"{k}, until {c} ({JOBCONFIG_DATES[c]})" for k, c in [oldest or ("", "")] if k]
    s.ignored.append(f"attention kernel: the files' keys{' (' + '; '.join(bounds) + ')' if bounds else ''} leave open "
                     f"whether their torchtitan is older than {SDPA_CUDNN_FIRST} (2025-10-09); priced as torchtitan "
                     f"0.2.0 to 0.2.2 runs SDPA, CUDNN_ATTENTION first; {SDPA_FLASH_FIRST}, slower on Hopper: "
                     f"audit with --attention-kernel flash2 to price that")


def toml_value(value: Any) -> str:
    """A value as a TOML file writes it: strings double-quoted, booleans lower case, numbers and arrays as JSON writes
    them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, default=str)


def stated_keys(groups: list[Settings]) -> tuple[dict[str, tuple[str, str]], str]:
    """(LaunchLayout.torchtitan_stated, torchtitan_form) of TOML files and 0.2.x command lines: each key with its value
    as the change list writes it and how the files state it, a flag's over the TOML's; "toml" where a TOML file is
    among them."""
    out: dict[str, tuple[str, str]] = {}
    toml = False
    for g in sorted(groups, key=lambda g: g.override):
        for key, (value, _) in (g.keys or {}).items():
            raw = g.key_sites.get(key, (f"--{key}" if g.override else key, "", None))[0]
            if raw.startswith("--"):
                out[key] = (str(value).lower() if isinstance(value, bool) else str(value), raw)
            else:
                toml = True
                out[key] = (toml_value(value), "toml")
    return out, "toml" if toml else "flags"


VERSIONS_READ = (f"the JobConfig fields of torchtitan {VERSIONS[0]} to {VERSIONS[-2]} and of its main line to "
                 f"9810191b, and {VERSIONS[-1]}'s Trainer.Config")
"""The torchtitan versions torchtitan_keys.KEYS was read from, for messages."""
REFUSES = ("torchtitan refuses a key it does not know: ConfigManager._dict_to_dataclass raises \"Invalid field "
           "names\" on a TOML key (since eadca483, 2025-08-28, before 0.2.0; older versions dropped it), and its "
           "tyro command line, like 0.3.0's, exits on an unknown flag")
"""Why an unknown key stops the job, for messages."""
READ_ALSO = frozenset({"module", "config", "activation_checkpoint.mode"})
"""Keys the reader takes besides KEYS: 0.3.0's --module and --config (config/manager.py ConfigManager._load_config
takes them before tyro) and its `activation-checkpoint:MODE` subcommand (read as activation_checkpoint.mode)."""
CUSTOM_CONFIG = ("job.custom_config_module", "experimental.custom_args_module")
"""0.2.x keys naming a module whose JobConfig extends torchtitan's (config/manager.py _maybe_add_custom_config): its
fields, which the audit cannot read, are keys too."""


def known(key: str) -> bool:
    """Whether torchtitan takes the dotted key (with _): a field of some version read, a key the reader takes, or a
    key inside a field that takes a table (a dict-valued field: its keys are values)."""
    if key in KEYS or key in READ_ALSO:
        return True
    parts = key.split(".")
    return any(".".join(parts[:i]) in KEYS for i in range(1, len(parts)))


def check_keys(groups: list[Settings], merged: dict[str, tuple[Any, str]], s: Settings) -> None:
    """Every key the TOML files and command lines state against the keys torchtitan takes in any version read
    (torchtitan_keys.KEYS): torchtitan refuses a config with another one, so a sure typo of a known key (common.typo_of:
    `tensor_paralel_degree`, or a TOML key spelled with `-`, which torchtitan reads as written) is an error naming
    each, and any other unknown key (an experiment's or an extension's section, a newer version's key) is kept in
    `unknown_keys`, for the audit to report.  Where the job names a custom config module (0.2.x), whose fields may
    be any key, a typo is reported that way too."""
    custom = next((merged[k] for k in CUSTOM_CONFIG if k in merged), None)
    typos = []
    for g in groups:
        for key, (raw, file, line) in g.key_sites.items():
            if known(key):  # a TOML key is read as written; a flag's, as tyro reads it (_tt_key)
                continue
            near = nearest_key(key, KEYS)
            meant = typo_of(raw.removeprefix("--"), KEYS, near)
            if meant is not None and custom is None:
                flag = raw.startswith("--")
                spelled = meant.replace("_", "-") if flag and "-" in raw[2:] and "_" not in raw else meant
                how = (" (torchtitan reads a TOML key as written: `-` is no `_` there)"
                       if not flag and raw.replace("-", "_") == meant else "")
                typos.append(f"{g.keys[key][1] if g.keys else file}: unknown key {raw}; did you mean "
                             f"{'--' if flag else ''}{spelled}?{how}")
                continue
            s.unknown_keys.append(UnknownKey(key=raw, file=file, line=line, suggestion=near))
    if typos:
        raise typo_error(typos, "No torchtitan version read", VERSIONS_READ, REFUSES)


OLDER_NAMES: dict[str, tuple[str, ...]] = {
    "parallelism.tensor_parallel_degree": ("training.tensor_parallel_degree",),
    "parallelism.data_parallel_replicate_degree": ("training.data_parallel_replicate_degree",),
    "parallelism.data_parallel_shard_degree": ("training.data_parallel_shard_degree",),
    "parallelism.fsdp_reshard_after_forward": ("training.fsdp_reshard_after_forward",),
    "parallelism.context_parallel_degree": ("experimental.context_parallel_degree",),
    "parallelism.pipeline_parallel_degree": ("experimental.pipeline_parallel_degree",
                                             "training.pipeline_parallel_degree"),
    "parallelism.pipeline_parallel_schedule": ("experimental.pipeline_parallel_schedule",),
    "parallelism.enable_async_tensor_parallel": ("experimental.enable_async_tensor_parallel",),
    "training.local_batch_size": ("training.batch_size",),
}
"""A key the reader takes -> torchtitan's older names of it, newest first (torchtitan_keys.SPANS: training.batch_size
became local_batch_size at 8570415c, 2025-06-05; the [training] and [experimental] degrees moved to [parallelism] at
785c34c9, 2025-03-18, and training.pipeline_parallel_degree to [experimental] at aafe0e87, 2024-05-21): the same
setting, read as the newer key, and the names the change list picks from (changes.torchtitan_pre3_settings)."""
MICROBATCH_COUNTS = ("parallelism.pipeline_parallel_microbatches", "experimental.pipeline_parallel_microbatches")
"""Keys that counted the pipeline's micro-batches per step before pipeline_parallel_microbatch_size (5e2033c7,
2025-04-07) sized them."""
UNREAD = {"training.data_parallel_degree": "data parallelism of torchtitan before db6b39ac (2024-09-10), with "
                                           "training.data_parallel_type"}
"""Older layout keys the reader does not take: a note, not a silent default."""


def _renamed(keys: dict[str, tuple[Any, str]], s: Settings) -> dict[str, tuple[Any, str]]:
    """The keys with each older name (OLDER_NAMES) read as its newer one, which a torchtitan that takes one does not
    take (the newer wins where both are given); a note for each older layout key not read (UNREAD)."""
    out = dict(keys)
    for new, olds in OLDER_NAMES.items():
        old = next((k for k in olds if k in out), None)
        if old is not None and new not in out:
            out[new] = out[old]
    for key, what in UNREAD.items():
        if key in out:
            s.ignored.append(f"{key}: {what}, not read: priced with torchtitan's default data_parallel_shard_degree "
                             f"-1 ({out[key][1]})")
    return out


def join(groups: list[Settings], paths: list[Path]) -> Reading:
    """A torchtitan job: TOML keys first, then CLI flags on top (torchtitan's precedence), read into the
    layout; the launcher's world size stays with its file.  Every key is checked first (check_keys)."""
    merged: dict[str, tuple[Any, str]] = {}
    for g in sorted(groups, key=lambda g: g.override):  # the TOML files' keys, then the command lines'
        merged |= g.keys or {}
    out = Settings(", ".join(str(p) for p in paths))
    check_keys(groups, merged, out)
    if "module" not in merged and "config" not in merged:  # a TOML file or 0.2.x flags: the change list's spelling
        out.torchtitan_stated, out.torchtitan_form = stated_keys(groups)
        merged = _renamed(merged, out)
    pipeline = _settings(merged, out)
    for g in groups:
        for k in ("world_size", "gpus_per_node", "hosts", "cuda_visible_devices"):  # the launch lines'
            if g.has(k):
                out.put(k, g.value(k), g.sources[k])
        out.ignored += g.ignored
    cfg = out.config_file
    if cfg and not any(Path(cfg[0]).name == Path(p).name for p in paths):
        out.ignored.append(f"--job.config_file {cfg[0]} is not among the audited files: its settings are not read "
                           f"({cfg[1]})")
    out.ignored = list(dict.fromkeys(out.ignored))
    _finish(out, pipeline)
    return out.reading("torchtitan")


TT_DEFAULT_LOCAL_BATCH = 8
TT_DEFAULT_SEQ_LEN = 2048
"""torchtitan's training.local_batch_size and training.seq_len when a TOML leaves them out (v0.2.2 config/job_config.py;
a 0.3.0 line reads its named config's, else 0.3.0's defaults: named_config)."""


def _finish(s: Settings, pipeline: _Pipeline) -> None:
    """Derived torchtitan fields: micro-batch, dp, ZeRO stage, vpp, sequence parallel."""
    pp = s.value("pp", 1)
    tp = s.value("tp", 1)
    local = pipeline.local_batch
    if local is None and not s.has("global_batch"):
        local = (TT_DEFAULT_LOCAL_BATCH, f"torchtitan default training.local_batch_size {TT_DEFAULT_LOCAL_BATCH} "
                                         f"(v0.2.2 config/job_config.py, 0.3.0 config/configs.py)")
    if not s.has("seq_len") and pipeline.named_config is None:
        s.put("seq_len", TT_DEFAULT_SEQ_LEN, f"torchtitan default training.seq_len {TT_DEFAULT_SEQ_LEN} (v0.2.2 "
                                             f"config/job_config.py, 0.3.0 config/configs.py)")
    if local is not None:
        s.put("local_batch", *local)
    pmb = pipeline.pp_microbatch
    if pp > 1:
        s.put("micro_batch_size", *(pmb if pmb is not None else
                                    (1, "torchtitan default pipeline_parallel_microbatch_size 1")))
    elif local is not None:
        s.put("micro_batch_size", *local)
    shard = pipeline.shard
    rep = s.value("dp_replicate", 1)
    reshard = pipeline.reshard or ("default", "")
    world = s.value("world_size")
    shard_value = shard[0] if shard is not None else -1
    if shard_value == -1 and world is not None:
        rest = rep * s.value("cp", 1) * tp * pp
        if world % rest:
            raise InputError(f"torchtitan: world size {world} is not divisible by dp_replicate({rep}) * cp * tp({tp}) "
                             f"* pp({pp}) = {rest}; data_parallel_shard_degree -1 cannot resolve")
        shard_value = world // rest
    if shard_value != -1:
        if s.has("dp_shard") or shard is not None:
            s.put("dp", rep * shard_value, shard[1] if shard else "")
    ev = shard[1] if shard else "torchtitan default data_parallel_shard_degree -1"
    cp = s.value("cp", 1)
    if not fsdp_enabled(shard_value, cp):
        s.put("zero_stage", 0, ev)
    else:
        why = ev if reshard[1] in ("", ev) else f"{ev}; {reshard[1]}"
        if shard_value == 1:
            why += (f" (with context_parallel_degree {cp}: torchtitan shards with FSDP over dp_shard x cp = {cp} "
                    f"ranks whenever cp > 1, ParallelDims.fsdp_enabled in distributed/parallel_dims.py; not DDP)")
        if str(reshard[0]) not in ("default", "always", "never"):
            raise InputError(f"{reshard[1]}: fsdp_reshard_after_forward = {reshard[0]!r}, which torchtitan refuses "
                             f"(ValueError in distributed/fsdp.py); give 'default', 'always' or 'never'")
        if str(reshard[0]) == "default" and pp > 1:
            why += (" (fsdp_reshard_after_forward 'default' keeps the gathered weights between forward and backward "
                    "under pipeline parallelism: ZeRO-2)")
        s.put("zero_stage", 3 if _reshards(str(reshard[0]), pp) else 2, why)
        if rep > 1 and not _reshards(str(reshard[0]), pp):
            s.ignored.append(f"HSDP without resharding after forward (data_parallel_replicate_degree {rep}, "
                             f"fsdp_reshard_after_forward {reshard[0]}): torchtitan shards over dp_shard x cp and "
                             f"replicates {rep} times, priced as ZeRO-2 over all dp x cp ranks (placement's ZeRO-2 "
                             f"has no replicas)")
    sched = pipeline.schedule
    if pp > 1 and not s.has("layers_per_virtual_stage"):
        name = sched[0] if sched else "1f1b"
        s.put("vpp", 1 if name in _TT_SINGLE_STAGE else 2, sched[1] if sched else "torchtitan default schedule 1F1B")
    if not s.has("sequence_parallel"):
        s.put("sequence_parallel", tp > 1, "")
    elif tp == 1:
        s.put("sequence_parallel", False, s.sources["sequence_parallel"])


def _float8_before_030(get, s: Settings) -> None:
    """The Float8 recipe of a torchtitan before 0.3.0 (v0.2.2 components/quantization/float8.py:64-99): the
    `recipe_name` it states (rowwise, rowwise_with_gw_hp, tensorwise), else tensorwise scaling, whose FSDP all-gather
    may carry FP8 weights (`enable_fsdp_float8_all_gather`, with a data-parallel shard), which placement does not
    price (it prices that all-gather at 2 bytes a weight).  0.3.0's Float8 converters scale row-wise, with no
    such flag: its capability row would price a 0.2.x file as rowwise (a user trial: 11.95 s against 11.59 s)."""
    name, nev = get("quantize.linear.float8.recipe_name")
    if name is None:
        name, nev = get("float8.recipe_name")
    if name is not None:
        recipe = "tensorwise" if str(name) == "tensorwise" else "rowwise"
        s.put("recipe.fp8_recipe", recipe, f"{nev} (torchao's {name} recipe: {recipe} scaling)")
        return
    s.put("recipe.fp8_recipe", "tensorwise", "torchtitan before 0.3.0 with no float8 recipe_name: tensorwise "
                                              "scaling (v0.2.2 components/quantization/float8.py:86-99, \"Float8 "
                                              "tensorwise scaled training active\")")
    for key in ("quantize.linear.float8.enable_fsdp_float8_all_gather", "float8.enable_fsdp_float8_all_gather"):
        value, ev = get(key)
        if value in _TRUE:
            s.ignored.append(f"{key}: FSDP all-gathers the Float8 weights in 1 byte where the data-parallel shard "
                             f"is over 1 rank; priced at 2 bytes a weight ({ev})")
            break


def _rotate_method(get, s: Settings) -> None:
    """recipe.cp_comm_type of torchtitan before 0.3.0: PyTorch's context_parallel under its
    context_parallel_rotate_method, "allgather" (the default, v0.2.2 config/job_config.py) gathering K and V whole,
    "alltoall" passing them from rank to rank as a ring does."""
    method, where = get("parallelism.context_parallel_rotate_method")
    if method is None:
        s.put("recipe.cp_comm_type", "all_gather", "torchtitan before 0.3.0: context_parallel_rotate_method "
                                                   "'allgather' by default (v0.2.2 config/job_config.py)")
    elif str(method) in ("allgather", "alltoall"):
        s.put("recipe.cp_comm_type", "all_gather" if str(method) == "allgather" else "p2p",
              f"{where} (PyTorch context_parallel's {method} rotation: "
              f"{'K and V gathered whole' if str(method) == 'allgather' else 'K and V passed rank to rank'})")
    else:
        raise InputError(f"{where}: context_parallel_rotate_method = {method!r}; torchtitan takes 'allgather' or "
                         f"'alltoall'")


def _reshards(policy: str, pp: int) -> bool:
    """FSDP reshards after forward (ZeRO-3; else ZeRO-2) under torchtitan's fsdp_reshard_after_forward `policy`:
    "default" is `not pp_enabled` (torchtitan 0.3.0 distributed/fsdp.py:71-74; 0.2.2
    models/llama3/infra/parallelize.py:327)."""
    return policy == "always" or (policy == "default" and pp == 1)
