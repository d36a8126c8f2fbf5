"""`plan` and `evaluate` on a real allocation name the fabric they priced and where its parts came from, and
`evaluate` says which groups cross which level, as `audit` did alone (a user trial: `evaluate --json` gave
`crossings: null`, and no output said that an oversubscribed leaf's uplinks are priced as shared)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

TREE = str(Path(__file__).parent / "data" / "slurm" / "tree-5leaf.conf")
JOB = ["--model", "llama3-8b", "--seq-len", "8192", "--global-batch", "64", "--slurm-topology", TREE,
       "--nodelist", "gpu0037,gpu[0038-0044]", "--node-type", "dgx-h100"]


def test_evaluate_gives_the_groups_crossings_and_the_fabric() -> None:
    out = json.loads(CliRunner().invoke(main, ["evaluate", *JOB, "--oversubscription", "2", "--json"]).stdout)
    dp = out["crossings"]["dp"]
    assert dp["groups"] == 1 and dp["group_size"] == 64 and dp["highest_level"]["spine"] == 1
    assert "--oversubscription 2" in out["fabric"] and "2:1 oversubscribed" in out["fabric"]
    assert "as if the switch's other ports sent too" in out["fabric"]
    text = CliRunner().invoke(main, ["evaluate", *JOB, "--oversubscription", "2"]).output
    assert "where the groups sit (allocation order)" in text and "within spine" in text
    assert "\nfabric: " in text


def test_plan_names_the_fabric_and_says_nothing_of_sharing_where_nothing_is_oversubscribed() -> None:
    result = CliRunner().invoke(main, ["plan", *JOB, "--oversubscription", "1", "--top-k", "1", "--json"])
    out = json.loads(result.stdout)
    fabric = out["fabric"]
    assert f"--slurm-topology {TREE}" in fabric and "oversubscribed" not in fabric
    assert all(p["fabric"] == fabric for p in out["plans"])
    assert "\nfabric: " in CliRunner().invoke(main, ["plan", *JOB, "--top-k", "1"]).output


def test_a_levels_ratio_above_the_first_oversubscribed_one_is_said_in_all(tmp_path: Path) -> None:
    """The core's 4:1 read as the core's own where only the leaves' uplinks were 4:1 (a user trial)."""
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=l1 Nodes=a[1-2]\nSwitchName=l2 Nodes=b[1-2]\nSwitchName=s1 Switches=l1\n"
                    "SwitchName=s2 Switches=l2\nSwitchName=core Switches=s[1-2]\n")
    out = json.loads(CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--slurm-topology", str(conf),
                                               "--nodelist", "a1,b1", "--node-type", "dgx-h100",
                                               "--oversubscription", "4", "--json"]).stdout)
    fabric = out["fabric"]
    assert "4:1 oversubscribed; " in fabric and "4:1 oversubscribed in all (the uplinks below it)" in fabric


def test_a_cluster_graph_names_its_links_as_the_ratio_and_refuses_oversubscription(tmp_path: Path) -> None:
    """The line named the node type's file and a --oversubscription that was accepted and not applied (a review)."""
    from test_fabric_bounds import fabric

    path = tmp_path / "fabric.json"
    path.write_text(json.dumps(fabric(hosts=2)))
    base = ["plan", "--model", "llama3-8b", "--cluster-graph", str(path), "--node-type", "dgx-h100", "--seq-len",
            "4096", "--global-batch", "64", "--top-k", "1"]
    out = json.loads(CliRunner().invoke(main, [*base, "--json"]).stdout)
    assert "each switch's ratio from the graph's link bandwidths" in out["fabric"]
    assert "cluster dgx-h100's file" not in out["fabric"]
    refused = CliRunner().invoke(main, [*base, "--oversubscription", "2"])
    assert refused.exit_code == 2 and "a cluster graph's link bandwidths give each switch's" in refused.stderr
