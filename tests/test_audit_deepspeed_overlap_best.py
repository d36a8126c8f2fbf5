"""A ZeRO-1 DeepSpeed JSON without overlap_comm: the dp_not_overlapped finding names the key, and the best plan runs
it too, priced so, with `zero_optimization.overlap_comm true` in its change list (a QA round: Llama 3 8B on 32 H100
at 2 micro-batches was told overlap saves 0.051 s of 1.851 s, and its best plan, the same layout, kept the reduction
exposed at 1.851 s: 'no changes proposed')."""

from __future__ import annotations

import json

from click.testing import CliRunner

from placement.cli import main


def _audit_zero1(tmp_path, batch: int, accumulation: int, model: str, gpus: int, seq_len: int) -> dict:
    """`audit --json` of a ZeRO-1 bf16 DeepSpeed JSON that leaves overlap_comm unstated."""
    config = {"train_batch_size": batch, "train_micro_batch_size_per_gpu": 1,
              "gradient_accumulation_steps": accumulation, "zero_optimization": {"stage": 1},
              "bf16": {"enabled": True}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(config, indent=2))
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), "--model", model,
                                       "--cluster", "dgx-h100", "--gpus", str(gpus), "--seq-len", str(seq_len),
                                       "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_the_best_plan_turns_overlap_comm_on(tmp_path) -> None:
    out = _audit_zero1(tmp_path, 64, 2, "llama3-8b", 32, 8192)
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
    out = _audit_zero1(tmp_path, 512, 8, "llama3-70b", 64, 4096)
    assert out["best"]["layout"]["pp"] > 1
    assert "zero_optimization.overlap_comm" not in {c["argument"] for c in out["changes"] + out["changes_withheld"]}


def _hf(tmp_path, config_name: str, config_text: str, launcher: str) -> dict:
    (tmp_path / "run.sh").write_text(
        f"{launcher} run_clm.py --model_name_or_path meta-llama/Meta-Llama-3-8B --per_device_train_batch_size 1 "
        f"--gradient_accumulation_steps 2 --bf16 --block_size 8192 --do_train --output_dir out\n")
    (tmp_path / config_name).write_text(config_text)
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--model", "llama3-8b", "--gpus", "32", "--cluster",
                                       "dgx-h100", "--launch", str(tmp_path / "run.sh"), "--launch",
                                       str(tmp_path / config_name), "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_a_trainers_json_is_told_to_add_overlap_comm(tmp_path) -> None:
    """A HuggingFace Trainer's ZeRO-1 JSON: its best plan (ZeRO-1/2, overlapped) lists the key, not only the stage
    (placement's spelling of both plans holds overlap_comm, so the comparison alone named nothing)."""
    config = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
              "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 1}}
    out = _hf(tmp_path, "ds.json", json.dumps(config), "deepspeed --num_nodes 4 --num_gpus 8")
    assert out["best"]["recipe"]["dp_overlap"] is True
    changes = {c["argument"]: c for c in out["changes"] + out["changes_withheld"]}
    if out["best"]["layout"]["zero_stage"] in (1, 2):
        assert changes["zero_optimization.overlap_comm"]["to"] == "true"


def test_accelerates_plugin_keeps_its_reduction_exposed(tmp_path) -> None:
    """accelerate's DeepSpeed plugin without a config file builds its own ZeRO section, which has no overlap_comm:
    no key to propose, so its best plan is priced without the overlap."""
    accelerate = ("compute_environment: LOCAL_MACHINE\ndeepspeed_config:\n  deepspeed_multinode_launcher: standard\n"
                  "  offload_optimizer_device: none\n  offload_param_device: none\n  zero_stage: 1\n"
                  "distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_machines: 4\nnum_processes: 32\n")
    out = _hf(tmp_path, "zero1.yaml", accelerate, "accelerate launch --config_file zero1.yaml")
    assert out["layout"]["zero_stage"] == 1 and out["estimate"]["recipe"]["dp_overlap"] is False
    if out["best"]["layout"]["zero_stage"] in (1, 2):
        assert out["best"]["recipe"]["dp_overlap"] is False
