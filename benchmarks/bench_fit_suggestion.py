"""Time the GPU-count suggestion of a memory message: `_fits_on` against the whole search it stands for.

Usage: python benchmarks/bench_fit_suggestion.py [--repeats 3]

A plan that does not fit names the fewest GPUs (doubling) on which the search finds a layout that fits
(`placement.search._fitting_count`).  For each case below the script finds that count, then times, on that
count and on the count before it, `_fits_on` (the leanest layouts by memory floor, priced) and
`search(..., SearchConfig(top_k=1))`, and checks that they give the same answer.  One JSON line per count;
`seconds` is the fastest of --repeats wall times (time.perf_counter).
"""

from __future__ import annotations

import argparse
import json
import time

import yaml

from placement.catalog import load_accelerator, load_cluster, load_model, read_yaml
from placement.errors import PlacementInfeasible
from placement.search import SearchConfig, _fits_on, search
from placement.specs import ModelSpec, TrainingSpec
from placement.topology import Topology

CLUSTER, ACCELERATOR = "dgx-h100", "h100-sxm"


def _huge_vocab(tmp: str) -> ModelSpec:
    """DeepSeek-V3 with a 2^31 - 1 vocabulary: the fuzz input that ran 10.2 s on CI."""
    from pathlib import Path

    doc = yaml.safe_load((Path(__file__).parent.parent / "models" / "deepseek-v3.yaml").read_text())
    doc["vocab_size"] = 2**31 - 1
    path = Path(tmp) / "deepseek-v3-huge-vocab.yaml"
    path.write_text(yaml.safe_dump(doc))
    return read_yaml(path, ModelSpec, "model")


def _best_of(repeats: int, call, *args) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = call(*args)
        best = min(best, time.perf_counter() - start)
    return best, out


def _search_fits(model: ModelSpec, train: TrainingSpec, topo: Topology, cfg: SearchConfig) -> bool:
    try:
        search(model, train, topo, cfg)
        return True
    except PlacementInfeasible:
        return False


def main() -> None:
    import tempfile

    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cluster, accelerator = load_cluster(CLUSTER), load_accelerator(ACCELERATOR)
    with tempfile.TemporaryDirectory() as tmp:
        cases = [("llama3-405b", load_model("llama3-405b"), 8, TrainingSpec(seq_len=8192, global_batch=2048)),
                 ("deepseek-v3", load_model("deepseek-v3"), 8, TrainingSpec(seq_len=4096, global_batch=64)),
                 ("deepseek-v3 vocab 2^31-1", _huge_vocab(tmp), 8, TrainingSpec(seq_len=4096, global_batch=64))]
        cfg = SearchConfig(top_k=1)
        for name, model, start, train in cases:
            count = start
            while not _fits_on(model, train, Topology(cluster, accelerator, num_gpus=count), cfg):
                count *= 2
            for gpus in sorted({max(start, count // 2), count}):
                topo = Topology(cluster, accelerator, num_gpus=gpus)
                quick_s, quick = _best_of(args.repeats, _fits_on, model, train, topo, cfg)
                full_s, full = _best_of(args.repeats, _search_fits, model, train, topo, cfg)
                print(json.dumps({"case": name, "gpus": gpus, "fits": full, "same_answer": quick == full,
                                  "fits_on_seconds": round(quick_s, 3), "search_seconds": round(full_s, 3)}),
                      flush=True)


if __name__ == "__main__":
    main()
