"""DeepSpeed 0.19.8 launch material: the JSON config (with the HF Trainer's "auto" values), a hostfile
(`host slots=N`; DeepSpeed's own rules, launcher/runner.py _parse_hostfile), the `deepspeed` launcher's --num_nodes and
--num_gpus, and the TP/PP/DP a Python file's topology call states (`PipeModelDataParallelTopology`,
`PipeDataParallelTopology`, `ProcessTopology`, `PipelineModule(num_stages=N)`: read with `ast`, never run), and
the EP its `ep_size = N` or `MoE(..., ep_size=N)` states (deepspeed/moe/layer.py).
Megatron-DeepSpeed scripts and GPT-NeoX configs are read by `readers.megatron` and `readers.neox`; the join
derives world size, hosts, accumulation and the missing batch term by DeepSpeed's rules, then Megatron's."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from placement.audit.readers import megatron
from placement.audit.readers.common import (
    DDP_BF16,
    DEEPSPEED_ALLREDUCE_BUCKET,
    ENGINE_BUCKET,
    FP16_MIXED,
    deepspeed_binding,
    deepspeed_grad_accumulation,
    deepspeed_json_unread,
    fp32_refusal,
    merge,
    read_int,
)
from placement.audit.readers.reading import AutoKey, Hostfile, Reading, Settings, UnknownKey
from placement.audit.shell import HereDoc, default_note
from placement.errors import InputError
from placement.loaders.files import DuplicateKey, json_limit_problem, read_text, unique_pairs
from placement.specs.recipe import RecomputeModule
from placement.specs.training import AttentionKernel

DEEPSPEED_KEYS = frozenset({
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "zero_optimization", "fp16",
    "bf16", "amp", "optimizer", "scheduler", "gradient_clipping", "activation_checkpointing", "pipeline",
    "wall_clock_breakdown", "steps_per_print", "communication_data_type", "tensor_parallel", "sequence_parallel_size",
    "data_types", "zero_allow_untested_optimizer", "flops_profiler", "prescale_gradients", "gradient_predivide_factor",
    "sparse_gradients", "checkpoint", "data_efficiency", "compression_training", "elasticity", "comms_logger",
    "monitor_config", "tensorboard", "wandb", "csv_monitor", "aio", "autotuning", "memory_breakdown", "dump_state",
    "seq_parallel_communication_data_type", "torch_autocast", "zero_force_ds_cpu_optimizer", "timers",
    "bfloat16", "curriculum_learning", "hybrid_engine", "compile", "nebula", "fp8", "quantize_training",
})
"""Top-level keys of a DeepSpeed config (deepspeed/runtime/config.py and its sections' constants): a JSON file with
none of them is no DeepSpeed config."""


ZERO_FORBIDS = ("599758968 (v0.7.0, 2022-07-27) made zero_optimization a pydantic DeepSpeedZeroConfig with "
                "extra=\"forbid\" (runtime/config_utils.py DeepSpeedConfigModel), so DeepSpeed refuses a key it does "
                "not define there at start-up")
DS_VERSIONS_READ = "every version of deepspeedai/DeepSpeed: placement/audit/readers/deepspeed_keys.py"


def _key_line(lines: list[str], key: str) -> int | None:
    return next((n for n, line in enumerate(lines, 1) if f'"{key}"' in line), None)


def _unknown_json_keys(path: Path, lines: list[str], data: dict, s: Settings,
                       site: Callable[[int | None], tuple[str, int | None]] | None = None) -> None:
    """Each key no DeepSpeed version reads (readers.deepspeed_keys): a sure typo of a zero_optimization key is an error
    (DeepSpeed refuses it: ZERO_FORBIDS), any other unknown key an unknown_config_key warning, priced without it (a
    user trial: a top-level `zero_optimisation` was priced as ZeRO-0 and the memory error never named it, and a
    misspelled stage3 key was priced though DeepSpeed refuses it)."""
    from placement.audit.readers.common import nearest_key, typo_error, typo_of
    from placement.audit.readers.deepspeed_keys import TOP, ZERO

    def where(line: int | None) -> tuple[str, int | None]:  # (file, line) of a line of the config's text
        return site(line) if site is not None else (str(path), line)

    known = TOP | DEEPSPEED_KEYS
    for key in data:  # a key starting with "_" is a comment by convention (placement's own "_comment")
        if str(key) not in known and not str(key).startswith("_"):
            file, line = where(_key_line(lines, str(key)))
            s.unknown_keys.append(UnknownKey(key=str(key), file=file, line=line,
                                             suggestion=nearest_key(str(key), known), deepspeed=True))
    zero = data.get("zero_optimization")
    typos = []
    for key in zero if isinstance(zero, dict) else ():
        if str(key) in ZERO:
            continue
        file, line = where(_key_line(lines, str(key)))
        near = nearest_key(str(key), ZERO)
        meant = typo_of(str(key), ZERO, near)
        if meant is not None:
            typos.append(f"{file}:{line}: unknown zero_optimization key {key}; did you mean {meant}?")
            continue
        s.unknown_keys.append(UnknownKey(key=f"zero_optimization.{key}", file=file, line=line,
                                         suggestion=None if near is None else f"zero_optimization.{near}",
                                         deepspeed=True))
    if typos:
        raise typo_error(typos, "No DeepSpeed version read", DS_VERSIONS_READ, ZERO_FORBIDS)


def read_config_text(text: str, path: Path, where: Callable[[int], str] | None = None) -> Any:
    """A DeepSpeed config's text as DeepSpeed reads it (DeepSpeedConfig: `hjson.load(...,
    object_pairs_hook=dict_raise_error_on_duplicate_keys)`, runtime/config.py:699): Hjson, so comments and trailing
    commas are fine (a user trial's config with a trailing comma was refused as "not valid JSON" though the job
    runs), and a key stated twice in one object stops the job ("Duplicate keys in DeepSpeed config")."""
    import hjson

    try:
        return hjson.loads(text, object_pairs_hook=unique_pairs)
    except DuplicateKey as err:
        raise InputError(f"{path}: {err}: DeepSpeed refuses it (runtime/config.py DeepSpeedConfig reads the config "
                         f"with dict_raise_error_on_duplicate_keys: \"Duplicate keys in DeepSpeed config\"), so this "
                         f"job does not start; keep one") from None
    except hjson.HjsonDecodeError as err:
        at = where(err.lineno) if where is not None else f"{path}:{err.lineno}"
        raise InputError(f"{at}: not valid JSON or Hjson ({err.msg}); expected a DeepSpeed config object") from None
    except OverflowError as err:  # hjson reads 1e400 through int(): DeepSpeed stops at start on the same error
        raise InputError(f"{path}: a number too large for the Hjson reader DeepSpeed loads its config with ({err}), "
                         f"so this job does not start; write the value as a number of ordinary size") from None
    except (ValueError, RecursionError) as err:
        raise InputError(f"{path}: {json_limit_problem(err)}; expected a DeepSpeed config object") from None


HEREDOC_READ_SECTIONS = frozenset({
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "sequence_parallel_size",
    "zero_optimization", "pipeline", "activation_checkpointing", "tensor_parallel", "bf16", "bfloat16", "fp16",
    "torch_autocast", "communication_data_type", "data_types"})
"""The top-level keys of a DeepSpeed config `read_json` reads a value under: a here-document's value there that the
files leave open is an error, not a guess; one elsewhere (a log path) is not read."""
_OPEN = "@@placement-unresolved-{}@@"


def heredoc_evidence(doc: HereDoc, n: int) -> str:
    """The evidence of line `n` of the text a here-document writes: the script line it was written on, what the
    command writes to, and where each value expanded on it was set."""
    line = doc.lines[n - 1] if 0 < n <= len(doc.lines) else None
    if line is None:
        return f"{doc.command} (here-document)"
    values = "; ".join(f"{w.text}{f' from {w.origin}' if w.origin != line.origin else ''}"
                       f"{default_note(w.default_of) if w.default_of else ''}"
                       for w in line.values if not w.unresolved and (w.origin != line.origin or w.default_of))
    return (f"{line.origin} [written to {doc.target.text} by the here-document at {doc.command.path}:"
            f"{doc.command.line}{'; ' + values if values else ''}]")


def read_heredoc(doc: HereDoc, s: Settings) -> None:
    """The DeepSpeed config a launch script writes with a here-document (`cat <<EOT > $DS_CONFIG ... EOT`, as
    Megatron-DeepSpeed's example scripts do) and passes as --deepspeed_config: its text as bash writes it
    (shell.HereDoc), read as `read_json` reads a file, each value's evidence the script line it was written on and
    where its variables were set.  A value the files leave open ($(...), a variable they do not set) under a key the
    audit reads is an InputError naming it; elsewhere it is kept as written."""
    text = doc.text
    marks: dict[str, tuple[int, str, str]] = {}
    rows = text.split("\n")
    for n, held, why in doc.unresolved:
        if 0 < n <= len(rows) and held and held in rows[n - 1]:
            mark = _OPEN.format(len(marks))
            rows[n - 1] = rows[n - 1].replace(held, mark, 1)
            marks[mark] = (n, held, why)
    where = functools.partial(heredoc_evidence, doc)
    try:
        data = read_config_text("\n".join(rows), Path(doc.target.text), where)
    except InputError as err:
        if not marks:
            raise
        open_values = ", ".join(f"{why} (line {doc.lines[n - 1].origin.line})" for n, _, why in marks.values())
        raise InputError(f"{err} (the here-document holds values the files leave open: {open_values}; give the "
                         f"values the job runs with, --env NAME=VALUE for a variable of its environment)") from None
    for key, value in _flat_keys("", data).items() if isinstance(data, dict) else ():
        for mark, (n, _, why) in marks.items():
            if mark not in value:
                continue
            if key.split(".")[0] in HEREDOC_READ_SECTIONS:
                raise InputError(f"{where(n)}: {key} in the DeepSpeed config the script writes there is {why}, "
                                 f"which the files leave open (the job's run sets it): the audit reads {key} and does "
                                 f"not guess it; give the value the job runs with (--env NAME=VALUE for a variable of "
                                 f"the job's environment, or the config written out with --launch)")
    if marks and isinstance(data, dict):
        data = _restore(data, marks)
        s.ignored.append("; ".join(f"{why} ({where(n)}): a value the files leave open, under a key the audit "
                                   f"does not read" for n, _, why in marks.values()))
    _read_config(doc.text, Path(doc.target.text), s, where,
                 lambda n: (doc.lines[n - 1].origin.path, doc.lines[n - 1].origin.line)
                 if n is not None and 0 < n <= len(doc.lines) else (doc.command.path, doc.command.line),
                 data, f"{doc.command} (the here-document written to {doc.target.text})")


def _restore(value: Any, marks: dict[str, tuple[int, str, str]]) -> Any:
    """`value` with each mark of an open value put back as the construct written."""
    if isinstance(value, dict):
        return {k: _restore(v, marks) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v, marks) for v in value]
    if isinstance(value, str):
        for mark, (_, held, _) in marks.items():
            value = value.replace(mark, held)
    return value


def _placeholder(value, lines: list[str], key: str) -> bool:
    """A value written bare in the file that is an upper-case word (`"train_batch_size" : CONFIG_BATCH_SIZE,`: Hjson
    reads the rest of the line as a string): a template's placeholder, not a quoted number."""
    text = str(value).rstrip(",").strip()
    bare = any(f'"{key}"' in line and f'"{text}' not in line for line in lines)
    return isinstance(value, str) and bare and re.fullmatch(r"[A-Z][A-Z0-9_]*", text) is not None


def read_json(path: Path, s: Settings) -> None:
    """A DeepSpeed JSON config: batch terms, ZeRO stage, AutoTP, precision; "auto" values kept for the join."""
    text = read_text(path, "DeepSpeed config", "expected a JSON file")
    lines = text.splitlines()
    _read_config(text, path, s, lambda n: f"{path}:{n}: {lines[n - 1].strip()}" if 0 < n <= len(lines) else
                 f"{path}:{n}", data=read_config_text(text, path))


def _read_config(text: str, path: Path, s: Settings, where: Callable[[int], str],
                 site: Callable[[int | None], tuple[str, int | None]] | None = None,
                 data: Any = None, shown: str | None = None) -> None:
    """`read_json` of a config's text, `where(n)` the evidence of its line n, `site(n)` that line's (file, line) (for
    a here-document: the script's); `data`: the text as already read; `shown`: how errors name it (its path)."""
    data = read_config_text(text, path, where) if data is None else data
    shown = shown or str(path)
    if not isinstance(data, dict):
        raise InputError(f"{shown}: expected a JSON object with DeepSpeed keys (train_batch_size, "
                         f"zero_optimization...)")
    if not set(data) & DEEPSPEED_KEYS:  # a file the audit reads nothing from is an error, not an empty layout
        raise InputError(f"{shown}: no DeepSpeed config key (it has {', '.join(sorted(map(str, data))[:6]) or 'none'});"
                         f" a DeepSpeed config states keys such as train_batch_size, train_micro_batch_size_per_gpu, "
                         f"zero_optimization or bf16; give the job's config or leave the file out of --launch")
    lines = text.splitlines()
    s.json_paths = (str(path),)
    s.json_keys = _flat_keys("", data)
    _unknown_json_keys(path, lines, data, s, site)

    def ev(key: str) -> str:
        for n, line in enumerate(lines, 1):
            if f'"{key}"' in line:
                return where(n)
        return f"{shown}: {key}"

    auto: list[AutoKey] = []
    for key, field in (("train_batch_size", "global_batch"), ("train_micro_batch_size_per_gpu", "micro_batch_size"),
                       ("gradient_accumulation_steps", "grad_accumulation"), ("sequence_parallel_size", "cp")):
        if data.get(key) == "auto":  # HF Trainer fills it from TrainingArguments (integrations/deepspeed.py)
            auto.append(AutoKey(key, field, ev(key)))
            continue
        if key in data:
            if not isinstance(data[key], int) or isinstance(data[key], bool):
                if _placeholder(data[key], lines, key):
                    # a template a script fills (`sed "s/CONFIG_BATCH_SIZE/$GBS/" TEMPLATE.json > ds_config.json`)
                    raise InputError(f"{ev(key)}: {key} is the template placeholder {str(data[key]).rstrip(',')!r}, "
                                     f"not a value: this file is a template the launch script fills (sed or "
                                     f"envsubst) into another file; give --launch the launch script, or the "
                                     f"config it writes, not the template")
                # DeepSpeed does its batch arithmetic on the JSON value as given (runtime/config.py
                # _batch_assertion compares it with 0): a string or a boolean stops it at start-up
                raise InputError(f"{ev(key)}: {key} must be a JSON integer, got {data[key]!r}: DeepSpeed's batch "
                                 f"arithmetic fails on it; write the number without quotes")
            s.put(field, read_int(data[key], key, ev(key), minimum=1), ev(key))
            if field == "cp" and data[key] > 1:  # DeepSpeed-Ulysses' degree: its all-to-alls over heads
                s.put("recipe.cp_comm_type", "a2a", ev(key))
    zero = data.get("zero_optimization")
    if isinstance(zero, dict) and "stage" in zero:
        stage = read_int(zero["stage"], "zero_optimization.stage", ev("stage"))
        if stage > 3:
            raise InputError(f"{ev('stage')}: zero_optimization.stage must be 0..3, got {stage}")
        s.put("zero_stage", stage, ev("stage"))
        for key in OFFLOADED:
            dev = zero.get(key)
            if isinstance(dev, dict) and dev.get("device") not in (None, *OFFLOAD_DEVICES):
                # a user trial: device "gpu" was read as an offload to the CPU
                raise InputError(f"{ev(key)}: zero_optimization.{key}.device must be one of "
                                 f"{', '.join(OFFLOAD_DEVICES)} (DeepSpeed's OffloadDeviceEnum, "
                                 f"runtime/zero/offload_config.py), got {dev.get('device')!r}; DeepSpeed refuses the "
                                 f"config at start-up")
            if isinstance(dev, dict) and dev.get("device") not in (None, "none"):
                _offload_warning(s, f"zero_optimization.{key} to {dev.get('device')} ({ev(key)})", key)
        if stage in (1, 2):
            _zero_reduction(zero, s, ev)
        if int(zero.get("zero_hpz_partition_size", 1) or 1) > 1:
            hpz = ev("zero_hpz_partition_size")
            s.ignored.append(f"zero_hpz_partition_size (ZeRO++ hierarchical partitioning) ({hpz})")
        for key, what, priced in ZERO_PP_QUANTIZED:
            if zero.get(key) is True and stage == 3:
                s.ignored.append(f"{key} true ({ev(key)}): ZeRO++ {what}, priced as {priced}: the job's DP "
                                 f"traffic is smaller than printed")
    pipe = data.get("pipeline")
    if isinstance(pipe, dict) and "activation_checkpoint_interval" in pipe:
        # PipelineEngine seeds its module's checkpoint interval from it (runtime/pipe/engine.py): 0 is none
        every = read_int(pipe["activation_checkpoint_interval"], "pipeline.activation_checkpoint_interval",
                         ev("activation_checkpoint_interval"))
        if every >= 1:
            s.put("recompute", "full", ev("activation_checkpoint_interval"))
            s.put("recipe.checkpoint_interval", every, ev("activation_checkpoint_interval"))
        else:  # the engine checkpoints no whole layer; the model code may still recompute selectively (a review:
            # ds_topology.py's `recompute = 'selective'` was refused as contradicting it in placement's own files)
            s.engine_checkpoints_none = ev("activation_checkpoint_interval")
    ckpt = data.get("activation_checkpointing")
    if isinstance(ckpt, dict) and "synchronize_checkpoint_boundary" in ckpt:
        value = ckpt["synchronize_checkpoint_boundary"]
        if not isinstance(value, bool):
            raise InputError(f"{ev('synchronize_checkpoint_boundary')}: activation_checkpointing."
                             f"synchronize_checkpoint_boundary must be true or false, got {value!r}")
        s.json_sync = (value, ev("synchronize_checkpoint_boundary"))
    if isinstance(pipe, dict):
        _partitioned_sends(pipe, s, ev)
    tpc = data.get("tensor_parallel")
    if isinstance(tpc, dict) and "autotp_size" in tpc:
        s.put("tp", read_int(tpc["autotp_size"], "tensor_parallel.autotp_size", ev("autotp_size")), ev("autotp_size"))
    bf16_key = _bf16_key(data)
    enabled = [key for key in (bf16_key, "fp16")
               if isinstance(data.get(key), dict) and data[key].get("enabled") in (True, "true")]
    if len(enabled) == 2:
        raise InputError(f"{ev(bf16_key)}; {ev('fp16')}: {bf16_key}.enabled and fp16.enabled are both true: DeepSpeed "
                         f"refuses it (runtime/config.py: 'bfloat16 and fp16 modes cannot be simultaneously "
                         f"enabled'), so this job does not start; keep one")
    for key in (bf16_key, "fp16"):
        sec = data.get(key)
        if isinstance(sec, dict) and sec.get("enabled") == "auto":
            auto.append(AutoKey(key, "precision", ev(key)))
        elif key in enabled:
            s.put("precision", "bf16", ev(key))
            if key == "fp16":
                s.ignored.append(f"fp16: {FP16_MIXED}, priced as bf16 ({ev(key)})")
            else:
                _low_precision_master(sec, s, ev(key))
    _autocast_precision(data, s, ev)
    if auto:
        s.hf_auto = tuple(auto)
    comm = data.get("communication_data_type")
    if comm is not None:  # the gradients' reduce dtype (runtime/config.py get_communication_data_type; unset: bf16)
        name = str(comm).lower()
        if name not in ("fp32", "bf16", "fp16"):
            raise InputError(f"{ev('communication_data_type')}: communication_data_type must be fp32, bf16 or fp16 "
                             f"(DeepSpeed's runtime/config.py), got {comm!r}")
        s.put("recipe.grad_reduce_fp32", name == "fp32", ev("communication_data_type"))
    types = data.get("data_types")
    if isinstance(types, dict) and types.get("grad_accum_dtype") is not None:
        s.grad_accum_dtype = (str(types["grad_accum_dtype"]), ev("grad_accum_dtype"))
    _bf16_optimizer_at_zero1(data, s, ev)


OFFLOAD_DEVICES = ("none", "cpu", "nvme")
"""zero_optimization.offload_*.device values DeepSpeed accepts (OffloadDeviceEnum, runtime/zero/offload_config.py)."""
OFFLOADED = {"offload_param": "the weights stream over PCIe to every forward and backward",
             "offload_optimizer": "the Adam step runs on the CPU, its gradients and weights over PCIe"}
"""ZeRO's offloads (a DeepSpeed JSON's zero_optimization.KEY, accelerate's deepspeed_config.KEY_device) and what
each moves off the GPU, which the estimate does not price."""


def _offload_warning(s: Settings, stated: str, key: str) -> None:
    """The warning for an offload the files turn on (`stated`: the setting as written, with its line)."""
    s.offloaded = tuple(dict.fromkeys((*s.offloaded, key)))
    only3 = " (DeepSpeed takes offload_param with stage 3 only)" if key == "offload_param" else ""
    s.warnings.append(f"{stated}: {OFFLOADED[key]}, which the estimate does not price (it keeps them on the GPU): the "
                      f"job's step is longer and its GPU memory smaller than printed{only3}")


ZERO_PP_QUANTIZED = (
    ("zero_quantized_weights", "qwZ: ZeRO-3 gathers each weight as int8 with per-group scales (runtime/zero/"
     "partition_parameters.py all-gather `allgather_dtype = torch.int8`, CUDAQuantizer 8 bits), about half the bytes "
     "of its 16-bit gather", "a 16-bit gather"),
    ("zero_quantized_gradients", "qgZ: ZeRO-3 reduces the gradients by an all-to-all of int4 values with scales "
     "(runtime/zero/stage3.py all_to_all_quant_reduce; runtime/comm/coalesced_collectives.py swizzle_quant 4 bits), "
     "not a reduce-scatter at their reduce width", "a reduce-scatter at the gradient's width"))
"""DeepSpeed's ZeRO++ quantized collectives (runtime/zero/config.py zero_quantized_weights, zero_quantized_gradients;
stage 3 only, deepspeedai/DeepSpeed edaa72212): read and said, not priced."""


DEEPSPEED_REDUCE_BUCKET_DEFAULT = 500_000_000
"""zero_optimization.reduce_bucket_size where a config leaves it out (DeepSpeed 0.19 runtime/zero/config.py:
`reduce_bucket_size: int = Field(pp_int(5e8), ge=0)`)."""


def _zero_reduction(zero: dict, s: Settings, ev) -> None:
    """How a ZeRO-1/2 job reduces its gradients: overlapped with the backward only under overlap_comm, which DeepSpeed
    turns on by default at stage 3 alone (runtime/zero/config.py overlap_comm_valid: `self.overlap_comm = self.stage
    == ZeroStageEnum.weights`); without it stage 1 reduces after the last backward and stage 2 in the backward's own
    stream (runtime/zero/stage_1_and_2.py average_tensor: the current stream), beside no compute.  Its buckets hold
    reduce_bucket_size elements."""
    overlap = zero.get("overlap_comm")
    if overlap is None:
        s.put("recipe.dp_overlap", False, f"{ev('stage')} (no overlap_comm: DeepSpeed overlaps the ZeRO-1/2 "
                                          f"gradient reduction only where it is true; its default is on at stage 3 "
                                          f"only, runtime/zero/config.py overlap_comm_valid)")
    elif isinstance(overlap, bool):
        s.put("recipe.dp_overlap", overlap, ev("overlap_comm"))
    else:
        raise InputError(f"{ev('overlap_comm')}: zero_optimization.overlap_comm must be true or false, got "
                         f"{overlap!r}")
    if zero.get("reduce_bucket_size") == "auto":
        # the HF Trainer fills it with the model's hidden_size x hidden_size (transformers integrations/deepspeed.py
        # HfTrainerDeepSpeedConfig.trainer_config_finalize: fill_only("zero_optimization.reduce_bucket_size",
        # hidden_size * hidden_size)), which audit.core.launch_recipe takes from the model priced
        s.put("recipe.ddp_bucket_hidden_squared", True, ev("reduce_bucket_size"))
    elif "reduce_bucket_size" in zero:
        size = read_int(zero["reduce_bucket_size"], "zero_optimization.reduce_bucket_size", ev("reduce_bucket_size"),
                        minimum=1)
        s.put("recipe.ddp_bucket_params", size, ev("reduce_bucket_size"))
    else:
        s.put("recipe.ddp_bucket_params", DEEPSPEED_REDUCE_BUCKET_DEFAULT,
              f"{ev('stage')} (no reduce_bucket_size: DeepSpeed's default, {DEEPSPEED_REDUCE_BUCKET_DEFAULT:,} "
              f"elements, runtime/zero/config.py)")


ACCELERATE_ZERO = "deepspeed_config.zero_stage"
"""An accelerate config's ZeRO stage key, kept among the job's DeepSpeed keys (LaunchLayout.config_keys) so that the
change list names it (changes.hf_trainer_changes)."""


def read_accelerate(data: dict, path: Path, lines: list[str], s: Settings) -> None:
    """An accelerate config (`accelerate launch --config_file`): with distributed_type DEEPSPEED its deepspeed_config
    section is the DeepSpeed plugin's (accelerate's DeepSpeedPlugin: zero_stage, offload_*_device, or a
    deepspeed_config_file), mixed_precision the precision and num_processes / num_machines the world; the batch is
    the training script's flags (the HF Trainer fills the plugin's config from them).  Its FSDP and plain
    multi-GPU modes are refused by name."""
    def ev(key: str) -> str:
        for n, line in enumerate(lines, 1):
            if re.match(rf"\s*{re.escape(key)}\s*:", line):
                return f"{path}:{n}: {line.strip()}"
        return f"{path}: {key}"

    s.accelerate_read = True
    kind = str(data.get("distributed_type", "")).upper()
    if kind != "DEEPSPEED":
        what = {"FSDP": "accelerate's FSDP (torch FullyShardedDataParallel)", "MULTI_GPU": "PyTorch DDP",
                "NO": "one process"}.get(kind, f"distributed_type {kind}")
        raise InputError(f"{ev('distributed_type')}: this accelerate config runs {what}, which `placement audit` does "
                         f"not read (it reads DeepSpeed: distributed_type DEEPSPEED); price the layout with "
                         f"`placement evaluate`")
    s.hf_trainer = s.hf_trainer or f"{ev('distributed_type')} (accelerate's DeepSpeed plugin, which the HF Trainer " \
                                    f"fills from its arguments)"
    section = data.get("deepspeed_config") or {}
    if not isinstance(section, dict):
        raise InputError(f"{ev('deepspeed_config')}: deepspeed_config must be a mapping of the DeepSpeed plugin's keys")
    cfg = section.get("deepspeed_config_file")
    if cfg:
        s.deepspeed_config = (str(cfg), ev("deepspeed_config_file"))
    if "zero_stage" in section:
        stage = read_int(section["zero_stage"], "deepspeed_config.zero_stage", ev("zero_stage"))
        if stage > 3:
            raise InputError(f"{ev('zero_stage')}: zero_stage must be 0..3, got {stage}")
        s.put("zero_stage", stage, ev("zero_stage"))
        s.json_keys[ACCELERATE_ZERO] = str(stage)
        if stage in (1, 2) and not cfg:
            # the plugin's own DeepSpeed config states neither overlap_comm nor reduce_bucket_size (accelerate
            # utils/dataclasses.py DeepSpeedPlugin.__post_init__: zero_optimization holds the stage, the offload
            # devices and stage3_gather_16bit_weights_on_model_save), so DeepSpeed's defaults run: no overlap below
            # stage 3, buckets of 5e8 elements (a user trial: such a ZeRO-2 job was priced overlapped)
            plugin = f"{ev('zero_stage')} (accelerate's DeepSpeed plugin, whose config sets no other ZeRO key)"
            _zero_reduction({"stage": stage}, s, lambda key: plugin)
    for key in OFFLOADED:
        dev = section.get(f"{key}_device")
        if dev not in (None, *OFFLOAD_DEVICES):  # accelerate passes it to DeepSpeed's config as the device
            raise InputError(f"{ev(key + '_device')}: deepspeed_config.{key}_device must be one of "
                             f"{', '.join(OFFLOAD_DEVICES)} (DeepSpeed's OffloadDeviceEnum, "
                             f"runtime/zero/offload_config.py), got {dev!r}; DeepSpeed refuses it at start-up")
        if dev not in (None, "none"):
            _offload_warning(s, f"deepspeed_config.{key}_device {dev} ({ev(key + '_device')})", key)
    mixed = data.get("mixed_precision")
    if mixed in ("bf16", "fp16"):
        s.put("precision", "bf16", ev("mixed_precision") + (" (FP16, priced as BF16: the same tensor-core rate)"
                                                             if mixed == "fp16" else ""))
    elif mixed == "no":  # a user trial: priced as bf16 with "the launch files do not set it" as the source
        s.refusal = s.refusal or fp32_refusal(
            ev("mixed_precision"), "mixed_precision 'no': accelerate trains this job in fp32",
            "set mixed_precision: bf16 (or fp16) in the accelerate config")
    procs, machines = data.get("num_processes"), data.get("num_machines", 1)
    if isinstance(procs, int) and not isinstance(procs, bool) and procs >= 1:
        s.put("world_size", procs, ev("num_processes"))
        if isinstance(machines, int) and machines >= 1 and procs % machines == 0:
            s.put("gpus_per_node", procs // machines, f"{ev('num_processes')}; {ev('num_machines')}")
    _accelerate_parallelism(data.get("parallelism_config"), ev, s)


ALST = "DeepSpeed-Ulysses (ALST), all-to-alls over heads"
"""What accelerate's DeepSpeed sequence parallelism runs (its recipe.cp_comm_type a2a's source)."""


def _accelerate_parallelism(par: object, ev: Callable[[str], str], s: Settings) -> None:
    """accelerate's ParallelismConfig section (parallelism_config_*_size): the tensor degree and the context degree,
    with its exchange: `sp_size` with `sp_backend: deepspeed` (its default; `cp_backend: deepspeed` in the earlier
    spelling TRL's ALST configs used) is DeepSpeed-Ulysses' all-to-all sequence parallelism (ALST), priced as such
    (cp_comm_type a2a); `cp_size` under the torch backend is PyTorch's context_parallel with
    `cp_comm_strategy` as its rotate method, "allgather" by default (set_rotate_method; all_gather) or "alltoall"
    (K/V passed around the ring: p2p).  The data-parallel degree is what the world leaves (dp_shard x
    dp_replicate), checked against it."""
    if not isinstance(par, dict):
        return
    sizes = {}
    for axis in ("dp_replicate", "dp_shard", "tp", "cp", "sp"):
        key = f"parallelism_config_{axis}_size"
        if key in par:
            sizes[axis] = read_int(par[key], key, ev(key), minimum=1)
    if sizes.get("tp", 1) > 1:
        s.put("tp", sizes["tp"], ev("parallelism_config_tp_size"))
    if sizes.get("cp", 1) > 1 and sizes.get("sp", 1) > 1:
        raise InputError(f"{ev('parallelism_config_cp_size')}; {ev('parallelism_config_sp_size')}: both a context "
                         f"(cp) and a sequence (sp) degree; placement prices one context-parallel axis: give one of "
                         f"them")
    if sizes.get("sp", 1) > 1:
        s.put("cp", sizes["sp"], ev("parallelism_config_sp_size"))
        backend = str(par.get("parallelism_config_sp_backend", "deepspeed"))
        if backend != "deepspeed":
            raise InputError(f"{ev('parallelism_config_sp_backend')}: sp_backend {backend!r}; accelerate's sequence "
                             f"parallelism runs on DeepSpeed (sp_backend deepspeed)")
        where = (ev("parallelism_config_sp_backend") if "parallelism_config_sp_backend" in par else
                 f"{ev('parallelism_config_sp_size')} (sp_backend's default, deepspeed)")
        s.put("recipe.cp_comm_type", "a2a", f"{where}: {ALST}")
    elif sizes.get("cp", 1) > 1:
        s.put("cp", sizes["cp"], ev("parallelism_config_cp_size"))
        if str(par.get("parallelism_config_cp_backend", "torch")) == "deepspeed":  # the earlier spelling of sp
            s.put("recipe.cp_comm_type", "a2a", f"{ev('parallelism_config_cp_backend')}: {ALST}")
        else:
            strategy = str(par.get("parallelism_config_cp_comm_strategy", "allgather"))
            if strategy not in ("allgather", "alltoall"):
                raise InputError(f"{ev('parallelism_config_cp_comm_strategy')}: cp_comm_strategy {strategy!r}; "
                                 f"accelerate takes allgather or alltoall (PyTorch's rotate methods)")
            where = (ev("parallelism_config_cp_comm_strategy") if "parallelism_config_cp_comm_strategy" in par else
                     f"{ev('parallelism_config_cp_size')} (cp_comm_strategy's default, allgather)")
            s.put("recipe.cp_comm_type", "all_gather" if strategy == "allgather" else "p2p",
                  f"{where}: PyTorch's context_parallel under set_rotate_method({strategy!r})")
    product = 1
    for v in sizes.values():
        product *= v
    procs = s.value("world_size")
    # accelerate skips this check under sp_backend deepspeed, whose groups DeepSpeed forms (parallelism_config.py
    # _validate_accelerator): there the join's dp, world / sp, is what runs
    if procs is not None and {"dp_replicate", "dp_shard", "tp", "cp"} <= set(sizes) and sizes.get("sp", 1) == 1 \
            and product != procs:
        raise InputError(f"{ev('parallelism_config_dp_shard_size')}: parallelism_config sizes dp_replicate x "
                         f"dp_shard x tp x cp = {product} but num_processes is {procs}; accelerate refuses a mesh "
                         f"that does not cover the processes")


def _flat_keys(prefix: str, value: object) -> dict[str, str]:
    """A JSON object's leaf keys, dotted (`zero_optimization.stage`), each with its value as the change list spells it
    (true / false, "auto", numbers as written)."""
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for k, v in value.items():
            out |= _flat_keys(f"{prefix}.{k}" if prefix else str(k), v)
        return out
    return {prefix: str(value).lower() if isinstance(value, bool) else str(value)}


FP32_NAMES = frozenset({"fp32", "float32", "float", "torch.float32"})
"""How a DeepSpeed config may write fp32 (`runtime/config_utils.py` DtypeEnum)."""


AUTOCAST_DTYPES = {"bfloat16": "bf16", "bf16": "bf16", "torch.bfloat16": "bf16", "float16": "fp16", "fp16": "fp16",
                   "half": "fp16", "torch.float16": "fp16"}


LOW_PRECISION_MASTER = "DeepSpeed's DeepSpeedBF16Config (runtime/precision_config.py, from 39a682d79, 2025-12-04)"


def _low_precision_master(sec: dict, s: Settings, where: str) -> None:
    """The bf16 section's low-precision optimizer keys (a user trial: dropped unread, so a config that keeps the
    master weights, gradients and Adam moments in bf16 was priced as the fp32 one): `bf16_optimizer_states`, the
    moments in bf16 (recipe optimizer_state_bf16); `bf16_master_weights_and_grads`, the master copy and the
    gradients in bf16, which placement does not price (it keeps 4 + 4 bytes a parameter for them), said."""
    if sec.get("bf16_optimizer_states") in (True, "true"):
        s.put("recipe.optimizer_state_bf16", True, f"{where}: bf16_optimizer_states true (Adam's moments in bf16: "
                                                    f"{LOW_PRECISION_MASTER})")
    if sec.get("bf16_master_weights_and_grads") in (True, "true"):
        s.ignored.append(f"bf16.bf16_master_weights_and_grads true ({where}): the ZeRO optimizer's master weights and "
                         f"gradients in bf16 ({LOW_PRECISION_MASTER}); priced in float32 (4 + 4 bytes a parameter), "
                         f"so the memory is over-counted by 4 bytes a parameter, sharded as the ZeRO stage shards them")


def _autocast_precision(data: dict, s: Settings, ev: Callable[[str], str]) -> None:
    """16-bit GEMMs without a bf16/fp16 section: `torch_autocast` (DeepSpeed runs the Linear layers under
    torch.autocast in its dtype, runtime/engine.py and runtime/config.py, 0.19.x) and `amp` (apex's mixed
    precision, FP16).  A review found both refused as fp32 jobs."""
    if s.has("precision"):
        return
    cast = data.get("torch_autocast")
    if isinstance(cast, dict) and cast.get("enabled") in (True, "true"):
        kind = AUTOCAST_DTYPES.get(str(cast.get("dtype", "bfloat16")).strip().lower())
        if kind is None:
            raise InputError(f"{ev('torch_autocast')}: torch_autocast.dtype must be bfloat16 or float16, got "
                             f"{cast.get('dtype')!r}")
        s.put("precision", "bf16", f"{ev('torch_autocast')} (DeepSpeed runs the Linear layers under torch.autocast "
                                   f"in {kind})")
        if kind == "fp16":
            s.ignored.append(f"torch_autocast fp16: {FP16_MIXED}, priced as bf16 ({ev('torch_autocast')})")
        return
    amp = data.get("amp")
    if isinstance(amp, dict) and amp.get("enabled") in (True, "true"):
        s.put("precision", "bf16", f"{ev('amp')} (apex AMP: FP16 mixed precision, priced as bf16)")
        s.ignored.append(f"amp: {FP16_MIXED}, priced as bf16 ({ev('amp')})")


def _bf16_key(data: dict) -> str:
    """The key of a DeepSpeed JSON's bf16 section: "bf16", or the older "bfloat16" where there is no "bf16"
    (runtime/config.py get_bfloat16_config, BFLOAT16_OLD)."""
    return "bf16" if "bf16" in data or "bfloat16" not in data else "bfloat16"


def _bf16_optimizer_at_zero1(data: dict, s: Settings, ev: Callable[[str], str]) -> None:
    """DeepSpeed picks its BF16_Optimizer, not its ZeRO optimizer, for bf16 at ZeRO stage 1 with
    `data_types.grad_accum_dtype` fp32 and no optimizer offload (`runtime/engine.py` `_do_optimizer_sanity_check`):
    fp32 gradient copies after every backward, and the whole gradient all-reduced (buffered_allreduce_fallback)."""
    zero, types = data.get("zero_optimization"), data.get("data_types")
    bf16 = data.get(_bf16_key(data))
    if not (isinstance(zero, dict) and zero.get("stage") == 1 and isinstance(types, dict)
            and isinstance(bf16, dict) and bf16.get("enabled") in (True, "true")):
        return
    offload = zero.get("offload_optimizer")
    if str(types.get("grad_accum_dtype", "")).lower() not in FP32_NAMES or (
            isinstance(offload, dict) and offload.get("device") not in (None, "none")):
        return
    deepspeed_grad_accumulation(s, True, f"{ev('grad_accum_dtype')} with {ev('stage')} and bf16 (runtime/engine.py "
                                         f"_do_optimizer_sanity_check picks the BF16_Optimizer)")


def _partitioned_sends(pipe: dict, s: Settings, ev: Callable[[str], str]) -> None:
    """How the PipelineEngine sends activations and gradients between stages under TP: 1/tp shares of the TP group,
    all-gathered on arrival, unless `pipe_partitioned` / `grad_partitioned` are false (runtime/pipe/engine.py)."""
    flags = {}
    for key in ("pipe_partitioned", "grad_partitioned"):
        if key in pipe:
            if not isinstance(pipe[key], bool):
                raise InputError(f"{ev(key)}: pipeline.{key} must be true or false, got {pipe[key]!r}")
            flags[key] = pipe[key]
    acts, grads = flags.get("pipe_partitioned", True), flags.get("grad_partitioned", True)
    if flags.get("pipe_partitioned"):  # stated true: the evidence a sequence-parallel job's error quotes
        s.put("recipe.pipeline_p2p_whole", False, ev("pipe_partitioned"))
    if not acts and not grads:
        s.put("recipe.pipeline_p2p_whole", True, f"{ev('pipe_partitioned')}; {ev('grad_partitioned')}")
    elif acts and not grads:
        s.put("recipe.pipeline_grads_whole", True, ev("grad_partitioned"))
    elif not acts:
        s.ignored.append(f"pipeline.pipe_partitioned false with grad_partitioned true: whole activations forward, "
                         f"shares back; priced as shares both ways ({ev('pipe_partitioned')})")


TOPOLOGY_AXES = {"model": "tp", "context": "cp", "data": "dp", "pipe": "pp"}
"""DeepSpeed `ProcessTopology` axis names -> placement axes (runtime/pipe/topology.py; "context" is the axis
placement's emitter adds for cp > 1)."""
TOPOLOGY_CLASSES = {
    # class -> (axes outermost first, constructor parameter of each axis), DeepSpeed 0.19.8 topology.py
    "PipeModelDataParallelTopology": (("pipe", "data", "model"), ("num_pp", "num_dp", "num_mp")),
    "PipeDataParallelTopology": (("pipe", "data"), ("num_pp", "num_dp")),
}
RANK_ORDERS = {("pipe", "data", "model"): "tp-cp-ep-dp-pp", ("pipe", "data", "context", "model"): "tp-cp-ep-dp-pp",
               ("data", "pipe", "model"): "tp-cp-ep-pp-dp", ("data", "pipe", "context", "model"): "tp-cp-ep-pp-dp",
               ("pipe", "data"): "tp-cp-ep-dp-pp", ("data", "pipe"): "tp-cp-ep-pp-dp"}
"""Axis orders (outermost first; ProcessTopology is row-major) whose rank order placement prices; a missing axis
has size 1."""


def _literal(node: ast.expr, what: str, where: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise InputError(f"{where}: {what} is {ast.unparse(node)[:80]!r}, not a literal; the audit reads a "
                         f"DeepSpeed topology's numbers only when they are written out: leave this file out and "
                         f"pass the launch script whose arguments set them (Megatron-DeepSpeed "
                         f"--tensor-model-parallel-size / --pipeline-model-parallel-size)") from None


def _call_name(node: ast.AST) -> str | None:
    """The called name of `f(...)` or `mod.f(...)`; None for anything else."""
    f = node.func if isinstance(node, ast.Call) else None
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


@dataclass(frozen=True)
class _Topology:
    """The layout one topology call builds."""

    sizes: dict[str, int]
    """placement axis -> size, for the axes the call names."""
    rank_order: str
    evidence: str


def _topology_call(call: ast.Call, name: str, path: Path, lines: list[str]) -> _Topology:
    """The axes, sizes and rank order of one topology constructor call."""
    where = f"{path}:{call.lineno}"
    evidence = f"{where}: {lines[call.lineno - 1].strip()[:160]}"
    axes, params = TOPOLOGY_CLASSES.get(name, (None, ("axes", "dims")))
    given = dict(zip(params, call.args, strict=False)) | {k.arg: k.value for k in call.keywords if k.arg}
    if set(given) != set(params):
        raise InputError(f"{evidence}: {name} takes {', '.join(params)}; DeepSpeed rejects the call")
    if axes is None:  # ProcessTopology(axes, dims)
        axes, dims = _literal(given["axes"], "axes", where), _literal(given["dims"], "dims", where)
    else:
        dims = [_literal(given[p], p, where) for p in params]
    if (not isinstance(axes, (list, tuple)) or not isinstance(dims, (list, tuple)) or len(axes) != len(dims)
            or not all(isinstance(a, str) for a in axes) or len(set(axes)) != len(axes)):
        raise InputError(f"{evidence}: axes and dims must be lists of the same length, axis names unique")
    unknown = [a for a in axes if a not in TOPOLOGY_AXES]
    if unknown:
        raise InputError(f"{evidence}: axis {unknown[0]!r} is not one DeepSpeed's grid or placement knows "
                         f"({', '.join(TOPOLOGY_AXES)})")
    out: dict[str, int] = {}
    for axis, dim in zip(axes, dims, strict=True):
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise InputError(f"{evidence}: the {axis} dimension must be a whole number >= 1, got {dim!r}")
        out[TOPOLOGY_AXES[axis]] = dim
    order = tuple(a for a in axes if out[TOPOLOGY_AXES[a]] > 1 or a in ("pipe", "data", "model"))
    if order not in RANK_ORDERS:
        raise InputError(f"{evidence}: axes {list(axes)} (outermost first) give a rank order placement does not "
                         f"price; use ['pipe', 'data', 'model'] (tp innermost) or ['data', 'pipe', 'model']")
    return _Topology(out, RANK_ORDERS[order], evidence)


def read_python(path: Path, s: Settings) -> None:
    """TP, CP, DP and PP from the DeepSpeed topology a Python file builds, EP from its MoE degree (parsed, never
    run)."""
    text = read_text(path, "DeepSpeed training script", "expected Python code that builds a DeepSpeed topology")
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as err:
        raise InputError(f"{path}:{err.lineno}: not valid Python ({err.msg}); expected the training script or "
                         f"ds_topology.py") from None
    except (ValueError, RecursionError, MemoryError) as err:
        raise InputError(f"{path}: cannot be parsed as Python ({type(err).__name__}); expected the training script "
                         f"or ds_topology.py") from None
    lines = text.splitlines()
    for node in tree.body:  # `sequence_parallel = True`, as ds_topology.py states it for the TP model code
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.lower() == "sequence_parallel"):
            value = _literal(node.value, "sequence_parallel", f"{path}:{node.lineno}")
            if not isinstance(value, bool):
                raise InputError(f"{path}:{node.lineno}: sequence_parallel must be True or False, got {value!r}")
            s.put("sequence_parallel", value, f"{path}:{node.lineno}: {lines[node.lineno - 1].strip()[:160]}")
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "recompute"):  # `recompute = 'full'`, as ds_topology.py states it
            value = _literal(node.value, "recompute", f"{path}:{node.lineno}")
            if value not in ("none", "full", "selective"):
                raise InputError(f"{path}:{node.lineno}: recompute must be 'none', 'full' or 'selective', got "
                                 f"{value!r}")
            s.put("recompute", value, f"{path}:{node.lineno}: {lines[node.lineno - 1].strip()[:160]}")
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "recompute_modules"):  # the selective modules, as ds_topology.py states
            value = _literal(node.value, "recompute_modules", f"{path}:{node.lineno}")
            names = [m.value for m in RecomputeModule]
            if not isinstance(value, (list, tuple)) or not value or any(v not in names for v in value):
                raise InputError(f"{path}:{node.lineno}: recompute_modules must be a list of {', '.join(names)}, got "
                                 f"{value!r}")
            s.put("recipe.recompute_modules", tuple(value),
                  f"{path}:{node.lineno}: {lines[node.lineno - 1].strip()[:160]}")
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "attention_kernel"):  # the model code's kernel, as ds_topology.py states it
            value = _literal(node.value, "attention_kernel", f"{path}:{node.lineno}")
            kernels = [k.value for k in AttentionKernel]
            if value not in kernels:
                raise InputError(f"{path}:{node.lineno}: attention_kernel must be one of {', '.join(kernels)}, got "
                                 f"{value!r}")
            s.put("recipe.attention_kernel", value, f"{path}:{node.lineno}: {lines[node.lineno - 1].strip()[:160]}")
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "seq_len"):  # the data loader's sequence, as ds_topology.py states it (a
            # user trial: a plan at seq 16384 was audited back at the model's default, 4096, with errors)
            value = _literal(node.value, "seq_len", f"{path}:{node.lineno}")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{path}:{node.lineno}: seq_len must be a whole number >= 1, got {value!r}")
            s.put("seq_len", value, f"{path}:{node.lineno}: {lines[node.lineno - 1].strip()[:160]}")
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "checkpoint_interval"):  # layers per checkpointed chunk, ds_topology.py
            value = _literal(node.value, "checkpoint_interval", f"{path}:{node.lineno}")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{path}:{node.lineno}: checkpoint_interval must be a whole number >= 1, got "
                                 f"{value!r}")
            s.put("recipe.checkpoint_interval", value, f"{path}:{node.lineno}: "
                                                       f"{lines[node.lineno - 1].strip()[:160]}")
    calls = [(node, _call_name(node)) for node in ast.walk(tree) if isinstance(node, ast.Call)]
    _expert_parallel(tree, calls, path, lines, s)
    found: list[_Topology] = [_topology_call(node, name, path, lines) for node, name in calls
                                               if name in TOPOLOGY_CLASSES or name == "ProcessTopology"]
    for node, name in calls if not found else ():  # PipelineModule(layers, num_stages=N): PipeDataParallel(N, .)
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        stages = kw.get("num_stages", node.args[1] if len(node.args) > 1 else None)
        if name == "PipelineModule" and stages is not None and "topology" not in kw:
            where = f"{path}:{node.lineno}"
            ev = f"{where}: {lines[node.lineno - 1].strip()[:160]}"
            pp = _literal(stages, "num_stages", where)
            if isinstance(pp, bool) or not isinstance(pp, int) or pp < 1:
                raise InputError(f"{ev}: num_stages must be a whole number >= 1, got {pp!r}")
            found.append(_Topology({"pp": pp, "tp": 1}, "tp-cp-ep-dp-pp", ev))
    if not found:
        raise InputError(f"{path}: no PipeModelDataParallelTopology, PipeDataParallelTopology, ProcessTopology or "
                         f"PipelineModule(num_stages=...) call; a Python file is read for the DeepSpeed topology it "
                         f"builds, and this one builds none")
    first = found[0]
    for other in found[1:]:
        if (other.sizes, other.rank_order) != (first.sizes, first.rank_order):
            raise InputError(f"{path}: two different topologies ({first.evidence}; {other.evidence}); "
                             f"the audit cannot tell which one the job uses")
    for axis in ("tp", "cp", "pp", "dp"):
        if axis in first.sizes or axis != "dp":  # num_stages alone leaves dp to the world size
            s.put(axis, first.sizes.get(axis, 1), first.evidence)
    s.put("rank_order", first.rank_order, first.evidence)
    s.context_axis = first.sizes.get("cp", 1) > 1


MOE_EP_POSITION = 3
"""`deepspeed.moe.layer.MoE(hidden_size, expert, num_experts, ep_size, k, ...)`: ep_size's positional index."""


def _expert_parallel(tree: ast.Module, calls: list[tuple[ast.Call, str | None]], path: Path, lines: list[str],
                     s: Settings) -> None:
    """ep from the expert-parallel degree a Python file gives DeepSpeed MoE: a module-level `ep_size = N`, as
    ds_topology.py states it for the training script, or a `MoE(...)` call, whose `ep_size` defaults to 1
    (moe/layer.py; deepspeed.initialize builds the groups from it).  DeepSpeed takes it nowhere else: an
    expression the audit cannot evaluate is noted, and ep then stays unstated."""
    stated: list[tuple[int, str]] = []
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "ep_size"):
            where = f"{path}:{node.lineno}: {lines[node.lineno - 1].strip()[:160]}"
            s.deepspeed_moe = s.deepspeed_moe or where
            value = _ep_value(node.value, where)
            if value is None:
                s.ignored.append(f"ep_size = {ast.unparse(node.value)[:60]}: not a literal, ep not read ({where})")
            else:
                stated.append((value, where))
    for node, name in calls:
        if name != "MoE":
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        given = kw.get("ep_size", node.args[MOE_EP_POSITION] if len(node.args) > MOE_EP_POSITION else None)
        where = f"{path}:{node.lineno}: {lines[node.lineno - 1].strip()[:160]}"
        s.deepspeed_moe = s.deepspeed_moe or where  # DeepSpeed's own MoE layers, whatever their ep
        if given is None:
            stated.append((1, f"{where} (no ep_size: deepspeed.moe.layer.MoE's default 1)"))
            continue
        if isinstance(given, ast.Name) and given.id == "ep_size" and stated:
            continue  # the module's own `ep_size = N`, read above
        value = _ep_value(given, where)
        if value is None:
            s.ignored.append(f"MoE(..., ep_size={ast.unparse(given)[:60]}): not a literal, ep not read ({where})")
        else:
            stated.append((value, where))
    for value, where in stated[1:]:
        if value != stated[0][0]:
            raise InputError(f"{path}: two expert-parallel degrees (ep_size {stated[0][0]}: {stated[0][1]}; ep_size "
                             f"{value}: {where}); the audit prices one ep for every MoE layer")
    if stated:
        s.put("ep", *stated[0])


def _ep_value(node: ast.expr, where: str) -> int | None:
    """The whole number `node` writes out, None where it is an expression (a variable, `args.ep_size`)."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{where}: ep_size must be a whole number >= 1 (deepspeed.moe.layer.MoE's expert-parallel "
                         f"degree), got {value!r}")
    return value


def read_hostfile(path: Path, s: Settings) -> None:
    """DeepSpeed 0.19.8 `launcher/runner.py::_parse_hostfile`: `^(\\S+)\\s+slots=(\\d+)`, `#` comments and blank
    lines skipped, a duplicate host or any other line is an error; rank order = line order."""
    parse_hostfile(read_text(path, "hostfile", "expected lines of `hostname slots=N`"), str(path), s)


def parse_hostfile(text: str, path: str, s: Settings, where: Callable[[int], str] | None = None) -> None:
    """`read_hostfile` of `text`, named `path` in messages; `where(n)`, if given, is the evidence of its line n (a
    here-document's: the script line that wrote it)."""
    hosts: dict[str, int] = {}
    lines: dict[str, str] = {}
    first_ev = ""
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        m = re.search(r"^(\S+)\s+slots=(\d+)", stripped)
        if not m:
            raise InputError(f"{path}:{n}: {stripped!r} is not `hostname slots=N`; DeepSpeed rejects the hostfile")
        if stripped[m.end():][:1] not in ("", " ", "\t"):  # DeepSpeed's search would read `slots=8.5` as 8
            raise InputError(f"{path}:{n}: {stripped!r}: the slot count is not a whole number (DeepSpeed would read "
                             f"slots={m.group(2)} from it); write slots=N with N the host's GPUs")
        if re.search(r"\[[\d,\-]+\]", m.group(1)):
            # a SLURM hostlist (node[01-04]): DeepSpeed takes the name as one host of `slots` GPUs, while its pdsh
            # runner expands it to several, so the job's world size is not the hostfile's (a user trial: read as one
            # host named node[01-04])
            raise InputError(f"{path}:{n}: {m.group(1)!r} is a SLURM hostlist; a DeepSpeed hostfile names one host "
                             f"per line (launcher/runner.py _parse_hostfile takes the name whole as one host of "
                             f"slots={m.group(2)}); write each host on its own line (scontrol show hostnames expands "
                             f"the list)")
        if m.group(1) in hosts:
            raise InputError(f"{path}:{n}: host {m.group(1)} is listed twice; DeepSpeed rejects duplicate hosts")
        if int(m.group(2)) < 1:
            raise InputError(f"{path}:{n}: host {m.group(1)} has slots={m.group(2)}; a host runs at least one "
                             f"process (DeepSpeed gives each slot a GPU): give slots=N with N its GPUs")
        hosts[m.group(1)] = int(m.group(2))
        lines[m.group(1)] = where(n) if where is not None else f"{path}:{n}: {stripped}"
        first_ev = first_ev or lines[m.group(1)]
    if not hosts:
        raise InputError(f"{path}: no `hostname slots=N` line; DeepSpeed rejects an empty hostfile")
    s.hostfile = Hostfile(hosts, first_ev, lines)


def looks_like_hostfile(text: str) -> bool:
    """Whether a file without a suffix is a hostfile (a `host slots=N` line and no command)."""
    lines = [x.strip() for x in text.splitlines() if x.strip() and not x.strip().startswith("#")]
    # one `host slots=N` line makes it a hostfile (a bad line among them is then reported by read_hostfile)
    return any(re.search(r"^(\S+)\s+slots=", x) for x in lines) and not any(
        re.search(r"torchrun|python|deepspeed|--\w", x) for x in lines)


HF_DEFAULTS = {"micro_batch_size": ("per_device_train_batch_size", 8),
               "grad_accumulation": ("gradient_accumulation_steps", 1)}
"""transformers TrainingArguments defaults the HF Trainer puts in a DeepSpeed config's "auto"."""


def join(groups: list[Settings]) -> Reading:
    """A DeepSpeed job (DeepSpeed JSON, hostfile, launcher, topology code, Megatron-DeepSpeed or HF Trainer
    scripts, GPT-NeoX configs): DeepSpeed's rules, then Megatron's (its layers run most of these jobs)."""
    s = merge(groups)
    plain = s.megatron_without_deepspeed
    if plain is not None and not s.megatron_deepspeed and not s.hf_trainer and not s.neox:
        # a user trial: placement's own megatron.sh, audited as DeepSpeed (--framework deepspeed, or beside a
        # DeepSpeed JSON it never loads), was priced with DeepSpeed's engine, 13 % off the Megatron-LM job it is
        loaded = (f"; {', '.join(map(str, s.json_paths))} is not loaded by it (no --deepspeed --deepspeed_config)"
                  if s.json_paths else "")
        raise InputError(f"{plain}: a Megatron training command without --deepspeed: Megatron-LM runs it with its own "
                         f"optimizer and data parallelism, and Megatron-DeepSpeed hands it to DeepSpeed only under "
                         f"--deepspeed{loaded}; audit it as Megatron-LM (drop --framework deepspeed and the JSON), or "
                         f"give the command that passes --deepspeed")
    if s.accelerate_launch and not s.accelerate_read and not s.json_paths:
        raise InputError(f"{s.accelerate_launch}: the job starts with `accelerate launch`, whose config file (its "
                         f"--config_file, or accelerate's default_config.yaml) sets the DeepSpeed plugin it runs; give "
                         f"that file with --launch")
    batch_auto = [a for a in s.hf_auto if a.field != "precision"]
    if batch_auto and s.deepspeed_config_arg and not (s.hf_trainer or s.neox or s.accelerate_launch
                                                      or s.megatron_deepspeed):
        # a user trial: a plain deepspeed launch of the user's own script was priced with TrainingArguments defaults
        keys = ", ".join(f"{a.key} \"auto\"" for a in batch_auto)
        raise InputError(f"{batch_auto[0].evidence}: {keys}, given to DeepSpeed as written by "
                         f"{s.deepspeed_config_arg} (DeepSpeed's own --deepspeed_config, no HF Trainer or accelerate "
                         f"among the files to fill \"auto\"): DeepSpeed compares the batch values with 0 "
                         f"(runtime/config.py _batch_assertion, 'train_batch > 0'), a TypeError for the string "
                         f"\"auto\" (deepspeedai/DeepSpeed#1270), so this job does not start; write the numbers the "
                         f"job runs, or add the HF Trainer script that fills them with --launch")
    if s.hf_auto and not s.hf_trainer and not s.neox:  # "auto" is the HF Trainer's: it fills them
        s.hf_trainer = f"{s.hf_auto[0].evidence} (\"auto\": a value the HF Trainer fills from its arguments)"
    if not s.has("recompute") and s.engine_checkpoints_none:
        s.put("recompute", "none", s.engine_checkpoints_none)
    _config_path(s)
    if s.hf_trainer:
        _hf_trainer(s)
    elif not s.neox and not s.megatron_deepspeed and not s.has("recipe.attention_kernel"):
        _own_model_attention(s)
    _finish(s)
    _checkpoint_sync(s)
    deepspeed_binding(s)
    _grad_accumulation(s)
    megatron.finish(s)
    if s.megatron_deepspeed:  # Megatron-DeepSpeed's arguments.py fills the model's dimensions as Megatron-LM's does
        megatron.model_defaults(s)
    elif s.json_paths and not s.hf_trainer and not s.neox and not (s.has("global_batch")
                                                                     or s.has("micro_batch_size")):
        s.refusal = (f"{s.json_paths[0]}: neither train_batch_size nor train_micro_batch_size_per_gpu: DeepSpeed "
                     f"refuses such a config ('Either train_batch_size or train_micro_batch_size_per_gpu needs to be "
                     f"provided', runtime/config.py), so this job does not start; give the config the job runs, its "
                     f"batch included")
    elif (s.json_paths and not s.has("precision") and not s.hf_trainer and not s.neox
          and not any(a.field == "precision" for a in s.hf_auto)):
        s.refusal = fp32_refusal(
            s.json_paths[0], "the DeepSpeed config enables neither bf16 nor fp16: DeepSpeed trains fp32 "
                             "(runtime/precision_config.py: DeepSpeedBF16Config.enabled and "
                             "DeepSpeedFP16Config.enabled default false)",
            "set bf16.enabled true (or fp16.enabled) in the config to audit it as the 16-bit job it should be")
    return s.reading("deepspeed")


def _config_path(s: Settings) -> None:
    """A launch that names its DeepSpeed config (--deepspeed CONFIG of an HF Trainer script, --deepspeed_config of
    Megatron-DeepSpeed) beside a JSON audited under another name: the values priced are that JSON's, which may not
    be what the job runs; said with both names."""
    if s.deepspeed_config is None or not s.deepspeed_config[0] or not s.json_paths:
        return
    name, ev = s.deepspeed_config
    if PurePath(name).name not in {PurePath(p).name for p in s.json_paths}:
        s.warnings.append(f"the launch runs DeepSpeed config {name} ({ev}), but the DeepSpeed JSON audited is "
                          f"{', '.join(s.json_paths)}: its values are priced as the job's; give "
                          f"{PurePath(name).name} with --launch if that is another file")


HF_SEQUENCE = ("the sequence length is the training script's own default, which the launch files do not state "
               "(transformers' run_clm.py: the tokenizer's model_max_length, or 1024 where that exceeds the model's "
               "max_position_embeddings; Stanford Alpaca's train.py: model_max_length 512; TRL's SFTConfig: "
               "max_length 1024): priced at the job's seq_len (--seq-len, else the model's default); state it with "
               "the script's own flag (--block_size, --max_seq_length, --model_max_length, --max_length) or "
               "--seq-len")


def _hf_trainer(s: Settings) -> None:
    """What a HuggingFace Trainer job runs where its files leave it to transformers: the model's attention through
    PyTorch's scaled_dot_product_attention (attn_implementation "sdpa", transformers' default where the model has
    it), whose backend priority runs the FlashAttention-2 kernel; and a sequence length of the script's own."""
    if not s.has("recipe.attention_kernel"):
        s.put("recipe.attention_kernel", "flash2",
              f"no --attn_implementation in the files (a transformers model, under the HF Trainer, DeepSpeed-Chat "
              f"or accelerate, by {s.hf_trainer}): "
              f"transformers' default attn_implementation sdpa, PyTorch's "
              f"scaled_dot_product_attention, whose backend priority puts its FlashAttention-2 kernel first, "
              f"huggingface/transformers PR #48163; --attn_implementation states another, and so may the entry "
              f"script in its code, which the audit does not read)")
    if not s.has("seq_len"):
        s.ignored.append(f"{HF_SEQUENCE} ({s.hf_trainer})")
    if s.json_paths and s.deepspeed_config is None and s.hf_precision is not None:
        s.warnings.append(f"the HF Trainer script passes no --deepspeed ({s.hf_trainer}), so the job does not read "
                          f"{', '.join(s.json_paths)}: the estimate prices that JSON's ZeRO stage and batch as if it "
                          f"did")
    if s.hf_precision is not None and s.hf_precision[0] is not None:
        # only a flag the script passes: a TrainingArguments subclass may default to bf16 (TRL's SFTConfig does)
        flag, where = s.hf_precision
        for key in ("bf16.enabled", "fp16.enabled"):
            stated = s.json_keys.get(key)
            if stated in ("true", "false") and (stated == "true") != (flag == key.split(".")[0]):
                raise InputError(f"{key} {stated} in {', '.join(s.json_paths)} against the HF Trainer's "
                                 f"{'--' + flag if flag else 'no --bf16/--fp16'} ({where}): the Trainer refuses a "
                                 f"DeepSpeed config value that differs from its argument (transformers "
                                 f"integrations/deepspeed.py fill_match), so this job does not start; set {key} "
                                 f"\"auto\" or make the two agree")


def _own_model_attention(s: Settings) -> None:
    """A training script of the user's own under DeepSpeed (neither GPT-NeoX, Megatron-DeepSpeed nor an HF Trainer):
    its attention is its model code's, which no audited file shows.  Priced as PyTorch's scaled_dot_product_attention
    runs (its FlashAttention-2 kernel first), the usual call, and said, with the recipe field that states another
    (a hand-written softmax(QK^T)V keeps the scores in HBM: attention_kernel unfused)."""
    where = s.deepspeed_binding.where if s.deepspeed_binding is not None else s.path
    s.put("recipe.attention_kernel", "flash2",
          f"assumed: {where} runs a model of its own, whose attention no audited file states; priced as PyTorch's "
          f"scaled_dot_product_attention (its FlashAttention-2 kernel); give --recipe with attention_kernel: unfused "
          f"for scores computed in HBM, or flash for a cuDNN / FlashAttention-3 kernel")


def _checkpoint_sync(s: Settings) -> None:
    """recipe.checkpoint_sync from the JSON's activation_checkpointing.synchronize_checkpoint_boundary, which
    deepspeed.checkpointing.configure(mpu, deepspeed_config=...) reads, where the training code does not pass its own:
    Megatron-DeepSpeed calls configure(synchronize=args.synchronize_each_layer) and GPT-NeoX
    configure(synchronize=neox_args.synchronize_each_layer), which override the file (activation_checkpointing/
    checkpointing.py configure: an argument given wins).  Only checkpointed layers synchronize."""
    if s.json_sync is None:
        return
    value, ev = s.json_sync
    own = "GPT-NeoX's synchronize_each_layer" if s.neox else (
        "Megatron-DeepSpeed's --synchronize-each-layer" if s.megatron_deepspeed else None)
    if own is not None:
        if s.value("recipe.checkpoint_sync", False) != value:
            s.ignored.append(f"activation_checkpointing.synchronize_checkpoint_boundary {str(value).lower()}: "
                             f"overridden by {own}, which the training code passes to "
                             f"deepspeed.checkpointing.configure ({ev})")
        return
    if value and s.value("recompute") == "full":
        s.put("recipe.checkpoint_sync", True, f"{ev} (deepspeed.checkpointing.configure(mpu, deepspeed_config=...) "
                                              f"reads it)")
    elif value:
        s.ignored.append(f"activation_checkpointing.synchronize_checkpoint_boundary true, but the files do not say the "
                         f"layers are checkpointed (recompute priced as {s.value('recompute', 'none')}); if the "
                         f"training code checkpoints through deepspeed.checkpointing it synchronizes: state "
                         f"recompute = 'full' in ds_topology.py or pipeline.activation_checkpoint_interval ({ev})")


def _grad_accumulation(s: Settings) -> None:
    """Which DeepSpeed optimizer the files' ZeRO stage and precision select (bf16 with ZeRO stage 0 is the
    BF16_Optimizer under a pipeline, DDP_BFLOAT16 without one), and so how it accumulates gradients
    (common.deepspeed_grad_accumulation).  A pipeline: DeepSpeed's PipelineEngine, which a PipelineModule gets (a
    GPT-NeoX config, Megatron-DeepSpeed without --no-pipeline-parallel, a topology of more than one stage)."""
    zero = s.entry("zero_stage") or (0, "DeepSpeed's default ZeRO stage 0")
    if zero[0] == 0 and not s.has("recipe.ddp_bucket_params"):
        # ZeRO-0 has no reduce_bucket_size: the engine's own all-reduce bucket (a QA run: BLOOM's JSON, stage 0, was
        # said to reduce 50,000,000 elements at a time because "the ds_config.json placement writes sets" it)
        s.put("recipe.ddp_bucket_params", DEEPSPEED_ALLREDUCE_BUCKET, f"{zero[1]} ({ENGINE_BUCKET})")
    precision = s.sources.get("precision", "")
    bf16 = s.value("precision") == "bf16" and "fp16" not in precision.split(":", 2)[-1]
    pipeline = s.neox or s.pipeline_module is not None or s.value("pp", 1) > 1
    bf16_optimizer = zero[0] == 0 and bf16 and pipeline
    fp32_buffer = s.grad_accum_dtype is not None and s.grad_accum_dtype[0].lower() in FP32_NAMES
    if zero[0] == 0 and bf16 and fp32_buffer:  # with or without a pipeline: the same else branch raises
        where = s.grad_accum_dtype[1] if s.grad_accum_dtype[1] == zero[1] else f"{s.grad_accum_dtype[1]}; {zero[1]}"
        raise InputError(f"{where}: data_types.grad_accum_dtype "
                         f"{s.grad_accum_dtype[0]} with bf16 at ZeRO stage 0 is refused by DeepSpeed "
                         f"(runtime/engine.py _do_optimizer_sanity_check: NotImplementedError \"unsupported mix of "
                         f"model_dtype=torch.bfloat16 and grad_accum_dtype=torch.float32\"); set "
                         f"zero_optimization.stage 1 (the BF16_Optimizer with an fp32 buffer) or drop grad_accum_dtype")
    if zero[0] == 0 and bf16 and not pipeline and not s.has("recipe.grad_accumulation"):
        deepspeed_grad_accumulation(s, False, f"{zero[1]}; {precision} ({DDP_BF16}; no audited file builds a "
                                              f"PipelineModule: a topology of stages, a Megatron-DeepSpeed or "
                                              f"GPT-NeoX launch)")
        return
    deepspeed_grad_accumulation(s, bf16_optimizer, f"{zero[1]}; {precision}" if bf16_optimizer else zero[1],
                                buffer_fp32=False)


def _finish(s: Settings) -> None:
    """World size and hosts from the hostfile and launcher, the HF Trainer's "auto" values, and DeepSpeed's
    batch identity train_batch_size = micro x accumulation x dp for the term the files leave out."""
    nodes, gpus = s.num_nodes, s.num_gpus
    if s.hostfile is not None:
        pool, ev = s.hostfile.slots, s.hostfile.evidence
        names = list(pool)
        slots = [pool[h] for h in names]
        # DeepSpeed 0.19.8 runner.apply_num_nodes_and_gpus: the first num_nodes hosts, num_gpus slots each
        if nodes is not None:
            k = read_int(nodes[0], "--num_nodes", nodes[1])
            names, slots = names[:k], slots[:k]
        if gpus is not None:
            g = read_int(gpus[0], "--num_gpus", gpus[1])
            slots = [g] * len(names)
        s.put("hosts", tuple(names), ev)
        s.put("world_size", sum(slots), ev)
        if len(set(slots)) == 1:
            s.put("gpus_per_node", slots[0], ev)
        else:  # a user trial got "world size 508 is not divisible by tp * pp * cp", naming no file or host
            common = max(set(slots), key=slots.count)
            odd = [h for h, n in zip(names, slots, strict=True) if n != common]
            raise InputError(f"{s.hostfile.lines.get(odd[0], ev)}: host {odd[0]} runs {pool[odd[0]]} processes where "
                             f"{len(names) - len(odd)} of the {len(names)} hosts run {common}"
                             f"{f' ({len(odd)} hosts differ)' if len(odd) > 1 else ''}, so the job's world size is "
                             f"{sum(slots)}; placement prices jobs whose hosts each run the same number of ranks: "
                             f"give every host slots={common} (its GPUs), or --num_gpus to the launcher")
    elif gpus is not None:
        g = read_int(gpus[0], "--num_gpus", gpus[1])
        n = read_int(nodes[0], "--num_nodes", nodes[1]) if nodes is not None else 1
        s.put("gpus_per_node", g, gpus[1])
        s.put("world_size", n * g, gpus[1] if nodes is None else f"{nodes[1]}; {gpus[1]}")
    elif nodes is not None and nodes[0].isdigit():
        # the hostfile's first num_nodes hosts, each with its slots (DeepSpeed runner.py main: active_resources cut
        # to num_nodes; slots as the hostfile lists them without --num_gpus), the hostfile not among the files: a QA
        # trial's `deepspeed --num_nodes 4` was priced on the catalog cluster's default 1,024 GPUs, its 4 unsaid
        s.put("launcher_nodes", read_int(nodes[0], "--num_nodes", nodes[1]),
              f"{nodes[1]}: the hostfile's first {nodes[0]} hosts, each with the slots the hostfile gives it, which "
              f"is not among the files: assumed all its GPUs (give the hostfile with --launch to read them)")
    deepspeed_json_unread(s)
    for auto in s.hf_auto:
        # HF Trainer fills "auto" from TrainingArguments: the launch command's flag, else its default
        # (transformers training_args.py: per_device_train_batch_size 8, gradient_accumulation_steps 1, fp32)
        key, where = auto.key, auto.evidence
        if auto.field == "precision":
            if not s.has("precision") and s.hf_precision is None:  # the JSON alone: the command may say --bf16
                s.ignored.append(f"{key}.enabled \"auto\" with no --bf16/--fp16 in the launch files (the training "
                                 f"command is not among them): the HF Trainer runs fp32 without them, priced as bf16 "
                                 f"({where}); give the command to price what it runs")
            elif not s.has("precision"):  # a user trial: priced as bf16, the step several times too short
                s.refusal = s.refusal or fp32_refusal(
                    where, f"{key}.enabled \"auto\" with no --bf16/--fp16 in the launch files: the HF Trainer fills "
                           f"it from TrainingArguments, whose default trains fp32 (transformers training_args.py bf16 "
                           f"and fp16 False)", "add --bf16 (or --fp16) to the training command")
            continue
        if s.has(auto.field):
            s.put(auto.field, s.value(auto.field), f"{s.sources[auto.field]} (fills \"auto\" of {key}: {where})")
        elif auto.field in HF_DEFAULTS:
            arg, value = HF_DEFAULTS[auto.field]
            s.put(auto.field, value, f"HF TrainingArguments default {arg} {value} (fills \"auto\" of {key}: {where})")
    if s.hf_trainer and not s.json_paths and not s.has("micro_batch_size") and not s.has("global_batch"):
        # no DeepSpeed JSON (an accelerate config): the Trainer's own batch, its flag or TrainingArguments' default (a
        # QA run: priced the model's default global batch as 1 x 512 accumulation, both labelled the default)
        arg, value = HF_DEFAULTS["micro_batch_size"]
        s.put("micro_batch_size", value, f"HF TrainingArguments default {arg} {value} (no --{arg} in the launch "
                                         f"command: {s.hf_trainer})")
    # train_batch_size = micro * gas * dp (deepspeed runtime/config.py _batch_assertion); derive what is missing
    world = s.value("world_size")
    model = s.value("tp", 1) * s.value("pp", 1) * s.value("cp", 1)
    gas = s.take("grad_accumulation")
    tbs, mbs = s.entry("global_batch"), s.entry("micro_batch_size")
    if gas is None and s.hf_trainer and mbs is not None:  # the Trainer fills train_batch_size from its own
        gas = (1, "HF TrainingArguments default gradient_accumulation_steps 1 (the Trainer fills the JSON's batch "
                  "from it)")
    if gas is None and tbs is None and mbs is not None:  # deepspeed runtime/config.py: gas defaults to 1
        gas = (1, "DeepSpeed default gradient_accumulation_steps 1 (the files set no train_batch_size)")
    if gas is None and tbs is not None and mbs is None and not s.hf_trainer:
        # train_batch_size alone: DeepSpeed sets accumulation 1 and the micro-batch train_batch_size / dp
        # (runtime/config.py _set_batch_related_parameters, its `elif train_batch is not None` branch)
        gas = (1, "DeepSpeed sets gradient_accumulation_steps 1 where only train_batch_size is given "
                  "(runtime/config.py _set_batch_related_parameters)")
    if gas is not None:
        s.put("grad_accumulation", *gas)
    if world is not None:
        if world % model:
            raise InputError(f"world size {world} is not divisible by tp * pp * cp = {model}")
        dp = world // model
        if tbs is not None and mbs is None and gas is not None:
            micro, rem = divmod(tbs[0], gas[0] * dp)
            if rem or micro < 1:
                raise InputError(f"train_batch_size {tbs[0]} is not gradient_accumulation_steps {gas[0]} x dp {dp} x "
                                 f"an integer micro-batch ({tbs[1]}; {gas[1]}); "
                                 f"{_batch_verdict(s, world, dp, tbs[0], gas[0])}")
            s.put("micro_batch_size", micro, f"{tbs[1]}; {gas[1]} (train_batch_size / (gas x dp {dp}))")
        elif tbs is not None and mbs is not None and gas is not None and tbs[0] != mbs[0] * gas[0] * dp:
            raise InputError(f"train_batch_size {tbs[0]} != micro-batch {mbs[0]} x gradient_accumulation_steps "
                             f"{gas[0]} x dp {dp} ({tbs[1]}; {mbs[1]}; {gas[1]}); "
                             f"{_batch_verdict(s, world, dp, tbs[0], mbs[0] * gas[0])}")
    if tbs is None and mbs is not None and gas is not None and world is not None:
        s.put("global_batch", mbs[0] * gas[0] * (world // model), f"{mbs[1]}; {gas[1]}")


def _batch_verdict(s: Settings, world: int, dp: int, batch: int, per_rank: int) -> str:
    """Why DeepSpeed's batch identity fails: the files' own numbers (DeepSpeed rejects them), or a data-parallel
    size taken from degrees no file states.  DeepSpeed takes TP, PP and CP in code (the topology the training script
    passes as mpu), so a JSON audited without that file leaves them 1 here, not in the job.  `per_rank`: the
    sequences one data-parallel rank takes per step (micro-batch x accumulation, or accumulation alone)."""
    assumed = [axis for axis in ("tp", "pp", "cp") if not s.has(axis)]
    if s.hostfile is not None:  # the world size is the hostfile's: a short one is the likelier slip (a user trial
        # with half the allocation's hosts was told to change its layout)
        hosts = len(s.value("hosts", ()))
        where = (f"; the world size {world} is {hosts} hosts of the hostfile ({s.sources.get('world_size', '')}): if "
                 f"the job ran on more hosts, give the hostfile it ran with")
    else:
        where = ""
    if not assumed:
        return f"DeepSpeed rejects it{where}"
    terms = " x ".join(f"{axis} {s.value(axis, 1)}" for axis in ("tp", "pp", "cp"))
    stated = ", ".join(f"{axis} {s.value(axis)}" for axis in ("tp", "pp", "cp") if s.has(axis))
    need = batch // per_rank
    fits = (f"; the batch holds with dp {need}, i.e. tp x pp x cp = {world} / {need} = {world // need}"
            if batch % per_rank == 0 and world % need == 0 else "")
    return (f"dp {dp} = world size {world} / ({terms}), with {', '.join(assumed)} assumed 1 because no audited file "
            f"states {'them' if len(assumed) > 1 else 'it'}{f' (only {stated})' if stated else ''}: DeepSpeed takes "
            f"them in code, from the topology the training script passes (placement's ds_topology.py, or the script "
            f"that builds a PipeModelDataParallelTopology or PipelineModule); add that file with --launch{fits}{where}")
