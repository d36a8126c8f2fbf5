"""DeepSpeed takes expert parallelism only in model code: `deepspeed.moe.layer.MoE(..., ep_size=N)` (default 1;
deepspeed.initialize builds the expert groups from it, utils/groups.py).  The emitted ds_topology.py states the
plan's `ep_size` for the training script to pass, the audit reads it back with its line, and an MoE job whose files
state no ep is priced at ep 1 with ep listed as assumed, never silently.  A DeepSpeed JSON audited without the
topology file says which degrees it assumed instead of claiming DeepSpeed rejects the batch."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main
from placement.errors import InputError

MIXTRAL = ["--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "4096",
           "--global-batch", "256"]
FILES = ("deepspeed.sh", "ds_config.json", "hostfile", "ds_topology.py")


def _run(argv: list[str]):
    result = CliRunner().invoke(main, argv)
    assert result.exit_code in (0, 1), result.output[-1500:]
    return result


@pytest.fixture(scope="module")
def mixtral_files(tmp_path_factory):
    """The user trial's files: a Mixtral plan on 64 H100s (ep 8) emitted for DeepSpeed without --framework."""
    out = tmp_path_factory.mktemp("ds") / "ds1"
    _run(["plan", *MIXTRAL, "--top-k", "1", "--out", str(out), "--emit", "deepspeed"])
    return out


def _header_runs(text: str) -> tuple[float, float]:
    """(s/step, GiB per GPU) of what the file runs: its "this file runs" line, else the plan's prediction."""
    lines = [x for x in text.splitlines() if x.startswith(("# predicted:", "# this file runs"))]
    m = re.search(r"([\d.]+) s/step.*?([\d.]+) of [\d.]+ GiB per GPU", lines[-1])
    return float(m.group(1)), float(m.group(2))


def _audit(files: list, *extra: str) -> dict:
    launch = [x for p in files for x in ("--launch", str(p))]
    return json.loads(_run(["audit", *MIXTRAL, *launch, *extra, "--json"]).stdout)


def test_the_audit_of_emitted_deepspeed_moe_files_prices_the_step_and_memory_their_header_prints(mixtral_files):
    script = (mixtral_files / "deepspeed.sh").read_text()
    topology = (mixtral_files / "ds_topology.py").read_text()
    assert "ep 8" in script.splitlines()[2]  # the plan's layout line
    line = topology.splitlines().index("ep_size = 8") + 1
    assert "from ds_topology import ep_size" in script
    audit = _audit([mixtral_files / f for f in FILES])
    step_s, mem_gib = _header_runs(script)
    est = audit["estimate"]
    assert est["layout"]["ep"] == 8
    assert audit["layout"]["sources"]["ep"] == f"{mixtral_files / 'ds_topology.py'}:{line}: ep_size = 8"
    assert "ep" not in audit["layout"]["unstated"]
    assert round(est["step_time_s"], 3) == step_s
    assert round(est["peak_memory_bytes"] / 2**30, 1) == mem_gib
    assert [f for f in audit["findings"] if f["kind"] == "memory_over_capacity"] == []


def test_moe_files_that_state_no_ep_are_priced_at_ep_1_with_ep_listed_as_assumed(mixtral_files, tmp_path):
    topology = (mixtral_files / "ds_topology.py").read_text()
    (tmp_path / "ds_topology.py").write_text(topology.replace("ep_size = 8\n", ""))
    files = [mixtral_files / f for f in FILES[:3]] + [tmp_path / "ds_topology.py"]
    audit = _audit(files)
    assert audit["estimate"]["layout"]["ep"] == 1
    says = audit["layout"]["unstated"]["ep"]
    assert says.startswith("not stated by the files: assumed 1, deepspeed.moe.layer.MoE's default ep_size")
    text = _run(["audit", *MIXTRAL, *[x for p in files for x in ("--launch", str(p))]]).stdout
    assert "  ep: not stated by the files: assumed 1" in text


def test_a_training_scripts_moe_call_states_ep(tmp_path):
    """`MoE(hidden, expert, num_experts, ep_size, ...)` by keyword or position; no ep_size is MoE's default 1; an
    expression is noted, not read; two degrees are an error."""
    script = tmp_path / "train.py"
    topo = "topology = PipeModelDataParallelTopology(num_pp=1, num_mp=1, num_dp=64)\n"
    for call, ep in (("MoE(4096, mlp, num_experts=8, ep_size=4)", 4), ("deepspeed.moe.layer.MoE(4096, mlp, 8, 2)", 2),
                     ("MoE(4096, mlp, num_experts=8)", 1)):
        script.write_text(f"{topo}layer = {call}\n")
        layout = parse_launch([script], "deepspeed")
        assert (layout.ep, layout.sources["ep"].split(": ", 1)[0]) == (ep, f"{script}:2")
    script.write_text(f"{topo}layer = MoE(4096, mlp, num_experts=8, ep_size=args.ep)\n")
    layout = parse_launch([script], "deepspeed")
    assert "ep" not in layout.sources and any("ep_size=args.ep" in x for x in layout.ignored)
    script.write_text(f"{topo}ep_size = 8\nlayer = MoE(4096, mlp, num_experts=8, ep_size=ep_size)\n")
    assert parse_launch([script], "deepspeed").sources["ep"] == f"{script}:2: ep_size = 8"
    script.write_text(f"{topo}ep_size = 8\nlayer = MoE(4096, mlp, num_experts=8, ep_size=4)\n")
    with pytest.raises(InputError, match=re.escape("two expert-parallel degrees (ep_size 8")):
        parse_launch([script], "deepspeed")
    script.write_text(f"{topo}ep_size = 0\n")
    with pytest.raises(InputError, match="ep_size must be a whole number >= 1"):
        parse_launch([script], "deepspeed")


def test_a_deepspeed_json_without_its_topology_names_the_assumed_degrees_not_a_rejection(tmp_path):
    """llama3-70b at tp 2 x pp 8 on 32 GPUs: train_batch_size 64 = 1 x 32 x dp 2.  Without ds_topology.py the audit
    takes tp, pp and cp as 1 (dp 32), which DeepSpeed never saw: the message says so and what holds."""
    out = tmp_path / "ds2"
    job = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "32", "--seq-len", "4096", "--global-batch",
           "64"]
    _run(["evaluate", *job, "--tp", "2", "--pp", "8", "--out", str(out), "--emit", "deepspeed"])
    result = CliRunner().invoke(main, ["audit", *job, "--launch", str(out / "ds_config.json"),
                                       "--launch", str(out / "hostfile")])
    assert result.exit_code == 2
    assert "train_batch_size 64 != micro-batch 1 x gradient_accumulation_steps 32 x dp 32" in result.stderr
    assert ("dp 32 = world size 32 / (tp 1 x pp 1 x cp 1), with tp, pp, cp assumed 1 because no audited file states "
            "them" in result.stderr)
    assert "ds_topology.py" in result.stderr and "tp x pp x cp = 32 / 2 = 16" in result.stderr
    assert "DeepSpeed rejects it" not in result.stderr
    # every degree stated and still wrong: that is DeepSpeed's own rejection
    topology = tmp_path / "ds_topology.py"
    topology.write_text("topology = PipeModelDataParallelTopology(num_pp=8, num_mp=1, num_dp=4)\n")
    result = CliRunner().invoke(main, ["audit", *job, "--launch", str(out / "ds_config.json"),
                                       "--launch", str(out / "hostfile"), "--launch", str(topology)])
    assert result.exit_code == 2 and "x dp 4 (" in result.stderr and "); DeepSpeed rejects it" in result.stderr


def test_deepspeed_runs_no_zero3_with_moe_layers() -> None:
    """DeepSpeed's engine refuses its MoE layers under ZeRO-3 (runtime/engine.py: "Native DeepSpeed MoE is not
    supported with ZeRO Stage 3"): `--framework deepspeed` proposed ZeRO-3 for Mixtral (a user trial), a plan whose
    `deepspeed.initialize` fails.  The MoE model's DeepSpeed space has ZeRO-1 and -2; a dense model's keeps ZeRO-3."""
    from placement.frameworks import CAPABILITIES

    ds = CAPABILITIES["deepspeed"]
    assert 3 in ds.zero_stages and ds.for_model(False).zero_stages == ds.zero_stages
    assert 3 not in ds.for_model(True).zero_stages
    job = ["--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "4096",
           "--global-batch", "256", "--framework", "deepspeed"]
    pinned = CliRunner().invoke(main, ["evaluate", *job, "--tp", "1", "--pp", "1", "--zero", "3"])
    assert pinned.exit_code == 2 and "ZeRO-3: it has ZeRO stages 1, 2" in pinned.stderr
    searched = CliRunner().invoke(main, ["plan", *job, "--top-k", "3", "--zero", "1", "--zero", "2", "--zero", "3",
                                         "--json"])
    assert searched.exit_code == 0, searched.output
    assert {p["layout"]["zero_stage"] for p in json.loads(searched.stdout)["plans"]} <= {1, 2}
