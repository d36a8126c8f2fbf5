"""Degenerate and huge jobs (issue #7): one GPU, a prime GPU count, a one-layer model, a million GPUs.

Each ends in a plan whose numbers hold together, or in a refusal that names the binding constraint with its
numbers (exit 1) or the bad value and the limit (exit 2), in bounded time.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from placement.cli import main
from placement.topology import MAX_GPUS

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"

MILLION_TIMEOUT_S = 120
"""Budget of one million-GPU command in a subprocess (measured on 2 cores: about 1 s to refuse, 4 s to plan)."""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--reproducible", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def run_process(*args: str) -> tuple[int, str, str, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "placement.cli", "--reproducible", *args], capture_output=True,
                          text=True, timeout=MILLION_TIMEOUT_S, check=False)
    return proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - start


def plans_of(out: str) -> list[dict]:
    plans = json.loads(out)["plans"]
    assert plans
    for p in plans:
        lay = p["layout"]
        assert lay["tp"] * lay["cp"] * lay["pp"] * lay["dp"] == p["num_gpus"]
        assert p["fits"] and 0 < p["peak_memory_bytes"] <= p["memory_capacity_bytes"]
        assert p["step_time_s"] > 0 and 0 < p["mfu"] < 1
    return plans


def write_model(tmp_path: Path, **fields) -> Path:
    spec = {"name": "one-layer", "num_layers": 1, "hidden_size": 1024, "ffn_hidden_size": 4096,
            "num_attention_heads": 16, "num_kv_heads": 4, "vocab_size": 32000, "default_seq_len": 2048,
            "default_global_batch": 64} | fields
    path = tmp_path / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


# --- one GPU ---------------------------------------------------------------------------------------


def test_one_gpu_small_model_plans_with_every_degree_one() -> None:
    code, out, err = run("plan", "--model", "megatron-gpt-1.7b", "--gpus", "1", "--json")
    assert code == 0, err
    for p in plans_of(out):
        lay = p["layout"]
        assert (lay["tp"], lay["cp"], lay["ep"], lay["pp"], lay["dp"], p["num_gpus"]) == (1, 1, 1, 1, 1, 1)
        assert lay["micro_batch_size"] * lay["num_microbatches"] == p["global_batch"]
        assert [(m["rank"], m["local_gpu"]) for m in p["mapping"]] == [(0, 0)]


def test_one_gpu_too_small_exits_1_with_the_numbers_and_a_count_that_fits() -> None:
    code, _, err = run("plan", "--model", "llama3-8b", "--gpus", "1")
    assert code == 1
    match = re.search(r"infeasible \(memory\): .* needs ([\d.]+) GiB per GPU \(weights\+grads\+optimizer ([\d.]+), "
                      r".*capacity ([\d.]+) GiB; try --gpus (\d+)", err)
    assert match, err
    need, states, capacity, suggested = float(match[1]), float(match[2]), float(match[3]), int(match[4])
    # 8.0e9 parameters x 16 bytes (bf16 weights and grads, fp32 master and Adam) = 119.7 GiB on one GPU
    assert states == pytest.approx(8.03e9 * 16 / 2**30, rel=0.01)
    assert need > capacity
    code, _, err = run("plan", "--model", "llama3-8b", "--gpus", str(suggested))
    assert code == 0, f"the suggested --gpus {suggested} has no plan either: {err}"


def test_one_gpu_evaluate_reports_the_overflow() -> None:
    code, out, _ = run("evaluate", "--model", "llama3-8b", "--gpus", "1", "--json")
    assert code == 1
    result = json.loads(out)
    assert result["num_gpus"] == 1 and not result["fits"]
    assert result["peak_memory_bytes"] > result["memory_capacity_bytes"]


# --- a prime GPU count -----------------------------------------------------------------------------


def test_seven_gpus_on_a_partial_node() -> None:
    """7 is prime: one degree carries all of it.  The 32 heads and the batch of 512 rule out tp 7 and dp 7,
    so the plan is a 7-stage pipeline over 32 layers (uneven stages)."""
    code, out, err = run("plan", "--model", "llama3-8b", "--gpus", "7", "--json")
    assert code == 0, err
    for p in plans_of(out):
        lay = p["layout"]
        assert lay["pp"] == 7 and lay["tp"] == lay["cp"] == lay["dp"] == 1
        stages = p["layout"]["stage_layers"]
        assert stages[0] + 5 * stages[1] + stages[2] == 32
    code, out, err = run("plan", "--model", "llama3-8b", "--gpus", "7", "--global-batch", "448", "--json")
    assert code == 0, err
    assert any(p["layout"]["dp"] == 7 for p in plans_of(out))  # 448 = 64 x 7: data parallelism opens up


def test_prime_count_of_8_gpu_nodes_is_refused_with_the_neighbours() -> None:
    code, _, err = run("plan", "--model", "llama3-8b", "--gpus", "131")
    assert code == 2
    assert "--gpus 131 is not a whole number of dgx-h100 nodes (8 GPUs each); use 128 or 136" in err


def test_131_single_gpu_nodes(tmp_path: Path) -> None:
    """A cluster of one-GPU hosts: 131 GPUs are 131 whole nodes, and 131 is prime."""
    spec = yaml.safe_load((ROOT / "hardware" / "clusters" / "dgx-h100.yaml").read_text())
    spec |= {"name": "h100-single", "gpus_per_node": 1, "default_num_gpus": 131}
    spec["scale_up"]["size"] = 1
    cluster = tmp_path / "h100-single.yaml"
    cluster.write_text(yaml.safe_dump(spec))
    code, _, err = run("plan", "--model", "llama3-8b", "--cluster", str(cluster))
    assert code == 1
    assert "infeasible (divisibility): no layout of llama3-8b splits over 131 GPUs with global batch 512" in err
    assert "try --gpus 128 or --gpus 256" in err
    code, out, err = run("plan", "--model", "llama3-8b", "--cluster", str(cluster), "--global-batch", "524", "--json")
    assert code == 0, err
    for p in plans_of(out):  # 131 fits neither the 32 heads, nor the 32 layers, nor 8192 / 2: dp takes it
        assert p["layout"]["dp"] == 131 and p["num_gpus"] == 131


# --- a one-layer model -----------------------------------------------------------------------------


@pytest.mark.parametrize("moe", [None, {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 1024}],
                         ids=["dense", "moe"])
def test_one_layer_model_plans_without_pipeline(tmp_path: Path, moe: dict | None) -> None:
    model = write_model(tmp_path, **({"moe": moe} if moe else {}))
    out_dir = tmp_path / "out"
    code, out, err = run("plan", "--model", str(model), "--gpus", "64", "--json", "--emit", "all", "--out",
                         str(out_dir))
    assert code == 0, err
    for p in plans_of(out):
        assert p["layout"]["pp"] == 1 and p["layout"]["vpp"] == 1
        assert p["layout"]["stage_layers"] == [1]
        assert p["breakdown"]["bubble"] == 0
    assert (out_dir / "megatron.sh").is_file() and (out_dir / "torchtitan.sh").is_file()
    assert "--num-layers 1" in (out_dir / "megatron.sh").read_text()


def test_one_layer_model_cannot_be_pipelined(tmp_path: Path) -> None:
    code, _, err = run("evaluate", "--model", str(write_model(tmp_path)), "--gpus", "8", "--pp", "2")
    assert code == 2
    assert "--pp 2" in err and "every stage needs a layer" in err


def test_one_layer_model_on_one_host_of_a_slurm_tree(tmp_path: Path) -> None:
    code, out, err = run("plan", "--model", str(write_model(tmp_path)), "--slurm-topology",
                         str(DATA / "slurm" / "tree-5leaf.conf"), "--nodelist", "gpu0001", "--node-type", "dgx-h100",
                         "--json")
    assert code == 0, err
    for p in plans_of(out):
        assert p["num_gpus"] == 8 and {m["host"] for m in p["mapping"]} == {"gpu0001"}


# --- a million GPUs --------------------------------------------------------------------------------


def test_a_million_gpus_with_the_default_batch_is_refused_by_divisibility() -> None:
    code, _, err, seconds = run_process("plan", "--model", "llama3-8b", "--gpus", "1000000")
    assert code == 1, err
    assert "infeasible (divisibility): no layout of llama3-8b splits over 1000000 GPUs with global batch 512" in err
    assert "try --gpus 524288 or --gpus 1048576" in err
    print(f"--gpus 1000000, batch 512: refused in {seconds:.1f} s")


def test_a_million_gpus_with_a_matching_batch_plans_in_bounded_time() -> None:
    code, out, err, seconds = run_process("plan", "--model", "llama3-8b", "--gpus", "1000000", "--global-batch",
                                          "1000000")
    assert code == 0, err
    assert out.startswith("llama3-8b on 1000000 x h100-sxm (dgx-h100), seq 8192, global batch 1000000")
    layout = re.search(r"layout: tp(\d+) cp(\d+) pp(\d+)\S* dp(\d+)", out)
    assert layout, out
    assert int(layout[1]) * int(layout[2]) * int(layout[3]) * int(layout[4]) == 1_000_000
    print(f"--gpus 1000000, batch 1000000: planned in {seconds:.1f} s")


@pytest.mark.parametrize("flags", [["--gpus", str(2 * MAX_GPUS)], ["--nodes", str(MAX_GPUS // 8 + 1)],
                                   ["--gpus", str(10**20)]], ids=["2x-limit", "nodes-past-limit", "1e20"])
def test_past_the_gpu_limit_is_refused_naming_it(flags: list[str]) -> None:
    start = time.perf_counter()
    code, _, err = run("plan", "--model", "llama3-8b", *flags)
    assert code == 2
    assert f"more than the {MAX_GPUS:,} placement plans" in err and flags[1] in err
    assert time.perf_counter() - start < 10


def test_a_partial_node_writes_no_gpu_reordering(tmp_path: Path) -> None:
    """7 GPUs of one 8-GPU node in their own order: the launch files say so, and no CUDA_VISIBLE_DEVICES
    file claims a permutation that is not there."""
    code, _, err = run("plan", "--model", "llama3-8b", "--gpus", "7", "--out", str(tmp_path))
    assert code == 0, err
    assert (tmp_path / "rankfile").exists() and not (tmp_path / "cuda_visible_devices.txt").exists()
    ranks = [x for x in (tmp_path / "rankfile").read_text().splitlines() if x.startswith("rank")]
    assert ranks == [f"rank {r}=host0 slot={r}" for r in range(7)]


def test_above_the_table_limit_only_the_best_plan_carries_its_rank_table(monkeypatch) -> None:
    """Huge clusters: the JSON keeps the best plan's rank table and says where the others' are."""
    import placement.planner as planner

    monkeypatch.setattr(planner, "RANK_TABLES_FOR_EVERY_PLAN_MAX_GPUS", 32)
    code, out, err = run("plan", "--model", "llama3-8b", "--gpus", "64", "--top-k", "3", "--json")
    assert code == 0, err
    plans = plans_of(out)
    assert len(plans) == 3 and len(plans[0]["mapping"]) == 64
    for k, p in enumerate(plans[1:], start=2):
        assert p["mapping"] is None and f"--plan-index {k}" in p["mapping_solver"]["rank_table"]
    monkeypatch.setattr(planner, "RANK_TABLES_FOR_EVERY_PLAN_MAX_GPUS", 64)
    code, out, _ = run("plan", "--model", "llama3-8b", "--gpus", "64", "--top-k", "3", "--json")
    assert all(len(p["mapping"]) == 64 for p in plans_of(out))
