"""A Megatron-Bridge config with torch FSDP2 (dist.use_torch_fsdp2) beside the distributed optimizer or gradient
accumulation fusion does not train, and Bridge's validation does not say so (training/config.py checks only
use_megatron_fsdp beside it): Megatron-Core's DistributedOptimizer takes its shards from Megatron DDP's gradient
buffers, which TorchFullyShardedDataParallel has none of, so its Adam holds no parameter (and through Megatron-Core
0.17 the first step calls start_param_sync, which the FSDP2 wrapper lacks); Transformer Engine's fused wgrad
accumulation adds into weight.main_grad, which FSDP2 parameters lack.  Megatron-LM refuses both on its command line
(arguments.py:1031-1040).  A QA run: the saved GB200 Llama 3 70B config with use_torch_fsdp2 flipped on (its
use_distributed_optimizer and gradient_accumulation_fusion true) was priced as a ZeRO-3 job."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main
from tests.file_edits import edited_copy

L70 = Path(__file__).parent / "data" / "audit" / "bridge" / "llama3_70b_sft_gb200_fp8_mx_v1.yaml"
JOB = ("--model", "llama3-70b", "--cluster", "gb200-nvl72", "--gpus", "32")


def _write(tmp_path: Path, *replace: tuple[str, str]) -> Path:
    return edited_copy(L70, tmp_path, (("  use_torch_fsdp2: false", "  use_torch_fsdp2: true"), *replace))


def _run(path: Path, *extra: str):
    return CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), *JOB, *extra, "--json"])


def test_fsdp2_with_the_distributed_optimizer_is_refused(tmp_path: Path) -> None:
    result = _run(_write(tmp_path))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "use_torch_fsdp2: true" in result.output and "use_distributed_optimizer: true" in result.output
    assert "use_distributed_optimizer to false" in result.output


def test_fsdp2_with_gradient_accumulation_fusion_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, ("  use_distributed_optimizer: true", "  use_distributed_optimizer: false"))
    result = _run(path)
    assert result.exit_code == 2, result.output
    assert "gradient_accumulation_fusion: true" in result.output and "main_grad" in result.output
    assert "gradient_accumulation_fusion to false" in result.output


def test_fsdp2_without_either_is_priced_at_zero_3(tmp_path: Path) -> None:
    path = _write(tmp_path, ("  use_distributed_optimizer: true", "  use_distributed_optimizer: false"),
                  ("  gradient_accumulation_fusion: true", "  gradient_accumulation_fusion: false"))
    result = _run(path)
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["layout"]["zero_stage"] == 3


OVERRIDE = L70.parent / "llama3_8b_pretrain_override_example_megatron_fsdp.yaml"
JOB_8B = ("--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8")


def _override(tmp_path: Path, *extra: tuple[str, str]) -> Path:
    """The Megatron-FSDP override example turned to torch FSDP2, its distributed optimizer left to the recipe."""
    return edited_copy(OVERRIDE, tmp_path, (("use_megatron_fsdp: true", "use_megatron_fsdp: false"),
                                        ("use_torch_fsdp2: false", "use_torch_fsdp2: true"), *extra))


def _run_8b(path: Path, *extra: str):
    return CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), *JOB_8B, *extra, "--json"])


def test_fsdp2_override_over_the_recipes_distributed_optimizer_is_refused(tmp_path: Path) -> None:
    """An override that turns FSDP2 on and leaves use_distributed_optimizer to the recipe runs the recipe's true
    (recipes/common.py:87, utils/optimizer_utils.py:150), which Bridge neither fixes nor refuses: a QA run priced it
    as a ZeRO-3 job."""
    result = _run_8b(_override(tmp_path))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "ddp.use_distributed_optimizer: the recipe's" in result.output
    assert "optimizer.use_distributed_optimizer: the recipe's" in result.output


def test_fsdp2_override_turning_one_config_off_is_still_refused(tmp_path: Path) -> None:
    """Bridge turns both configs' distributed optimizer on where either is true (training/config.py
    _validate_and_sync_distributed_optimizer_settings): ddp's false beside the recipe's optimizer true runs it."""
    path = _override(tmp_path, ("ddp:\n", "ddp:\n  use_distributed_optimizer: false\n"))
    result = _run_8b(path)
    assert result.exit_code == 2, result.output
    assert "optimizer.use_distributed_optimizer: the recipe's" in result.output
    assert "use_distributed_optimizer: false (Megatron-Bridge turns it back on" in result.output


def test_fsdp2_override_over_the_recipes_accumulation_fusion_is_refused(tmp_path: Path) -> None:
    """With both distributed optimizers off, the recipe's model provider still fuses the weight-gradient
    accumulation wherever Transformer Engine imports (models/gpt_provider.py:206)."""
    path = _override(tmp_path, ("ddp:\n", "ddp:\n  use_distributed_optimizer: false\n"),
                     ("optimizer:\n", "optimizer:\n  use_distributed_optimizer: false\n"))
    result = _run_8b(path)
    assert result.exit_code == 2, result.output
    assert "model.gradient_accumulation_fusion: the recipe's" in result.output and "main_grad" in result.output


def test_fsdp2_override_stating_all_three_off_is_priced_at_zero_3(tmp_path: Path) -> None:
    path = _override(tmp_path, ("ddp:\n", "ddp:\n  use_distributed_optimizer: false\n"),
                     ("optimizer:\n", "optimizer:\n  use_distributed_optimizer: false\n"),
                     ("model:\n", "model:\n  gradient_accumulation_fusion: false\n"))
    result = _run_8b(path)
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["layout"]["zero_stage"] == 3


WITHOUT_BUFFER_PASSES = ("--grad-buffer-passes", "0")
"""The change-list tests price without Megatron-Core's gradient-buffer passes, at which the best plan keeps the
distributed optimizer (with them, Megatron-FSDP's ZeRO-2, whose own buffer passes placement does not price, comes
out a few milliseconds ahead): what they test is the fields the list names."""


def _changes(result) -> dict[str, dict]:
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    assert out["best"]["layout"]["zero_stage"] < 2
    return {c["argument"]: c for c in out["changes"]}


def test_a_best_plan_without_fsdp_turns_the_configs_fsdp2_off(tmp_path: Path) -> None:
    """The best plan of a saved FSDP2 config, ZeRO-1, turns the distributed optimizer on and must turn FSDP2 off: a
    QA run's change list kept dist.use_torch_fsdp2 true beside use_distributed_optimizer true, the config this audit
    refuses."""
    path = _write(tmp_path, ("  use_distributed_optimizer: true", "  use_distributed_optimizer: false"),
                  ("  gradient_accumulation_fusion: true", "  gradient_accumulation_fusion: false"))
    changes = _changes(_run(path, *WITHOUT_BUFFER_PASSES))
    assert changes["ddp.use_distributed_optimizer"]["to"] == "true"
    assert changes["dist.use_torch_fsdp2"]["from"] == "true" and changes["dist.use_torch_fsdp2"]["to"] == "false"


def test_a_best_plan_without_fsdp_drops_megatron_lms_fsdp2(tmp_path: Path) -> None:
    """The same for a Megatron-LM script: --use-distributed-optimizer beside a kept --use-torch-fsdp2 is refused at
    start (arguments.py:1038)."""
    script = tmp_path / "train.sh"
    script.write_text(
        "torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --tensor-model-parallel-size 1 "
        "--pipeline-model-parallel-size 1 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --swiglu "
        "--ffn-hidden-size 14336 --group-query-attention --num-query-groups 8 --seq-length 4096 --micro-batch-size 1 "
        "--global-batch-size 8 --bf16 --use-torch-fsdp2 --no-gradient-accumulation-fusion "
        "--untie-embeddings-and-output-weights\n")
    changes = _changes(_run_8b(script, *WITHOUT_BUFFER_PASSES))
    assert changes["--use-distributed-optimizer"]["to"] is not None
    assert changes["--use-torch-fsdp2"]["from"] is not None and changes["--use-torch-fsdp2"]["to"] is None


def test_a_negated_flag_is_named_in_the_configs_own_fields(tmp_path: Path) -> None:
    """The best plan's --no-align-param-gather names the config's comm_overlap.align_param_gather, which Bridge writes
    over ddp's (comm_overlap.py _get_optimizer_overlap_cfgs): a QA run listed it in Megatron-LM's spelling with 'no
    field of this name', though the saved config has both fields."""
    from placement.audit.changes import bridge_changes

    path = _write(tmp_path, ("  use_distributed_optimizer: true", "  use_distributed_optimizer: false"),
                  ("  gradient_accumulation_fusion: true", "  gradient_accumulation_fusion: false"))
    changes = _changes(_run(path, *WITHOUT_BUFFER_PASSES))
    assert "--no-align-param-gather" not in changes
    assert changes["comm_overlap.align_param_gather"]["from"] == "null"
    assert changes["comm_overlap.align_param_gather"]["to"] == "false"
    p2p = bridge_changes([{"argument": "--no-overlap-p2p-communication", "from": None, "to": "true"}],
                         {"comm_overlap.overlap_p2p_comm": "null", "model.overlap_p2p_comm": "true"})
    assert {(c["argument"], c["from"], c["to"]) for c in p2p} == {
        ("comm_overlap.overlap_p2p_comm", "null", "false"), ("model.overlap_p2p_comm", "true", "false")}
