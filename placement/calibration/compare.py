"""`placement validate --calibration PROFILE [--runs FILE]`: each run's error with and without the profile.

Without --runs the runs are the published ones on the profile's accelerator; with --runs they are the user's
own (the step formats of `placement calibrate`), on --cluster or the profile's cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from placement.calibration.profile import CalibrationProfile, calibrated
from placement.calibration.steps import StepRun, read_steps
from placement.calibration.validate import CalibrationRun, RunResult, load_runs, predict, run_topology
from placement.catalog import load_accelerator, load_cluster, load_model
from placement.errors import InputError


@dataclass(frozen=True)
class Compared:
    run: CalibrationRun
    measured_s: float
    default_s: float | None
    calibrated_s: float | None
    priced: RunResult | None = None
    """The default prediction: its layout, recipe and the fields the search filled (what the row assumes)."""

    @staticmethod
    def _error(pred: float | None, measured: float) -> float | None:
        return None if pred is None else (pred - measured) / measured

    @property
    def error_default(self) -> float | None:
        return self._error(self.default_s, self.measured_s)

    @property
    def error_calibrated(self) -> float | None:
        return self._error(self.calibrated_s, self.measured_s)

    @property
    def off_scale(self) -> str | None:
        """Why the summary leaves the run out: its measured step STEP_SCALE_LIMIT times off the price either way, a
        unit slip (milliseconds for seconds) or another job's number, which `calibrate` refuses (a user trial: a
        2,050 s step was averaged in at -99.9 %); None where it is not."""
        from placement.calibration.calibrate import step_off_scale

        return None if self.default_s is None else step_off_scale(self.measured_s, self.default_s)


def compare_runs(profile: CalibrationProfile | None, files: list[Path], cluster_ref: str | None) -> list[Compared]:
    if files:
        ref = cluster_ref or (profile.cluster if profile is not None else None)
        if ref is None:
            raise InputError("validate --runs: give the cluster the runs ran on (--cluster) or a --calibration "
                             "profile that names it")
        cluster = load_cluster(ref)
        acc = load_accelerator(cluster.accelerator)
        runs: list[StepRun] = [s for f in files for s in read_steps(f, ref)]
        pairs = [(s.run, s.model, (cluster, acc)) for s in runs]
    else:
        mine = [r for r in load_runs() if load_cluster(r.cluster).accelerator == profile.accelerator]
        if not mine:
            raise InputError(f"validate --calibration: no published run is on {profile.accelerator}, the profile's "
                             f"accelerator; give your own runs with --runs")
        pairs = [(r, load_model(r.model), None) for r in mine]
    out = []
    for run, model, hw in pairs:
        topo = run_topology(run, *hw) if hw else run_topology(run)
        priced = predict(run, model, topo)
        tuned = predict(run, model, calibrated(topo, profile)).predicted_step_time_s if profile else None
        out.append(Compared(run, run.published_step_time_s, priced.predicted_step_time_s, tuned, priced))
    return out


def summary(rows: list[Compared]) -> dict[str, dict | None]:
    """Per price ("default", "calibrated"): mean and max |error| over the runs it priced, and their count; None
        where it priced none (no profile, or no run fits)."""
    out: dict[str, dict | None] = {}
    left_out = [c.run.id for c in rows if c.off_scale]
    for name, attr in (("default", "error_default"), ("calibrated", "error_calibrated")):
        errs = [abs(getattr(c, attr)) for c in rows if getattr(c, attr) is not None and not c.off_scale]
        priced = any(getattr(c, attr) is not None for c in rows)
        out[name] = ({"mean_abs_error": sum(errs) / len(errs), "max_abs_error": max(errs), "runs": len(errs),
                      "left_out": left_out} if errs else
                     # every priced run left out: the ids stay (a review found them dropped with the summary)
                     {"mean_abs_error": None, "max_abs_error": None, "runs": 0, "left_out": left_out}
                     if priced and left_out else None)
    return out


def compare_json(rows: list[Compared]) -> dict:
    def provenance(c: Compared) -> dict:
        p = c.priced
        return {"fits": p.fits if p else None, "layout": p.layout if p else None, "recipe": p.recipe if p else None,
                "searched": p.searched if p else None,
                "searched_least_memory": p.least_memory if p else None, "assumptions": c.run.assumptions or None,
                "no_price_reason": p.why if p else None, "left_out_reason": c.off_scale}

    return {"runs": [{"id": c.run.id, "source": c.run.citation, "measured_step_time_s": c.measured_s,
                      "predicted_step_time_s": c.default_s, "error": c.error_default,
                      "calibrated_step_time_s": c.calibrated_s, "calibrated_error": c.error_calibrated,
                      **provenance(c)}
                     for c in rows],
            "summary": summary(rows)}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1%}"


def compare_table(rows: list[Compared], profile_path: str | None) -> str:
    lines = [f"{'run':<60} {'measured s':>10} {'default s':>10} {'error':>7} {'calibrated s':>12} {'error':>7}"]
    for c in rows:
        label = c.run.id if len(c.run.id) <= 60 else c.run.id[:57] + "..."
        default = f"{c.default_s:.3f}" if c.default_s is not None else "no price"
        tuned = f"{c.calibrated_s:.3f}" if c.calibrated_s is not None else "-"
        lines.append(f"{label:<60} {c.measured_s:>10.3f} {default:>10} {_pct(c.error_default):>7} {tuned:>12} "
                     f"{_pct(c.error_calibrated):>7}")
    for name, s in summary(rows).items():
        if s is not None and s["runs"]:
            lines.append(f"{name}: mean |error| {s['mean_abs_error']:.1%}, max {s['max_abs_error']:.1%} over "
                         f"{s['runs']} runs")
    from placement.report import searched_text

    for c in rows:
        if c.priced is not None and c.priced.why:
            lines.append(f"no price: {c.run.id}: {c.priced.why}")
        p = c.priced
        if p is not None and c.default_s is not None and p.searched:
            # a user trial: the JSON named the ZeRO stage, recompute and micro-batch the search chose for a run whose
            # file left them open, and the table printed the price with no word of them
            fastest = {k: v for k, v in p.searched.items() if k not in (p.least_memory or {})}
            if fastest:
                lines.append(f"searched: {c.run.id}: {searched_text(fastest)} (not stated by the run; priced at the "
                             f"fastest legal value: a run that ran another is slower than its row)")
            if p.least_memory:
                lines.append(f"searched: {c.run.id}: {searched_text(p.least_memory)} (not stated by the run; no value "
                             f"fits the memory model, so priced at the one it puts lowest, not the fastest)")
        if p is not None and c.default_s is not None and not p.fits and p.peak_memory_gib is not None:
            lines.append(f"over capacity: {c.run.id}: the memory model puts it at {p.peak_memory_gib:.1f} GiB per GPU, "
                         f"over the {p.capacity_gib:.1f} GiB capacity; priced at its stated layout"
                         f"{', the searched fields above as said' if p.searched else ''} (if it ran, the model "
                         f"over-counts its memory; else check the layout)")
        if c.off_scale:
            lines.append(f"left out of the summary: {c.run.id}: {c.off_scale}")
    if profile_path:
        lines.append(f"calibration: {profile_path}")
    return "\n".join(lines)
