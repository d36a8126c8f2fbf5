"""Four user trials of DeepSpeed launches: a user script given only `--deepspeed_config` (no bare --deepspeed) was
priced as a ZeRO-0 job of defaults; a Megatron-DeepSpeed bf16 ZeRO-1 job whose JSON sets grad_accum_dtype fp32 was
refused as "contradictory" (the launcher's rule against the JSON's BF16_Optimizer); an HF Trainer job was priced with
6 bytes a logit where transformers' loss holds its float32 copies eagerly; a Megatron-DeepSpeed script whose JSON is
not among the files was priced from --zero-stage with no word of the JSON."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.cli import main

GPT350M = ("name: gpt-350m\nnum_layers: 24\nhidden_size: 1024\nffn_hidden_size: 4096\nffn_kind: gelu\n"
           "normalization: layernorm\nposition_embedding: learned\nlinear_bias: true\nnum_attention_heads: 32\n"
           "vocab_size: 50257\ntied_embeddings: true\ndropout: true\ndefault_seq_len: 1024\n"
           "default_global_batch: 16\n")
MDS = ("deepspeed --num_gpus 8 pretrain_gpt.py --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
       "--num-layers 24 --hidden-size 1024 --num-attention-heads 32 --seq-length 1024 --max-position-embeddings 1024 "
       "--micro-batch-size 2 --global-batch-size 16 --bf16 --deepspeed --deepspeed_config ds_config.json "
       "--zero-stage 1\n")
BF16_ZERO1 = {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1},
              "bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"}}


def _audit(*argv: str):
    return CliRunner().invoke(main, ["audit", *argv])


def test_a_user_script_given_only_its_deepspeed_config_asks_for_that_json(tmp_path):
    (tmp_path / "run.sh").write_text("deepspeed --num_gpus=8 train.py --deepspeed_config ds.json\n")
    result = _audit("--model", "llama3-8b", "--gpus", "8", "--launch", str(tmp_path / "run.sh"))
    assert result.exit_code == 2 and "add that JSON with --launch" in result.output


def test_the_jsons_bf16_optimizer_wins_over_the_launchers_rule(tmp_path):
    (tmp_path / "m.yaml").write_text(GPT350M)
    (tmp_path / "run.sh").write_text(MDS)
    (tmp_path / "ds_config.json").write_text(json.dumps(BF16_ZERO1))
    result = _audit("--model", str(tmp_path / "m.yaml"), "--gpus", "8", "--launch", str(tmp_path / "run.sh"),
                    "--launch", str(tmp_path / "ds_config.json"), "--json")
    assert result.exit_code in (0, 1), result.output
    recipe = json.loads(result.stdout)["estimate"]["recipe"]
    assert recipe["grad_accumulation"] == "fp32_copy" and recipe["grad_all_reduce"] is True


def test_the_jsons_zero_stage_decides_the_optimizer_not_the_scripts(tmp_path):
    """Megatron-DeepSpeed uses --zero-stage only for zero.Init (pretrain_gpt.py); DeepSpeed builds its optimizer from
    the JSON.  A user trial: the same stage-1 JSON (no grad_accum_dtype) was priced with the BF16_Optimizer's fp32
    gradient copy and whole all-reduce beside `--zero-stage 0` (and bf16 and a pipeline), without them beside
    `--zero-stage 1`: two step times and peaks for one job."""
    (tmp_path / "m.yaml").write_text(GPT350M)
    (tmp_path / "ds_config.json").write_text(json.dumps({**BF16_ZERO1, "data_types": {}}))
    got = []
    for stage in ("0", "1", "2"):  # stage 2 beside the JSON's 1 was refused as contradictory (a review)
        (tmp_path / "run.sh").write_text(MDS.replace("--zero-stage 1", f"--zero-stage {stage}"))
        result = _audit("--model", str(tmp_path / "m.yaml"), "--gpus", "8", "--launch", str(tmp_path / "run.sh"),
                        "--launch", str(tmp_path / "ds_config.json"), "--json")
        assert result.exit_code in (0, 1), result.output
        est = json.loads(result.stdout)["estimate"]
        got.append((est["recipe"]["grad_accumulation"], est["recipe"]["grad_all_reduce"], est["step_time_s"],
                    est["peak_memory_bytes"]))
    assert got[0] == got[1] == got[2] and got[0][:2] == ("autograd", False), got


def test_a_megatron_deepspeed_script_without_its_json_says_so(tmp_path):
    (tmp_path / "m.yaml").write_text(GPT350M)
    (tmp_path / "run.sh").write_text(MDS)
    result = _audit("--model", str(tmp_path / "m.yaml"), "--gpus", "8", "--launch", str(tmp_path / "run.sh"),
                    "--json")
    assert result.exit_code in (0, 1), result.output
    ignored = json.loads(result.stdout)["layout"]["ignored"]
    assert any("DeepSpeed config ds_config.json" in x and "--zero-stage only sizes zero.Init" in x for x in ignored)


def test_an_hf_trainer_job_holds_transformers_float32_logits(tmp_path):
    (tmp_path / "run.sh").write_text(
        "deepspeed --num_gpus 8 run_clm.py --model_name_or_path meta-llama/Meta-Llama-3-8B "
        "--per_device_train_batch_size 2 --gradient_accumulation_steps 4 --bf16 --block_size 4096 "
        "--deepspeed ds.json --do_train --output_dir out\n")
    (tmp_path / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": "auto",
                                                  "gradient_accumulation_steps": "auto", "bf16": {"enabled": "auto"},
                                                  "zero_optimization": {"stage": 3}}))
    result = _audit("--model", "llama3-8b", "--gpus", "8", "--launch", str(tmp_path / "run.sh"), "--launch",
                    str(tmp_path / "ds.json"), "--json")
    assert result.exit_code in (0, 1), result.output
    estimate = json.loads(result.stdout)["estimate"]
    assert estimate["recipe"]["loss_eager_float32"] is True
    assert "ForCausalLMLoss" in estimate["recipe_sources"]["loss_eager_float32"]


def test_a_hostfile_with_names_off_the_catalog_cluster_is_not_called_no_hostfile(tmp_path):
    (tmp_path / "run.sh").write_text("deepspeed --hostfile hosts run_clm.py --model_name_or_path m --bf16 "
                                     "--per_device_train_batch_size 1 --gradient_accumulation_steps 1 "
                                     "--block_size 4096 --deepspeed ds.json --do_train --output_dir out\n")
    (tmp_path / "hosts").write_text("nodeA slots=8\nnodeB slots=8\n")
    (tmp_path / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": "auto",
                                                  "gradient_accumulation_steps": "auto", "bf16": {"enabled": "auto"},
                                                  "zero_optimization": {"stage": 3}}))
    result = _audit("--model", "llama3-8b", "--gpus", "16", "--launch", str(tmp_path / "run.sh"), "--launch",
                    str(tmp_path / "ds.json"), "--launch", str(tmp_path / "hosts"), "--json")
    assert result.exit_code in (0, 1), result.output
    unstated = json.loads(result.stdout)["layout"]["unstated"]["host_order"]
    assert "nodeA, nodeB" in unstated and "no hostfile" not in unstated


def _allocated(tmp_path, hostfile: str):
    """An HF Trainer DeepSpeed job with `hostfile` on a 4-node allocation (one leaf of n[1-4]) with n9 elsewhere."""
    (tmp_path / "topology.conf").write_text("SwitchName=leaf0 Nodes=n[1-4]\nSwitchName=leaf1 Nodes=n[5-9]\n"
                                            "SwitchName=spine Switches=leaf[0-1]\n")
    (tmp_path / "run.sh").write_text("deepspeed --hostfile hosts run_clm.py --model_name_or_path m --bf16 "
                                     "--per_device_train_batch_size 1 --gradient_accumulation_steps 1 "
                                     "--block_size 4096 --deepspeed ds.json --do_train --output_dir out\n")
    (tmp_path / "hosts").write_text(hostfile)
    (tmp_path / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": "auto",
                                                  "gradient_accumulation_steps": "auto", "bf16": {"enabled": "auto"},
                                                  "zero_optimization": {"stage": 3}}))
    return _audit("--model", "llama3-8b", "--slurm-topology", str(tmp_path / "topology.conf"), "--nodelist",
                  "n[1-4]", "--node-type", "dgx-h100", "--launch", str(tmp_path / "run.sh"), "--launch",
                  str(tmp_path / "ds.json"), "--launch", str(tmp_path / "hosts"))


def test_a_hostfile_host_outside_the_allocation_is_named(tmp_path):
    """A user trial: one such host had the whole hostfile order dropped for the allocation's, priced, with a note
    calling all its hosts foreign."""
    result = _allocated(tmp_path, "n2 slots=8\nn1 slots=8\nn3 slots=8\nn9 slots=8\n")
    assert result.exit_code == 2, result.output
    assert "1 host(s) not in the allocation, first 'n9' (the allocation has 4 hosts)" in result.output
    ordered = _allocated(tmp_path, "n2 slots=8\nn1 slots=8\nn3 slots=8\nn4 slots=8\n")
    assert ordered.exit_code in (0, 1), ordered.output  # the same hosts in another order: priced


def test_a_hostfile_whose_hosts_run_different_rank_counts_names_the_host(tmp_path):
    """A user trial got "world size 28 is not divisible by tp * pp * cp", naming no file or host."""
    result = _allocated(tmp_path, "n1 slots=8\nn2 slots=4\nn3 slots=8\nn4 slots=8\n")
    assert result.exit_code == 2, result.output
    assert ":2: n2 slots=4: host n2 runs 4 processes where 3 of the 4 hosts run 8, so the job's world size is 28" in (
        result.output)


def test_a_hostfile_of_another_machine_on_an_allocation_is_a_note_not_an_error(tmp_path):
    """Names none of which are the allocation's (files planned on the catalog cluster: host0 ...) are another
    machine's: node ranks go on the allocation in its order, said, as before."""
    result = _allocated(tmp_path, "host0 slots=8\nhost1 slots=8\nhost2 slots=8\nhost3 slots=8\n")
    assert result.exit_code in (0, 1), result.output
    assert "hosts_not_in_cluster" in result.output and "the allocation's --nodelist order" in result.output


def test_auto_batch_values_under_deepspeeds_own_config_argument_are_refused(tmp_path):
    """"auto" is filled by the HF Trainer (or accelerate) only; a script given the JSON with DeepSpeed's own
    --deepspeed_config hands DeepSpeed the string, which its batch check compares with 0 (runtime/config.py
    _batch_assertion).  A user trial: such a launch was priced with TrainingArguments' defaults (micro-batch 8)."""
    (tmp_path / "run.sh").write_text("deepspeed --num_gpus 8 train.py --deepspeed_config ds.json --batch_size 16\n")
    auto = {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
            "gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}
    (tmp_path / "ds.json").write_text(json.dumps(auto))
    result = _audit("--model", "llama3-8b", "--gpus", "8", "--launch", str(tmp_path / "run.sh"), "--launch",
                    str(tmp_path / "ds.json"))
    assert result.exit_code == 2, result.output
    assert 'train_micro_batch_size_per_gpu "auto"' in result.output and "_batch_assertion" in result.output
    # the same JSON under the HF Trainer's --deepspeed is filled from its arguments, as before
    (tmp_path / "hf.sh").write_text("deepspeed --num_gpus 8 run_clm.py --deepspeed ds.json "
                                    "--per_device_train_batch_size 2 --bf16\n")
    result = _audit("--model", "llama3-8b", "--gpus", "8", "--launch", str(tmp_path / "hf.sh"), "--launch",
                    str(tmp_path / "ds.json"), "--json")
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["layout"]["micro_batch_size"] == 2


@pytest.mark.parametrize("stage", [3, 2])
def test_zero_plus_plus_quantized_collectives_are_said_not_left_unread(tmp_path, stage):
    """QA: a DeepSpeed JSON with ZeRO++ zero_quantized_weights / zero_quantized_gradients (int8 weight gathers, int4
    gradient all-to-all) was priced with 16-bit gathers and reduce-scatters and said nothing of either key; under
    stage 3, where DeepSpeed runs them, each is now named with what is priced instead."""
    config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4, "bf16": {"enabled": True},
              "zero_optimization": {"stage": stage, "zero_quantized_weights": True, "zero_quantized_gradients": True}}
    (tmp_path / "ds.json").write_text(json.dumps(config))
    result = _audit("--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--launch",
                    str(tmp_path / "ds.json"), "--json")
    assert result.exit_code in (0, 1), result.output
    ignored = json.loads(result.stdout)["layout"]["ignored"]
    weights = [x for x in ignored if x.startswith("zero_quantized_weights true")]
    grads = [x for x in ignored if x.startswith("zero_quantized_gradients true")]
    if stage == 3:
        assert len(weights) == 1 and "int8" in weights[0] and "priced as a 16-bit gather" in weights[0]
        assert len(grads) == 1 and "int4" in grads[0] and "priced as a reduce-scatter" in grads[0]
    else:  # DeepSpeed's ZeRO-1/2 optimizer never reads them
        assert not weights and not grads
