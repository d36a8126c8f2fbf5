"""Least-squares fit of the cost model's constants to measurements, with bounds, identifiability and errors.

Each constant is fitted as its logarithm (every one is a positive scale), starting from its default (and, for
microbenchmarks, from a grid across its range too: MULTI_START), within bounds (efficiencies at most 1, the
datasheet).  The residual of a measurement is log(predicted / measured),
so a 10 % miss weighs the same on a 1 ms collective and a 10 s step.  SciPy's trust-region reflective solver
(`scipy.optimize.least_squares`, method "trf") handles the bounds; its Jacobian at the optimum gives the
standard errors: cov = (J^T J)^-1 s^2 with s^2 the residual variance over m - p degrees of freedom.

Identifiability comes first, at the defaults: a constant whose column of the Jacobian is (near) zero does not
move any measurement and stays at its default; then, while J^T J is ill-conditioned or there are fewer
measurements than constants, the constant that moves the measurements least is dropped.  What is dropped is
reported with the reason; nothing is fitted that the data cannot pin down.  Last, the fit must beat the
defaults by more than its constants' price in Schwarz's criterion (k ln n), or the defaults stay: constants
that only chase noise would predict the next measurement worse than the defaults do.  Training steps face one
more test (`fit_steps`): fitted without each run in turn, the constants must predict that run better than the
defaults, on average, or the defaults stay.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

_STEP = 0.02
"""Relative step of the finite-difference Jacobian used for identifiability (2 % of each constant)."""
MIN_SENSITIVITY = 1e-3
"""A constant whose largest effect on a measurement's log residual per unit log change is below this moves
nothing the data shows: not identified."""
MIN_INDEPENDENT = 0.05
"""Share of a constant's effect on the measurements that must be its own (not a combination of constants
already fitted) for the data to tell it apart."""
STEP_SCALE = 0.05
"""How far one training step may sit from the model for reasons no constant explains (log units): the cost
model's typical error on a published run (validate's dense mean, about 5 %).  It weighs the priors against the
steps, and is the scale of their robust loss, so one run the model misses for its own reasons (a recipe it
does not price) cannot drag a constant far."""
MICROBENCHMARK_SCALE = 0.01
"""The same for nccl-tests and GEMM tables: repeatable to about 1 %, fitted with a plain (not robust) loss,
since what they miss is the model's own shape."""
MULTI_START = (0.2, 0.5, 0.8)
"""Where else a microbenchmark fit starts, as fractions of each free constant's log range, every combination beside
the defaults; the least misfit is kept (ties: the defaults' start).  A hierarchical collective's misfit in (network
efficiency, serial share) has two valleys: a user trial's files from a network 20 % slower than a healthy one, started
at the catalog's share of 1, stayed in the far valley (efficiency 0.953, above the healthy files' 0.832, misfit 80x
the near valley's) and made most multi-node files worse.  Steps keep the one start: each misfit prices every run,
and their priors and robust loss keep one valley."""
MAX_RELATIVE_STDERR = 0.5
"""A fitted constant whose standard error exceeds half its value (a share's: half its range, `Param.share`) is not
pinned down: dropped and refitted."""


@dataclass(frozen=True)
class Param:
    name: str
    default: float
    low: float
    high: float
    prior_width: float = 0.0
    """Spread of the prior at the default, in log units (0.1: the default is good to about 10 %); 0: none."""
    share: bool = False
    """A share between physical bounds (0 to 1): its standard error is weighed against the width of its range, not
    its value (a share fitted at 0.01 +/- 0.008 is pinned near none; relative to its value it looked loose)."""
    offset: float = 0.0
    """Fitted as log(value + offset), not log(value): a constant whose default or bound is 0 (a spread sigma, fitted
    as log(1 + sigma)); its prior width is then in those units (about sigma's own), and its standard error is weighed
    against its value or the prior's width, whichever is larger (a spread fitted at 0.002 +/- 0.003 is pinned near
    none, which relative to its value looked loose)."""

    def spread(self, value: float) -> float:
        """What a standard error is measured against (MAX_RELATIVE_STDERR)."""
        if self.share:
            return self.high - self.low
        return max(value, self.prior_width) if self.offset else value

    def to_log(self, value):
        """The fit's coordinate of `value`."""
        return np.log(np.asarray(value, dtype=np.float64) + self.offset)

    def from_log(self, x):
        """The value at the fit's coordinate `x`."""
        return np.exp(x) - self.offset


@dataclass(frozen=True)
class FitResult:
    values: dict[str, float]
    """Every parameter: the fitted value, or the default when not identified."""
    stderr: dict[str, float | None]
    identified: dict[str, bool]
    why_not: dict[str, str]
    driver: dict[str, int]
    """Index of the measurement that moves each fitted constant most."""
    residuals_before: np.ndarray
    residuals_after: np.ndarray
    at_bound: dict[str, bool]


def _jacobian(residual: Callable[[dict[str, float]], np.ndarray], params: Sequence[Param],
              values: dict[str, float]) -> np.ndarray:
    base = residual(values)
    cols = []
    for p in params:
        step = dict(values)
        shifted = values[p.name] + p.offset  # the fit's coordinate is log(value + offset) (Param.offset)
        up = shifted * (1.0 + _STEP) - p.offset <= p.high  # step down from an upper bound (a share at 1)
        factor = 1.0 + _STEP if up else 1.0 / (1.0 + _STEP)
        step[p.name] = shifted * factor - p.offset
        cols.append((residual(step) - base) / np.log(factor))
    return np.stack(cols, axis=1) if cols else np.zeros((base.size, 0))


def identifiable(residual: Callable[[dict[str, float]], np.ndarray], params: Sequence[Param]
                 ) -> tuple[list[Param], dict[str, str]]:
    """The parameters the measurements pin down at the defaults, and why each other one is left out.

    Columns of the Jacobian are taken strongest first (ties in the order of `params`); one is kept when a share
    of at least MIN_INDEPENDENT of it is not explained by the columns already kept (a column-pivoted QR, done by
    hand); while there are fewer measurements than kept columns, none more is taken."""
    values = {p.name: p.default for p in params}
    jac = _jacobian(residual, params, values)
    norms = np.linalg.norm(jac, axis=0) if jac.size else np.zeros(len(params))
    keep: list[int] = []
    why: dict[str, str] = {}
    # strongest first; equal strength (one constant standing in for another) goes by the order given
    for k in sorted(range(len(params)), key=lambda k: (-float(f"{norms[k]:.6g}"), k)):
        name = params[k].name
        if np.abs(jac[:, k]).max(initial=0.0) < MIN_SENSITIVITY:
            why[name] = "no measurement depends on it"
            continue
        if len(keep) >= jac.shape[0]:
            why[name] = f"{jac.shape[0]} measurement(s) cannot fix more constants"
            continue
        if keep:
            basis, _ = np.linalg.qr(jac[:, keep])
            rest = jac[:, k] - basis @ (basis.T @ jac[:, k])
            if np.linalg.norm(rest) < MIN_INDEPENDENT * norms[k]:
                others = ", ".join(params[j].name for j in keep)
                why[name] = f"these measurements move it only together with {others}"
                continue
        keep.append(k)
    return [params[k] for k in sorted(keep)], why


def _solve(residual: Callable[[dict[str, float]], np.ndarray], free: Sequence[Param], defaults: dict[str, float],
           robust: bool = False):
    scale = STEP_SCALE if robust else MICROBENCHMARK_SCALE
    """(values, stderr, driver, at_bound, prior_held) of a bounded least-squares fit of `free` from the defaults.
    With no more measurements than constants the data leave no residual to estimate a standard error from: the
    standard error is then the posterior's, measurements and priors together at the fit's scale, and `prior_held`
    marks each constant the measurements tell less of than its prior already does (their information, their rows'
    share of the Gauss-Newton J^T J, below the prior's: the data do not halve its variance)."""
    from scipy.optimize import least_squares  # imported here: only `calibrate` needs SciPy

    lo = np.array([p.to_log(p.low) for p in free])
    hi = np.array([p.to_log(p.high) for p in free])
    x0 = np.clip(np.array([p.to_log(p.default) for p in free]), lo + 1e-9, hi - 1e-9)

    prior = np.array([scale / p.prior_width if p.prior_width else 0.0 for p in free])
    centre = np.array([p.to_log(p.default) for p in free])

    def fun(x: np.ndarray) -> np.ndarray:
        data = residual(defaults | {p.name: float(p.from_log(v)) for p, v in zip(free, x, strict=True)})
        return np.concatenate([data, prior * (x - centre)])  # priors at the defaults (ridge in log space)

    def solve_from(start: np.ndarray):
        return least_squares(fun, start, bounds=(lo, hi), method="trf", diff_step=_STEP, x_scale=1.0,
                             loss="soft_l1" if robust else "linear", f_scale=scale, xtol=1e-10, ftol=1e-10,
                             gtol=1e-10, max_nfev=200)

    sol = solve_from(x0)
    if not robust:  # microbenchmarks: also from a grid of starts, the least misfit kept (MULTI_START)
        for point in itertools.product(*[(x0[k], *(lo[k] + f * (hi[k] - lo[k]) for f in MULTI_START))
                                         for k in range(len(free))]):
            other = solve_from(np.clip(np.array(point), lo + 1e-9, hi - 1e-9))
            if other.cost < sol.cost * (1.0 - 1e-9):
                sol = other
    m, n = sol.fun.size - len(free), len(free)
    cov = None
    posterior = m <= n  # no residual degrees of freedom: the posterior's covariance at the fit's scale
    try:
        cov = (np.linalg.inv(sol.jac.T @ sol.jac) * scale**2 if posterior
               else np.linalg.inv(sol.jac.T @ sol.jac) * (float(sol.fun[:m] @ sol.fun[:m]) / (m - n)))
    except np.linalg.LinAlgError:
        cov = None
    values, stderr, driver, at_bound, prior_held = {}, {}, {}, {}, {}
    for k, p in enumerate(free):
        v = float(p.from_log(sol.x[k]))
        values[p.name] = v
        # d value / d log(value + offset) = value + offset
        stderr[p.name] = ((v + p.offset) * float(np.sqrt(cov[k, k])) if cov is not None and cov[k, k] >= 0
                          else None)
        driver[p.name] = int(np.argmax(np.abs(sol.jac[:m, k])))
        at_bound[p.name] = bool(np.isclose(sol.x[k], lo[k], atol=1e-6) or np.isclose(sol.x[k], hi[k], atol=1e-6))
        # the information the measurements and the prior each give of it (its rows of the Gauss-Newton J^T J)
        data_info, prior_info = float(sol.jac[:m, k] @ sol.jac[:m, k]), float(sol.jac[m + k, k] ** 2)
        prior_held[p.name] = posterior and data_info < prior_info
    return values, stderr, driver, at_bound, prior_held


def fit(residual: Callable[[dict[str, float]], np.ndarray], params: Sequence[Param], robust: bool = False
        ) -> FitResult:
    """Fit `params` so that `residual(values)` (log predicted / measured per measurement) is least squares;
    `robust` uses a soft-L1 loss at STEP_SCALE (training steps, where one run can miss for its own reasons;
    not microbenchmarks, whose misfit is the model's own)."""
    defaults = {p.name: p.default for p in params}
    before = residual(defaults)
    free, why = identifiable(residual, params)
    found: tuple[dict, dict, dict, dict, dict] = ({}, {}, {}, {}, {})
    while free:
        found = _solve(residual, free, defaults, robust)
        held = [p for p in free if found[4][p.name]]
        if held:  # as many measurements as constants: one the data tell less of than its prior is not fitted (a
            # user trial: three steps fitted three constants, two of them the prior's value, each "identified")
            worst = max(held, key=lambda p: (found[1][p.name] or np.inf) / found[0][p.name])
            why[worst.name] = (f"{np.size(before)} measurement(s) for {len(free)} constant(s) tell less of it than "
                               f"its prior at the default already does")
            free = [p for p in free if p is not worst]
            found = ({}, {}, {}, {}, {})
            continue
        loose = [p for p in free if found[1][p.name] is not None
                 and found[1][p.name] > MAX_RELATIVE_STDERR * p.spread(found[0][p.name])]
        if not loose:
            break
        worst = max(loose, key=lambda p: found[1][p.name] / p.spread(found[0][p.name]))
        share = found[1][worst.name] / worst.spread(found[0][worst.name])
        why[worst.name] = f"its standard error would be {share:.0%} of its {'range' if worst.share else 'value'}"
        free = [p for p in free if p is not worst]
        found = ({}, {}, {}, {}, {})
    free, why, found = _swap_at_bound(residual, params, free, why, found, defaults, robust)
    if free:
        gain, price = _earned(before, residual(defaults | found[0]), len(free), robust)
        if gain <= price:  # the defaults explain the measurements as well: nothing is moved
            for p in free:
                why[p.name] = (f"the defaults explain these measurements as well: fitting {len(free)} constant(s) "
                               f"would lower their misfit by {gain:.1f}, not the {price:.1f} it must earn "
                               f"(Schwarz's criterion, k ln n)")
            free, found = [], ({}, {}, {}, {}, {})
    values = defaults | found[0]
    return FitResult(values=values, stderr={p.name: found[1].get(p.name) for p in params},
                     identified={p.name: p.name not in why for p in params}, why_not=why, driver=found[2],
                     residuals_before=before, residuals_after=residual(values),
                     at_bound={p.name: found[3].get(p.name, False) for p in params})


def _misfit(res: np.ndarray, robust: bool) -> float:
    """Sum of the loss the fit minimises over the measurements, in units of their scale squared: soft-L1
    (2 (sqrt(1 + z) - 1), z = (r / STEP_SCALE)^2) for steps, squares for microbenchmarks."""
    z = (np.asarray(res) / (STEP_SCALE if robust else MICROBENCHMARK_SCALE)) ** 2
    return float(np.sum(2.0 * (np.sqrt(1.0 + z) - 1.0) if robust else z))


def _earned(before: np.ndarray, after: np.ndarray, k: int, robust: bool) -> tuple[float, float]:
    """(misfit the fit removes, what k fitted constants must remove to be kept): Schwarz's Bayesian information
    criterion (Ann. Statist. 6(2), 1978), k ln n over n measurements, with the misfit as -2 log likelihood.  A
    fit that does not beat the defaults by that much is chance: on runs the defaults were themselves fitted to,
    moving them makes held-out runs worse, not better."""
    n = max(int(np.size(before)), 1)
    return _misfit(before, robust) - _misfit(after, robust), k * float(np.log(max(n, 2)))


def _swap_at_bound(residual, params, free, why, found, defaults, robust):
    """A constant that ends at its upper bound (a NIC at its line rate) while another constant was left out only
    because it moves the measurements the same way: the two are alternative explanations, so the other one is
    fitted in its place when that fits the measurements better (a pipelined collective rather than a NIC faster
    than its datasheet)."""
    for p in list(free):
        if not found[3].get(p.name) or found[0][p.name] < p.high * (1 - 1e-6):
            continue
        for q in params:
            if q.name in why and p.name in why[q.name] and "together with" in why[q.name]:
                alt_free = [x for x in free if x is not p] + [q]
                alt = _solve(residual, alt_free, defaults, robust)
                cost = float(np.sum(residual(defaults | found[0]) ** 2))
                alt_cost = float(np.sum(residual(defaults | alt[0]) ** 2))
                if alt_cost < cost:
                    why = {k: v for k, v in why.items() if k != q.name}
                    why[p.name] = (f"at its bound ({p.high:g}) these measurements are explained better by {q.name}; "
                                   f"kept at the default")
                    return alt_free, why, alt
    return free, why, found


@dataclass(frozen=True)
class StepFit:
    result: FitResult
    held_out: np.ndarray | None
    """Log residual of each run predicted with the constants fitted on the others (None: fewer than two runs)."""


def fit_steps(residual_of: Callable[[Sequence[int]], Callable[[dict[str, float]], np.ndarray]], n: int,
              params: Sequence[Param], report: bool = True) -> StepFit:
    """Fit the step constants to `n` measured runs (robust loss), then test the fit as it will be used: each run
    predicted with the constants fitted on the others.  A fit whose held-out runs are, on average, predicted
    worse than the defaults predict them does not generalise (the runs miss for reasons of their own), so the
    defaults stay and every constant says why.  `residual_of(indices)` is the residual of those runs; without
    `report`, a fit that moved nothing skips the held-out fits (nothing to test; a benchmark's shortcut)."""
    everyone = list(range(n))
    result = fit(residual_of(everyone), params, robust=True)
    if n < 2 or not (report or any(result.identified.values())):
        return StepFit(result, None)
    held = np.empty(n)
    for i in range(n):
        others = fit(residual_of([j for j in everyone if j != i]), params, robust=True)
        held[i] = float(residual_of([i])(others.values)[0])
    moved = [p.name for p in params if result.identified[p.name]]
    default_error = float(np.mean(np.abs(np.expm1(result.residuals_before))))
    held_error = float(np.mean(np.abs(np.expm1(held))))
    if moved and held_error >= default_error:
        why = dict(result.why_not)
        for name in moved:
            why[name] = (f"fitted without each run in turn, the constants predict it {held_error:.1%} off on average, "
                         f"the defaults {default_error:.1%}: the fit does not generalise, kept at the default")
        defaults = {p.name: p.default for p in params}
        result = FitResult(values=defaults, stderr={p.name: None for p in params},
                           identified={p.name: False for p in params}, why_not=why, driver={},
                           residuals_before=result.residuals_before, residuals_after=result.residuals_before,
                           at_bound={p.name: False for p in params})
    return StepFit(result, held)
