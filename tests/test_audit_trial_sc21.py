"""A user trial audited real Megatron-LM launch material (the SC21 paper scripts, Megatron-DeepSpeed's Llama 2
example, the gpt-oss and Mixtral examples) and found the audit describing jobs the files do not run.  Each test
below fails without its fix."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from click.testing import CliRunner

from placement.audit.changes import NOT_IN_FILES, _env_from_files
from placement.calibration.validate import load_runs, predict
from placement.cli import evaluate_command, main

SC21 = Path(__file__).parent / "data" / "audit" / "megatron" / "sc21"
ARGS = SC21 / "args_table1_1.7B.txt"
"""CONFIG.sh's MEGATRON_PARAMS for run_table_1.sh's 1.7B case, expanded (Megatron-LM
examples/academic_paper_scripts/sc21, commit d98e8a64dd)."""


def _audit(*argv: str) -> object:
    return CliRunner().invoke(main, ["--reproducible", "audit", *argv])


def _json(*argv: str) -> dict:
    out = _audit(*argv, "--json")
    assert out.exit_code in (0, 1), out.output[-1500:]
    return json.loads(out.stdout)


SC21_ARGS = ("--launch", str(ARGS), "--model", "megatron-gpt-1.7b", "--cluster", "dgx-a100-80g", "--gpus", "32")


def test_activations_checkpoint_method_alone_is_full_recompute() -> None:
    """The SC21 scripts turn on recompute with `--activations-checkpoint-method uniform` (Megatron-LM 2021-08 to
    2022-05); the audit priced no recompute, 93 GiB on an 80 GB A100, and said the job ran out of memory."""
    data = _json(*SC21_ARGS)
    assert data["estimate"]["layout"]["recompute"] == "full"
    assert data["estimate"]["fits"] is True
    source = data["layout"]["sources"]["recompute"]
    assert "--activations-checkpoint-method uniform" in source and "c1e0689d92" in source
    assert not any(f["kind"] == "memory_over_capacity" for f in data["findings"])


def test_block_method_recomputes_that_many_layers(tmp_path: Path) -> None:
    path = tmp_path / "block.txt"
    path.write_text(ARGS.read_text().replace("--activations-checkpoint-method uniform",
                                             "--activations-checkpoint-method block "
                                             "--activations-checkpoint-num-layers 6"))
    data = _json("--launch", str(path), *SC21_ARGS[2:])
    assert data["estimate"]["recipe"]["recompute_num_layers"] == 6
    bad = tmp_path / "bad.txt"
    bad.write_text(ARGS.read_text().replace("method uniform", "method everything"))
    out = _audit("--launch", str(bad), *SC21_ARGS[2:])
    assert out.exit_code == 2 and "--activations-checkpoint-method must be uniform or block" in out.output


def test_a_value_on_a_long_line_quotes_its_argument() -> None:
    """One-line argument lists quoted the line's head and tail beside every value, not the argument read."""
    sources = _json(*SC21_ARGS)["layout"]["sources"]
    assert sources["micro_batch_size"] == f"{ARGS}:3: ... --micro-batch-size 16 ..."
    assert sources["tp"] == f"{ARGS}:3: ... --tensor-model-parallel-size 1 ..."


def test_arguments_held_by_an_unset_variable_are_an_error() -> None:
    """SRUN.sh runs `pretrain_gpt.py ${MEGATRON_PARAMS}`, which CONFIG.sh sets through sbatch --export: the audit
    priced a job of every default (micro-batch 1, no recompute) and compared it with the published run."""
    out = _audit("--launch", str(SC21 / "SRUN.sh"), "--model", "megatron-gpt-1.7b", "--cluster", "dgx-a100-80g",
                 "--gpus", "32")
    assert out.exit_code == 2
    assert "are ${MEGATRON_PARAMS}, which the files do not set" in out.output
    assert "Traceback" not in out.output


def test_arguments_read_from_a_here_document_say_so(tmp_path: Path) -> None:
    """The same variable filled by `read ... <<EOF`: the error names the here-document, not the environment."""
    path = tmp_path / "heredoc.sh"
    path.write_text('#!/bin/bash\nread -r -d "" ARGS <<EOF\n--tensor-model-parallel-size 2\nEOF\n'
                    'torchrun pretrain_gpt.py $ARGS\n')
    out = _audit("--launch", str(path), "--model", "llama3-8b", "--gpus", "8")
    assert out.exit_code == 2 and "a here-document read into $ARGS" in out.output


def test_a_published_run_with_the_same_degrees_but_another_recipe_is_not_this_job() -> None:
    """`published run of this job` matched on the degrees alone: the SC21 1.7B row (full recompute) was the
    "published run" of a launch priced without recompute, -50.9 %."""
    run = {r.id: r for r in load_runs()}["megatron-ptdp-2021-t1-gpt1p7b"]
    res = predict(run)
    argv = shlex.split(evaluate_command(run, res.layout, res.recipe))[2:]
    argv[argv.index("--recompute") + 1] = "none"
    out = CliRunner().invoke(main, ["evaluate", *argv, "--json"])
    assert out.exit_code in (0, 1), out.output[-800:]  # 1: micro-batch 16 without recompute does not fit
    best = json.loads(out.stdout)["published_best"]
    assert best["same_job"] is None
    assert best["similar_job"]["run"] == run.id
    assert "recompute full there, none here" in best["similar_job"]["differences"]
    text = CliRunner().invoke(main, ["evaluate", *argv]).stdout
    assert f"published run with these degrees: {run.id} measured 3.53 s/step, but it ran otherwise" in text
    assert "published run of this job" not in text


def test_megatron_deepspeed_kv_heads_are_the_models(tmp_path: Path) -> None:
    """Megatron-DeepSpeed's --num-key-value-heads (arguments.py :623) was not read: a 4-KV-head job priced with the
    model's 8 (llama3-8b)."""
    path = tmp_path / "mds.sh"
    path.write_text("#!/bin/bash\ndeepspeed pretrain_gpt.py --tensor-model-parallel-size 1 --num-layers 32 "
                    "--hidden-size 4096 --num-attention-heads 32 --num-key-value-heads 4 --swiglu "
                    "--ffn-hidden-size 14336 --seq-length 4096 "
                    "--micro-batch-size 1 --global-batch-size 64 --bf16 --deepspeed --deepspeed_config ds.json\n")
    (tmp_path / "ds.json").write_text(json.dumps({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1,
                                                  "bf16": {"enabled": True}, "zero_optimization": {"stage": 1}}))
    out = _audit("--launch", str(path), "--model", "llama3-8b", "--gpus", "64")
    assert out.exit_code == 2
    assert "num_query_groups = 4" in out.output and "--num-key-value-heads 4" in out.output


def test_layers_pp_does_not_divide_do_not_start(tmp_path: Path) -> None:
    """Megatron-LM asserts num_layers % pp == 0 without an uneven split; the audit priced placement's own split and
    suggested `--pp 7`, which Megatron refuses as well."""
    path = tmp_path / "pp.txt"
    path.write_text(ARGS.read_text().replace("--pipeline-model-parallel-size 1", "--pipeline-model-parallel-size 5"))
    out = _audit("--launch", str(path), *SC21_ARGS[2:6], "--gpus", "40")
    assert out.exit_code == 2, out.output[-800:]
    assert "pipeline parallel size 5" in out.output and "does not divide 24 layers = 24" in out.output
    assert "(2, 3, 4, 6, 8, 12, 24)" in out.output and "try --pp" not in out.output
    even = tmp_path / "even.txt"
    even.write_text(path.read_text().replace("--pipeline-model-parallel-size 5",
                                             "--pipeline-model-parallel-size 5 --decoder-first-pipeline-num-layers 4 "
                                             "--decoder-last-pipeline-num-layers 5"))  # 15 left over 3 ranks
    assert _audit("--launch", str(even), *SC21_ARGS[2:6], "--gpus", "40").exit_code in (0, 1)


def test_an_environment_change_starts_from_the_files_value() -> None:
    """The change list's launched side is placement's spelling: it listed `+ CUDA_DEVICE_MAX_CONNECTIONS 1` for a
    script that exports 1, and `- ... 1` for one that sets nothing."""
    key = "env CUDA_DEVICE_MAX_CONNECTIONS"
    exported = "export CUDA_DEVICE_MAX_CONNECTIONS=1\ntorchrun pretrain_gpt.py\n"
    assert _env_from_files([{"argument": key, "from": None, "to": "32"}], exported) == [
        {"argument": key, "from": "1", "to": "32"}]
    assert _env_from_files([{"argument": key, "from": "1", "to": "1"}], exported) == []
    assert _env_from_files([{"argument": key, "from": "1", "to": None, "note": NOT_IN_FILES}],
                           "torchrun pretrain_gpt.py\n") == []


def test_the_headline_says_what_runs_where_it_is_priced_as_another() -> None:
    """A --fp16 job's headline said `bf16`; a script without --fp8-recipe (Megatron's delayed scaling) said `fp8
    tensorwise`, another Megatron recipe; `layers per stage 6/6/6` on pp 16 read as three stages."""
    text = _audit(*SC21_ARGS).stdout
    assert "global batch 512, fp16 (priced as bf16: the same tensor-core rate)" in text
    fp8 = Path(__file__).parent / "data" / "audit" / "megatron" / "train_llama3_8b_h100_fp8.sh"
    assert "--fp8-recipe" not in fp8.read_text()
    text = _audit("--launch", str(fp8), "--model", "llama3-8b").stdout
    assert "fp8 delayed (priced as tensorwise)" in text
    gpt3 = Path(__file__).parent / "data" / "audit" / "megatron" / "train_gpt3_175b_distributed.sh"
    text = _audit("--launch", str(gpt3), "--model", "gpt3-175b", "--cluster", "dgx-a100-80g", "--gpus", "1024").stdout
    assert "layers per stage 6/6/6 (first/busiest middle/last rank)" in text
