"""What a mapping looks like from outside: the rank table, which groups cross which level, and the
launcher files that realize it (host order, SLURM arbitrary distribution, MPI rankfile)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from placement.intranode import link_name, ring_bandwidth
from placement.mapping.groups import GroupKind
from placement.outfiles import check_out_dir, write_atomic
from placement.specs import Layout
from placement.topology import Topology


def rank_coords(layout: Layout, num_ranks: int, moe: bool) -> dict[str, np.ndarray]:
    """Mesh coordinates of every rank (tp innermost, then cp, dp, pp; experts etp, ep, edp)."""
    r = np.arange(num_ranks)
    coords = {"tp": r % layout.tp, "cp": (r // layout.tp) % layout.cp,
              "dp": (r // (layout.tp * layout.cp)) % layout.dp, "pp": r // (layout.tp * layout.cp * layout.dp)}
    if moe:
        stage_rank = r % (layout.tp * layout.cp * layout.dp)
        coords.update(etp=stage_rank % layout.etp, ep=(stage_rank // layout.etp) % layout.ep,
                      edp=stage_rank // (layout.etp * layout.ep))
    return coords


def rank_table(topo: Topology, gpu_of_rank: np.ndarray, layout: Layout, moe: bool) -> list[dict]:
    gph = topo.gpus_per_host
    coords = rank_coords(layout, topo.num_gpus, moe)
    names = topo.host_names
    hosts = gpu_of_rank // gph
    local = gpu_of_rank % gph
    cols = {k: v.tolist() for k, v in coords.items()}
    return [{"rank": r, "host": names[hosts[r]], "local_gpu": int(local[r]),
             "coords": {k: cols[k][r] for k in cols}} for r in range(topo.num_gpus)]


def compact_mapping(topo: Topology, gpu_of_rank: np.ndarray) -> dict | None:
    """The rank table in O(hosts): node rank k (ranks k*G .. k*G+G-1, G = GPUs per host) runs on host_order[k],
    rank r on local GPU local_gpu_order.get(host, 0..G-1)[r % G]; only permuted hosts are listed.  None when
    some node block spans two hosts (never for placement's mappings, which move whole node blocks)."""
    gph = min(topo.gpus_per_host, topo.num_gpus)
    blocks = np.asarray(gpu_of_rank, dtype=np.int64).reshape(-1, gph)
    hosts = blocks // topo.gpus_per_host
    if (hosts != hosts[:, :1]).any():
        return None
    local = blocks % topo.gpus_per_host
    names = topo.host_names
    permuted = ~(local == np.arange(gph)).all(axis=1)
    return {"rank_order": "tp-cp-ep-dp-pp", "gpus_per_host": int(gph),
            "host_order": [names[h] for h in hosts[:, 0].tolist()],
            "local_gpu_order": {names[hosts[k, 0]]: local[k].tolist() for k in np.flatnonzero(permuted).tolist()}}


def crossings(mapped: Topology, kinds: list[GroupKind]) -> dict[str, dict]:
    """Per kind of group: how many groups reach each level at most (their highest level spanned)."""
    out = {}
    names = [lv.name for lv in mapped.levels]
    gpus_of = mapped.gpu_of_rank if mapped.gpu_of_rank is not None else np.arange(mapped.num_gpus)
    for kind in kinds:
        gpus = gpus_of[kind.links(mapped.num_gpus)]
        top = np.zeros(gpus.shape[0], dtype=np.int64)  # lowest level whose block holds the whole group
        for j in range(len(names)):
            ids = mapped.block_of[j][gpus]
            split = ~(ids == ids[:, :1]).all(axis=1)
            top = np.maximum(top, np.where(split, j + 1, 0))
        top = np.minimum(top, len(names) - 1)
        counts = np.bincount(top, minlength=len(names))
        out[kind.name] = {"groups": int(gpus.shape[0]), "group_size": int(gpus.shape[1]),
                          "bytes_per_member_per_step": kind.bytes_per_step,
                          "highest_level": {names[j]: int(counts[j]) for j in range(len(names))}}
        ring = in_node_ring(mapped, gpus)
        if ring is not None:
            out[kind.name]["in_node"] = ring
    return out


def in_node_ring(mapped: Topology, gpus: np.ndarray) -> dict | None:
    """Where the node's links are measured (--node-topo): the slowest in-node ring of the groups (rows of GPU ids), over
    the GPUs each group has on one host, {"gpus", "bandwidth_bytes_per_s" (raw link rate per GPU), "link"}; None
    without measured links or where no group has two GPUs on a host.  A user trial: an 8-way TP group on a node of
    NVLink-bridged pairs ran its ring over PCIe, while the crossings said it stayed in an "nvlink bridge" block."""
    node = mapped.node_layout
    if node is None or node.bandwidth is None:
        return None
    gph = mapped.gpus_per_host
    bw = np.array(node.bandwidth)
    hosts = gpus // gph
    shapes = np.unique(np.concatenate([hosts - hosts[:, :1], gpus % gph], axis=1), axis=0)  # groups alike, once
    k = gpus.shape[1]
    worst, size = float("inf"), 0
    for row in shapes:
        offset, local = row[:k], row[k:]
        for h in np.unique(offset):
            part = tuple(sorted(int(g) for g in local[offset == h]))
            if len(part) < 2:
                continue
            ring = ring_bandwidth(bw, part)
            if ring < worst or (ring == worst and len(part) > size):
                worst, size = ring, len(part)
    if size == 0:
        return None
    return {"gpus": size, "bandwidth_bytes_per_s": worst, "link": link_name(worst)}


def visible_devices(gpu_of_rank: np.ndarray, gpus_per_host: int) -> list[str | None]:
    """CUDA_VISIBLE_DEVICES of node rank k (ranks k*gpus_per_host onwards): its ranks' local GPUs in rank order
    ("0,2,1,3,..."), or None where they run on GPUs 0, 1, ... in order (the identity, which needs no variable).
    One rule for cuda_visible_devices.txt and every emitted launch line that starts a node's ranks."""
    local = np.asarray(gpu_of_rank) % gpus_per_host
    blocks = [local[k:k + gpus_per_host] for k in range(0, local.size, gpus_per_host)]  # a job on part of a node: fewer
    return [None if np.array_equal(b, np.arange(b.size)) else ",".join(map(str, b.tolist())) for b in blocks]


DEVICES_FILE = "cuda_visible_devices.txt"
"""Each host's CUDA_VISIBLE_DEVICES, which launch.sbatch reads from its own folder at run time (and the audit too)."""
LAUNCH_FILES = ("hosts.txt", "slurm.hostfile", "rankfile", DEVICES_FILE)
"""What write_launch_files may write (the last only where a host's GPUs are permuted)."""


def write_launch_files(out: Path, topo: Topology, gpu_of_rank: np.ndarray, header: str) -> list[Path]:
    """Files for launchers: the host order (torchrun static rendezvous), a SLURM hostfile for
    --distribution=arbitrary (one line per task), an Open MPI rankfile, CUDA_VISIBLE_DEVICES per host."""
    check_out_dir(out)
    gph = topo.gpus_per_host
    names = topo.host_names
    host_of_rank = gpu_of_rank // gph
    order = host_of_rank[::gph]  # node_rank k runs ranks k*gph .. (k+1)*gph - 1
    written = []

    def emit(name: str, lines: list[str]) -> None:
        path = out / name
        write_atomic(path, "".join(f"# {line}\n" for line in header.splitlines()) + "\n".join(lines) + "\n")
        written.append(path)

    emit("hosts.txt", [f"{k} {names[h]}" for k, h in enumerate(order)])
    emit("slurm.hostfile", [names[h] for h in host_of_rank])
    # Open MPI reads `slot=` as the logical CPU a rank is bound to, not its GPU (mpirun(1), "Rankfiles"): the GPU
    # comes from the local rank under the node's CUDA_VISIBLE_DEVICES, so slot is the local rank, the CPU
    # `--bind-to core` gives it (a user trial: the GPU index written there bound ranks to CPUs out of order)
    note = ("slot S binds rank R to logical CPU S (Open MPI's rankfile); each rank's GPU is its local rank under "
            "the node's CUDA_VISIBLE_DEVICES (cuda_visible_devices.txt where the plan permutes GPUs), as in the "
            "other launch files; for NUMA-local CPUs, edit the slots to your nodes' cores (`nvidia-smi topo -m`, "
            "CPU Affinity) or run mpirun with --bind-to none and bind in the launcher")
    emit("rankfile", [f"# {note}", *(f"rank {r}={names[host_of_rank[r]]} slot={r % gph}"
                                     for r in range(topo.num_gpus))])
    permuted = [(names[order[k]], v) for k, v in enumerate(visible_devices(gpu_of_rank, gph)) if v is not None]
    if permuted:
        emit(DEVICES_FILE, [f"{h} CUDA_VISIBLE_DEVICES={v}" for h, v in permuted])
    return written
