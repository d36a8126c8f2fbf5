"""The recipe on the command line: --recipe FILE and the recipe flags reach the PLAN JSON with their
sources, bad input exits 2 naming the field, `plan` searches the choices left open, `evaluate` prices a
pinned recipe, the Megatron file carries it and `audit` reads it back (speed-up 1.00)."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main

DENSE = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096",
         "--global-batch", "64"]
MOE = ["--model", "qwen3-30b-a3b", "--cluster", "gb200-nvl72", "--gpus", "64"]
DSV3 = ["--model", "deepseek-v3", "--cluster", "gb200-nvl72", "--gpus", "256", "--segment", "8", "--seq-len", "4096",
        "--global-batch", "2048", "--precision", "fp8", "--tp", "1", "--pp", "8", "--vpp", "4", "--ep", "32",
        "--recompute", "selective", "--recompute-modules", "mlp,mla_up_proj", "--pipeline-layout", "Et|(tt|)*30L"]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--reproducible", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def plan_json(*args: str) -> dict:
    code, out, err = run("plan", *args, "--json", "--top-k", "1")
    assert code == 0, err
    return json.loads(out)["plans"][0]


def test_flags_and_file_reach_the_plan_json_with_their_sources(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("cuda_graphs: full\ncross_entropy_fusion: true\noptimizer_state_bf16: true\n")
    p = plan_json(*DENSE, "--recipe", str(recipe), "--cuda-graphs", "partial", "--no-tp-comm-overlap")
    r, src = p["recipe"], p["recipe_sources"]
    assert r["cuda_graphs"] == "partial" and src["cuda_graphs"] == "flag"  # the flag wins over the file
    assert r["tp_comm_overlap"] is False and src["tp_comm_overlap"] == "flag"
    assert r["cross_entropy_fusion"] is True and src["cross_entropy_fusion"] == f"file:{recipe}"
    assert r["optimizer_state_bf16"] is True and src["optimizer_state_bf16"] == f"file:{recipe}"
    assert src["recompute_modules"] == "searched"
    assert src["moe_dispatcher"] == "default"  # a dense model has no dispatcher to choose
    assert src["delay_wgrad"] == "default"
    assert set(r) == set(src)  # every recipe field, each with its source


def test_recompute_modules_flag_is_the_only_list_plan_tries():
    p = plan_json(*DENSE, "--recompute", "selective", "--recompute-modules", "layernorm,mlp")
    assert p["layout"]["recompute"] == "selective"
    assert sorted(p["recipe"]["recompute_modules"]) == ["layernorm", "mlp"]
    assert p["recipe_sources"]["recompute_modules"] == "flag"


@pytest.mark.parametrize("text,expected", [
    ("cuda_graphs: sometimes\n", ["field `cuda_graphs` = 'sometimes'", "'none', 'partial' or 'full'"]),
    ("dispatcher: deepep\n", ["field `dispatcher`", "not a field of this schema: remove it or correct its spelling"]),
    ("routing_imbalance: 0.5\n", ["field `routing_imbalance` = 0.5", "greater than or equal to 1"]),
    ("- cuda_graphs\n", ["a recipe is a YAML mapping of fields"]),
    ("cuda_graphs: [\n", ["malformed YAML"]),
])
def test_bad_recipe_file_exits_2_naming_field_value_and_fix(tmp_path, text, expected):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(text)
    code, out, err = run("plan", *DENSE, "--recipe", str(recipe))
    assert code == 2 and out == ""
    assert str(recipe) in err
    for part in expected:
        assert part in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("flags,expected", [
    (["--routing-imbalance", "0.5"], ["--routing-imbalance 0.5", "field `routing_imbalance` = 0.5",
                                      "greater than or equal to 1"]),
    (["--pipeline-layout", "Et|Q"], ["--pipeline-layout Et|Q", "use Megatron's symbols"]),
    (["--recompute-modules", "core_attn,attention"], ["field `recompute_modules.1` = 'attention'", "'core_attn'"]),
])
def test_bad_recipe_flag_exits_2_naming_flag_field_and_fix(flags, expected):
    code, out, err = run("evaluate", *DENSE, "--tp", "2", *flags)
    assert code == 2 and out == ""
    for part in expected:
        assert part in err, err


def test_contradictory_recipe_exits_2():
    code, _, err = run("evaluate", *DENSE, "--pp", "2", "--pipeline-layout", "Ettttttttttttttttt|ttttttttttttttttL",
                       "--account-for-loss")
    assert code == 2
    assert "give the layout alone" in err


def test_plan_of_moe_model_on_gb200_searches_the_open_choices():
    p = plan_json(*MOE)
    src = p["recipe_sources"]
    for field in ("moe_dispatcher", "cuda_graphs", "tp_comm_overlap", "ep_comm_overlap", "recompute_modules"):
        assert src[field] == "searched", field
    assert p["recipe"]["moe_dispatcher"] in ("alltoall", "hybridep")  # multi-host NVLink: HybridEP, not DeepEP
    code, out, _ = run("plan", *MOE, "--top-k", "1")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("recipe: "))
    assert f"dispatcher {p['recipe']['moe_dispatcher']} (searched)" in line


def test_plan_keeps_a_pinned_choice():
    p = plan_json(*MOE, "--moe-dispatcher", "alltoall", "--no-ep-comm-overlap")
    assert (p["recipe"]["moe_dispatcher"], p["recipe_sources"]["moe_dispatcher"]) == ("alltoall", "flag")
    assert (p["recipe"]["ep_comm_overlap"], p["recipe_sources"]["ep_comm_overlap"]) == (False, "flag")


def test_evaluate_prices_the_pinned_recipe():
    out = {}
    for graphs in ("none", "partial"):
        code, text, err = run("evaluate", *DSV3, "--cuda-graphs", graphs, "--json")
        assert code in (0, 1), err
        out[graphs] = json.loads(text)
        assert out[graphs]["recipe"]["cuda_graphs"] == graphs
        assert out[graphs]["recipe_sources"]["cuda_graphs"] == "flag"
        assert out[graphs]["recipe"]["recompute_modules"] == ["mla_up_proj", "mlp"]
        assert out[graphs]["recipe"]["pipeline_layout"] == "Et|(tt|)*30L"
    # partial graphs cut host time and hold their captured buffers
    assert out["partial"]["step_time_s"] <= out["none"]["step_time_s"]
    assert out["partial"]["memory"]["other_bytes"] > out["none"]["memory"]["other_bytes"]
    code, text, _ = run("evaluate", *DSV3, "--cuda-graphs", "partial")
    assert "cuda graphs partial" in text and "pipeline layout Et|(tt|)*30L" in text
    assert "(searched)" not in text  # evaluate searches nothing


def _megatron_args(path) -> list[str]:
    line = next(x for x in path.read_text().splitlines() if x.startswith("PLACEMENT_ARGS=("))
    return shlex.split(line[len("PLACEMENT_ARGS=("):-1])


def test_megatron_file_carries_the_recipe(tmp_path):
    code, out, err = run("plan", *MOE, "--json", "--top-k", "1", "--moe-dispatcher", "hybridep", "--cuda-graphs",
                         "partial", "--ep-comm-overlap", "--cross-entropy-fusion", "--mtp-layers", "1",
                         "--emit", "megatron", "--out", str(tmp_path))
    assert code == 0, err
    p = json.loads(out)["plans"][0]
    args = _megatron_args(tmp_path / "megatron.sh")
    text = " ".join(args)
    assert "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep" in text
    assert "--cuda-graph-impl transformer_engine --cuda-graph-modules attn moe_router moe_preprocess" in text
    assert "--overlap-moe-expert-parallel-comm" in args
    assert "--cross-entropy-loss-fusion" in args
    assert "--mtp-num-layers 1" in text
    assert "--moe-router-force-load-balancing" not in args  # a benchmark setting, never emitted
    if p["layout"]["recompute"] == "selective":
        i = args.index("--recompute-modules")
        assert args[i + 1:i + 1 + len(p["recipe"]["recompute_modules"])] == p["recipe"]["recompute_modules"]
    launch = parse_launch([tmp_path / "megatron.sh"], "megatron")
    assert launch.recipe["moe_dispatcher"] == "hybridep"
    assert launch.recipe["cuda_graphs"] == "partial"
    assert launch.recipe["ep_comm_overlap"] is True
    assert launch.recipe["mtp_layers"] == 1
    assert launch.sources["recipe.moe_dispatcher"].startswith(str(tmp_path / "megatron.sh"))


def test_other_frameworks_warn_about_what_they_cannot_run(tmp_path):
    code, out, err = run("plan", *MOE, "--json", "--top-k", "1", "--moe-dispatcher", "hybridep", "--cuda-graphs",
                         "partial", "--emit", "torchtitan,deepspeed,maxtext,devicemesh", "--out", str(tmp_path))
    # the exit code is 1 exactly where a file runs over the GPU's memory: only MaxText's could here (its fp32 weights
    # and optimizer; it fits since the routing imbalance is priced only beside expert parallelism, and MaxText keeps
    # only its named tensors)
    over = json.loads(out)["files_over_capacity"]
    assert code == (1 if over else 0) and set(over) <= {"maxtext.yml", "jax_mesh.py"}, err
    for name in ("torchtitan", "deepspeed", "maxtext", "devicemesh"):
        assert f"placement: warning: {name}: the plan is priced with the hybridep MoE dispatcher" in err, name
        assert f"placement: warning: {name}: the plan is priced with partial CUDA graphs" in err, name


def test_emitting_for_a_framework_searches_only_what_it_runs(tmp_path):
    p = json.loads(run("plan", *MOE, "--json", "--top-k", "1", "--emit", "torchtitan", "--out", str(tmp_path))[1])
    r = p["plans"][0]["recipe"]
    assert (r["moe_dispatcher"], r["cuda_graphs"], r["tp_comm_overlap"], r["ep_comm_overlap"]) == (
        "alltoall", "none", False, False)
    # torchtitan's selective recompute is its per-op policy (or the plan recomputes nothing or everything)
    assert r["recompute_modules"] in ([], ["per_op"])


@pytest.mark.parametrize("extra", [[], ["--precision", "fp8", "--cross-entropy-fusion", "--fp8-params"]])
def test_audit_of_a_moe_plan_on_gb200_reads_its_recipe_back(tmp_path, extra):
    code, out, err = run("plan", *MOE, *extra, "--json", "--top-k", "1", "--emit", "megatron", "--out", str(tmp_path))
    assert code == 0, err
    planned = json.loads(out)["plans"][0]
    code, out, err = run("audit", *MOE, "--launch", str(tmp_path / "megatron.sh"), "--hosts",
                         str(tmp_path / "hosts.txt"), "--json")
    assert code in (0, 1), err
    data = json.loads(out)
    assert data["estimate"]["step_time_s"] == planned["step_time_s"]
    assert data["speedup"] == 1.0
    assert data["changes"] == []
    got = data["estimate"]["recipe"]
    for field in ("moe_dispatcher", "cuda_graphs", "tp_comm_overlap", "ep_comm_overlap", "recompute_modules",
                  "cross_entropy_fusion", "fp8_params"):
        assert got[field] == planned["recipe"][field], field
    assert data["estimate"]["recipe_sources"]["moe_dispatcher"].startswith("launch:")


def test_audit_round_trip_of_a_pipeline_layout_plan(tmp_path):
    job = ["--model", "deepseek-v3", "--cluster", "gb200-nvl72", "--gpus", "256", "--segment", "8", "--seq-len", "4096",
           "--global-batch", "2048", "--precision", "fp8"]
    code, out, err = run("plan", *job, "--pipeline-layout", "Et|(tt|)*30L", "--json", "--top-k", "1", "--emit",
                         "megatron", "--out", str(tmp_path))
    assert code == 0, err
    planned = json.loads(out)["plans"][0]
    assert planned["layout"]["pp"] * planned["layout"]["vpp"] == 32  # the layout's 32 virtual stages
    assert "'Et|(tt|)*30L'" in (tmp_path / "megatron.sh").read_text()  # quoted for bash
    code, out, err = run("audit", *job, "--launch", str(tmp_path / "megatron.sh"), "--hosts",
                         str(tmp_path / "hosts.txt"), "--json")
    data = json.loads(out)
    assert data["estimate"]["recipe"]["pipeline_layout"] == "Et|(tt|)*30L"
    assert data["estimate"]["step_time_s"] == planned["step_time_s"]
    assert data["speedup"] == 1.0 and data["changes"] == []


def test_unfused_attention_is_emitted_and_read_back_by_the_audit(tmp_path):
    job = ["--model", "gpt3-175b", "--cluster", "dgx-a100-80g", "--gpus", "1024", "--seq-len", "2048",
           "--global-batch", "1536", "--attention-kernel", "unfused"]
    code, out, err = run("plan", *job, "--json", "--top-k", "1", "--emit", "megatron", "--out", str(tmp_path))
    assert code == 0, err
    planned = json.loads(out)["plans"][0]
    assert planned["recipe"]["attention_kernel"] == "unfused"
    assert planned["recipe_sources"]["attention_kernel"] == "flag"
    assert "--attention-backend unfused" in (tmp_path / "megatron.sh").read_text()
    code, out, err = run("audit", *job[:-2], "--launch", str(tmp_path / "megatron.sh"), "--hosts",
                         str(tmp_path / "hosts.txt"), "--json")
    data = json.loads(out)
    assert data["estimate"]["recipe"]["attention_kernel"] == "unfused"
    assert data["estimate"]["step_time_s"] == planned["step_time_s"]


def test_fp8_activation_input_store_is_warned_in_megatron_files_it_cannot_state(tmp_path):
    """Megatron-LM 0.19.2 has no argument for it (tests/verify checks the parser refuses the fork's flag): the file
    says so instead of writing an argument the launch would reject."""
    code, _, err = run("plan", *MOE, "--precision", "fp8", "--activation-fp8-input-store", "--json", "--top-k", "1",
                         "--emit", "megatron", "--out", str(tmp_path))
    assert code == 0, err
    text = (tmp_path / "megatron.sh").read_text()
    assert "--activation-func-fp8-input-store" not in text.split("PLACEMENT_ARGS=(")[1]
    assert "activation_func_fp8_input_store has no Megatron-LM 0.19.2 argument" in text


def test_a_megatron_file_without_the_fp8_activation_store_prices_the_bf16_input_it_keeps(tmp_path):
    """What the file cannot state it runs at Megatron's default (the activation's input kept in BF16): its header
    prices that memory, and the audit of the file agrees with the header, not with the plan."""
    job = ["--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096",
           "--global-batch", "64", "--precision", "fp8"]
    code, out, err = run("evaluate", *job, "--ep", "8", "--activation-fp8-input-store", "--json", "--emit",
                         "megatron", "--out", str(tmp_path))
    assert code == 0, err
    planned = json.loads(out)
    text = (tmp_path / "megatron.sh").read_text()
    runs = re.search(r"^# this file runs (.*?): [\d.]+ s/step .*?, ([\d.]+) of [\d.]+ GiB per GPU", text, re.M)
    assert runs is not None and runs.group(1) == "activation_func_fp8_input_store False (not True)"
    assert float(runs.group(2)) > planned["peak_memory_bytes"] / 2**30 + 1  # the up-projection outputs kept 16-bit
    code, out, err = run("audit", *job, "--launch", str(tmp_path / "megatron.sh"), "--hosts",
                         str(tmp_path / "hosts.txt"), "--json")
    assert code in (0, 1), err
    assert json.loads(out)["estimate"]["peak_memory_bytes"] / 2**30 == pytest.approx(float(runs.group(2)), abs=0.05)


@pytest.mark.parametrize("argv", [
    ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--tp", "2", "--recompute-modules", "mlp"],
    ["plan", "--model", "llama3-8b", "--gpus", "8", "--recompute", "none", "--recompute-modules", "mlp"],
])
def test_recompute_modules_without_selective_recompute_is_a_conflict(argv):
    code, _, err = run(*argv)
    assert code == 2 and "--recompute-modules mlp names what selective recompute reruns" in err


@pytest.mark.parametrize("command", [["plan", "--top-k", "1"], ["evaluate", "--tp", "1", "--pp", "1"]])
def test_a_framework_and_out_write_that_frameworks_files(tmp_path, command):
    """A user trial: `plan --framework megatron --out DIR` wrote the host files and launch.sbatch but no megatron.sh,
    and said nothing; --framework with --out and no --emit now writes the framework's files, and says so."""
    code, _, err = run(*command, *DENSE, "--framework", "megatron", "--out", str(tmp_path / "a"))
    assert code == 0, err
    assert (tmp_path / "a" / "megatron.sh").exists() and "writing megatron's files too" in err
    code, _, err = run(*command, *DENSE, "--framework", "megatron", "--out", str(tmp_path / "b"), "--emit",
                       "devicemesh")
    assert code == 0, err
    assert not (tmp_path / "b" / "megatron.sh").exists() and "writing megatron's files" not in err
