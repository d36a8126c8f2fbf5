"""A batch script's `#SBATCH --nodelist` (`-w`) names the hosts the job holds (sbatch(1) -w), its whole node list
where no node count asks for more.  A QA trial: a script asking `#SBATCH --nodelist=gpu[0036-0039]` was refused by
`audit --slurm-topology` for want of --nodelist, and priced without a word on a --nodelist gpu[0001-0004] given
instead (one leaf, where the header's hosts straddle leaf0 and leaf1 of tests/data/slurm/tree-5leaf.conf)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main

TREE = Path(__file__).parent / "data" / "slurm" / "tree-5leaf.conf"
ARGS = ("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 --num-layers 32 --hidden-size 4096 "
        "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
        "--global-batch-size 1024 --bf16 --ffn-hidden-size 14336 --swiglu --num-query-groups 8 --group-query-attention "
        "--normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights "
        "--disable-bias-linear --vocab-size 128256")


def _audit(tmp_path: Path, header: str, *flags: str) -> dict:
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n{header}#SBATCH --ntasks-per-node=1\nsrun torchrun --nproc_per_node 8 --nnodes 4 "
                      f"--node_rank $SLURM_NODEID pretrain_gpt.py {ARGS}\n")
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--slurm-topology",
                                    str(TREE), "--node-type", "dgx-h100", "--json", *flags])
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    assert out.stdout.startswith("{"), out.output
    return json.loads(out.stdout)


@pytest.mark.parametrize("header", ["#SBATCH --nodes=4\n#SBATCH --nodelist=gpu[0036-0039]\n",
                                    "#SBATCH -w gpu[0036-0039]\n"])
def test_the_headers_hosts_are_the_allocation_without_nodelist(tmp_path: Path, header: str) -> None:
    doc = _audit(tmp_path, header)
    assert doc["estimate"]["mapping_compact"]["host_order"] == [f"gpu{i:04d}" for i in range(36, 40)]
    assert "no --nodelist given" in doc["layout"]["sources"]["nodelist"]
    same = _audit(tmp_path, header, "--nodelist", "gpu[0036-0039]")
    assert same["estimate"]["step_time_s"] == doc["estimate"]["step_time_s"]
    assert not [f for f in same["findings"] if "is not the hosts the batch script asks for" in f["message"]]


def test_a_nodelist_of_other_hosts_is_warned(tmp_path: Path) -> None:
    doc = _audit(tmp_path, "#SBATCH --nodes=4\n#SBATCH --nodelist=gpu[0036-0039]\n", "--nodelist", "gpu[0001-0004]")
    (warning,) = [f for f in doc["findings"] if "is not the hosts the batch script asks for" in f["message"]]
    assert warning["severity"] == "warning" and "(gpu[0036-0039], " in warning["message"]
    assert doc["estimate"]["mapping_compact"]["host_order"] == [f"gpu{i:04d}" for i in range(1, 5)]


def test_a_node_count_past_the_list_leaves_the_hosts_open(tmp_path: Path) -> None:
    """`-N 8 -w gpu[0036-0039]`: the job holds those 4 and 4 more SLURM picks; the header fixes no node list."""
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH -N 8\n#SBATCH -w gpu[0036-0039]\n#SBATCH --ntasks-per-node=1\n"
                      f"srun torchrun --nproc_per_node 8 --nnodes 8 --node_rank $SLURM_NODEID pretrain_gpt.py {ARGS}\n")
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--slurm-topology",
                                    str(TREE), "--node-type", "dgx-h100"])
    assert out.exit_code == 2 and "--nodelist is required" in out.output


def test_a_nodelist_file_is_read_compared_and_cited(tmp_path: Path) -> None:
    """`--nodelist @FILE` beside the header's `#SBATCH --nodelist=gpu[0036-0039]` was never compared with it (an
    expression was), and its hosts carried no source: now they are read, cited and compared."""
    other = tmp_path / "other.hosts"
    other.write_text("gpu0001\ngpu0002\n# the rest\ngpu[0003-0004]\n")
    doc = _audit(tmp_path, "#SBATCH --nodes=4\n#SBATCH --nodelist=gpu[0036-0039]\n", "--nodelist", f"@{other}")
    (warning,) = [f for f in doc["findings"] if "is not the hosts the batch script asks for" in f["message"]]
    assert f"--nodelist @{other}" in warning["message"]
    assert doc["layout"]["sources"]["nodelist"].startswith(f"4 hosts read from {other}")
    same = tmp_path / "same.hosts"
    same.write_text("gpu[0036-0039]\n")
    doc = _audit(tmp_path, "#SBATCH --nodes=4\n#SBATCH --nodelist=gpu[0036-0039]\n", "--nodelist", f"@{same}")
    assert not [f for f in doc["findings"] if "is not the hosts the batch script asks for" in f["message"]]


@pytest.mark.parametrize("relative", [False, True])
def test_a_header_nodelist_file_is_read(tmp_path: Path, relative: bool) -> None:
    """`#SBATCH --nodelist=/path/hosts`: a value with a / is a file sbatch reads the hosts from (sbatch(1) -w; slurm
    src/common/proc_args.c verify_node_list).  The header's file was dropped without a word and the audit asked for
    --nodelist; now its hosts are the job's, citing the file, and a file that is not there is an error naming it."""
    hosts = tmp_path / "hosts" / "job.txt"
    hosts.parent.mkdir()
    hosts.write_text("gpu0036\ngpu0037\ngpu[0038-0039]  # the last two\n")
    name = "hosts/job.txt" if relative else str(hosts)  # relative: beside the script
    doc = _audit(tmp_path, f"#SBATCH --nodes=4\n#SBATCH --nodelist={name}\n")
    assert doc["estimate"]["mapping_compact"]["host_order"] == [f"gpu{i:04d}" for i in range(36, 40)]
    assert f"4 hosts read from {hosts}" in doc["layout"]["sources"]["nodelist"]
    script = tmp_path / "job.sh"
    script.write_text(script.read_text().replace(name, "./missing/hosts"))
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--slurm-topology",
                                    str(TREE), "--node-type", "dgx-h100"])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "the job's hosts are in the file ./missing/hosts" in out.output and "job.sh:3" in out.output
