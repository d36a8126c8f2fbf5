"""A part outside the catalog: a cluster file's `accelerator` names an accelerator YAML of the user's (a user trial
had to copy a V100 file into the installed package to describe its job)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from placement.catalog import load_accelerator, load_cluster
from placement.cli import main
from placement.errors import InputError


def _part(**change) -> dict:
    """The catalog H100 with its bandwidth, peak and name changed: a part the catalog lacks."""
    part = load_accelerator("h100-sxm").model_dump(mode="json")
    return {**part, "name": "h20-test", "peak_flops_bf16": 148e12, "peak_flops_fp8": 296e12,
            "hbm_bandwidth_bytes_per_s": 4.0e12, **change}


def _files(tmp_path: Path, part: dict, ref: str = "parts/h20-test.yaml") -> Path:
    (tmp_path / "parts").mkdir(exist_ok=True)
    (tmp_path / "parts" / "h20-test.yaml").write_text(yaml.safe_dump(part))
    cluster = {**load_cluster("dgx-h100").model_dump(mode="json"), "name": "hgx-h20-test", "accelerator": ref}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cluster))
    return path


def test_a_cluster_file_prices_its_own_part_read_relative_to_the_file(tmp_path: Path, monkeypatch) -> None:
    cluster = _files(tmp_path, _part())
    monkeypatch.chdir("/")  # the part's path is relative to the cluster file, not to the working directory
    assert load_cluster(str(cluster)).accelerator == str(tmp_path / "parts" / "h20-test.yaml")
    run = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", str(cluster), "--gpus", "8",
                                    "--zero", "3", "--json"])
    assert run.exit_code == 0, run.output
    mine = json.loads(run.stdout)
    base = json.loads(CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100",
                                                "--gpus", "8", "--zero", "3", "--json"]).stdout)
    assert mine["accelerator"] == "h20-test"
    # the part's numbers are priced: 148 of 989 TFLOP/s makes the same job's compute about 6.7x as long
    assert mine["step_time_s"] > 4.0 * base["step_time_s"]
    # where the part came from is said beside the fabric, as a value read from a file
    assert f"accelerator h20-test from {tmp_path / 'parts' / 'h20-test.yaml'}" in mine["fabric"]
    assert "the tiers of --cluster" in mine["fabric"] and "catalog file" not in mine["fabric"]
    shown = CliRunner().invoke(main, ["show", "cluster", str(cluster)])
    assert shown.exit_code == 0 and f"(accelerator from {tmp_path / 'parts' / 'h20-test.yaml'})" in shown.output


def test_a_users_part_may_not_take_a_catalog_parts_name(tmp_path: Path) -> None:
    """Published runs and calibration profiles match parts by name: an H100 file with other numbers under the name
    h100-sxm would be compared with the catalog H100's runs."""
    cluster = _files(tmp_path, _part(name="h100-sxm"))
    with pytest.raises(InputError, match=r"field `name` = 'h100-sxm' is a catalog accelerator's name; give your part "
                                         r"a name of its own .* or write `accelerator: h100-sxm`"):
        load_cluster(str(cluster))


def test_a_users_part_is_checked_like_a_catalog_one(tmp_path: Path) -> None:
    cluster = _files(tmp_path, {k: v for k, v in _part().items() if k != "hbm_bytes"})
    run = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", str(cluster), "--gpus", "8"])
    assert run.exit_code == 2 and "Traceback" not in run.output
    assert "h20-test.yaml: field `hbm_bytes` is missing" in run.output.replace("\n", " ")


@pytest.mark.parametrize(("change", "says"), [
    # TFLOP/s written bare: priced, it made a 48,685,100,000,000 s step and a `plan` "infeasible (recipe)"
    ({"peak_flops_bf16": 148}, "field `peak_flops_bf16` = 148: 148 FLOP/s is outside 1e+12 to 1e+17, a unit slip"),
    ({"peak_flops_fp8": 296e6}, "field `peak_flops_fp8` = 296000000.0: 2.96e+08 FLOP/s is outside"),
    # GB written bare: priced as 0 GiB of HBM, and `plan` told to use a smaller model
    ({"hbm_bytes": 96}, "field `hbm_bytes` = 96: 96 bytes is outside 1073741824 (1 GiB) to 1e+13, a unit slip: HBM "
                        "here is bytes, so 96 GB is 96000000000"),
    # an exponent PyYAML leaves as text, for an integer: the number to write
    ({"hbm_bytes": "96e9"}, "field `hbm_bytes` = '96e9': an integer expected, not the text '96e9': write it out in "
                            "full, 96000000000"),
    ({"peak_flops_fp8": 100e12}, "peak_flops_fp8 1e+14 is below peak_flops_bf16 1.48e+14"),
])
def test_a_parts_unit_slip_is_an_error_naming_the_number_to_write(tmp_path: Path, change: dict, says: str) -> None:
    cluster = _files(tmp_path, _part(**change))
    run = CliRunner().invoke(main, ["show", "cluster", str(cluster)])
    assert run.exit_code == 2 and says in run.output, run.output


@pytest.mark.parametrize(("scale_up", "says"), [
    # more aggregate than seven 30 GB/s links carry: printed as 430 GB/s, priced at 7 x 30 (tp8 2.5 s -> 6.4 s)
    ({"kind": "full_mesh", "bandwidth_bytes_per_s": 537.6e9, "peer_bandwidth_bytes_per_s": 30e9},
     "scale_up.bandwidth_bytes_per_s 5.376e+11 is more than its 7 peer links carry (7 x peer_bandwidth_bytes_per_s "
     "3e+10 = 2.1e+11)"),
    # a peer rate on a switch: priced nowhere, so a typo there would vanish
    ({"peer_bandwidth_bytes_per_s": 1e9}, "scale_up.peer_bandwidth_bytes_per_s 1e+09 is set but scale_up.kind is "
                                          "switched"),
])
def test_a_scale_up_whose_links_contradict_it_is_an_error(tmp_path: Path, scale_up: dict, says: str) -> None:
    path = _files(tmp_path, _part())
    cluster = yaml.safe_load(path.read_text())
    cluster["scale_up"] = {**cluster["scale_up"], **scale_up}
    path.write_text(yaml.safe_dump(cluster))
    run = CliRunner().invoke(main, ["show", "cluster", str(path)])
    assert run.exit_code == 2 and says in run.output, run.output


def test_a_file_of_another_kind_is_named_as_that_kind(tmp_path: Path) -> None:
    """A user trial's cluster file as an accelerator (and the other ways round) got a dozen missing / extra field
    errors, one with a wrong "did you mean"; the error says what the file is and where it goes."""
    cluster = _files(tmp_path, _part())
    part = tmp_path / "parts" / "h20-test.yaml"
    wrong = yaml.safe_load(cluster.read_text()) | {"accelerator": str(cluster)}
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(wrong))
    for argv, says in ((["show", "cluster", str(tmp_path / "w.yaml")],
                        f"{cluster} is a cluster file (its fields accelerator, default_num_gpus, gpus_per_node, "),
                       (["show", "cluster", str(tmp_path / "w.yaml")],
                        "are a cluster's), not an accelerator file; give it as --cluster"),
                       (["show", "cluster", str(part)], f"{part} is an accelerator file"),
                       (["show", "model", str(cluster)], f"{cluster} is a cluster file")):
        run = CliRunner().invoke(main, argv)
        assert run.exit_code == 2 and says in run.output, run.output
        assert "Extra inputs" not in run.output


def test_plan_and_evaluate_json_carry_the_fabric_as_numbers(tmp_path: Path) -> None:
    """`fabric` is prose (a sweep trial had to parse it); `fabric_levels` holds each level's numbers, the ones priced:
    a cluster file of the user's with one node per leaf under 2:1 uplinks shows the spine at half the NIC's rate."""
    path = _files(tmp_path, _part())
    cluster = yaml.safe_load(path.read_text())
    cluster["tiers"][0].update(fanout=1, oversubscription=2.0)
    path.write_text(yaml.safe_dump(cluster))
    ev = json.loads(CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", str(path), "--gpus",
                                              "16", "--json"]).stdout)
    levels = ev["fabric_levels"]
    assert [lv["name"] for lv in levels] == [cluster["scale_up"]["name"], *(t["name"] for t in cluster["tiers"][:2])]
    assert [lv["block_gpus"] for lv in levels] == [8, 8, 16] and levels[2]["oversubscription"] == 2.0
    nic = cluster["nic_bandwidth_bytes_per_s"] * cluster["nic_collective_efficiency"]
    assert (levels[1]["bandwidth_bytes_per_s"], levels[2]["bandwidth_bytes_per_s"]) == pytest.approx((nic, nic / 2))
    planned = json.loads(CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", str(path), "--gpus",
                                                   "16", "--json"]).stdout)
    assert planned["fabric_levels"] == levels and planned["plans"][0]["fabric_levels"] == levels
