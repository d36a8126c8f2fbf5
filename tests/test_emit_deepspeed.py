"""The DeepSpeed emitter without DeepSpeed: the JSON's batch arithmetic and keys, the hostfile order, and a
warning for each part of a plan DeepSpeed cannot express.  tests/verify/test_deepspeed.py checks the same
files with DeepSpeed's own code."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from placement.catalog import load_accelerator, load_cluster, load_model
from placement.cli import main
from placement.emit import deepspeed
from placement.emit.common import EmitContext
from placement.emit.writer import FORMATS, write
from placement.errors import InputError
from placement.planner import plan_job
from placement.search import SearchConfig
from placement.specs import TrainingSpec
from placement.specs.recipe import GradAccumulation, Recipe
from placement.topology import Topology


@cache
def ctx_for(model_name: str, gpus: int, fixed: tuple, precision: str = "bf16", global_batch: int = 64,
            whole_sends: bool = False) -> EmitContext:
    """A plan priced as DeepSpeed's pipeline engine runs (blocking sends and receives between stages, 1/tp shares
    unless told whole, gradients accumulated by autograd in .grad, the weights gathered in step()), with processes
    bound, as the files launch
    them (`--bind_cores_to_rank`, on several hosts one launcher line per node without ssh)."""
    cluster = load_cluster("dgx-h100")
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=gpus)
    model = load_model(model_name)
    train = TrainingSpec(seq_len=4096, global_batch=global_batch, precision=precision)
    cfg = SearchConfig(top_k=1, fixed=dict(fixed), recipe=Recipe(pipeline_p2p_whole=whole_sends,
                                                                 pipeline_p2p_scatter=True,
                                                                 pipeline_p2p_blocking=True,
                                                                 grad_accumulation=GradAccumulation.AUTOGRAD,
                                                                 param_gather_overlap=False,
                                                                 grad_buffer_passes=0))
    result = plan_job(model, train, topo, cfg, None, with_rank_table=False)
    return EmitContext.of(result.plans[0], topo, result.gpu_of_rank[0], model, train)


PIPE = ("llama3-8b", 64, (("tp", 2), ("pp", 2), ("cp", 1), ("vpp", 1), ("zero_stage", 1), ("recompute", "full")))


def files(ctx):
    text, warnings, extra = deepspeed.render(ctx)
    return text, warnings, json.loads(extra["ds_config.json"]), extra["hostfile"]


def test_a_plan_deepspeed_can_run_gets_its_batch_zero_and_pipeline_keys_and_no_warning():
    ctx = ctx_for(*PIPE)
    lay = ctx.plan.layout
    text, warnings, cfg, _ = files(ctx)
    assert warnings == [] and "WARNING" not in text
    assert cfg["train_batch_size"] == ctx.plan.global_batch
    assert cfg["train_batch_size"] == (cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"]
                                       * lay.dp)  # DeepSpeed's _batch_assertion with dp from the topology
    assert cfg["train_micro_batch_size_per_gpu"] == lay.micro_batch_size
    assert cfg["zero_optimization"]["stage"] == 1 and cfg["zero_optimization"]["overlap_comm"] is True
    # each TP rank sends its own sequence shard, the 1/tp share priced: the engine's partitioning would rebuild the
    # next stage's input from pieces of different ranks' shards (tests/test_deepspeed_sp_partitioning.py)
    assert cfg["pipeline"] == {"stages": 2, "activation_checkpoint_interval": 1,  # recompute full
                               "pipe_partitioned": False, "grad_partitioned": False}
    # tp 2 with sequence parallelism: each TP rank checkpoints its own sequence shard, which DeepSpeed's
    # partitioning would slice and gather back as if all ranks held the same input (a user trial)
    assert lay.tp == 2 and lay.sequence_parallel and "with sequence parallelism" in text
    assert cfg["activation_checkpointing"]["partition_activations"] is False
    assert cfg["bf16"] == {"enabled": True}
    assert f"PipeModelDataParallelTopology(num_pp=2, num_mp=2, num_dp={lay.dp})" in text
    assert "activation_checkpoint_interval=1" in text and "PipelineModule(" in text


def test_the_json_opens_with_the_plan_header_under_a_key_and_the_script_with_the_launch_line():
    ctx = ctx_for(*PIPE)
    text, _, cfg, _ = files(ctx)
    assert next(iter(cfg)) == "_comment"
    head = cfg["_comment"]
    assert head[0].startswith("DeepSpeed 0.19.8 launch for a placement plan (placement ")
    assert any(f"{ctx.plan.step_time_s:.3f} s/step" in line for line in head)
    launch = [x for x in text.splitlines() if x.startswith("deepspeed ")]
    hosts = ctx.hosts_in_rank_order
    assert launch == [f"deepspeed --bind_cores_to_rank --hostfile hostfile --no_ssh --node_rank {k} --master_addr "
                      f'{hosts[0]} --master_port 29500 "${{TRAIN_SCRIPT:-train.py}}" --deepspeed --deepspeed_config '
                      f"ds_config.json" for k in range(len(hosts))]
    assert "torchrun" not in text


def test_zero_0_has_no_overlap_key_and_warns_that_the_gradient_all_reduce_is_exposed():
    ctx = ctx_for("llama3-8b", 64, (("tp", 2), ("pp", 1), ("cp", 1), ("zero_stage", 0)))
    _, warnings, cfg, _ = files(ctx)
    assert cfg["zero_optimization"] == {"stage": 0}
    assert "pipeline" not in cfg and "activation_checkpointing" not in cfg
    hidden = ctx.plan.breakdown.overlapped.dp
    assert hidden > 0
    assert [w for w in warnings if "all-reduces gradients after backward" in w and f"{hidden:.3f} s/step" in w]


def test_the_hostfile_lists_hosts_in_the_planned_node_order():
    ctx = ctx_for(*PIPE)
    gph = ctx.topo.gpus_per_host
    blocks = ctx.gpu_of_rank.reshape(-1, gph)
    order = np.array([3, 0, 7, 1, 2, 6, 5, 4])  # node rank k runs on host order[k]
    moved = replace(ctx, gpu_of_rank=(blocks % gph + order[:, None] * gph).reshape(-1))
    _, _, _, hostfile = files(moved)
    lines = hostfile.splitlines()
    assert lines[0].startswith("# ")
    assert lines[1:] == [f"host{h} slots={gph}" for h in order]


def test_a_gpu_order_inside_a_node_is_warned_and_launched_by_torchrun_instead():
    ctx = ctx_for(*PIPE)
    gpus = ctx.gpu_of_rank.copy()
    gpus[8:16] = gpus[8:16][::-1]  # node rank 1 runs its ranks on local GPUs 7..0
    text, warnings, _, _ = files(replace(ctx, gpu_of_rank=gpus))
    host = ctx.hosts_in_rank_order[1]
    assert [w for w in warnings if f"first: {host}, ranks 8.. on local GPUs 7,6,5,4,3,2,1,0" in w]
    assert not [x for x in text.splitlines() if x.startswith("deepspeed ")]  # only as a comment
    assert [x for x in text.splitlines() if x.startswith("# deepspeed --bind_cores_to_rank --hostfile")]
    runs = [x for x in text.splitlines() if "torchrun" in x and not x.startswith("#")]
    assert len(runs) == len(ctx.hosts_in_rank_order)
    assert runs[1].startswith("CUDA_VISIBLE_DEVICES=7,6,5,4,3,2,1,0 torchrun") and "--node-rank 1 " in runs[1]
    assert runs[0].startswith("torchrun")  # GPUs in numbered order: no variable (as cuda_visible_devices.txt)


def test_a_node_rank_whose_ranks_lie_on_two_hosts_is_warned():
    ctx = ctx_for(*PIPE)
    gpus = ctx.gpu_of_rank.copy()
    gpus[[7, 8]] = gpus[[8, 7]]  # rank 7 on the second host, rank 8 on the first
    _, warnings, _, _ = files(replace(ctx, gpu_of_rank=gpus))
    assert len(warnings) == 1 and warnings[0].startswith("node rank 0's ranks lie on several hosts (2 such node ranks)")


def test_a_node_that_uses_other_gpus_than_its_first_gets_an_include():
    ctx = ctx_for("llama3-8b", 4, (("tp", 4), ("pp", 1), ("cp", 1)), global_batch=8)
    gpus = np.array([4, 5, 6, 7])  # a 4-GPU job on the upper half of host0
    text, warnings, _, hostfile = files(replace(ctx, gpu_of_rank=gpus))
    assert hostfile.splitlines()[1:] == ["host0 slots=8"]
    assert "--include host0:4,5,6,7 " in text
    assert not [w for w in warnings if "orders GPUs inside" in w]


@pytest.mark.parametrize(("fixed", "expected"), [
    ((("tp", 2), ("pp", 2), ("cp", 2), ("vpp", 2), ("zero_stage", 2)),
     ["cp 2: DeepSpeed has no ring context parallelism",
      "vpp 2: DeepSpeed's pipeline has no interleaved stages",
      "PipelineEngine refuses ZeRO-2 with pipeline parallelism"]),
    ((("tp", 1), ("pp", 1), ("cp", 1), ("zero_stage", 3), ("dp_shard", 8)),
     ["this file runs ZeRO-3 over all 64 data-parallel ranks (not HSDP shard 8: DeepSpeed 0.19.8 has no HSDP here)",
      "HSDP (shard 8 of dp 64) is not expressed"]),
    ((("tp", 2), ("pp", 3), ("cp", 1), ("vpp", 1), ("zero_stage", 1)),
     ["uneven stages (layers first/middle/last "]),
    ((("tp", 2), ("pp", 1), ("cp", 1), ("zero_stage", 1), ("recompute", "selective")),
     ["selective recompute is model code"]),
])
def test_each_part_deepspeed_cannot_express_is_warned(fixed, expected):
    ctx = ctx_for("llama3-8b", 96 if ("pp", 3) in fixed else 64, fixed)
    text, warnings, cfg, _ = files(ctx)
    for phrase in expected:
        assert [w for w in warnings if phrase in w], (phrase, warnings)
        assert f"# WARNING: {phrase}" in text or any(phrase in line for line in text.splitlines())
        assert any(phrase in line for line in cfg["_comment"])
    assert len(warnings) == len(expected), warnings
    refused = any(w.startswith("does not start: ") for w in warnings)
    # a file DeepSpeed refuses at start-up promises no step time (it priced the plain-1F1B run it cannot start)
    assert ("# this file does not start: DeepSpeed refuses it at start-up" in text) == refused
    assert not (refused and "this file runs" in text)
    if ctx.plan.layout.pp == 3:  # 32 layers on 3 stages
        uneven = [w for w in warnings if w.startswith("uneven stages")]
        assert uneven and "/".join(map(str, ctx.plan.layout.stage_layers)) + ")" in uneven[0]


def test_context_parallelism_keeps_a_context_axis_so_deepspeed_derives_the_plans_dp():
    ctx = ctx_for("llama3-8b", 64, (("tp", 2), ("pp", 2), ("cp", 2), ("vpp", 1), ("zero_stage", 1)))
    lay = ctx.plan.layout
    assert deepspeed.topology(ctx) == (f'ProcessTopology(axes=["pipe", "data", "context", "model"], '
                                       f"dims=[2, {lay.dp}, 2, 2])")
    text, _, cfg, _ = files(ctx)
    micro, gas = cfg["train_micro_batch_size_per_gpu"], cfg["gradient_accumulation_steps"]
    assert cfg["train_batch_size"] == ctx.plan.global_batch == micro * gas * lay.dp
    assert f"without that mpu it takes dp = world size {ctx.plan.num_gpus} and rejects the JSON" in text


def test_fp8_is_set_as_bf16_with_a_warning():
    ctx = ctx_for(*PIPE[:2], PIPE[2], precision="fp8")
    _, warnings, cfg, _ = files(ctx)
    assert cfg["bf16"] == {"enabled": True} and "fp16" not in cfg
    assert [w for w in warnings
            if w.startswith("the DeepSpeed config has no FP8 switch") and "this file runs bf16" in w]


@pytest.mark.parametrize(("etp", "expected"), [(1, "DeepSpeed forms EP groups"), (2, "etp 2: DeepSpeed MoE has no")])
def test_experts_are_set_in_code_and_a_different_ep_layout_is_warned(etp, expected):
    ctx = ctx_for("mixtral-8x7b", 64, (("tp", 2), ("pp", 1), ("cp", 1), ("ep", 8), ("etp", etp), ("zero_stage", 1)))
    text, warnings, _, _ = files(ctx)
    assert "from ds_topology import ep_size  # 8" in text
    assert "MoE(..., num_experts=N, ep_size=ep_size, k=2, drop_tokens=False)" in text
    assert deepspeed.topology_module(ctx).endswith("\nep_size = 8\n")  # what the audit reads back as ep
    layout = [w for w in warnings if not w.startswith("this file runs")]
    assert len(layout) == 1 and layout[0].startswith(expected), warnings
    if etp == 1:  # DeepSpeed's EP group of rank 0 is 0, 2, .., 14 (two hosts), the plan's 0..7 (one)
        assert "spans 2 hosts instead of 1" in layout[0]
    # a plan priced without DeepSpeed-MoE's one-hot mask GEMMs: the file says it runs them (and its header re-prices)
    assert [w for w in warnings if w.startswith("this file runs each MoE layer's tokens dispatched and combined by "
                                                "one-hot mask GEMMs over the micro-batch")]


def test_the_writer_writes_the_three_files_and_prefixes_the_warnings(tmp_path):
    assert FORMATS["deepspeed"][0] == "deepspeed.sh"
    ctx = ctx_for("llama3-8b", 64, (("tp", 2), ("pp", 1), ("cp", 1), ("zero_stage", 3), ("dp_shard", 8)))
    paths, warnings, _ = write(ctx, ["deepspeed"], tmp_path)
    assert sorted(p.name for p in paths) == ["deepspeed.sh", "ds_config.json", "ds_topology.py", "hostfile"]
    assert warnings and all(w.startswith("deepspeed: ") for w in warnings)
    json.loads((tmp_path / "ds_config.json").read_text())
    assert re.search(r"^deepspeed --bind_cores_to_rank --hostfile hostfile --no_ssh --node_rank 7 ",
                     (tmp_path / "deepspeed.sh").read_text(), re.M)


def test_the_config_partitions_the_sends_as_the_plan_priced_them(tmp_path):
    """PipelineEngine sends 1/tp shares of activations and gradients unless `pipeline.pipe_partitioned` /
    `grad_partitioned` are false (runtime/pipe/engine.py): the file sets both to what the plan priced, so a plan
    priced with whole sends runs them and says nothing else, and the audit reads the keys back."""
    from placement.audit.launch import parse_launch

    model, gpus, fixed = PIPE
    replicated = (model, gpus, (*fixed, ("sequence_parallel", False)))  # each TP rank holds the whole activation
    whole = ctx_for(*replicated, whole_sends=True)
    _, warnings, cfg, _ = files(whole)
    assert warnings == [] and cfg["pipeline"]["pipe_partitioned"] is False
    assert cfg["pipeline"]["grad_partitioned"] is False
    shares = ctx_for(*replicated)
    assert files(shares)[2]["pipeline"]["pipe_partitioned"] is True
    assert whole.plan.step_time_s > shares.plan.step_time_s
    for pipe, grad, expected in ((False, False, {"pipeline_p2p_whole": True}),
                                 (True, False, {"pipeline_p2p_whole": False, "pipeline_grads_whole": True}),
                                 (True, True, {"pipeline_p2p_whole": False})):
        path = tmp_path / f"ds_{pipe}_{grad}.json"
        path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "pipeline": {
            "pipe_partitioned": pipe, "grad_partitioned": grad}}))
        recipe = parse_launch([path], "deepspeed").recipe
        assert {k: v for k, v in recipe.items() if k in ("pipeline_p2p_whole", "pipeline_grads_whole")} == expected
    path.write_text('{"pipeline": {"grad_partitioned": "no"}}')
    with pytest.raises(InputError, match=r"pipeline\.grad_partitioned must be true or false"):
        parse_launch([path], "deepspeed")


@pytest.mark.parametrize(("interval", "recompute"), [(1, "full"), (0, "none")])
def test_the_audit_reads_the_pipeline_checkpoint_interval(tmp_path, interval, recompute):
    """PipelineEngine seeds its module's activation_checkpoint_interval from the JSON's pipeline section."""
    from placement.audit.launch import parse_launch

    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                                "pipeline": {"stages": 2, "activation_checkpoint_interval": interval}}))
    layout = parse_launch([path], "deepspeed")
    assert layout.recompute == recompute and "activation_checkpoint_interval" in layout.sources["recompute"]


def test_without_a_pipeline_the_topology_module_states_the_recompute():
    """Without a pipeline, recompute is training code DeepSpeed's JSON cannot state: ds_topology.py says it, and the
    audit reads it back."""
    ctx = ctx_for("llama3-8b", 64, (("tp", 1), ("pp", 1), ("cp", 1), ("zero_stage", 3), ("recompute", "full")))
    module = deepspeed.topology_module(ctx)
    assert "recompute = 'full'" in module and "deepspeed.checkpointing.checkpoint" in module
    plain = ctx_for("llama3-8b", 64, (("tp", 1), ("pp", 1), ("cp", 1), ("zero_stage", 3), ("recompute", "none")))
    assert "recompute" not in deepspeed.topology_module(plain)


def test_bound_processes_bind_on_every_host_and_the_pdsh_line_is_offered_at_its_own_price():
    """The deepspeed launcher binds each rank to its cores (--bind_cores_to_rank, launcher/launch.py numactl) when it
    launches locally: on one host, and on several with one line per node without ssh (runner.py runs launch.py for
    --node_rank itself).  Its pdsh runner, which starts every node from one line, does not pass the flag on
    (multinode_runner.py PDSHRunner): that line is a comment, priced unbound."""
    import dataclasses

    one = ctx_for("llama3-8b", 8, ())
    text, warnings, _ = deepspeed.render(one)
    assert next(x for x in text.splitlines() if x.startswith("deepspeed ")).startswith(
        "deepspeed --bind_cores_to_rank --hostfile hostfile --no_ssh --node_rank 0 --master_addr")
    assert "pdsh" not in text and not any("unbound" in w for w in warnings)
    many = ctx_for("llama3-8b", 64, (("zero_stage", 1),))  # a layout DeepSpeed runs as priced (no HSDP)
    text, warnings, _ = deepspeed.render(many)
    lines = [x for x in text.splitlines() if x.startswith("deepspeed ")]
    assert len(lines) == 8 and all("--bind_cores_to_rank" in x and f"--no_ssh --node_rank {k} " in x
                                   for k, x in enumerate(lines))
    assert not re.search(r"^# this file runs .*unbound", text, re.M) and not any("unbound" in w for w in warnings)
    unbound = many.priced_as(recipe={"cpu_affinity": False})
    assert unbound.step_time_s > many.plan.step_time_s
    assert f"PDSHRunner): unbound processes: {unbound.step_time_s:.3f} s/step" in text
    assert "\n#   deepspeed --hostfile hostfile --master_addr" in text
    # a plan priced unbound: no flag, and nothing to offer
    free = dataclasses.replace(many, plan=many.plan.model_copy(update={"recipe": {**many.plan.recipe,
                                                                                  "cpu_affinity": False}}))
    text, _, _ = deepspeed.render(free)
    assert "--bind_cores_to_rank" not in text and "pdsh" not in text


def test_an_fp32_gradient_plan_sets_deepspeeds_communication_dtype_and_reads_back(tmp_path):
    """Unset, DeepSpeed reduces in the bf16 of the config (runtime/engine.py communication_data_type); a plan priced
    with fp32 gradients says fp32, and the audit reads it back."""
    import dataclasses

    from placement.audit.launch import parse_launch

    base = ctx_for("llama3-8b", 8, ())
    assert "communication_data_type" not in deepspeed.config(base)
    wide = dataclasses.replace(base, plan=base.plan.model_copy(update={"recipe": {**base.plan.recipe,
                                                                                  "grad_reduce_fp32": True}}))
    cfg = deepspeed.config(wide)
    assert cfg["communication_data_type"] == "fp32"
    (tmp_path / "ds_config.json").write_text(json.dumps(cfg))
    assert parse_launch([tmp_path / "ds_config.json"], "deepspeed").recipe["grad_reduce_fp32"] is True


def test_zero_3_with_moe_is_warned_as_refused():
    """runtime/engine.py _validate_zero3_moe_compatibility: "Native DeepSpeed MoE is not supported with ZeRO Stage
    3" (deepspeed.initialize fails)."""
    ctx = ctx_for("mixtral-8x7b", 64, (("tp", 1), ("pp", 1), ("cp", 1), ("ep", 8), ("zero_stage", 3)), global_batch=256)
    refused = [w for w in deepspeed.warnings_for(ctx)
               if w.startswith("does not start: DeepSpeed refuses ZeRO-3 with its native MoE layers")]
    # ...and names the path DeepSpeed's own message offers, AutoEP, which placement does not write (a user trial)
    assert refused and "AutoEP, the JSON's `expert_parallel` section" in refused[0]
    dense = ctx_for("llama3-8b", 64, (("tp", 1), ("pp", 1), ("cp", 1), ("zero_stage", 3), ("dp_shard", 64)))
    assert not any("MoE" in w for w in deepspeed.warnings_for(dense))


@pytest.mark.parametrize(("zero", "refused"), [(2, True), (1, False)])
def test_the_sbatch_header_promises_no_step_time_for_a_file_deepspeed_refuses(zero, refused):
    """launch.sbatch lists each framework file's step time where it runs something else; a DeepSpeed file its
    PipelineEngine refuses (pp 2 with ZeRO-2) does not start, so its line says so instead of a step time."""
    from placement.emit import sbatch

    ctx = ctx_for("llama3-8b", 64, (("tp", 2), ("pp", 2), ("cp", 1), ("vpp", 2), ("zero_stage", zero)))
    line = next(x for x in sbatch.render(ctx, ["deepspeed"]).splitlines() if x.startswith("# deepspeed: "))
    assert ("does not start: DeepSpeed refuses it at start-up" in line) == refused
    assert ("s/step" in line) != refused


def test_the_config_names_the_optimizer_the_plan_prices(tmp_path: Path) -> None:
    """A user trial: ds_config.json had no optimizer, so deepspeed.initialize without one gives ZeRO-1/2 a DummyOptim
    it refuses ("zero stage 1 requires an optimizer") and ZeRO-3 a wrapper that updates nothing; the plan prices
    Adam.  And the MoE sketch routes top-k dropless as priced, not DeepSpeed MoE's top-1 with dropped tokens."""
    out = tmp_path / "ds"
    res = CliRunner().invoke(main, ["plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64",
                                    "--framework", "deepspeed", "--top-k", "1", "--out", str(out),
                                    "--emit", "deepspeed"])
    assert res.exit_code == 0, res.output
    cfg = json.loads((out / "ds_config.json").read_text())
    assert cfg["optimizer"]["type"] == "AdamW" and cfg["zero_optimization"]["stage"] >= 1
    assert any("params are left to FusedAdam's defaults" in line for line in cfg["_comment"])  # said, not silent
    script = (out / "deepspeed.sh").read_text()
    assert "ep_size=ep_size, k=2, drop_tokens=False)" in script


def test_context_parallel_files_say_what_zero_over_data_alone_holds(tmp_path: Path) -> None:
    """A user trial: a cp 2 plan's DeepSpeed header said 77.4 of 78.1 GiB, while DeepSpeed shards ZeRO over the
    'data' ranks alone, so the optimizer state is twice the plan's: 83.0 GiB, which does not fit."""
    ctx = ctx_for("llama3-8b", 16, (("tp", 1), ("pp", 1), ("cp", 2), ("ep", 1), ("zero_stage", 1)))
    runs = deepspeed.files_run(ctx)
    p = ctx.plan
    held = p.peak_memory_bytes + p.memory.optimizer_bytes
    as_run, text = runs.as_run(p)
    assert text.startswith("cp 2")
    assert f"{p.memory.optimizer_bytes / 2**30:.1f} GiB more a GPU, {held / 2**30:.1f} of" in text
    # ...and the header's own numbers hold it (a QA run: they led with the plan's memory, the file's "not priced")
    assert as_run.peak_memory_bytes == held
    line = ctx.runs_as(runs)[0]
    assert f"{held / 2**30:.1f} of {p.memory_capacity_bytes / 2**30:.1f} GiB per GPU" in line
    assert "(not priced)" not in line


def test_a_zero_3_context_parallel_file_counts_its_weight_shards_too() -> None:
    """A user trial: a ZeRO-3 cp 4 header gave 7.9 GiB, ZeRO-3 over cp x dp, with no word of what DeepSpeed's ZeRO-3
    over the 'data' ranks alone holds: weight, gradient and optimizer shards cp times the plan's."""
    ctx = ctx_for("llama3-8b", 16, (("tp", 1), ("pp", 1), ("cp", 2), ("ep", 1), ("zero_stage", 3), ("dp_shard", 8)))
    p, runs = ctx.plan, deepspeed.files_run(ctx)
    extra = p.memory.weights_bytes + p.memory.grads_bytes + p.memory.optimizer_bytes
    text = runs.as_run(p)[1]
    assert "its weight, gradient and optimizer shards 2x as large as over cp x dp" in text
    assert f"{extra / 2**30:.1f} GiB more a GPU, {(p.peak_memory_bytes + extra) / 2**30:.1f} of" in text


def test_the_files_carry_the_sequence_the_plan_is_priced_at(tmp_path):
    """A plan at a sequence other than the model's default: ds_topology.py states it (seq_len, for the data loader)
    and the audit reads it back (a user trial: Mixtral at 16384 was audited at 4096, with error findings)."""
    import json as _json

    from click.testing import CliRunner

    from placement.cli import main

    out = tmp_path / "o"
    job = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
    planned = CliRunner().invoke(main, ["--reproducible", "plan", *job, "--seq-len", "2048", "--global-batch", "64",
                                        "--framework", "deepspeed", "--emit", "deepspeed", "--out", str(out),
                                        "--top-k", "1", "--json"])
    assert planned.exit_code == 0, planned.output
    assert "seq_len = 2048" in (out / "ds_topology.py").read_text()
    files = [a for f in ("deepspeed.sh", "ds_config.json", "ds_topology.py", "hostfile") for a in ("--launch",
                                                                                                   str(out / f))]
    audited = CliRunner().invoke(main, ["--reproducible", "audit", *files, *job, "--json"])
    est = _json.loads(audited.stdout)["estimate"]
    assert est["seq_len"] == 2048
    assert est["step_time_s"] == pytest.approx(_json.loads(planned.stdout)["plans"][0]["step_time_s"], rel=1e-6)


def test_zero_3_writes_the_keys_its_stage_reads():
    """DeepSpeed 0.19.8's stage-3 optimizer takes reduce_bucket_size and prefetch_bucket_size, not the stage-1/2
    reduce_scatter and allgather_bucket_size (runtime/engine.py); a user trial read the latter in a ZeRO-3 file."""
    three = files(ctx_for("llama3-8b", 64, (("tp", 1), ("pp", 1), ("cp", 1), ("zero_stage", 3))))[2]
    zero = three["zero_optimization"]
    assert zero["stage"] == 3 and zero["stage3_prefetch_bucket_size"] == deepspeed.BUCKET_ELEMENTS
    assert "reduce_scatter" not in zero and "allgather_bucket_size" not in zero
    two = files(ctx_for("llama3-8b", 64, (("tp", 1), ("pp", 1), ("cp", 1), ("zero_stage", 2))))[2]["zero_optimization"]
    assert two["reduce_scatter"] is True and "stage3_prefetch_bucket_size" not in two


def test_the_audit_refuses_deepspeed_files_of_zero3_with_native_moe(tmp_path: Path) -> None:
    """A user trial: the plan said deepspeed.sh does not start (DeepSpeed refuses ZeRO-3 with its own MoE layers)
    and the audit of the same files priced it, exit 0.  The audit refuses it, naming the ZeRO stage's line and the
    file that builds the MoE layers; at ZeRO-2 the same files are priced."""
    job = ["--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "4096",
           "--global-batch", "256"]
    layout = ["--tp", "1", "--pp", "1", "--ep", "1", "--mbs", "1", "--recompute", "full"]
    for zero in ("3", "2"):
        out = tmp_path / f"z{zero}"
        CliRunner().invoke(main, ["evaluate", *job, *layout, "--zero", zero, "--emit", "deepspeed", "--out", str(out)])
        files = [x for name in ("deepspeed.sh", "ds_config.json", "hostfile", "ds_topology.py")
                 for x in ("--launch", str(out / name))]
        result = CliRunner().invoke(main, ["audit", *job, *files])
        if zero == "3":
            assert result.exit_code == 2, result.output[-2000:]
            assert '"stage": 3' in result.stderr and "ds_topology.py" in result.stderr
            assert "ZeRO-3 with DeepSpeed's own MoE layers" in result.stderr
            assert "set ZeRO stage 1 or 2" in result.stderr
            # the same where the file takes ep_size from an expression the audit cannot read (a review: priced)
            topology = out / "ds_topology.py"
            topology.write_text(topology.read_text().replace("ep_size = 1", 'ep_size = int(os.environ["EP"])'))
            again = CliRunner().invoke(main, ["audit", *job, *files])
            assert again.exit_code == 2 and "ZeRO-3 with DeepSpeed's own MoE layers" in again.stderr, again.output
        else:
            assert result.exit_code in (0, 1), result.output[-2000:]


@pytest.mark.parametrize("pp", ["1", "2"])
def test_selective_recompute_is_stated_in_ds_topology_and_audited_back(tmp_path: Path, pp: str) -> None:
    """A user trial: the header priced the plan's selective recompute (150 GiB, fits) while the files stated none,
    so the audit of the same files priced no recompute (360 GiB).  ds_topology.py states the modules, the audit
    reads them back: its step and memory are the header's.  Under a pipeline the JSON's activation_checkpoint_interval
    0 (no whole layer checkpointed by the engine) is no contradiction of it (a review found the audit refused it)."""
    job = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "8192",
           "--global-batch", "64"]
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["evaluate", *job, "--tp", "2", "--pp", pp, "--mbs", "1", "--zero", "1",
                                    "--recompute", "selective", "--recompute-modules", "mlp", "--emit", "deepspeed",
                                    "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output[-2000:]
    header = next(x for x in json.loads(res.stdout)["files_run"] if x.startswith("deepspeed.sh"))
    step = float(re.search(r": ([\d.]+) s/step", header).group(1))
    topology = (out / "ds_topology.py").read_text()
    assert "recompute = 'selective'\nrecompute_modules = ['mlp']\n" in topology
    files = [x for name in ("deepspeed.sh", "ds_config.json", "hostfile", "ds_topology.py")
             for x in ("--launch", str(out / name))]
    audit = json.loads(CliRunner().invoke(main, ["audit", *job, *files, "--json"]).stdout)
    assert audit["estimate"]["layout"]["recompute"] == "selective"
    assert audit["estimate"]["recipe"]["recompute_modules"] == ["mlp"]
    assert audit["estimate"]["step_time_s"] == pytest.approx(step, abs=5e-4)


def test_the_audit_of_a_context_parallel_deepspeed_file_holds_what_its_header_says(tmp_path: Path) -> None:
    """A user trial: a cp 8 DeepSpeed file's header said ZeRO over the 'data' ranks alone holds 114.7 GiB, does not
    fit (exit 1), and the audit of the same files said 67.1 GiB, fits, and kept cp 8 as the best plan.  The audit
    prices the memory as the header does, says the ring attention is the model code's, and finds a plan that fits."""
    job = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "128", "--seq-len", "65536",
           "--global-batch", "64"]
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["evaluate", *job, "--tp", "4", "--cp", "8", "--pp", "1", "--mbs", "1", "--zero",
                                    "1", "--recompute", "full", "--emit", "deepspeed", "--out", str(out), "--json"])
    header = next(x for x in json.loads(res.stdout)["files_run"] if x.startswith("deepspeed.sh"))
    held = float(re.search(r"GiB more a GPU, ([\d.]+) of", header).group(1))
    files = [x for name in ("deepspeed.sh", "ds_config.json", "hostfile", "ds_topology.py")
             for x in ("--launch", str(out / name))]
    audit = json.loads(CliRunner().invoke(main, ["audit", *job, *files, "--json"]).stdout)
    assert audit["estimate"]["peak_memory_bytes"] / 2**30 == pytest.approx(held, abs=0.06)
    assert audit["estimate"]["fits"] is False
    kinds = {f["kind"]: f["message"] for f in audit["findings"]}
    assert "memory_over_capacity" in kinds and f"needs {held:.1f} GiB per GPU" in kinds["memory_over_capacity"]
    assert any("cp 8 only as your model code's ring attention" in f["message"] for f in audit["findings"])
    assert audit["best"]["fits"] is True and audit["best"]["layout"]["cp"] == 1


def test_a_torchtitan_plan_written_for_deepspeed_is_priced_as_its_audit_prices_it(tmp_path: Path) -> None:
    """A user trial: a `--framework torchtitan` plan (FlashAttention-2, torchtitan's eager float32 loss) written as
    DeepSpeed files said they run 25.535 s at 70.2 GiB, repriced with the default cuDNN attention although
    ds_topology.py tells the model code FlashAttention-2, and the audit of those files said 28.387 s at 64.3 GiB.
    The header's run and the audit now agree, step and memory."""
    job = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["plan", *job, "--framework", "torchtitan", "--emit", "deepspeed", "--out",
                                    str(out), "--json"])
    assert res.exit_code == 0, res.output[-2000:]
    doc = json.loads(res.stdout)
    assert doc["plans"][0]["recipe"]["attention_kernel"] == "flash2"
    assert "attention_kernel = 'flash2'" in (out / "ds_topology.py").read_text()
    header = next(x for x in doc["files_run"] if x.startswith("deepspeed.sh"))
    step = float(re.search(r": ([\d.]+) s/step", header).group(1))
    held = float(re.search(r"([\d.]+) of [\d.]+ GiB per GPU", header).group(1))
    files = [x for name in ("deepspeed.sh", "ds_config.json", "hostfile", "ds_topology.py")
             for x in ("--launch", str(out / name))]
    audit = json.loads(CliRunner().invoke(main, ["audit", *job, *files, "--json"]).stdout)
    assert audit["estimate"]["step_time_s"] == pytest.approx(step, abs=5e-4)
    assert audit["estimate"]["peak_memory_bytes"] / 2**30 == pytest.approx(held, abs=0.06)


def test_a_zero0_pipeline_file_is_priced_as_the_bf16_optimizer_deepspeed_builds_for_it():
    """bf16 at ZeRO stage 0 under DeepSpeed 0.19.8's PipelineEngine is its BF16_Optimizer (runtime/engine.py
    _do_optimizer_sanity_check), which shards the fp32 master weights and Adam state over dp like ZeRO-1
    (bf16_optimizer.py), copies each micro-batch's gradient into its own buffer and all-reduces the whole gradient
    (pipe/engine.py _bf16_reduce_grads).  A QA run: the header priced every rank's whole optimizer state (65.9 GiB
    against the 49.1 the audit of the same files read)."""
    ctx = ctx_for("llama3-8b", 16, (("tp", 2), ("pp", 2), ("cp", 1), ("vpp", 1), ("zero_stage", 0),
                                    ("recompute", "none")))
    assert ctx.plan.layout.zero_stage == 0 and ctx.plan.layout.pp == 2
    runs = deepspeed.files_run(ctx)
    assert runs.layout.get("zero_stage") == 1
    assert runs.recipe.get("grad_all_reduce") is True
    assert runs.recipe.get("grad_accumulation") is GradAccumulation.FP32_COPY
    assert runs.recipe.get("param_gather_overlap") in (None, False)
    text, _, cfg, _ = files(ctx)
    # the file states the optimizer that runs: stage 1 with an fp32 buffer builds the same BF16_Optimizer, where stage
    # 0 would keep its gradient buffer in bf16 (grad_accum_dtype unset: the model's dtype) and fp32 there is refused
    assert cfg["zero_optimization"]["stage"] == 1 and cfg["data_types"] == {"grad_accum_dtype": "fp32"}
    line = next(x for x in text.splitlines() if x.startswith("# this file runs"))
    assert "BF16_Optimizer" in line and "ZeRO-1 (not ZeRO-0)" in line
    other = ctx.priced_as(None, runs.layout, runs.recipe, runs.model)
    assert f"{other.peak_memory_bytes / 2**30:.1f} of" in line
    assert other.memory.optimizer_bytes < ctx.plan.memory.optimizer_bytes / 1.5  # sharded over dp 4


def test_a_zero0_file_without_a_pipeline_keeps_its_unsharded_optimizer():
    """Without a pipeline, bf16 at stage 0 is DDP_BFLOAT16 (FP16_Optimizer's whole fp32 master copy): no ZeRO-1."""
    ctx = ctx_for("llama3-8b", 16, (("tp", 2), ("pp", 1), ("cp", 1), ("vpp", 1), ("zero_stage", 0),
                                    ("recompute", "full")))
    runs = deepspeed.files_run(ctx)
    assert "zero_stage" not in runs.layout and "grad_all_reduce" not in runs.recipe


def test_a_zero0_pipeline_plan_is_not_told_it_runs_without_zero(tmp_path):
    """A ZeRO-0 plan with a pipeline, priced with its DP reduction overlapped, writes a file that runs the
    BF16_Optimizer at stage 1 (its runs line prices the whole-gradient all-reduce after the flush).  A QA run: its
    warnings also said "without ZeRO DeepSpeed all-reduces gradients after backward ... ZeRO-1 with overlap_comm hides
    it", beside the file's stage 1 and for a reduction the PipelineEngine runs after the flush whatever overlap_comm
    says; without a pipeline the warning stands."""
    out = tmp_path / "pp"
    args = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--zero", "0"]
    CliRunner().invoke(main, [*args, "--emit", "deepspeed", "--out", str(out)])
    text = (out / "deepspeed.sh").read_text()
    assert "BF16_Optimizer" in text and '"stage": 1' in (out / "ds_config.json").read_text()
    assert "without ZeRO" not in text
    flat = tmp_path / "flat"
    CliRunner().invoke(main, ["evaluate", *args[1:7], "--tp", "1", "--cp", "1", "--ep", "1", "--etp", "1", "--pp", "1",
                              "--vpp", "1", "--mbs", "1", "--zero", "0", "--recompute", "none", "--emit", "deepspeed",
                              "--out", str(flat)])
    assert "without ZeRO DeepSpeed all-reduces" in (flat / "deepspeed.sh").read_text()

