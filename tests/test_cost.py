"""Cost-model behaviours that earlier reviews found wrong, pinned: each test fails if the fix regresses."""

from __future__ import annotations

import pytest

from placement.catalog import load_accelerator, load_cluster, load_model
from placement.cost.batch import LayoutBatch
from placement.cost.step import estimate
from placement.specs import Layout, MoESpec, TrainingSpec
from placement.specs.recipe import Recipe
from placement.topology import Topology
from placement.workload import workload

H800 = load_cluster("hgx-h800")


def ep_time(model, layout: Layout, gpus: int = 2048, dispatcher: str = "deepep") -> float:
    topo = Topology(H800, load_accelerator(H800.accelerator), num_gpus=gpus)
    train = TrainingSpec(seq_len=4096, global_batch=15360, precision="fp8")
    recipe = Recipe(moe_dispatcher=dispatcher)
    return float(estimate(workload(model), train, topo, LayoutBatch.from_layouts([layout], recipe), recipe).ep_s[0])


def test_group_limited_routing_sends_a_token_once_per_node():
    """DeepEP sends a token once per destination node; group-limited routing (DeepSeek-V3 §2.1.2: at most 4
    nodes) bounds those nodes.  NCCL's all-to-all sends a copy per routed expert, so it saves nothing."""
    limited = load_model("deepseek-v3")
    unlimited = limited.model_copy(update={"moe": limited.moe.model_copy(
        update={"num_expert_groups": None, "groups_per_token": None})})
    across_nodes = Layout(tp=1, ep=64, pp=16, dp=128, zero_stage=1)  # 8 nodes, one expert group each
    ratio = ep_time(limited, across_nodes) / ep_time(unlimited, across_nodes)
    assert 0.55 < ratio < 0.8  # about 3.6 of 5.25 distinct nodes per token; NVLink and latency stay
    nccl = (ep_time(limited, across_nodes, dispatcher="alltoall")
            / ep_time(unlimited, across_nodes, dispatcher="alltoall"))
    assert nccl == pytest.approx(1.0)
    inside_node = Layout(tp=1, ep=8, pp=16, dp=128, zero_stage=1)
    assert ep_time(limited, inside_node) == pytest.approx(ep_time(unlimited, inside_node))


def test_group_limited_routing_fields_are_checked():
    with pytest.raises(ValueError, match="go together"):
        MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=64, num_expert_groups=4)
    with pytest.raises(ValueError, match=r"groups_per_token \(5\) > moe.num_expert_groups \(4\)"):
        MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=64, num_expert_groups=4, groups_per_token=5)


def test_interleaving_with_uneven_first_and_last_stages():
    """Llama 3 ran interleaved 1F1B on 126 layers over 16 stages (first and last one layer short)."""
    topo = Topology(load_cluster("dgx-h100"), load_accelerator("h100-sxm"), num_gpus=16384)
    train = TrainingSpec(seq_len=8192, global_batch=2048)
    lays = [Layout(tp=8, pp=16, vpp=v, dp=128, zero_stage=1, sequence_parallel=True) for v in (1, 2)]
    est = estimate(workload(load_model("llama3-405b")), train, topo, LayoutBatch.from_layouts(lays))
    assert est.valid.all()
    assert est.bubble_s[1] < est.bubble_s[0]


def test_hbm_capacity_is_what_the_gpu_reports():
    # nvidia-smi shows 81559 MiB for an H100 80GB HBM3: the nominal 80 GB is GiB, not 1e9 bytes
    assert load_accelerator("h100-sxm").hbm_bytes == 81559 * 2**20
    # GB200 reports 189471 MiB (185.0 GiB of the nominal 186 GB), B200 183359 MiB: a buyer's trial found GB200 read as
    # 186 GiB, a plan at 181.6 GiB over the 181.3 GiB the allocator can use
    assert load_accelerator("gb200").hbm_bytes == 189471 * 2**20
    assert load_accelerator("b200").hbm_bytes == 183359 * 2**20
