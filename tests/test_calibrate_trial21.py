"""`placement calibrate` after a user trial of its profiles: a step fit held near the defaults by its prior says so,
a profile edited after the fit is said to be, a value the fit did not identify is not priced in silence, and the
notes name the cluster's own scale-up fabric and an accelerator without FP8."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml
from click.testing import CliRunner
from synthetic_calibration import TRUTH, _write_nccl_text, write_log

from placement.cli import main

NCCL = Path(__file__).parent / "data" / "nccl"
RING = NCCL / "h100-2node-all_reduce_perf-ring.txt"  # 2 x 8 H100: fits hierarchical_serial_share, not the NIC's


def _calibrate(tmp_path: Path, *args: str) -> tuple[Path, str]:
    out = tmp_path / "profile.yaml"
    result = CliRunner().invoke(main, ["calibrate", *args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out, result.output


def _evaluate(profile: Path, *extra: str):
    return CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16",
                                     "--tp", "1", "--pp", "1", "--zero", "1", "--recompute", "full",
                                     "--calibration", str(profile), *extra])


def test_a_step_fit_says_its_prior_holds_it_near_the_default(tmp_path: Path) -> None:
    """One run, one free constant, nowhere near its bounds, and the run still priced 4.5 % fast: the fit is a
    compromise with a prior at the default, which the README and the note did not say."""
    log = write_log(tmp_path / "run.log", 8, 1, 1, 64, 8192, TRUTH, np.random.default_rng(0), 0.0)
    out, _ = _calibrate(tmp_path, "--steps", str(log), "--cluster", "dgx-h100", "--gpus", "8")
    constants = yaml.safe_load(out.read_text())["constants"]
    fitted = [c for c in constants.values() if c["identified"]]
    assert fitted and all("fitted with a prior at its default" in c["note"] for c in fitted)


def test_a_profile_edited_after_the_fit_is_said_to_be(tmp_path: Path) -> None:
    out, _ = _calibrate(tmp_path, "--nccl", str(RING), "--cluster", "dgx-h100", "--gpus", "16")
    data = yaml.safe_load(out.read_text())
    share = data["constants"]["hierarchical_serial_share"]
    assert share["identified"] and share["fitted_value"] == share["value"]
    assert not data["constants"]["network_efficiency"]["identified"]
    untouched = _evaluate(out)
    assert "edited after the fit" not in untouched.output and "not identified by the fit" not in untouched.output

    share["value"] = 1.0  # by hand
    data["constants"]["network_efficiency"]["value"] = 0.46  # not identified: the default still prices
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    result = _evaluate(out)
    edited = f"edited after the fit: hierarchical_serial_share fitted {share['fitted_value']:.4g}, set to 1"
    assert edited in result.output
    assert ("network_efficiency is 0.46 in the file but not identified by the fit, so it is priced at its default "
            "0.92") in result.output
    summary = json.loads(_evaluate(out, "--json").stdout)["calibration"]
    assert summary["edited_after_fit"] == {"hierarchical_serial_share": share["fitted_value"]}
    assert summary["not_applied"] == {"network_efficiency": 0.46}

    # on another cluster of the same design the default it prices is that cluster's (a review: the profile's was named)
    other = tmp_path / "my-h100.yaml"
    other.write_text((Path(__file__).parent.parent / "hardware" / "clusters" / "dgx-h100.yaml").read_text()
                     .replace("name: dgx-h100", "name: my-h100")
                     .replace("nic_collective_efficiency: 0.92", "nic_collective_efficiency: 0.80"))
    moved = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", str(other), "--gpus", "16",
                                      "--tp", "1", "--pp", "1", "--zero", "1", "--recompute", "full",
                                      "--calibration", str(out)])
    assert "not identified by the fit, so it is priced at its default 0.8;" in moved.output, moved.output

    data["constants"]["network_efficiency"]["identified"] = True  # now priced, and said to be set by hand
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    assert "network_efficiency not identified, set to 0.46" in _evaluate(out).output


def test_the_notes_name_the_clusters_fabric_and_an_accelerator_without_fp8(tmp_path: Path) -> None:
    """MI300X's notes said NVLink (its fabric is xGMI); A100's FP8 ceiling was shown as a value (its BF16 one)."""
    _, text = _calibrate(tmp_path, "--nccl", str(NCCL / "a100-40g-1node-old-format-all_reduce_perf.txt"),
                         "--cluster", "dgx-a100-40g")
    assert "a100-40g has no FP8" in text
    n, sizes = 16, [2**k for k in range(20, 31)]
    times = np.array([20e-6 + s * 2 * (n - 1) / n / 300e9 for s in sizes])
    path = _write_nccl_text(tmp_path / "mi300x.txt", "all_reduce", 2, 8, "AMD Instinct MI300X", times, sizes)
    _, text = _calibrate(tmp_path, "--nccl", str(path), "--cluster", "mi300x", "--gpus", "16")
    assert "no one-node run: xGMI's constants" in text and "NVLink" not in text
