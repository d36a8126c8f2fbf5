"""Write the launch files of one plan: the formats the user asked for, plus the mapping files."""

from __future__ import annotations

import difflib
from pathlib import Path

from placement.emit import deepspeed, devicemesh, maxtext, megatron, torchtitan
from placement.emit.common import EmitContext
from placement.errors import InputError
from placement.outfiles import check_out_dir, write_atomic

FORMATS = {
    "torchtitan": ("torchtitan.sh", torchtitan.render),
    "megatron": ("megatron.sh", megatron.render),
    "devicemesh": ("device_mesh.py", devicemesh.render),
    "deepspeed": ("deepspeed.sh", deepspeed.render),
    "maxtext": ("maxtext.yml", maxtext.render),
}
EXTRA_FILES = {"deepspeed": ("ds_config.json", "hostfile", deepspeed.TOPOLOGY_FILE)}
"""Files a format writes beside its own."""


def output_names(formats: list[str]) -> list[str]:
    """Every file name the formats write (checked before any work: `outfiles.check_out_dir`)."""
    return [n for f in formats for n in (FORMATS[f][0], *EXTRA_FILES.get(f, ()))]


def parse_formats(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in FORMATS and n != "all"]
    if "all" in names and not unknown:  # `all`, or `--emit all --emit megatron`: every format, each once
        return list(FORMATS)
    if unknown or not names:
        near = [m for n in unknown for m in difflib.get_close_matches(n, list(FORMATS), n=1, cutoff=0.7)]
        meant = f"did you mean {', '.join(near)}? " if near else ""  # a user trial's `--emit megatrn` got the list
        raise InputError(f"--emit {text!r}: unknown format(s) {', '.join(unknown) or '(none)'}; {meant}give a comma "
                         f"list of {', '.join(FORMATS)} or all")
    return list(dict.fromkeys(names))  # each format's files once (`megatron,megatron` wrote and said them twice)


FILE_HEADER = "# this file "
"""How each header line about the file itself begins: what it runs instead of the plan, or that it does not start
or trains another model (emit.common.header_runs)."""


def write(ctx: EmitContext, formats: list[str], out: Path) -> tuple[list[Path], list[str], list[str]]:
    """The files written, every warning (also written inside the files), and each file's own "this file runs ..."
    header line as `FILE: this file runs ...` (where a file runs other than the plan).

    A renderer returns (text, warnings) for its one file, or (text, warnings, extra) where extra maps
    further file names to their text (a DeepSpeed hostfile beside its JSON config, say)."""
    check_out_dir(out)
    paths, warnings, runs = [], [], []
    for name in formats:
        filename, render = FORMATS[name]
        text, warns, *rest = render(ctx)
        files = {filename: text} | (rest[0] if rest else {})
        for fname, body in files.items():
            path = out / fname
            write_atomic(path, body)
            paths.append(path)
            # what the file runs instead of the plan, or that it does not start or trains another model
            runs += [f"{fname}: {line[2:]}" for line in body.splitlines()[:20] if line.startswith(FILE_HEADER)]
        warnings += [f"{name}: {w}" for w in warns]
    return paths, warnings, runs
