"""GPT-NeoX configs (EleutherAI/gpt-neox configs/*.yml): Megatron layers on DeepSpeed's pipeline engine, so
the audit reads them as a DeepSpeed job."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from placement.audit.readers import common
from placement.audit.readers.common import read_int
from placement.audit.readers.neox_keys import COMMIT_DATES, FIRST_ON_MAIN, KEYS, SOURCE_HEAD
from placement.audit.readers.reading import Settings, UnknownKey
from placement.errors import InputError

NEOX_KEYS = {"pipe_parallel_size": "pp", "model_parallel_size": "tp", "train_micro_batch_size_per_gpu":
             "micro_batch_size", "gradient_accumulation_steps": "grad_accumulation", "train_batch_size": "global_batch",
             "seq_length": "seq_len", "num_layers": "num_layers", "hidden_size": "hidden_size",
             "num_attention_heads": "num_attention_heads"}
"""GPT-NeoX argument (its YAML spells them with - or _, NeoXArgs reads both) -> LaunchLayout field."""


def is_neox(data: Any) -> bool:
    """A GPT-NeoX config: it names pipe_parallel_size or model_parallel_size (with - or _)."""
    return isinstance(data, dict) and any(str(k).replace("-", "_") in ("pipe_parallel_size", "model_parallel_size")
                                          for k in data)


def read_yamls(parts: list[tuple[Path, dict, list[str]]], s: Settings) -> None:
    """A GPT-NeoX config, given as one or several YAML files that GPT-NeoX merges (deepy.py train.py a.yml b.yml;
    a key in two files is its error, and so here): TP, PP, micro-batch, accumulation, ZeRO stage, activation
    checkpointing (its chunk and synchronize), precision, the model's dimensions, its parallel residual
    (`gpt_j_residual`), its eager extras and its attention kernel (`attention_config`)."""
    keys: dict[str, tuple[Any, Any, Path, list[str]]] = {}
    for path, data, lines in parts:
        for k, v in data.items():
            norm = str(k).replace("-", "_")
            if norm in keys:
                raise InputError(f"{path}: {k} is also set in {keys[norm][2]}; GPT-NeoX refuses a key in two config "
                                 f"files (duplicate keys with previously loaded file): keep it in one")
            keys[norm] = (k, v, path, lines)
    first = parts[0][0]
    s.neox = True

    stated_at: dict[tuple[Path, str], int] = {}  # (file, a word followed by ":") -> its first line, not a comment
    for path, _, lines in parts:
        for n, line in enumerate(lines, 1):
            if not line.lstrip().startswith("#"):
                for m in KEY_AT.finditer(line):
                    stated_at.setdefault((path, m.group(1)), n)

    def line_of(key: str) -> tuple[Path, int | None, str]:
        """(file, line number, line text) where the files state `key` (None, "": not on a line of its own)."""
        raw, _, path, lines = keys[key]
        n = stated_at.get((path, str(raw)))
        if n is None:  # a key with other characters than KEY_AT's words
            n = next((n for n, line in enumerate(lines, 1) if not line.lstrip().startswith("#") and re.search(
                rf"(?<![\w-])[\"']?{re.escape(str(raw))}[\"']?\s*:", line)), None)
        return (path, n, lines[n - 1].strip()[:160]) if n is not None else (path, None, "")

    def ev(key: str) -> str:
        path, n, text = line_of(key)
        return f"{path}:{n}: {text}" if n is not None else f"{path}: {keys[key][0]}"

    _check_keys(keys, line_of, ev, s)
    s.config_keys = {k: _text(v) for k, (_, v, _, _) in keys.items()}
    s.config_spelling = {k: str(raw) for k, (raw, _, _, _) in keys.items()}
    dashed = sum("-" in str(raw) for raw, _, _, _ in keys.values())
    if dashed > sum("_" in str(raw) for raw, _, _, _ in keys.values()):
        s.config_spelling["-"] = "-"  # the files spell their keys with dashes: so the keys they do not state
    zero_section = keys.get("zero_optimization", (None, None))[1]
    if isinstance(zero_section, dict) and "stage" in zero_section:
        s.config_keys["zero_optimization.stage"] = _text(zero_section["stage"])

    def flag(key: str, default: bool | None = None) -> bool | None:
        """A boolean key as GPT-NeoX's validate_types takes it (YAML true/false), else an InputError."""
        if key not in keys:
            return default
        value = keys[key][1]
        if not isinstance(value, bool):
            raise InputError(f"{ev(key)}: {keys[key][0]} must be true or false, got {value!r} (GPT-NeoX's "
                             f"validate_types refuses anything else); write true or false without quotes")
        return value

    def number(key: str, kind: type | tuple = int) -> Any:
        """A numeric key as GPT-NeoX's validate_types takes it (a YAML number, not "2"), else an InputError; None
        where the files leave it out."""
        if key not in keys:
            return None
        value = keys[key][1]
        if isinstance(value, bool) or not isinstance(value, kind):
            what = "a whole number" if kind is int else "a number"
            raise InputError(f"{ev(key)}: {keys[key][0]} must be {what}, got {value!r} (GPT-NeoX's validate_types "
                             f"refuses anything else); write the number without quotes")
        return value

    for key, field in NEOX_KEYS.items():
        value = number(key)
        if value is None:
            continue
        if key == "pipe_parallel_size" and value == 0:  # GPT-NeoX's default: no PipelineModule, one stage
            s.put(field, 1, f"{ev(key)} (0: no PipelineModule, one stage)")
            continue
        s.put(field, read_int(value, key, ev(key), minimum=1), ev(key))
    _model_widths(keys, ev, number, s)
    zero = keys.get("zero_optimization", (None, None))[1]
    if isinstance(zero, dict) and "stage" in zero:
        stage = read_int(zero["stage"], "zero_optimization.stage", ev("zero_optimization"))
        if not 0 <= stage <= 3:
            raise InputError(f"{ev('zero_optimization')}: zero_optimization.stage must be 0..3, got {stage}")
        s.put("zero_stage", stage, ev("zero_optimization"))
    checkpointed = flag("checkpoint_activations")
    if checkpointed is not None:
        s.put("recompute", "full" if checkpointed else "none", ev("checkpoint_activations"))
    _checkpointing(ev, flag, number, bool(checkpointed), s)
    if flag("sequence_parallel") is not None:
        s.put("sequence_parallel", flag("sequence_parallel"), ev("sequence_parallel"))
    for key in ("fp16", "bf16"):
        sec = keys.get(key, (None, None))[1]
        if isinstance(sec, dict) and sec.get("enabled", True) in (True, "true"):
            s.put("precision", "bf16", ev(key))
            if key == "fp16":
                s.ignored.append(f"fp16: FP16 mixed precision with loss scaling, priced as bf16 ({ev(key)})")
    if "precision" in keys and str(keys["precision"][1]) in ("fp16", "bfloat16", "bf16"):
        s.put("precision", "bf16", ev("precision"))
    for key in ("partition_activations", "cpu_offload"):
        if flag(key):
            s.ignored.append(f"{key}: true ({ev(key)})")
    if not s.sources:
        raise InputError(f"{', '.join(str(p) for p, _, _ in parts)}: a GPT-NeoX config without pipe_parallel_size, "
                         f"model_parallel_size or batch keys; nothing to audit")
    # the model code's choices, each GPT-NeoX's default where no file of the job states it
    _attention_kernel(keys, ev, first, s)
    _fusions(keys, ev, flag, first, s)
    if (s.value("pp") or 1) > 1:
        s.put("recipe.pipeline_sends_mask", True,
              f"{ev('pipe_parallel_size')} (GPT-NeoX's GPT2ModelPipe layers return (hidden_states, attention_mask), "
              f"and DeepSpeed's pipeline engine sends the [1, 1, s, s] mask with every activation)")
    if flag("gpt_j_residual") is not None:
        s.put("parallel_residual", flag("gpt_j_residual"), ev("gpt_j_residual"))
    elif not s.has("parallel_residual"):  # another of the job's files may set it; GPT-NeoX's default is off
        s.put("parallel_residual", False, f"{first}: no gpt_j_residual (GPT-NeoX's default: false)")


KEY_AT = re.compile(r"(?<![\w.-])[\"']?([\w.-]+)[\"']?\s*:")
"""A key where a line states it: a word of letters, digits, `_`, `-` or `.`, maybe quoted, then `:`."""


def _text(value: Any) -> str:
    """A config value as the change list spells it: true / false, a mapping or a list elided, else as written."""
    if isinstance(value, dict):
        return "{...}"
    if isinstance(value, list):
        return "[...]"
    return str(value).lower() if isinstance(value, bool) else str(value)


VERSIONS_READ = f"the NeoXArgs fields of EleutherAI/gpt-neox from {min(COMMIT_DATES.values())[:7]} to {SOURCE_HEAD}"
"""The GPT-NeoX versions neox_keys.KEYS was read from, for messages."""
REFUSES = "GPT-NeoX refuses a config with a key it does not know (NeoXArgs(**config) raises TypeError)"
"""What GPT-NeoX does with an unknown key, for messages."""


def nearest_key(key: str) -> str | None:
    """The known GPT-NeoX key nearest to `key` (common.nearest_key over neox_keys.KEYS), or None."""
    return common.nearest_key(key, KEYS)


def typo_of(key: str, nearest: str | Literal[False] | None = False) -> str | None:
    """The known GPT-NeoX key `key` surely misspells, or None (common.typo_of over neox_keys.KEYS)."""
    return common.typo_of(key, KEYS, nearest)


def _check_keys(keys: dict, line_of, ev, s: Settings) -> None:
    """Every top-level key against the keys GPT-NeoX takes in any version (neox_keys.KEYS): GPT-NeoX refuses a config
    with another one (NeoXArgs(**config) raises TypeError), so a sure typo of a known key is an error naming each, and
    any other unknown key (a fork's, or a version newer than the one read) is kept in `unknown_keys`, for the audit to
    report."""
    typos = []
    for norm, (raw, _, path, _) in keys.items():
        if norm in KEYS:
            continue
        near = nearest_key(str(raw))
        known = typo_of(str(raw), near)
        if known is not None:  # in the file's own spelling: dashes where it writes dashes
            meant = known.replace("_", "-") if "-" in str(raw) and "_" not in str(raw) else known
            typos.append(f"{ev(norm)}: unknown key {raw}; did you mean {meant}?")
            continue
        _, line, _ = line_of(norm)
        s.unknown_keys.append(UnknownKey(key=str(raw), file=str(path), line=line, suggestion=near))
    if typos:
        raise common.typo_error(typos, "No GPT-NeoX version", VERSIONS_READ, REFUSES)


def since(key: str) -> tuple[str, str]:
    """(commit, date) of the first GPT-NeoX version that takes `key`: the first of its main line (FIRST_ON_MAIN) for a
    key the dataclasses had from the start."""
    commit = KEYS[key][0]
    if COMMIT_DATES[commit] <= COMMIT_DATES[FIRST_ON_MAIN]:
        commit = FIRST_ON_MAIN
    return commit, COMMIT_DATES[commit]


def version_window(stated: Iterable[str]) -> tuple[tuple[str, str, str] | None, tuple[str, str, str] | None]:
    """What a config's own keys say of the GPT-NeoX version that runs it: (key, commit, date) of the key GPT-NeoX
    added last, which the version must have, and of the key GPT-NeoX removed first, which it must still have (None
    where no known key bounds it)."""
    known = [k for k in stated if k in KEYS]
    newest = max(((k, *since(k)) for k in known), key=lambda x: (x[2], x[0]), default=None)
    removed = [(k, KEYS[k][1], COMMIT_DATES[KEYS[k][1]]) for k in known if KEYS[k][1] is not None]
    oldest = min(removed, key=lambda x: (x[2], x[0]), default=None)
    return newest, oldest


def version_takes(key: str, stated: Iterable[str]) -> bool | None:
    """Whether the GPT-NeoX version that runs a config stating the keys `stated` takes `key`: True or False where
    the config's own keys decide it (version_window), None where they leave it open."""
    if key in stated:
        return True
    first, last = since(key)[1], KEYS[key][1] and COMMIT_DATES[KEYS[key][1]]
    newest, oldest = version_window(stated)
    low = newest[2] if newest else None
    high = oldest[2] if oldest else None
    if (high is not None and high < first) or (last and low is not None and low > last):
        return False
    if low is not None and low >= first and (not last or (high is not None and high <= last)):
        return True
    return None


GATED = frozenset({"geglu", "reglu", "bilinear", "swiglu", "glu"})
"""GPT-NeoX activations whose MLP is gated (megatron/model/activations.py get_activation)."""


def _model_widths(keys: dict, ev, number, s: Settings) -> None:
    """The MLP width and KV heads GPT-NeoX builds from the config, for the audit to compare with --model: the MLP is
    intermediate_size, else expansion_factor x hidden, else 4 x hidden; a gated activation takes two thirds of it
    for its two branches, then rounds each branch up to a multiple of 256 (megatron/model/transformer.py
    ParallelMLP, multiple_of 256); num_kv_heads, else the attention heads."""
    hidden = number("hidden_size")
    if hidden is None:
        return
    act = str(keys.get("activation", (None, "gelu"))[1])
    size, factor = number("intermediate_size"), number("expansion_factor", (int, float))
    if size is not None:
        ffn, where = size, ev("intermediate_size")
    elif factor is not None:
        ffn, where = int(factor * hidden), ev("expansion_factor")
    else:
        ffn, where = 4 * hidden, f"{ev('hidden_size')} (no intermediate_size: GPT-NeoX's 4 x hidden)"
    if act in GATED:
        ffn = ffn * 2 // 3 // 2
        where += f"; activation {act}: two thirds for the gated pair"
    branch = 256 * -(-ffn // 256)
    s.put("ffn_hidden_size", branch, f"{where}, rounded up to a multiple of 256 (GPT-NeoX ParallelMLP)")
    kv = number("num_kv_heads")
    if kv is not None:
        s.put("num_query_groups", kv, ev("num_kv_heads"))


def _checkpointing(ev, flag, number, checkpointed: bool, s: Settings) -> None:
    """recipe.checkpoint_interval from `checkpoint_num_layers` (the layers DeepSpeed checkpoints as one chunk) and
    recipe.checkpoint_sync from `synchronize_each_layer`, both only where layers are checkpointed."""
    raw = number("checkpoint_num_layers")
    if raw is not None and checkpointed:
        n = read_int(raw, "checkpoint_num_layers", ev("checkpoint_num_layers"), minimum=1)
        s.put("recipe.checkpoint_interval", n, ev("checkpoint_num_layers"))
    if flag("synchronize_each_layer"):
        if checkpointed:
            s.put("recipe.checkpoint_sync", True, ev("synchronize_each_layer"))
        else:
            s.ignored.append(f"synchronize_each_layer: true without checkpoint_activations: no layer is "
                             f"checkpointed, so nothing is synchronized ({ev('synchronize_each_layer')})")


def _fusions(keys: dict, ev, flag, path: Path, s: Settings) -> None:
    """recipe.fused_model_ops: false where GPT-NeoX runs an extra of the model eagerly: the bias-dropout-add of biased
    projections without `bias_dropout_fusion` (megatron/model/transformer.py `_get_bias_dropout`), or a partial
    RoPE, whose rotated and passed-through slices are concatenated back with or without `rope_fusion`
    (ParallelSelfAttention).  Defaults from megatron/neox_arguments/neox_args.py: pos_emb learned, rotary_pct 1,
    biases on, both fusions off."""
    if s.has("recipe.fused_model_ops"):  # another of the job's files set it
        return
    biased = [k for k in ("use_bias_in_attn_linear", "use_bias_in_mlp") if flag(k, True)]
    rotary = "pos_emb" in keys and str(keys["pos_emb"][1]) == "rotary"
    pct = keys.get("rotary_pct", (None, 1.0))[1]
    if not isinstance(pct, (int, float)) or isinstance(pct, bool) or not 0 < pct <= 1:
        raise InputError(f"{ev('rotary_pct')}: rotary_pct must be a number in (0, 1], got {pct!r}")
    eager = []
    if biased and not flag("bias_dropout_fusion", False):
        said = ev("bias_dropout_fusion") if "bias_dropout_fusion" in keys else \
            f"{path}: no bias_dropout_fusion (GPT-NeoX's default: false)"
        eager.append(f"{said}, with biased projections: the bias-dropout-add runs unfused")
    if rotary and pct < 1:
        eager.append(f"{ev('rotary_pct')}: the rotated and passed-through slices are concatenated back, with or "
                     f"without rope_fusion")
    if eager:
        s.put("recipe.fused_model_ops", False, "; ".join(eager))
    else:
        said = [ev("bias_dropout_fusion")] if biased else [ev(k) for k in ("use_bias_in_attn_linear",
                                                                          "use_bias_in_mlp")]
        whole = f"; {ev('pos_emb')}, the whole head rotated" if rotary else ""
        s.put("recipe.fused_model_ops", True, "; ".join(said) + whole)
    bf16 = next((k for k in ("bf16", "precision") if k in keys and (
        (k == "bf16" and isinstance(keys[k][1], dict) and keys[k][1].get("enabled", True) is True)
        or (k == "precision" and str(keys[k][1]) in ("bf16", "bfloat16")))), None)
    if rotary and bf16 and not flag("rope_fusion", False):
        s.ignored.append(f"bf16 without rope_fusion: GPT-NeoX rotates with eager ops (apply_rotary_pos_emb_torch), "
                         f"priced as a fused rotation ({ev(bf16)})")


ATTENTION_KERNELS = {"global": "unfused", "flash": "flash2"}
"""GPT-NeoX attention type -> the kernel it runs: "global" is ParallelSelfAttention's own core (scores in HBM through
baddbmm, the fused masked softmax and bmm), "flash" calls the flash-attn 2 package's flash_attn_func
(megatron/model/transformer.py); the other types (local, sparse, gMLP, Mamba, RWKV) are not priced."""


def _attention_kernel(keys: dict, ev, path: Path, s: Settings) -> None:
    """recipe.attention_kernel from `attention_config` ([[types, count or "all"], ...], expanded by
    megatron/utils.py expand_attention_types; GPT-NeoX's default, unset, is global attention on every layer):
    the kernel of most layers, the rest named as not priced."""
    if "attention_config" not in keys:
        if not s.has("recipe.attention_kernel"):  # another of the job's files may set it
            s.put("recipe.attention_kernel", "unfused", f"{path}: no attention_config (GPT-NeoX's default: global "
                                                        f"attention on every layer, its unfused core)")
        return
    value = keys["attention_config"][1]
    layers: dict[str, int] = {}
    items = value if isinstance(value, list) else []
    if items and all(isinstance(x, str) for x in items):  # already expanded: one type per layer
        items = [[[x], 1] for x in items]
    for item in items:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], list)
                and (item[1] == "all" or (isinstance(item[1], int) and not isinstance(item[1], bool)))):
            raise InputError(f"{ev('attention_config')}: each attention_config item is [[types...], count or "
                             f"\"all\"], got {item!r}; fix the item as GPT-NeoX's expand_attention_types reads it")
        for kind in item[0]:
            layers[str(kind)] = layers.get(str(kind), 0) + (1 if item[1] == "all" else item[1])
    if not items or not layers:
        raise InputError(f"{ev('attention_config')}: attention_config = {value!r} names no attention type; give "
                         f"[[[\"global\"], NUM_LAYERS]] or [[[\"flash\"], NUM_LAYERS]]")
    priced = {k: n for k, n in layers.items() if k in ATTENTION_KERNELS}
    other = sorted(set(layers) - set(priced))
    if other:
        s.ignored.append(f"attention types {', '.join(other)}: not priced ({ev('attention_config')})")
    if priced:
        kind = max(sorted(priced), key=lambda k: priced[k])
        if len(priced) > 1:
            s.ignored.append(f"attention types {' and '.join(sorted(priced))} mixed: priced as {kind}, the type of "
                             f"most layers ({ev('attention_config')})")
        s.put("recipe.attention_kernel", ATTENTION_KERNELS[kind], ev("attention_config"))
