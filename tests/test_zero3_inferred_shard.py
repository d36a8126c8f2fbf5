"""A measured ZeRO-3 run that states no shard group is priced sharded over its whole data-parallel group (steps._run
pins dp_shard = num_gpus / (tp x cp x pp)); a degree it leaves out (cp here) is searched, and the search must keep the
pinned shard group only where it divides the row's dp.  A user check: a torchtitan entry (8 H100, `layout: {tp: 1,
pp: 1, zero_stage: 3}`, its step from a torchtitan log's tps) crashed `placement validate --runs` with an internal
error (ValueError: cannot reshape array of size 8 into shape (7,2)): cp 2 x dp_shard 8 = 16 ranks of 8 GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.calibration.compare import compare_runs

TITAN = "\n".join(
    f"[rank0]:[titan] 2025-03-01 10:00:0{i},000 - root - INFO - step: {step:2d}  loss:  8.1234"
    f"  memory: 60.12GiB(75.92%)"
    f"  tps: {tps}  tflops: 363.01  mfu: 36.70%" for i, (step, tps) in enumerate(
        [(1, "1,020"), (10, "7,812"), (20, "7,812"), (30, "7,812"), (40, "7,812")])) + "\n"


def test_a_zero3_entry_with_cp_left_out_prices(tmp_path: Path) -> None:
    (tmp_path / "titan.log").write_text(TITAN)
    steps = tmp_path / "titan.yaml"
    steps.write_text("- model: llama3-8b\n  num_gpus: 8\n  seq_len: 8192\n  global_batch: 8\n  precision: bf16\n"
                     "  layout: {tp: 1, pp: 1, zero_stage: 3}\n  log: titan.log\n")
    (row,) = compare_runs(None, [steps], "dgx-h100")
    assert row.measured_s == pytest.approx(8 * 8192 / (7812 * 8))  # global batch x seq / (tps x GPUs), step 1 left out
    assert row.default_s is not None
    lay = row.priced.layout
    dp, shard = lay["dp"], lay.get("dp_shard") or lay["dp"]
    assert lay["zero_stage"] == 3 and dp % shard == 0  # a legal layout: the shard group divides dp
    assert lay.get("cp", 1) * dp * lay.get("tp", 1) * lay.get("pp", 1) == 8
