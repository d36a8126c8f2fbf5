"""Read the GPU-to-GPU matrix of ``nvidia-smi topo -m`` into a NodeTopo.

The output, as printed by drivers from the Pascal era to today (samples in tests/data/nvsmi/, sources in
the README there)::

            GPU0    GPU1    ...   NIC0    NIC1   ...   CPU Affinity    NUMA Affinity   GPU NUMA ID
    GPU0     X      NV18    ...   PIX     NODE   ...   0-31,64-95      0               N/A
    GPU1    NV18     X      ...
    NIC0    PIX     NODE    ...    X      NODE   ...

    Legend:

      X    = Self
      ...
      NV#  = Connection traversing a bonded set of # NVLinks

    NIC Legend:

      NIC0: mlx5_0

- The header row lists GPU0..GPUn-1, then the other devices (``NIC0``.. on recent drivers; older drivers
  name the columns by device, e.g. ``mlx5_0``, and print no NIC legend), then the affinity columns
  (``CPU Affinity``, then on newer drivers ``NUMA Affinity`` and ``GPU NUMA ID``; all may be absent).
- One row per GPU, in order, then one row per other device.  Each row gives one code per GPU and device
  column; what follows (affinities, ``N/A``) is ignored.  Cells are separated by tabs or spaces.
- Codes: ``X`` (self), ``NV#`` (# bonded NVLinks), ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``.  Drivers
  before ``NODE`` existed printed ``SOC`` ("Connection traversing PCIe as well as the SMP link between CPU
  sockets(e.g. QPI)") for what is now ``SYS``; we read ``SOC`` as ``SYS``.
- Lines before the header (a shell prompt, ``NVIDIA Topology:``) and after the matrix (the legends,
  other tool output) are skipped, except the ``NIC Legend:`` entries, which name the NIC columns.

Only GPU-GPU cells go into ``NodeTopo.links``; NIC rows are checked for shape and codes but not kept.
A malformed matrix (no header, a GPU row missing or out of order, a row with fewer or more cells than
columns, an unknown code, no ``X`` on the diagonal, ``X`` off it, an asymmetric pair) is an InputError
naming the source, the line and the expected form.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final, NoReturn

from placement.errors import InputError
from placement.loaders.files import read_text
from placement.specs.fabric import GpuLink, LinkClass, NodeTopo

_LEGACY_CODES: Final = {"SOC": LinkClass.SYS}
"""Codes of older drivers and the class they mean today."""

_PLAIN_CODES: Final = frozenset(kind.value for kind in LinkClass if kind != LinkClass.NVLINK)
"""Codes written as the class name itself (every class but NV#, which carries a count)."""
_KNOWN_CODES: Final = "X, NV# (e.g. NV18), PIX, PXB, PHB, NODE, SYS (or the older SOC)"
_CELL = re.compile(r"[A-Za-z]+\d*")
"""A token shaped like a code; affinity columns (``0-31,64-95``, ``0``, ``N/A``) never are."""
_GPU = re.compile(r"GPU(\d+)")
_AFFINITY_HEADERS: Final = frozenset({"CPU", "NUMA", "GPU"})
"""First words of the trailing column titles (CPU Affinity, NUMA Affinity, GPU NUMA ID)."""
_NIC_LEGEND_ENTRY = re.compile(r"\s*(NIC\d+)\s*:\s*(\S+)\s*")
_HEADER_FORM: Final = "a header row `GPU0 GPU1 ... [NIC0 ...] [CPU Affinity ...]`, then one row per GPU"


def load_topo_matrix(path: Path) -> NodeTopo:
    """Parse a file holding the output of ``nvidia-smi topo -m``."""
    text = read_text(path, "topology matrix file",
                     "save the output of `nvidia-smi topo -m` to a UTF-8 text file and pass its path")
    return parse_topo_matrix(text, str(path))


def parse_topo_matrix(text: str, source: str) -> NodeTopo:
    """The GPU-to-GPU links and NIC names of one ``nvidia-smi topo -m`` output."""
    lines = text.splitlines()
    header_index = _find_header(lines, source)
    gpus, devices = _columns(lines[header_index], header_index + 1, source)
    gpu_rows: list[tuple[int, list[str]]] = []
    seen_devices: set[str] = set()
    index = header_index + 1
    while index < len(lines):
        tokens = lines[index].split()
        if not tokens or tokens[0].rstrip(":") == "Legend":
            break
        number, label = index + 1, tokens[0]
        if label in devices and len(gpu_rows) < len(gpus):
            _not_square(gpus, gpu_rows, number, header_index, source)
        if _GPU.fullmatch(label) and len(gpu_rows) < len(gpus):
            expected = f"GPU{len(gpu_rows)}"
            if label != expected:
                raise InputError(
                    f"{source}:{number}: row `{label}` where row `{expected}` was expected; the GPU rows follow "
                    f"the header in order GPU0..GPU{len(gpus) - 1}."
                )
            gpu_rows.append((number, _cells(tokens, number, source, gpus, devices)))
        elif label in devices and label not in seen_devices:
            _cells(tokens, number, source, gpus, devices)
            seen_devices.add(label)
        else:
            raise InputError(
                f"{source}:{number}: unexpected row `{label}`; after the header come the rows "
                f"GPU0..GPU{len(gpus) - 1}, then one row per other column ({', '.join(devices) or 'none'}), "
                "each once."
            )
        index += 1
    if len(gpu_rows) < len(gpus):
        if index >= len(lines):  # the file ends inside the GPU block (a user trial: "4 GPU rows come before" line 5,
            # itself the 4th)
            raise InputError(
                f"{source}: the file ends after {len(gpu_rows)} of the {len(gpus)} GPU rows its header (line "
                f"{header_index + 1}) announces; give the whole `nvidia-smi topo -m` output")
        _not_square(gpus, gpu_rows, index + 1, header_index, source)
    links = _gpu_links(gpu_rows, gpus, source)
    legend = _nic_legend(lines, index, devices, source)
    return NodeTopo(
        num_gpus=len(gpus),
        links=links,
        nics=tuple(legend.get(device, device) for device in devices),
        source=source,
    )


def _not_square(
    gpus: list[str], gpu_rows: list[tuple[int, list[str]]], number: int, header_index: int, source: str
) -> NoReturn:
    raise InputError(
        f"{source}:{number}: the header (line {header_index + 1}) has {len(gpus)} GPU columns but "
        f"{len(gpu_rows)} GPU rows come before this line; the GPU block must be square: one row per GPU, "
        f"GPU0..GPU{len(gpus) - 1}, before any other row."
    )


def _find_header(lines: list[str], source: str) -> int:
    for index, line in enumerate(lines):
        tokens = line.split()
        if tokens and tokens[0] == "GPU0":
            if len(tokens) > 1 and tokens[1] == "X":
                raise InputError(
                    f"{source}:{index + 1}: the row `GPU0` comes before any header row; expected {_HEADER_FORM} "
                    "(paste the whole output of `nvidia-smi topo -m`)."
                )
            return index
    raise InputError(
        f"{source}: no header row starting with GPU0; expected the output of `nvidia-smi topo -m`: {_HEADER_FORM}."
    )


def _columns(header: str, number: int, source: str) -> tuple[list[str], list[str]]:
    """GPU column titles (GPU0..GPUn-1) and the other device titles, up to the affinity columns."""
    gpus: list[str] = []
    devices: list[str] = []
    for token in header.split():
        if token in _AFFINITY_HEADERS:
            break
        if _GPU.fullmatch(token):
            expected = f"GPU{len(gpus)}"
            if devices or token != expected:
                raise InputError(
                    f"{source}:{number}: header column `{token}` where "
                    f"`{expected if not devices else 'a NIC or an affinity column'}` was expected; the GPU "
                    "columns come first, in order GPU0, GPU1, ..."
                )
            gpus.append(token)
        elif token in devices:
            raise InputError(f"{source}:{number}: header column `{token}` appears twice; each device once.")
        else:
            devices.append(token)
    return gpus, devices


def _cells(tokens: list[str], number: int, source: str, gpus: list[str], devices: list[str]) -> list[str]:
    """The row's code cells, one per column; counted as the code-shaped tokens after the label."""
    columns = len(gpus) + len(devices)
    count = 0
    for token in tokens[1:]:
        if not _CELL.fullmatch(token):
            break
        count += 1
    if count != columns:
        titles = f"{gpus[0]}..{gpus[-1]}" + (f", {', '.join(devices)}" if devices else "")
        raise InputError(
            f"{source}:{number}: row `{tokens[0]}` has {count} cells but the header has {columns} columns "
            f"({titles}); each row gives one code ({_KNOWN_CODES}) per column."
        )
    return tokens[1 : 1 + columns]


def _link(code: str, row: str, column: str, number: int, source: str) -> GpuLink:
    if code in _LEGACY_CODES:
        return GpuLink(kind=_LEGACY_CODES[code])
    nvlink = re.fullmatch(r"NV([0-9]{1,4})", code)  # ASCII digits, few enough for int(): H100 has NV18
    if nvlink and int(nvlink.group(1)) >= 1:
        return GpuLink(kind=LinkClass.NVLINK, nvlinks=int(nvlink.group(1)))
    if code in _PLAIN_CODES:
        return GpuLink(kind=LinkClass(code))
    raise InputError(
        f"{source}:{number}: unknown code `{code}` in row {row}, column {column}; expected one of {_KNOWN_CODES}."
    )


def _gpu_links(gpu_rows: list[tuple[int, list[str]]], gpus: list[str], source: str) -> tuple[tuple[GpuLink, ...], ...]:
    """links[i][j] from the GPU block; checks the diagonal and the symmetry."""
    links = [
        [_link(cells[j], gpus[i], gpus[j], number, source) for j in range(len(gpus))]
        for i, (number, cells) in enumerate(gpu_rows)
    ]
    for i, (number, cells) in enumerate(gpu_rows):
        for j in range(len(gpus)):
            is_self = links[i][j].kind == LinkClass.SELF
            if i == j and not is_self:
                raise InputError(
                    f"{source}:{number}: row {gpus[i]}, column {gpus[j]} is `{cells[j]}`; a GPU's cell for "
                    "itself must be `X` (self): check the row for a missing or extra cell."
                )
            if i != j and is_self:
                raise InputError(
                    f"{source}:{number}: row {gpus[i]}, column {gpus[j]} is `X`, which only marks a GPU's "
                    "cell for itself; check the row for a missing or extra cell."
                )
            if j < i and links[i][j] != links[j][i]:
                raise InputError(
                    f"{source}:{number}: row {gpus[i]}, column {gpus[j]} is `{cells[j]}` but row {gpus[j]} "
                    f"(line {gpu_rows[j][0]}), column {gpus[i]} is `{gpu_rows[j][1][i]}`; the matrix is "
                    "symmetric (a link is the same both ways): check both rows."
                )
    return tuple(tuple(row) for row in links)


def _nic_legend(lines: list[str], start: int, devices: list[str], source: str) -> dict[str, str]:
    """``NICi -> device name`` from the ``NIC Legend:`` block after the matrix, if there is one."""
    legend: dict[str, str] = {}
    in_legend = False
    for index in range(start, len(lines)):
        line = lines[index]
        if line.strip() == "NIC Legend:":
            in_legend = True
            continue
        if not in_legend or not line.strip():
            continue
        entry = _NIC_LEGEND_ENTRY.fullmatch(line)
        if entry is None:
            break
        nic, name = entry.groups()
        if nic not in devices:
            raise InputError(
                f"{source}:{index + 1}: the NIC legend names `{nic}`, but the header has no `{nic}` column; "
                "the legend and the matrix must come from the same `nvidia-smi topo -m` output."
            )
        if nic in legend:
            raise InputError(
                f"{source}:{index + 1}: the NIC legend names `{nic}` twice (`{legend[nic]}` and `{name}`); "
                "each NIC once."
            )
        legend[nic] = name
    return legend
