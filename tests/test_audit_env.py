"""`placement audit --env NAME=VALUE`: the job's environment at the launch script's start.  A QA run on NVIDIA's
dgxc-benchmarking launch scripts, which read GPU_TYPE, JOB_TOTAL_GPUS, LLMB_INSTALL ... from the environment
(`export GPU_TYPE=${GPU_TYPE:?GPU_TYPE is a required variable.}`, then `if [[ $GPU_TYPE == "h100" ]]`), had to edit
the script to audit it.  The values are what bash would see, each cited as --env's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

# the shape of dgxc-benchmarking's launch scripts (llama3.1/launch.sh, deepseek_v3/pretrain/torchtitan/launch.sh at
# 841f5466): required variables, a lower-cased GPU type, a layout per GPU type and size
SCRIPT = """#!/bin/bash
export GPU_TYPE=${GPU_TYPE:?GPU_TYPE is a required variable.}
export GPU_TYPE=${GPU_TYPE,,}
export JOB_TOTAL_GPUS=${JOB_TOTAL_GPUS:?JOB_TOTAL_GPUS is a required variable.}
export SEQ_LEN=${SEQ_LEN:-8192}
if [[ $GPU_TYPE == "h100" ]]; then
    TP=4
    PP=2
elif [[ $GPU_TYPE == "b200" ]]; then
    TP=2
    PP=1
else
    echo "unsupported GPU type $GPU_TYPE"
    exit 1
fi
torchrun --nproc_per_node 8 --nnodes $((JOB_TOTAL_GPUS / 8)) pretrain_gpt.py \\
    --tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP --sequence-parallel \\
    --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention \\
    --num-query-groups 8 --swiglu --normalization RMSNorm --position-embedding-type rope \\
    --untie-embeddings-and-output-weights --disable-bias-linear --seq-length=$SEQ_LEN --max-position-embeddings 8192 \\
    --micro-batch-size 1 --global-batch-size 128 --bf16 --use-distributed-optimizer
"""


def _audit(tmp_path: Path, *argv: str):
    (tmp_path / "launch.sh").write_text(SCRIPT)
    return CliRunner().invoke(main, ["audit", "--launch", str(tmp_path / "launch.sh"), "--model", "llama3-8b",
                                     "--cluster", "dgx-h100", "--gpus", "16", "--json", *argv])


def test_without_the_environment_the_required_variable_is_named_with_the_flag(tmp_path):
    result = _audit(tmp_path)
    assert result.exit_code == 2, result.output
    assert "$GPU_TYPE" in result.output and "--env NAME=VALUE" in result.output


def test_the_environment_chooses_the_branch_and_its_values_cite_the_flag(tmp_path):
    result = _audit(tmp_path, "--env", "GPU_TYPE=H100", "--env", "JOB_TOTAL_GPUS=16", "--env", "SEQ_LEN=4096")
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    layout = out["layout"]
    assert (layout["tp"], layout["pp"]) == (4, 2)  # the h100 arm, ${GPU_TYPE,,} lowered
    assert out["estimate"]["seq_len"] == 4096  # the environment's, not the script's ${SEQ_LEN:-8192}
    assert "--env SEQ_LEN=4096" in layout["sources"]["seq_len"]
    assert "--env JOB_TOTAL_GPUS=16" in layout["sources"]["world_size"]  # --nnodes $((JOB_TOTAL_GPUS / 8))
    other = _audit(tmp_path, "--env", "GPU_TYPE=b200", "--env", "JOB_TOTAL_GPUS=16")
    assert other.exit_code in (0, 1), other.output
    out = json.loads(other.stdout)
    assert (out["layout"]["tp"], out["layout"]["pp"], out["estimate"]["seq_len"]) == (2, 1, 8192)


@pytest.mark.parametrize("flag, said", [("GPU_TYPE", "has no `=`"), ("1GPU=h100", "not a shell variable name"),
                                        ("=h100", "not a shell variable name"),
                                        ("GPU-TYPE=h100", "not a shell variable name")])
def test_a_malformed_env_flag_is_refused(tmp_path, flag, said):
    result = _audit(tmp_path, "--env", flag)
    assert result.exit_code == 2 and said in result.output and "--env NAME=VALUE" in result.output
    assert "Traceback" not in result.output


def test_a_variable_given_twice_is_refused(tmp_path):
    result = _audit(tmp_path, "--env", "GPU_TYPE=h100", "--env", "GPU_TYPE=b200")
    assert result.exit_code == 2 and "GPU_TYPE: given twice" in result.output


def test_a_value_with_an_equals_sign_and_an_empty_value_are_values(tmp_path):
    from placement.audit.launch import parse_launch

    (tmp_path / "run.sh").write_text('OPTS=${EXTRA:?}\ntorchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-'
                                     'parallel-size ${TP:?} --num-layers 32 $OPTS\n')
    lay = parse_launch([tmp_path / "run.sh"], None, (), (("TP", "2"), ("EXTRA", "--seq-length=4096")))
    assert (lay.tp, lay.seq_len) == (2, 4096)
