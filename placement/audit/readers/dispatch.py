"""Which reader reads which file: a file's kind (by suffix, else by content), the framework a set of files
belongs to, and one file read by the reader of its kind for the audited framework."""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
from pathlib import Path

from placement.audit.maxtext import MODEL_CONFIG_KEYS
from placement.audit.readers import deepspeed, megatron, neox, torchtitan
from placement.audit.readers import maxtext as maxtext_reader
from placement.audit.readers.common import (
    SCOPE,
    WHOLE_VARIABLE,
    Launch,
    launch_commands,
    launcher_settings,
    looks_like_devices_by_host,
    node_launches,
    warn_held_arguments,
)
from placement.audit.readers.reading import Settings
from placement.audit.shell import SCRIPT_ARGUMENTS, Word, read_commands, read_script
from placement.errors import InputError
from placement.frameworks import CAPABILITIES
from placement.loaders.files import parse_yaml, read_text


def bridge_perf_launcher(word: str) -> bool:
    """A Megatron-Bridge scripts/performance launcher (setup_experiment.py, run_script.py, run_recipe.py there, all
    parse_cli_args): a run built from its own flags and per-system recipes.  scripts/training/run_recipe.py takes
    Hydra overrides, which are read."""
    return word.rsplit("/", 1)[-1] == "setup_experiment.py" or "scripts/performance/" in word


RUN_RECIPE_FLAGS = {
    **dict.fromkeys(("-ms", "--max_steps"), "train.train_iters"),
    **dict.fromkeys(("-gb", "--global_batch_size"), "train.global_batch_size"),
    **dict.fromkeys(("-mb", "--micro_batch_size"), "train.micro_batch_size"),
    **dict.fromkeys(("-sl", "--seq_length"), "dataset.seq_length"),
    **dict.fromkeys(("-tp", "--tensor_model_parallel_size"), "model.tensor_model_parallel_size"),
    **dict.fromkeys(("-pp", "--pipeline_model_parallel_size"), "model.pipeline_model_parallel_size"),
    **dict.fromkeys(("-cp", "--context_parallel_size"), "model.context_parallel_size"),
    **dict.fromkeys(("-vp", "--virtual_pipeline_model_parallel_size"), "model.virtual_pipeline_model_parallel_size"),
    **dict.fromkeys(("-ep", "--expert_model_parallel_size"), "model.expert_model_parallel_size"),
    **dict.fromkeys(("-etp", "--expert_tensor_parallel_size"), "model.expert_tensor_parallel_size"),
}
"""Megatron-Bridge scripts/training/run_recipe.py's convenience flags -> the ConfigContainer override each becomes
(COMMON_OVERRIDE_FIELDS, _common_config_overrides, at 0bc1089f5 of 2026-08-10), put before the command line's own
`section.key=value` overrides, which win.  Its -sl sets the dataset's sequence, and the launcher sets the model's to
it before validation (recipe_runner.py sync_model_dataset_sequence_length)."""


ARGUMENTLESS_SCRIPTS = {
    "00_quickstart_pretrain.py": "llama32_1b_pretrain_config() with 10 training iterations, as built (Megatron-Bridge "
                                 "tutorials/recipes/llama/00_quickstart_pretrain.py, 067f987d: no argument parser)",
}
"""Training scripts that read no command-line argument, with the run they build instead: a config file and overrides
on their line change nothing."""


def _refuse_argumentless_script(entry: Word | None, args: list[Word]) -> None:
    """A user trial: launch_with_sbatch.sh's CONFIG_FILE and CLI_OVERRIDES (tp 2, micro-batch 4, global batch 64)
    were priced, each cited to its line, for a line that runs 00_quickstart_pretrain.py, which parses none of them."""
    words = [w for w in (entry, *args) if w is not None]
    for k, w in enumerate(words):
        name = w.text.rsplit("/", 1)[-1]
        if name in ARGUMENTLESS_SCRIPTS:
            given = [x.text for x in words[k + 1:]]
            if given:
                raise InputError(f"{w.site}: {name} reads no command-line argument: it runs "
                                 f"{ARGUMENTLESS_SCRIPTS[name]}, so {' '.join(given[:4])}"
                                 f"{' ...' if len(given) > 4 else ''} on its line change nothing; launch a script "
                                 f"that reads them (02_pretrain_with_yaml.py, scripts/training/run_recipe.py), or "
                                 f"audit the run's saved run_config.yaml")
            raise InputError(f"{w.site}: {name} runs {ARGUMENTLESS_SCRIPTS[name]}, a recipe built in Python the "
                             f"audit does not read; audit the run's saved run_config.yaml")


def _runs_run_recipe(entry: Word | None, args: list[Word]) -> bool:
    """Whether the command runs Megatron-Bridge's scripts/training/run_recipe.py."""
    return any(w is not None and w.text.rsplit("/", 1)[-1] == "run_recipe.py" for w in (entry, *args[:3]))


def _run_recipe_overrides(args: list[Word]) -> list[Word]:
    """run_recipe.py's words with its convenience flags (RUN_RECIPE_FLAGS, `-tp 4` or `--tensor_model_parallel_size=4`)
    written as the overrides they become, ahead of the line's own; the model's sequence follows the dataset's where the
    line sets the dataset's (a user trial: -tp 4 -pp 2 -gb 128 were dropped and the job priced at tp 1 with batch
    1024, and model.seq_length=4096 dataset.seq_length=8192 was refused though the launcher syncs them)."""
    flags: list[Word] = []
    rest: list[Word] = []
    i = 0
    while i < len(args):
        w = args[i]
        name, eq, value = w.text.partition("=")
        key = RUN_RECIPE_FLAGS.get(name if eq else w.text)
        if key is None:
            rest.append(w)
            i += 1
            continue
        if not eq:
            if i + 1 >= len(args):
                raise InputError(f"{w.site}: {w.text} is missing its value (run_recipe.py: {key})")
            value, i = args[i + 1].text, i + 2
        else:
            i += 1
        flags.append(dataclasses.replace(w, text=f"{key}={value}"))
    if any(f.text.startswith("dataset.seq_length=") for f in flags) or any(
            w.text.startswith("dataset.seq_length=") for w in rest):
        rest = [w for w in rest if not w.text.startswith("model.seq_length=")]  # set to the dataset's at launch
    return flags + rest


MEGATRON_ITERATION = re.compile(r"elapsed time per iteration \(ms\):\s*[0-9.]+")
"""A Megatron-LM training log's iteration line (megatron/training/training.py training_log): a log excerpt, not a
script (a trial: an excerpt of iteration lines was refused as a shell script bash cannot parse)."""


def file_kind(path: Path) -> str:
    """toml | json | yaml | python | hostfile | megatron-log | devices-by-host | script."""
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
    if deepspeed.looks_like_hostfile(text):
        return "hostfile"
    if megatron.MEGATRON_LOG_BEGIN in text:
        return "megatron-log"
    iteration = MEGATRON_ITERATION.search(text)
    if iteration is not None:
        line = text.count("\n", 0, iteration.start()) + 1
        raise InputError(f"{path}:{line}: a Megatron-LM log's iteration lines (`elapsed time per iteration (ms)`) "
                         f"without the arguments block it prints at start-up ({megatron.MEGATRON_LOG_BEGIN!r}), "
                         f"from which the audit reads a log's layout; give the log from its start (the audit then sets "
                         f"its iteration times beside the estimate), or the launch script")
    if looks_like_devices_by_host(text):
        return "devices-by-host"
    return "script"


def _maxtext_yaml(path: Path) -> bool:
    """A YAML file with MaxText keys (base_config, per_device_batch_size, ici_/dcn_ parallelism, or a model config's:
    maxtext.MODEL_CONFIG_KEYS)."""
    text = read_text(path, "YAML config", "expected a YAML file")
    model_keys = "|".join(sorted(MODEL_CONFIG_KEYS))
    return bool(re.search(rf"^\s*(base_config|per_device_batch_size|(ici|dcn)_\w+_parallelism|{model_keys})\s*:", text,
                          re.M))


def _launched_and_named(path: Path) -> tuple[str | None, set[str], str | None]:
    """(the framework of the launch command the script runs, where the reader finds one and its words name one,
    "megatron-deepspeed" for Megatron's layers on DeepSpeed's engine; every framework a launch line of its text
    names, run or not, a Megatron-DeepSpeed line counted as DeepSpeed's; the first framework its text names
    anywhere)."""
    text = read_text(path, "launch script", "expected a shell script or an argument list")
    try:
        launches = launch_commands(path)
    except InputError:  # two launches that differ: read_file says so
        launches = []
    words = " ".join(w.text for w in launches[0].command.words) if launches else ""
    launched = next((fw for fw, pattern in _FRAMEWORK_MARKS if words and re.search(pattern, words)), None)
    commands = [x for x in text.splitlines() if _LAUNCH_WORD.search(x)]
    named = {"deepspeed" if fw == "megatron-deepspeed" else fw for fw, pattern in _FRAMEWORK_MARKS
             if any(re.search(pattern, x) for x in commands)}
    return launched, named, next((fw for fw, pattern in _FRAMEWORK_MARKS if re.search(pattern, text)), None)


def check_script_arms(paths: list[Path], framework: str) -> None:
    """An InputError where a script holds a launch for `framework` (the job's, from the other files or --framework)
    but, started with the arguments the audit was given, runs another framework's: placement's launch.sbatch
    chooses its framework from its first argument (`sbatch launch.sbatch deepspeed`), which the files do not
    hold.  Reading the other arm as this framework's priced a layout the job does not run."""
    for path in paths:
        if file_kind(path) != "script":
            continue
        launched, named, _ = _launched_and_named(path)
        runs = {"megatron", "deepspeed"} if launched == "megatron-deepspeed" else {launched}
        if launched is None or framework in runs or framework not in named:
            continue
        raise InputError(f"{path} runs {launched} when started as the audit reads it (its arguments: "
                         f"{' '.join(SCRIPT_ARGUMENTS.get()) or 'none'}), but the job is {framework}'s and the script "
                         f"holds a {framework} launch too; pass the arguments the job was started with, "
                         f"e.g. --script-args {framework} for `sbatch {path.name} {framework}`")


def _script_framework(path: Path) -> str | None:
    """The framework a script names, by its flags and entry points (None: none it knows): those of the launch
    command it runs where the reader finds one and they name one (placement's launch.sbatch holds a branch per
    framework and runs one), else those anywhere in its text."""
    launched, _, in_text = _launched_and_named(path)
    return launched or in_text


_FRAMEWORK_MARKS = (
    ("maxtext", r"\b(maxtext|MaxText)[./]\S*train\b"),
    ("torchtitan", r"torchtitan\.train|--parallelism\.|--job\.config_file|activation-checkpoint:|--model\.flavor"),
    ("megatron-deepspeed", r"--deepspeed_config|--deepspeed-config|\bdeepspeed(\.pt)?\s"),
    ("megatron", r"--tensor-model-parallel-size|--pipeline-model-parallel-size|--micro-batch-size|--num-layers\b|"
                 r"pretrain_gpt|--model-parallel-size|\bmodel\.tensor_model_parallel_size=|"
                 r"\btrain\.global_batch_size=|setup_experiment\.py|scripts/performance/\S+\.py|\brun_recipe\.py"),
)
"""Each framework's flags and entry points in a script, in the order they are tried (a Megatron-DeepSpeed script
has Megatron's flags too)."""
_LAUNCH_WORD = re.compile(r"(^|[\s;&|(])(exec\s+)?(torchrun|deepspeed|python[0-9.]*|srun)\s")
"""A line that starts a launcher (a launch command of some arm of the script, run or not)."""


HF_SCRIPT = re.compile(r"--(per_device_train_batch_size|per-device-train-batch-size|do_train|do-train)\b")
"""TrainingArguments flags of an HuggingFace Trainer script (readers.megatron.HF_TRAINER_FLAGS), not those any script
may take (--output_dir: readers.megatron.HF_GENERIC_FLAGS)."""


ACCELERATE_KEYS = frozenset({"compute_environment", "distributed_type"})
"""Top-level keys of an accelerate config file (`accelerate config`'s output, `accelerate launch --config_file`)."""
ACCELERATE_DISTRIBUTED_TYPES = frozenset({"NO", "MULTI_CPU", "MULTI_GPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA",
                                          "MULTI_MUSA", "MULTI_HPU", "MULTI_XPU", "DEEPSPEED", "FSDP", "XLA", "TPU",
                                          "MEGATRON_LM"})
"""accelerate's DistributedType names (utils/dataclasses.py; TPU before XLA), which mark an accelerate config by its
`distributed_type` alone."""
OTHER_TOOLS = {"LLaMA-Factory": frozenset({"finetuning_type", "cutoff_len", "template", "stage"}),
               "axolotl": frozenset({"base_model", "sequence_len", "micro_batch_size", "datasets"})}
"""Training tools whose own YAML config the audit does not read (keys each one's configs have)."""


def _yaml_kind(path: Path) -> str | None:
    """"deepspeed" for an accelerate config; an InputError naming the tool for another tool's YAML; else None."""
    data = parse_yaml(read_text(path, "YAML config", "expected YAML"), path, "YAML config", False)
    if accelerate_yaml(data):
        return "deepspeed"
    _refuse_other_tool(path, data)
    return None


def _refuse_other_tool(path: Path, data: object) -> None:
    """An InputError naming the training tool whose YAML `data` is (LLaMA-Factory, axolotl), which the audit does
    not read; nothing for any other YAML."""
    tool = _other_tool(data)
    if tool is not None:
        article = "an" if tool[0].lower() in "aeiou" else "a"
        raise InputError(f"{path}: {article} {tool} config, which `placement audit` does not read (it reads the "
                         f"frameworks under it: the DeepSpeed JSON its `deepspeed:` key names, with the training flags "
                         f"as an argument list); audit those files, or price the layout with `placement evaluate`")


PYTHON_RECIPES = (
    (re.compile(r"\bMaxTextModel\s*\("),
     "a MaxText benchmark recipe (MaxTextModel(model_type=..., tuning_params={...}), benchmarks/benchmark_utils.py), "
     "which MaxText's benchmark runner turns into a train command at run time, with the mesh of the TPU or GPU it "
     "targets",
     "pass the train command it runs (python3 -m maxtext.trainers.pre_train.train configs/base.yml model_name=... "
     "and the entry's tuning_params as key=value) with the config YAMLs it loads"),
    (re.compile(r"\bConfigContainer\s*\(|^[ \t]*(?:from|import)\s+megatron\.bridge\b", re.M),
     "a Megatron-Bridge recipe in Python, which builds its ConfigContainer in code",
     "audit the run's saved run_config.yaml (the whole ConfigContainer), or its override YAML (what it leaves to the "
     "recipe is then priced at Megatron-LM's defaults and named: base_config_unread)"),
)
"""Python files that build a job another way than DeepSpeed's topology classes, which the audit would otherwise
read for a PipeModelDataParallelTopology call it does not have (a QA run: MaxText's benchmarks/
maxtext_v5p_model_configs.py was told it builds no DeepSpeed topology): the pattern, what the file is, what to pass."""


def _refuse_python_recipe(path: Path) -> None:
    """An InputError naming the recipe kind of a Python file in PYTHON_RECIPES; nothing for another Python file."""
    text = read_text(path, "Python file", "expected a DeepSpeed topology file (ds_topology.py) or training script")
    for pattern, what, fix in PYTHON_RECIPES:
        m = pattern.search(text)
        if m is not None:
            line = text.count("\n", 0, m.start()) + 1
            raise InputError(f"{path}:{line}: {what}; the audit reads launch files, not the Python that builds one: "
                             f"{fix}")


OTHER_TRAINERS = {"openrlhf": "OpenRLHF"}
"""Training tools whose own command-line flags the audit does not read (their entry module's top package): OpenRLHF's
trainers (`deepspeed --module openrlhf.cli.train_sft`) build their DeepSpeed config in code from flags of their own,
which changed names between versions (`--micro_train_batch_size` before 2026, `--train.micro_batch_size` after)."""


WRAPPER_CLIS = {
    "megatron": ("ms-swift's Megatron CLI", "Megatron-LM's flags spelled with `_` (--tensor_model_parallel_size) over "
                 "ms-swift's own defaults (swift/megatron/argument)"),
    "swift": ("ms-swift's CLI", "its own flags and DeepSpeed/FSDP presets (--deepspeed zero3)"),
}
"""Training tools run as a command of their own (`megatron sft ...`, `swift sft ...`: ms-swift), with what their flags
are; the audit reads none of them (a user trial was told to pass --framework megatron, then "no launch command")."""
WRAPPER_SUBCOMMANDS = frozenset({"sft", "pt", "rlhf", "infer", "export", "eval", "sample", "rollout", "deploy"})
WRAPPER_MODULES = {"verl": ("verl's trainer", "Hydra overrides of its actor, rollout and reference models "
                            "(actor_rollout_ref.actor.megatron.tensor_model_parallel_size=...) over its own config "
                            "files")}
"""Training tools started as `python -m PACKAGE....` with arguments that are no --flags (Hydra overrides)."""
LAYOUT_KEYS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
               "context_parallel_size", "expert_model_parallel_size", "micro_batch_size", "global_batch_size",
               "max_length", "sequence_parallel", "recompute_granularity")
"""Keys of such a tool's layout, shown from its command line beside the refusal, for `placement evaluate`."""


def refuse_wrapper_cli(path: Path) -> None:
    """An InputError naming the training tool whose own command a script runs (ms-swift's `megatron sft`, `swift sft`,
    verl's `python -m verl.trainer.main_ppo`), with the layout values its command line states; nothing otherwise."""
    for cmd in read_commands(path):
        words = [w.text for w in cmd.words]
        tool = None
        if len(words) > 1 and words[0].rsplit("/", 1)[-1] in WRAPPER_CLIS and words[1] in WRAPPER_SUBCOMMANDS:
            tool, start = WRAPPER_CLIS[words[0].rsplit("/", 1)[-1]], 2
            what = f"`{words[0]} {words[1]}`"
        else:
            for k, w in enumerate(words[:-1]):
                top = words[k + 1].split(".")[0]
                if w == "-m" and top in WRAPPER_MODULES:
                    tool, start, what = WRAPPER_MODULES[top], k + 2, f"`-m {words[k + 1]}`"
                    break
        if tool is None:
            continue
        stated = []
        for k, w in enumerate(cmd.words[start:], start):
            key, eq, value = w.text.lstrip("-+").partition("=")
            name = key.rsplit(".", 1)[-1]
            if name in LAYOUT_KEYS and not re.search(r"(^|\.)(rollout|ref)\.", key):  # the model it trains
                if not eq:  # `--key VALUE`, or a switch alone
                    nxt = cmd.words[k + 1].text if k + 1 < len(cmd.words) else "--"
                    value = "(on)" if nxt.startswith("--") else nxt
                stated.append(f"{key} {value}")
        states = f"; its command states {', '.join(stated)}" if stated else ""
        raise InputError(f"{cmd.origin.path}:{cmd.origin.line}: {what} runs {tool[0]} ({tool[1]}), which "
                         f"`placement audit` does not read (it reads the launch files of Megatron-LM, "
                         f"Megatron-DeepSpeed, DeepSpeed, torchtitan and MaxText){states}; price that layout with "
                         f"`placement evaluate --tp N --pp N --cp N --ep N --mbs N --global-batch B --seq-len L`")


def _refuse_other_trainer(launch: Launch) -> None:
    """An InputError naming the training tool a launch runs (OpenRLHF), whose flags the audit does not read, with the
    `placement evaluate` flags that price its layout; nothing for any other entry."""
    entry = launch.entry.text
    module = entry.removesuffix(".py").replace("/", ".").lstrip(".")
    top = next((part for part in module.split(".") if part in OTHER_TRAINERS), None)
    if top is None:
        return
    where = f"{launch.entry.site.path}:{launch.entry.site.line}"
    raise InputError(f"{where}: {entry} is {OTHER_TRAINERS[top]}'s trainer, whose own flags (its ZeRO stage, micro and "
                     f"global batch, max length, gradient checkpointing, ring attention) `placement audit` does not "
                     f"read; price the layout with `placement evaluate --zero N --mbs M --global-batch B --seq-len L "
                     f"[--recompute full]`")


def _held_argument_lists(path: Path, entry: Word, args: list[Word], s: Settings) -> None:
    """A variable the files do not set, standing where arguments go (not as a flag's value), holds arguments the
    audit cannot read: with no argument read besides, an error (a user trial: the SC21 scripts' `pretrain_gpt.py
    ${MEGATRON_PARAMS}`, set by CONFIG.sh through `sbatch --export`, was priced as a job of all defaults); beside
    arguments it reads, a warning that names it."""
    held = [w for k, w in enumerate(args) if w.unresolved and WHOLE_VARIABLE.fullmatch(w.text)
            and (k == 0 or not args[k - 1].text.startswith("-") or WHOLE_VARIABLE.fullmatch(args[k - 1].text))]
    if not held:
        return
    names = ", ".join(dict.fromkeys(w.text for w in held))
    if not any(w.text.startswith("-") for w in args):
        _refuse_held_arguments(path)  # a variable read from a here-document: that error names it
        raise InputError(f"{held[0].site}: the arguments of {entry.text} are {names}, which the files do not set "
                         f"(the environment or another script sets it; {SCOPE}): no argument of the job to read; "
                         f"pass the arguments written out instead, a file of what `echo {held[0].text}` prints in "
                         f"the job")
    warn_held_arguments(held, s)


def _refuse_held_arguments(path: Path) -> str:
    """An InputError where the script reads its launch's arguments from a here-document into a variable (`read -r -d
    '' VAR <<EOF`, OpenRLHF's examples), which the audit does not expand; else the script's text."""
    text = read_text(path, "launch script", "a launch script")
    held = re.search(r"^\s*read\b[^\n]*?(\w+)\s*<<-?\s*['\"]?\w+", text, re.M)
    if held:
        line = text[:held.start()].count("\n") + 1
        raise InputError(f"{path}:{line}: the launch's arguments are a here-document read into "
                         f"${held.group(1)} (`{held.group(0).strip()}`), which the audit does not expand; "
                         f"pass the launch command with those arguments as a file of its own")
    return text


def accelerate_yaml(data: object) -> bool:
    """An accelerate config: its `distributed_type` names accelerate's DistributedType; `compute_environment` is not
    needed, accelerate fills it in (commands/config/config_args.py; a user trial: accelerate's own
    config_yaml_templates/deepspeed.yaml and fsdp.yaml have none, and were read as Megatron-Bridge YAML)."""
    return isinstance(data, dict) and isinstance(data.get("distributed_type"), str) and (
        ACCELERATE_KEYS <= set(data) or data["distributed_type"].upper() in ACCELERATE_DISTRIBUTED_TYPES)


def _other_tool(data: object) -> str | None:
    """The training tool whose YAML this is, where the audit reads none of them (LLaMA-Factory, axolotl)."""
    if not isinstance(data, dict):
        return None
    keys = set(map(str, data))
    return next((tool for tool, marks in OTHER_TOOLS.items() if len(marks & keys) >= 3), None)


def _hf_without_deepspeed(path: Path, text: str) -> str | None:
    """The framework of an HF Trainer script with no DeepSpeed mark: "deepspeed" where it passes --deepspeed, else an
    InputError saying what the Trainer runs (its own FSDP under --fsdp, PyTorch DDP otherwise), which the audit
    does not read."""
    if re.search(r"--deepspeed\b|--use_deepspeed\b", text):
        return "deepspeed"
    if re.search(r"\baccelerate\s+launch\b", text):
        return None  # accelerate's config file says what runs: it votes (and the audit refuses FSDP or DDP there)
    fsdp = re.search(r"--fsdp[ =]+(\"[^\"]*\"|'[^']*'|\S+)", text)
    if fsdp:
        megatron.check_hf_fsdp(str(path), fsdp.group(1))
    raise InputError(f"{path}: an HF Trainer script without --deepspeed or --fsdp runs PyTorch DDP through the "
                     f"Trainer, which `placement audit` does not read (it reads DeepSpeed under the Trainer); price "
                     f"the layout with `placement evaluate --zero 0`")


def detect_framework(paths: list[Path]) -> str:
    """The framework the files belong to; an InputError names the files when it cannot be told."""
    votes: dict[str, list[str]] = {}
    for p in paths:
        kind = file_kind(p)
        fw = {"toml": "torchtitan", "json": "deepspeed", "hostfile": "deepspeed", "yaml": "megatron",
              "python": "deepspeed", "megatron-log": "megatron"}.get(kind)
        if kind == "script":
            fw = _script_framework(p)
            if fw is None:
                refuse_wrapper_cli(p)
            text = read_text(p, "launch script", "a launch script")
            if fw == "megatron-deepspeed" and not re.search(dict(_FRAMEWORK_MARKS)["megatron"], text):
                fw = "deepspeed"  # `deepspeed train.py` with no Megatron flag: a model script of the user's own
            if fw is None and HF_SCRIPT.search(text):
                fw = _hf_without_deepspeed(p, text)
        elif kind == "yaml" and _maxtext_yaml(p):
            fw = "maxtext"
        elif kind == "yaml" and _yaml_kind(p) is not None:
            fw = _yaml_kind(p)
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
    neox_yaml = any(file_kind(Path(p)) == "yaml" for p in votes.get("deepspeed", []))
    if "deepspeed" in votes and "megatron" in votes and (neox_yaml or not any(file_kind(Path(p)) == "yaml"
                                                                              for p in votes["megatron"])):
        # a GPT-NeoX config's other YAML files (a setup file with paths and logging) are part of it
        votes["deepspeed"] += votes.pop("megatron")
    names = ", ".join(str(p) for p in paths)
    if len(votes) == 1:
        return next(iter(votes))
    if not votes:
        accelerate = [p for p in paths if file_kind(p) == "script" and re.search(
            r"\baccelerate\s+launch\b", read_text(p, "launch script", "a launch script"))]
        if accelerate:
            raise InputError(f"{accelerate[0]} starts the job with `accelerate launch`, whose config file says what "
                             f"runs: give that file (its --config_file, or accelerate's default_config.yaml) with "
                             f"--launch")
        raise InputError(f"cannot tell the framework of {names}: no Megatron flags, torchtitan flags or TOML, "
                         f"DeepSpeed JSON/hostfile or MaxText config found; pass --framework "
                         f"{'|'.join(CAPABILITIES)}")
    seen = "; ".join(f"{fw}: {', '.join(ps)}" for fw, ps in sorted(votes.items()))
    raise InputError(f"the files look like more than one framework ({seen}); pass the files of one job, or "
                     f"--framework {'|'.join(CAPABILITIES)}")


def read_neox(paths: list[Path]) -> Settings:
    """The YAML files of a DeepSpeed job as one GPT-NeoX config (GPT-NeoX merges every config file it is given, a
    model file and a setup file, say); an InputError when none of them is a GPT-NeoX config."""
    parts = []
    for path in paths:
        text = read_text(path, "YAML config", "expected a GPT-NeoX YAML config")
        data = parse_yaml(text, path, "YAML config", False)
        if not isinstance(data, dict):
            raise InputError(f"{path}: a GPT-NeoX config file must be a mapping of keys, got {type(data).__name__}")
        parts.append((path, data, text.splitlines()))
    for path, data, _ in parts:
        _refuse_other_tool(path, data)
    if not any(neox.is_neox(d) for _, d, _ in parts):
        names = ", ".join(str(p) for p in paths)
        raise InputError(f"{names}: no GPT-NeoX config among the YAML files (none names pipe_parallel_size or "
                         f"model_parallel_size); leave out a YAML file the job does not launch from, or pass "
                         f"--framework megatron for a Megatron-Bridge ConfigContainer")
    s = Settings(str(paths[0]))
    neox.read_yamls(parts, s)
    return s


def read_file(path: Path, fw: str) -> Settings:
    """What one file states, read by the reader of its kind; an InputError when `fw` does not read that kind."""
    s = Settings(str(path))
    kind = file_kind(path)
    if fw == "maxtext":
        return maxtext_reader.read_file(path, kind, s)
    if kind == "toml":
        if fw != "torchtitan":
            raise InputError(f"{path}: a TOML file is a torchtitan config; this audit reads {fw}")
        s.keys = torchtitan.toml_keys(path, s.key_sites)
        if not any(torchtitan.known(k) for k in s.keys):  # a file that states nothing torchtitan reads
            stated = ", ".join(list(s.keys)[:4]) or "no key at all"
            raise InputError(f"{path}: no torchtitan key read ({stated}): expected a torchtitan config with "
                             f"[job]/[model]/[training]/[parallelism] sections (training.local_batch_size, "
                             f"parallelism.tensor_parallel_degree...); a file of which nothing is read is not priced "
                             f"as a job of torchtitan's defaults")
        return s
    if kind == "json":
        if fw != "deepspeed":
            raise InputError(f"{path}: a JSON file is read as a DeepSpeed config; pass --framework deepspeed")
        deepspeed.read_json(path, s)
        return s
    if kind == "hostfile":
        deepspeed.read_hostfile(path, s)
        return s
    if kind == "megatron-log":
        if fw not in ("megatron", "deepspeed"):
            raise InputError(f"{path}: a Megatron-LM log; pass --framework megatron")
        megatron.read_log(path, s)
        return s
    if kind == "python":
        _refuse_python_recipe(path)
        if fw != "deepspeed":
            raise InputError(f"{path}: a Python file is read for the DeepSpeed topology it builds; pass "
                             f"--framework deepspeed, or the {fw} launch script instead")
        deepspeed.read_python(path, s)
        return s
    if kind == "yaml":
        text = read_text(path, "YAML config", "expected a Megatron-Bridge, GPT-NeoX or MaxText YAML config")
        data = parse_yaml(text, path, "YAML config", False)
        if data is None:  # a user trial's empty MaxText file was told it lacked ConfigContainer sections
            raise InputError(f"{path}: the YAML file holds nothing (it is empty or only comments); give the job's "
                             f"Megatron-Bridge, GPT-NeoX or MaxText YAML config")
        _refuse_other_tool(path, data)
        if accelerate_yaml(data):
            if fw != "deepspeed":
                raise InputError(f"{path}: an accelerate config (DeepSpeed under it); pass --framework deepspeed")
            deepspeed.read_accelerate(data, path, text.splitlines(), s)
            return s
        if neox.is_neox(data):
            if fw != "deepspeed":
                raise InputError(f"{path}: a GPT-NeoX config (DeepSpeed runs it); pass --framework deepspeed")
            return read_neox([path])
        if fw != "megatron":
            raise InputError(f"{path}: a YAML file is read as a Megatron-Bridge ConfigContainer; pass --framework "
                             f"megatron")
        if isinstance(data, dict) and "perf_matrix" in data:
            raise InputError(f"{path}: a Megatron-Bridge performance-matrix file (top-level `perf_matrix:`, "
                             f"scripts/performance/configs): the performance scripts pick the layout from its "
                             f"per-system, per-precision entries at run time and merge the ConfigContainer part "
                             f"onto a recipe built in Python, so no layout is read from it here; audit the run's "
                             f"saved run_config.yaml, or give the entry's layout as flags to `placement evaluate`")
        keys = megatron.bridge_keys(data, path, text.splitlines())
        megatron.bridge_settings(keys, s)
        # a saved run_config.yaml names every section's class; the model's is the one an override never carries
        # (Bridge's perf configs set profiling._target_ alone: a user trial read one as a whole config)
        s.bridge_full = "model._target_" in keys
        if not s.bridge_full:
            s.base_config = (f"{path} is a Megatron-Bridge override (its model section has no `_target_` key, which "
                             f"a saved run_config.yaml has): the training script merges it onto a recipe it builds "
                             f"in Python")
        if not s.sources:
            raise InputError(f"{path}: no layout or batch field read (expected a Megatron-Bridge ConfigContainer with "
                             f"model.tensor_model_parallel_size, train.global_batch_size..., a GPT-NeoX config with "
                             f"pipe_parallel_size/model_parallel_size, or a MaxText config)")
        return s
    # a script or an argument list
    launches = launch_commands(path)
    if not launches or launches[0].launcher is None:
        refuse_wrapper_cli(path)
    if launches and launches[0].entry.unresolved and not launches[0].args:
        _refuse_held_arguments(path)  # `deepspeed --module $training_commands`, the variable a here-document's
        entry = launches[0].entry
        raise InputError(f"{entry.site.path}:{entry.site.line}: the launch runs {entry.unresolved}, which the files do "
                         f"not set, with no arguments: nothing of the job to read; pass the script with the command "
                         f"it runs written out")
    if launches:
        launch = launches[0]
        _refuse_other_trainer(launch)
        launcher_settings(launch, s)
        node_launches(path, launches, s)
        args = launch.args
        _held_argument_lists(path, launch.entry, args, s)
    else:
        args = [w for c in read_commands(path) for w in c.words]
        if not args or (not args[0].text.startswith(("-", "activation")) and "=" not in args[0].text):
            text = _refuse_held_arguments(path)
            if re.search(r"<<-?\s*['\"]?\w+", text):
                raise InputError(f"{path}: no launch command outside a heredoc (`sbatch <<EOF ... EOF` or `cat "
                                 f"<<EOF`): the audit does not read the commands inside one; pass the script the "
                                 f"heredoc runs, or its command as a file of its own")
            inner = list(dict.fromkeys(w.text for c in read_commands(path) for w in c.words
                                       if w.text.endswith(".sh") and w is not c.words[0]))
            runs = (f"; it runs {', '.join(inner)}: give that script as --launch (alone, or with its hostfile or "
                    f"config), with what this file exports written into it, since {SCOPE}") if inner else ""
            raise InputError(f"{path}: no launch command (torchrun, deepspeed, python ... .py) and not an argument "
                             f"list{runs}; expected a launch script or a file of --flag value arguments")
    perf = next((w for w in ((launch.entry, *args) if launches else args) if bridge_perf_launcher(w.text)), None)
    if perf is not None:
        # a user trial: its -tp 4 -pp 4 -cp 2 -vp 5 -gb 256 were neither read nor listed, and the job priced at tp 1
        raise InputError(f"{perf.site.path}:{perf.site.line}: {perf.text} is Megatron-Bridge's performance launcher, "
                         f"which builds the run from its own flags (-tp, -pp, -cp, -vp, -ep, -gb, -mb, "
                         f"--compute_dtype, ...) over a per-system recipe in Python (scripts/performance/"
                         f"argument_parser.py, configs/), none of which placement reads; audit the run's saved "
                         f"ConfigContainer (its run_config.yaml, or the launcher's --dryrun config), or give the "
                         f"layout as flags to `placement evaluate`")
    _refuse_argumentless_script(launch.entry if launches else None, args)
    if fw == "torchtitan":
        s.keys = torchtitan.flags(args, s.key_sites)
        s.override = True
    elif (run_recipe := _runs_run_recipe(launch.entry if launches else None, args)) or any(
            re.fullmatch(r"\+{0,2}[A-Za-z_][\w]*\.[\w.]+=.*", w.text, re.S) for w in args):
        if run_recipe:
            args = _run_recipe_overrides(args)
        keys, config_file = megatron.hydra_overrides(args)
        megatron.bridge_settings(keys, s)
        recipe = next((b.text for a, b in itertools.pairwise(args) if a.text in ("--recipe", "--model")),
                      None)
        # the first override, else (a run_recipe.py line with only --recipe and --config-file: a review's exit 3) the
        # entry script itself
        first = next((w for w in args if "=" in w.text and not w.text.startswith("-")), None)
        site = first.site if first is not None else (launch.entry if launches else args[0]).site
        s.base_config = (f"{site}: {'Hydra overrides of ' if first is not None else ''}the recipe the training script "
                         f"builds in Python{f' ({recipe})' if recipe else ''}")
        megatron.read_args([w for w in args if w.text.startswith("--") and w.text != "--config-file"], s,
                           typos=False)  # the recipe script's own flags, not Megatron-LM's
        s.override = True
        if config_file:
            s.config_file = (config_file, "")
    else:
        megatron.read_args(args, s)
    if launches and s.deepspeed_config_word is not None:
        heredoc_config(path, launches[0], s)
    if launches and launches[0].launcher in ("deepspeed", "deepspeed.pt"):
        heredoc_hostfile(path, launches[0], s)
    return s


def heredoc_hostfile(path: Path, launch: Launch, s: Settings) -> None:
    """Read the DeepSpeed hostfile the script writes with a here-document before its launch (`cat > hostfile <<EOF`
    ... `deepspeed --hostfile hostfile ...`) as the job's hostfile: its hosts, slots and order, each line's evidence
    the script line that wrote it.  A QA trial: two hosts of 8 slots written so were priced on the catalog cluster's
    default 1,024 GPUs.  One that appends (`>>`), runs under a condition the reader cannot evaluate, or holds a value
    only the running job gives, is not read, and a line says so."""
    args = launch.launcher_args
    word = next((dataclasses.replace(w, text=w.text.split("=", 1)[1]) for w in args
                 if w.text.startswith("--hostfile=")), None)
    if word is None:
        word = next((args[i + 1] for i, w in enumerate(args[:-1]) if w.text in ("--hostfile", "-H")), None)
    if word is None:
        return
    doc = _heredoc_before(path, launch, word)
    if doc is None:
        return
    why = ("the script adds a here-document to it (`>>`) over what the file held before the job" if doc.append else
           f"the script writes it with a here-document {doc.uncertain}" if doc.uncertain else
           f"its line {doc.unresolved[0][0]} holds {doc.unresolved[0][1]!r}, {doc.unresolved[0][2]}" if doc.unresolved
           else None)
    if why is not None:
        s.ignored.append(f"the DeepSpeed hostfile {word.text} ({doc.command}): {why}: not read as the hostfile")
        return
    deepspeed.parse_hostfile(doc.text, f"{word.text} (written by {doc.command.path}:{doc.command.line})", s,
                             where=lambda n: f"{doc.lines[n - 1].origin} (line {n} of the hostfile {word.text} the "
                                             f"script writes)")


def _heredoc_before(path: Path, launch: Launch, word: Word):
    """The last here-document the script writes to the file `word` names before the launch runs, or None."""
    script = read_script(path)
    at = script.commands.index(launch.command) if launch.command in script.commands else len(script.commands)
    written = [h for h in script.heredocs if h.after <= at and _same_file(h.target, word)]
    return written[-1] if written else None


def _same_file(a: Word, b: Word) -> bool:
    """Whether two words name one file: the same path once normalised (`./tmp/ds.json`, `tmp/ds.json`), or, where the
    files leave part of them open, the same text from the same unknown (`$script_dir/ds_config.json` twice)."""
    if a.unresolved or b.unresolved:
        return a.text == b.text and a.unresolved == b.unresolved
    return bool(a.text) and os.path.normpath(a.text) == os.path.normpath(b.text)


def heredoc_config(path: Path, launch: Launch, s: Settings) -> None:
    """Set `s.heredoc` to the here-document the script writes the DeepSpeed config its launch passes with
    (`cat <<EOT > $DS_CONFIG` ... `--deepspeed_config $DS_CONFIG`, Megatron-DeepSpeed's example scripts): the last one
    written to that file before the launch runs.  One that appends to the file (`>>`), or that runs under a
    condition the reader cannot evaluate, is not read, and a line says so."""
    word = s.deepspeed_config_word
    assert word is not None
    doc = _heredoc_before(path, launch, word)
    if doc is None:
        return
    if doc.append:
        s.ignored.append(f"the DeepSpeed config {word.text} ({s.deepspeed_config_arg}): the script adds a "
                         f"here-document to it ({doc.command}, `>>`) over what the file held before the job, which "
                         f"the files do not show: not read as the config")
    elif doc.uncertain:
        s.ignored.append(f"the DeepSpeed config {word.text} ({s.deepspeed_config_arg}): the script writes it with a "
                         f"here-document ({doc.command}) {doc.uncertain}: not read as the config")
    else:
        s.heredoc = doc


