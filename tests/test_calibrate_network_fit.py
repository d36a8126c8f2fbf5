"""The network fit on nccl-tests outputs shaped as NCCL's are (a latency floor, a protocol ramp, noise), from a
user trial: the same cluster healthy, 20 % and 40 % slower across nodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from synthetic_calibration import write_nccl_ramp

from placement.calibration.calibrate import Calibration
from placement.catalog import load_accelerator, load_cluster
from placement.topology import Topology

ONE_NODE = (("all_reduce", 14e-6, 470e9, 4e6), ("all_gather", 11e-6, 345e9, 2e6),
            ("reduce_scatter", 11e-6, 340e9, 2e6), ("alltoall", 13e-6, 310e9, 2e6))
"""(test, floor, busbw plateau, ramp bytes) inside one node: the all-reduce in-switch (NVLS), the others rings."""
EIGHT_NODES = (("all_reduce", 30e-6, 375e9, 3.2e7), ("all_gather", 80e-6, 372e9, 1.6e7),
               ("reduce_scatter", 80e-6, 370e9, 1.6e7), ("alltoall", 90e-6, 46e9, 8e6))
"""The same across 8 nodes of a healthy network: rings near 8 NICs' line rate, the all-to-all one NIC's, its floor
three times the all-reduce's (a message to each of 63 peers).  The all-reduce's floor is its tree's; the
all-gather's and reduce-scatter's are a ring's 63 steps, as NCCL's tuning model puts them under its LL protocol
(src/graph/tuning.cc: base 6.6 us, a step inside a node 0.6 us but no less than the 1 us network overhead on a ring
across nodes, 2.7 us a step across: 6.6 + 56 x 1.0 + 7 x 2.7 = 81 us)."""


def _files(folder: Path, slower: float) -> list[Path]:
    folder.mkdir()
    rng = np.random.default_rng(7)
    out = [write_nccl_ramp(folder / f"{op}_1n.txt", op, 1, floor, bw, ramp, rng) for op, floor, bw, ramp in ONE_NODE]
    return out + [write_nccl_ramp(folder / f"{op}_8n.txt", op, 8, floor, bw * slower, ramp, rng)
                  for op, floor, bw, ramp in EIGHT_NODES]


def _calibrate(folder: Path, slower: float):
    cluster = load_cluster("dgx-h100")
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=64)
    return Calibration(topo, "dgx-h100", _files(folder, slower)).run()


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[float, object]:
    return {s: _calibrate(tmp_path_factory.mktemp("nccl") / f"x{s}", s) for s in (1.0, 0.8, 0.6)}


def test_a_slower_network_fits_a_proportionally_lower_efficiency(profiles) -> None:
    """The trial's 20 %-slower files fitted network_efficiency 0.953, above the healthy files' 0.832: started at the
    catalog's serial share of 1, the fit stayed in the far valley of (efficiency, share).  The fit now starts from a
    grid too (fit.MULTI_START), and a share pinned near 0 is not dropped as loose."""
    eff = {s: p.constants["network_efficiency"] for s, p in profiles.items()}
    assert all(c.identified for c in eff.values())
    assert eff[1.0].value > eff[0.8].value > eff[0.6].value
    for s in (0.8, 0.6):
        assert eff[s].value / eff[1.0].value == pytest.approx(s, rel=0.05)


def test_the_fit_improves_every_bandwidth_bound_class_across_nodes(profiles) -> None:
    """The far valley's constants made the multi-node files worse than the defaults (the trial's 8-node all-reduce
    20.6 % -> 50.2 %)."""
    for p in profiles.values():
        for group in {m.group for m in p.measurements if "64 ranks" in m.group}:
            rows = [m for m in p.measurements if m.group == group and m.regime == "bandwidth"]
            before = np.mean([abs(m.before / m.measured - 1) for m in rows])
            after = np.mean([abs(m.after / m.measured - 1) for m in rows])
            assert after < min(before, 0.05), group


def test_the_all_to_alls_latency_is_not_the_rings(profiles) -> None:
    """The all-to-all's 90 us floor (a message to each of 63 peers) had pulled network_latency_s to 8 us and priced
    every all-reduce latency row 63 % slow; it is left out of the latency (A2A_LATENCY), said in the warnings."""
    p = profiles[0.8]
    rows = [m for m in p.measurements if "all_reduce_perf, 64 ranks" in m.group and m.regime == "latency"]
    assert rows and np.mean([abs(m.after / m.measured - 1) for m in rows]) < 0.25
    (note,) = [w for w in p.warnings if "alltoall_perf across 8 hosts" in w]
    assert "left out of network_latency_s" in note and "63 peers" in note
    assert p.constants["network_latency_s"].value < 6e-6


DATA = Path(__file__).parent / "data" / "nccl"


def test_an_all_reduce_past_its_nics_line_rate_fits_no_network_bandwidth() -> None:
    """A user trial: an H200 Spectrum-X 2 x 8 all-reduce at 485 GB/s bus bandwidth, past the 400 GB/s a ring over
    8 x 400 Gb/s NICs carries, fitted the levels' overlap to its floor, unsaid.  NCCL reduced in the network
    (NVLSTree): its bandwidth rows now fit nothing and say so; its small sizes still time the latency.  The same
    cluster's forced ring (392 GB/s) is a ring."""
    cluster = load_cluster("dgx-h100")
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=16)
    nvls = Calibration(topo, "dgx-h100", [DATA / "h100-2node-all_reduce_perf.txt"]).run()
    for name in ("network_efficiency", "hierarchical_serial_share"):
        c = nvls.constants[name]
        assert not c.identified and "past the NICs' line rate" in c.note, name
    assert nvls.constants["network_latency_s"].identified
    (said,) = [w for w in nvls.warnings if "above the 400 GB/s its 8 GPUs per host x 50 GB/s NICs carry" in w]
    assert "469 GB/s" in said and "NCCL_ALGO=Ring" in said
    ring = Calibration(topo, "dgx-h100", [DATA / "h100-2node-all_reduce_perf-ring.txt"]).run()
    assert not any("NICs carry in a ring" in w for w in ring.warnings)
    assert ring.constants["hierarchical_serial_share"].identified
    # whole nodes fit the overlap, not the network: the profile says network-only work keeps the catalog's (a trial:
    # a 25 %-slower network then priced one-GPU-per-node groups 6 % slower, unsaid)
    assert not ring.constants["network_efficiency"].identified
    (said,) = [w for w in ring.warnings if "move NVLink and the network together" in w]
    assert "still priced at the catalog's network_efficiency 0.92" in said and "-g 1" in said


def test_the_text_table_keeps_each_constants_whole_note() -> None:
    """A user trial: the text table cut each note at 90 characters, mid-word ("runs inside one n"), and the reason
    a constant kept its default was only in --json."""
    from placement.calibration.report import calibrate_table

    cluster = load_cluster("dgx-h100")
    topo = Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=16)
    profile = Calibration(topo, "dgx-h100", [DATA / "h100-2node-all_reduce_perf.txt"]).run()
    text = calibrate_table(profile, "p.yaml")
    joined = " ".join(line.strip() for line in text.splitlines())
    for c in profile.constants.values():
        assert len(c.note) <= 90 or c.note in joined
    assert any(len(c.note) > 90 for c in profile.constants.values())


def test_the_point_to_point_and_all_to_all_notes_say_what_their_files_show(tmp_path: Path) -> None:
    """A user trial: across 10 hosts of one GPU each, sendrecv's note said "one pair per node boundary crosses, on
    a path the collectives' rings do not take" (every pair crosses, on the ring's own NIC); and an alltoall file
    starting at 32 MiB was said to be left out of a latency it has no row for."""
    rng = np.random.default_rng(3)
    files = [write_nccl_ramp(tmp_path / "ar.txt", "all_reduce", 4, 30e-6, 45e9, 1.6e7, rng, gpn=1),
             write_nccl_ramp(tmp_path / "p2p.txt", "sendrecv", 4, 20e-6, 25e9, 1.6e7, rng, gpn=1),
             write_nccl_ramp(tmp_path / "a2a.txt", "alltoall", 4, 90e-6, 40e9, 8e6, rng, gpn=1, min_bytes=32 << 20)]
    cluster = load_cluster("dgx-h100")
    profile = Calibration(Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=32), "dgx-h100",
                          files).run()
    (p2p,) = [w for w in profile.warnings if "sendrecv_perf across 4 hosts" in w]
    assert "one GPU per host" in p2p and "one pair per node boundary" not in p2p
    assert not any("alltoall_perf across" in w and "left out of network_latency_s" in w for w in profile.warnings)


def test_a_constant_warned_at_calibration_is_warned_where_it_prices(tmp_path: Path) -> None:
    """A user trial: a B200 network latency 64x its default was warned by `calibrate`, then applied by `plan
    --calibration` without a word; its text and JSON now repeat the profile's warning on each constant it sets."""
    import json

    from click.testing import CliRunner
    from synthetic_calibration import write_nccl

    from placement.cli import main

    truth = {"scale_up_efficiency": 0.74, "scale_up_latency_s": 2e-6, "network_efficiency": 0.8,
             "network_latency_s": 4e-4}  # 100x dgx-h100's 4e-6
    rng = np.random.default_rng(5)
    files = [write_nccl(tmp_path / f"{op}{h}.txt", op, h, truth, rng, 0.01)
             for op, h in (("all_gather", 1), ("all_reduce", 2), ("all_gather", 4))]
    prof = tmp_path / "p.yaml"
    cal = CliRunner().invoke(main, ["calibrate", *(x for f in files for x in ("--nccl", str(f))), "--gpus", "32",
                                    "--out", str(prof)])
    assert cal.exit_code == 0, cal.output
    assert "network_latency_s = " in cal.stdout and "far from it" in cal.stdout
    plan = ["plan", "--model", "llama3-8b", "--gpus", "32", "--calibration", str(prof)]
    text = CliRunner().invoke(main, plan).stdout
    (line,) = [x for x in text.splitlines() if x.startswith("warning (from the profile): network_latency_s = ")]
    assert "far from it" in line
    data = json.loads(CliRunner().invoke(main, [*plan, "--json"]).stdout)
    assert any(w.startswith("network_latency_s = ") for w in data["calibration"]["constant_warnings"])


def test_a_one_off_fast_row_does_not_leave_the_plateau_out_of_the_fit(tmp_path: Path) -> None:
    """A user trial's 2-node nccl-tests 2.18.3 log peaked at 39.08 GB/s at 128 MiB and settled at 34.2-35.1 GB/s
    from 512 MiB to 8 GiB: rows under 90 % of the single best counted as "between", so the fit rested on the bump
    and priced the 8 GiB all-reduce 11 % fast.  The plateau is now what the largest sizes settle at."""
    bumps = {2**27: 1.15, 2**28: 1.14}
    path = write_nccl_ramp(tmp_path / "all_reduce_2n.txt", "all_reduce", 2, 30e-6, 300e9, 4e6,
                           np.random.default_rng(3), noise=0.005, bumps=bumps)
    cluster = load_cluster("dgx-h100")
    profile = Calibration(Topology(cluster, load_accelerator(cluster.accelerator), num_gpus=16), "dgx-h100",
                          [path]).run()
    rows = sorted((m for m in profile.measurements if "all_reduce_perf" in m.group), key=lambda m: m.measured)
    largest = rows[-5:]  # 512 MiB to 8 GiB
    assert all(m.regime == "bandwidth" for m in largest), [m.regime for m in largest]
    assert max(abs(m.after / m.measured - 1) for m in largest) < 0.03
