"""Layout: the parallel degrees and memory knobs of one training configuration.

Axis vocabulary (one, used everywhere): tp tensor, cp context, ep expert, etp expert-tensor, pp
pipeline, vpp virtual stages per pipeline rank, dp data.  Ranks are laid innermost-first
tp, cp, dp, pp for dense weights, and etp, ep, edp, pp for experts, as Megatron-Core's RankGenerator
does (reference/frameworks.md): experts are sharded over the tp x cp x dp ranks of a stage.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from placement.specs._base import Frozen

MAX_DEGREE = 1 << 24
"""Largest degree or micro-batch a layout may name (16,777,216, past any GPU count or batch planned): a larger
number is a typo, and the bound keeps every product the cost model forms inside numpy's int64."""


class Recompute(StrEnum):
    NONE = "none"
    SELECTIVE = "selective"
    """Korthikanti's selective recompute: the attention core is recomputed in backward."""
    FULL = "full"
    """Only each layer's input is kept; the whole forward is recomputed in backward."""


class Layout(Frozen):
    tp: int = Field(default=1, ge=1, le=MAX_DEGREE)
    cp: int = Field(default=1, ge=1, le=MAX_DEGREE)
    ep: int = Field(default=1, ge=1, le=MAX_DEGREE)
    etp: int = Field(default=1, ge=1, le=MAX_DEGREE)
    pp: int = Field(default=1, ge=1, le=MAX_DEGREE)
    vpp: int = Field(default=1, ge=1, le=MAX_DEGREE)
    """Model chunks per pipeline rank (interleaved 1F1B when > 1)."""
    dp: int = Field(default=1, ge=1, le=MAX_DEGREE)
    micro_batch_size: int = Field(default=1, ge=1, le=MAX_DEGREE)
    zero_stage: int = Field(default=1, ge=0, le=3)
    """0 plain DDP; 1 optimizer state sharded (Megatron distributed optimizer); 2 + gradients; 3 + weights (FSDP)."""
    dp_shard: int | None = Field(default=None, ge=1, le=MAX_DEGREE)
    """ZeRO-3 sharding group size; less than dp is HSDP (shard inside, replicate across). None = dp."""
    recompute: Recompute = Recompute.NONE
    sequence_parallel: bool = False

    @model_validator(mode="after")
    def _check(self) -> Layout:
        dense = self.tp * self.cp * self.dp
        if dense % (self.ep * self.etp):
            raise ValueError(
                f"ep ({self.ep}) * etp ({self.etp}) = {self.ep * self.etp} does not divide tp ({self.tp}) * "
                f"cp ({self.cp}) * dp ({self.dp}) = {dense}: experts are sharded over the tp x cp x dp ranks of "
                f"a stage; pick ep * etp from the divisors of {dense}"
            )
        if self.vpp > 1 and self.pp == 1:
            raise ValueError(f"vpp ({self.vpp}) > 1 needs pp > 1 (interleaving splits pipeline stages); set vpp 1")
        if self.sequence_parallel and self.tp == 1:
            raise ValueError("sequence_parallel needs tp > 1 (it shards along the TP group); set tp > 1 or drop it")
        shard = self.dp_shard if self.dp_shard is not None else self.dp
        if self.dp % shard:
            raise ValueError(f"dp_shard ({shard}) must divide dp ({self.dp}); HSDP replicates dp / dp_shard times")
        if shard != self.dp and self.zero_stage != 3:
            raise ValueError(
                f"dp_shard ({shard}) != dp ({self.dp}) is HSDP and needs zero_stage 3, got {self.zero_stage}"
            )
        return self

    @property
    def num_gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def edp(self) -> int:
        """Expert data-parallel degree: replicas of each expert shard within a stage."""
        return self.tp * self.cp * self.dp // (self.ep * self.etp)

    @property
    def shard_degree(self) -> int:
        return self.dp_shard if self.dp_shard is not None else self.dp
