"""plan --framework F plans only what F runs as priced, and the audit of its own files agrees (issue: launch
files that run exactly what was priced): same layout and recipe, speed-up 1.00, no finding above info."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from placement.cli import main

DATA = Path(__file__).parent / "data"

HOST_FILES = {"hosts.txt", "slurm.hostfile", "rankfile", "launch.sbatch", "cuda_visible_devices.txt"}
LAYOUT_KEYS = ("tp", "cp", "ep", "etp", "pp", "vpp", "dp", "micro_batch_size", "zero_stage", "recompute",
               "sequence_parallel")


def _run(argv: list[str]):
    result = CliRunner().invoke(main, argv)
    assert result.exit_code in (0, 1), result.output[-1500:]
    return result


@pytest.mark.parametrize(("framework", "model", "gpus", "gbs"), [
    ("megatron", "llama3-8b", 16, 64), ("megatron", "llama3-70b", 64, 128), ("megatron", "mixtral-8x7b", 64, 256),
    ("torchtitan", "llama3-8b", 16, 64), ("torchtitan", "llama3-70b", 64, 128),
    # DeepSpeed takes TP and PP in code: the audit reads them from the emitted ds_topology.py
    ("deepspeed", "llama3-8b", 16, 64), ("deepspeed", "llama3-70b", 64, 128), ("deepspeed", "gpt3-175b", 128, 256),
    # MaxText: the config's mesh and batch keys, the process order from jax_mesh.py
    ("maxtext", "llama3-8b", 16, 64), ("maxtext", "llama3-70b", 64, 128), ("maxtext", "mixtral-8x7b", 64, 256),
])
def test_the_audit_of_a_framework_plans_own_files_finds_nothing_to_change(tmp_path, framework, model, gpus, gbs):
    job = ["--model", model, "--cluster", "dgx-h100", "--gpus", str(gpus), "--seq-len", "4096", "--global-batch",
           str(gbs)]
    out = tmp_path / "files"
    planned = json.loads(_run(["plan", *job, "--top-k", "1", "--framework", framework, "--emit", framework,
                               "--out", str(out), "--json"]).stdout)["plans"][0]
    launch = [x for p in sorted(out.iterdir()) if p.name not in HOST_FILES for x in ("--launch", str(p))]
    audit = json.loads(_run(["audit", *job, *launch, "--hosts", str(out / "hosts.txt"), "--json"]).stdout)
    got = audit["estimate"]
    assert {k: got["layout"][k] for k in LAYOUT_KEYS} == {k: planned["layout"][k] for k in LAYOUT_KEYS}
    assert got["step_time_s"] == pytest.approx(planned["step_time_s"], rel=1e-6)
    assert audit["speedup"] == 1.0
    assert [f for f in audit["findings"] if f["severity"] != "info"] == []
    if framework == "deepspeed" and (planned["layout"]["tp"] > 1 or planned["layout"]["pp"] > 1):
        assert "ds_topology.py" in audit["layout"]["sources"]["tp"]  # read, not defaulted


@pytest.mark.parametrize("framework", ["torchtitan", "deepspeed", "maxtext", "megatron"])
def test_plan_framework_proposes_only_what_the_framework_runs(framework):
    plans = json.loads(_run(["plan", "--model", "mixtral-8x7b", "--gpus", "64", "--seq-len", "4096",
                             "--global-batch", "256", "--top-k", "20", "--framework", framework, "--zero", "0",
                             "--zero", "1", "--zero", "2", "--zero", "3", "--json"]).stdout)["plans"]
    assert plans
    for p in plans:
        lay = p["layout"]
        if framework == "torchtitan":  # no ZeRO-1, no expert TP beside EP (at ep 1 experts shard over tp), even stages
            assert lay["zero_stage"] != 1 and lay["etp"] == (lay["tp"] if lay["ep"] == 1 else 1)
            assert 32 % (lay["pp"] * lay["vpp"]) == 0
        elif framework == "deepspeed":  # no interleaving, CP, HSDP, own EP; ZeRO-1 only with PP; no ZeRO-0
            assert lay["vpp"] == 1 and lay["cp"] == 1 and lay["ep"] == 1 and lay["zero_stage"] != 0
            assert lay["pp"] == 1 or lay["zero_stage"] == 1
            assert lay["dp_shard"] == lay["dp"]
        elif framework == "maxtext":  # no ZeRO-2, no pipeline, etp = tp, EP not across CP, CP only under ZeRO-3
            assert (lay["zero_stage"] != 2 and lay["pp"] == 1 and lay["etp"] in (1, lay["tp"])) or lay["ep"] == 1
            assert lay["ep"] == 1 or lay["cp"] == 1
            assert lay["cp"] == 1 or lay["zero_stage"] == 3
        else:  # Megatron-FSDP: no HSDP
            assert lay["zero_stage"] != 3 or lay["dp_shard"] == lay["dp"]


@pytest.mark.parametrize(("framework", "precision", "says"), [
    ("torchtitan", "fp8", "llama3_70b config has no Float8 converter"),
    ("deepspeed", "fp8", "a DeepSpeed config has no FP8 switch"),
])
def test_a_precision_the_framework_cannot_run_is_refused(framework, precision, says):
    result = CliRunner().invoke(main, ["plan", "--model", "llama3-70b", "--gpus", "64", "--precision", precision,
                                       "--framework", framework])
    assert result.exit_code == 2 and says in result.stderr


def test_evaluate_framework_refuses_a_layout_the_framework_does_not_run():
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--pp", "2",
                                       "--vpp", "2", "--framework", "deepspeed"])
    assert result.exit_code == 2 and "--framework deepspeed: DeepSpeed 0.19.8 does not run this layout" in (
        result.stderr)
    ok = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--pp", "2",
                                   "--framework", "deepspeed"])
    assert ok.exit_code in (0, 1), ok.output


def test_a_deepspeed_plan_with_whole_pipeline_sends_runs_them_and_the_audit_prices_shares(tmp_path):
    """A plan priced with whole sends between stages writes `pipe_partitioned` / `grad_partitioned` false, so its
    files run as priced; the audit reads them back, prices the same step, and reports what DeepSpeed's default
    1/tp shares would save (`pipeline_whole_sends`)."""
    job = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "32", "--seq-len", "4096", "--global-batch",
           "64"]
    # without sequence parallelism, where each TP rank holds the whole activation (with it, its own shard)
    layout = ["--tp", "2", "--pp", "4", "--zero", "1", "--mbs", "1", "--no-sequence-parallel", "--framework",
              "deepspeed"]
    out = tmp_path / "files"
    whole = json.loads(_run(["evaluate", *job, *layout, "--pipeline-p2p-whole", "--emit", "deepspeed",
                             "--out", str(out), "--json"]).stdout)
    shares = json.loads(_run(["evaluate", *job, *layout, "--json"]).stdout)
    assert whole["step_time_s"] > shares["step_time_s"]
    launch = [x for p in sorted(out.iterdir()) if p.name not in HOST_FILES for x in ("--launch", str(p))]
    audit = json.loads(_run(["audit", *job, *launch, "--hosts", str(out / "hosts.txt"), "--json"]).stdout)
    assert audit["estimate"]["step_time_s"] == pytest.approx(whole["step_time_s"], rel=1e-6)
    assert "pipe_partitioned" in audit["layout"]["sources"]["recipe.pipeline_p2p_whole"]
    (found,) = [f for f in audit["findings"] if f["kind"] == "pipeline_whole_sends"]
    assert found["cost_s"] == pytest.approx(whole["step_time_s"] - shares["step_time_s"], rel=1e-3)


@pytest.mark.parametrize(("model", "gpus", "seq", "gbs", "layout"), [
    # a pipelined ZeRO-1 plan: torchtitan runs ZeRO-2, which under torch pipelining keeps each stage's unsharded
    # float32 gradient until its last backward and gathers the weights every micro-batch
    ("llama3-70b", 64, 4096, 128, ["--tp", "8", "--pp", "2"]),
    ("llama3-70b", 64, 4096, 128, ["--tp", "8", "--pp", "1"]),
    # a BF16 plan for a model whose torchtitan config runs Float8: the FP8 rows of the capability hold too
    ("llama3-405b", 512, 8192, 256, ["--tp", "8", "--pp", "8"]),
])
def test_a_torchtitan_files_header_prices_what_its_audit_prices(tmp_path, model, gpus, seq, gbs, layout):
    """The "this file runs" line of torchtitan.sh emitted for another framework's plan gives the step time and
    memory the audit of that file gives (a user trial found 314.9 s, fitting, in the header of a file the audit
    priced at 168.2 s, not fitting: the rows ZeRO-2 brings were tested against the plan's ZeRO-1)."""
    job = ["--model", model, "--cluster", "dgx-h100", "--gpus", str(gpus), "--seq-len", str(seq),
           "--global-batch", str(gbs)]
    out = tmp_path / "files"
    _run(["evaluate", *job, *layout, "--zero", "1", "--recompute", "full", "--out", str(out),
          "--emit", "torchtitan"])
    header = re.search(r"this file runs .*?: ([\d.]+) s/step .*?([\d.]+) of ([\d.]+) GiB per GPU( \(DOES NOT FIT\))?",
                       (out / "torchtitan.sh").read_text())
    assert header, "the header prices what the file runs"
    audit = json.loads(_run(["audit", *job, "--launch", str(out / "torchtitan.sh"), "--hosts",
                             str(out / "hosts.txt"), "--json"]).stdout)["estimate"]
    assert audit["layout"]["zero_stage"] == 2
    assert float(header[1]) == pytest.approx(audit["step_time_s"], abs=5e-4)
    assert float(header[2]) == pytest.approx(audit["peak_memory_bytes"] / 2**30, abs=0.05)
    assert (header[4] is None) == audit["fits"]


def test_emit_says_when_it_narrows_the_search(tmp_path):
    """--emit all keeps only what every format launches as priced (no TP overlap or CUDA graphs for torchtitan,
    DeepSpeed, MaxText): the plan may be slower than the same command without it, and stderr says so; --emit
    megatron narrows nothing and says nothing."""
    job = ["plan", "--model", "llama3-70b", "--gpus", "64", "--top-k", "1", "--json"]
    narrowed = CliRunner().invoke(main, [*job, "--out", str(tmp_path / "a"), "--emit", "all"])
    # what torchtitan and MaxText run instead of the plan is over the GPU's memory: written, exit 1
    assert narrowed.exit_code == 1
    assert json.loads(narrowed.stdout)["files_over_capacity"] == ["torchtitan.sh", "maxtext.yml", "jax_mesh.py"]
    assert "--emit" in narrowed.stderr and "tp_comm_overlap" in narrowed.stderr and "may be faster" in narrowed.stderr
    plain = CliRunner().invoke(main, [*job, "--out", str(tmp_path / "b"), "--emit", "megatron"])
    assert plain.exit_code == 0 and "may be faster" not in plain.stderr
    assert (json.loads(plain.stdout)["plans"][0]["step_time_s"]
            <= json.loads(narrowed.stdout)["plans"][0]["step_time_s"])


MAXTEXT_RUNS = re.compile(r"^# (?:this file runs .*?|predicted): ([\d.]+) s/step.*? ([\d.]+) of [\d.]+ GiB per GPU",
                          re.M)
"""The step and memory of what a maxtext.yml runs: its header's "this file runs" line, else its prediction."""


def _maxtext_header(path) -> tuple[float, float]:
    text = path.read_text()
    runs = [m for m in MAXTEXT_RUNS.finditer(text) if m[0].startswith("# this file runs")]
    m = runs[0] if runs else MAXTEXT_RUNS.search(text)
    assert m, "the header prices what the file runs"
    return float(m[1]), float(m[2])


def test_a_maxtext_files_gpu_order_is_read_from_its_jax_mesh_py(tmp_path):
    """User trial: the plan on PCIe nodes whose GPUs pair over NVLink bridges reorders each host's GPUs, which
    jax_mesh.py sets per host (CUDA_VISIBLE_DEVICES, exported before JAX starts); the audit read no order there, priced
    the numbered order (13.178 s against the header's 9.089 s) and reported a gpu_order error.  It now reads the
    order from jax_mesh.py, with its line, and prices what the header prices."""
    alloc = ["--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"), "--nodelist", "gpu[0036-0039]",
             "--node-type", "dgx-h100", "--node-topo", str(DATA / "nvsmi" / "pcie-8x-nvbridge-pairs.txt")]
    job = ["--model", "llama3-70b", "--seq-len", "4096", "--global-batch", "64", *alloc]
    out = tmp_path / "mx1"
    _run(["plan", *job, "--top-k", "1", "--out", str(out), "--emit", "maxtext"])
    mesh_py = (out / "jax_mesh.py").read_text()
    assert "CUDA_VISIBLE_DEVICES = {'gpu0036': '0,4,1,5,2,6,3,7'" in mesh_py  # the plan reorders each host's GPUs
    step, mem = _maxtext_header(out / "maxtext.yml")
    audit = json.loads(_run(["audit", *job, "--launch", str(out / "maxtext.yml"), "--launch",
                             str(out / "jax_mesh.py"), "--json"]).stdout)
    assert audit["estimate"]["step_time_s"] == pytest.approx(step, abs=5e-4)
    assert audit["estimate"]["peak_memory_bytes"] / 2**30 == pytest.approx(mem, abs=0.05)
    assert not [f for f in audit["findings"] if f["kind"] == "gpu_order"]
    where = audit["layout"]["sources"]["cuda_visible_devices"]
    line = next(i for i, x in enumerate(mesh_py.splitlines(), 1) if x.startswith("CUDA_VISIBLE_DEVICES = "))
    assert where.startswith(f"{out / 'jax_mesh.py'}:{line}: CUDA_VISIBLE_DEVICES = {{'gpu0036': '0,4,1,5,2,6,3,7'")
    assert "cuda_visible_devices" not in audit["layout"].get("unstated", {})


def test_a_maxtext_file_with_cp_and_one_data_rank_runs_zero3_over_context_in_header_and_audit(tmp_path):
    """User trial: tp 2, cp 2, pp 8, dp 1 at ZeRO-1.  The header said dp -> data + shard_optimizer_over_data and
    priced ZeRO-1 (8.207 s, 80.3 GiB), the file has no such key (data 1), and the audit read ZeRO-0 (8.235 s, 98.2
    GiB).  MaxText shards every weight over context (base.yml:605, gathered as fsdp is: layers/pipeline.py:1046)
    and shard_optimizer_over_data over data alone (utils/sharding.py:675): the file runs ZeRO-3 over the 2 context
    ranks, which the header now prices and the audit reads."""
    job = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "32", "--seq-len", "4096", "--global-batch",
           "64"]
    out = tmp_path / "mx2"
    _run(["evaluate", *job, "--tp", "2", "--cp", "2", "--pp", "8", "--vpp", "5", "--zero", "1", "--out", str(out),
          "--emit", "maxtext"])
    text = (out / "maxtext.yml").read_text()
    assert "shard_optimizer_over_data" not in yaml.safe_load(text)
    assert "dp -> data + shard_optimizer_over_data" not in text
    assert "# this file runs ZeRO-3 over the 2 context ranks (not ZeRO-1: MaxText's context axis shards the weights)" \
        in text
    step, mem = _maxtext_header(out / "maxtext.yml")
    audit = json.loads(_run(["audit", *job, "--launch", str(out / "maxtext.yml"), "--json"]).stdout)
    est = audit["estimate"]
    assert (est["layout"]["zero_stage"], est["layout"]["dp_shard"]) == (3, 1)
    assert "base.yml:605 rule embed -> fsdp, context, expert" in audit["layout"]["sources"]["zero_stage"]
    assert est["step_time_s"] == pytest.approx(step, abs=5e-4)
    assert est["peak_memory_bytes"] / 2**30 == pytest.approx(mem, abs=0.05)


def test_maxtext_plans_pair_cp_with_zero3_only():
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "16", "--cp", "2", "--zero", "1",
                                       "--framework", "maxtext"])
    assert result.exit_code == 2 and ("ZeRO-1 with cp 2: its context axis shards the weights, gradients and "
                                      "optimizer state, so it runs ZeRO-3 over the context ranks") in result.stderr


@pytest.mark.parametrize("framework", ["megatron", "torchtitan", "deepspeed", "maxtext"])
def test_an_audit_precision_other_than_the_files_is_refused(tmp_path, framework):
    """A user trial: `audit --precision fp8` on files that train in bf16 priced FP8 (25-30 % faster), while the
    evidence of the same output said `precision bf16`.  The files' precision is what runs: the flag is an error
    naming both and where the files state theirs; the flag that agrees with the files is no conflict."""
    job = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096", "--global-batch",
           "64"]
    out = tmp_path / "files"
    _run(["plan", *job, "--top-k", "1", "--framework", framework, "--emit", framework, "--out", str(out)])
    launch = [x for p in sorted(out.iterdir()) if p.name not in HOST_FILES for x in ("--launch", str(p))]
    bad = CliRunner().invoke(main, ["audit", *job, *launch, "--precision", "fp8"])
    assert bad.exit_code == 2, bad.output[-1500:]
    assert "--precision fp8 but the launch files train in bf16 (" in bad.output
    assert "Traceback" not in bad.output
    _run(["audit", *job, *launch, "--precision", "bf16"])
    # the same for the sequence length (it was priced at the flag's, under the files' source line)
    bad = CliRunner().invoke(main, ["audit", *job[:-4], "--seq-len", "2048", *job[-2:], *launch])
    assert bad.exit_code == 2, bad.output[-1500:]
    assert "--seq-len 2048 but the launch files train sequences of 4096 (" in bad.output


def test_an_audit_seq_len_over_a_variables_default_is_the_environments_setting(tmp_path):
    """A review: `--seq-length $SEQ` with `SEQ=${SEQ:-4096}` was refused against --seq-len 8192 with "change the
    files", where the job's environment sets SEQ.  The flag is that setting: priced, and its source says so."""
    script = tmp_path / "train.sh"
    script.write_text("SEQ=${SEQ:-4096}\ntorchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 32 --hidden-size "
                      "4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention "
                      "--num-query-groups 8 --swiglu --normalization RMSNorm --position-embedding-type rope "
                      "--untie-embeddings-and-output-weights --disable-bias-linear --seq-length $SEQ "
                      "--micro-batch-size 1 --global-batch-size 64 --bf16\n")
    job = ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8"]
    got = json.loads(_run([*job, "--seq-len", "8192", "--json"]).stdout)
    assert got["estimate"]["seq_len"] == 8192
    assert got["layout"]["sources"]["seq_len"].startswith("--seq-len 8192, over the files' default 4096 (")
    assert json.loads(_run([*job, "--json"]).stdout)["estimate"]["seq_len"] == 4096


def test_a_deepspeed_zero0_pipeline_files_header_prices_what_its_audit_prices(tmp_path):
    """bf16 at ZeRO stage 0 under DeepSpeed's PipelineEngine is its BF16_Optimizer: ZeRO-1 sharding, the whole
    gradient all-reduced, each micro-batch's gradient copied into its buffer.  The header prices that (emit.deepspeed
    files_run); the audit of the same files read the launch line's autograd accumulation instead, 7.5 GiB apart (a QA
    run: 56.6 against 49.1 GiB for llama3-8b tp 2 pp 2 on 16 H100)."""
    job = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096", "--global-batch",
           "64"]
    out = tmp_path / "files"
    _run(["evaluate", *job, "--tp", "2", "--pp", "2", "--zero", "0", "--mbs", "1", "--recompute", "none", "--out",
          str(out), "--emit", "deepspeed"])
    header = re.search(r"this file runs .*?: ([\d.]+) s/step .*?([\d.]+) of ([\d.]+) GiB per GPU",
                       (out / "deepspeed.sh").read_text())
    assert header and "BF16_Optimizer" in header.group(0)
    launch = [x for p in sorted(out.iterdir()) if p.name not in HOST_FILES for x in ("--launch", str(p))]
    audit = json.loads(_run(["audit", *job, *launch, "--hosts", str(out / "hosts.txt"), "--json"]).stdout)
    assert audit["estimate"]["recipe"]["grad_accumulation"] == "fp32_copy"
    assert audit["estimate"]["step_time_s"] == pytest.approx(float(header.group(1)), abs=5e-4)
    assert audit["estimate"]["peak_memory_bytes"] / 2**30 == pytest.approx(float(header.group(2)), abs=0.05)


def test_a_maxtext_mesh_that_does_not_tile_the_hosts_is_priced_on_the_groups_it_builds(tmp_path):
    """tp 6 on 8-GPU hosts: MaxText's hybrid mesh splits ICI/DCN by greatest common divisor, so its groups are not the
    plan's rank-order ones (the file warns so).  A QA run: the header priced the plan's groups (36.798 s) and the audit
    of the same maxtext.yml and jax_mesh.py the mesh's (16.963 s); the header now prices the groups the mesh builds."""
    job = ["--model", "gpt3-175b", "--cluster", "dgx-h100", "--gpus", "216", "--seq-len", "2052", "--global-batch",
           "432"]
    out = tmp_path / "mx"
    _run(["evaluate", *job, "--tp", "6", "--mbs", "2", "--zero", "3", "--recompute", "full", "--out", str(out),
          "--emit", "maxtext"])
    text = (out / "maxtext.yml").read_text()
    assert "does not tile hosts of 8 GPUs in rank order" in text
    assert "the groups MaxText's hybrid mesh builds on these hosts" in text
    step, mem = _maxtext_header(out / "maxtext.yml")
    audit = json.loads(_run(["audit", *job, "--launch", str(out / "maxtext.yml"), "--launch", str(out / "jax_mesh.py"),
                             "--hosts", str(out / "hosts.txt"), "--json"]).stdout)
    assert audit["estimate"]["step_time_s"] == pytest.approx(step, abs=5e-4)
    assert audit["estimate"]["peak_memory_bytes"] / 2**30 == pytest.approx(mem, abs=0.05)


def test_maxtext_launch_lines_give_jax_the_priced_capacity(tmp_path):
    """Unset, JAX preallocates 75 % of the GPU (jax gpu_memory_allocation docs), far less than the capacity the plan
    is priced to fit in: the launch lines and launch.sbatch export XLA_PYTHON_CLIENT_MEM_FRACTION, the capacity less
    the reserve the plan keeps outside JAX's pool, as a share of HBM (a review: neither file set it)."""
    out = tmp_path / "mx"
    _run(["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "8192",
          "--global-batch", "64", "--tp", "1", "--zero", "3", "--recompute", "full", "--out", str(out), "--emit",
          "maxtext"])
    plan = json.loads(_run(["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len",
                            "8192", "--global-batch", "64", "--tp", "1", "--zero", "3", "--recompute", "full",
                            "--json"]).stdout)
    from placement.catalog import load_accelerator

    hbm = load_accelerator("h100-sxm").hbm_bytes
    capacity, reserve = plan["memory_capacity_bytes"], plan["memory"]["reserve_bytes"]
    fraction = re.search(r"XLA_PYTHON_CLIENT_MEM_FRACTION=([\d.]+)", (out / "maxtext.yml").read_text())
    # the pool holds every byte the plan prices as fitting, and not a ten-thousandth of the GPU more
    share = (capacity - reserve) / hbm
    assert fraction and 0.75 < share <= float(fraction.group(1)) < share + 1e-4
    assert f"XLA_PYTHON_CLIENT_MEM_FRACTION={fraction.group(1)}" in (out / "launch.sbatch").read_text()
    # and the audit of the files, which prices the pool they set, gives the job the plan's capacity
    audit = json.loads(_run(["audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--launch",
                             str(out / "launch.sbatch"), "--launch", str(out / "maxtext.yml"), "--json"]).stdout)
    assert audit["estimate"]["memory_pool"]["pool_bytes"] == pytest.approx(float(fraction.group(1)) * hbm)
    assert audit["estimate"]["memory_capacity_bytes"] == pytest.approx(capacity)


@pytest.mark.parametrize(("emit", "said"), [
    ("maxtext", "MaxText's JAX keeps a pool of its own instead"),
    ("devicemesh", "which your launcher must set (launch.sbatch launches nothing for device_mesh.py alone)"),
    ("megatron", "which launch.sbatch sets (without it"),
])
def test_the_capacity_note_names_who_sizes_the_allocator_for_the_files_written(tmp_path, emit, said):
    """The capacity's fragmentation allowance assumes PyTorch's expandable segments, "which launch.sbatch sets": not
    so for MaxText, whose JAX pool its launch lines size, nor for a device mesh alone, which launch.sbatch does not
    launch (a QA note)."""
    out = _run(["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "8192",
                "--global-batch", "64", "--tp", "1", "--zero", "3", "--recompute", "full", "--out",
                str(tmp_path / "f"), "--emit", emit]).stdout
    note = next(line for line in out.splitlines() if line.startswith("capacity:"))
    assert said in note
