"""A plan within 3 % of the memory capacity says so in its headline when it keeps no headroom, and not when it keeps
some or has room (a user trial: plans at 77.9 of 78.1 GiB printed as plainly as any other)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from placement.cli import main
from placement.plan import TIGHT_MEMORY_SHARE, Plan
from placement.report import headline


def _plan(*extra: str) -> Plan:
    out = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                                    "--tp", "2", "--pp", "1", "--mbs", "1", "--json", *extra])
    assert out.exit_code == 0, out.output
    return Plan.model_validate({k: v for k, v in json.loads(out.stdout).items() if k != "calibration"})


def test_a_plan_at_the_edge_says_so() -> None:
    p = _plan()
    cap = p.memory_capacity_bytes
    tight = p.model_copy(update={"peak_memory_bytes": cap * (1.0 - TIGHT_MEMORY_SHARE / 2)})
    roomy = p.model_copy(update={"peak_memory_bytes": cap * (1.0 - 2 * TIGHT_MEMORY_SHARE)})
    assert "no headroom kept; --memory-headroom-gib" in headline(tight)
    assert "headroom" not in headline(roomy)
    kept = _plan("--memory-headroom-gib", "4")
    kept = kept.model_copy(update={"peak_memory_bytes": kept.memory_capacity_bytes * 0.999})
    assert "4.0 GiB more kept free" in headline(kept) and "no headroom kept" not in headline(kept)
