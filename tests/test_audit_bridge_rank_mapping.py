"""Megatron-Bridge's rank mapping switch, dist.use_tp_pp_dp_mapping: the change that turns it off is named in the
config's own field, and beside Megatron-FSDP, which Megatron-Bridge refuses it with (training/config.py:1124), the
job does not start.  A QA run: a saved Llama 3 8B config with the switch on was told `- --use-tp-pp-dp-mapping`, and
the same config with Megatron-FSDP was priced."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

SAVED = """model:
  _target_: megatron.bridge.models.llama.Llama3ModelProvider8B
  tensor_model_parallel_size: 2
  pipeline_model_parallel_size: 2
  context_parallel_size: 1
  sequence_parallel: true
  seq_length: 8192
train:
  _target_: megatron.bridge.training.config.TrainingConfig
  global_batch_size: 64
  micro_batch_size: 1
ddp:
  use_distributed_optimizer: true
  use_megatron_fsdp: {fsdp}
dist:
  use_tp_pp_dp_mapping: true
  use_megatron_fsdp: {fsdp}
"""


def _audit(tmp_path: Path, fsdp: str):
    path = tmp_path / "run_config.yaml"
    path.write_text(SAVED.format(fsdp=fsdp))
    return CliRunner().invoke(main, ["--reproducible", "audit", "--model", "llama3-8b", "--gpus", "16", "--json",
                                     "--launch", str(path)])


def test_the_mapping_change_names_the_bridge_field(tmp_path: Path) -> None:
    result = _audit(tmp_path, "false")
    assert result.exit_code in (0, 1), result.output
    changes = {c["argument"]: c for c in json.loads(result.stdout)["changes"]}
    assert "--use-tp-pp-dp-mapping" not in changes
    assert changes["dist.use_tp_pp_dp_mapping"]["from"] == "true"
    assert changes["dist.use_tp_pp_dp_mapping"]["to"] == "false"


def test_the_mapping_beside_megatron_fsdp_does_not_start(tmp_path: Path) -> None:
    result = _audit(tmp_path, "true")
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "dist.use_tp_pp_dp_mapping true with ddp.use_megatron_fsdp true" in result.output
    assert "training/config.py:1124" in result.output and "this job does not start" in result.output
    assert "set dist.use_tp_pp_dp_mapping: false" in result.output
