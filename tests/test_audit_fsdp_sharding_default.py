"""The ZeRO stage of an FSDP job is the one its framework runs: torch FSDP2 shards weights, gradients and optimizer
state whatever data_parallel_sharding_strategy says (Megatron-Core's TorchFullyShardedDataParallel never reads it),
and a Megatron-Bridge config that turns Megatron-FSDP on without the strategy runs its section's default (a saved
config: Megatron-Core's no_shard) or its recipe's (an override), each source saying so (QA runs: a saved GB200
Llama 3 70B config with dist.use_torch_fsdp2 true and the saved `data_parallel_sharding_strategy: no_shard` was priced
at ZeRO-0, 226.1 of 181.3 GiB "does not fit", where FSDP2 runs it at ZeRO-3; an override turning Megatron-FSDP on
was priced at ZeRO-3 citing only use_megatron_fsdp, and not named among the fields left to the recipe)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main
from tests.file_edits import edited_copy

BR = Path(__file__).parent / "data" / "audit" / "bridge"
L70 = BR / "llama3_70b_sft_gb200_fp8_mx_v1.yaml"
OVERRIDE = BR / "llama3_8b_pretrain_override_example_megatron_fsdp.yaml"


RUNNABLE_FSDP2 = (("  use_distributed_optimizer: true", "  use_distributed_optimizer: false"),
                  ("  gradient_accumulation_fusion: true", "  gradient_accumulation_fusion: false"))
"""What torch FSDP2 needs beside it in L70 (test_audit_bridge_fsdp2_refusals)."""


def _audit(path: Path, *job: str) -> dict:
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), *job, "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _edit(tmp_path: Path, source: Path, *replace: tuple[str, str]) -> Path:
    return edited_copy(source, tmp_path, replace)


def test_bridge_torch_fsdp2_is_full_sharding_whatever_the_strategy(tmp_path: Path) -> None:
    assert "  data_parallel_sharding_strategy: no_shard" in L70.read_text()
    job = ("--model", "llama3-70b", "--cluster", "gb200-nvl72", "--gpus", "32")
    ddp = _audit(L70, *job)
    fsdp2 = _audit(_edit(tmp_path, L70, ("  use_torch_fsdp2: false", "  use_torch_fsdp2: true"), *RUNNABLE_FSDP2), *job)
    assert ddp["layout"]["zero_stage"] == 1
    assert fsdp2["layout"]["zero_stage"] == 3
    source = fsdp2["layout"]["sources"]["zero_stage"]
    assert "use_torch_fsdp2: true" in source and "FSDP2 does not read" in source
    assert fsdp2["estimate"]["memory"]["weights_bytes"] < ddp["estimate"]["memory"]["weights_bytes"]


def test_megatron_lm_torch_fsdp2_ignores_the_megatron_fsdp_strategy(tmp_path: Path) -> None:
    base = ("torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py --tensor-model-parallel-size 1 "
            "--pipeline-model-parallel-size 1 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
            "--swiglu --ffn-hidden-size 14336 --group-query-attention --num-query-groups 8 --seq-length 4096 "
            "--micro-batch-size 1 --global-batch-size 256 --bf16 --use-torch-fsdp2 --no-gradient-accumulation-fusion "
            "--untie-embeddings-and-output-weights")
    job = ("--model", "llama3-8b", "--gpus", "64", "--cluster", "dgx-h100")
    stages = {}
    for name, extra in (("no_shard", " --data-parallel-sharding-strategy no_shard"),
                        ("no_reshard", " --torch-fsdp2-no-reshard-after-forward --data-parallel-sharding-strategy "
                                       "no_shard")):
        script = tmp_path / f"{name}.sh"
        script.write_text(base + extra + "\n")
        out = _audit(script, *job)
        stages[name] = (out["layout"]["zero_stage"], out["layout"]["sources"]["zero_stage"])
    assert stages["no_shard"][0] == 3 and "FSDP2 does not read" in stages["no_shard"][1]
    assert stages["no_reshard"][0] == 2 and "--torch-fsdp2-no-reshard-after-forward" in stages["no_reshard"][1]


def test_a_saved_ddp_section_without_the_strategy_runs_megatron_cores_no_shard(tmp_path: Path) -> None:
    path = _edit(tmp_path, L70, ("  use_megatron_fsdp: false", "  use_megatron_fsdp: true"),
                 ("  data_parallel_sharding_strategy: no_shard\n", ""), ("  load: /opt/", "  load: null #"))
    out = _audit(path, "--model", "llama3-70b", "--cluster", "gb200-nvl72", "--gpus", "32")
    assert out["layout"]["zero_stage"] == 0
    assert "Megatron-Core's default no_shard" in out["layout"]["sources"]["zero_stage"]


def test_an_override_leaves_the_strategy_to_its_recipe_and_says_so(tmp_path: Path) -> None:
    path = _edit(tmp_path, OVERRIDE, ('  data_parallel_sharding_strategy: "optim_grads_params" # for Megatron FSDP '
                                      'ZeRO-3 like sharding\n', ""))
    out = _audit(path, "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8")
    assert out["layout"]["zero_stage"] == 3
    assert "the recipe's, priced at optim_grads_params" in out["layout"]["sources"]["zero_stage"]
    unread = next(f for f in out["findings"] if f["kind"] == "base_config_unread")
    assert "zero_stage 3" in unread["message"]
    stated = _audit(OVERRIDE, "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8")
    assert "zero_stage 3" not in next(f for f in stated["findings"] if f["kind"] == "base_config_unread")["message"]
