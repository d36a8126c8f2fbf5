"""What a framework runs when its launch files leave a setting out: the audit prices the framework's own default,
not placement's Recipe default, and says where the value came from.

Megatron-LM: `--overlap-grad-reduce` is a store_true flag (megatron/training/arguments.py), fp8_recipe is 'delayed'
and moe_permute_fusion / moe_router_fusion / moe_grouped_gemm are False (megatron-core TransformerConfig).
Megatron-DeepSpeed computes attention unfused unless a --use-flash-attn* flag says otherwise.  DeepSpeed's
PipelineEngine reduces gradients after the pipeline flush, behind no compute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

AUDIT = Path(__file__).parent / "data" / "audit"
LLAMA_FP8 = AUDIT / "megatron" / "train_llama3_8b_h100_fp8.sh"
JOB_8B = ("--model", "llama3-8b", "--gpus", "64")


def _json(*args: str) -> dict:
    result = CliRunner().invoke(main, ["--reproducible", *args, "--json"], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)


def _audit(path: Path, *job: str, cluster: str = "dgx-h100") -> dict:
    return _json("audit", "--launch", str(path), "--cluster", cluster, *job)


def _without(tmp_path: Path, source: Path, *flags: str) -> Path:
    """A copy of a launch script with the lines holding `flags` deleted."""
    lines = [x for x in source.read_text().splitlines() if not any(f in x for f in flags)]
    out = tmp_path / source.name
    out.write_text("\n".join(lines) + "\n")
    return out


def test_a_megatron_job_without_overlap_grad_reduce_reduces_after_the_last_backward(tmp_path) -> None:
    launched = _audit(LLAMA_FP8, *JOB_8B)
    assert launched["estimate"]["recipe"]["dp_overlap"] is True
    plain = _audit(_without(tmp_path, LLAMA_FP8, "--overlap-grad-reduce", "--overlap-param-gather"), *JOB_8B)
    est = plain["estimate"]
    assert est["recipe"]["dp_overlap"] is False
    assert "--overlap-grad-reduce is off unless given" in est["recipe_sources"]["dp_overlap"]
    # the whole reduction is exposed, so the job is slower by about what the launched one hid
    assert est["breakdown"]["exposed"]["dp"] == pytest.approx(est["breakdown"]["dp"])
    assert est["step_time_s"] > launched["estimate"]["step_time_s"]
    # a finding prices the flag, and the best plan runs it
    finding = next(f for f in plain["findings"] if f["kind"] == "dp_not_overlapped")
    assert finding["cost_s"] == pytest.approx(est["step_time_s"] - launched["estimate"]["step_time_s"], abs=2e-3)
    assert "--overlap-grad-reduce --overlap-param-gather" in finding["message"]
    assert plain["best"]["recipe"]["dp_overlap"] is True


def test_megatron_fp8_without_a_recipe_runs_delayed_scaling_not_the_accelerators_default() -> None:
    """On B200 placement's own default is MXFP8; Megatron without --fp8-recipe runs 'delayed' (per-tensor)."""
    est = _audit(LLAMA_FP8, *JOB_8B, cluster="dgx-b200")["estimate"]
    assert est["recipe"]["fp8_recipe"] == "tensorwise"
    assert "'delayed'" in est["recipe_sources"]["fp8_recipe"]


MOE_SCRIPT = """\
torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py \\
  --tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 --expert-model-parallel-size 8 \\
  --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --swiglu --ffn-hidden-size 14336 \\
  --group-query-attention --num-query-groups 8 \\
  --num-experts 8 --moe-router-topk 2 --moe-token-dispatcher-type alltoall {extra} \\
  --micro-batch-size 1 --global-batch-size 256 --bf16 \\
  --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
"""


@pytest.mark.parametrize("fused", [False, True])
def test_megatron_moe_fusions_and_grouped_gemm_are_off_unless_the_flags_say(tmp_path, fused) -> None:
    script = tmp_path / "moe.sh"
    extra = "--moe-permute-fusion --moe-router-fusion --moe-grouped-gemm" if fused else ""
    script.write_text(MOE_SCRIPT.format(extra=extra))
    data = _audit(script, "--model", "mixtral-8x7b", "--gpus", "64")
    est = data["estimate"]
    assert est["recipe"]["moe_fusions"] is fused
    if not fused:
        assert "moe_permute_fusion" in est["recipe_sources"]["moe_fusions"]
    notes = " ".join(data["layout"]["ignored"])
    assert ("no --moe-grouped-gemm" in notes) is not fused
    kinds = {f["kind"] for f in data["findings"]}
    assert ("moe_unfused" in kinds) is not fused
    assert data["best"]["recipe"]["moe_fusions"] is True
    added = {c["argument"] for c in data["changes"] if c["from"] is None}
    assert ("--moe-permute-fusion" in added) is not fused


def test_the_fused_moe_job_is_faster_than_the_unfused_one(tmp_path) -> None:
    steps = {}
    for extra in ("", "--moe-permute-fusion --moe-router-fusion"):
        script = tmp_path / f"moe{len(extra)}.sh"
        script.write_text(MOE_SCRIPT.format(extra=extra))
        steps[extra] = _audit(script, "--model", "mixtral-8x7b", "--gpus", "64")["estimate"]["step_time_s"]
    assert steps["--moe-permute-fusion --moe-router-fusion"] < steps[""]


BLOOM = AUDIT / "bloom" / "tr11-176B-ml.slurm"
BLOOM_JOB = ("--model", "bloom-176b", "--gpus", "384")


def test_megatron_deepspeed_attention_is_unfused_unless_a_flash_flag_is_given(tmp_path) -> None:
    est = _audit(BLOOM, *BLOOM_JOB, cluster="jean-zay-a100-80g")["estimate"]
    assert est["recipe"]["attention_kernel"] == "unfused"
    assert "CoreAttention" in est["recipe_sources"]["attention_kernel"]
    flash = tmp_path / BLOOM.name
    flash.write_text(BLOOM.read_text().replace("    --deepspeed \\", "    --deepspeed --use-flash-attn-v2 \\"))
    fast = _audit(flash, *BLOOM_JOB, cluster="jean-zay-a100-80g")["estimate"]
    assert fast["recipe"]["attention_kernel"] == "flash2"
    assert fast["step_time_s"] < est["step_time_s"]


def test_the_bloom_launch_file_is_priced_as_its_calibration_row() -> None:
    """validate's BLOOM row (unfused attention, from the run's own code) and the audit of the run's launch file
    describe the same job: their step times agree to a tenth of a percent."""
    from placement.calibration.validate import load_runs, predict

    row = next(r for r in load_runs() if r.id == "bloom-176b-384xa100")
    audited = _audit(BLOOM, *BLOOM_JOB, cluster="jean-zay-a100-80g")["estimate"]["step_time_s"]
    assert audited == pytest.approx(predict(row).predicted_step_time_s, rel=1e-3)


def test_a_bridge_config_states_its_gradient_overlap() -> None:
    """Megatron-Bridge's DeepSeek-V3 config sets comm_overlap.overlap_grad_reduce false: priced exposed."""
    path = AUDIT / "bridge" / "deepseek_v3_pretrain_h100_fp8_sc_v1.yaml"
    est = _audit(path, "--model", "deepseek-v3", "--gpus", "1024")["estimate"]
    assert est["recipe"]["dp_overlap"] is False
    assert "overlap_grad_reduce: false" in est["recipe_sources"]["dp_overlap"]


@pytest.mark.parametrize("pp", [1, 2])
def test_deepspeeds_pipeline_engine_reduces_gradients_after_the_flush(pp) -> None:
    """`pipeline_p2p_blocking` prices DeepSpeed's PipelineEngine, whose ReduceGrads runs in the schedule's last
    step: nothing hides it.  Without a pipeline the engine is not in play and the overlap holds."""
    # (dp 2: at dp 1 there is no reduction to hide; the test passed there only on an expert-group latency that a
    # dense model's DP term charged, since removed)
    args = ("evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", str(16 * pp), "--tp", "8",
            "--pp", str(pp), "--mbs", "1", "--seq-len", "4096", "--global-batch", "64", "--zero", "1")
    blocking = _json(*args, "--pipeline-p2p-blocking")["breakdown"]
    paired = _json(*args)["breakdown"]
    assert paired["exposed"]["dp"] < paired["dp"]
    if pp > 1:
        assert blocking["exposed"]["dp"] == pytest.approx(blocking["dp"])
    else:
        assert blocking["exposed"]["dp"] == pytest.approx(paired["exposed"]["dp"])


TT_8B = AUDIT / "torchtitan" / "llama3_8b.toml"
TT_JOB = ("--model", "llama3-8b", "--gpus", "8")


def _toml(tmp_path: Path, old: str, new: str) -> Path:
    text = TT_8B.read_text()
    assert old in text
    out = tmp_path / "llama3_8b.toml"
    out.write_text(text.replace(old, new))
    return out


@pytest.mark.parametrize(("option", "full_layers"), [("'2'", 16), ("'4'", 8), ("'1'", None)])
def test_torchtitan_layer_sac_checkpoints_every_kth_block(tmp_path, option, full_layers) -> None:
    """torchtitan <= 0.2's selective_ac_option k: a full checkpoint of every k-th block (_apply_layer_sac)."""
    path = _toml(tmp_path, "selective_ac_option = 'op'", f"selective_ac_option = {option}")
    data = _audit(path, *TT_JOB)
    assert data["layout"]["recompute"] == "full"
    assert data["estimate"]["recipe"]["recompute_num_layers"] == full_layers
    if full_layers:
        assert f"every {option.strip(chr(39))}th of 32" in data["estimate"]["recipe_sources"]["recompute_num_layers"]


def test_torchtitan_without_an_activation_checkpoint_table_runs_its_default_layer_sac(tmp_path) -> None:
    path = _toml(tmp_path, "[activation_checkpoint]\nmode = 'selective'  # ['none', 'selective', 'full']\n"
                           "selective_ac_option = 'op'", "")
    data = _audit(path, *TT_JOB)
    assert data["layout"]["recompute"] == "full"
    assert data["estimate"]["recipe"]["recompute_num_layers"] == 16
    assert "default selective_ac_option '2'" in data["layout"]["sources"]["recompute"]
    none = _audit(_toml(tmp_path, "mode = 'selective'", "mode = 'none'"), *TT_JOB)
    assert none["estimate"]["step_time_s"] < data["estimate"]["step_time_s"]  # half the blocks recomputed


def test_torchtitan_selective_is_priced_as_its_per_op_policy() -> None:
    """selective_ac_option 'op' is the per-op policy: read as recompute module per_op, priced as such
    (tests/test_per_op_checkpointing.py) with its source; this 0.2.x file's attention runs wq, wk and wv apart, which
    the note says is priced as 0.3.0's fused wqkv."""
    data = _audit(TT_8B, *TT_JOB)
    assert data["layout"]["recompute"] == "selective"
    assert data["estimate"]["recipe"]["recompute_modules"] == ["per_op"]
    assert "torchtitan's per-op policy" in data["layout"]["sources"]["recipe.recompute_modules"]
    assert [x for x in data["layout"]["ignored"] if "per-op" in x] == [
        next(x for x in data["layout"]["ignored"] if x.startswith("per-op checkpointing of torchtitan 0.2.x"))]


def test_torchtitan_batch_and_sequence_defaults(tmp_path) -> None:
    """Without local_batch_size and seq_len torchtitan trains 8 sequences of 2048 per data-parallel rank and
    step (global_batch_size -1: local x dp, no accumulation)."""
    path = _toml(tmp_path, "batch_size = 1\nseq_len = 8192\n", "")
    data = _audit(path, *TT_JOB)
    est, lay = data["estimate"], data["layout"]
    assert (est["seq_len"], est["global_batch"], lay["micro_batch_size"], lay["num_microbatches"]) == (2048, 64, 8, 1)
    assert "torchtitan default training.seq_len 2048" in lay["sources"]["seq_len"]


def _learned_bloom(tmp_path: Path) -> tuple[Path, tuple[str, ...]]:
    """BLOOM's Megatron-DeepSpeed script and model with learned positions instead of ALiBi: a model Megatron-LM
    builds, so the job may move to it (megatron_lm_lacks)."""
    model = tmp_path / "bloom-learned.yaml"
    model.write_text(Path("models/bloom-176b.yaml").read_text().replace("name: bloom-176b", "name: bloom-learned")
                     .replace("position_embedding: alibi", "position_embedding: learned"))
    return _without(tmp_path, BLOOM, "--position-embedding-type alibi"), ("--model", str(model), "--gpus", "384")


def test_a_megatron_deepspeed_jobs_best_plan_is_a_move_to_megatron_lm(tmp_path) -> None:
    """The best plan's files are Megatron-LM's: it is priced with Megatron-LM's engine (paired pipeline sends, its
    own DDP, a fused attention backend), and the diff says it is a move, not edits to the script."""
    script, job = _learned_bloom(tmp_path)
    data = _audit(script, *job, cluster="jean-zay-a100-80g")
    launched, best = data["estimate"]["recipe"], data["best"]["recipe"]
    assert launched["pipeline_p2p_blocking"] is True and best["pipeline_p2p_blocking"] is False
    assert best["attention_kernel"] == "flash" and best["grad_accumulation"] == "fused"
    assert "Megatron-LM" in data["best"]["recipe_sources"]["pipeline_p2p_blocking"]
    assert "Megatron-DeepSpeed" in data["changes_note"]
    note = _audit(LLAMA_FP8, *JOB_8B)["changes_note"]  # edits to the script: at most which release its flags need
    assert note is None or note.startswith("spelled for megatron-core 0.19.2")


def test_settings_read_or_noted_rather_than_dropped(tmp_path) -> None:
    """A setting the files state is priced, or listed as seen but not modelled: never dropped."""
    script = tmp_path / "mg.sh"
    script.write_text(LLAMA_FP8.read_text().replace("    --overlap-grad-reduce\n",
                                                    "    --overlap-grad-reduce --no-gradient-accumulation-fusion\n"))
    notes = " ".join(_audit(script, *JOB_8B)["layout"]["ignored"])
    assert "--no-gradient-accumulation-fusion" in notes
    toml = _toml(tmp_path, "compile = false", "compile = true")
    assert any("torch.compile" in x for x in _audit(toml, *TT_JOB)["layout"]["ignored"])
    config = tmp_path / "moe.yml"
    config.write_text("base_config: base.yml\nmodel_name: mixtral-8x7b\nper_device_batch_size: 1\n"
                      "ici_fsdp_parallelism: -1\ncapacity_factor: 1.25\nremat_policy: full\n")
    # on base.yml's sparse_matmul path MaxText never reads capacity_factor (layers/moe.py generate_masks is the
    # dense path's): noted, priced dropless; with sparse_matmul false it drops tokens and is priced so
    got = _audit(config, "--model", "mixtral-8x7b", "--gpus", "64")
    assert got["estimate"]["recipe"].get("moe_capacity_factor") is None
    assert any(x.startswith("capacity_factor 1.25 (") for x in got["layout"]["ignored"])
    config.write_text(config.read_text() + "sparse_matmul: false\n")
    est = _audit(config, "--model", "mixtral-8x7b", "--gpus", "64")["estimate"]
    assert est["recipe"]["moe_capacity_factor"] == 1.25
    assert "capacity_factor: 1.25" in est["recipe_sources"]["moe_capacity_factor"]


def test_the_diff_marks_what_the_files_do_not_state_and_states_the_global_batch() -> None:
    """The diff compares placement's arguments for the two plans, in the TOML's own keys; a launched value the files
    do not state is marked, and a global batch the files leave to local batch x dp is stated when the best plan
    changes dp."""
    from placement.audit.changes import NOT_IN_FILES

    data = _audit(AUDIT / "torchtitan" / "llama3_70b.toml", "--model", "llama3-70b", "--gpus", "64",
                  cluster="dgx-a100-80g")
    by = {c["argument"]: c for c in data["changes"]}
    assert by["training.global_batch_size"]["from"] is None
    assert int(by["training.global_batch_size"]["to"]) == data["estimate"]["global_batch"]
    assert "note" not in by["training.local_batch_size"]  # the TOML states local_batch_size
    marked = [c for c in data["changes"] if c.get("note") == NOT_IN_FILES]
    text = (AUDIT / "torchtitan" / "llama3_70b.toml").read_text()
    assert all(c["argument"].rsplit(".", 1)[-1] not in text for c in marked)
    # neither plan pipelines: the pipeline's micro-batch size, which the TOML does not state, is no change
    assert data["estimate"]["layout"]["pp"] == data["best"]["layout"]["pp"] == 1
    assert not [c for c in data["changes"] if "pipeline_parallel" in c["argument"]]


def test_an_argument_one_typo_from_one_read_is_refused_as_megatron_would(tmp_path) -> None:
    """Megatron-LM's parser refuses unknown arguments (allow_abbrev=False): a typo of a flag the audit reads would
    otherwise leave its default priced (tp 1 for `--tensor-model-parallel-sise 2`)."""
    script = tmp_path / "typo.sh"
    typo = MOE_SCRIPT.format(extra="").replace("--tensor-model-parallel-size", "--tensor-model-parallel-sise")
    script.write_text(typo)
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "mixtral-8x7b", "--cluster",
                                       "dgx-h100", "--gpus", "64"])
    assert result.exit_code == 2
    assert "did you mean --tensor-model-parallel-size?" in result.stderr and "Traceback" not in result.stderr
    negation = tmp_path / "negation.sh"  # a --no- form of a flag is not taken for a typo of it
    negation.write_text(MOE_SCRIPT.format(extra="--no-moe-permute-fusion"))
    assert _audit(negation, "--model", "mixtral-8x7b", "--gpus", "64")["layout"]["tp"] == 1


@pytest.mark.parametrize("flag", ["--fp4-param-gather", "--tp-comm-overlap-ag", "--moe-expert-rank-capacity-factor"])
def test_real_megatron_arguments_close_to_read_ones_are_not_typos(tmp_path, flag) -> None:
    script = tmp_path / "real.sh"
    script.write_text(MOE_SCRIPT.format(extra=flag + (" 1.5" if "factor" in flag else "")))
    assert _audit(script, "--model", "mixtral-8x7b", "--gpus", "64")["layout"]["tp"] == 1


def test_a_bridge_configs_overlap_survives_a_script_of_overrides(tmp_path) -> None:
    """Megatron-LM's argument defaults are not Megatron-Bridge's: a recipe script's Hydra overrides (which win the
    merge) must not bring --overlap-grad-reduce's default over the YAML's `ddp.overlap_grad_reduce: true`."""
    from placement.audit.launch import parse_launch

    yaml = tmp_path / "cfg.yaml"
    yaml.write_text((AUDIT / "bridge" / "deepseek_v3_pretrain_h100_fp8_sc_v1.yaml").read_text()
                    .replace("overlap_grad_reduce: false", "overlap_grad_reduce: true"))
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node=8 run_recipe.py --config-file cfg.yaml "
                      "model.pipeline_model_parallel_size=8\n")
    lay = parse_launch([script, yaml])
    assert lay.recipe["dp_overlap"] is True
    assert "overlap_grad_reduce: true" in lay.sources["recipe.dp_overlap"]
    # a Bridge config that states no overlap is not given Megatron-LM's argument default (off) either, but
    # Megatron-Bridge's own: its comm_overlap section turns it on with the distributed optimizer when DP > 1
    yaml.write_text("\n".join(x for x in yaml.read_text().splitlines() if "overlap_grad_reduce" not in x))
    lay = parse_launch([script, yaml])
    assert lay.recipe["dp_overlap"] is True and "_get_optimizer_overlap_cfgs" in lay.sources["recipe.dp_overlap"]


@pytest.mark.parametrize("drop", ["--parallelism.tensor_parallel_degree 8 ", "--training.seq_len 8192 ",
                                  "activation-checkpoint:full"])
def test_a_torchtitan_030_line_leaves_what_its_named_config_sets_to_it(tmp_path, drop: str) -> None:
    """torchtitan 0.3.0's named config sets the degrees, batch, sequence and activation checkpointing of the job
    (llama3_70b: tensor_parallel_degree 8, FullAC, ...): a line that leaves one to it is priced with the config's
    value, read from torchtitan_configs.CONFIGS with the config function and line as its source."""
    from placement.audit.launch import parse_launch

    line = ("torchrun --nnodes 8 --nproc-per-node 8 -m torchtitan.train --module llama3 --config llama3_70b "
            "--parallelism.tensor_parallel_degree 8 --parallelism.pipeline_parallel_degree 1 "
            "--parallelism.context_parallel_degree 1 --parallelism.expert_parallel_degree 1 "
            "--training.local_batch_size 8 --training.seq_len 8192 activation-checkpoint:full\n")
    path = tmp_path / "run.sh"
    path.write_text(line)
    stated = parse_launch([path])
    path.write_text(line.replace(drop, ""))
    left = parse_launch([path])
    assert (left.tp, left.seq_len, left.recompute) == (stated.tp, stated.seq_len, stated.recompute) == (8, 8192, "full")
    field = {"--parallelism.tensor_parallel_degree 8 ": "tp", "--training.seq_len 8192 ": "seq_len"}.get(drop,
                                                                                                        "recompute")
    assert "models/llama3/config_registry.py:" in left.sources[field] and " llama3_70b: " in left.sources[field]


def test_torchtitan_030_without_disable_cuda_graphs_runs_them(tmp_path) -> None:
    """0.3.0 captures forward and backward in a CUDA graph unless --training.disable_cuda_graphs (pp 1, ep 1)."""
    from placement.audit.launch import parse_launch

    line = ("torchrun --nnodes 1 --nproc-per-node 8 -m torchtitan.train --module llama3 --config llama3_8b "
            "--parallelism.data_parallel_shard_degree 8 --parallelism.tensor_parallel_degree 1 "
            "--parallelism.pipeline_parallel_degree 1 --parallelism.context_parallel_degree 1 "
            "--parallelism.expert_parallel_degree 1 --training.local_batch_size 1 --training.seq_len 8192 "
            "activation-checkpoint:full{extra}\n")
    graphs = tmp_path / "graphs.sh"
    graphs.write_text(line.format(extra=""))
    lay = parse_launch([graphs])
    assert lay.recipe["cuda_graphs"] == "full" and lay.seq_len == 8192
    off = tmp_path / "off.sh"
    off.write_text(line.format(extra=" --training.disable_cuda_graphs"))
    off_lay = parse_launch([off])  # off, with the flag that turns them off as its source
    assert off_lay.recipe["cuda_graphs"] == "none"
    assert "--training.disable_cuda_graphs" in off_lay.sources["recipe.cuda_graphs"]


@pytest.mark.parametrize(("flag", "value", "name"), [("--ffn-hidden-size", "8192", "ffn_hidden_size"),
                                                      ("--moe-router-topk", "3", "moe_router_topk"),
                                                      ("--kv-channels", "64", "kv_channels")])
def test_a_model_shape_the_files_train_differently_is_refused(tmp_path, flag, value, name) -> None:
    """A cost-relevant dimension the files state otherwise than --model: the job trains another model, which the
    audit would price as the catalog's."""
    script = tmp_path / "shape.sh"
    script.write_text(MOE_SCRIPT.format(extra=f"{flag} {value}"))
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "mixtral-8x7b", "--cluster",
                                       "dgx-h100", "--gpus", "64"])
    assert result.exit_code == 2 and f"the launch files set {name} = {value}" in result.stderr


def test_the_models_own_values_pass_and_a_rope_base_is_noted(tmp_path) -> None:
    script = tmp_path / "same.sh"
    script.write_text(MOE_SCRIPT.format(extra="--ffn-hidden-size 14336 --moe-router-topk 2 --kv-channels 128 "
                                              "--rotary-base 10000"))
    notes = " ".join(_audit(script, "--model", "mixtral-8x7b", "--gpus", "64")["layout"]["ignored"])
    assert "--rotary-base 10000" in notes and "priced the same" in notes


def test_an_mla_models_kv_channels_are_not_compared(tmp_path) -> None:
    """DeepSeek-V3's heads have MLA's own widths: a script's --kv-channels is no shape mismatch."""
    script = tmp_path / "dsv3.sh"
    script.write_text("torchrun --nproc_per_node 8 --nnodes 128 pretrain_gpt.py --tensor-model-parallel-size 1 "
                      "--pipeline-model-parallel-size 16 --decoder-last-pipeline-num-layers 1 "
                      "--expert-model-parallel-size 64 --num-experts 256 "
                      "--moe-router-topk 8 --num-layers 61 --hidden-size 7168 --num-attention-heads 128 "
                      "--swiglu --ffn-hidden-size 18432 --moe-ffn-hidden-size 2048 --multi-latent-attention "
                      # the rest of DeepSeek-V3's shape, which Megatron-LM's defaults would change (3 dense layers,
                      # one shared expert, MLA's ranks)
                      "--moe-layer-freq '([0]*3+[1]*58)' --moe-shared-expert-intermediate-size 2048 "
                      "--q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 "
                      "--v-head-dim 128 "
                      "--kv-channels 128 --seq-length 4096 --micro-batch-size 1 --global-batch-size 8192 --bf16 "
                      "--use-distributed-optimizer\n")
    assert _audit(script, "--model", "deepseek-v3", "--gpus", "1024")["layout"]["ep"] == 64


def test_a_command_inside_a_heredoc_is_named_as_such(tmp_path) -> None:
    script = tmp_path / "sbatch.sh"
    script.write_text("#!/bin/bash\nsbatch <<EOF\n#!/bin/bash\nsrun torchrun pretrain_gpt.py --num-layers 32\nEOF\n")
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster",
                                       "dgx-h100", "--gpus", "8"])
    assert result.exit_code == 2 and "inside one" in result.stderr and "heredoc" in result.stderr


def test_the_audit_names_a_megatron_deepspeed_launch_so(tmp_path) -> None:
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(BLOOM), *BLOOM_JOB, "--cluster",
                                       "jean-zay-a100-80g"])
    assert result.stdout.startswith("audit of a megatron-deepspeed launch")


def test_a_megatron_deepspeed_move_lists_every_argument_the_best_plan_needs(tmp_path) -> None:
    """BLOOM's Megatron-DeepSpeed script moved to Megatron-LM: the change list adds each Megatron-LM argument the best
    plan's price needs that the files do not carry (a user trial found --grad-reduce-in-bf16, without which the best
    plan does not fit, and the DP overlaps left out because placement spells the launched job with them too)."""
    script, job = _learned_bloom(tmp_path)
    got = _audit(script, *job, cluster="jean-zay-a100-80g")
    text = script.read_text()
    best_flags = {c["argument"] for c in got["changes"] if c.get("to") is not None}
    for flag in ("--use-distributed-optimizer", "--grad-reduce-in-bf16"):
        assert flag not in text and flag in best_flags, flag
    assert not [c for c in got["changes"] if c["argument"] == "--context-parallel-size"]  # Megatron-LM's default


MEGATRON_LM_ONLY = ("--use-distributed-optimizer", "--overlap-grad-reduce", "--grad-reduce-in-bf16",
                    "--recompute-granularity", "--decoder-first-pipeline-num-layers", "--attention-backend",
                    "--cuda-graph-impl")


def test_an_alibi_megatron_deepspeed_jobs_best_plan_stays_on_megatron_deepspeed(tmp_path) -> None:
    """BLOOM trains ALiBi, which Megatron-LM cannot build (a user trial: its best plan was a move to Megatron-LM,
    x1.58, that cannot run the model): the best plan keeps the job's engine and recipe, within what
    Megatron-DeepSpeed launches (one chunk per stage, no CP), and its changes are the script's own arguments."""
    data = _audit(BLOOM, *BLOOM_JOB, cluster="jean-zay-a100-80g")
    launched, best = data["estimate"]["recipe"], data["best"]["recipe"]
    for name in ("pipeline_p2p_blocking", "attention_kernel", "grad_accumulation", "grad_all_reduce", "dp_overlap"):
        assert best[name] == launched[name], name
    assert (data["best"]["layout"]["vpp"], data["best"]["layout"]["cp"]) == (1, 1)
    assert "stays on Megatron-DeepSpeed" in data["changes_note"] and "ALiBi" in data["changes_note"]
    assert data["speedup"] > 1.0 and data["changes"]
    assert not [c for c in data["changes"] if c["argument"] in MEGATRON_LM_ONLY]
    recompute = [c for c in data["changes"] if c["argument"] == "--checkpoint-activations"]
    if data["best"]["layout"]["recompute"] != "full":  # the script recomputes whole layers
        assert recompute and recompute[0]["from"] == "true" and recompute[0]["to"] is None
    script, job = _learned_bloom(tmp_path)
    moved = _audit(script, *job, cluster="jean-zay-a100-80g")
    assert moved["best"]["recipe"]["pipeline_p2p_blocking"] is False  # the same job without ALiBi moves
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["audit", "--launch", str(BLOOM), *BLOOM_JOB, "--cluster", "jean-zay-a100-80g",
                                       "--out", str(out)])
    assert result.exit_code in (0, 1) and not (out / "megatron.sh").exists() and (out / "hosts.txt").exists()
    assert "no megatron.sh" in result.stderr


def test_the_files_position_embedding_is_read_against_the_model(tmp_path) -> None:
    """--position-embedding-type was dropped unread (a user trial): the files' ALiBi audited as a learned-position
    model is a note, and the job still stays on Megatron-DeepSpeed, whose ALiBi it trains."""
    model = tmp_path / "bloom-learned.yaml"
    model.write_text(Path("models/bloom-176b.yaml").read_text().replace("name: bloom-176b", "name: bloom-learned")
                     .replace("position_embedding: alibi", "position_embedding: learned"))
    data = _audit(BLOOM, "--model", str(model), "--gpus", "384", cluster="jean-zay-a100-80g")
    assert data["layout"]["sources"]["position_embedding"].endswith("--position-embedding-type alibi \\")
    assert [x for x in data["layout"]["ignored"] if x.startswith("--position-embedding-type alibi (")
            and "differs from model bloom-learned's learned positions" in x]
    assert "stays on Megatron-DeepSpeed" in data["changes_note"]
    rope = _audit(LLAMA_FP8, *JOB_8B)
    assert not [x for x in rope["layout"]["ignored"] if "--position-embedding-type" in x]


def test_a_megatron_deepspeed_unfused_attention_remedy_is_one_its_fork_takes() -> None:
    """BLOOM ran BigScience's Megatron-DeepSpeed, which has no flash path; Megatron-LM's --attention-backend flash is
    no argument of it (a user trial): the remedy names Microsoft's fork's flag and the ALiBi caveat."""
    got = _audit(BLOOM, "--model", "bloom-176b", "--gpus", "384", cluster="jean-zay-a100-80g")
    (f,) = [f for f in got["findings"] if f["kind"] == "unfused_attention"]
    assert "--use-flash-attn-v2" in f["message"] and "not a Megatron-DeepSpeed argument" in f["message"]


# --- the model a Megatron-LM launch trains where its arguments leave dimensions out -------------------------------

LLAMA_8B_ARGS = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --swiglu --ffn-hidden-size 14336 "
                 "--group-query-attention --num-query-groups 8")


def _model_refusal(tmp_path: Path, model_args: str, model: str = "llama3-8b") -> str:
    script = tmp_path / "train.sh"
    script.write_text(f"torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --tensor-model-parallel-size 2 "
                      f"{model_args} --seq-length 4096 --micro-batch-size 1 --global-batch-size 64 --bf16\n")
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", model, "--cluster", "dgx-h100",
                                       "--gpus", "16"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return result.stderr


@pytest.mark.parametrize(("drop", "trains", "fix"), [
    ("--ffn-hidden-size 14336", "ffn_hidden_size = 10880", "--ffn-hidden-size 14336"),  # the --swiglu 2/3 rule
    ("--swiglu --ffn-hidden-size 14336", "ffn_hidden_size = 16384", "--ffn-hidden-size 14336"),  # 4h
    ("--group-query-attention --num-query-groups 8", "num_query_groups = 32",
     "--group-query-attention --num-query-groups 8"),
    ("--swiglu", "a gelu MLP", "launch with --swiglu")])
def test_a_dimension_megatron_defaults_is_the_one_the_job_trains(tmp_path, drop, trains, fix) -> None:
    """A Llama 3 8B script that leaves out --ffn-hidden-size, --group-query-attention or --swiglu trains Megatron-LM's
    defaults (4h or the SwiGLU 2/3 rule, one K/V head per head, GeLU; arguments.py validate_args): another model than
    --model's, refused with the default named and the argument that states the model's (a user trial: such a script
    was priced as Llama 3 8B)."""
    err = _model_refusal(tmp_path, LLAMA_8B_ARGS.replace(drop, ""))
    assert f"the launch files train {trains}" in err and "default" in err and fix in err


def test_a_head_width_megatron_defaults_is_refused(tmp_path) -> None:
    """Qwen3-30B-A3B's heads are 128 wide on a 2048 hidden size: without --kv-channels 128 Megatron-LM trains 64."""
    args = ("--num-layers 48 --hidden-size 2048 --num-attention-heads 32 --swiglu --ffn-hidden-size 6144 "
            "--group-query-attention --num-query-groups 4 --num-experts 128 --moe-router-topk 8 "
            "--moe-ffn-hidden-size 768")
    err = _model_refusal(tmp_path, args, "qwen3-30b-a3b")
    assert "the launch files train kv_channels = 64" in err and "--kv-channels 128" in err


def test_defaults_that_are_the_models_are_sourced_not_refused(tmp_path) -> None:
    """GPT-3's architecture is Megatron-LM's default: a script that states only its sizes is priced, each filled
    dimension with the default as its source."""
    script = tmp_path / "gpt.sh"
    script.write_text("torchrun --nproc_per_node 8 --nnodes 16 pretrain_gpt.py --tensor-model-parallel-size 8 "
                      "--pipeline-model-parallel-size 16 --num-layers 96 --hidden-size 12288 "
                      "--num-attention-heads 96 --seq-length 2048 --micro-batch-size 1 --global-batch-size 1536 "
                      "--bf16 --use-distributed-optimizer\n")
    data = _audit(script, "--model", "gpt3-175b", "--gpus", "128")
    sources = data["layout"]["sources"]
    assert "default (no --ffn-hidden-size: Megatron-LM's 4 x hidden = 49152" in sources["ffn_hidden_size"]
    assert sources["num_query_groups"].startswith("default (no --group-query-attention")
    assert sources["activation"].startswith("default (no --swiglu")


def test_deepspeeds_low_precision_optimizer_keys_are_read(tmp_path) -> None:
    """A user trial (DeepSpeedExamples training/bf16_master_weight/configs/bf16_full.json): bf16_optimizer_states and
    bf16_master_weights_and_grads were dropped unread, so the config priced as its fp32 baseline. The moments in bf16
    are priced (less memory); the bf16 master copy, which placement does not price, is a seen-but-not-modelled line."""
    base = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1, "optimizer": {"type": "AdamW"},
            "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}
    low = {**base, "bf16": {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True}}
    got = {}
    for name, cfg in (("base", base), ("low", low)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(cfg))
        got[name] = _audit(path, "--model", "llama3-8b", "--gpus", "8", "--seq-len", "512")
    est = got["low"]["estimate"]
    assert est["recipe"]["optimizer_state_bf16"] is True and "bf16_optimizer_states" in \
        est["recipe_sources"]["optimizer_state_bf16"]
    assert est["memory"]["optimizer_bytes"] < got["base"]["estimate"]["memory"]["optimizer_bytes"]
    assert [x for x in got["low"]["layout"]["ignored"] if x.startswith("bf16.bf16_master_weights_and_grads true")]
    assert got["base"]["estimate"]["recipe"]["optimizer_state_bf16"] is False


def test_deepspeed_config_keys_are_checked_against_every_deepspeed(tmp_path) -> None:
    """A user trial: a misspelled zero_optimization key (DeepSpeed refuses it since v0.7.0, extra="forbid") was priced
    without a word, and a top-level `zero_optimisation` was priced as ZeRO-0 with a memory error that never named it.
    The first is an error naming the key meant; the second a warning DeepSpeed ignores the key; a known config, with
    placement's own `_comment`, has neither."""
    base = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
            "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}, "_comment": ["mine"]}
    job = ("--model", "llama3-8b", "--gpus", "8", "--seq-len", "512")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(base, indent=1))
    assert not [f for f in _audit(good, *job)["findings"] if f["kind"] == "unknown_config_key"]
    typo = tmp_path / "typo.json"
    typo.write_text(json.dumps({**base, "zero_optimization": {"stage": 3, "stage3_param_persistance_threshold": 0}},
                               indent=1))
    result = CliRunner().invoke(main, ["audit", "--launch", str(typo), "--cluster", "dgx-h100", *job])
    assert result.exit_code == 2 and "did you mean stage3_param_persistence_threshold?" in result.stderr
    assert "599758968" in result.stderr
    top = tmp_path / "top.json"
    top.write_text(json.dumps({k: v for k, v in base.items() if k != "zero_optimization"}
                              | {"zero_optimisation": {"stage": 3}}, indent=1))
    (warn,) = [f for f in _audit(top, *job)["findings"] if f["kind"] == "unknown_config_key"]
    assert "zero_optimisation" in warn["message"] and "ignores it" in warn["message"]
    assert "the nearest DeepSpeed config key is zero_optimization" in warn["message"]


def _bf16_stage0(tmp_path: Path, script: str | None) -> dict:
    (tmp_path / "ds.json").write_text(json.dumps({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
                                                  "zero_optimization": {"stage": 0}, "bf16": {"enabled": True}}))
    files = ["--launch", str(tmp_path / "ds.json")]
    if script is not None:
        (tmp_path / "train.sh").write_text(script)
        files += ["--launch", str(tmp_path / "train.sh")]
    return _json("audit", *files, "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                 "--seq-len", "2048")


MDS_LLAMA_8B = ("deepspeed pretrain_gpt.py --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 "
                "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --num-key-value-heads 8 --swiglu "
                "--ffn-hidden-size 14336 --seq-length 2048 --micro-batch-size 4 --global-batch-size 32 --bf16 "
                "--deepspeed --deepspeed_config ds.json --zero-stage=0")


@pytest.mark.parametrize(("script", "stage", "accumulation"), [
    (None, 0, "autograd"),  # a model of the user's own: no PipelineModule
    (MDS_LLAMA_8B + " --no-pipeline-parallel\n", 0, "autograd"),
    # Megatron-DeepSpeed's PipelineModule: the BF16_Optimizer, its buffer bf16 (grad_accum_dtype unset)
    (MDS_LLAMA_8B + "\n", 1, "bf16_copy"),
])
def test_bf16_at_zero_stage_0_is_sharded_only_under_a_pipeline(tmp_path, script, stage, accumulation) -> None:
    """A user trial: a DeepSpeed JSON with bf16 at ZeRO stage 0 was priced as the BF16_Optimizer's ZeRO-1.  DeepSpeed
    picks the BF16_Optimizer at stage 0 only for a PipelineEngine; without one, 0.17.6 and later run DDP_BFLOAT16,
    unsharded (runtime/engine.py _do_optimizer_sanity_check), and the optimizer state is 12 (1 - 1/dp) bytes a
    parameter more than priced."""
    data = _bf16_stage0(tmp_path, script)
    assert data["layout"]["zero_stage"] == stage
    assert data["estimate"]["recipe"]["grad_accumulation"] == accumulation
    said = data["layout"]["sources"]["recipe.grad_accumulation"]
    assert ("DDP_BFLOAT16" in said) == (stage == 0)


@pytest.mark.parametrize(("model", "gpus", "fits_as_run"), [("llama3-8b", 2, True), ("llama3-70b", 8, False)])
def test_an_offloaded_optimizer_is_not_counted_against_the_gpu(tmp_path, model, gpus, fits_as_run) -> None:
    """A user trial: a ZeRO-Offload job was an error, "cannot run", on memory its JSON keeps in host memory, beside the
    warning that its GPU memory is smaller than printed.  Now the memory finding subtracts what the files offload:
    a job that fits so is a warning that the estimate does not price the offload; one that does not says both."""
    config = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {
        "stage": 1, "offload_optimizer": {"device": "cpu"}}, "bf16": {"enabled": True}}
    (tmp_path / "off.json").write_text(json.dumps(config))
    data = _json("audit", "--launch", str(tmp_path / "off.json"), "--model", model, "--cluster", "dgx-h100",
                 "--gpus", str(gpus), "--seq-len", "2048")
    est = data["estimate"]
    moved = est["memory"]["optimizer_bytes"]
    assert est["peak_memory_bytes"] > est["memory_capacity_bytes"]  # as priced, the optimizer state on the GPU
    assert (est["peak_memory_bytes"] - moved <= est["memory_capacity_bytes"]) == fits_as_run
    kinds = {f["kind"] for f in data["findings"]}
    text = CliRunner().invoke(main, ["audit", "--launch", str(tmp_path / "off.json"), "--model", model, "--cluster",
                                     "dgx-h100", "--gpus", str(gpus), "--seq-len", "2048"]).stdout
    assert "(memory as priced keeps what the files offload to the host, offload_optimizer, on the GPU" in text
    if fits_as_run:
        assert "memory_over_capacity" not in kinds
        (f,) = [f for f in data["findings"] if "as the job runs it" in f["message"]]
        assert f["kind"] == "not_priced_as_run" and f"{moved / 2**30:.1f} GiB less" in f["message"]
    else:
        (f,) = [f for f in data["findings"] if f["kind"] == "memory_over_capacity"]
        assert f["severity"] == "error" and f"the {moved / 2**30:.1f} GiB the files offload" in f["message"]


def test_an_audit_that_fits_nothing_does_not_say_to_drop_a_flag_not_given(tmp_path) -> None:
    """A user trial: an audit whose job fits no layout on its GPUs was told "try dropping --framework deepspeed",
    a flag it had not passed: the audit searches within the job's own framework."""
    (tmp_path / "ds.json").write_text(json.dumps({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 1,
                                                  "zero_optimization": {"stage": 3}, "bf16": {"enabled": True}}))
    data = _json("audit", "--launch", str(tmp_path / "ds.json"), "--model", "llama3-70b", "--cluster", "dgx-h100",
                 "--gpus", "4", "--seq-len", "4096")
    why = data["no_better_plan"]
    assert why is not None and "another framework than the job's deepspeed" in why
    assert "dropping --framework" not in why


def test_bigscience_megatron_deepspeed_runs_its_tensor_parallel_backward_in_turn() -> None:
    """tr11-176B-ml.slurm passes flags only BigScience's Megatron-DeepSpeed defines (--sync-tp-duplicated-parameters,
    --embed-layernorm, --pp-partition-method), whose ColumnParallelLinear reduces the input gradient on its own: the
    audit prices that, as the calibration row of the same run does, and so names that run as this job (a user trial:
    priced with the async backward, the published run was called another job's)."""
    est = _audit(BLOOM, *BLOOM_JOB, cluster="jean-zay-a100-80g")["estimate"]
    assert est["recipe"]["tp_async_backward"] is False
    assert "BigScience's Megatron-DeepSpeed" in est["recipe_sources"]["tp_async_backward"]
    assert est["published_best"]["same_job"]["run"] == "bloom-176b-384xa100"


@pytest.mark.parametrize("where", ["flag", "json"])
def test_deepspeed_ulysses_shards_zero_over_sequence_and_data(tmp_path, where) -> None:
    """DeepSpeed-Ulysses (--ds-sequence-parallel-size, or the JSON's sequence_parallel_size) shards ZeRO over its
    seq_data_parallel_group, sequence x data, as priced: the memory a ProcessTopology 'context' axis adds (ZeRO over
    'data' alone, the ring attention the model code's) is not its, and no such finding is given."""
    config = {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 1},
              "bf16": {"enabled": True}} | ({"sequence_parallel_size": 2} if where == "json" else {})
    (tmp_path / "ds.json").write_text(json.dumps(config))
    script = MDS_LLAMA_8B.replace("--zero-stage=0", "--zero-stage=1").replace(
        "--global-batch-size 32", "--global-batch-size 16") + " --no-pipeline-parallel" + (
        " --ds-sequence-parallel-size 2\n" if where == "flag" else "\n")
    (tmp_path / "train.sh").write_text(script)
    data = _json("audit", "--launch", str(tmp_path / "ds.json"), "--launch", str(tmp_path / "train.sh"), "--model",
                 "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--seq-len", "2048")
    assert data["layout"]["cp"] == 2
    assert not any("only as your model code's ring attention" in f["message"] for f in data["findings"])


def test_torchtitan_030_with_cuda_graphs_and_a_pipeline_does_not_start(tmp_path) -> None:
    """0.3.0's _validate_cuda_graphs raises 'CUDA graphs do not support pipeline parallelism yet' unless
    --training.disable_cuda_graphs; a user trial's file without it was priced, exit 0, with a line saying it stops."""
    from click.testing import CliRunner

    from placement.cli import main

    line = ("torchrun --nnodes 2 --nproc-per-node 8 -m torchtitan.train --module llama3 --config llama3_8b "
            "--parallelism.data_parallel_shard_degree 8 --parallelism.tensor_parallel_degree 1 "
            "--parallelism.pipeline_parallel_degree 2 --training.local_batch_size 2 --training.seq_len 8192 "
            "activation-checkpoint:full{extra}\n")
    path = tmp_path / "pp.sh"
    common = ["audit", "--launch", str(path), "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
    path.write_text(line.format(extra=""))
    out = CliRunner().invoke(main, common)
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    assert "CUDA graphs do not support pipeline parallelism yet" in out.stderr and "does not start" in out.stderr
    assert "training.disable_cuda_graphs = False" in out.stderr and "pp.sh:1" in out.stderr
    path.write_text(line.format(extra=" --training.disable_cuda_graphs"))
    assert CliRunner().invoke(main, common).exit_code in (0, 1)


@pytest.mark.parametrize(("module", "config", "model", "gpus"), [
    ("qwen3", "qwen3_30b_a3b", "qwen3-30b-a3b", "8"), ("gpt_oss", "gpt_oss_120b", "gpt-oss-120b", "8")])
def test_torchtitan_030_with_cuda_graphs_and_a_named_all_to_all_config_does_not_start(tmp_path, module, config, model,
                                                                                       gpus) -> None:
    """0.3.0's _validate_cuda_graphs refuses expert parallelism under a dispatcher that syncs with the host; its
    shipped qwen3_30b_a3b and gpt_oss_120b build the all-to-all one (moe_comm_backend 'standard'), so the named config
    fixes it (a user trial: qwen3_30b_a3b at EP 8 was priced, exit 1, with a line saying the files do not show the
    dispatcher)."""
    from click.testing import CliRunner

    from placement.cli import main

    line = (f"torchrun --nproc-per-node 8 -m torchtitan.train --module {module} --config {config} "
            f"--parallelism.expert_parallel_degree 8 --training.local_batch_size 1{{extra}}\n")
    path = tmp_path / "ep.sh"
    common = ["audit", "--launch", str(path), "--model", model, "--cluster", "dgx-h100", "--gpus", gpus]
    path.write_text(line.format(extra=""))
    out = CliRunner().invoke(main, common)
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    assert "CUDA graphs with expert parallelism 8" in out.stderr and f"under {config}" in out.stderr
    assert "without CPU synchronization" in out.stderr and "does not start" in out.stderr
    assert "--training.disable_cuda_graphs" in out.stderr
    path.write_text(line.format(extra=" --training.disable_cuda_graphs"))
    assert CliRunner().invoke(main, common).exit_code in (0, 1)
