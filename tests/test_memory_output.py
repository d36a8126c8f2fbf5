"""The memory table says what it prices (a user trial of the memory model against published peaks): the logits, the
fixed reserve and the buffers apart, the gradients' width, what the capacity assumes, and launch.sbatch running with
the allocator setting that assumption needs; evaluate's infeasible exit offers only the fixes a layout still has."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.cost.constants import MEMORY_RESERVE_BYTES, GiB

DATA = Path(__file__).parent / "data"
JOB = ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--seq-len", "8192",
       "--global-batch", "16", "--tp", "1", "--pp", "1", "--mbs", "1", "--recompute", "full"]


def _json(*extra: str) -> dict:
    result = CliRunner().invoke(main, [*JOB, *extra, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(("extra", "width"), [(["--zero", "1", "--grad-reduce-fp32"], "fp32"),
                                              (["--zero", "1", "--no-grad-reduce-fp32"], "bf16"),
                                              (["--zero", "3", "--grad-reduce-fp32"], "bf16")])
def test_the_lump_is_split_and_the_gradient_width_named(extra, width):
    """other_bytes was one row, "buffers, logits, reserve": the trial could not tell 23.5 GiB of logits from the
    buffers, nor whether the gradients were priced in fp32 (4 bytes) or bf16 (2)."""
    d = _json(*extra)
    m = d["memory"]
    assert m["logits_bytes"] + m["reserve_bytes"] + m["buffers_bytes"] == pytest.approx(m["other_bytes"], rel=1e-6)
    assert m["reserve_bytes"] == pytest.approx(MEMORY_RESERVE_BYTES, rel=1e-7)
    # the logits: 8,192 tokens x the vocabulary x 6 bytes (bf16 and its fp32 copy) on the one rank
    vocab = 128256
    assert m["logits_bytes"] == pytest.approx(8192 * vocab * 6, rel=0.01)
    assert m["gradient_dtype"] == width
    per_param = m["grads_bytes"] / (m["weights_bytes"] / 2)  # bf16 weights: 2 bytes a parameter
    if "--zero" in extra and extra[1] == "1":
        assert per_param == pytest.approx(4.0 if width == "fp32" else 2.0, rel=1e-6)
    text = CliRunner().invoke(main, [*JOB, *extra]).output
    assert f"gradients ({width})" in text
    assert "logits held for the loss" in text and "buffers, logits, reserve" not in text
    assert "expandable_segments:True" in text  # what the capacity's 2 % assumes


def test_the_capacity_note_states_the_hbm_and_the_fragmentation():
    text = CliRunner().invoke(main, JOB).output
    line = next(x for x in text.splitlines() if x.startswith("capacity:"))
    hbm = float(line.split()[1])
    assert hbm == pytest.approx(85520809984 / GiB, abs=0.05)  # h100-sxm's hbm_bytes


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_launch_sbatch_runs_with_expandable_segments_unless_the_user_set_it(tmp_path):
    out = tmp_path / "plan"
    result = CliRunner().invoke(main, [
        "plan", "--model", "llama3-8b", "--seq-len", "4096", "--global-batch", "64", "--top-k", "1",
        "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"), "--nodelist", "gpu[0036-0039]",
        "--node-type", "dgx-h100", "--out", str(out), "--emit", "megatron"])
    assert result.exit_code == 0, result.output
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {"srun": '#!/bin/bash\nwhile [[ "$1" == --* ]]; do shift; done\n'
                                'for h in $STUB_HOSTS; do SLURMD_NODENAME="$h" "$@" || exit $?; done\n',
                       "torchrun": '#!/bin/bash\necho "$SLURMD_NODENAME $PYTORCH_CUDA_ALLOC_CONF" >> "$STUB_LOG"\n'
                       }.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod((bin_dir / name).stat().st_mode | stat.S_IEXEC)
    hosts = [line.split()[1] for line in (out / "hosts.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    for preset, expected in ((None, "expandable_segments:True"), ("garbage_collection_threshold:0.8",
                                                                  "garbage_collection_threshold:0.8")):
        log = tmp_path / f"{expected}.log"
        env = {k: v for k, v in os.environ.items() if k != "PYTORCH_CUDA_ALLOC_CONF"}
        env |= {"PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_LOG": str(log), "STUB_HOSTS": " ".join(hosts),
                "SLURM_SUBMIT_DIR": str(out)} | ({"PYTORCH_CUDA_ALLOC_CONF": preset} if preset else {})
        proc = subprocess.run(["bash", str(out / "launch.sbatch"), "megatron"], env=env, capture_output=True,
                              text=True, check=False, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert {line.split()[1] for line in log.read_text().splitlines()} == {expected}


@pytest.mark.parametrize(("extra", "offered", "not_offered"), [
    (["--gpus", "64", "--global-batch", "64", "--tp", "8", "--pp", "8", "--zero", "3", "--recompute", "full"],
     ["more --tp/--pp"], ["--recompute (", "smaller --mbs", "higher --zero"]),
    (["--gpus", "64", "--global-batch", "64", "--tp", "8", "--pp", "4", "--zero", "1", "--recompute", "selective"],
     ["a heavier --recompute (activations", "a higher --zero (now 1", "more --tp/--pp"], ["smaller --mbs"]),
])
def test_evaluate_offers_only_the_fixes_the_layout_has_left(extra, offered, not_offered):
    """At full recompute, ZeRO-3, micro-batch 1 and dp 1 evaluate still said "try a heavier --recompute or --zero, a
    smaller --mbs" (a user trial)."""
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-405b", "--cluster", "dgx-h100", "--seq-len",
                                       "8192", "--mbs", "1", *extra])
    assert result.exit_code != 0
    message = result.output
    assert "infeasible (memory)" in message
    for fix in offered:
        assert fix in message
    for fix in not_offered:
        assert fix not in message


def test_the_zero_advice_gives_what_zero3_prices_where_experts_shard_over_fewer_ranks():
    """A user trial: Mixtral at ep 8 on 16 GPUs was told its state was "shardable over 16 ranks"; its experts, most of
    it, shard over their 2 expert-data-parallel ranks.  The advice now gives the layout's own ZeRO-3 price."""
    job = ["evaluate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "4096",
           "--global-batch", "256", "--tp", "1", "--pp", "1", "--ep", "8", "--mbs", "1", "--recompute", "none"]
    result = CliRunner().invoke(main, [*job, "--zero", "1"])
    assert result.exit_code != 0
    advised = re.search(r"at --zero 3 the layout needs ([\d.]+) GiB", result.output)
    assert advised is not None, result.output
    zero3 = CliRunner().invoke(main, [*job, "--zero", "3", "--json"])
    priced = json.loads(zero3.stdout)["peak_memory_bytes"] / 2**30
    assert float(advised.group(1)) == pytest.approx(priced, abs=0.051)
    assert (", still over capacity" in result.output) == (priced > json.loads(zero3.stdout)["memory_capacity_bytes"]
                                                            / 2**30)
    assert "shardable over 16 ranks" not in result.output
