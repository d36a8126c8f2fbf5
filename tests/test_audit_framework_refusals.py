"""Launch files whose framework would not start the job, or would train it otherwise than placement prices, are
refused with the framework's rule and the fix (a user trial of `placement audit`: each of these was priced as
--model's job from placement's own defaults)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

LLAMA_8B = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --swiglu --ffn-hidden-size 14336 "
            "--group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 4096")


def _refused(path: Path, model: str = "llama3-8b") -> str:
    result = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", model, "--cluster", "dgx-h100",
                                       "--gpus", "8"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return result.stderr


def test_a_megatron_script_without_a_16_bit_switch_trains_fp32_and_is_refused(tmp_path) -> None:
    script = tmp_path / "train.sh"
    script.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 {LLAMA_8B} "
                      f"--micro-batch-size 1 --global-batch-size 64\n")
    err = _refused(script)
    assert "Megatron-LM trains this job in fp32" in err and "add --bf16" in err and "train.sh:1" in err
    script.write_text(script.read_text().replace("--global-batch-size 64", "--global-batch-size 64 --bf16"))
    ok = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                   "--gpus", "8"])
    assert ok.exit_code in (0, 1), ok.output


def test_a_deepspeed_config_without_bf16_or_fp16_trains_fp32_and_is_refused(tmp_path) -> None:
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
                                "zero_optimization": {"stage": 2}}))
    err = _refused(path)
    assert "DeepSpeed trains fp32" in err and "bf16.enabled true" in err


def test_a_deepspeed_config_without_a_batch_does_not_start(tmp_path) -> None:
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"steps_per_print": 10, "bf16": {"enabled": True}}))
    assert "neither train_batch_size nor train_micro_batch_size_per_gpu" in _refused(path)


@pytest.mark.parametrize("args", ["--lr 1e-4", "--tensor-model-parallel-size 2 --micro-batch-size 1 --bf16"])
def test_a_megatron_launch_without_its_model_arguments_does_not_start(tmp_path, args) -> None:
    script = tmp_path / "train.sh"
    script.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {args}\n")
    assert "states none of --num-layers, --hidden-size, --num-attention-heads" in _refused(script)


def test_a_torchtitan_file_that_names_no_model_trains_the_debug_model(tmp_path) -> None:
    path = tmp_path / "job.toml"
    path.write_text('[job]\ndescription = "x"\n[metrics]\nlog_freq = 10\n')
    err = _refused(path)
    assert "torchtitan's llama3:debugmodel" in err and "default" in err


@pytest.mark.parametrize("prefix", ["${ARCH_ARGS} ${PRECISION_ARGS} ", "--use-checkpoint-args --load /ckpt "])
def test_model_arguments_from_elsewhere_are_not_megatrons_defaults(tmp_path, prefix) -> None:
    """A variable the files do not set, or --use-checkpoint-args (Megatron loads the model's arguments from the
    checkpoint before validate_args), may hold --bf16, --swiglu or --ffn-hidden-size: no default fills them and no
    fp32 refusal fires (a review: both were refused)."""
    script = tmp_path / "train.sh"
    script.write_text(f"torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py {prefix}--num-layers 32 "
                      f"--hidden-size 4096 --num-attention-heads 32 --tensor-model-parallel-size 2 "
                      f"--micro-batch-size 1 --global-batch-size 64 --seq-length 4096\n")
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster",
                                    "dgx-h100", "--gpus", "16"])
    assert out.exit_code in (0, 1), out.output


@pytest.mark.parametrize(("section", "said"), [({"torch_autocast": {"enabled": True, "dtype": "bfloat16"}}, "bf16"),
                                               ({"amp": {"enabled": True}}, "fp16 (priced as bf16")])
def test_deepspeed_autocast_and_amp_are_16_bit(tmp_path, section, said) -> None:
    """DeepSpeed runs the Linear layers under torch.autocast (`torch_autocast`) or apex AMP (`amp`): 16-bit jobs,
    which the fp32 rule refused."""
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
                                "zero_optimization": {"stage": 2}, **section}))
    out = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                    "--gpus", "16"])
    assert out.exit_code in (0, 1), out.output
    assert f"global batch 64, {said}" in out.stdout


@pytest.mark.parametrize(("framework", "zero"), [("torchtitan", "1"), ("maxtext", "2"), ("deepspeed", "0")])
def test_a_zero_stage_the_framework_does_not_run_is_bad_input(framework, zero) -> None:
    """`plan --framework F --zero Z` where F has no stage Z left no layout and crashed (exit 3, IndexError)."""
    out = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16",
                                    "--framework", framework, "--zero", zero])
    assert out.exit_code == 2, out.output
    assert f"--zero {zero} with --framework {framework}" in out.stderr and "runs ZeRO stages" in out.stderr


@pytest.mark.parametrize("json_first", [False, True])
def test_a_megatron_deepspeed_stage_0_under_bf16_agrees_with_its_configs_stage_0(tmp_path, json_first) -> None:
    """Megatron-DeepSpeed's Llama 2 example writes stage 0 in its ds_config and passes --zero-stage=0 --bf16, which
    DeepSpeed's BF16_Optimizer runs as ZeRO-1: the script's derived 1 and the JSON's 0 were refused as contradictory."""
    script = tmp_path / "train.sh"
    script.write_text("deepspeed pretrain_gpt.py --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                      "--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --num-key-value-heads 4 --swiglu "
                      "--ffn-hidden-size 5504 --seq-length 2048 --micro-batch-size 4 --global-batch-size 32 --bf16 "
                      "--deepspeed --deepspeed_config ds.json --zero-stage=0\n")
    (tmp_path / "ds.json").write_text(json.dumps({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
                                                  "zero_optimization": {"stage": 0}, "bf16": {"enabled": True}}))
    model = tmp_path / "m.yaml"
    model.write_text("name: m\nnum_layers: 24\nhidden_size: 2048\nffn_hidden_size: 5504\nffn_kind: swiglu\n"
                     "num_attention_heads: 16\nnum_kv_heads: 4\nvocab_size: 32000\n")
    files = [tmp_path / "ds.json", script] if json_first else [script, tmp_path / "ds.json"]
    out = CliRunner().invoke(main, ["audit", *[a for f in files for a in ("--launch", str(f))], "--model", str(model),
                                    "--cluster", "dgx-h100", "--gpus", "8", "--json"])
    assert out.exit_code in (0, 1), out.output
    assert json.loads(out.stdout)["layout"]["zero_stage"] == 1


def test_an_hf_trainer_auto_precision_without_a_16_bit_flag_trains_fp32(tmp_path) -> None:
    """"auto" precision filled from TrainingArguments without --bf16/--fp16 is fp32 (transformers' default): it was a
    note, "priced as bf16", beside a step several times too short."""
    script = tmp_path / "run.sh"
    script.write_text("deepspeed run_clm.py --model_name_or_path meta-llama/Meta-Llama-3-8B --deepspeed ds.json "
                      "--per_device_train_batch_size 2 --gradient_accumulation_steps 4 --block_size 4096\n")
    (tmp_path / "ds.json").write_text(json.dumps({"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3},
                                                  "train_micro_batch_size_per_gpu": "auto",
                                                  "gradient_accumulation_steps": "auto"}))
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--launch", str(tmp_path / "ds.json"),
                                    "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8"])
    assert out.exit_code == 2 and "whose default trains fp32" in out.stderr and "add --bf16" in out.stderr


def test_accelerates_mixed_precision_no_trains_fp32(tmp_path) -> None:
    config = tmp_path / "accel.yaml"
    config.write_text("compute_environment: LOCAL_MACHINE\ndeepspeed_config:\n  gradient_accumulation_steps: 4\n"
                      "  zero_stage: 3\ndistributed_type: DEEPSPEED\nmixed_precision: 'no'\nnum_machines: 1\n"
                      "num_processes: 8\n")
    script = tmp_path / "run.sh"
    script.write_text(f"accelerate launch --config_file {config} train.py --per_device_train_batch_size 2\n")
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--launch", str(config), "--model", "llama3-8b",
                                    "--cluster", "dgx-h100", "--gpus", "8"])
    assert out.exit_code == 2 and "accelerate trains this job in fp32" in out.stderr


def test_fp8_without_a_16_bit_switch_keeps_fp32_weights_and_is_refused(tmp_path) -> None:
    """Megatron's FP8 over fp32 weights (--fp8-format without --bf16) was priced as the bf16 + FP8 job."""
    script = tmp_path / "train.sh"
    script.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 {LLAMA_8B} "
                      f"--micro-batch-size 1 --global-batch-size 64 --fp8-format hybrid\n")
    err = _refused(script)
    assert "FP8 without --bf16 or --fp16" in err and "add --bf16 beside the FP8 flags" in err
    script.write_text(script.read_text().replace("--fp8-format hybrid", "--fp8-format hybrid --bf16"))
    ok = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                   "--gpus", "8"])
    assert ok.exit_code in (0, 1), ok.output


def _megatron_deepspeed(tmp_path: Path, pp: int, stage: int, extra: str = "") -> list[str]:
    """Megatron-DeepSpeed's Llama 2 example's arguments (tp 2), at pipeline size `pp` and ZeRO `stage`: the audit's
    arguments for it and its DeepSpeed config."""
    script = tmp_path / "train.sh"
    script.write_text(f"deepspeed pretrain_gpt.py --tensor-model-parallel-size 2 --pipeline-model-parallel-size {pp} "
                      "--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --num-key-value-heads 4 --swiglu "
                      "--ffn-hidden-size 5504 --seq-length 2048 --micro-batch-size 4 --global-batch-size 32 --bf16 "
                      f"--deepspeed --deepspeed_config ds.json --zero-stage={stage}{extra}\n")
    (tmp_path / "ds.json").write_text(json.dumps({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
                                                  "zero_optimization": {"stage": stage}, "bf16": {"enabled": True}}))
    model = tmp_path / "m.yaml"
    model.write_text("name: m\nnum_layers: 24\nhidden_size: 2048\nffn_hidden_size: 5504\nffn_kind: swiglu\n"
                     "num_attention_heads: 16\nnum_kv_heads: 4\nvocab_size: 32000\n")
    return ["audit", "--launch", str(script), "--launch", str(tmp_path / "ds.json"), "--model", str(model),
            "--cluster", "dgx-h100", "--gpus", "8", "--json"]


@pytest.mark.parametrize(("stage", "no_pipe", "starts"), [(2, False, False), (3, False, False), (1, False, True),
                                                          (2, True, True)])
def test_megatron_deepspeed_under_zero_2_needs_no_pipeline_parallel(tmp_path, stage, no_pipe, starts) -> None:
    """A user trial: Megatron-DeepSpeed's Llama 2 example set to PP=1, ZERO_STAGE=2 was priced as running.  Under
    --deepspeed its pretrain_gpt.py builds GPTModelPipe at any pipeline size unless --no-pipeline-parallel, and
    DeepSpeed's PipelineEngine asserts ZeRO below 2."""
    extra = " --no-pipeline-parallel" if no_pipe else ""
    out = CliRunner().invoke(main, _megatron_deepspeed(tmp_path, 1, stage, extra))
    assert "Traceback" not in out.output
    if starts:
        assert out.exit_code in (0, 1), out.output
        assert json.loads(out.stdout)["layout"]["zero_stage"] == stage
    else:
        assert out.exit_code == 2
        assert (f"ZeRO stage {stage} without --no-pipeline-parallel" in out.stderr
                and "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism" in out.stderr
                and "so this job does not start; add --no-pipeline-parallel" in out.stderr)


@pytest.mark.parametrize("framework", [(), ("--framework", "deepspeed")])
def test_a_best_plan_under_zero_3_adds_no_pipeline_parallel(tmp_path, framework) -> None:
    """The same trial: the best plan of the example (pp 2, ZeRO-0 run as BF16_Optimizer's ZeRO-1) moved to ZeRO-3 at
    pp 1 and its change list did not add --no-pipeline-parallel, so the changed job would not start either."""
    out = CliRunner().invoke(main, [*_megatron_deepspeed(tmp_path, 2, 0), *framework])
    assert out.exit_code in (0, 1), out.output
    data = json.loads(out.stdout)
    best = data["best"]["layout"]
    assert best["zero_stage"] >= 2 and best["pp"] == 1  # what the search picks for this small model on 8 GPUs
    (row,) = [c for c in data["changes"] if c["argument"] == "--no-pipeline-parallel"]
    assert row["to"] == "true" and "PipelineEngine asserts" in row["note"]


@pytest.mark.parametrize("framework", [(), ("--framework", "deepspeed")])
def test_megatron_deepspeeds_attention_remedy_is_its_own_flag(tmp_path, framework) -> None:
    """A user trial: a Megatron-DeepSpeed job read as a DeepSpeed one (its JSON given, or --framework deepspeed) was
    told to turn on GPT-NeoX's attention_config "flash"; its remedy is Megatron-DeepSpeed's --use-flash-attn-v2."""
    out = CliRunner().invoke(main, [*_megatron_deepspeed(tmp_path, 2, 0), *framework])
    assert out.exit_code in (0, 1), out.output
    data = json.loads(out.stdout)
    assert data["layout"]["framework"] == "deepspeed"
    (f,) = [f for f in data["findings"] if f["kind"] == "unfused_attention"]
    assert "--use-flash-attn-v2" in f["message"] and "GPT-NeoX" not in f["message"]



MEGATRON_8B = (f"torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 --sequence-parallel "
               f"{LLAMA_8B} --micro-batch-size 1 --global-batch-size 64 --bf16 --use-distributed-optimizer ")


@pytest.mark.parametrize(("extra", "says", "fix", "fixed"), [
    ("--fp8-format hybrid --first-last-layers-bf16", "Delayed scaling does not support first / last layer in BF16",
     "give --fp8-recipe tensorwise", "--fp8-format hybrid --fp8-recipe tensorwise --first-last-layers-bf16"),
    ("--fp8-format hybrid --fp8-recipe delayed --first-last-layers-bf16", "Delayed scaling does not support",
     "give --fp8-recipe tensorwise", "--fp8-format hybrid --fp8-recipe blockwise --first-last-layers-bf16"),
    ("--optimizer-cpu-offload", "must be used in conjunction with `--use-precision-aware-optimizer`",
     "add --use-precision-aware-optimizer", "--optimizer-cpu-offload --use-precision-aware-optimizer"),
    ("--delay-wgrad-compute", "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute",
     "add --overlap-moe-expert-parallel-comm", None),
    ("--delay-wgrad-compute --overlap-moe-expert-parallel-comm --transformer-impl local",
     "Delaying wgrad compute is only supported with transformer_engine", "--transformer-impl transformer_engine",
     None),
])
def test_megatron_core_refuses_these_flag_pairs_at_start(tmp_path, extra: str, says: str, fix: str,
                                                          fixed: str | None) -> None:
    """Megatron-Core asserts each (transformer_config.py, arguments.py validate_args): the job has no step to price.
    A user trial: each was priced, exit 1, as if it ran."""
    script = tmp_path / "train.sh"
    script.write_text(MEGATRON_8B + extra + "\n")
    err = _refused(script)
    assert says in err and fix in err and "train.sh:1" in err and "does not start" in err
    if fixed is not None:  # the fixed pair starts, and the part the step does not model is said
        script.write_text(MEGATRON_8B + fixed + "\n")
        ok = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster",
                                       "dgx-h100", "--gpus", "8"])
        assert ok.exit_code in (0, 1), ok.output
        noted = "--optimizer-cpu-offload" if "offload" in fixed else "--first-last-layers-bf16"
        assert f"  - {noted}: " in ok.output.split("seen but not modelled")[1]


def test_the_local_transformer_impl_runs_the_unfused_attention_core(tmp_path) -> None:
    """`--transformer-impl local` builds Megatron-Core's local spec, whose DotProductAttention keeps the scores in
    HBM whatever --attention-backend says; a user trial saw it priced as Transformer Engine's fused attention."""
    script = tmp_path / "train.sh"

    def audit(extra: str) -> dict:
        script.write_text(MEGATRON_8B + extra + "\n")
        out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster",
                                        "dgx-h100", "--gpus", "8", "--json"])
        assert out.exit_code in (0, 1), out.output
        return json.loads(out.stdout)["estimate"]

    local, te = audit("--transformer-impl local --attention-backend flash"), audit("--transformer-impl "
                                                                                     "transformer_engine")
    unfused = audit("--attention-backend unfused")
    assert local["recipe"]["attention_kernel"] == "unfused" and te["recipe"]["attention_kernel"] == "flash"
    assert "LocalSpecProvider.core_attention" in local["recipe_sources"]["attention_kernel"]
    assert local["step_time_s"] == unfused["step_time_s"] > te["step_time_s"]


@pytest.mark.parametrize(("cluster", "env", "extra", "outcome"), [
    ("dgx-h100", "export CUDA_DEVICE_MAX_CONNECTIONS=32\n", "", "refused"),
    ("dgx-h100", "export CUDA_DEVICE_MAX_CONNECTIONS=1\n", "", "runs"),
    ("dgx-h100", "", "", "unset"),
    ("dgx-b200", "export CUDA_DEVICE_MAX_CONNECTIONS=32\n", "", "runs"),  # Blackwell: no requirement
    ("dgx-h100", "export CUDA_DEVICE_MAX_CONNECTIONS=1\n", "--use-megatron-fsdp --data-parallel-sharding-strategy "
                                                         "optim_grads_params --no-gradient-accumulation-fusion "
                                                         "--ckpt-format fsdp_dtensor", "refused"),
])
def test_megatron_checks_cuda_device_max_connections_at_start(tmp_path, cluster: str, env: str, extra: str,
                                                              outcome: str) -> None:
    """Megatron-LM asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with TP > 1 on Hopper and older and != 1 under
    Megatron-FSDP (arguments.py validate_args); a user trial's megatron.sh exporting 32 was priced as if it ran."""
    script = tmp_path / "train.sh"
    script.write_text(env + MEGATRON_8B.replace("--use-distributed-optimizer ", "") + extra + "\n")
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", cluster,
                                    "--gpus", "8"])
    if outcome == "refused":
        assert out.exit_code == 2 and "Traceback" not in out.output, out.output
        assert "CUDA_DEVICE_MAX_CONNECTIONS" in out.stderr and "does not start" in out.stderr
        assert "train.sh:1" in out.stderr
        return
    assert out.exit_code in (0, 1), out.output
    assert ("device_connections_unset" in out.output) is (outcome == "unset")


def test_a_deepspeed_script_of_ones_own_without_its_json_is_refused(tmp_path) -> None:
    """DeepSpeed running the user's own train.py keeps the whole layout (ZeRO stage, batch, precision) in the JSON
    --deepspeed_config names; without that file nothing of the layout is read.  A user trial: placement's own
    deepspeed.sh alone was priced as a ZeRO-0 job of defaults (161 GiB, does not fit), and its launch.sbatch with
    --script-args deepspeed was told 'the Megatron launch states none of --num-layers'."""
    script = tmp_path / "run.sh"
    script.write_text("deepspeed --num_gpus 8 train.py --deepspeed --deepspeed_config ds_config.json\n")
    err = _refused(script)
    assert "ds_config.json" in err and "add that JSON with --launch" in err and "run.sh:1" in err
    assert "Megatron" not in err
    (tmp_path / "ds_config.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": 1,
                                                          "gradient_accumulation_steps": 4, "bf16": {"enabled": True},
                                                          "zero_optimization": {"stage": 3}}))
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--launch", str(tmp_path / "ds_config.json"),
                                    "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--json"])
    assert out.exit_code in (0, 1), out.output
    assert json.loads(out.stdout)["estimate"]["layout"]["zero_stage"] == 3


def test_placements_own_sbatch_run_as_deepspeed_needs_its_json(tmp_path) -> None:
    plan = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16",
                                     "--emit", "deepspeed", "--out", str(tmp_path)])
    assert plan.exit_code == 0, plan.output
    common = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--script-args", "deepspeed"]
    alone = CliRunner().invoke(main, ["audit", "--launch", str(tmp_path / "launch.sbatch"), *common])
    assert alone.exit_code == 2 and "add that JSON with --launch" in alone.stderr, alone.output
    assert "states none of --num-layers" not in alone.stderr
    files = [a for f in ("launch.sbatch", "ds_config.json", "ds_topology.py", "hostfile")
             for a in ("--launch", str(tmp_path / f))]
    whole = CliRunner().invoke(main, ["audit", *files, *common, "--json"])
    assert whole.exit_code in (0, 1), whole.output
    header = next(line for line in (tmp_path / "launch.sbatch").read_text().splitlines()
                  if line.startswith("# deepspeed: "))
    priced = json.loads(whole.stdout)["estimate"]["step_time_s"]
    assert f"{priced:.3f} s/step" in header


@pytest.mark.parametrize(("vocab", "refused"), [("256000", True), ("128256", False), ("128255", False),
                                                ("120000", True)])
def test_a_null_tokenizer_vocabulary_is_compared_with_the_model(tmp_path, vocab: str, refused: bool) -> None:
    """Under --tokenizer-type NullTokenizer the model is built at --vocab-size (megatron-core build_tokenizer.py):
    a user trial's 256,000 was priced as Llama 3's 128,256 LM head.  Megatron pads the embedding to 128 x tp, and
    older null tokenizers added the end-of-document token: the same padded size is the same model."""
    script = tmp_path / "train.sh"
    script.write_text(MEGATRON_8B + f"--mock-data --tokenizer-type NullTokenizer --vocab-size {vocab}\n")
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster",
                                    "dgx-h100", "--gpus", "8"])
    if refused:
        assert out.exit_code == 2 and "Traceback" not in out.output, out.output
        assert f"a vocabulary of {vocab}" in out.stderr and "128256" in out.stderr and "train.sh:1" in out.stderr
    else:
        assert out.exit_code in (0, 1), out.output


def test_a_megatron_deepspeed_jobs_changes_are_its_script_arguments_and_its_jsons_keys(tmp_path) -> None:
    """A user trial: a Megatron-DeepSpeed script audited with the JSON it loads was told to change a ds_topology.py
    PipeModelDataParallelTopology, `recompute (model code)` and JSON sections (pipeline.stages, reduce_scatter) the
    job does not have; its degrees and recompute are the script's arguments, its ZeRO and batch keys the JSON's."""
    out = CliRunner().invoke(main, _megatron_deepspeed(tmp_path, 2, 0))
    assert out.exit_code in (0, 1), out.output
    data = json.loads(out.stdout)
    arguments = {c["argument"] for c in data["changes"]}
    assert arguments, data["changes"]
    assert not [a for a in arguments if "ds_topology.py" in a or "model code" in a or a.startswith("pipeline.")]
    json_keys = {"train_batch_size", "train_micro_batch_size_per_gpu", "zero_optimization.stage", "bf16.enabled"}
    assert all(a.startswith("--") or a in json_keys or a.startswith(("node order", "CUDA_VISIBLE")) for a in arguments)
    best, now = data["best"]["layout"], data["estimate"]["layout"]
    if best["tp"] != now["tp"]:
        (row,) = [c for c in data["changes"] if c["argument"] == "--tensor-model-parallel-size"]
        assert (row["from"], row["to"]) == (str(now["tp"]), str(best["tp"]))


@pytest.mark.parametrize(("launcher", "fp8"), [("torchrun --nproc_per_node 8 pretrain_gpt.py", "--fp8-format e4m3"),
                                               ("deepspeed pretrain_gpt.py", "--fp8-hybrid --deepspeed")])
def test_transformer_engines_fp8_on_a_gpu_without_it_does_not_start(tmp_path, launcher: str, fp8: str) -> None:
    """An FP8 Megatron-LM (or Megatron-DeepSpeed) launch audited on A100s: Transformer Engine asserts FP8 tensor
    cores at the first FP8 layer (quantization.py:759-760), so the job does not start; a QA run was told "--precision
    fp8 ... use --precision bf16", flags `audit` does not take."""
    script = tmp_path / "train.sh"
    script.write_text(f"{launcher} --tensor-model-parallel-size 2 {LLAMA_8B} --micro-batch-size 1 "
                      f"--global-batch-size 64 --bf16 {fp8}\n")
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster",
                                       "dgx-a100-80g", "--gpus", "8"])
    assert result.exit_code == 2, result.output
    assert "--precision" not in result.stderr and "Traceback" not in result.output
    assert f"the launch files run FP8 GEMMs ({script}:1:" in result.stderr
    assert ("quantization.py:759-760" in result.stderr and "Device compute capability 8.9 or higher required for "
            "FP8 execution." in result.stderr and "so this job does not start" in result.stderr)


@pytest.mark.parametrize(("parallel", "seq", "says"), [
    ("--context-parallel-size 4", "4100", "): sequence 4100 must split into 2 x cp equal chunks; try a sequence of "
                                          "4104, or cp 2 (settings of the launch files)"),
    ("--tensor-model-parallel-size 3", "8192", ") does not divide the 32 attention heads of llama3-8b; use tp 1, 2, "
                                               "4, 8, 16 or 32 (settings of the launch files)")])
def test_a_layout_rules_fix_names_the_launch_files_settings(tmp_path, parallel: str, seq: str, says: str) -> None:
    """A layout rule's refusal names what to change in the launch files, not `evaluate`'s flags (a QA run: "... or use
    --cp 1", a flag `audit` does not take), and where the files state the degree it opens with."""
    script = tmp_path / "train.sh"
    model = LLAMA_8B.replace("--seq-length 4096 --max-position-embeddings 4096",
                             f"--seq-length {seq} --max-position-embeddings 8192")
    script.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {parallel} {model} --micro-batch-size 1 "
                      f"--global-batch-size 64 --bf16\n")
    gpus = "6" if "tensor" in parallel else "8"
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster",
                                       "dgx-h100", "--gpus", gpus])
    assert result.exit_code == 2, result.output
    assert "the launch files' layout does not fit the job: " in result.stderr and f"({script}:1: " in result.stderr
    assert says in result.stderr
    assert not any(f"--{flag} " in result.stderr for flag in ("tp", "cp", "seq-len"))


MIXTRAL = ("--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
           "--group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 32768 "
           "--position-embedding-type rope --rotary-base 1000000 --swiglu --normalization RMSNorm "
           "--disable-bias-linear --untie-embeddings-and-output-weights --num-experts 8 --moe-router-topk 2 "
           "--micro-batch-size 1 --global-batch-size 64 --bf16 --expert-model-parallel-size 8")


@pytest.mark.parametrize("dispatcher, named", [("--moe-token-dispatcher-type alltoall", "alltoall"),
                                               ("", "Megatron-Core's default, allgather")])
def test_deepep_without_the_flex_dispatcher_does_not_start(tmp_path, dispatcher, named) -> None:
    """Megatron-Core's TransformerConfig raises 'DeepEP backend is only supported with flex token dispatcher.' for
    --moe-enable-deepep beside another dispatcher (0d389f5e99 on; core_v0.19.0 transformer_config.py:1589-1591):
    the audit priced the all-to-all dispatcher, of a job that does not start."""
    script = tmp_path / "train.sh"
    script.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {MIXTRAL} {dispatcher} --moe-enable-deepep\n")
    err = _refused(script, "mixtral-8x7b")
    assert "train.sh:1" in err and "--moe-enable-deepep with" in err and named in err
    assert "only supported with flex token dispatcher" in err and "does not start" in err
    script.write_text(script.read_text().replace(dispatcher or "--moe-enable-deepep",
                                                 "--moe-token-dispatcher-type flex" + ("" if dispatcher else
                                                                                       " --moe-enable-deepep")))
    ok = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "mixtral-8x7b", "--cluster",
                                   "dgx-h100", "--gpus", "8", "--json"])
    assert ok.exit_code in (0, 1), ok.output
    assert json.loads(ok.stdout)["estimate"]["recipe"]["moe_dispatcher"] == "deepep"


def test_an_expert_tp_placement_cannot_price_is_not_called_a_job_that_does_not_fit(tmp_path) -> None:
    """Megatron-Core runs etp 2 beside tp 4 (MoE parallel folding, 7f22e210cd; Megatron's functional test
    gpt3_mcore_tp2_pp2_ep2_etp2_te_4experts2parallel): the refusal is placement's limit, not the job's."""
    script = tmp_path / "train.sh"
    script.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {MIXTRAL.replace('size 8', 'size 2')} "
                      "--tensor-model-parallel-size 4 --expert-tensor-parallel-size 2 --sequence-parallel\n")
    err = _refused(script, "mixtral-8x7b")
    assert "placement cannot price the launch files' layout" in err and "does not fit" not in err
    assert "train.sh:1" in err and "etp 2" in err and "this job starts" in err
