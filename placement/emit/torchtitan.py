"""torchtitan 0.3.0: `torchrun ... -m torchtitan.train --module M --config F` plus `--section.key` flags.

Keys and rules from reference/frameworks.md §1 (torchtitan 0.3.0 `ParallelismConfig`, `ParallelDims`):
the dense mesh is (pp, dp_replicate, dp_shard, cp, tp), TP innermost, as placement orders ranks; EP
borrows the innermost ranks of dp_shard x cp x tp (our etp = 1 order).  FSDP is torchtitan's data
parallelism: ZeRO-3 = dp_shard (HSDP: dp_shard inside, dp_replicate across), ZeRO-2 = FSDP without
resharding after forward, DDP = dp_replicate only.  ZeRO-1 does not exist there.
"""

from __future__ import annotations

from placement.emit.common import EmitContext, Runs, header, recipe_warnings, runs_recipe, torchrun_lines, warn_block
from placement.specs import ModelSpec

# placement catalog name -> (torchtitan --module, --config)
MODELS = {
    "llama3-8b": ("llama3", "llama3_8b"),
    "llama3-70b": ("llama3", "llama3_70b"),
    "llama3-405b": ("llama3", "llama3_405b"),
    "deepseek-v3": ("deepseek_v3", "deepseek_v3_671b"),
}
FP8_CONFIGS = {"llama3_405b": "llama3_405b", "deepseek_v3_671b": "deepseek_v3_671b_float8"}
"""torchtitan 0.3.0 config -> the config of the same model with Float8 linear layers (and grouped experts).
Precision is set by the config function's converters, not by a flag: `llama3_405b` always converts,
`llama3_70b` and `llama3_8b` never (its `llama3_8b_mxfp8` is MXFP8 under torch.compile, not priced here),
`deepseek_v3_671b_float8` is the FP8 twin of `deepseek_v3_671b` (models/*/config_registry.py)."""


def _stage_split(stage_layers: list[int], vpp: int) -> tuple[list[str], list[str]]:
    """The layers-per-stage flags that make torchtitan split the layers as the plan does.

    torchtitan 0.3.0 (`distributed/pipeline_parallel.py`): virtual stages = ceil((L + first_less +
    last_less) / layers_per_stage); the effective layers are dealt evenly over them, and the first
    (last) virtual stage carries first_less (last_less) fewer transformer layers; stage s runs on PP rank
    s mod pp.  With chunks of `middle / vpp` layers, first_less = middle - first and last_less =
    middle - last give each PP rank exactly the plan's layers.  torchtitan refuses a less-layers count
    above the layers per stage."""
    first, last = stage_layers[0], stage_layers[-1]
    middle = stage_layers[1] if len(stage_layers) > 2 else max(first, last)
    chunk = middle // vpp
    first_less, last_less = middle - first, middle - last
    args = ["--parallelism.pipeline_parallel_layers_per_stage", str(chunk),
            "--parallelism.pipeline_parallel_first_stage_less_layers", str(first_less),
            "--parallelism.pipeline_parallel_last_stage_less_layers", str(last_less)]
    warnings = []
    if middle % vpp or max(first_less, last_less) > chunk:
        warnings.append(f"stages of {stage_layers} layers in {vpp} virtual chunks: torchtitan's even split with "
                        f"first/last_stage_less_layers cannot give exactly this; it will split differently")
    return args, warnings


def flags(ctx: EmitContext) -> tuple[list[str], list[str]]:
    """(the argument list after `-m torchtitan.train`, warnings about what it cannot express)."""
    lay = ctx.plan.layout
    warnings = []
    module, config = shipped_config(ctx) or (None, None)
    if config is not None and ctx.plan.precision == "fp8":
        config = FP8_CONFIGS.get(config, config)
    if module is None:
        warnings.append(f"torchtitan 0.3.0 ships no config for {ctx.model_name}; replace MODULE/CONFIG with yours")
        module, config = "MODULE", "CONFIG"
    if lay.zero_stage == 3:
        replicate, shard, reshard = lay.dp // lay.dp_shard, lay.dp_shard, "default"
    elif lay.zero_stage in (1, 2):
        replicate, shard, reshard = 1, lay.dp, "never"
        if lay.zero_stage == 1:
            warnings.append("torchtitan has no ZeRO-1: emitted as FSDP without resharding after forward (ZeRO-2), "
                            "which holds less memory and reduce-scatters gradients every micro-batch")
    else:
        replicate, shard, reshard = lay.dp, 1, "default"
    if lay.etp > 1:
        warnings.append(f"torchtitan 0.3.0 has no expert tensor parallelism (etp {lay.etp}): experts run with etp 1")
    split: list[str] = []
    if lay.pp > 1:
        split, warn = _stage_split(lay.stage_layers, lay.vpp)
        warnings += warn
    m = lay.num_microbatches
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
    if lay.pp > 1:
        args += ["--training.disable_cuda_graphs"]
    args.append({"none": "activation-checkpoint:none", "selective": "activation-checkpoint:selective",
                 "full": "activation-checkpoint:full"}[lay.recompute])
    warnings += recipe_warnings(ctx, "torchtitan 0.3.0", RUNS_INSTEAD)
    return args, warnings


RUNS_INSTEAD = {
    "moe_dispatcher": "it runs its all-to-all token dispatch, slower where a token goes to several ranks of one node",
    "cuda_graphs": "it runs without CUDA graphs, with the host launch time the plan priced away",
    "tp_comm_overlap": "its TP collectives run exposed (async TP needs torch.compile and is not written here)",
    "ep_comm_overlap": "its EP all-to-all runs exposed, not behind another micro-batch",
    "recompute_modules": "it runs its own selective activation checkpointing (per op or per layer)",
    "delay_wgrad": "it computes expert weight gradients in place",
    "pipeline_layout": "it splits the stages by pipeline_parallel_layers_per_stage",
    "fp8_params": "it keeps BF16 weights", "optimizer_state_bf16": "it keeps FP32 Adam moments",
    "activation_func_fp8_input_store": "it keeps the MLP activation input in BF16",
    "attention_kernel": "it runs fused attention (SDPA or flex attention)",
    "cross_entropy_fusion": "its loss keeps the FP32 logits",
}
"""What torchtitan runs instead of each recipe feature it cannot be told."""


_SAME_ARCHITECTURE = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_kv_heads",
                      "head_dim", "vocab_size", "tied_embeddings", "moe", "mla")
"""What must match for a model to run as one of torchtitan's shipped configs (a HF config.json of Llama 3.1
405B is torchtitan's llama3_405b)."""


def shipped_config(ctx: EmitContext) -> tuple[str, str] | None:
    """(module, config) of the torchtitan config that runs the context's model."""
    return MODELS.get(ctx.model_name) or (config_for(ctx.model) if ctx.model is not None else None)


def config_for(model: ModelSpec) -> tuple[str, str] | None:
    """(module, config) of the torchtitan config that runs `model`: by catalog name, or by architecture for a
    model read from elsewhere (a HF config.json, a user's YAML)."""
    if model.name in MODELS:
        return MODELS[model.name]
    from placement.catalog import load_model

    for name, pair in MODELS.items():
        if same_architecture(load_model(name), model):
            return pair
    return None


def same_architecture(a: ModelSpec, b: ModelSpec) -> bool:
    """The two models run as the same torchtitan config (dimensions, vocabulary, experts, MLA)."""
    return a.model_dump(include=set(_SAME_ARCHITECTURE)) == b.model_dump(include=set(_SAME_ARCHITECTURE))


def precision_run(config: str | None, precision: str) -> tuple[str, str] | None:
    """(the precision torchtitan's shipped `config` runs, why) when it is not `precision`, else None; None for a
    config of the user's own (its converters are theirs to set)."""
    if config is None:
        return None
    if precision == "fp8" and config not in FP8_CONFIGS:
        return "bf16", f"torchtitan 0.3.0's {config} config has no Float8 converter and no flag adds one"
    if precision == "bf16" and FP8_CONFIGS.get(config) == config:  # llama3_405b always converts
        return "fp8", (f"torchtitan 0.3.0's {config} config always turns on Float8 linear layers; drop its float8 "
                       f"converter for a BF16 run")
    return None


def runs_precision(ctx: EmitContext) -> tuple[str, str] | None:
    """(precision, why) when the shipped config runs another precision than the plan's, else None."""
    return precision_run((shipped_config(ctx) or (None, None))[1], ctx.plan.precision)


TITAN_0_2_FLAVORS = {("llama3", "8B"): "llama3-8b", ("llama3", "70B"): "llama3-70b", ("llama3", "405B"): "llama3-405b",
                     ("deepseek_v3", "671B"): "deepseek-v3"}
"""torchtitan 0.2.x `model.name`/`model.flavor` -> the catalog model."""


def catalog_name(module: str, config: str) -> str | None:
    """The catalog model a torchtitan model reference names: 0.3.0's module/config (either precision's config)
    or 0.2.x's name/flavor; None for a model placement's catalog does not hold."""
    for name, (m, c) in MODELS.items():
        if module == m and config in (c, FP8_CONFIGS.get(c)):
            return name
    return TITAN_0_2_FLAVORS.get((module, config))


def runs(ctx: EmitContext) -> Runs:
    """What the file runs where torchtitan 0.3.0 cannot be told the plan (each is also a warning)."""
    lay = ctx.plan.layout
    out = Runs()
    other = runs_precision(ctx)
    if other is not None:
        out.set_precision(ctx.plan, other[0])
    if lay.zero_stage == 1:
        out.set_layout("zero_stage", 2, "ZeRO-2 (not ZeRO-1)")
    if lay.etp > 1:
        out.set_layout("etp", 1, f"etp 1 (not {lay.etp})")
    runs_recipe(ctx, RUNS_INSTEAD, out)
    return out


def worker(ctx: EmitContext) -> tuple[str, str, list[str], list[str]]:
    """(preamble, the command after `torchrun ...`, notes, warnings): what every node runs."""
    args, warnings = flags(ctx)
    return "", "-m torchtitan.train " + " ".join(args), [], warnings


def render(ctx: EmitContext) -> tuple[str, list[str]]:
    _, command, _, warnings = worker(ctx)
    other = runs_precision(ctx)
    if other is not None:
        warnings.insert(0, f"{other[1]}: this file runs {other[0]}")
    line, warn = ctx.runs_as(runs(ctx))
    if warn:
        warnings.insert(0, warn)
    text = header(ctx, "torchtitan 0.3.0", runs=line) + warn_block(warnings)
    return text + torchrun_lines(ctx, command), warnings
