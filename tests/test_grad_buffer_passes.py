"""Megatron-Core's DDP passes over its whole gradient buffer every step at ZeRO-0/1 (recipe grad_buffer_passes): it
zeroes the buffer (1 write: core_r0.8.0 distributed/param_and_grad_buffer.py:508), scales each bucket by 1/dp
before the reduction (1 read + 1 write: :122-123) and, under Megatron-LM's default --check-for-nan-in-loss-and-grad,
reads each bucket for its norm (:109-117).  Unpriced, the Megatron-Core r0.8 1.7B row on 48 H100 came out 12.9 %
fast."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.calibration.validate import load_runs, predict
from placement.cli import main

RUNS = {r.id: r for r in load_runs()}
JOB = ["--model", "mcore-gpt-1.7b", "--cluster", "dgx-h100", "--gpus", "48", "--seq-len", "4096", "--global-batch",
       "192", "--precision", "bf16", "--tp", "1", "--pp", "1", "--mbs", "4", "--recompute", "none",
       "--grad-reduce-fp32"]


def _with_recipe(run, **update):
    return run.model_copy(update={"recipe": run.recipe.model_copy(update=update)})


def _evaluate(*extra: str) -> dict:
    result = CliRunner().invoke(main, ["evaluate", *JOB, *extra, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_the_small_megatron_row_it_fixes() -> None:
    """The 1.7B row at tp 1: without the passes past #18's 12 %, with Megatron-LM's four inside it."""
    run = RUNS["mcore-r0.8-h100-gpt-1.7b-48gpu"]
    assert run.recipe.grad_buffer_passes == 4
    priced, without = predict(run), predict(_with_recipe(run, grad_buffer_passes=0))
    assert without.error < -0.12 < priced.error
    assert priced.predicted_step_time_s > without.predicted_step_time_s


def test_each_pass_moves_the_whole_fp32_buffer_once_through_hbm() -> None:
    """Four passes cost four reads or writes of the rank's float32 gradient buffer (its size from the memory
    model) at the accelerator's HBM bandwidth; 16-bit gradients half as much; ZeRO-3, which keeps only a shard of
    the gradients, nothing."""
    hbm_bytes_per_s = 3.35e12  # hardware/accelerators/h100-sxm.yaml
    four, none = _evaluate("--zero", "1", "--grad-buffer-passes", "4"), _evaluate("--zero", "1",
                                                                                  "--grad-buffer-passes", "0")
    buffer = four["memory"]["grads_bytes"]
    assert four["memory"]["gradient_dtype"] == "fp32"
    extra = four["breakdown"]["optimizer"] - none["breakdown"]["optimizer"]
    assert extra == pytest.approx(4 * buffer / hbm_bytes_per_s, rel=1e-6)
    assert four["step_time_s"] - none["step_time_s"] == pytest.approx(extra, abs=2e-6)  # step_time_s: 6 digits
    narrow = [_evaluate("--zero", "1", "--no-grad-reduce-fp32", "--grad-buffer-passes", str(n))["breakdown"]
              ["optimizer"] for n in (4, 0)]
    assert narrow[0] - narrow[1] == pytest.approx(extra / 2, rel=1e-6)
    sharded = [_evaluate("--zero", "3", "--grad-buffer-passes", str(n))["step_time_s"] for n in (4, 0)]
    assert sharded[0] == sharded[1]


def _audit_passes(tmp_path: Path, *flags: str) -> tuple[int, str]:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/bash\ntorchrun --nproc-per-node 8 --nnodes 6 pretrain_gpt.py \\\n"
                      "  --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 4096 \\\n"
                      "  --max-position-embeddings 4096 --micro-batch-size 4 --global-batch-size 192 \\\n"
                      "  --use-distributed-optimizer --overlap-grad-reduce --bf16 " + " ".join(flags) + "\n")
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "mcore-gpt-1.7b", "--cluster",
                                       "dgx-h100", "--gpus", "48", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    return data["estimate"]["recipe"]["grad_buffer_passes"], data["estimate"]["recipe_sources"]["grad_buffer_passes"]


@pytest.mark.parametrize(("flags", "passes"), [((), 4), (("--no-check-for-nan-in-loss-and-grad",), 3),
                                               (("--ddp-average-in-collective",), 2),
                                               (("--no-check-for-nan-in-loss-and-grad", "--calculate-per-token-loss"),
                                                1)])
def test_the_audit_reads_the_passes_from_megatron_flags(tmp_path, flags, passes) -> None:
    """Megatron-LM's defaults zero, scale and NaN-check (4); each flag that drops a pass says so in the source."""
    got, source = _audit_passes(tmp_path, *flags)
    assert got == passes
    for flag in flags:
        assert flag in source
    if not flags:
        assert "check_for_nan_in_grad from --check-for-nan-in-loss-and-grad, on by default" in source


def test_a_megatron_file_states_the_passes_it_was_priced_with(tmp_path) -> None:
    """A plan priced at the library default (3: no NaN check) writes --no-check-for-nan-in-loss-and-grad; one priced
    for Megatron-LM (--framework megatron: 4) writes nothing, Megatron-LM's own default; a DeepSpeed file of a
    ZeRO-1 plan runs no Megatron-Core buffer and its header says so."""
    def emit(out: Path, *extra: str) -> str:
        result = CliRunner().invoke(main, ["evaluate", *JOB, "--zero", "1", "--out", str(out), *extra])
        assert result.exit_code == 0, result.output
        return result.output

    emit(tmp_path / "plain", "--emit", "megatron,deepspeed")
    assert "--no-check-for-nan-in-loss-and-grad" in (tmp_path / "plain" / "megatron.sh").read_text()
    runs = next(x for x in (tmp_path / "plain" / "deepspeed.sh").read_text().splitlines()
                if x.startswith("# this file runs"))
    assert "no Megatron-Core gradient buffer" in runs
    emit(tmp_path / "megatron", "--framework", "megatron", "--emit", "megatron")
    assert "--no-check-for-nan-in-loss-and-grad" not in (tmp_path / "megatron" / "megatron.sh").read_text()


def test_full_iteration_graphs_drop_the_nan_check_once(tmp_path) -> None:
    """Megatron-LM asserts --no-check-for-nan-in-loss-and-grad under --cuda-graph-impl full_iteration (core_v0.19.0
    arguments.py:1196-1197): a plan priced with the NaN check's pass says it runs one pass fewer, and the flag is
    written once whatever the count."""
    for passes, runs_fewer in (("4", True), ("3", False), ("0", False)):
        out = tmp_path / passes
        result = CliRunner().invoke(main, ["evaluate", *JOB, "--zero", "1", "--cuda-graphs", "full",
                                           "--grad-buffer-passes", passes, "--out", str(out), "--emit", "megatron"])
        assert result.exit_code == 0, result.output
        text = (out / "megatron.sh").read_text()
        args = next(x for x in text.splitlines() if x.startswith("PLACEMENT_ARGS="))
        assert args.count("--no-check-for-nan-in-loss-and-grad") == 1
        runs = [x for x in text.splitlines() if x.startswith("# this file runs")]
        assert bool(runs and "3 passes over the gradient buffer a step, no NaN check (not 4" in runs[0]) is runs_fewer
        if passes == "0":  # no Megatron-LM job runs none: re-priced at the 3 a full-graph job runs
            assert runs and "3 passes over the gradient buffer a step: zeroed, scaled by 1/dp (not 0" in runs[0]
