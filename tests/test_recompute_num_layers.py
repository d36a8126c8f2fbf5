"""--recompute-num-layers N is full recompute of N layers per virtual stage: with recompute none it was printed and
priced as nothing, and past a stage's layers it was priced as the whole stage; both are refused with the fix."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from placement.cli import main


@pytest.mark.parametrize(("args", "message"), [
    (["evaluate", "--recompute", "none", "--recompute-num-layers", "4"],
     "--recompute-num-layers 4 is full recompute of 4 layers per stage, but --recompute allows only none: add "
     "--recompute full, or drop the number of layers"),
    (["evaluate", "--recompute", "full", "--recompute-num-layers", "400"],
     "--recompute-num-layers 400: at pp 1 and vpp 1 a stage of llama3-8b holds at most 32 layers (ceil of 32 layers "
     "/ 1 stages); give 1 to 32, or drop it to recompute every layer of the stage"),
    (["evaluate", "--recompute", "full", "--recompute-num-layers", "9", "--tp", "2", "--pp", "2", "--vpp", "2"],
     "at pp 2 and vpp 2 a stage of llama3-8b holds at most 8 layers"),
    (["plan", "--recompute", "none", "--recompute", "selective", "--recompute-num-layers", "2"],
     "--recompute allows only none, selective: add --recompute full"),
    (["plan", "--recompute-num-layers", "33"], "--recompute-num-layers 33: llama3-8b has 32 layers; give 1 to 32"),
])
def test_recompute_num_layers_that_prices_nothing_or_is_clamped_is_refused(args: list[str], message: str) -> None:
    res = CliRunner().invoke(main, [*args, "--model", "llama3-8b", "--gpus", "8"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert message in res.output.replace("\n", " ")


def test_recompute_num_layers_within_a_stage_is_priced() -> None:
    res = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--recompute", "full",
                                    "--recompute-num-layers", "4", "--tp", "2", "--pp", "2", "--vpp", "2"])
    assert res.exit_code in (0, 1) and "full recompute of 4 layers per stage" in res.output
