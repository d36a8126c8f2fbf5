"""Megatron-Core's MoE permute and router fusions are two switches (--moe-permute-fusion, --moe-router-fusion; both
TransformerConfig fields default False in megatron-core 0.19.2), priced as one field read from the permute's. A job
that passes one alone (the Megatron-LM DeepSeek-V3 Megatron-FSDP example passes --moe-permute-fusion alone; Bridge's
DeepSeek-V3 recipe sets moe_router_fusion False) is said so, and a best plan priced with both adds the missing one."""

from __future__ import annotations

from pathlib import Path

from tests.megatron_scripts import BRIDGE_DSV3, mixtral_script
from tests.megatron_scripts import audit_json as _audit


def test_permute_fusion_alone_adds_the_router_fusion(tmp_path: Path) -> None:
    out = _audit(mixtral_script(tmp_path, "--moe-token-dispatcher-type alltoall --moe-permute-fusion"),
                 "mixtral-8x7b", "32")
    assert out["best"]["recipe"]["moe_fusions"] is True
    added = [c for c in out["changes"] if c["argument"] == "--moe-router-fusion"]
    assert len(added) == 1 and added[0]["from"] is None and added[0]["to"] == "true"
    assert not [c for c in out["changes"] if c["argument"] == "--moe-permute-fusion"]
    assert any("--moe-permute-fusion without --moe-router-fusion" in line
               for line in out["layout"]["ignored"]), out["layout"]["ignored"]


def test_both_fusions_change_nothing(tmp_path: Path) -> None:
    out = _audit(mixtral_script(tmp_path, "--moe-token-dispatcher-type alltoall --moe-permute-fusion "
                                          "--moe-router-fusion"), "mixtral-8x7b", "32")
    assert not [c for c in out["changes"] if "fusion" in c["argument"]]
    assert not any("without --moe-router-fusion" in line for line in out["layout"]["ignored"])


def test_bridge_config_turns_the_router_fusion_on(tmp_path: Path) -> None:
    text = BRIDGE_DSV3.read_text()
    assert "  moe_router_fusion: true\n" in text
    config = tmp_path / "run_config.yaml"
    config.write_text(text.replace("  moe_router_fusion: true\n", "  moe_router_fusion: false\n"))
    out = _audit(config, "deepseek-v3", "1024")
    assert out["best"]["recipe"]["moe_fusions"] is True
    on = [c for c in out["changes"] if c["argument"] == "model.moe_router_fusion"]
    assert len(on) == 1 and on[0]["from"] == "false" and on[0]["to"] == "true"
