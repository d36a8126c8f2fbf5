"""A Megatron-Bridge config with a full-iteration CUDA graph and the loss's NaN check on does not start: Bridge asserts
`not rerun_state_machine.check_for_nan_in_loss` beside it (training/config.py:1509-1513 at 067f987df), and the field
defaults to True (Megatron-LM training/config/resilience_config.py:25).  A QA run: a saved Llama 3 8B config with
cuda_graph_impl local, cuda_graph_scope full_iteration and check_for_nan_in_loss true was priced with full graphs.
Megatron-LM's command line asserts the same (--no-check-for-nan-in-loss-and-grad), tested at the end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

SAVED = """model:
  _target_: megatron.bridge.models.llama.Llama3ModelProvider8B
  tensor_model_parallel_size: 1
  context_parallel_size: 1
  pipeline_model_parallel_size: 1
  sequence_parallel: false
  seq_length: 8192
  cuda_graph_impl: {impl}
  cuda_graph_scope: {scope}
train:
  _target_: megatron.bridge.training.config.TrainingConfig
  global_batch_size: 8
  micro_batch_size: 1
ddp:
  use_distributed_optimizer: true
"""


def _audit(tmp_path: Path, text: str):
    path = tmp_path / "run_config.yaml"
    path.write_text(text)
    return CliRunner().invoke(main, ["--reproducible", "audit", "--model", "llama3-8b", "--gpus", "8",
                                     "--framework", "megatron", "--json", "--launch", str(path)])


@pytest.mark.parametrize("rerun", ["rerun_state_machine:\n  check_for_nan_in_loss: true\n", ""])
@pytest.mark.parametrize(("impl", "scope"), [("local", "full_iteration"), ("full_iteration", "null")])
def test_a_full_graph_beside_the_nan_check_is_refused(tmp_path: Path, rerun: str, impl: str, scope: str) -> None:
    result = _audit(tmp_path, SAVED.format(impl=impl, scope=scope) + rerun)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "check_for_nan_in_loss must be disabled when using full_iteration CUDA graph" in result.output
    assert "set rerun_state_machine.check_for_nan_in_loss: false" in result.output
    assert ("check_for_nan_in_loss: true" if rerun else "its default True") in result.output


def test_the_check_off_prices_the_full_graph(tmp_path: Path) -> None:
    result = _audit(tmp_path, SAVED.format(impl="local", scope="full_iteration")
                    + "rerun_state_machine:\n  check_for_nan_in_loss: false\n")
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["estimate"]["recipe"]["cuda_graphs"] == "full"


SCRIPT = ("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 "
          "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --swiglu --ffn-hidden-size 14336 "
          "--group-query-attention --num-query-groups 8 --seq-length 8192 --micro-batch-size 1 --global-batch-size 8 "
          "--bf16 --use-distributed-optimizer --untie-embeddings-and-output-weights {graph}\n")


@pytest.mark.parametrize("graph", ["--cuda-graph-impl full_iteration",
                                   "--cuda-graph-impl local --cuda-graph-scope full_iteration"])
def test_megatron_lm_refuses_a_full_graph_without_the_flag(tmp_path: Path, graph: str) -> None:
    """Megatron-LM asserts --no-check-for-nan-in-loss-and-grad beside a full-iteration graph (arguments.py:1235-1237
    at d98e8a64dd; the scope's spelling from e7c55de99e): without it the job does not start."""
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT.format(graph=graph))
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", "8", "--launch", str(script)])
    assert result.exit_code == 2, result.output
    assert "should be set with --cuda-graph-impl=full_iteration" in result.output
    assert "add --no-check-for-nan-in-loss-and-grad" in result.output and "Traceback" not in result.output
    script.write_text(SCRIPT.format(graph=graph + " --no-check-for-nan-in-loss-and-grad"))
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", "8", "--launch", str(script),
                                       "--json"])
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["estimate"]["recipe"]["cuda_graphs"] == "full"
