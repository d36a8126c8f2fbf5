"""A Megatron-Bridge config that states both model.pipeline_model_parallel_layout and
model.virtual_pipeline_model_parallel_size gets its virtual size changed with the best plan's pipeline: Megatron-Core
asserts the stated size equals the layout's stages over the pipeline size (transformer_config.py:2275-2287 at
d98e8a64dd).  A QA run: the saved DeepSeek-V3 config (pp 8 x vpp 4, layout Et|(tt|)*30mL) on 1,024 H100s, best plan
pp 4 x vpp 8 with the same layout, was told to change the pipeline size alone, a config that stops at start-up."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.audit.changes import BRIDGE_VPP_WITH_LAYOUT
from placement.cli import main

DSV3 = Path(__file__).parent / "data" / "audit" / "bridge" / "deepseek_v3_pretrain_h100_fp8_sc_v1.yaml"


def test_the_stated_virtual_size_follows_the_best_plans_pipeline() -> None:
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(DSV3), "--model", "deepseek-v3",
                                       "--cluster", "dgx-h100", "--gpus", "1024", "--json"])
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    best, launched = out["best"]["layout"], out["layout"]
    assert (launched["pp"], launched["vpp"]) == (8, 4) and best["vpp"] != launched["vpp"]
    changes = {c["argument"]: c for c in out["changes"]}
    assert "model.pipeline_model_parallel_layout" not in changes  # the same layout, run at another pipeline size
    vpp = changes["model.virtual_pipeline_model_parallel_size"]
    assert vpp["from"] == "4" and vpp["to"] == (str(best["vpp"]) if best["vpp"] > 1 else "null")
    assert vpp["note"] == BRIDGE_VPP_WITH_LAYOUT
    assert changes["model.pipeline_model_parallel_size"]["to"] == str(best["pp"])
