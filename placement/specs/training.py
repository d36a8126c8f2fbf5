"""TrainingSpec: what the job trains on (sequence, batch, precision), independent of the layout."""

from enum import StrEnum
from typing import Final, Literal

from pydantic import Field

from placement.specs._base import Frozen


class Precision(StrEnum):
    BF16 = "bf16"
    FP8 = "fp8"


class AttentionKernel(StrEnum):
    FLASH = "flash"
    """Fused attention (FlashAttention, cuDNN): no s x s score tensor is written or kept."""
    FLASH2 = "flash2"
    """FlashAttention-2 specifically (flash-attn 2.x, PyTorch SDPA's flash backend, xFormers): fused like
    `flash`, but on Hopper it lacks the asynchronous TMA/wgmma pipeline of FlashAttention-3 and cuDNN and
    reaches about 35 % of H100 peak (FlashAttention-3, arXiv:2407.08608, abstract); priced with the
    accelerator's `flash2_attention_efficiency`."""
    UNFUSED = "unfused"
    """Scores materialised in HBM (Megatron-LM's FusedScaleMaskSoftmax, 2019-2022 stacks): the softmax
    and its dropout stream s x s elements per head, and keep 5 a s^2 b bytes (Korthikanti Table 2)."""


MAX_SEQ_LEN: Final = 1 << 24
"""Longest sequence planned (16,777,216 tokens, far past any published training run): larger is a typo, and
the bound keeps every count the search forms from it inside numpy's int64."""
MAX_GLOBAL_BATCH: Final = 1 << 24
"""Largest global batch planned, in sequences (16,777,216; DeepSeek-V3 trained with 15,360), for the same reasons."""


class TrainingSpec(Frozen):
    seq_len: int = Field(ge=1, le=MAX_SEQ_LEN)
    """Tokens per sequence."""
    global_batch: int = Field(ge=1, le=MAX_GLOBAL_BATCH)
    """Sequences per optimizer step."""
    precision: Precision = Precision.BF16
    """GEMM precision; weights, gradients and activations stay 16-bit, master weights and Adam state fp32."""
    optimizer: Literal["adam"] = "adam"
    memory_headroom_bytes: float = Field(default=0.0, ge=0.0, le=1 << 50)
    """HBM per GPU the plan keeps free on top of the modelled reserve (`--memory-headroom-gib`): a layout fits when
    its peak is at most the GPU's capacity less this."""
    memory_pool_bytes: float | None = Field(default=None, ge=0.0, le=1 << 50)
    """A framework's own memory pool per GPU where the job's launch caps it below the HBM (JAX's BFC allocator:
    XLA_CLIENT_MEM_FRACTION x HBM, audit.core.jax_memory_pool): a layout fits when its peak less the reserve (the
    CUDA context and NCCL's buffers, which live outside the pool) is at most this, besides the capacity above.
    None: no such cap."""
    memory_pool_note: str | None = None
    """Where `memory_pool_bytes` comes from, as the capacity line says it ("XLA_PYTHON_CLIENT_MEM_FRACTION=0.65
    (train.sh:2: export ...)")."""

    @property
    def tokens_per_step(self) -> int:
        return self.seq_len * self.global_batch
