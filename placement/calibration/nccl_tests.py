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
from placement.loaders.files import read_text, unprefixed
from placement.topology import Topology

OPS: Final = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
_OP_SPELLINGS: Final = {op: (op, op.replace("_", "")) for op in OPS}
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(.+?)\s+device\s+(\d+)\s+"
                   r"\[[^\]]*\]\s*(.*)$")
"""A rank line; `Group N` came with nccl-tests v2.13.4 (d313d20), older outputs (v2.0-v2.13.3) print none."""
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\w+)")
_NUM = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")
_HEADER = re.compile(r"^#\s*nThread\s+\d+")
"""The first line nccl-tests prints for a run (`# nThread 1 nGpus 1 minBytes ...`): a second one is a second run."""
_ROW_START = re.compile(r"^\s*\d+\s+\d+\s+[a-z]\w*\s")
"""The start of a table row (`size count type ...`): a file of rows without the header is still nccl-tests'."""
_TRAILER = re.compile(r"^#\s*Avg bus bandwidth\s*:")
DEVICES: Final = ((re.compile(r"\bgb300\b"), "gb300"), (re.compile(r"\bgb200\b"), "gb200"),
                  (re.compile(r"\bb200\b"), "b200"), (re.compile(r"\bh800\b"), "h800-sxm"),
                  (re.compile(r"\bh200\b"), "h200"),
                  (re.compile(r"\bh100\b(?!.*\b(pcie|nvl)\b)"), "h100-sxm"),
                  (re.compile(r"\ba100\b.*\b80\s?gb\b"), "a100-80g"),
                  (re.compile(r"\ba100\b.*\b40\s?gb\b"), "a100-40g"),
                  (re.compile(r"\bmi300x\b"), "mi300x"))
"""The catalog accelerator of a device name as nccl-tests prints it (`NVIDIA H100 80GB HBM3`, `NVIDIA B200`,
`NVIDIA A100-SXM4-80GB`); the first pattern that matches wins.  H100 PCIe and H100 NVL are other parts."""


def accelerator_of(device: str) -> str | None:
    """The catalog accelerator a device name names, or None when none does."""
    text = device.lower().replace("-", " ")
    return next((acc for pattern, acc in DEVICES if pattern.search(text)), None)


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
    devices: tuple[str, ...] = ()
    """Every distinct device name the rank lines print (empty: they print none)."""
    warnings: tuple[str, ...] = ()
    """What was read with a doubt (rows left out for a failed data check, no closing line)."""
    lines: tuple[int, int] | None = None
    """(first, last) line of this run where its file holds several (a log of tests run one after another);
    None where the file is this run alone."""

    @property
    def label(self) -> str:
        where = f" (lines {self.lines[0]}-{self.lines[1]})" if self.lines else ""
        return f"{self.op}_perf{where}, {self.ranks} ranks on {len(self.hosts)} host(s)"


def _op_of(path: Path, lines: list[str], offset: int = 0) -> tuple[str, int | None]:
    """(the test, the line of its `# Collective test starting:` line, None when the file name named it); `lines` are
    the file's from line `offset` + 1."""
    for i, line in enumerate(lines[:200], start=offset + 1):
        m = _STARTING.match(unprefixed(line).strip())
        if m:
            name = m.group(1).removesuffix("_perf")
            if name not in OPS:
                raise InputError(
                    f"nccl-tests file `{path}` line {i}: the output of {m.group(1)}, which calibrate does not "
                    f"read (it reads {', '.join(o + '_perf' for o in OPS)}); give one of those tests' outputs")
            return name, i
    stem = path.name.lower()
    found = [op for op, spellings in _OP_SPELLINGS.items() if any(s in stem for s in spellings)]
    # "reduce_scatter" contains no other op's name, but "all_reduce" is in neither; keep the longest match
    if found:
        return max(found, key=len), None
    if not any(_HEADER.match(unprefixed(line).strip()) or _ROW_START.match(unprefixed(line)) for line in lines):
        # a user trial's plain text log was asked to be renamed, as if it were nccl-tests output
        raise InputError(
            f"nccl-tests file `{path}`: not nccl-tests output (no `# nThread ...` header, which every nccl-tests "
            f"binary prints first, nor a `# Collective test starting:` line); give the file one of "
            f"{', '.join(o + '_perf' for o in OPS)} printed, whole")
    raise InputError(
        f"nccl-tests file `{path}`: no `# Collective test starting:` line and the file name names no test; name "
        f"the file after the binary that printed it (one of {', '.join(o + '_perf' for o in OPS)}), e.g. "
        f"`all_reduce_perf-2nodes.txt`"
    )


REDUCING: Final = ("all_reduce", "reduce_scatter", "sendrecv")
"""The tests whose rows name a reduction (`sum`, ...; nccl-tests src/*.cu pass the reduction op to TimeTest, and
sendrecv.cu loops over them though it reduces nothing); all_gather and alltoall print `none`.  Checked only when
the file name names the test: a `# Collective test starting:` line names it for certain."""


def _row(tokens: list[str], cols: list[str] | None = None
         ) -> tuple[int, float, float, tuple[str, str], float] | None:
    """(size, out-of-place time in us, out-of-place busbw in GB/s, #wrong out of place and in place, out-of-place
    algbw in GB/s) of a result
    row, or None (also a row shorter than its table's header: cut).  `cols`: the table header's column names, None
    where no header was seen (then the row's own length tells)."""
    if len(tokens) < 8 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    # size count type [redop] [root] time algbw busbw #wrong, out of place then in place: nccl-tests 2.13+ print
    # the root column (13 columns), older ones do not (12, with an `error` column for #wrong), and before 2.13
    # all_gather and sendrecv print no redop either (11); the header says which
    if cols is None:
        first, width = (5, 13) if len(tokens) >= 13 else (4, 12)
    else:
        first, width = cols.index("time"), len(cols)
    if len(tokens) < width:
        return None
    vals = tokens[first:first + 3]
    if len(vals) < 3 or not all(_NUM.match(v) for v in vals):
        return None
    wrong = (tokens[first + 3] if len(tokens) > first + 3 else "", tokens[first + 7] if len(tokens) > first + 7 else "")
    return int(tokens[0]), float(vals[0]), float(vals[2]), wrong, float(vals[1])


def _header_columns(stripped: str) -> list[str] | None:
    """The column names of a result table's header line (`#  size  count  type  redop  root  time ...`), or None
    where it has no `time` column."""
    cols = stripped.lstrip("#").split()
    return cols if "time" in cols else None


def _failed(wrong: str) -> bool:
    """A #wrong cell that counts wrong elements (`N/A` when the data check was off, 0 when it passed)."""
    return wrong.isdigit() and int(wrong) > 0


def read_nccl_tests(path: Path | str) -> NcclRun:
    """The one run of an nccl-tests output file; a file of several is an error naming the second (`read_nccl_runs`
    reads each)."""
    runs = read_nccl_runs(path)
    if len(runs) > 1:
        raise InputError(f"nccl-tests file `{path}` line {runs[1].lines[0]}: a second run starts here: the file "
                         f"holds {len(runs)} runs; give each run in its own file")
    return runs[0]


def read_nccl_runs(path: Path | str) -> list[NcclRun]:
    """Every run of an nccl-tests output file, in file order; an error names the file and what it lacks.

    A log of several tests run one after another (the five binaries into one file, as cluster scripts do) is read
    run by run where each names its test on its own `# Collective test starting:` line (nccl-tests 2.13+), each run
    from that line to the next run's; a second `# nThread` header without one would be fitted as one run with the
    first, and is an error."""
    path = Path(path)
    text = read_text(path, "nccl-tests file", "give the text an nccl-tests binary printed (e.g. all_reduce_perf)")
    if not text.strip():
        raise InputError(f"nccl-tests file `{path}` is empty; give the text an nccl-tests binary printed (e.g. "
                         f"all_reduce_perf), its header and rows included")
    lines = text.splitlines()
    spans = _run_spans(path, lines)
    if len(spans) == 1:
        return [_read_run(path, lines, 0, len(lines), None)]
    return [_read_run(path, lines, a, b, (a + 1, b)) for a, b in spans]


def _run_spans(path: Path, lines: list[str]) -> list[tuple[int, int]]:
    """(start, end) line indices of each run: one span for a file of one run; for several, each run from its
    `# Collective test starting:` line (the first from the file's start) to the next run's."""
    stripped = [unprefixed(raw).strip() for raw in lines]
    headers = [i for i, s in enumerate(stripped) if _HEADER.match(s)]
    if len(headers) <= 1:
        return [(0, len(lines))]
    named = [[i for i in range(headers[k - 1] + 1 if k else 0, h) if _STARTING.match(stripped[i])]
             for k, h in enumerate(headers)]
    fix = "give each run in its own file, or the log as nccl-tests 2.13+ prints it (each run named)"
    for k in range(1, len(headers)):
        if not named[k]:
            raise InputError(f"nccl-tests file `{path}` line {headers[k] + 1}: a second run starts here (its "
                             f"`# nThread ...` header; the first is on line {headers[0] + 1}) with no `# Collective "
                             f"test starting:` line before it to name its test, so the two would be fitted as one "
                             f"run; {fix}")
    if not named[0]:
        raise InputError(f"nccl-tests file `{path}` line {headers[0] + 1}: the first of its {len(headers)} runs names "
                         f"no test (no `# Collective test starting:` line before its `# nThread ...` header), where "
                         f"the others do; {fix}")
    starts = [0, *(n[-1] for n in named[1:])]
    return list(zip(starts, [*starts[1:], len(lines)], strict=True))


def _read_run(path: Path, all_lines: list[str], start: int, end: int, span: tuple[int, int] | None) -> NcclRun:
    """The run on lines [start, end) of the file (`span`: its first and last line where the file holds several)."""
    lines = all_lines[start:end]
    op, named_at = _op_of(path, lines, start)
    part = f" ({op}_perf on lines {span[0]}-{span[1]})" if span else ""  # which run, in a message with no line
    file = f"nccl-tests file `{path}`{part}"
    ranks: dict[int, tuple[str, str]] = {}
    rows = []
    seen: dict[int, tuple[int, tuple[str, str]]] = {}  # size -> (line, (type, reduction))
    trailer = None
    in_table = False
    cols: list[str] | None = None  # the table header's column names
    failed: list[str] = []
    printed: list[tuple[int, int, float, float, float]] = []  # (line, size, time us, algbw, busbw) as printed
    for i, raw in enumerate(lines, start=start + 1):
        line = unprefixed(raw)
        stripped = line.strip()
        if _HEADER.match(stripped):  # one per span (_run_spans)
            continue
        m = _RANK.match(stripped)
        if m:
            ranks[int(m.group(1))] = (m.group(2), m.group(4).strip())
            continue
        if _TRAILER.match(stripped):
            trailer = i
            in_table = False
            continue
        if stripped.startswith("#"):
            if "size" in stripped and "count" in stripped and "type" in stripped:
                in_table = True
                cols = _header_columns(stripped) or cols
            continue
        tokens = line.split()
        got = _row(tokens, cols)
        unmeasured = [t for t in tokens[4:] if t.lower().lstrip("+-") in ("nan", "inf", "infinity")]
        if got is None and tokens and tokens[0].isdigit() and unmeasured:
            # a user trial: a row with a nan time was called cut, "13 columns, where its table's header has 13"
            raise InputError(f"nccl-tests file `{path}` line {i}: {unmeasured[0]} where a time or bandwidth is "
                             f"printed, not a finite number: this size measured nothing (the collective failed or "
                             f"hung); rerun the test, or cut the file before that row")
        if got is None and tokens and tokens[0].isdigit() and (
                in_table or (len(tokens) >= 2 and tokens[1].isdigit())):
            header = (f"its table's header has {len(cols)}" if cols is not None
                      else "nccl-tests prints 11 to 13")
            raise InputError(f"nccl-tests file `{path}` line {i}: a result row with {len(tokens)} columns, where "
                             f"{header} (size count type redop [root] time algbw busbw #wrong, out of place then in "
                             f"place): the output is cut or edited; give the whole output")
        if got is None:
            continue
        if got[0] > 0 and got[1] <= 0:
            raise InputError(f"nccl-tests file `{path}` line {i}: {got[0]} bytes in {got[1]} us is no measurement; "
                             f"give the output as the binary printed it")
        redop = tokens[3] if cols is None or "redop" in cols else "none"  # no redop column: no reduction printed
        if named_at is None and (cols is None or "redop" in cols) and (redop != "none") != (op in REDUCING):
            raise InputError(f"nccl-tests file `{path}` line {i}: a row with reduction {redop!r}, which "
                             f"{op}_perf does not print ({'a reduction' if op in REDUCING else 'none'}); the file "
                             f"is another test's output (its name says {op}, and it has no `# Collective test "
                             f"starting:` line to say otherwise); name the file after the binary that printed it")
        if got[0] == 0:  # nccl-tests rounds each rank's count down: a small -b prints several 0-byte rows
            continue
        kind = (tokens[2], redop)  # the row's data type and reduction
        if got[0] in seen:
            first, first_kind = seen[got[0]]
            if kind != first_kind:
                # a user trial: `all_reduce_perf -d all` was told it held two runs, "give each run in its own file"
                raise InputError(
                    f"nccl-tests file `{path}` line {i}: size {got[0]} again as {' '.join(kind)} (first on line "
                    f"{first} as {' '.join(first_kind)}): this run timed several data types or reduction ops "
                    f"(nccl-tests `-d all` or `-o all` time the whole size range once per type, then per op: "
                    f"src/all_reduce.cu AllReduceRunTest), which calibrate would fit as one collective; rerun with "
                    f"one type and op (`-d bfloat16 -o sum`; without -d and -o nccl-tests runs float sum), or keep "
                    f"one type's and op's rows")
            raise InputError(f"nccl-tests file `{path}` line {i}: size {got[0]} again (first on line {first}): "
                             f"two runs in one file would be fitted as one; give each run in its own file")
        seen[got[0]] = (i, kind)
        out_wrong, in_wrong = got[3]
        if _failed(out_wrong) or _failed(in_wrong):
            failed.append(f"line {i} ({got[0]:,} B: #wrong {out_wrong} out of place, {in_wrong} in place)")
            continue
        if got[0] > 0:
            rows.append(NcclRow(got[0], got[1] * 1e-6, got[2] * 1e9, i))
            printed.append((i, got[0], got[1], got[4], got[2]))
    warnings = []
    if failed:
        warnings.append(f"`{path}`{part}: {len(failed)} row(s) failed nccl-tests' data check (a nonzero #wrong: the "
                        f"collective returned wrong data, so its time is no measurement of a working collective) "
                        f"and are left out: {'; '.join(failed)}; check the GPUs and the fabric before trusting "
                        f"this run")
    if rows and trailer is None:
        warnings.append(f"`{path}`{part}: no `# Avg bus bandwidth` line after the last row (line {rows[-1].line}): the "
                        f"output may be cut, and the sizes after it missing; give the whole output")
    if not ranks:
        raise InputError(f"{file}: no `#  Rank N Group ... on HOST device N` lines, so the ranks "
                         f"and hosts it ran on are unknown; give the whole output, header included")
    if not rows:
        if failed:
            raise InputError(f"{file}: every result row failed nccl-tests' data check (a nonzero "
                             f"#wrong: {'; '.join(failed)}); a run that returns wrong data cannot calibrate")
        raise InputError(f"{file}: no result rows (size count type redop ... time algbw busbw); "
                         f"give the whole output of the run")
    if len(ranks) == 1:
        more = next((m for *_, algbw, busbw in printed if algbw >= CHECKED_ALGBW_GBPS
                     and (m := _ranks_of_factor(op, busbw / algbw)) is not None and m > 1), None)
        if more is not None:  # one rank line shown, the rows' busbw / algbw say more ran: the list is cut
            raise InputError(f"{file}: one `#  Rank N ... on HOST` line, but its rows' busbw / algbw is what {more} "
                             f"ranks print: the rank list is cut or elided, so the ranks and hosts the rows measured "
                             f"are unknown; give the whole output, every rank line included")
        # a user check: a one-GPU all_reduce_perf was fitted as a measurement, priced 0 s (no peer, no transfer), every
        # row "100 % off" with numpy's divide-by-zero warnings, and the profile written
        raise InputError(f"{file}: one rank (`#  Rank 0 ... on {next(iter(ranks.values()))[0]}`), which communicates "
                         f"with no peer: its times are a local copy, no NVLink or network measurement; give a run "
                         f"across 2 or more GPUs (nccl-tests -g 8 on one node, or one rank per GPU under mpirun/srun; "
                         f"a binary built without MPI=1 prints one 1-rank run per process)")
    _check_columns(path, op, len(ranks), printed)
    hosts = tuple(dict.fromkeys(h for _, (h, _) in sorted(ranks.items())))
    per_host = {h: sum(1 for hh, _ in ranks.values() if hh == h) for h in hosts}
    if len(set(per_host.values())) != 1:
        raise InputError(f"{file}: hosts ran different numbers of ranks ({per_host}); calibrate "
                         f"from runs with the same GPUs on every host")
    devices = tuple(dict.fromkeys(d for _, (_, d) in sorted(ranks.items()) if d))
    return NcclRun(str(path), op, len(ranks), hosts, next(iter(per_host.values())),
                   next(iter(ranks.values()))[1], tuple(rows), devices, tuple(warnings), span)


def check_device(run: NcclRun, base: Topology, cluster_name: str) -> str | None:
    """An error when the run's GPUs are another accelerator than the cluster's; a note (the check skipped) when
    its rank lines name no device or a device the catalog does not know."""
    acc = base.accelerator.name
    if not run.devices:
        return (f"`{run.path}`: its rank lines name no device, so the check that it ran on {cluster_name}'s "
                f"{acc} was skipped")
    known = {d: accelerator_of(d) for d in run.devices}
    other = {d: a for d, a in known.items() if a is not None and a != acc}
    if other:
        names = ", ".join(f"{d!r} ({a})" for d, a in other.items())
        raise InputError(f"nccl-tests file `{run.path}`: it ran on {names}, but {cluster_name} is built of {acc}; "
                         f"its constants would be fitted to the wrong accelerator; give the cluster it ran on "
                         f"(--cluster) or a run on {cluster_name}")
    unknown = [d for d, a in known.items() if a is None]
    if unknown:
        return (f"`{run.path}`: device {', '.join(map(repr, unknown))} is no catalog accelerator, so the check that "
                f"it ran on {cluster_name}'s {acc} was skipped")
    return None


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
    stride = gpn if (len(run.hosts) > 1 and run.gpus_per_host == 1) else 1
    own = allocation_hosts(run, base)
    if own is not None:
        return own, (stride, run.ranks)
    topo = Topology(base.cluster, base.accelerator, num_gpus=len(run.hosts) * gpn)
    return topo, (stride, run.ranks)


def allocation_hosts(run: NcclRun, base: Topology) -> Topology | None:
    """On a real allocation (--slurm-topology and --nodelist) whose hosts include every host the run names: those
    hosts, in the run's rank order, with the allocation's switches above them, so a run whose hosts sit under two
    leaves is priced across the spine (a user trial: the same latency was fitted from a one-leaf, a two-leaf and a
    foreign-host topology, each file priced as the cluster design's regular layout).  None elsewhere."""
    if not base.allocated or len(run.hosts) < 2:
        return None
    index = {h: i for i, h in enumerate(base.host_names)}
    if any(h not in index for h in run.hosts):
        return None
    gpn = base.cluster.gpus_per_node
    blocks = np.asarray(base._explicit_blocks)[:, ::gpn]  # each host's block at every level
    return Topology.from_hosts(base.cluster, base.accelerator, list(run.hosts),
                               blocks[:, [index[h] for h in run.hosts]], base.levels)


def foreign_hosts(run: NcclRun, base: Topology) -> str | None:
    """A note where a real allocation is given but the run ran on hosts outside it: priced as the cluster design's
    regular layout, not on the allocation's switches."""
    if not base.allocated or len(run.hosts) < 2:
        return None
    allocated = set(base.host_names)
    missing = [h for h in run.hosts if h not in allocated]
    if not missing:
        return None
    return (f"`{run.path}`: its host(s) {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''} are not in the "
            f"allocation given (--nodelist), so it is priced as {base.cluster.name}'s regular layout of "
            f"{len(run.hosts)} hosts, not on the allocation's switches; give the host list the test ran on")


def predict_times(run: NcclRun, topo: Topology, stride: int, sizes: np.ndarray | None = None) -> np.ndarray:
    """The cost model's seconds for each row of `run` on `topo` (already calibrated or not); with `sizes`, for
    those sizes instead (zero: the latency term alone)."""
    levels = coll.LevelArrays(topo)
    pair = run.op == "sendrecv"
    group = coll.Groups(levels, np.array([stride]), np.array([run.ranks]), pair=pair)
    if sizes is None:
        sizes = np.array([r.size_bytes for r in run.rows], dtype=np.float64)
    if run.op == "all_reduce":
        return group.all_reduce(sizes)
    if run.op in ("all_gather", "reduce_scatter"):
        return group.reduce_scatter(sizes)
    if run.op == "alltoall":
        return group.all_to_all(sizes)
    return group.p2p(sizes, wrap=True)  # sendrecv_perf: rank r sends to r + 1 and the last rank to the first


CHECKED_ALGBW_GBPS: Final = 1.0
"""Rows whose printed algbw is at least this (GB/s) are checked against their time and busbw: nccl-tests prints two
decimals, so smaller ones are too coarse to compare."""
COLUMN_TOLERANCE: Final = 0.05
"""Relative disagreement the checks allow between printed columns (rounding to two decimals, and the time's own)."""


def bus_factor(op: str, ranks: int) -> float:
    """busbw / algbw of a test (nccl-tests doc/PERFORMANCE.md)."""
    return {"all_reduce": 2.0 * (ranks - 1) / ranks, "sendrecv": 1.0}.get(op, (ranks - 1) / ranks)


def _check_columns(path: Path, op: str, ranks: int, printed: list[tuple[int, int, float, float, float]]) -> None:
    """An InputError where a row's printed columns contradict each other, which nccl-tests never prints (a user
    trial: times converted to ms were fitted with errors of 118,414 %, and an all_reduce output whose header was
    renamed all_gather fitted as an all-gather):
    - algbw is size / time: off by more than COLUMN_TOLERANCE, the time column is not the microseconds printed;
    - busbw / algbw is the test's factor (2(n-1)/n for all_reduce): another factor is another test's output."""
    factor = bus_factor(op, ranks)
    others = {o: bus_factor(o, ranks) for o in OPS if abs(bus_factor(o, ranks) - factor) > 2 * COLUMN_TOLERANCE}
    for line, size, time_us, algbw, busbw in printed:
        if algbw < CHECKED_ALGBW_GBPS:
            continue
        implied = size / (time_us * 1e-6) / 1e9
        if abs(implied / algbw - 1.0) > COLUMN_TOLERANCE:
            raise InputError(f"nccl-tests file `{path}` line {line}: {size:,} bytes in {time_us:g} us is "
                             f"{implied:,.2f} GB/s, but the row's algbw is {algbw:g} GB/s: nccl-tests prints algbw = "
                             f"size / time with the time in microseconds, so the time column was converted or "
                             f"edited; give the output as the binary printed it")
        if ranks > 1 and abs(busbw / algbw / factor - 1.0) > COLUMN_TOLERANCE:
            like = [o for o, f in others.items() if abs(busbw / algbw / f - 1.0) <= COLUMN_TOLERANCE]
            more = _ranks_of_factor(op, busbw / algbw)
            head = (f"nccl-tests file `{path}` line {line}: busbw / algbw is {busbw / algbw:.3f}, where {op}_perf on "
                    f"{ranks} ranks prints {factor:.3f}")
            if more is not None and more > ranks and not like:
                # a user trial: a post with its rank list elided ("...") was told its row was edited
                raise InputError(f"{head}, what about {more} ranks print: the file lists {ranks} rank lines, fewer "
                                 f"than ran (the `#  Rank N ... on HOST` list is cut or elided), so the ranks and "
                                 f"hosts the rows measured are unknown; give the whole output, every rank line "
                                 f"included")
            raise InputError(head
                             + (f" ({' and '.join(o + '_perf' for o in like)} print{'s' if len(like) == 1 else ''} "
                                f"{busbw / algbw:.3f}): the file is another test's output" if like else
                                ": the row was edited")
                             + "; give each test's output as its binary printed it")


def _ranks_of_factor(op: str, ratio: float) -> int | None:
    """The rank count whose busbw / algbw is `ratio` for `op` (2(n-1)/n, or (n-1)/n), where one is within
    COLUMN_TOLERANCE; None for sendrecv (1 on any count) or no such count."""
    if op == "sendrecv":
        return None
    share = ratio / (2.0 if op == "all_reduce" else 1.0)  # (n-1)/n
    if not 0.0 < share < 1.0:
        return None
    n = round(1.0 / (1.0 - share))
    return n if n > 1 and abs(ratio / bus_factor(op, n) - 1.0) <= COLUMN_TOLERANCE else None


def bus_bandwidth(op: str, ranks: int, size_bytes: float, time_s: float) -> float:
    """nccl-tests' busbw for a time (doc/PERFORMANCE.md): algbw times 2(n-1)/n for all-reduce, (n-1)/n for
    all-gather, reduce-scatter and all-to-all, 1 for send/receive."""
    return size_bytes / time_s * bus_factor(op, ranks)
