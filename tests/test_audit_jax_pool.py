"""An audited MaxText job runs on JAX's allocator, whose pool its launch line sizes (XLA_CLIENT_MEM_FRACTION, or the
older XLA_PYTHON_CLIENT_MEM_FRACTION, jaxlib xla_client.py generate_pjrt_gpu_plugin_options): the audit prices the job
within that pool, not within PyTorch's caching allocator (a review: a MaxText script exporting 0.65 was priced to fit in
78 GiB of an H100, and its capacity line spoke of PYTORCH_CUDA_ALLOC_CONF)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.catalog import load_accelerator
from placement.cli import main
from placement.cost.constants import MEMORY_RESERVE_BYTES

GiB = 2**30
JOB_YML = ('base_config: "base.yml"\nhardware: "gpu"\nmodel_name: "llama3-70b"\nici_fsdp_parallelism: 8\n'
           'dcn_fsdp_parallelism: 8\nper_device_batch_size: {pdb}\nmax_target_length: 8192\nremat_policy: "full"\n')
"""Llama 3 70B under FSDP over 64 H100s: 57.5 GiB a GPU at per-device batch 2, 75.5 GiB at 3 (as priced)."""
TRAIN = "python3 -m maxtext.trainers.pre_train.train configs/job.yml run_name=x\n"
HBM = load_accelerator("h100-sxm").hbm_bytes


def _audit(tmp_path, env: str, pdb: int = 2, script: bool = True):
    (tmp_path / "job.yml").write_text(JOB_YML.format(pdb=pdb))
    (tmp_path / "train.sh").write_text(f"#!/bin/bash\n{env}{TRAIN}")
    files = (["--launch", str(tmp_path / "train.sh")] if script else []) + ["--launch", str(tmp_path / "job.yml")]
    return CliRunner().invoke(main, ["--reproducible", "audit", "--model", "llama3-70b", "--cluster", "dgx-h100",
                                     "--gpus", "64", *files, "--json"])


def _findings(report: dict, kind: str) -> list[dict]:
    return [f for f in report["findings"] if f["kind"] == kind]


@pytest.mark.parametrize("name", ["XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_CLIENT_MEM_FRACTION"])
def test_a_fraction_caps_the_capacity_at_jax_pool_plus_the_reserve(tmp_path, name) -> None:
    got = _audit(tmp_path, f"export {name}=0.65\n")
    assert got.exit_code == 1, got.output  # 57.5 GiB does not fit in 0.65 x 79.6 + 2 GiB
    report = json.loads(got.stdout)
    est = report["estimate"]
    assert est["memory_capacity_bytes"] == pytest.approx(0.65 * HBM + MEMORY_RESERVE_BYTES)
    assert est["memory_pool"]["pool_bytes"] == pytest.approx(0.65 * HBM)
    assert f"{name}=0.65" in report["layout"]["sources"]["jax_memory_fraction"]
    over = _findings(report, "memory_over_capacity")
    assert over and over[0]["severity"] == "error"
    need = (est["peak_memory_bytes"] - MEMORY_RESERVE_BYTES) / HBM  # the fraction it names holds the job
    fix = float(over[0]["message"].split("XLA_PYTHON_CLIENT_MEM_FRACTION=")[-1][:4])
    assert need <= fix < need + 0.01
    # the best plan is the same job's: searched within the same pool
    assert report["best"]["peak_memory_bytes"] <= 0.65 * HBM + MEMORY_RESERVE_BYTES


def test_a_fraction_that_holds_the_job_fits_and_says_so(tmp_path) -> None:
    got = _audit(tmp_path, "export XLA_PYTHON_CLIENT_MEM_FRACTION=0.85\n")
    assert got.exit_code == 0, got.output
    report = json.loads(got.stdout)
    assert report["estimate"]["fits"]
    assert report["estimate"]["memory_capacity_bytes"] == pytest.approx(0.85 * HBM + MEMORY_RESERVE_BYTES)
    text = CliRunner().invoke(main, ["--reproducible", "audit", "--model", "llama3-70b", "--cluster", "dgx-h100",
                                     "--gpus", "64", "--launch", str(tmp_path / "train.sh"), "--launch",
                                     str(tmp_path / "job.yml")]).output
    capacity = next(line for line in text.splitlines() if line.startswith("capacity:"))
    assert "JAX's memory pool" in capacity and "PYTORCH_CUDA_ALLOC_CONF" not in capacity


def test_unset_runs_the_whole_gpu_with_a_warning_past_75_percent(tmp_path) -> None:
    """JAX's 0.75+ policy grows an unset pool past the 75 % it preallocates (docs.jax.dev gpu_memory_allocation):
    priced at the whole GPU, with a warning where the job needs more than 75 %, which a JAX without that policy
    would not give it."""
    small = json.loads(_audit(tmp_path, "", pdb=2).stdout)
    assert small["estimate"]["memory_pool"]["pool_bytes"] is None
    assert not _findings(small, "jax_memory_fraction_unset")  # 55.5 GiB in the pool: under 75 % of 79.6
    got = _audit(tmp_path, "", pdb=3)
    assert got.exit_code == 0, got.output
    large = json.loads(got.stdout)
    assert large["estimate"]["fits"]
    assert large["estimate"]["memory_capacity_bytes"] > 0.75 * HBM + MEMORY_RESERVE_BYTES
    warned = _findings(large, "jax_memory_fraction_unset")
    assert warned and warned[0]["severity"] == "warning"
    fix = float(warned[0]["message"].split("XLA_PYTHON_CLIENT_MEM_FRACTION=")[-1][:4])
    assert (large["estimate"]["peak_memory_bytes"] - MEMORY_RESERVE_BYTES) / HBM <= fix


def test_a_config_without_a_launch_line_is_left_to_the_environment(tmp_path) -> None:
    report = json.loads(_audit(tmp_path, "export XLA_PYTHON_CLIENT_MEM_FRACTION=0.65\n", script=False).stdout)
    assert report["estimate"]["memory_pool"] is None
    assert "jax_memory_fraction" not in report["layout"]["sources"]


@pytest.mark.parametrize(("env", "said"), [
    ("export XLA_CLIENT_MEM_FRACTION=0.8 XLA_PYTHON_CLIENT_MEM_FRACTION=0.8\n", "are both set"),
    ("export XLA_PYTHON_CLIENT_MEM_FRACTION=most\n", "is no number"),
    ("export XLA_PYTHON_CLIENT_MEM_FRACTION=1.5\n", "outside (0, 1]"),
    # TensorFlow's name for CUDA's async allocator (TF_GPU_ALLOCATOR): JAX's is cuda_async; a QA trial priced the job
    ("export XLA_PYTHON_CLIENT_ALLOCATOR=cuda_malloc_async\n", "XLA_PYTHON_CLIENT_ALLOCATOR=cuda_malloc_async"),
], ids=["both-names", "not-a-number", "above-one", "unknown-allocator"])
def test_a_fraction_jax_refuses_is_an_error(tmp_path, env, said) -> None:
    got = _audit(tmp_path, env)
    assert got.exit_code == 2, got.output
    assert said in got.output and "Traceback" not in got.output


@pytest.mark.parametrize(("env", "note"), [
    ("export XLA_PYTHON_CLIENT_ALLOCATOR=platform XLA_PYTHON_CLIENT_MEM_FRACTION=0.65\n", "keeps no pool"),
    ("export XLA_PYTHON_CLIENT_MEM_FRACTION=${SITE_FRACTION}\n", "leave to the environment"),
], ids=["platform-allocator", "from-the-environment"])
def test_no_cap_where_the_launch_sets_none(tmp_path, env, note) -> None:
    got = _audit(tmp_path, env)
    assert got.exit_code == 0, got.output
    est = json.loads(got.stdout)["estimate"]
    assert est["memory_pool"]["pool_bytes"] is None and note in est["memory_pool"]["note"]
    assert est["memory_capacity_bytes"] > 0.65 * HBM + MEMORY_RESERVE_BYTES


def test_the_launch_lines_other_xla_settings_are_said_not_modelled(tmp_path) -> None:
    """A MaxText script's XLA_FLAGS and NCCL settings were read by no reader and passed over in silence."""
    got = _audit(tmp_path, 'export XLA_FLAGS="--xla_gpu_enable_latency_hiding_scheduler=true"\n'
                           "export NCCL_IB_HCA=mlx5_0\nexport XLA_PYTHON_CLIENT_MEM_FRACTION=0.9\n")
    report = json.loads(got.stdout)
    said = " ".join(report["layout"]["ignored"]) + " ".join(report.get("warnings", []))
    assert "XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true: an XLA setting, not modelled" in said
    assert "NCCL_IB_HCA" in got.output
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=0.9: an XLA setting" not in said  # priced, not "not modelled"
