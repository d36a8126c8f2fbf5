"""`nvidia-smi topo -m` -> NodeTopo: the real matrices in tests/data/nvsmi/ (sources in the README there)
and every malformed matrix a user can paste (each message pinned: source, line, expected form)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from placement.errors import InputError
from placement.loaders.nvidia_smi import load_topo_matrix, parse_topo_matrix
from placement.specs.fabric import GpuLink, LinkClass, NodeTopo

DATA = Path(__file__).parent / "data" / "nvsmi"
SELF = GpuLink(kind=LinkClass.SELF)


def uniform(num_gpus: int, link: GpuLink) -> tuple[tuple[GpuLink, ...], ...]:
    return tuple(tuple(SELF if i == j else link for j in range(num_gpus)) for i in range(num_gpus))


def test_h100_hgx() -> None:
    path = DATA / "h100-hgx.txt"
    topo = load_topo_matrix(path)
    assert topo == NodeTopo(
        num_gpus=8,
        links=uniform(8, GpuLink(kind=LinkClass.NVLINK, nvlinks=18)),
        nics=tuple(f"mlx5_{i}" for i in range(9)),
        source=str(path),
    )


def test_a100_dgx() -> None:
    topo = load_topo_matrix(DATA / "a100-dgx.txt")
    assert topo.num_gpus == 8
    assert topo.links == uniform(8, GpuLink(kind=LinkClass.NVLINK, nvlinks=12))
    assert topo.nics == tuple(f"mlx5_{i}" for i in range(12))


def test_pcie_p40_legacy_format() -> None:
    """Tab-separated, NIC column named by device, no NIC legend, CPU Affinity only, SOC in the NIC column."""
    topo = load_topo_matrix(DATA / "pcie-8xp40.txt")
    pix, pxb = GpuLink(kind=LinkClass.PIX), GpuLink(kind=LinkClass.PXB)
    expected = tuple(tuple(SELF if i == j else pix if i // 4 == j // 4 else pxb for j in range(8)) for i in range(8))
    assert topo.links == expected
    assert topo.nics == ("mlx5_0",)


def test_pcie_4090_cross_socket() -> None:
    """Every GPU pair crosses the SMP interconnect; NIC columns without a legend keep their titles."""
    topo = load_topo_matrix(DATA / "pcie-8x4090.txt")
    assert topo.links == uniform(8, GpuLink(kind=LinkClass.SYS))
    assert topo.nics == ("NIC0", "NIC1")


NV4_BRIDGED = (
    "$ nvidia-smi topo -m\n"
    "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV4\tNODE\tSYS\t0-15\t0\t\tN/A\n"
    "GPU1\tNV4\t X \tPHB\tSYS\t0-15\t0\t\tN/A\n"
    "GPU2\tNODE\tPHB\t X \tNV4\t0-15\t0\t\tN/A\n"
    "GPU3\tSYS\tSYS\tNV4\t X \t16-31\t1\t\tN/A\n"
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n"
)


def test_pcie_with_nvlink_bridges_and_leading_prompt() -> None:
    """A made-up 4-GPU PCIe box with two NVLink-bridged pairs (NV4): every code class, one matrix."""
    topo = parse_topo_matrix(NV4_BRIDGED, "node7.txt")
    nv4 = GpuLink(kind=LinkClass.NVLINK, nvlinks=4)
    node, phb, sys = (GpuLink(kind=kind) for kind in (LinkClass.NODE, LinkClass.PHB, LinkClass.SYS))
    assert topo.links == (
        (SELF, nv4, node, sys),
        (nv4, SELF, phb, sys),
        (node, phb, SELF, nv4),
        (sys, sys, nv4, SELF),
    )
    assert topo.nics == ()
    assert topo.source == "node7.txt"


def test_single_gpu() -> None:
    topo = parse_topo_matrix("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-63\t0\n", "one.txt")
    assert (topo.num_gpus, topo.links, topo.nics) == (1, ((SELF,),), ())


def test_soc_reads_as_sys() -> None:
    """Pre-NODE drivers printed SOC for the cross-socket path (legend: "the SMP link between CPU sockets")."""
    topo = parse_topo_matrix("\tGPU0\tGPU1\nGPU0\t X \tSOC\nGPU1\tSOC\t X \n", "old.txt")
    assert topo.links[0][1] == GpuLink(kind=LinkClass.SYS)


# --- malformed matrices ----------------------------------------------------------------------------

H100 = (DATA / "h100-hgx.txt").read_text()
H100_LINES = H100.splitlines(keepends=True)
P40 = (DATA / "pcie-8xp40.txt").read_text()


def replace_line(text: str, number: int, old: str, new: str) -> str:
    lines = text.splitlines(keepends=True)
    assert old in lines[number - 1]
    lines[number - 1] = lines[number - 1].replace(old, new, 1)
    return "".join(lines)


def drop_line(text: str, number: int) -> str:
    lines = text.splitlines(keepends=True)
    del lines[number - 1]
    return "".join(lines)


MALFORMED = {
    "no header": (
        "GPU topology unavailable\n",
        "topo.txt: no header row starting with GPU0; expected the output of `nvidia-smi topo -m`: a header row "
        "`GPU0 GPU1 ... [NIC0 ...] [CPU Affinity ...]`, then one row per GPU.",
    ),
    "rows without header": (
        "".join(H100_LINES[1:]),
        "topo.txt:1: the row `GPU0` comes before any header row; expected a header row",
    ),
    "header out of order": (
        "\tGPU0\tGPU2\tGPU1\nGPU0\t X \tSYS\tSYS\n",
        "topo.txt:1: header column `GPU2` where `GPU1` was expected; the GPU columns come first, in order GPU0, "
        "GPU1, ...",
    ),
    "GPU column after a NIC column": (
        "\tGPU0\tNIC0\tGPU1\nGPU0\t X \tPIX\tSYS\n",
        "topo.txt:1: header column `GPU1` where `a NIC or an affinity column` was expected",
    ),
    "missing GPU row (non-square)": (
        drop_line(H100, 9),
        "topo.txt:9: the header (line 1) has 8 GPU columns but 7 GPU rows come before this line; the GPU block "
        "must be square: one row per GPU, GPU0..GPU7, before any other row.",
    ),
    "truncated after the GPU rows (non-square)": (
        "".join(P40.splitlines(keepends=True)[:7]),
        # the file ends at line 7, the 6th GPU row: not "6 rows come before" it (a user trial)
        "topo.txt: the file ends after 6 of the 8 GPU rows its header (line 1) announces; give the whole "
        "`nvidia-smi topo -m` output",
    ),
    "GPU rows out of order": (
        "".join([H100_LINES[0], H100_LINES[1], H100_LINES[3], H100_LINES[2], *H100_LINES[4:]]),
        "topo.txt:3: row `GPU2` where row `GPU1` was expected; the GPU rows follow the header in order GPU0..GPU7.",
    ),
    "unexpected row": (
        replace_line(P40, 10, "mlx5_0", "mlx5_9"),
        "topo.txt:10: unexpected row `mlx5_9`; after the header come the rows GPU0..GPU7, then one row per other "
        "column (mlx5_0), each once.",
    ),
    "row missing a cell": (
        replace_line(H100, 5, "NV18    NV18    NV18     X", "NV18    NV18     X"),
        "topo.txt:5: row `GPU3` has 16 cells but the header has 17 columns (GPU0..GPU7, NIC0, NIC1, NIC2, NIC3, "
        "NIC4, NIC5, NIC6, NIC7, NIC8); each row gives one code (X, NV# (e.g. NV18), PIX, PXB, PHB, NODE, SYS "
        "(or the older SOC)) per column.",
    ),
    "NIC row with an extra cell": (
        replace_line(P40, 10, "\t X", "\t X\tSOC"),
        "topo.txt:10: row `mlx5_0` has 10 cells but the header has 9 columns",
    ),
    "unknown code": (
        replace_line(P40, 4, "PIX\tPIX\t X", "PIX\tNVL\t X"),
        "topo.txt:4: unknown code `NVL` in row GPU2, column GPU1; expected one of X, NV# (e.g. NV18), PIX, PXB, "
        "PHB, NODE, SYS (or the older SOC).",
    ),
    "NV0": (
        replace_line(NV4_BRIDGED, 3, "NV4", "NV0"),
        "topo.txt:3: unknown code `NV0` in row GPU0, column GPU1",
    ),
    "no X on the diagonal": (
        replace_line(P40, 4, "PIX\tPIX\t X \tPIX", "PIX\tPIX\tPIX\tPIX"),
        "topo.txt:4: row GPU2, column GPU2 is `PIX`; a GPU's cell for itself must be `X` (self): check the row "
        "for a missing or extra cell.",
    ),
    "X off the diagonal": (
        replace_line(P40, 2, "PXB\tPXB\tPXB\tSOC", "PXB\tPXB\t X\tSOC"),
        "topo.txt:2: row GPU0, column GPU7 is `X`, which only marks a GPU's cell for itself",
    ),
    "asymmetric": (
        replace_line(H100, 3, "NV18", "NV12"),
        "topo.txt:3: row GPU1, column GPU0 is `NV12` but row GPU0 (line 2), column GPU1 is `NV18`; the matrix is "
        "symmetric (a link is the same both ways): check both rows.",
    ),
    "asymmetric PCIe": (
        replace_line(P40, 6, "PXB\tPXB\tPXB\tPXB\t X", "PXB\tPIX\tPXB\tPXB\t X"),
        "topo.txt:6: row GPU4, column GPU1 is `PIX` but row GPU1 (line 3), column GPU4 is `PXB`",
    ),
    "legend names a NIC the header lacks": (
        H100 + "  NIC9: mlx5_9\n",
        "topo.txt:41: the NIC legend names `NIC9`, but the header has no `NIC9` column",
    ),
}


@pytest.mark.parametrize(("text", "message"), MALFORMED.values(), ids=list(MALFORMED))
def test_malformed_matrix_is_input_error(text: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        parse_topo_matrix(text, "topo.txt")


def test_error_from_a_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "node.txt"
    path.write_text(replace_line(H100, 3, "NV18", "NV12"))
    with pytest.raises(InputError, match=re.escape(f"{path}:3: row GPU1, column GPU0 is `NV12`")):
        load_topo_matrix(path)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.txt"
    with pytest.raises(InputError, match=re.escape(f"topology matrix file `{path}` cannot be read (")):
        load_topo_matrix(path)
