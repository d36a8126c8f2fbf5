"""The memory price keeps 2 % of HBM for the allocator's fragmentation, which assumes PyTorch's expandable segments:
every emitted launch file sets them before its per-node lines, and an audit says whether the job's files do."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
EXPORT = "export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}"


def _audit(*files: Path) -> dict:
    args = [x for f in files for x in ("--launch", str(f))]
    res = CliRunner().invoke(main, ["--reproducible", "audit", *JOB, *args, "--json"])
    assert res.exit_code in (0, 1), res.output[-2000:]
    return json.loads(res.stdout)


@pytest.mark.parametrize(("emit", "launch"), [("torchtitan", ["torchtitan.sh"]), ("megatron", ["megatron.sh"]),
                                              ("deepspeed", ["deepspeed.sh", "ds_config.json", "ds_topology.py"])])
def test_every_per_node_launch_file_sets_expandable_segments_and_its_audit_reads_them(tmp_path, emit, launch):
    """A user trial: torchtitan.sh and deepspeed.sh, run line by line as their headers say, ran without expandable
    segments (only launch.sbatch exported them) beside plans at 78.0 of 78.1 GiB, and the audit of such a file said
    the capacity assumes them `which launch.sbatch sets`."""
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["plan", *JOB, "--emit", emit, "--out", str(out)])
    assert res.exit_code == 0, res.output[-2000:]
    text = (out / launch[0]).read_text()
    first_line = next(i for i, x in enumerate(text.splitlines()) if re.match(r"(torchrun|deepspeed) ", x))
    assert EXPORT in text.splitlines()[:first_line]
    audit = _audit(*(out / name for name in launch))
    assert "allocator_segments_unset" not in {f["kind"] for f in audit["findings"]}
    bare = tmp_path / launch[0]
    bare.write_text(text.replace(EXPORT, ""))
    kinds = {f["kind"]: f for f in _audit(bare, *(out / name for name in launch[1:]))["findings"]}
    assert "PYTORCH_CUDA_ALLOC_CONF is not set" in kinds["allocator_segments_unset"]["message"]


def test_rocm_s_own_name_for_the_allocator_settings_is_read(tmp_path):
    """PyTorch's ROCm builds read PYTORCH_HIP_ALLOC_CONF where PYTORCH_CUDA_ALLOC_CONF (and PYTORCH_ALLOC_CONF) are
    unset (c10/cuda/CUDAAllocatorConfig.h, under USE_ROCM); a QA trial's launch exporting it alone was told
    "PYTORCH_CUDA_ALLOC_CONF is not set".  The finding now says which builds read it, not that nothing set them."""
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["plan", *JOB, "--emit", "torchtitan", "--out", str(out)])
    assert res.exit_code == 0, res.output[-2000:]
    hip = tmp_path / "torchtitan.sh"
    hip.write_text((out / "torchtitan.sh").read_text().replace(
        EXPORT, "export PYTORCH_HIP_ALLOC_CONF=expandable_segments:True"))
    audit = _audit(hip)
    assert "PYTORCH_HIP_ALLOC_CONF" in audit["layout"]["sources"]["allocator_conf"]
    message = {f["kind"]: f for f in audit["findings"]}["allocator_segments_unset"]["message"]
    assert "is not set" not in message
    assert "set through PYTORCH_HIP_ALLOC_CONF" in message and "only PyTorch's ROCm builds read" in message
