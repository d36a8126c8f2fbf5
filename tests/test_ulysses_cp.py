"""Ulysses context parallelism (CpCommType.A2A): Q, K, V all-to-all'd to head shards before the attention core and
the output back after, exposed, forward, backward and recomputed (Jacobs et al. 2023, arXiv:2309.14509 §3).  A user
trial: a Megatron-DeepSpeed job's --ds-sequence-parallel-size 4 was priced as ring attention, whose exchange hides
behind the core (0 s exposed), while DeepSpeed's DistributedAttention runs its all-to-alls on the critical path."""

from __future__ import annotations

import json

from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main
from placement.cost.constants import COLLECTIVE_BASE_LATENCY_S

LONG = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--seq-len", "65536", "--global-batch", "8",
        "--pp", "1", "--mbs", "1", "--zero", "3", "--recompute", "full"]


def _evaluate(*args: str) -> dict:
    got = CliRunner().invoke(main, ["evaluate", *args, "--json"])
    assert got.exit_code == 0, got.output
    return json.loads(got.stdout)


def test_ulysses_all_to_alls_are_priced_exposed_at_the_levels_bandwidth() -> None:
    """Llama 3 8B at 64K on one DGX H100, cp 8: per layer and direction each rank sends its 8192 tokens of Q and of
    the output (4096 wide each) and of K and V (8 heads of 128, 2048 wide), 7/8 of it to the other ranks, at the
    NVLink level's bandwidth; three times a layer (forward, backward, the full recompute's forward), 32 layers, 8
    micro-batches, and none of it hidden."""
    got = _evaluate(*LONG, "--tp", "1", "--cp", "8", "--cp-comm-type", "a2a")
    [level] = got["fabric_levels"]
    sent = 8192 * (4096 + 4096 + 2048) * 2
    # four calls a pass (Q, K, V, the output), each the level's latency and NCCL's base latency
    per_pass = sent * 7 / 8 / level["bandwidth_bytes_per_s"] + 4 * (level["latency_s"] + COLLECTIVE_BASE_LATENCY_S)
    expected = per_pass * 3 * 32 * 8
    assert got["breakdown"]["overlapped"]["cp"] == 0.0
    assert abs(got["breakdown"]["exposed"]["cp"] / expected - 1) < 0.001
    ring = _evaluate(*LONG, "--tp", "1", "--cp", "8")
    # the ring hides behind the attention core
    assert ring["breakdown"]["exposed"]["cp"] < 0.1 * got["breakdown"]["exposed"]["cp"]


ALST = ("compute_environment: LOCAL_MACHINE\ndeepspeed_config:\n  zero_stage: 3\ndistributed_type: DEEPSPEED\n"
        "mixed_precision: bf16\nnum_machines: 2\nnum_processes: 16\nparallelism_config:\n"
        "  parallelism_config_dp_replicate_size: 1\n  parallelism_config_dp_shard_size: 1\n"
        "  parallelism_config_tp_size: 1\n  parallelism_config_cp_size: 16\n"
        "  parallelism_config_cp_backend: deepspeed\n")


def test_kv_heads_fewer_than_the_ranks_are_sent_replicated_where_alst_runs_them(tmp_path) -> None:
    """cp 16 over Llama 3 8B's 8 KV heads: Arctic Long Sequence Training (accelerate's cp_backend deepspeed) gives each
    rank a whole, replicated K/V head, so the K/V all-to-all carries cp x kv_dim / 8 per token, not kv_dim; the group
    spans two hosts, so half of a rank's bytes leave it.  Transformer Engine's a2a refuses that count (Megatron-LM's
    --cp-comm-type a2a), and so does evaluate, which prices Megatron's files."""
    (tmp_path / "u.yaml").write_text(ALST)
    (tmp_path / "run.sh").write_text("accelerate launch --config_file u.yaml sft.py --model_name_or_path m "
                                     "--max_length 65536 --packing --per_device_train_batch_size 1 --output_dir o\n")
    got = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16",
                                    "--launch", str(tmp_path / "run.sh"), "--launch", str(tmp_path / "u.yaml"),
                                    "--json"])
    assert got.exit_code in (0, 1), got.output
    est = json.loads(got.stdout)["estimate"]
    lay = est["layout"]
    assert (lay["cp"], lay["recompute"], lay["num_microbatches"], est["recipe"]["cp_comm_type"]) == (16, "full", 1,
                                                                                                    "a2a")
    sixteen = [*LONG[:4], "--gpus", "16", *LONG[6:]]
    [_, network] = _evaluate(*sixteen, "--tp", "2", "--cp", "8")["fabric_levels"]  # the leaf's per-GPU bandwidth
    sent = 65536 // 16 * (4096 + 4096 + 16 * 2048 / 8) * 2
    expected = sent * (8 / 16) / network["bandwidth_bytes_per_s"] * 3 * 32
    assert expected <= est["breakdown"]["exposed"]["cp"] <= expected * 1.1  # the rest: the calls' latencies
    refused = CliRunner().invoke(main, ["evaluate", *sixteen, "--tp", "2", "--cp", "8", "--cp-comm-type", "a2a"])
    assert refused.exit_code == 2 and "does not divide the 8 K/V heads" in refused.output


def test_ulysses_needs_whole_heads_per_rank_and_runs_beside_sinks() -> None:
    """Each of the tp x cp ranks computes whole heads (DeepSpeed's DistributedAttention asserts it); a softmax with
    sinks, which Transformer Engine's ring and all-gather refuse, runs under a2a."""
    bad = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "48", "--seq-len", "49152",
                                    "--global-batch", "8", "--tp", "2", "--cp", "24", "--cp-comm-type", "a2a"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert "tp x cp = 48 does not divide the 32 attention heads" in bad.output and "Traceback" not in bad.output
    sinks = ["evaluate", "--model", "gpt-oss-120b", "--gpus", "64", "--seq-len", "65536", "--global-batch", "64",
             "--cp", "2", "--json"]
    refused = CliRunner().invoke(main, sinks)
    assert refused.exit_code == 2 and "attention sinks" in refused.output and "--cp-comm-type a2a" in refused.output
    priced = CliRunner().invoke(main, [*sinks, "--cp-comm-type", "a2a"])
    assert priced.exit_code in (0, 1), priced.output  # priced (1: this layout does not fit, said with numbers)
    got = json.loads(priced.stdout)
    assert got["layout"]["cp"] == 2 and got["breakdown"]["exposed"]["cp"] > 0


def test_the_launch_files_ulysses_degree_is_priced_as_all_to_alls(tmp_path) -> None:
    """Megatron-DeepSpeed's --ds-sequence-parallel-size, a DeepSpeed JSON's sequence_parallel_size and Megatron-LM's
    --cp-comm-type a2a are each read as Ulysses, with the line that says so."""
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                              "zero_optimization": {"stage": 3}}))
    script = tmp_path / "run.sh"
    script.write_text(f"deepspeed --num_gpus 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
                      f"--num-attention-heads 32 --seq-length 65536 --ds-sequence-parallel-size 4 --bf16 "
                      f"--deepspeed --deepspeed_config {ds}\n")
    lay = parse_launch([script, ds])
    assert (lay.cp, lay.recipe["cp_comm_type"]) == (4, "a2a")
    assert "--ds-sequence-parallel-size" in lay.sources["recipe.cp_comm_type"]
    ds.write_text(json.dumps({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                              "sequence_parallel_size": 2}))
    script.write_text(f"deepspeed --num_gpus 8 train.py --deepspeed --deepspeed_config {ds}\n")
    lay = parse_launch([script, ds])
    assert (lay.cp, lay.recipe["cp_comm_type"]) == (2, "a2a")
    assert "sequence_parallel_size" in lay.sources["recipe.cp_comm_type"]


def test_a_megatron_plan_under_a2a_writes_it(tmp_path) -> None:
    got = CliRunner().invoke(main, ["evaluate", *LONG, "--tp", "1", "--cp", "8", "--cp-comm-type", "a2a",
                                    "--out", str(tmp_path), "--emit", "megatron"])
    assert got.exit_code == 0, got.output
    assert "--cp-comm-type a2a" in (tmp_path / "megatron.sh").read_text()


def test_a_megatron_deepspeed_ulysses_degree_change_is_its_own_argument() -> None:
    """A review: the change list of a Megatron-DeepSpeed job kept only the arguments it shares with Megatron-LM, so a
    best plan of another Ulysses degree listed no --ds-sequence-parallel-size change, and the job, changed as told,
    would not start."""
    from types import SimpleNamespace

    from placement.audit.core import megatron_deepspeed_changes

    def lay(cp: int) -> SimpleNamespace:
        return SimpleNamespace(cp=cp, recompute="none", zero_stage=1, pp=1, sequence_parallel=False)

    assert megatron_deepspeed_changes([], lay(4), lay(2), "") == [
        {"argument": "--ds-sequence-parallel-size", "from": "4", "to": "2"}]
    assert megatron_deepspeed_changes([], lay(4), lay(1), "")[0]["to"] is None
    assert megatron_deepspeed_changes([], lay(2), lay(2), "") == []


MDS_SHAPES = {"llama3-8b": "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32",
              "llama3-70b": "--num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64"}


def _mds_audit(tmp_path, model: str, gpus: int, seq: int, batch: int, extra: str = "") -> dict:
    """`audit --json` of a Megatron-DeepSpeed Llama-shaped job with --ds-sequence-parallel-size 4 and its JSON."""
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"train_batch_size": batch, "train_micro_batch_size_per_gpu": 1,
                              "bf16": {"enabled": True}, "zero_optimization": {"stage": 1}}))
    script = tmp_path / "run.sh"
    script.write_text(f"deepspeed --num_nodes {gpus // 8} --num_gpus 8 pretrain_gpt.py {MDS_SHAPES[model]} "
                      "--num-key-value-heads 8 --swiglu --normalization rmsnorm --use-rotary-position-embeddings "
                      "--no-position-embedding --untie-embeddings-and-output-weights --disable-bias-linear "
                      f"--seq-length {seq} --max-position-embeddings {seq} --micro-batch-size 1 --global-batch-size "
                      f"{batch} --ds-sequence-parallel-size 4 {extra}--use-flash-attn-v2 --bf16 --deepspeed "
                      f"--deepspeed_config {ds}\n")
    got = CliRunner().invoke(main, ["audit", "--launch", str(script), "--launch", str(ds), "--model", model,
                                    "--cluster", "dgx-h100", "--gpus", str(gpus), "--json"])
    assert got.exit_code in (0, 1), got.output
    return json.loads(got.stdout)


def test_a_megatron_deepspeed_ulysses_jobs_best_plan_has_no_tp_beside_it_and_fpdt_is_said(tmp_path) -> None:
    """A QA run: the best plan of a Megatron-DeepSpeed --ds-sequence-parallel-size job added --tensor-model-parallel-
    size 4, which Megatron-DeepSpeed's sequence parallelism is "currently incompatible with" (examples_deepspeed/
    sequence_parallel/README.md); and FPDT's flags went unmentioned."""
    data = _mds_audit(tmp_path, "llama3-8b", 8, 65536, 8, "--ds-sequence-parallel-fpdt ")
    best = data["best"]["layout"]
    assert best["cp"] == 1 or (best["tp"], best["pp"]) == (1, 1)  # never Ulysses beside tp or pp
    assert any(note.startswith("--ds-sequence-parallel-fpdt: DeepSpeed's FPDT") for note in data["layout"]["ignored"])


def test_a_megatron_deepspeed_ulysses_jobs_best_plan_may_drop_it_for_tp(tmp_path) -> None:
    """A review: fixing tp and pp at 1 for the whole search left a 70B Ulysses job on 16 GPUs without a plan that fits;
    Megatron-DeepSpeed rules tp and pp out beside Ulysses only, so a plan without it may take them."""
    data = _mds_audit(tmp_path, "llama3-70b", 16, 16384, 16)
    best = data["best"]["layout"]
    assert best["cp"] == 1 or (best["tp"], best["pp"]) == (1, 1)  # never Ulysses beside tp or pp
    assert data["best"]["fits"] and best["tp"] > 1
    assert {"argument": "--ds-sequence-parallel-size", "from": "4", "to": None} in data["changes"]
    # the tp plan is priced with Megatron's sequence parallelism: the change says so (microsoft/Megatron-DeepSpeed
    # megatron/arguments.py --sequence-parallel)
    assert best["sequence_parallel"] and {"argument": "--sequence-parallel", "from": None, "to": "true"} in \
        data["changes"]
