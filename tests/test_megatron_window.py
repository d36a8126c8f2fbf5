"""Sliding-window attention in Megatron's files: Megatron-Core windows every layer without --window-attn-skip-freq,
layer l (from 1) where l % N != 0 with N, and a list's 1s (transformer/utils.py is_layer_window_attention).  A user
trial: Mistral's file (every layer windowed) passed --window-attn-skip-freq 1, under which no layer has the window,
while its header priced all 32 windowed, and the audit of the file agreed (22.084 s; 35.441 s with full attention)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.audit.readers.megatron import layer_pattern
from placement.catalog import load_model
from placement.cli import main
from placement.emit.megatron import window_skip_args

MISTRAL = Path(__file__).parent / "data" / "hf" / "mistral-7b-v0.1" / "config.json"


def _windowed(args: list[str], layers: int) -> int:
    """Megatron-Core's count of windowed layers for these arguments."""
    if not args:
        return layers
    text = args[1]
    if text.isdigit():
        return sum(1 for n in range(1, layers + 1) if n % int(text))
    return sum(layer_pattern(text, layers, args[0], "test"))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 128).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))))
def test_the_skip_argument_windows_exactly_the_models_windowed_layers(shape):
    layers, windowed = shape
    model = load_model("gpt-oss-120b").model_copy(update={"num_layers": layers, "sliding_window_layers": windowed})
    assert _windowed(window_skip_args(model), layers) == windowed


def test_mistrals_file_windows_every_layer_and_audits_to_its_header(tmp_path):
    result = CliRunner().invoke(main, ["evaluate", "--model", str(MISTRAL), "--gpus", "8", "--seq-len", "32768",
                                       "--global-batch", "64", "--tp", "1", "--cp", "4", "--zero", "1", "--recompute",
                                       "none", "--emit", "megatron", "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    priced = json.loads(result.stdout)["step_time_s"]
    words = shlex.split((tmp_path / "megatron.sh").read_text(), comments=True)
    assert "--window-size" in words and "--window-attn-skip-freq" not in words
    audit = CliRunner().invoke(main, ["audit", "--model", str(MISTRAL), "--gpus", "8", "--launch",
                                      str(tmp_path / "megatron.sh"), "--json"])
    assert audit.exit_code in (0, 1), audit.output
    estimate = json.loads(audit.stdout)["estimate"]
    assert estimate["step_time_s"] == pytest.approx(priced, rel=1e-6)


def test_a_file_whose_skip_frequency_drops_the_window_trains_another_model(tmp_path):
    text = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
            "--group-query-attention --num-query-groups 8 --ffn-hidden-size 14336 --swiglu --seq-length 32768 "
            "--max-position-embeddings 32768 --micro-batch-size 1 --global-batch-size 64 --bf16 "
            "--context-parallel-size 4 --use-distributed-optimizer --position-embedding-type rope "
            "--normalization RMSNorm --disable-bias-linear --untie-embeddings-and-output-weights "
            "--window-size 4095,0 --window-attn-skip-freq 1\n")
    (tmp_path / "train.sh").write_text(text)
    result = CliRunner().invoke(main, ["audit", "--model", str(MISTRAL), "--gpus", "8", "--launch",
                                       str(tmp_path / "train.sh")])
    assert result.exit_code == 2, result.output
    assert "sliding_window_layers = 0" in result.output and "has 32" in result.output


def test_a_huge_pattern_is_refused_before_it_is_built():
    """`[1]*1000000000` is refused as a pattern longer than any model, without building the list first (8 GB)."""
    import subprocess
    import sys

    # (the peak the call itself allocates, traced: a child's ru_maxrss starts at its parent's, pytest's, size)
    code = ("import tracemalloc\nfrom placement.audit.readers.megatron import layer_pattern\ntracemalloc.start()\n"
            "try:\n    layer_pattern('[1]*1000000000', 48, '--window-attn-skip-freq', 'f:1')\n"
            "except Exception as e:\n    print(type(e).__name__)\n"
            "print(tracemalloc.get_traced_memory()[1])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "InputError" and int(out[1]) < 2**20  # bytes: under 1 MiB, not the 8 GB list
