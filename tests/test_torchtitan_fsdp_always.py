"""torchtitan 0.3.0 wraps every job in FSDP2 (models/llama3/parallelize.py:69-89) and never turns its gradient sync off
between accumulation micro-batches (trainer.py:905-930): its ZeRO-0 is FSDP2 over one-rank shards (recipe
zero0_as_fsdp) and HSDP all-reduces over the replicas every micro-batch (recipe dp_reduce_every_microbatch).  A user
trial: on 7 GPUs (llama3-8b, pp 7, dp 1) the plan's ZeRO-0 header and the ZeRO-2 file of the same job, which run the
same FSDP2 wrapper, were priced 80.069 s and 82.228 s."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.cli import main

BASE = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--seq-len", "8192"]


def _run(*argv: str) -> dict:
    result = CliRunner().invoke(main, [*argv, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _evaluate(*argv: str) -> dict:
    return _run("evaluate", *BASE, *argv)


def test_a_torchtitan_zero0_pipeline_is_priced_as_the_fsdp2_job_its_zero2_file_runs(tmp_path):
    plan = _run("plan", *BASE, "--gpus", "7", "--global-batch", "512", "--framework", "torchtitan", "--top-k", "1",
                "--out", str(tmp_path), "--emit", "torchtitan")["plans"][0]
    lay = plan["layout"]
    assert (lay["pp"], lay["dp"], lay["zero_stage"]) == (7, 1, 0)
    same = ["--gpus", "7", "--global-batch", "512", "--tp", "1", "--pp", "7", "--mbs", str(lay["micro_batch_size"]),
            "--recompute", lay["recompute"], "--framework", "torchtitan"]
    zero2 = _evaluate(*same, "--zero", "2")
    # the unsharded float32 accumulation FSDP2 runs under torch pipelining, at ZeRO-0 as at ZeRO-2
    assert plan["breakdown"]["grad_accumulation"] > 0.0
    assert plan["step_time_s"] == pytest.approx(zero2["step_time_s"], rel=1e-6)
    assert plan["recipe"]["zero0_as_fsdp"] is True and "shard_degree=1" in plan["recipe_sources"]["zero0_as_fsdp"]
    audit = _run("audit", *BASE, "--gpus", "7", "--launch", str(tmp_path / "torchtitan.sh"))
    assert audit["estimate"]["step_time_s"] == pytest.approx(plan["step_time_s"], rel=1e-6)


def test_a_zero0_run_as_fsdp2_all_reduces_its_float32_gradients_every_micro_batch():
    """Without a pipeline nothing defers the reduction: m micro-batches all-reduce m times, where DDP with no_sync
    (Megatron's ZeRO-0) does once."""
    lay = ["--gpus", "32", "--tp", "8", "--mbs", "1", "--zero", "0", "--sequence-parallel", "--grad-reduce-fp32"]
    fsdp = ["--zero0-as-fsdp", "--dp-reduce-every-microbatch"]
    one = _evaluate(*lay, *fsdp, "--global-batch", "4")["breakdown"]["dp"]
    sixteen = _evaluate(*lay, *fsdp, "--global-batch", "64")["breakdown"]["dp"]
    ddp = _evaluate(*lay, "--global-batch", "64")["breakdown"]["dp"]
    assert sixteen == pytest.approx(16 * one, rel=1e-3)
    assert ddp == pytest.approx(one, rel=1e-3)


def test_hsdp_all_reduces_over_the_replicas_every_micro_batch_where_nothing_turns_the_sync_off():
    """The extra over one all-reduce a step is one all-reduce per further micro-batch: m - 1 of them."""
    lay = ["--gpus", "32", "--tp", "8", "--mbs", "1", "--zero", "3", "--dp-shard", "2", "--sequence-parallel",
           "--grad-reduce-fp32"]

    def extra(batch: int) -> float:
        on = _evaluate(*lay, "--global-batch", str(batch), "--dp-reduce-every-microbatch")["breakdown"]["dp"]
        off = _evaluate(*lay, "--global-batch", str(batch))["breakdown"]["dp"]
        return on - off

    eight, sixteen = extra(32), extra(64)  # 8 and 16 micro-batches over dp 4
    assert eight > 0.0
    assert sixteen / eight == pytest.approx(15 / 7, rel=1e-3)


def test_torchtitan_before_030_runs_its_zero0_as_ddp():
    from placement.audit.core import TORCHTITAN_030_ONLY
    from placement.frameworks import CAPABILITIES

    rows = {name for name, _, _ in CAPABILITIES["torchtitan"].recipe}
    assert set(TORCHTITAN_030_ONLY) <= rows
    value, why = TORCHTITAN_030_ONLY["zero0_as_fsdp"]
    assert value is False and "v0.2.2" in why
