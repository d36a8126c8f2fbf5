"""A Python file that builds a job another way than DeepSpeed's topology classes is refused naming what it is and
what to pass (a QA run: MaxText's benchmarks/maxtext_v5p_model_configs.py, and a Megatron-Bridge recipe module, were
told they build no PipeModelDataParallelTopology, a DeepSpeed file's message)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

# the opening of MaxText's benchmarks/maxtext_v5p_model_configs.py (AI-Hypercomputer/maxtext e591f30c), trimmed
MAXTEXT = '''"""Shared Benchmark config for v6e orchestrations."""

import os.path

from benchmarks import xla_flags_library
from benchmarks.benchmark_utils import MaxTextModel, _add_to_model_dictionary

v5p_model_dict = {}

llama3_1_405b_8192_v5p_1024 = _add_to_model_dictionary(
    v5p_model_dict,
    MaxTextModel(
        model_name="llama3-1-405b-8192-v5p-1024",
        model_type="llama3.1-405b",
        tuning_params={
            "per_device_batch_size": 2,
            "ici_fsdp_parallelism": -1,
            "max_target_length": 8192,
        },
    ),
)
'''
# the imports of Megatron-Bridge's src/megatron/bridge/recipes/llama/llama3.py (NVIDIA-NeMo/Megatron-Bridge
# 067f987d), trimmed
BRIDGE = '''# Copyright (c) 2025, NVIDIA CORPORATION.  All rights reserved.

import torch

from megatron.bridge.recipes.llama.h100.llama3 import (
    llama3_8b_pretrain_config,
)
'''
DEEPSPEED = '''from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology

topo = PipeModelDataParallelTopology(num_pp=2, num_mp=4, num_dp=1)
'''


@pytest.mark.parametrize(("text", "line", "says"), [
    (MAXTEXT, 12, "a MaxText benchmark recipe"),
    (BRIDGE, 5, "a Megatron-Bridge recipe in Python"),
])
def test_a_python_recipe_is_refused_by_name(tmp_path: Path, text: str, line: int, says: str) -> None:
    path = tmp_path / "recipe.py"
    path.write_text(text)
    result = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "llama3-8b", "--cluster",
                                       "dgx-h100", "--gpus", "8"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{path}:{line}: {says}" in result.output
    assert "PipeModelDataParallelTopology" not in result.output


def test_a_deepspeed_topology_file_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "ds_topology.py"
    path.write_text(DEEPSPEED)
    result = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "llama3-8b", "--cluster",
                                       "dgx-h100", "--gpus", "8"])
    assert "recipe" not in result.output.split("\n")[0]
    assert "a Python file is read for the DeepSpeed topology" not in result.output
