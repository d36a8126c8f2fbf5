"""The step a Megatron-LM training log measured, set beside the audit's estimate of the job as launched.

Megatron-LM prints one iteration line every `--log-interval` iterations (megatron/training/training.py
`training_log`, core_r0.10.0 lines 998-1063; the same fields in core_v0.19.0, lines 2825-2897)::

     [2025-03-02 10:41:07] iteration      100/  500000 | consumed samples: 102400 | elapsed time per iteration (ms):
     4301.2 | learning rate: ... | global batch size:  1024 | lm loss: ... | loss scale: 1.0 | grad norm: 0.812 |
     number of skipped iterations:   0 | number of nan iterations:   0 |

- `elapsed time per iteration (ms)` is the `interval-time` timer since the previous line over the iterations it ran,
  advanced plus skipped (lines 906-907, 999-1000): a mean over the interval.  The timer is stopped around evaluation
  (lines 1499-1524) and checkpoint saves (`save_checkpoint_and_time`, lines 1129 and 1160), so neither is in it.
- `number of skipped iterations` counts the iterations whose optimizer step did not run: `train_step` sets
  `skipped_iter = 1` where `optimizer.step()` reports no successful update (lines 787-803), which is what a
  loss-scale overflow does (megatron/core/optimizer/optimizer.py core_r0.10.0 lines 409-417: the grad scaler backs
  off on a found inf; 449-451: the step returns unsuccessful).  `number of nan iterations` counts those of them whose
  loss was NaN or infinite (training.py lines 857-870).  Such an interval timed iterations with no optimizer step:
  it is left out.
- `global batch size` is the step's batch: under `--rampup-batch-size` the early intervals run smaller steps than the
  job's, and are left out.

The intervals are read by `placement calibrate --steps`'s own parser (calibration.steps.megatron_steps) and the
warm-up is left out as it leaves it out (calibration.steps.after_warmup: every interval after the first); the step
is their median, the spread their quartiles and range.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from pydantic import Field

from placement.calibration.steps import after_warmup, megatron_steps, read_log_lines
from placement.specs._base import Frozen

FAR_FROM_ESTIMATE = 1.25
"""Measured / estimated step (or its inverse) above which the audit says the estimate does not describe the job: each
published run `placement validate` prices is priced within it either way (the README's accuracy tables give the
errors), and `calibrate` warns of a class of measurements its fit still misses by a quarter
(calibration.calibrate.UNEXPLAINED)."""
ITERATION_NUMBER = re.compile(r"\biteration\s+(\d+)\s*/")
"""The `iteration N/ M |` label of an iteration line (training.py core_r0.10.0 line 1015)."""


class MeasuredStep(Frozen):
    """A Megatron-LM log's measured step beside the estimate of the job as launched (`audit --json`'s
    `measured_step`)."""

    log: str
    step_time_s: float | None = Field(default=None, ge=0)
    """The median of the counted intervals' `elapsed time per iteration`; None where no interval is left to count."""
    num_intervals: int = Field(ge=0)
    """Logged intervals counted (each one line, the mean of `--log-interval` iterations)."""
    iterations: tuple[int, int] | None = None
    """The iteration numbers of the first and last counted lines."""
    lines: tuple[int, int] | None = None
    """Their line numbers in the log."""
    quartiles_s: tuple[float, float] | None = None
    """25th and 75th percentiles of the counted intervals."""
    range_s: tuple[float, float] | None = None
    """Fastest and slowest counted interval."""
    warmup_lines: tuple[int, ...] = ()
    """The first usable interval's line, left out as warm-up."""
    skipped_lines: tuple[int, ...] = ()
    """Intervals with skipped (loss-scale overflow) or NaN iterations, left out."""
    other_batch_lines: tuple[int, ...] = ()
    """Intervals at another global batch than the job's (a batch ramp-up), left out."""
    estimate_step_time_s: float = Field(gt=0)
    """Placement's estimate of the job as launched (`estimate.step_time_s`)."""
    gap: float | None = None
    """measured / estimate - 1: above 0 the job runs slower than priced."""
    far: bool = False
    """The measured step is more than FAR_FROM_ESTIMATE times the estimate, or less than its inverse."""

    def summary(self) -> str:
        """The text report's lines, under the estimate's step line."""
        left_out = self._left_out()
        if self.step_time_s is None or self.gap is None:
            return (f"measured step: none counted in {self.log} ({left_out or 'no usable interval'}); placement's "
                    f"estimate of the job as launched is {self.estimate_step_time_s:.3f} s")
        span = "" if self.iterations is None else f"iterations {self.iterations[0]}-{self.iterations[1]}, "
        lo, hi = self.lines or (0, 0)
        q1, q3 = self.quartiles_s or (self.step_time_s, self.step_time_s)
        fastest, slowest = self.range_s or (self.step_time_s, self.step_time_s)
        text = (f"measured step {self.step_time_s:.3f} s ({self.log}), {abs(self.gap):.1%} "
                f"{'above' if self.gap >= 0 else 'below'} placement's estimate of {self.estimate_step_time_s:.3f} s "
                f"for the job as launched\n"
                f"  the median of {self.num_intervals} logged interval{'s' if self.num_intervals != 1 else ''}' "
                f"`elapsed time per iteration` ({span}lines {lo}-{hi}; quartiles {q1:.3f}-{q3:.3f} s, range "
                f"{fastest:.3f}-{slowest:.3f} s)" + (f"; left out: {left_out}" if left_out else ""))
        if not self.far:
            return text
        apart = self.step_time_s - self.estimate_step_time_s
        ratio, unsaid = ((f"{self.step_time_s / self.estimate_step_time_s:.2f}x it",
                          f"the estimate does not account for {apart:.3f} s of the measured step") if apart > 0 else
                         (f"1/{self.estimate_step_time_s / self.step_time_s:.2f} of it",
                          f"the estimate prices {-apart:.3f} s a step that the job does not spend"))
        return (text + f"\n  far from the estimate: the measured step is {ratio}, beyond the {FAR_FROM_ESTIMATE:g}x "
                f"that placement's estimates of the published runs it validates stay within; {unsaid}, and the "
                f"findings' savings below are priced on the estimate, not measured")

    def _left_out(self) -> str:
        parts = []
        if self.warmup_lines:
            parts.append(f"the first usable interval (line {self.warmup_lines[0]}) as warm-up")
        for lines, why in ((self.skipped_lines, "with skipped or NaN iterations, no optimizer step there"),
                           (self.other_batch_lines, "at another global batch, a batch ramp-up")):
            if lines:
                shown = ", ".join(map(str, lines[:6])) + (", ..." if len(lines) > 6 else "")
                parts.append(f"{len(lines)} interval{'s' if len(lines) != 1 else ''} {why} (line"
                             f"{'s' if len(lines) != 1 else ''} {shown})")
        return "; ".join(parts)


def measured_step(log: Path, lines: list[str], global_batch: int, estimate_s: float) -> MeasuredStep | None:
    """The step `lines` (a Megatron-LM log's, `read_log_lines`) measured at the job's `global_batch`, beside the
    estimate; None where the log has no iteration line (nothing to say)."""
    kept, skipped, ramp = megatron_steps(lines, global_batch, log)
    if not (kept or skipped or ramp):
        return None
    counted = after_warmup(kept)
    base = {"log": str(log), "num_intervals": len(counted), "warmup_lines": tuple(n for _, n in kept[:1]),
            "skipped_lines": tuple(skipped), "other_batch_lines": tuple(n for n, _ in ramp),
            "estimate_step_time_s": estimate_s}
    if not counted:
        return MeasuredStep(**base)
    times = [t for t, _ in counted]
    step_s = statistics.median(times)
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else (step_s,) * 3
    ratio = step_s / estimate_s
    first, last = (ITERATION_NUMBER.search(lines[n - 1]) for n in (counted[0][1], counted[-1][1]))
    return MeasuredStep(**base, step_time_s=_r(step_s),
                        iterations=(int(first.group(1)), int(last.group(1))) if first and last else None,
                        lines=(counted[0][1], counted[-1][1]), quartiles_s=(_r(q1), _r(q3)),
                        range_s=(_r(min(times)), _r(max(times))), gap=round(ratio - 1.0, 6),
                        far=not 1 / FAR_FROM_ESTIMATE <= ratio <= FAR_FROM_ESTIMATE)


def _r(seconds: float) -> float:
    """6 significant digits, as the estimate's step_time_s prints (a log's times have 4 or 5)."""
    return float(f"{seconds:.6g}")


def logged_step(paths: list[Path], global_batch: int, estimate_s: float) -> MeasuredStep | None:
    """The measured step of the first Megatron-LM log among the launch files that has iteration lines (None: none
    has, and the audit says nothing of a measurement)."""
    from placement.audit.readers.dispatch import file_kind

    for path in paths:
        if file_kind(path) == "megatron-log":
            found = measured_step(path, read_log_lines(path), global_batch, estimate_s)
            if found is not None:
                return found
    return None
