"""Force-balanced MoE routing (Megatron-Core --moe-router-force-load-balancing, Bridge's
moe_router_force_load_balancing) is priced as the job runs it: routing imbalance 1.0."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main
from tests.megatron_scripts import mixtral_script


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_forced_balanced_routing_is_priced_balanced(tmp_path: Path) -> None:
    """--moe-router-force-load-balancing (the ModelZoo and Bridge benchmark scripts) runs every expert rank at the
    mean load; a user trial found it read, then priced at real-data imbalance (8 % slower on Qwen3-235B)."""

    def audit(extra: str) -> dict:
        script = mixtral_script(tmp_path, "--moe-token-dispatcher-type alltoall" + extra)
        result = _run("--reproducible", "audit", "--launch", str(script), "--model", "mixtral-8x7b", "--cluster",
                      "dgx-h100", "--gpus", "64", "--json")
        assert result.exit_code in (0, 1), result.output
        return json.loads(result.stdout)["estimate"]

    forced, real = audit(" --moe-router-force-load-balancing"), audit("")
    assert forced["recipe"]["routing_imbalance"] == 1.0 and real["recipe"]["routing_imbalance"] is None
    assert "--moe-router-force-load-balancing" in forced["recipe_sources"]["routing_imbalance"]
    assert forced["step_time_s"] < real["step_time_s"]
