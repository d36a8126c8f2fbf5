"""A MaxText config's model_name is checked against --model by architecture (a user trial: maxtext's own
configs/gpu llama3.1-405b config was priced as --model llama3-70b and as nemotron-4-340b, exit 0, because
placement's files write no model_name `llama3.1-405b`)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from placement.cli import main

CONFIG = ('base_config: "base.yml"\nhardware: "gpu"\nmodel_name: "{name}"\nici_fsdp_parallelism: 8\n'
          'dcn_fsdp_parallelism: {nodes}\nper_device_batch_size: 1\nremat_policy: "full"\n')


def _audit(tmp_path, name: str, model: str, gpus: int = 128):
    launch = tmp_path / "job.yml"
    launch.write_text(CONFIG.format(name=name, nodes=gpus // 8))
    return CliRunner().invoke(main, ["--reproducible", "audit", "--model", model, "--gpus", str(gpus),
                                     "--launch", str(launch)])


@pytest.mark.parametrize(("name", "model"), [("llama3.1-405b", "llama3-405b"), ("llama3.3-70b", "llama3-70b"),
                                             ("llama3.1-8b", "llama3-8b"), ("deepseek3-671b-2dfsdp", "deepseek-v3")])
def test_a_llama_3_1_name_is_the_catalog_llama_3_of_its_size(tmp_path, name, model) -> None:
    assert _audit(tmp_path, name, model).exit_code in (0, 1)
    wrong = _audit(tmp_path, name, "llama3-70b" if model != "llama3-70b" else "llama3-8b")
    assert wrong.exit_code == 2
    assert f"model_name '{name}'" in wrong.stderr and f"which is placement's {model}" in wrong.stderr
    assert f"pass --model {model}" in wrong.stderr
    # another catalog model of the same name family but another architecture (16 KV heads, GPT-2's vocabulary)
    if model == "llama3-405b":
        other = _audit(tmp_path, name, "llama3.1-405b-dgxc-v24.11")
        assert other.exit_code == 2 and "is another architecture" in other.stderr


def test_a_name_placement_does_not_map_is_not_a_catalog_model_placement_names_otherwise(tmp_path) -> None:
    got = _audit(tmp_path, "gemma2-27b", "llama3-70b")
    assert got.exit_code == 2
    assert "model_name 'gemma2-27b'" in got.stderr and "which is no model of placement's catalog" in got.stderr
    assert "MaxText's 'llama3-70b'" in got.stderr and "--model FILE" in got.stderr
    assert "Traceback" not in got.output
