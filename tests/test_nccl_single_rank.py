"""An nccl-tests output of one rank measures no communication (a local copy: no peer, no NVLink, no network).  A user
check: a one-GPU all_reduce_perf was read as a measurement, priced 0 s, every row "100 % off" with numpy's
divide-by-zero warnings, and the profile written.  One rank line above rows whose busbw / algbw says more ranks ran is
a cut rank list, which was read the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.calibration.nccl_tests import read_nccl_runs
from placement.errors import InputError

DATA = Path(__file__).parent / "data" / "nccl"

ONE_GPU = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 \
validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  12345 on    node001 device  0 [0x18] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1     4.12    0.00    0.00      0     0.16    0.05    0.00      0
     1048576        262144     float     sum      -1     6.10  171.90    0.00      0     0.16  6553.60    0.00      0
   134217728      33554432     float     sum      -1    98.50  1362.62    0.00      0     0.17  789516.05    0.00      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0
#
"""


def test_a_one_rank_output_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "all_reduce_perf-1gpu.txt"
    path.write_text(ONE_GPU)
    with pytest.raises(InputError, match=r"all_reduce_perf-1gpu.txt`: one rank .*no NVLink or network measurement; "
                                         r"give a run across 2 or more GPUs"):
        read_nccl_runs(path)


def test_one_rank_line_above_a_16_rank_table_is_a_cut_list(tmp_path: Path) -> None:
    text = (DATA / "h100-2node-all_reduce_perf-ring.txt").read_text().splitlines()
    cut = [line for line in text if not (line.startswith("#  Rank") and " Rank  0 " not in line)]
    assert sum(line.startswith("#  Rank") for line in cut) == 1
    path = tmp_path / "all_reduce_perf-cut.txt"
    path.write_text("\n".join(cut) + "\n")
    with pytest.raises(InputError, match=r"one `#  Rank N \.\.\. on HOST` line, but its rows' busbw / algbw is what "
                                         r"16 ranks print: the rank list is cut"):
        read_nccl_runs(path)
