"""PyTorch DeviceMesh: an `init_device_mesh` call whose dims follow the plan's rank order.

The mesh stays arange-ordered (reference/frameworks.md §2: permuting the mesh tensor loses the order
inside groups); the rank -> GPU mapping is applied at launch by the host order.
"""

from __future__ import annotations

from placement.emit.common import EmitContext, header


def mesh_shape(ctx: EmitContext) -> tuple[tuple[int, ...], tuple[str, ...]]:
    lay = ctx.plan.layout
    return (lay.pp, lay.dp, lay.cp, lay.tp), ("pp", "dp", "cp", "tp")


def render(ctx: EmitContext) -> tuple[str, list[str]]:
    shape, names = mesh_shape(ctx)
    lay = ctx.plan.layout
    body = (
        "from torch.distributed.device_mesh import init_device_mesh\n\n"
        f"# world size {ctx.plan.num_gpus}: dims outermost -> innermost, rank stride 1 on the last\n"
        f'mesh = init_device_mesh("cuda", {shape}, mesh_dim_names={names})\n'
    )
    if lay.ep > 1:
        stage = lay.tp * lay.cp * lay.dp
        body += (
            f"# experts: within a pipeline stage, ranks split as (edp, ep, etp) = "
            f"({stage // (lay.ep * lay.etp)}, {lay.ep}, {lay.etp}), etp innermost\n"
            f'expert_mesh = init_device_mesh("cuda", ({lay.pp}, {stage // (lay.ep * lay.etp)}, {lay.ep}, {lay.etp}), '
            f'mesh_dim_names=("pp", "edp", "ep", "etp"))\n'
        )
    return header(ctx, "PyTorch DeviceMesh") + body, []
