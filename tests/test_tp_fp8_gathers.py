"""Under FP8 with sequence parallelism Transformer Engine quantises before its tensor-parallel all-gathers (the norm's
output before the column-parallel GEMMs, its re-gather in backward, the row-parallel linears' output gradients):
those move 1 byte an element, the reduce-scatters 2 (TE v1.11 module/layernorm_linear.py:125-164, base.py
grad_output_preprocess; v2.9 layernorm_linear.py:246-265, 669-674).  torchtitan's row-wise Float8 and MaxText gather
16-bit values (recipe tp_gathers_16bit).  Before, every TP collective was priced at 2 bytes an element under FP8 too,
and the NeMo 24.07 GPT-3 175B row on 128 H100 came out 8.7 % slow."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from placement.calibration.validate import load_runs, predict
from placement.cli import main
from tests.file_edits import replaced

RUNS = {r.id: r for r in load_runs()}
DATA = Path(__file__).parent / "data" / "audit" / "torchtitan"


def _with_recipe(run, **update):
    return run.model_copy(update={"recipe": run.recipe.model_copy(update=update)})


def _evaluate_json(*args: str) -> dict:
    result = CliRunner().invoke(main, ["evaluate", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _evaluate(*extra: str) -> dict:
    return _evaluate_json("--model", "gpt3-175b", "--cluster", "dgx-h100", "--gpus", "128", "--seq-len", "2048",
                          "--global-batch", "256", "--tp", "4", "--pp", "8", "--vpp", "6", "--mbs", "1", "--zero",
                          "1", "--recompute", "none", "--sequence-parallel", *extra)


@pytest.mark.parametrize("run_id", ["nemo-24.07-h100-gpt3-175b-128gpu", "dgxc-25.05-h100-llama31-405b-fp8-512gpu"])
def test_fp8_rows_on_transformer_engine_gather_one_byte(run_id) -> None:
    """The rows it fixes: priced with 16-bit gathers they come out slower than published by two points or more."""
    run = RUNS[run_id]
    assert run.precision == "fp8" and run.layout["tp"] > 1 and not run.recipe.tp_gathers_16bit
    fp8, wide = predict(run), predict(_with_recipe(run, tp_gathers_16bit=True))
    assert wide.error > fp8.error + 0.015
    assert abs(fp8.error) < abs(wide.error)


def test_the_tp_bytes_are_seven_tenths_under_fp8_and_unchanged_in_bf16() -> None:
    """Per layer under SP: 2 forward and 2 backward all-gather + reduce-scatter pairs and 2 backward re-gathers: six
    gathers at 1 byte and four reduce-scatters at 2 bytes, 14 of the 20 units 16-bit collectives would send; the
    time shrinks with them; a BF16 job is priced as before whatever the field says."""
    fp8 = _evaluate("--precision", "fp8")
    wide = _evaluate("--precision", "fp8", "--tp-gathers-16bit")
    bf16 = _evaluate("--precision", "bf16")
    bf16_flag = _evaluate("--precision", "bf16", "--tp-gathers-16bit")
    sent = [d["crossings"]["tp"]["bytes_per_member_per_step"] for d in (fp8, wide, bf16)]
    assert sent[0] == pytest.approx(0.7 * sent[1], rel=1e-9)
    assert sent[1] == pytest.approx(sent[2], rel=1e-9)
    assert fp8["breakdown"]["tp"] < 0.8 * wide["breakdown"]["tp"]
    assert bf16["step_time_s"] == bf16_flag["step_time_s"]
    assert wide["recipe"]["tp_gathers_16bit"] is True and fp8["recipe"]["tp_gathers_16bit"] is False


def test_without_sequence_parallelism_the_all_reduces_stay_16_bit() -> None:
    fp8 = _evaluate("--precision", "fp8", "--no-sequence-parallel")
    wide = _evaluate("--precision", "fp8", "--no-sequence-parallel", "--tp-gathers-16bit")
    assert fp8["step_time_s"] == wide["step_time_s"]
    assert np.isclose(fp8["crossings"]["tp"]["bytes_per_member_per_step"],
                      wide["crossings"]["tp"]["bytes_per_member_per_step"])


def test_torchtitan_and_maxtext_plans_gather_16_bit_megatron_plans_fp8() -> None:
    def plan(framework: str, cluster: str) -> dict:
        result = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", cluster, "--gpus", "16",
                                           "--seq-len", "4096", "--global-batch", "64", "--precision", "fp8",
                                           "--framework", framework, "--top-k", "1", "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)["plans"][0]

    titan = plan("torchtitan", "dgx-b200")
    assert titan["recipe"]["tp_gathers_16bit"] is True
    assert "high precision" in titan["recipe_sources"]["tp_gathers_16bit"] or \
        "16-bit" in titan["recipe_sources"]["tp_gathers_16bit"]
    megatron = plan("megatron", "dgx-h100")
    assert megatron["recipe"]["tp_gathers_16bit"] is False


def _titan_audit(path: Path) -> dict:
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), "--cluster", "dgx-h100",
                                       "--model", "llama3-8b", "--gpus", "8", "--precision", "fp8", "--json"],
                                catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_a_tensorwise_file_gathers_fp8_only_where_torchtitans_check_sees_its_converter(tmp_path: Path) -> None:
    """torchtitan before 0.3.0 applies Float8ColwiseParallel / Float8RowwiseParallel under tensor-wise scaling where
    `"float8" in job_config.model.converters` (v0.2.2 models/llama3/infra/parallelize.py:77-86, 192-203), a list
    membership that only the converter's first name matches: a v0.1.0 file's converters = ["float8"] gathers FP8, a
    v0.2.2 file's ["quantize.linear.float8"] 16-bit (a QA trial: that one was priced with FP8 gathers), and so does
    the rowwise recipe (the framework row's value, with the v0.2.2 source)."""
    old = (DATA / "llama3_8b_v0.1.0.toml").read_text().replace('# converters = ["float8"]', 'converters = ["float8"]')
    first = tmp_path / "first_name.toml"
    first.write_text(old.replace("tensor_parallel_degree = 1", "tensor_parallel_degree = 2"))
    data = _titan_audit(first)
    assert data["estimate"]["recipe"]["fp8_recipe"] == "tensorwise"
    assert data["estimate"]["recipe"]["tp_gathers_16bit"] is False
    assert "Float8ColwiseParallel" in data["estimate"]["recipe_sources"]["tp_gathers_16bit"]
    text = (DATA / "llama3_8b_v0.2.2.toml").read_text()
    text = text.replace('# converters = ["float8"]', 'converters = ["quantize.linear.float8"]')
    text = text.replace("tensor_parallel_degree = 1", "tensor_parallel_degree = 2")
    tensorwise = tmp_path / "tensorwise.toml"
    tensorwise.write_text(text)
    renamed = _titan_audit(tensorwise)
    assert renamed["estimate"]["recipe"]["fp8_recipe"] == "tensorwise"
    assert renamed["estimate"]["recipe"]["tp_gathers_16bit"] is True
    assert "quantize.linear.float8 does not match" in renamed["estimate"]["recipe_sources"]["tp_gathers_16bit"]
    rowwise = tmp_path / "rowwise.toml"
    rowwise.write_text(text.replace("[quantize.linear.float8]\n",
                                    "[quantize.linear.float8]\nrecipe_name = \"rowwise\"\n"))
    row = _titan_audit(rowwise)
    assert row["estimate"]["recipe"]["fp8_recipe"] == "rowwise"
    assert row["estimate"]["recipe"]["tp_gathers_16bit"] is True
    assert "v0.2.2" in row["estimate"]["recipe_sources"]["tp_gathers_16bit"]


def _evaluate_b200(*extra: str) -> dict:
    return _evaluate_json("--model", "llama3-70b", "--cluster", "dgx-b200", "--gpus", "64", "--seq-len", "8192",
                          "--global-batch", "128", "--tp", "4", "--pp", "4", "--mbs", "1", "--zero", "1",
                          "--recompute", "none", "--sequence-parallel", "--precision", "fp8", *extra)


@pytest.mark.parametrize("recipe", ["mxfp8", "blockwise"])
def test_block_scaled_fp8_gathers_both_copies_of_the_output_gradient(recipe) -> None:
    """MXFP8 and blockwise FP8 cannot transpose a gathered FP8 tensor, so Transformer Engine gathers the row-parallel
    linears' output gradient twice, the row-wise copy for the dgrad GEMM and the column-wise for the wgrad GEMM, each
    with a scale byte per 32 values (v2.9 module/linear.py:567-573, distributed.py _all_gather_mxfp8 and
    _all_gather_fp8_blockwise); its activation gathers carry the scales too.  Per layer: four 16-bit reduce-scatters
    (8), four activation gathers at 1 + 1/32 (4.125) and two gradient gathers at 2 + 2/32 (4.125): 16.25 of the 20
    a 16-bit job sends, where per-tensor FP8 sends 14.  Before, every recipe was priced at 14."""
    block = _evaluate_b200("--fp8-recipe", recipe)
    tensor = _evaluate_b200("--fp8-recipe", "tensorwise")
    wide = _evaluate_b200("--fp8-recipe", recipe, "--tp-gathers-16bit")
    sent = {name: d["crossings"]["tp"]["bytes_per_member_per_step"]
            for name, d in (("block", block), ("tensor", tensor), ("wide", wide))}
    assert sent["tensor"] == pytest.approx(0.7 * sent["wide"], rel=1e-9)
    assert sent["block"] == pytest.approx(16.25 / 20 * sent["wide"], rel=1e-9)
    assert tensor["breakdown"]["tp"] < block["breakdown"]["tp"] < wide["breakdown"]["tp"]


def test_blockwise_fp8_runs_no_tp_overlap_and_a_pinned_one_is_refused() -> None:
    """Transformer Engine's userbuffers raise "Unsupported quantizer for Userbuffers" for blockwise FP8 (v2.9
    module/base.py:634-635) and Megatron-Core passes --tp-comm-overlap on unchecked: a review found such a job priced
    at 10.765 s.  `plan` does not choose the overlap under blockwise; pinned, it is refused with the fix."""
    base = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--precision", "fp8",
            "--fp8-recipe", "blockwise"]
    refused = CliRunner().invoke(main, ["evaluate", *base, "--tp", "4", "--pp", "4", "--sequence-parallel",
                                        "--tp-comm-overlap"])
    assert refused.exit_code == 2
    assert "Unsupported quantizer for Userbuffers" in refused.output and "drop --tp-comm-overlap" in refused.output
    assert "Traceback" not in refused.output
    result = CliRunner().invoke(main, ["plan", *base, "--top-k", "3", "--json"])
    assert result.exit_code == 0, result.output
    plans = json.loads(result.stdout)["plans"]
    assert any(p["layout"]["tp"] > 1 for p in plans)
    assert all(p["recipe"]["tp_comm_overlap"] is False for p in plans)
    tensorwise = CliRunner().invoke(main, ["evaluate", *base[:-2], "--fp8-recipe", "tensorwise", "--tp", "4",
                                           "--pp", "4", "--sequence-parallel", "--tp-comm-overlap"])
    assert tensorwise.exit_code in (0, 1), tensorwise.output


def test_deepseek_v3_refuses_tensorwise_float8_under_tensor_parallelism(tmp_path: Path) -> None:
    """torchtitan's DeepSeek-V3 raises NotImplementedError("Currently, float8 tensorwise TP is not tested for
    deepseekv3") where its check sees the float8 converter (models/deepseek_v3/infra/parallelize.py, d54d05a5 to
    5b5d4685): such a file does not start, and the audit says so; rowwise, or tp 1, reads as before."""
    from placement.audit.launch import parse_launch
    from placement.errors import InputError

    text = (DATA / "deepseek_v3_16b.toml").read_text().replace('# converters = ["float8"]', 'converters = ["float8"]')
    bad = tmp_path / "dsv3.toml"
    bad.write_text(text.replace("tensor_parallel_degree = 1", "tensor_parallel_degree = 2"))
    with pytest.raises(InputError) as err:
        parse_launch([bad])
    for fact in ("dsv3.toml:24: converters", "tensor_parallel_degree 2", "float8 tensorwise TP is not tested",
                 "so this job does not start", 'recipe_name = "rowwise"'):
        assert fact in str(err.value), (fact, str(err.value))
    one = tmp_path / "one.toml"
    one.write_text(text)
    assert parse_launch([one]).tp == 1
    rowwise = tmp_path / "rowwise.toml"
    rowwise.write_text(bad.read_text().replace("[float8]\n", '[float8]\nrecipe_name = "rowwise"\n'))
    assert parse_launch([rowwise]).tp == 2


GPT_OSS = Path(__file__).parent / "data" / "audit" / "bridge" / "gpt_oss_120b_pretrain_h100_fp8_mx_v1.yaml"


def test_an_audited_blockwise_tp_overlap_is_refused_with_the_files_lines(tmp_path: Path) -> None:
    """The same job audited from its launch files is refused naming their lines, not `evaluate`'s flags: a QA run's
    saved Megatron-Bridge config (model.tp_comm_overlap true, mixed_precision fp8 blockwise, tp 2) was told to 'drop
    --tp-comm-overlap', a flag it does not have."""
    head, _, section = GPT_OSS.read_text().partition("\nmixed_precision:\n")  # its fp8 over the model's
    text = head + "\nmixed_precision:\n" + section.replace("  fp8: null", "  fp8: e4m3", 1)
    text = replaced(text, (("  fp8_param_gather: false\n  fp8_recipe: tensorwise",
                            "  fp8_param_gather: false\n  fp8_recipe: blockwise"),
                           ("  tensor_model_parallel_size: 1", "  tensor_model_parallel_size: 2"),
                           ("  sequence_parallel: false", "  sequence_parallel: true"),
                           ("  tp_comm_overlap: false", "  tp_comm_overlap: true")), unique=True)
    config = tmp_path / "run_config.yaml"
    config.write_text(text)
    script = tmp_path / "train.sh"
    script.write_text(
        "torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py --tensor-model-parallel-size 4 "
        "--pipeline-model-parallel-size 4 --num-layers 80 --hidden-size 8192 --num-attention-heads 64 --swiglu "
        "--ffn-hidden-size 28672 --group-query-attention --num-query-groups 8 --seq-length 8192 --micro-batch-size 1 "
        "--global-batch-size 512 --bf16 --fp8-format e4m3 --fp8-recipe blockwise --sequence-parallel "
        "--tp-comm-overlap --use-distributed-optimizer --untie-embeddings-and-output-weights\n")
    for path, job, lines in (
            (config, ("--model", "gpt-oss-120b"), ("tp_comm_overlap: true", "fp8_recipe: blockwise",
                                                   "tensor_model_parallel_size: 2")),
            (script, ("--model", "llama3-70b"), ("--tp-comm-overlap", "--fp8-recipe blockwise"))):
        result = CliRunner().invoke(main, ["audit", "--launch", str(path), *job, "--cluster", "dgx-h100", "--gpus",
                                           "64"])
        assert result.exit_code == 2, result.output
        assert "Unsupported quantizer for Userbuffers" in result.output and "Traceback" not in result.output
        assert f"{path}:" in result.output and all(line in result.output for line in lines)
        assert "turn the TP overlap off in the files" in result.output
