"""A MaxText change list's launched side for a key the files leave to base.yml is base.yml's default, and a default the
best plan leaves out is no change (a user trial: `- shard_optimizer_over_data true    # not in the launch files` for a
job that ran base.yml's false, as the same report's sources said)."""

from __future__ import annotations

import json

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
