"""MaxText 0.2.5's default attention, 'autoselected' (base.yml:486), runs tokamax's Pallas Triton flash kernel on
GPUs (layers/attention_op.py:1679-1740): priced as FlashAttention-2, as torchtitan's FlexAttention is; a user trial
found MaxText plans priced with the FlashAttention-3/cuDNN class (+7 % at 8K, +23 % at 32K on 70B)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main
from placement.errors import InputError

JOB = ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "256", "--seq-len", "32768",
       "--global-batch", "256", "--tp", "1", "--pp", "1", "--mbs", "1", "--zero", "3", "--recompute", "full", "--json"]


def _run(*extra: str) -> dict:
    result = CliRunner().invoke(main, [*JOB, *extra])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_maxtext_prices_its_triton_flash_kernel_with_its_source() -> None:
    got = _run("--framework", "maxtext")
    assert got["recipe"]["attention_kernel"] == "flash2"
    assert "autoselected" in got["recipe_sources"]["attention_kernel"]
    fa3 = _run("--attention-kernel", "flash", "--fp32-weights", "--no-norms-fused", "--grad-reduce-fp32")
    assert got["step_time_s"] > 1.1 * fa3["step_time_s"]  # long context: the kernel is most of the step


@pytest.mark.parametrize(("value", "kernel"), [("cudnn_flash_te", "flash"), ("dot_product", "unfused"),
                                               ("flash", "flash2"), ("autoselected", "flash2")])
def test_a_maxtext_configs_attention_key_is_read(tmp_path: Path, value: str, kernel: str) -> None:
    cfg = tmp_path / "cfg.yml"
    cfg.write_text(f"base_config: base.yml\nattention: {value}\n")
    launch = parse_launch([cfg])
    assert launch.recipe["attention_kernel"] == kernel and "cfg.yml:2" in launch.sources["recipe.attention_kernel"]


def test_an_unknown_maxtext_attention_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.yml"
    cfg.write_text("base_config: base.yml\nattention: splash\n")
    with pytest.raises(InputError, match=r"attention 'splash'; MaxText 0\.2\.5 takes"):
        parse_launch([cfg])
