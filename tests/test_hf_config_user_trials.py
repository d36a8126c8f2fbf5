"""Three user trials of a HuggingFace config.json: `rms_norm_eps: NaN` was dropped unsaid (the emitted Megatron file
fell back to 1e-5), a Mistral config (no attention_bias key) left --disable-bias-linear to the user, and a folder named
config.json was reported as "no such file"."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from click.testing import CliRunner

from placement.catalog import load_model
from placement.cli import main

MISTRAL = Path(__file__).parent / "data" / "hf" / "mistral-7b-v0.1" / "config.json"


def test_a_norm_epsilon_that_is_not_one_is_refused_with_its_key(tmp_path):
    data = json.loads(MISTRAL.read_text())
    for bad in ("NaN", "2.0", '"1e-5"'):
        text = MISTRAL.read_text().replace(f'"rms_norm_eps": {json.dumps(data["rms_norm_eps"])}',
                                           f'"rms_norm_eps": {bad}')
        assert text != MISTRAL.read_text()
        (tmp_path / "config.json").write_text(text)
        result = CliRunner().invoke(main, ["show", "model", str(tmp_path / "config.json")])
        assert result.exit_code == 2 and "rms_norm_eps" in result.output and "Traceback" not in result.output


def test_mistrals_projections_are_unbiased_and_its_megatron_file_says_so(tmp_path):
    assert load_model(str(MISTRAL)).linear_bias is False
    result = CliRunner().invoke(main, ["evaluate", "--model", str(MISTRAL), "--gpus", "8", "--seq-len", "4096",
                                       "--global-batch", "64", "--tp", "1", "--zero", "1", "--emit", "megatron",
                                       "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "--disable-bias-linear" in shlex.split((tmp_path / "megatron.sh").read_text(), comments=True)


def test_a_folder_named_config_json_is_said_to_be_a_folder(tmp_path):
    (tmp_path / "config.json").mkdir()
    result = CliRunner().invoke(main, ["show", "model", str(tmp_path / "config.json")])
    assert result.exit_code == 2 and "a folder, not a file" in result.output
