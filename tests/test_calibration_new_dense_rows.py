"""The Megatron-Bridge 26.04.01 dense rows and the MLPerf Training v5.0 Llama 3.1 405B row of runs.yaml: each location
names the table row it prices, and each vendor-table step is the Model TFLOP/s/GPU column inverted with
Megatron-Bridge v0.4.2's model-FLOPs count (training/utils/flop_utils.py: 12*L*h*(1.5*ffn + h*(1 + g/n + s/2h)) +
6*h*V_pad per token, the vocabulary padded to 128*TP), since that section's tokens/s/GPU column is rounded."""

from __future__ import annotations

import math

import pytest

from placement.calibration.validate import load_runs
from placement.catalog import load_model

RUNS = {r.id: r for r in load_runs()}
BRIDGE = sorted(i for i in RUNS if i.startswith("megatron-bridge-26.04.01-") and RUNS[i].group == "other")


def _bridge_flops_per_token(run) -> float:
    m = load_model(run.model)
    tp = run.layout["tp"]
    v_pad = math.ceil(m.vocab_size / (128 * tp)) * 128 * tp
    h, s = m.hidden_size, run.seq_len
    return (12 * m.num_layers * h * (1.5 * m.ffn_hidden_size
                                     + h * (1 + m.num_kv_heads / m.num_attention_heads + s / (2 * h)))
            + 6 * h * v_pad)


def test_the_new_rows_are_there() -> None:
    assert len(BRIDGE) == 8
    assert "mlperf-v5.0-nvidia-h100-llama31-405b-512gpu" in RUNS


@pytest.mark.parametrize("run_id", BRIDGE)
def test_bridge_rows_name_their_table_row(run_id: str) -> None:
    run = RUNS[run_id]
    lay = run.layout
    assert 'section "26.04.01 NeMo Container"' in run.location and "v0.4.2" in run.location
    row = (f"({run.num_gpus} GPUs, {'MXFP8' if run.recipe.fp8_recipe.value == 'mxfp8' else 'FP8'}, "
           f"GBS {run.global_batch}, MBS {lay['micro_batch_size']}, seq {run.seq_len}, FSDP 0, TP {lay['tp']}, "
           f"PP {lay['pp']}, CP {lay['cp']}, VP {lay['vpp']}, ")
    assert row in " ".join(run.location.split()), run_id
    assert f"{run.published_tflops_per_gpu:g} TFLOP/s/GPU" in run.location


@pytest.mark.parametrize("run_id", BRIDGE)
def test_bridge_steps_invert_the_tflops_column(run_id: str) -> None:
    run = RUNS[run_id]
    step = run.global_batch * run.seq_len * _bridge_flops_per_token(run) / (
        run.published_tflops_per_gpu * 1e12 * run.num_gpus)
    assert run.published_step_time_s == pytest.approx(step, abs=0.006)
    assert f"= {step:.3f} s" in " ".join(run.step_time_basis.split())


def test_mlperf_row_cites_its_logs_and_config() -> None:
    run = RUNS["mlperf-v5.0-nvidia-h100-llama31-405b-512gpu"]
    assert "eos-dfw_n64_ngc25.01_nemo" in run.location and "config_DGXH100_64x8x288xtp8pp8cp2.sh" in run.location
    assert run.global_batch == 288 * run.layout["dp"]
    assert "55.134" in run.step_time_basis
