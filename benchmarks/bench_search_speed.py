"""Time `placement.search.search` on five fixed cases, for comparing two trees of the code.

Usage: python benchmarks/bench_search_speed.py [--repeats 5] [--exhaustive] [--only NAME] [--out FILE]

The script uses only APIs that exist both before and after the recipe terms (commit faff3d7 and later):
`placement.catalog.load_model/load_cluster/load_accelerator`, `placement.topology.Topology`,
`placement.specs.TrainingSpec` and `placement.search.search/SearchConfig(top_k, prune_dominated)`.  So
it runs unchanged against an older tree put first on PYTHONPATH, e.g.

    mkdir -p /tmp/old && git archive faff3d7 | tar -x -C /tmp/old
    cd /tmp/old && PYTHONPATH=/tmp/old /work/main/.venv/bin/python /work/main/benchmarks/bench_search_speed.py

Each case runs `search(model, train, topo, SearchConfig(top_k=5))` once as a warm-up, then --repeats
times; `seconds` is the fastest wall time (time.perf_counter) and `cpu_s` the process CPU time of that
run.  One JSON line per case goes to stdout: name, seconds, num_candidates, the best step time and the
best layout (with its recompute module list where the tree has one).

--exhaustive also runs `SearchConfig(top_k=5, prune_dominated=False)`, the whole space with nothing
pruned as dominated, and reports whether its best plan (step time to 1e-9 s, layout and recompute
modules) equals the pruned search's (`exact_best`): the pruned search is exact when it does.  Its raw
top 5 (`same_raw_top5`) can differ by design: it also holds the pruned-out twins, e.g. selective
recompute on a layout that fits without it, which cost a little more than the layout they copy.
`exact_top5` therefore compares the pruned top 5 with the exhaustive ranking after dropping every plan
whose twin (the same layout with no recompute and SP on where tp > 1) fits and is at least as fast.

--plan-choices (trees with recipe choices only; null elsewhere) also times the space `placement plan`
searches when no recipe flag is given: `SearchConfig(top_k=5, choices=default_choices(...))`, which
prices every allowed MoE dispatcher, CUDA-graph scope and TP/EP overlap per candidate.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np

import placement
from placement.catalog import load_accelerator, load_cluster, load_model
from placement.search import SearchConfig, rank, search
from placement.specs import Precision, TrainingSpec
from placement.topology import Topology

CASES = [  # name, model, cluster, GPUs, seq, global batch, precision
    ("llama3-405b 16,384 dgx-h100", "llama3-405b", "dgx-h100", 16384, 8192, 2048, Precision.BF16),
    ("gpt3-175b 1,024 dgx-a100-80g", "gpt3-175b", "dgx-a100-80g", 1024, 2048, 1536, Precision.BF16),
    ("deepseek-v3 2,048 hgx-h800 fp8", "deepseek-v3", "hgx-h800", 2048, 4096, 15360, Precision.FP8),
    ("mixtral-8x22b 256 dgx-h100", "mixtral-8x22b", "dgx-h100", 256, 4096, 1024, Precision.BF16),
    ("qwen3-235b-a22b 256 gb200-nvl72", "qwen3-235b-a22b", "gb200-nvl72", 256, 4096, 8192, Precision.BF16),
]


def _plan(res, i: int) -> dict:
    """Step time and layout of candidate i, the recompute module list included where the tree has one."""
    layout = res.batch.layout(i).model_dump(mode="json")
    if hasattr(res.batch, "modules"):
        layout["recompute_modules"] = [str(m) for m in res.batch.modules(i)]
    return {"step_time_s": round(float(res.estimates.step_time_s[i]), 9), "layout": layout}


def _short(layout: dict) -> str:
    text = (f"tp{layout['tp']} cp{layout['cp']} ep{layout['ep']} etp{layout['etp']} pp{layout['pp']} "
            f"vpp{layout['vpp']} dp{layout['dp']} mbs{layout['micro_batch_size']} z{layout['zero_stage']}")
    if layout.get("dp_shard"):
        text += f" shard{layout['dp_shard']}"
    text += f" rc-{layout['recompute']}"
    if layout.get("recompute_modules"):
        text += "(" + "+".join(layout["recompute_modules"]) + ")"
    return text + (" sp" if layout["sequence_parallel"] else "")


def _twin(plan: dict) -> str:
    lay = dict(plan["layout"], recompute="none", sequence_parallel=plan["layout"]["tp"] > 1)
    lay.pop("recompute_modules", None)
    return json.dumps(lay, sort_keys=True)


def _key(plan: dict) -> str:
    lay = dict(plan["layout"])
    if not lay.get("recompute_modules"):
        lay.pop("recompute_modules", None)
    return json.dumps(lay, sort_keys=True)


def _undominated_top(full, k: int) -> list[dict]:
    """The exhaustive ranking without plans whose twin fits and is at least as fast (first k)."""
    n = 50
    while True:
        idx = rank(full.batch, full.estimates, full.estimates.valid & full.estimates.fits, n)
        plans = [_plan(full, int(i)) for i in idx]
        step = {_key(p): p["step_time_s"] for p in plans}
        kept = [p for p in plans if _twin(p) == _key(p) or not step.get(_twin(p), np.inf) <= p["step_time_s"]]
        if len(kept) >= k or len(idx) < n:
            return kept[:k]
        n *= 4


def _timed(model, train, topo, cfg, repeats: int):
    res = search(model, train, topo, cfg)  # warm-up
    best_wall, best_cpu = float("inf"), None
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        res = search(model, train, topo, cfg)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        if wall < best_wall:
            best_wall, best_cpu = wall, cpu
    return res, best_wall, best_cpu


def _plan_config(model, topo):
    """What `placement plan` searches with no recipe flags, where the tree has recipe choices; else None."""
    try:
        from placement.cost.step import default_choices
        from placement.specs.recipe import Recipe
    except ImportError:
        return None
    return SearchConfig(top_k=5, choices=default_choices(model.is_moe, topo, Recipe()))


def run_case(name, model_name, cluster_name, gpus, seq, gbs, precision, repeats: int, exhaustive: bool,
             plan_choices: bool = False, default_split: bool = False, old_bounds: bool = False) -> dict:
    model, cluster = load_model(model_name), load_cluster(cluster_name)
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=gpus)
    train = TrainingSpec(seq_len=seq, global_batch=gbs, precision=precision)
    # --default-split: the pipeline split pinned to Megatron's default, as before the split search existed
    pinned = {"pipeline_policies": (0,)} if default_split and "pipeline_policies" in SearchConfig.__dataclass_fields__ \
        else {}
    if old_bounds and "max_vpp" in SearchConfig.__dataclass_fields__:  # the space before the bounds were lifted
        pinned.update(max_vpp=8, max_micro_batch_size=16, max_tp=64, max_cp=32)
    res, wall, cpu = _timed(model, train, topo, SearchConfig(top_k=5, **pinned), repeats)
    best = _plan(res, int(res.ranked[0]))
    row = {"name": name, "seconds": round(wall, 4), "cpu_s": round(cpu, 4), "num_candidates": res.num_candidates,
           "num_enumerated": getattr(res, "num_enumerated", None),
           "fitting": int((res.estimates.valid & res.estimates.fits).sum()),
           "best_step_time_s": best["step_time_s"], "best_layout": _short(best["layout"]),
           "best_layout_fields": best["layout"]}
    if plan_choices:
        cfg = _plan_config(model, topo)
        row.update(dict.fromkeys(("plan_choices_seconds", "plan_choices_num_candidates",
                                  "plan_choices_best_step_time_s", "plan_choices_best_layout")))
        if cfg is not None:
            pres, pwall, _ = _timed(model, train, topo, cfg, repeats)
            pbest = _plan(pres, int(pres.ranked[0]))
            row.update({"plan_choices_seconds": round(pwall, 4), "plan_choices_num_candidates": pres.num_candidates,
                        "plan_choices_num_enumerated": getattr(pres, "num_enumerated", None),
                        "plan_choices_best_step_time_s": pbest["step_time_s"],
                        "plan_choices_best_layout": _short(pbest["layout"])})
    if exhaustive:
        full, fwall, fcpu = _timed(model, train, topo, SearchConfig(top_k=5, prune_dominated=False),
                                   max(1, repeats // 2))
        fbest = _plan(full, int(full.ranked[0]))
        top, ftop = [_plan(res, int(i)) for i in res.ranked], [_plan(full, int(i)) for i in full.ranked]
        row.update({"exhaustive_seconds": round(fwall, 4), "exhaustive_cpu_s": round(fcpu, 4),
                    "exhaustive_num_candidates": full.num_candidates,
                    "exhaustive_best_step_time_s": fbest["step_time_s"],
                    "exhaustive_best_layout": _short(fbest["layout"]),
                    "exact_best": fbest == best, "same_raw_top5": ftop == top,
                    "exact_top5": _undominated_top(full, len(top)) == top})
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--exhaustive", action="store_true", help="also run prune_dominated=False and compare")
    ap.add_argument("--plan-choices", action="store_true",
                    help="also time the recipe-choice space `placement plan` searches (new trees)")
    ap.add_argument("--only", action="append", default=[], help="run only cases whose name contains this")
    ap.add_argument("--default-split", action="store_true",
                    help="pin the pipeline split to Megatron's default (trees that search it; others ignore it)")
    ap.add_argument("--old-bounds", action="store_true",
                    help="search the space of the older trees: vpp <= 8, micro-batch <= 16, tp <= 64, cp <= 32 "
                         "(trees that lift those bounds; others ignore it)")
    ap.add_argument("--out", help="also append the JSON lines (with a header line) to this file")
    args = ap.parse_args(argv)
    header = {"tree": placement.__file__, "python": platform.python_version(), "numpy": np.__version__,
              "repeats": args.repeats, "argv": sys.argv[1:], "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    lines = [header]
    print(json.dumps(header), flush=True)
    for case in CASES:
        if args.only and not any(s in case[0] for s in args.only):
            continue
        row = run_case(*case, repeats=args.repeats, exhaustive=args.exhaustive, plan_choices=args.plan_choices,
                       default_split=args.default_split, old_bounds=args.old_bounds)
        lines.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(x) + "\n" for x in lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
