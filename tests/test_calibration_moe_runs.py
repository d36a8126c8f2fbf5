"""The MoE calibration runs (placement/calibration/runs-moe.yaml): one row per reference run, each naming a catalog
model and cluster, a layout that multiplies out to its GPU count, and a recipe the Recipe spec accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from placement.catalog import load_cluster, load_model
from placement.specs.recipe import Recipe

ROOT = Path(__file__).resolve().parent.parent
RUNS = yaml.safe_load((ROOT / "placement" / "calibration" / "runs-moe.yaml").read_text())
REFERENCE = ROOT.parent / "shared" / "reference" / "calibration-moe.yaml"
IDS = [r["id"] for r in RUNS]


def test_every_reference_run_is_there_once() -> None:
    assert len(RUNS) == 22
    assert len(set(IDS)) == len(IDS)
    if not REFERENCE.is_file():
        pytest.skip(f"{REFERENCE} is not checked out next to the repository")
    assert set(IDS) == {r["id"] for r in yaml.safe_load(REFERENCE.read_text())}


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_model_and_cluster_load_from_the_catalog(run: dict) -> None:
    assert load_model(run["model"]).name == run["model"]
    assert load_cluster(run["cluster"]).name == run["cluster"]


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_recipe_validates(run: dict) -> None:
    Recipe(**run["recipe"])


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_layout_multiplies_out_to_the_gpu_count(run: dict) -> None:
    lay = run["layout"]
    assert run["group"] == "moe"
    assert lay["tp"] * lay["cp"] * lay["pp"] * lay["dp"] == run["num_gpus"]
    # expert ranks tile the dense ranks
    assert (lay["dp"] * lay["cp"] * lay["tp"]) % (lay.get("ep", 1) * lay.get("etp", 1)) == 0
    if "micro_batch_size" in lay:
        assert run["global_batch"] % (lay["dp"] * lay["micro_batch_size"]) == 0
    if run["cluster"] in ("gb200-nvl72", "gb300-nvl72"):
        assert run["segment_nodes"] >= 1
