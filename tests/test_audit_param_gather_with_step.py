"""--overlap-param-gather-with-optimizer-step is refused where Megatron-LM refuses it (megatron-core 0.19.2
megatron/training/arguments.py:1032-1040, since 4e3840535b): without --overlap-param-gather, and with a distributed
checkpoint format (--ckpt-format torch_dist, the default). A review: Megatron-Bridge's DeepSeek-V3 H100 recipe
(overlap_param_gather_with_optimizer_step on) written as Megatron-LM flags was priced, a job that does not start."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main
from tests.megatron_scripts import mixtral_script

INTERLEAVED = ("--moe-token-dispatcher-type alltoall --pipeline-model-parallel-size 2 "
               "--num-virtual-stages-per-pipeline-rank 2 --use-distributed-optimizer --overlap-grad-reduce "
               "--overlap-param-gather --overlap-param-gather-with-optimizer-step")


def _audit(script: Path):
    return CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "mixtral-8x7b", "--cluster",
                                     "dgx-h100", "--gpus", "32"])


@pytest.mark.parametrize("extra,what", [
    ("", "with no --ckpt-format (Megatron-LM's default, torch_dist)"),
    (" --ckpt-format torch_dist", "with --ckpt-format torch_dist"),
])
def test_a_distributed_checkpoint_is_refused(tmp_path: Path, extra: str, what: str) -> None:
    result = _audit(mixtral_script(tmp_path, INTERLEAVED + extra))
    assert result.exit_code == 2, result.output
    assert f"--overlap-param-gather-with-optimizer-step {what}" in result.output
    assert "not supported with distributed checkpointing yet" in result.output
    assert "give --ckpt-format torch" in result.output
    assert "Traceback" not in result.output


def test_the_torch_format_runs(tmp_path: Path) -> None:
    result = _audit(mixtral_script(tmp_path, INTERLEAVED + " --ckpt-format torch"))
    assert result.exit_code in (0, 1), result.output


def test_without_the_weight_gather_overlap_is_refused(tmp_path: Path) -> None:
    extra = INTERLEAVED.replace("--overlap-param-gather ", "") + " --ckpt-format torch"
    result = _audit(mixtral_script(tmp_path, extra))
    assert result.exit_code == 2, result.output
    assert "--overlap-param-gather-with-optimizer-step without --overlap-param-gather" in result.output
