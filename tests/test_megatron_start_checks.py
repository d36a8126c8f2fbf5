"""Four megatron.sh files a user trial found Megatron-LM refusing at start-up while placement wrote them as running:
per-layer CUDA graphs beside launch.sbatch's expandable segments without NCCL_GRAPH_REGISTER=0, recompute modules the
model does not have (now refused as input), the moe_preprocess graph under alltoall with a capacity factor, and
--fp8-param-gather without the distributed optimizer (Megatron-LM core_v0.19.0 arguments.py and transformer_config.py,
lines in each message)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

DENSE = ["--model", "llama3-70b", "--gpus", "64", "--seq-len", "8192", "--global-batch", "128"]
MOE = ["--model", "qwen3-30b-a3b", "--gpus", "64", "--seq-len", "4096", "--global-batch", "512"]


def _emit(tmp_path: Path, argv: list[str]) -> tuple[dict, str]:
    out = CliRunner().invoke(main, ["evaluate", *argv, "--emit", "megatron", "--out", str(tmp_path), "--json"])
    assert out.exit_code in (0, 1), out.output
    return json.loads(out.stdout), (tmp_path / "megatron.sh").read_text()


def test_per_layer_graphs_turn_nccl_graph_registration_off(tmp_path: Path) -> None:
    """launch.sbatch exports expandable_segments:True (the memory price assumes it), and Megatron-LM asserts
    NCCL_GRAPH_REGISTER=0 beside it under --cuda-graph-impl transformer_engine (arguments.py:1880-1887)."""
    data, text = _emit(tmp_path, [*DENSE, "--tp", "8", "--pp", "4", "--vpp", "5", "--cuda-graphs", "partial",
                                  "--recompute", "selective", "--recompute-modules", "core_attn,mlp"])
    assert "--cuda-graph-impl transformer_engine" in text and "export NCCL_GRAPH_REGISTER=0\n" in text
    assert "expandable_segments:True" in (tmp_path / "launch.sbatch").read_text()
    assert not data["files_not_starting"]
    _, none = _emit(tmp_path / "none", [*DENSE, "--tp", "8", "--pp", "4", "--recompute", "full"])
    assert "NCCL_GRAPH_REGISTER" not in none


def test_recompute_modules_the_model_lacks_are_bad_input() -> None:
    """mla_up_proj on a model without MLA, moe_act without experts: they recompute nothing (the trial's plan had HFU
    equal to MFU) and Megatron-Core refuses them, so evaluate and plan refuse them, naming each."""
    for command in (["evaluate", *DENSE, "--tp", "8", "--pp", "4", "--recompute", "selective"], ["plan", *DENSE]):
        out = CliRunner().invoke(main, [*command, "--recompute-modules", "mla_up_proj,moe_act"])
        assert out.exit_code == 2, out.output
        assert ("--recompute-modules names mla_up_proj, moe_act, which model llama3-70b does not have (no "
                "multi-latent attention; no routed experts)") in out.output


@pytest.mark.parametrize(("argv", "says"), [
    ([*MOE, "--tp", "1", "--ep", "8", "--recompute", "selective", "--moe-dispatcher", "alltoall", "--cuda-graphs",
      "partial", "--moe-capacity-factor", "1.0"],
     "Megatron-Core refuses the moe_preprocess graph with the alltoall dispatcher where a capacity factor"),
    ([*DENSE, "--tp", "8", "--pp", "4", "--zero", "0", "--recompute", "full", "--precision", "fp8", "--fp8-params"],
     "Megatron-LM refuses --fp8-param-gather without the distributed optimizer"),
])
def test_a_file_megatron_refuses_is_written_as_not_starting(tmp_path: Path, argv: list[str], says: str) -> None:
    data, text = _emit(tmp_path, argv)
    assert data["files_not_starting"] and "megatron.sh" in data["files_not_starting"][0]
    assert says in text
    assert shlex.split(text, comments=True)  # still a readable script


def test_modules_the_model_has_are_not_refused(tmp_path: Path) -> None:
    data, text = _emit(tmp_path, [*MOE, "--tp", "1", "--ep", "8", "--recompute", "selective", "--recompute-modules",
                                  "moe_act"])
    assert "--recompute-modules moe_act" in text and not data["files_not_starting"]
