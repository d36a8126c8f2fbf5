"""Inputs past their bounds are bad input (exit 2, one paragraph naming the limit), never a crash or a hang:
unbounded files, repeat counts past the layout size (issue: robustness, part two)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.loaders.files import MAX_INPUT_BYTES

DATA = Path(__file__).parent / "data"
JOB = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--seq-len", "4096", "--global-batch", "64"]


def _run(argv):
    result = CliRunner().invoke(main, argv)
    assert "Traceback" not in result.output
    return result


@pytest.mark.parametrize("argv", [
    ["plan", "--model", "llama3-8b", "--slurm-topology", "/dev/zero", "--nodelist", "gpu[0001-0002]",
     "--node-type", "dgx-h100"],
    ["plan", "--model", "llama3-8b", "--slurm-topology", str(DATA / "slurm" / "tree-5leaf.conf"),
     "--nodelist", "@/dev/zero", "--node-type", "dgx-h100"],
    ["plan", *JOB, "--node-topo", "/dev/zero"],
    ["audit", *JOB, "--launch", "/dev/zero"],
    ["plan", "--model", "/dev/zero", "--gpus", "8"],
], ids=["topology", "nodelist", "node-topo", "launch", "model"])
def test_an_endless_file_is_refused_at_the_read_limit(argv):
    result = _run(argv)
    assert result.exit_code == 2, result.output
    assert "/dev/zero" in result.stderr


def test_a_file_past_the_limit_names_the_limit(tmp_path):
    big = tmp_path / "topology.conf"
    with open(big, "wb") as fh:
        fh.seek(MAX_INPUT_BYTES)
        fh.write(b"\n")
    result = _run(["plan", "--model", "llama3-8b", "--slurm-topology", str(big), "--nodelist", "gpu[0001-0002]",
                   "--node-type", "dgx-h100"])
    assert result.exit_code == 2
    assert f"larger than the {MAX_INPUT_BYTES // 2**20} MiB placement reads" in result.stderr


def test_a_pipeline_layout_repeat_past_the_size_bound_is_bad_input():
    result = _run(["plan", *JOB, "--pipeline-layout", "(t|)*99999999999999999999L"])
    assert result.exit_code == 2
    assert "past the 1048576 a layout may hold; check the repeat count" in result.stderr


def test_first_k_dense_replace_past_the_layers_is_bad_input(tmp_path):
    import json

    cfg = json.loads((DATA / "hf" / "deepseek-v3" / "config.json").read_text())
    cfg["first_k_dense_replace"] = cfg["num_hidden_layers"] + 39
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    result = _run(["show", "model", str(tmp_path / "config.json")])
    assert result.exit_code == 2
    assert "`first_k_dense_replace` = 100" in result.stderr


def test_a_hostfile_slot_count_of_zero_is_bad_input(tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("node1 slots=0\nnode2 slots=8\n")
    result = _run(["audit", *JOB, "--launch", str(hostfile)])
    assert result.exit_code == 2
    assert "host node1 has slots=0" in result.stderr


def test_a_hostlist_in_a_deepspeed_hostfile_is_bad_input(tmp_path):
    """DeepSpeed takes `node[01-04] slots=8` as one host of 8 GPUs (its pdsh runner then expands it): a user trial's
    audit read it as one host named node[01-04]."""
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("node[01-04] slots=8\n")
    result = _run(["audit", *JOB, "--launch", str(hostfile)])
    assert result.exit_code == 2
    assert "'node[01-04]' is a SLURM hostlist; a DeepSpeed hostfile names one host per line" in result.stderr


@pytest.mark.parametrize(("field", "value"), [("price_per_gpu_hour", 1e308), ("price_per_gpu_hour", float("inf")),
                                              ("price_per_gpu_hour", float("nan"))])
def test_a_sweep_price_out_of_range_is_bad_input_not_infinity(tmp_path, field, value):
    import yaml

    from tests.test_sweep import SMALL

    spec = dict(SMALL, designs=[dict(SMALL["designs"][0], **{field: value})])
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = _run(["sweep", str(path), "--out", str(tmp_path / "out"), "--json", "--workers", "1"])
    assert result.exit_code == 2, result.output
    assert field in result.stderr and "Infinity" not in result.stdout


@pytest.mark.parametrize(("script", "says"), [
    ("A=(1 2)\ntorchrun --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size ${A[0*]}\n", "depends on"),
    ("A=(1 2)\ntorchrun --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size ${A[@@]}\n", "depends on"),
    ("torchrun --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size $(( 10 ** 5000 ))\n", "depends on"),
    ("torchrun --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size $(( 1" + "+1" * 5000 + " ))\n",
     "depends on"),
], ids=["subscript-star", "subscript-at-at", "huge-arithmetic", "long-arithmetic"])
def test_shell_values_the_reader_cannot_know_are_named_not_crashed(tmp_path, script, says):
    path = tmp_path / "launch.sh"
    path.write_text(script)
    result = _run(["audit", *JOB, "--launch", str(path)])
    assert result.exit_code == 2 and says in result.stderr


def test_a_quoted_brace_inside_a_default_is_read_as_bash_reads_it(tmp_path):
    path = tmp_path / "launch.sh"
    path.write_text("torchrun --nproc-per-node ${NP:-'8'} pretrain_gpt.py --tensor-model-parallel-size 2 "
                    "--seq-length 4096 --micro-batch-size 1 --global-batch-size 64 --data-path ${D:-'}'} "
                    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --swiglu --ffn-hidden-size 14336 "
                    "--group-query-attention --num-query-groups 8 --bf16\n")
    result = _run(["audit", *JOB, "--launch", str(path), "--json"])
    assert result.exit_code in (0, 1), result.output


@pytest.mark.parametrize("yaml_text", ["model:\n  tensor_model_parallel_size: 2\n  1: 3\n",
                                       "model:\n  tensor_model_parallel_size: 2\n  null: 4\n",
                                       "1:\n  x: 2\nmodel:\n  tensor_model_parallel_size: 2\n"])
def test_bridge_yaml_with_keys_that_are_not_names(tmp_path, yaml_text):
    path = tmp_path / "config.yaml"
    path.write_text(yaml_text + "train:\n  micro_batch_size: 1\n")
    result = _run(["audit", *JOB, "--launch", str(path)])
    assert result.exit_code == 2 and "quote it or remove it" in result.stderr


@pytest.mark.parametrize(("argv", "says"), [
    (["evaluate", *JOB, "--mbs", "9223372036854775808"], "less than or equal to 16777216"),
    (["evaluate", *JOB, "--tp", str(2**40)], "does not divide the 8 GPUs"),
], ids=["mbs-2^63", "tp-2^40"])
def test_degrees_past_int64_products_are_bad_input(argv, says):
    result = _run(argv)
    assert result.exit_code == 2 and says in result.stderr


def test_a_deepspeed_micro_batch_of_2_63_is_one_paragraph(tmp_path):
    path = tmp_path / "ds_config.json"
    path.write_text('{"train_micro_batch_size_per_gpu": 9223372036854775808, "gradient_accumulation_steps": 1, '
                    '"bf16": {"enabled": true}}')
    result = _run(["audit", *JOB, "--launch", str(path)])
    assert result.exit_code == 2 and "\n" not in result.stderr.strip()
    # the files' batch (micro-batch x accumulation x dp) disagrees with --global-batch: named with its numbers
    assert "micro-batch 9223372036854775808 x accumulation 1 x dp 8" in result.stderr


@pytest.mark.parametrize("run", ["then ", "do ", "then do ", "else "])
def test_a_line_of_thousands_of_keywords_neither_recurses_nor_crawls(tmp_path, run):
    """`do do do ... cmd`: each keyword ran the rest by recursion and lexed it again (RecursionError at 1,000;
    a minute at 5,000).  Now bash's grammar reads the line once: a `then`, `do` or `else` that no `if` or loop
    opened is bash's syntax error, named with its line."""
    import time

    path = tmp_path / "launch.sh"
    path.write_text(run * 5000 + "torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2\n")
    start = time.perf_counter()
    result = _run(["audit", *JOB, "--launch", str(path)])
    assert time.perf_counter() - start < 10.0
    assert result.exit_code == 2
    assert f"launch.sh:1: {run * 3}" in result.stderr and f"`{run.split()[0]}` here belongs to no" in result.stderr
    assert len(result.stderr) < 1000  # the 25,000-character line is shown shortened


def test_toml_tables_nested_past_the_depth_limit_are_named(tmp_path):
    """A 5,000-level dotted table header: the flattening recursed (RecursionError); now iterative, with a limit."""
    from placement.audit.launch import TOML_MAX_DEPTH

    path = tmp_path / "train.toml"
    path.write_text('[job]\ndump_folder = "./out"\n[' + ".".join(["t"] * 5000) + "]\nx = 1\n")
    result = _run(["audit", *JOB, "--launch", str(path)])
    assert result.exit_code == 2
    assert f"nest deeper than {TOML_MAX_DEPTH} levels" in result.stderr


def test_a_fifo_nobody_writes_to_is_an_error_not_a_wait(tmp_path, monkeypatch):
    import os

    from placement.loaders import files

    monkeypatch.setattr(files, "PIPE_WAIT_S", 0.1)
    fifo = tmp_path / "launch.sh"
    os.mkfifo(fifo)
    result = _run(["audit", *JOB, "--launch", str(fifo)])
    assert result.exit_code == 2
    assert "is a pipe that sent nothing for 0.1 s" in result.stderr


@pytest.mark.parametrize(("name", "text", "flag", "says"), [
    ("recipe.yaml", "", "--recipe", "the recipe file names no field"),  # nothing read: not the defaults
    ("recipe.yaml", "# only a comment\n", "--recipe", "the recipe file names no field"),
    ("recipe.yaml", "{}\n", "--recipe", "the recipe file names no field"),
    ("recipe.yaml", 'checkpoint_sync: "yes"\n', "--recipe", "checkpoint_sync must be true or false, got 'yes'"),
    ("recipe.yaml", "cpu_affinity: 1\n", "--recipe", "cpu_affinity must be true or false, got 1"),
    ("recipe.yaml", "checkpoint_interval: true\n", "--recipe", "checkpoint_interval must be a number, got True"),
    ("recipe.yaml", 'checkpoint_interval: "2"\n', "--recipe", "checkpoint_interval must be a number, got '2'"),
    ("hostfile", "node1 slots=8.5\n", "--launch", "the slot count is not a whole number"),  # DeepSpeed reads 8
    ("hostfile", "node1 slots=1e400\n", "--launch", "the slot count is not a whole number"),
    ("hostfile", "node1 slots=8x\n", "--launch", "the slot count is not a whole number"),
])
def test_a_file_that_says_nothing_usable_is_bad_input(tmp_path, name, text, flag, says):
    path = tmp_path / name
    path.write_text(text)
    result = _run(["audit" if flag == "--launch" else "plan", *JOB, flag, str(path)])
    assert result.exit_code == 2
    assert says in result.stderr


def test_an_empty_out_folder_name_is_refused(tmp_path, monkeypatch):
    """`--out ""` used to write into the current folder."""
    from click.testing import CliRunner

    from placement.cli import main

    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--gpus", "8", "--out", ""])
    assert res.exit_code == 2 and "an empty folder name" in res.stderr and not any(tmp_path.iterdir())


@pytest.mark.parametrize("flag", ["--nccl", "--steps"])
def test_calibrate_reads_its_measurement_files_within_the_limit_and_a_pipe_once(tmp_path, flag):
    """A user trial: `calibrate --nccl /dev/zero` read until the OOM killer stopped it (the check that a file is not
    given twice hashed it whole before the bounded reader), and a pipe (`<(cat f)`) was emptied by that check and
    then read as an empty file."""
    import os
    import threading

    out = ["--cluster", "dgx-h100", "--gpus", "80", "--out", str(tmp_path / "p.yaml")]
    result = _run(["calibrate", flag, "/dev/zero", *out])
    assert result.exit_code == 2, result.output
    assert f"{flag} file `/dev/zero` is larger than the {MAX_INPUT_BYTES // 2**20} MiB placement reads" \
        in result.stderr
    if flag == "--steps":
        return
    fifo = tmp_path / "all_reduce.pipe"
    os.mkfifo(fifo)
    text = (DATA / "nccl" / "h100-10node-all_reduce_perf.txt").read_text()
    writer = threading.Thread(target=fifo.write_text, args=(text,))
    writer.start()
    result = _run(["calibrate", "--nccl", str(fifo), *out])
    writer.join()
    assert result.exit_code == 0, result.output
    assert "is empty" not in result.output
