"""A file of one of placement's YAML kinds given where another goes is named as what it is, in one sentence with
where it goes, for every kind a flag or a sweep file reads (a model, a cluster, an accelerator, a sweep file, a
calibration profile, a step file), not answered with every field the expected schema misses and every key it does
not take (a user trial: a calibration profile as `--model`, a sweep file as `--calibration` and a model file as
`--steps` each printed a dozen "Field required" / "Extra inputs are not permitted" errors)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from placement.catalog import catalog_root
from placement.cli import main

ROOT = catalog_root()
SWEEP = ROOT / "hardware" / "sweeps" / "h100-h200-b200-gb200-budget.yaml"
MODEL = ROOT / "models" / "llama3-8b.yaml"
CLUSTER = ROOT / "hardware" / "clusters" / "dgx-h100.yaml"
ACCELERATOR = ROOT / "hardware" / "accelerators" / "h100-sxm.yaml"
STEPS = [{"id": "mine", "model": "llama3-8b", "num_gpus": 8, "seq_len": 8192, "global_batch": 128,
          "layout": {"tp": 1, "pp": 1}, "step_time_s": 12.0}]
PROFILE = {"profile_version": 1, "placement_version": "0.1.0", "cluster": "dgx-h100", "accelerator": "h100-sxm",
           "constants": {}, "measurements": [], "warnings": []}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    steps, profile = tmp_path / "steps.yaml", tmp_path / "profile.yaml"
    steps.write_text(yaml.safe_dump(STEPS), encoding="utf-8")
    profile.write_text(yaml.safe_dump(PROFILE), encoding="utf-8")
    return {"sweep": SWEEP, "model": MODEL, "cluster": CLUSTER, "accelerator": ACCELERATOR, "steps": steps,
            "profile": profile}


JOB = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8"]
CASES = [  # (given kind, command with {f} for the file, expected kind's words)
    ("profile", ["plan", "--model", "{f}", "--cluster", "dgx-h100", "--gpus", "8"], "a model file"),
    ("steps", ["plan", "--model", "{f}", "--cluster", "dgx-h100", "--gpus", "8"], "a model file"),
    ("sweep", ["plan", "--model", "llama3-8b", "--cluster", "{f}", "--gpus", "8"], "a cluster file"),
    ("model", ["plan", *JOB, "--calibration", "{f}"], "a calibration profile"),
    ("cluster", ["plan", *JOB, "--calibration", "{f}"], "a calibration profile"),
    ("sweep", ["plan", *JOB, "--calibration", "{f}"], "a calibration profile"),
    ("steps", ["plan", *JOB, "--calibration", "{f}"], "a calibration profile"),
    ("model", ["sweep", "{f}", "--out", "{out}"], "a sweep file"),
    ("cluster", ["sweep", "{f}", "--out", "{out}"], "a sweep file"),
    ("accelerator", ["sweep", "{f}", "--out", "{out}"], "a sweep file"),
    ("profile", ["sweep", "{f}", "--out", "{out}"], "a sweep file"),
    ("steps", ["sweep", "{f}", "--out", "{out}"], "a sweep file"),
    ("sweep", ["calibrate", "--steps", "{f}", "--cluster", "dgx-h100", "--gpus", "8", "--out", "{out}/p.yaml"],
     "a step file"),
    ("profile", ["calibrate", "--steps", "{f}", "--cluster", "dgx-h100", "--gpus", "8", "--out", "{out}/p.yaml"],
     "a step file"),
    ("model", ["validate", "--runs", "{f}", "--cluster", "dgx-h100"], "a step file"),
]
WORDS = {"model": "a model file", "cluster": "a cluster file", "accelerator": "an accelerator file",
         "sweep": "a sweep file", "profile": "a calibration profile", "steps": "a step file"}
WHERE = {"model": "--model", "cluster": "--cluster", "accelerator": "`accelerator:`", "sweep": "placement sweep FILE",
         "profile": "--calibration", "steps": "--steps"}


@pytest.mark.parametrize(("given", "args", "expected"), CASES, ids=[f"{g}-as-{a[0]}-{e.split()[-1]}"
                                                                      for g, a, e in CASES])
def test_a_file_of_another_kind_is_named_as_what_it_is(files: dict[str, Path], tmp_path: Path, given: str,
                                                        args: list[str], expected: str) -> None:
    argv = [a.format(f=files[given], out=tmp_path / "out") for a in args]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert f"{files[given]} is {WORDS[given]} (its fields " in err
    assert f"not {expected}; give it as " in err and WHERE[given] in err
    assert "Field required" not in err and "Extra inputs" not in err
    assert len(err.splitlines()) == 1 and "Traceback" not in result.output


def test_a_file_of_the_expected_kind_with_a_bad_field_still_names_the_field(tmp_path: Path) -> None:
    """A step entry that misses one field is a step file: its error names the field, not another kind."""
    path = tmp_path / "steps.yaml"
    path.write_text(yaml.safe_dump([{k: v for k, v in STEPS[0].items() if k != "num_gpus"}]), encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", "--runs", str(path), "--cluster", "dgx-h100"])
    assert result.exit_code == 2
    assert "field `num_gpus` is missing" in result.stderr and " is a " not in result.stderr
