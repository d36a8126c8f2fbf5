"""The DDP / ZeRO-1 gradient buckets that close only when the last backward ends (cost.dp.tail_bucket_params).

Megatron-Core fills a rank's buckets from the output end and closes each at max(40M, 1M x dp x cp) parameters by
default, so at a large dp the bucket holding layer 0 is most of the rank's gradient and its reduction runs beside no
compute; NeMo 1's Apex DistributedFusedAdam puts the embedding and the head into layer 0's bucket.  Tested in the DP
term, on the calibration pair it moves, in Megatron-LM's and DeepSpeed's files, and in the audit's readers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from placement.calibration.validate import load_runs, predict
from placement.cli import main
from placement.cost.dp import tail_bucket_params
from placement.specs import Layout
from placement.specs.recipe import GradBuckets, Recipe
from tests.test_cost_terms import _ctx, _est, _f

LLAMA8B = "llama3-8b"


def _dp(gpus: int, **recipe) -> tuple[float, float]:
    """(exposed, total) DP seconds of Llama 3 8B at tp 1, pp 1, ZeRO-1 on `gpus` H100s."""
    est = _est(LLAMA8B, "dgx-h100", gpus, Layout(tp=1, pp=1, dp=gpus, zero_stage=1, micro_batch_size=1),
               recipe=Recipe(**recipe), seq_len=8192, global_batch=2 * gpus)
    return _f(est.dp_exposed_s), _f(est.dp_s)


def _tail(gpus: int, layout: Layout | None = None, **recipe) -> float:
    """The first rank's parameters whose reduction waits for the end of the backward (Llama 3 8B, 32 layers)."""
    layout = layout or Layout(tp=1, pp=1, dp=gpus, zero_stage=1)
    x = _ctx(LLAMA8B, "dgx-h100", gpus, layout, recipe=Recipe(**recipe), seq_len=8192, global_batch=2 * gpus)
    w = x.w
    head = w.head_params / x.tp + w.final_norm_params
    return float(np.asarray(tail_bucket_params(x, np.array([32.0]), np.array([0.0]), head,
                                               w.embed_params / x.tp)).ravel()[0])


def test_a_bucket_larger_than_the_rank_exposes_its_whole_reduction() -> None:
    """At dp 8,192 Megatron-Core's default bucket (8.2e9 parameters) holds all of Llama 3 8B: one bucket, closed
    by the last gradient, so nothing of the reduction or the gather hides (priced before as all but the
    embedding's hidden behind the backward)."""
    exposed, total = _dp(8192)
    assert exposed == pytest.approx(total, rel=1e-6)
    small, _ = _dp(8192, ddp_bucket_params=40_000_000)
    assert small < 0.3 * total


def test_the_tail_is_the_bucket_holding_layer_zero_and_the_embedding() -> None:
    x = _ctx(LLAMA8B, "dgx-h100", 8, Layout(tp=1, pp=1, dp=8, zero_stage=1), seq_len=8192, global_batch=16)
    w = x.w
    embed = w.embed_params
    layer = w.dense_layer_params
    # one parameter a bucket: layer 0's QKV projection and norms, then the embedding
    one = _tail(8, ddp_bucket_params=1)
    qkv = w.attn_params - w.out_dim * w.hidden + w.vector_params
    assert one == pytest.approx(qkv + embed, rel=1e-9)
    # a bucket of a whole layer: layer 0 closes its own bucket (it was opened at its down projection)
    whole = _tail(8, ddp_bucket_params=int(layer))
    assert embed + qkv < whole <= embed + 2 * layer
    # a bucket larger than the rank: everything
    everything = _tail(8, ddp_bucket_params=10**12)
    assert everything == pytest.approx(w.total_params, rel=1e-6)


def test_megatron_default_bucket_grows_with_dp_times_cp() -> None:
    assert _tail(8) < _tail(1024) < _tail(8192)
    assert _tail(1024) == pytest.approx(_tail(1024, ddp_bucket_params=1_024_000_000), rel=1e-12)
    assert _tail(8) == pytest.approx(_tail(8, ddp_bucket_params=40_000_000), rel=1e-12)


def test_per_layer_buckets_hold_the_embedding_and_head_with_layer_zero() -> None:
    x = _ctx(LLAMA8B, "dgx-h100", 8, Layout(tp=1, pp=1, dp=8, zero_stage=1), seq_len=8192, global_batch=16)
    w = x.w
    per_layer = _tail(8, grad_buckets=GradBuckets.PER_LAYER)
    assert per_layer == pytest.approx(w.dense_layer_params + w.embed_params + w.head_params + w.final_norm_params,
                                      rel=1e-6)


def test_interleaving_keeps_the_embedding_edge() -> None:
    """Under interleaving each chunk's reduction goes whole after the chunk's last backward (dp_term's floor): the
    bucket tail adds nothing there."""
    lay = dict(tp=1, pp=4, vpp=2, zero_stage=1, micro_batch_size=1)
    big = _est(LLAMA8B, "dgx-h100", 4096, Layout(dp=1024, **lay), seq_len=8192, global_batch=4096)
    small = _est(LLAMA8B, "dgx-h100", 4096, Layout(dp=1024, **lay), recipe=Recipe(ddp_bucket_params=1),
                 seq_len=8192, global_batch=4096)
    assert _f(big.dp_exposed_s) == pytest.approx(_f(small.dp_exposed_s), rel=1e-12)


def _row(name: str):
    return next(r for r in load_runs() if r.id == name)


def test_nemotron_scale_out_grows_by_the_per_layer_tail() -> None:
    """DGX Cloud's Nemotron-4 15B at 16 and 2,048 H100 (NeMo 1, Apex DistributedFusedAdam): layer 0's bucket holds
    the embedding and the untied head, 0.9e9 parameters at tp 4, reduced over 4 ranks at 16 GPUs and over 512
    across the network at 2,048.  Without the term the predicted step grows 0.46 %, with it more (published
    +4.6 %)."""
    small, large = _row("dgxc-24.11-h100-nemotron4-15b-bf16-16gpu"), _row("dgxc-24.11-h100-nemotron4-15b-bf16-2048gpu")
    assert small.recipe.grad_buckets is GradBuckets.PER_LAYER
    grown = predict(large).predicted_step_time_s / predict(small).predicted_step_time_s - 1.0

    def by_size(run):
        return run.model_copy(update={"recipe": run.recipe.model_copy(update={"grad_buckets": GradBuckets.BY_SIZE,
                                                                              "ddp_bucket_params": 1})})

    without = predict(by_size(large)).predicted_step_time_s / predict(by_size(small)).predicted_step_time_s - 1.0
    assert grown > without + 0.0025


# --- files: Megatron-LM's flag, DeepSpeed's JSON, the audit's readers ------------------------------------------


def _plan(tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["evaluate", "--model", LLAMA8B, "--gpus", "16", "--seq-len", "4096",
                                       "--global-batch", "64", "--tp", "2", "--pp", "1", "--zero", "1", "--mbs", "1",
                                       "--recompute", "none", "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    return out


def test_megatron_file_states_the_bucket_the_plan_priced(tmp_path: Path) -> None:
    out = _plan(tmp_path, "--emit", "megatron", "--ddp-bucket-params", "50000000")
    assert "--ddp-bucket-size 50000000" in (out / "megatron.sh").read_text()
    plain = _plan(tmp_path / "plain", "--emit", "megatron")
    assert "--ddp-bucket-size" not in (plain / "megatron.sh").read_text()


def test_deepspeed_file_writes_the_priced_reduce_bucket(tmp_path: Path) -> None:
    out = _plan(tmp_path, "--framework", "deepspeed", "--emit", "deepspeed")
    zero = json.loads((out / "ds_config.json").read_text())["zero_optimization"]
    assert zero["reduce_bucket_size"] == 50_000_000
    assert zero["overlap_comm"] is True


def test_deepspeed_file_of_a_megatron_default_plan_writes_deepspeed_buckets(tmp_path: Path) -> None:
    """A plan priced with Megatron-Core's default bucket, max(40M, 1M x dp x cp), wrote that default into
    ds_config.json: reduce_bucket_size 8,192,000,000 at dp 8,192, which DeepSpeed allocates twice (stage_1_and_2.py
    setup_buckets), 30.5 GiB a GPU beside a plan that left 6.3 GiB free.  The file writes placement's DeepSpeed
    bucket and its header prices it; a bucket the plan sets itself is written, with a warning where its buffers
    outgrow the free memory."""
    out = tmp_path / "out"
    args = ["evaluate", "--model", LLAMA8B, "--gpus", "1024", "--seq-len", "4096", "--global-batch", "2048", "--tp",
            "1", "--pp", "1", "--zero", "1", "--mbs", "1", "--recompute", "none", "--emit", "deepspeed"]
    result = CliRunner().invoke(main, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    zero = json.loads((out / "ds_config.json").read_text())["zero_optimization"]
    assert zero["reduce_bucket_size"] == 50_000_000
    assert "reduce buckets of 50,000,000 elements" in result.output
    assert "1,024,000,000-parameter buckets of Megatron-Core's default" in result.output
    big = tmp_path / "big"
    result = CliRunner().invoke(main, [*args, "--ddp-bucket-params", "8000000000", "--out", str(big)])
    assert result.exit_code == 0, result.output
    assert json.loads((big / "ds_config.json").read_text())["zero_optimization"]["reduce_bucket_size"] == 8 * 10**9
    assert "2 x 8,000,000,000 x 2 B = 29.8 GiB" in result.output


def test_a_file_that_runs_other_buckets_names_the_default_it_replaces(tmp_path: Path) -> None:
    """MaxText's reductions are priced as one bucket per parameter (frameworks.CAPABILITIES); a plan priced with
    Megatron-Core's default bucket said its file ran `ddp_bucket_params 1 (not None)`."""
    out = _plan(tmp_path, "--emit", "maxtext", "--grad-reduce-fp32", "--fp32-weights", "--no-norms-fused")
    header = (out / "maxtext.yml").read_text()
    assert "ddp_bucket_params 1 (not Megatron-Core's default, max(40M, 1M x dp x cp))" in header
    assert "(not None)" not in header


MEGATRON_ARGS = ("torchrun --nproc-per-node 8 --nnodes {nodes} pretrain_gpt.py --tensor-model-parallel-size 2 "
                 "--pipeline-model-parallel-size 1 --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 "
                 "--num-attention-heads 32 --group-query-attention --num-query-groups 8 --seq-length 8192 "
                 "--max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size {batch} --swiglu "
                 "--normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights "
                 "--disable-bias-linear --bf16 --use-distributed-optimizer --overlap-grad-reduce "
                 "--overlap-param-gather --vocab-size 128256 --use-flash-attn {extra}\n")


def _audit(tmp_path: Path, gpus: int, extra: str = "", name: str = "train.sh") -> dict:
    script = tmp_path / name
    script.write_text("#!/bin/bash\n" + MEGATRON_ARGS.format(nodes=gpus // 8, batch=gpus, extra=extra))
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", LLAMA8B, "--cluster",
                                       "dgx-h100", "--gpus", str(gpus), "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output)


def test_audit_reads_megatron_bucket_size_and_finds_the_tail(tmp_path: Path) -> None:
    """At dp 4,096 the default bucket (4.1e9 parameters) holds more than half of the rank: a finding that says what
    the tail costs and why smaller buckets are no free remedy; the file's --ddp-bucket-size is what is priced."""
    report = _audit(tmp_path, 8192)
    tail = [f for f in report["findings"] if f["kind"] == "dp_tail_bucket"]
    assert tail and "4,096,000,000" in tail[0]["message"] and tail[0]["cost_s"] > 0.05
    # the cost is against one-parameter buckets, whose own tail (layer 0's QKV and the embedding) stays exposed
    assert "more than buckets of one parameter each would leave there" in " ".join(tail[0]["message"].split())
    small = _audit(tmp_path, 8192, "--ddp-bucket-size 40000000", "small.sh")
    assert small["estimate"]["recipe"]["ddp_bucket_params"] == 40_000_000
    assert "--ddp-bucket-size 40000000" in small["estimate"]["recipe_sources"]["ddp_bucket_params"]
    assert small["estimate"]["step_time_s"] < report["estimate"]["step_time_s"]


def test_audit_prices_a_bucket_count_as_megatron_lm_resolves_it(tmp_path: Path) -> None:
    """--ddp-num-buckets N makes the buckets the rank's parameters // N (Megatron-LM resolve_ddp_bucket_size); it was
    priced at Megatron-Core's default, so that at dp 8,192 a dp_tail_bucket finding named 8,192,000,000-parameter
    buckets for a job of 16 buckets of 0.5e9."""
    from placement.catalog import load_model
    from placement.workload import workload

    report = _audit(tmp_path, 64, "--ddp-num-buckets 8")
    w = workload(load_model(LLAMA8B))
    rank = int(32 * w.dense_layer_shard(2) + (w.embed_params + w.head_params) / 2 + w.final_norm_params)
    assert report["estimate"]["recipe"]["ddp_bucket_params"] == rank // 8
    assert f"{rank:,} // 8 = {rank // 8:,}" in report["estimate"]["recipe_sources"]["ddp_bucket_params"]
    assert not any("--ddp-num-buckets" in i for i in report["layout"]["ignored"])
    script = tmp_path / "both.sh"
    script.write_text("#!/bin/bash\n" + MEGATRON_ARGS.format(nodes=8, batch=64,
                                                              extra="--ddp-num-buckets 8 --ddp-bucket-size 40000000"))
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", LLAMA8B, "--gpus", "64"])
    assert result.exit_code == 2 and "Cannot specify both num_buckets and bucket_size" in result.output


DS_LAUNCH = "deepspeed --num_gpus 8 --num_nodes 4 train.py --deepspeed --deepspeed_config ds_config.json\n"


def _deepspeed(tmp_path: Path, zero: dict) -> dict:
    (tmp_path / "run.sh").write_text(DS_LAUNCH)
    (tmp_path / "ds_config.json").write_text(json.dumps({
        "train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
        "zero_optimization": zero}))
    result = CliRunner().invoke(main, ["audit", "--model", LLAMA8B, "--gpus", "32", "--seq-len", "4096",
                                       "--launch", str(tmp_path / "run.sh"), "--launch",
                                       str(tmp_path / "ds_config.json"), "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["estimate"]


def test_deepspeed_zero1_without_overlap_comm_reduces_after_the_backward(tmp_path: Path) -> None:
    """DeepSpeed turns overlap_comm on by default at ZeRO-3 only (runtime/zero/config.py overlap_comm_valid): a
    ZeRO-1 JSON without it reduces the gradients beside no compute, and its buckets are 5e8 elements."""
    plain = _deepspeed(tmp_path, {"stage": 1})
    assert plain["recipe"]["dp_overlap"] is False
    assert "overlap_comm" in plain["recipe_sources"]["dp_overlap"]
    assert plain["recipe"]["ddp_bucket_params"] == 500_000_000
    total, exposed = plain["breakdown"]["dp"], plain["breakdown"]["exposed"]["dp"]
    assert exposed == pytest.approx(total, rel=1e-4)
    overlapped = _deepspeed(tmp_path, {"stage": 1, "overlap_comm": True, "reduce_bucket_size": 50_000_000})
    assert overlapped["recipe"]["dp_overlap"] is True and overlapped["recipe"]["ddp_bucket_params"] == 50_000_000
    # (its weight all-gather stays before the next forward: param_gather_overlap false for DeepSpeed)
    assert overlapped["breakdown"]["exposed"]["dp"] < 0.75 * exposed


def test_deepspeed_reduce_bucket_auto_is_the_hf_trainers_hidden_squared(tmp_path: Path) -> None:
    """The HF Trainer's sample ZeRO-1/2 configs (and LLaVA's zero2.json) write reduce_bucket_size "auto", which it
    fills with hidden_size x hidden_size (transformers integrations/deepspeed.py): such a config was refused, exit
    2, "must be an integer, got 'auto'"."""
    est = _deepspeed(tmp_path, {"stage": 1, "overlap_comm": True, "reduce_bucket_size": "auto"})
    assert est["recipe"]["ddp_bucket_params"] == 4096 * 4096
    assert "4096 x 4096 = 16,777,216" in est["recipe_sources"]["ddp_bucket_params"]
    assert est["recipe"]["dp_overlap"] is True


def test_an_accelerate_plugin_zero2_reduces_as_deepspeeds_defaults(tmp_path: Path) -> None:
    """accelerate's DeepSpeed plugin (no deepspeed_config_file) writes a config without overlap_comm or
    reduce_bucket_size (DeepSpeedPlugin.__post_init__), so DeepSpeed's defaults run: such a ZeRO-2 job was priced
    with its reduction overlapped, where the same job's JSON without overlap_comm was priced exposed."""
    (tmp_path / "zero2.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndeepspeed_config:\n  offload_optimizer_device: none\n"
        "  offload_param_device: none\n  zero_stage: 2\ndistributed_type: DEEPSPEED\nmixed_precision: bf16\n"
        "num_machines: 4\nnum_processes: 32\n")
    (tmp_path / "run.sh").write_text("accelerate launch --config_file zero2.yaml sft.py --model_name_or_path "
                                     "meta-llama/Meta-Llama-3-8B --max_length 4096 --per_device_train_batch_size 2 "
                                     "--output_dir o\n")
    result = CliRunner().invoke(main, ["audit", "--model", LLAMA8B, "--gpus", "32", "--launch",
                                       str(tmp_path / "run.sh"), "--launch", str(tmp_path / "zero2.yaml"), "--json"])
    assert result.exit_code in (0, 1), result.output
    est = json.loads(result.stdout)["estimate"]
    assert est["recipe"]["dp_overlap"] is False
    assert "accelerate's DeepSpeed plugin" in est["recipe_sources"]["dp_overlap"]
    assert est["recipe"]["ddp_bucket_params"] == 500_000_000
    assert est["breakdown"]["exposed"]["dp"] == pytest.approx(est["breakdown"]["dp"], rel=1e-4)


def test_deepspeed_audit_names_overlap_comm_as_the_remedy(tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_text(DS_LAUNCH)
    (tmp_path / "ds_config.json").write_text(json.dumps({
        "train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
        "zero_optimization": {"stage": 2}}))
    result = CliRunner().invoke(main, ["audit", "--model", LLAMA8B, "--gpus", "32", "--seq-len", "4096",
                                       "--launch", str(tmp_path / "run.sh"), "--launch",
                                       str(tmp_path / "ds_config.json"), "--json"])
    assert result.exit_code in (0, 1), result.output
    found = [f for f in json.loads(result.stdout)["findings"] if f["kind"] == "dp_not_overlapped"]
    assert found and "overlap_comm: true" in found[0]["message"] and found[0]["cost_s"] > 0


def test_audit_reads_bridge_comm_overlap_bucket(tmp_path: Path) -> None:
    """A Megatron-Bridge config's whole comm_overlap section with the distributed optimizer sets 128 Mi buckets
    over the DDP config's null (CommOverlapConfig._get_optimizer_overlap_cfgs); without it the DDP config's value
    stands, and a bucket that is not a whole number is refused, naming the key."""
    import yaml

    from placement.audit.launch import parse_launch
    from placement.errors import InputError
    from tests.test_align_param_gather import BRIDGE_DSV3

    cfg = yaml.safe_load(BRIDGE_DSV3.read_text(encoding="utf-8"))
    assert cfg["comm_overlap"]["bucket_size"] is None and cfg["ddp"]["bucket_size"] is None
    lay = parse_launch([BRIDGE_DSV3])
    assert lay.recipe["ddp_bucket_params"] == 128 * 1024 * 1024
    assert "CommOverlapConfig" in lay.sources["recipe.ddp_bucket_params"]
    del cfg["comm_overlap"]
    cfg["ddp"]["bucket_size"] = 40_000_000
    path = tmp_path / "no_section.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    assert parse_launch([path]).recipe["ddp_bucket_params"] == 40_000_000
    cfg["ddp"]["bucket_size"] = "4e7"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    with pytest.raises(InputError, match=r"ddp\.bucket_size must be a positive whole number"):
        parse_launch([path])


def test_a_small_megatron_bucket_is_warned_and_the_default_shown(tmp_path: Path) -> None:
    """Below 1M parameters per data-parallel rank Megatron-Core expects latency-bound rings, which placement does not
    price per bucket: the file says so.  The plan's recipe line names the default bucket where it has grown past 40M
    (the one that decides the DP time at a large dp)."""
    out = _plan(tmp_path, "--emit", "megatron", "--ddp-bucket-params", "1000")
    assert "--ddp-bucket-size 1,000 is under 1M parameters per data-parallel rank" in (out / "megatron.sh").read_text()
    result = CliRunner().invoke(main, ["evaluate", "--model", LLAMA8B, "--gpus", "8192", "--seq-len", "8192",
                                       "--global-batch", "16384", "--tp", "1", "--pp", "1", "--zero", "1", "--mbs",
                                       "1", "--recompute", "none"])
    assert "gradient buckets of 8,192,000,000 params (Megatron-Core's default" in result.output
