"""A ZeRO-1 DeepSpeed JSON without overlap_comm: the dp_not_overlapped finding names the key, and the best plan runs
it too, priced so, with `zero_optimization.overlap_comm true` in its change list (a QA round: Llama 3 8B on 32 H100
at 2 micro-batches was told overlap saves 0.051 s of 1.851 s, and its best plan, the same layout, kept the reduction
exposed at 1.851 s: 'no changes proposed')."""

from __future__ import annotations

import json

from click.testing import CliRunner

from placement.cli import main


def test_the_best_plan_turns_overlap_comm_on(tmp_path) -> None:
    config = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2,
              "zero_optimization": {"stage": 1}, "bf16": {"enabled": True},
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(config, indent=2))
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), "--model", "llama3-8b",
                                       "--cluster", "dgx-h100", "--gpus", "32", "--seq-len", "8192", "--json"])
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    (finding,) = [f for f in out["findings"] if f["kind"] == "dp_not_overlapped"]
    launched, best = out["estimate"]["step_time_s"], out["best"]["step_time_s"]
    assert best <= launched - finding["cost_s"] + 1e-4  # at least the saving the finding names (JSON rounding)
    assert out["best"]["recipe"]["dp_overlap"] is True
    if out["best"]["layout"]["zero_stage"] in (1, 2):
        changes = {c["argument"]: c for c in out["changes"]}
        assert changes["zero_optimization.overlap_comm"]["to"] == "true"


def test_a_pipelined_best_plan_adds_no_overlap_comm(tmp_path) -> None:
    """DeepSpeed's PipelineEngine reduces after the flush whatever overlap_comm says: Llama 3 70B's ZeRO-1 JSON on 64
    H100, whose best plan is pp 4, is not told to add a key it would not use."""
    config = {"train_batch_size": 512, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8,
              "zero_optimization": {"stage": 1}, "bf16": {"enabled": True},
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(config, indent=2))
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), "--model", "llama3-70b",
                                       "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "4096", "--json"])
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    assert out["best"]["layout"]["pp"] > 1
    assert "zero_optimization.overlap_comm" not in {c["argument"] for c in out["changes"] + out["changes_withheld"]}
