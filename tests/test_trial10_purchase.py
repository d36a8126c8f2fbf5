"""A user trial of purchase planning (plan and sweep across designs): what the outputs call things must be what the
numbers describe."""

from __future__ import annotations

import json

from click.testing import CliRunner

from placement.cli import main

MAKE_PLAN = ["plan", "--model", "llama3-405b", "--cluster", "dgx-h100", "--gpus", "16384", "--seq-len", "8192",
             "--global-batch", "2048", "--top-k", "1"]


def test_the_gradient_group_of_a_cp_layout_is_named_dp_x_cp():
    """Megatron reduces gradients over dp x cp: the mapping table said "dp 64 x 256" beside a layout of dp128 cp2."""
    res = CliRunner().invoke(main, MAKE_PLAN)
    assert res.exit_code == 0, res.output
    plan = json.loads(CliRunner().invoke(main, [*MAKE_PLAN, "--json"]).stdout)["plans"][0]
    lay, dp = plan["layout"], plan["crossings"]["dp"]
    assert lay["cp"] > 1 and dp["group_size"] == lay["dp"] * lay["cp"]  # the JSON key stays "dp"
    rows = res.stdout.split("count x size", 1)[1].splitlines()
    assert any(r.split()[:4] == ["dp", "x", "cp", f"{dp['groups']}"] for r in rows), rows
    assert not any(r.split()[:2] == ["dp", f"{dp['groups']}"] for r in rows)


def test_a_float_field_takes_decimal_text_and_an_integer_field_refuses_it():
    """The README's rule, as a user trial read it against the schema: `tokens: 1e11` (YAML 1.1 text) is a number,
    and so a quoted decimal is too; an integer field refuses a quoted number."""
    import pydantic
    import pytest

    from placement.sweep.spec import WorkloadSpec

    base = {"name": "w", "model": "llama3-8b", "tokens": 1e9, "seq_len": 8192, "global_batch": 512}
    assert WorkloadSpec.model_validate({**base, "tokens": "1e11"}).tokens == 1e11
    assert WorkloadSpec.model_validate({**base, "tokens": "100000000000"}).tokens == 1e11
    with pytest.raises(pydantic.ValidationError, match="an integer expected, not a string"):
        WorkloadSpec.model_validate({**base, "seq_len": "8192"})
    with pytest.raises(pydantic.ValidationError, match="expected, not true/false"):
        WorkloadSpec.model_validate({**base, "tokens": True})


def test_an_oversubscription_what_if_on_a_catalog_cluster_is_told_how_to_run():
    res = CliRunner().invoke(main, ["plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "1024",
                                    "--oversubscription", "4"])
    assert res.exit_code == 2
    assert "tiers[0].oversubscription: 4" in res.stderr and "dgx-h100.yaml" in res.stderr
    assert "--set oversubscription=4" in res.stderr


def test_a_sweeps_network_what_if_is_said_with_its_source(tmp_path):
    """A user trial: `--set oversubscription=4` priced every row on a 4:1 leaf while the summary, the CSV and the rows'
    `cluster` said nothing but the catalog's 1:1 cluster."""
    import csv

    study = tmp_path / "s.yaml"
    study.write_text("name: t\nobjective: time\ndesigns:\n"
                     "  - {name: A, cluster: dgx-h100, gpus: 256, price_per_gpu_hour: 2.0}\n"
                     "  - {name: B, cluster: dgx-h100, gpus: 256, price_per_gpu_hour: 2.0, oversubscription: 2}\n"
                     "workloads:\n  - {name: w, model: llama3-70b, tokens: 1.0e11, seq_len: 8192, global_batch: 512}\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["sweep", str(study), "--out", str(out), "--no-plots", "--set",
                                    "designs.A.oversubscription=4"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "network of A: leaf 4:1 (--set), 32 nodes per leaf (cluster dgx-h100's file)" in text
    # on GB200 a leaf's fanout counts NVL72 racks, and says so (a user trial read `nodes_per_leaf: 1` as one tray)
    racks = tmp_path / "r.yaml"
    racks.write_text(study.read_text().replace("cluster: dgx-h100, gpus: 256", "cluster: gb200-nvl72, gpus: 288"))
    rack = CliRunner().invoke(main, ["sweep", str(racks), "--out", str(tmp_path / "o3"), "--no-plots", "--set",
                                     "designs.A.nodes_per_leaf=1"])
    assert rack.exit_code == 0, rack.output
    assert "1 72-GPU nvlink5-nvl72 domain (18 nodes each) per leaf (--set)" in " ".join(rack.stdout.split())
    assert "network of B: leaf 2:1 (study file)" in text
    doc = json.loads((out / "sweep.json").read_text())
    # A's 256 GPUs sit under one 32-node leaf: its 4:1 is said to price nothing (test_sweep_inputs)
    over = doc["network_sources"]["A"]["oversubscription"]
    assert over["value"] == 4.0 and over["source"] == "--set" and "under one leaf" in over["note"]
    assert doc["network_sources"]["B"]["nic_bandwidth_bytes_per_s"]["source"] == "cluster dgx-h100's file"
    rows = {r["design"]: r for r in csv.DictReader((out / "sweep.csv").open())}
    assert float(rows["A"]["leaf_oversubscription"]) == 4.0 and float(rows["B"]["leaf_oversubscription"]) == 2.0
    plain = CliRunner().invoke(main, ["sweep", str(study), "--out", str(tmp_path / "o2"), "--no-plots", "--report",
                                      str(tmp_path / "r.html")])
    said = " ".join(plain.stdout.split())
    # the catalog's own 1:1 network is said too, in the text and on the page: it is what B's 2:1 is compared with
    assert "network of A: leaf 1:1 (cluster dgx-h100's file)" in said and "network of B: leaf 2:1 (study file)" in said
    page = " ".join((tmp_path / "r.html").read_text().split())
    assert "network of A: leaf 1:1" in page and "network of B: leaf 2:1 (study file)" in page


def test_a_hf_config_is_named_by_its_own_name_or_its_hub_repository(tmp_path):
    """A user trial's `--model in/config.json` printed "in on 1024 x h100-sxm": the folder's name."""
    from pathlib import Path

    from placement.loaders.hf_config import load_hf_config

    src = json.loads((Path(__file__).parent / "data" / "hf" / "llama-3.1-8b" / "config.json").read_text())
    plain = tmp_path / "in" / "config.json"
    plain.parent.mkdir()
    plain.write_text(json.dumps(src))
    assert load_hf_config(plain).name == "in"  # nothing better to go by
    plain.write_text(json.dumps({**src, "_name_or_path": "meta-llama/Llama-3.1-8B"}))
    assert load_hf_config(plain).name == "meta-llama/Llama-3.1-8B"
    plain.write_text(json.dumps({**src, "_name_or_path": "/scratch/ckpt"}))  # a local path names nothing
    assert load_hf_config(plain).name == "in"
    cached = tmp_path / "models--meta-llama--Llama-3.1-8B" / "snapshots" / "0e9e39f" / "config.json"
    cached.parent.mkdir(parents=True)
    cached.write_text(json.dumps(src))
    assert load_hf_config(cached).name == "meta-llama/Llama-3.1-8B"


def test_the_readme_study_table_prints_each_rows_days_as_the_summary_does():
    """A user trial: the README's `100.6 (98.0-129.4)` beside the summary's `100.6 (97-130)`, one band three ways."""
    from placement.sweep.output import days_text

    row = {"time_to_train_days": 100.6, "time_to_train_days_low": 97.96, "time_to_train_days_high": 129.35}
    assert days_text(row) == "100.6 (97-130)"
    short = {"time_to_train_days": 14.0, "time_to_train_days_low": 11.61, "time_to_train_days_high": 16.94}
    assert days_text(short) == "14.0 (11.6-17.0)"
    import re
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    study = readme.split("<!-- sweep-study:begin -->", 1)[1].split("<!-- sweep-study:end -->", 1)[0]
    bands = re.findall(r"\| ([\d,.]+) \(([\d,.]+)-([\d,.]+)\) \|", study)
    assert bands
    for point, low, high in bands:  # whole days from 20 days on, one decimal below, as days_text prints them
        whole = float(point.replace(",", "")) >= 20
        assert all(("." not in x) is whole for x in (low, high)), (point, low, high)


def test_the_memory_table_names_the_optimizer_priced():
    """A user trial: a Muon run was shown Adam's optimizer state with nothing to say Adam was assumed."""
    base = ["plan", "--model", "llama3-8b", "--gpus", "8", "--top-k", "1"]
    assert "optimizer state (Adam: fp32 master + fp32 moments)" in CliRunner().invoke(main, base).stdout
    bf16 = CliRunner().invoke(main, [*base, "--optimizer-state-bf16"]).stdout
    assert "optimizer state (Adam: fp32 master + bf16 moments)" in bf16


def test_a_set_null_network_override_is_sourced_to_the_cluster_file():
    """`--set designs.B.oversubscription=null` drops the file's 2:1: the design is priced on the cluster's 1:1, which
    network_sources (sweep.json, the summary's `network of` line) labelled `--set` as if the --set had given 1:1."""
    from placement.sweep.output import network_lines, network_sources
    from placement.sweep.overrides import apply_sets
    from placement.sweep.spec import SweepSpec

    data = {"name": "n", "designs": [
        {"name": "B", "cluster": "dgx-h100", "gpus": 16, "price_per_gpu_hour": 2.0, "oversubscription": 2.0}],
        "workloads": [{"name": "w", "model": "llama3-8b", "tokens": 1.0e11, "seq_len": 8192, "global_batch": 512}]}
    sets = ("designs.B.oversubscription=null",)
    spec = SweepSpec.model_validate(apply_sets(data, sets))
    assert spec.designs[0].oversubscription is None
    net = network_sources(spec, sets)
    assert net["B"]["oversubscription"] == {"value": 1.0, "source": "cluster dgx-h100's file"}
    assert network_lines(net)[0].startswith("network of B: leaf 1:1 (cluster dgx-h100's file)")
    # a --set that gives a value keeps its label
    given = ("designs.B.oversubscription=4",)
    over = network_sources(SweepSpec.model_validate(apply_sets(data, given)), given)["B"]["oversubscription"]
    assert (over["value"], over["source"]) == (4.0, "--set")  # and a note: 16 GPUs sit under one leaf
