"""The Megatron file states exactly the pipeline split the plan priced, in arguments Megatron accepts (issue:
launch files that run exactly what was priced).  Megatron's own parser checks these in tests/verify."""

from __future__ import annotations

import shlex

import pytest

from placement.cli import build_job
from placement.cost.pipeline import parse_layout, rank_layer_counts
from placement.emit import megatron
from placement.emit.common import EmitContext
from placement.planner import plan_job
from placement.search import SearchConfig
from placement.specs.recipe import Recipe


def _ctx(model: str, gpus: int, fixed: dict, recipe: Recipe | None = None) -> EmitContext:
    m, train, topo = build_job(model, "dgx-h100", gpus, None, 4096, 256, "bf16")
    planned = plan_job(m, train, topo, SearchConfig(top_k=1, fixed=fixed, recipe=recipe or Recipe()), None,
                       with_rank_table=False)
    return EmitContext.of(planned.plans[0], topo, planned.gpu_of_rank[0], m, train)


def _args(ctx: EmitContext) -> list[str]:
    line = next(x for x in megatron.render(ctx)[0].splitlines() if x.startswith("PLACEMENT_ARGS=("))
    return shlex.split(line[len("PLACEMENT_ARGS=("):-1])


def _value(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


@pytest.mark.parametrize(("model", "gpus", "fixed", "recipe", "expect"), [
    # 36 layers + embedding + loss = 38 units over pp 4: Megatron's accounting flags need 38 % 4 == 0
    ("gpt-oss-120b", 64, {"tp": 1, "pp": 4, "vpp": 1, "ep": 8}, Recipe(account_for_embedding=True,
                                                                        account_for_loss=True), "layout"),
    # 80 + 2 = 82 units over pp 2: the flags Megatron takes
    ("llama3-70b", 64, {"tp": 8, "pp": 2, "vpp": 1}, Recipe(account_for_embedding=True, account_for_loss=True),
     "account"),
    # 126 layers over pp 16 x vpp 2: uneven, interleaved (Megatron refuses first/last flags with interleaving)
    ("llama3-405b", 1024, {"tp": 8, "pp": 16, "vpp": 2}, None, "layout"),
    # uneven without interleaving: the first/last flags
    ("llama3-405b", 1024, {"tp": 8, "pp": 16, "vpp": 1}, None, "first-last"),
    # even: no flag at all
    ("llama3-8b", 16, {"tp": 2, "pp": 4, "vpp": 2}, None, "even"),
])
def test_the_megatron_split_arguments_give_the_priced_split(model, gpus, fixed, recipe, expect):
    ctx = _ctx(model, gpus, fixed, recipe)
    lay, r = ctx.plan.layout, ctx.recipe
    priced = rank_layer_counts(ctx.num_layers, lay.pp, lay.vpp, r.pipeline_layout, r.account_for_embedding,
                               r.account_for_loss, r.mtp_layers)
    assert lay.rank_layers == priced  # the plan reports the split it priced (the candidate's own recipe)
    args = _args(ctx)
    text = _value(args, "--pipeline-model-parallel-layout")
    if expect == "layout":
        assert text is not None and "--num-virtual-stages-per-pipeline-rank" not in args
        assert "--decoder-first-pipeline-num-layers" not in args
        assert not {"--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"} & set(args)
        stages = parse_layout(text, lay.pp, lay.vpp, ctx.num_layers, r.mtp_layers)
        assert [sum(s.count("t") for s in stages[p::lay.pp]) for p in range(lay.pp)] == priced
    elif expect == "account":
        assert text is None and {"--account-for-embedding-in-pipeline-split",
                                 "--account-for-loss-in-pipeline-split"} <= set(args)
    elif expect == "first-last":
        assert text is None
        assert [int(_value(args, "--decoder-first-pipeline-num-layers")),
                int(_value(args, "--decoder-last-pipeline-num-layers"))] == [priced[0], priced[-1]]
    elif expect == "even":
        assert text is None and "--decoder-first-pipeline-num-layers" not in args
        assert len(set(priced)) == 1 and _value(args, "--num-virtual-stages-per-pipeline-rank") == str(lay.vpp)


@pytest.mark.parametrize(("flag", "kept"), [("--account-for-embedding", "account_for_embedding"),
                                            ("--account-for-loss", "account_for_loss")])
def test_one_accounting_flag_is_priced_and_reported_as_given(flag, kept):
    """Only the embedding (or only the loss) counted as a layer: the split priced, the recipe reported and the
    Megatron file all keep that one flag (the policy code used to collapse both into "both")."""
    import json

    from click.testing import CliRunner

    from placement.cli import main

    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "24", "--tp", "2", "--pp", "3",
                                       flag, "--json"])
    assert result.exit_code in (0, 1), result.output
    plan = json.loads(result.stdout)
    other = ({"account_for_embedding", "account_for_loss"} - {kept}).pop()
    assert plan["recipe"][kept] is True and plan["recipe"][other] is False
    embedding, loss = kept == "account_for_embedding", kept == "account_for_loss"
    assert plan["layout"]["rank_layers"] == rank_layer_counts(32, 3, 1, None, embedding, loss)
    assert plan["layout"]["rank_layers"] != rank_layer_counts(32, 3, 1, None, True, True)


@pytest.mark.parametrize(("model", "gpus", "fixed", "norms"), [
    ("deepseek-v2", 64, {"tp": 1, "pp": 4, "vpp": 1, "ep": 8}, True),  # MLA: its latent norms
    ("qwen3-30b-a3b", 16, {"tp": 1, "pp": 2, "vpp": 1, "ep": 8}, True),  # per-head q/k norms
    ("llama3-8b", 16, {"tp": 2, "pp": 2, "vpp": 1}, False),
])
def test_models_with_query_key_norms_get_qk_layernorm(model, gpus, fixed, norms):
    """A user trial: DeepSeek-V3's Megatron file had --multi-latent-attention but no --qk-layernorm, under which
    Megatron builds the query and key-value up-projections without DeepSeek's q_a_layernorm and kv_a_layernorm
    (core_v0.19.0 gpt_layer_specs.py:244-256): another model than the checkpoint's."""
    args = _args(_ctx(model, gpus, fixed))
    assert ("--qk-layernorm" in args) == norms


@pytest.mark.parametrize(("model", "gpus", "fixed", "eps"), [
    ("deepseek-v2", 64, {"tp": 1, "pp": 4, "vpp": 1, "ep": 8}, "1e-06"),
    ("llama3-8b", 16, {"tp": 2, "pp": 2, "vpp": 1}, "1e-05"),
    ("gpt3-175b", 64, {"tp": 8, "pp": 8, "vpp": 1}, None),  # the model file states none
])
def test_the_norm_epsilon_is_the_models_or_said_to_be_megatrons(model, gpus, fixed, eps):
    """The same trial: DeepSeek-V3's rms_norm_eps 1e-6 was left to Megatron's --norm-epsilon default 1e-5, unsaid."""
    ctx = _ctx(model, gpus, fixed)
    assert _value(_args(ctx), "--norm-epsilon") == eps
    _, unstated = megatron.model_arguments(ctx)
    assert any(u.startswith("--norm-epsilon") for u in unstated) == (eps is None)
