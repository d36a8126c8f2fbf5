"""What each framework version launches exactly as placement prices it: one table for plan --framework,
evaluate --framework and the audit's best plan.

A layout outside a framework's row would run as something else (the emitters say what, and price it); with
--framework the search never proposes it.  Sources: the emitters' module docstrings and warnings, which cite
each framework's code (torchtitan 0.3.0 ParallelDims and pipeline split, DeepSpeed 0.19.8 PipelineEngine and
PipeModelDataParallelTopology, MaxText 0.2.5 base.yml and layers/pipeline.py, megatron-core 0.19.2
validate_args).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from placement.cost.batch import LayoutBatch
from placement.errors import InputError
from placement.specs import AcceleratorSpec, ModelSpec
from placement.specs.recipe import CpCommType, EinsumDispatch, Fp8Recipe, GradAccumulation, Recipe
from placement.specs.training import AttentionKernel

DEEPSPEED_BUCKET_ELEMENTS = 50_000_000
"""ZeRO reduce/all-gather bucket, in elements (100 MB of bf16 gradients), that placement's ds_config.json writes
(emit.deepspeed).  The plan hides the gradient reduction behind backward (cost.constants.DP_OVERLAP_FRACTION), which
needs buckets that are small against a pipeline stage's gradients; DeepSpeed's default, 5e8 elements (1 GB), cuts a
70B model's rank under tp 8 x pp 8 (1.1e9 parameters) into only 2-3 buckets."""

PRECISION_ONLY = {"fp8_recipe": "fp8", "fp8_saves_16bit_inputs": "fp8", "fp8_lm_head": "fp8",
                  "fp8_recasts_weights": "fp8", "tp_gathers_16bit": "fp8"}
"""Recipe fields that price something at one precision only: a capability row for one holds for jobs at it."""


def row_applies(field: str, precision: str | None) -> bool:
    """A capability row for `field` prices a job at `precision` (None: not known, it holds)."""
    need = PRECISION_ONLY.get(field)
    return need is None or precision is None or str(precision) == need


@dataclass(frozen=True)
class Capability:
    """The layouts one framework version runs exactly as priced."""

    name: str
    version: str
    zero_stages: tuple[int, ...]
    """ZeRO stages it has (torchtitan: DDP, FSDP without resharding = ZeRO-2, FSDP = ZeRO-3; no ZeRO-1)."""
    zero_stages_with_pp: tuple[int, ...]
    """ZeRO stages it allows together with pipeline parallelism."""
    max_pp: int | None = None
    max_vpp: int | None = None
    max_cp: int | None = None
    max_ep: int | None = None
    etp: str = "any"
    """"one": expert TP 1 only; "tp": expert TP equal to TP; "tp_without_ep": expert TP equal to TP where ep is 1,
    else 1 (torchtitan 0.3.0); "any".  A dense model has no experts to shard (for_model: "any")."""
    ep_with_cp: bool = True
    cp_alone: bool = False
    """Context parallelism runs only without tensor and pipeline parallelism (Megatron-DeepSpeed's Ulysses)."""
    even_pipeline: bool = False
    """Every virtual stage holds as many layers (no first/last or explicit layout split)."""
    torchtitan_split: bool = False
    """The layers split over the pipeline ranks as placement's default split does only where torchtitan's
    layers-per-stage flags give that split (emit.torchtitan.stage_flags: layers_per_stage with first/last
    _stage_less_layers)."""
    hsdp: bool = True
    """ZeRO-3 may shard over part of the data-parallel group (HSDP)."""
    zero0_with_cp: bool = True
    """ZeRO-0 (nothing sharded) runs with context parallelism.  torchtitan: False, its FSDP shards over the
    dp_shard x cp ranks whenever cp > 1 (emit.torchtitan.fsdp_enabled: ParallelDims.fsdp_enabled)."""
    fp8_accumulation: str | None = None
    """Why the framework refuses FP8 beside gradient accumulation (MaxText), None where it runs both: its FP8 plans
    take one micro-batch a step (global batch = micro-batch x dp)."""
    sp_always: str = ""
    """Why tensor parallelism always runs with sequence parallelism (MaxText: no switch); "" where it is a choice."""
    zero0_1d_only: str = ""
    """Why ZeRO-0 (DDP, nothing sharded) runs only where data parallelism is the whole mesh (tp, cp and pp 1); ""
    where it runs beside them."""
    zero0_ep_in_tp_cp: str = ""
    """Why ZeRO-0 with expert parallelism needs ep x etp to divide tp x cp ("" where it does not): torchtitan's ZeRO-0
    is data_parallel_shard_degree 1, and its expert mesh borrows the dp_shard x cp x tp ranks."""
    zero_from_mesh: bool = False
    """The ZeRO stage follows the mesh (MaxText: placement.audit.maxtext.zero_as_run): its context and expert axes
    shard the weights as fsdp does, so with cp > 1 or ep > 1 only ZeRO-3; without them ZeRO-3 needs fsdp ranks
    (dp_shard > 1) and ZeRO-1 data ranks for shard_optimizer_over_data (dp > 1), or it runs ZeRO-0."""
    hsdp_no_fsdp: str = ""
    """Why ZeRO-3 over part of the data-parallel group (HSDP) runs as priced only where the expert ranks are the whole
    shard group (dp_shard = ep), "" where any shard group does: MaxText's HSDP shards the optimizer over the replicas
    (shard_optimizer_over_data, the optimizer_over_replicas row), which it refuses beside an fsdp axis."""
    seq_split: str = ""
    """Why the sequence must divide into tp x 2cp parts (the tp factor only under sequence parallelism, the 2cp only
    with cp > 1): torchtitan 0.3.0 trainer.py:306-315 raises at start-up otherwise; "" where the framework pads or
    splits unevenly."""
    seq_split_per_cp_rank: bool = False
    """The tp factor divides each CP rank's share (s / cp) rather than the whole: the sequence divides by 2cp and by
    cp x tp (Megatron-Core splits the sequence into 2cp chunks, then scatters a rank's share over TP)."""
    kv_heads_whole: str = ""
    """Why TP must divide the KV heads (each rank computes whole ones; "" where a rank may hold a replica of one, as
    Megatron-Core 0.19 does: transformer/attention.py num_query_groups < world_size)."""
    why: str = ""
    """One line on the limits, for messages."""
    recipe: tuple[tuple[str, object, str], ...] = ()
    """(recipe field, the value the framework always runs, why): set on every plan and audit for it."""
    recipe_choices: frozenset[str] = frozenset()
    """Fields of `recipe` whose row is the value placement's files write by default, not a limit of the framework:
    a flag (or a recipe file) may ask for the other value, which the files then write (MaxText: optimizer_over_replicas
    off is an HSDP file without shard_optimizer_over_data, as it runs beside fsdp ranks anyway)."""
    several_hosts_recipe: tuple[tuple[str, object, str], ...] = ()
    """What the framework's own launcher runs on more than one host where a job's launch files leave it to it (the
    audit's default); placement's files state it themselves, so plans do not take it."""
    sequential_layers: str = ""
    """Why its own model code runs attention, then the MLP, whatever the model's `parallel_residual` says; "" where
    the model code is the user's (DeepSpeed: GPT-NeoX's own layers on DeeperSpeed run the parallel residual)."""
    moe_recipe: tuple[tuple[str, object, str], ...] = ()
    """Rows of `recipe` that hold for a model with MoE layers only (the framework's own MoE layer)."""
    moe_zero_stages: tuple[int, ...] | None = None
    """ZeRO stages it runs with MoE layers, where fewer than `zero_stages` (None: the same); `for_model` applies it."""
    moe_why: str = ""
    tied_pipeline: str = ""
    """Why a model with tied input and output embeddings runs without pipeline parallelism ("" where it runs one):
    torchtitan 0.3.0's decoder refuses weight tying beside a pipeline at start-up; `for_model` applies it."""
    no_pipeline: str = ""
    """Why this model runs pp 1 only (set by `for_model` from `tied_pipeline`)."""
    config_no_cp: tuple[tuple[str, str], ...] = ()
    """(config the files name, why): configs whose files do not start with context parallelism (MaxText's
    gpt-oss-120b: its attention sinks need cuDNN's attention, which refuses base.yml's all-gather context
    parallelism); `for_model` applies it to `no_cp`."""
    no_cp: str = ""
    """Why this model's files run cp 1 only (set by `for_model` from `config_no_cp`)."""

    def for_model(self, is_moe: bool, tied: bool = False, config: str | None = None) -> Capability:
        """The capability for a dense or an MoE model (an MoE model may have fewer ZeRO stages: `moe_zero_stages`),
        with tied embeddings or not (`tied_pipeline`), whose files name `config` (`config_no_cp`: run_config)."""
        why = dict(self.config_no_cp).get(config or "")
        if why:
            return dataclasses.replace(self, config_no_cp=(), no_cp=why).for_model(is_moe, tied)
        if tied and self.tied_pipeline:
            return dataclasses.replace(self, tied_pipeline="", no_pipeline=self.tied_pipeline).for_model(is_moe)
        if not is_moe:  # no experts: expert TP is no setting (the search keeps etp 1)
            return self if self.etp == "any" else dataclasses.replace(self, etp="any")
        if self.moe_zero_stages is None:
            return self
        keep = self.moe_zero_stages
        return dataclasses.replace(self, zero_stages=tuple(z for z in self.zero_stages if z in keep),
                                   zero_stages_with_pp=tuple(z for z in self.zero_stages_with_pp if z in keep),
                                   why=f"{self.why}; with MoE layers {self.moe_why}")

    def recipe_rows(self, several_hosts: bool, precision: str | None = None,
                    is_moe: bool = True) -> tuple[tuple[str, object, str], ...]:
        """(field, value, why) a job's launch runs where its files leave it to the framework, on one host or on
        several, at `precision` (None: every row), for a model with MoE layers or without."""
        rows = self.recipe + (self.moe_recipe if is_moe else ()) + (self.several_hosts_recipe if several_hosts else ())
        return tuple(row for row in rows if row_applies(row[0], precision))

    def layout_mask(self, b: LayoutBatch, num_layers: int, kv_heads: int | None = None,
                    seq_len: int | None = None) -> np.ndarray:
        """Which layouts of `b` (ZeRO aside) the framework runs as priced (`kv_heads`: the model's; `seq_len`: the
        job's)."""
        ok = np.ones(len(b), dtype=bool)
        if self.kv_heads_whole and kv_heads:
            ok &= kv_heads % b.tp == 0
        if self.seq_split and seq_len:
            ok &= seq_len % _seq_divisor(b, self.seq_split_per_cp_rank) == 0
        for limit, col in ((self.max_pp, b.pp), (self.max_vpp, b.vpp), (self.max_cp, b.cp), (self.max_ep, b.ep)):
            if limit is not None:
                ok &= col <= limit
        if self.no_pipeline:
            ok &= b.pp == 1
        if self.no_cp:
            ok &= b.cp == 1
        if self.sp_always:
            ok &= (b.tp == 1) | np.asarray(b.sp, dtype=bool)
        if self.etp == "one":
            ok &= b.etp == 1
        elif self.etp == "tp":  # also at ep 1: MaxText shards every expert over 'tensor' (base.yml mlp_moe)
            ok &= b.etp == b.tp
        elif self.etp == "tp_without_ep":
            ok &= b.etp == np.where(b.ep == 1, b.tp, 1)
        if not self.ep_with_cp:
            ok &= (b.ep == 1) | (b.cp == 1)
        if self.cp_alone:
            ok &= (b.cp == 1) | ((b.tp == 1) & (b.pp == 1))
        if self.even_pipeline:
            ok &= num_layers % (b.pp * b.vpp) == 0
        if self.torchtitan_split:
            ok &= _torchtitan_splits(b, num_layers)
        return ok

    def precision_mask(self, b: LayoutBatch, precision: str, global_batch: int) -> np.ndarray:
        """Which layouts of `b` the framework runs at `precision` with `global_batch` (FP8 without gradient
        accumulation where `fp8_accumulation` says so)."""
        ok = np.ones(len(b), dtype=bool)
        if self.fp8_accumulation and str(precision) == "fp8":
            ok &= (b.pp > 1) | (b.mbs * b.dp >= global_batch)  # a pipeline's micro-batches are not accumulation
        return ok

    def check_precision_layout(self, b: LayoutBatch, precision: str, global_batch: int) -> None:
        """InputError naming the rule when the one layout in `b` is not one the framework runs at `precision`."""
        if not self.precision_mask(b, precision, global_batch).all():
            mbs, dp = int(np.asarray(b.mbs)[0]), int(np.asarray(b.dp)[0])
            raise InputError(f"--framework {self.name}: {self.version} does not run this layout as placement prices "
                             f"it (FP8 with {global_batch // (mbs * dp)} micro-batches of {mbs} per data-parallel "
                             f"rank: {self.fp8_accumulation}); give --mbs {global_batch // dp} for one micro-batch a "
                             f"step, or drop --framework to price it as given")

    def sharding_mask(self, b: LayoutBatch) -> np.ndarray:
        """Which ZeRO stage and shard group of each layout of `b` the framework runs."""
        ok = np.isin(b.zero, self.zero_stages)
        ok &= (b.pp == 1) | np.isin(b.zero, self.zero_stages_with_pp)
        if not self.hsdp:
            ok &= (b.zero != 3) | (b.dp_shard == b.dp)
        if self.hsdp_no_fsdp:
            ok &= (b.zero != 3) | (b.dp_shard == b.dp) | (b.dp_shard == b.ep)
        if not self.zero0_with_cp:
            ok &= (b.zero != 0) | (b.cp == 1)
        if self.zero0_1d_only:
            ok &= (b.zero != 0) | ((b.tp == 1) & (b.cp == 1) & (b.pp == 1))
        if self.zero0_ep_in_tp_cp:
            ok &= (b.zero != 0) | ((b.tp * b.cp) % (b.ep * b.etp) == 0)
        if self.zero_from_mesh:
            ok &= np.where((b.cp > 1) | (b.ep > 1), b.zero == 3,
                           ((b.zero != 3) | (b.dp_shard > 1)) & ((b.zero != 1) | (b.dp > 1)))
        return ok

    def check(self, b: LayoutBatch, num_layers: int, kv_heads: int | None = None, seq_len: int | None = None) -> None:
        """InputError naming the rule when the one layout in `b` is not one the framework runs."""
        if not (self.layout_mask(b, num_layers, kv_heads, seq_len) & self.sharding_mask(b)).all():
            broken = "; ".join(self.broken_rules(b, num_layers, kv_heads, seq_len)) or self.why
            raise InputError(f"--framework {self.name}: {self.version} does not run this layout as placement "
                             f"prices it ({broken}); change the layout, or drop --framework to price it as given")

    def broken_rules(self, b: LayoutBatch, num_layers: int, kv_heads: int | None = None,
                     seq_len: int | None = None) -> list[str]:
        """What of the first layout of `b` the framework does not run, each rule with the layout's value."""
        pp, vpp, cp, ep, etp, tp = (int(np.asarray(c)[0]) for c in (b.pp, b.vpp, b.cp, b.ep, b.etp, b.tp))
        zero, dp, shard = int(np.asarray(b.zero)[0]), int(np.asarray(b.dp)[0]), int(np.asarray(b.dp_shard)[0])
        out = []
        divisor = int(_seq_divisor(b, self.seq_split_per_cp_rank)[0])
        if self.seq_split and seq_len and seq_len % divisor:
            out.append(f"sequence {seq_len} with tp {tp}{' (sequence parallel)' if bool(np.asarray(b.sp)[0]) else ''}"
                       f" and cp {cp}: {self.seq_split} ({divisor} here; try --seq-len "
                       f"{seq_len // divisor * divisor or divisor})")
        if self.kv_heads_whole and kv_heads and kv_heads % tp:
            out.append(f"tp {tp} with {kv_heads} KV heads: {self.kv_heads_whole}")
        if zero not in self.zero_stages:
            out.append(f"ZeRO-{zero}: it has ZeRO stages {', '.join(map(str, self.zero_stages))}")
        elif pp > 1 and zero not in self.zero_stages_with_pp:
            out.append(f"ZeRO-{zero} with pp {pp}: with pipeline parallelism it has ZeRO stages "
                       f"{', '.join(map(str, self.zero_stages_with_pp))}")
        if not self.hsdp and zero == 3 and shard != dp:
            out.append(f"HSDP (ZeRO-3 over {shard} of dp {dp}): it shards over the whole data-parallel group")
        if self.hsdp_no_fsdp and zero == 3 and shard not in (dp, ep):
            fix = f"--dp-shard {dp}" + (f", or --dp-shard {ep} beside --ep {ep}" if ep > 1 else "")
            out.append(f"HSDP (ZeRO-3 over {shard} of dp {dp}{f', ep {ep}' if ep > 1 else ''}): {self.hsdp_no_fsdp} "
                       f"({fix})")
        if not self.zero0_with_cp and zero == 0 and cp > 1:
            out.append(f"ZeRO-0 with cp {cp}: its FSDP shards over the dp_shard x cp ranks whenever cp > 1")
        if self.zero0_1d_only and zero == 0 and tp * cp * pp > 1:
            out.append(f"ZeRO-0 with tp {tp}, cp {cp}, pp {pp}: {self.zero0_1d_only}")
        if self.zero0_ep_in_tp_cp and zero == 0 and (tp * cp) % (ep * etp):
            out.append(f"ZeRO-0 with ep {ep} over tp {tp} x cp {cp}: {self.zero0_ep_in_tp_cp}")
        if self.zero_from_mesh:
            if cp > 1 and zero != 3:
                out.append(f"ZeRO-{zero} with cp {cp}: its context axis shards the weights, gradients and optimizer "
                           f"state, so it runs ZeRO-3 over the context ranks")
            elif ep > 1 and zero != 3:
                out.append(f"ZeRO-{zero} with ep {ep}: its expert axis shards the other weights' embed dimension too "
                           f"(configs/base.yml:605), with their gradients and optimizer state, so it runs ZeRO-3 over "
                           f"the expert ranks")
            elif cp == 1 and ep == 1 and zero == 3 and shard <= 1:
                out.append(f"ZeRO-3 over dp_shard {shard}: no fsdp ranks, so it runs ZeRO-0")
            elif cp == 1 and ep == 1 and zero == 1 and dp <= 1:
                out.append(f"ZeRO-1 with dp {dp}: no data ranks for shard_optimizer_over_data, so it runs ZeRO-0")
        for name, value, limit in (("pp", pp, self.max_pp), ("vpp", vpp, self.max_vpp), ("cp", cp, self.max_cp),
                                   ("ep", ep, self.max_ep)):
            if limit is not None and value > limit:
                out.append(f"{name} {value}: at most {limit}")
        if self.no_pipeline and pp > 1:
            out.append(f"pp {pp} for a model with tied embeddings: {self.no_pipeline} (--pp 1)")
        if self.no_cp and cp > 1:
            out.append(f"cp {cp}: {self.no_cp} (--cp 1)")
        if self.sp_always and tp > 1 and not bool(np.asarray(b.sp)[0]):
            out.append(f"tp {tp} without sequence parallelism: {self.sp_always}")
        if self.etp == "one" and etp != 1:
            out.append(f"expert TP {etp}: it runs expert TP 1")
        elif self.etp == "tp" and etp != tp:
            out.append(f"expert TP {etp}: it runs expert TP equal to TP ({tp}), also at ep 1 (--etp {tp})")
        elif self.etp == "tp_without_ep" and etp != (tp if ep == 1 else 1):
            out.append(f"expert TP {etp} at ep {ep}: it runs expert TP equal to TP ({tp}) at ep 1 and 1 beside "
                       f"expert parallelism (--etp {tp if ep == 1 else 1})")
        if not self.ep_with_cp and ep > 1 and cp > 1:
            out.append(f"ep {ep} with cp {cp}: no expert parallelism across context parallelism")
        if self.cp_alone and cp > 1 and (tp > 1 or pp > 1):
            out.append(f"cp {cp} with tp {tp}, pp {pp}: its context parallelism runs without tensor and pipeline "
                       f"parallelism")
        if self.even_pipeline and num_layers % (pp * vpp):
            out.append(f"{num_layers} layers over pp {pp} x vpp {vpp}: its stages hold equal layers")
        if self.torchtitan_split and not _torchtitan_splits(b, num_layers)[0]:
            out.append(f"{num_layers} layers over pp {pp} x vpp {vpp}: no pipeline_parallel_layers_per_stage and "
                       f"first/last_stage_less_layers give placement's split")
        return out


MAXTEXT_SP = ("MaxText's tensor axis also shards the activations between layers (configs/base.yml logical_axis_rules "
              "activation_embed -> tensor), with no switch: its tensor parallelism runs as sequence parallelism")
MAXTEXT_HSDP = ("MaxText 0.2.5 shards an HSDP job's optimizer over the replicas only through "
                "shard_optimizer_over_data, which it refuses beside an fsdp axis at start-up (the 0.2.5 wheel's "
                "configs/types.py:5605-5621, set_derived_and_validate_values: \"`shard_optimizer_over_data` (Zero-1) "
                "cannot be combined with FSDP\"), so its HSDP runs so only where the expert axis is the whole shard "
                "group (fsdp 1)")
MAXTEXT_SINKS_CP = ("model_name gpt-oss-120b trains attention sinks, which MaxText 0.2.5 on GPUs runs only under "
                    "attention: cudnn_flash_te (layers/attention_op.py:153-157), and that attention refuses context "
                    "parallelism over packed sequences unless context_parallel_strategy is a load-balanced \"ring\" "
                    "(layers/attention_op.py:2693-2695), where placement's files keep base.yml's \"all_gather\": its "
                    "files with cp above 1 do not start")
TORCHTITAN_TIED_PIPELINE = ("torchtitan 0.3.0's decoder raises NotImplementedError(\"Weight tying is not supported "
                            "with Pipeline Parallel.\") at start-up (models/common/decoder.py:139-142, Decoder.Config."
                            "update_from_config), as its qwen3_0_6b and qwen3_1_7b configs tie them "
                            "(enable_weight_tying=True, models/qwen3/__init__.py:262, :300)")
TORCHTITAN_DDP_1D = ("torchtitan up to 0.2.2 runs DDP (data_parallel_replicate_degree alone, no FSDP) only on a 1-D "
                     "mesh: v0.2.2 models/llama3/infra/parallelize.py:148-151 raises \"DDP has not supported > 1D "
                     "parallelism\"")


def torchtitan_before_030(cap: Capability, float8_moe: bool = False) -> Capability:
    """torchtitan's capability for a job launched with a torchtitan before 0.3.0 (a TOML or flags of its JobConfig):
    its best plan is written in that torchtitan's keys, so it keeps to what that torchtitan starts; `float8_moe`: its
    model.converters keep the Float8 grouped-GEMM converter, which asserts pp 1 and cp 1 (v0.2.2
    components/quantization/float8.py:193-198)."""
    why = f"{cap.why}; before 0.3.0, no DDP beside tp, cp or pp"
    if float8_moe:
        return dataclasses.replace(cap, zero0_1d_only=TORCHTITAN_DDP_1D, max_pp=1, max_cp=1,
                                   why=f"{why}; with the Float8 MoE converter, pp 1 and cp 1")
    return dataclasses.replace(cap, zero0_1d_only=TORCHTITAN_DDP_1D, why=why)


def seq_divisor(tp, cp, sp, per_cp_rank: bool = False):
    """What the sequence must divide into (numbers or arrays): tp under sequence parallelism `sp`, times 2cp where
    cp > 1; with `per_cp_rank`, the least common multiple of 2cp (cp > 1) and cp x tp (under sequence parallelism).
    The emitters' does-not-start lines use it as the search's `seq_split` rule does."""
    tp = np.where(np.asarray(sp, dtype=bool), tp, 1)
    chunks = np.where(np.asarray(cp) > 1, 2 * np.asarray(cp), 1)
    return np.lcm(chunks, np.asarray(cp) * tp) if per_cp_rank else tp * chunks


def _seq_divisor(b: LayoutBatch, per_cp_rank: bool = False) -> np.ndarray:
    """seq_divisor of each layout of `b`."""
    return seq_divisor(b.tp, b.cp, b.sp, per_cp_rank)


def _torchtitan_splits(b: LayoutBatch, num_layers: int) -> np.ndarray:
    """Which layouts of `b` torchtitan 0.3.0 splits as placement prices them: placement's default layers per PP
    rank (cost.pipeline.rank_layer_counts) in pp x vpp virtual stages are what its layers-per-stage flags give
    (emit.torchtitan.stage_flags; Llama 3 405B's 126 layers over 8 stages: 15/16/.../16/15, its own defaults
    first/last_stage_less_layers 1)."""
    from placement.cost.pipeline import rank_layer_counts
    from placement.emit.torchtitan import stage_flags

    ok = np.ones(len(b), dtype=bool)
    for pp, vpp in sorted(set(zip(np.asarray(b.pp).tolist(), np.asarray(b.vpp).tolist(), strict=True))):
        if pp == 1:
            continue
        try:
            want = rank_layer_counts(num_layers, pp, vpp)
            _, split, per_rank = stage_flags(num_layers, pp, vpp, want)
        except ValueError:  # no default split (the search marks it invalid) or no torchtitan flags give it
            fits = False
        else:
            fits = per_rank == want and len(split) == pp * vpp
        if not fits:
            ok &= ~((np.asarray(b.pp) == pp) & (np.asarray(b.vpp) == vpp))
    return ok


CAPABILITIES: dict[str, Capability] = {
    "megatron": Capability(
        "megatron", "megatron-core 0.19.2", zero_stages=(0, 1, 2, 3), zero_stages_with_pp=(0, 1, 2, 3), hsdp=False,
        why="Megatron-FSDP shards over the whole data-parallel group: no HSDP",
        seq_split="Megatron-Core asserts it at the first forward: the sequence splits into 2cp chunks "
                  "(get_batch_on_this_cp_rank) and, under sequence parallelism, a CP rank's share is scattered over "
                  "TP ('First dimension of the tensor should be divisible by tensor parallel size', "
                  "tensor_parallel/mappings.py, since c2ea914f7d of 2022-09-23)",
        seq_split_per_cp_rank=True,
        sequential_layers="Megatron-Core 0.19.2's TransformerLayer runs the MLP on the residual the attention "
                          "output was added to (transformer/transformer_layer.py)",
        recipe=(("grad_buffer_passes", 4,
                 "Megatron-LM's command line, which these files write, checks each gradient bucket's norm for NaN "
                 "before reducing it (check_for_nan_in_grad from --check-for-nan-in-loss-and-grad, on by default: "
                 "core_v0.19.0 training.py:1989, param_and_grad_buffer.py check_grads), as Megatron-Bridge's "
                 "library recipes do (recipes/common.py check_for_nan_in_grad=True), besides zeroing the gradient "
                 "buffer each step and scaling it by 1/dp (:1615, :660-661)"),),
        recipe_choices=frozenset({"grad_buffer_passes"})),
    "torchtitan": Capability(
        "torchtitan", "torchtitan 0.3.0", zero_stages=(0, 2, 3), zero_stages_with_pp=(0, 2, 3), etp="tp_without_ep",
        torchtitan_split=True, zero0_with_cp=False, tied_pipeline=TORCHTITAN_TIED_PIPELINE,
        zero0_ep_in_tp_cp=("its ZeRO-0 is data_parallel_shard_degree 1, and its expert mesh takes ep of the "
                           "dp_shard x cp x tp ranks (efsdp = dp_shard x cp x tp // ep, distributed/parallel_dims.py:"
                           "278-279), which DeviceMesh's unflatten refuses at start-up unless ep divides them "
                           "(parallel_dims.py:336; config/configs.py:283-286); ZeRO-2 or ZeRO-3 shards over dp and "
                           "gives the experts those ranks"),
        seq_split="torchtitan 0.3.0 raises at start-up unless the sequence divides by tp (under sequence "
                  "parallelism) x 2cp (trainer.py:306-315)",
        kv_heads_whole=("its tensor_parallel_degree must divide n_kv_heads (update_from_config raises it since "
                        "pytorch/torchtitan#2577, 2026-03-15; before, ColwiseParallel wk/wv left a rank a fraction of "
                        "a KV head and the forward's reshape failed, #2574)"),
        why="no ZeRO-1, no ZeRO-0 with cp > 1 (FSDP shards over the CP ranks) or with ep wider than tp x cp, expert "
            "TP equal to TP at ep 1 (its experts take the dense TP axis, models/common/moe_sharding.py:50-56, "
            ":212-219) and 1 beside expert parallelism; pipeline splits "
            "its pipeline_parallel_layers_per_stage and first/last_stage_less_layers can give",
        sequential_layers="torchtitan 0.3.0's TransformerBlock runs the feed-forward on the residual the attention "
                          "output was added to (models/*/model.py)",
        recipe=(("grad_buffer_passes", 0,
                 "torchtitan 0.3.0 keeps no Megatron-Core gradient buffer to zero, scale and NaN-check: torch's "
                 "optimizer.zero_grad() frees the gradients (set_to_none) and FSDP2 folds the 1/dp into its "
                 "reduce-scatter (its own per-step gradient copies are not priced)"),
                ("grad_reduce_fp32", True, "torchtitan 0.3.0 reduces gradients in float32: FSDP2's reduce_dtype is "
                                           "training.mixed_precision_reduce, whose only value is float32 "
                                           "(config/configs.py), and a job without FSDP is wrapped in it too, with "
                                           "a shard degree of 1, to install that policy "
                                           "(models/llama3/parallelize.py apply_fsdp_to_decoder)"),
                ("fp8_recipe", Fp8Recipe.ROWWISE, "torchtitan 0.3.0's Float8 converters scale row-wise: "
                                                  "Float8LinearConverter's recipe_name is rowwise by default and "
                                                  "has no tensorwise (components/quantization/float8.py:58), "
                                                  "Float8GroupedExpertsConverter runs rowwise scaled grouped GEMMs "
                                                  "(float8.py:257-260), and no flag reaches either (model_spec is "
                                                  "suppressed from the CLI, trainer.py:75-77)"),
                ("attention_kernel", AttentionKernel.FLASH2,
                 "torchtitan 0.3.0's Llama 3, Qwen3 and DeepSeek-V3 configs run FlexAttention (model_registry's "
                 "attn_backend 'flex'), a Triton kernel of FlashAttention-2's class (about 90 % of its forward and "
                 "85 % of its backward, PyTorch blog 'FlexAttention', 2024), and GPT-OSS's run PyTorch's varlen "
                 "attention (attn_backend 'varlen'): priced as FlashAttention-2"),
                ("fp8_saves_16bit_inputs", True,
                 "torchtitan 0.3.0's Float8 converters run torchao's Float8Linear, which saves the 16-bit input for "
                 "backward (save_for_backward(input_hp, weight_hp_t)): its own benchmark measures 76.8 GiB with "
                 "Float8 against 77.0 in BF16 (benchmarks/llama3_h100_202412_torchtitan.md Table 1)"),
                ("fp8_recasts_weights", True,
                 "torchtitan 0.3.0's Float8 and MXFP8 converters run torchao's Float8Linear and MXFP8Linear, whose "
                 "autograd function casts the 16-bit weight to FP8 in each forward and again for the input gradient "
                 "in each backward (torchao float8/float8_linear.py; prototype/moe_training/mxfp8_linear.py), every "
                 "micro-batch, keeping no FP8 copy; 0.3.0's rowwise recipe has no FSDP float8 all-gather"),
                ("fp8_lm_head", False,
                 "torchtitan 0.3.0's Float8 configs leave the LM head in BF16: llama3_405b's Float8LinearConverter "
                 "skips lm_head (filter_fqns, models/llama3/config_registry.py:304), deepseek_v3_671b_float8's "
                 "lm_head and the router gate (models/deepseek_v3/config_registry.py:259)"),
                ("tp_gathers_16bit", True,
                 "torchtitan 0.3.0's Float8 recipes are row-wise only (components/quantization/float8.py:58), under "
                 "which its tensor parallelism is plain ColwiseParallel and RowwiseParallel: the all-gathers move "
                 "the 16-bit activations and gradients, the FP8 cast comes after them (torchtitan kept "
                 "Float8ColwiseParallel's FP8 all-gather for tensor-wise scaling alone, v0.2.2 "
                 "models/llama3/infra/parallelize.py:83-86, and 0.3.0 has no tensor-wise recipe)"),
                ("sp_saves_gathered_inputs", True,
                 "torchtitan 0.3.0 redistributes each block's attention and feed-forward input to Replicate before "
                 "the projections (models/common/decoder_sharding.py in_dst_shardings), and autograd keeps that "
                 "gathered, whole-sequence tensor for the weight gradients"),
                ("tp_async_backward", False,
                 "torchtitan 0.3.0's tensor parallelism is DTensor's (ColwiseParallel, RowwiseParallel): a "
                 "column-parallel input gradient is reduced when autograd reaches its redistribution, after the "
                 "matmul's backward has computed both of its gradients, so no GEMM runs beside it (async TP, "
                 "compile.enable_async_tensor_parallel, is the tp_comm_overlap choice)"),
                ("cp_comm_type", CpCommType.ALL_GATHER,
                 "torchtitan 0.3.0's context parallelism under FlexAttention, which its Llama 3, Qwen3 and "
                 "DeepSeek-V3 configs run, all-gathers K and V before the attention (distributed/context_parallel/"
                 "api.py apply_cp_to_forward: flex_cp_allgather), exposed, as Llama 3's own run"),
                ("loss_chunks", 8,
                 "torchtitan 0.3.0's Llama 3, Qwen3, DeepSeek-V3 and GPT-OSS configs compute the loss in "
                 "ChunkedLossWrapper (components/loss.py, num_chunks 8): the LM head and cross-entropy run on an "
                 "eighth of the sequence at a time, each chunk's backward before the next"),
                ("loss_eager_float32", True,
                 "torchtitan 0.3.0 computes each chunk's loss with PyTorch's cross-entropy on a float32 copy of the "
                 "logits (components/loss.py cross_entropy_loss), eagerly unless compile.enable with \"loss\" in "
                 "compile.components (BaseLoss._maybe_compile; compile.enable is false by default, config/"
                 "configs.py:292, and llama3_8b, llama3_70b, Qwen3 and GPT-OSS leave it): log_softmax's backward "
                 "holds three float32 copies of the chunk's logits"),
                ("reshard_after_backward", True,
                 "torchtitan 0.3.0's ZeRO-2 (fsdp_reshard_after_forward never) is FSDP2, which reshards the weights "
                 "after every backward (FSDPParamGroup.post_backward), and its step runs each accumulation "
                 "micro-batch's forward and backward in turn (trainer.py:905-907): every micro-batch gathers the "
                 "weights again"),
                ("pp_comm_overlap", False,
                 "torchtitan 0.3.0's interleaved schedules are torch.distributed.pipelining's, which wait on a chunk's "
                 "receive right before it computes (schedules.py _wait_batch_p2p): priced with the transfers exposed, "
                 "not as Megatron's overlap_p2p_comm"),
                ("pipeline_unsharded_grads", True,
                 "torchtitan 0.3.0 pipelines run torch.distributed.pipelining's PipelineStage, which turns FSDP2's "
                 "gradient sync and reshard-after-backward off for every backward but the last (stage.py "
                 "backward_maybe_with_nosync): each stage keeps its unsharded float32 gradient through the step and "
                 "reduce-scatters it after its last backward"),
                ("zero0_as_fsdp", True,
                 "torchtitan 0.3.0 applies FSDP2 whatever the shard degree (models/llama3/parallelize.py:69-89: "
                 "\"with shard_degree=1 it is a no-op for the all-gather but still installs the "
                 "MixedPrecisionPolicy\"), so its ZeRO-0 (data_parallel_shard_degree 1) is FSDP2 over one-rank "
                 "shards with the data-parallel ranks as HSDP replicas: float32 master weights cast to 16 bits when "
                 "unsharded, float32 gradients all-reduced over the replicas, accumulated unsharded under a pipeline"),
                ("dp_reduce_every_microbatch", True,
                 "torchtitan 0.3.0's step runs each accumulation micro-batch's forward and backward in turn "
                 "(trainer.py:905-930) without turning FSDP2's gradient sync off, so HSDP all-reduces over the "
                 "replicas in every micro-batch's backward (FSDPParamGroup.post_backward; pytorch/torchtitan#1929, "
                 "which #4505 fixed after 0.3.0)"))),
    "deepspeed": Capability(
        "deepspeed", "DeepSpeed 0.19.8", zero_stages=(1, 2, 3), zero_stages_with_pp=(1,), max_vpp=1, max_cp=1,
        max_ep=1, etp="one", even_pipeline=True, hsdp=False, moe_zero_stages=(1, 2),
        moe_why="no ZeRO-3 with its native MoE layers (runtime/engine.py: \"Native DeepSpeed MoE is not supported "
                "with ZeRO Stage 3. Use AutoEP ...\"; AutoEP, its JSON's `expert_parallel` section, which runs "
                "with ZeRO-3, placement neither writes nor prices)",
        why="no interleaving, no ring context parallelism, no HSDP, its own expert groups (placement plans "
            "ep 1), stages of equal layers, ZeRO-1 only with pipeline parallelism (PipelineEngine), and "
            "ZeRO-0's all-reduce does not overlap backward",
        recipe=(("grad_buffer_passes", 0,
                 "DeepSpeed 0.19.8's ZeRO optimizer keeps no Megatron-Core gradient buffer: its zero_grad frees the "
                 "gradients (set_to_none, runtime/zero/stage_1_and_2.py zero_grad) and it divides each reduction "
                 "bucket by dp (average_tensor; its own per-step gradient copies are not priced)"),
                ("pipeline_p2p_blocking", True, "DeepSpeed 0.19.8's PipelineEngine sends and receives between "
                                                "stages one blocking call after another (runtime/pipe/schedule.py "
                                                "TrainSchedule, runtime/pipe/p2p.py)"),
                ("pipeline_p2p_scatter", True, "DeepSpeed 0.19.8's PipelineEngine sends each TP rank's 1/tp share "
                                               "of an activation or gradient and all-gathers it on arrival "
                                               "(runtime/pipe/engine.py PartitionedTensor, pipe_partitioned and "
                                               "grad_partitioned true by default)"),
                ("grad_accumulation", GradAccumulation.AUTOGRAD,
                 "DeepSpeed 0.19.8's ZeRO optimizer lets autograd accumulate each micro-batch's gradients in "
                 ".grad (its BF16_Optimizer, with ZeRO stage 0, is not what these files configure)"),
                ("param_gather_overlap", False,
                 "DeepSpeed 0.19.8's ZeRO-1/2 optimizer all-gathers the updated weights inside step(), a blocking "
                 "all_gather_into_tensor before the next forward (runtime/zero/stage_1_and_2.py step -> "
                 "all_gather_dp_groups, runtime/utils.py)"),
                ("ddp_bucket_params", DEEPSPEED_BUCKET_ELEMENTS,
                 f"the ds_config.json placement writes sets zero_optimization.reduce_bucket_size "
                 f"{DEEPSPEED_BUCKET_ELEMENTS:,} (emit.deepspeed), the elements its ZeRO optimizer reduces at a time "
                 f"(runtime/zero/stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads)")),
        moe_recipe=(("moe_einsum_dispatch", EinsumDispatch.MICRO_BATCH,
                     "DeepSpeed 0.19.8's MoE layer dispatches and combines each micro-batch's tokens by one-hot mask "
                     "GEMMs (deepspeed/moe/sharded_moe.py MOELayer: einsum(\"sec,sm->ecm\"), einsum(\"sec,ecm->sm\"), "
                     "each a torch.matmul)"),),
        several_hosts_recipe=(("cpu_affinity", False, "DeepSpeed 0.19.8's pdsh runner, the deepspeed launcher's "
                                                      "default for several hosts, does not pass --bind_cores_to_rank "
                                                      "on (launcher/multinode_runner.py PDSHRunner): the ranks run "
                                                      "unbound"),)),
    "maxtext": Capability(
        "maxtext", "MaxText 0.2.5", zero_stages=(0, 1, 3), zero_stages_with_pp=(0, 1, 3), max_pp=1, etp="tp",
        ep_with_cp=False, zero_from_mesh=True, sp_always=MAXTEXT_SP,
        config_no_cp=(("gpt-oss-120b", MAXTEXT_SINKS_CP),),
        moe_recipe=(("expert_w1_rerun", False,
                     "placement's MaxText files keep the routed experts' second up-projection wherever their remat "
                     "policy keeps mlpwi_1: remat_policy custom with moe_mlpwi_1 'device', since MaxText 0.2.5's "
                     "sparse_matmul path names that output moe_mlpwi_1 only (layers/moe.py:2916, :2942)"),),
        fp8_accumulation="MaxText refuses FP8 with gradient accumulation (configs/types.py: \"FP8 quantization is "
                         "not compatible with gradient accumulation.\"; AI-Hypercomputer/maxtext e591f30cb)",
        why="no ZeRO-2, ZeRO-3 with CP (its context axis shards the weights), expert TP equal to TP, EP not across "
            "CP, and its pipeline runs every forward before the backward (not the 1F1B placement prices): pp 1",
        sequential_layers="MaxText 0.2.5's decoder layers run the MLP on the residual the attention output was "
                          "added to (layers/llama2.py, layers/gpt3.py)",
        recipe=(("grad_buffer_passes", 0, "MaxText 0.2.5's gradients are values of its compiled step, which XLA "
                                          "fuses: no Megatron-Core gradient buffer zeroed, scaled or NaN-checked"),
                ("grad_reduce_fp32", True, "MaxText 0.2.5 keeps fp32 weights and gradients (configs/base.yml "
                                           "weight_dtype and grad_dtype float32): its data-parallel reduction "
                                           "moves fp32"),
                ("attention_kernel", AttentionKernel.FLASH2,
                 "MaxText 0.2.5's default attention 'autoselected' (configs/base.yml:486) runs on GPUs tokamax's "
                 "PallasTritonFlashAttention (layers/attention_op.py:1679-1740), a Triton kernel: priced as "
                 "FlashAttention-2, as torchtitan's FlexAttention is (attention: cudnn_flash_te runs cuDNN's)"),
                ("cp_comm_type", CpCommType.ALL_GATHER,
                 "MaxText 0.2.5's context parallelism gathers the whole K/V before attention: configs/base.yml:1349 "
                 "context_parallel_strategy \"all_gather\", its default, which placement's files leave (its ring, "
                 "\"ring\", runs only under attention: cudnn_flash_te, layers/attention_op.py)"),
                ("fp8_recipe", Fp8Recipe.TENSORWISE,
                 "MaxText 0.2.5's quantization \"fp8\", which placement's files write, is Flax's "
                 "Fp8DirectDotGeneralOp, one scale per tensor (layers/quantizations.py Fp8Quantization, "
                 "get_quant_mode; AI-Hypercomputer/maxtext e591f30cb): its block-scaled FP8 (te_mxfp8) is Transformer "
                 "Engine's, which the files do not write"),
                ("tp_gathers_16bit", True,
                 "MaxText 0.2.5's FP8 quantises inside each dot_general (Flax's Fp8DirectDotGeneralOp), after the "
                 "gathers XLA's SPMD partitioner puts ahead of the dot on the tensor axis: priced at 16 bits an "
                 "element (XLA's CollectiveQuantizer pass can move a cast ahead of an all-gather; placement does "
                 "not assume it fires)"),
                ("ddp_bucket_params", 1,
                 "MaxText 0.2.5 leaves the gradient reductions to XLA's scheduler: priced as one bucket per "
                 "parameter, so that only layer 0's and the embedding's reductions follow the last backward (XLA's "
                 "collective-combining thresholds are not modeled)"),
                ("norms_fused", False, "MaxText 0.2.5's norms are ops of their own (layers/normalizations.py), "
                                       "which its `minimal` remat policy recomputes: no norm output is saved"),
                ("remat_saves_named_only", True,
                 "MaxText 0.2.5 checkpoints each decoder layer with jax.checkpoint under its remat_policy's "
                 "save_only_these_names (layers/nnx_decoders.py:1160 get_remat_policy, :1904; "
                 "AI-Hypercomputer/maxtext e591f30cb): backward keeps the layer's input and the named tensors alone"),
                ("fp32_weights", True, "MaxText 0.2.5 keeps its weights in float32 (configs/base.yml weight_dtype) "
                                       "as the optimizer's master copy, with float32 gradients and AdamW moments "
                                       "(grad_dtype, mu_dtype from weight_dtype): 4 + 4 + 8 bytes a parameter; "
                                       "under shard_optimizer_over_data the weights are sharded as the optimizer "
                                       "state (utils/sharding.py maybe_update_params_sharding_with_opt) and "
                                       "gathered for the step, in bf16 under gradient accumulation "
                                       "(utils/gradient_accumulation.py)"),
                ("fp32_weights_autocast", False,
                 "MaxText 0.2.5's float32 weights are cast by XLA inside its compiled step, not by torch's autocast, "
                 "and stored sharded as the optimizer state under shard_optimizer_over_data (utils/sharding.py "
                 "maybe_update_params_sharding_with_opt) with a copy gathered for the step, where torch's "
                 "ZeroRedundancyOptimizer keeps them whole"),
                ("optimizer_over_replicas", True,
                 "placement's MaxText files set shard_optimizer_over_data where an HSDP mesh's expert (or context) "
                 "axis is the whole shard group: MaxText then shards the AdamW moments and the float32 weights over "
                 "data too (utils/sharding.py add_data_to_sharding, maybe_update_params_sharding_with_opt) and "
                 "gathers the weights back once a step (utils/gradient_accumulation.py); an HSDP layout with fsdp "
                 "ranks runs without it (optimizer_over_replicas_beside_fsdp)"),
                ("optimizer_over_replicas_beside_fsdp", False,
                 "MaxText 0.2.5 refuses shard_optimizer_over_data beside an fsdp axis at start-up (the 0.2.5 wheel's "
                 "configs/types.py:5605-5621), so an HSDP layout with fsdp ranks (dp_shard above ep) runs data x "
                 "fsdp as plain HSDP: base.yml's embed rule (configs/base.yml:605 at e591f30cb) shards the weights, "
                 "gradients and AdamW moments over fsdp, context and expert, never data, and the gradients are "
                 "reduced over the data replicas")),
        recipe_choices=frozenset({"optimizer_over_replicas"})),
}
"""framework -> its row; the --framework choices."""


def recipe_rows(framework: str, several_hosts: bool, precision: str | None,
                config: str | None = None, is_moe: bool = True) -> tuple[tuple[str, object, str], ...]:
    """The framework's capability rows (Capability.recipe_rows) for files that name torchtitan's `config` or MaxText's
    model_name: the rows that config sets otherwise (emit.torchtitan.CONFIG_RECIPE: llama3_8b_mxfp8 runs MXFP8 with
    its LM head converted; emit.maxtext.CONFIG_RECIPE: gpt-oss-120b's sinks run cuDNN's attention) in place of the row
    of the same field (each is a field of a capability row); the capability rows alone for any other config."""
    rows = CAPABILITIES[framework].recipe_rows(several_hosts, precision, is_moe)
    if framework not in ("torchtitan", "maxtext") or config is None:
        return rows
    if framework == "torchtitan":
        from placement.emit.torchtitan import CONFIG_RECIPE
    else:  # MaxText's model_name (emit.maxtext.CONFIG_RECIPE: a config with attention sinks runs cuDNN's attention)
        from placement.emit.maxtext import CONFIG_RECIPE

    own = {row[0]: row for row in CONFIG_RECIPE.get(config, ())}
    return tuple(own.get(row[0], row) for row in rows)


def run_config(framework: str, model: ModelSpec, precision: str, accelerator: AcceleratorSpec) -> str | None:
    """The torchtitan config placement's files name for `model` at `precision` on `accelerator`
    (emit.torchtitan.run_config), or the MaxText model_name (emit.maxtext.config_name_of); None for another framework
    or a model the framework ships no config of."""
    if framework == "maxtext":
        from placement.emit.maxtext import config_name_of

        return config_name_of(model.name, model)
    if framework != "torchtitan":
        return None
    from placement.emit.torchtitan import config_for
    from placement.emit.torchtitan import run_config as torchtitan_config

    return torchtitan_config((config_for(model) or (None, None))[1], precision, accelerator.mxfp8)


def check_precision(framework: str, model: ModelSpec, precision: str, accelerator: AcceleratorSpec) -> None:
    """InputError when the framework's files cannot run `precision` for this model on `accelerator` (the emitters
    would run another one): torchtitan sets FP8 by config (MXFP8 configs on Blackwell only), DeepSpeed's config has
    no FP8 switch."""
    if framework == "torchtitan":
        from placement.emit.torchtitan import config_for, precision_run

        other = precision_run((config_for(model) or (None, None))[1], precision, accelerator)
        if other is not None:
            raise InputError(f"--framework torchtitan --precision {precision}: {other[1]}; plan with --precision "
                             f"{other[0]}")
    elif framework == "deepspeed" and precision == "fp8":
        raise InputError("--framework deepspeed --precision fp8: a DeepSpeed config has no FP8 switch (FP8 GEMMs "
                         "come only from model code); plan with --precision bf16")


def check_seq_len(framework: str, model: ModelSpec, seq_len: int, precision: str,
                  accelerator: AcceleratorSpec) -> None:
    """InputError when the framework's files name a config that refuses `seq_len` at start-up whatever the layout:
    torchtitan 0.3.0's shipped configs build RoPE for a fixed number of positions (emit.torchtitan.seq_refused)."""
    if framework != "torchtitan":
        return
    from placement.emit.torchtitan import seq_limit, seq_refused

    config = run_config(framework, model, precision, accelerator)
    why = seq_refused(config, seq_len)
    if why:
        raise InputError(f"--framework torchtitan --seq-len {seq_len}: {why}; give --seq-len {seq_limit(config)} or "
                         f"less (a longer one needs a copy of the config function with a larger max_seq_len)")


def model_as_run(framework: str | None, model: ModelSpec, label: str = "") -> tuple[ModelSpec, dict[str, str]]:
    """The model as `framework`'s files run it, and model field -> why (after "`label`: "), for each field its model
    code changes: a parallel residual runs in sequence where the framework's own layers have none.  A format
    without a row here (a device mesh) runs the user's model code: the model as given."""
    cap = CAPABILITIES.get(framework or "")
    if cap is None or not model.parallel_residual or not cap.sequential_layers:
        return model, {}
    return (model.model_copy(update={"parallel_residual": False}),
            {"parallel_residual": f"{label}: {cap.sequential_layers}" if label else cap.sequential_layers})


def absent_modules(model: ModelSpec, modules) -> dict[str, str]:
    """The recompute `modules` that `model` does not have and Megatron-Core refuses for it, each with why:
    MLA's up-projections without MLA, the experts' activation without experts (core_v0.19.0
    transformer_config.py:1784-1793; a user trial's Llama file with mla_up_proj and moe_act was priced as recomputing
    nothing).  `moe` and `shared_experts` on a model without them recompute nothing and start."""
    from placement.specs.recipe import RecomputeModule as M

    names = {getattr(m, "value", m) for m in modules}
    out = {}
    if M.MLA_UP_PROJ.value in names and model.mla is None:
        out[M.MLA_UP_PROJ.value] = "no multi-latent attention"
    if M.MOE_ACT.value in names and model.moe is None:
        out[M.MOE_ACT.value] = "no routed experts"
    return out


def model_recipe(model: ModelSpec, recipe: Recipe, sources: dict[str, str],
                 framework: str | None = None) -> tuple[Recipe, dict[str, str]]:
    """The recipe with what the model file declares where no flag or recipe file set it: its multi-token-prediction
    modules (ModelSpec.mtp_modules), sourced to the file; where the --framework's files run without them (its
    emitter's RUNS_INSTEAD), the source says they are left out.  `plan`, `evaluate` and every sweep cell take it from
    here, so the same model prices the same (a sweep once priced DeepSeek-V3's config without its MTP module).
    Recompute modules the model does not have are refused (`absent_modules`)."""
    absent = absent_modules(model, recipe.recompute_modules)
    if absent:
        given = sources.get("recompute_modules", "flag")
        where = "--recompute-modules" if given == "flag" else f"recompute_modules from {given.removeprefix('file:')}"
        raise InputError(f"{where} names {', '.join(absent)}, which model {model.name} does not have "
                         f"({'; '.join(absent.values())}): they recompute nothing, and Megatron-Core refuses them "
                         f"(core_v0.19.0 transformer_config.py:1784-1793); drop them")
    if (model.sliding_window is not None and not model.attention_sinks and "cp_comm_type" not in sources
            and recipe.cp_comm_type is CpCommType.P2P):
        # Transformer Engine refuses its ring beside a sliding window (cost.rules.Facts.cp_refused): all-gather it
        recipe = recipe.model_copy(update={"cp_comm_type": CpCommType.ALL_GATHER})
        sources = sources | {"cp_comm_type": (
            f"{model.source or model.name}: sliding_window {model.sliding_window}: Transformer Engine runs context "
            f"parallelism beside a sliding window as all_gather or a2a, not the default ring (TransformerEngine "
            f"d0067d0da context_parallel.py:5054-5060); all_gather where cp > 1")}
    if not model.mtp_modules or "mtp_layers" in sources:
        return recipe, sources
    from importlib import import_module

    emitter = None if framework is None else import_module(f"placement.emit.{framework}")
    why = None if emitter is None else emitter.RUNS_INSTEAD.get("mtp_layers")
    some = emitter is not None and "mtp_layers" in getattr(emitter, "RUNS_AT_SOME_LAYOUTS", ())
    if why is not None and not some:
        return recipe, sources | {"mtp_layers": f"{model.source or model.name}: num_nextn_predict_layers = "
                                                f"{model.mtp_modules}, left out: --framework {framework}'s files run "
                                                f"otherwise ({why})"}
    # a framework that runs them at some layouts (MaxText at cp 1): kept, and a layout whose files run without them
    # says so as any other (files_run; a QA trial: DeepSeek-V3's config.json under --framework maxtext was priced and
    # written without its MTP module at cp 1, where the files write mtp_num_layers)
    at = f"; --framework {framework}'s files run them at some layouts only: {why}" if some else ""
    return (recipe.model_copy(update={"mtp_layers": model.mtp_modules}),
            sources | {"mtp_layers": f"{model.source or model.name}: num_nextn_predict_layers = {model.mtp_modules}, "
                                     f"the model's own MTP modules (--mtp-layers 0 leaves them out){at}"})
