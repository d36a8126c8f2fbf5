"""`placement plan` on a real allocation: SLURM topology + host list, the mapping contract, files."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

DATA = Path(__file__).parent / "data"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_plan_on_slurm_allocation_writes_mapping_and_files(tmp_path):
    hosts = tmp_path / "hosts.txt"
    # a partial allocation: 20 hosts from three leaves, listed out of order
    hosts.write_text("\n".join(["gpu0040", "gpu0002", "gpu0003", "gpu0001", "gpu[0103-0110]", "gpu[0041-0048]"]) + "\n")
    out = tmp_path / "launch"
    code, stdout, stderr = run(
        "plan", "--model", "mixtral-8x7b", "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"),
        "--nodelist", f"@{hosts}", "--node-type", "dgx-h100", "--oversubscription", "2",
        "--seq-len", "4096", "--global-batch", "160", "--top-k", "2", "--json", "--out", str(out))
    assert code == 0, stderr
    data = json.loads(stdout)
    best = data["plans"][0]
    assert best["num_gpus"] == 160
    mapping = best["mapping"]
    assert [m["rank"] for m in mapping] == list(range(160))
    assert {m["host"] for m in mapping} == {f"gpu{i:04d}" for i in [40, 2, 3, 1, *range(103, 111), *range(41, 49)]}
    assert {(m["host"], m["local_gpu"]) for m in mapping} == {(m["host"], g) for m in mapping for g in range(8)}
    assert set(mapping[0]["coords"]) >= {"tp", "cp", "dp", "pp", "ep", "etp", "edp"}
    assert set(best["baselines"]) == {"allocation_order", "megatron_order"}
    assert best["step_time_s"] <= min(b["step_time_s"] for b in best["baselines"].values()) + 1e-9
    solver = best["mapping_solver"]
    assert solver["status"] in ("OPTIMAL", "FEASIBLE") and solver["solver"].startswith("ortools")
    assert solver["bound_s"] <= solver["objective_s"] + 1e-6
    steps = [p["step_time_s"] for p in data["plans"]]
    assert steps == sorted(steps)  # re-ranked by mapped cost
    # launch files follow the mapping
    order = [line.split() for line in (out / "hosts.txt").read_text().splitlines() if line and line[0] != "#"]
    assert [int(k) for k, _ in order] == list(range(20))
    assert [h for _, h in order] == [mapping[8 * k]["host"] for k in range(20)]
    tasks = [x for x in (out / "slurm.hostfile").read_text().splitlines() if x and x[0] != "#"]
    assert tasks == [m["host"] for m in mapping]
    assert "wrote" in stderr


def test_same_allocation_twice_gives_identical_plans(tmp_path):
    args = ["plan", "--model", "llama3-70b", "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"),
            "--nodelist", "gpu[0030-0045]", "--node-type", "dgx-h100", "--seq-len", "8192", "--global-batch", "64",
            "--top-k", "2", "--json", "--oversubscription", "8"]  # oversubscribed: the plans need a CP-SAT solve
    first, second = run(*args), run(*args)
    assert first[0] == second[0] == 0
    plans = [json.loads(out[1])["plans"] for out in (first, second)]
    for ps in plans:  # wall-clock time is provenance, not part of the answer
        for p in ps:
            assert p["mapping_solver"]["status"] != "SKIPPED"
            assert p["mapping_solver"].pop("wall_s") >= 0
    assert plans[0] == plans[1]
    assert json.dumps(plans[0][0]["mapping"]) == json.dumps(plans[1][0]["mapping"])


def test_node_topo_prices_pcie_nodes_slower():
    base = ["plan", "--model", "llama3-8b", "--cluster", "dgx-a100-80g", "--gpus", "8", "--seq-len", "4096",
            "--global-batch", "64", "--top-k", "1", "--json"]
    nvswitch = json.loads(run(*base)[1])["plans"][0]
    pcie = json.loads(run(*base, "--node-topo", str(DATA / "nvsmi" / "pcie-8x4090.txt"))[1])["plans"][0]
    same = json.loads(run(*base, "--node-topo", str(DATA / "nvsmi" / "a100-dgx.txt"))[1])["plans"][0]
    assert pcie["step_time_s"] > nvswitch["step_time_s"]
    assert same["step_time_s"] == nvswitch["step_time_s"]


def test_real_allocation_input_errors(tmp_path):
    topo = str(DATA / "slurm" / "tree-5leaf.conf")
    code, _, err = run("plan", "--model", "llama3-8b", "--slurm-topology", topo, "--node-type", "dgx-h100")
    assert code == 2 and "--nodelist is required" in err
    code, _, err = run("plan", "--model", "llama3-8b", "--slurm-topology", topo, "--nodelist", "gpu[0001-0002]")
    assert code == 2 and "--node-type is required" in err
    code, _, err = run("plan", "--model", "llama3-8b", "--slurm-topology", topo, "--nodelist", "gpu[0001-0002],nope7",
                       "--node-type", "dgx-h100")
    assert code == 2 and "nope7" in err and "not in the topology" in err
    code, _, err = run("plan", "--model", "llama3-8b", "--nodelist", "gpu[0001-0002]")
    assert code == 2 and "--nodelist goes with --slurm-topology" in err
    # a --gpus that is not the allocation's size is refused with both counts; the same size is redundant, accepted
    code, _, err = run("plan", "--model", "llama3-8b", "--slurm-topology", topo, "--nodelist", "gpu[0001-0002]",
                       "--node-type", "dgx-h100", "--gpus", "32")
    assert code == 2 and "--gpus 32: the allocation has 2 hosts and 16 GPUs" in err
    code, _, err = run("plan", "--model", "llama3-8b", "--slurm-topology", topo, "--nodelist", "gpu[0001-0002]",
                       "--node-type", "dgx-h100", "--gpus", "16", "--nodes", "2", "--global-batch", "64")
    assert code == 0, err
    code, _, err = run("plan", "--model", "llama3-8b", "--cluster", "gb200-nvl72", "--gpus", "72", "--node-topo",
                       str(DATA / "nvsmi" / "h100-hgx.txt"))
    assert code == 2 and "8 GPUs but a gb200-nvl72 node has 4" in err


def test_bridged_pairs_get_tp_groups_and_cuda_visible_devices(tmp_path):
    from placement.catalog import load_accelerator, load_cluster, load_model
    from placement.loaders.nvidia_smi import load_topo_matrix
    from placement.mapping.report import write_launch_files
    from placement.planner import plan_job
    from placement.search import SearchConfig
    from placement.specs import TrainingSpec
    from placement.topology import Topology

    cluster = load_cluster("dgx-a100-80g")
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=16).with_node_topo(
        load_topo_matrix(DATA / "nvsmi" / "pcie-8x-nvbridge-pairs.txt"))
    planned = plan_job(load_model("llama3-8b"), TrainingSpec(seq_len=4096, global_batch=64), topo,
                       SearchConfig(top_k=1, fixed={"tp": 2, "pp": 1, "cp": 1}), None)
    table = planned.plans[0].mapping
    pairs = {(table[r]["local_gpu"], table[r + 1]["local_gpu"]) for r in range(0, 16, 2)}
    assert pairs == {(0, 4), (1, 5), (2, 6), (3, 7)}  # every TP pair on a bridged pair
    files = {p.name: p for p in write_launch_files(tmp_path, topo, planned.gpu_of_rank[0], "t")}
    lines = [x for x in files["cuda_visible_devices.txt"].read_text().splitlines() if x and x[0] != "#"]
    assert lines == ["host0 CUDA_VISIBLE_DEVICES=0,4,1,5,2,6,3,7", "host1 CUDA_VISIBLE_DEVICES=0,4,1,5,2,6,3,7"]
    assert _from_compact(planned.plans[0].mapping_compact, 16) == [(r["host"], r["local_gpu"]) for r in table]


def _from_compact(compact: dict, num_gpus: int) -> list[tuple[str, int]]:
    """(host, local GPU) of every rank, as a script reads mapping_compact."""
    g = compact["gpus_per_host"]
    out = []
    for r in range(num_gpus):
        host = compact["host_order"][r // g]
        out.append((host, compact["local_gpu_order"].get(host, list(range(g)))[r % g]))
    return out


def test_the_compact_mapping_is_the_rank_table_and_replaces_it_at_scale(monkeypatch):
    """mapping_compact (host order + local GPU order) gives every rank's host and GPU exactly as the rank table
    does; above the table limits only the compact form is printed (plan --json at 131,072 GPUs: ~1 MB)."""
    import placement.planner as planner

    args = ["plan", "--model", "llama3-70b", "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"),
            "--nodelist", "gpu[0030-0045]", "--node-type", "dgx-h100", "--seq-len", "8192", "--global-batch", "64",
            "--top-k", "2", "--json", "--oversubscription", "8"]
    code, out, err = run(*args)
    assert code == 0, err
    for p in json.loads(out)["plans"]:
        assert _from_compact(p["mapping_compact"], 128) == [(r["host"], r["local_gpu"]) for r in p["mapping"]]
    monkeypatch.setattr(planner, "RANK_TABLES_FOR_EVERY_PLAN_MAX_GPUS", 32)
    monkeypatch.setattr(planner, "RANK_TABLE_MAX_GPUS", 64)
    code, out, err = run(*args)
    plans = json.loads(out)["plans"]
    assert all(p["mapping"] is None and p["mapping_compact"]["host_order"] for p in plans)
    assert "left out above 64 GPUs (mapping_compact holds the same mapping)" in plans[0]["mapping_solver"]["rank_table"]


def test_mixed_node_designs_price_the_weakest(tmp_path):
    topo = str(DATA / "slurm" / "tree-5leaf.conf")
    args = ["plan", "--model", "llama3-70b", "--slurm-topology", topo, "--nodelist", "gpu[0001-0016]",
            "--seq-len", "8192", "--global-batch", "64", "--top-k", "1", "--json"]
    code, out, _ = run(*args, "--node-type", "dgx-h200", "--node-type", "gpu[0009-0016]=dgx-h100")
    assert code == 0
    mixed = json.loads(out)["plans"][0]
    assert mixed["cluster"] == "mixed(dgx-h100+dgx-h200)"
    assert mixed["memory_capacity_bytes"] == json.loads(run(*args, "--node-type", "dgx-h100")[1])["plans"][0][
        "memory_capacity_bytes"]
    code, _, err = run(*args, "--node-type", "dgx-h100", "--node-type", "gpu[0001-0004]=gb200-nvl72")
    assert code == 2 and "same GPUs per node" in err
    code, _, err = run(*args, "--node-type", "gpu[0001-0004]=dgx-h100")
    assert code == 2 and "no design for" in err


def test_cluster_with_a_slurm_topology_is_a_conflict_not_ignored(tmp_path):
    """--cluster and --slurm-topology both describe the machine: bad input, never one silently dropped."""
    code, _, err = run("plan", "--model", "llama3-8b", "--cluster", "dgx-b200", "--slurm-topology",
                       str(DATA / "slurm" / "tree-5leaf.conf"), "--nodelist", "gpu[0001-0002]",
                       "--node-type", "dgx-h100")
    assert code == 2
    assert "--cluster dgx-b200 and --slurm-topology both describe the machine" in err


def test_hosts_keep_the_allocation_order_unless_a_reordering_prices_faster(tmp_path):
    """Two leaves, 8 hosts each, under a 16:1 spine: no order the mapper builds prices below the allocation's, so
    hosts.txt keeps the allocation order (no host moves for nothing) and the mapping line says so with the number.
    (Under an 8:1 spine the pipeline-aligned order, each pipeline inside a leaf, prices faster and is kept: the
    interleaved schedule's warm-up waits for its transfers, which then stay off the spine.)"""
    code, out, err = run("plan", "--model", "llama3-70b", "--seq-len", "4096", "--global-batch", "256", "--top-k",
                         "1", "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"), "--nodelist",
                         "gpu[0001-0008],gpu[0038-0045]", "--node-type", "dgx-h100", "--oversubscription", "16",
                         "--json", "--out", str(tmp_path))
    assert code == 0, err
    plan = json.loads(out)["plans"][0]
    alloc = plan["baselines"]["allocation_order"]["step_time_s"]
    assert plan["step_time_s"] == alloc and plan["mapping_solver"]["chosen"] == "allocation_order"
    hosts = [x.split()[1] for x in (tmp_path / "hosts.txt").read_text().splitlines() if x and x[0] != "#"]
    assert hosts == [f"gpu{i:04d}" for i in [*range(1, 9), *range(38, 46)]]
    code, text, _ = run("plan", "--model", "llama3-70b", "--seq-len", "4096", "--global-batch", "256", "--top-k",
                        "1", "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"), "--nodelist",
                        "gpu[0001-0008],gpu[0038-0045]", "--node-type", "dgx-h100", "--oversubscription", "16")
    # what the mapper compared, not a claim about every order (it optimises a proxy)
    assert (f"hosts keep the allocation order ({alloc:.3f} s/step): none of the orders the mapper built" in text
            and "an order it did not build may" in text)


def test_a_mix_with_a_faster_gpu_prices_as_its_slowest_gpu_not_slower():
    """H100 and B200 hosts: the step is the all-H100 step (its GEMM pace, HBM, NVLink and NIC are the smaller in
    every respect).  Taking the smallest of each field paired H100's peak with B200's lower MAMF ratio, a GPU
    slower than either (a user trial: 7.181 s mixed against 6.967 s all-H100); and B200's MXFP8 is not the mix's."""
    topo = str(DATA / "slurm" / "tree-5leaf.conf")
    args = ["evaluate", "--model", "llama3-70b", "--slurm-topology", topo, "--nodelist", "gpu[0001-0016]",
            "--seq-len", "8192", "--global-batch", "64", "--tp", "8", "--pp", "2", "--mbs", "1", "--json"]
    _, h100, _ = run(*args, "--node-type", "dgx-h100")
    for first, second in (("dgx-h100", "dgx-b200"), ("dgx-b200", "dgx-h100")):
        mix = ["--node-type", first, "--node-type", f"gpu[0009-0016]={second}"]
        code, mixed, err = run(*args, *mix)
        assert code == 0, err
        assert json.loads(mixed)["step_time_s"] == json.loads(h100)["step_time_s"]
        code, fp8, err = run(*args, *mix, "--precision", "fp8")
        assert code == 0, err
        assert json.loads(fp8)["recipe"]["fp8_recipe"] != "mxfp8"
