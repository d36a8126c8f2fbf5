"""A GPT-NeoX config GPT-NeoX refuses to start is refused by the audit, naming the line, the value, GPT-NeoX's own
check and the fix, within the GPT-NeoX versions the config's keys allow (a check newer than the keys date the config
is an `ignored` line instead); and a value GPT-NeoX derives is read as it derives it.  Each case next to a nearby
valid config, which is still read.  Base: configs/20B.yml (pp 4, mp 2, fp16, its keys dating it 3d8fec02 or later)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement.audit.launch import parse_launch
from placement.errors import InputError
from tests.file_edits import replaced

NEOX_20B = Path(__file__).parent / "data" / "audit" / "neox" / "20B.yml"
FP16 = NEOX_20B.read_text().split('  "fp16": {')[1].split("},")[0]
"""The body of 20B.yml's fp16 section, to drop it."""
LATE_2024 = '"peak_theoretical_tflops": 312.0'
"""A key from GPT-NeoX 29080c3a (2024-12-19): dates the config after 797a4ab4 (2024-11-13)."""
SEPT_2024 = '"use_bias_in_mlp": true'
"""A key from GPT-NeoX adbf5d6f (2024-09-10): dates the config after c1ae1d77 (2024-09-09)."""
MAY_2026 = '"fused_kernels_build_path": "./build"'
"""A key from GPT-NeoX 20379ad4 (2026-05-19): dates the config after d11df961 (2025-05-09)."""


def _config(tmp_path: Path, *extra: str, swap: tuple[tuple[str, str], ...] = (), no_fp16: bool = False) -> Path:
    """20B.yml with `swap` applied, `extra` keys added and, with `no_fp16`, its fp16 section dropped."""
    text = replaced(NEOX_20B.read_text(), swap)
    if no_fp16:
        text = text.replace('  "fp16": {' + FP16 + "},\n", "")
    text = text.replace('  "pos_emb": "rotary",', "".join(f"  {x},\n" for x in extra) + '  "pos_emb": "rotary",')
    path = tmp_path / "20B.yml"
    path.write_text(text)
    return path


def _refused(path: Path, *words: str) -> str:
    with pytest.raises(InputError) as err:
        parse_launch([path])
    message = str(err.value)
    for w in (*words, "so this job does not start", str(path)):
        assert w in message, (w, message)
    return message


def _noted(path: Path, *words: str) -> None:
    lay = parse_launch([path])
    assert any(all(w in x for w in words) for x in lay.ignored), lay.ignored


# -- 1. ZeRO-2/3 with the PipelineModule or model parallelism --------------------------------------------------------


@pytest.mark.parametrize("stage", [2, 3])
def test_zero_2_or_3_with_a_pipeline_is_refused_in_every_version(tmp_path: Path, stage: int) -> None:
    path = _config(tmp_path, swap=(('"stage": 1,', f'"stage": {stage},'),))
    _refused(path, f"ZeRO stage {stage} with pipe_parallel_size 4", "megatron/training.py:878-892", "c1ae1d77",
             "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism", "fbece50b", '"zero_optimization": {')
    assert parse_launch([_config(tmp_path)]).zero_stage == 1  # 20B.yml's own ZeRO-1


def test_zero_2_with_model_parallelism_is_refused_from_c1ae1d77(tmp_path: Path) -> None:
    swap = (('"stage": 1,', '"stage": 2,'), ('"pipe_parallel_size": 4,', '"pipe_parallel_size": 0,'))
    _refused(_config(tmp_path, SEPT_2024, swap=swap), "ZeRO stage 2 with model_parallel_size 2",
             "model paralleism are not currently supported simultaneously", "c1ae1d77, 2024-09-09")
    # 20B.yml's keys date it 3d8fec02 or later: an older GPT-NeoX runs it, so a note, not a refusal
    _noted(_config(tmp_path, swap=swap), "GPT-NeoX c1ae1d77 (2024-09-09) or later refuses it", "leaves the version")
    lay = parse_launch([_config(tmp_path, SEPT_2024, swap=(*swap, ('"model_parallel_size": 2,',
                                                                   '"model_parallel_size": 1,')))])
    assert lay.zero_stage == 2 and lay.pp == 1 and lay.tp == 1


# -- 2. precision conflicts -------------------------------------------------------------------------------------------


def test_fp16_and_bf16_both_enabled_is_refused(tmp_path: Path) -> None:
    _refused(_config(tmp_path, '"bf16": {"enabled": true}'), "fp16.enabled true, bf16.enabled true",
             "DeepSpeed bf16 field was set but precision conflicts", "797a4ab4",
             "bfloat16 and fp16 modes cannot be simultaneously enabled")
    assert parse_launch([_config(tmp_path, '"bf16": {"enabled": true}', no_fp16=True)]).precision == "bf16"


def test_precision_bfloat16_with_fp16_enabled_is_refused(tmp_path: Path) -> None:
    _refused(_config(tmp_path, '"precision": "bfloat16"'), "precision bfloat16, fp16.enabled true",
             "DeepSpeed fp16 field was set but precision conflicts", "056e9caf, 2023-05-16", "arguments.py:966-972")
    lay = parse_launch([_config(tmp_path, '"precision": "bfloat16"', no_fp16=True)])
    assert lay.precision == "bf16" and '"precision": "bfloat16"' in lay.sources["precision"]


def test_precision_bf16_with_a_bf16_section_is_refused_from_797a4ab4(tmp_path: Path) -> None:
    stated = ('"precision": "bf16"', '"bf16": {"enabled": true}')
    _refused(_config(tmp_path, *stated, LATE_2024, no_fp16=True), "precision bf16, bf16.enabled true",
             "DeepSpeed bf16 field was set but precision conflicts", "797a4ab4, 2024-11-13")
    _noted(_config(tmp_path, *stated, no_fp16=True), "797a4ab4 (2024-11-13) or later refuses it")


# -- 3. fp32: no 16-bit mode ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stated", [(), ('"precision": "bf16"',), ('"fp16": {"loss_scale": 0}',),
                                    ('"bf16": {"enabled": false}',)])
def test_a_config_gpt_neox_trains_in_fp32_is_refused(tmp_path: Path, stated: tuple[str, ...]) -> None:
    with pytest.raises(InputError, match="GPT-NeoX trains this config in fp32") as err:
        parse_launch([_config(tmp_path, *stated, no_fp16=True)])
    assert 'else: self.update_value("precision", "fp32")' in str(err.value)
    assert "arguments.py:981-1011" in str(err.value) and "precision: bfloat16" in str(err.value)
    lay = parse_launch([_config(tmp_path, '"precision": "fp16"', no_fp16=True)])  # 056e9caf or later: fp16
    assert lay.precision == "bf16" and any(x.startswith("fp16: FP16 mixed precision") for x in lay.ignored)


def test_fp32_of_a_part_of_the_config_is_noted(tmp_path: Path) -> None:
    """Without max_position_embeddings (a required key) the files are a part of the job's config: another file may
    state the precision, so fp32 is an `ignored` line, priced as bf16."""
    path = _config(tmp_path, no_fp16=True, swap=(('  "max_position_embeddings": 2048,\n', ""),))
    _noted(path, "GPT-NeoX trains the files given in fp32", "priced as bf16")
    _noted(path, "no max_position_embeddings", "validate_values")


# -- 4. attention_config ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("config", "words"), [
    ('[[["flash"], 40]]', ("40 layers of attention types for num_layers 44",
                           "Length of attention config list must equal num_layers", "14b123ec")),
    ('[[["flsh"], 44]]', ("attention type flsh", "Attention type flsh not recognized", "efd39e56")),
    ('[[["flash", "global", "local"], "all"]]', ("Number of layers (44) is not divisible by the length of pattern",)),
])
def test_an_attention_config_gpt_neox_asserts_against_is_refused(tmp_path: Path, config: str, words) -> None:
    _refused(_config(tmp_path, f'"attention_config": {config}'), *words)


@pytest.mark.parametrize(("config", "kernel"), [('[[["flash"], 40], [["global"], 4]]', "flash2"),
                                                ('[[["global", "local"], 22]]', "unfused"),
                                                ('[[["flash", "global"], 2], [["flash"], "all"]]', "flash2")])
def test_a_valid_attention_config_is_still_read(tmp_path: Path, config: str, kernel: str) -> None:
    assert parse_launch([_config(tmp_path, f'"attention_config": {config}')]).recipe["attention_kernel"] == kernel


# -- 5. num_kv_heads --------------------------------------------------------------------------------------------------


def test_num_kv_heads_gpt_neox_asserts_against_is_refused(tmp_path: Path) -> None:
    _refused(_config(tmp_path, '"num_kv_heads": 1'), "num_kv_heads 1 with model_parallel_size 2",
             "Number of KV heads must be at least model_parallel_size for now!", "f36aed7f")
    _refused(_config(tmp_path, '"num_kv_heads": 6'), "num_kv_heads 6 with num_attention_heads 64",
             "num_kv_heads must evenly divide num_attention_heads")
    _refused(_config(tmp_path, '"num_kv_heads": 8', '"attention_config": [[["local"], 44]]'),
             "GQA / MQA currently only compatible with Flash or standard global/sliding window Attention")
    assert parse_launch([_config(tmp_path, '"num_kv_heads": 8')]).num_query_groups == 8


# -- 6. train_batch_size alone ----------------------------------------------------------------------------------------


def test_train_batch_size_alone_is_read_as_gpt_neox_derives_it(tmp_path: Path) -> None:
    swap = (('  "train_micro_batch_size_per_gpu": 4,\n', ""),
            ('"gradient_accumulation_steps": 32,', '"train_batch_size": 100,'))
    lay = parse_launch([_config(tmp_path, swap=swap)])
    assert lay.global_batch == 100 and lay.grad_accumulation == 1
    assert "calculate_batch_parameters sets gradient_accumulation_steps 1" in lay.sources["grad_accumulation"]
    assert lay.micro_batch_size is None  # the files give no dp: derived on the GPU count, as GPT-NeoX does
    from click.testing import CliRunner

    from placement.cli import main

    result = CliRunner().invoke(main, ["audit", "--model", "gpt-neox-20b", "--cluster", "gpt-neox-a100-40g",
                                       "--gpus", "32", "--launch", str(tmp_path / "20B.yml"), "--json"])
    out = json.loads(result.stdout)  # pp 4 x mp 2 on 32 GPUs: dp 4, micro-batch 100 // 4 = 25, one per step
    assert out["layout"]["micro_batch_size"] == 25 and out["layout"]["num_microbatches"] == 1
    assert "100 / (accumulation 1 x dp 4) = 25" in out["layout"]["sources"]["micro_batch_size"]
    result = CliRunner().invoke(main, ["audit", "--model", "gpt-neox-20b", "--cluster", "gpt-neox-a100-40g",
                                       "--gpus", "24", "--launch", str(tmp_path / "20B.yml"), "--json"])
    assert result.exit_code == 2 and "batch assertion refuses the remainder" in result.output
    base = parse_launch([_config(tmp_path)])
    assert (base.micro_batch_size, base.grad_accumulation) == (4, 32)
    assert not any(x.startswith("train_batch_size") for x in base.ignored)


# -- 7. max_position_embeddings, MoE with ZeRO-2/3, pos_emb -----------------------------------------------------------


def test_max_position_embeddings_below_seq_length_is_refused(tmp_path: Path) -> None:
    _refused(_config(tmp_path, swap=(('"seq_length": 2048,', '"seq_length": 4096,'),)),
             "max_position_embeddings 2048 below seq_length 4096", "max_position_embeddings must be bigger or equal "
             "seq_length", "01ac43c2", "give max_position_embeddings 4096 or more")
    swap = (('"seq_length": 2048,', '"seq_length": 4096,'), ('"max_position_embeddings": 2048,',
                                                             '"max_position_embeddings": 4096,'))
    assert parse_launch([_config(tmp_path, swap=swap)]).seq_len == 4096


def test_moe_with_zero_2_or_3_is_refused_within_its_versions(tmp_path: Path) -> None:
    flat = (('"pipe_parallel_size": 4,', '"pipe_parallel_size": 0,'),
            ('"model_parallel_size": 2,', '"model_parallel_size": 1,'))
    _refused(_config(tmp_path, '"moe_num_experts": 8', swap=(*flat, ('"stage": 1,', '"stage": 3,'))),
             "moe_num_experts 8 with ZeRO stage 3", "MoE is not compatible with zero stages 2 and 3",
             "MoE not compatible with zero3")
    stage2 = (*flat, ('"stage": 1,', '"stage": 2,'))
    _refused(_config(tmp_path, '"moe_num_experts": 8', MAY_2026, swap=stage2), "d11df961, 2025-05-09")
    _noted(_config(tmp_path, '"moe_num_experts": 8', swap=stage2), "d11df961 (2025-05-09) or later refuses it")
    assert parse_launch([_config(tmp_path, '"moe_num_experts": 8', swap=flat)]).zero_stage == 1


def test_a_pos_emb_outside_gpt_neox_choices_is_refused(tmp_path: Path) -> None:
    _refused(_config(tmp_path, swap=(('"pos_emb": "rotary",', '"pos_emb": "rope",'),)), "pos_emb 'rope'",
             "Not in accepted values", "use one of learned, rotary")
    assert parse_launch([_config(tmp_path, swap=(('"pos_emb": "rotary",', '"pos_emb": "alibi",'),))]).pp == 4
