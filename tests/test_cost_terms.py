"""The cost model's named terms, one physical outcome each: every test fails if its term is removed or broken.

Terms are called directly on a Ctx (placement.cost.context) where the outcome is the term's own; through
`estimate` where it is what the term does to the step (host-bound micro-batch and TP choices, bubbles,
memory, MTP, pipeline layouts).  Three tests pin fixes of bugs these tests found (DDP's fp32 all-reduce, the
ZeRO-1 traffic widths, FP8 dispatch under BF16).
"""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import pytest

from placement.catalog import load_accelerator, load_cluster, load_model
from placement.cost import constants as C
from placement.cost.batch import LayoutBatch
from placement.cost.comm import cp_term, distinct_targets, ep_exposed, ep_term, pp_term, tp_term, unpaired_share
from placement.cost.context import Ctx, context
from placement.cost.dp import StageParams, dp_term
from placement.cost.host import GRAPHED_HOST_SHARE, host_term
from placement.cost.layer import attention_forward, eager_model_ops, layer_compute
from placement.cost.memory import in_flight, layer_activations
from placement.cost.pipeline import POLICY_EXPLICIT, stage_kinds
from placement.cost.step import Estimates, estimate
from placement.errors import InputError
from placement.specs import Layout, ModelSpec, TrainingSpec
from placement.specs.recipe import CudaGraphs, Dispatcher, Recipe
from placement.specs.recipe import RecomputeModule as M
from placement.topology import Topology
from placement.workload import Workload, workload

PLAIN = Recipe()
"""Megatron defaults: NCCL all-to-all, no CUDA graphs, no overlaps but DP's and the asynchronous TP backward, real-data
routing."""
QWEN_EP16 = Layout(ep=16, dp=16)
"""Qwen3-30B-A3B on 16 DGX-H100 GPUs, EP16 over two nodes (Megatron-Bridge 26.04 H100 row)."""
DSV3_EP64 = Layout(tp=1, ep=64, pp=16, dp=128)
"""DeepSeek-V3 on 2,048 H800: each EP group spans 8 nodes, one expert group per node."""
DSV3_EP8 = Layout(tp=1, ep=8, dp=8)
"""DeepSeek-V3 on one 64-GPU slice, EP inside a node, all 61 layers on one rank."""
LLAMA_TP8 = Layout(tp=8, pp=4, dp=32, sequence_parallel=True)
"""Llama 3 70B on 1,024 H100: TP inside a node, DP across nodes."""
HOST_BOUND = Recipe(moe_dispatcher=Dispatcher.HYBRIDEP, routing_imbalance=1.0, fp8_recipe="tensorwise",
                    grad_reduce_fp32=True, cross_entropy_fusion=True)
"""The recipe of calibration run megatron-bridge-26.04-h100-qwen3-30b-a3b-16gpu
(placement/calibration/runs-moe.yaml)."""


@cache
def _topo(cluster: str, gpus: int) -> Topology:
    spec = load_cluster(cluster)
    return Topology(spec, load_accelerator(spec.accelerator), num_gpus=gpus)


@cache
def _model(name: str) -> ModelSpec:
    return load_model(name)


def _workload(model: str | ModelSpec | Workload) -> Workload:
    if isinstance(model, Workload):
        return model
    return workload(_model(model) if isinstance(model, str) else model)


def _job(model, cluster: str, gpus: int, layout: Layout, recipe: Recipe, precision: str, seq_len: int,
         global_batch: int):
    train = TrainingSpec(seq_len=seq_len, global_batch=global_batch, precision=precision)
    return _workload(model), train, _topo(cluster, gpus), LayoutBatch.from_layouts([layout], recipe)


def _ctx(model, cluster: str, gpus: int, layout: Layout, recipe: Recipe = PLAIN, precision: str = "bf16",
         seq_len: int = 4096, global_batch: int = 1024) -> Ctx:
    w, train, topo, batch = _job(model, cluster, gpus, layout, recipe, precision, seq_len, global_batch)
    return context(w, train, topo, batch, recipe)


def _est(model, cluster: str, gpus: int, layout: Layout, recipe: Recipe = PLAIN, precision: str = "bf16",
         seq_len: int = 4096, global_batch: int = 1024) -> Estimates:
    w, train, topo, batch = _job(model, cluster, gpus, layout, recipe, precision, seq_len, global_batch)
    return estimate(w, train, topo, batch, recipe)


def _f(a) -> float:
    return float(np.asarray(a).ravel()[0])


def _without_group_limit(name: str) -> ModelSpec:
    spec = _model(name)
    return spec.model_copy(update={"moe": spec.moe.model_copy(update={"num_expert_groups": None,
                                                                       "groups_per_token": None})})


# --- compute (cost.layer) -------------------------------------------------------------------------------


def test_mla_projections_are_priced_at_their_real_shapes():
    """MLA's up-projections have K = q_lora_rank / kv_lora_rank (1536, 512), far below one lumped GEMM's
    K = hidden, so they run less efficiently (arXiv:2405.04434 §2.1; Workload.attn_gemms)."""
    w = _workload("deepseek-v3")
    assert sum(n * k for n, k, _ in w.attn_gemms) == w.attn_params  # same FLOPs, split five ways
    lumped = dataclasses.replace(w, attn_gemms=((w.attn_params / w.hidden, w.hidden, 1),))
    real = _f(attention_forward(_ctx(w, "hgx-h800", 64, DSV3_EP8))[0])
    one_gemm = _f(attention_forward(_ctx(lumped, "hgx-h800", 64, DSV3_EP8))[0])
    assert real > 1.1 * one_gemm


def test_mla_down_projections_do_not_shrink_with_tp():
    """MLA's down-projections run whole on every TP rank (Megatron `parallel_mode="duplicated"`); the
    column-parallel up-projections split their N over TP."""
    w = _workload("deepseek-v3")
    down = dataclasses.replace(w, attn_gemms=tuple(g for g in w.attn_gemms if g[2] == 0))
    up = dataclasses.replace(w, attn_gemms=tuple(g for g in w.attn_gemms if g[2] == 1))
    assert len(down.attn_gemms) == 2 and len(up.attn_gemms) == 2

    def proj(wl, tp):
        return _f(attention_forward(_ctx(wl, "hgx-h800", 64, Layout(tp=tp, ep=8, dp=64 // tp)))[0])

    assert proj(down, 8) == pytest.approx(proj(down, 1), rel=1e-12)
    assert proj(up, 1) / proj(up, 8) > 5.0
    assert proj(w, 8) > proj(down, 8) + proj(up, 8)  # the row-parallel output projection comes on top


def test_fp8_quantisation_traffic_tensorwise_costs_more_than_mxfp8(monkeypatch):
    """FP8 GEMM inputs are quantised through HBM: per-tensor scaling reads once more for the amax, 6 vs 4
    bytes per element (constants.FP8_QUANT_BYTES_PER_ELEMENT, Transformer Engine current scaling); the GEMMs at one
    rate here (MXFP8's own GEMM efficiency is tests/test_blackwell_dense_fp8.py's)."""
    monkeypatch.setattr(C, "MXFP8_GEMM_EFFICIENCY", 1.0)

    def dense(fp8_recipe):
        return _f(layer_compute(_ctx("deepseek-v3", "dgx-b200", 64, DSV3_EP8, Recipe(fp8_recipe=fp8_recipe),
                                     "fp8")).dense_s)

    tensorwise, mxfp8 = dense("tensorwise"), dense("mxfp8")
    for key in C.FP8_QUANT_BYTES_PER_ELEMENT:
        monkeypatch.setitem(C.FP8_QUANT_BYTES_PER_ELEMENT, key, 0.0)
    gemms_only = dense("mxfp8")
    assert mxfp8 > gemms_only * 1.01
    assert (tensorwise - gemms_only) / (mxfp8 - gemms_only) == pytest.approx(6.0 / 4.0, rel=1e-9)


def test_router_and_lm_head_stay_bf16_under_fp8():
    """Router and LM head run 16-bit under FP8 (Megatron-Core DeepSeek-V3 GB200 write-up §1 item 1):
    their time is the same at both precisions while the expert GEMMs speed up."""
    def parts(precision):
        x = _ctx("qwen3-30b-a3b", "dgx-h100", 16, QWEN_EP16, Recipe(), precision)
        lc = layer_compute(x)
        # qwen3-30b-a3b has no shared experts: the MoE forward is attention, experts and router
        router = lc.moe_forward_s - lc.attn_s / x.passes - lc.experts_s / x.passes
        return _f(lc.head_s), _f(router), _f(lc.experts_s)

    head16, router16, experts16 = parts("bf16")
    head8, router8, experts8 = parts("fp8")
    assert router16 > 0
    assert head8 == pytest.approx(head16, rel=1e-12)
    assert router8 == pytest.approx(router16, rel=1e-9)
    assert experts8 < 0.9 * experts16


def test_routing_imbalance_scales_expert_time_and_a_capacity_factor_caps_it():
    """The busiest EP rank computes imbalance x the mean token-expert pairs (its GEMMs grow slightly less
    than 1.2x: larger M runs more efficiently); capacity factor 1.0 drops the excess
    (`--moe-expert-capacity-factor`)."""
    def experts(recipe):
        lay = Layout(ep=16, dp=16, micro_batch_size=4)
        return _f(layer_compute(_ctx("qwen3-30b-a3b", "dgx-h100", 16, lay, recipe)).experts_s)

    balanced = experts(Recipe(routing_imbalance=1.0))
    ratio = experts(Recipe(routing_imbalance=1.2)) / balanced
    assert ratio == pytest.approx(1.2, rel=0.01) and ratio <= 1.2 + 1e-12
    assert experts(Recipe(routing_imbalance=1.2, moe_capacity_factor=1.0)) == pytest.approx(balanced, rel=1e-12)
    assert experts(Recipe()) == pytest.approx(experts(Recipe(routing_imbalance=C.REAL_ROUTING_IMBALANCE)), rel=1e-12)


EAGER = Recipe(fused_model_ops=False, routing_imbalance=1.0)
GPT_OSS_EP8 = Layout(ep=8, dp=8)


def test_eager_model_ops_cost_only_what_the_model_has_and_only_unfused():
    """GPT-OSS's clamp, expert-bias loop, YaRN RoPE and bias add cost HBM time only when the recipe runs them
    unfused; a model without those extras (Qwen3: no clamp, no biases, plain RoPE) costs nothing either way."""
    oss_eager = layer_compute(_ctx("gpt-oss-120b", "dgx-h100", 64, GPT_OSS_EP8, EAGER))
    oss_fused = layer_compute(_ctx("gpt-oss-120b", "dgx-h100", 64, GPT_OSS_EP8,
                                   EAGER.model_copy(update={"fused_model_ops": True})))
    assert _f(oss_eager.moe_s) > 1.05 * _f(oss_fused.moe_s)
    assert _f(oss_eager.attn_s) > _f(oss_fused.attn_s)
    qwen = [layer_compute(_ctx("qwen3-30b-a3b", "dgx-h100", 64, GPT_OSS_EP8, r)).moe_s
            for r in (EAGER, EAGER.model_copy(update={"fused_model_ops": True}))]
    assert _f(qwen[0]) == _f(qwen[1])


def test_eager_expert_ops_follow_the_routed_pairs_and_moe_act_recompute_reruns_the_clamp():
    """The clamp and bias loop run over every token-expert pair the rank computes: twice the routing load,
    twice the time.  `moe_act` recompute reruns the clamp's forward, not the bias loop."""
    base = _ctx("gpt-oss-120b", "dgx-h100", 64, GPT_OSS_EP8, EAGER)
    one = eager_model_ops(base, base.tokens * 4 * base.expert_load)
    two = eager_model_ops(base, base.tokens * 8 * base.expert_load)
    assert _f(two.experts_s) == pytest.approx(2 * _f(one.experts_s))
    plain = layer_compute(base)
    selective = GPT_OSS_EP8.model_copy(update={"recompute": "selective"})
    act = {"recompute_modules": ("moe_act",)}

    def moe(layout: Layout, **update) -> float:
        return _f(layer_compute(_ctx("gpt-oss-120b", "dgx-h100", 64, layout, EAGER.model_copy(update=update))).moe_s)

    rerun, fused = moe(selective, **act), moe(selective, **act, fused_model_ops=True)
    fused_plain = moe(GPT_OSS_EP8, fused_model_ops=True)
    clamp_rerun = (rerun - _f(plain.moe_s)) - (fused - fused_plain)
    assert clamp_rerun == pytest.approx(_f(one.act_forward_s), rel=1e-9)


# --- host (cost.host) -----------------------------------------------------------------------------------


def _host(layout=QWEN_EP16, recipe=PLAIN, precision="bf16", graphs=CudaGraphs.NONE, ep_overlap=False):
    return host_term(_ctx("qwen3-30b-a3b", "dgx-h100", 16, layout, recipe, precision), graphs, ep_overlap)


def test_host_time_grows_with_local_experts_under_fp8():
    """The MXFP8 grouped GEMM launches per local expert, with its quantisation kernels (constants
    KERNELS_PER_EXPERT_*; write-up §1 item 3, §2.1.2); a 16-bit grouped GEMM is one launch for all of them."""
    fp8_ep16, fp8_ep8 = (_f(_host(lay, precision="fp8").moe_s) for lay in (QWEN_EP16, Layout(ep=8, dp=16)))
    assert fp8_ep8 > 1.2 * fp8_ep16
    assert fp8_ep16 > 1.2 * _f(_host().moe_s)
    assert _f(_host(Layout(ep=8, dp=16)).moe_s) == pytest.approx(_f(_host().moe_s), rel=1e-12)
    assert _f(_host(precision="fp8").dense_s) == pytest.approx(_f(_host().dense_s), rel=1e-12)


def test_cuda_graphs_cut_host_time_partial_less_than_full():
    """Partial graphs (attn, moe_router, moe_preprocess) leave experts and dispatch eager; full-iteration
    graphs replay everything with one launch (write-up §2.3)."""
    for kind in ("moe_s", "dense_s"):
        none, partial, full = (_f(getattr(_host(graphs=g), kind))
                               for g in (CudaGraphs.NONE, CudaGraphs.PARTIAL, CudaGraphs.FULL))
        assert none > partial >= full, kind
        assert full == pytest.approx(GRAPHED_HOST_SHARE * none, rel=1e-12), kind
    assert _f(_host(graphs=CudaGraphs.PARTIAL).moe_s) > _f(_host(graphs=CudaGraphs.FULL).moe_s)


def test_static_shapes_remove_the_moe_host_sync():
    """Dropless MoE syncs tokens-per-expert to the host once per MoE forward (write-up §3.1); a capacity
    factor or full-iteration graphs make the shapes static and remove it."""
    assert _f(_host().syncs_per_moe_layer) == 1.0
    assert _f(_host(graphs=CudaGraphs.PARTIAL).syncs_per_moe_layer) == 1.0
    assert _f(_host(graphs=CudaGraphs.FULL).syncs_per_moe_layer) == 0.0
    assert _f(_host(recipe=Recipe(moe_capacity_factor=1.0)).syncs_per_moe_layer) == 0.0
    # and the step loses the sync's idle GPU
    dropless = _est("qwen3-30b-a3b", "dgx-h100", 16, QWEN_EP16, HOST_BOUND, "fp8")
    dropping = _est("qwen3-30b-a3b", "dgx-h100", 16, QWEN_EP16, HOST_BOUND.model_copy(
        update={"moe_capacity_factor": 1.0}), "fp8")
    assert _f(dropping.host_s) < _f(dropless.host_s)


def test_unbound_cpu_issues_kernels_slower():
    """A process not bound to its GPU's cores and NUMA node issues kernels slower (write-up §2.4)."""
    bound, unbound = _host(), _host(recipe=Recipe(cpu_affinity=False))
    assert _f(unbound.moe_s) / _f(bound.moe_s) == pytest.approx(C.HOST_UNBOUND_SLOWDOWN, rel=1e-12)
    assert C.HOST_UNBOUND_SLOWDOWN > 1.0


def test_ep_overlap_adds_host_work():
    """The A2A overlap's two-stream scheduling adds host work per MoE layer (write-up §3.2)."""
    assert _f(_host(ep_overlap=True).moe_s) > _f(_host().moe_s)


def _zero_host(monkeypatch):
    monkeypatch.setattr(C, "HOST_S_PER_KERNEL", 0.0)
    monkeypatch.setattr(C, "HOST_SYNC_S", 0.0)


def test_host_bound_moe_job_gains_more_from_a_larger_micro_batch(monkeypatch):
    """Host time per micro-batch is fixed, GPU work per kernel grows with the micro-batch: a host-bound MoE
    job gains from raising it (Megatron-Core MoE README on CPU overhead), beyond what it gains without host cost."""
    def step(mbs):  # same global batch: step time is time per token
        lay = Layout(ep=16, dp=16, micro_batch_size=mbs)
        return _est("qwen3-30b-a3b", "dgx-h100", 16, lay, HOST_BOUND, "fp8")

    one, two = step(1), step(2)
    assert _f(one.host_s) > 0.1 * _f(one.step_time_s)  # host-bound
    with_host = _f(two.step_time_s) / _f(one.step_time_s)
    _zero_host(monkeypatch)
    assert _f(step(1).host_s) == 0.0
    without_host = _f(step(2).step_time_s) / _f(step(1).step_time_s)
    assert with_host < without_host - 0.05


def test_host_bound_moe_job_prefers_lower_tp(monkeypatch):
    """TP shrinks every GEMM but not the kernel count, and doubles the micro-batches per step: a host-bound
    job runs faster at lower TP, by far more than without host cost."""
    def step(tp):
        lay = Layout(tp=tp, ep=16, dp=16 // tp, sequence_parallel=tp > 1)
        return _f(_est("qwen3-30b-a3b", "dgx-h100", 16, lay, HOST_BOUND, "fp8").step_time_s)

    with_host = step(2) / step(1)
    _zero_host(monkeypatch)
    without_host = step(2) / step(1)
    assert with_host > 1.0
    assert with_host > without_host + 0.3


# --- expert parallelism (cost.comm) ---------------------------------------------------------------------


def test_distinct_targets_of_top_k_picks():
    """Expected distinct bins of k uniform picks: bins (1 - (1 - 1/bins)^k)."""
    assert _f(distinct_targets(2.0, 2.0)) == pytest.approx(1.5, rel=1e-12)
    assert _f(distinct_targets(8.0, 1.0)) == pytest.approx(1.0, rel=1e-12)
    assert _f(distinct_targets(1.0, 8.0)) == pytest.approx(1.0, rel=1e-12)
    assert _f(distinct_targets(1e9, 8.0)) == pytest.approx(8.0, rel=1e-6)


def _dsv3_ep(dispatcher, model="deepseek-v3", recipe=PLAIN):
    x = _ctx(model, "hgx-h800", 2048, DSV3_EP64, recipe, "fp8", global_batch=15360)
    return x, ep_term(x, dispatcher)


def test_deepep_sends_once_per_destination_node_nccl_once_per_expert():
    """NCCL all-to-all sends a token's k = 8 copies; DeepEP sends it once per destination node over IB
    and once per GPU over NVLink, at near line rate (DeepEP README normal kernels; DeepSeek-V3 §3.2.2)."""
    _, nccl = _dsv3_ep(Dispatcher.ALLTOALL)
    _, deepep = _dsv3_ep(Dispatcher.DEEPEP)
    assert _f(deepep.total_s) < 0.5 * _f(nccl.total_s)
    assert _f(deepep.bytes_per_layer) < _f(nccl.bytes_per_layer)
    assert deepep.sms == C.DISPATCHER_SMS["deepep"] and nccl.sms == 0


def test_nccl_all_to_all_runs_at_the_nic_rate_over_the_network_and_half_of_nvlink(monkeypatch):
    """NCCL's all-to-all reaches a single NIC's rate across nodes (nccl-tests#267) but about half of NVLink
    inside one (A2A_EFFICIENCY).  An EP64 dispatch over 8 B200 nodes, bound by its network bytes, takes half
    the time it would at NVLink's efficiency; an EP8 dispatch inside a node does not change."""
    def ep_s(layout: Layout) -> float:
        return _f(ep_term(_ctx("gpt-oss-120b", "dgx-b200", 64, layout), Dispatcher.ALLTOALL).total_s)

    wide, narrow = Layout(ep=64, dp=64), Layout(ep=8, dp=64)
    at_nic, in_node = ep_s(wide), ep_s(narrow)
    monkeypatch.setattr(C, "NETWORK_A2A_EFFICIENCY", {})
    assert ep_s(wide) == pytest.approx(at_nic / C.A2A_EFFICIENCY["alltoall"], rel=0.05)
    assert ep_s(narrow) == pytest.approx(in_node, rel=1e-9)


def test_group_limited_routing_cuts_deepep_network_time_not_nccl():
    """Group-limited routing puts a token's 8 experts on at most 4 of the 8 nodes (DeepSeek-V3 §2.1.2):
    expected distinct nodes 4(1 - (3/4)^8) instead of 8(1 - (7/8)^8).  DeepEP's IB time falls in that
    ratio; NCCL's all-to-all still sends every copy."""
    limited_nodes = 4 * (1 - (3 / 4) ** 8)
    free_nodes = 8 * (1 - (7 / 8) ** 8)
    unlimited = _without_group_limit("deepseek-v3")
    deepep = _f(_dsv3_ep(Dispatcher.DEEPEP)[1].total_s) / _f(_dsv3_ep(Dispatcher.DEEPEP, unlimited)[1].total_s)
    nccl = _f(_dsv3_ep(Dispatcher.ALLTOALL)[1].total_s) / _f(_dsv3_ep(Dispatcher.ALLTOALL, unlimited)[1].total_s)
    assert deepep == pytest.approx(limited_nodes / free_nodes, rel=0.05)
    assert nccl == pytest.approx(1.0, rel=1e-12)


def test_fp8_dispatch_halves_the_forward_dispatch():
    """FP8 dispatch moves 1-byte activations; combine and backward stay 16-bit (DeepSeek-V3 §3.3):
    forward dispatch + combine goes from 2 to 1.5 units."""
    for dispatcher in (Dispatcher.ALLTOALL, Dispatcher.DEEPEP):
        _, bf16 = _dsv3_ep(dispatcher)
        _, fp8 = _dsv3_ep(dispatcher, recipe=Recipe(dispatch_fp8=True))
        assert _f(fp8.forward_s) / _f(bf16.forward_s) == pytest.approx(0.75, rel=1e-12)
        assert _f(fp8.total_s) < _f(bf16.total_s)


def test_ep_overlap_hides_part_and_slows_compute_by_the_sms_it_holds():
    """1F1B A2A overlap hides EP_OVERLAP_HIDDEN of the all-to-all of the passes it pairs behind another micro-batch's
    compute (not the warm-up and cool-down passes, comm.unpaired_share); DeepEP's 24 SMs (of the GPU's) slow that
    compute (`--overlap-moe-expert-parallel-comm`)."""
    x, deepep = _dsv3_ep(Dispatcher.DEEPEP)
    lc = layer_compute(x)
    exposed, slow = (_f(a) for a in ep_exposed(x, deepep, lc, True))
    plain, no_slow = (_f(a) for a in ep_exposed(x, deepep, lc, False))
    total = _f(deepep.total_s)
    assert plain == total and no_slow == 0.0
    hidden = total - exposed
    paired = 1.0 - _f(unpaired_share(x))
    assert 0.0 < paired < 1.0
    assert hidden == pytest.approx(min(C.EP_OVERLAP_HIDDEN * paired * total, _f(lc.moe_s)), rel=1e-12)
    assert slow == pytest.approx(C.DISPATCHER_SMS["deepep"] / x.topo.accelerator.num_sms * hidden, rel=1e-12)
    assert 0 < slow < hidden
    # NCCL's all-to-all here outlasts the layer's compute: what hides is bounded by it
    _, nccl = _dsv3_ep(Dispatcher.ALLTOALL)
    nccl_exposed, nccl_slow = (_f(a) for a in ep_exposed(x, nccl, lc, True))
    assert _f(nccl.total_s) - nccl_exposed == pytest.approx(_f(lc.moe_s), rel=1e-12)
    assert nccl_slow == pytest.approx(C.OVERLAP_COMPUTE_SLOWDOWN * _f(lc.moe_s), rel=1e-12)


def test_dualpipe_hides_all_of_the_all_to_all():
    """DualPipe overlaps each chunk's all-to-all with the paired chunk's compute (DeepSeek-V3 §3.2.1)."""
    x = _ctx("deepseek-v3", "hgx-h800", 2048, DSV3_EP64, Recipe(pipeline_schedule="dualpipe"), "fp8",
             global_batch=15360)
    ept = ep_term(x, Dispatcher.DEEPEP)
    exposed, slow = ep_exposed(x, ept, layer_compute(x), False)
    assert _f(ept.total_s) > 0
    assert _f(exposed) == 0.0
    assert _f(slow) > 0.0
    one_f_one_b = _est("deepseek-v3", "hgx-h800", 2048, DSV3_EP64, Recipe(moe_dispatcher="deepep"), "fp8",
                       global_batch=15360)
    dualpipe = _est("deepseek-v3", "hgx-h800", 2048, DSV3_EP64, Recipe(moe_dispatcher="deepep",
                                                                       pipeline_schedule="dualpipe"), "fp8",
                    global_batch=15360)
    assert _f(one_f_one_b.ep_s) > 0 and _f(dualpipe.ep_s) == 0.0


def test_dualpipe_sets_aside_the_dispatch_sms_for_the_whole_chunk():
    """Under DualPipe the DeepEP kernels keep their SMs through the overlapped forward-and-backward chunk
    (DeepSeek-V3 §3.2.2: 20 of 132 SMs for communication): the MoE layer's compute runs on the rest,
    moe_s * sms / (num_sms - sms) longer, more than the SM share of the moving bytes alone."""
    x = _ctx("deepseek-v3", "hgx-h800", 2048, DSV3_EP64, Recipe(pipeline_schedule="dualpipe"), "fp8",
             global_batch=15360)
    ept = ep_term(x, Dispatcher.DEEPEP)
    lc = layer_compute(x)
    _, slow = ep_exposed(x, ept, lc, False)
    sms, n = C.DISPATCHER_SMS["deepep"], x.topo.accelerator.num_sms
    assert _f(slow) == pytest.approx(_f(lc.moe_s) * sms / (n - sms), rel=1e-12)
    assert _f(slow) > sms / n * min(_f(ept.total_s), _f(lc.moe_s))


def test_dualpipe_ranks_hold_two_stages():
    """DualPipe feeds micro-batches from both ends: rank i holds stage i of one model copy and stage pp-1-i
    of the other (DeepSeek-V3 §3.2.1, Table 2: 2x parameters; §3.2.3: the shallowest and deepest layers,
    embedding and output head, on one rank)."""
    one = stage_kinds(61, 3, 1, np.array([16]), np.array([1]), np.array([0]))
    two = stage_kinds(61, 3, 1, np.array([16]), np.array([1]), np.array([0]), bidirectional=True)

    def per_rank(st):
        return {int(r): (int(st.dense[k, 0]), int(st.moe[k, 0]), int(st.mtp[k, 0]), int(st.embed[k, 0]),
                         int(st.loss[k, 0])) for k, r in enumerate(st.rank[:, 0]) if st.num_ranks[k, 0]}

    a, b = per_rank(one), per_rank(two)
    assert a[0][3] == 1 and a[0][4] == 0 and a[15][4] == 1  # 1F1B: embedding first, loss last
    assert b[0] == tuple(x + y for x, y in zip(a[0], a[15], strict=True))  # DualPipe: both ends on rank 0 (and 15)
    every_twice = sum(n * m for n, m in zip(two.num_ranks[:, 0], two.moe[:, 0], strict=True))
    assert every_twice == 2 * 58  # every MoE layer twice


def test_dualpipe_paces_the_pipeline_at_the_mean_of_paired_stages_and_holds_twice_the_weights():
    """The loss-holding last stage no longer sets the pace alone: a DualPipe rank's micro-batch time is the
    mean of its two stages', and its weights are both stages' (DeepSeek-V3 Table 2: 2x parameters)."""
    lay = Layout(tp=8, pp=8, dp=16, sequence_parallel=True)
    f1b = _est("llama3-70b", "dgx-h100", 1024, lay, Recipe())
    dual = _est("llama3-70b", "dgx-h100", 1024, lay, Recipe(pipeline_schedule="dualpipe"))
    assert _f(dual.microbatch_s) < _f(f1b.microbatch_s)
    assert _f(dual.weights_bytes) / _f(f1b.weights_bytes) == pytest.approx(2.0, rel=0.05)


def test_activation_input_in_fp8_keeps_one_byte_per_up_projection_output():
    """`--activation-func-fp8-input-store` keeps the MLP activation's input (the up-projection outputs) as FP8:
    each routed token-expert pair keeps mlp_up * ffn bytes fewer (DeepSeek-V3 §3.3.2 caches it in FP8)."""
    base = layer_activations(_ctx("deepseek-v3", "hgx-h800", 64, DSV3_EP8))
    x = _ctx("deepseek-v3", "hgx-h800", 64, DSV3_EP8, Recipe(activation_func_fp8_input_store=True))
    fp8 = layer_activations(x)
    w = x.w
    pairs = _f(x.tokens) * w.top_k * x.expert_load
    saved = pairs * w.mlp_up * w.expert_ffn + _f(x.tokens) * w.mlp_up * w.shared_ffn_total
    assert _f(base.moe) - _f(fp8.moe) == pytest.approx(saved, rel=1e-9)
    assert _f(base.dense) - _f(fp8.dense) == pytest.approx(_f(x.tokens) * w.mlp_up * w.dense_ffn, rel=1e-9)


# --- tensor and context parallelism (cost.comm) ---------------------------------------------------------


def test_tp_overlap_hides_more_than_it_slows():
    """--tp-comm-overlap hides TP_OVERLAP_HIDDEN of the pipelined TP collectives behind the GEMMs and the
    column-parallel backward's beside their own GEMMs (bulk), at OVERLAP_COMPUTE_SLOWDOWN of what it hides (TE
    userbuffers; arXiv:2507.03114).  Without it, Megatron's asynchronous backward hides the bulk part alone; with
    that off too (`tp_async_backward` False), everything is exposed and nothing slows."""
    x = _ctx("llama3-70b", "dgx-h100", 1024, LLAMA_TP8)
    lc, tp = layer_compute(x), tp_term(x)
    bulk, backward = _f(tp.column_hidden_s), _f(tp.column_backward_s)
    d0, _, s0 = (_f(a) for a in tp.exposed(False, lc.dense_s))
    d1, _, s1 = (_f(a) for a in tp.exposed(True, lc.dense_s))
    dense = _f(tp.dense_s)
    assert 0 < bulk <= backward < dense
    assert d0 == pytest.approx(dense - bulk, rel=1e-12) and s0 == pytest.approx(C.OVERLAP_COMPUTE_SLOWDOWN * bulk)
    assert d1 == pytest.approx(dense - C.TP_OVERLAP_HIDDEN * (dense - backward) - bulk, rel=1e-12)
    assert 0 < s1 < d0 - d1 + s0
    y = _ctx("llama3-70b", "dgx-h100", 1024, LLAMA_TP8, recipe=Recipe(tp_async_backward=False))
    plain = tp_term(y)
    d2, _, s2 = (_f(a) for a in plain.exposed(False, lc.dense_s))
    assert d2 == pytest.approx(_f(plain.dense_s), rel=1e-12) and s2 == 0.0
    off = _est("llama3-70b", "dgx-h100", 1024, LLAMA_TP8)
    on = _est("llama3-70b", "dgx-h100", 1024, LLAMA_TP8, Recipe(tp_comm_overlap=True))
    assert bool(on.tp_comm_overlap[0])
    assert _f(on.tp_s) < 0.5 * _f(off.tp_s)
    assert _f(on.step_time_s) < _f(off.step_time_s)


def test_cp_ring_hides_behind_the_attention_core():
    """Ring attention overlaps the K/V exchange with the attention core (Llama 3 §3.3.2): at 32k tokens
    the core outlasts the ring, so CP moves bytes but exposes none."""
    lay = Layout(tp=8, cp=2, pp=4, dp=16, sequence_parallel=True)
    x = _ctx("llama3-70b", "dgx-h100", 1024, lay, seq_len=32768, global_batch=256)
    cp = cp_term(x, attention_forward(x)[1])
    assert _f(cp.total_s) > 0 and _f(cp.bytes_per_layer) > 0
    assert _f(cp.exposed_s) == 0.0


def test_pp_sends_once_per_virtual_stage():
    """Interleaving sends each micro-batch's activations across v times as many stage boundaries (PTD-P §2.2.2)."""
    def per_mb(vpp):
        lay = Layout(tp=8, pp=4, vpp=vpp, dp=32, sequence_parallel=True)
        return _f(pp_term(_ctx("llama3-70b", "dgx-h100", 1024, lay)).per_microbatch_s)

    assert per_mb(1) > 0
    assert per_mb(4) == pytest.approx(4 * per_mb(1), rel=1e-12)


def test_a_two_stage_pipeline_exchanges_in_one_paired_call():
    """pp 2 without interleaving: each stage makes one send/receive call per micro-batch (Megatron 1F1B:
    send_forward_recv_backward on the first, send_backward_recv_forward on the last), both directions at once,
    so it costs one transfer, half of a middle stage's two; interleaved, each rank has neighbours both ways;
    DeepSpeed's blocking end stage sends and receives in turn."""
    def per_mb(pp, vpp=1, recipe=PLAIN):
        lay = Layout(tp=8, pp=pp, vpp=vpp, dp=1024 // (8 * pp), sequence_parallel=True)
        return _f(pp_term(_ctx("llama3-70b", "dgx-h100", 1024, lay, recipe)).per_microbatch_s)

    assert per_mb(2) > 0
    assert per_mb(2) == pytest.approx(per_mb(4) / 2, rel=0.05)  # same bytes per boundary, one call not two
    assert per_mb(2, vpp=2) == pytest.approx(4 * per_mb(2), rel=1e-9)
    assert per_mb(2, recipe=Recipe(pipeline_p2p_blocking=True)) == pytest.approx(2 * per_mb(2), rel=1e-9)


def test_interleaved_transfers_show_only_where_they_outlast_a_chunk():
    """Under Megatron's overlap_p2p_comm (pp_comm_overlap) each activation transfer runs beside one chunk's
    forward and each gradient transfer beside one chunk's backward: with no compute to hide behind all of a
    transfer shows, with a long chunk none does, and what outlasts the chunk shows exactly; without virtual stages,
    or with the overlap off, every transfer shows."""
    from placement.cost.comm import pp_exposed_per_microbatch

    def parts(vpp, recipe=PLAIN):
        lay = Layout(tp=8, pp=4, vpp=vpp, dp=32, sequence_parallel=True)
        x = _ctx("llama3-70b", "dgx-h100", 1024, lay, recipe)
        return x, pp_term(x)

    x, pp = parts(4)
    whole = _f(pp.per_microbatch_s)
    fwd, bwd = _f(pp.forward_transfer_s), _f(pp.backward_transfer_s)
    assert whole == pytest.approx(4 * (fwd + bwd), rel=1e-12)
    assert _f(pp_exposed_per_microbatch(x, pp, np.zeros(1))) == pytest.approx(whole, rel=1e-12)
    assert _f(pp_exposed_per_microbatch(x, pp, np.full(1, 1.0))) == 0.0
    # a chunk of 80 / (4 x 4) = 5 layers whose forward is half the activation transfer: half of it shows
    layer_s = np.full(1, 3 * 0.5 * fwd / 5)
    left = 0.5 * fwd + max(bwd - 2 * 0.5 * fwd, 0.0)
    assert _f(pp_exposed_per_microbatch(x, pp, layer_s)) == pytest.approx(4 * left, rel=1e-9)
    x_off, pp_off = parts(4, Recipe(pp_comm_overlap=False))
    assert _f(pp_exposed_per_microbatch(x_off, pp_off, np.full(1, 1.0))) == pytest.approx(whole, rel=1e-12)
    x1, pp1 = parts(1)
    assert _f(pp_exposed_per_microbatch(x1, pp1, np.full(1, 1.0))) == _f(pp1.per_microbatch_s) > 0


def test_blocking_pipeline_sends_are_never_priced_as_overlapped():
    """DeepSpeed's blocking sends (pipeline_p2p_blocking) are not Megatron's overlapped pairs: all exposed."""
    lay = Layout(tp=4, pp=4, vpp=2, dp=64, sequence_parallel=True)
    est = _est("llama3-70b", "dgx-h100", 1024, lay, Recipe(pipeline_p2p_blocking=True), global_batch=256)
    assert _f(est.pp_s) == pytest.approx(_f(est.pp_total_s), rel=1e-12) and _f(est.pp_s) > 0


def test_overlapped_pipeline_transfers_are_reported_as_overlapped():
    """The step prices only the exposed transfers; the breakdown's pp total keeps them all."""
    lay = Layout(tp=8, pp=4, vpp=4, dp=32, sequence_parallel=True)
    on = _est("llama3-70b", "dgx-h100", 1024, lay, PLAIN, global_batch=256)
    off = _est("llama3-70b", "dgx-h100", 1024, lay, Recipe(pp_comm_overlap=False), global_batch=256)
    assert _f(on.pp_total_s) == pytest.approx(_f(off.pp_total_s), rel=1e-12) == pytest.approx(_f(off.pp_s))
    assert _f(on.pp_s) < _f(off.pp_s)
    assert _f(on.step_time_s) < _f(off.step_time_s)


# --- data parallelism (cost.dp) -------------------------------------------------------------------------


def _llama_dp(recipe=PLAIN, vpp=1, zero=1):
    lay = Layout(tp=8, pp=4, vpp=vpp, dp=32, zero_stage=zero, sequence_parallel=True)
    return _est("llama3-70b", "dgx-h100", 1024, lay, recipe, global_batch=256)


def test_fp32_grad_reduce_doubles_the_reduce_scatter_only():
    """grad_reduce_fp32 reduce-scatters 4-byte gradients; ZeRO-1's parameter all-gather stays 16-bit, so
    RS + AG goes from 2 + 2 to 4 + 2 (Megatron `accumulate_allreduce_grads_in_fp32`)."""
    ratio = _f(_llama_dp(Recipe(grad_reduce_fp32=True)).dp_s) / _f(_llama_dp().dp_s)
    assert ratio == pytest.approx(1.5, rel=0.01)


def test_interleaving_hides_more_of_the_zero1_reduce_scatter():
    """Under interleaving each model chunk's gradient buckets go when its last backward ends, behind the
    cooldown's later chunks (Megatron-Core distributed optimizer, per-chunk --overlap-grad-reduce); the last chunk,
    the first rank's chunk 0, holds the embedding whole, so not quite four times less is exposed.  Without the
    aligned gather, which exposes chunk 0's whole gather instead of hiding it (tests/test_align_param_gather.py)."""
    unaligned = PLAIN.model_copy(update={"align_param_gather": False})
    plain, interleaved = _llama_dp(unaligned, vpp=1), _llama_dp(unaligned, vpp=4)
    assert _f(plain.dp_s) == pytest.approx(_f(interleaved.dp_s), rel=1e-12)
    assert _f(plain.dp_exposed_s) > 0.2 * _f(plain.dp_s)
    assert _f(interleaved.dp_exposed_s) < 0.6 * _f(plain.dp_exposed_s)


def test_without_dp_overlap_all_of_it_is_exposed():
    """Without --overlap-grad-reduce/--overlap-param-gather the DP collectives run after compute."""
    for vpp in (1, 4):
        est = _llama_dp(Recipe(dp_overlap=False), vpp=vpp)
        assert _f(est.dp_s) > 0
        assert _f(est.dp_exposed_s) == pytest.approx(_f(est.dp_s), rel=1e-12)
        assert _f(est.dp_exposed_s) > _f(_llama_dp(vpp=vpp).dp_exposed_s)


def test_dp_term_direct_interleaving_share():
    """dp_term alone: with the same parameters and compute, vpp chunks hide vpp x one chunk's backward."""
    p = StageParams(dense=np.array([2.0e9]), expert=np.array([0.0]), dense_shard=np.array([32.0]),
                    expert_shard=np.array([1.0]))
    comp = np.array([1.0e-3])
    exposed = {v: _f(dp_term(_ctx("llama3-70b", "dgx-h100", 1024, Layout(tp=8, pp=4, vpp=v, dp=32,
                                                                             sequence_parallel=True),
                                  global_batch=256), p, comp).exposed_s) for v in (1, 4)}
    total = _f(dp_term(_ctx("llama3-70b", "dgx-h100", 1024, LLAMA_TP8, global_batch=256), p, comp).total_s)
    assert 0 < exposed[4] < exposed[1] < total


def test_the_end_chunks_share_of_the_dp_collectives_stays_exposed():
    """However long the cooldown hides the other chunks' buckets behind, the last chunk's reduce-scatter has
    nothing to hide behind (Megatron launches a chunk's reduction whole after its last backward: --align-grad-reduce)
    and the first chunk's gather only its own first forward (core_r0.8.0: each bucket gathered behind the one
    before; `align_param_gather` off): with one micro-batch's compute c, (RS + AG - c/3) / vpp = (DP - c/3) / vpp
    stays exposed at ZeRO-1.  With the aligned gather (Megatron-Core 0.9 on) chunk 0's whole gather waits before
    its first forward: DP / vpp."""
    p = StageParams(dense=np.array([2.0e9]), expert=np.array([0.0]), dense_shard=np.array([32.0]),
                    expert_shard=np.array([1.0]))

    def term(vpp, comp, zero=1, align=True):
        lay = Layout(tp=8, pp=4, vpp=vpp, dp=32, zero_stage=zero, sequence_parallel=True)
        recipe = PLAIN.model_copy(update={"align_param_gather": align})
        return dp_term(_ctx("llama3-70b", "dgx-h100", 1024, lay, recipe=recipe, global_batch=256), p,
                       np.array([comp]))

    total = _f(term(4, 1.0).total_s)
    comp = 0.5 * total  # 4 chunks x 2/3 of it is far more backward than the whole reduce-scatter
    assert _f(term(4, comp, align=False).exposed_s) == pytest.approx((total - comp / 3.0) / 4, rel=1e-9)
    assert _f(term(4, comp).exposed_s) == pytest.approx(total / 4, rel=1e-9)
    # DDP: the last chunk's all-reduce, whole
    ddp_total = _f(term(4, 1.0, zero=0).total_s)
    assert _f(term(4, comp, zero=0).exposed_s) == pytest.approx(ddp_total / 4, rel=1e-9)
    # one chunk: the whole rank's rule, its buckets behind its last backward
    assert _f(term(1, comp).exposed_s) == pytest.approx(total - comp, rel=1e-9)


def test_ddp_fp32_all_reduce_moves_fp32_in_both_halves():
    """DDP all-reduces the fp32 gradient buffer: reduce-scatter and all-gather both move 4 bytes, twice
    the 16-bit all-reduce."""
    ratio = _f(_llama_dp(Recipe(grad_reduce_fp32=True), zero=0).dp_s) / _f(_llama_dp(zero=0).dp_s)
    assert ratio == pytest.approx(2.0, rel=0.01)


def test_zero1_traffic_gathers_16bit_parameters():
    """The bytes the mapper weighs follow the collectives: RS 4 bytes + AG 2 bytes per parameter under
    grad_reduce_fp32, 1.5x the 16-bit 2 + 2."""
    fp32, bf16 = _llama_dp(Recipe(grad_reduce_fp32=True)), _llama_dp()
    assert _f(fp32.traffic_bytes["dp"]) / _f(bf16.traffic_bytes["dp"]) == pytest.approx(1.5, rel=1e-9)


# --- pipeline bubble (cost.step) ------------------------------------------------------------------------


def test_bubble_by_schedule():
    """1F1B idles (pp - 1)/v micro-batch times (PTD-P §2.2); ZB-H1 a third of it (Qi et al. 2023 §3);
    DualPipe (pp/2 - 1)(F&B + B - 3W) with B = 2F, W = F: 2/7 of 1F1B's at pp 8 (DeepSeek-V3 Table 2)."""
    lay = Layout(tp=8, pp=8, dp=16, sequence_parallel=True)
    bubble = {s: _est("llama3-70b", "dgx-h100", 1024, lay, Recipe(pipeline_schedule=s))
              for s in ("1f1b", "zero_bubble", "dualpipe")}
    share = {s: _f(e.bubble_s) / ((8 - 1) * _f(e.microbatch_s)) for s, e in bubble.items()}
    assert _f(bubble["1f1b"].bubble_s) > 0 and share["1f1b"] == pytest.approx(1.0, rel=1e-9)
    assert share["zero_bubble"] == pytest.approx(1.0 / 3.0, rel=1e-9)
    assert share["dualpipe"] == pytest.approx((8 / 2 - 1) * (2 / 3) / (8 - 1), rel=1e-9)
    assert _f(bubble["dualpipe"].step_time_s) < _f(bubble["zero_bubble"].step_time_s) < _f(bubble["1f1b"].step_time_s)


# --- memory (cost.memory) -------------------------------------------------------------------------------

# which kind of layer each selective-recompute module keeps fewer activations of (deepseek-v3: 3 dense layers)
RECOMPUTE_LOWERS = {
    M.LAYERNORM: ("dense", "moe"),
    M.MOE_ACT: ("moe",),
    M.MLP: ("dense",),
    M.MLA_UP_PROJ: ("dense", "moe"),
    M.MOE: ("moe",),
    M.SHARED_EXPERTS: ("moe",),
}


@pytest.mark.parametrize("module", list(RECOMPUTE_LOWERS), ids=[m.value for m in RECOMPUTE_LOWERS])
def test_each_recompute_module_lowers_activations(module):
    """A recomputed module keeps none of its own activations (Megatron-Core `--recompute-modules`;
    Korthikanti et al. Table 2), and raises none."""
    base = layer_activations(_ctx("deepseek-v3", "hgx-h800", 64, DSV3_EP8))
    recipe = Recipe(recompute_modules=(module,))
    with_rc = layer_activations(_ctx("deepseek-v3", "hgx-h800", 64, DSV3_EP8, recipe))
    for kind in ("dense", "moe"):
        before, after = _f(getattr(base, kind)), _f(getattr(with_rc, kind))
        if kind in RECOMPUTE_LOWERS[module]:
            assert after < 0.99 * before, kind
        else:
            assert after == pytest.approx(before, rel=1e-12), kind
    e0 = _est("deepseek-v3", "hgx-h800", 64, DSV3_EP8)
    e1 = _est("deepseek-v3", "hgx-h800", 64, DSV3_EP8, recipe)
    assert _f(e1.activations_bytes) < _f(e0.activations_bytes)
    assert _f(e1.step_time_s) > _f(e0.step_time_s)  # recomputing costs time


def test_bf16_moments_shrink_optimizer_state():
    """BF16 Adam moments: fp32 master + 2 + 2 bytes = 8 per parameter instead of 12 (DeepSeek-V3 §3.3)."""
    plain = _est("deepseek-v3", "hgx-h800", 64, DSV3_EP8)
    bf16 = _est("deepseek-v3", "hgx-h800", 64, DSV3_EP8, Recipe(optimizer_state_bf16=True))
    assert (C.BYTES_OPTIMIZER, C.BYTES_OPTIMIZER_BF16_MOMENTS) == (12, 8)
    assert _f(bf16.optimizer_bytes) / _f(plain.optimizer_bytes) == pytest.approx(8 / 12, rel=1e-12)


def test_fp8_params_keep_one_byte_per_weight():
    """FP8 GEMMs keep a 1-byte copy beside the 16-bit weight (3 bytes); FP8 primary weights keep 1
    (`--fp8-param-gather`; write-up §1 item 6)."""
    bf16 = _est("deepseek-v3", "hgx-h800", 64, DSV3_EP8)
    fp8 = _est("deepseek-v3", "hgx-h800", 64, DSV3_EP8, Recipe(), "fp8")
    fp8_params = _est("deepseek-v3", "hgx-h800", 64, DSV3_EP8, Recipe(fp8_params=True), "fp8")
    assert _f(fp8.weights_bytes) / _f(bf16.weights_bytes) == pytest.approx(3 / 2, rel=1e-12)
    assert _f(fp8_params.weights_bytes) / _f(fp8.weights_bytes) == pytest.approx(1 / 3, rel=1e-12)


def test_cross_entropy_fusion_drops_the_fp32_logits():
    """Fused cross-entropy keeps the bf16 logits only: 2 instead of 6 bytes per logit on the loss rank."""
    plain = _est("deepseek-v3", "hgx-h800", 64, DSV3_EP8)
    fused = _est("deepseek-v3", "hgx-h800", 64, DSV3_EP8, Recipe(cross_entropy_fusion=True))
    vocab = _model("deepseek-v3").vocab_size
    saved = 4096 * vocab * (C.LOGITS_BYTES_PER_ELEMENT - C.BYTES_PER_ACTIVATION)
    assert _f(plain.other_bytes) - _f(fused.other_bytes) == pytest.approx(saved, rel=1e-9)


def test_in_flight_matches_megatron_warmup():
    """Interleaved 1F1B holds Megatron's warm-up (pp - r - 1) * 2 + (vpp - 1) * pp, plus one, chunks of
    1/vpp of the rank's layers: pp + (pp - 1)/vpp on rank 0; plain 1F1B holds pp - r."""
    pp, vpp = 8, 5
    ranks = np.arange(pp)[:, None].astype(float)
    x = _ctx("llama3-70b", "dgx-h100", 1024, Layout(tp=8, pp=pp, vpp=vpp, dp=16))
    megatron = ((pp - ranks - 1) * 2 + (vpp - 1) * pp + 1) / vpp
    assert in_flight(x, ranks) == pytest.approx(megatron, rel=1e-12)
    assert _f(in_flight(x, np.array([0.0]))) == pytest.approx(pp + (pp - 1) / vpp, rel=1e-12)
    plain = _ctx("llama3-70b", "dgx-h100", 1024, Layout(tp=8, pp=pp, dp=16))
    assert in_flight(plain, ranks) == pytest.approx(pp - ranks, rel=1e-12)
    few = _ctx("llama3-70b", "dgx-h100", 1024, Layout(tp=8, pp=pp, dp=16), global_batch=16 * 3)
    assert _f(in_flight(few, np.array([0.0]))) == 3.0  # never more than the step's micro-batches


# --- MTP and pipeline layouts (cost.pipeline, cost.step) --------------------------------------------------


def test_mtp_sits_on_the_last_stage_and_adds_its_time_and_memory():
    """An MTP module is one more layer with its own projection, LM head and loss on the last pipeline
    stage (DeepSeek-V3 §2.2; Megatron `--mtp-num-layers`)."""
    st = stage_kinds(61, 3, 1, np.array([4]), np.array([1]), np.array([0]))
    holders = np.flatnonzero(st.mtp[:, 0])
    assert len(holders) == 1 and st.rank[holders[0], 0] == 3 and st.loss[holders[0], 0] == 1
    # a layout whose last rank is the busiest and the fullest, so its cost is the step's and the peak's
    lay = Layout(tp=1, ep=8, pp=2, dp=32)
    without = _est("deepseek-v3", "hgx-h800", 64, lay, Recipe(pipeline_layout="Et*20|t*41L"), "fp8")
    mtp_recipe = Recipe(mtp_layers=1, pipeline_layout="Et*20|t*41mL")
    with_mtp = _est("deepseek-v3", "hgx-h800", 64, lay, mtp_recipe, "fp8")
    assert with_mtp.valid.all() and without.valid.all()
    lc = layer_compute(_ctx("deepseek-v3", "hgx-h800", 64, lay, mtp_recipe, "fp8"))
    assert _f(lc.mtp_s) > _f(lc.moe_s) + _f(lc.head_s)
    m = _f(with_mtp.num_microbatches)
    assert _f(with_mtp.compute_s) - _f(without.compute_s) == pytest.approx(m * _f(lc.mtp_s), rel=1e-9)
    assert _f(with_mtp.step_time_s) > _f(without.step_time_s)
    assert _f(with_mtp.peak_memory_bytes) > _f(without.peak_memory_bytes)


def test_megatron_layout_string_prices_as_megatron_places_it():
    """DeepSeek-V3's `Et|(tt|)*30L` on pp 8 x vpp 4: virtual stage i on rank i % pp, so rank 0 holds
    7 layers (1 dense), rank 1 8 (2 dense), rank 7 6 and the loss, the rest 8 (Megatron-Core
    PipelineParallelLayerLayout); its busiest rank holds what the default split's does."""
    layout_text = "Et|(tt|)*30L"
    st = stage_kinds(61, 3, 0, np.array([8]), np.array([4]), np.array([POLICY_EXPLICIT]), (layout_text,))
    assert st.valid.all()
    kinds = {int(st.rank[i, 0]): (int(st.dense[i, 0]), int(st.moe[i, 0]), int(st.loss[i, 0]))
             for i in range(st.num_kinds) if st.num_ranks[i, 0] > 0}
    assert kinds[0] == (1, 6, 0) and kinds[1] == (2, 6, 0) and kinds[7] == (0, 6, 1)
    assert kinds[2] == (0, 8, 0)
    lay = Layout(tp=1, ep=8, pp=8, vpp=4, dp=32)
    given = _est("deepseek-v3", "hgx-h800", 256, lay, Recipe(pipeline_layout=layout_text), "fp8")
    default = _est("deepseek-v3", "hgx-h800", 256, lay, Recipe(), "fp8")
    assert given.valid.all()
    assert _f(given.step_time_s) == pytest.approx(_f(default.step_time_s), rel=0.01)


def test_unbalanced_layout_is_slower():
    """The pipeline runs at its busiest rank's pace: 17 layers on the last rank instead of 8 everywhere."""
    lay = Layout(tp=1, ep=8, pp=8, dp=32)
    balanced = _est("deepseek-v3", "hgx-h800", 256, lay, Recipe(pipeline_layout="Et*8|(t*8|)*6t*5L"), "fp8")
    skewed = _est("deepseek-v3", "hgx-h800", 256, lay, Recipe(pipeline_layout="Et*2|(t*7|)*6t*17L"), "fp8")
    assert balanced.valid.all() and skewed.valid.all()
    assert _f(skewed.step_time_s) > 1.5 * _f(balanced.step_time_s)
    assert _f(skewed.bubble_s) > _f(balanced.bubble_s)


# --- a recipe flag priced where it cannot run ----------------------------------------------------------


def test_fp8_dispatch_needs_an_fp8_recipe():
    """dispatch_fp8 'needs an FP8 recipe' (Recipe docstring): under bf16 it must be refused or change nothing."""
    x_plain = _ctx("deepseek-v3", "hgx-h800", 2048, DSV3_EP64, Recipe(), "bf16", global_batch=15360)
    try:
        x_fp8 = _ctx("deepseek-v3", "hgx-h800", 2048, DSV3_EP64, Recipe(dispatch_fp8=True), "bf16",
                     global_batch=15360)
        fp8 = ep_term(x_fp8, Dispatcher.DEEPEP)
    except (InputError, ValueError):
        return
    assert _f(fp8.total_s) == pytest.approx(_f(ep_term(x_plain, Dispatcher.DEEPEP).total_s), rel=1e-12)
