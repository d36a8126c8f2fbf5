"""The sweep file: candidate designs x workloads (validated once, `extra="forbid"`)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from placement.cost.constants import GiB
from placement.specs._base import StrictScalars
from placement.specs.hardware import Bandwidth
from placement.specs.training import MAX_GLOBAL_BATCH, MAX_SEQ_LEN, Precision, TrainingSpec

HOURS_PER_YEAR = 8760.0


class Objective(StrEnum):
    """How a design's GPU count is chosen (README "Choosing the GPU count")."""

    TIME = "time"
    """Shortest time to train; a budget design buys every whole unit the budget affords."""
    COST = "cost"
    """Lowest outlay (capex of the GPUs bought plus the run's energy; rental: the rental bill); a budget design buys
    only the whole units the job uses."""
    COST_PER_TOKEN = "cost_per_token"
    """Lowest cost per million tokens with capex amortized over `amortization_years`; a budget design buys only
    the whole units the job uses."""


RENTAL_COST_INPUTS = ("price_per_gpu_hour",)
CAPEX_COST_INPUTS = ("capex_per_gpu", "power_per_gpu_w", "amortization_years", "energy_price_per_kwh", "pue")
"""The fields a design's price is computed from (rental, or purchase); only the last three have defaults."""
PURCHASE_ONLY_INPUTS = ("amortization_years", "energy_price_per_kwh", "pue")
"""A purchase's cost inputs with defaults, which a rental design's price does not use (stating one is an error)."""


MIN_POWER_PER_GPU_W = 50.0
"""Below this many watts per GPU a design's power is a unit slip (`1.4` for 1.4 kW): a datacenter GPU alone draws
several hundred (H100 SXM 700 W TDP)."""


UNIT_SLIPS_CURRENCIES = frozenset({"USD", "EUR", "GBP", "CHF"})
"""Currencies whose money figures the unit-slip bounds below are in the order of (a yen or rupee figure is not)."""
CURRENCY_SYMBOLS = {"$": "USD", "US$": "USD", "€": "EUR", "£": "GBP"}
"""The symbols a study may label its money with for those currencies (`currency` is a label: `usd` or `$` is USD)."""


def unit_slip_currency(currency: str) -> bool:
    """Whether the unit-slip bounds apply to money labelled `currency`: USD, EUR, GBP or CHF in any case, or their
    symbol (a user trial: `currency: usd` with `capex_per_gpu: 40` priced 8 H100s for two weeks at 478)."""
    label = currency.strip()
    return CURRENCY_SYMBOLS.get(label, label.upper()) in UNIT_SLIPS_CURRENCIES
MIN_CAPEX_PER_GPU = 500.0
"""Below this a design's capex per GPU is a slip (`40` for 40k): a datacenter GPU with its share of the node costs
tens of thousands."""
MAX_ENERGY_PRICE_PER_KWH = 5.0
"""Above this an energy price is a per-MWh figure (`100` for 0.10 per kWh): retail electricity is under 1 a kWh."""
MIN_PRICE_PER_GPU_HOUR = 0.01
"""Below this a rental price is a slip: a GPU-hour of any datacenter GPU rents for cents at least."""
MAX_AMORTIZATION_YEARS = 20.0
"""Above this an amortization is in months (`48` for 4 years): a GPU is obsolete well within it."""


def _check_units(d: DesignSpec, currency: str) -> None:
    """The unit slips a design's cost inputs can hide (a user trial: `capex_per_gpu: 40` priced a 1,024-GPU study at
    4,730 USD, `energy_price_per_kwh: 100` at 4.7 M, `amortization_years: 48` as 48 years), each an error with the
    value to write; the money bounds only where the currency is one they are in the order of."""
    if d.amortization_years > MAX_AMORTIZATION_YEARS:
        raise ValueError(f"design {d.name!r}: amortization_years {d.amortization_years:g} is above "
                         f"{MAX_AMORTIZATION_YEARS:g}, months written for years?; write years, e.g. 4")
    if not unit_slip_currency(currency):
        _check_energy_default(d, currency)
        return
    if d.capex_per_gpu is not None and d.capex_per_gpu < MIN_CAPEX_PER_GPU:
        raise ValueError(f"design {d.name!r}: capex_per_gpu {d.capex_per_gpu:g} {currency} is below "
                         f"{MIN_CAPEX_PER_GPU:g}, thousands written as units?; write the price per GPU, e.g. 40000")
    if d.energy_price_per_kwh > MAX_ENERGY_PRICE_PER_KWH:
        raise ValueError(f"design {d.name!r}: energy_price_per_kwh {d.energy_price_per_kwh:g} {currency} is above "
                         f"{MAX_ENERGY_PRICE_PER_KWH:g}, a per-MWh price?; write the price of one kWh, e.g. 0.10")
    if d.price_per_gpu_hour is not None and d.price_per_gpu_hour < MIN_PRICE_PER_GPU_HOUR:
        raise ValueError(f"design {d.name!r}: price_per_gpu_hour {d.price_per_gpu_hour:g} {currency} is below "
                         f"{MIN_PRICE_PER_GPU_HOUR:g}, a slip?; write the price of one GPU for one hour, e.g. 2.0")


def _check_energy_default(d: DesignSpec, currency: str) -> None:
    """A bought design's energy price left to its default, 0.10 a kWh, is a figure of the order of a USD, EUR, GBP or
    CHF price (UNIT_SLIPS_CURRENCIES); in another currency it is no price at all (a QA trial: `currency: JPY` printed
    `assumed (defaults, no source): energy 0.10 JPY/kWh` and priced 1.2 GWh at a few hundred yen, an outlay and a
    cost short of the run's energy).  PUE and amortization carry no currency and keep their defaults.  Checked on the
    study as written (`model_fields_set`), as _check_rental is."""
    if d.price_per_gpu_hour is None and "energy_price_per_kwh" not in d.model_fields_set:
        default = DesignSpec.model_fields["energy_price_per_kwh"].default
        raise ValueError(
            f"design {d.name!r}: energy_price_per_kwh is left to its default {default:.2f}, a price in USD, EUR, "
            f"GBP or CHF, but the study's currency is {currency!r} (a label: nothing is converted), in which "
            f"{default:.2f} a kWh is no price; give the design's energy_price_per_kwh in {currency} (or every "
            f"design's: --set energy_price_per_kwh=PRICE)")


def _check_rental(d: DesignSpec) -> None:
    """A rental design's bill is its hourly price alone: an amortization, energy price or PUE the study states for it
    would be dropped without a word (a user trial: `pue: 1.6, energy_price_per_kwh: 0.3` beside a rental price changed
    nothing), as a capex beside a rental price would (DesignSpec._check).  Checked on the study as written
    (`model_fields_set`), not on a design a worker re-reads from its dump."""
    unused = [f for f in PURCHASE_ONLY_INPUTS if f in d.model_fields_set]
    if d.price_per_gpu_hour is not None and unused:
        raise ValueError(
            f"design {d.name!r}: price_per_gpu_hour ({d.price_per_gpu_hour:g}) is a rental price, which the cost is "
            f"priced from alone; {', '.join(f'{f} ({getattr(d, f):g})' for f in unused)} "
            f"{'prices' if len(unused) == 1 else 'price'} a purchase only and would be ignored: remove "
            f"{'it' if len(unused) == 1 else 'them'} (fold energy into the hourly price), or price the design by "
            f"capex_per_gpu and power_per_gpu_w")


def _check_budget_used(sweep: SweepSpec) -> None:
    """A budget is capex: what a bought design (`capex_per_gpu`) may spend, which buys its GPUs where it gives no
    `gpus` and bounds them where it does.  A rented design buys nothing, so where every design is rented the budget
    would be printed in the study's head and change no number (a QA trial: `budget: 50000000` over four rented
    designs, the same rows with it as without; a rental's `gpus` is required, its bill never checked against it)."""
    if sweep.budget is None or any(d.price_per_gpu_hour is None for d in sweep.designs):
        return
    raise ValueError(
        f"budget {sweep.budget:,.0f} {sweep.currency} is capex that a bought design (capex_per_gpu and "
        f"power_per_gpu_w) may spend, but every design here is rented (price_per_gpu_hour), buys nothing and "
        f"gives its gpus, so the budget would change no row: remove budget (each row's cost is its rental bill "
        f"to compare with yours), or price a design by capex_per_gpu and power_per_gpu_w for the budget to buy it")


def budget_rented(sweep: SweepSpec) -> tuple[str, ...]:
    """The rented designs a study's budget does not bind (it is capex: `_check_budget_used`), where it has one."""
    if sweep.budget is None:
        return ()
    return tuple(d.name for d in sweep.designs if d.price_per_gpu_hour is not None)


class DesignSpec(StrictScalars):
    name: str = Field(min_length=1)
    cluster: str = Field(min_length=1)
    """Catalog node design (dgx-h100, gb200-nvl72, ...) or a cluster YAML path."""
    gpus: int | None = Field(default=None, ge=1, strict=True)
    """GPU count, whole purchase units (nodes; NVL72-style racks where the scale-up domain spans nodes); None = as
    many as the sweep's budget buys.  Strict: `gpus: "1024"` (a string) or `1024.0` is refused, not converted."""
    nic_bandwidth_bytes_per_s: Bandwidth | None = None
    """Scale-out bandwidth per GPU per direction, if not the design's (8 x 400 Gb/s per 8 GPUs = 50e9)."""
    nodes_per_leaf: int | None = Field(default=None, ge=1)
    """Scale-up domains (nodes, or NVL72 racks) under one leaf switch, if not the design's."""
    oversubscription: float | None = Field(default=None, ge=1, le=64)
    """Down:up ratio of the leaf uplinks, if not the design's."""
    price_per_gpu_hour: float | None = Field(default=None, gt=0, le=1e4)
    """Rental or internal price; or give capex_per_gpu and power_per_gpu_w."""
    capex_per_gpu: float | None = Field(default=None, gt=0, le=1e8)
    """Purchase price per GPU, its share of servers, network and install."""
    amortization_years: float = Field(default=4.0, gt=0, le=100)
    """Years over which capex is spread: the run is charged capex x run hours / (years x 8760 h).  The default, 4,
    is an assumption with no source: a study that leaves it out says so (`cost_input_sources`, the summary)."""
    power_per_gpu_w: float | None = Field(default=None, gt=0, le=1e5)
    """Wall power per GPU, its share of the node and network."""
    energy_price_per_kwh: float = Field(default=0.10, ge=0, le=1e3)
    """Price of one kWh drawn by the facility (after PUE).  The default, 0.10 per kWh, is an assumption with no source
    (said in `cost_input_sources` and the summary), and only in USD, EUR, GBP or CHF: a study in another currency
    gives it (_check_energy_default)."""
    pue: float = Field(default=1.3, ge=1, le=10)
    """Power usage effectiveness: facility power / IT power.  The default, 1.3, is an assumption with no source
    (said in `cost_input_sources` and the summary)."""

    @model_validator(mode="after")
    def _check(self) -> DesignSpec:
        capex = self.capex_per_gpu is not None and self.power_per_gpu_w is not None
        bought = [f for f in ("capex_per_gpu", "power_per_gpu_w") if getattr(self, f) is not None]
        if self.price_per_gpu_hour is not None and bought:  # a rental has no capex: one of the two would be dropped
            raise ValueError(
                f"design {self.name!r}: price_per_gpu_hour ({self.price_per_gpu_hour:g}) is a rental price, and "
                f"{' and '.join(f'{f} ({getattr(self, f):g})' for f in bought)} a purchase's; give one way of "
                f"paying: price_per_gpu_hour alone, or capex_per_gpu and power_per_gpu_w")
        if self.power_per_gpu_w is not None and self.power_per_gpu_w < MIN_POWER_PER_GPU_W:
            raise ValueError(
                f"design {self.name!r}: power_per_gpu_w {self.power_per_gpu_w:g} is below {MIN_POWER_PER_GPU_W:g} W "
                f"per GPU, a unit slip (kilowatts written for watts?); write watts at the wall per GPU, e.g. 1400")
        if (self.price_per_gpu_hour is None) == (not capex):
            raise ValueError(
                f"design {self.name!r}: give either price_per_gpu_hour or both capex_per_gpu and power_per_gpu_w "
                f"(got price_per_gpu_hour={self.price_per_gpu_hour}, capex_per_gpu={self.capex_per_gpu}, "
                f"power_per_gpu_w={self.power_per_gpu_w})"
            )
        return self

    @property
    def cost_inputs(self) -> tuple[str, ...]:
        """The fields this design's price is computed from: the rental price, or capex, power, amortization,
        energy price and PUE."""
        return RENTAL_COST_INPUTS if self.price_per_gpu_hour is not None else CAPEX_COST_INPUTS

    @property
    def defaulted_cost_inputs(self) -> tuple[str, ...]:
        """The cost inputs the study left to this class's defaults (assumptions with no source), in field order."""
        return tuple(f for f in self.cost_inputs if f not in self.model_fields_set)

    @property
    def gpu_hour_price(self) -> float:
        """Price per GPU-hour: given, or capex over its amortization plus energy at the wall."""
        if self.price_per_gpu_hour is not None:
            return self.price_per_gpu_hour
        capex = self.capex_per_gpu / (self.amortization_years * HOURS_PER_YEAR)
        energy = self.power_per_gpu_w / 1000.0 * self.pue * self.energy_price_per_kwh
        return capex + energy


class WorkloadSpec(StrictScalars):
    name: str = Field(min_length=1)
    model: str = Field(min_length=1)
    """Catalog name, model YAML or HuggingFace config.json."""
    seq_len: int = Field(ge=1, le=MAX_SEQ_LEN)
    global_batch: int = Field(ge=1, le=MAX_GLOBAL_BATCH)
    """Sequences per step."""
    tokens: float = Field(gt=0, le=1e18)
    """Tokens to train."""
    precision: Precision = Precision.BF16
    """GEMM precision (bf16, fp8, ...)."""
    memory_headroom_gib: float = Field(default=0.0, ge=0.0, le=1e6)
    """HBM per GPU its plans keep free beyond the modelled reserve (plan's `--memory-headroom-gib`)."""

    @model_validator(mode="after")
    def _tokens(self) -> WorkloadSpec:
        # a user trial's `tokens: 15` (15T meant) was priced 0.0 days at a cost of 0
        step = self.seq_len * self.global_batch
        if self.tokens < step:
            raise ValueError(f"workload {self.name!r}: tokens {self.tokens:g} are less than one step's "
                             f"{step:,} (seq_len x global_batch): write the tokens to train, e.g. 15.0e12 for 15T")
        return self

    def train(self) -> TrainingSpec:
        """The job each cell of this workload prices."""
        return TrainingSpec(seq_len=self.seq_len, global_batch=self.global_batch, precision=self.precision,
                            memory_headroom_bytes=self.memory_headroom_gib * GiB)


class SweepSpec(StrictScalars):
    name: str = Field(min_length=1)
    budget: float | None = Field(default=None, gt=0, le=1e13)
    """Capex budget: designs without `gpus` get as many GPUs as it buys, in whole nodes."""
    currency: str = "USD"
    """Label of every money figure (no conversion)."""
    designs: tuple[DesignSpec, ...] = Field(min_length=1)
    workloads: tuple[WorkloadSpec, ...] = Field(min_length=1)
    top_k: int = Field(default=1, ge=1)
    """Accepted for compatibility; a sweep keeps the best plan of each GPU count (another value: a warning)."""
    objective: Objective = Objective.TIME
    """What the GPU count of each design x workload minimizes: time, cost or cost_per_token."""
    deadline_days: float | None = Field(default=None, gt=0, le=1e6)
    """Only GPU counts that train within this many days are chosen (if none does, the fastest, flagged)."""

    @model_validator(mode="after")
    def _check(self) -> SweepSpec:
        for group, items in (("designs", self.designs), ("workloads", self.workloads)):
            names = [x.name for x in items]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"{group}: names must be unique, {', '.join(dup)} repeated")
        for d in self.designs:
            if d.gpus is None and (self.budget is None or d.capex_per_gpu is None):
                raise ValueError(
                    f"design {d.name!r} has no gpus: give gpus, or a sweep budget and the design's capex_per_gpu"
                )
            _check_units(d, self.currency)
            _check_rental(d)
        _check_budget_used(self)  # after each design's own checks: a rental without gpus is told to give them
        return self
