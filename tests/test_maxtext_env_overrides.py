"""MaxText lays each M_<KEY> environment variable of its train command over the merged config (pyconfig.py:519-553,
AI-Hypercomputer/maxtext e591f30cb), parsed as the type of the value it replaces, and refuses one that the command
line sets too or that does not parse.  A QA run: `export M_PER_DEVICE_BATCH_SIZE=4` and `export M_REMAT_POLICY=none`
before a train command were priced at base.yml's per_device_batch_size 12 (global batch 96, 5.747 s/step on 8 H100)
where the job trains at 4 (global batch 32)."""

from __future__ import annotations

from pathlib import Path

from tests.test_maxtext_omegaconf_values import audited, maxtext_audit

TRAIN = ("python3 -m maxtext.trainers.pre_train.train configs/base.yml model_name=llama3-8b hardware=gpu "
         "ici_fsdp_parallelism=8 max_target_length=4096")


def _audit(tmp_path: Path, script: str):
    return maxtext_audit(tmp_path, "train.sh", f"#!/bin/bash\n{script}\n")


def _layout(tmp_path: Path, script: str) -> dict:
    return audited(_audit(tmp_path, script))["layout"]


def test_an_exported_override_is_the_value_the_job_runs(tmp_path: Path) -> None:
    base = _layout(tmp_path, TRAIN)
    env = _layout(tmp_path, f"export M_PER_DEVICE_BATCH_SIZE=4\nexport M_SCAN_LAYERS=0\nexport M_REMAT_POLICY=none\n"
                            f"{TRAIN}")
    assert base["micro_batch_size"] == 12 and base["recompute"] == "full"
    assert env["micro_batch_size"] == 4 and env["recompute"] == "none"
    assert "M_PER_DEVICE_BATCH_SIZE=4" in env["sources"]["micro_batch_size"]
    assert "M_REMAT_POLICY=none" in env["sources"]["recompute"]
    inline = _layout(tmp_path, f"M_PER_DEVICE_BATCH_SIZE=2 {TRAIN}")
    assert inline["micro_batch_size"] == 2


def test_an_override_the_command_line_sets_too_does_not_start(tmp_path: Path) -> None:
    got = _audit(tmp_path, f"export M_PER_DEVICE_BATCH_SIZE=4\n{TRAIN} per_device_batch_size=2")
    assert got.exit_code == 2 and "Traceback" not in got.output
    assert "both set per_device_batch_size" in got.output and "this job does not start" in got.output


def test_an_override_that_does_not_parse_does_not_start(tmp_path: Path) -> None:
    got = _audit(tmp_path, f"export M_SCAN_LAYERS=maybe\n{TRAIN}")
    assert got.exit_code == 2 and "Couldn't parse value from ENV 'maybe' for key 'scan_layers'" in got.output
    # str2bool's words, not pydantic's: `off` is not one (inference/inference_utils.py str2bool)
    got = _audit(tmp_path, f"export M_SPARSE_MATMUL=off\n{TRAIN}")
    assert got.exit_code == 2 and "Couldn't parse value from ENV 'off' for key 'sparse_matmul'" in got.output


def test_an_override_left_to_the_environment_is_said(tmp_path: Path) -> None:
    env = _layout(tmp_path, f"export M_PER_DEVICE_BATCH_SIZE=$PDBS\n{TRAIN}")
    assert env["micro_batch_size"] == 12
    assert "M_PER_DEVICE_BATCH_SIZE=${PDBS}" in env["sources"]["micro_batch_size"]
    assert "job's environment" in env["sources"]["micro_batch_size"]
