"""An eager float32 loss (torchtitan's cross-entropy on `pred.float()` where nothing compiles it) holds 12 bytes a logit
at its backward, not the 6 of Megatron's in-place loss: priced by `recipe.loss_eager_float32`, read from torchtitan's
files by version (compile.enable/components; training.compile, which left the loss eager from e8977b00 to bbb1b616)
and set per config by `--framework torchtitan`.  A user trial found torchtitan's own eager-loss benchmarks 20-36 %
above the memory placement priced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.catalog import load_model
from placement.cli import main

JOB = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--seq-len", "8192", "--global-batch", "8",
       "--tp", "1", "--pp", "1", "--mbs", "1", "--zero", "3", "--recompute", "full"]


def _evaluate(*argv: str) -> dict:
    result = CliRunner().invoke(main, ["evaluate", *argv, "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _logits(plan: dict) -> float:
    return plan["memory"]["logits_bytes"]


def test_an_eager_float32_loss_holds_three_float32_copies_of_the_logits():
    model = load_model("llama3-8b")
    logits = 8192 * model.vocab_size  # one micro-batch of one sequence, no TP
    megatron, eager = _evaluate(*JOB), _evaluate(*JOB, "--loss-eager-float32")
    assert _logits(megatron) == pytest.approx(logits * 6)
    assert _logits(eager) == pytest.approx(logits * 12)
    assert eager["peak_memory_bytes"] - megatron["peak_memory_bytes"] == pytest.approx(logits * 6)
    assert eager["step_time_s"] == megatron["step_time_s"]  # the same traffic, priced as Megatron's unfused loss


def test_a_chunk_loop_also_keeps_the_chunks_16bit_logits():
    model = load_model("llama3-8b")
    chunk = 8192 // 8 * model.vocab_size
    plan = _evaluate(*JOB, "--loss-eager-float32", "--loss-chunks", "8")
    assert _logits(plan) == pytest.approx(chunk * (12 + 2))
    assert _logits(_evaluate(*JOB, "--loss-chunks", "8")) == pytest.approx(chunk * 6)


def test_the_memory_table_says_what_a_logit_holds():
    text = CliRunner().invoke(main, ["evaluate", *JOB, "--loss-eager-float32"]).output
    assert "logits held for the loss (12 B a logit: eager float32 loss)" in text
    assert "eager float32 loss" in next(line for line in text.splitlines() if line.startswith("recipe:"))


@pytest.mark.parametrize(("model", "precision", "eager", "why"), [
    ("llama3-8b", "bf16", True, "compile.enable is false by default"),
    ("llama3-405b", "fp8", False, "llama3_405b compiles its loss"),  # its config always converts to Float8
])
def test_framework_torchtitan_prices_the_loss_its_config_runs(model, precision, eager, why):
    plan = _evaluate("--model", model, "--gpus", "512", "--seq-len", "8192", "--global-batch", "512", "--tp", "8",
                     "--pp", "8", "--zero", "3", "--mbs", "1", "--precision", precision, "--framework", "torchtitan")
    assert plan["recipe"]["loss_eager_float32"] is eager
    assert why in plan["recipe_sources"]["loss_eager_float32"]


def test_framework_torchtitan_refuses_a_compiled_loss_its_llama3_8b_file_does_not_run():
    result = CliRunner().invoke(main, ["evaluate", *JOB, "--framework", "torchtitan", "--no-loss-eager-float32"])
    assert result.exit_code == 2 and "always runs loss_eager_float32 = True" in result.output


# --- the audit: torchtitan's files by version --------------------------------------------------------------------

MODEL = '[model]\nname = "llama3"\nflavor = "8B"\n'


def _audit(tmp_path: Path, toml: str, *flags: str) -> tuple[dict, str]:
    path = tmp_path / "job.toml"
    path.write_text(toml)
    argv = ["audit", "--launch", str(path), "--model", "llama3-8b", "--gpus", "8", *flags]
    data = json.loads(CliRunner().invoke(main, [*argv, "--json"]).stdout)
    return data, CliRunner().invoke(main, argv).output


def _eager(data: dict) -> tuple[bool, str]:
    est = data["estimate"]
    return est["recipe"]["loss_eager_float32"], est["recipe_sources"]["loss_eager_float32"]


@pytest.mark.parametrize(("compile_section", "eager"), [
    ("enable = false\ncomponents = [\"model\", \"loss\"]\n", True),
    ("enable = true\ncomponents = [\"model\", \"loss\"]\n", False),
    ("enable = true\ncomponents = [\"model\"]\n", True),
    ("enable = true\n", False),  # components default to model and loss
])
def test_compile_components_decide_the_loss(tmp_path, compile_section, eager):
    data, _ = _audit(tmp_path, MODEL + "[training]\nlocal_batch_size = 1\nseq_len = 8192\n[compile]\n"
                     + compile_section)
    got, where = _eager(data)
    assert got is eager and where.startswith("launch:") and "job.toml" in where


@pytest.mark.parametrize(("keys", "eager", "note"), [
    # print_args is first in torchtitan's JobConfig on 2024-12-23, experimental.pipeline_parallel_degree last on
    # 2025-03-14: within e8977b00..bbb1b616, whose training.compile left the loss eager
    ("[job]\nprint_args = true\n[experimental]\npipeline_parallel_degree = 1\n", True, False),
    # training.data_parallel_degree is last on 2024-09-07: before e8977b00, training.compile compiled the loss
    ("[parallelism]\n[training]\ndata_parallel_degree = -1\n", False, False),
    # checkpoint.initial_load_path is first on 2025-06-13: after bbb1b616
    ("[checkpoint]\ninitial_load_path = \"x\"\n", False, False),
    # nothing dates the file against the span: priced eager, the larger peak, with a note
    ("", True, True),
])
def test_training_compile_compiles_the_loss_except_from_e8977b00_to_bbb1b616(tmp_path, keys, eager, note):
    toml = MODEL + "[training]\nbatch_size = 1\nseq_len = 8192\ncompile = true\n" + keys
    if "[training]\ndata_parallel_degree" in keys:
        toml = MODEL + "[training]\nbatch_size = 1\nseq_len = 8192\ncompile = true\ndata_parallel_degree = -1\n"
    data, text = _audit(tmp_path, toml)
    got, where = _eager(data)
    assert got is eager
    assert ("e8977b00" in where or "bbb1b616" in where) and (("leave open" in where) is note)
    assert ("- loss: the files' keys leave open" in text) is note


def test_a_toml_without_compile_runs_the_loss_eagerly(tmp_path):
    data, _ = _audit(tmp_path, MODEL + "[training]\nbatch_size = 1\nseq_len = 8192\n")
    assert _eager(data)[0] is True


def test_a_flag_that_replaces_a_value_the_files_state_says_so_on_its_line(tmp_path):
    data, text = _audit(tmp_path, MODEL + "[training]\nbatch_size = 1\nseq_len = 8192\n", "--no-loss-eager-float32")
    assert data["estimate"]["recipe"]["loss_eager_float32"] is False
    line = next(x for x in text.splitlines() if x.startswith("  recipe.loss_eager_float32 "))
    assert line.startswith("  recipe.loss_eager_float32 True: ")
    assert line.endswith("; priced with False instead (a flag)")


def test_torchtitans_own_files_audit_to_the_plans_price(tmp_path):
    """plan --framework torchtitan writes llama3_8b's files (no compile: an eager loss in 8 chunks); their audit reads
    the same loss and prices the same step and peak."""
    out = tmp_path / "p"
    result = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--gpus", "16", "--seq-len", "8192",
                                       "--global-batch", "32", "--framework", "torchtitan", "--emit", "torchtitan",
                                       "--out", str(out), "--json"])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.stdout)
    best = data["plans"][data["files_plan_index"] - 1]  # 1-based, as --plan-index
    audit = CliRunner().invoke(main, ["audit", "--launch", str(out / "torchtitan.sh"), "--launch",
                                      str(out / "launch.sbatch"), "--model", "llama3-8b", "--gpus", "16", "--json"])
    est = json.loads(audit.stdout)["estimate"]
    assert est["recipe"]["loss_eager_float32"] is True and best["recipe"]["loss_eager_float32"] is True
    assert est["peak_memory_bytes"] == pytest.approx(best["peak_memory_bytes"])
    assert est["step_time_s"] == pytest.approx(best["step_time_s"])
