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


def _run(*argv: str, exit_codes: tuple[int, ...] = (0,)) -> dict:
    result = CliRunner().invoke(main, [*argv, "--json"])
    assert result.exit_code in exit_codes, result.output
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


def test_ddp_all_reduces_every_micro_batch_where_nothing_calls_no_sync():
    lay = ["--gpus", "32", "--tp", "8", "--mbs", "1", "--zero", "0", "--sequence-parallel", "--grad-reduce-fp32",
           "--dp-reduce-every-microbatch"]
    one = _evaluate(*lay, "--global-batch", "4")["breakdown"]
    sixteen = _evaluate(*lay, "--global-batch", "64")["breakdown"]
    assert sixteen["dp"] == pytest.approx(16 * one["dp"], rel=1e-3)
    assert sixteen["exposed"]["dp"] > one["exposed"]["dp"]


TOML_022 = """[model]
name = "llama3"
flavor = "8B"

[training]
local_batch_size = 1
global_batch_size = {batch}
seq_len = 2048

[parallelism]
data_parallel_replicate_degree = 64
data_parallel_shard_degree = 1
tensor_parallel_degree = 1
pipeline_parallel_degree = 1
"""


def test_a_torchtitan_022_job_file_runs_ddp_reducing_every_micro_batch(tmp_path):
    """A user trial: a v0.2.2 TOML of DDP over 64 ranks with 8 accumulation micro-batches was priced with one all-reduce
    a step (2.000 s); its source said every micro-batch."""
    def audit(batch: int) -> dict:
        path = tmp_path / f"llama3_8b_{batch}.toml"
        path.write_text(TOML_022.format(batch=batch))
        # (64 unsharded replicas of Llama 3 8B do not fit: the audit exits 1 with its findings)
        return _run("audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--launch",
                    str(path), exit_codes=(0, 1))["estimate"]

    eight, one = audit(512), audit(64)
    assert eight["layout"]["num_microbatches"] == 8 and eight["layout"]["zero_stage"] == 0
    assert eight["recipe"]["zero0_as_fsdp"] is False and "v0.2.2" in eight["recipe_sources"]["zero0_as_fsdp"]
    assert eight["recipe"]["dp_reduce_every_microbatch"] is True
    assert eight["breakdown"]["dp"] == pytest.approx(8 * one["breakdown"]["dp"], rel=1e-3)


def test_a_torchtitan_022_job_without_fsdp_under_tp_trains_in_float32_and_is_refused(tmp_path):
    """v0.2.2 distributed/utils.py maybe_enable_amp: no FSDP, TP or PP on -> no autocast, float32 GEMMs; the audit had
    priced such a file as bf16."""
    path = tmp_path / "tp2.toml"
    path.write_text(TOML_022.format(batch=64).replace("data_parallel_replicate_degree = 64",
                                                      "data_parallel_replicate_degree = 1")
                    .replace("tensor_parallel_degree = 1", "tensor_parallel_degree = 2")
                    .replace("local_batch_size = 1", "local_batch_size = 64"))
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "2",
                                       "--launch", str(path)])
    assert result.exit_code == 2, result.output
    assert "trains in float32" in result.output and "maybe_enable_amp" in result.output
    assert "Traceback" not in result.output
