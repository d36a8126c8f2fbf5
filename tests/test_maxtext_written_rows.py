"""MaxText files write what the plan prices where MaxText can be told it: `attention: "cudnn_flash_te"` (with
`max_segments_per_seq: 32`, which MaxText 0.2.5 requires beside it under packing) for a plan priced with cuDNN's fused
attention (a user trial: the best plan's maxtext.yml of maxtext's own configs/gpu/models/mixtral_8x7b.yml dropped it,
said MaxText "cannot run" it, and ran 17.7 % slower than its plan).  A `capacity_factor` drops tokens on MaxText's
dense_matmul path only: under base.yml's sparse_matmul the job routes dropless and is priced so (a review)."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from placement.cli import main

MIXTRAL = ('base_config: "base.yml"\nmodel_name: "mixtral-8x7b"\nhardware: "gpu"\nper_device_batch_size: 12\n'
           'max_target_length: 4096\nattention: "cudnn_flash_te"\nremat_policy: "minimal_with_context"\n'
           'capacity_factor: 1.0\nmax_segments_per_seq: 32\n')
"""maxtext 0.2.5 configs/gpu/models/mixtral_8x7b.yml's layout and recipe keys."""


def _audit(path, *extra: str) -> dict:
    got = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), "--model", "mixtral-8x7b",
                                    "--cluster", "dgx-h100", "--gpus", "64", "--json", *extra])
    assert got.exit_code in (0, 1), got.output[:2000]
    return json.loads(got.stdout)


def test_the_best_plans_file_keeps_cudnn_attention(tmp_path) -> None:
    job = tmp_path / "mixtral_8x7b.yml"
    job.write_text(MIXTRAL)
    out = tmp_path / "out"
    first = _audit(job, "--out", str(out))
    # the job's capacity_factor on the sparse_matmul path drops nothing: priced dropless, and said so
    assert "recipe.moe_capacity_factor" not in first["layout"]["sources"]
    assert any(x.startswith("capacity_factor 1.0 (") and "priced dropless" in x for x in first["layout"]["ignored"])
    text = (out / "maxtext.yml").read_text()
    assert re.search(r'^attention: "cudnn_flash_te"$', text, re.M)
    assert re.search(r"^max_segments_per_seq: 32$", text, re.M)
    assert "attention_kernel flash2 (not flash)" not in text and "attention_kernel = flash, which" not in text
    # the written file, audited, runs what its header prices (the plan's step, or its own "this file runs" one)
    runs = re.search(r"^# this file runs .*?: ([\d.]+) s/step", text, re.M)
    priced = float(runs.group(1)) if runs else first["best"]["step_time_s"]
    again = _audit(out / "maxtext.yml")
    assert round(again["estimate"]["step_time_s"], 3) == round(priced, 3)


def test_an_mla_plan_keeps_maxtexts_default_attention(tmp_path) -> None:
    out = tmp_path / "dsv3"
    got = CliRunner().invoke(main, ["evaluate", "--model", "deepseek-v3", "--gpus", "256", "--tp", "1", "--pp", "1",
                                    "--ep", "32", "--cp", "1", "--mbs", "1", "--zero", "3", "--recompute", "full",
                                    "--emit", "maxtext", "--out", str(out)])
    assert got.exit_code in (0, 1), got.output[:2000]
    text = (out / "maxtext.yml").read_text()
    assert not re.search(r"^attention:", text, re.M)
    assert "attention_kernel flash2 (not flash)" in text  # priced as the default Triton kernel runs


def test_a_context_parallel_plan_keeps_maxtexts_default_attention(tmp_path) -> None:
    """MaxText's TE attention refuses packed sequences with context parallelism unless the ring load-balances
    (layers/attention_op.py), which these files do not set: a cp 2 plan keeps the default kernel, priced as it runs."""
    out = tmp_path / "cp"
    got = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "16", "--tp", "1", "--pp", "1",
                                    "--cp", "2", "--mbs", "1", "--zero", "3", "--recompute", "full",
                                    "--emit", "maxtext", "--out", str(out)])
    assert got.exit_code in (0, 1), got.output[:2000]
    text = (out / "maxtext.yml").read_text()
    assert not re.search(r"^attention:", text, re.M) and "attention_kernel flash2 (not flash)" in text
