"""A Megatron-LM log holding two runs (a job restarted into the same file: Slurm's `--open-mode=append`, a requeue,
`>>`) is refused naming the second arguments block, not read as one run.  A user check: a tp 1 run of 9.6 s steps
followed by a tp 2 run of 19.9 s steps was read as one tp 1 run of 19.89 s (the layout of the first block, the median
of both runs' intervals, the second run's start-up among them), and `validate --runs` said -55 %."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_calibration import _args_block, _iterations

from placement.calibration.steps import read_steps
from placement.errors import InputError

BASE = {"world_size": "8", "data_parallel_size": "8", "tensor_model_parallel_size": "1", "micro_batch_size": "1",
        "global_batch_size": "128", "seq_length": "8192", "sequence_parallel": "False"}
TP2 = BASE | {"data_parallel_size": "4", "tensor_model_parallel_size": "2", "sequence_parallel": "True"}


def _two_runs(path: Path) -> tuple[Path, int]:
    first = _args_block(BASE)
    text = ("\n".join(first) + "\n" + _iterations([12.5, 9.60, 9.61, 9.59], 128)
            + "\n".join(_args_block(TP2)) + "\n" + _iterations([14.0, 19.90, 19.91, 19.89, 19.92, 19.95], 128))
    path.write_text(text)
    begin = next(x for x in first if x.startswith("------------------------ arguments"))
    second = [n for n, line in enumerate(text.splitlines(), 1) if line == begin][1]
    return path, second


def test_a_log_of_two_runs_is_refused(tmp_path: Path) -> None:
    path, second = _two_runs(tmp_path / "restarted.log")
    with pytest.raises(InputError, match=rf"restarted.log:{second}: a second Megatron arguments block starts here .*"
                                         rf"2 runs .*split the file at line {second}"):
        read_steps(path, "dgx-h100")


def test_a_yaml_entry_naming_a_log_of_two_runs_is_refused(tmp_path: Path) -> None:
    _, second = _two_runs(tmp_path / "restarted.log")
    steps = tmp_path / "steps.yaml"
    steps.write_text("- model: llama3-8b\n  num_gpus: 8\n  seq_len: 8192\n  global_batch: 128\n  precision: fp8\n"
                     "  layout: {tp: 1, pp: 1}\n  log: restarted.log\n")
    with pytest.raises(InputError, match=rf"restarted.log:{second}: a second Megatron arguments block starts here"):
        read_steps(steps, "dgx-h100")


def test_a_log_of_one_run_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "one.log"
    path.write_text("\n".join(_args_block(BASE)) + "\n" + _iterations([12.5, 9.60, 9.61, 9.59], 128))
    (step,) = read_steps(path, "dgx-h100")
    assert step.run.published_step_time_s == pytest.approx(9.60)


def test_the_audit_of_a_log_of_two_runs_is_refused(tmp_path: Path) -> None:
    """The audit reads the same arguments block (audit.readers.megatron.log_arguments): it priced the first run."""
    from click.testing import CliRunner

    from placement.cli import main

    path, second = _two_runs(tmp_path / "restarted.log")
    got = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                    "--gpus", "8"])
    assert got.exit_code == 2 and "Traceback" not in got.output
    assert f"restarted.log:{second}: a second Megatron arguments block starts here" in got.stderr


@pytest.mark.parametrize(("second", "said"), [
    ("", "repeats the same run, field for field, of entry 1"),
    ("  id: a\n", None),
], ids=["same-run", "ids"])
def test_a_run_given_twice_in_a_step_file_is_refused(tmp_path: Path, second: str, said: str | None) -> None:
    """A QA note: two identical entries (or two of one id) were both fitted, the run counted twice, where the same
    file given twice is refused."""
    from placement.calibration.steps import read_step_yaml

    entry = ("- model: llama3-8b\n  num_gpus: 8\n  seq_len: 4096\n  global_batch: 32\n"
             "  layout: {tp: 1, pp: 1, cp: 1, zero_stage: 1, micro_batch_size: 1, recompute: none}\n"
             "  step_time_s: 2.0\n")
    text = (entry + second) * 2 if second else entry * 2
    path = tmp_path / "steps.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_step_yaml(path, "dgx-h100", text)
    assert (said or "repeats id 'a' of entry 1") in str(err.value)
    # different ids are two runs, as the user says
    two = entry + "  id: a\n" + entry + "  id: b\n"
    assert len(read_step_yaml(path, "dgx-h100", two)) == 2
