"""A key stated twice: placement's own files (model, cluster, recipe, sweep, step files, cluster graphs) refuse it,
naming both lines (PyYAML and json keep the last, silently: a user trial's model file with two num_layers was planned
with the second); a DeepSpeed config is read as DeepSpeed reads it, Hjson with duplicates refused
(runtime/config.py: hjson.load(..., object_pairs_hook=dict_raise_error_on_duplicate_keys)), so comments and trailing
commas are fine; a framework's own YAML keeps the last, as its loader does, but MaxText's, which OmegaConf
refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.catalog import catalog_root
from placement.cli import main
from placement.errors import InputError


def test_a_model_file_with_a_key_twice_is_refused_naming_both_lines(tmp_path: Path) -> None:
    text = (catalog_root() / "models" / "llama3-8b.yaml").read_text()
    first = next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith("num_layers:"))
    lines = text.splitlines()
    lines.insert(first, "num_layers: 64")
    (tmp_path / "m.yaml").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(main, ["plan", "--model", str(tmp_path / "m.yaml"), "--cluster", "dgx-h100",
                                       "--gpus", "64"])
    assert result.exit_code == 2
    assert f"line {first + 1}: key 'num_layers' is stated again (first at line {first})" in result.output


def test_a_key_twice_on_one_line_is_refused_too(tmp_path: Path) -> None:
    """A flow mapping states both on one line: the check is by key, not by line."""
    from placement.loaders.files import parse_yaml

    with pytest.raises(InputError, match=r"line 1: key 'a' is stated again \(first at line 1\)"):
        parse_yaml("{a: 1, a: 2}\n", tmp_path / "m.yaml", "model file")


def _ds(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ds_config.json"
    path.write_text(text)
    return path


def test_a_deepspeed_config_is_read_as_hjson(tmp_path: Path) -> None:
    path = _ds(tmp_path, '{\n  // ZeRO-2 for the 8B run\n  "train_micro_batch_size_per_gpu": 2,\n'
                         '  "zero_optimization": {"stage": 2,},\n  "bf16": {"enabled": true},\n}\n')
    lay = parse_launch([path])
    assert lay.zero_stage == 2 and lay.micro_batch_size == 2


def test_a_deepspeed_config_with_a_key_twice_does_not_start(tmp_path: Path) -> None:
    path = _ds(tmp_path, '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1},\n'
                         ' "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}\n')
    with pytest.raises(InputError, match=r"key 'zero_optimization' appears twice in one object: DeepSpeed refuses "
                                         r"it .*Duplicate keys in DeepSpeed config"):
        parse_launch([path])


def test_a_maxtext_config_with_a_key_twice_is_refused_as_omegaconf_refuses_it(tmp_path: Path) -> None:
    """MaxText loads its YAML with OmegaConf, whose loader raises 'found duplicate key' (omegaconf v2.3.0 _utils.py
    get_yaml_loader, OmegaConfLoader.construct_mapping): this config never starts, where the audit once kept the
    last value as PyYAML does."""
    cfg = tmp_path / "cfg.yml"
    cfg.write_text("base_config: base.yml\nper_device_batch_size: 2\nper_device_batch_size: 4\n")
    with pytest.raises(InputError, match=r"key 'per_device_batch_size' is stated again \(first at line 2\), which "
                                         r"OmegaConf refuses"):
        parse_launch([cfg])
