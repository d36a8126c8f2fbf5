"""Megatron-Core's --microbatch-group-size-per-virtual-pipeline-stage (core_r0.10.0 on) changes the interleaved
schedule placement prices with groups of pp: the flag was read by nothing and said nowhere (a trial: GPT-3 175B on
4,096 H100 with the flag was priced without a word; with 12 micro-batches on pp 8, a count Megatron runs in groups of
12, the refusal did not say why the job runs)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from placement.cli import main

GPT3 = ("torchrun --nproc_per_node 8 --nnodes 512 pretrain_gpt.py --num-layers 96 --hidden-size 12288 "
        "--num-attention-heads 96 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --bf16 "
        "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --tensor-model-parallel-size 4 "
        "--pipeline-model-parallel-size 8 --num-layers-per-virtual-pipeline-stage 3 --sequence-parallel "
        "--microbatch-group-size-per-virtual-pipeline-stage {group} --global-batch-size {batch}\n")


def _audit(tmp_path, group: int, batch: int, *extra: str):
    script = tmp_path / "train.sh"
    script.write_text("export CUDA_DEVICE_MAX_CONNECTIONS=1\n" + GPT3.format(group=group, batch=batch))
    return CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "gpt3-175b", "--cluster",
                                     "dgx-h100", "--gpus", "4096", *extra])


def test_the_group_size_is_a_setting_seen_but_not_priced(tmp_path) -> None:
    result = _audit(tmp_path, 16, 2048, "--json")
    assert result.exit_code in (0, 1), result.output
    ignored = json.loads(result.stdout)["layout"]["ignored"]
    (note,) = [n for n in ignored if n.startswith("--microbatch-group-size-per-virtual-pipeline-stage")]
    assert "priced with groups of the pipeline size" in note and "train.sh:2" in note


def test_a_count_only_the_group_lets_run_is_refused_naming_the_flag(tmp_path) -> None:
    result = _audit(tmp_path, 12, 1536)
    assert result.exit_code == 2, result.output
    assert "interleaving needs micro-batches (12) divisible by pp (8)" in result.output
    assert "the files set --microbatch-group-size-per-virtual-pipeline-stage (" in result.output
    assert "train.sh:2), with which Megatron-Core may run this count" in result.output
