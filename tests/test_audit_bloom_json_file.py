"""BLOOM's launch read two ways: BigScience's tr11-176B-ml.slurm alone (its DeepSpeed JSON read from the here-document
that writes it) and beside the same JSON as a --launch file of its own, as a user who has the job's ds_config.json
passes it.  A QA run priced the first 95.59 s and the second 92.56 s: the JSON's own reading took DeepSpeed 0.17.6's
bf16 gradient buffer (it cannot tell DeepSpeed's version; the script's BigScience flags say the fork of 2022, whose
BF16_Optimizer kept it in fp32), placement's emitted 50,000,000-element bucket with the source "the ds_config.json
placement writes" (ZeRO-0's engine all-reduces MEMORY_OPT_ALLREDUCE_SIZE, 500,000,000, at a time), and the script
alone Megatron's overlapped weight gather, which DeepSpeed's optimizer runs inside step()."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

SCRIPT = Path(__file__).parent / "data" / "audit" / "bloom" / "tr11-176B-ml.slurm"
ARGS = ["--model", "bloom-176b", "--cluster", "jean-zay-a100-80g", "--gpus", "384", "--json"]


def _here_document_json(tmp_path: Path) -> Path:
    """The JSON the script's here-document writes, its shell variables as the script sets them."""
    text = SCRIPT.read_text()
    body = text.split("cat <<EOT > $config_json\n", 1)[1].split("\nEOT", 1)[0]
    values = {"$MICRO_BATCH_SIZE": "2", "$GLOBAL_BATCH_SIZE": "2048", "$ZERO_STAGE": "0"}
    for name, value in values.items():
        assert f"{name.lstrip('$')}={value}" in text.replace(" ", "")
        body = body.replace(name, value)
    path = tmp_path / "ds_config.json"
    path.write_text(body)
    json.loads(body)
    return path


def _estimate(*launch: Path) -> dict:
    args = ["audit", *(x for p in launch for x in ("--launch", str(p))), *ARGS]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["estimate"]


def test_the_json_as_a_file_of_its_own_prices_what_the_here_document_does(tmp_path: Path) -> None:
    alone = _estimate(SCRIPT)
    both = _estimate(SCRIPT, _here_document_json(tmp_path))
    assert both["step_time_s"] == alone["step_time_s"]
    keys = ("grad_accumulation", "ddp_bucket_params", "param_gather_overlap", "grad_all_reduce")
    assert {k: both["recipe"].get(k) for k in keys} == {k: alone["recipe"].get(k) for k in keys}
    assert alone["recipe"]["grad_accumulation"] == "fp32_copy"
    assert alone["recipe"]["ddp_bucket_params"] == 500_000_000
    assert alone["recipe"]["param_gather_overlap"] is False
    assert "placement writes" not in both["recipe_sources"]["ddp_bucket_params"]
    assert "MEMORY_OPT_ALLREDUCE_SIZE" in both["recipe_sources"]["ddp_bucket_params"]
