"""GPT-NeoX configs (EleutherAI/gpt-neox configs/*.yml): Megatron layers on DeepSpeed's pipeline engine, so
the audit reads them as a DeepSpeed job."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from placement.audit.readers.common import read_int
from placement.audit.readers.reading import Settings
from placement.errors import InputError

NEOX_KEYS = {"pipe_parallel_size": "pp", "model_parallel_size": "tp", "train_micro_batch_size_per_gpu":
             "micro_batch_size", "gradient_accumulation_steps": "grad_accumulation", "train_batch_size": "global_batch",
             "seq_length": "seq_len", "num_layers": "num_layers", "hidden_size": "hidden_size",
             "num_attention_heads": "num_attention_heads"}
"""GPT-NeoX argument (its YAML spells them with - or _, NeoXArgs reads both) -> LaunchLayout field."""


def is_neox(data: Any) -> bool:
    """A GPT-NeoX config: it names pipe_parallel_size or model_parallel_size (with - or _)."""
    return isinstance(data, dict) and any(str(k).replace("-", "_") in ("pipe_parallel_size", "model_parallel_size")
                                          for k in data)


def read_yaml(path: Path, data: dict, lines: list[str], s: Settings) -> None:
    """A GPT-NeoX config (EleutherAI/gpt-neox configs/*.yml; DeepSpeed runs it): TP, PP, micro-batch,
    accumulation, ZeRO stage, activation checkpointing, precision, the model's dimensions, its parallel residual
    (`gpt_j_residual`) and its attention kernel (`attention_config`)."""
    keys = {str(k).replace("-", "_"): (k, v) for k, v in data.items()}

    def ev(key: str) -> str:
        raw = str(keys[key][0])
        for n, line in enumerate(lines, 1):
            if re.search(rf"[\"']?{re.escape(raw)}[\"']?\s*:", line):
                return f"{path}:{n}: {line.strip()[:160]}"
        return f"{path}: {raw}"

    for key, field in NEOX_KEYS.items():
        if key in keys:
            s.put(field, read_int(keys[key][1], key, ev(key), minimum=1), ev(key))
    zero = keys.get("zero_optimization", (None, None))[1]
    if isinstance(zero, dict) and "stage" in zero:
        stage = read_int(zero["stage"], "zero_optimization.stage", ev("zero_optimization"))
        if not 0 <= stage <= 3:
            raise InputError(f"{ev('zero_optimization')}: zero_optimization.stage must be 0..3, got {stage}")
        s.put("zero_stage", stage, ev("zero_optimization"))
    if "checkpoint_activations" in keys:
        s.put("recompute", "full" if keys["checkpoint_activations"][1] is True else "none",
              ev("checkpoint_activations"))
    if "sequence_parallel" in keys:
        s.put("sequence_parallel", keys["sequence_parallel"][1] is True, ev("sequence_parallel"))
    for key in ("fp16", "bf16"):
        sec = keys.get(key, (None, None))[1]
        if isinstance(sec, dict) and sec.get("enabled", True) in (True, "true"):
            s.put("precision", "bf16", ev(key))
            if key == "fp16":
                s.ignored.append(f"fp16: FP16 mixed precision with loss scaling, priced as bf16 ({ev(key)})")
    if "precision" in keys and str(keys["precision"][1]) in ("fp16", "bfloat16", "bf16"):
        s.put("precision", "bf16", ev("precision"))
    if keys.get("synchronize_each_layer", (None, None))[1] is True:
        s.put("recipe.checkpoint_sync", True, ev("synchronize_each_layer"))
    for key in ("partition_activations", "cpu_offload"):
        if keys.get(key, (None, None))[1] is True:
            s.ignored.append(f"{key}: true ({ev(key)})")
    if not s.sources:
        raise InputError(f"{path}: a GPT-NeoX config without pipe_parallel_size, model_parallel_size or batch keys; "
                         f"nothing to audit")
    # the model code's choices, each GPT-NeoX's default where no file of the job states it
    _attention_kernel(keys, ev, path, s)
    _fusions(keys, ev, path, s)
    if "gpt_j_residual" in keys:
        s.put("parallel_residual", keys["gpt_j_residual"][1] is True, ev("gpt_j_residual"))
    elif not s.has("parallel_residual"):  # another of the job's files may set it; GPT-NeoX's default is off
        s.put("parallel_residual", False, f"{path}: no gpt_j_residual (GPT-NeoX's default: false)")



FUSIONS = ("rope_fusion", "bias_dropout_fusion")
"""GPT-NeoX switches that fuse the model's element-wise extras (RoPE, bias-dropout-add); both default to false
(megatron/neox_arguments/neox_args.py), which runs them as eager ops (recipe.fused_model_ops false)."""


def _fusions(keys: dict, ev, path: Path, s: Settings) -> None:
    """recipe.fused_model_ops: true only where the config turns on every one of FUSIONS."""
    if s.has("recipe.fused_model_ops"):  # another of the job's files set it
        return
    off = [k for k in FUSIONS if keys.get(k, (None, None))[1] is not True]
    if not off:
        s.put("recipe.fused_model_ops", True, "; ".join(ev(k) for k in FUSIONS))
        return
    said = [ev(k) for k in off if k in keys]
    unsaid = [k for k in off if k not in keys]
    where = "; ".join(said + ([f"{path}: no {' or '.join(unsaid)} (GPT-NeoX's default: false)"] if unsaid else []))
    s.put("recipe.fused_model_ops", False, where)


ATTENTION_KERNELS = {"global": "unfused", "flash": "flash2"}
"""GPT-NeoX attention type -> the kernel it runs: "global" is ParallelSelfAttention's own core (scores in HBM through
baddbmm, the fused masked softmax and bmm), "flash" calls the flash-attn 2 package's flash_attn_func
(megatron/model/transformer.py); the other types (local, sparse, gMLP, Mamba, RWKV) are not priced."""


def _attention_kernel(keys: dict, ev, path: Path, s: Settings) -> None:
    """recipe.attention_kernel from `attention_config` ([[types, count or "all"], ...], expanded by
    megatron/utils.py expand_attention_types; GPT-NeoX's default, unset, is global attention on every layer):
    the kernel of most layers, the rest named as not priced."""
    if "attention_config" not in keys:
        if not s.has("recipe.attention_kernel"):  # another of the job's files may set it
            s.put("recipe.attention_kernel", "unfused", f"{path}: no attention_config (GPT-NeoX's default: global "
                                                        f"attention on every layer, its unfused core)")
        return
    value = keys["attention_config"][1]
    layers: dict[str, int] = {}
    items = value if isinstance(value, list) else []
    if items and all(isinstance(x, str) for x in items):  # already expanded: one type per layer
        items = [[[x], 1] for x in items]
    for item in items:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], list)
                and (item[1] == "all" or (isinstance(item[1], int) and not isinstance(item[1], bool)))):
            raise InputError(f"{ev('attention_config')}: each attention_config item is [[types...], count or "
                             f"\"all\"], got {item!r}; fix the item as GPT-NeoX's expand_attention_types reads it")
        for kind in item[0]:
            layers[str(kind)] = layers.get(str(kind), 0) + (1 if item[1] == "all" else item[1])
    if not items or not layers:
        raise InputError(f"{ev('attention_config')}: attention_config = {value!r} names no attention type; give "
                         f"[[[\"global\"], NUM_LAYERS]] or [[[\"flash\"], NUM_LAYERS]]")
    priced = {k: n for k, n in layers.items() if k in ATTENTION_KERNELS}
    other = sorted(set(layers) - set(priced))
    if other:
        s.ignored.append(f"attention types {', '.join(other)}: not priced ({ev('attention_config')})")
    if priced:
        kind = max(sorted(priced), key=lambda k: priced[k])
        if len(priced) > 1:
            s.ignored.append(f"attention types {' and '.join(sorted(priced))} mixed: priced as {kind}, the type of "
                             f"most layers ({ev('attention_config')})")
        s.put("recipe.attention_kernel", ATTENTION_KERNELS[kind], ev("attention_config"))
