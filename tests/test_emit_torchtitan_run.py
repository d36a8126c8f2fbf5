"""torchtitan 0.3.0 files run what their header prices: the resharding policy of ZeRO-3 under pipeline parallelism,
CUDA graphs (on by default in 0.3.0), async TP (on in llama3_405b's config) and the Float8 recipe (row-wise, the only
one its converters have); and they say which torchtitan release their flags are for."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main
from placement.emit.torchtitan import COMPILE, FP8_CONFIGS, MODELS

JOB = ["--gpus", "16", "--seq-len", "4096", "--global-batch", "64"]
TORCHTITAN_RUNS = ["--grad-reduce-fp32", "--attention-kernel", "flash2", "--sp-saves-gathered-inputs",
                   "--fp8-saves-16bit-inputs", "--pipeline-unsharded-grads", "--loss-chunks", "8",
                   "--fp8-recasts-weights", "--reshard-after-backward", "--no-tp-async-backward",
                   "--loss-eager-float32", "--tp-gathers-16bit"]
"""What torchtitan 0.3.0 always runs (frameworks.CAPABILITIES): plans priced so keep the substitution under test
alone."""


def _evaluate(tmp_path: Path | None, *argv: str) -> dict:
    """`evaluate --json` of llama3-8b on 16 H100s (with --emit torchtitan into `tmp_path`)."""
    out = ["--emit", "torchtitan", "--out", str(tmp_path)] if tmp_path is not None else []
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", *JOB, *TORCHTITAN_RUNS, *argv,
                                       "--json", *out])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _args(path: Path) -> list[str]:
    """The arguments after `-m torchtitan.train` of the first node's line."""
    line = next(x for x in path.read_text().splitlines() if x.startswith("torchrun "))
    words = shlex.split(line)
    return words[words.index("torchtitan.train") + 1:]


def _predicted(path: Path) -> float:
    return float(re.search(r"^# predicted: ([\d.]+) s/step", path.read_text(), re.MULTILINE).group(1))


def _runs_line(path: Path) -> re.Match | None:
    return re.search(r"^# this file runs (.*?): ([\d.]+) s/step \(", path.read_text(), re.MULTILINE)


def _value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


# --- 1. ZeRO-3 under pipeline parallelism -------------------------------------------------------------------------

@pytest.mark.parametrize("pp", [1, 2])
def test_zero3_reshards_after_forward_with_or_without_pipeline_parallelism(tmp_path, pp):
    """torchtitan's "default" policy is `not pp_enabled` (distributed/fsdp.py:71-74): with pp 2 it would keep the
    gathered weights to backward (ZeRO-2's memory).  The file says `always`, and the audit reads it back as ZeRO-3."""
    plan = _evaluate(tmp_path, "--tp", "4", "--pp", str(pp), "--zero", "3", "--recompute", "full")
    path = tmp_path / "torchtitan.sh"
    args = _args(path)
    assert _value(args, "--parallelism.fsdp_reshard_after_forward") == "always"
    assert _predicted(path) == pytest.approx(plan["step_time_s"], abs=1e-3) and _runs_line(path) is None
    launch = parse_launch([path])
    assert launch.zero_stage == 3 and launch.pp == pp


def test_zero2_never_reshards_and_reads_back_as_zero2(tmp_path):
    _evaluate(tmp_path, "--tp", "4", "--pp", "2", "--zero", "2", "--recompute", "full")
    path = tmp_path / "torchtitan.sh"
    assert _value(_args(path), "--parallelism.fsdp_reshard_after_forward") == "never"
    assert parse_launch([path]).zero_stage == 2


# --- 2. CUDA graphs -------------------------------------------------------------------------------------------------

def test_a_plan_without_cuda_graphs_disables_them_without_pipeline_parallelism_too(tmp_path):
    """0.3.0 captures the forward and backward in a CUDA graph unless told (config/configs.py:66,
    trainer.py:613-614): a plan priced without graphs says --training.disable_cuda_graphs at pp 1."""
    plan = _evaluate(tmp_path, "--tp", "4", "--zero", "3", "--recompute", "full")
    assert plan["recipe"].get("cuda_graphs", "none") == "none"
    path = tmp_path / "torchtitan.sh"
    assert "--training.disable_cuda_graphs" in _args(path)
    assert _runs_line(path) is None


def test_full_cuda_graphs_run_where_torchtitan_captures_them(tmp_path):
    plan = _evaluate(tmp_path, "--tp", "4", "--zero", "3", "--recompute", "full", "--cuda-graphs", "full")
    path = tmp_path / "torchtitan.sh"
    assert "--training.disable_cuda_graphs" not in _args(path)
    assert _runs_line(path) is None and "CUDA graphs" not in path.read_text()
    assert _predicted(path) == pytest.approx(plan["step_time_s"], abs=1e-3)


def test_full_cuda_graphs_with_pipeline_parallelism_run_without_and_are_priced_so(tmp_path):
    """torchtitan refuses CUDA graphs with PP (trainer.py:183-187): the file disables them and prices that."""
    lay = ["--tp", "4", "--pp", "2", "--zero", "3", "--recompute", "full"]
    _evaluate(tmp_path, *lay, "--cuda-graphs", "full")
    path = tmp_path / "torchtitan.sh"
    assert "--training.disable_cuda_graphs" in _args(path)
    runs = _runs_line(path)
    assert runs is not None and runs.group(1) == "cuda_graphs none (not full)"
    assert float(runs.group(2)) == pytest.approx(_evaluate(None, *lay)["step_time_s"], abs=1e-3)
    assert "it runs without CUDA graphs (--training.disable_cuda_graphs" in path.read_text()


# --- 3. async TP and compile ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("model", list(MODELS))
def test_every_config_runs_async_tp_off_as_priced_and_states_its_compile(tmp_path, model):
    """llama3_405b's config turns async TP on (config_registry.py:296-299); the plan prices TP exposed, so every
    file turns it off, and says what compile its config runs."""
    precision = "fp8" if MODELS[model][1] in FP8_CONFIGS else "bf16"
    result = CliRunner().invoke(main, ["plan", "--model", model, "--gpus", "512", "--seq-len", "4096",
                                       "--global-batch", "512", "--precision", precision, "--framework",
                                       "torchtitan", "--top-k", "1", "--json", "--out", str(tmp_path), "--emit",
                                       "torchtitan"])
    assert result.exit_code == 0, result.output
    path = tmp_path / "torchtitan.sh"
    assert "--compile.no-enable-async-tensor-parallel" in _args(path)
    config = _value(_args(path), "--config")
    assert f"# torch.compile {COMPILE[config]}, as {config} sets it" in path.read_text()
    assert parse_launch([path]).tp == json.loads(result.stdout)["plans"][0]["layout"]["tp"]


# --- 4. the Float8 recipe ------------------------------------------------------------------------------------------

def test_a_torchtitan_framework_plan_prices_the_rowwise_float8_its_config_runs(tmp_path):
    result = CliRunner().invoke(main, ["plan", "--model", "llama3-405b", "--gpus", "128", "--seq-len", "8192",
                                       "--global-batch", "128", "--precision", "fp8", "--framework", "torchtitan",
                                       "--zero", "3", "--top-k", "1", "--json", "--out", str(tmp_path), "--emit",
                                       "torchtitan"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)["plans"][0]
    assert plan["recipe"]["fp8_recipe"] == "rowwise"
    assert "float8.py:58" in plan["recipe_sources"]["fp8_recipe"]
    path = tmp_path / "torchtitan.sh"
    assert _runs_line(path) is None and _predicted(path) == pytest.approx(plan["step_time_s"], abs=1e-3)
    lay = plan["layout"]
    again = CliRunner().invoke(main, [
        "evaluate", "--model", "llama3-405b", "--gpus", "128", "--seq-len", "8192", "--global-batch", "128",
        "--precision", "fp8", "--fp8-recipe", "rowwise", "--grad-reduce-fp32", "--tp", str(lay["tp"]), "--cp",
        str(lay["cp"]), "--pp", str(lay["pp"]), "--vpp", str(lay["vpp"]), "--mbs", str(lay["micro_batch_size"]),
        "--zero", "3", "--dp-shard", str(lay["dp_shard"]), "--recompute", lay["recompute"],
        *(["--recompute-modules", "per_op"] if lay["recompute"] == "selective" else []),
        *TORCHTITAN_RUNS, "--json"])
    assert again.exit_code in (0, 1), again.output
    assert json.loads(again.stdout)["step_time_s"] == pytest.approx(plan["step_time_s"], rel=2e-3)


def test_a_tensorwise_plan_emitted_for_torchtitan_is_priced_rowwise(tmp_path):
    lay = ["--tp", "8", "--pp", "2", "--zero", "3", "--recompute", "full",
           *[a for a in TORCHTITAN_RUNS if a != "--loss-eager-float32"]]  # llama3_405b compiles its loss
    argv = ["evaluate", "--model", "llama3-405b", "--gpus", "256", "--seq-len", "8192", "--global-batch", "256",
            "--precision", "fp8", *lay, "--json"]
    result = CliRunner().invoke(main, [*argv, "--out", str(tmp_path), "--emit", "torchtitan"])
    assert result.exit_code in (0, 1), result.output
    path = tmp_path / "torchtitan.sh"
    runs = _runs_line(path)
    assert runs is not None and runs.group(1) == "fp8_recipe rowwise (not tensorwise)"
    rowwise = json.loads(CliRunner().invoke(main, [*argv, "--fp8-recipe", "rowwise"]).stdout)["step_time_s"]
    assert float(runs.group(2)) == pytest.approx(rowwise, abs=1e-3)
    assert float(runs.group(2)) > json.loads(result.stdout)["step_time_s"]


def test_torchtitan_refuses_a_tensorwise_flag():
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", *JOB, "--precision", "fp8",
                                       "--fp8-recipe", "tensorwise", "--framework", "torchtitan"])
    assert result.exit_code == 2
    assert "--framework torchtitan always runs fp8_recipe = rowwise" in result.output
    assert "drop --fp8-recipe tensorwise or --framework" in result.output


def test_rowwise_runs_at_torchaos_measured_share_of_tensorwise():
    """torchao's float8 README (NVIDIA H100 training benchmarks): torchtitan Llama3-8B on 8 H100s, seq 8192, batch 1,
    FSDP2, selective AC: 7689.5 tokens/s tensorwise (its FSDP float8 all-gather casts the weight shard), 6768 rowwise
    (each pass casts the gathered weight again: fp8_recasts_weights) (cost.constants.ROWWISE_FP8_EFFICIENCY)."""
    def step(recipe, *extra):
        result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--gpus", "8", "--seq-len", "8192",
                                           "--global-batch", "8", "--zero", "3", "--recompute", "selective",
                                           "--precision", "fp8", "--fp8-recipe", recipe, *extra, "--json"])
        return json.loads(result.stdout)["step_time_s"]

    rowwise = step("rowwise", "--fp8-recasts-weights")
    assert step("tensorwise") / rowwise == pytest.approx(6768 / 7689.5, abs=0.01)
    assert rowwise > step("rowwise")  # the casts are priced


# --- 5. the release ------------------------------------------------------------------------------------------------

def test_the_file_names_the_torchtitan_release_its_flags_are_for(tmp_path):
    _evaluate(tmp_path, "--tp", "4", "--zero", "3")
    text = (tmp_path / "torchtitan.sh").read_text()
    assert text.startswith("# torchtitan 0.3.0 launch")
    assert "# written for torchtitan 0.3.0 (pip install torchtitan==0.3.0)" in text


# --- selective activation checkpointing ---------------------------------------------------------------------------

@pytest.mark.parametrize("modules", ["core_attn", "per_op"])
def test_selective_checkpointing_is_torchtitans_per_op_policy(tmp_path, modules):
    """0.3.0's `selective` is the per-op policy: a plan priced with it writes activation-checkpoint:selective
    without a warning; one priced with Megatron's attention-core recompute says torchtitan runs its per-op policy
    instead, and its header is priced that way."""
    _evaluate(tmp_path, "--tp", "4", "--recompute", "selective", "--recompute-modules", modules)
    text = (tmp_path / "torchtitan.sh").read_text()
    assert "activation-checkpoint:selective" in text
    assert ("is its per-op policy" in text) is (modules == "core_attn")
    assert ("selective recompute of per_op (not core_attn)" in text) is (modules == "core_attn")


def test_an_hsdp_plans_header_states_its_shard_groups(tmp_path: Path) -> None:
    """A user trial: torchtitan.sh's header said `dp 64, ZeRO-3` above flags of replicate 2 x shard 32, twice the
    weights and optimizer state per GPU that ZeRO-3 over 64 ranks holds; the header names the shard group."""
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64",
                                    "--framework", "torchtitan", "--emit", "torchtitan", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output[-2000:]
    lay = json.loads(res.stdout)["plans"][0]["layout"]
    assert lay["dp_shard"] < lay["dp"]  # the search's plan is HSDP here
    text = (out / "torchtitan.sh").read_text()
    replicas = lay["dp"] // lay["dp_shard"]
    assert f"ZeRO-3 in shard groups of {lay['dp_shard']} (HSDP: {replicas} replicas)" in text.splitlines()[2]
    assert f"--parallelism.data_parallel_replicate_degree {replicas} " in text
    assert f"(HSDP: shard groups of {lay['dp_shard']})" in (out / "launch.sbatch").read_text()


def test_a_side_format_does_not_narrow_the_frameworks_plan(tmp_path: Path) -> None:
    """A user trial: `--framework torchtitan --emit torchtitan,devicemesh` planned what a DeviceMesh can state too,
    and torchtitan.sh ran 4.8 % slower than under `--emit torchtitan` (CUDA graphs and selective recompute dropped),
    with only a stderr note.  Under --framework F the plan is F's; the device mesh's file says what it cannot state."""
    job = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--framework", "torchtitan",
           "--json"]
    alone = CliRunner().invoke(main, [*job, "--emit", "torchtitan", "--out", str(tmp_path / "a")])
    both = CliRunner().invoke(main, [*job, "--emit", "torchtitan,devicemesh", "--out", str(tmp_path / "b")])
    assert alone.exit_code == 0 and both.exit_code == 0, both.output[-2000:]
    first, second = (json.loads(r.stdout)["plans"][0] for r in (alone, both))
    assert (first["layout"], first["recipe"], first["step_time_s"]) == \
        (second["layout"], second["recipe"], second["step_time_s"])
    assert "search kept only the recipe choices" not in both.stderr
    tt = [line for line in (tmp_path / "b" / "torchtitan.sh").read_text().splitlines() if line.startswith("torchrun")]
    assert tt == [line for line in (tmp_path / "a" / "torchtitan.sh").read_text().splitlines()
                  if line.startswith("torchrun")]


def test_a_file_at_another_precision_gives_its_mfu_on_the_plans_peak_too(tmp_path):
    """torchtitan 0.3.0's llama3_405b config always runs Float8: its file is priced at FP8, whose MFU is of the FP8
    peak, twice the BF16 one.  A user trial read the faster file's MFU 29.8 % beside the bf16 plan's 56.8 % as a
    slower job; the line names the peak and gives the MFU on the plan's too."""
    import re

    from click.testing import CliRunner

    from placement.cli import main

    out = tmp_path / "tt"
    res = CliRunner().invoke(main, ["--reproducible", "evaluate", "--model", "llama3-405b", "--gpus", "512", "--tp",
                                    "8", "--pp", "16", "--zero", "3", "--mbs", "1", "--emit", "torchtitan", "--out",
                                    str(out)])
    assert res.exit_code in (0, 1), res.output  # 1: written, what the file runs over capacity (said)
    text = (out / "torchtitan.sh").read_text()
    plan = float(re.search(r"# predicted: .*?MFU ([\d.]+)%", text).group(1))
    m = re.search(r"# this file runs fp8.*?MFU ([\d.]+)% of the FP8 peak \(([\d.]+)% of the BF16 peak, the plan's "
                  r"basis\)", text)
    assert m, text
    fp8, bf16 = float(m.group(1)), float(m.group(2))
    assert bf16 == pytest.approx(2 * fp8, abs=0.15) and bf16 > plan  # H100: 1,979 vs 989 TFLOP/s dense


# --- the sequence a shipped config's RoPE is built for --------------------------------------------------------------

QWEN3_MOE = ["--model", "qwen3-30b-a3b", "--gpus", "16", "--global-batch", "16", "--cp", "4", "--ep", "4",
             "--zero", "3", "--recompute", "full"]


@pytest.mark.parametrize("seq, starts", [(40960, True), (49152, False)])
def test_a_sequence_past_the_configs_rope_length_does_not_start(tmp_path, seq, starts):
    """torchtitan 0.3.0's qwen3_30b_a3b builds RoPE for 40,960 positions and its trainer raises at start-up for a
    longer training.seq_len (models/common/decoder.py:166-174; tests/verify checks the limit against torchtitan's own
    code): a user trial's file at 65,536 was written and priced as if it ran, exit 0."""
    result = CliRunner().invoke(main, ["evaluate", *QWEN3_MOE, "--seq-len", str(seq), "--emit", "torchtitan",
                                       "--out", str(tmp_path), "--json"])
    assert result.exit_code == (0 if starts else 1), result.output
    out = json.loads(result.stdout)
    text = (tmp_path / "torchtitan.sh").read_text()
    assert ("torchtitan.sh" in out["files_not_starting"]) is not starts
    assert ("# this file does not start" in text) is not starts
    if not starts:
        assert "RoPE for at most 40,960 positions" in text and "--seq-len 40960" in text


@pytest.mark.parametrize("command", ["plan", "evaluate"])
def test_framework_torchtitan_refuses_a_sequence_its_config_cannot_start(command):
    """Under --framework torchtitan no layout runs the sequence: an input error naming the config's limit."""
    argv = QWEN3_MOE if command == "evaluate" else ["--model", "qwen3-30b-a3b", "--gpus", "16", "--global-batch",
                                                    "16"]
    result = CliRunner().invoke(main, [command, *argv, "--seq-len", "49152", "--framework", "torchtitan"])
    assert result.exit_code == 2, result.output
    assert "qwen3_30b_a3b config builds RoPE for at most 40,960 positions" in result.output
    assert "Traceback" not in result.output


def test_the_audit_of_a_file_past_the_configs_rope_length_says_it_does_not_start(tmp_path):
    """The audit reads the same limit from the named config: the emitted file at 49,152 is refused, not priced."""
    result = CliRunner().invoke(main, ["evaluate", *QWEN3_MOE, "--seq-len", "49152", "--emit", "torchtitan",
                                       "--out", str(tmp_path)])
    assert result.exit_code == 1, result.output
    audit = CliRunner().invoke(main, ["audit", "--model", "qwen3-30b-a3b", "--gpus", "16", "--launch",
                                      str(tmp_path / "torchtitan.sh")])
    assert audit.exit_code == 2, audit.output
    assert "this job does not start" in audit.output and "--training.seq_len of 40960 or less" in audit.output


# --- tied embeddings beside a pipeline ------------------------------------------------------------------------------

def _qwen3_1_7b(tmp_path: Path) -> Path:
    """Qwen3-1.7B's config.json (the 8B's with its dimensions; it ties its embeddings): torchtitan's qwen3_1_7b."""
    config = json.loads((Path(__file__).parent / "data" / "hf" / "qwen3-8b" / "config.json").read_text())
    config.update({"hidden_size": 2048, "intermediate_size": 6144, "num_attention_heads": 16,
                   "num_hidden_layers": 28, "num_key_value_heads": 8, "tie_word_embeddings": True,
                   "max_window_layers": 28})
    path = tmp_path / "qwen3-1.7b" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    return path


@pytest.mark.parametrize("pp", [1, 2])
def test_a_pipeline_beside_tied_embeddings_does_not_start(tmp_path, pp):
    """torchtitan 0.3.0's decoder refuses weight tying beside pipeline parallelism at start-up, and its qwen3_1_7b
    ties them (tests/verify checks both against torchtitan's own code): a user trial's pp 2 file naming it was
    written and priced as if it ran; the audit of it priced it too."""
    model = str(_qwen3_1_7b(tmp_path))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["evaluate", "--model", model, "--gpus", "16", "--pp", str(pp), "--zero", "1",
                                       "--emit", "torchtitan", "--out", str(out), "--json"])
    assert result.exit_code in (0, 1), result.output
    assert _args(out / "torchtitan.sh")[3] == "qwen3_1_7b"
    refused = json.loads(result.stdout)["files_not_starting"] == ["torchtitan.sh"]
    assert refused is (pp > 1)
    audit = CliRunner().invoke(main, ["audit", "--model", model, "--gpus", "16", "--launch",
                                      str(out / "torchtitan.sh")])
    if pp > 1:
        assert audit.exit_code == 2 and "Weight tying is not supported with Pipeline Parallel" in audit.output
    else:
        assert audit.exit_code in (0, 1), audit.output


def test_framework_torchtitan_plans_no_pipeline_beside_tied_embeddings(tmp_path):
    model = str(_qwen3_1_7b(tmp_path))
    res = CliRunner().invoke(main, ["evaluate", "--model", model, "--gpus", "16", "--pp", "2", "--zero", "2",
                                    "--framework", "torchtitan"])
    assert res.exit_code == 2 and "pp 2 for a model with tied embeddings" in res.output and "--pp 1" in res.output
    # Megatron-LM shares the embedding with the last stage's head: a pipeline there is fine
    ok = CliRunner().invoke(main, ["evaluate", "--model", model, "--gpus", "16", "--pp", "2", "--zero", "1",
                                   "--framework", "megatron"])
    assert ok.exit_code in (0, 1), ok.output
