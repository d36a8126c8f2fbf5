"""Megatron-Core refuses per-layer CUDA graphs beside full recompute, and beside `moe` recompute where the graphs
capture the MoE router (core_v0.19.0 megatron/core/transformer/transformer_config.py:2521-2535).  A user trial:
`evaluate --recompute full --cuda-graphs partial --emit megatron` priced and wrote a file that does not start, and the
audit priced it back without a finding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main
from tests.megatron_scripts import mixtral_script

CHECK = "full recompute is only supported with full iteration CUDA graph"
MIXTRAL = ("--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "4096",
           "--global-batch", "256")


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_evaluate_refuses_partial_graphs_with_full_recompute() -> None:
    result = _run("evaluate", *MIXTRAL, "--tp", "1", "--ep", "8", "--pp", "1", "--mbs", "1", "--recompute", "full",
                  "--cuda-graphs", "partial")
    assert result.exit_code == 2 and CHECK in result.output and "--cuda-graphs full" in result.output
    ok = _run("evaluate", *MIXTRAL, "--tp", "1", "--ep", "8", "--pp", "1", "--mbs", "1", "--recompute", "full",
              "--cuda-graphs", "none")
    assert ok.exit_code in (0, 1), ok.output


@pytest.mark.parametrize(("model", "refused"), [("mixtral-8x7b", True), ("llama3-8b", False)])
def test_moe_recompute_is_refused_beside_graphs_of_the_router(model: str, refused: bool) -> None:
    result = _run("evaluate", "--model", model, "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "4096",
                  "--global-batch", "256", "--tp", "1", "--pp", "1", "--mbs", "1", "--recompute", "selective",
                  "--recompute-modules", "moe", "--cuda-graphs", "partial")
    assert (result.exit_code == 2) is refused, result.output
    assert ("moe recompute is not supported with moe_router CUDA graph" in result.output) is refused


def test_the_audit_refuses_a_launch_that_asks_for_both(tmp_path: Path) -> None:
    script = mixtral_script(tmp_path, "--recompute-granularity full --recompute-method uniform "
                                      "--recompute-num-layers 1 --cuda-graph-impl transformer_engine")
    result = _run("audit", "--launch", str(script), "--model", "mixtral-8x7b", "--cluster", "dgx-h100",
                  "--gpus", "64")
    assert result.exit_code == 2 and CHECK in result.output and "--cuda-graph-impl transformer_engine" in result.output


def test_plan_pairs_full_recompute_with_no_per_layer_graphs() -> None:
    result = _run("plan", *MIXTRAL, "--recompute", "full", "--top-k", "5", "--json")
    assert result.exit_code == 0, result.output
    plans = json.loads(result.stdout)["plans"]
    assert plans and all(p["recipe"]["cuda_graphs"] != "partial" for p in plans)
    # selective recompute still takes them where they fit: the rule is the pair, not the graphs
    sel = json.loads(_run("plan", *MIXTRAL, "--recompute", "selective", "--top-k", "5", "--json").stdout)["plans"]
    assert any(p["recipe"]["cuda_graphs"] == "partial" for p in sel)


def test_a_recipe_no_fitting_layout_runs_is_infeasible_naming_the_check() -> None:
    result = _run("plan", *MIXTRAL, "--recompute", "full", "--cuda-graphs", "partial")
    assert result.exit_code == 1 and "infeasible (recipe)" in result.output and CHECK in result.output
    result = _run("plan", *MIXTRAL, "--recompute", "full", "--ep-comm-overlap")
    assert result.exit_code == 1 and "infeasible (recipe)" in result.output and "full recompute" in result.output

