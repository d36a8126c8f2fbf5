"""torchtitan jobs its own start-up checks refuse are refused by the audit (an InputError naming the file and line,
the value, torchtitan's check with its commit and date, "so this job does not start" and the fix), where the files'
keys date them to a torchtitan that runs the check (readers.torchtitan.version_window); where their keys leave the
version open, the check is a note.  Values torchtitan reads that the audit prices otherwise are notes, never
dropped silently.  A reviewer audited each of these files and got a step time for every one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from placement.audit.launch import parse_launch
from placement.errors import InputError

BASE = {
    "model": {"name": '"llama3"', "flavor": '"8B"'},
    "training": {"local_batch_size": "1", "seq_len": "8192", "steps": "1000"},
    "parallelism": {"data_parallel_replicate_degree": "1", "data_parallel_shard_degree": "-1",
                    "tensor_parallel_degree": "1", "pipeline_parallel_degree": "1", "context_parallel_degree": "1"},
    "activation_checkpoint": {"mode": '"selective"', "selective_ac_option": '"op"'},
}
"""A torchtitan 0.2.x Llama 3 8B file; training.local_batch_size dates it from 8570415c (2025-06-05) only."""
NEW = {"compile.enable": "false"}
"""compile.enable (JobConfig from 08b8b244, 2025-08-20) dates a file after every check below came."""


def _toml(tmp_path: Path, name: str, *edits: dict[str, str]) -> Path:
    tables = {k: dict(v) for k, v in BASE.items()}
    for edit in edits:
        for dotted, value in edit.items():
            section, key = dotted.rsplit(".", 1)
            if value is None:
                tables.get(section, {}).pop(key, None)
            else:
                tables.setdefault(section, {})[key] = value
    text = "\n".join(f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in d.items()) for s, d in tables.items())
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def _refused(path: Path, *quoted: str) -> str:
    with pytest.raises(InputError) as err:
        parse_launch([path])
    message = str(err.value)
    assert f"{path}:" in message and "so this job does not start" in message, message
    for text in quoted:
        assert text in message, message
    return message


def _notes(path: Path) -> list[str]:
    return list(parse_launch([path]).ignored)


def test_seq_len_must_divide_by_tp_times_2cp(tmp_path: Path) -> None:
    """tp 8, seq_len 8196: v0.2.2 models/llama3/infra/parallelize.py:69 (6204cdff, 2025-07-14)."""
    bad = {"training.seq_len": "8196", "parallelism.tensor_parallel_degree": "8"}
    msg = _refused(_toml(tmp_path, "seq", NEW, bad), "seq_len = 8196",
                   "Sequence length 8196 must be divisible by the product of TP degree (8) and 2 * CP degree (1).",
                   "6204cdff, 2025-07-14", "e.g. 8208")
    assert "compile.enable" in msg
    good = parse_launch([_toml(tmp_path, "seq_ok", NEW, bad, {"training.seq_len": "8192"})])
    assert good.seq_len == 8192 and good.tp == 8
    undated = _notes(_toml(tmp_path, "seq_undated", bad))  # may be v0.1.0, which has no such check
    assert any("6204cdff" in n and "8196" in n and "priced as if it runs" in n for n in undated)


def test_ddp_with_tp_or_pp_is_refused(tmp_path: Path) -> None:
    """v0.2.2 parallelize.py:151 RuntimeError("DDP has not supported > 1D parallelism") (2f989b9f, 2024-07-18)."""
    ddp = {"parallelism.data_parallel_replicate_degree": "2", "parallelism.data_parallel_shard_degree": "1"}
    _refused(_toml(tmp_path, "ddp_tp", ddp, {"parallelism.tensor_parallel_degree": "8"}),
             "data_parallel_replicate_degree = 2", 'RuntimeError("DDP has not supported > 1D parallelism")',
             "2f989b9f, 2024-07-18", "data_parallel_shard_degree 2 with data_parallel_replicate_degree 1")
    _refused(_toml(tmp_path, "ddp_pp", ddp, {"parallelism.pipeline_parallel_degree": "2"}),
             "pipeline_parallel_degree 2", "DDP has not supported > 1D parallelism")
    plain = parse_launch([_toml(tmp_path, "ddp", ddp)])  # DDP alone runs
    assert plain.dp_replicate == 2 and plain.zero_stage == 0
    hsdp = parse_launch([_toml(tmp_path, "hsdp", ddp, {"parallelism.data_parallel_shard_degree": "4",
                                                       "parallelism.tensor_parallel_degree": "2"})])
    assert hsdp.tp == 2 and hsdp.zero_stage == 3


PP = {"parallelism.pipeline_parallel_degree": "2", "training.local_batch_size": "8"}


@pytest.mark.parametrize(("schedule", "lps", "quoted"), [
    ("1F1B", "9", "Single stage schedule requires exactly 1 stage per rank, but got 2 stages per rank."),
    ("GPipe", "9", "Single stage schedule requires exactly 1 stage per rank, but got 2 stages per rank."),
    ("Interleaved1F1B", "17", "Multi-stage schedule requires at least 2 stages per rank, but got 1 stages per rank."),
])
def test_schedule_and_stages_per_rank_must_agree(tmp_path: Path, schedule: str, lps: str, quoted: str) -> None:
    """distributed/pipeline_parallel.py:98/:106 (3c84ce09, 2025-07-30); the older split (f64cf3c1 on) fails too."""
    bad = {"parallelism.pipeline_parallel_schedule": f'"{schedule}"',
           "parallelism.pipeline_parallel_layers_per_stage": lps}
    _refused(_toml(tmp_path, "new", PP, bad, NEW), quoted, "3c84ce09, 2025-07-30", "llama3:8B has 32 layers")
    _refused(_toml(tmp_path, "old", PP, bad), quoted, "f64cf3c1", "either check fails")


def test_schedule_with_its_stage_count_is_read(tmp_path: Path) -> None:
    one = parse_launch([_toml(tmp_path, "one", PP, NEW, {"parallelism.pipeline_parallel_schedule": '"1F1B"',
                                                         "parallelism.pipeline_parallel_layers_per_stage": "17"})])
    assert one.pp == 2 and one.virtual_stages(32) == 1
    two = parse_launch([_toml(tmp_path, "two", PP, NEW, {"parallelism.pipeline_parallel_schedule": '"Interleaved1F1B"',
                                                         "parallelism.pipeline_parallel_layers_per_stage": "11"})])
    assert two.virtual_stages(32) == 2


def test_first_stage_weight_above_the_fewest_layers_a_stage_gets(tmp_path: Path) -> None:
    """pp 8, 1F1B: (32 + 5 + 1) // 8 = 4 < 5: pipeline_parallel.py:291 (3c84ce09)."""
    pp8 = {"parallelism.pipeline_parallel_degree": "8", "training.local_batch_size": "8"}
    _refused(_toml(tmp_path, "in5", pp8, {"parallelism.pipeline_parallel_first_stage_less_layers": "5"}),
             "pipeline_parallel_first_stage_less_layers = 5",
             'ValueError("input_weight (5) exceeds minimum layers per stage (4).")', "3c84ce09, 2025-07-30")
    ok = parse_launch([_toml(tmp_path, "in4", pp8, {"parallelism.pipeline_parallel_first_stage_less_layers": "4"})])
    assert ok.first_stage_less_layers == 4 and ok.pp == 8


def test_async_tp_needs_the_model_compiled(tmp_path: Path) -> None:
    """distributed/tensor_parallel.py:21 (cab22e73; from 8849580d, 2024-08-03, in older words)."""
    asy = {"parallelism.tensor_parallel_degree": "8", "parallelism.enable_async_tensor_parallel": "true"}
    _refused(_toml(tmp_path, "async", asy, NEW), "enable_async_tensor_parallel = true",
             "Async TP requires 'model' in --compile.components and --compile.enable", "8849580d")
    _refused(_toml(tmp_path, "async_nocompile", asy), "Async TP requires")  # the key itself dates it (785c34c9)
    ok = parse_launch([_toml(tmp_path, "async_ok", asy, {"compile.enable": "true"})])
    assert ok.tp == 8 and any("async tensor parallelism" in n for n in ok.ignored)


def test_memory_budget_needs_the_model_compiled(tmp_path: Path) -> None:
    """distributed/activation_checkpoint.py:227 assert (b2763873, 2025-10-09)."""
    mb = {"activation_checkpoint.mode": '"memory_budget"', "activation_checkpoint.selective_ac_option": None}
    _refused(_toml(tmp_path, "mb", mb, NEW), 'mode = "memory_budget"',
             "Memory budget mode requires model to be compiled", "b2763873, 2025-10-09")
    ok = parse_launch([_toml(tmp_path, "mb_ok", mb, {"compile.enable": "true"})])
    assert any("memory_budget" in n for n in ok.ignored)


F8 = {"model.converters": '["quantize.linear.float8"]'}


def test_float8_recipe_with_fsdp_float8_all_gather(tmp_path: Path) -> None:
    """components/quantization/float8.py:66 (069bae28, 2025-02-27)."""
    both = {"quantize.linear.float8.recipe_name": '"rowwise"',
            "quantize.linear.float8.enable_fsdp_float8_all_gather": "true"}
    _refused(_toml(tmp_path, "f8ag", F8, both), "enable_fsdp_float8_all_gather = true",
             "using `float8_config.enable_fsdp_float8_all_gather` together with `float8_config.recipe_name` is not "
             "supported", "069bae28, 2025-02-27")
    ok = parse_launch([_toml(tmp_path, "f8", F8, {"quantize.linear.float8.recipe_name": '"rowwise"'})])
    assert ok.precision == "fp8" and ok.recipe["fp8_recipe"] == "rowwise"


def test_mxfp8_with_tp_under_compile(tmp_path: Path) -> None:
    """components/quantization/mx.py:52 (f3e2a75e, 2025-07-24)."""
    mx = {"model.converters": '["mx"]', "compile.enable": "true", "compile.components": '["model", "loss"]'}
    _refused(_toml(tmp_path, "mx_tp", mx, {"parallelism.tensor_parallel_degree": "2"}), 'converters = ["mx"]',
             "TP not yet supported with torch.compile for mxfp8", "f3e2a75e, 2025-07-24")
    ok = parse_launch([_toml(tmp_path, "mx", mx)])
    assert ok.recipe["fp8_recipe"] == "mxfp8" and ok.recipe["fp8_lm_head"] is False  # mx filters "output"


def test_float8_lm_head_is_converted_unless_filtered(tmp_path: Path) -> None:
    """v0.2.2 float8 filter_fqns defaults to []: module_filter_fn converts the LM head `output` too."""
    default = parse_launch([_toml(tmp_path, "f8_default", F8)])
    empty = parse_launch([_toml(tmp_path, "f8_empty", F8, {"quantize.linear.float8.filter_fqns": "[]"})])
    kept = parse_launch([_toml(tmp_path, "f8_kept", F8, {"quantize.linear.float8.filter_fqns": '["output"]'})])
    assert default.recipe["fp8_lm_head"] is True and empty.recipe["fp8_lm_head"] is True
    assert kept.recipe["fp8_lm_head"] is False
    assert "filter_fqns = []" in empty.sources["recipe.fp8_lm_head"]


@pytest.mark.parametrize(("edit", "said"), [
    ({"training.mixed_precision_param": '"float32"'}, "runs fp32, priced as bf16"),
    ({"training.enable_cpu_offload": "true"}, "CPUOffloadPolicy"),
    ({"training.dtype": '"bfloat16"'}, "no fp32 master copy"),
])
def test_precision_keys_are_never_dropped_silently(tmp_path: Path, edit: dict, said: str) -> None:
    notes = _notes(_toml(tmp_path, "p", edit))
    assert any(said in n and next(iter(edit)).rsplit(".", 1)[1] in n for n in notes), notes
    assert not any(said in n for n in _notes(_toml(tmp_path, "plain")))


def test_tp_and_pp_without_fsdp_train_in_fp32(tmp_path: Path) -> None:
    """v0.2.2 distributed/utils.py:251-256 maybe_enable_amp: no autocast under TP or PP without FSDP/HSDP/CP."""
    layout = {"parallelism.tensor_parallel_degree": "8", "parallelism.pipeline_parallel_degree": "2",
              "parallelism.data_parallel_shard_degree": "1", "training.local_batch_size": "8"}
    notes = _notes(_toml(tmp_path, "tppp", layout))
    assert any("Mixed precision training with TP or PP is only supported when FSDP/HSDP/CP is enabled." in n
               and "runs fp32, priced as bf16" in n for n in notes), notes
    bf16 = _notes(_toml(tmp_path, "tppp_bf16", layout, {"training.dtype": '"bfloat16"'}))
    assert not any("mixed precision off" in n for n in bf16)
    sharded = _notes(_toml(tmp_path, "tppp_fsdp", layout, {"parallelism.data_parallel_shard_degree": "-1"}))
    assert not any("mixed precision off" in n for n in sharded)


def test_named_config_async_tp_and_memory_budget(tmp_path: Path) -> None:
    """0.3.0: config/configs.py:303-310 and trainer.py:170-177 refuse these without the model compiled."""
    line = ("torchrun --nproc_per_node 8 -m torchtitan.train --module llama3 --config llama3_8b "
            "--parallelism.tensor_parallel_degree 2 {flags}\n")
    script = tmp_path / "run.sh"
    script.write_text(line.format(flags="--compile.enable_async_tensor_parallel"))
    with pytest.raises(InputError, match=re.escape("Async TP requires 'model' in --compile.components")):
        parse_launch([script])
    script.write_text(line.format(flags="--compile.enable_async_tensor_parallel --compile.enable"))
    assert parse_launch([script]).tp == 2
    script.write_text(line.format(flags="activation-checkpoint:memory-budget"))
    with pytest.raises(InputError, match="Memory budget activation checkpointing requires the model to be compiled"):
        parse_launch([script])



def test_a_placeholder_config_file_of_an_fp8_plan_is_priced_as_the_bf16_it_runs(tmp_path: Path) -> None:
    """A user trial: torchtitan.sh for a model torchtitan ships no config for (`--module MODULE --config CONFIG`)
    had its header price FP8 (converters of the user's config that the file does not name), and the audit of the
    same file read bf16 and gave another step.  The header prices the file as written, bf16, and says where FP8 would
    come from; the audit of the file gives the header's step."""
    import json

    from click.testing import CliRunner

    from placement.cli import main

    out = tmp_path / "o"
    job = ["--model", "qwen3-235b-a22b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "4096",
           "--global-batch", "128"]
    res = CliRunner().invoke(main, ["evaluate", *job, "--precision", "fp8", "--tp", "1", "--pp", "1", "--ep", "8",
                                    "--mbs", "1", "--zero", "3", "--recompute", "full", "--emit", "torchtitan",
                                    "--out", str(out), "--json"])
    assert res.exit_code in (0, 1), res.output[-2000:]
    line = next(x for x in json.loads(res.stdout)["files_run"] if x.startswith("torchtitan.sh"))
    assert "bf16 (not fp8)" in line
    step = float(re.search(r": ([\d.]+) s/step", line).group(1))
    assert "--module MODULE --config CONFIG" in (out / "torchtitan.sh").read_text()
    res = CliRunner().invoke(main, ["audit", *job, "--launch", str(out / "torchtitan.sh"), "--json"])
    audit = json.loads(res.stdout)
    assert audit["estimate"]["precision"] == "bf16"
    assert audit["estimate"]["step_time_s"] == pytest.approx(step, abs=5e-4)


def test_a_stage_count_pp_does_not_divide_is_refused_with_its_file_line_arithmetic_and_a_fix(tmp_path: Path) -> None:
    """A user trial (AMD's DeepSeek-V3 file: 61 layers, pp 8, layers per stage 2, no stage weights) was told
    "torchtitan rejects it" with no file, line or fix.  The fixes the message offers must each give a stage count pp
    divides."""
    pp8 = {"parallelism.pipeline_parallel_degree": "8", "training.local_batch_size": "8",
           "parallelism.pipeline_parallel_schedule": '"Interleaved1F1B"',
           "parallelism.pipeline_parallel_first_stage_less_layers": "0",
           "parallelism.pipeline_parallel_last_stage_less_layers": "0"}
    path = _toml(tmp_path, "lps2", pp8, NEW, {"parallelism.pipeline_parallel_layers_per_stage": "2"})
    layout = parse_launch([path])
    with pytest.raises(InputError) as err:
        layout.virtual_stages(61)
    text = str(err.value)
    line = next(n for n, t in enumerate(path.read_text().splitlines(), 1) if "layers_per_stage" in t)
    assert text.startswith(f"{path}:{line}: pipeline_parallel_layers_per_stage = 2: ")
    assert "ceil((61 layers + 0 for the first/last_stage_less_layers) / 2) = 31 stages, not a multiple of " \
           "pipeline_parallel_degree 8" in text and "distributed/pipeline_parallel.py" in text
    fix = re.search(r"try pipeline_parallel_layers_per_stage (\d+) \(two or more stages a rank, as interleaved "
                    r"schedules need\), or (\d+) \(one stage a rank, as 1F1B and GPipe need\), or "
                    r"first_stage_less_layers \+ last_stage_less_layers = (\d+) \(now 0\) at 2 layers per stage", text)
    assert fix, text
    assert layout.model_copy(update={"layers_per_virtual_stage": int(fix[2])}).virtual_stages(61) == 1
    # (the file names Llama 3 8B, whose 32 layers parse_launch checks; the 61-layer split is asked of the layout)
    assert layout.model_copy(update={"layers_per_virtual_stage": int(fix[1])}).virtual_stages(61) >= 2
    half = int(fix[3]) // 2
    weights = layout.model_copy(update={"first_stage_less_layers": half, "last_stage_less_layers": int(fix[3]) - half})
    assert weights.virtual_stages(61) == 4


def test_an_older_files_framework_rows_are_not_sourced_to_torchtitan_030(tmp_path: Path) -> None:
    """A user trial: an FP8 file of a torchtitan before 0.3.0 had its weight casts sourced to "torchtitan 0.3.0's
    Float8 ... converters".  Every framework default such a file is priced with names the release it runs."""
    import json

    from click.testing import CliRunner

    from placement.cli import main

    old = _toml(tmp_path, "old_fp8", PP, {"model.converters": '["quantize.linear.float8"]',
                                          "parallelism.tensor_parallel_degree": "2",
                                          "parallelism.pipeline_parallel_schedule": '"Interleaved1F1B"'})
    res = CliRunner().invoke(main, ["audit", "--launch", str(old), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                    "--gpus", "16", "--json"])
    assert res.exit_code in (0, 1), res.output
    est = json.loads(res.stdout)["estimate"]
    assert est["recipe"]["fp8_recipe"] == "tensorwise" and est["layout"]["pp"] == 2
    sources = est["recipe_sources"]
    assert {"fp8_recasts_weights", "fp8_saves_16bit_inputs", "pp_comm_overlap", "tp_async_backward"} <= set(sources)
    assert not [f for f, why in sources.items() if why.startswith("torchtitan 0.3.0")], sources
    assert "v0.2.2 components/quantization/float8.py" in sources["fp8_recasts_weights"]


def test_best_plan_of_an_older_file_is_not_ddp_beside_tp_or_pp(tmp_path: Path) -> None:
    """The audit writes its best plan in the job's own torchtitan keys, so it keeps to what that torchtitan starts: a
    user trial audited v0.2.2's llama3_70b.toml (tp 8, full AC, the batch left to the defaults) on 64 GPUs and was
    told to move to tp 4, pp 8, data_parallel_replicate_degree 2 with data_parallel_shard_degree 1, a file the same
    audit then refused (DDP has not supported > 1D parallelism)."""
    import json

    from click.testing import CliRunner

    from placement.cli import main

    path = _toml(tmp_path, "llama3_70b", NEW, {
        "model.flavor": '"70B"', "training.local_batch_size": None, "training.seq_len": None,
        "parallelism.tensor_parallel_degree": "8", "activation_checkpoint.mode": '"full"',
        "activation_checkpoint.selective_ac_option": None})
    result = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "llama3-70b", "--gpus", "64",
                                       "--json"])
    assert result.exit_code in (0, 1), result.output  # 1: the findings include an error (--fail-on error)
    out = json.loads(result.stdout)
    best = out["best"]["layout"]
    assert best["zero_stage"] != 0 or best["tp"] * best["cp"] * best["pp"] == 1, best
    # the local batch the file leaves out starts from torchtitan's default (v0.2.2 config/job_config.py:253), said so
    # (the same trial read it called placement's spelling of the launched layout beside a source naming the default)
    batch = [c for c in out["changes"] if c["argument"] == "training.local_batch_size"]
    assert batch and batch[0]["from"] == "8" and batch[0]["note"] == "not in the launch files: torchtitan's default"


def test_converter_names_the_files_torchtitan_does_not_register(tmp_path: Path) -> None:
    """torchtitan looks each model.converters name up at start (protocols/model_converter.py): "float8" until
    5b5d4685 (2025-09-26), quantize.linear.float8 from 8a2686c4 (2025-09-30) to v0.2.2.  A user trial: v0.2.2's own
    llama3_405b.toml (converters = ["float8"] beside [quantize.linear.float8] keys) was priced as FP8, a job that
    stops with a KeyError; a name no torchtitan registers stops every one."""
    dated = {"quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp": "false"}
    _refused(_toml(tmp_path, "old_name", {"model.converters": '["float8"]'}, dated), 'converters = ["float8"]',
             "model.converters 'float8'", "in torchtitan's JobConfig from 8a2686c4",
             "name it quantize.linear.float8")
    _refused(_toml(tmp_path, "typo", {"model.converters": '["quantize.linear.fp8"]'}),
             "which no torchtitan registers")
    old = _toml(tmp_path, "old", {"model.converters": '["float8"]', "training.local_batch_size": None,
                                  "training.batch_size": "1"})  # dated before the rename: runs
    assert parse_launch([old]).precision == "fp8"
    assert parse_launch([_toml(tmp_path, "new", F8, dated)]).precision == "fp8"


def test_float8_grouped_gemms_are_a_note_and_refuse_pp_and_cp(tmp_path: Path) -> None:
    """quantize.grouped_mm.float8 turns only the experts' grouped GEMMs FP8 (v0.2.2 components/quantization/
    float8.py:176-231) and asserts pp 1 and cp 1 (:193-198).  A user trial: a file with it alone was priced as every
    GEMM FP8, and one with pp 8 was priced, a job that stops at start."""
    moe = {"model.name": '"deepseek_v3"', "model.flavor": '"16B"',
           "model.converters": '["quantize.grouped_mm.float8"]', "quantize.grouped_mm.float8.fqns": '["experts"]'}
    only = parse_launch([_toml(tmp_path, "grouped", moe)])
    assert only.precision != "fp8"
    assert any("quantize.grouped_mm.float8" in note and "faster than priced" in note for note in only.ignored)
    _refused(_toml(tmp_path, "grouped_pp", moe, {"parallelism.pipeline_parallel_degree": "2"}),
             "pipeline_parallel_degree 2", "float8.py:193-198")


def test_the_best_plan_of_a_float8_moe_file_keeps_pp_and_cp_1() -> None:
    """The audit's best plan keeps the file's converters: where they hold the Float8 grouped-GEMM converter, which
    asserts pp 1 and cp 1 at start (v0.2.2 float8.py:193-198), the search keeps to them (a review: a pp 1 job could
    be told to move to pp 8, a file that stops at start)."""
    from placement.audit.core import framework_space
    from placement.search import LayoutBatch
    from placement.specs import Layout

    lays = [Layout(tp=1, pp=pp, cp=cp, ep=8, dp=64 // (pp * cp), zero_stage=3) for pp, cp in ((1, 1), (2, 1), (1, 2))]
    b = LayoutBatch.from_layouts(lays)
    moe = framework_space("torchtitan", 1, True, torchtitan_old=True, float8_moe=True).framework
    plain = framework_space("torchtitan", 1, True, torchtitan_old=True).framework
    assert moe.layout_mask(b, 48).tolist() == [True, False, False]
    assert plain.layout_mask(b, 48).tolist() == [True, True, True]


def test_deepseek_v3_with_flex_attention_refuses_context_parallelism(tmp_path: Path) -> None:
    """deepseek_v3:16B runs FlexAttention (f738a03b, 2025-08-22), and torchtitan's DeepSeek-V3 refuses context
    parallelism beside it (v0.2.2 models/deepseek_v3/infra/parallelize.py:68-73 NotImplementedError; v0.2.0-v0.2.1
    "CP support for FlexAttention is still in progress."): a QA trial's 16B file at cp 2 was priced as running."""
    dsv3 = {"model.name": '"deepseek_v3"', "model.flavor": '"16B"', "training.seq_len": "4096",
            "parallelism.context_parallel_degree": "2"}
    dated = _toml(tmp_path, "dated", dsv3, {"checkpoint.enable": "false"})  # JobConfig from cd337db6, after f738a03b
    _refused(dated, "dated.toml", 'flavor = "16B"', "context_parallel_degree = 2", "Context Parallel only supports "
             "SDPA attention", "checkpoint.enable", "give context_parallel_degree 1")
    notes = _notes(_toml(tmp_path, "open", dsv3, NEW))  # compile.enable: 08b8b244, before f738a03b
    assert any("FlexAttention" in n and "priced as if it runs" in n for n in notes), notes
    assert parse_launch([_toml(tmp_path, "sdpa", dsv3, {"model.flavor": '"debugmodel"', "checkpoint.enable": "false"})
                         ]).cp == 2


def test_deepep_is_read_as_each_0_2_family_reads_it(tmp_path: Path) -> None:
    """parallelism.expert_parallel_comm_backend "deepep" (from 36a4b694, 2025-12-17): deepseek_v3 and llama4 refuse it
    at ep 1 (ValueError) and beside expert tensor parallelism (NotImplementedError; v0.2.2
    models/deepseek_v3/infra/parallelize.py:100-112), and qwen3's parallelize never reads it, so its experts run the
    standard all-to-all.  A QA trial: ep 1 was told the key has no effect, ETP 2 and a qwen3 file priced with DeepEP."""
    deepep = {"parallelism.expert_parallel_comm_backend": '"deepep"'}
    dsv3 = {"model.name": '"deepseek_v3"', "model.flavor": '"16B"', "training.seq_len": "4096"}
    _refused(_toml(tmp_path, "ep1", dsv3, deepep), "ep1.toml", "DeepEP requires expert parallelism",
             "set expert_parallel_degree above 1")
    _refused(_toml(tmp_path, "etp2", dsv3, deepep, {"parallelism.expert_parallel_degree": "4",
                                                    "parallelism.expert_tensor_parallel_degree": "2",
                                                    "parallelism.tensor_parallel_degree": "2"}),
             "expert_tensor_parallel_degree = 2", "DeepEP with Expert Tensor Parallelism",
             "set expert_tensor_parallel_degree 1")
    ep8 = {"parallelism.expert_parallel_degree": "8"}
    assert parse_launch([_toml(tmp_path, "dsv3", dsv3, deepep, ep8)]).recipe["moe_dispatcher"] == "deepep"
    qwen = parse_launch([_toml(tmp_path, "qwen", deepep, ep8, {"model.name": '"qwen3"', "model.flavor": '"30B-A3B"'})])
    assert qwen.recipe["moe_dispatcher"] == "alltoall"
    assert "qwen3 does not read expert_parallel_comm_backend" in qwen.sources["recipe.moe_dispatcher"]


def test_llama3_varlen_flavors_refuse_context_parallelism_in_every_version(tmp_path: Path) -> None:
    """llama3 8B_varlen (f8fa21e1, 2025-11-21) runs varlen attention, beside which every torchtitan with the flavor
    refuses CP at start (v0.2.1 models/llama3/model/args.py:57-63, v0.2.2 :57-65): a QA trial's file could not be
    audited at all (--model llama3-8b was 'another model' than 8B_varlen); now it reads as 8B and is refused at cp 2,
    with no key needed to date it, and runs at cp 1."""
    varlen = {"model.flavor": '"8B_varlen"', "parallelism.context_parallel_degree": "2"}
    _refused(_toml(tmp_path, "varlen", varlen), "varlen.toml", 'flavor = "8B_varlen"', "context_parallel_degree = 2",
             "Varlen attention is not supported with CP", "give context_parallel_degree 1")
    assert parse_launch([_toml(tmp_path, "cp1", varlen, {"parallelism.context_parallel_degree": "1"})]).cp == 1


def test_llama3_flex_flavors_refuse_context_parallelism_until_flex_cp(tmp_path: Path) -> None:
    """llama3 8B_flex runs FlexAttention, beside which torchtitan refused CP from 177b295d (2025-07-22) until
    0a2107f9 (2026-01-20, "[CP] Enable FlexCP for llama3"): a file dated before 0a2107f9 (job.save_config_folder,
    JobConfig 755ce8ff only) is refused, one dated after it (context_parallel_load_balancer, from 0a2107f9) runs
    with its CP, and one its keys leave open is priced with a note."""
    flex = {"model.flavor": '"8B_flex"', "parallelism.context_parallel_degree": "2"}
    _refused(_toml(tmp_path, "old", flex, {"job.save_config_folder": '"cfg"'}), "old.toml", 'flavor = "8B_flex"',
             "CP support for FlexAttention is still in progress", "job.save_config_folder", "0a2107f9")
    new = parse_launch([_toml(tmp_path, "new", flex, {"parallelism.context_parallel_load_balancer": '"headtail"'})])
    assert new.cp == 2 and not any("FlexAttention" in n and "refuses" in n for n in new.ignored), new.ignored
    notes = _notes(_toml(tmp_path, "open", flex, NEW))
    assert any("8B_flex" in n and "priced as if it runs" in n for n in notes), notes


def test_llama4_irope_flavors_refuse_context_parallelism(tmp_path: Path) -> None:
    """llama4's iRoPE flavors run FlexAttention for their chunked-attention layers, and torchtitan's Llama 4 refuses
    CP beside it from 177b295d to v0.2.2 (model/args.py:79-86): a QA trial's 17bx16e_irope file at cp 2 (dated by
    compile.enable, 08b8b244) was priced as running."""
    irope = {"model.name": '"llama4"', "model.flavor": '"17bx16e_irope"', "parallelism.context_parallel_degree": "2"}
    _refused(_toml(tmp_path, "irope", irope, NEW), "irope.toml", 'flavor = "17bx16e_irope"',
             "context_parallel_degree = 2", "Context Parallel only supports SDPA attention", "compile.enable")


def test_rotate_method_alltoall_is_priced_as_the_training_step_runs_it(tmp_path: Path) -> None:
    """From 1e8f9acd (2026-01-20, v0.2.2) torchtitan's training step runs PyTorch's _ContextParallel plan and reads
    context_parallel_rotate_method only in validation (v0.2.2 components/validate.py:213), so a v0.2.2 file with
    'alltoall' trains under torch's default all-gather rotation: it was priced as a ring (p2p).  A file its keys date
    after the refactor (context_parallel_load_balancer, JobConfig 0a2107f9) is priced all_gather with a note; one they
    leave open keeps p2p, with a note naming what a newer torchtitan runs."""
    rot = {"parallelism.context_parallel_degree": "2", "parallelism.context_parallel_rotate_method": '"alltoall"'}
    new = parse_launch([_toml(tmp_path, "new", rot, {"parallelism.context_parallel_load_balancer": '"headtail"'})])
    assert new.recipe["cp_comm_type"] == "all_gather", new.recipe
    assert any("validation only" in n for n in new.ignored), new.ignored
    old = parse_launch([_toml(tmp_path, "open", rot)])
    assert old.recipe["cp_comm_type"] == "p2p" and any("validation only" in n for n in old.ignored), old.ignored


def test_a_gpt_oss_toml_with_cp_is_refused_for_its_own_versions_reason(tmp_path: Path) -> None:
    """A 0.2.x gpt_oss TOML at cp 2 was refused for torchtitan 0.3.0's varlen attention, which that torchtitan does not
    run (its gpt-oss runs FlexAttention, models/gpt_oss/model/args.py:67); every 0.2.x gpt-oss refuses CP itself
    (v0.2.2 model/args.py:89-92, "CP support for gpt-oss model is still in progress.")."""
    oss = {"model.name": '"gpt_oss"', "model.flavor": '"120b"', "parallelism.context_parallel_degree": "2"}
    message = _refused(_toml(tmp_path, "oss", oss), "oss.toml", 'flavor = "120b"', "context_parallel_degree = 2",
                       "CP support for gpt-oss model is still in progress", "give context_parallel_degree 1")
    assert "varlen" not in message, message
