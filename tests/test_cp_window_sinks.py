"""Context parallelism where Transformer Engine runs it: TE's attn_forward_func_with_cp refuses its ring (p2p)
beside a sliding window and both priced exchanges beside a softmax with sinks (TransformerEngine d0067d0da
context_parallel.py:5054-5067).  A user trial: Mistral-7B's config at 32K on 8 H100 was planned tp1 cp4 with the
default ring, and megatron.sh wrote --context-parallel-size 4 with --window-size 4095,0 and no --cp-comm-type: a
file that stops at its first forward, priced as if it ran."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

MISTRAL = Path(__file__).parent / "data" / "hf" / "mistral-7b-v0.1" / "config.json"
JOB = ["--model", str(MISTRAL), "--gpus", "8", "--seq-len", "32768", "--global-batch", "64"]


def test_a_windowed_models_context_parallelism_is_all_gathered_and_said_why(tmp_path) -> None:
    got = CliRunner().invoke(main, ["--reproducible", "plan", *JOB, "--top-k", "1", "--framework", "megatron",
                                    "--out", str(tmp_path), "--emit", "megatron", "--json"])
    assert got.exit_code == 0, got.output
    plan = json.loads(got.stdout)["plans"][0]
    assert plan["layout"]["cp"] > 1  # the trial's layout: the window does not take CP away, only its ring
    assert plan["recipe"]["cp_comm_type"] == "all_gather"
    assert "sliding_window 4096" in plan["recipe_sources"]["cp_comm_type"]
    script = (tmp_path / "megatron.sh").read_text()
    assert f"--context-parallel-size {plan['layout']['cp']}" in script and "--cp-comm-type all_gather" in script
    # priced as the all-gather it runs: the ring the default would have priced is another number
    args = ["evaluate", *JOB, "--tp", "1", "--cp", str(plan["layout"]["cp"]), "--json"]
    gathered = json.loads(CliRunner().invoke(main, args).stdout)
    ring = CliRunner().invoke(main, [*args, "--cp-comm-type", "p2p"])
    assert gathered["recipe"]["cp_comm_type"] == "all_gather"
    assert ring.exit_code == 2 and "Traceback" not in ring.output
    assert "sliding window (4096 keys)" in ring.output and "--cp-comm-type all_gather" in ring.output


def test_a_model_without_a_window_keeps_the_ring() -> None:
    got = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--seq-len", "32768",
                                    "--global-batch", "64", "--tp", "1", "--cp", "4", "--recompute", "full",
                                    "--json"])
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout)["recipe"].get("cp_comm_type", "p2p") == "p2p"


def test_sinks_take_context_parallelism_out_of_the_search_and_evaluate_refuses_it() -> None:
    job = ["--model", "gpt-oss-120b", "--gpus", "64", "--seq-len", "65536", "--global-batch", "64"]
    refused = CliRunner().invoke(main, ["evaluate", *job, "--cp", "2"])
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert "attention sinks" in refused.output and "a2a" in refused.output and "--cp 1" in refused.output
    searched = CliRunner().invoke(main, ["--reproducible", "plan", *job, "--top-k", "5", "--json"])
    assert searched.exit_code == 0, searched.output
    plans = json.loads(searched.stdout)["plans"]
    assert plans and all(p["layout"]["cp"] == 1 for p in plans)


def test_a_framework_without_transformer_engine_keeps_its_context_parallelism() -> None:
    """A review: the rule fired for every framework in evaluate and audit, so torchtitan's plan of GPT-OSS at cp 4 was
    refused with a Transformer Engine message.  torchtitan refuses it for its own reason, which is what it says: its
    gpt_oss configs run varlen attention, which has no CP (torchtitan 0.3.0 distributed/full_dtensor.py:44-53;
    tests/test_torchtitan_cp_attention.py); its FlexAttention models keep their CP there."""
    job = ["--model", "gpt-oss-120b", "--gpus", "64", "--seq-len", "65536", "--global-batch", "64"]
    got = CliRunner().invoke(main, ["evaluate", *job, "--tp", "2", "--cp", "4", "--ep", "16", "--zero", "3",
                                    "--framework", "torchtitan", "--json"])
    assert got.exit_code == 2, got.output
    assert "Transformer Engine" not in got.output and "varlen attention" in got.output
