"""A log of several nccl-tests runs in one file (cluster scripts run the five binaries one after another into one
log: tests/data/nccl/h100-nvls-1node-five-tests.log, a real one; its source in tests/data/nccl/README.md) is read
run by run where each run names its test, and is still an error where a run does not."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.calibration.nccl_tests import read_nccl_runs, read_nccl_tests
from placement.cli import main
from placement.errors import InputError

NCCL = Path(__file__).parent / "data" / "nccl"
FIVE = NCCL / "h100-nvls-1node-five-tests.log"
ORDER = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")


def test_each_run_of_a_five_test_log_is_read_as_the_single_test_file_of_it() -> None:
    runs = read_nccl_runs(FIVE)
    assert tuple(r.op for r in runs) == ORDER
    # the runs tile the file: each from its start line to the line before the next run's
    assert runs[0].lines[0] == 1 and runs[-1].lines[1] == len(FIVE.read_text().splitlines())
    assert all(a.lines[1] + 1 == b.lines[0] for a, b in itertools.pairwise(runs))
    # the same block, kept byte-exact in its own file, reads to the same rows and ranks
    for run in runs:
        single = NCCL / f"h100-nvls-1node-{run.op}_perf.txt"
        if not single.exists():  # alltoall has no single file
            continue
        alone = read_nccl_tests(single)
        assert [(r.size_bytes, r.time_s) for r in run.rows] == [(r.size_bytes, r.time_s) for r in alone.rows]
        assert (run.ranks, run.hosts, run.gpu) == (alone.ranks, alone.hosts, alone.gpu)
        assert alone.lines is None and f"lines {run.lines[0]}-{run.lines[1]}" in run.label
    # row lines stay the file's
    assert runs[1].rows[0].line > runs[1].lines[0]


def test_calibrate_on_the_log_fits_what_its_runs_fit_as_separate_files(tmp_path: Path) -> None:
    lines = FIVE.read_text().splitlines(keepends=True)
    split = []
    for run in read_nccl_runs(FIVE):
        path = tmp_path / f"{run.op}_perf.txt"
        path.write_text("".join(lines[run.lines[0] - 1:run.lines[1]]))
        split.append(path)

    def fitted(files: list[Path]) -> dict:
        out = tmp_path / f"p{len(files)}.yaml"
        args = ["calibrate", *(a for f in files for a in ("--nccl", str(f))), "--cluster", "dgx-h100", "--gpus", "8",
                "--out", str(out), "--json"]
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    together, apart = fitted([FIVE]), fitted(split)
    assert together["constants"]["scale_up_efficiency"]["identified"]

    def values(d: dict) -> tuple:
        return ({k: (c["value"], c["identified"]) for k, c in d["constants"].items()},
                [(m["measured"], m["after"]) for m in d["measurements"]])

    assert values(together) == values(apart)
    assert len(together["measurements"]) == 50  # five runs of ten sizes


def test_a_second_run_that_names_no_test_is_still_an_error(tmp_path: Path) -> None:
    """Without its `# Collective test starting:` line a second run cannot be told from more rows of the first."""
    text = FIVE.read_text().splitlines()
    unnamed = [ln for ln in text if not ln.startswith("# Collective test starting:")]
    path = tmp_path / "all_reduce_perf.log"
    path.write_text("\n".join(unnamed) + "\n")
    second = next(i for i, ln in enumerate(unnamed, 1) if ln.startswith("# nThread") and i > 5)
    with pytest.raises(InputError, match=f"line {second}: a second run starts here .* no `# Collective test "
                                         f"starting:` line"):
        read_nccl_runs(path)


def test_an_error_in_one_run_of_a_log_names_that_run(tmp_path: Path) -> None:
    runs = read_nccl_runs(FIVE)
    gather = runs[1]
    text = FIVE.read_text().splitlines()
    # its rank lines removed: the error has no line of its own to name, so it names the run
    kept = [ln for i, ln in enumerate(text, 1)
            if not (gather.lines[0] <= i <= gather.lines[1] and ln.startswith("#  Rank"))]
    path = tmp_path / "five.log"
    path.write_text("\n".join(kept) + "\n")
    with pytest.raises(InputError, match=r"\(all_gather_perf on lines 37-\d+\): no `#  Rank N"):
        read_nccl_runs(path)
    with pytest.raises(InputError, match="line 37: a second run starts here: the file holds 5 runs"):
        read_nccl_tests(FIVE)


def test_a_cut_rank_list_is_named_as_such_not_as_an_edited_row(tmp_path: Path) -> None:
    """A user trial: an output posted with its rank list elided (16 ranks ran, 8 rank lines shown) was told its
    first checked row "was edited"; the rows' busbw / algbw says how many ranks ran."""
    lines = (NCCL / "h100-2node-all_reduce_perf.txt").read_text().splitlines()
    assert read_nccl_tests(NCCL / "h100-2node-all_reduce_perf.txt").ranks == 16
    ranks = [i for i, ln in enumerate(lines) if ln.lstrip("#").strip().startswith("Rank")]
    cut = [ln for i, ln in enumerate(lines) if i not in ranks[8:]]
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text("\n".join(cut) + "\n")
    with pytest.raises(InputError, match=r"on 8 ranks prints 1\.750, what about 16 ranks print: the file lists 8 "
                                         r"rank lines, fewer than ran") as err:
        read_nccl_tests(path)
    assert "edited" not in str(err.value)
