"""Data-parallel terms: gradient reduction and parameter gathers per step, what of them hides behind
compute, and the optimizer step.

DDP all-reduces gradients during the last backward.  ZeRO-1 (Megatron's distributed optimizer)
reduce-scatters them during the last backward and all-gathers the updated weights during the next
forward (`--overlap-grad-reduce --overlap-param-gather`); DeepSpeed's BF16_Optimizer all-reduces them
instead (recipe `grad_all_reduce`).  ZeRO-2 keeps only its gradient shard, so it
reduce-scatters after every micro-batch's backward (DeepSpeed ZeRO-2, FSDP SHARD_GRAD_OP), then
all-gathers as ZeRO-1 does.  ZeRO-3/FSDP gathers weights for forward and backward and reduce-scatters
gradients every micro-batch, behind that micro-batch's compute (prefetch), expert weights included.
Under interleaving each model chunk's reduction goes whole as soon as the chunk's last backward ends, so
it hides behind the cooldown's remaining chunks, and each chunk's gather behind the forward of the
chunks before it (Megatron-Core distributed optimizer, `--overlap-grad-reduce` per model chunk), but the
last chunk's reduction hides behind nothing and the first chunk's gather only behind that chunk's forward.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from placement.cost import collectives as coll
from placement.cost import constants as C
from placement.cost.context import Ctx, over_replicas
from placement.specs.recipe import GradBuckets


def grad_bytes(x: Ctx) -> int:
    """Bytes per gradient element in the buffer and on the wire: fp32 where the recipe reduces in fp32."""
    return 4 if x.recipe.grad_reduce_fp32 else C.BYTES_GRAD


def gather_bytes(x: Ctx) -> float:
    """Bytes per weight the data-parallel gather moves: one where an FP8 job keeps its weights in FP8 (Megatron-LM
    `--fp8-param-gather`, "Keep the compute param in fp8 ... and perform the param all-gather in fp8",
    megatron/training/arguments.py; recipe fp8_params), else the 16-bit weight."""
    return 1.0 if (x.recipe.fp8_params and x.fp8 is not None) else float(C.BYTES_WEIGHT)


@dataclass(frozen=True)
class StageParams:
    """Parameters one rank holds (the stage with the most), split as the DP groups see them."""

    dense: np.ndarray
    """Replicated over the dense DP group (attention, dense MLPs, shared experts, router, embedding, head)."""
    expert: np.ndarray
    """Routed experts, replicated over the expert-DP group."""
    dense_shard: np.ndarray
    """Ranks the dense state is sharded over under ZeRO."""
    expert_shard: np.ndarray
    """Ranks the expert state is sharded over (expert DP)."""
    edge_dense: np.ndarray | float = 0.0
    edge_expert: np.ndarray | float = 0.0
    """Under ZeRO-2/3, the parameters of the units gathered before the step's first compute and reduced after its
    last: one decoder layer plus the embedding, final norm and head the rank holds (`shard_edges_s`)."""
    embed: np.ndarray | float = 0.0
    """The input embedding the rank holds (its vocabulary shard): under DDP and ZeRO-1 the gradients reduced after
    the step's last compute and the weights gathered before its first (`embedding_edge_s`)."""
    tail: np.ndarray | float = 0.0
    """The first rank's dense parameters in the gradient buckets that close only when its last backward ends, the
    embedding's among them (`tail_bucket_params`); 0 where none is priced (the embedding alone then)."""


@dataclass(frozen=True)
class DpTerm:
    total_s: np.ndarray
    """All DP communication of one step."""
    exposed_s: np.ndarray
    """What of it adds to the step."""
    dense_bytes: np.ndarray
    replica_bytes: np.ndarray
    expert_bytes: np.ndarray
    """Bytes one member of each group sends per step (what the mapper weighs)."""


def dp_term(x: Ctx, p: StageParams, comp_mb_s: np.ndarray) -> DpTerm:
    b, lv = x.b, x.levels
    zero3, zero2 = b.zero == 3, b.zero == 2
    dense_group = coll.Groups(lv, b.tp, np.where(zero3, b.cp * b.dp_shard, b.cp * b.dp))
    # under HSDP the experts' ZeRO-3 group is their shard group, inside the replicas (step._stage_params)
    edp = np.rint(np.where(zero3, x.tp * x.cp * b.dp_shard, x.tp * x.cp * x.dp) / (x.ep * x.etp)).astype(np.int64)
    expert_group = coll.Groups(lv, b.ep * b.etp, edp)
    grad_b, wt_b = grad_bytes(x), gather_bytes(x)
    # float32 weights (fp32_weights) stored sharded under ZeRO-1/2 are gathered for the step at the width cost.memory
    # holds the gathered copy in: bf16, cast before a gradient-accumulation loop (MaxText 0.2.5
    # utils/gradient_accumulation.py:96-103), float32 without one, where train_step constrains the float32 params
    # themselves to the step's sharding (trainers/pre_train/train.py:460-465, AI-Hypercomputer/maxtext e591f30cb)
    # torch's ZeroRedundancyOptimizer keeps them whole and broadcasts each rank's updated float32 shard every step
    # (recipe fp32_weights_autocast: zero_redundancy_optimizer.py _sync_params, _broadcast_params_from_rank)
    if x.recipe.fp32_weights and not (x.recipe.fp8_params and x.fp8 is not None):
        wt_b = np.where(((b.zero == 1) | (b.zero == 2)) & ((x.m <= 1) | x.recipe.fp32_weights_autocast), 4.0, wt_b)
    # (a rank without routed experts runs no expert-group collective, not even its latency)
    has_experts = np.asarray(p.expert) > 0
    rs_once = dense_group.reduce_scatter(p.dense * grad_b) + np.where(
        has_experts, expert_group.reduce_scatter(p.expert * grad_b), 0.0)
    ag_once = dense_group.reduce_scatter(p.dense * wt_b) + np.where(
        has_experts, expert_group.reduce_scatter(p.expert * wt_b), 0.0)
    # ZeRO-3 gathers the 16-bit weights for forward and again for backward, and reduce-scatters the gradients at
    # their reduce width (FSDP2 reduce_dtype: torchtitan's float32)
    z3_mb = 2.0 * ag_once + rs_once
    edge_ag, edge_rs = shard_edges_s(dense_group, expert_group, p, wt_b, grad_b)
    z3_edge = edge_ag + edge_rs
    replicas = coll.Groups(lv, b.tp * b.cp * b.dp_shard, b.dp // b.dp_shard)
    # HSDP all-reduces each shard's gradients over the replicas, the experts' as the dense ones'
    replica_grads = p.dense / p.dense_shard + p.expert / p.expert_shard
    hsdp_once = replicas.all_reduce(replica_grads * grad_b)
    hsdp_sent_b = 2.0 * grad_b  # bytes a member sends per shard parameter and reduction (an all-reduce: twice)
    hsdp_gather, gather_b = 0.0, 0.0
    # ...or, with the optimizer sharded over the replicas too (recipe optimizer_over_replicas), reduce-scatters them
    # into the optimizer's shard, and gathers the updated weights back once a step, after the optimizer and before
    # the next step's first forward, so beside no compute: in bf16 before an accumulation loop, at the stored width
    # without one (float32 under fp32_weights)
    # (per layout: a MaxText layout with fsdp ranks all-reduces, `over_replicas`)
    over = over_replicas(x.recipe, b)
    if over.any():
        gather_b = np.where(over, np.where(x.m > 1, wt_b, 4.0 if x.recipe.fp32_weights else wt_b), 0.0)
        hsdp_once = np.where(over, replicas.reduce_scatter(replica_grads * grad_b), hsdp_once)
        hsdp_gather = np.where(over, replicas.reduce_scatter(replica_grads * gather_b), 0.0)
        hsdp_sent_b = np.where(over, grad_b, hsdp_sent_b)
    m = x.m
    # torch pipelining with FSDP2 (recipe pipeline_unsharded_grads) reduce-scatters once per step, after the stage's
    # last backward, where ZeRO-2/3 otherwise reduce every micro-batch
    deferred = x.recipe.pipeline_unsharded_grads & (b.pp > 1)
    rs_count = np.where(deferred, 1.0, m)
    # FSDP2 all-reduces over the HSDP replicas in every micro-batch's backward where nothing turns its gradient sync
    # off (recipe dp_reduce_every_microbatch: torchtitan 0.3.0), once a step where torch pipelining defers it
    hsdp_every = np.asarray(x.recipe.dp_reduce_every_microbatch) & ~np.asarray(deferred)
    hsdp_count = np.where(hsdp_every, m, 1.0)
    # ZeRO-3 gathers each micro-batch's weights for its forward and again for its backward; deferred, the weights
    # stay gathered after a backward, so a forward that follows one gathers nothing and a backward that follows one
    # neither: about one gather per micro-batch plus the warm-up's (placement's files reshard after forward)
    ag_count = np.where(deferred, np.minimum(m + b.pp - 1.0, 2.0 * m), 2.0 * m)
    # ZeRO-2 gathers once per step where the weights stay whole between micro-batches (DeepSpeed, Megatron-FSDP), once
    # per micro-batch where each backward reshards them (recipe reshard_after_backward: FSDP2's default)
    z2_ag_count = np.where(np.logical_and(x.recipe.reshard_after_backward, ~deferred), m, 1.0)
    # DDP all-reduces the gradient buffer (reduce-scatter + all-gather, both at the gradient width); ZeRO-1/2
    # reduce-scatter gradients and all-gather 16-bit parameters; a ZeRO-1 that all-reduces (grad_all_reduce)
    # sends the gradients twice before its gather
    all_reduce = 2.0 * rs_once
    z1_grads = all_reduce if x.recipe.grad_all_reduce else rs_once
    # ...and DDP (ZeRO-0) all-reduces in every micro-batch's backward where nothing calls no_sync (torchtitan before
    # 0.3.0), once a step under torch pipelining, which leaves the hooks on in each stage's last backward only
    ddp_count = np.where(np.asarray(x.recipe.dp_reduce_every_microbatch) & (b.pp == 1), m, 1.0)
    total = np.where(zero3, ag_once * ag_count + rs_once * rs_count + hsdp_once * hsdp_count + hsdp_gather,
                     np.where(zero2, rs_once * rs_count + ag_once * z2_ag_count,
                              np.where(b.zero == 0, all_reduce * ddp_count, z1_grads + ag_once)))
    # DeepSpeed's PipelineEngine (the engine `pipeline_p2p_blocking` prices) reduces the gradients after the
    # pipeline flush, in the schedule's last step (runtime/pipe/schedule.py TrainSchedule: ReduceTiedGrads,
    # ReduceGrads, OptimizerStep; pipe/engine.py _exec_reduce_grads, DeepSpeed 0.19.8), behind no compute
    engine_flush = x.recipe.pipeline_p2p_blocking & (b.pp > 1)
    if not x.recipe.dp_overlap or x.recipe.cuda_launch_blocking:  # blocking launches overlap nothing
        exposed = total
    else:
        bwd_share = C.BACKWARD_TO_FORWARD / (1.0 + C.BACKWARD_TO_FORWARD)
        # per-chunk buckets under interleaving: the reduce-scatter of all chunks but the last hides behind
        # the cooldown's later chunks, the last chunk's behind its own backward
        chunks = np.minimum(x.vpp, np.maximum(m, 1.0))
        hide = C.DP_OVERLAP_FRACTION * bwd_share * comp_mb_s * chunks
        hide_fwd = C.DP_OVERLAP_FRACTION * (1.0 - bwd_share) * comp_mb_s * chunks
        # ...but only where the gather runs beside the next forward (recipe param_gather_overlap): DeepSpeed's ZeRO-1/2
        # and Megatron's distributed optimizer without --overlap-param-gather gather before it
        hidden_gather = x.recipe.param_gather_overlap
        # ZeRO-2 (FSDP2 reshard_after_forward False) gathers each unit before its first forward (again before each
        # micro-batch's under reshard_after_backward), and reduce-scatters each micro-batch's gradients: its first
        # unit's gather and last unit's reduce-scatter have no compute beside them either (shard_edges_s)
        z2_gather = _hidden_but_edge(ag_once, edge_ag, hide_fwd) if hidden_gather else ag_once
        # ...and the embedding's own bucket, whose gradients are the step's last and whose weights its first forward
        # reads, hides behind nothing (`embedding_edge_s`)
        embed_rs, embed_ag = embedding_edge_s(dense_group, p, grad_b, wt_b)
        embed_grads = embed_rs * (2.0 if x.recipe.grad_all_reduce else 1.0)
        # ...nor the rest of the buckets that close with the embedding's at the end of the backward, whose weights
        # the first forward waits for in the same way: the bucket holding layer 0 (`tail_bucket_params`)
        tail_rs, tail_ag = embedding_edge_s(dense_group, replace(p, embed=np.maximum(p.tail, p.embed)), grad_b, wt_b)
        tail_grads = tail_rs * (2.0 if x.recipe.grad_all_reduce else 1.0)
        gather_exposed = _hidden_but_edge(ag_once, tail_ag, hide_fwd) if hidden_gather else ag_once
        z1_grads_exposed = _hidden_but_edge(z1_grads, tail_grads, hide)
        ddp_exposed = _hidden_but_edge(all_reduce, 2.0 * tail_rs, hide)
        # ...but no chunk hides behind another's compute at the ends of the step: the last chunk's reduction
        # only behind its own last backward, the first chunk's gather only behind its own first forward
        # (`_last_chunk_floor`); under interleaving not even that backward: Megatron launches each model chunk's
        # reduction whole after the chunk's last backward (`config.grad_sync_func`, set under its default
        # --align-grad-reduce, core_r0.8.0's --delay-grad-reduce: training.py:1001-1004, schedules.py:797-806;
        # core_v0.19.0 training.py:3540-3543), so the step waits for all of the last chunk's; torch pipelining
        # (recipe pipeline_unsharded_grads) leaves DDP's hooks on in each chunk's last backward, which they run beside
        aligned = (x.vpp > 1) & ~np.asarray(x.recipe.pipeline_unsharded_grads)
        own_bwd = np.where(aligned, 0.0, C.DP_OVERLAP_FRACTION * bwd_share * comp_mb_s)
        own_fwd = C.DP_OVERLAP_FRACTION * (1.0 - bwd_share) * comp_mb_s
        first_gather = _last_chunk_floor(ag_once, own_fwd, x.vpp)
        # ...except where Megatron's distributed optimizer gathers each rank's first chunks whole when the schedule
        # starts (ZeRO-1, recipe align_param_gather, Megatron-Core 0.9 on): the embedding's bucket is dispatched
        # last, so chunk 0's first forward waits for all of chunk 0's gather (the embedding whole on the first rank),
        # with no compute beside
        z1_first_gather = first_gather
        if x.recipe.align_param_gather and hidden_gather:
            chunk0_gather = _last_chunk_floor(ag_once, 0.0, x.vpp, whole_s=embed_ag)
            z1_first_gather = np.where(x.vpp > 1, np.maximum(first_gather, chunk0_gather), first_gather)
        # (each collective its own floor: a gather before the forward, not overlapped, adds to the last chunk's
        # reduction, which it does not hide).  The first pipeline rank's last chunk is its chunk 0, which holds the
        # embedding whole beside 1/vpp of its layers (core_r0.8.0 schedules.py:672-678 get_model_chunk_id: the
        # cool-down's last backward is chunk 0's)
        z1_floor = _last_chunk_floor(z1_grads, own_bwd, x.vpp, whole_s=embed_grads)
        z1_exposed = np.maximum(z1_grads_exposed, z1_floor) + np.maximum(gather_exposed, z1_first_gather)
        ddp_floor = _last_chunk_floor(all_reduce, own_bwd, x.vpp, whole_s=2.0 * embed_rs)
        ddp_exposed = np.maximum(ddp_exposed, ddp_floor)
        # (every micro-batch's all-reduce beside that micro-batch's own backward, the embedding's bucket after it)
        ddp_exposed = np.where(ddp_count > 1.0, m * _hidden_but_edge(all_reduce, 2.0 * embed_rs, hide / chunks),
                               ddp_exposed)
        # ZeRO-2 reduce-scatters behind every micro-batch's backward and gathers behind the forward, ZeRO-3 gathers
        # and reduces every micro-batch behind that micro-batch's compute: all but each micro-batch's first gather
        # and last reduce-scatter, which have no compute beside them (shard_edges_s: FSDP2 waits for a backward's
        # reduce-scatters before the next micro-batch, and gathers its first units again)...
        # (an HSDP all-reduce every micro-batch, dp_reduce_every_microbatch, hides only behind what that micro-batch's
        # backward has left beside its reduce-scatter: FSDP2's post-backward callback makes the stream wait for the
        # reduction before the backward returns, FSDPParamGroup.finalize_backward, as DDP's reducer does)...
        # ...and a reduce-scatter deferred to the step's end (pipeline_unsharded_grads) has no compute beside it,
        # nor the HSDP all-reduce FSDP2 runs after it
        z3_exposed = np.where(deferred,
                              m * np.maximum(ag_once * ag_count / m - edge_ag / m - comp_mb_s, 0.0) + edge_ag
                              + rs_once,
                              m * np.maximum(z3_mb - z3_edge - comp_mb_s, 0.0) + m * z3_edge
                              + np.where(hsdp_every,
                                         m * np.maximum(hsdp_once - np.maximum(hide / chunks - rs_once, 0.0), 0.0),
                                         0.0))
        z2_rs = np.where(deferred, rs_once, m * np.maximum(rs_once - edge_rs - hide / chunks, 0.0) + m * edge_rs)
        hsdp_exposed = np.where(deferred, hsdp_once, np.where(hsdp_every, 0.0, np.maximum(hsdp_once - hide, 0.0)))
        exposed = np.where(
            zero3, z3_exposed + hsdp_exposed + hsdp_gather,
            np.where(zero2, z2_rs + np.maximum(z2_gather, first_gather) * z2_ag_count,
                     np.where(b.zero == 1, z1_exposed, ddp_exposed)))
        exposed = np.where(engine_flush, total, exposed)
    tied = tied_embedding_s(x, grad_b)
    total, exposed = total + tied, exposed + tied
    z1_grad_sends = 2.0 if x.recipe.grad_all_reduce else 1.0

    def sent(params):
        return np.where(zero3, params * (wt_b * ag_count + grad_b * rs_count),
                        np.where(zero2, params * (grad_b * rs_count + wt_b * z2_ag_count),
                                 np.where(b.zero == 0, 2.0 * params * grad_b * ddp_count,
                                          params * (z1_grad_sends * grad_b + wt_b))))

    dense_bytes, expert_bytes = sent(p.dense), sent(p.expert)
    return DpTerm(
        total_s=total, exposed_s=exposed,
        dense_bytes=np.where(p.dense_shard > 1, dense_bytes, 0.0),
        replica_bytes=np.where(zero3 & (b.dp_shard < b.dp),
                               replica_grads * (hsdp_sent_b * hsdp_count + gather_b), 0.0),
        expert_bytes=np.where(p.expert_shard > 1, expert_bytes, 0.0),
    )


def shard_edges_s(dense_group: coll.Groups, expert_group: coll.Groups, p: StageParams, wt_b: float,
                  grad_b: float) -> tuple[np.ndarray, np.ndarray]:
    """(gather, reduce-scatter) seconds of the ZeRO-2/3 collectives no compute hides: the gather of the units the
    step's first forward needs before it can start, and the reduce-scatter of the units whose gradients its last
    backward finishes.

    FSDP2 (torchtitan `apply_fsdp`: fully_shard on each TransformerBlock, then on the root model, which keeps
    tok_embeddings, the final norm and the output head) gathers the root and the first block before the
    embedding runs, prefetches each later block behind the one before, and reduce-scatters a unit's gradients
    after the unit's backward (`post_backward`): the first block's and the root's come after the embedding's
    backward, the step's last compute.  The root is not resharded after forward (FSDP2 `fully_shard`: the
    root's reshard_after_forward is False), so backward gathers nothing first.  Each backward ends with FSDP2's final
    callback waiting for its reduce-scatters, and the next micro-batch gathers its first units again, so the edges
    come once per micro-batch (dp_term) unless the reduction is deferred to the step's end
    (pipeline_unsharded_grads).  ZeRO-2 (reshard_after_forward False) reduce-scatters every micro-batch: the same
    reduce-scatter edge.  One layer plus the embedding and head the rank holds (`StageParams.edge_dense`; not the
    head where the loss is chunked: torchtitan 0.3.0 reduce-scatters [norm, lm_head] at the loss's last chunk),
    gathered at the weight width and reduced at the gradient's."""
    # each group's collective only where it has parameters at the edges: a dense model's expert group runs none, not
    # even its latency (as dp_term's `has_experts`; NCCL's ring latency over 32 GPUs made the phantom one show)
    dense, expert = np.asarray(p.edge_dense) > 0, np.asarray(p.edge_expert) > 0
    gather = (np.where(dense, dense_group.reduce_scatter(p.edge_dense * wt_b), 0.0)
              + np.where(expert, expert_group.reduce_scatter(p.edge_expert * wt_b), 0.0))
    reduce = (np.where(dense, dense_group.reduce_scatter(p.edge_dense * grad_b), 0.0)
              + np.where(expert, expert_group.reduce_scatter(p.edge_expert * grad_b), 0.0))
    return gather, reduce


def tied_embedding_s(x: Ctx, grad_b: float) -> np.ndarray:
    """Seconds of the all-reduce of a tied embedding's gradient between its two copies, the first pipeline rank's
    embedding and the last's head (Workload.tied_head_params), which runs after the DP reduction and before the
    optimizer, beside no compute: Megatron-Core finalize_model_grads `_allreduce_word_embedding_grads` (core_r0.8.0
    distributed/finalize_model_grads.py, over the embedding group, on the whole `main_grad`), DeepSpeed's
    PipelineEngine `_exec_reduce_tied_grads` (TrainSchedule: ReduceTiedGrads before ReduceGrads).  The two copies
    sit at the pipeline group's two ends; an all-reduce of two sends each its whole buffer to the other at once, the
    price of the pipeline ring's wrap-around hop (`Groups.p2p`, as the interleaved schedule's last-to-first send);
    nothing without a pipeline or a tied embedding."""
    b = x.b
    if not x.w.tied_head_params:
        return np.zeros(np.shape(b.pp))
    ends = coll.Groups(x.levels, b.tp * b.cp * b.dp, b.pp, pair=True)
    return np.where(b.pp > 1, ends.p2p(x.w.tied_head_params / x.tp * grad_b, True), 0.0)


def embedding_edge_s(dense_group: coll.Groups, p: StageParams, grad_b: float, wt_b: float
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(reduce-scatter, gather) seconds of the input embedding's bucket, which no compute hides under DDP and ZeRO-1.

    Megatron-Core fills its gradient buckets in reverse parameter order "to roughly follow backprop order"
    (core_r0.8.0 distributed/param_and_grad_buffer.py:296), so the embedding, the model's first parameter, closes
    the last bucket: its gradient is ready only when the step's last backward ends, and its reduction runs after
    it.  With --overlap-param-gather the distributed optimizer launches the gather "for first accessed bucket ...
    before forward compute is initiated" (core_r0.8.0 optimizer/distrib_optimizer.py:1330-1337), the embedding's,
    and the first forward waits for it; the embedding's lookup computes nothing to hide the next bucket's gather
    behind either, which this leaves to the rate rule.  PyTorch DDP and DeepSpeed's bucketed reduction likewise
    reduce the embedding's gradient last.  Gradient width on the reduce, weight width on the gather."""
    embed = np.asarray(p.embed, dtype=float)
    some = embed > 0
    return (np.where(some, dense_group.reduce_scatter(embed * grad_b), 0.0),
            np.where(some, dense_group.reduce_scatter(embed * wt_b), 0.0))


MEGATRON_MIN_BUCKET_PARAMS = 40_000_000
MEGATRON_BUCKET_PARAMS_PER_DP_RANK = 1_000_000
"""Megatron-Core's default gradient bucket: max(40,000,000, 1,000,000 x dp x cp) parameters
(Recipe.ddp_bucket_params)."""


def default_bucket_params(dp, cp):
    """Megatron-Core's default gradient bucket for a dp x cp group (numbers or arrays): max(40M, 1M x dp x cp)."""
    return np.maximum(MEGATRON_MIN_BUCKET_PARAMS, MEGATRON_BUCKET_PARAMS_PER_DP_RANK * dp * cp)


def bucket_params(x: Ctx) -> np.ndarray:
    """(K,) parameters per gradient bucket: the recipe's, else Megatron-Core's default over the dp x cp group."""
    if x.recipe.ddp_bucket_params is not None:
        return np.full(np.shape(x.dp), float(x.recipe.ddp_bucket_params))
    return default_bucket_params(x.dp, x.cp).astype(float)


def tail_bucket_params(x: Ctx, dense_layers: np.ndarray, moe_layers: np.ndarray, head: np.ndarray,
                       embed: np.ndarray) -> np.ndarray:
    """(K,) dense-buffer parameters of the first pipeline rank whose reduction cannot start before the step's last
    backward ends: the bucket holding the rank's first decoder layer, and every bucket after it (the embedding's);
    under GradBuckets.PER_LAYER layer 0's bucket, which holds the embedding and the head too.

    Megatron-Core fills a rank's gradient buckets in reverse parameter order, output end first, and closes each once
    it holds `bucket_params` parameters or more (core_r0.8.0 distributed/param_and_grad_buffer.py:296-341); a
    bucket's reduction starts when its last gradient is ready.  Only the first pipeline rank's first model chunk is
    bucketed (later ranks and chunks reduce each chunk in one bucket, "since data-parallel communication on these
    stages is not on the critical path": distributed_data_parallel.py, core_r0.8.0 to core_v0.19.0).  The layer
    0 gradients close the bucket they fall in only at the end of the backward, and the input embedding comes after
    them: at dp 1,024 a default bucket holds 1.02e9 parameters, so up to that much of the rank's gradient is
    reduced beside no compute, where small buckets leave little more than the embedding.  The parameters are taken
    in Megatron-Core's order within a layer, reversed: the MLP's down and up projections (an MoE layer's shared
    experts and router: its routed experts have a buffer of their own), the attention's output projection, its QKV
    projection and norms.  `dense_layers`, `moe_layers`: the rank's decoder layers, dense first in layer order;
    `head`: the LM head and final norm where the rank holds them (the first in reverse order); `embed`: the
    embedding's parameters on the rank."""
    w, tp = x.w, x.tp
    if x.recipe.grad_buckets is GradBuckets.PER_LAYER:
        # layer 0's bucket holds everything outside the layers too (GradBuckets.PER_LAYER)
        proj, qkv, down, up, moe_mlp = _layer_params(w, tp)
        layer0 = np.where(dense_layers > 0, proj + qkv + down + up, np.where(moe_layers > 0, proj + qkv + moe_mlp, 0.0))
        return np.broadcast_to(layer0 + head + embed, np.shape(tp)).astype(float)
    # one walk per distinct candidate: the rows as bytes, which np.unique sorts far faster than a 2-D axis
    rows = np.ascontiguousarray(np.stack([np.broadcast_to(np.asarray(a, dtype=float), np.shape(tp)).ravel()
                                          for a in (bucket_params(x), dense_layers, moe_layers, head, embed, tp)]).T)
    _, first, inverse = np.unique(rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize))).ravel(),
                                  return_index=True, return_inverse=True)
    tails = np.array([_tail_of(w, *(float(v) for v in rows[i])) for i in first])
    return tails[np.ravel(inverse)].reshape(np.shape(tp))


def _layer_params(w, tp):
    """A decoder layer's dense-buffer parameters on one TP rank in the order Megatron-Core registers them, reversed
    (`tail_bucket_params`): the attention's output projection, its QKV projection and norms, the MLP's down and up
    projections, and an MoE layer's shared experts and router (its routed experts have a buffer of their own)."""
    proj = w.out_dim * w.hidden / tp
    qkv = w.attn_params / tp - proj + w.vector_params
    down = w.dense_mlp_params / tp / (w.mlp_up + 1.0) + w.dense_mlp_bias_params
    up = w.dense_mlp_params / tp - down + 2.0 * w.dense_mlp_bias_params
    moe_mlp = w.shared_params / tp + w.router_params + w.router_bias_params
    return proj, qkv, down, up, moe_mlp


def _tail_of(w, size: float, dense_layers: float, moe_layers: float, head: float, embed: float, tp: float) -> float:
    """`tail_bucket_params` for one candidate: the buckets filled in reverse parameter order, each closed once it
    reaches `size`; the parameters from the start of the bucket holding layer 0's QKV to the embedding."""
    proj, qkv, down, up, moe_mlp = _layer_params(w, tp)
    order = [head]
    order += [moe_mlp, proj, qkv] * int(moe_layers)
    order += [down, up, proj, qkv] * int(dense_layers)
    if len(order) == 1:  # no decoder layer on the rank: its last reduction is the embedding's (and a head's)
        return embed + head
    filled = start = tail_start = 0.0
    for params in order:
        filled += params
        tail_start = start  # the open bucket, which this parameter's gradient joins
        if filled - start >= size:
            start = filled
    return filled + embed - tail_start


def _hidden_but_edge(comm_s, edge_s, hide_s) -> np.ndarray:
    """Seconds of a collective left exposed when compute worth `hide_s` runs beside all of it but its edge
    bucket's `edge_s`, which no compute hides."""
    return np.maximum(comm_s - edge_s - hide_s, 0.0) + edge_s


def _last_chunk_floor(comm_s: np.ndarray, own_compute_s: np.ndarray, vpp, whole_s: np.ndarray | float = 0.0
                      ) -> np.ndarray:
    """Seconds of a step-end collective that stay exposed however the other chunks hide it: the share of one
    model chunk (1/vpp of the rank's layers; `dp_term` adds the embedding, which chunk 0 holds whole) less the
    compute beside it: none for the last chunk's reduction
    under interleaving, which Megatron launches whole after the chunk's last backward and the step waits for
    (Megatron-Core `finalize_model_grads`; `dp_term` passes no compute), the rank's last backward without it; and
    the first chunk's gather behind that chunk's first forward, as core_r0.8.0 runs it: the first bucket gathered
    just before the forward (optimizer/distrib_optimizer.py:1330-1337), each later one dispatched by the forward
    pre-hook of the one before.  From core_r0.9.0, under interleaving, Megatron-LM's command line dispatches the
    first two chunks' buckets at the schedule's start instead (recipe `align_param_gather`; core_v0.19.0
    pipeline_parallel/schedules.py:1191-1194), output end first and the embedding's last, so chunk 0's first
    forward waits for the chunk's whole gather: `dp_term` passes no compute for it then.  At vpp 1 this is the
    whole-rank rule above.  `whole_s`: the part of `comm_s` chunk 0 holds whole (the embedding's bucket), exposed
    in full beside that chunk's share of the rest."""
    per_chunk = 1.0 / np.maximum(vpp, 1)
    return np.maximum((comm_s - whole_s - own_compute_s) * per_chunk, 0.0) + whole_s


def optimizer_term(x: Ctx, p: StageParams) -> np.ndarray:
    """Seconds of one fused Adam step over the rank's parameter shard, and of the step's passes over the whole
    gradient buffer below ZeRO-2 (recipe grad_buffer_passes: Megatron-Core DDP's zeroing, 1/dp scaling and NaN
    check): memory-bound."""
    dense_shard = np.where(x.b.zero >= 1, p.dense_shard, 1.0)
    expert_shard = np.where(x.b.zero >= 1, p.expert_shard, 1.0)
    params = p.dense / dense_shard + p.expert / expert_shard
    return (params * C.OPTIMIZER_BYTES_PER_PARAM_STEP + grad_buffer_bytes(x, p)) / x.hbm_bw


def grad_buffer_bytes(x: Ctx, p: StageParams) -> np.ndarray:
    """HBM bytes of the step's passes over the rank's whole gradient buffer (recipe grad_buffer_passes), ZeRO-0/1
    only: from ZeRO-2 on a rank keeps only its shard of the gradients."""
    whole = np.where(x.b.zero <= 1, p.dense + p.expert, 0.0)
    return whole * x.recipe.grad_buffer_passes * C.GRAD_BUFFER_BYTES_PER_PARAM[bool(x.recipe.grad_reduce_fp32)]
