"""Megatron-LM launch material: a launch script's or argument file's flags (megatron-core 0.19.2 names, checked
against its own argparse table, and the older aliases), its recipe flags (read as `placement.emit.megatron`
writes them), Megatron-Bridge YAML and Hydra-style `section.key=value` overrides, and the arguments block a
Megatron training log prints; the Megatron join turns a pipeline layout string and layers per virtual stage
into vpp and fills Megatron's defaults."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import yaml

from placement.audit.readers.common import (
    BIGSCIENCE_BUFFER,
    DDP_BF16,
    DEEPSPEED_ALLREDUCE_BUCKET,
    ENGINE_BUCKET,
    FP16_MIXED,
    WHOLE_VARIABLE,
    Arg,
    deepspeed_binding,
    deepspeed_grad_accumulation,
    deepspeed_json_unread,
    fixed_values_text,
    fp32_refusal,
    merge,
    one_value,
    read_int,
    split_args,
    start_refusal,
    warn_held_arguments,
    word_check,
)
from placement.audit.readers.megatron_flags import FLAGS as MEGATRON_FLAGS
from placement.audit.readers.reading import Reading, Settings, UnknownKey
from placement.audit.shell import Origin, Word
from placement.cost.constants import REAL_ROUTING_IMBALANCE
from placement.emit.megatron import ACTIVATION_ARGS
from placement.errors import InputError
from placement.loaders.files import read_text, unprefixed
from placement.specs.model import FfnKind
from placement.specs.recipe import MEGATRON_MODULES

BRIDGE_BUCKET_PARAMS = 128 * 1024 * 1024
"""The gradient bucket Megatron-Bridge's CommOverlapConfig sets with the distributed optimizer at DP > 1
(training/comm_overlap.py _get_optimizer_overlap_cfgs), as NeMo 2's MegatronCommOverlapCallback does."""

# Megatron-LM flags (megatron-core 0.19.2 argparse: dest, nargs; the aliases are older names).
_MG_INT = {
    "--tensor-model-parallel-size": "tp", "--model-parallel-size": "tp",
    "--pipeline-model-parallel-size": "pp", "--context-parallel-size": "cp",
    "--ds-sequence-parallel-size": "cp", "--expert-model-parallel-size": "ep",
    "--moe-expert-parallel-size": "ep",
    "--expert-tensor-parallel-size": "etp", "--num-virtual-stages-per-pipeline-rank": "vpp",
    "--virtual-pipeline-model-parallel-size": "vpp",
    "--num-layers-per-virtual-pipeline-stage": "layers_per_virtual_stage",
    "--decoder-first-pipeline-num-layers": "first_stage_layers",
    "--decoder-last-pipeline-num-layers": "last_stage_layers",
    "--micro-batch-size": "micro_batch_size", "--batch-size": "micro_batch_size",
    "--per-device-train-batch-size": "micro_batch_size",  # HF Trainer
    "--gradient-accumulation-steps": "grad_accumulation",  # HF Trainer
    "--global-batch-size": "global_batch", "--seq-length": "seq_len", "--num-layers": "num_layers",
    "--encoder-num-layers": "num_layers", "--encoder-seq-length": "seq_len",  # validate_args' aliases of the two
    "--hidden-size": "hidden_size", "--num-attention-heads": "num_attention_heads", "--num-experts": "num_experts",
    "--zero-stage": "zero_stage", "--ffn-hidden-size": "ffn_hidden_size", "--num-query-groups": "num_query_groups",
    "--num-key-value-heads": "num_query_groups",  # Megatron-DeepSpeed's GQA (arguments.py 4efb479d :444-449, :623)
    "--moe-router-topk": "moe_router_topk", "--moe-ffn-hidden-size": "moe_ffn_hidden_size",
    "--kv-channels": "kv_channels",
    "--moe-shared-expert-intermediate-size": "moe_shared_expert_intermediate_size",
    "--q-lora-rank": "q_lora_rank", "--kv-lora-rank": "kv_lora_rank", "--qk-head-dim": "qk_head_dim",
    "--qk-pos-emb-head-dim": "qk_pos_emb_head_dim", "--v-head-dim": "v_head_dim",
}
MDS_FLASH_FLAGS = {"--use-flash-attn": "flash", "--use-flash-attn-v1": "flash", "--use-flash-attn-v2": "flash2",
                   "--use-flash-attn-triton": "flash", "--use-flash-attn-builder": "flash"}
"""Megatron-DeepSpeed's switches to a fused attention core (megatron/arguments.py, deepspeedai/Megatron-DeepSpeed
4efb479d :927-936); FlashAttention-2 priced as such."""


_MG_FLAGS0 = {"--sequence-parallel", "--use-distributed-optimizer", "--use-megatron-fsdp", "--use-torch-fsdp2",
              "--recompute-activations", "--checkpoint-activations", "--bf16", "--fp16", "--fp8-hybrid", "--fp8-e4m3",
              "--no-pipeline-parallel", "--deepspeed", "--account-for-embedding-in-pipeline-split",
              "--account-for-loss-in-pipeline-split", "--torch-fsdp2-no-reshard-after-forward",
              "--overlap-grad-reduce", "--overlap-param-gather", "--tp-comm-overlap", "--use-tp-pp-dp-mapping",
              "--fp8-param-gather", "--moe-layer-recompute", "--cpu-offloading", "--no-overlap-p2p-communication",
              "--deepspeed-activation-checkpointing", "--partition-activations", "--cpu-optimizer",
              "--fp16-lm-cross-entropy", "--swiglu", "--use-mcore-models", "--group-query-attention",
              "--multi-latent-attention",
              "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute", "--cross-entropy-loss-fusion",
              "--moe-permute-fusion", "--moe-router-fusion", "--no-check-for-nan-in-loss-and-grad",
              "--enable-cuda-graph", "--external-cuda-graph", "--use-precision-aware-optimizer",
              "--moe-router-force-load-balancing", "--activation-func-fp8-input-store", "--grad-reduce-in-bf16",
              "--accumulate-allreduce-grads-in-fp32", "--moe-grouped-gemm", *MDS_FLASH_FLAGS,
              "--no-gradient-accumulation-fusion", "--synchronize-each-layer", "--sync-tp-duplicated-parameters",
              "--embed-layernorm", "--use-rope-scaling", "--quick-geglu", "--squared-relu",
              "--no-yarn-correction-range-round-to-int", "--yarn-correction-range-round-to-int",
              "--no-async-tensor-model-parallel-allreduce"}
_MG_NARGS: dict[str, int | str] = {f: 1 for f in _MG_INT} | {f: 0 for f in _MG_FLAGS0} | {
    "--rampup-batch-size": 3, "--step-batch-size-schedule": 1, "--recompute-granularity": 1,
    "--data-parallel-sharding-strategy": 1,
    "--fp8-format": 1, "--fp4-format": 1, "--pipeline-model-parallel-layout": 1, "--deepspeed_config": 1,
    "--deepspeed-config": 1, "--recompute-method": 1, "--recompute-num-layers": 1, "--ddp-bucket-size": 1,
    "--ddp-num-buckets": 1,
    "--num-distributed-optimizer-instances": 1, "--moe-token-dispatcher-type": 1, "--moe-flex-dispatcher-backend": 1,
    "--attention-backend": 1, "--cp-comm-type": "+", "--rotary-base": 1, "--rope-scaling-factor": 1,
    "--topk": 1, "--moe-train-capacity-factor": 1, "--disable-moe-token-dropping": 0, "--expert-interval": 1,
    **{f: 1 for f in ("--glu-linear-offset", "--activation-func-clamp-value", "--softmax-type",
                      "--position-embedding-type",
                      "--rotary-scaling-factor", "--yarn-original-max-position-embeddings", "--yarn-beta-fast",
                      "--yarn-beta-slow", "--mscale", "--mscale-all-dim")},
    "--checkpoint-num-layers": 1, "--activations-checkpoint-method": 1, "--activations-checkpoint-num-layers": 1,
    "--cuda-graph-impl": 1, "--cuda-graph-modules": "+", "--cuda-graph-scope": "+", "--recompute-modules": "+",
    "--fp8-recipe": 1, "--mtp-num-layers": 1, "--moe-expert-capacity-factor": 1, "--exp-avg-dtype": 1,
    "--exp-avg-sq-dtype": 1, "--main-grads-dtype": 1, "--megatron-fsdp-main-grads-dtype": 1,
    "--megatron-fsdp-grad-comm-dtype": 1, "--microbatch-group-size-per-virtual-pipeline-stage": 1}
_MG_IGNORED = {
    "--num-distributed-optimizer-instances": "partial distributed optimizer (shards within instances)",
    "--cpu-offloading": "activation/weight offload to CPU",
    "--moe-layer-recompute": "recomputes MoE layers",
    "--rampup-batch-size": "batch-size ramp-up (the layout is read at the final batch size)",
    "--fp4-format": "FP4 GEMMs (not modelled; priced as the other precision)",
    "--cpu-optimizer": "optimizer step on CPU",
    "--no-gradient-accumulation-fusion": "each weight-gradient GEMM writes a 16-bit gradient that a separate kernel "
                                         "adds into main_grad (in the gradient's reduce width; priced as the fused "
                                         "accumulation)",
    "--sync-tp-duplicated-parameters": "Megatron-DeepSpeed all-reduces every LayerNorm's weight and bias and the "
                                       "row-parallel biases over the TP group in each forward (megatron/model/"
                                       "fused_layer_norm.py, mpu/layers.py): small all-reduces, not priced",
    "--embed-layernorm": "a LayerNorm after the embedding (Megatron-DeepSpeed, BLOOM): one norm per micro-batch on "
                         "the first stage, not priced",
    "--moe-shared-expert-overlap": "the shared experts' compute overlapped with the token dispatch (not priced: the "
                                   "shared experts run in turn)",
    "--partition-activations": "DeepSpeed activation checkpointing splits each checkpointed input over the TP ranks "
                               "(not priced: the memory estimate keeps it whole on each, an over-count)",
    "--pp-partition-method": "DeepSpeed's PipelineModule partitions the layers by this method (priced with "
                             "placement's split: middle stages ceil(L / pp), the first and last the rest)",
    "--no-fp8-wgrad": "weight-gradient GEMMs in 16 bits under FP8 (TransformerConfig.fp8_wgrad False), about a third "
                      "of the GEMM FLOPs: priced as FP8 GEMMs, so the estimate is fast",
    "--optimizer-cpu-offload": "optimizer state and step on the CPU (--optimizer-offload-fraction of it, default 1.0): "
                               "priced on the GPU, its state in GPU memory and its step at HBM speed",
    "--ds-sequence-parallel-fpdt": "DeepSpeed's FPDT (Megatron-DeepSpeed): Ulysses over sequence chunks of "
                                   "--ds-sequence-parallel-fpdt-chunk-size (65536 by default), their all-to-alls and "
                                   "attention pipelined chunk by chunk; priced as plain Ulysses, its attention "
                                   "activations whole, so the memory is an upper bound",
    "--ds-sequence-parallel-fpdt-offloading": "FPDT's chunks of Q, K, V and attention output kept in host memory "
                                              "between forward and backward: priced in GPU memory (an upper bound), "
                                              "their host copies not priced",
    "--fine-grained-activation-offloading": (
        "Megatron-Core's fine-grained activation offloading (b97184db56, 2026-01-16; TransformerConfig "
        "fine_grained_activation_offloading): the inputs of the --offload-modules submodules go to host memory in the "
        "forward and come back before the backward; priced on the GPU: the memory estimate keeps them in HBM (an "
        "upper bound) and their PCIe copies are not priced"),
    "--checkpoint-in-cpu": "DeepSpeed activation checkpointing keeps the checkpointed inputs in host memory: priced "
                           "in GPU memory (an upper bound), their host copies not priced",
    "--microbatch-group-size-per-virtual-pipeline-stage": (
        "an interleaved schedule runs its micro-batches in groups of this many per model chunk (Megatron-Core "
        "ModelParallelConfig.microbatch_group_size_per_vp_stage, default the pipeline size, since core_r0.10.0): "
        "priced with groups of the pipeline size; a larger group keeps (vpp - 1) x (group - pp) more micro-batches' "
        "activations in flight (schedules.py get_pp_rank_microbatches), which the memory estimate does not count, and "
        "lets a micro-batch count the pipeline size does not divide run, which placement refuses"),
}
_MG_RECIPE_FLAGS = {
    # bare Megatron flag -> the Recipe field it turns on
    "--tp-comm-overlap": "tp_comm_overlap", "--overlap-moe-expert-parallel-comm": "ep_comm_overlap",
    "--delay-wgrad-compute": "delay_wgrad", "--fp8-param-gather": "fp8_params",
    "--account-for-embedding-in-pipeline-split": "account_for_embedding",
    "--account-for-loss-in-pipeline-split": "account_for_loss", "--cross-entropy-loss-fusion": "cross_entropy_fusion",
    "--overlap-grad-reduce": "dp_overlap", "--overlap-param-gather": "param_gather_overlap",
    # the opt-in of 4e3840535b (2024-08-23) until 655a663df2 (2024-09-07) made it the default
    "--align-param-gather": "align_param_gather",
    "--moe-permute-fusion": "moe_fusions",
    "--activation-func-fp8-input-store": "activation_func_fp8_input_store",
    # the opt-in of f9283c5a8a (2023-05-31) until 4eeff55d1f (2023-10-12) made it the default
    "--overlap-p2p-communication": "pp_comm_overlap",
}


UNALIGNED_FLAGS = ("--no-delay-grad-reduce", "--delay-param-gather")
"""Megatron-LM flags 4e3840535b (2024-08-23) renamed to --no-align-grad-reduce and --align-param-gather: a file that
states one predates the aligned weight gathers (Recipe.align_param_gather)."""


OLD_METHOD_DATES = "c1e0689d92..bbab79f869, 2021-08-10 to 2022-05-16"
"""The Megatron-LM versions that take --activations-checkpoint-method: a file that states it is of that time."""
OLD_CHECKPOINT_METHOD = ("Megatron-LM's full recompute from c1e0689d92 of 2021-08-10 until bbab79f869 of 2022-05-16 "
                         "renamed it --recompute-method: the method alone recomputes every layer, in groups of "
                         "--activations-checkpoint-num-layers (uniform), or that many layers per stage (block); "
                         "megatron/model/transformer.py _checkpointed_forward")
"""What the SC21 scripts' `--activations-checkpoint-method uniform` runs (a user trial: an audit priced it without
recompute and said the job ran out of memory)."""


ASYNC_SWITCH_IGNORED = "5fffdfc737, 2024-04-29: core_r0.7.0 and later"
"""Where Megatron-LM stopped reading --no-async-tensor-model-parallel-allreduce (its help became "DEPRECATED. This flag
is ignored."; every column-parallel linear reduces its input gradient beside its weight-gradient GEMM since)."""
NEWER_THAN_ASYNC_SWITCH = {
    "--calculate-per-token-loss": "795b45cc0e, 2024-05-10", "--cross-entropy-loss-fusion": "7b4a6d76c9, 2024-06-14",
    "--defer-embedding-wgrad-compute": "dadb970a17, 2024-07-05", "--ckpt-format": "2fe20368be, 2024-08-02",
    "--overlap-param-gather-with-optimizer-step": "4e3840535b, 2024-08-23",
    "--decoder-first-pipeline-num-layers": "fa8bb5921b, 2024-09-05", "--use-torch-fsdp2": "e1993fa6f7, 2024-11-13",
    "--attention-backend": "fa0dcc4872, 2024-12-07", "--use-precision-aware-optimizer": "47a175b4c4, 2024-12-19",
    "--enable-cuda-graph": "fa93a0564a, 2025-01-09",
    "--account-for-embedding-in-pipeline-split": "ef490839e8, 2025-02-03",
    "--moe-permute-fusion": "8a71e3bc7d, 2025-02-10", "--recompute-modules": "3b141a2471, 2025-04-05",
    "--pipeline-model-parallel-layout": "77732c3628, 2025-06-13", "--moe-router-fusion": "c08d89bea0, 2025-08-17",
    "--use-megatron-fsdp": "af28b5a559, 2025-08-21", "--cuda-graph-impl": "5769804591, 2025-10-14",
}
"""Megatron-LM arguments first added after ASYNC_SWITCH_IGNORED (the commit adding each to arguments.py): a launch or
a log that has one runs a Megatron-LM that ignores the switch.  Megatron-DeepSpeed, which reads it, has none of them."""



FORCE_BALANCED = (f"routing forced balanced, every expert rank given the mean of the tokens: a benchmark setting; "
                  f"the same job on real data routes at its imbalance, priced {REAL_ROUTING_IMBALANCE} without it")
"""Where a launch forces balanced MoE routing (Megatron-Core --moe-router-force-load-balancing, the vendor benchmark
tables' setting): the job runs at routing imbalance 1.0, as validate prices those tables."""


ATTENTION_VARIANTS = {
    "gated_delta_net": "Gated DeltaNet linear-attention layers in place of softmax attention on (N-1) of every N "
                       "layers (--linear-attention-freq N, or its list of 1s; TransformerConfig asserts it is set)",
    "dsa": "DeepSeek Sparse Attention: an indexer scores the keys and each query attends to its top "
           "--dsa-indexer-topk of them (DeepSeek-V3.2, 382eeea395 of 2026-01-16)"}
"""Megatron-Core's TransformerConfig.experimental_attention_variant values (core_v0.19.0
megatron/core/transformer/transformer_config.py:294, Literal['gated_delta_net', 'dsa']): layers placement does not
model."""


def attention_variant_refusal(value: str, evidence: str, extra: list[str]) -> InputError:
    """An InputError for Megatron-Core's experimental attention variant (`--experimental-attention-variant`, a Bridge
    config's model.experimental_attention_variant): the job builds attention layers placement does not model (a QA
    run on Megatron's functional tests gpt3_mcore_te_tp2_pp1_gdn and gpt3_mcore_te_tp2_pp2_dsa: both were priced as
    the model's softmax attention on every layer, unsaid), as a recompute module of those layers is."""
    what = ATTENTION_VARIANTS.get(value, f"an attention variant ({value or 'a value the files leave open'})")
    return InputError(f"{evidence}: experimental attention variant {value}: the job builds {what}"
                      f"{' (' + '; '.join(extra) + ')' if extra else ''}, which placement does not model (pricing it "
                      f"as the model's softmax attention on every layer would describe another model), so it is not "
                      f"priced; audit the job without the variant")


def _refuse_attention_variant(a: Arg, flags: dict[str, Arg]) -> None:
    """`--experimental-attention-variant` on a Megatron-LM command line: attention_variant_refusal."""
    value = a.values[0].text.strip("'\"") if a.values else ""
    extra = [flags[f].evidence for f in ("--linear-attention-freq", "--dsa-indexer-topk") if f in flags]
    raise attention_variant_refusal(value, a.evidence, extra)


MEGATRON_UNPRICED_MODULES = ("gdn_norm_out", "gdp_in_proj", "gdp_qkv", "mhc")
"""`--recompute-modules` names Megatron-Core takes for layers placement does not model (Gated DeltaNet, mHC:
d98e8a64dd megatron/core/transformer/transformer_config.py:1945-1957)."""


def megatron_modules(names: list[str], ev: str) -> tuple[str, ...]:
    """`--recompute-modules` as Megatron-Core takes them: its TransformerConfig asserts every name is one of its
    modules (d98e8a64dd transformer_config.py:1945-1961, "Invalid choices for recompute_modules"), so another
    placement name (torchtitan's per_op, MaxText's qkv_proj/out_proj/mlp_up) is the job's error, not a recipe."""
    allowed = [m.value for m in MEGATRON_MODULES]
    for name in names:
        if name in MEGATRON_UNPRICED_MODULES:
            raise InputError(f"{ev}: recompute module {name!r} belongs to a layer placement does not model "
                             f"(Gated DeltaNet or mHC); audit the job without it")
        if name not in allowed and name != "up_proj":
            raise InputError(f"{ev}: recompute module {name!r} is not one Megatron-Core takes (TransformerConfig "
                             f"asserts \"Invalid choices for recompute_modules\"); it takes "
                             f"{', '.join(allowed)}")
    return tuple(names)

def newer_than_async_switch(names) -> str | None:
    """The first of `names` (flags, or a log's printed argument names) that dates its Megatron-LM after
    ASYNC_SWITCH_IGNORED, as "--flag (commit, date)"; None where none does."""
    for flag, when in NEWER_THAN_ASYNC_SWITCH.items():
        if flag in names or flag[2:].replace("-", "_") in names:
            return f"{flag} ({when})"
    return None


def async_switch_moot(sequence_parallel: str | None, transformer_impl: str | None, newer: str | None) -> str | None:
    """Why --no-async-tensor-model-parallel-allreduce changes nothing in this job (None where it takes effect): under
    sequence parallelism Megatron-LM's backward runs its reduce-scatter and re-gather asynchronously whatever it
    says (validate_args turns the switch off; core_r0.5.0 tensor_parallel/layers.py); Transformer Engine's Linear
    reduces the input gradient beside its weight-gradient GEMM on its own (TransformerEngine v1.2 module/linear.py,
    "Overlap dgrad-RS/AR with wgrad"); a Megatron-LM newer than ASYNC_SWITCH_IGNORED ignores it."""
    if sequence_parallel:
        return (f"{sequence_parallel} runs the sequence-parallel reduce-scatter and re-gather asynchronously in every "
                f"version (validate_args turns the switch off under it)")
    if transformer_impl:
        return (f"{transformer_impl}: Transformer Engine's Linear reduces each input gradient beside its "
                f"weight-gradient GEMM whatever the switch says")
    if newer:
        return f"{newer} dates this job's Megatron-LM after {ASYNC_SWITCH_IGNORED}, which ignores the switch"
    return None


def async_switch(evidence: str, site: str, moot: str | None, s: Settings) -> None:
    """--no-async-tensor-model-parallel-allreduce (or a log's printed False): Megatron-LM from 3f65246911 (2021-09-02)
    to ASYNC_SWITCH_IGNORED with its own (local) layers, and Megatron-DeepSpeed, reduce each column-parallel input
    gradient on its own; where the job shows it changes nothing (`moot`, async_switch_moot), an ignored line."""
    if moot is not None:
        s.ignored.append(f"--no-async-tensor-model-parallel-allreduce: no effect in this job: {moot}; priced with "
                         f"the input-gradient collectives beside the weight-gradient GEMMs ({site})")
        return
    s.put("recipe.tp_async_backward", False,
          f"{evidence} (Megatron-LM's own layers from 3f65246911, 2021-09-02, to {ASYNC_SWITCH_IGNORED.split(':')[0]}, "
          f"and Megatron-DeepSpeed; Transformer Engine's layers and a Megatron-LM of core_r0.7.0 or later run the "
          f"collectives asynchronously whatever it says)")


def _megatron_recipe(f: str, a: Arg, s: Settings, state: dict) -> bool:
    """Read one Megatron recipe argument into s ("recipe.FIELD"); True if `f` was one."""
    if f in _MG_RECIPE_FLAGS:
        s.put(f"recipe.{_MG_RECIPE_FLAGS[f]}", True, a.evidence)
    elif f == "--no-overlap-p2p-communication":
        s.put("recipe.pp_comm_overlap", False, a.evidence)
    elif f == "--no-align-param-gather":
        s.put("recipe.align_param_gather", False, a.evidence)
    elif f == "--no-async-tensor-model-parallel-allreduce":
        async_switch(a.evidence, f"{a.word.site.path}:{a.word.site.line}", state.get("moot"), s)
    elif f == "--moe-token-dispatcher-type":
        value = one_value(a).text
        if value not in ("alltoall", "allgather", "flex"):
            raise InputError(f"{a.evidence}: --moe-token-dispatcher-type must be alltoall, allgather or flex, got "
                             f"{value!r}")
        state["dispatcher"] = (value, a.evidence)
    elif f == "--moe-flex-dispatcher-backend":
        state["backend"] = (one_value(a).text, a.evidence)
    elif f == "--attention-backend":  # Megatron's AttnBackend: the unfused and local ones keep the scores in HBM
        value = one_value(a).text
        if value not in ("flash", "fused", "unfused", "local", "auto"):
            raise InputError(f"{a.evidence}: --attention-backend must be flash, fused, unfused, local or auto, got "
                             f"{value!r}")
        # `flash` runs the flash-attn package through Transformer Engine (NVTE_FLASH_ATTN=1, NVTE_FUSED_ATTN=0): priced
        # as FlashAttention-2, as placement's own megatron.sh writes a flash2 plan (emit.megatron); `fused` and `auto`
        # Transformer Engine's cuDNN attention (a QA run: the audit of a flash2 file priced it as cuDNN's, 5 % faster
        # than the file's header)
        kernel = {"unfused": "unfused", "local": "unfused", "flash": "flash2"}.get(value, "flash")
        s.put("recipe.attention_kernel", kernel, a.evidence)
        if value == "flash":
            s.ignored.append(f"--attention-backend flash: the flash-attn package Transformer Engine finds, priced as "
                             f"FlashAttention-2 (the 2.x NGC's PyTorch containers ship); where FlashAttention-3 "
                             f"(flash_attn_3) is installed on Hopper, Transformer Engine runs it, faster "
                             f"({a.evidence})")
    elif f == "--cp-comm-type":  # one type, or one per layer; the cost model prices p2p, all_gather and a2a
        kinds = {v.text for v in a.values}
        if not kinds or not kinds <= {"p2p", "all_gather", "a2a", "a2a+p2p"}:
            raise InputError(f"{a.evidence}: --cp-comm-type takes p2p, all_gather, a2a or a2a+p2p, got "
                             f"{' '.join(v.text for v in a.values) or 'nothing'}")
        if len(kinds) == 1 and kinds <= {"all_gather", "a2a"}:
            s.put("recipe.cp_comm_type", next(iter(kinds)), a.evidence)
        elif kinds != {"p2p"}:
            s.ignored.append(f"--cp-comm-type {' '.join(sorted(kinds))}: one type for every layer, p2p, all_gather "
                             f"or a2a, is modelled (a2a+p2p, the hierarchical one, and a list of several are not); "
                             f"priced as p2p ({a.evidence})")
    elif f in ("--cuda-graph-impl", "--enable-cuda-graph", "--external-cuda-graph"):
        impl = ({"--enable-cuda-graph": "local", "--external-cuda-graph": "transformer_engine"}.get(f)
                or one_value(a).text)
        state["graph_impl"] = (impl, a.evidence)
    elif f in ("--cuda-graph-modules", "--cuda-graph-scope"):
        for w in a.values:
            word_check(w, f)
        state["graph_modules"] = ([w.text for w in a.values], a.evidence)
    elif f == "--moe-router-force-load-balancing":
        s.put("recipe.routing_imbalance", 1.0, f"{a.evidence} ({FORCE_BALANCED})")
    elif f == "--recompute-modules":
        for w in a.values:
            word_check(w, f)
        s.put("recipe.recompute_modules", megatron_modules([w.text for w in a.values], a.evidence), a.evidence)
    elif f == "--recompute-num-layers":
        state["recompute_num_layers"] = (read_int(one_value(a).text, f, a.evidence), a.evidence)
    elif f == "--ddp-bucket-size":
        s.put("recipe.ddp_bucket_params", read_int(one_value(a).text, f, a.evidence, minimum=1), a.evidence)
    elif f == "--ddp-num-buckets":
        # the rank's parameters // this, once the model is known (audit.core.launch_recipe)
        s.put("recipe.ddp_num_buckets", read_int(one_value(a).text, f, a.evidence, minimum=1), a.evidence)
    elif f == "--recompute-method":
        state["recompute_method"] = (one_value(a).text, a.evidence)
    elif f == "--fp8-recipe":
        value = one_value(a).text
        # Megatron's delayed (its default) and tensorwise are both per-tensor scaling: placement's tensorwise
        s.put("recipe.fp8_recipe", "tensorwise" if value == "delayed" else value, a.evidence)
    elif f == "--mtp-num-layers":
        s.put("recipe.mtp_layers", read_int(one_value(a).text, f, a.evidence), a.evidence)
    elif f == "--moe-expert-capacity-factor":
        text = one_value(a).text
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{a.evidence}: --moe-expert-capacity-factor must be a number, got {text!r}") from None
        if value > 0:  # Megatron reads a negative factor as dropless
            s.put("recipe.moe_capacity_factor", value, a.evidence)
    elif f in ("--exp-avg-dtype", "--exp-avg-sq-dtype"):
        state[f] = (one_value(a).text, a.evidence)
    else:
        return False
    return True


MOE_FUSION_FLAGS = ("--moe-permute-fusion", "--moe-router-fusion")
"""Megatron-Core's two MoE fusion switches (TransformerConfig.moe_permute_fusion and moe_router_fusion, both False by
default: megatron-core 0.19.2 transformer/transformer_config.py), which placement prices as one field, moe_fusions,
read from --moe-permute-fusion (Megatron-Bridge: model.moe_permute_fusion)."""


def _half_moe_fusion(stated: dict[str, str], s: Settings, bridge: bool = False) -> None:
    """A note where the files turn on one of MOE_FUSION_FLAGS alone (`stated`: flag -> evidence): the other runs
    unfused and the job is priced with both as the permute's says (a review: the Megatron-LM DeepSeek-V3 Megatron-FSDP
    example passes --moe-permute-fusion alone, priced with the fused router)."""
    if len(stated) != 1:
        return
    ((flag, ev),) = stated.items()
    other = next(f for f in MOE_FUSION_FLAGS if f != flag)
    priced = "fused" if flag == "--moe-permute-fusion" else "unfused"
    name, other_name = (f"model.{f[2:].replace('-', '_')}" if bridge else f for f in (flag, other))
    s.ignored.append(f"{name} without {other_name}: Megatron-Core runs the {other.split('-')[3]} unfused "
                     f"(TransformerConfig.{other[2:].replace('-', '_')} default False); placement prices both as one "
                     f"setting, here {priced} ({ev})")


def _megatron_recipe_finish(s: Settings, state: dict) -> None:
    """The recipe fields that take several arguments together: dispatcher, CUDA graphs, optimizer state,
    block recompute."""
    if "dispatcher" in state:
        kind, ev = state["dispatcher"]
        if kind == "flex":
            backend, bev = state.get("backend", ("deepep", ev))  # Megatron's default flex backend
            if backend not in ("deepep", "hybridep"):
                raise InputError(f"{bev}: --moe-flex-dispatcher-backend {backend!r} is not priced; placement knows "
                                 f"deepep and hybridep")
            s.put("recipe.moe_dispatcher", backend, ev if bev == ev else f"{ev}; {bev}")
        else:
            s.put("recipe.moe_dispatcher", kind, ev)
    if "graph_impl" in state:
        impl, ev = state["graph_impl"]
        modules, mev = state.get("graph_modules", ([], ev))
        if impl == "full_iteration" or (impl == "local" and "full_iteration" in modules):
            s.put("recipe.cuda_graphs", "full", ev)
        elif impl in ("local", "transformer_engine"):
            # graphs of the parts before the MoE sync (or of whole dense layers) are the recipe's partial
            s.put("recipe.cuda_graphs", "partial", ev if mev == ev else f"{ev}; {mev}")
        elif impl != "none":
            raise InputError(f"{ev}: --cuda-graph-impl must be none, local, transformer_engine or full_iteration, "
                             f"got {impl!r}")
    avg, sq = state.get("--exp-avg-dtype"), state.get("--exp-avg-sq-dtype")
    if avg is not None and sq is not None and avg[0] == sq[0] == "bf16":
        s.put("recipe.optimizer_state_bf16", True, f"{avg[1]}; {sq[1]}")
    if "recompute_num_layers" in state and state.get("recompute_method", ("uniform",))[0] == "block":
        n, ev = state["recompute_num_layers"]
        s.put("recipe.recompute_num_layers", n, f"{state['recompute_method'][1]}; {ev}")
    elif "recompute_method" in state:
        ev = state["recompute_method"][1]
        if (state["recompute_method"][0], state.get("recompute_num_layers", (1,))[0]) != ("uniform", 1):
            s.ignored.append(f"--recompute-method {state['recompute_method'][0]}: full recompute of only some layers "
                             f"in uniform groups, priced as full recompute of every layer ({ev})")


def _near_miss(flag: str, a: Arg) -> None:
    """InputError for an argument one typo away from one the audit reads (`--tensor-model-parallel-sise`):
    Megatron-LM's parser refuses unknown arguments and abbreviations (megatron/training/arguments.py
    ArgumentParser(allow_abbrev=False)), so the job would not start, and the audit would price the default."""
    if (not flag.startswith("--") or any(c.isspace() for c in flag) or flag in _MG_NARGS or flag in _MG_IGNORED
            or flag in MEGATRON_NEAR_NAMES or flag in _HF_NARGS):
        return
    close = difflib.get_close_matches(flag, list(_MG_NARGS), n=1, cutoff=NEAR_MISS_CUTOFF)
    if close and close[0].replace("--no-", "--") != flag.replace("--no-", "--"):  # a negation is no typo
        raise InputError(f"{a.evidence}: unknown argument {flag}; did you mean {close[0]}? Megatron-LM refuses "
                         f"arguments it does not know (allow_abbrev=False), so this launch would not start")


MEGATRON_ROPE_SCALING_FACTOR = 8.0
"""Megatron-LM's --rope-scaling-factor default (megatron/training/arguments.py, core_v0.19.0)."""


def _rope_scaling(flags: dict[str, Arg], s: Settings) -> None:
    """--use-rope-scaling (Llama 3.x RoPE scaling) with --rope-scaling-factor (default 8) as `rope_scaling_factor`,
    the numerics, not the cost; a factor without the switch scales nothing (gpt_builders.py passes
    rope_scaling=args.use_rope_scaling)."""
    factor = flags.get("--rope-scaling-factor")
    value = MEGATRON_ROPE_SCALING_FACTOR
    if factor is not None:
        value = positive_number(factor, "--rope-scaling-factor")
    switch = flags.get("--use-rope-scaling")
    if switch is not None:
        s.put("rope_scaling_factor", value, switch.evidence + (f"; {factor.evidence}" if factor else ""))
    elif factor is not None:
        s.ignored.append(f"--rope-scaling-factor {value:g} without --use-rope-scaling: Megatron-LM scales no RoPE "
                         f"frequency ({factor.evidence})")


def positive_number(arg: Arg, flag: str) -> float:
    """The flag's one value as a positive number, or an InputError naming the flag and the value."""
    text = one_value(arg).text
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{arg.evidence}: {flag} must be a number, got {text!r}") from None
    if not value > 0:
        raise InputError(f"{arg.evidence}: {flag} must be positive, got {text!r}")
    return value


_MG_ACTIVATION = {args[0]: kind.value for kind, args in ACTIVATION_ARGS.items() if args}
"""Megatron-LM's activation switches (the emitter's, arguments.py:2365-2370, core_v0.19.0) -> ModelSpec ffn_kind."""
_MG_MODEL_NUMBERS = {
    "--glu-linear-offset": "glu_linear_offset", "--activation-func-clamp-value": "activation_clamp",
    "--rotary-scaling-factor": "yarn_factor", "--yarn-original-max-position-embeddings": "yarn_original_max_positions",
    "--yarn-beta-fast": "yarn_beta_fast", "--yarn-beta-slow": "yarn_beta_slow",
}
"""Megatron-LM model arguments of the numerics, not the cost (TransformerConfig glu_linear_offset and
activation_func_clamp_value, transformer_config.py:224-230; YaRN, arguments.py:2317-2321, :3391): read to compare
with --model (audit.core.model_differs), priced the same."""
SOFTMAX_TYPES = ("vanilla", "off-by-one", "learnable")
"""TransformerConfig.softmax_type's choices (transformer_config.py:163, core_v0.19.0)."""


def _model_numerics(f: str, a: Arg, s: Settings) -> bool:
    """The activation, GLU offset and clamp, softmax type and YaRN numbers (model_differs compares them with the
    model); True if `f` was one of them."""
    if f in _MG_ACTIVATION:
        s.put("activation", _MG_ACTIVATION[f], a.evidence)
    elif f in _MG_MODEL_NUMBERS:
        text = one_value(a).text
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{a.evidence}: {f} must be a number, got {text!r}") from None
        s.put(_MG_MODEL_NUMBERS[f], value, a.evidence)
    elif f == "--position-embedding-type":
        s.put("position_embedding", one_value(a).text, a.evidence)
    elif f == "--window-size":
        s.put("window_size_text", one_value(a).text, a.evidence)
    elif f == "--window-attn-skip-freq":
        s.put("window_skip_text", one_value(a).text, a.evidence)
    elif f == "--softmax-type":
        value = one_value(a).text
        if value not in SOFTMAX_TYPES:
            raise InputError(f"{a.evidence}: --softmax-type must be {', '.join(SOFTMAX_TYPES)}, got {value!r}")
        s.put("softmax_type", value, a.evidence)
    elif f in ("--no-yarn-correction-range-round-to-int", "--yarn-correction-range-round-to-int"):
        s.put("yarn_truncate", not f.startswith("--no-"), a.evidence)
    elif f in ("--mscale", "--mscale-all-dim"):
        text = one_value(a).text
        try:
            default = float(text) == {"--mscale": 1.0, "--mscale-all-dim": 0.0}[f]  # arguments.py:3393-3396
        except ValueError:
            raise InputError(f"{a.evidence}: {f} must be a number, got {text!r}") from None
        if not default:
            s.ignored.append(f"{f}: YaRN's cos/sin and softmax scale, the numerics, not the cost (not compared with "
                             f"the model; {a.evidence})")
    else:
        return False
    return True


HF_UPPER_BOUND = ("priced at it: an upper bound where the script pads each batch only to its longest example "
                  "(Stanford Alpaca's and LLaVA's train.py pad to the longest; FastChat's to it)")
HF_SEQ_FLAGS = {
    "--block-size": "run_clm.py's block_size: the texts are joined and cut into blocks of it, capped at the "
                    "tokenizer's model_max_length (transformers examples/pytorch/language-modeling/run_clm.py)",
    "--max-seq-length": f"the script's max_seq_length (run_mlm.py groups or pads to it; TRL's SFTConfig before "
                        f"max_length truncates to it); {HF_UPPER_BOUND}",
    "--model-max-length": f"the script's model_max_length (the TrainingArguments field of the Stanford Alpaca, "
                          f"FastChat and LLaVA train.py: each example truncated to it); {HF_UPPER_BOUND}",
    "--max-length": "TRL's SFTConfig max_length (trl/trainer/sft_config.py: each sample truncated to it; with "
                    "--packing every sequence is this long); an upper bound without packing",
    "--max-seq-len": "DeepSpeed-Chat's max_seq_len (applications/DeepSpeed-Chat main.py: each sample padded or "
                     "truncated to it)",
}
"""HuggingFace Trainer scripts' sequence-length arguments (their own dataclasses, not TrainingArguments)."""
HF_ATTENTION = {"eager": "unfused", "sdpa": "flash2", "flash_attention_2": "flash2", "flash_attention_3": "flash",
                "flex_attention": "flash2"}
"""transformers' attn_implementation -> the kernel priced: eager keeps the scores in HBM; sdpa runs PyTorch's
FlashAttention-2 kernel first (scaled_dot_product_attention's backend priority puts FlashAttention first:
huggingface/transformers PR #48163, 2026), FlexAttention a Triton kernel of its class."""
HF_ATTENTION_WHY = {
    "eager": "the scores in HBM, softmax and dropout as ops of their own",
    "sdpa": "PyTorch's scaled_dot_product_attention, whose backend priority puts its FlashAttention-2 kernel first",
    "flash_attention_2": "the flash-attn 2 package", "flash_attention_3": "the flash-attn 3 (Hopper) package",
    "flex_attention": "FlexAttention, a Triton kernel of FlashAttention-2's class"}
HF_TRAINER_FLAGS = frozenset({"--per-device-train-batch-size", "--output-dir", "--do-train",
                              "--attn-implementation", *HF_SEQ_FLAGS})
"""TrainingArguments (and its example scripts') flags no Megatron script takes: with them, a HuggingFace Trainer job
(but see HF_GENERIC_FLAGS)."""
HF_GENERIC_FLAGS = frozenset({"--output-dir", *HF_SEQ_FLAGS})
"""Of HF_TRAINER_FLAGS, those any training script may take (a DeepSpeedExamples script's own --output_dir and
--max_length): beside a DeepSpeed config with no flag of TrainingArguments' own, they do not make an HF Trainer
script."""
OWN_SCRIPT_FLAGS = frozenset({"--batch-size", *HF_GENERIC_FLAGS})
"""Flags of a DeepSpeed user script that the readers would take for Megatron's (2020's --batch-size, a micro-batch) or
the HF Trainer's: in a script of the user's own (`own_script`) they are its own, and not read."""
TRL_FLAGS = frozenset({"--packing", "--packing-strategy", "--padding-free", "--dataset-text-field",
                       "--assistant-only-loss", "--completion-only-loss", "--eval-packing"})
"""Flags only TRL's SFTConfig has: the script runs TRL's SFTTrainer with SFTConfig's defaults."""
TRL_DEFAULTS = ("a TRL SFTConfig flag; SFTConfig defaults gradient_checkpointing and bf16 to True and max_length to "
                "1024, unlike TrainingArguments: trl/trainer/sft_config.py, huggingface/trl 016013e8")
PEFT_FLAGS = {"--lora-r": "LoRA", "--lora-rank": "LoRA", "--lora-enable": "LoRA", "--use-peft": "PEFT",
              "--use-lora": "LoRA", "--q-lora": "QLoRA", "--lora-target-modules": "LoRA", "--peft-type": "PEFT",
              "--load-in-4bit": "4-bit base weights", "--load-in-8bit": "8-bit base weights", "--bits": "quantized "
              "base weights", "--finetuning-type": "the --finetuning_type given", "--lora-dim": "LoRA"}
"""Flags of HF Trainer and DeepSpeed-Chat scripts (FastChat, LLaVA, TRL, DeepSpeed-Chat) that train adapters or
quantized base weights: the estimate prices full training (every weight's gradient and Adam state, its data-parallel
traffic), which such a job does not run."""
_HF_NARGS = {**{f: 1 for f in HF_SEQ_FLAGS}, "--attn-implementation": 1, "--fsdp": 1, "--dtype": 1}
DS_CHAT_FLAGS = frozenset({"--zero_stage", "--max_seq_len", "--lora_dim", "--data_split", "--dtype"})
"""DeepSpeed-Chat's own flags (applications/DeepSpeed-Chat/training/*/main.py), as it spells them: a script with one
builds its DeepSpeed config from its flags (dschat/utils/ds_utils.py get_train_ds_config)."""
DS_CHAT_MAIN = "applications/DeepSpeed-Chat main.py, DeepSpeedExamples 38ef1962"


MEGATRON_NEAR_NAMES = frozenset({"--fp4-param-gather", "--fp4-recipe", "--megatron-fsdp-main-params-dtype",
                                 "--moe-expert-rank-capacity-factor", "--tp-comm-overlap-ag", "--tp-comm-overlap-rs"})
"""Real Megatron-LM arguments within NEAR_MISS_CUTOFF of one the audit reads: the whole of megatron/training/
arguments.py's flags and megatron-core's config dataclass fields (NVIDIA/Megatron-LM d98e8a64, 871 names) checked
against `_near_miss`, these six are the ones it would take for typos."""
NEAR_MISS_CUTOFF = 0.9
"""difflib similarity above which an unknown flag is taken for a typo of one the audit reads."""


LOCAL_SPEC_ATTENTION = ("Megatron-Core's local spec computes attention with its DotProductAttention, which keeps "
                        "the scores in HBM, whatever --attention-backend says (megatron/core/models/backends.py "
                        "LocalSpecProvider.core_attention; gpt_builders.py builds the local spec for any "
                        "--transformer-impl but transformer_engine)")


def _null_tokenizer_vocab(given: dict[str, Arg], s: Settings) -> None:
    """--vocab-size under --tokenizer-type NullTokenizer: the vocabulary the model is built at (megatron/core/
    tokenizers/utils/build_tokenizer.py passes it to the null tokenizer, whose vocab_size it is), compared with
    --model's (audit.core._check_vocab).  A user trial: --vocab-size 256000 priced as Llama 3's 128,256."""
    kind, size = given.get("--tokenizer-type"), given.get("--vocab-size")
    if kind is None or size is None or not kind.values or kind.values[0].text != "NullTokenizer":
        return
    value = read_int(one_value(size).text, "--vocab-size", size.evidence, minimum=1)
    same_line = (kind.word.site.path, kind.word.site.line) == (size.word.site.path, size.word.site.line)
    s.put("vocab_size", value, size.evidence if same_line else f"{size.evidence} (under {kind.evidence})")


def _local_spec(given: dict[str, Arg], s: Settings) -> None:
    """What `--transformer-impl local` runs that the flags do not name: the unfused attention core (a user trial: priced
    as Transformer Engine's fused attention, 7.3 s where the unfused core takes 16.5 s and does not fit); and FP8's
    first and last layers in BF16, which the step does not model."""
    impl = given.get("--transformer-impl")
    if impl is not None and impl.values and impl.values[0].text == "local":
        s.put("recipe.attention_kernel", "unfused", f"{impl.evidence} ({LOCAL_SPEC_ATTENTION})")
    ends = given.get("--first-last-layers-bf16")
    if ends is not None and s.value("precision") == "fp8":
        counts = [given.get(f) for f in ("--num-layers-at-start-in-bf16", "--num-layers-at-end-in-bf16")]
        start, end = (c.values[0].text if c is not None and c.values else "1" for c in counts)
        s.ignored.append(f"--first-last-layers-bf16: the first {start} and last {end} transformer layer(s) run BF16 "
                         f"GEMMs (TransformerConfig.num_layers_at_start/end_in_bf16, default 1 each), priced as FP8 "
                         f"({ends.word.site.path}:{ends.word.site.line})")


def _refuse_validate_args(given: dict[str, Arg]) -> None:
    """An InputError for argument pairs Megatron-LM's validate_args asserts against (megatron/training/arguments.py,
    each since the commit named): such a job does not start, so it has no step time to audit."""
    def refuse(a: Arg, what: str, since: str, says: str, fix: str) -> None:
        raise start_refusal(a.evidence, what, f"Megatron-LM refuses it (arguments.py validate_args, since {since}: "
                                              f"'{says}')", fix)

    bf16, fp16 = given.get("--bf16"), given.get("--fp16")
    if bf16 is not None and fp16 is not None and not _given_false(bf16) and not _given_false(fp16):
        raise InputError(f"{fp16.evidence}: --bf16 and --fp16 both on: Megatron-LM refuses it (arguments.py "
                         f"validate_args 'assert not args.bf16' under --fp16, since b4bc51b1e7 of 2021-03-08; "
                         f"Megatron-DeepSpeed too), as does the HF Trainer ('At most one of fp16 and bf16 can be "
                         f"True'), so this job does not start; keep one")
    if "--tp-comm-overlap" in given and "--sequence-parallel" not in given:
        refuse(given["--tp-comm-overlap"], "--tp-comm-overlap without --sequence-parallel",
               "the flag came in, 116ffddc58 of 2023-10-23", "Tensor parallel communication/GEMM overlap can happen "
               "only when sequence parallelism is enabled", "add --sequence-parallel or drop the overlap")
    delay, impl = given.get("--delay-wgrad-compute"), given.get("--transformer-impl")
    if delay is not None and "--overlap-moe-expert-parallel-comm" not in given:
        raise start_refusal(delay.evidence, "--delay-wgrad-compute without --overlap-moe-expert-parallel-comm",
                            "Megatron-Core refuses it (transformer_config.py, since ae1c88296f of 2025-08-01: "
                            "'overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute')",
                            "add --overlap-moe-expert-parallel-comm or drop --delay-wgrad-compute")
    if delay is not None and impl is not None and impl.values and impl.values[0].text != "transformer_engine":
        refuse(delay, f"--delay-wgrad-compute with --transformer-impl {impl.values[0].text}",
               "ae1c88296f of 2025-08-01", "Delaying wgrad compute is only supported with transformer_engine "
               "implementation", "drop --delay-wgrad-compute or use --transformer-impl transformer_engine")
    offload = given.get("--optimizer-cpu-offload")
    if offload is not None and "--use-precision-aware-optimizer" not in given:
        refuse(offload, "--optimizer-cpu-offload without --use-precision-aware-optimizer", "the flag came in, "
               "60007c93d3 of 2025-02-14", "The optimizer cpu offload must be used in conjunction with "
               "`--use-precision-aware-optimizer`", "add --use-precision-aware-optimizer or drop the offload")
    aware = given.get("--use-precision-aware-optimizer")
    if (aware is not None and not _given_false(aware) and "--use-distributed-optimizer" not in given
            and "--use-megatron-fsdp" not in given):  # Megatron-FSDP turns the distributed optimizer on itself
        raise start_refusal(aware.evidence, "--use-precision-aware-optimizer without --use-distributed-optimizer",
                            "Megatron-Core refuses it (optimizer_config.py OptimizerConfig.__post_init__, since the "
                            "flag came in, 47a175b4c4 of 2024-12-19: '--use-precision-aware-optimizer only supported "
                            "with distributed optimizer')",
                            "add --use-distributed-optimizer or drop --use-precision-aware-optimizer")
    ends, fp8 = given.get("--first-last-layers-bf16"), given.get("--fp8-format")
    recipe = given.get("--fp8-recipe")
    if ends is not None and fp8 is not None and (recipe is None or (recipe.values
                                                                    and recipe.values[0].text == "delayed")):
        why = "--fp8-recipe delayed" if recipe is not None else "no --fp8-recipe: Megatron's default, delayed"
        raise start_refusal(ends.evidence, f"--first-last-layers-bf16 under delayed FP8 scaling ({why})",
                            "Megatron-Core refuses it (transformer_config.py __post_init__, since 3db741160b of "
                            "2025-03-22: 'Delayed scaling does not support first / last layer in BF16.')",
                            "give --fp8-recipe tensorwise (or mxfp8, blockwise), or drop --first-last-layers-bf16")
    deepep = given.get("--moe-enable-deepep")
    if deepep is not None and not _given_false(deepep):
        kind = given.get("--moe-token-dispatcher-type")
        value = kind.values[0] if kind is not None and kind.values else None
        text = value.text.strip("'\"") if value is not None else "allgather"  # TransformerConfig's default
        if not (value is not None and value.unresolved) and text != "flex":
            what = f"--moe-token-dispatcher-type {text}" if value is not None else \
                "no --moe-token-dispatcher-type (Megatron-Core's default, allgather)"
            # TransformerConfig.__post_init__ from 0d389f5e99 to core_v0.19.0 transformer_config.py:1589-1591
            raise start_refusal(deepep.evidence, f"--moe-enable-deepep with {what}",
                                "Megatron-Core refuses it (transformer_config.py __post_init__, since 0d389f5e99 of "
                                "2025-02-25, core_v0.19.0 :1589-1591: 'DeepEP backend is only supported with flex "
                                "token dispatcher.')",
                                "give --moe-token-dispatcher-type flex (DeepEP) or drop --moe-enable-deepep")
    gather = given.get("--overlap-param-gather")
    if gather is not None:
        optimizer = given.get("--optimizer")
        sharded = ("--use-distributed-optimizer" in given or "--use-megatron-fsdp" in given
                   or (optimizer is not None and optimizer.values and optimizer.values[0].text == "dist_muon"))
        if not sharded:
            refuse(gather, "--overlap-param-gather without --use-distributed-optimizer", "f048bf8c08 of 2023-11-17",
                   "--overlap-param-gather only supported with distributed optimizer",
                   "add --use-distributed-optimizer or drop --overlap-param-gather")
        if "--overlap-grad-reduce" not in given:
            refuse(gather, "--overlap-param-gather without --overlap-grad-reduce", "5e993318a7 of 2023-12-26",
                   "Must use --overlap-param-gather with --overlap-grad-reduce",
                   "add --overlap-grad-reduce or drop --overlap-param-gather")
    with_step = given.get("--overlap-param-gather-with-optimizer-step")
    if with_step is not None and not _given_false(with_step):
        # megatron-core 0.19.2 megatron/training/arguments.py:1032-1040 (and since the flag came in): it needs the
        # weight-gather overlap and no distributed checkpoint (use_dist_ckpt = ckpt_format != "torch",
        # training/utils/common_utils.py:555-556; --ckpt-format defaults to torch_dist, training_config.py:486); a
        # review: Megatron-Bridge's DeepSeek-V3 H100 recipe written as Megatron-LM flags was priced
        if gather is None:
            refuse(with_step, "--overlap-param-gather-with-optimizer-step without --overlap-param-gather",
                   "the flag came in, 4e3840535b of 2024-08-23",
                   "Must use --overlap-param-gather-with-optimizer-step with --overlap-param-gather",
                   "add --overlap-param-gather (with --overlap-grad-reduce) or drop the flag")
        fmt = given.get("--ckpt-format")
        text = fmt.values[0].text.strip("'\"") if fmt is not None and fmt.values else None
        if not (fmt is not None and fmt.values and fmt.values[0].unresolved) and text != "torch":
            what = f"--ckpt-format {text}" if text else "no --ckpt-format (Megatron-LM's default, torch_dist)"
            refuse(fmt or with_step, f"--overlap-param-gather-with-optimizer-step with {what}",
                   "the flag came in, 4e3840535b of 2024-08-23",
                   "--overlap-param-gather-with-optimizer-step not supported with distributed checkpointing yet",
                   "give --ckpt-format torch or drop --overlap-param-gather-with-optimizer-step")

    impl, scope = given.get("--cuda-graph-impl"), given.get("--cuda-graph-scope") or given.get("--cuda-graph-modules")
    impl_text = impl.values[0].text.strip("'\"") if impl is not None and impl.values else None
    scopes = {w.text.strip("'\"") for w in scope.values} if scope is not None else set()
    if (impl_text == "full_iteration" or (impl_text == "local" and "full_iteration" in scopes)) and \
            "--no-check-for-nan-in-loss-and-grad" not in given and not (impl.values and impl.values[0].unresolved):
        # a QA run: --cuda-graph-impl full_iteration without the flag was priced with full graphs
        refuse(impl, f"--cuda-graph-impl {impl_text}" + (" --cuda-graph-scope full_iteration" if impl_text == "local"
                                                         else "") + " without --no-check-for-nan-in-loss-and-grad",
               "e7c55de99e of 2025-08-01 (scope full_iteration; impl full_iteration from e41b37002c of 2026-05-18, "
               "arguments.py:1235-1237 at d98e8a64dd)",
               "--no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-impl=full_iteration for training.",
               "add --no-check-for-nan-in-loss-and-grad")

    def number(flag: str) -> int | None:
        a = given.get(flag)
        return int(a.values[0].text) if a is not None and a.values and a.values[0].text.isdigit() else None

    seq, positions = number("--seq-length"), number("--max-position-embeddings")
    if seq is not None and positions is not None and positions < seq:
        refuse(given["--max-position-embeddings"], f"--max-position-embeddings {positions} below --seq-length {seq}",
               "94e2ca575c of 2020-03-27 (Megatron-DeepSpeed too)", "assert args.max_position_embeddings >= "
               "args.seq_length", f"set --max-position-embeddings {seq} or more")
    mfsdp, ckpt = given.get("--use-megatron-fsdp"), given.get("--ckpt-format")
    ckpt_format = ckpt.values[0].text.strip("'\"") if ckpt is not None and ckpt.values else None
    unknown = ckpt is not None and ckpt.values and ckpt.values[0].unresolved  # left to the environment: not refused
    if mfsdp is not None and not _given_false(mfsdp) and ckpt_format != "fsdp_dtensor" and not unknown:
        what = f"--ckpt-format {ckpt_format}" if ckpt_format else "no --ckpt-format (Megatron-LM's default, torch_dist)"
        refuse(ckpt or mfsdp, f"--use-megatron-fsdp with {what}", "the flag came in, af28b5a559 of 2025-08-21",
               "Megatron-FSDP requires the `fsdp_dtensor` checkpointing format", "give --ckpt-format fsdp_dtensor")
    if ckpt_format == "fsdp_dtensor" and (mfsdp is None or _given_false(mfsdp)):
        refuse(ckpt, "--ckpt-format fsdp_dtensor without --use-megatron-fsdp", "af28b5a559 of 2025-08-21",
               "--ckpt-format fsdp_dtensor is only tested with Megatron FSDP",
               "add --use-megatron-fsdp or give another --ckpt-format (torch_dist, the default)")
    fsdp2, pp = given.get("--use-torch-fsdp2"), number("--pipeline-model-parallel-size") or 1
    if fsdp2 is not None and "--use-distributed-optimizer" in given:
        refuse(fsdp2, "--use-torch-fsdp2 with --use-distributed-optimizer", "e1993fa6f7 of 2024-11-13",
               "--use-torch-fsdp2 is not supported with MCore's distributed optimizer",
               "drop --use-distributed-optimizer (FSDP2 shards the optimizer itself)")
    if fsdp2 is not None and pp > 1:
        refuse(fsdp2, f"--use-torch-fsdp2 with pipeline parallelism {pp}", "e1993fa6f7 of 2024-11-13",
               "--use-torch-fsdp2 is not supported with pipeline parallelism",
               "drop one (Megatron FSDP, --use-megatron-fsdp, or the distributed optimizer run with a pipeline)")
    ep = number("--expert-model-parallel-size") or 1
    if fsdp2 is not None and ep > 1:
        refuse(fsdp2, f"--use-torch-fsdp2 with expert parallelism {ep}", "e1993fa6f7 of 2024-11-13",
               "--use-torch-fsdp2 is not supported with expert parallelism",
               "drop one (Megatron FSDP, --use-megatron-fsdp, runs with expert parallelism)")
    # gradient_accumulation_fusion is on unless --no-gradient-accumulation-fusion (nothing turns it off before this)
    if fsdp2 is not None and "--no-gradient-accumulation-fusion" not in given:
        refuse(fsdp2, "--use-torch-fsdp2 without --no-gradient-accumulation-fusion", "e1993fa6f7 of 2024-11-13",
               "--use-torch-fsdp2 is not supported with gradient accumulation fusion",
               "add --no-gradient-accumulation-fusion")
    if fsdp2 is not None and "--untie-embeddings-and-output-weights" not in given:
        refuse(fsdp2, "--use-torch-fsdp2 with tied embeddings", "e1993fa6f7 of 2024-11-13",
               "--use-torch-fsdp2 requires --untie-embeddings-and-output-weights",
               "add --untie-embeddings-and-output-weights")
    tp_flag = given.get("--tensor-model-parallel-size")
    overlap = given.get("--tp-comm-overlap")
    if overlap is not None and "--sequence-parallel" in given and (tp_flag is None or number(
            "--tensor-model-parallel-size") == 1):
        # a user trial: priced with the overlap on, and a note that Megatron turns sequence parallelism off at tp 1
        refuse(overlap, "--tp-comm-overlap at tensor parallelism 1 (" + (
            f"{tp_flag.evidence}" if tp_flag is not None else "no --tensor-model-parallel-size: Megatron's default, 1")
            + "), where Megatron turns --sequence-parallel off (arguments.py: 'Disabling sequence parallelism "
            "because tensor model parallelism is disabled', since 739cb43dae of 2022-05-24)",
            "116ffddc58 of 2023-10-23",
            "Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is enabled",
            "drop --tp-comm-overlap (and --sequence-parallel) at tp 1, or use tensor parallelism")
    split_flags = [f for f in ("--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
                               "--pipeline-model-parallel-layout") if f in given]
    if len(split_flags) > 1:
        # a user trial: refused as a layout whose stage count did not match, where Megatron stops before it
        refuse(given[split_flags[1]], f"{' and '.join(split_flags)} together", "77732c3628 of 2025-06-13",
               "No more than one of the following arguments can be set at the same time: "
               "--num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank,"
               "--pipeline-model-parallel-layout", f"keep one of {', '.join(split_flags)}")
    uneven = [f for f in ("--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers") if f in given]
    if "--num-layers-per-virtual-pipeline-stage" in given and uneven:
        # a user trial: priced, a job that stops at this assert
        refuse(given["--num-layers-per-virtual-pipeline-stage"],
               f"--num-layers-per-virtual-pipeline-stage with {' and '.join(uneven)}", "ef490839e8 of 2025-02-03",
               "please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline parallel degree when "
               "enable uneven pipeline parallelism",
               "give the virtual stages as --num-virtual-stages-per-pipeline-rank")
    per_virtual, layers = number("--num-layers-per-virtual-pipeline-stage"), number("--num-layers")
    virtual = number("--num-virtual-stages-per-pipeline-rank") or (
        layers // pp // per_virtual if per_virtual and layers and layers % pp == 0 else None)
    stages = given.get("--pipeline-model-parallel-size")
    if stages is not None and stages.values and stages.values[0].unresolved:
        # a pipeline size the files leave to a variable they do not set is not Megatron's default 1 (a trial:
        # `--pipeline-model-parallel-size $PP`, PP set in a sourced env file, was refused as interleaving without a
        # pipeline); the reader names the variable below
        virtual = None
    if virtual is not None and virtual > 1:
        a = given.get("--num-layers-per-virtual-pipeline-stage") or given["--num-virtual-stages-per-pipeline-rank"]
        if pp == 1:
            refuse(a, f"an interleaved schedule ({virtual} virtual stages) without pipeline parallelism",
                   "interleaving came in (dcef906978 of 2021-02-13)", "pipeline-model-parallel size should be "
                   "greater than 1 (2 before 3ee489d9ea of 2024-05-31) with the interleaved schedule",
                   "give --pipeline-model-parallel-size, or drop the virtual stages")
        dated = given.get("--activations-checkpoint-method")
        if pp == 2 and dated is not None:  # a file of OLD_METHOD_DATES
            refuse(a, "an interleaved schedule on 2 pipeline stages in a file --activations-checkpoint-method dates "
                      f"to {OLD_METHOD_DATES} ({dated.evidence})",
                   "interleaving came in (dcef906978 of 2021-02-13) until 3ee489d9ea of 2024-05-31 "
                   "(megatron/arguments.py at bbab79f869^ :139-142)",
                   "pipeline-model-parallel size should be greater than 2 with interleaved schedule",
                   "use more than 2 stages, or drop the virtual stages")
        if pp == 2 and "--no-overlap-p2p-communication" in given:
            refuse(a, "an interleaved schedule on 2 pipeline stages with --no-overlap-p2p-communication",
                   "3ee489d9ea of 2024-05-31, and before it any interleaving on 2 stages", "when interleaved "
                   "schedule is used and p2p communication overlap is disabled, pipeline-model-parallel size should "
                   "be greater than 2", "drop --no-overlap-p2p-communication, or use more than 2 stages")
    granularity, method = given.get("--recompute-granularity"), given.get("--recompute-method")
    if granularity is not None and method is not None and granularity.values \
            and granularity.values[0].text == "selective":
        refuse(method, "--recompute-method with --recompute-granularity selective", "bbab79f869 of 2022-05-16 "
               "(Megatron-DeepSpeed too)", "recompute method is not yet supported for selective recomputing "
               "granularity", "drop --recompute-method (and --recompute-num-layers), which only full recompute reads")


def own_script(given: dict[str, Arg]) -> bool:
    """Whether an argument list is a DeepSpeed user script's own (a DeepSpeedExamples finetune_zero3.py): it names a
    DeepSpeed config and no flag of Megatron's model, of TrainingArguments' own or of DeepSpeed-Chat.  DeepSpeed
    builds its batch from the config (runtime/config.py), not from the script's --batch_size."""
    ds_config = any(f in given for f in ("--deepspeed-config", "--deepspeed_config"))
    hf = (HF_TRAINER_FLAGS - HF_GENERIC_FLAGS) | {"--gradient-accumulation-steps", "--model-name-or-path"}
    chat = {f.replace("_", "-") for f in DS_CHAT_FLAGS}
    return ds_config and not (set(given) & (MEGATRON_MODEL_FLAGS | hf | chat)) and not (
        "--deepspeed" in given and given["--deepspeed"].values)


def read_args(words: list[Word], s: Settings, typos: bool = True) -> None:
    """A Megatron-LM (or Megatron-DeepSpeed, HF Trainer) argument list: layout, batch, sharding, recompute,
    precision and recipe flags; with `typos`, an argument one typo away from one it reads is an error (a log's
    block, turned back into flags, is not checked)."""
    args = split_args(words, _MG_NARGS | _HF_NARGS)
    given = {a.flag.replace("_", "-"): a for a in args}
    if typos:  # a launch command's own arguments (not a log's block, not a recipe script's): what --out's file checks
        s.command_args += [(a.flag.replace("_", "-"), fixed_values_text(a)) for a in args]
    own_flags = own_script(given)
    typos = typos and not own_flags  # a script of the user's own parses its own flags, not Megatron's
    if typos:  # the parser refuses an unknown argument before validate_args checks the others (a user trial: a
        # misspelled --use-distributed-optimiser was reported as --overlap-param-gather lacking the optimizer)
        for a in args:
            _near_miss(a.flag.replace("_", "-") if a.flag.startswith("--deepspeed") is False else a.flag, a)
    if "--moe-shared-expert-overlap" in given and "--overlap-moe-expert-parallel-comm" in given:
        a = given["--moe-shared-expert-overlap"]
        raise InputError(f"{a.evidence}: --moe-shared-expert-overlap with --overlap-moe-expert-parallel-comm "
                         f"({given['--overlap-moe-expert-parallel-comm'].evidence}): Megatron-Core refuses the pair "
                         f"(transformer_config.py: 'disable moe_shared_expert_overlap when enabling "
                         f"overlap_moe_expert_parallel_comm'), so this job does not start; drop one")
    _refuse_validate_args(given)
    if own_flags:  # a user trial: a script's own --batch_size 4 read as the micro-batch, --output_dir as HF
        own = [a for a in args if a.flag.replace("_", "-") in OWN_SCRIPT_FLAGS]
        if own:
            s.ignored.append(f"{', '.join(a.flag for a in own)}: the script's own flags (a DeepSpeed script of the "
                             f"user's own, no Megatron or TrainingArguments flag): not read; DeepSpeed takes the batch "
                             f"from its config ({own[0].word.site.path}:{own[0].word.site.line})")
        args = [a for a in args if a not in own]
        given = {a.flag.replace("_", "-"): a for a in args}
    sharding = None
    no_reshard = None
    fsdp = None
    sp, te = given.get("--sequence-parallel"), given.get("--transformer-impl")
    recipe_state: dict = {"moot": async_switch_moot(
        f"--sequence-parallel ({sp.word.site.path}:{sp.word.site.line})" if sp is not None else None,
        f"--transformer-impl transformer_engine ({te.word.site.path}:{te.word.site.line})"
        if te is not None and te.values and te.values[0].text == "transformer_engine" else None,
        newer_than_async_switch(given))}
    rope_scaling: dict[str, Arg] = {}
    for a in args:
        f = a.flag.replace("_", "-") if a.flag.startswith("--deepspeed") is False else a.flag
        if a.flag in ("--deepspeed_config", "--deepspeed-config"):
            name = a.values[0].text if a.values else ""
            s.deepspeed_config = (name, a.evidence)
            s.deepspeed_config_arg = a.evidence
            s.deepspeed_config_word = a.values[0] if a.values else None
            continue
        if f in MODEL_ELSEWHERE:  # the model's arguments come from the checkpoint or a YAML the files do not show
            site = f"{a.word.site.path}:{a.word.site.line}"
            s.model_elsewhere = s.model_elsewhere or f"{f} ({site}): {MODEL_ELSEWHERE[f]}"
        if f == "--experimental-attention-variant":
            _refuse_attention_variant(a, given)
        if f in _MG_IGNORED:
            note = f"{f}: {_MG_IGNORED[f]} ({a.word.site.path}:{a.word.site.line})"
            if note not in s.ignored:
                s.ignored.append(note)
        if _megatron_recipe(f, a, s, recipe_state):
            continue
        if f in _MG_INT:
            name = _MG_INT[f]
            value = read_int(one_value(a).text, f, a.evidence, minimum=1 if name in (
                "tp", "pp", "cp", "ep", "etp", "vpp", "micro_batch_size", "global_batch", "seq_len", "num_layers",
                "layers_per_virtual_stage", "grad_accumulation") else 0)
            if f == "--ds-sequence-parallel-size" and value > 1:  # DeepSpeed-Ulysses: its all-to-alls over heads
                s.put("recipe.cp_comm_type", "a2a", a.evidence)
            if f == "--zero-stage" and value > 3:
                raise InputError(f"{a.evidence}: --zero-stage must be 0..3, got {value}")
            s.put(name, value, a.evidence)
        elif f == "--rotary-base":
            text = one_value(a).text
            try:
                s.put("rope_base", float(text), a.evidence)
            except ValueError:
                raise InputError(f"{a.evidence}: --rotary-base must be a number, got {text!r}") from None
        elif f in ("--use-rope-scaling", "--rope-scaling-factor"):
            rope_scaling[f] = a
        elif _model_numerics(f, a, s):
            pass
        elif f == "--use-tp-pp-dp-mapping":
            s.put("rank_order", "tp-cp-ep-pp-dp", a.evidence)
        elif f == "--multi-latent-attention":
            s.put("multi_latent_attention", True, a.evidence)
        elif f == "--moe-layer-freq":
            s.put("moe_layer_freq", one_value(a).text, a.evidence)
        elif f == "--sequence-parallel":
            s.put("sequence_parallel", True, a.evidence)
        elif f == "--use-distributed-optimizer":
            s.put("zero_stage", 1, a.evidence)
        elif f in ("--use-megatron-fsdp", "--use-torch-fsdp2"):
            fsdp = (f, a.evidence)
        elif f == "--data-parallel-sharding-strategy":
            sharding = (one_value(a).text, a.evidence)
        elif f == "--torch-fsdp2-no-reshard-after-forward":
            no_reshard = a.evidence
        elif f == "--recompute-granularity":
            value = one_value(a).text
            if value not in ("full", "selective"):
                raise InputError(f"{a.evidence}: --recompute-granularity must be full or selective, got {value!r}")
            s.put("recompute", value, a.evidence)
        elif f == "--recompute-activations":
            s.put("recompute", "selective", a.evidence)
        elif f == "--checkpoint-activations":
            s.put("recompute", "full", a.evidence)
        elif f == "--activations-checkpoint-method":
            value = one_value(a).text
            if value not in ("uniform", "block"):
                raise InputError(f"{a.evidence}: --activations-checkpoint-method must be uniform or block, got "
                                 f"{value!r}")
            s.put("recompute", "full", f"{a.evidence} ({OLD_CHECKPOINT_METHOD})")
            recipe_state["recompute_method"] = (value, a.evidence)
        elif f == "--activations-checkpoint-num-layers":
            recipe_state["recompute_num_layers"] = (read_int(one_value(a).text, f, a.evidence, minimum=1),
                                                    a.evidence)
        elif f in ("--fp8-format", "--fp8-hybrid", "--fp8-e4m3"):
            if f == "--fp8-format" and one_value(a).text not in ("e4m3", "hybrid"):
                raise InputError(f"{a.evidence}: --fp8-format must be e4m3 or hybrid, got {one_value(a).text!r}")
            s.put("precision", "fp8", a.evidence)
        elif f in ("--bf16", "--fp16") and _given_false(a):
            continue  # an HF TrainingArguments bool given False
        elif f in ("--bf16", "--fp16"):
            s.sixteen_bit = a.evidence
            if s.value("precision") != "fp8":
                s.put("precision", "bf16", a.evidence + (" (FP16, priced as BF16: the same tensor-core rate)"
                                                         if f == "--fp16" else ""))
            if f == "--fp16":
                where = f"{a.word.site.path}:{a.word.site.line}"
                s.ignored.append(f"--fp16: {FP16_MIXED}, priced as bf16 ({where})")
        elif f == "--gradient-checkpointing":  # HF TrainingArguments
            on = not a.values or one_value(a).text.lower() in ("true", "1", "yes")
            s.put("recompute", "full" if on else "none", a.evidence)
        elif f in HF_SEQ_FLAGS:
            s.put("seq_len", read_int(one_value(a).text, f, a.evidence, minimum=1),
                  f"{a.evidence} ({HF_SEQ_FLAGS[f]})")
        elif f == "--attn-implementation":
            name = one_value(a).text
            if "/" in name:  # a Hub kernel repository (transformers integrations/hub_kernels.py, `org/repo`)
                fa3 = re.search(r"flash[-_]?attn[-_]?3|fa3", name, re.I) is not None
                s.put("recipe.attention_kernel", "flash" if fa3 else "flash2",
                      f"{a.evidence} (a Hub kernel transformers loads by name: priced as "
                      f"{'FlashAttention-3' if fa3 else 'a FlashAttention-2-class kernel'})")
                continue
            if name not in HF_ATTENTION:
                raise InputError(f"{a.evidence}: --attn_implementation must be one of {', '.join(HF_ATTENTION)} "
                                 f"(transformers' attention implementations) or a Hub kernel `org/repo`, got {name!r}")
            s.put("recipe.attention_kernel", HF_ATTENTION[name],
                  f"{a.evidence} (transformers' {name} attention: {HF_ATTENTION_WHY[name]})")
        elif f == "--optimizer" and a.values and one_value(a).text not in ("adam", "adamw"):
            # the cost model has Adam's state and step only (a user trial: SGD and Muon priced as Adam, unsaid)
            s.ignored.append(f"--optimizer {one_value(a).text}: priced as Adam, its state (fp32 master weights, "
                             f"momentum and variance: 16 bytes a parameter with the 16-bit weight) and its step "
                             f"({a.word.site.path}:{a.word.site.line})")
        elif f == "--no-pipeline-parallel":
            s.put("pp", 1, a.evidence)
        elif f == "--pipeline-model-parallel-layout":
            s.put("pp_layout", one_value(a).text, a.evidence)
            s.put("recipe.pipeline_layout", one_value(a).text, a.evidence)
    _fork_pipeline_blocks(given, s)
    _batch_schedule(given, s)
    _local_spec(given, s)
    _null_tokenizer_vocab(given, s)
    _megatron_recipe_finish(s, recipe_state)
    if "--num-experts" in given:
        _half_moe_fusion({f: given[f].evidence for f in MOE_FUSION_FLAGS if f in given}, s)
    _rope_scaling(rope_scaling, s)
    deepspeed_flag = next((a for a in args if a.flag == "--deepspeed"), None)
    hf = _hf_trainer(args, s, deepspeed_flag)
    if not hf:
        _held_after_switch(args, s)
    if typos and not hf:
        _unknown_flags(args, s)
    if deepspeed_flag is None and not hf:  # Megatron's own DDP reduces the gradients (DeepSpeed's under --deepspeed)
        _gradient_width(args, s)
        _old_megatron(given, s)
        _grad_buffer_passes(given, s)
    elif deepspeed_flag is not None and not hf and not s.has("recipe.grad_buffer_passes"):
        s.put("recipe.grad_buffer_passes", 0,
              f"{deepspeed_flag.evidence} (DeepSpeed's ZeRO optimizer reduces the gradients: no Megatron-Core DDP "
              f"buffer to zero, scale and NaN-check; its own gradient copies are not priced)")
    elif hf and not s.has("recipe.grad_buffer_passes"):
        s.put("recipe.grad_buffer_passes", 0,
              f"{s.hf_trainer} (a transformers Trainer job: torch DDP, FSDP or DeepSpeed reduce its gradients, no "
              f"Megatron-Core DDP buffer to zero, scale and NaN-check; their own gradient copies are not priced)")
    if deepspeed_flag is not None and not hf:  # Megatron-DeepSpeed pipelines with DeepSpeed's PipelineEngine
        if "--no-pipeline-parallel" not in given:
            s.put("recipe.pipeline_p2p_scatter", True,
                  f"{deepspeed_flag.evidence} (DeepSpeed's PipelineEngine sends each TP rank's 1/tp share of an "
                  f"activation or gradient and all-gathers it on arrival: runtime/pipe/engine.py PartitionedTensor)")
        s.put("recipe.pipeline_p2p_blocking", True,
              f"{deepspeed_flag.evidence} (DeepSpeed's PipelineEngine sends and receives between stages one blocking "
              f"call after another: runtime/pipe/schedule.py, runtime/pipe/p2p.py)"
              if "--no-pipeline-parallel" not in given else
              f"{deepspeed_flag.evidence}; {given['--no-pipeline-parallel'].evidence} (the model is no PipelineModule: "
              f"no PipelineEngine runs and no stage sends, so this prices nothing at pp 1)")
    zero = s.entry("zero_stage")
    pipeline_module = (deepspeed_flag is not None and not hf and bool(MEGATRON_MODEL_FLAGS & {a.flag for a in args})
                       and bool(PIPELINE_MODULE_FLAGS & set(given)) and "--no-pipeline-parallel" not in given)
    bf16_stage0 = (deepspeed_flag is not None and not hf and zero is not None and zero[0] == 0
                   and s.value("precision", "") == "bf16" and not any(a.flag == "--fp16" for a in args))
    if bf16_stage0 and pipeline_module:
        # Megatron-DeepSpeed under --bf16 with ZeRO stage 0 and its PipelineModule runs DeepSpeed's BF16_Optimizer
        # BigScience's fork ran the DeepSpeed of 2022, whose BF16_Optimizer kept its gradients in fp32; DeepSpeed
        # 0.17.6 on keeps them in the model's bf16 where the JSON leaves data_types.grad_accum_dtype unset
        # (889f0ead2, #7515: get_data_types)
        bigscience = next((a for a in args if a.flag in BIGSCIENCE_FLAGS), None)
        evidence = f"{zero[1]}; {s.sources['precision']}"
        if bigscience is not None:
            evidence += (f"; {bigscience.evidence} ({BIGSCIENCE_BUFFER}, whose BF16_Optimizer keeps an fp32 "
                         f"gradient buffer)")
        deepspeed_grad_accumulation(s, True, evidence, buffer_fp32=bigscience is not None)
    elif bf16_stage0:
        deepspeed_grad_accumulation(s, False, f"{zero[1]}; {s.sources['precision']} ({DDP_BF16})")
    if deepspeed_flag is not None:
        deepspeed_grad_accumulation(s, False, deepspeed_flag.evidence)
        _megatron_deepspeed_attention(args, s, deepspeed_flag)
    if deepspeed_flag is not None and not hf:
        # DeepSpeed's engine runs the optimizer, not Megatron's: its ZeRO-1/2 optimizer and its BF16_Optimizer gather
        # the updated weights inside step(), before the next forward, and its ZeRO-0 all-reduce has a bucket of its
        # own (a QA run: BLOOM's script was priced with Megatron's overlapped gather and default bucket, its JSON as
        # DeepSpeed's, so the same job read two ways)
        if not s.has("recipe.param_gather_overlap"):
            s.put("recipe.param_gather_overlap", False,
                  f"{deepspeed_flag.evidence} (DeepSpeed's optimizer gathers the updated weights inside step(), "
                  f"before the next forward: runtime/zero/stage_1_and_2.py step -> all_gather_dp_groups, "
                  f"runtime/bf16_optimizer.py step -> all_gather_dp_groups)")
        if zero is not None and zero[0] == 0 and not s.has("recipe.ddp_bucket_params"):
            s.put("recipe.ddp_bucket_params", DEEPSPEED_ALLREDUCE_BUCKET, f"{zero[1]} ({ENGINE_BUCKET})")
    if deepspeed_flag is None and not hf and MEGATRON_MODEL_FLAGS & {a.flag for a in args}:
        s.megatron_without_deepspeed = next(a.evidence for a in args if a.flag in MEGATRON_MODEL_FLAGS)
        flash = next((a for a in args if a.flag in MDS_FLASH_FLAGS and a.flag != "--use-flash-attn"), None)
        if flash is not None and not s.has("recipe.attention_kernel"):
            # a flag only Megatron-DeepSpeed defines: its kernel runs with or without the DeepSpeed engine (a user
            # trial's --use-flash-attn-v2 without --deepspeed went unread, priced as the default FlashAttention)
            kernel = MDS_FLASH_FLAGS[flash.flag]
            package = "the flash-attn 2 package" if kernel == "flash2" else "a fused kernel"
            s.put("recipe.attention_kernel", kernel,
                  f"{flash.evidence} (Megatron-DeepSpeed's switch to {package}: megatron/arguments.py, "
                  f"deepspeedai/Megatron-DeepSpeed 4efb479d :927-936)")
    bigscience = next((a for a in args if a.flag in BIGSCIENCE_FLAGS), None)
    if deepspeed_flag is not None and bigscience is not None and not s.has("recipe.tp_async_backward"):
        s.put("recipe.tp_async_backward", False,
              f"{bigscience.evidence} (a flag of BigScience's Megatron-DeepSpeed, which microsoft/Megatron-DeepSpeed "
              f"does not define: its ColumnParallelLinear reduces the input gradient in autograd, on its own, "
              f"bigscience-workshop/Megatron-DeepSpeed megatron/mpu/layers.py ColumnParallelLinear.forward "
              f"copy_to_tensor_model_parallel_region)")
    if deepspeed_flag is not None and MEGATRON_MODEL_FLAGS & {a.flag for a in args}:
        s.megatron_deepspeed = True
        if pipeline_module:
            s.pipeline_module = deepspeed_flag.evidence
        if any(a.flag == "--num-experts" for a in args) and not s.has("recipe.moe_dispatcher"):
            # not Megatron-Core's allgather default: DeepSpeed-MoE's layer exchanges tokens with all-to-all over its
            # expert group (deepspeed/moe/sharded_moe.py MOELayer.forward, _AllToAll), and the group is
            # --moe-expert-parallel-size ranks (Megatron-DeepSpeed's flag, read as ep)
            s.put("recipe.moe_dispatcher", "alltoall",
                  f"{deepspeed_flag.evidence} (DeepSpeed-MoE dispatches with all-to-all: deepspeed/moe/sharded_moe.py "
                  f"MOELayer.forward, _AllToAll)")
        if any(a.flag == "--num-experts" for a in args) and not s.has("recipe.moe_einsum_dispatch"):
            s.put("recipe.moe_einsum_dispatch", "micro_batch",
                  f"{deepspeed_flag.evidence} (DeepSpeed-MoE dispatches and combines each micro-batch's tokens by "
                  f"one-hot mask GEMMs: deepspeed/moe/sharded_moe.py MOELayer.forward, einsum(\"sec,sm->ecm\") and "
                  f"einsum(\"sec,ecm->sm\"), each a torch.matmul)")
        if any(a.flag == "--num-experts" for a in args):
            _deepspeed_moe_gate(args, s, deepspeed_flag)
        _checkpoint_sync(args, s)
    if fsdp is not None and fsdp[0] == "--use-torch-fsdp2":
        # FSDP2 never reads --data-parallel-sharding-strategy (Megatron-FSDP's): fully_shard with
        # reshard_after_forward from --torch-fsdp2-no-reshard-after-forward, default True (training.py:2627-2629,
        # torch_fully_sharded_data_parallel.py:82-85, NVIDIA/Megatron-LM d98e8a64dd); a QA run's
        # `--use-torch-fsdp2 --data-parallel-sharding-strategy no_shard` was priced at ZeRO-0
        ignored = f"; {sharding[1]} is Megatron-FSDP's, which FSDP2 does not read" if sharding else ""
        sharding = (("optim_grads", no_reshard) if no_reshard
                    else ("optim_grads_params", f"torch FSDP2 reshards after forward unless "
                                                f"--torch-fsdp2-no-reshard-after-forward (training.py:2628){ignored}"))
    if fsdp is not None:
        strategy = sharding[0] if sharding else "optim_grads_params"
        stage = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}.get(strategy)
        if stage is None:
            raise InputError(f"{sharding[1]}: --data-parallel-sharding-strategy must be no_shard, optim, optim_grads "
                             f"or optim_grads_params, got {strategy!r}")
        s.put("zero_stage", stage, fsdp[1] if not sharding else f"{fsdp[1]}; {sharding[1]}")
        if fsdp[0] == "--use-torch-fsdp2":
            why = f"{fsdp[1]} (FSDP2 reduce-scatters during backward and prefetches the next gathers)"
            s.put("recipe.dp_overlap", True, why)
            s.put("recipe.param_gather_overlap", True, why)
        elif stage >= 2:
            why = (f"{fsdp[1]} (Megatron-FSDP turns the overlapped reduce-scatter and gather on when it shards "
                   f"gradients: megatron_fsdp.py MegatronFSDP __init__, megatron-core 0.19.2)")
            s.put("recipe.dp_overlap", True, why)
            s.put("recipe.param_gather_overlap", True, why)
        if fsdp[0] == "--use-megatron-fsdp" and stage == 3:
            _megatron_fsdp_hybrid(args, s)
    _moe_grouped_gemm(args, s)
    if (s.has("num_query_groups") and not any(a.flag in ("--group-query-attention", "--num-key-value-heads")
                                               for a in args)):
        s.take("num_query_groups")  # Megatron reads --num-query-groups only under --group-query-attention
    s.megatron_lm = True
    # (DeepSpeed's own flags, `--deepspeed` or `--deepspeed_config` alone: a user trial's SuperOffload script passed
    # only the config and was priced as a ZeRO-0 job of defaults)
    if any(a.flag in ("--deepspeed", "--deepspeed_config", "--deepspeed-config") for a in args) \
            and not MEGATRON_MODEL_FLAGS & set(given):
        s.megatron_lm = False  # a training script of the user's own that DeepSpeed runs: its JSON holds the layout


UNKNOWN_FLAG_NEAR = 0.8
"""difflib similarity at or above which the nearest flag Megatron-LM takes is named beside an unknown one."""


FORK_BLOCKS = ("IEIT-Yuan/Yuan-2.0 2f59b3f megatron/arguments.py:117-121 (it asserts len(blocks) == pp and "
               "sum(blocks) == num_layers) and megatron/model/transformer.py:1492-1495 (stage k builds blocks[k] "
               "layers)")
"""Where a fork's explicit pipeline split (`--pipeline-model-parallel-blocks`) is defined and checked."""
FORK_LAYOUT_FLAGS = frozenset({"--pipeline-model-parallel-blocks", "--pipeline-model-parallel-method"})
"""Flags no NVIDIA or Microsoft Megatron defines that the audit reads (a fork's), kept out of the unknown keys."""


def _fork_pipeline_blocks(given: dict[str, Arg], s: Settings) -> None:
    """A fork's explicit uneven split, `--pipeline-model-parallel-blocks 2,2,...,3` (Yuan-2.0, with
    `--pipeline-model-parallel-method block`), as the pipeline layout it builds: stage k holds blocks[k] layers, the
    embedding on the first and the loss on the last (a user trial's 42 layers on 16 stages were refused by stock
    Megatron-LM's even-split rule, which this fork does not apply)."""
    a = given.get("--pipeline-model-parallel-blocks")
    if a is None or s.has("recipe.pipeline_layout"):
        return
    text = " ".join(v.text for v in a.values) if len(a.values) > 1 else one_value(a).text
    try:
        blocks = [int(x) for x in re.split(r"[,\s]+", text.strip()) if x]
    except ValueError:
        raise InputError(f"{a.evidence}: --pipeline-model-parallel-blocks {text!r}; the fork takes layer counts per "
                         f"stage, comma-separated ({FORK_BLOCKS})") from None
    pp, layers = s.value("pp", 1), s.value("num_layers", None)
    if len(blocks) != pp or (layers is not None and sum(blocks) != layers) or min(blocks, default=0) < 1:
        raise InputError(f"{a.evidence}: --pipeline-model-parallel-blocks gives {len(blocks)} stages of "
                         f"{sum(blocks)} layers, but the job has pp {pp} and {layers} layers; the fork asserts both "
                         f"({FORK_BLOCKS}), so this job does not start: give one count per stage, summing to "
                         f"{layers}")
    layout = "E" + "|".join("t" * b for b in blocks) + "L"
    ev = f"{a.evidence} (a fork's explicit split: {FORK_BLOCKS})"
    s.put("pp_layout", layout, ev)
    s.put("recipe.pipeline_layout", layout, ev)


def _unknown_flags(args: list[Arg], s: Settings) -> None:
    """Each flag, as written, that no version of Megatron-LM or Megatron-DeepSpeed defines (readers.megatron_flags)
    into `unknown_keys`: their parser refuses it ('unrecognized arguments') unless the entry script adds it, and the
    job is priced without it.  A flag Megatron-LM takes spelt with `_` for `-` (`--micro_batch_size`) is an error:
    the reader took it for the dashed one, Megatron-LM stops at it (a review: both went unremarked, the second priced
    as --micro-batch-size).  Sure typos of a flag the audit reads are errors already (_near_miss)."""
    seen = set()
    for a in args:
        if a.flag in MEGATRON_FLAGS or not a.flag.startswith("--") or a.flag in seen or a.flag in FORK_LAYOUT_FLAGS:
            continue
        seen.add(a.flag)
        dashed = a.flag.replace("_", "-")
        if dashed in MEGATRON_FLAGS:  # read as the dashed flag above, where Megatron-LM stops at it
            raise InputError(f"{a.evidence}: unknown argument {a.flag}; Megatron-LM spells it {dashed} and refuses "
                             f"this spelling (argparse: 'unrecognized arguments'), so this launch would not start: "
                             f"write {dashed}")
        near = next(
            iter(difflib.get_close_matches(a.flag, MEGATRON_FLAGS, n=1, cutoff=UNKNOWN_FLAG_NEAR)), None)
        s.unknown_keys.append(UnknownKey(key=a.flag, file=str(a.word.site.path), line=a.word.site.line,
                                         suggestion=near, megatron=True))


def _megatron_lm_defaults(s: Settings) -> None:
    """Recipe values Megatron-LM runs when its arguments leave them out, where placement's Recipe defaults to
    another, each with the source that says so; applied to the merged files of a Megatron-LM job only (a
    Megatron-Bridge config has its own defaults, a Megatron-DeepSpeed job, `--deepspeed`, DeepSpeed's)."""
    if not s.megatron_lm or s.bridge or s.has("recipe.pipeline_p2p_blocking"):
        return
    if not s.has("recipe.dp_overlap"):
        s.put("recipe.dp_overlap", False,
              "default (Megatron-LM's --overlap-grad-reduce is off unless given: megatron/training/arguments.py "
              "store_true, megatron-core DistributedDataParallelConfig.overlap_grad_reduce False): the gradient "
              "reduction runs after the last backward")
    if not s.has("recipe.param_gather_overlap"):
        s.put("recipe.param_gather_overlap", False,
              "default (Megatron-LM's --overlap-param-gather is off unless given: megatron/training/arguments.py "
              "store_true, DistributedDataParallelConfig.overlap_param_gather False): the distributed optimizer "
              "all-gathers the updated weights after its step, before the next forward")
    if (s.value("vpp", 1) or 1) > 1 and s.value("recipe.param_gather_overlap", False) \
            and not s.has("recipe.align_param_gather"):
        s.put("recipe.align_param_gather", True,
              "default (Megatron-LM's command line aligns an interleaved pipeline's weight gathers unless "
              "--no-align-param-gather: megatron/training/arguments.py, core_r0.9.0 on): each rank gathers its "
              "first two chunks whole when the schedule starts, and chunk 0's first forward waits for its whole "
              "gather")
    if s.value("precision", "") == "fp8" and not s.has("recipe.fp8_recipe"):
        s.put("recipe.fp8_recipe", "tensorwise",
              "default (megatron-core TransformerConfig.fp8_recipe is 'delayed' when --fp8-recipe is not given: "
              "per-tensor scaling, priced as tensorwise)")


MODEL_ELSEWHERE = {
    "--use-checkpoint-args": "Megatron-LM loads the model's arguments from the checkpoint before validate_args "
                             "(arguments.py parse_and_validate_args, checkpointing.py load_args_from_checkpoint, "
                             "core_v0.19.0)",
    "--yaml-cfg": "Megatron-LM reads its arguments from the YAML file (arguments.py load_yaml)",
}
"""Megatron-LM flags under which the model's arguments come from a file the audit does not read: its defaults for
what the launch leaves out (`model_defaults`) do not apply (a review: such a launch was refused)."""
MEGATRON_MODEL_DEFAULTS_WHERE = "megatron/training/arguments.py validate_args, core_v0.19.0 :1280-1294"
"""Where Megatron-LM fills the model arguments a launch leaves out (Megatron-DeepSpeed's arguments.py the same)."""


def layer_pattern(text: str, layers: int, flag: str, evidence: str) -> list[bool]:
    """Megatron-LM's moe_freq_type pattern of `layers` layers (arguments.py, the type of --moe-layer-freq and
    --window-attn-skip-freq): a list expression of 0s and 1s ("([1]*3+[0])*12", "[1,0,1]"), evaluated over list
    literals, `+` and `*` only (Megatron evals it), which must have one entry per layer."""
    import ast

    def value(node: ast.AST):
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.List):
            return [value(e) for e in node.elts]
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
            left, right = value(node.left), value(node.right)
            # a list's length bounded before it is built: `[1]*1000000000` would allocate gigabytes first
            lists = [x for x in (left, right) if isinstance(x, list)]
            times = [x for x in (left, right) if isinstance(x, int)]
            size = (len(lists[0]) * times[0] if len(lists) == 1 and times else 0) if isinstance(node.op, ast.Mult) \
                else sum(len(x) for x in lists)
            if size > MAX_PATTERN:
                raise ValueError(text)
            return left + right if isinstance(node.op, ast.Add) else left * right
        raise ValueError(ast.dump(node))

    try:
        out = value(ast.parse(text.strip(), mode="eval").body)
        if not isinstance(out, list) or not all(isinstance(x, int) for x in out):
            raise ValueError(text)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        raise InputError(f"{evidence}: {flag} {text!r} is neither an integer nor a list expression of 0s and 1s "
                         f"(\"([1]*3+[0])*12\"), which Megatron-LM's moe_freq_type takes") from None
    if len(out) != layers:
        raise InputError(f"{evidence}: {flag} {text!r} has {len(out)} entries for {layers} layers; Megatron-LM "
                         f"asserts one per layer")
    return [bool(x) for x in out]


MAX_PATTERN = 100_000
"""Entries a layer pattern may have (no model has a tenth of that many layers)."""
WINDOW_RULE = "Megatron-Core transformer/utils.py is_layer_window_attention"


def window_layers(s: Settings) -> None:
    """The sliding-window layers a Megatron-LM launch that states its model builds (a user trial: placement's own
    Mistral file passed --window-attn-skip-freq 1, under which no layer has the window, and was priced and audited
    with all 32): --window-size on every layer without --window-attn-skip-freq, on layer l (from 1) where
    l % N != 0 with N, on the pattern's 1s with a list; none without --window-size."""
    layers = s.value("num_layers")
    if layers is None or s.bridge:
        return
    size, skip = s.value("window_size_text"), s.value("window_skip_text")
    if size is None:
        s.put("sliding_window_layers", 0, f"no --window-size ({s.sources['num_layers']}): full attention on every "
                                          f"layer ({WINDOW_RULE}: no window_size, no window)")
        return
    size_ev = s.sources["window_size_text"]
    try:
        left = int(size.replace("(", "").replace(")", "").split(",")[0])
    except ValueError:
        raise InputError(f"{size_ev}: --window-size {size!r} is not a (left, right) pair of integers") from None
    if skip is None:
        windowed, why = layers, "no --window-attn-skip-freq: every layer"
    else:
        skip_ev = s.sources["window_skip_text"]
        if skip.strip().isdigit():
            every = int(skip)
            if every < 1:
                raise InputError(f"{skip_ev}: --window-attn-skip-freq must be at least 1, got {every}")
            windowed = sum(1 for n in range(1, layers + 1) if n % every)
            why = f"{skip_ev}: layer l (from 1) has it where l % {every} != 0"
        else:
            windowed = sum(layer_pattern(skip, layers, "--window-attn-skip-freq", skip_ev))
            why = f"{skip_ev}: the pattern's 1s"
    s.put("sliding_window_layers", windowed, f"{size_ev}; {why} ({WINDOW_RULE}): {windowed} of {layers} layers")
    if windowed and left >= 0:
        s.put("sliding_window", left + 1, f"{size_ev} (Megatron's left {left} tokens, the query's own besides)")


MLA_DEFAULTS = (("kv_lora_rank", 32, "--kv-lora-rank"), ("qk_head_dim", 128, "--qk-head-dim"),
                ("qk_pos_emb_head_dim", 64, "--qk-pos-emb-head-dim"), ("v_head_dim", 128, "--v-head-dim"))
"""Megatron-LM's MLA arguments a launch with --multi-latent-attention leaves out, at their argparse defaults
(megatron/training/arguments.py core d98e8a64 :3548-3557; --q-lora-rank's is None, no query compression)."""


def _moe_and_mla_defaults(s: Settings) -> None:
    """The MoE layers and the MLA widths a Megatron-LM launch trains, for the audit to compare with --model (a user
    trial: Megatron-LM's DeepSeek-V3 script without --moe-layer-freq, with it at [1]*61, or with another
    --kv-lora-rank and shared-expert width, was priced as DeepSeek-V3 each time).  --moe-layer-freq N makes layer i
    MoE where i % N == 0, a list expression names each layer; without it every layer is MoE (default 1: arguments.py
    :3520, gpt_layer_specs.py get_moe_layer_pattern :647-657).  Megatron-DeepSpeed's --expert-interval is read
    elsewhere (_deepspeed_moe_gate)."""
    layers = s.value("num_layers")
    if s.has("num_experts") and layers is not None and not s.has("num_moe_layers") and not s.megatron_deepspeed:
        text, where = s.value("moe_layer_freq"), s.sources.get("moe_layer_freq")
        if text is None:
            text, where = "1", (f"default ({s.sources['num_experts']} without --moe-layer-freq: Megatron-LM's "
                                f"default 1 makes every layer MoE, arguments.py :3520)")
        if "[" in text:
            count = sum(layer_pattern(text, layers, "--moe-layer-freq", where))
        else:
            every = read_int(text, "--moe-layer-freq", where, minimum=1)
            count = len(range(0, layers, every))
        s.put("num_moe_layers", count, f"{where}: {count} MoE layers of {layers} (gpt_layer_specs.py "
                                       f"get_moe_layer_pattern)")
    if s.has("num_experts") and not s.has("moe_shared_expert_intermediate_size") and not s.megatron_deepspeed:
        s.put("moe_shared_expert_intermediate_size", 0,
              f"default ({s.sources['num_experts']} without --moe-shared-expert-intermediate-size: no shared expert, "
              f"Megatron-LM's None)")
    if not s.has("multi_latent_attention") and s.has("num_layers") and not s.megatron_deepspeed:
        s.put("multi_latent_attention", False, f"default (no --multi-latent-attention beside "
                                               f"{s.sources['num_layers']}: standard attention)")
    if s.value("multi_latent_attention"):
        for name, default, flag in MLA_DEFAULTS:
            if not s.has(name):
                s.put(name, default, f"default (no {flag} beside {s.sources['multi_latent_attention']}: Megatron-LM's "
                                     f"{default}, arguments.py :3548-3557)")


def model_defaults(s: Settings) -> None:
    """The model dimensions Megatron-LM (and Megatron-DeepSpeed) trains when a launch that states its model
    (--hidden-size, --num-attention-heads) leaves them out, each with its source, for the audit to compare with
    --model: --ffn-hidden-size 4 x hidden (int(4h x 2/3 / 64) x 64 under --swiglu), --kv-channels hidden / heads,
    one K/V head per query head without --group-query-attention (TransformerConfig num_query_groups None), and
    GeLU without an activation switch.  A user trial: a llama3-8b audit of a script without --swiglu,
    --ffn-hidden-size and --group-query-attention priced Llama 3 8B while the job trains a 4h GeLU MHA GPT.
    Not for a Megatron-Bridge config, whose model provider has its own defaults."""
    if not s.megatron_lm or s.bridge or s.hf_trainer or s.hf_precision is not None or s.model_elsewhere:
        return  # a variable the files do not set, --use-checkpoint-args or --yaml-cfg may state what is left out
    _moe_and_mla_defaults(s)
    model_args = ("num_layers", "hidden_size", "num_attention_heads")
    if not any(s.has(n) for n in model_args):
        # Megatron-LM requires them (arguments.py validate_args _check_arg_is_not_none, core_v0.19.0 :1314-1317): a
        # user trial's `torchrun pretrain_gpt.py --lr 1e-4` was priced as --model's job with placement's defaults
        s.refusal = s.refusal or (
            f"{s.path}: the Megatron launch states none of --num-layers, --hidden-size, --num-attention-heads: "
            f"Megatron-LM requires them (megatron/training/arguments.py validate_args), so this job does not start, "
            f"and nothing of its model is read; give the script that launches the job, its model arguments included")
    else:
        # ...and one left out is the same refusal (a user trial: a script without --num-layers was priced with
        # --model's 32 layers, unsaid); so is a launch without a sequence length (validate_args asserts
        # encoder_seq_length where --seq-length is not given, :1306-1311)
        missing = [flag for flag, name in (("--num-layers", "num_layers"), ("--hidden-size", "hidden_size"),
                                           ("--num-attention-heads", "num_attention_heads"),
                                           ("--seq-length", "seq_len")) if not s.has(name)]
        if missing:
            s.refusal = s.refusal or (
                f"{s.path}: the Megatron launch states no {', '.join(missing)}: Megatron-LM requires "
                f"{'it' if len(missing) == 1 else 'them'} (megatron/training/arguments.py validate_args, core_v0.19.0 "
                f":1273-1277 required_args, :1306-1311), so this job does not start, and placement takes no model "
                f"dimension from --model in its place; add {', '.join(missing)} to the script that launches the job")
    if not (s.has("hidden_size") and s.has("num_attention_heads")):
        return
    hidden, heads = s.value("hidden_size"), s.value("num_attention_heads")
    said = f"{s.sources['hidden_size']}"
    if not s.has("precision"):
        s.refusal = s.refusal or fp32_refusal(
            said, "no --bf16 or --fp16: Megatron-LM trains this job in fp32 "
                  "(megatron/training/arguments.py: params_dtype torch.float unless --fp16 or --bf16)",
            "add --bf16 (or --fp16) to the launch to audit it as the 16-bit job it should be")
    elif s.value("precision") == "fp8" and not s.sixteen_bit:
        # FP8 GEMMs over fp32 weights: Float16Module wraps the model only under --fp16/--bf16 (training.py), so the
        # weights, gradients and the non-GEMM work stay fp32 (a user trial: priced as the bf16 + FP8 job)
        s.refusal = s.refusal or (
            f"{s.sources['precision']}: FP8 without --bf16 or --fp16: Megatron-LM keeps the weights, gradients and "
            f"every non-GEMM op in fp32 (params_dtype torch.float; megatron/training/training.py wraps the model in "
            f"Float16Module only under --fp16/--bf16), which placement does not price (it prices FP8 GEMMs over "
            f"16-bit weights: the memory and the element-wise work would be about half of the job's); add --bf16 "
            f"beside the FP8 flags, as Megatron's FP8 recipes do")
    activation = s.value("activation")
    if activation is None:
        s.put("activation", FfnKind.GELU.value,
              f"default (no --swiglu, --quick-geglu or --squared-relu: Megatron-LM's GeLU MLP; hidden size from "
              f"{said})")
    if not s.has("ffn_hidden_size"):
        swiglu = activation == FfnKind.SWIGLU.value
        ffn = int((4 * hidden * 2 / 3) / 64) * 64 if swiglu else 4 * hidden
        rule = "int(4 x hidden x 2/3 / 64) x 64 under --swiglu" if swiglu else "4 x hidden"
        s.put("ffn_hidden_size", ffn,
              f"default (no --ffn-hidden-size: Megatron-LM's {rule} = {ffn}, hidden {hidden} from {said}; "
              f"{MEGATRON_MODEL_DEFAULTS_WHERE})")
    if not s.has("kv_channels") and hidden % heads == 0:
        s.put("kv_channels", hidden // heads,
              f"default (no --kv-channels: Megatron-LM's hidden / heads = {hidden} / {heads}; "
              f"{MEGATRON_MODEL_DEFAULTS_WHERE})")
    if not s.has("num_query_groups"):
        s.put("num_query_groups", heads,
              f"default (no --group-query-attention: Megatron-LM gives every one of the {heads} attention heads "
              f"its own K/V head; TransformerConfig num_query_groups None)")


MDS_MOE = "microsoft/Megatron-DeepSpeed megatron/arguments.py (main): --topk default 1 (:612), " \
          "--moe-train-capacity-factor default 1.0 (:913), token dropping on unless --disable-moe-token-dropping (:910)"


def _deepspeed_moe_gate(args: list[Arg], s: Settings, deepspeed_flag: Arg) -> None:
    """A Megatron-DeepSpeed MoE job's gate (a user trial: neither was read): `--topk` is the router's top-k, 1 where
    unset (compared with --model's as Megatron's --moe-router-topk is); tokens above `--moe-train-capacity-factor`
    (default 1.0) x the average per expert are dropped unless --disable-moe-token-dropping (DeepSpeed-MoE's
    top1gating/top2gating with drop_tokens): recipe moe_capacity_factor, None where dropless."""
    flags = {a.flag: a for a in args}
    interval, layers = flags.get("--expert-interval"), s.value("num_layers")
    if layers is not None:  # every `interval`-th layer is an MoE layer (megatron/model/transformer.py)
        every = read_int(one_value(interval).text, "--expert-interval", interval.evidence, minimum=1) if interval \
            else 2
        where = interval.evidence if interval else (f"{deepspeed_flag.evidence} (Megatron-DeepSpeed's default "
                                                    f"--expert-interval 2)")
        s.put("num_moe_layers", layers // every, f"{where}: every {every} layer(s) MoE, {layers} // {every} "
                                                 f"(megatron/model/transformer.py get_num_experts_per_layer)")
    topk = flags.get("--topk")
    if topk is not None:
        s.put("moe_router_topk", read_int(one_value(topk).text, "--topk", topk.evidence, minimum=1), topk.evidence)
    elif not s.has("moe_router_topk"):
        s.put("moe_router_topk", 1, f"{deepspeed_flag.evidence} (Megatron-DeepSpeed's default --topk 1: {MDS_MOE})")
    dropless = flags.get("--disable-moe-token-dropping")
    factor = flags.get("--moe-train-capacity-factor")
    if dropless is not None:
        if factor is not None:
            s.ignored.append(f"--moe-train-capacity-factor ({factor.evidence}): no token is dropped under "
                             f"--disable-moe-token-dropping ({dropless.evidence})")
        return
    if factor is not None:
        s.put("recipe.moe_capacity_factor", positive_number(factor, "--moe-train-capacity-factor"), factor.evidence)
    else:
        s.put("recipe.moe_capacity_factor", 1.0, f"{deepspeed_flag.evidence} (Megatron-DeepSpeed drops tokens above "
                                                  f"its default --moe-train-capacity-factor 1.0: {MDS_MOE})")


def _megatron_fsdp_hybrid(args: list[Arg], s: Settings) -> None:
    """Megatron-FSDP's hybrid mode (HSDP): `--num-distributed-optimizer-instances N` > 1 shards the weights, gradients
    and optimizer state within dp x cp / N ranks and replicates them over N (mcore_fsdp_adapter.py _init_dist_index:
    enable_hsdp, dp_shard_dim "dp_cp" the intra-partial group, dp_outer_dim the inter-instance group; parallel_state
    carves the intra-partial groups as contiguous slices of the dp-cp ranks, so N dividing dp leaves dp / N whole dp
    ranks in each; NVIDIA/Megatron-LM d98e8a64dd), read as dp_replicate N; `--outer-dp-sharding-strategy optim`
    shards the optimizer state over the instances too (DistributedDataParallelConfig.outer_dp_sharding_strategy,
    'no_shard' by default), recipe.optimizer_over_replicas.  A QA trial: a launch with N 4 on 32 GPUs was priced as
    ZeRO-3 over all 32, its weights, gradients and optimizer state a quarter of what each GPU holds."""
    inst = next((a for a in reversed(args) if a.flag == "--num-distributed-optimizer-instances"), None)
    if inst is None:
        return
    n = read_int(one_value(inst).text, inst.flag, inst.evidence, minimum=1)
    if n == 1:
        return
    s.put("dp_replicate", n, f"{inst.evidence} (Megatron-FSDP's hybrid mode: shards within dp / {n}, replicates over "
                             f"{n}: mcore_fsdp_adapter.py _init_dist_index, enable_hsdp)")
    s.ignored[:] = [x for x in s.ignored if not x.startswith("--num-distributed-optimizer-instances:")]
    outer = next((a for a in reversed(args) if a.flag == "--outer-dp-sharding-strategy"), None)
    if outer is not None:
        value = one_value(outer).text
        if value not in ("no_shard", "optim"):
            raise InputError(f"{outer.evidence}: --outer-dp-sharding-strategy must be no_shard or optim, got "
                             f"{value!r}")
        if value == "optim":
            s.put("recipe.optimizer_over_replicas", True,
                  f"{outer.evidence} (the optimizer state sharded over the {n} instances too: "
                  f"DistributedDataParallelConfig.outer_dp_sharding_strategy)")


def _moe_grouped_gemm(args: list[Arg], s: Settings) -> None:
    """An MoE job without --moe-grouped-gemm runs Megatron-Core's SequentialMLP, one GEMM pair per local expert
    in a Python loop (TransformerConfig.moe_grouped_gemm False): noted, priced as grouped GEMMs."""
    flags = {a.flag for a in args}
    experts = next((a for a in args if a.flag == "--num-experts"), None)
    if experts is not None and "--moe-grouped-gemm" not in flags and "--deepspeed" not in flags:
        s.ignored.append(f"no --moe-grouped-gemm: Megatron-Core runs SequentialMLP, a Python loop of per-expert "
                         f"GEMMs (priced as grouped GEMMs; {experts.evidence})")


BIGSCIENCE_FLAGS = frozenset({"--sync-tp-duplicated-parameters", "--embed-layernorm", "--pp-partition-method",
                              "--kill-switch-path", "--pad-vocab-size-to"})
"""Flags of BigScience's Megatron-DeepSpeed (bigscience-workshop/Megatron-DeepSpeed, BLOOM's trainer) that
microsoft/Megatron-DeepSpeed does not define: a script passing one runs that fork, whose tensor-parallel backward is
synchronous (a user trial: tr11-176B-ml.slurm audited with the async backward its calibration row does not have)."""
MEGATRON_MODEL_FLAGS = frozenset({"--num-layers", "--hidden-size", "--tensor-model-parallel-size",
                                  "--pipeline-model-parallel-size"})
"""Flags only a Megatron(-DeepSpeed) model script takes: with --deepspeed, a Megatron-DeepSpeed job, not a model
script of the user's own that DeepSpeed runs."""


def _checkpoint_sync(args: list[Arg], s: Settings) -> None:
    """Megatron-DeepSpeed's --synchronize-each-layer: DeepSpeed's checkpointing synchronizes around every checkpointed
    layer, but only where --deepspeed-activation-checkpointing hands the checkpointing to DeepSpeed
    (megatron/initialize.py _set_deepspeed_activation_checkpointing, bigscience-workshop/Megatron-DeepSpeed
    8387ae17)."""
    sync = next((a for a in args if a.flag == "--synchronize-each-layer"), None)
    chunk = next((a for a in args if a.flag == "--checkpoint-num-layers"), None)
    deepspeed_ckpt = any(a.flag == "--deepspeed-activation-checkpointing" for a in args)
    if chunk is not None and deepspeed_ckpt:
        s.put("recipe.checkpoint_interval", read_int(one_value(chunk).text, "--checkpoint-num-layers",
                                                     chunk.evidence, minimum=1), chunk.evidence)
    if sync is None:
        return
    if deepspeed_ckpt:
        s.put("recipe.checkpoint_sync", True, sync.evidence)
    else:
        s.ignored.append(f"--synchronize-each-layer without --deepspeed-activation-checkpointing: Megatron's own "
                         f"checkpointing does not read it ({sync.evidence})")


_SCHEDULE_ITEM = re.compile(r"(\d+(?:\.\d+)?)([KMBT]?):(\d+)")
_SCHEDULE_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def _batch_schedule(given: dict[str, Arg], s: Settings) -> None:
    """--step-batch-size-schedule "THRESHOLD:BS ..." (megatron/training/config/training_config.py, Megatron-LM
    d98e8a64): the global batch steps up at each threshold (tokens, or samples); the job is priced at its last batch,
    as a ramp-up is, and said.  With --global-batch-size too Megatron-LM refuses to start (arguments.py: 'Cannot
    specify both --step-batch-size-schedule and --global-batch-size')."""
    a = given.get("--step-batch-size-schedule")
    if a is None:
        return
    gbs = given.get("--global-batch-size")
    if gbs is not None:
        raise InputError(f"{a.evidence}: --step-batch-size-schedule with --global-batch-size ({gbs.evidence}): "
                         f"Megatron-LM refuses the pair ('Cannot specify both --step-batch-size-schedule and "
                         f"--global-batch-size', megatron/training/arguments.py), so this job does not start; drop one")
    text = one_value(a).text
    items = text.split()
    parsed = [_SCHEDULE_ITEM.fullmatch(x) for x in items]
    if not items or not all(parsed):
        bad = next((x for x, m in zip(items, parsed, strict=True) if m is None), text)
        raise InputError(f"{a.evidence}: --step-batch-size-schedule item {bad!r} is not THRESHOLD:BATCH (a number "
                         f"with an optional K/M/B/T suffix, a colon, a batch size: \"0:768 250B:1536\")")
    steps = sorted((float(m.group(1)) * _SCHEDULE_SUFFIX[m.group(2)], int(m.group(3)), m.group(1) + m.group(2))
                   for m in parsed if m)
    last = steps[-1][1]
    if last < 1:
        raise InputError(f"{a.evidence}: --step-batch-size-schedule ends at batch {last}; a batch is at least 1")
    s.put("global_batch", last, f"{a.evidence} (the schedule's last batch size: priced at it)")
    if len({b for _, b, _ in steps}) > 1:
        where = f"{a.word.site.path}:{a.word.site.line}"
        s.ignored.append(f"--step-batch-size-schedule: the global batch steps up to {last} "
                         f"({', '.join(f'{b} from {x}' for _, b, x in steps)}); priced at the last batch, earlier "
                         f"steps run smaller ones ({where})")


def _given_false(a: Arg) -> bool:
    """A switch of an HF-style script given a false value (`--bf16 False`, `--offload 0`), which leaves it off; bare,
    or with any other value, it is on."""
    return bool(a.values) and one_value(a).text.lower() in ("false", "0", "no")


def check_hf_fsdp(where: str, value: str) -> None:
    """The InputError for an HF Trainer's `--fsdp VALUE` that turns its own FSDP on (not "" / False), which the audit
    does not read; nothing for a value that leaves it off."""
    value = value.strip().strip("\"'")
    if value in ("", "False", "false"):
        return
    raise InputError(f"{where}: --fsdp {value!r} runs the HF Trainer's own FSDP (torch FullyShardedDataParallel "
                     f"through accelerate), which `placement audit` does not read: it reads DeepSpeed under the "
                     f"Trainer (--deepspeed CONFIG); price the layout with `placement evaluate --zero 3` (full_shard) "
                     f"or --zero 2 (shard_grad_op) instead")


def _held_after_switch(args: list[Arg], s: Settings) -> None:
    """A variable the files do not set, after a Megatron switch (`--use-flash-attn $EXTRA_ARGS`): argparse takes the
    switch alone, so the variable's words are more arguments, which the audit does not read (a review: they were
    dropped unsaid).  HF TrainingArguments' bools take a value (`--bf16 $BF16`) and Megatron-DeepSpeed's --deepspeed
    is read as the Trainer's config path when it has one: neither is checked here."""
    for a in args:
        if _MG_NARGS.get(a.flag.replace("_", "-")) != 0 or a.flag == "--deepspeed":
            continue
        held = [v for v in a.values if v.unresolved and WHOLE_VARIABLE.fullmatch(v.text)]
        if held:
            warn_held_arguments(held, s, f", after the switch {a.flag}, which takes no value")


MULTIMODAL_FLAG = re.compile(r"vision|image|video|audio|visual|modality|^--mm[-_]|[-_]mm[-_]")
"""A script's own flag of a multimodal model (LLaVA's --vision_tower, --mm_projector_type, --image_aspect_ratio)."""


def _hf_trainer(args: list[Arg], s: Settings, deepspeed_flag: Arg | None) -> bool:
    """Whether a HuggingFace Trainer script takes these arguments: its `--deepspeed` takes the config's path
    (TrainingArguments.deepspeed, where Megatron-DeepSpeed's is a switch beside --deepspeed_config), or it passes
    TrainingArguments flags no Megatron script has (HF_TRAINER_FLAGS).  Records the config path the job runs."""
    path = deepspeed_flag.values[0] if deepspeed_flag is not None and deepspeed_flag.values else None
    flags = {a.flag.replace("_", "-"): a for a in args}
    marks = [flags[f] for f in sorted(HF_TRAINER_FLAGS & set(flags))]
    if path is None and not marks:
        return False
    s.hf_trainer = (deepspeed_flag if path is not None else marks[0]).evidence
    if path is not None:
        s.deepspeed_config = (path.text if not path.unresolved else "", deepspeed_flag.evidence)
        s.deepspeed_config_word = path
        if path.unresolved:
            s.warnings.append(f"the DeepSpeed config the job reads is {path.unresolved}, which the files do not set "
                              f"({deepspeed_flag.evidence}): whether the JSON audited is that file is not known")
    if "--torch-compile" not in flags and not s.has("recipe.loss_eager_float32"):
        # a user trial: an HF Trainer job was priced with 6 bytes a logit, and its best plan ran out of memory by 6 GiB
        s.put("recipe.loss_eager_float32", True,
              f"{s.hf_trainer} (a transformers model computes its loss in ForCausalLMLoss, which upcasts the logits "
              f"with .float() and runs PyTorch's cross_entropy eagerly: transformers src/transformers/loss/"
              f"loss_utils.py; nothing here sets --torch_compile)")
    fsdp = flags.get("--fsdp")
    if fsdp is not None and fsdp.values:
        check_hf_fsdp(fsdp.evidence, one_value(fsdp).text)
    # a flag set off: False / 0 (DeepSpeed-Chat's --lora_dim 0) / full / 16-bit (`--bits 16`)
    peft = [(f, PEFT_FLAGS[f]) for f in sorted(set(flags) & set(PEFT_FLAGS))
            if not flags[f].values or one_value(flags[f]).text.lower() not in ("false", "0", "no", "full", "16", "32")]
    if peft:
        what = sorted({kind for _, kind in peft})
        quantized = " over quantized base weights" if any("bit" in k or "QLoRA" in k for k in what) else ""
        where = ", ".join(flags[f].evidence for f, _ in peft[:2])
        s.warnings.append(f"{', '.join(what)} ({where}): the job trains adapters{quantized}, but the estimate prices "
                          f"full training of every weight (their gradients, Adam state and data-parallel traffic, "
                          f"which adapter training nearly drops): read its step and memory as those of a full "
                          f"fine-tune of the model")
    multimodal = [a for a in args if MULTIMODAL_FLAG.search(a.flag)]
    if multimodal:  # a user trial: LLaVA's --vision_tower and projector flags went unmentioned
        names = ", ".join(a.flag for a in multimodal[:5]) + (", ..." if len(multimodal) > 5 else "")
        site = multimodal[0].word.site
        s.ignored.append(f"{names}: the script's own flags of a multimodal model (its vision or audio encoder and "
                         f"projector), not priced: the estimate is the language model's alone, on the sequence length "
                         f"read ({site.path}:{site.line})")
    trl = sorted(set(flags) & TRL_FLAGS)
    if trl:  # TRL's SFTConfig changes three TrainingArguments defaults
        where = f"{flags[trl[0]].evidence} ({TRL_DEFAULTS})"
        if not s.has("recompute"):
            s.put("recompute", "full", f"TRL SFTConfig default gradient_checkpointing True: {where}")
        if not s.has("seq_len"):
            s.put("seq_len", 1024, f"TRL SFTConfig default max_length 1024: {where}")
        if "--bf16" not in flags and "--fp16" not in flags and not s.has("precision"):
            s.put("precision", "bf16", f"TRL SFTConfig default bf16 True: {where}")
    for name in ("--bf16", "--fp16"):
        a = flags.get(name)
        if a is not None and not _given_false(a):
            s.hf_precision = (name[2:], a.evidence)
    chat = DS_CHAT_FLAGS & {a.flag for a in args}
    # TRL's --dtype is ModelConfig's load dtype (bfloat16, float16, float32, auto), not DeepSpeed-Chat's fp16 / bf16 (a
    # QA run: TRL's ALST command was refused); a --dtype alone is DeepSpeed-Chat's only in its own words
    trl_dtype = chat == {"--dtype"} and (trl or one_value(flags["--dtype"]).text not in ("fp16", "bf16"))
    if chat and not trl_dtype:
        _ds_chat(flags, s)
    if s.hf_precision is None:
        s.hf_precision = (None, s.hf_trainer)
    return True


def _ds_chat(flags: dict[str, Arg], s: Settings) -> None:
    """A DeepSpeed-Chat script's precision and offload, which its main.py turns into the DeepSpeed config
    (get_train_ds_config): `--dtype` fp16 (its default) or bf16, FP16 priced as BF16 (the same tensor-core rate, its
    loss scaling not priced); `--offload` puts both the weights and the optimizer on the CPU."""
    from placement.audit.readers.deepspeed import _offload_warning

    dtype = flags.get("--dtype")
    if dtype is not None:
        stated, where = one_value(dtype).text, dtype.evidence
        if stated not in ("fp16", "bf16"):
            raise InputError(f"{where}: DeepSpeed-Chat's --dtype takes fp16 or bf16 ({DS_CHAT_MAIN}), got "
                             f"{stated!r}")
    else:
        stated, where = "fp16", (f"no --dtype in the files (a DeepSpeed-Chat script, by {s.hf_trainer}): its "
                                 f"default fp16 ({DS_CHAT_MAIN})")
    if not s.has("precision"):
        s.put("precision", "bf16", where + (" (FP16, priced as BF16: the same tensor-core rate)"
                                            if stated == "fp16" else ""))
        if stated == "fp16":
            s.ignored.append(f"--dtype fp16: {FP16_MIXED} with loss scaling, priced as bf16 ({where})")
    s.hf_precision = (stated, where)
    if "--per_device_train_batch_size" not in flags and not s.has("micro_batch_size"):
        s.put("micro_batch_size", 16, f"no --per_device_train_batch_size in the files (a DeepSpeed-Chat script, by "
                                      f"{s.hf_trainer}): its default 16 ({DS_CHAT_MAIN})")
    offload = flags.get("--offload")
    if offload is not None and not _given_false(offload):
        for key in ("offload_param", "offload_optimizer"):
            _offload_warning(s, f"{offload.evidence} (DeepSpeed-Chat: {key} device cpu, dschat/utils/ds_utils.py)",
                             key)


OLD_ATTENTION = ("Megatron-LM had no fused attention before --use-flash-attn came in (d693034ecf, 2022-12-08): its "
                 "CoreAttention kept the scores in HBM (megatron/model/transformer.py)")
OLD_CHECKPOINT_ATTENTION = (
    "Megatron-LM exits on --checkpoint-activations from 3e71ad9c62 (2023-04-26; core_v0.19.0 megatron/training/"
    "arguments.py:583-586), so a Megatron-LM that starts this file is older, and its attention is unfused without "
    "--use-flash-attn (d693034ecf, 2022-12-08, brought FlashAttention in behind that flag only); "
    "Megatron-DeepSpeed keeps the flag and runs its unfused CoreAttention without a --use-flash-attn* flag "
    "(megatron/model/transformer.py)")
"""Why a Megatron file with the old --checkpoint-activations is priced with the unfused attention core (a user trial:
a Megatron-DeepSpeed script without --deepspeed was priced with FlashAttention by default, 6 % fast)."""
TORCH_DDP = ("PyTorch DDP all-reduces gradient buckets during backward (megatron/training.py at bbab79f869^ :288-292 "
             "wraps the model in torchDDP; --DDP-impl went in 3fb3e95ec6 of 2023-09-05)")


def _old_megatron(given: dict[str, Arg], s: Settings) -> None:
    """What a launch of the Megatron-LM of 2021-2022 ran that its flags do not name (a user trial: the SC21 scripts
    priced with FlashAttention and no gradient overlap): `--DDP-impl torch` overlaps the gradient all-reduce with
    backward, and a file that `--activations-checkpoint-method` dates to 2021-08..2022-05 ran the unfused
    attention core.  Under a pipeline the schedules of that time skipped DDP's no_sync (megatron/schedules.py used it
    without a pipeline only), so every micro-batch all-reduced: priced as one overlapped reduction, and said so."""
    ddp = given.get("--DDP-impl")
    if ddp is not None and ddp.values and one_value(ddp).text == "torch" and not s.has("recipe.dp_overlap"):
        s.put("recipe.dp_overlap", True, f"{ddp.evidence} ({TORCH_DDP})")
        if s.value("pp", 1) > 1:
            s.ignored.append(f"--DDP-impl torch under a pipeline: every micro-batch's backward all-reduces the "
                             f"gradients (megatron/schedules.py at bbab79f869^ takes DDP's no_sync only without a "
                             f"pipeline), priced as one reduction beside the last backward "
                             f"({ddp.word.site.path}:{ddp.word.site.line})")
    method = given.get("--activations-checkpoint-method")
    dated = method or ddp
    interleaved = {"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank"} & set(given)
    if dated is not None and interleaved and not s.has("recipe.pp_comm_overlap"):
        # (read before the flags' own defaults: megatron.finish) the file predates 4eeff55d1f of 2023-10-12
        s.put("recipe.pp_comm_overlap", False,
              f"{dated.evidence} (the flag dates the file before 2023-09-05; Megatron-LM overlapped an interleaved "
              f"pipeline's transfers only under --overlap-p2p-communication from f9283c5a8a of 2023-05-31, and by "
              f"default from 4eeff55d1f of 2023-10-12)")
    before_align = dated or next((given[f] for f in UNALIGNED_FLAGS if f in given), None)
    if before_align is not None and interleaved and not s.has("recipe.align_param_gather"):
        s.put("recipe.align_param_gather", False,
              f"{before_align.evidence} (the flag dates the file before 4e3840535b of 2024-08-23, where Megatron-LM "
              f"began dispatching an interleaved pipeline's first chunks' weight gathers whole at the schedule's "
              f"start; before it each bucket's gather followed the one before)")
    old_file = method or given.get("--checkpoint-activations")
    if old_file is not None and not s.has("recipe.pipeline_p2p_scatter") and s.value("pp", 1) > 1:
        off = given.get("--no-scatter-gather-tensors-in-pipeline")
        s.put("recipe.pipeline_p2p_scatter", off is None,
              off.evidence if off is not None else
              f"{old_file.evidence} (the flag dates the file before Megatron-Core's pipeline communication of "
              f"39b83c7953, 2023-01-31: Megatron-LM sent each TP rank's 1/tp share of a stage's output and "
              f"all-gathered it on arrival, --scatter-gather-tensors-in-pipeline on by default; "
              f"megatron/p2p_communication.py)")
    if method is not None and not s.has("recipe.attention_kernel") and "--use-flash-attn" not in given:
        s.put("recipe.attention_kernel", "unfused",
              f"{method.evidence} (the flag dates the file to {OLD_METHOD_DATES}; "
              f"{OLD_ATTENTION})")
    old_checkpoint = given.get("--checkpoint-activations")
    if old_checkpoint is not None and not s.has("recipe.attention_kernel") and not MDS_FLASH_FLAGS.keys() & given:
        s.put("recipe.attention_kernel", "unfused", f"{old_checkpoint.evidence} ({OLD_CHECKPOINT_ATTENTION})")


def _megatron_deepspeed_attention(args: list[Arg], s: Settings, deepspeed_flag: Arg) -> None:
    """Megatron-DeepSpeed computes attention unfused (CoreAttention: baddbmm, the fused masked softmax, bmm;
    megatron/model/transformer.py) unless a --use-flash-attn* flag picks FlashSelfAttention."""
    if s.has("recipe.attention_kernel") or not MEGATRON_MODEL_FLAGS & {a.flag for a in args}:
        return  # a model script of the user's own (train.py --deepspeed): its attention is its code's
    flash = next((a for a in args if a.flag in MDS_FLASH_FLAGS), None)
    if flash is not None:
        s.put("recipe.attention_kernel", MDS_FLASH_FLAGS[flash.flag], flash.evidence)
    else:
        s.put("recipe.attention_kernel", "unfused",
              f"{deepspeed_flag.evidence} (Megatron-DeepSpeed's CoreAttention keeps the scores in HBM unless "
              f"--use-flash-attn or --use-flash-attn-v2: megatron/model/transformer.py, megatron/arguments.py)")


NAN_CHECK_DATE = ("d66807759c", "2023-12-05")
"""Where Megatron-LM began checking each gradient bucket's norm for NaN before its data-parallel reduction
(`Fix NaN checking in grads: should be performed before data-parallel communication`): the pass over the
buffer recipe.grad_buffer_passes counts; before it the check read the optimizer's gradient norm, computed anyway."""


def _grad_buffer_passes(given: dict[str, Arg], s: Settings) -> None:
    """recipe.grad_buffer_passes from Megatron-LM's flags: its DDP zeroes the gradient buffer every step (1 pass)
    and scales it by 1/dp before the reduction (2: read and write) unless `--ddp-average-in-collective` or
    `--calculate-per-token-loss` make the factor 1 (distributed_data_parallel.py gradient_scaling_factor), and
    checks each bucket's norm for NaN (1) unless `--no-check-for-nan-in-loss-and-grad`, or --fp16 with dynamic loss
    scaling (no --loss-scale: arguments.py turns the check off), or a file dated before NAN_CHECK_DATE."""
    if s.has("recipe.grad_buffer_passes"):
        return
    passes = 4
    why = ["Megatron-LM's DDP zeroes its gradient buffer every step (param_and_grad_buffer.py reset)"]
    evidence = []
    dated = given.get("--activations-checkpoint-method") or given.get("--DDP-impl")
    off = given.get("--no-check-for-nan-in-loss-and-grad")
    fp16 = given.get("--fp16") if "--fp16" in given and "--loss-scale" not in given else None
    if off is not None or fp16 is not None or dated is not None:
        passes -= 1
        evidence.append((off or fp16 or dated).evidence)
        why.append("checks no bucket for NaN" + ("" if off is not None else
                                                 " (--fp16 with dynamic loss scaling turns it off: arguments.py)"
                                                 if fp16 is not None else
                                                 f" (the flag dates the file before {NAN_CHECK_DATE[0]} of "
                                                 f"{NAN_CHECK_DATE[1]})"))
    else:
        why.append("checks each bucket's norm for NaN (--check-for-nan-in-loss-and-grad, on by default: training.py "
                   "check_for_nan_in_grad)")
    average = given.get("--ddp-average-in-collective") or given.get("--calculate-per-token-loss")
    if average is not None:
        passes -= 2
        evidence.append(average.evidence)
        why.append("does not scale it by 1/dp (the collective averages, or the loss is summed per token)")
    else:
        why.append("scales it by 1/dp before the reduction")
    if evidence:  # without a flag the framework row's 4 stands (frameworks.CAPABILITIES["megatron"]): a file
        # that states nothing of the job is not read as stating this
        s.put("recipe.grad_buffer_passes", passes, f"{'; '.join(evidence)} ({passes} passes: {', '.join(why)})")


def _gradient_width(args: list[Arg], s: Settings) -> None:
    """recipe.grad_reduce_fp32 from Megatron-LM's flags, in megatron/training/arguments.py's order (core_v0.19.0
    :1181-1194): under `--bf16`, `--grad-reduce-in-bf16` is 16-bit, then `--accumulate-allreduce-grads-in-fp32`
    is fp32, then `--main-grads-dtype bf16` keeps 16-bit, and otherwise "bfloat16 requires gradient accumulation
    and all-reduce to be done in fp32"; under --fp16 only the fp32 flag widens.  Megatron-FSDP takes its own
    `--megatron-fsdp-grad-comm-dtype` (auto: `--megatron-fsdp-main-grads-dtype`; auto: the model's 16 bits).
    A log's printed `accumulate_allreduce_grads_in_fp32`, read first (`read_log`), is the answer already."""
    if s.has("recipe.grad_reduce_fp32"):
        return
    flag = {a.flag: a for a in args}

    def value(name: str, default: str = "auto") -> str:
        if name not in flag:
            return default
        text = one_value(flag[name]).text
        allowed = ("fp32", "bf16") if name == "--main-grads-dtype" else ("fp32", "bf16", "fp16", "auto")
        if text not in allowed:  # megatron/training/arguments.py choices
            raise InputError(f"{flag[name].evidence}: {name} must be {', '.join(allowed[:-1])} or {allowed[-1]} "
                             f"(Megatron's choices), got {text!r}")
        return text

    if "--use-megatron-fsdp" in flag:
        comm, main = value("--megatron-fsdp-grad-comm-dtype"), value("--megatron-fsdp-main-grads-dtype")
        named = next((f for f in ("--megatron-fsdp-grad-comm-dtype", "--megatron-fsdp-main-grads-dtype")
                      if f in flag), "--use-megatron-fsdp")
        width = main if comm == "auto" else comm
        s.put("recipe.grad_reduce_fp32", width == "fp32",
              flag[named].evidence + ("" if named != "--use-megatron-fsdp" else
                                      " (Megatron-FSDP reduces gradients in the model's 16 bits unless "
                                      "--megatron-fsdp-grad-comm-dtype says otherwise)"))
    elif "--bf16" in flag and "--fp16" not in flag:
        if "--grad-reduce-in-bf16" in flag:
            s.put("recipe.grad_reduce_fp32", False, flag["--grad-reduce-in-bf16"].evidence)
        elif "--accumulate-allreduce-grads-in-fp32" in flag:
            s.put("recipe.grad_reduce_fp32", True, flag["--accumulate-allreduce-grads-in-fp32"].evidence)
        elif value("--main-grads-dtype", "fp32") == "bf16":
            s.put("recipe.grad_reduce_fp32", False, flag["--main-grads-dtype"].evidence)
        else:
            s.put("recipe.grad_reduce_fp32", True,
                  f"{flag['--bf16'].evidence} (under --bf16 Megatron accumulates and reduces gradients in fp32 "
                  f"unless --grad-reduce-in-bf16: megatron/training/arguments.py)")
    elif "--accumulate-allreduce-grads-in-fp32" in flag:
        s.put("recipe.grad_reduce_fp32", True, flag["--accumulate-allreduce-grads-in-fp32"].evidence)


def _bridge_grad_buffer_passes(keys: dict, s: Settings) -> None:
    """recipe.grad_buffer_passes from a Megatron-Bridge config's DDP section: the buffer zeroed (1), scaled by 1/dp
    unless ddp.average_in_collective (2), NaN-checked where ddp.check_for_nan_in_grad (1).  A key the section leaves
    out keeps Megatron-Core's DistributedDataParallelConfig default (check off, average off: 3, as Megatron-Bridge's
    performance recipes set, perf_recipes/_common.py); without a DDP section the framework row's 4 stands."""
    if s.has("recipe.grad_buffer_passes") or not any(k.startswith("ddp.") for k in keys):
        return  # no DDP section read: the framework row stands (the library recipes' check, 4)
    nan, nev = keys.get("ddp.check_for_nan_in_grad", (None, None))
    avg, aev = keys.get("ddp.average_in_collective", (None, None))
    passes = 1 + (1 if nan is True else 0) + (0 if avg is True else 2)
    stated = "; ".join(e for e in (nev, aev) if e)
    default = (f"{'no ddp.check_for_nan_in_grad' if nev is None else ''}"
               f"{' or ' if nev is None and aev is None else ''}"
               f"{'no ddp.average_in_collective' if aev is None else ''} read: DistributedDataParallelConfig's "
               f"default False, as Megatron-Bridge's performance recipes run (perf_recipes/_common.py); its library "
               f"recipes set check_for_nan_in_grad True (recipes/common.py), one pass more")
    s.put("recipe.grad_buffer_passes", passes,
          stated if nev is not None and aev is not None else f"{stated} ({default})" if stated else default)


_BRIDGE_SECTIONS = {"model_config": "model", "train_config": "train", "ddp_config": "ddp", "dist_config": "dist",
                    "optimizer_config": "optimizer", "mixed_precision_config": "mixed_precision",
                    "dataset_config": "dataset"}
_BRIDGE_INT = {"model.tensor_model_parallel_size": "tp", "model.pipeline_model_parallel_size": "pp",
               "model.virtual_pipeline_model_parallel_size": "vpp", "model.context_parallel_size": "cp",
               "model.expert_model_parallel_size": "ep", "model.expert_tensor_parallel_size": "etp",
               "model.num_layers": "num_layers", "model.hidden_size": "hidden_size",
               "model.num_attention_heads": "num_attention_heads", "model.num_moe_experts": "num_experts",
               "model.seq_length": "seq_len", "dataset.sequence_length": "seq_len", "dataset.seq_length": "seq_len",
               "model.num_layers_in_first_pipeline_stage": "first_stage_layers",
               "model.num_layers_in_last_pipeline_stage": "last_stage_layers",
               "train.micro_batch_size": "micro_batch_size", "train.global_batch_size": "global_batch"}


def bridge_keys(data: Any, path: Path, lines: list[str]) -> dict[str, tuple[Any, str]]:
    """`section.key` -> (value, evidence) of a Megatron-Bridge ConfigContainer YAML (older section names mapped)."""
    if isinstance(data, dict) and set(data) == {"ConfigContainer"} | (set(data) - {"ConfigContainer"}) and \
            "ConfigContainer" in data:
        data = data["ConfigContainer"]
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a YAML mapping of ConfigContainer sections (model:, train:, ...)")
    out: dict[str, tuple[Any, str]] = {}
    for raw, table in data.items():
        if not isinstance(raw, str):  # `1:` or `null:` at the top: no ConfigContainer section has such a name
            raise InputError(f"{path}: top-level key {raw!r} is not a ConfigContainer section name (model, train, "
                             f"...); quote it or remove it")
        section = _BRIDGE_SECTIONS.get(raw, raw)
        if not isinstance(table, dict):
            if section == "mixed_precision":
                out[section] = (table, _yaml_evidence(path, lines, None, raw))
            continue
        for key, value in table.items():
            if not isinstance(key, str):  # `1: 3` or `null: 4` inside a section: no field is named so
                raise InputError(f"{path}: key {key!r} under {raw}: is not a field name; quote it or remove it")
            out[f"{section}.{key}"] = (value, _yaml_evidence(path, lines, raw, key))
    return out


def _yaml_evidence(path: Path, lines: list[str], section: str | None, key: str) -> str:
    """The line of `key` inside the `section:` block (by indentation)."""
    start, indent = 0, -1
    if section is not None:
        for n, line in enumerate(lines):
            if re.match(rf"\s*{re.escape(section)}\s*:\s*(#.*)?$", line):
                start, indent = n + 1, len(line) - len(line.lstrip())
                break
    for n in range(start, len(lines)):
        line = lines[n]
        depth = len(line) - len(line.lstrip())
        if line.strip() and not line.lstrip().startswith("#") and depth <= indent:
            break
        if re.match(rf"\s*{re.escape(key)}\s*:", line):
            return f"{path}:{n + 1}: {line.strip()}"
    return f"{path}: {section}.{key}" if section else f"{path}: {key}"


LAYER_LETTERS = {"embedding": "E", "decoder": "t", "mtp": "m", "loss": "L"}
"""Megatron-Core's LayerType names as its layout string spells them (transformer/pipeline_parallel_layer_layout.py
parse_str_to_list); `encoder` has no letter there and is not priced."""


def layout_text(layout: Any, ev: str | None) -> str:
    """A pipeline layout as Megatron-Core's string form: a string as it is, or the list of stages (each a list of
    LayerType names) that Megatron-Bridge writes (recipes/deepseek/deepseek_v3.py) and PipelineParallelLayerLayout
    takes too (core_v0.19.0), joined as `Et*4|...`-style text, one letter a layer and `|` between stages (a user trial:
    the list's Python repr was parsed as text, "unknown characters '[', ']', ...")."""
    if isinstance(layout, str):
        return layout
    if not isinstance(layout, list) or not all(isinstance(row, list) for row in layout):
        raise InputError(f"{ev}: pipeline_model_parallel_layout must be a string or a list of stages, each a list "
                         f"of layer names (embedding, decoder, mtp, loss), got {layout!r}")
    bad = sorted({str(x) for row in layout for x in row if str(x).strip().lower() not in LAYER_LETTERS})
    if bad:
        raise InputError(f"{ev}: pipeline_model_parallel_layout names {', '.join(bad)}, which placement does not price "
                         f"(Megatron-Core's layer types it reads: {', '.join(LAYER_LETTERS)})")
    return "|".join("".join(LAYER_LETTERS[str(x).strip().lower()] for x in row) for row in layout)


def bridge_settings(keys: dict[str, tuple[Any, str]], s: Settings) -> None:
    """The layout, batch, sharding and precision fields of Megatron-Bridge keys (YAML or Hydra overrides)."""
    s.bridge = True
    _check_bridge_bools(keys)
    s.bridge_keys |= {k: yaml_text(v) for k, (v, _) in keys.items() if "." in k}
    for key, field in _BRIDGE_INT.items():
        value, ev = keys.get(key, (None, None))
        if value is None:
            continue
        if isinstance(value, str) and value.strip().isdigit():
            # passed on as written, as a boolean field is (_check_bridge_bools): Megatron-Bridge's data-parallel size
            # multiplies and divides by it (training/config.py:1019-1027 get_data_parallel_size, `world_size %
            # total_model_size`, a TypeError for a string), so the job does not start; read as the number, it was
            # priced (a QA run: `tensor_model_parallel_size: "2"` priced at tp 2)
            raise InputError(f"{ev}: {key} is {value!r}, a string: Megatron-Bridge passes each value on as written "
                             f"(it merges the YAML into an untyped OmegaConf config), and a string degree, batch or "
                             f"length fails its arithmetic at start-up (training/config.py:1019-1027), so this job "
                             f"does not start; write {key.rpartition('.')[2]}: {value.strip()} unquoted")
        v = read_int(value, key, ev, minimum=0 if field in ("first_stage_layers", "last_stage_layers") else 1)
        if s.has(field) and s.value(field) != v:
            # Megatron-Bridge asserts the model's sequence is the dataset's (ConfigContainer.validate; a user trial's
            # SFT config of model 16384 and dataset 4096 was priced at 16384 with no word)
            why = (": Megatron-Bridge asserts model.seq_length equals the dataset's (ConfigContainer.validate), so "
                   "this config does not start; make them agree" if field == "seq_len" else "")
            raise InputError(f"contradictory {field}: {v} ({ev}) vs {s.value(field)} ({s.sources[field]}){why}")
        s.put(field, v, ev)
    variant, ev = keys.get("model.experimental_attention_variant", (None, None))
    if variant is not None:
        extra = [keys[k][1] for k in ("model.linear_attention_freq", "model.dsa_indexer_topk") if k in keys]
        raise attention_variant_refusal(str(variant), ev, extra)
    sp, ev = keys.get("model.sequence_parallel", (None, None))
    if sp is not None:
        s.put("sequence_parallel", bool(sp), ev)
    rg, ev = keys.get("model.recompute_granularity", (None, None))
    if rg is not None:
        if rg not in ("full", "selective"):
            raise InputError(f"{ev}: model.recompute_granularity must be full, selective or null, got {rg!r}")
        s.put("recompute", rg, ev)
    layout, ev = keys.get("model.pipeline_model_parallel_layout", (None, None))
    if layout is not None:  # priced as stated, as Megatron-LM's --pipeline-model-parallel-layout is
        text = layout_text(layout, ev)
        s.put("pp_layout", text, ev)
        s.put("recipe.pipeline_layout", text, ev)
    fsdp = next(((k, keys[k]) for k in ("ddp.use_megatron_fsdp", "dist.use_megatron_fsdp", "dist.use_torch_fsdp2")
                 if keys.get(k, (None,))[0] is True), None)
    _bridge_fsdp2_refusals(keys)
    if fsdp is not None:
        s.put("zero_stage", *_bridge_fsdp_stage(keys, fsdp))
    else:
        for k in ("ddp.use_distributed_optimizer", "optimizer.use_distributed_optimizer"):
            v, ev = keys.get(k, (None, None))
            if v is not None:
                s.put("zero_stage", 1 if v else 0, ev)
                if v:
                    break
    fp8, ev = _bridge_value(keys, "fp8")  # a mixed_precision section's fp8 (null: none) overwrites the model's
    recipe, rev = keys.get("mixed_precision", (None, None))
    if fp8 and not isinstance(recipe, str):
        s.put("precision", "fp8", ev)
    elif isinstance(recipe, str):
        s.put("precision", "fp8" if "fp8" in recipe else "bf16", rev)
    elif keys.get("mixed_precision.bf16", (None,))[0] is True:
        s.put("precision", "bf16", keys["mixed_precision.bf16"][1])
    # the gradient width: with a mixed_precision section Megatron-Bridge copies its grad_reduce_in_fp32 (default
    # True; the fp16_mixed recipe's False) over the DDP config's (training/mixed_precision.py setup,
    # update_config_with_precision_overrides); without one the DDP config's stands (default False)
    section = [k for k in keys if k.startswith("mixed_precision.")]
    if isinstance(recipe, str):
        fp32 = not recipe.startswith("fp16")
        s.put("recipe.grad_reduce_fp32", fp32, f"{rev} (Megatron-Bridge's {recipe} recipe: grad_reduce_in_fp32 "
                                               f"{fp32})")
    elif section:
        value, where = keys.get("mixed_precision.grad_reduce_in_fp32", (True, None))
        default = f"{keys[section[0]][1]} (Megatron-Bridge MixedPrecisionConfig.grad_reduce_in_fp32 defaults to True)"
        s.put("recipe.grad_reduce_fp32", bool(value), where or default)
    elif isinstance(keys.get("ddp.grad_reduce_in_fp32", (None,))[0], bool):
        s.put("recipe.grad_reduce_fp32", keys["ddp.grad_reduce_in_fp32"][0], keys["ddp.grad_reduce_in_fp32"][1])
    _bridge_grad_buffer_passes(keys, s)
    if keys.get("dist.use_tp_pp_dp_mapping", (None,))[0] is True:
        s.put("rank_order", "tp-cp-ep-pp-dp", keys["dist.use_tp_pp_dp_mapping"][1])
    # with a comm_overlap section and the distributed optimizer, Megatron-Bridge's CommOverlapConfig writes the DP
    # overlap over the DDP config's: its own value where set, else on whenever DP > 1 (training/comm_overlap.py
    # _get_optimizer_overlap_cfgs; at DP 1 there is nothing to overlap); otherwise the DDP config's stands
    overlap, oev = keys.get("comm_overlap.overlap_grad_reduce", (None, None))
    # either config's true turns both on (training/config.py _validate_and_sync_distributed_optimizer_settings)
    distributed = any(keys.get(f"{k}.use_distributed_optimizer", (None,))[0] is True for k in ("ddp", "optimizer"))
    if _has_section(keys, "comm_overlap") and not _section_whole(keys, "comm_overlap"):
        # overrides of the recipe's section: what they set (the rest is the recipe's)
        for key, field in (("overlap_grad_reduce", "dp_overlap"), ("overlap_param_gather", "param_gather_overlap")):
            value, ev = keys.get(f"comm_overlap.{key}", (None, None))
            if isinstance(value, bool):
                s.put(f"recipe.{field}", value, ev)
    if _section_whole(keys, "comm_overlap") and distributed:
        if not isinstance(overlap, bool):
            overlap, oev = True, (f"{oev or _section_line(keys, 'comm_overlap')} (Megatron-Bridge's CommOverlapConfig "
                                  f"turns overlap_grad_reduce on with the distributed optimizer when DP > 1: "
                                  f"comm_overlap.py _get_optimizer_overlap_cfgs)")
        s.put("recipe.dp_overlap", overlap, oev)
        gather, gev = keys.get("comm_overlap.overlap_param_gather", (None, None))
        if not isinstance(gather, bool):
            gather, gev = True, (f"{gev or _section_line(keys, 'comm_overlap')} (Megatron-Bridge's CommOverlapConfig "
                                 f"turns overlap_param_gather on with the distributed optimizer when DP > 1: "
                                 f"comm_overlap.py _get_optimizer_overlap_cfgs)")
        s.put("recipe.param_gather_overlap", gather, gev)
    elif not s.has("recipe.dp_overlap") and isinstance(keys.get("ddp.overlap_grad_reduce", (None,))[0], bool):
        s.put("recipe.dp_overlap", *keys["ddp.overlap_grad_reduce"])
    if not s.has("recipe.param_gather_overlap"):
        # either config's true turns both on (_validate_and_sync_distributed_optimizer_settings): a user trial's
        # optimizer.overlap_param_gather true beside ddp's false was read as off
        stated = [keys[k] for k in ("ddp.overlap_param_gather", "optimizer.overlap_param_gather")
                  if isinstance(keys.get(k, (None,))[0], bool)]
        on = [e for v, e in stated if v]
        if on:
            s.put("recipe.param_gather_overlap", True, "; ".join(on) + (
                " (Megatron-Bridge turns overlap_param_gather on in both configs where either sets it: training/"
                "config.py _validate_and_sync_distributed_optimizer_settings)" if len(stated) > 1 else ""))
        elif stated:
            s.put("recipe.param_gather_overlap", False, "; ".join(e for _, e in stated))
    # under virtual stages the same section aligns the gathers of every rank's first chunks (align_param_gather:
    # comm_overlap.py _get_optimizer_overlap_cfgs, pp > 1 and vp_size > 1) unless it sets the field itself; without
    # one the DDP config's field stands, megatron-core DistributedDataParallelConfig.align_param_gather, default False
    # the gradient bucket: CommOverlapConfig's own (the section's bucket_size, else 128 Mi with the distributed
    # optimizer at DP > 1: comm_overlap.py _get_optimizer_overlap_cfgs), which it writes over the DDP config's
    # (_apply_cfgs); without that section the DDP config's (None: megatron-core's max(40M, 1M x dp x cp))
    for key in ("comm_overlap.bucket_size", "ddp.bucket_size"):
        value, where = keys.get(key, (None, None))
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"{where}: {key} must be a positive whole number of parameters, got {value!r}; write "
                             f"it as an integer (134217728, not 1.34e8 or a string), or null for megatron-core's "
                             f"default")
    bucket, bev = keys.get("comm_overlap.bucket_size", (None, None))
    if bucket is None:
        if _section_whole(keys, "comm_overlap") and distributed:
            bucket, bev = BRIDGE_BUCKET_PARAMS, (f"{_section_line(keys, 'comm_overlap')} (Megatron-Bridge's "
                                                 f"CommOverlapConfig sets bucket_size 128 * 1024 * 1024 with the "
                                                 f"distributed optimizer when DP > 1: comm_overlap.py "
                                                 f"_get_optimizer_overlap_cfgs)")
        else:
            bucket, bev = keys.get("ddp.bucket_size", (None, None))
    if bucket is not None and not s.has("recipe.ddp_bucket_params"):
        s.put("recipe.ddp_bucket_params", bucket, bev)
    vpp, vev = keys.get("model.virtual_pipeline_model_parallel_size", (None, None))
    if isinstance(vpp, int) and vpp > 1 and not s.has("recipe.align_param_gather"):
        align, aev = keys.get("comm_overlap.align_param_gather", (None, None))
        if _section_whole(keys, "comm_overlap") and distributed:
            if not isinstance(align, bool):
                align, aev = True, (f"{aev or _section_line(keys, 'comm_overlap')} (Megatron-Bridge's "
                                    f"CommOverlapConfig aligns the weight gathers of an interleaved pipeline with "
                                    f"the distributed optimizer: comm_overlap.py _get_optimizer_overlap_cfgs)")
        elif not isinstance(align, bool):
            align, aev = keys.get("ddp.align_param_gather", (None, None))
            if not isinstance(align, bool) and "model._target_" in keys:
                align, aev = False, (f"{vev} (no comm_overlap section sets it: megatron-core "
                                     f"DistributedDataParallelConfig.align_param_gather, default False)")
        if isinstance(align, bool):  # overrides that set neither leave it to the recipe's sections
            s.put("recipe.align_param_gather", align, aev)
    v, ev = keys.get("model.cpu_offloading", (None, None))
    if v is True:
        s.ignored.append(f"model.cpu_offloading: activation/weight offload to CPU ({ev})")
    packed, pev = keys.get("dataset.packed_sequence_specs", (None, None))
    if isinstance(packed, dict) and packed.get("packed_sequence_size"):
        # Megatron-Bridge refuses a micro-batch above 1 with packed sequences (training/config.py:1194-1212): the
        # best plan keeps 1 (a user trial's was micro-batch 2)
        s.micro_batch_one = f"{pev} (packed sequences: Megatron-Bridge runs micro-batch 1 only)"
        s.ignored.append(f"dataset.packed_sequence_specs: packed sequences of {packed['packed_sequence_size']} "
                         f"tokens, each sample attending only to itself (THD); attention is priced as one causal "
                         f"sequence of the whole length, more than the packed samples run ({pev})")
    _bridge_recipe(keys, s)
    _bridge_full_graph_nan_check(keys, s)


def _bridge_full_graph_nan_check(keys: dict[str, tuple[Any, str]], s: Settings) -> None:
    """A full-iteration CUDA graph beside the loss's NaN check, which Megatron-Bridge refuses at start-up
    (training/config.py:1509-1513 at 067f987df: "check_for_nan_in_loss must be disabled when using full_iteration
    CUDA graph"; utils/cuda_graph.py is_full_iteration_cuda_graph: impl full_iteration, or local with full_iteration
    in cuda_graph_modules or cuda_graph_scope, the reader's cuda_graphs full).  A saved config that leaves the field
    out runs its default, True (Megatron-LM training/config/resilience_config.py:25, which Bridge's
    RerunStateMachineConfig inherits); an override leaves it to the recipe, which the audit does not see.  A QA run:
    a saved Llama 3 8B config with cuda_graph_impl local, cuda_graph_scope full_iteration and check_for_nan_in_loss
    true was priced as running with full graphs."""
    if s.value("recipe.cuda_graphs") != "full":
        return
    check, ev = keys.get("rerun_state_machine.check_for_nan_in_loss", (None, None))
    if check is None and "model._target_" in keys:
        check, ev = True, ("rerun_state_machine.check_for_nan_in_loss, which the saved config leaves out: its default "
                           "True (Megatron-LM training/config/resilience_config.py:25)")
    if check is True:
        raise start_refusal(
            s.sources.get("recipe.cuda_graphs", "the CUDA graph"), f"a full-iteration CUDA graph with {ev}",
            "Megatron-Bridge asserts the loss's NaN check is off beside it (training/config.py:1509-1513: "
            "'check_for_nan_in_loss must be disabled when using full_iteration CUDA graph')",
            "set rerun_state_machine.check_for_nan_in_loss: false, or graph less than the whole iteration")


_BRIDGE_RECIPE_BOOLS = {
    # TransformerConfig / MixedPrecisionConfig field -> the Recipe field it states (Megatron-LM's flag of the same name)
    "tp_comm_overlap": "tp_comm_overlap", "overlap_moe_expert_parallel_comm": "ep_comm_overlap",
    "delay_wgrad_compute": "delay_wgrad", "account_for_embedding_in_pipeline_split": "account_for_embedding",
    "account_for_loss_in_pipeline_split": "account_for_loss", "cross_entropy_loss_fusion": "cross_entropy_fusion",
    "activation_func_fp8_input_store": "activation_func_fp8_input_store",
}
_BRIDGE_NAMED_FP8 = {
    "bf16_with_fp8_delayed_scaling_mixed": ("delayed", True, 0),
    "fp16_with_fp8_delayed_scaling_mixed": ("delayed", True, 0),
    "bf16_with_fp8_mixed": ("delayed", True, 0), "fp16_with_fp8_mixed": ("delayed", True, 0),
    "bf16_with_mxfp8_mixed": ("mxfp8", True, 0), "fp16_with_mxfp8_mixed": ("mxfp8", True, 0),
    "bf16_with_fp8_current_scaling_mixed": ("tensorwise", True, 1),
    "fp16_with_fp8_current_scaling_mixed": ("tensorwise", True, 1),
    "nemotron_h_bf16_with_fp8_current_scaling_mixed": ("tensorwise", True, 2),
    "nanov2_bf16_with_fp8_current_scaling_mixed": ("blockwise", True, 2),
    "bf16_with_fp8_subchannel_scaling_mixed": ("blockwise", False, 0),
    "fp16_with_fp8_subchannel_scaling_mixed": ("blockwise", False, 0),
}
"""Megatron-Bridge's named FP8 mixed-precision recipes -> (fp8_recipe, fp8_param_gather, BF16 layers at each end)
they set (training/mixed_precision.py, the MIXED_PRECISION_RECIPES registry; `*_with_fp8_mixed` is the name of the
delayed-scaling recipes before Megatron-Bridge 15bf28de, 2025-09-05)."""
_BRIDGE_NAMED_OTHER = {"bf16_mixed": "bf16", "fp16_mixed": "bf16", "bf16_with_nvfp4_mixed": "nvfp4",
                       "nemotron_3_super_bf16_with_nvfp4_mixed": "nvfp4"}
"""Its other named recipes: 16-bit, and NVFP4 (not priced: its GEMMs are priced BF16, and said)."""
_BRIDGE_FP8_RECIPES = {"delayed": "tensorwise", "tensorwise": "tensorwise", "mxfp8": "mxfp8", "blockwise": "blockwise"}
"""Megatron-Bridge fp8_recipe -> placement's: delayed and tensorwise are both per-tensor scaling."""
_BRIDGE_MIXED_DEFAULTS = {"fp8": None, "fp8_recipe": "tensorwise", "fp8_param_gather": False, "fp8_param": None}
"""MixedPrecisionConfig's defaults of the fields it copies over the model's (training/mixed_precision.py; its
fp8_recipe default was "delayed" before 15bf28de, per-tensor scaling either way)."""
_BRIDGE_OVERLAP_FIELDS = ("tp_comm_overlap", "overlap_moe_expert_parallel_comm", "delay_wgrad_compute")
"""Model fields a comm_overlap section decides: off unless the section sets them (training/comm_overlap.py
_get_model_comm_overlap_cfgs starts each at False, _override_user_cfgs takes the section's non-null values,
_apply_cfgs writes them over the model's)."""


def _bridge_fsdp2_refusals(keys: dict[str, tuple[Any, str]]) -> None:
    """A Megatron-Bridge config with torch FSDP2 beside what it cannot run with, which Megatron-LM's command line
    refuses (arguments.py:1031-1040, since e1993fa6f7) and Bridge's validation does not check (training/config.py
    ConfigContainer.validate checks only use_megatron_fsdp beside it; NVIDIA-NeMo/Megatron-Bridge 067f987df):

    - the distributed optimizer: Megatron-Core's DistributedOptimizer takes its parameter shards from the model
      chunks' gradient buffers, which TorchFullyShardedDataParallel does not have (optimizer/__init__.py
      _get_param_groups_and_buffers skips a chunk without `buffers`), so it owns no shard and replaces its Adam's
      parameter groups with empty ones (distrib_optimizer.py _build_optimizer_group_ranges,
      _build_model_and_main_param_groups; NVIDIA/Megatron-LM d98e8a64dd): no weight is ever updated, and through
      Megatron-Core 0.17 the first step without overlap_param_gather calls model_chunk.start_param_sync(), which
      TorchFullyShardedDataParallel lacks (core_v0.17.0 distrib_optimizer.py:2631, data_parallel_base.py);
    - gradient_accumulation_fusion: Transformer Engine's wgrad GEMM then accumulates into weight.main_grad (v2.9
      module/linear.py:440-448, 505), which only Megatron-Core's DDP buffers and Megatron-FSDP give a parameter (Bridge
      turns it off for Megatron-FSDP v2 alone, training/config.py:1197), so the first backward fails."""
    flag, ev = keys.get("dist.use_torch_fsdp2", (None, None))
    if flag is not True:
        return
    names = ("ddp.use_distributed_optimizer", "optimizer.use_distributed_optimizer")
    distributed = [keys[k][1] for k in names if keys.get(k, (None,))[0] is True]
    saved = "model._target_" in keys
    if not saved and not distributed and not all(keys.get(k, (None,))[0] is False for k in names):
        # an override (or Hydra overrides) merges onto a recipe whose DDP and optimizer configs both set
        # use_distributed_optimizer=True (recipes/common.py:87 and :406, utils/optimizer_utils.py:150
        # distributed_fused_adam_with_cosine_annealing; NVIDIA-NeMo/Megatron-Bridge 067f987df), and either config's
        # true turns both on (training/config.py _validate_and_sync_distributed_optimizer_settings), so only both
        # false leaves it off; Bridge turns it off for Megatron-FSDP v2 alone (training/config.py:1191-1192)
        unstated = [k for k in names if k not in keys]
        distributed = [f"{k}: the recipe's (the launch files do not set it; Megatron-Bridge's recipes set it true: "
                       f"recipes/common.py:87, recipes/utils/optimizer_utils.py:150)" for k in unstated]
        distributed += [f"{keys[k][1]} (Megatron-Bridge turns it back on where the other config has it true: "
                        f"training/config.py _validate_and_sync_distributed_optimizer_settings)"
                        for k in names if k in keys]
    if distributed:
        raise InputError(
            f"{ev} with {'; '.join(distributed)}: this job does not train. Megatron-Core's distributed optimizer "
            f"takes its parameter shards from Megatron DDP's gradient buffers, which a torch FSDP2 model chunk "
            f"(TorchFullyShardedDataParallel) does not have, so its Adam holds no parameter and no weight is ever "
            f"updated (optimizer/__init__.py _get_param_groups_and_buffers, distrib_optimizer.py "
            f"_build_optimizer_group_ranges); through Megatron-Core 0.17 the first step stops with an AttributeError "
            f"on start_param_sync (distrib_optimizer.py:2631). Megatron-Bridge does not check it; Megatron-LM "
            f"refuses it (\"--use-torch-fsdp2 is not supported with MCore's distributed optimizer\", "
            f"arguments.py:1038). Set ddp.use_distributed_optimizer and optimizer.use_distributed_optimizer to false "
            f"(FSDP2 shards the optimizer state itself), or run Megatron-FSDP (dist.use_megatron_fsdp) instead")
    fusion, fev = keys.get("model.gradient_accumulation_fusion", (None, None))
    if fusion is None and not saved:
        # the recipe's model provider: GPTModelProvider.gradient_accumulation_fusion defaults to True wherever
        # Transformer Engine imports (models/gpt_provider.py:206, utils/fusions.py:34-52
        # can_enable_gradient_accumulation_fusion)
        fusion, fev = True, ("model.gradient_accumulation_fusion: the recipe's (the launch files do not set it; "
                             "Megatron-Bridge's GPTModelProvider turns it on wherever Transformer Engine imports: "
                             "models/gpt_provider.py:206, utils/fusions.py:34-52)")
    if fusion is True:
        raise InputError(
            f"{ev} with {fev}: the first backward fails. Transformer Engine's fused weight-gradient accumulation "
            f"adds into each weight's main_grad (module/linear.py:440-448, 505), which Megatron-Core's DDP buffers and "
            f"Megatron-FSDP give a parameter and torch FSDP2 does not; Megatron-Bridge turns the fusion off for "
            f"Megatron-FSDP v2 only (training/config.py:1197), and Megatron-LM refuses it (\"--use-torch-fsdp2 is not "
            f"supported with gradient accumulation fusion\", arguments.py:1040). Set "
            f"model.gradient_accumulation_fusion to false")


_FSDP_STAGES = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
"""Megatron-FSDP's data_parallel_sharding_strategy as a ZeRO stage (megatron_fsdp.py MegatronFSDP docstring: optim
"close to ZeRO-1", optim_grads "ZeRO-2", optim_grads_params "ZeRO-3")."""
BRIDGE_RECIPE_FSDP_STRATEGY = "optim_grads_params"
"""What Megatron-Bridge's recipes set beside Megatron-FSDP (recipes/common.py:86, the base recipe's
DistributedDataParallelConfig; NVIDIA-NeMo/Megatron-Bridge 067f987df), the value an override is priced at."""


def _bridge_fsdp_stage(keys: dict[str, tuple[Any, str]], fsdp: tuple[str, tuple[Any, str]]) -> tuple[int, str]:
    """(ZeRO stage, source) of a Bridge config that turns FSDP on.  Torch FSDP2 shards weights, gradients and
    optimizer state whatever the strategy says: Megatron-Core's TorchFullyShardedDataParallel calls fully_shard with
    reshard_after_forward getattr(ddp_config, "reshard_after_forward", True), a field Bridge's DDP config does not
    have (torch_fully_sharded_data_parallel.py:82-85, NVIDIA/Megatron-LM d98e8a64dd).  Megatron-FSDP shards as
    ddp.data_parallel_sharding_strategy says; a saved section that leaves it out runs Megatron-Core's dataclass
    default no_shard (distributed_data_parallel_config.py:103), which Bridge keeps (training/config.py:1078-1124
    sets no strategy for Megatron-FSDP v1), and an override leaves it to the recipe it merges into (a QA run: an
    override turning Megatron-FSDP on was priced at ZeRO-3 citing only use_megatron_fsdp)."""
    key, (_, ev) = fsdp
    strategy, sev = keys.get("ddp.data_parallel_sharding_strategy", (None, None))
    if key == "dist.use_torch_fsdp2":
        ignored = (f"; {sev} is Megatron-FSDP's, which FSDP2 does not read"
                   if strategy is not None and strategy != "optim_grads_params" else "")
        return 3, (f"{ev} (torch FSDP2 shards weights, gradients and optimizer state: Megatron-Core's "
                   f"TorchFullyShardedDataParallel reshards after forward, torch_fully_sharded_data_parallel.py:84)"
                   f"{ignored}")
    version, vev = keys.get("ddp.megatron_fsdp_version", (1, None))
    if version == 2:  # Bridge writes the strategy itself (training/config.py:1190, Megatron-FSDP v2)
        return 3, (f"{ev}; {vev} (Megatron-Bridge sets data_parallel_sharding_strategy optim_grads_params for "
                   f"Megatron-FSDP v2: training/config.py:1190)")
    if strategy is None:
        if _section_whole(keys, "ddp"):
            return 0, (f"{ev}; {_section_line(keys, 'ddp')} leaves data_parallel_sharding_strategy out: "
                       f"Megatron-Core's default no_shard (DistributedDataParallelConfig, "
                       f"distributed_data_parallel_config.py:103), which Megatron-FSDP runs unsharded")
        return _FSDP_STAGES[BRIDGE_RECIPE_FSDP_STRATEGY], (
            f"{ev}; ddp.data_parallel_sharding_strategy: the recipe's, priced at {BRIDGE_RECIPE_FSDP_STRATEGY} "
            f"(Megatron-Bridge's recipes set it beside Megatron-FSDP: recipes/common.py:86); the launch files do not "
            f"set it")
    stage = _FSDP_STAGES.get(strategy) if isinstance(strategy, str) else None
    if stage is None:
        raise InputError(f"{sev}: ddp.data_parallel_sharding_strategy must be no_shard, optim, optim_grads or "
                         f"optim_grads_params, got {strategy!r}")
    return stage, f"{ev}; {sev}"


def _bridge_value(keys: dict[str, tuple[Any, str]], name: str) -> tuple[Any, str | None]:
    """(value, evidence) of the model field `name` as Megatron-Bridge runs it.  A mixed_precision section (a
    mapping) overwrites the model's field of the same name with its own value or, where it leaves the field out,
    its default (training/mixed_precision.py update_config_with_precision_overrides copies every field).  A
    comm_overlap section (a mapping) decides the overlap fields: its value where set, else off (_BRIDGE_OVERLAP_FIELDS).
    Otherwise the model section's value."""
    section = f"mixed_precision.{name}"
    if section in keys:
        return keys[section]
    if name in _BRIDGE_MIXED_DEFAULTS and _section_whole(keys, "mixed_precision"):
        return _BRIDGE_MIXED_DEFAULTS[name], (f"{_section_line(keys, 'mixed_precision')} (Megatron-Bridge "
                                              f"MixedPrecisionConfig.{name} default, copied over the model's)")
    if name in _BRIDGE_OVERLAP_FIELDS:
        value, ev = keys.get(f"comm_overlap.{name}", (None, None))
        if value is not None:
            return value, ev
        if _section_whole(keys, "comm_overlap"):
            return False, (f"{ev or _section_line(keys, 'comm_overlap')} (Megatron-Bridge's CommOverlapConfig leaves "
                           f"it off unless set: comm_overlap.py _get_model_comm_overlap_cfgs)")
    return keys.get(f"model.{name}", (None, None))


def _has_section(keys: dict[str, tuple[Any, str]], section: str) -> bool:
    return any(k.startswith(f"{section}.") for k in keys)


def _section_whole(keys: dict[str, tuple[Any, str]], section: str) -> bool:
    """Whether the keys hold `section` whole, so that a field it leaves out is that section's default: a saved
    ConfigContainer (its model has a `_target_`) with the section.  Hydra overrides, or an override YAML, merge into
    the recipe's own section (training/utils/omegaconf_utils.py OmegaConf.merge): a field they leave out is the
    recipe's, which placement does not see (a user trial: `comm_overlap.overlap_p2p_comm=false` over a recipe whose
    CommOverlapConfig turns TP overlap on was read as TP overlap off)."""
    return "model._target_" in keys and _has_section(keys, section)


def _section_line(keys: dict[str, tuple[Any, str]], section: str) -> str:
    """The evidence of a section's first key, for what the section decides without stating it."""
    return next(ev for k, (_, ev) in keys.items() if k.startswith(f"{section}.")).rsplit(":", 1)[0]


def _bridge_p2p_overlap(keys: dict[str, tuple[Any, str]], s: Settings) -> None:
    """Whether an interleaved Bridge job overlaps its pipeline transfers: a comm_overlap section turns Megatron's
    overlap_p2p_comm on under virtual stages (v0.4.2 training/comm_overlap.py:453-460) unless it sets the field
    itself (_override_user_cfgs puts the user's non-null values over those defaults); without one the model's field
    runs, megatron-core ModelParallelConfig.overlap_p2p_comm, default False."""
    vpp = keys.get("model.virtual_pipeline_model_parallel_size", (None,))[0]
    if not isinstance(vpp, int) or vpp < 2:
        return
    stated, ev = keys.get("comm_overlap.overlap_p2p_comm", (None, None))
    if isinstance(stated, bool):  # _override_user_cfgs puts the section's own value over the vp > 1 default
        s.put("recipe.pp_comm_overlap", stated, ev)
        return
    if _section_whole(keys, "comm_overlap"):
        s.put("recipe.pp_comm_overlap", True,
              f"{_section_line(keys, 'comm_overlap')} (a comm_overlap section overlaps the pipeline's transfers under "
              f"virtual stages: Megatron-Bridge training/comm_overlap.py, overlap_p2p_comm = vp_size > 1)")
        return
    value, ev = keys.get("model.overlap_p2p_comm", (None, None))
    if isinstance(value, bool):
        s.put("recipe.pp_comm_overlap", value, ev)
    elif "model._target_" in keys or not _has_section(keys, "comm_overlap"):
        s.put("recipe.pp_comm_overlap", False,
              f"{_section_line(keys, 'model')} (no comm_overlap section and no model.overlap_p2p_comm: megatron-core "
              f"ModelParallelConfig.overlap_p2p_comm, default False)")


def _bridge_mxfp8_gather_buffer(keys: dict[str, tuple[Any, str]], s: Settings) -> None:
    """Megatron-Bridge asserts reuse_grad_buf_for_mxfp8_param_ag under fp8_param_gather with the mxfp8 recipe and no
    Megatron-FSDP (training/config.py ConfigContainer.validate, since aa30683c1 of 2026-01-30): a saved config whose
    mixed_precision section leaves it at its default False (MixedPrecisionConfig; the named mxfp8 recipes set it)
    does not start.  Overrides leave it to the recipe's section, unseen."""
    if not (s.recipe.get("fp8_recipe") == "mxfp8" and s.recipe.get("fp8_params") is True
            and _section_whole(keys, "mixed_precision")):
        return
    if any(keys.get(k, (None,))[0] is True for k in ("ddp.use_megatron_fsdp", "dist.use_megatron_fsdp")):
        return
    reuse, ev = keys.get("mixed_precision.reuse_grad_buf_for_mxfp8_param_ag", (False, None))
    if reuse is not True:
        where = ev or _section_line(keys, "mixed_precision")
        raise start_refusal(where, "fp8_param_gather with fp8_recipe mxfp8 and reuse_grad_buf_for_mxfp8_param_ag "
                                   f"{yaml_text(reuse)} (MixedPrecisionConfig's default False where the section "
                                   f"leaves it out), without Megatron-FSDP",
                            "Megatron-Bridge refuses it (training/config.py ConfigContainer.validate, since "
                            "aa30683c1 of 2026-01-30: 'When fp8_param_gather=True and fp8_recipe='mxfp8', "
                            "reuse_grad_buf_for_mxfp8_param_ag must be set to True')",
                            "set mixed_precision.reuse_grad_buf_for_mxfp8_param_ag: true")


def _bridge_fsdp_checkpoint_format(keys: dict[str, tuple[Any, str]]) -> None:
    """Megatron-Bridge's checkpoint format beside Megatron-FSDP where the job saves or loads a checkpoint
    (checkpoint.save or checkpoint.load set): Megatron-FSDP (version 1, megatron-core DDP config's default) asserts
    `fsdp_dtensor` (training/config.py:1105-1108 at 067f987 of 2026-08-22, "Megatron-FSDP requires the fsdp_dtensor
    checkpointing format!"), and `fsdp_dtensor` without Megatron-FSDP is refused too (:1528-1533), as the Megatron-LM
    flags' reader refuses either pair (read_args).  The format is the checkpoint section's field, or where a saved
    config's section leaves it out megatron's default torch_dist (training_config.py:486); an override YAML leaves
    it to the recipe, unseen.  A QA run: a saved GB200 config with ddp/dist.use_megatron_fsdp true, ckpt_format
    torch_dist and checkpoint.load set was priced as if it ran."""
    save = next(((k, keys[k]) for k in ("checkpoint.save", "checkpoint.load") if keys.get(k, (None,))[0]), None)
    if save is None:
        return
    fmt, fev = keys.get("checkpoint.ckpt_format", (None, None))
    if fmt is None and _section_whole(keys, "checkpoint"):
        fmt = "torch_dist"
    if fmt is None:
        return
    fsdp = next(((k, keys[k]) for k in ("ddp.use_megatron_fsdp", "dist.use_megatron_fsdp")
                 if keys.get(k, (None,))[0] is True), None)
    version = keys.get("ddp.megatron_fsdp_version", (1,))[0]
    where = f"{save[0]} {yaml_text(save[1][0])} ({save[1][1]})"
    if fsdp is not None and version == 1 and fmt != "fsdp_dtensor":
        stated = f"checkpoint.ckpt_format {fmt}" + ("" if fev else " (CheckpointConfig's default where the section "
                                                                 "leaves it out)")
        raise start_refusal(fev or fsdp[1][1], f"{fsdp[0]} true with {stated} and {where}",
                            "Megatron-Bridge refuses it (training/config.py:1105-1108: 'Megatron-FSDP requires the "
                            "fsdp_dtensor checkpointing format!', checked where the job saves or loads)",
                            "set checkpoint.ckpt_format: fsdp_dtensor")
    if fsdp is None and fmt == "fsdp_dtensor":
        raise start_refusal(fev, f"checkpoint.ckpt_format fsdp_dtensor without Megatron-FSDP and {where}",
                            "Megatron-Bridge refuses it (training/config.py:1528-1533: 'fsdp_dtensor checkpoint "
                            "format only supports Megatron FSDP')",
                            "set checkpoint.ckpt_format: torch_dist, or turn ddp.use_megatron_fsdp on")


def _bridge_fsdp_rank_mapping(keys: dict[str, tuple[Any, str]]) -> None:
    """dist.use_tp_pp_dp_mapping true beside Megatron-FSDP (version 1, megatron-core's default): Megatron-Bridge
    asserts against the pair at start-up (training/config.py:1124 at 067f987 of 2026-08-22, "use_tp_pp_dp_mapping is
    not supported with Megatron FSDP"; v2 refuses it too, :1159-1160).  A QA run: a saved config with both was priced
    at tp 2, pp 2 in the tp-cp-ep-pp-dp order as if it ran."""
    mapping, mev = keys.get("dist.use_tp_pp_dp_mapping", (None, None))
    fsdp = next(((k, keys[k]) for k in ("ddp.use_megatron_fsdp", "dist.use_megatron_fsdp")
                 if keys.get(k, (None,))[0] is True), None)
    if mapping is True and fsdp is not None:
        raise start_refusal(mev, f"dist.use_tp_pp_dp_mapping true with {fsdp[0]} true ({fsdp[1][1]})",
                            "Megatron-Bridge refuses it (training/config.py:1124: 'use_tp_pp_dp_mapping is not "
                            "supported with Megatron FSDP')",
                            "set dist.use_tp_pp_dp_mapping: false, or turn Megatron-FSDP off")


def _bridge_shared_expert_overlap(keys: dict[str, tuple[Any, str]]) -> None:
    """model.moe_shared_expert_overlap true beside the EP all-to-all overlap (the model's or the comm_overlap section's
    overlap_moe_expert_parallel_comm): Megatron-Bridge asserts against the pair (training/comm_overlap.py:513-515) and
    so does Megatron-Core (0.19.2 transformer/transformer_config.py:2706-2708), as the Megatron-LM flags' reader
    refuses it (read_args); a review found such a config priced."""
    overlap, oev = _bridge_value(keys, "overlap_moe_expert_parallel_comm")
    shared, sev = _bridge_value(keys, "moe_shared_expert_overlap")
    if overlap is True and shared is True:
        raise start_refusal(sev, f"moe_shared_expert_overlap true with overlap_moe_expert_parallel_comm true ({oev})",
                            "Megatron-Bridge refuses it (training/comm_overlap.py:513-515) and Megatron-Core too "
                            "(transformer_config.py:2706-2708: 'disable moe_shared_expert_overlap when enabling "
                            "overlap_moe_expert_parallel_comm')", "set model.moe_shared_expert_overlap: false or turn "
                            "the EP overlap off")


def _bridge_recipe(keys: dict[str, tuple[Any, str]], s: Settings) -> None:
    """The recipe fields a Megatron-Bridge config states, as its flag twins in `_megatron_recipe` read them: the
    overlaps, fusions, dispatcher, recompute modules, CUDA graphs, FP8 recipe and parameters, MTP, capacity
    factor, optimizer-state width."""
    for name, field in _BRIDGE_RECIPE_BOOLS.items():
        value, ev = _bridge_value(keys, name)
        if name == "tp_comm_overlap" and value is True and _has_section(keys, "comm_overlap") \
                and (s.value("tp", 1) < 2 or not s.value("sequence_parallel", False)):
            value, ev = False, (f"{ev} (turned off by Megatron-Bridge below TP 2 or without sequence parallelism: "
                                f"comm_overlap.py _get_model_comm_overlap_cfgs)")
        if isinstance(value, bool):
            s.put(f"recipe.{field}", value, ev)
    _bridge_p2p_overlap(keys, s)
    _bridge_fsdp_checkpoint_format(keys)
    _bridge_fsdp_rank_mapping(keys)
    moe = bool(keys.get("model.num_moe_experts", (None,))[0])
    if moe:
        _bridge_shared_expert_overlap(keys)
    state: dict[str, tuple[Any, str]] = {}
    if moe:
        fusion, ev = _bridge_value(keys, "moe_permute_fusion")
        if isinstance(fusion, bool):
            s.put("recipe.moe_fusions", fusion, ev)
        if _section_whole(keys, "model"):  # a saved config: a field it leaves out is TransformerConfig's False
            _half_moe_fusion({f: ev for f, (v, ev) in ((f, _bridge_value(keys, f[2:].replace("-", "_")))
                                                        for f in MOE_FUSION_FLAGS) if v is True}, s, bridge=True)
        kind, ev = _bridge_value(keys, "moe_token_dispatcher_type")
        if kind is not None:
            if kind not in ("alltoall", "allgather", "flex"):
                raise InputError(f"{ev}: moe_token_dispatcher_type must be alltoall, allgather or flex, got {kind!r}")
            state["dispatcher"] = (kind, ev)
            backend, bev = _bridge_value(keys, "moe_flex_dispatcher_backend")
            if kind == "flex" and backend is not None:
                state["backend"] = (str(backend), bev)
        factor, ev = _bridge_value(keys, "moe_expert_capacity_factor")
        if factor is not None:
            if not isinstance(factor, int | float) or isinstance(factor, bool):
                raise InputError(f"{ev}: moe_expert_capacity_factor must be a number or null, got {factor!r}")
            if factor > 0:  # Megatron reads a negative factor as dropless
                s.put("recipe.moe_capacity_factor", float(factor), ev)
        force, ev = _bridge_value(keys, "moe_router_force_load_balancing")
        if force is True:
            s.put("recipe.routing_imbalance", 1.0, f"{ev} ({FORCE_BALANCED})")
    modules, ev = _bridge_value(keys, "recompute_modules")
    if modules is not None:
        names = [modules] if isinstance(modules, str) else modules
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise InputError(f"{ev}: recompute_modules must be a list of module names, got {modules!r}")
        s.put("recipe.recompute_modules", megatron_modules(names, ev), ev)
    for name in ("recompute_method", "recompute_num_layers"):
        value, ev = _bridge_value(keys, name)
        if value is not None:
            state[name] = ((read_int(value, name, ev) if name == "recompute_num_layers" else str(value)), ev)
    impl, ev = _bridge_value(keys, "cuda_graph_impl")
    if _bridge_value(keys, "enable_cuda_graph")[0] is True:
        impl, ev = "local", _bridge_value(keys, "enable_cuda_graph")[1]
    elif _bridge_value(keys, "external_cuda_graph")[0] is True:
        impl, ev = "transformer_engine", _bridge_value(keys, "external_cuda_graph")[1]
    if impl is not None:
        state["graph_impl"] = (str(impl), ev)
        # the newer megatron-core API names the graphed modules cuda_graph_modules (cuda_graph_scope deprecated)
        scope, sev = _bridge_value(keys, "cuda_graph_modules")
        if scope is None:
            scope, sev = _bridge_value(keys, "cuda_graph_scope")
        if scope is not None:
            state["graph_modules"] = ([scope] if isinstance(scope, str) else [str(x) for x in scope], sev)
    named, nev = keys.get("mixed_precision", (None, None))
    if isinstance(named, str):
        name = named.replace("-", "_")  # get_mixed_precision_config takes either
        if name in _BRIDGE_NAMED_FP8:
            recipe, gather, ends = _BRIDGE_NAMED_FP8[name]
            why = f"{nev} (Megatron-Bridge's {name}: fp8_recipe {recipe}, fp8_param_gather {gather})"
            s.put("recipe.fp8_recipe", _BRIDGE_FP8_RECIPES[recipe], why)
            s.put("recipe.fp8_params", gather, why)
            if ends:
                s.ignored.append(f"mixed_precision {named}: the first and last {ends} transformer layer(s) run BF16 "
                                 f"GEMMs (first_last_layers_bf16), priced as FP8 ({nev})")
        elif _BRIDGE_NAMED_OTHER.get(name) == "nvfp4":
            s.ignored.append(f"mixed_precision {named}: NVFP4 GEMMs, not modelled: priced as BF16 ({nev})")
        elif name not in _BRIDGE_NAMED_OTHER:
            known = sorted([*_BRIDGE_NAMED_FP8, *_BRIDGE_NAMED_OTHER])
            raise InputError(f"{nev}: mixed_precision {named!r} is no Megatron-Bridge recipe "
                             f"(get_mixed_precision_config refuses it); give one of {', '.join(known)}, or a "
                             f"mixed_precision section")
    else:
        fp4, fev = _bridge_value(keys, "fp4")
        if fp4 not in (None, False, "null", "None"):  # a saved section's fp4 (a user trial: e2m1 read as plain BF16)
            recipe4, _ = _bridge_value(keys, "fp4_recipe")
            s.ignored.append(f"mixed_precision fp4 {fp4}{f' ({recipe4})' if recipe4 else ''}: FP4 GEMMs, not "
                             f"modelled: priced as {s.value('precision', 'bf16')} ({fev})")
    if not isinstance(named, str) and s.value("precision", "") == "fp8":
        recipe, ev = _bridge_value(keys, "fp8_recipe")
        if recipe is not None:
            if recipe not in _BRIDGE_FP8_RECIPES:
                raise InputError(f"{ev}: fp8_recipe {recipe!r} is not priced; placement knows "
                                 f"{', '.join(_BRIDGE_FP8_RECIPES)}")
            s.put("recipe.fp8_recipe", _BRIDGE_FP8_RECIPES[recipe], ev)
        gather, gev = _bridge_value(keys, "fp8_param_gather")
        param, pev = _bridge_value(keys, "fp8_param")
        # MixedPrecisionConfig keeps the two equal, the one set last winning (its __setattr__): its __init__ sets
        # fp8_param_gather after fp8_param, so a stated fp8_param_gather decides
        if isinstance(gather, bool) and ("mixed_precision.fp8_param_gather" in keys or not isinstance(param, bool)):
            s.put("recipe.fp8_params", gather, gev)
        elif isinstance(param, bool):
            s.put("recipe.fp8_params", param, pev)
        _bridge_mxfp8_gather_buffer(keys, s)
        ends, eev = _bridge_value(keys, "first_last_layers_bf16")
        if ends is True:  # Bridge's fp8-cs recipes save their section so (update_config_with_precision_overrides)
            start = _bridge_value(keys, "num_layers_at_start_in_bf16")[0]
            end = _bridge_value(keys, "num_layers_at_end_in_bf16")[0]
            s.ignored.append(f"first_last_layers_bf16: the first {start if start is not None else 1} and last "
                             f"{end if end is not None else 1} transformer layer(s) run BF16 GEMMs "
                             f"(num_layers_at_start/end_in_bf16, default 1 each), priced as FP8 ({eev})")
    if s.value("precision", "") == "fp8":
        _bridge_fp8_reduce_scatters(keys, s)
    mtp, ev = _bridge_value(keys, "mtp_num_layers")
    if mtp is not None:
        s.put("recipe.mtp_layers", read_int(mtp, "mtp_num_layers", ev, minimum=0), ev)
    dtypes = [keys.get(f"optimizer.{k}", (None, None)) for k in ("exp_avg_dtype", "exp_avg_sq_dtype")]
    if all(_torch_dtype(v) == "bf16" for v, _ in dtypes):
        s.put("recipe.optimizer_state_bf16", True, f"{dtypes[0][1]}; {dtypes[1][1]}")
    _megatron_recipe_finish(s, state)


UB_REDUCE_SCATTERS = ("proj_fprop", "fc2_fprop", "qkv_dgrad", "fc1_dgrad")
"""Transformer Engine's userbuffers GEMMs that reduce-scatter their output: the row-parallel forwards, pipelined by
default, and the column-parallel input gradients where a config gives them a pipeline (module/base.py:346-357,
520-535 initialize_ub; NVIDIA/TransformerEngine d0067d0da)."""
BRIDGE_PIPELINE_CFG = "megatron.bridge.training.comm_overlap.PipelineOverlapCfg"
"""The userbuffers dataclass whose fp8_buf defaults to `(False,)` (Megatron-Bridge training/comm_overlap.py:52 at
067f987df), a one-element tuple a saved config writes as the list [false]."""


def _bridge_fp8_reduce_scatters(keys: dict[str, tuple[Any, str]], s: Settings) -> None:
    """A per-tensor FP8 Bridge job whose userbuffers config reduce-scatters in FP8, said: Transformer Engine gives a
    pipelined reduce-scatter an FP8 buffer where its entry's fp8_buf is truthy (`user_ub_cfg[name].get("fp8_buf",
    False) and name in methods["pipeline"]`, module/base.py:564-566), and then the GEMM writes FP8 that the
    reduce-scatter moves (linear.py:1917-1922 fp8_output / fp8_grad; comm_gemm_overlap.cpp
    reducescatter2_userbuff_stridedoutput_fp8).  Megatron-Bridge's PipelineOverlapCfg defaults fp8_buf to `(False,)`,
    a tuple Python takes as true, so its BF16 userbuffers configs (userbuffers_bf16_*, which its FP8 recipes reuse)
    reduce-scatter in FP8 under FP8, and a saved config writes that default as [false], true all the same.  The config
    Bridge hands TE is the comm_overlap section's tp_comm_overlap_cfg (asdict, comm_overlap.py:619-632; null: TE's own
    defaults, which reduce-scatter 16-bit), else the model's.  placement prices TP reduce-scatters at 16 bits and has no
    field for this: the job moves fewer bytes than printed (a QA finding: nothing said it)."""
    if s.value("recipe.tp_comm_overlap", False) is not True or s.value("recipe.fp8_recipe", "tensorwise") != \
            "tensorwise":
        return
    key = "comm_overlap.tp_comm_overlap_cfg" if _has_section(keys, "comm_overlap") else "model.tp_comm_overlap_cfg"
    cfg, ev = keys.get(key, (None, None))
    if not isinstance(cfg, dict):
        return
    fp8 = []
    for name in UB_REDUCE_SCATTERS:
        entry = cfg.get(name)
        if not isinstance(entry, dict):
            continue
        dataclass = entry.get("_target_") == BRIDGE_PIPELINE_CFG
        method = entry.get("method", "pipeline" if dataclass or name.endswith("_fprop") else None)
        buf = entry.get("fp8_buf", (False,) if dataclass else False)
        if method == "pipeline" and buf:  # Python's truth, as TE's `and` takes it: [false] is true
            fp8.append(f"{name} fp8_buf {yaml_text(list(buf) if isinstance(buf, tuple) else buf)}"
                       + (" (PipelineOverlapCfg's default (False,))" if "fp8_buf" not in entry else ""))
    if fp8:
        s.ignored.append(
            f"{key}: {', '.join(fp8)}: Transformer Engine gives these reduce-scatters FP8 buffers (it reads fp8_buf "
            f"as Python's truth, module/base.py:564-566, and a one-element list or tuple such as Megatron-Bridge's "
            f"PipelineOverlapCfg default (False,), comm_overlap.py:52, is true), so their GEMMs write FP8 and the "
            f"reduce-scatters move 1 byte a value; priced as 16-bit reduce-scatters, so the job's TP traffic is "
            f"smaller than printed; fp8_buf: false (not [false]) keeps them 16-bit ({ev})")


def yaml_text(value: Any) -> str:
    """A YAML value as a change list writes it: true / false / null, numbers and strings as they are, a list as
    [a, b], a mapping as {...}."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(yaml_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{...}"
    return str(value)



_BRIDGE_SWITCHES = ("fp8_param_gather", "fp8_param", "moe_permute_fusion", "moe_router_force_load_balancing",
                    "first_last_layers_bf16", "reuse_grad_buf_for_mxfp8_param_ag",
                    "enable_cuda_graph", "external_cuda_graph", "moe_shared_expert_overlap", "moe_router_fusion")
"""Model fields besides _BRIDGE_RECIPE_BOOLS' that the reader takes as true or false (a mixed_precision or
comm_overlap section may state them too)."""
BRIDGE_BOOL_KEYS = frozenset({
    "model.sequence_parallel", "model.overlap_p2p_comm", "model.cpu_offloading",
    "ddp.use_distributed_optimizer", "optimizer.use_distributed_optimizer", "ddp.use_megatron_fsdp",
    "dist.use_megatron_fsdp", "dist.use_torch_fsdp2", "dist.use_tp_pp_dp_mapping", "ddp.grad_reduce_in_fp32",
    "ddp.overlap_grad_reduce", "ddp.overlap_param_gather", "ddp.align_param_gather", "comm_overlap.overlap_grad_reduce",
    "comm_overlap.overlap_param_gather", "comm_overlap.align_param_gather", "comm_overlap.overlap_p2p_comm",
    "mixed_precision.grad_reduce_in_fp32", "mixed_precision.bf16", "model.gradient_accumulation_fusion",
    "rerun_state_machine.check_for_nan_in_loss",
    *(f"{section}.{name}" for section in ("model", "mixed_precision", "comm_overlap")
      for name in (*_BRIDGE_RECIPE_BOOLS, *_BRIDGE_SWITCHES)),
})
"""Every Megatron-Bridge field the reader reads as a boolean."""


def _check_bridge_bools(keys: dict[str, tuple[Any, str]]) -> None:
    """Refuse a boolean field written as anything but true, false or null.  Megatron-Bridge merges a YAML file
    into an untyped OmegaConf config of the recipe (training/utils/omegaconf_utils.py create_omegaconf_dict_config:
    OmegaConf.create of a plain dict) and sets each field to what the merge holds, so `sequence_parallel: "false"`
    reaches Megatron-Core as a non-empty string, which every `if config.sequence_parallel:` takes as true (a saved
    config's `_target_` instantiation passes it on as written too).  Reading it as false, or as unset, would price a
    job that does not run (a field read is never substituted)."""
    bad = [(key, value, ev) for key, (value, ev) in keys.items()
           if key in BRIDGE_BOOL_KEYS and value is not None and not isinstance(value, bool)]
    if not bad:
        return

    def one(key: str, value: Any, ev: str) -> str:
        kind = "a string" if isinstance(value, str) else f"a {type(value).__name__}"
        return f"{ev}: {key} is {value!r}, {kind}, which an `if` test takes as {yaml_text(bool(value))}"

    raise InputError("; ".join(one(*b) for b in bad) + ". Megatron-Bridge passes each value on as written, not as a "
                     "boolean (it merges the YAML into an untyped OmegaConf config); write "
                     f"{', '.join(b[0].rpartition('.')[2] for b in bad)} as true or false, unquoted")

def _torch_dtype(value: Any) -> str | None:
    """bf16 / fp16 / fp32 of a dtype as a Megatron-Bridge YAML writes it: a string, or {_target_: torch.bfloat16}."""
    if isinstance(value, dict):
        value = value.get("_target_")
    return {"torch.bfloat16": "bf16", "bfloat16": "bf16", "bf16": "bf16", "torch.float16": "fp16",
            "torch.float32": "fp32", "float32": "fp32", "fp32": "fp32"}.get(str(value)) if value is not None else None


def _hydra_value(text: str) -> Any:
    """An override's value as Hydra's grammar types it (hydra/grammar/OverrideLexer.g4: BOOL is true or false in any
    case, NULL null, INT and FLOAT numbers, anything else a string), which Megatron-Bridge's parse_hydra_overrides
    applies (training/utils/omegaconf_utils.py:163-186).  PyYAML's YAML 1.1 reads yes, no, on and off as booleans
    too, where Hydra keeps the words: `model.sequence_parallel=no` reaches Megatron-Core as "no", which an `if` takes
    as true (a QA run priced it as sequence parallelism off); kept a string, it is refused (_check_bridge_bools)."""
    if not text:
        return None
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return text if isinstance(value, bool) else value


def hydra_overrides(words: list[Word]) -> tuple[dict[str, tuple[Any, str]], str | None]:
    """Bridge keys of a recipe's `section.key=value` overrides, and the --config-file it names."""
    keys: dict[str, tuple[Any, str]] = {}
    config_file = None
    i = 0
    while i < len(words):
        w = words[i]
        if w.text in ("--config-file", "--config_file"):
            if i + 1 >= len(words):
                raise InputError(f"{w.site}: --config-file is missing its value")
            config_file = words[i + 1].text
            i += 2
            continue
        m = re.fullmatch(r"\+{0,2}([A-Za-z_][\w.]*)=(.*)", w.text, re.S)
        if m:
            word_check(w, m.group(1))
            value = _hydra_value(m.group(2))
            section, _, rest = m.group(1).partition(".")
            keys[f"{_BRIDGE_SECTIONS.get(section, section)}.{rest}" if rest else section] = (value, w.evidence)
        i += 1
    return keys, config_file


MEGATRON_LOG_BEGIN = "------------------------ arguments ------------------------"
MEGATRON_LOG_END = "-------------------- end of arguments ---------------------"
"""The block Megatron-LM prints at start-up (megatron/training/arguments.py `_print_args`): every argument as
`  name ........ value`, sorted; the most exact record of what a running job parsed."""
_LOG_LINE = re.compile(r"^\s*([a-z_][a-z0-9_]*) \.+ (.*)$")
_LOG_FLAGS = {"fp8": "--fp8-format", "data_parallel_size": None, "world_size": None,
              "microbatch_group_size_per_vp_stage": "--microbatch-group-size-per-virtual-pipeline-stage"}
"""Printed names whose flag is not `--` + the name with dashes (None: read directly, not as a flag)."""
_LOG_DEFAULTS = {"num_distributed_optimizer_instances": "1"}
"""Printed values that are Megatron's defaults of a flag the reader would otherwise note as set."""
_LOG_OFF = {"align_param_gather": "--no-align-param-gather", "overlap_p2p_comm": "--no-overlap-p2p-communication",
            "gradient_accumulation_fusion": "--no-gradient-accumulation-fusion",
            "yarn_correction_range_round_to_int": "--no-yarn-correction-range-round-to-int"}
"""Printed names of Megatron-LM's `store_false` switches (their `dest`, core_v0.19.0 arguments.py): a printed False is
the `--no-...` flag that set it, not an unset argument (a trial: a log of an interleaved job run with
--no-align-param-gather --no-overlap-p2p-communication was priced with both on, sourced to Megatron's default)."""
_LOG_DATED_SWITCHES = (("align_param_gather", "recipe.align_param_gather", "4e3840535b (2024-08-23)"),
                       ("overlap_p2p_comm", "recipe.pp_comm_overlap", "f9283c5a8a (2023-05-31)"))
"""An interleaved pipeline's switches that placement's recipe turns on by default, with the Megatron-LM commit that
added each: a log whose block does not print one ran a Megatron-LM without it (a block of core_r0.8.0 prints no
align_param_gather and was priced with aligned gathers, core_r0.9.0's default)."""
_LOG_OFF_INTERLEAVED = ("align_param_gather", "overlap_p2p_comm")
"""Those validate_args prints False itself without an interleaved schedule (core_v0.19.0 arguments.py:976-979): a
False there is no flag of the job's."""


def log_arguments(path: Path, lines: list[str], expected: str = "expected a Megatron-LM training log"
                  ) -> list[tuple[str, str, int]]:
    """(name, printed value, line number) of each argument in a log's arguments block, launcher prefixes taken
    off each line (loaders.files.unprefixed, as for nccl-tests outputs); an error naming the file when it has
    no complete block (`expected` says what the file should have been)."""
    lines = [unprefixed(line) for line in lines]  # `srun --label`, torchrun's `[default0]:`
    begins = [n for n, x in enumerate(lines, 1) if x.strip() == MEGATRON_LOG_BEGIN]
    if len(begins) > 1:
        # a job restarted into the same file (Slurm's --open-mode=append, a requeue, `>>`): its iteration lines would
        # be read as one run's, at the first block's layout (a user check: a tp 1 run of 9.6 s steps followed by a
        # tp 2 run of 19.9 s steps was read as one tp 1 run of 19.89 s; the audit priced the first block's job)
        raise InputError(f"{path}:{begins[1]}: a second Megatron arguments block starts here (the first on line "
                         f"{begins[0]}; {len(begins)} in all): the log holds {len(begins)} runs (a restart appended "
                         f"to the same file), whose iteration lines would be read as one run's step, at the first "
                         f"block's layout; give each run's log on its own (split the file at line {begins[1]})")
    try:
        start = lines.index(MEGATRON_LOG_BEGIN) + 1
        end = lines.index(MEGATRON_LOG_END, start)
    except ValueError:
        raise InputError(f"{path}: no complete Megatron arguments block ({MEGATRON_LOG_BEGIN!r} ... "
                         f"{MEGATRON_LOG_END!r}); {expected}") from None
    return [(m.group(1), m.group(2).strip(), n + 1) for n in range(start, end) if (m := _LOG_LINE.match(lines[n]))]


def read_log(path: Path, s: Settings) -> None:
    """A training log's argument block, turned back into the flags that set it, each with its log line."""
    text = read_text(path, "Megatron-LM log", "expected a log with Megatron's printed arguments block")
    lines = text.splitlines()
    words: list[Word] = []
    printed = log_arguments(path, lines)
    sequence_parallel = any(name == "sequence_parallel" and value == "True" for name, value, _ in printed)
    interleaved = any(name == "virtual_pipeline_model_parallel_size" and value.isdigit() for name, value, _ in printed)
    for name, value, line in printed:
        org = Origin(str(path), line, lines[line - 1].strip())
        if value == "False" and name in _LOG_OFF and (interleaved or name not in _LOG_OFF_INTERLEAVED):
            words.append(Word(_LOG_OFF[name], org, org))
            continue
        if name == "async_tensor_model_parallel_allreduce" and value == "False" and not sequence_parallel:
            # --no-async-tensor-model-parallel-allreduce (validate_args also prints False under sequence parallelism,
            # whose own backward runs its collectives asynchronously); the block prints every argument the version
            # has, so a newer argument's name dates it
            te = next((f"transformer_impl transformer_engine ({path}:{n})" for name_, v, n in printed
                       if name_ == "transformer_impl" and v == "transformer_engine"), None)
            async_switch(str(org), f"{path}:{line}",
                         async_switch_moot(None, te, newer_than_async_switch({n for n, _, _ in printed})), s)
            continue
        if name == "accumulate_allreduce_grads_in_fp32" and value in ("True", "False"):
            # printed after validate_args: the gradient width the job ran (_gradient_width need not infer it)
            s.put("recipe.grad_reduce_fp32", value == "True", str(org))
            continue
        if name in ("data_parallel_size", "world_size") and value.isdigit():
            s.put("dp" if name == "data_parallel_size" else "world_size", int(value), str(org))
            continue
        if name == "moe_layer_freq" and value.startswith("["):  # printed evaluated, one 0/1 per layer (a review: a
            # DeepSeek-V3 log was refused as all-MoE, its list skipped as an object no flag spells)
            words += [Word("--moe-layer-freq", org, org), Word("".join(value.split()), org, org)]
            continue
        if value in ("None", "False") or value.startswith(("[", "{", "(", "<", "torch.")) or name.startswith("_") \
                or _LOG_DEFAULTS.get(name) == value:
            continue  # unset, off, or a Python object no flag spells
        enum = re.fullmatch(r"[A-Z]\w*\.(\w+)", value)  # AttnBackend.fused: the flag's value is the member name
        value = enum.group(1) if enum else value
        flag = _LOG_FLAGS.get(name, "--" + name.replace("_", "-"))
        words.append(Word(flag, org, org))
        if value != "True":
            words.append(Word(value, org, org))
    if not words:
        raise InputError(f"{path}: the arguments block holds no argument lines")
    read_args(words, s, typos=False)
    names = {name for name, _, _ in printed}
    for name, field, since in _LOG_DATED_SWITCHES:
        if interleaved and name not in names and not s.has(field):
            s.put(field, False, f"{path}: its arguments block, which prints every argument of the job's Megatron-LM, "
                                f"has no {name}: a Megatron-LM before {since}, which had no such switch (off)")


def join(groups: list[Settings]) -> Reading:
    """A Megatron job from its files' settings (Megatron-LM scripts, logs, Bridge YAML and overrides)."""
    s = merge(groups)
    s.take("grad_accumulation")  # an HF Trainer flag, for DeepSpeed's batch identity: Megatron has none
    deepspeed_binding(s)  # a Megatron script the deepspeed launcher starts
    finish(s)
    _megatron_lm_defaults(s)
    model_defaults(s)
    if s.megatron_lm and not s.model_elsewhere:
        window_layers(s)
    # (a user trial: placement's own launch.sbatch audited alone with --script-args deepspeed was told "the Megatron
    # launch states none of --num-layers ...", and without that a ZeRO-0 job of defaults was priced)
    deepspeed_json_unread(s)
    return s.reading("megatron")


PIPELINE_MODULE_ZERO = ("DeepSpeed's PipelineEngine asserts \"ZeRO-2 and ZeRO-3 are incompatible with pipeline "
                        "parallelism\" (runtime/pipe/engine.py:76-77, since fbece50b, 2021-04-19)")
"""Why a Megatron-DeepSpeed job built as a PipelineModule does not start under ZeRO-2/3."""
NO_PIPELINE_MODULE = ("Megatron-DeepSpeed builds GPTModelPipe, a PipelineModule, under --deepspeed at any "
                      "--pipeline-model-parallel-size unless --no-pipeline-parallel is given "
                      "(microsoft/Megatron-DeepSpeed pretrain_gpt.py:51 at f4157bea; BigScience's fork always, "
                      "pretrain_gpt.py:56-58 at 8387ae17)")
"""When a Megatron-DeepSpeed job runs DeepSpeed's PipelineEngine."""


PIPELINE_MODULE_FLAGS = frozenset({"--tensor-model-parallel-size", "--pipeline-model-parallel-size",
                                   "--micro-batch-size"})
"""Megatron-DeepSpeed's layout flags (both forks' arguments.py): a --deepspeed command with them runs its
pretrain_gpt.py, not the 2020 Megatron-LM fork of DeepSpeedExamples (--model-parallel-size, --batch-size), whose
GPT2Model is no PipelineModule."""


def _pipeline_module_zero(s: Settings) -> None:
    """A Megatron-DeepSpeed job under ZeRO-2/3 without --no-pipeline-parallel: its model is a PipelineModule even at
    pp 1, and DeepSpeed's PipelineEngine refuses the stage (a user trial's published script at PP=1, ZERO_STAGE=2
    was priced as running)."""
    stage = s.value("zero_stage", 0)
    if not s.pipeline_module or s.hf_trainer or stage < 2:
        return
    s.refusal = s.refusal or str(start_refusal(
        s.sources.get("zero_stage") or s.path, f"ZeRO stage {stage} without --no-pipeline-parallel",
        f"{NO_PIPELINE_MODULE}, and {PIPELINE_MODULE_ZERO}",
        "add --no-pipeline-parallel (with --pipeline-model-parallel-size 1) or use ZeRO stage 0 or 1"))


def finish(s: Settings) -> None:
    """Megatron's rules on the merged settings: the pipeline layout string and layers per virtual stage give
    vpp (and the first and last stages' layers); sequence parallelism is off at tp 1; defaults for what the
    files leave out (no recompute, ZeRO-0).  Megatron-DeepSpeed jobs take the same rules."""
    layout = s.take("pp_layout")
    pp = s.value("pp", 1)
    if layout is not None:
        stages = _layout_stages(layout[0], layout[1])
        if len(stages) % pp:
            raise InputError(f"{layout[1]}: the layout has {len(stages)} stages, not a multiple of pp {pp}")
        vpp = len(stages) // pp
        if s.has("vpp") and s.value("vpp") != vpp:
            raise InputError(f"contradictory vpp: {s.value('vpp')} ({s.sources['vpp']}) but the layout gives {vpp} "
                             f"({layout[1]})")
        s.put("vpp", vpp, layout[1])
        per_rank = [sum(stages[r + k * pp].count("t") for k in range(vpp)) for r in range(pp)]
        s.put("first_stage_layers", per_rank[0], layout[1])
        s.put("last_stage_layers", per_rank[-1], layout[1])
    lps = s.entry("layers_per_virtual_stage")
    if lps is not None and s.has("num_layers") and pp > 1:
        extra = sum(1 for k in ("recipe.account_for_embedding", "recipe.account_for_loss") if s.has(k))
        layers = s.value("num_layers") + extra
        per, rem = divmod(layers, pp)
        if rem or per % lps[0]:
            raise InputError(f"{lps[1]}: --num-layers-per-virtual-pipeline-stage {lps[0]} does not divide "
                             f"{layers} layers / pp {pp}; Megatron rejects it")
        s.put("vpp", per // lps[0], lps[1])
        s.take("layers_per_virtual_stage")
    tp = s.value("tp", 1)
    if not s.has("sequence_parallel"):
        s.put("sequence_parallel", False, "")
    elif tp == 1 and s.value("sequence_parallel"):
        s.ignored.append(f"sequence_parallel true with model_parallel_size 1 has no effect in GPT-NeoX "
                         f"({s.sources['sequence_parallel']})" if s.neox else
                         f"sequence parallel with tp 1 is turned off by Megatron ({s.sources['sequence_parallel']})")
        s.put("sequence_parallel", False, s.sources["sequence_parallel"])
    if not s.has("recompute"):
        s.put("recompute", "none", "")
    if not s.has("zero_stage"):
        s.put("zero_stage", 0, "")
    _pipeline_module_zero(s)


def _layout_stages(text: str, ev: str) -> list[str]:
    """megatron-core 0.19.2 `PipelineParallelLayerLayout.parse_str_to_list`: commas are cosmetic, `(x)*n` and
    `x*n` repeat, `|` separates stages; E embedding, t transformer layer, m MTP, L loss."""
    s = text.replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        s = re.sub(pattern, lambda m: m.group(1) * int(m.group(2)), s)
    bad = set(s) - set("EtmL|")
    if bad:
        raise InputError(f"{ev}: pipeline layout has unknown characters {sorted(bad)}; expected E, t, m, L, |, (x)*n")
    return s.split("|")


