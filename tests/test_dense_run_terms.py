"""The facts that bring Llama 3's Table 4 rows within 10 % (issue: every dense row within 12 %), each tested
on the row it fixes: without it the row is off by more than 12 %.

- `attention_kernel: flash2`: FlashAttention-2 on Hopper (0.37 of MAMF against 0.65 for FlashAttention-3 and
  cuDNN), the kernel of the run's time;
- `cp_comm_type: all_gather`: Llama 3's context parallelism gathers K and V before attention, exposed
  (Llama 3 §3.3.2);
- the stated recompute (none, Llama 3 §3.3.2) is priced even where the memory model puts it over capacity.
"""

from __future__ import annotations

import pytest

from placement.calibration.validate import load_runs, predict
from placement.catalog import load_accelerator
from placement.specs.recipe import CpCommType, Recipe
from placement.specs.training import AttentionKernel

RUNS = {r.id: r for r in load_runs()}
BOUND = 0.12


def _error(run) -> float:
    res = predict(run)
    assert res.predicted_step_time_s is not None
    return res.error


def _with_recipe(run, **update):
    return run.model_copy(update={"recipe": run.recipe.model_copy(update=update)})


def test_llama3_131k_row_needs_flash2_and_the_exposed_all_gather() -> None:
    run = RUNS["llama3-2024-table4-16384gpu-131k"]
    assert run.attention_kernel is AttentionKernel.FLASH2 and run.recipe.cp_comm_type is CpCommType.ALL_GATHER
    assert abs(_error(run)) <= BOUND
    # FlashAttention-3/cuDNN-class attention: far too fast
    assert _error(run.model_copy(update={"attention_kernel": AttentionKernel.FLASH})) < -BOUND
    # the K/V exchange hidden behind attention, as a ring: too fast
    assert _error(_with_recipe(run, cp_comm_type=CpCommType.P2P)) < -BOUND


def test_all_gather_cp_is_exposed_and_the_ring_hides_it() -> None:
    run = RUNS["llama3-2024-table4-16384gpu-131k"]
    ring = predict(_with_recipe(run, cp_comm_type=CpCommType.P2P))
    gathered = predict(run)
    assert gathered.predicted_step_time_s > ring.predicted_step_time_s
    # nothing else changes: the same layout is priced
    assert gathered.layout == ring.layout


def test_llama3_8k_row_needs_its_stated_recompute() -> None:
    """Without the paper's "no activation checkpointing" the search picks full recompute (the only one that fits
    Megatron's interleaved warm-up), and the row is priced far too slow."""
    run = RUNS["llama3-2024-table4-8192gpu"]
    assert run.layout["recompute"] == "none"
    res = predict(run)
    assert abs(res.error) <= BOUND
    assert not res.fits and res.peak_memory_gib > res.capacity_gib  # over the memory model, and said so
    open_layout = {k: v for k, v in run.layout.items() if k != "recompute"}
    searched = predict(run.model_copy(update={"layout": open_layout}))
    assert searched.fits and searched.layout["recompute"] == "full"
    assert searched.error > BOUND


def test_flash2_costs_more_only_where_the_accelerator_says_so() -> None:
    """On A100 FlashAttention-2 is the fused kernel of its time (no separate efficiency): flash2 prices as flash;
    on H100 it is slower."""
    assert load_accelerator("a100-80g").flash2_attention_efficiency is None
    h100 = load_accelerator("h100-sxm")
    assert h100.flash2_attention_efficiency < (h100.attention_core_efficiency or 0.65)
    run = RUNS["llama3-2024-table4-16384gpu"]
    flash = predict(run.model_copy(update={"attention_kernel": AttentionKernel.FLASH}))
    assert predict(run).predicted_step_time_s > flash.predicted_step_time_s
    a100 = RUNS["korthikanti-2022-175b-sp-selective"]
    fused = a100.model_copy(update={"attention_kernel": AttentionKernel.FLASH})
    fa2 = a100.model_copy(update={"attention_kernel": AttentionKernel.FLASH2})
    assert predict(fused).predicted_step_time_s == pytest.approx(predict(fa2).predicted_step_time_s, rel=1e-12)


def test_megatron_files_state_the_cp_exchange_and_the_flash_backend(tmp_path) -> None:
    from click.testing import CliRunner

    from placement.cli import main

    out = tmp_path / "out"
    result = CliRunner().invoke(main, [
        "evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "32768",
        "--global-batch", "16", "--tp", "4", "--cp", "4", "--cp-comm-type", "all_gather", "--attention-kernel",
        "flash2", "--out", str(out), "--emit", "megatron"])
    assert result.exit_code == 0, result.output
    text = "\n".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert "--cp-comm-type all_gather" in text
    assert "--attention-backend flash" in text
    assert "flash-attn" in text  # the warning: the installed package decides FlashAttention 2 or 3


@pytest.mark.parametrize(("value", "recipe", "ignored"), [
    ("all_gather", CpCommType.ALL_GATHER, False),
    ("p2p", CpCommType.P2P, False),
    ("a2a", CpCommType.P2P, True),
])
def test_audit_reads_megatron_cp_comm_type(tmp_path, value, recipe, ignored) -> None:
    from placement.audit.launch import parse_launch

    script = tmp_path / "train.sh"
    script.write_text(
        "torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 4 "
        f"--context-parallel-size 4 --cp-comm-type {value} --num-layers 32 --hidden-size 4096 "
        "--num-attention-heads 32 --seq-length 32768 --micro-batch-size 1 --global-batch-size 16 --bf16\n")
    layout = parse_launch([script])
    assert Recipe.model_validate(layout.recipe).cp_comm_type is recipe
    assert any("--cp-comm-type" in note for note in layout.ignored) is ignored

