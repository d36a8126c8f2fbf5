"""Megatron-LM's MoE layer pattern, shared-expert width and MLA widths are read and compared with --model, at
Megatron-LM's own defaults where a launch leaves them out (a user trial: Megatron-LM's DeepSeek-V3 script without
--moe-layer-freq, with it at [1]*61, or with --kv-lora-rank 256 and a 4x shared expert was priced as DeepSeek-V3 each
time, 28.611 s; Megatron-LM's default --moe-layer-freq 1 makes every layer MoE, arguments.py :3520)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from placement.cli import main


@pytest.fixture(scope="module")
def dsv3_script(tmp_path_factory):
    """placement's own megatron.sh of DeepSeek-V3 (it states every model argument)."""
    out = tmp_path_factory.mktemp("dsv3")
    result = CliRunner().invoke(main, ["evaluate", "--model", "deepseek-v3", "--gpus", "256", "--tp", "1",
                                       "--pp", "8", "--ep", "32", "--cp", "1", "--etp", "1", "--vpp", "1", "--mbs", "1",
                                       "--zero", "1", "--recompute", "full", "--emit", "megatron", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return (out / "megatron.sh").read_text()


def _audit(tmp_path, text: str):
    path = tmp_path / "train.sh"
    path.write_text(text)
    return CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "deepseek-v3", "--gpus", "256"])


@pytest.mark.parametrize(("old", "new", "said"), [
    ("--moe-layer-freq '([0]*3+[1]*58)'", "", "the launch files train num_moe_layers = 61 (from default ("),
    ("--moe-layer-freq '([0]*3+[1]*58)'", "--moe-layer-freq '[1]*61'", "set num_moe_layers = 61"),
    ("--moe-layer-freq '([0]*3+[1]*58)'", "--moe-layer-freq 2", "set num_moe_layers = 31"),
    ("--kv-lora-rank 512", "--kv-lora-rank 256", "set kv_lora_rank = 256"),
    ("--kv-lora-rank 512", "", "train kv_lora_rank = 32"),  # and the fix: "or state --kv-lora-rank 512"
    ("--moe-shared-expert-intermediate-size 2048", "--moe-shared-expert-intermediate-size 8192",
     "set moe_shared_expert_intermediate_size = 8192"),
    ("--moe-shared-expert-intermediate-size 2048", "", "train moe_shared_expert_intermediate_size = 0"),
    ("--multi-latent-attention", "", "train multi_latent_attention = False"),
])
def test_a_launch_that_trains_another_moe_or_mla_shape_is_refused(tmp_path, dsv3_script, old, new, said):
    assert old in dsv3_script
    got = _audit(tmp_path, dsv3_script.replace(old, new))
    assert got.exit_code == 2, got.output[:2000]
    assert said in got.stderr and "but model deepseek-v3 has" in got.stderr, got.stderr
    assert "Traceback" not in got.output
    if not new and old != "--moe-layer-freq '([0]*3+[1]*58)'":  # a default: the fix names the flag to state
        assert f"or state {old}" in got.stderr, got.stderr


def test_the_model_as_stated_is_priced(tmp_path, dsv3_script):
    got = _audit(tmp_path, dsv3_script)
    assert got.exit_code in (0, 1), got.output[:2000]
    assert "but model deepseek-v3 has" not in got.output


def test_a_log_prints_the_layer_pattern_evaluated(tmp_path):
    """A Megatron-LM log prints --moe-layer-freq as the list it evaluated to ([0, 0, 1, ...]); the reader once skipped
    it as an object no flag spells and took the default, every layer MoE (a review: a DeepSeek-V3 log was refused)."""
    from pathlib import Path

    from placement.audit.launch import parse_launch

    log = (Path(__file__).parent / "data" / "audit" / "megatron" / "train_llama3_8b_h100_fp8.log").read_text()
    pattern = "[" + ", ".join(["0"] * 2 + ["1"] * 30) + "]"
    assert "  moe_layer_freq .................................. 1\n" in log
    edited = (log.replace("  moe_layer_freq .................................. 1\n",
                          f"  moe_layer_freq .................................. {pattern}\n")
              .replace("  num_experts ..................................... None\n",
                       "  num_experts ..................................... 8\n"))
    path = tmp_path / "moe.log"
    path.write_text(edited)
    launch = parse_launch([path])
    assert launch.num_moe_layers == 30, launch.sources.get("num_moe_layers")
    assert "moe_layer_freq" in launch.sources["num_moe_layers"]
