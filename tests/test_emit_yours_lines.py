"""The torchtitan, MaxText and DeepSpeed files say what stays the user's, as megatron.sh's "yours to add" line does
(a QA round: torchtitan.sh and maxtext.yml named no dataset, tokenizer, LR schedule or checkpoint setting, and
maxtext.yml left base.yml's `dataset_type: synthetic`, so it trained on generated tokens, unsaid).  Each key or flag
the line names is one the framework takes: MaxText's base.yml of the installed 0.2.5 wheel, torchtitan 0.3.0's own
parser (both skipped where `make verify` has not installed them)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from placement.cli import main
from tests.maxtext_wheel import wheel_text


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("yours")
    result = CliRunner().invoke(main, ["--reproducible", "plan", "--model", "llama3-8b", "--cluster", "dgx-h100",
                                       "--gpus", "16", "--emit", "torchtitan,maxtext,deepspeed", "--out", str(out)])
    assert result.exit_code in (0, 1), result.output
    return {name: (out / name).read_text() for name in ("torchtitan.sh", "maxtext.yml", "deepspeed.sh")}


def _yours(text: str) -> str:
    (line,) = [x for x in text.splitlines() if x.startswith("# yours to add")]
    assert "a vocabulary of 128,256" in line  # the tokenizer the plan priced
    return line


def test_each_format_has_the_line(written: dict[str, str]) -> None:
    for text in written.values():
        _yours(text)
    assert "TRAIN_SCRIPT" in _yours(written["deepspeed.sh"])


def test_maxtext_names_base_yml_keys_and_its_synthetic_default(written: dict[str, str]) -> None:
    line = _yours(written["maxtext.yml"])
    base = yaml.safe_load(wheel_text("configs/base.yml"))
    keys = [k for k in re.findall(r"[a-z_]+", line) if "_" in k or k in ("steps",)]
    named = {k for k in keys if k in base}
    assert {"dataset_type", "tokenizer_path", "learning_rate", "steps", "enable_checkpointing"} <= named
    assert base["dataset_type"] == "synthetic" and "synthetic" in line
    assert "dataset_type" not in yaml.safe_load(written["maxtext.yml"])  # the file leaves it: the line says so


def test_torchtitan_flags_parse(written: dict[str, str]) -> None:
    pytest.importorskip("torchtitan")
    line = _yours(written["torchtitan.sh"])
    flags = re.findall(r"--[a-z_.\-0-9]+[a-z]", line)
    assert "--hf_assets_path" in flags and "--dataloader.dataset" in flags
    values = {"--checkpoint.enable": []}
    argv = ["--module", "llama3", "--config", "llama3_8b"]
    for flag in flags:
        argv += [flag, *values.get(flag, ["1" if flag.endswith(("steps", ".lr")) else "x"])]
    code = ("import sys; from torchtitan.config.manager import ConfigManager; "
            "ConfigManager().parse_args(sys.argv[1:]); print('parsed')")
    run = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=600)
    assert "parsed" in run.stdout, run.stderr[-2000:]
