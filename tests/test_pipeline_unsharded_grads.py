"""`pipeline_unsharded_grads`: under pipeline parallelism torch.distributed.pipelining's PipelineStage turns FSDP2's
gradient sync and reshard-after-backward off for every backward but the last, so each stage keeps its unsharded
gradient (float32 in torchtitan) and its unsharded parameters through the step and reduce-scatters once, after its
last backward.  Tested in memory, in the DP term, through `--framework torchtitan` and on the plan it changes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.cost.dp import StageParams, dp_term
from placement.specs import Layout
from placement.specs.recipe import Recipe
from tests.test_cost_terms import _ctx, _f

BASE = ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-b200", "--gpus", "64", "--seq-len", "8192",
        "--global-batch", "256", "--tp", "2", "--pp", "2", "--mbs", "1", "--recompute", "full", "--grad-reduce-fp32",
        "--json"]


def _run(*extra: str) -> tuple[int, dict | str]:
    out = CliRunner().invoke(main, [*BASE, *extra])
    return out.exit_code, (json.loads(out.stdout) if out.exit_code in (0, 1) and out.stdout.startswith("{")
                           else out.output)


@pytest.mark.parametrize("zero", ["2", "3"])
def test_the_stage_keeps_its_whole_gradient_in_float32(zero: str) -> None:
    """With it the gradient is the stage's parameters at 4 bytes, twice the 16-bit weights (both unsharded);
    without it FSDP's gradient is a 1/dp shard."""
    _, on = _run("--zero", zero, "--pipeline-unsharded-grads")
    _, off = _run("--zero", zero, "--no-pipeline-unsharded-grads")
    mem_on, mem_off = on["memory"], off["memory"]
    assert mem_on["grads_bytes"] == pytest.approx(2.0 * mem_on["weights_bytes"], rel=1e-6)
    dp = on["layout"]["dp"]
    # the shard FSDP would keep: 4 bytes under ZeRO-2's fp32 reduce, 2 under ZeRO-3, whose fp32 master is the
    # sharded parameter (cost.memory)
    shard_width = 4.0 if zero == "2" else 2.0
    assert mem_on["grads_bytes"] == pytest.approx(dp * 4.0 / shard_width * mem_off["grads_bytes"], rel=1e-6)
    if zero == "3":  # the parameters stay gathered after each backward
        assert mem_on["weights_bytes"] == pytest.approx(dp * mem_off["weights_bytes"], rel=1e-6)
    assert on["peak_memory_bytes"] > off["peak_memory_bytes"]


def _term(zero: int, defer: bool, comp: float, pp: int = 2):
    p = StageParams(dense=np.array([4.0e9]), expert=np.array([0.0]), dense_shard=np.array([8.0]),
                    expert_shard=np.array([1.0]), edge_dense=np.array([0.0]), edge_expert=np.array([0.0]))
    recipe = Recipe(pipeline_unsharded_grads=defer, grad_reduce_fp32=True)
    ctx = _ctx("llama3-8b", "dgx-h100", 64, Layout(tp=4, pp=pp, dp=8, zero_stage=zero, sequence_parallel=True),
               recipe=recipe, global_batch=64)
    return ctx.m, dp_term(ctx, p, np.array([comp]))


def test_one_reduce_scatter_per_step_behind_no_compute() -> None:
    """ZeRO-2 sends m reduce-scatters without it and one with it; that one follows the stage's last backward, so
    however long the compute it stays exposed."""
    m, every = _term(2, False, 1.0)
    _, once = _term(2, True, 1.0)
    assert m == 8
    rs_once = (float(every.total_s[0]) - float(once.total_s[0])) / (m - 1)
    assert rs_once > 0
    long = 1000.0 * float(every.total_s[0])
    assert float(_term(2, False, long)[1].exposed_s[0]) == 0.0
    assert float(_term(2, True, long)[1].exposed_s[0]) == pytest.approx(rs_once, rel=1e-9)


def test_without_a_pipeline_nothing_changes() -> None:
    for zero in (2, 3):
        a, b = _term(zero, True, 0.01, pp=1)[1], _term(zero, False, 0.01, pp=1)[1]
        assert float(a.total_s[0]) == float(b.total_s[0]) and float(a.exposed_s[0]) == float(b.exposed_s[0])


def test_torchtitan_runs_it_and_says_so() -> None:
    code, out = _run("--zero", "3", "--dp-shard", "4", "--framework", "torchtitan", "--no-pipeline-unsharded-grads")
    assert code == 2 and "pipeline_unsharded_grads" in out and "backward_maybe_with_nosync" in out
    code, out = _run("--zero", "3", "--dp-shard", "4", "--framework", "torchtitan", "--recompute", "selective")
    assert out["recipe"]["pipeline_unsharded_grads"] is True


def test_the_torchtitan_plan_that_did_not_fit_is_no_longer_chosen() -> None:
    """The first plan of llama3-70b on 64 B200 for torchtitan was tp2 pp2x4 FSDP (HSDP 4), priced at 174.8 of
    175.5 GiB with an 8.2 GiB gradient shard; each stage holds its 17.6 B parameters' float32 gradient (66 GiB)."""
    out = CliRunner().invoke(main, ["plan", "--model", "llama3-70b", "--cluster", "dgx-b200", "--gpus", "64",
                                    "--seq-len", "8192", "--global-batch", "256", "--framework", "torchtitan",
                                    "--json"])
    assert out.exit_code == 0, out.output
    best = json.loads(out.stdout)
    best = best["plans"][0] if "plans" in best else best
    lay = best["layout"]
    assert best["fits"]
    if lay["pp"] > 1 and lay["zero_stage"] >= 2:
        params = best["memory"]["weights_bytes"] / 2.0  # bf16, unsharded under it
        assert best["memory"]["grads_bytes"] == pytest.approx(4.0 * params, rel=1e-6)


def _z3(defer: bool, comp: float, dp_shard: int | None = None):
    p = StageParams(dense=np.array([4.0e9]), expert=np.array([0.0]), dense_shard=np.array([float(dp_shard or 8)]),
                    expert_shard=np.array([1.0]), edge_dense=np.array([0.0]), edge_expert=np.array([0.0]))
    recipe = Recipe(pipeline_unsharded_grads=defer, grad_reduce_fp32=True)
    lay = Layout(tp=4, pp=2, dp=8, zero_stage=3, dp_shard=dp_shard, sequence_parallel=True)
    ctx = _ctx("llama3-8b", "dgx-h100", 64, lay, recipe=recipe, global_batch=64)
    return ctx, p, dp_term(ctx, p, np.array([comp]))


def test_deferred_zero3_gathers_once_per_micro_batch_and_the_warm_up() -> None:
    """The weights stay gathered after each backward: about m + pp - 1 gathers (9 of 8 micro-batches at pp 2), not a
    forward's and a backward's per micro-batch (16), and one float32 reduce-scatter (twice a 16-bit gather) instead
    of 8: 9 + 2 = 11 gathers' worth against 16 + 16 = 32."""
    _, _, on = _z3(True, 1.0)
    _, _, off = _z3(False, 1.0)
    assert float(on.total_s[0]) / float(off.total_s[0]) == pytest.approx(11 / 32, rel=1e-2)


def test_the_hsdp_all_reduce_after_a_deferred_reduce_hides_behind_nothing() -> None:
    from placement.cost import collectives as coll

    ctx, p, long = _z3(True, 1000.0, dp_shard=4)
    b = ctx.b
    replicas = coll.Groups(ctx.levels, b.tp * b.cp * b.dp_shard, b.dp // b.dp_shard)
    hsdp = float(replicas.all_reduce(p.dense * 4.0 / p.dense_shard)[0])
    _, _, not_deferred = _z3(False, 1000.0, dp_shard=4)
    assert float(long.exposed_s[0]) >= hsdp > 0
    assert float(not_deferred.exposed_s[0]) < hsdp  # otherwise it hides behind the backward


def test_each_micro_batch_adds_its_gradient_into_the_float32_buffer() -> None:
    """FSDP2 casts the first micro-batch's bf16 gradient into the unsharded float32 buffer (6 bytes a parameter) and
    adds each later one (10): a step of m micro-batches moves 6 + 10 (m - 1) bytes per stage parameter, where the
    fused accumulation of the recipe moves none."""
    def accumulation(batch: str, *flag: str) -> float:
        argv = [a for a in BASE if a != "--global-batch" and a != "256"]
        out = CliRunner().invoke(main, [*argv, "--global-batch", batch, "--zero", "3", *flag])
        assert out.exit_code in (0, 1), out.output
        return json.loads(out.stdout)["breakdown"]["grad_accumulation"]

    m16, m8 = accumulation("256", "--pipeline-unsharded-grads"), accumulation("128", "--pipeline-unsharded-grads")
    assert m16 / m8 == pytest.approx((6 + 10 * 15) / (6 + 10 * 7), rel=1e-3)
    assert accumulation("256", "--no-pipeline-unsharded-grads") == 0.0


def test_a_chunked_loss_keeps_the_heads_gradient_and_weights_sharded_under_the_deferral() -> None:
    """torchtitan's ChunkedLossWrapper turns the head's gradient sync and resharding back on at each micro-batch's
    last chunk (components/loss.py:725-771): on a last stage that holds the head, its float32 gradient and (ZeRO-3)
    its weights are 1/dp_shard, not whole, with a chunked loss; the other stage's parameters stay whole."""
    import yaml

    from placement.catalog import catalog_root

    common = ["--zero", "3", "--dp-shard", "16", "--pipeline-unsharded-grads", "--pipeline-layout", "Et*38|t*42L"]
    _, one = _run(*common, "--loss-chunks", "1")
    _, eight = _run(*common, "--loss-chunks", "8")
    assert one["layout"]["rank_layers"] == [38, 42]  # the last stage, with the head, is the peak rank
    model = yaml.safe_load((catalog_root() / "models" / "llama3-70b.yaml").read_text())
    head = model["vocab_size"] * model["hidden_size"] / one["layout"]["tp"]
    kept = 1.0 - 1.0 / 16
    assert one["memory"]["grads_bytes"] - eight["memory"]["grads_bytes"] == pytest.approx(4.0 * head * kept, rel=1e-4)
    assert one["memory"]["weights_bytes"] - eight["memory"]["weights_bytes"] == pytest.approx(2.0 * head * kept,
                                                                                            rel=1e-4)


def test_an_interleaved_ranks_last_chunk_reduces_whole_after_its_backward() -> None:
    """Megatron launches each model chunk's gradient reduction whole once the chunk's last backward is done (its
    default --align-grad-reduce; core_r0.8.0's --delay-grad-reduce), so under interleaving the step waits for all
    of the last chunk's reduce-scatter however long that backward is; without interleaving the rank's buckets go as
    its last backward frees them, and a long enough backward hides them."""
    p = StageParams(dense=np.array([4.0e9]), expert=np.array([0.0]), dense_shard=np.array([8.0]),
                    expert_shard=np.array([1.0]))
    recipe = Recipe(grad_reduce_fp32=True, param_gather_overlap=False)
    exposed = {}
    for vpp in (1, 4):
        ctx = _ctx("llama3-8b", "dgx-h100", 64, Layout(tp=4, pp=2, vpp=vpp, dp=8, zero_stage=1,
                                                      sequence_parallel=True), recipe=recipe, global_batch=64)
        long_backward = dp_term(ctx, p, np.array([100.0]))
        ag = _f(dp_term(ctx, p, np.array([100.0])).total_s) / 3.0  # fp32 reduce-scatter 2/3, 16-bit gather 1/3
        exposed[vpp] = _f(long_backward.exposed_s) - ag  # the gather runs before the forward: exposed whole
    grads = 2.0 * ag
    assert exposed[1] < 0.001 * grads  # (the latency terms split the total not exactly 2:1)
    assert exposed[4] == pytest.approx(grads / 4, rel=0.005)


def test_the_first_ranks_last_chunk_holds_the_embedding_whole() -> None:
    """The first pipeline rank's last backward is its chunk 0's, the chunk that holds the input embedding beside
    1/vpp of the rank's layers: under interleaving the step waits for the embedding's reduction and a quarter of
    the layers' (vpp 4), more than a quarter of the rank's whole reduction."""
    layers, embed = 3.0e9, 1.0e9
    recipe = Recipe(grad_reduce_fp32=True, param_gather_overlap=False)
    ctx = _ctx("llama3-8b", "dgx-h100", 64, Layout(tp=4, pp=2, vpp=4, dp=8, zero_stage=1, sequence_parallel=True),
               recipe=recipe, global_batch=64)

    def grads_exposed(embed_params: float) -> float:
        p = StageParams(dense=np.array([layers + embed_params]), expert=np.array([0.0]),
                        dense_shard=np.array([8.0]), expert_shard=np.array([1.0]), embed=np.array([embed_params]))
        term = dp_term(ctx, p, np.array([100.0]))
        return _f(term.exposed_s) - _f(term.total_s) / 3.0  # less the 16-bit gather, exposed whole before the forward

    per_param = grads_exposed(0.0) / (layers / 4)  # no embedding: a quarter of the layers' reduce-scatter
    assert grads_exposed(embed) == pytest.approx(per_param * (embed + layers / 4), rel=0.01)


def test_torch_pipelining_reduces_a_chunk_beside_its_last_backward() -> None:
    """torch.distributed.pipelining (torchtitan) turns DDP's sync off for every backward of a stage but the last, in
    which DDP's hooks reduce the buckets as the gradients come (stage.py backward_maybe_with_nosync): under
    interleaving a long last backward hides each chunk's all-reduce, where Megatron's aligned reduction, launched
    after that backward, leaves the last chunk's exposed."""
    p = StageParams(dense=np.array([4.0e9]), expert=np.array([0.0]), dense_shard=np.array([8.0]),
                    expert_shard=np.array([1.0]))
    exposed = {}
    for torch_pipelining in (False, True):
        recipe = Recipe(grad_reduce_fp32=True, pipeline_unsharded_grads=torch_pipelining)
        ctx = _ctx("llama3-8b", "dgx-h100", 64, Layout(tp=4, pp=2, vpp=4, dp=8, zero_stage=0,
                                                      sequence_parallel=True), recipe=recipe, global_batch=64)
        term = dp_term(ctx, p, np.array([100.0]))
        exposed[torch_pipelining] = (_f(term.exposed_s), _f(term.total_s))
    megatron, total = exposed[False]
    assert megatron == pytest.approx(total / 4, rel=0.005)  # the last of four chunks' all-reduce, whole
    assert exposed[True][0] < 0.001 * total
