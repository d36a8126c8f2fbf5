"""`placement calibrate` after a user trial: the network fit decides bandwidths by bandwidth-bound rows and latencies
by latency-bound rows (and says when a class of rows comes out worse), a value far from its default either way is
a warning, nccl-tests files are checked (device, two runs, failed data checks, cut rows, launcher prefixes), and a
profile applied to another cluster design, or to a plan, says what it changes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from synthetic_calibration import write_nccl

from placement.calibration.calibrate import Calibration
from placement.calibration.nccl_tests import accelerator_of, read_nccl_tests
from placement.calibration.profile import Residual
from placement.catalog import load_accelerator, load_cluster
from placement.cli import main
from placement.errors import InputError
from placement.topology import Topology

NCCL = Path(__file__).parent / "data" / "nccl"
A3MEGA = NCCL / "h100-a3mega-2node-all_reduce_perf.txt"
TWO_NODE = NCCL / "h100-2node-all_reduce_perf.txt"


def _base(cluster: str = "dgx-h100", gpus: int = 64) -> Topology:
    spec = load_cluster(cluster)
    return Topology(spec, load_accelerator(spec.accelerator), num_gpus=gpus)


def _err(r: Residual, attr: str) -> float:
    return abs(getattr(r, attr) / r.measured - 1)


def _edited(tmp_path: Path, name: str, edit) -> Path:
    out = tmp_path / name
    out.write_text("\n".join(edit(TWO_NODE.read_text().splitlines())) + "\n")
    return out


# -- 1. the fit: bandwidth from bandwidth-bound rows, latency from latency-bound rows ------------------------------

def test_a_two_node_log_with_flat_small_rows_no_longer_makes_its_large_messages_worse() -> None:
    """GCP A3 Mega, 2 x 8 H100, 8 B - 8 GiB (18 flat rows near 123 us): fitted on every row at once, NVLink's
    efficiency fell to 0.615 and the 8 GiB row went from +35 % to +64 %.  Now the bandwidth-bound rows decide the
    bandwidth and come out better, the latency-bound rows decide the latency, and a 2-node run moves no NVLink
    constant."""
    profile = Calibration(_base(gpus=16), "dgx-h100", [A3MEGA]).run()
    c = profile.constants
    assert not c["scale_up_efficiency"].identified and not c["scale_up_latency_s"].identified
    assert "no one-node run" in c["scale_up_efficiency"].note
    rows = profile.measurements
    largest = rows[-1]
    assert _err(largest, "after") < _err(largest, "before")
    assert _err(largest, "after") < 0.10
    for regime in ("bandwidth", "latency"):
        sel = [r for r in rows if r.regime == regime]
        assert sel, regime
        assert np.mean([_err(r, "after") for r in sel]) < np.mean([_err(r, "before") for r in sel]), regime
    assert {r.regime for r in rows[:8]} == {"latency"} and rows[-1].regime == "bandwidth"


def test_calibrate_reports_latency_and_bandwidth_bound_rows_before_and_after(tmp_path: Path) -> None:
    args = ["calibrate", "--nccl", str(A3MEGA), "--cluster", "dgx-h100", "--gpus", "16", "--out",
            str(tmp_path / "p.yaml")]
    text = CliRunner().invoke(main, args)
    assert text.exit_code == 0, text.output
    assert "latency-bound rows" in text.stdout and "bandwidth-bound rows" in text.stdout
    data = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)
    classes = {r["regime"]: r for r in data["regime_errors"]}
    assert classes["bandwidth"]["error_after"] < classes["bandwidth"]["error_before"]
    assert {r["regime"] for r in data["measurements"]} == {"latency", "bandwidth", "mixed"}


def test_a_class_of_rows_predicted_worse_after_the_fit_is_a_warning() -> None:
    cal = Calibration(_base(gpus=16), "dgx-h100", [A3MEGA])
    rows = [Residual(measurement=f"{s} B", kind="nccl", group="f", unit="s", measured=1.0, before=1.1, after=a,
                     regime="bandwidth") for s, a in ((1, 1.05), (2, 1.3))]
    ((key, warning),) = cal._worse(rows)
    assert key == ("f", "bandwidth")
    assert "2 bandwidth-bound row(s) are predicted worse" in warning and "10.0% -> 17.5%" in warning
    assert "2 B: +10.0% -> +30.0%" in warning
    assert cal._worse(rows[:1]) == []


def test_a_latency_no_latency_bound_row_constrains_is_not_fitted() -> None:
    """One node with NVLink SHARP, 128 MiB - 4 GiB (busbw rising 383 -> 474 GB/s): the latency was fitted to 1.9e-5
    from the ramp; no row there is latency-bound, so it keeps its default and says why."""
    profile = Calibration(_base(), "dgx-h100", [NCCL / "h100-1node-all_reduce_perf.txt"]).run()
    lat = profile.constants["scale_up_latency_s"]
    assert not lat.identified and lat.value == lat.default == pytest.approx(1.9e-6)
    assert "no latency-bound row" in lat.note and "134,217,728 B" in lat.note
    # and its all-reduce passes NVLink's peak (NVLS): no efficiency either (tests/test_calibrate_trial5.py)
    assert not profile.constants["scale_up_efficiency"].identified


def test_the_shipped_two_node_files_keep_their_promises() -> None:
    """The 4- and 8-node files, fitted with the one-node file, get their largest message within 8 % (it was
    34 % and 27 %; 5 % while the one-node NVLS all-reduce set NVLink's efficiency to 1.03, which these NVLS-tree
    runs also profit from; it now keeps the catalog's 0.82)."""
    profile = Calibration(_base(), "dgx-h100", [NCCL / f for f in ("h100-1node-all_reduce_perf.txt",
                                                                   "h100-4node-all_reduce_perf.txt",
                                                                   "h100-8node-all_reduce_perf.txt")]).run()
    by_file: dict[str, list[Residual]] = {}
    for r in profile.measurements:
        by_file.setdefault(Path(r.group.split(":")[0]).name, []).append(r)
    for name in ("h100-4node-all_reduce_perf.txt", "h100-8node-all_reduce_perf.txt"):
        assert _err(by_file[name][-1], "after") < 0.08, name


# -- 3. far from the default, either way ---------------------------------------------------------------------------

def test_a_value_five_times_its_default_is_a_warning_with_the_numbers(tmp_path: Path) -> None:
    truth = {"scale_up_efficiency": 0.82, "scale_up_latency_s": 2.0e-5, "network_efficiency": 0.92,
             "network_latency_s": 4e-6}
    path = write_nccl(tmp_path / "all_reduce_perf-1.txt", "all_reduce", 1, truth, np.random.default_rng(0), 0.01)
    profile = Calibration(_base(), "dgx-h100", [path]).run()
    lat = profile.constants["scale_up_latency_s"]
    assert lat.identified and lat.value == pytest.approx(2.0e-5, rel=0.1)
    (warning,) = [w for w in profile.warnings if w.startswith("scale_up_latency_s")]
    assert re.search(r"is 1\d(\.\d)?x its default 1\.9e-06 \(above 5x", warning), warning


# -- 4. the device ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("device", "acc"), [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA B200", "b200"), ("NVIDIA A100-SXM4-80GB", "a100-80g"),
    ("NVIDIA A100-SXM4-40GB", "a100-40g"), ("NVIDIA H200", "h200"), ("NVIDIA GB200", "gb200"),
    ("NVIDIA H100 PCIe", None), ("NVIDIA H20-3e", None)])
def test_device_names_map_to_catalog_accelerators(device: str, acc: str | None) -> None:
    assert accelerator_of(device) == acc


def test_a_log_from_another_accelerator_is_an_error_naming_both(tmp_path: Path) -> None:
    b200 = _edited(tmp_path, "all_reduce_perf.txt", lambda ls: [ln.replace("NVIDIA H100 80GB HBM3", "NVIDIA B200")
                                                                 for ln in ls])
    with pytest.raises(InputError, match=r"'NVIDIA B200' \(b200\), but dgx-h100 is built of h100-sxm"):
        Calibration(_base(), "dgx-h100", [b200])
    bare = _edited(tmp_path, "bare_all_reduce_perf.txt",
                   lambda ls: [re.sub(r"\] NVIDIA H100 80GB HBM3", "]", ln) for ln in ls])
    profile = Calibration(_base(), "dgx-h100", [bare]).run()
    assert any("name no device" in w and "skipped" in w for w in profile.warnings)


# -- 5. a profile applied to another design -----------------------------------------------------------------------

def test_a_profile_applied_to_a_design_with_other_nics_warns_naming_the_fields(tmp_path: Path) -> None:
    out = tmp_path / "p.yaml"
    res = CliRunner().invoke(main, ["calibrate", "--nccl", str(TWO_NODE), "--cluster", "dgx-h100", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert yaml.safe_load(out.read_text())["design"]["nic_bandwidth_bytes_per_s"] == 50e9
    spec = yaml.safe_load((Path(__file__).parents[1] / "hardware" / "clusters" / "dgx-h100.yaml").read_text())
    spec["nic_bandwidth_bytes_per_s"] = 25e9
    other = tmp_path / "half-nic.yaml"
    other.write_text(yaml.safe_dump(spec))
    job = ["plan", "--model", "llama3-8b", "--gpus", "16", "--top-k", "1", "--calibration", str(out)]
    res = CliRunner().invoke(main, [*job, "--cluster", str(other)])
    assert res.exit_code == 0, res.output
    assert "design that differs: NIC bandwidth per GPU (B/s) 5e+10 there, 2.5e+10 here" in res.stderr
    assert "fitted on dgx-h100" in res.stderr
    same = CliRunner().invoke(main, job)
    assert "design that differs" not in same.stderr


# -- 6-9. what a file holds ---------------------------------------------------------------------------------------

def test_two_runs_in_one_file_are_an_error_naming_the_second_header(tmp_path: Path) -> None:
    lines = TWO_NODE.read_text().splitlines()
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text("\n".join([*lines, *lines]) + "\n")
    header = next(i for i, ln in enumerate(lines, 1) if ln.startswith("# nThread"))
    with pytest.raises(InputError, match=f"line {len(lines) + header}: a second run starts here"):
        read_nccl_tests(path)
    rows = [ln for ln in lines if re.match(r"^\s+\d+\s+\d+", ln)]
    again = tmp_path / "again_all_reduce_perf.txt"
    again.write_text("\n".join([*lines, rows[-1]]) + "\n")
    with pytest.raises(InputError, match=f"line {len(lines) + 1}: size 17179869184 again"):
        read_nccl_tests(again)


def test_rows_that_failed_the_data_check_are_left_out_and_named(tmp_path: Path) -> None:
    row = 30

    def edit(ls: list[str]) -> list[str]:
        tokens = ls[row - 1].split()
        tokens[8] = "4096"
        return [*ls[:row - 1], "  ".join(tokens), *ls[row:]]

    path = _edited(tmp_path, "all_reduce_perf.txt", edit)
    run = read_nccl_tests(path)
    assert len(run.rows) == len(read_nccl_tests(TWO_NODE).rows) - 1 and row not in {r.line for r in run.rows}
    (warning,) = run.warnings
    assert f"line {row} (" in warning and "#wrong 4096 out of place" in warning and "left out" in warning
    profile = Calibration(_base(), "dgx-h100", [path]).run()
    assert warning in profile.warnings


def test_a_row_cut_short_is_an_error_and_a_missing_trailer_a_warning(tmp_path: Path) -> None:
    lines = TWO_NODE.read_text().splitlines()
    last = max(i for i, ln in enumerate(lines) if re.match(r"^\s+\d+\s+\d+", ln))
    cut = tmp_path / "cut_all_reduce_perf.txt"
    cut.write_text("\n".join([*lines[:last], "    33554432      "]) + "\n")
    with pytest.raises(InputError, match=f"line {last + 1}: a result row with 1 columns"):
        read_nccl_tests(cut)
    open_ended = tmp_path / "open_all_reduce_perf.txt"
    open_ended.write_text("\n".join(lines[:last + 1]) + "\n")
    (warning,) = read_nccl_tests(open_ended).warnings
    assert "no `# Avg bus bandwidth` line" in warning and f"line {last + 1}" in warning
    assert read_nccl_tests(TWO_NODE).warnings == ()


@pytest.mark.parametrize("prefix", ["[1,0]<stdout>:", "[node001:0] ", "0: "])
def test_launcher_prefixes_are_taken_off(tmp_path: Path, prefix: str) -> None:
    path = _edited(tmp_path, "all_reduce_perf.txt", lambda ls: [prefix + ln for ln in ls])
    tagged, plain = read_nccl_tests(path), read_nccl_tests(TWO_NODE)
    assert (tagged.ranks, tagged.hosts, [r.time_s for r in tagged.rows]) == (
        plain.ranks, plain.hosts, [r.time_s for r in plain.rows])


# -- 10. plan with a profile ---------------------------------------------------------------------------------------

def test_plan_with_a_profile_prints_defaults_and_the_step_without_it(tmp_path: Path) -> None:
    out = tmp_path / "p.yaml"
    CliRunner().invoke(main, ["calibrate", "--nccl", str(NCCL / "h100-nvls-1node-all_gather_perf.txt"),
                              "--cluster", "dgx-h100", "--out", str(out)])
    job = ["plan", "--model", "llama3-8b", "--gpus", "16", "--top-k", "1", "--calibration", str(out)]
    res = CliRunner().invoke(main, job)
    assert res.exit_code == 0, res.output
    assert re.search(r"scale_up_efficiency 0\.82 -> 0\.7\d", res.stdout), res.stdout
    m = re.search(r"step ([\d.]+) s with the profile, ([\d.]+) s without it", res.stdout)
    assert m and float(m.group(1)) >= float(m.group(2))
    data = json.loads(CliRunner().invoke(main, [*job, "--json"]).stdout)["calibration"]
    assert data["defaults"] == {"scale_up_efficiency": 0.82} and set(data["constants"]) == {"scale_up_efficiency"}
    assert data["uncalibrated_step_time_s"] == pytest.approx(float(m.group(2)), rel=1e-3)


def test_sweep_and_validate_warn_where_a_profile_prices_another_design(tmp_path: Path) -> None:
    """The design warning `plan` prints, also from `sweep` (once per design on the profile's accelerator) and from
    `validate --calibration` (once per cluster of the calibrated runs): each prices with another machine's
    constants."""
    out = tmp_path / "p.yaml"
    res = CliRunner().invoke(main, ["calibrate", "--nccl", str(TWO_NODE), "--cluster", "dgx-h100", "--out", str(out)])
    assert res.exit_code == 0, res.output
    spec = yaml.safe_load((Path(__file__).parents[1] / "hardware" / "clusters" / "dgx-h100.yaml").read_text())
    spec["nic_bandwidth_bytes_per_s"] = 25e9
    spec["name"] = "half-nic"
    other = tmp_path / "half-nic.yaml"
    other.write_text(yaml.safe_dump(spec))
    sweep = tmp_path / "s.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "two", "designs": [
            {"name": "same", "cluster": "dgx-h100", "gpus": 16, "capex_per_gpu": 40_000, "power_per_gpu_w": 1000},
            {"name": "half nic", "cluster": str(other), "gpus": 16, "capex_per_gpu": 40_000, "power_per_gpu_w": 1000}],
        "workloads": [{"name": "w", "model": "llama3-8b", "seq_len": 4096, "global_batch": 64, "tokens": 1.0e9}]}))
    res = CliRunner().invoke(main, ["sweep", str(sweep), "--out", str(tmp_path / "o"), "--no-plots", "--no-cache",
                                    "--calibration", str(out)])
    assert res.exit_code == 0, res.output
    assert res.stderr.count("design that differs") == 1 and "applied to half-nic" in res.stderr
    # validate: the published H100 runs are all on dgx-h100 (no warning); own runs on the half-NIC design warn
    res = CliRunner().invoke(main, ["validate", "--calibration", str(out)])
    assert res.exit_code == 0, res.output
    assert "design that differs" not in res.stderr
    runs = tmp_path / "steps.yaml"
    runs.write_text(yaml.safe_dump([{"id": "r1", "model": "llama3-8b", "num_gpus": 16, "seq_len": 4096,
                                     "global_batch": 64, "precision": "bf16", "step_time_s": 2.0,
                                     "layout": {"tp": 8, "pp": 1}}]))
    res = CliRunner().invoke(main, ["validate", "--runs", str(runs), "--cluster", str(other), "--calibration",
                                    str(out)])
    assert res.exit_code == 0, res.output
    assert res.stderr.count("design that differs") == 1 and "applied to half-nic" in res.stderr


def test_the_latency_comes_from_the_flat_small_rows_not_the_ramp() -> None:
    """GCP A3 Mega, 2 x 8 H100: 16 B - 4 KiB run flat at 123-127 us, then the times rise (167 us at 256 KiB, 203 us
    at 1 MiB).  Counted latency-bound up to twice the fastest row, those ramp rows pulled the fitted latency up to
    predict 140 us for every small row (a trial: +14 % on the flat part); the flat rows alone decide it now."""
    profile = Calibration(_base(gpus=16), "dgx-h100", [A3MEGA]).run()
    latency = [r for r in profile.measurements if r.regime == "latency"]
    fastest = min(r.measured for r in profile.measurements)
    assert latency and all(r.measured <= 1.25 * fastest for r in latency)
    # the flat rows' own level: the median row within 5 %, the class within 6 % on average (it was 11.7 %)
    assert np.median([_err(r, "after") for r in latency]) < 0.05
    assert np.mean([_err(r, "after") for r in latency]) < 0.06


def test_a_class_of_rows_the_fit_still_misses_is_a_warning() -> None:
    """A 2-node all-reduce NCCL ran as NVLSTree (469 GB/s bus bandwidth, nccl-tests#309) was priced 82 % slow after
    the fit, and nothing said so (a user trial).  Its bandwidth-bound rows, past its NICs' line rate, now have their
    own warning (in-network reduction); beside an 8-node all-reduce of another cluster, what else stays missed by
    more than UNEXPLAINED is named with its mean."""
    from placement.calibration.calibrate import UNEXPLAINED

    data = Path(__file__).parent / "data" / "nccl"
    files = [data / "h100-2node-all_reduce_perf.txt", data / "h100-8node-all_reduce_perf.txt"]
    profile = Calibration(_base(gpus=64), "dgx-h100", files).run()
    missed = 0
    for group in dict.fromkeys(m.group for m in profile.measurements):
        for regime in ("bandwidth", "latency"):
            rows = [m for m in profile.measurements if m.group == group and m.regime == regime]
            mean = sum(abs(m.after / m.measured - 1) for m in rows) / max(len(rows), 1)
            said = [w for w in profile.warnings if w.startswith(f"{group}: its {len(rows)} {regime}-bound")]
            if regime == "bandwidth" and "2node" in group:  # the NVLSTree file: in-network reduction, said so
                (own,) = [w for w in profile.warnings if "469 GB/s bus bandwidth, above the 400 GB/s" in w]
                assert "NCCL_ALGO=Ring" in own and not said
                continue
            if mean > UNEXPLAINED:
                missed += 1
                assert len(said) == 1 and (f"still missed by {mean:.0%} on average" in said[0]
                                           or "predicted worse after the fit" in said[0]), (group, regime)
    assert missed >= 1
    # a class within the bound, or warned already as predicted worse, is not named again
    cal = Calibration(_base(gpus=16), "dgx-h100", [A3MEGA])
    close = [Residual(measurement="1 B", kind="nccl", group="f", unit="s", measured=1.0, before=1.1, after=1.2,
                      regime="bandwidth")]
    far = [r.model_copy(update={"after": 1.5}) for r in close]
    assert cal._unexplained(close, set()) == []
    (slow,) = cal._unexplained(far, set())
    assert "priced +50.0%, slower than measured" in slow and "NVLS" in slow
    assert cal._unexplained(far, {("f", "bandwidth")}) == []
    step = [Residual(measurement="step r", kind="step", group="r", unit="s", measured=1.0, before=0.5, after=0.6)]
    (said,) = cal._unexplained(step, set())
    assert "the run is still missed by 40% after the fit" in said and "faster than measured" in said


def test_a_log_whose_busbw_has_not_levelled_off_fits_no_bandwidth(tmp_path: Path) -> None:
    """A user trial: the A3 Mega all-reduce run only to -e 512M (busbw 152, 213, 264 GB/s over its last three sizes,
    still rising to 339 GB/s at 8 GiB) fitted network_efficiency 0.638 from the 256 MiB row, with no warning, and
    every DP all-reduce of an audit priced with it came out 80 % slower.  A table that has not levelled off fits no
    bandwidth, and says why; the whole log is unchanged."""
    lines = A3MEGA.read_text().splitlines()
    cut = [x for x in lines if not re.match(r"\s+(1073741824|2147483648|4294967296|8589934592)\s", x)]
    assert len(cut) == len(lines) - 4
    short = tmp_path / "all_reduce_perf-e512M.txt"
    short.write_text("\n".join(cut) + "\n")
    profile = Calibration(_base(gpus=16), "dgx-h100", [short]).run()
    for name in ("network_efficiency", "hierarchical_serial_share"):
        assert not profile.constants[name].identified, profile.constants[name]
    assert any("has not levelled off" in w and "263.7 GB/s at 536,870,912 B" in w for w in profile.warnings)
    whole = Calibration(_base(gpus=16), "dgx-h100", [A3MEGA]).run()
    assert not any("levelled off" in w for w in whole.warnings)
    assert any(r.regime == "bandwidth" for r in whole.measurements)
    # a one-off dip of its last row (6 % below the row before) is no ramp: the table still settles (a review)
    dip = tmp_path / "all_reduce_perf-dip.txt"
    row = "  8589934592    2147483648     float     sum      -1    "
    dip.write_text(A3MEGA.read_text().replace(row + "47535  180.71  338.82      0    47743  179.92  337.35",
                                              row + "50569  169.87  318.49      0    50790  169.12  317.11"))
    assert dip.read_text() != A3MEGA.read_text()
    assert not any("levelled off" in w for w in Calibration(_base(gpus=16), "dgx-h100", [dip]).run().warnings)
