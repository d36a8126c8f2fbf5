"""With measured intra-node links (--node-topo) the price assumes each TP group on its best-connected GPUs, which
placement's files realize with CUDA_VISIBLE_DEVICES.  An audited job runs its ranks on the GPUs in order, and an
`evaluate --out` file must realize the order it was priced with (a user trial: a PCIe box with NVLink-bridged pairs
(0,4), (1,5), ... audited a TP-2 job at the bridged price, 36 % faster than it runs, and evaluate wrote no
CUDA_VISIBLE_DEVICES)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

DATA = Path(__file__).parent / "data"
NODE = str(DATA / "nvsmi" / "pcie-8x-nvbridge-pairs.txt")
MACHINE = ["--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"), "--nodelist", "gpu[0001-0004]",
           "--node-type", "dgx-h100"]
SCRIPT = """torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py --num-layers 32 --hidden-size 4096 \\
    --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention --num-query-groups 8 --swiglu \\
    --seq-length 8192 --tensor-model-parallel-size 2 --sequence-parallel --micro-batch-size 2 \\
    --global-batch-size 64 --use-distributed-optimizer --bf16 --overlap-grad-reduce
"""


def _evaluate(*extra: str) -> dict:
    out = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", *MACHINE, "--tp", "2", "--mbs", "2",
                                    "--global-batch", "64", "--seq-len", "8192", "--json", *extra])
    assert out.exit_code in (0, 1), out.output
    return json.loads(out.stdout)


def test_an_audited_job_is_priced_on_its_gpus_in_order_and_told_the_order(tmp_path: Path) -> None:
    path = tmp_path / "train.sh"
    path.write_text(SCRIPT, encoding="utf-8")
    out = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "llama3-8b", *MACHINE, "--node-topo",
                                    NODE, "--json", "--no-pp-comm-overlap"])
    assert out.exit_code in (0, 1), out.output
    audit = json.loads(out.stdout)
    launched = audit["estimate"]
    bridged = _evaluate("--node-topo", NODE, "--zero", "1")
    # ranks 0, 1 on GPUs 0, 1 (PCIe), not on a bridged pair: slower than the bridged price of the same layout
    assert launched["breakdown"]["tp"] > bridged["breakdown"]["tp"]
    (finding,) = [f for f in audit["findings"] if f["kind"] == "gpu_order"]
    assert "CUDA_VISIBLE_DEVICES=0,4,1,5,2,6,3,7" in finding["message"] and finding["cost_s"] > 0
    assert any(c["argument"] == "CUDA_VISIBLE_DEVICES" and c["to"] == "0,4,1,5,2,6,3,7" for c in audit["changes"])


def test_evaluate_writes_the_gpu_order_it_priced(tmp_path: Path) -> None:
    priced = _evaluate("--node-topo", NODE, "--out", str(tmp_path))
    lines = (tmp_path / "cuda_visible_devices.txt").read_text().splitlines()
    assert next(x for x in lines if not x.startswith("#")).endswith("CUDA_VISIBLE_DEVICES=0,4,1,5,2,6,3,7")
    assert priced["mapping_compact"]["local_gpu_order"]
    plain = _evaluate("--out", str(tmp_path / "plain"))  # no measured links: GPUs in order, no file
    assert not (tmp_path / "plain" / "cuda_visible_devices.txt").exists() and plain["step_time_s"] > 0
