"""Launch-file parsers of `placement audit` (placement/audit/launch.py and its readers in placement/audit/readers/)
on real published files, on our own emitted launches, and on malformed input.

Expected values are read independently of the parser: TOML/YAML/JSON with tomllib/yaml/json, scripts with a
regex on the literal line (the line is quoted in a comment where a value comes from a shell variable)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from placement.audit.launch import MEGATRON_LOG_BEGIN, MEGATRON_LOG_END, detect_framework, parse_launch
from placement.errors import InputError

DATA = Path(__file__).parent / "data" / "audit"
TT = DATA / "torchtitan"
MG = DATA / "megatron"
BR = DATA / "bridge"
DS = DATA / "deepspeed"


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _flag(path: Path, flag: str) -> int:
    """The integer written after `flag` in the file (only for flags given literally)."""
    (value,) = re.findall(rf"^\s*{re.escape(flag)}\s+(\d+)", _text(path), re.M)
    return int(value)


# ---------------------------------------------------------------------------------------------------
# torchtitan's shipped TOML configs


@pytest.mark.parametrize("name", ["llama3_405b", "llama3_70b", "llama3_8b", "deepseek_v3_671b", "deepseek_v3_16b"])
def test_torchtitan_toml_degrees(name: str) -> None:
    path = TT / f"{name}.toml"
    cfg = tomllib.loads(_text(path))
    par, train = cfg["parallelism"], cfg["training"]
    lay = parse_launch([path])
    assert lay.framework == "torchtitan"
    assert lay.tp == par["tensor_parallel_degree"]
    assert lay.pp == par["pipeline_parallel_degree"]
    assert lay.cp == par.get("context_parallel_degree", 1)
    assert lay.ep == par.get("expert_parallel_degree", 1)
    assert lay.dp_replicate == par["data_parallel_replicate_degree"]
    # every shipped config shards over "the rest" (-1): FSDP, shard degree left to the world size
    assert par["data_parallel_shard_degree"] == -1 and lay.dp_shard is None and lay.zero_stage == 3
    assert lay.seq_len == train["seq_len"]
    # local_batch_size, or its older name batch_size (the 405B and 8B files), with pp 1 is the micro-batch
    assert lay.micro_batch_size == train.get("local_batch_size", train.get("batch_size"))
    assert lay.recompute == cfg["activation_checkpoint"]["mode"]
    assert lay.model_ref == f"{cfg['model']['name']}:{cfg['model']['flavor']}"
    fp8 = any("float8" in c for c in cfg["model"].get("converters", []))  # only llama3_405b turns it on
    assert (lay.precision == "fp8") == fp8
    assert lay.sources["tp"].startswith(f"{path}:") and "tensor_parallel_degree" in lay.sources["tp"]


def test_torchtitan_toml_with_world_size_resolves_shard() -> None:
    """torchrun flags next to the TOML fix the world: dp_shard -1 = 64 / (tp 8) = 8 for the 70B preset."""
    script = "torchrun --nnodes 8 --nproc-per-node 8 -m torchtitan.train --job.config_file llama3_70b.toml\n"
    lay = _parse_tmp({"run.sh": script}, extra=[TT / "llama3_70b.toml"])
    assert (lay.world_size, lay.tp, lay.dp, lay.zero_stage) == (64, 8, 8, 3)


# ---------------------------------------------------------------------------------------------------
# Megatron-LM example scripts


def test_megatron_gpt3_175b_script() -> None:
    path = MG / "train_gpt3_175b_distributed.sh"
    lay = parse_launch([path])
    assert detect_framework([path]) == "megatron"
    assert lay.tp == _flag(path, "--tensor-model-parallel-size") == 8
    assert lay.pp == _flag(path, "--pipeline-model-parallel-size") == 16
    assert lay.num_layers == _flag(path, "--num-layers")
    assert lay.hidden_size == _flag(path, "--hidden-size")
    assert lay.num_attention_heads == _flag(path, "--num-attention-heads")
    assert lay.micro_batch_size == _flag(path, "--micro-batch-size")
    assert lay.global_batch == _flag(path, "--global-batch-size")
    assert lay.seq_len == _flag(path, "--seq-length")
    # torchrun gets --nproc_per_node $GPUS_PER_NODE (GPUS_PER_NODE=8) and --nnodes $NUM_NODES (NUM_NODES=1)
    assert (lay.gpus_per_node, lay.world_size) == (8, 8)
    assert (lay.zero_stage, lay.recompute, lay.sequence_parallel) == (0, "none", False)
    assert any(x.startswith("--rampup-batch-size") for x in lay.ignored)
    # the evidence names the array line and the torchrun line that expands it
    assert re.search(r"train_gpt3_175b_distributed\.sh:\d+: --tensor-model-parallel-size 8 \(expanded at .*:\d+\)",
                     lay.sources["tp"])


def test_megatron_llama3_8b_fp8_script() -> None:
    """Variables with defaults, arrays, `+=` of quoted multi-word elements inside `if [[ "$DTYPE" == "fp8" ]]`."""
    path = MG / "train_llama3_8b_h100_fp8.sh"
    text = _text(path)
    lay = parse_launch([path])

    def var(name: str) -> int:
        return int(re.search(rf"^{name}=(\d+)", text, re.M).group(1))

    assert lay.tp == var("TP_SIZE") and lay.cp == var("CP_SIZE")
    assert lay.pp == 1  # the --pipeline-model-parallel-size line is commented out
    assert lay.micro_batch_size == var("MICRO_BATCH_SIZE") and lay.global_batch == var("GLOBAL_BATCH_SIZE")
    assert lay.num_layers == var("NUM_LAYERS") and lay.seq_len == var("SEQ_LENGTH")
    assert lay.precision == "fp8"  # DTYPE="fp8" -> "--fp8-format hybrid"
    assert lay.zero_stage == 1  # --use-distributed-optimizer, appended via TRAINING_ARGS+=("${DDP_ARGS[@]}")
    assert lay.sequence_parallel is False  # --sequence-parallel with TP_SIZE=1: Megatron turns it off
    assert "NUM_LAYERS=32" in lay.sources["num_layers"]


# ---------------------------------------------------------------------------------------------------
# Megatron-Bridge


def test_bridge_config_container_yaml() -> None:
    path = BR / "deepseek_v3_pretrain_h100_fp8_sc_v1.yaml"
    cfg = yaml.safe_load(_text(path))
    model, train = cfg["model"], cfg["train"]
    lay = parse_launch([path])
    assert detect_framework([path]) == "megatron"
    assert lay.tp == model["tensor_model_parallel_size"]
    assert lay.pp == model["pipeline_model_parallel_size"]
    assert lay.vpp == model["virtual_pipeline_model_parallel_size"]  # 4, and the layout agrees: 32 stages / pp 8
    assert lay.ep == model["expert_model_parallel_size"] and lay.etp == model["expert_tensor_parallel_size"]
    assert lay.cp == model["context_parallel_size"]
    assert lay.num_layers == model["num_layers"] and lay.num_experts == model["num_moe_experts"]
    assert lay.micro_batch_size == train["micro_batch_size"] and lay.global_batch == train["global_batch_size"]
    assert lay.sequence_parallel is model["sequence_parallel"]
    assert lay.recompute == model["recompute_granularity"]
    assert lay.zero_stage == 1 and cfg["ddp"]["use_distributed_optimizer"] is True
    assert lay.precision == "fp8" and cfg["mixed_precision"]["fp8"] == "hybrid"
    # layout "Et|(tt|)*30mL": stages Et, 30 x tt, mL; pp rank 0 holds stages 0, 8, 16, 24 -> 1+2+2+2 = 7 layers,
    # rank 7 holds 7, 15, 23, 31 -> 2+2+2+0 = 6
    assert (lay.first_stage_layers, lay.last_stage_layers) == (7, 6)
    assert lay.sources["tp"] == f"{path}:579: tensor_model_parallel_size: 2"


@pytest.mark.parametrize("flags", ["--bf16 --main-grads-dtype fp16",
                                   "--bf16 --use-megatron-fsdp --ckpt-format fsdp_dtensor "
                                   "--megatron-fsdp-grad-comm-dtype int8"])
def test_a_gradient_dtype_megatron_does_not_take_is_refused(tmp_path: Path, flags) -> None:
    with pytest.raises(InputError, match=r"must be fp32(, bf16, fp16)? or (bf16|auto)"):
        _write_parse(tmp_path / "args.txt", f"--tensor-model-parallel-size 2 {flags}\n")


def test_a_megatron_logs_printed_gradient_width_is_the_answer(tmp_path: Path) -> None:
    """Megatron prints its arguments after validate_args: `accumulate_allreduce_grads_in_fp32 False` under bf16 is
    a 16-bit reduce (the --bf16 rule must not override it)."""
    log = tmp_path / "train.log"
    body = "".join(f"  {k} {'.' * (40 - len(k))} {v}\n" for k, v in (
        ("accumulate_allreduce_grads_in_fp32", "False"), ("bf16", "True"), ("tensor_model_parallel_size", "2")))
    log.write_text(f"{MEGATRON_LOG_BEGIN}\n{body}{MEGATRON_LOG_END}\n")
    lay = parse_launch([log])
    assert lay.recipe["grad_reduce_fp32"] is False and "accumulate_allreduce_grads_in_fp32" in \
        lay.sources["recipe.grad_reduce_fp32"]


@pytest.mark.parametrize(("yaml_text", "fp32"), [
    ("mixed_precision: bf16_mixed\nddp:\n  grad_reduce_in_fp32: false\n", True),  # the recipe wins
    ("mixed_precision: fp16_mixed\n", False),
    ("mixed_precision:\n  bf16: true\nddp:\n  grad_reduce_in_fp32: false\n", True),  # the section's default
    ("model:\n  fp8: hybrid\nddp:\n  grad_reduce_in_fp32: false\n", False),  # no section: DDP's
])
def test_bridge_gradient_width_follows_mixed_precision_over_ddp(tmp_path: Path, yaml_text, fp32) -> None:
    lay = _write_parse(tmp_path / "cfg.yaml", "model:\n  tensor_model_parallel_size: 2\n" + yaml_text
                       if not yaml_text.startswith("model:") else yaml_text + "  tensor_model_parallel_size: 2\n")
    assert lay.recipe["grad_reduce_fp32"] is fp32


def test_bridge_gradient_width_is_read_with_its_line() -> None:
    """grad_reduce_in_fp32 as the YAML states it: false in the DeepSeek-V3 dump (mixed_precision, which
    Megatron-Bridge copies over ddp), true in the FSDP override's ddp section."""
    dsv3 = BR / "deepseek_v3_pretrain_h100_fp8_sc_v1.yaml"
    lay = parse_launch([dsv3])
    assert lay.recipe["grad_reduce_fp32"] is False
    assert lay.sources["recipe.grad_reduce_fp32"] == f"{dsv3}:242: grad_reduce_in_fp32: false"
    fsdp = BR / "llama3_8b_pretrain_override_example_megatron_fsdp.yaml"
    assert parse_launch([fsdp]).recipe["grad_reduce_fp32"] is True


@pytest.mark.parametrize(("flags", "fp32", "says"), [
    ("--bf16", True, "under --bf16 Megatron accumulates and reduces gradients in fp32"),
    ("--bf16 --grad-reduce-in-bf16", False, "--grad-reduce-in-bf16"),
    ("--bf16 --accumulate-allreduce-grads-in-fp32", True, "--accumulate-allreduce-grads-in-fp32"),
    ("--fp16", None, None),  # fp16 without the fp32 flag: the 16-bit default, nothing stated
    # arguments.py's order: --grad-reduce-in-bf16 wins under --bf16; --main-grads-dtype bf16 keeps 16 bits
    ("--bf16 --accumulate-allreduce-grads-in-fp32 --grad-reduce-in-bf16", False, "--grad-reduce-in-bf16"),
    ("--bf16 --main-grads-dtype bf16", False, "--main-grads-dtype"),
    # Megatron-FSDP: its own dtypes, auto the model's 16 bits
    ("--bf16 --use-megatron-fsdp --ckpt-format fsdp_dtensor", False,
     "Megatron-FSDP reduces gradients in the model's 16 bits"),
    ("--bf16 --use-megatron-fsdp --ckpt-format fsdp_dtensor --megatron-fsdp-main-grads-dtype fp32", True,
     "--megatron-fsdp-main-grads-dtype"),
])
def test_megatron_gradient_width_follows_megatrons_bf16_rule(tmp_path: Path, flags, fp32, says) -> None:
    """megatron/training/arguments.py (core_v0.19.0): "bfloat16 requires gradient accumulation and all-reduce to
    be done in fp32" unless --grad-reduce-in-bf16."""
    lay = _write_parse(tmp_path / "args.txt", f"--tensor-model-parallel-size 2 {flags}\n")
    assert lay.recipe.get("grad_reduce_fp32") is fp32
    if says is not None:
        assert says in lay.sources["recipe.grad_reduce_fp32"]


@pytest.mark.parametrize(("comm", "fp32"), [("fp32", True), ("bf16", False), ("FP16", False)])
def test_deepspeed_communication_data_type_is_the_gradient_width(tmp_path: Path, comm, fp32) -> None:
    lay = _write_parse(tmp_path / "ds_config.json", json.dumps({"train_micro_batch_size_per_gpu": 1,
                                                                 "communication_data_type": comm}))
    assert lay.recipe["grad_reduce_fp32"] is fp32
    assert "communication_data_type" in lay.sources["recipe.grad_reduce_fp32"]


def test_deepspeed_communication_data_type_must_be_one_it_knows(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="communication_data_type must be fp32, bf16 or fp16"):
        _write_parse(tmp_path / "ds_config.json", '{"communication_data_type": "int8"}')


def test_bridge_override_yaml_megatron_fsdp() -> None:
    path = BR / "llama3_8b_pretrain_override_example_megatron_fsdp.yaml"
    cfg = yaml.safe_load(_text(path))
    lay = parse_launch([path])
    assert lay.micro_batch_size == cfg["train"]["micro_batch_size"]
    assert lay.global_batch == cfg["train"]["global_batch_size"]
    assert lay.seq_len == cfg["model"]["seq_length"]
    assert cfg["ddp"]["data_parallel_sharding_strategy"] == "optim_grads_params" and lay.zero_stage == 3
    assert "tp" not in lay.sources  # a partial override does not state TP: default, no evidence


def test_bridge_hydra_overrides_on_top_of_yaml() -> None:
    script = ("torchrun --nproc_per_node=8 pretrain_llama3_8b.py --config-file "
              "llama3_8b_pretrain_override_example_megatron_fsdp.yaml model.tensor_model_parallel_size=4 "
              "train.global_batch_size=512\n")
    lay = _parse_tmp({"run.sh": script}, extra=[BR / "llama3_8b_pretrain_override_example_megatron_fsdp.yaml"])
    assert (lay.tp, lay.global_batch, lay.micro_batch_size, lay.zero_stage, lay.world_size) == (4, 512, 1, 3, 8)


# ---------------------------------------------------------------------------------------------------
# DeepSpeed


def test_deepspeed_json_and_megatron_deepspeed_script() -> None:
    script, cfg_path = DS / "ds_zero2_pretrain_gpt2_model_parallel.sh", DS / "ds_zero3_config.json"
    cfg = json.loads(_text(cfg_path))
    assert detect_framework([script, cfg_path]) == "deepspeed"
    lay = parse_launch([script, cfg_path])
    assert lay.zero_stage == cfg["zero_optimization"]["stage"]
    assert lay.global_batch == cfg["train_batch_size"]
    # run_cmd="deepspeed.pt --num_nodes ${NUM_WORKERS} --num_gpus ${NUM_GPUS_PER_WORKER} ..." with 1 and 2
    assert (lay.world_size, lay.gpus_per_node) == (1 * 2, 2)
    # old Megatron names: --model-parallel-size ${MP_SIZE} (MP_SIZE=1), --batch-size 8, --checkpoint-activations
    assert (lay.tp, lay.micro_batch_size, lay.recompute) == (1, _flag_inline(script, "--batch-size"), "full")
    # DeepSpeed's rule holds: 16 = 8 x gas 1 x dp 2
    assert cfg["train_batch_size"] == lay.micro_batch_size * cfg["gradient_accumulation_steps"] * 2


def _flag_inline(path: Path, flag: str) -> int:
    return int(re.search(rf"{re.escape(flag)} (\d+)", _text(path)).group(1))


def test_deepspeed_hostfile_order_and_derived_micro_batch() -> None:
    lay = parse_launch([DS / "ds_zero3_config.json", DS / "hostfile"])
    lines = [x.split()[0] for x in _text(DS / "hostfile").splitlines() if x.strip() and not x.startswith("#")]
    assert lay.hosts == tuple(lines) == ("worker-1", "worker-0")
    assert lay.world_size == 4 and lay.gpus_per_node == 2
    # train_batch_size 16 / (gradient_accumulation_steps 1 x dp 4) = 4
    assert lay.micro_batch_size == 4


# ---------------------------------------------------------------------------------------------------
# Our own emitted launches round-trip to the plan's layout


def _emitted(case: str):
    from placement.emit import megatron, torchtitan
    from tests.verify.helpers import planned

    ctx, _ = planned(case)
    return ctx, torchtitan.render(ctx)[0], megatron.render(ctx)[0]


CASES = ["llama3-70b-1024", "llama3-70b-4096-hsdp", "llama3-8b-2048-ddp", "deepseek-v3-2048-moe"]


@pytest.mark.parametrize("case", CASES)
def test_emitted_megatron_round_trip(case: str, tmp_path: Path) -> None:
    ctx, _, mg = _emitted(case)
    lay, plan = _write_parse(tmp_path / "mg.sh", mg), ctx.plan.layout
    assert lay.framework == "megatron"
    assert (lay.tp, lay.cp, lay.pp, lay.vpp, lay.ep) == (plan.tp, plan.cp, plan.pp, plan.vpp, plan.ep)
    assert (lay.zero_stage, lay.micro_batch_size, lay.recompute, lay.sequence_parallel) == (
        plan.zero_stage, plan.micro_batch_size, plan.recompute, plan.sequence_parallel)
    world = plan.dp * plan.tp * plan.cp * plan.pp
    assert (lay.global_batch, lay.seq_len, lay.world_size) == (ctx.plan.global_batch, ctx.plan.seq_len, world)
    if ctx.moe:
        assert lay.etp == plan.etp
    if lay.first_stage_layers is not None:
        assert (lay.first_stage_layers, lay.last_stage_layers) == (plan.stage_layers[0], plan.stage_layers[-1])


@pytest.mark.parametrize("case", CASES)
def test_emitted_torchtitan_round_trip(case: str, tmp_path: Path) -> None:
    ctx, tt, _ = _emitted(case)
    lay, plan = _write_parse(tmp_path / "tt.sh", tt), ctx.plan.layout
    assert lay.framework == "torchtitan"
    assert (lay.tp, lay.cp, lay.pp, lay.ep, lay.dp) == (plan.tp, plan.cp, plan.pp, plan.ep, plan.dp)
    # torchtitan has no ZeRO-1: the emitter writes FSDP without resharding (ZeRO-2) for it
    assert lay.zero_stage == {0: 0, 1: 2, 2: 2, 3: 3}[plan.zero_stage]
    assert lay.dp_shard == (plan.dp_shard if plan.zero_stage else 1)
    assert (lay.micro_batch_size, lay.recompute, lay.sequence_parallel) == (
        plan.micro_batch_size, plan.recompute, plan.sequence_parallel)
    assert (lay.global_batch, lay.seq_len, lay.world_size) == (ctx.plan.global_batch, ctx.plan.seq_len,
                                                               ctx.plan.num_gpus)


def test_emitted_torchtitan_keeps_vpp(tmp_path: Path) -> None:
    """The interleaved plan's virtual stages survive the round trip: the emitter writes
    pipeline_parallel_layers_per_stage and the stage weights, the parser turns them back into vpp."""
    ctx, tt, _ = _emitted("llama3-70b-1024")
    assert ctx.plan.layout.vpp > 2
    assert _write_parse(tmp_path / "tt.sh", tt).virtual_stages(ctx.num_layers) == ctx.plan.layout.vpp


# ---------------------------------------------------------------------------------------------------
# Shell features and argument files


def test_shell_defaults_arithmetic_quoted_arrays_and_if(tmp_path: Path) -> None:
    script = """#!/bin/bash
NODES=${NODES:-4}
GPUS=8
WORLD=$((NODES*GPUS))
MODE=big
ARGS=(--tensor-model-parallel-size 4 "--pipeline-model-parallel-size 2")
if [ "$MODE" = "small" ]; then
    ARGS+=(--context-parallel-size 8)
elif [[ "$MODE" == "big" ]]; then
    ARGS+=(--context-parallel-size 2)
else
    ARGS+=(--context-parallel-size 4)
fi
QUOTED=("--micro-batch-size 2")
torchrun --nnodes $NODES --nproc-per-node=$GPUS pretrain_gpt.py ${ARGS[@]} "${QUOTED[@]}" --global-batch-size $WORLD
"""
    lay = _parse_tmp({"a.sh": script})
    # ${ARGS[@]} unquoted splits "--pipeline-model-parallel-size 2"; the elif branch is the one taken
    assert (lay.tp, lay.pp, lay.cp, lay.world_size, lay.global_batch) == (4, 2, 2, 32, 32)
    # "${QUOTED[@]}" keeps "--micro-batch-size 2" one word, as bash passes it: not the micro-batch flag
    assert lay.micro_batch_size is None


def test_plain_argument_file(tmp_path: Path) -> None:
    lay = _parse_tmp({"args.txt": "--tensor-model-parallel-size=8\n--pipeline-model-parallel-size 4 \\\n"
                                  "  --num-layers-per-virtual-pipeline-stage 2 --num-layers 64\n"})
    assert (lay.tp, lay.pp, lay.vpp) == (8, 4, 64 // 4 // 2)


TT_STATED = "--parallelism.context_parallel_degree 1 --parallelism.expert_parallel_degree 1 --training.seq_len 8192 "
"""What a torchtitan 0.3.0 line must state beside its degrees, batch and checkpointing (its named config sets them)."""


def test_torchtitan_030_flags_in_script(tmp_path: Path) -> None:
    lay = _parse_tmp({"run.sh": "torchrun --nnodes 2 --nproc-per-node 8 -m torchtitan.train --module llama3 "
                                "--config llama3_8b --parallelism.tensor_parallel_degree 4 "
                                "--parallelism.data_parallel_shard_degree=2 --parallelism.pipeline_parallel_degree 2 "
                                "--parallelism.pipeline_parallel_schedule ZBVZeroBubble "
                                "--parallelism.pipeline_parallel_microbatch_size 2 --training.local_batch_size 8 "
                                f"{TT_STATED}--training.disable_cuda_graphs activation-checkpoint:full\n"})
    assert (lay.tp, lay.pp, lay.vpp, lay.dp, lay.micro_batch_size, lay.recompute, lay.model_ref) == (
        4, 2, 2, 2, 2, "full", "llama3:llama3_8b")
    # no fsdp_reshard_after_forward: "default", which is `not pp_enabled` (torchtitan 0.3.0
    # distributed/fsdp.py:71-74): with pp 2 FSDP keeps the weights from forward to backward, ZeRO-2
    assert lay.world_size == 16 and lay.zero_stage == 2
    # the V placement and the zero-bubble backward split are said as left out of the price, not dropped silently
    (note,) = [x for x in lay.ignored if x.startswith("pipeline_parallel_schedule ZBVZeroBubble")]
    assert "run.sh:1" in note and "priced as Interleaved1F1B" in note and "errs slow" in note


@pytest.mark.parametrize(("policy", "pp", "zero"), [("default", 1, 3), ("default", 2, 2), ("always", 2, 3),
                                                    ("never", 1, 2)])
def test_torchtitan_reshard_policy_reads_as_torchtitan_resolves_it(tmp_path: Path, policy, pp, zero) -> None:
    lay = _parse_tmp({"run.sh": "torchrun --nnodes 2 --nproc-per-node 8 -m torchtitan.train --module llama3 "
                                "--config llama3_8b --parallelism.data_parallel_shard_degree 4 "
                                f"--parallelism.tensor_parallel_degree {4 // pp} "
                                f"--parallelism.pipeline_parallel_degree {pp} "
                                f"--parallelism.fsdp_reshard_after_forward {policy} "
                                # torchtitan 0.3.0 refuses CUDA graphs with a pipeline (_validate_cuda_graphs)
                                + ("--training.disable_cuda_graphs " if pp > 1 else "")
                                + "--compile.no-enable-async-tensor-parallel --training.local_batch_size 8 "
                                f"{TT_STATED}activation-checkpoint:none\n"})
    assert lay.zero_stage == zero and lay.tp == 4 // pp


# ---------------------------------------------------------------------------------------------------
# Malformed input: every error names the file and the line, key or argument


@pytest.mark.parametrize(("files", "message"), [
    ({"bad.toml": "[parallelism]\ntensor_parallel_degree = \n"}, "bad.toml: not valid TOML"),
    ({"bad.toml": "[parallelism]\ntensor_parallel_degree = \"eight\"\n"},
     "bad.toml:2: tensor_parallel_degree = \"eight\": parallelism.tensor_parallel_degree must be an integer, got "
     "'eight'; write it as a whole number (no quotes, no unit)"),
    ({"bad.toml": "[parallelism]\npipeline_parallel_degree = 0\n"},
     "pipeline_parallel_degree must be >= 1, got 0; use 1 or more"),
    ({"bad.toml": "[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_schedule = \"Zigzag\"\n"},
     "unknown pipeline_parallel_schedule 'Zigzag'"),
    ({"run.sh": "torchrun pretrain_gpt.py --tensor-model-parallel-size --pipeline-model-parallel-size 2\n"},
     "run.sh:1: torchrun pretrain_gpt.py --tensor-model-parallel-size --pipeline-model-parallel-size 2: "
     "--tensor-model-parallel-size expects one value, got nothing"),
    ({"run.sh": "torchrun pretrain_gpt.py --tensor-model-parallel-size eight\n"},
     "--tensor-model-parallel-size must be an integer, got 'eight'"),
    # started with no arguments, as bash runs it, $1 is empty: the flag gets no value, and the refusal names
    # --script-args
    ({"run.sh": "TP=$1\ntorchrun pretrain_gpt.py --tensor-model-parallel-size $TP\n"},
     "--tensor-model-parallel-size expects one value, got nothing ("),
    ({"run.sh": "if [ -f x ]; then\n  A=(--pipeline-model-parallel-size 4)\nfi\ntorchrun pretrain_gpt.py ${A[@]}\n"},
     "--pipeline-model-parallel-size is set inside the block at"),
    ({"run.sh": "torchrun -m torchtitan.train --parallelism.tensor_parallel_degree\n"},
     "--parallelism.tensor_parallel_degree is missing its value"),
    ({"run.sh": "X='unclosed\ntorchrun pretrain_gpt.py\n"}, "a ' quote opened here is never closed"),
    ({"ds.json": "{\"train_batch_size\": 16,\n \"zero_optimization\": {\"stage\": }\n}"}, "ds.json:2: not valid JSON"),
    ({"ds.json": "{\"zero_optimization\": {\"stage\": 4}}"}, "zero_optimization.stage must be 0..3, got 4"),
    ({"ds.json": "{\"train_batch_size\": 10, \"gradient_accumulation_steps\": 1}", "hostfile": "a slots=4\n"},
     "train_batch_size 10 is not gradient_accumulation_steps 1 x dp 4 x an integer micro-batch"),
    ({"ds.json": "{\"bf16\": {\"enabled\": true}}", "hostfile": "a slots=4\nb slots=4\na slots=4\n"},
     "hostfile:3: host a is listed twice"),
    ({"ds.json": "{\"bf16\": {\"enabled\": true}}", "hosts.txt": "a slots=4\nb: 4 gpus\n"},
     "hosts.txt:2: 'b: 4 gpus' is not `hostname slots=N`"),
    ({"ds.json": "{\"foo\": 1}"}, "ds.json: no DeepSpeed config key (it has foo)"),
    ({"c.yaml": "model:\n  tensor_model_parallel_size: [2\n"}, "c.yaml:"),
    # past Python's parser limits: nesting and huge integers are bad input too, not internal errors
    ({"ds.json": '{"a": ' * 5000 + "1" + "}" * 5000}, "ds.json: the JSON nests arrays or objects deeper"),
    ({"ds.json": '{"train_batch_size": ' + "9" * 5000 + "}"}, "ds.json: a JSON integer has more than"),
    ({"c.yaml": "model:\n  x: " + "[" * 5000 + "]" * 5000 + "\n"}, "c.yaml: the YAML nests collections deeper"),
    ({"bad.toml": "[parallelism]\nx = " + "[" * 5000 + "]" * 5000 + "\n"}, "bad.toml: the TOML nests arrays"),
    ({"c.yaml": "model:\n  pipeline_model_parallel_size: 4\n  pipeline_model_parallel_layout: Et|tt|tX|tL\n"},
     "pipeline layout has unknown characters ['X']"),
    ({"c.yaml": "model:\n  pipeline_model_parallel_size: 2\n  virtual_pipeline_model_parallel_size: 3\n"
                "  pipeline_model_parallel_layout: Et|tt|tt|tL\n"}, "contradictory vpp: 3"),
])
def test_malformed_inputs_name_the_place(files: dict[str, str], message: str, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        _parse_tmp(files, tmp=tmp_path)


def test_contradictory_values_across_files(tmp_path: Path) -> None:
    files = {"ds.json": "{\"train_batch_size\": 16}",
             "run.sh": "deepspeed pretrain_gpt.py --global-batch-size 32 --deepspeed_config ds.json\n"}
    with pytest.raises(InputError, match=r"contradictory values for global_batch: .*ds\.json:1.* and 32 \(.*run\.sh:1"):
        _parse_tmp(files, tmp=tmp_path)


def test_unknown_framework_and_undecidable(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(InputError, match=r"cannot tell the framework of .*notes\.txt.*--framework"):
        detect_framework([tmp_path / "notes.txt"])
    with pytest.raises(InputError, match="unknown framework 'jax'"):
        parse_launch([TT / "llama3_8b.toml"], framework="jax")
    with pytest.raises(InputError, match="more than one framework"):
        detect_framework([TT / "llama3_8b.toml", MG / "train_gpt3_175b_distributed.sh"])


@pytest.mark.parametrize(("files", "framework"), [
    ([TT / "llama3_405b.toml"], "torchtitan"),
    ([MG / "train_llama3_8b_h100_fp8.sh"], "megatron"),
    ([BR / "deepseek_v3_pretrain_h100_fp8_sc_v1.yaml"], "megatron"),
    ([DS / "ds_zero3_config.json", DS / "hostfile"], "deepspeed"),
    ([DS / "ds_zero2_pretrain_gpt2_model_parallel.sh"], "megatron"),  # Megatron-DeepSpeed script without its JSON
])
def test_detect_framework(files: list[Path], framework: str) -> None:
    assert detect_framework(files) == framework


# ---------------------------------------------------------------------------------------------------


def _parse_tmp(files: dict[str, str], extra: list[Path] = (), tmp: Path | None = None):
    import tempfile

    root = tmp or Path(tempfile.mkdtemp())
    paths = []
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
        paths.append(root / name)
    return parse_launch(paths + list(extra))


def _write_parse(path: Path, text: str):
    path.write_text(text, encoding="utf-8")
    return parse_launch([path])


def test_megatron_layout_assigns_stages_round_robin(tmp_path: Path) -> None:
    """megatron-core 0.19.2 PipelineParallelLayerLayout: stage s runs on pp rank s % pp.  Layout Et|t|tt|tL
    over pp 2: rank 0 holds stages 0 and 2 (1 + 2 = 3 layers), rank 1 holds 1 and 3 (1 + 1 = 2)."""
    lay = _parse_tmp({"args.txt": "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et|t|tt|tL'\n"})
    assert (lay.vpp, lay.first_stage_layers, lay.last_stage_layers) == (2, 3, 2)


@pytest.mark.parametrize(("toml", "model", "says"), [
    ("llama3_8b.toml", "llama3-405b", "train torchtitan's llama3:8B (llama3-8b in placement's catalog) but --model "
                                      "llama3-405b is another architecture; pass --model llama3-8b"),
    ("deepseek_v3_671b.toml", "llama3-405b", "pass --model deepseek-v3"),
    ("deepseek_v3_16b.toml", "deepseek-v3", "but --model deepseek-v3 runs as torchtitan's "
                                            "deepseek_v3:deepseek_v3_671b"),
])
def test_a_torchtitan_file_audited_with_another_model_is_refused(toml, model, says):
    """torchtitan files name their model (module/config or name/flavor) as Megatron files give --num-layers: a
    different --model is bad input, not a confident audit of the wrong model."""
    from click.testing import CliRunner

    from placement.cli import main

    path = Path(__file__).parent / "data" / "audit" / "torchtitan" / toml
    result = CliRunner().invoke(main, ["audit", "--model", model, "--cluster", "dgx-h100", "--gpus", "64",
                                       "--launch", str(path)])
    assert result.exit_code == 2 and says in result.stderr, result.stderr


# ---------------------------------------------------------------------------------------------------
# DeepSpeed's in-code topology, read from Python with `ast` (never run)


def _py(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(text)
    return path


def test_deepspeed_topology_is_read_from_python_with_its_line(tmp_path: Path) -> None:
    cfg = tmp_path / "ds.json"
    cfg.write_text(json.dumps({"train_batch_size": 64, "gradient_accumulation_steps": 4}))
    py = _py(tmp_path, "import deepspeed\nfrom deepspeed.runtime.pipe.topology import ProcessTopology\n"
                       "topo = ProcessTopology(axes=['data', 'pipe', 'model'], dims=[2, 4, 2])\n"
                       "sequence_parallel = False\n")
    assert detect_framework([cfg, py]) == "deepspeed"
    lay = parse_launch([cfg, py])
    assert (lay.tp, lay.pp, lay.dp, lay.cp, lay.sequence_parallel) == (2, 4, 2, 1, False)
    assert lay.rank_order == "tp-cp-ep-pp-dp"  # data outermost: pp runs inside dp
    assert lay.sources["tp"].endswith("train.py:3: topo = ProcessTopology(axes=['data', 'pipe', 'model'], "
                                      "dims=[2, 4, 2])")
    stages = parse_launch([cfg, _py(tmp_path, "model = PipelineModule(layers=specs, num_stages=4, loss_fn=f)\n")])
    assert (stages.pp, stages.tp, stages.dp) == (4, 1, None)


@pytest.mark.parametrize(("text", "says"), [
    ("x = 1\n", "builds none"),
    ("topo = PipeModelDataParallelTopology(num_pp=args.pp, num_mp=2, num_dp=4)\n", "args.pp"),
    ("topo = PipeModelDataParallelTopology(num_pp=2, num_mp=2)\n", "takes num_pp, num_dp, num_mp"),
    ("a = PipeDataParallelTopology(2, 4)\nb = PipeDataParallelTopology(4, 2)\n", "two different topologies"),
    ("topo = ProcessTopology(axes=['model', 'data'], dims=[2, 4])\n", "rank order placement does not price"),
    ("topo = ProcessTopology(axes=['pipe', 'expert'], dims=[2, 4])\n", "axis 'expert'"),
    ("topo = PipeDataParallelTopology(0, 4)\n", "whole number >= 1"),
    ("def f(:\n", "not valid Python"),
])
def test_deepspeed_python_that_states_no_readable_topology_is_refused(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(InputError, match=re.escape(says)):
        parse_launch([_py(tmp_path, text)], "deepspeed")


def test_a_python_file_is_deepspeed_only(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="pass --framework deepspeed"):
        parse_launch([_py(tmp_path, "t = PipeDataParallelTopology(2, 4)\n")], "megatron")


# ---------------------------------------------------------------------------------------------------
# MaxText: config YAML, key=value overrides on the train command, jax_mesh.py's process order


def _maxtext(tmp_path: Path, config: str, script: str | None = None):
    from types import SimpleNamespace

    from maxtext_files import maxtext_launch

    from placement.audit.core import maxtext_layout
    from placement.catalog import load_model

    launch = maxtext_launch(tmp_path, config, script)
    return launch, lambda gpus, gbs: maxtext_layout(launch, load_model("llama3-8b"), SimpleNamespace(
        gpus_per_host=8, num_gpus=gpus), gbs)  # the two facts of the cluster the mesh needs


def test_maxtext_config_defaults_and_fills_are_maxtexts(tmp_path: Path) -> None:
    """base.yml: ici_fsdp -1 (the host's GPUs), dcn_data -1 (the hosts), remat full, 12 per device."""
    launch, on = _maxtext(tmp_path, "base_config: base.yml\nmodel_name: llama3-8b\nper_device_batch_size: 2\n"
                                    "max_target_length: 4096\n")
    assert launch.framework == "maxtext" and (launch.seq_len, launch.recompute, launch.precision) == (4096, "full",
                                                                                                      "bf16")
    lay = on(32, 64)  # 4 hosts: data 4 (DCN) x fsdp 8 (ICI); 2 x 32 x 1 = 64 sequences
    assert (lay.tp, lay.pp, lay.dp, lay.zero_stage, lay.dp_shard, lay.micro_batch_size) == (1, 1, 32, 3, 8, 2)
    assert "cfg.yml:3: per_device_batch_size: 2" in lay.sources["micro_batch_size"]
    with pytest.raises(InputError, match=r"= 128 sequences per step .*pass --global-batch 128"):
        on(64, 64)


def test_maxtext_command_line_overrides_win_and_name_their_line(tmp_path: Path) -> None:
    script = ("#!/bin/bash\nTP=4\npython3 -m MaxText.train cfg.yml run_name=x ici_tensor_parallelism=$TP "
              "ici_fsdp_parallelism=2 remat_policy=none scan_layers=false quantization=fp8\n")
    launch, on = _maxtext(tmp_path, "base_config: base.yml\nici_fsdp_parallelism: 8\nper_device_batch_size: 1\n",
                          script)
    assert (launch.recompute, launch.precision) == ("none", "fp8")
    lay = on(16, 16)
    assert (lay.tp, lay.dp, lay.dp_shard, lay.zero_stage) == (4, 4, 2, 3)  # data 2 (DCN) x fsdp 2
    assert "run.sh:3" in lay.sources["tp"]
    alone = tmp_path / "alone.sh"
    alone.write_text(script)
    with pytest.raises(InputError, match=r"config cfg.yml, which is not among the audited files"):
        parse_launch([alone])


def test_maxtext_device_numbering_follows_its_hybrid_mesh(tmp_path: Path) -> None:
    """tensor outermost in mesh_axes: ICI row-major puts tensor neighbours 4 GPUs apart inside a host."""
    from placement.audit.maxtext import framework_rank

    mesh = {"axes": ["tensor", "data", *[a for a in ("diloco", "stage", "fsdp", "fsdp_transpose", "context",
                                                     "context_usp_ulysses", "context_autoregressive",
                                                     "tensor_sequence", "expert", "autoregressive")]],
            "ici": {"tensor": 2, "data": 4}, "dcn": {"data": 2}, "num_slices": -1}
    for part in ("ici", "dcn"):
        mesh[part] = {a: mesh[part].get(a, 1) for a in mesh["axes"]}
    got = framework_rank(mesh, tp=2, cp=1, dp=8, pp=1, ep=1, gpus_per_host=8, num_gpus=16)
    # placement rank r = t + 2 d; device = host (d // 4) x 8 + local t x 4 + d % 4
    assert got.tolist() == [(d // 4) * 8 + t * 4 + d % 4 for d in range(8) for t in range(2)]


def test_maxtext_jax_mesh_py_gives_each_process_its_hosts_gpu_order(tmp_path: Path) -> None:
    """jax_mesh.py's initialize() exports CUDA_VISIBLE_DEVICES[host] before jax.distributed.initialize with
    process_id = HOSTS.index(host): node rank k runs HOSTS[k]'s entry, with its line; a host without one runs its GPUs
    in numbered order; an entry for a host HOSTS leaves out is never used."""
    mesh = tmp_path / "jax_mesh.py"
    mesh.write_text("import os\n\nHOSTS = [\n    'b',\n    'a',\n    'c',\n]\n"
                    "CUDA_VISIBLE_DEVICES = {'a': '0,4,1,5,2,6,3,7',\n                        'b': '1,0,3,2,5,4,7,6', "
                    "'x': '0'}\n")
    cfg = tmp_path / "cfg.yml"
    cfg.write_text("base_config: base.yml\nper_device_batch_size: 1\n")
    launch = parse_launch([cfg, mesh])
    assert launch.hosts == ("b", "a", "c")
    assert [(n.node_rank, n.devices) for n in launch.cuda_visible_devices] == [
        (0, (1, 0, 3, 2, 5, 4, 7, 6)), (1, (0, 4, 1, 5, 2, 6, 3, 7)), (2, None)]
    assert [n.evidence for n in launch.cuda_visible_devices[:2]] == [
        f"{mesh}:9: CUDA_VISIBLE_DEVICES['b'] = '1,0,3,2,5,4,7,6'", f"{mesh}:8: CUDA_VISIBLE_DEVICES['a'] = "
                                                                    f"'0,4,1,5,2,6,3,7'"]
    assert launch.cuda_visible_devices[2].evidence.endswith("(no entry for 'c': its GPUs in numbered order)")
    assert launch.sources["cuda_visible_devices"].startswith(f"{mesh}:8: CUDA_VISIBLE_DEVICES = {{'a': "
                                                             f"'0,4,1,5,2,6,3,7', 'b': '1,0,3,2,5,4,7,6', ...}}")
    mesh.write_text("HOSTS = ['a']\nCUDA_VISIBLE_DEVICES = {'a': 'GPU-1f2e'}\n")
    with pytest.raises(InputError, match=re.escape(f"{mesh}:2: CUDA_VISIBLE_DEVICES['a'] = 'GPU-1f2e': "
                                                   f"CUDA_VISIBLE_DEVICES='GPU-1f2e' is not a list of distinct GPU "
                                                   f"indices")):
        parse_launch([cfg, mesh])
    mesh.write_text("HOSTS = ['a']\nCUDA_VISIBLE_DEVICES = dict(a=ORDER)\n")
    with pytest.raises(InputError, match=re.escape(f"{mesh}:2: CUDA_VISIBLE_DEVICES must be a dict of host name -> "
                                                   f"GPU list written out")):
        parse_launch([cfg, mesh])


@pytest.mark.parametrize(("config", "gpus", "zero", "shard", "over"), [
    # context 2, data 1: every weight over context (base.yml:605), nothing for shard_optimizer_over_data to add
    ("ici_context_parallelism: 2\nici_tensor_parallelism: 4\nshard_optimizer_over_data: true\n", 8, 3, 1, False),
    # context 2 x data 4: ZeRO-3 over context, replicated over data (HSDP with shard 1); the flag adds data for the
    # optimizer state and float32 weights (recipe optimizer_over_replicas)
    ("ici_context_parallelism: 2\nici_tensor_parallelism: 4\ndcn_data_parallelism: 4\n"
     "shard_optimizer_over_data: true\n", 32, 3, 1, True),
    # no context, no fsdp: ZeRO-1 over data only with data > 1
    ("ici_tensor_parallelism: 8\ndcn_data_parallelism: 4\nshard_optimizer_over_data: true\n", 32, 1, None, None),
    ("ici_tensor_parallelism: 8\nshard_optimizer_over_data: true\n", 8, 0, None, None),
])
def test_maxtext_zero_stage_is_what_its_mesh_shards(tmp_path: Path, config: str, gpus: int, zero: int, shard,
                                                    over) -> None:
    base = "base_config: base.yml\nper_device_batch_size: 1\nici_fsdp_parallelism: 1\n"
    _, on = _maxtext(tmp_path, base + config)
    lay = on(gpus, gpus)
    assert (lay.zero_stage, lay.dp_shard) == (zero, shard)
    assert lay.recipe.get("optimizer_over_replicas") is over  # stated under ZeRO-3 either way, else left
    if over:
        assert lay.sources["recipe.optimizer_over_replicas"].startswith(
            f"{tmp_path / 'cfg.yml'}:7: shard_optimizer_over_data: true beside context 2: MaxText shards the optimizer "
            f"state and the float32 weights over data 4 too")


@pytest.mark.parametrize(("config", "says"), [
    ("ici_tensor_sequence_parallelism: 2\n", "the tensor_sequence axis is not one placement prices"),
    # names each -1 with where it is set, and the fix (a QA trial: "more than one axis is -1 (data, fsdp)")
    ("ici_tensor_parallelism: -1\n", "ici_fsdp_parallelism -1 (MaxText 0.2.5 base.yml default); ici_tensor_parallelism"
                                     " -1 ("),
    ("ici_tensor_parallelism: -1\n", "give ici_fsdp_parallelism a size (1 leaves the ici devices to "
                                     "ici_tensor_parallelism)"),
    ("per_device_batch_size: x\n", "per_device_batch_size must be a number"),
    ("mesh_axes: [data, tensor]\n", "mesh_axes must name MaxText 0.2.5's axes"),
])
def test_maxtext_configs_placement_cannot_price_are_refused(tmp_path: Path, config: str, says: str) -> None:
    with pytest.raises(InputError, match=re.escape(says)):
        _maxtext(tmp_path, "base_config: base.yml\n" + config)


# ---------------------------------------------------------------------------------------------------
# GPT-NeoX YAML (EleutherAI/gpt-neox configs/20B.yml, as published; DeepSpeed runs it)


def _neox_value(path: Path, key: str) -> str:
    (value,) = re.findall(rf'^\s*"{key}":\s*([^,\s]+)', _text(path), re.M)
    return value


def test_gpt_neox_20b_config_is_read_with_its_lines() -> None:
    path = DATA / "neox" / "20B.yml"
    assert detect_framework([path]) == "deepspeed"
    lay = parse_launch([path])
    assert lay.pp == int(_neox_value(path, "pipe_parallel_size"))
    assert lay.tp == int(_neox_value(path, "model_parallel_size"))
    assert lay.micro_batch_size == int(_neox_value(path, "train_micro_batch_size_per_gpu"))
    assert lay.grad_accumulation == int(_neox_value(path, "gradient_accumulation_steps"))
    assert lay.zero_stage == 1 and '"stage": 1' in _text(path)
    assert lay.recompute == ("full" if _neox_value(path, "checkpoint_activations") == "true" else "none")
    assert lay.num_layers == int(_neox_value(path, "num_layers"))
    assert lay.sources["tp"].endswith('"model_parallel_size": 2,')
    assert any(x.startswith("fp16: FP16 mixed precision") for x in lay.ignored)


@pytest.mark.parametrize(("config", "kernel", "noted"), [
    (None, "unfused", "no attention_config (GPT-NeoX's default: global attention on every layer"),
    ('[[["global"], 44]]', "unfused", None),
    ('[[["flash"], 44]]', "flash2", None),
    ('[[["local", "global"], "all"]]', "unfused", "attention types local: not priced"),
    ('[[["flash"], 40], [["global"], 4]]', "flash2", "attention types flash and global mixed: priced as flash"),
    (json.dumps(["flash"] * 43 + ["global"]), "flash2", "attention types flash and global mixed: priced as flash"),
])
def test_gpt_neox_attention_config_decides_the_attention_kernel(tmp_path: Path, config, kernel, noted) -> None:
    """GPT-NeoX's "global" attention is its own core (baddbmm, the fused masked softmax, bmm: scores in HBM) and
    "flash" the flash-attn 2 package; unset, every layer is global (NeoXArgs calculate_derived)."""
    text = _text(DATA / "neox" / "20B.yml")
    assert "attention_config" not in text
    path = tmp_path / "20B.yml"
    stated = f'  "attention_config": {config},\n  "pos_emb": "rotary",'
    path.write_text(text if config is None else text.replace('  "pos_emb": "rotary",', stated))
    lay = parse_launch([path])
    assert lay.recipe["attention_kernel"] == kernel
    where = lay.sources["recipe.attention_kernel"]
    assert (noted in where) if config is None else f'"attention_config": {config},'[:80] in where  # a long line cut
    assert (noted is None or config is None) or any(x.startswith(noted) for x in lay.ignored)


def test_gpt_neox_flash_attention_is_priced_faster_than_its_global_core(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from placement.cli import main

    text = _text(DATA / "neox" / "20B.yml")
    steps = {}
    for kind in ("global", "flash"):
        path = tmp_path / f"{kind}.yml"
        path.write_text(text.replace('  "pos_emb": "rotary",', f'  "attention_config": [[["{kind}"], 44]],\n'
                                                                '  "pos_emb": "rotary",'))
        result = CliRunner().invoke(main, ["audit", "--model", "gpt-neox-20b", "--cluster", "gpt-neox-a100-40g",
                                           "--gpus", "96", "--launch", str(path), "--json"])
        assert result.exit_code in (0, 1), result.output
        got = json.loads(result.stdout)
        est = got["estimate"]
        assert est["recipe"]["attention_kernel"] == {"global": "unfused", "flash": "flash2"}[kind]
        steps[kind] = est["step_time_s"]
        found = [f for f in got["findings"] if f["kind"] == "unfused_attention"]
        if kind == "flash":
            assert not found
    assert steps["flash"] < steps["global"] - 1.0  # the s x s scores of 32 heads per rank, three times per step
    # the global-attention job's finding prices exactly that change, and says how to make it
    result = CliRunner().invoke(main, ["audit", "--model", "gpt-neox-20b", "--cluster", "gpt-neox-a100-40g", "--gpus",
                                       "96", "--launch", str(tmp_path / "global.yml"), "--json"])
    [finding] = [f for f in json.loads(result.stdout)["findings"] if f["kind"] == "unfused_attention"]
    assert finding["cost_s"] == pytest.approx(steps["global"] - steps["flash"], abs=2e-4)  # steps print 6 digits
    assert 'attention_config [[["flash"], NUM_LAYERS]]' in finding["message"]


def test_a_gpt_neox_attention_config_it_cannot_read_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "20B.yml"
    path.write_text(_text(DATA / "neox" / "20B.yml").replace('  "pos_emb": "rotary",',
                                                              '  "attention_config": [["global", 44]],\n'
                                                              '  "pos_emb": "rotary",'))
    with pytest.raises(InputError, match=r'each attention_config item is \[\[types...\], count or "all"\]'):
        parse_launch([path])


def test_gpt_neox_batch_is_micro_x_accumulation_x_dp_and_a_conflicting_flag_is_refused(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from placement.cli import main

    path = DATA / "neox" / "20B.yml"
    job = ["audit", "--model", "gpt-neox-20b", "--cluster", "dgx-a100-40g", "--gpus", "96", "--launch", str(path)]
    result = CliRunner().invoke(main, [*job, "--json"])
    assert result.exit_code in (0, 1), result.output
    got = json.loads(result.stdout)
    dp = 96 // (2 * 4)
    assert got["estimate"]["global_batch"] == 4 * 32 * dp  # micro 4 x gradient_accumulation_steps 32 x dp 12
    assert got["layout"]["sources"]["global_batch"].startswith("micro-batch 4 x accumulation 32 x dp 12")
    refused = CliRunner().invoke(main, [*job, "--global-batch", "512"])
    assert refused.exit_code == 2 and "the launch files train 1536 sequences per step" in refused.stderr
    bare = tmp_path / "empty.yaml"
    bare.write_text("train:\n  seed: 1\n")
    empty = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--launch", str(bare)])
    assert empty.exit_code == 2 and "no layout or batch field read" in empty.stderr


# ---------------------------------------------------------------------------------------------------
# HF Trainer DeepSpeed JSON: "auto" is filled from TrainingArguments (the launch command, else its defaults)

HF = DATA / "hf" / "ds_config_zero3.json"


def test_hf_auto_values_come_from_the_trainer_flags_and_say_so(tmp_path: Path) -> None:
    cfg = json.loads(_text(HF))
    assert cfg["train_micro_batch_size_per_gpu"] == cfg["gradient_accumulation_steps"] == "auto"
    script = tmp_path / "run.sh"
    script.write_text("deepspeed --num_gpus 8 run_clm.py --deepspeed ds_config_zero3.json \\\n"
                      "  --per_device_train_batch_size 4 --gradient_accumulation_steps 2 --bf16\n")
    lay = parse_launch([HF, script])
    assert (lay.micro_batch_size, lay.grad_accumulation, lay.global_batch) == (4, 2, 4 * 2 * 8)
    assert lay.zero_stage == cfg["zero_optimization"]["stage"]
    assert 'fills "auto" of train_micro_batch_size_per_gpu' in lay.sources["micro_batch_size"]
    assert lay.sources["micro_batch_size"].startswith(f"{script}:2:")
    assert any(x.startswith("zero_optimization.offload_param to cpu") and "does not price" in x for x in lay.warnings)


def test_hf_auto_values_without_trainer_flags_are_the_trainers_defaults(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("deepspeed --num_gpus 8 run_clm.py --deepspeed ds_config_zero3.json\n")
    lay = parse_launch([HF, script])
    assert (lay.micro_batch_size, lay.grad_accumulation) == (8, 1)  # TrainingArguments defaults
    assert lay.sources["micro_batch_size"].startswith("HF TrainingArguments default per_device_train_batch_size 8")
    assert "fp16.enabled \"auto\" with no --bf16/--fp16" in lay.refusal and "trains fp32" in lay.refusal


# ---------------------------------------------------------------------------------------------------
# BigScience's BLOOM SLURM script: `srun ... bash -c "$LAUNCHER --node_rank \$SLURM_PROCID $CMD" 2>&1 | tee`


def _assigned(path: Path, name: str) -> int:
    (value,) = re.findall(rf"^{name}=(\d+)", _text(path), re.M)
    return int(value)


def test_bloom_slurm_script_is_read_through_srun_bash_c() -> None:
    path = DATA / "bloom" / "tr11-176B-ml.slurm"
    lay = parse_launch([path])
    # Megatron-DeepSpeed arguments; its JSON is a here-document (`cat <<EOT > $config_json`), read as that JSON
    assert lay.framework == "megatron" and "here-document" in lay.sources["micro_batch_size"]
    (nodes,) = re.findall(r"^#SBATCH --nodes=(\d+)", _text(path), re.M)
    assert lay.world_size == int(nodes) * _assigned(path, "GPUS_PER_NODE")  # SLURM_NNODES from #SBATCH
    assert (lay.tp, lay.pp) == (_assigned(path, "TP_SIZE"), _assigned(path, "PP_SIZE"))
    assert lay.micro_batch_size == _assigned(path, "MICRO_BATCH_SIZE")
    assert lay.global_batch == _assigned(path, "GLOBAL_BATCH_SIZE")
    assert lay.recompute == "full" and "--checkpoint-activations" in _text(path)
    # ZERO_STAGE=0 with --bf16 under --deepspeed: DeepSpeed's BF16_Optimizer shards like ZeRO-1
    assert _assigned(path, "ZERO_STAGE") == 0 and lay.zero_stage == 1
    assert "BF16_Optimizer" in lay.sources["zero_stage"]
    lines = _text(path).splitlines()
    # the srun line runs `bash -c "$LAUNCHER ... $CMD"`: the value is cited where the STRING's text was written,
    # the flag in CMD's assignment and the number in TP_SIZE's, not the srun line, which holds neither
    flag = next(n for n, x in enumerate(lines, 1) if "--tensor-model-parallel-size $TP_SIZE" in x)
    value = next(n for n, x in enumerate(lines, 1) if x.startswith("TP_SIZE="))
    assert lay.sources["tp"].startswith(f"{path}:{flag}: --tensor-model-parallel-size $TP_SIZE")
    assert f"value from {path}:{value}: TP_SIZE=" in lay.sources["tp"]


# ---------------------------------------------------------------------------------------------------
# Megatron's printed arguments block (a training log)


def _logged(path: Path, name: str) -> str:
    (value,) = re.findall(rf"^  {name} \.+ (.*)$", _text(path), re.M)
    return value


def test_megatron_log_arguments_block_is_read_with_its_lines() -> None:
    path = MG / "train_llama3_8b_h100_fp8.log"
    assert detect_framework([path]) == "megatron"
    lay = parse_launch([path])
    for field, name in (("tp", "tensor_model_parallel_size"), ("pp", "pipeline_model_parallel_size"),
                        ("cp", "context_parallel_size"), ("micro_batch_size", "micro_batch_size"),
                        ("global_batch", "global_batch_size"), ("seq_len", "seq_length"),
                        ("num_layers", "num_layers"), ("world_size", "world_size"), ("dp", "data_parallel_size")):
        assert getattr(lay, field) == int(_logged(path, name)), field
    assert lay.precision == ("fp8" if _logged(path, "fp8") in ("hybrid", "e4m3") else "bf16")
    assert lay.zero_stage == (1 if _logged(path, "use_distributed_optimizer") == "True" else None)
    line = next(n for n, x in enumerate(_text(path).splitlines(), 1) if x.startswith("  tensor_model_parallel_size "))
    assert lay.sources["tp"].startswith(f"{path}:{line}: tensor_model_parallel_size ")
    assert not any("num-distributed-optimizer-instances" in x for x in lay.ignored)  # its default, not a setting


def test_a_log_without_a_whole_arguments_block_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text("------------------------ arguments ------------------------\n  tensor_model_parallel_size .. 2\n")
    with pytest.raises(InputError, match="no complete Megatron arguments block"):
        parse_launch([path])


def test_a_quoted_number_in_a_torchtitan_toml_is_an_error(tmp_path: Path) -> None:
    """torchtitan 0.2.x passes TOML values to its dataclasses as written (config/manager.py _dict_to_dataclass):
    a degree of "8" stays a string there, so reading it as 8 would price a job that does not start."""
    text = ('[parallelism]\ndata_parallel_shard_degree = "8"\n[training]\nseq_len = 8192\nlocal_batch_size = 1\n'
            '[model]\nname = "llama3"\nflavor = "8B"\n')
    with pytest.raises(InputError, match=r"data_parallel_shard_degree is the TOML string '8'.*write 8 without quotes"):
        _write_parse(tmp_path / "job.toml", text)


def test_a_batch_the_files_state_wrongly_is_fixed_in_the_files(tmp_path: Path) -> None:
    """The global batch comes from the launch file: the message points there, not at a flag of `placement`."""
    from click.testing import CliRunner

    from placement.cli import main

    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py --tensor-model-parallel-size 8 "
                      "--pipeline-model-parallel-size 1 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
                      "--swiglu --ffn-hidden-size 14336 --group-query-attention --num-query-groups 8 "
                      "--seq-length 4096 --micro-batch-size 1 --global-batch-size 1001 --bf16\n")
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster",
                                       "dgx-h100", "--gpus", "32"])
    assert result.exit_code == 2
    assert "run.sh:1" in result.output  # where the files state it
    assert "set the global batch the launch files state to 1000 or 1004" in result.output  # 4 replicas
    assert "try --global-batch" not in result.output


def test_maxtext_optimizer_over_data_beside_fsdp_does_not_start(tmp_path: Path) -> None:
    """shard_optimizer_over_data with an fsdp x data mesh: MaxText 0.2.5 refuses the pair when it loads the config
    (the 0.2.5 wheel's configs/types.py:5605-5621, "`shard_optimizer_over_data` (Zero-1) cannot be combined with
    FSDP"), so the audit refuses the job, naming the key and the fsdp axis (it had priced it as HSDP with the
    optimizer over the replicas, and its best plans proposed it)."""
    _, on = _maxtext(tmp_path, "base_config: base.yml\nici_fsdp_parallelism: 8\ndcn_data_parallelism: 2\n"
                                    "shard_optimizer_over_data: true\nper_device_batch_size: 1\n")
    with pytest.raises(InputError, match=r"cfg.yml:4: shard_optimizer_over_data: true; fsdp 8 .*this job does not "
                                         r"start"):
        on(16, 16)


def test_maxtext_optimizer_over_data_beside_the_expert_axis_is_priced(tmp_path: Path) -> None:
    """Beside an expert axis with fsdp 1, which MaxText's check does not count, the key starts and shards the
    optimizer over the replicas too (recipe optimizer_over_replicas), sourced at the key."""
    _, on = _maxtext(tmp_path, "base_config: base.yml\nici_expert_parallelism: 8\ndcn_data_parallelism: 2\n"
                                    "shard_optimizer_over_data: true\nper_device_batch_size: 1\n")
    lay = on(16, 16)
    assert (lay.zero_stage, lay.dp_shard, lay.ep) == (3, 8, 8)
    assert lay.recipe["optimizer_over_replicas"] is True
    assert lay.sources["recipe.optimizer_over_replicas"].startswith(f"{tmp_path / 'cfg.yml'}:4: "
                                                                    f"shard_optimizer_over_data: true beside expert 8")


def test_megatron_refuses_shared_expert_overlap_beside_the_a2a_overlap(tmp_path: Path) -> None:
    """transformer_config.py asserts 'disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm':
    a launch with both does not start, so the audit refuses it (a user trial found it priced)."""
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py --tensor-model-parallel-size 1 "
                      "--pipeline-model-parallel-size 1 --expert-model-parallel-size 8 --num-layers 48 "
                      "--micro-batch-size 1 --global-batch-size 64 --seq-length 4096 --bf16 "
                      "--overlap-moe-expert-parallel-comm --moe-shared-expert-overlap\n")
    with pytest.raises(InputError, match="--moe-shared-expert-overlap with --overlap-moe-expert-parallel-comm"):
        parse_launch([script], "megatron")


def test_megatron_refuses_tp_comm_overlap_without_sequence_parallelism(tmp_path: Path) -> None:
    """validate_args asserts 'Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is
    enabled': a launch with --tp-comm-overlap and no --sequence-parallel does not start (it was priced with the
    overlap on); with --sequence-parallel it is read."""
    script = tmp_path / "run.sh"
    line = ("torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --tensor-model-parallel-size 8 --num-layers 48 "
            "--hidden-size 6144 --num-attention-heads 64 --seq-length 2048 --max-position-embeddings 2048 "
            "--micro-batch-size 1 --global-batch-size 64 --bf16 --tp-comm-overlap")
    script.write_text(line + "\n")
    with pytest.raises(InputError, match=r"--tp-comm-overlap without --sequence-parallel.*add --sequence-parallel"):
        parse_launch([script], "megatron")
    script.write_text(line + " --sequence-parallel\n")
    launch = parse_launch([script], "megatron")
    assert launch.recipe["tp_comm_overlap"] is True and launch.sequence_parallel is True


@pytest.mark.parametrize("flags,refused", [
    ("--overlap-param-gather --overlap-grad-reduce", "--overlap-param-gather without --use-distributed-optimizer"),
    ("--overlap-param-gather --use-distributed-optimizer", "--overlap-param-gather without --overlap-grad-reduce"),
    ("--recompute-granularity selective --recompute-method uniform --recompute-num-layers 1",
     "--recompute-method with --recompute-granularity selective"),
    ("--use-torch-fsdp2 --use-distributed-optimizer", "--use-torch-fsdp2 with --use-distributed-optimizer"),
    ("--use-torch-fsdp2 --pipeline-model-parallel-size 2", "--use-torch-fsdp2 with pipeline parallelism 2"),
    ("--use-torch-fsdp2 --untie-embeddings-and-output-weights",
     "--use-torch-fsdp2 without --no-gradient-accumulation-fusion"),
    ("--use-torch-fsdp2 --no-gradient-accumulation-fusion", "--use-torch-fsdp2 with tied embeddings"),
    ("--use-torch-fsdp2 --no-gradient-accumulation-fusion --untie-embeddings-and-output-weights", None),
    ("--num-layers-per-virtual-pipeline-stage 4", "an interleaved schedule (12 virtual stages) without pipeline"),
    ("--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 4 --no-overlap-p2p-communication",
     "an interleaved schedule on 2 pipeline stages with --no-overlap-p2p-communication"),
    ("--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 4", None),
    ("--num-layers-per-virtual-pipeline-stage 48", None),
    ("--fp16", "--bf16 and --fp16 both on"),
    ("--overlap-param-gather --overlap-grad-reduce --use-distributed-optimizer", None),
    ("--overlap-param-gather --overlap-grad-reduce --use-megatron-fsdp --ckpt-format fsdp_dtensor", None),
    # Megatron-FSDP checkpoints only as fsdp_dtensor, and that format only under it (since af28b5a559, 2025-08-21)
    ("--use-megatron-fsdp", "--use-megatron-fsdp with no --ckpt-format (Megatron-LM's default, torch_dist)"),
    ("--use-megatron-fsdp --ckpt-format torch_dist", "--use-megatron-fsdp with --ckpt-format torch_dist"),
    ("--ckpt-format fsdp_dtensor", "--ckpt-format fsdp_dtensor without --use-megatron-fsdp"),
    ("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1", None),
    # user trials (arguments.py at d98e8a64): at tp 1 Megatron turns sequence parallelism off (:1433-1439), then its
    # overlap check fails (:1441-1442); the virtual-stage flags are exclusive (:928-937), and layers per virtual stage
    # do not take an uneven first or last stage (:955-956)
    ("--tensor-model-parallel-size 1 --sequence-parallel --tp-comm-overlap",
     "--tp-comm-overlap at tensor parallelism 1"),
    ("--sequence-parallel --tp-comm-overlap", None),
    ("--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 4 "
     "--num-virtual-stages-per-pipeline-rank 6",
     "--num-layers-per-virtual-pipeline-stage and --num-virtual-stages-per-pipeline-rank together"),
    ("--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 4 --decoder-first-pipeline-num-layers 8",
     "--num-layers-per-virtual-pipeline-stage with --decoder-first-pipeline-num-layers"),
])
def test_megatron_refuses_what_validate_args_asserts_against(tmp_path: Path, flags, refused) -> None:
    """Pairs Megatron-LM's validate_args asserts against: a job with one does not start (they were priced, the
    parameter gather as overlapped without the sharded optimizer it needs); the pairs it takes are read."""
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --tensor-model-parallel-size 4 "
                      "--num-layers 48 --hidden-size 6144 --num-attention-heads 64 --seq-length 2048 "
                      f"--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 64 --bf16 {flags}\n")
    if refused is None:
        assert parse_launch([script], "megatron").tp == 4
        return
    with pytest.raises(InputError, match=re.escape(refused) + ".*Megatron-LM refuses it.*does not start"):
        parse_launch([script], "megatron")


@pytest.mark.parametrize("positions,refused", [(2048, True), (4096, False)])
def test_megatron_refuses_a_sequence_beyond_its_position_table(tmp_path: Path, positions, refused) -> None:
    """validate_args asserts max_position_embeddings >= seq_length (since 2020, Megatron-DeepSpeed too)."""
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --tensor-model-parallel-size 4 "
                      "--num-layers 48 --hidden-size 6144 --num-attention-heads 64 --seq-length 4096 "
                      f"--max-position-embeddings {positions} --micro-batch-size 1 --global-batch-size 64 --bf16\n")
    if not refused:
        assert parse_launch([script], "megatron").seq_len == 4096
        return
    with pytest.raises(InputError, match=r"--max-position-embeddings 2048 below --seq-length 4096.*refuses it"):
        parse_launch([script], "megatron")


def test_megatron_deepspeed_partitioning_flags_are_said_not_dropped(tmp_path: Path) -> None:
    """--partition-activations and --pp-partition-method change memory and the stage split but are not priced: said
    (a user trial found both dropped silently)."""
    script = tmp_path / "run.sh"
    script.write_text("deepspeed pretrain_gpt.py --tensor-model-parallel-size 4 --pipeline-model-parallel-size 4 "
                      "--num-layers 32 --micro-batch-size 1 --global-batch-size 64 --seq-length 2048 --bf16 "
                      "--deepspeed --deepspeed-activation-checkpointing --checkpoint-activations "
                      "--partition-activations --pp-partition-method type:transformer\n")
    lay = parse_launch([script], "megatron")
    for flag in ("--partition-activations", "--pp-partition-method"):
        assert any(x.startswith(f"{flag}: ") and "run.sh:1" in x for x in lay.ignored), flag


def test_a_maxtext_mesh_that_fixes_the_hosts_names_the_gpu_count_it_needs(tmp_path: Path) -> None:
    """MaxText's gpu/a3/llama_3.1_405b/128vm.sh sets dcn_fsdp_parallelism=128 beside a -1 data axis: 128 hosts or a
    multiple.  On a cluster whose default size is 96 GPUs the audit said only "128 does not divide 12" (a user
    trial); it now names the job the files need, as flags."""
    _, on = _maxtext(tmp_path, "base_config: base.yml\nmodel_name: llama3-8b\nper_device_batch_size: 1\n"
                               "dcn_fsdp_parallelism: 4\nici_fsdp_parallelism: 8\n")
    with pytest.raises(InputError, match=r"DCN \(hosts\): the explicit axes multiply to 4, which does not divide 3 "
                                         r"\(24 GPUs, 8 per host\).*--gpus 32 \(--nodes 4\) or more"):
        on(24, 24)


def test_a_step_batch_size_schedule_is_priced_at_its_last_batch(tmp_path):
    """Megatron-LM's --step-batch-size-schedule (training_config.py) steps the global batch up: the audit read none
    of it and priced micro-batch x dp.  It prices the last batch and says so; with --global-batch-size too,
    Megatron-LM refuses to start, and so does the audit."""
    from placement.audit.launch import parse_launch

    base = ("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 --num-layers 32 "
            "--hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --micro-batch-size 1 "
            "--step-batch-size-schedule \"0:64 100B:128 200B:256\" --bf16")
    script = tmp_path / "train.sh"
    script.write_text(base + "\n")
    launch = parse_launch([script])
    assert launch.global_batch == 256 and "last batch" in launch.sources["global_batch"]
    assert any("steps up to 256" in x and "128 from 100B" in x for x in launch.ignored)
    script.write_text(base + " --global-batch-size 128\n")
    with pytest.raises(InputError, match="Cannot specify both"):
        parse_launch([script])
    script.write_text(base.replace("0:64 100B:128 200B:256", "0:64 lots:128") + "\n")
    with pytest.raises(InputError, match="'lots:128' is not THRESHOLD:BATCH"):
        parse_launch([script])


def test_a_refused_script_that_reads_its_arguments_names_script_args(tmp_path):
    """A script read as started with no arguments has an empty $1, as bash runs it; when that leaves the launch
    incomplete the refusal says the script reads arguments and names --script-args, and with them it is read."""
    script = tmp_path / "run.sh"
    script.write_text("TP=$1\ntorchrun pretrain_gpt.py --tensor-model-parallel-size $TP --num-layers 32\n")
    with pytest.raises(InputError, match=r"reads its own arguments .* --script-args"):
        parse_launch([script], "megatron")
    assert parse_launch([script], "megatron", ("4",)).tp == 4


def test_arguments_held_in_a_heredoc_variable_are_said(tmp_path):
    """OpenRLHF's examples read the launch's arguments from a here-document (`read -r -d '' training_commands
    <<EOF`) and run `deepspeed --module $training_commands`: the refusal said there was no launch command outside a
    heredoc (there is one) and pointed at --script-args."""
    script = tmp_path / "train_sft.sh"
    script.write_text("read -r -d '' training_commands <<EOF\nopenrlhf.cli.train_sft \\\n   --ds.zero_stage 2\nEOF\n"
                      "if [[ ${1} != \"slurm\" ]]; then\n    deepspeed --module $training_commands\nfi\n")
    with pytest.raises(InputError, match=r"train_sft.sh:1: the launch's arguments are a here-document read into "
                                         r"\$training_commands") as err:
        parse_launch([script], "deepspeed")
    assert "--script-args" not in str(err.value)


def test_a_variable_after_a_megatron_switch_is_said_not_read(tmp_path):
    """`--use-flash-attn $EXTRA_ARGS`: argparse takes the switch alone, so the variable holds more arguments (a
    review: they were dropped unsaid, where the same variable after a flag's value was warned of); an HF Trainer's
    `--bf16 $BF16` is that bool's value, not held arguments."""
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 4 --num-layers 32 "
                      "--micro-batch-size 1 --global-batch-size 64 --bf16 --use-flash-attn $EXTRA_ARGS\n")
    launch = parse_launch([script], "megatron")
    held = [w for w in launch.warnings if "$" in w and "is not set by the files" in w]
    assert len(held) == 1 and "after the switch --use-flash-attn" in held[0] and "run.sh:1" in held[0], held
    assert launch.tp == 4  # the arguments written out are still read
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 2}\n')
    script.write_text("torchrun --nproc_per_node 8 train.py --per_device_train_batch_size 2 --bf16 $BF16 "
                      f"--output_dir out --deepspeed {tmp_path / 'ds.json'}\n")
    with pytest.raises(InputError, match=r"--bf16 depends on \$BF16"):  # the bool's value, which the files leave
        parse_launch([script, tmp_path / "ds.json"])


def _deepspeed_audit(tmp_path: Path, config: dict, gpus: int):
    from click.testing import CliRunner

    from placement.cli import main

    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(config, indent=1) + "\n")
    return CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--launch", str(path), "--gpus", str(gpus),
                                     "--json"])


def test_deepspeed_batch_identity_holds_on_the_gpu_count_given(tmp_path: Path) -> None:
    """train_batch_size, the micro-batch and the accumulation all stated must agree with dp from --gpus, as DeepSpeed's
    _batch_assertion demands: 64 != 2 x 2 x 8 was priced as 4 accumulation steps (the files say 2)."""
    config = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
              "bf16": {"enabled": True}, "zero_optimization": {"stage": 2}}
    result = _deepspeed_audit(tmp_path, config, 8)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "global batch 64" in result.output and "= 32" in result.output and "--gpus 16" in result.output
    result = _deepspeed_audit(tmp_path, config, 16)  # exit 1: the audit's own error finding (memory), not a refusal
    out = json.loads(result.stdout)
    assert out["estimate"]["global_batch"] == 64 and out["layout"]["num_microbatches"] == 2


def test_deepspeed_precision_keys(tmp_path: Path) -> None:
    """bf16 and fp16 both enabled: DeepSpeed asserts against it; the old key "bfloat16" is read as bf16 (it was
    taken for an unset precision, placement's default)."""
    both = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "fp16": {"enabled": True}}
    result = _deepspeed_audit(tmp_path, both, 8)
    assert result.exit_code == 2 and "cannot be simultaneously enabled" in result.output
    old = {"train_micro_batch_size_per_gpu": 1, "bfloat16": {"enabled": True}, "zero_optimization": {"stage": 1}}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old, indent=1) + "\n")
    launch = parse_launch([path])
    assert launch.precision == "bf16" and "bfloat16" in launch.sources["precision"]


@pytest.mark.parametrize("stage,refused", [(3, True), (2, True), (1, False)])
def test_deepspeed_pipeline_engine_refuses_zero_2_and_3(tmp_path: Path, stage, refused) -> None:
    """Megatron-DeepSpeed pipelines with DeepSpeed's PipelineEngine, which asserts ZeRO below stage 2: a pipeline
    with ZeRO-2 or -3 does not start (it was priced)."""
    config = tmp_path / "ds.json"
    config.write_text(json.dumps({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1,
                                  "bf16": {"enabled": True}, "zero_optimization": {"stage": stage}}, indent=1) + "\n")
    script = tmp_path / "run.sh"
    script.write_text("deepspeed --num_gpus 8 --num_nodes 2 pretrain_gpt.py --tensor-model-parallel-size 2 "
                      "--pipeline-model-parallel-size 2 --num-layers 48 --hidden-size 6144 --num-attention-heads 64 "
                      "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 64 "
                      f"--bf16 --deepspeed --deepspeed_config {config.name}\n")
    from click.testing import CliRunner

    from placement.cli import main

    result = CliRunner().invoke(main, ["audit", "--model", "gpt-22b", "--launch", str(script), "--launch", str(config),
                                       "--gpus", "16", "--json"])
    if refused:
        assert result.exit_code == 2 and "incompatible with pipeline parallelism" in result.output
        assert "Traceback" not in result.output
    else:
        assert json.loads(result.stdout)["layout"]["zero_stage"] == 1


def test_a_wrapper_and_its_script_are_told_that_each_file_is_read_on_its_own(tmp_path) -> None:
    """A user trial passed an sbatch file that exports TP and runs `srun bash train.sh`, and train.sh, and was told
    the sbatch has no launch command and that "the files" do not set $TP: both messages now say that each --launch
    file is read on its own, and the first names the script it runs."""
    job, train = tmp_path / "job.sbatch", tmp_path / "train.sh"
    job.write_text("#!/bin/bash\n#SBATCH --nodes=1\nexport TP=4\nsrun bash train.sh\n")
    train.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size $TP --num-layers 32\n")
    with pytest.raises(InputError, match=r"job.sbatch: no launch command .* it runs train.sh: give that script as "
                                         r"--launch .* each --launch file is read on its own"):
        parse_launch([job, train])
    with pytest.raises(InputError, match=r"depends on \$TP, which the files do not set \(value written at .*train.sh:1;"
                                         r" each --launch file is read on its own"):
        parse_launch([train])


def test_a_value_from_a_default_the_environment_may_override_says_so(tmp_path) -> None:
    """A user trial: `TP=${TP:-4}` was read as tp 4, the source a plain assignment; the job's environment may set TP
    (sbatch passes the submitting shell's), so the source says the value is that default."""
    script = tmp_path / "run.sh"
    script.write_text("TP=${TP:-4}\nMBS=2\ntorchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size "
                      "$TP --micro-batch-size $MBS --num-layers 32\n")
    launch = parse_launch([script])
    assert launch.tp == 4
    assert launch.sources["tp"].endswith("(the default of ${TP:-...}: the job's environment may set TP)")
    assert "environment may set" not in launch.sources["micro_batch_size"]


@pytest.mark.parametrize("split, refused", [
    ("--decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 6 "
     "--num-virtual-stages-per-pipeline-rank 4", "left over layers"),
                                       ("--decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7 "
                                        "--num-virtual-stages-per-pipeline-rank 2", "divisible by vp_size"),
                                       ("--decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7",
                                        ""),
                                       ("--decoder-first-pipeline-num-layers 8 --decoder-last-pipeline-num-layers 6 "
                                        "--num-virtual-stages-per-pipeline-rank 2", "")])
def test_an_uneven_split_megatron_cannot_build_is_refused(tmp_path, split, refused) -> None:
    """A user trial: 126 layers on pp 16 with 6 / 6 on the first and last ranks and 4 chunks per rank was priced
    with placement's 7/8/7 split and an info line; Megatron-Core asserts at build (the 114 left over layers do not
    divide over 14 ranks, nor 6 layers into 4 chunks). A split it builds is still priced."""
    from click.testing import CliRunner

    from placement.cli import main

    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node 8 --nnodes 512 pretrain_gpt.py --tensor-model-parallel-size 8 "
                      f"--pipeline-model-parallel-size 16 {split} --num-layers 126 --hidden-size 16384 "
                      "--num-attention-heads 128 --group-query-attention --num-query-groups 8 --swiglu "
                      "--ffn-hidden-size 53248 --micro-batch-size 1 --global-batch-size 2048 --seq-length 8192 "
                      "--bf16\n")
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-405b", "--cluster",
                                       "dgx-h100", "--gpus", "4096"])
    if refused:
        assert result.exit_code == 2 and refused in result.stderr and "transformer_block.py" in result.stderr
    else:
        assert result.exit_code in (0, 1), result.stderr


def test_a_preprocessing_script_beside_the_training_launch_is_named_as_read_for_nothing(tmp_path: Path) -> None:
    """A user trial passed Megatron-LM's data preprocessing command with the training script: its plain `python3`
    line read as a rank launch, and the audit stopped on a contradiction between the two files' CPU binding.  The
    file is named as one nothing of the job was read from; a deepspeed line beside its JSON is still read."""
    prep = tmp_path / "preprocess.sh"
    prep.write_text("VOCAB_FILE=gpt2-vocab.json\npython3 tools/preprocess_data.py --input $1 --output-prefix $2 "
                    "--vocab-file $VOCAB_FILE --tokenizer-type GPT2BPETokenizer --append-eod --workers 20\n")
    with pytest.raises(InputError, match=r"preprocess.sh: no layout, batch, precision or model field read from it.*"
                                         r"does not launch the training job"):
        parse_launch([MG / "train_gpt3_175b_distributed.sh", prep], "megatron")
    run, cfg = tmp_path / "run.sh", tmp_path / "ds.json"
    run.write_text("deepspeed --num_gpus 8 train.py --deepspeed ds.json\n")
    cfg.write_text(json.dumps({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1,
                               "bf16": {"enabled": True}, "zero_optimization": {"stage": 2}}))
    assert parse_launch([run, cfg], "deepspeed").zero_stage == 2
