"""GPT-NeoX-20B's recipe as it trained (issue: every dense row within 12 %; the row is still outside it), each term
tested on the row it moves:

- `checkpoint_sync`: DeepSpeed's activation checkpointing under `synchronize_each_layer` calls
  torch.cuda.synchronize() at the start and end of every checkpointed chunk's forward and backward (DeeperSpeed
  eb7f5cff checkpointing.py); a chunk's start follows the previous chunk's end, so two idle gaps per chunk;
- `fused_model_ops: false`: GPT-NeoX concatenates a partial RoPE's rotated and passed-through slices back (always),
  and runs the bias-dropout-adds of biased projections unfused unless `bias_dropout_fusion` (default false).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.calibration.validate import load_runs, predict
from placement.catalog import load_accelerator, load_cluster, load_model
from placement.cli import main
from placement.cost import constants as C
from placement.cost import layer as L
from placement.errors import InputError

RUNS = {r.id: r for r in load_runs()}
NEOX = RUNS["gpt-neox-20b-96xa100"]
DATA = Path(__file__).parent / "data" / "audit" / "neox"
FUSED = '"rope_fusion": true,\n  "bias_dropout_fusion": true,'


def _with_recipe(run, **update):
    return run.model_copy(update={"recipe": run.recipe.model_copy(update=update)})


def _neox_text() -> str:
    return (DATA / "20B.yml").read_text()


def _slots(run) -> int:
    """Micro-batch slots of the pipeline: m micro-batches plus the p - 1 the bubble runs at the same pace."""
    return run.global_batch // (run.layout["dp"] * run.layout["micro_batch_size"]) + run.layout["pp"] - 1


def _evaluate(*extra) -> dict:
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16",
                                       "--tp", "2", "--pp", "2", "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_neox_row_pays_a_gap_per_checkpointed_layer_boundary_and_micro_batch(mean_speed_gpus) -> None:
    """11 checkpointed layers per stage: 12 drains of the GPU in the forward and 12 in the backward, on every
    micro-batch slot: without them the row is a point faster, further from the published step."""
    assert NEOX.recipe.checkpoint_sync and NEOX.layout["recompute"] == "full"
    res, without = predict(NEOX), predict(_with_recipe(NEOX, checkpoint_sync=False))
    expected = C.CHECKPOINT_SYNC_PASSES * C.HOST_SYNC_S * (44 // NEOX.layout["pp"] + 1) * _slots(NEOX)
    assert res.predicted_step_time_s - without.predicted_step_time_s == pytest.approx(expected, rel=1e-6)
    assert abs(res.error) < abs(without.error) - 0.008


def test_checkpoint_sync_counts_chunks_and_nothing_without_checkpointing_or_under_blocking_launches() -> None:
    def step(*extra) -> float:
        return _evaluate(*extra)["step_time_s"]

    for recompute in ("none", "selective"):
        assert step("--recompute", recompute, "--checkpoint-sync") == step("--recompute", recompute)
    base = step("--recompute", "full")
    every = step("--recompute", "full", "--checkpoint-sync") - base
    assert every > 0
    # 16 layers per stage: 17 gaps a pass; in chunks of 4, 5; of 3, 7 (six chunks, the last of one layer); of
    # 16 or more, 2 (one chunk)
    for interval, gaps in ((4, 5), (3, 7), (16, 2), (32, 2)):
        got = step("--recompute", "full", "--checkpoint-sync", "--checkpoint-interval", str(interval)) - base
        assert got == pytest.approx(every * gaps / 17, rel=1e-3), interval
    # launches that wait for their kernels leave the queue empty anyway
    blocking = step("--recompute", "full", "--cuda-launch-blocking")
    assert step("--recompute", "full", "--cuda-launch-blocking", "--checkpoint-sync") == blocking


def test_neox_row_prices_its_eager_concatenation_and_bias_adds() -> None:
    assert not NEOX.recipe.fused_model_ops
    res, fused = predict(NEOX), predict(_with_recipe(NEOX, fused_model_ops=True))
    assert res.predicted_step_time_s > fused.predicted_step_time_s
    assert abs(res.error) < abs(fused.error) - 0.005


def test_partial_rope_adds_its_concatenation_and_its_slices_backward(mean_speed_gpus) -> None:
    """A quarter of each head rotated: the concatenation back (forward, and again in the recompute) and the two
    slices' zero-filled gradients summed (backward) over the 2 x hidden / tp query and key elements per token;
    rotating the whole head concatenates nothing (the rotation itself counts as fused, as TorchScript runs it)."""
    model = load_model(NEOX.model)
    assert model.rotary_percent == 0.25
    whole = model.model_copy(update={"rotary_percent": None})
    partial_s = predict(NEOX, model=model).predicted_step_time_s
    whole_s = predict(NEOX, model=whole).predicted_step_time_s
    hbm = load_accelerator(load_cluster(NEOX.cluster).accelerator).hbm_bandwidth_bytes_per_s
    tp, pp, mbs = NEOX.layout["tp"], NEOX.layout["pp"], NEOX.layout["micro_batch_size"]
    per_elem = 2 * L.PARTIAL_ROPE_FORWARD_BYTES + L.PARTIAL_ROPE_BACKWARD_BYTES
    per_slot = mbs * NEOX.seq_len * 2 * model.hidden_size / tp * per_elem / hbm * (44 // pp)
    # (to the soft maximum with the host's launch time, which the GPU time moves by a hair)
    assert partial_s - whole_s == pytest.approx(per_slot * _slots(NEOX), rel=1e-4)


def test_gpt_neox_config_states_its_sync_its_chunk_and_its_eager_ops(tmp_path: Path) -> None:
    lay = parse_launch([DATA / "20B.yml"])
    assert lay.recipe["checkpoint_sync"] is True and lay.recipe["checkpoint_interval"] == 1
    assert lay.sources["recipe.checkpoint_sync"].endswith('"synchronize_each_layer": true,')
    assert lay.recipe["fused_model_ops"] is False
    where = lay.sources["recipe.fused_model_ops"]
    assert "no bias_dropout_fusion (GPT-NeoX's default: false)" in where and '"rotary_pct": 0.25,' in where
    # both fusions on: the partial RoPE still concatenates; with the whole head rotated, all fused
    path = tmp_path / "20B.yml"
    path.write_text(_neox_text().replace('"rope_fusion": false,', FUSED))
    assert parse_launch([path]).recipe["fused_model_ops"] is False
    path.write_text(_neox_text().replace('"rope_fusion": false,', FUSED).replace('"rotary_pct": 0.25,',
                                                                                '"rotary_pct": 1.0,'))
    assert parse_launch([path]).recipe["fused_model_ops"] is True
    # chunks of 2 layers
    path.write_text(_neox_text().replace('"checkpoint_num_layers": 1,', '"checkpoint_num_layers": 2,'))
    lay = parse_launch([path])
    assert lay.recipe["checkpoint_interval"] == 2 and lay.sources["recipe.checkpoint_interval"].endswith(
        '"checkpoint_num_layers": 2,')
    # no checkpointing: the sync is not read as on, and says why
    path.write_text(_neox_text().replace('"checkpoint_activations": true,', '"checkpoint_activations": false,'))
    lay = parse_launch([path])
    assert "checkpoint_sync" not in lay.recipe
    assert any(x.startswith("synchronize_each_layer: true without checkpoint_activations") for x in lay.ignored)


@pytest.mark.parametrize("value", ['"true"', '"yes"', "1"])
def test_gpt_neox_booleans_must_be_booleans(tmp_path: Path, value: str) -> None:
    path = tmp_path / "20B.yml"
    path.write_text(_neox_text().replace('"synchronize_each_layer": true,', f'"synchronize_each_layer": {value},'))
    with pytest.raises(InputError, match="synchronize_each_layer must be true or false"):
        parse_launch([path])


def test_gpt_neox_reads_its_config_files_together(tmp_path: Path) -> None:
    """GPT-NeoX merges every config file it is given (a model file and a setup file); a key in two is an error."""
    text = _neox_text()
    model, setup = tmp_path / "model.yml", tmp_path / "setup.yml"
    keep = [line for line in text.splitlines() if "synchronize_each_layer" not in line]
    model.write_text("\n".join(keep) + "\n")
    setup.write_text('{\n  "synchronize_each_layer": true,\n  "wandb_project": "neox",\n}\n')
    lay = parse_launch([model, setup])
    assert lay.recipe["checkpoint_sync"] is True and lay.sources["recipe.checkpoint_sync"].startswith(str(setup))
    setup.write_text('{\n  "synchronize_each_layer": true,\n  "num_layers": 44,\n}\n')
    with pytest.raises(InputError, match="num_layers is also set in"):
        parse_launch([model, setup])


def test_evidence_skips_commented_lines(tmp_path: Path) -> None:
    path = tmp_path / "20B.yml"
    path.write_text(_neox_text().replace('  "checkpoint_activations": true,',
                                         '  # "checkpoint_activations": false,\n  "checkpoint_activations": true,'))
    assert "#" not in parse_launch([path]).sources["recompute"].split(":", 2)[-1]


def test_megatron_deepspeed_sync_needs_deepspeed_checkpointing(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    body = ("torchrun --nnodes 4 --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 2 "
            "--pipeline-model-parallel-size 4 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
            "--seq-length 2048 --micro-batch-size 1 --global-batch-size 16 --bf16 --deepspeed "
            "--deepspeed_config ds.json --zero-stage 1 --checkpoint-activations --synchronize-each-layer "
            "--checkpoint-num-layers 2")
    script.write_text(body + " --deepspeed-activation-checkpointing\n")
    lay = parse_launch([script])
    assert lay.recipe["checkpoint_sync"] is True and lay.sources["recipe.checkpoint_sync"].startswith(f"{script}:1")
    assert lay.recipe["checkpoint_interval"] == 2
    script.write_text(body + "\n")
    lay = parse_launch([script])
    assert "checkpoint_sync" not in lay.recipe
    assert any("without --deepspeed-activation-checkpointing" in x for x in lay.ignored)


def test_audit_prices_what_dropping_the_sync_saves(tmp_path: Path) -> None:
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
    assert found["cost_s"] == pytest.approx(saved, abs=2e-4) and saved > 0.2
    assert "synchronize_each_layer: false" in found["message"]
    assert not [f for f in unsynced["findings"] if f["kind"] == "checkpoint_sync"]


def test_emitted_deepspeed_files_synchronize_as_priced_and_read_back(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [
        "evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--tp", "2", "--pp", "2",
        "--recompute", "full", "--checkpoint-sync", "--checkpoint-interval", "2", "--out", str(out),
        "--emit", "megatron,deepspeed"])
    assert result.exit_code == 0, result.output
    ds = json.loads((out / "ds_config.json").read_text())
    assert ds["activation_checkpointing"]["synchronize_checkpoint_boundary"] is True
    assert ds["pipeline"]["activation_checkpoint_interval"] == 2
    script = (out / "deepspeed.sh").read_text()
    assert "deepspeed.checkpointing.configure(mpu, deepspeed_config=args.deepspeed_config)" in script
    # Megatron-LM cannot: its file says so and is priced without the syncs
    assert "checkpoint_sync False (not True)" in (out / "megatron.sh").read_text()
    # the emitted files, audited, read the syncs and their chunk back
    files = [out / n for n in ("ds_config.json", "deepspeed.sh", "hostfile", "ds_topology.py")]
    lay = parse_launch(files)
    assert lay.recipe["checkpoint_sync"] is True and lay.recipe["checkpoint_interval"] == 2


def test_a_gpt_neox_audit_speaks_its_configs_keys() -> None:
    """The change list of a GPT-NeoX config is in its own keys, each launched value the one the file states (or
    marked where the file leaves it to GPT-NeoX's default)."""
    result = CliRunner().invoke(main, ["audit", "--model", "gpt-neox-20b", "--cluster", "gpt-neox-a100-40g",
                                       "--gpus", "96", "--launch", str(DATA / "20B.yml"), "--json"])
    assert result.exit_code in (0, 1), result.output
    got = json.loads(result.stdout)
    assert got["layout"]["dialect"] == "gpt-neox" and "GPT-NeoX config's keys" in got["changes_note"]
    text = _neox_text()
    for c in got["changes"]:
        assert "ds_topology" not in c["argument"] and not c["argument"].startswith("pipeline.")
        key = c["argument"].rsplit(".", 1)[-1]
        if c["from"] is not None and c.get("note") is None:
            # the launched value is the file's own
            (stated,) = [line for line in text.splitlines() if f'"{key}":' in line and not line.strip().startswith("#")]
            assert c["from"] in stated.replace('"', " ").replace(",", " ").split(), (key, stated)


def test_deepspeed_files_without_a_pipeline_state_the_chunk_and_audit_back_to_their_price(tmp_path: Path) -> None:
    """Without a pipeline the training code checkpoints; ds_topology.py states recompute and the chunk, and the
    files audited back price what the header says."""
    out = tmp_path / "out"
    job = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "32"]
    result = CliRunner().invoke(main, ["evaluate", *job, "--tp", "2", "--pp", "1", "--recompute", "full",
                                       "--framework", "deepspeed", "--checkpoint-sync", "--checkpoint-interval", "2",
                                       "--out", str(out), "--emit", "deepspeed", "--json"])
    assert result.exit_code == 0, result.output
    priced = json.loads(result.stdout)["step_time_s"]
    assert "checkpoint_interval = 2" in (out / "ds_topology.py").read_text()
    files = [str(out / n) for n in ("ds_config.json", "deepspeed.sh", "hostfile", "ds_topology.py")]
    audited = CliRunner().invoke(main, ["audit", *job, *(x for f in files for x in ("--launch", f)), "--json"])
    assert audited.exit_code in (0, 1), audited.output
    got = json.loads(audited.stdout)
    assert got["estimate"]["recipe"]["checkpoint_interval"] == 2 and got["estimate"]["recipe"]["checkpoint_sync"]
    assert got["estimate"]["step_time_s"] == pytest.approx(priced, abs=2e-6)


def test_a_checkpointed_chunk_keeps_one_input_and_rebuilds_all_its_layers() -> None:
    """DeepSpeed's activation_checkpoint_interval k: a rank keeps one input per chunk of k layers per micro-batch in
    flight, and backward holds k layers' activations at once: memory falls from k = 1 to 2 only by the inputs saved
    (and rises by one layer's working set), and one chunk of a whole stage holds every layer's activations."""
    def memory(k: int) -> dict:
        return _evaluate("--recompute", "full", "--framework", "deepspeed", "--checkpoint-interval", str(k))["memory"]

    one, two, whole, more = (memory(k)["activations_bytes"] for k in (1, 2, 16, 64))
    # llama3-8b at seq 8192, tp 2 with sequence parallelism: a layer input is 8192 x 4096 x 2 / 2 bytes; the peak
    # rank is the last of 2 (it holds the logits), one micro-batch in flight; k = 2 keeps 8 of its 16 inputs and
    # rebuilds 2 layers, not 1
    layer_input = 8192 * 4096 * 2 / 2
    working = one - 16 * layer_input
    assert working > 10 * layer_input  # a whole layer's activations
    assert two == pytest.approx(8 * layer_input + 2 * working, rel=1e-6)
    assert whole == pytest.approx(1 * layer_input + 16 * working, rel=1e-6)
    assert more == whole  # a chunk is at most the rank's 16 layers


def test_gpt_neox_numbers_and_its_zero_rule(tmp_path: Path) -> None:
    """pipe_parallel_size 0 is GPT-NeoX's default (no PipelineModule): one stage; a quoted number is refused as
    GPT-NeoX refuses it; and the best plan keeps to ZeRO-0/1, since GPT-NeoX exits on ZeRO-2/3 with its
    PipelineModule or model parallelism (megatron/training.py)."""
    path = tmp_path / "20B.yml"
    path.write_text(_neox_text().replace('"pipe_parallel_size": 4,', '"pipe_parallel_size": 0,'))
    lay = parse_launch([path])
    assert lay.pp == 1 and "0: no PipelineModule" in lay.sources["pp"]
    path.write_text(_neox_text().replace('"model_parallel_size": 2,', '"model_parallel_size": "2",'))
    with pytest.raises(InputError, match="model_parallel_size must be a whole number, got '2'"):
        parse_launch([path])
    path.write_text(_neox_text().replace('"hidden_size": 6144,',
                                         '"hidden_size": 6144,\n  "intermediate_size": "24576",'))
    with pytest.raises(InputError, match="intermediate_size must be a whole number, got '24576'"):
        parse_launch([path])
    # a Llama-3-8B-shaped GPT-NeoX job on one node: left free, the best plan would take ZeRO-2 under TP
    path.write_text('{\n  "pipe_parallel_size": 1,\n  "model_parallel_size": 1,\n  "num_layers": 32,\n'
                    '  "hidden_size": 4096,\n  "num_attention_heads": 32,\n  "seq_length": 8192,\n'
                    '  "pos_emb": "rotary",\n  "activation": "swiglu",\n  "intermediate_size": 43008,\n'
                    '  "num_kv_heads": 8,\n  "train_micro_batch_size_per_gpu": 1,\n'
                    '  "gradient_accumulation_steps": 4,\n  "zero_optimization": {"stage": 1},\n'
                    '  "checkpoint_activations": true,\n  "bf16": {"enabled": true},\n}\n')
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                                       "--launch", str(path), "--json"])
    assert result.exit_code in (0, 1), result.output
    best = json.loads(result.stdout)["best"]["layout"]
    assert best["tp"] > 1 and best["zero_stage"] <= 1


def test_gpt_neox_mlp_width_is_compared_with_the_model(tmp_path: Path) -> None:
    """GPT-NeoX builds the MLP from intermediate_size (else 4 x hidden), two thirds of it per gated pair, each branch
    rounded up to a multiple of 256: Llama-2-7B's config (swiglu, 32768) is an 11008-wide MLP, which is not
    llama3-8b's 14336, so the audit refuses it as another model; 20B.yml's 4 x 6144 is gpt-neox-20b's."""
    assert parse_launch([DATA / "20B.yml"]).ffn_hidden_size == 24576 == load_model("gpt-neox-20b").ffn_hidden_size
    path = tmp_path / "7B.yml"
    path.write_text('{\n  "pipe_parallel_size": 1,\n  "model_parallel_size": 1,\n  "num_layers": 32,\n'
                    '  "hidden_size": 4096,\n  "num_attention_heads": 32,\n  "seq_length": 4096,\n'
                    '  "intermediate_size": 32768,\n  "activation": "swiglu",\n'
                    '  "train_micro_batch_size_per_gpu": 1,\n}\n')
    assert parse_launch([path]).ffn_hidden_size == 11008
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                                       "--launch", str(path)])
    assert result.exit_code == 2 and "ffn_hidden_size = 11008" in result.stderr and "has 14336" in result.stderr


def test_bloom_flags_the_audit_does_not_price_are_listed(tmp_path: Path) -> None:
    """BLOOM's tr11 script passes --sync-tp-duplicated-parameters and --embed-layernorm: neither is priced, and the
    audit says so instead of dropping them."""
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nnodes 4 --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 2 "
                      "--pipeline-model-parallel-size 4 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
                      "--seq-length 2048 --micro-batch-size 1 --global-batch-size 16 --bf16 --deepspeed "
                      "--deepspeed_config ds.json --zero-stage 0 --sync-tp-duplicated-parameters --embed-layernorm\n")
    ignored = parse_launch([script]).ignored
    for flag in ("--sync-tp-duplicated-parameters", "--embed-layernorm"):
        assert any(x.startswith(f"{flag}: ") and "not priced" in x for x in ignored), flag
