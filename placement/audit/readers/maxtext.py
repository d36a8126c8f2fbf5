"""MaxText 0.2.5 launch material for the audit: its config YAML, `key=value` overrides on a launch script's train
command (which win), and the jax_mesh.py that `--emit maxtext` writes (the process order).  MaxText's own rules
(base.yml defaults, mesh fills, batch arithmetic) are in `placement.audit.maxtext`."""

from __future__ import annotations

from pathlib import Path

from placement.audit import maxtext
from placement.audit.readers.common import merge
from placement.audit.readers.reading import Reading, Settings
from placement.audit.shell import read_commands
from placement.errors import InputError


def read_file(path: Path, kind: str, s: Settings) -> Settings:
    """A MaxText config (its keys), a launch script (the train command's key=value overrides, which win), or
    jax_mesh.py (the process order)."""
    if kind == "yaml":
        s.keys = maxtext.yaml_keys(path)
        return s
    if kind == "python":
        hosts, ev = maxtext.mesh_hosts(path)
        s.put("hosts", tuple(hosts), ev)
        return s
    if kind != "script":
        raise InputError(f"{path}: a {kind} file is not MaxText launch material (its config YAML, a launch script "
                         f"or jax_mesh.py)")
    found = [k for k in (maxtext.command_keys(list(c.words)) for c in read_commands(path)) if k is not None]
    if not found:
        raise InputError(f"{path}: no MaxText train command (python3 -m maxtext.trainers.pre_train.train CONFIG "
                         f"key=value ...); expected a MaxText launch script")
    keys, config = found[0]
    s.keys = keys
    s.override = True
    if config:
        s.config_file = (config, "")
    return s


def join(groups: list[Settings], paths: list[Path]) -> Reading:
    """A MaxText job: the files' keys merged (command-line overrides win), read by `placement.audit.maxtext`."""
    s = merge(groups)
    config = s.config_file
    read_yaml = any(Path(p).suffix.lower() in (".yaml", ".yml") for p in paths)
    if config is not None and not read_yaml and Path(config[0]).name != "base.yml":
        raise InputError(f"the MaxText command trains with config {config[0]}, which is not among the audited "
                         f"files; pass it too (--launch {config[0]}): without it the audit would price base.yml "
                         f"defaults for every key the command line leaves out")
    for name, (value, ev) in maxtext.finish(s.keys or {}, s.ignored).items():
        s.put(name, value, ev)
    return s.reading("maxtext")
