"""A Megatron-Bridge override (an override YAML, or Hydra overrides on the command line) is merged onto a recipe
the training script builds in Python, which the audit cannot read: the audit says which fields it priced at the
framework's defaults instead of the recipe's (a user trial priced an override of llama3_8b_pretrain_config at ZeRO-0,
no sequence parallelism and no overlaps, unsaid)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from placement.cli import main

OVERRIDE = "model:\n  tensor_model_parallel_size: 2\ntrain:\n  global_batch_size: 128\n  micro_batch_size: 1\n"
SAVED = ("model:\n  _target_: megatron.bridge.models.llama.Llama3ModelProvider8B\n  tensor_model_parallel_size: 2\n"
         "  pipeline_model_parallel_size: 1\n  sequence_parallel: true\ntrain:\n"
         "  _target_: megatron.bridge.training.config.TrainingConfig\n  global_batch_size: 128\n"
         "  micro_batch_size: 1\n")


def _findings(*files) -> list[dict]:
    args = ["audit", "--model", "llama3-8b", "--gpus", "8", "--framework", "megatron", "--json"]
    for f in files:
        args += ["--launch", str(f)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code in (0, 1), result.output
    return [f for f in json.loads(result.stdout)["findings"] if f["kind"] == "base_config_unread"]


def test_an_override_yaml_names_the_fields_priced_at_defaults(tmp_path):
    (tmp_path / "override.yaml").write_text(OVERRIDE)
    [f] = _findings(tmp_path / "override.yaml")
    assert f["severity"] == "warning"
    message = f["message"]
    assert "override.yaml is a Megatron-Bridge override" in message
    for field in ("pp 1", "zero_stage 0", "sequence_parallel false", "seq_len 8192", "tp_comm_overlap false"):
        assert field in message, field
    assert "tp 2" not in message and "global_batch" not in message  # the file states those
    # the recipe fields are placement's defaults, said as such (a user trial read "dp_overlap true" beside "priced
    # at megatron's defaults", where megatron-core's DistributedDataParallelConfig.overlap_grad_reduce is False)
    assert "the recipe fields it leaves out at the defaults placement takes for them (the recipe sources name each)" \
        in message


def test_hydra_overrides_name_the_recipe_they_override(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node 8 scripts/training/run_recipe.py --recipe "
                      "llama3_8b_pretrain_config model.tensor_model_parallel_size=2 train.global_batch_size=128\n")
    [f] = _findings(script)
    assert "Hydra overrides" in f["message"] and "(llama3_8b_pretrain_config)" in f["message"]


def test_a_saved_run_config_is_the_whole_config(tmp_path):
    """A saved run_config.yaml (its sections' `_target_` keys) leaves no base unread, with overrides or without."""
    (tmp_path / "run_config.yaml").write_text(SAVED)
    assert _findings(tmp_path / "run_config.yaml") == []
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node 8 run_recipe.py train.global_batch_size=128\n")
    assert _findings(script, tmp_path / "run_config.yaml") == []


def test_an_moe_override_names_the_moe_recipe_fields_too(tmp_path):
    """Megatron-Bridge's qwen3_moe recipes set the alltoall dispatcher and the permute fusion; an override of one
    priced Megatron-Core's allgather and unfused defaults, and the warning did not name them (a user trial)."""
    (tmp_path / "o.yaml").write_text("model:\n  tensor_model_parallel_size: 1\n  expert_model_parallel_size: 8\n"
                                     "train:\n  global_batch_size: 64\n  micro_batch_size: 1\n")
    args = ["audit", "--model", "qwen3-30b-a3b", "--gpus", "16", "--framework", "megatron", "--json", "--launch",
            str(tmp_path / "o.yaml")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code in (0, 1), result.output
    [f] = [f for f in json.loads(result.stdout)["findings"] if f["kind"] == "base_config_unread"]
    assert "moe_dispatcher" in f["message"] and "moe_fusions" in f["message"]


def test_an_override_with_a_profiling_target_is_still_an_override(tmp_path):
    """Megatron-Bridge's performance configs name a class for their profiling section alone; a user trial's audit read
    one as a saved run_config.yaml (no base_config_unread) and priced Megatron-Core's defaults unsaid."""
    (tmp_path / "perf.yaml").write_text(OVERRIDE + "profiling:\n  _target_: megatron.bridge.training.config."
                                                   "ProfilingConfig\n  use_nsys_profiler: false\n")
    [f] = _findings(tmp_path / "perf.yaml")
    assert "its model section has no `_target_` key" in f["message"]


def test_a_performance_matrix_file_is_refused(tmp_path):
    """scripts/performance/configs/*.yaml: the layout lives in `perf_matrix` entries chosen at run time; read as a
    ConfigContainer it priced tp 1 pp 1 ep 1 for Qwen3-235B (3,593 GiB per GPU) where its H100 entry says tp 2, pp 8,
    ep 32."""
    (tmp_path / "qwen3.yaml").write_text("ConfigContainer:\n  model:\n    moe_router_fusion: true\n"
                                         "perf_matrix:\n  h100:\n    fp8_cs:\n      tensor_model_parallel_size: 2\n")
    result = CliRunner().invoke(main, ["audit", "--launch", str(tmp_path / "qwen3.yaml"), "--model", "llama3-8b",
                                       "--gpus", "8", "--framework", "megatron"])
    assert result.exit_code == 2 and "a Megatron-Bridge performance-matrix file (top-level `perf_matrix:`" in \
        result.output and "saved run_config.yaml" in result.output


def test_the_bridge_performance_launcher_is_refused_not_read_as_empty(tmp_path) -> None:
    """A user trial: `setup_experiment.py ... -tp 4 -pp 4 -cp 2 -vp 5 -gb 256` under --framework megatron priced tp 1
    with the model's default batch, its flags neither read nor listed; without --framework, "cannot tell"."""
    script = tmp_path / "run_perf.sh"
    script.write_text("uv run python scripts/performance/setup_experiment.py --gpu h100 --model_family_name llama "
                      "--model_recipe_name llama3_70b --compute_dtype bf16 -ng 64 -tp 4 -pp 4 -cp 2 -vp 5 -gb 256 "
                      "-mb 1 model.recompute_granularity=selective\n")
    for extra in ([], ["--framework", "megatron"]):
        res = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-70b", "--cluster",
                                        "dgx-h100", "--gpus", "64", *extra])
        assert res.exit_code == 2, res.output
        assert "is Megatron-Bridge's performance launcher" in res.stderr and "run_config.yaml" in res.stderr
    # scripts/training/run_recipe.py takes Hydra overrides, which are read
    ok = tmp_path / "train.sh"
    ok.write_text("torchrun --nproc_per_node 8 scripts/training/run_recipe.py train.global_batch_size=128\n")
    res = CliRunner().invoke(main, ["audit", "--launch", str(ok), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                    "--gpus", "8"])
    assert "performance launcher" not in res.output


def test_an_overrides_changes_name_bridge_fields_it_leaves_to_the_recipe(tmp_path):
    """A user trial: an override YAML's change list said "+ --use-distributed-optimizer ... the Megatron-Bridge config
    states no field of this name"; the ConfigContainer's fields are ddp.use_distributed_optimizer and
    optimizer.use_distributed_optimizer, which the recipe may set already."""
    (tmp_path / "override.yaml").write_text(OVERRIDE)
    args = ["audit", "--model", "llama3-8b", "--gpus", "8", "--framework", "megatron", "--json", "--launch",
            str(tmp_path / "override.yaml")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code in (0, 1), result.output
    from placement.audit.changes import BRIDGE_UNSTATED_SECTIONS, bridge_unstated_keys

    changes = {c["argument"]: c for c in json.loads(result.stdout)["changes"]}
    assert not [a for a in changes if a.startswith("--") and bridge_unstated_keys(a)], \
        "a flag whose Bridge field is known stayed in Megatron's spelling"
    added = [c for c in changes.values() if "the recipe may set it already" in (c.get("note") or "")]
    assert added and all(c["from"] is None for c in added)
    fields = {f"{section}.{n}" for n, sections in BRIDGE_UNSTATED_SECTIONS.items() for section in sections}
    assert {c["argument"] for c in added} <= fields
    # the best plan shards (Megatron-FSDP or the distributed optimizer): its switch, in both sections Bridge keeps
    pair = [k for k in ("ddp.use_megatron_fsdp", "ddp.use_distributed_optimizer") if k in changes]
    assert pair and changes[pair[0]]["to"] == "true"
    assert changes[pair[0].replace("ddp.", "dist." if "fsdp" in pair[0] else "optimizer.")]["to"] == "true"


def test_a_script_that_reads_no_arguments_is_not_priced_from_the_arguments_on_its_line(tmp_path):
    """A user trial: launch_with_sbatch.sh with CONFIG_FILE and CLI_OVERRIDES set but the default TRAINING_SCRIPT,
    00_quickstart_pretrain.py (no argument parser), was priced at the overrides' tp 2 and micro-batch 4, each cited."""
    (tmp_path / "override.yaml").write_text(OVERRIDE)
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node 8 00_quickstart_pretrain.py --config-file override.yaml "
                      "train.global_batch_size=64 model.tensor_model_parallel_size=2\n")
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--gpus", "8", "--launch", str(script),
                                       "--launch", str(tmp_path / "override.yaml")])
    assert result.exit_code == 2 and "reads no command-line argument" in result.output
    assert "Traceback" not in result.output


def test_a_memory_verdict_on_defaults_the_override_leaves_is_a_warning(tmp_path):
    """A user trial: Megatron-Bridge's quantization override example (tp 1, batch 8) was `[error]
    memory_over_capacity (cannot run)`, exit 1, at 161.5 GiB of ZeRO-0 optimizer state, beside the warning that ZeRO-0
    was Megatron's default, not the recipe's.  On unread defaults the verdict is a warning naming them; stated in a
    saved run_config.yaml, the same layout is the error."""
    job = ["audit", "--model", "llama3-8b", "--gpus", "8", "--framework", "megatron", "--json", "--launch"]
    override = tmp_path / "override.yaml"
    override.write_text("model:\n  tensor_model_parallel_size: 1\n  context_parallel_size: 1\ntrain:\n"
                        "  global_batch_size: 8\n")
    result = CliRunner().invoke(main, [*job, str(override)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["estimate"]["fits"] is False
    [memory] = [f for f in doc["findings"] if f["kind"] == "memory_over_capacity"]
    assert memory["severity"] == "warning" and "zero_stage" in memory["message"]
    assert "base_config_unread" in memory["message"]
    saved = tmp_path / "run_config.yaml"
    saved.write_text("model:\n  _target_: megatron.bridge.models.llama.Llama3ModelProvider8B\n"
                     "  tensor_model_parallel_size: 1\n  context_parallel_size: 1\n  pipeline_model_parallel_size: 1\n"
                     "  sequence_parallel: false\n  seq_length: 8192\ntrain:\n"
                     "  _target_: megatron.bridge.training.config.TrainingConfig\n  global_batch_size: 8\n"
                     "  micro_batch_size: 1\nddp:\n  use_distributed_optimizer: false\n")
    result = CliRunner().invoke(main, [*job, str(saved)])
    [memory] = [f for f in json.loads(result.stdout)["findings"] if f["kind"] == "memory_over_capacity"]
    assert memory["severity"] == "error" and result.exit_code == 1
