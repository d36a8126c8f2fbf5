"""DeepSpeed 0.19.8's own code reads the emitted files on torch's fake process group:

- `DeepSpeedConfig` accepts ds_config.json (header key included) with the plan's world and the mpu built from
  the emitted topology, and derives the plan's batch, micro-batch, accumulation and ZeRO stage;
- the emitted topology, `PipelineParallelGrid` and `PipelineModule` give exactly the planned TP, DP, PP (and
  CP) groups and stage split, or the emitter warned;
- the launcher's own hostfile parser and slot filter put every rank on its planned GPU, or the emitter warned;
- its own argument parser reads each launch line: on several hosts one per node, without ssh, for that node rank
  of the hostfile, bound to cores as the plan was priced (runner.py then runs launch.py locally, which binds);
- DeepSpeed's expert groups (`_get_expert_parallel_ranks`) equal the planned ones, or the emitter warned.
"""

from __future__ import annotations

import importlib
import json
import re
from contextlib import contextmanager
from dataclasses import replace
from functools import cache

import deepspeed
import pytest
import torch
import torch.distributed as dist
from deepspeed.launcher.runner import _parse_hostfile, parse_args, parse_inclusion_exclusion
from deepspeed.pipe import LayerSpec, PipelineModule
from deepspeed.runtime.config import DeepSpeedConfig, DeepSpeedConfigError
from deepspeed.runtime.pipe.topology import PipelineParallelGrid, PipeModelDataParallelTopology, ProcessTopology
from deepspeed.utils.groups import _get_expert_parallel_ranks
from pydantic import ValidationError
from torch.testing._internal.distributed.fake_pg import FakeStore

from placement.emit import deepspeed as emitter
from placement.emit.common import EmitContext
from tests.verify.helpers import CASES, group_of, plan_context, planned

# init_distributed() JIT-compiles a shared-memory op on a CPU box (84 s, 1.5 GB; reference/frameworks.md §0);
# the fake backend never uses it.  `deepspeed.comm.torch` as an attribute is torch itself, hence importlib.
importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None

# Cases DeepSpeed can run without a warning about groups, besides helpers.CASES (whose pipelined ones have cp 2
# and interleaving): pipeline and tensor parallelism on 1,024 ranks with full recompute, and MoE with etp = tp.
EXTRA = {
    "llama3-70b-1024-pp8-tp8": ("llama3-70b", "dgx-h100", 1024, 8192, 512,
                                {"tp": 8, "pp": 8, "cp": 1, "vpp": 1, "zero_stage": 1, "recompute": "full"}),
    "mixtral-8x7b-1024-ep8-etp2": ("mixtral-8x7b", "dgx-h100", 1024, 4096, 1024,
                                  {"tp": 2, "pp": 2, "cp": 1, "vpp": 1, "ep": 8, "etp": 2, "zero_stage": 1}),
}
ALL = [*CASES, *EXTRA]
DS_AXES = {"model": ("tp",), "data": ("dp",), "pipe": ("pp",), "context": ("cp",)}
"""DeepSpeed topology axis -> placement axes it spans."""


def _partitioned(ctx: EmitContext) -> tuple[bool, bool]:
    """(pipe_partitioned, grad_partitioned) as priced: 1/tp shares unless told whole, and never under sequence
    parallelism, where each TP rank's output is its own shard (PartitionedTensor would mix the ranks' shards)."""
    r, lay = ctx.recipe, ctx.plan.layout
    shards = lay.sequence_parallel and lay.tp > 1 and lay.pp > 1  # no pipeline: no section, DeepSpeed's defaults
    return (not (r.pipeline_p2p_whole or shards), not (r.pipeline_p2p_whole or r.pipeline_grads_whole or shards))


@cache
def context(case: str) -> EmitContext:
    if case in CASES:
        return planned(case)[0]
    return plan_context(*EXTRA[case])[0]


@contextmanager
def fake_world(world: int, rank: int):
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    deepspeed.init_distributed(dist_backend="fake")
    try:
        yield
    finally:
        dist.destroy_process_group()


def emitted(ctx: EmitContext, tmp_path):
    """(deepspeed.sh text, warnings, path of ds_config.json, hostfile text, the topology the script builds)."""
    text, warnings, extra = emitter.render(ctx)
    path = tmp_path / "ds_config.json"
    path.write_text(extra["ds_config.json"])
    module: dict = {}
    exec(compile(extra[emitter.TOPOLOGY_FILE], emitter.TOPOLOGY_FILE, "exec"), module)  # the emitted module, run
    topo = module["topology"]
    assert isinstance(topo, PipeModelDataParallelTopology if ctx.plan.layout.cp == 1 else ProcessTopology)
    assert module.get("sequence_parallel", False) == (ctx.plan.layout.tp > 1 and ctx.plan.layout.sequence_parallel)
    # the expert-parallel degree the training script passes to deepspeed.moe.layer.MoE(..., ep_size=ep_size)
    assert module.get("ep_size") == (ctx.plan.layout.ep if ctx.moe else None)
    assert f"from ds_topology import topology  # ds_topology.py: {emitter.topology(ctx)}" in text
    return text, warnings, path, extra["hostfile"], topo


@pytest.mark.parametrize("case", ALL)
def test_deepspeed_config_accepts_the_json_and_its_grid_has_the_planned_groups(case, tmp_path):
    ctx = context(case)
    lay, world = ctx.plan.layout, ctx.plan.num_gpus
    text, _, path, _, topo = emitted(ctx, tmp_path)
    assert topo.world_size() == world
    for axis, axes in DS_AXES.items():  # every group of every axis, from DeepSpeed's own topology
        for ranks in topo.get_axis_comm_lists(axis):
            assert sorted(ranks) == group_of(ctx, ranks[0], axes), (case, axis)
    assert set(topo.get_axis_names()) == {a for a in DS_AXES if a != "context" or lay.cp > 1}
    if lay.pp > 1:  # the file itself states the stage-to-stage sends (DeepSpeed's defaults would hide a missing key)
        raw = json.loads(path.read_text())["pipeline"]
        assert (raw["pipe_partitioned"], raw["grad_partitioned"]) == _partitioned(ctx)
    for rank in (0, world - 1, world // 3):
        with fake_world(world, rank):
            grid = PipelineParallelGrid(topology=topo)
            cfg = DeepSpeedConfig(str(path), mpu=grid)
            assert (cfg.world_size, cfg.train_batch_size, cfg.train_micro_batch_size_per_gpu,
                    cfg.gradient_accumulation_steps) == (lay.dp, ctx.plan.global_batch, lay.micro_batch_size,
                                                         lay.num_microbatches), case
            assert cfg.zero_optimization_stage == lay.zero_stage and cfg.bfloat16_config.enabled
            assert cfg.zero_config.overlap_comm == (lay.zero_stage > 0)
            # never partitioned: DeepSpeed's gather of TP slices rebuilds an input only where every TP rank holds the
            # same one, not each its own sequence shard (emit.deepspeed)
            assert cfg.activation_checkpointing_config.partition_activations is False
            assert cfg.activation_checkpointing_config.synchronize_checkpoint_boundary == (
                lay.recompute == "full" and ctx.recipe.checkpoint_sync)
            assert cfg.pipeline["activation_checkpoint_interval"] == (1 if lay.recompute == "full" and lay.pp > 1
                                                                      else 0)
            # the stage-to-stage sends as priced: DeepSpeed partitions them over the slice (TP) group when true
            assert (cfg.pipeline["pipe_partitioned"], cfg.pipeline["grad_partitioned"]) == _partitioned(ctx)
            assert grid.dp_group == group_of(ctx, rank, ("dp",))
            assert grid.pp_group == group_of(ctx, rank, ("pp",))
            assert grid.slice_group == group_of(ctx, rank, ("tp",))
            if world != lay.dp:  # the file says DeepSpeed rejects the batch without the mpu: it does
                with pytest.raises(AssertionError, match=re.escape(
                        f"{ctx.plan.global_batch} != {lay.micro_batch_size} * {lay.num_microbatches} * {world}")):
                    DeepSpeedConfig(str(path))
                assert f"without that mpu it takes dp = world size {world} and rejects the JSON" in text


def test_the_header_key_is_one_deepspeed_tolerates_where_it_checks_keys(tmp_path):
    ctx = context("llama3-70b-1024-pp8-tp8")
    _, _, path, _, topo = emitted(ctx, tmp_path)
    body = json.loads(path.read_text())
    assert body["_comment"][0].startswith("DeepSpeed 0.19.8 launch for a placement plan")
    with fake_world(ctx.plan.num_gpus, 0):
        grid = PipelineParallelGrid(topology=topo)
        DeepSpeedConfig(body, mpu=grid)  # accepted at the top level ...
        with pytest.raises(ValidationError, match="_comment"):  # ... not inside a section (extra="forbid")
            DeepSpeedConfig(body | {"zero_optimization": body["zero_optimization"] | {"_comment": ["x"]}}, mpu=grid)
        with pytest.raises(DeepSpeedConfigError, match="removed"):  # and top-level keys are checked: removed ones
            DeepSpeedConfig(body | {"amp": {"enabled": True}}, mpu=grid)


class TransformerLayer(torch.nn.Module):  # the class name the emitted partition_method names
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.w(x)


class Embedding(TransformerLayer):
    pass


@pytest.mark.parametrize("case", [c for c in ALL if context(c).plan.layout.pp > 1])
def test_pipeline_module_splits_the_layers_as_planned_or_the_file_warns(case, tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "0")
    ctx = context(case)
    lay = ctx.plan.layout
    text, warnings, path, _, topo = emitted(ctx, tmp_path)
    method = re.search(r'partition_method="([^"]+)"', text).group(1)
    interval = int(re.search(r"activation_checkpoint_interval=(\d+)", text).group(1))
    layers = [LayerSpec(Embedding)] + [LayerSpec(TransformerLayer) for _ in range(ctx.num_layers)] + [
        LayerSpec(Embedding)]
    with fake_world(ctx.plan.num_gpus, 0):
        module = PipelineModule(layers, topology=topo, partition_method=method, activation_checkpoint_interval=interval)
        cfg = DeepSpeedConfig(str(path), mpu=module.mpu())
        assert (module.num_stages, cfg.world_size, module.activation_checkpoint_interval) == (
            lay.pp, lay.dp, 1 if lay.recompute == "full" else 0)
    parts = module.parts
    per_stage = [sum(layers[i].typename is TransformerLayer for i in range(parts[s], parts[s + 1]))
                 for s in range(lay.pp)]
    planned_split = [lay.stage_layers[0], *[lay.stage_layers[1]] * (lay.pp - 2), lay.stage_layers[-1]]
    uneven = [w for w in warnings if w.startswith("uneven stages")]
    assert (per_stage == planned_split) == (not uneven), (case, per_stage, planned_split)


def rank_to_gpu_by_the_launcher(hostfile: str, include: str) -> list[tuple[str, int]]:
    """(host, local GPU) of each rank as DeepSpeed launches the hostfile: its own parser and slot filter, then
    launch.py's numbering (ranks run host by host in order; local rank i on the i-th listed slot)."""
    active = parse_inclusion_exclusion(_parse_hostfile(hostfile.splitlines()), include, "")
    return [(host, slot) for host, slots in active.items() for slot in slots]


@pytest.mark.parametrize("case", ALL)
def test_the_launcher_puts_every_rank_on_its_planned_gpu(case, tmp_path):
    ctx = context(case)
    text, warnings, _, hostfile, _ = emitted(ctx, tmp_path)
    assert not [w for w in warnings if "orders GPUs inside" in w]
    first = next(x for x in text.splitlines() if x.startswith("deepspeed "))
    include = (re.search(r"--include (\S+)", first) or [None, ""])[1]
    gph = ctx.topo.gpus_per_host
    planned_gpus = [(ctx.topo.host_names[g // gph], g % gph) for g in ctx.gpu_of_rank.tolist()]
    assert rank_to_gpu_by_the_launcher(hostfile, include) == planned_gpus
    assert list(_parse_hostfile(hostfile.splitlines())) == ctx.hosts_in_rank_order


@pytest.mark.parametrize("case", ALL)
def test_the_launcher_reads_one_line_per_node_without_ssh_bound_as_priced(case, tmp_path):
    ctx = context(case)
    text, _, _, hostfile, _ = emitted(ctx, tmp_path)
    lines = [x for x in text.splitlines() if x.startswith("deepspeed ")]
    hosts = ctx.hosts_in_rank_order
    assert len(lines) == len(hosts)
    for k, line in enumerate(lines):
        args = parse_args([a.replace('"${TRAIN_SCRIPT:-train.py}"', "train.py") for a in line.split()[1:]])
        assert args.hostfile == "hostfile" and args.master_addr == hosts[0] and args.user_script == "train.py"
        assert args.bind_cores_to_rank == ctx.recipe.cpu_affinity
        assert args.user_args == ["--deepspeed", "--deepspeed_config", "ds_config.json"]
        # runner.main: no ssh -> launch.py here, for the node rank's slice of the hostfile (on one host too: with a
        # hostfile it checks ssh to the first host before it counts the hosts, runner.py:483-492)
        active = parse_inclusion_exclusion(_parse_hostfile(hostfile.splitlines()), args.include, args.exclude)
        assert args.no_ssh and args.node_rank == k and list(active)[args.node_rank] == hosts[k]


def test_the_one_host_line_launches_locally_without_an_ssh_check(tmp_path, monkeypatch):
    """DeepSpeed's own runner.main on the one-host line: with a hostfile it checks passwordless ssh to the first host
    unless --no_ssh (runner.py:483-492), which a QA run of the emitted line hit ("Using hostfile at hostfile but
    host=host0 was not reachable via ssh"); with it, it starts launch.py here for node rank 0."""
    import subprocess

    from deepspeed.launcher import runner

    ctx, _ = plan_context("llama3-8b", "dgx-h100", 8, 4096, 64, {"tp": 1, "pp": 1, "cp": 1})
    assert len(ctx.hosts_in_rank_order) == 1
    text, _, _, hostfile, _ = emitted(ctx, tmp_path)
    (tmp_path / "hostfile").write_text(hostfile)
    line = next(x for x in text.splitlines() if x.startswith("deepspeed "))
    started = []

    def no_ssh(cmd, *a, **k):
        raise AssertionError(f"the launcher ran {cmd}")

    class Started:
        returncode = 0

        def __init__(self, cmd, env=None):
            started.append(cmd)

        def wait(self):
            return 0

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(subprocess, "check_call", no_ssh)
    monkeypatch.setattr(subprocess, "check_output", no_ssh)
    monkeypatch.setattr(subprocess, "Popen", Started)
    runner.main([a.replace('"${TRAIN_SCRIPT:-train.py}"', "train.py") for a in line.split()[1:]])
    [cmd] = started
    assert cmd[1:4] == ["-u", "-m", "deepspeed.launcher.launch"] and "--node_rank=0" in cmd


def test_a_gpu_order_inside_a_node_is_what_the_launcher_loses_and_the_file_says_so(tmp_path):
    ctx = context("llama3-70b-1024-pp8-tp8")
    gpus = ctx.gpu_of_rank.copy()
    gpus[16:24] = gpus[16:24][[1, 0, 3, 2, 5, 4, 7, 6]]  # node rank 2 swaps GPU pairs
    permuted = replace(ctx, gpu_of_rank=gpus)
    text, warnings, _, hostfile, _ = emitted(permuted, tmp_path)
    gph = ctx.topo.gpus_per_host
    planned_gpus = [(ctx.topo.host_names[g // gph], g % gph) for g in gpus.tolist()]
    launched = rank_to_gpu_by_the_launcher(hostfile, "")
    assert [r for r in range(len(gpus)) if launched[r] != planned_gpus[r]] == list(range(16, 24))
    assert [w for w in warnings if "orders GPUs inside 1 node(s)" in w]
    assert "CUDA_VISIBLE_DEVICES=1,0,3,2,5,4,7,6 torchrun" in text and "\ndeepspeed " not in text


@pytest.mark.parametrize("case", [c for c in ALL if context(c).moe and context(c).plan.layout.ep > 1])
def test_deepspeed_expert_groups_are_the_planned_ones_or_the_file_warns(case, tmp_path):
    ctx = context(case)
    lay, world = ctx.plan.layout, ctx.plan.num_gpus
    text, warnings, _, _, _ = emitted(ctx, tmp_path)
    assert "ep_size=ep_size" in text and f"from ds_topology import ep_size  # {lay.ep}" in text
    ep_groups, edp_groups = _get_expert_parallel_ranks(world, lay.tp, lay.ep, lay.pp)
    same = all(sorted(g) == group_of(ctx, g[0], ("ep",)) for g in ep_groups)
    warned = [w for w in warnings if w.startswith("DeepSpeed forms EP groups")]
    assert same == (not warned), (case, ep_groups[0], group_of(ctx, 0, ("ep",)))
    if same:
        assert all(sorted(g) == group_of(ctx, g[0], ("edp",)) for g in edp_groups)


def test_a_zero0_pipeline_plans_file_builds_the_bf16_optimizer_with_an_fp32_buffer(tmp_path):
    """The BF16_Optimizer that DeepSpeed runs for a ZeRO-0 pipeline plan, with the fp32 gradient buffer the header
    prices: DeepSpeed's own optimizer choice (`_do_optimizer_sanity_check`) and dtypes (`get_data_types`) on the
    emitted JSON.  At stage 0 with grad_accum_dtype unset, 0.19.8 keeps that buffer in bf16 (a QA note: the files
    wrote stage 0 and the header priced an fp32 buffer)."""
    from deepspeed.runtime.constants import BFLOAT16
    from deepspeed.runtime.engine import DeepSpeedEngine

    ctx = plan_context("llama3-8b", "dgx-h100", 16, 4096, 64,
                       {"tp": 2, "pp": 2, "cp": 1, "vpp": 1, "zero_stage": 0, "recompute": "none"})[0]
    assert ctx.plan.layout.zero_stage == 0 and emitter.bf16_optimizer(ctx)
    _, _, path, _, topo = emitted(ctx, tmp_path)
    with fake_world(16, 0):
        engine = object.__new__(DeepSpeedEngine)  # only the config-reading methods run
        engine._config = DeepSpeedConfig(str(path), mpu=PipelineParallelGrid(topology=topo))
        engine.pipeline_parallelism = True
        assert engine.get_data_types() == (torch.bfloat16, torch.float32)
        assert engine._do_optimizer_sanity_check(torch.optim.AdamW([torch.zeros(1)])) == BFLOAT16
        stage0 = json.loads(path.read_text())
        stage0["zero_optimization"]["stage"] = 0
        path.write_text(json.dumps(stage0))
        engine._config = DeepSpeedConfig(str(path), mpu=PipelineParallelGrid(topology=topo))
        with pytest.raises(NotImplementedError, match="unsupported mix"):  # fp32 at stage 0: refused
            engine._do_optimizer_sanity_check(torch.optim.AdamW([torch.zeros(1)]))
