"""megatron-core's own RankGenerator, fed the emitted degrees, gives exactly the planned TP, CP, DP, PP
and expert groups (every group of every kind)."""

from __future__ import annotations

import shlex

import pytest
from megatron.core.parallel_state import RankGenerator

from placement.emit import megatron
from tests.verify.helpers import CASES, group_of, planned


def emitted_args(ctx) -> dict[str, str]:
    text, _ = megatron.render(ctx, ctx.num_layers, ctx.moe)
    line = next(x for x in text.splitlines() if x.startswith("PLACEMENT_ARGS=("))
    tokens = shlex.split(line[len("PLACEMENT_ARGS=("):-1])
    out, i = {}, 0
    while i < len(tokens):
        if i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            out[tokens[i]] = tokens[i + 1]
            i += 2
        else:
            out[tokens[i]] = ""
            i += 1
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_megatron_rank_generator_gives_the_planned_groups(case):
    ctx, _ = planned(case)
    a = emitted_args(ctx)
    world = ctx.plan.num_gpus
    tp, pp, cp = (int(a[f"--{k}"]) for k in ("tensor-model-parallel-size", "pipeline-model-parallel-size",
                                              "context-parallel-size"))
    dp = world // (tp * pp * cp)
    dense = RankGenerator(tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order="tp-cp-ep-dp-pp")
    for token, axes in (("tp", ("tp",)), ("cp", ("cp",)), ("dp", ("dp",)), ("pp", ("pp",)), ("dp-cp", ("dp", "cp"))):
        for group in dense.get_ranks(token):
            assert sorted(group) == group_of(ctx, group[0], axes), (case, token)
    if "--expert-model-parallel-size" in a:
        ep, etp = int(a["--expert-model-parallel-size"]), int(a["--expert-tensor-parallel-size"])
        expert = RankGenerator(tp=etp, ep=ep, dp=world // (etp * ep * pp), pp=pp, cp=1, order="tp-cp-ep-dp-pp")
        for token, axes in (("ep", ("ep",)), ("tp", ("etp",)), ("dp", ("edp",))):
            for group in expert.get_ranks(token):
                assert sorted(group) == group_of(ctx, group[0], axes), (case, "expert " + token)
        assert expert.get_ranks("pp") == dense.get_ranks("pp")  # Megatron asserts the two generators agree
    if tp > 1 or cp > 1:
        text, _ = megatron.render(ctx, ctx.num_layers, ctx.moe)
        assert "export CUDA_DEVICE_MAX_CONNECTIONS=1" in text
