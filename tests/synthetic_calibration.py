"""Measurements the cost model itself generates from known constants, plus noise, written in the real formats:
nccl-tests output (all_reduce_perf, all_gather_perf) and Megatron-LM logs (the arguments block of a real log,
tests/data/audit/megatron/train_llama3_8b_h100_fp8.log, with the layout changed, and iteration lines).
`placement calibrate` on them must recover the constants (tests/test_calibrate.py, benchmarks/bench_calibrate.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from placement.calibration.nccl_tests import NcclRow, NcclRun, bus_bandwidth, bus_factor, predict_times
from placement.calibration.profile import with_constants
from placement.calibration.steps import read_steps
from placement.calibration.validate import predict, run_topology
from placement.catalog import load_accelerator, load_cluster
from placement.topology import Topology

TEMPLATE = Path(__file__).parent / "data" / "audit" / "megatron" / "train_llama3_8b_h100_fp8.log"
CLUSTER = "dgx-h100"
TRUTH = {"scale_up_efficiency": 0.70, "scale_up_latency_s": 3.0e-6, "network_efficiency": 0.80,
         "network_latency_s": 7.0e-6, "matmul_efficiency_fp8": 0.62, "host_s_per_kernel": 1.4e-5}
"""The constants the measurements are generated with (each differs from dgx-h100's default)."""
NCCL_FILES = (("all_reduce", 1), ("all_reduce", 2), ("all_gather", 4), ("all_reduce", 8))
"""(test, hosts): one NVLink-only run and two that cross the network."""
STEP_RUNS = (  # (world size, tp, micro-batch, global batch, seq): compute-bound and host-bound shapes
    (8, 1, 1, 64, 8192), (8, 2, 2, 64, 4096), (8, 8, 1, 16, 1024), (16, 4, 1, 32, 2048), (8, 4, 4, 64, 4096),
    (32, 8, 1, 32, 512))
SIZES = [8 * 2**i for i in range(31)]
"""8 B to 8 GiB."""


def _rank_lines(hosts: int, gpn: int, gpu: str) -> list[str]:
    return [f"#  Rank {h * gpn + d:2d} Group  0 Pid {1000 + h * gpn + d:6d} on {f'node{h:03d}':>10} device {d:2d} "
            f"[0x{16 + d:02x}] {gpu}" for h in range(hosts) for d in range(gpn)]


def write_nccl(path: Path, op: str, hosts: int, truth: dict[str, float], rng: np.random.Generator,
               noise: float) -> Path:
    cluster = load_cluster(CLUSTER)
    acc = load_accelerator(cluster.accelerator)
    gpn = cluster.gpus_per_node
    run = NcclRun(str(path), op, hosts * gpn, tuple(f"node{h:03d}" for h in range(hosts)), gpn, "NVIDIA H100 80GB HBM3",
                  tuple(NcclRow(s, 1.0, 1.0, 0) for s in SIZES))
    topo = with_constants(Topology(cluster, acc, num_gpus=hosts * gpn), truth)
    times = predict_times(run, topo, 1) * (1.0 + noise * rng.standard_normal(len(SIZES)))
    return _write_nccl_text(path, op, hosts, gpn, run.gpu, times)


def write_nccl_ramp(path: Path, op: str, hosts: int, floor_s: float, busbw_bytes_per_s: float, ramp_bytes: float,
                    rng: np.random.Generator, noise: float = 0.015, gpn: int = 8, min_bytes: int = 0,
                    bumps: dict[int, float] | None = None) -> Path:
    """An nccl-tests output shaped as NCCL's are, not as the cost model prices them: a latency floor, then a bus
    bandwidth that ramps up to its plateau over `ramp_bytes` (the protocols' ramp, which the alpha-beta model does
    not have), with noise; `gpn` GPUs per host, sizes from `min_bytes`; `bumps` multiplies the bandwidth of the
    sizes it names (a one-off row above the plateau, as real outputs have)."""
    n = hosts * gpn
    sizes = np.array([x for x in SIZES if x >= min_bytes], dtype=float)
    bandwidth = busbw_bytes_per_s * (1.0 - 0.6 * np.exp(-sizes / ramp_bytes))
    bandwidth *= np.array([(bumps or {}).get(int(x), 1.0) for x in sizes])
    times = (floor_s + sizes * bus_factor(op, n) / bandwidth) * (1.0 + noise * rng.standard_normal(len(sizes)))
    return _write_nccl_text(path, op, hosts, gpn, "NVIDIA H100 80GB HBM3", times, [int(x) for x in sizes])


def _write_nccl_text(path: Path, op: str, hosts: int, gpn: int, gpu: str, times: np.ndarray,
                     sizes: list[int] | None = None) -> Path:
    sizes = SIZES if sizes is None else sizes
    n = hosts * gpn
    lines = [f"# Collective test starting: {op}_perf",
             f"# nThread 1 nGpus 1 minBytes {sizes[0]} maxBytes {sizes[-1]} step: 2(factor) warmup iters: 5 "
             f"iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices",
             *_rank_lines(hosts, gpn, gpu), "#",
             "#                                                              out-of-place                       "
             "in-place          ",
             "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
             "busbw #wrong",
             "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
             "(GB/s)       "]
    redop = "sum" if op in ("all_reduce", "reduce_scatter") else "none"
    for size, t in zip(sizes, times, strict=True):
        count = size // 4 // (n if op in ("all_gather", "reduce_scatter") else 1)
        algbw = size / t / 1e9
        busbw = bus_bandwidth(op, n, size, t) / 1e9
        cols = f"{t * 1e6:8.2f} {algbw:7.2f} {busbw:7.2f}"
        lines.append(f"{size:12d} {count:13d}     float {redop:>7}      -1 {cols}      0 {cols}      0")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0", "#"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _args_block(overrides: dict[str, str]) -> list[str]:
    out = []
    for line in TEMPLATE.read_text().splitlines():
        name = line.split(" ", 3)[2] if line.startswith("  ") and " ..." in line else None
        if name in overrides:
            dots = line[line.index(name) + len(name):].rstrip().rsplit(" ", 1)[0]
            line = f"  {name}{dots} {overrides[name]}"
        out.append(line)
    return out


def write_log(path: Path, world: int, tp: int, mbs: int, gbs: int, seq: int, truth: dict[str, float],
              rng: np.random.Generator, noise: float, iterations: int = 10) -> Path:
    overrides = {"world_size": str(world), "data_parallel_size": str(world // tp),
                 "tensor_model_parallel_size": str(tp), "micro_batch_size": str(mbs), "global_batch_size": str(gbs),
                 "seq_length": str(seq), "max_position_embeddings": str(max(seq, 8192)),
                 "sequence_parallel": str(tp > 1)}
    head = _args_block(overrides)
    path.write_text("\n".join(head) + "\n" + _iterations([1.0, 1.0], gbs))
    (step,) = read_steps(path, CLUSTER)
    cluster = load_cluster(CLUSTER)
    topo = with_constants(run_topology(step.run, cluster, load_accelerator(cluster.accelerator)), truth)
    true_s = predict(step.run, step.model, topo).predicted_step_time_s
    assert true_s is not None, f"synthetic run {path.name} does not fit"
    measured = true_s * (1.0 + noise * rng.standard_normal())
    times = [measured * 1.3, *(measured * (1.0 + 0.002 * rng.standard_normal(iterations - 1)))]  # start-up first
    path.write_text("\n".join(head) + "\n" + _iterations(times, gbs))
    return path


def _iterations(times_s: list[float], gbs: int) -> str:
    lines = []
    for i, t in enumerate(times_s, start=1):
        lines.append(f" [2026-12-01 10:{i:02d}:00] iteration {i:8d}/{len(times_s):8d} | consumed samples: "
                     f"{i * gbs:12d} | elapsed time per iteration (ms): {t * 1e3:.1f} | learning rate: 3.000000E-04 | "
                     f"global batch size: {gbs:5d} | lm loss: 1.000000E+01 | loss scale: 1.0 | grad norm: 1.000 | "
                     f"number of skipped iterations:   0 | number of nan iterations:   0 |")
    return "\n".join(lines) + "\n"


def study(folder: Path, truth: dict[str, float] = TRUTH, noise: float = 0.03, seed: int = 0,
          steps: tuple = STEP_RUNS) -> tuple[list[Path], list[Path]]:
    """nccl-tests files and Megatron logs of one synthetic cluster, generated from `truth`."""
    rng = np.random.default_rng(seed)
    nccl = [write_nccl(folder / f"{op}_perf-{hosts}node.txt", op, hosts, truth, rng, noise)
            for op, hosts in NCCL_FILES]
    logs = [write_log(folder / f"megatron-{i}.log", *shape, truth, rng, noise) for i, shape in enumerate(steps)]
    return nccl, logs
