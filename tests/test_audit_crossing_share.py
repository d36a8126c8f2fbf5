"""A TP/CP/EP crossing finding names the tier where its groups' traffic slows, and prices only what its remedy does to
that traffic (a QA run: Llama 3 405B with CP pairs dealt over three spines got `cp_crosses_spine` "at 12 GB/s per GPU
instead of 12 GB/s inside it", 0.136 s a step saved by "placement's mapping of the same layout", where CP's traffic
was fully overlapped and the whole saving was the data-parallel groups' order)."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from placement.cli import main

LLAMA3_405B = """#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nproc_per_node 8 --nnodes 96 pretrain_gpt.py \\
    --num-layers 126 --hidden-size 16384 --num-attention-heads 128 \\
    --swiglu --ffn-hidden-size 53248 --group-query-attention --num-query-groups 8 \\
    --seq-length 8192 --max-position-embeddings 8192 \\
    --position-embedding-type rope --rotary-base 500000 --use-rope-scaling \\
    --untie-embeddings-and-output-weights --normalization RMSNorm --disable-bias-linear \\
    --tokenizer-type NullTokenizer --vocab-size 128256 \\
    --tensor-model-parallel-size 8 --sequence-parallel --context-parallel-size 2 \\
    --pipeline-model-parallel-size 6 --num-layers-per-virtual-pipeline-stage 3 \\
    --micro-batch-size 1 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 \\
    --global-batch-size 192 \\
    --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --bf16 --attention-backend flash
"""


def _three_spines(tmp_path):
    """96 DGX A100 nodes: six leaves of 16 under three spines under a core, and the job's node ranks dealt
    round-robin over the spines (a scheduler's interleaved host list), so each CP pair spans two spines."""
    conf = tmp_path / "topology.conf"
    conf.write_text("".join(f"SwitchName=leaf{i} Nodes=gpu[{16 * i + 1:03d}-{16 * i + 16:03d}]\n" for i in range(6))
                    + "".join(f"SwitchName=spine{s} Switches=leaf[{2 * s}-{2 * s + 1}]\n" for s in range(3))
                    + "SwitchName=core Switches=spine[0-2]\n")
    spines = [[f"gpu{i:03d}" for i in range(32 * s + 1, 32 * s + 33)] for s in range(3)]
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("\n".join(h for trio in zip(*spines, strict=True) for h in trio) + "\n")
    script = tmp_path / "train.sh"
    script.write_text(LLAMA3_405B)
    return ["audit", "--launch", str(script), "--model", "llama3-405b", "--slurm-topology", str(conf),
            "--nodelist", "gpu[001-096]", "--node-type", "dgx-a100-80g", "--hosts", str(hosts), "--json"]


def _audit(args: list[str]) -> dict:
    result = CliRunner().invoke(main, ["--reproducible", *args], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_a_crossing_into_a_tier_as_fast_as_the_one_left_is_no_finding_and_cp_gets_only_its_own_saving(tmp_path):
    data = _audit([*_three_spines(tmp_path), "--oversubscription", "2"])
    exposed_cp = data["estimate"]["breakdown"]["exposed"]["cp"]
    assert exposed_cp == 0.0  # CP's ring is hidden behind attention here
    kinds = {f["kind"]: f for f in data["findings"]}
    # the core above the spines carries the leaves' 2:1 and the spine's rate: crossing into it is no slower
    assert "cp_crosses_spine" not in kinds
    for f in data["findings"]:
        rates = re.search(r"at (\d+) GB/s per GPU instead of (\d+) GB/s inside it", f["message"])
        assert rates is None or rates[1] != rates[2], f["message"]
    # the CP pairs' slow step is the 2:1 leaf uplink, and placement's map of the same layout saves CP nothing
    cp = kinds["cp_crosses_leaf"]
    assert "at 12 GB/s per GPU instead of 23 GB/s inside it" in cp["message"]
    assert cp["cost_s"] == 0.0 and cp["severity"] == "info"
    assert "CP's exposed time 0.000 -> 0.000 s, nothing saved" in cp["message"]
    # what that map saves is the host order's, said there with the data-parallel terms it moves
    order = kinds["host_order_crossings"]
    assert order["cost_s"] > 0.1
    assert f"that map saves {order['cost_s']:.3f} s per step in all, the rest in other groups' traffic; see " \
           f"host_order_crossings" in cp["message"]
    assert "the time is in dp " in order["message"]


def test_an_equal_rate_fabric_above_the_nodes_raises_no_spine_or_leaf_crossing(tmp_path):
    data = _audit(_three_spines(tmp_path))  # every tier above the node at the NICs' 23 GB/s per GPU
    kinds = {f["kind"] for f in data["findings"]}
    assert not kinds & {"cp_crosses_spine", "cp_crosses_leaf", "tp_crosses_spine", "tp_crosses_leaf"}


def test_cp_pairs_whose_tp_groups_fill_the_node_are_offered_no_remap_of_the_same_layout(tmp_path):
    """A QA round: on the equal-rate fabric the tp 8, cp 2 job's CP pairs (ranks r and r + 8) cross the 8-GPU nodes,
    and `cp_crosses_node` offered "placement's mapping of the same layout" since the pair (2) fits a node; no map of
    the layout keeps a pair inside a node with its two TP groups whole (tp x cp = 16 ranks).  The remedy is a layout
    whose tp x cp fits the node, and the crossing is priced at no more than CP's own exposed time (0 here: the rest
    of what that layout saves is its other changes)."""
    data = _audit(_three_spines(tmp_path))
    (cp,) = [f for f in data["findings"] if f["kind"] == "cp_crosses_node"]
    assert "placement's mapping of the same layout" not in cp["message"]
    assert ("the job's largest holds 8 GPUs; a cp group with the tp groups inside it spans tp 8 x cp 2 = 16 ranks, "
            "more than that, so no map of this layout keeps it inside with its tp groups whole") in cp["message"]
    named = re.search(r"the best layout with tp x cp <= 8 \(tp (\d+), cp (\d+), ", cp["message"])
    assert named and int(named[1]) * int(named[2]) <= 8, cp["message"]
    assert "of which this crossing accounts for at most CP's exposed 0.000 s" in cp["message"]
    assert cp["cost_s"] == 0.0 and cp["severity"] == "info"
