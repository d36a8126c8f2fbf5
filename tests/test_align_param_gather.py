"""`align_param_gather`: under an interleaved schedule Megatron-Core (core_r0.9.0 on, the command line's default;
NeMo 2's and Megatron-Bridge's comm-overlap configs) dispatches each rank's first two model chunks' weight gathers
whole when the schedule starts, the embedding's bucket last, so chunk 0's first forward waits for all of chunk 0's
gather.  Before, the forward pre-hook gathered each bucket behind the one before and only the first waited.
Tested in the DP term, on the calibration rows it dates, in Megatron's files and in the audit's readers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.calibration.validate import load_runs, predict
from placement.cli import main
from placement.cost.dp import StageParams, dp_term
from placement.specs import Layout
from placement.specs.recipe import Recipe
from tests.test_cost_terms import _ctx

BRIDGE_DSV3 = Path(__file__).parent / "data" / "audit" / "bridge" / "deepseek_v3_pretrain_h100_fp8_sc_v1.yaml"


def _exposed(align: bool, vpp: int, gather_overlap: bool = True, embed: float = 0.0) -> tuple[float, float]:
    """(exposed, total) DP seconds of ZeRO-1 on 8 data-parallel ranks with compute long enough to hide anything
    that has compute beside it; 16-bit gradients, so the reduce-scatter and the gather move the same bytes."""
    p = StageParams(dense=np.array([4.0e9]), expert=np.array([0.0]), dense_shard=np.array([8.0]),
                    expert_shard=np.array([1.0]), embed=np.array([embed]))
    recipe = Recipe(align_param_gather=align, param_gather_overlap=gather_overlap, grad_reduce_fp32=False)
    ctx = _ctx("llama3-8b", "dgx-h100", 128, Layout(tp=4, pp=4, vpp=vpp, dp=8, zero_stage=1,
                                                    sequence_parallel=True), recipe=recipe, global_batch=256)
    term = dp_term(ctx, p, np.array([1.0e3]))
    return float(term.exposed_s[0]), float(term.total_s[0])


@pytest.mark.parametrize("vpp", [2, 4, 8])
def test_the_first_forward_waits_for_chunk_zeros_whole_gather(vpp: int) -> None:
    on, total = _exposed(True, vpp)
    off, _ = _exposed(False, vpp)
    gather = total / 2.0  # one gather and one reduce-scatter of the same bytes
    assert on - off == pytest.approx(gather / vpp, rel=1e-9)


def test_the_first_rank_waits_for_its_embedding_whole() -> None:
    """Chunk 0 of the first rank holds the embedding whole beside 1/vpp of the layers: its gather is all of the
    embedding's plus a chunk's share of the rest, more than a chunk's share of the whole."""
    vpp = 4
    with_embed, total = _exposed(True, vpp, embed=1.0e9)
    without, _ = _exposed(False, vpp, embed=1.0e9)
    assert with_embed - without > 0.0
    assert with_embed > total / 2.0 / vpp


def test_nothing_aligns_without_interleaving_or_without_the_overlapped_gather() -> None:
    assert _exposed(True, 1) == _exposed(False, 1)
    assert _exposed(True, 4, gather_overlap=False) == _exposed(False, 4, gather_overlap=False)


RUNS = {r.id: r for r in load_runs()}


def test_the_bridge_405b_row_runs_it_and_pays_for_it() -> None:
    """Megatron-Bridge 25.11 sets it (comm_overlap.py, vp_size > 1): the row prices it, slower than without."""
    run = RUNS["megatron-bridge-25.11-h100-llama31-405b-1024gpu"]
    assert run.recipe.align_param_gather is True and run.layout["vpp"] > 1 and run.layout["zero_stage"] == 1
    off = run.model_copy(update={"recipe": run.recipe.model_copy(update={"align_param_gather": False})})
    assert predict(run).predicted_step_time_s > predict(off).predicted_step_time_s


@pytest.mark.parametrize("prefix", ["mcore-r0.8-", "nemo-24.07-", "mlperf-v4.0-", "dgxc-24.11-"])
def test_rows_older_than_the_aligned_gather_do_not_run_it(prefix: str) -> None:
    """Megatron-Core r0.8 and NeMo 1 (Apex's DistributedFusedAdam) predate it: every interleaved row of theirs that
    may run ZeRO-1 (stated, or left to the search) turns it off, and says why."""
    rows = [r for r in RUNS.values() if r.id.startswith(prefix) and r.layout.get("zero_stage") in (None, 1)
            and ((r.layout.get("vpp") or 1) > 1 or r.interleaved) and r.layout.get("dp", 1) > 1]
    assert rows
    for r in rows:
        assert r.recipe.align_param_gather is False, r.id
        assert "align_param_gather off" in r.recipe_sources, r.id


def _megatron_files(tmp_path: Path, *extra: str) -> str:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [
        "evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "8192",
        "--global-batch", "128", "--tp", "4", "--pp", "4", "--vpp", "5", "--zero", "1", "--recompute", "full",
        "--out", str(out), "--emit", "megatron", *extra])
    assert result.exit_code == 0, result.output
    return "\n".join(p.read_text() for p in out.rglob("*") if p.is_file())


def test_megatron_files_turn_it_off_only_where_the_plan_does(tmp_path: Path) -> None:
    assert "--no-align-param-gather" not in _megatron_files(tmp_path / "on")  # the command line's default
    assert "--no-align-param-gather" in _megatron_files(tmp_path / "off", "--no-align-param-gather")


def _script(tmp_path: Path, extra: str) -> Path:
    script = tmp_path / "train.sh"
    script.write_text(
        "torchrun --nnodes 8 --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 4 "
        "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 4 --num-layers 80 "
        "--hidden-size 8192 --num-attention-heads 64 --seq-length 4096 --micro-batch-size 1 "
        f"--global-batch-size 128 --bf16 --use-distributed-optimizer --overlap-grad-reduce {extra}\n")
    return script


@pytest.mark.parametrize(("extra", "expected", "source"), [
    ("--overlap-param-gather", True, "--no-align-param-gather"),
    ("--overlap-param-gather --no-align-param-gather", False, "--no-align-param-gather"),
    ("--overlap-param-gather --no-delay-grad-reduce", False, "4e3840535b"),
])
def test_audit_reads_megatron_lm_alignment(tmp_path: Path, extra: str, expected: bool, source: str) -> None:
    layout = parse_launch([_script(tmp_path, extra)])
    assert layout.recipe["align_param_gather"] is expected
    assert source in layout.sources["recipe.align_param_gather"]


def test_audit_reads_bridge_alignment(tmp_path: Path) -> None:
    """A comm_overlap section aligns the gathers under virtual stages over the DDP config's dumped false
    (its own null); without the section the DDP config's field stands."""
    cfg = yaml.safe_load(BRIDGE_DSV3.read_text(encoding="utf-8"))
    assert cfg["model"]["virtual_pipeline_model_parallel_size"] > 1
    assert cfg["comm_overlap"]["align_param_gather"] is None and cfg["ddp"]["align_param_gather"] is False
    lay = parse_launch([BRIDGE_DSV3])
    assert lay.recipe["align_param_gather"] is True
    assert "align_param_gather: null" in lay.sources["recipe.align_param_gather"]
    del cfg["comm_overlap"]
    path = tmp_path / "no_section.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    lay = parse_launch([path])
    assert lay.recipe["align_param_gather"] is False
    assert "align_param_gather: false" in lay.sources["recipe.align_param_gather"]
