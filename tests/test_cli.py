"""The CLI end to end: the JSON contract, exit codes, and one-paragraph errors without tracebacks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.calibration.validate import load_runs
from placement.cli import main

LAYOUT_KEYS = {"tp", "cp", "ep", "etp", "pp", "vpp", "dp", "micro_batch_size", "zero_stage", "recompute",
               "sequence_parallel"}
PLAN_KEYS = {"layout", "num_gpus", "step_time_s", "tokens_per_s", "mfu", "hfu", "peak_memory_bytes",
             "memory_capacity_bytes", "breakdown"}
BREAKDOWN_KEYS = {"compute", "tp", "cp", "ep", "pp", "dp", "bubble", "exposed", "overlapped"}


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def check_plan(p: dict) -> None:
    assert PLAN_KEYS <= p.keys()
    assert LAYOUT_KEYS <= p["layout"].keys()
    assert BREAKDOWN_KEYS <= p["breakdown"].keys()
    lay = p["layout"]
    assert lay["tp"] * lay["cp"] * lay["pp"] * lay["dp"] == p["num_gpus"]
    assert 0 < p["mfu"] < 1 and p["hfu"] >= p["mfu"] - 1e-9
    assert p["step_time_s"] > 0
    assert p["tokens_per_s"] == pytest.approx(p["seq_len"] * p["global_batch"] / p["step_time_s"], rel=1e-4)


def test_plan_llama3_405b_16k_gpus():
    code, out, _ = run("plan", "--model", "llama3-405b", "--cluster", "dgx-h100", "--gpus", "16384",
                       "--seq-len", "8192", "--global-batch", "2048", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["search"]["candidates"] > 1000
    steps = [p["step_time_s"] for p in data["plans"]]
    assert steps == sorted(steps)
    for p in data["plans"]:
        check_plan(p)
        assert p["fits"] and p["peak_memory_bytes"] <= p["memory_capacity_bytes"]


def test_plan_deepseek_v3_uses_expert_parallelism():
    code, out, _ = run("plan", "--model", "deepseek-v3", "--cluster", "hgx-h800", "--gpus", "2048",
                       "--seq-len", "4096", "--global-batch", "15360", "--json", "--top-k", "2")
    assert code == 0
    best = json.loads(out)["plans"][0]
    check_plan(best)
    assert best["layout"]["ep"] > 1
    assert best["breakdown"]["ep"] > 0


def test_evaluate_matches_plan_estimate(tmp_path):
    args = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "8192",
            "--global-batch", "128"]
    code, out, _ = run("plan", *args, "--json", "--top-k", "1")
    best = json.loads(out)["plans"][0]
    lay = best["layout"]
    # the plan searched its recipe choices: evaluate the layout under the recipe the plan chose
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(json.dumps(best["recipe"]))
    code, out, _ = run("evaluate", *args, "--json", "--recipe", str(recipe), "--tp", str(lay["tp"]),
                       "--cp", str(lay["cp"]), "--pp", str(lay["pp"]), "--vpp", str(lay["vpp"]),
                       "--mbs", str(lay["micro_batch_size"]),
                       "--zero", str(lay["zero_stage"]), "--recompute", lay["recompute"],
                       *(["--dp-shard", str(lay["dp_shard"])] if lay["dp_shard"] != lay["dp"] else []),
                       "--sequence-parallel" if lay["sequence_parallel"] else "--no-sequence-parallel")
    assert code == 0
    assert json.loads(out)["step_time_s"] == best["step_time_s"]


def test_evaluate_over_capacity_prints_estimate_and_exits_1():
    code, out, _ = run("evaluate", "--model", "llama3-405b", "--cluster", "dgx-h100", "--gpus", "64",
                       "--seq-len", "8192", "--global-batch", "64", "--tp", "8", "--pp", "1", "--zero", "0", "--json")
    assert code == 1
    data = json.loads(out)
    assert data["fits"] is False
    assert data["peak_memory_bytes"] > data["memory_capacity_bytes"]
    assert data["memory"]["weights_bytes"] > 0


def test_show_model_and_cluster():
    code, out, _ = run("show", "model", "llama3-405b", "--json")
    facts = json.loads(out)
    assert code == 0 and 400e9 < facts["total_params"] < 410e9
    code, out, _ = run("show", "cluster", "dgx-h100", "--gpus", "2048", "--json")
    levels = json.loads(out)["levels"]
    assert code == 0 and [lv["name"] for lv in levels] == ["nvlink4", "leaf", "spine", "core"]
    code, out, _ = run("show", "model", "deepseek-v3")
    assert code == 0 and "experts" in out
    code, out, _ = run("show", "accelerators")
    assert code == 0 and {"h100-sxm", "b200", "mi300x"} <= set(out.split())


def test_validate_meets_accuracy_targets_and_every_run_fits():
    code, out, _ = run("validate", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["mean_abs_error"] <= 0.05
    assert data["max_abs_error"] <= 0.10
    assert all(r["predicted_step_time_s"] is not None for r in data["runs"])
    # a run may be priced over the memory model's capacity only at the recompute its source states (the run fit);
    # every other run fits, and the text table marks the over-capacity ones
    runs = {r.id: r for r in load_runs()}
    over = [r["id"] for r in data["runs"] if not r["fits"]]
    assert all("recompute" in runs[i].layout for i in over), over
    assert all(r["peak_memory_gib"] > r["memory_capacity_gib"] for r in data["runs"] if not r["fits"])
    code, text, _ = run("validate")
    for i in over:
        line = next(line for line in text.splitlines() if line.startswith(i + " "))
        assert re.search(r" \d+\.\d/\d+ over( |$)", line), line  # the memory column, before what the row searched
    assert all(r["fits"] for r in data["runs"] if r["group"] in ("ptdp-2021-table1", "korthikanti-2022-table5"))
    targets = [r for r in data["runs"] if r["group"] in ("ptdp-2021-table1", "korthikanti-2022-table5")]
    assert len(targets) == 18
    assert max(abs(r["error"]) for r in targets) == pytest.approx(data["max_abs_error"], abs=1e-4)


# --- bad input: message, exit code 2, no traceback ----------------------------------------------------

def bad(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


GOOD_MODEL = """name: tiny
num_layers: 4
hidden_size: 512
ffn_hidden_size: 2048
num_attention_heads: 8
num_kv_heads: 2
vocab_size: 32000
"""


@pytest.mark.parametrize(
    ("filename", "text", "message"),
    [
        ("broken.yaml", "name: x\nnum_layers: [1, 2\n", r"malformed YAML"),
        ("unknown.yaml", GOOD_MODEL + "num_layer: 4\n", r"`num_layer`.*Extra inputs are not permitted"),
        ("gqa.yaml", GOOD_MODEL.replace("num_kv_heads: 2", "num_kv_heads: 3"),
         re.escape("num_attention_heads (8) is not divisible by num_kv_heads (3)")),
        ("negative.yaml", GOOD_MODEL.replace("hidden_size: 512", "hidden_size: -512"),
         r"`hidden_size` = -512"),
        ("config.json", json.dumps({"model_type": "mamba", "hidden_size": 8}), r"mamba.*llama"),
    ],
)
def test_bad_model_inputs(tmp_path, filename, text, message):
    path = bad(tmp_path, filename, text)
    code, out, err = run("plan", "--model", path, "--gpus", "8")
    assert code == 2
    assert out == ""
    assert re.search(message, err), err
    assert filename in err  # the error names the file
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_unknown_catalog_names_list_the_known_ones():
    code, _, err = run("plan", "--model", "llama9", "--gpus", "8")
    assert code == 2 and "llama3-405b" in err
    code, _, err = run("plan", "--model", "llama3-8b", "--cluster", "dgx-z1", "--gpus", "8")
    assert code == 2 and "dgx-h100" in err


def test_bad_numbers():
    code, _, err = run("plan", "--model", "llama3-8b", "--gpus", "12")
    assert code == 2 and "--gpus 12" in err and "8 or 16" in err
    code, _, err = run("plan", "--model", "llama3-8b", "--gpus", "8", "--seq-len", "-4")
    assert code == 2 and "--seq-len -4" in err
    code, _, err = run("evaluate", "--model", "llama3-8b", "--gpus", "8", "--tp", "3")
    assert code == 2 and "does not divide" in err
    code, _, err = run("evaluate", "--model", "llama3-8b", "--gpus", "8", "--tp", "2", "--etp", "2")
    assert code == 2 and "llama3-8b has no experts; both must be 1" in err


def test_gpu_count_with_no_layout_is_not_called_a_memory_problem():
    # 296 GPUs = 8 x 37: dp must divide the batch of 512, so pp would have to be 37 on 32 layers (104 = 8 x 13 runs
    # pp 13, the remainder of 32 / 13 spread over the middle stages)
    code, out, err = run("plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "37")
    assert code == 1 and out == ""
    assert "infeasible (divisibility)" in err and "GiB" not in err
    assert "try --gpus 256 or --gpus 512" in err
    code, out, _ = run("plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "13")
    assert code == 0 and "pp13" in out


def test_job_that_fits_nowhere_explains_binding_constraint():
    code, out, err = run("plan", "--model", "llama3-405b", "--cluster", "dgx-h100", "--gpus", "8",
                         "--seq-len", "8192", "--global-batch", "8")
    assert code == 1 and out == ""
    assert "GiB per GPU" in err and "capacity" in err and "--gpus" in err
    assert "Traceback" not in err


def test_installed_entry_point_runs_as_a_process():
    proc = subprocess.run([sys.executable, "-m", "placement.cli", "plan", "--model", "nonexistent-model"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "nonexistent-model" in proc.stderr


def test_emit_writes_framework_files_with_a_header(tmp_path):
    code, _, err = run("plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "8192",
                       "--global-batch", "128", "--top-k", "5", "--emit", "all", "--out", str(tmp_path),
                       "--plan-index", "4")
    # plan 4 is ZeRO-2 under a pipeline: torchtitan's run of it is over the GPU's memory here, and DeepSpeed refuses
    # its pipeline with ZeRO-2 at start-up: every file is written, and the command exits 1 naming both
    assert code == 1, err
    assert ("what torchtitan.sh runs instead of the plan is over the GPU's memory; deepspeed.sh is refused at "
            "start-up by its framework" in err and "leave torchtitan, deepspeed out of --emit" in err), err
    titan = (tmp_path / "torchtitan.sh").read_text()
    mesh = (tmp_path / "device_mesh.py").read_text()
    mega = (tmp_path / "megatron.sh").read_text()
    assert "--tensor-model-parallel-size" in mega
    # Megatron needs CUDA_DEVICE_MAX_CONNECTIONS=1 with TP/CP > 1, and Megatron-FSDP (ZeRO-2/3) refuses it
    fsdp = any("--use-megatron-fsdp" in line or "ZeRO-2" in line or "ZeRO-3" in line
               for line in mega.splitlines()[:3])
    assert ("export CUDA_DEVICE_MAX_CONNECTIONS=1" in mega) != fsdp
    assert titan.startswith("# torchtitan 0.3.0 launch") and "predicted:" in titan
    assert titan.count("torchrun --nnodes 8 --nproc-per-node 8") == 8
    assert "init_device_mesh(" in mesh and "mesh_dim_names=('pp', 'dp', 'cp', 'tp')" in mesh
    compile(mesh, "device_mesh.py", "exec")  # the snippet is valid Python


def test_emit_input_errors(tmp_path):
    base = ["plan", "--model", "llama3-8b", "--gpus", "8", "--top-k", "1"]
    code, _, err = run(*base, "--emit", "horovod", "--out", str(tmp_path))
    assert code == 2 and "unknown format(s) horovod" in err and "torchtitan, megatron, devicemesh" in err
    code, _, err = run(*base, "--emit", "all")
    assert code == 2 and "--emit writes files: give --out DIR" in err


def test_a_model_file_that_is_not_utf8_is_bad_input(tmp_path):
    path = tmp_path / "model.yaml"
    path.write_bytes(b"name: x\nsource: \xff\xfe\n")
    code, out, err = run("plan", "--model", str(path))
    assert code == 2 and out == ""
    # the line, not a byte offset (a user trial's launch script had one Latin-1 byte in a comment)
    assert f"model file `{path}`:2: byte 0xff is not UTF-8" in err and "re-save the file as UTF-8" in err


def test_evaluate_writes_the_launch_files_of_the_layout_it_prices(tmp_path):
    code, out, err = run("evaluate", "--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--pp", "2", "--json",
                         "--out", str(tmp_path), "--emit", "megatron,torchtitan")
    assert code == 0, err
    step = json.loads(out)["step_time_s"]
    for name in ("hosts.txt", "megatron.sh", "torchtitan.sh"):
        assert (tmp_path / name).is_file()
    text = (tmp_path / "megatron.sh").read_text()
    assert f"# predicted: {step:.3f} s/step" in text
    assert "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2" in text
    code, _, err = run("evaluate", "--model", "llama3-8b", "--gpus", "16", "--emit", "megatron")
    assert code == 2 and "--emit writes files: give --out DIR as well" in err


def test_the_emit_help_names_every_format():
    from placement.cli import EMIT_HELP
    from placement.emit.writer import FORMATS

    assert all(name in EMIT_HELP for name in FORMATS)


@pytest.mark.parametrize(("argv", "says"), [
    (["plan", "--model", "llama3-8b", "--gpus", "eight"],
     "Invalid value for '--gpus': 'eight' is not a valid integer; give a whole number (see `placement plan -h`"),
    (["plan", "--model", "llama3-8b", "--precision", "fp16"], "'fp16' is not one of 'bf16', 'fp8'; see `placement"),
    (["plan", "--gpus", "8"], "Missing option '--model'; give it (see `placement plan -h`"),
    (["plan", "--model", "llama3-8b", "--gpu", "8"], "No such option '--gpu'"),
    (["plan", "--model", "llama3-8b", "--gpus", "8", "--emit", "megatrn", "--out", "o"], "did you mean megatron?"),
    (["plan", "--model", "llama3-8b", "--gpus", "8", "--plan-index", "3"],
     "--plan-index 3 picks the plan whose files --out writes; give --out DIR"),
])
def test_a_bad_flag_or_value_is_one_paragraph_with_the_fix(argv, says) -> None:
    """A user trial: click's own errors printed Usage / Try / Error blocks, `--gpus eight` named no fix,
    `--emit megatrn` got no "did you mean", and --plan-index without --out was ignored without a word."""
    code, out, err = run(*argv)
    assert code == 2 and out == ""
    assert err.startswith("placement: ") and err.count("\n") == 1 and says in err, err
    assert "Usage:" not in err and "Traceback" not in err


def test_a_closed_pipe_ends_quietly_and_evaluate_json_has_its_mapping():
    """`placement evaluate ... | head -2` said "internal error (BrokenPipeError)": the reader going away is no bug.
    And evaluate's one plan has its compact mapping and rank table (README: every plan), which were null in the
    allocation order."""
    cmd = [sys.executable, "-m", "placement.cli", "evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100",
           "--gpus", "16", "--tp", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader gone before the first line (pricing takes a second), as `head` once done
    err = proc.stderr.read().decode()
    assert proc.wait() == 141 and "internal error" not in err and "Traceback" not in err
    code, out, _ = run("evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--tp", "2",
                       "--json")
    data = json.loads(out)
    assert code == 0 and data["mapping_compact"]["host_order"] == ["host0", "host1"]
    assert [row["rank"] for row in data["mapping"]] == list(range(16))


def test_json_keeps_its_keys_where_a_script_reads_them():
    """A user check of the README's JSON contract: `plan --json` of an infeasible job printed nothing on stdout (a
    script's json.loads failed), `validate --json` left out `calibration` and `summary` (null without a profile), and
    each PLAN of `plan --json` had `job_defaults` null beside the top's."""
    code, out, err = run("plan", "--model", "llama3-405b", "--cluster", "dgx-h100", "--gpus", "8", "--json")
    assert code == 1 and "infeasible (memory)" in err
    data = json.loads(out)
    assert data["plans"] == [] and data["infeasible"]["binding"] == "memory"
    assert data["infeasible"]["message"] in err and "job_defaults" in data
    code, out, _ = run("plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--json", "--top-k", "2")
    data = json.loads(out)
    assert data["job_defaults"] and all(p["job_defaults"] == data["job_defaults"] for p in data["plans"])
    code, out, _ = run("validate", "--json")
    data = json.loads(out)
    assert data["calibration"] is None and data["summary"] is None


def test_reproducible_after_the_command_names_where_it_goes() -> None:
    """A user trial wrote `placement plan ... --reproducible` and was offered --recipe or --recompute-modules."""
    got = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--gpus", "8", "--reproducible"])
    assert got.exit_code == 2 and "Traceback" not in got.output
    assert "placement --reproducible plan" in got.output and "PLACEMENT_REPRODUCIBLE=1" in got.output
