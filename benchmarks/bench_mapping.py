"""Time the CP-SAT rank mapping on regular clusters up to 131,072 GPUs and irregular allocations.

Usage: python benchmarks/bench_mapping.py [--out benchmarks/mapping_results.json]
Each case solves twice to check that the rank table is byte-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from placement.catalog import load_accelerator, load_cluster, load_model
from placement.cost.batch import LayoutBatch
from placement.cost.step import estimate
from placement.fabric import topology_from_slurm
from placement.loaders.slurm import parse_topology_conf
from placement.mapping.cpsat import SolverConfig
from placement.mapping.mapper import map_layout
from placement.specs import Layout, TrainingSpec
from placement.topology import Topology
from placement.workload import workload

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from test_mapping import interleaved_tree

DGX = load_cluster("dgx-h100")
H100 = load_accelerator("h100-sxm")


def irregular(caps: list[int], oversubscription: float) -> Topology:
    with tempfile.TemporaryDirectory() as tmp:
        names = interleaved_tree(Path(tmp) / "topology.conf", caps)
        conf = parse_topology_conf(Path(tmp) / "topology.conf")
    return topology_from_slurm(conf, names, DGX, H100, oversubscription)


def uneven_leaves(num_nodes: int, seed: int = 0) -> list[int]:
    rng = np.random.default_rng(seed)
    caps = []
    while sum(caps) < num_nodes:
        caps.append(int(min(rng.integers(20, 33), num_nodes - sum(caps))))
    return caps


CASES = [
    ("regular 1,024 GPUs (catalog)", lambda: Topology(DGX, H100, num_gpus=1024), "llama3-405b", 8192, 2048,
     Layout(tp=8, pp=16, dp=8, zero_stage=1, recompute="full", sequence_parallel=True)),
    ("regular 16,384 GPUs (catalog)", lambda: Topology(DGX, H100, num_gpus=16384), "llama3-405b", 8192, 2048,
     Layout(tp=8, pp=16, dp=128, zero_stage=1, recompute="full", sequence_parallel=True)),
    ("regular 16,384 GPUs (catalog), cp 2", lambda: Topology(DGX, H100, num_gpus=16384), "llama3-405b", 8192, 2048,
     Layout(tp=8, cp=2, pp=8, dp=128, zero_stage=1, recompute="full", sequence_parallel=True)),
    ("regular 16,384 GPUs (catalog), global batch 16,384 (heavy pp)", lambda: Topology(DGX, H100, num_gpus=16384),
     "llama3-405b", 8192, 16384, Layout(tp=8, pp=16, dp=128, zero_stage=1, recompute="full", sequence_parallel=True)),
    ("regular 131,072 GPUs (catalog)", lambda: Topology(DGX, H100, num_gpus=131072), "llama3-405b", 8192, 16384,
     Layout(tp=8, pp=16, dp=1024, zero_stage=1, recompute="full", sequence_parallel=True)),
    ("256 nodes, leaves 37/64/27/64/64, names interleaved, 2:1", lambda: irregular([37, 64, 27, 64, 64], 2.0),
     "deepseek-v3", 4096, 4096, Layout(tp=1, ep=64, pp=8, dp=256, zero_stage=1)),
    ("2,048 nodes (16,384 GPUs), 78 uneven leaves, names interleaved, 2:1",
     lambda: irregular(uneven_leaves(2048), 2.0), "deepseek-v3", 4096, 16384,
     Layout(tp=1, ep=64, pp=16, dp=1024, zero_stage=1)),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/mapping_results.json")
    args = parser.parse_args()
    rows = []
    for name, make, model, seq, gbs, layout in CASES:
        topo = make()
        w = workload(load_model(model))
        train = TrainingSpec(seq_len=seq, global_batch=gbs)
        est = estimate(w, train, topo, LayoutBatch.from_layouts([layout]))
        digests = []
        for _ in range(2):
            start = time.perf_counter()
            mapped = map_layout(w, train, topo, layout, est, 0, SolverConfig())
            wall = time.perf_counter() - start
            digests.append(hashlib.sha256(mapped.gpu_of_rank.tobytes()).hexdigest()[:16])
        sol = mapped.solution
        row = {"case": name, "gpus": topo.num_gpus, "model": model, "wall_s": round(wall, 2),
               "solve_s": round(sol.wall_s, 2), "status": sol.status, "variables": sol.num_variables,
               "chunk_blocks": sol.chunk_blocks, "objective_s": round(sol.objective_s, 3),
               "bound_s": round(sol.bound_s, 3), "gap": round(sol.gap, 5), "method": sol.solver,
               "chosen": mapped.chosen,
               "mapped_step_s": round(float(mapped.estimate.step_time_s[0]), 3),
               "allocation_order_step_s": round(mapped.baselines["allocation_order"], 3),
               "identical_rank_table": digests[0] == digests[1]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
