"""Layout: the parallel degrees and memory knobs of one training configuration.

Axis vocabulary (one, used everywhere): tp tensor, cp context, ep expert, etp expert-tensor, pp
pipeline, vpp virtual stages per pipeline rank, dp data.  Ranks are laid innermost-first
tp, cp, dp, pp for dense weights, and etp, ep, edp, pp for experts, as Megatron-Core's RankGenerator
does (reference/frameworks.md): experts are sharded over the tp x cp x dp ranks of a stage.
"""

from __future__ import annotations

import math
from enum import StrEnum

from pydantic import ConfigDict, Field, model_validator

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
        sharded = self.tp * self.cp * shard
        if shard != self.dp and sharded % (self.ep * self.etp):
            raise ValueError(
                f"ep ({self.ep}) * etp ({self.etp}) = {self.ep * self.etp} does not divide tp ({self.tp}) * cp "
                f"({self.cp}) * dp_shard ({shard}) = {sharded}: HSDP shards the experts over the tp x cp x dp_shard "
                f"ranks and replicates them over dp / dp_shard (torchtitan's efsdp = dp_shard x cp x tp / ep); "
                f"pick dp_shard so that {self.ep * self.etp} divides tp x cp x dp_shard, or ep * etp from the "
                f"divisors of {sharded}"
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
    def edp_shard(self) -> int:
        """The expert data-parallel ranks one expert shard's ZeRO group spans: edp, but under HSDP only the
        tp x cp x dp_shard ranks of a replica (their ep x etp hold different experts)."""
        if self.zero_stage != 3:
            return self.edp
        return self.tp * self.cp * self.shard_degree // (self.ep * self.etp)

    @property
    def shard_degree(self) -> int:
        return self.dp_shard if self.dp_shard is not None else self.dp


class PinnedLayout(Frozen):
    """The layout fields a measured or published run states (a runs or step YAML's `layout:`); the others are
    searched.  Types are strict: `tp: "two"` or `tp: true` is an error naming the field, not a parse failure
    later, and an unknown key (`tpp: 2`) is an error rather than a field left to the search."""

    model_config = ConfigDict(strict=True)
    tp: int | None = Field(default=None, ge=1, le=MAX_DEGREE)
    cp: int | None = Field(default=None, ge=1, le=MAX_DEGREE)
    ep: int | None = Field(default=None, ge=1, le=MAX_DEGREE)
    etp: int | None = Field(default=None, ge=1, le=MAX_DEGREE)
    pp: int | None = Field(default=None, ge=1, le=MAX_DEGREE)
    vpp: int | None = Field(default=None, ge=1, le=MAX_DEGREE)
    dp: int | None = Field(default=None, ge=1, le=MAX_DEGREE)
    micro_batch_size: int | None = Field(default=None, ge=1, le=MAX_DEGREE)
    zero_stage: int | None = Field(default=None, ge=0, le=3)
    dp_shard: int | None = Field(default=None, ge=1, le=MAX_DEGREE)
    recompute: Recompute | None = Field(default=None, strict=False)
    """none, selective or full (a YAML string)."""
    sequence_parallel: bool | None = None

    def check_gpus(self, num_gpus: int) -> None:
        """The stated degrees must split `num_gpus`: tp*cp*pp divides it, and dp, when stated, completes it."""
        tp, cp, pp = self.tp or 1, self.cp or 1, self.pp or 1
        model = tp * cp * pp
        if num_gpus % model:
            rest = num_gpus // (cp * pp) if num_gpus % (cp * pp) == 0 else 0
            fix = (f"with cp {cp} and pp {pp}, tp can be {', '.join(map(str, _divisors(rest)))}"
                   if rest else f"cp * pp = {cp * pp} does not divide it either: pick cp and pp among its divisors")
            raise ValueError(
                f"layout tp ({tp}) * cp ({cp}) * pp ({pp}) = {model} does not divide num_gpus ({num_gpus}), so no "
                f"data-parallel degree completes the job; give degrees whose product divides {num_gpus} ({fix})")
        if self.dp is not None and model * self.dp != num_gpus:
            raise ValueError(
                f"layout tp ({tp}) * cp ({cp}) * pp ({pp}) * dp ({self.dp}) = {model * self.dp} != num_gpus "
                f"({num_gpus}); set dp to {num_gpus // model} or drop it (it follows from the others)")

    def fixed(self) -> dict[str, int | bool | str]:
        """The stated fields as a search's `fixed` mapping."""
        return self.model_dump(mode="json", exclude_none=True)


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})
