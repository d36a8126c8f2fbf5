"""Trial t26, finding 8: ms-swift's `megatron sft` and verl's `python3 -m verl.trainer.main_ppo` were told "cannot tell
the framework; pass --framework megatron", and with it "no launch command" or "data.train_files depends on $HOME".
They are training tools of their own, whose flags and defaults the audit does not read: the error names the tool and
the layout values its command states, for `placement evaluate`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

SWIFT = """#!/bin/bash
NPROC_PER_NODE=8 \\
megatron sft \\
    --model Qwen/Qwen3-32B \\
    --tensor_model_parallel_size 8 \\
    --micro_batch_size 1 \\
    --global_batch_size 16 \\
    --max_length 8192 \\
    --output_dir out
"""
VERL = """#!/bin/bash
ACTOR_TP=4
python3 -m verl.trainer.main_ppo --config-path=./config --config-name='ppo_megatron_trainer' \\
    data.train_files="${HOME}/data/train.parquet" \\
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=${ACTOR_TP} \\
    actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2 \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=8
"""


@pytest.mark.parametrize("framework", [(), ("--framework", "megatron")])
@pytest.mark.parametrize(("script", "tool", "states"), [
    (SWIFT, "ms-swift's Megatron CLI", "tensor_model_parallel_size 8, micro_batch_size 1, global_batch_size 16, "
                                       "max_length 8192"),
    (SWIFT.replace("megatron sft", "swift sft"), "ms-swift's CLI", "tensor_model_parallel_size 8"),
    (VERL, "verl's trainer", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size 4, "
                             "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size 2;"),
])
def test_a_training_tools_own_command_is_refused_by_name(tmp_path: Path, framework, script, tool, states) -> None:
    path = tmp_path / "run.sh"
    path.write_text(script)
    result = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "qwen3-30b-a3b", "--cluster",
                                       "dgx-h100", "--gpus", "16", *framework])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert tool in result.stderr and states in result.stderr and "placement evaluate" in result.stderr
    assert "rollout.tensor_model_parallel_size" not in result.stderr  # the inference engine's, not the trained model's
