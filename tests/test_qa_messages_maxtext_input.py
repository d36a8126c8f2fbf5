"""Messages a user trial found wrong (MaxText audit and --model): an empty YAML told it lacked ConfigContainer
sections; a fractional per_device_batch_size told to pass --global-batch 19.2 (which the flag refuses); a TPU launch
priced on H100 without a word; a folder without config.json looked up as a catalog name."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from placement.cli import main

AUDIT = ["audit", "--model", "llama3-70b", "--gpus", "64"]


def _yaml(tmp_path, text: str):
    path = tmp_path / "job.yml"
    path.write_text(text)
    return CliRunner().invoke(main, [*AUDIT, "--launch", str(path)])


def test_an_empty_yaml_is_said_to_be_empty(tmp_path) -> None:
    got = _yaml(tmp_path, "# only a comment\n")
    assert got.exit_code == 2 and "holds nothing (it is empty or only comments)" in got.output
    assert "ConfigContainer" not in got.output


def test_a_fractional_batch_names_the_key_and_whole_values_that_work(tmp_path) -> None:
    base = 'base_config: "base.yml"\nhardware: "gpu"\nmodel_name: "llama3-70b"\nici_fsdp_parallelism: 8\n'
    got = _yaml(tmp_path, base + "per_device_batch_size: 0.3\n")
    assert got.exit_code == 2 and "--global-batch 19.2" not in got.output
    assert "per_device_batch_size 0.3 x 64 devices = 19.2, not a whole number" in got.output
    offered = [float(v) for v in re.findall(r"= ([\d.]+)(?: or|$)", got.output.split("e.g. ")[1].strip())]
    assert offered
    for value in offered:  # each value offered is one the audit then takes (a review: 19/64 was refused next)
        ok = _yaml(tmp_path, base + f"per_device_batch_size: {value}\n")
        assert ok.exit_code in (0, 1), (value, ok.output)


def test_a_launch_on_tpus_says_it_is_priced_on_gpus(tmp_path) -> None:
    base = 'base_config: "base.yml"\nmodel_name: "llama3-70b"\nici_fsdp_parallelism: 8\nper_device_batch_size: 1\n'
    path = tmp_path / "job.yml"
    for hardware, said in (("", True), ('hardware: "tpu"\n', True), ('hardware: "gpu"\n', False)):
        path.write_text(base + hardware)
        got = CliRunner().invoke(main, [*AUDIT, "--launch", str(path), "--json"])
        assert got.exit_code in (0, 1), got.output
        notes = json.loads(got.stdout)["layout"]["ignored"]
        assert any(n.startswith("hardware 'tpu'") and "TPUs, not GPUs" in n for n in notes) is said, hardware


def test_a_folder_without_config_json_is_named_as_such(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # a folder named without a slash, as the trial wrote it
    (tmp_path / "emptydir").mkdir()
    got = CliRunner().invoke(main, ["plan", "--model", "emptydir", "--gpus", "8"], catch_exceptions=False)
    assert got.exit_code == 2 and "holds config.json, and this one holds none" in got.output
    miss = CliRunner().invoke(main, ["plan", "--model", "llama3-8bx", "--gpus", "8"])
    assert miss.exit_code == 2 and "HuggingFace config.json" in miss.output


def test_an_ici_product_off_the_host_names_the_axes_and_their_lines(tmp_path) -> None:
    """A user trial's mismatch read "the files fix a node type of 512 GPUs (--node-type), or fix their ici_*/dcn_*
    parallelism", naming no axis."""
    got = _yaml(tmp_path, 'base_config: "base.yml"\nhardware: "gpu"\nmodel_name: "llama3-70b"\n'
                          'ici_fsdp_parallelism: 4\nici_tensor_parallelism: 4\nper_device_batch_size: 1\n')
    assert got.exit_code == 2 and "Traceback" not in got.output
    assert "ici_fsdp_parallelism 4 x ici_tensor_parallelism 4 (" in got.output and "job.yml:4" in got.output
    assert "multiply to 16, but the job has 8" in got.output


def test_a_local_folder_does_not_hide_a_catalog_model(tmp_path, monkeypatch) -> None:
    """A review: `--out llama3-8b` leaves a folder that then shadowed the catalog's llama3-8b."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "llama3-8b").mkdir()
    got = CliRunner().invoke(main, ["show", "model", "llama3-8b", "--json"])
    assert got.exit_code == 0 and json.loads(got.stdout)["name"] == "llama3-8b"
