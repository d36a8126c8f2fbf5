"""A user trial of purchase planning (plan and sweep across designs): what the outputs call things must be what the
numbers describe."""

from __future__ import annotations

import json

from click.testing import CliRunner

from placement.cli import main

MAKE_PLAN = ["plan", "--model", "llama3-405b", "--cluster", "dgx-h100", "--gpus", "16384", "--seq-len", "8192",
             "--global-batch", "2048", "--top-k", "1"]


def test_the_gradient_group_of_a_cp_layout_is_named_dp_x_cp():
    """Megatron reduces gradients over dp x cp: the mapping table said "dp 64 x 256" beside a layout of dp128 cp2."""
    res = CliRunner().invoke(main, MAKE_PLAN)
    assert res.exit_code == 0, res.output
    plan = json.loads(CliRunner().invoke(main, [*MAKE_PLAN, "--json"]).stdout)["plans"][0]
    lay, dp = plan["layout"], plan["crossings"]["dp"]
    assert lay["cp"] > 1 and dp["group_size"] == lay["dp"] * lay["cp"]  # the JSON key stays "dp"
    rows = res.stdout.split("count x size", 1)[1].splitlines()
    assert any(r.split()[:4] == ["dp", "x", "cp", f"{dp['groups']}"] for r in rows), rows
    assert not any(r.split()[:2] == ["dp", f"{dp['groups']}"] for r in rows)
