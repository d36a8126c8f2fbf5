"""sweep.json's `inputs` is the study as resolved, and reads back as the same study: a rented design carries no
amortization, energy price or PUE (a QA trial: its inputs gave a rented design PUE 1.3 and 0.10 USD/kWh it was never
priced with, and the inputs written back as a sweep file were refused for stating them beside a rental price)."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from placement.cli import main
from placement.sweep.spec import PURCHASE_ONLY_INPUTS, SweepSpec

STUDY = {"name": "mixed", "budget": 2_000_000,
         "designs": [{"name": "bought", "cluster": "dgx-h100", "capex_per_gpu": 40000, "power_per_gpu_w": 1400},
                     {"name": "rented", "cluster": "dgx-h100", "gpus": 16, "price_per_gpu_hour": 2.5}],
         "workloads": [{"name": "8b", "model": "llama3-8b", "seq_len": 4096, "global_batch": 64, "tokens": 1.0e9}]}


def test_the_inputs_read_back_as_the_study_and_a_rental_has_no_purchase_inputs(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    res = CliRunner().invoke(main, ["sweep", str(path), "--out", str(tmp_path / "o"), "--no-plots", "--workers", "1"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "o" / "sweep.json").read_text())
    designs = {d["name"]: d for d in doc["inputs"]["designs"]}
    assert not set(PURCHASE_ONLY_INPUTS) & set(designs["rented"])
    assert {k: designs["bought"][k] for k in PURCHASE_ONLY_INPUTS} == {"amortization_years": 4.0,
                                                                       "energy_price_per_kwh": 0.1, "pue": 1.3}
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump(doc["inputs"]))
    assert SweepSpec.model_validate(doc["inputs"]).model_dump(mode="json") == \
        SweepSpec.model_validate(STUDY).model_dump(mode="json")
    res = CliRunner().invoke(main, ["sweep", str(again), "--out", str(tmp_path / "o2"), "--no-plots",
                                    "--workers", "1"])
    assert res.exit_code == 0, res.output
