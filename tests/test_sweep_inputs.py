"""A sweep says which of its inputs it assumed, names its files so they run anywhere, and takes `gpus` as written."""

from __future__ import annotations

import json
import re
import shlex

import pytest
import yaml
from click.testing import CliRunner

from placement.cli import main
from placement.sweep.output import summary
from placement.sweep.spec import SweepSpec

WORKLOAD = {"name": "8b", "model": "llama3-8b", "seq_len": 4096, "global_batch": 64, "tokens": 1.0e9}
STUDY = {"name": "inputs", "workloads": [WORKLOAD], "designs": [
    {"name": "bought", "cluster": "dgx-h100", "gpus": 8, "capex_per_gpu": 40_000, "power_per_gpu_w": 1400},
    {"name": "own pue", "cluster": "dgx-h100", "gpus": 8, "capex_per_gpu": 40_000, "power_per_gpu_w": 1400,
     "pue": 1.2, "amortization_years": 5},
    {"name": "rented", "cluster": "dgx-h100", "gpus": 8, "price_per_gpu_hour": 2.0}]}


def _sweep(tmp_path, study: dict, *args: str):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return CliRunner().invoke(main, ["--reproducible", "sweep", str(path), "--no-plots", "--workers", "1", *args])


def test_defaulted_cost_inputs_are_named_in_the_json_and_the_summary(tmp_path):
    """energy_price_per_kwh 0.10, pue 1.3 and amortization_years 4 are DesignSpec defaults with no source: a trial
    found them in sweep.json looking exactly like values it set, and not in the summary at all."""
    out = tmp_path / "out"
    res = _sweep(tmp_path, STUDY, "--out", str(out), "--set", "designs.own pue.energy_price_per_kwh=0.2")
    assert res.exit_code == 0, res.output
    assert json.loads((out / "sweep.json").read_text())["cost_input_sources"] == {
        "bought": {"capex_per_gpu": "study file", "power_per_gpu_w": "study file", "amortization_years": "default",
                   "energy_price_per_kwh": "default", "pue": "default"},
        "own pue": {"capex_per_gpu": "study file", "power_per_gpu_w": "study file",
                    "amortization_years": "study file", "energy_price_per_kwh": "--set", "pue": "study file"},
        "rented": {"price_per_gpu_hour": "study file"}}  # a rental's price uses no energy, PUE or amortization
    assert "assumed for bought (defaults, no source): energy 0.10 USD/kWh, PUE 1.3, 4-year amortization" \
        in res.stdout.splitlines()
    assert "own pue (defaults" not in res.stdout and "rented (defaults" not in res.stdout
    # the existing keys stay as they were: inputs are the resolved values
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["inputs"]["designs"][0]["pue"] == 1.3 and doc["inputs"]["designs"][1]["energy_price_per_kwh"] == 0.2


def test_one_assumed_line_when_every_design_shares_the_defaults():
    spec = SweepSpec.model_validate({**STUDY, "designs": STUDY["designs"][:1]})
    assert "assumed (defaults, no source): energy 0.10 USD/kWh, PUE 1.3, 4-year amortization" \
        in summary([], spec.currency, spec).splitlines()
    given = SweepSpec.model_validate({**STUDY, "designs": [dict(STUDY["designs"][0], pue=1.3, energy_price_per_kwh=0.1,
                                                                amortization_years=4)]})
    assert "assumed" not in summary([], given.currency, given)  # the same values, but given: not assumptions


def test_a_rows_command_runs_from_any_directory(tmp_path, monkeypatch):
    """A design that changes the network gets a cluster file; a trial's command named it relative to the directory
    the sweep ran in (`out1/clusters/X.yaml`), so it failed anywhere else."""
    (tmp_path / "ran").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "ran")
    study = {**STUDY, "designs": [{"name": "2:1", "cluster": "dgx-h100", "gpus": 8, "price_per_gpu_hour": 2.0,
                                   "oversubscription": 2.0}]}
    res = _sweep(tmp_path, study, "--out", "o", "--json")
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)["rows"]
    args = shlex.split(row["command"])
    cluster = args[args.index("--cluster") + 1]
    assert re.fullmatch(re.escape(str(tmp_path / "ran" / "o" / "clusters" / "2_1-")) + r"[0-9a-f]{8}\.yaml", cluster)
    monkeypatch.chdir(tmp_path / "elsewhere")
    done = CliRunner().invoke(main, [*args[1:], "--top-k", "1", "--no-map", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["plans"][0]["step_time_s"] == pytest.approx(row["step_time_s"], rel=1e-6)


@pytest.mark.parametrize("gpus", ["1024", 1024.0])
def test_gpus_is_a_whole_number_as_written(tmp_path, gpus):
    """`gpus: "1024"` (a string) was converted to 1024 and accepted; a count is written as an integer."""
    study = {**STUDY, "designs": [{"name": "x", "cluster": "dgx-h100", "gpus": gpus, "price_per_gpu_hour": 2.0}]}
    res = _sweep(tmp_path, study, "--out", str(tmp_path / "o"))
    assert res.exit_code == 2
    assert "designs.0.gpus" in res.stderr and "integer" in res.stderr and "Traceback" not in res.stderr


def test_the_report_marks_each_designs_defaulted_cost_inputs():
    from placement.sweep.output import cost_input_sources, page_meta

    spec = SweepSpec.model_validate(STUDY)
    meta = page_meta({"inputs": spec.model_dump(mode="json"), "cost_input_sources": cost_input_sources(spec)})
    bought, own, rented = meta["designs"]
    assert bought.endswith("(defaults, no source: amortization_years, energy_price_per_kwh, pue)")
    assert own.endswith("(defaults, no source: energy_price_per_kwh)")
    assert "defaults" not in rented


def test_the_report_lists_a_rentals_price_alone():
    """A QA trial's page listed a rental design as "price_per_gpu_hour 4.5, amortization_years 4,
    energy_price_per_kwh 0.1, pue 1.3": defaults of purchase inputs its price does not use (a rental may not state
    them), shown as its inputs beside the price it is billed at."""
    from placement.sweep.output import cost_input_sources, page_meta

    spec = SweepSpec.model_validate(STUDY)
    meta = page_meta({"inputs": spec.model_dump(mode="json"), "cost_input_sources": cost_input_sources(spec)})
    bought, _, rented = meta["designs"]
    rental = next(d for d in STUDY["designs"] if "price_per_gpu_hour" in d)
    assert rented.startswith(f"{rental['name']}: ") and f"price_per_gpu_hour {rental['price_per_gpu_hour']:g}" in rented
    for purchase_only in ("amortization_years", "energy_price_per_kwh", "pue", "capex_per_gpu", "power_per_gpu_w"):
        assert purchase_only not in rented
    assert "amortization_years 4" in bought  # a purchase still lists the defaults it is priced with


@pytest.mark.parametrize(("where", "key", "value", "says"), [
    ("workloads", "tokens", True, "not true/false"),
    ("workloads", "global_batch", "64", "not a string"),
    ("designs", "pue", True, "not true/false"),
    ("designs", "power_per_gpu_w", 1.4, "unit slip"),
    ("designs", "price_per_gpu_hour", 2.2, "one way of paying")])
def test_a_sweep_number_is_never_coerced_nor_a_unit_slip(tmp_path, where, key, value, says):
    """A user trial: `tokens: true` trained 1 token, `global_batch: '64'` and `pue: true` were read as numbers,
    `power_per_gpu_w: 1.4` (kW) gave a 29 W facility, and a rental price beside a capex dropped the capex, each with
    exit 0."""
    study = json.loads(json.dumps(STUDY))
    study[where][0][key] = value
    res = _sweep(tmp_path, study, "--out", str(tmp_path / "o"))
    assert res.exit_code == 2, res.output
    assert f"{where}.0" in res.stderr and says in res.stderr and "Traceback" not in res.stderr


def test_error_bands_lists_each_band_a_row_used():
    """Rows of one validate group can use different bands (a plan priced above the group's best published run widens
    its own): each is listed under the rows that used it, not the last row's under the group's name."""
    from placement.sweep.output import error_bands

    plain = {"group": "MoE / Blackwell", "error_low": -0.18, "error_high": 0.03}
    anchored = {**plain, "error_low": -0.31, "note": "anchored"}
    rows = [{"design": "B200", "workload": "dsv3", "error_band": plain},
            {"design": "GB200", "workload": "mixtral", "error_band": anchored},
            {"design": "H100", "workload": "dsv3", "error_band": {**plain, "group": "MoE / Hopper"}}]
    bands = error_bands(rows)
    assert bands["MoE / Hopper"]["group"] == "MoE / Hopper"
    assert bands["MoE / Blackwell: B200 / dsv3"] == plain and bands["MoE / Blackwell: GB200 / mixtral"] == anchored


def test_the_step_chart_terms_add_up_to_the_step():
    """The chart's terms (sweep breakdown.png, the HTML step chart) sum to the row's step: host launch time and
    gradient accumulation included (a user trial found DeepSeek-V3's bar 0.6 s short, its host time)."""
    from click.testing import CliRunner as Runner

    from placement.sweep.output import step_terms

    out = Runner().invoke(main, ["plan", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--gpus", "256",
                                 "--seq-len", "4096", "--global-batch", "4096", "--top-k", "1", "--no-map", "--json"])
    plan = json.loads(out.stdout)["plans"][0]
    assert plan["breakdown"]["host"] > 0.1
    assert sum(step_terms(plan).values()) == pytest.approx(plan["step_time_s"], rel=1e-3)


def test_a_design_whose_gpus_cost_more_than_the_budget_is_refused(tmp_path):
    """A user trial: `--set budget=10000000` printed the budget while each design bought 27-38 M of GPUs, silently."""
    study = {**STUDY, "budget": 100_000}  # the designs buy 8 GPUs at 40,000
    res = _sweep(tmp_path, study, "--out", str(tmp_path / "o"))
    assert res.exit_code == 2, res.output
    assert "gpus 8 x capex_per_gpu 40,000 = 320,000, more than the budget 100,000" in res.stderr


def test_the_page_names_each_rows_band_group_and_whether_it_met_the_deadline():
    from placement.html.pages import _band, _cell

    band = {"group": "MoE / Blackwell", "source": "placement validate, code 4b59",
            "published_anchor": {"run": "mb-b200-gpt-oss", "mfu": 0.13}}
    assert _band({"error_band": band}) == "MoE / Blackwell; widened to mb-b200-gpt-oss"
    assert _band({"error_band": {**band, "published_anchor": None}}) == "MoE / Blackwell"
    assert _cell(False, "yesno", "USD") == "MISSED" and _cell(True, "yesno", "USD") == "yes"


def test_an_infeasible_cell_is_told_the_fewest_gpus_a_design_can_buy(tmp_path):
    """The sweep names the GPU count as the design's field: whole nodes on a DGX (88 H100 hold Llama 3 405B at batch
    64, where the doubling said 128), whole racks on an NVL72 (Kimi K2 on one rack: a count of trays would be refused
    as `gpus`)."""
    study = {"name": "inf", "currency": "USD",
             "designs": [{"name": "H100 x16", "cluster": "dgx-h100", "gpus": 16, "price_per_gpu_hour": 2.0},
                         {"name": "GB200", "cluster": "gb200-nvl72", "gpus": 72, "price_per_gpu_hour": 5.0}],
             "workloads": [{"name": "405b", "model": "llama3-405b", "seq_len": 8192, "global_batch": 64,
                            "tokens": 1.0e11},
                           {"name": "kimi", "model": "kimi-k2", "seq_len": 4096, "global_batch": 64,
                            "tokens": 1.0e11}]}
    res = _sweep(tmp_path, study, "--out", str(tmp_path / "o"), "--json")
    rows = {(r["design"], r["workload"]): r for r in json.loads(res.stdout)["rows"]}
    assert "try `gpus: 88` in the design" in rows[("H100 x16", "405b")]["message"]
    told = [int(x) for x in re.findall(r"`gpus: (\d+)`", rows[("GB200", "kimi")]["message"])]
    assert told and all(n % 72 == 0 for n in told)  # `plan --gpus 72` is told 124, 31 trays


def test_a_purchase_cost_set_goes_to_the_designs_bought_only(tmp_path):
    """`--set capex_per_gpu=30000` on a study with a rented design: the rental got a capex beside its price and the
    study was refused; a purchase's inputs go to the designs bought, a rental price to those rented."""
    res = _sweep(tmp_path, STUDY, "--out", str(tmp_path / "o"), "--set", "capex_per_gpu=30000", "--json")
    assert res.exit_code == 0, res.output
    inputs = json.loads(res.stdout)["inputs"]["designs"]
    assert [d.get("capex_per_gpu") for d in inputs if d.get("price_per_gpu_hour") is None] == [30000, 30000]
    assert all(d.get("capex_per_gpu") is None for d in inputs if d.get("price_per_gpu_hour") is not None)


@pytest.mark.parametrize("text, says, not_says", [
    # a misspelled field of a design (nested in a list): the field it missed, by its spelling
    ("name: t\ndesigns:\n  - {name: h, cluster: dgx-h100, gpus: 64, price_per_gpu_hour: 2.5, oversubscripton: 2}\n"
     "workloads:\n  - {name: w, model: llama3-8b, tokens: 1.0e11}\n",
     "field `designs.0.oversubscripton` = 2: Extra inputs are not permitted (it is not a field of this schema: remove "
     "it or correct its spelling); did you mean `oversubscription`?", None),
    # a field no name is close to gets no guess
    ("name: t\ndesigns:\n  - {name: h, cluster: dgx-h100, gpus: 64, price_per_gpu_hour: 2.5, colour: red}\n"
     "workloads:\n  - {name: w, model: llama3-8b, tokens: 1.0e11}\n", "field `designs.0.colour`", "did you mean"),
    # an empty list: what it needs, not pydantic's "Tuple should have at least 1 item after validation"
    ("name: t\ndesigns: []\nworkloads:\n  - {name: w, model: llama3-8b, tokens: 1.0e11}\n",
     "field `designs`: needs at least 1 item, got 0: add some.", "Tuple"),
])
def test_a_misspelled_or_empty_sweep_field_is_named_with_the_fix(tmp_path, text, says, not_says):
    """A user trial: `oversubscripton` was refused without the name it missed (a misspelled model name gets one), and
    `designs: []` said "Tuple should have at least 1 item after validation, not 0"."""
    study = tmp_path / "s.yaml"
    study.write_text(text)
    res = CliRunner().invoke(main, ["sweep", str(study), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and says in res.stderr, res.stderr
    assert not_says is None or not_says not in res.stderr
    assert "Traceback" not in res.output


def test_a_misspelled_model_field_is_named_with_the_field_it_missed(tmp_path):
    """The same for a model file: `num_layerz` names `num_layers`; `model` (close to no field) guesses nothing."""
    model = tmp_path / "m.yaml"
    model.write_text("name: m\nmodel: llama3-8b\nnum_layerz: 4\nhidden_size: 64\nffn_hidden_size: 128\n"
                     "num_attention_heads: 4\nvocab_size: 256\n")
    res = CliRunner().invoke(main, ["plan", "--model", str(model), "--gpus", "8"])
    assert res.exit_code == 2
    assert "field `num_layerz` = 4: Extra inputs are not permitted (it is not a field of this schema: remove it or " \
           "correct its spelling); did you mean `num_layers`?" in res.stderr
    assert "field `model` = 'llama3-8b': Extra inputs are not permitted (it is not a field of this schema: remove " \
           "it or correct its spelling)." in res.stderr


def test_a_set_key_one_typo_away_is_named() -> None:
    """A user trial: `--set energy_prise_per_kwh=...` got the whole key list and no "did you mean"."""
    from placement.errors import InputError
    from placement.sweep.overrides import apply_sets

    with pytest.raises(InputError, match=r"unknown key 'energy_prise_per_kwh'; did you mean energy_price_per_kwh\? "
                                         r"valid keys: "):
        apply_sets({"designs": [], "workloads": []}, ("energy_prise_per_kwh=0.1",))
    with pytest.raises(InputError, match=r"unknown key 'colour'; valid keys: "):
        apply_sets({"designs": [], "workloads": []}, ("colour=red",))


def test_a_what_ifs_command_keeps_pricing_its_row_after_the_next_what_if(tmp_path):
    """A user trial: a `--set oversubscription=4` what-if and then a plain run into the same OUT; the first row's
    command named OUT/clusters/DESIGN.yaml, which the second run rewrote, so it silently priced the second network."""
    study = {**STUDY, "designs": [{"name": "2:1", "cluster": "dgx-h100", "gpus": 512, "price_per_gpu_hour": 2.0,
                                   "oversubscription": 2.0}],
             "workloads": [{**WORKLOAD, "model": "llama3-70b", "global_batch": 512}]}
    first = _sweep(tmp_path, study, "--out", str(tmp_path / "o"), "--json", "--set", "oversubscription=4")
    assert first.exit_code == 0, first.output
    (row,) = json.loads(first.stdout)["rows"]
    second = _sweep(tmp_path, study, "--out", str(tmp_path / "o"), "--json")
    assert second.exit_code == 0, second.output
    (other,) = json.loads(second.stdout)["rows"]
    assert other["command"] != row["command"]  # each names its own cluster file
    args = shlex.split(row["command"])
    done = CliRunner().invoke(main, [*args[1:], "--top-k", "1", "--no-map", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["plans"][0]["step_time_s"] == pytest.approx(row["step_time_s"], rel=1e-6)


@pytest.mark.parametrize(("where", "field", "value", "fix"), [
    ("design", "capex_per_gpu", 40, "e.g. 40000"),
    ("design", "energy_price_per_kwh", 100, "e.g. 0.10"),
    ("design", "amortization_years", 48, "e.g. 4"),
    ("workload", "tokens", 15, "15.0e12 for 15T"),
    ("workload", "tokens", "15T", "write it in full, 1.5e+13"),
])
def test_unit_slips_in_cost_inputs_are_refused_with_the_value_to_write(tmp_path, where, field, value, fix):
    """A user trial: `tokens: 15` (15T meant) priced 0.0 days at a cost of 0, `capex_per_gpu: 40` a 1,024-GPU study at
    4,730 USD, `energy_price_per_kwh: 100` (per MWh) at 4.7 M, `amortization_years: 48` (months) as 48 years; and
    `tokens: 15T` was refused with no fix."""
    design = {**STUDY["designs"][0]}
    workload = {**WORKLOAD}
    (design if where == "design" else workload)[field] = value
    res = _sweep(tmp_path, {**STUDY, "designs": [design], "workloads": [workload]}, "--out", str(tmp_path / "o"))
    assert res.exit_code == 2 and field in res.output and fix in res.output, res.output


def test_a_rows_command_names_the_studys_own_files_by_absolute_path(tmp_path, monkeypatch):
    """A model and a cluster file given by a relative path (beside a sweep file named relative to the directory it
    ran in) were written into the row's command as `--model st/m.yaml --cluster st/c.yaml`, which failed from any
    other directory, though the command is to run from any directory."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    (tmp_path / "ran" / "st").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "ran" / "st" / "m.yaml").write_text((root / "models" / "llama3-8b.yaml").read_text())
    (tmp_path / "ran" / "st" / "c.yaml").write_text((root / "hardware" / "clusters" / "dgx-h100.yaml").read_text())
    study = {**STUDY, "workloads": [{**WORKLOAD, "model": "m.yaml"}],
             "designs": [{"name": "own", "cluster": "c.yaml", "gpus": 8, "price_per_gpu_hour": 2.0}]}
    (tmp_path / "ran" / "st" / "s.yaml").write_text(yaml.safe_dump(study))
    monkeypatch.chdir(tmp_path / "ran")
    res = CliRunner().invoke(main, ["--reproducible", "sweep", "st/s.yaml", "--no-plots", "--workers", "1", "--out",
                                    "o", "--json"])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)["rows"]
    args = shlex.split(row["command"])
    assert args[args.index("--model") + 1] == str(tmp_path / "ran" / "st" / "m.yaml")
    assert args[args.index("--cluster") + 1] == str(tmp_path / "ran" / "st" / "c.yaml")
    monkeypatch.chdir(tmp_path / "elsewhere")
    done = CliRunner().invoke(main, [*args[1:], "--top-k", "1", "--no-map", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["plans"][0]["step_time_s"] == pytest.approx(row["step_time_s"], rel=1e-6)


@pytest.mark.parametrize(("key", "value"), [("pue", 1.6), ("energy_price_per_kwh", 0.3), ("amortization_years", 3)])
def test_a_rental_designs_purchase_inputs_are_an_error_not_dropped(tmp_path, key, value):
    """A user trial: a rental design with `pue: 1.6` (or an energy price, or an amortization) was priced by its hourly
    price alone, the stated value dropped with exit 0, as a capex beside a rental price would be."""
    study = json.loads(json.dumps(STUDY))
    study["designs"][2][key] = value
    res = _sweep(tmp_path, study, "--out", str(tmp_path / "o"))
    assert res.exit_code == 2, res.output
    said = " ".join(res.stderr.split())
    assert "design 'rented'" in said and f"{key} ({value:g})" in said and "would be ignored" in said
    assert "Traceback" not in res.stderr


def test_a_purchase_what_if_on_a_mixed_study_goes_to_the_designs_bought(tmp_path):
    """`--set pue=1.2` on a study with rented and bought designs sets the bought ones' and is no error; on a rental
    alone it would do nothing, and says so."""
    res = _sweep(tmp_path, STUDY, "--out", str(tmp_path / "o"), "--set", "pue=1.2", "--json")
    assert res.exit_code == 0, res.output
    # the rented design states no PUE: its price does not use one (tests/test_sweep_resolved_inputs.py)
    assert [d.get("pue") for d in json.loads(res.stdout)["inputs"]["designs"]] == [1.2, 1.2, None]
    rented = {**STUDY, "designs": STUDY["designs"][2:]}
    res = _sweep(tmp_path, rented, "--out", str(tmp_path / "o2"), "--set", "pue=1.2")
    assert res.exit_code == 2 and "with --set pue=1.2" in res.stderr and "would be ignored" in res.stderr


@pytest.mark.parametrize("currency", ["usd", "Eur", "$", "€", "£", " USD"])
def test_a_currency_written_in_lower_case_or_as_a_symbol_keeps_the_unit_slip_checks(currency):
    """A user trial: `currency: usd` (or `$`) with `capex_per_gpu: 40` (40k meant) priced 8 H100s for two weeks at 478,
    where `currency: USD` refuses the slip; a currency those bounds are not for (JPY) still skips them."""
    design = {**STUDY["designs"][0], "capex_per_gpu": 40}
    with pytest.raises(ValueError, match=r"capex_per_gpu 40 .* thousands written as units"):
        SweepSpec.model_validate({**STUDY, "currency": currency, "designs": [design]})
    priced = {**design, "energy_price_per_kwh": 30.0}  # in yen the default energy price is refused (below)
    assert SweepSpec.model_validate({**STUDY, "currency": "JPY", "designs": [priced]}).currency == "JPY"


def test_a_currency_the_default_energy_price_is_not_in_must_give_it(tmp_path):
    """A QA trial: `currency: JPY` with no energy_price_per_kwh printed `assumed (defaults, no source): energy 0.10
    JPY/kWh` and priced a 1,024-GPU run's energy at a few hundred yen: the default is a USD-scale figure.  A bought
    design in such a currency must give it (exit 2, naming the field, the default and the fix); a rental uses no
    energy price, and the four currencies the default is in keep it."""
    yen = {**STUDY, "currency": "JPY", "designs": STUDY["designs"][:1]}
    with pytest.raises(ValueError, match=r"design 'bought': energy_price_per_kwh is left to its default 0.10, a price "
                                         r"in USD, EUR, GBP or CHF, but the study's currency is 'JPY'"):
        SweepSpec.model_validate(yen)
    res = _sweep(tmp_path, yen, "--out", str(tmp_path / "o"))
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "energy_price_per_kwh" in res.stderr and "--set energy_price_per_kwh=PRICE" in res.stderr
    res = _sweep(tmp_path, yen, "--out", str(tmp_path / "o"), "--set", "energy_price_per_kwh=31", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["cost_input_sources"]["bought"]["energy_price_per_kwh"] == "--set"
    assert SweepSpec.model_validate({**yen, "designs": STUDY["designs"][2:]}).currency == "JPY"  # a rental
    for currency in ("USD", "eur", "£", "CHF"):
        assert SweepSpec.model_validate({**yen, "currency": currency}).designs[0].energy_price_per_kwh == 0.10


def test_a_top_k_the_sweep_does_not_use_is_said(tmp_path):
    """A QA trial: `top_k: 5` in a study (plan's --top-k 5, five layouts a count) was accepted and nothing said a sweep
    keeps one plan a count; the field stays accepted (old files), with a warning on stderr, --json or not."""
    study = {**STUDY, "designs": STUDY["designs"][2:], "top_k": 5}
    res = _sweep(tmp_path, study, "--out", str(tmp_path / "o"), "--json")
    assert res.exit_code == 0, res.output
    assert "warning:" in res.stderr and "top_k 5 is accepted for compatibility and not used" in res.stderr
    assert "--top-k 5" in res.stderr and json.loads(res.stdout)["inputs"]["top_k"] == 5
    res = _sweep(tmp_path, {**study, "top_k": 1}, "--out", str(tmp_path / "o"))
    assert res.exit_code == 0 and "warning" not in res.stderr


def test_a_budget_over_rented_designs_only_is_refused(tmp_path):
    """A QA trial: `budget: 50000000` over four rented designs was printed in the head and changed no row (a budget is
    capex; a rented design gives its gpus and buys nothing).  It is an error naming the budget and the fix."""
    study = {**STUDY, "budget": 50_000_000, "designs": [STUDY["designs"][2]]}
    res = _sweep(tmp_path, study, "--out", str(tmp_path / "o"))
    assert res.exit_code == 2, res.output
    assert "budget 50,000,000 USD is capex" in res.stderr and "every design here is rented" in res.stderr
    assert "remove budget" in res.stderr and "Traceback" not in res.output
    # so is one a --set adds to such a study
    res = _sweep(tmp_path, {**study, "budget": None}, "--out", str(tmp_path / "o2"), "--set", "budget=5e7")
    assert res.exit_code == 2 and "every design here is rented" in res.stderr


def test_a_budget_beside_a_rented_design_says_it_does_not_bind_it(tmp_path):
    """A study with bought and rented designs: the budget bounds the bought ones' capex only; the head, the JSON and
    the page say which rented designs it leaves unbound, and a study without a rented design says nothing more."""
    out = tmp_path / "out"
    page = tmp_path / "page.html"
    res = _sweep(tmp_path, {**STUDY, "budget": 1_000_000}, "--out", str(out), "--report", str(page))
    assert res.exit_code == 0, res.output
    head = " ".join(res.stdout.split("\n\n")[0].split())
    assert ("budget 1,000,000 USD (capex of the bought designs; it does not bound the rented rented, whose bill is "
            "the rows' cost)") in head
    assert json.loads((out / "sweep.json").read_text())["budget_rented_designs"] == ["rented"]
    assert "it does not bound the rented rented" in page.read_text().replace("&#39;", "'")
    bought = {**STUDY, "budget": 1_000_000, "designs": STUDY["designs"][:2]}
    res = _sweep(tmp_path, bought, "--out", str(tmp_path / "o2"))
    assert res.exit_code == 0 and "does not bound" not in res.stdout
    assert json.loads((tmp_path / "o2" / "sweep.json").read_text())["budget_rented_designs"] == []


def test_an_oversubscribed_leaf_no_count_crosses_is_said_to_price_nothing(tmp_path):
    """A QA trial: a 256-H100 design (32 nodes, 32 to a leaf) at 2:1 was priced to the digit as at 1:1, and its
    `network of` line said `leaf 2:1` with no word that the ratio changed nothing; a 512-GPU design at 2:1 spans two
    leaves, and is priced slower than at 1:1, so it gets no such note."""
    from placement.sweep.output import network_lines, network_sources

    designs = [{"name": f"{n} {r}:1", "cluster": "dgx-h100", "gpus": n, "price_per_gpu_hour": 2.0,
                "oversubscription": float(r)} for n in (256, 512) for r in (1, 2)]
    study = {"name": "leaf", "designs": designs,
             "workloads": [{**WORKLOAD, "model": "llama3-70b", "seq_len": 8192, "global_batch": 512}]}
    res = _sweep(tmp_path, study, "--out", str(tmp_path / "o"), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    step = {r["design"]: r["step_time_s"] for r in doc["rows"]}
    assert step["256 2:1"] == step["256 1:1"] and step["512 2:1"] > step["512 1:1"]
    net = doc["network_sources"]
    assert "note" not in net["256 1:1"]["oversubscription"] and "note" not in net["512 2:1"]["oversubscription"]
    note = net["256 2:1"]["oversubscription"]["note"]
    assert note == ("every count of the design's 256 GPUs runs under one leaf (32 nodes): no traffic crosses its "
                    "uplinks, so its 2:1 prices as 1:1 does")
    spec = SweepSpec.model_validate(study)
    assert network_lines(network_sources(spec))[1].endswith(f"; {note}")


def test_the_objective_and_currency_left_to_their_default_are_named(tmp_path):
    """A QA trial: a study without `objective` printed `objective time` as if chosen (under it a budget design buys
    every GPU the budget affords), and USD as if given.  The head marks each `(default)`, sweep.json's
    `study_defaults` and the page name them; a study (or a --set) that gives them gets no mark."""
    study = {**STUDY, "designs": [STUDY["designs"][2]]}
    out, page = tmp_path / "o", tmp_path / "p.html"
    res = _sweep(tmp_path, study, "--out", str(out), "--report", str(page))
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[0] == "study inputs: objective time (default), money in USD (default)"
    assert json.loads((out / "sweep.json").read_text())["study_defaults"] == ["objective", "currency"]
    shown = " ".join(re.sub(r"<[^>]+>", " ", page.read_text()).split())
    assert "study defaults objective time currency USD" in shown
    assert "cost (USD)" in shown  # the money columns keep their label
    res = _sweep(tmp_path, {**study, "currency": "EUR"}, "--out", str(tmp_path / "o2"), "--set", "objective=cost")
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[0] == "study inputs: objective cost"
    assert json.loads((tmp_path / "o2" / "sweep.json").read_text())["study_defaults"] == []


def test_a_nic_or_leaf_size_no_count_uses_is_said_to_price_nothing(tmp_path):
    """A QA note: an 8-GPU design's `nic_bandwidth_bytes_per_s: 12.5e9` printed 'NIC 12.5 GB/s per GPU (study file)'
    and was priced to the digit as the catalog's 50 GB/s (one node: nothing crosses a NIC), and a 64-GPU design's
    `nodes_per_leaf: 8` as the catalog's 32 (8 nodes, one leaf of either size), with no word; a 16-GPU design's slow
    NIC, which its two nodes send over, and a 128-GPU design's 8-node leaves (16 nodes, two leaves) get no note."""
    from placement.sweep.output import network_lines, network_sources

    designs = [{"name": "8 base", "cluster": "dgx-h100", "gpus": 8, "price_per_gpu_hour": 2.0},
               {"name": "8 slow nic", "cluster": "dgx-h100", "gpus": 8, "price_per_gpu_hour": 2.0,
                "nic_bandwidth_bytes_per_s": 12.5e9},
               {"name": "16 base", "cluster": "dgx-h100", "gpus": 16, "price_per_gpu_hour": 2.0},
               {"name": "16 slow nic", "cluster": "dgx-h100", "gpus": 16, "price_per_gpu_hour": 2.0,
                "nic_bandwidth_bytes_per_s": 12.5e9},
               {"name": "64 base", "cluster": "dgx-h100", "gpus": 64, "price_per_gpu_hour": 2.0},
               {"name": "64 small leaf", "cluster": "dgx-h100", "gpus": 64, "price_per_gpu_hour": 2.0,
                "nodes_per_leaf": 8},
               {"name": "128 small leaf", "cluster": "dgx-h100", "gpus": 128, "price_per_gpu_hour": 2.0,
                "nodes_per_leaf": 8, "oversubscription": 2.0}]
    study = {"name": "net", "designs": designs, "workloads": [WORKLOAD]}
    res = _sweep(tmp_path, study, "--out", str(tmp_path / "o"), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    step = {r["design"]: r["step_time_s"] for r in doc["rows"]}
    assert step["8 slow nic"] == step["8 base"] and step["64 small leaf"] == step["64 base"]
    assert step["16 slow nic"] > step["16 base"]
    net = doc["network_sources"]
    assert net["8 slow nic"]["nic_bandwidth_bytes_per_s"]["note"] == (
        "every count of the design's 8 GPUs runs inside one nvlink4 domain: no traffic crosses a NIC, so its 12.5 "
        "GB/s prices as cluster dgx-h100's 50 does")
    assert net["64 small leaf"]["nodes_per_leaf"]["note"] == (
        "every count of the design's 64 GPUs runs under one leaf of either size: its 8 per leaf prices as cluster "
        "dgx-h100's 32 does")
    for name, field in (("16 slow nic", "nic_bandwidth_bytes_per_s"), ("128 small leaf", "nodes_per_leaf"),
                        ("8 base", "nic_bandwidth_bytes_per_s"), ("64 base", "nodes_per_leaf")):
        assert "note" not in net[name][field], (name, net[name][field])
    lines = network_lines(network_sources(SweepSpec.model_validate(study)))
    assert lines[1].endswith(f"; {net['8 slow nic']['nic_bandwidth_bytes_per_s']['note']}")
