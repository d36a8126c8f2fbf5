"""MaxText 0.2.5 launch material for `placement audit`: the config YAML (what `--emit maxtext` writes, or a
user's config with `base_config`), `key=value` overrides on the train command of a launch script, and the
`jax_mesh.py` that `--emit maxtext` writes (its HOSTS list is the process order, its CUDA_VISIBLE_DEVICES dict each
host's GPU order).

MaxText's rules, read from its 0.2.5 wheel (reference/frameworks.md §5; the emitter `placement.emit.maxtext`
states the same facts):

* Values: base.yml, then the config file, then `key=value` on the command line (pyconfig); a key the files
  leave out keeps base.yml's value (BASE below, with its base.yml line).
* Mesh: `mesh_axes` outermost first; each axis's size is `ici_<word>_parallelism x dcn_<word>_parallelism`;
  one -1 per list is filled (ICI product = GPUs per host, a slice on GPUs; DCN product = hosts).
  `create_hybrid_device_mesh` gives axis index = dcn index x ici size + ici index; devices are numbered
  process by process (the host order) and by local id inside a host, each part row-major over `mesh_axes`.
* Batch: global = per_device_batch_size x devices x gradient_accumulation_steps; with a pipeline the step's
  batch is cut into num_pipeline_microbatches (-1: the number of stages, twice that with
  pipeline_delay_activation_forwarding, configs/types.py:4587-4591).
* Refusals: a config MaxText's own validation stops (configs/types.py, pyconfig.py, the decoder's remat assert) is
  refused with MaxText's check quoted (`refused`), never priced.
* ZeRO: fsdp > 1 or context > 1 shards the weights, gradients and optimizer state (ZeRO-3; HSDP with data > 1);
  shard_optimizer_over_data shards the optimizer state over data alone (ZeRO-1 where nothing else shards):
  `zero_as_run`, with the MaxText source lines.

placement prices axes data, stage, fsdp, context, tensor and expert; another axis of size > 1 is refused
by name (its parallelism is not one placement models).
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from placement.audit.readers.common import start_refusal
from placement.errors import InputError
from placement.loaders.files import DuplicateKey, parse_yaml, read_text

AXES = ("diloco", "data", "stage", "fsdp", "fsdp_transpose", "context", "context_usp_ulysses",
        "context_autoregressive", "tensor", "tensor_sequence", "expert", "autoregressive")
"""MaxText 0.2.5 base.yml `mesh_axes` (line 636), outermost first."""
KEY_WORD = {a: a for a in AXES} | {"stage": "pipeline"}
"""mesh axis -> the word of its ici_*/dcn_* keys (configs/types.py ici_map)."""
PRICED = ("data", "stage", "fsdp", "context", "tensor", "expert")
BASE: dict[str, Any] = {
    # MaxText 0.2.5 configs/base.yml: the defaults a config leaves in place (line numbers of that file)
    "model_name": "default",  # :23
    "quantization": "",  # :137
    "use_qwix_quantization": False,  # :168
    "num_layers_per_pipeline_stage": 1,  # :409
    "num_pipeline_repeats": -1,  # :411
    "pipeline_parallel_layers": -1,  # :412
    "num_pipeline_microbatches": -1,  # :419
    "pipeline_delay_activation_forwarding": False,  # :420
    "remat_policy": "full",  # :450
    "scan_layers": True,  # :481
    "mesh_axes": list(AXES),  # :636
    "shard_optimizer_over_data": False,  # :799
    "num_slices": -1,  # :807
    "per_device_batch_size": 12.0,  # :840
    "max_target_length": 2048,  # :1004
    "gradient_accumulation_steps": 1,  # :1098
} | {f"ici_{KEY_WORD[a]}_parallelism": -1 if a == "fsdp" else 1 for a in AXES} | {  # :781-793
    f"dcn_{KEY_WORD[a]}_parallelism": -1 if a == "data" else 1 for a in AXES}  # :768-780
BASE_SOURCE = "MaxText 0.2.5 base.yml default"
BASE_MODEL = {"base_emb_dim": 2048, "base_num_query_heads": 16, "base_num_kv_heads": 16, "base_mlp_dim": 7168,
              "base_num_decoder_layers": 16}
"""The model base.yml trains under model_name "default" (configs/base.yml:176-181, AI-Hypercomputer/maxtext
e591f30cb)."""
REMAT = {"none": "none", "full": "full", "minimal": "selective"}
"""remat_policy -> placement recompute (the emitter's table); other policies are priced as selective."""
REMAT_POLICIES = ("none", "full", "minimal", "minimal_with_context", "minimal_flash", "minimal_with_quantization",
                  "minimal_with_context_and_quantization", "save_dot_with_context_except_mlp",
                  "save_dot_except_mlpwi", "save_dot_except_mlp", "save_qkv_proj", "qkv_proj_offloaded",
                  "minimal_offloaded", "custom", "save_out_proj")
"""The remat_policy values MaxText 0.2.5 runs (layers/nnx_decoders.py:1278-1386 get_remat_policy; an empty or null
policy is no policy, as "none"); any other name fails its assert at :1385."""
QKV_NAMES = ("query_proj", "value_proj", "key_proj", "kv_proj", "qkv_proj")
MINIMAL_NAMES = (*QKV_NAMES, "out_proj", "mlpwi_0", "mlpwi_1", "mlpwi", "mlpwo")
"""What MaxText's minimal_policy saves (layers/nnx_decoders.py minimal_policy; with_context adds "context")."""
REMAT_SAVES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "minimal": (MINIMAL_NAMES, ()), "minimal_with_quantization": (MINIMAL_NAMES, ()),
    "minimal_with_context": ((*MINIMAL_NAMES, "context"), ()), "minimal_flash": ((*MINIMAL_NAMES, "context"), ()),
    "minimal_with_context_and_quantization": ((*MINIMAL_NAMES, "context"), ()),
    "save_dot_with_context_except_mlp": ((*QKV_NAMES, "context", "out_proj"), ()),
    "save_dot_except_mlpwi": ((*QKV_NAMES, "out_proj", "mlpwo"), ()),
    "save_dot_except_mlp": ((*QKV_NAMES, "out_proj"), ()),
    "save_qkv_proj": (QKV_NAMES, ()),
    "qkv_proj_offloaded": ((), ("query_proj", "value_proj", "key_proj", "kv_proj")),
    "minimal_offloaded": ((), MINIMAL_NAMES),
    "save_out_proj": (("out_proj",), ()),
}
"""remat_policy -> (names saved on the device, names offloaded to host memory): MaxText's get_remat_policy
(layers/nnx_decoders.py, jax.checkpoint_policies save_only_these_names / save_and_offload_only_these_names)."""
CUSTOM_NAMES = ("context", "mlpwi", "mlpwi_0", "mlpwi_1", "mlpwo", "moe_mlpwi_0", "moe_mlpwi_1", "moe_mlpwo",
                "query_proj", "key_proj", "value_proj", "kv_proj", "qkv_proj", "out_proj")
"""The tensors remat_policy custom places by their own key ('remat', 'device' or 'offload'; base.yml: each 'remat'
by default)."""
GPU_HARDWARE = ("gpu", "gpu_multiprocess")
"""MaxText's hardware values that run on GPUs (base.yml `hardware`, default 'tpu')."""
MOE_ONLY = "[moe] "
"""The prefix of a reader's note that holds for an MoE model only; the audit keeps it (without the prefix) where the
model is one (a model_name's config may give the experts no key of the files names)."""
MOE_NAMES = {"mlpwi_0": "moe_mlpwi_0", "mlpwi_1": "moe_mlpwi_1", "mlpwo": "moe_mlpwo"}
"""A dense tensor's name -> the routed experts' own name for it (base.yml's custom keys)."""
MOE_SPARSE_ONLY_NAMES = {"mlpwi_1": "moe_mlpwi_1"}
"""Dense name -> the routed experts' name MaxText 0.2.5's sparse_matmul path (base.yml default) tags alone: its w1
output is checkpoint_name(layer_w1, "moe_mlpwi_1") (layers/moe.py:2916, :2942), where w0 and wo carry both names
(:2915, :3229) and the dense_matmul path tags w1 with both (:4192)."""


def trained_batch(per_device: float, num_devices: int, accumulation: int) -> int:
    """The global batch MaxText 0.2.5 trains: int(int(devices x per_device_batch_size) x accumulation), in float
    arithmetic as `calculate_global_batch_sizes` does it (configs/types.py:4438-4447, micro_batch_to_train and
    global_batch_size_to_train_on), which truncates: 2.1666666666666665 x 216 devices is 467.99999999999994, so 467
    sequences, not 468."""
    return int(int(num_devices * per_device) * accumulation)


EXACT_BATCH_ULPS = 4
"""How many floats from the nearest to batch / devices upward `exact_per_device` tries: the nearest float to the
quotient or the next one up gives the batch whenever the micro-batch is below 2**51 (the product's rounding error is
under one sequence), far above MAX_GLOBAL_BATCH; more steps would only reach products that truncate to the next
sequence."""


def exact_per_device(micro_batch: int, num_devices: int) -> float | None:
    """The per_device_batch_size nearest micro_batch / num_devices, or the first float above it, whose product MaxText
    0.2.5 truncates to exactly `micro_batch` sequences (`trained_batch`: int(num_devices x per_device_batch_size)); None
    where no float does (a micro-batch of 2**54 + 1 on 3 devices: every product is a multiple of 4 there).  The
    nearest float to 13/6 is 2.1666666666666665, whose product with 216 truncates to 467; the next one up,
    2.166666666666667, gives 468."""
    value = micro_batch / num_devices  # Python's int / int: the nearest float to the quotient
    for _ in range(EXACT_BATCH_ULPS):
        if trained_batch(value, num_devices, 1) == micro_batch:
            return value
        value = math.nextafter(value, math.inf)
    return None


def experts_unsaved(kept: set[str]) -> list[str]:
    """The routed experts' tensors a remat policy keeping `kept` reruns on the sparse_matmul path though it keeps
    their dense counterparts (MOE_SPARSE_ONLY_NAMES): moe_mlpwi_1 under minimal."""
    return sorted(moe for dense, moe in MOE_SPARSE_ONLY_NAMES.items() if dense in kept and moe not in kept)
REMAT_CHECK = ('layers/nnx_decoders.py:1385 get_remat_policy (the assert since 5a1e17698, 2025-07-09, then in '
               'layers/decoders.py): assert remat_policy == "full", "Remat policy needs to be on '
               'list of remat policies"')
QUANTIZATIONS = ("", "fp4", "int4", "int8", "intmp", "fp8_e5m2", "fp8_e4m3", "fp8", "nanoo_fp8", "fp8_nanoo",
                 "fp8_gpu", "fp8_full", "te_no_quant", "te_fp8_delayedscaling", "te_fp8_currentscaling", "te_mxfp8",
                 "te_nvfp4", "te_nvfp4_no_rht", "serve_fp8_weight")
"""MaxText 0.2.5 configs/types.py:87-108 QuantizationType, the values pydantic lets `quantization` take (:517)."""
FP8_QUANTIZATIONS: dict[str, str | None] = {
    "fp8": None, "nanoo_fp8": None,
    # Transformer Engine recipes (layers/quantizations.py:1430-1437): DelayedScaling and Float8CurrentScaling scale
    # per tensor (placement's tensorwise, as the Megatron reader prices delayed scaling), MXFP8BlockScaling is MXFP8
    "te_fp8_delayedscaling": "tensorwise", "te_fp8_currentscaling": "tensorwise", "te_mxfp8": "mxfp8"}
"""quantization -> placement's FP8 recipe (None: the accelerator's default) for the quantizations priced as FP8."""
QWIX_ONLY = ("fp4", "int4", "fp8_e5m2", "fp8_e4m3", "fp8_nanoo", "fp8_gpu", "fp8_full")
"""The quantizations MaxText 0.2.5 runs only through Qwix (use_qwix_quantization true: layers/quantizations.py:1182-1216
get_quantization_rule, get_qt_provider); without it model creation raises (_get_quant_config, :852-874)."""
QWIX_FP8: dict[str, tuple[str, str]] = {
    # make_qt_rule(float8_e4m3fn) with disable_channelwise_axes=False, forward and backward, under qwix.QtProvider
    # (layers/quantizations.py:825-836, :851, get_qt_provider :865-866, AI-Hypercomputer/maxtext e591f30cb)
    "fp8": ("rowwise", "Qwix's QtRule keeps channelwise scales (disable_channelwise_axes=False): one scale per row "
                       "of each dot_general operand, forward and backward, not Flax's per-tensor "
                       "Fp8DirectDotGeneralOp (layers/quantizations.py:825-836, :851, get_qt_provider :865-866)"),
    "fp8_e4m3": ("rowwise", "Qwix's QtRule keeps channelwise scales (disable_channelwise_axes=False): one scale per "
                            "row of each dot_general operand, forward and backward (layers/quantizations.py:825-836, "
                            ":851, get_qt_provider :865-866)"),
    # NvidaFp8Provider wraps Flax's nn.Fp8DirectDotGeneralOp (layers/quantizations.py:771-779, get_qt_provider :867-868)
    "fp8_gpu": ("tensorwise", "Qwix's NvidaFp8Provider runs Flax's Fp8DirectDotGeneralOp, one scale per tensor "
                              "(layers/quantizations.py:771-779, get_qt_provider :867-868)")}
"""quantization under use_qwix_quantization -> (placement's FP8 recipe, why): the scaling its Qwix provider runs."""
FP8_NO_ACCUMULATION = ("fp8", "nanoo_fp8", "fp8_gpu", "te_fp8_delayedscaling")
"""The quantizations MaxText 0.2.5 refuses beside gradient_accumulation_steps > 1 (configs/types.py:4973-4977)."""
MOE_ONLY_PIPELINE = ("deepseek2-16b", "deepseek2-236b", "deepseek3-671b", "deepseek3-671b-2dfsdp",
                     "deepseek3-671b-batchsplit", "deepseek3.2-671b", "deepseek3-tiny", "deepseek3-test",
                     "deepseek-custom", "kimi-k2-1t")
"""The MaxText 0.2.5 model configs (configs/models/<name>.yml) of decoder_block "deepseek", whose default
pipeline_parallel_layers is the MoE layers only (configs/types.py:4547-4550)."""
DTYPES = ("bfloat16", "float32", "float16", "float8_e4m3fn", "float8_e5m2")
"""MaxText 0.2.5 configs/types.py:65-72 DType, the values pydantic lets `dtype` take (:500)."""
TRAIN_ENTRY = re.compile(r"(^|[./])(maxtext|MaxText)([./].*)?[./]train(\.py)?$")


MODEL_CONFIG_KEYS = frozenset({"decoder_block", "base_emb_dim", "base_num_decoder_layers", "base_num_query_heads"})
"""Keys of a MaxText model config (configs/models/<name>.yml, which a command's model_name or config path loads): a
user trial's audit asked for llama3.1-405b.yml and then refused it as no MaxText config."""


MODEL_SHAPE_KEYS = {"base_num_decoder_layers": "num_layers", "base_emb_dim": "hidden_size",
                    "base_num_query_heads": "num_attention_heads", "base_num_kv_heads": "num_query_groups",
                    "base_mlp_dim": "ffn_hidden_size"}
"""A MaxText model config's dimensions -> the launch fields the audit compares with --model: a 70B config passed
beside --model llama3-405b was priced as the 405B."""


class OmegaConfLoader(yaml.SafeLoader):
    """PyYAML's safe loader as OmegaConf 2.3 reads a MaxText config file (OmegaConf.load) and each key=value of the
    train command (OmegaConf.from_cli -> merge_with_dotlist, yaml.load of the value): a key stated twice in one
    mapping is refused, `1e3` is a float (a float resolver without YAML 1.1's dot), a date stays text, and YAML 1.1's
    yes/no/on/off, octal and base-60 numbers stay as SafeLoader reads them (omry/omegaconf v2.3.0
    omegaconf/_utils.py get_yaml_loader, basecontainer.py merge_with_dotlist; MaxText's pyconfig.py:190, :439).
    PyYAML's own safe_load read `max_target_length=8e3` as the text "8e3" and refused it as not a whole number, where
    MaxText trains at 8000."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag != yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG:
                continue
            line = key_node.start_mark.line + 1
            if key_node.value in seen:
                raise DuplicateKey(f"line {line}: key {key_node.value!r} is stated again (first at line "
                                   f"{seen[key_node.value]}), which OmegaConf refuses ('found duplicate key') before "
                                   f"MaxText starts")
            seen[key_node.value] = line
        return super().construct_mapping(node, deep=deep)


OmegaConfLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)"""
               r"""|\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?|[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*"""
               r"""|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"""),
    list("-+0123456789."))
OmegaConfLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in OmegaConfLoader.yaml_implicit_resolvers.items()}


def pyconfig_value(value: Any) -> Any:
    """A value as MaxText's pyconfig hands it to its pydantic config: the text none, in any case, is None
    (pyconfig.py:273-274 _prepare_for_pydantic, for every key of the files and the command line)."""
    return None if isinstance(value, str) and value.lower() == "none" else value


def is_maxtext_config(data: Any) -> bool:
    """A MaxText config: base_config, ici_/dcn_ parallelism or per_device_batch_size keys, or a model config's."""
    return isinstance(data, dict) and any(
        k == "base_config" or k == "per_device_batch_size" or re.fullmatch(r"(ici|dcn)_\w+_parallelism", str(k))
        or k in MODEL_CONFIG_KEYS for k in data)


def yaml_keys(path: Path) -> dict[str, tuple[Any, str]]:
    """{key: (value, "file:line: text")} of a MaxText config file."""
    text = read_text(path, "MaxText config", "expected a MaxText YAML config")
    data = parse_yaml(text, path, "MaxText config", loader=OmegaConfLoader)
    if not is_maxtext_config(data):
        raise InputError(f"{path}: no MaxText keys (base_config, ici_*/dcn_*_parallelism, per_device_batch_size, a "
                         f"model config's decoder_block or base_emb_dim); "
                         f"expected a MaxText config")
    lines = text.splitlines()
    out = {}
    for key, value in data.items():
        n = next((i for i, x in enumerate(lines, 1) if re.match(rf"\s*{re.escape(str(key))}\s*:", x)), None)
        out[str(key)] = (pyconfig_value(value), f"{path}:{n}: {lines[n - 1].strip()[:160]}" if n else f"{path}: {key}")
    return out


def command_keys(words: list) -> tuple[dict[str, tuple[Any, str]], str | None] | None:
    """(key=value overrides, config path) of a MaxText train command, or None if `words` run no MaxText."""
    texts = [w.text for w in words]
    at = next((i for i, t in enumerate(texts) if TRAIN_ENTRY.search(t)), None)
    if at is None:
        return None
    keys: dict[str, tuple[Any, str]] = {}
    config = None
    for w in words[at + 1:]:
        if config is None and w.text.endswith((".yml", ".yaml")) and "=" not in w.text:
            config = w.text
            continue
        m = re.fullmatch(r"([A-Za-z_]\w*)=(.*)", w.text, re.S)
        if not m and w.unresolved:
            continue  # a variable of the script's (`$EXTRA_ARGS`): what it holds is not in the files
        if not m:
            # OmegaConf.from_cli (MaxText pyconfig.py) takes a word without `=` as a key of its own, which
            # MaxTextConfig (extra="forbid") refuses at start-up: the job does not start (a user trial's
            # `enable_checkpointing: False` was priced as if the pair were not there)
            fix = (f"write {w.text.rstrip(':')}=VALUE" if re.fullmatch(r"[A-Za-z_]\w*:?", w.text)
                   else "give every override as key=value")
            raise refused(w.evidence, f"`{w.text}` is not a key=value argument", "start-up: its command line "
                          "(OmegaConf.from_cli, pyconfig.py) reads the word as a key of its own, which MaxTextConfig "
                          "(extra forbid) does not have", fix)
        try:
            value = yaml.load(m.group(2), Loader=OmegaConfLoader) if m.group(2) else ""
        except (yaml.YAMLError, DuplicateKey):
            value = m.group(2)
        keys[m.group(1)] = (pyconfig_value(value), w.evidence)
    return keys, config


@dataclass(frozen=True)
class MeshScript:
    """What a jax_mesh.py (the one `--emit maxtext` writes) fixes about the processes, parsed, never run."""

    hosts: tuple[str, ...]
    """HOSTS: process k runs on HOSTS[k] (initialize() passes process_id = HOSTS.index(host))."""
    hosts_evidence: str
    visible: dict[str, tuple[str, str]]
    """CUDA_VISIBLE_DEVICES: host -> (its value, evidence), which initialize() sets in the host's environment before
    jax.distributed.initialize, so before JAX starts CUDA; a host it leaves out runs its GPUs in numbered order."""
    visible_evidence: str | None
    """Where the CUDA_VISIBLE_DEVICES dict is written; None where the file has none."""


def _literal(node: ast.Assign) -> Any:
    try:
        return ast.literal_eval(node.value)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None


def mesh_script(path: Path) -> MeshScript:
    """The HOSTS list and the CUDA_VISIBLE_DEVICES dict (host -> "0,4,1,5,...") of a jax_mesh.py."""
    text = read_text(path, "JAX mesh script", "expected the jax_mesh.py that placement writes")
    try:
        tree = ast.parse(text, filename=str(path))
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        raise InputError(f"{path}: not valid Python ({type(err).__name__}); expected jax_mesh.py") from None
    assigned = {node.targets[0].id: node for node in tree.body
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)}
    node = assigned.get("HOSTS")
    if node is None:
        raise InputError(f"{path}: no `HOSTS = [...]` list; a MaxText Python file is read for the process order "
                         f"jax_mesh.py states, and this one states none")
    hosts = _literal(node)
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) for h in hosts):
        raise InputError(f"{path}:{node.lineno}: HOSTS must be a list of host names written out")
    hosts_ev = f"{path}:{node.lineno}: HOSTS = [{', '.join(hosts[:3])}{', ...' if len(hosts) > 3 else ''}]"
    node = assigned.get("CUDA_VISIBLE_DEVICES")
    if node is None:
        return MeshScript(tuple(hosts), hosts_ev, {}, None)
    given = _literal(node)
    if not isinstance(given, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in given.items()):
        raise InputError(f"{path}:{node.lineno}: CUDA_VISIBLE_DEVICES must be a dict of host name -> GPU list "
                         f"written out (e.g. {{{hosts[0]!r}: '0,4,1,5,2,6,3,7'}}), as jax_mesh.py's initialize() "
                         f"reads it")
    lines = {k.value: k.lineno for k in node.value.keys if isinstance(k, ast.Constant)} \
        if isinstance(node.value, ast.Dict) else {}
    visible = {h: (v, f"{path}:{lines.get(h, node.lineno)}: CUDA_VISIBLE_DEVICES[{h!r}] = {v!r}")
               for h, v in given.items()}
    shown = ", ".join(f"{h!r}: {v!r}" for h, v in list(given.items())[:2]) + (", ..." if len(given) > 2 else "")
    return MeshScript(tuple(hosts), hosts_ev, visible,
                      f"{path}:{node.lineno}: CUDA_VISIBLE_DEVICES = {{{shown}}} (initialize() sets the host's "
                      f"entry before jax.distributed.initialize)")


def refused(evidence: str, what: str, check: str, fix: str) -> InputError:
    """A job MaxText 0.2.5 itself refuses to start: the files' line, the value, MaxText's check quoted, the fix."""
    return start_refusal(evidence, what, f"MaxText 0.2.5 refuses it at {check}", fix)


def _flag(keys: dict[str, tuple[Any, str]], key: str) -> bool:
    value, ev = keys[key]
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise InputError(f"{ev}: {key} must be true or false, got {value!r}")


def _int_key(v: dict[str, tuple[Any, str]], key: str) -> tuple[int, str]:
    value, ev = v[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise InputError(f"{ev}: {key} must be a whole number, got {value!r}")
    return int(value), ev


def _remat_saves(remat: str, keys: dict[str, tuple[Any, str]]) -> tuple[set[str], set[str], str]:
    """(names kept for backward, of them those offloaded to host memory, how the policy says so) for a named-save
    remat_policy; `custom` reads each tensor's key."""
    if remat in REMAT_SAVES:
        saved, offloaded = REMAT_SAVES[remat]
        how = f"{remat} saves {', '.join(saved) or 'nothing on the device'}"
        return set(saved) | set(offloaded), set(offloaded), how + (f", offloads {', '.join(offloaded)}"
                                                                   if offloaded else "")
    where = {name: keys.get(name, ("remat", BASE_SOURCE)) for name in CUSTOM_NAMES}
    for name, (value, ev) in where.items():
        if str(value) not in ("remat", "device", "offload"):
            raise InputError(f"{ev}: {name} {value!r}; remat_policy custom takes 'remat', 'device' or 'offload' "
                             f"for each tensor (base.yml)")
    kept = {name for name, (value, _) in where.items() if str(value) in ("device", "offload")}
    offloaded = {name for name, (value, _) in where.items() if str(value) == "offload"}
    return kept, offloaded, f"custom keeps {', '.join(sorted(kept)) or 'no named tensor'}"


def remat_reruns(kept: set[str]) -> tuple[str, ...]:
    """The recompute modules a named-save policy amounts to: the norms always (no name saves their outputs), the
    attention core without `context`, the input projections without their outputs (q, k and v, or the fused
    qkv_proj), the output projection without out_proj, and the MLPs' up-projections with their activation without
    mlpwi (or both gated halves)."""
    qkv = "qkv_proj" in kept or {"query_proj", "key_proj", "value_proj"} <= kept
    up = bool({"mlpwi", "mlpwi_0"} & kept) and ("mlpwi" in kept or "mlpwi_1" in kept)
    return tuple(m for m, rerun in (("core_attn", "context" not in kept), ("layernorm", True),
                                    ("qkv_proj", not qkv), ("out_proj", "out_proj" not in kept),
                                    ("mlp_up", not up)) if rerun)


CUDNN_PACKING_DEFAULTS = {"attention": ("autoselected", 486), "packing": (True, 853),
                          "dataset_type": ("synthetic", 891), "context_parallel_strategy": ("all_gather", 1349),
                          "context_parallel_load_balance": (True, 1348)}
"""The keys MaxText 0.2.5's cuDNN attention checks packing under context parallelism against, with base.yml's
default and line."""


def cudnn_packing_under_cp(v: dict[str, tuple[Any, str]]) -> str | None:
    """The evidence, where the files run MaxText's cuDNN attention (cudnn_flash_te) on packed sequences of a real
    dataset without a load-balanced ring, which MaxText refuses once context parallelism is on: "Packing is only
    supported for load balanced ring attention with context parallelism" (layers/attention_op.py:2693-2694,
    cudnn_flash_attention); None otherwise (resolve raises it when the mesh gives cp > 1)."""
    said = {k: v.get(k, (value, f"{BASE_SOURCE} {k}: {value} (:{line})"))
            for k, (value, line) in CUDNN_PACKING_DEFAULTS.items()}
    word = {k: str(value).lower() for k, (value, _) in said.items()}
    ring = word["context_parallel_strategy"] == "ring" and word["context_parallel_load_balance"] == "true"
    if word["attention"] != "cudnn_flash_te" or word["packing"] != "true" or word["dataset_type"] == "synthetic" \
            or ring:
        return None
    return "; ".join(ev for _, ev in said.values())


FIELD_TYPES: dict[str, Any] = {k: type(d) for k, d in BASE.items() if isinstance(d, (bool, int))} | {
    "per_device_batch_size": int | float,  # configs/types.py:1400
    "sparse_matmul": bool, "prefuse_moe_weights": bool, "context_parallel_load_balance": bool, "packing": bool,
    "set_remat_policy_on_pipeline_iterations": bool, "mtp_num_layers": int, "num_experts": int,
    "capacity_factor": float}
"""The MaxTextConfig field types of the keys the audit reads (MaxText 0.2.5 configs/types.py: base.yml's default
types, per_device_batch_size `int | float`, :989 sparse_matmul, :1127, :1285, :1414, :560, :842, :844)."""


def pydantic_values(v: dict[str, tuple[Any, str]]) -> dict[str, tuple[Any, str]]:
    """The merged keys as MaxText's pydantic config holds them: text (or a number) in a typed field is converted by
    pydantic's lax rules, which MaxTextConfig keeps (no strict mode: configs/types.py:2979), so
    `ici_fsdp_parallelism: "8"` is 8 and `scan_layers: "no"` False (a QA run: the first was refused as not a whole
    number, the second read as scan on and priced with a full recompute where the job runs none).  What pydantic
    refuses stays as written, for the key's own error; in a boolean key, it is refused here."""
    from pydantic import TypeAdapter, ValidationError

    out = dict(v)
    for key, (value, ev) in v.items():
        kind = FIELD_TYPES.get(key)
        if kind is None or value is None or isinstance(value, (list, dict)) or type(value) is kind or (
                kind is not bool and type(value) in (int, float) and isinstance(value, kind)):
            continue  # already the field's type (an int in `int | float`), or no scalar
        try:
            out[key] = (TypeAdapter(kind).validate_python(value), ev)
        except ValidationError:
            if kind is bool:  # a QA run: `scan_layers: "maybe"` was priced as scan on
                raise refused(ev, f"{key} {value!r}", "configs/types.py (pydantic validates the MaxTextConfig "
                              "field as a bool)", f"write {key}: true or {key}: false") from None
    return out


def finish(v: dict[str, tuple[Any, str]], ignored: list[str]) -> dict[str, tuple[Any, str]]:
    """LaunchLayout fields from the merged MaxText keys (base.yml defaults for the rest): precision, sequence,
    recompute, model name, the mesh as read (resolved with the cluster by `resolve`), and the world size and
    global batch when the files fix them."""
    v = pydantic_values(v)
    keys = {k: (BASE[k], BASE_SOURCE) for k in BASE} | v
    out: dict[str, tuple[Any, str]] = {}
    axes = keys["mesh_axes"][0]
    if not isinstance(axes, list) or sorted(map(str, axes)) != sorted(AXES):
        raise InputError(f"{keys['mesh_axes'][1]}: mesh_axes must name MaxText 0.2.5's axes ({', '.join(AXES)}), "
                         f"each once")
    ici = {a: _int_key(keys, f"ici_{KEY_WORD[a]}_parallelism") for a in AXES}
    dcn = {a: _int_key(keys, f"dcn_{KEY_WORD[a]}_parallelism") for a in AXES}
    for part, name in ((ici, "ici"), (dcn, "dcn")):
        filled = [a for a, (n, _) in part.items() if n == -1]
        bad = [(a, n, ev) for a, (n, ev) in part.items() if n < -1 or n == 0]
        if bad:
            raise InputError(f"{bad[0][2]}: {name}_{KEY_WORD[bad[0][0]]}_parallelism must be >= 1 or -1 (fill)")
        if len(filled) > 1:  # a QA trial: the message named neither the keys nor where they are set, nor the fix
            said = "; ".join(f"{name}_{KEY_WORD[a]}_parallelism -1 ({part[a][1]})" for a in filled)
            keep = next((a for a in filled if part[a][1] != BASE_SOURCE), filled[0])
            others = ", ".join(f"{name}_{KEY_WORD[a]}_parallelism" for a in filled if a != keep)
            raise InputError(f"{name} parallelism: more than one axis is -1 ({said}): MaxText 0.2.5 fills one and "
                             f"asserts \"At most one axis can be unspecified\" at start-up (utils/max_utils.py:464-468 "
                             f"fill_unspecified_mesh_axes), so this job does not start; give {others} a size (1 "
                             f"leaves the {name} devices to {name}_{KEY_WORD[keep]}_parallelism)")
    for a in AXES:
        if a not in PRICED and (ici[a][0] != 1 or dcn[a][0] != 1):
            raise InputError(f"{ici[a][1] if ici[a][0] != 1 else dcn[a][1]}: the {a} axis is not one placement "
                             f"prices (it prices data, stage, fsdp, context, tensor and expert); set it to 1")
    mesh = {"axes": [str(a) for a in axes], "ici": {a: n for a, (n, _) in ici.items()},
            "dcn": {a: n for a, (n, _) in dcn.items()}}
    for key in ("num_slices", "per_device_batch_size", "gradient_accumulation_steps", "num_pipeline_microbatches",
                "num_pipeline_repeats", "num_layers_per_pipeline_stage"):
        value, ev = keys[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{ev}: {key} must be a number, got {value!r}")
        mesh[key] = value
    mesh["shard_optimizer_over_data"] = bool(keys["shard_optimizer_over_data"][0])
    mesh["pipeline_parallel_layers"] = _int_key(keys, "pipeline_parallel_layers")[0]
    block, bev = keys.get("decoder_block", (None, ""))
    dense = keys.get("first_num_dense_layers", (None, ""))[0]
    if (str(block) == "deepseek" or (block is None and str(keys["model_name"][0]) in MOE_ONLY_PIPELINE)) and (
            dense != 0):
        mesh["moe_only_pipeline"] = bev or keys["model_name"][1]
    delay = _flag(keys, "pipeline_delay_activation_forwarding")
    mesh["pipeline_delay_activation_forwarding"] = delay
    if delay and (ici["stage"][0] != 1 or dcn["stage"][0] != 1):
        ignored.append(f"pipeline_delay_activation_forwarding true: MaxText sends each stage's activations one "
                       f"iteration late, which doubles the pipeline bubble (base.yml:420-422); priced with the "
                       f"undelayed bubble, with the micro-batch count MaxText runs "
                       f"({keys['pipeline_delay_activation_forwarding'][1]})")
    if ici["stage"][0] != 1 or dcn["stage"][0] != 1:  # a user trial's audit of a pipelined file said nothing of it
        per_iteration, pev = v.get("set_remat_policy_on_pipeline_iterations", (True, BASE_SOURCE))
        recompute = (f"with set_remat_policy_on_pipeline_iterations true ({pev}) it keeps each iteration's input and "
                     f"recomputes the stage forward" if str(per_iteration).lower() != "false" else
                     f"set_remat_policy_on_pipeline_iterations false ({pev})")
        ignored.append(f"MaxText's pipeline (ici/dcn_pipeline_parallelism {ici['stage'][0]}/{dcn['stage'][0]}) runs "
                       f"every micro-batch's forward before the backward (a jax.lax.scan differentiated by JAX, "
                       f"layers/pipeline.py); {recompute}: priced as 1F1B, so expect the step time above the "
                       f"estimate and the memory other than it")
    refusal = cudnn_packing_under_cp(v)
    if refusal:
        mesh["cudnn_packing_under_cp"] = refusal
    mesh["sources"] = {k: ev for k, (_, ev) in keys.items() if k in BASE and ev != BASE_SOURCE}
    out["mesh"] = (mesh, keys["mesh_axes"][1])
    quant, qev = keys["quantization"]
    quant = "" if quant is None or (isinstance(quant, str) and quant.lower() == "none") else quant
    if not isinstance(quant, str) or quant not in QUANTIZATIONS:
        raise refused(qev, f"quantization {quant!r}", "configs/types.py:517 (pydantic validates quantization "
                      "against QuantizationType, :87-108; since 81d653c93, 2025-11-14)",
                      f"set quantization to one of {', '.join(repr(q) for q in QUANTIZATIONS)}")
    accumulation, aev = keys["gradient_accumulation_steps"]
    if quant in FP8_NO_ACCUMULATION and isinstance(accumulation, (int, float)) and accumulation > 1:
        raise refused(f"{qev} with {aev}", f"quantization {quant!r} with gradient_accumulation_steps "
                      f"{accumulation}", 'configs/types.py:4973-4977 (the check since 81d653c93, 2025-11-14): '
                      'if self.quantization in ("fp8", "nanoo_fp8", "fp8_gpu", "te_fp8_delayedscaling") and '
                      'self.gradient_accumulation_steps > 1: raise ValueError("FP8 quantization is not compatible '
                      'with gradient accumulation.")',
                      "set gradient_accumulation_steps: 1 (raise per_device_batch_size for the same global batch) "
                      "or drop the FP8 quantization")
    dtype, dev = keys.get("dtype", ("bfloat16", BASE_SOURCE))
    qwix, wev = _flag(keys, "use_qwix_quantization"), keys["use_qwix_quantization"][1]
    if quant in QWIX_ONLY and not qwix:  # a QA trial: fp8_gpu was priced as a bf16 job that runs
        raise refused(f"{qev} with use_qwix_quantization false ({wev})", f"quantization {quant!r} without Qwix",
                      "layers/quantizations.py:852-874 _get_quant_config, which model creation calls "
                      "(utils/model_creation_utils.py:540 configure_quantization): it knows int8, intmp, fp8, "
                      "nanoo_fp8 and te_* only, else raise ValueError(f\"Invalid value configured for quantization "
                      "{config.quantization}.\")", f"set use_qwix_quantization: true (Qwix runs {quant!r}) or "
                      f"quantization: \"fp8\" (Flax's per-tensor FP8)")
    if qwix and quant.startswith("te_") and quant != "te_no_quant":
        # a QA trial: priced as FP8 at 1.743 s where the job runs bf16 GEMMs (2.256 s, llama3-8b on 8 H100)
        out["precision"] = ("bf16", f"{qev} beside {wev}: MaxText quantizes nothing (configure_quantization returns "
                                    f"no Transformer Engine recipe under Qwix, layers/quantizations.py:912-913, and "
                                    f"Qwix has no rule for {quant!r}, get_qt_provider :1207-1216), so the matmuls run "
                                    f"in {dtype}")
    elif qwix and quant in QWIX_FP8:
        # a QA run: `quantization=fp8 use_qwix_quantization=true` was priced per tensor, its source naming Flax's
        # Fp8DirectDotGeneralOp, where Qwix scales each row; fp8_gpu (per tensor) was priced as bf16 matmuls
        out["precision"] = ("fp8", f"{qev} beside {wev}")
        out["recipe.fp8_recipe"] = (QWIX_FP8[quant][0], f"{qev} beside {wev} ({QWIX_FP8[quant][1]})")
    elif quant in FP8_QUANTIZATIONS:
        out["precision"] = ("fp8", qev)
        if FP8_QUANTIZATIONS[quant] is not None:
            out["recipe.fp8_recipe"] = (FP8_QUANTIZATIONS[quant], f"{qev} (Transformer Engine's "
                                        f"{'MXFP8 block' if quant == 'te_mxfp8' else 'per-tensor'} scaling: "
                                        f"layers/quantizations.py:1430-1437)")
    else:  # the matmuls run in dtype (a user trial: the source named base.yml while the command set dtype=bfloat16)
        out["precision"] = ("bf16", f"{dev}; no FP8 quantization ({qev})")
        if quant and quant != "te_no_quant":  # te_no_quant: Transformer Engine's GEMMs in bf16, as priced
            ignored.append(f"quantization {quant!r}: not a recipe placement prices as FP8 (it prices fp8, "
                           f"nanoo_fp8, te_fp8_delayedscaling, te_fp8_currentscaling and te_mxfp8); priced as bf16 "
                           f"matmuls ({qev})")
    if str(dtype) not in DTYPES:
        raise refused(dev, f"dtype {dtype!r}", "configs/types.py:500 (pydantic validates dtype against DType, "
                      ":65-72; since 81d653c93, 2025-11-14)", f"set dtype to one of {', '.join(DTYPES)}")
    if str(dtype) != "bfloat16":
        ignored.append(f"dtype {dtype!r}: MaxText computes the activations (and their matmuls) in {dtype} "
                       f"(configs/types.py:500); priced as bfloat16 activations and matmuls ({dev})")
    seq, sev = _int_key(keys, "max_target_length")
    out["seq_len"] = (seq, sev)
    remat, rev = keys["remat_policy"]
    if remat in (None, ""):
        # no policy is "none": get_remat_policy and the unscanned loop both test `cfg.remat_policy and
        # cfg.remat_policy != "none"` (layers/nnx_decoders.py:1164, :2294, e591f30cb); `remat_policy=null` (or =,
        # or =None) was priced as a selective policy saving nothing it named
        remat = "none"
    if str(remat) not in REMAT_POLICIES:
        raise refused(rev, f"remat_policy {remat!r}", REMAT_CHECK,
                      f"set remat_policy to one of {', '.join(REMAT_POLICIES)}")
    out["recompute"] = (REMAT.get(str(remat), "selective"), rev)
    scan, sev = keys["scan_layers"]
    if str(remat) == "none" and scan not in (False, "false", "False"):
        # the scanned decoder checkpoints every layer with get_remat_policy()'s None for "none": a full recompute
        # (layers/nnx_decoders.py:1154-1159, :1278-1287); only the unscanned loop skips jax.checkpoint (:2248)
        out["recompute"] = ("full", f"{rev} with scan_layers {scan} ({sev})")
    kept_names: set[str] | None = None
    if REMAT.get(str(remat), "selective") == "selective":
        kept, offloaded, how = _remat_saves(str(remat), keys)
        kept_names = kept
        modules = remat_reruns(kept)
        out["recipe.recompute_modules"] = (modules, f"{rev} ({how}; JAX reruns in backward what it needs of the "
                                                    f"rest: layers/nnx_decoders.py get_remat_policy)")
        # what the policy does not name is not kept: priced so by the framework row remat_saves_named_only; a
        # down-projection output saved beside rerun up-projections (save_dot_except_mlpwi) is not among what the
        # modules keep
        if "mlpwo" in kept and "mlp_up" in modules:
            ignored.append(f"remat_policy {remat!r} saves mlpwo, the MLP's down-projection output (2 bytes x hidden a "
                           f"token, a layer), beside up-projections it reruns: not priced, so expect memory a little "
                           f"above the estimate ({rev})")
        if offloaded:
            ignored.append(f"remat_policy {remat!r}: {', '.join(sorted(offloaded))} offloaded to host memory "
                           f"(offload_dst pinned_host) are priced as kept on the GPU, so its memory is an upper "
                           f"bound, and their copies to and from the host are not priced ({rev})")
    hardware, hev = v.get("hardware", ("tpu", BASE_SOURCE))
    if str(hardware) not in GPU_HARDWARE:  # a user trial's v5p script was priced on H100 without a word
        ignored.append(f"hardware {hardware!r} ({hev}): the files run MaxText on {str(hardware).upper()}s, not GPUs "
                       f"(configs/types.py:1662 `hardware`); priced as the same job on the --cluster's GPUs")
    out["model_ref"] = (str(keys["model_name"][0]), keys["model_name"][1])
    scale = v.get("global_parameter_scale")
    if scale is not None and scale[0] != 1:  # a review: scale 16 was read as base.yml's 16 layers of 2048
        raise InputError(f"{scale[1]}: global_parameter_scale {scale[0]} scales every base_* dimension of the model "
                         f"(MaxText's get_individual_scales, configs/types.py, AI-Hypercomputer/maxtext e591f30cb: "
                         f"heads and MLP, then embedding, then layers, doubled in turn), which the audit does not "
                         f"derive; give the scaled dimensions as base_emb_dim, base_num_query_heads, "
                         f"base_num_kv_heads, base_mlp_dim and base_num_decoder_layers with global_parameter_scale 1")
    default_model = str(keys["model_name"][0]) == "default"
    for key, field in MODEL_SHAPE_KEYS.items():  # a model config's shape, which --model must have (core._model_shape)
        if key in v and isinstance(v[key][0], int) and not isinstance(v[key][0], bool):
            out[field] = (v[key][0], v[key][1])
        elif default_model:  # model_name "default" trains base.yml's own model where no base_* key says otherwise
            # (a user trial: a file of it was priced as --model's 340B)
            out[field] = (BASE_MODEL[key], f"{BASE_SOURCE} {key}: {BASE_MODEL[key]} ({keys['model_name'][1]}: "
                                           f"model_name \"default\" trains base.yml's own model)")
    # the attention kernel (base.yml:486 'autoselected': tokamax's Pallas Triton flash kernel on GPUs; the framework
    # row's default where the files leave it)
    if "attention" in v:
        value, ev = v["attention"]
        # cudnn_flash_jax: JAX's cuDNN SDPA (layers/attention_op.py cudnn_jax_flash_attention), cuDNN's fused kernel
        # as cudnn_flash_te runs it (pyconfig validate_attention_kernel takes it; a user trial saw it refused)
        kernels = {"autoselected": "flash2", "flash": "flash2", "cudnn_flash_te": "flash", "cudnn_flash_jax": "flash",
                   "dot_product": "unfused"}
        if str(value) not in kernels:
            raise InputError(f"{ev}: attention {value!r}; MaxText 0.2.5 trains with autoselected, dot_product, flash, "
                             f"cudnn_flash_te or cudnn_flash_jax")
        out["recipe.attention_kernel"] = (kernels[str(value)], ev)
    # the context-parallel exchange (base.yml:1349 context_parallel_strategy "all_gather", the framework row's
    # default): "ring" passes K/V around the ring behind attention, which MaxText runs on GPUs (cudnn_flash_te)
    if "context_parallel_strategy" in v:
        value, ev = v["context_parallel_strategy"]
        strategies = {"all_gather": "all_gather", "ring": "p2p"}
        if str(value).lower() not in strategies:
            raise InputError(f"{ev}: context_parallel_strategy {value!r}, which placement does not price on GPUs "
                             f"(MaxText 0.2.5 runs ulysses and usp only on TPUs, layers/attention_op.py); give "
                             f"all_gather or ring")
        out["recipe.cp_comm_type"] = (strategies[str(value).lower()], ev)
    # weights and gradients in float32 (base.yml weight_dtype :194, grad_dtype :125) unless the files say otherwise;
    # the defaults come with the framework's recipe rows (frameworks.CAPABILITIES["maxtext"])
    for key, field in (("weight_dtype", "recipe.fp32_weights"), ("grad_dtype", "recipe.grad_reduce_fp32")):
        if key not in v:
            continue
        value, ev = v[key]
        name = str(value).lower()
        if name not in ("float32", "bfloat16", "float16"):
            raise InputError(f"{ev}: {key} {value!r}; MaxText takes a JAX dtype name such as float32 or bfloat16")
        if name == "float32":
            out[field] = (True, ev)
        elif key == "grad_dtype":
            out[field] = (False, ev)
        else:  # 16-bit weights: no float32 master, and AdamW's moments in mu_dtype, which follows weight_dtype
            out["recipe.fp32_weights"] = (False, ev)
            out["recipe.optimizer_master_weights"] = (False, f"{ev} (16-bit weights, updated in place: no float32 "
                                                             f"master copy)")
            out["recipe.optimizer_state_bf16"] = (True, f"{ev} (mu_dtype unset: AdamW's moments take weight_dtype, "
                                                        f"configs/base.yml mu_dtype)")
    if out.get("recipe.fp32_weights", (True, ""))[0] is False:
        # gradients take the weights' dtype, and grad_dtype casts only float32 ones (0.2.5 trainers/pre_train/
        # train.py:569, `x.astype(config.grad_dtype) if x.dtype == jnp.float32 else x`): 16-bit weights reduce 16-bit
        # gradients whatever grad_dtype says (a user trial's MaxText Mixtral priced an fp32 reduce)
        ev = out["recipe.fp32_weights"][1]
        said = f" ({v['grad_dtype'][1]} has no effect)" if "grad_dtype" in v else ""
        out["recipe.grad_reduce_fp32"] = (False, f"{ev} (16-bit weights give 16-bit gradients, and grad_dtype casts "
                                                 f"only float32 ones: trainers/pre_train/train.py:569{said})")
    mu = v.get("mu_dtype")  # AdamW's moments, whatever the weights' dtype, where the files set it
    if mu is not None and str(mu[0]) not in ("", "None"):
        if str(mu[0]).lower() not in ("float32", "bfloat16", "float16"):
            raise InputError(f"{mu[1]}: mu_dtype {mu[0]!r}; MaxText takes a JAX dtype name such as float32 or "
                             f"bfloat16 (or leaves it empty, to follow weight_dtype)")
        out["recipe.optimizer_state_bf16"] = (str(mu[0]).lower() != "float32", mu[1])
    # MoE token dropping: capacity_factor > 0 caps each expert's tokens (base.yml default -1, dropless), on the
    # dense_matmul path only (layers/moe.py generate_masks); the sparse_matmul path (base.yml true) never reads it and
    # drops nothing unless ragged_buffer_factor > 0 (a review: a sparse job's capacity_factor 1.0 was priced dropping)
    sparse, sev = keys.get("sparse_matmul", (True, BASE_SOURCE))
    cap = keys.get("capacity_factor")
    capped = cap is not None and isinstance(cap[0], (int, float)) and not isinstance(cap[0], bool) and cap[0] > 0
    if capped and str(sparse).lower() != "false":
        ignored.append(f"capacity_factor {cap[0]} ({cap[1]}): read only by MaxText's dense_matmul path "
                       f"(layers/moe.py generate_masks); under sparse_matmul ({sev}) the experts take every routed "
                       f"token (ragged_buffer_factor -1, base.yml): priced dropless")
        capped = False
    if capped:
        out["recipe.moe_capacity_factor"] = (float(cap[0]), cap[1])
    # MoE without sparse_matmul (base.yml true): layers/moe.py dense_matmul, which with a capacity factor dispatches
    # and combines each sequence by one-hot mask einsums, and without one runs every expert on every token
    experts = keys.get("num_experts", (1, BASE_SOURCE))[0]
    unsaved = experts_unsaved(kept_names) if kept_names is not None else []
    if unsaved and str(sparse).lower() != "false":
        # priced as it runs (a QA pass: it was an ignored line, the GEMM priced as saved, step and memory off)
        out["recipe.expert_w1_rerun"] = (True, f"{rev}: remat_policy {remat!r} saves mlpwi_1 but not the routed "
                                               f"experts' {', '.join(unsaved)}: MaxText's sparse_matmul path ({sev}) "
                                               f"tags the experts' second up-projection with that name only "
                                               f"(layers/moe.py:2916, :2942), so each MoE layer reruns that GEMM in "
                                               f"backward and keeps no output of it")
        fused = keys.get("prefuse_moe_weights")
        if fused is not None and _flag(keys, "prefuse_moe_weights"):
            # w1's output is then a slice of one grouped GEMM of w0 and w1 together, which the rerun computes whole
            # (layers/moe.py:1946-1952 at e591f30cb: gmm(x, concat(w0, w1)) then out[:, :n], out[:, n:], only the
            # w0 half saved by name); the recipe field prices one GEMM (a QA pass: prefuse_moe_weights was not read)
            ignored.append(f"prefuse_moe_weights true ({fused[1]}): the experts' w0 and w1 run as one grouped GEMM "
                           f"(layers/moe.py:1946-1952), so the w1 rerun above recomputes it whole, w0's half too: "
                           f"priced as w1's GEMM alone, so expect one more expert up-projection forward a MoE layer "
                           f"in the step than the estimate")
    if str(sparse).lower() == "false" and isinstance(experts, int) and experts > 1:
        if capped:
            out["recipe.moe_einsum_dispatch"] = ("sequence", f"{sev} (with {cap[1]}: MaxText's dense_matmul "
                                                             f"dispatches and combines each sequence by one-hot mask "
                                                             f"einsums, BSM,BSEC -> EBCM and EBCM,BSEC -> BSM: "
                                                             f"layers/moe.py)")
        else:
            ignored.append(f"sparse_matmul False without a capacity factor: MaxText's dense_matmul runs every one of "
                           f"the {experts} experts on every token (BSM,EMH -> BSEH, layers/moe.py), not priced: the "
                           f"estimate prices the routed experts only, so the job's expert work is several times "
                           f"the priced ({sev})")
    # multi-token prediction: mtp_num_layers (base.yml:235, default 0) builds MultiTokenPredictionBlock beside the
    # decoder, each module a decoder layer, a 2h -> h projection and a pass of the shared LM head (models/models.py
    # :143-154, layers/multi_token_prediction.py); a user trial: a job with mtp_num_layers 1 was priced without it
    mtp = keys.get("mtp_num_layers")
    if mtp is not None:
        if isinstance(mtp[0], bool) or not isinstance(mtp[0], int) or mtp[0] < 0:
            raise InputError(f"{mtp[1]}: mtp_num_layers must be a whole number >= 0 (configs/types.py "
                             f"NonNegativeInt), got {mtp[0]!r}")
        out["recipe.mtp_layers"] = (mtp[0], mtp[1])
        balance = keys.get("context_parallel_load_balance",
                           (True, f"{BASE_SOURCE} context_parallel_load_balance: true (:1348)"))
        if mtp[0] > 0 and str(balance[0]).lower() == "true":
            mesh["mtp_under_cp_balance"] = f"{mtp[1]}; {balance[1]}"
    # what the files alone fix: every mesh entry explicit
    if all(n > 0 for n, _ in ici.values()) and all(n > 0 for n, _ in dcn.values()):
        world = math.prod(n for n, _ in ici.values()) * math.prod(n for n, _ in dcn.values())
        out["world_size"] = (world, f"the product of the mesh's ici x dcn sizes ({axes_source(mesh)})")
        out["gpus_per_node"] = (math.prod(n for n, _ in ici.values()), f"the product of the mesh's ici sizes "
                                                                         f"({axes_source(mesh, ('ici',))})")
        total = trained_batch(mesh["per_device_batch_size"], world, mesh["gradient_accumulation_steps"])
        if total >= 1:  # MaxText's int(devices x per_device_batch_size) x accumulation
            out["global_batch"] = (total, f"{keys['per_device_batch_size'][1]} (x {world} devices, truncated as "
                                          f"MaxText does, x gradient_accumulation_steps "
                                          f"{mesh['gradient_accumulation_steps']})")
    return out


def _sizes(mesh: dict, gpus_per_host: int, num_gpus: int) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """(ici, dcn, total) per axis with MaxText's -1 fills: ICI product = GPUs per host (one JAX slice on GPUs),
    DCN product = hosts (max_utils.fill_unspecified_mesh_axes)."""
    per_slice = min(gpus_per_host, num_gpus)
    slices = num_gpus // per_slice
    out = []
    for part, want, what, hosts in ((dict(mesh["ici"]), per_slice, "ICI (GPUs per host)", False),
                                    (dict(mesh["dcn"]), slices, "DCN (hosts)", True)):
        known = math.prod(n for n in part.values() if n > 0)
        fill = [a for a, n in part.items() if n == -1]
        if fill:
            if want % known:
                fix = (f"a job of a multiple of {known} hosts: --gpus {known * per_slice} (--nodes {known}) or more"
                       if hosts else f"a node type with a multiple of {known} GPUs (--node-type)")
                raise InputError(f"MaxText {what}: the explicit axes multiply to {known}, which does not divide "
                                 f"{want} ({num_gpus} GPUs, {per_slice} per host); the -1 axis {fill[0]} cannot be "
                                 f"filled: the files need {fix}")
            part[fill[0]] = want // known
        elif known != want:
            # the axes named with their values and lines (a user trial read "the files fix a node type of 512 GPUs"
            # for ici_fsdp_parallelism 64 x ici_tensor_parallelism 8 set from a script's arguments)
            prefix = "dcn" if hosts else "ici"
            keys = [(f"{prefix}_{KEY_WORD[a]}_parallelism", n) for a, n in part.items() if n != 1]
            named = " x ".join(f"{k} {n}" for k, n in keys) or "every axis 1"
            lines = sorted({mesh.get("sources", {}).get(k, BASE_SOURCE).split(": ", 1)[0] for k, _ in keys})
            named += f" ({', '.join(lines)})" if lines else ""
            fix = (f"--gpus {known * per_slice} (--nodes {known})" if hosts else
                   f"a node type of {known} GPUs a host (--node-type)")
            raise InputError(f"MaxText {what}: {named} multiply to {known}, but the job has {want} "
                             f"({num_gpus} GPUs, {per_slice} a host); if it ran so, pass {fix}; otherwise change "
                             f"those {prefix}_*_parallelism values")
        out.append(part)
    ici, dcn = out
    if mesh["num_slices"] not in (-1, slices):
        raise InputError(f"num_slices {mesh['num_slices']} but the job has {slices} hosts of {per_slice} GPUs")
    return ici, dcn, {a: ici[a] * dcn[a] for a in AXES}


WEIGHT_AXES = ("fsdp", "context", "expert")
"""The mesh axes of base.yml's rule for a weight's `embed` dimension that placement prices (MaxText source at
e591f30, src/maxtext/configs/base.yml:605: embed -> fsdp, fsdp_transpose, context, context_usp_ulysses, expert)."""
WEIGHTS_GATHERED = ("base.yml:605 rule embed -> fsdp, context, expert; layers/pipeline.py:1046 gathers the weights "
                    "over fsdp, context and expert alike")
"""The MaxText source lines that make its context axis shard the weights as fsdp does (`zero_as_run`)."""


def zero_as_run(size: dict[str, int], over_data: bool) -> tuple[int, int | None]:
    """(ZeRO stage, dp_shard) that a MaxText mesh of these axis sizes runs, in placement's terms, with
    `shard_optimizer_over_data` set or not.  Read from the MaxText source (AI-Hypercomputer/maxtext at e591f30,
    src/maxtext/):

    * configs/base.yml:605-606 shards every weight's `embed` dimension over fsdp, fsdp_transpose, context,
      context_usp_ulysses and expert, whatever else is set; the gradients come out of the jitted step in the
      weights' sharding and the AdamW moments take it too (utils/maxtext_utils.py:1877 get_abstract_state:
      nn.logical_to_mesh_sharding of the whole train state).  A layer's weights are all-gathered over those axes
      for its use (layers/pipeline.py:1046 `from_repeat_weights_to_bsw(axes_to_gather=("fsdp",
      "fsdp_transpose", "context", "expert"))` in a pipeline, XLA's sharding propagation outside one): with
      fsdp > 1, context > 1 or expert > 1 that is ZeRO-3, over fsdp x expert of the data-parallel ranks (placement's
      dp_shard; HSDP where data > 1) and over the context ranks (placement's ZeRO-3 shards over cp x dp_shard:
      cost.step dense_shard).
    * shard_optimizer_over_data adds the `data` axis alone to the optimizer state's sharding
      (utils/maxtext_utils.py:1879-1887 -> utils/sharding.py:625 add_data_to_sharding, which divides a dimension
      by `mesh.shape["data"]`, :675), and the stored float32 weights take that sharding
      (utils/sharding.py:686 maybe_update_params_sharding_with_opt): ZeRO-1 over data where nothing else shards
      the weights; with data 1 it adds nothing, and beside ZeRO-3 it shards the optimizer state and the float32
      weights over data too, the weights gathered back once a step (`over_data_priced`: recipe
      optimizer_over_replicas).
    """
    fsdp, cp, ep, data = size["fsdp"], size["context"], size["expert"], size["data"]
    if fsdp > 1 or cp > 1 or ep > 1:  # an expert axis alone shards the non-expert weights too (a user trial:
        return 3, fsdp * ep          # MaxText's own Mixtral test, expert 8 and fsdp 1, was priced replicated)
    return (1 if over_data and data > 1 else 0), None


def over_data_priced(size: dict[str, int], over_data: bool) -> bool:
    """Whether shard_optimizer_over_data shards the optimizer state and the stored float32 weights over data beside a
    ZeRO-3 mesh (utils/sharding.py add_data_to_sharding, maybe_update_params_sharding_with_opt): placement's HSDP
    with the optimizer over the replicas (recipe optimizer_over_replicas; `zero_as_run`)."""
    return over_data and size["data"] > 1 and zero_as_run(size, over_data)[0] == 3


def axes_source(mesh: dict, parts: tuple[str, ...] = ("ici", "dcn")) -> str:
    """Where the mesh's sizes come from: the axes that are not 1, each by its source line (a default by its value and
    base.yml), then the rest in a word (a user trial read all 24 keys on every degree's line, about 2 KB each)."""
    named = [mesh["sources"].get(key, f"{key} {mesh[part][a]} ({BASE_SOURCE})")
             for part in parts for a in AXES if mesh[part][a] != 1
             for key in (f"{part}_{KEY_WORD[a]}_parallelism",)]
    rest = "/".join(f"{part}_*" for part in parts)
    return "; ".join(named) + f"; every other {rest} parallelism 1" if named else BASE_SOURCE


def resolve(mesh: dict, num_layers: int, gpus_per_host: int, num_gpus: int, global_batch: int,
            ) -> dict[str, tuple[Any, str]]:
    """The layout fields the MaxText mesh and batch keys give on this job's GPUs."""
    ev = axes_source(mesh)
    _, _, size = _sizes(mesh, gpus_per_host, num_gpus)
    tp, cp, pp, ep, fsdp, data = (size[a] for a in ("tensor", "context", "stage", "expert", "fsdp", "data"))
    if cp > 1 and mesh.get("cudnn_packing_under_cp"):
        raise InputError(f"{mesh['cudnn_packing_under_cp']}; context {cp} ({ev}): MaxText 0.2.5 refuses packed "
                         f"sequences of a real dataset under context parallelism with cuDNN's attention unless the "
                         f"ring load-balances (\"Packing is only supported for load balanced ring attention with "
                         f"context parallelism\", layers/attention_op.py:2693-2694), so this job does not start; set "
                         f"context_parallel_strategy: ring with context_parallel_load_balance: true, packing: false, "
                         f"or context parallelism 1")
    if cp > 1 and mesh.get("mtp_under_cp_balance"):
        raise InputError(f"{mesh['mtp_under_cp_balance']}; context {cp} ({ev}): MaxText 0.2.5 refuses multi-token "
                         f"prediction on a batch its context-parallel load balancing reordered (\"MTP does not "
                         f"support context_parallel_load_balance\", layers/multi_token_prediction.py:504-509), so "
                         f"this job does not start; set mtp_num_layers: 0, context_parallel_load_balance: false, or "
                         f"context parallelism 1")
    fsdp_all = fsdp * size["fsdp_transpose"]  # what MaxText's check multiplies (_resolved_fsdp_size)
    if mesh["shard_optimizer_over_data"] and fsdp_all > 1:
        raise InputError(f"{mesh['sources'].get('shard_optimizer_over_data', BASE_SOURCE)}; fsdp {fsdp_all} ({ev}): "
                         f"MaxText 0.2.5 refuses shard_optimizer_over_data beside an fsdp axis at start-up (the 0.2.5 "
                         f"wheel's configs/types.py:5605-5621: \"`shard_optimizer_over_data` (Zero-1) cannot be "
                         f"combined with FSDP\"), so this job does not start; drop shard_optimizer_over_data (HSDP "
                         f"with the optimizer sharded as the weights) or set the fsdp parallelism to 1")
    dp = data * fsdp * ep
    out: dict[str, tuple[Any, str]] = {"tp": (tp, ev), "cp": (cp, ev), "pp": (pp, ev), "ep": (ep, ev),
                                       "etp": (tp, "MaxText shards expert MLPs over tensor (base.yml mlp_moe)"),
                                       "dp": (dp, ev), "sequence_parallel": (tp > 1, "MaxText activation_embed -> "
                                                                                     "tensor (base.yml)")}
    over_ev = mesh["sources"].get("shard_optimizer_over_data", BASE_SOURCE)
    zero, shard = zero_as_run(size, mesh["shard_optimizer_over_data"])
    if zero == 3:
        by = " x ".join(f"{a} {size[a]}" for a in WEIGHT_AXES if size[a] > 1)
        out["zero_stage"] = (3, f"{ev} (MaxText shards every weight, its gradient and optimizer state over {by} and "
                                f"gathers them for each use: {WEIGHTS_GATHERED})")
        out["dp_shard"] = (shard, ev)
        # stated either way: the framework row's value is what placement's own files write
        if over_data_priced(size, mesh["shard_optimizer_over_data"]):
            out["recipe.optimizer_over_replicas"] = (True, f"{over_ev} beside {by}: MaxText shards the optimizer "
                                                           f"state and the float32 weights over data {size['data']} "
                                                           f"too (utils/sharding.py add_data_to_sharding, "
                                                           f"maybe_update_params_sharding_with_opt)")
        else:
            out["recipe.optimizer_over_replicas"] = (False, f"{over_ev}: shard_optimizer_over_data "
                                                            f"{str(mesh['shard_optimizer_over_data']).lower()}, data "
                                                            f"{size['data']}: the optimizer state sharded as the "
                                                            f"weights")
    else:
        out["zero_stage"] = (zero, over_ev)
    src = mesh["sources"]
    accumulation = mesh["gradient_accumulation_steps"]
    per_device = mesh["per_device_batch_size"]
    product = per_device * num_gpus
    files_batch = trained_batch(per_device, num_gpus, accumulation)
    batch_ev = src.get("per_device_batch_size", BASE_SOURCE)
    if product != int(product):
        # MaxText trains int(per_device_batch_size x devices) sequences a micro-batch, times the accumulation
        # (configs/types.py calculate_global_batch_sizes), in float arithmetic: a product that is not whole is read as
        # the batch it truncates to.  A user trial's 0.3 x 64 was told to pass --global-batch 19.2, which the flag
        # refuses; the values offered give each of the dp replicas whole sequences, as floats MaxText truncates to
        # them (2.1666666666666665 x 216 is 467.99999999999994: 467 sequences, not 468).
        truncated = (f"per_device_batch_size {per_device!r} x {num_gpus} devices = {product!r}, not a whole number "
                     f"of sequences: MaxText trains int({product!r}) = {int(product)} a micro-batch (configs/types.py "
                     f"calculate_global_batch_sizes)")
        if int(product) < 1 or int(product) % dp:
            whole = product / dp
            ks = sorted({max(1, math.floor(whole)), max(1, math.ceil(whole))})
            offers = " or ".join(f"{k * dp}/{num_gpus} = {_exact_words(k * dp, num_gpus)}" for k in ks)
            split = "none" if int(product) < 1 else f"which its {dp} data-parallel replicas cannot split evenly"
            raise InputError(f"{batch_ev}: {truncated}, {split}; give a per_device_batch_size that gives each of the "
                             f"{dp} data-parallel replicas whole sequences, e.g. {offers}")
        batch_ev = f"{batch_ev}: {truncated}"
    if files_batch != global_batch:
        raise InputError(f"the MaxText files train int(per_device_batch_size {per_device!r} x {num_gpus} devices) x "
                         f"gradient_accumulation_steps {accumulation} = {files_batch} sequences per step "
                         f"({batch_ev}), not the job's global batch {global_batch}; pass --global-batch "
                         f"{files_batch} or fix the files")
    if pp > 1:
        stages_ev = "; ".join(src[k] for k in ("ici_pipeline_parallelism", "dcn_pipeline_parallelism") if k in src)
        micro, repeats = _pipeline(mesh, num_layers, pp, stages_ev or BASE_SOURCE)
        if accumulation != 1:
            raise InputError(f"gradient_accumulation_steps {accumulation} with a pipeline: placement prices the "
                             f"pipeline's num_pipeline_microbatches per step only")
        out["vpp"] = (repeats, src.get("num_pipeline_repeats", BASE_SOURCE))
    else:
        micro = int(accumulation)
    mbs, rem = divmod(global_batch, dp * micro)
    if rem or mbs < 1:
        raise InputError(f"global batch {global_batch} is not dp {dp} x {micro} micro-batches x a whole micro-batch "
                         f"({batch_ev})")
    out["micro_batch_size"] = (mbs, batch_ev)
    return out


def _exact_words(micro_batch: int, num_devices: int) -> str:
    """A per_device_batch_size MaxText trains `micro_batch` sequences a micro-batch from, as a config would write it
    (`exact_per_device`; 2, not 2.0)."""
    value = exact_per_device(micro_batch, num_devices)
    if value is None:
        return f"no float (MaxText's int({num_devices} x per_device_batch_size) never gives {micro_batch})"
    return f"{value:g}" if value.is_integer() else repr(value)


def _pipeline(mesh: dict, num_layers: int, stages: int, stages_ev: str) -> tuple[int, int]:
    """(micro-batches, repeats) MaxText 0.2.5 runs a pipeline of `stages` stages with, or the refusal of a pipeline
    its config validation stops (configs/types.py:4547-4607, in its order) or placement cannot price."""
    src = mesh["sources"]

    def where(key: str) -> str:
        return src.get(key, f"{BASE_SOURCE} {key}: {BASE[key]}")

    per_stage = mesh["num_layers_per_pipeline_stage"]
    repeats = mesh["num_pipeline_repeats"]
    micro = mesh["num_pipeline_microbatches"]
    for key, value in (("num_layers_per_pipeline_stage", per_stage), ("num_pipeline_repeats", repeats),
                       ("num_pipeline_microbatches", micro)):
        if value != int(value):
            raise InputError(f"{where(key)}: {key} must be a whole number, got {value!r}")
    per_stage, repeats, micro = int(per_stage), int(repeats), int(micro)
    given = mesh.get("pipeline_parallel_layers", -1)
    if "moe_only_pipeline" in mesh:
        raise InputError(f"{mesh['moe_only_pipeline']}: a decoder_block 'deepseek' model with a {stages}-stage "
                         f"pipeline ({stages_ev}): MaxText pipelines only its MoE layers (pipeline_parallel_layers "
                         f"-1 is the MoE layer count, configs/types.py:4547-4550) and runs its first_num_dense_layers "
                         f"dense layers outside the pipeline (layers/nnx_decoders.py:550-575); placement prices every "
                         f"layer in the pipeline and cannot price this job; audit it without the pipeline stage axis")
    layers = num_layers if given == -1 else given  # :4547-4552 (not the DeepSeek MoE-only default: see below)
    what = (f"pipeline_parallel_layers {layers}" if given != -1 else
            f"pipeline_parallel_layers -1, the model's {num_layers} layers")
    if repeats == -1:
        repeats, remainder = divmod(layers, stages * per_stage)
        if remainder:
            raise refused(f"{where('num_layers_per_pipeline_stage')} with {stages_ev}",
                          f"num_layers_per_pipeline_stage {per_stage} x {stages} stages does not divide {what}",
                          f'configs/types.py:4556-4566 (this wording since 0765235cb, 2025-04-22): assert not '
                          f'remainder, "The number of layers per stage '
                          f'({per_stage}) times the number of stages ({stages}) must divide the number of '
                          f'pipeline_parallel_layers which defaults to decoder layers ({layers})"',
                          f"set num_layers_per_pipeline_stage to a divisor of {layers // stages} "
                          f"(= {layers} / {stages} stages)" if layers % stages == 0 else
                          f"use a number of stages that divides {layers}")
    if stages * repeats * per_stage != layers:
        raise refused(f"{where('num_pipeline_repeats')} with {where('num_layers_per_pipeline_stage')} and "
                      f"{stages_ev}", f"{stages} stages x num_pipeline_repeats {repeats} x "
                      f"num_layers_per_pipeline_stage {per_stage} = {stages * repeats * per_stage}, not {what}",
                      f'configs/types.py:4580-4586 (this wording since 0765235cb, 2025-04-22): "The product of '
                      f'pipeline stages ({stages}), repeats ({repeats}), and layers per stage ({per_stage}) must be '
                      f'equal to pipeline_parallel_layers which defaults to decoder layers ({layers})"',
                      f"leave num_pipeline_repeats at -1 (MaxText then runs {layers} / ({stages} x {per_stage}) "
                      f"repeats) or make the product {layers}")
    delay = mesh.get("pipeline_delay_activation_forwarding", False)
    if micro == -1:  # :4587-4591
        micro = 2 * stages if delay else stages
    if micro <= 0:
        raise refused(where("num_pipeline_microbatches"), f"num_pipeline_microbatches {micro}",
                      'configs/types.py:4593: assert self.num_pipeline_microbatches > 0, "num_pipeline_microbatches '
                      'must be positive"', "set it to a positive multiple of the stages, or -1")
    if micro % stages:
        raise refused(f"{where('num_pipeline_microbatches')} with {stages_ev}",
                      f"num_pipeline_microbatches {micro} with {stages} stages",
                      f'configs/types.py:4594-4597: "The number of microbatches ({micro}) must be divisible by the '
                      f'number of stages ({stages})"', f"set num_pipeline_microbatches to a multiple of {stages}")
    if delay and micro < 2 * stages:
        raise refused(f"{where('pipeline_delay_activation_forwarding')} with {where('num_pipeline_microbatches')}",
                      f"pipeline_delay_activation_forwarding with num_pipeline_microbatches {micro} and {stages} "
                      f"stages", f'configs/types.py:4603-4607 (since 6fd52ba69, 2024-08-30): "Delayed activation '
                      f'forwarding requires at least 2 * num_stages microbatches, but {stages} stages are used with '
                      f'{micro} microbatches"', f"set num_pipeline_microbatches to a multiple of {stages} of at "
                                                f"least {2 * stages} (or -1: {2 * stages}), or drop the delay")
    if layers != num_layers:
        raise InputError(f"{where('pipeline_parallel_layers')}: pipeline_parallel_layers {layers} of the model's "
                         f"{num_layers} layers: MaxText pipelines only those over the {stages} stages and runs the "
                         f"other {num_layers - layers} outside the pipeline, the stage axis acting as data "
                         f"parallelism for them (base.yml:412; layers/nnx_decoders.py:577-590); placement prices "
                         f"every layer in the pipeline and cannot price this job; leave pipeline_parallel_layers at "
                         f"-1 (or {num_layers})")
    return micro, repeats


def framework_rank(mesh: dict, tp: int, cp: int, dp: int, pp: int, ep: int, gpus_per_host: int,
                   num_gpus: int) -> np.ndarray:
    """framework_rank[r]: the device (process x GPUs per host + local index, JAX's numbering) that holds
    placement's rank r.  Placement's coordinates: tp innermost, then cp, dp (expert innermost in it, then fsdp,
    then data), pp; MaxText's device of a mesh coordinate from create_hybrid_device_mesh."""
    ici, dcn, size = _sizes(mesh, gpus_per_host, num_gpus)
    axes = list(mesh["axes"])
    per_slice = min(gpus_per_host, num_gpus)
    shape = [size[a] for a in axes]
    coords = np.indices(shape).reshape(len(axes), -1)  # every mesh position, row-major over `axes`
    dcn_idx = np.stack([coords[i] // ici[a] for i, a in enumerate(axes)])
    ici_idx = np.stack([coords[i] % ici[a] for i, a in enumerate(axes)])
    process = np.ravel_multi_index(tuple(dcn_idx), [dcn[a] for a in axes])
    local = np.ravel_multi_index(tuple(ici_idx), [ici[a] for a in axes])
    device = process * per_slice + local
    c = {a: coords[i] for i, a in enumerate(axes)}
    dp_coord = (c["data"] * size["fsdp"] + c["fsdp"]) * size["expert"] + c["expert"]
    rank = c["tensor"] + tp * (c["context"] + cp * (dp_coord + dp * c["stage"]))
    out = np.empty(num_gpus, dtype=np.int64)
    out[rank] = device
    return out
