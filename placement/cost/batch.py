"""LayoutBatch: K candidate layouts as parallel numpy arrays (the search's unit of work)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from placement.cost.pipeline import POLICY_EXPLICIT, split_policy
from placement.specs import Layout, Recompute
from placement.specs.recipe import Recipe, RecomputeModule

RECOMPUTE_CODES = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)
RECOMPUTE_MODULES = tuple(RecomputeModule)
"""Bit order of LayoutBatch.rc_modules."""
CORE_ATTN_BIT = 1 << RECOMPUTE_MODULES.index(RecomputeModule.CORE_ATTN)


def module_mask(modules) -> int:
    return sum(1 << RECOMPUTE_MODULES.index(RecomputeModule(m)) for m in set(modules))


def mask_modules(mask: int) -> tuple[RecomputeModule, ...]:
    return tuple(m for i, m in enumerate(RECOMPUTE_MODULES) if int(mask) >> i & 1)


def pipe_policy_of(recipe: Recipe) -> int:
    """The recipe's pipeline split as a `stage_kinds` policy code (its accounting flags kept apart)."""
    if recipe.pipeline_layout is not None:
        return POLICY_EXPLICIT
    return split_policy(recipe.account_for_embedding, recipe.account_for_loss)


@dataclass(frozen=True)
class LayoutBatch:
    tp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    pp: np.ndarray
    vpp: np.ndarray
    dp: np.ndarray
    mbs: np.ndarray
    zero: np.ndarray
    dp_shard: np.ndarray
    recompute: np.ndarray
    """0 none, 1 selective, 2 full (index into RECOMPUTE_CODES)."""
    sp: np.ndarray
    """1 when sequence parallelism is on."""
    rc_modules: np.ndarray | None = None
    """Bitmask of the recomputed modules under selective recompute (bit i = RECOMPUTE_MODULES[i]);
    None: core_attn alone (Korthikanti's selective), the `selective` of earlier versions."""
    pipe_policy: np.ndarray | None = None
    """Pipeline split: 0 the framework's default, 1 embedding and loss counted as a layer each,
    2 + i the explicit layout i of the recipe (placement.cost.pipeline)."""

    def __post_init__(self) -> None:
        n = self.tp.shape[0]
        if self.rc_modules is None:
            mask = np.where(self.recompute == 1, CORE_ATTN_BIT, 0).astype(np.int64)
            object.__setattr__(self, "rc_modules", mask)
        if self.pipe_policy is None:
            object.__setattr__(self, "pipe_policy", np.zeros(n, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    @classmethod
    def from_layouts(cls, layouts: list[Layout], recipe: Recipe | None = None) -> LayoutBatch:
        """The layouts under one recipe: its recompute modules (a layout with recompute `none` and modules
        named runs selective recompute of those modules) and its pipeline split."""
        def col(f):
            return np.array([f(lay) for lay in layouts], dtype=np.int64)

        recipe = recipe or Recipe()
        named = module_mask(recipe.recompute_modules)

        def rc_code(lay: Layout) -> int:
            if named and lay.recompute is Recompute.NONE:
                return 1
            return RECOMPUTE_CODES.index(lay.recompute)

        def rc_mask(lay: Layout) -> int:
            if rc_code(lay) != 1:
                return 0
            return named or CORE_ATTN_BIT

        return cls(
            rc_modules=col(rc_mask), pipe_policy=col(lambda x: pipe_policy_of(recipe)),
            tp=col(lambda x: x.tp), cp=col(lambda x: x.cp), ep=col(lambda x: x.ep), etp=col(lambda x: x.etp),
            pp=col(lambda x: x.pp), vpp=col(lambda x: x.vpp), dp=col(lambda x: x.dp),
            mbs=col(lambda x: x.micro_batch_size), zero=col(lambda x: x.zero_stage),
            dp_shard=col(lambda x: x.shard_degree), recompute=col(rc_code),
            sp=col(lambda x: int(x.sequence_parallel)),
        )

    def layout(self, i: int) -> Layout:
        return Layout(
            tp=int(self.tp[i]), cp=int(self.cp[i]), ep=int(self.ep[i]), etp=int(self.etp[i]), pp=int(self.pp[i]),
            vpp=int(self.vpp[i]), dp=int(self.dp[i]), micro_batch_size=int(self.mbs[i]),
            zero_stage=int(self.zero[i]),
            dp_shard=None if int(self.dp_shard[i]) == int(self.dp[i]) else int(self.dp_shard[i]),
            recompute=RECOMPUTE_CODES[int(self.recompute[i])], sequence_parallel=bool(self.sp[i]),
        )

    def modules(self, i: int) -> tuple[RecomputeModule, ...]:
        """Recomputed modules of candidate i (empty unless selective)."""
        return mask_modules(int(self.rc_modules[i])) if int(self.recompute[i]) == 1 else ()

    def take(self, index: np.ndarray) -> LayoutBatch:
        return LayoutBatch(**{f.name: getattr(self, f.name)[index] for f in fields(self)})


def concat_batches(first: LayoutBatch, second: LayoutBatch) -> LayoutBatch:
    return LayoutBatch(**{f.name: np.concatenate([getattr(first, f.name), getattr(second, f.name)])
                          for f in fields(LayoutBatch)})
