"""The emitted `init_device_mesh` snippet, run on torch's fake process group, yields the planned groups."""

from __future__ import annotations

import pytest
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore

from tests.verify.helpers import CASES, devicemesh_source, group_of, planned


@pytest.mark.parametrize("case", list(CASES))
def test_device_mesh_snippet_builds_the_planned_groups(case):
    ctx, _ = planned(case)
    world = ctx.plan.num_gpus
    source = devicemesh_source(ctx).replace('"cuda"', '"cpu"')
    for rank in (0, world - 1):
        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
        try:
            scope: dict = {}
            exec(compile(source, "device_mesh.py", "exec"), scope)  # the emitted file, as a user runs it
            mesh = scope["mesh"]
            grid = mesh.mesh
            assert sorted(grid.flatten().tolist()) == list(range(world))  # a permutation of every rank
            for i, name in enumerate(mesh.mesh_dim_names):
                axis = {"dp_replicate": "replicate", "dp_shard": "shard"}.get(name, name)  # HSDP's 2-D dp
                mine = sorted(dist.get_process_group_ranks(mesh.get_group(name)))
                assert mine == group_of(ctx, rank, (axis,)), (case, rank, name)
                every = grid.movedim(i, -1).reshape(-1, grid.size(i)).tolist()
                assert all(sorted(g) == group_of(ctx, g[0], (axis,)) for g in every[:64])
            if "expert_mesh" in scope:
                em = scope["expert_mesh"]
                mine = sorted(dist.get_process_group_ranks(em.get_group("ep")))
                assert mine == group_of(ctx, rank, ("ep",)), (case, rank, "ep")
        finally:
            dist.destroy_process_group()
