"""torchtitan before 0.3.0 resolves fsdp_reshard_after_forward "default" as `not pp_enabled` (v0.2.2
models/llama3/infra/parallelize.py:319-327): "always" without a pipeline, "never" with one.  A change list that
takes a TOML's unstated "default" to the policy it already means is no change (a QA run: the published Llama 3 70B
TOML on 64 H100s, best plan ZeRO-3 at pp 1, listed `- parallelism.fsdp_reshard_after_forward "default"` /
`+ ... "always"`); a real change of policy (ZeRO-2 at pp 1: "never") stays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.changes import torchtitan_pre3_changes
from placement.cli import main

TT = Path(__file__).parent / "data" / "audit" / "torchtitan"
KEY = "parallelism.fsdp_reshard_after_forward"


def _changes(toml: str, model: str) -> tuple[dict, dict]:
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(TT / toml), "--model", model,
                                       "--cluster", "dgx-h100", "--gpus", "64", "--json"])
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    return out, {c["argument"]: c for c in out["changes"]}


def test_the_70b_tomls_default_policy_is_the_best_plans_zero3_at_pp1() -> None:
    assert "fsdp_reshard_after_forward" not in (TT / "llama3_70b.toml").read_text()
    out, changes = _changes("llama3_70b.toml", "llama3-70b")
    best = out["best"]["layout"]
    assert (best["zero_stage"], best["pp"]) == (3, 1)
    assert changes  # the plan changes the layout, but not the resharding policy
    assert KEY not in changes


def test_a_policy_that_differs_from_what_default_means_is_still_a_change() -> None:
    out, changes = _changes("llama3_8b.toml", "llama3-8b")
    best = out["best"]["layout"]
    assert (best["zero_stage"], best["pp"]) == (2, 1)
    assert changes[KEY]["from"] == '"default"' and changes[KEY]["to"] == '"never"'


@pytest.mark.parametrize(("pp", "to", "changed"), [("1", '"always"', False), ("1", '"never"', True),
                                                   ("4", '"never"', False), ("4", '"always"', True)])
def test_default_means_not_pp_enabled(pp: str, to: str, changed: bool) -> None:
    a = {"--parallelism.fsdp_reshard_after_forward": (KEY, '"always"', None, None),
         "--parallelism.pipeline_parallel_degree": ("parallelism.pipeline_parallel_degree", "1", None, None)}
    b = {"--parallelism.fsdp_reshard_after_forward": (KEY, to, None, None),
         "--parallelism.pipeline_parallel_degree": ("parallelism.pipeline_parallel_degree", pp, None, None)}
    stated = {KEY: ('"default"', "job.toml:40: fsdp_reshard_after_forward = \"default\"")}
    out = {c["argument"]: c for c in torchtitan_pre3_changes(a, b, stated)}
    assert ("--parallelism.fsdp_reshard_after_forward" in out) is changed
