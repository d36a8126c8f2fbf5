"""Each file's numbers describe what it runs: MaxText's remat_policy for recompute none and selective, and ZeRO-3
over part of the data-parallel group (HSDP) where a framework shards over all of it.  The header's prediction and
its "this file runs" line are checked against `placement evaluate` of the layout and recipe the file runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from placement.audit.maxtext import finish
from placement.cli import main
from placement.emit import common, maxtext
from placement.specs.recipe import RecomputeModule

LLAMA70 = ("--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "512", "--seq-len", "8192",
           "--global-batch", "256", "--precision", "fp8", "--framework", "maxtext", "--tp", "4", "--zero", "3",
           "--mbs", "2")  # one micro-batch a step: MaxText refuses FP8 with gradient accumulation
HSDP = ("--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--seq-len", "4096", "--global-batch", "64",
        "--tp", "1", "--cp", "2", "--zero", "3", "--mbs", "1", "--recompute", "none")
STEP = re.compile(r"^step (\d+\.\d{3}) s, .* memory (\d+\.\d) of", re.M)


def evaluate(*args: str) -> tuple[str, str, str]:
    """(step seconds, peak GiB) as `placement evaluate` prints them, and its whole output."""
    result = CliRunner().invoke(main, ["evaluate", *args], catch_exceptions=False)
    m = STEP.search(result.output)
    assert m, result.output
    return m.group(1), m.group(2), result.output


def runs_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.startswith("# this file runs")), "")


def predicted(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("# predicted:"))


def test_recompute_none_turns_off_the_scan_whose_checkpoint_recomputes_every_layer(tmp_path: Path):
    """MaxText 0.2.5 checkpoints every scanned layer with get_remat_policy()'s None for "none" (a full recompute,
    layers/nnx_decoders.py:1154-1159); the unscanned loop runs the layer plainly (:2248)."""
    step, mem, _ = evaluate(*LLAMA70, "--recompute", "none", "--emit", "maxtext", "--out", str(tmp_path))
    text = (tmp_path / "maxtext.yml").read_text()
    cfg = yaml.safe_load(text)
    assert (cfg["remat_policy"], cfg["scan_layers"]) == ("none", False)
    assert f"predicted: {step} s/step" in predicted(text) and f"{mem} of" in predicted(text)
    assert runs_line(text) == ""  # the file runs the plan: no recompute
    full, full_mem, _ = evaluate(*LLAMA70, "--recompute", "full")
    assert (full, full_mem) != (step, mem)  # what the scanned default would have run instead


def test_selective_recompute_is_priced_as_the_modules_remat_policy_minimal_reruns(tmp_path: Path):
    """remat_policy minimal saves only named matmul outputs: the attention core and both norms rerun."""
    evaluate(*LLAMA70, "--recompute", "selective", "--emit", "maxtext", "--out", str(tmp_path))
    text = (tmp_path / "maxtext.yml").read_text()
    cfg = yaml.safe_load(text)
    assert cfg["remat_policy"] == "minimal" and "scan_layers" not in cfg
    line = runs_line(text)
    assert line.startswith("# this file runs selective recompute of core_attn+layernorm (not core_attn): ")
    step, mem, _ = evaluate(*LLAMA70, "--recompute", "selective", "--recompute-modules", "core_attn,layernorm")
    assert f": {step} s/step" in line and f", {mem} of" in line
    assert maxtext.ACTIVATION_RECOMPUTED.format("minimal") in text
    # planned with the modules MaxText runs, the file states the plan
    evaluate(*LLAMA70, "--recompute", "selective", "--recompute-modules", "core_attn,layernorm", "--emit", "maxtext",
             "--out", str(tmp_path / "as-run"))
    assert runs_line((tmp_path / "as-run" / "maxtext.yml").read_text()) == ""


def test_plans_for_maxtext_search_the_modules_it_reruns():
    assert common.RECIPE_SUPPORT["maxtext"]["recompute_modules"] == (maxtext.MINIMAL_RECOMPUTES,)
    assert maxtext.MINIMAL_RECOMPUTES == (RecomputeModule.CORE_ATTN, RecomputeModule.LAYERNORM)


@pytest.mark.parametrize(("scan", "recompute"), [(None, "full"), ("false", "none")])
def test_audit_reads_remat_policy_none_with_the_scan_as_what_runs(scan, recompute):
    keys = {"remat_policy": ("none", "cfg.yml:2")} | ({"scan_layers": (False, "cfg.yml:3")} if scan else {})
    assert finish(keys, [])["recompute"][0] == recompute


@pytest.mark.parametrize("fmt", ["megatron", "deepspeed"])
def test_hsdp_is_priced_over_the_whole_data_parallel_group_where_the_framework_shards_there(tmp_path: Path, fmt):
    """Megatron-FSDP without --num-distributed-optimizer-instances and DeepSpeed's ZeRO-3 (dp_process_group =
    seq_data_parallel_group, runtime/engine.py:2768) shard over every data-parallel rank."""
    evaluate(*HSDP, "--dp-shard", "8", "--emit", fmt, "--out", str(tmp_path))
    text = (tmp_path / f"{fmt}.sh").read_text()
    line = runs_line(text)
    assert "ZeRO-3 over all 32 data-parallel ranks (not HSDP shard 8" in line
    if fmt == "megatron":  # the layout it runs, priced: no --dp-shard
        step, mem, _ = evaluate(*HSDP)
        assert f": {step} s/step" in line and f", {mem} of" in line
    else:  # DeepSpeed has no ring attention: cp stays the model code's, priced as the plan's ring
        assert ("cp 2 only as your model code's ring attention (its time priced as the plan's ring), with ZeRO over "
                "the 32 'data' ranks (not cp x dp = 64)") in line and "(not priced)" not in line


def test_maxtext_hsdp_with_cp_is_the_priced_shard_and_no_warning_says_otherwise(tmp_path: Path):
    """MaxText shards weights over fsdp x context (base.yml rule embed); the plan is priced over cp x dp_shard
    (cost.step dense_shard): the same 16 ranks."""
    evaluate(*HSDP, "--dp-shard", "8", "--emit", "maxtext", "--out", str(tmp_path))
    text = (tmp_path / "maxtext.yml").read_text()
    cfg = yaml.safe_load(text)
    assert (cfg["ici_data_parallelism"] * cfg["dcn_data_parallelism"],
            cfg["ici_fsdp_parallelism"] * cfg["dcn_fsdp_parallelism"]) == (4, 8)
    assert "MaxText shards weights and gradients" not in text


def test_device_mesh_splits_dp_into_replicate_and_shard_under_hsdp(tmp_path: Path):
    evaluate(*HSDP, "--dp-shard", "8", "--emit", "devicemesh", "--out", str(tmp_path))
    text = (tmp_path / "device_mesh.py").read_text()
    assert ("init_device_mesh(\"cuda\", (1, 4, 8, 2, 1), mesh_dim_names=('pp', 'dp_replicate', 'dp_shard', 'cp', "
            "'tp'))") in text
    assert "# ZeRO-3 as priced: HSDP, sharded over 16 ranks (dp_shard 8 x cp 2) and replicated over dp_replicate 4" \
        in text
    assert 'fully_shard(block, mesh=mesh["dp_replicate", "dp_shard_cp"])' in text
    compile(text, "device_mesh.py", "exec")
    evaluate(*HSDP, "--emit", "devicemesh", "--out", str(tmp_path / "fsdp"))
    fsdp = (tmp_path / "fsdp" / "device_mesh.py").read_text()
    assert "mesh_dim_names=('pp', 'dp', 'cp', 'tp')" in fsdp
    # the flattened mesh kept and used (torch 2.13 warns that slicing it back from the root will be deprecated)
    assert '# fsdp_mesh = mesh["dp", "cp"]._flatten("dp_cp")' in fsdp and "mesh=fsdp_mesh)" in fsdp


def test_plan_prints_what_its_files_run_beside_the_plan(tmp_path: Path) -> None:
    """`plan --emit torchtitan` without --framework: the plan is ZeRO-1, which torchtitan runs as ZeRO-2 (a user
    trial: the headline said 240.9 s, fitting, for a file that runs 268.3 s and does not fit, and the note claimed
    the search kept only what the format launches as priced).  The file's own "this file runs" line is printed
    under the plan and given in the JSON; the note says only the recipe choices were narrowed.  What the file runs
    does not fit (81 of 78 GiB): the command exits 1 after writing, naming the file and the fix (a user trial:
    `--emit all` wrote files that run out of memory with exit 0)."""
    import json

    job = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "32", "--top-k", "1", "--emit", "torchtitan"]
    result = CliRunner().invoke(main, ["plan", *job, "--out", str(tmp_path / "a")])
    assert result.exit_code == 1, result.output
    assert ("written, but not runnable as the plan: what torchtitan.sh runs instead of the plan is over the GPU's "
            "memory" in result.stderr
            and "plan for what it runs with --framework torchtitan, or leave torchtitan out of --emit" in result.stderr)
    header = (tmp_path / "a" / "torchtitan.sh").read_text().splitlines()
    runs = next(x for x in header if x.startswith("# this file runs "))
    assert "ZeRO-2 (not ZeRO-1)" in runs
    assert "the files written run other than plan 1" in result.stdout
    assert f"torchtitan.sh: {runs[2:]}" in result.stdout
    assert "kept only the recipe choices every named format launches as priced" in result.stderr
    as_json = CliRunner().invoke(main, ["plan", *job, "--out", str(tmp_path / "b"), "--json"])
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["files_run"] == [f"torchtitan.sh: {runs[2:]}"]
    assert json.loads(as_json.stdout)["files_over_capacity"] == ["torchtitan.sh"]
    plain = CliRunner().invoke(main, ["plan", *job[:-2], "--out", str(tmp_path / "c"), "--json", "--emit", "megatron"])
    assert plain.exit_code == 0
    assert json.loads(plain.stdout)["files_run"] == [] and json.loads(plain.stdout)["files_over_capacity"] == []


def test_the_runs_line_gives_the_files_own_mfu(tmp_path: Path):
    """A user trial: a file's `predicted:` line is the plan's; the line of what the file runs gave its step and memory
    but not its MFU."""
    evaluate(*LLAMA70, "--recompute", "selective", "--emit", "maxtext", "--out", str(tmp_path))
    line = runs_line((tmp_path / "maxtext.yml").read_text())
    *_, text = evaluate(*LLAMA70, "--recompute", "selective", "--recompute-modules", "core_attn,layernorm")
    mfu = re.search(r"MFU (\d+\.\d%)", text).group(1)
    assert f"tokens/s, MFU {mfu}, " in line


def test_the_header_says_where_the_host_order_is(tmp_path: Path):
    """A user trial: device_mesh.py and maxtext.yml said the mapping is applied "by the host order (node ranks)
    below" with no host order below; jax_mesh.py lacked the "this file runs" line maxtext.yml has."""
    evaluate(*LLAMA70, "--recompute", "selective", "--emit", "all", "--out", str(tmp_path))
    mesh = (tmp_path / "device_mesh.py").read_text()
    assert "host order (node ranks) of launch.sbatch and hosts.txt" in mesh and "(node ranks) below" not in mesh
    assert "(node ranks) of the launch lines (each host's JAX process id)" in (tmp_path / "maxtext.yml").read_text()
    assert runs_line((tmp_path / "jax_mesh.py").read_text()) == runs_line((tmp_path / "maxtext.yml").read_text()) != ""


def test_evaluate_exits_1_where_a_file_it_writes_runs_out_of_memory(tmp_path: Path) -> None:
    """A layout that fits (74 of 78 GiB as Megatron runs it), written for Megatron-LM and torchtitan: torchtitan
    cannot state ZeRO-1 and runs ZeRO-2, 78.5 GiB.  Both files are written, the command exits 1 naming the one that
    does not fit, and its JSON lists it; the same layout written for Megatron-LM alone exits 0.  The fix is a
    `plan` for torchtitan (a review: `evaluate --framework torchtitan` refuses this ZeRO-1 layout, exit 2)."""
    import json

    job = ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "32", "--tp", "8", "--pp", "4",
           "--mbs", "1", "--zero", "1", "--recompute", "none", "--json"]
    both = CliRunner().invoke(main, [*job, "--emit", "torchtitan,megatron", "--out", str(tmp_path / "a")])
    assert both.exit_code == 1, both.output
    out = json.loads(both.stdout)
    assert out["fits"] and out["files_over_capacity"] == ["torchtitan.sh"]
    assert (tmp_path / "a" / "torchtitan.sh").exists() and (tmp_path / "a" / "megatron.sh").exists()
    assert "what torchtitan.sh runs instead of the plan is over the GPU's memory" in both.stderr
    assert "find a layout torchtitan runs as priced with `placement plan ... --framework torchtitan`" in both.stderr
    assert out["files_not_starting"] == []
    alone = CliRunner().invoke(main, [*job, "--emit", "megatron", "--out", str(tmp_path / "b")])
    assert alone.exit_code == 0, alone.output
    assert json.loads(alone.stdout)["files_over_capacity"] == []


def test_emitting_several_formats_searches_only_the_recompute_modules_all_of_them_launch() -> None:
    """A user trial: `--emit all` on a 128K-token Llama 3 70B job took torchtitan's per-op policy, which the
    Megatron-LM and MaxText files ran as their own module lists, out of memory (359 and 319 GiB of 182), while
    `--emit megatron` alone found a plan that fits.  The search keeps only the module lists every named format
    launches as priced: none shared, no selective recompute."""
    from placement.emit.common import launchable_module_sets
    from placement.specs.recipe import RecomputeModule as M

    assert launchable_module_sets(["megatron"]) is None  # the search's own lists, none of them per_op
    assert launchable_module_sets(["torchtitan"]) == ((M.PER_OP,),)
    assert launchable_module_sets(["torchtitan", "megatron"]) == ()
    assert launchable_module_sets(["megatron", "torchtitan", "devicemesh", "deepspeed", "maxtext"]) == ()
    assert launchable_module_sets(["deepspeed", "devicemesh", "megatron"]) == ((M.CORE_ATTN,),)


def test_formats_that_share_no_selective_recompute_say_so_in_the_bounds(tmp_path: Path) -> None:
    """A review: `search.bounds` read "selective recompute: only the module lists " with nothing after it."""
    import json

    result = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                                       "--emit", "torchtitan,megatron", "--out", str(tmp_path / "o"), "--json"])
    bounds = json.loads(result.stdout)["search"]["bounds"]
    assert "selective recompute: none (no module list every format emitted launches as priced)" in bounds
    assert not any(b.endswith("only the module lists ") for b in bounds)


def test_selective_recompute_alone_with_formats_that_share_none_is_refused(tmp_path: Path) -> None:
    """`--recompute selective` with formats that launch no common selective recompute leaves nothing to search: an
    error that names the formats and the fix, not an empty search."""
    result = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                                       "--recompute", "selective", "--emit", "torchtitan,megatron",
                                       "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "--recompute selective with --emit torchtitan,megatron: these formats share no selective recompute" \
        in result.output and "give --recompute-modules LIST" in result.output
