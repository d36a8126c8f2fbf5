"""AcceleratorSpec and ClusterSpec: what one GPU can do, and how GPUs are wired together.

Bandwidths are bytes per second **per GPU, per direction** (what ring collectives and nccl-tests
"busbw" are measured against); vendors quote NVLink bidirectional (H100 "900 GB/s" = 450 GB/s each
way, reference costmodel.md §1b).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Final

from pydantic import AfterValidator, Field, model_validator

from placement.specs._base import StrictScalars

MIN_EFFICIENCY: Final = 0.01
"""Smallest achieved fraction of a peak or line rate accepted (1%): less is a typo, and a fraction near zero
turns step times into overflows (inf), not answers."""
MAX_LATENCY_S: Final = 1.0
"""Largest per-step latency accepted: a second or more is a unit slip (microseconds written as seconds)."""
MIN_BANDWIDTH_BYTES_PER_S: Final = 1e6
"""Slowest link accepted (1 MB/s), as in a cluster graph: below it a number is a unit slip (GB/s or Gb/s written
as bytes per second: `50` for 50e9) that would price a step at years."""
MAX_BANDWIDTH_BYTES_PER_S: Final = 1e15
"""Fastest link accepted (1 PB/s, far past any HBM, NVLink or NIC)."""


def _plausible_bandwidth(value: float) -> float:
    if not MIN_BANDWIDTH_BYTES_PER_S <= value <= MAX_BANDWIDTH_BYTES_PER_S:
        raise ValueError(
            f"{value:g} B/s is outside {MIN_BANDWIDTH_BYTES_PER_S:g} to {MAX_BANDWIDTH_BYTES_PER_S:g} bytes per "
            f"second, a unit slip: bandwidths here are bytes per second per GPU and direction, so 50 GB/s (8 x 400 "
            f"Gb/s per 8 GPUs) is 50.0e9, not 50")
    return value


Bandwidth = Annotated[float, AfterValidator(_plausible_bandwidth)]
"""Bytes per second within MIN_BANDWIDTH_BYTES_PER_S..MAX_BANDWIDTH_BYTES_PER_S."""
MIN_PEAK_FLOPS: Final = 1e12
"""Slowest dense peak accepted (1 TFLOP/s; the catalog's parts run 312e12 to 2.5e15 BF16): below it a number is a unit
slip (TFLOP/s written bare: `148` for 148e12) that prices a step at years."""
MAX_PEAK_FLOPS: Final = 1e17
"""Fastest dense peak accepted (100 PFLOP/s per GPU, far past any part)."""
MIN_HBM_BYTES: Final = 1 << 30
"""Smallest HBM accepted (1 GiB): below it a number is a unit slip (GB or GiB written bare: `96` for 96 GB)."""
MAX_HBM_BYTES: Final = 10**13
"""Largest HBM accepted (10 TB per GPU)."""


def _plausible_flops(value: float) -> float:
    if not MIN_PEAK_FLOPS <= value <= MAX_PEAK_FLOPS:
        raise ValueError(f"{value:g} FLOP/s is outside {MIN_PEAK_FLOPS:g} to {MAX_PEAK_FLOPS:g}, a unit slip: peaks "
                         f"here are dense FLOP/s per GPU, so 148 TFLOP/s is 148.0e12, not 148")
    return value


def _plausible_hbm(value: int) -> int:
    if not MIN_HBM_BYTES <= value <= MAX_HBM_BYTES:
        raise ValueError(f"{value} bytes is outside {MIN_HBM_BYTES} (1 GiB) to {MAX_HBM_BYTES:g}, a unit slip: HBM "
                         f"here is bytes, so 96 GB is 96000000000 and 96 GiB 103079215104 (96 x 2^30), not 96")
    return value


PeakFlops = Annotated[float, AfterValidator(_plausible_flops)]
"""Dense FLOP/s within MIN_PEAK_FLOPS..MAX_PEAK_FLOPS."""
MAX_GEMM_HALF_EFFICIENCY_DIM: Final = 1 << 20
"""Largest `gemm_half_efficiency_dim` accepted (the catalog calibrates 190 to 512): larger drives every GEMM
efficiency towards zero and step times to overflow."""


class AcceleratorSpec(StrictScalars):
    name: str = Field(min_length=1)
    peak_flops_bf16: PeakFlops
    """Dense BF16 FLOP/s (no 2:4 sparsity)."""
    peak_flops_fp8: PeakFlops | None = None
    """Dense FP8 FLOP/s; None when the part has no FP8 tensor cores."""
    hbm_bytes: Annotated[int, AfterValidator(_plausible_hbm)]
    hbm_bandwidth_bytes_per_s: Bandwidth
    matmul_efficiency_bf16: float = Field(ge=MIN_EFFICIENCY, le=1)
    """Maximum achievable matmul FLOP/s (MAMF) over peak, BF16: the ceiling of any GEMM."""
    matmul_efficiency_fp8: float | None = Field(default=None, ge=MIN_EFFICIENCY, le=1)
    gemm_half_efficiency_dim: float = Field(gt=0, le=MAX_GEMM_HALF_EFFICIENCY_DIM)
    """A GEMM dimension of this many elements reaches half of MAMF along that dimension (tile
    quantisation and wave underfill of small sharded GEMMs; wider GPUs need bigger GEMMs)."""
    attention_core_efficiency: float | None = Field(default=None, ge=MIN_EFFICIENCY, le=1)
    """Fused attention throughput over BF16 MAMF where the part differs from the default
    (cost.constants.ATTENTION_CORE_EFFICIENCY): Blackwell Ultra doubles the SFU exp throughput that
    softmax waits on."""
    flash2_attention_efficiency: float | None = Field(default=None, ge=MIN_EFFICIENCY, le=1)
    """FlashAttention-2's attention-core throughput over BF16 MAMF where it falls short of the part's fused
    kernels (Hopper: FlashAttention-2 has no TMA/wgmma pipeline); None: as `attention_core_efficiency`."""
    mxfp8: bool = False
    """Tensor cores that dequantise 1x32 block scales themselves (MXFP8, Blackwell and later): the FP8
    default recipe there is MXFP8; elsewhere block-scaled FP8 dequantises on CUDA cores (Megatron-Core
    DeepSeek-V3 GB200 write-up §1)."""
    overlap_compute_slowdown: float | None = Field(default=None, ge=0, le=1)
    """Compute slowdown while a collective runs beside it, where measured on this part (`placement calibrate`);
    None: cost.constants.OVERLAP_COMPUTE_SLOWDOWN."""
    speed_variability: float = Field(default=0.0, ge=0, le=0.2)
    """Spread of sustained speed among GPUs of this part (standard deviation over the mean, a fraction): parts of one
    SKU run the same kernels at different clocks under power and thermal management (Sinha et al., SC22,
    arXiv:2208.11035: 8 % average variation across the GPUs of four clusters).  A synchronous step waits for its
    slowest GPU, so a job of N GPUs is priced that many standard deviations slower as the expected largest of N
    normal draws (cost.step.variability_s).  Fitted per hardware family (`placement validate`); 0 prices every GPU
    at the mean."""
    num_sms: int = Field(default=132, ge=1)
    """Streaming multiprocessors: what communication kernels that occupy SMs (DeepEP, HybridEP) take from
    compute (H100/H800 SXM 132, B200/GB200 148)."""
    source: str = ""

    @model_validator(mode="after")
    def _fp8_not_slower(self) -> AcceleratorSpec:
        if self.peak_flops_fp8 is not None and self.peak_flops_fp8 < self.peak_flops_bf16:
            raise ValueError(f"peak_flops_fp8 {self.peak_flops_fp8:g} is below peak_flops_bf16 "
                             f"{self.peak_flops_bf16:g}: FP8 tensor cores run at least the BF16 rate (twice it on "
                             f"Hopper and Blackwell); check the two values (dense, no 2:4 sparsity), or leave "
                             f"peak_flops_fp8 out for a part without FP8")
        return self


class ScaleUpKind(StrEnum):
    SWITCHED = "switched"
    """Every GPU reaches every other at full per-GPU bandwidth (NVSwitch)."""
    FULL_MESH = "full_mesh"
    """Point-to-point links to each peer (AMD xGMI): a group of g gets (g - 1) peer links."""


class ScaleUpSpec(StrictScalars):
    name: str = "nvlink"
    size: int = Field(ge=1)
    """GPUs in one scale-up (NVLink) domain: 8 for DGX, 72 for GB200 NVL72."""
    bandwidth_bytes_per_s: Bandwidth
    """Per GPU, per direction, aggregate over its links."""
    peer_bandwidth_bytes_per_s: Bandwidth | None = None
    """FULL_MESH only: bandwidth to one peer."""
    kind: ScaleUpKind = ScaleUpKind.SWITCHED
    latency_s: float = Field(gt=0, le=MAX_LATENCY_S)
    """Per-step latency of a ring step at this level."""
    collective_efficiency: float = Field(ge=MIN_EFFICIENCY, le=1)
    """Achieved over line rate for large collectives at this level."""

    @model_validator(mode="after")
    def _check(self) -> ScaleUpSpec:
        peer = self.peer_bandwidth_bytes_per_s
        if self.kind is ScaleUpKind.FULL_MESH and peer is None:
            raise ValueError(
                "scale_up.kind is full_mesh but scale_up.peer_bandwidth_bytes_per_s is not set; "
                "give the bandwidth of one peer link (MI300X: 64e9)"
            )
        if self.kind is ScaleUpKind.SWITCHED and peer is not None:  # priced nowhere: a switch reaches every peer
            raise ValueError(
                f"scale_up.peer_bandwidth_bytes_per_s {peer:g} is set but scale_up.kind is switched, where every GPU "
                f"reaches each peer at its whole bandwidth_bytes_per_s; drop it, or set kind: full_mesh for "
                f"point-to-point links")
        if self.kind is ScaleUpKind.FULL_MESH and self.size > 1 and self.bandwidth_bytes_per_s > (self.size - 1) * peer:
            # a group of g GPUs gets min(aggregate, (g - 1) x peer) (cost.collectives): more aggregate than the links
            # carry would be printed and never priced
            raise ValueError(
                f"scale_up.bandwidth_bytes_per_s {self.bandwidth_bytes_per_s:g} is more than its {self.size - 1} peer "
                f"links carry ({self.size - 1} x peer_bandwidth_bytes_per_s {peer:g} = {(self.size - 1) * peer:g}); "
                f"give the aggregate over the links (MI300X: 7 x 64e9 = 448e9) or the per-link rate")
        return self


class SwitchTier(StrictScalars):
    name: str = Field(min_length=1)
    """leaf, spine, core ..."""
    fanout: int | None = Field(default=None, ge=1)
    """Units of the level below under one switch group of this tier (the first tier counts scale-up
    domains, e.g. 32 DGX nodes per leaf); None = the rest of the cluster (top tier)."""
    oversubscription: float = Field(default=1.0, ge=1.0)
    """Down:up bandwidth ratio of this tier's uplinks: traffic leaving one of its groups gets 1/ratio."""
    latency_s: float = Field(gt=0, le=MAX_LATENCY_S)


class ClusterSpec(StrictScalars):
    name: str = Field(min_length=1)
    accelerator: str = Field(min_length=1)
    """Name in hardware/accelerators/, or the path of an accelerator YAML of the user's (relative to the cluster
    file; catalog.load_cluster makes it absolute)."""
    gpus_per_node: int = Field(ge=1)
    """GPUs per host (launcher node): 8 for DGX, 4 for a GB200 compute tray."""
    scale_up: ScaleUpSpec
    nic_bandwidth_bytes_per_s: Bandwidth
    """Scale-out bandwidth per GPU, per direction (8 x 400 Gb/s per 8 GPUs = 50e9)."""
    nic_collective_efficiency: float = Field(ge=MIN_EFFICIENCY, le=1)
    """Achieved over NIC line rate for large collectives."""
    tiers: tuple[SwitchTier, ...] = Field(min_length=1)
    """Switch tiers above the scale-up domain, bottom up; the last may have fanout None."""
    default_num_gpus: int = Field(ge=1)
    segment_nodes: int | None = Field(default=None, ge=1)
    """Largest default SLURM segment of a job (`sbatch --segment N`, topology/block): the job's nodes come
    in contiguous runs of N nodes, each run inside one scale-up domain.  A job takes the largest divisor of
    its node count up to this (Megatron-Bridge's launcher rule: 64 GB200 trays -> 16, i.e. 64 GPUs per
    rack).  Only for clusters whose scale-up domain spans several nodes.  A job's own segment
    (`Topology(segment_nodes=...)`, `--segment`) overrides it."""
    hierarchical_serial_share: float = Field(default=1.0, ge=0.0, le=1.0)
    """How far the levels of a hierarchical reduce-scatter / all-gather run one after another: 1 sums their
    times (the default, cost.collectives), 0 overlaps them fully (the slowest level sets the time, as NCCL's
    pipelined rings can on rail-optimised nodes); `placement calibrate` fits it from multi-node nccl-tests."""
    host_s_per_kernel: float | None = Field(default=None, gt=0, le=MAX_LATENCY_S)
    """Host time per kernel issued by an eager training step on this node's CPUs (Python, op dispatch,
    launch); None: the cost model's default for x86 hosts (cost.constants.HOST_S_PER_KERNEL)."""
    source: str = ""

    @model_validator(mode="after")
    def _check(self) -> ClusterSpec:
        if self.scale_up.size % self.gpus_per_node and self.gpus_per_node % self.scale_up.size:
            raise ValueError(
                f"scale_up.size ({self.scale_up.size}) and gpus_per_node ({self.gpus_per_node}) must divide "
                f"one another: a host sits inside one scale-up domain or a domain inside one host"
            )
        if self.segment_nodes is not None:
            nodes_per_domain = self.scale_up.size // self.gpus_per_node
            if nodes_per_domain <= 1:
                raise ValueError(
                    f"segment_nodes ({self.segment_nodes}) is set but one scale-up domain ({self.scale_up.size} "
                    f"GPUs) is no more than one node ({self.gpus_per_node} GPUs), so every node is already a "
                    f"segment of its own; remove segment_nodes"
                )
            if self.segment_nodes > nodes_per_domain:
                raise ValueError(
                    f"segment_nodes ({self.segment_nodes}) x gpus_per_node ({self.gpus_per_node}) = "
                    f"{self.segment_nodes * self.gpus_per_node} GPUs is more than one scale-up domain holds "
                    f"(scale_up.size {self.scale_up.size} = {nodes_per_domain} nodes); a segment lies inside "
                    f"one domain: use at most {nodes_per_domain}"
                )
        for tier in self.tiers[:-1]:
            if tier.fanout is None:
                raise ValueError(
                    f"tier {tier.name!r} has fanout None but is not the top tier; only the last tier may "
                    f"span the rest of the cluster"
                )
        return self
