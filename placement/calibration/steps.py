"""Measured training steps, read as users have them: a Megatron-LM log, or a small YAML of runs.

- **Megatron-LM log**: the `arguments` block Megatron prints at start-up gives the model (layers, widths,
  heads, vocabulary, experts), the layout, batch, precision and recipe (read by the audit's Megatron reader,
  so a log prices exactly as `placement audit` would price it); the `elapsed time per iteration (ms): X`
  lines give the step time, the median of the logged iterations after the first (start-up and compilation).
- **Step YAML**: a list of `{model, num_gpus, seq_len, global_batch, precision, layout, recipe,
  step_time_s}` (the fields of placement/calibration/runs.yaml; `model` a catalog name, a model YAML or a
  config.json), one measured run each.  `config: [FILES]` may stand for the layout (the job's launch files, read
  by the audit's readers, which also give batch, sequence, precision and recipe where the files fix them) and
  `log: FILE` for the step time (a torchtitan log's `tps` lines, or a Megatron log's iteration times).

Each measurement becomes a `CalibrationRun` (the schema `placement validate` prices) plus its ModelSpec.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, ValidationError, model_validator

from placement.calibration.validate import CalibrationRun
from placement.catalog import load_model
from placement.errors import InputError
from placement.loaders.errors import format_validation_error
from placement.loaders.files import parse_yaml, read_text
from placement.loaders.kinds import wrong_kind
from placement.specs import ModelSpec
from placement.specs._base import StrictScalars
from placement.specs.layout import PinnedLayout
from placement.specs.model import FfnKind, MoESpec
from placement.specs.recipe import Recipe
from placement.specs.training import Precision

ITERATION_TIME = re.compile(r"elapsed time per iteration \(ms\):\s*([0-9.]+)")
"""A Megatron-LM iteration line's time (training.py training_log: `' elapsed time per iteration (ms): {:.1f} |'`);
the value is checked by `iteration_seconds`: the class also matches a bare "." or "1.2.3"."""
MILLISECONDS = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")
"""A decimal number as Megatron-LM prints the time: digits with at most one point."""


def iteration_seconds(value: str, path: Path | str, line: int) -> float:
    """The seconds of an iteration line's `elapsed time per iteration (ms): VALUE`, or an error naming the log, the
    line and the value where VALUE is no number (a cut or edited log: float(".") raised and the command reported an
    internal error) or is 0 (no iteration takes under the 0.05 ms {:.1f} rounds to 0.0; a median of such lines
    divided the audit's measured step by zero)."""
    if not MILLISECONDS.fullmatch(value) or float(value) == 0:
        raise InputError(f"{path}:{line}: `elapsed time per iteration (ms): {value}` is not a positive number of "
                         f"milliseconds (Megatron-LM prints it as {{:.1f}}, e.g. 9305.7); the line is cut or edited: "
                         f"give the log as the run wrote it, or remove that line")
    return float(value) / 1e3


@dataclass(frozen=True)
class StepRun:
    run: CalibrationRun
    model: ModelSpec


class StepRecipe(StrictScalars, Recipe):
    """A step entry's `recipe:` as written: Recipe's fields, its integers and flags never coerced from text (a QA
    trial: `tp_comm_overlap: "no"` was read as False and `mtp_layers: "1"` as 1, where a model or cluster YAML
    refuses the same quotes)."""


class StepEntry(StrictScalars):
    """One measured run in a step YAML: its layout written out or read from its launch files (`config`), its step
    time written out or read from its training log (`log`).  Relative paths are relative to the YAML file.  Numbers
    and flags as written, as in a model or cluster YAML (StrictScalars: `num_gpus: "8"` is an error; a QA trial found
    it read as 8 while `layout: {tp: "8"}` was refused)."""

    id: str | None = None
    model: str
    num_gpus: int = Field(ge=1)
    seq_len: int | None = Field(default=None, ge=1)
    """Default: what the launch files fix, else the model's."""
    global_batch: int | None = Field(default=None, ge=1)
    """Default: what the launch files fix (torchtitan local batch x dp, ...)."""
    precision: Precision | None = None
    """Default: what the launch files set, else bf16."""
    layout: PinnedLayout | None = None
    """The degrees and knobs the run used; the fields left out are searched."""
    config: list[str] | None = None
    """The job's launch files (torchtitan TOML, Megatron script, DeepSpeed JSON...), read as `placement audit`
    reads them."""
    recipe: StepRecipe | None = None
    step_time_s: float | None = Field(default=None, gt=0)
    log: str | None = None
    """A torchtitan log (`step: N ... tps: T` lines: step time = global batch x seq / (tps x GPUs)) or a
    Megatron-LM log (`elapsed time per iteration (ms)`); the median of the logged steps after the first."""
    segment_nodes: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one_of_each(self) -> StepEntry:
        if (self.layout is None) == (self.config is None):
            raise ValueError("give the layout (`layout: {tp: .., pp: ..}`) or the launch files (`config: [..]`), "
                             "one of the two")
        if (self.step_time_s is None) == (self.log is None):
            raise ValueError("give the measured step (`step_time_s`) or the training log (`log`), one of the two")
        if self.layout is not None:
            self.layout.check_gpus(self.num_gpus)
        return self


MEGATRON_SKIPPED = re.compile(r"number of (skipped|nan) iterations:\s*(\d+)")
MEGATRON_BAD_LOSS = re.compile(r"loss:\s*[-+]?(nan|inf)", re.IGNORECASE)


MEGATRON_BATCH = re.compile(r"global batch size:\s*(\d+)")


def megatron_steps(lines: list[str], batch: int | None, path: Path | str
                   ) -> tuple[list[tuple[float, int]], list[int], list[tuple[int, int]]]:
    """((seconds per iteration, line) of each logged interval, lines left out, (line, batch) of the intervals at
    another global batch): a Megatron-LM interval that skipped or NaN'd an iteration (its `number of skipped
    iterations` / `number of nan iterations`, or a NaN or infinite loss) measured no optimizer step there, so it is
    no step measurement (a user trial: a log whose every iteration was skipped calibrated the FP8 GEMM efficiency
    from 0.709 to 0.93); and one whose printed `global batch size` is not `batch` (the run's, from its arguments)
    ran a batch ramp-up step (`--rampup-batch-size`), a smaller step than the run's (a user trial: ramp-up steps
    priced at the full batch fitted the FP8 GEMM efficiency at 0.945).  A time that is no number is an error naming
    `path`, the line and the value (`iteration_seconds`)."""
    kept, dropped, ramp = [], [], []
    for n, line in enumerate(lines, 1):
        m = ITERATION_TIME.search(line)
        if not m:
            continue
        printed = MEGATRON_BATCH.search(line)
        if batch is not None and printed and int(printed.group(1)) != batch:
            ramp.append((n, int(printed.group(1))))
        elif any(int(c) > 0 for _, c in MEGATRON_SKIPPED.findall(line)) or MEGATRON_BAD_LOSS.search(line):
            dropped.append(n)
        else:
            kept.append((iteration_seconds(m.group(1), path, n), n))
    return kept, dropped, ramp


def after_warmup(times: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """The logged intervals that measure the steady step, as `calibrate --steps` and `audit` take them: all but the
    first (start-up: the first iterations build NCCL communicators, grow the allocator, compile kernels); the median
    over them shrugs off a slow interval or two after it."""
    return times[1:]


def _ramp_note(ramp: list[tuple[int, int]], batch: int) -> str:
    if not ramp:
        return ""
    sizes = sorted({b for _, b in ramp})
    return (f"; {len(ramp)} logged interval(s) at another global batch than the run's {batch} left out (a batch "
            f"ramp-up, {sizes[0]}-{sizes[-1]}, lines {ramp[0][0]}-{ramp[-1][0]}): their steps are another job's")


def _dropped_note(dropped: list[int]) -> str:
    if not dropped:
        return ""
    shown = ", ".join(map(str, dropped[:8])) + (", ..." if len(dropped) > 8 else "")
    return (f"; {len(dropped)} logged interval(s) with skipped or NaN iterations left out (line(s) {shown}): no "
            f"optimizer step there")


TORCHTITAN_STEP = re.compile(r"step:\s*(\d+)\s.*?tps:\s*([0-9,]+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def read_log_lines(path: Path) -> list[str]:
    """A torchtitan or Megatron-LM log's lines, colour codes taken off."""
    return [_ANSI.sub("", x) for x in read_text(path, "training log", "give a torchtitan or Megatron-LM log"
                                                ).splitlines()]


def log_step_time(path: Path, lines: list[str], global_batch: int, seq_len: int, num_gpus: int
                  ) -> tuple[float, str]:
    """(seconds per step, where) from a torchtitan or Megatron-LM log's lines (`read_log_lines`): the median after
    the first logged step."""
    mega, dropped, ramp = megatron_steps(lines, global_batch, path)
    if (dropped or ramp) and len(mega) < 2:
        raise InputError(f"training log `{path}`: {len(mega)} logged Megatron interval(s) without skipped or NaN "
                         f"iterations at the run's global batch {global_batch}{_dropped_note(dropped)}"
                         f"{_ramp_note(ramp, global_batch)}; the step time needs at least two, the first being "
                         f"start-up: give a log of a healthy run past any batch ramp-up")
    titan = [(global_batch * seq_len / (float(m.group(2).replace(",", "")) * num_gpus), n)
             for n, x in enumerate(lines, 1) if (m := TORCHTITAN_STEP.search(x)) and m.group(2) != "0"]
    found = mega or titan
    if len(found) < 2:
        raise InputError(f"training log `{path}`: {len(found)} logged step(s) (torchtitan `step: N ... tps: T` or "
                         f"Megatron `elapsed time per iteration (ms): X`); the step time needs at least two, the "
                         f"first being start-up")
    kept = after_warmup(found)
    how = "" if mega else f" (global batch {global_batch} x seq {seq_len} / (tps x {num_gpus} GPUs))"
    return (statistics.median(t for t, _ in kept),
            f"{path}:{kept[0][1]}-{kept[-1][1]}, median of {len(kept)}{how}{_dropped_note(dropped if mega else [])}"
            f"{_ramp_note(ramp if mega else [], global_batch)}")


def _run(entry_id: str, where: str, cluster: str, model: ModelSpec, model_ref: str, num_gpus: int, seq_len: int,
         global_batch: int, precision: Precision, layout: dict, recipe: Recipe, step_s: float,
         segment: int | None = None) -> StepRun:
    if layout.get("zero_stage") == 3 and layout.get("dp_shard") is None:
        # the user's own run: ZeRO-3 shards over the whole data-parallel group unless it says otherwise (every
        # framework's default; HSDP is a setting of its own), not a shard group the search picks (a user trial: a
        # calibrate step priced with HSDP shard 2, which moved the fitted GEMM efficiency, and said nothing)
        per = int(layout.get("tp") or 1) * int(layout.get("cp") or 1) * int(layout.get("pp") or 1)
        dp = int(layout.get("dp") or num_gpus // per)
        layout = {**layout, "dp_shard": dp}
        where += f"; ZeRO-3 over its whole data-parallel group (dp_shard {dp}: no shard group stated)"
    run = CalibrationRun(id=entry_id, group="measured", citation=where, model=model_ref, cluster=cluster,
                         num_gpus=num_gpus, seq_len=seq_len, global_batch=global_batch, precision=precision,
                         attention_kernel=recipe.attention_kernel, layout=layout, published_step_time_s=step_s,
                         step_time_basis=f"measured: {where}", recipe=recipe, segment_nodes=segment)
    return StepRun(run, model)


def read_step_yaml(path: Path, cluster: str, text: str) -> list[StepRun]:
    data = parse_yaml(text, path, "step file")
    other = wrong_kind(path, data, "steps")  # a model, cluster, sweep file or profile given as --steps / --runs
    if other is not None:
        raise InputError(other)
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        found = ("an empty list" if data == [] else "nothing (an empty file)" if data is None
                 else f"{type(data).__name__} {str(data)[:40]!r}")
        raise InputError(f"step file `{path}`: expected a list of measured runs ({{model, num_gpus, seq_len, "
                         f"global_batch, layout, step_time_s, ...}}); found {found}: a file from which nothing is read "
                         f"fits nothing")
    out = []
    seen: dict[str, int] = {}  # an id, or an id-less entry's content -> its entry number
    for i, item in enumerate(data):
        try:
            e = StepEntry.model_validate(item)
        except ValidationError as err:
            raise InputError(format_validation_error(err, f"step file `{path}`, entry {i + 1}")) from None
        # the same run twice would count twice in the fit, as a file given twice would (a QA note)
        key = f"id {e.id!r}" if e.id is not None else e.model_dump_json()
        if key in seen:
            what = key if e.id is not None else "the same run, field for field,"
            raise InputError(f"step file `{path}`: entry {i + 1} repeats {what} of entry {seen[key]}: a run given "
                             f"twice would count twice in the fit; drop one, or give each run an id of its own")
        seen[key] = i + 1
        out.append(_entry(e, path, i, cluster))
    return out


def _entry(e: StepEntry, path: Path, i: int, cluster: str) -> StepRun:
    where = f"{path}, entry {i + 1}"
    model = load_model(e.model)
    seq, batch, precision = e.seq_len, e.global_batch, e.precision
    recipe = None if e.recipe is None else Recipe.model_validate(e.recipe.model_dump(exclude_unset=True))
    layout = e.layout.fixed() if e.layout is not None else None
    if e.config is not None:
        from placement.audit.core import files_global_batch, launch_recipe, resolve_layout
        from placement.audit.launch import parse_launch, refuse_unrunnable

        launch = refuse_unrunnable(parse_launch([path.parent / c for c in e.config]))
        lay = resolve_layout(launch, model, e.num_gpus,
                             gpus_fix=f"make {where}'s num_gpus ({e.num_gpus}) the GPU count the run had")
        layout = lay.model_dump(mode="json", exclude_none=True)
        recipe = recipe or launch_recipe(launch, model, lay)[0]
        seq = seq or launch.seq_len
        batch = batch or (files_global_batch(launch, e.num_gpus) or (None, ""))[0]
        precision = precision or (Precision(launch.precision) if launch.precision else None)
    seq, precision = seq or model.default_seq_len, precision or Precision.BF16
    if batch is None:
        raise InputError(f"{where}: no global batch; give `global_batch` (the launch files do not fix it)")
    step_s = e.step_time_s
    if e.log is not None:
        log = path.parent / e.log
        lines = read_log_lines(log)  # read once: a training log can be large
        _check_log_job(log, lines, where, model, e.num_gpus, seq, batch, layout)
        step_s, where = log_step_time(log, lines, batch, seq, e.num_gpus)
    return _run(e.id or f"{path.name}#{i + 1}", where, cluster, model, e.model, e.num_gpus, seq, batch, precision,
                layout, recipe or Recipe(), step_s, e.segment_nodes)


def _check_log_job(log: Path, lines: list[str], where: str, model: ModelSpec, num_gpus: int, seq: int, batch: int,
                   layout: dict | None) -> None:
    """An InputError where the Megatron-LM log an entry names ran another job than the entry states (a user trial: a
    Llama 3 8B log under an entry for Llama 3 70B at tp 8, pp 2 fitted the GEMM efficiency to 100 % of peak, and
    `plan` on that profile priced 405B at 70 % MFU).  The log's printed arguments are compared with the entry's model
    (layers, hidden size), GPU count, sequence, batch and stated degrees; a log without the block (torchtitan's) is
    not compared."""
    from placement.audit.readers.megatron import MEGATRON_LOG_BEGIN
    from placement.loaders.files import unprefixed

    if MEGATRON_LOG_BEGIN not in (unprefixed(x) for x in lines):
        return
    args = megatron_arguments(log, lines)
    stated = {"num_layers": model.num_layers, "hidden_size": model.hidden_size, "world_size": num_gpus,
              "seq_length": seq, "global_batch_size": batch}
    for key, name in (("tp", "tensor_model_parallel_size"), ("pp", "pipeline_model_parallel_size"),
                      ("cp", "context_parallel_size"), ("ep", "expert_model_parallel_size")):
        if layout is not None and key in layout:
            stated[name] = layout[key]
    differ = [f"{name} {value} (the log's {args[name][0]}, line {args[name][1]})" for name, value in stated.items()
              if name in args and _int(args, name, log) is not None and _int(args, name, log) != value]
    if differ:
        raise InputError(f"{where}: its log `{log}` ran another job than the entry states: {'; '.join(differ)}; "
                         f"fix the entry (its model `{model.name}`, layout, batch or GPU count) or name the run's own "
                         f"log, or give the log alone (--steps LOG reads the job from its arguments)")


def megatron_arguments(path: Path, lines: list[str]) -> dict[str, tuple[str, int]]:
    """name -> (printed value, line) of a log's arguments block."""
    from placement.audit.readers.megatron import log_arguments

    return {name: (value, line) for name, value, line in log_arguments(
        path, lines, "give a YAML list of measured runs or a Megatron-LM log with its printed arguments block")}


def _int(args: dict[str, tuple[str, int]], name: str, path: Path) -> int | None:
    value = args.get(name, ("None", 0))[0]
    if value == "None":
        return None
    try:
        return int(value)
    except ValueError:
        raise InputError(f"{path}:{args[name][1]}: {name} = {value!r} is not an integer") from None


def model_from_megatron(args: dict[str, tuple[str, int]], path: Path) -> ModelSpec:
    """The model a Megatron-LM log trained, from its printed arguments (dense, GQA, MoE with shared experts)."""
    def need(name: str) -> int:
        v = _int(args, name, path)
        if v is None:
            raise InputError(f"{path}: the arguments block has no {name}; give the run as a step YAML entry "
                             f"naming its model")
        return v

    flag = {k: v[0] == "True" for k, v in args.items() if v[0] in ("True", "False")}
    hidden, heads = need("hidden_size"), need("num_attention_heads")
    experts = _int(args, "num_experts", path)
    moe = None
    if experts:
        shared = _int(args, "moe_shared_expert_intermediate_size", path)
        moe_ffn = _int(args, "moe_ffn_hidden_size", path) or need("ffn_hidden_size")
        moe = MoESpec(num_experts=experts, top_k=_int(args, "moe_router_topk", path) or 2,
                      expert_ffn_hidden_size=moe_ffn, num_shared_experts=1 if shared else 0,
                      shared_expert_ffn_hidden_size=shared)
    groups = _int(args, "num_query_groups", path) if flag.get("group_query_attention") else None
    vocab = _int(args, "padded_vocab_size", path) or need("vocab_size")
    try:
        return ModelSpec(
            name=f"megatron-log:{path.name}", num_layers=need("num_layers"), hidden_size=hidden,
            ffn_hidden_size=_int(args, "ffn_hidden_size", path) or 4 * hidden,
            ffn_kind=(FfnKind.SWIGLU if flag.get("swiglu") else FfnKind.QUICK_GEGLU if flag.get("quick_geglu")
                      else FfnKind.SQUARED_RELU if flag.get("squared_relu") else FfnKind.GELU),
            num_attention_heads=heads,
            num_kv_heads=groups, head_dim=_int(args, "kv_channels", path), vocab_size=vocab,
            tied_embeddings=not flag.get("untie_embeddings_and_output_weights", False), moe=moe,
            default_seq_len=need("seq_length"), source=f"{path}: Megatron-LM arguments block")
    except ValidationError as err:
        raise InputError(format_validation_error(err, f"{path}: the model its arguments describe")) from None


def read_megatron_log(path: Path, cluster: str, text: str) -> StepRun:
    from placement.audit.core import launch_recipe, resolve_layout
    from placement.audit.launch import parse_launch, refuse_unrunnable

    lines = text.splitlines()
    args = megatron_arguments(path, lines)
    model = model_from_megatron(args, path)
    launch = refuse_unrunnable(parse_launch([path], "megatron"))
    batch = launch.global_batch or need_batch(args, path)
    times, dropped, ramp = megatron_steps(lines, batch, path)
    if len(times) < 2:
        raise InputError(f"{path}: {len(times)} usable `elapsed time per iteration (ms)` line(s) at the run's global "
                         f"batch {batch}{_dropped_note(dropped)}{_ramp_note(ramp, batch)}; the step time needs at "
                         f"least two logged iterations (the first is start-up): give a log past any batch ramp-up")
    kept = after_warmup(times)
    step_s = statistics.median(t for t, _ in kept)
    world = _int(args, "world_size", path) or launch.world_size
    if world is None:
        raise InputError(f"{path}: the arguments block has no world_size; the GPU count is unknown")
    said = args.get("world_size")
    layout = resolve_layout(launch, model, world, gpus_fix=(
        f"the log's world_size {world}" + (f" ({path}:{said[1]})" if said else "") + " and its layout disagree: "
        "the log is not one run's, or was edited; give the run as a YAML entry with its num_gpus instead"))
    recipe, _ = launch_recipe(launch, model, layout)
    where = (f"{path}:{kept[0][1]}-{kept[-1][1]} (median of {len(kept)} iterations{_dropped_note(dropped)}"
             f"{_ramp_note(ramp, batch)})")
    precision = Precision(launch.precision or "bf16")
    return _run(path.name, where, cluster, model, str(path), world, launch.seq_len or model.default_seq_len,
                batch, precision,
                layout.model_dump(mode="json", exclude_none=True), recipe, step_s)


def need_batch(args: dict[str, tuple[str, int]], path: Path) -> int:
    batch = _int(args, "global_batch_size", path)
    if batch is None:
        raise InputError(f"{path}: the arguments block has no global_batch_size")
    return batch


def read_steps(path: Path, cluster: str) -> list[StepRun]:
    """A step file of either kind (a log when it holds Megatron's arguments block)."""
    from placement.audit.launch import MEGATRON_LOG_BEGIN

    text = read_text(path, "step file", "give a YAML list of measured runs or a Megatron-LM log")
    if MEGATRON_LOG_BEGIN in text:
        return [read_megatron_log(path, cluster, text)]
    first = next((n for n, line in enumerate(text.splitlines(), start=1) if ITERATION_TIME.search(line)), None)
    if first is not None:  # a log, not YAML: say what it lacks rather than a YAML syntax error
        raise InputError(
            f"{path}: a Megatron-LM log (its `elapsed time per iteration (ms)` lines, the first on line {first}) "
            f"without the arguments block Megatron prints at start-up ({MEGATRON_LOG_BEGIN!r} ... 'end of "
            f"arguments'), which gives the model, layout, batch and precision; give the log from the job's start "
            f"(rank 0's output, the block included), or a step YAML entry naming the model and layout with "
            f"`log: {path.name}` for the step time")
    return read_step_yaml(path, cluster, text)
