"""LayoutBatch: K candidate layouts as parallel numpy arrays (the search's unit of work)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from placement.specs import Layout, Recompute

RECOMPUTE_CODES = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)


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

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    @classmethod
    def from_layouts(cls, layouts: list[Layout]) -> LayoutBatch:
        def col(f):
            return np.array([f(lay) for lay in layouts], dtype=np.int64)

        return cls(
            tp=col(lambda x: x.tp), cp=col(lambda x: x.cp), ep=col(lambda x: x.ep), etp=col(lambda x: x.etp),
            pp=col(lambda x: x.pp), vpp=col(lambda x: x.vpp), dp=col(lambda x: x.dp),
            mbs=col(lambda x: x.micro_batch_size), zero=col(lambda x: x.zero_stage),
            dp_shard=col(lambda x: x.shard_degree), recompute=col(lambda x: RECOMPUTE_CODES.index(x.recompute)),
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

    def take(self, index: np.ndarray) -> LayoutBatch:
        return LayoutBatch(**{f.name: getattr(self, f.name)[index] for f in fields(self)})
