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
    accumulation, ZeRO stage, activation checkpointing, precision, the model's dimensions and its parallel
    residual (`gpt_j_residual`)."""
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
    if "gpt_j_residual" in keys:
        s.put("parallel_residual", keys["gpt_j_residual"][1] is True, ev("gpt_j_residual"))
    elif not s.has("parallel_residual"):  # another of the job's files may set it; GPT-NeoX's default is off
        s.put("parallel_residual", False, f"{path}: no gpt_j_residual (GPT-NeoX's default: false)")
    for key in ("synchronize_each_layer", "partition_activations", "cpu_offload"):
        if keys.get(key, (None, None))[1] is True:
            s.ignored.append(f"{key}: true ({ev(key)})")
    if not s.sources:
        raise InputError(f"{path}: a GPT-NeoX config without pipe_parallel_size, model_parallel_size or batch keys; "
                         f"nothing to audit")


