"""torchtitan's Float8 converters stop a job at start on a GPU without FP8 tensor cores (torchtitan 0.3.0
components/quantization/float8.py:85-96): the audit of a launch that runs them (llama3_405b always converts) on such a
GPU names the config and torchtitan's check, not `--precision fp8`, a flag it was not given."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

LINE = ("torchrun --nnodes 64 --nproc-per-node 8 -m torchtitan.train --module llama3 --config llama3_405b "
        "--parallelism.tensor_parallel_degree 8 --training.local_batch_size 1 --training.global_batch_size 64 "
        "--training.seq_len 8192\n")


def _audit(path: Path, cluster: str):
    return CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "llama3-405b", "--cluster", cluster,
                                     "--gpus", "512"])


def test_a_float8_torchtitan_launch_on_a100_is_refused_as_torchtitan_refuses_it(tmp_path: Path) -> None:
    path = tmp_path / "train.sh"
    path.write_text(LINE)
    result = _audit(path, "dgx-a100-80g")
    assert result.exit_code == 2, result.output
    assert "llama3:llama3_405b with Float8 linear layers" in result.output
    assert "Failed to swap to Float8Linear" in result.output and "so this job does not start" in result.output
    assert "--precision" not in result.output
    assert _audit(path, "dgx-h100").exit_code in (0, 1)  # Hopper runs it: priced
