"""The flat-fabric bound: no host order prices below it, so a candidate whose allocation order already meets it
is not solved (issue: launch files that run exactly what was priced; "work that cannot change the ranking is
skipped")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from placement.cli import build_job, main
from placement.cost.batch import LayoutBatch
from placement.cost.step import estimate
from placement.mapping.mapper import host_order_mapping
from placement.specs import Layout
from placement.workload import workload

TREE = str(Path(__file__).parent / "data" / "slurm" / "tree-5leaf.conf")


@pytest.mark.parametrize("oversubscription", [1.0, 4.0])
@pytest.mark.parametrize("layout", [
    Layout(tp=8, pp=4, dp=8, micro_batch_size=1, zero_stage=1, sequence_parallel=True),
    Layout(tp=4, cp=2, pp=2, dp=8, micro_batch_size=1, zero_stage=3, sequence_parallel=True),
    Layout(tp=2, dp=128, micro_batch_size=1, zero_stage=1, sequence_parallel=True),
])
def test_no_host_order_prices_below_the_flat_fabric(layout, oversubscription):
    model, train, topo = build_job("llama3-70b", None, None, None, 4096, 256, "bf16", TREE,
                                   "gpu[0030-0045],gpu[0098-0113]", ("dgx-h100",), None, oversubscription)
    w, batch = workload(model), LayoutBatch.from_layouts([layout])
    flat = float(estimate(w, train, topo.flattened(), batch).step_time_s[0])
    rng = np.random.default_rng(0)
    hosts = len(topo.host_names)
    steps = [float(estimate(w, train, topo.with_mapping(host_order_mapping(topo, order)), batch).step_time_s[0])
             for order in [np.arange(hosts), *(rng.permutation(hosts) for _ in range(12))]]
    assert min(steps) >= flat * (1 - 1e-12)
    # and every host order prices the same on the flat fabric (node blocks stay whole)
    flat_steps = {round(float(estimate(w, train, topo.flattened().with_mapping(host_order_mapping(topo, o)),
                                       batch).step_time_s[0]), 12)
                  for o in [np.arange(hosts), rng.permutation(hosts)]}
    assert len(flat_steps) == 1


def test_a_non_blocking_tree_is_planned_without_a_solve_and_an_oversubscribed_one_is_solved():
    base = ["plan", "--model", "llama3-70b", "--seq-len", "4096", "--global-batch", "256", "--top-k", "3",
            "--slurm-topology", TREE, "--nodelist", "gpu[0030-0045],gpu[0098-0113]", "--node-type", "dgx-h100",
            "--json"]
    flat = json.loads(CliRunner().invoke(main, base).stdout)["plans"]
    statuses = {p["mapping_solver"]["status"] for p in flat}
    assert statuses == {"SKIPPED"}, statuses
    steep = json.loads(CliRunner().invoke(main, [*base, "--oversubscription", "8"]).stdout)["plans"]
    assert "SKIPPED" not in {p["mapping_solver"]["status"] for p in steep}
