"""Trial t26, finding 9: LLaVA's finetune.sh passes --vision_tower, --mm_projector_type and --image_aspect_ratio to
its HF Trainer script; the audit priced the language model alone and said nothing of them.  They are now listed as
seen but not priced, and the attention kernel's source says the entry script may set attn_implementation in code
(LLaVA's train_mem.py does)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

SCRIPT = """#!/bin/bash
deepspeed llava/train/train_mem.py \\
    --deepspeed ./zero3.json \\
    --model_name_or_path lmsys/vicuna-13b-v1.5 \\
    --vision_tower openai/clip-vit-large-patch14-336 \\
    --mm_projector_type mlp2x_gelu \\
    --image_aspect_ratio pad \\
    --bf16 True \\
    --per_device_train_batch_size 4 \\
    --gradient_accumulation_steps 1 \\
    --model_max_length 2048 \\
    --gradient_checkpointing True
"""
ZERO3 = '{"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto",' \
        ' "train_batch_size": "auto", "gradient_accumulation_steps": "auto"}'


def _audit(tmp_path: Path, script: str) -> dict:
    (tmp_path / "run.sh").write_text(script)
    (tmp_path / "zero3.json").write_text(ZERO3)
    result = CliRunner().invoke(main, ["audit", "--launch", str(tmp_path / "run.sh"), "--launch",
                                       str(tmp_path / "zero3.json"), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                       "--gpus", "8", "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_a_multimodal_models_own_flags_are_listed_as_not_priced(tmp_path: Path) -> None:
    data = _audit(tmp_path, SCRIPT)
    line = next(x for x in data["layout"]["ignored"] if "--vision_tower" in x)
    assert "--mm_projector_type" in line and "--image_aspect_ratio" in line and "not priced" in line
    assert "the entry script in its code" in data["estimate"]["recipe_sources"]["attention_kernel"]


def test_a_language_model_script_lists_none(tmp_path: Path) -> None:
    data = _audit(tmp_path, "\n".join(x for x in SCRIPT.splitlines() if "vision" not in x and "_mm_" not in x
                                      and "mm_" not in x and "image" not in x) + "\n")
    assert not any("multimodal" in x for x in data["layout"]["ignored"])
