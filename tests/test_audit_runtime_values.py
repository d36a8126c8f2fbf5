"""A user trial (t26, finding 6) on Alibaba's Pai-Megatron-Patch run_mcore_llama3_1.sh: values the job takes at run
time were refused even where the audit's own flags give them or bash's clean-environment reading fixes them.

- `torchrun --nproc_per_node $(python -c "...device_count()")` or `--nnodes $WORLD_SIZE` (a platform sets it):
  the world size is the command line's, as it already was for SLURM's `$SLURM_NNODES`;
- `if [ -z ${MP_VP} ]; then vp_options=""; else ...` was unknown, while `[ -z "${MP_VP:-}" ]`, the same test in
  bash, was read: a `-z`/`-n` test of a variable the files never set now reads it empty, and what the branch sets
  says the job's environment may set it."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.audit.shell import read_commands
from tests.test_audit import audit_json

MEGATRON_ARGS = ("pretrain_gpt.py --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
                 "--group-query-attention --num-query-groups 8 --swiglu --normalization RMSNorm --disable-bias-linear "
                 "--untie-embeddings-and-output-weights --position-embedding-type rope --seq-length 8192 "
                 "--max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 64 --bf16 "
                 "--tensor-model-parallel-size 2")


def _commands(tmp_path: Path, text: str):
    path = tmp_path / "run.sh"
    path.write_text(text)
    return [c for c in read_commands(path) if c.words[0].text == "torchrun"]


@pytest.mark.parametrize("nproc,nnodes", [('$(python -c "import torch; print(torch.cuda.device_count())")', "1"),
                                          ("8", "$WORLD_SIZE"), ("$GPUS_PER_NODE", "$NNODES")])
def test_a_launcher_count_the_running_job_gives_leaves_the_world_size_to_gpus(tmp_path: Path, nproc: str,
                                                                              nnodes: str) -> None:
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/bash\ntorchrun --nproc_per_node {nproc} --nnodes {nnodes} {MEGATRON_ARGS}\n")
    data = audit_json("--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16")
    assert data["layout"]["num_gpus"] == 16 and data["layout"]["dp"] == 8
    assert any("only the running job gives" in x and "--gpus/--nodes" in x for x in data["layout"]["ignored"])


def test_a_test_of_a_variable_the_files_never_set_reads_it_empty(tmp_path: Path) -> None:
    (cmd,) = _commands(tmp_path, (
        'if [ -z ${MP_VP} ]; then vp_options=""; else vp_options="--vp ${MP_VP}"; fi\n'
        'if [ -n "$PP" ]; then pp=$PP; else pp=2; fi\n'
        "torchrun x.py $vp_options --pp $pp\n"))
    assert [w.text for w in cmd.words] == ["torchrun", "x.py", "--pp", "2"]
    two = cmd.words[-1]
    assert not two.unresolved and not two.uncertain
    assert "the job's environment may set PP" in two.evidence and "run.sh:2" in two.evidence


def test_a_launch_inside_such_a_branch_says_so(tmp_path: Path) -> None:
    (cmd,) = _commands(tmp_path, 'if [[ -z $TP ]]; then torchrun x.py --tp 4; else torchrun x.py --tp $TP; fi\n')
    assert cmd.words[-1].text == "4" and "the job's environment may set TP" in cmd.words[-1].evidence


@pytest.mark.parametrize("test", ['[ "$NODE_RANK" == 0 ]', "[ -z $SLURM_JOB_ID ]", "[ -z $(hostname) ]",
                                  '[ -z "${A[3]}" ]'])
def test_other_unknown_tests_stay_unknown(tmp_path: Path, test: str) -> None:
    """An equality with an unset variable (NODE_RANK: the launcher's, per node), SLURM's variables (set in every job)
    and a command's output are not read as empty: the branch stays uncertain."""
    (cmd,) = _commands(tmp_path, f"if {test}; then TP=4; fi\ntorchrun x.py --tp ${{TP:-8}}\n")
    assert cmd.words[-1].uncertain
