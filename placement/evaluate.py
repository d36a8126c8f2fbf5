"""Estimate one given layout: the same vectorized cost model on an array of one."""

from __future__ import annotations

import numpy as np

from placement.cost import rules
from placement.cost.batch import LayoutBatch
from placement.cost.pipeline import parse_layout
from placement.cost.step import Estimates, estimate
from placement.errors import InputError
from placement.plan import Plan, make_plan
from placement.specs import Layout, ModelSpec, TrainingSpec
from placement.specs.recipe import Recipe
from placement.topology import Topology, intra_node_order
from placement.workload import workload


def check_layout(model: ModelSpec, train: TrainingSpec, layout: Layout, recipe: Recipe | None = None,
                 runs_te: bool = True, torch_pipeline: bool = False) -> None:
    """The rules the search enumerates by (placement/cost/rules.py), as errors that name the value and the fix;
    an explicit pipeline layout is checked against the degrees and the model instead of the default split.
    `torch_pipeline`: torch.distributed.pipelining runs the pipeline (torchtitan; rules.Facts.torch_pipeline)."""
    message = rules.layout_error(model, train, layout, recipe, runs_te, torch_pipeline)
    if message is not None:
        raise InputError(message)
    if layout.sequence_parallel and layout.tp > 1 and not rules.sp_splits(train.seq_len, layout.tp, layout.cp):
        up = -(-train.seq_len // (layout.cp * layout.tp)) * layout.cp * layout.tp
        raise InputError(f"--sequence-parallel: tp {layout.tp} must divide the sequence each of the {layout.cp} CP "
                         f"rank(s) holds ({train.seq_len} / {layout.cp}): sequence parallelism splits it over the "
                         f"TP ranks (Megatron-Core asserts it at the first forward); try --seq-len {up} or "
                         f"--no-sequence-parallel")
    if recipe is not None:
        message = graphs_recompute_error(layout, recipe, model.is_moe)
        if message is not None:
            raise InputError(message)
    if recipe is not None:
        message = full_graph_moe_error(recipe, model.is_moe)
        if message is not None:
            raise InputError(message)
    if recipe is not None and recipe.ep_comm_overlap and model.is_moe:
        message = ep_overlap_error(layout, recipe)
        if message is not None:
            raise InputError(message)
    if recipe is not None and recipe.pipeline_layout is not None:
        try:
            parse_layout(recipe.pipeline_layout, layout.pp, layout.vpp, model.num_layers, recipe.mtp_layers)
        except ValueError as err:
            raise InputError(f"--pipeline-layout {recipe.pipeline_layout!r}: {err}") from None


def evaluate_layout(model: ModelSpec, train: TrainingSpec, topo: Topology, layout: Layout,
                    recipe: Recipe | None = None, recipe_sources: dict[str, str] | None = None,
                    model_sources: dict[str, str] | None = None, runs_te: bool = True,
                    torch_pipeline: bool = False) -> Plan:
    """The layout priced under `recipe`, pinned (its recompute modules are the layout's selective ones); `runs_te`
    and `torch_pipeline` as check_layout's."""
    return evaluate_priced(model, train, topo, layout, recipe, recipe_sources, model_sources, runs_te,
                           torch_pipeline)[0]


def evaluate_priced(model: ModelSpec, train: TrainingSpec, topo: Topology, layout: Layout,
                    recipe: Recipe | None = None, recipe_sources: dict[str, str] | None = None,
                    model_sources: dict[str, str] | None = None, runs_te: bool = True,
                    torch_pipeline: bool = False) -> tuple[Plan, Estimates]:
    """`evaluate_layout`, with the estimate it was made from (one row)."""
    if layout.num_gpus != topo.num_gpus:
        raise InputError(f"layout uses {layout.num_gpus} GPUs but the cluster has {topo.num_gpus}")
    recipe = recipe or Recipe()
    check_layout(model, train, layout, recipe, runs_te, torch_pipeline)
    batch = LayoutBatch.from_layouts([layout], recipe)
    est = estimate(workload(model), train, topo, batch, recipe)
    return make_plan(batch, est, 0, model, train, topo, recipe_sources, model_sources), est


def with_crossings(result: Plan, est: Estimates, topo: Topology, layout: Layout, gpu_of_rank: np.ndarray) -> Plan:
    """The plan with how many groups of each kind stay within each level as launched (`gpu_of_rank`), as `plan`
    gives them (a user trial: `evaluate --json` answered "which group crosses the spine" with null); `est`: the
    layout's one-row estimate (evaluate_priced)."""
    from placement.mapping.groups import group_kinds
    from placement.mapping.report import crossings

    return result.model_copy(update={"crossings": crossings(topo.with_mapping(gpu_of_rank),
                                                            group_kinds(layout, est, 0))})


def launch_order(result: Plan, model: ModelSpec, topo: Topology, layout: Layout,
                 with_rank_table: bool = True) -> tuple[Plan, np.ndarray]:
    """The GPU each rank runs on as the priced layout is launched: allocation order, with measured intra-node
    links each TP group on the GPUs the price assumed (`intra_node_order`); the plan's mapping fields then
    describe that order, as `plan` writes them (the rank table only `with_rank_table`: the JSON prints it)."""
    from placement.mapping.report import compact_mapping, rank_table
    from placement.planner import RANK_TABLE_MAX_GPUS

    gpu_of_rank = intra_node_order(topo, layout.tp, np.arange(topo.num_gpus))
    # every plan has its compact mapping, and the one plan its rank table up to RANK_TABLE_MAX_GPUS (README; a user
    # trial: `evaluate --json` had both null in allocation order)
    mapping = (rank_table(topo, gpu_of_rank, layout, model.is_moe)
               if with_rank_table and topo.num_gpus <= RANK_TABLE_MAX_GPUS else None)
    return result.model_copy(update={"mapping_compact": compact_mapping(topo, gpu_of_rank), "mapping": mapping}), \
        gpu_of_rank


GRAPHS_RECOMPUTE_CHECK = ("Megatron-Core refuses it (core_v0.19.0 megatron/core/transformer/transformer_config.py:"
                          "2521-2535: \"full recompute is only supported with full iteration CUDA graph\", \"moe "
                          "recompute is not supported with moe_router CUDA graph\"), so the job does not start")


def graphs_recompute_error(layout: Layout, recipe: Recipe, moe: bool) -> str | None:
    """Why per-layer CUDA graphs (cuda_graphs partial, Megatron's --cuda-graph-impl transformer_engine or local) do
    not start beside the recompute: with full recompute at all, and with `moe` recompute where the graphs capture the
    MoE router (an MoE model's per-layer scope, emit.megatron.PARTIAL_GRAPH_MODULES_MOE); None where they run."""
    from placement.specs.recipe import CudaGraphs, RecomputeModule

    if recipe.cuda_graphs is not CudaGraphs.PARTIAL:
        return None
    if layout.recompute.value == "full":
        return (f"per-layer CUDA graphs (cuda_graphs partial) with full recompute: {GRAPHS_RECOMPUTE_CHECK}; use "
                f"full-iteration graphs (--cuda-graphs full; Megatron's --cuda-graph-impl full_iteration) or none, or "
                f"selective recompute")
    if moe and layout.recompute.value == "selective" and RecomputeModule.MOE in recipe.recompute_modules:
        return (f"per-layer CUDA graphs (cuda_graphs partial), which capture the MoE router, with moe among the "
                f"recompute modules: {GRAPHS_RECOMPUTE_CHECK}; drop moe from the recompute modules or use "
                f"full-iteration graphs (--cuda-graphs full; Megatron's --cuda-graph-impl full_iteration) or none")
    return None


def full_graph_moe_error(recipe: Recipe, moe: bool) -> str | None:
    """Why full-iteration CUDA graphs would not capture an MoE model's layers, or None.  Their shapes must be static:
    without `--moe-expert-capacity-factor` and `--moe-pad-expert-input-to-capacity` the MoE layers are
    uncapturable (Megatron-Core core_v0.19.0 megatron/core/transformer/moe/README.md, "CUDA Graph"), unless HybridEP
    bounds each expert rank's tokens (`--moe-expert-rank-capacity-factor`, with `--moe-paged-stash` for the
    activations and `--use-transformer-engine-op-fuser`, which that budget requires under hybridep: its
    transformer_config.py), as MLPerf Training v6.0 NVIDIA's DeepSeek-V3 ran (calibration row
    mlperf-v6.0-nvidia-gb200-deepseek-v3-512gpu).  A user trial's dropless Qwen3-30B got `--cuda-graph-impl
    full_iteration` with none of them."""
    from placement.specs.recipe import CudaGraphs, Dispatcher

    if not moe or recipe.cuda_graphs is not CudaGraphs.FULL or recipe.moe_capacity_factor is not None:
        return None
    if recipe.moe_dispatcher is Dispatcher.HYBRIDEP:
        return None
    return (f"full-iteration CUDA graphs (--cuda-graphs full) on a dropless MoE model with the "
            f"{recipe.moe_dispatcher.value} dispatcher: its MoE layers' token counts change with the routing, which "
            f"a graph cannot capture (Megatron-Core's MoE README: without a capacity factor padded to capacity they "
            f"are uncapturable), so the job does not start; give --moe-capacity-factor X (tokens past it dropped, "
            f"every expert padded to it), or --moe-dispatcher hybridep (an expert-rank budget with paged stash), or "
            f"--cuda-graphs partial or none")


def ep_overlap_error(layout: Layout, recipe: Recipe) -> str | None:
    """Why Megatron-Core would not start the EP all-to-all overlap on this layout (step.ep_overlap_runs), or None."""
    from placement.cost.step import ep_overlap_broken
    from placement.specs.recipe import CudaGraphs, RecomputeModule

    moe_recomputed = layout.recompute.value == "selective" and RecomputeModule.MOE in recipe.recompute_modules
    broken = ep_overlap_broken(layout.pp, layout.vpp, recipe, layout.ep, layout.recompute.value == "full",
                               moe_recomputed, recipe.moe_dispatcher, layout.zero_stage,
                               recipe.cuda_graphs is CudaGraphs.PARTIAL)
    text = {"pipeline": f"pp {layout.pp} without virtual stages (give --vpp 2 or more; Megatron "
                        f"--num-virtual-stages-per-pipeline-rank)",
            "ep": "ep 1 (it needs expert parallelism)",
            "full_recompute": "full recompute (give --recompute selective or none)",
            "moe_recompute": "moe among the recompute modules",
            "dispatcher": "the allgather dispatcher (it takes alltoall or flex)",
            "fsdp_pipeline": f"ZeRO-{layout.zero_stage} (Megatron-FSDP) with pp {layout.pp} (under Megatron-FSDP it "
                             f"runs only at pp 1: combined_1f1b.py refuses it interleaved; give --pp 1 or --zero 1)",
            "fsdp_graphs": f"ZeRO-{layout.zero_stage} (Megatron-FSDP) with per-layer CUDA graphs (its "
                           f"mcore_fsdp_adapter.py refuses them beside the overlap; give --cuda-graphs none or full)",
            "mtp": f"{recipe.mtp_layers} MTP layers (Megatron-Core takes at most one beside the overlap, "
                   f"transformer_config.py:2709-2713; give --mtp-layers 1)"}
    why = [text[name] for name, hit in broken.items() if bool(np.asarray(hit).reshape(-1)[0])]
    if not why:
        return None
    return (f"EP all-to-all overlap (--ep-comm-overlap; Megatron --overlap-moe-expert-parallel-comm) with "
            f"{'; '.join(why)}: Megatron-Core asserts against it (transformer_config.py), so this job would not "
            f"start; change that or turn the overlap off (--no-ep-comm-overlap)")
