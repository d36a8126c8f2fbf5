"""The fix an infeasible plan suggests works when applied: a GPU count is named only where the search finds a layout
that fits on it, never past the GPU-count limit, never as --gpus on a real allocation (its size is the host
list's), and in a sweep as the sweep file's field."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from placement.catalog import load_accelerator, load_cluster, load_model
from placement.cli import main
from placement.errors import PlacementInfeasible
from placement.search import SearchConfig, _fits_on, search
from placement.specs import Recompute, TrainingSpec
from placement.sweep.run import run_sweep
from placement.sweep.spec import SweepSpec
from placement.topology import Topology

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


def test_an_accelerator_whose_reserve_passes_its_capacity_is_told_to_take_more_memory(tmp_path: Path) -> None:
    """A user's 2 GiB part (the accelerator schema's floor is 1 GiB): its capacity after fragmentation, 1.96 GiB, is
    below the 2 GiB reserve every GPU keeps, so no model fits on any count; the message told the user to try "a
    smaller model, sequence or micro-batch", which fits no better."""
    import yaml

    part = yaml.safe_load((Path(__file__).parents[1] / "hardware" / "accelerators" / "h100-sxm.yaml").read_text())
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(part | {"name": "tiny", "hbm_bytes": 2 * 1024**3}))
    cluster = yaml.safe_load((Path(__file__).parents[1] / "hardware" / "clusters" / "dgx-h100.yaml").read_text())
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cluster | {"name": "tinyc", "accelerator": "tiny.yaml"}))
    code, err = _plan("--model", "llama3-8b", "--cluster", str(tmp_path / "c.yaml"), "--gpus", "64")
    assert code == 1, err
    fix = err.split("; try ")[-1]
    assert "smaller model" not in fix and "--gpus" not in fix
    assert fix.startswith("an accelerator with more memory: a GPU's reserve (2.00 GiB") and "1.96 GiB capacity" in fix


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


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.stderr.replace("\n", " ")


def test_layout_errors_name_a_fix_that_works() -> None:
    """tp x cp x pp that does not divide the GPUs, a sequence ring attention cannot cut, a global batch dp does
    not divide: each message names a value, and the command with it runs."""
    job = ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--mbs", "1"]
    cases = [(["--seq-len", "8192", "--global-batch", "128", "--tp", "3"], r"try --tp (\d+)", "--tp"),
             (["--seq-len", "8190", "--global-batch", "128", "--cp", "8"], r"try --seq-len (\d+)", "--seq-len"),
             (["--seq-len", "8192", "--global-batch", "100"], r"try --global-batch \d+ or (\d+)", "--global-batch")]
    for given, pattern, flag in cases:
        code, err = _run(*job, *given)
        assert code == 2, err
        value = re.search(pattern, err).group(1)
        fixed = [*given[:given.index(flag) + 1], value, *given[given.index(flag) + 2:]] if flag in given else given
        assert _run(*job, *fixed)[0] in (0, 1), (fixed, _run(*job, *fixed)[1])


def test_a_plan_index_past_the_top_k_says_to_raise_it(tmp_path) -> None:
    code, err = _run("plan", "--model", "llama3-8b", "--gpus", "64", "--top-k", "2", "--plan-index", "3",
                     "--out", str(tmp_path / "o"))
    assert code == 2 and "raise --top-k to 3" in err


@pytest.mark.parametrize(("model", "gpus", "recompute"), [
    ("llama3-405b", 64, None), ("llama3-405b", 128, None), ("llama3-405b", 64, (Recompute.NONE,)),
    ("mixtral-8x7b", 8, (Recompute.NONE,)), ("mixtral-8x7b", 16, (Recompute.NONE,)), ("deepseek-v3", 64, None),
    ("deepseek-v3", 256, None),
])
def test_the_quick_fit_check_gives_the_search_s_answer(model: str, gpus: int, recompute) -> None:
    """`_fits_on` (the leanest layouts by memory floor, priced; the search only where they do not settle it)
    answers as the whole search does, on both sides of where each model starts to fit, and with the leanest
    recompute left out of the space (where no floor under the capacity is not proof that none fits)."""
    spec = load_model(model)
    topo = Topology(load_cluster("dgx-h100"), load_accelerator("h100-sxm"), num_gpus=gpus)
    train = TrainingSpec(seq_len=4096, global_batch=64)
    cfg = SearchConfig(top_k=1) if recompute is None else SearchConfig(top_k=1, recompute=recompute)
    try:
        search(spec, train, topo, cfg)
        fits = True
    except PlacementInfeasible:
        fits = False
    assert _fits_on(spec, train, topo, cfg) is fits


def test_the_quick_fit_check_answers_true_only_from_a_priced_fit(monkeypatch) -> None:
    """A layout whose memory floor is under the capacity may still not fit once priced (the floor leaves out the
    CUDA-graph pools): where none of the leanest priced fits, `_leanest_fit` leaves the answer to the search (None),
    never True from the floors alone."""
    import dataclasses

    import placement.search as s

    spec = load_model("llama3-8b")
    topo = Topology(load_cluster("dgx-h100"), load_accelerator("h100-sxm"), num_gpus=8)
    train = TrainingSpec(seq_len=4096, global_batch=64)
    cfg = SearchConfig(top_k=1)
    assert s._leanest_fit(spec, train, topo, cfg) is True
    priced = s.estimate
    monkeypatch.setattr(s, "estimate", lambda *a, **k: dataclasses.replace(
        priced(*a, **k), fits=np.zeros_like(priced(*a, **k).fits)))
    assert s._leanest_fit(spec, train, topo, cfg) is None


def test_a_suggested_sequence_length_fits_when_applied():
    """A user trial: 1M tokens of Llama 3 8B on 8 GPUs was told to try --seq-len 524288, which did not fit either;
    the sequence named is one on which the search finds a layout."""
    code, err = _plan("--model", "llama3-8b", "--gpus", "8", "--seq-len", "1048576", "--global-batch", "8")
    assert code != 0 and "infeasible (memory)" in err
    found = re.search(r"--seq-len (\d+)", err)
    assert found is not None, err
    seq = int(found.group(1))
    assert seq < 1048576
    code, err = _plan("--model", "llama3-8b", "--gpus", "8", "--seq-len", str(seq), "--global-batch", "8")
    assert code == 0, err
    code, _ = _plan("--model", "llama3-8b", "--gpus", "8", "--seq-len", str(2 * seq), "--global-batch", "8")
    assert code != 0  # the longest of the halvings that fits
