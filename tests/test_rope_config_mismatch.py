"""A framework config that trains other RoPE than the model's (a QA run found three, none warned): MaxText's
qwen3-30b-a3b.yml (theta 10,000,000) and qwen3-235b-a22b.yml (5,000,000) against Qwen3's 1e6, and MaxText's
deepseek3-671b.yml and torchtitan 0.3.0's 671B flavor, which apply YaRN with factor 40 to a DeepSeek-V3 the catalog
pre-trains on plain RoPE.  MaxText merges its model config over maxtext.yml (configs/pyconfig.py:521), so the
files name the config that trains the model's RoPE (qwen3-30b-a3b-base) or pass it on the launch lines, and say so;
torchtitan's config builds the model in code, so its file warns, naming the file and line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from placement.catalog import load_model
from placement.cli import main
from placement.emit import maxtext, torchtitan
from tests.maxtext_wheel import wheel_config, wheel_text

LAUNCH = re.compile(r"^#\s+\S+: NODE_RANK=\d+ python3 -m maxtext\.trainers\.pre_train\.train maxtext\.yml (.*)$", re.M)


def _plan(tmp_path: Path, model: str, framework: str, gpus: str = "64") -> tuple[str, str]:
    out = tmp_path / framework
    result = CliRunner().invoke(main, ["--reproducible", "plan", "--model", model, "--cluster", "dgx-h100", "--gpus",
                                       gpus, "--global-batch", "1024", "--framework", framework, "--top-k", "1",
                                       "--emit", framework, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return (out / ("maxtext.yml" if framework == "maxtext" else "torchtitan.sh")).read_text(), result.stderr


def test_qwen3_30b_a3b_names_maxtexts_config_with_the_models_theta(tmp_path: Path) -> None:
    text, err = _plan(tmp_path, "qwen3-30b-a3b", "maxtext")
    assert yaml.safe_load(text)["model_name"] == "qwen3-30b-a3b-base"
    assert "RoPE" not in err and "override_model_config" not in text


def test_a_qwen3_30b_a3b_of_the_2507_theta_names_the_config_of_that_theta(tmp_path: Path) -> None:
    """Qwen3-30B-A3B-Instruct-2507's config.json has rope_theta 1e7, qwen3-30b-a3b.yml's: that config, no override."""
    data = json.loads((Path(__file__).parent / "data" / "hf" / "qwen3-30b-a3b" / "config.json").read_text())
    path = tmp_path / "Qwen3-30B-A3B-Instruct-2507" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data | {"rope_theta": 10_000_000.0}))
    text, err = _plan(tmp_path, str(path), "maxtext")
    assert yaml.safe_load(text)["model_name"] == "qwen3-30b-a3b"
    assert "RoPE" not in err and "override_model_config" not in text


def test_qwen3_30b_a3b_base_is_qwen3_30b_a3b_with_the_models_theta() -> None:
    """The two wheel configs differ in rope_max_timescale only: the -base one trains the catalog's (HF's) 1e6."""
    base, instruct = wheel_config("qwen3-30b-a3b-base"), wheel_config("qwen3-30b-a3b")
    assert {k for k in base | instruct if base.get(k) != instruct.get(k)} == {"rope_max_timescale"}
    assert base["rope_max_timescale"] == load_model("qwen3-30b-a3b").rope_base == 1e6


def test_qwen3_235b_launch_lines_pass_the_models_theta_and_warn(tmp_path: Path) -> None:
    text, err = _plan(tmp_path, "qwen3-235b-a22b", "maxtext", "256")
    assert yaml.safe_load(text)["model_name"] == "qwen3-235b-a22b"
    lines = LAUNCH.findall(text)
    assert lines and all(x == "run_name=RUN base_output_directory=DIR override_model_config=true "
                              "rope_max_timescale=1000000" for x in lines)
    said = ("model_name qwen3-235b-a22b's config trains other RoPE than the model's; the launch lines below pass the "
            "model's, RoPE theta 1,000,000 (not rope_max_timescale 5,000,000, configs/models/qwen3-235b-a22b.yml:38)")
    assert f"# WARNING: {said}" in text and f"warning: maxtext: {said}" in err
    assert "a launcher of your own must pass them too" in err


def test_deepseek_v3_launch_lines_turn_maxtexts_yarn_off(tmp_path: Path) -> None:
    """rope_factor 1 is plain RoPE in MaxText's YaRN (layers/embeddings.py:691) and an unscaled MLA softmax
    (layers/attention_mla.py:757); deepseek3-671b.yml sets rope_factor 40, so only the command line changes it."""
    text, err = _plan(tmp_path, "deepseek-v3", "maxtext", "256")
    assert all(x.endswith(" override_model_config=true rope_factor=1") for x in LAUNCH.findall(text))
    assert "plain RoPE (not YaRN with rope_factor 40, configs/models/deepseek3-671b.yml:48-55" in err
    assert "rope_factor" not in yaml.safe_load(text)  # maxtext.yml would be overridden by the model config


def test_models_whose_rope_a_config_trains_get_no_override(tmp_path: Path) -> None:
    text, err = _plan(tmp_path, "llama3-8b", "maxtext", "16")
    assert "override_model_config" not in text and "RoPE" not in err
    assert all(x == "run_name=RUN base_output_directory=DIR" for x in LAUNCH.findall(text))


@pytest.mark.parametrize("name", sorted(maxtext.CONFIG_ROPE))
def test_each_configs_rope_is_the_wheels(name: str) -> None:
    """CONFIG_ROPE against configs/models/<name>.yml (base.yml's value where the config leaves a key), with the cited
    line holding the config's rope key."""
    rope, cfg = maxtext.CONFIG_ROPE[name], wheel_config(name)
    base = yaml.safe_load(wheel_text("configs/base.yml"))
    got = cfg | {k: v for k, v in base.items() if k not in cfg}
    assert got["rope_max_timescale"] == rope.timescale
    assert got["rope_type"] == ("yarn" if rope.yarn else "default")
    if rope.yarn:
        assert rope.yarn == {"factor": got["rope_factor"],
                             "original_max_position_embeddings": got["original_max_position_embeddings"],
                             "beta_fast": got["beta_fast"], "beta_slow": got["beta_slow"],
                             "truncate": got["rope_truncate"]}
    path, lines = rope.where.split(":")
    first = int(lines.split("-")[0])
    assert path == f"configs/models/{name}.yml"
    assert re.match(r"rope_(max_timescale|type):", wheel_text(path).splitlines()[first - 1])
    assert ({n for n, _ in maxtext.MODELS.values()} - {"gpt3-175b"}) | set(maxtext.SAME_SHAPE.values()) == set(
        maxtext.CONFIG_ROPE)


def test_torchtitans_deepseek_v3_yarn_is_warned_with_its_file_and_line(tmp_path: Path) -> None:
    text, err = _plan(tmp_path, "deepseek-v3", "torchtitan", "256")
    said = ("the model states no YaRN (plain RoPE, or not stated), but torchtitan 0.3.0's deepseek_v3_671b builds "
            "RoPE.Config scaling 'yarn' with rope_factor 40 (models/deepseek_v3/__init__.py:575-584), which "
            "ComplexRoPE and CosSinRoPE apply whenever rope_factor > 1 (models/common/rope.py:219-221, :287-288)")
    assert f"# WARNING: {said}" in text and f"warning: torchtitan: {said}" in err


def test_torchtitan_warns_a_theta_its_config_does_not_build() -> None:
    """A Qwen3-30B-A3B with the 2507 release's theta under qwen3_30b_a3b (1e6, models/qwen3/__init__.py:550)."""
    from dataclasses import replace

    from tests.verify.helpers import plan_context

    ctx, model = plan_context("qwen3-30b-a3b", "dgx-h100", 64, 4096, 1024, {"tp": 1, "pp": 1, "cp": 1})
    assert torchtitan.config_rope_warnings(ctx, "qwen3_30b_a3b") == []
    other = replace(ctx, model=model.model_copy(update={"rope_base": 1e7}))
    assert torchtitan.config_rope_warnings(other, "qwen3_30b_a3b") == [
        "the model's RoPE theta is 10,000,000, but torchtitan 0.3.0's qwen3_30b_a3b builds RoPE.Config theta "
        "1,000,000 (models/qwen3/__init__.py:550): this file trains other RoPE frequencies than the model's; change "
        "it in your copy of the config function (no flag sets a config's model)"]


def test_torchtitans_rope_table_is_the_installed_wheels() -> None:
    """Each CONFIG_ROPE line builds the theta (and YaRN) the table says, in torchtitan 0.3.0's own source."""
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution("torchtitan")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("torchtitan 0.3.0 is not installed")
    assert dist.version == "0.3.0"
    for config, (theta, yarn, where) in torchtitan.CONFIG_ROPE.items():
        path, lines = where.split(":")
        first, _, last = lines.partition("-")
        text = Path(dist.locate_file(f"torchtitan/{path}")).read_text().splitlines()
        block = "\n".join(text[int(first) - 1:int(last or first)])
        assert float(re.search(r"theta=([\d.]+)", block).group(1)) == theta, config
        if yarn:
            assert 'scaling="yarn"' in block and float(re.search(r"rope_factor=([\d.]+)", block).group(1)) == \
                yarn["factor"], config
