"""Megatron-Bridge's PipelineOverlapCfg defaults fp8_buf to `(False,)` (training/comm_overlap.py:52), a one-element
tuple that Python, and so Transformer Engine's initialize_ub (`user_ub_cfg[name].get("fp8_buf", False) and name in
methods["pipeline"]`, module/base.py:564-566), takes as true: under per-tensor FP8 the pipelined reduce-scatters of
proj_fprop and fc2_fprop get FP8 buffers, their GEMMs write FP8 and the reduce-scatters move it.  A saved config writes
the default as the list [false], true all the same.  placement prices TP reduce-scatters at 16 bits and has no field
for it, so the audit says it under "seen but not modelled"; a plain `fp8_buf: false`, or MXFP8, says nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main
from tests.file_edits import replaced

L70 = Path(__file__).parent / "data" / "audit" / "bridge" / "llama3_70b_sft_gb200_fp8_mx_v1.yaml"
JOB = ("--model", "llama3-70b", "--cluster", "gb200-nvl72", "--gpus", "32")


def _entry(name: str, buf: str | None, target: str = "PipelineOverlapCfg", method: str = "pipeline") -> str:
    lines = [f"    {name}:", f"      _target_: megatron.bridge.training.comm_overlap.{target}", "      cga_size: 2",
             f"      method: {method}", "      num_sm: 16", "      set_sm_margin: true"]
    if buf is not None:
        lines.append(f"      fp8_buf: {buf}")
    return "\n".join(lines) + "\n"


def _config(tmp_path: Path, entries: str, fp8_recipe: str = "tensorwise") -> Path:
    text = L70.read_text()
    cfg = ("  tp_comm_overlap: true\n  tp_comm_overlap_cfg:\n    _target_: "
           "megatron.bridge.training.comm_overlap.TransformerLayerTPOverlapCfg\n" + entries + "  wgrad_deferral_limit")
    text = replaced(text, (("  tp_comm_overlap: false\n  tp_comm_overlap_cfg: null\n  wgrad_deferral_limit", cfg),
                           ("  fp8_recipe: mxfp8", f"  fp8_recipe: {fp8_recipe}"),
                           ("  sequence_parallel: false", "  sequence_parallel: true"),
                           ("  tensor_model_parallel_size: 1", "  tensor_model_parallel_size: 4")), unique=True)
    out = tmp_path / "run_config.yaml"
    out.write_text(text)
    return out


def _unmodelled(path: Path) -> list[str]:
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), *JOB, "--json"])
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    assert out["estimate"]["recipe"]["tp_comm_overlap"] is True
    return [line for line in out["layout"]["ignored"] if "fp8_buf" in line]


def test_the_saved_tuple_default_is_read_as_true(tmp_path: Path) -> None:
    path = _config(tmp_path, _entry("proj_fprop", "\n      - false") + _entry("fc2_fprop", "\n      - false")
                   + _entry("qkv_fprop", "false", "RingExchangeOverlapCfg", "ring_exchange"))
    (line,) = _unmodelled(path)
    assert "proj_fprop fp8_buf [false], fc2_fprop fp8_buf [false]" in line
    assert "qkv_fprop" not in line and "16-bit reduce-scatters" in line


def test_a_pipeline_entry_without_fp8_buf_takes_the_dataclass_default(tmp_path: Path) -> None:
    (line,) = _unmodelled(_config(tmp_path, _entry("fc2_fprop", None)))
    assert "fc2_fprop fp8_buf [false] (PipelineOverlapCfg's default (False,))" in line


@pytest.mark.parametrize(("buf", "fp8_recipe"), [("false", "tensorwise"), ("\n      - false", "mxfp8")])
def test_a_plain_false_or_a_block_scaled_recipe_says_nothing(tmp_path: Path, buf: str, fp8_recipe: str) -> None:
    path = _config(tmp_path, _entry("proj_fprop", buf) + _entry("fc2_fprop", buf), fp8_recipe)
    assert _unmodelled(path) == []
