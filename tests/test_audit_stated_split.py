"""An uneven pipeline split a Megatron launch states with --decoder-first/last-pipeline-num-layers (Megatron-Bridge:
model.num_layers_in_first/last_pipeline_stage) is priced as Megatron-Core builds it: the stated ranks their counts,
the others the layers left over in equal shares, each rank's count dealt over its model chunks (megatron-core
transformer_block.py get_num_layers_to_build).  A user trial: 6 / 6 on pp 4 of Llama 3 8B's 32 layers was priced
8/8/8/8 with an info line (the busiest rank runs 10), the same split written as --pipeline-model-parallel-layout
was priced 6/10/10/6, and a lone --decoder-first-pipeline-num-layers 15 on pp 2 was priced 16/16 with no word.

Expected splits are Megatron's rule computed here, not read from the audit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

LAYERS = 32  # llama3-8b
SCRIPT = """#!/bin/bash
torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py \\
  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 \\
  --group-query-attention --num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 \\
  --position-embedding-type rope --rotary-base 500000 --swiglu --normalization RMSNorm \\
  --untie-embeddings-and-output-weights --disable-bias-linear --use-rope-scaling --rope-scaling-factor 8 \\
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size {pp} --sequence-parallel \\
  --micro-batch-size 1 --global-batch-size 128 --bf16 {split}
"""
COMMON = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--json"]


def _megatron_split(pp: int, first: int | None, last: int | None) -> list[int]:
    """Layers per pipeline rank as get_num_layers_to_build deals them."""
    left = pp - (first is not None) - (last is not None)
    middle = (LAYERS - (first or 0) - (last or 0)) // left
    ranks = [middle] * pp
    if first is not None:
        ranks[0] = first
    if last is not None:
        ranks[-1] = last
    return ranks


def _audit(path: Path) -> dict:
    out = CliRunner().invoke(main, ["audit", "--launch", str(path), *COMMON])
    assert out.exit_code in (0, 1), out.output[-1500:]
    return json.loads(out.stdout)


def _script(tmp_path: Path, name: str, pp: int, split: str) -> Path:
    path = tmp_path / name
    path.write_text(SCRIPT.format(pp=pp, split=split), encoding="utf-8")
    return path


@pytest.mark.parametrize(("pp", "vpp", "first", "last"), [(4, 1, 6, 6), (2, 1, 15, None), (4, 1, None, 5),
                                                          (4, 2, 6, 6)])
def test_the_stated_split_is_the_one_priced(tmp_path: Path, pp: int, vpp: int, first, last) -> None:
    flags = (f"--decoder-first-pipeline-num-layers {first} " if first is not None else "") + (
        f"--decoder-last-pipeline-num-layers {last}" if last is not None else "")
    virtual = f" --num-virtual-stages-per-pipeline-rank {vpp}" if vpp > 1 else ""
    data = _audit(_script(tmp_path, "split.sh", pp, flags + virtual))
    ranks = _megatron_split(pp, first, last)
    est = data["estimate"]
    assert est["layout"]["rank_layers"] == ranks
    assert "stage_split_differs" not in {f["kind"] for f in data["findings"]}
    source = est["recipe_sources"]["pipeline_layout"]
    assert "--decoder-" in source and "get_num_layers_to_build" in source
    # the same split written as Megatron's layout string is the same job: the same price
    chunks = [ranks[r] // vpp for _ in range(vpp) for r in range(pp)]
    text = "|".join(("E" if s == 0 else "") + f"t*{n}" + ("L" if s == len(chunks) - 1 else "")
                    for s, n in enumerate(chunks))
    spelled = _audit(_script(tmp_path, "layout.sh", pp, f"--pipeline-model-parallel-layout '{text}'"))
    assert spelled["estimate"]["layout"]["rank_layers"] == ranks
    assert est["step_time_s"] == pytest.approx(spelled["estimate"]["step_time_s"], rel=1e-9)
    even = _audit(_script(tmp_path, "even.sh", pp, virtual))["estimate"]
    assert even["layout"]["rank_layers"] != ranks and even["step_time_s"] != est["step_time_s"]


def test_the_change_list_names_the_files_split_flags(tmp_path: Path) -> None:
    """The launched side spells the split as a layout internally; the change list speaks the files' flags, which a
    best plan with its own split drops, and never a layout the files do not pass."""
    data = _audit(_script(tmp_path, "split.sh", 4, "--decoder-first-pipeline-num-layers 6 "
                                                    "--decoder-last-pipeline-num-layers 6"))
    changes = {c["argument"]: c for c in data["changes"]}
    assert "--pipeline-model-parallel-layout" not in changes or changes["--pipeline-model-parallel-layout"]["from"] \
        is None
    assert data["best"]["layout"]["rank_layers"] != [6, 10, 10, 6]  # the best plan splits otherwise
    for flag in ("--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers"):
        assert changes[flag]["from"] == "6" and changes[flag]["to"] is None


def test_a_bridge_configs_stated_split_is_priced_and_changed_in_its_keys(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("model:\n  tensor_model_parallel_size: 2\n  pipeline_model_parallel_size: 4\n"
                    "  sequence_parallel: true\n  seq_length: 8192\n  num_layers_in_first_pipeline_stage: 6\n"
                    "  num_layers_in_last_pipeline_stage: 6\ntrain:\n  global_batch_size: 128\n  micro_batch_size: 1\n",
                    encoding="utf-8")
    data = _audit(path)
    assert data["estimate"]["layout"]["rank_layers"] == _megatron_split(4, 6, 6)
    changes = {c["argument"]: c for c in data["changes"]}
    assert not any("layout" in k for k in changes if changes[k]["from"] is not None)
    assert data["best"]["layout"]["rank_layers"] != [6, 10, 10, 6]
    for key in ("model.num_layers_in_first_pipeline_stage", "model.num_layers_in_last_pipeline_stage"):
        assert changes[key]["from"] == "6" and changes[key]["to"] == "null"


def test_mtp_layers_sit_in_the_last_stage_of_the_stated_split(tmp_path: Path) -> None:
    """Megatron builds the MTP layers in the last stage before the loss where no layout places them: the priced
    layout holds them there (without them a layout of the split would not hold the recipe's MTP layers)."""
    data = _audit(_script(tmp_path, "mtp.sh", 4, "--decoder-first-pipeline-num-layers 6 "
                                                  "--decoder-last-pipeline-num-layers 6 --mtp-num-layers 1"))
    est = data["estimate"]
    assert est["recipe"]["mtp_layers"] == 1 and est["recipe"]["pipeline_layout"].endswith("t*6mL")
    assert est["layout"]["rank_layers"] == _megatron_split(4, 6, 6)
