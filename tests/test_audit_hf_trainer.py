"""A HuggingFace Trainer script under DeepSpeed (`deepspeed run_clm.py ... --deepspeed ds.json`), audited as it runs:
its sequence-length argument, its attention implementation, the config path it names, a best plan its flags and
JSON can state, and a change list in the Trainer's own flags."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main
from placement.errors import InputError

AUTO_JSON = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
             "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}}


def _audit(tmp_path, script: str, config: dict, model: str = "llama3-8b", gpus: int = 8,
           config_name: str = "ds.json") -> dict:
    (tmp_path / "run.sh").write_text(script)
    (tmp_path / config_name).write_text(json.dumps(config, indent=1))
    result = CliRunner().invoke(main, ["audit", "--model", model, "--gpus", str(gpus), "--launch",
                                       str(tmp_path / "run.sh"), "--launch", str(tmp_path / config_name), "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _run_clm(extra: str, nodes: int = 1, config: str = "ds.json") -> str:
    return (f"deepspeed --num_nodes {nodes} --num_gpus 8 run_clm.py \\\n"
            f"  --model_name_or_path meta-llama/Meta-Llama-3-8B \\\n"
            f"  --per_device_train_batch_size 2 --gradient_accumulation_steps 4 --bf16 {extra} \\\n"
            f"  --deepspeed {config} --do_train --output_dir out\n")


def test_run_clm_block_size_is_the_sequence_length(tmp_path):
    """run_clm.py trains blocks of --block_size tokens: a user trial priced llama3-8b's 8192 instead of the script's
    4096 (twice the tokens per step)."""
    a = _audit(tmp_path, _run_clm("--block_size 4096"), AUTO_JSON)
    assert a["best"]["seq_len"] == 4096
    assert "--block_size 4096" in a["layout"]["sources"]["seq_len"]
    assert not any("sequence length is the training script's" in x for x in a["layout"]["ignored"])


def test_without_a_sequence_argument_the_audit_says_the_length_is_the_scripts(tmp_path):
    a = _audit(tmp_path, _run_clm(""), AUTO_JSON)
    assert any("sequence length is the training script's" in x and "--block_size" in x for x in a["layout"]["ignored"])
    assert a["best"]["seq_len"] == 8192  # priced at the model's default, as the note says


def test_the_trainers_deepspeed_path_is_its_config_not_megatron_deepspeeds_switch(tmp_path):
    """`--deepspeed ds.json` is TrainingArguments.deepspeed, the config's path: not Megatron-DeepSpeed's switch (the
    audit had read its PipelineEngine's blocking sends from it), and a path other than the JSON audited is said."""
    a = _audit(tmp_path, _run_clm("--block_size 4096", config="other.json"), AUTO_JSON)
    assert a["layout"]["dialect"] == "hf-trainer"
    assert "recipe.pipeline_p2p_blocking" not in a["layout"]["sources"]
    assert any("runs DeepSpeed config other.json" in f["message"] and "ds.json" in f["message"]
               for f in a["findings"] if f["kind"] == "not_priced_as_run")
    same = _audit(tmp_path, _run_clm("--block_size 4096"), AUTO_JSON)
    assert not any("runs DeepSpeed config" in f["message"] for f in same["findings"])


@pytest.mark.parametrize(("flag", "kernel"), [("", "flash2"), ("--attn_implementation eager", "unfused"),
                                              ("--attn_implementation flash_attention_3", "flash")])
def test_the_models_attention_is_transformers_implementation(tmp_path, flag, kernel):
    """transformers runs sdpa (PyTorch's FlashAttention-2 kernel first) unless --attn_implementation says otherwise;
    eager keeps the scores in HBM, which a 2048-token block of 8B costs several times the flash kernel."""
    a = _audit(tmp_path, _run_clm(f"--block_size 2048 {flag}"), AUTO_JSON)
    assert a["best"]["recipe"]["attention_kernel"] == kernel
    assert "transformers" in a["best"]["recipe_sources"]["attention_kernel"]


def test_an_unknown_attention_implementation_is_an_error(tmp_path):
    (tmp_path / "run.sh").write_text(_run_clm("--attn_implementation fast"))
    (tmp_path / "ds.json").write_text(json.dumps(AUTO_JSON))
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", "8", "--launch",
                                       str(tmp_path / "run.sh"), "--launch", str(tmp_path / "ds.json")])
    assert result.exit_code == 2 and "--attn_implementation" in result.output and "'fast'" in result.output
    assert "Traceback" not in result.output


def test_the_change_list_speaks_the_trainers_flags(tmp_path):
    """The Trainer fills the JSON's "auto" batch keys from its flags and refuses a JSON number that differs; it
    recomputes with --gradient_checkpointing, not DeepSpeed's activation_checkpointing section (a user trial was told
    to edit "auto" keys as numbers and to drop activation_checkpointing keys its JSON did not have)."""
    stated = {**AUTO_JSON, "train_micro_batch_size_per_gpu": 2}
    a = _audit(tmp_path, _run_clm("--block_size 4096 --gradient_checkpointing"), stated)
    args = {c["argument"]: c for c in a["changes"]}
    assert not [k for k in args if k.startswith("activation_checkpointing.")]
    # stated "false", not dropped: TRL's SFTConfig defaults it to True
    assert args["--gradient_checkpointing"]["from"] == "true" and args["--gradient_checkpointing"]["to"] == "false"
    if a["best"]["layout"]["micro_batch_size"] != 2:  # the flag, and the JSON's own number that must match it
        assert args["--per_device_train_batch_size"]["from"] == "2"
        assert "refuses" in args["train_micro_batch_size_per_gpu"]["note"]
    if a["best"]["layout"]["num_microbatches"] != 4:  # "auto" in the JSON: the flag alone
        assert args["--gradient_accumulation_steps"]["from"] == "4"
        assert "gradient_accumulation_steps" not in args


def test_the_best_plan_is_one_the_trainer_runs(tmp_path):
    """The Trainer hands DeepSpeed the whole model: no pipeline, no tensor split without AutoTP.  Llama 3.1 405B on
    128 H100 fits Megatron-DeepSpeed's search only with tensor parallelism; the Trainer's job has no such plan, and
    the audit says so instead of offering one its files cannot launch."""
    script = _run_clm("--block_size 4096", nodes=16).replace("Meta-Llama-3-8B", "Llama-3.1-405B")
    hf = _audit(tmp_path, script, AUTO_JSON, "llama3-405b", 128)
    mds = ("deepspeed --num_nodes 16 --num_gpus 8 pretrain_gpt.py --num-layers 126 --hidden-size 16384 "
           "--num-attention-heads 128 --swiglu --ffn-hidden-size 53248 --group-query-attention --num-query-groups 8 "
           "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 "
           "--seq-length 4096 --micro-batch-size 1 --global-batch-size 1024 --bf16 --deepspeed "
           "--deepspeed_config md.json --zero-stage 3 --no-pipeline-parallel\n")  # ZeRO-3 needs no PipelineModule
    md = _audit(tmp_path, mds, {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}},
                "llama3-405b", 128, "md.json")
    assert md["layout"]["dialect"] is None and md["best"]["layout"]["tp"] * md["best"]["layout"]["pp"] > 1
    assert hf["best"]["layout"]["tp"] == 1 and hf["best"]["layout"]["pp"] == 1
    assert hf["no_better_plan"] is not None or hf["best"]["fits"]


def _parse(tmp_path, script: str, config: dict | None = None, name: str = "ds.json"):
    (tmp_path / "run.sh").write_text(script)
    files = [tmp_path / "run.sh"]
    if config is not None:
        (tmp_path / name).write_text(json.dumps(config))
        files.append(tmp_path / name)
    return parse_launch(files)


def test_adapter_training_is_said_over_the_whole_estimate(tmp_path):
    """FastChat's train_lora.sh (--lora_r 8) and its QLoRA form train adapters: priced as a full fine-tune, which the
    audit now says as a warning finding rather than not at all (a user trial)."""
    lay = _parse(tmp_path, _run_clm("--block_size 2048 --lora_r 8 --q_lora True"), AUTO_JSON)
    [w] = [w for w in lay.warnings if "adapters" in w]
    assert "LoRA" in w and "QLoRA" in w and "quantized base weights" in w and "full fine-tune" in w
    a = _audit(tmp_path, _run_clm("--block_size 2048 --lora_r 8"), AUTO_JSON)
    assert [f for f in a["findings"] if f["kind"] == "not_priced_as_run" and "adapters" in f["message"]]
    assert not [w for w in _parse(tmp_path, _run_clm("--block_size 2048"), AUTO_JSON).warnings if "adapters" in w]


def test_the_trainers_own_fsdp_and_ddp_are_refused_by_name(tmp_path):
    fsdp = ("torchrun --nproc_per_node 8 train.py --model_name_or_path m --bf16 True --output_dir out "
            "--per_device_train_batch_size 4 --fsdp \"full_shard auto_wrap\"\n")
    with pytest.raises(InputError, match=r"HF Trainer's own FSDP .* evaluate --zero 3"):
        _parse(tmp_path, fsdp)

    with pytest.raises(InputError, match=r"--fsdp 'full_shard auto_wrap' runs the HF Trainer's own FSDP"):
        parse_launch([tmp_path / "run.sh"], "deepspeed")  # read as DeepSpeed's, the same refusal
    with pytest.raises(InputError, match=r"runs PyTorch DDP through the Trainer"):
        _parse(tmp_path, fsdp.replace(' --fsdp "full_shard auto_wrap"', ""))


def test_a_json_the_script_does_not_name_is_said(tmp_path):
    """An HF script with no --deepspeed does not read the JSON given beside it; a path the files leave open is
    unknown."""
    script = ("deepspeed --num_gpus 8 run_clm.py --per_device_train_batch_size 2 --bf16 --block_size 1024 "
              "--output_dir o\n")
    lay = _parse(tmp_path, script, AUTO_JSON)
    assert any("passes no --deepspeed" in w and "does not read" in w for w in lay.warnings)
    lay = _parse(tmp_path, script.replace("--output_dir o", "--output_dir o --deepspeed $DS_CONFIG"), AUTO_JSON)
    assert any("$DS_CONFIG" in w and "not known" in w for w in lay.warnings)


def test_a_precision_the_trainer_refuses_is_an_error(tmp_path):
    """--bf16 with a JSON whose fp16.enabled is true: the Trainer's fill_match refuses to start (GPT-Neo script of a
    user trial); a JSON "auto" or an agreeing value is read."""
    config = {**AUTO_JSON, "fp16": {"enabled": True}, "bf16": {"enabled": False}}
    with pytest.raises(InputError, match=r"16.enabled (true|false) .* --bf16 .* refuses"):
        _parse(tmp_path, _run_clm("--block_size 1024"), config)
    assert _parse(tmp_path, _run_clm("--block_size 1024").replace("--bf16", "--fp16"), config).precision == "bf16"


def test_trl_sft_runs_its_own_defaults(tmp_path):
    """TRL's SFTConfig turns gradient checkpointing and bf16 on and truncates at 1024 tokens (sft_config.py): a TRL
    script that leaves them out runs those, which the audit priced as TrainingArguments' (no recompute, the model's
    sequence length)."""
    script = ("accelerate launch sft.py --model_name_or_path openai/gpt-oss-20b --packing "
              "--per_device_train_batch_size 2 --output_dir o --deepspeed ds.json\n")
    lay = _parse(tmp_path, script, AUTO_JSON)
    assert (lay.recompute, lay.seq_len, lay.precision) == ("full", 1024, "bf16")
    assert "TRL SFTConfig default" in lay.sources["recompute"]
    lay = _parse(tmp_path, script.replace("--packing", "--packing --max_length 4096 --gradient_checkpointing False"),
                 AUTO_JSON)
    assert (lay.recompute, lay.seq_len) == ("none", 4096)


def test_a_hub_kernel_is_an_attention_implementation(tmp_path):
    lay = _parse(tmp_path, _run_clm("--block_size 1024 --attn_implementation kernels-community/vllm-flash-attn3"),
                 AUTO_JSON)
    assert lay.recipe["attention_kernel"] == "flash"


def test_a_json_of_auto_values_alone_is_the_trainers(tmp_path):
    """A DeepSpeed JSON with "auto" values is filled by the HF Trainer: audited alone, its change list names the
    Trainer's flags (it told the user to write numbers over "auto")."""
    (tmp_path / "ds.json").write_text(json.dumps(AUTO_JSON))
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", "8", "--launch",
                                       str(tmp_path / "ds.json"), "--json"])
    assert result.exit_code in (0, 1), result.output
    a = json.loads(result.stdout)
    assert a["layout"]["dialect"] == "hf-trainer"
    assert not [c for c in a["changes"] if c["argument"] in ("train_micro_batch_size_per_gpu",
                                                             "gradient_accumulation_steps")]


def test_deepspeed_chat_is_a_deepspeed_job_in_its_own_flags(tmp_path):
    """DeepSpeed-Chat's run_llama2_7b.sh (`deepspeed main.py ... --zero_stage $ZERO_STAGE --deepspeed`) was read as a
    Megatron job (its Megatron fixes listed); its config is built from its own flags, which the change list names."""
    script = ("OUTPUT=$1\nZERO_STAGE=$2\nif [ \"$ZERO_STAGE\" == \"\" ]; then\n  ZERO_STAGE=3\nfi\n"
              "deepspeed main.py --model_name_or_path meta-llama/Llama-2-7b-hf --per_device_train_batch_size 4 "
              "--max_seq_len 512 --gradient_accumulation_steps 1 --zero_stage $ZERO_STAGE --deepspeed "
              "--output_dir $OUTPUT\n")
    (tmp_path / "run.sh").write_text(script)
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", "8", "--launch",
                                       str(tmp_path / "run.sh"), "--json"])
    assert result.exit_code in (0, 1), result.output
    a = json.loads(result.stdout)
    assert a["layout"]["framework"] == "deepspeed" and a["best"]["seq_len"] == 512
    assert a["layout"]["zero_stage"] == 3
    assert all(c["argument"] != "zero_optimization.stage" for c in a["changes"])
    assert [c for c in a["changes"] if c["argument"] == "--zero_stage"] or a["best"]["layout"]["zero_stage"] == 3
    # its model is transformers' (attention sdpa), but its script is no HF Trainer's (a user trial: said it was)
    said = a["layout"]["sources"]["recipe.attention_kernel"]
    assert "a transformers model" in said and "an HF Trainer script" not in said


ACCELERATE = ("compute_environment: LOCAL_MACHINE\ndeepspeed_config:\n  deepspeed_multinode_launcher: standard\n"
              "  offload_optimizer_device: none\n  offload_param_device: none\n  zero3_init_flag: true\n"
              "  zero_stage: 3\ndistributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_machines: 1\n"
              "num_processes: 8\n")
TRL_SCRIPT = ("accelerate launch --config_file zero3.yaml sft.py --model_name_or_path openai/gpt-oss-20b --packing "
              "--max_length 4096 --per_device_train_batch_size 2 --output_dir o\n")


def test_an_accelerate_config_is_the_deepspeed_plugin_it_configures(tmp_path):
    """TRL's examples launch with `accelerate launch --config_file deepspeed_zero3.yaml`: the audit read the YAML as a
    Megatron-Bridge config ("mixed_precision 'bf16' is no Megatron-Bridge recipe"), and the script alone as
    nothing; the YAML's DeepSpeed plugin is the job's ZeRO stage, precision and world, and accelerate's ranks run
    unbound."""

    (tmp_path / "run.sh").write_text(TRL_SCRIPT)
    (tmp_path / "zero3.yaml").write_text(ACCELERATE)
    lay = parse_launch([tmp_path / "run.sh", tmp_path / "zero3.yaml"])
    assert (lay.framework, lay.dialect, lay.zero_stage, lay.world_size, lay.precision) == (
        "deepspeed", "hf-trainer", 3, 8, "bf16")
    assert "zero3.yaml:7: zero_stage: 3" in lay.sources["zero_stage"]
    assert lay.recipe["cpu_affinity"] is False and "torch.distributed.run" in lay.sources["recipe.cpu_affinity"]
    with pytest.raises(InputError, match=r"`accelerate launch`, whose config file says what runs"):
        parse_launch([tmp_path / "run.sh"])
    (tmp_path / "fsdp.yaml").write_text(ACCELERATE.replace("DEEPSPEED", "FSDP"))
    with pytest.raises(InputError, match=r"accelerate's FSDP"):
        parse_launch([tmp_path / "run.sh", tmp_path / "fsdp.yaml"], "deepspeed")
    (tmp_path / "off.yaml").write_text(ACCELERATE.replace("offload_optimizer_device: none",
                                                          "offload_optimizer_device: cpu"))
    lay = parse_launch([tmp_path / "run.sh", tmp_path / "off.yaml"])
    assert any("offload_optimizer_device cpu" in w for w in lay.warnings)


@pytest.mark.parametrize(("tool", "text"), [
    ("LLaMA-Factory", "model_name_or_path: Qwen/Qwen3-4B\nstage: sft\nfinetuning_type: full\ntemplate: qwen3\n"
                      "cutoff_len: 2048\ndeepspeed: ds_z3_config.json\n"),
    ("axolotl", "base_model: NousResearch/Meta-Llama-3.1-8B\nsequence_len: 8192\nmicro_batch_size: 1\n"
                "datasets:\n  - path: tatsu-lab/alpaca\n"),
])
def test_another_tools_yaml_is_refused_by_name(tmp_path, tool, text):
    """LLaMA-Factory's and axolotl's YAML configs were taken for Megatron-Bridge ("the files look like more than one
    framework"); the audit reads neither, and says so by name."""

    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(InputError, match=rf"an? {tool} config, which `placement audit` does not read"):
        parse_launch([tmp_path / "c.yaml"])


def test_autotp_keeps_its_sequence_and_a_combined_saving_is_named(tmp_path):
    """DeepSpeed AutoTP under the Trainer (tensor_parallel.autotp_size) has no sequence parallelism to turn on: the
    best plan priced it (a layout the files cannot state).  Its saving (a smaller micro-batch that lets recompute
    go) came with "no findings"; the audit now names the changes that only save together."""
    config = {**AUTO_JSON, "zero_optimization": {"stage": 2}, "tensor_parallel": {"autotp_size": 2}}
    script = _run_clm("--block_size 2048 --gradient_checkpointing True").replace(
        "--per_device_train_batch_size 2", "--per_device_train_batch_size 16").replace(
        "--gradient_accumulation_steps 4", "--gradient_accumulation_steps 1")
    a = _audit(tmp_path, script, config, "llama3-8b", 8)
    assert a["best"]["layout"]["tp"] == 2 and a["best"]["layout"]["sequence_parallel"] is False
    assert a["speedup"] > 1.03
    [f] = [f for f in a["findings"] if f["kind"] == "combined_changes"]
    assert "micro_batch_size 16 -> " in f["message"] and "recompute full -> none" in f["message"]
    # the recompute change is the Trainer's flag, not placement's own program's setting (a review saw both)
    assert [c["argument"] for c in a["changes"] if "recompute" in c["argument"] or "checkpointing" in c["argument"]] \
        == ["--gradient_checkpointing"]


def test_a_zero_change_under_param_offload_says_to_drop_it(tmp_path):
    """Stanford Alpaca's default_offload_opt_param.json offloads the weights, which DeepSpeed takes with stage 3
    only: a best plan of stage 2 must say to drop it (the change list left it in)."""
    config = {**AUTO_JSON, "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"},
                                                 "offload_optimizer": {"device": "cpu"}}}
    a = _audit(tmp_path, _run_clm("--block_size 2048").replace("--per_device_train_batch_size 2",
                                                               "--per_device_train_batch_size 4"), config)
    assert [f for f in a["findings"] if f["kind"] == "not_priced_as_run" and "offload_param" in f["message"]]
    [c] = [c for c in a["changes"] if c["argument"] == "zero_optimization.stage"]
    assert c["to"] != "3" and "drop zero_optimization.offload_param" in c["note"]
    # ...and the optimizer's offload, which the best plan is not priced with either (a user trial found it left on)
    (o,) = [c for c in a["changes"] if c["argument"] == "zero_optimization.offload_optimizer.device"]
    assert (o["from"], o["to"]) == ("cpu", "none")


def test_accelerates_ulysses_context_degree_is_the_jobs(tmp_path):
    """TRL's alst_ulysses_4gpu.yaml splits each 32768-token sequence over cp 2 (DeepSpeed-Ulysses) with dp_shard 2:
    the audit priced dp 4 at global batch 4 and called the job the best plan.  The best plan keeps the launched cp,
    and a ZeRO change is spelled in the accelerate config's key."""
    par = ("parallelism_config:\n  parallelism_config_dp_replicate_size: 1\n  parallelism_config_dp_shard_size: 2\n"
           "  parallelism_config_tp_size: 1\n  parallelism_config_cp_size: 2\n"
           "  parallelism_config_cp_backend: deepspeed\n")
    (tmp_path / "run.sh").write_text("accelerate launch --config_file u.yaml sft.py --model_name_or_path m "
                                     "--max_length 32768 --packing --per_device_train_batch_size 1\n")
    (tmp_path / "u.yaml").write_text(ACCELERATE.replace("num_processes: 8", "num_processes: 4") + par)
    lay = parse_launch([tmp_path / "run.sh", tmp_path / "u.yaml"])
    assert (lay.cp, lay.global_batch, lay.seq_len) == (2, 2, 32768)
    assert lay.recipe["cp_comm_type"] == "a2a" and "cp_backend: deepspeed" in lay.sources["recipe.cp_comm_type"]
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", "4", "--json", "--launch",
                                       str(tmp_path / "run.sh"), "--launch", str(tmp_path / "u.yaml")])
    assert result.exit_code in (0, 1), result.output
    a = json.loads(result.stdout)
    assert a["best"]["layout"]["cp"] == 2 and a["no_better_plan"] is None
    assert all(c["argument"] != "zero_optimization.stage" for c in a["changes"])
    (tmp_path / "bad.yaml").write_text(ACCELERATE.replace("num_processes: 8", "num_processes: 4")
                                       + par.replace("dp_shard_size: 2", "dp_shard_size: 4"))
    with pytest.raises(InputError, match=r"= 8 but num_processes is 4"):
        parse_launch([tmp_path / "run.sh", tmp_path / "bad.yaml"])


@pytest.mark.parametrize(("par", "cp", "kind"), [
    ("  parallelism_config_sp_size: 2\n  parallelism_config_sp_backend: deepspeed\n", 2, "a2a"),
    ("  parallelism_config_sp_size: 2\n", 2, "a2a"),
    ("  parallelism_config_cp_size: 2\n", 2, "all_gather"),
    ("  parallelism_config_cp_size: 2\n  parallelism_config_cp_comm_strategy: alltoall\n", 2, "p2p"),
])
def test_accelerates_sequence_and_context_degrees_carry_their_exchange(tmp_path, par, cp, kind):
    """A QA run: TRL's current alst_ulysses_4gpu.yaml states the Ulysses degree as parallelism_config_sp_size with
    sp_backend deepspeed (accelerate has refused cp_backend deepspeed since its sequence-parallel keys came); the
    audit read no context degree and priced dp 4 with whole sequences.  accelerate's torch context parallelism
    rotates K/V as its cp_comm_strategy says, allgather by default (PyTorch's set_rotate_method)."""
    (tmp_path / "run.sh").write_text("accelerate launch --config_file u.yaml sft.py --model_name_or_path m "
                                     "--max_length 32768 --packing --per_device_train_batch_size 1\n")
    (tmp_path / "u.yaml").write_text(ACCELERATE.replace("num_processes: 8", "num_processes: 4")
                                     + "parallelism_config:\n  parallelism_config_dp_replicate_size: 1\n"
                                       "  parallelism_config_dp_shard_size: 2\n  parallelism_config_tp_size: 1\n"
                                     + par)
    lay = parse_launch([tmp_path / "run.sh", tmp_path / "u.yaml"])
    assert (lay.cp, lay.recipe["cp_comm_type"]) == (cp, kind)
    assert "u.yaml" in lay.sources["recipe.cp_comm_type"]


def test_trls_alst_command_without_batch_flags_runs_the_trainers_defaults(tmp_path):
    """A QA run on TRL's own ALST example (docs/source/distributing_training.md): its --dtype bfloat16 (TRL's
    ModelConfig) was refused as DeepSpeed-Chat's --dtype; with no JSON and no --per_device_train_batch_size the model's
    default global batch was priced as 1 x 512 accumulation; and the best plan's recompute change said to drop
    --gradient_checkpointing, which leaves SFTConfig's default True on."""
    (tmp_path / "run.sh").write_text("accelerate launch --config_file u.yaml sft.py --model_name_or_path m "
                                     "--max_length 4096 --packing --dtype bfloat16 --output_dir o\n")
    (tmp_path / "u.yaml").write_text(ACCELERATE.replace("num_processes: 8", "num_processes: 4")
                                     + "parallelism_config:\n  parallelism_config_dp_replicate_size: 1\n"
                                       "  parallelism_config_dp_shard_size: 2\n  parallelism_config_tp_size: 1\n"
                                       "  parallelism_config_sp_size: 2\n  parallelism_config_sp_backend: deepspeed\n")
    lay = parse_launch([tmp_path / "run.sh", tmp_path / "u.yaml"])
    assert (lay.micro_batch_size, lay.grad_accumulation, lay.global_batch) == (8, 1, 16)
    assert "TrainingArguments default per_device_train_batch_size 8" in lay.sources["micro_batch_size"]
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", "4", "--json", "--launch",
                                       str(tmp_path / "run.sh"), "--launch", str(tmp_path / "u.yaml")])
    assert result.exit_code in (0, 1), result.output
    changes = json.loads(result.stdout)["changes"]
    [c] = [c for c in changes if c["argument"] == "--gradient_checkpointing"]
    assert (c["from"], c["to"]) == ("true", "false") and "TRL's SFTConfig: True" in c["note"]
    # accelerate's plugin builds the DeepSpeed config from its own keys: no JSON key of placement's spelling to add
    assert not [c for c in changes if c["argument"].startswith("zero_optimization.")]


def test_an_accelerate_script_without_its_config_is_refused_under_any_framework(tmp_path):
    """--framework deepspeed had priced `accelerate launch --config_file zero3.yaml ...` alone at DeepSpeed's ZeRO-0
    (198 GiB, "cannot run") while the config runs ZeRO-3."""

    (tmp_path / "run.sh").write_text(TRL_SCRIPT)
    with pytest.raises(InputError, match=r"accelerate launch`, whose config file"):
        parse_launch([tmp_path / "run.sh"], "deepspeed")


def test_warnings_that_price_nothing_say_so(tmp_path):
    a = _audit(tmp_path, _run_clm("--block_size 1024 --lora_r 8"), AUTO_JSON)
    (tmp_path / "run.sh").write_text(_run_clm("--block_size 1024 --lora_r 8"))
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", "8", "--launch",
                                       str(tmp_path / "run.sh"), "--launch", str(tmp_path / "ds.json")])
    assert "[warning] not_priced_as_run (not priced)" in result.output
    assert next(f for f in a["findings"] if f["kind"] == "not_priced_as_run")["cost_s"] == 0


DS_CHAT = ("deepspeed main.py --model_name_or_path meta-llama/Llama-2-7b-hf --per_device_train_batch_size 4 "
           "--max_seq_len 512 --zero_stage 3 --deepspeed --output_dir out")


@pytest.mark.parametrize("extra,stated", [("", "fp16"), (" --dtype fp16", "fp16"), (" --dtype bf16", "bf16")])
def test_deepspeed_chat_precision_is_its_dtype_flag_or_its_fp16_default(tmp_path, extra, stated):
    """DeepSpeed-Chat builds its DeepSpeed config from --dtype (default fp16, main.py): the precision's source says
    which, and FP16 says it is priced as BF16 (it had read "placement's default (bf16)")."""
    (tmp_path / "run.sh").write_text(DS_CHAT + extra + "\n")
    lay = parse_launch([tmp_path / "run.sh"])
    assert lay.precision == "bf16"
    source = lay.sources["precision"]
    assert ("--dtype" in source) and ("default fp16" in source) == (extra == "")
    assert any("--dtype fp16" in line for line in lay.ignored) == (stated == "fp16")
    # a default cites the line that makes the script DeepSpeed-Chat's as such, not as where --dtype is (a user trial:
    # the source read "run.sh:22: --max_seq_len 512" as if that line set the precision)
    assert source.startswith("no --dtype in the files (a DeepSpeed-Chat script, by ") == (extra == "")
    if extra == "":
        assert lay.sources["recipe.attention_kernel"].startswith("no --attn_implementation in the files")


def test_deepspeed_chat_dtype_other_than_its_choices_is_refused(tmp_path):
    (tmp_path / "run.sh").write_text(DS_CHAT + " --dtype fp32\n")
    with pytest.raises(InputError, match=r"--dtype takes fp16 or bf16"):
        parse_launch([tmp_path / "run.sh"])


def test_deepspeed_chat_offload_is_two_unpriced_warnings(tmp_path):
    """--offload puts both the weights and the Adam step on the CPU (dschat/utils/ds_utils.py): neither is priced,
    and each says so."""
    (tmp_path / "run.sh").write_text(DS_CHAT + " --offload\n")
    warnings = parse_launch([tmp_path / "run.sh"]).warnings
    assert any("offload_param device cpu" in w for w in warnings)
    assert any("offload_optimizer device cpu" in w for w in warnings)
    (tmp_path / "run.sh").write_text(DS_CHAT + "\n")
    assert not any("offload" in w for w in parse_launch([tmp_path / "run.sh"]).warnings)


@pytest.mark.parametrize("flags", [
    "--max_len 2048 --micro_train_batch_size 2 --train_batch_size 256 --zero_stage 2 --bf16 --flash_attn",
    "--data.max_len 2048 --train.micro_batch_size 2 --train.batch_size 256 --ds.zero_stage 2"])
def test_openrlhf_is_refused_by_name_in_both_flag_vintages(tmp_path, flags):
    """`deepspeed --module openrlhf.cli.train_sft ...` had been "no launch command" (the launcher's --module was not
    read): it is OpenRLHF's trainer, whose flags the audit does not read, and the error says how to price it."""
    (tmp_path / "sft.sh").write_text(f"deepspeed --module openrlhf.cli.train_sft {flags}\n")
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", "8", "--launch",
                                       str(tmp_path / "sft.sh")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "OpenRLHF's trainer" in result.output and "placement evaluate --zero N" in result.output


def test_a_deepspeed_module_launch_reads_the_module_and_its_arguments(tmp_path):
    """The launcher's --module (deepspeed and torchrun take it, as python -m) names the entry; its arguments are the
    job's."""
    (tmp_path / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
                                                  "zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}))
    (tmp_path / "run.sh").write_text(f"deepspeed --num_gpus 8 --module mypkg.train --deepspeed_config "
                                     f"{tmp_path / 'ds.json'}\n")
    lay = parse_launch([tmp_path / "run.sh", tmp_path / "ds.json"])
    assert (lay.framework, lay.zero_stage, lay.micro_batch_size) == ("deepspeed", 2, 2)


def test_a_module_launch_of_an_unset_variable_is_an_error(tmp_path):
    """`deepspeed --module $CMD` with CMD unset and nothing else: nothing of the job to read, an error naming the
    variable (not an audit of defaults)."""
    (tmp_path / "run.sh").write_text("deepspeed --module $CMD\n")
    with pytest.raises(InputError, match=r"the launch runs \$CMD, which the files do not set"):
        parse_launch([tmp_path / "run.sh"])


def _audit_out(tmp_path, script: str, config: dict, gpus: int = 8) -> tuple[dict, str]:
    (tmp_path / "run.sh").write_text(script)
    (tmp_path / "ds.json").write_text(json.dumps(config, indent=1))
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", str(gpus), "--launch",
                                       str(tmp_path / "run.sh"), "--launch", str(tmp_path / "ds.json"), "--out",
                                       str(tmp_path / "out"), "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout), result.stderr


def test_an_hf_trainer_audit_writes_the_jobs_json_with_the_best_plans_keys(tmp_path):
    """A user trial: `audit --out` of an HF Trainer job under DeepSpeed AutoTP wrote placement's own DeepSpeed program
    (deepspeed.initialize, no tensor_parallel.autotp_size), whose header promised the tp 4 plan's step: the files ran
    neither the Trainer nor tensor parallelism.  Now the job's own JSON comes back with the best plan's keys ("auto"
    and autotp_size kept), beside a DeepSpeed hostfile, and the Trainer's flags are named for the job's command."""
    config = {**AUTO_JSON, "zero_optimization": {"stage": 2, "gather_16bit_weights_on_model_save": True},
              "tensor_parallel": {"autotp_size": 4}, "steps_per_print": 1}
    script = _run_clm("--block_size 8192").replace("--num_gpus 8", "--num_gpus 4").replace(
        "--per_device_train_batch_size 2", "--per_device_train_batch_size 8")
    got, err = _audit_out(tmp_path, script, config, gpus=4)
    assert got["best"]["layout"]["tp"] == 4
    out = tmp_path / "out"
    assert not (out / "deepspeed.sh").exists() and not (out / "ds_topology.py").exists()
    written = json.loads((out / "ds_config.json").read_text())
    assert written["tensor_parallel"] == {"autotp_size": 4}
    assert written["train_micro_batch_size_per_gpu"] == "auto" and written["bf16"] == {"enabled": "auto"}
    assert written["steps_per_print"] == 1 and written["zero_optimization"]["gather_16bit_weights_on_model_save"]
    stage = next((c for c in got["changes"] if c["argument"] == "zero_optimization.stage"), None)
    assert written["zero_optimization"]["stage"] == (int(stage["to"]) if stage else 2)
    flags = [c for c in got["changes"] if c["argument"].startswith("--")]
    assert flags and got["changes_not_written"] == flags and got["files_run"] == []
    assert (out / "hostfile").read_text().splitlines()[1:] == ["host0 slots=4"]
    note = " ".join(err.split())
    assert f"{out / 'ds_config.json'} is the job's DeepSpeed JSON ({tmp_path / 'ds.json'}) with the best plan's keys" \
           in note
    for c in flags:
        assert f"{c['argument']} {c['from']} -> {c['to']}" in note
    assert f"The best plan's {got['best']['step_time_s']:.3f} s/step is priced with all of these" in note


def test_an_hf_trainer_json_leaving_stage_3_drops_the_offloads_it_names(tmp_path):
    """The written JSON applies the change list as it reads: a stage other than 3 drops offload_param (DeepSpeed takes
    it with stage 3 only) and the optimizer's offload goes to device none, as the best plan is priced."""
    config = {**AUTO_JSON, "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"},
                                                 "offload_optimizer": {"device": "cpu", "pin_memory": True}}}
    got, _ = _audit_out(tmp_path, _run_clm("--block_size 2048").replace("--per_device_train_batch_size 2",
                                                                          "--per_device_train_batch_size 4"), config)
    [stage] = [c for c in got["changes"] if c["argument"] == "zero_optimization.stage"]
    zero = json.loads((tmp_path / "out" / "ds_config.json").read_text())["zero_optimization"]
    assert zero["stage"] == int(stage["to"]) != 3 and "offload_param" not in zero
    assert zero["offload_optimizer"] == {"device": "none", "pin_memory": True}


def test_an_accelerate_jobs_audit_writes_no_json_and_names_every_change(tmp_path):
    """An accelerate-configured job gave no DeepSpeed JSON: --out writes the hostfile alone, and every change (the
    Trainer's flags, accelerate's deepspeed_config.zero_stage) is the job's own to make, said on stderr and in the
    JSON."""
    (tmp_path / "run.sh").write_text(TRL_SCRIPT.replace("openai/gpt-oss-20b", "m").replace(
        "--per_device_train_batch_size 2", "--per_device_train_batch_size 16"))
    (tmp_path / "zero3.yaml").write_text(ACCELERATE)
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", "8", "--launch",
                                       str(tmp_path / "run.sh"), "--launch", str(tmp_path / "zero3.yaml"), "--out",
                                       str(tmp_path / "out"), "--json"])
    assert result.exit_code in (0, 1), result.output
    got = json.loads(result.stdout)
    assert got["changes"] and got["changes_not_written"] == got["changes"]
    assert any(c["argument"] == "deepspeed_config.zero_stage" for c in got["changes"])
    assert (tmp_path / "out" / "hostfile").exists() and not (tmp_path / "out" / "ds_config.json").exists()
    assert "no DeepSpeed JSON was among the files" in " ".join(result.stderr.split())


def test_an_hf_trainer_audit_does_not_write_over_the_jobs_own_json(tmp_path):
    """--out in the job's own config folder would replace its ds_config.json with the changed one: refused first."""
    (tmp_path / "run.sh").write_text(_run_clm("--block_size 2048", config="ds_config.json"))
    (tmp_path / "ds_config.json").write_text(json.dumps(AUTO_JSON))
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", "8", "--launch",
                                       str(tmp_path / "run.sh"), "--launch", str(tmp_path / "ds_config.json"),
                                       "--out", str(tmp_path)])
    assert result.exit_code == 2 and f"would write over the job's own {tmp_path / 'ds_config.json'}" in result.output
    assert json.loads((tmp_path / "ds_config.json").read_text()) == AUTO_JSON


@pytest.mark.parametrize("where", ["json", "accelerate"])
def test_an_offload_device_deepspeed_refuses_is_bad_input(tmp_path, where):
    """A user trial: offload_optimizer.device "gpu" was read as an offload to the CPU.  DeepSpeed takes none, cpu or
    nvme (OffloadDeviceEnum) and refuses anything else at start-up."""
    if where == "json":
        config = {**AUTO_JSON, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "gpu"}}}
        with pytest.raises(InputError, match=r"zero_optimization\.offload_optimizer\.device must be one of none, cpu, "
                                             r"nvme .*got 'gpu'"):
            _parse(tmp_path, _run_clm("--block_size 2048"), config)
        return
    (tmp_path / "run.sh").write_text("accelerate launch --config_file gpu.yaml train.py\n")
    (tmp_path / "gpu.yaml").write_text(ACCELERATE.replace("offload_optimizer_device: none",
                                                          "offload_optimizer_device: gpu"))
    with pytest.raises(InputError, match=r"offload_optimizer_device must be one of none, cpu, nvme .*got 'gpu'"):
        parse_launch([tmp_path / "run.sh", tmp_path / "gpu.yaml"])


DS_EXAMPLES_SCRIPT = ("deepspeed --num_gpus=4 finetune_zero3.py --deepspeed_config=ds.json --model_name "
                      "meta-llama/Llama-3.3-70B-Instruct --lr 1e-5 --batch_size 4 --weight_decay 0.01 --output_dir out "
                      "--max_length 4096 --log_interval 10\n")
"""DeepSpeedExamples' SuperOffload finetune_llama-70b_4gpu.sh command, its variables filled: a script of its own."""


def test_a_deepspeed_scripts_own_flags_are_not_the_trainers(tmp_path):
    """A user trial: the script's own --output_dir made it an HF Trainer script and its --batch_size a micro-batch of 4
    (4 x 4 GPUs against the JSON's train_batch_size 4, refused as contradictory); --weight_decay was refused as a
    misspelt Megatron flag.  DeepSpeed takes the batch from the config; the flags are said, not read."""
    config = {"train_batch_size": 4, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 3}}
    lay = _parse(tmp_path, DS_EXAMPLES_SCRIPT, config)
    assert lay.micro_batch_size is None or lay.micro_batch_size == 1
    assert lay.global_batch == 4 and lay.zero_stage == 3 and lay.dialect is None
    (said,) = [x for x in lay.ignored if "the script's own flags" in x]
    assert "--batch_size" in said and "--output_dir" in said and "--max_length" in said
    # a Trainer flag of its own still makes it the Trainer's
    hf = _parse(tmp_path, DS_EXAMPLES_SCRIPT.replace("--log_interval 10", "--per_device_train_batch_size 1"), config)
    assert hf.dialect == "hf-trainer"


def test_an_accelerate_config_without_compute_environment_is_accelerates(tmp_path):
    """A user trial: accelerate's own config_yaml_templates (deepspeed.yaml, fsdp.yaml) have no compute_environment,
    which accelerate fills in itself; they were read as Megatron-Bridge YAML ("mixed_precision 'bf16' is no
    Megatron-Bridge recipe")."""
    (tmp_path / "run.sh").write_text("accelerate launch --config_file ds.yaml train.py\n")
    (tmp_path / "ds.yaml").write_text(ACCELERATE.replace("compute_environment: LOCAL_MACHINE\n", ""))
    assert "compute_environment" not in (tmp_path / "ds.yaml").read_text()
    lay = parse_launch([tmp_path / "run.sh", tmp_path / "ds.yaml"])
    assert lay.framework == "deepspeed" and "ds.yaml" in lay.sources["zero_stage"]
    (tmp_path / "fsdp.yaml").write_text((tmp_path / "ds.yaml").read_text().replace("DEEPSPEED", "FSDP"))
    with pytest.raises(InputError, match=r"accelerate's FSDP"):
        parse_launch([tmp_path / "run.sh", tmp_path / "fsdp.yaml"])


def test_only_deepspeed_keys_go_into_the_written_json() -> None:
    """A review: a change that is no DeepSpeed key (the GPU order, an accelerate key, a flag) stays for the job's own
    command; a section null in the file takes the key; a number written 1e9 is a JSON number."""
    from placement.audit.changes import CUDA_DEVICES, apply_json_changes

    data = {"zero_optimization": {"stage": 3, "offload_param": None}, "train_micro_batch_size_per_gpu": "auto"}
    changes = [{"argument": CUDA_DEVICES, "from": "0,1", "to": "1,0"},
               {"argument": "deepspeed_config.zero_stage", "from": "3", "to": "2"},
               {"argument": "--per_device_train_batch_size", "from": "4", "to": "2"},
               {"argument": "zero_optimization.offload_param.device", "from": None, "to": "cpu"},
               {"argument": "zero_optimization.reduce_bucket_size", "from": None, "to": "1e9"}]
    out, left = apply_json_changes(data, changes)
    assert [c["argument"] for c in left] == [CUDA_DEVICES, "deepspeed_config.zero_stage",
                                             "--per_device_train_batch_size"]
    assert out == {"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"},
                                         "reduce_bucket_size": 1000000000},
                   "train_micro_batch_size_per_gpu": "auto"}
    assert data["zero_optimization"]["offload_param"] is None  # the job's own copy untouched


def test_deepspeed_chats_defaults_and_flags_are_its_own(tmp_path):
    """A review: a DeepSpeed-Chat script without --per_device_train_batch_size was priced at the Trainer's 8, not its
    main.py's 16; its --gradient_checkpointing is store_true, so the change that turns it off drops the flag (TRL's
    takes false); TRL's --dtype bfloat16 without a TRL-only flag is TRL's, not DeepSpeed-Chat's fp16/bf16."""
    chat = ("deepspeed main.py --data_path d --model_name_or_path m --max_seq_len 2048 --zero_stage 3 --dtype bf16 "
            "--gradient_checkpointing --deepspeed --output_dir o\n")
    (tmp_path / "run.sh").write_text(chat)
    lay = parse_launch([tmp_path / "run.sh"])
    assert lay.micro_batch_size == 16 and "DeepSpeed-Chat" in lay.sources["micro_batch_size"]
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", "8", "--json", "--launch",
                                       str(tmp_path / "run.sh")])
    assert result.exit_code in (0, 1), result.output
    for c in json.loads(result.stdout)["changes"]:
        if c["argument"] == "--gradient_checkpointing" and c["from"] == "true":
            assert c["to"] is None
    (tmp_path / "trl.sh").write_text("accelerate launch --config_file u.yaml sft.py --model_name_or_path m "
                                     "--max_length 2048 --dtype bfloat16 --output_dir o\n")
    (tmp_path / "u.yaml").write_text(ACCELERATE)
    assert parse_launch([tmp_path / "trl.sh", tmp_path / "u.yaml"]).precision == "bf16"


def test_accelerates_sequence_parallel_mesh_may_leave_ranks_to_data_parallelism(tmp_path):
    """A review: accelerate does not check dp_replicate x dp_shard x tp x sp against the processes under sp_backend
    deepspeed (DeepSpeed forms the groups); 8 processes with dp_shard 2 and sp 2 run sp 2 over dp 4."""
    (tmp_path / "run.sh").write_text("accelerate launch --config_file u.yaml sft.py --model_name_or_path m "
                                     "--max_length 32768 --packing --per_device_train_batch_size 1\n")
    (tmp_path / "u.yaml").write_text(ACCELERATE + "parallelism_config:\n  parallelism_config_dp_replicate_size: 1\n"
                                     "  parallelism_config_dp_shard_size: 2\n  parallelism_config_tp_size: 1\n"
                                     "  parallelism_config_sp_size: 2\n")
    lay = parse_launch([tmp_path / "run.sh", tmp_path / "u.yaml"])
    assert (lay.cp, lay.world_size, lay.global_batch) == (2, 8, 4)
