"""nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf, sendrecv_perf), read
as the binaries print it, and the cost model's time for each row on a topology.

The file gives the ranks and the hosts they ran on (`#  Rank  3 Group  0 Pid ... on HOST device  3 [...]
NVIDIA H100 ...`), and one row per size: `size count type redop [root] time algbw busbw #wrong` out of place,
then the same in place.  The out-of-place time is the measurement.  Sizes follow nccl-tests' own convention
(doc/PERFORMANCE.md): the whole buffer for all-reduce, all-gather and reduce-scatter (what each rank ends with
or starts from), each rank's send buffer for all-to-all and send/receive, which is what cost.collectives takes.

The test's name comes from its `# Collective test starting: all_reduce_perf` line (nccl-tests 2.13+) or, for
older outputs, from the file name; neither is an error that says how to name the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from placement.cost import collectives as coll
from placement.errors import InputError
from placement.loaders.files import read_text
from placement.topology import Topology

OPS: Final = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
_OP_SPELLINGS: Final = {op: (op, op.replace("_", "")) for op in OPS}
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(.+?)\s+device\s+(\d+)\s+\[[^\]]*\]\s*(.*)$")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\w+)")
_NUM = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")


@dataclass(frozen=True)
class NcclRow:
    size_bytes: int
    time_s: float
    busbw_bytes_per_s: float
    line: int


@dataclass(frozen=True)
class NcclRun:
    path: str
    op: str
    ranks: int
    hosts: tuple[str, ...]
    """Distinct hosts in rank order."""
    gpus_per_host: int
    gpu: str
    """The device name the rank lines print (e.g. `NVIDIA H100 80GB HBM3`)."""
    rows: tuple[NcclRow, ...]

    @property
    def label(self) -> str:
        return f"{self.op}_perf, {self.ranks} ranks on {len(self.hosts)} host(s)"


def _op_of(path: Path, lines: list[str]) -> str:
    for line in lines[:200]:
        m = _STARTING.match(line)
        if m:
            name = m.group(1).removesuffix("_perf")
            if name in OPS:
                return name
    stem = path.name.lower()
    found = [op for op, spellings in _OP_SPELLINGS.items() if any(s in stem for s in spellings)]
    # "reduce_scatter" contains no other op's name, but "all_reduce" is in neither; keep the longest match
    if found:
        return max(found, key=len)
    raise InputError(
        f"nccl-tests file `{path}`: no `# Collective test starting:` line and the file name names no test; name "
        f"the file after the binary that printed it (one of {', '.join(o + '_perf' for o in OPS)}), e.g. "
        f"`all_reduce_perf-2nodes.txt`"
    )


REDUCING: Final = ("all_reduce", "reduce_scatter")
"""The tests whose rows name a reduction (`sum`, ...); the others print `none` in the redop column."""


def _row(tokens: list[str]) -> tuple[int, float, float] | None:
    """(size, out-of-place time in us, out-of-place busbw in GB/s) of a result row, or None."""
    if len(tokens) < 8 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    # size count type redop [root] time algbw busbw #wrong, out of place then in place: nccl-tests 2.10+ print
    # the root column (13 columns), older ones do not (12)
    first = 5 if len(tokens) >= 13 else 4
    vals = tokens[first:first + 3]
    if len(vals) < 3 or not all(_NUM.match(v) for v in vals):
        return None
    return int(tokens[0]), float(vals[0]), float(vals[2])


def read_nccl_tests(path: Path | str) -> NcclRun:
    """One nccl-tests output file; an error names the file and what it lacks."""
    path = Path(path)
    text = read_text(path, "nccl-tests file", "give the text an nccl-tests binary printed (e.g. all_reduce_perf)")
    lines = text.splitlines()
    op = _op_of(path, lines)
    ranks: dict[int, tuple[str, str]] = {}
    rows = []
    for i, line in enumerate(lines, start=1):
        m = _RANK.match(line.strip())
        if m:
            ranks[int(m.group(1))] = (m.group(2), m.group(4).strip())
            continue
        if line.lstrip().startswith("#"):
            continue
        tokens = line.split()
        got = _row(tokens)
        if got is None and len(tokens) >= 2 and tokens[0].isdigit() and tokens[1].isdigit():
            raise InputError(f"nccl-tests file `{path}` line {i}: a result row with {len(tokens)} columns, where "
                             f"nccl-tests prints 12 or 13 (size count type redop [root] time algbw busbw #wrong, "
                             f"out of place then in place): the output is cut or edited; give the whole output")
        if got is None:
            continue
        if got[0] > 0 and got[1] <= 0:
            raise InputError(f"nccl-tests file `{path}` line {i}: {got[0]} bytes in {got[1]} us is no measurement; "
                             f"give the output as the binary printed it")
        redop = tokens[3]
        if (redop != "none") != (op in REDUCING):
            raise InputError(f"nccl-tests file `{path}` line {i}: a row with reduction {redop!r}, which "
                             f"{op}_perf does not print ({'a reduction' if op in REDUCING else 'none'}); the file "
                             f"is another test's output (its name or `# Collective test starting:` line says {op})")
        if got[0] > 0:
            rows.append(NcclRow(got[0], got[1] * 1e-6, got[2] * 1e9, i))
    if not ranks:
        raise InputError(f"nccl-tests file `{path}`: no `#  Rank N Group ... on HOST device N` lines, so the ranks "
                         f"and hosts it ran on are unknown; give the whole output, header included")
    if not rows:
        raise InputError(f"nccl-tests file `{path}`: no result rows (size count type redop ... time algbw busbw); "
                         f"give the whole output of the run")
    hosts = tuple(dict.fromkeys(h for _, (h, _) in sorted(ranks.items())))
    per_host = {h: sum(1 for hh, _ in ranks.values() if hh == h) for h in hosts}
    if len(set(per_host.values())) != 1:
        raise InputError(f"nccl-tests file `{path}`: hosts ran different numbers of ranks ({per_host}); calibrate "
                         f"from runs with the same GPUs on every host")
    return NcclRun(str(path), op, len(ranks), hosts, next(iter(per_host.values())),
                   next(iter(ranks.values()))[1], tuple(rows))


def run_topology(run: NcclRun, base: Topology) -> tuple[Topology, coll.Groups]:
    """A topology of the run's hosts shaped like `base` (its cluster design) and the group the test ran as."""
    gpn = base.cluster.gpus_per_node
    if run.ranks > base.num_gpus:
        raise InputError(f"nccl-tests file `{run.path}`: {run.ranks} ranks on {len(run.hosts)} host(s), more than "
                         f"the {base.num_gpus} GPUs given; give the GPU count the test ran on (--gpus "
                         f"{run.ranks} or more)")
    if run.gpus_per_host > gpn:
        raise InputError(f"nccl-tests file `{run.path}`: {run.gpus_per_host} ranks per host but a "
                         f"{base.cluster.name} node has {gpn} GPUs; give the cluster it ran on (--cluster)")
    if len(run.hosts) > 1 and run.gpus_per_host not in (1, gpn):
        raise InputError(f"nccl-tests file `{run.path}`: {run.gpus_per_host} of {gpn} GPUs per host across "
                         f"{len(run.hosts)} hosts is not modelled; calibrate from runs on whole nodes or one GPU "
                         f"per node")
    topo = Topology(base.cluster, base.accelerator, num_gpus=len(run.hosts) * gpn)
    stride = gpn if (len(run.hosts) > 1 and run.gpus_per_host == 1) else 1
    return topo, (stride, run.ranks)


def predict_times(run: NcclRun, topo: Topology, stride: int) -> np.ndarray:
    """The cost model's seconds for each row of `run` on `topo` (already calibrated or not)."""
    levels = coll.LevelArrays(topo)
    pair = run.op == "sendrecv"
    group = coll.Groups(levels, np.array([stride]), np.array([run.ranks]), pair=pair)
    sizes = np.array([r.size_bytes for r in run.rows], dtype=np.float64)
    if run.op == "all_reduce":
        return group.all_reduce(sizes)
    if run.op in ("all_gather", "reduce_scatter"):
        return group.reduce_scatter(sizes)
    if run.op == "alltoall":
        return group.all_to_all(sizes)
    return group.p2p(sizes)


def bus_bandwidth(op: str, ranks: int, size_bytes: float, time_s: float) -> float:
    """nccl-tests' busbw for a time (doc/PERFORMANCE.md): algbw times 2(n-1)/n for all-reduce, (n-1)/n for
    all-gather, reduce-scatter and all-to-all, 1 for send/receive."""
    factor = {"all_reduce": 2.0 * (ranks - 1) / ranks, "sendrecv": 1.0}.get(op, (ranks - 1) / ranks)
    return size_bytes / time_s * factor
