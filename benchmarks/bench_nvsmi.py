"""Time the split of large nodes into rings (`placement.intranode.node_layout`) on nvidia-smi-shaped matrices of
12, 16 and 32 GPUs, each in a fresh cache (python benchmarks/bench_nvsmi.py; one JSON line per matrix)."""

from __future__ import annotations

import json
import time

import networkx  # noqa: F401  (imported once, as the CLI has it, so the first case does not pay for it)

from placement.intranode import _node_layout, node_layout
from placement.specs.fabric import GpuLink, LinkClass, NodeTopo

SELF = GpuLink(kind=LinkClass.SELF)
NV18, NV4 = GpuLink(kind=LinkClass.NVLINK, nvlinks=18), GpuLink(kind=LinkClass.NVLINK, nvlinks=4)
PIX, PXB, SYS = GpuLink(kind=LinkClass.PIX), GpuLink(kind=LinkClass.PXB), GpuLink(kind=LinkClass.SYS)


def _pcie(i: int, j: int) -> GpuLink:
    """A PCIe switch per 4 GPUs, a socket per 8."""
    return PIX if i // 4 == j // 4 else PXB if i // 8 == j // 8 else SYS


CASES = {
    "16 GPUs, one NVSwitch (NV18)": (16, lambda i, j: NV18),
    "32 GPUs, one NVSwitch (NV18)": (32, lambda i, j: NV18),
    "16 GPUs, PCIe: PIX x4, PXB x8, SYS": (16, lambda i, j: _pcie(i, j)),
    "32 GPUs, PCIe: PIX x4, PXB x8, SYS": (32, lambda i, j: _pcie(i, j)),
    "12 GPUs, NVLink pairs (NV4), SYS": (12, lambda i, j: NV4 if i // 2 == j // 2 else SYS),
    "16 GPUs, NVLink ring (NV4 to neighbours), SYS": (16, lambda i, j: NV4 if abs(i - j) in (1, 15) else SYS),
    "32 GPUs, NVLink ring (NV4 to neighbours), SYS": (32, lambda i, j: NV4 if abs(i - j) in (1, 31) else SYS),
}


def main() -> None:
    for name, (n, link) in CASES.items():
        topo = NodeTopo(num_gpus=n, links=tuple(tuple(SELF if i == j else link(i, j) for j in range(n))
                                                for i in range(n)), nics=(), source=name)
        _node_layout.cache_clear()
        t0 = time.perf_counter()
        layout = node_layout(topo)
        wall = time.perf_counter() - t0
        print(json.dumps({"case": name, "seconds": round(wall, 4),
                          "group_gbps": {k: v / 1e9 for k, v in layout.group_bandwidth.items() if k > 1}}))


if __name__ == "__main__":
    main()
