"""A Megatron-LM log's arguments block prints a `store_false` switch under its dest: `align_param_gather ... False`
is `--no-align-param-gather`, not an unset argument (a trial: an interleaved job's log with both switches off was
priced with both on, sourced to "default"). Without an interleaved schedule validate_args prints the pipeline's two
False itself, which is no flag of the job's."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

LOG = Path(__file__).parent / "data" / "audit" / "megatron" / "train_llama3_8b_h100_fp8.log"


def _log(tmp_path: Path, values: dict[str, str]) -> Path:
    text = LOG.read_text()
    for name, value in values.items():
        text, n = re.subn(rf"^(  {name} \.+ ).*$", lambda m, v=value: m.group(1) + v, text, flags=re.M)
        assert n == 1, name
    path = tmp_path / "run.log"
    path.write_text(text)
    return path


def _audit(path: Path, gpus: int) -> dict:
    result = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                       "--gpus", str(gpus), "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_an_interleaved_log_with_the_switches_off_is_priced_with_them_off(tmp_path) -> None:
    interleaved = {"pipeline_model_parallel_size": "4", "transformer_pipeline_model_parallel_size": "4",
                   "num_virtual_stages_per_pipeline_rank": "2", "virtual_pipeline_model_parallel_size": "2",
                   "world_size": "32"}
    off = _audit(_log(tmp_path, interleaved | {"align_param_gather": "False", "overlap_p2p_comm": "False"}), 32)
    recipe, sources = off["estimate"]["recipe"], off["layout"]["sources"]
    assert recipe["align_param_gather"] is False and recipe["pp_comm_overlap"] is False
    assert re.match(r".*run\.log:\d+: align_param_gather \.+ False$", sources["recipe.align_param_gather"])
    assert re.match(r".*run\.log:\d+: overlap_p2p_comm \.+ False$", sources["recipe.pp_comm_overlap"])
    on = _audit(_log(tmp_path, interleaved | {"align_param_gather": "True", "overlap_p2p_comm": "True"}), 32)
    assert on["estimate"]["recipe"]["align_param_gather"] is True
    assert on["estimate"]["step_time_s"] < off["estimate"]["step_time_s"]


def test_a_log_without_interleaving_reads_no_switch_from_the_printed_false(tmp_path) -> None:
    data = _audit(LOG, 8)  # the file prints both False: validate_args's own, at pipeline size 1
    assert not any(k in data["layout"]["sources"] for k in ("recipe.align_param_gather", "recipe.pp_comm_overlap"))
    assert not any("--no-align-param-gather" in c["argument"] or "--no-overlap-p2p" in c["argument"]
                   for c in data["changes"] + data.get("changes_withheld", []))


def test_an_interleaved_log_of_a_megatron_before_the_switches_runs_without_them(tmp_path) -> None:
    """The block prints every argument its Megatron-LM has: one without align_param_gather and overlap_p2p_comm
    (core_r0.8.0 has neither line of the first) ran a version without aligned gathers or p2p overlap."""
    interleaved = {"pipeline_model_parallel_size": "4", "transformer_pipeline_model_parallel_size": "4",
                   "num_virtual_stages_per_pipeline_rank": "2", "virtual_pipeline_model_parallel_size": "2",
                   "world_size": "32"}
    path = _log(tmp_path, interleaved)
    path.write_text("".join(line for line in path.read_text().splitlines(keepends=True)
                            if not line.startswith(("  align_param_gather ", "  overlap_p2p_comm "))))
    data = _audit(path, 32)
    assert data["estimate"]["recipe"]["align_param_gather"] is False
    assert data["estimate"]["recipe"]["pp_comm_overlap"] is False
    source = data["layout"]["sources"]["recipe.align_param_gather"]
    assert "has no align_param_gather: a Megatron-LM before 4e3840535b (2024-08-23)" in source
