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
    mine = json.loads(run.output)
    base = json.loads(CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100",
                                                "--gpus", "8", "--zero", "3", "--json"]).output)
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
