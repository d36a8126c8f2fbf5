"""A MaxText change list's launched side for a key the files leave to base.yml is base.yml's default, and a default the
best plan leaves out is no change (a user trial: `- shard_optimizer_over_data true    # not in the launch files` for a
job that ran base.yml's false, as the same report's sources said)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from placement.cli import main

HSDP = ('base_config: "base.yml"\nhardware: "gpu"\nmodel_name: "gpt3-175b"\nici_fsdp_parallelism: 4\n'
        'ici_tensor_parallelism: 2\ndcn_data_parallelism: 64\nper_device_batch_size: 1\nremat_policy: "full"\n')


def test_a_key_left_to_base_yml_is_quoted_at_its_default(tmp_path) -> None:
    launch = tmp_path / "job.yml"
    launch.write_text(HSDP)
    got = CliRunner().invoke(main, ["--reproducible", "audit", "--model", "gpt3-175b", "--gpus", "512",
                                    "--launch", str(launch), "--json"])
    assert got.exit_code in (0, 1), got.output
    report = json.loads(got.stdout)
    # the job ran base.yml's false, as the report's own sources say ...
    assert "shard_optimizer_over_data false" in report["layout"]["sources"]["recipe.optimizer_over_replicas"]
    # ... so no change quotes it as true, and none removes a default
    for c in report["changes"]:
        if c["argument"] == "shard_optimizer_over_data":
            assert c["from"] in (None, "false") and c["to"] is not None, c


BASE_YML = ("model_name: default\nbase_emb_dim: 2048\nbase_num_query_heads: 16\nbase_num_kv_heads: 16\n"
            "base_mlp_dim: 7168\nbase_num_decoder_layers: 16\nici_fsdp_parallelism: -1\nici_tensor_parallelism: 1\n"
            "dcn_data_parallelism: -1\ndcn_fsdp_parallelism: 1\n")
"""base.yml's own defaults of the mesh (MaxText 0.2.5 configs/base.yml: ici_fsdp -1, dcn_data -1, the others 1)."""
OVERRIDES = "ici_fsdp_parallelism=8 dcn_fsdp_parallelism=64 per_device_batch_size=1 max_target_length=8192 " \
            "remat_policy=full"
JOB_YML = ('base_config: "base.yml"\nhardware: "gpu"\nmodel_name: "llama3-70b"\nici_fsdp_parallelism: 8\n'
           'dcn_fsdp_parallelism: 64\nper_device_batch_size: 1\nmax_target_length: 8192\nremat_policy: "full"\n')


@pytest.mark.parametrize(("command", "files"), [
    (f"configs/base.yml model_name=llama3-70b hardware=gpu {OVERRIDES}", ("train.sh", "base.yml")),
    ("configs/job.yml run_name=x", ("train.sh", "job.yml", "base.yml")),
], ids=["command-over-base", "config-over-base"])
def test_a_change_starts_from_the_value_the_job_runs_not_base_ymls(tmp_path, command, files) -> None:
    """A user trial (MaxText's llama3.1-405b 512vm.sh, base.yml given after it): the command's
    ici_fsdp_parallelism=8 over base.yml's -1 was quoted `- ici_fsdp_parallelism -1`, the last line of the files'
    text, while the report's sources named the command's line.  The launched side is the merged config's, whatever
    order the files are given in: the command's key=value, or a config's key over its base_config."""
    (tmp_path / "base.yml").write_text(BASE_YML)
    (tmp_path / "job.yml").write_text(JOB_YML)
    (tmp_path / "train.sh").write_text(f"#!/bin/bash\npython3 -m maxtext.trainers.pre_train.train {command}\n")
    got = CliRunner().invoke(main, ["--reproducible", "audit", "--model", "llama3-70b", "--gpus", "512", "--json",
                                    *(a for f in files for a in ("--launch", str(tmp_path / f)))])
    assert got.exit_code in (0, 1), got.output
    report = json.loads(got.stdout)
    assert "ici_fsdp_parallelism" in report["layout"]["sources"]["zero_stage"]
    by = {c["argument"]: c for c in report["changes"]}
    assert by["ici_fsdp_parallelism"]["from"] == "8", by["ici_fsdp_parallelism"]
    assert by["ici_fsdp_parallelism"]["to"] != "8"
    # the best plan keeps dcn_fsdp 64 now that MaxText's HSDP beside an fsdp axis is not one (it refuses the
    # shard_optimizer_over_data that plan needed): where a plan changes it, it changes the job's 64
    if "dcn_fsdp_parallelism" in by:
        assert by["dcn_fsdp_parallelism"]["from"] == "64", by["dcn_fsdp_parallelism"]
    assert all(c["argument"] != "shard_optimizer_over_data" or c["to"] in (None, "false") for c in report["changes"])
    for c in report["changes"]:  # a key the files already set to the best plan's value is no change
        assert c["from"] is None or c["from"].lower() != str(c["to"]).lower(), c
