"""GPT-NeoX-20B's recipe as it trained (issue: every dense row within 12 %), each term tested on the row it moves:

- `checkpoint_sync`: DeepSpeed's activation checkpointing under `synchronize_each_layer` calls
  torch.cuda.synchronize() at the start and end of every checkpointed layer's forward and backward (DeeperSpeed
  eb7f5cff checkpointing.py), four host syncs per layer per micro-batch;
- `fused_model_ops: false`: GPT-NeoX runs its RoPE (and a partial RoPE's concatenation) and its bias-dropout-add as
  eager element-wise ops unless `rope_fusion` and `bias_dropout_fusion` say otherwise (both default false).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.calibration.validate import load_runs, predict
from placement.cli import main
from placement.cost import constants as C
from placement.cost import layer as L

RUNS = {r.id: r for r in load_runs()}
NEOX = RUNS["gpt-neox-20b-96xa100"]
DATA = Path(__file__).parent / "data" / "audit" / "neox"
FUSED = '"rope_fusion": true,\n  "bias_dropout_fusion": true,'


def _with_recipe(run, **update):
    return run.model_copy(update={"recipe": run.recipe.model_copy(update=update)})


def _neox_text() -> str:
    return (DATA / "20B.yml").read_text()


def test_neox_row_pays_four_syncs_per_checkpointed_layer_and_micro_batch() -> None:
    """11 checkpointed layers per stage x 4 syncs on every one of the m + p - 1 micro-batch slots of the
    pipeline (the bubble runs at the same pace): without them the row is 1.7 points faster, further from the
    published step."""
    assert NEOX.recipe.checkpoint_sync and NEOX.layout["recompute"] == "full"
    res, without = predict(NEOX), predict(_with_recipe(NEOX, checkpoint_sync=False))
    layers = 44 // NEOX.layout["pp"]
    slots = NEOX.global_batch // (NEOX.layout["dp"] * NEOX.layout["micro_batch_size"]) + NEOX.layout["pp"] - 1
    expected = C.CHECKPOINT_BOUNDARY_SYNCS * C.HOST_SYNC_S * layers * slots
    assert res.predicted_step_time_s - without.predicted_step_time_s == pytest.approx(expected, rel=1e-6)
    assert abs(res.error) < abs(without.error) - 0.015


def test_checkpoint_sync_costs_nothing_without_checkpointed_layers() -> None:
    def step(*extra):
        result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus",
                                           "16", "--tp", "2", "--pp", "2", "--json", *extra])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)["step_time_s"]

    for recompute in ("none", "selective"):
        assert step("--recompute", recompute, "--checkpoint-sync") == step("--recompute", recompute)
    assert step("--recompute", "full", "--checkpoint-sync") > step("--recompute", "full")


def test_neox_row_prices_its_eager_rope_and_bias_adds() -> None:
    """Fused, the row is a point and a half faster, further from the published step."""
    assert not NEOX.recipe.fused_model_ops
    res, fused = predict(NEOX), predict(_with_recipe(NEOX, fused_model_ops=True))
    assert res.predicted_step_time_s > fused.predicted_step_time_s
    assert abs(res.error) < abs(fused.error) - 0.01


def test_partial_rope_adds_its_concatenation_and_its_slices_backward() -> None:
    """Rotating a quarter of each head costs a quarter of the rotation's bytes plus the concatenation (forward) and
    the two slices' zero-filled gradients and their sum (backward): the NeoX row's eager RoPE, priced from its
    bytes, against the same row with every dimension rotated."""
    from placement.catalog import load_model

    model = load_model(NEOX.model)
    assert model.rotary_percent == 0.25
    whole = model.model_copy(update={"rotary_percent": None})
    partial_s = predict(NEOX, model=model).predicted_step_time_s
    whole_s = predict(NEOX, model=whole).predicted_step_time_s
    # bytes per query/key element over forward, recompute forward and backward (full recompute: 2 forwards)
    partial_b = 2 * (0.25 * L.ROPE_UNFUSED_BYTES + L.PARTIAL_ROPE_FORWARD_BYTES) + (
        0.25 * L.ROPE_UNFUSED_BYTES + L.PARTIAL_ROPE_BACKWARD_BYTES)
    whole_b = 3 * L.ROPE_UNFUSED_BYTES
    assert partial_b < whole_b and (whole_s - partial_s) > 0
    # the difference is those bytes for 2 x hidden / tp elements per token, every layer and micro-batch slot
    from placement.catalog import load_accelerator, load_cluster

    hbm = load_accelerator(load_cluster(NEOX.cluster).accelerator).hbm_bandwidth_bytes_per_s
    tp, pp, mbs = NEOX.layout["tp"], NEOX.layout["pp"], NEOX.layout["micro_batch_size"]
    slots = NEOX.global_batch // (NEOX.layout["dp"] * mbs) + pp - 1
    per_slot = mbs * NEOX.seq_len * 2 * model.hidden_size / tp * (whole_b - partial_b) / hbm * (44 // pp)
    # (to the soft maximum with the host's launch time, which the GPU time moves by a hair)
    assert whole_s - partial_s == pytest.approx(per_slot * slots, rel=1e-4)


def test_gpt_neox_config_states_its_sync_and_its_fusions(tmp_path: Path) -> None:
    lay = parse_launch([DATA / "20B.yml"])
    assert lay.recipe["checkpoint_sync"] is True
    assert lay.sources["recipe.checkpoint_sync"].endswith('"synchronize_each_layer": true,')
    assert lay.recipe["fused_model_ops"] is False
    where = lay.sources["recipe.fused_model_ops"]
    assert '"rope_fusion": false,' in where and "no bias_dropout_fusion (GPT-NeoX's default: false)" in where
    assert not any(x.startswith("synchronize_each_layer") for x in lay.ignored)
    # both fusions on: fused; the sync off: not read as on
    path = tmp_path / "20B.yml"
    path.write_text(_neox_text().replace('"rope_fusion": false,', FUSED).replace(
        '"synchronize_each_layer": true,', '"synchronize_each_layer": false,'))
    lay = parse_launch([path])
    assert lay.recipe["fused_model_ops"] is True and "checkpoint_sync" not in lay.recipe


def test_megatron_deepspeed_sync_each_layer_needs_deepspeed_checkpointing(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    body = ("torchrun --nnodes 4 --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 2 "
            "--pipeline-model-parallel-size 4 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
            "--seq-length 2048 --micro-batch-size 1 --global-batch-size 16 --bf16 --deepspeed "
            "--deepspeed_config ds.json --zero-stage 1 --checkpoint-activations --synchronize-each-layer")
    script.write_text(body + " --deepspeed-activation-checkpointing\n")
    lay = parse_launch([script])
    assert lay.recipe["checkpoint_sync"] is True and "--synchronize-each-layer" in lay.sources["recipe.checkpoint_sync"]
    script.write_text(body + "\n")
    lay = parse_launch([script])
    assert "checkpoint_sync" not in lay.recipe
    assert any("without --deepspeed-activation-checkpointing" in x for x in lay.ignored)


def test_audit_prices_what_dropping_the_sync_and_fusing_the_ops_save(tmp_path: Path) -> None:
    def audit(path: Path) -> dict:
        result = CliRunner().invoke(main, ["audit", "--model", "gpt-neox-20b", "--cluster", "gpt-neox-a100-40g",
                                           "--gpus", "96", "--launch", str(path), "--json"])
        assert result.exit_code in (0, 1), result.output
        return json.loads(result.stdout)

    launched = audit(DATA / "20B.yml")
    plain = tmp_path / "20B.yml"
    plain.write_text(_neox_text().replace('"synchronize_each_layer": true,', '"synchronize_each_layer": false,'))
    unsynced = audit(plain)
    [found] = [f for f in launched["findings"] if f["kind"] == "checkpoint_sync"]
    saved = launched["estimate"]["step_time_s"] - unsynced["estimate"]["step_time_s"]
    assert found["cost_s"] == pytest.approx(saved, abs=2e-4) and saved > 0.5
    assert "synchronize_each_layer: false" in found["message"]
    assert not [f for f in unsynced["findings"] if f["kind"] == "checkpoint_sync"]
    fused = tmp_path / "fused.yml"
    fused.write_text(_neox_text().replace('"rope_fusion": false,', FUSED))
    [eager] = [f for f in launched["findings"] if f["kind"] == "model_ops_unfused"]
    gained = launched["estimate"]["step_time_s"] - audit(fused)["estimate"]["step_time_s"]
    assert eager["cost_s"] == pytest.approx(gained, abs=2e-4) and gained > 0


def test_emitted_files_synchronize_as_priced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [
        "evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--tp", "2", "--pp", "2",
        "--recompute", "full", "--checkpoint-sync", "--out", str(out), "--emit", "megatron,deepspeed"])
    assert result.exit_code == 0, result.output
    ds = json.loads((out / "ds_config.json").read_text())
    assert ds["activation_checkpointing"]["synchronize_checkpoint_boundary"] is True
    # Megatron-LM cannot: its file says so and is priced without the syncs
    assert "checkpoint_sync False (not True)" in (out / "megatron.sh").read_text()
