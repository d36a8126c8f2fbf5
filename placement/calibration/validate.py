"""`placement validate`: predicted vs published step time for every calibration run.

Each run's published layout is pinned.  A pipeline schedule the source does not state is the
framework's default (non-interleaved, vpp 1; a source that says "interleaved" without the chunk
count lets the search pick it); the other fields it leaves out (micro-batch size,
ZeRO stage, recompute, sequence parallelism) are chosen by the search within that layout.
Nothing here is tuned per run: the same constants price every row.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import yaml
from pydantic import Field

from placement.catalog import load_accelerator, load_cluster, load_model
from placement.errors import PlacementInfeasible
from placement.search import SearchConfig, search
from placement.specs._base import Frozen
from placement.specs.training import AttentionKernel, Precision, TrainingSpec
from placement.topology import Topology

TARGET_GROUPS = ("ptdp-2021-table1", "korthikanti-2022-table5")


class CalibrationRun(Frozen):
    id: str
    group: str
    citation: str
    location: str | None = None
    model: str
    cluster: str
    num_gpus: int = Field(ge=1)
    seq_len: int = Field(ge=1)
    global_batch: int = Field(ge=1)
    precision: Precision
    attention_kernel: AttentionKernel
    layout: dict[str, int | bool | str]
    interleaved: bool = False
    """The source says the schedule is interleaved but not with how many chunks: the search picks vpp."""
    published_step_time_s: float = Field(gt=0)
    step_time_basis: str
    published_tflops_per_gpu: float | None = None
    tflops_kind: str | None = None
    notes: str = ""


@dataclass(frozen=True)
class RunResult:
    run: CalibrationRun
    predicted_step_time_s: float | None
    fits: bool
    layout: dict | None
    peak_memory_gib: float | None

    @property
    def error(self) -> float | None:
        if self.predicted_step_time_s is None:
            return None
        return (self.predicted_step_time_s - self.run.published_step_time_s) / self.run.published_step_time_s


def load_runs() -> list[CalibrationRun]:
    text = resources.files("placement.calibration").joinpath("runs.yaml").read_text()
    return [CalibrationRun.model_validate(r) for r in yaml.safe_load(text)]


def predict(run: CalibrationRun) -> RunResult:
    model = load_model(run.model)
    cluster = load_cluster(run.cluster)
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=run.num_gpus)
    train = TrainingSpec(seq_len=run.seq_len, global_batch=run.global_batch, precision=run.precision,
                         attention_kernel=run.attention_kernel)
    try:
        fixed = dict(run.layout) if run.interleaved else {"vpp": 1, **run.layout}
        res = search(model, train, topo, SearchConfig(top_k=1, fixed=fixed))
    except PlacementInfeasible:
        return RunResult(run, None, False, None, None)
    i = int(res.ranked[0])
    lay = res.batch.layout(i)
    return RunResult(run, float(res.estimates.step_time_s[i]), True, lay.model_dump(mode="json"),
                     float(res.estimates.peak_memory_bytes[i]) / 2**30)


def validate() -> list[RunResult]:
    return [predict(r) for r in load_runs()]


def summary(results: list[RunResult], groups: tuple[str, ...] = TARGET_GROUPS) -> tuple[float, float]:
    errs = [abs(r.error) for r in results if r.run.group in groups and r.error is not None]
    if not errs:
        return float("nan"), float("nan")
    return sum(errs) / len(errs), max(errs)
