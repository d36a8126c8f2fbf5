"""torchtitan 0.3.0's llama3_8b_mxfp8 (models/llama3/config_registry.py:242-254): llama3_8b with every linear layer,
the LM head too, converted to torchao's MXFP8Linear and the transformer blocks compiled.  It is what
`--framework torchtitan --precision fp8` runs for Llama 3 8B on Blackwell, priced as it runs (fp8_recipe mxfp8, the
16-bit inputs torchao saves and casts again in backward, an FP8 LM head); on Hopper it cannot start
(components/quantization/mx.py:70-71), so FP8 is refused there with that reason; an audit of its command line reads
the same recipe.

From the task: the plan was refused on B200 ("llama3_8b config has no Float8 converter"), and an audit of the mxfp8
command line priced BF16 (its converter "not priced") or refused --model llama3-8b as another config."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

LINE = ("torchrun --nnodes 1 --nproc-per-node 8 -m torchtitan.train --module llama3 --config llama3_8b_mxfp8 "
        "--parallelism.data_parallel_shard_degree 8 --parallelism.tensor_parallel_degree 1 "
        "--parallelism.pipeline_parallel_degree 1 --parallelism.context_parallel_degree 1 "
        "--parallelism.expert_parallel_degree 1 --training.local_batch_size 1 --training.seq_len 8192 "
        "--training.global_batch_size 64\n")
"""A torchtitan 0.3.0 line running llama3_8b_mxfp8 on one 8-GPU node."""


def _plan(tmp_path: Path, cluster: str, *extra: str):
    return CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", cluster, "--gpus", "8",
                                     "--precision", "fp8", "--seq-len", "8192", "--global-batch", "64", "--top-k", "1",
                                     "--json", "--out", str(tmp_path), "--emit", "torchtitan", *extra])


def _evaluate(cluster: str, *extra: str) -> dict:
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", cluster, "--gpus", "8",
                                       "--precision", "fp8", "--seq-len", "8192", "--global-batch", "64", "--zero", "3",
                                       "--json", *extra])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("cluster", ["dgx-b200", "gb200-nvl72"])
def test_a_blackwell_fp8_plan_for_torchtitan_runs_llama3_8b_mxfp8_priced_with_its_recipe(tmp_path, cluster):
    result = _plan(tmp_path, cluster, "--framework", "torchtitan")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)["plans"][0]
    recipe, sources = plan["recipe"], plan["recipe_sources"]
    assert (recipe["fp8_recipe"], recipe["fp8_lm_head"], recipe["fp8_saves_16bit_inputs"]) == ("mxfp8", True, True)
    assert "llama3_8b_mxfp8" in sources["fp8_recipe"] and "mxfp8_linear.py" in sources["fp8_recipe"]
    assert "mxfp8_linear.py:108" in sources["fp8_saves_16bit_inputs"]
    assert "lm_head" in sources["fp8_lm_head"] and "mx.py:55-60, 82-83" in sources["fp8_lm_head"]
    text = (tmp_path / "torchtitan.sh").read_text()
    assert "--module llama3 --config llama3_8b_mxfp8 " in text
    assert "# torch.compile on for each transformer block" in text and "as llama3_8b_mxfp8 sets it" in text
    assert "# this file runs" not in text  # priced as it runs: no re-priced line
    assert "no Float8 converter" not in result.stderr


def test_a_blackwell_fp8_plan_without_the_framework_says_what_llama3_8b_mxfp8_runs_with_its_time(tmp_path):
    """Priced as Transformer Engine's MXFP8 (1-byte saved inputs, a 16-bit head), the file runs torchao's: the
    header re-prices it with both, and says so."""
    result = _plan(tmp_path, "dgx-b200", "--zero", "3", "--attention-kernel", "flash2", "--sp-saves-gathered-inputs",
                   "--loss-chunks", "8", "--grad-reduce-fp32")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)["plans"][0]
    assert not plan["recipe"]["fp8_lm_head"] and not plan["recipe"]["fp8_saves_16bit_inputs"]
    text = (tmp_path / "torchtitan.sh").read_text()
    assert "--config llama3_8b_mxfp8 " in text
    runs = re.search(r"^# this file runs (.*?): ([\d.]+) s/step \(", text, re.MULTILINE)
    assert runs is not None
    assert "fp8_saves_16bit_inputs True (not False)" in runs.group(1)
    assert "fp8_lm_head True (not False)" in runs.group(1)
    assert "fp8_recasts_weights True (not False)" in runs.group(1)
    lay = plan["layout"]
    flags = ["--mbs", str(lay["micro_batch_size"]), "--recompute", lay["recompute"], "--attention-kernel", "flash2",
             "--loss-chunks", "8", "--grad-reduce-fp32", "--fp8-saves-16bit-inputs", "--fp8-lm-head",
             "--fp8-recasts-weights", "--cuda-graphs", plan["recipe"]["cuda_graphs"]]
    if plan["recipe"]["recompute_modules"]:
        flags += ["--recompute-modules", ",".join(plan["recipe"]["recompute_modules"])]
    assert float(runs.group(2)) == pytest.approx(_evaluate("dgx-b200", *flags)["step_time_s"], rel=2e-3)


def test_hopper_still_refuses_torchtitan_fp8_for_llama3_8b_naming_the_mxfp8_config(tmp_path):
    result = _plan(tmp_path, "dgx-h100", "--framework", "torchtitan")
    assert result.exit_code != 0
    assert "llama3_8b config has no Float8 converter" in result.output
    assert "its llama3_8b_mxfp8 config (MXFP8 linear layers) does not run on h100-sxm" in result.output
    assert "components/quantization/mx.py:70-71" in result.output and "plan with --precision bf16" in result.output


def test_a_hopper_fp8_file_for_llama3_8b_runs_bf16_and_says_why_not_mxfp8(tmp_path):
    result = _plan(tmp_path, "dgx-h100", "--zero", "3")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "torchtitan.sh").read_text()
    assert "--config llama3_8b " in text and "llama3_8b_mxfp8 config (MXFP8 linear layers) does not run on" in text
    assert re.search(r"^# this file runs bf16 \(not fp8\)", text, re.MULTILINE)


def test_an_fp8_lm_head_runs_faster_and_torchaos_mxfp8_casts_its_saved_inputs_again():
    """fp8_lm_head prices the head's GEMMs at the FP8 rate; MXFP8 that saves 16-bit inputs (torchao) reads them again
    in backward (6 bytes an element, not Transformer Engine's 4); row-wise scaling already counts both casts."""
    base = _evaluate("dgx-b200", "--mbs", "1")["breakdown"]["compute"]
    assert _evaluate("dgx-b200", "--mbs", "1", "--fp8-lm-head")["breakdown"]["compute"] < base
    assert _evaluate("dgx-b200", "--mbs", "1", "--fp8-saves-16bit-inputs")["breakdown"]["compute"] > base
    rowwise = ("--mbs", "1", "--fp8-recipe", "rowwise")
    assert _evaluate("dgx-b200", *rowwise, "--fp8-saves-16bit-inputs")["breakdown"]["compute"] == pytest.approx(
        _evaluate("dgx-b200", *rowwise)["breakdown"]["compute"])


def _audit(tmp_path: Path, cluster: str):
    path = tmp_path / "mx.sh"
    path.write_text(LINE)
    return CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), "--model", "llama3-8b",
                                     "--cluster", cluster, "--gpus", "8", "--json"])


def test_an_audit_of_the_mxfp8_line_prices_mxfp8_with_an_fp8_head(tmp_path):
    """As launched and as the best plan (written for the same config): fp8, MXFP8, torchao's saved 16-bit inputs and
    the FP8 LM head; --model llama3-8b is the model the config trains."""
    result = _audit(tmp_path, "dgx-b200")
    assert result.exit_code in (0, 1), result.output  # 1: findings (the micro-batch 1 it launches costs 11 %)
    data = json.loads(result.stdout)
    for priced in (data["estimate"], data["best"]):
        recipe = priced["recipe"]
        assert priced["precision"] == "fp8"
        assert (recipe["fp8_recipe"], recipe["fp8_lm_head"], recipe["fp8_saves_16bit_inputs"]) == ("mxfp8", True, True)
    assert "llama3_8b_mxfp8" in data["estimate"]["recipe_sources"]["fp8_recipe"]


def test_an_audit_of_the_mxfp8_line_on_hopper_says_torchtitan_stops_it(tmp_path):
    result = _audit(tmp_path, "dgx-h100")
    assert result.exit_code != 0
    assert "llama3:llama3_8b_mxfp8 with MXFP8 linear layers" in result.output
    assert "stops such a job at start on h100-sxm" in result.output
