"""A sequence length or global batch from neither a flag nor the model file is placement's default, and says so: a
user trial's model file without default_seq_len and default_global_batch was planned at 4096 x 1024, said nowhere."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.catalog import catalog_root
from placement.cli import main

JOB = ["--cluster", "dgx-h100", "--gpus", "64", "--tp", "1", "--pp", "1"]


def _model_without_defaults(tmp_path: Path) -> Path:
    text = (catalog_root() / "models" / "llama3-8b.yaml").read_text()
    kept = [line for line in text.splitlines() if not line.startswith(("default_seq_len", "default_global_batch"))]
    path = tmp_path / "llama.yaml"
    path.write_text("\n".join(kept) + "\n")
    return path


def test_placements_own_defaults_carry_their_source(tmp_path: Path) -> None:
    model = _model_without_defaults(tmp_path)
    result = CliRunner().invoke(main, ["evaluate", "--model", str(model), *JOB, "--json"])
    got = json.loads(result.stdout)
    # the note is on stderr under --json too (a user trial found it in the text output only)
    assert "placement: note: seq len 4096: placement's default" in result.stderr
    assert got["seq_len"] == 4096 and got["global_batch"] == 1024
    assert set(got["job_defaults"]) == {"seq_len", "global_batch"}
    assert "states no default_global_batch (give --global-batch" in got["job_defaults"]["global_batch"]
    text = CliRunner().invoke(main, ["evaluate", "--model", str(model), *JOB])
    assert "placement: note: seq len 4096: placement's default" in text.stderr
    given = json.loads(CliRunner().invoke(main, ["evaluate", "--model", str(model), *JOB, "--seq-len", "8192",
                                                 "--global-batch", "512", "--json"]).stdout)
    assert given["job_defaults"] == {}
    catalog = json.loads(CliRunner().invoke(main, ["evaluate", "--model", "gpt3-175b", *JOB[:2], "--gpus", "64",
                                                   "--tp", "8", "--pp", "8", "--json"]).stdout)
    assert catalog["job_defaults"] == {}  # the catalog file states both, from the paper
    # a catalog file whose batch is its own planning default says so (a buyer's trial: llama3-70b planned at its
    # file's 1,024 sequences, said nowhere, where the file itself calls it "a planning default, not from the paper")
    llama = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", *JOB, "--json"])
    said = json.loads(llama.stdout)["job_defaults"]
    assert set(said) == {"global_batch"} and said["global_batch"].startswith("512: the catalog model file's planning "
                                                                           "default")
    assert "placement: note: global batch 512: the catalog model file's planning default" in llama.stderr


def test_a_moe_flag_on_a_dense_model_is_bad_input() -> None:
    """A user trial: `--moe-dispatcher deepep --routing-imbalance 1.5` on Llama 3 8B were echoed in the recipe line and
    priced nothing; --ep on a dense model was already refused."""
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", *JOB, "--moe-dispatcher", "deepep",
                                       "--routing-imbalance", "1.5"])
    assert result.exit_code == 2
    assert "--moe-dispatcher, --routing-imbalance: llama3-8b has no experts" in result.stderr
    assert CliRunner().invoke(main, ["evaluate", "--model", "mixtral-8x7b", *JOB, "--moe-dispatcher", "deepep",
                                     "--ep", "8"]).exit_code in (0, 1)


def test_a_catalog_name_one_typo_or_a_case_away_is_named() -> None:
    for flag, given, meant in (("--model", "Llama3-8B", "llama3-8b"), ("--model", "llama3-8bb", "llama3-8b"),
                               ("--cluster", "dgx-h10", "dgx-h100")):
        args = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8"]
        args[args.index(flag) + 1] = given
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2 and f"did you mean {meant}?" in result.stderr


def test_a_cluster_files_default_size_is_named_as_such(tmp_path: Path) -> None:
    """A user trial's cluster file with default_num_gpus 1020 was told "--gpus 1020", a flag it never passed."""
    text = (catalog_root() / "hardware" / "clusters" / "dgx-h100.yaml").read_text()
    lines = [line for line in text.splitlines() if not line.startswith("default_num_gpus")]
    (tmp_path / "c.yaml").write_text("\n".join(lines) + "\ndefault_num_gpus: 1020\n")
    result = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", str(tmp_path / "c.yaml")])
    assert result.exit_code == 2 and "default_num_gpus 1020 (no --gpus given) is not a whole number" in result.stderr
    assert "--gpus 1020" not in result.stderr


def test_the_cluster_files_gpu_count_is_said_where_no_flag_gives_one() -> None:
    """A user trial: `plan --model llama3-8b --cluster dgx-h100` planned 1,024 GPUs, the cluster file's
    default_num_gpus, with `job_defaults` empty and no note."""
    res = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--tp", "8", "--json"])
    got = json.loads(res.stdout)
    assert got["num_gpus"] == 1024
    assert got["job_defaults"]["num_gpus"].startswith("1024: cluster dgx-h100's default_num_gpus (give --gpus")
    given = json.loads(CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", *JOB, "--json"]).stdout)
    assert "num_gpus" not in given["job_defaults"]


def test_a_huggingface_context_length_capped_by_placement_is_said(tmp_path: Path) -> None:
    """max_position_embeddings 131,072 was planned at sequence 8,192, placement's cap, with nothing said."""
    cfg = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "hidden_act": "silu",
           "max_position_embeddings": 131072}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    got = json.loads(CliRunner().invoke(main, ["evaluate", "--model", str(path), *JOB, "--json"]).stdout)
    assert got["seq_len"] == 8192
    assert "cap of 8192 on the config's max_position_embeddings 131072" in got["job_defaults"]["seq_len"]
    cfg["max_position_embeddings"] = 4096
    path.write_text(json.dumps(cfg))
    got = json.loads(CliRunner().invoke(main, ["evaluate", "--model", str(path), *JOB, "--json"]).stdout)
    assert got["seq_len"] == 4096 and "seq_len" not in got["job_defaults"]  # the file's own value


def test_evaluate_of_a_layout_over_capacity_names_the_memory_and_a_fix(tmp_path: Path) -> None:
    """A user trial: `evaluate` of a layout over the GPU's memory exited 1 with nothing on stderr, and wrote its
    --out files without a word.  The exit names the memory per GPU against the capacity, the parts, a fix, and that
    the files written run out of memory too."""
    job = ["evaluate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--tp", "8", "--mbs", "4",
           "--zero", "0", "--recompute", "none"]
    result = CliRunner().invoke(main, job)
    assert result.exit_code == 1
    assert "placement: infeasible (memory): this layout needs" in result.stderr
    assert "capacity 78.1 GiB" in result.stderr and "`placement plan` with the same job" in result.stderr
    result = CliRunner().invoke(main, [*job, "--out", str(tmp_path / "o"), "--emit", "megatron"])
    assert result.exit_code == 1 and "so they run out of memory too" in result.stderr


def test_the_default_cluster_is_said_where_no_cluster_is_given() -> None:
    """A QA note: a job without --cluster was priced on DGX H100 with no word that the machine was a default."""
    import json

    from click.testing import CliRunner

    from placement.cli import main

    args = ["plan", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "64", "--seq-len", "4096", "--top-k", "1"]
    unsaid = CliRunner().invoke(main, args)
    assert "note: cluster dgx-h100: placement's default machine (give --cluster" in unsaid.stderr
    assert "dgx-h100" in json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)["job_defaults"]["cluster"]
    given = CliRunner().invoke(main, [*args, "--cluster", "dgx-h100", "--json"])
    assert "note: cluster" not in given.stderr and "cluster" not in json.loads(given.stdout)["job_defaults"]
