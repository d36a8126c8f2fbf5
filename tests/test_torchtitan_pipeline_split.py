"""`--framework torchtitan`: the pipeline splits its layers-per-stage flags can give (Llama 3 405B's 126 layers over 8
stages, torchtitan's own benchmark layout) and the K/V all-gather its FlexAttention context parallelism runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

JOB = ["--model", "llama3-405b", "--gpus", "512", "--seq-len", "8192", "--global-batch", "256", "--tp", "8",
       "--precision", "fp8", "--zero", "3", "--recompute", "full", "--mbs", "1", "--json"]


@pytest.mark.parametrize("vpp", ["1", "2"])
def test_torchtitans_own_405b_layout_is_run_and_priced(vpp: str) -> None:
    """FSDP 8 x TP 8 x PP 8 (benchmarks/llama3_h100_202412_torchtitan.md Tables 5, 6): 126 layers split
    15/16/.../16/15 by torchtitan's default first/last_stage_less_layers 1, which placement's split is."""
    out = CliRunner().invoke(main, ["evaluate", *JOB, "--pp", "8", "--vpp", vpp, "--framework", "torchtitan"])
    assert out.exit_code in (0, 1), out.output
    plan = json.loads(out.stdout)
    assert plan["layout"]["pp"] == 8 and plan["layout"]["vpp"] == int(vpp)


@pytest.mark.parametrize(("layers", "pp", "vpp"), [(126, 8, 1), (126, 8, 2), (126, 4, 1), (80, 4, 5), (80, 3, 1),
                                                    (61, 4, 1), (94, 16, 1), (48, 6, 2)])
def test_the_mask_admits_exactly_the_splits_torchtitans_flags_give(layers: int, pp: int, vpp: int) -> None:
    """A layout passes where torchtitan's layers-per-stage flags give placement's layers per PP rank in pp x vpp
    virtual stages: then the emitted file runs the priced split (emit.torchtitan `_split_args` warns otherwise)."""
    import numpy as np

    from placement.cost.pipeline import rank_layer_counts
    from placement.emit.torchtitan import stage_flags, torchtitan_split
    from placement.frameworks import _torchtitan_splits

    class _B:  # the two columns the mask reads
        def __init__(self) -> None:
            self.pp, self.vpp = np.array([pp]), np.array([vpp])

        def __len__(self) -> int:
            return 1

    want = rank_layer_counts(layers, pp, vpp)
    (chunk, first, last), split, per_rank = stage_flags(layers, pp, vpp, want)
    assert torchtitan_split(layers, pp, chunk, first, last) == split
    assert bool(_torchtitan_splits(_B(), layers)[0]) == (per_rank == want and len(split) == pp * vpp)


def test_a_split_placement_cannot_make_is_refused() -> None:
    out = CliRunner().invoke(main, ["evaluate", *JOB, "--pp", "8", "--vpp", "5", "--framework", "torchtitan"])
    assert out.exit_code == 2 and "first/last_stage_less_layers" in out.output


def test_torchtitans_context_parallelism_all_gathers_k_and_v() -> None:
    base = ["evaluate", "--model", "llama3-8b", "--gpus", "16", "--seq-len", "65536", "--global-batch", "16",
            "--cp", "4", "--zero", "3", "--recompute", "full", "--json"]
    out = CliRunner().invoke(main, [*base, "--framework", "torchtitan"])
    assert out.exit_code in (0, 1), out.output
    assert json.loads(out.stdout)["recipe"]["cp_comm_type"] == "all_gather"
    refused = CliRunner().invoke(main, [*base, "--framework", "torchtitan", "--cp-comm-type", "p2p"])
    assert refused.exit_code == 2 and "flex_cp_allgather" in refused.output


@pytest.mark.parametrize(("framework", "argv", "rule"), [
    ("torchtitan", ["--zero", "1"], "ZeRO-1: it has ZeRO stages 0, 2, 3"),
    ("deepspeed", ["--tp", "2", "--pp", "2", "--vpp", "2"], "vpp 2: at most 1"),
    ("deepspeed", ["--pp", "2", "--zero", "2"], "ZeRO-2 with pp 2: with pipeline parallelism it has ZeRO stages 1"),
])
def test_a_refusal_names_the_rule_the_layout_breaks(framework: str, argv: list[str], rule: str) -> None:
    """Only the broken rule, with the layout's value, not the framework's whole list of limits."""
    out = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "16", *argv, "--framework",
                                    framework])
    assert out.exit_code == 2 and f"prices it ({rule})" in out.output


V022 = Path(__file__).parent / "data" / "audit" / "torchtitan" / "llama3_8b_v0.2.2.toml"


def _audit_edited(tmp_path, line: str) -> tuple[int, str]:
    text = V022.read_text().replace("[parallelism]\n", f"[parallelism]\n{line}\n")
    path = tmp_path / "llama3_8b.toml"
    path.write_text(text)
    out = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "llama3-8b", "--gpus", "8", "--json"])
    return out.exit_code, out.output


def test_torchtitan_0_2_context_parallelism_is_its_rotate_method(tmp_path) -> None:
    """Before 0.3.0 (no FlexAttention CP), PyTorch's context_parallel rotates K/V by the TOML's
    context_parallel_rotate_method: 'allgather' (its default) gathers them whole, 'alltoall' passes them on."""
    code, out = _audit_edited(tmp_path, 'context_parallel_rotate_method = "alltoall"')
    assert code in (0, 1), out
    data = json.loads(out)
    assert data["estimate"]["recipe"]["cp_comm_type"] == "p2p"
    assert "alltoall rotation" in data["layout"]["sources"]["recipe.cp_comm_type"]


def test_a_reshard_policy_torchtitan_refuses_is_an_error(tmp_path) -> None:
    code, out = _audit_edited(tmp_path, "fsdp_reshard_after_forward = \"sometimes\"")
    assert code == 2 and "'default', 'always' or 'never'" in out
