"""Megatron's --use-tp-pp-dp-mapping (the dp-last order tp-cp-ep-pp-dp) against the expert grid: Megatron-Core
builds the experts' ranks in the same order and, with a pipeline, asserts their data-parallel size is the dense one
(parallel_state.py, since 3e7ceda6b7): a job whose ep x etp is not tp x cp does not start, so it is refused, not
priced (a trial: Mixtral 8x7B at tp 1, ep 8, pp 4 under the flag got a price and EP groups across nodes)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from placement.cli import main

MIXTRAL = ("--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
           "--group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 32768 "
           "--position-embedding-type rope --rotary-base 1000000 --swiglu --normalization RMSNorm "
           "--disable-bias-linear --untie-embeddings-and-output-weights --num-experts 8 --moe-router-topk 2 "
           "--moe-token-dispatcher-type alltoall --moe-grouped-gemm --use-distributed-optimizer "
           "--micro-batch-size 1 --global-batch-size 256 --bf16 --use-tp-pp-dp-mapping")


def _audit(tmp_path, degrees: str):
    script = tmp_path / "train.sh"
    script.write_text("export CUDA_DEVICE_MAX_CONNECTIONS=1\n"
                      f"torchrun --nproc_per_node 8 --nnodes 16 pretrain_gpt.py {degrees} {MIXTRAL}\n")
    return CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "mixtral-8x7b", "--cluster",
                                     "dgx-h100", "--gpus", "128", "--json"])


def test_dp_last_order_with_experts_off_the_dense_grid_does_not_start(tmp_path) -> None:
    result = _audit(tmp_path, "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 "
                              "--expert-model-parallel-size 8")
    assert result.exit_code == 2, result.output
    assert "train.sh:2" in result.output and "--use-tp-pp-dp-mapping" in result.output
    assert "(tp 1 x cp 1 x dp 32 / (ep 8 x etp 1) = 4) is not the dense one (dp 32)" in result.output
    assert "3e7ceda6b7" in result.output and "does not start" in result.output
    assert "Traceback" not in result.output


def test_dp_last_order_with_experts_on_the_dense_grid_is_priced(tmp_path) -> None:
    result = _audit(tmp_path, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 "
                              "--expert-model-parallel-size 2 --expert-tensor-parallel-size 1 --sequence-parallel")
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.stdout)
    assert data["estimate"]["mapping_compact"]["rank_order"] == "tp-cp-ep-pp-dp"


def test_dp_last_order_with_context_parallelism_on_a_dense_model_does_not_start(tmp_path) -> None:
    """A dense model's expert grid is Megatron's too (ep 1, etp = tp): cp 2 makes its data-parallel size twice
    the dense one."""
    script = tmp_path / "train.sh"
    script.write_text("export CUDA_DEVICE_MAX_CONNECTIONS=1\n"
                      "torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py --tensor-model-parallel-size 4 "
                      "--context-parallel-size 2 --pipeline-model-parallel-size 2 --num-layers 32 --hidden-size 4096 "
                      "--num-attention-heads 32 --swiglu --ffn-hidden-size 14336 --group-query-attention "
                      "--num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 --micro-batch-size 1 "
                      "--global-batch-size 64 --bf16 --sequence-parallel --use-tp-pp-dp-mapping\n")
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster",
                                       "dgx-h100", "--gpus", "32"])
    assert result.exit_code == 2, result.output
    assert "(tp 4 x cp 2 x dp 2 / (ep 1 x etp 4) = 4) is not the dense one (dp 2)" in result.output


def _dense(tmp_path, degrees: str):
    script = tmp_path / "train.sh"
    script.write_text("export CUDA_DEVICE_MAX_CONNECTIONS=1\n"
                      f"torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py {degrees} --num-layers 32 "
                      "--hidden-size 4096 --num-attention-heads 32 --swiglu --ffn-hidden-size 14336 "
                      "--group-query-attention --num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 "
                      "--micro-batch-size 1 --global-batch-size 64 --bf16 --sequence-parallel "
                      "--use-tp-pp-dp-mapping\n")
    return CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster",
                                     "dgx-h100", "--gpus", "32"])


def test_dp_last_order_takes_a_dense_models_stated_expert_tp(tmp_path) -> None:
    """A dense model's expert grid is built from --expert-tensor-parallel-size where the files state it
    (arguments.py sets it to tp only when None, core_v0.19.0 :569-570): Megatron's functional test
    gpt3_mcore_te_tp2_pp2_cp2_etp4_dp_last (tp 2, cp 2, pp 2, etp 4) starts, since etp x ep = tp x cp."""
    result = _dense(tmp_path, "--tensor-model-parallel-size 4 --context-parallel-size 2 "
                              "--pipeline-model-parallel-size 2 --expert-tensor-parallel-size 8")
    assert result.exit_code in (0, 1), result.output
    assert "layout: tp4 cp2 pp2 dp2" in result.output


def test_dp_last_order_refuses_a_dense_models_stated_expert_tp_off_the_grid(tmp_path) -> None:
    """tp 2, pp 2 and a stated etp 1 on 32 GPUs: the expert grid's data-parallel size is 16 against the dense 8."""
    result = _dense(tmp_path, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                              "--expert-tensor-parallel-size 1")
    assert result.exit_code == 2, result.output
    assert "(tp 2 x cp 1 x dp 8 / (ep 1 x etp 1) = 16) is not the dense one (dp 8)" in result.output
    assert "--expert-tensor-parallel-size 1" in result.output
