"""The argument diff of `placement audit` lists the environment a change needs, not only the flags."""

from __future__ import annotations

import pytest

from placement.audit.changes import launch_changes
from tests.verify.helpers import plan_context


def test_a_switch_to_megatron_fsdp_drops_cuda_device_max_connections() -> None:
    """Megatron needs CUDA_DEVICE_MAX_CONNECTIONS=1 with TP > 1 and Megatron-FSDP refuses it (validate_args):
    a diff from a TP-2 ZeRO-1 job to TP-2 FSDP says to unset it; the reverse says to set it."""
    zero1, _ = plan_context("llama3-8b", "dgx-h100", 16, 4096, 256, {"tp": 2, "pp": 1, "cp": 1, "zero_stage": 1})
    fsdp, _ = plan_context("llama3-8b", "dgx-h100", 16, 4096, 256, {"tp": 2, "pp": 1, "cp": 1, "zero_stage": 3})
    env = [c for c in launch_changes("megatron", zero1, fsdp) if c["argument"] == "env CUDA_DEVICE_MAX_CONNECTIONS"]
    assert env == [{"argument": "env CUDA_DEVICE_MAX_CONNECTIONS", "from": "1", "to": None}]
    back = [c for c in launch_changes("megatron", fsdp, zero1) if c["argument"] == "env CUDA_DEVICE_MAX_CONNECTIONS"]
    assert back == [{"argument": "env CUDA_DEVICE_MAX_CONNECTIONS", "from": None, "to": "1"}]


def test_the_change_list_reads_the_files_flags_not_their_comments(tmp_path):
    """Megatron-LM's examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh passes --use-distributed-optimizer and
    lists `# --megatron-fsdp-main-grads-dtype auto` commented out: the change list told the user to add the first
    and to remove the second as if the file had it (a user trial).  A flag the files pass is no change to add; a
    commented flag is not in the files."""
    from placement.audit.changes import megatron_flag_in, uncommented

    text = "ARGS=(\n  --use-distributed-optimizer\n  # --megatron-fsdp-main-grads-dtype auto\n  --bf16 # --fp16\n)\n"
    live = uncommented(text)
    assert megatron_flag_in("--use-distributed-optimizer", live) and megatron_flag_in("--bf16", live)
    assert not megatron_flag_in("--megatron-fsdp-main-grads-dtype", live) and not megatron_flag_in("--fp16", live)


def test_a_megatron_fsdp_scripts_change_list_keeps_its_own_flags(tmp_path):
    import json

    from click.testing import CliRunner

    from placement.audit.changes import NOT_IN_FILES
    from placement.cli import main

    script = tmp_path / "train.sh"
    script.write_text(
        "torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --num-layers 32 --hidden-size 4096 \\\n"
        "  --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention --num-query-groups 8 --swiglu \\\n"
        "  --seq-length 8192 --micro-batch-size 1 --global-batch-size 64 --bf16 \\\n"
        "  --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params --ckpt-format fsdp_dtensor \\\n"
        "  --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather \\\n"
        "  --no-check-for-nan-in-loss-and-grad\n"
        "# --megatron-fsdp-grad-comm-dtype auto\n")
    result = CliRunner().invoke(main, ["audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--launch",
                                       str(script), "--json"])
    assert result.exit_code in (0, 1), result.output
    changes = json.loads(result.stdout)["changes"]
    assert not [c for c in changes if c["from"] is None and c["argument"] in (
        "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
        "--no-check-for-nan-in-loss-and-grad")], changes
    for c in changes:
        if c["argument"] == "--megatron-fsdp-grad-comm-dtype" and c["from"] is not None:
            assert c.get("note") == NOT_IN_FILES


def test_a_maxtext_change_quotes_the_value_the_files_state() -> None:
    """A MaxText change's launched side was placement's spelling (`remat_policy minimal`) where the YAML said
    minimal_with_context (priced the same); it quotes the file, the last override winning."""
    from placement.audit.changes import _maxtext_stated

    text = 'base_config: "base.yml"\nremat_policy: "minimal_with_context"  # saves qkv\nper_device_batch_size: 4\n'
    assert _maxtext_stated(text, "remat_policy") == "minimal_with_context"
    assert _maxtext_stated(text + "python3 -m MaxText.train cfg.yml remat_policy=full\n", "remat_policy") == "full"
    assert _maxtext_stated(text, "scan_layers") is None


def test_a_list_flags_every_word_is_compared(tmp_path) -> None:
    """Megatron-LM's list flags (nargs "+"): a user trial's change list added --overlap-moe-expert-parallel-comm but
    kept `--recompute-modules mlp layernorm moe`, which Megatron refuses beside it, where the best plan recomputes
    mla_up_proj alone: only the first word of each side had been compared."""
    import json

    from click.testing import CliRunner

    from placement.cli import main
    from tests.megatron_scripts import mixtral_script

    script = mixtral_script(tmp_path, "--moe-token-dispatcher-type alltoall --recompute-granularity selective "
                                      "--recompute-modules core_attn moe")
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(script), "--model", "mixtral-8x7b",
                                       "--cluster", "dgx-h100", "--gpus", "64", "--json"])
    assert result.exit_code in (0, 1), result.output
    got = json.loads(result.stdout)
    best = got["best"]
    written = " ".join(best["recipe"]["recompute_modules"] or ["core_attn"]) \
        if best["layout"]["recompute"] == "selective" else None
    [change] = [c for c in got["changes"] if c["argument"] == "--recompute-modules"] or [None]
    if written == "core_attn moe":
        assert change is None
    else:
        assert change is not None and change["from"] == "core_attn moe" and change["to"] == written


def test_a_best_plan_that_only_switches_recipe_features_is_a_finding(tmp_path) -> None:
    """A user trial: the Megatron file of `plan --emit all` (a plan restricted to what every format launches) audited
    at a 1.051x speed-up from --tp-comm-overlap and full CUDA graphs with "no findings": combined_changes named only
    layout fields, so a recipe-only saving passed `--fail-on`."""
    import json

    from click.testing import CliRunner

    from placement.cli import main

    job = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "1024"]
    out = tmp_path / "launch"
    result = CliRunner().invoke(main, ["plan", *job, "--emit", "all", "--out", str(out)])
    # torchtitan.sh runs over the GPU's memory (exit 1, every file written); megatron.sh runs the plan
    assert result.exit_code == 1, result.output
    assert "what torchtitan.sh runs instead of the plan is over" in result.stderr
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(out / "megatron.sh"), *job, "--json"])
    got = json.loads(result.stdout)
    assert got["best"]["step_time_s"] < 0.98 * got["estimate"]["step_time_s"]
    [combined] = [f for f in got["findings"] if f["kind"] == "combined_changes"]
    assert "tp_comm_overlap false -> true" in combined["message"]


def test_a_deepspeed_change_list_states_the_recompute_and_the_files_own_values(tmp_path) -> None:
    """A user trial: a ZeRO-3 JSON (activation_checkpointing.partition_activations true) whose job needs recompute to
    fit got four activation_checkpointing keys "from null", one of them already in the file, and not the recompute
    (model code) that makes it fit."""
    import json

    from click.testing import CliRunner

    from placement.cli import main

    (tmp_path / "ds_config.json").write_text(json.dumps({
        "train_batch_size": 32, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 3},
        "bf16": {"enabled": True}, "activation_checkpointing": {"partition_activations": True,
                                                                "contiguous_memory_optimization": False}}))
    (tmp_path / "hostfile").write_text("".join(f"gpu000{i} slots=8\n" for i in range(1, 5)))
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(tmp_path / "ds_config.json"),
                                       "--launch", str(tmp_path / "hostfile"), "--model", "llama3-70b", "--cluster",
                                       "dgx-h100", "--gpus", "32", "--json"])
    got = json.loads(result.stdout)
    assert got["best"]["layout"]["recompute"] == "full" and not got["estimate"]["fits"]
    changes = {c["argument"]: (c["from"], c["to"]) for c in got["changes"]}
    assert changes["recompute (model code)"] == ("none", "full")
    assert changes["activation_checkpointing.partition_activations"] == ("true", "false")
    assert "activation_checkpointing.contiguous_memory_optimization" not in changes  # the file already has it


def test_the_best_plan_overlaps_the_weight_gather_the_findings_price(tmp_path) -> None:
    """A user trial: a job with --overlap-grad-reduce but not --overlap-param-gather got a param_gather_not_overlapped
    finding, while its best plan (and the file written for it) kept the gather exposed, so a re-audit of that file
    said both "no changes" and the same finding.  The best plan turns it on, as it does --overlap-grad-reduce."""
    import json

    from click.testing import CliRunner

    from placement.cli import main
    from tests.megatron_scripts import mixtral_script

    # the collective averages (one pass over the distributed optimizer's gradient buffer fewer), so the best plan
    # keeps the distributed optimizer rather than Megatron-FSDP's ZeRO-2
    script = mixtral_script(tmp_path, "--use-distributed-optimizer --overlap-grad-reduce --recompute-granularity "
                                      "full --recompute-method uniform --recompute-num-layers 1 "
                                      "--tensor-model-parallel-size 2 --sequence-parallel --ddp-average-in-collective")
    got = json.loads(CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(script), "--model",
                                               "mixtral-8x7b", "--gpus", "64", "--json"]).stdout)
    assert got["best"]["layout"]["zero_stage"] == 1
    assert "param_gather_not_overlapped" in [f["kind"] for f in got["findings"]]
    assert got["best"]["recipe"]["param_gather_overlap"] is True
    assert got["best"]["recipe_sources"]["param_gather_overlap"] == "searched"
    assert {"argument": "--overlap-param-gather", "from": None, "to": "true"} in got["changes"]


def test_the_written_megatron_file_names_the_jobs_arguments_it_does_not_carry(tmp_path) -> None:
    """A user trial: the megatron.sh written for an MoE job's best plan dropped its --moe-router-load-balancing-type
    aux_loss and --moe-aux-loss-coeff (Megatron's default coefficient is 0: no load-balancing loss) without a word.
    The audit names every flag of the job's files the written file does not pass and the change list does not
    remove, on stderr and in the JSON; the launcher's own flags are not among them."""
    import json

    from click.testing import CliRunner

    from placement.cli import main
    from tests.megatron_scripts import mixtral_script

    script = mixtral_script(tmp_path, "--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-2 "
                                      "--lr 3e-4 --data-path /data/corpus --recompute-granularity full "
                                      "--recompute-method uniform --recompute-num-layers 1")
    job = ["--reproducible", "audit", "--launch", str(script), "--model", "mixtral-8x7b", "--gpus", "64"]
    result = CliRunner().invoke(main, [*job, "--out", str(tmp_path / "out"), "--json"])
    got = json.loads(result.stdout)
    missing = got["arguments_not_carried"]
    for flag in ("--moe-router-load-balancing-type", "--moe-aux-loss-coeff", "--lr", "--data-path"):
        assert flag in missing
    from placement.audit.changes import uncommented

    written = uncommented((tmp_path / "out" / "megatron.sh").read_text())  # its comments name some ("yours to add")
    assert all(f"{flag} " not in written for flag in missing)
    removed = {c["argument"] for c in got["changes"] if c["to"] is None}
    assert not set(missing) & removed and "--nproc-per-node" not in missing and "--num-layers" not in missing
    assert "does not carry these arguments of the job's files" in result.stderr
    # a flag both pass with other literal values, which the change list does not name, is named too (a user trial:
    # --max-position-embeddings 4096 written for the job's 40960); the same number spelled otherwise is no change
    assert got["arguments_changed"] == [{"argument": "--max-position-embeddings", "job": "32768", "written": "4096"}]
    assert "--max-position-embeddings 4096 (the job's: 32768)" in result.stderr


def test_the_change_list_says_which_megatron_release_its_new_flags_need(tmp_path) -> None:
    """A user trial: the diff added --cuda-graph-impl and --cuda-graph-modules (Megatron-LM core_v0.15.0 and
    core_v0.18.0 on) to a job whose Megatron may be older, with no word of a version.  The note names each such flag
    the diff adds with its first release, and is absent where the diff adds none."""
    import json

    from click.testing import CliRunner

    from placement.audit.report import MEGATRON_FLAG_SINCE
    from placement.cli import main

    # the Megatron file of a plan restricted to what every format launches: its best plan adds CUDA graphs
    job = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "1024"]
    CliRunner().invoke(main, ["plan", *job, "--emit", "all", "--out", str(tmp_path / "launch")])
    got = json.loads(CliRunner().invoke(main, ["--reproducible", "audit", "--launch",
                                               str(tmp_path / "launch" / "megatron.sh"), *job, "--json"]).stdout)
    added = [c["argument"] for c in got["changes"] if c["to"] is not None and c["argument"] in MEGATRON_FLAG_SINCE]
    assert added, got["changes"]  # the best plan here writes flags of recent releases
    for flag in added:
        tag, date, _ = MEGATRON_FLAG_SINCE[flag]
        assert f"{flag} since {tag} ({date}" in got["changes_note"]
    assert got["changes_note"].startswith("spelled for megatron-core 0.19.2")


def test_values_are_compared_only_where_both_files_spell_a_literal() -> None:
    """`0.0` and `0` are one number; a value the script takes from a variable is not compared; a flag the change
    list names is its business, not this list's."""
    from placement.audit.changes import megatron_values_changed

    job = [("--attention-dropout", "0.0"), ("--seq-length", None), ("--max-position-embeddings", "40960"),
           ("--lr", "3e-4")]  # LaunchLayout.command_args of `... --seq-length $SEQ ...`: a variable's value is None
    written = ("torchrun pretrain_gpt.py --attention-dropout 0 --seq-length 4096 --max-position-embeddings 4096 "
               "--lr 1e-4")
    assert megatron_values_changed(job, written, []) == [
        {"argument": "--max-position-embeddings", "job": "40960", "written": "4096"},
        {"argument": "--lr", "job": "3e-4", "written": "1e-4"}]
    named = [{"argument": "--lr", "from": "3e-4", "to": "1e-4"}]
    assert [c["argument"] for c in megatron_values_changed(job, written, named)] == ["--max-position-embeddings"]
    # a flag given twice runs its last value, as argparse keeps it (a review: the first was compared)
    twice = [("--max-position-embeddings", "4096"), ("--max-position-embeddings", "32768")]
    assert megatron_values_changed(twice, written, []) == [
        {"argument": "--max-position-embeddings", "job": "32768", "written": "4096"}]


def test_dropping_megatron_fsdp_drops_the_flags_megatron_refuses_without_it(tmp_path) -> None:
    """A best plan without Megatron-FSDP removes --use-megatron-fsdp, and with it --fsdp-manual-registration, which
    Megatron-LM asserts only runs under Megatron-FSDP (a user trial: the change list left it in, a job that does not
    start)."""
    import json

    from click.testing import CliRunner

    from placement.cli import main

    script = tmp_path / "train.sh"
    script.write_text(
        "torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
        "--ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention --num-query-groups 8 --swiglu "
        "--seq-length 8192 --max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 128 --bf16 "
        "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params --ckpt-format fsdp_dtensor "
        "--use-distributed-optimizer --use-nccl-ub --fsdp-manual-registration --overlap-grad-reduce "
        "--overlap-param-gather --fp8-format hybrid --fp8-param-gather\n")
    res = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                    "--gpus", "8", "--json"])
    assert res.exit_code in (0, 1), res.output
    changes = {c["argument"]: c for c in json.loads(res.stdout)["changes"]}
    assert changes["--use-megatron-fsdp"]["to"] is None
    assert changes["--fsdp-manual-registration"]["to"] is None
    assert "only supported with Megatron FSDP" in changes["--fsdp-manual-registration"]["note"]


def test_the_not_carried_warning_reads_only_the_training_command_that_runs(tmp_path) -> None:
    """A user trial: the --out warning listed every `--flag` of the files' text, so a profiler's options on the
    launch line (`nsys profile --capture-range ...`) and the flags of an `if` branch the script does not take were
    named as the job's arguments the written megatron.sh drops.  It names the flags of the Megatron-LM command the
    audit read, as the shell runs it; the job's own flags it drops are still named."""
    import json

    from click.testing import CliRunner

    from placement.cli import main
    from tests.megatron_scripts import MIXTRAL_8X7B

    script = tmp_path / "train.sh"
    script.write_text(
        "MODE=train\n"
        "if [ \"$MODE\" = debug ]; then\n"
        "  DEBUG_ARGS=\"--log-interval 1 --timing-log-level 2\"\n"
        "fi\n"
        "nsys profile --capture-range=cudaProfilerApi --force-overwrite true "
        f"{MIXTRAL_8X7B} --lr 3e-4 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 "
        "$DEBUG_ARGS\n")
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(script), "--model", "mixtral-8x7b",
                                       "--gpus", "64", "--out", str(tmp_path / "out"), "--json"])
    assert result.exit_code in (0, 1), result.output  # 1: a finding at the --fail-on severity
    missing = json.loads(result.stdout)["arguments_not_carried"]
    assert "--lr" in missing
    for flag in ("--capture-range", "--force-overwrite", "--log-interval", "--timing-log-level"):
        assert flag not in missing, missing


def test_a_change_list_to_megatron_fsdp_is_one_megatron_starts(tmp_path):
    """Megatron-LM's own Llama 3 8B FP8 script on 8 H100: the best plan moves to Megatron-FSDP.  Its change list
    unsets the script's `CUDA_DEVICE_MAX_CONNECTIONS=${...:-1}` (FSDP refuses 1) and changes the script's
    `--ckpt-format torch_dist` rather than adding a second one (a user trial: the list applied as written was
    refused by the audit itself, and with both formats argparse kept the script's later torch_dist).  Applied, the
    script is priced at the best plan's step."""
    from tests.test_audit_framework_defaults import LLAMA_FP8, _audit

    job = ("--model", "llama3-8b", "--gpus", "8")
    first = _audit(LLAMA_FP8, *job)
    # the best plan saves 4 ms of 8.9 s: the changes are withheld (MIN_CHANGE_GAIN), listed for reference
    assert first["changes"] == [] and first["changes_withheld"]
    changes = {c["argument"]: c for c in first["changes_withheld"]}
    assert changes["env CUDA_DEVICE_MAX_CONNECTIONS"]["from"] == "1"
    assert changes["env CUDA_DEVICE_MAX_CONNECTIONS"]["to"] is None
    assert (changes["--ckpt-format"]["from"], changes["--ckpt-format"]["to"]) == ("torch_dist", "fsdp_dtensor")
    text = LLAMA_FP8.read_text()
    removed = [flag for flag, c in changes.items() if flag.startswith("--") and c["to"] is None]
    lines = [line for line in text.splitlines()
             if "export CUDA_DEVICE_MAX_CONNECTIONS" not in line and line.strip() not in removed]
    applied = "\n".join(lines).replace("MICRO_BATCH_SIZE=1", f"MICRO_BATCH_SIZE={changes['--micro-batch-size']['to']}")
    applied = applied.replace("--ckpt-format torch_dist", "--ckpt-format fsdp_dtensor")
    added = " ".join(f"{flag}" + ("" if c["to"] == "true" else f" {c['to']}") for flag, c in changes.items()
                     if flag.startswith("--") and c["from"] is None)
    applied = applied.replace("TRAINING_ARGS=(", f"TRAINING_ARGS=(\n    {added}")
    script = tmp_path / LLAMA_FP8.name
    script.write_text(applied + "\n")
    again = _audit(script, *job)
    assert again["estimate"]["step_time_s"] == pytest.approx(first["best"]["step_time_s"], rel=1e-6)
    assert again["changes"] == [] and again["changes_withheld"] == []  # it runs the best plan itself


def test_a_move_from_megatron_deepspeed_drops_what_megatron_lm_refuses(tmp_path):
    """Megatron-DeepSpeed's Azure GPT-3 175B script (ZeRO-3 under --deepspeed, 16 nodes): the best plan is a move to
    Megatron-LM.  A user trial's change list removed flags the script never passed (`- --use-megatron-fsdp`,
    placement's spelling of the launched layout) and kept ones Megatron-LM refuses (--fp16 beside the --bf16 it added,
    --checkpoint-activations, on which Megatron-LM exits, DeepSpeed's own).  Every removal is now of a flag the
    running command passes, in the script's spelling, and those go."""
    import json as _json
    from pathlib import Path

    from click.testing import CliRunner

    from placement.cli import main

    source = Path(__file__).parent / "data" / "audit" / "megatron-deepspeed" / "run-175b.sh"
    script = tmp_path / "run-175b.sh"
    script.write_text(source.read_text().replace("NODES=1\n", "NODES=16\n"))
    res = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "gpt3-175b", "--cluster", "dgx-h100",
                                    "--gpus", "128", "--json"])
    assert res.exit_code in (0, 1), res.output[-2000:]
    doc = _json.loads(res.stdout)
    text = script.read_text()
    changes = {c["argument"]: c for c in doc["changes"]}
    assert "--bf16" in changes and changes["--bf16"]["to"] == "true"
    removed = [flag for flag, c in changes.items() if flag.startswith("--") and c["to"] is None]
    assert all(flag in text for flag in removed), removed
    for flag in ("--fp16", "--checkpoint-activations", "--deepspeed", "--deepspeed_config", "--zero-stage"):
        assert flag in removed, flag
    assert changes["--zero-stage"]["from"] == "3"
    # the script's data_options string holds --data-impl but the command never uses it: nothing to remove (a review
    # found flags read from text the running command does not pass)
    assert "--data-impl" in text and "--data-impl" not in changes


def test_withheld_changes_are_said_in_the_text_and_on_the_page(tmp_path):
    """Where the best plan saves under 1 % of the step, the text and the HTML page say what it saves and that no
    change is proposed; the page said `the job already runs the best plan` (and did so where no plan was searched)."""
    from click.testing import CliRunner

    from placement.cli import main
    from tests.test_audit_framework_defaults import LLAMA_FP8

    page = tmp_path / "audit.html"
    res = CliRunner().invoke(main, ["audit", "--launch", str(LLAMA_FP8), "--model", "llama3-8b", "--cluster",
                                    "dgx-h100", "--gpus", "8", "--report", str(page)])
    assert res.exit_code == 0, res.output[-2000:]
    said = next(line for line in res.stdout.splitlines() if line.startswith("no changes proposed: "))
    assert "under the 1% a change must save" in said
    assert said in " ".join(page.read_text().split()) and "already runs the best plan" not in page.read_text()


def test_a_change_list_reads_the_branch_the_launch_runs(tmp_path):
    """Megatron-LM's Megatron-FSDP Llama 3 8B script with USE_MEGATRON_FSDP defaulting to 0: the FSDP flags sit in an
    `if` branch that does not run.  A review found the change list to the best plan (Megatron-FSDP) reading them as
    passed: no `+ --use-megatron-fsdp`, no `+ --ckpt-format fsdp_dtensor`, and `- --data-parallel-sharding-strategy
    ${SHARDING_STRATEGY}` from the dead branch, a list that applied gives a job Megatron-LM refuses.  With FSDP on (the
    file as published) the same flags are passed and need no change."""
    from pathlib import Path

    from tests.test_audit_framework_defaults import _audit

    source = Path(__file__).parent / "data" / "audit" / "megatron" / "train_llama3_8b_fsdp_h100_fp8.sh"
    off = tmp_path / source.name
    off.write_text(source.read_text().replace("USE_MEGATRON_FSDP:-1", "USE_MEGATRON_FSDP:-0"))
    job = ("--model", "llama3-8b", "--gpus", "8")
    doc = _audit(off, *job)
    assert doc["best"]["layout"]["zero_stage"] == 3
    changes = {c["argument"]: c for c in doc["changes"] or doc["changes_withheld"]}
    assert changes["--use-megatron-fsdp"]["to"] == "true"
    assert (changes["--ckpt-format"]["from"], changes["--ckpt-format"]["to"]) == (None, "fsdp_dtensor")
    assert changes["--data-parallel-sharding-strategy"]["from"] is None
    published = {c["argument"] for c in (lambda d: d["changes"] or d["changes_withheld"])(_audit(source, *job))}
    assert not published & {"--use-megatron-fsdp", "--ckpt-format"}


def test_the_written_files_values_are_read_as_the_shell_splits_its_array(tmp_path):
    """A user trial: the check of the written megatron.sh against the job's values read the PLACEMENT_ARGS array's
    closing `)` into its last value ("2.5)" against the job's 2.5), one word of a list (`--cuda-graph-modules attn`
    of `attn mlp`), and Megatron-DeepSpeed's `rmsnorm` as another value than `RMSNorm`."""
    import json

    from click.testing import CliRunner

    from placement.audit.changes import written_arguments
    from placement.cli import main
    from tests.megatron_scripts import mixtral_script

    script = mixtral_script(tmp_path, "--cuda-graph-impl transformer_engine --cuda-graph-modules attn mlp "
                                      "--normalization rmsnorm --moe-router-topk-scaling-factor 2.5")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(script), "--model", "mixtral-8x7b",
                                       "--gpus", "64", "--out", str(out), "--json"])
    assert result.exit_code in (0, 1), result.output
    changed = {c["argument"]: c for c in json.loads(result.stdout)["arguments_changed"]}
    # the job's whole list against the file's whole list
    assert changed["--cuda-graph-modules"]["job"] == "attn mlp"
    assert changed["--cuda-graph-modules"]["written"] == "attn moe_router moe_preprocess"
    assert "--normalization" not in changed
    written = written_arguments((out / "megatron.sh").read_text())
    assert written["--normalization"] == "RMSNorm" and written["--moe-grouped-gemm"] is None
    assert written["--cuda-graph-modules"] == "attn moe_router moe_preprocess"
    assert not any(v and v.endswith(")") and "(" not in v for v in written.values()), written
    # the array's last element with a value: read without the closing parenthesis
    text = "PLACEMENT_ARGS=(--num-layers 32 --moe-router-topk-scaling-factor 2.5)\n"
    assert written_arguments(text) == {"--num-layers": "32", "--moe-router-topk-scaling-factor": "2.5"}


def test_a_megatron_deepspeed_job_without_a_pipeline_cites_no_pipeline_engine(tmp_path):
    """Under --no-pipeline-parallel the model is no PipelineModule: the source of the (unpriced at pp 1) blocking
    sends says so, where it cited the PipelineEngine's blocking sends (a user trial on Megatron-DeepSpeed's
    ds_pretrain_gpt_30B_seq_parallel_32k.sh)."""
    import json as _json
    from pathlib import Path

    from click.testing import CliRunner

    from placement.cli import main

    source = Path(__file__).parent / "data" / "audit" / "megatron-deepspeed" / "run-175b.sh"
    script = tmp_path / "run-175b.sh"
    script.write_text(source.read_text().replace("NODES=1\n", "NODES=16\n"))
    assert "--no-pipeline-parallel" in script.read_text()
    res = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "gpt3-175b", "--cluster", "dgx-h100",
                                    "--gpus", "128", "--json"])
    assert res.exit_code in (0, 1), res.output[-2000:]
    why = _json.loads(res.stdout)["layout"]["sources"]["recipe.pipeline_p2p_blocking"]
    assert "no PipelineEngine runs" in why and "sends and receives between stages" not in why


def test_a_value_is_compared_word_by_word_and_ends_with_its_line():
    """A review: the written-values check took `attn mlp` and `attnmlp` for one value, and a flag of a file without a
    PLACEMENT_ARGS array took the next line's words (`export X=1`) as its values."""
    from placement.audit.changes import same_value, written_arguments

    assert not same_value("attn mlp", "attnmlp")
    assert same_value("([0]*3+[1]*58)", "[0]*3 + [1]*58") and same_value("RMSNorm", "rmsnorm")
    assert written_arguments("torchrun pretrain_gpt.py --lr 1e-4\nexport X=1\n") == {"--lr": "1e-4"}
    assert written_arguments("python train.py --foo a \\\n  b\n") == {"--foo": "a b"}
