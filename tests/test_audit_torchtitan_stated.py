"""A torchtitan 0.3.0 job's change list quotes the launched side as its files write it, and lists every flag the
files state that the best plan's written torchtitan.sh writes otherwise (a QA run: `--out` rewrote the files'
pipeline_parallel_microbatch_size 2 as 1 unlisted, and a ZBVZeroBubble file's schedule was quoted as
`- Interleaved1F1B`, placement's spelling of the launched layout)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.audit.changes import PIPELINE_ONLY_NOTE, torchtitan_stated_changes
from placement.cli import main


def _job(tmp_path: Path, evaluate: list[str], edits: dict[str, str]) -> Path:
    """placement's own torchtitan.sh for `evaluate`'s layout, with `edits` made to its flags: the job's file."""
    out = tmp_path / "planned"
    result = CliRunner().invoke(main, ["evaluate", *evaluate, "--framework", "torchtitan", "--emit", "torchtitan",
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "torchtitan.sh").read_text()
    for old, new in edits.items():
        assert old in text
        text = text.replace(old, new)
    job = tmp_path / "job.sh"
    job.write_text(text)
    return job


def _changes(job: Path, model: str, gpus: str, out: Path) -> dict[str, dict]:
    result = CliRunner().invoke(main, ["audit", "--launch", str(job), "--model", model, "--cluster", "dgx-h100",
                                       "--gpus", gpus, "--seq-len", "8192", "--out", str(out), "--json"])
    assert result.exit_code in (0, 1), result.output
    return {c["argument"]: c for c in json.loads(result.stdout)["changes"]}


def test_a_pipeline_key_the_written_file_rewrites_without_a_pipeline_is_listed(tmp_path: Path) -> None:
    job = _job(tmp_path, ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq-len", "8192",
                          "--global-batch", "64", "--tp", "2", "--zero", "3", "--mbs", "2", "--recompute", "full"], {})
    changes = _changes(job, "llama3-8b", "16", tmp_path / "out")
    written = (tmp_path / "out" / "torchtitan.sh").read_text()
    assert "--parallelism.pipeline_parallel_microbatch_size 1 " in written
    c = changes["--parallelism.pipeline_parallel_microbatch_size"]
    assert (c["from"], c["to"], c["note"]) == ("2", "1", PIPELINE_ONLY_NOTE)


def test_the_launched_schedule_is_quoted_as_the_files_write_it(tmp_path: Path) -> None:
    job = _job(tmp_path, ["--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "8192",
                          "--global-batch", "256", "--tp", "8", "--pp", "4", "--zero", "3", "--recompute", "full"],
               {"pipeline_parallel_schedule 1F1B": "pipeline_parallel_schedule ZBVZeroBubble",
                "pipeline_parallel_microbatch_size 1": "pipeline_parallel_microbatch_size 2",
                "layers_per_stage 20": "layers_per_stage 10"})
    changes = _changes(job, "llama3-70b", "64", tmp_path / "out")
    c = changes["--parallelism.pipeline_parallel_schedule"]
    assert (c["from"], c["to"]) == ("ZBVZeroBubble", "1F1B")
    assert changes["--parallelism.pipeline_parallel_microbatch_size"]["from"] == "2"


def test_a_flag_both_plans_spell_alike_is_listed_where_the_files_write_another_value() -> None:
    """The best plan keeps two virtual stages, which placement spells Interleaved1F1B on both sides: the files'
    ZBVZeroBubble is still rewritten, so it is a change; a value the files already write is none."""
    live = ("torchrun -m torchtitan.train --parallelism.pipeline_parallel_schedule ZBVZeroBubble \\\n"
            "  --parallelism.pipeline-parallel-microbatch-size 1 --training.local_batch_size 8\n")
    best = {"--parallelism.pipeline_parallel_schedule": "Interleaved1F1B",
            "--parallelism.pipeline_parallel_microbatch_size": "1", "--training.local_batch_size": "4"}
    changes = [{"argument": "--training.local_batch_size", "from": "16", "to": "4"},
               {"argument": "--parallelism.pipeline_parallel_microbatch_size", "from": "2", "to": "1"}]
    assert torchtitan_stated_changes(changes, best, live) == [
        {"argument": "--training.local_batch_size", "from": "8", "to": "4"},
        {"argument": "--parallelism.pipeline_parallel_schedule", "from": "ZBVZeroBubble", "to": "Interleaved1F1B"}]
