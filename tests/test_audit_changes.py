"""The argument diff of `placement audit` lists the environment a change needs, not only the flags."""

from __future__ import annotations

from placement.audit.changes import launch_changes
from tests.verify.helpers import plan_context


def test_a_switch_to_megatron_fsdp_drops_cuda_device_max_connections() -> None:
    """Megatron needs CUDA_DEVICE_MAX_CONNECTIONS=1 with TP > 1 and Megatron-FSDP refuses it (validate_args):
    a diff from a TP-2 ZeRO-1 job to TP-2 FSDP says to unset it; the reverse says to set it."""
    zero1, _ = plan_context("llama3-8b", "dgx-h100", 16, 4096, 256, {"tp": 2, "pp": 1, "cp": 1, "zero_stage": 1})
    fsdp, _ = plan_context("llama3-8b", "dgx-h100", 16, 4096, 256, {"tp": 2, "pp": 1, "cp": 1, "zero_stage": 3})
    env = [c for c in launch_changes("megatron", zero1, fsdp) if c["argument"] == "env CUDA_DEVICE_MAX_CONNECTIONS"]
    assert env == [{"argument": "env CUDA_DEVICE_MAX_CONNECTIONS", "from": "1", "to": None}]
    back = [c for c in launch_changes("megatron", fsdp, zero1) if c["argument"] == "env CUDA_DEVICE_MAX_CONNECTIONS"]
    assert back == [{"argument": "env CUDA_DEVICE_MAX_CONNECTIONS", "from": None, "to": "1"}]
