"""torchtitan 0.3.0's pipeline split checks (distributed/pipeline_parallel.py:244-256: one stage per rank for 1F1B and
GPipe, two or more for the looped schedules) run on a 0.3.0 launch (--module/--config), whose config names the model
and its layer count: they were skipped there ("model llama3:None is no flavor whose layer count the audit holds"),
and a 1F1B launch with two stages per rank, which torchtitan refuses, was priced as interleaved."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.audit.readers.torchtitan import config_layers
from placement.cli import main
from placement.errors import InputError


@pytest.fixture(scope="module")
def interleaved(tmp_path_factory) -> str:
    """placement's own torchtitan file of llama3-70b on pp 4 x vpp 2: layers_per_stage 10, Interleaved1F1B."""
    out = tmp_path_factory.mktemp("pp70")
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "256",
                                       "--seq-len", "8192", "--global-batch", "256", "--framework", "torchtitan",
                                       "--tp", "8", "--pp", "4", "--vpp", "2", "--zero", "2", "--recompute", "full",
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "torchtitan.sh").read_text()
    assert "--parallelism.pipeline_parallel_layers_per_stage 10" in text
    return text


def _with(tmp_path: Path, text: str, schedule: str) -> Path:
    path = tmp_path / f"{schedule}.sh"
    old = "pipeline_parallel_schedule Interleaved1F1B"
    path.write_text(text.replace(old, f"pipeline_parallel_schedule {schedule}"))
    return path


@pytest.mark.parametrize("schedule", ["1F1B", "GPipe"])
def test_a_single_stage_schedule_with_two_stages_per_rank_is_refused(tmp_path: Path, interleaved: str,
                                                                      schedule: str) -> None:
    with pytest.raises(InputError) as err:
        parse_launch([_with(tmp_path, interleaved, schedule)])
    message = str(err.value)
    assert "Single stage schedule requires exactly 1 stage per rank, but got 2 stages per rank" in message
    assert "llama3:llama3_70b has 80 layers" in message and "so this job does not start" in message
    assert "pipeline_parallel_layers_per_stage 20" in message  # the fix


def test_the_looped_schedule_placement_wrote_is_read_as_written(tmp_path: Path, interleaved: str) -> None:
    launch = parse_launch([_with(tmp_path, interleaved, "Interleaved1F1B")])
    assert launch.pp == 4
    assert not any("no flavor whose layer count" in n for n in launch.ignored)


def test_config_layers_names_the_model_each_030_config_builds() -> None:
    assert config_layers("llama3", "llama3_70b") == 80
    assert config_layers("llama3", "llama3_8b_mxfp8") == 32
    assert config_layers("llama3", "llama3_405b") == 126
    assert config_layers("deepseek_v3", "deepseek_v3_671b_float8") == 61
    assert config_layers("qwen3", "qwen3_14b") == 40
    assert config_layers("gpt_oss", "gpt_oss_20b") == 24
    assert config_layers("llama3", "llama3_debugmodel") is None


@pytest.mark.parametrize("schedule, lps, said", [("GPipe", "20", "priced as 1F1B"),
                                                 ("LoopedBFS", "10", "priced as Interleaved1F1B")])
def test_fill_drain_schedules_are_said_not_priced_silently_as_1f1b(tmp_path: Path, interleaved: str, schedule: str,
                                                                   lps: str, said: str) -> None:
    """GPipe and LoopedBFS run every micro-batch's forward before any backward (torch 2.13 ScheduleGPipe,
    ScheduleLoopedBFS), holding all the step's activations: priced as 1F1B, they were not named at all."""
    text = interleaved.replace("pipeline_parallel_layers_per_stage 10", f"pipeline_parallel_layers_per_stage {lps}")
    launch = parse_launch([_with(tmp_path, text, schedule)])
    notes = [n for n in launch.ignored if n.startswith(f"pipeline_parallel_schedule {schedule} ")]
    assert notes and said in notes[0] and "the memory estimate is low" in notes[0], launch.ignored
