"""A Megatron-Bridge config with torch FSDP2 (dist.use_torch_fsdp2) beside the distributed optimizer or gradient
accumulation fusion does not train, and Bridge's validation does not say so (training/config.py checks only
use_megatron_fsdp beside it): Megatron-Core's DistributedOptimizer takes its shards from Megatron DDP's gradient
buffers, which TorchFullyShardedDataParallel has none of, so its Adam holds no parameter (and through Megatron-Core
0.17 the first step calls start_param_sync, which the FSDP2 wrapper lacks); Transformer Engine's fused wgrad
accumulation adds into weight.main_grad, which FSDP2 parameters lack.  Megatron-LM refuses both on its command line
(arguments.py:1031-1040).  A QA run: the saved GB200 Llama 3 70B config with use_torch_fsdp2 flipped on (its
use_distributed_optimizer and gradient_accumulation_fusion true) was priced as a ZeRO-3 job."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

L70 = Path(__file__).parent / "data" / "audit" / "bridge" / "llama3_70b_sft_gb200_fp8_mx_v1.yaml"
JOB = ("--model", "llama3-70b", "--cluster", "gb200-nvl72", "--gpus", "32")


def _write(tmp_path: Path, *replace: tuple[str, str]) -> Path:
    text = L70.read_text()
    for old, new in (("  use_torch_fsdp2: false", "  use_torch_fsdp2: true"), *replace):
        assert old in text, old
        text = text.replace(old, new)
    out = tmp_path / L70.name
    out.write_text(text)
    return out


def _run(path: Path):
    return CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), *JOB, "--json"])


def test_fsdp2_with_the_distributed_optimizer_is_refused(tmp_path: Path) -> None:
    result = _run(_write(tmp_path))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "use_torch_fsdp2: true" in result.output and "use_distributed_optimizer: true" in result.output
    assert "use_distributed_optimizer to false" in result.output


def test_fsdp2_with_gradient_accumulation_fusion_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, ("  use_distributed_optimizer: true", "  use_distributed_optimizer: false"))
    result = _run(path)
    assert result.exit_code == 2, result.output
    assert "gradient_accumulation_fusion: true" in result.output and "main_grad" in result.output
    assert "gradient_accumulation_fusion to false" in result.output


def test_fsdp2_without_either_is_priced_at_zero_3(tmp_path: Path) -> None:
    path = _write(tmp_path, ("  use_distributed_optimizer: true", "  use_distributed_optimizer: false"),
                  ("  gradient_accumulation_fusion: true", "  gradient_accumulation_fusion: false"))
    result = _run(path)
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["layout"]["zero_stage"] == 3
