"""A calibration profile: the cost model's free constants fitted to one cluster's measurements.

`placement calibrate` writes it; `--calibration PROFILE` on plan, evaluate, audit, sweep and validate prices
with it.  Every constant the profile can set is a field of the hardware specs (so a calibrated topology is
the same cost model with other inputs, nothing global changes):

- `scale_up_efficiency`, `scale_up_latency_s`: the NVLink level's collective efficiency and per-hop latency
  (ClusterSpec.scale_up);
- `network_efficiency`, `network_latency_s`: the NIC's collective efficiency and the switch tiers' per-hop
  latency (ClusterSpec.nic_collective_efficiency, SwitchTier.latency_s: the first tier's value, the others
  keep their ratio to it);
- `matmul_efficiency_bf16`, `matmul_efficiency_fp8`: GEMM ceiling over peak, and `gemm_half_efficiency_dim`,
  the GEMM dimension at which a shape reaches half of it (AcceleratorSpec);
- `hierarchical_serial_share`: how far a multi-level collective's levels add up rather than overlap
  (ClusterSpec);
- `host_s_per_kernel`: CPU time per launched kernel (ClusterSpec);
- `overlap_compute_slowdown`: compute lost beside overlapped communication (AcceleratorSpec);
- `speed_variability`: the spread of sustained speed among the cluster's GPUs, which a step waits on at its slowest
  GPU (AcceleratorSpec; cost.step.variability_s): measured steps at GPU counts far apart fit it.

A constant the measurements could not identify keeps its default and says so (`identified: false`).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Final, Literal

from annotated_types import Ge, Gt, Le
from pydantic import Field, ValidationError, model_validator

from placement.cost import constants as C
from placement.errors import InputError
from placement.loaders.errors import format_validation_error
from placement.loaders.files import parse_yaml, read_text, yaml_kind
from placement.loaders.kinds import wrong_kind
from placement.specs import AcceleratorSpec, ClusterSpec
from placement.specs._base import Frozen
from placement.specs.hardware import ScaleUpSpec, SwitchTier
from placement.topology import Topology

NETWORK_CONSTANTS: Final = ("scale_up_efficiency", "scale_up_latency_s", "network_efficiency", "network_latency_s",
                            "hierarchical_serial_share")
UNITS: Final = {
    "scale_up_efficiency": "of nominal", "scale_up_latency_s": "s", "network_efficiency": "of nominal",
    "network_latency_s": "s", "hierarchical_serial_share": "of the summed levels",
    "matmul_efficiency_bf16": "of peak", "matmul_efficiency_fp8": "of peak", "host_s_per_kernel": "s",
    "overlap_compute_slowdown": "of compute", "gemm_half_efficiency_dim": "elements",
    "speed_variability": "of speed (one standard deviation)",
}
SPEC_FIELDS: Final = {
    "scale_up_efficiency": (ScaleUpSpec, "collective_efficiency"), "scale_up_latency_s": (ScaleUpSpec, "latency_s"),
    "network_efficiency": (ClusterSpec, "nic_collective_efficiency"), "network_latency_s": (SwitchTier, "latency_s"),
    "hierarchical_serial_share": (ClusterSpec, "hierarchical_serial_share"),
    "matmul_efficiency_bf16": (AcceleratorSpec, "matmul_efficiency_bf16"),
    "matmul_efficiency_fp8": (AcceleratorSpec, "matmul_efficiency_fp8"),
    "host_s_per_kernel": (ClusterSpec, "host_s_per_kernel"),
    "overlap_compute_slowdown": (AcceleratorSpec, "overlap_compute_slowdown"),
    "gemm_half_efficiency_dim": (AcceleratorSpec, "gemm_half_efficiency_dim"),
    "speed_variability": (AcceleratorSpec, "speed_variability"),
}
"""The hardware-spec field each constant sets: a profile value must pass that field's bounds, the same a cluster or
accelerator YAML must (a profile is those specs with other numbers, so it is checked as they are)."""


MEASURED_ABOVE_DATASHEET: Final = {"scale_up_efficiency": 1.5}
"""Upper bounds a profile may pass the spec's at: NVLink's collective efficiency measured past its datasheet
(in-switch reduction, NVLink SHARP, beats the ring formula); `placement calibrate` searches up to this and warns."""


def _limits(name: str) -> tuple[float | None, bool, float | None]:
    """(low, low is exclusive, high) of profile constant `name`, from its spec field's own constraints."""
    spec, field = SPEC_FIELDS[name]
    low, strict, high = None, False, None
    for c in spec.model_fields[field].metadata:
        if isinstance(c, Gt):
            low, strict = c.gt, True
        elif isinstance(c, Ge):
            low = c.ge
        elif isinstance(c, Le):
            high = c.le
    return low, strict, MEASURED_ABOVE_DATASHEET.get(name, high)


def bounds_of(name: str) -> str:
    """What profile constant `name` may be, in words: "0 < value <= 1 (ScaleUpSpec.latency_s)"."""
    low, strict, high = _limits(name)
    spec, field = SPEC_FIELDS[name]
    text = " ".join(part for part in (
        None if low is None else f"{_number(low)} {'<' if strict else '<='}", "value",
        None if high is None else f"<= {_number(high)}") if part)
    above = ", its datasheet bound widened to what NVLink SHARP measures" if name in MEASURED_ABOVE_DATASHEET else ""
    return f"{text} ({spec.__name__}.{field}{above})"


def _number(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def out_of_bounds(name: str, value: float) -> bool:
    low, strict, high = _limits(name)
    return bool((low is not None and (value <= low if strict else value < low)) or (high is not None and value > high))


class Constant(Frozen):
    default: float
    """The value the cost model uses without the profile (catalog or cost.constants)."""
    value: float
    """The fitted value (the default when not identified)."""
    stderr: float | None = None
    """One standard error of the fit (None: not identified, or no degrees of freedom left)."""
    identified: bool
    unit: str
    note: str = ""
    """Why it was not identified, or which measurement drives it most."""
    fitted_value: float | None = None
    """The value the fit gave (None: not identified, or a profile written before this was recorded): a `value` other
    than it was edited after the fit, and is said to be (a user trial: a hand-set value was shown as fitted, with the
    fit's note and standard error)."""


class Residual(Frozen):
    measurement: str
    """What was measured and where (file:line)."""
    kind: Literal["nccl", "gemm", "step"]
    group: str = ""
    """The input it belongs to (an nccl-tests file, the GEMM table, a step run)."""
    unit: str
    measured: float
    before: float
    """The cost model's prediction with the defaults."""
    after: float
    """With the profile."""
    regime: Literal["latency", "bandwidth", "mixed"] | None = None
    """For an nccl-tests row: latency-bound, bandwidth-bound or in between, as the fitted model prices it (the
    class the fit used it in; None for other measurements)."""


class HeldOut(Frozen):
    measurement: str
    measured: float
    before: float
    """Prediction with the defaults."""
    held_out: float
    """Prediction with the constants fitted on every other step measurement."""


class CalibrationProfile(Frozen):
    profile_version: Literal[1] = 1
    placement_version: str
    cluster: str
    """The cluster design the measurements ran on (catalog name or file)."""
    accelerator: str
    design: dict[str, float | int | str] | None = None
    """The cluster design the constants were fitted on (`design_of`): the fields a profile's constants are shares
    of, compared with the cluster it is applied to (None: a profile written before it was recorded)."""
    constants: dict[str, Constant]
    measurements: tuple[Residual, ...] = ()
    leave_one_out: tuple[HeldOut, ...] = ()
    warnings: tuple[str, ...] = ()
    inputs: tuple[str, ...] = Field(default=())
    """The files the fit read."""

    @model_validator(mode="after")
    def _check_constants(self) -> CalibrationProfile:
        unknown = sorted(set(self.constants) - set(UNITS))
        if unknown:
            raise ValueError(f"constants {unknown}: not constants a profile sets ({sorted(UNITS)}); remove them or "
                             f"re-run `placement calibrate`")
        for name, c in self.constants.items():
            for key in ("default", "value"):
                value = getattr(c, key)
                if out_of_bounds(name, value):
                    raise ValueError(
                        f"constants.{name}.{key} = {value:g} {c.unit}: out of bounds; the cost model takes "
                        f"{bounds_of(name)}, the bound a cluster or accelerator YAML has, and a value outside it "
                        f"prices nonsense (negative or overflowing step times); re-run `placement calibrate` or set "
                        f"it within the bounds")
        return self

    def fitted(self) -> dict[str, float]:
        """The identified constants (the others stay what the catalog says)."""
        return {k: c.value for k, c in self.constants.items() if c.identified}

    def ignored(self) -> dict[str, float]:
        """Constants the fit did not identify whose value is not their default: priced at the default all the same
        (name -> the value the file gives)."""
        return {k: c.value for k, c in self.constants.items() if not c.identified and c.value != c.default}

    def edited(self) -> dict[str, float | None]:
        """Constants priced at a value the fit did not give: name -> the fit's value (None: the fit did not identify
        it, and the file was set to `identified: true` by hand)."""
        return {k: c.fitted_value for k, c in self.constants.items() if c.identified and (
            (c.fitted_value is not None and c.value != c.fitted_value) or c.note.startswith("not identified"))}


def defaults(topo: Topology) -> dict[str, float]:
    """Every profile constant as `topo` prices it without a profile."""
    return _defaults(topo.cluster, topo.accelerator)


def _defaults(c: ClusterSpec, a: AcceleratorSpec) -> dict[str, float]:
    return {
        "scale_up_efficiency": c.scale_up.collective_efficiency,
        "scale_up_latency_s": c.scale_up.latency_s,
        "network_efficiency": c.nic_collective_efficiency,
        "network_latency_s": c.tiers[0].latency_s,
        "hierarchical_serial_share": c.hierarchical_serial_share,
        "matmul_efficiency_bf16": a.matmul_efficiency_bf16,
        "matmul_efficiency_fp8": a.matmul_efficiency_fp8 or a.matmul_efficiency_bf16,
        "host_s_per_kernel": c.host_s_per_kernel or C.HOST_S_PER_KERNEL,
        "overlap_compute_slowdown": (C.OVERLAP_COMPUTE_SLOWDOWN if a.overlap_compute_slowdown is None
                                     else a.overlap_compute_slowdown),
        "gemm_half_efficiency_dim": a.gemm_half_efficiency_dim,
        "speed_variability": a.speed_variability,
    }


def _specs(cluster: ClusterSpec, acc: AcceleratorSpec, old: dict[str, float], values: dict[str, float]
           ) -> tuple[ClusterSpec, AcceleratorSpec]:
    new = old | values
    su = cluster.scale_up.model_copy(update={"collective_efficiency": new["scale_up_efficiency"],
                                             "latency_s": new["scale_up_latency_s"]})
    lat_ratio = new["network_latency_s"] / old["network_latency_s"]
    tiers = tuple(t.model_copy(update={"latency_s": t.latency_s * lat_ratio}) for t in cluster.tiers)
    cluster = cluster.model_copy(update={"scale_up": su, "tiers": tiers, "host_s_per_kernel": new["host_s_per_kernel"],
                                         "hierarchical_serial_share": new["hierarchical_serial_share"],
                                         "nic_collective_efficiency": new["network_efficiency"]})
    acc = acc.model_copy(update={"matmul_efficiency_bf16": new["matmul_efficiency_bf16"],
                                 "matmul_efficiency_fp8": (new["matmul_efficiency_fp8"] if acc.matmul_efficiency_fp8
                                                           or "matmul_efficiency_fp8" in values else None),
                                 "overlap_compute_slowdown": new["overlap_compute_slowdown"],
                                 "gemm_half_efficiency_dim": new["gemm_half_efficiency_dim"],
                                 "speed_variability": new["speed_variability"]})
    return cluster, acc


def _check(values: dict[str, float]) -> None:
    unknown = set(values) - set(UNITS)
    if unknown:
        raise InputError(f"calibration constants {sorted(unknown)}: unknown; the profile sets {sorted(UNITS)}")


def calibrated_specs(cluster: ClusterSpec, acc: AcceleratorSpec, values: dict[str, float]
                     ) -> tuple[ClusterSpec, AcceleratorSpec]:
    """A cluster design and its accelerator carrying `values` (what a sweep plans on)."""
    _check(values)
    return _specs(cluster, acc, _defaults(cluster, acc), values)


def with_constants(topo: Topology, values: dict[str, float]) -> Topology:
    """`topo` priced with `values` (any subset of the profile constants): its specs carry them and its
    levels are rescaled to them (a real allocation's levels too: each level's bandwidth by the efficiency
    ratio, its latency by the latency ratio)."""
    if not values:
        return topo
    _check(values)
    old = defaults(topo)
    new = old | values
    other = copy.copy(topo)
    other.cluster, other.accelerator = _specs(topo.cluster, topo.accelerator, old, values)
    up_bw = new["scale_up_efficiency"] / old["scale_up_efficiency"]
    up_lat = new["scale_up_latency_s"] / old["scale_up_latency_s"]
    net_bw = new["network_efficiency"] / old["network_efficiency"]
    net_lat = new["network_latency_s"] / old["network_latency_s"]
    other.levels = tuple(
        dataclasses.replace(lv, bandwidth_bytes_per_s=lv.bandwidth_bytes_per_s * (up_bw if j == 0 else net_bw),
                            latency_s=lv.latency_s * (up_lat if j == 0 else net_lat))
        for j, lv in enumerate(topo.levels))
    other._span_cache = {}
    return other


DESIGN_FIELDS: Final = {"gpus_per_node": "GPUs per node", "scale_up_name": "scale-up fabric",
                         "scale_up_size": "scale-up domain (GPUs)",
                         "scale_up_bandwidth_bytes_per_s": "scale-up bandwidth per GPU (B/s)",
                         "nic_bandwidth_bytes_per_s": "NIC bandwidth per GPU (B/s)", "tiers": "switch tiers"}
"""The fields of a cluster design its fitted constants depend on: an efficiency is a share of a nominal bandwidth,
a latency is per hop of a given fabric."""


def design_of(cluster: ClusterSpec) -> dict[str, float | int | str]:
    return {"gpus_per_node": cluster.gpus_per_node, "scale_up_name": cluster.scale_up.name,
            "scale_up_size": cluster.scale_up.size,
            "scale_up_bandwidth_bytes_per_s": cluster.scale_up.bandwidth_bytes_per_s,
            "nic_bandwidth_bytes_per_s": cluster.nic_bandwidth_bytes_per_s, "tiers": len(cluster.tiers)}


def design_differences(profile: CalibrationProfile, cluster: ClusterSpec) -> str | None:
    """A warning when the profile was fitted on a design other than `cluster`'s (same accelerator, other node or
    fabric): its efficiencies are shares of the other design's bandwidths, so they price this one wrongly."""
    if profile.design is None:
        if profile.cluster != cluster.name:
            return (f"calibration profile fitted on {profile.cluster}, applied to {cluster.name}; the profile does "
                    f"not record its cluster's design (written by an older placement), so whether their NICs and "
                    f"nodes match is unchecked; re-run `placement calibrate` to record it")
        return None
    here = design_of(cluster)
    diff = [f"{DESIGN_FIELDS.get(k, k)} {v:g} there, {here[k]:g} here" if isinstance(v, (int, float))
            and isinstance(here.get(k), (int, float)) else f"{DESIGN_FIELDS.get(k, k)} {v} there, {here.get(k)} here"
            for k, v in profile.design.items() if k in here and here[k] != v]
    if not diff:
        return None
    return (f"calibration profile fitted on {profile.cluster}, applied to {cluster.name}, a design that differs: "
            f"{'; '.join(diff)}; its efficiencies are shares of the other design's bandwidths and its latencies "
            f"per hop of its fabric, so this plan is priced with constants of another machine; calibrate on "
            f"this cluster")


def calibrated(topo: Topology, profile: CalibrationProfile | None) -> Topology:
    """`topo` with the profile's fitted constants; the profile must come from the same accelerator."""
    if profile is None:
        return topo
    if profile.accelerator != topo.accelerator.name:
        raise InputError(
            f"calibration profile: fitted on {profile.accelerator} ({profile.cluster}) but this job runs on "
            f"{topo.accelerator.name} ({topo.cluster.name}); calibrate on this cluster or drop --calibration"
        )
    return with_constants(topo, profile.fitted())


def load_profile(path: Path | str) -> CalibrationProfile:
    """A profile file written by `placement calibrate`; a bad one names the file and the field."""
    path = Path(path)
    text = read_text(path, "calibration profile", "give the YAML file `placement calibrate --out` wrote")
    data = parse_yaml(text, path, "calibration profile")
    other = wrong_kind(path, data, "profile")  # a model, cluster, sweep or step file given as --calibration
    if other is not None:
        raise InputError(other)
    if not isinstance(data, dict):
        raise InputError(f"calibration profile `{path}`: expected a mapping of profile fields, found "
                         f"{yaml_kind(data)}; give the file `placement calibrate --out` wrote")
    try:
        return CalibrationProfile.model_validate(data)
    except ValidationError as err:
        raise InputError(format_validation_error(err, f"calibration profile `{path}`")) from None


def constant_warnings(profile: CalibrationProfile) -> list[str]:
    """The profile's warnings about a constant it sets (implausible, far from its default, at a bound: calibrate's
    `NAME = VALUE ...` lines), which every command pricing with it repeats (a user trial: a B200 network latency
    64x its default was warned at calibration, then applied by `plan` in silence)."""
    fitted = profile.fitted()
    return [w for w in profile.warnings if any(w.startswith(f"{name} = ") for name in fitted)]


def summary(profile: CalibrationProfile, path: str) -> dict:
    """What PLAN JSON says about the profile it priced with."""
    return {"path": path, "cluster": profile.cluster, "accelerator": profile.accelerator,
            "constants": profile.fitted(), "constant_warnings": constant_warnings(profile),
            "edited_after_fit": profile.edited(), "not_applied": profile.ignored()}
