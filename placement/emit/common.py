"""What every emitted file shares: the header that says which plan it realizes, and the host order."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement import __version__
from placement.cost.constants import GiB
from placement.plan import Plan
from placement.topology import Topology


@dataclass(frozen=True)
class EmitContext:
    plan: Plan
    topo: Topology
    gpu_of_rank: np.ndarray
    model_name: str
    num_layers: int = 0
    moe: bool = False

    @property
    def hosts_in_rank_order(self) -> list[str]:
        """Host of node_rank k (the k-th block of gpus_per_host ranks)."""
        gph = self.topo.gpus_per_host
        return [self.topo.host_names[h] for h in (self.gpu_of_rank[::gph] // gph)]



def header(ctx: EmitContext, framework: str, comment: str = "#") -> str:
    p = ctx.plan
    lay = p.layout
    lines = [
        f"{framework} launch for a placement plan (placement {__version__})",
        f"model {p.model} on {p.num_gpus} x {p.accelerator} ({p.cluster}), seq {p.seq_len}, global batch "
        f"{p.global_batch}, {p.precision}",
        f"layout: tp {lay.tp}, cp {lay.cp}, ep {lay.ep}, etp {lay.etp}, pp {lay.pp} (vpp {lay.vpp}), dp {lay.dp}, "
        f"ZeRO-{lay.zero_stage}, micro-batch {lay.micro_batch_size}, recompute {lay.recompute}, "
        f"sequence parallel {lay.sequence_parallel}",
        f"predicted: {p.step_time_s:.3f} s/step, {p.tokens_per_s:,.0f} tokens/s, MFU {p.mfu:.1%}, "
        f"{p.peak_memory_bytes / GiB:.1f} of {p.memory_capacity_bytes / GiB:.1f} GiB per GPU",
        "ranks: tp innermost, then cp, dp, pp (Megatron-Core and torchtitan order); the rank -> GPU mapping is",
        "applied by the host order (node ranks) below, never by renumbering ranks inside the framework",
    ]
    return "\n".join(f"{comment} {line}" for line in lines) + "\n"


def torchrun_lines(ctx: EmitContext, command: str, master_port: int = 29500) -> str:
    """One `torchrun` line per node, run on that host; node ranks follow the planned host order."""
    hosts = ctx.hosts_in_rank_order
    lines = ["# one line per node, run on that host (static rendezvous; node ranks follow the planned host order)\n"]
    for k, host in enumerate(hosts):
        lines.append(f"# on {host}\ntorchrun --nnodes {len(hosts)} --nproc-per-node {ctx.topo.gpus_per_host} "
                     f"--node-rank {k} --master-addr {hosts[0]} --master-port {master_port} {command}\n")
    return "".join(lines)


def warn_block(warnings: list[str], comment: str = "#") -> str:
    if not warnings:
        return ""
    return "".join(f"{comment} WARNING: {w}\n" for w in warnings)
