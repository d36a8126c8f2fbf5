"""On an allocation the mapper re-ranks the search's best candidates by their mapped step: a user trial's --top-k 1-3
returned tp4 pp2x8 dp16 (7.079 s) where --top-k 5 returned tp4 cp2 pp2x8 dp8 (7.061 s), a 4th candidate that only a
host reordering made best.  The mapper now re-ranks at least planner.MAPPED_AT_LEAST of them."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

TOPO = Path(__file__).parent / "data" / "slurm" / "tree-2leaf.conf"


def _best(k: int) -> dict:
    result = CliRunner().invoke(main, ["--reproducible", "plan", "--model", "llama3-70b", "--slurm-topology",
                                       str(TOPO), "--nodelist", "node[01-16]", "--node-type", "dgx-h100",
                                       "--oversubscription", "4", "--seq-len", "8192", "--global-batch", "128",
                                       "--top-k", str(k), "--json"])
    assert result.exit_code == 0, result.output
    plans = json.loads(result.stdout)["plans"]
    assert len(plans) == k
    return plans[0]


def test_a_small_top_k_returns_the_default_top_ks_best_plan():
    five = _best(5)
    for k in (1, 2):
        best = _best(k)
        assert best["layout"] == five["layout"] and best["step_time_s"] == five["step_time_s"]
        assert best["mapping_compact"] == five["mapping_compact"]
