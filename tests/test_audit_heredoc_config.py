"""A DeepSpeed config a launch script writes with a here-document and passes as --deepspeed_config (Megatron-DeepSpeed's
examples_deepspeed/*.sh: `cat <<EOT > $DS_CONFIG ... EOT`, then `--deepspeed_config=$DS_CONFIG`).  A QA run: the audit
said the JSON was "not among the --launch files" and priced the job from the script's flags, though the file exists
only when the script runs; the universal-checkpointing example's `grad_accum_dtype fp32` went unpriced.  The
here-document's text, as bash writes it, is now read as that JSON, each value's source the script line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

GPT350M = ("name: gpt-350m\nnum_layers: 24\nhidden_size: 1024\nffn_hidden_size: 4096\nffn_kind: gelu\n"
           "normalization: layernorm\nposition_embedding: learned\nlinear_bias: true\nnum_attention_heads: 32\n"
           "vocab_size: 50257\ntied_embeddings: true\ndropout: true\ndefault_seq_len: 1024\n"
           "default_global_batch: 16\n")
# Megatron-DeepSpeed examples_deepspeed/universal_checkpointing/megatron_gpt/run_bf16.sh (4efb479d), cut down: its
# here-document sets data_types.grad_accum_dtype fp32, which the script's flags do not say
SCRIPT = """#!/bin/bash
DS_CONFIG=./ds_config.json
ZERO_STAGE=1
TP=2
PP=2
DP=2
WORLD_SIZE=$((TP*PP*DP))
GLOBAL_BATCH=16
MICRO_BATCH=$((GLOBAL_BATCH/WORLD_SIZE))

cat <<EOT > $DS_CONFIG
{
  "train_batch_size" : $GLOBAL_BATCH,
  "train_micro_batch_size_per_gpu": $MICRO_BATCH,
  "steps_per_print": 1,

  "zero_optimization": {
    "stage": $ZERO_STAGE
  },

  "bf16": {
    "enabled": true
  },

  "data_types": {
        "grad_accum_dtype": "fp32"
  },

  "wall_clock_breakdown" : false
}
EOT

deepspeed --num_nodes 1 --num_gpus $WORLD_SIZE pretrain_gpt.py \\
    --tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP \\
    --num-layers 24 --hidden-size 1024 --num-attention-heads 32 --seq-length 1024 --max-position-embeddings 1024 \\
    --micro-batch-size $MICRO_BATCH --global-batch-size $GLOBAL_BATCH --bf16 \\
    --deepspeed --deepspeed_config=${DS_CONFIG} --zero-stage=${ZERO_STAGE}
"""


def _audit(*argv: str):
    return CliRunner().invoke(main, ["audit", *argv])


def _bash_writes(script: Path, tmp: Path) -> Path:
    """Run `script`'s lines up to its launch under bash (the launch is the last command): the JSON it writes."""
    lines = script.read_text().split("\ndeepspeed ")[0] + "\n"
    run = tmp / "bash_run"
    run.mkdir()
    (run / "s.sh").write_text(lines)
    subprocess.run([shutil.which("bash"), "s.sh"], cwd=run, check=True, capture_output=True, timeout=60)
    return run / "ds_config.json"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_heredoc_config_is_priced_as_the_json_bash_writes(tmp_path):
    (tmp_path / "m.yaml").write_text(GPT350M)
    script = tmp_path / "run_bf16.sh"
    script.write_text(SCRIPT)
    written = _bash_writes(script, tmp_path)
    alone = _audit("--model", str(tmp_path / "m.yaml"), "--gpus", "8", "--launch", str(script), "--json")
    given = _audit("--model", str(tmp_path / "m.yaml"), "--gpus", "8", "--launch", str(script), "--launch",
                   str(written), "--json")
    assert alone.exit_code in (0, 1), alone.output
    assert given.exit_code in (0, 1), given.output
    a, g = json.loads(alone.stdout), json.loads(given.stdout)
    # the JSON's BF16_Optimizer with its fp32 buffer (grad_accum_dtype fp32 at ZeRO-1), as with the file bash writes
    assert a["estimate"]["recipe"]["grad_accumulation"] == g["estimate"]["recipe"]["grad_accumulation"] == "fp32_copy"
    for key in ("step_time_s", "peak_memory_bytes"):
        assert a["estimate"][key] == g["estimate"][key], key
    assert not any("not among the --launch" in x for x in a["layout"]["ignored"])
    # each value cites the script line it was written on and where its variable was set
    lines = SCRIPT.splitlines()
    body = next(n for n, x in enumerate(lines, 1) if '"train_micro_batch_size_per_gpu": $MICRO_BATCH' in x)
    assigned = next(n for n, x in enumerate(lines, 1) if x.startswith("MICRO_BATCH="))
    source = a["layout"]["sources"]["micro_batch_size"]
    assert source.startswith(f"{script}:{body}: ") and f"{script}:{assigned}: MICRO_BATCH=" in source
    assert "here-document" in source and a["layout"]["micro_batch_size"] == 2


def test_the_script_writes_it_each_run_so_audit_out_writes_no_json(tmp_path):
    """An HF Trainer job, which runs its own program: its JSON, written by the script at each run, is not written back
    (there is no file to apply the changes to); the note says where to make them."""
    (tmp_path / "run.sh").write_text("cat > ds.json <<EOF\n{\"train_micro_batch_size_per_gpu\": \"auto\", "
                                     "\"gradient_accumulation_steps\": \"auto\", \"zero_optimization\": "
                                     "{\"stage\": 3}, \"bf16\": {\"enabled\": \"auto\"}}\nEOF\n"
                                     "deepspeed --num_gpus 8 run_clm.py --deepspeed ds.json "
                                     "--per_device_train_batch_size 2 --bf16 --block_size 4096\n")
    result = _audit("--model", "llama3-8b", "--gpus", "8", "--launch", str(tmp_path / "run.sh"), "--out",
                    str(tmp_path / "out"))
    assert result.exit_code in (0, 1), result.output
    assert not (tmp_path / "out" / "ds_config.json").exists()
    assert "the here-document its script writes at each run" in result.stderr


def test_a_value_the_files_leave_open_under_a_read_key_is_an_error(tmp_path):
    (tmp_path / "m.yaml").write_text(GPT350M)
    (tmp_path / "run.sh").write_text(SCRIPT.replace('"stage": $ZERO_STAGE', '"stage": $STAGE_FROM_ENV'))
    result = _audit("--model", str(tmp_path / "m.yaml"), "--gpus", "8", "--launch", str(tmp_path / "run.sh"))
    assert result.exit_code == 2, result.output
    assert "zero_optimization.stage" in result.output and "$STAGE_FROM_ENV" in result.output
    assert "--env" in result.output and "Traceback" not in result.output


def test_a_quoted_delimiter_writes_the_text_unexpanded(tmp_path):
    """`<<'EOT'` expands nothing (bash(1) Here Documents): DeepSpeed gets `$GLOBAL_BATCH` and its batch check fails."""
    (tmp_path / "m.yaml").write_text(GPT350M)
    (tmp_path / "run.sh").write_text(SCRIPT.replace("cat <<EOT", "cat <<'EOT'"))
    result = _audit("--model", str(tmp_path / "m.yaml"), "--gpus", "8", "--launch", str(tmp_path / "run.sh"))
    assert result.exit_code == 2, result.output
    assert "train_batch_size must be a JSON integer, got '$GLOBAL_BATCH,'" in result.output


def test_a_heredoc_to_another_file_is_not_the_config(tmp_path):
    (tmp_path / "m.yaml").write_text(GPT350M)
    (tmp_path / "run.sh").write_text(SCRIPT.replace("cat <<EOT > $DS_CONFIG", "cat <<EOT > other.json"))
    result = _audit("--model", str(tmp_path / "m.yaml"), "--gpus", "8", "--launch", str(tmp_path / "run.sh"),
                    "--json")
    assert result.exit_code in (0, 1), result.output
    assert any("not among the --launch files" in x for x in json.loads(result.stdout)["layout"]["ignored"])


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_heredoc_text_is_what_bash_writes(tmp_path):
    from placement.audit.shell import read_script

    script = tmp_path / "h.sh"
    script.write_text('X=1\nY=two\nOUT=a.json\ncat <<EOT > $OUT\n"a": $X, "b": "${Y}", "c": $(( X * 3 )), '
                      '"d": "\\$X \\\\ \\" ${Z:-7}"\n  end\nEOT\ncat > b.json <<\'EOF\'\n{"a": $X}\nEOF\n'
                      '\tcat <<-EOT >c.json\n\tx $X\n\tEOT\ntee d.json <<EOT >/dev/null\n$Y\nEOT\n')
    run = tmp_path / "run"
    run.mkdir()
    subprocess.run([shutil.which("bash"), str(script)], cwd=run, check=True, capture_output=True, timeout=60)
    docs = read_script(script).heredocs
    assert [d.target.text for d in docs] == ["a.json", "b.json", "c.json", "d.json"]
    for doc in docs:
        assert doc.text == (run / doc.target.text).read_text(), doc.target.text
        assert not doc.unresolved and not doc.append
    assert [line.origin.line for line in docs[0].lines[:2]] == [5, 6]
