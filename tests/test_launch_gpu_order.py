"""The GPU order inside a node (--node-topo) from plan to launch and back.  A user trial: `evaluate --node-topo
--out D --emit all` wrote cuda_visible_devices.txt = 0,2,1,3,... but megatron.sh and torchtitan.sh started their
ranks without CUDA_VISIBLE_DEVICES (TP pairs on PCIe, about 2x the promised step), and the audit never read the
variable: auditing deepspeed.sh, which sets it, raised a `gpu_order` error asking for the value already set.  The
audit of a plan's own script without --hosts also took the allocation's host order for the file's, though the file
names the host of each node rank."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

DATA = Path(__file__).parent / "data"
NODE = str(DATA / "nvsmi" / "pcie-8x-nvbridge-pairs.txt")  # bridged pairs (0,4), (1,5), (2,6), (3,7)
MACHINE = ["--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"), "--nodelist", "gpu[0001-0004]",
           "--node-type", "dgx-h100"]
JOB = ["--model", "llama3-8b", *MACHINE, "--node-topo", NODE]
PAIRS = "0,4,1,5,2,6,3,7"
SCRIPT = """torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py --num-layers 32 --hidden-size 4096 \\
    --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention --num-query-groups 8 --swiglu \\
    --seq-length 8192 --tensor-model-parallel-size 2 --sequence-parallel --micro-batch-size 2 \\
    --global-batch-size 64 --use-distributed-optimizer --bf16 --overlap-grad-reduce
"""


def _run(args: list[str], codes: tuple[int, ...] = (0, 1)):
    out = CliRunner().invoke(main, args)
    assert out.exit_code in codes, out.output
    return out


def _audit(*launch: Path, extra: tuple[str, ...] = ()) -> dict:
    args = ["audit", *(x for p in launch for x in ("--launch", str(p))), *JOB, *extra, "--json"]
    return json.loads(_run(args).stdout)


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("plan")
    plan = json.loads(_run(["evaluate", *JOB, "--tp", "2", "--pp", "1", "--zero", "1", "--global-batch", "64",
                            "--out", str(out), "--emit", "megatron,torchtitan,deepspeed", "--json"]).stdout)
    return out, plan


def _launch_lines(path: Path) -> list[str]:
    return [x for x in path.read_text().splitlines() if "torchrun " in x and not x.startswith("#")]


@pytest.mark.parametrize("name", ["megatron.sh", "torchtitan.sh", "deepspeed.sh"])
def test_every_node_launch_line_sets_the_priced_gpu_order(emitted, name: str) -> None:
    out, _ = emitted
    assert (out / "cuda_visible_devices.txt").read_text().splitlines()[-1].endswith(f"CUDA_VISIBLE_DEVICES={PAIRS}")
    lines = _launch_lines(out / name)
    assert len(lines) == 4 and all(x.startswith(f"CUDA_VISIBLE_DEVICES={PAIRS} torchrun ") for x in lines)


def test_the_audit_of_the_emitted_megatron_script_prices_the_plans_step(emitted) -> None:
    """Round trip: the file's own CUDA_VISIBLE_DEVICES and `# on HOST` lines, no --hosts: the plan's step exactly,
    no gpu_order finding, no CUDA_VISIBLE_DEVICES or node-order change."""
    out, plan = emitted
    # the best plan searched with exposed pipeline transfers, as the plan was: its GPU order is the file's
    audit = _audit(out / "megatron.sh", extra=("--no-pp-comm-overlap",))
    assert audit["estimate"]["step_time_s"] == pytest.approx(plan["step_time_s"], rel=1e-9)
    assert not [f for f in audit["findings"] if f["kind"].startswith("gpu_order")]
    assert not [c for c in audit["changes"] if c["argument"] == "CUDA_VISIBLE_DEVICES"]
    layout = audit["layout"]
    assert re.match(rf".*megatron\.sh:\d+: CUDA_VISIBLE_DEVICES={PAIRS} torchrun .*--node-rank 0 .*\(and 3 more",
                    layout["sources"]["cuda_visible_devices"])
    assert "cuda_visible_devices" not in layout["unstated"] and "host_order" not in layout["unstated"]


@pytest.mark.parametrize("files", [("torchtitan.sh",), ("deepspeed.sh", "ds_config.json", "hostfile",
                                                        "ds_topology.py")])
def test_the_audit_of_the_other_emitted_scripts_reads_their_gpu_order(emitted, files: tuple[str, ...]) -> None:
    """deepspeed.sh set the order before the fix and was told to set it (an `error` claiming a 2x speed-up)."""
    out, _ = emitted
    audit = _audit(*(out / f for f in files))
    assert not [f for f in audit["findings"] if f["kind"].startswith("gpu_order")]
    # the launched side is the file's order (a best plan of another layout may want another one)
    assert all(c["from"] == PAIRS for c in audit["changes"] if c["argument"] == "CUDA_VISIBLE_DEVICES")
    assert f"CUDA_VISIBLE_DEVICES={PAIRS}" in audit["layout"]["sources"]["cuda_visible_devices"]
    runs = re.search(r"this file runs .*?: ([\d.]+) s/step", (out / files[0]).read_text())
    assert runs  # both files run otherwise than the ZeRO-1 plan (torchtitan ZeRO-2, DeepSpeed autograd accumulation)
    assert audit["estimate"]["step_time_s"] == pytest.approx(float(runs.group(1)), abs=5e-4)  # its header's price


def test_the_audit_of_the_emitted_script_beside_the_emitted_sbatch_prices_the_plans_step(emitted) -> None:
    """A user trial: `audit --launch megatron.sh --launch launch.sbatch` of a plan's own folder was refused as
    contradictory CUDA_VISIBLE_DEVICES (the script's lines set it, the sbatch reads cuda_visible_devices.txt at run
    time), in a message of Python reprs.  A value read at run time states no order: the two files agree."""
    out, plan = emitted
    audit = _audit(out / "megatron.sh", out / "launch.sbatch", extra=("--no-pp-comm-overlap",))
    assert audit["estimate"]["step_time_s"] == pytest.approx(plan["step_time_s"], rel=1e-9)
    assert not [f for f in audit["findings"] if f["kind"].startswith("gpu_order")]
    assert f"CUDA_VISIBLE_DEVICES={PAIRS}" in audit["layout"]["sources"]["cuda_visible_devices"]


def test_files_whose_lines_run_a_node_in_two_orders_are_refused_line_by_line(tmp_path: Path) -> None:
    """The same node rank on GPUs 0,4,1,5,... by one file and in numbered order by the other: an error that names the
    variable, each file's lines with their order and place, and the fix; no traceback, no Python reprs."""
    head, tail = SCRIPT.split(" pretrain_gpt.py", 1)
    ordered, plain = tmp_path / "ordered.sh", tmp_path / "plain.sh"
    ordered.write_text("".join(f"CUDA_VISIBLE_DEVICES={PAIRS} {head} --node-rank {k} pretrain_gpt.py{tail}"
                               for k in range(4)), encoding="utf-8")
    plain.write_text(f"{head} --node-rank 0 pretrain_gpt.py{tail}", encoding="utf-8")
    out = _run(["audit", "--launch", str(ordered), "--launch", str(plain), *JOB], codes=(2,))
    assert "contradictory values for CUDA_VISIBLE_DEVICES: [node rank 0: " + PAIRS + f" ({ordered}:1:" in out.output
    assert "node rank 3: " in out.output and f"node rank 0: in numbered order (none set) ({plain}:1:" in out.output
    assert "give --launch only the files the job ran with" in out.output
    assert "NodeDevices(" not in out.output and "Traceback" not in out.output


def test_an_exported_cuda_visible_devices_is_priced_and_sourced(tmp_path: Path) -> None:
    plain = tmp_path / "plain.sh"
    plain.write_text(SCRIPT, encoding="utf-8")
    ordered = tmp_path / "train.sh"
    ordered.write_text(f"export CUDA_VISIBLE_DEVICES={PAIRS}\n{SCRIPT}", encoding="utf-8")
    before, after = _audit(plain), _audit(ordered)
    assert [f["kind"] for f in before["findings"] if f["kind"] == "gpu_order"] == ["gpu_order"]
    assert "cuda_visible_devices" in before["layout"]["unstated"]
    assert not [f for f in after["findings"] if f["kind"].startswith("gpu_order")]
    assert after["layout"]["sources"]["cuda_visible_devices"].startswith(
        f"{ordered}:1: export CUDA_VISIBLE_DEVICES={PAIRS} (expanded at {ordered}:2)")
    assert after["estimate"]["breakdown"]["tp"] < before["estimate"]["breakdown"]["tp"]
    gain = next(f for f in before["findings"] if f["kind"] == "gpu_order")["cost_s"]
    # the JSON rounds both numbers
    assert after["estimate"]["step_time_s"] == pytest.approx(before["estimate"]["step_time_s"] - gain, abs=2e-5)


def test_launch_lines_that_disagree_on_the_order_are_a_finding_priced_at_the_slower(tmp_path: Path) -> None:
    head, tail = SCRIPT.split(" pretrain_gpt.py", 1)
    lines = [f"CUDA_VISIBLE_DEVICES={PAIRS} {head} --node-rank 0 pretrain_gpt.py{tail}",
             *(f"{head} --node-rank {k} pretrain_gpt.py{tail}" for k in (1, 2, 3))]
    mixed = tmp_path / "mixed.sh"
    mixed.write_text("".join(lines), encoding="utf-8")
    plain = tmp_path / "plain.sh"
    plain.write_text(SCRIPT, encoding="utf-8")
    audit = _audit(mixed)
    (finding,) = [f for f in audit["findings"] if f["kind"] == "gpu_order_differs"]
    assert "2 different orders" in finding["message"] and f"node rank 0: {PAIRS} ({mixed}:1:" in finding["message"]
    assert "node rank 1: in numbered order (none set)" in finding["message"]
    assert audit["estimate"]["step_time_s"] == pytest.approx(_audit(plain)["estimate"]["step_time_s"], rel=1e-9)


@pytest.mark.parametrize("value", ["GPU-8f3a2c,1", "0,0,1,2", "0,,1", ""])
def test_a_cuda_visible_devices_that_is_no_list_of_indices_is_an_error(tmp_path: Path, value: str) -> None:
    path = tmp_path / "train.sh"
    path.write_text(f"CUDA_VISIBLE_DEVICES={value} {SCRIPT}", encoding="utf-8")
    out = _run(["audit", "--launch", str(path), *JOB], codes=(2,))
    assert f"{path}:1: CUDA_VISIBLE_DEVICES={value}" in out.output
    assert f"CUDA_VISIBLE_DEVICES={value!r} is not a list of distinct GPU indices" in out.output


def test_a_list_that_is_not_the_nodes_gpus_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "train.sh"
    path.write_text(f"CUDA_VISIBLE_DEVICES=0,1,2,3 {SCRIPT}", encoding="utf-8")
    out = _run(["audit", "--launch", str(path), *JOB], codes=(2,))
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3 does not list the 8 GPUs 0..7 of a node" in out.output


def test_the_host_of_each_node_rank_is_read_from_the_script_or_said_to_be_assumed(emitted, tmp_path: Path) -> None:
    """The `# on HOST` comments fix the order (here reversed against the allocation's); without them the order
    is assumed, and the JSON's unstated and the text's sources say so."""
    out, _ = emitted
    text = (out / "megatron.sh").read_text()
    hosts = re.findall(r"^# on (\S+)$", text, re.M)
    assert len(hosts) == 4
    swapped = tmp_path / "swapped.sh"
    swapped.write_text(re.sub(r"^# on (\S+)$", lambda m: f"# on {hosts[::-1][hosts.index(m.group(1))]}", text,
                              flags=re.M), encoding="utf-8")
    audit = _audit(swapped)
    assert audit["layout"]["host_order"] == hosts[::-1]
    assert "`# on HOST` comment above each of the 4 node ranks" in audit["layout"]["sources"]["hosts"]
    assert "host_order" not in audit["layout"]["unstated"]
    bare = tmp_path / "bare.sh"
    bare.write_text(re.sub(r"^# on \S+\n", "", text, flags=re.M), encoding="utf-8")
    audit = _audit(bare)
    assert "hosts" not in audit["layout"]["sources"]
    assert audit["layout"]["unstated"]["host_order"].startswith("not stated by the files")
    report = _run(["audit", "--launch", str(bare), *JOB]).output
    assert "  host_order: not stated by the files" in report and "give --hosts" in report
