"""`placement audit`: a job's own launch files in, its cost, findings, the best plan and the diff out."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.core import SEVERITIES, read_host_order
from placement.cli import main
from placement.errors import InputError

DATA = Path(__file__).parent / "data"
AUDIT = DATA / "audit"
KINDS_WITH_GROUPS = ("tp_crosses", "cp_crosses", "ep_crosses", "ep_alltoall")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--reproducible", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def audit_json(*args: str, expect: tuple[int, ...] = (0, 1)) -> dict:
    code, out, err = run("audit", *args, "--json")
    assert code in expect, err
    assert "Traceback" not in err
    return json.loads(out)


def worst(data: dict) -> int:
    return max((SEVERITIES.index(f["severity"]) for f in data["findings"]), default=-1)


# -- a plan placement made, audited from the files it wrote: nothing to fix ---------------------------

@pytest.mark.parametrize("framework,filename", [("megatron", "megatron.sh"), ("torchtitan", "torchtitan.sh")])
@pytest.mark.parametrize("model,gpus,seq,gbs", [("llama3-70b", 1024, 8192, 512), ("mixtral-8x7b", 256, 4096, 1024)])
def test_audit_of_a_placement_plan_finds_nothing_to_fix(tmp_path, framework, filename, model, gpus, seq, gbs):
    job = ["--model", model, "--cluster", "dgx-h100", "--gpus", str(gpus), "--seq-len", str(seq),
           "--global-batch", str(gbs)]
    # the plan is made in the framework's own space, as the audit's best plan is (torchtitan: no ZeRO-1, and
    # gradients reduced in fp32)
    code, out, err = run("plan", *job, "--framework", framework, "--json", "--top-k", "1", "--emit", framework,
                         "--out", str(tmp_path))
    assert code == 0, err
    planned = json.loads(out)["plans"][0]
    if framework == "torchtitan" and planned["layout"]["etp"] != 1:
        pytest.skip("torchtitan has no expert TP; the plan is not expressible there")
    data = audit_json("--launch", str(tmp_path / filename), "--hosts", str(tmp_path / "hosts.txt"), *job)
    assert data["layout"]["framework"] == framework
    for key in ("tp", "cp", "ep", "pp", "vpp", "dp", "micro_batch_size", "zero_stage", "recompute"):
        assert data["estimate"]["layout"][key] == planned["layout"][key], key
    assert data["estimate"]["step_time_s"] == planned["step_time_s"]
    assert data["speedup"] == 1.0
    assert worst(data) <= SEVERITIES.index("info"), data["findings"]
    assert data["changes"] == []


def test_audit_of_a_mapped_plan_on_a_real_allocation_keeps_its_host_order(tmp_path):
    hosts = tmp_path / "nodes.txt"
    hosts.write_text("gpu[0001-0008]\ngpu[0041-0048]\ngpu[0103-0110]\n")
    job = ["--model", "mixtral-8x7b", "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"),
           "--nodelist", f"@{hosts}", "--node-type", "dgx-h100", "--oversubscription", "2",
           "--seq-len", "4096", "--global-batch", "192", "--no-pp-comm-overlap"]
    out = tmp_path / "launch"
    # pipeline transfers exposed (plan and audit alike): the order of the hosts then moves the step wherever a
    # pipeline crosses the spine
    code, stdout, err = run("plan", *job, "--top-k", "1", "--json", "--emit", "megatron", "--out", str(out))
    assert code == 0, err
    planned = json.loads(stdout)["plans"][0]
    data = audit_json("--launch", str(out / "megatron.sh"), "--hosts", str(out / "hosts.txt"), *job)
    assert data["estimate"]["step_time_s"] == planned["step_time_s"]
    assert data["speedup"] == 1.0
    assert worst(data) <= SEVERITIES.index("info"), data["findings"]
    # and the same launch run with its node ranks dealt round-robin over the three leaves (as a sorted
    # host list interleaved by a scheduler would): groups that placement kept in a leaf now cross the
    # oversubscribed spine, the audit prices that, and the diff restores placement's order
    leaves = [[f"gpu{i:04d}" for i in range(lo, lo + 8)] for lo in (1, 41, 103)]
    shuffled = tmp_path / "shuffled.txt"
    shuffled.write_text("\n".join(h for trio in zip(*leaves, strict=True) for h in trio) + "\n")
    bad = audit_json("--launch", str(out / "megatron.sh"), "--hosts", str(shuffled), *job)
    assert bad["estimate"]["step_time_s"] > planned["step_time_s"]
    assert bad["speedup"] > 1.0
    crossing = [f for f in bad["findings"] if f["kind"].startswith(KINDS_WITH_GROUPS)]
    assert crossing and all(f["groups"] and f["cost_s"] > 0 for f in crossing)
    for f in crossing:  # the evidence is real: each quoted group spans more than one host
        assert all(len(g["hosts"]) > 1 for g in f["groups"])
    assert any(c["argument"].startswith("node order") for c in bad["changes"])
    # the files' `# on HOST` lines state the planned order: --hosts overriding it is said, not silent (a user trial)
    differ = [f for f in bad["findings"] if f["kind"] == "hosts_differ"]
    assert len(differ) == 1 and "gpu0001, gpu0041, gpu0103" in differ[0]["message"]
    assert "hosts_differ" not in {f["kind"] for f in data["findings"]}


# -- a deliberately bad layout -----------------------------------------------------------------------

MEGATRON_TP16 = """#!/bin/bash
# llama3-8b on two 8-GPU nodes with TP spanning both
GPUS_PER_NODE=8
NNODES=2
DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES --node_rank $NODE_RANK"
torchrun $DISTRIBUTED_ARGS pretrain_gpt.py \\
    --num-layers 32 --hidden-size 4096 --num-attention-heads 32 \\
    --swiglu --ffn-hidden-size 14336 --group-query-attention --num-query-groups 8 \\
    --seq-length 8192 --max-position-embeddings 8192 \\
    --tensor-model-parallel-size 16 --sequence-parallel \\
    --pipeline-model-parallel-size 1 \\
    --micro-batch-size 1 --global-batch-size 64 \\
    --use-distributed-optimizer --bf16
"""


def test_tp16_across_two_nodes_is_flagged_with_a_better_plan(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(MEGATRON_TP16)
    code, out, err = run("audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100", "--json")
    assert code == 1, err  # an error-level finding fails the default --fail-on error
    data = json.loads(out)
    assert data["layout"]["num_gpus"] == 16 and data["estimate"]["layout"]["tp"] == 16
    tp = [f for f in data["findings"] if f["kind"] == "tp_crosses_node"]
    assert len(tp) == 1 and tp[0]["severity"] == "error" and tp[0]["cost_s"] > 0
    assert all(len(g["hosts"]) == 2 and len(g["ranks"]) == 16 for g in tp[0]["groups"])
    # the layout its remedy prices is named, and it keeps TP inside a node (a user trial: "the best layout with
    # ep <= 8 saves 2.730 s" named none)
    named = re.search(r"the best layout with tp <= 8 \(tp (\d+), cp \d+, ep \d+/etp \d+, pp \d+( \(vpp \d+\))?, "
                      r"dp \d+, ZeRO-\d, micro-batch \d+, (the job's recompute and recipe kept|with the searched "
                      r"recompute and recipe)\) saves", tp[0]["message"])
    assert named and int(named[1]) <= 8, tp[0]["message"]
    assert data["best"]["layout"]["tp"] <= 8
    assert data["best"]["step_time_s"] < data["estimate"]["step_time_s"]
    assert data["speedup"] == pytest.approx(data["estimate"]["step_time_s"] / data["best"]["step_time_s"], abs=1e-3)
    tp_change = [c for c in data["changes"] if c["argument"] == "--tensor-model-parallel-size"]
    assert tp_change == [{"argument": "--tensor-model-parallel-size", "from": "16",
                          "to": str(data["best"]["layout"]["tp"])}]
    # the readable report says the same and shows the diff
    code, text, _ = run("audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100")
    assert code == 1
    assert "[error] tp_crosses_node" in text and "- --tensor-model-parallel-size 16" in text
    # a gate that tolerates errors passes
    code, _, _ = run("audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100",
                     "--fail-on", "error")
    assert code == 1
    out_dir = tmp_path / "fixed"
    code, _, err = run("audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100",
                       "--out", str(out_dir))
    assert (out_dir / "megatron.sh").exists() and (out_dir / "hosts.txt").exists()
    assert f"--tensor-model-parallel-size {data['best']['layout']['tp']}" in (out_dir / "megatron.sh").read_text()


def test_findings_are_costed_by_a_remedy_that_is_really_faster(tmp_path):
    """ZeRO-3 plus full recompute on a model that fits without either: each remedy is priced, the
    readable costs match, and the severities follow the saving."""
    script = tmp_path / "train.sh"
    script.write_text(MEGATRON_TP16.replace("--tensor-model-parallel-size 16 --sequence-parallel",
                                            "--tensor-model-parallel-size 1")
                      .replace("--use-distributed-optimizer", "--use-megatron-fsdp --data-parallel-sharding-strategy "
                                                              "optim_grads_params --ckpt-format fsdp_dtensor "
                                                              "--recompute-granularity full "
                                                              "--recompute-method uniform --recompute-num-layers 1"))
    data = audit_json("--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100",
                      "--fail-on", "error")
    kinds = {f["kind"]: f for f in data["findings"]}
    assert data["estimate"]["layout"]["zero_stage"] == 3 and data["estimate"]["layout"]["recompute"] == "full"
    assert "zero3_where_zero1_fits" in kinds and "memory_headroom_recompute" in kinds
    step = data["estimate"]["step_time_s"]
    for f in data["findings"]:
        share = f["cost_s"] / step
        expected = "error" if share >= 0.10 else "warning" if share >= 0.02 else "info"
        assert f["severity"] == expected, f
    assert kinds["memory_headroom_recompute"]["cost_s"] > 0
    assert data["best"]["step_time_s"] < step


def test_over_capacity_is_an_error_without_a_cost(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(MEGATRON_TP16.replace("--tensor-model-parallel-size 16 --sequence-parallel",
                                            "--tensor-model-parallel-size 1")
                      .replace("--use-distributed-optimizer ", "").replace("--micro-batch-size 1",
                                                                          "--micro-batch-size 4"))
    data = audit_json("--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100", expect=(1,))
    over = [f for f in data["findings"] if f["kind"] == "memory_over_capacity"]
    assert len(over) == 1 and over[0]["severity"] == "error" and over[0]["cost_s"] is None
    assert not data["estimate"]["fits"] and data["best"]["fits"]


# -- real published launch files, unedited ------------------------------------------------------------

REAL = [
    # file(s), model, cluster args
    (["megatron/train_gpt3_175b_distributed.sh"], "gpt3-175b", ["--cluster", "dgx-a100-80g", "--gpus", "1024"]),
    (["torchtitan/llama3_405b.toml"], "llama3-405b", ["--cluster", "dgx-h100", "--gpus", "512"]),
    (["torchtitan/llama3_70b.toml"], "llama3-70b", ["--cluster", "dgx-h100", "--gpus", "256"]),
    (["torchtitan/llama3_8b.toml"], "llama3-8b", ["--cluster", "dgx-h100", "--gpus", "8"]),
    (["megatron/train_llama3_8b_h100_fp8.sh"], "llama3-8b", ["--cluster", "dgx-h100"]),
    (["bridge/deepseek_v3_pretrain_h100_fp8_sc_v1.yaml"], "deepseek-v3", ["--cluster", "dgx-h100", "--gpus", "1024"]),
    (["bridge/llama3_8b_pretrain_override_example_megatron_fsdp.yaml"], "llama3-8b",
     ["--cluster", "dgx-h100", "--gpus", "8"]),
]


@pytest.mark.parametrize("files,model,cluster", REAL, ids=[r[0][0] for r in REAL])
def test_real_published_launch_files_are_audited(files, model, cluster):
    args = [a for f in files for a in ("--launch", str(AUDIT / f))]
    data = audit_json(*args, "--model", model, *cluster)
    est, best = data["estimate"], data["best"]
    assert est["num_gpus"] == data["layout"]["num_gpus"]
    assert best["fits"]
    if est["fits"]:
        assert best["step_time_s"] <= est["step_time_s"]
        assert data["speedup"] == pytest.approx(est["step_time_s"] / best["step_time_s"], abs=1e-3)
    for f in data["findings"]:
        assert set(f) == {"severity", "kind", "message", "groups", "cost_s"}
        assert f["severity"] in SEVERITIES and f["message"]


def test_bridge_recipe_degrees_reach_the_estimate():
    """Megatron-Bridge's DeepSeek-V3 H100 FP8 recipe (a ConfigContainer dump): TP 2, PP 8, VPP 4, EP 64 and
    its own first/last stage layout, which the audit prices as stated (its pipeline_model_parallel_layout), as it
    does Megatron-LM's --pipeline-model-parallel-layout."""
    path = AUDIT / "bridge" / "deepseek_v3_pretrain_h100_fp8_sc_v1.yaml"
    text = path.read_text()
    for key in ("tensor_model_parallel_size: 2", "pipeline_model_parallel_size: 8", "expert_model_parallel_size: 64"):
        assert key in text
    data = audit_json("--launch", str(path), "--model", "deepseek-v3", "--cluster", "dgx-h100", "--gpus", "1024")
    lay = data["estimate"]["layout"]
    assert (lay["tp"], lay["pp"], lay["vpp"], lay["ep"], lay["dp"]) == (2, 8, 4, 64, 64)
    assert data["estimate"]["precision"] == "fp8"
    kinds = {f["kind"] for f in data["findings"]}
    assert "ep_crosses_node" in kinds  # 64-way EP cannot stay inside an 8-GPU node
    assert data["estimate"]["recipe"]["pipeline_layout"] == "Et|(tt|)*30mL"
    assert "pipeline_model_parallel_layout" in data["estimate"]["recipe_sources"]["pipeline_layout"]
    assert "stage_split_differs" not in kinds  # the stated split is the one priced


def test_gpt3_script_degrees_reach_the_estimate():
    data = audit_json("--launch", str(AUDIT / "megatron" / "train_gpt3_175b_distributed.sh"), "--model", "gpt3-175b",
                      "--cluster", "dgx-a100-80g", "--gpus", "1024")
    lay = data["estimate"]["layout"]
    text = (AUDIT / "megatron" / "train_gpt3_175b_distributed.sh").read_text()
    assert "--tensor-model-parallel-size 8" in text and "--pipeline-model-parallel-size 16" in text
    assert (lay["tp"], lay["pp"], lay["dp"], lay["micro_batch_size"]) == (8, 16, 1024 // 128, 1)
    assert data["estimate"]["global_batch"] == 1536 and data["estimate"]["seq_len"] == 2048
    # the script starts 8 processes (NUM_NODES=1, "change for multinode"): said as a warning, not fatal
    (differs,) = [f for f in data["findings"] if f["kind"] == "world_size_differs"]
    assert differs["severity"] == "warning" and "describe the job on 1024 GPUs" in differs["message"]


# -- bad input -------------------------------------------------------------------------------------------

def test_malformed_launch_file_names_the_argument(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(MEGATRON_TP16.replace("--tensor-model-parallel-size 16", "--tensor-model-parallel-size sixteen"))
    code, out, err = run("audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100")
    assert code == 2 and out == "" and "Traceback" not in err
    assert "--tensor-model-parallel-size" in err and "sixteen" in err


def test_layout_that_does_not_divide_the_gpus_is_bad_input(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(MEGATRON_TP16.replace("NNODES=2", "NNODES=3"))
    code, _, err = run("audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100")
    assert code == 2 and "tp (16) x cp (1) x pp (1) = 16" in err and "24 GPUs" in err


def test_model_that_disagrees_with_the_launch_files_is_bad_input(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(MEGATRON_TP16)
    code, _, err = run("audit", "--launch", str(script), "--model", "llama3-70b", "--cluster", "dgx-h100")
    assert code == 2 and "num_layers = 32" in err and "llama3-70b has 80" in err


def test_host_order_files_in_every_launcher_form(tmp_path):
    forms = {
        "plain": "b\na\n# comment\nc\n",
        "placement": "# header\n1 a\n0 b\n2 c\n",
        "hostfile": "b slots=8\na slots=8\nc slots=8\n",
        "slurm": "b\nb\na\na\nc\nc\n",
        "hostlist": "b\na\nc\n",
        "rankfile": "# placement\nrank 2=a slot=0\nrank 0=b slot=0\nrank 1=b slot=1\nrank 3=a slot=1\n"
                    "rank 4=c slot=0\nrank 5=c slot=1\n",  # placement's rankfile (a user trial: refused)
    }
    for name, text in forms.items():
        path = tmp_path / name
        path.write_text(text)
        assert read_host_order(path) == ["b", "a", "c"], name
    bad = tmp_path / "bad"
    bad.write_text("a slots=8 extra\n")
    with pytest.raises(InputError, match=r"bad:1: .*expected HOST"):
        read_host_order(bad)
    bad.write_text("0 a\n2 b\n")
    with pytest.raises(InputError, match=r"node ranks must be 0 \.\. 1"):
        read_host_order(bad)
    bad.write_text("rank 0=a slot=0\nrank 1=b slot=0\nrank 2=a slot=1\n")
    with pytest.raises(InputError, match=r"not one run of consecutive ranks"):
        read_host_order(bad)


def test_unknown_host_in_the_order_is_bad_input(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(MEGATRON_TP16)
    hosts = tmp_path / "hosts"
    hosts.write_text("host0\nnode-x\n")
    code, _, err = run("audit", "--launch", str(script), "--hosts", str(hosts), "--model", "llama3-8b",
                       "--cluster", "dgx-h100")
    assert code == 2 and "'node-x'" in err


GPT2_ONE_LAYER = """name: gpt2-1layer-deepspeed-example
source: the model DeepSpeedExamples' Megatron-LM/scripts/ds_zero2_pretrain_gpt2_model_parallel.sh trains
  (--num-layers 1 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024, GPT-2 BPE vocabulary)
num_layers: 1
hidden_size: 1024
ffn_hidden_size: 4096
ffn_kind: gelu
num_attention_heads: 16
vocab_size: 50257
tied_embeddings: true
default_seq_len: 1024
default_global_batch: 16
"""


def test_real_deepspeed_example_with_its_hostfile(tmp_path):
    """DeepSpeedExamples' Megatron-DeepSpeed script + its ZeRO-3 JSON + a hostfile, unedited: the
    launcher's --num_nodes 1 --num_gpus 2 keeps the first hostfile line, so the job is 2 GPUs of worker-1,
    ZeRO-3 with full recompute on a model that needs neither."""
    model = tmp_path / "gpt2.yaml"
    model.write_text(GPT2_ONE_LAYER)
    ds = AUDIT / "deepspeed"
    files = [a for f in ("ds_zero3_config.json", "ds_zero2_pretrain_gpt2_model_parallel.sh", "hostfile")
             for a in ("--launch", str(ds / f))]
    data = audit_json(*files, "--model", str(model), "--cluster", "dgx-h100", "--gpus", "2")
    assert data["layout"]["framework"] == "deepspeed"
    assert data["layout"]["num_gpus"] == 2 and data["layout"]["hosts_in_files"] == ["worker-1"]
    assert any(f["kind"] == "hosts_not_in_cluster" for f in data["findings"])
    lay = data["estimate"]["layout"]
    assert (lay["tp"], lay["pp"], lay["dp"], lay["zero_stage"], lay["recompute"]) == (1, 1, 2, 3, "full")
    assert data["estimate"]["global_batch"] == 16 and lay["micro_batch_size"] == 8
    kinds = {f["kind"] for f in data["findings"]}
    assert "memory_headroom_recompute" in kinds
    # ZeRO-1 saves this one-layer model less than the millisecond the findings print: no zero3 finding, but the
    # best plan still leaves ZeRO-3
    assert all(f["cost_s"] >= 0.0005 for f in data["findings"] if f["kind"] == "zero3_where_zero1_fits")
    assert data["best"]["layout"]["zero_stage"] < 3 and data["speedup"] > 1.0
    assert any(c["argument"] == "zero_optimization.stage" and c["from"] == "3" for c in data["changes"])


def test_a_megatron_deepspeed_jobs_out_is_its_own_json_with_the_best_plans_keys(tmp_path):
    """A user trial: `audit --out` of a Megatron-DeepSpeed job wrote placement's own deepspeed.initialize program, which
    the job's pretrain script does not run (one audited job's written file ran its Ulysses degree as a ring of model
    code and did not fit).  Its --out is now the job's JSON with the best plan's keys, beside a DeepSpeed hostfile,
    and the script's own flags are named."""
    model = tmp_path / "gpt2.yaml"
    model.write_text(GPT2_ONE_LAYER)
    ds = AUDIT / "deepspeed"
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["audit", "--launch", str(ds / "ds_zero3_config.json"), "--launch",
                                       str(ds / "ds_zero2_pretrain_gpt2_model_parallel.sh"), "--model", str(model),
                                       "--cluster", "dgx-h100", "--gpus", "2", "--out", str(out), "--json"])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.stdout)
    assert not (out / "deepspeed.sh").exists() and not (out / "ds_topology.py").exists()
    original = json.loads((ds / "ds_zero3_config.json").read_text())
    written = json.loads((out / "ds_config.json").read_text())
    [stage] = [c for c in data["changes"] if c["argument"] == "zero_optimization.stage"]
    assert written["zero_optimization"]["stage"] == int(stage["to"]) < 3
    # the best plan recomputes nothing: the checkpointing section's keys go, quoted from the file as it states them
    dropped = {c["argument"]: c["from"] for c in data["changes"] if c["argument"].startswith("activation_")}
    assert dropped == {"activation_checkpointing.partition_activations": "true",
                       "activation_checkpointing.contiguous_memory_optimization": "false"}
    assert written.pop("activation_checkpointing") == {}
    assert {k: v for k, v in written.items() if k != "zero_optimization"} == \
        {k: v for k, v in original.items() if k not in ("zero_optimization", "activation_checkpointing")}
    assert data["changes_not_written"] == [c for c in data["changes"] if c["argument"].startswith("--")]
    assert "a Megatron-DeepSpeed job runs its own pretrain script" in " ".join(result.stderr.split())


def test_megatron_tp_pp_dp_rank_order_is_rebuilt(tmp_path):
    """--use-tp-pp-dp-mapping numbers ranks tp-cp-ep-pp-dp: the audited rank table must put pp inside dp
    (rank = tp + 8 (pp + 2 dp)), and the flag shows in the diff to placement's default order."""
    script = tmp_path / "train.sh"
    script.write_text(MEGATRON_TP16.replace("NNODES=2", "NNODES=4")
                      .replace("--tensor-model-parallel-size 16", "--tensor-model-parallel-size 8")
                      .replace("--pipeline-model-parallel-size 1", "--pipeline-model-parallel-size 2 "
                                                                   "--use-tp-pp-dp-mapping"))
    data = audit_json("--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100")
    lay = data["estimate"]["layout"]
    assert (lay["tp"], lay["pp"], lay["dp"]) == (8, 2, 2)
    rows = data["estimate"]["mapping"]
    assert [r["rank"] for r in rows] == list(range(32))
    for r in rows:
        c = r["coords"]
        assert r["rank"] == c["tp"] + 8 * (c["pp"] + 2 * c["dp"])
        assert r["host"] == f"host{r['rank'] // 8}"  # node rank k on the k-th host, as launched
    assert {"argument": "--use-tp-pp-dp-mapping", "from": "true", "to": None} in data["changes"]


TP16 = """#!/bin/bash
torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py \\
  --tensor-model-parallel-size 16 --pipeline-model-parallel-size 1 --sequence-parallel \\
  --num-layers 80 --hidden-size 8192 --num-attention-heads 64 --seq-length 4096 \\
  --swiglu --ffn-hidden-size 28672 --group-query-attention --num-query-groups 8 \\
  --micro-batch-size 1 --global-batch-size 128 --bf16 --use-distributed-optimizer
"""


def test_tp16_across_nodes_is_an_error_worth_the_speed_up_and_the_micro_batch_finding_names_its_terms(tmp_path):
    """TP 16 on 8-GPU nodes: a tp_crosses_node error whose cost is what the layout change alone saves (the job's
    recompute and recipe kept: most, never more, of the best plan's saving, which also changes the recipe); the
    small-micro-batch finding splits its saving into GEMM time and the terms that shrink."""
    script = tmp_path / "tp16.sh"
    script.write_text(TP16)
    got = audit_json("--model", "llama3-70b", "--cluster", "dgx-h100", "--launch", str(script))
    saving = got["estimate"]["step_time_s"] - got["best"]["step_time_s"]
    (cross,) = [f for f in got["findings"] if f["kind"] == "tp_crosses_node"]
    assert cross["severity"] == "error" and 0.8 * saving < cross["cost_s"] <= saving
    assert "the job's recompute and recipe kept" in cross["message"]
    small = [f for f in got["findings"] if f["kind"] == "small_micro_batch"]
    assert small and "from larger GEMMs" in small[0]["message"] and "TP communication" in small[0]["message"]
    # no zero-cost finding whose two bandwidths are the same number
    for f in got["findings"]:
        pair = re.search(r"at (\d+) GB/s per GPU instead of (\d+) GB/s", f["message"])
        assert not (pair and pair.group(1) == pair.group(2) and f["cost_s"] == 0), f


def test_a_torchtitan_diff_keeps_the_activation_checkpoint_subcommand_its_own_setting():
    from placement.audit.changes import _settings

    got = _settings(["--training.disable_cuda_graphs", "activation-checkpoint:full",
                     "--parallelism.tensor_parallel_degree", "2"])
    assert got == {"--training.disable_cuda_graphs": "true", "activation-checkpoint": "full",
                   "--parallelism.tensor_parallel_degree": "2"}


def test_every_job_value_says_where_it_came_from():
    """GPU count, sequence, batch and precision: the file's line, the flag, or the default, named."""
    neox = str(AUDIT / "neox" / "20B.yml")
    got = audit_json("--model", "gpt-neox-20b", "--cluster", "dgx-a100-40g", "--launch", neox)["layout"]["sources"]
    assert got["num_gpus"].startswith("the cluster's default size") and "launch files do not fix it" in got["num_gpus"]
    assert got["seq_len"].endswith('"seq_length": 2048,') and "20B.yml" in got["seq_len"]
    assert got["global_batch"].startswith("micro-batch 4 x accumulation 32 x dp")
    flagged = audit_json("--model", "gpt-neox-20b", "--cluster", "dgx-a100-40g", "--gpus", "96", "--launch",
                         neox)["layout"]["sources"]
    assert flagged["num_gpus"] == "--gpus 96"
    code, out, _ = run("audit", "--model", "gpt-neox-20b", "--cluster", "dgx-a100-40g", "--gpus", "96", "--launch",
                       neox)
    assert code in (0, 1) and "  num_gpus 96: --gpus 96" in out and "  tp 2: " in out  # the readable report too


@pytest.mark.parametrize(("backend", "found"), [("unfused", True), ("local", True), ("flash", False), (None, False)])
def test_an_unfused_attention_core_is_a_finding_priced_as_the_fused_kernel_saves(tmp_path, backend, found):
    """Megatron's --attention-backend unfused (or local) streams the s x s scores through HBM in every layer: the
    finding prices --attention-backend fused (cuDNN attention) on the same job, and says so."""
    script = tmp_path / "train.sh"
    script.write_text(MEGATRON_TP16.replace("--bf16", "--bf16" + (f" --attention-backend {backend}" if backend
                                                                  else "")))
    data = audit_json("--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100")
    hits = [f for f in data["findings"] if f["kind"] == "unfused_attention"]
    assert bool(hits) is found
    if found:
        flash = audit_json("--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100",
                           "--attention-kernel", "flash")
        assert hits[0]["cost_s"] == pytest.approx(data["estimate"]["step_time_s"] - flash["estimate"]["step_time_s"],
                                                  abs=2e-4)
        assert "--attention-backend fused" in hits[0]["message"] and f"--attention-backend {backend}" in \
            hits[0]["message"]


def test_every_layout_value_says_where_it_comes_from(tmp_path):
    """Each layout value is stated by the files (layout.sources) or said unstated with its origin (layout.unstated):
    dp derived from the GPU count, the rest the framework's default; a user trial found cp, vpp and dp without one."""
    script = tmp_path / "tp16.sh"
    script.write_text(TP16)
    got = audit_json("--model", "llama3-70b", "--cluster", "dgx-h100", "--launch", str(script))
    lay = got["layout"]
    for name in ("tp", "cp", "pp", "dp", "micro_batch_size", "zero_stage", "recompute", "sequence_parallel"):
        assert name in lay["sources"] or name in lay["unstated"], name
    assert lay["pp"] == 1 and "vpp" not in lay["unstated"]  # no pipeline: no virtual stages to state
    assert lay["unstated"]["dp"] == f"derived: 64 GPUs / (tp 16 x cp 1 x pp 1) = {lay['dp']}"
    assert "megatron's default" in lay["unstated"]["cp"] and "ep" not in lay["unstated"]  # a dense model


def test_the_bubble_finding_saves_only_what_the_pipeline_change_saves(tmp_path):
    """pipeline_bubble's remedy keeps the job's recompute and recipe (a user trial: 2.063 s claimed where the
    pipeline change alone saved 1.901 s, the rest being memory_headroom_recompute's): never more than the best plan's
    whole saving, and priced at the job's full recompute."""
    script = tmp_path / "pp.sh"
    script.write_text(TP16.replace("--tensor-model-parallel-size 16 --pipeline-model-parallel-size 1",
                                   "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8")
                      .replace("--global-batch-size 128", "--global-batch-size 16")
                      .replace("--use-distributed-optimizer", "--use-distributed-optimizer --recompute-granularity "
                               "full --recompute-method uniform --recompute-num-layers 1"))
    got = audit_json("--model", "llama3-70b", "--cluster", "dgx-h100", "--launch", str(script))
    assert got["estimate"]["layout"]["recompute"] == "full" and got["estimate"]["layout"]["pp"] == 8
    saving = got["estimate"]["step_time_s"] - got["best"]["step_time_s"]
    (bubble,) = [f for f in got["findings"] if f["kind"] == "pipeline_bubble"]
    assert 0 < bubble["cost_s"] <= saving + 1e-9
    assert "the job's recompute, recipe and host order kept" in bubble["message"]


def test_a_job_the_framework_search_cannot_better_is_still_priced(tmp_path: Path) -> None:
    """Llama 3 405B launched on 8 H100 (Megatron-LM, tp 8): no layout of the model fits 8 GPUs, so the search has no
    plan; the audit prices the job as launched all the same and says why there is none to compare (it once stopped
    with the search's "no layout" message and priced nothing)."""
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 8 --num-layers 126 "
                      "--hidden-size 16384 --ffn-hidden-size 53248 --num-attention-heads 128 --group-query-attention "
                      "--num-query-groups 8 --swiglu --seq-length 8192 --max-position-embeddings 8192 "
                      "--micro-batch-size 1 --global-batch-size 16 --bf16 --use-distributed-optimizer\n")
    job = ["--model", "llama3-405b", "--cluster", "dgx-h100", "--gpus", "8", "--launch", str(script)]
    data = audit_json(*job)
    assert data["layout"]["tp"] == 8 and data["estimate"]["step_time_s"] > 0
    assert "does not fit" in data["no_better_plan"] and "needs" in data["no_better_plan"]
    assert data["speedup"] == 1.0 and data["changes"] == []
    code, out, _ = run("audit", *job)
    assert code == 1
    assert "best plan for the same job: none searched" in out
    assert "placement found no other plan for this job to compare it with" in out


def test_an_emitted_maxtext_file_maxtext_rejects_is_refused(tmp_path: Path) -> None:
    """Qwen3-30B-A3B on 144 GB200: the plan runs pp 9 over 48 layers (3/6/3), which MaxText cannot express; the
    emitted file's header warns that MaxText rejects its 8 micro-batches over 9 stages, and the audit of that file
    refuses the job with MaxText's own check (it was priced at the step the header gives)."""
    job = ["--model", "qwen3-30b-a3b", "--cluster", "gb200-nvl72", "--gpus", "144", "--global-batch", "512"]
    code, _, err = run("plan", *job, "--top-k", "1", "--out", str(tmp_path / "p"), "--emit", "maxtext")
    # written for reading, and the command exits 1 naming it
    assert code == 1 and "maxtext.yml is refused at start-up by its framework" in err, err
    header = (tmp_path / "p" / "maxtext.yml").read_text()
    assert "it will reject this config" in header
    # the header promises no step time for it (it did: "this file runs ...: 1.208 s/step")
    assert "# this file does not start: MaxText refuses it at start-up" in header
    assert not re.search(r"^# this file runs .* s/step", header, re.M)
    code, _, err = run("audit", *job, "--launch", str(tmp_path / "p" / "maxtext.yml"),
                       "--launch", str(tmp_path / "p" / "jax_mesh.py"))
    assert code == 2 and "must be divisible by the number of stages (9)" in err and "does not start" in err


def test_a_node_count_slurm_gives_is_the_command_lines(tmp_path: Path) -> None:
    """Megatron-LM's examples/mixtral/train_mixtral_8x7b_distributed.sh starts `torchrun --nnodes $NNODES` with
    NNODES=${SLURM_NNODES:-"1"}: the job's node count, which --gpus gives; it was taken as 1 node, refused as
    "ep 8 does not divide dp 2" without --gpus and flagged world_size_differs with it."""
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/bash\nGPUS_PER_NODE=8\nNNODES=${SLURM_NNODES:-\"1\"}\n"
                      "torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \\\n"
                      "  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 \\\n"
                      "  --group-query-attention --num-query-groups 8 --swiglu --seq-length 4096 \\\n"
                      "  --tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 \\\n"
                      "  --expert-model-parallel-size 8 \\\n"
                      "  --num-experts 8 --moe-router-topk 2 --micro-batch-size 1 --global-batch-size 256 --bf16\n")
    data = audit_json("--launch", str(script), "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64")
    assert data["layout"]["dp"] == 16 and data["layout"]["num_gpus"] == 64
    assert "world_size_differs" not in {f["kind"] for f in data["findings"]}
    assert any("--nnodes" in x and "$SLURM_NNODES" in x for x in data["layout"]["ignored"])


def test_a_best_plan_near_its_capacity_says_its_memory_is_an_estimate() -> None:
    """A user trial: the best plan of torchtitan's Llama 3 405B config filled 77.8 of 78.1 GiB and its line said
    nothing, where `plan` and `evaluate` warn of a plan within 3 % of its capacity kept without headroom."""
    from placement.plan import TIGHT_MEMORY_SHARE

    # priced with 16-bit TP gathers (as torchtitan 0.3.0's row-wise Float8 runs), whose best plan fills the GPU; this
    # file's tensor-wise Float8 gathers FP8, and its best plan (tp 8, cp 2) keeps 11 GiB spare
    args = ("--launch", str(AUDIT / "torchtitan" / "llama3_405b.toml"), "--model", "llama3-405b", "--tp-gathers-16bit")
    best = audit_json(*args)["best"]
    spare = best["memory_capacity_bytes"] - best["peak_memory_bytes"]
    assert 0 <= spare < TIGHT_MEMORY_SHARE * best["memory_capacity_bytes"]
    code, text, _ = run("audit", *args)
    assert code in (0, 1)
    (line,) = [x for x in text.splitlines() if x.startswith("step ") and "as launched: speed-up" in x]
    assert f"(within {spare / 2**30:.1f} GiB: an estimate, no headroom kept" in line
    # with headroom asked for, the best plan keeps it and says so instead
    code, text, _ = run("audit", *args, "--memory-headroom-gib", "4")
    assert code in (0, 1)
    (line,) = [x for x in text.splitlines() if x.startswith("step ") and "as launched: speed-up" in x]
    assert "(4.0 GiB more kept free)" in line and "an estimate" not in line


def test_no_change_list_without_a_best_plan(tmp_path):
    """A Megatron-DeepSpeed job that fits no layout on its GPUs (GPT-3 175B, ZeRO-3, on 8 A100): no best plan is
    searched, and no change list follows (a user trial read seven "Megatron-LM needs it for the best plan" lines
    under "the job as launched is the only plan priced")."""
    script = tmp_path / "run.sh"
    script.write_text("deepspeed --num_nodes 1 --num_gpus 8 pretrain_gpt.py --tensor-model-parallel-size 1 "
                      "--pipeline-model-parallel-size 1 --no-pipeline-parallel --num-layers 96 --hidden-size 12288 "
                      "--num-attention-heads 96 --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 4 "
                      "--global-batch-size 32 --fp16 --deepspeed --deepspeed_config ds.json --zero-stage 3\n")
    data = audit_json("--launch", str(script), "--model", "gpt3-175b", "--cluster", "dgx-a100-80g", "--gpus", "8")
    assert data["no_better_plan"] is not None and "does not fit" in data["no_better_plan"]
    assert data["changes"] == []


def test_a_host_order_file_names_the_ranks_and_lines_it_gets_wrong(tmp_path) -> None:
    """A missing node rank was shown as the first eight ranks given, and a host listed twice without its file or
    lines (a user trial)."""
    from placement.audit.core import read_host_order

    path = tmp_path / "hosts.txt"
    path.write_text("".join(f"{r} gpu{r}\n" for r in (0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16)))
    with pytest.raises(InputError, match=r"node ranks must be 0 \.\. 14 \(15 lines\), each once; missing: 5; "
                                         r"beyond: 16"):
        read_host_order(path)
    path.write_text("gpu1 slots=8\ngpu2 slots=8\ngpu1 slots=8\n")
    with pytest.raises(InputError, match=r"hosts.txt:3: host gpu1 is already listed on line 1"):
        read_host_order(path)
    path.write_text("gpu1\ngpu1\ngpu2\ngpu2\n")  # a SLURM hostfile: one line per task
    assert read_host_order(path) == ["gpu1", "gpu2"]


def test_a_nodelist_longer_than_the_job_is_told_the_hosts_of_its_host_order(tmp_path) -> None:
    """The fix named the first hosts of the nodelist, though --hosts said which the job ran on (a user trial
    followed it into a second error)."""
    from click.testing import CliRunner

    from placement.cli import main

    script = tmp_path / "run.sh"
    script.write_text("torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 8 "
                      "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
                      "--micro-batch-size 1 --global-batch-size 64 --bf16\n")
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("0 gpu0040\n1 gpu0038\n")
    tree = Path(__file__).parent / "data" / "slurm" / "tree-5leaf.conf"
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--slurm-topology",
                                       str(tree), "--nodelist", "gpu[0038-0040]", "--node-type", "dgx-h100",
                                       "--hosts", str(hosts)])
    assert result.exit_code == 2
    assert f"those of --hosts {hosts}: --nodelist 'gpu[0040,0038]'" in result.stderr


def test_a_job_without_a_searched_plan_gets_no_changes(tmp_path: Path) -> None:
    """torchtitan's llama3_70b on 8 H100 fits no layout, so no plan is searched; the change list once still offered
    `+ --training.global_batch_size 8` (the files leave the batch to torchtitan) under "the job as launched is the
    only plan priced" (a user trial, torchtitan's own run_train.sh)."""
    script = tmp_path / "run_train.sh"
    script.write_text("torchrun --nproc_per_node=8 -m torchtitan.train --module llama3 --config llama3_70b "
                      "--parallelism.tensor_parallel_degree 8\n")
    job = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "8", "--launch", str(script)]
    data = audit_json(*job)
    assert data["no_better_plan"] is not None and "does not fit" in data["no_better_plan"]
    assert data["changes"] == [] and data["changes_withheld"] == []
    assert "no changes: placement found no other plan" in run("audit", *job)[1]


def test_an_audits_written_file_that_runs_other_than_its_best_plan_says_so_beside_it(tmp_path):
    """A review: `audit --out` dropped the written file's "this file runs ..." line, so a file that runs other than the
    best plan (here torchtitan 0.3.0's, which chunks the loss the 0.2.x job's TOML runs whole) said so only in its
    header.  The audit prints it under its table and gives it in the JSON (files_run), as `plan` does; a file that fits
    and starts keeps exit 0."""
    job = ["audit", "--model", "llama3-8b", "--gpus", "8", "--launch", str(AUDIT / "torchtitan" / "llama3_8b.toml")]
    as_json = CliRunner().invoke(main, [*job, "--out", str(tmp_path / "a"), "--json"])
    got = json.loads(as_json.stdout)
    header = next(line for line in (tmp_path / "a" / "torchtitan.sh").read_text().splitlines()
                  if line.startswith("# this file runs "))
    assert got["files_run"] == [f"torchtitan.sh: {header[2:]}"]
    assert got["files_over_capacity"] == [] and got["files_not_starting"] == [] and as_json.exit_code == 0
    text = CliRunner().invoke(main, [*job, "--out", str(tmp_path / "b")])
    assert f"the files written run other than the best plan (each file's header says so too):\n  torchtitan.sh: " \
           f"{header[2:]}" in text.stdout
    assert "files_run" not in json.loads(CliRunner().invoke(main, [*job, "--json"]).stdout)


def test_out_in_the_jobs_folder_does_not_write_over_its_files(tmp_path):
    """A review: `audit --out` into the job's own folder replaced its hostfile (and could its DeepSpeed JSON) with the
    best plan's, silently.  Refused before any work, naming the file."""
    import shutil

    model = tmp_path / "gpt2.yaml"
    model.write_text(GPT2_ONE_LAYER)
    for name in ("ds_zero3_config.json", "ds_zero2_pretrain_gpt2_model_parallel.sh", "hostfile"):
        shutil.copy(AUDIT / "deepspeed" / name, tmp_path / name)
    before = (tmp_path / "hostfile").read_text()
    code, _, err = run("audit", *[a for n in ("ds_zero3_config.json", "ds_zero2_pretrain_gpt2_model_parallel.sh",
                                              "hostfile") for a in ("--launch", str(tmp_path / n))],
                       "--model", str(model), "--cluster", "dgx-h100", "--gpus", "2", "--out", str(tmp_path))
    assert code == 2 and f"would write over the job's own {tmp_path / 'hostfile'}" in err
    assert (tmp_path / "hostfile").read_text() == before


def test_out_does_not_write_over_the_jobs_hosts_file_and_checks_only_what_it_writes(tmp_path):
    """A review: the clash check left out --hosts (the job's hosts.txt was replaced by the best plan's), and refused a
    job script named deepspeed.sh, which the audit of a Megatron-DeepSpeed job never writes."""
    import shutil

    model = tmp_path / "gpt2.yaml"
    model.write_text(GPT2_ONE_LAYER)
    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(AUDIT / "deepspeed" / "ds_zero3_config.json", job / "ds.json")
    shutil.copy(AUDIT / "deepspeed" / "ds_zero2_pretrain_gpt2_model_parallel.sh", job / "deepspeed.sh")
    (job / "hosts.txt").write_text("worker-1\n")
    files = ["--launch", str(job / "ds.json"), "--launch", str(job / "deepspeed.sh"), "--model", str(model),
             "--cluster", "dgx-h100", "--gpus", "2"]
    code, _, err = run("audit", *files, "--hosts", str(job / "hosts.txt"), "--out", str(job))
    assert code == 2 and f"would write over the job's own {job / 'hosts.txt'}" in err
    assert (job / "hosts.txt").read_text() == "worker-1\n"
    code, _, err = run("audit", *files, "--out", str(job))
    assert code in (0, 1), err
    assert (job / "ds_config.json").exists() and (job / "deepspeed.sh").read_text() == (
        AUDIT / "deepspeed" / "ds_zero2_pretrain_gpt2_model_parallel.sh").read_text()


@pytest.mark.parametrize("config", ["20B.yml", "20B-c560814b.yml"])
def test_a_gpt_neox_jobs_out_is_its_config_with_the_best_plans_keys(tmp_path, config):
    """A QA run: `audit --out` of a GPT-NeoX job wrote no config (only host files), so the change list was the user's to
    apply by hand.  The job's config comes back under its own name with the best plan's keys, in the file's own
    spelling (dashes in the 2022 release's), every other key as it was."""
    import yaml

    src = AUDIT / "neox" / config
    out = tmp_path / "out"
    code, stdout, err = run("audit", "--model", "gpt-neox-20b", "--cluster", "gpt-neox-a100-40g", "--gpus", "96",
                            "--launch", str(src), "--out", str(out), "--json")
    assert code in (0, 1), err
    changes = json.loads(stdout)["changes"]
    text = (out / config).read_text()
    assert text.startswith("# placement ") and "the job's GPT-NeoX config with the best plan's keys applied" in text
    written, original = yaml.safe_load(text), yaml.safe_load(src.read_text())
    keyed = [c for c in changes if " " not in c["argument"]]
    assert keyed
    for c in keyed:
        assert str(written.get(c["argument"])).lower() == str(c["to"]).lower(), c
    assert {k: v for k, v in written.items() if k not in {c["argument"] for c in keyed}} == \
        {k: v for k, v in original.items() if k not in {c["argument"] for c in keyed}}
    assert f"{out / config} is the job's GPT-NeoX config" in " ".join(err.split())
