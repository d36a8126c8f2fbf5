"""megatron-core's own RankGenerator, fed the emitted degrees, gives exactly the planned TP, CP, DP, PP
and expert groups (every group of every kind)."""

from __future__ import annotations

import shlex

import pytest
from megatron.core.parallel_state import RankGenerator

from placement.emit import megatron
from tests.verify.helpers import CASES, group_of, plan_context, planned


def emitted_args(ctx) -> dict[str, str]:
    text, _ = megatron.render(ctx)
    line = next(x for x in text.splitlines() if x.startswith("PLACEMENT_ARGS=("))
    tokens = shlex.split(line[len("PLACEMENT_ARGS=("):-1])
    out, i = {}, 0
    while i < len(tokens):
        if i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            out[tokens[i]] = tokens[i + 1]
            i += 2
        else:
            out[tokens[i]] = ""
            i += 1
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_megatron_rank_generator_gives_the_planned_groups(case):
    ctx, _ = planned(case)
    a = emitted_args(ctx)
    world = ctx.plan.num_gpus
    tp, pp, cp = (int(a[f"--{k}"]) for k in ("tensor-model-parallel-size", "pipeline-model-parallel-size",
                                              "context-parallel-size"))
    dp = world // (tp * pp * cp)
    dense = RankGenerator(tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order="tp-cp-ep-dp-pp")
    for token, axes in (("tp", ("tp",)), ("cp", ("cp",)), ("dp", ("dp",)), ("pp", ("pp",)), ("dp-cp", ("dp", "cp"))):
        for group in dense.get_ranks(token):
            assert sorted(group) == group_of(ctx, group[0], axes), (case, token)
    if "--expert-model-parallel-size" in a:
        ep, etp = int(a["--expert-model-parallel-size"]), int(a["--expert-tensor-parallel-size"])
        expert = RankGenerator(tp=etp, ep=ep, dp=world // (etp * ep * pp), pp=pp, cp=1, order="tp-cp-ep-dp-pp")
        for token, axes in (("ep", ("ep",)), ("tp", ("etp",)), ("dp", ("edp",))):
            for group in expert.get_ranks(token):
                assert sorted(group) == group_of(ctx, group[0], axes), (case, "expert " + token)
        assert expert.get_ranks("pp") == dense.get_ranks("pp")  # Megatron asserts the two generators agree
    text, _ = megatron.render(ctx)
    fsdp = ctx.plan.layout.zero_stage in (2, 3)  # Megatron-FSDP refuses CUDA_DEVICE_MAX_CONNECTIONS=1
    # the A2A overlap wants more connections, and Blackwell has no requirement (emit.megatron.max_connections)
    more = ctx.topo.accelerator.mxfp8 or (ctx.moe and ctx.recipe.ep_comm_overlap)
    assert ("export CUDA_DEVICE_MAX_CONNECTIONS=1\n" in text) == ((tp > 1 or cp > 1) and not fsdp and not more)


def model_args(model) -> list[str]:
    """What stays the user's: data and tokenizer (the emitted file carries the whole architecture)."""
    return ["--tokenizer-type", "NullTokenizer", "--vocab-size", str(model.vocab_size), "--mock-data"]


@pytest.mark.parametrize("case", list(CASES))
def test_megatron_validate_args_accepts_the_emitted_arguments(case, tmp_path):
    import subprocess
    import sys

    ctx, model = planned(case)
    text, _ = megatron.render(ctx)
    path = tmp_path / "megatron.sh"
    path.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "tests.verify.megatron_validate", str(ctx.plan.num_gpus), str(path),
                           *model_args(model)], capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lay = ctx.plan.layout
    valid = next(x for x in proc.stdout.splitlines() if x.startswith("VALID")).split()[1:]
    vpp = None if lay.vpp == 1 else lay.vpp
    assert valid == [str(lay.tp), str(lay.pp), str(lay.cp), str(lay.dp), str(vpp),
                     str(lay.ep if ctx.moe else 1)]
    assert "PRECISION torch.bfloat16 None" in proc.stdout  # BF16 weights, not Megatron's FP32 default


def test_megatron_takes_an_fp8_plan_as_bf16_weights_with_fp8_gemms(tmp_path):
    import subprocess
    import sys

    ctx, model = plan_context("llama3-70b", "dgx-h100", 1024, 8192, 512, {"tp": 8, "pp": 4, "cp": 1},
                              precision="fp8")
    path = tmp_path / "megatron.sh"
    path.write_text(megatron.render(ctx)[0])
    proc = subprocess.run([sys.executable, "-m", "tests.verify.megatron_validate", str(ctx.plan.num_gpus), str(path),
                           *model_args(model)], capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "PRECISION torch.bfloat16 e4m3" in proc.stdout


# -- the recipe: Megatron-Core's own parser and validate_args accept the recipe arguments the emitter writes --

RECIPE_CASE = ("deepseek-v3", "hgx-h800", 2048, 4096, 2048,
               {"tp": 2, "pp": 8, "vpp": 4, "ep": 16, "etp": 1, "recompute": "selective"})


def recipe_context():
    from placement.catalog import load_accelerator, load_cluster, load_model
    from placement.emit.common import EmitContext
    from placement.planner import plan_job
    from placement.search import SearchConfig
    from placement.specs import TrainingSpec
    from placement.specs.recipe import Recipe
    from placement.topology import Topology

    name, cluster_name, gpus, seq, gbs, fixed = RECIPE_CASE
    cluster = load_cluster(cluster_name)
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=gpus)
    model = load_model(name)
    recipe = Recipe(moe_dispatcher="deepep", cuda_graphs="partial", ep_comm_overlap=True, mtp_layers=1,
                    cross_entropy_fusion=True, recompute_modules=("mla_up_proj", "moe_act"),
                    pipeline_layout="Et|(tt|)*30mL", activation_func_fp8_input_store=True)
    train = TrainingSpec(seq_len=seq, global_batch=gbs)
    result = plan_job(model, train, topo, SearchConfig(top_k=1, fixed=fixed, recipe=recipe), None,
                      with_rank_table=False)
    return EmitContext.of(result.plans[0], topo, result.gpu_of_rank[0], model, train), model


def test_megatron_validate_args_accepts_the_recipe_arguments(tmp_path):
    import subprocess
    import sys

    ctx, model = recipe_context()
    text, _ = megatron.render(ctx)
    a = emitted_args(ctx)
    assert a["--moe-token-dispatcher-type"] == "flex" and a["--moe-flex-dispatcher-backend"] == "deepep"
    assert a["--cuda-graph-impl"] == "transformer_engine"
    assert "--overlap-moe-expert-parallel-comm" in a and a["--mtp-num-layers"] == "1"
    assert "--activation-func-fp8-input-store" not in a  # not an argument of megatron-core 0.19.2's parser
    path = tmp_path / "megatron.sh"
    path.write_text(text)
    extra = ["--multi-latent-attention"] if model.mla is not None else []
    proc = subprocess.run([sys.executable, "-m", "tests.verify.megatron_validate", str(ctx.plan.num_gpus), str(path),
                           *model_args(model), *extra], capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize("name", ["deepseek-v3", "gpt-oss-120b", "qwen3-30b-a3b", "llama3-8b", "gpt3-175b",
                                  "gpt-neox-20b"])
def test_megatron_builds_the_catalog_architecture_from_the_emitted_arguments(name, tmp_path):
    """The emitted arguments alone (plus data and tokenizer) give Megatron the catalog model: its parsed
    hidden size, heads, query groups, FFN, experts, MLA ranks, norm and position embedding."""
    import subprocess
    import sys

    gpus = {"deepseek-v3": 1024, "gpt-oss-120b": 64, "qwen3-30b-a3b": 64, "llama3-8b": 8, "gpt3-175b": 1024,
            "gpt-neox-20b": 64}[name]
    ctx, model = plan_context(name, "dgx-h100", gpus, 4096, 1024, {})
    path = tmp_path / "megatron.sh"
    path.write_text(megatron.render(ctx)[0])
    proc = subprocess.run([sys.executable, "-m", "tests.verify.megatron_validate", str(ctx.plan.num_gpus), str(path),
                           *model_args(model), "--print-model"], capture_output=True, text=True, check=False,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = dict(x.split("=", 1) for x in next(x for x in proc.stdout.splitlines() if x.startswith("MODEL")).split()[1:])
    assert int(got["hidden_size"]) == model.hidden_size and int(got["num_attention_heads"]) == model.num_attention_heads
    if (model.num_kv_heads or model.num_attention_heads) != model.num_attention_heads:  # GQA
        assert int(got["num_query_groups"]) == model.num_kv_heads
    assert got["normalization"] == {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}[model.normalization.value]
    assert int(got["ffn_hidden_size"]) == model.ffn_hidden_size
    if model.moe is not None:
        assert int(got["num_experts"]) == model.moe.num_experts and int(got["moe_router_topk"]) == model.moe.top_k
        assert int(got["moe_ffn_hidden_size"]) == model.moe.expert_ffn_hidden_size
        # the router as the catalog states it (every catalog MoE model does): score, raw or renormalized weights,
        # expert bias, scaling (Megatron-Core's sigmoid router always renormalizes)
        e = model.moe
        assert got["moe_router_score_function"] == e.router_score_function
        if e.router_score_function == "softmax":
            assert got["moe_router_pre_softmax"] == str(not e.router_topk_normalized)
        assert got["moe_router_enable_expert_bias"] == str(e.router_expert_bias)
        assert float(got["moe_router_topk_scaling_factor"] if got["moe_router_topk_scaling_factor"] != "None"
                     else 1.0) == e.router_topk_scaling_factor
    if model.mla is not None:
        assert got["multi_latent_attention"] == "True" and int(got["kv_lora_rank"]) == model.mla.kv_lora_rank
    assert got["position_embedding_type"] == ("yarn" if model.rope_scaling == "yarn" else {
        "rope": "rope", "learned": "learned_absolute"}[model.position_embedding.value])
    if model.position_embedding == "rope":  # GPT-NeoX rotates a quarter of each head
        assert float(got["rotary_percent"]) == (model.rotary_percent or 1.0)
        assert int(got["rotary_base"]) == round(model.rope_base)


@pytest.mark.parametrize("spec", [
    ("llama3-405b", "dgx-h100", 1024, 4096, 512, {"tp": 8, "pp": 16, "vpp": 2}),  # uneven and interleaved
    ("llama3-405b", "dgx-h100", 1024, 4096, 512, {"tp": 8, "pp": 16, "vpp": 1}),  # uneven: first/last flags
], ids=["405b-pp16x2-layout", "405b-pp16-first-last"])
def test_megatron_takes_the_split_arguments_the_plan_needs(spec, tmp_path):
    """Splits Megatron's flags cannot give (uneven with interleaving) go as an explicit layout, which
    validate_args accepts; the virtual stages it derives are the plan's."""
    import subprocess
    import sys

    ctx, model = plan_context(*spec)
    path = tmp_path / "megatron.sh"
    path.write_text(megatron.render(ctx)[0])
    proc = subprocess.run([sys.executable, "-m", "tests.verify.megatron_validate", str(ctx.plan.num_gpus), str(path),
                           *model_args(model)], capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    valid = next(x for x in proc.stdout.splitlines() if x.startswith("VALID")).split()[1:]
    assert valid[1] == str(ctx.plan.layout.pp)
    assert valid[4] == (str(ctx.plan.layout.vpp) if ctx.plan.layout.vpp > 1 else "None")
