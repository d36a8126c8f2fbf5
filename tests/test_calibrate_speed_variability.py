"""`placement calibrate` fits the GPUs' speed spread (AcceleratorSpec.speed_variability, the slowest-GPU term of
cost.step) from measured steps whose GPU counts lie far apart, and leaves it at the catalog's value, saying why,
where they do not; a profile carrying it prices the term with the fitted spread."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from synthetic_calibration import write_log

from placement.calibration.calibrate import SPREAD_GPU_RATIO, Calibration
from placement.calibration.fit import Param, fit
from placement.calibration.profile import with_constants
from placement.catalog import load_accelerator, load_cluster
from placement.topology import Topology

WIDE = ((8, 1, 1, 64, 8192), (64, 1, 1, 512, 8192), (512, 1, 1, 4096, 8192), (16, 2, 1, 64, 4096),
        (1024, 8, 1, 1024, 4096), (128, 2, 1, 256, 4096), (2048, 1, 1, 8192, 8192))
"""(world, tp, micro-batch, global batch, seq) of Llama 3 8B FP8 steps from 8 to 2,048 GPUs."""
NARROW = ((8, 1, 1, 64, 8192), (8, 2, 2, 64, 4096), (16, 4, 1, 32, 2048), (32, 8, 1, 32, 512), (8, 4, 4, 64, 4096))
"""The same kind of steps within 8 to 32 GPUs."""


def _base() -> Topology:
    spec = load_cluster("dgx-h100")
    return Topology(spec, load_accelerator(spec.accelerator), num_gpus=64)


def _logs(folder: Path, shapes, truth: dict[str, float]) -> list[Path]:
    rng = np.random.default_rng(0)
    return [write_log(folder / f"step{i}.log", *shape, truth, rng, 0.01) for i, shape in enumerate(shapes)]


def test_steps_from_8_to_2048_gpus_recover_the_spread_they_were_measured_with(tmp_path: Path) -> None:
    """Steps generated with sigma 0.035 (the catalog's H100 value is 0.015) and a GEMM ceiling of 0.62: the fit
    finds both, sigma within its standard error of the truth, and the steps' errors after the fit are about their
    1 % noise; the catalog's 0.015 leaves the largest ones 12 % off."""
    truth = {"matmul_efficiency_fp8": 0.62, "speed_variability": 0.035}
    profile = Calibration(_base(), "dgx-h100", steps=_logs(tmp_path, WIDE, truth)).run()
    spread = profile.constants["speed_variability"]
    assert spread.identified, spread.note
    assert spread.default == 0.015
    assert abs(spread.value - 0.035) < max(2 * spread.stderr, 0.005)
    assert "+/- 0.02" in spread.note  # its prior in sigma's own units, not a percentage of it
    assert abs(profile.constants["matmul_efficiency_fp8"].value - 0.62) < 0.03
    errors = [(r.before / r.measured - 1.0, r.after / r.measured - 1.0) for r in profile.measurements
              if r.kind == "step"]
    assert max(abs(after) for _, after in errors) < 0.02 < 0.1 < max(abs(before) for before, _ in errors)


def test_steps_within_a_few_fold_of_one_size_leave_the_spread_and_say_why(tmp_path: Path) -> None:
    """At 8 to 32 GPUs the slowest GPU's share of a step (sigma x 1.4 to 2.1) moves with the GEMM ceiling: sigma is
    not a step constant there, it stays the catalog's, and its note names the GPU counts and what to measure."""
    calibration = Calibration(_base(), "dgx-h100", steps=_logs(tmp_path, NARROW, {"matmul_efficiency_fp8": 0.62}))
    assert "speed_variability" not in calibration.step_names()
    spread = calibration.run().constants["speed_variability"]
    assert not spread.identified
    assert spread.value == spread.default == 0.015
    assert "8 to 32 GPUs" in spread.note and f"{SPREAD_GPU_RATIO}x or more apart" in spread.note


def test_a_spread_whose_default_is_none_is_fitted_from_zero() -> None:
    """Blackwell's catalog spread is 0 (cost.step: fitted per family): a constant fitted as its logarithm could not
    start there (log 0), so the spread is fitted as log(1 + sigma) (fit.Param.offset) and is found from 0."""
    sizes = np.array([8.0, 64.0, 512.0, 4096.0])

    def residual(values: dict[str, float]) -> np.ndarray:  # a step's log growth with the slowest GPU, sigma 0.04
        grow = np.sqrt(2.0 * np.log(sizes))
        return np.log1p(values["s"] * grow) - np.log1p(0.04 * grow)

    result = fit(residual, [Param("s", 0.0, 0.0, 0.1, 0.02, offset=1.0)])
    assert result.identified["s"]
    assert abs(result.values["s"] - 0.04) < 0.002


def test_a_profile_spread_prices_the_slowest_gpu_with_it() -> None:
    """The fitted spread reaches the accelerator the cost model prices with (profile.with_constants)."""
    topo = with_constants(_base(), {"speed_variability": 0.03})
    assert topo.accelerator.speed_variability == 0.03
    assert _base().accelerator.speed_variability == 0.015
