"""HSDP with the optimizer sharded over the replicas too (recipe optimizer_over_replicas): MaxText's
shard_optimizer_over_data beside a mesh whose fsdp or expert axis shards the weights adds `data` to the AdamW
moments' sharding and gives the stored float32 weights that sharding (utils/sharding.py add_data_to_sharding,
maybe_update_params_sharding_with_opt), then gathers the weights back to the shard group's sharding once a step, in
bf16 before the accumulation loop (utils/gradient_accumulation.py).  A user trial found an emitted maxtext.yml for
Mixtral on 64 H100 (expert 8 x data 8) saying DOES NOT FIT at 124.6 GiB while its own warning said the estimate
counted 8 times the optimizer memory it holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.specs import Layout
from placement.specs.recipe import Recipe
from tests.test_cost_terms import PLAIN, _est, _f

MAXTEXT = PLAIN.model_copy(update={"fp32_weights": True, "grad_reduce_fp32": True})


def _parts(recipe: Recipe, dp_shard: int = 8, mbs: int = 1) -> tuple[float, float, float, float]:
    """(weights, gradients, optimizer state, dp seconds) of llama3-8b on 16 H100, ZeRO-3 over 8, 2 replicas."""
    est = _est("llama3-8b", "dgx-h100", 16, Layout(dp=16, zero_stage=3, dp_shard=dp_shard, micro_batch_size=mbs),
               recipe, global_batch=64)
    return (_f(est.weights_bytes), _f(est.grads_bytes), _f(est.optimizer_bytes), _f(est.dp_s))


@pytest.mark.parametrize("mbs", [1, 4])
def test_the_optimizer_and_float32_weights_shard_over_the_replicas_and_the_step_holds_its_gathered_copy(mbs):
    """Per parameter, with P the stage's parameters, 8 shard ranks and 2 replicas: float32 weights 4 P / 16 plus the
    step's gathered copy P / 8 at 2 bytes (bf16 before an accumulation loop: 4 micro-batches) or 4 (one micro-batch,
    no loop: float32); gradients 4 P / 8 as before; moments 8 P / 16, half of plain HSDP's."""
    over = MAXTEXT.model_copy(update={"optimizer_over_replicas": True})
    w0, g0, o0, _ = _parts(MAXTEXT, mbs=mbs)
    w1, g1, o1, _ = _parts(over, mbs=mbs)
    params = w0 / 4.0 * 8  # plain HSDP holds 4 bytes a parameter over 8 ranks
    m = 64 // (16 * mbs)  # 64 sequences over 16 ranks: a loop of 4 micro-batches, or 1
    step_copy = 2.0 if m > 1 else 4.0
    assert o1 == pytest.approx(o0 / 2, rel=1e-9)
    assert g1 == pytest.approx(g0, rel=1e-9)
    assert w1 == pytest.approx(4.0 * params / 16 + step_copy * params / 8, rel=1e-9)


def test_without_float32_weights_only_the_optimizer_state_shards_over_the_replicas():
    """A 16-bit-weights recipe keeps its master copy in the optimizer state (12 bytes): that goes over the replicas,
    the 16-bit weights stay at the shard group's sharding, with no second copy."""
    over = PLAIN.model_copy(update={"optimizer_over_replicas": True})
    w0, g0, o0, _ = _parts(PLAIN)
    w1, g1, o1, _ = _parts(over)
    assert (w1, g1) == pytest.approx((w0, g0), rel=1e-9)
    assert o1 == pytest.approx(o0 / 2, rel=1e-9)


def test_the_replicas_reduce_scatter_the_gradients_and_gather_the_weights_instead_of_all_reducing():
    """Plain HSDP all-reduces the float32 gradients over the replicas (twice 4 bytes a shard parameter); over the
    replicas they reduce-scatter them (4) and gather the bf16 weights back (2): less traffic, so less dp time."""
    over = MAXTEXT.model_copy(update={"optimizer_over_replicas": True})
    *_, t0 = _parts(MAXTEXT, mbs=1)
    *_, t1 = _parts(over, mbs=1)
    assert t1 < t0
    full = _parts(over, dp_shard=16, mbs=1)  # no replicas: the recipe changes nothing
    assert full == pytest.approx(_parts(MAXTEXT, dp_shard=16, mbs=1), rel=1e-12)


def _run(args: list[str]) -> str:
    result = CliRunner().invoke(main, args)
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def test_a_maxtext_moe_file_prices_its_optimizer_over_data_and_its_audit_agrees(tmp_path: Path):
    """The trial's job: plan 1 is ZeRO-1 with ep 8, which MaxText runs as ZeRO-3 over the expert axis with the
    optimizer over data (shard_optimizer_over_data).  The header prices that, with no '8 times' caveat, and the audit
    of the file gives the same step and memory; `--framework maxtext` finds HSDP layouts that fit, with the optimizer
    over data.  (Its best is now plain FSDP over all 64 at ep 1, which pays no routing imbalance; the HSDP ep 8 layout
    follows it.)"""
    out = tmp_path / "out"
    _run(["plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64", "--emit", "maxtext",
          "--out", str(out)])
    text = (out / "maxtext.yml").read_text()
    assert "times the optimizer memory" not in text
    runs = next(line for line in text.splitlines() if line.startswith("# this file runs "))
    assert ("FSDP (ZeRO-3 over the 8 expert ranks, replicated over 8 data; not ZeRO-1), the optimizer state and "
            "float32 weights sharded over data 8 too") in runs
    audit = _run(["audit", "--launch", str(out / "maxtext.yml"), "--model", "mixtral-8x7b", "--cluster", "dgx-h100",
                  "--gpus", "64"])
    step = next(line for line in audit.splitlines() if line.startswith("step "))
    seconds, gib = step.split()[1], step.split("memory ")[1].split(" of")[0]
    assert f": {seconds} s/step (" in runs and f", {gib} of 78.1 GiB per GPU" in runs
    assert "recipe.optimizer_over_replicas True: " in audit

    out2 = tmp_path / "fw"
    listing = _run(["plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64", "--framework",
                    "maxtext", "--emit", "maxtext", "--out", str(out2), "--top-k", "5", "--json"])
    plans = json.loads(listing)["plans"]
    hsdp = [p for p in plans if p["layout"]["zero_stage"] == 3 and p["layout"]["dp_shard"] < p["layout"]["dp"]]
    assert hsdp
    for p in hsdp:  # over data where the expert ranks are the whole shard group, plain HSDP beside fsdp ranks
        assert p["recipe"]["optimizer_over_replicas"] is (p["layout"]["dp_shard"] <= p["layout"]["ep"])
        assert p["peak_memory_bytes"] <= p["memory_capacity_bytes"]
    best = plans[0]
    assert best["peak_memory_bytes"] <= best["memory_capacity_bytes"]
    written = "shard_optimizer_over_data: true" in (out2 / "maxtext.yml").read_text()
    lay = best["layout"]
    assert written == (lay["ep"] >= lay["dp_shard"] and lay["dp_shard"] < lay["dp"])


def test_the_weight_gather_is_exposed_and_runs_once_a_step():
    """A review: the gather of the updated weights follows the optimizer and precedes the next step's first forward,
    so nothing hides it (it had been hidden behind the last backward, the exposed time unchanged by the recipe); and
    it runs once a step where the reduction runs every micro-batch (dp_reduce_every_microbatch), where it had been
    charged each time."""
    over = MAXTEXT.model_copy(update={"optimizer_over_replicas": True})

    def dp(recipe, every=False):
        r = recipe.model_copy(update={"dp_reduce_every_microbatch": every})
        est = _est("llama3-8b", "dgx-h100", 16, Layout(dp=16, zero_stage=3, dp_shard=8, micro_batch_size=1), r,
                   global_batch=64)  # 4 micro-batches
        return _f(est.dp_s), _f(est.dp_exposed_s)

    (plain_s, plain_exposed), (over_s, over_exposed) = dp(MAXTEXT), dp(over)
    assert over_s < plain_s  # a float32 reduce-scatter and a bf16 gather move less than a float32 all-reduce
    assert over_exposed > plain_exposed
    # per extra reduction: the reduce-scatter alone (half of an all-reduce of the same bytes), never the gather
    extra_plain = dp(MAXTEXT, every=True)[0] - plain_s
    extra_over = dp(over, every=True)[0] - over_s
    assert extra_over == pytest.approx(extra_plain / 2, rel=1e-3)  # (latency steps aside)


def test_float32_weights_under_plain_hsdp_with_float32_reduction_are_no_change_a_file_names(tmp_path: Path):
    """Under ZeRO-3 with float32 gradients, float32 weights (4 + 4 + 8) hold what 16-bit ones do (2 + 2 + 12): a
    torchtitan file of such a plan said "fp32_weights False (not True)" at an unchanged price (a review), once the
    rule was widened for MaxText's optimizer over the replicas, where it does change the price."""
    _run(["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--zero", "3", "--dp-shard",
          "8", "--fp32-weights", "--emit", "torchtitan", "--out", str(tmp_path)])
    runs = next(line for line in (tmp_path / "torchtitan.sh").read_text().splitlines()
                if line.startswith("# this file runs "))
    assert "fp32_weights" not in runs and "grad_reduce_fp32 True (not False)" in runs


HSDP8 = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--zero", "3", "--dp-shard", "8"]


def _maxtext_wheel_refuses_over_data_beside_fsdp() -> bool:
    """The installed MaxText 0.2.5 wheel's own config check (configs/types.py, read, never imported: it needs Python
    3.12), where the verify extra is installed."""
    import importlib.util

    spec = importlib.util.find_spec("maxtext")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the maxtext wheel (verify extra) is not installed")
    types_py = Path(next(iter(spec.submodule_search_locations))) / "configs" / "types.py"
    return "`shard_optimizer_over_data` (Zero-1) cannot be combined with FSDP" in types_py.read_text()


def test_maxtext_refuses_optimizer_over_data_beside_fsdp_so_an_hsdp_file_does_not_set_it(tmp_path: Path):
    """MaxText 0.2.5 refuses shard_optimizer_over_data beside an fsdp axis when it loads the config: a user trial's
    llama3-8b z3/hsdp8 file (data 8 x fsdp 8) set it and did not start.  The file now leaves it out and runs plain
    HSDP, the plan's own optimizer sharding: no optimizer line in "this file runs"."""
    assert _maxtext_wheel_refuses_over_data_beside_fsdp()
    _run(["evaluate", *HSDP8, "--emit", "maxtext", "--out", str(tmp_path)])
    text = (tmp_path / "maxtext.yml").read_text()
    keys = [line for line in text.splitlines() if not line.startswith("#")]
    assert "ici_fsdp_parallelism: 8" in keys and not [k for k in keys if k.startswith("shard_optimizer_over_data")]
    runs = next(line for line in text.splitlines() if line.startswith("# this file runs "))
    assert "optimizer" not in runs


def test_an_hsdp_plan_priced_with_the_optimizer_over_replicas_is_repriced_as_its_maxtext_file_runs(tmp_path: Path):
    """Priced with the optimizer over the replicas, the file (which cannot set it beside fsdp) runs it over the shard
    ranks alone: said, and priced at plain HSDP's memory, as the same layout priced without it."""
    over = json.loads(_run(["evaluate", *HSDP8, "--optimizer-over-replicas", "--emit", "maxtext", "--out",
                            str(tmp_path / "over"), "--json"]))
    plain = json.loads(_run(["evaluate", *HSDP8, "--emit", "maxtext", "--out", str(tmp_path / "plain"), "--json"]))
    assert over["peak_memory_bytes"] < plain["peak_memory_bytes"]
    runs_over = next(x for x in over["files_run"] if x.startswith("maxtext.yml"))
    runs_plain = next(x for x in plain["files_run"] if x.startswith("maxtext.yml"))
    assert "the optimizer state over the 8 shard ranks alone (not over the HSDP replicas too" in runs_over
    def priced(line: str) -> tuple[str, str]:  # (s/step, GiB of what runs), not the change against each plan
        tail = line.split(": ")[-1]
        return tail.split(" s/step")[0], tail.split("MFU")[1].split(" of ")[0]

    assert priced(runs_over) == priced(runs_plain)


def test_framework_maxtext_plans_data_x_fsdp_hsdp_with_the_optimizer_over_the_shard_group(tmp_path: Path):
    """`--framework maxtext` decides the optimizer's sharding per layout: over the data replicas too where the expert
    ranks are the whole shard group (its files set shard_optimizer_over_data), over the fsdp ranks alone beside an
    fsdp axis, where MaxText 0.2.5 refuses that key (configs/types.py:5605-5621) and base.yml's embed rule shards
    nothing over data.  A QA pass found evaluate refusing llama3-8b z3/hsdp8 (data 8 x fsdp 8) with exit 2 and plan
    never offering such a layout; now evaluate prices it as plain HSDP, the moments 8 times full FSDP's over 64, and
    plan offers data x fsdp layouts whose files run as priced."""
    res = CliRunner().invoke(main, ["evaluate", *HSDP8, "--framework", "maxtext", "--json"])
    assert res.exit_code == 0, res.output
    hsdp = json.loads(res.stdout)
    full = json.loads(_run(["evaluate", *HSDP8[:-2], "--dp-shard", "64", "--framework", "maxtext", "--json"]))
    assert hsdp["recipe"]["optimizer_over_replicas"] is False
    assert hsdp["memory"]["optimizer_bytes"] == pytest.approx(8 * full["memory"]["optimizer_bytes"], rel=1e-6)
    # the same layout priced with the optimizer over the replicas holds 8 times less: the per-layout rule decided it
    over = json.loads(_run(["evaluate", *HSDP8, "--optimizer-over-replicas", "--fp32-weights", "--grad-reduce-fp32",
                            "--json"]))
    assert hsdp["memory"]["optimizer_bytes"] == pytest.approx(8 * over["memory"]["optimizer_bytes"], rel=1e-6)
    plans = json.loads(_run(["plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64",
                             "--framework", "maxtext", "--zero", "3", "--top-k", "6", "--json"]))["plans"]
    fsdp_hsdp = [p for p in plans if p["layout"]["ep"] < p["layout"]["dp_shard"] < p["layout"]["dp"]]
    assert fsdp_hsdp
    index = plans.index(fsdp_hsdp[0]) + 1
    out = tmp_path / "out"
    _run(["plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64", "--framework", "maxtext",
          "--zero", "3", "--top-k", "6", "--plan-index", str(index), "--emit", "maxtext", "--out", str(out)])
    text = (out / "maxtext.yml").read_text()
    assert "shard_optimizer_over_data" not in "".join(k for k in text.splitlines() if not k.startswith("#"))
    assert not [line for line in text.splitlines() if line.startswith("# this file runs ")]


def test_the_audit_of_a_plain_hsdp_maxtext_file_searches_its_best_plan_as_placements_files_run(tmp_path: Path):
    """A MaxText job without shard_optimizer_over_data (plain data x fsdp HSDP) is priced as it runs, optimizer over
    the shard group; its best plan is searched as placement's MaxText files would run each layout, the optimizer over
    data wherever the expert ranks are the whole shard group, not under the job's own false."""
    _run(["evaluate", *HSDP8, "--framework", "maxtext", "--emit", "maxtext", "--out", str(tmp_path)])
    audit = json.loads(_run(["audit", "--launch", str(tmp_path / "maxtext.yml"), "--model", "llama3-8b", "--cluster",
                             "dgx-h100", "--gpus", "64", "--json"]))
    assert audit["estimate"]["recipe"]["optimizer_over_replicas"] is False
    best = audit["best"]
    assert best["recipe"]["optimizer_over_replicas_beside_fsdp"] is False
    assert best["recipe_sources"]["optimizer_over_replicas"].startswith("maxtext's files as placement writes them")
