"""MaxText 0.2.5 launch material for the audit: its config YAML, `key=value` overrides on a launch script's train
command (which win), and the jax_mesh.py that `--emit maxtext` writes (the process order and each host's GPU
order).  MaxText's own rules (base.yml defaults, mesh fills, batch arithmetic, the ZeRO stage a mesh runs) are in
`placement.audit.maxtext`."""

from __future__ import annotations

from pathlib import Path

from placement.audit import maxtext
from placement.audit.readers.common import device_indices, merge
from placement.audit.readers.reading import NodeDevices, Reading, Settings
from placement.audit.shell import read_commands
from placement.errors import InputError


def read_file(path: Path, kind: str, s: Settings) -> Settings:
    """A MaxText config (its keys), a launch script (the train command's key=value overrides, which win), or
    jax_mesh.py (the process order, and the GPU order of each host: `mesh_devices`)."""
    if kind == "yaml":
        s.keys = maxtext.yaml_keys(path)
        return s
    if kind == "python":
        script = maxtext.mesh_script(path)
        s.put("hosts", script.hosts, script.hosts_evidence)
        if script.visible_evidence is not None:
            s.put("cuda_visible_devices", mesh_devices(script), script.visible_evidence)
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


def mesh_devices(script: maxtext.MeshScript) -> tuple[NodeDevices, ...]:
    """The GPU order each process of a jax_mesh.py runs on: process k (node rank k) runs on HOSTS[k] with that host's
    CUDA_VISIBLE_DEVICES entry, which initialize() exports before jax.distributed.initialize (JAX numbers a
    process's GPUs in the listed order); a host without an entry runs its GPUs in numbered order.  An entry for a
    host HOSTS does not list is never used."""
    out = []
    for k, host in enumerate(script.hosts):
        if host in script.visible:
            value, ev = script.visible[host]
            out.append(NodeDevices(node_rank=k, devices=device_indices(value, ev), evidence=ev))
        else:
            out.append(NodeDevices(node_rank=k, evidence=f"{script.visible_evidence} (no entry for {host!r}: its "
                                                         f"GPUs in numbered order)"))
    return tuple(out)


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
