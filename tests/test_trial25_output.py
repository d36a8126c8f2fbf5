"""Output a user trial (published runs outside the calibration files) found wrong: the fabric line offered a flag a
catalog cluster refuses, the optimizer row named a master copy it does not hold under float32 weights, and a refusal
over capacity left out the bf16 optimizer state the run used."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.cli import main

JOB = ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--seq-len", "8192", "--global-batch", "8", "--tp", "1",
       "--pp", "1", "--mbs", "1", "--zero", "3", "--recompute", "full"]


def test_the_fabric_line_names_a_fix_a_catalog_cluster_takes():
    text = CliRunner().invoke(main, JOB).stdout
    fabric = next(x for x in text.splitlines() if x.startswith("fabric:"))
    assert "(--oversubscription changes it)" not in fabric
    assert "tiers[0].oversubscription, passed as --cluster FILE, changes it" in fabric
    refused = CliRunner().invoke(main, [*JOB, "--oversubscription", "2"])
    assert refused.exit_code == 2 and "tiers[0].oversubscription: 2" in refused.output


def test_float32_weights_name_the_master_copy_where_it_is():
    text = CliRunner().invoke(main, [*JOB, "--fp32-weights"]).stdout
    assert "optimizer state (Adam: fp32 moments; the fp32 weights are the master)" in text
    assert "optimizer state (Adam: fp32 master + fp32 moments)" in CliRunner().invoke(main, JOB).stdout


@pytest.mark.parametrize("extra", [(), ("--fp32-weights",), ("--no-optimizer-master-weights", "--mbs", "2")])
def test_a_refusal_over_capacity_offers_bf16_moments_with_what_they_save(extra):
    argv = ["evaluate", "--model", "nemotron-4-340b", "--gpus", "128", "--tp", "8", "--pp", "8", "--vpp", "12",
            "--mbs", "1", "--zero", "1", "--recompute", "selective", "--seq-len", "4096", "--global-batch", "32",
            *extra]
    refused = CliRunner().invoke(main, [*argv, "--json"])
    assert refused.exit_code == 1
    plan = json.loads(refused.stdout)
    optimizer = plan["memory"]["optimizer_bytes"]
    message = CliRunner().invoke(main, argv).output
    assert "--optimizer-state-bf16 if the job keeps Adam's moments in bf16" in message
    fitted = json.loads(CliRunner().invoke(main, [*argv, "--optimizer-state-bf16", "--json"]).stdout)
    less = (optimizer - fitted["memory"]["optimizer_bytes"]) / 1024**3
    assert f"optimizer state {optimizer / 1024**3:.1f} GiB, {less:.1f} less)" in message


def test_a_refusal_over_capacity_in_activations_says_offloading_is_not_priced():
    """A user trial: Megatron-Bridge's GB200 Llama 3 70B recipe (FSDP over 64, micro-batch 2, seq 8192) runs at this
    layout by offloading 40 layers' activations to the Grace host, and `evaluate` said DOES NOT FIT with no word that
    offloading is a way the job runs it.  Where the activations are most of the peak, the refusal says offloading is
    not priced; where they are not, it does not."""
    argv = ["evaluate", "--model", "llama3-70b", "--cluster", "gb200-nvl72", "--gpus", "64", "--seq-len", "8192",
            "--global-batch", "256", "--precision", "fp8", "--tp", "1", "--pp", "1", "--zero", "3", "--mbs", "2",
            "--recompute", "none"]
    refused = CliRunner().invoke(main, argv)
    assert refused.exit_code == 1
    assert "activation offloading to host memory (Megatron-Core's cpu_offloading_num_layers" in refused.output
    assert "of the 280.0 GiB of activations" in refused.output
    state_bound = CliRunner().invoke(main, ["evaluate", "--model", "nemotron-4-340b", "--gpus", "128", "--tp", "8",
                                            "--pp", "8", "--vpp", "12", "--mbs", "1", "--zero", "1", "--recompute",
                                            "selective", "--seq-len", "4096", "--global-batch", "32"])
    assert state_bound.exit_code == 1 and "activation offloading" not in state_bound.output
