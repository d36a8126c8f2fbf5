"""A saved Megatron-Bridge config that runs Megatron-FSDP and saves or loads a checkpoint needs
checkpoint.ckpt_format fsdp_dtensor, and fsdp_dtensor needs Megatron-FSDP: Megatron-Bridge asserts both at start-up
(training/config.py:1105-1108, :1528-1533), as the Megatron-LM flags' reader already refuses either pair (a QA run:
the GB200 Llama 3 70B config turned to Megatron-FSDP, with ckpt_format torch_dist and checkpoint.load set, was priced
as if it ran)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

L70 = Path(__file__).parent / "data" / "audit" / "bridge" / "llama3_70b_sft_gb200_fp8_mx_v1.yaml"


def _audit(tmp_path: Path, *replace: tuple[str, str]):
    text = L70.read_text()
    for old, new in replace:
        assert text.count(old) >= 1, old
        text = text.replace(old, new)
    path = tmp_path / "run_config.yaml"
    path.write_text(text)
    return CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), "--model", "llama3-70b",
                                     "--cluster", "gb200-nvl72", "--gpus", "32"])


FSDP = (("  use_megatron_fsdp: false", "  use_megatron_fsdp: true"),
        ("  data_parallel_sharding_strategy: no_shard", "  data_parallel_sharding_strategy: optim_grads_params"))


def test_megatron_fsdp_with_torch_dist_and_a_load_path_does_not_start(tmp_path: Path) -> None:
    assert "  load: /opt/" in L70.read_text() and "  ckpt_format: torch_dist" in L70.read_text()
    result = _audit(tmp_path, *FSDP)
    assert result.exit_code == 2, result.output
    assert "ckpt_format torch_dist" in result.output and "this job does not start" in result.output
    assert "set checkpoint.ckpt_format: fsdp_dtensor" in result.output
    assert "Traceback" not in result.output


def test_megatron_fsdp_with_fsdp_dtensor_runs(tmp_path: Path) -> None:
    result = _audit(tmp_path, *FSDP, ("  ckpt_format: torch_dist", "  ckpt_format: fsdp_dtensor"))
    assert result.exit_code in (0, 1), result.output


def test_fsdp_dtensor_without_megatron_fsdp_does_not_start(tmp_path: Path) -> None:
    result = _audit(tmp_path, ("  ckpt_format: torch_dist", "  ckpt_format: fsdp_dtensor"))
    assert result.exit_code == 2, result.output
    assert "fsdp_dtensor without Megatron-FSDP" in result.output and "this job does not start" in result.output
