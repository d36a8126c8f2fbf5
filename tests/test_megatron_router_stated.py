"""An MoE model's megatron.sh trains the router the model has: its score function, raw or renormalized top-k weights,
expert bias and top-k scaling, read from the model file (HF `scoring_func`, `norm_topk_prob`, `topk_method`,
`routed_scaling_factor`; the catalog YAMLs state them).  What the model file does not state is named as the user's to
add, since Megatron-LM's defaults (softmax, renormalized after the top-k, no bias, no scaling) train another router
than DeepSeek-V3's (sigmoid with an expert bias, scaled 2.5): a user trial read the file as complete, and another found
the config's own values missing from it."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from placement.catalog import load_model
from placement.cli import main
from placement.emit.megatron import router_arguments
from placement.specs.model import MoESpec

HF = Path(__file__).parent / "data" / "hf"


def _megatron_sh(tmp_path: Path, model: str) -> tuple[list[str], str]:
    out = CliRunner().invoke(main, ["plan", "--model", model, "--gpus", "16", "--seq-len", "4096", "--global-batch",
                                    "64", "--framework", "megatron", "--emit", "megatron", "--out", str(tmp_path)])
    assert out.exit_code == 0, out.output
    text = (tmp_path / "megatron.sh").read_text()
    line = next(line for line in text.splitlines() if line.startswith("PLACEMENT_ARGS=("))
    args = shlex.split(line[len("PLACEMENT_ARGS=("):-1])
    yours = next(line for line in text.splitlines() if line.startswith("# yours to add"))
    return args, yours


def test_a_deepseek_v2_config_trains_its_raw_softmax_weights(tmp_path: Path) -> None:
    # DeepSeek-V2-Lite: scoring_func softmax, norm_topk_prob false -> Megatron's softmax before the top-k
    args, yours = _megatron_sh(tmp_path, str(HF / "deepseek-v2-lite"))
    assert "--moe-router-pre-softmax" in args and "--moe-router-score-function" not in args
    assert "--moe-router-enable-expert-bias" not in args and "--moe-router-topk-scaling-factor" not in args
    assert "router" not in yours


@pytest.mark.parametrize(("model", "named"), [("qwen3-30b-a3b", False), ("llama3-8b", False)])
def test_a_stated_router_is_not_left_to_the_user(tmp_path: Path, model: str, named: bool) -> None:
    _, yours = _megatron_sh(tmp_path, model)
    assert ("--moe-router-score-function" in yours) == named


def test_a_model_file_without_router_fields_names_them_as_the_users(tmp_path: Path) -> None:
    data = yaml.safe_load((Path(__file__).parents[1] / "models" / "qwen3-30b-a3b.yaml").read_text())
    data["moe"] = {k: v for k, v in data["moe"].items() if not k.startswith("router_")}
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump(data))
    args, yours = _megatron_sh(tmp_path / "out", str(path))
    assert "--moe-router-pre-softmax" not in args
    for flag in ("--moe-router-score-function", "--moe-router-pre-softmax", "--moe-router-enable-expert-bias",
                 "--moe-router-topk-scaling-factor"):
        assert flag in yours


def test_deepseek_v3s_router_is_written_as_megatron_spells_it() -> None:
    args, unstated = router_arguments(load_model("deepseek-v3").moe)
    assert args == ["--moe-router-score-function", "sigmoid", "--moe-router-enable-expert-bias",
                    "--moe-router-topk-scaling-factor", "2.5"]
    assert unstated == []


@pytest.mark.parametrize(("router", "flags", "said"), [
    # top-1 under a softmax after the top-k is refused by Megatron-Core: the softmax goes before it, and a model that
    # renormalizes (weight 1 always) is told its weights differ
    (dict(router_score_function="softmax", router_topk_normalized=True, top_k=1), ["--moe-router-pre-softmax"],
     "renormalized top-1 weights"),
    # Megatron-Core's sigmoid router always renormalizes the top-k
    (dict(router_score_function="sigmoid", router_topk_normalized=False), ["--moe-router-score-function", "sigmoid"],
     "raw sigmoid top-k weights"),
    # an expert bias needs the sigmoid score in Megatron-Core
    (dict(router_score_function="softmax", router_topk_normalized=True, router_expert_bias=True),
     ["--moe-router-enable-expert-bias"], "the expert bias under a softmax score"),
])
def test_what_megatron_cannot_run_is_said(router: dict, flags: list[str], said: str) -> None:
    moe = MoESpec(num_experts=8, expert_ffn_hidden_size=64, **({"top_k": 2, "router_expert_bias": False,
                                                                "router_topk_scaling_factor": 1.0} | router))
    args, unstated = router_arguments(moe)
    assert args == flags
    assert [u for u in unstated if said in u]
