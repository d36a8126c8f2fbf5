"""The DeepSpeed hostfile a script writes with a here-document before its launch (`cat > hostfile <<EOF` ...
`deepspeed --hostfile hostfile ...`) is the job's hostfile: a QA trial's two hosts of 8 slots written so were priced
on the catalog cluster's default 1,024 GPUs (and refused for a batch that did not divide them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.audit.launch import parse_launch

ARGS = ("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 --num-layers 32 --hidden-size 4096 "
        "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
        "--global-batch-size 64 --bf16 --no-pipeline-parallel")
CONFIG = ('{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8, "bf16": {"enabled": true}, '
          '"zero_optimization": {"stage": 1}}')


def _read(tmp_path: Path, writes: str, flag: str = "--hostfile hostfile"):
    config = tmp_path / "ds.json"
    config.write_text(CONFIG)
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n{writes}deepspeed {flag} pretrain_gpt.py {ARGS} --deepspeed "
                      f"--deepspeed_config ds.json\n")
    return parse_launch([script, config])


@pytest.mark.parametrize("flag", ["--hostfile hostfile", "--hostfile=./hostfile", "-H hostfile"])
def test_the_hostfile_the_script_writes_is_read(tmp_path: Path, flag: str) -> None:
    lay = _read(tmp_path, "cat > hostfile <<EOF\nnodeA slots=8\nnodeB slots=8\nEOF\n", flag)
    assert lay.world_size == 16 and lay.hosts == ("nodeA", "nodeB")
    assert lay.sources["hosts"].startswith(f"{tmp_path / 'job.sh'}:3: nodeA slots=8 (line 1 of the hostfile ")


@pytest.mark.parametrize(("writes", "why"), [
    ("cat >> hostfile <<EOF\nnodeA slots=8\nEOF\n", "adds a here-document to it"),
    ("cat > hostfile <<EOF\n$(hostname) slots=8\nEOF\n", "its line 1 holds"),
])
def test_a_hostfile_the_files_do_not_fix_is_not_read(tmp_path: Path, writes: str, why: str) -> None:
    lay = _read(tmp_path, writes)
    assert lay.world_size is None and not lay.hosts
    assert any("the DeepSpeed hostfile hostfile" in x and why in x for x in lay.ignored), lay.ignored
