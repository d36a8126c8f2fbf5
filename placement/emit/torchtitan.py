"""torchtitan 0.3.0: `torchrun ... -m torchtitan.train --module M --config F` plus `--section.key` flags.

Keys and rules from reference/frameworks.md §1 (torchtitan 0.3.0 `ParallelismConfig`, `ParallelDims`):
the dense mesh is (pp, dp_replicate, dp_shard, cp, tp), TP innermost, as placement orders ranks; EP
borrows the innermost ranks of dp_shard x cp x tp (our etp = 1 order).  FSDP is torchtitan's data
parallelism: ZeRO-3 = dp_shard (HSDP: dp_shard inside, dp_replicate across), ZeRO-2 = FSDP without
resharding after forward, DDP = dp_replicate only, and only with cp 1: FSDP shards over dp_shard x cp whenever
cp > 1 (`fsdp_enabled`).  ZeRO-1 does not exist there; a ZeRO-1 plan, and a ZeRO-0 one with cp > 1, runs ZeRO-2
(`run_zero_stage`).

The files are written for torchtitan 0.3.0 (`pip install torchtitan==0.3.0`; its main branch has since removed some
of these keys) and state every setting the price depends on that a shipped config would otherwise choose: the
resharding policy, CUDA graphs and async TP (`flags`), and the FP8 recipe the configs run is priced (rowwise for
the Float8 configs, frameworks.CAPABILITIES; MXFP8 with the LM head converted for llama3_8b_mxfp8, CONFIG_RECIPE).
"""

from __future__ import annotations

from functools import cache

from placement.emit.common import (
    PER_OP_ONLY,
    EmitContext,
    Runs,
    attention_features,
    differs_from_fixed,
    forced_fields,
    forced_warnings,
    gpt_oss_features,
    header,
    header_runs,
    recipe_warnings,
    refusal,
    runs_forced,
    runs_model,
    runs_recipe,
    torchrun_lines,
    warn_block,
)
from placement.frameworks import CAPABILITIES, seq_divisor
from placement.plan import LayoutOut
from placement.specs import AcceleratorSpec, Llama3RopeSpec, ModelSpec
from placement.specs.recipe import CudaGraphs, Fp8Recipe

VERSION = "torchtitan 0.3.0"
PIP_PIN = "torchtitan==0.3.0"

# placement catalog name -> (torchtitan --module, --config)
MODELS = {
    "llama3-8b": ("llama3", "llama3_8b"),
    "llama3-70b": ("llama3", "llama3_70b"),
    "llama3-405b": ("llama3", "llama3_405b"),
    "deepseek-v3": ("deepseek_v3", "deepseek_v3_671b"),
    "qwen3-30b-a3b": ("qwen3", "qwen3_30b_a3b"),
    "gpt-oss-120b": ("gpt_oss", "gpt_oss_120b"),
}
FP8_CONFIGS = {"llama3_405b": "llama3_405b", "deepseek_v3_671b": "deepseek_v3_671b_float8"}
"""torchtitan 0.3.0 config -> the config of the same model with Float8 linear layers (and grouped experts).
Precision is set by the config function's converters, not by a flag: `llama3_405b` always converts,
`llama3_70b` never, `deepseek_v3_671b_float8` is the FP8 twin of `deepseek_v3_671b` (models/*/config_registry.py).
`llama3_8b` has no Float8 twin, its FP8 twin is MXFP8 (MXFP8_CONFIGS)."""
MXFP8_CONFIGS = {"llama3_8b": "llama3_8b_mxfp8"}
"""torchtitan 0.3.0 config -> the config of the same model with MXFP8 linear layers, which runs on Blackwell only:
`llama3_8b_mxfp8` is `llama3_8b` with MXFP8LinearConverter (models/llama3/config_registry.py:242-254), whose
constructor refuses a GPU below compute capability 10.0 (components/quantization/mx.py:70-71)."""
CONFIG_RECIPE: dict[str, tuple[tuple[str, object, str], ...]] = {
    "llama3_8b_mxfp8": (
        ("fp8_recipe", Fp8Recipe.MXFP8,
         "torchtitan 0.3.0's llama3_8b_mxfp8 converts its linear layers with MXFP8LinearConverter "
         "(models/llama3/config_registry.py:248-253), which builds torchao's MXFP8Linear (components/quantization/"
         "mx.py:20-44, 82-89): 1x32 blocks of float8_e4m3fn with E8M0 scales for the input, the weight and the "
         "output gradient of all three GEMMs (torchao 0.18.0, the release torchtitan 0.3.0 was validated with, "
         "prototype/moe_training/mxfp8_linear.py:61-66)"),
        ("fp8_saves_16bit_inputs", True,
         "torchtitan 0.3.0's llama3_8b_mxfp8 runs torchao's MXFP8Linear, which saves the 16-bit input and weight "
         "for backward (torchao 0.18.0 prototype/moe_training/mxfp8_linear.py:108, save_for_backward(input_hp, "
         "weight_hp)) and casts the input again along its columns there (mxfp8_linear.py:234-243), not the 1-byte "
         "copy Transformer Engine's MXFP8 keeps"),
        ("fp8_lm_head", True,
         "torchtitan 0.3.0's llama3_8b_mxfp8 converts every linear layer, the LM head too: its MXFP8LinearConverter "
         "has no fqns (models/llama3/config_registry.py:251), and with none it converts every Linear.Config "
         "(components/quantization/mx.py:55-60, 82-83), lm_head among them (models/llama3/__init__.py:251); the "
         "chunked loss calls that module (components/loss.py:748)"),
    ),
}
"""torchtitan 0.3.0 config -> (recipe field, value, why) its function runs other than CAPABILITIES["torchtitan"]'s
rows (which hold for its Float8 configs): frameworks.recipe_rows puts them in their place.  The configs that compile
their loss are added below (`loss_compiled`)."""


def loss_compiled(config: str) -> tuple[bool, str]:
    """(whether torchtitan 0.3.0's named `config` compiles its loss, where it says so): compile.enable with "loss" in
    compile.components (BaseLoss._maybe_compile, components/loss.py), as the config function sets them
    (audit.readers.torchtitan_configs, read from the 0.3.0 wheel) or 0.3.0's defaults (enable false)."""
    from placement.audit.readers.torchtitan_configs import CONFIGS

    module = next((m for m, cfgs in CONFIGS.items() if config in cfgs), "")
    return _loss_compiled_in(module, CONFIGS.get(module, {}).get(config, {}))


def _loss_compiled_in(module: str, keys: dict[str, tuple]) -> tuple[bool, str]:
    """`loss_compiled` of a config of `module` that sets `keys` (its CONFIGS entry)."""
    from placement.audit.readers.torchtitan_configs import DEFAULTS

    enable = keys.get("compile.enable", DEFAULTS["compile.enable"])
    parts = keys.get("compile.components", DEFAULTS["compile.components"])
    where = "; ".join(f"{name} = {value[0]} ({_registry_site(module, value)})"
                      for name, value in (("compile.enable", enable), ("compile.components", parts)))
    return bool(enable[0]) and "loss" in parts[0], where


def _registry_site(module: str, value: tuple) -> str:
    """Where a CONFIGS value is set: its config function's line in the module's config_registry.py, or the
    JobConfig default's."""
    return (f"{value[1]}, models/{module}/config_registry.py:{value[2]}" if len(value) == 3
            else f"default, {value[1]}")


def _compiled_loss_rows() -> dict[str, tuple[tuple[str, object, str], ...]]:
    from placement.audit.readers.torchtitan_configs import CONFIGS

    rows = {}
    for module, cfgs in CONFIGS.items():
        for config, keys in cfgs.items():
            compiled, where = _loss_compiled_in(module, keys)
            if compiled:
                rows[config] = (("loss_eager_float32", False,
                                 f"torchtitan 0.3.0's {config} compiles its loss ({where}): torch.compile fuses the "
                                 f"float32 upcast into the cross-entropy, priced at the 6 bytes a logit of an "
                                 f"in-place loss"),)
    return rows


for _config, _rows in _compiled_loss_rows().items():
    CONFIG_RECIPE[_config] = CONFIG_RECIPE.get(_config, ()) + _rows
COMPILE = {"llama3_8b": "off", "llama3_70b": "off",
           "llama3_405b": "on for the transformer blocks and the loss (CompileConfig(enable=True), "
                          "models/llama3/config_registry.py:296-299)",
           "deepseek_v3_671b": "on for the loss only (models/deepseek_v3/config_registry.py:241)",
           "deepseek_v3_671b_float8": "on for the loss only (deepseek_v3_671b's, config_registry.py:241)",
           "llama3_8b_mxfp8": "on for each transformer block (CompileConfig(enable=True, components=['model']), "
                              "models/llama3/config_registry.py:247; distributed/compile.py:68-69), the LM head "
                              "eager (components/loss.py:605)",
           "qwen3_30b_a3b": "off", "gpt_oss_120b": "off"}
"""torchtitan 0.3.0 config -> the torch.compile its config function sets (the files leave it; the cost model has no
compile term, its kernels are the fused ones either way)."""


def torchtitan_split(num_layers: int, pp: int, chunk: int, first_less: int, last_less: int) -> list[int]:
    """Transformer layers of each virtual stage as torchtitan 0.3.0 splits them, stage s on PP rank s mod pp
    (`distributed/pipeline_parallel.py`: `_get_pipeline_metadata` gives ceil((L + first_less + last_less) /
    layers_per_stage) stages; `_generate_llm_fqn_per_model_part` deals L + first_less + last_less effective
    layers evenly, the first `extra` stages one more, the first stage first_less fewer transformer layers and
    the last last_less fewer).  ValueError with torchtitan's reason where it refuses the flags."""
    if chunk < 1:
        raise ValueError(f"pipeline_parallel_layers_per_stage {chunk} is below 1")
    stages = -(-(num_layers + first_less + last_less) // chunk)
    if stages % pp:
        raise ValueError(f"{stages} virtual stages are not divisible by pipeline_parallel_degree {pp}")
    return split_over_stages(num_layers, stages, first_less, last_less)


def split_over_stages(num_layers: int, stages: int, first_less: int, last_less: int) -> list[int]:
    """`torchtitan_split` for a given number of virtual stages (torchtitan's own where no layers_per_stage is set:
    pp per single-stage schedule, 2 pp per looped one; v0.2.2 distributed/pipeline_parallel.py :110-115)."""
    if stages == 1:
        return [num_layers]
    effective = num_layers + first_less + last_less
    per, extra = divmod(effective, stages)
    if per == 0:
        raise ValueError(f"{stages} stages over {effective} effective layers leave empty stages")
    if first_less > per or last_less > per:
        raise ValueError(f"first/last_stage_less_layers ({first_less}/{last_less}) exceed the {per} layers per stage")
    out, left = [], num_layers
    for s in range(stages):
        n = per + (s < extra) - (first_less if s == 0 else last_less if s == stages - 1 else 0)
        n = max(0, min(n, left))
        out.append(n)
        left -= n
    return out


def split_layout(split: list[int]) -> str:
    """Megatron-style pipeline layout (placement's recipe.pipeline_layout) of a per-virtual-stage split: the
    embedding on the first stage, norm and head (the loss) on the last."""
    return "|".join(("E" if s == 0 else "") + "t" * n + ("L" if s == len(split) - 1 else "")
                    for s, n in enumerate(split))


def stage_flags(num_layers: int, pp: int, vpp: int, want: list[int]) -> tuple[list[int], list[int], list[int]]:
    """`_stage_flags` (searched once per split: the file, its "runs as" line and the audit's diff all ask)."""
    flags, split, per_rank = _stage_flags(num_layers, pp, vpp, tuple(want))
    return list(flags), list(split), list(per_rank)


@cache
def _stage_flags(num_layers: int, pp: int, vpp: int, want: tuple[int, ...]) -> tuple[tuple, tuple, tuple]:
    """(layers_per_stage, first_less, last_less), torchtitan's split of them, and its per-PP-rank totals: the
    flags torchtitan 0.3.0 accepts whose split comes closest to `want` (the plan's layers per PP rank), with
    the plan's virtual stages when any such flags exist.  Single-stage schedules need exactly pp stages, looped
    ones at least 2 per rank (`_get_pipeline_metadata`)."""
    counts = [vpp] + ([v for v in range(2, 2 * vpp + 3) if v != vpp] if vpp > 1 else [])
    best = None
    for rank_stages in counts:
        stages = pp * rank_stages
        # torchtitan refuses first/last_less above the layers per stage, (L + first + last) // stages
        top = num_layers // max(stages - 1, 1) + 1
        for first_less in range(top + 1):
            for last_less in range(top + 1):
                # the split depends on the stage count only; the smallest chunk that gives it is the flag
                chunk = -(-(num_layers + first_less + last_less) // stages)
                try:
                    split = torchtitan_split(num_layers, pp, chunk, first_less, last_less)
                except ValueError:
                    continue
                if len(split) != stages:
                    continue
                per_rank = [sum(split[r::pp]) for r in range(pp)]
                key = (sum(abs(a - b) for a, b in zip(per_rank, want, strict=True)), rank_stages != vpp,
                       first_less + last_less)
                if best is None or key < best[0]:
                    best = (key, [chunk, first_less, last_less], split, per_rank)
        if best is not None and best[0][0] == 0:
            break
    if best is None:
        raise ValueError(f"no pipeline_parallel_layers_per_stage / first / last_stage_less_layers split {num_layers} "
                         f"layers over pp {pp}")
    return tuple(best[1]), tuple(best[2]), tuple(best[3])


def fsdp_enabled(dp_shard: int, cp: int) -> bool:
    """Whether torchtitan shards the weights, gradients and optimizer state with FSDP (ZeRO-2/3, else DDP or
    nothing: ZeRO-0), for data_parallel_shard_degree `dp_shard` (-1: the rest of the world, taken as above 1) and
    context_parallel_degree `cp`.  `ParallelDims.fsdp_enabled` is `dp_shard_enabled or cp_enabled`
    (distributed/parallel_dims.py: 0.2.0 :221-222, 0.2.2 :334-335, 0.3.0 :692-693), and FSDP shards over the
    dp_shard x cp ranks (0.2.0's flattened mesh "dp_shard_cp"; "fsdp" from 0.2.1, `fsdp = self.dp_shard * self.cp`,
    0.2.2 parallel_dims.py:137, 0.3.0 :278), replicated over dp_replicate where that is above 1 (HSDP; 0.2.2
    models/llama3/infra/parallelize.py:125-139, 0.2.0 :112-121; 0.3.0 models/llama3/parallelize.py:69-89 applies it
    always, sharding nothing at one rank).  So context parallelism alone shards: cp 2 with data_parallel_shard_degree
    1 is FSDP over the 2 CP ranks, as the cost model shards ZeRO over cp x dp (cost.step dense_shard).  (0.3.0:
    the wheel's lines, which its 0.3.0rc1 commit 1fdf90d3 of pytorch/torchtitan holds.)  The audit reads a file's
    ZeRO stage by it (readers.torchtitan), the files' `run_zero_stage` and the search (frameworks.Capability
    zero0_with_cp) follow it."""
    return dp_shard != 1 or cp > 1


def run_zero_stage(lay: LayoutOut) -> int:
    """The ZeRO stage the file of plan layout `lay` runs: ZeRO-2 (FSDP without resharding after forward, over the
    dp x cp ranks) for ZeRO-1, which torchtitan does not have, and for ZeRO-0 with cp > 1, which FSDP shards over
    the CP ranks (`fsdp_enabled`); the plan's own stage else."""
    if lay.zero_stage == 1 or (lay.zero_stage == 0 and fsdp_enabled(1, lay.cp)):
        return 2
    return lay.zero_stage


ETP_AS_RUN = ("without expert parallelism its routed experts are sharded over the dense TP axis "
              "(expert_param_placement_dense, models/common/moe_sharding.py:50-56, :212-219), and with it over the "
              "EP ranks alone (expert_param_placement_sparse, :29-47),")
"""How torchtitan 0.3.0 shards the routed experts (it has no expert_tensor_parallel_degree)."""


def run_etp(ctx: EmitContext) -> int:
    """The expert TP torchtitan 0.3.0 runs: TP where ep is 1 (its experts take the dense TP axis), else 1 (EP
    borrows the TP ranks); 1 for a model without experts."""
    lay = ctx.plan.layout
    return lay.tp if ctx.routed_experts and lay.ep == 1 else 1


def flags(ctx: EmitContext) -> tuple[list[str], list[str]]:
    """(the argument list after `-m torchtitan.train`, warnings about what it cannot express)."""
    lay = ctx.plan.layout
    warnings = []
    module, config = emitted_config(ctx) or (None, None)
    if module is None:
        warnings.append(f"{VERSION} ships no config for {ctx.model_name}; replace MODULE/CONFIG with yours"
                        + (" (the plan's FP8 comes from your config's Float8 converters, which scale row-wise: "
                           "without them the file runs bf16)" if ctx.plan.precision == "fp8" else "")
                        + (f"; context_parallel_degree {lay.cp} runs only beside FlexAttention: your config's "
                           f"model_registry must build attn_backend 'flex' (its default in every module but "
                           f"gpt_oss), as {VERSION} refuses CP beside varlen attention at start-up "
                           f"(distributed/full_dtensor.py:44-53), which its gpt_oss configs, sft_qwen3_8b_math and "
                           f"qwen3_8b_first_85_pct_layers_nvfp4 (Qwen3 8B, models/qwen3/config_registry.py:464, :249) "
                           f"run"
                           if lay.cp > 1 else ""))
        module, config = "MODULE", "CONFIG"
    if lay.zero_stage == 3:
        # "default" is `not pp_enabled` (distributed/fsdp.py:71-74): with PP it would keep the gathered weights
        # from forward to backward, ZeRO-2's memory, where ZeRO-3 is priced
        replicate, shard, reshard = lay.dp // lay.dp_shard, lay.dp_shard, "always"
    elif run_zero_stage(lay) == 2:
        replicate, shard, reshard = 1, lay.dp, "never"
        if lay.zero_stage == 0:
            warnings.append(f"torchtitan has no ZeRO-0 with context parallelism: FSDP shards over dp_shard x cp "
                            f"whenever cp > 1 (ParallelDims.fsdp_enabled, distributed/parallel_dims.py:692-693); "
                            f"emitted as FSDP without resharding after forward (ZeRO-2) over the {lay.dp * lay.cp} "
                            f"dp x cp ranks")
        if lay.zero_stage == 1:
            # under a pipeline torch.distributed.pipelining defers the reduce-scatter to each stage's last backward
            # and keeps the whole float32 gradient until then (the pipeline_unsharded_grads row)
            how = ("which under the pipeline keeps each stage's weights gathered and its whole float32 gradient "
                   "from the first micro-batch to the last backward (torch.distributed.pipelining's PipelineStage "
                   "turns FSDP2's reshard and gradient sync off until then), then reduce-scatters it" if lay.pp > 1 else
                   "which shards the gradients and reduce-scatters them every micro-batch, gathering the weights "
                   "again for each")
            warnings.append(f"torchtitan has no ZeRO-1: emitted as FSDP without resharding after forward (ZeRO-2), "
                            f"{how}")
    else:
        replicate, shard, reshard = lay.dp, 1, "default"
    if lay.etp != run_etp(ctx):
        warnings.append(f"torchtitan 0.3.0 has no expert tensor parallelism setting (etp {lay.etp}): "
                        f"{ETP_AS_RUN} so these experts run with etp {run_etp(ctx)}")
    if lay.ep > 1 and (shard * lay.cp * lay.tp) % lay.ep:  # a plan's ZeRO-0 beside ep wider than tp x cp
        warnings.append(refusal(f"expert_parallel_degree {lay.ep} with data_parallel_shard_degree {shard}, "
                                f"context_parallel_degree {lay.cp} and tensor_parallel_degree {lay.tp}: "
                                f"{CAPABILITIES['torchtitan'].zero0_ep_in_tp_cp}; plan with --framework torchtitan"))
    divisor = int(seq_divisor(lay.tp, lay.cp, lay.sequence_parallel))
    if ctx.plan.seq_len % divisor:  # a user trial: seq 4100 at tp 2 (SP) x cp 2 was priced and written
        warnings.append(refusal(f"torchtitan 0.3.0 raises at start-up unless the sequence ({ctx.plan.seq_len}) divides "
                                f"by tp (under sequence parallelism) x 2cp = {divisor} (trainer.py:306-315)"))
    if lay.cp > 1 and module_cp_refused(module):  # a user trial: gpt-oss-120b at cp 2 was written as if it ran
        warnings.append(refusal(f"context_parallel_degree {lay.cp}: {module_cp_refused(module)}; plan with "
                                f"--framework torchtitan, which plans cp 1 for it"))
    if lay.pp > 1 and ctx.model is not None and ctx.model.tied_embeddings:  # a user trial: Qwen3 1.7B at pp 2
        warnings.append(refusal(f"pipeline_parallel_degree {lay.pp} with {ctx.model_name}'s tied embeddings: "
                                f"{CAPABILITIES['torchtitan'].tied_pipeline}; plan with --framework torchtitan, "
                                f"which plans pp 1 for it"))
    if seq_refused(config, ctx.plan.seq_len):  # a user trial: deepseek-v3 at seq 32768 was written as if it ran
        warnings.append(refusal(f"{VERSION}: {seq_refused(config, ctx.plan.seq_len)}; plan at --seq-len "
                                f"{seq_limit(config)} or less, or run a copy of the config function with a larger "
                                f"max_seq_len"))
    split: list[str] = []
    if lay.pp > 1:
        split, warn = _split_args(ctx)
        warnings += warn
    m = lay.num_microbatches
    if schedule_refused(lay):  # llama3-8b pp 4 with 2 micro-batches was written as if it ran
        warnings.append(refusal(f"torch's Schedule1F1B, which torchtitan runs for pipeline_parallel_schedule 1F1B, "
                                f"raises at start-up with fewer micro-batches ({m}) than stages ({lay.pp}) (torch "
                                f"distributed/pipelining/schedules.py:1020-1024); give a global batch of at least "
                                f"{lay.dp * lay.micro_batch_size * lay.pp}, or plan with --framework torchtitan"))
    args = [
        "--module", module, "--config", config,
        "--parallelism.data_parallel_replicate_degree", str(replicate),
        "--parallelism.data_parallel_shard_degree", str(shard),
        "--parallelism.fsdp_reshard_after_forward", reshard,
        "--parallelism.tensor_parallel_degree", str(lay.tp),
        "--parallelism.context_parallel_degree", str(lay.cp),
        "--parallelism.expert_parallel_degree", str(lay.ep),
        "--parallelism.pipeline_parallel_degree", str(lay.pp),
        "--parallelism.pipeline_parallel_schedule", "Interleaved1F1B" if lay.vpp > 1 else "1F1B",
        "--parallelism.pipeline_parallel_microbatch_size", str(lay.micro_batch_size),
        # with PP the step's micro-batches go through the pipeline together; without it torchtitan
        # accumulates gradients over global / (local x dp) steps
        "--training.local_batch_size", str(lay.micro_batch_size * (m if lay.pp > 1 else 1)),
        "--training.global_batch_size", str(ctx.plan.global_batch),
        "--training.seq_len", str(ctx.plan.seq_len),
    ]
    args += split
    if lay.tp > 1 and not lay.sequence_parallel:
        args += ["--parallelism.no-enable-sequence-parallel"]
    args += graph_args(ctx) + async_tp_args(ctx)
    args.append({"none": "activation-checkpoint:none", "selective": "activation-checkpoint:selective",
                 "full": "activation-checkpoint:full"}[lay.recompute])
    warnings += recipe_warnings(ctx, VERSION, runs_instead(ctx), PER_OP_ONLY)
    warnings += forced_warnings(ctx, "torchtitan", run_precision(ctx), config)
    warnings += rope_warnings(ctx, module if module != "MODULE" else None)
    warnings += config_rope_warnings(ctx, config)
    warnings += architecture_warnings(ctx, module if module != "MODULE" else None)
    return args, warnings


LLAMA3_ROPE = Llama3RopeSpec(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                             original_max_position_embeddings=8192)
"""The RoPE scaling every torchtitan 0.3.0 llama3 config runs: `ComplexRoPE.Config(..., scaling="llama")` with
RoPE.Config's defaults scaling_factor 8.0, low_freq_factor 1.0, high_freq_factor 4.0, original_max_position_embeddings
8192 (models/llama3/__init__.py:269, :310, :351 for 8B, 70B, 405B; models/common/rope.py:98-103), Llama 3.1's.  No
flag changes a model config's fields: the named config function builds them."""


GPT_OSS_RUNS = ("a gated quick-GELU MLP (gate * sigmoid(1.702 gate) * (up + 1))", "the MLP's inputs clamped at 7",
                "learnable attention sinks (one logit per head)",
                "YaRN RoPE (factor 32, original_max_position_embeddings 4096, beta_fast 32, beta_slow 1, truncate "
                "false)")
"""What torchtitan's gpt_oss configs run, in gpt_oss_features' words: moe.py `swiglu(x, alpha=1.702, limit=7.0)`
(`torch.addcmul(out_glu, out_glu, x_linear)`: the +1), the attention's sinks, and CosSinRoPE scaling 'yarn' with
rope_factor 32, beta_fast 32, beta_slow 1, truncate False, original_seq_len 4096 (models/gpt_oss/__init__.py _20b,
_120b; pytorch/torchtitan main b5bcd76c).  No flag changes them: the config function builds them."""


def architecture_warnings(ctx: EmitContext, module: str | None) -> list[str]:
    """The model's quick-GeGLU, offset, clamp, sinks and YaRN (an MLA model's YaRN is its config's), which only
    torchtitan's gpt_oss model runs: warned where the file names another module or none, or where the model's
    numbers are not the ones gpt_oss fixes."""
    attention = attention_features(ctx.model)
    # the user's own config builds the model: its window and partial RoPE too
    own = ([f"the model has {'; '.join(attention)}: your config must build them ({VERSION}'s llama3 and qwen3 models "
            f"attend to every key and rotate whole heads), and no flag sets them"] if module is None and attention
           else [])
    return own + _gpt_oss_warnings(ctx, module)


def _gpt_oss_warnings(ctx: EmitContext, module: str | None) -> list[str]:
    """`architecture_warnings`' GPT-OSS part."""
    features = gpt_oss_features(ctx.model, mla_yarn=False)
    if not features:
        return []
    if module == "gpt_oss":
        other = [f for f in features if f not in GPT_OSS_RUNS]
        if not other:
            return []
        return [f"the model has {'; '.join(other)}, but {VERSION}'s gpt_oss configs run {'; '.join(GPT_OSS_RUNS)} "
                f"(models/gpt_oss), and no flag changes them: this file trains another model; change them in your "
                f"copy of the config function"]
    where = f"the {module} configs do not run them" if module else "your config must build them"
    return [f"the model has {'; '.join(features)}: model code in {VERSION}, which only its gpt_oss model has "
            f"(models/gpt_oss: moe.py swiglu, the attention's sinks, CosSinRoPE scaling 'yarn'); {where}, and no "
            f"flag sets them"]


def rope_warnings(ctx: EmitContext, module: str | None) -> list[str]:
    """The model's RoPE scaling where the config the file names runs another (llama3 configs always run LLAMA3_ROPE,
    the others no llama3 scaling), or where the file names no config (the user's own must set it)."""
    m = ctx.model
    if m is None:
        return []
    want = m.llama3_rope
    said = ("no llama3 RoPE scaling" if want is None else
            f"llama3 RoPE scaling factor {want.factor:g}, low_freq_factor {want.low_freq_factor:g}, high_freq_factor "
            f"{want.high_freq_factor:g}, original_max_position_embeddings {want.original_max_position_embeddings}")
    if module == "llama3":
        if want == LLAMA3_ROPE:
            return []
        return [f"{VERSION}'s llama3 configs scale RoPE as Llama 3.1 does (scaling 'llama': factor 8, "
                f"low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192; "
                f"models/llama3/__init__.py), and no flag changes it, but the model has {said}"
                + (" (plain RoPE, or not stated)" if want is None else "")
                + ": this file trains other RoPE frequencies than the model's; change the config's rope "
                  "(ComplexRoPE.Config scaling and its factors) in your copy of the config function"]
    if want is None:
        return []
    if module is None:
        return [f"the model has {said}: your config must set it (torchtitan 0.3.0 RoPE.Config scaling='llama' with "
                f"scaling_factor, low_freq_factor, high_freq_factor, original_max_position_embeddings; "
                f"models/common/rope.py)"]
    return [f"the model has {said}, which {VERSION}'s {module} configs do not run (their RoPE is not scaling "
            f"'llama') and no flag sets: this file trains plain or other RoPE frequencies; set RoPE.Config scaling "
            f"'llama' and its factors in your copy of the config function"]


DSV3_YARN = {"factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0,
             "truncate": True}
GPT_OSS_YARN = {"factor": 32.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0,
                "truncate": False}
CONFIG_ROPE: dict[str, tuple[float, dict[str, float | bool] | None, str]] = {
    "llama3_8b": (500000.0, None, "models/llama3/__init__.py:268"),
    "llama3_8b_mxfp8": (500000.0, None, "models/llama3/__init__.py:268"),
    "llama3_70b": (500000.0, None, "models/llama3/__init__.py:309"),
    "llama3_405b": (500000.0, None, "models/llama3/__init__.py:350"),
    "deepseek_v3_671b": (10000.0, DSV3_YARN, "models/deepseek_v3/__init__.py:575-584"),
    "deepseek_v3_671b_float8": (10000.0, DSV3_YARN, "models/deepseek_v3/__init__.py:575-584"),
    "qwen3_0_6b": (1e6, None, "models/qwen3/__init__.py:285"),
    "qwen3_1_7b": (1e6, None, "models/qwen3/__init__.py:323"),
    "qwen3_14b": (1e6, None, "models/qwen3/__init__.py:431"),
    "qwen3_32b": (1e6, None, "models/qwen3/__init__.py:466"),
    "qwen3_30b_a3b": (1e6, None, "models/qwen3/__init__.py:550"),
    "gpt_oss_20b": (150000.0, GPT_OSS_YARN, "models/gpt_oss/__init__.py:325-331"),
    "gpt_oss_120b": (150000.0, GPT_OSS_YARN, "models/gpt_oss/__init__.py:369-375"),
}
"""(theta, YaRN's numbers in ModelSpec.yarn_rope's names or None, where) of the RoPE.Config each torchtitan 0.3.0
config the files name builds (`model_registry(flavor)`: llama3_8b_mxfp8 is llama3_8b's 8B, deepseek_v3_671b_float8
deepseek_v3_671b's 671B, models/*/config_registry.py).  YaRN runs whenever scaling is "yarn" and rope_factor > 1
(ComplexRoPE, models/common/rope.py:219-221; CosSinRoPE :287-288), and under MLA also scales the softmax by mscale
squared (models/deepseek_v3/model.py:86-88); the llama3 configs' scaling is LLAMA3_ROPE (rope_warnings)."""


def _theta(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,g}"


def config_rope_warnings(ctx: EmitContext, config: str | None) -> list[str]:
    """The model's RoPE where the config the file names builds another (CONFIG_ROPE): theta, and YaRN the model does
    not state (DeepSeek-V3: the catalog's pre-training runs unscaled RoPE, torchtitan's 671B flavor YaRN with factor
    40) or with other numbers (an MLA model's; a non-MLA model's YaRN is the GPT-OSS warning's).  No flag changes a
    config's model, so each is a warning: the file trains other RoPE frequencies than the model's."""
    m, rope = ctx.model, CONFIG_ROPE.get(config or "")
    if m is None or rope is None:
        return []
    theta, yarn, where = rope
    fix = "change it in your copy of the config function (no flag sets a config's model)"
    out = []
    if m.rope_base is not None and m.rope_base != theta:
        out.append(f"the model's RoPE theta is {_theta(m.rope_base)}, but {VERSION}'s {config} builds RoPE.Config "
                   f"theta {_theta(theta)} ({where}): this file trains other RoPE frequencies than the model's; {fix}")
    if yarn is not None and m.yarn_rope is None and m.rope_scaling is None:
        out.append(f"the model states no YaRN (plain RoPE, or not stated), but {VERSION}'s {config} builds "
                   f"RoPE.Config scaling 'yarn' with rope_factor {yarn['factor']:g} ({where}), which ComplexRoPE and "
                   f"CosSinRoPE apply whenever rope_factor > 1 (models/common/rope.py:219-221, :287-288)"
                   + (", and multi-latent attention also scales its softmax by (0.1 mscale ln(rope_factor) + 1)^2 "
                      "(models/deepseek_v3/model.py:86-88)" if m.mla is not None else "")
                   + ": this file trains other RoPE frequencies than the model's; set scaling 'none' (or rope_factor "
                     "1) in your copy of the config function")
    elif yarn is not None and m.yarn_rope is not None and m.mla is not None:
        differ = differs_from_fixed(m.yarn_rope, yarn)
        if differ is not None:
            out.append(f"the model's YaRN has {differ[0]}, but {VERSION}'s {config} builds {differ[1]} ({where}): "
                       f"this file trains other RoPE frequencies than the model's; {fix}")
    return out


def full_graphs_run(ctx: EmitContext) -> bool:
    """The file lets torchtitan 0.3.0 capture its CUDA graph: the plan prices full graphs and the layout is one
    torchtitan captures.  Its graph is the whole forward and backward of a micro-batch (trainer.py:613-614,
    `wrap_with_cuda_graph(self.fwd_bwd_fn)`); it refuses pipeline parallelism, and expert parallelism unless a
    host-sync-free dispatcher is configured, which no flag selects (trainer.py:179-210)."""
    lay = ctx.plan.layout
    return ctx.recipe.cuda_graphs is CudaGraphs.FULL and lay.pp == 1 and lay.ep == 1


def graph_args(ctx: EmitContext) -> list[str]:
    """`--training.disable_cuda_graphs` unless the plan's full graphs run: torchtitan 0.3.0 captures by default
    (training.disable_cuda_graphs = False, config/configs.py:66; trainer.py:613-614)."""
    return [] if full_graphs_run(ctx) else ["--training.disable_cuda_graphs"]


def async_tp_args(ctx: EmitContext) -> list[str]:
    """Async TP off, whatever the config sets: the plan prices TP collectives exposed (torchtitan's async TP, the
    inductor micro-pipeline pass of distributed/compile.py:75-94, is not priced), and llama3_405b turns it on
    (CompileConfig(enable_async_tensor_parallel=True), models/llama3/config_registry.py:296-299)."""
    return ["--compile.no-enable-async-tensor-parallel"]


def runs_instead(ctx: EmitContext) -> dict[str, str]:
    """RUNS_INSTEAD for this plan: without the CUDA-graph entry where the plan's full graphs run."""
    return {k: v for k, v in RUNS_INSTEAD.items() if k != "cuda_graphs" or not full_graphs_run(ctx)}


def run_precision(ctx: EmitContext) -> str:
    """The precision the file runs: the shipped config's where it sets another (`runs_precision`)."""
    other = runs_precision(ctx)
    return other[0] if other is not None else ctx.plan.precision


def notes(ctx: EmitContext) -> list[str]:
    """Header lines: the torchtitan release the flags are for, and the compile settings the file runs."""
    config = (emitted_config(ctx) or (None, None))[1]
    compile_ = (f"torch.compile {COMPILE[config]}, as {config} sets it" if config in COMPILE
                else "torch.compile as your config sets it")
    return [f"written for {VERSION} (pip install {PIP_PIN}); torchtitan's main has since renamed or removed some "
            f"of these flags",
            compile_,
            "async TP off (--compile.no-enable-async-tensor-parallel): the plan prices the TP collectives exposed",
            yours(ctx, config)]


def yours(ctx: EmitContext, config: str | None) -> str:
    """What stays the user's, as Megatron's file says (emit.megatron.worker): torchtitan 0.3.0's own flags for it,
    each read by its parser (config.manager.ConfigManager.parse_args on llama3_8b): trainer.py:79 hf_assets_path (the
    tokenizer's folder) and :86 dump_folder, hf_datasets/text_datasets.py:247 dataloader.dataset and its dataset_path,
    components/optimizer/lr_scheduler.py:52 warmup_steps, components/checkpointer/base.py:226-229 enable and folder;
    a named config sets its own of each (llama3_8b: c4, ./assets/hf/Llama-3.1-8B, lr 3e-4, 1,000 steps)."""
    vocab = f": the plan priced a vocabulary of {ctx.model.vocab_size:,}" if ctx.model else ""
    source = f"{config} sets its own of each, which these flags replace" if config else "your config's"
    return (f"yours to add ({source}): data (--dataloader.dataset, or --dataloader.dataset_path for a local copy), "
            f"the tokenizer (--hf_assets_path, the model's Hugging Face folder{vocab}), optimizer and LR schedule "
            "(--optimizer.param-groups.0.optimizer-kwargs.lr, --lr_scheduler.warmup_steps, --training.steps), "
            "checkpoints (--checkpoint.enable, --checkpoint.folder under --dump_folder)")


RUNS_INSTEAD = {
    "checkpoint_interval": "its checkpointing synchronizes nothing, so the chunk size prices nothing",
    "grad_buckets": "FSDP2 reduces each wrapped unit's gradients as that unit's backward ends, not in DDP buckets",
    "ddp_bucket_params": "FSDP2 reduces each wrapped unit's gradients as that unit's backward ends, not in DDP "
                         "buckets",
    "checkpoint_sync": "its activation checkpointing does not synchronize the device around checkpointed layers",
    "moe_dispatcher": "it runs its all-to-all token dispatch, slower where a token goes to several ranks of one node",
    "cuda_graphs": "it runs without CUDA graphs (--training.disable_cuda_graphs: its one graph is the whole forward "
                   "and backward, which it captures only without pipeline and expert parallelism, trainer.py:179-210), "
                   "with the host launch time the plan priced away",
    "tp_comm_overlap": "its TP collectives run exposed (--compile.no-enable-async-tensor-parallel: async TP, "
                       "inductor's micro-pipeline pass, is not priced)",
    "ep_comm_overlap": "its EP all-to-all runs exposed, not behind another micro-batch",
    "recompute_modules": "its activation-checkpoint:selective is its per-op policy (per_op: SelectiveAC saves the "
                         "matmul, attention and collective outputs but every second matmul, and recomputes the "
                         "rest)",
    "delay_wgrad": "it computes expert weight gradients in place",
    "pipeline_layout": "it splits the stages by pipeline_parallel_layers_per_stage",
    "fp8_params": "it keeps BF16 weights", "optimizer_state_bf16": "it keeps FP32 Adam moments",
    "optimizer_master_weights": "FSDP2 keeps the float32 weights, the master copy",
    "moe_einsum_dispatch": "its MoE layers permute each token to its experts: no one-hot mask GEMMs",
    "fp32_weights": "FSDP2 keeps the float32 weights sharded beside the optimizer state and gathers them in bf16 "
                    "(mixed_precision_param bfloat16): the 16-bit-weights recipe's bytes",
    "fp32_weights_autocast": "FSDP2 keeps the float32 weights sharded and gathers them in bf16 "
                             "(mixed_precision_param), with no autocast",
    "activation_func_fp8_input_store": "it keeps the MLP activation input in BF16",
    "optimizer_over_replicas": "FSDP2's HSDP replicates the optimizer state over the replicas, as it does the "
                               "weight shards",
    "cross_entropy_fusion": "its loss keeps each chunk's FP32 logits",
    "pipeline_p2p_whole": "its stages send each TP rank's sequence shard (a DTensor), not the whole activation",
    "pipeline_p2p_scatter": "its stages send the local tensor its TP plan leaves, which it does not scatter further",
    "pipeline_grads_whole": "its stages send each TP rank's sequence shard of the gradient (a DTensor)",
    "pipeline_sends_mask": "its stages send the hidden states only, no attention mask",
    "grad_all_reduce": "FSDP2 reduce-scatters the gradients",
    "pipeline_p2p_blocking": "its schedules batch each step's sends and receives (torch.distributed.pipelining, "
                             "batch_isend_irecv)",
    "grad_accumulation": "FSDP2 reduce-scatters every micro-batch and accumulates the gradient shard",
    "dispatch_fp8": "its token dispatch moves bf16",
    "recompute_num_layers": "full activation checkpointing recomputes every layer",
    "mtp_layers": "it trains without multi-token prediction modules",
    "pipeline_schedule": "it runs the 1F1B or Interleaved1F1B schedule written here",
    "moe_capacity_factor": "its MoE routes dropless",
    "dp_overlap": "FSDP2 prefetches and reduces behind compute, and DDP reduces in buckets during backward",
    "param_gather_overlap": "FSDP2 prefetches each unit's gather behind the compute before it",
    "align_param_gather": "FSDP2 gathers each unit just ahead of its own forward; it has no ZeRO-1 whose first "
                          "chunks gather at the schedule's start",
}
"""What torchtitan runs instead of each recipe feature it cannot be told."""
FORCED = forced_fields("torchtitan")
"""Recipe fields torchtitan runs at one value whatever the plan (frameworks.CAPABILITIES["torchtitan"].recipe)."""
STATED = frozenset({"account_for_embedding", "account_for_loss", "cpu_affinity", "cuda_launch_blocking"})
"""Recipe fields the files state: the pipeline split (its layers-per-stage flags, re-priced as torchtitan splits) and
the torchrun line's binding and environment."""


_SAME_ARCHITECTURE = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_kv_heads",
                      "head_dim", "vocab_size", "tied_embeddings", "moe", "mla", "sliding_window",
                      "sliding_window_layers", "rotary_percent")
"""What must match for a model to run as one of torchtitan's shipped configs (a HF config.json of Llama 3.1
405B is torchtitan's llama3_405b)."""


def shipped_config(ctx: EmitContext) -> tuple[str, str] | None:
    """(module, config) of the torchtitan config that runs the context's model."""
    return MODELS.get(ctx.model_name) or (config_for(ctx.model) if ctx.model is not None else None)


QWEN3_DENSE_FLAVORS = {
    "qwen3_0_6b": (28, 1024, 3072, 16, True), "qwen3_1_7b": (28, 2048, 6144, 16, True),
    "qwen3_14b": (40, 5120, 17408, 40, False), "qwen3_32b": (64, 5120, 25600, 64, False),
}
"""torchtitan 0.3.0's dense Qwen3 configs (models/qwen3/config_registry.py) -> their flavor's (layers, dim, hidden_dim,
heads, tied embeddings) (models/qwen3/__init__.py `_0_6b` ... `_32b`: head_dim 128, 8 KV heads, vocabulary 151,936
each); placement's catalog holds none of these models, so a config.json of one is matched by these."""


@cache
def shipped_models() -> tuple[tuple[tuple[str, str], ModelSpec], ...]:
    """((module, config), the model it trains) for each torchtitan 0.3.0 config placement matches a model to: the
    catalog's (MODELS), and configs of models the catalog lacks, built as a catalog sibling with the flavor's
    dimensions: the dense Qwen3 flavors (QWEN3_DENSE_FLAVORS, the 30B-A3B's attention without its experts) and
    gpt_oss_20b (models/gpt_oss/__init__.py `_20b`: the 120b's with 24 layers and 32 experts, every other layer
    windowed)."""
    from placement.catalog import load_model

    out = [(pair, load_model(name)) for name, pair in MODELS.items()]
    qwen = load_model("qwen3-30b-a3b")
    for config, (layers, dim, ffn, heads, tied) in QWEN3_DENSE_FLAVORS.items():
        out.append((("qwen3", config), qwen.model_copy(update={
            "name": config, "num_layers": layers, "hidden_size": dim, "ffn_hidden_size": ffn,
            "num_attention_heads": heads, "num_kv_heads": 8, "head_dim": 128, "tied_embeddings": tied, "moe": None})))
    oss = load_model("gpt-oss-120b")
    out.append((("gpt_oss", "gpt_oss_20b"), oss.model_copy(update={
        "name": "gpt_oss_20b", "num_layers": 24, "sliding_window_layers": 12,
        "moe": oss.moe.model_copy(update={"num_experts": 32})})))
    return tuple(out)


def shipped_model(module: str, config: str) -> ModelSpec | None:
    """The model torchtitan's `module`:`config` trains, where placement knows it (`shipped_models`)."""
    return next((m for pair, m in shipped_models() if pair == (module, config)), None)


def config_for(model: ModelSpec) -> tuple[str, str] | None:
    """(module, config) of the torchtitan config that runs `model`: by catalog name, or by architecture for a
    model read from elsewhere (a HF config.json, a user's YAML), among the configs `shipped_models` knows."""
    if model.name in MODELS:
        return MODELS[model.name]
    return next((pair for pair, shipped in shipped_models() if same_architecture(shipped, model)), None)


def same_architecture(a: ModelSpec, b: ModelSpec) -> bool:
    """The two models run as the same torchtitan config (dimensions, vocabulary, experts, MLA)."""
    return a.model_dump(include=set(_SAME_ARCHITECTURE)) == b.model_dump(include=set(_SAME_ARCHITECTURE))


def fp8_config(config: str, mxfp8: bool) -> str | None:
    """The config of the same model whose linear layers run FP8: its Float8 twin (FP8_CONFIGS), else, on an
    accelerator with MXFP8 tensor cores (`mxfp8`), its MXFP8 twin (MXFP8_CONFIGS); None where it has neither."""
    if config in FP8_CONFIGS:
        return FP8_CONFIGS[config]
    return MXFP8_CONFIGS.get(config) if mxfp8 else None


def run_config(config: str | None, precision: str, mxfp8: bool) -> str | None:
    """The config the files name for the model's shipped `config` at `precision`: its FP8 twin at fp8 where it has
    one on this accelerator (`fp8_config`), else `config` itself."""
    if config is None or precision != "fp8":
        return config
    return fp8_config(config, mxfp8) or config


def emitted_config(ctx: EmitContext) -> tuple[str, str] | None:
    """(module, config) the files name: the shipped config of the context's model at the plan's precision on its
    accelerator (`run_config`); None for a model torchtitan ships no config of."""
    pair = shipped_config(ctx)
    if pair is None:
        return None
    return pair[0], run_config(pair[1], ctx.plan.precision, ctx.topo.accelerator.mxfp8)


def precision_run(config: str | None, precision: str, accelerator: AcceleratorSpec) -> tuple[str, str] | None:
    """(the precision torchtitan's shipped `config` runs on `accelerator`, why) when it is not `precision`, else
    None; None for a config of the user's own (its converters are theirs to set)."""
    if config is None:
        return None
    if precision == "fp8" and fp8_config(config, accelerator.mxfp8) is None:
        why = f"torchtitan 0.3.0's {config} config has no Float8 converter and no flag adds one"
        twin = MXFP8_CONFIGS.get(config)
        if twin is not None:  # the MXFP8 twin needs Blackwell's tensor cores
            why += (f", and its {twin} config (MXFP8 linear layers) does not run on {accelerator.name}: MXFP8 needs "
                    f"tensor cores that scale 1x32 blocks (Blackwell, compute capability 10.0), and "
                    f"MXFP8LinearConverter stops the job below that (components/quantization/mx.py:70-71)")
        return "bf16", why
    if precision == "bf16" and FP8_CONFIGS.get(config) == config:  # llama3_405b always converts
        return "fp8", (f"torchtitan 0.3.0's {config} config always turns on Float8 linear layers; drop its float8 "
                       f"converter for a BF16 run")
    return None


def runs_precision(ctx: EmitContext) -> tuple[str, str] | None:
    """(precision, why) when the shipped config runs another precision than the plan's, else None; for a model
    torchtitan ships no config for (the file's MODULE/CONFIG placeholder), an FP8 plan's file runs bf16 as written:
    its Float8 converters are the user's config's (a user trial: the header priced FP8 and the audit of the same file
    bf16)."""
    shipped = shipped_config(ctx)
    if shipped is None and ctx.plan.precision == "fp8":
        return "bf16", ("the file's MODULE/CONFIG placeholder turns on no Float8 converter: FP8 comes from your "
                        "config's converters, which scale row-wise")
    return precision_run((shipped or (None, None))[1], ctx.plan.precision, ctx.topo.accelerator)


TITAN_0_2_CONFIGS = {
    ("llama3", "8B"): "llama3_8b", ("llama3", "70B"): "llama3_70b", ("llama3", "405B"): "llama3_405b",
    ("llama3", "8B_flex"): "llama3_8b", ("llama3", "8B_varlen"): "llama3_8b",
    ("deepseek_v3", "16B"): "deepseek_v3_16b", ("deepseek_v3", "671B"): "deepseek_v3_671b",
    ("qwen3", "0.6B"): "qwen3_0_6b", ("qwen3", "1.7B"): "qwen3_1_7b", ("qwen3", "14B"): "qwen3_14b",
    ("qwen3", "32B"): "qwen3_32b", ("qwen3", "30B-A3B"): "qwen3_30b_a3b",
    ("gpt_oss", "20b"): "gpt_oss_20b", ("gpt_oss", "120b"): "gpt_oss_120b",
}
"""torchtitan 0.2.x `model.name`/`model.flavor` -> the 0.3.0 config that builds the same flavor (v0.2.2
models/qwen3/__init__.py, gpt_oss/__init__.py, llama3/__init__.py, deepseek_v3/__init__.py: the dimensions 0.3.0's
config_registry.py gives each).  A user trial: v0.2.2's own qwen3_32b.toml and a 30B-A3B or gpt_oss 120b flavor
were refused, whatever --model, as another model than the one they name.  llama3's 8B_flex and 8B_varlen (v0.2.1,
v0.2.2 models/llama3/__init__.py:60-81) are 8B's dimensions with another attn_type, which the audit reads from the
flavor (readers.torchtitan.FLEX_FLAVORS): a QA trial's 8B_flex file was refused with --model llama3-8b and with
every other model."""


def current_config(module: str, config: str) -> str:
    """A torchtitan model reference's config as 0.3.0 names it (a 0.2.x flavor through TITAN_0_2_CONFIGS)."""
    return TITAN_0_2_CONFIGS.get((module, config), config)


def catalog_name(module: str, config: str) -> str | None:
    """The catalog model a torchtitan model reference names: 0.3.0's module/config (either precision's config,
    Float8 or MXFP8) or 0.2.x's name/flavor; None for a model placement's catalog does not hold."""
    config = current_config(module, config)
    for name, (m, c) in MODELS.items():
        if module == m and config in (c, FP8_CONFIGS.get(c), MXFP8_CONFIGS.get(c)):
            return name
    return None


VARLEN_MODULES = {"gpt_oss": "models/gpt_oss/__init__.py:391, model_registry(attn_backend=\"varlen\"), which "
                             "gpt_oss_20b and gpt_oss_120b call without another backend (models/gpt_oss/"
                             "config_registry.py:71, :102)"}
"""torchtitan 0.3.0 module -> where its shipped configs choose PyTorch's varlen attention (the others run FlexAttention,
model_registry's attn_backend "flex")."""


CONFIG_MAX_SEQ = {
    "llama3_8b": (131072, "models/llama3/__init__.py:267"), "llama3_70b": (131072, "models/llama3/__init__.py:308"),
    "llama3_405b": (131072, "models/llama3/__init__.py:349"),
    "deepseek_v3_671b": (16384, "models/deepseek_v3/__init__.py:577, 4096 * 4"),
    "qwen3_0_6b": (40960, "models/qwen3/__init__.py:284"), "qwen3_1_7b": (40960, "models/qwen3/__init__.py:322"),
    "qwen3_14b": (40960, "models/qwen3/__init__.py:430"), "qwen3_32b": (40960, "models/qwen3/__init__.py:465"),
    "qwen3_30b_a3b": (40960, "models/qwen3/__init__.py:549"),
    "gpt_oss_20b": (131072, "models/gpt_oss/__init__.py:324"),
    "gpt_oss_120b": (131072, "models/gpt_oss/__init__.py:368"),
}
"""torchtitan 0.3.0 config -> (the max_seq_len of its RoPE config, where its model flavor sets it).  The trainer
refuses a longer training.seq_len at start-up (models/common/decoder.py:166-174, Decoder.Config.update_from_config,
called from Trainer.__init__, trainer.py:347): "Training sequence length S exceeds attention RoPE maximum supported
sequence length M"; no flag changes it (model_spec is suppressed from the CLI, trainer.py:75-77).  The FP8 and MXFP8
twins build the same flavor (`seq_refused` maps them back)."""


def seq_limit(config: str | None) -> int | None:
    """The longest sequence torchtitan 0.3.0 starts with its shipped `config` (CONFIG_MAX_SEQ; its FP8 and MXFP8 twins
    build the same flavor); None for a config of the user's own."""
    twins = {twin: base for base, twin in (*FP8_CONFIGS.items(), *MXFP8_CONFIGS.items())}
    limit = CONFIG_MAX_SEQ.get(twins.get(config or "", config or ""))
    return None if limit is None else limit[0]


def seq_refused(config: str | None, seq_len: int) -> str:
    """Why torchtitan 0.3.0 refuses `seq_len` with its shipped `config` ("" where it runs it, or for a config of the
    user's own): longer than the config's RoPE max_seq_len (CONFIG_MAX_SEQ).  No flag changes a config's model
    (model_spec is suppressed from the CLI): the fix is a shorter sequence or a config function of one's own."""
    limit = seq_limit(config)
    if limit is None or seq_len <= limit:
        return ""
    twins = {twin: base for base, twin in (*FP8_CONFIGS.items(), *MXFP8_CONFIGS.items())}
    where = CONFIG_MAX_SEQ[twins.get(config, config)][1]
    return (f"its {config} config builds RoPE for at most {limit:,} positions (max_seq_len, {where}), and the "
            f"trainer raises at start-up for the sequence {seq_len:,} (\"Training sequence length {seq_len} exceeds "
            f"attention RoPE maximum supported sequence length {limit}\", models/common/decoder.py:166-174), which no "
            f"flag changes")


def module_cp_refused(module: str | None) -> str:
    """Why torchtitan 0.3.0 refuses context parallelism for the configs of `module` ("" where it runs it): its varlen
    attention has no CP, under the default spmd_backend spmd_types (distributed/full_dtensor.py:44-53,
    validate_config, called by models/gpt_oss/parallelize.py:74-76) and under partial_dtensor
    (distributed/context_parallel/api.py:103-104, apply_cp_to_forward)."""
    where = VARLEN_MODULES.get(module or "")
    if where is None:
        return ""
    return (f"torchtitan 0.3.0's {module} configs run PyTorch's varlen attention ({where}), beside which it refuses "
            f"context parallelism at start-up: NotImplementedError \"spmd_types + CP is not supported with "
            f"ScaledDotProductAttention or VarlenAttention\" (distributed/full_dtensor.py:44-53; under spmd_backend "
            f"partial_dtensor, \"Variable-length attention CP is not yet supported\", "
            f"distributed/context_parallel/api.py:103-104)")


def cp_refused(model: ModelSpec) -> str:
    """`module_cp_refused` of the torchtitan config that runs `model` (`config_for`); "" for a model of the user's
    own config, whose attention is theirs."""
    return module_cp_refused((config_for(model) or (None, None))[0])


def schedule_refused(lay) -> bool:
    """torch's Schedule1F1B (torchtitan's schedule without interleaving) refuses fewer micro-batches than stages
    (torch 2.13 distributed/pipelining/schedules.py:1020-1024).  Interleaved layouts of a plan priced for Megatron
    hold torch's rule (cost.rules.Facts.torch_pipeline), Megatron's being stricter."""
    return lay.pp > 1 and lay.vpp == 1 and lay.num_microbatches < lay.pp


def runs(ctx: EmitContext) -> Runs:
    """What the file runs where torchtitan 0.3.0 cannot be told the plan (each is also a warning)."""
    lay = ctx.plan.layout
    # priced under torch's pipeline rules and torchtitan's attention, except where the file does not start (its
    # header prices nothing then); its attention is FlexAttention or varlen, not Transformer Engine's: TE's CP
    # refusals do not apply (a user trial: gpt-oss-120b at cp 2 with --cp-comm-type a2a was refused for TE's sinks
    # rule, naming the flag it was given)
    starts = not schedule_refused(lay) and not (lay.cp > 1 and module_cp_refused((emitted_config(ctx) or ("",))[0]))
    out = Runs(torch_pipeline=starts, runs_te=False)
    other = runs_precision(ctx)
    if other is not None:
        out.set_precision(ctx.plan, other[0])
        if other[0] == "fp8":  # a BF16 plan priced no FP8 recipe; the config's converters scale row-wise
            out.recipe["fp8_recipe"] = Fp8Recipe.ROWWISE
            out.what[-1] = f"fp8 with row-wise scaling (not {ctx.plan.precision})"
    if run_zero_stage(lay) != lay.zero_stage:
        out.set_layout("zero_stage", run_zero_stage(lay), f"ZeRO-{run_zero_stage(lay)} (not ZeRO-{lay.zero_stage})")
    if lay.etp != run_etp(ctx):
        out.set_layout("etp", run_etp(ctx), f"etp {run_etp(ctx)} (not {lay.etp})")
    runs_recipe(ctx, runs_instead(ctx), out, PER_OP_ONLY)
    runs_forced(ctx, "torchtitan", out, run_precision(ctx), (emitted_config(ctx) or (None, None))[1])
    runs_model(ctx, "torchtitan", out)
    split = runs_split(ctx)
    if split is None and ctx.recipe.pipeline_layout is not None and lay.pp > 1:
        # the plan's explicit layout string is no torchtitan flag (RUNS_INSTEAD reset it to the default split), but
        # the flags torchtitan does take build the plan's layers per PP rank: priced as the split it builds, not
        # as the even default (a review: Et*7|t*8|t*8|t*9L over pp 2 x vpp 2, built 7/9/8/8, was priced 16/16)
        try:
            _, built, _ = emitted_split(ctx.num_layers, lay.pp, lay.vpp, lay.per_rank_layers())
        except ValueError:
            built = None
        if built is not None:
            out.recipe["pipeline_layout"] = split_layout(built)
            out.recipe |= {"account_for_embedding": False, "account_for_loss": False}
            out.what = [w for w in out.what if not w.startswith("pipeline_layout ")]
    if split is not None:
        per_rank = [sum(split[r::lay.pp]) for r in range(lay.pp)]
        out.recipe["pipeline_layout"] = split_layout(split)
        out.recipe |= {"account_for_embedding": False, "account_for_loss": False}
        words = f"torchtitan's stage split {'/'.join(map(str, per_rank))} layers per PP rank"
        if len(split) != lay.pp * lay.vpp:
            out.set_layout("vpp", len(split) // lay.pp, f"{words} in {len(split) // lay.pp} virtual stages "
                                                        f"(not {lay.vpp})")
        else:
            out.what.append(f"{words} (not {'/'.join(map(str, lay.per_rank_layers()))})")
    return out


def default_less_layers() -> tuple[int, int]:
    """torchtitan 0.3.0's pipeline_parallel_first/last_stage_less_layers defaults (the audit's table of its config
    defaults, config/configs.py:191, :197)."""
    from placement.audit.readers.torchtitan_configs import DEFAULTS

    return (DEFAULTS["parallelism.pipeline_parallel_first_stage_less_layers"][0],
            DEFAULTS["parallelism.pipeline_parallel_last_stage_less_layers"][0])


def emitted_split(num_layers: int, pp: int, vpp: int,
                  want: list[int]) -> tuple[list[int] | None, list[int], list[int]]:
    """(layers_per_stage, first_less, last_less) the file states, None where it leaves the split to torchtitan's
    default (no flags split the layers so: `stage_flags` raises), the per-virtual-stage split torchtitan runs from
    them, and its per-PP-rank totals: its default deals pp stages (single-stage schedules) or 2 pp (looped ones)
    with its default first/last less layers (distributed/pipeline_parallel.py _get_pipeline_metadata; a user trial:
    llama3-70b on pp 25, which no flags split, was written "set pipeline_parallel_layers_per_stage yourself" and
    priced as the plan's split, where the file runs torchtitan's 3/4/.../3/2).  ValueError where torchtitan's
    default refuses the split too."""
    try:
        return stage_flags(num_layers, pp, vpp, want)
    except ValueError:
        split = split_over_stages(num_layers, pp * (1 if vpp == 1 else 2), *default_less_layers())
        return None, split, [sum(split[r::pp]) for r in range(pp)]


def runs_split(ctx: EmitContext) -> list[int] | None:
    """torchtitan's own per-virtual-stage split of the emitted flags when it differs from the plan's (per PP
    rank, or in stage count), else None."""
    lay = ctx.plan.layout
    if lay.pp == 1:
        return None
    try:
        _, split, per_rank = emitted_split(ctx.num_layers, lay.pp, lay.vpp, lay.per_rank_layers())
    except ValueError:
        return None  # torchtitan refuses every split: the file says it does not start
    if per_rank == lay.per_rank_layers() and len(split) == lay.pp * lay.vpp:
        return None
    return split


def _split_args(ctx: EmitContext) -> tuple[list[str], list[str]]:
    """The layers-per-stage flags (the split torchtitan accepts closest to the plan's) and a warning when its
    split is not the plan's (the header prices what it runs)."""
    lay = ctx.plan.layout
    want = lay.per_rank_layers()
    try:
        flags, split, per_rank = emitted_split(ctx.num_layers, lay.pp, lay.vpp, want)
    except ValueError as err:
        return [], [refusal(f"neither pipeline_parallel_layers_per_stage flags nor torchtitan's default split "
                            f"{ctx.num_layers} layers over pp {lay.pp} ({err})")]
    warnings = []
    if flags is None:  # torchtitan's default split: its first/last less layers stated as the defaults they are
        first_less, last_less = default_less_layers()
        args = ["--parallelism.pipeline_parallel_first_stage_less_layers", str(first_less),
                "--parallelism.pipeline_parallel_last_stage_less_layers", str(last_less)]
        warnings.append(f"no pipeline_parallel_layers_per_stage splits {ctx.num_layers} layers over pp {lay.pp} "
                        f"as the plan does: the file leaves it to torchtitan's default, {len(split)} virtual stages "
                        f"of {'/'.join(map(str, split))} layers, priced as it runs")
        return args, warnings
    chunk, first_less, last_less = flags
    args = ["--parallelism.pipeline_parallel_layers_per_stage", str(chunk),
            "--parallelism.pipeline_parallel_first_stage_less_layers", str(first_less),
            "--parallelism.pipeline_parallel_last_stage_less_layers", str(last_less)]
    if per_rank != want or len(split) != lay.pp * lay.vpp:
        got = "/".join(map(str, per_rank))
        warnings.append(f"torchtitan cannot split the layers as the plan does ({'/'.join(map(str, want))} per PP "
                        f"rank in {lay.vpp} virtual stages): the closest flags it accepts give {got} in "
                        f"{len(split) // lay.pp} (virtual stages {'/'.join(map(str, split))})")
    return args, warnings


def worker(ctx: EmitContext) -> tuple[str, str, list[str], list[str]]:
    """(preamble, the command after `torchrun ...`, notes, warnings): what every node runs."""
    args, warnings = flags(ctx)
    return "", "-m torchtitan.train " + " ".join(args), notes(ctx), warnings


def render(ctx: EmitContext) -> tuple[str, list[str]]:
    _, command, lines, warnings = worker(ctx)
    other = runs_precision(ctx)
    if other is not None:
        warnings.insert(0, f"{other[1]}: this file runs {other[0]}")
    line, warn = header_runs("torchtitan", warnings, *ctx.runs_as(runs(ctx)))
    if warn:
        warnings.insert(0, warn)
    text = header(ctx, VERSION, runs=line) + "".join(f"# {n}\n" for n in lines) + warn_block(warnings)
    return text + torchrun_lines(ctx, command), warnings
