"""Megatron-FSDP overlaps the data-parallel collectives whatever the flags say (megatron-core d98e8a64
megatron_fsdp.py:328-337: overlap_grad_reduce where it shards the gradients, overlap_param_gather where it shards the
weights).  The emitted file states them, and a plan priced without the overlap is priced again as the file runs.  A
review: a Bridge change list towards a Megatron-FSDP plan set ddp.overlap_grad_reduce false, which Megatron-FSDP
overrides."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from placement.audit.changes import launch_changes
from placement.cli import main
from tests.verify.helpers import plan_context


def _megatron_args(tmp_path, *flags: str) -> tuple[list[str], str]:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["--reproducible", "evaluate", "--model", "llama3-8b", "--gpus", "16",
                                       "--tp", "1", "--pp", "1", "--cp", "1", "--mbs", "1", "--recompute", "none",
                                       *flags, "--emit", "megatron", "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "megatron.sh").read_text()
    return re.search(r"^PLACEMENT_ARGS=\((.*)\)$", text, re.M).group(1).split(), text


@pytest.mark.parametrize(("zero", "gather"), [("2", False), ("3", True)])
def test_a_megatron_fsdp_file_states_the_overlaps_it_runs(tmp_path, zero, gather):
    args, text = _megatron_args(tmp_path, "--zero", zero)
    assert "--use-megatron-fsdp" in args and "--overlap-grad-reduce" in args
    assert ("--overlap-param-gather" in args) is gather
    assert "this file runs the data-parallel collectives overlapped" not in text  # the plan overlaps them too


def test_a_plan_without_the_overlap_is_priced_as_megatron_fsdp_runs_it(tmp_path):
    args, text = _megatron_args(tmp_path, "--zero", "3", "--no-dp-overlap")
    assert "--overlap-grad-reduce" in args and "--overlap-param-gather" in args
    planned = float(re.search(r"^# predicted: ([\d.]+) s/step", text, re.M).group(1))
    runs = re.search(r"^# this file runs the data-parallel collectives overlapped with compute \(Megatron-FSDP "
                     r"overlaps them whatever the flags say.*?\): ([\d.]+) s/step", text, re.M)
    assert runs, text[:1500]
    assert float(runs.group(1)) < planned


def test_a_change_to_megatron_fsdp_keeps_the_overlap_the_job_states():
    """A ZeRO-1 job with --overlap-grad-reduce moving to Megatron-FSDP: the change list keeps the flag (Megatron-FSDP
    runs it) instead of removing it, which Megatron-Bridge's spelling wrote as ddp.overlap_grad_reduce false."""
    zero1, _ = plan_context("llama3-8b", "dgx-h100", 16, 4096, 256, {"tp": 1, "pp": 1, "cp": 1, "zero_stage": 1})
    fsdp, _ = plan_context("llama3-8b", "dgx-h100", 16, 4096, 256, {"tp": 1, "pp": 1, "cp": 1, "zero_stage": 3})
    changes = {c["argument"]: c for c in launch_changes("megatron", zero1, fsdp)}
    assert "--use-megatron-fsdp" in changes
    assert "--overlap-grad-reduce" not in changes and "--overlap-param-gather" not in changes
