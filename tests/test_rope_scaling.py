"""Llama 3.1's RoPE scaling (HF `rope_scaling` `rope_type: llama3`) reaches the model spec and the launch files;
a scaling type the files cannot be told is refused, not trained as plain RoPE."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from placement.catalog import load_model
from placement.cli import main
from placement.errors import InputError
from placement.loaders.hf_config import model_from_hf_config
from placement.specs.model import ModelSpec

DATA = Path(__file__).parent / "data"
LLAMA31 = DATA / "hf" / "llama-3.1-8b" / "config.json"
LLAMA31_ROPE = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}
"""HF meta-llama/Llama-3.1-8B config.json `rope_scaling` (the fixture), without its `rope_type`."""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--reproducible", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _config(**rope: object) -> dict:
    data = json.loads(LLAMA31.read_text())
    return data | {"rope_scaling": rope} if rope else data


def _write(tmp_path: Path, data: dict, name: str = "llama31.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _emit(tmp_path: Path, model: Path | str, framework: str = "all") -> tuple[Path, str]:
    out = tmp_path / "out"
    code, _, err = run("plan", "--model", str(model), "--cluster", "dgx-h100", "--gpus", "8", "--top-k", "1",
                       "--emit", framework, "--out", str(out))
    assert code == 0, err
    return out, err


# --- the loader ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spelling", ["rope_type", "type"])
def test_llama3_rope_scaling_is_read_with_its_four_numbers(spelling: str) -> None:
    spec = model_from_hf_config(_config(**{spelling: "llama3"}, **LLAMA31_ROPE), "l")
    assert spec.rope_scaling == "llama3"
    assert spec.llama3_rope.model_dump() == LLAMA31_ROPE


def test_transformers_5_rope_parameters_carry_the_scaling_too() -> None:
    data = {k: v for k, v in _config().items() if k not in ("rope_scaling", "rope_theta")}
    spec = model_from_hf_config(data | {"rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0,
                                                            **LLAMA31_ROPE}}, "l")
    assert (spec.rope_base, spec.rope_scaling, spec.llama3_rope.factor) == (500000.0, "llama3", 8.0)
    plain = model_from_hf_config(data | {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}, "l")
    assert (plain.rope_scaling, plain.llama3_rope) == (None, None)


@pytest.mark.parametrize("kind", ["dynamic", "linear", "longrope"])
def test_a_rope_scaling_the_files_cannot_write_is_refused(tmp_path: Path, kind: str) -> None:
    path = _write(tmp_path, _config(rope_type=kind, factor=4.0))
    code, out, err = run("plan", "--model", str(path), "--cluster", "dgx-h100", "--gpus", "8")
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert str(path) in err
    assert f"key `rope_scaling.rope_type` = {kind!r}" in err  # the field and the value
    assert "yarn, llama3" in err and "remove `rope_scaling` from a copy of config.json" in err  # the fix


def test_a_llama3_scaling_without_its_numbers_names_the_key() -> None:
    data = _config(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0)
    with pytest.raises(InputError, match=re.escape("key `rope_scaling.original_max_position_embeddings` = None")):
        model_from_hf_config(data, "l", source="c.json")


def test_the_spec_keeps_the_type_and_its_numbers_together() -> None:
    base = load_model("llama3-8b").model_dump(exclude={"rope_scaling", "llama3_rope"})
    with pytest.raises(ValidationError, match=re.escape("rope_scaling (llama3) and llama3_rope (None) go together")):
        ModelSpec(**base, rope_scaling="llama3")
    with pytest.raises(ValidationError, match=re.escape("llama3_rope.high_freq_factor (1) must exceed")):
        ModelSpec(**base, rope_scaling="llama3", llama3_rope=LLAMA31_ROPE | {"high_freq_factor": 1.0})


# --- the launch files ------------------------------------------------------------------------------------------

def test_llama31_config_json_reaches_megatron_sh(tmp_path: Path) -> None:
    """The user trial: --rotary-base 500000 was written without the scaling the config describes."""
    out, err = _emit(tmp_path, _write(tmp_path, _config()), "megatron")
    text = (out / "megatron.sh").read_text()
    assert "--rotary-base 500000 --use-rope-scaling --rope-scaling-factor 8 " in text
    assert "RoPE" not in err  # Llama 3.1's factors are Megatron's own: nothing to warn


def test_factors_megatron_fixes_are_warned(tmp_path: Path) -> None:
    data = _config(rope_type="llama3", **LLAMA31_ROPE | {"factor": 32.0, "original_max_position_embeddings": 4096})
    out, _ = _emit(tmp_path, _write(tmp_path, data))
    megatron = (out / "megatron.sh").read_text()
    assert "--use-rope-scaling --rope-scaling-factor 32 " in megatron
    assert re.search(r"# WARNING: the model's llama3 RoPE scaling has original_max_position_embeddings 4096, but "
                     r"Megatron-LM \(megatron-core 0\.19\.2\) fixes original_max_position_embeddings 8192", megatron)
    maxtext = (out / "maxtext.yml").read_text()
    assert 'rope_type: "llama3.1"' in maxtext
    assert "MaxText 0.2.5's rope_type llama3.1 fixes factor 8, original_max_position_embeddings 8192" in maxtext
    assert "llama3 RoPE scaling factor 32" in (out / "torchtitan.sh").read_text()
    assert "# RoPE: the model's llama3 scaling (factor 32" in (out / "deepspeed.sh").read_text()


def test_torchtitan_llama3_configs_scale_rope_and_a_plain_model_is_warned(tmp_path: Path) -> None:
    """torchtitan 0.3.0's llama3_8b always runs Llama 3.1's scaling: the same model without it is told so."""
    scaled, _ = _emit(tmp_path / "a", _write(tmp_path, _config()))
    assert "RoPE" not in (scaled / "torchtitan.sh").read_text()
    data = {k: v for k, v in _config().items() if k != "rope_scaling"}
    plain, _ = _emit(tmp_path / "b", _write(tmp_path, data, "llama30.json"))
    titan = (plain / "torchtitan.sh").read_text()
    assert "--config llama3_8b" in titan
    assert "# WARNING: torchtitan 0.3.0's llama3 configs scale RoPE as Llama 3.1 does" in titan
    assert "--use-rope-scaling" not in (plain / "megatron.sh").read_text()
    assert "rope_type" not in (plain / "maxtext.yml").read_text()


# --- the catalog -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["llama3-8b", "llama3-70b", "llama3-405b"])
def test_the_catalogs_llama_31_models_carry_the_scaling(name: str) -> None:
    model = load_model(name)
    assert model.rope_scaling == "llama3" and model.llama3_rope.model_dump() == LLAMA31_ROPE


def test_the_scaling_changes_no_step_time(tmp_path: Path) -> None:
    """RoPE scaling changes the frequencies, not the cost: the catalog model and its copy without it price alike."""
    text = (Path(__file__).parents[1] / "models" / "llama3-8b.yaml").read_text()
    plain = tmp_path / "plain.yaml"
    plain.write_text("\n".join(x for x in text.splitlines() if not x.startswith(("rope_scaling", "llama3_rope"))))
    assert load_model(str(plain)).rope_scaling is None

    def step(model: str) -> float:
        code, out, err = run("evaluate", "--model", model, "--cluster", "dgx-h100", "--gpus", "8", "--tp", "2",
                             "--json")
        assert code == 0, err
        return json.loads(out)["step_time_s"]

    assert step("llama3-8b") == step(str(plain))


# --- the audit -------------------------------------------------------------------------------------------------

SCRIPT = """\
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py \\
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 \\
  --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 8192 \\
  --swiglu --ffn-hidden-size 14336 --group-query-attention --num-query-groups 8 \\
  --micro-batch-size 1 --global-batch-size 64 --bf16 --use-distributed-optimizer \\
  --position-embedding-type rope --rotary-base 500000 {extra}
"""


def _audit_notes(tmp_path: Path, extra: str, model: str = "llama3-8b") -> str:
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT.format(extra=extra))
    code, out, err = run("audit", "--launch", str(script), "--model", model, "--cluster", "dgx-h100", "--gpus", "8",
                         "--json")
    assert code in (0, 1), err
    return " ".join(json.loads(out)["layout"]["ignored"])


def test_megatron_rope_scaling_flags_are_read(tmp_path: Path) -> None:
    same = _audit_notes(tmp_path, "--use-rope-scaling --rope-scaling-factor 8")
    assert "rope" not in same.lower()
    other = _audit_notes(tmp_path, "--use-rope-scaling --rope-scaling-factor 4")
    assert "--rope-scaling-factor 4" in other and "llama3 RoPE scaling factor 8: priced the same" in other
    assert "has no --use-rope-scaling" in _audit_notes(tmp_path, "")
    assert "without --use-rope-scaling" in _audit_notes(tmp_path, "--rope-scaling-factor 8")
