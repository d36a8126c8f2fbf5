"""What every reader shares: integers with a minimum, Megatron-style argument splitting, the launcher command
of a script (torchrun, deepspeed, python -m torch.distributed.run) and its world size, and the merge of several
files' settings with conflict checks, and the nearest known key to an unknown one (a framework's key check)."""

from __future__ import annotations

import dataclasses
import difflib
import re
import shlex
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from placement.audit.readers.reading import DeepSpeedBinding, NodeDevices, Settings, node_line
from placement.audit.shell import SLURM_PREFIX, WATCHED_PREFIXES, Command, Word, default_note, read_commands
from placement.errors import InputError
from placement.loaders.files import read_text


def start_refusal(where: str, what: str, check: str, fix: str) -> InputError:
    """A job its framework refuses to start, which has no step time to price: the files' evidence, the value, the
    framework's check (its file, commit, date and words) and the fix."""
    return InputError(f"{where}: {what}: {check}, so this job does not start; {fix}")


def fp32_refusal(where: str, framework_rule: str, fix: str) -> str:
    """A job whose files leave it in fp32 (its framework's default without a 16-bit switch): placement prices 16-bit
    and FP8 GEMMs, and an fp32 GEMM runs at a fraction of their tensor-core rate, so pricing it as bf16 would promise
    a step several times shorter than the job's.  A user trial: a Megatron-LM script and a DeepSpeed JSON without
    --bf16 / bf16.enabled were priced as bf16 from placement's own default."""
    return (f"{where}: {framework_rule}, which placement does not price (its GEMMs run at a fraction of the 16-bit "
            f"tensor-core rate, and pricing it as bf16 would promise a step several times shorter); {fix}")


def read_int(text: str, what: str, evidence: str, *, minimum: int = 0) -> int:
    """`text` as an integer >= `minimum`; an InputError names `what` and its evidence otherwise."""
    try:
        value = int(str(text).strip())
    except (TypeError, ValueError):
        raise InputError(f"{evidence}: {what} must be an integer, got {text!r}; write it as a whole number (no "
                         f"quotes, no unit), e.g. {max(minimum, 1)}") from None
    if value < minimum:
        raise InputError(f"{evidence}: {what} must be >= {minimum}, got {value}; use {minimum} or more")
    return value


TYPO_CUTOFF = 0.9
"""difflib similarity at or above which an unknown key with the same words as a known one, one of them spelled
differently, is taken for a typo of it (Megatron's NEAR_MISS_CUTOFF too)."""
SUGGEST_CUTOFF = 0.6
"""difflib similarity at or above which a known key is named as the nearest to an unknown one (difflib's default)."""


def nearest_key(key: str, known: Collection[str]) -> str | None:
    """The key of `known` (spelled with `_`, lower case) nearest to `key` (with `-` read as `_`, in any letter case;
    difflib, at least SUGGEST_CUTOFF similar), or None."""
    low = key.replace("-", "_").lower()
    if low in known:
        return low
    close = difflib.get_close_matches(low, list(known), n=1, cutoff=SUGGEST_CUTOFF)
    return close[0] if close else None


def typo_of(key: str, known: Collection[str], nearest: str | Literal[False] | None = False) -> str | None:
    """The key of `known` that `key` surely misspells, or None: the same key in other letter case or with `-` for
    `_`, or one with as many words (split at `_` and at the `.` of a dotted key), all but one the same and that one
    misspelled (a difflib similarity of the keys of at least TYPO_CUTOFF).  A word that differs only in its digits
    names another key, as adam_beta1 and adam_beta2 do, and a word added or dropped may too (gptj_residual,
    gpt_j_residual): those are not taken for typos.  `nearest`: nearest_key(key, known), where the caller has it
    (False: not computed yet)."""
    low = key.replace("-", "_").lower()
    near = nearest_key(key, known) if nearest is False else nearest
    if near is None or near == low:
        return near
    if difflib.SequenceMatcher(None, low, near).ratio() < TYPO_CUTOFF:
        return None
    words, known_words = re.split(r"[_.]", low), re.split(r"[_.]", near)
    if len(words) != len(known_words) or low.count(".") != near.count("."):
        return None
    differ = [(a, b) for a, b in zip(words, known_words, strict=True) if a != b]
    if len(differ) != 1 or re.sub(r"\d", "", differ[0][0]) == re.sub(r"\d", "", differ[0][1]):
        return None
    return near


def typo_error(typos: list[str], no_version: str, versions_read: str, refuses: str) -> InputError:
    """The one error for every sure typo a config states (`typos`: "file:line: unknown key K; did you mean M?"):
    `no_version` ("No GPT-NeoX version") read (`versions_read`) has them, and the framework refuses such a config
    (`refuses`)."""
    which = "this key" if len(typos) == 1 else "these keys"
    return InputError(f"{'; '.join(typos)} {no_version} has {which} ({versions_read}), and {refuses}, so this job "
                      f"would not start: correct the spelling")


SCOPE = ("each --launch file is read on its own and `source` or `.` lines are not followed, so a variable another "
         "file sets does not reach this one")
"""Why a variable another --launch file sets is still unset where it is used (a user trial passed env.sh and train.sh
and was told that "the files" do not set it)."""


def word_check(word: Word, flag: str) -> None:
    """InputError when the script leaves `word` (the value of `flag`) unresolved or under a condition."""
    if word.unresolved:
        variable = re.fullmatch(r"\$\{?([A-Za-z_]\w*)\}?", word.unresolved)
        hidden = re.fullmatch(r"\$([A-Za-z_]\w*) \(not exported: .*\)", word.unresolved, re.S)
        kept = re.fullmatch(r"\$([A-Za-z_]\w*) \(withheld by srun: .*\)", word.unresolved, re.S)
        if kept:  # the script exports it, but the srun that starts the command keeps it from its tasks
            name = kept.group(1)
            raise InputError(f"{word.site}: {flag} depends on {word.unresolved}, so the job runs it with the value "
                             f"its tasks' environment gives {name}, if any; pass it on that srun line: --export=ALL "
                             f"(srun's default), or name {name} in its --export list (NONE takes no names)")
        if hidden:  # the script sets it, but the shell that reads it is a child that does not see it
            name = hidden.group(1)
            raise InputError(f"{word.site}: {flag} depends on {word.unresolved}, so the job runs it with the value "
                             f"its environment gives {name}, if any; export it in the script (`export {name}`) if "
                             f"the job is meant to run with the script's value, or give it as the job's environment "
                             f"has it with --env {name}=VALUE")
        env = f", give it as the job's environment has it with --env {variable.group(1)}=VALUE," if variable else ""
        raise InputError(f"{word.site}: {flag} depends on {word.unresolved}, which the files do not set "
                         f"(value written at {word.origin.path}:{word.origin.line}; {SCOPE}); set it in the "
                         f"script{env} or pass the expanded argument list")
    if word.uncertain:
        raise InputError(f"{word.site}: {flag} is {word.uncertain}; expected the layout flags outside "
                         f"conditions placement cannot evaluate (or pass the expanded argument list; a condition on a "
                         f"variable of the job's environment reads the value --env NAME=VALUE gives)")


FP16_MIXED = "FP16 mixed precision"
"""How every reader's ignored line for an FP16 job priced as BF16 begins after its key: the audit's headline says
`fp16 (priced as bf16 ...)` from it (audit.core, Plan.precision_as_run)."""
LONG_LINE = 400
"""Characters of a source line beyond which an argument's evidence quotes the argument instead of the line (whose
head and tail `Origin` would show)."""


@dataclass
class Arg:
    """One flag of an argument list with its values and the word that spelled it."""

    flag: str
    values: list[Word]
    word: Word

    @property
    def evidence(self) -> str:
        """Where the flag was written, and where its value came from when elsewhere (a variable)."""
        ev = self.word.evidence
        site, org = self.word.site, self.word.origin
        if len(org.text) > LONG_LINE:
            # an argument list on one long line (or a long array assignment expanded later): the argument itself, not
            # the line's head and tail (a user trial read the SC21 scripts' one-line lists as `... --merge-fil ... 00
            # --clip-grad 1.0` beside every value)
            spelled = [self.word.text, *(v.text for v in self.values[1:])] if "=" in self.word.text else \
                [self.flag, *(v.text for v in self.values)]
            ev = f"{org.path}:{org.line}: ... {' '.join(spelled)} ..." + (
                "" if org == site else f" (expanded at {site.path}:{site.line})")
        for v in self.values:
            if v.origin != self.word.origin and v.origin != self.word.site:
                at = (f"{site.path}:{site.line}: ... {self.flag} ..." if len(site.text) > LONG_LINE
                      else str(self.word.site))  # a long line as the flag itself, as above
                ev = f"{at} [{self.flag} value from {v.origin}]"
        defaulted = next((v.default_of for v in self.values if v.default_of), None)
        if defaulted and not ev.endswith(default_note(defaulted)) and default_note(defaulted) not in ev:
            ev += default_note(defaulted)
        withheld = next((v.withheld for v in self.values if v.withheld), None)
        if withheld and withheld not in ev:  # the script's export of it, which srun keeps from the command
            ev += withheld
        env = next((v.environment for v in self.values if v.environment is not None), None)
        if env is not None and env.text.removeprefix("placement audit ") not in ev:  # `$((N / 8))` of an --env N
            ev += f" (with {env.text.removeprefix('placement audit ')})"
        return ev


WHOLE_VARIABLE = re.compile(r"\$\{?[A-Za-z_]\w*(\[[@*]\])?\}?")
"""A word that is one variable's expansion and nothing else (`$ARGS`, `${ARGS}`, `${ARGS[@]}`)."""


def warn_held_arguments(held: list[Word], s: Settings, after: str = "") -> None:
    """Variables the files do not set, standing where arguments go: the arguments they hold are not read, so the
    audit prices the framework's defaults for whatever they set.  `after` names the switch they follow."""
    names = ", ".join(dict.fromkeys(w.text for w in held))
    where = f"{names} ({held[0].site.path}:{held[0].site.line}{after})"
    s.model_elsewhere = s.model_elsewhere or f"{where} is not set by the files"
    s.warnings.append(f"{where} is not set by the files: the arguments it holds are not read, so the audit "
                      f"prices the framework's defaults for whatever they set; pass the arguments written out (what "
                      f"`echo {held[0].text}` prints in the job) with the rest")


def split_args(words: list[Word], nargs: dict[str, int | str]) -> list[Arg]:
    """`--flag value`, `--flag=value`, `--flag v1 v2` (nargs from the table; unknown flags take the
    following words up to the next `--flag`)."""
    out: list[Arg] = []
    full = False  # the last flag has the values its nargs takes (one or more)
    i = 0
    while i < len(words):
        w = words[i]
        if not w.text.startswith("-") or w.text in ("-", "--") or re.fullmatch(r"-\d.*", w.text):
            # a variable the files do not set, after a flag that has its values, holds more arguments or none (the
            # dispatcher's held-arguments warning names it), not a second value (a user trial: a script's trailing
            # `--recompute-num-layers 1 $DEBUG_ARGS` was refused as two values of --recompute-num-layers)
            if out and not (full and w.unresolved and WHOLE_VARIABLE.fullmatch(w.text)):
                out[-1].values.append(w)
            i += 1
            continue
        flag, eq, inline = w.text.partition("=")
        arg = Arg(flag, [], w)
        if eq:
            arg.values.append(Word(inline, w.origin, w.site, w.unresolved, w.uncertain))
            out.append(arg)
            full = True
            i += 1
            continue
        want = nargs.get(flag)
        i += 1
        if want == 0:  # a switch; a word after it may still be its value in a dialect (HF's --deepspeed PATH)
            out.append(arg)
            full = False
            continue
        while i < len(words) and not (words[i].text.startswith("--") or re.fullmatch(r"-[A-Za-z].*", words[i].text)):
            arg.values.append(words[i])
            i += 1
            if isinstance(want, int) and len(arg.values) == want:
                break
        full = isinstance(want, int) and len(arg.values) == want
        out.append(arg)
    return out


def one_value(arg: Arg) -> Word:
    """The single value of `arg`; an InputError when it has none or several."""
    if len(arg.values) != 1:
        got = "nothing" if not arg.values else " ".join(v.text for v in arg.values)
        raise InputError(f"{arg.word.site}: {arg.flag} expects one value, got {got}")
    word_check(arg.values[0], arg.flag)
    return arg.values[0]


_LAUNCHERS = {"torchrun", "deepspeed", "deepspeed.pt"}
_PY = re.compile(r"^(python[0-9.]*|.*/python[0-9.]*)$")


@dataclass
class Launch:
    """A script's launch command: the launcher and its arguments, the entry point and the training arguments."""

    launcher: str | None
    launcher_args: list[Word]
    entry: Word
    args: list[Word]
    command: Command

    @property
    def site(self) -> str:
        """The launch line as evidence; a long one (a whole argument list on one line) as its launcher and entry
        point, not the line's head and tail (a user trial saw the whole line beside recipe.cpu_affinity, as Arg's
        evidence once did beside every value)."""
        org = self.command.origin
        if len(org.text) <= LONG_LINE:
            return str(org)
        return f"{org.path}:{org.line}: ... {self.launcher + ' ... ' if self.launcher else ''}{self.entry.text} ..."


def find_launch(cmd: Command) -> Launch | None:
    """The launch in `cmd` (torchrun, deepspeed, python [-m torch.distributed.run] x.py), or None."""
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
        # torchrun and deepspeed both take -m / --module: the entry is a module, run as `python -m` would
        if t.endswith(".py") or (t.endswith(".sh") and j > 0) or (t in ("-m", "--module") and launcher is not None):
            break
        if _PY.match(t) and launcher is None and j + 1 < len(w) and w[j + 1].text == "-m":
            j += 1
            break
        j += 1
    if j >= len(w):
        return None
    if launcher is None and w[j].text.rsplit("/", 1)[-1] == Path(cmd.origin.path).name:
        # the script started again (`srun bash job.sh --task`), which the shell reader reads as that process, not a
        # launch of its own (a QA trial: such a job.sh was refused as 'two launch commands with different
        # arguments', its srun line and the command the run again reaches, where the same script as launch.sbatch
        # was read)
        return None
    if w[j].text in ("-m", "--module"):
        if j + 1 >= len(w):
            return None
        entry, rest = w[j + 1], w[j + 2:]
        largs = w[start:j]
    else:
        entry, rest = w[j], w[j + 1:]
        largs = w[start:j]
    if launcher is None and not (entry.text.endswith(".py") or any(x.text.startswith("--") for x in rest)):
        return None
    return Launch(launcher, largs, entry, rest, cmd)


def launch_commands(path: Path) -> list[Launch]:
    """The script's launch commands (an InputError when two launch different arguments)."""
    launches = [x for x in (find_launch(c) for c in read_commands(path)) if x is not None]
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


HOST_COMMENT = re.compile(r"#\s*on\s+(\S+)\s*$")
"""The comment placement's scripts write above each node rank's launch line (`# on gpu-002`): the host it runs on."""
_NODE_RANK_FLAGS = ("--node-rank", "--node_rank")


def node_launches(path: Path, launches: list[Launch], s: Settings) -> None:
    """What the script's launch lines say per node: the CUDA_VISIBLE_DEVICES each runs with (exported earlier or set
    on the line; `cuda_visible_devices`), and, where every node rank 0..N-1 has one line with a `# on HOST` comment
    right above it (as placement's megatron.sh, torchtitan.sh and deepspeed.sh write them), the host order (`hosts`).
    A value that is not a list of distinct GPU indices is an InputError naming the file, line and value."""
    launched = [x for x in launches if x.launcher is not None]
    if not launched:
        return
    lines = read_text(path, "launch script", "a launch script").splitlines()
    nodes, hosts = [], {}
    for launch in launched:
        args = {a.flag: a for a in split_args(launch.launcher_args, {})}
        flag = next((args[f] for f in _NODE_RANK_FLAGS if f in args), None)
        fixed = fixed_value(flag)
        rank = int(fixed.text) if fixed is not None and fixed.text.isdigit() else None
        org = launch.command.origin
        above = lines[org.line - 2] if org.path == str(path) and 2 <= org.line <= len(lines) + 1 else ""
        m = HOST_COMMENT.fullmatch(above.strip())
        if rank is not None and m:
            hosts.setdefault(rank, []).append((m.group(1), f"{path}:{org.line - 1}: {above.strip()}"))
        word = launch.command.env("CUDA_VISIBLE_DEVICES")
        if word is None:
            nodes.append(NodeDevices(node_rank=rank, evidence=str(org)))
        elif word.unresolved or word.uncertain:
            why = f"depends on {word.unresolved}" if word.unresolved else f"is {word.uncertain}"
            nodes.append(NodeDevices(node_rank=rank, evidence=word.evidence, unresolved=f"its value {why}"))
        else:
            nodes.append(NodeDevices(node_rank=rank, devices=visible_devices(word), evidence=word.evidence))
    first: dict[tuple[int, ...], list[str]] = {}  # each order set: its first line's evidence, and how many set it
    for n in nodes:
        if n.devices is not None:
            first.setdefault(n.devices, []).append(n.evidence)
    s.put("cuda_visible_devices", tuple(nodes), "; ".join(
        ev[0] + (f" (and {len(ev) - 1} more launch line(s) alike)" if len(ev) > 1 else "") for ev in first.values()))
    ranks = sorted(hosts)
    if ranks and ranks == list(range(len(launched))) and all(len(v) == 1 for v in hosts.values()):
        names = tuple(hosts[k][0][0] for k in ranks)
        if len(set(names)) == len(names):
            s.put("hosts", names, f"{hosts[0][0][1]} (the `# on HOST` comment above each of the {len(names)} "
                                  f"node ranks' launch lines)")


VISIBLE_DEVICES_LINE = re.compile(r"(\S+)\s+CUDA_VISIBLE_DEVICES=(\S*)")
"""A line of placement's cuda_visible_devices.txt: `HOST CUDA_VISIBLE_DEVICES=0,4,1,5,...`."""


def looks_like_devices_by_host(text: str) -> bool:
    """Whether every line of `text` but comments is `HOST CUDA_VISIBLE_DEVICES=...` (and there is one)."""
    lines = [x.strip() for x in text.splitlines() if x.strip() and not x.lstrip().startswith("#")]
    return bool(lines) and all(VISIBLE_DEVICES_LINE.fullmatch(x) for x in lines)


def read_devices_by_host(path: Path) -> dict[str, NodeDevices]:
    """Host -> the CUDA_VISIBLE_DEVICES its ranks run with, from a file of `HOST CUDA_VISIBLE_DEVICES=...` lines
    (placement's cuda_visible_devices.txt); an InputError naming the line for a host listed twice or a value that is
    not a list of distinct GPU indices."""
    out: dict[str, NodeDevices] = {}
    for n, line in enumerate(read_text(path, "GPU order file", "expected HOST CUDA_VISIBLE_DEVICES=... lines")
                             .splitlines(), 1):
        m = VISIBLE_DEVICES_LINE.fullmatch(line.strip())
        if m is None:
            continue
        host, where = m.group(1), f"{path}:{n}: {line.strip()}"
        if host in out:
            raise InputError(f"{where}: host {host} is listed twice ({out[host].evidence}); give each host one line")
        out[host] = NodeDevices(devices=device_indices(m.group(2), where), evidence=where)
    return out


def visible_devices(word: Word) -> tuple[int, ...]:
    """CUDA_VISIBLE_DEVICES's GPU indices in order ("0,2,1,3"); an InputError naming where it was set and the value
    otherwise (UUIDs, MIG names, repeats or an empty list: the in-node order is priced from indices)."""
    return device_indices(word.text, word.evidence)


def device_indices(value: str, evidence: str) -> tuple[int, ...]:
    """`visible_devices` of a CUDA_VISIBLE_DEVICES value written at `evidence` (a shell word, or a Python string)."""
    text = value.strip()
    items = [x.strip() for x in text.split(",")]
    if not text or not all(x.isdigit() for x in items) or len(set(map(int, items))) != len(items):
        raise InputError(f"{evidence}: CUDA_VISIBLE_DEVICES={value!r} is not a list of distinct GPU indices "
                         f"(e.g. 0,2,1,3): the audit prices the GPU order inside a node from indices; give them "
                         f"(nvidia-smi -L lists each index with its UUID)")
    return tuple(int(x) for x in items)


BF16_ZERO1 = "DeepSpeed's BF16_Optimizer shards the optimizer state"
"""The evidence of a stage 0 that DeepSpeed's BF16_Optimizer runs as ZeRO-1: a file that states the same stage 0
agrees with it (a user trial: Megatron-DeepSpeed's Llama 2 example with its own ds_config was refused as
contradictory)."""


DDP_BF16 = ("DeepSpeed 0.17.6 and later run bf16 at ZeRO stage 0 without a pipeline as DDP_BFLOAT16: weights, "
            "gradients and optimizer state unsharded, the gradients accumulated in bf16 and all-reduced "
            "(runtime/engine.py _do_optimizer_sanity_check, 889f0ead2 \"Enable non-ZeRO mode\", #7515); earlier "
            "releases refuse it (\"Bfloat16 wrapper must use a gradient accumulation type of fp32, enable ZeRO to use "
            "Bfloat16 gradient accumulation\")")
"""Why a bf16 job at ZeRO stage 0 whose model is no PipelineModule is priced unsharded (a user trial: priced as the
BF16_Optimizer's ZeRO-1, its optimizer state under-counted by about 12 (1 - 1/dp) bytes a parameter)."""


ENGINE_AUTOGRAD = "DeepSpeed's engine lets autograd"
"""How the source of a DeepSpeed job's accumulation begins where a rule, not a file, says autograd: a DeepSpeed JSON
that picks the BF16_Optimizer (its fp32 gradient copy) wins over it when the files merge."""
BF16_COPY = "DeepSpeed's BF16_Optimizer adds"
"""...and how the BF16_Optimizer's begins."""
BF16_ALL_REDUCE = "DeepSpeed's BF16_Optimizer all-reduces"
"""How the source of its whole-gradient all-reduce begins."""


def deepspeed_json_unread(s: Settings) -> None:
    """What the audit says where the files name a DeepSpeed JSON (`--deepspeed_config`) that is not among them: a
    training script of the user's own is refused, its whole layout being in that JSON (a user trial: placement's own
    deepspeed.sh audited alone was priced as a ZeRO-0 job of defaults, 161 GiB); a Megatron-DeepSpeed script is
    priced from its flags, with a note that DeepSpeed takes the stage, batch and precision from the JSON (a user
    trial's heredoc-written JSON went unmentioned); an HF Trainer's, with a note too."""
    cfg = s.deepspeed_config
    if cfg is None or s.json_paths:
        return
    name, ev = cfg
    if not s.megatron_lm and not s.hf_trainer:
        s.refusal = s.refusal or (
            f"{ev}: DeepSpeed runs a training script of the user's own here, whose ZeRO stage, batch and precision "
            f"are in the DeepSpeed config it names ({name or 'a path the files leave open'}), not among the --launch "
            f"files, so nothing of its layout is read; add that JSON with --launch")
    elif not s.hf_trainer:
        zero = f" (zero_stage from {s.sources['zero_stage']})" if s.has("zero_stage") else ""
        s.ignored.append(f"DeepSpeed config {name or '(a path the files leave open)'} ({ev}): not among the --launch "
                         f"files, and DeepSpeed takes the ZeRO stage, micro-batch, accumulation and precision from it "
                         f"(Megatron-DeepSpeed's --zero-stage only sizes zero.Init); priced from the script's "
                         f"flags{zero}: add the JSON with --launch to price what it states")
    else:
        s.ignored.append(f"DeepSpeed config {name or '(a path the files leave open)'}: the DeepSpeed JSON is not "
                         f"among the audited files, so its ZeRO stage, batch and precision are not read ({ev}); "
                         f"give it with --launch")


def deepspeed_grad_accumulation(s: Settings, bf16_optimizer: bool, evidence: str, buffer_fp32: bool = True) -> None:
    """How a DeepSpeed job accumulates and reduces micro-batch gradients, unless the files said: its BF16_Optimizer
    (bf16 with ZeRO stage 0) adds them into its own buffer after each backward (bf16_optimizer.py update_hp_grads),
    fp32 or, `buffer_fp32` false, bf16 (`data_types.grad_accum_dtype` unset at stage 0), and
    all-reduces them whole before updating its shard (buffered_allreduce_fallback); its ZeRO optimizers let
    autograd accumulate them in .grad (ZeRO-2/3 on the shard, reduce-scattered every micro-batch).  Current
    DeepSpeed also picks the BF16_Optimizer for ZeRO-1 with `data_types.grad_accum_dtype` fp32
    (`runtime/engine.py` `_do_optimizer_sanity_check`): the DeepSpeed JSON reader sets that case from the file
    before this rule runs (`deepspeed._bf16_optimizer_at_zero1`)."""
    if bf16_optimizer and s.value("zero_stage", 0) == 0:
        # it shards the fp32 master weights and optimizer state over data parallelism (bf16_optimizer.py): ZeRO-1
        s.put("zero_stage", 1, f"{evidence} ({BF16_ZERO1} over data parallelism: ZeRO-1)")
    if bf16_optimizer and not s.has("recipe.grad_all_reduce"):
        s.put("recipe.grad_all_reduce", True,
              f"{evidence} ({BF16_ALL_REDUCE} the whole gradient, then updates its shard of the optimizer state: "
              f"runtime/engine.py buffered_allreduce_fallback)")
    # a launch line's engine rule (autograd in .grad, DeepSpeed's ZeRO optimizers) yields to the BF16_Optimizer the
    # merged files build (a QA run: placement's own ZeRO-0 pipeline files were priced without its copy, the header
    # that prices it 7.5 GiB above the audit)
    generic = bf16_optimizer and ENGINE_AUTOGRAD in s.sources.get("recipe.grad_accumulation", "")
    if s.has("recipe.grad_accumulation") and not generic:
        return
    if bf16_optimizer and buffer_fp32:
        s.put("recipe.grad_accumulation", "fp32_copy",
              f"{evidence} ({BF16_COPY} each micro-batch's bf16 gradients into fp32 after its "
              f"backward: bf16_optimizer.py update_hp_grads)")
    elif bf16_optimizer:
        s.put("recipe.grad_accumulation", "bf16_copy",
              f"{evidence} ({BF16_COPY} each micro-batch's bf16 gradients into a bf16 buffer after its backward: "
              f"data_types.grad_accum_dtype is unset, so the model's bf16 (runtime/engine.py get_data_types, DeepSpeed "
              f"0.17.6 on), which "
              f"DeepSpeed warns \"is not safe numerically with large number of accumulation steps\"; "
              f"grad_accum_dtype fp32 with zero_optimization.stage 1 runs the same optimizer with an fp32 buffer)")
    else:
        s.put("recipe.grad_accumulation", "autograd",
              f"{evidence} ({ENGINE_AUTOGRAD} accumulate each micro-batch's gradients in .grad and reduces them at "
              f"the step boundary; ZeRO-2/3 reduce-scatter them every micro-batch)")


def _srun_counts(words: list[Word], command: Command):
    """`count(*flags, env=None)` over srun's options `words` (after `srun`): the first of its node and task count
    flags given (`-N 2`, `--ntasks-per-node=8`), else the job variable `env` the #SBATCH header fixes, as (value,
    evidence); None where neither fixes a whole number."""
    given: dict[str, Word] = {}
    k = 0
    while k < len(words):
        t = words[k].text
        m = re.fullmatch(r"(--nodes|--ntasks|--ntasks-per-node|--ntasks-per-gpu|--gpus-per-node|--gpus-per-task|-N|-n)"
                         r"(?:=(.*))?"
                         r"|(-N|-n)(\d\S*)", t)
        if m and m.group(3) is not None:  # `-N2`: the value attached (srun(1), as getopt reads a short option)
            given[m.group(3)] = dataclasses.replace(words[k], text=m.group(4))
        elif m and m.group(2) is not None:
            given[m.group(1)] = dataclasses.replace(words[k], text=m.group(2))
        elif m and k + 1 < len(words):
            given[m.group(1)] = words[k + 1]
            k += 1
        k += 1

    def count(*names: str, env: str | None = None) -> tuple[int, str] | None:
        word = next((given[n] for n in names if n in given), None) or (command.env(env) if env else None)
        if word is None or word.unresolved or not re.fullmatch(r"\d+", word.text):
            return None
        return int(word.text), word.evidence

    return count


def _srun_per_gpu(count, tasks_given: bool) -> tuple[int, str] | None:
    """The tasks per node of srun's own `--ntasks-per-gpu=N` where no -n or --ntasks-per-node gives them: N for each
    GPU the step has on a node, its --gpus-per-node or else the job's (`#SBATCH --gpus-per-node`, --gres=gpu:G),
    as slurm sets a step's task count to its GPUs x N (src/interfaces/gres.c _handle_ntasks_per_tres_step, master
    284c3b9); None otherwise.  A QA trial: `srun --ntasks-per-gpu=1 python pretrain_gpt.py` on 2 nodes of 8 GPUs
    left the world size to --gpus."""
    per_gpu = count("--ntasks-per-gpu")
    if per_gpu is None or tasks_given or count("--ntasks-per-node") is not None:
        return None
    gpus = count("--gpus-per-node", env="SLURM_GPUS_ON_NODE")
    if gpus is None:
        return None
    return per_gpu[0] * gpus[0], f"{per_gpu[1]}, {per_gpu[0]} a GPU of {gpus[1]}: {per_gpu[0] * gpus[0]} a node"


def _task_gpus(launch: Launch) -> Word | None:
    """The GPUs srun binds each of its tasks to where it starts `launch`: its --gpus-per-task, else the header's
    (SLURM_GPUS_PER_TASK, which srun reads as the flag: src/srun/opt.c env_vars), which sets --tres-bind=gres/gpu:
    per_task, so each task's CUDA_VISIBLE_DEVICES holds that many (srun(1) --gpus-per-task); None without srun or
    either.  A QA trial: torchtitan's multinode_trainer.slurm with `#SBATCH --gpus-per-task=4` beside `srun torchrun
    --nproc_per_node 8` was priced on 8 GPUs a node."""
    srun = srun_of(launch)
    if not srun:
        return None
    given = last_flag_value(srun[1:], r"--gpus-per-task(?:=(.+))?") or launch.command.env("SLURM_GPUS_PER_TASK")
    if given is None or given.unresolved:
        return None
    count = re.fullmatch(r"(?:[\w-]+:)?(\d+)", given.text)  # a GPU type may lead (`--gpus-per-task=h100:4`)
    return dataclasses.replace(given, text=count.group(1)) if count else None


def _step_gpus(launch: Launch) -> Word | None:
    """The GPUs a node of srun's own step holds where srun asks for them (`srun --gpus-per-node=4`, or
    `--gres=gpu:4`): its tasks see those, not the job's (srun(1) --gpus-per-node: "the number of GPUs required for
    the job step on each node"; the gres plugin sets each task's CUDA_VISIBLE_DEVICES to the step's); None without
    srun or the flag.  A QA trial: `srun --gpus-per-node=4 torchrun --nproc_per_node 8` under `#SBATCH
    --gpus-per-node=8` was priced on 8 GPUs a node."""
    srun = srun_of(launch)
    words = srun[1:] if srun else []
    given = None
    for k, w in enumerate(words):
        m = re.fullmatch(r"--(gpus-per-node|gres)(?:=(.+))?", w.text)
        if m is None:
            continue
        value = (dataclasses.replace(w, text=m.group(2)) if m.group(2) is not None else
                 words[k + 1] if k + 1 < len(words) else None)
        if value is None or value.unresolved:
            continue
        pattern = r"(?:[\w-]+:)?(\d+)" if m.group(1) == "gpus-per-node" else r"gpu(?::[\w-]+)?:(\d+)"
        count = re.fullmatch(pattern, value.text)
        if count:
            given = dataclasses.replace(value, text=count.group(1))
    return given


def _srun_tasks(launch: Launch, s: Settings) -> None:
    """`srun python train.py`: one rank per SLURM task, so the world size is srun's task count: its -n/--ntasks, or
    its -N/--nodes times --ntasks-per-node, each from srun's flags or else the job's SLURM_NNODES and
    SLURM_NTASKS_PER_NODE that the #SBATCH header fixes (a user trial's `#SBATCH --nodes=8 --ntasks-per-node=8`
    job was priced on the cluster's 1,024 GPUs).  srun reads the job's SLURM_NTASKS as its -n (srun(1) INPUT
    ENVIRONMENT VARIABLES; slurm src/srun/opt.c env_vars `{ "SLURM_NTASKS", 'n' }`), so an `srun -N 2` without -n
    starts the job's tasks on its 2 nodes; only where -N is srun's own and a tasks-per-node is known does srun drop
    that count for N x tasks-per-node (src/srun/opt.c _opt_verify: `slurm_option_reset(&opt, "ntasks")` where -n is
    set by the environment and -N is not), and where nothing gives a task count it starts one task per node
    (_opt_verify: "1 proc / node default").  A QA trial: `#SBATCH --nodes=2 --ntasks=16` with `srun -N 2 python
    pretrain_gpt.py` was priced on the cluster's 1,024 GPUs."""
    srun = srun_of(launch)[1:]  # its own words (a user trial: `srun -m cyclic bash -c "python ..."` was read unstarted)
    count = _srun_counts(srun, launch.command)
    tasks, own_nodes = count("-n", "--ntasks"), count("-N", "--nodes")
    nodes, per_node = count("-N", "--nodes", env="SLURM_NNODES"), count("--ntasks-per-node",
                                                                         env="SLURM_NTASKS_PER_NODE")
    job_tasks = _job_task_count(count)
    per_node = per_node or _srun_per_gpu(count, tasks is not None)
    if per_node is not None and tasks is None and nodes is not None and count("--ntasks-per-gpu") is not None:
        job_tasks = None  # srun's step of N tasks a GPU (gres.c _handle_ntasks_per_tres_step), not the job's count
    if tasks is None and job_tasks is not None and (own_nodes is None or per_node is None):
        # srun reads the job's SLURM_NTASKS (`#SBATCH --ntasks=32`) as its -n (srun(1) INPUT ENVIRONMENT VARIABLES);
        # a QA trial's `#SBATCH --nodes=4 --ntasks=32` with `srun python` was priced on the cluster's 1,024 GPUs
        tasks = job_tasks
        if nodes is not None and (per_node is None or per_node[0] * nodes[0] != tasks[0]):
            # block deals them as many a node (slurm src/common/slurm_step_layout.c _task_layout_block counts them
            # cyclically, then numbers them node by node; CR_Pack_Nodes, which fills a node's CPUs first, aside)
            per_node = _dealt(tasks, nodes, count("--ntasks-per-node"))  # srun's own beside the job's -n: a maximum
    elif tasks is not None and nodes is not None and (per_node is None or per_node[0] * nodes[0] != tasks[0]):
        # srun's own -n over its nodes (its -N, else the job's, which srun reads as -N: src/srun/opt.c env_vars
        # SLURM_JOB_NUM_NODES), dealt evenly as above (a QA trial: `srun -n 16` on a 4-node job was priced 8 a node)
        per_node = _dealt(tasks, nodes, per_node)
    elif tasks is None and per_node is None and own_nodes is not None:
        # no task count anywhere: srun starts one task per node (src/srun/opt.c _opt_verify, "1 proc / node default")
        per_node = (1, "srun's default of one task per node (no -n, --ntasks-per-node or #SBATCH --ntasks: slurm "
                       "src/srun/opt.c _opt_verify)")
    if per_node is not None:
        s.put("gpus_per_node", per_node[0], f"{per_node[1]} (srun starts one rank per task)")
    s.put("slurm_node_order", True, f"{launch.command.origin}: srun starts each rank as a task, on the job's nodes as "
                                    f"SLURM numbers them")
    if tasks is not None:
        s.put("world_size", tasks[0], f"{tasks[1]} (srun starts one rank per task)")
    elif nodes is not None and per_node is not None:
        s.put("world_size", nodes[0] * per_node[0], f"{nodes[1]}; {per_node[1]} (srun starts one rank per task)")
    plane = _srun_distribution(srun, launch.command, s)
    world = tasks[0] if tasks is not None else nodes[0] * per_node[0] if nodes and per_node else None
    if plane is not None and world is not None and nodes is not None and world > nodes[0]:
        _plane_counts(plane, world, nodes)


def _plane_counts(plane: tuple[int, Word], world: int, nodes: tuple[int, str]) -> None:
    """plane=P deals P consecutive tasks to each node in turn (src/common/slurm_step_layout.c _task_layout_plane),
    so its counts a node need not be even where the plain block layout's are: an uneven deal is an error naming the
    counts and the fix (a QA trial: `#SBATCH --nodes=2 --ntasks=12` with `srun -m plane=4` was read as 6 a node and
    refused as 'placement cannot lay out part of each node', where srun runs 8 and 4)."""
    size, word = plane
    # as _task_layout_plane counts them, the nodes' CPUs aside: one task a node first (world > nodes here), the rest
    # of each node's first plane in turn, then a plane a node in turn
    counts, dealt = [1] * nodes[0], nodes[0]
    for turn in range(world):
        for i in range(nodes[0]):
            take = min(size - 1 if turn == 0 else size, world - dealt)
            counts[i], dealt = counts[i] + take, dealt + take
        if dealt == world:
            break
    if len(set(counts)) == 1:
        return
    shown = ", ".join(map(str, counts[:8])) + (", ..." if len(counts) > 8 else "")
    raise InputError(
        f"task layout: {word.evidence}: srun -m plane={size} deals {size} consecutive tasks to each of its "
        f"{nodes[0]} nodes ({nodes[1]}) in turn (src/common/slurm_step_layout.c _task_layout_plane), so its {world} "
        f"tasks run {shown} a node, different counts that the audit cannot price (every node of a priced job holds "
        f"one count); give a task count that is a multiple of {size * nodes[0]} (plane x nodes), or a plane that "
        f"divides the tasks a node ({world // nodes[0]})")


def _job_task_count(count) -> tuple[int, str] | None:
    """The batch script's SLURM_NTASKS, which srun reads as its -n (src/srun/opt.c env_vars): the header's --ntasks,
    else its --ntasks-per-node times its --nodes, as slurmd sets it for the batch script ("--ntasks-per-node
    no-longer sets num_tasks implicitly, so we need to calculate num_tasks here ... make sure that the SLURM_NTASKS
    environment variable is set": src/common/env.c env_array_for_batch_job); None where the header fixes neither."""
    given = count(env="SLURM_NTASKS")
    per_node, nodes = count(env="SLURM_NTASKS_PER_NODE"), count(env="SLURM_NNODES")
    if given is not None or per_node is None or nodes is None:
        return given
    return per_node[0] * nodes[0], (f"{per_node[1]}; {nodes[1]} (the batch script's SLURM_NTASKS, their product: "
                                    f"src/common/env.c env_array_for_batch_job)")


def _dealt(tasks: tuple[int, str], nodes: tuple[int, str], per_node: tuple[int, str] | None) -> tuple[int, str]:
    """The tasks a node of srun's -n over its nodes, as srun deals them: -n takes precedence, and a
    --ntasks-per-node beside it is "treated as a maximum count of tasks per node" (srun(1) --ntasks-per-node), or,
    where -n exceeds -N times it, dropped ("can't honor --ntasks-per-node", src/srun/opt.c _opt_verify); the block
    layout then counts the tasks out one a node in turn (src/common/slurm_step_layout.c _task_layout_block), so an
    even split, tasks / nodes a node.  Fewer tasks than nodes run one a node on as many nodes as tasks (_opt_verify:
    "can't run %d processes on %d nodes, setting nnodes to %d"; sbatch's the same, src/sbatch/opt.c).  Tasks that
    do not divide over the nodes run different counts on different nodes, which no layout here prices: an error
    naming the counts, the lines and the fix.  QA trials: `srun -N 2 --ntasks-per-node=8 --ntasks=8 python` was
    priced as 8 ranks on one node, where srun starts 4 on each of the two; `srun -N 4 -n 2` (tp 2) was priced with
    both ranks on one node's NVLink, where srun runs one on each of 2 nodes; `srun -N 2 -n 9` was refused as
    '--gpus 9 is not a whole number of dgx-h100 nodes', a flag the user never gave."""
    lines = "; ".join(dict.fromkeys(x[1] for x in (tasks, nodes, per_node) if x is not None))
    if tasks[0] < nodes[0]:
        return 1, (f"{lines}: srun runs its {tasks[0]} task{'s' * (tasks[0] > 1)} on {tasks[0]} of the "
                   f"{nodes[0]} nodes, one a node (\"can't run {tasks[0]} processes on {nodes[0]} nodes, setting "
                   f"nnodes to {tasks[0]}\": src/srun/opt.c _opt_verify)")
    if tasks[0] % nodes[0]:
        base, extra = divmod(tasks[0], nodes[0])
        counts = (f"{base + 1} on each of the first {extra} and {base} on the other {nodes[0] - extra}"
                  if extra > 1 or nodes[0] - extra > 1 else f"{base + 1} on the first and {base} on the second")
        fewer, more = base * nodes[0], (base + 1) * nodes[0]
        flag = "#SBATCH --ntasks" if "#SBATCH" in tasks[1] else "srun -n"
        raise InputError(
            f"task layout: {lines}: srun deals its {tasks[0]} tasks over its {nodes[0]} nodes one a node in turn and "
            f"numbers them node by node (src/common/slurm_step_layout.c _task_layout_block), {counts}, so its nodes "
            f"run different numbers of ranks, a layout the audit cannot price (every node of a priced job holds one "
            f"count); give {flag} a task count its nodes divide, {fewer} or {more} (or --ntasks-per-node with "
            f"-N), or as many nodes as divide it")
    cap = ("" if per_node is None else
           f" (-n {tasks[0]} takes precedence over --ntasks-per-node {per_node[0]}, "
           + ("a maximum beside it: srun(1) --ntasks-per-node)" if tasks[0] < per_node[0] * nodes[0] else
              "which srun drops: src/srun/opt.c _opt_verify)"))
    return tasks[0] // nodes[0], (f"{lines}: srun deals its {tasks[0]} tasks evenly over its {nodes[0]} nodes, "
                                  f"{tasks[0] // nodes[0]} a node{cap}")


SRUN_DISTRIBUTIONS = ("*", "block", "cyclic", "plane", "arbitrary")
"""srun -m/--distribution's methods of dealing tasks to nodes, its first field (srun(1) -m: `*` is the default,
block)."""


def last_flag_value(words: list[Word], flag: str) -> Word | None:
    """The value of the last flag among `words` that fully matches the regex `flag`, whose last group is the value
    written inside the word (`--flag=V`, `-mV`): that value at the flag's place, else the word after the flag
    (`--flag V`); None where no such flag is given (a later flag overrides an earlier one, as srun's options do)."""
    given: Word | None = None
    for k, w in enumerate(words):
        m = re.fullmatch(flag, w.text)
        if m and m.group(m.re.groups) is not None:
            given = dataclasses.replace(w, text=m.group(m.re.groups))
        elif m and k + 1 < len(words):
            given = words[k + 1]
    return given


def _srun_distribution(words: list[Word], command: Command, s: Settings) -> tuple[int, Word] | None:
    """The node each task of an `srun python ...` launch runs on, rank = task id: srun's -m/--distribution (`-m
    cyclic`, `--distribution=cyclic:block`, `plane=4`), else SLURM_DISTRIBUTION (which `#SBATCH --distribution` sets
    and srun reads as the flag), read into task_distribution.  Its first field decides the nodes: block (the
    default) puts consecutive tasks on one node, cyclic deals them one a node round robin, plane=P P at a time
    (srun(1) -m); what follows `:` places them on a node's sockets and cores, not on other nodes.  A user trial:
    `srun --distribution=cyclic` on 512 nodes was priced with every TP group of 8 inside a node, where each ran over
    8 nodes."""
    given = last_flag_value(words, r"(--distribution|-m)(?:=?(.+))?")
    if given is None:
        given = command.env("SLURM_DISTRIBUTION")
        if given is None:
            return
    if given.unresolved or given.uncertain:
        s.ignored.append(f"srun's task distribution ({given.evidence}) is not fixed by the files: priced block, "
                         f"consecutive ranks on one node (srun's default)")
        return
    method = re.split(r"[:,]", given.text, maxsplit=1)[0]
    name, _, size = method.partition("=")
    flags = [f.lower() for f in given.text.split(",")[1:]]
    if name.lower() in ("pack", "nopack"):
        # `--distribution=pack` alone: the default method with the node-packing flag (src/common/proc_args.c
        # verify_dist_type: "It is valid to use pack or nopack alone"; a QA trial's was refused as no method)
        name, flags = "*", [name.lower()]
    if "pack" in flags and name in ("*", "block"):
        # block with Pack fills each node's CPUs before the next (src/common/slurm_step_layout.c _task_layout_block,
        # pack_nodes: one task a node, then node by node up to its CPUs): the tasks a node follow CPUs the files do
        # not give, so the even block layout priced is said (a QA trial's `-m block,Pack` was read as block, unsaid)
        s.ignored.append(f"srun --distribution {given.text} ({given.evidence}): Pack fills each node's CPUs with "
                         f"tasks before the next node's (src/common/slurm_step_layout.c _task_layout_block), so "
                         f"the tasks a node depend on the nodes' CPUs, which the files do not give: priced as block "
                         f"with the tasks dealt evenly; drop Pack (or give --ntasks-per-node) for the layout priced")
    if name not in SRUN_DISTRIBUTIONS:
        raise InputError(f"{given.evidence}: srun --distribution {given.text!r}: {name!r} is not one of srun's "
                         f"methods ({', '.join(SRUN_DISTRIBUTIONS)}; srun(1) -m); fix the launch line")
    if name == "plane":
        plane = command.env("SLURM_DIST_PLANESIZE") if not size else None
        text = size or (plane.text if plane is not None and not plane.unresolved else "")
        if not text.isdigit() or int(text) < 1:
            raise InputError(f"{given.evidence}: srun --distribution {given.text!r}: plane needs its size, "
                             f"plane=N with N >= 1 (or SLURM_DIST_PLANESIZE; srun(1) -m); fix the launch line")
        s.put("task_distribution", f"plane={int(text)}", given.evidence)
        return int(text), given
    elif name == "arbitrary":
        s.ignored.append(f"srun --distribution arbitrary ({given.evidence}): each task runs on the host its line of "
                         f"$SLURM_HOSTFILE names, which the files do not give: priced with node rank k's ranks on "
                         f"its k-th host; give that file with --hosts")
    else:
        s.put("task_distribution", "block" if name == "*" else name, given.evidence)


def srun_of(launch: Launch) -> list[Word]:
    """The `srun` and its options that start `launch`: its command's own words before the launcher (`srun -N 2
    torchrun ...`), or the srun of the `srun ... bash -c STRING` whose string holds it (Command.srun); [] where no
    srun does."""
    words = list(launch.command.words)
    at = next((i for i, w in enumerate(words) if w.text.rsplit("/", 1)[-1] in _LAUNCHERS or _PY.match(w.text)), 0)
    if at and words[0].text.rsplit("/", 1)[-1] == "srun":
        return words[:at]
    return list(launch.command.srun)


def _srun_tasks_per_node(srun: list[Word], command: Command) -> tuple[int, str] | None:
    """The tasks srun starts on each node, with the evidence: its --ntasks-per-node; its -n over its nodes (-N, else
    the header's); the header's --ntasks-per-node (srun reads SLURM_NTASKS_PER_NODE as that flag, srun(1) INPUT
    ENVIRONMENT VARIABLES); the header's --ntasks over its nodes.  None where nothing fixes it (srun's default in a
    batch job is the job's tasks, one per node unless the header says otherwise)."""
    count = _srun_counts(srun[1:], command)
    own, nodes = count("--ntasks-per-node"), count("-N", "--nodes", env="SLURM_NNODES")
    tasks = count("-n", "--ntasks")
    own = own or _srun_per_gpu(count, tasks is not None)
    if tasks is not None and nodes is not None:
        per_node = own or count(env="SLURM_NTASKS_PER_NODE")
        return per_node if per_node is not None and per_node[0] * nodes[0] == tasks[0] else _dealt(tasks, nodes,
                                                                                                    per_node)
    job = _job_task_count(count)
    if own is not None and job is not None and nodes is not None and count("-N", "--nodes") is None and \
            own[0] * nodes[0] != job[0]:
        # srun's own --ntasks-per-node beside the job's task count, which it reads as -n, and the job's nodes, as -N:
        # -n stands and the per-node count is a maximum, or ignored where -n exceeds it ("can't honor
        # --ntasks-per-node ... Ignoring --ntasks-per-node": src/srun/opt.c _opt_verify; a QA trial: `srun
        # --ntasks-per-node=1 torchrun` under `#SBATCH --nodes=2 --ntasks-per-node=8` was read as one torchrun a node)
        return _dealt(job, nodes, own)
    own = own or count(env="SLURM_NTASKS_PER_NODE")
    if own is None and job is not None and nodes is not None:
        own = _dealt(job, nodes, None)
    return own


def _srun_torchrun(launch: Launch, args: dict[str, Arg], n: int | None, p: int | None, s: Settings) -> None:
    """torchrun started by srun: one torchrun per srun task, each an agent that starts its --nproc_per_node
    processes on its node and counts --nnodes nodes.  More than one task per node multiplies the processes on each
    node (gpus_per_node, tasks_per_node; the audit refuses more than the hosts' GPUs: cli._check_per_host), and
    srun's nodes other than --nnodes leave torchrun's rendezvous without the nodes it counts, an error naming both
    lines (a user trial: `#SBATCH --nodes=256` beside a literal `torchrun --nnodes 512` was priced as 512 nodes; and
    Megatron-Bridge's scripts/training/launch_with_sbatch.sh, `#SBATCH --ntasks-per-node=8` with `srun ... bash -c
    "torchrun --nproc_per_node=$SLURM_GPUS_PER_NODE ..."`, as 8 processes per node where it starts 64)."""
    srun = srun_of(launch)
    if not srun:
        return
    rank = args.get("--node-rank")
    said = (rank.values[0].unresolved or rank.values[0].text) if rank is not None and rank.values else ""
    variable = next((v for v in ("SLURM_NODEID", "SLURM_PROCID") if v in said), None)
    if variable is not None and (variable == "SLURM_NODEID" or (_srun_tasks_per_node(srun, launch.command)
                                                                 or (1, ""))[0] == 1):
        # SLURM numbers the job's nodes (and, one task a node, its tasks) in its own host order (srun(1) SLURM_NODEID)
        s.put("slurm_node_order", True, f"{rank.evidence}: --node-rank ${variable} under srun")
    nodes_arg = args.get("--nnodes")
    count = _srun_counts(srun[1:], launch.command)
    nodes = count("-N", "--nodes", env="SLURM_NNODES")
    if n is not None and nodes_arg is not None and nodes is not None and nodes[0] != n:
        job = "#SBATCH" in nodes[1]  # the job's nodes; else srun's -N, a step of its own size
        # (srun sets SLURM_NNODES to the step's nodes in its tasks' environment, slurm src/common/env.c
        # env_array_for_step; the batch script's is the job's: a QA trial's `srun -N 2 torchrun --nnodes=$SLURM_NNODES`
        # under `#SBATCH --nodes=4` was told to use the $SLURM_NNODES it already used)
        variable = ("--nnodes $SLURM_NNODES, which SLURM sets to the job's node count" if job else
                    f"$SLURM_NNODES expanded in srun's task, `srun -N {nodes[0]} bash -c '... --nnodes "
                    f"$SLURM_NNODES ...'`, which srun sets to the step's node count: the batch script's own is the "
                    f"job's")
        raise InputError(
            f"node count: torchrun --nnodes {n} ({nodes_arg.evidence}), but srun starts it on "
            f"{'the job' if job else 'its step'}'s {nodes[0]} nodes ({nodes[1]}): torchrun's rendezvous counts {n} "
            f"nodes, so the job does not start; make them one count: torchrun --nnodes {nodes[0]} (or {variable}), "
            f"or ask for {n} nodes ({'#SBATCH --nodes=' if job else 'srun -N '}{n})")
    tasks = _srun_tasks_per_node(srun, launch.command)
    procs = args.get("--nproc-per-node")
    if tasks is None or tasks[0] < 2 or p is None or procs is None:
        return
    rank = args.get("--node-rank")
    procid = ""
    if rank is not None and rank.values and "SLURM_PROCID" in (rank.values[0].unresolved or rank.values[0].text):
        last = nodes[0] * tasks[0] - 1 if nodes is not None else None
        procid = (f"; its --node_rank $SLURM_PROCID ({rank.evidence}) is the task's rank"
                  + (f", 0 to {last}, where --nnodes counts {n}" if last is not None and n is not None else "")
                  + ", not the node's")
    s.put("tasks_per_node", tasks[0], tasks[1])
    s.put("gpus_per_node", tasks[0] * p,
          f"{tasks[1]} (srun starts {tasks[0]} tasks per node) x {procs.evidence} (each task's torchrun starts {p} "
          f"processes on its node): {tasks[0] * p} processes per node{procid}")


def _srun_deepspeed(launch: Launch, no_ssh: bool, s: Settings) -> None:
    """The deepspeed launcher started by srun runs once per srun task, and each run is a whole launcher: without a
    hostfile it starts its own job of the node's GPUs on 127.0.0.1 (DeepSpeed runner.py main: `resource_pool
    ['localhost'] = device_count`, `args.master_addr = "127.0.0.1"`), with one it starts every host's ranks over pdsh
    (or the --launcher it names); only `--no_ssh` starts just this node's (its --node_rank's) ranks.  So srun must
    start one launcher, or one a node with --no_ssh; more is an error naming srun's line and the fix (a QA trial:
    `#SBATCH --nodes=2 --ntasks-per-node=8` with `srun deepspeed --num_gpus 8` was priced as one job of 8 ranks, where
    srun starts 16 launchers, 8 a node contending for its GPUs and master port)."""
    srun = srun_of(launch)
    count = _srun_counts(srun[1:], launch.command)
    nodes = count("-N", "--nodes", env="SLURM_NNODES")
    per_node = _srun_tasks_per_node(srun, launch.command)
    tasks = count("-n", "--ntasks", env="SLURM_NTASKS")
    if tasks is not None and nodes is not None and tasks[0] < nodes[0]:
        # fewer tasks than nodes run one a node on as many nodes (src/srun/opt.c _opt_verify "setting nnodes"): a QA
        # trial's `srun -n 1 deepspeed` in a 2-node job was refused as starting a launcher on each node
        nodes = (tasks[0], tasks[1])
    elif per_node is not None and nodes is not None:
        tasks = (per_node[0] * nodes[0], "; ".join(dict.fromkeys((nodes[1], per_node[1]))))
    several_a_node = per_node is not None and per_node[0] > 1
    if not no_ssh and tasks is None and nodes is None and per_node is None:
        # nothing fixes srun's count: one task on each node of the job's allocation (src/srun/opt.c _opt_verify,
        # "1 proc / node default"), which the files do not size (a QA trial's `srun deepspeed` with --gpus 16 was
        # priced as one 16-GPU job, where 2 nodes run 2 launchers)
        s.ignored.append(
            f"srun's task count (`{' '.join(w.text for w in srun)} deepspeed ...`, {launch.site}): no -n, -N or "
            f"--ntasks-per-node on srun and no #SBATCH --nodes or --ntasks, so srun starts one deepspeed launcher on "
            f"each node of the job's allocation (src/srun/opt.c _opt_verify, one task a node); priced as one "
            f"launcher, the job only on a one-node allocation: on more nodes each node's launcher (without --no_ssh) "
            f"runs a job of its own or starts every host's ranks again; start deepspeed without srun, or `srun "
            f"--ntasks=1 deepspeed ...`")
    if not several_a_node and (no_ssh or ((tasks is None or tasks[0] <= 1) and (nodes is None or nodes[0] <= 1))):
        return
    started = (f"{tasks[0]} tasks ({tasks[1]})" if tasks is not None else
               f"at least one task on each of its {nodes[0]} nodes ({nodes[1]})")
    if several_a_node:
        runs = (f"{per_node[0]} launchers on each node, each starting its own processes on the node's GPUs with the "
                f"same master port, so the job does not start as written")
    elif per_node is None and nodes is None:
        runs = (f"{tasks[0]} launchers, on one node or several as the allocation places them: on one node each "
                f"starts its own processes on the node's GPUs with the same master port, on several each (without "
                f"--no_ssh) runs a job of its own (no hostfile: runner.py main sets master_addr 127.0.0.1) or starts "
                f"every host's ranks again (a hostfile: over pdsh), so the job does not train as written")
    else:
        runs = ("one launcher a node, each of which (without --no_ssh) runs a job of its own on its node's GPUs "
                "(no hostfile: runner.py main sets master_addr 127.0.0.1) or starts every host's ranks again (a "
                "hostfile: over pdsh), so the nodes do not train one job")
    raise InputError(
        f"launch: `{' '.join(w.text for w in srun)} deepspeed ...` ({launch.site}) starts the deepspeed launcher as "
        f"each of srun's tasks, {started}: {runs}; "
        f"start deepspeed once from the batch script without srun (its runner starts the hostfile's hosts: "
        f"deepspeed --hostfile hostfile ...), or one task a node with each launcher starting only its node's ranks: "
        f"srun --ntasks-per-node=1 deepspeed --no_ssh --node_rank=$SLURM_NODEID --master_addr=HOST "
        f"--hostfile hostfile ... (DeepSpeed launcher/runner.py main)")


def _elastic_outside(elastic: re.Match, started: tuple[int, str], evidence: str) -> None:
    """An elastic `srun torchrun --nnodes MIN:MAX` on srun's nodes outside the range is an error naming both: on
    fewer than MIN the rendezvous never completes (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py
    _add_to_participants: it opens its last call at min_nodes), and torchrun fails at the join timeout (600 s by
    default, RendezvousTimeout); on more than MAX it completes with the first MAX to join and puts the rest on its
    redundancy list (_add_to_redundancy_list), idle spares, so which hosts run the job is not fixed by the files.
    A QA trial: both were left open, the world size then taken from --gpus or the allocation as if every node ran."""
    low, high, n = int(elastic.group(1)), int(elastic.group(2)), started[0]
    head = (f"node count: elastic torchrun --nnodes {low}:{high} ({evidence}), but srun starts a torchrun agent on "
            f"each of its {n} node{'' if n == 1 else 's'} ({started[1]}): ")
    if n < low:
        raise InputError(head + f"the rendezvous waits for {low} nodes and {n} join, so it never completes and "
                                f"torchrun stops at its join timeout (600 s by default; torch dynamic_rendezvous.py); "
                                f"make them one count: ask for {low} to {high} nodes, or --nnodes {n}:{high}")
    raise InputError(head + f"the rendezvous admits the first {high} to join and keeps the other {n - high} idle "
                            f"as spares (torch dynamic_rendezvous.py _add_to_redundancy_list), so the files do not "
                            f"fix which hosts run the job nor price {n} nodes; make them one count: ask for {high} "
                            f"nodes, or --nnodes {low}:{n} (or --nnodes {n})")


DYNAMIC_RENDEZVOUS = ("c10d", "etcd", "etcd-v2")
"""torchrun's rendezvous backends that assign node ranks by join order (torch.distributed.elastic.rendezvous)."""
NCCL_UNPRICED = {
    "NCCL_IB_HCA": "restricts NCCL to the listed InfiniBand HCAs (ports); with fewer than the node's NICs the "
                   "inter-node collectives share those, while the estimate gives each GPU its own NIC share",
    "NCCL_IB_DISABLE": "at 1 turns InfiniBand off: inter-node traffic goes over TCP sockets, which the estimate does "
                       "not price",
    "NCCL_P2P_DISABLE": "at 1 turns off the peer-to-peer transport (NVLink, PCIe): traffic inside a node goes "
                        "through host memory, which the estimate does not price",
    "NCCL_SHM_DISABLE": "at 1 turns off the shared-memory transport inside a node",
    "NCCL_P2P_LEVEL": "limits which GPU pairs use the peer-to-peer transport",
    "NCCL_NET_GDR_LEVEL": "limits GPUDirect RDMA between the GPUs and the NICs",
    "NCCL_NET_GDR_READ": "sets whether sends read GPU memory directly (GPUDirect RDMA)",
    "NCCL_ALGO": "forces NCCL's collective algorithms, where the estimate prices NCCL's own choice",
    "NCCL_PROTO": "forces NCCL's protocols (Simple, LL, LL128), where the estimate prices NCCL's own choice",
    "NCCL_MAX_NCHANNELS": "caps NCCL's channels, and so the NICs and the bandwidth one collective uses",
    "NCCL_MIN_NCHANNELS": "sets NCCL's least channel count",
    "NCCL_MAX_CTAS": "caps the CTAs (channels) a collective uses",
    "NCCL_MIN_CTAS": "sets the least CTAs (channels) a collective uses",
    "NCCL_NVLS_ENABLE": "turns NVLink SHARP (NVSwitch reductions) on or off, where the estimate prices the "
                        "machine's default",
    "NCCL_COLLNET_ENABLE": "turns in-network reductions (SHARP) on or off",
    "NCCL_CROSS_NIC": "lets rings and trees use different NICs on different nodes",
    "NCCL_BUFFSIZE": "sets the buffer per channel and protocol, which bounds pipelining",
}
"""NCCL settings (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html) that change the bandwidth or latency of
the collectives the estimate prices at NCCL's defaults: each one a job sets is a warning.  Any other NCCL_ variable
(NCCL_DEBUG, NCCL_SOCKET_IFNAME, ...) is listed as seen and not modelled."""


def nccl_settings(command: Command, s: Settings) -> None:
    """The NCCL variables the launch runs with, none of them priced: a warning for each that changes the
    collectives' speed, a line among the settings not modelled for the others (a user trial: NCCL_IB_HCA=mlx5_0,
    one of eight NICs, and NCCL_P2P_DISABLE=1 left the estimate and the findings as they were, without a word)."""
    for name, word in command.environment:
        if not name.startswith("NCCL_"):
            continue
        value = word.text if not word.unresolved else f"{word.text} (depends on {word.unresolved})"
        effect = NCCL_UNPRICED.get(name)
        if effect is None:
            s.ignored.append(f"{name}={value}: an NCCL setting, not modelled ({word.evidence})")
        else:
            s.warnings.append(f"{name}={value} ({word.evidence}) {effect}; the estimate prices NCCL's defaults, so "
                              f"the job may run slower than it says: drop it unless the fabric needs it")


RUNTIME_KINDS = {"NVTE_": "a Transformer Engine setting", "TORCH_": "a PyTorch setting",
                 "NVSHMEM_": "an NVSHMEM setting", "UCX_": "a UCX setting", "FI_": "a libfabric setting",
                 "OMP_": "an OpenMP setting", "XLA_": "an XLA setting"}
"""The runtime variables besides NCCL's that the launch's environment reports (shell.WATCHED_PREFIXES), none priced."""


PRICED_RUNTIME = frozenset({"XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR"})
"""Runtime variables of WATCHED_PREFIXES that a field reads (a MaxText launch's JAX pool: readers.maxtext), so
runtime_settings does not list them as not modelled."""


def runtime_settings(command: Command, s: Settings) -> None:
    """The runtime variables the launch runs with that no priced field reads (NCCL's, Transformer Engine's,
    PyTorch's...): a line among the settings not modelled for each one besides NCCL's (nccl_settings says those), and
    all of them as `launch_environment`, which the best plan's files name as not set there (a user trial: audit --out
    wrote a megatron.sh without the job's NCCL_IB_* and NVTE_* exports, and without a word)."""
    found = [(name, word) for name, word in command.environment if name.startswith(WATCHED_PREFIXES)]
    for name, word in found:
        kind = next((k for p, k in RUNTIME_KINDS.items() if name.startswith(p)), None)
        if kind is not None and name not in PRICED_RUNTIME:
            s.ignored.append(f"{name}={word.text}: {kind}, not modelled ({word.evidence})")
    if found:  # each as the shell would take it back, on one line (a value may hold spaces, quotes or a newline)
        s.put("launch_environment",
              tuple(f"{name}={shlex.quote(' '.join(word.text.split()))}"
                    + (f" (depends on {word.unresolved})" if word.unresolved else "") for name, word in found),
              "; ".join(word.evidence for _, word in found))


HIP_ALLOC_CONF = ("PYTORCH_HIP_ALLOC_CONF, which PyTorch's ROCm builds read where PYTORCH_ALLOC_CONF and "
                  "PYTORCH_CUDA_ALLOC_CONF are unset, and its CUDA builds ignore: c10/cuda/CUDAAllocatorConfig.h")
"""The source of allocator settings read from PYTORCH_HIP_ALLOC_CONF (audit.core._allocator_note names it)."""


def _srun_heterogeneous(launch: Launch) -> None:
    """A heterogeneous step is an error naming its line and the fix: `srun A : B` (a standalone `:` separates the
    step's components, srun(1) and heterogeneous_jobs.html "the stand-alone ':' character can not be used as an
    argument to an application launched by srun"), or `srun --het-group=` other than 0 in a job whose header has
    `#SBATCH hetjob` components, whose ranks run on the other components' nodes, or on several components' in one
    MPI_COMM_WORLD, none of which the header reading (component 0's, srun's default --het-group=0) describes.  A QA
    trial: `srun --het-group=0,1 python pretrain_gpt.py` over components of 1 and 2 nodes (24 ranks) was priced as
    16 ranks, the last component's."""
    srun = srun_of(launch)
    if not srun:
        return
    words = launch.command.words if launch.command.words[0].text.rsplit("/", 1)[-1] == "srun" else ()
    colon = next((w for w in words if w.text == ":"), None)
    group = last_flag_value(srun[1:], r"--(?:het|pack)-group(?:=(.+))?")
    if colon is not None:
        raise InputError(
            f"launch: {colon.evidence}: srun's standalone ':' starts a heterogeneous step, one component per "
            f"':'-separated command, all in one MPI_COMM_WORLD (slurm doc/html/heterogeneous_jobs.html); the audit "
            f"prices one homogeneous step: audit each component's command on its own line, or start the job as one "
            f"srun")
    if group is not None and (group.unresolved or group.text.strip() != "0"):
        het = launch.command.env("SLURM_HET_SIZE")
        where = f" ({het.evidence}: a job of {het.text} components)" if het is not None else ""
        raise InputError(
            f"launch: {group.evidence}: srun --het-group {group.unresolved or group.text} starts its step on "
            f"heterogeneous job component(s) other than 0 alone{where}, whose nodes and tasks are their own #SBATCH "
            f"lines after `#SBATCH hetjob` (several components run in one MPI_COMM_WORLD: slurm "
            f"doc/html/heterogeneous_jobs.html); the audit reads the header's component 0, srun's default "
            f"(srun(1) --het-group): put the training step's component first and drop --het-group, or audit a "
            f"script with that component's header alone")


def launcher_settings(launch: Launch, s: Settings) -> None:
    """The world size and GPUs per node torchrun's flags fix; the deepspeed launcher's node and GPU counts; the
    environment the launch runs with (CUDA_LAUNCH_BLOCKING, the runtime variables of runtime_settings)."""
    _srun_heterogeneous(launch)
    nccl_settings(launch.command, s)
    runtime_settings(launch.command, s)
    nodelist = launch.command.env("SLURM_JOB_NODELIST")
    if nodelist is not None and not nodelist.unresolved and nodelist.origin.line:  # the header's `#SBATCH -w`
        s.put("job_nodelist", nodelist.text, f"{nodelist.origin} (the job's hosts: sbatch(1) --nodelist)")
    connections = launch.command.env("CUDA_DEVICE_MAX_CONNECTIONS")
    if connections is not None and not connections.unresolved:
        s.put("device_max_connections", connections.text.strip(), connections.evidence)
    elif connections is None and (kept := launch.command.withheld_by_srun("CUDA_DEVICE_MAX_CONNECTIONS")):
        # the script sets it, srun's --export keeps it from the ranks (a QA trial: `srun --export=NONE` under an
        # `export CUDA_DEVICE_MAX_CONNECTIONS=1` was told to export it in the launch file, which it does)
        s.put("device_max_connections", None, f"{launch.command.words[0].evidence}: {kept}")
    allocator = launch.command.env("PYTORCH_ALLOC_CONF") or launch.command.env("PYTORCH_CUDA_ALLOC_CONF")
    hip = launch.command.env("PYTORCH_HIP_ALLOC_CONF")
    if allocator is None and hip is not None:
        # PyTorch's ROCm builds read it where the other two are unset (c10/cuda/CUDAAllocatorConfig.h instance():
        # "convenience for ROCm users, allow alternative HIP token", under USE_ROCM); a CUDA build never does (a QA
        # trial: an MI300X launch exporting it was told PYTORCH_CUDA_ALLOC_CONF "is not set")
        s.put("allocator_conf", hip.text.strip(), f"{hip.evidence} ({HIP_ALLOC_CONF})")
    elif allocator is None:
        kept = next((k for n in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
                     if (k := launch.command.withheld_by_srun(n))), None)
        s.put("allocator_conf", "", f"{launch.command.words[0].evidence}: no PYTORCH_CUDA_ALLOC_CONF"
                                    + (f" ({kept})" if kept else ""))
    else:  # a value the files leave to the environment keeps its text (`${SITE_ALLOC_CONF}`): unknown, not unset
        s.put("allocator_conf", allocator.text.strip(), allocator.evidence)
    blocking = launch.command.env("CUDA_LAUNCH_BLOCKING")
    if blocking is not None:
        if blocking.unresolved:
            s.ignored.append(f"CUDA_LAUNCH_BLOCKING={blocking.text}: its value depends on {blocking.unresolved}; "
                             f"priced as asynchronous launches ({blocking.evidence})")
        else:  # CUDA reads any value but 1 as asynchronous launches
            s.put("recipe.cuda_launch_blocking", blocking.text.strip() == "1", blocking.evidence)
    nargs = {"--standalone": 0, "--no-python": 0, "--no_python": 0, "--no-local-rank": 0, "--no_local_rank": 0,
             "--bind_cores_to_rank": 0, "--bind-cores-to-rank": 0, "--no_ssh": 0, "--no-ssh": 0, "--force_multi": 0,
             "--force-multi": 0}
    args = {a.flag.replace("_", "-"): a for a in split_args(launch.launcher_args, nargs)}
    process_binding(launch, args, s)
    if launch.launcher == "torchrun":
        nodes, procs = args.get("--nnodes"), args.get("--nproc-per-node")
        n = p = elastic_ev = None
        for arg in (nodes, procs):
            if _open_count(arg):
                # the running job gives it (SLURM's $SLURM_NNODES, a platform's $WORLD_SIZE, `$(python -c "...
                # device_count()")`): the GPU count is the command line's, as with an unknown --nnodes
                which = ("SLURM sets in the job" if _from_slurm(arg) else
                         "only the running job gives (its environment or a command's output)")
                s.ignored.append(f"{arg.flag} {arg.values[0].text}: depends on {arg.values[0].unresolved}, which "
                                 f"{which}; the world size is --gpus/--nodes or the allocation's ({arg.evidence})")
        open_nodes = _open_count(nodes)
        nodes = None if open_nodes else nodes
        procs = None if _open_count(procs) else procs
        if nodes is not None:
            text = one_value(nodes).text
            elastic = re.fullmatch(r"(\d+):(\d+)", text)
            started = (_srun_counts(srun_of(launch)[1:], launch.command)("-N", "--nodes", env="SLURM_NNODES")
                       if elastic and srun_of(launch) else None)
            per_task = _srun_tasks_per_node(srun_of(launch), launch.command) if started else None
            if (elastic and started is not None and (per_task is None or per_task[0] == 1)
                    and int(elastic.group(1)) <= started[0] <= int(elastic.group(2))):
                # srun starts one torchrun agent on each of its nodes at once, and an elastic rendezvous admits
                # every agent up to the range's maximum (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py
                # _add_to_participants: complete at max_nodes; at min_nodes a last-call deadline opens, 30 s by
                # default, for the rest): all of srun's nodes (a QA trial: `srun torchrun --nnodes=2:4` under
                # `#SBATCH --nodes=4` was priced on the cluster's 1,024 GPUs)
                n = started[0]
                elastic_ev = (f"{nodes.evidence}: elastic --nnodes {text}, and srun starts a torchrun on each of its "
                              f"{n} nodes ({started[1]}), all of which the rendezvous admits")
            elif elastic and started is not None and (per_task is None or per_task[0] == 1):
                _elastic_outside(elastic, started, nodes.evidence)
            elif not re.fullmatch(r"\d+", text):
                s.ignored.append(f"--nnodes {text}: elastic node range; world size not fixed ({nodes.evidence})")
                if elastic:
                    s.put("launcher_node_range", text, nodes.evidence)
            else:
                n = read_int(text, "--nnodes", nodes.evidence)
        elif not open_nodes and ("--standalone" in args or procs is not None):
            n = 1
        # the GPUs the job's nodes show its processes: `#SBATCH --gpus-per-node=4` (--gres=gpu:4), which SLURM's gres
        # plugin sets CUDA_VISIBLE_DEVICES to (gres.conf(5), srun(1) --gpus-per-node)
        shown = launch.command.env("SLURM_GPUS_ON_NODE")
        shown = shown if shown is not None and not shown.unresolved and shown.text.isdigit() else None
        bound, step = _task_gpus(launch), _step_gpus(launch)
        if bound is not None:
            shown = bound
        elif step is not None:
            shown = step
        if procs is not None:
            text = one_value(procs).text
            if re.fullmatch(r"\d+", text):
                p = read_int(text, "--nproc-per-node", procs.evidence)
                s.put("gpus_per_node", p, procs.evidence)
                if shown is not None and p > int(shown.text):
                    # a QA trial: `#SBATCH --gpus-per-node=4` with `torchrun --nproc_per_node=8` priced 8 a node
                    if shown is bound:
                        raise InputError(
                            f"GPUs per node: torchrun --nproc_per_node {p} ({procs.evidence}), but srun binds each "
                            f"task to {shown.text} GPUs ({shown.evidence}; --gpus-per-task sets "
                            f"--tres-bind=gres/gpu:per_task, srun(1)), so each torchrun sees {shown.text}: local ranks "
                            f"{shown.text} to {p - 1} find no GPU of their own (torch.cuda.set_device fails) and the "
                            f"job does not start; make them one count: --nproc_per_node {shown.text}, or "
                            f"--gpus-per-task={p}")
                    if shown is step:
                        raise InputError(
                            f"GPUs per node: torchrun --nproc_per_node {p} ({procs.evidence}), but srun's step holds "
                            f"{shown.text} GPUs a node ({shown.evidence}), which are all its tasks see: local ranks "
                            f"{shown.text} to {p - 1} of each node find no GPU of their own (torch.cuda.set_device "
                            f"fails), so the job does not start; make them one count: --nproc_per_node "
                            f"{shown.text}, or srun --gpus-per-node={p}")
                    raise InputError(
                        f"GPUs per node: torchrun --nproc_per_node {p} ({procs.evidence}), but the job's nodes show "
                        f"each process {shown.text} GPUs ({shown.evidence}): local ranks {shown.text} to {p - 1} of "
                        f"each node find no GPU of their own (torch.cuda.set_device fails), so the job does not "
                        f"start; make them one count: --nproc_per_node {shown.text} (or gpu, one process per GPU the "
                        f"node shows), or ask for {p} GPUs a node (#SBATCH --gpus-per-node={p})")
            elif (not re.fullmatch(r"[A-Za-z_]\w*", text) and not one_value(procs).unresolved
                  and not one_value(procs).uncertain):
                # torchrun takes a count or a device word (cpu, gpu, auto, an accelerator's name), and raises
                # ValueError "Unsupported nproc_per_node value" for anything else (torch/distributed/run.py
                # determine_local_world_size); a QA trial: `--nproc_per_node=$SLURM_GPUS_PER_NODE` under
                # `#SBATCH --gpus-per-node=h100:8`, which sbatch passes on as written, was left without a world size
                raise InputError(
                    f"GPUs per node: torchrun --nproc_per_node {text!r} ({procs.evidence}): torchrun takes a number "
                    f"or gpu/auto/cpu and stops with \"ValueError: Unsupported nproc_per_node value: {text}\" "
                    f"(torch/distributed/run.py determine_local_world_size), so the job does not start"
                    + ("; SLURM_GPUS_PER_NODE holds #SBATCH --gpus-per-node as written, GPU type and all: use "
                       "$SLURM_GPUS_ON_NODE, --nproc_per_node gpu, or the count" if ":" in text else
                       "; give the number of processes a node starts"))
            elif text in ("gpu", "auto") and shown is not None:
                # torch.cuda.device_count() is the GPUs the node shows the job (torch/distributed/run.py
                # determine_local_world_size): the header's
                p = int(shown.text)
                s.put("gpus_per_node", p, f"{procs.evidence} (one process per GPU the node shows: {shown.evidence})")
            elif text in ("gpu", "auto") and n is not None:
                # one process per GPU the node shows (torch/distributed/run.py determine_local_world_size:
                # torch.cuda.device_count()); a QA trial's `--nproc_per_node=gpu --nnodes=$SLURM_JOB_NUM_NODES` under
                # `#SBATCH --nodes=4` was priced on the catalog cluster's default 1,024 GPUs, the files' 4 nodes unsaid
                s.put("launcher_nodes", n, f"{nodes.evidence if nodes else procs.evidence}; --nproc-per-node {text}: "
                                           f"torchrun starts one process per GPU each node shows "
                                           f"(torch.cuda.device_count())")
        if n is not None and p is not None:
            s.put("world_size", n * p, f"{elastic_ev or (nodes.evidence if nodes else procs.evidence)}; "
                                       f"{procs.evidence}")
        _srun_torchrun(launch, args, n if nodes is not None else None, p, s)
        backend = args.get("--rdzv-backend")
        if backend is not None and one_value(backend).text in DYNAMIC_RENDEZVOUS and n != 1:
            # torch/distributed/run.py: --node-rank is read only by the static backend; a dynamic one numbers the
            # nodes as they join (a user trial: the audit priced, and proposed to reorder, a host order c10d ignores)
            s.warnings.append(
                f"torchrun --rdzv-backend {one_value(backend).text} ({backend.evidence}): a dynamic rendezvous numbers "
                f"the nodes in the order they join it and ignores --node-rank, so no file fixes which host runs which "
                f"ranks; the host order priced here may not be the job's: give --hosts with the order its log shows "
                f"(each node's group rank), and to fix an order launch with --rdzv-backend static and --node-rank "
                f"(as placement's files do)")
    elif launch.launcher is None and srun_of(launch):  # `srun python ...`, or `srun ... bash -c "python ..."`
        _srun_tasks(launch, s)
    elif launch.launcher is None and _mpirun_words(launch):  # `mpirun -np 16 python ...`: one rank per process
        _mpirun_tasks(launch, s)
    elif launch.launcher in ("deepspeed", "deepspeed.pt"):
        if srun_of(launch):
            _srun_deepspeed(launch, "--no-ssh" in args, s)
        # --hostfile's value is not read: the hostfile the job uses is the one passed with the files (its path, say
        # "$PLAN_DIR/hostfile" in placement's launch.sbatch, may depend on the directory the job starts in)
        for key in ("--num-nodes", "--num-gpus"):
            if key in args:
                given = (one_value(args[key]).text, args[key].evidence)
                if key == "--num-nodes":
                    s.num_nodes = given
                elif key == "--num-gpus":
                    s.num_gpus = given
        for key in ("--include", "--exclude", "-i", "-e"):
            if key in args:
                s.ignored.append(f"deepspeed {key}: host/GPU selection not applied ({args[key].evidence})")


def _from_slurm(arg: Arg | None) -> bool:
    """Whether `arg`'s one value depends on a variable SLURM sets in the job (shell.SLURM_PREFIX), which the files
    cannot fix: the job's own count, not an error."""
    return (arg is not None and len(arg.values) == 1 and bool(arg.values[0].unresolved)
            and arg.values[0].unresolved.lstrip("${").startswith(SLURM_PREFIX))


def _open_count(arg: Arg | None) -> bool:
    """Whether torchrun's node or process count is one value the files leave to the running job (a variable they do
    not set, or a command's output), not under a condition: the world size is then the command line's."""
    return (arg is not None and len(arg.values) == 1 and bool(arg.values[0].unresolved)
            and not arg.values[0].uncertain)


def fixed_value(arg: Arg | None) -> Word | None:
    """The single value of `arg` where the files fix it (not unresolved, not under a condition); else None."""
    if arg is None or len(arg.values) != 1 or arg.values[0].unresolved or arg.values[0].uncertain:
        return None
    return arg.values[0]


def fixed_values_text(arg: Arg) -> str | None:
    """All values of `arg`, space-separated, where the files fix every one (`--cuda-graph-modules attn mlp`); None for
    a switch or a value the files leave open."""
    if not arg.values or any(v.unresolved or v.uncertain for v in arg.values):
        return None
    return " ".join(v.text for v in arg.values)


TORCHRUN_NUMA_BINDINGS = ("node", "socket", "exclusive", "core-complex")
"""torchrun --numa-binding's choices (PyTorch >= 2.9 torch/numa/binding.py AffinityMode)."""


def process_binding(launch: Launch, args: dict[str, Arg], s: Settings) -> None:
    """Whether each rank runs bound to its GPU's CPU cores and NUMA node (recipe cpu_affinity), as the launch line
    starts it: torchrun binds only with --numa-binding (PyTorch >= 2.9); a wrapper in front of torchrun (numactl,
    srun --cpu-bind) binds torchrun as a whole, not each rank to its GPU.  The deepspeed launcher's case depends on
    its host count, known once the hostfile is read (`DeepSpeedBinding`, decided by `deepspeed_binding`).
    Ranks started one per task (`srun python ...`) bind as the cluster's SLURM task plugin decides, which no file
    states: priced bound, and the evidence says so."""
    if s.has("recipe.cpu_affinity"):
        return
    where = launch.site
    if launch.launcher == "torchrun":
        numa = args.get("--numa-binding")
        if numa is None:
            s.put("recipe.cpu_affinity", False, f"{where}: torchrun without --numa-binding starts its ranks unbound")
            return
        fixed = fixed_value(numa)
        if fixed is None:
            s.ignored.append(f"torchrun --numa-binding: its value is not fixed by the files; priced bound "
                             f"({numa.evidence})")
            return
        mode = fixed.text
        if mode not in TORCHRUN_NUMA_BINDINGS:
            raise InputError(f"{numa.evidence}: torchrun --numa-binding {mode!r} is not one of its choices "
                             f"{', '.join(TORCHRUN_NUMA_BINDINGS)} (torch/numa/binding.py); fix the launch line")
        s.put("recipe.cpu_affinity", True, numa.evidence)
    elif launch.launcher in ("deepspeed", "deepspeed.pt"):
        runner = args.get("--launcher")
        value = fixed_value(runner)
        s.deepspeed_binding = DeepSpeedBinding(
            flag=args["--bind-cores-to-rank"].evidence if "--bind-cores-to-rank" in args else None,
            runner=(value.text.lower() if value is not None else None) if runner is not None else "pdsh",
            runner_evidence=runner.evidence if runner is not None else "",
            local="--no-ssh" in args, force_multi="--force-multi" in args, where=str(where))
    elif launch.command.words and launch.command.words[0].text.rsplit("/", 1)[-1] == "accelerate":
        s.put("recipe.cpu_affinity", False, f"{where}: accelerate launch starts its ranks through "
                                            f"torch.distributed.run, torchrun's launcher, unbound")
        s.accelerate_launch = str(where)
    else:
        bind = _srun_cpu_bind(launch)
        if bind is not None and bind.text.rsplit(",", 1)[-1] in ("none", "no"):
            # srun(1) --cpu-bind=none: "Do not bind tasks to CPUs"; a QA run's `srun --cpu-bind=none python ...`
            # was priced bound, as if the cluster's task plugin decided
            s.put("recipe.cpu_affinity", False, f"{bind.evidence} (srun --cpu-bind={bind.text}: each task runs "
                                                f"unbound, srun(1))")
        elif bind is not None:
            s.put("recipe.cpu_affinity", True, f"{bind.evidence} (srun --cpu-bind={bind.text} binds each task; "
                                               f"priced bound to its GPU's CPU cores and NUMA node)")
        elif (mpi := _mpirun_binding(launch)) is not None:
            policy, evidence = mpi
            unbound = policy == "none"
            s.put("recipe.cpu_affinity", not unbound,
                  f"{evidence} (mpirun --bind-to {policy}: "
                  + ("each rank runs unbound, Open MPI mpirun(1) and MPICH Hydra's -bind-to)" if unbound else
                     "each rank bound; priced bound to its GPU's CPU cores and NUMA node)"))
        else:
            s.put("recipe.cpu_affinity", True, f"{where} (ranks started one per task bind as the cluster's SLURM "
                                               f"task plugin or the MPI launcher decides, which the files do not "
                                               f"state: priced bound)")


MPIRUNS = ("mpirun", "mpiexec", "mpiexec.hydra", "orterun")
"""The MPI launchers read (Open MPI's mpirun/mpiexec/orterun, MPICH's and Intel MPI's Hydra mpiexec)."""


def _mpirun_words(launch: Launch) -> list[Word]:
    """The `mpirun` and its options before the program of an `mpirun ... python ...` launch; [] otherwise."""
    words = list(launch.launcher_args or ())
    return words if words and words[0].text.rsplit("/", 1)[-1] in MPIRUNS else []


def _mpirun_tasks(launch: Launch, s: Settings) -> None:
    """`mpirun -np 16 --npernode 8 python train.py`: one rank per MPI process, so the world size is its process
    count (Open MPI mpirun(1): `-c, -n, --n, -np <#>` "Run this many copies of the program"; Hydra's `-n`/`-np`),
    and the processes per node its `-npernode`/`--npernode`/`-N` (Open MPI: "On each node, launch this many
    processes"), `--map-by ppr:N:node` (N processes per node) or Hydra's `-ppn`.  A QA trial: `mpirun -np 16
    --map-by ppr:8:node ... python pretrain_gpt.py` was priced on the cluster's 1,024 GPUs."""
    words = _mpirun_words(launch)
    tasks = per_node = by_node = None
    k = 1
    while k < len(words):
        t = words[k].text
        if t in ("--bynode", "-bynode"):  # Open MPI's older spelling of --map-by node
            by_node = words[k].evidence
        m = re.fullmatch(r"(-c|-n|--n|-np|--np|-npernode|--npernode|-N|-ppn|--ppn|-map-by|--map-by|-rank-by|--rank-by)"
                         r"(?:=(.+))?", t)
        if m is None:
            k += 1
            continue
        given = dataclasses.replace(words[k], text=m.group(2)) if m.group(2) is not None else (
            words[k + 1] if k + 1 < len(words) else None)
        k += 1 if m.group(2) is not None else 2
        if given is None or given.unresolved or given.uncertain:
            continue
        if m.group(1) in ("-c", "-n", "--n", "-np", "--np") and re.fullmatch(r"\d+", given.text):
            tasks = (int(given.text), words[k - 1].evidence if m.group(2) is None else given.evidence)
        elif m.group(1).endswith(("map-by", "rank-by")):
            ppr = re.fullmatch(r"ppr:(\d+):node(?::.*)?", given.text.lower())
            if ppr and m.group(1).endswith("map-by"):
                per_node = (int(ppr.group(1)), given.evidence)
            if given.text.lower().split(":", 1)[0] == "node":
                by_node = f"{words[k - 1].evidence if m.group(2) is None else given.evidence}"
        elif re.fullmatch(r"\d+", given.text):
            per_node = (int(given.text), given.evidence)
    what = "(mpirun starts one rank per process)"
    hostfile = next((words[j + 1] for j, w in enumerate(words[:-1])
                     if w.text in ("--hostfile", "-hostfile", "--machinefile", "-machinefile", "-f")), None)
    if hostfile is not None:
        s.ignored.append(f"mpirun {hostfile.text} ({hostfile.evidence}): its hosts set which node runs which ranks, "
                         f"and the audit reads a host order only from --hosts: give --hosts {hostfile.text}")
    if tasks is not None:
        s.put("world_size", tasks[0], f"{tasks[1]} {what}")
    if per_node is not None:
        s.put("gpus_per_node", per_node[0], f"{per_node[1]} {what}")
    if by_node is not None:
        # Open MPI mpirun(1): --map-by node (--bynode) launches "one per node, cycling by node in a round-robin
        # fashion" and "assigns MPI_COMM_WORLD ranks in a round-robin, 'by node' manner"; --rank-by node ranks so
        # (a QA trial: `mpirun -np 16 --map-by node` was priced with each TP pair on one node)
        s.put("task_distribution", "cyclic", f"{by_node} (mpirun places rank r on node r mod N)")
        s.put("task_dealer", "mpirun", by_node)


def _mpirun_binding(launch: Launch) -> tuple[str, str] | None:
    """(policy, evidence) of an `mpirun ... python ...` (or mpiexec) launch's --bind-to / -bind-to (Open MPI's
    mpirun(1) and MPICH Hydra's mpiexec both spell it so, `none` leaving the ranks unbound), or OMPI_MCA_hwloc_base_
    binding_policy, which Open MPI reads as the flag; None where the launch is not mpirun's or the files do not fix
    the policy (a QA note: `mpirun --bind-to none python ...` was priced bound, as the launcher decides)."""
    words = _mpirun_words(launch)
    if not words:
        return None
    for k, w in enumerate(words[1:], 1):
        m = re.fullmatch(r"--?bind-to(?:=(.+))?", w.text)
        value = m.group(1) if m and m.group(1) is not None else (
            words[k + 1].text if m and k + 1 < len(words) else None)
        if value is not None:
            given = words[k + 1] if m.group(1) is None else w
            if given.unresolved or given.uncertain:
                return None
            return value.split(":", 1)[0].lower(), w.evidence
    env = launch.command.env("OMPI_MCA_hwloc_base_binding_policy")
    if env is not None and not (env.unresolved or env.uncertain):
        return env.text.split(":", 1)[0].lower(), env.evidence
    return None


def _srun_cpu_bind(launch: Launch) -> Word | None:
    """srun's --cpu-bind value for an `srun python ...` launch (its own words, or SLURM_CPU_BIND, which srun reads as
    the flag: srun(1) INPUT ENVIRONMENT VARIABLES), lower-cased, `verbose,`/`quiet,` dropped; None where neither is
    given or the files do not fix it.  (`--cpu_bind` is the spelling of SLURM before 18.08, still taken.)"""
    words = srun_of(launch) or (launch.launcher_args if launch.launcher_args and
                                launch.launcher_args[0].text.rsplit("/", 1)[-1] == "srun" else [])
    given = last_flag_value(words[1:], r"--cpu[-_]bind(?:=(.+))?")
    if given is None and words:
        given = launch.command.env("SLURM_CPU_BIND")
    if given is None or given.unresolved or given.uncertain:
        return None
    kinds = [t for t in given.text.lower().split(",") if t not in ("v", "q", "verbose", "quiet")]
    return dataclasses.replace(given, text=",".join(kinds)) if kinds else None


def deepspeed_binding(s: Settings) -> None:
    """Whether the deepspeed launcher's ranks run bound (recipe cpu_affinity), once the host count is known.  On one
    host (or with --no_ssh) runner.py starts them with deepspeed.launcher.launch, which binds each to its share of
    cores only under --bind_cores_to_rank; on several, the pdsh runner (the default) drops that flag and starts
    launch.py unbound, IMPI passes it on, and the OpenMPI, MPICH, SLURM and MVAPICH runners leave binding to mpirun
    or srun, which the files do not state (DeepSpeed 0.19.8 launcher/runner.py, multinode_runner.py)."""
    b = s.deepspeed_binding
    if b is None or s.has("recipe.cpu_affinity"):
        return
    hosts, world, gpn = s.value("hosts"), s.value("world_size"), s.value("gpus_per_node")
    nodes = s.num_nodes[0] if s.num_nodes is not None else ""
    n = len(hosts) if hosts else int(nodes) if nodes.isdigit() else -(-world // gpn) if world and gpn else None
    unbound = f"{b.where}: deepspeed without --bind_cores_to_rank starts its ranks unbound (launcher/launch.py)"
    if b.local or (n == 1 and not b.force_multi):
        s.put("recipe.cpu_affinity", b.flag is not None, b.flag or unbound)
        return
    if b.runner is None:
        s.put("recipe.cpu_affinity", True, f"{b.runner_evidence} (not fixed by the files, so neither is process "
                                           f"binding: priced bound)")
        return
    several = b.force_multi or (n is not None and n > 1)
    if b.runner == "pdsh" and b.flag is None:
        s.put("recipe.cpu_affinity", False, unbound)
    elif b.runner == "pdsh" and several:
        s.put("recipe.cpu_affinity", False,
              f"{b.flag} (dropped: DeepSpeed's pdsh runner does not pass it to the {n or 'several'} hosts it starts, "
              f"launcher/multinode_runner.py; launch each host with deepspeed --no_ssh --node_rank N, or use "
              f"--launcher impi, to bind)")
    elif b.runner == "impi" and b.flag is not None:
        s.put("recipe.cpu_affinity", True, b.flag)
    elif b.runner == "pdsh":  # the audited allocation's host count decides (audit.core.launch_recipe)
        s.ignored.append(f"--bind_cores_to_rank binds only where deepspeed starts the ranks itself (one host, "
                         f"--no_ssh) and the files do not fix the host count: bound on one host of the allocation, "
                         f"unbound on several, where the pdsh runner drops it ({b.flag})")
    else:
        s.put("recipe.cpu_affinity", True,
              f"{b.runner_evidence} (on several hosts DeepSpeed's {b.runner} runner leaves binding to its launcher, "
              f"mpirun or srun, and the cluster's settings, which the files do not state: priced bound)")


def _bf16_rule(name: str, evidence: str) -> bool:
    """Whether `name` was set by deepspeed_grad_accumulation's BF16_Optimizer rule (its ZeRO-1, whole all-reduce or
    fp32 gradient copy)."""
    return ((name == "zero_stage" and BF16_ZERO1 in evidence)
            or (name == "recipe.grad_all_reduce" and BF16_ALL_REDUCE in evidence)
            or (name == "recipe.grad_accumulation" and BF16_COPY in evidence))


DEEPSPEED_ALLREDUCE_BUCKET = 500_000_000
"""Elements a ZeRO-0 DeepSpeed engine all-reduces at a time, the BF16_Optimizer's too: MEMORY_OPT_ALLREDUCE_SIZE
(DeepSpeed 0.19.8 runtime/engine.py allreduce_gradients(bucket_size=MEMORY_OPT_ALLREDUCE_SIZE); runtime/pipe/engine.py
_exec_reduce_grads, _bf16_reduce_grads: buffered_allreduce_fallback(elements_per_buffer=MEMORY_OPT_ALLREDUCE_SIZE))."""
ENGINE_BUCKET = (f"ZeRO stage 0: DeepSpeed's engine all-reduces the gradients {DEEPSPEED_ALLREDUCE_BUCKET:,} elements "
                 f"at a time, MEMORY_OPT_ALLREDUCE_SIZE: runtime/engine.py allreduce_gradients, runtime/pipe/engine.py "
                 f"_bf16_reduce_grads")
"""The evidence of DEEPSPEED_ALLREDUCE_BUCKET: a script's stage 0 yields to a DeepSpeed JSON's reading (merge)."""
BIGSCIENCE_BUFFER = "BigScience's Megatron-DeepSpeed, on a DeepSpeed before 0.17.6"
"""How the Megatron reader's evidence of an fp32 BF16_Optimizer buffer begins where the script runs BigScience's fork
(readers.megatron: BIGSCIENCE_FLAGS)."""


def merge(groups: list[Settings]) -> Settings:
    """The files' settings together: a value two config files give differently is an error; a CLI override
    (`override`) wins.  Framework keys merge the same way; launcher and file facts: the last file's."""
    out = Settings(", ".join(g.path for g in groups))
    json_group = next((g for g in groups if g.json_paths and g.has("zero_stage")), None)
    json_stage = json_group is not None
    # a script's own BF16_Optimizer rule (its stage 0 under --bf16) stands where the script writes the JSON itself with
    # the same stage 0 (a here-document): the rule read the stage DeepSpeed runs (BigScience's BLOOM script)
    same_stage = json_group is not None and json_group.json_written is not None and json_group.value("zero_stage") == 0
    for g in sorted(groups, key=lambda g: g.override):
        for name, ev in g.sources.items():
            value = g.value(name)
            if json_stage and not g.json_paths and g.megatron_deepspeed and name == "zero_stage" \
                    and BF16_ZERO1 not in ev:
                # Megatron-DeepSpeed's --zero-stage only sizes zero.Init (pretrain_gpt.py); DeepSpeed runs the JSON's
                # stage (a review: a script's stage 1 beside a JSON's 0 was refused as contradictory)
                if value != json_group.value("zero_stage"):
                    out.ignored.append(f"zero_stage {value} ({ev}): Megatron-DeepSpeed's --zero-stage only sizes "
                                       f"zero.Init; DeepSpeed runs the JSON's stage {json_group.value('zero_stage')} "
                                       f"({json_group.sources['zero_stage']})")
                continue
            if json_stage and not g.json_paths and _bf16_rule(name, ev) and not (same_stage and BF16_ZERO1 in
                                                                               g.sources.get("zero_stage", "")):
                # a Megatron-DeepSpeed script's BF16_Optimizer, inferred from its --zero-stage: DeepSpeed builds its
                # optimizer from the JSON's stage, which the JSON's own reading prices (pretrain_gpt.py uses
                # args.zero_stage only for zero.Init; a user trial: the same JSON priced two ways by the script's
                # ZERO_STAGE)...
                if not (name == "recipe.grad_accumulation" and BIGSCIENCE_BUFFER in ev
                        and json_group.value("zero_stage") == 0):
                    continue
                # ...but where the JSON's stage 0 builds it too, its buffer's width is the DeepSpeed version's, which
                # the JSON cannot tell and a BigScience script's flags do (a QA run: BLOOM's tr11-176B-ml.slurm was
                # priced 95.59 s alone, its here-document's JSON read, and 92.56 s with the same JSON as a --launch
                # file of its own, in a bf16 buffer)
            if json_stage and not g.json_paths and name == "recipe.ddp_bucket_params" and ENGINE_BUCKET in ev \
                    and json_group.value("zero_stage") != 0:
                continue  # a Megatron-DeepSpeed script's stage 0 bucket: the JSON's stage and bucket run
            if name == "cuda_visible_devices" and out.has(name) and not g.override:
                out.put(name, *_merge_node_devices(out.value(name), out.sources[name], value, ev))
                continue
            if name == "launch_environment" and out.has(name):  # two launch lines' variables: all of them, once
                out.put(name, tuple(dict.fromkeys((*out.value(name), *value))),
                        "; ".join(dict.fromkeys((out.sources[name], ev))))
                continue
            if out.has(name) and out.value(name) != value and not g.override:
                if name == "zero_stage" and {out.value(name), value} == {0, 1} and BF16_ZERO1 in out.sources[name]:
                    continue  # a script's stage 0 that its BF16_Optimizer runs as ZeRO-1; the JSON's own 0 agrees
                if name == "zero_stage" and {out.value(name), value} == {0, 1} and BF16_ZERO1 in ev:
                    out.put(name, value, ev)
                    continue
                copies = ("fp32_copy", "bf16_copy")
                if name == "recipe.grad_accumulation" and out.value(name) in ("autograd", *copies) \
                        and value in ("autograd", *copies) and "autograd" in (out.value(name), value) \
                        and ENGINE_AUTOGRAD in (out.sources[name] if out.value(name) == "autograd" else ev) \
                        and BF16_COPY in (ev if value in copies else out.sources[name]):
                    # a launcher's rule (the ZeRO optimizer) against the JSON's BF16_Optimizer (a user trial: a
                    # Megatron-DeepSpeed bf16 ZeRO-1 job with grad_accum_dtype fp32 was refused as contradictory)
                    if value in copies:
                        out.put(name, value, ev)
                    continue
                raise _contradiction(name, out.value(name), out.sources[name], value, ev)
            out.put(name, value, ev)
        if g.keys is not None:
            out.keys = _merge_keys(out.keys or {}, g.keys, g.override)
        out.ignored += [x for x in g.ignored if x not in out.ignored]
    for g in groups:
        out.config_file = g.config_file or out.config_file
        out.deepspeed_config = g.deepspeed_config or out.deepspeed_config
        out.deepspeed_config_arg = g.deepspeed_config_arg or out.deepspeed_config_arg
        out.num_nodes = g.num_nodes or out.num_nodes
        out.num_gpus = g.num_gpus or out.num_gpus
        out.hostfile = g.hostfile or out.hostfile
        out.hf_auto = g.hf_auto or out.hf_auto
        out.deepspeed_binding = g.deepspeed_binding or out.deepspeed_binding
        out.megatron_lm = out.megatron_lm or g.megatron_lm
        out.megatron_without_deepspeed = out.megatron_without_deepspeed or g.megatron_without_deepspeed
        out.bridge = out.bridge or g.bridge
        out.neox = out.neox or g.neox
        out.neox_configs += g.neox_configs
        out.config_keys |= g.config_keys
        out.config_spelling |= g.config_spelling
        out.bridge_keys |= g.bridge_keys
        out.unknown_keys += g.unknown_keys
        out.megatron_deepspeed = out.megatron_deepspeed or g.megatron_deepspeed
        out.pipeline_module = g.pipeline_module or out.pipeline_module
        out.micro_batch_one = g.micro_batch_one or out.micro_batch_one
        out.command_args += g.command_args
        out.engine_checkpoints_none = g.engine_checkpoints_none or out.engine_checkpoints_none
        out.grad_accum_dtype = g.grad_accum_dtype or out.grad_accum_dtype
        out.context_axis = out.context_axis or g.context_axis
        out.deepspeed_moe = out.deepspeed_moe or g.deepspeed_moe
        out.offloaded = tuple(dict.fromkeys((*out.offloaded, *g.offloaded)))
        out.json_sync = g.json_sync or out.json_sync
        out.hf_trainer = g.hf_trainer or out.hf_trainer
        out.base_config = g.base_config or out.base_config
        out.bridge_full = out.bridge_full or g.bridge_full
        out.warnings += [w for w in g.warnings if w not in out.warnings]
        out.hf_precision = g.hf_precision or out.hf_precision
        out.model_elsewhere = out.model_elsewhere or g.model_elsewhere
        out.refusal = out.refusal or g.refusal
        out.sixteen_bit = out.sixteen_bit or g.sixteen_bit
        out.accelerate_launch = g.accelerate_launch or out.accelerate_launch
        out.accelerate_read = out.accelerate_read or g.accelerate_read
        out.json_keys |= g.json_keys
        out.json_paths += g.json_paths
        out.json_written = g.json_written or out.json_written
        out.heredoc = g.heredoc or out.heredoc
        out.deepspeed_config_word = g.deepspeed_config_word or out.deepspeed_config_word
    return out


def _merge_keys(into: dict[str, tuple[Any, str]], keys: dict[str, tuple[Any, str]],
                override: bool) -> dict[str, tuple[Any, str]]:
    out = dict(into)
    for k, (v, ev) in keys.items():
        if k in out and out[k][0] != v and not override:
            raise _contradiction(k, out[k][0], out[k][1], v, ev)
        out[k] = (v, ev)
    return out


def _merge_node_devices(first: tuple[NodeDevices, ...], first_ev: str, second: tuple[NodeDevices, ...],
                        second_ev: str) -> tuple[tuple[NodeDevices, ...], str]:
    """Two files' launch lines together (placement's megatron.sh beside its launch.sbatch, say): one set of lines
    where no node runs its ranks on GPUs in one order by one file's lines and in another by the other's.  A line
    with no CUDA_VISIBLE_DEVICES states numbered order; one that reads the value at run time (`unresolved`), or no
    line for the node, states none.  Where they differ, the contradiction names each line.  The merged lines keep
    the stated orders where `audit.core.node_gpu_orders` looks (a node rank's last line, the first line for every
    node), the open ones beside them."""
    first_line, second_line = node_line(first), node_line(second)
    for rank in {n.node_rank for n in (*first, *second)}:  # the error names every line, whichever node differs
        a, b = first_line(rank), second_line(rank)  # an order is stated by a line that does not read it at run time
        if a is not None and b is not None and a.unresolved is None and b.unresolved is None and a.devices != b.devices:
            raise _contradiction("cuda_visible_devices", first, first_ev, second, second_ev)
    lines = tuple(dict.fromkeys((*first, *second)))
    merged = ([n for n in lines if n.unresolved is not None and n.node_rank is not None]
              + [n for n in lines if n.unresolved is None]
              + [n for n in lines if n.unresolved is not None and n.node_rank is None])
    return tuple(merged), "; ".join(e for e in dict.fromkeys((first_ev, second_ev)) if e)


_SHOWN_NAMES = {"cuda_visible_devices": "CUDA_VISIBLE_DEVICES"}
"""Fields named in messages as the files spell them."""
_SHOWN_LINES = 4
"""Launch lines an error lists before it elides the rest."""


def _shown(value: Any, evidence: str) -> str:
    """A value and where it was read, for an error: launch lines one by one with their own evidence."""
    if isinstance(value, tuple) and value and all(isinstance(n, NodeDevices) for n in value):
        lines = [n.shown() for n in value[:_SHOWN_LINES]]
        more = len(value) - _SHOWN_LINES
        return "[" + "; ".join(lines) + (f"; and {more} more launch line(s)" if more > 0 else "") + "]"
    return f"{value} ({evidence})" if evidence else str(value)


def _contradiction(name: str, first: Any, first_ev: str, second: Any, second_ev: str) -> InputError:
    return InputError(f"contradictory values for {_SHOWN_NAMES.get(name, name)}: {_shown(first, first_ev)} and "
                      f"{_shown(second, second_ev)}; make the files agree, or give --launch only the files the job "
                      f"ran with")
