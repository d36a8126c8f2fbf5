"""GPT-NeoX configs (EleutherAI/gpt-neox configs/*.yml): Megatron layers on DeepSpeed's pipeline engine, so
the audit reads them as a DeepSpeed job."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from placement.audit.readers import common
from placement.audit.readers.common import FP16_MIXED, read_int, start_refusal
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
    s.neox_configs = tuple(str(path) for path, _, _ in parts)

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
    _model_widths(keys, ev, number, flag, s)
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
    missing = [k for k in REQUIRED if k not in keys]
    if missing:  # another file of the job may state them: a part of its config, not refused
        s.ignored.append(f"{first}: no {', '.join(missing)}: GPT-NeoX's validate_values refuses a config without "
                         f"{'it' if len(missing) == 1 else 'them'} ({NEOX_ARGS}:1224-1242, \"... is None.\"); the "
                         f"files given are read as a part of the job's config, whose other files state "
                         f"{'it' if len(missing) == 1 else 'them'}")
    _precision(keys, ev, first, not missing, s)
    _batch(keys, ev, s)
    _refusals(keys, ev, number, s)
    for key, what in NEOX_UNPRICED.items():
        if flag(key):
            s.ignored.append(f"{key}: true ({ev(key)}): {what}")
    if not s.sources:
        raise InputError(f"{', '.join(str(p) for p, _, _ in parts)}: a GPT-NeoX config without pipe_parallel_size, "
                         f"model_parallel_size or batch keys; nothing to audit")
    # the model code's choices, each GPT-NeoX's default where no file of the job states it
    _attention_kernel(keys, ev, first, number("num_layers"), s)
    _fusions(keys, ev, flag, first, s)
    if (s.value("tp") or 1) > 1 and not s.has("recipe.tp_async_backward"):
        s.put("recipe.tp_async_backward", False,
              f"{ev('model_parallel_size')} (GPT-NeoX's ColumnParallelLinear reduces its input gradient in autograd, "
              f"a plain all-reduce on its own: megatron/mpu/mappings.py _CopyToModelParallelRegion)")
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
    return version_has(since(key)[1], stated, KEYS[key][1] and COMMIT_DATES[KEYS[key][1]])


def version_has(first: str, stated: Iterable[str], last: str | None = None) -> bool | None:
    """Whether the GPT-NeoX version that runs a config stating the keys `stated` has what GPT-NeoX added on date
    `first` (and, where `last` is given, had last on that date): True or False where the config's own keys decide
    it (version_window), None where they leave it open.  By commit dates (COMMIT_DATES): a config whose newest key
    came the same day as `first` counts as having it."""
    newest, oldest = version_window(stated)
    low = newest[2] if newest else None
    high = oldest[2] if oldest else None
    if (high is not None and high < first) or (last and low is not None and low > last):
        return False
    if low is not None and low >= first and (not last or (high is not None and high <= last)):
        return True
    return None


def window_text(stated: Iterable[str]) -> str:
    """What the config's keys say of its GPT-NeoX version (version_window), for messages: "the config's keys date its
    GPT-NeoX 3d8fec02 (2024-01-26) or later, by layernorm_fusion", with "and 0535bfbb (2022-12-10) or earlier, by
    save_interval" where a key it states was removed."""
    newest, oldest = version_window(stated)
    parts = ([f"{newest[1]} ({newest[2]}) or later, by {newest[0]}"] if newest else []) + \
        ([f"{oldest[1]} ({oldest[2]}) or earlier, by {oldest[0]}"] if oldest else [])
    return f"the config's keys date its GPT-NeoX {' and '.join(parts)}" if parts else \
        "the config's keys do not date its GPT-NeoX"


GATED = frozenset({"geglu", "reglu", "bilinear", "swiglu", "glu"})
"""GPT-NeoX activations whose MLP is gated (megatron/model/activations.py get_activation, since 0d4bdb96; before
it geglu alone, in ParallelMLP itself)."""
GATED_SINCE = ("0d4bdb96", "2024-09-06")
"""The GPT-NeoX commit that added reglu, swiglu, bilinear and glu to `activation`'s choices (neox_args.py): an
older NeoXArgs.validate_types refuses them."""

MLP_ERAS: tuple[tuple[str, str], ...] = (
    ("52bd29b0", "2021-04-26"),  # geglu: dense_h_to_4h 8 x hidden, dense_4h_to_h 4 x hidden
    ("ec7e2a8d", "2021-05-08"),  # geglu-fix: int(4 * 2 / 3 * hidden * 2) for the pair, half of it back
    ("d2ef139b", "2021-05-20"),  # int(4 * 2 / 3 * hidden) * 2 for the pair
    ("038b0114", "2023-04-03"),  # ff_mult int(4 * 2 / 3) = 2; from 299b68cd, mlp_type llama: LLaMAParallelMLP
    ("0d4bdb96", "2024-09-06"),  # one ParallelMLP: intermediate_size / expansion_factor, gated pair, multiple_of 256
    ("adbf5d6f", "2024-09-10"),  # multiple_of = mlp_multiple_of (default 1)
)
"""The first commit (and its date) of each era of GPT-NeoX's MLP widths on its main line, read from
megatron/model/transformer.py ParallelMLP (and LLaMAParallelMLP, 299b68cd to 0d4bdb96) at each; _mlp_built gives
what each builds."""
LLAMA, MULTIPLE_256, LATEST = 3, 4, 5
"""MLP_ERAS: the one where mlp_type llama builds LLaMAParallelMLP (from 299b68cd), ParallelMLP's multiple_of 256,
mlp_multiple_of's."""
OLD_MULTIPLE = 256
"""ParallelMLP's multiple_of from 0d4bdb96 until adbf5d6f (and LLaMAParallelMLP's before it)."""


def _era_label(first: int, last: int | None = None) -> str:
    """MLP_ERAS[first] (to MLP_ERAS[last]) as a range of GPT-NeoX versions."""
    end = first if last is None else last
    commit, date = MLP_ERAS[first]
    if end + 1 == len(MLP_ERAS):
        return f"GPT-NeoX {commit} ({date}) or later"
    return f"GPT-NeoX {commit} ({date}) to {MLP_ERAS[end + 1][0]} ({MLP_ERAS[end + 1][1]})"


@dataclass(frozen=True)
class _Mlp:
    """What a config states of its MLP (megatron/neox_arguments/neox_args.py defaults where it does not)."""

    hidden: int
    act: str
    size: int | None
    """intermediate_size."""
    factor: float | None
    """expansion_factor."""
    mlp_type: str | None
    te: bool
    """te_layernorm_mlp: Transformer Engine's LayerNormMLP instead of ParallelMLP."""


def _mlp_built(era: int, m: _Mlp, multiple: int) -> tuple[int, int, str]:
    """(linear1's output width, linear2's input width, how) of the MLP GPT-NeoX builds in MLP_ERAS[era], from
    megatron/model/transformer.py at that era (`multiple`: multiple_of, from 0d4bdb96).  linear2's input is the
    width placement compares with --model's ffn_hidden_size (a gated MLP's branch)."""
    h = m.hidden
    commit = MLP_ERAS[era][0]
    if era >= MULTIPLE_256:
        ffn = m.size or (int(m.factor * h) if m.factor else 4 * h)
        said = f"intermediate_size {m.size}" if m.size else \
            f"int(expansion_factor {m.factor} x {h}) = {ffn}" if m.factor else f"4 x hidden = {ffn}"
        if m.te:  # megatron/model/transformer_engine.py TELayerNormMLP: ffn_hidden_size=ffn_dim
            return 2 * ffn if m.act in GATED else ffn, ffn, f"{said}, TELayerNormMLP's ffn_hidden_size as it is"
        if m.act in GATED:
            pair = int(ffn * 2 / 3)
            branch = pair // 2
            said += f"; {m.act} is gated: int({ffn} x 2/3) = {pair} for the pair, {branch} per branch"
        else:
            pair = branch = ffn
        if multiple > 1:
            said += (f", rounded up to a multiple of {multiple} (linear1's {'pair' if m.act in GATED else 'output'} "
                     f"to {2 * multiple})")
        return 2 * multiple * -(-pair // (2 * multiple)), multiple * -(-branch // multiple), said
    if m.mlp_type == "llama" and era == LLAMA:  # 299b68cd to 0d4bdb96: LLaMAParallelMLP, SiLU-gated w1 x w3
        if m.size is not None:
            return 2 * m.size, m.size, f"mlp_type llama: LLaMAParallelMLP's intermediate_size {m.size} as it is"
        raw = int(2 * h * 4 / 3)
        ff = OLD_MULTIPLE * -(-raw // OLD_MULTIPLE)
        return 2 * ff, ff, (f"mlp_type llama: LLaMAParallelMLP's int(2 x {h} x 4/3) = {raw}, rounded up to a multiple "
                            f"of {OLD_MULTIPLE}")
    unread = ", intermediate_size unread (ParallelMLP's 4 x hidden)" if m.size is not None else ""
    if m.act != "geglu":
        return 4 * h, 4 * h, f"4 x hidden = {4 * h}{unread}"
    if commit == "52bd29b0":
        return 8 * h, 4 * h, f"geglu: 8 x hidden = {8 * h} for the pair, 4 x hidden = {4 * h} back{unread}"
    if commit == "ec7e2a8d":
        pair = int(4 * 2 / 3 * h * 2)
        return pair, pair // 2, f"geglu: int(4 x 2/3 x {h} x 2) = {pair} for the pair, half of it back{unread}"
    if commit == "d2ef139b":
        branch = int(4 * 2 / 3 * h)
        return 2 * branch, branch, f"geglu: int(4 x 2/3 x {h}) = {branch} per branch{unread}"
    return 4 * h, 2 * h, f"geglu: int(4 x 2/3) = 2, 2 x {h} = {2 * h} per branch{unread}"


def _gated(m: _Mlp, era: int) -> bool:
    """Whether the MLP of MLP_ERAS[era] is gated: an activation of GATED from 0d4bdb96, geglu or LLaMAParallelMLP
    before it."""
    if era >= MULTIPLE_256:
        return m.act in GATED
    return m.act == "geglu" or (m.mlp_type == "llama" and era == LLAMA)


def _chains(built: tuple[int, int, str], m: _Mlp, era: int) -> bool:
    """Whether ParallelMLP's forward can run what it built: linear1's output (halved by the gate where gated)
    is linear2's input."""
    l1, l2, _ = built
    return l1 == (2 * l2 if _gated(m, era) else l2)


def _mlp_eras(stated: set[str], act: str, ev) -> list[int]:
    """The MLP_ERAS the config's GPT-NeoX can be in: those its keys allow (version_window; all of them where no one
    version has all its keys), and from 0d4bdb96 where its activation is a gated one other than geglu: an InputError
    where its keys date it before that."""
    newest, oldest = version_window(stated)
    low, high = (newest[2] if newest else None), (oldest[2] if oldest else None)
    eras = [i for i, (_, date) in enumerate(MLP_ERAS)
            if (high is None or high >= date) and (low is None or i + 1 == len(MLP_ERAS) or low < MLP_ERAS[i + 1][1])]
    eras = eras or list(range(len(MLP_ERAS)))  # keys no one version has together: they do not date it
    if act in GATED - {"geglu"}:
        eras = [i for i in eras if MLP_ERAS[i][1] >= GATED_SINCE[1]]
        if not eras:
            raise InputError(f"{ev('activation')}: activation {act} came with GPT-NeoX {GATED_SINCE[0]} "
                             f"({GATED_SINCE[1]}), but {oldest[0]} is last in {oldest[1]} ({oldest[2]}): no GPT-NeoX "
                             f"version takes both (an older one's validate_types refuses {act}, a newer one refuses "
                             f"{oldest[0]}); drop {oldest[0]} or use an activation of its version")
    return eras


def _alternatives(eras: list[int], built: dict, runs: list[int]) -> list[tuple[str, int | str]]:
    """(versions, what they build) for `eras`, adjacent eras that build the same width merged into one range: the
    width of linear2's input, or where ParallelMLP's forward cannot chain linear1 into linear2, the two widths."""
    out: list[tuple[int, int, int | str]] = []
    for i in eras:
        w: int | str = built[i][1] if i in runs else (f"linear1 {built[i][0]} and linear2 {built[i][1]} wide, "
                                                      f"which its forward cannot chain")
        if out and out[-1][1] == i - 1 and out[-1][2] == w:
            out[-1] = (out[-1][0], i, w)
        else:
            out.append((i, i, w))
    return [(_era_label(a, b), w) for a, b, w in out]


def _mlp_fix(built: tuple[int, int, str], m: _Mlp, multiple: int) -> str:
    """How to state an MLP ParallelMLP (multiple_of `multiple`) can chain, for an error: an intermediate_size of
    3 x the branch (gated) or a multiple of 2 x multiple_of, which it builds as it is."""
    l1, l2, _ = built
    if m.act in GATED:
        of = f", the branch a multiple of {multiple}" if multiple > 1 else ""
        return f"state intermediate_size as 3 x the branch width{of} (3 x {l2} = {3 * l2} builds {l2})"
    return f"state intermediate_size as a multiple of {2 * multiple} ({l1} builds {l1})"


def _model_widths(keys: dict, ev, number, flag, s: Settings) -> None:
    """The MLP width and KV heads GPT-NeoX builds from the config, for the audit to compare with --model: the width
    of the MLP's linear2 input (a gated MLP's branch) as the config's GPT-NeoX builds it (MLP_ERAS, _mlp_built),
    its version read from the config's keys (version_window): with mlp_multiple_of, GPT-NeoX adbf5d6f or later and
    that multiple; from adbf5d6f without it, the default 1; before it, that era's rule (ParallelMLP's multiple_of
    256 from 0d4bdb96, LLaMAParallelMLP for mlp_type llama before it).  Where the keys leave open whether the version
    is older than adbf5d6f, the multiple_of 256 of 0d4bdb96 to adbf5d6f is assumed, and said, with what the other
    versions build where that differs (the evidence and an `ignored` note).  An MLP no version the keys allow can
    run (linear1 not chaining into linear2) is an error.  num_kv_heads, else the attention heads."""
    hidden = number("hidden_size")
    if hidden is None:
        return
    if "intermediate_size" in keys and "expansion_factor" in keys:
        raise InputError(f"{ev('intermediate_size')}; {ev('expansion_factor')}: GPT-NeoX's ParallelMLP asserts that "
                         f"only one of intermediate_size and expansion_factor is set; keep one")
    size, factor = number("intermediate_size"), number("expansion_factor", (int, float))
    if size is not None:
        size = read_int(size, "intermediate_size", ev("intermediate_size"), minimum=1)
    if factor is not None and not (math.isfinite(factor) and int(factor * hidden) >= 1):
        raise InputError(f"{ev('expansion_factor')}: expansion_factor x hidden_size must be a width of at least 1, "
                         f"got {factor!r} x {hidden}; give the factor GPT-NeoX multiplies hidden_size by (4 for 4 x "
                         f"hidden)")
    m = _Mlp(hidden, str(keys.get("activation", (None, "gelu"))[1]), size, factor,
             str(keys["mlp_type"][1]) if "mlp_type" in keys else None, bool(flag("te_layernorm_mlp", False)))
    stated = set(keys)
    eras = _mlp_eras(stated, m.act, ev)
    multiple = 1
    if "mlp_multiple_of" in keys:
        multiple = read_int(number("mlp_multiple_of"), "mlp_multiple_of", ev("mlp_multiple_of"), minimum=1)
    built = {i: _mlp_built(i, m, multiple if i == LATEST else OLD_MULTIPLE) for i in eras}
    runs = [i for i in eras if _chains(built[i], m, i)]
    where = "; ".join(ev(k) for k in ("hidden_size", "activation", "intermediate_size", "expansion_factor",
                                      "mlp_type", "mlp_multiple_of", "te_layernorm_mlp") if k in keys)
    dated = window_text(stated)
    if m.act in GATED - {"geglu"}:
        dated += f", and activation {m.act} {GATED_SINCE[0]} ({GATED_SINCE[1]}) or later"
    takes = version_takes("mlp_multiple_of", stated)
    if takes is False and m.mlp_type == "llama" and LLAMA in eras:
        era = LLAMA  # the versions where mlp_type llama builds LLaMAParallelMLP; 0d4bdb96 to adbf5d6f ignore it
    elif takes is None and MULTIPLE_256 in eras:
        era = MULTIPLE_256  # assumed: ParallelMLP's multiple_of 256, the versions just before mlp_multiple_of
    else:
        era = eras[-1]
    if era not in runs:
        l1, l2, how = built[era]
        if not runs:
            fix = _mlp_fix(built[era], m, multiple if era == LATEST else OLD_MULTIPLE) if era >= MULTIPLE_256 else \
                "state another hidden_size"
            if era == LATEST and "mlp_multiple_of" not in keys and _chains(_mlp_built(LATEST, m, OLD_MULTIPLE), m, era):
                fix += (f", or mlp_multiple_of 256 as GPT-NeoX's llama configs do (it builds "
                        f"{_mlp_built(LATEST, m, OLD_MULTIPLE)[1]})")
            split = f" (its gate halves linear1 into two of {l1 // 2})" if _gated(m, era) else ""
            every = "; every other version they allow fails too" if len(eras) > 1 else ""
            raise InputError(f"{where}: {how}: {_era_label(era)} builds linear1 {l1} wide and linear2 {l2}{split}, "
                             f"which ParallelMLP's forward cannot chain ({dated}{every}); {fix}")
        era = runs[-1]
    _, width, how = built[era]
    if width < 1:
        raise InputError(f"{where}: {how}: {width}: GPT-NeoX would build an MLP without width; give a larger "
                         f"intermediate_size or expansion_factor")
    if era == LATEST:
        said = f"{_era_label(era)}, " + ("which takes mlp_multiple_of" if "mlp_multiple_of" in keys else
                                         "mlp_multiple_of's default 1")
    else:
        said = _era_label(era) + (f", ParallelMLP's multiple_of {OLD_MULTIPLE}" if era == MULTIPLE_256 else
                                  ", where mlp_type llama builds LLaMAParallelMLP" if m.mlp_type == "llama"
                                  and era == LLAMA else "")
    others = _alternatives([i for i in eras if i != era], built, runs)
    versions = ", ".join(label for label, _ in others)
    code = "megatron/model/transformer_engine.py TELayerNormMLP" if m.te else "megatron/model/transformer.py " + (
        "LLaMAParallelMLP" if m.mlp_type == "llama" and era == LLAMA else "ParallelMLP")
    if not others:
        s.put("ffn_hidden_size", width, f"{where}: {how}: {width} ({said}; {dated}; {code})")
    elif all(w == width for _, w in others):
        s.put("ffn_hidden_size", width, f"{where}: {how}: {width} (assumed: {said}; {dated}, which leaves the version "
                                        f"open, and {versions} build {width} too; {code})")
    else:
        alt = "; ".join(f"{label} builds {w}" for label, w in others)
        fix = "state mlp_multiple_of to decide it" if takes is None else "the GPT-NeoX commit the job runs decides it"
        s.put("ffn_hidden_size", width, f"{where}: {how}: {width} (assumed: {said}; {alt}; {dated}, which leaves the "
                                        f"version open: {fix}; {code})")
        s.ignored.append(f"ffn_hidden_size {width} assumed ({said}): {alt}; {dated}, which leaves the version open: "
                         f"{fix}")
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
        (k == "bf16" and isinstance(keys[k][1], dict) and keys[k][1].get("enabled", False) is True)
        or (k == "precision" and keys[k][1] == "bfloat16"))), None)
    if rotary and bf16 and not flag("rope_fusion", False):
        s.ignored.append(f"bf16 without rope_fusion: GPT-NeoX rotates with eager ops (apply_rotary_pos_emb_torch), "
                         f"priced as a fused rotation ({ev(bf16)})")


ATTENTION_KERNELS = {"global": "unfused", "flash": "flash2"}
"""GPT-NeoX attention type -> the kernel it runs: "global" is ParallelSelfAttention's own core (scores in HBM through
baddbmm, the fused masked softmax and bmm), "flash" calls the flash-attn 2 package's flash_attn_func
(megatron/model/transformer.py) from GPT-NeoX 8903a969 (FLASH2; _flash_version says where the config's GPT-NeoX may
be older); the other types (local, sparse, gMLP, Mamba, RWKV) are not priced."""


FLASH_TYPE = ("efd5911d", "2022-12-10")
"""The GPT-NeoX commit that added attention type "flash" (megatron/neox_arguments/neox_args.py
ATTENTION_TYPE_CHOICES), calling the flash-attn package pinned at 0.2.2, FlashAttention-1
(requirements/requirements-flashattention.txt): an older GPT-NeoX refuses the type (arguments.py calculate_derived
asserts "Attention type flash not recognized")."""
FLASH2 = ("8903a969", "2023-09-20")
"""The GPT-NeoX commit from which "flash" calls flash-attn 2 (flash_attn_varlen_*_func, flash-attn==2.2.1;
megatron/model/flash_attention.py, transformer.py), as ATTENTION_KERNELS prices it."""
FLASH_SETTING = 'attention_config [[["flash"], NUM_LAYERS]]'


def flash_remedy(stated: Iterable[str]) -> str:
    """The fused attention a GPT-NeoX config can turn on, dated by its own keys (version_has), for the
    unfused_attention finding: attention type "flash", the flash-attn 2 package priced, from GPT-NeoX 8903a969
    (flash-attn 0.2.2, FlashAttention-1, from efd5911d; no such type before).  Where the keys date its GPT-NeoX
    before either, an upgrade, not a config change; where they leave it open, the version it needs."""
    stated = set(stated)  # a config's keys: read more than once
    dated = window_text(stated)
    _, oldest = version_window(stated)
    without = f" (one without {oldest[0]}, which it no longer takes)" if oldest else ""
    fa2 = f"GPT-NeoX {FLASH2[0]} ({FLASH2[1]}) or later"
    if version_has(FLASH_TYPE[1], stated) is False:
        return (f"flash attention is not available in the config's GPT-NeoX: {dated}, and attention type \"flash\" "
                f"came with {FLASH_TYPE[0]} ({FLASH_TYPE[1]}; an older one asserts \"Attention type flash not "
                f"recognized\"); an upgrade to {fa2}{without}, then {FLASH_SETTING} (the flash-attn 2 package),")
    has2 = version_has(FLASH2[1], stated)
    if has2 is False:
        return (f"the fused kernel priced here, the flash-attn 2 package, needs an upgrade: {dated}, and before "
                f"{FLASH2[0]} ({FLASH2[1]}) GPT-NeoX runs {FLASH_SETTING} with flash-attn 0.2.2 (FlashAttention-1, "
                f"from {FLASH_TYPE[0]} ({FLASH_TYPE[1]}); no \"flash\" type before it) at best; {fa2}{without}, then "
                f"{FLASH_SETTING},")
    if has2:
        return f"a fused kernel, {FLASH_SETTING} (the flash-attn 2 package, {fa2}: {dated}),"
    return (f"a fused kernel, {FLASH_SETTING} ({fa2} for the flash-attn 2 package priced here; from {FLASH_TYPE[0]} "
            f"({FLASH_TYPE[1]}) until then flash-attn 0.2.2, FlashAttention-1, and no \"flash\" type before it: "
            f"{dated}, which leaves the version open),")


ATTENTION_TYPES = ("global", "local", "sparse_fixed", "sparse_variable", "bigbird", "bslongformer", "gmlp", "amlp",
                   "flash", "rwkv", "mamba")
"""GPT-NeoX's ATTENTION_TYPE_CHOICES (megatron/neox_arguments/neox_args.py:29-41, SOURCE_HEAD)."""


def _flash_version(stated: set[str], ev) -> str | None:
    """What the config's keys say of the flash-attn its "flash" layers run, where it is not the flash-attn 2 priced
    (FLASH2): a note; an InputError where they date its GPT-NeoX before "flash" (FLASH_TYPE), which no version then
    runs."""
    if version_has(FLASH_TYPE[1], stated) is False:
        raise InputError(f"{ev('attention_config')}: attention type \"flash\" came with GPT-NeoX {FLASH_TYPE[0]} "
                         f"({FLASH_TYPE[1]}), but {window_text(stated)}: no GPT-NeoX version runs this config (an "
                         f"older one asserts \"Attention type flash not recognized\", a newer one refuses the removed "
                         f"key); use \"global\", or drop the removed key for GPT-NeoX {FLASH2[0]} ({FLASH2[1]}) or "
                         f"later")
    has2 = version_has(FLASH2[1], stated)
    if has2:
        return None
    fa1 = (f"GPT-NeoX {FLASH_TYPE[0]} ({FLASH_TYPE[1]}) to {FLASH2[0]} ({FLASH2[1]}) runs \"flash\" with flash-attn "
           f"0.2.2, FlashAttention-1")
    if has2 is False:
        return f"attention type flash priced as FlashAttention-2, but {fa1}, and {window_text(stated)}"
    return (f"attention type flash priced as FlashAttention-2, GPT-NeoX's from {FLASH2[0]} ({FLASH2[1]}): {fa1}, and "
            f"{window_text(stated)}, which leaves the version open")


NEOX_UNPRICED = {
    "partition_activations": "DeepSpeed's activation checkpointing splits each checkpointed layer input over the "
                             "model-parallel ranks and all-gathers it again in the recompute (runtime/"
                             "activation_checkpointing/checkpointing.py partition_activations); not priced: the "
                             "memory estimate keeps each input whole on every TP rank (an over-count by up to the TP "
                             "degree on those inputs) and the recompute's all-gathers are left out",
    "cpu_offload": "DeepSpeed's activation checkpointing moves the checkpointed inputs to host memory; not priced: the "
                   "memory estimate keeps them on the GPU, and the copies over PCIe are left out",
}
"""GPT-NeoX activation-checkpointing switches the audit reads but does not price, with what each changes."""


def _attention_kernel(keys: dict, ev, path: Path, num_layers: int | None, s: Settings) -> None:
    """recipe.attention_kernel from `attention_config` ([[types, count or "all"], ...], expanded as
    megatron/utils.py expand_attention_types does: each item's types `count` times, an "all" item alone across
    num_layers; GPT-NeoX's default, unset, is global attention on every layer): the kernel of most layers, the rest
    named as not priced.  What calculate_derived asserts of the expanded list is refused: its length against
    num_layers, a type outside ATTENTION_TYPE_CHOICES, and GQA (num_kv_heads below the heads) with a type other
    than global or flash."""
    if "attention_config" not in keys:
        if not s.has("recipe.attention_kernel"):  # another of the job's files may set it
            s.put("recipe.attention_kernel", "unfused", f"{path}: no attention_config (GPT-NeoX's default: global "
                                                        f"attention on every layer, its unfused core)")
        return
    value = keys["attention_config"][1]
    items = value if isinstance(value, list) else []
    expanded: list[str] | None = [str(x) for x in items] if all(isinstance(x, str) for x in items) else []
    for item in [] if expanded else items:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], list)
                and (item[1] == "all" or (isinstance(item[1], int) and not isinstance(item[1], bool)))):
            raise InputError(f"{ev('attention_config')}: each attention_config item is [[types...], count or "
                             f"\"all\"], got {item!r}; fix the item as GPT-NeoX's expand_attention_types reads it")
        if item[1] == "all":  # expand_attention_types returns this item alone, the others dropped
            if num_layers is None:
                expanded = None
                break
            if not item[0] or num_layers % len(item[0]):
                raise start_refusal(ev("attention_config"), f"pattern {item[0]!r} over num_layers {num_layers}",
                               "GPT-NeoX megatron/utils.py:345-350 expand_attention_types (d8fc7c6c, 2021-05-01) "
                               f"asserts \"Number of layers ({num_layers}) is not divisible by the length of pattern\"",
                               "give a pattern whose length divides num_layers")
            expanded = [str(x) for x in item[0]] * (num_layers // len(item[0]))
            break
        expanded += [str(x) for x in item[0]] * item[1]
    if not items or expanded == []:
        raise InputError(f"{ev('attention_config')}: attention_config = {value!r} names no attention type; give "
                         f"[[[\"global\"], NUM_LAYERS]] or [[[\"flash\"], NUM_LAYERS]]")
    if expanded is not None and num_layers is not None and len(expanded) != num_layers:
        raise start_refusal(ev("attention_config"), f"{len(expanded)} layers of attention types for num_layers "
                       f"{num_layers}", f"{NEOX_ARGS}:1097-1100 calculate_derived (14b123ec, 2021-05-01, with "
                       f"attention_config) asserts \"Length of attention config list must equal num_layers\"",
                       f"give counts that sum to {num_layers}, e.g. [[[\"flash\"], {num_layers}]]")
    unknown = sorted({x for x in expanded or [] if x not in ATTENTION_TYPES})
    if unknown:
        raise start_refusal(ev("attention_config"), f"attention type {unknown[0]}", f"{NEOX_ARGS}:1101-1104 "
                       f"calculate_derived (efd39e56, 2021-04-22) asserts \"Attention type {unknown[0]} not "
                       f"recognized\" (ATTENTION_TYPE_CHOICES, neox_args.py:29-41: {', '.join(ATTENTION_TYPES)})",
                       "use one of them, e.g. \"flash\" or \"global\"")
    kv, heads = keys.get("num_kv_heads", (None, None))[1], keys.get("num_attention_heads", (None, None))[1]
    other = sorted({x for x in expanded or [] if x not in ("flash", "global")})
    if other and isinstance(kv, int) and isinstance(heads, int) and 1 <= kv < heads:
        raise start_refusal(f"{ev('attention_config')}; {ev('num_kv_heads')}", f"attention type {other[0]} with "
                       f"num_kv_heads {kv} below num_attention_heads {heads}", f"{NEOX_ARGS}:1143-1145 (f36aed7f, "
                       f"2024-02-22, with num_kv_heads) asserts \"GQA / MQA currently only compatible with Flash or "
                       f"standard global/sliding window Attention\"", "use \"flash\" or \"global\" with GQA")
    layers: dict[str, int] = {}
    for kind in expanded if expanded is not None else [str(k) for it in items for k in it[0]]:
        layers[kind] = layers.get(kind, 0) + 1
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
        if "flash" in priced:  # the config's GPT-NeoX may refuse "flash", or run flash-attn 1 for it
            note = _flash_version(set(keys), ev)
            if note is not None and kind == "flash":
                s.ignored.append(f"{note} ({ev('attention_config')})")


NEOX_ARGS = "GPT-NeoX megatron/neox_arguments/arguments.py"
"""Where GPT-NeoX checks a config (NeoXArgs.calculate_derived and validate_values, at SOURCE_HEAD's lines)."""
REQUIRED = ("num_layers", "hidden_size", "num_attention_heads", "max_position_embeddings")
"""The keys GPT-NeoX's validate_values requires (arguments.py:1224-1242; max_position_embeddings since 3ad61952)."""


def _version_refusal(keys: dict, since: tuple[str, str], where: str, what: str, check: str, fix: str,
                     priced: str, s: Settings) -> None:
    """A check GPT-NeoX added on since[1]: refused where the config's keys date its GPT-NeoX that late or later, an
    `ignored` line where they leave the version open (`priced`: what the audit prices instead), nothing where they
    date it older."""
    has = version_has(since[1], set(keys))
    if has:
        raise start_refusal(where, what, f"{check} ({window_text(set(keys))})", fix)
    if has is None:
        s.ignored.append(f"{what}: GPT-NeoX {since[0]} ({since[1]}) or later refuses it ({check}); "
                         f"{window_text(set(keys))}, which leaves the version open: priced as {priced} ({where})")


FP16_CHECK = (f"{NEOX_ARGS}:966-972 calculate_derived (056e9caf, 2023-05-16) asserts \"DeepSpeed fp16 field was set "
              f"but precision conflicts\" where fp16.enabled meets a precision other than fp16")
BF16_CHECK = (f"{NEOX_ARGS}:974-979 calculate_derived (797a4ab4, 2024-11-13) asserts \"DeepSpeed bf16 field was set "
              f"but precision conflicts\" where bf16.enabled meets a precision other than bfloat16 (fp16 where "
              f"fp16.enabled set it)")
BOTH_CHECK = ("GPT-NeoX before 797a4ab4 (2024-11-13) passes both sections to DeepSpeed, whose runtime/config.py "
              "(648f7bfa, 2021-11-01) asserts \"bfloat16 and fp16 modes cannot be simultaneously enabled\"")
FP32_RULE = (f"{NEOX_ARGS}:981-1011 (d6d05dfd, 2021-06-22): `else: self.update_value(\"precision\", \"fp32\")` where "
             f"no fp16 or bf16 section has enabled: true and precision is neither fp16 nor bfloat16")
ERAS = {"A": "before 056e9caf (2023-05-16)", "B": "056e9caf (2023-05-16) to 797a4ab4 (2024-11-13)",
        "C": "797a4ab4 (2024-11-13) or later"}
"""The eras of GPT-NeoX's precision rule (_precision)."""
PRECISION_FIX = ("state one 16-bit mode: `precision: bfloat16` (or `bf16: {enabled: true}`) without fp16.enabled, or "
                 "`fp16: {enabled: true}` with no other precision")


def _precision(keys: dict, ev, first: Path, whole: bool, s: Settings) -> None:
    """The precision GPT-NeoX derives (NeoXArgs.calculate_derived), in each era of its rule the config's keys allow:
    before 056e9caf (fp16.type or precision bfloat16, else fp16.enabled, else fp32), 056e9caf to 797a4ab4 (fp16.enabled
    asserts precision fp16; bf16 left to DeepSpeed's section) and from 797a4ab4 (bf16.enabled asserts precision
    bfloat16).  A section is on only with enabled: true (GPT-NeoX's and DeepSpeed's default is false), and precision
    counts only as fp16 or bfloat16 (`bf16` falls to fp32).  Refused where every era refuses it; fp32, which placement
    does not price, an InputError where the files hold the whole config (`whole`: they state every required key),
    else an `ignored` line, priced as bf16.  FP16 is priced as BF16 (the same tensor-core rate)."""
    sec = {k: keys[k][1] if isinstance(keys.get(k, (None, None))[1], dict) else {} for k in ("fp16", "bf16")}
    on16, onbf = bool(sec["fp16"].get("enabled", False)), bool(sec["bf16"].get("enabled", False))
    prec = keys["precision"][1] if "precision" in keys else None
    has_b, has_c = version_has("2023-05-16", set(keys)), version_has("2024-11-13", set(keys))
    eras = [e for e, ok in (("A", has_b is not True), ("B", has_b is not False and has_c is not True),
                            ("C", has_c is not False)) if ok]

    def derived(era: str) -> str:
        """fp16, bf16 or fp32 as `era` trains the config, or the check that refuses it."""
        if era == "A":
            if on16 and onbf:
                return BOTH_CHECK
            return "fp16" if on16 else "bf16" if onbf or sec["fp16"].get("type", prec) == "bfloat16" else "fp32"
        p = prec
        if on16:
            if p is not None and p != "fp16":
                return FP16_CHECK
            p = "fp16"
        if onbf and era == "C":
            if p is not None and p != "bfloat16":
                return BF16_CHECK
            p = "bfloat16"
        if p == "fp16" and onbf:
            return BOTH_CHECK
        return "fp16" if p == "fp16" else "bf16" if p == "bfloat16" or onbf else "fp32"

    got = {e: derived(e) for e in eras}
    named = [k for k in ("precision", "fp16", "bf16") if k in keys]
    where = "; ".join(ev(k) for k in named) or f"{first}: no precision, fp16 or bf16"
    what = ", ".join([f"precision {prec}"] * (prec is not None) + [f"{k}.enabled {str(v).lower()}" for k, v in
                                                                    (("fp16", on16), ("bf16", onbf)) if k in keys])
    what = what or "no precision, fp16 or bf16 key"
    runs = {e: d for e, d in got.items() if d in ("fp16", "bf16", "fp32")}
    if not runs:
        checks = "; ".join(dict.fromkeys(got[e] for e in reversed(eras)))
        raise start_refusal(where, what, f"{checks} ({window_text(set(keys))})", PRECISION_FIX)
    for e, check in got.items():
        if e not in runs:
            s.ignored.append(f"{what}: GPT-NeoX {ERAS[e]} refuses it ({check}); {window_text(set(keys))}, which "
                             f"leaves the version open: priced as another version runs it ({where})")
    kinds = set(runs.values())
    if kinds == {"fp32"}:
        if whole:
            raise InputError(f"{where}: {what}: GPT-NeoX trains this config in fp32 ({FP32_RULE}), which placement "
                             f"does not price; {PRECISION_FIX}")
        s.ignored.append(f"{what}: GPT-NeoX trains the files given in fp32 ({FP32_RULE}) unless another file of the "
                         f"job states a 16-bit mode; priced as bf16 ({where})")
    elif "fp32" in kinds:
        fp32 = " and ".join(ERAS[e] for e, d in runs.items() if d == "fp32")
        s.ignored.append(f"{what}: GPT-NeoX {fp32} trains it in fp32 ({FP32_RULE}); {window_text(set(keys))}, which "
                         f"leaves the version open: priced as bf16 ({where})")
    s.put("precision", "bf16", where if kinds != {"fp32"} else f"{where} (fp32 in GPT-NeoX, priced as bf16)")
    if "fp16" in kinds:
        s.ignored.append(f"fp16: {FP16_MIXED} with loss scaling, priced as bf16 ({where})")


def _batch(keys: dict, ev, s: Settings) -> None:
    """train_batch_size alone: GPT-NeoX's calculate_batch_parameters (arguments.py:849-851, a8f0c2da) sets
    gradient_accumulation_steps 1 and the micro-batch train_batch_size // dp, and its check_batch_parameters asserts
    train_batch_size == micro x 1 x dp.  The accumulation is read; the micro-batch needs the data-parallel size,
    which the YAML does not hold: audit.core.derived_micro_batch derives it on the job's GPU count."""
    if "train_batch_size" not in keys or {"train_micro_batch_size_per_gpu", "gradient_accumulation_steps"} & set(keys):
        return
    s.put("grad_accumulation", 1, f"{ev('train_batch_size')} (no gradient_accumulation_steps or "
                                  f"train_micro_batch_size_per_gpu: GPT-NeoX's calculate_batch_parameters sets "
                                  f"gradient_accumulation_steps 1, arguments.py:849-851)")
    # the micro-batch, train_batch_size // dp, is derived on the job's GPU count (audit.core.derived_micro_batch)


def _refusals(keys: dict, ev, number, s: Settings) -> None:
    """What GPT-NeoX refuses to start beyond precision and attention_config: ZeRO-2/3 with its PipelineModule or model
    parallelism (megatron/training.py get_model, DeepSpeed's PipelineEngine before it), MoE with ZeRO-2/3,
    num_kv_heads against the heads and model_parallel_size, max_position_embeddings below seq_length and a pos_emb
    outside its choices, each within the GPT-NeoX versions the config's keys allow (_version_refusal)."""
    stage = s.value("zero_stage") or 0
    pp, mp = number("pipe_parallel_size") or 0, max(number("model_parallel_size") or 1, 1)
    zero = ev("zero_optimization") if "zero_optimization" in keys else ""
    to_zero1 = "use zero_optimization stage 0 or 1, or pipe_parallel_size 0 and model_parallel_size 1 with ZeRO-2/3"
    if stage >= 2 and pp > 1:
        raise start_refusal(f"{zero}; {ev('pipe_parallel_size')}", f"ZeRO stage {stage} with pipe_parallel_size {pp}",
                       "GPT-NeoX megatron/training.py:878-892 get_model (c1ae1d77, 2024-09-09) exit()s: \"ZeRO stage "
                       "2/3 and pipeline paralleism are not supported simultaneously\"; before it DeepSpeed's "
                       "PipelineEngine asserts \"ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism\" "
                       "(runtime/pipe/engine.py, fbece50b, 2021-04-19)", to_zero1)
    if stage >= 2 and pp == 1:
        _version_refusal(keys, ("2382bd4a", "2024-06-06"), f"{zero}; {ev('pipe_parallel_size')}",
                         f"ZeRO stage {stage} with pipe_parallel_size 1", "from 2382bd4a (2024-06-06) "
                         "pipe_parallel_size 1 builds the PipelineModule: DeepSpeed's PipelineEngine asserts \"ZeRO-2 "
                         "and ZeRO-3 are incompatible with pipeline parallelism\", and from c1ae1d77 (2024-09-09) "
                         "megatron/training.py:878-883 exit()s: \"ZeRO stage 2/3 and the PipelineModule are "
                         "incompatible, please set 'pipe_parallel_size' to 0 instead\"", to_zero1,
                         f"ZeRO stage {stage} without the PipelineModule, as an older GPT-NeoX runs it", s)
    if stage >= 2 and mp > 1 and pp <= 1:
        _version_refusal(keys, ("c1ae1d77", "2024-09-09"), f"{zero}; {ev('model_parallel_size')}",
                         f"ZeRO stage {stage} with model_parallel_size {mp}", "GPT-NeoX megatron/training.py:888-892 "
                         "get_model (c1ae1d77, 2024-09-09) exit()s: \"ZeRO stage 2/3 and model paralleism are not "
                         "currently supported simultaneously\"", to_zero1,
                         f"ZeRO stage {stage} with model_parallel_size {mp}, as an older GPT-NeoX runs it", s)
    experts = number("moe_num_experts")
    if experts is not None and experts > 1 and stage >= 2:
        what, where = f"moe_num_experts {experts} with ZeRO stage {stage}", f"{ev('moe_num_experts')}; {zero}"
        check = (f"{NEOX_ARGS}:1088-1089 (d11df961, 2025-05-09) asserts \"MoE is not compatible with zero stages 2 "
                 f"and 3\"")
        fix = "use zero_optimization stage 0 or 1 with MoE"
        if stage == 3:  # before d11df961: "MoE not compatible with zero3" (86758c35), so in every version
            raise start_refusal(where, what, f"{check}; before it \"MoE not compatible with zero3\" (86758c35, "
                                        f"2024-03-06)", fix)
        _version_refusal(keys, ("d11df961", "2025-05-09"), where, what, check, fix,
                         f"ZeRO stage {stage}, as an older GPT-NeoX runs it", s)
    heads, kv = number("num_attention_heads"), number("num_kv_heads")
    if kv is not None and heads is not None and kv >= 1:
        where = f"{ev('num_kv_heads')}; {ev('num_attention_heads')}"
        if heads % kv:
            raise start_refusal(where, f"num_kv_heads {kv} with num_attention_heads {heads}", f"{NEOX_ARGS}:1133-1136 "
                           f"(f36aed7f, 2024-02-22, with num_kv_heads) asserts \"num_kv_heads must evenly divide "
                           f"num_attention_heads and be no greater than it\"", "give num_kv_heads a divisor of "
                           "num_attention_heads")
        if kv < heads and kv % mp:
            raise start_refusal(f"{where}; {ev('model_parallel_size')}", f"num_kv_heads {kv} with model_parallel_size "
                           f"{mp}", f"{NEOX_ARGS}:1146-1148 (f36aed7f, 2024-02-22, with num_kv_heads) asserts "
                           f"num_kv_heads % model_parallel_size == 0: \"Number of KV heads must be at least "
                           f"model_parallel_size for now!\"", "give num_kv_heads a multiple of model_parallel_size, or "
                           "a model_parallel_size that divides it")
    mpe, seq = number("max_position_embeddings"), number("seq_length")
    if mpe is not None and seq is not None and mpe < seq:
        raise start_refusal(f"{ev('max_position_embeddings')}; {ev('seq_length')}", f"max_position_embeddings {mpe} "
                       f"below seq_length {seq}", f"{NEOX_ARGS}:1257-1262 validate_values (01ac43c2, 2021-04-23) "
                       f"raises \"max_position_embeddings must be bigger or equal seq_length\"",
                       f"give max_position_embeddings {seq} or more")
    pos = keys.get("pos_emb", (None, None))[1]
    if pos is not None and str(pos).lower() not in POS_EMB:
        raise start_refusal(ev("pos_emb"), f"pos_emb {pos!r}", f"GPT-NeoX megatron/neox_arguments/neox_args.py:207-209 "
                       f"types pos_emb Literal{list(POS_EMB)} (alibi since 529e08ac, 2021-08-26), and "
                       f"{NEOX_ARGS}:1365-1398 validate_types logs \"pos_emb: '{pos}' Not in accepted values\" and "
                       f"NeoXArgs raises \"NeoXArgs types cannot be validated\"", f"use one of {', '.join(POS_EMB)}")


POS_EMB = ("learned", "rotary", "sinusoidal", "rpe", "alibi", "none")
"""GPT-NeoX's pos_emb choices (neox_args.py, SOURCE_HEAD; none removed since its first version), which
validate_types compares without case."""
