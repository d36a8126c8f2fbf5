"""An infeasible job under --framework names the framework's limits among the fixes.  A user trial:
qwen3-235b-a22b on 256 H100 with --framework deepspeed (ep 1 as placement prices DeepSpeed) was told "try a
smaller model: no GPU count from 256 to 16,384 holds a layout of it", though without the flag it fits."""

from __future__ import annotations

from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "qwen3-235b-a22b", "--cluster", "dgx-h100", "--gpus", "256", "--seq-len", "4096",
       "--global-batch", "1024"]


def test_the_framework_is_named_as_the_binding_limit() -> None:
    res = CliRunner().invoke(main, ["plan", *JOB, "--framework", "deepspeed", "--top-k", "1"])
    assert res.exit_code == 1, res.output
    assert "try dropping --framework deepspeed (DeepSpeed 0.19.8 as placement prices it runs" in res.output
    assert "(placement plans ep 1)" in res.output
    assert "a smaller model" not in res.output
    assert CliRunner().invoke(main, ["plan", *JOB, "--top-k", "1"]).exit_code == 0  # and without it, it fits


def _evaluate(seq: int, tp: int, cp: int) -> object:
    return CliRunner().invoke(main, ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "512",
                                     "--seq-len", str(seq), "--global-batch", "512", "--tp", str(tp), "--cp", str(cp),
                                     "--framework", "megatron"])


def test_megatron_needs_the_sequence_to_split_over_cp_and_then_tp(tmp_path) -> None:
    """Megatron-Core splits the sequence into 2cp chunks and, under sequence parallelism, scatters a CP rank's share
    over TP, asserting 'First dimension of the tensor should be divisible by tensor parallel size' (tensor_parallel/
    mappings.py): the sequence divides by lcm(2cp, cp x tp).  A user trial: seq 8190 at tp 8 was priced, and
    written, under --framework megatron."""
    refused = _evaluate(8190, 8, 1)
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert "sequence 8190 with tp 8 (sequence parallel)" in refused.output and "try --seq-len 8184" in refused.output
    assert _evaluate(8192, 8, 1).exit_code == 0
    # 8200 divides by 2cp = 4 but not by cp x tp = 16; 8208 = 16 x 513 divides by both (lcm 16, not tp x 2cp = 32)
    assert _evaluate(8200, 8, 2).exit_code == 2
    assert _evaluate(8208, 8, 2).exit_code == 0
    out = CliRunner().invoke(main, ["plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64",
                                    "--seq-len", "8190", "--global-batch", "64", "--emit", "megatron", "--out",
                                    str(tmp_path)])
    script = (tmp_path / "megatron.sh").read_text()
    # the plan itself keeps sequence parallelism to the TP degrees that split 8190 (a user trial: it planned tp 4
    # with SP at 8191, a layout no framework starts), so its file starts
    tp = int(script.split("--tensor-model-parallel-size ")[1].split()[0])
    assert "--sequence-parallel" not in script or 8190 % tp == 0
    assert out.exit_code == 0 and "# this file does not start:" not in script
