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

from placement.audit.readers.common import nearest_key, read_int, start_refusal, typo_error, typo_of, word_check
from placement.audit.readers.megatron import FORCE_BALANCED
from placement.audit.readers.reading import Reading, Settings, UnknownKey
from placement.audit.readers.torchtitan_configs import CONFIGS, DEFAULTS
from placement.audit.readers.torchtitan_keys import HISTORY, KEYS, SPANS, VERSIONS
from placement.audit.shell import Word, default_note
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
    "gpipe": "priced as 1F1B, whose bubble it shares; it runs every micro-batch's forward before the first backward "
             "(torch 2.13 distributed/pipelining/schedules.py:872-876 ScheduleGPipe, fill-drain), so each stage holds "
             "the activations of all the step's micro-batches, where 1F1B holds at most pp of them: the memory "
             "estimate is low",
    "loopedbfs": "priced as Interleaved1F1B; it runs each local stage's forward for every micro-batch before any "
                 "backward (torch 2.13 distributed/pipelining/schedules.py:2706-2720 ScheduleLoopedBFS), so each rank "
                 "holds the activations of all the step's micro-batches on every local stage, where interleaved 1F1B "
                 "holds those in flight: the memory estimate is low",
}
"""torch.distributed.pipelining schedules placement prices as another (placement's schedules: specs.recipe
PipelineSchedule), with what that leaves out: said in the audit, not substituted silently."""
_TRUE = (True, "true", "True")
"""A boolean key's value as TOML or the command line spells true."""
_TT_BOOL = {"training.disable_cuda_graphs", "parallelism.enable_sequence_parallel",
            "parallelism.enable_async_tensor_parallel", "compile.enable", "compile.enable_async_tensor_parallel",
            "training.compile", "parallelism.disable_loss_parallel"}


BARE_SWITCHES = frozenset({
    "precompute_float8_dynamic_scale_for_fsdp", "force_recompute_fp8_weight_in_bwd", "create_seed_checkpoint",
    "compile", "preserve_rng_state", "early_stop",
    # every other `NAME: bool = ...` field of torchtitan v0.1.0 .. v0.2.2 and its main line at b5bcd76c (2026-08-21)
    # whose key KEYS lists (a QA run: NVIDIA's dgxc-benchmarking DeepSeek-V3 launch.sh writes
    # `--debug.moe_force_load_balance` bare, and was refused as "missing its value")
    "all_timesteps", "batch_invariant", "build_mrope_positions", "debug", "debug_graph_passes",
    "debug_moe_force_load_balance", "detect_anomaly", "deterministic", "deterministic_warn_only",
    "early_step_in_backward", "emulate", "gc_debug", "generate_timesteps", "infinite", "initial_load_in_hf",
    "initial_load_in_hf_quantized", "initial_load_model_only", "initial_load_model_weights_only", "last_save_in_hf",
    "last_save_model_only", "last_save_model_weights_only", "load_only", "moe_force_load_balance",
    "numerics_changing_optim", "persistent_workers", "pin_memory", "pipeline_parallel_expert_parallel_overlap",
    "print_after_conversion", "print_args", "print_config", "random_init", "save_for_all_ranks", "should_quantize",
    "spmd_typechecking", "test_mode", "use_flex_attn", "use_for_integration_test", "use_fp8_dim1_cast_triton_kernel",
    "visualize_memory_budget_pareto"})
"""torchtitan bool keys whose names do not start with enable/disable (JobConfig, 0.3.0's configs): written bare,
they are on."""


def _switch(key: str) -> bool:
    """A known torchtitan bool key, which its parsers take written bare (argparse store_true, tyro's flag): one of
    _TT_BOOL, or a JobConfig key named enable*/disable* or in BARE_SWITCHES."""
    name = key.rpartition(".")[2]
    return key in _TT_BOOL or (key in KEYS and (name.startswith(("enable", "disable")) or name in BARE_SWITCHES))


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


PATH_KEY = re.compile(r"(?:^|[._])(?:folder|path|dir)$")
"""torchtitan keys that name a file or folder (job.dump_folder, training.dataset_path, model.hf_assets_path,
checkpoint.folder, profiling.save_traces_folder...): no value of one changes the layout or its price, so one the
files leave to the job's environment (`--job.dump_folder=$LLMB_OUTPUT_DIR`, under $SLURM_JOB_ID in NVIDIA's
dgxc-benchmarking DeepSeek-V3 torchtitan launch.sh) is read as written, not refused as a layout value would be (a QA
run: that launch was refused for its output folder)."""


def _value_check(word: Word, flag: str, key: str) -> None:
    """word_check for the value of a key the audit may price; a path key's value may be left to the environment."""
    if not PATH_KEY.search(key):
        word_check(word, flag)


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
            _value_check(w, flag, key)
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
            if _switch(key):  # a switch written bare: argparse's store_true before 0.2.x, tyro's bool flag since
                out[key] = (truth, w.evidence)  # (a user trial: `--checkpoint.enable` was "missing its value")
                i += 1
                continue
            raise InputError(f"{w.site}: {flag} is missing its value")
        _value_check(nxt, flag, key)
        ev = w.evidence if nxt.origin in (w.origin, w.site) else f"{w.site} [{flag} value from {nxt.origin}]"
        if nxt.default_of and not ev.endswith(default_note(nxt.default_of)):
            ev += default_note(nxt.default_of)
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
    keys: dict[str, tuple[Any, str]] = dataclasses.field(default_factory=dict)
    """The merged keys as read (a 0.3.0 line's over its named config's), for the start-up checks (_refusals)."""


def _settings(keys: dict[str, tuple[Any, str]], s: Settings) -> _Pipeline:
    """The layout fields the merged keys state, into `s`; the keys the join step derives from, returned."""
    def get(key: str):
        return keys.get(key, (None, None))

    def degree(key: str, field: str, *, allow_negative: bool = False) -> int | None:
        value, ev = get(key)
        if value is None:
            return None
        # a degree is at least 1 (-1: filled from the others, where allowed), checked below with both spelled out
        v = read_int(value, key, ev, minimum=-(2**62) if allow_negative else 1)
        if v == 0 or (v < 0 and not (allow_negative and v == -1)):
            fill = " or -1 (torchtitan fills it from the others)" if allow_negative else ""
            raise InputError(f"{ev}: {key} must be >= 1{fill}, got {v}; use 1 or more{' or -1' if fill else ''}")
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
    pipeline = _Pipeline(named_config=f"{get('module')[0]}:{get('config')[0]}" if version3 else None, keys=keys)
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
    _moe_settings(get, s)
    _loss_compile(get, s, version3)
    if not version3:  # torchtitan's chunked loss (ChunkedLossWrapper, 8 chunks) came after v0.2.2
        s.put("recipe.loss_chunks", 1, "torchtitan before 0.3.0 computes the loss over the whole micro-batch's "
                                       "logits (v0.2.2 components/loss.py has no ChunkedLossWrapper)")
        _rotate_method(get, s)
    if not version3:
        _attention_kernel(keys, s)
        _version_conflict(keys, s)
    sp, spev = get("parallelism.enable_sequence_parallel")
    if sp is not None:
        s.put("sequence_parallel", sp in _TRUE, spev)
    conv, cev = get("model.converters")
    if conv is not None:
        names = _converter_names(conv)
        if not version3:
            names = _pre3_converters(s, names, cev)
        if any("float8" in str(c) or str(c).split(".")[-1] == "mx" for c in names):
            s.put("precision", "fp8", cev)
        if any(str(c).split(".")[-1] == "mx" for c in names):  # 0.2.x MXLinearConverter: MXFP8 (recipe mxfp8_cublas,
            s.put("recipe.fp8_recipe", "mxfp8", cev)           # v0.2.2 config/job_config.py:777)
            if not version3:
                _lm_head_converted(get, s, "mx", ["output"])
        elif not version3 and any("float8" in str(c) for c in names):
            _float8_before_030(get, s)
    _float8_switch(get, s)
    name, nev = get("model.name")
    flavor, fev = get("model.flavor")
    module, mev2 = get("module")
    config, cfev = get("config")
    if name is not None or flavor is not None:
        s.put("model_ref", f"{name or '?'}:{flavor or '?'}", nev or fev)
    if module is not None or config is not None:
        s.put("model_ref", f"{module or '?'}:{config or '?'}", mev2 or cfev)
    elif not version3 and name is None and flavor is None:
        # a TOML (or 0.2.x command line) that names no model trains JobConfig's: a user trial's TOML of [job] and
        # [metrics] keys only was priced as --model's job
        s.put("model_ref", f"{TT_DEFAULT_MODEL[0]}:{TT_DEFAULT_MODEL[1]}",
              "default (the files set no model.name or model.flavor: torchtitan's JobConfig Model defaults, v0.2.2 "
              "config/job_config.py:100-105)")
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


LOSS_EAGER = ("its cross-entropy runs eagerly on a float32 copy of the logits (F.cross_entropy(pred.flatten(0, "
              "1).float(), ...), components/loss.py): log_softmax's backward holds three float32 copies of them")
LOSS_COMPILED = "torch.compile fuses the float32 upcast into the cross-entropy"
LOSS_EAGER_SPAN = (("e8977b00", "2024-12-18"), ("bbb1b616", "2025-04-02"))
"""torchtitan commits between which training.compile compiled the model but not the loss: e8977b00 "turning off
compile on loss function" ("compiling loss function causes CUDA errors", train.py), bbb1b616 (build_loss_fn, which
compiles it again under training.compile); from 08b8b244 (2025-08-20) compile.components says."""


def _loss_compile(get, s: Settings, version3: bool) -> None:
    """recipe.loss_eager_float32: torchtitan compiles its loss with compile.enable and "loss" in compile.components
    (08b8b244 on, 0.3.0's BaseLoss._maybe_compile), before them with training.compile, except from e8977b00 to
    bbb1b616 (LOSS_EAGER_SPAN), when never; a file whose keys leave that open is priced eager (the larger peak),
    with a note.  A user trial: torchtitan's eager-loss benchmarks measured 20-36 % above the memory priced."""
    enable, eev = get("compile.enable")
    parts, pev = _components(get)
    old, oev = get("training.compile")
    if version3 or enable is not None or pev is not None:
        if enable is None:
            eev = f"compile.enable false by default ({DEFAULTS['compile.enable'][1]})"
        if pev is None:
            pev = f"compile.components {_shown(parts)} by default ({DEFAULTS['compile.components'][1]})"
        compiled = enable in _TRUE and "loss" in parts
        s.put("recipe.loss_eager_float32", not compiled,
              f"{eev}; {pev}: {LOSS_COMPILED if compiled else LOSS_EAGER}")
        return
    if old not in _TRUE:
        s.put("recipe.loss_eager_float32", True,
              f"{oev or 'nothing compiles the loss (no training.compile or compile.enable)'}: {LOSS_EAGER}")
        return
    (off, off_date), (on, on_date) = LOSS_EAGER_SPAN
    newest, oldest = version_window(s.torchtitan_stated)
    low = JOBCONFIG_DATES[newest[1]] if newest else None
    high = JOBCONFIG_DATES[oldest[1]] if oldest else None
    if (high is not None and high < off_date) or (low is not None and low >= on_date):
        bound = (f"{oldest[0]} is last in torchtitan's JobConfig at {oldest[1]} ({high}), before {off}"
                 if high is not None and high < off_date else
                 f"{newest[0]} is first in torchtitan's JobConfig at {newest[1]} ({low}), from {on} on")
        s.put("recipe.loss_eager_float32", False, f"{oev} ({bound}, where training.compile compiles the loss too): "
                                                  f"{LOSS_COMPILED}")
        return
    inside = low is not None and high is not None and low >= off_date and high < on_date
    span = f"torchtitan from {off} ({off_date}) to {on} ({on_date}) compiled the model but not the loss"
    s.put("recipe.loss_eager_float32", True,
          f"{oev}: {span}" + ("" if inside else ", and the files' keys leave open whether theirs is one of those: "
                                                "priced eager, the larger peak") + f"; {LOSS_EAGER}")
    if not inside:
        s.ignored.append(f"loss: the files' keys leave open whether their torchtitan is from {off} ({off_date}) to "
                         f"{on} ({on_date}), whose training.compile leaves the loss eager, or another, which "
                         f"compiles it; priced eager, the larger peak (--no-loss-eager-float32 prices it compiled)")


def _components(get) -> tuple[list[str], str | None]:
    """compile.components as the files state it (a TOML list, or a flag's comma-separated words) with its evidence,
    else torchtitan's default ["model", "loss"] (v0.2.2 config/job_config.py, 0.3.0 config/configs.py:298) and None."""
    parts, ev = get("compile.components")
    if parts is None:
        return [str(p) for p in DEFAULTS["compile.components"][0]], None
    return [str(p) for p in (parts if isinstance(parts, (list, tuple)) else str(parts).split(",")) if p], ev


def _compiled(get, version3: bool) -> str:
    """What compile.enable compiles: compile.components (`_components`; deepseek_v3_671b compiles the loss only, a
    user trial found it said "the model")."""
    parts, ev = _components(get)
    if ev is None and not version3:
        return "torch.compile of the model and the loss (priced as their eager kernels)"
    if ev is None:
        ev = (f"torchtitan 0.3.0 default compile.components = {_shown(DEFAULTS['compile.components'][0])} "
              f"({DEFAULTS['compile.components'][1]})")
    return f"torch.compile of the {' and the '.join(parts) or 'nothing'} (priced as eager kernels; {ev})"


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


def host_sync_dispatcher(module: str | None, config: str | None) -> str | None:
    """The token dispatcher of torchtitan 0.3.0's shipped `module`/`config` where it syncs with the host, which its
    CUDA-graph check refuses beside expert parallelism (trainer.py:192-209 _validate_cuda_graphs: only MinimalAsyncEP,
    or HybridEP with a non_blocking_capacity_factor, pass), in words; None for one that passes, or a config the
    shipped table (torchtitan_configs.CONFIGS) does not hold.  A config leaves model_registry's moe_comm_backend at
    "standard", the all-to-all dispatcher (models/*/__init__.py; models/common/config_utils.py
    make_token_dispatcher_config).  A user trial: qwen3_30b_a3b at expert_parallel_degree 8 was priced, exit 1."""
    keys = CONFIGS.get(module or "", {}).get(config or "")
    if keys is None:
        return None
    backend = keys.get("model.moe_comm_backend", ("standard",))[0]
    capacity = keys.get("model.non_blocking_capacity_factor", (None,))[0]
    if backend == "minimal_async_ep" or (backend == "hybridep" and capacity is not None):
        return None
    return {"standard": "the all-to-all one (moe_comm_backend 'standard', model_registry's default)",
            "deepep": "DeepEP's", "hybridep": "HybridEP's without a non_blocking_capacity_factor"}.get(backend, backend)


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
    if s.value("pp", 1) > 1:  # a user trial: an ignored line, exit 0, for a job that raises at start
        raise start_refusal(where, f"CUDA graphs with pipeline parallelism {s.value('pp')} ({s.sources['pp']})",
                            "torchtitan 0.3.0 refuses it (trainer.py _validate_cuda_graphs: 'CUDA graphs do not "
                            "support pipeline parallelism yet. Set --training.disable_cuda_graphs.')",
                            "set training.disable_cuda_graphs = true (--training.disable_cuda_graphs)")
    (module, _), (config, cev) = get("module"), get("config")
    dispatcher = host_sync_dispatcher(module, config)
    if s.value("ep", 1) > 1 and dispatcher is not None:  # the named config fixes the dispatcher
        raise start_refusal(where, f"CUDA graphs with expert parallelism {s.value('ep')} ({s.sources['ep']}) under "
                                   f"{config} ({cev}), whose token dispatcher is {dispatcher}",
                            "torchtitan 0.3.0 refuses it (trainer.py _validate_cuda_graphs: 'CUDA graphs support "
                            "only expert parallel token dispatcher configurations without CPU synchronization')",
                            "set training.disable_cuda_graphs = true (--training.disable_cuda_graphs)")
    if s.value("ep", 1) > 1:  # a config the files do not name, or one of the user's own: its dispatcher decides
        s.ignored.append(f"CUDA graphs: torchtitan 0.3.0 refuses them with expert parallelism unless its dispatcher "
                         f"is MinimalAsyncEP or HybridEP with a non_blocking_capacity_factor, and stops at start "
                         f"(trainer.py:179-210 _validate_cuda_graphs) unless --training.disable_cuda_graphs "
                         f"({where}); priced without graphs")
        return
    s.put("recipe.cuda_graphs", "full", f"{where}: the forward and backward of each micro-batch run as one CUDA "
                                        f"graph (trainer.py:613-614 wrap_with_cuda_graph)")


MOE_BACKENDS = {"standard": "alltoall", "deepep": "deepep", "hybridep": "hybridep"}
"""torchtitan's expert-parallel communication backend (0.2.x parallelism.expert_parallel_comm_backend, v0.2.2
config/job_config.py:474 Literal["standard", "deepep"]; 0.3.0 model.moe_comm_backend) -> placement's dispatcher:
"standard" is PyTorch's all-to-all, "deepep" DeepEP's kernels, "hybridep" (0.3.0, and NVIDIA's forks) HybridEP's."""
FORCE_BALANCE_KEYS = ("debug.moe_force_load_balance", "training.debug_moe_force_load_balance")
"""torchtitan's switch that routes every MoE token round robin (v0.2.2 config/job_config.py:995 Debug, "each experts
to get the same amount of tokens"; models/moe/moe.py _debug_force_load_balance_routing); 0.2.0 spelled it
training.debug_moe_force_load_balance."""


DEEPEP_FAMILIES = {"deepseek_v3": "models/deepseek_v3/infra/parallelize.py:100-112",
                   "llama4": "models/llama4/infra/parallelize.py:113-125"}
"""The torchtitan 0.2.x model families whose parallelize reads parallelism.expert_parallel_comm_backend (v0.2.2, from
36a4b694, 2025-12-17, which added DeepEP and the key) -> where it checks DeepEP's degrees; qwen3's and gpt_oss's
parallelize never read the key (to 9810191b, the 0.3.0 config system), so their experts dispatch with the standard
all-to-all whatever it says."""


def _deepep_0_2(s: Settings, family: str, ev: str) -> bool:
    """A 0.2.x `expert_parallel_comm_backend = "deepep"`: an error where DEEPEP_FAMILIES refuse it at start (ep 1:
    ValueError "DeepEP requires expert parallelism (ep_degree > 1)"; etp > 1: NotImplementedError "DeepEP with Expert
    Tensor Parallelism (ETP) is not supported yet"); for a family that does not read the key, the standard
    all-to-all it runs, with a note, and True (the key is read).  A QA trial: a deepseek_v3 file with deepep at ep 1
    was told the key has "no effect without expert parallelism", and a qwen3 one at ep 8 was priced with DeepEP."""
    ep, etp = s.value("ep", 1) or 1, s.value("etp", 1) or 1
    where = DEEPEP_FAMILIES.get(family)
    if where is None:
        if ep > 1:
            s.put("recipe.moe_dispatcher", "alltoall",
                  f"{ev}: torchtitan's {family} does not read expert_parallel_comm_backend (v0.2.2: only "
                  f"{' and '.join(DEEPEP_FAMILIES)} parallelize with DeepEP), so its experts dispatch with the "
                  f"standard all-to-all")
            s.ignored.append(f"expert_parallel_comm_backend 'deepep' ({ev}): torchtitan's {family} does not read it "
                             f"(v0.2.2 models/{family}/infra/parallelize.py); priced as the standard all-to-all it "
                             f"runs")
        return ep > 1
    if ep <= 1:
        raise start_refusal(ev, f"expert_parallel_comm_backend 'deepep' with expert_parallel_degree {ep} "
                                f"({s.sources.get('ep', 'default')}) for {family}",
                            f"torchtitan raises ValueError(\"DeepEP requires expert parallelism (ep_degree > 1). The "
                            f"DeepEP MoE model code does not support EP=1.\") (v0.2.2 {where})",
                            "set expert_parallel_degree above 1, or expert_parallel_comm_backend \"standard\"")
    if etp > 1:
        raise start_refusal(ev, f"expert_parallel_comm_backend 'deepep' with expert_tensor_parallel_degree {etp} "
                                f"({s.sources.get('etp', '')}) for {family}",
                            f"torchtitan raises NotImplementedError(\"DeepEP with Expert Tensor Parallelism (ETP) is "
                            f"not supported yet.\") (v0.2.2 {where})",
                            "set expert_tensor_parallel_degree 1, or expert_parallel_comm_backend \"standard\"")
    return False


def _moe_settings(get, s: Settings) -> None:
    """The MoE dispatch the keys state: the expert-parallel backend as recipe.moe_dispatcher and a forced balanced
    routing as recipe.routing_imbalance 1.0, each with its key as evidence.  A QA run: NVIDIA's dgxc-benchmarking
    DeepSeek-V3 launch (`--parallelism.expert_parallel_comm_backend=deepep --debug.moe_force_load_balance`) was
    priced with the all-to-all dispatcher and real routing, "default", neither key said."""
    for key in ("parallelism.expert_parallel_comm_backend", "model.moe_comm_backend"):
        value, ev = get(key)
        if value is None:
            continue
        stated = True
        name = str(value).lower()
        family = str(get("model.name")[0] or "llama3")
        if key == "parallelism.expert_parallel_comm_backend" and name == "deepep":
            if _deepep_0_2(s, family, ev):
                break
        if s.value("ep", 1) <= 1:
            s.ignored.append(f"{key} {value!r} ({ev}): no effect without expert parallelism (ep 1)")
        elif name in MOE_BACKENDS:
            s.put("recipe.moe_dispatcher", MOE_BACKENDS[name], f"{ev} (torchtitan's {key} {value!r})")
        else:
            s.ignored.append(f"{key} {value!r} ({ev}): a token dispatcher placement does not price; priced as "
                             f"torchtitan's 'standard' all-to-all")
        break
    else:
        stated = False
    if not stated and s.value("ep", 1) > 1:  # the default, said as Megatron's allgather default is (a QA run)
        (module, _), (config, cev) = get("module"), get("config")
        registry = CONFIGS.get(str(module or "").removeprefix("torchtitan.models.").removesuffix(".config_registry"))
        if config is not None and registry is None:
            s.ignored.append(f"the token dispatcher of config {config} ({cev}), which placement's table of torchtitan "
                             f"0.3.0's shipped configs does not hold: priced as model_registry's default "
                             f"moe_comm_backend 'standard' (PyTorch's all-to-all); a config of your own may set "
                             f"another")
        else:
            s.put("recipe.moe_dispatcher", "alltoall",
                  "torchtitan's default token dispatcher, 'standard' (PyTorch's all-to-all): the files set neither "
                  "parallelism.expert_parallel_comm_backend (v0.2.2 config/job_config.py:474) nor model.moe_comm_"
                  "backend (0.3.0 model_registry)")
    for key in FORCE_BALANCE_KEYS:
        value, ev = get(key)
        if value in _TRUE:
            s.put("recipe.routing_imbalance", 1.0, f"{ev} ({key}: {FORCE_BALANCED})")
            break


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


def _version_conflict(keys: dict[str, tuple[Any, str]], s: Settings) -> None:
    """A warning where the files' keys date them to no torchtitan at all (version_window: one key added after another
    was dropped); a user trial's command line passed --training.compile, last in 2025-08, beside a v0.2.2 TOML, and
    the older flag decided the attention kernel without a word."""
    newest, oldest = version_window(s.torchtitan_stated)
    if newest is None or oldest is None or JOBCONFIG_ORDER[newest[1]] <= JOBCONFIG_ORDER[oldest[1]]:
        return
    (new_key, added), (old_key, last) = newest, oldest
    s.warnings.append(
        f"no torchtitan version takes both {old_key} ({keys[old_key][1]}: last in torchtitan's JobConfig at {last}, "
        f"{JOBCONFIG_DATES[last]}) and {new_key} ({keys[new_key][1]}: first at {added}, {JOBCONFIG_DATES[added]}): "
        f"torchtitan refuses a command-line flag its JobConfig lacks, and before eadca483 (2025-08-28) dropped a TOML "
        f"key it did not know, unread; priced with every key as stated, which no torchtitan runs: rename or drop the "
        f"older key")


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
        # the launch lines' own
        for k in ("world_size", "gpus_per_node", "hosts", "cuda_visible_devices", "allocator_conf"):
            if g.has(k):
                out.put(k, g.value(k), g.sources[k])
        # ...and what the launch lines' environment and launcher set (CUDA_LAUNCH_BLOCKING, the binding), where the
        # configuration did not, with their warnings (an NCCL setting the estimate does not price, a dynamic
        # rendezvous): a user trial's torchtitan launch lost all of them
        for field, value in g.recipe.items():
            if not out.has(f"recipe.{field}"):
                out.put(f"recipe.{field}", value, g.sources[f"recipe.{field}"])
        out.warnings += g.warnings
        out.ignored += g.ignored
    cfg = out.config_file
    if cfg and not any(Path(cfg[0]).name == Path(p).name for p in paths):
        tomls = [str(p) for p in paths if str(p).endswith(".toml")]
        if tomls:  # the job loads another file: the given TOML is priced in its place, which the user must know
            env = (" (a ${VAR:-default} of the script: the environment may name another file)" if ":-" in cfg[1]
                   else "")
            out.warnings.append(f"the launch loads --job.config_file {cfg[0]} ({cfg[1]}){env}, not "
                                f"{', '.join(tomls)}: the audit prices {', '.join(tomls)} as the config the job "
                                f"loads; if the job ran {cfg[0]}, audit with that file instead")
        else:
            out.ignored.append(f"--job.config_file {cfg[0]} is not among the audited files: its settings are not "
                               f"read ({cfg[1]})")
    out.ignored = list(dict.fromkeys(out.ignored))
    _finish(out, pipeline)
    _mixed_precision(out, merged)
    return out.reading("torchtitan")


def _mixed_precision(s: Settings, keys: dict[str, tuple[Any, str]]) -> None:
    """The 16-bit precision torchtitan trains in, where nothing else set the precision: training.mixed_precision_param
    bfloat16, as the files state it or as torchtitan defaults it (a user trial: credited to placement's own default).
    A job the readers found runs fp32 ("runs fp32, priced as bf16") keeps that note instead."""
    if s.has("precision") or any("runs fp32, priced as bf16" in x for x in s.ignored):
        return
    value, ev = keys.get("training.mixed_precision_param", (None, None))
    if ev is not None and str(value) == "bfloat16":
        s.put("precision", "bf16", f"{ev} (FSDP's param_dtype and AMP's autocast dtype)")
    elif ev is None:
        default, where = DEFAULTS["training.mixed_precision_param"]
        s.put("precision", "bf16", f"torchtitan's default training.mixed_precision_param {default!r} (0.3.0 {where}; "
                                   f"the same in 0.1.0 config_manager.py and 0.2.x config/job_config.py): FSDP's "
                                   f"param_dtype and AMP's autocast dtype")


TT_DEFAULT_MODEL = ("llama3", "debugmodel")
"""The model a torchtitan 0.2.x job trains when its files name none (JobConfig Model.name and Model.flavor)."""
TT_DEFAULT_LOCAL_BATCH = 8
TT_DEFAULT_SEQ_LEN = 2048
"""torchtitan's training.local_batch_size and training.seq_len when a TOML leaves them out (v0.2.2 config/job_config.py;
a 0.3.0 line reads its named config's, else 0.3.0's defaults: named_config)."""


MICROBATCH_SIZE_JOBCONFIG = "5e2033c7"
"""The JobConfig that added pipeline_parallel_microbatch_size (2025-04-07), whose default 1 sizes the micro-batches;
before it a pipeline split the local batch into pipeline_parallel_microbatches, or pipeline_parallel_degree where
that is unset (parallelisms/pipeline_llama.py:67-68 and pipelining_utils.py:79-81 at 9dec370)."""


def _default_pp_microbatch(s: Settings, pp: int, local: tuple[int, str] | None) -> tuple[int, str]:
    """The pipeline's micro-batch where the files size none: 1 (pipeline_parallel_microbatch_size's default), or,
    where the files' own keys date their torchtitan before MICROBATCH_SIZE_JOBCONFIG, the local batch over pp
    micro-batches (a user trial: Table 5's 405B at 9dec370 ran 8 micro-batches of 4, priced as 32 of 1)."""
    _, oldest = version_window(s.torchtitan_stated)
    if oldest is None or local is None or JOBCONFIG_ORDER[oldest[1]] >= JOBCONFIG_ORDER[MICROBATCH_SIZE_JOBCONFIG]:
        return 1, "torchtitan default pipeline_parallel_microbatch_size 1"
    key, commit = oldest
    if local[0] % pp:
        raise InputError(f"{local[1]}: the local batch {local[0]} does not split into pipeline_parallel_degree {pp} "
                         f"micro-batches, which a torchtitan before {MICROBATCH_SIZE_JOBCONFIG} "
                         f"({JOBCONFIG_DATES[MICROBATCH_SIZE_JOBCONFIG]}) runs where pipeline_parallel_microbatches "
                         f"is unset ({key} dates these files at or before {commit}); set "
                         f"pipeline_parallel_microbatches to a divisor of it")
    return local[0] // pp, (f"{local[1]} over pipeline_parallel_degree {pp} micro-batches: {key} is last in "
                            f"torchtitan's JobConfig at {commit} ({JOBCONFIG_DATES[commit]}), before "
                            f"pipeline_parallel_microbatch_size ({MICROBATCH_SIZE_JOBCONFIG}, "
                            f"{JOBCONFIG_DATES[MICROBATCH_SIZE_JOBCONFIG]}), when an unset "
                            f"pipeline_parallel_microbatches meant pp of them (parallelisms/pipeline_llama.py:67-68 at "
                            f"9dec370)")


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
        s.put("micro_batch_size", *(pmb if pmb is not None else _default_pp_microbatch(s, pp, local)))
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
            # dp is replicas x shards: both lines (a user trial: a DDP job's dp 8 was cited to its shard degree 1)
            both = "; ".join(e for e in (s.sources.get("dp_replicate", "") if rep > 1 else "",
                                         shard[1] if shard else "") if e)
            s.put("dp", rep * shard_value, both)
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
    _fsdp_float8_weights(s, pipeline, shard_value)
    _float8_tp_gathers(s, pipeline)
    _refusals(s, pipeline, shard_value)




FLOAT8_TP_FAMILIES = ("llama3", "llama4", "qwen3")
"""torchtitan's model families whose tensor parallelism runs torchao's Float8ColwiseParallel / Float8RowwiseParallel
under tensor-wise Float8 (v0.2.2 models/{llama3,llama4,qwen3}/infra/parallelize.py enable_float8_tensorwise_tp;
9dec370 parallelisms/parallelize_llama.py:153-160); GPT-OSS passes False (gpt_oss/infra/parallelize.py:99)."""


FLOAT8_TP_CONVERTER = "float8"
"""The converter name torchtitan's parallelize functions test for Float8 tensor parallelism before 0.3.0: `"float8"
in job_config.model.converters`, a list membership (v0.2.2 models/llama3/infra/parallelize.py:77, and likewise
llama4, qwen3, deepseek_v3), which only the converter's first name matches; quantize.dense.float8 (5b5d4685,
2025-09-26) and quantize.linear.float8 (8a2686c4, 2025-09-30, v0.2.0 to v0.2.2: PRE3_CONVERTERS) never do, so
under them tensor parallelism runs plain ColwiseParallel / RowwiseParallel (enable_float8_tensorwise_tp False)."""


def _float8_tp_gathers(s: Settings, pipeline: _Pipeline) -> None:
    """A torchtitan before 0.3.0 with tensor-wise Float8 under tensor parallelism: torchao's Float8ColwiseParallel
    casts each input to FP8 before its all-gather, and Float8RowwiseParallel each output gradient before its
    gather, so the gathers move 1 byte an element (recipe tp_gathers_16bit off), where 0.3.0's row-wise recipes,
    which the framework row describes, gather 16-bit values.  Only where torchtitan's check sees the converter
    (FLOAT8_TP_CONVERTER) or the old Float8 switch: under a renamed converter the gathers are 16-bit (a QA trial: a
    v0.2.2 llama3 file with converters = ["quantize.linear.float8"] and tp 2 was priced with FP8 gathers).
    DeepSeek-V3 refuses tensor-wise Float8 under tensor parallelism where its check sees the converter."""
    tp = s.value("tp", 1) or 1
    if s.value("precision") != "fp8" or s.value("recipe.fp8_recipe") != "tensorwise" or tp <= 1:
        return
    name = str(pipeline.keys.get("model.name", ("llama3", ""))[0] or "llama3")
    conv, cev = pipeline.keys.get("model.converters", (None, None))
    names = _converter_names(conv)
    if names and FLOAT8_TP_CONVERTER not in names:
        if name in FLOAT8_TP_FAMILIES or name == "deepseek_v3":
            s.put("recipe.tp_gathers_16bit", True,
                  f"{cev}: torchtitan's {name} tests `\"float8\" in job_config.model.converters` for Float8 tensor "
                  f"parallelism, which {', '.join(names)} does not match (v0.2.2 models/llama3/infra/parallelize.py:"
                  f"77-86), so its tensor parallelism is plain ColwiseParallel / RowwiseParallel and the all-gathers "
                  f"move 16-bit values")
        return
    if name == "deepseek_v3" and names:
        raise start_refusal(
            cev, f"model.converters {FLOAT8_TP_CONVERTER} (tensor-wise scaling: "
                 f"{s.sources.get('recipe.fp8_recipe', 'no recipe_name')}) with tensor_parallel_degree {tp} "
                 f"({s.sources.get('tp', '')}) for deepseek_v3",
            "torchtitan's DeepSeek-V3 raises NotImplementedError(\"Currently, float8 tensorwise TP is not tested "
            "for deepseekv3\") when it applies tensor parallelism (models/deepseek_v3/infra/parallelize.py from "
            "d54d05a5, 2025-07-11, which added the model, while the converter was named float8, to 5b5d4685)",
            "set float8.recipe_name = \"rowwise\" (its TP then gathers in high precision), or "
            "tensor_parallel_degree 1")
    if name not in FLOAT8_TP_FAMILIES:
        return
    s.put("recipe.tp_gathers_16bit", False,
          f"{s.sources.get('recipe.fp8_recipe', 'tensor-wise Float8')} with tensor_parallel_degree {tp} "
          f"({s.sources.get('tp', '')}): torchtitan's {name} applies torchao's Float8ColwiseParallel and "
          f"Float8RowwiseParallel under tensor-wise scaling, which cast to FP8 before the all-gathers (v0.2.2 "
          f"models/llama3/infra/parallelize.py:83-86, 192-203: enable_float8_tensorwise_tp)")


def _fsdp_float8_weights(s: Settings, pipeline: _Pipeline, shard_value: int) -> None:
    """A torchtitan before 0.3.0 with tensor-wise Float8 and `enable_fsdp_float8_all_gather` over a data-parallel
    shard of more than one rank: torchao casts each weight shard to FP8 before FSDP's all-gather (Float8Linear is
    given the gathered FP8 weight), so the GEMMs do not cast the 16-bit weight every pass (recipe
    fp8_recasts_weights off; 9dec370 torchtitan/float8.py: enable_fsdp_float8_all_gather = dp_shard_enabled and
    the key).  A user trial: such a run was priced with the casts, which its own calibration row prices off."""
    if s.value("precision") != "fp8" or s.value("recipe.fp8_recipe") != "tensorwise" or shard_value in (0, 1):
        return
    for key in FSDP_FLOAT8_GATHER:
        value, ev = pipeline.keys.get(key, (None, None))
        if value in _TRUE:
            s.put("recipe.fp8_recasts_weights", False,
                  f"{ev} (torchao casts each weight shard to FP8 before FSDP's all-gather over "
                  f"{'the data-parallel shard, the rest of the GPUs' if shard_value == -1 else f'{shard_value} ranks'}"
                  f"; the GEMMs take the gathered FP8 weight: torchtitan/float8.py at 9dec370, "
                  f"enable_fsdp_float8_all_gather)")
            return


STOPS = "so this job does not start"
"""Every start-up refusal says so (the audit prices no job torchtitan refuses to start)."""
TT_LAYERS: dict[tuple[str, str], int] = {
    **{("llama3", f): n for f, n in (("debugmodel", 6), ("debugmodel_flex_attn", 6), ("debugmodel_varlen_attn", 6),
                                      ("8B", 32), ("8B_flex", 32), ("8B_varlen", 32), ("70B", 80), ("405B", 126))},
    **{("llama4", f): n for f, n in (("debugmodel", 6), ("17bx16e", 48), ("17bx128e", 48), ("debugmodel_irope", 6),
                                      ("17bx16e_irope", 48), ("17bx128e_irope", 48))},
    **{("deepseek_v3", f): n for f, n in (("debugmodel", 6), ("debugmodel_flex_attn", 6), ("16B", 27), ("236B", 60),
                                           ("671B", 61))},
    **{("qwen3", f): n for f, n in (("debugmodel", 8), ("0.6B", 28), ("1.7B", 28), ("4B", 36), ("8B", 36),
                                     ("14B", 40), ("32B", 64), ("debugmodel_moe", 8), ("30B-A3B", 48),
                                     ("235B-A22B", 94))},
    **{("gpt_oss", f): n for f, n in (("debugmodel", 4), ("20b", 24), ("120b", 36))},
}
"""torchtitan (model.name, model.flavor) -> n_layers, the layer count its pipeline split reads (v0.2.2
models/*/__init__.py model args; 0.3.0's llama3 flavors the same, models/llama3/__init__.py:119-365)."""


def config_layers(module: str, config: str) -> int | None:
    """Transformer layers of the model torchtitan 0.3.0's `module`:`config` builds (the catalog's model of that config,
    its Float8 and MXFP8 twins included, or a shipped flavor the catalog lacks: emit.torchtitan.shipped_model); None
    for a config placement does not know."""
    from placement.catalog import load_model
    from placement.emit.torchtitan import catalog_name, shipped_model

    known = catalog_name(module, config)
    model = load_model(known) if known is not None else shipped_model(module, config)
    return model.num_layers if model is not None else None

SEQ_DIVISOR_SINCE = {"llama3": "db52d57c", "llama4": "db52d57c", "deepseek_v3": "db52d57c", "qwen3": "08b8b244",
                     "gpt_oss": "10d694b5"}
"""Model name -> the first JobConfig version whose parallelize.py asserts seq_len % (tp * 2 * cp) == 0
(ParallelDims.seq_len_divisor, 6204cdff 2025-07-14 for llama3, llama4 and deepseek_v3; qwen3 from f9e8897a,
2025-08-18; gpt_oss from de335b32, 2025-10-22): a file its keys date there or later runs the check."""


def _compiled_model(get) -> tuple[bool, str]:
    """(whether torchtitan compiles the model, the keys that say so): compile.enable with "model" in
    compile.components (`_components`), or the older training.compile."""
    enable, eev = get("compile.enable")
    parts, pev = _components(get)
    old, oev = get("training.compile")
    if old in _TRUE:
        return True, oev
    where = "; ".join(e for e in (eev, pev) if e) or "compile.enable is false by default"
    return enable in _TRUE and "model" in parts, where


def _dated(s: Settings, since: str) -> tuple[str, str] | None:
    """(key, commit) of the stated key that dates the files to torchtitan's JobConfig at `since` or later
    (version_window), else None: the files may be for a torchtitan before it."""
    newest, _ = version_window(s.torchtitan_stated)
    if newest is not None and JOBCONFIG_ORDER[newest[1]] >= JOBCONFIG_ORDER[since]:
        return newest
    return None


def _dating(s: Settings, key_commit: tuple[str, str]) -> str:
    key, commit = key_commit
    return f"the files state {key}, in torchtitan's JobConfig from {commit} ({JOBCONFIG_DATES[commit]})"


def _undated(s: Settings, since: str) -> str:
    newest, _ = version_window(s.torchtitan_stated)
    said = (f"the newest key the files state, {newest[0]}, dates them from {newest[1]} ({JOBCONFIG_DATES[newest[1]]})"
            if newest else "no key the files state dates them")
    return f"{said}, which is before {since}: an older torchtitan runs without this check"


def _refusals(s: Settings, pipeline: _Pipeline, shard_value: int) -> None:
    """The checks torchtitan runs at start on the layout the files state: an InputError naming the check where
    the files' version (version_window; 0.3.0 for --module/--config) runs it, and a note where their keys leave
    the version open."""
    keys = pipeline.keys
    version3 = pipeline.named_config is not None

    def get(key: str):
        return keys.get(key, (None, None))

    tp, pp, cp, rep = s.value("tp", 1), s.value("pp", 1), s.value("cp", 1), s.value("dp_replicate", 1)
    _seq_divisible(s, get, version3, tp, cp)
    if version3:
        _varlen_cp(s, *pipeline.named_config.split(":", 1), cp)
        _rope_length(s, pipeline.named_config.partition(":")[2])
        _tied_pipeline(s, *pipeline.named_config.split(":", 1), pp)
        _expert_mesh(s, shard_value, tp, cp)
    if not version3 and shard_value == 1 and cp == 1 and rep > 1 and (tp > 1 or pp > 1):
        _ddp_only_1d(s, get, tp, pp, rep)
    if pp > 1:
        _pipeline_split(s, get, version3, pp, pipeline.schedule)
    if not version3:
        _float8_moe_1d(s, get, pp, cp)
        _flex_cp(s, get, cp)
    _cp_load_balancer(s, get, version3, cp)
    _async_tp(s, get, version3, tp)
    _memory_budget(s, get, version3)
    _mxfp8_tp_compile(s, get, version3, tp)
    _precision_keys(s, get, version3, tp, pp, cp, shard_value)


def _tied_pipeline(s: Settings, module: str, config: str, pp: int) -> None:
    """torchtitan 0.3.0 refuses weight tying beside a pipeline (frameworks.TORCHTITAN_TIED_PIPELINE): a named config
    whose model ties its embeddings (qwen3_0_6b, qwen3_1_7b) does not start at pp > 1."""
    from placement.emit.torchtitan import shipped_model
    from placement.frameworks import TORCHTITAN_TIED_PIPELINE

    model = shipped_model(module, config)
    if pp > 1 and model is not None and model.tied_embeddings:
        raise InputError(f"{s.sources.get('pp', '')}: pipeline_parallel_degree {pp} with {config}, whose model ties "
                         f"its embeddings: {TORCHTITAN_TIED_PIPELINE}, {STOPS}; give pipeline_parallel_degree 1")


CP_BALANCERS = ("headtail", "ptrr")
"""torchtitan's context_parallel_load_balancer values (0.3.0 config/configs.py:235-241, v0.2.2 config/job_config.py:431
from 0a2107f9): each gives every CP rank an equal share of the causal attention (head-and-tail chunks, or PTRR over
the BlockMask); None turns the balancing off."""


def _cp_load_balancer(s: Settings, get, version3: bool, cp: int) -> None:
    """torchtitan's CP input sharding (0.3.0 distributed/context_parallel/api.py cp_shard, v0.2.2
    distributed/context_parallel.py): `if load_balancer_type:` then headtail or ptrr, any other value a ValueError
    ("Invalid load_balancer_type ...") in the first step's prepare_context_parallel_input (0.3.0 trainer.py:750-759),
    so the job trains no step; None shards the sequence in cp contiguous pieces, and under the causal mask rank r
    attends over (2r + 1) / (2 cp) of it: the last rank runs (2 cp - 1) / cp times the balanced share of the attention
    (1.875x at cp 8), which placement does not price (it prices balanced shards).  A QA trial: --parallelism.
    context_parallel_load_balancer None at cp 8, seq 131,072, was priced as balanced with no word of it."""
    value, where = get("parallelism.context_parallel_load_balancer")
    if value is None or cp <= 1 or str(value) in CP_BALANCERS:
        return
    if str(value) == "None":  # tyro reads None for `str | None` (a TOML cannot state None)
        s.ignored.append(f"{where}: context_parallel_load_balancer None: torchtitan shards the sequence over the "
                         f"{cp} CP ranks in contiguous pieces, and under the causal mask the last rank's attention is "
                         f"{(2 * cp - 1) / cp:.3g}x the balanced share ((2 cp - 1) / cp); placement prices balanced "
                         f"shards (headtail, the default): this job's step is longer than priced by that share of its "
                         f"attention time")
        return
    raise InputError(f"{where}: context_parallel_load_balancer {value!r}: torchtitan takes 'headtail' or 'ptrr' (or "
                     f"None, no balancing, on the 0.3.0 command line), and its first step raises ValueError(\"Invalid "
                     f"load_balancer_type '{value}'. Must be one of: 'headtail', 'ptrr', or None\") sharding the "
                     f"inputs (0.3.0 distributed/context_parallel/api.py cp_shard), so the job trains no step; give "
                     f"--parallelism.context_parallel_load_balancer headtail (the default)")


def _varlen_backend(module: str, config: str) -> str:
    """Where torchtitan 0.3.0's named config `module`:`config` chooses PyTorch's varlen attention ("" where it runs
    another, or the audit has no table of it): its model_registry(attn_backend=...) (torchtitan_configs.CONFIGS
    model.attn_backend), else its module's model_registry default (varlen for gpt_oss, emit.torchtitan.VARLEN_MODULES;
    flex for the others)."""
    from placement.emit.torchtitan import VARLEN_MODULES

    stated = CONFIGS.get(module, {}).get(config, {}).get("model.attn_backend")
    if stated is not None:
        return (f"torchtitan 0.3.0 models/{module}/config_registry.py:{stated[2]} {stated[1]}: "
                f"model_registry(attn_backend={stated[0]!r})") if stated[0] == "varlen" else ""
    if module in VARLEN_MODULES and config in CONFIGS.get(module, {}):
        return f"torchtitan 0.3.0 {VARLEN_MODULES[module]}"
    return ""


def _varlen_cp(s: Settings, module: str, config: str, cp: int) -> None:
    """torchtitan 0.3.0 refuses context parallelism beside PyTorch's varlen attention at start-up, whichever
    spmd_backend: validate_config (distributed/full_dtensor.py:44-53, called by every model's parallelize.py under
    spmd_types, the default, and full_dtensor) raises NotImplementedError for VarlenAttention with CP, and under
    partial_dtensor apply_cp_to_forward does (distributed/context_parallel/api.py:103-104).  The attention is the
    named config's model_registry(attn_backend=...) (torchtitan_configs.CONFIGS model.attn_backend), else its
    module's model_registry default (varlen for gpt_oss, emit.torchtitan.VARLEN_MODULES; flex for the others); no
    flag changes it (model_spec is suppressed from the CLI, trainer.py:75-77).  A QA trial: --module qwen3 --config
    sft_qwen3_8b_math (attn_backend 'varlen') with --parallelism.context_parallel_degree 2 was priced as running,
    'cp all_gather'."""
    if cp <= 1:
        return
    module = module.removeprefix("torchtitan.models.").removesuffix(".config_registry")
    where = _varlen_backend(module, config)
    if not where:
        return
    raise start_refusal(
        s.sources.get("cp", "parallelism.context_parallel_degree"),
        f"parallelism.context_parallel_degree {cp} (cp {cp}) with --module {module} --config {config}, whose model "
        f"runs PyTorch's varlen attention ({where})",
        "torchtitan 0.3.0 refuses context parallelism beside varlen attention at start-up: validate_config raises "
        "NotImplementedError(\"spmd_types + CP is not supported with ScaledDotProductAttention or VarlenAttention. "
        "Use FlexAttention + CP or disable CP.\") under spmd_backend spmd_types (the default) or full_dtensor "
        "(distributed/full_dtensor.py:44-53, models/*/parallelize.py), and under partial_dtensor "
        "apply_cp_to_forward raises \"Variable-length attention CP is not yet supported\" "
        "(distributed/context_parallel/api.py:103-104)",
        "give --parallelism.context_parallel_degree 1, or a config whose model runs FlexAttention (attn_backend "
        "'flex', the default of every module's model_registry but gpt_oss's)")


def _rope_length(s: Settings, config: str) -> None:
    """torchtitan 0.3.0's RoPE length check: its shipped config builds RoPE for a fixed number of positions, and
    Decoder.Config.update_from_config raises for a longer seq_len (emit.torchtitan.seq_refused)."""
    from placement.emit.torchtitan import seq_limit, seq_refused

    seq = s.value("seq_len")
    why = seq_refused(config, seq) if seq is not None else ""
    if why:
        raise InputError(f"{s.sources.get('seq_len', '')}: seq_len {seq}: torchtitan 0.3.0 stops at start-up, "
                         f"{STOPS}: {why}; give a --training.seq_len of {seq_limit(config)} or less, or a config "
                         f"function of your own with a larger max_seq_len")


def _seq_divisible(s: Settings, get, version3: bool, tp: int, cp: int) -> None:
    """torchtitan's seq_len check: 0.3.0 trainer.py:306-315 (565cb810, 2026-06-25) ValueError unless seq_len divides
    by (tp under sequence parallelism) x (2 cp where cp > 1); up to 0.2.2 each model's parallelize.py asserts
    seq_len % (tp * 2 * cp) == 0 (v0.2.2 models/llama3/infra/parallelize.py:69-74, ParallelDims.seq_len_divisor
    from 6204cdff, 2025-07-14; llama3's own tp * cp from 6f6a8972, 2025-06-23)."""
    seq, sev = s.value("seq_len"), s.sources.get("seq_len", "")
    if seq is None:
        return
    if version3:
        div = (tp if s.value("sequence_parallel", tp > 1) else 1) * (2 * cp if cp > 1 else 1)
        if seq % div:
            raise InputError(
                f"{sev}: seq_len {seq} does not divide by {div} (tensor_parallel_degree {tp} under sequence "
                f"parallelism x 2 x context_parallel_degree {cp} where above 1); torchtitan 0.3.0 checks it at start "
                f"(trainer.py:306-315, 565cb810, 2026-06-25: raise ValueError(\"Training sequence length ({seq}) must "
                f"be divisible by {div} for the configured sequence/context parallelism.\")), {STOPS}: give a "
                f"--training.seq_len that {div} divides, e.g. {-(-seq // div) * div}")
        return
    name = str(get("model.name")[0] or "llama3")
    since = SEQ_DIVISOR_SINCE.get(name)
    div = tp * 2 * cp
    if since is None:
        return
    fix = f"give a training.seq_len that {div} divides, e.g. {-(-seq // div) * div}"
    if seq % div:
        dated = _dated(s, since)
        check = (f"models/{name}/infra/parallelize.py (v0.2.2 models/llama3/infra/parallelize.py:69-74; "
                 f"ParallelDims.seq_len_divisor = tp * (cp * 2), 6204cdff, 2025-07-14): assert seq_len % "
                 f"seq_len_divisor == 0, \"Sequence length {seq} must be divisible by the product of TP degree ({tp}) "
                 f"and 2 * CP degree ({cp}).\"")
        if dated is not None:
            raise InputError(f"{sev}: seq_len {seq} does not divide by tensor_parallel_degree {tp} x 2 x "
                             f"context_parallel_degree {cp} = {div}; torchtitan checks it at start in {check}; "
                             f"{_dating(s, dated)}, {STOPS}: {fix}")
        older = name == "llama3" and _dated(s, "adae6b6f") is not None and seq % (tp * cp)
        if older:
            raise InputError(f"{sev}: seq_len {seq} does not divide by tensor_parallel_degree {tp} x "
                             f"context_parallel_degree {cp} = {tp * cp}; torchtitan from 6f6a8972 (2025-06-23) checks "
                             f"it at start (models/llama3/infra/parallelize.py: assert seq_len % (tp * cp) == 0, "
                             f"\"Sequence length {seq} must be divisible by the product of TP degree ({tp}) and CP "
                             f"degree ({cp}).\"; from 6204cdff, 2025-07-14, by {div}); "
                             f"{_dating(s, _dated(s, 'adae6b6f'))}, {STOPS}: {fix}")
        s.ignored.append(f"seq_len {seq} ({sev}) does not divide by tensor_parallel_degree {tp} x 2 x "
                         f"context_parallel_degree {cp} = {div}, which torchtitan from 6204cdff (2025-07-14) refuses "
                         f"at start ({check}); {_undated(s, since)}: priced as if it runs; {fix}")


def _expert_mesh(s: Settings, shard: int, tp: int, cp: int) -> None:
    """torchtitan 0.3.0's expert mesh takes expert_parallel_degree of the dp_shard x cp x tp ranks (efsdp = dp_shard x
    cp x tp // ep, distributed/parallel_dims.py:278-279, unflattened at :336): where ep does not divide them, as beside
    a data_parallel_shard_degree of 1 (DDP), DeviceMesh refuses it at start.  A shard degree of -1 (the rest of the
    world) is left to the layout's own check."""
    ep = s.value("ep", 1)
    ranks = shard * cp * tp
    if ep <= 1 or shard < 1 or ranks % ep == 0:
        return
    raise InputError(
        f"{s.sources.get('ep', 'expert_parallel_degree')}: expert_parallel_degree {ep} does not divide "
        f"data_parallel_shard_degree {shard} x context_parallel_degree {cp} x tensor_parallel_degree {tp} = {ranks}; "
        f"torchtitan 0.3.0's expert mesh takes ep of those ranks (efsdp = dp_shard x cp x tp // ep, "
        f"distributed/parallel_dims.py:278-279; config/configs.py:283-286) and DeviceMesh's unflatten refuses the "
        f"mesh at start (parallel_dims.py:336), {STOPS}: give an expert_parallel_degree that divides {ranks}, or a "
        f"data_parallel_shard_degree whose product with cp x tp it divides (FSDP over the data-parallel ranks)")


def _ddp_only_1d(s: Settings, get, tp: int, pp: int, rep: int) -> None:
    """torchtitan up to 0.2.2 applies DDP (data_parallel_replicate_degree above 1, nothing sharded) only on a 1-D
    mesh: v0.2.2 models/llama3/infra/parallelize.py:148-151 (each model's parallelize.py; from 2f989b9f,
    2024-07-18, until e1847f43, 2026-03-09, after the last JobConfig, when 0.3.0's replicate took its place)."""
    rev = get("parallelism.data_parallel_replicate_degree")[1]
    sev = get("parallelism.data_parallel_shard_degree")[1] or "torchtitan default data_parallel_shard_degree -1"
    other = " and ".join(f"{n} {v}" for n, v in (("tensor_parallel_degree", tp), ("pipeline_parallel_degree", pp))
                         if v > 1)
    check = ("models/llama3/infra/parallelize.py:148-151 (v0.2.2; each model's parallelize.py, from 2f989b9f, "
             "2024-07-18): where data_parallel_replicate is the only data parallelism (no FSDP) and the world is "
             "more than its ranks, raise RuntimeError(\"DDP has not supported > 1D parallelism\")")
    what = (f"{rev}: data_parallel_replicate_degree {rep} with data_parallel_shard_degree 1 ({sev}) is DDP, "
            f"here with {other}")
    fix = (f"shard instead (data_parallel_shard_degree {rep} with data_parallel_replicate_degree 1: FSDP), or keep "
           f"the replicas over a shard degree above 1 (HSDP)")
    dated = _dated(s, "2f989b9f")
    if dated is not None:
        raise InputError(f"{what}; torchtitan refuses it at start, {check}; {_dating(s, dated)}, {STOPS}: {fix}")
    s.ignored.append(f"{what}, which torchtitan from 2f989b9f refuses at start ({check}); {_undated(s, '2f989b9f')}: "
                     f"priced as DDP; {fix}")


def _pipeline_split(s: Settings, get, version3: bool, pp: int, schedule: tuple[str, str] | None) -> None:
    """torchtitan's pipeline split checks (from 3c84ce09, 2025-07-30; v0.2.2 distributed/pipeline_parallel.py:85-107
    and generate_llm_fqn_per_model_part :283-296; 0.3.0 :240-256, :419-428): a single-stage schedule (1F1B, GPipe)
    takes exactly one stage per rank, a multi-stage one at least two, and neither the first nor the last stage's
    weight (pipeline_parallel_first/last_stage_less_layers) may exceed the fewest layers a stage gets."""
    if get("parallelism.module_fqns_per_model_part")[0] is not None:
        return
    name = str(get("module")[0] if version3 else (get("model.name")[0] or "llama3"))
    flavor, fev = get("config") if version3 else get("model.flavor")
    if version3:  # 0.3.0 names a config function, not a flavor: the model it builds (a user trial: a 1F1B launch
        # with two stages per rank, which torchtitan refuses, was priced as interleaved for want of a layer count)
        layers = config_layers(name, str(flavor)) if flavor is not None else None
    else:
        layers = TT_LAYERS.get((name, str(flavor))) if flavor is not None else None
    lps, lev = s.value("layers_per_virtual_stage"), s.sources.get("layers_per_virtual_stage", "")
    first = s.value("first_stage_less_layers", 1)
    last = s.value("last_stage_less_layers", 1)
    stated = [k for k in ("parallelism.pipeline_parallel_layers_per_stage",
                          "parallelism.pipeline_parallel_first_stage_less_layers",
                          "parallelism.pipeline_parallel_last_stage_less_layers") if get(k)[0] is not None]
    if layers is None or not stated:
        if stated and layers is None:
            s.ignored.append(f"pipeline split ({', '.join(stated)}): model {name}:{flavor} is no flavor whose layer "
                             f"count the audit holds, so torchtitan's start-up checks of the split (one stage per "
                             f"rank for 1F1B and GPipe, two or more for the others, first and last stage weights at "
                             f"most the fewest layers a stage gets: distributed/pipeline_parallel.py) are not run")
        return
    name_s, sev = schedule if schedule else ("1f1b", "torchtitan default pipeline_parallel_schedule 1F1B")
    single = name_s in _TT_SINGLE_STAGE
    where = "torchtitan 0.3.0 distributed/pipeline_parallel.py" if version3 else \
        "v0.2.2 distributed/pipeline_parallel.py"
    lines = (246, 254, 423, 427) if version3 else (98, 106, 291, 295)
    dated = None if version3 else _dated(s, "3c84ce09")
    when = ("torchtitan 0.3.0" if version3 else
            f"{_dating(s, dated)}" if dated else "")
    src = f"{fev} ({name}:{flavor} has {layers} layers)"
    problems = []
    eff = layers + first + last
    if lps is not None:
        stages = -(-eff // lps)
        if stages % pp:
            return  # LaunchLayout.virtual_stages refuses it
        per_rank = stages // pp
        info = (f"Model has {layers} layers with pipeline_parallel_layers_per_stage={lps}, resulting in "
                f"num_virtual_stages={stages} across {pp} PP ranks")
        if single and per_rank != 1:
            problems.append((f"{lev}: pipeline_parallel_layers_per_stage {lps} gives ceil(({layers} layers + {first} "
                             f"+ {last}) / {lps}) = {stages} stages, {per_rank} per rank on pipeline_parallel_degree "
                             f"{pp}, under the single-stage schedule {name_s} ({sev}); {src}",
                             f"{where}:{lines[0]} (3c84ce09, 2025-07-30): raise ValueError(\"Single stage schedule "
                             f"requires exactly 1 stage per rank, but got {per_rank} stages per rank. {info}.\")",
                             f"give pipeline_parallel_layers_per_stage {_fit_lps(eff, pp, True)} (one stage per "
                             f"rank), or a multi-stage schedule (Interleaved1F1B)"))
        if not single and per_rank < 2:
            problems.append((f"{lev}: pipeline_parallel_layers_per_stage {lps} gives ceil(({layers} layers + {first} "
                             f"+ {last}) / {lps}) = {stages} stages, {per_rank} per rank on pipeline_parallel_degree "
                             f"{pp}, under the multi-stage schedule {name_s} ({sev}); {src}",
                             f"{where}:{lines[1]} (3c84ce09, 2025-07-30): raise ValueError(\"Multi-stage schedule "
                             f"requires at least 2 stages per rank, but got {per_rank} stages per rank. {info}.\")",
                             f"give a smaller pipeline_parallel_layers_per_stage ({_fit_lps(eff, pp, False)} makes "
                             f"two stages or more per rank), or a single-stage schedule (1F1B)"))
    else:
        per_rank = 1 if single else 2
        stages = pp * per_rank
    if not problems and stages <= eff:
        least = eff // stages
        for weight, key, text, line in ((first, "first_stage_less_layers", "input_weight", lines[2]),
                                        (last, "last_stage_less_layers", "output_weight", lines[3])):
            if weight > least:
                kev = s.sources.get(key, f"torchtitan default pipeline_parallel_{key} 1")
                problems.append((f"{kev}: pipeline_parallel_{key} {weight} is more than the fewest layers a stage "
                                 f"gets, ({layers} layers + {first} + {last}) // {stages} stages = {least}; {src}",
                                 f"{where}:{line} "
                                 f"generate_llm_fqn_per_model_part (3c84ce09, 2025-07-30): raise ValueError("
                                 f"\"{text} ({weight}) exceeds minimum layers per stage ({least}).\")",
                                 f"give pipeline_parallel_{key} {least} or less"))
                break
    if not problems:
        return
    what, check, fix = problems[0]
    if version3 or dated is not None:
        raise InputError(f"{what}; torchtitan checks the split at start, {check}; {when}, {STOPS}: {fix}")
    older = _dated(s, "f64cf3c1")
    old = _old_split_check(layers, pp, lps, single) if lps is not None and older is not None else None
    if old is not None and get("parallelism.pipeline_parallel_split_points")[0] is None:
        raise InputError(f"{what}; torchtitan checks the split at start, from 3c84ce09 {check}, and from f64cf3c1 "
                         f"(2025-04-15) to then distributed/pipeline.py generate_split_points (at 3c84ce09^, "
                         f"embedding and output weighing one layer each): {old}; {_dating(s, older)}: either check "
                         f"fails, {STOPS}: {fix}")
    s.ignored.append(f"{what}, which torchtitan from 3c84ce09 refuses at start ({check}); {_undated(s, '3c84ce09')} "
                     f"(with another split arithmetic and its own checks, distributed/pipeline.py): priced as the "
                     f"files state it; {fix}")


def _fit_lps(eff: int, pp: int, single: bool) -> int:
    """A pipeline_parallel_layers_per_stage torchtitan takes for `eff` effective layers on `pp` ranks: the smallest
    giving one stage per rank (single), else the largest giving a multiple of pp stages, two or more per rank."""
    fits = [n for n in range(1, eff + 1) if -(-eff // n) % pp == 0 and
            (-(-eff // n) == pp if single else -(-eff // n) >= 2 * pp)]
    return (min(fits) if single else max(fits)) if fits else 1


def _old_split_check(layers: int, pp: int, lps: int, single: bool) -> str | None:
    """The check torchtitan's generate_split_points (distributed/pipeline.py, f64cf3c1 to 3c84ce09^:69-87) fails
    on pipeline_parallel_layers_per_stage `lps`, quoted, or None where it passes: a rigid fit of the layers plus
    the embedding's and the output's one each."""
    eff = layers + 2
    if eff % pp:
        return f"assert num_effective_layers % pp_degree == 0 fails ({eff} % {pp})"
    per_rank = eff // pp
    if per_rank % lps:
        return f"assert num_layers_per_pipeline_rank % num_layers_per_stage == 0 fails ({per_rank} % {lps})"
    spr = per_rank // lps
    if single and spr != 1:
        return f"assert \"Number of stages per rank ({spr}) must be 1 for single-stage schedules.\""
    if not single and spr < 2:
        return f"assert \"Number of stages per rank ({spr}) must be >= 2 for multi-stage schedules.\""
    return None


def _async_tp(s: Settings, get, version3: bool, tp: int) -> None:
    """Async TP needs the model compiled: 0.3.0 config/configs.py:303-310 (73759474, 2026-08-12) CompileConfig
    refuses compile.enable_async_tensor_parallel without it; v0.2.2 distributed/tensor_parallel.py:20-23 (from
    cab22e73, 2025-08-22; before it, from 8849580d, 2024-08-03, "Async TP requires --training.compile") refuses
    parallelism.enable_async_tensor_parallel under tensor parallelism without it."""
    compiled, cev = _compiled_model(get)
    if version3:
        on, ev = get("compile.enable_async_tensor_parallel")
        if on in _TRUE and not compiled:
            raise InputError(f"{ev}: compile.enable_async_tensor_parallel without the model compiled ({cev}); "
                             f"torchtitan 0.3.0 checks it as it reads the config (config/configs.py:303-310, "
                             f"73759474, 2026-08-12: raise ValueError(\"Async TP requires 'model' in "
                             f"--compile.components and --compile.enable\")), {STOPS}: add --compile.enable (with "
                             f"'model' in --compile.components) or drop --compile.enable_async_tensor_parallel")
        return
    on, ev = get("parallelism.enable_async_tensor_parallel")
    if on not in _TRUE or tp == 1 or compiled:
        return
    check = ("v0.2.2 distributed/tensor_parallel.py:20-23 maybe_enable_async_tp, called under tensor parallelism "
             "(cab22e73, 2025-08-22): raise RuntimeError(\"Async TP requires 'model' in --compile.components and "
             "--compile.enable\"); from 8849580d (2024-08-03) to then, models/llama3/parallelize: raise "
             "RuntimeError(\"Async TP requires --training.compile\")")
    what = f"{ev}: enable_async_tensor_parallel with tensor_parallel_degree {tp} and the model not compiled ({cev})"
    fix = ("compile the model (compile.enable = true with \"model\" in compile.components; training.compile = true "
           "before 08b8b244, 2025-08-20) or drop enable_async_tensor_parallel")
    dated = _dated(s, "40210ead")
    if dated is not None:
        raise InputError(f"{what}; torchtitan refuses it at start, {check}; {_dating(s, dated)}, {STOPS}: {fix}")
    s.ignored.append(f"{what}, which torchtitan from 8849580d refuses at start ({check}); {_undated(s, '40210ead')} "
                     f"(before it, torchtitan turned compile on itself): priced without compile; {fix}")


def _memory_budget(s: Settings, get, version3: bool) -> None:
    """activation_checkpoint.mode memory_budget needs the model compiled: 0.3.0 trainer.py:170-177 (c5d93d10,
    2026-06-15) ValueError; v0.2.2 distributed/activation_checkpoint.py:227 assert (b2763873, 2025-10-09, which added
    the mode: before it, apply_ac raises "Invalid AC mode" for any mode but full and selective, from 347ddc0d,
    2024-07-10)."""
    mode, mev = get("activation_checkpoint.mode")
    if str(mode).replace("-", "_") != "memory_budget":
        return
    compiled, cev = _compiled_model(get)
    if version3:
        if not compiled:
            raise InputError(f"{mev}: activation checkpointing memory_budget without the model compiled ({cev}); "
                             f"torchtitan 0.3.0 checks it at start (trainer.py:170-177, c5d93d10, 2026-06-15: raise "
                             f"ValueError(\"Memory budget activation checkpointing requires the model to be compiled: "
                             f"set --compile.enable and include 'model' in --compile.components.\")), {STOPS}: add "
                             f"--compile.enable, or another activation-checkpoint mode")
        return
    _, oldest = version_window(s.torchtitan_stated)
    before = oldest is not None and JOBCONFIG_ORDER[oldest[1]] < JOBCONFIG_ORDER["b2763873"]
    if before:
        key, commit = oldest
        raise InputError(f"{mev}: activation_checkpoint mode memory_budget, which torchtitan has from b2763873 "
                         f"(2025-10-09) only; the files state {key}, last in torchtitan's JobConfig at {commit} "
                         f"({JOBCONFIG_DATES[commit]}), and before b2763873 apply_ac refuses it at start "
                         f"(models/llama3/infra/parallelize.py, v0.1.0 :231-235: raise ValueError(\"Invalid AC mode: "
                         f"memory_budget. Valid modes: ('full', 'selective')\")), {STOPS}: give mode \"selective\" or "
                         f"\"full\"")
    if not compiled:
        raise InputError(f"{mev}: activation_checkpoint mode memory_budget without the model compiled ({cev}); "
                         f"torchtitan checks it at start (v0.2.2 distributed/activation_checkpoint.py:227, b2763873, "
                         f"2025-10-09: assert model_compile_enabled, \"Memory budget mode requires model to be "
                         f"compiled\"; a torchtitan before b2763873 has no such mode and raises "
                         f"ValueError(\"Invalid AC mode: memory_budget...\")), {STOPS}: set compile.enable = true "
                         f"with \"model\" in compile.components, or give mode \"selective\" or \"full\"")


def _mxfp8_tp_compile(s: Settings, get, version3: bool, tp: int) -> None:
    """torchtitan's MXFP8 converter refuses tensor parallelism under torch.compile: v0.2.2
    components/quantization/mx.py:46-52 (f3e2a75e, 2025-07-24, until 2b976ee8, 2026-03-10: not in 0.3.0)."""
    conv, cev = get("model.converters")
    if version3 or conv is None or tp == 1:
        return
    names = conv if isinstance(conv, list) else [c for c in str(conv).split(",") if c]
    if not any(str(c).split(".")[-1] == "mx" for c in names):
        return
    compiled, how = _compiled_model(get)
    if not compiled:
        return
    check = ("v0.2.2 components/quantization/mx.py:46-52 (f3e2a75e, 2025-07-24): assert not (model_compile_enabled "
             "and tensor_parallel_degree > 1), \"TP not yet supported with torch.compile for mxfp8\"")
    what = (f"{cev}: the MXFP8 converter \"mx\" with tensor_parallel_degree {tp} and the model compiled ({how})")
    fix = "compile nothing (compile.enable = false), or run tensor_parallel_degree 1"
    dated = _dated(s, "f3e2a75e")
    if dated is not None:
        raise InputError(f"{what}; torchtitan refuses it at start, {check}; {_dating(s, dated)}, {STOPS}: {fix}")
    s.ignored.append(f"{what}, which torchtitan from f3e2a75e refuses at start ({check}); "
                     f"{_undated(s, 'f3e2a75e')}: priced as if it runs; {fix}")


def _precision_keys(s: Settings, get, version3: bool, tp: int, pp: int, cp: int, shard_value: int) -> None:
    """training.mixed_precision_param, training.dtype and training.enable_cpu_offload, and torchtitan's mixed
    precision under TP or PP without FSDP (up to 0.2.2): what they run that the audit prices otherwise, said."""
    mp, mpev = get("training.mixed_precision_param")
    dtype, dev = get("training.dtype")
    if str(mp) == "float32":
        s.ignored.append(f"training.mixed_precision_param float32 ({mpev}): FSDP's param_dtype (and AMP's autocast "
                         f"dtype without FSDP) is float32, so the job runs fp32 GEMMs and gathers fp32 weights "
                         f"(v0.2.2 models/llama3/infra/parallelize.py:134, distributed/utils.py:260-263): runs fp32, "
                         f"priced as bf16")
    if str(dtype) == "bfloat16":
        s.ignored.append(f"training.dtype bfloat16 ({dev}): torchtitan builds the model in bfloat16, so parameters, "
                         f"gradients and optimizer state are bfloat16 with no fp32 master copy (v0.2.2 train.py:149 "
                         f"set_default_dtype, config/job_config.py:275-280): priced with fp32 master weights and "
                         f"optimizer state")
    off, oev = get("training.enable_cpu_offload")
    if off in _TRUE:
        s.ignored.append(f"training.enable_cpu_offload ({oev}): FSDP's CPUOffloadPolicy keeps parameters, gradients "
                         f"and optimizer state in host memory and steps the optimizer on the CPU (v0.2.2 "
                         f"models/llama3/infra/parallelize.py:137, 315-316): not priced: priced on the GPUs")
    if version3 or shard_value != 1 or cp > 1 or (tp == 1 and pp == 1):
        return
    if str(dtype) == "bfloat16":
        return
    where = dev or "torchtitan default training.dtype float32 (v0.2.2 config/job_config.py:275)"
    s.ignored.append(f"mixed precision off: with tensor_parallel_degree {tp} and pipeline_parallel_degree {pp} and no "
                     f"FSDP (data_parallel_shard_degree 1, context_parallel_degree 1), torchtitan runs no autocast "
                     f"(v0.2.2 distributed/utils.py:251-256 maybe_enable_amp, 0b44d4c4, 2025-06-16: \"Mixed "
                     f"precision training with TP or PP is only supported when FSDP/HSDP/CP is enabled.\"; before "
                     f"0b44d4c4 it had no autocast at all) and trains in training.dtype, float32 ({where}): runs "
                     f"fp32, priced as bf16; shard the weights (data_parallel_shard_degree above 1) or set "
                     f"training.dtype = \"bfloat16\"")


FSDP_FLOAT8_GATHER = ("quantize.linear.float8.enable_fsdp_float8_all_gather", "float8.enable_fsdp_float8_all_gather")
"""torchtitan's switch to all-gather the FSDP weight shards as Float8, by its 0.2.x and older names."""


def _fsdp_float8_gather_note(get, s: Settings, keys: tuple[str, ...]) -> None:
    """The ignored line for the first of `keys` the files turn on: the 1-byte weight all-gather, priced at 2 bytes."""
    for key in keys:
        value, ev = get(key)
        if value in _TRUE:
            s.ignored.append(f"{key}: FSDP all-gathers the Float8 weights in 1 byte where the data-parallel shard "
                             f"is over 1 rank; priced at 2 bytes a weight ({ev})")
            return


PRE3_CONVERTERS = ((("float8", "mx"), None, "0f34257d"),
                   (("quantize.dense.float8", "quantize.moe.float8", "quantize.dense.mx", "quantize.moe.mx"),
                    "5b5d4685", "5b5d4685"),
                   (("quantize.linear.float8", "quantize.grouped_mm.float8", "quantize.linear.mx",
                     "quantize.grouped_mm.mx"), "8a2686c4", None))
"""The model converters torchtitan before 0.3.0 registers, by the JobConfig commits they run with (first, last; None:
open): "float8" and "mx" (components/quantization/float8.py and mx.py register_model_converter, 57387af0 and
fb17e251, 2025) until 5b5d4685 (2025-09-26) renamed them quantize.dense/moe.*, and 8a2686c4 (2025-09-30)
quantize.linear/grouped_mm.* (v0.2.0 to v0.2.2).  A name the job's torchtitan does not register stops it at start:
protocols/model_converter.py ModelConvertersContainer looks each up, _registry_model_converter_cls[name] (KeyError)."""
PRE3_GROUPED = ("quantize.moe.float8", "quantize.moe.mx", "quantize.grouped_mm.float8", "quantize.grouped_mm.mx")
"""Converters of the MoE experts' grouped GEMMs only (torchao's scaled grouped GEMMs, the `fqns` the file lists):
placement prices a job's GEMMs in one precision, so these are a note, the job priced in its other GEMMs' precision."""


def _converter_names(conv: Any) -> list[str]:
    """model.converters as names: a TOML list, or a comma-separated flag value (None: none)."""
    if conv is None:
        return []
    return [str(c) for c in conv] if isinstance(conv, list) else [c for c in str(conv).split(",") if c]


def _pre3_converters(s: Settings, names: list[str], where: str) -> list[str]:
    """The model converters of a torchtitan before 0.3.0 that it registers where the files' keys date them
    (PRE3_CONVERTERS); a name it does not register stops the job (start_refusal), one the dating leaves open is a
    note.  Returns the names priced: the grouped-GEMM converters (PRE3_GROUPED) are a note and priced without."""
    newest, oldest = version_window(s.torchtitan_stated)
    end = len(JOBCONFIG_ORDER)
    low = JOBCONFIG_ORDER[newest[1]] if newest else -1
    high = JOBCONFIG_ORDER[oldest[1]] if oldest else end
    windows = [(group, JOBCONFIG_ORDER[a] if a else -1, JOBCONFIG_ORDER[b] if b else end,
                f"{'from ' + a if a else 'up to ' + b}{' to ' + b if a and b and a != b else ''}"
                f"{' only' if a and a == b else ''}") for group, a, b in PRE3_CONVERTERS]
    dated = "; ".join(([_dating(s, newest)] if newest else []) + (
        [f"the files state {oldest[0]}, in torchtitan's JobConfig up to {oldest[1]} ({JOBCONFIG_DATES[oldest[1]]})"]
        if oldest else [])) or "no key the files state dates them"
    fitting = [group for group, a, b, _ in windows if a <= high and b >= low]
    check = ("torchtitan looks each model.converters name up at start (protocols/model_converter.py "
             "ModelConvertersContainer: _registry_model_converter_cls[name], a KeyError for a name it does not "
             "register)")
    for name in names:
        kind, grouped = ("mx" if name.endswith("mx") else "float8"), name in PRE3_GROUPED
        fixes = dict.fromkeys(n for group in fitting for n in group
                              if n.endswith(kind) and (n in PRE3_GROUPED) == grouped)
        fix = (f"name it {' or '.join(fixes)}, as the files' torchtitan registers it" if fixes
               else "name a converter the files' torchtitan registers")
        mine = [(a, b, span) for group, a, b, span in windows if name in group]
        if not mine:
            raise start_refusal(where, f"model.converters {name!r}, which no torchtitan registers", check, fix)
        runs = [(a, b) for a, b, _ in mine if a <= high and b >= low]
        spans = " and ".join(span for _, _, span in mine)
        if not runs:
            raise start_refusal(where, f"model.converters {name!r}, registered with torchtitan's JobConfig {spans}, "
                                       f"not the files' ({dated})", check, fix)
        if not any(a <= low and b >= high for a, b in runs):
            s.ignored.append(f"model.converters {name!r} ({where}): registered with torchtitan's JobConfig {spans}, "
                             f"which the files' keys leave open ({dated}); priced as if it runs, and a torchtitan "
                             f"that does not register it stops at start ({check}): {fix}")
    grouped = [n for n in names if n in PRE3_GROUPED]
    if grouped:
        s.ignored.append(f"model.converters {', '.join(grouped)} ({where}): the MoE experts' grouped GEMMs in FP8 "
                         f"(torchao's scaled grouped GEMMs, float8 row-wise or MXFP8, on the modules its fqns name), "
                         f"the rest "
                         f"as the other converters leave them; placement prices one precision for every GEMM: priced "
                         f"without it, the experts' GEMMs in the other GEMMs' precision (a job whose experts run FP8 "
                         f"is faster than priced)")
    return [n for n in names if n not in PRE3_GROUPED]


FLEX_CP_REFUSED = {"debugmodel_flex_attn": "34d815c0", "16B": "cd337db6", "236B": "cd337db6", "671B": "cd337db6"}
"""torchtitan's deepseek_v3 flavors that run FlexAttention (FLEX_FLAVORS) -> the first JobConfig commit at which
both the flavor runs it and context parallelism beside it is refused: debugmodel_flex_attn from 415f8344
(2025-07-21) and the refusal from 177b295d (2025-07-22, before JobConfig 34d815c0); 16B, 236B and 671B run it from
f738a03b (2025-08-22, before JobConfig cd337db6).  The refusal stands to c6856e3c (2026-03-10, after 0.3.0's config
system), which enabled FlexAttention with context parallelism."""
DEEPSEEK_CP_CHECK = ("torchtitan's DeepSeek-V3 raises NotImplementedError at start (v0.2.0 "
                     "models/deepseek_v3/infra/parallelize.py:64-66, v0.2.1 model/args.py:103-106: \"CP support for "
                     "FlexAttention is still in progress.\"; v0.2.2 infra/parallelize.py:68-73: \"Context Parallel "
                     "only supports SDPA attention.\")")
LLAMA3_FLEX_CP = "0a2107f9"
"""torchtitan #2145 "[CP] Enable FlexCP for llama3" (0a2107f9, 2026-01-20, a JobConfig commit; in v0.2.2): from it
llama3's model args refuse context parallelism beside varlen attention only (v0.2.2 models/llama3/model/args.py:57-65),
and FlexAttention runs it, all-gathering K and V (distributed/context_parallel.py _ContextParallel FLEX)."""
ATTN_CP_REFUSED: dict[tuple[str, str], tuple[str | None, str | None, str]] = {
    **{("deepseek_v3", f): (since, None, DEEPSEEK_CP_CHECK) for f, since in FLEX_CP_REFUSED.items()},
    **{("llama3", f): ("34d815c0", LLAMA3_FLEX_CP,
                       "torchtitan's Llama 3 raises NotImplementedError(\"CP support for FlexAttention is still in "
                       "progress.\") at start beside FlexAttention (177b295d, 2025-07-22; v0.2.0 "
                       "models/llama3/infra/parallelize.py:70-72, v0.2.1 model/args.py:57-63) until 0a2107f9 "
                       "(2026-01-20, \"[CP] Enable FlexCP for llama3\", v0.2.2), from which it runs it")
       for f in ("debugmodel_flex_attn", "8B_flex")},
    **{("llama3", f): (None, None,
                       "torchtitan's Llama 3 raises NotImplementedError at start beside varlen attention in every "
                       "version that has the flavor (from f8fa21e1, 2025-11-21): v0.2.1 models/llama3/model/"
                       "args.py:57-63 (\"CP support for FlexAttention is still in progress.\", any attn_type but "
                       "sdpa), v0.2.2 args.py:57-65 (\"Context Parallel only supports SDPA and FlexAttention. Got "
                       "attn_type='varlen'. Varlen attention is not supported with CP.\")")
       for f in ("debugmodel_varlen_attn", "8B_varlen")},
    **{("llama4", f): ("34d815c0", None,
                       "torchtitan's Llama 4 raises NotImplementedError at start beside FlexAttention, which its "
                       "iRoPE flavors run for their chunked-attention layers (177b295d, 2025-07-22; v0.2.0 "
                       "models/llama4/infra/parallelize.py:74-76: \"CP support for FlexAttention is still in "
                       "progress.\"; v0.2.1 model/args.py:79-83: \"CP support is only supported for SDPA.\"; v0.2.2 "
                       "model/args.py:79-86: \"Context Parallel only supports SDPA attention. ...\")")
       for f in ("debugmodel_irope", "17bx16e_irope", "17bx128e_irope")},
    **{("gpt_oss", f): (None, None,
                        "torchtitan's gpt-oss raises NotImplementedError(\"CP support for gpt-oss model is still in "
                        "progress.\") at start whatever its attention, in every 0.2.x version that has the model "
                        "(de335b32, 2025-10-22; v0.2.2 models/gpt_oss/model/args.py:89-92)")
       for f in ("debugmodel", "20b", "120b")},
}
"""torchtitan 0.1.0 to 0.2.2 (model.name, model.flavor) whose attention (FLEX_FLAVORS) refuses context parallelism
at start -> (the first JobConfig commit at which both the flavor runs that attention and the refusal stands, None
where every version with the flavor refuses; the JobConfig commit from which it runs CP, None where no 0.2.x does;
torchtitan's check).  A QA trial: llama3 8B_varlen and 8B_flex files at context_parallel_degree 2 could not be
audited at all (--model llama3-8b was 'another model'), and llama4 17bx16e_irope at cp 2 was priced as running."""


def attention_refuses_cp(model_ref: str | None, stated: Iterable[str], old: bool) -> str:
    """Why the torchtitan that runs these files refuses context parallelism beside their model's attention ("" where
    it runs it), for the audit's best plan, which keeps to what that torchtitan starts (a QA trial: llama3 8B_varlen
    at cp 1, seq 131,072, was told to switch to cp 8, which every torchtitan with the flavor refuses): an older file's
    flavor (ATTN_CP_REFUSED) unless its keys date it from the version that runs it; a 0.3.0 line's named config that
    runs varlen attention (_varlen_backend)."""
    module, _, config = (model_ref or "").partition(":")
    module = module.removeprefix("torchtitan.models.").removesuffix(".config_registry")
    if not old:
        where = _varlen_backend(module, config)
        return f"{module}:{config} runs PyTorch's varlen attention ({where}), beside which torchtitan 0.3.0 refuses " \
               f"context parallelism at start-up (distributed/full_dtensor.py:44-53)" if where else ""
    refused = ATTN_CP_REFUSED.get((module, config))
    if refused is None:
        return ""
    newest, _ = version_window(stated)
    until = refused[1]
    if until is not None and newest is not None and JOBCONFIG_ORDER[newest[1]] >= JOBCONFIG_ORDER[until]:
        return ""
    return f"{module}:{config}: {refused[2]}"


def _flex_cp(s: Settings, get, cp: int) -> None:
    """context_parallel_degree > 1 beside an attention torchtitan refuses it with (ATTN_CP_REFUSED): an InputError
    where the files' keys date them inside the refusal's window (version_window), a note where they leave it open,
    nothing where they date them after it.  A QA trial: deepseek_v3_16b.toml with context_parallel_degree 2 was priced
    as running, its attention FlexAttention."""
    name = str(get("model.name")[0])
    flavor, fev = get("model.flavor")
    refused = ATTN_CP_REFUSED.get((name, str(flavor)))
    if cp <= 1 or refused is None:
        return
    since, until, check = refused
    newest, oldest = version_window(s.torchtitan_stated)
    if until is not None and newest is not None and JOBCONFIG_ORDER[newest[1]] >= JOBCONFIG_ORDER[until]:
        return  # dated to a torchtitan that runs it
    kind = "varlen attention" if "varlen" in str(flavor) else "FlexAttention"
    what = (f"{fev}: {name}:{flavor}, which runs {kind}, with context_parallel_degree {cp} "
            f"({s.sources.get('cp', '')})")
    sdpa = {"llama3": "8B", "deepseek_v3": "debugmodel", "llama4": "the flavor without _irope"}.get(name)
    fix = ("give context_parallel_degree 1" + (f", or a flavor that runs SDPA ({sdpa})" if sdpa else "")
           + (f", or a torchtitan from {until} on" if until is not None else ""))
    before_until = until is None or (oldest is not None and JOBCONFIG_ORDER[oldest[1]] < JOBCONFIG_ORDER[until])
    dated = _dated(s, since) if since is not None else ("model.flavor", "")
    if dated is not None and before_until:
        dating = _dating(s, dated) if since is not None else f"every torchtitan with {name}:{flavor} runs the check"
        if until is not None and since is not None and oldest is not None:
            dating += f", and {oldest[0]}, which torchtitan dropped after {oldest[1]}, before {until}"
        raise InputError(f"{what}; {check}; {dating}, {STOPS}: {fix}")
    after = f" and before {until}" if until is not None else ""
    undated = (_undated(s, since) if dated is None else
               f"the files' keys do not date them against {until} ({JOBCONFIG_DATES[until]})")
    s.ignored.append(f"{what}, which torchtitan from {since or 'the flavor on'}{after} refuses at start ({check}); "
                     f"{undated}: priced as if it runs; {fix}")


def _float8_moe_1d(s: Settings, get, pp: int, cp: int) -> None:
    """torchtitan's Float8 grouped-GEMM converter (quantize.moe.float8 at 5b5d4685, quantize.grouped_mm.float8 from
    8a2686c4 to v0.2.2) asserts no pipeline and no context parallelism at start (v0.2.2
    components/quantization/float8.py:193-198)."""
    conv, where = get("model.converters")
    moe = [n for n in _converter_names(conv) if n in ("quantize.moe.float8", "quantize.grouped_mm.float8")]
    bad = [f"{name} {value} ({s.sources.get(key, 'default')})" for name, value, key in (
        ("pipeline_parallel_degree", pp, "pp"), ("context_parallel_degree", cp, "cp")) if value > 1]
    if moe and bad:
        raise start_refusal(where, f"model.converters {moe[0]} with {' and '.join(bad)}",
                            "torchtitan's Float8 MoE converter asserts pipeline_parallel_degree == 1 and "
                            "context_parallel_degree == 1 (v0.2.2 components/quantization/float8.py:193-198, "
                            "\"Float8 MoE training prototype does not yet support pipeline parallelism\" / \"... "
                            "context parallelism\")",
                            f"drop {moe[0]} from model.converters, or run it with pipeline and context parallelism 1")


def _float8_before_030(get, s: Settings) -> None:
    """The Float8 recipe of a torchtitan before 0.3.0 (v0.2.2 components/quantization/float8.py:64-99): the
    `recipe_name` it states (rowwise, rowwise_with_gw_hp, tensorwise), else tensorwise scaling, whose FSDP all-gather
    may carry FP8 weights (`enable_fsdp_float8_all_gather`, with a data-parallel shard), which placement does not
    price (it prices that all-gather at 2 bytes a weight).  0.3.0's Float8 converters scale row-wise, with no
    such flag: its capability row would price a 0.2.x file as rowwise (a user trial: 11.95 s against 11.59 s)."""
    name, nev = get("quantize.linear.float8.recipe_name")
    if name is None:
        name, nev = get("float8.recipe_name")
    _lm_head_converted(get, s, "float8", [])
    if name is not None:
        for key in FSDP_FLOAT8_GATHER:
            value, ev = get(key)
            if value in _TRUE:
                raise InputError(f"{ev}: enable_fsdp_float8_all_gather with recipe_name {name!r} ({nev}); torchtitan "
                                 f"refuses the pair at start (v0.2.2 components/quantization/float8.py:65-69, from "
                                 f"069bae28, 2025-02-27, which added recipe_name: assert not "
                                 f"float8_config.enable_fsdp_float8_all_gather, \"using "
                                 f"`float8_config.enable_fsdp_float8_all_gather` together with "
                                 f"`float8_config.recipe_name` is not supported\"), {STOPS}: drop "
                                 f"enable_fsdp_float8_all_gather (the {name} recipe gathers 16-bit weights), or drop "
                                 f"recipe_name for tensorwise scaling with FP8 all-gathers")
        recipe = "tensorwise" if str(name) == "tensorwise" else "rowwise"
        s.put("recipe.fp8_recipe", recipe, f"{nev} (torchao's {name} recipe: {recipe} scaling)")
        return
    s.put("recipe.fp8_recipe", "tensorwise", "torchtitan before 0.3.0 with no float8 recipe_name: tensorwise "
                                              "scaling (v0.2.2 components/quantization/float8.py:86-99, \"Float8 "
                                              "tensorwise scaled training active\")")
    _fsdp_float8_gather_note(get, s, FSDP_FLOAT8_GATHER)


FLOAT8_SWITCHES = ("float8.enable_float8_linear", "training.enable_float8_linear")
"""torchtitan's Float8 switch before model.converters (torchtitan_keys: training.* 69fe8def..3c77e9fa, float8.*
40f79d79..fb0a942f): torchao's Float8Linear for every nn.Linear but the LM head (torchtitan/float8.py at 9dec370,
`module_filter_fn=lambda mod, fqn: fqn != "output"`), dynamic tensor-wise scaling unless a scaling_type_* key says
delayed."""
FLOAT8_SOURCE = "torchtitan/float8.py at 9dec370, Float8Handler"


def _float8_switch(get, s: Settings) -> None:
    """Precision and FP8 recipe from torchtitan's old Float8 switch (FLOAT8_SWITCHES; a user trial: its FP8 job was
    priced as bf16, "the launch files do not set it")."""
    for key in FLOAT8_SWITCHES:
        on, ev = get(key)
        if on is None:
            continue
        if on not in _TRUE or s.has("precision"):
            return
        s.put("precision", "fp8", f"{ev} (torchao Float8Linear for every nn.Linear but `output`: {FLOAT8_SOURCE})")
        s.put("recipe.fp8_lm_head", False, f"{ev} (module_filter_fn fqn != 'output': {FLOAT8_SOURCE})")
        section = key.split(".")[0]
        delayed = [k for k in ("input", "weight", "grad_output")
                   if str(get(f"{section}.scaling_type_{k}")[0]).lower() == "delayed"]
        s.put("recipe.fp8_recipe", "tensorwise", f"{ev} (dynamic tensor-wise scaling, Float8LinearConfig's "
                                                  f"scaling_type_* default: {FLOAT8_SOURCE})")
        if delayed:
            where = get(f"{section}.scaling_type_{delayed[0]}")[1]
            s.ignored.append(f"{section}.scaling_type_{delayed[0]} delayed ({where}): torchao's delayed scaling "
                             f"(amax history) is priced as dynamic tensor-wise scaling")
        _fsdp_float8_gather_note(get, s, (f"{section}.enable_fsdp_float8_all_gather",))
        return


def _lm_head_converted(get, s: Settings, kind: str, default: list[str]) -> None:
    """recipe.fp8_lm_head of torchtitan before 0.3.0: its Float8 and MX converters convert every nn.Linear whose
    dims divide by 16 and whose name contains none of filter_fqns (v0.2.2 components/quantization/utils.py:10-26
    module_filter_fn), so the LM head, `output`, runs FP8 unless a filter matches it: float8's filter_fqns is empty
    by default (v0.2.2 config/job_config.py:741), mx's ["output"] (:784)."""
    value, ev = get(f"quantize.linear.{kind}.filter_fqns")
    if value is None:
        value, ev = get(f"{kind}.filter_fqns")
    if value is None:
        fqns, where = default, (f"torchtitan default quantize.linear.{kind}.filter_fqns {default} (v0.2.2 "
                                f"config/job_config.py:{741 if kind == 'float8' else 784})")
    else:
        fqns = value if isinstance(value, list) else [f for f in str(value).split(",")]
        where = ev
    matched = [f for f in map(str, fqns) if f != "auto_filter_small_kn" and f in "output"]
    if matched:
        s.put("recipe.fp8_lm_head", False, f"{where}: filter {matched[0]!r} matches the LM head `output`, left "
                                           f"16-bit (components/quantization/utils.py module_filter_fn)")
    else:
        s.put("recipe.fp8_lm_head", True, f"{where}: no filter matches the LM head `output`, so torchtitan converts "
                                          f"it too (its dims divide by 16; components/quantization/utils.py:10-26 "
                                          f"module_filter_fn): its GEMMs run FP8")


CP_ROTATE_VALIDATION_ONLY = "1e8f9acd"
"""torchtitan #2144 (1e8f9acd, 2026-01-20, "[CP] Refactor Context Parallel to use new PyTorch CP APIs"): training
shards its inputs with prepare_context_parallel_input and runs PyTorch's _ContextParallel plan (v0.2.2 train.py:469-477,
distributed/context_parallel.py apply_cp_to_attention_module); context_parallel_rotate_method reaches only the
validator's create_context_parallel_ctx (v0.2.2 components/validate.py:213)."""
CP_ROTATE_VALIDATION_ONLY_JOBCONFIG = "0a2107f9"
"""The first JobConfig commit at or after CP_ROTATE_VALIDATION_ONLY (#2145, the next commit of the same stack, which
added context_parallel_load_balancer): keys dated there or later date the files after the refactor."""
CP_ROTATE_IGNORED = ("training runs PyTorch's context-parallel dispatcher under its default rotation, all-gather "
                     "(torch distributed/tensor/experimental/_attention.py _ContextParallelOptions.rotate_method = "
                     "_RotateMethod.ALL_GATHER), or FlexAttention's K/V all-gather")


def _rotate_method(get, s: Settings) -> None:
    """recipe.cp_comm_type of torchtitan before 0.3.0: PyTorch's context_parallel under its
    context_parallel_rotate_method, "allgather" (the default, v0.2.2 config/job_config.py) gathering K and V whole,
    "alltoall" passing them from rank to rank as a ring does."""
    method, where = get("parallelism.context_parallel_rotate_method")
    if method is None:
        s.put("recipe.cp_comm_type", "all_gather", "torchtitan before 0.3.0: context_parallel_rotate_method "
                                                   "'allgather' by default (v0.2.2 config/job_config.py)")
    elif str(method) == "alltoall" and _dated(s, CP_ROTATE_VALIDATION_ONLY_JOBCONFIG) is not None:
        dating = _dating(s, _dated(s, CP_ROTATE_VALIDATION_ONLY_JOBCONFIG))
        s.put("recipe.cp_comm_type", "all_gather",
              f"{where}, which training does not read from {CP_ROTATE_VALIDATION_ONLY} ({dating}): {CP_ROTATE_IGNORED}")
        s.ignored.append(f"{where}: context_parallel_rotate_method 'alltoall' is read by validation only in the "
                         f"torchtitan the files' keys date ({dating}): {CP_ROTATE_IGNORED}; priced so")
    elif str(method) in ("allgather", "alltoall"):
        s.put("recipe.cp_comm_type", "all_gather" if str(method) == "allgather" else "p2p",
              f"{where} (PyTorch context_parallel's {method} rotation: "
              f"{'K and V gathered whole' if str(method) == 'allgather' else 'K and V passed rank to rank'})")
        if str(method) == "alltoall":
            s.ignored.append(f"{where}: context_parallel_rotate_method 'alltoall', priced as a ring (p2p); a "
                             f"torchtitan from {CP_ROTATE_VALIDATION_ONLY} (2026-01-20, v0.2.2) reads it in "
                             f"validation only ({CP_ROTATE_IGNORED}), which the files' keys do not rule out: "
                             f"--cp-comm-type all_gather prices that")
    else:
        raise InputError(f"{where}: context_parallel_rotate_method = {method!r}; torchtitan takes 'allgather' or "
                         f"'alltoall'")


def _reshards(policy: str, pp: int) -> bool:
    """FSDP reshards after forward (ZeRO-3; else ZeRO-2) under torchtitan's fsdp_reshard_after_forward `policy`:
    "default" is `not pp_enabled` (torchtitan 0.3.0 distributed/fsdp.py:71-74; 0.2.2
    models/llama3/infra/parallelize.py:327)."""
    return policy == "always" or (policy == "default" and pp == 1)
