"""Megatron-FSDP (v1, megatron-core's default megatron_fsdp_version) runs the distributed optimizer whatever a
Megatron-Bridge config says: Bridge sets ddp. and optimizer.use_distributed_optimizer true itself
(training/config.py:1082-1085).  A QA run: a saved Llama 3 8B config with both fields true, whose best plan enters
Megatron-FSDP, was told to set them false beside `use_megatron_fsdp true`, a change Bridge undoes at start-up."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.audit.changes import bridge_changes
from placement.cli import main

SAVED = """model:
  _target_: megatron.bridge.models.llama.Llama3ModelProvider8B
  tensor_model_parallel_size: 1
  context_parallel_size: 1
  pipeline_model_parallel_size: 1
  sequence_parallel: false
  seq_length: 8192
train:
  _target_: megatron.bridge.training.config.TrainingConfig
  global_batch_size: 8
  micro_batch_size: 1
ddp:
  use_distributed_optimizer: {ddp}
optimizer:
  use_distributed_optimizer: {opt}
"""


def _changes(tmp_path: Path, ddp: str, opt: str) -> dict[str, dict]:
    path = tmp_path / "run_config.yaml"
    path.write_text(SAVED.format(ddp=ddp, opt=opt))
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--model", "llama3-8b", "--gpus", "8",
                                       "--framework", "megatron", "--json", "--launch", str(path)])
    assert result.exit_code in (0, 1), result.output
    changes = {c["argument"]: c for c in json.loads(result.stdout)["changes"]}
    # the best plan this job gets: Megatron-FSDP (ZeRO-2 fits where ZeRO-1's full gradients do not)
    assert changes["ddp.use_megatron_fsdp"]["to"] == "true" and changes["dist.use_megatron_fsdp"]["to"] == "true"
    return changes


def test_entering_megatron_fsdp_keeps_the_distributed_optimizer_the_config_states(tmp_path: Path) -> None:
    changes = _changes(tmp_path, "true", "true")
    assert not [k for k in changes if k.endswith("use_distributed_optimizer")], changes


def test_entering_megatron_fsdp_states_the_distributed_optimizer_bridge_turns_on(tmp_path: Path) -> None:
    changes = _changes(tmp_path, "false", "false")
    for key in ("ddp.use_distributed_optimizer", "optimizer.use_distributed_optimizer"):
        assert changes[key]["from"] == "false" and changes[key]["to"] == "true", changes[key]
        assert "training/config.py:1082-1085" in changes[key]["note"]


def test_leaving_megatron_fsdp_for_ddp_turns_the_saved_distributed_optimizer_off() -> None:
    """A saved config of a Megatron-FSDP run states use_distributed_optimizer true (Bridge turned it on); the
    best plan's Megatron-LM files at ZeRO-0 pass neither --use-megatron-fsdp nor --use-distributed-optimizer, so
    there is no flag change for the latter, yet the config's true would keep the optimizer sharded."""
    stated = {"ddp.use_megatron_fsdp": "true", "dist.use_megatron_fsdp": "true",
              "ddp.use_distributed_optimizer": "true", "optimizer.use_distributed_optimizer": "true"}
    out = {c["argument"]: c for c in bridge_changes([{"argument": "--use-megatron-fsdp", "from": "true", "to": None}],
                                                    stated)}
    assert out["ddp.use_megatron_fsdp"]["to"] == "false"
    assert out["ddp.use_distributed_optimizer"]["to"] == "false"
    assert out["optimizer.use_distributed_optimizer"]["to"] == "false"
    # Megatron-FSDP v2 turns both off itself (:1190-1192): nothing added
    v2 = bridge_changes([{"argument": "--use-megatron-fsdp", "from": None, "to": "true"}],
                        {"ddp.megatron_fsdp_version": "2", "ddp.use_distributed_optimizer": "false"})
    assert not [c for c in v2 if c["argument"].endswith("use_distributed_optimizer")]
