"""A Megatron-LM log excerpt of iteration lines, without the arguments block the audit reads a log's layout from, is
refused as that, naming its line (a trial: beside the job's sbatch it was refused as a shell script bash cannot
parse, at a `|` of the iteration line)."""

from __future__ import annotations

from click.testing import CliRunner

from placement.cli import main

ITERATIONS = (
    " [2025-03-02 10:41:07] iteration      100/  500000 | consumed samples:       102400 | elapsed time per iteration "
    "(ms): 4301.2 | learning rate: 1.500000E-04 | global batch size:  1024 | lm loss: 2.310000E+00 | loss scale: 1.0 "
    "| grad norm: 0.812 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")


def test_an_excerpt_of_iteration_lines_is_refused_as_a_log_without_its_arguments(tmp_path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
                      "--num-attention-heads 32 --seq-length 4096 --micro-batch-size 1 --global-batch-size 64 "
                      "--bf16\n")
    log = tmp_path / "slurm-4412.out"
    log.write_text("NCCL version 2.21.5+cuda12.4\n" + ITERATIONS)
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--launch", str(log), "--model",
                                       "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8"])
    assert result.exit_code == 2, result.output
    assert "slurm-4412.out:2: a Megatron-LM log's iteration lines" in result.output
    assert "without the arguments block" in result.output
    assert "bash cannot parse" not in result.output
