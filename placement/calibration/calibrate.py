"""`placement calibrate`: fit the cost model's free constants to one cluster's own measurements.

Two fits, in order, each by cost.calibration.fit (log residuals, bounds, identifiability, standard errors):

1. **Network** from nccl-tests outputs: the NVLink and network levels' collective efficiency and per-hop
   latency (`profile.NETWORK_CONSTANTS`), each file priced as the group it ran on (its hosts and ranks) by
   cost.collectives, the same functions that price a training step's collectives.
2. **Step** from measured training steps, with the network constants from (1) held: GEMM efficiency for the
   precisions the runs use, host time per kernel and the compute slowdown beside overlapped communication
   (`Calibration.step_names`).  Each run is priced exactly as `placement validate` prices a published run
   (layout and recipe pinned).  With two or more runs, every run is also predicted from a fit on the
   others (leave-one-out), the honest error of the fitted model.

A GEMM table (m, n, k, dtype, TFLOP/s) fits the GEMM ceiling and the shape efficiency's half dimension
(`gemm_half_efficiency_dim`) on its own, before the steps; the steps then keep them.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from placement import __version__
from placement.calibration.fit import FitResult, Param, fit, fit_steps
from placement.calibration.nccl_tests import NcclRun, predict_times, read_nccl_tests, run_topology
from placement.calibration.profile import (
    MEASURED_ABOVE_DATASHEET,
    NETWORK_CONSTANTS,
    UNITS,
    CalibrationProfile,
    Constant,
    HeldOut,
    Residual,
    defaults,
    with_constants,
)
from placement.calibration.steps import StepRun, read_steps
from placement.calibration.validate import predict
from placement.calibration.validate import run_topology as step_topology
from placement.cost.compute import GemmRate, gemm_time
from placement.errors import InputError
from placement.loaders.files import read_text
from placement.topology import Topology

BOUNDS = {"scale_up_efficiency": (0.02, MEASURED_ABOVE_DATASHEET["scale_up_efficiency"]),
          "network_efficiency": (0.02, 1.0),
          "hierarchical_serial_share": (0.01, 1.0),
          "scale_up_latency_s": (1e-8, 1e-3), "network_latency_s": (1e-8, 1e-3),
          "matmul_efficiency_bf16": (0.02, 1.0), "matmul_efficiency_fp8": (0.02, 1.0),
          "host_s_per_kernel": (1e-8, 1e-3), "overlap_compute_slowdown": (1e-4, 0.9),
          "gemm_half_efficiency_dim": (1.0, 16384.0)}
"""Search bounds: NVLink's collective efficiency may pass the datasheet (in-switch reduction, NVLink SHARP, beats
the ring formula) and is then flagged; a NIC and the GEMMs stop at theirs; latencies and host time in physical
ranges."""
DATASHEET = 1.0
"""An efficiency above this is above the datasheet peak: implausible, named in the warnings."""
PRIOR_WIDTH = {"scale_up_efficiency": 0.15, "network_efficiency": 0.15, "hierarchical_serial_share": 0.5,
               "scale_up_latency_s": 1.0, "network_latency_s": 1.0, "matmul_efficiency_bf16": 0.1,
               "matmul_efficiency_fp8": 0.1, "host_s_per_kernel": 0.5, "overlap_compute_slowdown": 0.5,
               "gemm_half_efficiency_dim": 0.5}
"""Prior spread at each default (log units): GEMM ceilings are measured (MAMF tables, about 10 %), collective
efficiencies are datasheet fractions (15 %), latencies, host time, overlap and shape constants are known to a
factor (50-100 %)."""
SHARES = frozenset({"hierarchical_serial_share"})
"""Constants whose bounds are physical (a share between 0 and 1): reaching one is no warning."""
PLAUSIBLE_LOW = 0.2
"""A fitted value below this share of its default is implausible (named in the warnings)."""


@dataclass(frozen=True)
class _Nccl:
    run: NcclRun
    topo: Topology
    stride: int
    measured: np.ndarray


def _identified(r: FitResult) -> dict[str, float]:
    return {k: v for k, v in r.values.items() if r.identified[k]}


def _params(names: Sequence[str], start: dict[str, float]) -> list[Param]:
    return [Param(n, start[n], *BOUNDS[n], PRIOR_WIDTH[n]) for n in names]


def _read_gemm(path: Path) -> list[tuple[float, float, float, str, float, int]]:
    """(m, n, k, dtype, TFLOP/s, line) rows of a GEMM benchmark CSV with those columns."""
    text = read_text(path, "GEMM table", "give a CSV with columns m,n,k,dtype,tflops")
    rows = list(csv.DictReader(text.splitlines()))
    need = {"m", "n", "k", "dtype", "tflops"}
    if not rows or not need <= set(rows[0]):
        raise InputError(f"GEMM table `{path}`: expected CSV columns {sorted(need)}, found "
                         f"{sorted(rows[0]) if rows else 'no rows'}")
    out = []
    for i, r in enumerate(rows, start=2):
        try:
            if any(r.get(c) is None for c in need):
                raise ValueError(f"{len(need)} columns needed, the row has fewer")
            dtype = r["dtype"].strip().lower()
            if dtype not in ("bf16", "fp8"):
                raise ValueError(f"dtype {r['dtype']!r} (bf16 or fp8)")
            m, n, k, tflops = (_positive(r, c) for c in ("m", "n", "k", "tflops"))
            out.append((m, n, k, dtype, tflops, i))
        except ValueError as err:
            raise InputError(f"GEMM table `{path}`:{i}: {err}; give numbers for m, n, k, tflops") from None
    return out


def _positive(row: dict[str, str], column: str) -> float:
    """A GEMM table cell that is a finite number above zero (a GEMM of no rows, or a rate that is negative or
    not a number, is no measurement: the fit divides by them)."""
    value = float(row[column])
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{column} = {row[column].strip()!r} must be a finite number above 0")
    return value


class Calibration:
    """The inputs of one calibration and the fits over them."""

    def __init__(self, base: Topology, cluster_name: str, nccl: Sequence[Path] = (), steps: Sequence[Path] = (),
                 gemm: Path | None = None) -> None:
        if not nccl and not steps and gemm is None:
            raise InputError("calibrate: nothing to fit; give nccl-tests outputs (--nccl), measured steps (--steps) "
                             "or a GEMM table (--gemm)")
        self.base = base
        self.cluster_name = cluster_name
        self.defaults = defaults(base)
        self.nccl: list[_Nccl] = []
        for path in nccl:
            run = read_nccl_tests(path)
            topo, (stride, _) = run_topology(run, base)
            self.nccl.append(_Nccl(run, topo, stride, np.array([r.time_s for r in run.rows])))
        self.steps: list[StepRun] = [s for path in steps for s in read_steps(Path(path), cluster_name)]
        self.gemm = _read_gemm(Path(gemm)) if gemm is not None else []
        fp8 = [line for *_, dtype, _, line in self.gemm if dtype == "fp8"]
        if fp8 and base.accelerator.peak_flops_fp8 is None:
            raise InputError(
                f"GEMM table `{gemm}`: line(s) {', '.join(map(str, fp8))} are fp8 GEMMs, but "
                f"{base.accelerator.name} has no FP8 peak (peak_flops_fp8 unset: no FP8 tensor cores), so they would "
                f"be fitted against its BF16 peak and move gemm_half_efficiency_dim, which BF16 plans share; remove "
                f"the fp8 rows or calibrate on the cluster that ran them")
        self.inputs = tuple(str(p) for p in (*nccl, *steps, *([gemm] if gemm else [])))

    # -- residual functions ------------------------------------------------------------------------

    def nccl_residual(self, values: dict[str, float]) -> np.ndarray:
        parts = [np.log(predict_times(n.run, with_constants(n.topo, values), n.stride) / n.measured)
                 for n in self.nccl]
        return np.concatenate(parts) if parts else np.zeros(0)

    def gemm_residual(self, values: dict[str, float]) -> np.ndarray:
        acc = self.base.accelerator
        out = []
        for m, n, k, dtype, tflops, _ in self.gemm:
            peak = acc.peak_flops_fp8 if dtype == "fp8" and acc.peak_flops_fp8 else acc.peak_flops_bf16
            rate = GemmRate(peak * values[f"matmul_efficiency_{dtype}"], values["gemm_half_efficiency_dim"])
            t = float(gemm_time(m, n, k, 1, rate))
            out.append(np.log(t / (2.0 * m * n * k / (tflops * 1e12))))  # log(predicted / measured seconds)
        return np.array(out)

    def step_times(self, values: dict[str, float], runs: Sequence[StepRun]) -> np.ndarray:
        out = []
        for s in runs:
            topo = with_constants(step_topology(s.run, self.base.cluster, self.base.accelerator), values)
            res = predict(s.run, s.model, topo)
            if res.predicted_step_time_s is None:
                raise InputError(f"measured run {s.run.id} ({s.run.citation}) does not fit in memory as the cost "
                                 f"model prices it, so it cannot calibrate; check its layout and recompute")
            out.append(res.predicted_step_time_s)
        return np.array(out)

    def step_residual(self, runs: Sequence[StepRun]) -> Callable[[dict[str, float]], np.ndarray]:
        measured = np.array([s.run.published_step_time_s for s in runs])
        return lambda values: np.log(self.step_times(values, runs) / measured)

    # -- the fits ----------------------------------------------------------------------------------

    def step_names(self) -> list[str]:
        """The step constants: the GEMM ceiling of each precision the runs use, host time, overlap slowdown."""
        precisions = sorted({s.run.precision.value for s in self.steps})
        return [*(f"matmul_efficiency_{p}" for p in precisions), "host_s_per_kernel", "overlap_compute_slowdown"]

    def run(self) -> CalibrationProfile:
        values = dict(self.defaults)
        fits: dict[str, FitResult] = {}  # by kind of measurement, in the order fitted
        if self.nccl:
            fits["nccl"] = fit(self.nccl_residual, _params(NETWORK_CONSTANTS, values))
            values |= _identified(fits["nccl"])
        if self.gemm:
            names = [f"matmul_efficiency_{d}" for d in sorted({g[3] for g in self.gemm})] + ["gemm_half_efficiency_dim"]
            fits["gemm"] = fit(lambda v: self.gemm_residual(values | v), _params(names, values))
            values |= _identified(fits["gemm"])
        held: list[HeldOut] = []
        if self.steps:
            fixed = dict(values)
            by_gemm = set(_identified(fits["gemm"])) if "gemm" in fits else set()
            names = [n for n in self.step_names() if n not in by_gemm]
            def residual_of(indices: Sequence[int]) -> Callable[[dict[str, float]], np.ndarray]:
                residual = self.step_residual([self.steps[i] for i in indices])
                return lambda v: residual(fixed | v)

            stepfit = fit_steps(residual_of, len(self.steps), _params(names, values))
            fits["step"] = stepfit.result
            values |= _identified(fits["step"])
            if stepfit.held_out is not None:  # residuals are log(predicted / measured)
                before = stepfit.result.residuals_before
                held = [HeldOut(measurement=f"{s.run.id} ({s.run.citation})", measured=s.run.published_step_time_s,
                                before=float(s.run.published_step_time_s * np.exp(before[i])),
                                held_out=float(s.run.published_step_time_s * np.exp(stepfit.held_out[i])))
                        for i, s in enumerate(self.steps)]
        return self._profile(values, fits, held)

    # -- the profile -------------------------------------------------------------------------------

    def _labels(self, kind: str) -> list[tuple[str, str]]:
        """(label, group) of each measurement of one fit."""
        if kind == "nccl":
            return [(f"{n.run.label}, {r.size_bytes:,} B ({n.run.path}:{r.line})", f"{n.run.path}: {n.run.label}")
                    for n in self.nccl for r in n.run.rows]
        if kind == "gemm":
            return [(f"GEMM {m:g}x{n:g}x{k:g} {d} (line {ln})", "GEMM table") for m, n, k, d, _, ln in self.gemm]
        return [(f"step {s.run.id} ({s.run.citation})", s.run.id) for s in self.steps]

    def _profile(self, values: dict[str, float], fits: dict[str, FitResult],
                 held: list[HeldOut]) -> CalibrationProfile:
        constants: dict[str, Constant] = {}
        warnings: list[str] = []
        residuals: list[Residual] = []
        for kind, r in fits.items():
            labels, groups = zip(*self._labels(kind), strict=True)
            for name, ok in r.identified.items():
                default = self.defaults[name]
                note = ""
                if ok:
                    driver = labels[r.driver[name]] if name in r.driver else ""
                    note = f"driven most by {driver}"
                    v = r.values[name]
                    low, high = BOUNDS[name]
                    problem = None
                    if name.endswith("_efficiency") and v > DATASHEET:
                        problem = f"is above the datasheet peak ({v:.0%} of nominal)"
                    elif name.endswith("_efficiency") and v < PLAUSIBLE_LOW * DATASHEET:
                        problem = f"is below {PLAUSIBLE_LOW:.0%} of the datasheet peak"
                    elif v < PLAUSIBLE_LOW * default:
                        problem = f"is below {PLAUSIBLE_LOW:.0%} of its default {default:.4g}"
                    elif r.at_bound[name] and name not in SHARES:
                        problem = f"sits at the bound of its search ({low:g}..{high:g})"
                    if problem:
                        warnings.append(f"{name} = {v:.4g} {problem}; driven most by {driver}: check that "
                                        f"measurement, or a cost the model does not have")
                else:
                    note = f"not identified: {r.why_not.get(name, '')}; kept at the default"
                if name in constants and not ok:
                    continue  # an earlier fit set it
                constants[name] = Constant(default=default, value=r.values[name] if ok else values.get(name, default),
                                           stderr=r.stderr.get(name) if ok else None, identified=ok,
                                           unit=UNITS[name], note=note)
            measured = self._measured(kind)
            for label, group, m, rb, ra in zip(labels, groups, measured, r.residuals_before, r.residuals_after,
                                               strict=True):
                residuals.append(Residual(measurement=label, kind=kind, group=group, unit="s", measured=float(m),
                                          before=float(m * np.exp(rb)), after=float(m * np.exp(ra))))
        for name, default in self.defaults.items():
            if name not in constants:
                constants[name] = Constant(default=default, value=default, identified=False,
                                           unit=UNITS[name],
                                           note="not identified: no measurement of its kind was given")
        if held:
            out_of_sample = float(np.mean([abs(h.held_out / h.measured - 1) for h in held]))
            default = float(np.mean([abs(h.before / h.measured - 1) for h in held]))
            if out_of_sample >= default:
                warnings.append(f"the step constants fitted on all but one run predict that run no better than the "
                                f"defaults (leave-one-out mean |error| {out_of_sample:.1%}, defaults {default:.1%}): "
                                f"what the runs miss is run by run, not a shared constant, so the step constants "
                                f"stay at their defaults; price with care")
        return CalibrationProfile(placement_version=__version__, cluster=self.cluster_name,
                                  accelerator=self.base.accelerator.name, constants=constants,
                                  measurements=tuple(residuals), leave_one_out=tuple(held),
                                  warnings=tuple(warnings), inputs=self.inputs)

    def _measured(self, kind: str) -> np.ndarray:
        if kind == "nccl":
            return np.concatenate([n.measured for n in self.nccl])
        if kind == "gemm":
            return np.array([2.0 * m * n * k / (t * 1e12) for m, n, k, _, t, _ in self.gemm])  # seconds per GEMM
        return np.array([s.run.published_step_time_s for s in self.steps])
