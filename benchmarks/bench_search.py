"""Time the exact layout search: GPT-3 175B on 1,024 `dgx-a100-80g` GPUs (issue 7, speed).

Usage: python benchmarks/bench_search.py [--out benchmarks/search_results.json] [--runs 7] [--cold-runs 3]

The workload is the one in Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM" (arXiv:2104.04473): GPT-3 175B, sequence 2048, global batch 1536.  Two
search spaces are timed:

- default: what `placement plan` searches (ZeRO 1-3; selective recompute under flash attention and SP
  off with tp > 1 left out as dominated, see `SearchConfig.prune_dominated`);
- full: ZeRO 0-3, recompute none/selective/full, SP on and off (`SearchConfig(zero_stages=(0, 1, 2, 3),
  prune_dominated=False)`): nothing is left out but layouts that are not valid.

For each: the raw cross product of the knobs (counted below, before any rule), the layouts enumerated
and priced, the warm search time (median of --runs in one process, after one warm-up) and the cold
time from process start to the JSON on stdout (median of --cold-runs fresh processes).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from datetime import date

import numpy as np

from placement.catalog import load_accelerator, load_cluster, load_model
from placement.search import SearchConfig, _divisors, search
from placement.specs import TrainingSpec
from placement.topology import Topology

MODEL, CLUSTER, GPUS, SEQ, GBS = "gpt3-175b", "dgx-a100-80g", 1024, 2048, 1536
PEER_CANDIDATES_PER_S = 140.0
"""The issue's reference: an analytical peer that prices one candidate at a time, on this machine."""

SPACES = {  # name -> (config, the same config as source for the cold process)
    "default": (SearchConfig(), "SearchConfig()"),
    "full": (SearchConfig(zero_stages=(0, 1, 2, 3), prune_dominated=False),
             "SearchConfig(zero_stages=(0, 1, 2, 3), prune_dominated=False)"),
}

COLD = """
import json, sys, time
t0 = time.perf_counter()
from placement.catalog import load_accelerator, load_cluster, load_model
from placement.search import SearchConfig, search
from placement.specs import TrainingSpec
from placement.topology import Topology
model, cluster = load_model({model!r}), load_cluster({cluster!r})
topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus={gpus})
res = search(model, TrainingSpec(seq_len={seq}, global_batch={gbs}), topo, {cfg})
best = int(res.ranked[0])
print(json.dumps({{"candidates": res.num_candidates, "search_s": res.seconds,
                  "step_time_s": float(res.estimates.step_time_s[best]),
                  "layout": res.batch.layout(best).model_dump(mode="json"),
                  "in_process_s": time.perf_counter() - t0}}))
"""


def raw_space(cfg: SearchConfig, zero_stages: int, recompute_modes: int, sp_modes: int) -> dict:
    """The cross product of every knob over its whole range, before any rule: tp, cp, pp and dp each over
    every divisor of the GPU count (independently, so their product need not be the GPU count), vpp
    1..the model's layers, micro-batch over the divisors of the global batch (or up to the config's bounds),
    and the ZeRO, recompute and SP choices."""
    d = len(_divisors(GPUS))
    vpp = cfg.max_vpp or load_model(MODEL).num_layers
    mbs = len([m for m in _divisors(GBS) if m <= (cfg.max_micro_batch_size or GBS)])
    issue_knobs = d ** 3 * vpp * zero_stages * mbs * recompute_modes * sp_modes  # tp, pp, dp x the rest
    with_cp = issue_knobs * d
    with_hsdp = with_cp * d  # ZeRO-3 shard degree, also any divisor
    # degree tuples whose product is the GPU count (the first rule): compositions of 2^10 into 4 factors
    exponent = int(math.log2(GPUS))
    tuples_product = math.comb(exponent + 3, 3)
    return {
        "divisors_of_gpus": d,
        "issue_knobs": issue_knobs,
        "issue_knobs_formula": f"tp {d} x pp {d} x dp {d} x vpp {vpp} x zero {zero_stages} x mbs {mbs} x "
                               f"recompute {recompute_modes} x sp {sp_modes}",
        "with_cp": with_cp,
        "with_cp_and_hsdp_shard": with_hsdp,
        "with_cp_degree_product_is_gpus": tuples_product * vpp * zero_stages * mbs * recompute_modes * sp_modes,
    }


def dominance(res) -> dict:
    """Each option the default search leaves out, against its twin that differs only in that knob (ZeRO-0
    vs ZeRO-1, SP off vs on, selective vs no recompute): how many candidates of the full space have such a
    twin, and how many are faster or smaller than it (0 means leaving them out cannot lose the optimum)."""
    b, e = res.batch, res.estimates
    # a space over search.PRICE_CHUNK_ROWS is priced in chunks and only its best are kept: not the whole space
    assert len(b) == res.num_candidates, "the full space was priced in chunks; raise search.PRICE_CHUNK_ROWS"
    fields = {"tp": b.tp, "cp": b.cp, "ep": b.ep, "etp": b.etp, "pp": b.pp, "vpp": b.vpp, "dp": b.dp,
              "mbs": b.mbs, "zero": b.zero, "dp_shard": b.dp_shard, "recompute": b.recompute, "sp": b.sp}
    out = {}
    for name, knob, dropped, kept in (("zero0_vs_zero1", "zero", 0, 1), ("sp_off_vs_on", "sp", 0, 1),
                                      ("selective_vs_none", "recompute", 1, 0)):
        others = np.stack([v for k, v in fields.items() if k != knob], axis=1)
        twin = {tuple(row): i for i, row in zip(np.flatnonzero(fields[knob] == kept),
                                                others[fields[knob] == kept].tolist(), strict=True)}
        pairs = [(i, twin[tuple(row)]) for i, row in zip(np.flatnonzero(fields[knob] == dropped),
                                                         others[fields[knob] == dropped].tolist(), strict=True)
                 if tuple(row) in twin]
        a, k = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
        better = ((e.step_time_s[a] < e.step_time_s[k] * (1 - 1e-12))
                  | (e.peak_memory_bytes[a] < e.peak_memory_bytes[k] * (1 - 1e-12))) & e.valid[a]
        out[name] = {"pairs": len(pairs), "dropped_faster_or_smaller": int(better.sum())}
    return out


def warm(model, train, topo, cfg: SearchConfig, runs: int) -> dict:
    search(model, train, topo, cfg)  # warm-up: imports, caches, page faults
    wall, cpu = [], []
    for _ in range(runs):
        c0 = time.process_time()
        res = search(model, train, topo, cfg)
        cpu.append(time.process_time() - c0)
        wall.append(res.seconds)
    est = res.estimates
    best = int(res.ranked[0])
    return {
        "candidates": res.num_candidates,
        "valid_and_fit": int((est.valid & est.fits).sum()),
        "warm_median_s": round(statistics.median(wall), 4),
        "warm_min_s": round(min(wall), 4),
        "warm_max_s": round(max(wall), 4),
        "warm_cpu_median_s": round(statistics.median(cpu), 4),
        "candidates_per_s": round(res.num_candidates / statistics.median(wall)),
        "speedup_vs_peer": round(res.num_candidates / statistics.median(wall) / PEER_CANDIDATES_PER_S),
        "best_step_time_s": float(est.step_time_s[best]),
        "best_layout": res.batch.layout(best).model_dump(mode="json"),
        **({} if cfg.prune_dominated else {"dominance": dominance(res)}),
    }


def timed_child(args: list[str]) -> tuple[float, float, str]:
    """Wall and CPU (user + system) seconds of one child process, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def cold(cfg_src: str, runs: int) -> dict:
    code = COLD.format(model=MODEL, cluster=CLUSTER, gpus=GPUS, seq=SEQ, gbs=GBS, cfg=cfg_src)
    walls, cpus, searches, imports = [], [], [], []
    for _ in range(runs):
        wall, cpu, stdout = timed_child([sys.executable, "-c", code])
        last = json.loads(stdout)
        walls.append(wall)
        cpus.append(cpu)
        searches.append(last["search_s"])
        imports.append(last["in_process_s"] - last["search_s"])
    return {"cold_median_s": round(statistics.median(walls), 3), "cold_runs_s": [round(w, 3) for w in walls],
            "cold_cpu_median_s": round(statistics.median(cpus), 3),
            "cold_search_median_s": round(statistics.median(searches), 4),
            "cold_imports_and_load_median_s": round(statistics.median(imports), 3),
            "cold_candidates": last["candidates"]}


def cold_cli(runs: int) -> dict:
    """`placement plan` itself (ZeRO 0-3 allowed; the CLI keeps the dominated-option pruning), mapping and
    rank table of the 1,024 GPUs included."""
    args = [sys.executable, "-m", "placement.cli", "plan", "--model", MODEL, "--cluster", CLUSTER,
            "--gpus", str(GPUS), "--seq-len", str(SEQ), "--global-batch", str(GBS), "--json", "--top-k", "1",
            "--zero", "0", "--zero", "1", "--zero", "2", "--zero", "3"]
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu, stdout = timed_child(args)
        walls.append(wall)
        cpus.append(cpu)
        data = json.loads(stdout)
    return {"command": " ".join(["placement", *args[3:]]), "cold_median_s": round(statistics.median(walls), 3),
            "cold_runs_s": [round(w, 3) for w in walls], "cold_cpu_median_s": round(statistics.median(cpus), 3),
            "candidates": data["search"]["candidates"], "step_time_s": data["plans"][0]["step_time_s"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/search_results.json")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--cold-runs", type=int, default=3)
    args = parser.parse_args()

    model, cluster = load_model(MODEL), load_cluster(CLUSTER)
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=GPUS)
    train = TrainingSpec(seq_len=SEQ, global_batch=GBS)
    out = {
        "date": date.today().isoformat(), "python": platform.python_version(), "numpy": np.__version__,
        "cpus": os.cpu_count(), "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "case": {"model": MODEL, "cluster": CLUSTER, "gpus": GPUS, "seq_len": SEQ, "global_batch": GBS},
        "peer_candidates_per_s": PEER_CANDIDATES_PER_S, "spaces": {},
    }
    for name, (cfg, src) in SPACES.items():
        row = {"config": src,
               "raw": raw_space(cfg, zero_stages=len(cfg.zero_stages), recompute_modes=len(cfg.recompute),
                                sp_modes=1 if cfg.prune_dominated else 2)}
        row.update(warm(model, train, topo, cfg, args.runs))
        row.update(cold(src, args.cold_runs))
        out["spaces"][name] = row
        print(json.dumps({name: row}), flush=True)
    d, f = out["spaces"]["default"], out["spaces"]["full"]
    out["same_optimum"] = d["best_layout"] == f["best_layout"] and d["best_step_time_s"] == f["best_step_time_s"]
    out["cli"] = cold_cli(args.cold_runs)
    print(json.dumps({"cli": out["cli"], "same_optimum": out["same_optimum"]}), flush=True)
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
