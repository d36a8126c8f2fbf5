"""NVIDIA's dgxc-benchmarking DeepSeek-V3 torchtitan launch.sh (deepseek_v3/pretrain/torchtitan at 841f5466,
2026-07-30), as a QA run audited it: it lower-cases its GPU type (`GPU_TYPE=${GPU_TYPE,,}`) before testing it, writes
its output folder under $SLURM_JOB_ID, writes `--debug.moe_force_load_balance` bare and picks DeepEP with
`--parallelism.expert_parallel_comm_backend=deepep`.  The four were refused, refused, refused and priced as the
all-to-all dispatcher with real routing, in turn.  The scripts here keep the launch's shape, not its text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from placement.audit.launch import parse_launch
from placement.errors import InputError

TOML = """[model]
name = "deepseek_v3"
flavor = "671B"

[training]
local_batch_size = 16
seq_len = 4096

[parallelism]
data_parallel_replicate_degree = 1
data_parallel_shard_degree = -1
tensor_parallel_degree = 1
pipeline_parallel_degree = 1
expert_parallel_degree = 1
expert_tensor_parallel_degree = 1

[activation_checkpoint]
mode = "full"
"""


def _launch(tmp_path: Path, body: str, extra: str = "") -> Path:
    (tmp_path / "deepseek_v3_671b.toml").write_text(TOML)
    script = tmp_path / "launch.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=128\n#SBATCH --ntasks-per-node=8\n" + body + "\n"
                      'TRAIN_CMD="LOCAL_RANK=\\$SLURM_LOCALID; python -m torchtitan.train '
                      '--job.config_file=/repo/deepseek_v3_671b.toml --parallelism.data_parallel_shard_degree=128 '
                      f'--parallelism.pipeline_parallel_degree=8 {extra}"\n'
                      'srun --container-image="$IMAGE" bash -c "$TRAIN_CMD"\n')
    return script


def _read(tmp_path: Path, body: str, extra: str = ""):
    return parse_launch([_launch(tmp_path, body, extra), tmp_path / "deepseek_v3_671b.toml"])


def test_case_modification_of_a_variable_is_expanded_as_bash_does(tmp_path: Path) -> None:
    """`${X,,}` `${X^^}` `${X,}` `${X^}` (bash(1) case modification): the branch on the lower-cased value is read."""
    body = ('export GPU_TYPE=H100\nexport GPU_TYPE=${GPU_TYPE,,}\nNAME=ep\n'
            'if [[ $GPU_TYPE == "h100" ]]; then\n    EP=${EP:-64}\nelse\n    EP=8\nfi\n'
            'UP=${NAME^^}\nFIRST=${GPU_TYPE^}\n')
    lay = _read(tmp_path, body, "--parallelism.expert_parallel_degree=$EP --job.description=${UP}_$FIRST")
    assert lay.ep == 64, lay.sources.get("ep")


def test_an_output_path_left_to_the_job_environment_is_read_but_a_layout_value_is_not(tmp_path: Path) -> None:
    """`--job.dump_folder=$LLMB_OUTPUT_DIR` (under $SLURM_JOB_ID) names a folder, which no price depends on; a layout
    key left so is still an error naming it."""
    body = "export LLMB_OUTPUT_DIR=/runs/job_${SLURM_JOB_ID}/outputs\n"
    lay = _read(tmp_path, body, "--job.dump_folder=$LLMB_OUTPUT_DIR --training.dataset_path=$DATASET_PATH "
                                "--model.hf_assets_path $ASSETS")
    assert lay.pp == 8
    with pytest.raises(InputError) as err:
        _read(tmp_path, body, "--parallelism.expert_parallel_degree=$EP_SIZE")
    assert "--parallelism.expert_parallel_degree depends on $EP_SIZE" in str(err.value)


@pytest.mark.parametrize("flag", ["--debug.moe_force_load_balance", "--checkpoint.last_save_model_only",
                                  "--debug.deterministic"])
def test_a_bool_key_written_bare_is_on(tmp_path: Path, flag: str) -> None:
    """tyro (and argparse's store_true before it) takes a bool key written bare as on, whatever its name."""
    lay = _read(tmp_path, "", f"{flag} --activation_checkpoint.mode=none")
    assert lay.recompute == "none"  # the flag after it read as the next key, not as its value


def test_the_expert_parallel_backend_and_forced_balanced_routing_are_priced_as_stated(tmp_path: Path) -> None:
    lay = _read(tmp_path, "", "--parallelism.expert_parallel_degree=64 "
                              "--parallelism.expert_parallel_comm_backend=deepep --debug.moe_force_load_balance")
    assert lay.recipe["moe_dispatcher"] == "deepep"
    assert "expert_parallel_comm_backend=deepep" in lay.sources["recipe.moe_dispatcher"]
    assert lay.recipe["routing_imbalance"] == 1.0
    assert "--debug.moe_force_load_balance" in lay.sources["recipe.routing_imbalance"]
    standard = _read(tmp_path, "", "--parallelism.expert_parallel_degree=64 "
                                   "--parallelism.expert_parallel_comm_backend=standard")
    assert standard.recipe["moe_dispatcher"] == "alltoall" and "routing_imbalance" not in standard.recipe
    # DeepSeek-V3 refuses DeepEP at ep 1 (v0.2.2 models/deepseek_v3/infra/parallelize.py:100-112), where this read
    # "no effect without expert parallelism"
    with pytest.raises(InputError, match=re.escape("DeepEP requires expert parallelism (ep_degree > 1)")):
        _read(tmp_path, "", "--parallelism.expert_parallel_comm_backend=deepep")


def test_the_default_backend_is_said_with_its_source(tmp_path: Path) -> None:
    """Files that name no backend run torchtitan's 'standard' all-to-all: priced so and said so, as Megatron's
    allgather default is (a QA run: the sources listed no dispatcher at all)."""
    lay = _read(tmp_path, "", "--parallelism.expert_parallel_degree=64")
    assert lay.recipe["moe_dispatcher"] == "alltoall"
    assert "torchtitan's default token dispatcher, 'standard'" in lay.sources["recipe.moe_dispatcher"]
    assert "moe_dispatcher" not in _read(tmp_path, "").recipe  # no expert parallelism: no dispatcher


def test_a_best_plan_without_the_jobs_backend_says_so_in_its_source_and_changes(tmp_path: Path) -> None:
    """placement's torchtitan files run the all-to-all dispatcher only: the best plan's source says that, not the
    job's DeepEP key, and the change list names the key it drops."""
    import json

    from click.testing import CliRunner

    from placement.cli import main

    script = _launch(tmp_path, "", "--parallelism.expert_parallel_degree=64 "
                                   "--parallelism.expert_parallel_comm_backend=deepep")
    result = CliRunner().invoke(main, ["audit", "--launch", str(script), "--launch",
                                       str(tmp_path / "deepseek_v3_671b.toml"), "--model", "deepseek-v3",
                                       "--cluster", "dgx-h100", "--gpus", "1024", "--json"])
    assert result.exit_code in (0, 1) and "Traceback" not in result.output, result.output
    data = json.loads(result.output)
    assert data["estimate"]["recipe"]["moe_dispatcher"] == "deepep"
    assert data["best"]["recipe"]["moe_dispatcher"] == "alltoall"
    assert "run alltoall only" in data["best"]["recipe_sources"]["moe_dispatcher"]
    change = next(c for c in data["changes"] if "comm_backend" in c["argument"])
    assert (change["argument"], change["from"], change["to"]) == (
        "--parallelism.expert_parallel_comm_backend", "deepep", "standard")
