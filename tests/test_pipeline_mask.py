"""`pipeline_sends_mask`: GPT-NeoX's pipeline layers return (hidden_states, attention_mask) and DeepSpeed's
PipelineEngine sends the [1, 1, s, s] mask, cast to half, with every activation (EleutherAI/gpt-neox
megatron/model/transformer.py ParallelTransformerLayerPipe; DeepSpeed runtime/pipe/engine.py
_exec_send_activations).  Tested on the GPT-NeoX-20B row it moves, at the long context where it dominates the
pipeline's traffic, in the audit that reads it and in the files that cannot express it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.calibration.validate import load_runs, predict, run_topology
from placement.cli import evaluate_command, main
from placement.cost import collectives as coll
from placement.cost import constants as C

NEOX = next(r for r in load_runs() if r.id == "gpt-neox-20b-96xa100")
DATA = Path(__file__).parent / "data" / "audit" / "neox"


def _with_recipe(run, **update):
    return run.model_copy(update={"recipe": run.recipe.model_copy(update=update)})


def test_neox_row_sends_its_mask_with_every_activation(mean_speed_gpus) -> None:
    """Each forward transfer carries 2 s^2 bytes more (8 MiB at s = 2048) as a blocking send of its own, with its
    casts and copies: a middle stage makes two such transfers per micro-batch, and on DeepSpeed's lock-step schedule
    2 m + p - 4 of them lie on the step's path (tests/test_deepspeed_schedule.py), 64 here.  Without the mask the
    row is faster, further from the published step."""
    assert NEOX.recipe.pipeline_sends_mask
    with_mask, without = predict(NEOX), predict(_with_recipe(NEOX, pipeline_sends_mask=False))
    lay = NEOX.layout
    topo = run_topology(NEOX)
    pair = coll.Groups(coll.LevelArrays(topo), np.array([lay["tp"] * lay["dp"]]), np.array([lay["pp"]]), pair=True)
    s2 = NEOX.seq_len ** 2
    transfer = float(pair.p2p(np.array([2.0 * s2]))[0]) + s2 * C.MASK_COPY_BYTES_PER_TRANSFER \
        / topo.accelerator.hbm_bandwidth_bytes_per_s
    m = NEOX.global_batch // (lay["dp"] * lay["micro_batch_size"])
    argv = shlex.split(evaluate_command(NEOX, with_mask.layout, with_mask.recipe))[1:]
    pp = {flag: json.loads(CliRunner().invoke(main, [*[a for a in argv if a != "--pipeline-sends-mask"], flag,
                                                     "--json"]).stdout)["breakdown"]["exposed"]["pp"]
          for flag in ("--pipeline-sends-mask", "--no-pipeline-sends-mask")}
    assert pp["--pipeline-sends-mask"] - pp["--no-pipeline-sends-mask"] == pytest.approx(2 * m * transfer, abs=2e-6)
    # the step: the same transfers, less a hair of host time the longer GPU time now hides
    added = with_mask.predicted_step_time_s - without.predicted_step_time_s
    assert added == pytest.approx((2 * m + lay["pp"] - 4) * transfer, rel=1e-4)
    assert abs(with_mask.error) < abs(without.error)


def _evaluate(*extra: str, gpus: int = 16, tp: int = 2) -> dict:
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", str(gpus),
                                       "--tp", str(tp), "--pp", "4", "--mbs", "1", "--recompute", "full",
                                       "--seq-len", "32768", "--global-batch", "32", "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_at_long_context_the_mask_outweighs_the_activation() -> None:
    """At s = 32,768 the mask is 2 GiB per micro-batch against a 128 MiB activation share (tp 2, hidden 4096):
    the pipeline's traffic grows ninefold at least, and the masks a stage holds, builds and copies take gigabytes."""
    plain, masked = _evaluate(), _evaluate("--pipeline-sends-mask")
    s2 = 32768 ** 2
    share = 32768 * 4096 * 2 / 2
    # per micro-batch, (share + mask) forward and a share back against two shares, over the same links: at least
    # (1 + 16 + 1) / 2 = 9 times the transfer time (more with the mask's own send latency and copies)
    assert 2 * s2 == 16 * share
    assert masked["breakdown"]["exposed"]["pp"] > 9 * plain["breakdown"]["exposed"]["pp"]
    # the last stage stays the peak (it holds the logits): the mask of its one micro-batch in flight (1 GiB), the
    # 16-bit receive buffer (2 GiB), and while it loads a micro-batch GPT-NeoX's float32 ones and their lower
    # triangle beside the bool result (9 GiB): 12 s^2 bytes more than without the mask
    grown = masked["peak_memory_bytes"] - plain["peak_memory_bytes"]
    assert grown == pytest.approx(12 * s2, abs=1e4)
    # at tp 1 activations go whole, and the received mask stays in its buffer beside the forward pass's clone
    whole = [_evaluate(*flag, gpus=8, tp=1)["peak_memory_bytes"] for flag in ((), ("--pipeline-sends-mask",))]
    assert whole[1] - whole[0] == pytest.approx(13 * s2, abs=1e4)


def test_one_stage_sends_nothing() -> None:
    args = ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--tp", "2", "--pp", "1",
            "--json"]
    plain = json.loads(CliRunner().invoke(main, args).stdout)
    masked = json.loads(CliRunner().invoke(main, [*args, "--pipeline-sends-mask"]).stdout)
    assert masked["step_time_s"] == plain["step_time_s"]
    assert masked["peak_memory_bytes"] == plain["peak_memory_bytes"]


def test_a_gpt_neox_pipeline_config_states_the_mask(tmp_path: Path) -> None:
    lay = parse_launch([DATA / "20B.yml"])
    assert lay.recipe["pipeline_sends_mask"] is True
    assert lay.sources["recipe.pipeline_sends_mask"].endswith("sends the [1, 1, s, s] mask with every activation)")
    assert '"pipe_parallel_size": 4,' in lay.sources["recipe.pipeline_sends_mask"]
    # one stage: no PipelineModule sends
    path = tmp_path / "20B.yml"
    path.write_text((DATA / "20B.yml").read_text().replace('"pipe_parallel_size": 4,', '"pipe_parallel_size": 1,'))
    assert "pipeline_sends_mask" not in parse_launch([path]).recipe


def test_files_that_cannot_send_the_mask_say_so(tmp_path: Path) -> None:
    """DeepSpeed sends what the user's PipelineModule layers return: its files warn with the size; Megatron-LM sends
    the hidden states alone, so its header is priced without the mask."""
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [
        "evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--tp", "2", "--pp", "2",
        "--seq-len", "8192", "--global-batch", "32", "--pipeline-sends-mask", "--out", str(out),
        "--emit", "megatron,deepspeed"])
    assert result.exit_code == 0, result.output
    ds = (out / "deepspeed.sh").read_text()
    assert "8192 x 8192 attention mask sent with every activation (128 MiB per micro-batch" in ds
    assert "pipeline_sends_mask False (not True)" in (out / "megatron.sh").read_text()
