"""The YAML catalogs (models/, hardware/) and the loaders that turn a name or a path into a spec.

The catalogs ship inside the wheel as ``placement/_catalog/`` (see pyproject.toml); in a source
checkout they are read from the repository root.  A reference that is an existing path is read as a
file (``.json`` = HuggingFace config.json, ``.yaml``/``.yml`` = our schema); otherwise it is a name.
"""

from __future__ import annotations

import difflib
import os
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from placement.errors import InputError
from placement.loaders.errors import format_validation_error
from placement.loaders.files import parse_yaml, read_text, yaml_kind
from placement.loaders.kinds import kind_of, wrong_kind
from placement.specs import AcceleratorSpec, ClusterSpec, ModelSpec

S = TypeVar("S", bound=BaseModel)


@lru_cache(maxsize=1)
def catalog_root() -> Path:
    """Where models/ and hardware/ are: inside the installed package, else the source checkout."""
    packaged = Path(__file__).parent / "_catalog"
    if (packaged / "models").is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent


def _names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.yaml"))


def model_names() -> list[str]:
    return _names(catalog_root() / "models")


def clusters_folder() -> Path:
    return catalog_root() / "hardware" / "clusters"


def cluster_names() -> list[str]:
    return _names(clusters_folder())


def cluster_file(ref: str) -> str:
    """The YAML file a --cluster value names: the catalog's file of that name (load_cluster's), or the path given."""
    path = clusters_folder() / f"{ref}.yaml"
    return str(path) if _is_file(path) else ref


def accelerator_names() -> list[str]:
    return _names(catalog_root() / "hardware" / "accelerators")


EXAMPLES = {"model": "models", "cluster": "hardware/clusters", "accelerator": "hardware/accelerators"}
"""Where the catalog keeps the files of each kind, named in a message about one (a user trial was sent to the root)."""


def read_yaml(path: Path, schema: type[S], what: str) -> S:
    """Parse one YAML file into `schema`, turning every failure into a one-paragraph InputError."""
    text = read_text(path, f"{what} file", f"give a readable UTF-8 YAML {what} file")
    data = parse_yaml(text, path, f"{what} file")
    if not isinstance(data, dict):
        other = wrong_kind(path, data, what)  # a step file (a list of measured runs)
        if other is not None:
            raise InputError(other)
        raise InputError(
            f"{path}: a {what} file must be a YAML mapping of fields, got {yaml_kind(data)}; "
            f"see the files in {catalog_root() / EXAMPLES.get(what, '')} for examples"
        )
    try:
        return schema.model_validate(data)
    except ValidationError as err:
        other = kind_of(data, what, ("model", "cluster", "accelerator"))
        if other is not None:  # a user trial: a cluster file as an accelerator got 12 missing / extra field errors
            flag = {"model": "--model", "cluster": "--cluster", "accelerator": "a cluster file's `accelerator:`"}
            def a(word: str) -> str:
                return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"

            raise InputError(f"{path} is {a(other)} file (its fields {', '.join(sorted(map(str, data))[:4])}"
                             f"{' ...' if len(data) > 4 else ''} are {a(other)}'s), not {a(what)} file; give it as "
                             f"{flag[other]}, and {a(what)} file here (examples in "
                             f"{catalog_root() / EXAMPLES.get(what, '')})") from None
        # a sweep file, a calibration profile or a measured run
        raise InputError(wrong_kind(path, data, what, ("sweep", "profile", "steps"))
                         or format_validation_error(err, str(path))) from None


def _is_file(path: Path) -> bool:
    """Path.is_file, with a name the OS refuses to look up (longer than NAME_MAX, say) being no file."""
    try:
        return path.is_file()
    except OSError:
        return False


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _file_given(ref: str, path: Path) -> bool:
    """Whether a --model / --cluster value is a path rather than a catalog name: a YAML suffix, a file there (a
    regular file, or a pipe such as `<(...)`, or a device: read as a file, so /dev/null is said to be empty, not an
    unknown name), or a path separator in it."""
    return path.suffix in (".yaml", ".yml") or _readable(path) or "/" in ref or os.sep in ref


def _no_file(ref: str, path: Path, field: str, what: str) -> str:
    """Why a path given for a model or cluster file cannot be read as one: a folder, or nothing there."""
    if _is_dir(path):
        hf = (" (a folder is read as a HuggingFace model when it holds config.json, and this one holds none)"
              if what == "model" else "")
        return f"{field} {ref!r} is a folder, not a {what} file{hf}; give the YAML file in it, or a catalog name"
    hf = " or a HuggingFace config.json (a Hub name is not fetched: download its config.json)" if what == "model" \
        else ""
    return f"{field} {ref!r}: no such file; give a YAML path{hf}, or a catalog name"


def _readable(path: Path) -> bool:
    """Something there that is not a folder (a file, a pipe, a device), the OS answering."""
    try:
        return path.exists() and not path.is_dir()
    except OSError:
        return False


def _by_name(name: str, folder: Path, schema: type[S], what: str, flag: str) -> S:
    path = folder / f"{name}.yaml"
    if not _is_file(path):
        names = _names(folder)
        # catalog names are lower-case: a name in another case, or one typo away, is named first (a user trial's
        # --model Llama3-8B and --cluster dgx-h10 got the whole list alone)
        near = [n for n in names if n.lower() == name.lower()] or difflib.get_close_matches(name, names, n=1,
                                                                                              cutoff=0.8)
        meant = f"did you mean {near[0]}? " if near else ""
        raise InputError(
            f"{flag} {name!r}: no {what} of that name; {meant}known {what}s: {', '.join(names)}; or give a path to a "
            f"YAML file" + (" or a HuggingFace config.json (or its folder)" if what == "model" else "")
        )
    return read_yaml(path, schema, what)


def load_model(ref: str, field: str = "--model") -> ModelSpec:
    """A catalog name (llama3-405b), a YAML path, or a HuggingFace config.json path; `field` is how an error names
    where the reference came from (a flag, or a sweep file's `workloads.N.model`)."""
    path = Path(ref)
    if path.suffix == ".json" or (_is_dir(path) and _is_file(path / "config.json")):
        from placement.loaders.hf_config import load_hf_config

        if _is_dir(path) and not _is_file(path / "config.json"):  # a folder named *.json (a user trial was
            # told "no such file")
            raise InputError(f"{field} {ref!r}: a folder, not a file, and it holds no config.json; give the "
                             f"config.json path (or the folder that holds it) or a catalog name")
        if _is_dir(path):
            path = path / "config.json"
        if not _is_file(path):
            raise InputError(f"{field} {ref!r}: no such file; give a config.json path or a catalog name")
        return load_hf_config(path)
    catalog_name = _is_file(catalog_root() / "models" / f"{ref}.yaml")
    if _file_given(ref, path) or (_is_dir(path) and not catalog_name):  # a folder named without a slash is one
        # too (a user trial's `--model emptydir` was looked up as a catalog name), unless a catalog model has the
        # name (an --out folder named after the model must not hide it)
        if not _readable(path):
            raise InputError(_no_file(ref, path, field, "model"))
        megatron_log = _megatron_log_model(path)
        if megatron_log is not None:
            return megatron_log
        return read_yaml(path, ModelSpec, "model")
    return _by_name(ref, catalog_root() / "models", ModelSpec, "model", field)


def _megatron_log_model(path: Path) -> ModelSpec | None:
    """The model a Megatron-LM training log's printed arguments block describes (calibration.steps
    model_from_megatron), or None for any other file.  `validate --runs LOG` prints `evaluate --model LOG` to
    reproduce a logged run's price (a user trial: the log was read as a malformed YAML)."""
    from placement.audit.readers.megatron import MEGATRON_LOG_BEGIN

    if path.suffix in (".yaml", ".yml", ".json"):
        return None
    from placement.loaders.files import read_bytes

    # bounded, as every input is (an endless file such as /dev/zero is refused at the read limit)
    text = read_bytes(path, "model file", "expected a model YAML or a Megatron-LM log").decode("utf-8", "replace")
    if MEGATRON_LOG_BEGIN not in text:
        return None
    from placement.calibration.steps import megatron_arguments, model_from_megatron

    return model_from_megatron(megatron_arguments(path, text.splitlines()), path)


def accelerator_file_given(ref: str) -> bool:
    """Whether a cluster's `accelerator` value is an accelerator YAML's path rather than a catalog name: a YAML
    suffix or a path separator (catalog names have neither)."""
    return Path(ref).suffix in (".yaml", ".yml") or "/" in ref or os.sep in ref


def load_accelerator(ref: str) -> AcceleratorSpec:
    """What a cluster's `accelerator` field gives: a catalog accelerator (hardware/accelerators/NAME.yaml), or the
    path of an accelerator YAML of the user's (load_cluster has made it absolute)."""
    if accelerator_file_given(ref):
        if not _readable(Path(ref)):
            raise InputError(f"accelerator file {ref!r}: no such file; give the path of an accelerator YAML (the "
                             f"format of {catalog_root() / 'hardware' / 'accelerators'}/*.yaml) or a catalog name")
        return _accelerator_file(ref)
    folder = catalog_root() / "hardware" / "accelerators"
    if not _is_file(folder / f"{ref}.yaml"):
        raise InputError(f"accelerator {ref!r}: {_no_accelerator(ref)}")
    return read_yaml(folder / f"{ref}.yaml", AcceleratorSpec, "accelerator")


@lru_cache(maxsize=16)
def _accelerator_file(path: str) -> AcceleratorSpec:
    """A user's accelerator YAML, read once a process: Topology checks a cluster against its part on every
    construction, and a sweep builds one for each GPU count it considers (a failed read is not cached)."""
    return read_yaml(Path(path), AcceleratorSpec, "accelerator")


def _no_accelerator(name: str) -> str:
    return (f"no accelerator of that name; known accelerators: {', '.join(accelerator_names())}; or give the path "
            f"of an accelerator YAML of your own, relative to the cluster file (the format of "
            f"{catalog_root() / 'hardware' / 'accelerators'}/*.yaml)")


def _user_accelerator(cluster_path: Path, cluster: ClusterSpec) -> ClusterSpec:
    """A cluster file's `accelerator` given as a path: read relative to the cluster file, checked, and kept as an
    absolute path (so the cluster reads the same from any working directory).  The part must not take a catalog
    accelerator's name: outputs and `validate`'s published runs match parts by name, and a user's numbers under a
    catalog name would be compared with that part's runs."""
    ref = cluster.accelerator
    path = Path(os.path.normpath(Path(cluster_path).absolute().parent / ref))
    if not _readable(path):
        raise InputError(f"{cluster_path}: field `accelerator` = {ref!r}: no accelerator file at {path} (a path is "
                         f"read relative to the cluster file); give an accelerator YAML's path or a catalog name "
                         f"({', '.join(accelerator_names())})")
    acc = _accelerator_file(str(path))
    if acc.name in accelerator_names():
        raise InputError(f"{path}: field `name` = {acc.name!r} is a catalog accelerator's name; give your part a "
                         f"name of its own (published runs and calibration profiles match parts by name), or write "
                         f"`accelerator: {acc.name}` in {cluster_path} to use the catalog's")
    return cluster.model_copy(update={"accelerator": str(path)})


def load_cluster(ref: str, field: str = "--cluster") -> ClusterSpec:
    """A catalog name (dgx-h100) or a cluster YAML path; `field` names where the reference came from."""
    path = Path(ref)
    if _file_given(ref, path):
        if not _readable(path):
            raise InputError(_no_file(ref, path, field, "cluster"))
        cluster = read_yaml(path, ClusterSpec, "cluster")
        if accelerator_file_given(cluster.accelerator):
            return _user_accelerator(path, cluster)
        if cluster.accelerator not in accelerator_names():
            raise InputError(f"{path}: field `accelerator` = {cluster.accelerator!r}: "
                             f"{_no_accelerator(cluster.accelerator)}")
        return cluster
    return _by_name(ref, clusters_folder(), ClusterSpec, "cluster", field)
