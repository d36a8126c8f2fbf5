"""Pricing a planned GPU count: what it buys, what the run costs, and the study objective it scores.

Pure arithmetic over a design's prices and a plan's tokens/s.  Nothing here plans, so a what-if on a price,
the energy price, PUE, amortization or the tokens re-applies to cached plans (README "Cost fields").
"""

from __future__ import annotations

import math

from placement.sweep.spec import HOURS_PER_YEAR, DesignSpec, Objective, WorkloadSpec

SECONDS_PER_DAY = 86400.0
RENTAL_NULLS = ("capex_total", "capex_amortized", "energy_mwh", "energy_cost", "facility_mw")
"""Fields a design priced per GPU-hour (rental) leaves null: it states no capex and no power."""


def bought_gpus(design: DesignSpec, objective: Objective, used: int, unit: int, most: int,
                units: int | None = None) -> int:
    """GPUs the design buys to run `used` of them: a given `gpus` as given; under the time objective every whole
    `unit` (scale-up domain) the budget affords (`most`); under cost objectives only the whole units the job
    uses (an idle GPU bought adds cost and no speed): `units` of them where its segments need more than its GPUs
    fill (counts.units_for), else as many as its GPUs fill."""
    if design.gpus is not None or objective is Objective.TIME:
        return most
    return min(most, (units if units is not None else -(-used // unit)) * unit)


def price(design: DesignSpec, work: WorkloadSpec, bought: int, used: int, tokens_per_s: float) -> dict:
    """The cost fields of a run on `used` of `bought` GPUs at `tokens_per_s` (README defines each).  Idle GPUs
    are charged in full: capex, and energy at `power_per_gpu_w` (the facility is built and powered for what
    is bought)."""
    seconds = work.tokens / tokens_per_s
    hours = seconds / 3600.0
    gpu_hours = hours * bought
    out: dict = {"time_to_train_s": seconds, "time_to_train_days": seconds / SECONDS_PER_DAY,
                 "gpu_hours": gpu_hours, "price_per_gpu_hour": design.gpu_hour_price}
    if design.price_per_gpu_hour is not None:
        cost = gpu_hours * design.price_per_gpu_hour
        out |= dict.fromkeys(RENTAL_NULLS) | {"cost": cost, "outlay": cost}
    else:
        capex_total = bought * design.capex_per_gpu
        capex_amortized = capex_total * hours / (design.amortization_years * HOURS_PER_YEAR)
        facility_mw = bought * design.power_per_gpu_w * design.pue / 1e6
        energy_mwh = facility_mw * hours
        energy_cost = energy_mwh * 1000.0 * design.energy_price_per_kwh
        cost = capex_amortized + energy_cost
        out |= {"capex_total": capex_total, "capex_amortized": capex_amortized, "facility_mw": facility_mw,
                "energy_mwh": energy_mwh, "energy_cost": energy_cost, "cost": cost,
                "outlay": capex_total + energy_cost}
    out["cost_per_million_tokens"] = out["cost"] / work.tokens * 1e6
    out["num_gpus_idle"] = bought - used
    out["idle_cost"] = out["cost"] * (bought - used) / bought
    return out


def score(objective: Objective, fields: dict) -> float:
    """The number the objective minimizes (every one is non-decreasing in the time to train, for a fixed
    count, which is what lets a step-time lower bound bound it)."""
    if objective is Objective.TIME:
        return fields["time_to_train_s"]
    if objective is Objective.COST:
        return fields["outlay"]
    return fields["cost_per_million_tokens"]


def meets(deadline_days: float | None, seconds: float) -> bool:
    return deadline_days is None or seconds <= deadline_days * SECONDS_PER_DAY


def finite(x: float) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
