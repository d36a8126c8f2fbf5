"""`placement sweep FILE --set KEY=VALUE`: what-ifs on a sweep file without editing it.

Grammar (repeatable, applied in order, before the file is validated):

- `KEY=VALUE` where KEY is a study field (`budget`, `objective`, `deadline_days`, `currency`), a design field
  (`energy_price_per_kwh`, `pue`, `capex_per_gpu`, ...: every design) or a workload field (`tokens`, ...: every
  workload);
- `designs.NAME.KEY=VALUE` or `workloads.NAME.KEY=VALUE`: that design or workload only (NAME as in the file;
  it may hold spaces and dots, quote it for the shell);
- VALUE is a YAML scalar (`0.15`, `1.5e13`, `null`, `cost_per_token`), checked as the file's own value is.
"""

from __future__ import annotations

import copy
import difflib

import yaml

from placement.errors import InputError
from placement.loaders.files import load_scalar
from placement.sweep.spec import CAPEX_COST_INPUTS, RENTAL_COST_INPUTS, DesignSpec, SweepSpec, WorkloadSpec

STUDY_KEYS = tuple(k for k in SweepSpec.model_fields if k not in ("name", "designs", "workloads"))
DESIGN_KEYS = tuple(k for k in DesignSpec.model_fields if k != "name")
WORKLOAD_KEYS = tuple(k for k in WorkloadSpec.model_fields if k != "name")


def _value(text: str, item: str):
    try:
        value = load_scalar(text)  # placement's YAML: `--set oversubscription=2:1` is no base-60 121
    except yaml.YAMLError:
        value = text
    if isinstance(value, dict | list):
        raise InputError(f"--set {item}: the value must be one scalar (a number, a word or null), got "
                         f"{type(value).__name__}")
    return value


def _valid_keys() -> str:
    return (f"study: {', '.join(STUDY_KEYS)}; every design or designs.NAME.: {', '.join(DESIGN_KEYS)}; every "
            f"workload or workloads.NAME.: {', '.join(WORKLOAD_KEYS)}")


def apply_sets(data: dict, sets: tuple[str, ...]) -> dict:
    """The sweep file's mapping with every `--set` applied (a new dict); an InputError names a bad item."""
    out = copy.deepcopy(data)
    for item in sets:
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise InputError(f"--set {item!r}: expected KEY=VALUE, e.g. --set energy_price_per_kwh=0.15 or "
                             f"--set 'designs.NAME.capex_per_gpu=30000'")
        value = _value(text.strip(), item)
        group, _, rest = key.partition(".")
        if group in ("designs", "workloads") and rest:
            name, dot, field = rest.rpartition(".")
            valid = DESIGN_KEYS if group == "designs" else WORKLOAD_KEYS
            if not dot or field not in valid:
                raise InputError(f"--set {item}: {field or rest!r} is not a {group[:-1]} field; valid keys: "
                                 f"{_valid_keys()}")
            items = out.get(group) if isinstance(out.get(group), list) else []
            named = [x for x in items if isinstance(x, dict) and x.get("name") == name]
            if not named:
                names = ", ".join(repr(x.get("name")) for x in items if isinstance(x, dict))
                raise InputError(f"--set {item}: no {group[:-1]} named {name!r}; the file has {names or 'none'}")
            for x in named:
                x[field] = value
        elif key in STUDY_KEYS:
            out[key] = value
        elif key in DESIGN_KEYS or key in WORKLOAD_KEYS:
            group = "designs" if key in DESIGN_KEYS else "workloads"
            items = [x for x in (out.get(group) if isinstance(out.get(group), list) else []) if isinstance(x, dict)]
            # a purchase's cost inputs go to the designs bought, a rental price to those rented (a review: a study
            # with one of each refused `--set capex_per_gpu=30000` as a rental with a capex)
            if key in CAPEX_COST_INPUTS:
                items = [x for x in items if x.get("price_per_gpu_hour") is None] or items
            elif key in RENTAL_COST_INPUTS:
                items = [x for x in items if x.get("capex_per_gpu") is None] or items
            for x in items:
                x[key] = value
        else:
            near = difflib.get_close_matches(key, [*STUDY_KEYS, *DESIGN_KEYS, *WORKLOAD_KEYS], n=1, cutoff=0.8)
            meant = f"did you mean {near[0]}? " if near else ""  # a user trial's energy_prise_per_kwh got the list
            raise InputError(f"--set {item}: unknown key {key!r}; {meant}valid keys: {_valid_keys()}")
    return out


def design_fields_set(sets: tuple[str, ...], name: str) -> set[str]:
    """The fields of design `name` that `--set` items give (every design's `KEY`, or its `designs.NAME.KEY`)."""
    out = set()
    for item in sets:
        key = item.partition("=")[0].strip()
        group, _, rest = key.partition(".")
        if group == "designs" and rest:
            design, _, field = rest.rpartition(".")
            if design == name:
                out.add(field)
        elif key in DESIGN_KEYS:
            out.add(key)
    return out
