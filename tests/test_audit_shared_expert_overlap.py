"""--moe-shared-expert-overlap (Bridge's model.moe_shared_expert_overlap) beside the EP all-to-all overlap:
Megatron-Core refuses the pair (megatron-core 0.19.2 transformer/transformer_config.py:2706-2708; Megatron-Bridge
training/comm_overlap.py:513-515), so a best plan that adds --overlap-moe-expert-parallel-comm takes the launch's
shared-expert overlap out (a review: DeepSeek-V3's recipe sets it, and the change list kept it)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from placement.cli import main
from tests.megatron_scripts import BRIDGE_DSV3, mixtral_script
from tests.megatron_scripts import audit_json as _audit


def test_megatron_change_list_drops_the_shared_expert_overlap(tmp_path: Path) -> None:
    script = mixtral_script(tmp_path, "--moe-token-dispatcher-type alltoall --moe-shared-expert-overlap")
    out = _audit(script, "mixtral-8x7b", "32")
    assert out["best"]["recipe"]["ep_comm_overlap"] is True
    assert any(c["argument"] == "--overlap-moe-expert-parallel-comm" and c["to"] == "true" for c in out["changes"])
    dropped = [c for c in out["changes"] if c["argument"] == "--moe-shared-expert-overlap"]
    assert len(dropped) == 1 and dropped[0]["from"] == "true" and dropped[0]["to"] is None
    assert "transformer_config.py" in dropped[0]["note"]


def test_bridge_change_list_turns_the_shared_expert_overlap_off(tmp_path: Path) -> None:
    text = BRIDGE_DSV3.read_text()
    assert "  moe_shared_expert_overlap: false\n" in text and "  moe_token_dispatcher_type: flex\n" in text
    config = tmp_path / "run_config.yaml"
    config.write_text(text.replace("  moe_shared_expert_overlap: false\n", "  moe_shared_expert_overlap: true\n")
                      .replace("  moe_token_dispatcher_type: flex\n", "  moe_token_dispatcher_type: alltoall\n"))
    out = _audit(config, "deepseek-v3", "1024")
    assert out["best"]["recipe"]["ep_comm_overlap"] is True
    off = [c for c in out["changes"] if c["argument"] == "model.moe_shared_expert_overlap"]
    assert len(off) == 1 and off[0]["from"] == "true" and off[0]["to"] == "false"


def test_bridge_config_with_both_overlaps_is_refused(tmp_path: Path) -> None:
    """A saved config that sets both is a job that does not start (exit 2, naming both fields), as the Megatron-LM
    flags' reader refuses --moe-shared-expert-overlap with --overlap-moe-expert-parallel-comm; it was priced."""
    text = BRIDGE_DSV3.read_text()
    assert text.count("  overlap_moe_expert_parallel_comm: false\n") == 2
    config = tmp_path / "run_config.yaml"
    config.write_text(text.replace("  moe_shared_expert_overlap: false\n", "  moe_shared_expert_overlap: true\n")
                      .replace("  overlap_moe_expert_parallel_comm: false\n",
                               "  overlap_moe_expert_parallel_comm: true\n"))
    result = CliRunner().invoke(main, ["audit", "--launch", str(config), "--model", "deepseek-v3", "--cluster",
                                       "dgx-h100", "--gpus", "1024"])
    assert result.exit_code == 2, result.output
    assert "moe_shared_expert_overlap true with overlap_moe_expert_parallel_comm true" in result.output
    assert "comm_overlap.py:513-515" in result.output and "Traceback" not in result.output
