"""Input a user trial gave that was priced or counted as something else: a measurement file given twice to
calibrate, a format named twice in --emit, validate's --cluster without runs of the user's own, and a DeepSpeed JSON
that states only train_batch_size (or states it as a string)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main
from placement.emit.writer import parse_formats

NCCL = Path(__file__).parent / "data" / "nccl" / "h100-2node-all_reduce_perf-ring.txt"


def test_calibrate_refuses_a_measurement_file_given_twice(tmp_path: Path) -> None:
    """The same nccl-tests file twice moved the fitted serial share (0.045 -> 0.039) and shrank its standard error
    by about sqrt(2); a copy of it under another name is the same measurements too."""
    copy = tmp_path / "copy.txt"
    shutil.copy(NCCL, copy)
    for second in (NCCL, copy):
        res = CliRunner().invoke(main, ["calibrate", "--cluster", "dgx-h100", "--gpus", "16", "--nccl", str(NCCL),
                                        "--nccl", str(second), "--out", str(tmp_path / "p.yaml")])
        assert res.exit_code == 2, res.output
        assert "count twice" in res.output and str(second) in res.output
    once = CliRunner().invoke(main, ["calibrate", "--cluster", "dgx-h100", "--gpus", "16", "--nccl", str(NCCL),
                                     "--out", str(tmp_path / "p.yaml")])
    assert once.exit_code == 0, once.output


def test_a_format_named_twice_is_written_once() -> None:
    assert parse_formats("megatron,megatron,torchtitan") == ["megatron", "torchtitan"]


def test_validate_cluster_without_runs_is_an_error() -> None:
    """--cluster names the cluster of --runs; alone it was taken silently and the published runs printed."""
    res = CliRunner().invoke(main, ["validate", "--cluster", "dgx-h100"])
    assert res.exit_code == 2 and "give --runs FILE" in res.output
    bad = CliRunner().invoke(main, ["validate", "--cluster", "nope", "--runs", "x.yaml"])
    assert bad.exit_code == 2 and "no cluster of that name" in bad.output


def _ds_audit(tmp_path: Path, config: dict) -> tuple[int, str]:
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(config))
    res = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64",
                                    "--launch", str(path), "--json"])
    return res.exit_code, res.output


def test_deepspeed_train_batch_size_alone_sets_the_micro_batch(tmp_path: Path) -> None:
    """DeepSpeed given only train_batch_size runs accumulation 1 and a micro-batch of train_batch_size / dp
    (runtime/config.py _set_batch_related_parameters): 512 over 64 ranks is micro-batch 8, not 1 x 8 steps."""
    code, out = _ds_audit(tmp_path, {"train_batch_size": 512, "bf16": {"enabled": True},
                                     "zero_optimization": {"stage": 3}})
    assert code in (0, 1), out
    data = json.loads(out)
    assert data["layout"]["micro_batch_size"] == 8
    assert data["estimate"]["layout"]["num_microbatches"] == 1


def test_deepspeed_batch_as_a_string_is_refused(tmp_path: Path) -> None:
    code, out = _ds_audit(tmp_path, {"train_batch_size": "512", "bf16": {"enabled": True}})
    assert code == 2 and "must be a JSON integer" in out


def test_an_output_folder_that_refuses_files_is_bad_input(tmp_path: Path, monkeypatch) -> None:
    """/proc and /sys pass the permission check as root but refuse files: exit 3 (internal error) before; now the
    folder is tried with a file first, and the message names the output and its folder."""
    res = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                                    "--out", "/proc"])
    assert res.exit_code == 2 and "--out /proc: no file can be written in it" in res.output
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    res = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                                    "--report", str(tmp_path / "r.html")])
    assert res.exit_code == 2
    assert f"--report {tmp_path / 'r.html'}: its folder {tmp_path}: no file can be written in it" in res.output


TT = Path(__file__).parent / "data" / "audit" / "torchtitan" / "llama3_70b.toml"


def test_a_torchtitan_launchs_environment_and_launcher_warnings_are_kept(tmp_path: Path) -> None:
    """The torchrun script's CUDA_LAUNCH_BLOCKING, NCCL_ALGO and dynamic rendezvous were read into the launch line's
    settings and then dropped when the TOML's were joined: priced without them and said nowhere (a user trial)."""
    script = tmp_path / "run.sh"
    script.write_text("export CUDA_LAUNCH_BLOCKING=1\nexport NCCL_ALGO=Ring\ntorchrun --nnodes 4 --nproc_per_node 8 "
                      "--rdzv_backend c10d --rdzv_endpoint node0:29500 -m torchtitan.train --job.config_file "
                      f"{TT.name}\n")
    res = CliRunner().invoke(main, ["audit", "--launch", str(script), "--launch", str(TT), "--model", "llama3-70b",
                                    "--cluster", "dgx-h100", "--json"])
    assert res.exit_code in (0, 1), res.output
    data = json.loads(res.stdout)
    assert data["estimate"]["recipe"]["cuda_launch_blocking"] is True
    assert "export CUDA_LAUNCH_BLOCKING=1" in data["estimate"]["recipe_sources"]["cuda_launch_blocking"]
    said = " ".join(f["message"] for f in data["findings"])
    assert "NCCL_ALGO=Ring" in said and "rendezvous" in said


def test_a_megatron_command_without_deepspeed_is_not_priced_as_deepspeed(tmp_path: Path) -> None:
    """placement's own megatron.sh audited with --framework deepspeed, or beside a DeepSpeed JSON it never loads, was
    priced with DeepSpeed's engine (6.900 s against the Megatron-LM job's 6.086 s), exit 0 (a user trial)."""
    out = tmp_path / "plan"
    job = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
    res = CliRunner().invoke(main, ["plan", *job, "--top-k", "1", "--emit", "megatron,deepspeed", "--out", str(out)])
    assert res.exit_code == 0, res.output
    for extra in (["--framework", "deepspeed"], ["--launch", str(out / "ds_config.json")]):
        res = CliRunner().invoke(main, ["audit", "--launch", str(out / "megatron.sh"), *extra, *job])
        assert res.exit_code == 2, res.output
        assert "a Megatron training command without --deepspeed" in res.output
    assert ("is not loaded by it" in res.output)
    assert CliRunner().invoke(main, ["audit", "--launch", str(out / "megatron.sh"), *job]).exit_code in (0, 1)


def test_an_audits_layout_errors_name_the_files_settings_not_evaluates_flags(tmp_path: Path) -> None:
    """`audit` takes no --mbs or --ep: its layout errors name the launch files' micro-batch and expert-parallel
    setting where they state them (a user trial was told `or --mbs 1`, and `--ep 4 --etp 1` beside the batch's line)."""
    code, out = _ds_audit(tmp_path, {"train_batch_size": 512, "train_micro_batch_size_per_gpu": 3,
                                     "bf16": {"enabled": True}})
    assert code == 2 and "--mbs" not in out and "or micro-batch 1 (" in out
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nnodes 8 --nproc-per-node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
                      "--ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention --num-query-groups 8 "
                      "--swiglu --seq-length 8192 --max-position-embeddings 8192 --bf16 "
                      "--untie-embeddings-and-output-weights --normalization RMSNorm --position-embedding-type rope "
                      "--disable-bias-linear --tensor-model-parallel-size 2 --expert-model-parallel-size 4 "
                      "--micro-batch-size 1 --global-batch-size 512\n")
    res = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                    "--gpus", "64"])
    assert res.exit_code == 2
    assert "ep 4 (" in res.output and "--expert-model-parallel-size 4" in res.output
    assert "--ep 4" not in res.output and "global batch 512:" not in res.output


def test_a_run_whose_micro_batch_cannot_divide_its_batch_is_told_its_own_fields(tmp_path: Path) -> None:
    """validate --runs with micro-batch 3 and batch 512 was told `try --gpus 128`: no GPU count makes 512 a multiple
    of 3 x dp, and validate takes no --gpus.  The rule names the micro-batch and the fixes name the run's fields."""
    runs = tmp_path / "runs.yaml"
    runs.write_text("- {model: llama3-8b, num_gpus: 64, seq_len: 8192, global_batch: 512, step_time_s: 6.5, "
                    "layout: {tp: 2, micro_batch_size: 3}}\n")
    res = CliRunner().invoke(main, ["validate", "--cluster", "dgx-h100", "--runs", str(runs)])
    assert res.exit_code == 0, res.output
    assert "x the micro-batch 3 must divide the global batch" in res.output
    assert "`micro_batch_size: 1` in its layout" in res.output and "--gpus" not in res.output


def test_a_sweep_reads_its_relative_paths_beside_itself_and_names_its_fields(tmp_path: Path, monkeypatch) -> None:
    """A study's `cluster: ../cl/c.yaml` was looked up from the current folder, and an FP8 workload on an A100 design
    was told `--precision`, a flag sweep does not take (a user trial)."""
    from placement.catalog import catalog_root

    (tmp_path / "cl").mkdir()
    (tmp_path / "cl" / "c.yaml").write_text((catalog_root() / "hardware" / "clusters" / "dgx-h100.yaml").read_text())
    (tmp_path / "sw").mkdir()
    study = tmp_path / "sw" / "rel.yaml"
    base = {"name": "s", "designs": [{"name": "h", "cluster": "../cl/c.yaml", "gpus": 16, "price_per_gpu_hour": 2.5}],
            "workloads": [{"name": "l8b", "model": "llama3-8b", "seq_len": 4096, "global_batch": 64,
                           "tokens": 1.0e9}]}
    import yaml

    study.write_text(yaml.safe_dump(base))
    monkeypatch.chdir(tmp_path.parent)  # not the study's folder
    res = CliRunner().invoke(main, ["sweep", str(study), "--out", str(tmp_path / "out"), "--no-plots"])
    assert res.exit_code == 0, res.output
    base["designs"][0] |= {"cluster": "dgx-a100-80g"}
    base["workloads"][0] |= {"precision": "fp8"}
    study.write_text(yaml.safe_dump(base))
    res = CliRunner().invoke(main, ["sweep", str(study), "--out", str(tmp_path / "out2"), "--no-plots"])
    assert res.exit_code == 2
    assert "workloads[0] 'l8b' has `precision: fp8`, but design 'h' runs a100-80g" in res.output
    assert "--precision" not in res.output


def test_an_empty_file_is_said_to_be_empty(tmp_path: Path) -> None:
    """An empty cluster, sweep or profile file was refused with `got NoneType` (a user trial)."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    for args in (["plan", "--model", "llama3-8b", "--cluster", str(empty)],
                 ["sweep", str(empty), "--out", str(tmp_path / "o")],
                 ["validate", "--calibration", str(empty)]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2, res.output
        assert "nothing (the file is empty or only comments)" in res.output and "NoneType" not in res.output


def test_a_template_placeholder_in_a_deepspeed_config_is_named_as_one(tmp_path: Path) -> None:
    """A user trial passed Megatron-DeepSpeed's `ds_config_gpt_TEMPLATE.json`, which its script `sed`s into another
    file: `"train_batch_size" : CONFIG_BATCH_SIZE,` was told to drop quotes it does not have, with the comma read
    into the value."""
    path = tmp_path / "ds_config_TEMPLATE.json"
    path.write_text('{\n  "train_batch_size" : CONFIG_BATCH_SIZE,\n  "train_micro_batch_size_per_gpu": CONFIG_MBSIZE,'
                    '\n  "bf16": {"enabled": true}\n}\n')
    res = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64",
                                    "--launch", str(path)])
    out = res.output.replace("\n", " ")
    assert res.exit_code == 2 and "Traceback" not in out
    assert f"{path}:2: \"train_batch_size\" : CONFIG_BATCH_SIZE,: train_batch_size is the template placeholder " \
           f"'CONFIG_BATCH_SIZE', not a value" in out
    assert "give --launch the launch script, or the config it writes" in out and "without quotes" not in out
    # a quoted upper-case word is a string the file states, not a placeholder
    code, quoted = _ds_audit(tmp_path, {"train_batch_size": "BATCH", "bf16": {"enabled": True}})
    assert code == 2 and "must be a JSON integer, got 'BATCH'" in quoted and "is the template placeholder" not in quoted
