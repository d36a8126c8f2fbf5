"""Megatron-FSDP (ZeRO-2/3) runs the EP all-to-all overlap only without a pipeline and without per-layer CUDA graphs:
megatron-core 0.19.2's combined 1F1B schedule refuses it interleaved (pipeline_parallel/combined_1f1b.py:205-214)
and without interleaving a pipeline is refused anyway; its FSDP adapter refuses per-layer graphs beside it
(distributed/fsdp/mcore_fsdp_adapter.py:168-178).  Both pass validate_args and fail as the model is wrapped: a user
trial's best plans for qwen3-30b-a3b on 16 H100 and DeepSeek-V3 on 512 H100 (--zero 2) were such files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.cost.step import ep_overlap_broken
from placement.evaluate import ep_overlap_error
from placement.specs import Layout
from placement.specs.recipe import CudaGraphs, Recipe
from tests.test_cost_terms import _est, _f


def test_fsdp_breaks_the_overlap_under_a_pipeline_and_with_partial_graphs() -> None:
    r = Recipe()
    assert ep_overlap_broken(4, 2, r, ep=8, zero=2)["fsdp_pipeline"]
    assert not ep_overlap_broken(4, 2, r, ep=8, zero=1)["fsdp_pipeline"]
    assert not ep_overlap_broken(1, 1, r, ep=8, zero=3)["fsdp_pipeline"]
    assert ep_overlap_broken(1, 1, r, ep=8, zero=3, partial_graphs=True)["fsdp_graphs"]
    assert not ep_overlap_broken(1, 1, r, ep=8, zero=1, partial_graphs=True)["fsdp_graphs"]


@pytest.mark.parametrize(("zero", "graphs", "runs"), [(2, CudaGraphs.PARTIAL, False), (2, CudaGraphs.NONE, True),
                                                      (1, CudaGraphs.PARTIAL, True)])
def test_a_pinned_overlap_that_megatron_fsdp_refuses_has_no_step(zero, graphs, runs) -> None:
    recipe = Recipe(ep_comm_overlap=True, cuda_graphs=graphs)
    est = _est("qwen3-30b-a3b", "dgx-h100", 16, Layout(dp=16, ep=16, zero_stage=zero, micro_batch_size=2), recipe,
               global_batch=512)
    assert bool(np.isfinite(_f(est.step_time_s))) is runs
    error = ep_overlap_error(Layout(dp=16, ep=16, zero_stage=zero, micro_batch_size=2), recipe)
    assert (error is None) is runs
    if not runs:
        assert "per-layer CUDA graphs" in error and "--cuda-graphs none" in error


def test_the_plans_offered_never_pair_fsdp_with_a_refused_overlap() -> None:
    for argv in (["--model", "qwen3-30b-a3b", "--gpus", "16", "--global-batch", "512"],
                 ["--model", "deepseek-v3", "--gpus", "512", "--global-batch", "1024", "--zero", "2"]):
        out = CliRunner().invoke(main, ["plan", *argv, "--cluster", "dgx-h100", "--seq-len", "4096", "--top-k", "5",
                                        "--json"])
        assert out.exit_code == 0, out.output
        plans = json.loads(out.stdout)["plans"]
        overlapped_fsdp = [p for p in plans if p["layout"]["zero_stage"] >= 2 and p["recipe"]["ep_comm_overlap"]]
        assert overlapped_fsdp, argv  # the overlap still runs where Megatron-FSDP allows it
        for p in overlapped_fsdp:
            assert p["layout"]["pp"] == 1 and p["recipe"]["cuda_graphs"] != "partial", (argv, p["layout"])
