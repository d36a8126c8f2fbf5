"""torchtitan's TP ranks compute whole KV heads: its tensor_parallel_degree must divide n_kv_heads (update_from_config
raises it since pytorch/torchtitan#2577; before, the forward's reshape failed, #2574).  A user trial: `evaluate
--tp 16 --framework torchtitan` on Llama 3 8B (8 KV heads) was priced and written.  Megatron-Core 0.19 replicates a
KV head over the ranks that share it (transformer/attention.py, num_query_groups < world_size), so there the layout
stays."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

JOB = ("--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "4096", "--global-batch", "64",
       "--pp", "1", "--mbs", "1")


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_torchtitan_refuses_tp_beyond_the_kv_heads_and_megatron_takes_it() -> None:
    result = _run("evaluate", *JOB, "--tp", "16", "--zero", "3", "--framework", "torchtitan")
    assert result.exit_code == 2 and "tp 16 with 8 KV heads: its tensor_parallel_degree must divide n_kv_heads" in \
        result.output
    assert _run("evaluate", *JOB, "--tp", "8", "--zero", "3", "--framework", "torchtitan").exit_code in (0, 1)
    assert _run("evaluate", *JOB, "--tp", "16", "--zero", "1", "--framework", "megatron").exit_code in (0, 1)


def test_the_search_leaves_torchtitan_no_tp_beyond_the_kv_heads() -> None:
    """The mask `plan --framework torchtitan` enumerates by (search: Capability.layout_mask)."""
    from placement.cost.batch import LayoutBatch
    from placement.frameworks import CAPABILITIES
    from placement.specs import Layout

    batch = LayoutBatch.from_layouts([Layout(tp=8, pp=1, dp=8, zero_stage=3), Layout(tp=16, pp=1, dp=4, zero_stage=3)])
    # (a dense model's capability: torchtitan's expert-TP rule at ep 1, etp = tp, concerns MoE models only)
    assert CAPABILITIES["torchtitan"].for_model(False).layout_mask(batch, 32, kv_heads=8).tolist() == [True, False]
    assert CAPABILITIES["megatron"].for_model(False).layout_mask(batch, 32, kv_heads=8).tolist() == [True, True]


def test_the_audit_refuses_a_torchtitan_job_with_tp_beyond_the_kv_heads(tmp_path: Path) -> None:
    toml = tmp_path / "llama3_8b.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 1\nseq_len = 4096\n'
                    '[parallelism]\ndata_parallel_shard_degree = -1\ntensor_parallel_degree = 16\n')
    result = _run("audit", "--launch", str(toml), "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64")
    assert result.exit_code == 2, result.output
    assert "tensor_parallel_degree = 16" in result.output and "tp 16 with the 8 KV heads of llama3-8b" in result.output
