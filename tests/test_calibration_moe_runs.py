"""The MoE calibration runs (placement/calibration/runs-moe.yaml): one row per reference run, each naming a catalog
model and cluster, a layout that multiplies out to its GPU count, and a recipe the Recipe spec accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from placement.catalog import load_cluster, load_model
from placement.specs.recipe import Recipe

ROOT = Path(__file__).resolve().parent.parent
RUNS = yaml.safe_load((ROOT / "placement" / "calibration" / "runs-moe.yaml").read_text())
REFERENCE = ROOT.parent / "shared" / "reference" / "calibration-moe.yaml"
IDS = [r["id"] for r in RUNS]


ADDED = {"megatron-bridge-25.09-h100-deepseek-v3-1024gpu-fp8cs",
         "megatron-bridge-25.11-h100-qwen3-235b-a22b-256gpu-fp8cs",
         "megatron-bridge-25.09-h100-qwen3-235b-a22b-256gpu-tokendrop",
         "megatron-bridge-25.11-b200-deepseek-v3-256gpu-mxfp8-pp16ep8"}
"""Published runs beyond the reference set (Megatron-Bridge's performance tables, a user trial found them off)."""


def test_every_reference_run_is_there_once() -> None:
    assert len(RUNS) == 26
    assert len(set(IDS)) == len(IDS)
    assert ADDED <= set(IDS)
    if not REFERENCE.is_file():
        pytest.skip(f"{REFERENCE} is not checked out next to the repository")
    assert set(IDS) - ADDED == {r["id"] for r in yaml.safe_load(REFERENCE.read_text())}


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_model_and_cluster_load_from_the_catalog(run: dict) -> None:
    assert load_model(run["model"]).name == run["model"]
    assert load_cluster(run["cluster"]).name == run["cluster"]


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_recipe_validates(run: dict) -> None:
    Recipe(**run["recipe"])


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_layout_multiplies_out_to_the_gpu_count(run: dict) -> None:
    lay = run["layout"]
    assert run["group"] == "moe"
    assert lay["tp"] * lay["cp"] * lay["pp"] * lay["dp"] == run["num_gpus"]
    # expert ranks tile the dense ranks
    assert (lay["dp"] * lay["cp"] * lay["tp"]) % (lay.get("ep", 1) * lay.get("etp", 1)) == 0
    if "micro_batch_size" in lay:
        assert run["global_batch"] % (lay["dp"] * lay["micro_batch_size"]) == 0
    if run["cluster"] in ("gb200-nvl72", "gb300-nvl72"):
        assert run["segment_nodes"] >= 1


def test_dualpipe_pairing_and_its_memory_savings_fix_the_deepseek_v3_report_row(monkeypatch) -> None:
    """The DeepSeek-V3 report's 2,048-H800 run (DualPipe) is priced within 20 % and fits because DualPipe
    pairs the loss-holding last stage with the first on one rank (DeepSeek-V3 §3.2.1, §3.2.3) and the run
    caches the SwiGLU input in FP8 (§3.3.2).  Priced as 1F1B's split, the last stage sets the pace alone
    (the row was +25 %); without the FP8 activation cache the two stages a DualPipe rank holds do not fit."""
    import placement.cost.step as step
    from placement.calibration.validate import load_runs, predict

    run = next(r for r in load_runs() if r.id == "deepseek-v3-tech-report-2048xh800")
    res = predict(run)
    assert res.fits and abs(res.error) <= 0.20
    without_cache = run.model_copy(update={"recipe": run.recipe.model_copy(
        update={"activation_func_fp8_input_store": False})})
    assert not predict(without_cache).fits
    monkeypatch.setattr(step, "_bidirectional", lambda recipe: False)
    assert predict(run).error > 0.20


def _run(run_id: str):
    from placement.calibration.validate import load_runs

    return next(r for r in load_runs() if r.id == run_id)


def _with_recipe(run, **update):
    return run.model_copy(update={"recipe": run.recipe.model_copy(update=update)})


GPT_OSS_MEGATRON = ["megatron-bridge-25.11-h100-gpt-oss-120b-64gpu", "megatron-bridge-26.04-h100-gpt-oss-120b-64gpu",
                    "megatron-bridge-25.11-gb200-gpt-oss-120b-64gpu-seq8192",
                    "megatron-bridge-25.11-b200-gpt-oss-120b-64gpu"]


@pytest.mark.parametrize("run_id", GPT_OSS_MEGATRON)
def test_gpt_oss_eager_ops_bring_the_megatron_rows_within_20_percent(run_id: str) -> None:
    """Megatron-Core 0.15-0.17 runs GPT-OSS's extras as eager ops (clamp, expert-bias loop, YaRN RoPE, unfused
    bias add; cost.layer.eager_model_ops): priced, each Megatron-Bridge GPT-OSS row is within 20 %; priced
    as fused, every one is slower than predicted by more, and the two H100 rows by 5 points more (about 19 %)."""
    from placement.calibration.validate import predict

    run = _run(run_id)
    assert run.recipe.fused_model_ops is False
    eager, fused = predict(run), predict(_with_recipe(run, fused_model_ops=True))
    assert eager.fits and abs(eager.error) <= 0.20
    assert fused.error < eager.error
    if "h100" in run_id:
        assert fused.error < eager.error - 0.05 and fused.error < -0.15


def test_nccl_all_to_all_over_the_network_runs_at_the_nic_rate_on_the_b200_ep64_row(monkeypatch) -> None:
    """The B200 GPT-OSS row's EP64 dispatch crosses InfiniBand with NCCL's all-to-all; at the NIC's own rate
    (NETWORK_A2A_EFFICIENCY, nccl-tests#267) the row is within 20 %, at NVLink's 0.5 it is over 20 % slow."""
    import placement.cost.constants as C
    from placement.calibration.validate import predict

    run = _run("megatron-bridge-25.11-b200-gpt-oss-120b-64gpu")
    assert run.layout["ep"] == 64
    res = predict(run)
    assert res.fits and abs(res.error) <= 0.20
    monkeypatch.setattr(C, "NETWORK_A2A_EFFICIENCY", {})
    assert predict(run).error > 0.20


def test_shared_expert_keeps_its_tp_collectives_on_the_mlperf_gb200_row(monkeypatch) -> None:
    """DeepSeek-V3's shared expert is a tensor-parallel MLP (Megatron-Core SharedExpertMLP: its own
    sequence-parallel all-gather and reduce-scatter), so a TP2 / ETP1 MoE layer keeps all of a dense layer's TP
    collectives, not only attention's.  The MLPerf GB200 row (TP2) is within 20 % with them; counting only
    attention's leaves it a point further off (two before its FP8 all-gathers were priced at 1 byte an element,
    recipe tp_gathers_16bit; over 20 % before the fused attention backward was priced at 2.5 forwards)."""
    from dataclasses import replace

    import placement.cost.comm as comm
    from placement.calibration.validate import predict

    run = _run("mlperf-v6.0-nvidia-gb200-deepseek-v3-512gpu")
    res = predict(run)
    assert res.fits and abs(res.error) <= 0.20
    real = comm.tp_term

    def attention_only(x):
        t = real(x)  # the attention's half of a dense layer's collectives, and of what its GEMMs cover
        return replace(t, moe_s=t.dense_s * 0.5, column_hidden_moe_s=t.column_hidden_s * 0.5)

    monkeypatch.setattr("placement.cost.step.tp_term", attention_only)
    assert predict(run).error < res.error - 0.01


@pytest.mark.parametrize("run", [r for r in RUNS if r["id"].startswith("megatron-bridge")],
                         ids=[i for i in IDS if i.startswith("megatron-bridge")])
def test_megatron_bridge_runs_reduce_gradients_in_bf16_as_their_scripts_set(run: dict) -> None:
    """Megatron-Bridge's performance scripts set grad_reduce_in_fp32 False (mixed_precision and ddp) for every model
    they benchmark (a helper's review: the rows said fp32, from Megatron-LM's --bf16 default, without a source)."""
    assert run["recipe"]["grad_reduce_fp32"] is False
    assert "grad_reduce_in_fp32 false" in run["recipe_sources"].lower()
