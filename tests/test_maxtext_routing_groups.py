"""DeepSeek-V3 routes each token to experts of 4 of 8 groups (models/deepseek-v3.yaml, as its Megatron file's
--moe-router-num-groups 8 --moe-router-group-topk 4); MaxText 0.2.5 does so only with n_routing_groups and
topk_routing_group set, which base.yml disables (-1) and configs/models/deepseek3-671b.yml leaves alone (a QA run:
the emitted maxtext.yml set neither, so MaxText routed over all 256 experts)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from placement.emit import maxtext
from tests.maxtext_wheel import wheel_config, wheel_text
from tests.verify.helpers import planned


@pytest.fixture(scope="module")
def deepseek():
    return planned("deepseek-v3-2048-moe")


def test_maxtext_yml_routes_deepseek_v3_over_4_of_8_groups(deepseek) -> None:
    ctx, model = deepseek
    text, warnings, _ = maxtext.render(ctx)
    cfg = yaml.safe_load(text)
    assert cfg["model_name"] == "deepseek3-671b"
    assert (cfg["n_routing_groups"], cfg["topk_routing_group"]) == (model.moe.num_expert_groups,
                                                                     model.moe.groups_per_token) == (8, 4)
    assert "# n_routing_groups 8, topk_routing_group 4: the model's group-limited routing" in text
    assert not any("groups" in w for w in warnings)


def test_the_model_config_leaves_the_keys_to_maxtext_yml() -> None:
    """MaxText merges the model config over maxtext.yml (configs/pyconfig.py:521): the keys hold only because no
    named config sets them, and base.yml's -1 is what the QA run's file trained."""
    for name, _ in maxtext.MODELS.values():
        cfg = wheel_config(name)
        assert "n_routing_groups" not in cfg and "topk_routing_group" not in cfg, name
    base = yaml.safe_load(wheel_text("configs/base.yml"))
    assert (base["n_routing_groups"], base["topk_routing_group"]) == (-1, -1)


def test_a_model_name_maxtext_routes_without_groups_is_warned(deepseek) -> None:
    """MaxText limits routing to groups only under model_names deepseek3*, deepseek4*, kimi-k2* (layers/moe.py:1321):
    DeepSeek-V2's 3 of 8 groups under deepseek2-236b are warned, and no key is written that would do nothing."""
    ctx, _ = deepseek
    from placement.catalog import load_model

    v2 = load_model("deepseek-v2")
    text, warnings, _ = maxtext.render(dataclasses.replace(ctx, model_name="deepseek-v2", model=v2))
    cfg = yaml.safe_load(text)
    assert cfg["model_name"] == "deepseek2-236b" and "n_routing_groups" not in cfg
    assert any(w.startswith("the model routes each token to experts of 3 of 8 groups, but MaxText 0.2.5 limits "
                            "routing to groups only for model_names starting deepseek3, deepseek4, kimi-k2 "
                            "(layers/moe.py:1321; model_name deepseek2-236b takes the top 6 of all 160 experts")
               for w in warnings)
