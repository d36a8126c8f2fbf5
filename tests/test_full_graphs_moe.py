"""Full-iteration CUDA graphs on an MoE model need static shapes (Megatron-Core core_v0.19.0 MoE README, "CUDA
Graph": without --moe-expert-capacity-factor and --moe-pad-expert-input-to-capacity the MoE layers are
uncapturable).  A user trial: a dropless Qwen3-30B with --cuda-graphs full was priced and its megatron.sh set
--cuda-graph-impl full_iteration with neither, nor HybridEP's expert-rank budget that MLPerf v6.0's DeepSeek-V3 ran."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "qwen3-30b-a3b", "--cluster", "gb200-nvl72", "--gpus", "8", "--seq-len", "4096",
       "--global-batch", "256"]
LAYOUT = ["--tp", "1", "--ep", "8", "--pp", "1", "--mbs", "1", "--zero", "1", "--recompute", "none"]


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_dropless_full_graphs_beside_another_dispatcher_are_refused_and_never_searched() -> None:
    res = _run("evaluate", *JOB, *LAYOUT, "--cuda-graphs", "full", "--moe-dispatcher", "alltoall")
    assert res.exit_code == 2
    assert "dropless MoE model with the alltoall dispatcher" in res.output and "--moe-capacity-factor" in res.output
    # pinned full graphs: the search runs them only behind HybridEP
    plan = json.loads(_run("plan", *JOB, "--cuda-graphs", "full", "--top-k", "3", "--json").stdout)["plans"]
    assert plan and all(p["recipe"]["moe_dispatcher"] == "hybridep" for p in plan)
    # unpinned, an MoE plan never takes them
    free = json.loads(_run("plan", *JOB, "--top-k", "5", "--json").stdout)["plans"]
    assert free and all(p["recipe"]["cuda_graphs"] != "full" for p in free)


def test_the_megatron_file_of_dropless_full_graphs_carries_the_expert_rank_budget(tmp_path: Path) -> None:
    res = _run("evaluate", *JOB, *LAYOUT, "--cuda-graphs", "full", "--moe-dispatcher", "hybridep", "--emit",
               "megatron", "--out", str(tmp_path))
    assert res.exit_code in (0, 1), res.output
    text = (tmp_path / "megatron.sh").read_text()
    assert "--cuda-graph-impl full_iteration" in text
    assert "--moe-expert-rank-capacity-factor 4 --moe-paged-stash --use-transformer-engine-op-fuser" in text
    assert "--moe-pad-expert-input-to-capacity" not in text
    assert "--moe-expert-rank-capacity-factor 4 is placement's choice" in text  # its source, in the file's warnings


def test_a_capacity_factor_under_full_graphs_is_padded_and_priced_padded(tmp_path: Path) -> None:
    """With every expert padded to the capacity, the busiest rank computes the capacity, not the routed load."""
    common = [*JOB, *LAYOUT, "--moe-dispatcher", "alltoall", "--routing-imbalance", "1.0",
              "--moe-capacity-factor", "1.5", "--json"]
    full = json.loads(_run("evaluate", *common, "--cuda-graphs", "full").stdout)
    none = json.loads(_run("evaluate", *common, "--cuda-graphs", "none").stdout)
    assert full["breakdown"]["compute"] > none["breakdown"]["compute"] * 1.05
    res = _run("evaluate", *JOB, *LAYOUT, "--moe-dispatcher", "alltoall", "--moe-capacity-factor", "1.5",
               "--cuda-graphs", "full", "--emit", "megatron", "--out", str(tmp_path))
    assert res.exit_code in (0, 1), res.output
    text = (tmp_path / "megatron.sh").read_text()
    assert "--moe-expert-capacity-factor 1.5" in text and "--moe-pad-expert-input-to-capacity" in text
