"""A Megatron-LM log given to `placement audit` sets the step its iteration lines measured beside the estimate of the
job as launched (a user auditing a slow job had the log's times ignored): the median of the logged intervals after
the first, with the count, the spread and the gap, leaving out the intervals with skipped or NaN iterations and those
of a batch ramp-up, as `placement calibrate --steps` reads them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.measured import measured_step
from placement.cli import main

ARGUMENTS = (Path(__file__).parent / "data" / "audit" / "megatron" / "train_llama3_8b_h100_fp8.log").read_text()
"""Megatron-LM's printed arguments block of a Llama 3 8B FP8 job on 8 H100 (global batch 128)."""
SETUP = """> building NullTokenizer tokenizer ...
 > padded vocab (size: 128256) with 0 dummy tokens (new size: 128256)
> initializing torch distributed ...
> initialized tensor model parallel with size 1
> initialized pipeline model parallel with size 1
time to initialize megatron (seconds): 21.473
[after megatron is initialized] datetime: 2025-03-02 10:38:02
building GPT model ...
 > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 8030261248
[after model, optimizer, and learning rate scheduler are built] datetime: 2025-03-02 10:38:31
[after dataloaders are built] datetime: 2025-03-02 10:38:40
done with setup ...
(min, max) time across ranks (ms):
    model-and-optimizer-setup ......................: (28214.33, 28512.90)
    train/valid/test-data-iterators-setup ..........: (8892.11, 9310.47)
training ...
[before the start of training step] datetime: 2025-03-02 10:38:40
"""
"""What Megatron-LM prints between the arguments block and the first iteration line (pretrain, setup_model_and_
optimizer, build_train_valid_test_data_iterators)."""
MEMORY = ("[Rank 0] (after 10 iterations) memory (MB) | allocated: 31245.2 | max allocated: 59120.8 | reserved: "
          "63418.0 | max reserved: 63418.0\n")


def iteration(i: int, ms: float, skipped: int = 0, nan: int = 0, batch: int = 128, loss_scale: float = 1.0) -> str:
    """An iteration line as megatron/training/training.py training_log prints it (core_r0.10.0 lines 1014-1063),
    with --log-throughput."""
    return (f" [2025-03-02 10:{39 + i // 10:02d}:07] iteration {i:8d}/{1000:8d} | consumed samples: {i * batch:12d} "
            f"| elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): 401.3 | learning rate: "
            f"1.500000E-05 | global batch size: {batch:5d} | lm loss: 2.310000E+00 | loss scale: {loss_scale:.1f} | "
            f"grad norm: 0.812 | number of skipped iterations: {skipped:3d} | number of nan iterations: {nan:3d} |\n")


TIMES_MS = {10: 11250.4, 20: 9312.5, 30: 9298.1, 40: 9305.7, 50: 9830.2, 60: 9320.9, 70: 9301.3, 80: 9308.8,
            90: 9297.6, 100: 9315.0}
"""--log-interval 10: a slow first interval (start-up), then steady; iteration 50's interval skipped a step."""
MEDIAN_S = (9305.7 + 9308.8) / 2 / 1e3
"""The median of the eight intervals counted: 20-40 and 60-100."""


def write_log(path: Path, scale: float = 1.0) -> Path:
    tail = "".join(iteration(i, ms * scale, skipped=int(i == 50)) + (MEMORY if i == 10 else "")
                   for i, ms in TIMES_MS.items())
    path.write_text(ARGUMENTS + SETUP + tail)
    return path


def line_of(path: Path, text: str) -> int:
    return next(n for n, x in enumerate(path.read_text().splitlines(), 1) if text in x)


def audit(log: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(log), "--model", "llama3-8b",
                                       "--cluster", "dgx-h100", "--gpus", "8", *extra], catch_exceptions=False)
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout


def test_the_logged_step_is_set_beside_the_estimate_in_text_and_json(tmp_path: Path) -> None:
    log = write_log(tmp_path / "slurm-4412.out")
    code, out = audit(log, "--json")
    assert code == 0
    data = json.loads(out)
    measured, estimate = data["measured_step"], data["estimate"]["step_time_s"]
    assert measured["step_time_s"] == pytest.approx(MEDIAN_S, abs=1e-6)
    assert measured["num_intervals"] == 8
    assert measured["iterations"] == [20, 100]
    assert measured["warmup_lines"] == [line_of(log, "iteration       10/")]
    assert measured["skipped_lines"] == [line_of(log, "iteration       50/")]
    assert measured["other_batch_lines"] == []
    assert measured["quartiles_s"] == pytest.approx([9.3005, 9.313125])
    assert measured["range_s"] == pytest.approx([9.2976, 9.3209])
    assert measured["estimate_step_time_s"] == estimate
    assert measured["gap"] == pytest.approx(MEDIAN_S / estimate - 1, abs=1e-6)
    assert measured["far"] is False
    # the existing keys are all still there
    assert {"layout", "estimate", "findings", "best", "speedup", "changes", "changes_note", "no_better_plan",
            "changes_withheld", "calibration"} < set(data)
    code, text = audit(log)
    head = text.split("\n\nterm (s/step)")[0]
    assert re.search(rf"^step {estimate:.3f} s, ", head, re.M)
    assert (f"measured step {MEDIAN_S:.3f} s ({log}), {abs(MEDIAN_S / estimate - 1):.1%} "
            f"{'above' if MEDIAN_S > estimate else 'below'} placement's estimate of {estimate:.3f} s for the job as "
            f"launched") in head
    assert "the median of 8 logged intervals' `elapsed time per iteration` (iterations 20-100" in head
    assert f"the first usable interval (line {line_of(log, 'iteration       10/')}) as warm-up" in head
    assert "1 interval with skipped or NaN iterations" in head
    assert "far from the estimate" not in head


def test_a_step_far_from_the_estimate_is_said_plainly(tmp_path: Path) -> None:
    log = write_log(tmp_path / "train.log", scale=2.0)
    _, out = audit(log, "--json")
    data = json.loads(out)
    measured, estimate = data["measured_step"], data["estimate"]["step_time_s"]
    assert measured["step_time_s"] == pytest.approx(2 * MEDIAN_S, abs=1e-6)
    assert measured["far"] is True
    _, text = audit(log)
    assert (f"far from the estimate: the measured step is {2 * MEDIAN_S / estimate:.2f}x it, beyond the 1.25x "
            f"that placement's estimates of the published runs it validates stay within; the estimate does not "
            f"account for {2 * MEDIAN_S - estimate:.3f} s of the measured step") in text


def test_a_log_without_iteration_lines_changes_nothing(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(ARGUMENTS)
    plain = [audit(log, "--json")[1], audit(log)[1]]
    log.write_text(ARGUMENTS + SETUP)  # started, no interval logged yet
    assert [audit(log, "--json")[1], audit(log)[1]] == plain
    assert "measured_step" not in json.loads(plain[0]) and "measured step" not in plain[1]


def test_ramp_up_loss_scale_skips_and_nan_intervals_are_left_out() -> None:
    """An FP16 run under --rampup-batch-size: the intervals at a smaller global batch are another step, and those
    whose loss scale overflowed (skipped) or went NaN measured no optimizer step."""
    lines = (ARGUMENTS + SETUP + iteration(10, 4100.0, batch=64, loss_scale=65536.0)
             + iteration(20, 6000.0, batch=96, loss_scale=32768.0, skipped=3)
             + iteration(30, 8700.0, loss_scale=32768.0) + iteration(40, 8650.0, loss_scale=32768.0)
             + iteration(50, 8900.0, loss_scale=16384.0, skipped=1, nan=1)
             + iteration(60, 8640.0, loss_scale=16384.0) + iteration(70, 8660.0, loss_scale=16384.0)).splitlines()
    got = measured_step(Path("train.log"), lines, 128, 8.0)
    number = {int(m.group(1)): n for n, x in enumerate(lines, 1) if (m := re.search(r"iteration\s+(\d+)/", x))}
    assert got is not None
    assert got.other_batch_lines == (number[10], number[20])  # the ramp, whatever else they say
    assert got.skipped_lines == (number[50],)
    assert got.warmup_lines == (number[30],)  # the first interval at the job's batch
    assert got.num_intervals == 3 and got.iterations == (40, 70)
    assert got.step_time_s == pytest.approx(8.65)
    assert got.gap == pytest.approx(8.65 / 8.0 - 1)
    assert "2 intervals at another global batch, a batch ramp-up" in got.summary()


def test_a_log_whose_only_interval_is_the_warmup_counts_none() -> None:
    lines = (ARGUMENTS + SETUP + iteration(10, 11250.4)).splitlines()
    got = measured_step(Path("train.log"), lines, 128, 8.895)
    assert got is not None and got.step_time_s is None and got.num_intervals == 0 and got.gap is None
    assert got.summary().startswith("measured step: none counted in train.log (the first usable interval")


@pytest.mark.parametrize("value", [".", "1.2.3", "..", "0.0"])
def test_a_malformed_iteration_time_is_an_error_naming_the_file_line_and_value(tmp_path: Path, value: str) -> None:
    """A QA round: the iteration-time pattern `[0-9.]+` matches a bare "." (or "1.2.3"), and float() raised, which
    `audit` and `calibrate --steps` reported as an internal error; a 0.0 (no iteration takes under the 0.05 ms that
    rounds to it) made the audit divide by zero.  Each is an error naming the log, the line and the value."""
    log = write_log(tmp_path / "slurm-4412.out")
    log.write_text(log.read_text().replace("elapsed time per iteration (ms): 9298.1 |",
                                           f"elapsed time per iteration (ms): {value} |"))
    n = line_of(log, f"elapsed time per iteration (ms): {value} |")
    said = (f"{log}:{n}: `elapsed time per iteration (ms): {value}` is not a positive number of milliseconds "
            f"(Megatron-LM prints it as {{:.1f}}, e.g. 9305.7)")
    result = CliRunner().invoke(main, ["audit", "--launch", str(log), "--model", "llama3-8b", "--cluster",
                                       "dgx-h100", "--gpus", "8"])
    assert result.exit_code == 2 and said in result.stderr, result.output
    assert "internal error" not in result.output
    result = CliRunner().invoke(main, ["calibrate", "--steps", str(log), "--out", str(tmp_path / "profile.yaml")])
    assert result.exit_code == 2 and said in result.stderr, result.output
    assert "internal error" not in result.output
