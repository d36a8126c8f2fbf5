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

One reader per framework, in `placement.audit.readers` (megatron: scripts, logs, Bridge; torchtitan; deepspeed;
neox; maxtext; `common` the shared pieces, `dispatch` which reader reads which file); each hands the core a typed
`Reading` (`readers.reading`), which `Reading.launch_layout()` validates into the `LaunchLayout` (re-exported
here with every name other modules import from this one).

With any of them: placement's `cuda_visible_devices.txt` (`HOST CUDA_VISIBLE_DEVICES=...` per host, which its
launch.sbatch reads at run time), each node rank's GPU order once the audit knows the host order.

Not supported: Megatron's `--yaml-cfg` files, Bridge's `scripts/performance` `perf_matrix` files, NeMo 1.x
YAML, DeepSpeed `--include/--exclude`, here-documents in scripts (the DeepSpeed JSON must be a file).
"""

from __future__ import annotations

import re
from pathlib import Path

from placement.audit.readers import deepspeed, megatron, torchtitan
from placement.audit.readers import maxtext as maxtext_reader
from placement.audit.readers.common import read_devices_by_host
from placement.audit.readers.deepspeed import HF_DEFAULTS, RANK_ORDERS, TOPOLOGY_AXES, TOPOLOGY_CLASSES
from placement.audit.readers.dispatch import check_script_arms, detect_framework, file_kind, read_file, read_neox
from placement.audit.readers.megatron import MEGATRON_LOG_BEGIN, MEGATRON_LOG_END
from placement.audit.readers.neox import NEOX_KEYS
from placement.audit.readers.reading import Framework, LaunchLayout, NodeDevices, Reading, Settings
from placement.audit.readers.torchtitan import TOML_MAX_DEPTH
from placement.audit.shell import SCRIPT_ARGUMENTS, SCRIPT_ENVIRONMENT
from placement.errors import InputError
from placement.frameworks import CAPABILITIES
from placement.mapping.report import DEVICES_FILE

__all__ = ["FRAMEWORKS", "HF_DEFAULTS", "MEGATRON_LOG_BEGIN", "MEGATRON_LOG_END", "NEOX_KEYS", "RANK_ORDERS",
           "TOML_MAX_DEPTH", "TOPOLOGY_AXES", "TOPOLOGY_CLASSES", "Framework", "LaunchLayout", "Reading",
           "detect_framework", "parse_launch"]

FRAMEWORKS = tuple(CAPABILITIES)
"""The frameworks the audit reads: the capability table's rows (placement/frameworks.py)."""


def parse_launch(paths: list[Path], framework: str | None = None, script_args: tuple[str, ...] = (),
                 environment: tuple[tuple[str, str], ...] = ()) -> LaunchLayout:
    """The layout `paths` state, read as `framework` (detected when None), the scripts among them started with
    `script_args` ($1 ...: `sbatch launch.sbatch deepspeed`) in an environment that sets `environment` ((NAME, VALUE)
    pairs: `placement audit --env`)."""
    token = SCRIPT_ARGUMENTS.set(tuple(script_args))
    env_token = SCRIPT_ENVIRONMENT.set(tuple(environment))
    try:
        return _parse_files(paths, framework)
    except InputError as err:
        hint = _no_arguments_hint(paths) if not script_args and any(
            m in str(err) for m in EMPTY_ARGUMENT_MARKS) else None
        if hint is None:
            raise
        raise InputError(f"{err} ({hint})") from None
    finally:
        SCRIPT_ENVIRONMENT.reset(env_token)
        SCRIPT_ARGUMENTS.reset(token)


def refuse_unrunnable(launch: LaunchLayout) -> LaunchLayout:
    """The launch, or an InputError where its framework would not start the job or would train it otherwise than
    placement prices (LaunchLayout.refusal): what `audit` and `calibrate` price must be what runs."""
    if launch.refusal:
        raise InputError(launch.refusal)
    return launch


def _accelerate(path: Path) -> bool:
    from placement.audit.readers.dispatch import accelerate_yaml
    from placement.loaders.files import parse_yaml, read_text

    return accelerate_yaml(parse_yaml(read_text(path, "YAML config", "expected YAML"), path, "YAML config", False))


EMPTY_ARGUMENT_MARKS = ("got nothing", "cannot be evaluated", "which the files do not set", "got ''",
                       "no launch command")
"""Refusals an empty $1 can cause (a flag with no value, a condition on it, a word it leaves out): the ones the
--script-args hint is added to."""
_POSITIONAL = re.compile(r"\$\{?[1-9]|\$[@*#]|\bgetopts\b")


def _no_arguments_hint(paths: list[Path]) -> str | None:
    """What to say beside a refusal of a script that reads its own arguments, read as started with none (bash's
    empty $1 ...): the arguments are --script-args; None where no script reads them."""
    for p in paths:
        if file_kind(Path(p)) != "script":
            continue
        try:
            text = Path(p).read_text(errors="replace")
        except OSError:
            continue
        if _POSITIONAL.search("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))):
            return (f"{p} reads its own arguments ($1 ..., getopts), which are empty as it was read, started with "
                    f"none; give the ones the job ran with as --script-args '...'")
    return None


DEVICES_FOUND = "gpu order file"
"""The source key of a GPU order file the audit found beside a script rather than was given (core._devices_by_host
sets such a file aside where it names none of the job's hosts)."""
READS_DEVICES_FILE = re.compile(r"\$\{?(PLAN_DIR|SCRIPT_DIR)\}?/" + re.escape(DEVICES_FILE))
"""A launch line's CUDA_VISIBLE_DEVICES read at run time from DEVICES_FILE in the script's own folder (placement's
launch.sbatch: `$PLAN_DIR/cuda_visible_devices.txt`)."""


def _parse_files(paths: list[Path], framework: str | None) -> LaunchLayout:
    if not paths:
        raise InputError("no launch files given; pass the job's launch script or config files")
    # a file of each host's CUDA_VISIBLE_DEVICES (placement's cuda_visible_devices.txt) belongs to no framework: the
    # audit gives each node rank its host's order once it knows the host order
    by_host = [Path(p) for p in paths if file_kind(Path(p)) == "devices-by-host"]
    paths = [p for p in paths if Path(p) not in by_host]
    if not paths:
        raise InputError(f"{by_host[0]} lists each host's CUDA_VISIBLE_DEVICES only; pass the launch script that "
                         f"reads it (launch.sbatch) or the job's other launch files with it")
    launch = _parse(paths, framework)
    given = bool(by_host)
    if not by_host and any(n.unresolved and READS_DEVICES_FILE.search(n.unresolved)
                           for n in launch.cuda_visible_devices):
        # a launch line reads the file from its script's folder at run time (placement's launch.sbatch): read it
        # there too (a user trial's audit of its own launch.sbatch priced GPUs 0..7 and called that an error)
        by_host = [beside for beside in dict.fromkeys(Path(p).parent / DEVICES_FILE for p in paths)
                   if beside.is_file() and file_kind(beside) == "devices-by-host"]
    devices: dict[str, NodeDevices] = {}
    for p in by_host:
        for host, node in read_devices_by_host(p).items():
            if host in devices:
                raise InputError(f"{node.evidence}: host {host} is listed in two files ({devices[host].evidence}); "
                                 f"pass one")
            devices[host] = node
    found = {} if given or not by_host else {DEVICES_FOUND: f"{by_host[0]}, beside the script that reads it"}
    return launch.model_copy(update={"devices_by_host": devices, "sources": {**launch.sources, **found}})


LAUNCHER_FIELDS = frozenset({"allocator_conf", "jax_memory_fraction", "jax_allocator", "device_max_connections",
                             "launch_environment", "recipe.cpu_affinity",
                             "recipe.cuda_launch_blocking", "world_size", "gpus_per_node", "hosts",
                             "cuda_visible_devices"})
"""What a script's launch line alone gives (its environment, binding and process counts), not the job's layout."""


def _refuse_files_read_for_nothing(paths: list[Path], groups: list) -> None:
    """A script given beside the job's files from which nothing but its launch line's environment was read (a data
    preprocessing command, `python3 tools/preprocess_data.py ...`) is not part of the job: an error naming it, not
    its binding contradicting the training launch's (a user trial)."""
    from placement.audit.readers.common import launch_commands

    for p, g in zip(paths, groups, strict=True):
        if file_kind(Path(p)) != "script" or not set(g.sources) <= LAUNCHER_FIELDS or getattr(g, "keys", None):
            continue
        # a distributed launcher's line is the job's start, whose layout the other files give (deepspeed with its
        # JSON), and so is a line that names another of the files (`accelerate launch --config_file ds.yaml`); a plain
        # `python x.py` that states nothing and names none of them is another program
        text = Path(p).read_text(errors="replace")
        names_other = any(Path(o).name in text for o in paths if o != p)
        if not names_other and all(launch.launcher is None for launch in launch_commands(Path(p))):
            said = f" (only {', '.join(sorted(g.sources))})" if g.sources else ""
            raise InputError(f"{p}: no layout, batch, precision or model field read from it{said}: it does not "
                             f"launch the training job the other files describe; drop it from --launch, or pass "
                             f"the script that launches the training")


def _parse(paths: list[Path], framework: str | None) -> LaunchLayout:
    fw = framework or detect_framework(paths)
    check_script_arms(paths, fw)
    if fw not in FRAMEWORKS:
        raise InputError(f"unknown framework {fw!r}; expected one of {', '.join(FRAMEWORKS)}")
    yamls = [Path(p) for p in paths if file_kind(Path(p)) == "yaml" and not _accelerate(Path(p))] \
        if fw == "deepspeed" else []
    if yamls:  # GPT-NeoX merges all its config files into one
        groups = [read_neox(yamls)] + [read_file(Path(p), fw) for p in paths if Path(p) not in yamls]
    else:
        groups = [read_file(Path(p), fw) for p in paths]
    if len(paths) > 1 and not yamls:  # (GPT-NeoX's config files are read together, as one group)
        _refuse_files_read_for_nothing(paths, groups)
    written = next((g.heredoc for g in groups if g.heredoc is not None), None)
    if written is not None and not any(g.json_paths for g in groups) and fw in ("megatron", "deepspeed"):
        # the DeepSpeed JSON the launch passes exists only when the script runs: its here-document is that file, read
        # as a --launch JSON is (a QA run on Megatron-DeepSpeed's examples: "not among the --launch files"); the
        # script keeps its framework's reading (a Megatron-DeepSpeed script's, with its move to Megatron-LM)
        config = Settings(f"{written.command.path}:{written.command.line}")
        deepspeed.read_heredoc(written, config)
        config.json_written = written
        groups.append(config)
    if fw == "torchtitan":
        reading = torchtitan.join(groups, paths)
    elif fw == "maxtext":
        reading = maxtext_reader.join(groups, paths)
    elif fw == "deepspeed":
        reading = deepspeed.join(groups)
    else:
        reading = megatron.join(groups)
    return reading.launch_layout()
