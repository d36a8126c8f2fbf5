"""A Megatron-LM log's iteration lines at a batch ramp-up (`--rampup-batch-size`: each line prints the `global batch
size` it ran) are not the run's step.  A user trial: ramp-up lines at batch 16-96 were priced at the arguments'
128, and `calibrate` fitted the FP8 GEMM efficiency at 0.945, `validate --runs` said +100 %."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_calibration import _args_block, _iterations

from placement.calibration.steps import read_steps
from placement.errors import InputError

OVERRIDES = {"world_size": "8", "data_parallel_size": "8", "tensor_model_parallel_size": "1", "micro_batch_size": "1",
             "global_batch_size": "128", "seq_length": "4096", "max_position_embeddings": "8192",
             "sequence_parallel": "False"}


def _log(path: Path, parts: list[tuple[list[float], int]]) -> Path:
    body = "".join(_iterations(times, gbs) for times, gbs in parts)
    path.write_text("\n".join(_args_block(OVERRIDES)) + "\n" + body)
    return path


def test_ramp_up_lines_are_left_out_and_said(tmp_path: Path) -> None:
    path = _log(tmp_path / "run.log", [([0.5, 0.5, 1.0], 32), ([4.0, 2.0, 2.0, 2.0], 128)])
    (step,) = read_steps(path, "dgx-h100")
    assert step.run.published_step_time_s == pytest.approx(2.0)  # the full-batch lines after the first, not 0.5-1.0
    assert "3 logged interval(s) at another global batch than the run's 128 left out (a batch ramp-up, 32-32" \
        in step.run.citation


def test_a_log_of_ramp_up_lines_only_is_refused(tmp_path: Path) -> None:
    path = _log(tmp_path / "ramp.log", [([0.2, 0.2], 16), ([0.4, 0.4], 32), ([1.2, 1.2], 96)])
    with pytest.raises(InputError, match=r"0 usable .* at the run's global batch 128; 6 logged interval\(s\) at "
                                         r"another global batch .* ramp-up, 16-96"):
        read_steps(path, "dgx-h100")
