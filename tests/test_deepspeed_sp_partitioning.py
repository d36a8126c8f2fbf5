"""DeepSpeed's PipelineEngine partitions each stage's output over the TP group and rebuilds the next stage's input
from one piece of every rank (0.19.8 runtime/pipe/engine.py:708-745, runtime/utils.py PartitionedTensor): right where
the TP ranks hold the same tensor, wrong under sequence parallelism, where each holds its own sequence shard (a QA
run: placement's own files for llama3-70b, tp 4 pp 4 with sequence parallelism, partitioned).  The files turn it off
there, and the audit of a job that partitions shards says the job trains on mixed inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "32", "--seq-len", "4096", "--global-batch", "64"]
LAYOUT = ["--tp", "2", "--pp", "4", "--zero", "1", "--mbs", "1", "--framework", "deepspeed"]
LAUNCH = ("deepspeed.sh", "ds_config.json", "ds_topology.py")


def _emit(tmp_path: Path, *extra: str) -> tuple[Path, dict]:
    out = tmp_path / "files"
    got = CliRunner().invoke(main, ["evaluate", *JOB, *LAYOUT, *extra, "--emit", "deepspeed", "--out", str(out),
                                    "--json"])
    assert got.exit_code == 0, got.output
    return out, json.loads(got.stdout)


def _audit(out: Path, *extra: str):
    launch = [x for name in LAUNCH for x in ("--launch", str(out / name))]
    return CliRunner().invoke(main, ["audit", *JOB, *launch, "--hosts", str(out / "hosts.txt"), "--json", *extra])


@pytest.mark.parametrize(("sp", "partitioned"), [("--sequence-parallel", False), ("--no-sequence-parallel", True)])
def test_the_files_partition_pipeline_sends_only_without_sequence_parallelism(tmp_path, sp, partitioned) -> None:
    out, plan = _emit(tmp_path, sp)
    pipeline = json.loads((out / "ds_config.json").read_text())["pipeline"]
    assert (pipeline["pipe_partitioned"], pipeline["grad_partitioned"]) == (partitioned, partitioned)
    audit = _audit(out)
    assert audit.exit_code in (0, 1), audit.output[-2000:]  # 1: its other findings (a pipeline bubble) are errors
    got = json.loads(audit.stdout)
    assert got["estimate"]["step_time_s"] == pytest.approx(plan["step_time_s"], rel=1e-6)
    kinds = {f["kind"] for f in got["findings"]}
    assert "pipeline_partitioned_shards" not in kinds and "pipeline_whole_sends" not in kinds


@pytest.mark.parametrize("stated", [True, None])
def test_a_job_that_partitions_sequence_shards_is_an_error(tmp_path, stated) -> None:
    out, plan = _emit(tmp_path, "--sequence-parallel")
    config = json.loads((out / "ds_config.json").read_text())
    if stated:
        config["pipeline"].update(pipe_partitioned=True, grad_partitioned=True)
    else:  # DeepSpeed's default: true
        del config["pipeline"]["pipe_partitioned"], config["pipeline"]["grad_partitioned"]
    (out / "ds_config.json").write_text(json.dumps(config, indent=2))
    audit = _audit(out)
    assert audit.exit_code in (0, 1), audit.output[-2000:]
    got = json.loads(audit.stdout)
    (found,) = [f for f in got["findings"] if f["kind"] == "pipeline_partitioned_shards"]
    assert found["severity"] == "error"
    assert ("ds_config.json" in found["message"]) is bool(stated)
    assert "ds_topology.py" in found["message"] and "pipe_partitioned and pipeline.grad_partitioned false" in (
        found["message"])
    # the step is the same either way: each rank sends 1/tp of the activation
    assert got["estimate"]["step_time_s"] == pytest.approx(plan["step_time_s"], rel=1e-6)
