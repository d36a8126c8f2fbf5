"""The fix an infeasible plan suggests works when applied: a GPU count is named only where the search finds a layout
that fits on it, never past the GPU-count limit, never as --gpus on a real allocation (its size is the host
list's), and in a sweep as the sweep file's field."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main
from placement.sweep.run import run_sweep
from placement.sweep.spec import SweepSpec

SLURM = Path(__file__).parent / "data" / "slurm" / "tree-5leaf.conf"


def _plan(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["plan", "--top-k", "1", *args])
    return res.exit_code, res.stderr.replace("\n", " ")


def test_a_suggested_gpu_count_fits_when_applied() -> None:
    code, err = _plan("--model", "llama3-405b", "--gpus", "64")
    assert code == 1
    gpus = re.search(r"try --gpus (\d+)", err).group(1)
    assert _plan("--model", "llama3-405b", "--gpus", gpus)[0] == 0


def test_no_gpu_count_is_suggested_where_the_reserve_alone_passes_the_capacity() -> None:
    """77 GiB of headroom leaves 1.1 GiB, less than the 2 GiB every GPU keeps back on any count: the message
    suggested --gpus 256 (and on 256, --gpus 1024); only the headroom helps, and it does."""
    code, err = _plan("--model", "llama3-8b", "--gpus", "8", "--memory-headroom-gib", "77")
    assert code == 1 and "--gpus" not in err.split("; try ")[-1]
    most = re.search(r"; try --memory-headroom-gib ([\d.]+)$", err.strip()).group(1)
    assert _plan("--model", "llama3-8b", "--gpus", "8", "--memory-headroom-gib", most)[0] == 0


def test_no_gpu_count_past_the_limit_is_suggested(monkeypatch) -> None:
    monkeypatch.setattr("placement.search.MAX_GPUS", 64)
    code, err = _plan("--model", "llama3-405b", "--gpus", "32")
    assert code == 1 and "--gpus" not in err.split("; try ")[-1]
    assert "no GPU count from 32 to 32 holds a layout of it" in err


def test_a_real_allocation_is_not_told_to_change_gpus() -> None:
    code, err = _plan("--model", "llama3-405b", "--slurm-topology", str(SLURM), "--nodelist", "gpu[0001-0004]",
                      "--node-type", "dgx-h100")
    assert code == 1, err
    assert "--gpus" not in err
    assert "this allocation's 32 GPUs (its host list) hold no layout of it" in err


def test_a_sweep_names_the_design_field_not_the_flag(tmp_path: Path) -> None:
    spec = {"name": "s", "designs": [{"name": "h100x8", "cluster": "dgx-h100", "gpus": 8, "price_per_gpu_hour": 2.0}],
            "workloads": [{"name": "405b", "model": "llama3-405b", "seq_len": 8192, "global_batch": 512,
                           "tokens": 1e9}]}
    [row] = run_sweep(SweepSpec.model_validate(spec), tmp_path / "cache", "local", workers=1).rows
    assert row["status"] == "infeasible"
    assert "--gpus" not in row["message"]
    assert re.search(r"try `gpus: \d+` in the design$", row["message"]), row["message"]
