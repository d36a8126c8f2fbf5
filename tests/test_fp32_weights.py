"""recipe fp32_weights: MaxText keeps its weights in float32 as the optimizer's master copy (base.yml weight_dtype),
float32 gradients and AdamW moments only: 4 + 4 + 8 bytes a parameter; under ZeRO-1 (shard_optimizer_over_data) the
stored weights sharded as the optimizer state and gathered for the step (bf16 under gradient accumulation)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.calibration.validate import load_runs
from placement.catalog import load_model
from placement.cli import main
from placement.errors import InputError

GiB = 1024**3
JOB = ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--seq-len", "4096",
       "--global-batch", "64", "--tp", "1", "--pp", "1", "--mbs", "1", "--recompute", "full", "--json"]


def _memory(*extra: str) -> dict:
    result = CliRunner().invoke(main, [*JOB, *extra])
    assert result.exit_code in (0, 1), result.output  # 1: over capacity, still priced
    return json.loads(result.stdout.splitlines()[0])


def _params() -> float:
    m = load_model("llama3-8b")
    from placement.workload import workload

    w = workload(m)
    return float(w.num_layers * (w.attn_params + w.dense_mlp_params) + w.embed_params + w.head_params)


def test_maxtext_zero1_shards_its_float32_weights_and_gathers_a_bf16_copy() -> None:
    """ZeRO-1 (shard_optimizer_over_data) over 8 GPUs, 8 micro-batches: the float32 weights sharded as the moments
    (4 / 8, utils/sharding.py maybe_update_params_sharding_with_opt) with the bf16 copy gathered for the accumulation
    loop (2 whole), 4 of gradient on every GPU, 8 of moments over 8: 2.5 + 4 + 1 bytes a parameter."""
    p = _params()
    got = _memory("--zero", "1", "--framework", "maxtext")
    assert got["recipe"]["fp32_weights"] and "weight_dtype" in got["recipe_sources"]["fp32_weights"]
    mem = got["memory"]
    assert mem["weights_bytes"] == pytest.approx(p * (4.0 / 8 + 2.0), rel=0.01)
    assert mem["grads_bytes"] == pytest.approx(p * 4.0, rel=0.01)
    assert mem["optimizer_bytes"] == pytest.approx(p * 8.0 / 8, rel=0.01)
    assert got["fits"]


def test_without_accumulation_zero1_gathers_the_float32_weights() -> None:
    """One micro-batch a step: no accumulation loop casts the weights to bf16 first, so the step gathers them in
    float32 (trainers/pre_train/train.py re-shards the params to their gathered sharding)."""
    p = _params()
    got = _memory("--zero", "1", "--framework", "maxtext", "--global-batch", "8")["memory"]
    assert got["weights_bytes"] == pytest.approx(p * (4.0 / 8 + 4.0), rel=0.01)


def test_under_fsdp_the_parts_are_4_4_8_over_the_shard_and_the_total_is_unchanged() -> None:
    p = _params()
    mem = _memory("--zero", "3", "--framework", "maxtext")["memory"]
    for key, per in (("weights_bytes", 4.0), ("grads_bytes", 4.0), ("optimizer_bytes", 8.0)):
        assert mem[key] == pytest.approx(p * per / 8, rel=0.01), key
    plain = _memory("--zero", "3", "--grad-reduce-fp32")["memory"]
    assert sum(mem[k] for k in ("weights_bytes", "grads_bytes", "optimizer_bytes")) == pytest.approx(
        sum(plain[k] for k in ("weights_bytes", "grads_bytes", "optimizer_bytes")), rel=1e-6)


def _maxtext_launch(tmp_path: Path, config: str):
    cfg = tmp_path / "cfg.yml"
    cfg.write_text("base_config: base.yml\n" + config)
    return parse_launch([cfg])


def test_a_maxtext_config_states_its_gradient_dtype_and_a_16_bit_weight_dtype_is_priced(tmp_path: Path) -> None:
    launch = _maxtext_launch(tmp_path, "grad_dtype: bfloat16\nweight_dtype: float32\n")
    assert launch.recipe["grad_reduce_fp32"] is False and launch.recipe["fp32_weights"] is True
    assert "cfg.yml:2" in launch.sources["recipe.grad_reduce_fp32"]
    # 16-bit weights: no float32 master, AdamW's moments in mu_dtype, which follows weight_dtype unless set
    launch = _maxtext_launch(tmp_path, "weight_dtype: bfloat16\n")
    assert (launch.recipe["fp32_weights"], launch.recipe["optimizer_master_weights"],
            launch.recipe["optimizer_state_bf16"]) == (False, False, True)
    assert "mu_dtype unset" in launch.sources["recipe.optimizer_state_bf16"]
    launch = _maxtext_launch(tmp_path, "weight_dtype: bfloat16\nmu_dtype: float32\n")
    assert launch.recipe["optimizer_state_bf16"] is False
    assert "cfg.yml:3" in launch.sources["recipe.optimizer_state_bf16"]
    launch = _maxtext_launch(tmp_path, "weight_dtype: float32\nmu_dtype: bfloat16\n")  # moments as mu_dtype says
    assert launch.recipe["fp32_weights"] is True and launch.recipe["optimizer_state_bf16"] is True
    with pytest.raises(InputError, match=r"mu_dtype 'fp64'.*float32 or bfloat16"):
        _maxtext_launch(tmp_path, "mu_dtype: fp64\n")
    with pytest.raises(InputError, match="grad_dtype 'fp64'"):
        _maxtext_launch(tmp_path, "grad_dtype: fp64\n")


@pytest.mark.parametrize("extra", ["", "grad_dtype: float32\n"])
def test_16_bit_weights_reduce_16_bit_gradients_whatever_grad_dtype_says(tmp_path: Path, extra: str) -> None:
    """Trial t26: MaxText's Mixtral test (weight_dtype=bfloat16) was priced with a float32 gradient reduce from
    base.yml's grad_dtype.  Gradients take the weights' dtype and grad_dtype casts only float32 ones (0.2.5
    trainers/pre_train/train.py:569)."""
    launch = _maxtext_launch(tmp_path, "weight_dtype: bfloat16\n" + extra)
    assert launch.recipe["grad_reduce_fp32"] is False
    source = launch.sources["recipe.grad_reduce_fp32"]
    assert "cfg.yml:2: weight_dtype" in source and "casts only float32" in source
    assert ("has no effect" in source) == bool(extra)


def test_the_precision_source_names_the_dtype_the_files_state(tmp_path: Path) -> None:
    """Trial t26, finding 10: `precision bf16: MaxText 0.2.5 base.yml default` though the command set dtype=bfloat16;
    the matmuls run in dtype, and without FP8 quantization the source names both."""
    launch = _maxtext_launch(tmp_path, "dtype: bfloat16\n")
    assert launch.precision == "bf16"
    assert "cfg.yml:2: dtype" in launch.sources["precision"] and "no FP8 quantization" in launch.sources["precision"]


def _dp_s(*extra: str) -> float:
    return _memory("--fp32-weights", "--grad-reduce-fp32", "--no-dp-overlap", *extra)["breakdown"]["dp"]


def test_the_gather_is_priced_at_the_width_the_step_holds_its_copy_in() -> None:
    """QA: `evaluate --zero 1 --fp32-weights` with one micro-batch a step held the float32 gathered copy (4 bytes a
    weight, as above) but priced its gather at 2, the same 0.1528 s as with 8 micro-batches' bf16 copy.  Without an
    accumulation loop MaxText gathers the float32 weights themselves: the reduce-scatter of the float32 gradients and
    that gather move what DDP's all-reduce of them moves; under accumulation the bf16 gather moves half as much."""
    ddp = _dp_s("--zero", "0", "--global-batch", "8")
    whole = _dp_s("--zero", "1", "--global-batch", "8")
    assert whole == pytest.approx(ddp, rel=1e-3)
    accumulated = _dp_s("--zero", "1")
    assert accumulated == pytest.approx(0.75 * _dp_s("--zero", "0"), rel=0.02)


def test_torch_autocast_keeps_the_float32_weights_whole_holds_their_casts_and_broadcasts_them_in_float32() -> None:
    """QA: the FlashAttention-2 rows run Lightning's bf16 autocast over float32 parameters with torch's
    ZeroRedundancyOptimizer, which keeps them whole on every rank and broadcasts each rank's updated shard, the float32
    parameters themselves (zero_redundancy_optimizer.py _sync_params), accumulation loop or not, while each GEMM keeps
    its bf16 cast of the weight for backward (flash_attn FusedDenseFunc); they were priced as MaxText's sharded weights
    with a bf16 copy gathered for the loop (2.5 bytes a weight, the gather at 2)."""
    p = _params()
    torch_zero = ["--zero", "1", "--fp32-weights-autocast"]
    mem = _memory("--fp32-weights", "--grad-reduce-fp32", *torch_zero)["memory"]
    assert mem["weights_bytes"] == pytest.approx(p * (4.0 + 2.0), rel=0.01)
    assert mem["optimizer_bytes"] == pytest.approx(p * 8.0 / 8, rel=0.01)
    ddp = _memory("--fp32-weights", "--grad-reduce-fp32", "--zero", "0", "--fp32-weights-autocast")["memory"]
    assert ddp["weights_bytes"] == pytest.approx(p * (4.0 + 2.0), rel=0.01)
    # 8 micro-batches: the gather still moves float32, as much as the reduce-scatter of the float32 gradients
    assert _dp_s(*torch_zero) == pytest.approx(_dp_s("--zero", "0"), rel=1e-3)
    run = {r.id: r for r in load_runs()}["flash-attn2-2023-t1-gpt3-1.3b-2k"]
    assert run.recipe.fp32_weights_autocast and "stay whole on every rank" in " ".join(run.recipe_sources.split())


def test_autocast_over_float32_weights_with_16_bit_gradients_is_refused() -> None:
    """torch gives a float32 parameter a float32 .grad: --fp32-weights-autocast without --grad-reduce-fp32 priced
    2-byte gradients and their 2-byte reduction for a job that cannot run so."""
    result = CliRunner().invoke(main, [*JOB, "--fp32-weights", "--fp32-weights-autocast"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert ("--fp32-weights-autocast (the flag) prices torch's autocast over float32 parameters, whose gradients "
            "torch keeps and reduces in float32, but --grad-reduce-fp32 is off; add --grad-reduce-fp32, or drop "
            "--fp32-weights-autocast") in result.stderr


def test_each_micro_batch_casts_the_float32_weights_under_autocast() -> None:
    """QA: the FlashAttention-2 rows' step priced no cast of the float32 weights, which each micro-batch's forward
    reads (4 bytes) and writes in bf16 (2) under autocast (flash_attn FusedDenseFunc.forward), beside the float32
    accumulation of its gradient (fp32_copy: read 2, write 4, read 4 + 4, write 4): 6 bytes a weight beside 18."""
    def accumulation_s(*extra: str) -> float:
        return _memory("--fp32-weights", "--grad-reduce-fp32", "--grad-accumulation", "fp32_copy", "--zero", "1",
                       *extra)["breakdown"]["grad_accumulation"]

    plain = accumulation_s()
    assert plain > 0
    assert accumulation_s("--fp32-weights-autocast") == pytest.approx(plain * (18.0 + 6.0) / 18.0, rel=1e-3)
    result = CliRunner().invoke(main, [*JOB[:-1], "--fp32-weights", "--grad-reduce-fp32", "--fp32-weights-autocast",
                                       "--grad-accumulation", "fp32_copy", "--zero", "1"])
    assert "gradient accumulation, weight casts" in result.stdout


@pytest.mark.parametrize(("extra", "label"), [
    (("--zero", "1"), "weights (fp32 shard; with the bf16 copy gathered for the step)"),
    (("--zero", "1", "--global-batch", "8"), "weights (fp32 shard; with the fp32 copy gathered for the step)"),
    (("--zero", "1", "--fp32-weights-autocast"), "weights (fp32, whole; with the bf16 casts autocast keeps for "
                                                 "backward)"),
    (("--zero", "3"), "weights (fp32)"),
])
def test_the_weights_row_says_what_it_holds(extra, label) -> None:
    """QA: the memory table's weights row read `weights` whether it held 2 bytes a weight or float32 weights with a
    gathered copy or autocast's casts (1.3B parameters at 7.3 GiB), where the gradients row names its dtype."""
    result = CliRunner().invoke(main, [*JOB[:-1], "--fp32-weights", "--grad-reduce-fp32", *extra])
    assert result.exit_code in (0, 1), result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("weights")]
    assert len(rows) == 1 and rows[0].startswith(label + "  "), rows
    plain = CliRunner().invoke(main, [*JOB[:-1], "--zero", "1"])
    plain_rows = [line for line in plain.stdout.splitlines() if line.startswith("weights")]
    assert len(plain_rows) == 1 and re.match(r"weights\s{2,}[\d.]+$", plain_rows[0]), plain_rows
