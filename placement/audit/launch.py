"""Read a job's own launch material, unedited, into a `LaunchLayout` (issue #5, `placement audit`).

Accepted forms (every value keeps its evidence, "file:line: original text", in `LaunchLayout.sources`):

* Megatron-LM (megatron-core 0.19.2 names, checked against its own argparse table, plus the older
  aliases below): a launch shell script (read by `placement.audit.shell`: variables, `${VAR:-x}`,
  `$((...))`, arrays, `if` on known values, `eval`) whose `torchrun` / `python -m torch.distributed.run` /
  `python` command runs a training script, or a plain file of arguments.  Old names read as their
  0.19.2 meaning: `--model-parallel-size` (TP), `--batch-size` (micro-batch), `--checkpoint-activations`
  (full recompute), `--recompute-activations` (selective), `--num-layers-per-virtual-pipeline-stage`,
  `--virtual-pipeline-model-parallel-size`, `--fp8-hybrid`/`--fp8-e4m3`.
* Megatron-Bridge (NVIDIA-NeMo/Megatron-Bridge): the YAML form of a `ConfigContainer` (what
  `ConfigContainer.print_yaml()`/`to_yaml()` writes, with `_target_` keys, and the partial override files
  passed with `--config-file`, e.g. `examples/recipes/llama/conf/*.yaml`; older `model_config:`/`train_config:`
  section names too), and Hydra-style `section.key=value` overrides on the recipe's command line
  (`pretrain_llama3_8b.py model.tensor_model_parallel_size=4`).  A partial override file states only what it
  overrides: fields it does not set keep this model's defaults and have no entry in `sources`.
* torchtitan 0.3.0 flags (`--module M --config F`, `--section.key value` or `=value`, `--no-` booleans,
  the `activation-checkpoint:MODE` subcommand) and 0.2.x flags (`--job.config_file`, `--model.name`...),
  in a script or argument file; torchtitan 0.2.x (and older) TOML files via tomllib.  CLI overrides win
  over the TOML, as in torchtitan.
* MaxText 0.2.5: its config YAML (placement's maxtext.yml or a config with base_config), `key=value`
  overrides on a launch script's MaxText train command, and placement's jax_mesh.py (process order);
  `placement.audit.maxtext` has the rules.
* DeepSpeed 0.19.8: the JSON config, a hostfile (`host slots=N`; DeepSpeed's own rules,
  reference/frameworks.md §4), the `deepspeed` launcher (`--num_nodes`, `--num_gpus`, `--hostfile`), and the
  TP/PP/DP it takes in code: either a Megatron-DeepSpeed script's arguments, or a Python file (the training
  script, or the `ds_topology.py` that `--emit deepspeed` writes) whose `PipeModelDataParallelTopology`,
  `PipeDataParallelTopology` or `ProcessTopology` call has literal numbers (read with `ast`, never run).

Not supported: Megatron's `--yaml-cfg` files, Bridge's `scripts/performance` `perf_matrix` files, NeMo 1.x
YAML, DeepSpeed `--include/--exclude`, here-documents in scripts (the DeepSpeed JSON must be a file).
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field

from placement.audit.shell import Command, Origin, Word, read_commands
from placement.errors import InputError
from placement.loaders.files import parse_json, parse_yaml, read_text
from placement.specs._base import Frozen

Framework = Literal["megatron", "torchtitan", "deepspeed", "maxtext"]
FRAMEWORKS = ("megatron", "torchtitan", "deepspeed", "maxtext")


class LaunchLayout(Frozen):
    """The layout a job's launch files state.  Fields without an entry in `sources` are defaults."""

    framework: Framework
    tp: int = Field(default=1, ge=1)
    cp: int = Field(default=1, ge=1)
    ep: int = Field(default=1, ge=1)
    etp: int | None = Field(default=None, ge=1)
    """Expert-tensor degree if given (Megatron --expert-tensor-parallel-size; None = framework default)."""
    pp: int = Field(default=1, ge=1)
    vpp: int = Field(default=1, ge=1)
    """Model chunks per pipeline rank; see `layers_per_virtual_stage` when it depends on the layer count."""
    dp: int | None = Field(default=None, ge=1)
    """Only if the files state it (torchtitan data_parallel_replicate * shard when both explicit)."""
    dp_shard: int | None = Field(default=None, ge=1)
    """torchtitan data_parallel_shard_degree (None for -1 = "the rest")."""
    dp_replicate: int = Field(default=1, ge=1)
    micro_batch_size: int | None = Field(default=None, ge=1)
    global_batch: int | None = Field(default=None, ge=1)
    grad_accumulation: int | None = Field(default=None, ge=1)
    """Gradient-accumulation steps the files fix (DeepSpeed / GPT-NeoX gradient_accumulation_steps; DeepSpeed's
    default 1 when they give a micro-batch and no train_batch_size): global batch = micro x this x dp."""
    local_batch: int | None = Field(default=None, ge=1)
    """torchtitan training.local_batch_size: sequences per data-parallel rank per step (global = this x dp
    when training.global_batch_size is not set)."""
    seq_len: int | None = Field(default=None, ge=1)
    zero_stage: int | None = Field(default=None, ge=0, le=3)
    recompute: Literal["none", "selective", "full"] | None = None
    sequence_parallel: bool | None = None
    first_stage_layers: int | None = Field(default=None, ge=0)
    """Transformer layers on the first pipeline rank (all its virtual stages), if the files fix it."""
    last_stage_layers: int | None = Field(default=None, ge=0)
    num_layers: int | None = Field(default=None, ge=1)
    hidden_size: int | None = Field(default=None, ge=1)
    num_attention_heads: int | None = Field(default=None, ge=1)
    num_experts: int | None = Field(default=None, ge=1)
    precision: Literal["bf16", "fp8"] | None = None
    """fp8 if the files turn on FP8 GEMMs."""
    world_size: int | None = Field(default=None, ge=1)
    """From the launcher in the files (torchrun nnodes x nproc-per-node, hostfile slots...)."""
    gpus_per_node: int | None = Field(default=None, ge=1)
    hosts: tuple[str, ...] = ()
    """Host order the files fix (DeepSpeed hostfile lines)."""
    model_ref: str | None = None
    """torchtitan model name:flavor (0.2.x) or module:config (0.3.0), e.g. "llama3:405B"."""
    layers_per_virtual_stage: int | None = Field(default=None, ge=1)
    """Added: layers per (virtual) pipeline stage when the files give that instead of a stage count
    (Megatron --num-layers-per-virtual-pipeline-stage without --num-layers, torchtitan
    pipeline_parallel_layers_per_stage); `virtual_stages(num_layers)` turns it into vpp."""
    mesh: dict[str, Any] | None = None
    """MaxText: the mesh and batch keys as read (axes, ici, dcn with -1 fills left for the cluster,
    per_device_batch_size, accumulation, pipeline keys, the source of each); `placement.audit.maxtext.resolve`
    turns them into the layout on the job's GPUs."""
    rank_order: Literal["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"] = "tp-cp-ep-dp-pp"
    """Megatron's rank order (--use-tp-pp-dp-mapping puts pp inside dp); torchtitan's and DeepSpeed's
    meshes are the default one."""
    first_stage_less_layers: int = Field(default=1, ge=0)
    """torchtitan pipeline_parallel_first_stage_less_layers: the embedding's weight in the stage split."""
    last_stage_less_layers: int = Field(default=1, ge=0)
    """torchtitan pipeline_parallel_last_stage_less_layers: the output layer's weight in the stage split."""
    recipe: dict[str, Any] = Field(default_factory=dict)
    """Recipe fields (placement/specs/recipe.py) the files state: Megatron's recipe arguments, read as
    `placement.emit.megatron` writes them; evidence under sources["recipe.FIELD"]."""
    sources: dict[str, str] = Field(default_factory=dict)
    """Field -> "file:line: original text", the evidence for each value read from the files."""
    ignored: tuple[str, ...] = ()
    """Settings seen that affect performance but are not modelled."""

    def virtual_stages(self, num_layers: int) -> int:
        """vpp for a model of `num_layers` layers (uses `layers_per_virtual_stage` when the files gave it).

        torchtitan (0.2.2 and 0.3.0 `_get_pipeline_metadata`): stages = ceil((layers + first_less +
        last_less) / layers_per_stage), the embedding and output weighing one layer each by default; per
        rank = stages / pp.  Megatron (0.19.2 validate_args):
        (layers / pp) / layers_per_virtual_stage.
        """
        if self.layers_per_virtual_stage is None or self.pp == 1:
            return self.vpp
        lps = self.layers_per_virtual_stage
        if self.framework == "torchtitan":
            stages = -(-(num_layers + self.first_stage_less_layers + self.last_stage_less_layers) // lps)
            if stages % self.pp:
                raise InputError(f"pipeline_parallel_layers_per_stage {lps} gives {stages} stages for {num_layers} "
                                 f"layers, not a multiple of pipeline_parallel_degree {self.pp}; torchtitan rejects it")
            return stages // self.pp
        per_stage, rem = divmod(num_layers, self.pp)
        if rem or per_stage % lps:
            raise InputError(f"--num-layers-per-virtual-pipeline-stage {lps} does not divide the {num_layers} layers "
                             f"/ pp {self.pp}; Megatron rejects it")
        return per_stage // lps


# ---------------------------------------------------------------------------------------------------
# Settings gathered from one file: field -> (value, evidence); merged across files with conflict checks.


@dataclass
class _Settings:
    path: str
    values: dict[str, tuple[Any, str]]
    ignored: list[str]
    override: bool = False
    """CLI overrides (torchtitan flags, Hydra overrides) win over config files instead of conflicting."""
    extra: dict[str, Any] | None = None
    """Framework-specific facts kept for the merge step (deepspeed config path, torchtitan config file)."""

    def put(self, name: str, value: Any, evidence: str) -> None:
        self.values[name] = (value, evidence)


def _int(text: str, what: str, evidence: str, *, minimum: int = 0) -> int:
    try:
        value = int(str(text).strip())
    except (TypeError, ValueError):
        raise InputError(f"{evidence}: {what} must be an integer, got {text!r}") from None
    if value < minimum:
        raise InputError(f"{evidence}: {what} must be >= {minimum}, got {value}")
    return value


def _word_check(word: Word, flag: str) -> None:
    if word.unresolved:
        raise InputError(f"{word.site}: {flag} depends on {word.unresolved}, which the files do not set "
                         f"(value written at {word.origin.path}:{word.origin.line}); set it in the script or pass "
                         f"the expanded argument list")
    if word.uncertain:
        raise InputError(f"{word.site}: {flag} is {word.uncertain}; expected the layout flags outside "
                         f"conditions placement cannot evaluate (or pass the expanded argument list)")


# ---------------------------------------------------------------------------------------------------
# Argument lists: split into (flag, values) with Megatron-style rules.


@dataclass
class _Arg:
    flag: str
    values: list[Word]
    word: Word

    @property
    def evidence(self) -> str:
        ev = self.word.evidence
        for v in self.values:
            if v.origin != self.word.origin and v.origin != self.word.site:
                ev = f"{self.word.site} [{self.flag} value from {v.origin}]"
        return ev


def _split_args(words: list[Word], nargs: dict[str, int | str]) -> list[_Arg]:
    """`--flag value`, `--flag=value`, `--flag v1 v2` (nargs from the table; unknown flags take the
    following words up to the next `--flag`)."""
    out: list[_Arg] = []
    i = 0
    while i < len(words):
        w = words[i]
        if not w.text.startswith("-") or w.text in ("-", "--") or re.fullmatch(r"-\d.*", w.text):
            if out:
                out[-1].values.append(w)
            i += 1
            continue
        flag, eq, inline = w.text.partition("=")
        arg = _Arg(flag, [], w)
        if eq:
            arg.values.append(Word(inline, w.origin, w.site, w.unresolved, w.uncertain))
            out.append(arg)
            i += 1
            continue
        want = nargs.get(flag)
        i += 1
        if want == 0:
            out.append(arg)
            continue
        while i < len(words) and not (words[i].text.startswith("--") or re.fullmatch(r"-[A-Za-z].*", words[i].text)):
            arg.values.append(words[i])
            i += 1
            if isinstance(want, int) and len(arg.values) == want:
                break
        out.append(arg)
    return out


def _one(arg: _Arg) -> Word:
    if len(arg.values) != 1:
        got = "nothing" if not arg.values else " ".join(v.text for v in arg.values)
        raise InputError(f"{arg.word.site}: {arg.flag} expects one value, got {got}")
    _word_check(arg.values[0], arg.flag)
    return arg.values[0]


# Megatron-LM flags (megatron-core 0.19.2 argparse: dest, nargs; the aliases are older names).
_MG_INT = {
    "--tensor-model-parallel-size": "tp", "--model-parallel-size": "tp",
    "--pipeline-model-parallel-size": "pp", "--context-parallel-size": "cp",
    "--ds-sequence-parallel-size": "cp", "--expert-model-parallel-size": "ep",
    "--expert-tensor-parallel-size": "etp", "--num-virtual-stages-per-pipeline-rank": "vpp",
    "--virtual-pipeline-model-parallel-size": "vpp",
    "--num-layers-per-virtual-pipeline-stage": "layers_per_virtual_stage",
    "--decoder-first-pipeline-num-layers": "first_stage_layers",
    "--decoder-last-pipeline-num-layers": "last_stage_layers",
    "--micro-batch-size": "micro_batch_size", "--batch-size": "micro_batch_size",
    "--per-device-train-batch-size": "micro_batch_size", "--gradient-accumulation-steps": "_ds_gas",  # HF Trainer
    "--global-batch-size": "global_batch", "--seq-length": "seq_len", "--num-layers": "num_layers",
    "--hidden-size": "hidden_size", "--num-attention-heads": "num_attention_heads", "--num-experts": "num_experts",
    "--zero-stage": "zero_stage",
}
_MG_FLAGS0 = {"--sequence-parallel", "--use-distributed-optimizer", "--use-megatron-fsdp", "--use-torch-fsdp2",
              "--recompute-activations", "--checkpoint-activations", "--bf16", "--fp16", "--fp8-hybrid", "--fp8-e4m3",
              "--no-pipeline-parallel", "--deepspeed", "--account-for-embedding-in-pipeline-split",
              "--account-for-loss-in-pipeline-split", "--torch-fsdp2-no-reshard-after-forward",
              "--overlap-grad-reduce", "--overlap-param-gather", "--tp-comm-overlap", "--use-tp-pp-dp-mapping",
              "--fp8-param-gather", "--moe-layer-recompute", "--cpu-offloading", "--no-overlap-p2p-communication",
              "--deepspeed-activation-checkpointing", "--partition-activations", "--cpu-optimizer",
              "--fp16-lm-cross-entropy", "--swiglu", "--use-mcore-models", "--group-query-attention",
              "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute", "--cross-entropy-loss-fusion",
              "--moe-permute-fusion", "--moe-router-fusion", "--no-check-for-nan-in-loss-and-grad",
              "--enable-cuda-graph", "--external-cuda-graph", "--use-precision-aware-optimizer",
              "--moe-router-force-load-balancing", "--activation-func-fp8-input-store"}
_MG_NARGS: dict[str, int | str] = {f: 1 for f in _MG_INT} | {f: 0 for f in _MG_FLAGS0} | {
    "--rampup-batch-size": 3, "--recompute-granularity": 1, "--data-parallel-sharding-strategy": 1,
    "--fp8-format": 1, "--fp4-format": 1, "--pipeline-model-parallel-layout": 1, "--deepspeed_config": 1,
    "--deepspeed-config": 1, "--recompute-method": 1, "--recompute-num-layers": 1,
    "--num-distributed-optimizer-instances": 1, "--moe-token-dispatcher-type": 1, "--moe-flex-dispatcher-backend": 1,
    "--attention-backend": 1,
    "--cuda-graph-impl": 1, "--cuda-graph-modules": "+", "--cuda-graph-scope": "+", "--recompute-modules": "+",
    "--fp8-recipe": 1, "--mtp-num-layers": 1, "--moe-expert-capacity-factor": 1, "--exp-avg-dtype": 1,
    "--exp-avg-sq-dtype": 1}
_MG_IGNORED = {
    "--num-distributed-optimizer-instances": "partial distributed optimizer (shards within instances)",
    "--cpu-offloading": "activation/weight offload to CPU",
    "--moe-layer-recompute": "recomputes MoE layers",
    "--rampup-batch-size": "batch-size ramp-up (the layout is read at the final batch size)",
    "--fp4-format": "FP4 GEMMs (not modelled; priced as the other precision)",
    "--no-overlap-p2p-communication": "pipeline send/recv not overlapped",
    "--cpu-optimizer": "optimizer step on CPU",
    "--moe-router-force-load-balancing": "forces balanced routing (a benchmark setting; the audit prices the "
                                         "recipe's routing imbalance)",
}
_MG_RECIPE_FLAGS = {
    # bare Megatron flag -> the Recipe field it turns on
    "--tp-comm-overlap": "tp_comm_overlap", "--overlap-moe-expert-parallel-comm": "ep_comm_overlap",
    "--delay-wgrad-compute": "delay_wgrad", "--fp8-param-gather": "fp8_params",
    "--account-for-embedding-in-pipeline-split": "account_for_embedding",
    "--account-for-loss-in-pipeline-split": "account_for_loss", "--cross-entropy-loss-fusion": "cross_entropy_fusion",
    "--overlap-grad-reduce": "dp_overlap", "--moe-permute-fusion": "moe_fusions",
    "--activation-func-fp8-input-store": "activation_func_fp8_input_store",
}


def _megatron_recipe(f: str, a: _Arg, s: _Settings, state: dict) -> bool:
    """Read one Megatron recipe argument into s ("recipe.FIELD"); True if `f` was one."""
    if f in _MG_RECIPE_FLAGS:
        s.put(f"recipe.{_MG_RECIPE_FLAGS[f]}", True, a.evidence)
    elif f == "--moe-token-dispatcher-type":
        value = _one(a).text
        if value not in ("alltoall", "allgather", "flex"):
            raise InputError(f"{a.evidence}: --moe-token-dispatcher-type must be alltoall, allgather or flex, got "
                             f"{value!r}")
        state["dispatcher"] = (value, a.evidence)
    elif f == "--moe-flex-dispatcher-backend":
        state["backend"] = (_one(a).text, a.evidence)
    elif f == "--attention-backend":  # Megatron's AttnBackend: the unfused and local ones keep the scores in HBM
        value = _one(a).text
        if value not in ("flash", "fused", "unfused", "local", "auto"):
            raise InputError(f"{a.evidence}: --attention-backend must be flash, fused, unfused, local or auto, got "
                             f"{value!r}")
        s.put("recipe.attention_kernel", "unfused" if value in ("unfused", "local") else "flash", a.evidence)
    elif f in ("--cuda-graph-impl", "--enable-cuda-graph", "--external-cuda-graph"):
        impl = {"--enable-cuda-graph": "local", "--external-cuda-graph": "transformer_engine"}.get(f) or _one(a).text
        state["graph_impl"] = (impl, a.evidence)
    elif f in ("--cuda-graph-modules", "--cuda-graph-scope"):
        for w in a.values:
            _word_check(w, f)
        state["graph_modules"] = ([w.text for w in a.values], a.evidence)
    elif f == "--recompute-modules":
        for w in a.values:
            _word_check(w, f)
        s.put("recipe.recompute_modules", tuple(w.text for w in a.values), a.evidence)
    elif f == "--recompute-num-layers":
        state["recompute_num_layers"] = (_int(_one(a).text, f, a.evidence), a.evidence)
    elif f == "--recompute-method":
        state["recompute_method"] = (_one(a).text, a.evidence)
    elif f == "--fp8-recipe":
        value = _one(a).text
        # Megatron's delayed (its default) and tensorwise are both per-tensor scaling: placement's tensorwise
        s.put("recipe.fp8_recipe", "tensorwise" if value == "delayed" else value, a.evidence)
    elif f == "--mtp-num-layers":
        s.put("recipe.mtp_layers", _int(_one(a).text, f, a.evidence), a.evidence)
    elif f == "--moe-expert-capacity-factor":
        text = _one(a).text
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{a.evidence}: --moe-expert-capacity-factor must be a number, got {text!r}") from None
        if value > 0:  # Megatron reads a negative factor as dropless
            s.put("recipe.moe_capacity_factor", value, a.evidence)
    elif f in ("--exp-avg-dtype", "--exp-avg-sq-dtype"):
        state[f] = (_one(a).text, a.evidence)
    else:
        return False
    return True


def _megatron_recipe_finish(s: _Settings, state: dict) -> None:
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


def _megatron_args(words: list[Word], s: _Settings) -> None:
    args = _split_args(words, _MG_NARGS)
    sharding = None
    fsdp = None
    recipe_state: dict = {}
    for a in args:
        f = a.flag.replace("_", "-") if a.flag.startswith("--deepspeed") is False else a.flag
        if a.flag in ("--deepspeed_config", "--deepspeed-config"):
            name = a.values[0].text if a.values else ""
            s.extra = (s.extra or {}) | {"deepspeed_config": (name, a.evidence)}
            continue
        if f in _MG_IGNORED:
            note = f"{f}: {_MG_IGNORED[f]} ({a.word.site.path}:{a.word.site.line})"
            if note not in s.ignored:
                s.ignored.append(note)
        if _megatron_recipe(f, a, s, recipe_state):
            continue
        if f in _MG_INT:
            name = _MG_INT[f]
            value = _int(_one(a).text, f, a.evidence, minimum=1 if name in (
                "tp", "pp", "cp", "ep", "etp", "vpp", "micro_batch_size", "global_batch", "seq_len", "num_layers",
                "layers_per_virtual_stage", "_ds_gas") else 0)
            if f == "--ds-sequence-parallel-size":
                s.ignored.append(f"{f}: DeepSpeed-Ulysses all-to-all sequence parallelism, priced as context "
                                 f"parallelism ({a.word.site.path}:{a.word.site.line})")
            if f == "--zero-stage" and value > 3:
                raise InputError(f"{a.evidence}: --zero-stage must be 0..3, got {value}")
            s.put(name, value, a.evidence)
        elif f == "--use-tp-pp-dp-mapping":
            s.put("rank_order", "tp-cp-ep-pp-dp", a.evidence)
        elif f == "--sequence-parallel":
            s.put("sequence_parallel", True, a.evidence)
        elif f == "--use-distributed-optimizer":
            s.put("zero_stage", 1, a.evidence)
        elif f in ("--use-megatron-fsdp", "--use-torch-fsdp2"):
            fsdp = (f, a.evidence)
        elif f == "--data-parallel-sharding-strategy":
            sharding = (_one(a).text, a.evidence)
        elif f == "--torch-fsdp2-no-reshard-after-forward":
            sharding = ("optim_grads", a.evidence)
        elif f == "--recompute-granularity":
            value = _one(a).text
            if value not in ("full", "selective"):
                raise InputError(f"{a.evidence}: --recompute-granularity must be full or selective, got {value!r}")
            s.put("recompute", value, a.evidence)
        elif f == "--recompute-activations":
            s.put("recompute", "selective", a.evidence)
        elif f == "--checkpoint-activations":
            s.put("recompute", "full", a.evidence)
        elif f in ("--fp8-format", "--fp8-hybrid", "--fp8-e4m3"):
            if f == "--fp8-format" and _one(a).text not in ("e4m3", "hybrid"):
                raise InputError(f"{a.evidence}: --fp8-format must be e4m3 or hybrid, got {_one(a).text!r}")
            s.put("precision", "fp8", a.evidence)
        elif f in ("--bf16", "--fp16"):
            if "precision" not in s.values or s.values["precision"][0] != "fp8":
                s.put("precision", "bf16", a.evidence)
            if f == "--fp16":
                where = f"{a.word.site.path}:{a.word.site.line}"
                s.ignored.append(f"--fp16: FP16 mixed precision, priced as bf16 ({where})")
        elif f == "--gradient-checkpointing":  # HF TrainingArguments
            on = not a.values or _one(a).text.lower() in ("true", "1", "yes")
            s.put("recompute", "full" if on else "none", a.evidence)
        elif f == "--no-pipeline-parallel":
            s.put("pp", 1, a.evidence)
        elif f == "--pipeline-model-parallel-layout":
            s.put("pp_layout", _one(a).text, a.evidence)
            s.put("recipe.pipeline_layout", _one(a).text, a.evidence)
    _megatron_recipe_finish(s, recipe_state)
    deepspeed_flag = next((a for a in args if a.flag == "--deepspeed"), None)
    if deepspeed_flag is not None:  # Megatron-DeepSpeed pipelines with DeepSpeed's PipelineEngine
        s.put("recipe.pipeline_p2p_whole", True, f"{deepspeed_flag.evidence} (DeepSpeed's PipelineEngine sends each "
                                                 f"TP rank's whole activation: runtime/pipe/engine.py)")
    zero = s.values.get("zero_stage")
    if deepspeed_flag is not None and zero is not None and zero[0] == 0 and s.values.get("precision", ("",))[0] == \
            "bf16" and not any(a.flag == "--fp16" for a in args):
        # Megatron-DeepSpeed under --bf16 with ZeRO stage 0 runs DeepSpeed's BF16_Optimizer, which partitions
        # the fp32 master weights and optimizer state across data parallelism (deepspeed/runtime/bf16_optimizer.py)
        s.put("zero_stage", 1, f"{zero[1]}; {s.values['precision'][1]} (DeepSpeed's BF16_Optimizer under --bf16 "
                               f"with ZeRO stage 0 shards the optimizer state over data parallelism: ZeRO-1)")
    if fsdp is not None:
        strategy = sharding[0] if sharding else "optim_grads_params"
        stage = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}.get(strategy)
        if stage is None:
            raise InputError(f"{sharding[1]}: --data-parallel-sharding-strategy must be no_shard, optim, optim_grads "
                             f"or optim_grads_params, got {strategy!r}")
        s.put("zero_stage", stage, fsdp[1] if not sharding else f"{fsdp[1]}; {sharding[1]}")


# ---------------------------------------------------------------------------------------------------
# Launchers


_LAUNCHERS = {"torchrun", "deepspeed", "deepspeed.pt"}
_PY = re.compile(r"^(python[0-9.]*|.*/python[0-9.]*)$")


@dataclass
class _Launch:
    launcher: str | None
    launcher_args: list[Word]
    entry: Word
    args: list[Word]
    command: Command


def _find_launch(cmd: Command) -> _Launch | None:
    w = list(cmd.words)
    if not w or w[0].text in ("echo", "printf", "mkdir", "cd", "set", "exit", "rm", "cp", "cat", "wget", "sed"):
        return None
    launcher = None
    for i, x in enumerate(w):
        name = x.text.rsplit("/", 1)[-1]
        if name in _LAUNCHERS:
            launcher, start = name, i + 1
            break
        if _PY.match(x.text):
            m = i + 1
            while m < len(w) and w[m].text.startswith("-") and w[m].text != "-m":  # python -u -O ... -m
                m += 1
            if m + 1 < len(w) and w[m].text == "-m" and w[m + 1].text in (
                    "torch.distributed.run", "torch.distributed.launch"):
                launcher, start = "torchrun", m + 2
                break
    else:
        start = 0
    j = start
    while j < len(w):
        t = w[j].text
        if t.endswith(".py") or (t.endswith(".sh") and j > 0) or (t == "-m" and launcher is not None):
            break
        if _PY.match(t) and launcher is None and j + 1 < len(w) and w[j + 1].text == "-m":
            j += 1
            break
        j += 1
    if j >= len(w):
        return None
    if w[j].text == "-m":
        if j + 1 >= len(w):
            return None
        entry, rest = w[j + 1], w[j + 2:]
        largs = w[start:j]
    else:
        entry, rest = w[j], w[j + 1:]
        largs = w[start:j]
    if launcher is None and not (entry.text.endswith(".py") or any(x.text.startswith("--") for x in rest)):
        return None
    return _Launch(launcher, largs, entry, rest, cmd)


def _launch_commands(path: Path) -> list[_Launch]:
    launches = [x for x in (_find_launch(c) for c in read_commands(path)) if x is not None]
    launched = [x for x in launches if x.launcher is not None]
    if launched:  # a distributed launch (torchrun, deepspeed) is the job; plain `python x.py` lines prepare data
        launches = launched
    if len(launches) > 1:
        first = [w.text for w in launches[0].args]
        for other in launches[1:]:
            if [w.text for w in other.args] != first:
                raise InputError(f"{path}: two launch commands with different arguments (lines "
                                 f"{launches[0].command.origin.line} and {other.command.origin.line}); pass the "
                                 f"file of one job")
    return launches


def _launcher_settings(launch: _Launch, s: _Settings) -> None:
    nargs = {"--standalone": 0, "--no-python": 0, "--no_python": 0, "--no-local-rank": 0, "--no_local_rank": 0}
    args = {a.flag.replace("_", "-"): a for a in _split_args(launch.launcher_args, nargs)}
    if launch.launcher == "torchrun":
        nodes, procs = args.get("--nnodes"), args.get("--nproc-per-node")
        n = p = None
        if nodes is not None:
            text = _one(nodes).text
            if not re.fullmatch(r"\d+", text):
                s.ignored.append(f"--nnodes {text}: elastic node range; world size not fixed ({nodes.evidence})")
            else:
                n = _int(text, "--nnodes", nodes.evidence)
        elif "--standalone" in args or procs is not None:
            n = 1
        if procs is not None:
            text = _one(procs).text
            if re.fullmatch(r"\d+", text):
                p = _int(text, "--nproc-per-node", procs.evidence)
                s.put("gpus_per_node", p, procs.evidence)
        if n is not None and p is not None:
            s.put("world_size", n * p, f"{nodes.evidence if nodes else procs.evidence}; {procs.evidence}")
    elif launch.launcher in ("deepspeed", "deepspeed.pt"):
        extra = s.extra or {}
        for key in ("--num-nodes", "--num-gpus", "--hostfile"):
            if key in args:
                extra[key] = (_one(args[key]).text, args[key].evidence)
        for key in ("--include", "--exclude", "-i", "-e"):
            if key in args:
                s.ignored.append(f"deepspeed {key}: host/GPU selection not applied ({args[key].evidence})")
        s.extra = extra


# ---------------------------------------------------------------------------------------------------
# torchtitan


_TT_SINGLE_STAGE = {"1f1b", "gpipe", "pipelineschedulesingle"}
_TT_MULTI_STAGE = {"interleaved1f1b", "loopedbfs", "interleavedzerobubble", "zbvzerobubble", "dualpipev",
                   "pipelineschedulemulti"}
_TT_BOOL = {"training.disable_cuda_graphs", "parallelism.enable_sequence_parallel",
            "parallelism.enable_async_tensor_parallel", "compile.enable", "training.compile",
            "parallelism.disable_loss_parallel"}


def _tt_key(flag: str) -> tuple[str, bool]:
    """`--parallelism.no-enable-sequence-parallel` -> ("parallelism.enable_sequence_parallel", False)."""
    key = flag[2:]
    section, _, name = key.rpartition(".")
    name = name.replace("-", "_")
    value = True
    if name.startswith("no_") and f"{section}.{name[3:]}" in _TT_BOOL:
        name, value = name[3:], False
    return (f"{section}.{name}" if section else name), value


def _torchtitan_flags(words: list[Word], s: _Settings) -> dict[str, tuple[Any, str]]:
    """Dotted keys from torchtitan CLI flags (0.3.0 tyro and 0.2.x)."""
    out: dict[str, tuple[Any, str]] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if w.text.startswith("activation-checkpoint:") or w.text.startswith("activation_checkpoint:"):
            out["activation_checkpoint.mode"] = (w.text.split(":", 1)[1].replace("-", "_"), w.evidence)
            i += 1
            continue
        if not w.text.startswith("--"):
            raise InputError(f"{w.site}: unexpected argument {w.text!r}; expected --section.key value flags")
        flag, eq, inline = w.text.partition("=")
        key, truth = _tt_key(flag)
        if eq:
            _word_check(w, flag)
            out[key] = (inline, w.evidence)
            i += 1
            continue
        nxt = words[i + 1] if i + 1 < len(words) else None
        takes_value = (key not in _TT_BOOL and key not in ("module", "config")) or key in ("module", "config")
        if key in _TT_BOOL or not takes_value:
            out[key] = (truth, w.evidence)
            i += 1
            continue
        if nxt is None or nxt.text.startswith("--") or nxt.text.startswith("activation-checkpoint:"):
            raise InputError(f"{w.site}: {flag} is missing its value")
        _word_check(nxt, flag)
        ev = w.evidence if nxt.origin in (w.origin, w.site) else f"{w.site} [{flag} value from {nxt.origin}]"
        out[key] = (nxt.text, ev)
        i += 2
    return out


def _torchtitan_toml(path: Path) -> dict[str, tuple[Any, str]]:
    text = read_text(path, "torchtitan config", "expected a TOML file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"{path}: not valid TOML ({err}); expected torchtitan's [job]/[model]/[parallelism] "
                         f"sections") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise InputError(f"{path}: the TOML nests arrays or tables deeper than the reader can follow; expected "
                         f"torchtitan's [job]/[model]/[parallelism] sections: look for unclosed brackets") from None
    lines = text.splitlines()
    out: dict[str, tuple[Any, str]] = {}
    for section, table in data.items():
        if not isinstance(table, dict):
            continue
        for key, value in _flatten(table, path):
            dotted = f"{section}.{key}"
            out[dotted] = (value, _toml_evidence(path, lines, section, key.rsplit(".", 1)[-1]))
    return out


TOML_MAX_DEPTH = 64
"""Deepest table nesting read from a torchtitan TOML (its real sections are two levels deep)."""


def _flatten(table: dict, path: Path) -> list[tuple[str, Any]]:
    """Every leaf of a TOML table as (dotted key, value) in file order, walked with an explicit stack (no
    recursion over user data)."""
    items: list[tuple[str, Any]] = []
    stack = [("", iter(table.items()))]
    while stack:
        prefix, rest = stack[-1]
        k, v = next(rest, (None, None))
        if k is None:
            stack.pop()
        elif isinstance(v, dict):
            if len(stack) >= TOML_MAX_DEPTH:
                raise InputError(f"{path}: TOML tables nest deeper than {TOML_MAX_DEPTH} levels (at "
                                 f"{prefix[:60]}...); torchtitan's sections are two levels deep: look for a "
                                 f"runaway dotted key")
            stack.append((f"{prefix}{k}.", iter(v.items())))
        else:
            items.append((f"{prefix}{k}", v))
    return items


def _toml_evidence(path: Path, lines: list[str], section: str, key: str) -> str:
    in_section = False
    for n, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("["):
            in_section = stripped.strip("[] ").split(".")[0] == section
        elif in_section and re.match(rf"{re.escape(key)}\s*=", stripped):
            return f"{path}:{n}: {stripped}"
    return f"{path}: [{section}] {key}"


def _torchtitan_settings(keys: dict[str, tuple[Any, str]], s: _Settings, where: str) -> None:
    def get(key: str):
        return keys.get(key, (None, None))

    def degree(key: str, field: str, *, allow_negative: bool = False) -> int | None:
        value, ev = get(key)
        if value is None:
            return None
        v = _int(value, key, ev, minimum=-1 if allow_negative else 0)
        if v == 0 or (v < 0 and not (allow_negative and v == -1)):
            raise InputError(f"{ev}: {key} must be >= 1{' or -1' if allow_negative else ''}, got {v}")
        if field:
            s.put(field, v, ev)
        return v

    for key, field in (("parallelism.tensor_parallel_degree", "tp"), ("parallelism.context_parallel_degree", "cp"),
                       ("parallelism.expert_parallel_degree", "ep"), ("parallelism.pipeline_parallel_degree", "pp"),
                       ("parallelism.expert_tensor_parallel_degree", "etp"),
                       ("parallelism.data_parallel_replicate_degree", "dp_replicate"),
                       ("training.seq_len", "seq_len")):
        degree(key, field)
    shard = degree("parallelism.data_parallel_shard_degree", "", allow_negative=True)
    if shard is not None:
        ev = get("parallelism.data_parallel_shard_degree")[1]
        if shard > 0:
            s.put("dp_shard", shard, ev)
        s.put("_tt_shard", shard, ev)
    reshard, rev = get("parallelism.fsdp_reshard_after_forward")
    if reshard is not None:
        s.put("_tt_reshard", str(reshard), rev)
    local = get("training.local_batch_size") if "training.local_batch_size" in keys else get("training.batch_size")
    if local[0] is not None:
        s.put("_tt_local_batch", _int(local[0], "training.local_batch_size", local[1]), local[1])
    pmb = get("parallelism.pipeline_parallel_microbatch_size")
    if pmb[0] is not None:
        s.put("_tt_pp_microbatch", _int(pmb[0], "parallelism.pipeline_parallel_microbatch_size", pmb[1]), pmb[1])
    gbs = get("training.global_batch_size")
    if gbs[0] is not None and _int(gbs[0], "training.global_batch_size", gbs[1], minimum=-1) > 0:
        s.put("global_batch", int(gbs[0]), gbs[1])
    sched = get("parallelism.pipeline_parallel_schedule")
    if sched[0] is not None:
        name = str(sched[0]).lower()
        if name not in _TT_SINGLE_STAGE | _TT_MULTI_STAGE:
            raise InputError(f"{sched[1]}: unknown pipeline_parallel_schedule {sched[0]!r}; expected one of "
                             f"1F1B, GPipe, Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble, "
                             f"DualPipeV")
        s.put("_tt_schedule", name, sched[1])
    lps = get("parallelism.pipeline_parallel_layers_per_stage")
    if lps[0] is not None:
        s.put("layers_per_virtual_stage", _int(lps[0], "pipeline_parallel_layers_per_stage", lps[1]), lps[1])
    for key, field in (("parallelism.pipeline_parallel_first_stage_less_layers", "first_stage_less_layers"),
                       ("parallelism.pipeline_parallel_last_stage_less_layers", "last_stage_less_layers")):
        v, ev = get(key)
        if v is not None:
            s.put(field, _int(v, key.split(".")[1], ev), ev)
    mode, mev = get("activation_checkpoint.mode")
    if mode is not None:
        mode = str(mode).replace("-", "_")
        if mode in ("none", "selective", "full"):
            s.put("recompute", mode, mev)
        elif mode == "memory_budget":
            s.ignored.append(f"activation checkpointing memory_budget: recompute chosen by the compiler ({mev})")
        else:
            raise InputError(f"{mev}: activation checkpoint mode must be none, selective, full or memory_budget, "
                             f"got {mode!r}")
    sp, spev = get("parallelism.enable_sequence_parallel")
    if sp is not None:
        s.put("sequence_parallel", sp in (True, "true", "True"), spev)
    conv, cev = get("model.converters")
    if conv is not None:
        names = conv if isinstance(conv, list) else [c for c in str(conv).split(",") if c]
        if any("float8" in str(c) or str(c).split(".")[-1] == "mx" for c in names):
            s.put("precision", "fp8", cev)
    name, nev = get("model.name")
    flavor, fev = get("model.flavor")
    module, mev2 = get("module")
    config, cfev = get("config")
    if name is not None or flavor is not None:
        s.put("model_ref", f"{name or '?'}:{flavor or '?'}", nev or fev)
    if module is not None or config is not None:
        s.put("model_ref", f"{module or '?'}:{config or '?'}", mev2 or cfev)
    for key, why in (("parallelism.enable_async_tensor_parallel", "async tensor parallelism"),
                     ("compile.enable_async_tensor_parallel", "async tensor parallelism")):
        v, ev = get(key)
        if v in (True, "true", "True"):
            s.ignored.append(f"{key}: {why} ({ev})")
    cfg, cev2 = get("job.config_file")
    if cfg is not None:
        s.extra = (s.extra or {}) | {"config_file": (str(cfg), cev2)}
    del where


def _torchtitan_finish(v: dict[str, tuple[Any, str]], ignored: list[str]) -> None:
    """Derived torchtitan fields: micro-batch, dp, ZeRO stage, vpp, sequence parallel."""
    pp = v.get("pp", (1, ""))[0]
    tp = v.get("tp", (1, ""))[0]
    local = v.pop("_tt_local_batch", None)
    if local is not None:
        v["local_batch"] = local
    pmb = v.pop("_tt_pp_microbatch", None)
    if pp > 1:
        mbs = pmb if pmb is not None else (1, "torchtitan default pipeline_parallel_microbatch_size 1")
        v["micro_batch_size"] = mbs
    elif local is not None:
        v["micro_batch_size"] = local
    shard = v.pop("_tt_shard", None)
    rep = v.get("dp_replicate", (1, ""))[0]
    reshard = v.pop("_tt_reshard", ("default", ""))
    world = v.get("world_size", (None, ""))[0]
    shard_value = shard[0] if shard is not None else -1
    if shard_value == -1 and world is not None:
        rest = rep * v.get("cp", (1, ""))[0] * tp * pp
        if world % rest:
            raise InputError(f"torchtitan: world size {world} is not divisible by dp_replicate({rep}) * cp * tp({tp}) "
                             f"* pp({pp}) = {rest}; data_parallel_shard_degree -1 cannot resolve")
        shard_value = world // rest
    if shard_value != -1:
        if "dp_shard" in v or shard is not None:
            v["dp"] = (rep * shard_value, shard[1] if shard else "")
    ev = shard[1] if shard else "torchtitan default data_parallel_shard_degree -1"
    if shard_value == 1:
        v["zero_stage"] = (0, ev)
    else:
        v["zero_stage"] = (2 if str(reshard[0]) == "never" else 3, ev if reshard[1] == "" else f"{ev}; {reshard[1]}")
    sched = v.pop("_tt_schedule", None)
    if pp > 1 and "layers_per_virtual_stage" not in v:
        name = sched[0] if sched else "1f1b"
        v["vpp"] = (1 if name in _TT_SINGLE_STAGE else 2, sched[1] if sched else "torchtitan default schedule 1F1B")
    if "sequence_parallel" not in v:
        v["sequence_parallel"] = (tp > 1, "")
    elif tp == 1:
        v["sequence_parallel"] = (False, v["sequence_parallel"][1])
    del ignored


# ---------------------------------------------------------------------------------------------------
# Megatron-Bridge


_BRIDGE_SECTIONS = {"model_config": "model", "train_config": "train", "ddp_config": "ddp", "dist_config": "dist",
                    "optimizer_config": "optimizer", "mixed_precision_config": "mixed_precision",
                    "dataset_config": "dataset"}
_BRIDGE_INT = {"model.tensor_model_parallel_size": "tp", "model.pipeline_model_parallel_size": "pp",
               "model.virtual_pipeline_model_parallel_size": "vpp", "model.context_parallel_size": "cp",
               "model.expert_model_parallel_size": "ep", "model.expert_tensor_parallel_size": "etp",
               "model.num_layers": "num_layers", "model.hidden_size": "hidden_size",
               "model.num_attention_heads": "num_attention_heads", "model.num_moe_experts": "num_experts",
               "model.seq_length": "seq_len", "dataset.sequence_length": "seq_len",
               "model.num_layers_in_first_pipeline_stage": "first_stage_layers",
               "model.num_layers_in_last_pipeline_stage": "last_stage_layers",
               "train.micro_batch_size": "micro_batch_size", "train.global_batch_size": "global_batch"}


def _bridge_keys(data: Any, path: Path, lines: list[str]) -> dict[str, tuple[Any, str]]:
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


def _bridge_settings(keys: dict[str, tuple[Any, str]], s: _Settings) -> None:
    for key, field in _BRIDGE_INT.items():
        value, ev = keys.get(key, (None, None))
        if value is None:
            continue
        v = _int(value, key, ev, minimum=0 if field in ("first_stage_layers", "last_stage_layers") else 1)
        if field in s.values and s.values[field][0] != v:
            raise InputError(f"contradictory {field}: {v} ({ev}) vs {s.values[field][0]} ({s.values[field][1]})")
        s.put(field, v, ev)
    sp, ev = keys.get("model.sequence_parallel", (None, None))
    if sp is not None:
        s.put("sequence_parallel", bool(sp), ev)
    rg, ev = keys.get("model.recompute_granularity", (None, None))
    if rg is not None:
        if rg not in ("full", "selective"):
            raise InputError(f"{ev}: model.recompute_granularity must be full, selective or null, got {rg!r}")
        s.put("recompute", rg, ev)
    layout, ev = keys.get("model.pipeline_model_parallel_layout", (None, None))
    if layout is not None:
        s.put("pp_layout", str(layout), ev)
    fsdp = next(((k, keys[k]) for k in ("ddp.use_megatron_fsdp", "dist.use_megatron_fsdp", "dist.use_torch_fsdp2")
                 if keys.get(k, (None,))[0] is True), None)
    if fsdp is not None:
        strategy, sev = keys.get("ddp.data_parallel_sharding_strategy", (None, None))
        stages = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
        stage = stages.get(strategy or "optim_grads_params")
        if stage is None:
            raise InputError(f"{sev}: ddp.data_parallel_sharding_strategy must be no_shard, optim, optim_grads or "
                             f"optim_grads_params, got {strategy!r}")
        s.put("zero_stage", stage, fsdp[1][1] + (f"; {sev}" if sev else ""))
    else:
        for k in ("ddp.use_distributed_optimizer", "optimizer.use_distributed_optimizer"):
            v, ev = keys.get(k, (None, None))
            if v is not None:
                s.put("zero_stage", 1 if v else 0, ev)
                if v:
                    break
    mp, ev = keys.get("mixed_precision.fp8", (None, None))
    mfp8, mev = keys.get("model.fp8", (None, None))
    recipe, rev = keys.get("mixed_precision", (None, None))
    if mp or mfp8:
        s.put("precision", "fp8", ev if mp else mev)
    elif isinstance(recipe, str):
        s.put("precision", "fp8" if "fp8" in recipe else "bf16", rev)
    elif keys.get("mixed_precision.bf16", (None,))[0] is True:
        s.put("precision", "bf16", keys["mixed_precision.bf16"][1])
    if keys.get("dist.use_tp_pp_dp_mapping", (None,))[0] is True:
        s.put("rank_order", "tp-cp-ep-pp-dp", keys["dist.use_tp_pp_dp_mapping"][1])
    for key, why in (("comm_overlap.tp_comm_overlap", "overlaps TP communication with GEMMs"),
                     ("ddp.overlap_grad_reduce", "overlaps the gradient reduce with backward"),
                     ("ddp.overlap_param_gather", "overlaps the parameter all-gather with forward"),
                     ("model.cpu_offloading", "activation/weight offload to CPU")):
        v, ev = keys.get(key, (None, None))
        if v is True:
            s.ignored.append(f"{key}: {why} ({ev})")


def _hydra_overrides(words: list[Word]) -> tuple[dict[str, tuple[Any, str]], str | None]:
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
            _word_check(w, m.group(1))
            try:
                value = yaml.safe_load(m.group(2)) if m.group(2) else None
            except yaml.YAMLError:
                value = m.group(2)
            section, _, rest = m.group(1).partition(".")
            keys[f"{_BRIDGE_SECTIONS.get(section, section)}.{rest}" if rest else section] = (value, w.evidence)
        i += 1
    return keys, config_file


# ---------------------------------------------------------------------------------------------------
# DeepSpeed


def _deepspeed_json(path: Path, s: _Settings) -> None:
    text = read_text(path, "DeepSpeed config", "expected a JSON file")
    data = parse_json(text, path, "expected a DeepSpeed config object", lambda err: (
        f"{path}:{err.lineno}: not valid JSON ({err.msg}); expected a DeepSpeed config object"))
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object with DeepSpeed keys (train_batch_size, zero_optimization...)")
    lines = text.splitlines()

    def ev(key: str) -> str:
        for n, line in enumerate(lines, 1):
            if f'"{key}"' in line:
                return f"{path}:{n}: {line.strip()}"
        return f"{path}: {key}"

    auto = {}
    for key, field in (("train_batch_size", "global_batch"), ("train_micro_batch_size_per_gpu", "micro_batch_size"),
                       ("gradient_accumulation_steps", "_ds_gas"), ("sequence_parallel_size", "cp")):
        if data.get(key) == "auto":  # HF Trainer fills it from TrainingArguments (integrations/deepspeed.py)
            auto[field] = (key, ev(key))
            continue
        if key in data:
            s.put(field, _int(data[key], key, ev(key), minimum=1), ev(key))
    zero = data.get("zero_optimization")
    if isinstance(zero, dict) and "stage" in zero:
        stage = _int(zero["stage"], "zero_optimization.stage", ev("stage"))
        if stage > 3:
            raise InputError(f"{ev('stage')}: zero_optimization.stage must be 0..3, got {stage}")
        s.put("zero_stage", stage, ev("stage"))
        for key in ("offload_param", "offload_optimizer"):
            dev = zero.get(key)
            if isinstance(dev, dict) and dev.get("device") not in (None, "none"):
                s.ignored.append(f"zero_optimization.{key} to {dev.get('device')} ({ev(key)})")
        if int(zero.get("zero_hpz_partition_size", 1) or 1) > 1:
            hpz = ev("zero_hpz_partition_size")
            s.ignored.append(f"zero_hpz_partition_size (ZeRO++ hierarchical partitioning) ({hpz})")
    tpc = data.get("tensor_parallel")
    if isinstance(tpc, dict) and "autotp_size" in tpc:
        s.put("tp", _int(tpc["autotp_size"], "tensor_parallel.autotp_size", ev("autotp_size")), ev("autotp_size"))
    for key in ("bf16", "fp16"):
        sec = data.get(key)
        if isinstance(sec, dict) and sec.get("enabled") == "auto":
            auto[f"_precision_{key}"] = (key, ev(key))
        elif isinstance(sec, dict) and sec.get("enabled") in (True, "true"):
            s.put("precision", "bf16", ev(key))
            if key == "fp16":
                s.ignored.append(f"fp16: FP16 mixed precision, priced as bf16 ({ev(key)})")
    if auto:
        s.extra = (s.extra or {}) | {"hf_auto": auto}


TOPOLOGY_AXES = {"model": "tp", "context": "cp", "data": "dp", "pipe": "pp"}
"""DeepSpeed `ProcessTopology` axis names -> placement axes (runtime/pipe/topology.py; "context" is the axis
placement's emitter adds for cp > 1)."""
TOPOLOGY_CLASSES = {
    # class -> (axes outermost first, constructor parameter of each axis), DeepSpeed 0.19.8 topology.py
    "PipeModelDataParallelTopology": (("pipe", "data", "model"), ("num_pp", "num_dp", "num_mp")),
    "PipeDataParallelTopology": (("pipe", "data"), ("num_pp", "num_dp")),
}
RANK_ORDERS = {("pipe", "data", "model"): "tp-cp-ep-dp-pp", ("pipe", "data", "context", "model"): "tp-cp-ep-dp-pp",
               ("data", "pipe", "model"): "tp-cp-ep-pp-dp", ("data", "pipe", "context", "model"): "tp-cp-ep-pp-dp",
               ("pipe", "data"): "tp-cp-ep-dp-pp", ("data", "pipe"): "tp-cp-ep-pp-dp"}
"""Axis orders (outermost first; ProcessTopology is row-major) whose rank order placement prices; a missing axis
has size 1."""


def _literal(node: ast.expr, what: str, where: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise InputError(f"{where}: {what} is {ast.unparse(node)[:80]!r}, not a literal; the audit reads a "
                         f"DeepSpeed topology's numbers only when they are written out: leave this file out and "
                         f"pass the launch script whose arguments set them (Megatron-DeepSpeed "
                         f"--tensor-model-parallel-size / --pipeline-model-parallel-size)") from None


def _call_name(node: ast.AST) -> str | None:
    """The called name of `f(...)` or `mod.f(...)`; None for anything else."""
    f = node.func if isinstance(node, ast.Call) else None
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _topology_call(call: ast.Call, name: str, path: Path, lines: list[str]) -> dict[str, tuple[int, str]]:
    """{placement axis: (size, evidence)} of one topology constructor call, plus "_order" (its rank order)."""
    where = f"{path}:{call.lineno}"
    evidence = f"{where}: {lines[call.lineno - 1].strip()[:160]}"
    axes, params = TOPOLOGY_CLASSES.get(name, (None, ("axes", "dims")))
    given = dict(zip(params, call.args, strict=False)) | {k.arg: k.value for k in call.keywords if k.arg}
    if set(given) != set(params):
        raise InputError(f"{evidence}: {name} takes {', '.join(params)}; DeepSpeed rejects the call")
    if axes is None:  # ProcessTopology(axes, dims)
        axes, dims = _literal(given["axes"], "axes", where), _literal(given["dims"], "dims", where)
    else:
        dims = [_literal(given[p], p, where) for p in params]
    if (not isinstance(axes, (list, tuple)) or not isinstance(dims, (list, tuple)) or len(axes) != len(dims)
            or not all(isinstance(a, str) for a in axes) or len(set(axes)) != len(axes)):
        raise InputError(f"{evidence}: axes and dims must be lists of the same length, axis names unique")
    unknown = [a for a in axes if a not in TOPOLOGY_AXES]
    if unknown:
        raise InputError(f"{evidence}: axis {unknown[0]!r} is not one DeepSpeed's grid or placement knows "
                         f"({', '.join(TOPOLOGY_AXES)})")
    out: dict[str, Any] = {}
    for axis, dim in zip(axes, dims, strict=True):
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise InputError(f"{evidence}: the {axis} dimension must be a whole number >= 1, got {dim!r}")
        out[TOPOLOGY_AXES[axis]] = (dim, evidence)
    order = tuple(a for a in axes if out[TOPOLOGY_AXES[a]][0] > 1 or a in ("pipe", "data", "model"))
    if order not in RANK_ORDERS:
        raise InputError(f"{evidence}: axes {list(axes)} (outermost first) give a rank order placement does not "
                         f"price; use ['pipe', 'data', 'model'] (tp innermost) or ['data', 'pipe', 'model']")
    out["_order"] = (RANK_ORDERS[order], evidence)
    return out


def _deepspeed_python(path: Path, s: _Settings) -> None:
    """TP, CP, DP and PP from the DeepSpeed topology a Python file builds (parsed, never run)."""
    text = read_text(path, "DeepSpeed training script", "expected Python code that builds a DeepSpeed topology")
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as err:
        raise InputError(f"{path}:{err.lineno}: not valid Python ({err.msg}); expected the training script or "
                         f"ds_topology.py") from None
    except (ValueError, RecursionError, MemoryError) as err:
        raise InputError(f"{path}: cannot be parsed as Python ({type(err).__name__}); expected the training script "
                         f"or ds_topology.py") from None
    lines = text.splitlines()
    for node in tree.body:  # `sequence_parallel = True`, as ds_topology.py states it for the TP model code
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.lower() == "sequence_parallel"):
            value = _literal(node.value, "sequence_parallel", f"{path}:{node.lineno}")
            if not isinstance(value, bool):
                raise InputError(f"{path}:{node.lineno}: sequence_parallel must be True or False, got {value!r}")
            s.put("sequence_parallel", value, f"{path}:{node.lineno}: {lines[node.lineno - 1].strip()[:160]}")
    calls = [(node, _call_name(node)) for node in ast.walk(tree) if isinstance(node, ast.Call)]
    found: list[dict[str, tuple[Any, str]]] = [_topology_call(node, name, path, lines) for node, name in calls
                                               if name in TOPOLOGY_CLASSES or name == "ProcessTopology"]
    for node, name in calls if not found else ():  # PipelineModule(layers, num_stages=N): PipeDataParallel(N, .)
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        stages = kw.get("num_stages", node.args[1] if len(node.args) > 1 else None)
        if name == "PipelineModule" and stages is not None and "topology" not in kw:
            where = f"{path}:{node.lineno}"
            ev = f"{where}: {lines[node.lineno - 1].strip()[:160]}"
            pp = _literal(stages, "num_stages", where)
            if isinstance(pp, bool) or not isinstance(pp, int) or pp < 1:
                raise InputError(f"{ev}: num_stages must be a whole number >= 1, got {pp!r}")
            found.append({"pp": (pp, ev), "tp": (1, ev), "_order": ("tp-cp-ep-dp-pp", ev)})
    if not found:
        raise InputError(f"{path}: no PipeModelDataParallelTopology, PipeDataParallelTopology, ProcessTopology or "
                         f"PipelineModule(num_stages=...) call; a Python file is read for the DeepSpeed topology it "
                         f"builds, and this one builds none")
    first = found[0]
    for other in found[1:]:
        if {k: v for k, (v, _) in other.items()} != {k: v for k, (v, _) in first.items()}:
            raise InputError(f"{path}: two different topologies ({first['_order'][1]}; {other['_order'][1]}); "
                             f"the audit cannot tell which one the job uses")
    for axis in ("tp", "cp", "pp", "dp"):
        if axis in first or axis != "dp":  # num_stages alone leaves dp to the world size
            s.put(axis, *first.get(axis, (1, first["_order"][1])))
    s.put("rank_order", first["_order"][0], first["_order"][1])


NEOX_KEYS = {"pipe_parallel_size": "pp", "model_parallel_size": "tp", "train_micro_batch_size_per_gpu":
             "micro_batch_size", "gradient_accumulation_steps": "_ds_gas", "train_batch_size": "global_batch",
             "seq_length": "seq_len", "num_layers": "num_layers", "hidden_size": "hidden_size",
             "num_attention_heads": "num_attention_heads"}
"""GPT-NeoX argument (its YAML spells them with - or _, NeoXArgs reads both) -> LaunchLayout field."""


def _is_neox(data: Any) -> bool:
    return isinstance(data, dict) and any(str(k).replace("-", "_") in ("pipe_parallel_size", "model_parallel_size")
                                          for k in data)


def _neox_yaml(path: Path, data: dict, lines: list[str], s: _Settings) -> None:
    """A GPT-NeoX config (EleutherAI/gpt-neox configs/*.yml; DeepSpeed runs it): TP, PP, micro-batch,
    accumulation, ZeRO stage, activation checkpointing, precision and the model's dimensions."""
    keys = {str(k).replace("-", "_"): (k, v) for k, v in data.items()}

    def ev(key: str) -> str:
        raw = str(keys[key][0])
        for n, line in enumerate(lines, 1):
            if re.search(rf"[\"']?{re.escape(raw)}[\"']?\s*:", line):
                return f"{path}:{n}: {line.strip()[:160]}"
        return f"{path}: {raw}"

    for key, field in NEOX_KEYS.items():
        if key in keys:
            s.put(field, _int(keys[key][1], key, ev(key), minimum=1), ev(key))
    zero = keys.get("zero_optimization", (None, None))[1]
    if isinstance(zero, dict) and "stage" in zero:
        stage = _int(zero["stage"], "zero_optimization.stage", ev("zero_optimization"))
        if not 0 <= stage <= 3:
            raise InputError(f"{ev('zero_optimization')}: zero_optimization.stage must be 0..3, got {stage}")
        s.put("zero_stage", stage, ev("zero_optimization"))
    if "checkpoint_activations" in keys:
        s.put("recompute", "full" if keys["checkpoint_activations"][1] is True else "none",
              ev("checkpoint_activations"))
    if "sequence_parallel" in keys:
        s.put("sequence_parallel", keys["sequence_parallel"][1] is True, ev("sequence_parallel"))
    for key in ("fp16", "bf16"):
        sec = keys.get(key, (None, None))[1]
        if isinstance(sec, dict) and sec.get("enabled", True) in (True, "true"):
            s.put("precision", "bf16", ev(key))
            if key == "fp16":
                s.ignored.append(f"fp16: FP16 mixed precision with loss scaling, priced as bf16 ({ev(key)})")
    if "precision" in keys and str(keys["precision"][1]) in ("fp16", "bfloat16", "bf16"):
        s.put("precision", "bf16", ev("precision"))
    for key in ("synchronize_each_layer", "partition_activations", "cpu_offload"):
        if keys.get(key, (None, None))[1] is True:
            s.ignored.append(f"{key}: true ({ev(key)})")
    if not s.values:
        raise InputError(f"{path}: a GPT-NeoX config without pipe_parallel_size, model_parallel_size or batch keys; "
                         f"nothing to audit")


def _hostfile(path: Path, s: _Settings) -> None:
    """DeepSpeed 0.19.8 `launcher/runner.py::_parse_hostfile`: `^(\\S+)\\s+slots=(\\d+)`, `#` comments and blank
    lines skipped, a duplicate host or any other line is an error; rank order = line order."""
    text = read_text(path, "hostfile", "expected lines of `hostname slots=N`")
    hosts: dict[str, int] = {}
    first_ev = ""
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        m = re.search(r"^(\S+)\s+slots=(\d+)", stripped)
        if not m:
            raise InputError(f"{path}:{n}: {stripped!r} is not `hostname slots=N`; DeepSpeed rejects the hostfile")
        if stripped[m.end():][:1] not in ("", " ", "\t"):  # DeepSpeed's search would read `slots=8.5` as 8
            raise InputError(f"{path}:{n}: {stripped!r}: the slot count is not a whole number (DeepSpeed would read "
                             f"slots={m.group(2)} from it); write slots=N with N the host's GPUs")
        if m.group(1) in hosts:
            raise InputError(f"{path}:{n}: host {m.group(1)} is listed twice; DeepSpeed rejects duplicate hosts")
        if int(m.group(2)) < 1:
            raise InputError(f"{path}:{n}: host {m.group(1)} has slots={m.group(2)}; a host runs at least one "
                             f"process (DeepSpeed gives each slot a GPU): give slots=N with N its GPUs")
        hosts[m.group(1)] = int(m.group(2))
        first_ev = first_ev or f"{path}:{n}: {stripped}"
    if not hosts:
        raise InputError(f"{path}: no `hostname slots=N` line; DeepSpeed rejects an empty hostfile")
    s.extra = (s.extra or {}) | {"hosts": (hosts, first_ev)}


def _looks_like_hostfile(text: str) -> bool:
    lines = [x.strip() for x in text.splitlines() if x.strip() and not x.strip().startswith("#")]
    # one `host slots=N` line makes it a hostfile (a bad line among them is then reported by _hostfile)
    return any(re.search(r"^(\S+)\s+slots=", x) for x in lines) and not any(
        re.search(r"torchrun|python|deepspeed|--\w", x) for x in lines)


# ---------------------------------------------------------------------------------------------------
# Detection and the public entry points


MEGATRON_LOG_BEGIN = "------------------------ arguments ------------------------"
MEGATRON_LOG_END = "-------------------- end of arguments ---------------------"
"""The block Megatron-LM prints at start-up (megatron/training/arguments.py `_print_args`): every argument as
`  name ........ value`, sorted; the most exact record of what a running job parsed."""
_LOG_LINE = re.compile(r"^\s*([a-z_][a-z0-9_]*) \.+ (.*)$")
_LOG_FLAGS = {"fp8": "--fp8-format", "data_parallel_size": None, "world_size": None}
"""Printed names whose flag is not `--` + the name with dashes (None: read directly, not as a flag)."""
_LOG_DEFAULTS = {"num_distributed_optimizer_instances": "1"}
"""Printed values that are Megatron's defaults of a flag the reader would otherwise note as set."""


def _megatron_log(path: Path, s: _Settings) -> None:
    """A training log's argument block, turned back into the flags that set it, each with its log line."""
    text = read_text(path, "Megatron-LM log", "expected a log with Megatron's printed arguments block")
    lines = text.splitlines()
    try:
        start = lines.index(MEGATRON_LOG_BEGIN) + 1
        end = lines.index(MEGATRON_LOG_END, start)
    except ValueError:
        raise InputError(f"{path}: no complete Megatron arguments block ({MEGATRON_LOG_BEGIN!r} ... "
                         f"{MEGATRON_LOG_END!r}); expected a Megatron-LM training log") from None
    words: list[Word] = []
    for n in range(start, end):
        m = _LOG_LINE.match(lines[n])
        if not m:
            continue
        name, value = m.group(1), m.group(2).strip()
        org = Origin(str(path), n + 1, lines[n].strip())
        if name in ("data_parallel_size", "world_size") and value.isdigit():
            s.put("dp" if name == "data_parallel_size" else "world_size", int(value), str(org))
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
    _megatron_args(words, s)


def _kind(path: Path) -> str:
    """toml | json | yaml | python | hostfile | megatron-log | script."""
    suffix = path.suffix.lower()
    if suffix == ".py":
        return "python"
    if suffix == ".toml":
        return "toml"
    if suffix == ".json":
        return "json"
    if suffix in (".yaml", ".yml"):
        return "yaml"
    text = read_text(path, "launch file", "expected a launch script, config or hostfile")
    if _looks_like_hostfile(text):
        return "hostfile"
    if MEGATRON_LOG_BEGIN in text:
        return "megatron-log"
    return "script"


def _maxtext_yaml(path: Path) -> bool:
    text = read_text(path, "YAML config", "expected a YAML file")
    return bool(re.search(r"^\s*(base_config|per_device_batch_size|(ici|dcn)_\w+_parallelism)\s*:", text, re.M))


def _script_framework(path: Path) -> str | None:
    text = read_text(path, "launch script", "expected a shell script or an argument list")
    if re.search(r"\b(maxtext|MaxText)[./]\S*train\b", text):
        return "maxtext"
    if re.search(r"torchtitan\.train|--parallelism\.|--job\.config_file|activation-checkpoint:|--model\.flavor", text):
        return "torchtitan"
    if re.search(r"--deepspeed_config|--deepspeed-config|\bdeepspeed(\.pt)?\s", text):
        return "megatron-deepspeed"
    if re.search(r"--tensor-model-parallel-size|--pipeline-model-parallel-size|--micro-batch-size|--num-layers\b|"
                 r"pretrain_gpt|--model-parallel-size|\bmodel\.tensor_model_parallel_size=|"
                 r"\btrain\.global_batch_size=", text):
        return "megatron"
    return None


def detect_framework(paths: list[Path]) -> str:
    """The framework the files belong to; an InputError names the files when it cannot be told."""
    votes: dict[str, list[str]] = {}
    for p in paths:
        kind = _kind(p)
        fw = {"toml": "torchtitan", "json": "deepspeed", "hostfile": "deepspeed", "yaml": "megatron",
              "python": "deepspeed", "megatron-log": "megatron"}.get(kind)
        if kind == "script":
            fw = _script_framework(p)
        elif kind == "yaml" and _maxtext_yaml(p):
            fw = "maxtext"
        elif kind == "yaml" and re.search(r"^[\s{]*[\"']?(pipe|model)[-_]parallel[-_]size[\"']?\s*:",
                                          read_text(p, "YAML config", "expected YAML"), re.M):
            fw = "deepspeed"  # GPT-NeoX: Megatron layers on DeepSpeed's pipeline engine
        elif kind == "python" and re.search(r"^HOSTS\s*=", read_text(p, "Python file", "expected Python"), re.M):
            fw = "maxtext"
        if fw is not None:
            votes.setdefault(fw, []).append(str(p))
    if "megatron-deepspeed" in votes:
        target = "deepspeed" if "deepspeed" in votes else "megatron"
        votes.setdefault(target, []).extend(votes.pop("megatron-deepspeed"))
    if "deepspeed" in votes and "megatron" in votes and not any(_kind(Path(p)) == "yaml" for p in votes["megatron"]):
        votes["deepspeed"] += votes.pop("megatron")
    names = ", ".join(str(p) for p in paths)
    if len(votes) == 1:
        return next(iter(votes))
    if not votes:
        raise InputError(f"cannot tell the framework of {names}: no Megatron flags, torchtitan flags or TOML, "
                         f"DeepSpeed JSON/hostfile or MaxText config found; pass --framework "
                         f"megatron|torchtitan|deepspeed|maxtext")
    seen = "; ".join(f"{fw}: {', '.join(ps)}" for fw, ps in sorted(votes.items()))
    raise InputError(f"the files look like more than one framework ({seen}); pass the files of one job, or "
                     f"--framework megatron|torchtitan|deepspeed|maxtext")


def parse_launch(paths: list[Path], framework: str | None = None) -> LaunchLayout:
    """The layout `paths` state, read as `framework` (detected when None)."""
    if not paths:
        raise InputError("no launch files given; pass the job's launch script or config files")
    fw = framework or detect_framework(paths)
    if fw not in FRAMEWORKS:
        raise InputError(f"unknown framework {fw!r}; expected one of megatron, torchtitan, deepspeed, maxtext")
    groups = [_read_file(Path(p), fw) for p in paths]
    if fw == "torchtitan":
        groups = _torchtitan_merge(groups, paths)
    values, ignored = _merge(groups)
    extra: dict[str, Any] = {}
    for g in groups:
        extra |= g.extra or {}
    if fw == "deepspeed":
        _deepspeed_finish(values, ignored, extra)
    if fw == "maxtext":
        from placement.audit import maxtext

        config = extra.get("config_file")
        read_yaml = any(_kind(Path(p)) == "yaml" for p in paths)
        if config is not None and not read_yaml and Path(config[0]).name != "base.yml":
            raise InputError(f"the MaxText command trains with config {config[0]}, which is not among the audited "
                             f"files; pass it too (--launch {config[0]}): without it the audit would price base.yml "
                             f"defaults for every key the command line leaves out")
        values = {k: v for k, v in values.items() if k == "hosts"} | maxtext.finish(
            {k: v for k, v in values.items() if k != "hosts"}, ignored)
    if fw == "torchtitan":
        _torchtitan_finish(values, ignored)
    if fw in ("megatron", "deepspeed"):
        _megatron_finish(values, ignored)
    return _build(fw, values, ignored)


def _read_file(path: Path, fw: str) -> _Settings:
    s = _Settings(str(path), {}, [])
    kind = _kind(path)
    if fw == "maxtext":
        return _maxtext_file(path, kind, s)
    if kind == "toml":
        if fw != "torchtitan":
            raise InputError(f"{path}: a TOML file is a torchtitan config; this audit reads {fw}")
        s.extra = {"toml_keys": _torchtitan_toml(path)}
        return s
    if kind == "json":
        if fw != "deepspeed":
            raise InputError(f"{path}: a JSON file is read as a DeepSpeed config; pass --framework deepspeed")
        _deepspeed_json(path, s)
        return s
    if kind == "hostfile":
        _hostfile(path, s)
        return s
    if kind == "megatron-log":
        if fw not in ("megatron", "deepspeed"):
            raise InputError(f"{path}: a Megatron-LM log; pass --framework megatron")
        _megatron_log(path, s)
        return s
    if kind == "python":
        if fw != "deepspeed":
            raise InputError(f"{path}: a Python file is read for the DeepSpeed topology it builds; pass "
                             f"--framework deepspeed, or the {fw} launch script instead")
        _deepspeed_python(path, s)
        return s
    if kind == "yaml":
        text = read_text(path, "YAML config", "expected a Megatron-Bridge, GPT-NeoX or MaxText YAML config")
        data = parse_yaml(text, path, "YAML config")
        if _is_neox(data):
            if fw != "deepspeed":
                raise InputError(f"{path}: a GPT-NeoX config (DeepSpeed runs it); pass --framework deepspeed")
            _neox_yaml(path, data, text.splitlines(), s)
            return s
        if fw != "megatron":
            raise InputError(f"{path}: a YAML file is read as a Megatron-Bridge ConfigContainer; pass --framework "
                             f"megatron")
        _bridge_settings(_bridge_keys(data, path, text.splitlines()), s)
        if not s.values:
            raise InputError(f"{path}: no layout or batch field read (expected a Megatron-Bridge ConfigContainer with "
                             f"model.tensor_model_parallel_size, train.global_batch_size..., a GPT-NeoX config with "
                             f"pipe_parallel_size/model_parallel_size, or a MaxText config)")
        return s
    # a script or an argument list
    launches = _launch_commands(path)
    if launches:
        launch = launches[0]
        _launcher_settings(launch, s)
        args = launch.args
    else:
        args = [w for c in read_commands(path) for w in c.words]
        if not args or (not args[0].text.startswith(("-", "activation")) and "=" not in args[0].text):
            raise InputError(f"{path}: no launch command (torchrun, deepspeed, python ... .py) and not an argument "
                             f"list; expected a launch script or a file of --flag value arguments")
    if fw == "torchtitan":
        s.extra = (s.extra or {}) | {"cli_keys": _torchtitan_flags(args, s)}
        s.override = True
    elif any(re.fullmatch(r"\+{0,2}[A-Za-z_][\w]*\.[\w.]+=.*", w.text, re.S) for w in args):
        keys, config_file = _hydra_overrides(args)
        _bridge_settings(keys, s)
        _megatron_args([w for w in args if w.text.startswith("--") and w.text != "--config-file"], s)
        s.override = True
        if config_file:
            s.extra = (s.extra or {}) | {"config_file": (config_file, "")}
    else:
        _megatron_args(args, s)
    return s


def _maxtext_file(path: Path, kind: str, s: _Settings) -> _Settings:
    """A MaxText config (its keys), a launch script (the train command's key=value overrides, which win), or
    jax_mesh.py (the process order)."""
    from placement.audit import maxtext

    if kind == "yaml":
        s.values.update(maxtext.yaml_keys(path))
        return s
    if kind == "python":
        hosts, ev = maxtext.mesh_hosts(path)
        s.put("hosts", hosts, ev)
        return s
    if kind != "script":
        raise InputError(f"{path}: a {kind} file is not MaxText launch material (its config YAML, a launch script "
                         f"or jax_mesh.py)")
    found = [k for k in (maxtext.command_keys(list(c.words)) for c in read_commands(path)) if k is not None]
    if not found:
        raise InputError(f"{path}: no MaxText train command (python3 -m maxtext.trainers.pre_train.train CONFIG "
                         f"key=value ...); expected a MaxText launch script")
    keys, config = found[0]
    s.values.update(keys)
    s.override = True
    if config:
        s.extra = {"config_file": (config, "")}
    return s


def _torchtitan_merge(groups: list[_Settings], paths: list[Path]) -> list[_Settings]:
    """TOML keys first, then CLI flags on top (torchtitan's precedence)."""
    merged: dict[str, tuple[Any, str]] = {}
    for g in groups:
        merged |= (g.extra or {}).get("toml_keys", {})
    for g in groups:
        merged |= (g.extra or {}).get("cli_keys", {})
    out = _Settings(", ".join(str(p) for p in paths), {}, [])
    _torchtitan_settings(merged, out, out.path)
    for g in groups:  # launcher facts (world size) stay with their file
        for k in ("world_size", "gpus_per_node"):
            if k in g.values:
                out.values[k] = g.values[k]
        out.ignored += g.ignored
    cfg = (out.extra or {}).get("config_file")
    if cfg and not any(Path(cfg[0]).name == Path(p).name for p in paths):
        out.ignored.append(f"--job.config_file {cfg[0]} is not among the audited files: its settings are not read "
                           f"({cfg[1]})")
    return [out]


def _merge(groups: list[_Settings]) -> tuple[dict[str, tuple[Any, str]], list[str]]:
    values: dict[str, tuple[Any, str]] = {}
    ignored: list[str] = []
    for g in sorted(groups, key=lambda g: g.override):
        for k, (v, ev) in g.values.items():
            if k in values and values[k][0] != v and not g.override:
                raise InputError(f"contradictory values for {k}: {values[k][0]} ({values[k][1]}) and {v} ({ev}); "
                                 f"make the files agree")
            values[k] = (v, ev)
        ignored += [x for x in g.ignored if x not in ignored]
    return values, ignored


HF_DEFAULTS = {"micro_batch_size": ("per_device_train_batch_size", 8), "_ds_gas": ("gradient_accumulation_steps", 1)}
"""transformers TrainingArguments defaults the HF Trainer puts in a DeepSpeed config's "auto"."""


def _deepspeed_finish(v: dict[str, tuple[Any, str]], ignored: list[str], extra: dict[str, Any]) -> None:
    hosts = extra.get("hosts")
    nodes = extra.get("--num-nodes")
    gpus = extra.get("--num-gpus")
    if hosts is not None:
        pool, ev = hosts
        names = list(pool)
        slots = [pool[h] for h in names]
        # DeepSpeed 0.19.8 runner.apply_num_nodes_and_gpus: the first num_nodes hosts, num_gpus slots each
        if nodes is not None:
            k = _int(nodes[0], "--num_nodes", nodes[1])
            names, slots = names[:k], slots[:k]
        if gpus is not None:
            g = _int(gpus[0], "--num_gpus", gpus[1])
            slots = [g] * len(names)
        v["hosts"] = (tuple(names), ev)
        v["world_size"] = (sum(slots), ev)
        if len(set(slots)) == 1:
            v["gpus_per_node"] = (slots[0], ev)
        else:
            ignored.append(f"hostfile slots differ per host ({dict(zip(names, slots, strict=True))}): no single "
                           f"gpus_per_node")
    elif gpus is not None:
        g = _int(gpus[0], "--num_gpus", gpus[1])
        n = _int(nodes[0], "--num_nodes", nodes[1]) if nodes is not None else 1
        v["gpus_per_node"] = (g, gpus[1])
        v["world_size"] = (n * g, gpus[1] if nodes is None else f"{nodes[1]}; {gpus[1]}")
    cfg = extra.get("deepspeed_config")
    if cfg is not None and "global_batch" not in v and "micro_batch_size" not in v and "zero_stage" not in v:
        ignored.append(f"--deepspeed_config {cfg[0]}: the DeepSpeed JSON is not among the audited files ({cfg[1]})")
    for field, (key, where) in extra.get("hf_auto", {}).items():
        # HF Trainer fills "auto" from TrainingArguments: the launch command's flag, else its default
        # (transformers training_args.py: per_device_train_batch_size 8, gradient_accumulation_steps 1, fp32)
        if field.startswith("_precision_"):
            if "precision" not in v:
                ignored.append(f"{key}.enabled \"auto\" with no --bf16/--fp16 in the launch files: the HF Trainer "
                               f"runs fp32, priced as bf16 ({where})")
            continue
        if field in v:
            value, ev = v[field]
            v[field] = (value, f"{ev} (fills \"auto\" of {key}: {where})")
        elif field in HF_DEFAULTS:
            arg, value = HF_DEFAULTS[field]
            v[field] = (value, f"HF TrainingArguments default {arg} {value} (fills \"auto\" of {key}: {where})")
    # train_batch_size = micro * gas * dp (deepspeed runtime/config.py _batch_assertion); derive what is missing
    world = v.get("world_size", (None,))[0]
    model = v.get("tp", (1,))[0] * v.get("pp", (1,))[0] * v.get("cp", (1,))[0]
    gas = v.pop("_ds_gas", None)
    tbs, mbs = v.get("global_batch"), v.get("micro_batch_size")
    if gas is None and tbs is None and mbs is not None:  # deepspeed runtime/config.py: gas defaults to 1
        gas = (1, "DeepSpeed default gradient_accumulation_steps 1 (the files set no train_batch_size)")
    if gas is not None:
        v["grad_accumulation"] = gas
    if world is not None:
        if world % model:
            raise InputError(f"world size {world} is not divisible by tp * pp * cp = {model}")
        dp = world // model
        if tbs is not None and mbs is None and gas is not None:
            micro, rem = divmod(tbs[0], gas[0] * dp)
            if rem or micro < 1:
                raise InputError(f"train_batch_size {tbs[0]} is not gradient_accumulation_steps {gas[0]} x dp {dp} x "
                                 f"an integer micro-batch ({tbs[1]}; {gas[1]}); DeepSpeed rejects it")
            v["micro_batch_size"] = (micro, f"{tbs[1]}; {gas[1]} (train_batch_size / (gas x dp {dp}))")
        elif tbs is not None and mbs is not None and gas is not None and tbs[0] != mbs[0] * gas[0] * dp:
            raise InputError(f"train_batch_size {tbs[0]} != micro-batch {mbs[0]} x gradient_accumulation_steps "
                             f"{gas[0]} x dp {dp} ({tbs[1]}; {mbs[1]}; {gas[1]}); DeepSpeed rejects it")
    if tbs is None and mbs is not None and gas is not None and world is not None:
        v["global_batch"] = (mbs[0] * gas[0] * (world // model), f"{mbs[1]}; {gas[1]}")


def _megatron_finish(v: dict[str, tuple[Any, str]], ignored: list[str]) -> None:
    layout = v.pop("pp_layout", None)
    pp = v.get("pp", (1,))[0]
    if layout is not None:
        stages = _layout_stages(layout[0], layout[1])
        if len(stages) % pp:
            raise InputError(f"{layout[1]}: the layout has {len(stages)} stages, not a multiple of pp {pp}")
        vpp = len(stages) // pp
        if "vpp" in v and v["vpp"][0] != vpp:
            raise InputError(f"contradictory vpp: {v['vpp'][0]} ({v['vpp'][1]}) but the layout gives {vpp} "
                             f"({layout[1]})")
        v["vpp"] = (vpp, layout[1])
        per_rank = [sum(stages[r + k * pp].count("t") for k in range(vpp)) for r in range(pp)]
        v["first_stage_layers"] = (per_rank[0], layout[1])
        v["last_stage_layers"] = (per_rank[-1], layout[1])
    lps = v.get("layers_per_virtual_stage")
    if lps is not None and "num_layers" in v and pp > 1:
        extra = sum(1 for k in ("recipe.account_for_embedding", "recipe.account_for_loss") if k in v)
        layers = v["num_layers"][0] + extra
        per, rem = divmod(layers, pp)
        if rem or per % lps[0]:
            raise InputError(f"{lps[1]}: --num-layers-per-virtual-pipeline-stage {lps[0]} does not divide "
                             f"{layers} layers / pp {pp}; Megatron rejects it")
        v["vpp"] = (per // lps[0], lps[1])
        del v["layers_per_virtual_stage"]
    tp = v.get("tp", (1,))[0]
    if "sequence_parallel" not in v:
        v["sequence_parallel"] = (False, "")
    elif tp == 1 and v["sequence_parallel"][0]:
        ignored.append(f"sequence parallel with tp 1 is turned off by Megatron ({v['sequence_parallel'][1]})")
        v["sequence_parallel"] = (False, v["sequence_parallel"][1])
    if "recompute" not in v:
        v["recompute"] = ("none", "")
    if "zero_stage" not in v:
        v["zero_stage"] = (0, "")


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


def _build(fw: str, v: dict[str, tuple[Any, str]], ignored: list[str]) -> LaunchLayout:
    recipe = {k.removeprefix("recipe."): val for k, (val, _) in v.items() if k.startswith("recipe.")}
    fields = {k: val for k, (val, _) in v.items() if not k.startswith(("_", "recipe."))}
    fields["recipe"] = recipe
    sources = {k: ev for k, (_, ev) in v.items() if ev and not k.startswith("_")}
    if "hosts" in fields:
        fields["hosts"] = tuple(fields["hosts"])
    try:
        return LaunchLayout(framework=fw, sources=sources, ignored=tuple(ignored), **fields)
    except ValueError as err:  # pydantic ValidationError: a value out of range
        bad = "; ".join(f"{'.'.join(str(x) for x in e['loc'])} = {e.get('input')!r} "
                        f"({sources.get(str(e['loc'][0]), '')}): {e['msg']}"
                        for e in err.errors())  # type: ignore[attr-defined]
        raise InputError(f"launch files state an invalid layout: {bad}") from None
