"""torchtitan 0.3.0 reads the emitted flags with its own parser, ParallelDims accepts the degrees, and
the mesh it builds on torch's fake process group has the groups the plan intends."""

from __future__ import annotations

import pytest
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from torchtitan.config import ConfigManager
from torchtitan.distributed.parallel_dims import ParallelDims

from tests.verify.helpers import CASES, group_of, plan_context, planned, torchtitan_args

# torchtitan mesh name -> placement axes it spans
TITAN_AXES = {"tp": ("tp",), "cp": ("cp",), "pp": ("pp",), "dp": ("dp",), "dp_shard": ("shard",),
              "dp_replicate": ("replicate",), "ep": ("ep",)}


def titan_groups(pd: ParallelDims, world: int, rank: int) -> dict[str, list[int]]:
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    try:
        pd.build_mesh()
        return {k: sorted(m.mesh.tolist()) for k, m in pd.get_all_one_dimensional_meshes().items()}
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("case", list(CASES))
def test_torchtitan_accepts_the_flags_and_builds_the_planned_groups(case):
    ctx, _ = planned(case)
    lay = ctx.plan.layout
    cfg = ConfigManager().parse_args(torchtitan_args(ctx))
    par = cfg.parallelism
    assert (par.tensor_parallel_degree, par.context_parallel_degree, par.pipeline_parallel_degree,
            par.expert_parallel_degree) == (lay.tp, lay.cp, lay.pp, lay.ep)
    world = ctx.plan.num_gpus
    assert cfg.training.global_batch_size == ctx.plan.global_batch
    for rank in (0, world - 1, world // 3):
        pd = ParallelDims.from_config(par, world_size=world)  # runs torchtitan's own _validate
        groups = titan_groups(pd, world, rank)
        hsdp = lay.zero_stage == 3 and lay.dp_shard < lay.dp
        for name, ranks in groups.items():
            if name not in TITAN_AXES or len(ranks) == 1:
                continue
            axes = TITAN_AXES[name]
            if name in ("dp_shard", "dp_replicate") and not hsdp:
                axes = ("dp",)  # FSDP (or DDP) over the whole data-parallel group
            assert ranks == group_of(ctx, rank, axes), (case, rank, name)
        checked = {n for n, r in groups.items() if n in TITAN_AXES and len(r) > 1}
        expected = {n for n, d in (("tp", lay.tp), ("cp", lay.cp), ("pp", lay.pp), ("ep", lay.ep)) if d > 1}
        assert expected <= checked, (case, expected - checked)


def test_torchtitan_rejects_a_world_that_does_not_match():
    ctx, _ = planned("llama3-70b-1024")
    cfg = ConfigManager().parse_args(torchtitan_args(ctx))
    with pytest.raises(AssertionError, match="WORLD_SIZE"):
        ParallelDims.from_config(cfg.parallelism, world_size=1000)


@pytest.mark.parametrize("spec", [
    ("llama3-70b", "dgx-h100", 1024, 8192, 512, {"tp": 8, "pp": 8, "cp": 2}),
    ("llama3-70b", "dgx-h100", 1024, 8192, 512, {"tp": 8, "cp": 1, "pp": 4, "vpp": 5}),  # chunks of 4
    ("llama3-70b", "dgx-h100", 1536, 8192, 768, {"tp": 8, "cp": 1, "pp": 12, "vpp": 1}),  # 5 + 10 x 7 + 5
    ("llama3-8b", "dgx-h100", 96, 8192, 96, {"tp": 8, "cp": 1, "pp": 6, "vpp": 2}),  # 4 + 4 x 6 + 4, chunks of 3
    # (llama3-405b's torchtitan config builds Float8 layers when it loads, which needs an SM89+ GPU)
    ("deepseek-v3", "hgx-h800", 2048, 4096, 2048, {"tp": 2, "pp": 8, "ep": 16, "etp": 1}),
], ids=lambda s: f"{s[0]}-pp{s[5]['pp']}x{s[5].get('vpp', 'auto')}")
def test_torchtitan_splits_the_layers_over_stages_as_planned(spec):
    """torchtitan's own stage split (`_get_pipeline_metadata` + `_generate_llm_fqn_per_model_part`) gives
    every PP rank the layers the plan priced, virtual stages included."""
    from types import SimpleNamespace

    from torchtitan.distributed import pipeline_parallel as titan_pp

    ctx, model = plan_context(*spec)
    lay = ctx.plan.layout
    cfg = ConfigManager().parse_args(torchtitan_args(ctx))
    pd = ParallelDims.from_config(cfg.parallelism, world_size=ctx.plan.num_gpus)
    stages, num_layers, first_less, last_less = titan_pp._get_pipeline_metadata(
        pd, cfg.parallelism, SimpleNamespace(layers=[None] * model.num_layers))
    assert stages == lay.pp * lay.vpp
    parts = titan_pp._generate_llm_fqn_per_model_part(stages, num_layers, first_less, last_less)
    per_rank = [0] * lay.pp
    for s, names in enumerate(parts):  # looped schedules: virtual stage s runs on PP rank s mod pp
        per_rank[s % lay.pp] += sum(n.startswith("layers.") for n in names)
    planned_split = [lay.stage_layers[0]] + [lay.stage_layers[1]] * (lay.pp - 2) + [lay.stage_layers[-1]]
    assert per_rank == planned_split


def test_an_fp8_deepseek_plan_names_torchtitans_float8_config():
    """torchtitan sets FP8 by config, not by flag: an FP8 DeepSeek-V3 plan names `deepseek_v3_671b_float8`,
    whose Float8 converters torchtitan builds when it parses the config (on a GPU before SM89, as here, that
    build refuses with its own message: proof the config resolved and carries Float8)."""
    import torch

    ctx, _ = plan_context("deepseek-v3", "hgx-h800", 2048, 4096, 2048, {"tp": 2, "pp": 8, "ep": 16, "etp": 1},
                          precision="fp8")
    args = torchtitan_args(ctx)
    assert args[args.index("--config") + 1] == "deepseek_v3_671b_float8"
    if torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9):
        ConfigManager().parse_args(args)
    else:
        with pytest.raises(ValueError, match="Failed to swap to Float8Linear"):
            ConfigManager().parse_args(args)


@pytest.mark.parametrize("num_layers", [32, 61, 80, 126])
def test_placements_copy_of_torchtitans_stage_split_is_torchtitans(num_layers):
    """`placement.emit.torchtitan.torchtitan_split` (which the header prices when torchtitan cannot split as
    planned) equals torchtitan's own `_generate_llm_fqn_per_model_part` on the stage count its
    `_get_pipeline_metadata` computes, refusals included."""
    from torchtitan.distributed import pipeline_parallel as titan_pp

    from placement.emit.torchtitan import torchtitan_split

    for pp in (2, 4, 8):
        for chunk in range(1, num_layers // pp + 2):
            for first_less in range(3):
                for last_less in range(3):
                    stages = -(-(num_layers + first_less + last_less) // chunk)
                    try:
                        mine = torchtitan_split(num_layers, pp, chunk, first_less, last_less)
                    except ValueError:
                        mine = None
                    try:
                        if stages % pp:  # _get_pipeline_metadata's own check
                            raise ValueError(stages)
                        parts = titan_pp._generate_llm_fqn_per_model_part(stages, num_layers, first_less, last_less)
                        theirs = [sum(n.startswith("layers.") for n in names) for names in parts]
                    except ValueError:
                        theirs = None
                    assert mine == theirs, (num_layers, pp, chunk, first_less, last_less)


@pytest.mark.parametrize("shard, tp, ep, builds", [(1, 1, 8, False), (1, 4, 2, True), (8, 1, 8, True)])
def test_torchtitans_expert_mesh_needs_ep_to_divide_shard_cp_tp(shard, tp, ep, builds):
    """What `frameworks.CAPABILITIES["torchtitan"].zero0_ep_in_tp_cp` and the audit's `_expert_mesh` state: torchtitan's
    own ParallelDims builds the expert mesh only where ep divides data_parallel_shard_degree x cp x tp (its ZeRO-0,
    shard 1 beside ep 8 at tp 1, fails to unflatten)."""
    from torchtitan.config import ParallelismConfig

    world = 64
    par = ParallelismConfig(data_parallel_replicate_degree=world // (shard * tp), data_parallel_shard_degree=shard,
                            tensor_parallel_degree=tp, expert_parallel_degree=ep)
    pd = ParallelDims.from_config(par, world_size=world)
    if builds:
        assert titan_groups(pd, world, 0)["ep"]
    else:
        with pytest.raises(ValueError, match="unflatten"):
            titan_groups(pd, world, 0)


@pytest.mark.parametrize("config", sorted(__import__("placement.emit.torchtitan", fromlist=["x"]).CONFIG_MAX_SEQ))
def test_placements_sequence_limit_of_each_config_is_the_one_torchtitans_trainer_enforces(config, monkeypatch):
    """`CONFIG_MAX_SEQ` (whose files say they do not start past it, and `--framework torchtitan` refuses) is the
    limit torchtitan 0.3.0's own Decoder.Config.update_from_config, which Trainer.__init__ calls, enforces: it
    accepts the sequence at the limit and raises one token past it.  (llama3_405b always converts to Float8, whose
    converter refuses a GPU before SM89: it is built here as on an H100, which changes no RoPE setting.)"""
    import torchtitan.components.quantization.float8 as float8

    from placement.emit.torchtitan import CONFIG_MAX_SEQ, shipped_models

    monkeypatch.setattr(float8, "has_cuda_capability", lambda major, minor: True)
    module = next(m for (m, c), _ in shipped_models() if c == config)
    limit = CONFIG_MAX_SEQ[config][0]
    cfg = ConfigManager().parse_args(["--module", module, "--config", config, "--training.seq_len", str(limit)])
    cfg.model_spec.model.update_from_config(config=cfg)
    cfg = ConfigManager().parse_args(["--module", module, "--config", config, "--training.seq_len",
                                      str(limit + 1)])
    with pytest.raises(ValueError, match=f"exceeds attention RoPE maximum supported sequence length {limit}"):
        cfg.model_spec.model.update_from_config(config=cfg)


def test_placements_tied_embeddings_of_each_config_are_torchtitans_and_it_refuses_them_beside_a_pipeline(monkeypatch):
    """Every config placement matches a model to ties its embeddings exactly where torchtitan 0.3.0's builds them tied
    (enable_weight_tying), and its decoder refuses that beside pipeline parallelism (the emitter's and --framework
    torchtitan's tied_pipeline rule)."""
    import torchtitan.components.quantization.float8 as float8

    from placement.emit.torchtitan import shipped_models

    monkeypatch.setattr(float8, "has_cuda_capability", lambda major, minor: True)  # llama3_405b converts to Float8
    tied = []
    for (module, config), model in shipped_models():
        cfg = ConfigManager().parse_args(["--module", module, "--config", config])
        assert cfg.model_spec.model.enable_weight_tying == model.tied_embeddings, config
        if model.tied_embeddings:
            tied.append((module, config))
    assert tied
    for module, config in tied:
        cfg = ConfigManager().parse_args(["--module", module, "--config", config, "--training.disable_cuda_graphs",
                                          "--parallelism.pipeline_parallel_degree", "2"])
        with pytest.raises(NotImplementedError, match="Weight tying is not supported with Pipeline Parallel"):
            cfg.model_spec.model.update_from_config(config=cfg)
