"""MaxText 0.2.5 configs that MaxText itself refuses to start are refused by the audit (the file's line, the value,
MaxText's check quoted with its commit, "so this job does not start", the fix); values MaxText reads are read, or
refused, or said in `ignored`, never silently replaced.  A reviewer ran each case on a llama3-8b config with
ici_fsdp 8, dcn_data 2 on 16 GPUs and every one was priced."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from maxtext_files import maxtext_launch

from placement.audit.core import maxtext_layout
from placement.catalog import load_model
from placement.errors import InputError

BASE = ("base_config: base.yml\nmodel_name: llama3-8b\nici_fsdp_parallelism: 8\ndcn_data_parallelism: 2\n"
        "per_device_batch_size: 1\n")


def _notes(launch) -> list[str]:
    """What the audit says it does not price, but for the TPU note: these fixtures leave `hardware` at base.yml's
    tpu (tests/test_qa_messages_maxtext_input.py checks that note)."""
    return [x for x in launch.ignored if not x.startswith("hardware 'tpu'")]


PIPE = ("base_config: base.yml\nmodel_name: llama3-8b\nici_pipeline_parallelism: 2\nici_fsdp_parallelism: 4\n"
        "dcn_data_parallelism: 2\nper_device_batch_size: 4\n")
"""llama3-8b (32 layers) on 16 GPUs: 2 stages x fsdp 4 x data 2; 4 x 16 = 64 sequences per step."""


def _layout(tmp_path: Path, config: str, gpus: int = 16, gbs: int = 64):
    launch = maxtext_launch(tmp_path, config)
    return launch, maxtext_layout(launch, load_model("llama3-8b"), SimpleNamespace(gpus_per_host=8, num_gpus=gpus),
                                  gbs)


def _refusal(err: pytest.ExceptionInfo, *says: str) -> str:
    text = str(err.value)
    for s in ("so this job does not start", "MaxText 0.2.5 refuses it at", *says):
        assert s in text, text
    return text


# 1. FP8 with gradient accumulation ----------------------------------------------------------------------------


@pytest.mark.parametrize("quant", ["fp8", "nanoo_fp8", "fp8_gpu", "te_fp8_delayedscaling"])
def test_fp8_with_gradient_accumulation_is_refused(tmp_path: Path, quant: str) -> None:
    with pytest.raises(InputError) as err:
        maxtext_launch(tmp_path, BASE + f"quantization: {quant}\ngradient_accumulation_steps: 2\n")
    _refusal(err, "cfg.yml:6: quantization:", "cfg.yml:7: gradient_accumulation_steps: 2", "configs/types.py:4973",
             "81d653c93, 2025-11-14", '"FP8 quantization is not compatible with gradient accumulation."',
             "set gradient_accumulation_steps: 1")


def test_fp8_without_accumulation_and_int8_with_it_are_read(tmp_path: Path) -> None:
    assert maxtext_launch(tmp_path, BASE + "quantization: fp8\ngradient_accumulation_steps: 1\n").precision == "fp8"
    # te_fp8_currentscaling is not among the recipes MaxText 0.2.5 refuses beside accumulation
    assert maxtext_launch(tmp_path, BASE + "quantization: te_fp8_currentscaling\ngradient_accumulation_steps: 2\n"
                   ).precision == "fp8"
    launch = maxtext_launch(tmp_path, BASE + "quantization: int8\ngradient_accumulation_steps: 2\n")
    assert launch.precision == "bf16" and any(x.startswith("quantization 'int8'") for x in launch.ignored)


# 2. the pipeline asserts ----------------------------------------------------------------------------------------


def test_layers_per_stage_that_do_not_divide_the_layers_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        _layout(tmp_path, PIPE + "num_layers_per_pipeline_stage: 6\n")
    _refusal(err, "cfg.yml:7: num_layers_per_pipeline_stage: 6", "cfg.yml:3: ici_pipeline_parallelism: 2",
             "configs/types.py:4556", "0765235cb, 2025-04-22",
             '"The number of layers per stage (6) times the number of stages (2) must divide the number of '
             'pipeline_parallel_layers which defaults to decoder layers (32)"')
    _, lay = _layout(tmp_path, PIPE + "num_layers_per_pipeline_stage: 4\n")
    assert (lay.pp, lay.vpp) == (2, 4)  # 32 / (2 x 4) repeats


def test_repeats_whose_product_is_not_the_layers_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        _layout(tmp_path, PIPE + "num_pipeline_repeats: 2\n")
    _refusal(err, "cfg.yml:7: num_pipeline_repeats: 2", "configs/types.py:4580",
             '"The product of pipeline stages (2), repeats (2), and layers per stage (1) must be equal to '
             'pipeline_parallel_layers which defaults to decoder layers (32)"')
    _, lay = _layout(tmp_path, PIPE + "num_pipeline_repeats: 16\n")
    assert (lay.pp, lay.vpp) == (2, 16)


def test_delayed_forwarding_with_too_few_microbatches_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        _layout(tmp_path, PIPE + "pipeline_delay_activation_forwarding: true\nnum_pipeline_microbatches: 2\n")
    _refusal(err, "cfg.yml:7: pipeline_delay_activation_forwarding: true", "cfg.yml:8: num_pipeline_microbatches: 2",
             "configs/types.py:4603", "6fd52ba69, 2024-08-30",
             '"Delayed activation forwarding requires at least 2 * num_stages microbatches, but 2 stages are used '
             'with 2 microbatches"')
    _, lay = _layout(tmp_path, PIPE + "pipeline_delay_activation_forwarding: true\nnum_pipeline_microbatches: 4\n")
    assert lay.micro_batch_size == 2  # 64 / (dp 8 x 4 micro-batches)


def test_microbatches_not_a_multiple_of_the_stages_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        _layout(tmp_path, PIPE + "num_pipeline_microbatches: 3\n")
    _refusal(err, "configs/types.py:4594", '"The number of microbatches (3) must be divisible by the number of '
                                           'stages (2)"')


# 3. values MaxText reads that were priced otherwise ----------------------------------------------------------


def test_delayed_forwarding_alone_doubles_the_microbatches_as_maxtext_does(tmp_path: Path) -> None:
    """types.py:4587-4591: num_pipeline_microbatches -1 is 2 x stages under the delay (it was priced as stages)."""
    launch, lay = _layout(tmp_path, PIPE + "pipeline_delay_activation_forwarding: true\n")
    assert lay.micro_batch_size == 2  # 64 / (dp 8 x 4 micro-batches), not 64 / (8 x 2)
    assert any(x.startswith("pipeline_delay_activation_forwarding true") and "doubles the pipeline bubble" in x
               for x in launch.ignored)
    launch, lay = _layout(tmp_path, PIPE)
    assert lay.micro_batch_size == 4 and not any("delay" in x for x in launch.ignored)


def test_pipelining_a_subset_of_the_layers_is_not_priced_as_all_pipelined(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"cfg\.yml:7: pipeline_parallel_layers: 16: pipeline_parallel_layers 16 of "
                                         r"the model's 32 layers: .*placement prices every layer in the pipeline"):
        _layout(tmp_path, PIPE + "pipeline_parallel_layers: 16\n")
    _, lay = _layout(tmp_path, PIPE + "pipeline_parallel_layers: 32\n")
    assert (lay.pp, lay.vpp) == (2, 16)
    _, lay = _layout(tmp_path, BASE + "pipeline_parallel_layers: 16\n", gbs=16)  # no pipeline: the key does nothing
    assert lay.pp == 1


def test_a_deepseek_decoder_pipelines_only_its_moe_layers(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"decoder_block 'deepseek' model with a 2-stage pipeline .*MaxText pipelines "
                                         r"only its MoE layers"):
        _layout(tmp_path, PIPE + "decoder_block: deepseek\n")
    _, lay = _layout(tmp_path, PIPE + "decoder_block: llama2\n")
    assert lay.pp == 2


# 4. values MaxText does not take -------------------------------------------------------------------------------


def test_an_unknown_quantization_is_refused_naming_the_allowed(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        maxtext_launch(tmp_path, BASE + "quantization: fp9\n")
    _refusal(err, "cfg.yml:6: quantization: fp9: quantization 'fp9'", "QuantizationType", "'te_fp8_delayedscaling'",
             "'int8'")


@pytest.mark.parametrize(("quant", "recipe"), [("te_fp8_delayedscaling", "tensorwise"),
                                               ("te_fp8_currentscaling", "tensorwise"), ("te_mxfp8", "mxfp8")])
def test_transformer_engine_fp8_recipes_are_priced_as_fp8(tmp_path: Path, quant: str, recipe: str) -> None:
    launch = maxtext_launch(tmp_path, BASE + f"quantization: {quant}\n")
    assert launch.precision == "fp8" and launch.recipe["fp8_recipe"] == recipe
    assert "cfg.yml:6" in launch.sources["recipe.fp8_recipe"] and not _notes(launch)


def test_te_no_quant_is_bf16_as_priced(tmp_path: Path) -> None:
    launch = maxtext_launch(tmp_path, BASE + "quantization: te_no_quant\n")
    assert launch.precision == "bf16" and not _notes(launch)


@pytest.mark.parametrize("quant", ["fp8_gpu", "fp8_full", "int4", "fp8_e4m3"])
def test_a_qwix_only_quantization_without_qwix_is_refused(tmp_path: Path, quant: str) -> None:
    """MaxText's model creation raises for these unless use_qwix_quantization is true (layers/quantizations.py:874); a
    QA trial's fp8_gpu config was priced as a bf16 job that runs."""
    with pytest.raises(InputError) as err:
        maxtext_launch(tmp_path, BASE + f"quantization: {quant}\n")
    _refusal(err, f"cfg.yml:6: quantization: {quant} with use_qwix_quantization false (MaxText 0.2.5 base.yml",
             "layers/quantizations.py:852-874", "Invalid value configured for quantization",
             "set use_qwix_quantization: true")
    launch = maxtext_launch(tmp_path, BASE + f"quantization: {quant}\nuse_qwix_quantization: true\n")
    # Qwix's FP8 whose scaling placement prices (tests/test_maxtext_qwix_fp8.py); the others said as not priced
    assert launch.precision == ("fp8" if quant in ("fp8_gpu", "fp8_e4m3") else "bf16")


def test_transformer_engine_fp8_under_qwix_runs_bf16_as_priced(tmp_path: Path) -> None:
    """Under use_qwix_quantization MaxText builds no Transformer Engine recipe and Qwix has no te_ rule: the matmuls
    run unquantized, where the audit priced FP8 (a QA trial: 1.743 s against 2.256 s on 8 H100)."""
    launch = maxtext_launch(tmp_path, BASE + "quantization: te_fp8_delayedscaling\nuse_qwix_quantization: true\n")
    assert launch.precision == "bf16" and "fp8_recipe" not in launch.recipe
    assert "MaxText quantizes nothing" in launch.sources["precision"] and "cfg.yml:7" in launch.sources["precision"]


def test_an_unknown_remat_policy_is_refused_naming_the_allowed(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        maxtext_launch(tmp_path, BASE + "remat_policy: fulll\n")
    _refusal(err, "cfg.yml:6: remat_policy: fulll: remat_policy 'fulll'", "layers/nnx_decoders.py:1385",
             "5a1e17698, 2025-07-09", '"Remat policy needs to be on list of remat policies"', "save_qkv_proj")
    launch = maxtext_launch(tmp_path, BASE + "remat_policy: save_qkv_proj\n")
    assert launch.recompute == "selective"


# 5. the activation dtype ---------------------------------------------------------------------------------------


def test_float32_activations_are_said_not_dropped(tmp_path: Path) -> None:
    launch = maxtext_launch(tmp_path, BASE + "dtype: float32\n")
    (line,) = [x for x in launch.ignored if x.startswith("dtype 'float32'")]
    assert "priced as bfloat16 activations and matmuls (" in line and line.endswith("cfg.yml:6: dtype: float32)")
    assert not _notes(maxtext_launch(tmp_path, BASE + "dtype: bfloat16\n"))
    with pytest.raises(InputError) as err:
        maxtext_launch(tmp_path, BASE + "dtype: float64\n")
    _refusal(err, "dtype 'float64'", "bfloat16, float32")


# 6. keys MaxText does not define ------------------------------------------------------------------------------


def test_a_misspelled_key_in_the_config_is_refused_naming_the_key_meant(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        maxtext_launch(tmp_path, BASE.replace("per_device_batch_size: 1\n", "per_device_batchsize: 4\n"))
    _refusal(err, "cfg.yml:5: per_device_batchsize: 4: per_device_batchsize 4 is no MaxText 0.2.5 key",
             "configs/pyconfig.py:262-271", "not in", "did you mean per_device_batch_size?")


def test_a_misspelled_key_on_the_command_line_is_refused(tmp_path: Path) -> None:
    script = "#!/bin/bash\npython3 -m maxtext.trainers.pre_train.train cfg.yml run_name=x per_device_batch_sizee=4\n"
    with pytest.raises(InputError) as err:
        maxtext_launch(tmp_path, BASE, script)
    text = _refusal(err, "per_device_batch_sizee 4 is no MaxText 0.2.5 key", "did you mean per_device_batch_size?")
    assert re.match(r"\S*run\.sh:2", text), text
    script = "#!/bin/bash\npython3 -m maxtext.trainers.pre_train.train cfg.yml run_name=x per_device_batch_size=4\n"
    assert maxtext_launch(tmp_path, BASE, script).global_batch == 64


def test_an_unrelated_unknown_key_is_said_and_maxtext_fields_outside_base_yml_are_read(tmp_path: Path) -> None:
    """A key no near miss of a 0.2.5 key may be a newer MaxText's (main's base.yml has enable_nnx): said, priced
    without it, not refused."""
    lay = maxtext_launch(tmp_path, BASE + "enable_nnx: true\n")
    assert [x for x in lay.ignored if x.startswith("enable_nnx True: no MaxText 0.2.5 key") and "newer" in x]
    # num_decoder_layers is a MaxTextConfig field (configs/types.py) that base.yml does not list
    assert maxtext_launch(tmp_path, BASE + "num_decoder_layers: 32\nsteps: 10\n").framework == "maxtext"


def test_a_train_argument_without_equals_is_refused(tmp_path: Path) -> None:
    """`enable_checkpointing: False` on the train command (a published A3 launch script) is two words without `=`:
    MaxText's OmegaConf.from_cli makes each a key of its own, which its config refuses, so the job does not start;
    the audit had priced it as if they were not there."""
    script = ("python3 -m maxtext.trainers.pre_train.train cfg.yml steps=10 \\\n"
              "    enable_checkpointing: False \\\n    per_device_batch_size=1\n")
    with pytest.raises(InputError) as err:
        maxtext_launch(tmp_path, BASE, script)
    _refusal(err, "`enable_checkpointing:` is not a key=value argument", "write enable_checkpointing=VALUE")
    ok = maxtext_launch(tmp_path, BASE, script.replace("enable_checkpointing: False", "enable_checkpointing=False"))
    assert ok is not None


def test_a_variable_on_the_train_command_is_not_refused(tmp_path: Path) -> None:
    """`$EXTRA_ARGS` after the overrides is the script's variable, empty where unset: not a word without `=` (a
    review of the refusal above)."""
    script = "python3 -m maxtext.trainers.pre_train.train cfg.yml steps=10 $EXTRA_ARGS\n"
    assert maxtext_launch(tmp_path, BASE, script) is not None


def test_model_name_default_is_base_ymls_own_model_not_the_given_one(tmp_path: Path) -> None:
    """A user trial: a config with model_name "default" (base.yml's own model: 16 layers of 2048) was priced as
    --model's 340B.  The base_* dimensions the config leaves are base.yml's, compared with --model as any stated ones
    (a mismatch is refused, naming the default and the model_name line); a config that sets them all is its own."""
    from click.testing import CliRunner

    from placement.cli import main

    config = tmp_path / "default.yml"
    config.write_text("base_config: base.yml\nmodel_name: default\nici_fsdp_parallelism: 8\nper_device_batch_size: 1\n")
    res = CliRunner().invoke(main, ["audit", "--launch", str(config), "--model", "llama3-8b", "--cluster",
                                    "dgx-h100", "--gpus", "8"])
    assert res.exit_code == 2, res.output[-1500:]
    assert re.search(r"num_layers = 16 \(from MaxText 0\.2\.5 base\.yml default base_num_decoder_layers: 16 "
                     r"\(.*default\.yml:2: model_name: default: model_name \"default\" trains base\.yml's own "
                     r"model\)\) but model llama3-8b has 32", res.output.replace("\n", " ")), res.output
    config.write_text(config.read_text() + "base_emb_dim: 4096\nbase_num_query_heads: 32\nbase_num_kv_heads: 8\n"
                      "base_mlp_dim: 14336\nbase_num_decoder_layers: 32\n")
    res = CliRunner().invoke(main, ["audit", "--launch", str(config), "--model", "llama3-8b", "--cluster",
                                    "dgx-h100", "--gpus", "8"])
    assert res.exit_code in (0, 1), res.output[-1500:]


def test_a_global_parameter_scale_is_refused_by_name(tmp_path: Path) -> None:
    """A review: `global_parameter_scale: 16` (MaxText scales every base_* dimension by it) was read as base.yml's
    16 layers of 2048 and the right --model refused.  The audit does not derive the scaled model: it says so."""
    from click.testing import CliRunner

    from placement.cli import main

    config = tmp_path / "scaled.yml"
    config.write_text("base_config: base.yml\nmodel_name: default\nglobal_parameter_scale: 16\n"
                      "ici_fsdp_parallelism: 8\nper_device_batch_size: 1\n")
    res = CliRunner().invoke(main, ["audit", "--launch", str(config), "--model", "llama3-8b", "--cluster",
                                    "dgx-h100", "--gpus", "8"])
    assert res.exit_code == 2, res.output[-1500:]
    assert "scaled.yml:3: global_parameter_scale: 16: global_parameter_scale 16 scales every base_* dimension" \
        in res.output.replace("\n", " ")
