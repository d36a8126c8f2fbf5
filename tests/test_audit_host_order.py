"""The data, expert-data and pipeline groups a job's host order sends across an oversubscribed spine are a finding
priced at what placement's order of the same hosts saves (a user trial: 16 hosts interleaved over two leaves under an
8:1 spine cost 11 % of the step, and no finding said which groups crossed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

SLURM = Path(__file__).parent / "data" / "slurm" / "tree-5leaf.conf"
SCRIPT = ("torchrun --nproc_per_node 8 --nnodes 16 pretrain_gpt.py --tensor-model-parallel-size 1 "
          "--pipeline-model-parallel-size 4 --expert-model-parallel-size 8 --num-experts 8 --moe-router-topk 2 "
          "--moe-token-dispatcher-type alltoall --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
          "--swiglu --ffn-hidden-size 14336 --group-query-attention --num-query-groups 8 --seq-length 4096 "
          "--micro-batch-size 1 --global-batch-size 256 --bf16 --use-distributed-optimizer --overlap-grad-reduce\n")
LEFT, RIGHT = [f"gpu{n:04d}" for n in range(30, 38)], [f"gpu{n:04d}" for n in range(38, 46)]  # leaf0, leaf1


def _audit(tmp_path: Path, hosts: list[str]) -> dict:
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT)
    out = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(script), "--model", "mixtral-8x7b",
                                    "--slurm-topology", str(SLURM), "--nodelist", ",".join(hosts), "--node-type",
                                    "dgx-h100", "--oversubscription", "8", "--json"])
    assert out.exit_code in (0, 1), out.output
    return json.loads(out.stdout)


def test_groups_an_interleaved_host_order_sends_over_the_spine_are_named_and_priced(tmp_path) -> None:
    interleaved = [h for pair in zip(LEFT, RIGHT, strict=True) for h in pair]
    data = _audit(tmp_path, interleaved)
    (f,) = [f for f in data["findings"] if f["kind"] == "host_order_crossings"]
    assert "spine (reached over uplinks oversubscribed 8:1 in all)" in f["message"] and "dp groups" in f["message"]
    assert f["groups"] and set(f["groups"][0]["hosts"]) & set(LEFT) and set(f["groups"][0]["hosts"]) & set(RIGHT)
    assert f["cost_s"] > 0.01 * data["estimate"]["step_time_s"]
    # the order it names prices the job at the estimate less the cost
    in_order = _audit(tmp_path, LEFT + RIGHT)
    assert not [g for g in in_order["findings"] if g["kind"] == "host_order_crossings"]
    assert in_order["estimate"]["step_time_s"] <= data["estimate"]["step_time_s"] - f["cost_s"] + 1e-3


def test_out_writes_the_jobs_own_host_order_fix(tmp_path) -> None:
    """A user trial: the host order that fixes the job without touching its files was only in --json; --out wrote
    the best plan's files.  It writes job-hosts.txt too: node rank k on line k, the finding's order and saving."""
    interleaved = [h for pair in zip(LEFT, RIGHT, strict=True) for h in pair]
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT)
    out = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(script), "--model", "mixtral-8x7b",
                                    "--slurm-topology", str(SLURM), "--nodelist", ",".join(interleaved), "--node-type",
                                    "dgx-h100", "--oversubscription", "8", "--json", "--out", str(tmp_path / "o")])
    assert out.exit_code in (0, 1), out.output
    (f,) = [f for f in json.loads(out.stdout)["findings"] if f["kind"] == "host_order_crossings"]
    text = (tmp_path / "o" / "job-hosts.txt").read_text()
    rows = [line.split() for line in text.splitlines() if not line.startswith("#")]
    assert rows == [[str(k), h] for k, h in enumerate(f["host_order"])]
    assert f"saves {f['cost_s']:.3f} s per step" in " ".join(text.split())


def test_the_audited_estimate_has_its_compact_mapping_in_the_jobs_numbering(tmp_path) -> None:
    """`mapping_compact` was null in every audit; it is the job's own: node rank k on host_order[k], as `mapping`."""
    interleaved = [h for pair in zip(LEFT, RIGHT, strict=True) for h in pair]
    est = _audit(tmp_path, interleaved)["estimate"]
    compact = est["mapping_compact"]
    assert compact["host_order"] == interleaved and compact["rank_order"] == "tp-cp-ep-dp-pp"
    gph = compact["gpus_per_host"]
    assert all(row["host"] == compact["host_order"][row["rank"] // gph] for row in est["mapping"])


def test_a_saving_no_single_finding_names_is_graded_by_its_size(tmp_path) -> None:
    """torchtitan's Llama 3 70B on 16 hosts: the best plan saves over a quarter of the step, the largest single
    finding a few percent; the rest only together (tp, micro-batch, recompute), which was an info finding, or none
    beside a costed one, so `--fail-on error` passed the job."""
    toml = Path(__file__).parent / "data" / "audit" / "torchtitan" / "llama3_70b.toml"
    out = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(toml), "--model", "llama3-70b",
                                    "--cluster", "dgx-h100", "--gpus", "128", "--json"])
    data = json.loads(out.stdout)
    saving = data["estimate"]["step_time_s"] - data["best"]["step_time_s"]
    largest = max(f["cost_s"] for f in data["findings"] if f["kind"] != "combined_changes")
    assert saving - largest > 0.10 * data["estimate"]["step_time_s"]
    (f,) = [f for f in data["findings"] if f["kind"] == "combined_changes"]
    assert f["severity"] == "error" and f["cost_s"] == pytest.approx(saving, abs=1e-3)
    assert out.exit_code == 1


def test_the_order_named_is_in_the_jobs_own_rank_numbering(tmp_path) -> None:
    """Under --use-tp-pp-dp-mapping the job's node ranks are not placement's: the order the finding names is the
    host of each of the job's node ranks (a review: it named the job's own order back, which saves nothing)."""
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nproc_per_node 8 --nnodes 16 pretrain_gpt.py --tensor-model-parallel-size 8 "
                      "--pipeline-model-parallel-size 2 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
                      "--swiglu --ffn-hidden-size 14336 --group-query-attention --num-query-groups 8 "
                      "--seq-length 4096 --micro-batch-size 1 --global-batch-size 256 --bf16 --overlap-grad-reduce "
                      "--sequence-parallel --use-tp-pp-dp-mapping\n")

    def audit(hosts: list[str]) -> dict:
        out = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(script), "--model", "llama3-8b",
                                        "--slurm-topology", str(SLURM), "--nodelist", ",".join(hosts), "--node-type",
                                        "dgx-h100", "--oversubscription", "8", "--json"])
        return json.loads(out.stdout)

    (f,) = [f for f in audit(LEFT + RIGHT)["findings"] if f["kind"] == "host_order_crossings"]
    named = f["message"].split("node ranks 0, 1, ... on ")[1].split(" ...")[0].split()
    assert named[0] in LEFT and named[1] in RIGHT  # pipeline pairs across the leaves, each dp group inside one
    interleaved = [h for pair in zip(LEFT, RIGHT, strict=True) for h in pair]
    assert audit(interleaved)["estimate"]["step_time_s"] < audit(LEFT + RIGHT)["estimate"]["step_time_s"]


def test_the_best_plan_line_says_an_hsdp_shard() -> None:
    """The best plan's line said `dp 16, ZeRO-3` where its change list set 2 replicas of 8 (a user trial)."""
    from types import SimpleNamespace

    from placement.audit.report import _layout_line

    lay = SimpleNamespace(tp=1, cp=1, ep=1, etp=1, pp=1, vpp=1, dp=16, dp_shard=8, zero_stage=3, micro_batch_size=1,
                          recompute="none")
    assert "ZeRO-3 (sharded over 8, 2 replicas)" in _layout_line(SimpleNamespace(layout=lay))
    lay.dp_shard = 16
    assert "ZeRO-3, micro-batch" in _layout_line(SimpleNamespace(layout=lay))


def test_a_host_order_that_prices_the_same_is_not_a_change(tmp_path) -> None:
    """Four hosts of one leaf, the job listing them in another order than the allocation's: any order prices the
    same, so the best plan keeps the job's (its hosts.txt moves no host) and the change list has no node order (a
    user trial: it said to move two of four node ranks, for nothing).  On a spine, where the order pays, it stays."""
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT.replace("--nnodes 16", "--nnodes 4").replace("--expert-model-parallel-size 8", "")
                      .replace("--global-batch-size 256", "--global-batch-size 64"))
    hosts = tmp_path / "hosts.txt"
    job = [LEFT[3], LEFT[1], LEFT[2], LEFT[0]]
    hosts.write_text("\n".join(job) + "\n")
    out = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(script), "--model", "mixtral-8x7b",
                                    "--slurm-topology", str(SLURM), "--nodelist", ",".join(LEFT[:4]), "--node-type",
                                    "dgx-h100", "--hosts", str(hosts), "--json", "--out", str(tmp_path / "out")])
    assert out.exit_code in (0, 1), out.output
    data = json.loads(out.stdout)
    assert data["best"]["step_time_s"] < data["estimate"]["step_time_s"]  # a best plan other than the job
    assert not [c for c in data["changes"] if c["argument"].startswith("node order")]
    assert data["best"]["mapping_compact"]["host_order"] == job
    assert data["best"]["mapping_solver"]["chosen"] == "launch_order"
    written = [line.split()[1] for line in (tmp_path / "out" / "hosts.txt").read_text().splitlines()
               if line and not line.startswith("#")]
    assert written == job
    # a job interleaving two leaves' hosts under an 8:1 spine, allocated leaf by leaf: the leaf order pays for
    # itself, and the change is listed
    (tmp_path / "train.sh").write_text(SCRIPT)
    hosts.write_text("\n".join(h for pair in zip(LEFT, RIGHT, strict=True) for h in pair) + "\n")
    out = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(script), "--model", "mixtral-8x7b",
                                    "--slurm-topology", str(SLURM), "--nodelist", ",".join(LEFT + RIGHT),
                                    "--node-type", "dgx-h100", "--oversubscription", "8", "--hosts", str(hosts),
                                    "--json"])
    spine = json.loads(out.stdout)
    # the job's own order pays: a finding prices it; the best plan lists a node order exactly where the order it
    # runs with is not the job's (its layout may be one no order changes, as the best plan with the weight gather
    # overlapped is here: then the job's order stays and no change is listed)
    assert any(f["kind"] == "host_order_crossings" and f["cost_s"] > 0.05 for f in spine["findings"])
    moved = [c for c in spine["changes"] if c["argument"].startswith("node order")]
    job_order = [h for pair in zip(LEFT, RIGHT, strict=True) for h in pair]
    assert bool(moved) == (spine["best"]["mapping_compact"]["host_order"] != job_order)
    if moved:
        assert moved[0]["to"].startswith(" ".join(spine["best"]["mapping_compact"]["host_order"][:4]))


def test_a_host_order_that_costs_with_as_many_groups_per_tier_is_still_a_finding(tmp_path) -> None:
    """A user trial: 512 hosts interleaved round-robin over 20 leaves under one 2:1 spine priced 0.071 s a step
    slower than the allocation's order, with as many dp groups reaching the spine either way: no finding said so.
    Here 4 hosts on each of 4 leaves, tp8 pp2 dp8: every dp group reaches the spine in either order, but round-robin
    spreads each over 4 leaves, not 2; the finding names the blocks they span."""
    leaves = [[f"gpu{n:04d}" for n in range(first, first + 4)] for first in (1, 38, 102, 129)]
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nproc_per_node 8 --nnodes 16 pretrain_gpt.py --tensor-model-parallel-size 8 "
                      "--pipeline-model-parallel-size 2 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
                      "--swiglu --ffn-hidden-size 14336 --group-query-attention --num-query-groups 8 "
                      "--seq-length 8192 --micro-batch-size 1 --global-batch-size 64 --bf16\n")

    def audit(hosts: list[str]) -> dict:
        out = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(script), "--model", "llama3-8b",
                                        "--slurm-topology", str(SLURM), "--nodelist", ",".join(hosts),
                                        "--node-type", "dgx-h100", "--oversubscription", "8", "--json"])
        assert out.exit_code in (0, 1), out.output
        return json.loads(out.stdout)

    round_robin = audit([h for group in zip(*leaves, strict=True) for h in group])
    in_order = audit([h for leaf in leaves for h in leaf])
    assert round_robin["estimate"]["step_time_s"] > in_order["estimate"]["step_time_s"] + 1e-3
    (f,) = [f for f in round_robin["findings"] if f["kind"] == "host_order_crossings"]
    assert "spreads its groups over more leaf blocks" in f["message"]
    assert "its 16 dp groups span 64 leaf blocks in all (placement's order: 32;" in f["message"]


def test_the_host_order_finding_gives_the_whole_order_and_the_terms_it_saves(tmp_path) -> None:
    """A user trial could not get the order past its first 8 hosts, and read the saving as the group counts' when an
    order with as many groups inside the leaves saved nothing: the finding carries the whole order (JSON host_order),
    and names the exposed terms that order changes, which add up to its saving."""
    interleaved = [h for pair in zip(LEFT, RIGHT, strict=True) for h in pair]
    data = _audit(tmp_path, interleaved)
    (f,) = [f for f in data["findings"] if f["kind"] == "host_order_crossings"]
    order = f["host_order"]
    assert sorted(order) == sorted(interleaved) and order[:8] == f["message"].split(" on ")[1].split()[:8]
    moved = f["message"].split("; the time is in ")[1].split(" exposed (")[0]
    terms = [part.split(" -> ") for part in moved.split(", ")]
    saved = sum(float(a.split()[-1]) - float(b.split()[0]) for a, b in terms)
    assert saved == pytest.approx(f["cost_s"], abs=2e-3)


def test_the_bubble_finding_keeps_the_jobs_host_order(tmp_path) -> None:
    """The bubble's remedy (another pp, vpp or micro-batch) was priced on the allocation's order, not the job's hosts,
    so its saving held part of the host-order finding's (a user trial: 2.676 s, of which 0.591 s was the host
    order's).  Priced on the job's own order, the same job on the same hosts in the same order gets the same saving
    whether that order is the allocation's or --hosts'."""
    interleaved = [h for pair in zip(LEFT, RIGHT, strict=True) for h in pair]
    (tmp_path / "hosts.txt").write_text("\n".join(interleaved) + "\n")

    def bubble(nodelist: list[str], *extra: str) -> tuple[float, float]:
        script = tmp_path / "train.sh"
        script.write_text(SCRIPT)
        out = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(script), "--model", "mixtral-8x7b",
                                        "--slurm-topology", str(SLURM), "--nodelist", ",".join(nodelist),
                                        "--node-type", "dgx-h100", "--oversubscription", "8", "--json", *extra])
        data = json.loads(out.stdout)
        (f,) = [f for f in data["findings"] if f["kind"] == "pipeline_bubble"]
        return data["estimate"]["step_time_s"], f["cost_s"]

    by_nodelist = bubble(interleaved)
    by_hosts = bubble(LEFT + RIGHT, "--hosts", str(tmp_path / "hosts.txt"))
    assert by_hosts[0] == pytest.approx(by_nodelist[0], abs=1e-6)
    assert by_hosts[1] == pytest.approx(by_nodelist[1], abs=1e-6)


def test_a_bubble_with_no_layout_of_its_degrees_searched_is_not_a_zero_saving(tmp_path) -> None:
    """A user trial's torchtitan Llama 3 405B (tp 8, pp 8, 4 micro-batches) read "save 0.000 s" for a 57 % bubble,
    where the search had priced no layout of its tp, cp and ep at all: that is said, with no saving claimed.  Here
    interleaved: torch's Schedule1F1B refuses fewer micro-batches than its 8 stages (cost.rules pp_microbatches),
    its Interleaved1F1B runs them as one round."""
    (tmp_path / "job.toml").write_text(
        '[model]\nname = "llama3"\nflavor = "405B"\n[training]\nlocal_batch_size = 4\nseq_len = 8192\n'
        '[parallelism]\ndata_parallel_shard_degree = -1\ntensor_parallel_degree = 8\npipeline_parallel_degree = 8\n'
        'pipeline_parallel_schedule = "Interleaved1F1B"\npipeline_parallel_microbatch_size = 1\n'
        '[activation_checkpoint]\nmode = "full"\n')
    (tmp_path / "run.sh").write_text("torchrun --nnodes 256 --nproc_per_node 8 --rdzv-backend static --node-rank 0 "
                                     "--master-addr a001 --master-port 29500 -m torchtitan.train "
                                     f"--job.config_file {tmp_path / 'job.toml'}\n")
    out = CliRunner().invoke(main, ["audit", "--launch", str(tmp_path / "run.sh"), "--launch",
                                    str(tmp_path / "job.toml"), "--model", "llama3-405b", "--cluster", "dgx-h100",
                                    "--gpus", "2048"])
    assert out.exit_code in (0, 1), out.output
    assert "[info] pipeline_bubble (not compared)" in out.output
    data = json.loads(CliRunner().invoke(main, ["audit", "--launch", str(tmp_path / "run.sh"), "--launch",
                                                str(tmp_path / "job.toml"), "--model", "llama3-405b", "--cluster",
                                                "dgx-h100", "--gpus", "2048", "--json"]).stdout)
    (f,) = [f for f in data["findings"] if f["kind"] == "pipeline_bubble"]
    assert "the search held no layout of the same tp 8, cp 1 and ep 1 to compare" in f["message"]
    assert "save" not in f["message"] and f["cost_s"] == 0.0


def test_a_host_repeated_on_consecutive_lines_among_single_ones_is_named(tmp_path) -> None:
    """A user trial's host file n01 n03 n02 n02 was read as three hosts (the repeat taken as a SLURM hostfile's run
    of one host's tasks) and refused for the count, naming no host; a hostfile that lists every host once per task
    still reads as its nodes."""
    hosts = LEFT + RIGHT
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT)

    def audit(lines: list[str]):
        order = tmp_path / "hosts.txt"
        order.write_text("\n".join(lines) + "\n")
        return CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(script), "--model",
                                         "mixtral-8x7b", "--slurm-topology", str(SLURM), "--nodelist",
                                         ",".join(hosts), "--node-type", "dgx-h100", "--hosts", str(order), "--json"])

    doubled = audit([*hosts[:-1], hosts[-2]])
    assert doubled.exit_code == 2 and "Traceback" not in doubled.output
    assert f"host {hosts[-2]} is on 2 consecutive lines" in doubled.output and f":{len(hosts) - 1}-" in doubled.output
    per_task = audit([h for h in hosts for _ in range(8)])  # SLURM --distribution=arbitrary: one line per task
    assert per_task.exit_code in (0, 1), per_task.output
    assert json.loads(per_task.stdout)["layout"]["host_order"] == hosts


def test_a_plain_line_repeating_a_slots_line_is_a_host_given_twice(tmp_path) -> None:
    """A review: `n01 slots=8` then `n01` crashed (IndexError) where the repeat was taken for a run of task lines."""
    hosts = LEFT + RIGHT
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT)
    order = tmp_path / "hosts.txt"
    order.write_text("\n".join([f"{hosts[0]} slots=8", hosts[0], *(f"{h} slots=8" for h in hosts[1:])]) + "\n")
    got = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "mixtral-8x7b", "--slurm-topology",
                                    str(SLURM), "--nodelist", ",".join(hosts), "--node-type", "dgx-h100", "--hosts",
                                    str(order)])
    assert got.exit_code == 2 and "Traceback" not in got.output and "internal error" not in got.output
    assert f"host {hosts[0]} is already listed on line 1" in got.output
