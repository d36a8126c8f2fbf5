"""plan --framework F plans only what F runs as priced, and the audit of its own files agrees (issue: launch
files that run exactly what was priced): same layout and recipe, speed-up 1.00, no finding above info."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.cli import main

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
        if framework == "torchtitan":  # no ZeRO-1, no expert TP, even stages
            assert lay["zero_stage"] != 1 and lay["etp"] == 1 and 32 % (lay["pp"] * lay["vpp"]) == 0
        elif framework == "deepspeed":  # no interleaving, CP, HSDP, own EP; ZeRO-1 only with PP; no ZeRO-0
            assert lay["vpp"] == 1 and lay["cp"] == 1 and lay["ep"] == 1 and lay["zero_stage"] != 0
            assert lay["pp"] == 1 or lay["zero_stage"] == 1
            assert lay["dp_shard"] == lay["dp"]
        elif framework == "maxtext":  # no ZeRO-2, no pipeline, etp = tp, EP not across CP
            assert (lay["zero_stage"] != 2 and lay["pp"] == 1 and lay["etp"] in (1, lay["tp"])) or lay["ep"] == 1
            assert lay["ep"] == 1 or lay["cp"] == 1
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
    layout = ["--tp", "2", "--pp", "4", "--zero", "1", "--mbs", "1", "--framework", "deepspeed"]
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
    import re

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
    assert narrowed.exit_code == 0
    assert "--emit" in narrowed.stderr and "tp_comm_overlap" in narrowed.stderr and "may be faster" in narrowed.stderr
    plain = CliRunner().invoke(main, [*job, "--out", str(tmp_path / "b"), "--emit", "megatron"])
    assert plain.exit_code == 0 and "may be faster" not in plain.stderr
    assert (json.loads(plain.stdout)["plans"][0]["step_time_s"]
            <= json.loads(narrowed.stdout)["plans"][0]["step_time_s"])
