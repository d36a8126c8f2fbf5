"""torchtitan shards with FSDP over its context-parallel ranks even where data_parallel_shard_degree is 1:
`ParallelDims.fsdp_enabled` is `dp_shard_enabled or cp_enabled` (distributed/parallel_dims.py: 0.2.0 :221-222,
0.2.2 :334-335, 0.3.0 :692-693) and FSDP's mesh is dp_shard x cp (0.2.0 "dp_shard_cp"; "fsdp" from 0.2.1,
`fsdp = self.dp_shard * self.cp`, 0.2.2 :137, 0.3.0 :278).  A user trial audited a file with cp 2 and
data_parallel_shard_degree 1 as ZeRO-0 (8.210 s, 110.1 GiB, optimizer state unsharded) while its header priced the
ZeRO-2 it runs (9.135 s, 83.2 GiB); and `plan --framework torchtitan --exhaustive` proposed ZeRO-0 with cp 2, which
torchtitan cannot run, and found a ZeRO-0 (DDP) plan the default search had left out as ZeRO-1's twin, which
torchtitan does not have."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main
from placement.cost.batch import LayoutBatch
from placement.emit.torchtitan import fsdp_enabled
from placement.errors import InputError
from placement.frameworks import CAPABILITIES
from placement.search import SearchConfig, default_zero_stages
from placement.specs import Layout

JOB = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "32", "--seq-len", "4096", "--global-batch", "64"]
LAYOUT = ["--tp", "2", "--cp", "2", "--pp", "8", "--vpp", "5"]


def _run(argv: list[str]):
    result = CliRunner().invoke(main, argv)
    assert result.exit_code in (0, 1), result.output[-1500:]
    return result


def _header(path: Path) -> re.Match:
    """The "this file runs" line: (what, step s, memory GiB, capacity GiB, DOES NOT FIT)."""
    found = re.search(r"^# this file runs (.*?): ([\d.]+) s/step .*?([\d.]+) of ([\d.]+) GiB per GPU"
                      r"( \(DOES NOT FIT\))?", path.read_text(), re.MULTILINE)
    assert found, "the header prices what the file runs"
    return found


def _emit_and_audit(tmp_path: Path, zero: str) -> tuple[re.Match, dict, Path]:
    out = tmp_path / "files"
    _run(["evaluate", *JOB, *LAYOUT, "--zero", zero, "--out", str(out), "--emit", "torchtitan"])
    audit = json.loads(_run(["audit", *JOB, "--launch", str(out / "torchtitan.sh"), "--json"]).stdout)
    return _header(out / "torchtitan.sh"), audit, out / "torchtitan.sh"


@pytest.mark.parametrize(("dp_shard", "cp", "fsdp"), [
    (1, 1, False),  # DDP (dp_replicate) or a single replica: nothing sharded
    (1, 2, True),   # the trial's file: FSDP over the 2 CP ranks
    (2, 1, True), (4, 2, True),
    (-1, 1, True),  # "the rest": sharded unless the rest is 1 (resolved before, readers.torchtitan._finish)
])
def test_torchtitan_shards_whenever_dp_shard_or_cp_is_above_one(dp_shard, cp, fsdp):
    assert fsdp_enabled(dp_shard, cp) is fsdp


@pytest.mark.parametrize("zero", ["1", "0"])
def test_the_audit_of_a_cp_file_prices_what_its_header_prices(tmp_path, zero):
    """The trial: tp 2, cp 2, pp 8 x 5, dp 1 on 32 H100s.  A ZeRO-1 plan (and a ZeRO-0 one: torchtitan has no
    unsharded run with cp > 1) is emitted as data_parallel_shard_degree 1 with fsdp_reshard_after_forward never, which
    torchtitan runs as FSDP over dp_shard 1 x cp 2 = 2 ranks without resharding after forward: ZeRO-2 with a shard
    group of 2.  The audit reads that stage and group, and prices the step and memory the header gives (before:
    ZeRO-0, 8.210 s and 110.1 GiB against the header's 9.135 s and 83.2 GiB)."""
    header, audit, path = _emit_and_audit(tmp_path, zero)
    assert header[1].startswith(f"ZeRO-2 (not ZeRO-{zero})")
    est = audit["estimate"]
    lay = est["layout"]
    assert (lay["zero_stage"], lay["cp"], lay["dp"]) == (2, 2, 1)
    assert lay["cp"] * lay["dp_shard"] == 2  # torchtitan's FSDP mesh dp_shard x cp, the cost model's shard group
    assert float(header[2]) == pytest.approx(est["step_time_s"], abs=5e-4)
    assert float(header[3]) == pytest.approx(est["peak_memory_bytes"] / 2**30, abs=0.05)
    assert (header[5] is None) == est["fits"]
    assert "ParallelDims.fsdp_enabled" in audit["layout"]["sources"]["zero_stage"]
    launch = parse_launch([path])
    assert (launch.zero_stage, launch.dp_shard, launch.cp) == (2, 1, 2)


def test_the_pinned_numbers_of_the_trial(tmp_path, mean_speed_gpus):
    """(At the trial's pricing, every GPU at the mean speed: the slowest-GPU term came after it.)"""
    header, audit, _ = _emit_and_audit(tmp_path, "1")
    est = audit["estimate"]
    assert float(header[2]) == 9.135 and round(est["step_time_s"], 3) == 9.135
    assert round(est["peak_memory_bytes"] / 2**30, 1) == 83.2


def test_the_change_list_and_the_sources_say_what_the_cp_file_states(tmp_path):
    """The change list's launched side is the file's `never` (it said `default`, the flag of a ZeRO-0 reading), and
    vpp is derived from pipeline_parallel_layers_per_stage, not "torchtitan's default"."""
    _, audit, _ = _emit_and_audit(tmp_path, "1")
    reshard = [c for c in audit["changes"] if c["argument"] == "--parallelism.fsdp_reshard_after_forward"]
    assert reshard and all(c["from"] == "never" for c in reshard), reshard
    vpp = audit["layout"]["unstated"]["vpp"]
    assert vpp == ("derived: ceil((80 layers + first_stage_less_layers 0 + last_stage_less_layers 0) / "
                   "pipeline_parallel_layers_per_stage 2) = 40 stages / pp 8 = 5 (torchtitan _get_pipeline_metadata)")


def test_a_hsdp_file_with_cp_shards_over_the_cp_ranks_only(tmp_path):
    """dp_replicate 2, dp_shard 1, cp 2, resharding: FSDP over the 2 CP ranks, replicated twice (HSDP) = ZeRO-3
    with a shard group of cp 2 x dp_shard 1, as placement prices HSDP; without resharding torchtitan's ZeRO-2 keeps
    replicas placement's ZeRO-2 has not, and the reading says so."""
    args = ("torchrun --nnodes 8 --nproc-per-node 8 -m torchtitan.train --module llama3 --config llama3_70b "
            "--parallelism.data_parallel_replicate_degree 2 --parallelism.data_parallel_shard_degree 1 "
            "--parallelism.tensor_parallel_degree 8 --parallelism.context_parallel_degree 2 "
            "--parallelism.pipeline_parallel_degree 2 --training.disable_cuda_graphs "
            "--parallelism.fsdp_reshard_after_forward {}\n")
    for policy, zero in (("always", 3), ("never", 2)):
        path = tmp_path / f"{policy}.sh"
        path.write_text(args.format(policy))
        launch = parse_launch([path])
        assert (launch.zero_stage, launch.dp_shard, launch.dp_replicate, launch.cp) == (zero, 1, 2, 2)
        hsdp_note = [x for x in launch.ignored if x.startswith("HSDP without resharding")]
        assert bool(hsdp_note) == (zero == 2)


def test_plan_framework_torchtitan_runs_no_zero0_with_cp():
    cap = CAPABILITIES["torchtitan"]
    lay = Layout(tp=2, cp=2, pp=8, vpp=5, dp=1, zero_stage=0)
    batch = LayoutBatch.from_layouts([lay])
    assert not cap.sharding_mask(batch)[0]
    assert cap.sharding_mask(LayoutBatch.from_layouts([lay.model_copy(update={"cp": 1, "dp": 2})]))[0]
    with pytest.raises(InputError, match=re.escape("ZeRO-0 with cp 2: its FSDP shards over the dp_shard x cp ranks "
                                                   "whenever cp > 1")):
        cap.check(batch, 80)


def test_without_zero1_the_default_search_keeps_zero0():
    """ZeRO-0 is left out by default only as ZeRO-1's twin with more memory (SearchConfig.zero_stages): a framework
    without ZeRO-1 (torchtitan: DDP, FSDP) keeps it."""
    assert default_zero_stages(None) == SearchConfig.zero_stages == (1, 2, 3)
    assert default_zero_stages(CAPABILITIES["megatron"]) == (1, 2, 3)
    assert default_zero_stages(CAPABILITIES["torchtitan"]) == (0, 1, 2, 3)


def test_plan_framework_torchtitan_default_search_equals_exhaustive():
    """The trial's MoE job: 7.069 s by default against 6.919 s with --exhaustive (ZeRO-0 with cp 2, which torchtitan
    runs as FSDP over the CP ranks).  Now both give the same best plan.  (A DDP plan at 6.962 s, tp 4 beside ep 8, was
    best until torchtitan's expert mesh rule: ep must divide dp_shard x cp x tp, and its ZeRO-0 shards over one rank,
    so that mesh does not build; tests/test_torchtitan_expert_mesh.py.)"""
    job = ["plan", "--model", "qwen3-235b-a22b", "--cluster", "dgx-h100", "--gpus", "256", "--seq-len", "4096",
           "--global-batch", "512", "--framework", "torchtitan", "--top-k", "1", "--json"]
    default = json.loads(_run(job).stdout)["plans"][0]
    full = json.loads(_run([*job, "--exhaustive"]).stdout)["plans"][0]
    assert default["layout"] == full["layout"]
    assert default["step_time_s"] == pytest.approx(full["step_time_s"], rel=1e-9)
    assert not (full["layout"]["zero_stage"] == 0 and full["layout"]["cp"] > 1)
    lay = full["layout"]
    assert lay["zero_stage"] != 0 or (lay["tp"] * lay["cp"]) % lay["ep"] == 0
    # 7.012 s since torchtitan's experts are priced sharded over tp at ep 1 (its expert_param_placement_dense): the
    # best plan is tp 4 at ep 1 with expert TP 4, where the etp 1 it was priced with before left every expert whole;
    # 7.032 s with the slowest of the 256 H100s priced (h100-sxm speed_variability) and no routing imbalance at ep 1
    assert np.isclose(full["step_time_s"], 7.032, atol=5e-4)
