"""A Megatron-LM launch without --global-batch-size trains one micro-batch per data-parallel rank per step
(megatron/training/arguments.py validate_args: global_batch_size = micro_batch_size x data_parallel_size): the audit
prices that batch, says so, and never the catalog model's default (which a user trial saw priced as 1024 sequences,
512 micro-batches, and a change list that multiplied the training batch by 512)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

SCRIPT = Path(__file__).parent / "data" / "audit" / "megatron" / "train_gpt3_175b_distributed.sh"


def _without_batch(tmp_path: Path) -> Path:
    text = SCRIPT.read_text()
    assert "    --global-batch-size 1536 \n" in text
    out = tmp_path / "no_gbs.sh"
    for line in ("    --global-batch-size 1536 \n", "    --rampup-batch-size 16 16 5859375 \n"):
        text = text.replace(line, "")
    out.write_text(text)
    return out


def test_no_global_batch_size_is_micro_batch_times_dp(tmp_path: Path) -> None:
    path = _without_batch(tmp_path)
    out = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), "--model", "gpt3-175b",
                                    "--cluster", "dgx-a100-80g", "--gpus", "1024", "--json"], catch_exceptions=False)
    assert out.exit_code in (0, 1), out.stderr
    data = json.loads(out.stdout)
    # tp 8 x pp 16 on 1024 GPUs: dp 8, micro-batch 1
    assert data["estimate"]["global_batch"] == 8
    assert "Megatron-LM's micro-batch 1 x dp 8" in data["layout"]["sources"]["global_batch"]
    # a best plan of another dp states the batch it keeps: the job's 8, never the catalog's default
    assert all(c["to"] == "8" for c in data["changes"] if c["argument"] == "--global-batch-size")


def test_a_layout_the_derived_batch_cannot_run_names_the_batch(tmp_path: Path) -> None:
    path = _without_batch(tmp_path)
    text = path.read_text().replace("--pipeline-model-parallel-size 16 ", "--pipeline-model-parallel-size 16 "
                                    "--num-layers-per-virtual-pipeline-stage 3 ")
    path.write_text(text)
    out = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "gpt3-175b", "--cluster", "dgx-a100-80g",
                                    "--gpus", "1024"])
    assert out.exit_code == 2
    assert "global batch 8: no --global-batch-size" in out.output and "interleaving needs micro-batches" in out.output


def test_a_change_of_virtual_pipeline_drops_the_files_own_flag(tmp_path: Path) -> None:
    """Megatron-LM takes one of --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank and
    --pipeline-model-parallel-layout: a change list that writes one removes the one the files state."""
    text = SCRIPT.read_text().replace("--pipeline-model-parallel-size 16 ",
                                      "--pipeline-model-parallel-size 16 --num-layers-per-virtual-pipeline-stage 2 ")
    path = tmp_path / "vpp.sh"
    path.write_text(text)
    out = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), "--model", "gpt3-175b",
                                    "--cluster", "dgx-a100-80g", "--gpus", "1024", "--json"], catch_exceptions=False)
    assert out.exit_code in (0, 1), out.stderr
    changes = json.loads(out.stdout)["changes"]
    written = [c for c in changes if c["argument"] in ("--num-virtual-stages-per-pipeline-rank",
                                                       "--pipeline-model-parallel-layout") and c["to"] is not None]
    assert written, changes  # this job's best plan interleaves otherwise
    [dropped] = [c for c in changes if c["argument"] == "--num-layers-per-virtual-pipeline-stage"]
    assert dropped["from"] == "2" and dropped["to"] is None and "validate_args" in dropped["note"]
