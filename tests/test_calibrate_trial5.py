"""`placement calibrate` after a user trial on real nccl-tests outputs (tests/data/nccl/h100-nvls-1node-*, one
H100 node with NVLink SHARP; sources in tests/data/nccl/README.md): sendrecv_perf files are read (nccl-tests
prints a reduction in their rows), an all-reduce past NVLink's peak does not set the efficiency all-gather and
reduce-scatter are priced with, and Megatron-LM logs are read with launcher prefixes or told what they lack."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from synthetic_calibration import TRUTH, write_log, write_nccl

from placement.calibration.calibrate import Calibration
from placement.calibration.nccl_tests import read_nccl_tests
from placement.calibration.steps import read_steps
from placement.catalog import load_accelerator, load_cluster
from placement.cli import main
from placement.errors import InputError
from placement.topology import Topology

NCCL = Path(__file__).parent / "data" / "nccl"
NVLS = {op: NCCL / f"h100-nvls-1node-{op}_perf.txt" for op in ("all_reduce", "all_gather", "reduce_scatter",
                                                                "sendrecv")}
TWO_NODE = NCCL / "h100-2node-all_reduce_perf.txt"


def _base(gpus: int = 64) -> Topology:
    spec = load_cluster("dgx-h100")
    return Topology(spec, load_accelerator(spec.accelerator), num_gpus=gpus)


# -- 1. sendrecv_perf ----------------------------------------------------------------------------------------------

def test_a_real_sendrecv_file_is_read() -> None:
    """nccl-tests' SendRecvRunTest passes the reduction op to each row (src/sendrecv.cu), so real rows print `sum`;
    they were refused as another test's output."""
    run = read_nccl_tests(NVLS["sendrecv"])
    assert (run.op, run.ranks, len(run.hosts), len(run.rows)) == ("sendrecv", 8, 1, 10)
    assert run.rows[-1].size_bytes == 17179869184 and run.rows[-1].busbw_bytes_per_s == pytest.approx(367.25e9)
    profile = Calibration(_base(), "dgx-h100", [NVLS["sendrecv"]]).run()
    assert profile.constants["scale_up_efficiency"].identified


def test_the_start_line_names_the_test_and_the_reduction_column_checks_only_a_file_name(tmp_path: Path) -> None:
    """With a `# Collective test starting:` line the file is that test whatever its name; without one, a row whose
    reduction column another test prints is still an error (an all-reduce under a sendrecv name cannot be told, an
    all-gather's `none` rows can)."""
    renamed = tmp_path / "alltoall_perf-x.txt"
    renamed.write_text(NVLS["sendrecv"].read_text())
    assert read_nccl_tests(renamed).op == "sendrecv"
    gather = tmp_path / "sendrecv_perf-x.txt"
    gather.write_text("\n".join(ln for ln in NVLS["all_gather"].read_text().splitlines()
                                if "Collective test" not in ln) + "\n")
    with pytest.raises(InputError, match=re.escape("a row with reduction 'none', which sendrecv_perf does not "
                                                   "print (a reduction); the file is another test's output")):
        read_nccl_tests(gather)
    other = tmp_path / "all_reduce_perf-x.txt"
    other.write_text(NVLS["sendrecv"].read_text().replace("sendrecv_perf", "broadcast_perf"))
    with pytest.raises(InputError, match=re.escape("line 1: the output of broadcast_perf, which calibrate does not "
                                                   "read")):
        read_nccl_tests(other)


def test_an_empty_file_is_said_to_be_empty(tmp_path: Path) -> None:
    for name in ("empty.txt", "all_reduce_perf-empty.txt"):
        (tmp_path / name).write_text("\n")
        with pytest.raises(InputError, match=re.escape(f"`{tmp_path / name}` is empty")):
            read_nccl_tests(tmp_path / name)


# -- 2. an all-reduce past NVLink's peak -------------------------------------------------------------------------

def test_an_all_reduce_past_nvlink_peak_alone_keeps_the_catalog_efficiency() -> None:
    """482 GB/s busbw against a 450 GB/s link (NVLS): fitted, it set scale_up_efficiency to 1.04, and TP's
    all-gathers and reduce-scatters were priced 22 % fast; now it keeps 0.82, not identified, and says so."""
    profile = Calibration(_base(), "dgx-h100", [NVLS["all_reduce"]]).run()
    c = profile.constants["scale_up_efficiency"]
    assert not c.identified and c.value == c.default == pytest.approx(0.82)
    assert "past the 392 GB/s a ring reaches over NVLink" in c.note and "all_gather_perf" in c.note
    (warning,) = [w for w in profile.warnings if "in-switch reduction" in w]
    assert f"`{NVLS['all_reduce']}`: all_reduce_perf reaches 482 GB/s bus bandwidth, 1.07x NVLink's 450 GB/s" \
        in warning
    assert "keeps the catalog's 0.82 (not identified); give all_gather_perf and reduce_scatter_perf" in warning
    assert "scale_up_efficiency" not in profile.fitted()


def test_all_gather_and_reduce_scatter_set_nvlink_efficiency_beside_an_nvls_all_reduce() -> None:
    """Same node, same run: AG and RS reach 362-365 GB/s (0.80 of 450), the all-reduce 482; the efficiency is
    the AG/RS one, within 5 % of their busbw share, and the all-reduce is named as priced slower."""
    profile = Calibration(_base(), "dgx-h100", [NVLS[op] for op in ("all_reduce", "all_gather",
                                                                    "reduce_scatter")]).run()
    c = profile.constants["scale_up_efficiency"]
    assert c.identified and c.value == pytest.approx(364e9 / 450e9, rel=0.05)
    assert "all_reduce" not in c.note
    assert any("482 GB/s" in w and "fitted on the other one-node rows" in w for w in profile.warnings)


def test_an_all_reduce_within_the_peak_still_fits_nvlink_alone(tmp_path: Path) -> None:
    """A ring all-reduce (busbw under the link: synthetic, at 0.70 of nominal) measures the efficiency the other
    collectives reach: fitted from it alone, as before, and no in-switch warning."""
    path = write_nccl(tmp_path / "all_reduce_perf-1.txt", "all_reduce", 1, TRUTH, np.random.default_rng(0), 0.01)
    profile = Calibration(_base(), "dgx-h100", [path]).run()
    c = profile.constants["scale_up_efficiency"]
    assert c.identified and c.value == pytest.approx(TRUTH["scale_up_efficiency"], rel=0.05)
    assert not any("in-switch" in w for w in profile.warnings)


# -- 3. Megatron-LM logs --------------------------------------------------------------------------------------------

def test_a_megatron_log_without_its_arguments_block_says_so(tmp_path: Path) -> None:
    path = tmp_path / "iters.log"
    lines = _log(tmp_path).read_text().splitlines()
    path.write_text("\n".join(ln for ln in lines if "elapsed time per iteration" in ln) + "\n")
    res = CliRunner().invoke(main, ["calibrate", "--steps", str(path), "--cluster", "dgx-h100", "--out",
                                    str(tmp_path / "p.yaml")])
    assert res.exit_code == 2 and "malformed YAML" not in res.stderr
    assert "a Megatron-LM log (its `elapsed time per iteration (ms)` lines, the first on line 1) without the " \
           "arguments block Megatron prints at start-up" in res.stderr
    assert "give the log from the job's start" in res.stderr and "`log: iters.log`" in res.stderr


@pytest.mark.parametrize("prefix", ["0: ", "  3: ", "[default0]:", "[rank0]:", "[1,0]<stdout>:", "[0] "])
def test_a_megatron_log_with_launcher_prefixes_reads_as_without(tmp_path: Path, prefix: str) -> None:
    plain = _log(tmp_path)
    tagged = tmp_path / "tagged.log"
    tagged.write_text("".join(prefix + ln for ln in plain.read_text().splitlines(keepends=True)))
    (a,), (b,) = read_steps(plain, "dgx-h100"), read_steps(tagged, "dgx-h100")
    assert b.run.layout == a.run.layout and b.run.num_gpus == a.run.num_gpus == 8
    assert b.run.published_step_time_s == a.run.published_step_time_s
    assert b.model.model_dump(exclude={"name", "source"}) == a.model.model_dump(exclude={"name", "source"})


def _log(folder: Path) -> Path:
    return write_log(folder / "megatron.log", 8, 2, 2, 64, 4096, TRUTH, np.random.default_rng(0), 0.0)


def test_an_in_switch_all_reduce_below_the_peak_is_no_ring_either(tmp_path: Path) -> None:
    """B200's in-switch all-reduce reaches 838-846 GB/s, below NVLink's 900 GB/s but above the 0.87 x 900 a ring
    does (682): a user trial's one-node B200 NVLS file set scale_up_efficiency to 0.937, pricing TP's all-gathers and
    reduce-scatters 23 % fast.  The same rows scaled to B200 (H100's NVLS file x 845/482) keep the catalog's."""
    lines = NVLS["all_reduce"].read_text().splitlines()
    scale = 845.0 / 482.0
    out = []
    for line in lines:
        tok = line.split()
        if len(tok) >= 13 and tok[0].isdigit() and tok[1].isdigit():
            size = int(tok[0])
            for t_at, bw_at in ((5, 7), (9, 11)):  # out-of-place and in-place time, algbw, busbw
                t_us = float(tok[t_at]) / scale
                tok[t_at] = f"{t_us:.2f}"
                tok[t_at + 1] = f"{size / (t_us * 1e-6) / 1e9:.2f}"
                tok[bw_at] = f"{size / (t_us * 1e-6) / 1e9 * 2 * 7 / 8:.2f}"
            line = "  ".join(tok)
        out.append(line.replace("NVIDIA H100 80GB HBM3", "NVIDIA B200"))
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text("\n".join(out) + "\n")
    spec = load_cluster("dgx-b200")
    b200 = Topology(spec, load_accelerator(spec.accelerator), num_gpus=8)
    profile = Calibration(b200, "dgx-b200", [path]).run()
    c = profile.constants["scale_up_efficiency"]
    assert not c.identified and c.value == c.default
    assert any("0.94x NVLink's 900 GB/s peak per GPU, above the 0.87x a ring reaches" in w for w in profile.warnings)


TEN_NODE = {op: NCCL / f"h100-10node-{op}_perf.txt" for op in ("all_reduce", "all_gather", "reduce_scatter",
                                                                   "alltoall", "sendrecv")}


def test_a_multi_node_sendrecv_does_not_set_the_networks_efficiency() -> None:
    """A user trial: beside the collectives of the same 10 x 8 H100 run, sendrecv_perf (one pair per node boundary
    crosses, ~15 GB/s) drove network_efficiency to 0.654, and every collective then missed by 40-95 %. The
    collectives set it; the sendrecv file is left out and said so."""
    files = [*NVLS.values(), *TEN_NODE.values()]
    base = _base(80)
    profile = Calibration(base, "dgx-h100", files).run()
    eff = profile.constants["network_efficiency"]
    assert eff.identified and 0.85 < eff.value < 0.95
    assert any("sendrecv_perf across 10 hosts" in w and "left out of the network's constants" in w
               for w in profile.warnings)
    alone = Calibration(base, "dgx-h100", [TEN_NODE["sendrecv"]]).run()  # the only multi-node file: it is fitted
    assert alone.constants["network_efficiency"].value < 0.8


def test_a_zero3_step_without_a_shard_group_is_priced_fully_sharded(tmp_path: Path) -> None:
    """A user trial: a measured ZeRO-3 step whose layout named no shard group was priced with HSDP over 2 ranks (the
    search's pick) and fitted the GEMM efficiency on it, saying nothing. It is priced as every framework shards
    unless told, over the whole data-parallel group, and its source says so."""
    from placement.calibration.steps import read_step_yaml
    from placement.calibration.validate import predict

    text = ("- model: llama3-70b\n  num_gpus: 80\n  seq_len: 8192\n  global_batch: 80\n  precision: bf16\n"
            "  layout: {tp: 8, pp: 1, cp: 1, zero_stage: 3, micro_batch_size: 1, recompute: full,"
            " sequence_parallel: true}\n  step_time_s: 14.2\n")
    path = tmp_path / "steps.yaml"
    path.write_text(text)
    (step,) = read_step_yaml(path, "dgx-h100", text)
    assert step.run.layout["dp_shard"] == 10 and "whole data-parallel group" in step.run.citation
    priced = predict(step.run, step.model)
    assert priced.layout["dp_shard"] in (None, 10)
    code = CliRunner().invoke(main, ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "80",
                                     "--tp", "8", "--zero", "3", "--recompute", "full", "--mbs", "1", "--seq-len",
                                     "8192", "--global-batch", "80", "--json"])
    assert priced.predicted_step_time_s == pytest.approx(json.loads(code.stdout)["step_time_s"], rel=1e-3)


def test_an_nccl_tests_output_with_mpich_rank_prefixes_reads_as_without(tmp_path: Path) -> None:
    """MPICH/Hydra's `mpiexec -prepend-rank` writes `[0] ` before each line (NVIDIA/nccl#1453's outputs): a user trial's
    file was refused as having no `# Rank` lines."""
    plain = Path(__file__).parent / "data" / "nccl" / "h100-2node-all_reduce_perf-ring.txt"
    tagged = tmp_path / "all_reduce_perf-hydra.txt"
    tagged.write_text("".join("[0] " + ln for ln in plain.read_text().splitlines(keepends=True)))
    a, b = read_nccl_tests(plain), read_nccl_tests(tagged)
    assert (b.op, b.ranks, b.hosts, b.gpus_per_host, b.rows) == (a.op, a.ranks, a.hosts, a.gpus_per_host, a.rows)
