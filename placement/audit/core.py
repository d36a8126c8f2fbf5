"""Audit a running job: rebuild its groups from its own launch material, price them where they land,
and say what each problem costs per step and what the best plan for the same job would change.

Rank order.  Megatron-Core (`tp-cp-ep-dp-pp`, experts `etp-ep-edp-pp`), torchtitan (mesh `pp,
dp_replicate, dp_shard, cp, tp`, TP innermost) and DeepSpeed (`PipeModelDataParallelTopology`: pipe,
data, model, model innermost) all number ranks the way placement does (reference/frameworks.md §1-4),
so a job's global rank r is placement's rank r and only the host order decides where it lands: node
rank k runs on the k-th host of the order the job ran with (torchrun --node-rank, the DeepSpeed
hostfile's line order, SLURM's node list).  Megatron's `--use-tp-pp-dp-mapping` (tp-cp-ep-pp-dp) is
turned into placement's order by a permutation of ranks.

Findings.  Each finding names a problem the issue lists (a TP/CP/EP group across a node or leaf, EP
all-to-all over an oversubscribed tier, memory over capacity or idle enough for less recompute, a
pipeline bubble above 10 %, micro-batches too small for the GEMMs, ZeRO-3 where ZeRO-1 fits).  Its
cost is what one concrete remedy saves per step, priced by the same cost model: the same layout under
placement's mapping, the same layout with the knob changed, or the best searched layout that avoids
the problem.  Severity follows that cost as a share of the step (>= 10 % error, >= 2 % warning, else
info); a job that does not fit in memory is an error whatever the rest.  A layout that placement
planned costs nothing to keep, so every finding on it is at most info.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from placement.audit.changes import launch_changes, neox_requirements, spell_neox_keys
from placement.audit.launch import LaunchLayout
from placement.audit.maxtext import trained_batch
from placement.audit.measured import MeasuredStep
from placement.audit.readers.common import FP16_MIXED, start_refusal
from placement.audit.readers.reading import NodeDevices, node_line
from placement.audit.readers.torchtitan import attention_refuses_cp
from placement.audit.shell import WITHHELD_MARK
from placement.cost.batch import LayoutBatch, module_mask
from placement.cost.constants import ALLOCATOR_FRAGMENTATION, MEMORY_RESERVE_BYTES, GiB
from placement.cost.context import fp8_recipe as fp8_recipe_as_run
from placement.cost.memory import moe_norm_recompute_lost
from placement.cost.pipeline import DECODER, EMBED, LOSS, MTP, format_layout
from placement.cost.step import (
    BLOCKWISE_USERBUFFERS,
    Estimates,
    RecipeChoices,
    default_choices,
    estimate,
    usable_hbm_bytes,
)
from placement.emit.common import EmitContext
from placement.emit.megatron import ACTIVATION_ARGS
from placement.errors import InputError, PlacementInfeasible
from placement.evaluate import check_layout, graphs_recompute_error
from placement.frameworks import CAPABILITIES, model_as_run, run_config, torchtitan_before_030
from placement.intranode import is_nvlink
from placement.loaders.errors import format_validation_error
from placement.loaders.hostlist import hostlist_sort_key
from placement.mapping.config import SolverConfig
from placement.mapping.groups import GroupKind, group_kinds
from placement.mapping.mapper import baseline_mappings, host_order_mapping, map_layout
from placement.mapping.report import compact_mapping, crossings, in_node_ring, rank_table
from placement.plan import LayoutOut, Plan, make_plan
from placement.planner import plan_job
from placement.search import FixNames, SearchConfig, module_sets
from placement.specs import FfnKind, Layout, ModelSpec, Recompute, TrainingSpec
from placement.specs.model import PositionEmbedding
from placement.specs.recipe import CudaGraphs, Dispatcher, Fp8Recipe, GradAccumulation, Recipe, RecomputeModule
from placement.specs.training import AttentionKernel
from placement.topology import Level, Topology
from placement.workload import workload

PRECISION_ARGUMENTS = frozenset({"--fp16", "--bf16", "fp16.enabled", "bf16.enabled", "--dtype", "torch_autocast",
                                 "amp.enabled", "precision", "mixed_precision"})
"""Arguments of a change that moves the job's precision (Megatron-LM's --fp16/--bf16, DeepSpeed's fp16/bf16 sections):
where none is changed, the best plan runs the precision the job runs."""

SEVERITIES = ("info", "warning", "error")
ERROR_SHARE, WARNING_SHARE = 0.10, 0.02
"""A finding whose remedy saves at least this share of the step is an error / a warning."""
BUBBLE_SHARE = 0.10
"""Pipeline bubble above this share of the step is reported (the issue's threshold)."""
IDLE_MEMORY_SHARE = 0.75
"""Peak memory under this share of capacity with recompute on: try less recompute."""
EXAMPLE_GROUPS = 4
"""Groups quoted as evidence per finding (the count of all of them is given too)."""

# framework defaults for what the launch files leave unsaid
DEFAULT_ETP_IS_TP = {"megatron": True, "torchtitan": False, "deepspeed": False, "maxtext": True}
"""Megatron-Core: --expert-tensor-parallel-size defaults to the TP size; torchtitan's expert TP where the files state
none is 1 beside expert parallelism and TP at ep 1 (TORCHTITAN_ETP_AT_EP1); DeepSpeed MoE has no expert TP."""
TORCHTITAN_ETP_AT_EP1 = ("torchtitan without expert parallelism shards its routed experts over the dense TP axis "
                         "(0.3.0 models/common/moe_sharding.py:50-56, :212-219, expert_param_placement_dense): "
                         "expert TP = TP")


def _model_shape(launch: LaunchLayout, model: ModelSpec) -> list[tuple[str, object, object]]:
    """(field, the files' value, the model's) of every model dimension the cost depends on that the files state:
    a job whose files train another shape than --model's is refused, not priced as the catalog's."""
    moe = model.moe
    return [("num_layers", launch.num_layers, model.num_layers),
            ("hidden_size", launch.hidden_size, model.hidden_size),
            ("num_attention_heads", launch.num_attention_heads, model.num_attention_heads),
            # Megatron's --moe-ffn-hidden-size defaults to --ffn-hidden-size: without it, an all-MoE model's
            # --ffn-hidden-size is the experts'
            ("ffn_hidden_size", launch.ffn_hidden_size,
             model.ffn_hidden_size if moe is None or moe.num_dense_layers else
             moe.expert_ffn_hidden_size if launch.moe_ffn_hidden_size is None else launch.ffn_hidden_size),
            ("num_query_groups", launch.num_query_groups, model.num_kv_heads or model.num_attention_heads),
            # MLA's heads have their own widths (qk_nope + qk_rope, v): Megatron's --kv-channels is not compared
            ("kv_channels", launch.kv_channels,
             launch.kv_channels if model.mla else model.head_dim or model.hidden_size // model.num_attention_heads),
            ("num_experts", launch.num_experts, moe.num_experts if moe else None),
            # a dense job's MoE arguments do nothing (Megatron's logs print moe_router_topk 2 for every model)
            ("moe_router_topk", launch.moe_router_topk, moe.top_k if moe else launch.moe_router_topk),
            ("num_moe_layers", launch.num_moe_layers, model.num_moe_layers),
            ("moe_ffn_hidden_size", launch.moe_ffn_hidden_size,
             moe.expert_ffn_hidden_size if moe else launch.moe_ffn_hidden_size),
            # sliding-window attention prices only its window of keys: another count of windowed layers, or another
            # window, is another attention cost
            ("sliding_window_layers", launch.sliding_window_layers, model.sliding_window_layers),
            ("sliding_window", launch.sliding_window,
             model.sliding_window if launch.sliding_window_layers and model.sliding_window_layers
             else launch.sliding_window),
            # the shared experts' total width and MLA: Megatron-LM's own defaults where a launch leaves them out
            # (readers.megatron._moe_and_mla_defaults)
            ("moe_shared_expert_intermediate_size", launch.moe_shared_expert_intermediate_size,
             moe.num_shared_experts * moe.shared_ffn_size if moe else launch.moe_shared_expert_intermediate_size),
            ("multi_latent_attention", launch.multi_latent_attention, model.mla is not None),
            *[(name, getattr(launch, name), getattr(model.mla, field) if model.mla and launch.multi_latent_attention
               else getattr(launch, name)) for name, field in MLA_FIELDS]]


MLA_FIELDS = (("q_lora_rank", "q_lora_rank"), ("kv_lora_rank", "kv_lora_rank"), ("qk_head_dim", "qk_nope_head_dim"),
              ("qk_pos_emb_head_dim", "qk_rope_head_dim"), ("v_head_dim", "v_head_dim"))
"""Megatron-LM's MLA arguments (LaunchLayout names) -> the MLASpec field each states."""


MEGATRON_SHAPE_FLAGS = {"ffn_hidden_size": "--ffn-hidden-size {}", "kv_channels": "--kv-channels {}",
                        "num_query_groups": "--group-query-attention --num-query-groups {}",
                        "moe_shared_expert_intermediate_size": "--moe-shared-expert-intermediate-size {}",
                        "multi_latent_attention": "--multi-latent-attention", "kv_lora_rank": "--kv-lora-rank {}",
                        "qk_head_dim": "--qk-head-dim {}", "qk_pos_emb_head_dim": "--qk-pos-emb-head-dim {}",
                        "v_head_dim": "--v-head-dim {}"}
"""The Megatron-LM arguments that state a model dimension its files left to the default
(readers.megatron.model_defaults)."""


VOCAB_PADDING = 128
"""Megatron-LM's --make-vocab-size-divisible-by default: the embedding is padded to a multiple of this x tp
(megatron/training/tokenizer _vocab_size_with_padding)."""


def _check_vocab(launch: LaunchLayout, model: ModelSpec, src: Callable[[str], str]) -> None:
    """Refuse a vocabulary the files build (LaunchLayout.vocab_size) that pads to another embedding than --model's:
    another LM head and loss, another model.  Equal after Megatron's padding, or with the end-of-document token older
    null tokenizers appended (vocab_size + 1), is the same model."""
    if launch.vocab_size is None:
        return
    step = VOCAB_PADDING * launch.tp

    def padded(v: int) -> int:
        return -(-v // step) * step

    have = padded(model.vocab_size)
    if have not in (padded(launch.vocab_size), padded(launch.vocab_size + 1)):
        raise InputError(
            f"the launch files build a vocabulary of {launch.vocab_size}{src('vocab_size')} (padded to "
            f"{padded(launch.vocab_size)}) but model {model.name} has {model.vocab_size} (padded to {have}): another "
            f"LM head and loss, another model; pass the model the job trains (--model NAME, a YAML or its "
            f"config.json), or launch with --vocab-size {model.vocab_size}")


def _switch(kind: FfnKind) -> str:
    """Megatron-LM's activation switch for `kind` as the launch writes it (GeLU has none)."""
    return " ".join(ACTIVATION_ARGS.get(kind, [])) or "no activation switch (Megatron's GeLU)"


def _check_mlp_kind(launch: LaunchLayout, model: ModelSpec, src: Callable[[str], str]) -> None:
    """Refuse files whose MLP has another number of up-projections than --model's (GeLU against SwiGLU): other
    weights and FLOPs, another model.  The same count (SwiGLU against quick-GeGLU) is a note (`_mlp_differs`)."""
    if launch.activation is None:
        return
    ups, have = FfnKind(launch.activation).num_up_projections, model.ffn_kind.num_up_projections
    if ups != have:
        raise InputError(
            f"the launch files train a {launch.activation} MLP{src('activation')}, {ups} up-projection(s) per MLP, "
            f"but model {model.name}'s {model.ffn_kind.value} has {have}: other weights and FLOPs, another model; "
            f"pass the model the job trains (--model NAME, a YAML or its config.json), or launch with "
            f"{_switch(model.ffn_kind)}")


def model_differs(launch: LaunchLayout, model: ModelSpec) -> list[str]:
    """Model settings the files state differently from --model that do not change the cost (the notes say the
    best plan's files write the model's)."""
    out = []
    if launch.rope_base is not None and model.rope_base is not None and launch.rope_base != model.rope_base:
        def text(v: float) -> str:
            return f"{v:.0f}" if v == int(v) else f"{v}"

        out.append(f"--rotary-base {text(launch.rope_base)} ({launch.sources.get('rope_base', '')}) differs from "
                   f"model {model.name}'s {text(model.rope_base)}: priced the same; the best plan's files write the "
                   f"model's, keep yours")
    factor = model.llama3_rope.factor if model.llama3_rope is not None else None
    if launch.rope_scaling_factor is not None and launch.rope_scaling_factor != factor:
        theirs = f"llama3 RoPE scaling factor {factor:g}" if factor is not None else "RoPE, which it does not scale"
        out.append(f"--use-rope-scaling --rope-scaling-factor {launch.rope_scaling_factor:g} "
                   f"({launch.sources.get('rope_scaling_factor', '')}) differs from model {model.name}'s {theirs}: "
                   f"priced the same (the scaling changes the frequencies, not the cost); the best plan's files write "
                   f"the model's")
    elif launch.rope_scaling_factor is None and factor is not None and launch.rope_base is not None:
        out.append(f"the files' RoPE ({launch.sources.get('rope_base', '')}) has no --use-rope-scaling, but model "
                   f"{model.name} scales it (llama3, factor {factor:g}): priced the same; the best plan's files write "
                   f"--use-rope-scaling --rope-scaling-factor {factor:g}")
    return out + _mlp_differs(launch, model) + _yarn_differs(launch, model) + _position_differs(launch, model)


MEGATRON_POSITIONS = {"learned_absolute": PositionEmbedding.LEARNED, "rope": PositionEmbedding.ROPE,
                      "yarn": PositionEmbedding.ROPE, "mrope": PositionEmbedding.ROPE,
                      "alibi": PositionEmbedding.ALIBI}
"""Megatron --position-embedding-type -> ModelSpec position_embedding (YaRN and M-RoPE rotate as RoPE does; alibi is
BigScience's Megatron-DeepSpeed's; none and relative have no ModelSpec counterpart)."""


def _position_differs(launch: LaunchLayout, model: ModelSpec) -> list[str]:
    """The files' --position-embedding-type against the model's: a note, priced as the model's."""
    stated = launch.position_embedding
    if stated is None or model.position_embedding is None or MEGATRON_POSITIONS.get(stated) == model.position_embedding:
        return []
    return [f"--position-embedding-type {stated} ({launch.sources.get('position_embedding', '')}) differs from model "
            f"{model.name}'s {model.position_embedding.value} positions: the job trains another model; priced as the "
            f"model's, and the best plan's files write the model's"]


def _mlp_differs(launch: LaunchLayout, model: ModelSpec) -> list[str]:
    """The files' activation, GLU offset, clamp and softmax type (Megatron arguments) against the model's: notes,
    priced as the model's (one that names the activation and leaves out the model's offset, clamp or sinks trains
    without them)."""
    out = []
    kind = model.ffn_kind
    src = launch.sources.get
    if launch.activation is not None and launch.activation != kind.value:
        # another count of up-projections is refused (_check_mlp_kind): here the same count, another activation
        out.append(f"{_switch(FfnKind(launch.activation))} ({src('activation', '')}) trains another MLP than model "
                   f"{model.name}'s {kind.value}: priced as the model's (the same up-projections); the job trains "
                   f"another model, the best plan's files write {_switch(kind)}")
    offset, clamp = launch.glu_linear_offset, launch.activation_clamp
    stated = launch.activation is not None  # files that name the activation state the MLP: what they omit is off
    if (offset is not None and offset != model.glu_linear_offset) or (
            stated and offset is None and model.glu_linear_offset):
        said = f"--glu-linear-offset {offset:g} ({src('glu_linear_offset', '')})" if offset is not None else \
            f"no --glu-linear-offset (Megatron's 0; {src('activation', '')})"
        out.append(f"{said} differs from model {model.name}'s GLU offset {model.glu_linear_offset:g}: priced the same "
                   f"(act(g) * (u + offset) is element-wise); the best plan's files write the model's")
    if (clamp is not None and clamp != model.swiglu_clamp) or (stated and clamp is None and model.swiglu_clamp):
        said = f"--activation-func-clamp-value {clamp:g} ({src('activation_clamp', '')})" if clamp is not None else \
            f"no --activation-func-clamp-value (Megatron clamps nothing; {src('activation', '')})"
        theirs = f"clamp {model.swiglu_clamp:g}" if model.swiglu_clamp is not None else "MLP, which clamps nothing"
        out.append(f"{said} differs from model {model.name}'s {theirs}: priced the same (a clamp is element-wise); "
                   f"the best plan's files write the model's")
    sinks = launch.softmax_type == "learnable" if launch.softmax_type is not None else None
    if (sinks is not None and sinks != model.attention_sinks) or (stated and sinks is None and model.attention_sinks):
        said = f"--softmax-type {launch.softmax_type} ({src('softmax_type', '')})" if sinks is not None else \
            f"no --softmax-type (Megatron's vanilla; {src('activation', '')})"
        theirs = "learnable attention sinks" if model.attention_sinks else "plain softmax (no attention sinks)"
        out.append(f"{said} differs from model {model.name}'s {theirs}: priced the same (one logit per head); the "
                   f"best plan's files write " + ("--softmax-type learnable" if model.attention_sinks else "none"))
    return out


def _yarn_differs(launch: LaunchLayout, model: ModelSpec) -> list[str]:
    """The files' YaRN numbers (--rotary-scaling-factor, --yarn-*) against the model's: notes, priced the same."""
    y = model.yarn_rope
    src = launch.sources.get
    if y is None:
        if launch.yarn_factor is not None and launch.yarn_factor != 1.0:
            return [f"--rotary-scaling-factor {launch.yarn_factor:g} ({src('yarn_factor', '')}) scales RoPE by YaRN, "
                    f"but model {model.name} states no YaRN factors: priced the same; the best plan's files write "
                    f"none"]
        return []
    if launch.yarn_factor is None:
        if launch.rope_base is None:  # the files state no RoPE arguments at all
            return []
        return [f"the files' RoPE ({src('rope_base', '')}) has no --rotary-scaling-factor (Megatron-LM's 1.0 scales "
                f"nothing), but model {model.name}'s YaRN factor is {y.factor:g}: priced the same; the best plan's "
                f"files write --rotary-scaling-factor {y.factor:g}" + (" and the --yarn-* numbers" if model.mla is None
                                                                       else "")]
    numbers = [("--rotary-scaling-factor", "yarn_factor", launch.yarn_factor, y.factor)]
    if model.mla is None:  # MLA's other YaRN numbers are MLATransformerConfig's: no argument reaches them
        numbers += [("--yarn-original-max-position-embeddings", "yarn_original_max_positions",
                     launch.yarn_original_max_positions, y.original_max_position_embeddings),
                    ("--yarn-beta-fast", "yarn_beta_fast", launch.yarn_beta_fast, y.beta_fast),
                    ("--yarn-beta-slow", "yarn_beta_slow", launch.yarn_beta_slow, y.beta_slow)]
    out = [f"{flag} {theirs:g} ({src(field, '')}) differs from model {model.name}'s YaRN {ours:g}: priced the same "
           f"(the scaling changes the frequencies, not the cost); the best plan's files write the model's"
           for flag, field, theirs, ours in numbers if theirs is not None and theirs != ours]
    truncate = launch.yarn_truncate if launch.yarn_truncate is not None else True  # Megatron-LM rounds by default
    if model.mla is None and truncate != y.truncate:
        where = src("yarn_truncate", "") or f"no --no-yarn-correction-range-round-to-int; {src('yarn_factor', '')}"
        out.append(f"the files {'round' if truncate else 'do not round'} YaRN's correction range ({where}), model "
                   f"{model.name} {'does' if y.truncate else 'does not'} (HF truncate): priced the same; the best "
                   f"plan's files write the model's")
    return out


def _check_torchtitan_model(launch: LaunchLayout, model: ModelSpec) -> None:
    """The torchtitan files name their model (module/config or name/flavor): --model must be that model, as a
    Megatron file's --num-layers/--hidden-size must match.  A config placement knows is compared by
    architecture; another torchtitan module than the one --model runs as is a mismatch too."""
    if launch.framework != "torchtitan" or not launch.model_ref:
        return
    from placement.catalog import load_model
    from placement.emit.torchtitan import catalog_name, config_for, current_config, same_architecture, shipped_model

    module, _, config = launch.model_ref.partition(":")
    known = catalog_name(module, config)
    said = launch.sources.get("model_ref", "")
    where = f"the launch files train torchtitan's {module}:{config}" + (f" ({said})" if said.startswith("default")
                                                                        else "")
    if known is not None and not same_architecture(load_model(known), model):
        raise InputError(f"{where} ({known} in placement's catalog) but --model {model.name} is another "
                         f"architecture; pass --model {known}")
    shipped = shipped_model(module, current_config(module, config)) if known is None else None  # the catalog lacks it
    if shipped is not None and not same_architecture(shipped, model):
        raise InputError(f"{where} (its flavor: {shipped.num_layers} layers, hidden {shipped.hidden_size}, "
                         f"{shipped.num_attention_heads} heads) but --model {model.name} is another architecture; "
                         f"pass that model's config.json")
    mine = config_for(model)  # --model is one of torchtitan's shipped configs, and the files name another one
    if known is None and shipped is None and mine is not None and "?" not in (module, config) \
            and mine != (module, current_config(module, config)):
        raise InputError(f"{where}, but --model {model.name} runs as torchtitan's {mine[0]}:{mine[1]}; pass the "
                         f"model the files train (--model NAME, a YAML or its config.json)")


def _check_torchtitan_mxfp8(launch: LaunchLayout, topo: Topology) -> None:
    """torchtitan's MXFP8 converters stop the job at start below compute capability 10.0 (torchtitan 0.3.0
    components/quantization/mx.py:70-71, 175-176; v0.2.2's MXLinearConverter asserts it): launch files that run
    them on an accelerator without MXFP8 tensor cores are an InputError naming the config, not a price."""
    if launch.framework != "torchtitan" or launch.recipe.get("fp8_recipe") != "mxfp8" or topo.accelerator.mxfp8:
        return
    what = f"torchtitan's {launch.model_ref}" if launch.model_ref else "torchtitan's MXFP8 converter"
    raise InputError(f"the launch files run {what} with MXFP8 linear layers, which needs tensor cores that scale "
                     f"1x32 blocks (Blackwell, compute capability 10.0): torchtitan stops such a job at start on "
                     f"{topo.accelerator.name} (components/quantization/mx.py:70-71); pass the cluster it ran on "
                     f"(--cluster)")


def _check_torchtitan_float8(launch: LaunchLayout, topo: Topology) -> None:
    """torchtitan's Float8 converters stop the job at start on a GPU without FP8 tensor cores (torchtitan 0.3.0
    components/quantization/float8.py:85-96, Float8LinearConverter: below NVIDIA SM89 or AMD gfx942; :230-234,
    Float8GroupedExpertsConverter): launch files that run them there (llama3_405b, which always converts, or
    deepseek_v3_671b_float8) are an InputError naming the config, not `--precision fp8`'s refusal (a user trial: the
    audit named a flag it was not given and told it to pass --precision bf16, which it then refused)."""
    if launch.framework != "torchtitan" or launch.precision != "fp8" or topo.accelerator.peak_flops_fp8 is not None:
        return
    what = f"torchtitan's {launch.model_ref}" if launch.model_ref else "torchtitan's Float8 converter"
    where = launch.sources.get("precision", "")
    raise InputError(f"the launch files run {what} with Float8 linear layers{f' ({where})' if where else ''}, which "
                     f"torchtitan stops at start on {topo.accelerator.name}, a GPU without FP8 tensor cores "
                     f"(components/quantization/float8.py:85-96: ValueError \"Failed to swap to Float8Linear because "
                     f"float8 is only supported on NVIDIA SM89 or later, or AMD gfx942 (MI300) or later\"), so this "
                     f"job does not start: pass the cluster it ran on (--cluster), or name a config without Float8 "
                     f"converters in the files")


TE_FP8_CHECK = ("TransformerEngine d0067d0da transformer_engine/pytorch/quantization.py:759-760, "
                "FP8GlobalStateManager.autocast_enter: `assert fp8_available, reason_for_no_fp8` from "
                "check_fp8_support(), :151-154: \"Device compute capability 8.9 or higher required for FP8 "
                "execution.\"")
"""Transformer Engine's check of FP8 on the GPU, at the first FP8 autocast (Megatron-Core's get_fp8_context enters
transformer_engine.pytorch.fp8_autocast, core_v0.19.0 megatron/core/fp8_utils.py:806; Megatron-DeepSpeed's
--fp8-hybrid/--fp8-e4m3 too, 4efb479d megatron/model/transformer.py:2069)."""


def _check_te_fp8(launch: LaunchLayout, topo: Topology) -> None:
    """Megatron-LM's (and Megatron-DeepSpeed's) FP8 is Transformer Engine's, which asserts FP8 tensor cores at the
    first FP8 layer's forward (TE_FP8_CHECK): launch files that set it on a GPU without them (A100) are an InputError
    naming the files' own setting, not `--precision fp8`'s refusal (a QA run: an FP8 megatron.sh audited on
    dgx-a100-80g was told "--precision fp8 ... use --precision bf16", a flag `audit` was not given)."""
    if launch.framework not in ("megatron", "deepspeed") or launch.precision != "fp8" \
            or topo.accelerator.peak_flops_fp8 is not None:
        return
    where = launch.sources.get("precision", "")
    raise InputError(f"the launch files run FP8 GEMMs{f' ({where})' if where else ''}, which are Transformer "
                     f"Engine's, and Transformer Engine stops the job at its first FP8 layer on "
                     f"{topo.accelerator.name}, a GPU without FP8 tensor cores ({TE_FP8_CHECK}), so this job does "
                     f"not start: pass the cluster it ran on (--cluster), or drop that FP8 setting from the files "
                     f"to train, and price, them in bf16")


TE_MXFP8_CHECK = ("TransformerEngine d0067d0da transformer_engine/pytorch/quantization.py:761-763, "
                  "FP8GlobalStateManager.autocast_enter: `assert mxfp8_available, reason_for_no_mxfp8` under an "
                  "MXFP8BlockScaling recipe, :162-168: \"Device compute capability 10.0 or higher required for MXFP8 "
                  "execution.\"")
"""Transformer Engine's check of MXFP8 on the GPU, at the first FP8 autocast."""


def _check_te_mxfp8(launch: LaunchLayout, topo: Topology) -> None:
    """A Megatron launch whose files run MXFP8 (--fp8-recipe mxfp8, a Megatron-Bridge fp8_recipe mxfp8 or its
    bf16_with_mxfp8_mixed recipe) on a GPU without MXFP8 tensor cores stops at its first FP8 layer
    (TE_MXFP8_CHECK): an InputError naming the files' own setting (a QA run: Hydra overrides with
    mixed_precision=bf16_with_mxfp8_mixed audited on H100 were told "fp8_recipe mxfp8: h100-sxm has no MXFP8 tensor
    cores ... use tensorwise or blockwise", naming no line)."""
    if launch.framework != "megatron" or launch.precision != "fp8" or launch.recipe.get("fp8_recipe") != "mxfp8" \
            or topo.accelerator.mxfp8:
        return
    where = launch.sources.get("recipe.fp8_recipe", "").removeprefix("launch:")
    raise InputError(f"the launch files run MXFP8 GEMMs{f' ({where})' if where else ''}, and Transformer Engine stops "
                     f"the job at its first FP8 layer on {topo.accelerator.name}, a GPU without MXFP8 tensor cores "
                     f"(Blackwell and later: {TE_MXFP8_CHECK}), so this job does not start: pass the cluster it ran "
                     f"on (--cluster), or use a per-tensor (tensorwise) or blockwise FP8 recipe in the files")


def _check_kv_heads(launch: LaunchLayout, layout: Layout, model: ModelSpec) -> None:
    """A framework whose TP ranks compute whole KV heads (frameworks.Capability.kv_heads_whole: torchtitan) does not
    start a job whose TP degree does not divide them: an InputError naming the files' TP, not a price."""
    cap = CAPABILITIES.get(launch.framework)
    if cap is None or not cap.kv_heads_whole or model.kv_heads % layout.tp == 0:
        return
    raise InputError(f"{launch.sources.get('tp') or 'tp'}: tp {layout.tp} with the {model.kv_heads} KV heads of "
                     f"{model.name}: {cap.kv_heads_whole}, so this job does not start; use a TP degree that divides "
                     f"{model.kv_heads}")


DP_LAST_ORDER_CHECK = ("megatron/core/parallel_state.py initialize_model_parallel, since 3e7ceda6b7 of 2025-02-04 "
                       "(core_v0.19.0 :898-902: 'When not using pp-last rank ordering, the data parallel size of "
                       "the attention and moe layers must be the same'); before it arguments.py refused any "
                       "expert or context parallelism with --use-tp-pp-dp-mapping (core_r0.10.0 :687-689)")
"""Megatron-Core's check of its dp-last rank order (tp-cp-ep-pp-dp) against the expert grid (etp-ep-pp-edp)."""


def _check_megatron_rank_order(launch: LaunchLayout, layout: Layout, model: ModelSpec) -> None:
    """Under --use-tp-pp-dp-mapping Megatron-Core builds the expert grid (etp-ep-pp-edp; a dense model's too, at ep 1
    and etp = tp) in the same dp-last order, so with a pipeline its data-parallel size must be the dense one
    (ep x etp = tp x cp): a job that breaks it stops at start (DP_LAST_ORDER_CHECK), so it is an InputError naming
    the degrees, not a price of groups Megatron never builds (a trial: Mixtral at tp 1, ep 8, pp 4 under the flag was
    priced with its EP groups across the nodes).  A dense model's expert grid takes the files'
    --expert-tensor-parallel-size where they state one (arguments.py sets it to tp only when it is None, core_v0.19.0
    :569-570, and parallel_state.py builds the grid from it whatever the model), not the layout's etp, which is 1 for
    a model without experts: Megatron's own functional test gpt3_mcore_te_tp2_pp2_cp2_etp4_dp_last (tp 2, cp 2, pp 2,
    etp 4 on 8 GPUs) starts, and was refused."""
    if launch.framework != "megatron" or launch.rank_order != "tp-cp-ep-pp-dp" or layout.pp == 1:
        return
    if model.is_moe:
        ep, etp = layout.ep, layout.etp
    else:
        ep, etp = 1, launch.etp if launch.etp is not None else layout.tp
    if ep * etp == layout.tp * layout.cp:
        return
    where = launch.sources.get("rank_order", "--use-tp-pp-dp-mapping")
    if not model.is_moe and launch.etp is not None:
        where = f"{where}; {launch.sources.get('etp', '--expert-tensor-parallel-size')}"
    ranks = layout.tp * layout.cp * layout.dp
    edp = f"{ranks // (ep * etp)}" if ranks % (ep * etp) == 0 else f"{ranks / (ep * etp):g}, not a whole number"
    raise InputError(f"{where}: the dp-last rank order with pp {layout.pp}, where the experts' data-parallel size "
                     f"(tp {layout.tp} x cp {layout.cp} x dp {layout.dp} / (ep {ep} x etp {etp}) = {edp}) is not "
                     f"the dense one (dp {layout.dp}): Megatron-Core refuses it ({DP_LAST_ORDER_CHECK}), so this "
                     f"job does not start; drop --use-tp-pp-dp-mapping, or choose degrees with ep x etp = tp x cp "
                     f"({ep} x {etp} against {layout.tp} x {layout.cp})")


MAXTEXT_SAME_AS = {"llama3.1-8b": "llama3-8b", "llama3.1-70b": "llama3-70b", "llama3.3-70b": "llama3-70b",
                   "llama3.1-405b": "llama3-405b", "deepseek3-671b-2dfsdp": "deepseek-v3",
                   "qwen3-30b-a3b": "qwen3-30b-a3b"}
"""MaxText model_names placement's files do not write whose configs/models/<name>.yml has a catalog model's
dimensions (maxtext 48445cf0: hidden, query and KV heads, layers, MLP width, head dim, vocabulary 128,256, RoPE
timescale 500,000; the 0.2.5 wheel's deepseek3-671b-2dfsdp.yml is deepseek3-671b.yml with other sharding rules
only: data_sharding, logical_axis_rules, mesh_axes; its qwen3-30b-a3b.yml is qwen3-30b-a3b-base.yml, which the files
write, with rope_max_timescale 10,000,000, :37)."""


def _check_maxtext_model(launch: LaunchLayout, model: ModelSpec) -> None:
    """A MaxText config names its model (model_name): --model must have the architecture of the catalog model that
    name is (placement.emit.maxtext.MODELS, MAXTEXT_SAME_AS); a name placement maps to none is not --model where
    --model is a catalog model placement writes under another name (a user trial: a 405B config priced as
    --model llama3-70b, exit 0)."""
    if launch.framework != "maxtext" or not launch.model_ref or launch.model_ref == "default":
        return
    from placement.catalog import load_model
    from placement.emit.maxtext import MODELS
    from placement.emit.torchtitan import same_architecture

    ref = launch.model_ref
    where = f"the MaxText files train model_name {ref!r} ({launch.sources.get('model_ref', '')})"
    names = [k for k, (m, _) in MODELS.items() if m == ref] or ([MAXTEXT_SAME_AS[ref]] if ref in MAXTEXT_SAME_AS
                                                                 else [])
    if names:
        if model.name not in names and not same_architecture(load_model(names[0]), model):
            raise InputError(f"{where}, which is placement's {names[0]}, but --model {model.name} is another "
                             f"architecture; pass --model {names[0]}")
        return
    if model.name in MODELS:
        raise InputError(f"{where}, which is no model of placement's catalog, but --model {model.name} is MaxText's "
                         f"{MODELS[model.name][0]!r}; pass the model the files train (its config.json or a model "
                         f"YAML, --model FILE)")


def files_global_batch(launch: LaunchLayout, num_gpus: int) -> tuple[int, str] | None:
    """The global batch the launch files fix on `num_gpus` GPUs, with the arithmetic, or None if they leave it
    open: stated, or each framework's rule (torchtitan local batch x dp; Megatron-LM micro-batch x dp; DeepSpeed and
    GPT-NeoX micro-batch x accumulation x dp; MaxText per-device batch x devices x accumulation)."""
    src = launch.sources
    if launch.global_batch is not None:
        return launch.global_batch, src.get("global_batch", "")
    model = launch.tp * launch.cp * launch.pp
    if launch.framework == "maxtext" and launch.mesh is not None:
        per, acc = launch.mesh["per_device_batch_size"], launch.mesh["gradient_accumulation_steps"]
        total = trained_batch(per, num_gpus, acc)  # MaxText's own truncation (configs/types.py)
        where = launch.mesh["sources"].get("per_device_batch_size", "MaxText 0.2.5 base.yml default")
        if total >= 1:
            return total, (f"int(per_device_batch_size {per:g} x {num_gpus} devices) x accumulation {acc} "
                           f"({where})")
        return None
    if num_gpus % model:
        return None
    dp = num_gpus // model
    if launch.framework == "torchtitan" and launch.local_batch is not None:
        return launch.local_batch * dp, (f"local_batch_size {launch.local_batch} x dp {dp} "
                                         f"({src.get('local_batch', '')})")
    if launch.framework == "megatron" and launch.micro_batch_size is not None:
        # Megatron-LM without --global-batch-size trains one micro-batch per data-parallel rank per step
        # (megatron/training/arguments.py validate_args: global_batch_size = micro_batch_size x
        # data_parallel_size, data_parallel_size = world / (tp x pp x cp))
        return launch.micro_batch_size * dp, (f"no --global-batch-size: Megatron-LM's micro-batch "
                                              f"{launch.micro_batch_size} x dp {dp} (arguments.py validate_args; "
                                              f"{src.get('micro_batch_size', '')})")
    if launch.micro_batch_size is not None and launch.grad_accumulation is not None:
        return (launch.micro_batch_size * launch.grad_accumulation * dp,
                f"micro-batch {launch.micro_batch_size} x accumulation {launch.grad_accumulation} x dp {dp} "
                f"({src.get('micro_batch_size', '')}; {src.get('grad_accumulation', '')})")
    return None


def derived_micro_batch(launch: LaunchLayout, num_gpus: int) -> LaunchLayout:
    """The micro-batch the framework derives where the files state the global batch and the accumulation but not it:
    train_batch_size // dp // accumulation (DeepSpeed runtime/config.py _set_batch_related_parameters; GPT-NeoX
    arguments.py calculate_batch_parameters, which takes accumulation 1 where only train_batch_size is given), a
    remainder refused by their batch assertion.  Priced as micro-batch 1 before (a user trial: 25 micro-batches of 1
    where GPT-NeoX trains one of 25)."""
    gb, gas, src = launch.global_batch, launch.grad_accumulation, launch.sources
    per_replica = launch.tp * launch.cp * launch.pp
    if launch.micro_batch_size is not None or gb is None or gas is None or num_gpus % per_replica:
        return launch
    dp = num_gpus // per_replica
    micro, rem = divmod(gb, gas * dp)
    stated = f"{src.get('global_batch', 'the global batch')}; {src.get('grad_accumulation', 'the accumulation')}"
    if rem or micro < 1:
        raise InputError(f"the launch files' global batch {gb} is not accumulation {gas} x dp {dp} ({num_gpus} GPUs / "
                         f"(tp {launch.tp} x cp {launch.cp} x pp {launch.pp})) x a whole micro-batch ({stated}): the "
                         f"framework derives the micro-batch as train_batch_size // dp // accumulation and its batch "
                         f"assertion refuses the remainder, so this job does not start; state a batch that "
                         f"{gas * dp} divides, or the GPU count the job ran on (--gpus)")
    return launch.model_copy(update={"micro_batch_size": micro, "sources": {
        **src, "micro_batch_size": f"derived: global batch {gb} / (accumulation {gas} x dp {dp}) = {micro}, as the "
                                   f"framework derives it ({stated})"}})


def maxtext_layout(launch: LaunchLayout, model: ModelSpec, topo: Topology, global_batch: int) -> LaunchLayout:
    """A MaxText launch with its mesh resolved on the job's GPUs (-1 fills, batch arithmetic)."""
    if launch.framework != "maxtext" or launch.mesh is None:
        return launch
    from placement.audit import maxtext

    fields = maxtext.resolve(launch.mesh, model.num_layers, topo.gpus_per_host, topo.num_gpus, global_batch)
    # what the mesh makes of the recipe on these GPUs (shard_optimizer_over_data beside a ZeRO-3 mesh)
    recipe = {k.removeprefix("recipe."): v for k, (v, _) in fields.items() if k.startswith("recipe.")}
    return launch.model_copy(update={k: v for k, (v, _) in fields.items() if not k.startswith("recipe.")} | {
        "recipe": {**launch.recipe, **recipe},
        "sources": {**launch.sources, **{k: ev for k, (_, ev) in fields.items()}}})


def framework_space(framework: str, top_k: int, is_moe: bool = False, torchtitan_old: bool = False,
                    float8_moe: bool = False, tied: bool = False, config: str | None = None,
                    cp_refused: str = "") -> SearchConfig:
    """The layouts the framework launches exactly as priced for a dense or an MoE model (placement/frameworks.py,
    the table `plan --framework` uses), so the best plan is one the user can switch to; `torchtitan_old`: a job on a
    torchtitan before 0.3.0, whose best plan is written in its keys (frameworks.torchtitan_before_030);
    `cp_refused`: why the job's framework refuses context parallelism beside its model's attention (torchtitan's
    readers.torchtitan.attention_refuses_cp), which keeps the search at cp 1."""
    cap = CAPABILITIES.get(framework)
    if cap is None:
        return SearchConfig(top_k=top_k)
    cap = cap.for_model(is_moe, tied, config)
    if torchtitan_old:
        cap = torchtitan_before_030(cap, float8_moe)
    if cp_refused:
        cap = dataclasses.replace(cap, max_cp=1, why=f"{cap.why}; cp 1 ({cp_refused})")
    # the audit searches within the job's own framework, not a --framework flag (a user trial was told to drop one
    # it had not passed)
    names = FixNames(framework="another framework than the job's {} (the audit searches within what it launches)")
    return SearchConfig(top_k=top_k, zero_stages=cap.zero_stages, hsdp=cap.hsdp, framework=cap,
                        pipeline_policies=None if framework == "megatron" else (0,), fix_names=names)


TORCHTITAN_GRAPHS = ("searched as torchtitan 0.3.0 runs them: one CUDA graph of each micro-batch's forward and "
                     "backward (training.disable_cuda_graphs False, config/configs.py:66; trainer.py:613-614) where "
                     "the layout has no pipeline or expert parallelism and the graph fits, none elsewhere "
                     "(--training.disable_cuda_graphs: trainer.py:179-210 refuses graphs with PP, and with EP "
                     "under its all-to-all dispatcher)")
TORCHTITAN_NO_GRAPHS = ("none: the best plan's flags turn them off (--training.disable_cuda_graphs, "
                        "config/configs.py:66): placement's torchtitan plans price no CUDA graphs for this job")
"""The best plan's recipe sources of cuda_graphs under torchtitan (recipe_space)."""


def recipe_space(space: SearchConfig, framework: str, model: ModelSpec, topo: Topology, recipe: Recipe,
                 sources: dict[str, str], torchtitan3: bool = False,
                 keep_engine: bool = False, overlap_key: bool = True) -> tuple[SearchConfig, dict[str, str]]:
    """The best plan's search under the job's recipe: its fixed fields as launched, the choice fields
    (dispatcher, overlaps, CUDA graphs, recompute modules) searched among those the framework launches
    as priced (placement.emit.common.RECIPE_SUPPORT).  Also the best plan's recipe sources.  `torchtitan3`: a
    torchtitan 0.3.0 command line, whose best plan runs full CUDA graphs where 0.3.0 captures them
    (TORCHTITAN_GRAPHS), as its emitted flags then do (emit.torchtitan.graph_args).  `keep_engine`: a
    Megatron-DeepSpeed job whose model Megatron-LM cannot build (megatron_lm_lacks): the best plan keeps the job's
    own recipe, every field as launched (megatron_deepspeed_space).  `overlap_key`: a DeepSpeed job whose files can
    state zero_optimization.overlap_comm (not accelerate's plugin without a config file, which builds its own)."""
    from placement.emit.common import framework_choices

    if keep_engine:
        return dataclasses.replace(space, recipe=recipe.model_copy(update={"recompute_modules": ()}),
                                   choices=RecipeChoices.pinned(recipe)), dict(sources)

    choices = default_choices(model.is_moe, topo, recipe)
    static = CudaGraphs.FULL in choices.cuda_graphs  # full graphs need static shapes (default_choices)
    choices, sets = framework_choices([framework], choices, None)
    if sets is None:  # every module list the plan would try, and the job's own
        sets = tuple(dict.fromkeys(module_sets(model) + ((tuple(recipe.recompute_modules),) if recipe.recompute_modules
                                                         else ())))
    graphs3 = framework == "torchtitan" and torchtitan3 and static
    if framework == "torchtitan" and not graphs3:  # torchtitan before 0.3.0 has no graphs
        choices = dataclasses.replace(choices, cuda_graphs=(CudaGraphs.NONE,), full_graphs_without_pp_ep=False)
    best_sources = dict(sources)
    for name, attr in (("moe_dispatcher", "dispatchers"), ("cuda_graphs", "cuda_graphs"),
                       ("tp_comm_overlap", "tp_comm_overlap"), ("ep_comm_overlap", "ep_comm_overlap")):
        options = getattr(choices, attr)
        if len(options) > 1:
            best_sources[name] = "searched"
        elif name in sources and getattr(recipe, name) not in options:
            # the one value the framework's files run, not the job's: the launch's evidence would not say it (a QA
            # run: a torchtitan job's DeepEP cited for a best plan priced with the all-to-all dispatcher)
            job = getattr(recipe, name)
            best_sources[name] = (f"{framework}'s files as placement writes them run "
                                  f"{getattr(options[0], 'value', options[0])} only (placement/emit/common.py "
                                  f"RECIPE_SUPPORT), not the job's {getattr(job, 'value', job)} ({sources[name]})")
    if framework == "torchtitan" and "cuda_graphs" in sources:  # the launch's source would not say the best's
        best_sources["cuda_graphs"] = TORCHTITAN_GRAPHS if graphs3 else TORCHTITAN_NO_GRAPHS
    best_sources["recompute_modules"] = "searched"
    update: dict = {"recompute_modules": ()}
    # a launched split derived from the framework's own rule is not a choice to keep: the best plan searches its own
    if sources.get("pipeline_layout", "").startswith((TORCHTITAN_SPLIT, MEGATRON_SPLIT)):
        update["pipeline_layout"], best_sources["pipeline_layout"] = None, "default"
    if framework == "megatron" and recipe.pipeline_p2p_blocking:
        # a Megatron-DeepSpeed job (DeepSpeed's engine under Megatron's layers): the best plan is written as
        # Megatron-LM arguments, so it runs Megatron-LM's own pipeline schedule, DDP and attention backend
        for name, value in MEGATRON_LM_ENGINE.items():
            if getattr(recipe, name) != value:
                update[name], best_sources[name] = value, MEGATRON_LM_SOURCE
    if framework == "megatron":
        # switches Megatron turns on with a flag and that only save time (the findings price each): the best plan
        # runs them (--overlap-grad-reduce --overlap-param-gather; --moe-permute-fusion --moe-router-fusion; and,
        # without --no-async-tensor-model-parallel-allreduce, the asynchronous TP backward Megatron-Core always runs);
        # the gather's overlap too where the job has only --overlap-grad-reduce (a user trial: the audit priced
        # param_gather_not_overlapped at 0.063 s/step while its best plan, and the files written for it, kept it off)
        for name in ("dp_overlap", "param_gather_overlap", "moe_fusions", "tp_async_backward"):
            if not getattr(recipe, name):
                update[name], best_sources[name] = True, "searched"
    if framework == "maxtext" and (not recipe.optimizer_over_replicas or recipe.optimizer_over_replicas_beside_fsdp):
        # placement's MaxText files set shard_optimizer_over_data wherever the expert (or context) ranks are the
        # whole HSDP shard group and never beside fsdp ranks (emit.maxtext.optimizer_over_data), whatever the job
        # set: the best plan's optimizer sharding is decided per layout (cost.context.over_replicas)
        rows = {name: (value, why) for name, value, why in CAPABILITIES["maxtext"].recipe}
        for name in ("optimizer_over_replicas", "optimizer_over_replicas_beside_fsdp"):
            update[name] = rows[name][0]
            best_sources[name] = f"maxtext's files as placement writes them: {rows[name][1]}"
    if framework == "maxtext" and model.is_moe:
        # the experts' w1 rerun is the job's policy's, not the best plan's: placement's files keep moe_mlpwi_1 (remat
        # custom) except under an MLA model's named policy (emit.maxtext.CONFIG_RECIPE; a QA run: a qwen3 minimal
        # job's rerun was carried into its best plan, whose file keeps it)
        from placement.frameworks import recipe_rows, run_config

        config = run_config("maxtext", model, "bf16", topo.accelerator)
        row = next(r for r in recipe_rows("maxtext", False, None, config, True) if r[0] == "expert_w1_rerun")
        if recipe.expert_w1_rerun != row[1]:
            update["expert_w1_rerun"] = row[1]
            best_sources["expert_w1_rerun"] = f"maxtext's files as placement writes them: {row[2]}"
    if framework == "deepspeed" and not recipe.dp_overlap and overlap_key:
        # DeepSpeed's ZeRO-1/2 reduce beside the backward only under zero_optimization.overlap_comm, which the
        # dp_not_overlapped finding names and placement's DeepSpeed files always write (emit.deepspeed config): the
        # best plan runs it, and its change list adds it (changes._deepspeed_defaults); the PipelineEngine still
        # reduces after the flush (cost.dp engine_flush).  A QA run: a ZeRO-1 JSON without overlap_comm on 32 H100
        # was told overlap saves 0.051 s of 0.991 s, and its best plan kept the reduction exposed (0.990 s)
        update["dp_overlap"], best_sources["dp_overlap"] = True, "searched"
    return dataclasses.replace(space, recipe=recipe.model_copy(update=update), choices=choices,
                               module_sets=sets), best_sources


@dataclass(frozen=True)
class Finding:
    severity: str
    kind: str
    message: str
    groups: list[dict] = field(default_factory=list)
    cost_s: float | None = 0.0
    host_order: list[str] | None = None
    """The whole host order (node rank 0 first) the finding's remedy runs, where it is one (host_order_crossings)."""

    def as_json(self) -> dict:
        out = {"severity": self.severity, "kind": self.kind, "message": self.message, "groups": self.groups,
               "cost_s": None if self.cost_s is None else round(self.cost_s, 6)}
        return out | ({"host_order": self.host_order} if self.host_order is not None else {})


@dataclass(frozen=True)
class Audit:
    launch: LaunchLayout
    model: ModelSpec
    """The model as the launch files run it (`launched_model`)."""
    layout: Layout
    estimate: Plan
    findings: list[Finding]
    best: Plan
    best_gpu_of_rank: np.ndarray
    speedup: float
    changes: list[dict]
    host_order: list[str]
    assumed: dict[str, str] = field(default_factory=dict)
    """Added: values the job runs with that neither the files nor the command line state, each with what the audit
    assumed ("host_order": the allocation's order; "cuda_visible_devices": GPUs in numbered order, where the in-node
    order is priced); the JSON's layout.unstated lists them."""
    no_better_plan: str | None = None
    """Added: why the search under the framework's rules found no plan for the job (its infeasibility message), where
    it found none; the launched job is priced all the same and `best` is the job itself."""
    changes_withheld: list[dict] = field(default_factory=list)
    """Added: the changes to a best plan that saves less than MIN_CHANGE_GAIN of a job that fits (`changes` is then
    empty): listed for reference, not proposed."""
    measured: MeasuredStep | None = None
    """Added: the step a Megatron-LM log among the launch files measured, beside `estimate` (audit.measured); None
    where no launch file has iteration lines."""

    def without_timings(self) -> Audit:
        """`--reproducible`: the best plan's wall-clock mapping time left out."""
        solver = self.best.mapping_solver
        if not solver or solver.get("wall_s") is None:
            return self
        best = self.best.model_copy(update={"mapping_solver": solver | {"wall_s": None}})
        return dataclasses.replace(self, best=best)


def _severity(cost_s: float, step_s: float) -> str:
    share = cost_s / step_s if step_s > 0 else 0.0
    return "error" if share >= ERROR_SHARE else "warning" if share >= WARNING_SHARE else "info"


def launched_model(launch: LaunchLayout, model: ModelSpec) -> tuple[ModelSpec, dict[str, str]]:
    """The model as the launch files run it, and model field -> evidence (Plan.model_features): a GPT-NeoX config's
    gpt_j_residual decides the parallel residual; Megatron's, torchtitan's and MaxText's own layers run one in
    sequence (frameworks.model_as_run); DeepSpeed runs the user's model code, as the model says."""
    if launch.parallel_residual is not None:
        evidence = launch.sources.get("parallel_residual", "the launch files")
        return model.model_copy(update={"parallel_residual": launch.parallel_residual}), {"parallel_residual": evidence}
    return model_as_run(launch.framework, model, launch.framework)


def _check_batch_identity(launch: LaunchLayout, num_gpus: int, dp: int, per_replica: int, src, fix) -> None:
    """Files that state the global batch, the micro-batch and the accumulation must agree on this GPU count:
    global = micro x accumulation x dp (DeepSpeed's runtime/config.py _batch_assertion and GPT-NeoX's batch check
    refuse a job that does not; the readers check it where the files give the world size, here it comes from the
    GPU count)."""
    gb, mbs, gas = launch.global_batch, launch.micro_batch_size, launch.grad_accumulation
    if gb is None or mbs is None or gas is None or gb == mbs * gas * dp:
        return
    need, rem = divmod(gb, mbs * gas)
    other = (f"; on {need * per_replica} GPUs (dp {need}) the three agree" if not rem and need != dp else "")
    raise InputError(f"the launch files' global batch {gb}{src('global_batch')} is not micro-batch {mbs}"
                     f"{src('micro_batch_size')} x accumulation {gas}{src('grad_accumulation')} x dp {dp} "
                     f"({num_gpus} GPUs / (tp {launch.tp} x cp {launch.cp} x pp {launch.pp})) = {mbs * gas * dp}: "
                     f"the framework refuses such a job (DeepSpeed runtime/config.py _batch_assertion){other}; fix "
                     f"the files' numbers, or {fix(need * per_replica if not rem else 0)}")


CONNECTIONS_CHECK = "megatron/training/arguments.py validate_args (d98e8a64, 2026-08)"


def _check_megatron_connections(launch: LaunchLayout, layout: Layout, topo: Topology) -> Finding | None:
    """CUDA_DEVICE_MAX_CONNECTIONS as Megatron-LM checks it at start (CONNECTIONS_CHECK): Megatron-FSDP and torch
    FSDP2 assert it is not 1 ('FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset'); with TP or CP > 1 on Hopper
    and older (compute capability below 10), and neither FSDP nor the EP all-to-all overlap (which only warn), it
    asserts 1 ('Using tensor model parallelism or context parallelism require setting the environment variable
    CUDA_DEVICE_MAX_CONNECTIONS to 1').  A value the files set against it is a job that does not start; none set
    where 1 is asserted is an info finding (the job's environment may set it: a container, a module file).  A user
    trial: a plan's megatron.sh exporting 32 instead of 1 was priced as if it ran."""
    if launch.framework != "megatron" or launch.bridge_keys or is_megatron_deepspeed(launch) or launch.dialect:
        return None
    value, where = launch.device_max_connections, launch.sources.get("device_max_connections", "")
    zero = launch.sources.get("zero_stage", "")
    fsdp = next((f for f in ("--use-megatron-fsdp", "--use-torch-fsdp2") if f in zero), None)
    if fsdp is not None:
        if value == "1":
            raise start_refusal(where, f"CUDA_DEVICE_MAX_CONNECTIONS=1 under {fsdp} ({zero})",
                                f"Megatron-LM refuses it ({CONNECTIONS_CHECK}: 'FSDP requires "
                                f"CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset')", "unset it or set it above 1")
        return None
    if (layout.tp == 1 and layout.cp == 1) or topo.accelerator.mxfp8 or launch.recipe.get("ep_comm_overlap"):
        return None  # no check: Blackwell and later have no such requirement; the EP overlap only warns
    degrees = f"tp {layout.tp}" + (f", cp {layout.cp}" if layout.cp > 1 else "")
    if value is None and WITHHELD_MARK in where:
        return Finding("info", "device_connections_unset",
                       f"the ranks run without CUDA_DEVICE_MAX_CONNECTIONS ({where}); with {degrees} on "
                       f"{topo.accelerator.name} Megatron-LM asserts it is 1 ({CONNECTIONS_CHECK}: 'Using tensor model "
                       f"parallelism or context parallelism require setting the environment variable "
                       f"CUDA_DEVICE_MAX_CONNECTIONS to 1'), so the job starts only where something else sets it for "
                       f"the tasks; on that srun line pass it on: {_srun_export_fix('CUDA_DEVICE_MAX_CONNECTIONS')}",
                       [], 0.0)
    if value is None:
        return Finding("info", "device_connections_unset",
                       f"the launch files do not set CUDA_DEVICE_MAX_CONNECTIONS; with {degrees} on "
                       f"{topo.accelerator.name} Megatron-LM asserts it is 1 ({CONNECTIONS_CHECK}: 'Using tensor model "
                       f"parallelism or context parallelism require setting the environment variable "
                       f"CUDA_DEVICE_MAX_CONNECTIONS to 1'), so the job starts only where its environment sets it; "
                       f"export CUDA_DEVICE_MAX_CONNECTIONS=1 in the launch file", [], 0.0)
    if value != "1":
        raise start_refusal(where, f"CUDA_DEVICE_MAX_CONNECTIONS={value} with {degrees} on {topo.accelerator.name} "
                                   f"(compute capability below 10)",
                            f"Megatron-LM refuses it ({CONNECTIONS_CHECK}: 'Using tensor model parallelism or context "
                            f"parallelism require setting the environment variable CUDA_DEVICE_MAX_CONNECTIONS to 1')",
                            "set CUDA_DEVICE_MAX_CONNECTIONS=1")
    return None


def _check_blockwise_tp_overlap(launch: LaunchLayout, layout: Layout, recipe: Recipe, sources: dict[str, str],
                                train: TrainingSpec, topo: Topology) -> None:
    """A launch with TP communication overlap under blockwise FP8 and tp above 1 stops at its first TP all-gather
    (BLOCKWISE_USERBUFFERS): refused with the files' own lines.  The pricing's refusal (cost.step) names `evaluate`'s
    flags, which a Megatron-Bridge config does not have (a QA run: a saved config with model.tp_comm_overlap true and
    mixed_precision.fp8_recipe blockwise was told to 'drop --tp-comm-overlap')."""
    if not recipe.tp_comm_overlap or layout.tp < 2 or \
            fp8_recipe_as_run(topo, recipe, train.precision) is not Fp8Recipe.BLOCKWISE:
        return
    where = (sources.get("tp_comm_overlap") or "the TP communication overlap").removeprefix("launch:")
    fp8 = (sources.get("fp8_recipe") or "fp8_recipe blockwise").removeprefix("launch:")
    what = (f"TP communication overlap with blockwise FP8 ({fp8}) at "
            f"tp {layout.tp}" + (f" ({launch.sources['tp']})" if launch.sources.get("tp") else ""))
    raise start_refusal(where, what, f"the job stops at its first TP all-gather: {BLOCKWISE_USERBUFFERS}",
                        "turn the TP overlap off in the files, or use a per-tensor FP8 recipe (tensorwise, Hopper) or "
                        "mxfp8 (Blackwell)")


def _srun_export_fix(name: str) -> str:
    """How an srun line passes on a variable the script exports (srun(1) --export: `ALL`, the default, passes the
    caller's environment; a list names the variables it passes, beside SLURM's; `NONE` can name none)."""
    return (f"--export=ALL (srun's default), or name {name} in its --export list (NONE takes no names: srun(1) "
            f"--export)")


ALLOCATOR_PARSE = "c10 AllocatorConfig parseExpandableSegments: 'Expected a single True/False argument'"
"""PyTorch's allocator config parser takes expandable_segments:True or :False, case and all."""


def allocator_expandable(conf: str | None, where: str = "") -> bool | None:
    """Whether PyTorch allocator settings as a launch line sets them turn expandable segments on: True, False (unset,
    or `:False`), None where the files leave the value to the environment (`${VAR}`) or have no launch line.  A value
    PyTorch refuses (`expandable_segments:true`: its parser takes `True` or `False` only, ALLOCATOR_PARSE) is an
    InputError: the job does not start."""
    if conf is None or "$" in conf:
        return None
    for item in conf.replace(" ", "").split(","):
        key, _, value = item.partition(":")
        if key == "expandable_segments":
            if value not in ("True", "False"):
                raise InputError(f"{where + ': ' if where else ''}PYTORCH_CUDA_ALLOC_CONF={conf}: "
                                 f"expandable_segments:{value} is refused by PyTorch "
                                 f"({ALLOCATOR_PARSE}), so this job does not start; write expandable_segments:True")
            return value == "True"
    return False


def _allocator_note(launch: LaunchLayout) -> Finding | None:
    """An info finding where the launch line runs without PyTorch's expandable segments: the memory price keeps
    ALLOCATOR_FRAGMENTATION of HBM for the caching allocator, which holds only with them (cost.constants), and
    without them fragmentation can take several GiB more, so a job priced close to its capacity may not fit.  None
    where the files have no launch line (a config file alone), set them, or leave the value to the environment; the
    job's environment may set them too (a container, a module file), so this prices nothing (a user trial: the audit
    of a torchtitan.sh without them said `which launch.sbatch sets` of the capacity)."""
    conf, where = launch.allocator_conf, launch.sources.get("allocator_conf", "")
    if launch.framework == "maxtext":
        return None
    if "PYTORCH_HIP_ALLOC_CONF, which" in where and allocator_expandable(conf, where):
        # ROCm's own name: the price holds on a ROCm build, which reads it; a CUDA build does not (said, not priced)
        return Finding("info", "allocator_segments_unset",
                       f"expandable segments are set through PYTORCH_HIP_ALLOC_CONF ({where}), which only PyTorch's "
                       f"ROCm builds read: on a CUDA build export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                       f"instead, or the {ALLOCATOR_FRAGMENTATION:.0%} of HBM the memory price keeps for the caching "
                       f"allocator's fragmentation may not hold", [], 0.0)
    if allocator_expandable(conf, where) is not False:
        return None
    said = f"set to {conf!r}" if conf else "not set"
    if not conf and WITHHELD_MARK in where:
        return Finding("info", "allocator_segments_unset",
                       f"PYTORCH_CUDA_ALLOC_CONF is not set where the job starts ({where}); the memory price keeps "
                       f"{ALLOCATOR_FRAGMENTATION:.0%} of HBM for the caching allocator's fragmentation, which assumes "
                       f"expandable segments (without them it can take several GiB more), so on that srun line pass "
                       f"it on: {_srun_export_fix('PYTORCH_CUDA_ALLOC_CONF')}", [], 0.0)
    return Finding("info", "allocator_segments_unset",
                   f"PYTORCH_CUDA_ALLOC_CONF is {said} where the job starts ({where}); the memory price keeps "
                   f"{ALLOCATOR_FRAGMENTATION:.0%} of HBM for the caching allocator's fragmentation, which assumes "
                   f"expandable segments (without them it can take several GiB more), so unless the job's "
                   f"environment sets them, export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the launch "
                   f"file (placement's launch.sbatch and torchtitan's run_train.sh set them)", [], 0.0)


JAX_POOL_DEFAULT = 0.75
"""The share of the GPU JAX preallocates where no memory fraction is set (docs.jax.dev gpu_memory_allocation: "JAX
will preallocate 75% of the total GPU memory"; its current policy, "0.75+", then lets the pool grow to the whole GPU
for ordinary buffers, collective buffers staying in the first 75 %)."""
JAX_POOL_DOC = "docs.jax.dev gpu_memory_allocation"
JAX_FRACTION_FIX = ("XLA_PYTHON_CLIENT_MEM_FRACTION={:.2f} (the name every JAX reads; newer ones prefer "
                    "XLA_CLIENT_MEM_FRACTION)")
"""The memory-fraction setting a finding proposes, as placement's own maxtext launch lines write it."""


def jax_memory_pool(launch: LaunchLayout, hbm_bytes: float) -> tuple[float | None, str | None]:
    """(pool bytes or None for no cap, note or None) of a MaxText job's JAX allocator as its launch line sets it
    (readers.maxtext.jax_memory_settings): a memory fraction caps the pool at that share of the GPU, which every
    buffer but the CUDA context and NCCL's own (the reserve) must fit in (JAX_POOL_DOC: "this makes JAX preallocate
    XX% of the total GPU memory"; placement's maxtext launch lines set it the same way, emit.maxtext.mem_fraction);
    none set runs JAX's 0.75+ policy (JAX_POOL_DEFAULT), priced at the whole GPU with the note saying so; the
    platform allocator keeps no pool.  (None, None) where the files have no launch line (a config alone: the
    environment decides) or the job is not MaxText's.  A fraction JAX cannot start with is an error."""
    text, where = launch.jax_memory_fraction, launch.sources.get("jax_memory_fraction", "")
    if launch.framework != "maxtext" or text is None:
        return None, None
    if launch.jax_allocator == "platform":
        return None, (f"{launch.sources.get('jax_allocator', '')}: JAX keeps no pool and allocates each buffer on "
                      f"demand ({JAX_POOL_DOC}), so the GPU bounds the job")
    if text == "":
        return None, (f"{where}: JAX preallocates {JAX_POOL_DEFAULT:.0%} of the GPU and its 0.75+ policy lets the "
                      f"pool grow to all of it ({JAX_POOL_DOC}; a JAX before that policy stops at "
                      f"{JAX_POOL_DEFAULT:.0%})")
    try:
        fraction = float(text)
    except ValueError:
        if "$" in text:  # a value the files leave to the environment
            return None, f"{where}: a value the files leave to the environment, so the GPU bounds the job as priced"
        raise InputError(f"{where}: {text!r} is no number, which JAX's float() refuses when it first uses the GPU "
                         f"(jaxlib xla_client.py generate_pjrt_gpu_plugin_options), so the job does not start; set "
                         f"it to the share of HBM JAX may hold, e.g. 0.90") from None
    if not 0.0 < fraction <= 1.0:
        raise InputError(f"{where}: JAX's pool is that share of the GPU's memory, and {fraction:g} is outside "
                         f"(0, 1], so the job cannot start its allocator; set it to the share of HBM JAX may hold, "
                         f"e.g. 0.90")
    return fraction * hbm_bytes, f"{fraction:.0%} of {hbm_bytes / GiB:.1f} GiB: {where}"


def _fraction_holding(peak_bytes: float, hbm_bytes: float) -> float:
    """The memory fraction, to a hundredth, whose JAX pool holds a job of `peak_bytes` beside the reserve."""
    return min(math.ceil(100 * (peak_bytes - MEMORY_RESERVE_BYTES) / hbm_bytes) / 100, 1.0)


def _jax_pool_findings(c: _Ctx, plan: Plan, launch: LaunchLayout) -> list[Finding]:
    """A MaxText job whose launch line leaves JAX's memory fraction unset (and keeps JAX's pool: not the platform
    allocator), where its peak outgrows the 75 % JAX preallocates: a warning that it runs only under JAX's 0.75+
    growth policy (a JAX without it stops at 75 %), with the fraction that holds it either way."""
    if (launch.framework != "maxtext" or launch.jax_memory_fraction != "" or launch.jax_allocator == "platform"
            or not plan.fits):
        return []
    note, hbm = c.train.memory_pool_note, c.topo.accelerator.hbm_bytes
    need = plan.peak_memory_bytes - MEMORY_RESERVE_BYTES
    if need <= JAX_POOL_DEFAULT * hbm:
        return []
    fraction = _fraction_holding(plan.peak_memory_bytes, hbm)
    return [Finding("warning", "jax_memory_fraction_unset",
                    f"the job's {plan.peak_memory_bytes / GiB:.1f} GiB per GPU ({need / GiB:.1f} GiB in JAX's pool "
                    f"beside the {MEMORY_RESERVE_BYTES / GiB:.0f} GiB reserve) outgrows the "
                    f"{JAX_POOL_DEFAULT:.0%} of {hbm / GiB:.1f} GiB JAX preallocates with no memory fraction set "
                    f"({note}): it runs only where JAX grows the pool; export {JAX_FRACTION_FIX.format(fraction)} "
                    f"where the job starts to hold it with any JAX", [], 0.0)]


def _check_megatron_even_split(launch: LaunchLayout, model: ModelSpec, src) -> None:
    """Megatron-LM splits the layers evenly over the pipeline ranks unless the files say otherwise
    (--decoder-first/last-pipeline-num-layers, --pipeline-model-parallel-layout): it asserts num_layers (plus one for
    each of --account-for-embedding/loss-in-pipeline-split) % pp == 0 (megatron/training/arguments.py validate_args:
    'Number of layers should be divisible by the pipeline-model-parallel size'; megatron-core TransformerConfig
    raises the same), so a job that breaks it does not start.  A user trial's 12 layers on pp 8 got placement's
    own uneven split and the fix "try --pp 7", which Megatron refuses too.  DeepSpeed's PipelineEngine (Megatron-
    DeepSpeed under --deepspeed) partitions by parameters instead, and Megatron-Bridge's files go through the same
    TransformerConfig."""
    engine = launch.recipe.get("pipeline_p2p_blocking")
    if (launch.framework != "megatron" or engine or launch.pp <= 1 or launch.first_stage_layers is not None
            or launch.last_stage_layers is not None or launch.recipe.get("pipeline_layout")):
        return
    extra = [flag for flag, field in (("--account-for-embedding-in-pipeline-split", "account_for_embedding"),
                                      ("--account-for-loss-in-pipeline-split", "account_for_loss"))
             if launch.recipe.get(field)]
    units = model.num_layers + len(extra)
    if units % launch.pp:
        divisors = [d for d in range(2, units + 1) if units % d == 0 and d <= 64]
        counted = f"{model.num_layers} layers" + "".join(f" + 1 ({f})" for f in extra)
        raise InputError(f"pipeline parallel size {launch.pp}{src('pp')} does not divide {counted} = {units}: "
                         f"Megatron-LM splits the layers evenly and refuses it (arguments.py validate_args: 'Number "
                         f"of layers should be divisible by the pipeline-model-parallel size'), so this job does not "
                         f"start; use a pp that divides {units} ({', '.join(map(str, divisors)) or 'none above 1'}), "
                         f"or state the uneven split (--decoder-first-pipeline-num-layers / "
                         f"--decoder-last-pipeline-num-layers)")


UNEVEN_SPLIT_CHECK = "megatron/core/transformer/transformer_block.py get_num_layers_to_build (d98e8a64, 2026-08)"


def _check_megatron_uneven_split(launch: LaunchLayout, model: ModelSpec, src) -> None:
    """A Megatron-LM split the files state with --decoder-first/last-pipeline-num-layers is built only where Megatron-
    Core's get_num_layers_to_build (UNEVEN_SPLIT_CHECK) asserts hold: no standalone embedding or loss stage beside it,
    the layers left over after the first and last ranks divisible by the ranks left, and under interleaving each
    rank's layers divisible by its model chunks.  A user trial's 126 layers on pp 16 with 6 / 6 and 4 chunks per
    rank was priced with placement's own 7/8/7 split and an info line, though Megatron asserts at build."""
    first, last = launch.first_stage_layers, launch.last_stage_layers
    if (launch.framework != "megatron" or is_megatron_deepspeed(launch) or launch.pp <= 1
            or (first is None and last is None) or launch.recipe.get("pipeline_layout")
            or "pipeline_model_parallel_layout" in launch.sources.get("first_stage_layers", "")):
        return  # a pipeline layout string states every stage itself (read into first/last here)
    where = "".join(src(f) for f in ("first_stage_layers", "last_stage_layers") if f in launch.sources)
    flags = " / ".join(f for f, v in (("--decoder-first-pipeline-num-layers", first),
                                      ("--decoder-last-pipeline-num-layers", last)) if v is not None)

    def refuse(why: str, fix: str) -> InputError:
        return InputError(f"{flags}{where}: {why}; Megatron-Core asserts it when it builds the model "
                          f"({UNEVEN_SPLIT_CHECK}), so this job does not start; {fix}")

    if launch.recipe.get("account_for_embedding") or launch.recipe.get("account_for_loss"):
        raise refuse("an uneven split beside --account-for-embedding/loss-in-pipeline-split ('Does not support "
                     "standalone embedding stage and standalone loss stage with uneven pp')",
                     "drop one of the two")
    left = launch.pp - (first is not None) - (last is not None)
    rest = model.num_layers - (first or 0) - (last or 0)
    if left > 0 and (rest < 0 or rest % left):
        raise refuse(f"{model.num_layers} layers less the first and last ranks' leave {rest} for {left} ranks ('With "
                     f"uneven pipelineing the left over layers must be divisible by left over stages')",
                     "give first and last counts that leave a multiple of the middle ranks")
    middle = rest // left if left > 0 else 0
    vpp = launch.vpp or 1
    if vpp > 1:
        ranks = [n for n in (first, last, middle if left > 0 else None) if n is not None]
        bad = [n for n in ranks if n % vpp]
        if bad:
            raise refuse(f"a rank of {bad[0]} layers does not split into its {vpp} model chunks{src('vpp')} "
                         f"('num_layers_per_pipeline_rank should be divisible by vp_size')",
                         f"give each rank a multiple of {vpp} layers, or fewer chunks")


def _check_pipeline_engine_zero(launch: LaunchLayout, src) -> None:
    """DeepSpeed's PipelineEngine asserts ZeRO below stage 2 (runtime/pipe/engine.py: 'ZeRO-2 and ZeRO-3 are
    incompatible with pipeline parallelism'): a DeepSpeed pipeline (a PipelineModule topology, or Megatron-DeepSpeed
    under --deepspeed) with ZeRO-2 or -3 does not start.  GPT-NeoX's reader says its own words for the same check."""
    engine = launch.framework == "deepspeed" or (launch.framework == "megatron"
                                                 and launch.recipe.get("pipeline_p2p_blocking"))
    zero = launch.zero_stage or 0
    if engine and launch.pp > 1 and zero >= 2:
        raise InputError(f"ZeRO stage {zero}{src('zero_stage')} with a pipeline of {launch.pp} stages{src('pp')}: "
                         f"DeepSpeed's PipelineEngine refuses it (runtime/pipe/engine.py: 'ZeRO-2 and ZeRO-3 are "
                         f"incompatible with pipeline parallelism'), so this job does not start; use ZeRO stage 0 or "
                         f"1 with the pipeline, or no pipeline")


def resolve_layout(launch: LaunchLayout, model: ModelSpec, num_gpus: int, gpus_per_host: int | None = None,
                   gpus_fix: str | None = None) -> Layout:
    """The launch files' layout, with the framework's defaults for what they leave out and dp from the
    GPU count; errors name the setting and its source line.  `gpus_per_host`: the GPU count is a real
    allocation's (hosts of that many GPUs), whose size the host list sets, not --gpus.  `gpus_fix`: where the GPU
    count is not a flag (a measured run's log or entry: `validate --runs`, `calibrate --steps`), the fix to name."""
    where = launch.sources

    def src(name: str) -> str:
        return f" (from {where[name]})" if name in where else ""

    per_replica = launch.tp * launch.cp * launch.pp

    def fix(gpus: int) -> str:
        if gpus_fix is not None:
            return gpus_fix
        if gpus_per_host is None:
            return f"give the GPU count the job ran on (--gpus{f' {gpus}' if gpus else ''})"
        step = per_replica // math.gcd(per_replica, gpus_per_host)  # hosts per whole number of replicas
        return (f"give the hosts the job ran on (--nodelist, e.g. its $SLURM_JOB_NODELIST; a real allocation's "
                f"size is its host list's, and --gpus does not apply): {num_gpus // gpus_per_host} hosts of "
                f"{gpus_per_host} GPUs are given, and a whole number of replicas takes a multiple of {step} hosts")

    if num_gpus % per_replica and gpus_fix is None and launch.world_size == num_gpus and "world_size" in where:
        # the files start that many ranks themselves (a QA trial: `srun -N 2 python ...`, one task a node, was told
        # to give --gpus, which cannot change what srun starts)
        raise InputError(
            f"tp ({launch.tp}) x cp ({launch.cp}) x pp ({launch.pp}) = {per_replica} from the launch files does not "
            f"divide the {num_gpus} GPUs, the ranks they start ({where['world_size']}): the framework refuses such a "
            f"job; start a multiple of {per_replica} ranks, or change the degrees")
    if num_gpus % per_replica:
        raise InputError(
            f"tp ({launch.tp}) x cp ({launch.cp}) x pp ({launch.pp}) = {per_replica} from the launch files does not "
            f"divide the {num_gpus} GPUs; {fix(0)}")
    dp = num_gpus // per_replica
    if launch.dp is not None and launch.dp != dp:
        raise InputError(
            f"the launch files set a data-parallel degree of {launch.dp}{src('dp')} but {num_gpus} GPUs / "
            f"(tp {launch.tp} x cp {launch.cp} x pp {launch.pp}) = {dp}; {fix(launch.dp * per_replica)}")
    _check_batch_identity(launch, num_gpus, dp, per_replica, src, fix)
    _check_pipeline_engine_zero(launch, src)
    for name, given, have in _model_shape(launch, model):
        if given is not None and given != have:
            # a value the files leave to the framework's default (Megatron's --ffn-hidden-size 4h) is trained too
            defaulted = where.get(name, "").startswith("default")
            flag = MEGATRON_SHAPE_FLAGS.get(name) if defaulted and launch.framework == "megatron" else None
            state = f", or state {flag.format(have)} in the launch" if flag else ""
            raise InputError(
                f"the launch files {'train' if defaulted else 'set'} {name} = {given}{src(name)} but model "
                f"{model.name} has {have}; pass the model the job trains (--model NAME, a YAML or its "
                f"config.json){state}")
    _check_mlp_kind(launch, model, src)
    _check_vocab(launch, model, src)
    _check_torchtitan_model(launch, model)
    _check_maxtext_model(launch, model)
    _check_megatron_even_split(launch, model, src)
    _check_megatron_uneven_split(launch, model, src)
    etp = launch.etp if launch.etp is not None else (launch.tp if DEFAULT_ETP_IS_TP[launch.framework] else 1)
    if launch.framework == "torchtitan" and launch.etp is None and launch.ep == 1:
        etp = launch.tp  # TORCHTITAN_ETP_AT_EP1 (a user trial: tp 2 at ep 1 was priced with unsharded experts)
    if model.moe is None:
        etp = 1
    shard = launch.dp_shard
    zero = launch.zero_stage if launch.zero_stage is not None else 0
    if zero == 3:
        if shard is None and dp % max(launch.dp_replicate, 1):
            raise InputError(f"the data-parallel replicas {launch.dp_replicate}{src('dp_replicate')} do not divide dp "
                             f"{dp}: placement prices HSDP as shard groups of whole data-parallel ranks; give a "
                             f"replica count that divides {dp}")
        shard = shard if shard is not None else dp // max(launch.dp_replicate, 1)
        if shard < 1 or dp % shard:
            raise InputError(f"data-parallel shard degree {shard}{src('dp_shard')} does not divide dp {dp}")
    else:
        shard = None
    tp = launch.tp
    sp = bool(launch.sequence_parallel) and tp > 1
    try:
        return Layout(tp=tp, cp=launch.cp, ep=launch.ep, etp=etp, pp=launch.pp,
                      vpp=launch.virtual_stages(model.num_layers), dp=dp,
                      micro_batch_size=launch.micro_batch_size or 1, zero_stage=zero,
                      dp_shard=None if shard in (None, dp) else shard,
                      recompute=Recompute(launch.recompute or "none"), sequence_parallel=sp)
    except ValidationError as err:  # one paragraph naming the field and the value read from the files
        raise InputError(format_validation_error(err, "the launch files' layout")) from None
    except ValueError as err:  # pydantic's cross-field checks, already worded with the numbers
        raise InputError(f"the launch files' layout is not valid: {err}") from None


def _devices_by_host(launch: LaunchLayout, host_of_node: list[str]) -> LaunchLayout:
    """The launch with each node rank's CUDA_VISIBLE_DEVICES from a file given that lists them by host
    (`devices_by_host`, placement's cuda_visible_devices.txt), in place of launch lines whose value the files leave
    open (launch.sbatch reads that file at run time); node rank k runs on host_of_node[k].  Lines that state their
    value keep it.  An InputError where the file names none of the job's hosts."""
    by_host = launch.devices_by_host
    if not by_host:
        return launch
    if not set(by_host) & set(host_of_node):
        from placement.audit.launch import DEVICES_FOUND

        if DEVICES_FOUND in launch.sources:  # found, not given: a plan's file for other hosts (placeholders) is no
            # order of this job's; its lines stay values the files do not hold, as without the file
            sources = {**launch.sources, DEVICES_FOUND: f"{launch.sources[DEVICES_FOUND]}, set aside: it names none "
                                                        f"of the job's hosts"}
            return launch.model_copy(update={"devices_by_host": {}, "sources": sources})
        first = next(iter(by_host.values()))
        raise InputError(f"{first.evidence}: the GPU order file names none of the job's hosts "
                         f"({', '.join(host_of_node[:3])}{' ...' if len(host_of_node) > 3 else ''}); pass the file "
                         f"of this allocation, or the allocation it was written for (--nodelist)")
    kept = tuple(n for n in launch.cuda_visible_devices if n.devices is not None)
    given = tuple(by_host[h].model_copy(update={"node_rank": k}) for k, h in enumerate(host_of_node) if h in by_host)
    files = sorted({n.evidence.split(":", 1)[0] for n in given})
    source = (f"{', '.join(files)}: each host's CUDA_VISIBLE_DEVICES (the GPU order file the launch reads at run "
              f"time), {len(given)} of the job's {len(host_of_node)} hosts")
    return launch.model_copy(update={"cuda_visible_devices": given + kept,
                                     # lines that state their order keep their source (the script's own lines)
                                     "sources": {"cuda_visible_devices": source, **launch.sources}})


def node_gpu_orders(launch: LaunchLayout, num_hosts: int, gpus_per_host: int,
                    used: int | None = None) -> tuple[list[tuple[int, ...]], list[Finding]]:
    """The GPU order each node rank runs its local ranks on (local rank i on GPU order[i]), from the
    CUDA_VISIBLE_DEVICES of the files' launch lines (a line without it, or no launch line: 0, 1, ... in order; a line
    whose node rank the files leave open runs on every node no line names), and a finding where the lines run
    different orders.  A job on `used` GPUs of a node (fewer than gpus_per_host) runs its ranks on the first `used`
    entries, which may name any of the node's GPUs (placement's MaxText files list a partial host's, which JAX needs:
    emit.maxtext.jax_visible); the order then goes on with the node's other GPUs.  An InputError where a value does
    not list the node's GPUs."""
    identity = tuple(range(gpus_per_host))
    used = gpus_per_host if used is None else used

    def order(devices) -> tuple[int, ...]:
        head = tuple(devices[:used])
        return head + tuple(g for g in identity if g not in head)

    lines = launch.cuda_visible_devices
    for n in lines:
        if n.devices is not None and (len(set(n.devices[:used])) != used or not set(n.devices[:used]) <= set(identity)):
            listed = ",".join(map(str, n.devices))
            raise InputError(
                f"{n.evidence}: CUDA_VISIBLE_DEVICES={listed} does not list the {gpus_per_host} GPUs "
                f"0..{gpus_per_host - 1} of a node of this cluster in some order (each node's ranks run on its first "
                f"{gpus_per_host} entries); give a permutation of them, or the node type the job ran on (--node-type)"
                if used == gpus_per_host else
                f"{n.evidence}: CUDA_VISIBLE_DEVICES={listed} does not list {used} different GPUs of "
                f"0..{gpus_per_host - 1} (the job's {used} ranks on a node run on its first {used} entries); give "
                f"{used} of them, or the node type the job ran on (--node-type)")
    anywhere = [n for n in lines if n.node_rank is None]
    line_of = node_line(lines)
    orders = []
    for k in range(num_hosts):
        n = line_of(k)
        orders.append(identity if n is None or n.devices is None else order(n.devices))
    stated: dict[tuple[int, ...], NodeDevices] = {}  # each order: the first line that runs it
    for n in lines:
        if n.unresolved is None:  # a value read at run time states no order (its note: `assumed`)
            stated.setdefault(order(n.devices) if n.devices else identity, n)
    if len(stated) <= 1 and len(set(orders)) <= 1:
        return orders, []
    shown = "; ".join(n.shown() for n in list(stated.values())[:4])
    return orders, [Finding(
        "warning", "gpu_order_differs",
        f"the launch lines run their ranks on the GPUs in {len(stated)} different orders (CUDA_VISIBLE_DEVICES): "
        f"{shown}{' ...' if len(stated) > 4 else ''}; priced with each node rank's own order"
        + ("" if not anywhere or len(anywhere) == 1 else f" (the lines whose node rank the files leave open: the "
           f"first's, {anywhere[0]})")
        + ", the step at the slowest order's in-node bandwidth (every collective waits for it); make the lines "
          "agree", [], 0.0)]


RANKFILE_LINE = re.compile(r"rank\s+(\d+)\s*=\s*(\S+)\s+slot=\S+")
"""A line of an Open MPI rankfile (mpirun --rankfile; placement writes one): `rank 3=gpu0036 slot=3`."""


def read_host_order(path: Path) -> list[str]:
    """The host order a job ran with, node rank 0 first, from any of the files launchers take:
    placement's hosts.txt (`NODE_RANK HOST`), an Open MPI rankfile (`rank N=HOST slot=S`: the hosts in the order of
    their ranks, each one run of consecutive ranks), a DeepSpeed/MPI hostfile (`HOST slots=N`), a SLURM
    hostfile for --distribution=arbitrary (one line per task: runs of one host collapse), or one host or
    hostlist expression per line.  `#` starts a comment."""
    from placement.loaders.files import read_text
    from placement.loaders.hostlist import expand_hostlist

    text = read_text(path, "host order file", "give a text file with one host per line, node rank 0 first")
    ranked: list[tuple[int, str]] = []
    hosts: list[str] = []
    by_rank: list[tuple[int, str]] = []  # an Open MPI rankfile: `rank N=HOST slot=S`
    line_of: dict[str, int] = {}  # each host's first line (a user trial: a duplicate was named without its lines)
    runs: list[list] = []  # plain host lines: [host, first line, last line, lines] of each run of one host
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        tokens = line.split()
        mpi = RANKFILE_LINE.fullmatch(line)
        if mpi:
            by_rank.append((int(mpi.group(1)), mpi.group(2)))
        elif len(tokens) == 2 and tokens[0].isdigit():
            _once(path, number, tokens[1], line_of)
            ranked.append((int(tokens[0]), tokens[1]))
        elif len(tokens) >= 2 and all(t.startswith(("slots=", "max_slots=")) for t in tokens[1:]):
            _once(path, number, tokens[0], line_of)
            hosts.append(tokens[0])
        elif len(tokens) == 1:
            expanded = expand_hostlist(tokens[0], source=f"{path}:{number}")
            for h in expanded:
                # a SLURM hostfile's run of one host's tasks is one node: a plain line repeating the plain line
                # before it (after a `HOST slots=N` line the repeat is a host given twice, named by _once)
                if hosts and runs and h == hosts[-1] == runs[-1][0]:
                    runs[-1][2:] = [number, runs[-1][3] + 1]
                else:
                    _once(path, number, h, line_of)
                    hosts.append(h)
                    runs.append([h, number, number, 1])
        else:
            raise InputError(f"{path}:{number}: {raw.strip()!r} is not a host order line; expected HOST, "
                             f"NODE_RANK HOST or HOST slots=N")
    if by_rank:
        if ranked or hosts:
            raise InputError(f"{path}: mixes `rank N=HOST slot=S` lines with other host lines; use one form")
        ranks = sorted(r for r, _ in by_rank)
        if ranks != list(range(len(by_rank))):
            raise InputError(f"{path}: ranks must be 0 .. {len(by_rank) - 1}, each once; {_rank_gaps(ranks)}")
        in_order = [h for _, h in sorted(by_rank)]
        runs = [h for k, h in enumerate(in_order) if k == 0 or h != in_order[k - 1]]
        if len(runs) != len(set(runs)):
            raise InputError(f"{path}: a host's ranks are not one run of consecutive ranks ({', '.join(runs[:6])} "
                             f"...): the audit reads a rankfile for its node order only; give the host order "
                             f"(placement's hosts.txt)")
        return runs
    if len({r[3] for r in runs}) > 1:
        # a SLURM hostfile lists every host once per task, all alike: runs of unequal length are a host given twice
        # (a user trial's n01 n03 n02 n02 was read as 3 hosts and refused for the count)
        common = max(sorted({r[3] for r in runs}), key=lambda n: sum(r[3] == n for r in runs))
        odd = next(r for r in runs if r[3] != common)
        raise InputError(f"{path}:{odd[1]}-{odd[2]}: host {odd[0]} is on {odd[3]} consecutive lines where the other "
                         f"hosts are on {common}: a SLURM hostfile lists each host once per task, alike; give each "
                         f"host once (or every host once per task), in node-rank order")
    if ranked and hosts:
        raise InputError(f"{path}: mixes NODE_RANK HOST lines with plain host lines; use one form")
    if ranked:
        ranks = sorted(r for r, _ in ranked)
        if ranks != list(range(len(ranked))):
            raise InputError(f"{path}: node ranks must be 0 .. {len(ranked) - 1} ({len(ranked)} lines), each once; "
                             f"{_rank_gaps(ranks)}")
        hosts = [h for _, h in sorted(ranked)]
    if not hosts:
        raise InputError(f"{path}: no hosts in the file; give one host per line, node rank 0 first")
    return hosts


def _once(path: Path, number: int, host: str, line_of: dict[str, int]) -> None:
    """A host of a host order file seen again is an error naming both lines (a SLURM hostfile's run of one host's
    task lines is one host: its caller skips the repeats)."""
    if host in line_of:
        raise InputError(f"{path}:{number}: host {host} is already listed on line {line_of[host]}; give each host "
                         f"once, in node-rank order")
    line_of[host] = number


def _rank_gaps(ranks: list[int]) -> str:
    """What is wrong with a file's ranks, sorted: the ones missing, beyond the count, and given twice."""
    n, given = len(ranks), set(ranks)
    missing = [r for r in range(n) if r not in given]
    beyond = sorted(r for r in given if r >= n)
    twice = sorted({r for k, r in enumerate(ranks) if k and ranks[k - 1] == r})
    parts = [f"{label} {', '.join(map(str, xs[:8]))}{', ...' if len(xs) > 8 else ''}"
             for label, xs in (("missing:", missing), ("beyond:", beyond), ("twice:", twice)) if xs]
    return "; ".join(parts)


def dealer_flag(launch: LaunchLayout) -> str:
    """The launcher flag that deals the job's ranks to its nodes (LaunchLayout.task_dealer): srun's --distribution,
    or an `mpirun ... python` launch's --map-by."""
    return "mpirun --map-by" if launch.task_dealer == "mpirun" else "srun --distribution"


def task_slots(launch: LaunchLayout, num_gpus: int, gph: int) -> np.ndarray:
    """slot[r]: node n's local rank i (n * gph + i) that the job's rank r runs as, as srun deals the tasks of an
    `srun python ...` launch to its N nodes (LaunchLayout.task_distribution; srun(1) -m): block (the default) puts
    ranks n * gph .. n * gph + gph - 1 on node n, the identity; plane=P deals P consecutive ranks a node, round
    robin, so rank r's block of P, b = r // P, runs on node b mod N at local ranks (b // N) * P ...; cyclic is
    plane=1, rank r on node r mod N.  Each task's local rank is its SLURM_LOCALID, the order of its node's tasks."""
    r = np.arange(num_gpus, dtype=np.int64)
    dist = launch.task_distribution
    plane = 1 if dist == "cyclic" else int(dist.removeprefix("plane=")) if dist and dist.startswith("plane=") else None
    if plane is None or plane == gph:  # block, or planes of a whole node: block
        return r
    where = launch.sources.get("task_distribution", "the launch files")
    if num_gpus % gph:
        raise InputError(f"{dealer_flag(launch)} {'node' if launch.task_dealer == 'mpirun' else dist} ({where}) "
                         f"deals the ranks round robin over the nodes, but "
                         f"{num_gpus} GPUs are not whole nodes of {gph}; give --gpus as a multiple of {gph}")
    if gph % plane:
        raise InputError(f"srun --distribution {dist} ({where}): planes of {plane} tasks do not fill a node's "
                         f"{gph} evenly ({gph} % {plane} = {gph % plane}), which placement does not price; use a "
                         f"plane size that divides {gph}, or block")
    nodes, block = num_gpus // gph, r // plane
    return (block % nodes) * gph + (block // nodes) * plane + r % plane


def framework_rank_of(layout: Layout, order: str) -> np.ndarray:
    """framework_rank[r]: the job's global rank that holds placement's rank r (same tp, cp, dp, pp
    coordinates).  The identity for Megatron's default tp-cp-ep-dp-pp, torchtitan and DeepSpeed; with
    --use-tp-pp-dp-mapping (tp-cp-ep-pp-dp) pp runs inside dp.  Expert groups follow placement's
    etp-ep-edp split of each stage's ranks, which is Megatron's whenever ep x etp divides tp x cp."""
    r = np.arange(layout.num_gpus, dtype=np.int64)
    if order == "tp-cp-ep-dp-pp":
        return r
    inner = layout.tp * layout.cp
    dp = (r // inner) % layout.dp
    pp = r // (inner * layout.dp)
    return r % inner + inner * (pp + layout.pp * dp)


def host_order_of(topo: Topology, hosts: list[str] | None) -> np.ndarray:
    """Host indices (allocation order) of node ranks 0, 1, ...: the job's own host order."""
    num_hosts = topo.num_hosts
    if not hosts:
        return np.arange(num_hosts)
    index = {name: h for h, name in enumerate(topo.host_names)}
    unknown = [h for h in hosts if h not in index]
    if unknown:
        raise InputError(
            f"host order: {len(unknown)} host(s) not in the cluster, first {unknown[0]!r}; the cluster's hosts are "
            f"{topo.host_names[0]!r} .. {topo.host_names[num_hosts - 1]!r} (give the same names as --nodelist)")
    seen: set[str] = set()
    dup = next((h for h in hosts if h in seen or seen.add(h)), None)
    if dup is not None:
        raise InputError(f"host order: host {dup!r} is listed twice; give each host once, in node-rank order")
    if len(hosts) != num_hosts:
        raise InputError(
            f"host order: {len(hosts)} hosts for {topo.num_gpus} GPUs = {num_hosts} nodes of "
            f"{topo.gpus_per_host}; list exactly the nodes the job ran on, in node-rank order")
    return np.array([index[h] for h in hosts], dtype=np.int64)


def _batch(layouts: list[Layout], recipe: Recipe) -> LayoutBatch:
    """The layouts under `recipe`, its recompute modules on the selective ones only (an alternative with
    recompute none stays none)."""
    batch = LayoutBatch.from_layouts(layouts, recipe.model_copy(update={"recompute_modules": ()}))
    if recipe.recompute_modules:
        mask = module_mask(recipe.recompute_modules)
        batch = dataclasses.replace(batch, rc_modules=np.where(batch.recompute == 1, mask, batch.rc_modules))
    return batch


def _keep_job_host_order(best: Plan, best_gpu: np.ndarray, job_gpu: np.ndarray, topo: Topology, model: ModelSpec,
                         train: TrainingSpec) -> tuple[Plan, np.ndarray]:
    """The best plan on the job's own hosts, node rank for node rank, where it prices the same there (within the
    mapper's TIE_REL): a reordering must pay for itself, as the mapper keeps the allocation order (mapping.mapper), so
    the change list moves no host for nothing (a user trial: four hosts of one leaf, listed in another order than the
    allocation's, were told to move two node ranks that save nothing).  Each host of the best plan's mapping is
    relabelled as the job's host of the same node rank, the GPUs inside it kept; a mapping whose node-rank blocks do
    not each fill one host is kept as it is."""
    from placement.mapping.mapper import TIE_REL

    gph = topo.gpus_per_host
    if topo.num_gpus % gph:
        return best, best_gpu
    blocks = best_gpu.reshape(-1, gph) // gph  # the host of each GPU of each node-rank block
    hb, ha = blocks[:, 0], job_gpu[::gph] // gph
    if np.array_equal(hb, ha) or not (blocks == hb[:, None]).all() or len(set(hb.tolist())) != len(hb) \
            or set(hb.tolist()) != set(ha.tolist()):
        return best, best_gpu
    host = np.arange(topo.num_hosts)
    host[hb] = ha
    alt = host[best_gpu // gph] * gph + best_gpu % gph
    ctx = EmitContext.of(best, topo, alt, model, train)
    priced = ctx.priced_as()  # as its files run it: the plan's model features and recipe, on the relabelled hosts
    if priced is None or priced.step_time_s > best.step_time_s * (1.0 + TIE_REL):
        return best, best_gpu
    layout, mapped = best.layout_spec(), topo.with_mapping(alt)
    est = _price(ctx.priced_model, train, mapped, [layout], best.recipe_spec())  # the group kinds of its crossings
    solver = (best.mapping_solver or {}) | {
        "chosen": "launch_order",
        "note": f"the job's own host order, which prices the same as the mapper's ({best.step_time_s:.6g} s/step)"}
    update = {"mapping_solver": solver, "crossings": crossings(mapped, group_kinds(layout, est, 0)),
              "mapping_compact": compact_mapping(topo, alt)}
    if best.mapping is not None:
        update["mapping"] = rank_table(topo, alt, layout, model.is_moe)
    return best.model_copy(update=update), alt


def _price(model: ModelSpec, train: TrainingSpec, topo: Topology, layouts: list[Layout],
           recipe: Recipe | None = None) -> Estimates:
    recipe = recipe or Recipe()
    return estimate(workload(model), train, topo, _batch(layouts, recipe), recipe)


MEGATRON_LM_ENGINE = {"pipeline_p2p_blocking": False, "pipeline_p2p_whole": False, "pipeline_grads_whole": False,
                      "pipeline_p2p_scatter": False,
                      "grad_accumulation": GradAccumulation.FUSED, "grad_all_reduce": False,
                      "attention_kernel": AttentionKernel.FLASH}
"""What Megatron-LM runs where a Megatron-DeepSpeed job ran DeepSpeed's engine: paired non-blocking pipeline sends of
the sequence-parallel shard (the whole activation from every TP rank without sequence parallelism),
gradient-accumulation fusion into its fp32 main grads, its own DDP reduce-scatter, and a fused
attention backend (--attention-backend auto)."""
MEGATRON_LM_SOURCE = ("Megatron-LM (the best plan's arguments are Megatron-LM's: it runs its own pipeline schedule, "
                      "DDP and attention backend, not Megatron-DeepSpeed's DeepSpeed engine)")

MEGATRON_DEFAULTS = {"moe_dispatcher": (Dispatcher.ALLGATHER, "default (Megatron-Core's --moe-token-dispatcher-type "
                                                              "allgather)"),
                     "moe_fusions": (False, "default (megatron-core TransformerConfig.moe_permute_fusion and "
                                            "moe_router_fusion are False unless --moe-permute-fusion "
                                            "--moe-router-fusion)")}
"""Recipe values Megatron-Core runs when its files leave the argument out, where they differ from the Recipe's."""
DEEPSPEED_MOE_DEFAULTS = {"moe_fusions": "Megatron-DeepSpeed's MoE is DeepSpeed-MoE (deepspeed/moe/sharded_moe.py), "
                                         "whose gating and einsum dispatch have no fused permute or router kernel"}
"""The same fields' sources for a Megatron-DeepSpeed job, whose MoE layers are DeepSpeed's, not Megatron-Core's."""


def _launch_source(evidence: str) -> str:
    """A recipe value's source as the plan names it: "launch:" and the files' evidence, or the framework default
    a reader filled in for what the files leave out (its own "default (...)" text)."""
    return evidence if evidence.startswith(("default", "torchtitan default")) else f"launch:{evidence}"


TORCHTITAN_BEFORE_030 = {
    "grad_buffer_passes": "torchtitan before 0.3.0 keeps no Megatron-Core gradient buffer either: torch's "
                          "optimizer.zero_grad() frees the gradients (set_to_none) and FSDP2 or DDP fold the 1/dp into "
                          "their reduction (their own per-step gradient copies are not priced)",
    "grad_reduce_fp32": "torchtitan before 0.3.0 reduces gradients in float32 too: FSDP2's reduce_dtype is "
                        "training.mixed_precision_reduce, whose only value is float32 (v0.2.2 "
                        "config/job_config.py:290), and without FSDP the weights stay float32 under autocast "
                        "(distributed/utils.py maybe_enable_amp), so DDP all-reduces float32 gradients",
    "reshard_after_backward": "torchtitan before 0.3.0 runs FSDP2 too, which reshards the weights after every "
                              "backward, and its step runs each accumulation micro-batch's forward and backward in "
                              "turn (v0.2.2 train.py gradient_accumulation_steps): under ZeRO-2 every micro-batch "
                              "gathers the weights again",
    "sp_saves_gathered_inputs": "torchtitan before 0.3.0 redistributes each block's attention and feed-forward input "
                                "to Replicate before the projections too (v0.2.2 models/llama3/infra/parallelize.py "
                                "prepare_module_input), and autograd keeps that gathered tensor for the weight "
                                "gradients",
    "pipeline_unsharded_grads": "torchtitan before 0.3.0 pipelines run torch.distributed.pipelining's PipelineStage "
                                "too, which keeps each stage's unsharded gradient until its last backward",
    "dp_reduce_every_microbatch": "torchtitan before 0.3.0 runs each accumulation micro-batch's forward and backward "
                                  "in turn too (v0.2.2 train.py gradient_accumulation_steps) and calls neither "
                                  "no_sync nor set_requires_gradient_sync, so its DDP (models/llama3/infra/"
                                  "parallelize.py apply_ddp, ZeRO-0) and HSDP all-reduce over the replicas every "
                                  "micro-batch",
    "pp_comm_overlap": "torchtitan before 0.3.0 interleaves with torch.distributed.pipelining's schedules too (v0.2.2 "
                       "distributed/pipeline_parallel.py imports them), which wait on a chunk's receive right before "
                       "it computes: priced with the transfers exposed, not as Megatron's overlap_p2p_comm",
    "tp_async_backward": "torchtitan before 0.3.0 runs DTensor's tensor parallelism too (v0.2.2 "
                         "models/llama3/infra/parallelize.py ColwiseParallel, RowwiseParallel): a column-parallel "
                         "input gradient is reduced when autograd reaches its redistribution, after the matmul's "
                         "backward, so no GEMM runs beside it",
    "tp_gathers_16bit": "torchtitan before 0.3.0 runs plain ColwiseParallel and RowwiseParallel under its row-wise "
                        "Float8 recipes too, so the all-gathers move 16-bit values (v0.2.2 "
                        "models/llama3/infra/parallelize.py:83-86: \"For rowwise recipes, we use regular TP and "
                        "all-gather happens in high precision\"); its tensor-wise recipe's FP8 gathers are read where "
                        "the files set it under the converter name float8, the only one its check matches",
    "fp8_saves_16bit_inputs": "torchtitan before 0.3.0 converts with torchao's convert_to_float8_training too (v0.2.2 "
                              "components/quantization/float8.py:149-152), whose Float8Linear saves the 16-bit input "
                              "for backward",
    "fp8_recasts_weights": "torchtitan before 0.3.0 converts with torchao's convert_to_float8_training too (v0.2.2 "
                           "components/quantization/float8.py:149-152), whose Float8Linear casts the 16-bit weight to "
                           "FP8 in each forward and backward, keeping no FP8 copy, unless "
                           "enable_fsdp_float8_all_gather casts the shard before FSDP's all-gather (read where the "
                           "files state it)",
}
"""The sources of torchtitan's framework rows (frameworks.CAPABILITIES, cited at 0.3.0) for files of an older
torchtitan (LaunchLayout.torchtitan_form), where the same holds, cited at v0.2.2."""
TORCHTITAN_030_ONLY = {
    "zero0_as_fsdp": (False, "torchtitan before 0.3.0 applies FSDP only where it shards (v0.2.2 "
                             "models/llama3/infra/parallelize.py:125-152: fsdp_enabled, else DDP over dp_replicate), "
                             "so its ZeRO-0 is DDP"),
}
"""torchtitan's framework rows that hold from 0.3.0 only: for an older file's job, the value it runs and why."""


DELAYED_FP8 = re.compile(r"""fp8[-_]recipe["']?[:=\s]+["']?delayed|'delayed' when --fp8-recipe is not given""")
"""A recipe source saying the job runs Megatron's delayed FP8 scaling (stated, or its default), which the readers
price as per-tensor `tensorwise`: the headline names what runs (a user trial read `fp8 tensorwise`, another Megatron
recipe)."""
TORCHTITAN_SPLIT = "torchtitan's split of"
"""How the source of a torchtitan launch's derived pipeline layout begins (`_torchtitan_launched_split`): the
best plan searches its own split."""


def _torchtitan_launched_split(launch: LaunchLayout, model: ModelSpec, layout: Layout) -> tuple[str, str] | None:
    """(pipeline layout, source) of the split torchtitan runs for the files' pipeline: its virtual stages dealt
    the layers plus the first/last_stage_less_layers weights evenly, the first stages one more, the first and last
    that many fewer (emit.torchtitan.split_over_stages), where placement's default split differs.  A user trial:
    Llama 3 70B on pp 4 with torchtitan's defaults runs 20/21/20/19 layers, priced as 20/20/20/20."""
    from placement.cost.pipeline import rank_layer_counts
    from placement.emit.torchtitan import split_layout, split_over_stages

    first, last = launch.first_stage_less_layers, launch.last_stage_less_layers
    stages = layout.pp * layout.vpp
    try:
        split = split_over_stages(model.num_layers, stages, first, last)
    except ValueError:
        return None  # the reader refuses a split torchtitan refuses (readers.torchtitan._pipeline_split)
    if len(split) != stages or min(split) < 1:
        return None
    per_rank = [sum(split[r::layout.pp]) for r in range(layout.pp)]
    if per_rank == rank_layer_counts(model.num_layers, layout.pp, layout.vpp):
        return None
    where = launch.sources.get("layers_per_virtual_stage") or f"{stages} virtual stages"
    return split_layout(split), (f"{TORCHTITAN_SPLIT} {model.num_layers} layers over {stages} virtual stages with "
                                 f"first/last_stage_less_layers {first}/{last} ({where}; distributed/"
                                 f"pipeline_parallel.py generate_llm_fqn_per_model_part): "
                                 f"{'/'.join(map(str, split))} per stage")


MEGATRON_SPLIT = "Megatron-Core's split of"
"""How the source of a Megatron launch's uneven split, priced as a pipeline layout, begins
(`_megatron_launched_split`): the best plan searches its own split."""


def _megatron_launched_split(launch: LaunchLayout, model: ModelSpec, layout: Layout,
                             mtp_layers: int = 0) -> tuple[str, str]:
    """(pipeline layout, source) of the split Megatron-Core builds from --decoder-first/last-pipeline-num-layers (a
    Bridge config's num_layers_in_first/last_pipeline_stage): the stated ranks their counts, the others the layers
    left over in equal shares, each rank's count dealt evenly over its model chunks (UNEVEN_SPLIT_CHECK; the audit
    refuses first what it asserts).  A user trial: 6 / 6 on pp 4 of 32 layers was priced 8/8/8/8 with an info line,
    though the busiest rank runs 10, and a lone --decoder-first-pipeline-num-layers 15 on pp 2 was priced 16/16 with
    no word.  MTP layers sit in the last stage before the loss, where Megatron builds them without a layout."""
    first, last = launch.first_stage_layers, launch.last_stage_layers
    left = layout.pp - (first is not None) - (last is not None)
    middle = (model.num_layers - (first or 0) - (last or 0)) // left if left > 0 else 0
    per_rank = [middle] * layout.pp
    if first is not None:
        per_rank[0] = first
    if last is not None:
        per_rank[-1] = last
    split = [per_rank[r] // layout.vpp for k in range(layout.vpp) for r in range(layout.pp)]
    last_stage = len(split) - 1
    text = format_layout([[EMBED] * (s == 0) + [DECODER] * n + [MTP] * mtp_layers * (s == last_stage)
                          + [LOSS] * (s == last_stage) for s, n in enumerate(split)])
    flags = "; ".join(dict.fromkeys(launch.sources[f] for f in ("first_stage_layers", "last_stage_layers")
                                    if f in launch.sources))
    chunks = f", {layout.vpp} chunks each" if layout.vpp > 1 else ""
    return text, (f"{MEGATRON_SPLIT} {model.num_layers} layers over {layout.pp} pipeline ranks ({flags}; "
                  f"{UNEVEN_SPLIT_CHECK}): {'/'.join(map(str, per_rank))} per rank{chunks}")


def launch_recipe(launch: LaunchLayout, model: ModelSpec, layout: Layout,
                  overrides: tuple[Recipe, dict[str, str]] | None = None,
                  several_hosts: bool = False, precision: str | None = None) -> tuple[Recipe, dict[str, str]]:
    """The recipe the launch files state (sources "launch:EVIDENCE"), the framework's defaults for what they
    leave out (on `several_hosts`, also what it runs there), and the command line's --recipe / recipe flags on
    top."""
    values = dict(launch.recipe)
    sources = {f: _launch_source(launch.sources.get(f"recipe.{f}", "")) for f in values}
    interval = values.pop("ac_layer_interval", None)
    if interval is not None:  # torchtitan's layer SAC: a full checkpoint of every k-th block of a chunk
        sources.pop("ac_layer_interval")
        per_chunk = -(-model.num_layers // (layout.pp * layout.vpp))
        values["recompute_num_layers"] = max(per_chunk // interval, 1)
        sources["recompute_num_layers"] = (f"launch:{launch.sources.get('recipe.ac_layer_interval', '')} (every "
                                           f"{interval}th of {per_chunk} layers per stage)")
    buckets = values.pop("ddp_num_buckets", None)
    if buckets is not None:  # Megatron-LM's --ddp-num-buckets
        where = launch.sources.get("recipe.ddp_num_buckets", "")
        sources.pop("ddp_num_buckets")
        if "ddp_bucket_params" in values:
            raise InputError(f"{where}: --ddp-num-buckets beside {launch.sources.get('recipe.ddp_bucket_params')}: "
                             f"Megatron-Core refuses both (DistributedDataParallelConfig.__post_init__: \"Cannot "
                             f"specify both num_buckets and bucket_size\"); keep one")
        params, how = _first_rank_params(launch, model, layout)
        values["ddp_bucket_params"] = max(params // buckets, 1)
        sources["ddp_bucket_params"] = (f"launch:{where} (Megatron-LM's resolve_ddp_bucket_size, core_v0.19.0 "
                                        f"training.py: the rank's parameters // num_buckets = {params:,} // {buckets} "
                                        f"= {values['ddp_bucket_params']:,}; {how})")
    if values.pop("ddp_bucket_hidden_squared", None):  # a DeepSpeed JSON's reduce_bucket_size "auto"
        where = launch.sources.get("recipe.ddp_bucket_hidden_squared", "")
        sources.pop("ddp_bucket_hidden_squared")
        values["ddp_bucket_params"] = model.hidden_size * model.hidden_size
        sources["ddp_bucket_params"] = (f"launch:{where} (\"auto\": the HF Trainer fills it with hidden_size x "
                                        f"hidden_size = {model.hidden_size} x {model.hidden_size} = "
                                        f"{values['ddp_bucket_params']:,}, transformers integrations/deepspeed.py "
                                        f"trainer_config_finalize)")
    cap = CAPABILITIES.get(launch.framework)
    before_030 = launch.framework == "torchtitan" and launch.torchtitan_form is not None
    if before_030 and layout.zero_stage == 0 and layout.cp == 1 and (layout.tp > 1 or layout.pp > 1):
        # a user trial's v0.2.2 file of this shape was priced as a bf16 job
        raise InputError(
            f"{launch.sources.get('zero_stage', 'the files')}: this job trains in float32: torchtitan before 0.3.0 "
            f"mixes precision with FSDP or, without it, with autocast, which it turns off under tensor or pipeline "
            f"parallelism (v0.2.2 distributed/utils.py:243-256 maybe_enable_amp: \"Mixed precision training with TP "
            f"or PP is only supported when FSDP/HSDP/CP is enabled\"), and nothing enables TF32; placement prices "
            f"bf16 and fp8 GEMMs only. To train in bf16, shard with FSDP (data_parallel_shard_degree above 1, on "
            f"GPUs beyond tp x pp = {layout.tp * layout.pp}, or context_parallel_degree above 1) or run torchtitan "
            f"0.3.0, which wraps every job in FSDP2's mixed precision")
    for name, value, why in cap.recipe_rows(several_hosts, precision, model.is_moe) if cap is not None else ():
        if name not in values:  # what the files state wins (a BF16_Optimizer job's fp32 gradient copy)
            values[name], sources[name] = value, (TORCHTITAN_BEFORE_030.get(name, why) if before_030 else why)
            if before_030 and name in TORCHTITAN_030_ONLY:
                values[name], sources[name] = TORCHTITAN_030_ONLY[name]
    if launch.framework == "deepspeed" and layout.zero_stage not in (1, 2) and "param_gather_overlap" in sources \
            and "param_gather_overlap" not in launch.recipe:
        # a user trial: the line read as if this ZeRO-0 or ZeRO-3 job gathered its weights after the step
        sources["param_gather_overlap"] += (f"; no such gather at this job's ZeRO stage {layout.zero_stage}: it "
                                            f"prices only a plan at ZeRO-1/2")
    if launch.framework == "megatron" and model.is_moe:
        deepspeed_moe = is_megatron_deepspeed(launch)
        for field, (value, why) in MEGATRON_DEFAULTS.items():
            if field not in values:
                # a user trial: a DeepSpeed-MoE job's unfused permute was sourced to Megatron-Core's switches
                values[field], sources[field] = value, (DEEPSPEED_MOE_DEFAULTS.get(field, why) if deepspeed_moe
                                                        else why)
    if launch.framework == "torchtitan" and layout.pp > 1 and values.get("reshard_after_backward") and \
            "reshard_after_backward" not in launch.recipe:
        # torch's PipelineStage turns the resharding off until each stage's last backward (pipelining/stage.py
        # backward_maybe_with_nosync: set_reshard_after_backward(False)); the cost model does the same under pp
        # (cost.dp, pipeline_unsharded_grads), so the source says so rather than every micro-batch's gather
        sources["reshard_after_backward"] += (
            "; with pipeline parallelism torch's PipelineStage keeps each stage's weights gathered until its last "
            "backward (torch/distributed/pipelining/stage.py backward_maybe_with_nosync), so no micro-batch gathers "
            "them again")
    if launch.framework == "torchtitan" and layout.pp > 1 and "pipeline_layout" not in values:
        split = _torchtitan_launched_split(launch, model, layout)
        if split is not None:
            values["pipeline_layout"], sources["pipeline_layout"] = split
    if (launch.framework == "megatron" and layout.pp > 1 and "pipeline_layout" not in values
            and not is_megatron_deepspeed(launch)
            and (launch.first_stage_layers is not None or launch.last_stage_layers is not None)):
        values["pipeline_layout"], sources["pipeline_layout"] = _megatron_launched_split(
            launch, model, layout, int(values.get("mtp_layers") or 0))
    if layout.recompute is not Recompute.SELECTIVE and values.get("recompute_modules"):
        values.pop("recompute_modules")  # Megatron reads the list only under selective granularity
        sources.pop("recompute_modules")
    if overrides is not None:
        given, given_sources = overrides
        for field, where in given_sources.items():
            values[field], sources[field] = getattr(given, field), where
    try:
        return Recipe.model_validate(values), sources
    except ValueError as err:  # pydantic ValidationError
        from placement.loaders.errors import format_validation_error

        raise InputError(format_validation_error(err, "the launch files' recipe")) from None  # type: ignore[arg-type]


def _first_rank_params(launch: LaunchLayout, model: ModelSpec, layout: Layout) -> tuple[int, str]:
    """(parameters, how counted) on the first pipeline rank, the one whose gradients Megatron-Core buckets
    (cost.dp.tail_bucket_params): Megatron-LM's `num_parameters`, the sum over the rank's model chunks
    (core_v0.19.0 training.py get_model), with its matmuls split over tp and its routed experts over ep x etp
    (Workload's shards).  Its layers: --decoder-first-pipeline-num-layers where the files state it, else the even
    split; dense layers first; the embedding, and the head and final norm without a pipeline."""
    w = workload(model)
    first = launch.first_stage_layers if layout.pp > 1 and launch.first_stage_layers is not None else \
        model.num_layers // layout.pp
    dense = min(first, w.num_dense_layers)
    moe = first - dense
    params = (dense * w.dense_layer_shard(layout.tp) + moe * (w.moe_layer_dense_shard(layout.tp)
                                                            + w.moe_layer_expert_shard(layout.ep * layout.etp))
              + w.embed_params / layout.tp)
    if layout.pp == 1:
        params += w.head_params / layout.tp + w.final_norm_params
    return int(params), (f"{first} of {model.num_layers} layers at tp {layout.tp}"
                         + (f", ep {layout.ep} x etp {layout.etp}" if moe else "") + ", with the embedding"
                         + (" and the head" if layout.pp == 1 else ""))


def _example_groups(kind: GroupKind, mapped: Topology, level: int, framework_rank: np.ndarray,
                    limit: int = EXAMPLE_GROUPS) -> tuple[int, list]:
    """(how many groups of this kind leave a level-(level-1) block, a few of them with their hosts)."""
    members = kind.links(mapped.num_gpus)
    gpus = mapped.gpu_of_rank[members] if mapped.gpu_of_rank is not None else members
    ids = mapped.block_of[level - 1][gpus]
    split = np.flatnonzero(~(ids == ids[:, :1]).all(axis=1))
    gph = mapped.gpus_per_host
    examples = []
    for g in split[:limit]:
        hosts = sorted({mapped.host_names[int(x) // gph] for x in gpus[g]})
        examples.append({"kind": kind.name, "ranks": sorted(int(framework_rank[r]) for r in members[g]), "hosts": hosts,
                         "level": mapped.levels[level].name})
    return int(split.size), examples


@dataclass(frozen=True)
class _Ctx:
    model: ModelSpec
    train: TrainingSpec
    topo: Topology
    layout: Layout
    est: Estimates
    step_s: float
    mapped_same_s: float
    """The same layout under placement's own mapping of this allocation."""
    search_est: Estimates
    search_batch: LayoutBatch
    recipe: Recipe
    """The job's recipe, as launched."""
    mapped: Topology
    """The machine with the job's own rank -> GPU map applied."""
    zero_stages: tuple[int, ...]
    """ZeRO stages the framework can run."""
    framework_rank: np.ndarray
    """The job's global rank of each placement rank (evidence quotes the job's ranks)."""
    framework: str = ""
    """The audited launch's framework."""
    dialect: str | None = None
    """The launch files' own spelling (LaunchLayout.dialect): "gpt-neox" where a GPT-NeoX config states the job, whose
    remedies must be ones its keys can state."""
    config_keys: dict[str, str] = field(default_factory=dict)
    """A GPT-NeoX config's own keys (LaunchLayout.config_keys), which date the GPT-NeoX version its remedies need."""
    own_mapped: Topology | None = None
    """The machine with placement's own map of the same layout (CP-SAT on a real allocation), where one was made."""
    offloaded: tuple[str, ...] = ()
    """ZeRO's offloads the files turn on (LaunchLayout.offloaded)."""
    megatron_deepspeed: bool = False
    """LaunchLayout.megatron_deepspeed."""
    own_est: Estimates | None = None
    """The same layout priced on `own_mapped`."""
    unread_defaults: tuple[str, ...] = ()
    """The layout fields priced at the framework's defaults because the files override a base configuration the
    audit cannot read (base_config_unread): a memory verdict on them is the defaults', not the job's."""
    task_distribution: str | None = None
    """`srun --distribution X (evidence)` where srun deals the job's ranks to its nodes other than in blocks of a
    node (task_slots): then the order of ranks on the hosts is that, not the host order alone."""

    def best_where(self, keep: np.ndarray) -> float | None:
        """Fastest fitting searched layout among `keep` (None if none)."""
        found = self.best_layout_where(keep)
        return None if found is None else found[0]

    def best_layout_where(self, keep: np.ndarray) -> tuple[float, Layout] | None:
        """best_where's step and its layout."""
        ok = keep & self.search_est.fits & self.search_est.valid  # as the search ranks them
        if not ok.any():
            return None
        i = int(np.flatnonzero(ok)[np.argmin(self.search_est.step_time_s[ok])])
        return float(self.search_est.step_time_s[i]), self.search_batch.layout(i)

    def best_as_launched(self, keep: np.ndarray) -> float | None:
        """Fastest fitting searched layout among `keep`, priced with the job's own recompute (mode and modules), ZeRO
        stage (where the search has it) and recipe (dispatcher, CUDA graphs, overlaps pinned), on the job's own hosts
        in its order: what a remedy that changes only the layout reaches, so that what other findings remedy
        (recompute, sharding, overlaps, the host order) is not counted twice (a user trial: a bubble finding's saving
        held the host-order finding's too, priced on placement's map).  None if none fits."""
        found = self.best_layout_as_launched(keep)
        return None if found is None else found[0]

    def best_layout_as_launched(self, keep: np.ndarray) -> tuple[float, Layout] | None:
        """best_as_launched's step and its layout."""
        b = self.search_batch
        own = _batch([self.layout], self.recipe)
        same_zero = keep & (b.zero == own.zero[0])
        # every searched layout of `keep`, at the job's recompute (the search may not try the job's own: full)
        rows = np.flatnonzero(same_zero if same_zero.any() else keep)
        if rows.size == 0:
            return None
        alt = dataclasses.replace(b.take(rows), recompute=np.full(rows.size, own.recompute[0]),
                                  rc_modules=np.full(rows.size, own.rc_modules[0]))
        e = estimate(workload(self.model), self.train, self.mapped, alt, self.recipe)
        ok = e.valid & e.fits
        if not ok.any():
            return None
        i = int(np.flatnonzero(ok)[np.argmin(e.step_time_s[ok])])
        return float(e.step_time_s[i]), alt.layout(i)

    def price_as_launched(self, layouts: list[Layout]) -> Estimates:
        """Variants of the job's layout on the job's own rank -> GPU map."""
        return _price(self.model, self.train, self.mapped, layouts, self.recipe)

    def saving(self, alt_s: float | None) -> float:
        return 0.0 if alt_s is None else max(self.step_s - alt_s, 0.0)

    def same_layout_estimate(self) -> Estimates:
        """The job's layout priced on placement's own map of this allocation (`own_est`, else the hierarchy order's,
        whose step is `mapped_same_s`)."""
        if self.own_est is not None:
            return self.own_est
        return _price(self.model, self.train, self.own_mapped or self.topo, [self.layout], self.recipe)


ORDER_KINDS = ("dp", "dp_replica", "edp", "pp")
"""Groups that span the job whatever its order (data, expert-data and pipeline): where they cross a slow tier
depends on which host runs which node rank, so their finding compares the job's order with placement's."""


def _blocks_spanned(mapped: Topology, kind: GroupKind, level: int) -> int:
    """The blocks of `level` that `kind`'s groups span, summed over the groups: the more blocks a group's members
    spread over, the more of its collective's bytes cross that level's uplinks."""
    gpus_of = mapped.gpu_of_rank if mapped.gpu_of_rank is not None else np.arange(mapped.num_gpus)
    ids = np.sort(mapped.block_of[level][gpus_of[kind.links(mapped.num_gpus)]], axis=1)
    return int((np.diff(ids, axis=1) != 0).sum() + ids.shape[0])


def _host_order_finding(c: _Ctx, kinds: list[GroupKind]) -> list[Finding]:
    """The data, expert-data and pipeline groups the job's host order sends across a higher (slower, oversubscribed)
    tier than placement's own map of the same layout does, priced as what that map saves (a user trial: 16 hosts
    interleaved over two leaves under an 8:1 spine cost 11 % of the step, 2.513 s against 2.240 s, and no finding
    said which groups crossed)."""
    if c.own_mapped is None:
        return []
    cost = c.saving(c.mapped_same_s)
    if cost < 5e-4:
        return []
    names = [lv.name for lv in c.mapped.levels]
    launched, own = crossings(c.mapped, kinds), crossings(c.own_mapped, kinds)
    worse = []
    for kind in kinds:
        if kind.name not in ORDER_KINDS or kind.size < 2:
            continue
        for j in range(len(names) - 1, 0, -1):  # the highest tier where the two orders differ
            a, b = launched[kind.name]["highest_level"][names[j]], own[kind.name]["highest_level"][names[j]]
            if a != b:
                if a > b:
                    worse.append((kind, j, a, b))
                break
    if worse:
        top = max(j for _, j, _, _ in worse)
        # a pipeline's links are its neighbour pairs (group_size 2), not its stages (a user trial: "4096 pp groups of
        # 16 ranks" on 4,096 GPUs)
        parts = [f"{a} of {launched[k.name]['groups']} {k.name} "
                 f"{'neighbour pairs' if launched[k.name]['group_size'] != k.size else 'groups'} of "
                 f"{launched[k.name]['group_size']} ranks reach the {names[j]} (placement's order: {b}; "
                 f"{_bytes(k.bytes_per_step)} per member per step)" for k, j, a, b in worse]
        what = "groups"
    else:
        # as many groups reach each tier either way; the cost is in how many blocks below it each group spreads
        # over (a user trial: 0.071 s a step, priced, with no finding)
        worse = [(k, j, a, b) for k in kinds if k.name in ORDER_KINDS and k.size > 1
                 for j in range(1, len(names))
                 for a, b in [(_blocks_spanned(c.mapped, k, j), _blocks_spanned(c.own_mapped, k, j))] if a > b]
        if not worse:
            return []
        top = max(j for _, j, _, _ in worse)
        parts = [f"its {launched[k.name]['groups']} {k.name} groups span {a} {names[j]} blocks in all (placement's "
                 f"order: {b}; {_bytes(k.bytes_per_step)} per member per step)" for k, j, a, b in worse]
        what = "blocks"
    lv = c.mapped.levels[top]
    kind, j = next((k, j) for k, j, _, _ in worse if j == top)
    _, examples = _example_groups(kind, c.mapped, j, c.framework_rank)
    # a level's ratio is the product of the uplinks below it: a non-blocking core above 2:1 leaves says 2:1 (a user
    # trial read "core (oversubscribed 2:1)" as the core's own ratio)
    over = (f" (reached over uplinks oversubscribed {lv.oversubscription:g}:1 in all)" if lv.oversubscription > 1
            else "")
    mine = c.own_mapped
    # the GPU of each of the job's own ranks under placement's map (framework_rank numbers them as the job does)
    job_gpu = np.empty(mine.num_gpus, dtype=np.int64)
    job_gpu[c.framework_rank] = mine.gpu_of_rank if mine.gpu_of_rank is not None else np.arange(mine.num_gpus)
    compact = compact_mapping(mine, job_gpu)  # None where a node block of the job's spans two hosts
    order = None
    if compact is not None:
        order = list(compact["host_order"])
        how = (f"node ranks 0, 1, ... on {' '.join(order[:8])}{' ...' if len(order) > 8 else ''} (the whole order: "
               f"this finding's host_order in --json, and job-hosts.txt under --out)")
    else:
        how = "that map (its node blocks are not the job's, so no host order alone gives it)"
    head = (f"sends more groups across the {lv.name}{over}" if what == "groups" else
            f"spreads its groups over more {lv.name} blocks (their collectives crossing more {lv.name} uplinks)")
    who = "the job's host order"
    if c.task_distribution is not None:  # the ranks' order on the hosts is srun's dealing, not a host order
        who = f"the job's rank order ({c.task_distribution}: ranks dealt round robin over the nodes)"
        how = (f"mpirun's --map-by ppr:N:node, N the GPUs of a node (consecutive ranks on one node), with {how}"
               if c.task_distribution.startswith("mpirun") else
               f"srun's default block distribution (consecutive ranks on one node) with {how}")
    msg = (f"{who} {head} than placement's order of the same "
           f"hosts for this layout: {'; '.join(parts)}; {how} save {cost:.3f} s per step ({c.step_s:.3f} -> "
           f"{c.mapped_same_s:.3f} s){_where_saved(c)}")
    return [Finding(_severity(cost, c.step_s), "host_order_crossings", msg, examples, cost, order)]


STEP_TERMS = (("tp", "tp_s"), ("cp", "cp_s"), ("ep", "ep_s"), ("pp", "pp_s"), ("dp", "dp_exposed_s"),
              ("pipeline bubble", "bubble_s"), ("overlap slowdown", "overlap_slowdown_s"))
"""The communication terms that add to a step (Estimates), as the step table names them."""


def _where_saved(c: _Ctx) -> str:
    """Which of the step's exposed terms the other order changes, launched -> placement's: the saving is there, not
    in the group counts alone (a user trial: an order with as many groups across each tier kept the step, because
    the saving was in how the core-crossing groups split over the leaves)."""
    if c.own_est is None:
        return ""
    moved = [(name, float(getattr(c.est, attr)[0]), float(getattr(c.own_est, attr)[0])) for name, attr in STEP_TERMS]
    moved = [(n, a, b) for n, a, b in moved if abs(a - b) >= 5e-4]
    if not moved:
        return ""
    return "; the time is in " + ", ".join(f"{n} {a:.3f} -> {b:.3f} s" for n, a, b in moved) + (
        " exposed (how each group's members split over the blocks below the tier it reaches decides its "
        "hierarchical collective's cost, not only that tier)")


def _crossing_findings(c: _Ctx, kinds: list[GroupKind]) -> list[Finding]:
    out = []
    order = _host_order_finding(c, kinds)
    mapped = c.mapped
    levels = mapped.levels
    for kind in kinds:
        if kind.name not in ("tp", "cp", "ep"):
            continue
        # (count, examples) of this kind's groups crossing into each level, highest first
        crossing = {j: _example_groups(kind, mapped, j, c.framework_rank) for j in range(len(levels) - 1, 0, -1)}
        reached = [j for j, (count, _) in crossing.items() if count]
        if not reached:
            out += _in_node_finding(c, kind)
            continue
        # the highest level some group crosses into that is slower than the block it leaves: a crossing into a level
        # as fast as the one inside costs nothing to remedy (a QA run: "cp_crosses_spine ... at 12 GB/s per GPU
        # instead of 12 GB/s inside it", where the CP pairs' slow step was the 2:1 leaf uplink below)
        slower = [j for j in reached if _slower(levels[j], levels[j - 1])]
        if not slower:
            continue
        j = slower[0]
        count, examples = crossing[j]
        inner = levels[j - 1]
        capacity = int(np.bincount(mapped.block_of[j - 1]).max())  # GPUs in the largest level-(j-1) block
        over = levels[j].oversubscription > 1.0
        alltoall = kind.name == "ep" and over
        # remedy: placement's mapping of the same layout when the group fits in a level-(j-1) block with the groups
        # nested inside it (`_span`), else the best searched layout whose groups of this kind do fit there so
        held = np.bincount(mapped.block_of[j - 1])
        held = held[held > 0]  # the job's GPUs in each level-(j-1) block
        span = _span(kind)
        forced = span <= capacity and bool((held % span).any())
        if forced:
            # no host order keeps every group inside: some block holds a count of the job's GPUs its groups do not
            # tile (a user trial: partial NVL72 racks of 15 and 17 trays priced the crossing at 0.000 s, "keeping the
            # groups inside costs more elsewhere"); the remedy is a smaller group that tiles every block
            tiles = max(d for d in range(1, span + 1) if span % d == 0 and not (held % d).any())
            alt, how = _best_within(c, kind.name, tiles)
        elif span <= capacity:
            alt, how = c.mapped_same_s, "placement's mapping of the same layout"
        else:
            alt, how = _best_within(c, kind.name, capacity)
        cost = c.saving(alt)
        remedy = _remedy_words(how, alt, c.step_s)
        total_s, exposed_s = _kind_seconds(c.est, kind.name)
        if span > capacity >= kind.size and cost - exposed_s >= MIN_SAVING_S:
            # the group itself fits the block, its span with the groups inside it does not: the layout that keeps it
            # inside changes those groups too, so the crossing is priced as a remap's would be (`_own_share`), at most
            # the kind's own exposed time, the rest said (a QA run: CP pairs of tp 8 x cp 2, 0.000 s exposed, would
            # be credited with the 1.446 s a tp 4, pp 16 layout saves, while the best plan keeps tp 8 x cp 2)
            remedy += (f" in all, of which this crossing accounts for at most {kind.name.upper()}'s exposed "
                       f"{exposed_s:.3f} s; the rest is that layout's other changes")
            cost = exposed_s
        if how == "placement's mapping of the same layout":
            # that map moves every group, not this kind's alone: the saving is the kind's own exposed time it removes,
            # the rest is the other groups' (a QA run: CP pairs fully overlapped were credited with what the map
            # saved on data-parallel and pipeline traffic)
            cost, remedy = _own_share(c, kind.name, alt, bool(order))
        what = (f"{kind.name.upper()} all-to-all over the {levels[j].name} tier, oversubscribed "
                f"{levels[j].oversubscription:g}:1" if alltoall else f"{kind.name.upper()} group crosses the "
                f"{inner.name} boundary into {levels[j].name}")
        # blocks of a real allocation differ in size: the largest one's GPUs, said so (a user trial read "a leaf block
        # of 208 GPUs" where the example's leaf held 200 of the job's)
        inside, _ = SPAN_AXES[kind.name] if kind.name != "tp" else ("", "")
        nested = (f"; a {kind.name} group with the {inside} groups inside it spans {inside} {kind.stride} x "
                  f"{kind.name} {kind.size} = {span} ranks, more than that, so no map of this layout keeps it inside "
                  f"with its {inside} groups whole" if span > capacity and span > kind.size else "")
        msg = (f"{what}: {count} of {_num_groups(kind, mapped)} {kind.name} groups of {kind.size} ranks leave their "
               f"{inner.name} block (the job's largest holds {capacity} GPUs{nested}); its collectives move "
               f"{_bytes(kind.bytes_per_step)} per member per step, {total_s:.3f} s of communication here "
               f"({exposed_s:.3f} s exposed), the share that leaves the block at "
               f"{levels[j].bandwidth_bytes_per_s / 1e9:.0f} GB/s per GPU instead of "
               f"{inner.bandwidth_bytes_per_s / 1e9:.0f} GB/s inside it; "
               + (_forced_words(kind, span, inner.name, held) if forced else "") + remedy)
        kind_name = (f"{kind.name}_alltoall_oversubscribed" if alltoall
                     else f"{kind.name}_crosses_{'node' if j == 1 else inner.name}")
        out.append(Finding(_severity(cost, c.step_s), kind_name, msg, examples, cost))
    return out + order


def _slower(level: Level, inner: Level) -> bool:
    """Traffic that leaves an `inner` block for `level` runs slower than inside it: a lower rate per GPU, or uplinks
    oversubscribed at this tier (a level's ratio is the product of the tiers' below it, so a non-blocking core over
    2:1 leaves carries the leaves' 2:1 and the spine's rate: no slower than the spine)."""
    return (level.bandwidth_bytes_per_s < inner.bandwidth_bytes_per_s
            or level.oversubscription > inner.oversubscription)


def _own_share(c: _Ctx, kind: str, mapped_s: float, order_found: bool) -> tuple[float, str]:
    """(saving, words) of a crossing whose remedy is placement's map of the same layout: the exposed seconds of this
    kind's collectives that the map removes, and the map's whole saving beside it, where the rest of it is the other
    groups' (the host_order_crossings finding, where `order_found`, prices the order itself)."""
    before = _kind_seconds(c.est, kind)[1]
    after = _kind_seconds(c.same_layout_estimate(), kind)[1]
    whole = c.saving(mapped_s)
    own = min(max(before - after, 0.0), whole)  # no more than the step gains
    said = (f"placement's mapping of the same layout: {kind.upper()}'s exposed time {before:.3f} -> {after:.3f} s, "
            + (f"{own:.3f} s per step saved" if own >= MIN_SAVING_S else "nothing saved"))
    if whole - own >= MIN_SAVING_S:
        said += (f" (that map saves {whole:.3f} s per step in all, the rest in other groups' traffic"
                 + ("; see host_order_crossings)" if order_found else ")"))
    elif before - after - own >= MIN_SAVING_S:
        said += f" (the map's whole saving: it costs {before - after - own:.3f} s more in other groups' traffic)"
    return own, said


SPAN_AXES = {"tp": ("tp",), "cp": ("tp", "cp"), "ep": ("etp", "ep")}
"""The degrees whose product is the ranks a group of each crossing kind spans with the groups nested inside it (CP
groups at stride tp, EP groups at stride etp: mapping.groups.group_kinds)."""


def _span(kind: GroupKind) -> int:
    """The ranks a group of `kind` spans with the groups nested inside it (its stride x size): a block keeps both
    inside only if it holds that many.  A QA run: a tp 8, cp 2 job's CP pairs (ranks r and r + 8) crossing 8-GPU
    nodes got "placement's mapping of the same layout" as the remedy, since 2 <= 8, though no map keeps a pair in a
    node with its two TP groups whole; the span is 16."""
    return kind.stride * kind.size


def _best_within(c: _Ctx, kind: str, limit: int) -> tuple[float | None, str]:
    """(step, words) of a crossing's remedy: the best searched layout whose groups of `kind` (tp, cp, ep) span at most
    `limit` ranks with the groups nested inside them (SPAN_AXES: tp x cp for cp), priced with the job's own recompute
    and recipe, so that what other findings remedy (recompute, overlaps) is not counted here too (else with the
    searched ones), named (a user trial: "the best layout with ep <= 8 saves 2.730 s", which?)."""
    keep = np.prod([getattr(c.search_batch, a) for a in SPAN_AXES[kind]], axis=0) <= limit
    found = c.best_layout_as_launched(keep)
    kept = "the job's recompute and recipe kept"
    if found is None:
        found = c.best_layout_where(keep)
        kept = "with the searched recompute and recipe"
    named = "" if found is None else f"{_layout_words(found[1])}, "
    return (None if found is None else found[0]), (f"the best layout with {' x '.join(SPAN_AXES[kind])} <= {limit} "
                                                   f"({named}{kept})")


def _in_node_finding(c: _Ctx, kind: GroupKind) -> list[Finding]:
    """A group kind that stays inside its nodes but rings over PCIe or across the CPU sockets where the node's links
    are measured (--node-topo) and some of its GPUs share NVLink: `{kind}_over_pcie`, with the best layout whose groups
    fit an NVLink island as the remedy.  A user trial: TP 8 on nodes of NVLink-bridged pairs, 66 % of the step over
    PCIe, had no finding while the crossings said it stayed inside an "nvlink bridge" block."""
    node = c.mapped.node_layout
    if node is None:
        return []
    members = kind.links(c.mapped.num_gpus)
    gpus = c.mapped.gpu_of_rank[members] if c.mapped.gpu_of_rank is not None else members
    ring = in_node_ring(c.mapped, gpus)
    islands = [k for k, bw in node.best_bandwidth.items() if 1 < k and is_nvlink(bw)]
    if ring is None or is_nvlink(ring["bandwidth_bytes_per_s"]) or not islands:
        return []
    island = max(islands)
    alt, how = _best_within(c, kind.name, island)
    total_s, exposed_s = _kind_seconds(c.est, kind.name)
    cost = c.saving(alt)
    msg = (f"{kind.name.upper()} groups of {kind.size} ranks stay inside their nodes but ring over {ring['link']}: "
           f"the best ring of {ring['gpus']} GPUs on these nodes' links ({c.mapped.node_topo_source}) runs at "
           f"{ring['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s per GPU, where {island} GPUs share NVLink at "
           f"{node.best_bandwidth[island] / 1e9:.0f} GB/s; its collectives move {_bytes(kind.bytes_per_step)} per "
           f"member per step, {total_s:.3f} s of communication here ({exposed_s:.3f} s exposed); "
           + _remedy_words(how, alt, c.step_s))
    return [Finding(_severity(cost, c.step_s), f"{kind.name}_over_pcie", msg, [], cost)]


def _forced_words(kind: GroupKind, span: int, block: str, held: np.ndarray) -> str:
    """Why no host order keeps a kind's groups inside their blocks: the allocation's blocks hold counts of the job's
    GPUs that its groups' spans (`_span`) do not tile."""
    odd = sorted({int(n) for n in held if n % span})
    groups = (f"{kind.name} groups of {kind.size}" if span == kind.size else
              f"{kind.name} groups of {kind.size} (spanning {span} ranks with their {SPAN_AXES[kind.name][0]} groups)")
    return (f"the allocation forces it: {sum(int(n) % span != 0 for n in held)} of its {len(held)} {block} "
            f"blocks hold {', '.join(map(str, odd))} of the job's GPUs, which {groups} do "
            f"not tile, so no host order keeps every group inside (an allocation of blocks that hold a multiple of "
            f"{span} of the job's GPUs each would: whole blocks, or SLURM --segment where the blocks are NVL72 "
            f"racks); ")


def _remedy_words(how: str, alt_s: float | None, step_s: float) -> str:
    """What a crossing's remedy does to the step: the seconds it saves, or that it saves none, with its own price (a
    user trial read "the best layout with ep <= 8 ... saves 0.000 s per step" beside the step's largest exposed
    term, where that layout was slower)."""
    if alt_s is None:
        return f"{how}: none that fits was found, so nothing is saved"
    if alt_s >= step_s - MIN_SAVING_S:
        return (f"{how} is no faster ({alt_s:.3f} s per step against the job's {step_s:.3f} s): keeping the groups "
                f"inside costs more elsewhere than the crossing does")
    return f"{how} saves {step_s - alt_s:.3f} s per step"


def _layout_words(lay: Layout) -> str:
    """`tp 4, cp 1, ep 8/etp 1, pp 2 (vpp 4), dp 16, ZeRO-1, micro-batch 1`: a layout a finding prices, in words."""
    return (f"tp {lay.tp}, cp {lay.cp}, ep {lay.ep}/etp {lay.etp}, pp {lay.pp}" + (f" (vpp {lay.vpp})" if lay.vpp > 1
                                                                                 else "")
            + f", dp {lay.dp}, ZeRO-{lay.zero_stage}, micro-batch {lay.micro_batch_size}")


def _job_compact(topo: Topology, job_gpu: np.ndarray, launch: LaunchLayout) -> dict | None:
    """Plan.mapping_compact of an audited job: node rank k of the job's own numbering on host_order[k], its ranks in
    the framework's order (Megatron's tp-cp-ep-dp-pp, tp-cp-ep-pp-dp under --use-tp-pp-dp-mapping; MaxText's mesh)."""
    compact = compact_mapping(topo, job_gpu)
    if compact is not None:
        compact["rank_order"] = ("maxtext mesh" if launch.framework == "maxtext" and launch.mesh is not None
                                 else launch.rank_order)
    return compact


def _kind_seconds(est: Estimates, kind: str) -> tuple[float, float]:
    """(total, exposed) seconds per step of one kind of group's communication in a one-candidate estimate."""
    total, exposed = {"tp": (est.tp_total_s, est.tp_s), "cp": (est.cp_total_s, est.cp_s),
                      "ep": (est.ep_total_s, est.ep_s)}[kind]
    return float(total[0]), float(exposed[0])


def _bytes(n: float) -> str:
    return f"{n / 1e12:.2f} TB" if n >= 1e12 else f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def _num_groups(kind: GroupKind, topo: Topology) -> int:
    return int(kind.links(topo.num_gpus).shape[0])


FUSED_ATTENTION = {
    "megatron": (AttentionKernel.FLASH, "--attention-backend fused (or auto, Megatron's default: Transformer "
                                        "Engine's cuDNN attention)"),
    "deepspeed": (AttentionKernel.FLASH2, "in the model code (GPT-NeoX 8903a969 (2023-09-20) or later: "
                                          "attention_config [[[\"flash\"], NUM_LAYERS]], the flash-attn 2 package; or "
                                          "PyTorch SDPA)"),
    "": (AttentionKernel.FLASH, "in the model code"),
}
"""Framework -> (the fused attention kernel its files can turn on, how), for the `unfused_attention` finding; a
GPT-NeoX config's, dated by its own keys, is readers.neox.flash_remedy."""


MEGATRON_DEEPSPEED_FLASH = (
    "a fused kernel, which Megatron-DeepSpeed has only in Microsoft's fork (--use-flash-attn-v2, the flash-attn 2 "
    "package; BigScience's fork, which BLOOM ran, has no flash path, and Megatron-LM's --attention-backend flash is "
    "not a Megatron-DeepSpeed argument; a model with ALiBi needs a kernel that takes ALiBi slopes),")
"""The `unfused_attention` remedy for a Megatron-DeepSpeed job (Megatron's arguments under DeepSpeed's engine)."""


MIN_SAVING_S = 0.0005
"""Seconds per step below which a remedy is no finding (they print to the millisecond)."""


def _saving_with(c: _Ctx, lay: Layout, **recipe) -> float:
    """Seconds per step the audited layout saves with these recipe fields changed (a recipe finding's remedy)."""
    e = _price(c.model, c.train, c.mapped, [lay], c.recipe.model_copy(update=recipe))
    return c.saving(float(e.step_time_s[0]))


COST_NOT_SAVING = frozenset({"dp_tail_bucket"})
"""Findings whose cost is what a feature of the job costs, not what a remedy they name saves."""


def _tail_bucket_finding(c: _Ctx, lay: Layout, where: dict[str, str]) -> Finding | None:
    """Where Megatron-Core's gradient buckets are large against the first rank's gradient, the bucket holding layer
    0 reduces, and gathers before the next forward, beside no compute (cost.dp.tail_bucket_params): a finding at what
    that costs against buckets of one parameter each, where it is at least WARNING_SHARE of the step.  It claims no
    saving: smaller buckets are latency-bound at a large dp (Megatron-Core's reason for its default), which the
    collective model does not price per bucket.  Only without interleaving, where that rank's reduction is
    bucketed."""
    from placement.cost.dp import default_bucket_params
    from placement.specs.recipe import GradBuckets

    r = c.recipe
    if not (r.dp_overlap and lay.zero_stage <= 1 and lay.dp > 1 and lay.vpp == 1
            and r.grad_buckets is GradBuckets.BY_SIZE):
        return None
    cost = _saving_with(c, lay, ddp_bucket_params=1)
    if _severity(cost, c.step_s) == "info":
        return None
    source = where.get("ddp_bucket_params", "default")
    if r.ddp_bucket_params is None:
        size = int(default_bucket_params(lay.dp, lay.cp))
        how = (f"Megatron-Core's default, max(40M, 1M x dp {lay.dp} x cp {lay.cp}) = {size:,} parameters "
               f"({'no --ddp-bucket-size in the files' if source.startswith('default') else source})")
    else:
        how = f"{r.ddp_bucket_params:,} parameters ({source})"
    return Finding(
        _severity(cost, c.step_s), "dp_tail_bucket",
        f"the gradient buckets hold {how}, filled from the output end, so the one holding layer 0 closes only when "
        f"the last backward ends: its reduction, and its gather before the next forward, run beside no compute, "
        f"{cost:.3f} s per step more than buckets of one parameter each would leave there (layer 0's QKV projection "
        f"and the embedding). Smaller buckets (--ddp-bucket-size; Megatron-Bridge ddp.bucket_size) leave less "
        f"there, but below 1M parameters per data-parallel rank Megatron-Core expects the ring to turn "
        f"latency-bound (distributed_data_parallel.py), which placement does not price per bucket; fewer "
        f"data-parallel ranks (more tp or pp) shrink the bucket", [], cost)


def _saving_finding(c: _Ctx, lay: Layout, kind: str, says: str, **recipe) -> Finding:
    """A recipe finding whose remedy is these recipe fields changed: `says` (what runs and the flag that changes it),
    then what the change saves, priced."""
    cost = _saving_with(c, lay, **recipe)
    return Finding(_severity(cost, c.step_s), kind, f"{says} and saves {cost:.3f} s per step", [], cost)


NEOX_CHECKPOINTING = ("GPT-NeoX's checkpoint_activations recomputes every layer whole, in chunks of "
                      "checkpoint_num_layers (its PipelineModule's activation_checkpoint_interval), and "
                      "partition_activations and checkpoint_in_cpu only move the inputs it keeps: no key of any "
                      "GPT-NeoX version recomputes the attention core alone")
"""What GPT-NeoX's recompute keys can state (megatron/neox_arguments/neox_args.py; megatron/model/gpt2_model.py)."""


def _neox_recompute_headroom(c: _Ctx, peak: float, cap: float,
                             priced: dict[str, tuple[float, bool, float]]) -> list[Finding]:
    """memory_headroom_recompute for a GPT-NeoX config, whose only lighter recompute is none (checkpoint_activations:
    false): that remedy where it fits; else, where selective recompute would fit and save time, an info finding that
    says GPT-NeoX cannot state it (no saving counted: no key of the job's config reaches it)."""
    head = (f"peak memory {peak / GiB:.1f} of {cap / GiB:.1f} GiB ({peak / cap:.0%}) with checkpoint_activations: true "
            f"(recompute full)")
    none_s, none_fits, none_peak = priced["none"]
    if none_fits:
        cost = c.saving(none_s)
        return [Finding(_severity(cost, c.step_s), "memory_headroom_recompute",
                        f"{head}: checkpoint_activations: false (recompute none) fits ({none_peak / GiB:.1f} GiB) and "
                        f"saves {cost:.3f} s per step", [], cost)]
    if "selective" not in priced:
        return []
    sel_s, sel_fits, sel_peak = priced["selective"]
    if not sel_fits or c.saving(sel_s) < MIN_SAVING_S:
        return []
    return [Finding("info", "memory_headroom_recompute",
                    f"{head}: checkpoint_activations: false does not fit ({none_peak / GiB:.1f} GiB); recomputing "
                    f"only the attention core (selective recompute) would fit ({sel_peak / GiB:.1f} GiB) and save "
                    f"{c.saving(sel_s):.3f} s per step, but GPT-NeoX cannot express it: {NEOX_CHECKPOINTING}; no "
                    f"saving is counted", [], 0.0)]


def _offloaded_bytes(offloaded: tuple[str, ...], plan: Plan, layout: Layout) -> float:
    """GPU bytes per GPU the files' ZeRO offloads keep in host memory instead: the optimizer state (fp32 master
    weights and Adam moments, ZeRO-Offload's `offload_optimizer`) and, at ZeRO-3, the weight shards
    (`offload_param`, which DeepSpeed takes with stage 3 only); the weights a layer gathers stay on the GPU."""
    moved = plan.memory.optimizer_bytes if "offload_optimizer" in offloaded else 0.0
    if "offload_param" in offloaded and layout.zero_stage == 3:
        moved += plan.memory.weights_bytes
    return float(moved)


def _layout_findings(c: _Ctx, plan: Plan) -> list[Finding]:
    out = []
    lay, b, est = c.layout, c.search_batch, c.est
    cap = float(est.memory_capacity_bytes)
    peak = float(plan.peak_memory_bytes)  # the plan as run (DeepSpeed's ZeRO over 'data' alone under cp: its memory)
    same_shape = (b.tp == lay.tp) & (b.cp == lay.cp) & (b.ep == lay.ep) & (b.etp == lay.etp)
    if not plan.fits:
        best_fit = c.best_where(np.ones(len(b), dtype=bool))
        parts = (f"(weights {plan.memory.weights_bytes / GiB:.1f}, grads {plan.memory.grads_bytes / GiB:.1f}, "
                 f"optimizer {plan.memory.optimizer_bytes / GiB:.1f}, activations "
                 f"{plan.memory.activations_bytes / GiB:.1f} GiB)")
        headroom = c.train.memory_headroom_bytes
        pool = c.train.memory_pool_bytes
        gpu_cap = usable_hbm_bytes(c.topo) - headroom
        if pool is not None and cap < gpu_cap:  # JAX's pool binds before the GPU does (an audited MaxText job)
            fraction = _fraction_holding(peak, c.topo.accelerator.hbm_bytes)
            fix = (f"{JAX_FRACTION_FIX.format(fraction)} holds it, {peak / GiB:.1f} of the {gpu_cap / GiB:.1f} GiB "
                   f"the GPU holds for the job" if peak <= gpu_cap
                   else f"a larger fraction does not help: the GPU holds {gpu_cap / GiB:.1f} GiB for the job")
            out.append(Finding(
                "error", "memory_over_capacity",
                f"needs {peak / GiB:.1f} GiB per GPU {parts}: JAX's pool holds {pool / GiB:.1f} GiB "
                f"({c.train.memory_pool_note}) beside the {MEMORY_RESERVE_BYTES / GiB:.0f} GiB reserve outside it, "
                f"so the job runs out of memory; {fix}"
                + (f"; the best plan that fits takes {best_fit:.3f} s per step" if best_fit is not None else ""),
                [], None))
            return out
        kept = f" (after the {headroom / GiB:.1f} GiB --memory-headroom-gib keeps free)" if headroom else ""
        moved = _offloaded_bytes(c.offloaded, plan, lay)
        if moved and peak - moved <= cap + headroom:
            # a user trial: a ZeRO-Offload job was an error, "cannot run", beside the warning that its offload makes
            # its GPU memory smaller than printed
            return [Finding(
                "warning", "not_priced_as_run",
                f"needs {peak / GiB:.1f} GiB per GPU as priced {parts}, with the state the files offload "
                f"({' and '.join(c.offloaded)}) on the GPU; in host memory, as the job runs it, that is "
                f"{moved / GiB:.1f} GiB less, {(peak - moved) / GiB:.1f} of {cap / GiB:.1f} GiB{kept}: the job fits, "
                f"and the estimate's step prices neither the offload's PCIe copies nor the optimizer step on the CPU",
                [], 0.0)]
        if peak <= cap + headroom:  # it runs, in the margin the user asked to keep free
            severity = "warning"
            what = (f"needs {peak / GiB:.1f} GiB per GPU {parts}, capacity {cap / GiB:.1f} GiB{kept}: it runs, in "
                    f"{(peak - cap) / GiB:.1f} GiB of the margin (the GPU holds {(cap + headroom) / GiB:.1f} GiB for "
                    f"the job)")
        elif c.unread_defaults:
            # a user trial: "cannot run" beside the warning that ZeRO-0 and the rest were defaults, not the recipe's
            severity = "warning"
            what = (f"needs {peak / GiB:.1f} GiB per GPU {parts}, capacity {cap / GiB:.1f} GiB{kept}, as priced "
                    f"with {', '.join(c.unread_defaults)} at the framework's defaults (base_config_unread): the "
                    f"recipe the files override may set them otherwise, so whether the job fits is the recipe's to "
                    f"say")
        else:
            severity = "error"
            what = (f"needs {peak / GiB:.1f} GiB per GPU, capacity {cap / GiB:.1f} GiB{kept}: the job runs out of "
                    f"memory {parts}")
            if moved:
                what += (f", and {(peak - moved) / GiB:.1f} GiB with the {moved / GiB:.1f} GiB the files offload "
                         f"({' and '.join(c.offloaded)}) in host memory")
        out.append(Finding(
            severity, "memory_over_capacity",
            what + (f"; the best plan that fits takes {best_fit:.3f} s per step" if best_fit is not None else ""),
            [], None))
        return out
    # memory so far under capacity that recompute could go
    if lay.recompute != Recompute.NONE and peak < IDLE_MEMORY_SHARE * cap:
        lighter = [r for r in (Recompute.NONE, Recompute.SELECTIVE) if r != lay.recompute
                   and (lay.recompute == Recompute.FULL or r == Recompute.NONE)]
        alts = [lay.model_copy(update={"recompute": r}) for r in lighter]
        e = c.price_as_launched(alts)
        ok = [(float(e.step_time_s[k]), alts[k].recompute.value, float(e.peak_memory_bytes[k]))
              for k in range(len(alts)) if e.fits[k]]
        if c.dialect == "gpt-neox":
            out += _neox_recompute_headroom(c, peak, cap, {alts[k].recompute.value: (
                float(e.step_time_s[k]), bool(e.fits[k]), float(e.peak_memory_bytes[k])) for k in range(len(alts))})
        elif ok:
            alt_s, mode, alt_peak = min(ok)
            cost = c.saving(alt_s)
            out.append(Finding(
                _severity(cost, c.step_s), "memory_headroom_recompute",
                f"peak memory {peak / GiB:.1f} of {cap / GiB:.1f} GiB ({peak / cap:.0%}) with recompute "
                f"{lay.recompute.value}: recompute {mode} fits ({alt_peak / GiB:.1f} GiB) and saves {cost:.3f} s "
                f"per step", [], cost))
    # pipeline bubble above 10 %
    bubble = float(est.bubble_s[0])
    if lay.pp > 1 and bubble > BUBBLE_SHARE * c.step_s:
        alt = c.best_as_launched(same_shape)  # the pipeline change alone: recompute, recipe and hosts kept
        cost = c.saving(alt)
        m = int(est.num_microbatches[0])
        head = (f"pipeline bubble {bubble:.3f} s = {bubble / c.step_s:.0%} of the step (pp {lay.pp}, vpp {lay.vpp}, "
                f"{m} micro-batches per step)")
        if not same_shape.any():  # nothing to compare: not a saving of zero (a user trial read "save 0.000 s")
            out.append(Finding(
                "info", "pipeline_bubble",
                f"{head}; the search held no layout of the same tp {lay.tp}, cp {lay.cp} and ep {lay.ep} to compare "
                f"(its best plans are of other degrees): price another pp, vpp or micro-batch of these degrees with "
                f"`placement evaluate`", [], 0.0))
        else:
            out.append(Finding(
                _severity(cost, c.step_s), "pipeline_bubble",
                f"{head}; the best pp / virtual stages / micro-batch for the same tp, cp and ep, the job's recompute, "
                f"recipe and host order kept, save {cost:.3f} s per step"
                + (" (more than the bubble: the other pp and micro-batch also change the per-stage compute, "
                   "transfers and memory)" if cost > bubble else ""), [], cost))
    # micro-batches too small for efficient GEMMs: the same layout with a larger micro-batch
    bigger = [k for k in (2, 4, 8, 16) if c.train.global_batch % (lay.dp * lay.micro_batch_size * k) == 0]
    alts = []
    for k in bigger:
        cand = lay.model_copy(update={"micro_batch_size": lay.micro_batch_size * k})
        m = c.train.global_batch // (cand.dp * cand.micro_batch_size)
        if lay.vpp > 1 and m % lay.pp:
            continue
        alts.append(cand)
    if alts:
        e = c.price_as_launched(alts)
        ok = [(float(e.step_time_s[k]), alts[k].micro_batch_size, float(e.compute_s[k]), k)
              for k in range(len(alts)) if e.fits[k]]
        if ok:
            alt_s, mbs, alt_compute, k_alt = min(ok)
            gemm_gain = float(est.compute_s[0]) - alt_compute
            terms = {"TP communication": "tp_s", "CP communication": "cp_s", "EP all-to-all": "ep_s",
                     "pipeline transfers": "pp_s", "exposed DP/ZeRO traffic": "dp_exposed_s",
                     "pipeline bubble": "bubble_s", "host launches": "host_s",
                     "overlap slowdown": "overlap_slowdown_s"}
            moved = sorted(((float(getattr(est, a)[0]) - float(getattr(e, a)[k_alt]), name)
                            for name, a in terms.items() if getattr(est, a) is not None), reverse=True)
            cost = c.saving(alt_s)
            if cost > 0 and gemm_gain > 0:
                tokens = lay.micro_batch_size * c.train.seq_len // lay.cp
                m_now = int(est.num_microbatches[0])
                m_alt = c.train.global_batch // (lay.dp * mbs)
                rest = cost - gemm_gain
                rows = f"larger GEMMs ({mbs * c.train.seq_len // lay.cp} instead of {tokens} tokens per row block)"
                others = ", ".join(f"{name} {d:.3f} s" for d, name in moved if d >= MIN_SAVING_S)
                why = (f"{gemm_gain:.3f} s from {rows} and {rest:.3f} s from {m_alt} instead of {m_now} micro-batches "
                       f"per step ({others or 'per-micro-batch fixed costs'})") if rest > MIN_SAVING_S \
                    else f"all of it from {rows}"
                out.append(Finding(
                    _severity(cost, c.step_s), "small_micro_batch",
                    f"micro-batch {lay.micro_batch_size}: micro-batch {mbs} still fits and saves {cost:.3f} s per "
                    f"step, {why}", [], cost))
    # CUDA_LAUNCH_BLOCKING=1: a debugging switch left in the environment serialises host and GPU
    if c.recipe.cuda_launch_blocking:
        cost = _saving_with(c, lay, cuda_launch_blocking=False)
        out.append(Finding(
            _severity(cost, c.step_s), "cuda_launch_blocking",
            f"the job runs with CUDA_LAUNCH_BLOCKING=1: every kernel launch waits for its kernel, so "
            f"{float(est.host_s[0]):.3f} s of host launch time adds to the step and no communication overlaps "
            f"compute; unset it (asynchronous launches) to save {cost:.3f} s per step", [], cost))
    # DeepSpeed's checkpoint-boundary synchronize: the device drains around every checkpointed chunk
    if c.recipe.checkpoint_sync and lay.recompute is Recompute.FULL:
        cost = _saving_with(c, lay, checkpoint_sync=False)
        if cost >= MIN_SAVING_S:
            where = (plan.recipe_sources or {}).get("checkpoint_sync", "default")
            n = c.recipe.checkpoint_interval
            chunk = "layer" if n == 1 else f"chunk of {n} layers"
            out.append(Finding(
                _severity(cost, c.step_s), "checkpoint_sync",
                f"the device is synchronized at the start and end of the forward and of the backward of every "
                f"checkpointed {chunk} ({where}), so the GPU idles while the next kernels are issued; "
                f"synchronize_each_layer: false (GPT-NeoX; DeepSpeed's activation_checkpointing."
                f"synchronize_checkpoint_boundary, Megatron-DeepSpeed's --synchronize-each-layer) saves {cost:.3f} s "
                f"per step", [], cost))
    # the attention core unfused: every layer streams its s x s scores through HBM and keeps them for backward
    if c.recipe.attention_kernel is AttentionKernel.UNFUSED:
        kernel, how = FUSED_ATTENTION.get(c.framework, FUSED_ATTENTION[""])
        cost = _saving_with(c, lay, attention_kernel=kernel)
        where = (plan.recipe_sources or {}).get("attention_kernel", "default")
        if c.dialect == "gpt-neox":  # attention_config "flash", in the versions that have it
            from placement.audit.readers.neox import flash_remedy

            remedy = flash_remedy(c.config_keys)
        elif c.megatron_deepspeed or (c.framework == "megatron" and c.recipe.pipeline_p2p_blocking):
            remedy = MEGATRON_DEEPSPEED_FLASH  # Megatron-DeepSpeed, read as megatron or (its JSON given) deepspeed
        else:
            remedy = f"a fused kernel, {how},"
        out.append(Finding(
            _severity(cost, c.step_s), "unfused_attention",
            f"the attention core runs unfused ({where}): its s x s scores go through HBM in every layer's forward, "
            f"recompute and backward; {remedy} saves {cost:.3f} s per step", [], cost))
    # DeepSpeed's ZeRO-1/2 reduces beside the backward only under overlap_comm, off by default below stage 3
    # (readers.deepspeed._zero_reduction); its PipelineEngine reduces after the flush whatever the key says
    if (c.framework == "deepspeed" and not c.recipe.dp_overlap and lay.zero_stage in (1, 2) and lay.dp > 1
            and not (c.recipe.pipeline_p2p_blocking and lay.pp > 1)):
        where = (plan.recipe_sources or {}).get("dp_overlap", "default")
        out.append(_saving_finding(
            c, lay, "dp_not_overlapped", f"the ZeRO-{lay.zero_stage} gradient reduction runs beside no compute "
            f"({where}): zero_optimization.overlap_comm: true reduces each bucket on its own stream during the "
            f"backward", dp_overlap=True))
    # Megatron switches the files leave off that only save time (Megatron-LM's defaults: arguments.py,
    # TransformerConfig)
    if c.framework == "megatron" and not c.recipe.pipeline_p2p_blocking:
        where = plan.recipe_sources or {}
        if not c.recipe.dp_overlap and lay.dp > 1:
            both = {"param_gather_overlap": True} if lay.zero_stage >= 1 else {}
            gather = " --overlap-param-gather" if lay.zero_stage >= 1 else ""
            out.append(_saving_finding(
                c, lay, "dp_not_overlapped", f"the gradient reduction waits for the last backward "
                f"({where.get('dp_overlap', 'default')}): --overlap-grad-reduce{gather} hides it behind the backward",
                dp_overlap=True, **both))
        elif not c.recipe.param_gather_overlap and lay.zero_stage == 1 and lay.dp > 1:
            out.append(_saving_finding(
                c, lay, "param_gather_not_overlapped", f"the distributed optimizer's weight all-gather runs before "
                f"the next forward ({where.get('param_gather_overlap', 'default')}): --overlap-param-gather hides it "
                f"behind that forward", param_gather_overlap=True))
        tail = _tail_bucket_finding(c, lay, where)
        if tail is not None:
            out.append(tail)
        if (c.model.is_moe and lay.recompute == Recompute.SELECTIVE
                and RecomputeModule.LAYERNORM in c.recipe.recompute_modules
                and bool(moe_norm_recompute_lost(c.recipe.cuda_graphs, c.recipe.moe_dispatcher))):
            # the files ask for it, Megatron-Core drops it (cost.memory.norms_recomputed): say so, with the memory
            freed = _price(c.model, c.train, c.mapped, [lay], c.recipe.model_copy(update={"cuda_graphs":
                                                                                          CudaGraphs.NONE}))
            kept = float(est.activations_bytes[0] - freed.activations_bytes[0])
            out.append(Finding(
                "info", "layernorm_recompute_dropped",
                f"--recompute-modules layernorm ({where.get('recompute_modules', 'default')}) does not recompute the "
                f"MoE layers' pre-MLP norm: with the router in per-layer CUDA graphs and the "
                f"{c.recipe.moe_dispatcher.value} dispatcher Megatron-Core disables it (transformer_layer.py "
                f"can_recompute_pre_mlp_layernorm_for_cudagraph: 'Disabling pre_mlp_layernorm recompute'), so the "
                f"norm's output stays saved, {kept / GiB:.1f} GiB a GPU at the peak rank, as priced; the alltoall "
                f"dispatcher or the router out of --cuda-graph-modules frees it", [], None))
        if not c.recipe.tp_async_backward and lay.tp > 1 and not c.recipe.tp_comm_overlap:
            cost = _saving_with(c, lay, tp_async_backward=True)
            out.append(Finding(
                _severity(cost, c.step_s), "tp_backward_not_overlapped",
                f"each column-parallel linear reduces its input gradient on its own "
                f"({where.get('tp_async_backward', 'default')}): without --no-async-tensor-model-parallel-allreduce "
                f"the reduction runs beside the weight-gradient GEMM and saves {cost:.3f} s per step", [], cost))
        if c.model.is_moe and not c.recipe.moe_fusions:
            cost = _saving_with(c, lay, moe_fusions=True)
            out.append(Finding(
                _severity(cost, c.step_s), "moe_unfused",
                f"the MoE permute and router run unfused ({where.get('moe_fusions', 'default')}): "
                f"--moe-permute-fusion --moe-router-fusion save {cost:.3f} s per step", [], cost))
    # ranks the launch line leaves unbound: their host time per kernel grows (cost.constants.HOST_UNBOUND_SLOWDOWN)
    if not c.recipe.cpu_affinity:
        cost = _saving_with(c, lay, cpu_affinity=True)
        if cost >= MIN_SAVING_S:  # shown to the millisecond
            where = (plan.recipe_sources or {}).get("cpu_affinity", "default")
            out.append(Finding(
                _severity(cost, c.step_s), "unbound_processes",
                f"cpu_affinity False, the ranks run unbound ({where}): binding each to its GPU's CPU cores and NUMA "
                f"node shortens its host launch time and saves {cost:.3f} s per step; torchrun --numa-binding node "
                f"(PyTorch >= 2.9), or deepspeed --bind_cores_to_rank where it starts the ranks itself (one host, or "
                f"each host launched with --no_ssh --node_rank N)", [], cost))
    # whole tensors between pipeline stages from every TP rank, where 1/tp shares would do (DeepSpeed's default)
    # (under sequence parallelism each rank sends its own shard, already the share: partitioning it would mix the
    # ranks' shards, partitioned_shard_findings)
    whole = c.recipe.pipeline_p2p_whole or c.recipe.pipeline_grads_whole
    if whole and lay.pp > 1 and lay.tp > 1 and not lay.sequence_parallel:
        cost = _saving_with(c, lay, pipeline_p2p_whole=False, pipeline_grads_whole=False)
        what = "activation and gradient" if c.recipe.pipeline_p2p_whole else "gradient"
        out.append(Finding(
            _severity(cost, c.step_s), "pipeline_whole_sends",
            f"each of the {lay.tp} TP ranks sends the whole {what} between pipeline stages: sending 1/{lay.tp} "
            f"shares and all-gathering them on arrival over the TP group (DeepSpeed's pipe_partitioned / "
            f"grad_partitioned, true by default since v0.12.3; an engine older than 2021-09-29 sends gradients "
            f"whole and needs an upgrade) saves {cost:.3f} s per step, the all-gathers priced", [], cost))
    # ZeRO-3 where ZeRO-1 fits (or ZeRO-2 where the framework has no ZeRO-1)
    lighter = [z for z in (1, 2) if z in c.zero_stages]
    alts = [lay.model_copy(update={"zero_stage": z, "dp_shard": None}) for z in lighter]
    able = CAPABILITIES.get(c.framework)
    if able is not None and alts:  # the stages the framework runs at this mesh (MaxText: ZeRO-3 wherever ep > 1)
        ran = able.sharding_mask(LayoutBatch.from_layouts(alts, c.recipe))
        alts = [a for a, ok in zip(alts, ran, strict=True) if ok]
    if lay.zero_stage == 3 and alts:
        e = c.price_as_launched(alts)
        ok = [(float(e.step_time_s[k]), alts[k].zero_stage, float(e.peak_memory_bytes[k]))
              for k in range(len(alts)) if e.fits[k]]
        if ok and c.saving(min(ok)[0]) >= MIN_SAVING_S:  # a lighter stage that saves nothing is no finding
            alt_s, zero, alt_peak = min(ok)
            cost = c.saving(alt_s)
            hsdp = f" (HSDP shard {lay.dp_shard})" if lay.shard_degree != lay.dp else ""
            out.append(Finding(
                _severity(cost, c.step_s), "zero3_where_zero1_fits",
                f"ZeRO-3{hsdp} re-gathers the weights every micro-batch; ZeRO-{zero} fits ({alt_peak / GiB:.1f} of "
                f"{cap / GiB:.1f} GiB) and saves {cost:.3f} s per step", [], cost))
    return out


def neox_space(space: SearchConfig, launch: LaunchLayout, model: ModelSpec | None = None) -> SearchConfig:
    """The best plan's search for a GPT-NeoX config, within what its keys can state and its version runs: ZeRO-0/1
    (GPT-NeoX exits on ZeRO-2/3 with its PipelineModule or with model parallelism, megatron/training.py), recompute
    none or full (checkpoint_activations: no key recomputes the attention core alone), and sequence parallelism off
    where the config's own keys date its GPT-NeoX before sequence_parallel (neox.version_takes); and model parallelism
    no wider than the KV heads, which GPT-NeoX splits over it whole (megatron/model/transformer.py:332-334
    `mpu.divide(num_kv_heads, world_size)`: "we do not yet clone KV heads in MQA across TP ranks")."""
    from placement.audit.readers.neox import version_takes

    update: dict = {"zero_stages": tuple(z for z in space.zero_stages if z <= 1),
                    "recompute": tuple(r for r in space.recompute if r is not Recompute.SELECTIVE)}
    if model is not None:
        update["max_tp"] = min(space.max_tp or model.kv_heads, model.kv_heads)
    if version_takes("sequence_parallel", launch.config_keys) is False:
        update["fixed"] = {**space.fixed, "sequence_parallel": False}
    return dataclasses.replace(space, **update)


_DEGREE_FLAGS = {"--tp": "tp", "--cp": "cp", "--ep": "ep", "--etp": "etp", "--pp": "pp", "--vpp": "vpp"}


def _degrees_as_stated(text: str, launch: LaunchLayout) -> str:
    """A layout rule's message that opens with `evaluate`'s flags (`--ep 4 --etp 1: ...`, `--tp 3 does not divide
    ...`) as the launch files state those degrees, with where (a user trial was shown flags the audit does not take,
    beside the batch's line), and its fix in the launch files' settings (_fix_in_files)."""
    m = re.match(r"((?:--(?:tp|cp|ep|etp|pp|vpp) \d+(?: |(?=:)))+)", text)
    if not m:
        return _fix_in_files(text)
    said = []
    for flag, value in re.findall(r"(--[a-z]+) (\d+)", m.group(1)):
        field = _DEGREE_FLAGS[flag]
        where = launch.sources.get(field)
        said.append(f"{field} {value}" + (f" ({where})" if where else " (not stated: the default)"))
    rest = text[m.end():]
    return "; ".join(said) + ("" if rest.startswith(":") else " ") + _fix_in_files(rest)


_EVALUATE_FIXES = (
    (re.compile(r"--(tp|cp|ep|etp|pp|vpp) (?=\d)"), r"\1 "),
    (re.compile(r"--seq-len (?=\d)"), "a sequence of "),
    (re.compile(r"an explicit --pipeline-layout"), "an explicit pipeline layout (Megatron-LM's "
                                                   "--pipeline-model-parallel-layout)"),
)
"""`evaluate`'s flags in a layout rule's fix (cost.rules: "or use --cp 1", "try --pp 2, 4") as the settings they
stand for, which the launch files state: `audit` does not take those flags."""


def _fix_in_files(fix: str) -> str:
    """A layout rule's fix with `evaluate`'s flags said as the launch files' settings (a QA run: an audit refusal
    ended "or use --cp 1", a flag `audit` does not take)."""
    said = fix
    for flag, words in _EVALUATE_FIXES:
        said = flag.sub(words, said)
    return said if said == fix else f"{said} (settings of the launch files)"


def is_megatron_deepspeed(launch: LaunchLayout) -> bool:
    """Megatron's arguments under --deepspeed: DeepSpeed's engine runs them (the reader records its blocking sends)."""
    return launch.framework == "megatron" and bool(launch.recipe.get("pipeline_p2p_blocking"))


def stays_on_megatron_deepspeed(launch: LaunchLayout, model: ModelSpec) -> bool:
    """A Megatron-DeepSpeed job whose model Megatron-LM cannot build: its best plan stays on Megatron-DeepSpeed
    (megatron_deepspeed_space), its changes are the script's own arguments, and --out writes no Megatron-LM file."""
    return is_megatron_deepspeed(launch) and megatron_lm_lacks(model, launch) is not None


def megatron_lm_lacks(model: ModelSpec, launch: LaunchLayout | None = None) -> str | None:
    """What of the model (or of the one the launch files train) Megatron-LM cannot build, in words (None: nothing): a
    Megatron-DeepSpeed job of such a model cannot move to Megatron-LM, so its best plan stays on Megatron-DeepSpeed
    (megatron_deepspeed_space)."""
    stated = None if launch is None else MEGATRON_POSITIONS.get(launch.position_embedding or "")
    if PositionEmbedding.ALIBI in (model.position_embedding, stated):
        return ("its ALiBi position embedding (Megatron-LM's GPTModel takes position_embedding_type learned_absolute, "
                "rope, mrope, yarn or none: megatron/core/models/gpt/gpt_model.py at d98e8a64, 2026-08)")
    return None


def megatron_deepspeed_space(space: SearchConfig, layout: Layout) -> SearchConfig:
    """The best plan's search for a Megatron-DeepSpeed job that stays on it (megatron_lm_lacks), within what its
    arguments launch under DeepSpeed's engine: no interleaving (PipelineEngine runs one chunk per stage), no context
    or expert parallelism, sequence parallelism as launched (BigScience's fork has none), ZeRO-1 at most with a
    pipeline (PipelineEngine), recompute none or full (--checkpoint-activations recomputes whole layers)."""
    fixed = {**space.fixed, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": layout.sequence_parallel}
    cap = dataclasses.replace(CAPABILITIES["deepspeed"], name="megatron-deepspeed", version="Megatron-DeepSpeed",
                              even_pipeline=False)
    return dataclasses.replace(space, fixed=fixed, zero_stages=cap.zero_stages, framework=cap,
                               recompute=tuple(r for r in space.recompute if r is not Recompute.SELECTIVE))


MEGATRON_DEEPSPEED_ARGUMENTS = ("--tensor-model-parallel-size", "--pipeline-model-parallel-size",
                                "--micro-batch-size", "--global-batch-size")
"""The layout arguments a Megatron-DeepSpeed script takes under Megatron-LM's spelling (both forks' arguments.py)."""
MEGATRON_DEEPSPEED_RECOMPUTE = ("--checkpoint-activations, which recomputes every layer whole (Megatron-DeepSpeed's "
                                "spelling in both forks; Megatron-LM's --recompute-granularity full)")


def megatron_deepspeed_changes(changes: list[dict], now: LayoutOut, best: LayoutOut,
                               files_text: str | None) -> list[dict]:
    """The changes of a Megatron-DeepSpeed job that stays on it (megatron_lm_lacks), in its own arguments: the layout
    arguments it shares with Megatron-LM, recompute as --checkpoint-activations, ZeRO as its --zero-stage and
    DeepSpeed config, the host and GPU order; not Megatron-LM's own flags (its DDP, overlaps, pipeline split, attention
    backend), which the best plan, priced on the job's engine, does not use."""
    from placement.audit.changes import CUDA_DEVICES, NODE_ORDER

    keep = [c for c in changes if c["argument"] in (*MEGATRON_DEEPSPEED_ARGUMENTS, NODE_ORDER, CUDA_DEVICES)]
    full = (now.recompute == Recompute.FULL.value, best.recompute == Recompute.FULL.value)
    if full[0] != full[1]:
        stated = files_text is not None and "--checkpoint-activations" in files_text
        row = {"argument": "--checkpoint-activations", "from": "true" if full[0] else None,
               "to": "true" if full[1] else None, "note": MEGATRON_DEEPSPEED_RECOMPUTE}
        if full[0] and not stated:
            row["note"] += "; not in the launch files: placement's spelling of the launched layout"
        keep.append(row)
    if now.zero_stage != best.zero_stage:
        keep.append({"argument": "--zero-stage", "from": str(now.zero_stage), "to": str(best.zero_stage),
                     "note": "and the DeepSpeed config's zero_optimization.stage"})
    if now.sequence_parallel != best.sequence_parallel:  # Megatron's sequence parallelism, which the fork keeps
        keep.append({"argument": "--sequence-parallel", "from": "true" if now.sequence_parallel else None,
                     "to": "true" if best.sequence_parallel else None})
    if now.cp != best.cp:  # DeepSpeed-Ulysses' degree, Megatron-DeepSpeed's own argument (a review: it was dropped)
        keep.append({"argument": "--ds-sequence-parallel-size", "from": str(now.cp) if now.cp > 1 else None,
                     "to": str(best.cp) if best.cp > 1 else None})
    keep += no_pipeline_parallel_change(best, files_text)
    return keep


MEGATRON_LM_REFUSES = {
    "--checkpoint-activations": "Megatron-LM exits on it ('--checkpoint-activations is no longer valid, use "
                                "--recompute-activations', megatron/training/arguments.py:601-604 at d98e8a64dd)",
    "--data-impl": "Megatron-LM removed it in 34ac1ad05e (2023-09-07): argparse refuses it",
    **{flag: "DeepSpeed's, which Megatron-LM does not define (no such argument at d98e8a64dd): argparse refuses it"
       for flag in ("--deepspeed", "--deepspeed_config", "--deepspeed-config", "--deepspeed-activation-checkpointing",
                    "--zero-stage", "--no-pipeline-parallel", "--cpu-optimizer", "--partition-activations",
                    "--checkpoint-in-cpu", "--contigious-checkpointing", "--synchronize-each-layer",
                    "--checkpoint-num-layers")},
}
"""Megatron-DeepSpeed arguments a move to Megatron-LM must drop: Megatron-LM (d98e8a64dd, the flags grepped) refuses
them or exits on them (a user trial applied a move's change list and kept them)."""


def _megatron_lm_move(changes: list[dict], best: dict[str, str], files_text: str,
                      job_args: tuple[tuple[str, str | None], ...] = ()) -> list[dict]:
    """A Megatron-DeepSpeed job's move to Megatron-LM, as edits the files take: no removal of a flag the files do not
    pass (placement's spelling of the launched layout, which this job never wrote: a user trial read `-
    --use-megatron-fsdp` for a DeepSpeed script), a change from an unstated value as an addition, and the files'
    flags Megatron-LM refuses removed (MEGATRON_LM_REFUSES; --fp16 beside the --bf16 the best plan adds, which
    validate_args refuses as a pair).  `job_args`: the running command's arguments (LaunchLayout.command_args), which
    say what it passes where the files' text could hold a flag in a branch that does not run (a review)."""
    from placement.audit.changes import NOT_IN_FILES, megatron_flag_in, stated_flag_value, uncommented

    live = uncommented(files_text)
    given = dict(job_args) if job_args else None
    out = []
    for c in changes:
        unseen = c["argument"].startswith("--") and c.get("note") == NOT_IN_FILES
        if unseen and c["to"] is None:
            continue
        out.append({k: v for k, v in c.items() if k != "note"} | {"from": None} if unseen else c)
    listed = {c["argument"] for c in out}
    refused = dict(MEGATRON_LM_REFUSES)
    if "--bf16" in best:
        refused["--fp16"] = "Megatron-LM refuses --fp16 beside --bf16 (validate_args), which the best plan runs"
    done = set()
    for flag, why in refused.items():
        key = "--" + flag[2:].replace("_", "-")  # the readers' spelling (Megatron-LM reads --a_b as --a-b)
        passed = key in given if given is not None else megatron_flag_in(flag, live)
        if key in done or flag in listed or not passed:
            continue
        done.add(key)
        spelled = next((f for f in (flag, key, "--" + key[2:].replace("-", "_")) if megatron_flag_in(f, live)), key)
        value = (given.get(key) if given is not None
                 else (stated_flag_value(flag, live) or "").strip("'\"") or None)  # a valued flag's (--zero-stage 3)
        out.append({"argument": spelled, "from": value if value and not value.startswith(("-", "$")) else "true",
                    "to": None, "note": why})
    return out


def no_pipeline_parallel_change(best: LayoutOut, files_text: str | None) -> list[dict]:
    """Megatron-DeepSpeed's --no-pipeline-parallel where the best plan needs it or cannot keep it: under ZeRO-2/3 the
    model must not be a PipelineModule, which DeepSpeed's PipelineEngine refuses (readers.megatron.NO_PIPELINE_MODULE,
    PIPELINE_MODULE_ZERO); a pipeline needs one."""
    from placement.audit.changes import uncommented
    from placement.audit.readers.megatron import NO_PIPELINE_MODULE, PIPELINE_MODULE_ZERO

    stated = files_text is not None and re.search(r"(?<![\w-])--no-pipeline-parallel(?![\w-])",
                                                  uncommented(files_text)) is not None
    if best.zero_stage >= 2 and best.pp == 1 and not stated:
        return [{"argument": "--no-pipeline-parallel", "from": None, "to": "true",
                 "note": f"ZeRO stage {best.zero_stage} needs it: {NO_PIPELINE_MODULE}, and {PIPELINE_MODULE_ZERO}"}]
    if best.pp > 1 and stated:
        return [{"argument": "--no-pipeline-parallel", "from": "true", "to": None,
                 "note": f"a pipeline of {best.pp} stages is a PipelineModule, which the flag turns off"}]
    return []


def hf_trainer_space(space: SearchConfig, layout: Layout) -> SearchConfig:
    """The best plan's search for a HuggingFace Trainer job under DeepSpeed, within what its flags and JSON can
    state: the launched tensor and context degrees (DeepSpeed AutoTP's tensor_parallel.autotp_size, accelerate's
    parallelism_config), no pipeline or expert parallelism (the Trainer hands DeepSpeed the whole model: no
    PipelineModule), recompute none or full (--gradient_checkpointing recomputes every decoder layer whole)."""
    fixed = {**space.fixed, "tp": layout.tp, "pp": 1, "cp": layout.cp, "ep": 1,
             "sequence_parallel": layout.sequence_parallel}  # no Trainer flag or JSON key turns it on
    # an MoE model's experts are the model's own modules, not deepspeed.moe's: every ZeRO stage runs them
    # and a launched context degree is accelerate's (DeepSpeed-Ulysses), not the ring placement's DeepSpeed files lack
    cap = dataclasses.replace(CAPABILITIES["deepspeed"], max_cp=layout.cp)
    return dataclasses.replace(space, fixed=fixed, zero_stages=cap.zero_stages, framework=cap,
                               recompute=tuple(r for r in space.recompute if r is not Recompute.SELECTIVE))


DEFAULT_TAILS = ("the launch files do not fix it", "the launch files do not set it")
"""How the CLI ends the source of a job field it took from a catalog default (cli._job_sources)."""
BASE_FIELDS = ("tp", "cp", "pp", "vpp", "micro_batch_size", "global_batch", "zero_stage", "recompute",
               "sequence_parallel", "precision", "seq_len")
"""What a Megatron-Bridge recipe sets that an override of it may leave out (base_config_findings lists them)."""


BASE_RECIPE_FIELDS = ("dp_overlap", "tp_comm_overlap", "grad_reduce_fp32", "cross_entropy_fusion", "cuda_graphs",
                      "fp8_recipe")
"""Recipe fields a Megatron-Bridge recipe sets (its comm_overlap, mixed_precision and model sections) that move the
step time."""
MOE_RECIPE_FIELDS = ("moe_dispatcher", "moe_fusions", "ep_comm_overlap")
"""The MoE ones (the token dispatcher, the permute/router fusions, the EP overlap): a recipe of an MoE
model sets them (Megatron-Bridge's qwen3_moe recipes: alltoall dispatcher, permute fusion)."""


MEMORY_FIELDS = ("tp", "cp", "pp", "micro_batch_size", "zero_stage", "recompute", "sequence_parallel", "seq_len")
"""The BASE_FIELDS a GPU's memory depends on."""


def _unread_defaults(launch: LaunchLayout) -> tuple[str, ...]:
    """The MEMORY_FIELDS an override priced at the framework's defaults (base_config_findings names them all)."""
    if launch.base_config is None:
        return ()
    return tuple(name for name in MEMORY_FIELDS
                 if launch.sources.get(name, DEFAULT_TAILS[0]).endswith(DEFAULT_TAILS))


def base_config_findings(launch: LaunchLayout, layout: Layout, train: TrainingSpec, recipe: Recipe,
                         recipe_sources: dict[str, str], moe: bool = False) -> list[Finding]:
    """A warning where the files override a base configuration the audit cannot read (LaunchLayout.base_config): the
    fields they leave out are the base's (a Megatron-Bridge recipe sets the degrees, the distributed optimizer,
    sequence parallelism, the overlaps and the precision recipe), priced here at the framework's defaults, each
    named with the value priced, so that no default passes for the recipe's value unsaid."""
    if launch.base_config is None:
        return []
    values = {**layout.model_dump(mode="json"), "global_batch": train.global_batch,
              "precision": train.precision.value, "seq_len": train.seq_len}
    # a job field (sequence, batch, precision) the CLI filled from a catalog default says so (cli._job_sources)
    left = [f"{name} {_shown_value(values[name])}" for name in BASE_FIELDS if not (name == "vpp" and layout.pp == 1)
            and launch.sources.get(name, DEFAULT_TAILS[0]).endswith(DEFAULT_TAILS)]
    # a recipe field the files do not state: priced at a default (placement's, or the framework's row for it)
    def unstated(k: str) -> bool:  # not in the files, or a reader's "default (...)" for it
        return (launch.sources.get(f"recipe.{k}", "default").startswith("default")
                and not recipe_sources.get(k, "").startswith("launch:"))

    fields = [f"{k} {_shown_value(getattr(recipe, k))}" for k in BASE_RECIPE_FIELDS + (MOE_RECIPE_FIELDS if moe else ())
              if unstated(k) and (k != "fp8_recipe" or train.precision.value == "fp8")
              and (k != "tp_comm_overlap" or layout.tp > 1)]
    # not all the framework's (a user trial read "dp_overlap true" as Megatron's default, which is off): the recipe
    # the files override decides them
    recipe_words = (f"; and the recipe fields it leaves out at the defaults placement takes for them (the recipe "
                    f"sources name each): {', '.join(fields)}" if fields else "")
    return [Finding(
        "warning", "base_config_unread",
        f"{launch.base_config}; the audit does not read that recipe, so what the files leave out is priced at "
        f"{launch.framework}'s defaults, not the recipe's: {', '.join(left) or 'no layout field'}"
        f"{recipe_words}. Audit the run's saved run_config.yaml "
        f"(Megatron-Bridge writes the whole ConfigContainer beside its checkpoints), or state these in the files",
        [], 0.0)]


MIN_CHANGE_GAIN = 0.01
"""Share of a fitting job's step a best plan must save for the audit to propose changing the launch: under 1 %, the
gain is below a step's run-to-run variation and the model's resolution, not worth a reconfiguration (the changes
go to `changes_withheld`)."""
COMBINED_SHARE = 0.02
"""Share of the step a best plan must save, where no finding names a remedy, for the audit to say what differs."""
COMBINED_FIELDS = ("tp", "cp", "ep", "pp", "vpp", "dp", "micro_batch_size", "zero_stage", "recompute",
                   "sequence_parallel")


def _combined_finding(plan: Plan, best: Plan, findings: list[Finding]) -> Finding | None:
    """Where the best plan saves more than COMBINED_SHARE of the step beyond the largest single finding's saving:
    the remedies that only work together (a smaller micro-batch that lets recompute go, say), each field that
    differs with both values, and what they save together, graded by that saving as every finding is (a user trial:
    a 1.58x speed-up came with info findings only, so `--fail-on error` passed the job).  None otherwise."""
    saving = plan.step_time_s - best.step_time_s
    largest = max((f.cost_s or 0.0 for f in findings if f.kind not in COST_NOT_SAVING), default=0.0)
    beyond = saving - largest
    if not plan.fits or beyond <= COMBINED_SHARE * plan.step_time_s:
        return None
    a, b = plan.layout, best.layout
    moved = [f"{name} {getattr(a, name)} -> {getattr(b, name)}" for name in COMBINED_FIELDS
             if getattr(a, name) != getattr(b, name)]
    # ...and the recipe features the best plan switches (a user trial: a Megatron file that `plan --emit all`
    # restricted to what every format launches showed a 1.051x speed-up from --tp-comm-overlap and full CUDA graphs,
    # with "no findings", so --fail-on passed it)
    ra, rb = plan.recipe_spec().model_dump(mode="json"), best.recipe_spec().model_dump(mode="json")
    moved += [f"{name} {_shown_value(ra[name])} -> {_shown_value(rb[name])}" for name in ra
              if ra[name] != rb.get(name)]
    if not moved:
        return None
    head = ("no single change saves time here" if largest <= 0 else
            f"the largest single finding saves {largest:.3f} s per step")
    return Finding(_severity(saving, plan.step_time_s), "combined_changes",
                   f"{head}, but together {', '.join(moved)} save {saving:.3f} s per step "
                   f"({plan.step_time_s:.3f} -> {best.step_time_s:.3f} s), {beyond:.3f} s more: the best plan below",
                   [], saving)


def _shown_value(v: object) -> str:
    """A recipe value as a finding prints it: an enum's value, a bool lower-case."""
    v = getattr(v, "value", v)
    return str(v).lower() if isinstance(v, bool) else str(v)


def partitioned_shard_findings(launch: LaunchLayout, layout: Layout, recipe: Recipe) -> list[Finding]:
    """An error where DeepSpeed's PipelineEngine partitions stage outputs under sequence parallelism: it splits each
    TP rank's own output into tp pieces and rebuilds the next stage's input from one piece of every rank
    (runtime/pipe/engine.py:708-715 and :732-745, runtime/utils.py PartitionedTensor), which is that input only where
    the TP ranks hold the same tensor.  Under sequence parallelism each holds its own sequence shard, so every stage
    after the first computes on pieces of different shards (a QA run: placement's own DeepSpeed files did so)."""
    engine = launch.framework == "deepspeed" or launch.megatron_deepspeed
    if (not engine or layout.pp <= 1 or layout.tp <= 1 or not layout.sequence_parallel
            or recipe.pipeline_p2p_whole):
        return []
    src = launch.sources
    stated = src.get("recipe.pipeline_p2p_whole") or "pipeline.pipe_partitioned unset: DeepSpeed's default, true"
    return [Finding(
        "error", "pipeline_partitioned_shards",
        f"the pipeline partitions each stage's output over the {layout.tp} TP ranks ({stated}) under sequence "
        f"parallelism ({src.get('sequence_parallel', 'the layout')}): DeepSpeed's PipelineEngine rebuilds the next "
        f"stage's input from one 1/{layout.tp} piece of every TP rank's output (runtime/pipe/engine.py:708-745, "
        f"runtime/utils.py PartitionedTensor), and here each rank's output is its own sequence shard, so every stage "
        f"after the first trains on pieces of {layout.tp} different shards; set pipeline.pipe_partitioned and "
        f"pipeline.grad_partitioned false in the DeepSpeed config: each rank then sends its own shard, the "
        f"1/{layout.tp} share this step is priced with", [], 0.0)]


def unknown_key_findings(launch: LaunchLayout) -> list[Finding]:
    """A warning per key of the files that no version of their framework takes (GPT-NeoX: readers.neox_keys,
    torchtitan: readers.torchtitan_keys, a Megatron-LM argument list: readers.megatron_flags): the stock framework
    refuses such a config; the job is priced without the key."""
    out = []
    for k in launch.unknown_keys:
        if k.megatron:
            name = "Megatron-LM"
            versions = "any version of Megatron-LM or Megatron-DeepSpeed: placement/audit/readers/megatron_flags.py"
            refuses = "their argument parser refuses a flag it does not define ('unrecognized arguments')"
            who = "an entry script that adds it (extra_args_provider) or a fork that defines it"
            kind, what = "flag", "launch"
        elif k.deepspeed:
            from placement.audit.readers.deepspeed import DS_VERSIONS_READ, ZERO_FORBIDS

            name, versions, kind, what = "DeepSpeed", DS_VERSIONS_READ, "config key", "config"
            if k.key.startswith("zero_optimization."):
                refuses, who = ZERO_FORBIDS, "a DeepSpeed before v0.7.0, which ignores it, or a fork that defines it"
            else:
                refuses, who = "DeepSpeed reads no such top-level key and ignores it", "a DeepSpeed that ignores it"
        elif launch.framework == "torchtitan":
            from placement.audit.readers.torchtitan import REFUSES, VERSIONS_READ

            name, versions, refuses, kind, what = "torchtitan", VERSIONS_READ, REFUSES, "key", "config"
            who = ("a torchtitan that defines it (an extension named by job.custom_config_module, an experiment's "
                   "config, or a newer version)")
        else:
            from placement.audit.readers.neox import REFUSES, VERSIONS_READ

            name, versions, refuses, kind, what = "GPT-NeoX", VERSIONS_READ, REFUSES, "key", "config"
            who = "a GPT-NeoX that defines it (a fork, or a newer version)"
        where = f"{k.file}:{k.line}" if k.line is not None else k.file
        near = f"; the nearest {name} {kind} is {k.suggestion}" if k.suggestion else ""
        out.append(Finding(
            "warning", "unknown_config_key",
            f"{where}: {k.key} is no {name} {kind} ({versions}): {refuses}, so only {who} runs this {what}; "
            f"priced without it{near}", [], 0.0))
    return out


EP_DEFAULT = {"deepspeed": "deepspeed.moe.layer.MoE's default ep_size (moe/layer.py). DeepSpeed takes expert "
                            "parallelism only in model code, never in its JSON: give the file that states it (the "
                            "emitted ds_topology.py's `ep_size = N`, or a script's MoE(..., ep_size=N))"}
EP_DEFAULT["hf-trainer"] = ("the HF Trainer's: the model's own MoE modules hold every expert on every rank (no "
                            "expert parallelism; ZeRO shards their weights as the rest)")
"""Where an MoE job's unstated ep comes from, for a framework whose files can leave it out."""


def _check_deepspeed_moe_zero3(launch: LaunchLayout, layout: Layout, model: ModelSpec) -> None:
    """DeepSpeed refuses ZeRO-3 where the model's MoE layers are its own (deepspeed.moe.layer.MoE), in every release
    since MoE came (engine.py: "MoE not supported with Stage 3" from v0.6.0; 0.19's
    _validate_zero3_moe_compatibility "Native DeepSpeed MoE is not supported with ZeRO Stage 3"): a job whose files
    build them (Megatron-DeepSpeed's --num-experts, a Python file's `ep_size` or `MoE(...)`, as placement's
    ds_topology.py) does not start, so nothing is priced (a user trial: the audit priced the files the plan said
    DeepSpeed refuses).  An HF Trainer's MoE is the model's own PyTorch, which ZeRO-3 runs."""
    if launch.framework != "deepspeed" or not model.is_moe or layout.zero_stage != 3 or launch.dialect == "hf-trainer":
        return
    built = launch.deepspeed_moe or ("Megatron-DeepSpeed --num-experts" if launch.megatron_deepspeed else None)
    if built:
        where = launch.sources.get("zero_stage", "the files' ZeRO stage")
        raise InputError(f"{where}: ZeRO-3 with DeepSpeed's own MoE layers ({built}), which DeepSpeed refuses at "
                         f"start-up (runtime/engine.py: \"Native DeepSpeed MoE is not supported with ZeRO Stage 3. "
                         f"Use AutoEP or choose ZeRO stage 1/2\"; \"MoE not supported with Stage 3\" since "
                         f"v0.6.0): the job does not start; set ZeRO stage 1 or 2")


def _check_launch_hosts(launch: LaunchLayout, topo: Topology) -> None:
    """On a real allocation (--slurm-topology/--nodelist) the hosts the launch files name (a hostfile, `# on HOST`
    comments) are the job's: one outside the allocation, or fewer hosts than it has, is an InputError naming them,
    as --hosts' are.  A user trial's hostfile with one host outside the allocation had its whole order dropped for
    the allocation's, with a note calling all its hosts foreign; one listing half the allocation got DeepSpeed's
    batch arithmetic as the error.  Files none of whose hosts are the allocation's (placement's own host0 ... of a
    plan made on the catalog cluster) name another machine: a note, node ranks laid on the allocation in order."""
    if not topo.allocated or not launch.hosts:
        return
    where = launch.sources.get("hosts", "the launch files")
    known = set(topo.host_names)
    foreign = [h for h in launch.hosts if h not in known]
    if len(foreign) == len(launch.hosts):  # names of another machine (placement's host0 ...): a note, not the job's
        return
    if foreign:
        raise InputError(f"{where}: {len(foreign)} host(s) not in the allocation, first {foreign[0]!r} (the "
                         f"allocation has {topo.num_hosts} hosts); give the hostfile the job ran with, or the "
                         f"allocation of its hosts")
    if len(set(launch.hosts)) != topo.num_hosts:
        raise InputError(f"{where}: the files name {len(set(launch.hosts))} hosts but the allocation has "
                         f"{topo.num_hosts}; give the allocation of the hosts the job ran on, or a hostfile of all "
                         f"{topo.num_hosts}")


def audit_job(launch: LaunchLayout, model: ModelSpec, train: TrainingSpec, topo: Topology,
              hosts: list[str] | None, mapping: SolverConfig | None, top_k: int = 5,
              recipe_overrides: tuple[Recipe, dict[str, str]] | None = None,
              progress: Callable[[int], None] | None = None, files_text: str | None = None) -> Audit:
    """Price the job as launched (its layout and recipe), list its findings, and plan the same job from
    scratch, searching the recipe choices the framework can launch.  `recipe_overrides`: (Recipe, field ->
    source) from the command line, over what the files state.  `files_text`: the launch files' text, which the
    argument diff checks its launched side against (changes.launch_changes)."""
    if not hosts:
        _check_launch_hosts(launch, topo)
    launch = derived_micro_batch(maxtext_layout(launch, model, topo, train.global_batch), topo.num_gpus)
    pool, pool_note = jax_memory_pool(launch, topo.accelerator.hbm_bytes)
    if pool_note is not None:  # the job's own capacity: its best plan is searched within it too
        train = train.model_copy(update={"memory_pool_bytes": pool, "memory_pool_note": pool_note})
    from placement.audit.maxtext import MOE_ONLY

    # a reader's note that holds for an MoE model only (MaxText's: the files may name no experts where the model
    # config their model_name loads has them) is kept for one, without its marker, and dropped otherwise
    notes = tuple(n.removeprefix(MOE_ONLY) for n in launch.ignored if model.is_moe or not n.startswith(MOE_ONLY))
    launch = launch.model_copy(update={"ignored": (*notes, *model_differs(launch, model))})
    model, model_sources = launched_model(launch, model)
    layout = resolve_layout(launch, model, topo.num_gpus, topo.gpus_per_host if topo.allocated else None)
    _check_torchtitan_mxfp8(launch, topo)
    _check_torchtitan_float8(launch, topo)
    _check_te_fp8(launch, topo)
    _check_te_mxfp8(launch, topo)
    _check_kv_heads(launch, layout, model)
    _check_megatron_rank_order(launch, layout, model)
    _check_deepspeed_moe_zero3(launch, layout, model)
    recipe, recipe_sources = launch_recipe(launch, model, layout, recipe_overrides, several_hosts=topo.num_hosts > 1,
                                           precision=train.precision.value)
    if recipe.expert_w1_rerun and not model.is_moe:  # a MaxText policy's expert rerun, read before the model was known
        recipe = recipe.model_copy(update={"expert_w1_rerun": False})
        recipe_sources.pop("expert_w1_rerun", None)
    refused = graphs_recompute_error(layout, recipe, model.is_moe)
    if refused is not None:  # the files' own combination, not a batch that does not fit: name where they state it
        where = "; ".join(e for e in (recipe_sources.get("cuda_graphs"), launch.sources.get("recompute"),
                                      recipe_sources.get("recompute_modules")) if e)
        raise InputError(f"{where}: {refused}")
    _check_blockwise_tp_overlap(launch, layout, recipe, recipe_sources, train, topo)
    try:
        check_layout(model, train, layout, recipe, runs_te=launch.framework in (None, "megatron"),
                     torch_pipeline=launch.framework == "torchtitan")
    except InputError as err:
        text = str(err)
        batch = launch.sources.get("global_batch") if "batch" in text else None  # a rule the batch decides
        of = f" (global batch {train.global_batch}: {batch})" if batch else ""
        # the fix is in the files where they state the batch and the micro-batch, not in a flag of this command (a
        # user trial was told `--mbs 1`, which `audit` does not take)
        if batch:
            text = text.replace("try --global-batch", "set the global batch the launch files state to")
        mbs = launch.sources.get("micro_batch_size")
        text = text.replace(", or --mbs 1", f", or micro-batch 1 ({mbs})" if mbs else ", or micro-batch 1")
        text = _degrees_as_stated(text, launch)
        group = next((n for n in launch.ignored if n.startswith("--microbatch-group-size-per-virtual-pipeline-stage")),
                     None)
        if group is not None and "interleaving needs micro-batches" in text:
            # a trial: Megatron-Core (core_r0.10.0 on) runs such a count in groups of the flag's size, placement not
            text += (f"; the files set --microbatch-group-size-per-virtual-pipeline-stage ({group.rpartition('(')[2]}, "
                     f"with which Megatron-Core may run this count (schedules.py: the count modulo the group 0 or at "
                     f"least pp), but placement prices groups of pp only, so it cannot price this job")
        if "expert tensor parallelism is 1 or equal to tp" in text and launch.framework == "megatron":
            # a QA run on Megatron's functional tests (gpt3_mcore_tp2_pp2_ep2_etp2_te_4experts2parallel: tp 4, etp
            # 2): the job starts, and was called one that does not fit; placement's limit, not Megatron's
            raise InputError(f"placement cannot price the launch files' layout: {text}; Megatron-Core builds the "
                             f"experts' own grid at any etp whose etp x ep x pp divides the world "
                             f"(parallel_state.py initialize_model_parallel, MoE parallel folding since 7f22e210cd "
                             f"of 2024-11-23), so this job starts, but placement prices experts unsharded (etp 1) or "
                             f"sharded like the dense layers (etp = tp) only") from None
        raise InputError(f"the launch files' layout does not fit the job{of}: {text}") from None
    notes = [f for f in (_check_megatron_connections(launch, layout, topo), _allocator_note(launch)) if f is not None]
    if not hosts and launch.hosts and not set(launch.hosts) <= set(topo.host_names):
        # a hostfile's real names on a catalog cluster: node ranks fill the cluster in its own order
        notes.append(Finding(
            "info", "hosts_not_in_cluster",
            f"the launch files name hosts {', '.join(launch.hosts[:4])}{' ...' if len(launch.hosts) > 4 else ''}, "
            f"which the cluster given does not have; node ranks are laid on its nodes in order "
            + ("(the allocation's --nodelist order; give --hosts with the order the job ran with)" if topo.allocated
               else "(give the real allocation with --slurm-topology/--nodelist to price the job's own hosts)"),
            [], 0.0))
        launch_hosts = None
    else:
        launch_hosts = list(launch.hosts) or None
    if hosts and launch_hosts and list(hosts) != launch_hosts:
        where = launch.sources.get("hosts", "the launch files")
        notes.append(Finding(
            "warning", "hosts_differ",
            f"--hosts gives the host order {', '.join(hosts[:4])}{' ...' if len(hosts) > 4 else ''}, the launch files "
            f"another: {', '.join(launch_hosts[:4])}{' ...' if len(launch_hosts) > 4 else ''} ({where}); priced "
            f"with --hosts' (the order the job ran with, if the files were edited since): drop --hosts to price the "
            f"files' order", [], 0.0))
    slurm_hosts = None
    slurm = bool(not hosts and not launch_hosts and launch.slurm_node_order and topo.allocated and topo.num_hosts > 1)
    ordered = sorted(topo.host_names, key=hostlist_sort_key)
    ranked = getattr(topo, "slurm_rank_order", None)
    ranked_on = getattr(topo, "slurm_rank_order_on", None) if ranked is not None else None
    if ranked_on is not None:
        # slurm.conf's TopologyParam=SwitchAsNodeRank / BlockAsNodeRank: slurmctld ranks its node table by leaf
        # switch / block (topology_p_generate_node_ranking), so SLURM_NODEID runs leaf by leaf (a QA trial: with
        # leaves holding gpu[01,03,05,07] and gpu[02,04,06,08], the data-parallel groups were priced across the
        # spine in name order, where SLURM's ranking keeps each in a leaf)
        ordered = list(ranked[0])
    if slurm:
        # node ranks from SLURM_NODEID (or srun's tasks) run over the job's nodes in SLURM's order, not in the order
        # the nodelist was written (a QA trial: `--nodelist 'gpu[0036-0039],gpu[0030-0035],...'` with --node_rank
        # $SLURM_NODEID was priced, and a reordering proposed, on the written order)
        slurm_hosts = ordered if ordered != list(topo.host_names) else None
    order = host_order_of(topo, hosts or launch_hosts or slurm_hosts)
    if launch.framework == "maxtext" and launch.mesh is not None:  # MaxText's hybrid mesh numbering
        from placement.audit import maxtext

        framework_rank = maxtext.framework_rank(launch.mesh, layout.tp, layout.cp, layout.dp, layout.pp, layout.ep,
                                                topo.gpus_per_host, topo.num_gpus)
    else:
        framework_rank = framework_rank_of(layout, launch.rank_order)
    assumed = {}
    if not hosts and not launch_hosts and topo.num_hosts > 1:
        # (a user trial: a hostfile's names not on the catalog cluster were said to be "no hostfile")
        why = (f"the files' hosts ({', '.join(launch.hosts[:3])}{' ...' if len(launch.hosts) > 3 else ''}) are not "
               f"the cluster's" if launch.hosts else
               "not stated by the files (no hostfile, and no `# on HOST` comment above each node rank's launch line)")
        assumed["host_order"] = (f"{why}: assumed the allocation's order, node rank k on its k-th host "
                                 f"({', '.join(topo.host_names[:3])}{' ...' if topo.num_hosts > 3 else ''}); give "
                                 f"--hosts with the order the job ran with")
        if slurm:
            # slurmctld sorts its node table by name (src/slurmctld/read_config.c _sort_node_record_table_ptr,
            # strnatcmp), the job's node list and SLURM_NODEID keep the table's order (cons_tres job_test.c
            # bitmap2node_name_sortable(..., false)); TopologyParam=SwitchAsNodeRank / BlockAsNodeRank rank it by leaf
            # switch / block instead (slurm.conf(5)), which the audit cannot read: said where it would differ
            conf = getattr(topo, "slurm_conf_source", None)
            other = (f"; unless slurm.conf's {ranked[1]}: {', '.join(ranked[0][:3])} ... (--slurm-conf FILE "
                     f"prices the order its TopologyParam gives)"
                     if ranked is not None and list(ranked[0]) != ordered and conf is None else "")
            how = (f"by slurm.conf's {ranked[1]} ({ranked_on})" if ranked_on is not None else
                   "in its node table's order, by name (node2 before node10; slurmctld sorts the table so"
                   + (f"; {conf}" if conf else "") + ")")
            assumed["host_order"] = (
                f"{why}; the node ranks are SLURM's ({launch.sources.get('slurm_node_order', 'srun')}), and SLURM "
                f"numbers a job's nodes {how}, however --nodelist is written: assumed node rank k on the k-th of them "
                f"({', '.join(ordered[:3])} ...){other}; give --hosts with the order the job ran with")
    if model.is_moe and "ep" not in launch.sources:
        source = EP_DEFAULT.get(launch.dialect or launch.framework, launch.framework + "'s default")
        assumed["ep"] = f"not stated by the files: assumed {layout.ep}, {source}"
    gph = topo.gpus_per_host
    launch = _devices_by_host(launch, [topo.host_names[h] for h in order])
    local_orders, order_notes = node_gpu_orders(launch, topo.num_hosts, gph, min(gph, topo.num_gpus))
    notes += order_notes
    by_host = host_order_mapping(topo, order)
    node_of = np.arange(topo.num_gpus) // gph
    perm = np.array(local_orders, dtype=np.int64)  # node rank k's local rank i runs on GPU perm[k, i]
    job_gpu = (by_host // gph) * gph + perm[node_of, by_host % gph]  # the GPU of each of the job's own ranks
    block_gpu, job_gpu = job_gpu, job_gpu[task_slots(launch, topo.num_gpus, gph)]
    gpu_of_rank = job_gpu[framework_rank]
    # the job's ranks as srun's block distribution would place them on the same host order: the side the change
    # list's host order and CUDA_VISIBLE_DEVICES compare (a distribution change of its own says the rest)
    block_of_rank = block_gpu[framework_rank]
    # the job's own ranks, which the best plan's files number as placement does: what a host order or
    # CUDA_VISIBLE_DEVICES change compares (MaxText's mesh numbering is compared as placement numbers it)
    launched_order = block_of_rank if launch.framework == "maxtext" and launch.mesh is not None else block_gpu
    dealt = None if block_gpu is job_gpu or np.array_equal(block_gpu, job_gpu) else (
        f"{dealer_flag(launch)} {'node' if launch.task_dealer == 'mpirun' else launch.task_distribution} "
        f"({launch.sources.get('task_distribution', '')})")
    visible = [n for n in launch.cuda_visible_devices if n.devices is not None]
    open_lines = [n for n in launch.cuda_visible_devices if n.unresolved]
    if topo.node_layout is not None and not visible and "cuda_visible_devices" not in launch.sources:
        assumed["cuda_visible_devices"] = (
            f"not set by the launch lines: each host runs its ranks on GPUs 0..{gph - 1} in numbered order"
            if not open_lines else
            f"set to a value the files do not hold ({open_lines[0].unresolved}; {open_lines[0].evidence}): priced "
            f"with each host's GPUs 0..{gph - 1} in numbered order; pass the file it is read from with --launch "
            f"(placement's cuda_visible_devices.txt)")
    # with measured intra-node links each host runs its ranks on its GPUs in the order its launch line's
    # CUDA_VISIBLE_DEVICES lists (numbered order without one): its groups get the links of those GPUs
    mapped = topo.with_mapping(gpu_of_rank).as_launched_in_order(sorted(set(local_orders)))
    est = _price(model, train, mapped, [layout], recipe)
    if topo.node_layout is not None:
        reordered_s = float(_price(model, train, topo.with_mapping(gpu_of_rank), [layout], recipe).step_time_s[0])
        launched_s = float(est.step_time_s[0])
        if launched_s > reordered_s * (1.0 + 1e-9):
            node = topo.node_layout
            k = min(layout.tp, gph)
            order_k = node.order.get(k, ())
            best_visible = ",".join(map(str, order_k))
            gbps = topo.cluster.scale_up.collective_efficiency / 1e9
            ran = mapped.node_layout.group_bandwidth.get(k, 0.0) if mapped.node_layout is not None else 0.0
            how = (f"each host runs its ranks on GPUs 0..{gph - 1} in order (the launch files set no "
                   f"CUDA_VISIBLE_DEVICES), so groups of {k} consecutive GPUs get" if not visible and not open_lines
                   else f"the launch files set CUDA_VISIBLE_DEVICES to a value they do not hold (see "
                   f"cuda_visible_devices above), priced as each host's GPUs 0..{gph - 1} in order (pass the file "
                   f"it is read from with --launch), so groups of {k} consecutive GPUs get" if not visible else
                   f"the launch files run each host's ranks on GPUs {visible[0]} (CUDA_VISIBLE_DEVICES, "
                   f"{visible[0].evidence}), so groups of {k} consecutive ranks get")
            notes.append(Finding(
                _severity(launched_s - reordered_s, launched_s), "gpu_order",
                f"{how} {ran * gbps:.0f} GB/s rings over the node's measured links; "
                f"CUDA_VISIBLE_DEVICES={best_visible} puts each on {node.group_bandwidth.get(k, 0.0) * gbps:.0f} GB/s "
                f"and saves {launched_s - reordered_s:.3f} s per step ({launched_s:.3f} -> {reordered_s:.3f} s)",
                [], launched_s - reordered_s))
    batch = _batch([layout], recipe)
    plan = make_plan(batch, est, 0, model, train, topo, recipe_sources, model_sources)
    as_run = {}
    if any(FP16_MIXED in note for note in launch.ignored):  # the readers' note for FP16 priced as BF16
        as_run["precision_as_run"] = "fp16"
    if recipe.fp8_recipe is not None and DELAYED_FP8.search(recipe_sources.get("fp8_recipe", "")):
        as_run["fp8_recipe_as_run"] = "delayed"  # Megatron's default, priced as tensorwise
    plan = plan.model_copy(update=as_run)
    cp_model_code = None
    # a 'context' axis of a DeepSpeed topology: ZeRO over 'data' alone, the memory the emitter prices (DeepSpeed-
    # Ulysses, from --ds-sequence-parallel-size, the JSON's sequence_parallel_size or accelerate's, shards over its
    # seq_data_parallel_group, sequence x data: as priced)
    if launch.framework == "deepspeed" and layout.cp > 1 and launch.context_axis:
        from placement.emit.deepspeed import zero_over_data

        plan, cp_model_code = zero_over_data(plan)
    kinds = group_kinds(layout, est, 0)
    base = {k: float(_price(model, train, topo.with_mapping(g), [layout], recipe).step_time_s[0])
            for k, g in baseline_mappings(topo).items()}
    # placement's own mapping of the same layout: CP-SAT on a real allocation, the hierarchy order else, chosen
    # as the job runs (its recipe)
    if mapping is not None:
        own = map_layout(workload(model), train, topo, layout, est, 0, mapping,
                         price=lambda t: _price(model, train, t, [layout], recipe))
        own_mapped, own_est = own.topo, own.estimate
        mapped_same_s = float(own.estimate.step_time_s[0])  # priced under the job's recipe by the mapper
    else:
        own_mapped, own_est = topo, None
        mapped_same_s = float(_price(model, train, topo, [layout], recipe).step_time_s[0])
    plan = plan.model_copy(update={
        "mapping_solver": {"status": "AUDITED", "chosen": "launch_order",
                           "note": "ranks as the launch files number them, node ranks in the job's host order"},
        "baselines": {k: {"step_time_s": float(f"{v:.6g}")} for k, v in base.items()},
        "crossings": crossings(mapped, kinds),
        # in the job's own rank numbering, as `mapping` (a user trial: null in every audit, where the README says
        # every plan has it)
        "mapping_compact": _job_compact(topo, job_gpu, launch),
        "mapping": sorted(({**row, "rank": int(framework_rank[row["rank"]])}
                           for row in rank_table(topo, gpu_of_rank, layout, model.is_moe)),
                          key=lambda row: row["rank"]),
    })
    old_titan = launch.framework == "torchtitan" and launch.torchtitan_form is not None
    converters = launch.torchtitan_stated.get("model.converters", ("", ""))[0] if old_titan else ""
    space = framework_space(launch.framework, top_k, model.is_moe, torchtitan_old=old_titan, tied=model.tied_embeddings,
                            float8_moe=any(n in converters for n in ("quantize.grouped_mm.float8",
                                                                     "quantize.moe.float8")),
                            config=run_config(launch.framework, model, train.precision.value, topo.accelerator)
                            if launch.framework in CAPABILITIES else None,
                            cp_refused=attention_refuses_cp(launch.model_ref, launch.torchtitan_stated, old_titan)
                            if launch.framework == "torchtitan" else "")
    if launch.dialect == "gpt-neox":
        space = neox_space(space, launch, model)
    if launch.dialect == "hf-trainer":
        space = hf_trainer_space(space, layout)
    elif launch.framework == "deepspeed" and launch.megatron_deepspeed and layout.cp > 1:
        # a Megatron-DeepSpeed job's DeepSpeed-Ulysses degree (--ds-sequence-parallel-size): the best plan may keep
        # it, up to the job's (placement's own DeepSpeed files have no context parallelism to offer), but not beside
        # tensor or pipeline parallelism, which it is "currently incompatible with" (Megatron-DeepSpeed
        # examples_deepspeed/sequence_parallel/README.md at 4efb479d; a QA run's best plan added tp 4); a plan without
        # it may take them
        space = dataclasses.replace(space, framework=dataclasses.replace(space.framework, max_cp=layout.cp,
                                                                         cp_alone=True))
    if launch.micro_batch_one:  # the framework's own limit on the job's data (packed sequences)
        space = dataclasses.replace(space, fixed={**space.fixed, "micro_batch_size": 1})
    keep_engine = stays_on_megatron_deepspeed(launch, model)
    if keep_engine:
        space = megatron_deepspeed_space(space, layout)
    from placement.audit.readers.deepspeed import ACCELERATE_ZERO  # an accelerate plugin's config: no overlap key

    space, best_sources = recipe_space(space, launch.framework, model, topo, recipe, recipe_sources,
                                       torchtitan3=launch.framework == "torchtitan" and not launch.torchtitan_form,
                                       keep_engine=keep_engine,
                                       overlap_key=ACCELERATE_ZERO not in (launch.config_keys or {}))
    try:
        planned, no_better = plan_job(model, train, topo, space, mapping, recipe_sources=best_sources,
                                      progress=progress, model_sources=model_sources), None
    except PlacementInfeasible as err:
        # the launched job is priced all the same: only the comparison with a searched plan is missing
        planned, no_better = None, str(err)
    step_s = float(est.step_time_s[0])
    c = _Ctx(model, train, topo, layout, est, step_s, mapped_same_s,
             est if planned is None else planned.search.estimates, batch if planned is None else planned.search.batch,
             recipe, mapped, space.zero_stages, framework_rank, launch.framework, launch.dialect, launch.config_keys,
             own_mapped, launch.offloaded, launch.megatron_deepspeed, own_est, _unread_defaults(launch), dealt)
    findings = (_crossing_findings(c, kinds) + _layout_findings(c, plan) + _jax_pool_findings(c, plan, launch) + notes
                + partitioned_shard_findings(launch, layout, recipe) + unknown_key_findings(launch)
                + base_config_findings(launch, layout, train, recipe, recipe_sources, model.is_moe)
                + [Finding("warning", "not_priced_as_run", w, [], 0.0) for w in launch.warnings]
                + ([Finding("warning", "not_priced_as_run", f"{cp_model_code} (the step does not price the ring "
                            f"attention or the gradient reduction over cp your model code adds)", [], 0.0)]
                   if cp_model_code else []))
    stated = (launch.first_stage_layers, launch.last_stage_layers)
    modeled = (plan.layout.stage_layers[0], plan.layout.stage_layers[-1])
    if layout.pp > 1 and None not in stated and stated != modeled:
        where = launch.sources.get("first_stage_layers", "the launch files")
        findings.append(Finding(
            "info", "stage_split_differs",
            f"the launch files put {stated[0]} / {stated[1]} layers on the first / last pipeline rank ({where}); "
            f"the estimate uses placement's split {'/'.join(map(str, plan.layout.stage_layers))} (first / middle "
            f"/ last)", [], 0.0))
    if launch.world_size is not None and launch.world_size != topo.num_gpus:
        where = f" ({launch.sources['world_size']})" if "world_size" in launch.sources else ""
        findings.append(Finding(
            "warning", "world_size_differs",
            f"the launch files start {launch.world_size} processes{where}; audited on the {topo.num_gpus} GPUs given "
            f"on the command line (dp {layout.dp}): the estimate and the best plan describe the job on "
            f"{topo.num_gpus} GPUs, which these files do not launch until their node count says so", [], 0.0))
    findings.sort(key=lambda f: (-SEVERITIES.index(f.severity), -(f.cost_s or 0.0), f.kind))
    best, best_gpu = (plan, gpu_of_rank) if planned is None else (planned.plans[0], planned.gpu_of_rank[0])
    if best.step_time_s >= plan.step_time_s and plan.fits:  # the job already runs the best we know
        best, best_gpu = plan, gpu_of_rank
    if best is not plan:
        best, best_gpu = _keep_job_host_order(best, best_gpu, launched_order, topo, model, train)
    speedup = round(plan.step_time_s / best.step_time_s, 3) if best.step_time_s > 0 else 1.0
    combined = _combined_finding(plan, best, findings)
    if combined is not None:
        findings.append(combined)
    best_ctx = EmitContext.of(best, topo, best_gpu, model, train)
    now_ctx = EmitContext.of(plan, topo, block_of_rank, model, train)
    changes = launch_changes(launch.dialect or launch.framework, now_ctx, best_ctx, files_text,
                             launch.config_keys if launch.dialect or launch.framework == "deepspeed" else None,
                             (launch.torchtitan_stated, launch.torchtitan_form) if launch.torchtitan_form else None,
                             bridge=launch.bridge_keys or None, job=launch, launched_gpu=launched_order)
    if keep_engine:
        changes = megatron_deepspeed_changes(changes, plan.layout, best.layout, files_text)
    elif launch.framework == "deepspeed" and launch.megatron_deepspeed and not launch.dialect:
        # a Megatron-DeepSpeed script with its JSON: the degrees, micro-batch and recompute are the script's arguments
        # and the ZeRO stage and batch keys the JSON's own (a user trial was told to change a ds_topology.py and
        # JSON sections the job does not have)
        script = launch_changes("megatron", now_ctx, best_ctx, files_text)
        stated = launch.config_keys or {}
        changes = (megatron_deepspeed_changes(script, plan.layout, best.layout, files_text)
                   + [c for c in changes if c["argument"] in stated])
        if "sequence_parallel_size" in stated and plan.layout.cp != best.layout.cp:  # the JSON's Ulysses degree
            changes.append({"argument": "sequence_parallel_size", "from": stated["sequence_parallel_size"],
                            "to": str(best.layout.cp)})
    elif launch.pipeline_module is not None and launch.framework == "deepspeed" and not any(
            c["argument"] == "--no-pipeline-parallel" for c in changes):  # not on a move to Megatron-LM's arguments
        changes += no_pipeline_parallel_change(best.layout, files_text)
    if launch.dialect == "gpt-neox":
        neox_requirements(changes, launch.config_keys, best_ctx)
        spell_neox_keys(changes, launch.config_spelling)
    if is_megatron_deepspeed(launch) and files_text is not None and not keep_engine and no_better is None:
        # (no best plan searched: nothing to move to, so no Megatron-LM arguments to add; a user trial read ten
        # "Megatron-LM needs it for the best plan" lines under "the job as launched is the only plan priced")
        # a Megatron-DeepSpeed job moving to Megatron-LM: every argument of the best plan its files do not carry is
        # one the move must add, even where placement spells the launched job with it too (a user trial found
        # --grad-reduce-in-bf16, without which the best plan does not fit, left out)
        from placement.audit.changes import framework_settings, megatron_flag_in

        listed = {c["argument"] for c in changes}
        best_flags = framework_settings("megatron", best_ctx)
        for flag, value in best_flags.items():
            default = flag.endswith("-parallel-size") and value == "1"  # Megatron-LM's own default
            if flag.startswith("--") and flag not in listed and not default and not megatron_flag_in(flag, files_text):
                changes.append({"argument": flag, "from": None, "to": value,
                                "note": "not in the launch files: Megatron-LM needs it for the best plan as priced"})
        changes = _megatron_lm_move(changes, best_flags, files_text, launch.command_args)
    if launch.rank_order != "tp-cp-ep-dp-pp":  # placement's emitters keep Megatron's default order
        if launch.framework == "deepspeed":
            changes.insert(0, {"argument": "topology axes", "from": "['data', 'pipe', ...]",
                               "to": "['pipe', 'data', ...]"})
        elif launch.bridge_keys and "dist.use_tp_pp_dp_mapping" in launch.bridge_keys:
            # in the Megatron-Bridge config's own field, as bridge_changes names the others (a QA run: a saved config
            # with dist.use_tp_pp_dp_mapping true was told `- --use-tp-pp-dp-mapping`, Megatron-LM's flag)
            changes.insert(0, {"argument": "dist.use_tp_pp_dp_mapping",
                               "from": launch.bridge_keys["dist.use_tp_pp_dp_mapping"], "to": "false"})
        else:
            changes.insert(0, {"argument": "--use-tp-pp-dp-mapping", "from": "true", "to": None})
    if launch.framework == "torchtitan" and best.recipe_spec().moe_dispatcher != plan.recipe_spec().moe_dispatcher:
        # the job's own backend key, which the best plan's files do not run (they write the all-to-all one)
        for key in ("parallelism.expert_parallel_comm_backend", "model.moe_comm_backend"):
            if key in launch.torchtitan_stated:
                value, how = launch.torchtitan_stated[key]
                changes.append({"argument": key if how == "toml" else how, "from": value,
                                "to": '"standard"' if how == "toml" else "standard",
                                "note": f"the best plan is priced with torchtitan's all-to-all dispatcher, the one "
                                        f"placement's torchtitan files run (placement/emit/common.py RECIPE_SUPPORT); "
                                        f"the job's {plan.recipe_spec().moe_dispatcher.value} is priced as launched"})
                break
    if dealt is not None and not np.array_equal(best_gpu, gpu_of_rank):
        # srun's dealing of the ranks over the nodes, which no host order or CUDA_VISIBLE_DEVICES of the list undoes
        if launch.task_dealer == "mpirun":
            changes.insert(0, {"argument": "mpirun --map-by", "from": "node", "to": f"ppr:{gph}:node",
                               "note": f"{dealt}: mpirun deals the ranks round robin over the nodes, so consecutive "
                                       f"ranks (a TP group's) run on different nodes; ppr:{gph}:node puts each node's "
                                       f"{gph} consecutive ranks on it (Open MPI mpirun(1) --map-by)"})
        else:
            changes.insert(0, {"argument": "srun --distribution", "from": launch.task_distribution, "to": "block",
                               "note": f"{dealt}: srun deals the ranks round robin over the nodes, so consecutive "
                                       f"ranks (a TP group's) run on different nodes; block, srun's default, puts "
                                       f"each node's {gph} consecutive ranks on it (srun(1) -m)"})
    if "host_order" in assumed:
        from placement.audit.changes import NODE_ORDER, NODE_ORDER_ASSUMED, NODE_ORDER_SLURM

        for c in changes:
            if c["argument"] == NODE_ORDER and c["from"] is not None:
                c["from_arg"] = f"{NODE_ORDER_SLURM if slurm else NODE_ORDER_ASSUMED} {c['from']}"
                c["assumed"] = True
    if no_better is not None:  # no plan searched, nothing to change to (a user trial read
        changes = []           # `+ --training.global_batch_size 8` under "the job as launched is the only plan priced")
    if best is not plan and plan.precision_as_run is not None and best.precision == plan.precision and not any(
            c["argument"] in PRECISION_ARGUMENTS for c in changes):
        # the changed launch keeps the job's FP16 (no change names its precision): the best plan runs it too, priced
        # as BF16 (a QA run: the page's best plan read "bf16" beside a diff that kept --fp16, the JSON null)
        best = best.model_copy(update={"precision_as_run": plan.precision_as_run})
    withheld = []
    if plan.fits and changes and best.step_time_s > plan.step_time_s * (1 - MIN_CHANGE_GAIN):
        # a user trial was offered ten changes, a move to Megatron-FSDP and a new checkpoint format among them, for
        # 4 ms of an 8.9 s step, memory within 0.3 GiB of the GPU's
        withheld, changes = changes, []
    return Audit(launch=launch, model=model, layout=layout, estimate=plan, findings=findings, best=best,
                 best_gpu_of_rank=best_gpu, speedup=speedup, changes=changes,
                 host_order=[topo.host_names[h] for h in order], assumed=assumed, no_better_plan=no_better,
                 changes_withheld=withheld)

