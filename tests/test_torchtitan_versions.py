"""torchtitan before 0.3.0 (TOML files and 0.2.x flags), priced and changed as the version its own keys date runs it.

The attention kernel: torchtitan's SDPA put CUDNN_ATTENTION first on every GPU only from 6a3a9da9 (2025-10-09,
#1776, before v0.2.0); at e7c0cae and v0.1.0 models/attention.py ScaledDotProductAttention ran
sdpa_kernel([FLASH_ATTENTION, EFFICIENT_ATTENTION, MATH], set_priority=True), cuDNN first only where
has_cuda_capability(10, 0): PyTorch's FlashAttention-2 on Hopper.  A file whose keys date it before 6a3a9da9 is priced
with flash2 and says why; one they leave open keeps cuDNN's fused attention (flash) with a note; FlexAttention flavors
run a FlashAttention-2-class kernel.  Before, every such file took the torchtitan 0.3.0 row (FlexAttention) and its
source.

The change list: placement's emitter writes torchtitan 0.3.0 flags (`activation-checkpoint:MODE`,
`--parallelism.no-enable-sequence-parallel`, ...), which an older torchtitan refuses; a TOML file's changes are named as
its `section.key`, a 0.2.x command line's as its flags, each in the key name the files' version takes
(torchtitan_keys.SPANS), and a setting that version has no key for says so.
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.changes import PRE3_DEFAULT_NOTE, torchtitan_pre3_settings
from placement.audit.launch import parse_launch
from placement.audit.readers.torchtitan import version_window
from placement.audit.report import TORCHTITAN_PRE3_NOTE
from placement.cli import main

DATA = Path(__file__).parent / "data" / "audit" / "torchtitan"
V010 = DATA / "llama3_8b_v0.1.0.toml"
"""torchtitan v0.1.0's llama3_8b.toml (tests/data/audit/README.md)."""
V022 = DATA / "llama3_8b_v0.2.2.toml"
TT_70B = DATA / "llama3_70b.toml"
JOB_8B = ("--model", "llama3-8b", "--gpus", "8")


def _audit(*launch: Path, job: tuple[str, ...] = JOB_8B, cluster: str = "dgx-h100", extra: tuple[str, ...] = ()
           ) -> dict:
    args = ["--reproducible", "audit", *(x for p in launch for x in ("--launch", str(p))), "--cluster", cluster,
            *job, *extra, "--json"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)


def _edited(tmp_path: Path, source: Path, old: str, new: str) -> Path:
    text = source.read_text()
    assert old in text
    out = tmp_path / source.name
    out.write_text(text.replace(old, new))
    return out


def test_a_v0_1_0_toml_on_h100_is_priced_with_flashattention_2_and_says_why() -> None:
    data = _audit(V010)
    source = data["layout"]["sources"]["recipe.attention_kernel"]
    assert data["estimate"]["recipe"]["attention_kernel"] == "flash2"
    assert source.startswith(f"{V010}:51: last_save_model_weights_only = false")  # the key that dates the file
    for fact in ("checkpoint.last_save_model_weights_only is last in torchtitan's JobConfig at c924c445",
                 "before 6a3a9da9", "FLASH_ATTENTION", "has_cuda_capability(10, 0)", "on Hopper"):
        assert fact in source
    assert data["estimate"]["recipe_sources"]["attention_kernel"] == f"launch:{source}"
    cudnn = _audit(V010, extra=("--attention-kernel", "flash"))
    assert data["estimate"]["step_time_s"] > cudnn["estimate"]["step_time_s"]  # FlashAttention-2 is slower on H100


def test_on_b200_the_same_file_runs_cudnn_and_is_priced_as_fused_attention() -> None:
    """Below compute capability 10.0 only: on B200 the old list puts CUDNN_ATTENTION first, and flash2 prices as flash
    there (no flash2_attention_efficiency), as the source says."""
    old = _audit(V010, cluster="dgx-b200")
    assert old["estimate"]["recipe"]["attention_kernel"] == "flash2"
    cudnn = _audit(V010, cluster="dgx-b200", extra=("--attention-kernel", "flash"))
    assert old["estimate"]["step_time_s"] == cudnn["estimate"]["step_time_s"]


def test_a_v0_2_2_toml_is_priced_with_cudnn_attention_and_notes_the_older_kernel() -> None:
    """Its keys (newest: quantize.linear.float8..., from 8a2686c4, 2025-09-30) fit main before 6a3a9da9 too: flash,
    0.2.0 to 0.2.2's, with the note naming what an older torchtitan runs."""
    data = _audit(V022)
    assert data["estimate"]["recipe"]["attention_kernel"] == "flash"
    source = data["layout"]["sources"]["recipe.attention_kernel"]
    assert source.startswith("torchtitan default SDPA from 6a3a9da9") and "CUDNN_ATTENTION first" in source
    note = next(x for x in data["layout"]["ignored"] if x.startswith("attention kernel:"))
    assert "8a2686c4" in note and "--attention-kernel flash2" in note and "FLASH_ATTENTION" in note
    older = _audit(V022, extra=("--attention-kernel", "flash2"))
    assert data["estimate"]["step_time_s"] < older["estimate"]["step_time_s"]


def test_a_key_torchtitan_took_after_6a3a9da9_dates_the_file_after_it(tmp_path: Path) -> None:
    toml = _edited(tmp_path, V022, "[activation_checkpoint]\n", "[activation_checkpoint]\npreserve_rng_state = false\n")
    launch = parse_launch([toml])
    source = launch.sources["recipe.attention_kernel"]
    assert launch.recipe["attention_kernel"] == "flash"
    assert "preserve_rng_state is first in torchtitan's JobConfig at e61f2cce" in source
    assert "eadca483" in source  # an older torchtitan drops a TOML key it does not know, unread


def test_flex_attention_flavors_and_keys_are_priced_as_flashattention_2(tmp_path: Path) -> None:
    flex = parse_launch([_edited(tmp_path, V022, 'flavor = "8B"', 'flavor = "8B_flex"')])
    assert flex.recipe["attention_kernel"] == "flash2"
    assert "llama3:8B_flex runs FlexAttention" in flex.sources["recipe.attention_kernel"]
    keyed = parse_launch([_edited(tmp_path, V010, "[model]\n", "[model]\nuse_flex_attn = true\n")])
    assert keyed.recipe["attention_kernel"] == "flash2"
    assert "model.use_flex_attn: FlexAttention" in keyed.sources["recipe.attention_kernel"]
    own = parse_launch([_edited(tmp_path, V022, 'flavor = "8B"', 'flavor = "8B_mine"')])
    assert any("llama3:8B_mine" in x and "no flavor torchtitan" in x for x in own.ignored)


def test_a_0_3_0_command_line_keeps_the_0_3_0_row(tmp_path: Path) -> None:
    """0.3.0 named configs run FlexAttention (frameworks.CAPABILITIES): the reader states no kernel for them."""
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node 8 -m torchtitan.train --module llama3 --config llama3_8b "
                      "--parallelism.tensor_parallel_degree 1 --parallelism.pipeline_parallel_degree 1 "
                      "--parallelism.context_parallel_degree 1 --parallelism.expert_parallel_degree 1 "
                      "--training.local_batch_size 1 --training.seq_len 8192 activation-checkpoint:full\n")
    launch = parse_launch([script])
    assert "attention_kernel" not in launch.recipe and launch.torchtitan_form is None


def test_version_window_names_the_keys_that_bound_the_version() -> None:
    newest, oldest = version_window({"training.batch_size", "training.seq_len", "parallelism.tensor_parallel_degree"})
    assert oldest == ("training.batch_size", "29fb3f92")  # renamed local_batch_size at 8570415c
    assert newest == ("parallelism.tensor_parallel_degree", "785c34c9")
    assert version_window({"training.seq_len"}) == (None, None)


def test_a_toml_change_list_names_the_tomls_own_keys() -> None:
    """The 70B TOML's best plan moves from full to per-op selective checkpointing and from TP 8 to TP 2: the lines
    are its [parallelism] and [activation_checkpoint] keys, with selective_ac_option "op" (its default "2" is layer
    checkpointing, not the per-op policy priced)."""
    data = _audit(TT_70B, job=("--model", "llama3-70b", "--gpus", "256"))
    assert data["best"]["layout"]["recompute"] != data["estimate"]["layout"]["recompute"]
    by = {c["argument"]: c for c in data["changes"]}
    assert not [a for a in by if a.startswith(("--", "activation-checkpoint"))]
    assert by["parallelism.tensor_parallel_degree"]["from"] == "8"
    assert by["parallelism.tensor_parallel_degree"]["to"] == str(data["best"]["layout"]["tp"])
    assert (by["activation_checkpoint.mode"]["from"], by["activation_checkpoint.mode"]["to"]) == ('"full"',
                                                                                                 '"selective"')
    option = by["activation_checkpoint.selective_ac_option"]
    assert option["from"] is None and option["to"] == '"op"' and "per-op policy" in option["note"]
    shard = by.get("parallelism.data_parallel_shard_degree")  # -1 (the rest) may still give the best plan's shard
    assert shard is None or shard["from"] == "-1"  # as the TOML states it
    assert by["training.global_batch_size"]["from"] is None
    assert data["changes_note"] == TORCHTITAN_PRE3_NOTE
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(TT_70B), "--cluster", "dgx-h100",
                                       "--model", "llama3-70b", "--gpus", "256"])
    assert '+ activation_checkpoint.mode "selective"' in result.stdout
    assert "activation-checkpoint:" not in result.stdout and "--parallelism." not in result.stdout


def test_a_0_2_x_command_line_change_list_names_its_flags_as_it_writes_them(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nproc_per_node 8 -m torchtitan.train --model.name llama3 --model.flavor 8B "
                      "--training.local-batch-size 1 --training.seq-len 8192 --parallelism.tensor-parallel-degree 2 "
                      "--activation-checkpoint.mode full --lr-scheduler.lr-min 0.1\n")
    data = _audit(script)
    by = {c["argument"]: c for c in data["changes"]}
    assert (by["--activation-checkpoint.mode"]["from"], by["--activation-checkpoint.mode"]["to"]) == ("full", "none")
    reshard = by["--parallelism.fsdp-reshard-after-forward"]  # not stated: dashed as the line's other flags
    # from what torchtitan runs where the files leave it out (changes.PRE3_DEFAULTS), not placement's spelling
    assert (reshard["from"], reshard["note"]) == ("default", PRE3_DEFAULT_NOTE)
    assert not [a for a in by if "_" in a]


def test_a_flag_over_the_toml_is_changed_as_the_flag(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    # (on 16 GPUs, so data_parallel_shard_degree -1 resolves to 2: FSDP, the job's bf16; on 8 it would train in float32)
    script.write_text(f"torchrun --nnodes 2 --nproc_per_node 8 -m torchtitan.train --job.config_file {V010.name} "
                      f"--parallelism.tensor_parallel_degree 8\n")
    data = _audit(V010, script, job=("--model", "llama3-8b", "--gpus", "16"))
    by = {c["argument"]: c for c in data["changes"]}
    assert by["--parallelism.tensor_parallel_degree"]["from"] == "8"
    assert "activation_checkpoint.mode" in by  # the TOML's key, in the TOML's form


def test_an_older_torchtitans_keys_are_read_and_changed_under_their_own_names(tmp_path: Path) -> None:
    """Before 785c34c9 (2025-03-18) the degrees were [training] and [experimental] keys, before 5e2033c7 the pipeline
    took a micro-batch count, before 8570415c there was no global batch (nor accumulation): an old TOML's TP is read,
    and its changes are named so."""
    toml = tmp_path / "old.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nbatch_size = 4\nseq_len = 8192\n'
                    'tensor_parallel_degree = 2\ndata_parallel_shard_degree = -1\n[experimental]\n'
                    'pipeline_parallel_degree = 2\npipeline_parallel_microbatches = 4\n')
    launch = parse_launch([toml])
    assert (launch.tp, launch.pp, launch.local_batch, launch.micro_batch_size) == (2, 2, 4, 1)
    assert launch.sources["tp"].endswith("tensor_parallel_degree = 2")
    settings = {"--parallelism.data_parallel_replicate_degree": "1", "--parallelism.data_parallel_shard_degree": "2",
                "--parallelism.fsdp_reshard_after_forward": "never", "--parallelism.tensor_parallel_degree": "4",
                "--parallelism.pipeline_parallel_degree": "1", "--parallelism.pipeline_parallel_microbatch_size": "2",
                "--training.local_batch_size": "4", "--training.global_batch_size": "16", "--training.seq_len": "8192",
                "--training.disable_cuda_graphs": "true", "activation-checkpoint": "selective"}
    spelled = torchtitan_pre3_settings(settings, launch.torchtitan_stated, "toml")
    assert spelled["training.tensor_parallel_degree"][1] == "4"
    assert spelled["training.batch_size"][1] == "4"
    assert spelled["experimental.pipeline_parallel_microbatches"][1] == "2"  # local 4 in micro-batches of 2
    assert spelled["training.fsdp_reshard_after_forward"][1] == '"never"'
    assert spelled["gradient accumulation"][1] == "2" and "8570415c" in spelled["gradient accumulation"][2]
    assert spelled["activation_checkpoint.selective_ac_option"][1] == '"op"'
    assert spelled["CUDA graphs"][0] is None and "no CUDA graphs" in spelled["CUDA graphs"][2]
    assert spelled["sequence parallelism"][1] == "on" and "only 0.3.0" in spelled["sequence parallelism"][2]


def test_an_older_torchtitan_audit_cites_its_own_version_and_lists_no_pipeline_key_without_a_pipeline(tmp_path):
    """A torchtitan TOML of before 0.3.0 without a pipeline (a user trial): the framework rows cite v0.2.2 where the
    same holds, no pipeline-only recipe row is listed, and the change list names no pipeline key (pp 1 on both
    sides)."""
    import json

    from click.testing import CliRunner

    from placement.cli import main

    toml = tmp_path / "job.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "70B"\n\n[training]\nlocal_batch_size = 4\nseq_len = 8192\n\n'
                    '[parallelism]\ndata_parallel_shard_degree = -1\ntensor_parallel_degree = 8\n'
                    'pipeline_parallel_degree = 1\n\n[activation_checkpoint]\nmode = "full"\n')
    run = tmp_path / "run.sh"
    run.write_text("torchrun --nnodes 8 --nproc_per_node 8 -m torchtitan.train --job.config_file job.toml\n")
    result = CliRunner().invoke(main, ["audit", "--launch", str(toml), "--launch", str(run), "--model", "llama3-70b",
                                       "--cluster", "dgx-h100", "--gpus", "64"])
    assert result.exit_code in (0, 1), result.output
    text = result.stdout
    assert "recipe.grad_reduce_fp32 True: torchtitan before 0.3.0" in text and "v0.2.2" in text
    assert "recipe.pipeline_unsharded_grads" not in text
    got = json.loads(CliRunner().invoke(main, ["audit", "--launch", str(toml), "--launch", str(run), "--model",
                                               "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64",
                                               "--json"]).stdout)
    assert got["best"]["layout"]["pp"] == 1 and got["changes"]  # a change list, with no pipeline on either side
    assert not [c for c in got["changes"] if "pipeline_parallel" in c["argument"]]


def test_a_0_2_x_float8_file_runs_tensorwise_unless_it_names_a_recipe(tmp_path: Path) -> None:
    """torchtitan v0.2.2 scales Float8 tensor-wise where `recipe_name` is unset (components/quantization/float8.py:
    86-99); the audit priced its llama3_405b.toml with 0.3.0's row-wise row (a user trial).  A stated recipe_name
    is read; the FP8 all-gather it may turn on is said, not priced."""
    fp8 = V022.read_text().replace('# converters = ["float8"]', 'converters = ["quantize.linear.float8"]')
    with_gather = tmp_path / "gather.toml"
    with_gather.write_text(fp8.replace("enable_fsdp_float8_all_gather = false", "enable_fsdp_float8_all_gather = true"))
    data = _audit(with_gather, extra=("--precision", "fp8"))
    assert data["estimate"]["recipe"]["fp8_recipe"] == "tensorwise"
    assert "tensorwise scaling (v0.2.2 components/quantization/float8.py" in data["estimate"]["recipe_sources"][
        "fp8_recipe"]
    assert any(x.startswith("quantize.linear.float8.enable_fsdp_float8_all_gather") for x in data["layout"]["ignored"])
    named = tmp_path / "rowwise.toml"
    named.write_text(fp8.replace("[quantize.linear.float8]\n", "[quantize.linear.float8]\nrecipe_name = \"rowwise\"\n"))
    assert _audit(named, extra=("--precision", "fp8"))["estimate"]["recipe"]["fp8_recipe"] == "rowwise"


def test_the_old_float8_switch_runs_fp8_as_torchtitan_did(tmp_path) -> None:
    """A user trial: torchtitan's Float8 switch before model.converters (`[float8] enable_float8_linear = true`, the
    Dec-2024 benchmark configs) was priced as bf16, "the launch files do not set it". It is FP8, tensor-wise dynamic
    scaling with the LM head left 16-bit (torchtitan/float8.py at 9dec370), and faster than the same file without it;
    written bare on the command line (argparse store_true then, tyro's bool flag since) it reads the same."""
    body = ('[job]\ndump_folder = "./outputs"\n[model]\nname = "llama3"\nflavor = "8B"\n[training]\nbatch_size = 1\n'
            'seq_len = 8192\n[experimental]\npipeline_parallel_degree = 1\n')
    plain, fp8 = tmp_path / "plain.toml", tmp_path / "fp8.toml"
    plain.write_text(body)
    fp8.write_text(body + "[float8]\nenable_float8_linear = true\n")
    base, got = _audit(plain)["estimate"], _audit(fp8)
    est, sources = got["estimate"], got["layout"]["sources"]
    assert base["precision"] == "bf16" and est["precision"] == "fp8"
    assert (est["recipe"]["fp8_recipe"], est["recipe"]["fp8_lm_head"]) == ("tensorwise", False)
    assert "enable_float8_linear = true" in sources["precision"] and "9dec370" in sources["precision"]
    assert est["step_time_s"] < base["step_time_s"]
    script = tmp_path / "run.sh"
    script.write_text(f"torchrun --nproc_per_node 8 train.py --job.config_file {plain} --float8.enable_float8_linear "
                      f"--checkpoint.enable\n")
    bare = _audit(script, plain)["estimate"]
    assert (bare["precision"], bare["recipe"]["fp8_recipe"]) == ("fp8", "tensorwise")


def test_an_old_pipeline_runs_pp_micro_batches_where_the_files_count_none(tmp_path) -> None:
    """Before pipeline_parallel_microbatch_size (5e2033c7, 2025-04-07) torchtitan split the local batch into
    pipeline_parallel_microbatches, or pp of them where unset (parallelisms/pipeline_llama.py:67-68 at 9dec370); a user
    trial: the 405B benchmark config ran 8 micro-batches of 4 and was priced as 32 of 1. A file of today's keys keeps
    the size-1 default."""
    old = tmp_path / "old.toml"
    old.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nbatch_size = 8\nseq_len = 8192\n'
                   '[experimental]\npipeline_parallel_degree = 2\n')
    lay = _audit(old)["layout"]
    assert (lay["pp"], lay["micro_batch_size"], lay["num_microbatches"]) == (2, 4, 2)
    assert "before pipeline_parallel_microbatch_size (5e2033c7" in lay["sources"]["micro_batch_size"]
    new = tmp_path / "new.toml"
    new.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 8\nseq_len = 8192\n'
                   '[parallelism]\npipeline_parallel_degree = 2\n')
    lay = _audit(new)["layout"]
    assert (lay["micro_batch_size"], lay["num_microbatches"]) == (1, 8)


def test_fsdp_float8_all_gather_hands_the_gemms_fp8_weights(tmp_path) -> None:
    """A user trial: a torchtitan 0.2.x tensor-wise Float8 job with enable_fsdp_float8_all_gather was priced with the
    GEMMs casting the 16-bit weights every pass (0.3.0's rowwise row); torchao casts each shard before FSDP's gather,
    so the casts are off, and the job prices faster."""
    body = ('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nbatch_size = 1\nseq_len = 8192\n'
            '[experimental]\npipeline_parallel_degree = 1\n[float8]\nenable_float8_linear = true\n')
    plain, gather = tmp_path / "plain.toml", tmp_path / "gather.toml"
    plain.write_text(body)
    gather.write_text(body + "enable_fsdp_float8_all_gather = true\n")
    est = {p.stem: _audit(p)["estimate"] for p in (plain, gather)}
    assert est["plain"]["recipe"]["fp8_recasts_weights"] is True
    assert est["gather"]["recipe"]["fp8_recasts_weights"] is False
    assert "enable_fsdp_float8_all_gather" in est["gather"]["recipe_sources"]["fp8_recasts_weights"]
    assert est["gather"]["step_time_s"] < est["plain"]["step_time_s"]


def test_keys_of_no_single_torchtitan_are_a_warning(tmp_path) -> None:
    """A user trial: --training.compile (last in torchtitan's JobConfig at aeb3a4ba, 2025-08-13) beside a v0.2.2 TOML
    (keys from 8a2686c4, 2025-09-30) was priced without a word, the older flag choosing the attention kernel."""
    script = tmp_path / "run.sh"
    script.write_text(f"torchrun --nproc_per_node 8 -m torchtitan.train --job.config_file {V022} --training.compile\n")
    got = _audit(script, V022)
    warned = [f["message"] for f in got["findings"] if f["kind"] == "not_priced_as_run"
              and f["message"].startswith("no torchtitan version takes both training.compile")]
    assert warned and "aeb3a4ba" in warned[0]
    assert not [f for f in _audit(V022)["findings"] if "no torchtitan version takes both" in f["message"]]


def test_a_launch_that_loads_another_toml_says_which_one_is_priced(tmp_path) -> None:
    """A user trial: torchtitan's run script loads ${CONFIG_FILE:-./train_configs/debug_model.toml}; audited with
    llama3_8b.toml, the job was priced from that TOML and only a seen-but-not-modelled line named the other file."""
    script = tmp_path / "run_train.sh"
    script.write_text('CONFIG_FILE=${CONFIG_FILE:-"./train_configs/debug_model.toml"}\n'
                      'torchrun --nproc_per_node=8 train.py --job.config_file ${CONFIG_FILE}\n')
    got = _audit(script, V022)
    (warn,) = [f["message"] for f in got["findings"] if "the launch loads --job.config_file" in f["message"]]
    assert "debug_model.toml" in warn and "environment may name another file" in warn and V022.name in warn


def test_the_precision_is_torchtitans_mixed_precision_param_not_placements_default(tmp_path: Path) -> None:
    """A user trial: a TOML without training.mixed_precision_param had its bf16 credited to "placement's default";
    torchtitan defaults the key to bfloat16 (FSDP's param_dtype), and a file that states it is its evidence."""
    said = _audit(V022)["layout"]["sources"]["precision"]
    assert "mixed_precision_param" not in V022.read_text()
    assert said.startswith("torchtitan's default training.mixed_precision_param 'bfloat16'")
    stated = _edited(tmp_path, V022, "[training]\n", "[training]\nmixed_precision_param = \"bfloat16\"\n")
    said = _audit(stated)["layout"]["sources"]["precision"]
    assert "mixed_precision_param = \"bfloat16\"" in said and "param_dtype" in said


@pytest.mark.parametrize(("name", "flavor", "model", "gpus"), [
    ("qwen3", "30B-A3B", "qwen3-30b-a3b", "8"), ("gpt_oss", "120b", "gpt-oss-120b", "64")])
def test_a_0_2_x_flavor_of_a_catalog_model_is_that_model(tmp_path: Path, name, flavor, model, gpus) -> None:
    """A user trial: v0.2.2 TOMLs naming qwen3 30B-A3B or gpt_oss 120b were refused whatever --model ("the launch files
    train torchtitan's qwen3:30B-A3B, but --model qwen3-30b-a3b runs as torchtitan's qwen3:qwen3_30b_a3b"): the 0.2.x
    flavor is the 0.3.0 config of the same dimensions, and another catalog model is still refused, naming the right
    one."""
    toml = _edited(tmp_path, V022, 'name = "llama3"\nflavor = "8B"', f'name = "{name}"\nflavor = "{flavor}"')
    got = _audit(toml, job=("--model", model, "--gpus", gpus))
    assert got["estimate"]["step_time_s"] > 0
    other = CliRunner().invoke(main, ["audit", "--launch", str(toml), "--model", "llama3-8b", "--gpus", gpus])
    assert other.exit_code == 2
    assert f"torchtitan's {name}:{flavor} ({model} in placement's catalog)" in other.stderr
    assert f"pass --model {model}" in other.stderr


def _degrees_after(changes: list[dict], stated: dict[str, int], prefix: str) -> dict[str, int]:
    """torchtitan's five world degrees once the change list is applied to the files' `stated` values (unstated ones at
    torchtitan's defaults), data_parallel_shard_degree -1 resolved as parallel_dims does (v0.2.2 :48-56)."""
    names = ("data_parallel_replicate_degree", "data_parallel_shard_degree", "context_parallel_degree",
             "tensor_parallel_degree", "pipeline_parallel_degree")
    got = {n: stated.get(n, -1 if n == "data_parallel_shard_degree" else 1) for n in names}
    for c in changes:
        name = c["argument"].removeprefix(prefix)
        if name in got:
            got[name] = int(c["to"])
    return got


def _world(got: dict[str, int], world: int) -> int:
    if got["data_parallel_shard_degree"] == -1:
        rest = (got["data_parallel_replicate_degree"] * got["context_parallel_degree"] * got["tensor_parallel_degree"]
                * got["pipeline_parallel_degree"])
        got = {**got, "data_parallel_shard_degree": world // rest}
    return math.prod(got.values())


def test_a_toml_change_list_changes_every_degree_whose_product_torchtitan_asserts(tmp_path: Path) -> None:
    """A user trial: data_parallel_replicate_degree = 4 beside shard -1 and pp 8 on 4096 H100s; the best plan (dp as
    shards, no replicas) changed shard, cp and pp but left the replicas at 4: 16384 ranks, which parallel_dims refuses
    ("Invalid parallel dims: ... != WORLD_SIZE(4096)").  The changed degrees multiply to the world and are the best
    plan's."""
    toml = _edited(tmp_path, DATA / "llama3_405b.toml", "data_parallel_replicate_degree = 1",
                   "data_parallel_replicate_degree = 4")
    # 8 micro-batches on the 8 stages: torch's Schedule1F1B refuses fewer (cost.rules pp_microbatches)
    toml.write_text(toml.read_text().replace("pipeline_parallel_degree = 1", "pipeline_parallel_degree = 8")
                    .replace("batch_size = 2", "batch_size = 8"))
    data = _audit(toml, job=("--model", "llama3-405b", "--gpus", "4096"))
    parallelism = tomllib.loads(toml.read_text())["parallelism"]
    got = _degrees_after(data["changes"], parallelism, "parallelism.")
    best = data["best"]["layout"]
    assert _world(got, 4096) == 4096
    replicas = best["dp"] // best["dp_shard"] if best["zero_stage"] == 3 else 1
    assert got["data_parallel_replicate_degree"] == replicas == 1  # the files' 4 changes to the best plan's
    by = {c["argument"]: c for c in data["changes"]}
    assert by["parallelism.data_parallel_replicate_degree"]["from"] == "4"
    assert (got["context_parallel_degree"], got["tensor_parallel_degree"], got["pipeline_parallel_degree"]) == (
        best["cp"], best["tp"], best["pp"])


def test_a_0_3_0_change_list_changes_every_degree_whose_product_torchtitan_asserts(tmp_path: Path) -> None:
    """The same job on torchtitan 0.3.0 flags: the replicas change too, and the shard degree changes from the
    command's -1, not placement's resolved count."""
    script = tmp_path / "run.sh"
    stated = {"data_parallel_replicate_degree": 4, "data_parallel_shard_degree": -1, "tensor_parallel_degree": 8,
              "pipeline_parallel_degree": 8, "context_parallel_degree": 1}
    script.write_text("torchrun --nnodes 512 --nproc_per_node 8 -m torchtitan.train --module llama3 --config "
                      "llama3_405b " + " ".join(f"--parallelism.{k} {v}" for k, v in stated.items())
                      + " --training.local_batch_size 8 --training.seq_len 8192 --training.disable_cuda_graphs "
                        "activation-checkpoint:full\n")
    data = _audit(script, job=("--model", "llama3-405b", "--gpus", "4096"))
    got = _degrees_after(data["changes"], stated, "--parallelism.")
    assert _world(got, 4096) == 4096
    by = {c["argument"]: c for c in data["changes"]}
    assert (by["--parallelism.data_parallel_replicate_degree"]["from"],
            by["--parallelism.data_parallel_replicate_degree"]["to"]) == ("4", "1")
    assert by["--parallelism.data_parallel_shard_degree"]["from"] == "-1"
