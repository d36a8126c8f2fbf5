"""A DeepSpeed JSON's change list speaks of the keys the file states: a key it does not state that the best plan
leaves out is nothing to remove, and one the best plan changes is marked as placement's spelling of the launched
layout (a QA run: DeepSpeedExamples' `training/bf16_master_weight/configs/bf16_full.json`, ZeRO-3 with no
stage3_prefetch_bucket_size, audited for Llama 3 8B on 8 H100s, was told `- zero_optimization.
stage3_prefetch_bucket_size 50000000`, a line it does not have, when its best plan moved to ZeRO-2)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.audit.changes import NOT_IN_FILES
from placement.cli import main

BF16_FULL = Path(__file__).parent / "data" / "audit" / "deepspeed" / "bf16_full.json"


def test_a_key_the_json_does_not_state_is_not_removed() -> None:
    data = json.loads(BF16_FULL.read_text())
    assert data["zero_optimization"]["stage"] == 3 and "stage3_prefetch_bucket_size" not in data["zero_optimization"]
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(BF16_FULL), "--model", "llama3-8b",
                                       "--cluster", "dgx-h100", "--gpus", "8", "--json"])
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    changes = {c["argument"]: c for c in out["changes"]}
    assert changes["zero_optimization.stage"]["from"] == "3" and out["best"]["layout"]["zero_stage"] != 3
    for c in out["changes"]:
        key = c["argument"].split(".")
        node = data
        for part in key[:-1]:
            node = node.get(part, {})
        # every line the list removes or changes is one the file has, or says it is not
        if c["from"] is not None:
            assert key[-1] in node or c.get("note") == NOT_IN_FILES, c
    assert "zero_optimization.stage3_prefetch_bucket_size" not in changes


def _changes(path: Path, gpus: str = "64") -> tuple[dict, dict[str, dict]]:
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), "--model", "llama3-8b",
                                       "--cluster", "dgx-h100", "--gpus", gpus, "--json"])
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    return out, {c["argument"]: c for c in out["changes"] + out["changes_withheld"]}


def _json(tmp_path: Path, stage: int, **zero) -> Path:
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
                                "bf16": {"enabled": True}, "zero_optimization": {"stage": stage, **zero}}))
    return path


def test_a_move_off_zero3_states_the_overlap_deepspeed_turns_off_below_it(tmp_path: Path) -> None:
    """DeepSpeed's overlap_comm is on by default at stage 3 alone (0.19.8 runtime/zero/config.py:384-386): a ZeRO-3
    JSON that leaves it out runs the overlapped reduction, and a best plan at ZeRO-1 priced with it must say
    `overlap_comm true`, or the JSON with the changes applied reduces after the last backward."""
    out, changes = _changes(_json(tmp_path, 3))
    assert out["estimate"]["recipe"]["dp_overlap"] is True
    assert out["best"]["layout"]["zero_stage"] in (1, 2) and out["best"]["recipe"]["dp_overlap"] is True
    assert changes["zero_optimization.overlap_comm"]["from"] is None
    assert changes["zero_optimization.overlap_comm"]["to"] == "true"
    assert "default at ZeRO-" in changes["zero_optimization.overlap_comm"]["note"]
    # the reduce bucket the best plan is priced with, where DeepSpeed's default (5e8) is another
    bucket = out["best"]["recipe"]["ddp_bucket_params"]
    assert bucket != 500_000_000 and changes["zero_optimization.reduce_bucket_size"]["to"] == str(bucket)
    assert "zero_optimization.reduce_scatter" not in changes  # DeepSpeed's default, true


def test_a_zero2_json_without_overlap_is_told_to_turn_it_on_as_priced(tmp_path: Path) -> None:
    """The job runs the reduction exposed; the best plan runs overlap_comm, as the dp_not_overlapped finding names
    it and placement's DeepSpeed files write it, and its change list (or withheld list) says so where its stage
    leaves the key off by default (it kept the job's exposed reduction before, with the finding pricing the gain)."""
    out, changes = _changes(_json(tmp_path, 2))
    assert out["estimate"]["recipe"]["dp_overlap"] is False and out["best"]["recipe"]["dp_overlap"] is True
    if out["best"]["layout"]["zero_stage"] in (1, 2):
        assert changes["zero_optimization.overlap_comm"]["to"] == "true"
    else:
        assert "zero_optimization.overlap_comm" not in changes  # on by default at stage 3
