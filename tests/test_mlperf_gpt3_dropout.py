"""MLPerf's GPT-3 trains without dropout, and its rows are priced on a model without it."""

from __future__ import annotations

from placement.calibration.validate import load_runs, predict
from placement.catalog import load_model

RUNS = {r.id: r for r in load_runs()}


def test_mlperf_gpt3_rows_run_without_dropout() -> None:
    """NVIDIA's MLPerf v4.0 GPT-3 submission sets hidden and attention dropout to 0.0 (conf/custom.yaml:73-74), as
    the MLPerf reference does: its rows price a model without dropout, which also stores no dropout masks."""
    for row in ("mlperf-v4.0-nvidia-h100-gpt3-175b-512gpu", "mlperf-v4.0-nvidia-h100-gpt3-175b-11616gpu"):
        run = RUNS[row]
        model = load_model(run.model)
        assert not model.dropout
        same = model.model_dump(exclude={"name", "source", "dropout"})
        assert same == load_model("gpt3-175b").model_dump(exclude={"name", "source", "dropout"})
        assert "custom.yaml:73-74" in run.recipe_sources
        with_masks = predict(run, load_model("gpt3-175b"))
        assert predict(run).peak_memory_gib < with_masks.peak_memory_gib
