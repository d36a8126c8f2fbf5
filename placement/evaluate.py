"""Estimate one given layout: the same vectorized cost model on an array of one."""

from __future__ import annotations

import numpy as np

from placement.cost.batch import LayoutBatch
from placement.cost.stages import stage_layers
from placement.cost.step import estimate
from placement.errors import InputError
from placement.plan import Plan, make_plan
from placement.specs import Layout, ModelSpec, TrainingSpec
from placement.topology import Topology
from placement.workload import workload


def check_layout(model: ModelSpec, train: TrainingSpec, layout: Layout) -> None:
    """The rules the search enumerates by, as errors that name the value and the fix."""
    heads, kv = model.num_attention_heads, model.kv_heads
    if heads % layout.tp:
        raise InputError(f"--tp {layout.tp} does not divide the {heads} attention heads of {model.name}")
    if kv % layout.tp and layout.tp % kv:
        raise InputError(f"--tp {layout.tp} and the {kv} KV heads of {model.name}: one must divide the other")
    if layout.cp > 1 and train.seq_len % (2 * layout.cp):
        raise InputError(f"--cp {layout.cp}: sequence {train.seq_len} must split into 2 x cp equal chunks")
    if model.moe is None and (layout.ep > 1 or layout.etp > 1):
        raise InputError(f"--ep {layout.ep} --etp {layout.etp}: {model.name} has no experts; both must be 1")
    experts = model.moe.num_experts if model.moe else 1
    if experts % layout.ep:
        raise InputError(f"--ep {layout.ep} does not divide the {experts} experts of {model.name}")
    if layout.etp not in (1, layout.tp):
        raise InputError(f"--etp {layout.etp}: expert tensor parallelism is 1 or equal to tp ({layout.tp})")
    if train.global_batch % (layout.dp * layout.micro_batch_size):
        raise InputError(
            f"global batch {train.global_batch} is not a multiple of dp ({layout.dp}) * micro-batch "
            f"({layout.micro_batch_size}) = {layout.dp * layout.micro_batch_size}"
        )
    st = stage_layers(model.num_layers, np.array([layout.pp]), np.array([layout.vpp]))
    if not st.valid[0]:
        raise InputError(
            f"--pp {layout.pp} --vpp {layout.vpp}: {model.num_layers} layers cannot be split that way "
            f"(every stage needs a layer; interleaving needs at least vpp layers on each stage)"
        )
    m = train.global_batch // (layout.dp * layout.micro_batch_size)
    if layout.vpp > 1 and m % layout.pp:
        raise InputError(f"--vpp {layout.vpp}: interleaving needs micro-batches ({m}) divisible by pp ({layout.pp})")


def evaluate_layout(model: ModelSpec, train: TrainingSpec, topo: Topology, layout: Layout) -> Plan:
    if layout.num_gpus != topo.num_gpus:
        raise InputError(f"layout uses {layout.num_gpus} GPUs but the cluster has {topo.num_gpus}")
    check_layout(model, train, layout)
    batch = LayoutBatch.from_layouts([layout])
    est = estimate(workload(model), train, topo, batch)
    return make_plan(batch, est, 0, model, train, topo)
