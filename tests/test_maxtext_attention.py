"""MaxText 0.2.5's default attention, 'autoselected' (base.yml:486), runs tokamax's Pallas Triton flash kernel on
GPUs (layers/attention_op.py:1679-1740): priced as FlashAttention-2, as torchtitan's FlexAttention is; a user trial
found MaxText plans priced with the FlashAttention-3/cuDNN class (+7 % at 8K, +23 % at 32K on 70B)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main
from placement.errors import InputError

JOB = ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "256", "--seq-len", "32768",
       "--global-batch", "256", "--tp", "1", "--pp", "1", "--mbs", "1", "--zero", "3", "--recompute", "full", "--json"]


def _run(*extra: str) -> dict:
    result = CliRunner().invoke(main, [*JOB, *extra])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_maxtext_prices_its_triton_flash_kernel_with_its_source() -> None:
    got = _run("--framework", "maxtext")
    assert got["recipe"]["attention_kernel"] == "flash2"
    assert "autoselected" in got["recipe_sources"]["attention_kernel"]
    fa3 = _run("--attention-kernel", "flash", "--fp32-weights", "--no-norms-fused", "--grad-reduce-fp32")
    assert got["step_time_s"] > 1.1 * fa3["step_time_s"]  # long context: the kernel is most of the step


@pytest.mark.parametrize(("value", "kernel"), [("cudnn_flash_te", "flash"), ("dot_product", "unfused"),
                                               ("flash", "flash2"), ("autoselected", "flash2"),
                                               # JAX's cuDNN SDPA (attention_op.py cudnn_jax_flash_attention)
                                               ("cudnn_flash_jax", "flash")])
def test_a_maxtext_configs_attention_key_is_read(tmp_path: Path, value: str, kernel: str) -> None:
    cfg = tmp_path / "cfg.yml"
    cfg.write_text(f"base_config: base.yml\nattention: {value}\n")
    launch = parse_launch([cfg])
    assert launch.recipe["attention_kernel"] == kernel and "cfg.yml:2" in launch.sources["recipe.attention_kernel"]


def test_an_unknown_maxtext_attention_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.yml"
    cfg.write_text("base_config: base.yml\nattention: splash\n")
    with pytest.raises(InputError, match=r"attention 'splash'; MaxText 0\.2\.5 trains with"):
        parse_launch([cfg])


def test_minimal_with_context_reruns_only_the_norms(tmp_path: Path) -> None:
    """A user trial: MaxText's published A3 Llama 2 7B config (remat_policy minimal_with_context, which saves the
    projections' outputs and the attention context) was priced as attention-core recompute, which under flash
    attention frees nothing: 82.5 GiB, "runs out of memory". It reruns the norms (recompute_modules layernorm), and
    keeps only what it names (tests/test_maxtext_named_saves.py)."""
    def audit(policy: str) -> dict:
        cfg = tmp_path / f"{policy}.yml"
        cfg.write_text(f"base_config: base.yml\nmodel_name: llama3-8b\nper_device_batch_size: 4\n"
                       f"max_target_length: 4096\nici_fsdp_parallelism: 8\nremat_policy: {policy}\n"
                       f"scan_layers: false\nattention: cudnn_flash_te\n")
        result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(cfg), "--model", "llama3-8b",
                                           "--cluster", "dgx-h100", "--gpus", "8", "--json"])
        assert result.exit_code in (0, 1), result.output
        return json.loads(result.stdout)

    ctx, none = audit("minimal_with_context"), audit("none")
    assert ctx["estimate"]["recipe"]["recompute_modules"] == ["layernorm"]
    assert ctx["estimate"]["memory"]["activations_bytes"] < none["estimate"]["memory"]["activations_bytes"]
    # what the policy does not name is priced as rerun (recipe remat_saves_named_only), not as an upper bound
    assert not [x for x in ctx["layout"]["ignored"] if "minimal_with_context" in x and "upper bound" in x]


def test_framework_maxtext_plans_gpt_oss_at_cp_1_whose_files_start() -> None:
    """gpt-oss-120b's sinks run only under cuDNN's attention, which refuses base.yml's all-gather context parallelism:
    its files with cp above 1 do not start.  A QA pass found `plan --framework maxtext` at 32K tokens offering cp 2
    and cp 4 layouts (5th and 6th) and `evaluate --framework maxtext --cp 2` pricing one; now the plan keeps cp 1 and
    evaluate refuses, naming the rule and --cp 1."""
    job = ["--model", "gpt-oss-120b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch", "64", "--seq-len",
           "32768", "--framework", "maxtext"]
    got = CliRunner().invoke(main, ["evaluate", *job, "--cp", "2", "--tp", "1", "--ep", "1", "--zero", "3", "--mbs",
                                    "1", "--recompute", "full"])
    assert got.exit_code == 2, got.output
    assert "cp 2: model_name gpt-oss-120b trains attention sinks" in got.output and "(--cp 1)" in got.output
    assert "Traceback" not in got.output
    got = CliRunner().invoke(main, ["plan", *job, "--top-k", "8", "--json"])
    assert got.exit_code == 0, got.output
    plans = json.loads(got.stdout)["plans"]
    assert len(plans) == 8 and all(p["layout"]["cp"] == 1 for p in plans)
