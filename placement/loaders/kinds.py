"""Which of placement's YAML inputs a parsed file plainly is, so one given where another kind goes is named as
what it is (a model, a cluster, an accelerator, a sweep file, a calibration profile or a step file) rather than
answered with every field the expected schema misses and every key it does not take.

A user trial: a calibration profile given as `--model`, a sweep file as `--calibration` and a model file as
`--steps` each printed a paragraph of a dozen "Field required" / "Extra inputs are not permitted" errors, where
`catalog.read_yaml` already named a cluster file given as `--model`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

KINDS: Final = ("model", "cluster", "accelerator", "sweep", "profile", "steps")

WORDS: Final = {"model": "a model file", "cluster": "a cluster file", "accelerator": "an accelerator file",
                "sweep": "a sweep file", "profile": "a calibration profile", "steps": "a step file"}
"""What each kind is called in a message."""

WHERE: Final = {"model": "--model (or a sweep workload's `model:`)",
                "cluster": "--cluster (or a sweep design's `cluster:`)",
                "accelerator": "a cluster file's `accelerator:`",
                "sweep": "`placement sweep FILE`",
                "profile": "--calibration",
                "steps": "calibrate --steps or validate --runs"}
"""Where a file of each kind goes."""

OWNER: Final = {"model": "a model's", "cluster": "a cluster's", "accelerator": "an accelerator's",
                "sweep": "a sweep file's", "profile": "a calibration profile's", "steps": "a measured run's"}


def _fields(kind: str) -> frozenset[str]:
    # imported here: the schemas import the loaders
    if kind == "model":
        from placement.specs import ModelSpec as schema
    elif kind == "cluster":
        from placement.specs import ClusterSpec as schema
    elif kind == "accelerator":
        from placement.specs import AcceleratorSpec as schema
    elif kind == "sweep":
        from placement.sweep.spec import SweepSpec as schema
    elif kind == "profile":
        from placement.calibration.profile import CalibrationProfile as schema
    else:
        from placement.calibration.steps import StepEntry as schema
    return frozenset(schema.model_fields)


def kind_of(data: object, expected: str, among: tuple[str, ...] = KINDS) -> str | None:
    """The kind in `among`, other than `expected`, that `data` (a parsed YAML document) plainly is, or None: a
    mapping every key of which is a field of that kind, fewer than half of them a field of `expected`'s
    (catalog.read_yaml's rule).  A list is a step file's form only (a list of measured runs): one whose first item
    is a measured run's mapping is a step file where another kind is expected."""
    if isinstance(data, list):
        if expected == "steps" or "steps" not in among or not data:
            return None
        item, candidates = data[0], ("steps",)
    else:
        item, candidates = data, tuple(k for k in among if k != expected)
    if not isinstance(item, dict):
        return None
    keys = {k for k in item if isinstance(k, str)}
    if not keys or len(keys) != len(item):
        return None
    mine = keys & _fields(expected)
    return next((kind for kind in candidates if keys <= _fields(kind) and len(mine) * 2 < len(keys)), None)


def wrong_kind(path: Path | str, data: object, expected: str, among: tuple[str, ...] = KINDS) -> str | None:
    """The message for a file of another kind (of `among`) given where a file of kind `expected` goes, or None where
    `data` is not plainly another kind."""
    other = kind_of(data, expected, among)
    if other is None:
        return None
    item = data[0] if isinstance(data, list) else data
    keys = sorted(map(str, item))
    return (f"{path} is {WORDS[other]} (its fields {', '.join(keys[:4])}{' ...' if len(keys) > 4 else ''} are "
            f"{OWNER[other]}), not {WORDS[expected]}; give it as {WHERE[other]}, and "
            f"{WORDS[expected]} here")
