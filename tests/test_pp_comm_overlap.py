"""Megatron's overlap of an interleaved pipeline's sends and receives (pp_comm_overlap): the Megatron file states
it off where the plan has it off, the audit reads it back, and a plan priced with it runs as priced."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main

JOB = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "4096", "--global-batch", "128",
       "--tp", "4", "--pp", "4", "--vpp", "5", "--mbs", "1", "--recompute", "none", "--sequence-parallel"]


def _evaluate(tmp_path: Path, *extra: str) -> tuple[dict, str]:
    res = CliRunner().invoke(main, ["evaluate", *JOB, "--zero", "1", *extra, "--emit", "megatron", "--out",
                                    str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout), (tmp_path / "megatron.sh").read_text()


def test_the_megatron_file_states_the_overlap_off_and_the_audit_reads_it_back(tmp_path: Path) -> None:
    on, on_file = _evaluate(tmp_path / "on")
    off, off_file = _evaluate(tmp_path / "off", "--no-pp-comm-overlap")
    assert "--no-overlap-p2p-communication" not in on_file  # Megatron's default under virtual stages
    assert "--no-overlap-p2p-communication" in off_file
    assert off["step_time_s"] > on["step_time_s"]
    assert on["breakdown"]["overlapped"]["pp"] > 0 and off["breakdown"]["overlapped"]["pp"] == 0
    for plan, path in ((on, tmp_path / "on" / "megatron.sh"), (off, tmp_path / "off" / "megatron.sh")):
        lay = parse_launch([path])
        assert lay.recipe.get("pp_comm_overlap", True) is plan["recipe"].get("pp_comm_overlap", True)
        res = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "llama3-70b", "--cluster",
                                        "dgx-h100", "--gpus", "64", "--json"])
        assert res.exit_code in (0, 1), res.output
        assert json.loads(res.stdout)["estimate"]["step_time_s"] == plan["step_time_s"]


def test_torchtitan_plans_price_the_transfers_exposed() -> None:
    """torch.distributed.pipelining waits on each chunk's receive right before it computes: --framework torchtitan
    prices the transfers exposed, and says so in the recipe's sources."""
    res = CliRunner().invoke(main, ["evaluate", *JOB, "--zero", "2", "--framework", "torchtitan", "--json"])
    assert res.exit_code in (0, 1), res.output
    plan = json.loads(res.stdout)
    assert plan["recipe"]["pp_comm_overlap"] is False
    assert "torch.distributed.pipelining" in plan["recipe_sources"]["pp_comm_overlap"]
    assert plan["breakdown"]["overlapped"]["pp"] == 0 and plan["breakdown"]["pp"] > 0


def test_a_pinned_recipe_feature_the_framework_cannot_launch_is_refused() -> None:
    """`evaluate --framework torchtitan --tp-comm-overlap` priced Megatron's userbuffers overlap, which torchtitan's
    files run without (its header then priced the exposed run): refused, naming the flag, as a capability row is."""
    args = ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "256", "--seq-len", "8192",
            "--global-batch", "256", "--tp", "8", "--zero", "3", "--mbs", "1", "--recompute", "full"]
    res = CliRunner().invoke(main, [*args, "--framework", "torchtitan", "--tp-comm-overlap"])
    assert res.exit_code == 2
    assert "tp_comm_overlap = False only" in res.output and "drop --tp-comm-overlap or --framework" in res.output
    assert CliRunner().invoke(main, [*args, "--framework", "torchtitan"]).exit_code in (0, 1)
    assert CliRunner().invoke(main, [*args, "--framework", "megatron", "--tp-comm-overlap"]).exit_code in (0, 1)


def test_two_stages_interleaved_need_the_overlap_in_megatron(tmp_path: Path) -> None:
    """Megatron-LM refuses an interleaved schedule on 2 stages with --no-overlap-p2p-communication: the file
    written for such a layout says it does not start, and a search for Megatron never proposes one (a review:
    the file was written and exit 0, and an audit proposed pp 2 x vpp 8 with the flag kept)."""
    args = ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--tp", "8", "--pp", "2",
            "--vpp", "2", "--mbs", "1", "--recompute", "none", "--zero", "1", "--global-batch", "64",
            "--seq-len", "4096", "--no-pp-comm-overlap", "--emit", "megatron", "--out", str(tmp_path), "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1, res.output
    assert "megatron.sh" in str(json.loads(res.stdout)["files_not_starting"])
    plan = CliRunner().invoke(main, ["plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64",
                                     "--global-batch", "64", "--seq-len", "4096", "--no-pp-comm-overlap",
                                     "--top-k", "50", "--json"])
    lays = [p["layout"] for p in json.loads(plan.stdout)["plans"]]
    assert lays and not [lay for lay in lays if lay["pp"] == 2 and lay["vpp"] > 1]


def test_a_file_dated_before_the_overlap_runs_its_transfers_exposed(tmp_path: Path) -> None:
    """A file its flags date before 2023-09-05 (--activations-checkpoint-method, --DDP-impl) ran an interleaved
    pipeline's transfers exposed: Megatron-LM overlapped them by default only from 2023-10-12 (a review)."""
    script = tmp_path / "old.sh"
    script.write_text("torchrun --nnodes 4 --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 8 "
                      "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 2 --num-layers 32 "
                      "--hidden-size 4096 --num-attention-heads 32 --seq-length 2048 --micro-batch-size 1 "
                      "--global-batch-size 64 --bf16 --DDP-impl local --activations-checkpoint-method uniform\n")
    lay = parse_launch([script])
    assert lay.vpp == 4 and lay.recipe["pp_comm_overlap"] is False
    assert "before 2023-09-05" in lay.sources["recipe.pp_comm_overlap"]
