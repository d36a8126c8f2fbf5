"""Emitted files carry the plan's precision, or say what they run instead with both times (issue: launch files
that run exactly what was priced)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.cli import main
from placement.emit.common import EmitContext
from placement.planner import plan_job
from placement.search import SearchConfig

DATA = Path(__file__).parent / "data"


def _emit(tmp_path: Path, model: str, gpus: int, precision: str, emit: str, *extra: str) -> tuple[dict, str]:
    """plan --json --emit: (the best plan, stderr).  A torchtitan file runs FlexAttention (FlashAttention-2's
    class): plans for it are priced so unless the test says otherwise, to keep the substitution under test alone."""
    if emit == "torchtitan" and "--framework" not in extra and "--attention-kernel" not in extra:
        extra = ("--attention-kernel", "flash2", "--sp-saves-gathered-inputs", "--fp8-saves-16bit-inputs",
                 "--loss-chunks", "8", "--no-tp-async-backward", "--dp-reduce-every-microbatch",
                 "--zero0-as-fsdp", *extra)
    result = CliRunner().invoke(main, ["plan", "--model", model, "--gpus", str(gpus), "--seq-len", "4096",
                                       "--global-batch", "64", "--precision", precision, "--top-k", "1", "--json",
                                       "--out", str(tmp_path), "--emit", emit, *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["plans"][0], result.stderr


FP32_GRADS = ("--grad-reduce-fp32",)
"""torchtitan and MaxText always reduce gradients in fp32: plans priced so keep the substitution under test alone."""
TORCHTITAN_EAGER = (*FP32_GRADS, "--loss-eager-float32")
"""torchtitan's llama3_8b and llama3_70b configs also run their loss eagerly on a float32 copy (no compile)."""
MAXTEXT_FP32 = (*FP32_GRADS, "--fp32-weights", "--no-norms-fused", "--attention-kernel", "flash2",
                "--ddp-bucket-params", "1")
"""MaxText also keeps float32 weights as the master copy, its norms are ops of their own, its attention a Triton
flash kernel and its gradient reductions XLA's, priced as one bucket per parameter (frameworks.CAPABILITIES)."""


def test_a_torchtitan_plan_with_16bit_gradients_says_it_reduces_fp32_with_both_times(tmp_path):
    """torchtitan 0.3.0 has one reduce dtype, float32: a plan priced with 16-bit gradients is re-priced as the
    file runs it, and said so."""
    plan, err = _emit(tmp_path, "llama3-8b", 16, "bf16", "torchtitan", "--zero", "3", "--loss-eager-float32")
    assert not plan["recipe"].get("grad_reduce_fp32")
    runs = _runs_line(tmp_path / "torchtitan.sh")
    assert runs is not None and runs.group(1) == "grad_reduce_fp32 True (not False)"
    assert float(runs.group(2)) == pytest.approx(_evaluate_step(plan, "bf16", "--grad-reduce-fp32"), rel=2e-3)
    assert float(runs.group(2)) > plan["step_time_s"]
    assert "mixed_precision_reduce, whose only value is float32" in err


def test_a_torchtitan_framework_plan_prices_the_fp32_gradients_its_file_runs(tmp_path):
    plan, _ = _emit(tmp_path, "llama3-8b", 16, "bf16", "torchtitan", "--framework", "torchtitan")
    assert plan["recipe"]["grad_reduce_fp32"] is True
    assert "float32" in plan["recipe_sources"]["grad_reduce_fp32"]
    assert _runs_line(tmp_path / "torchtitan.sh") is None


def test_megatron_files_state_the_gradient_width_they_were_priced_with(tmp_path):
    """Under --bf16 Megatron reduces gradients in fp32 unless told --grad-reduce-in-bf16: the file says which."""
    _emit(tmp_path / "a", "llama3-8b", 16, "bf16", "megatron", "--zero", "1")
    assert "--grad-reduce-in-bf16" in _megatron_args(tmp_path / "a" / "megatron.sh")
    _emit(tmp_path / "b", "llama3-8b", 16, "bf16", "megatron", "--zero", "1", "--grad-reduce-fp32")
    args = _megatron_args(tmp_path / "b" / "megatron.sh")
    assert "--accumulate-allreduce-grads-in-fp32" in args and "--grad-reduce-in-bf16" not in args
    # Megatron-FSDP (ZeRO-2/3) takes its own gradient dtypes, whose auto is the model's 16 bits
    _emit(tmp_path / "c", "llama3-8b", 16, "bf16", "megatron", "--zero", "3", "--grad-reduce-fp32")
    args = _megatron_args(tmp_path / "c" / "megatron.sh")
    assert args[args.index("--megatron-fsdp-grad-comm-dtype") + 1] == "fp32"
    assert "--accumulate-allreduce-grads-in-fp32" not in args


def _megatron_args(path: Path) -> list[str]:
    line = next(x for x in path.read_text().splitlines() if x.startswith("PLACEMENT_ARGS=("))
    return shlex.split(line[len("PLACEMENT_ARGS=("):-1])


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_megatron_files_always_set_bf16_and_fp8_on_top(tmp_path, precision):
    """Megatron's default is FP32: without --bf16 an FP8 or BF16 plan would run FP32 weights."""
    _emit(tmp_path, "llama3-8b", 8, precision, "megatron")
    args = _megatron_args(tmp_path / "megatron.sh")
    assert "--bf16" in args
    assert ("--fp8-format" in args) == (precision == "fp8")


def _evaluate_step(plan: dict, precision: str, *flags: str, **changes) -> float:
    """The plan's layout (with `changes`) priced at `precision` by `evaluate`, as a user would check it."""
    lay = plan["layout"] | changes
    argv = ["evaluate", "--model", plan["model"], "--cluster", plan["cluster"], "--gpus", str(plan["num_gpus"]),
            "--seq-len", str(plan["seq_len"]), "--global-batch", str(plan["global_batch"]), "--precision", precision,
            "--tp", str(lay["tp"]), "--cp", str(lay["cp"]), "--ep", str(lay["ep"]), "--etp", str(lay["etp"]),
            "--pp", str(lay["pp"]), "--vpp", str(lay["vpp"]), "--mbs", str(lay["micro_batch_size"]),
            "--zero", str(lay["zero_stage"]), "--dp-shard", str(lay["dp_shard"]), "--recompute", lay["recompute"],
            "--sequence-parallel" if lay["sequence_parallel"] else "--no-sequence-parallel", "--json"]
    recipe = plan["recipe"]
    if recipe.get("recompute_modules") and lay["recompute"] == "selective":
        argv += ["--recompute-modules", ",".join(recipe["recompute_modules"])]
    if recipe.get("grad_reduce_fp32"):
        argv.append("--grad-reduce-fp32")
    if recipe.get("cpu_affinity") is False:
        argv.append("--no-cpu-affinity")
    if recipe.get("attention_kernel"):
        argv += ["--attention-kernel", recipe["attention_kernel"]]
    if recipe.get("ddp_bucket_params"):
        argv += ["--ddp-bucket-params", str(recipe["ddp_bucket_params"])]
    for field in ("sp_saves_gathered_inputs", "fp8_saves_16bit_inputs", "pipeline_unsharded_grads",
                  "dp_reduce_every_microbatch", "zero0_as_fsdp", "fp32_weights"):
        if recipe.get(field):
            argv.append("--" + field.replace("_", "-"))
    if recipe.get("tp_async_backward") is False:
        argv.append("--no-tp-async-backward")
    if recipe.get("pp_comm_overlap") is False:
        argv.append("--no-pp-comm-overlap")
    argv += ["--loss-chunks", str(recipe.get("loss_chunks", 1))]
    argv += list(flags)
    result = CliRunner().invoke(main, argv)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["step_time_s"]


def _runs_line(path: Path) -> re.Match | None:
    """The header's `# this file runs WHAT: T s/step (+X%)` line: (what, seconds)."""
    return re.search(r"^# this file runs (.*?): ([\d.]+) s/step \(", path.read_text(), re.MULTILINE)


def test_a_torchtitan_fp8_plan_without_an_fp8_config_says_it_runs_bf16_with_both_times(tmp_path):
    plan, err = _emit(tmp_path, "llama3-70b", 64, "fp8", "torchtitan", "--zero", "3", *TORCHTITAN_EAGER)
    runs = _runs_line(tmp_path / "torchtitan.sh")
    assert runs is not None and runs.group(1) == "bf16 (not fp8)"
    assert "llama3_70b config has no Float8 converter and no flag adds one: this file runs bf16" in err
    assert float(runs.group(2)) == pytest.approx(_evaluate_step(plan, "bf16"), rel=2e-3)  # 3 decimals printed
    assert float(runs.group(2)) > plan["step_time_s"]
    assert f"against the plan's {plan['step_time_s']:.3f} s/step" in err


def test_a_deepseek_fp8_plan_gets_torchtitans_float8_config_and_no_substitute(tmp_path):
    """FP8 stays FP8; the config's converters scale row-wise (float8.py:58, :257-260), priced with --framework."""
    _emit(tmp_path, "deepseek-v3", 256, "fp8", "torchtitan", "--framework", "torchtitan")
    text = (tmp_path / "torchtitan.sh").read_text()
    assert "--config deepseek_v3_671b_float8" in text
    assert _runs_line(tmp_path / "torchtitan.sh") is None


def test_a_bf16_405b_plan_says_torchtitans_config_runs_fp8(tmp_path):
    plan, _ = _emit(tmp_path, "llama3-405b", 512, "bf16", "torchtitan", "--zero", "3", *FP32_GRADS,
                    "--pipeline-unsharded-grads", "--no-pp-comm-overlap")
    runs = _runs_line(tmp_path / "torchtitan.sh")
    # the Float8 rows of torchtitan's capability hold for the FP8 the file runs although the plan is BF16: torchao's
    # Float8Linear casts the weights every pass (the plan already keeps the 16-bit inputs, _emit)
    # and its tensor parallelism gathers 16-bit values (plain ColwiseParallel under row-wise Float8)
    assert runs is not None and runs.group(1) == ("fp8 with row-wise scaling (not bf16), fp8_recasts_weights True "
                                                  "(not False), tp_gathers_16bit True (not False)")
    assert float(runs.group(2)) == pytest.approx(_evaluate_step(plan, "fp8", "--fp8-recipe", "rowwise",
                                                                "--fp8-recasts-weights", "--tp-gathers-16bit"),
                                                 rel=2e-3)


def test_a_deepspeed_fp8_plan_prices_the_bf16_its_config_sets(tmp_path):
    plan, _ = _emit(tmp_path, "llama3-8b", 16, "fp8", "deepspeed", "--no-cpu-affinity")  # unbound across hosts
    runs = _runs_line(tmp_path / "deepspeed.sh")
    # and, as every DeepSpeed file, autograd's gradient accumulation and the weights gathered in step() (its ZeRO
    # optimizer)
    assert runs is not None and runs.group(1) == (
        "bf16 (not fp8), the updated weights all-gathered inside optimizer.step(), before the next forward (not "
        "behind it: stage_1_and_2.py all_gather_dp_groups), gradients accumulated by autograd in .grad (not fused)")
    assert float(runs.group(2)) == pytest.approx(
        _evaluate_step(plan, "bf16", "--grad-accumulation", "autograd", "--no-param-gather-overlap"), rel=2e-3)
    assert json.loads((tmp_path / "ds_config.json").read_text())["bf16"] == {"enabled": True}


def test_a_torchtitan_zero1_plan_says_it_runs_zero2_with_its_time(tmp_path):
    """torchtitan has no ZeRO-1: the file runs FSDP without resharding after forward, priced as ZeRO-2, with the
    resharding after every backward FSDP2's ZeRO-2 brings (the capability row, tested on the layout the file runs)."""
    plan, _ = _emit(tmp_path, "llama3-8b", 16, "bf16", "torchtitan", "--zero", "1", *TORCHTITAN_EAGER)
    assert plan["layout"]["zero_stage"] == 1
    runs = _runs_line(tmp_path / "torchtitan.sh")
    assert runs is not None and runs.group(1) == "ZeRO-2 (not ZeRO-1), reshard_after_backward True (not False)"
    assert float(runs.group(2)) == pytest.approx(_evaluate_step(plan, "bf16", "--reshard-after-backward",
                                                                zero_stage=2), rel=2e-3)
    assert "--parallelism.fsdp_reshard_after_forward never" in (tmp_path / "torchtitan.sh").read_text()


def test_a_deepspeed_interleaved_plan_says_it_runs_plain_1f1b(tmp_path):
    # ranked as a search for DeepSpeed files ranks them (it keeps the default split)
    result = CliRunner().invoke(main, ["plan", "--model", "llama3-70b", "--gpus", "64", "--seq-len", "4096",
                                       "--global-batch", "64", "--top-k", "30", "--out", str(tmp_path / "probe"),
                                       "--emit", "deepspeed", "--json"])
    # exit 1 exactly where the file written for plan 1 does not start (a ZeRO-2/3 pipeline) or does not fit
    probe = json.loads(result.stdout)
    assert result.exit_code == (1 if probe["files_not_starting"] or probe["files_over_capacity"] else 0), result.output
    # DeepSpeed's PipelineEngine refuses ZeRO-2/3 (that file does not start and promises no step time)
    plans = [p for p in json.loads(result.stdout)["plans"] if p["layout"]["vpp"] > 1 and p["layout"]["zero_stage"] < 2]
    assert plans, "no interleaved ZeRO-0/1 plan among the 30 best"
    index = json.loads(result.stdout)["plans"].index(plans[0]) + 1
    emitted = CliRunner().invoke(main, ["plan", "--model", "llama3-70b", "--gpus", "64", "--seq-len", "4096",
                                        "--global-batch", "64", "--top-k", "30", "--plan-index", str(index),
                                        "--out", str(tmp_path), "--emit", "deepspeed", "--json"])
    assert emitted.exit_code == (1 if json.loads(emitted.stdout)["files_over_capacity"] else 0), emitted.output
    assert json.loads(emitted.stdout)["files_not_starting"] == []
    # the plan written (a search for DeepSpeed files keeps the default split, so its ranking may differ)
    written = json.loads(emitted.stdout)["plans"][index - 1]
    runs = _runs_line(tmp_path / "deepspeed.sh")
    vpp = written["layout"]["vpp"]
    assert vpp > 1 and runs is not None and f"plain 1F1B (not {vpp} interleaved stages)" in runs.group(1)
    # DeepSpeed's engine sends and receives one blocking call after another (with more than two stages)
    blocking = ("--pipeline-p2p-blocking",) if "as a blocking call of its own" in runs.group(1) else ()
    assert blocking or written["layout"]["pp"] <= 1
    # and its launcher's pdsh runner leaves the processes of a multi-host job unbound
    unbound = ("--no-cpu-affinity",) if "unbound processes (not bound)" in runs.group(1) else ()
    # its ZeRO-1 pipeline accumulates gradients in autograd's .grad
    autograd = ("--grad-accumulation", "autograd") if "accumulated by autograd" in runs.group(1) else ()
    assert float(runs.group(2)) == pytest.approx(_evaluate_step(written, "bf16", *blocking, *unbound, *autograd,
                                                                vpp=1), rel=2e-3)


@pytest.mark.parametrize("mapped", [False, True], ids=["catalog", "slurm-allocation"])
def test_repricing_at_the_plans_own_precision_gives_the_plans_numbers(mapped):
    """EmitContext.priced_as prices the layout on the ranks the files place: at the plan's own precision it
    must reproduce the plan, on a catalog cluster and on a CP-SAT-mapped SLURM allocation."""
    from placement.cli import build_job
    from placement.mapping.config import SolverConfig

    if mapped:
        model, train, topo = build_job("llama3-8b", None, None, None, 4096, 64, "bf16",
                                       str(DATA / "slurm" / "tree-5leaf.conf"), "gpu[0001-0004]", ("dgx-h100",))
        mapping = SolverConfig(deterministic_time_limit=1.0)
    else:
        model, train, topo = build_job("llama3-8b", "dgx-h100", 16, None, 4096, 64, "bf16")
        mapping = None
    planned = plan_job(model, train, topo, SearchConfig(top_k=1), mapping, with_rank_table=False)
    plan, gpu_of_rank = planned.plans[0], planned.gpu_of_rank[0]
    again = EmitContext.of(plan, topo, gpu_of_rank, model, train).priced_as("bf16")
    assert again.step_time_s == pytest.approx(plan.step_time_s, rel=1e-9)
    assert again.peak_memory_bytes == pytest.approx(plan.peak_memory_bytes, rel=1e-9)


def test_a_model_from_a_hf_config_gets_torchtitans_config_of_the_same_architecture(tmp_path):
    """Llama 3.1 8B's config.json is torchtitan's llama3_8b: matched by architecture, not by catalog name."""
    config = Path(__file__).parent / "data" / "hf" / "llama-3.1-8b" / "config.json"
    result = CliRunner().invoke(main, ["plan", "--model", str(config), "--gpus", "16", "--seq-len", "4096",
                                       "--global-batch", "64", "--top-k", "1", "--out", str(tmp_path), "--emit",
                                       "torchtitan"])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "torchtitan.sh").read_text()
    assert "--module llama3 --config llama3_8b " in text and "MODULE" not in text


@pytest.mark.parametrize(("gpus", "model", "runs_zero", "words"), [
    # unsharded fp32 gradients fit: shard_optimizer_over_data (a model MaxText ships a config of: for another, the
    # file trains base.yml's model and promises no step time)
    (64, "llama3-8b", 1, "ZeRO-1 (not ZeRO-2)"),
    (64, "llama3-70b", 3, "FSDP (ZeRO-3 over the {dp} fsdp ranks; not ZeRO-2)"),  # they do not: fsdp
])
def test_a_maxtext_zero2_plan_says_what_it_runs_with_its_time(tmp_path, gpus, model, runs_zero, words):
    """MaxText has no ZeRO-2: the file runs ZeRO-1 or FSDP, and its header prices that."""
    plan, err = _emit(tmp_path, model, gpus, "bf16", "maxtext", "--zero", "2", *MAXTEXT_FP32)
    assert plan["layout"]["zero_stage"] == 2
    runs = _runs_line(tmp_path / "maxtext.yml")
    assert runs is not None and runs.group(1) == words.format(dp=plan["layout"]["dp"])
    shard = plan["layout"]["dp"]
    assert float(runs.group(2)) == pytest.approx(_evaluate_step(plan, "bf16", zero_stage=runs_zero, dp_shard=shard),
                                                 rel=2e-3)
    assert f"against the plan's {plan['step_time_s']:.3f} s/step" in err
    text = (tmp_path / "maxtext.yml").read_text()
    assert ("shard_optimizer_over_data: true" in text) == (runs_zero == 1)


def test_a_device_mesh_for_an_fp8_plan_says_fp8_is_the_training_codes_and_prices_bf16(tmp_path):
    plan, err = _emit(tmp_path, "llama3-8b", 16, "fp8", "devicemesh")
    text = (tmp_path / "device_mesh.py").read_text()
    runs = re.search(r"^# this file runs, without FP8 layers in your code, (.*?): ([\d.]+) s/step \(", text, re.M)
    assert runs is not None and runs.group(1) == "bf16 (not fp8)"
    assert float(runs.group(2)) == pytest.approx(_evaluate_step(plan, "bf16"), rel=2e-3)
    assert "a DeviceMesh sets no precision" in err
    # the plan's files_run lists it, as every file's "this file runs" line (a user trial found it missing there)
    result = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--gpus", "16", "--seq-len", "4096",
                                       "--global-batch", "64", "--precision", "fp8", "--top-k", "1", "--json",
                                       "--out", str(tmp_path / "again"), "--emit", "devicemesh"])
    assert [line.split(":")[0] for line in json.loads(result.stdout)["files_run"]] == ["device_mesh.py"]


@pytest.mark.parametrize(("cluster", "expected"), [("dgx-h100", "tensorwise"), ("dgx-b200", "mxfp8")])
def test_an_fp8_plan_states_the_fp8_recipe_it_is_priced_and_written_with(tmp_path, cluster, expected):
    """The recipe an FP8 plan leaves to the accelerator is in its JSON as priced (a user trial: null, source
    default, while the files wrote --fp8-recipe tensorwise, or mxfp8 on Blackwell); its source stays "default"."""
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", cluster, "--gpus", "16",
                                       "--seq-len", "4096", "--global-batch", "64", "--precision", "fp8",
                                       "--framework", "megatron", "--emit", "megatron", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)["plans"][0]
    assert plan["recipe"]["fp8_recipe"] == expected and plan["recipe_sources"]["fp8_recipe"] == "default"
    assert f"--fp8-recipe {expected}" in (out / "megatron.sh").read_text()
    # a BF16 plan has none
    bf16 = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", cluster, "--gpus", "16",
                                     "--seq-len", "4096", "--global-batch", "64", "--json"])
    assert json.loads(bf16.stdout)["plans"][0]["recipe"]["fp8_recipe"] is None


def test_a_file_for_a_layout_that_does_not_fit_says_so_in_its_header(tmp_path):
    """`evaluate` writes the files of a layout over capacity (exit 1); their header gave the memory above capacity
    without a word (a user trial)."""
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "8",
                                       "--seq-len", "8192", "--global-batch", "8", "--tp", "8", "--emit", "megatron",
                                       "--out", str(out)])
    assert result.exit_code == 1 and "DOES NOT FIT" in result.output
    line = next(x for x in (out / "megatron.sh").read_text().splitlines() if x.startswith("# predicted:"))
    assert line.endswith("-- DOES NOT FIT: the job runs out of memory as planned")
    fits = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                                     "--seq-len", "4096", "--global-batch", "8", "--tp", "8", "--emit", "megatron",
                                     "--out", str(tmp_path / "fits")])
    assert fits.exit_code == 0 and "DOES NOT FIT" not in (tmp_path / "fits" / "megatron.sh").read_text()


@pytest.mark.parametrize(("flag", "folder"), [("--model", "models"), ("--cluster", "hardware/clusters")])
def test_a_catalog_file_that_is_no_mapping_names_the_folder_of_its_kind(tmp_path, flag, folder):
    """The message named the repository root as the place of examples (a user trial)."""
    from placement.catalog import catalog_root

    bad = tmp_path / "bad.yaml"
    bad.write_text("just a string\n")
    args = {"--model": "llama3-8b", "--cluster": "dgx-h100"} | {flag: str(bad)}
    result = CliRunner().invoke(main, ["plan", "--model", args["--model"], "--cluster", args["--cluster"], "--gpus",
                                       "8", "--seq-len", "4096", "--global-batch", "8"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"see the files in {catalog_root() / folder} for examples" in result.output
