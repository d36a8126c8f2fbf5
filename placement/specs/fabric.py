"""Schemas for real cluster inputs: a SLURM topology, a job's host list, a node's intra-node links.

These are what the parsers in placement/loaders/ produce; placement/fabric.py turns them into the
topology graph the cost model and the mapper query.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from placement.specs._base import Frozen


class SlurmSwitch(Frozen):
    """One `SwitchName=` line of a tree-plugin topology.conf."""

    name: str
    switches: tuple[str, ...] = ()
    """Child switches (`Switches=`, hostlist-expanded, in written order)."""
    nodes: tuple[str, ...] = ()
    """Hosts directly below (`Nodes=`, hostlist-expanded, in written order)."""
    link_speed: int | None = None
    """`LinkSpeed=` as written (a relative number; SLURM does not fix its unit)."""
    line: int = Field(ge=1)
    """Line number in the file (for error messages)."""


class SlurmTree(Frozen):
    """Tree plugin: switches form a tree; leaf switches list nodes."""

    switches: tuple[SlurmSwitch, ...]
    source: str
    choice: str | None = None
    """Which topology of a topology.yaml this is, in words (None: a topology.conf, which holds one)."""


class SlurmBlock(Frozen):
    """One `BlockName=` line of a block-plugin topology.conf (an NVL72 rack is one block)."""

    name: str
    nodes: tuple[str, ...]
    line: int = Field(ge=1)


class SlurmBlocks(Frozen):
    blocks: tuple[SlurmBlock, ...]
    block_sizes: tuple[int, ...] | None = None
    """`BlockSizes=`: the allowed allocation sizes in nodes (first = base block size)."""
    source: str
    choice: str | None = None
    """Which topology of a topology.yaml this is, in words (None: a topology.conf, which holds one)."""


class LinkClass(StrEnum):
    """nvidia-smi topo -m connection codes (reference costmodel.md §4g)."""

    SELF = "X"
    NVLINK = "NV"
    PIX = "PIX"
    PXB = "PXB"
    PHB = "PHB"
    NODE = "NODE"
    SYS = "SYS"


class GpuLink(Frozen):
    kind: LinkClass
    nvlinks: int = Field(default=0, ge=0)
    """Bonded NVLinks for NV# (NV18 on H100 HGX, NV12 on A100 HGX, NV4 on PCIe bridges)."""


class NodeTopo(Frozen):
    """One node design's GPU-to-GPU matrix from `nvidia-smi topo -m`."""

    num_gpus: int = Field(ge=1)
    links: tuple[tuple[GpuLink, ...], ...]
    """links[i][j] for GPU i, j (i == j is SELF)."""
    nics: tuple[str, ...] = ()
    """NIC names from the NIC legend, if any."""
    source: str
