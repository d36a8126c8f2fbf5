"""What a pipeline stage sends per TP rank: Megatron-Core sends the sequence-parallel shard, and without sequence
parallelism every TP rank sends the whole activation (megatron-core 0.19.2 pipeline_parallel/schedules.py
get_tensor_shapes); DeepSpeed's PipelineEngine and the Megatron-LM of 2021-2022 scatter it over the TP group
(`pipeline_p2p_scatter`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

GPT3 = ["evaluate", "--model", "gpt3-175b", "--cluster", "dgx-h100", "--gpus", "4096", "--seq-len", "2048",
        "--global-batch", "1536", "--tp", "8", "--cp", "1", "--ep", "1", "--etp", "1", "--pp", "16", "--vpp", "1",
        "--mbs", "1", "--zero", "1", "--recompute", "none", "--json"]


def pp_bytes(*extra: str) -> float:
    result = CliRunner().invoke(main, [*GPT3, *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["crossings"]["pp"]["bytes_per_member_per_step"]


def test_without_sequence_parallelism_every_tp_rank_sends_the_whole_activation() -> None:
    shard = pp_bytes("--sequence-parallel")
    # dp 4,096 / (8 x 16) = 32: 1,536 / 32 = 48 micro-batches of 2,048 x 12,288 bf16 activations, forward and
    # back, 1/8 each
    assert shard == 48 * 2 * 2048 * 12288 * 2 / 8
    assert pp_bytes("--no-sequence-parallel") == 8 * shard
    assert pp_bytes("--no-sequence-parallel", "--pipeline-p2p-scatter") == shard
    assert pp_bytes("--no-sequence-parallel", "--pipeline-p2p-whole") == 8 * shard


def test_told_whole_under_sequence_parallelism_a_rank_sends_the_shard_it_holds() -> None:
    """DeepSpeed's engine with pipe_partitioned / grad_partitioned false sends each rank's own output, which under
    sequence parallelism is its sequence shard, not the whole activation (a QA run: it was priced 8x)."""
    shard = pp_bytes("--sequence-parallel")
    assert pp_bytes("--sequence-parallel", "--pipeline-p2p-whole") == shard
    step = CliRunner().invoke(main, [*GPT3, "--sequence-parallel"])
    whole = CliRunner().invoke(main, [*GPT3, "--sequence-parallel", "--pipeline-p2p-whole"])
    assert json.loads(whole.stdout)["step_time_s"] == json.loads(step.stdout)["step_time_s"]


PTDP_530B = ["evaluate", "--model", "megatron-gpt-529.6b", "--cluster", "dgx-a100-80g", "--gpus", "2520", "--seq-len",
             "2048", "--global-batch", "2520", "--tp", "8", "--pp", "35", "--vpp", "3", "--mbs", "1", "--zero", "0",
             "--recompute", "full", "--attention-kernel", "unfused", "--no-tp-async-backward", "--no-dp-overlap",
             "--no-pp-comm-overlap", "--json"]


def test_a_scattered_share_is_all_gathered_over_the_tp_group_on_arrival() -> None:
    """PTD-P's 530B row (Megatron-LM 6985e58938, --scatter-gather-tensors-in-pipeline): each received activation
    and gradient, 1/8 of it over the network, is all-gathered over the 8 TP ranks' NVLink before the stage uses it
    (megatron/p2p_communication.py gather_split_1d_tensor); a sequence-parallel shard sends the same bytes and needs
    no gather.  The difference is those gathers: 280 micro-batches x 3 chunks x 2, each (7/8) of the 2,048 x 20,480
    bf16 activation at the node's NVLink rate."""
    scatter = json.loads(CliRunner().invoke(main, [*PTDP_530B, "--no-sequence-parallel",
                                                   "--pipeline-p2p-scatter"]).stdout)
    shard = json.loads(CliRunner().invoke(main, [*PTDP_530B, "--sequence-parallel"]).stdout)
    assert scatter["crossings"]["pp"]["bytes_per_member_per_step"] == shard["crossings"]["pp"][
        "bytes_per_member_per_step"]
    nvlink = scatter["fabric_levels"][0]["bandwidth_bytes_per_s"]
    gathers = 280 * 3 * 2 * (7 / 8) * 2048 * 20480 * 2 / nvlink
    assert scatter["breakdown"]["pp"] - shard["breakdown"]["pp"] == pytest.approx(gathers, rel=0.1)


def _audit(tmp_path: Path, script: str) -> dict:
    launch = tmp_path / "train.sh"
    launch.write_text(script)
    result = CliRunner().invoke(main, ["audit", "--launch", str(launch), "--model", "gpt3-175b", "--cluster",
                                       "dgx-h100", "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["estimate"]


MEGATRON = ("torchrun --nnodes 64 --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 8 "
            "--pipeline-model-parallel-size 8 --num-layers 96 --hidden-size 12288 --num-attention-heads 96 "
            "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 512 "
            "--bf16 --use-distributed-optimizer {extra}\n")


def test_an_audited_megatron_core_job_without_sequence_parallelism_sends_whole_activations(tmp_path: Path) -> None:
    plain = _audit(tmp_path, MEGATRON.format(extra=""))
    sp = _audit(tmp_path, MEGATRON.format(extra="--sequence-parallel"))
    assert plain["crossings"]["pp"]["bytes_per_member_per_step"] == 8 * sp["crossings"]["pp"][
        "bytes_per_member_per_step"]


def test_a_megatron_lm_file_of_2021_scatters_its_sends_over_the_tp_group(tmp_path: Path) -> None:
    """`--activations-checkpoint-method` dates the file to 2021-08..2022-05, before Megatron-Core's pipeline
    communication (39b83c7953): Megatron-LM's --scatter-gather-tensors-in-pipeline, on by default, sent 1/tp."""
    old = MEGATRON.format(extra="--activations-checkpoint-method uniform")
    dated = _audit(tmp_path, old)
    assert dated["recipe"]["pipeline_p2p_scatter"] is True
    assert "39b83c7953" in dated["recipe_sources"]["pipeline_p2p_scatter"]
    sp = _audit(tmp_path, MEGATRON.format(extra="--sequence-parallel"))
    assert dated["crossings"]["pp"]["bytes_per_member_per_step"] == sp["crossings"]["pp"]["bytes_per_member_per_step"]
    off = _audit(tmp_path, old.replace("uniform", "uniform --no-scatter-gather-tensors-in-pipeline"))
    assert off["recipe"].get("pipeline_p2p_scatter") is False
    assert off["crossings"]["pp"]["bytes_per_member_per_step"] == 8 * sp["crossings"]["pp"][
        "bytes_per_member_per_step"]
