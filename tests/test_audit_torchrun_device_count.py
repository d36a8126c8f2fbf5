"""torchrun's `--nproc-per-node gpu` (or `auto`) starts one process per GPU each node shows
(torch/distributed/run.py determine_local_world_size: torch.cuda.device_count()).  A QA trial's
`srun torchrun --nproc_per_node=gpu --nnodes=$SLURM_JOB_NUM_NODES ...` under `#SBATCH --nodes=4` was priced on the
catalog cluster's default 1,024 GPUs ('the launch files do not fix it'), where the job runs 4 nodes x 8 GPUs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

ARGS = ("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 --num-layers 32 --hidden-size 4096 "
        "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
        "--global-batch-size 1024 --bf16 --ffn-hidden-size 14336 --swiglu --num-query-groups 8 --group-query-attention "
        "--normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights "
        "--disable-bias-linear --vocab-size 128256")
TREE = Path(__file__).parent / "data" / "slurm" / "tree-5leaf.conf"


def _script(tmp_path: Path, nproc: str, gpus: str = "") -> Path:
    path = tmp_path / "job.sh"
    path.write_text(f"#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=1\n{gpus}"
                    f"srun torchrun --nproc_per_node={nproc} --nnodes=$SLURM_JOB_NUM_NODES --rdzv_backend c10d "
                    f"--rdzv_endpoint node0:29500 pretrain_gpt.py {ARGS}\n")
    return path


def _audit(*args: str) -> dict:
    out = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--json", *args])
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    return json.loads(out.stdout)


@pytest.mark.parametrize("nproc", ["gpu", "auto"])
def test_one_process_per_gpu_of_the_files_nodes(tmp_path: Path, nproc: str) -> None:
    doc = _audit("--launch", str(_script(tmp_path, nproc)), "--cluster", "dgx-h100")
    assert doc["estimate"]["num_gpus"] == 32 and doc["layout"]["dp"] == 16
    said = doc["layout"]["sources"]["num_gpus"]
    assert said.startswith("the launch files' 4 nodes x 8 GPUs") and f"--nproc-per-node {nproc}" in said, said
    # the files' 32 GPUs is the same job as --gpus 32 says it
    flagged = _audit("--launch", str(_script(tmp_path, "8")), "--cluster", "dgx-h100")
    assert flagged["estimate"]["step_time_s"] == doc["estimate"]["step_time_s"]


def test_an_allocation_of_other_hosts_is_refused(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--launch", str(_script(tmp_path, "gpu")),
                                    "--slurm-topology", str(TREE), "--nodelist", "gpu[0001-0008]", "--node-type",
                                    "dgx-h100"])
    assert out.exit_code == 2
    assert "the launch files start 32 processes" in out.output and "--nodelist 'gpu[0001-0004]'" in out.output


def test_deepspeeds_num_nodes_without_its_hostfile(tmp_path: Path) -> None:
    """`deepspeed --num_nodes 4` runs the hostfile's first 4 hosts (DeepSpeed runner.py main), each with its slots;
    without the hostfile among the files it was priced on dgx-h100's default 1,024 GPUs: now 4 nodes of 8, the
    slots assumed each node's GPUs, and said."""
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4, '
                      '"bf16": {"enabled": true}, "zero_optimization": {"stage": 1}}')
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\ndeepspeed --num_nodes 4 --hostfile /job/hostfile pretrain_gpt.py "
                      + ARGS.replace("--global-batch-size 1024", "--global-batch-size 64")
                      + " --no-pipeline-parallel --deepspeed --deepspeed_config ds.json\n")
    doc = _audit("--launch", str(script), "--launch", str(config), "--cluster", "dgx-h100")
    assert doc["estimate"]["num_gpus"] == 32 and doc["layout"]["dp"] == 16
    said = doc["layout"]["sources"]["launcher_nodes"]
    assert "the hostfile's first 4 hosts" in said and "assumed all its GPUs" in said, said


@pytest.mark.parametrize("nproc", ["gpu", "auto"])
@pytest.mark.parametrize("header", ["--gpus-per-node=4", "--gpus-per-node=h100:4", "--gres=gpu:h100:4"])
def test_one_process_per_gpu_the_header_gives_each_node(tmp_path: Path, nproc: str, header: str) -> None:
    """`#SBATCH --gpus-per-node=4` on 8-GPU nodes: SLURM shows each node's processes 4 GPUs (its gres plugin sets
    CUDA_VISIBLE_DEVICES), so torch.cuda.device_count() is 4 and the job 16 GPUs; a GPU type before the count
    (sbatch(1) --gpus-per-node=[type:]<number>) says the same (a QA trial: `--gpus-per-node=h100:4` was not read, and
    the job priced on the 4 nodes' 32 GPUs)."""
    doc = _audit("--launch", str(_script(tmp_path, nproc, f"#SBATCH {header}\n")), "--cluster", "dgx-h100")
    assert doc["estimate"]["num_gpus"] == 16
    assert "one process per GPU the node shows" in doc["layout"]["sources"]["gpus_per_node"]


def test_more_processes_than_the_header_gives_a_node_do_not_start(tmp_path: Path) -> None:
    """A QA trial: `#SBATCH --gpus-per-node=4` with `torchrun --nproc_per_node=8` was priced as 8 a node, where
    local ranks 4-7 find no GPU."""
    out = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--launch",
                                    str(_script(tmp_path, "8", "#SBATCH --gpus-per-node=4\n"))])
    assert out.exit_code == 2
    for fact in ("torchrun --nproc_per_node 8", "the job's nodes show each process 4 GPUs", "#SBATCH --gpus-per-node=4",
                 "local ranks 4 to 7", "--nproc_per_node 4"):
        assert fact in out.output, (fact, out.output)
