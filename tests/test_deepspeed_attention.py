"""The attention a DeepSpeed job runs is its model code's: the audit prices what ds_topology.py states, and for a
training script of the user's own that states nothing, says what it assumed (it priced a cuDNN-class kernel,
unsaid)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main
from placement.errors import InputError

CONFIG = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8, "bf16": {"enabled": True},
          "zero_optimization": {"stage": 2}}


def _files(tmp_path, topology: str | None = None) -> list:
    (tmp_path / "run.sh").write_text("deepspeed --num_gpus 8 train.py --deepspeed --deepspeed_config ds.json\n")
    (tmp_path / "ds.json").write_text(json.dumps(CONFIG))
    files = [tmp_path / "run.sh", tmp_path / "ds.json"]
    if topology is not None:
        (tmp_path / "ds_topology.py").write_text(topology)
        files.append(tmp_path / "ds_topology.py")
    return files


def test_a_script_of_its_own_is_priced_with_sdpa_and_says_so(tmp_path):
    launch = parse_launch(_files(tmp_path), "deepspeed")
    assert launch.recipe["attention_kernel"] == "flash2"
    assert launch.sources["recipe.attention_kernel"].startswith("assumed:")
    assert "attention_kernel: unfused" in launch.sources["recipe.attention_kernel"]


def test_ds_topology_states_the_kernel(tmp_path):
    topo = ("from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology\n"
            "topology = PipeModelDataParallelTopology(num_pp=1, num_mp=1, num_dp=8)\nattention_kernel = 'unfused'\n")
    launch = parse_launch(_files(tmp_path, topo), "deepspeed")
    assert launch.recipe["attention_kernel"] == "unfused"
    assert "ds_topology.py:3" in launch.sources["recipe.attention_kernel"]
    with pytest.raises(InputError, match="attention_kernel must be one of flash, flash2, unfused"):
        parse_launch(_files(tmp_path, topo.replace("'unfused'", "'naive'")), "deepspeed")


def test_the_unfused_assumption_changes_the_price(tmp_path):
    """The kernel the files state is what is priced: an unfused attention at 8192 tokens costs llama3-8b more."""
    def step(files) -> float:
        args = ["audit", "--model", "llama3-8b", "--gpus", "8", "--json"]
        for f in files:
            args += ["--launch", str(f)]
        result = CliRunner().invoke(main, args)
        assert result.exit_code in (0, 1), result.output
        return json.loads(result.stdout)["estimate"]["step_time_s"]

    topo = ("from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology\n"
            "topology = PipeModelDataParallelTopology(num_pp=1, num_mp=1, num_dp=8)\nrecompute = 'full'\n")
    sdpa = step(_files(tmp_path, topo))
    eager = step(_files(tmp_path, topo + "attention_kernel = 'unfused'\n"))
    assert eager > sdpa * 1.05
