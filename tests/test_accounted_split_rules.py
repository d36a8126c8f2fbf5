"""The pipeline rules take a layout one of the allowed default splits can place: Megatron-Core's split with the
embedding and loss counted as a layer each (--account-for-embedding/loss-in-pipeline-split) puts 94 + 2 = 96 units on
pp 2 as 48 per rank, which 8 virtual stages divide (transformer_config.py asserts exactly that), where the plain split
(47 per rank) cannot.  A user trial found `plan` never searching it and evaluate refusing it."""

from __future__ import annotations

import json

from click.testing import CliRunner

from placement.catalog import load_model
from placement.cost import rules
from placement.specs import Layout, TrainingSpec
from placement.specs.recipe import Recipe

JOB = ["--model", "qwen3-235b-a22b", "--cluster", "dgx-h100", "--gpus", "256", "--seq-len", "4096",
       "--global-batch", "2048", "--precision", "fp8"]
LAY = Layout(tp=2, ep=32, pp=2, vpp=8, dp=64, micro_batch_size=1, sequence_parallel=True)


def test_the_accounted_split_admits_what_the_plain_one_cannot() -> None:
    model, train = load_model("qwen3-235b-a22b"), TrainingSpec(seq_len=4096, global_batch=2048)
    plain = rules.layout_error(model, train, LAY, Recipe())
    assert plain is not None and "--account-for-embedding --account-for-loss: 96 units, 48" in plain
    assert rules.layout_error(model, train, LAY, Recipe(account_for_embedding=True, account_for_loss=True)) is None
    # the search, which may choose either split, admits it
    facts = rules.Facts.of(model, train, Recipe(), open_units=(2,))
    cols = rules._one(rules.layout_values(LAY))
    assert bool(rules.holds(facts, cols)[0])
    assert not bool(rules.holds(rules.Facts.of(model, train, Recipe()), cols)[0])


def test_evaluate_prices_it_and_plan_can_choose_it() -> None:
    from placement.cli import main

    got = CliRunner().invoke(main, ["evaluate", *JOB, "--tp", "2", "--ep", "32", "--pp", "2", "--vpp", "8",
                                    "--mbs", "1", "--account-for-embedding", "--account-for-loss", "--json"])
    assert got.exit_code in (0, 1), got.output
    assert json.loads(got.stdout)["layout"]["stage_layers"][0] == 47
    plans = json.loads(CliRunner().invoke(main, ["plan", *JOB, "--framework", "megatron", "--top-k", "3",
                                                 "--json"]).stdout)["plans"]
    # qwen3-235b's 94 layers: the best pipelines split them with the embedding and loss accounted
    assert any(p["recipe"]["account_for_embedding"] and p["layout"]["pp"] == 2 for p in plans)
