"""A Megatron-Bridge override YAML that leaves the parallel degrees, the micro-batch, the recompute or the MoE dispatch
to its recipe gets a change of them in Megatron-Bridge's own field (model.tensor_model_parallel_size, ...;
train.micro_batch_size), marked as not in the files, not Megatron-LM's flag "the config states no field of this name"
(a QA run: Megatron-Bridge's llama3_8b_pretrain_override_example_megatron_fsdp.yaml on 8 H100s, best plan tp 2,
listed `+ --tensor-model-parallel-size 2`)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.audit.changes import BRIDGE_NOT_IN_FILES, BRIDGE_UNSTATED_NOTE, bridge_changes
from placement.cli import main

OVERRIDE = (Path(__file__).parent / "data" / "audit" / "bridge"
            / "llama3_8b_pretrain_override_example_megatron_fsdp.yaml")


def test_the_fsdp_overrides_tp_change_names_the_model_field() -> None:
    assert "tensor_model_parallel_size" not in OVERRIDE.read_text()
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(OVERRIDE), "--model", "llama3-8b",
                                       "--cluster", "dgx-h100", "--gpus", "8", "--json"])
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    changes = {c["argument"]: c for c in out["changes"]}
    assert out["best"]["layout"]["tp"] > 1
    assert "--tensor-model-parallel-size" not in changes
    tp = changes["model.tensor_model_parallel_size"]
    assert tp["from"] is None and tp["to"] == str(out["best"]["layout"]["tp"]) and tp["note"] == BRIDGE_UNSTATED_NOTE


def test_each_layout_flag_has_its_bridge_field() -> None:
    flags = {"--pipeline-model-parallel-size": ("4", "model.pipeline_model_parallel_size"),
             "--num-virtual-stages-per-pipeline-rank": ("2", "model.virtual_pipeline_model_parallel_size"),
             "--context-parallel-size": ("2", "model.context_parallel_size"),
             "--expert-model-parallel-size": ("8", "model.expert_model_parallel_size"),
             "--expert-tensor-parallel-size": ("1", "model.expert_tensor_parallel_size"),
             "--micro-batch-size": ("2", "train.micro_batch_size"),
             "--recompute-granularity": ("full", "model.recompute_granularity"),
             "--moe-token-dispatcher-type": ("flex", "model.moe_token_dispatcher_type"),
             # a QA run: Hydra overrides of llama3_70b_pretrain_config, best plan pp 4 x vpp 3 with a layout
             "--pipeline-model-parallel-layout": ("Et*6|(t*7|)*7t*6|(t*7|)*2t*5L",
                                                  "model.pipeline_model_parallel_layout")}
    changes = [{"argument": flag, "from": None, "to": to} for flag, (to, _) in flags.items()]
    out = {c["argument"]: c for c in bridge_changes(changes, {"train.global_batch_size": "8"})}
    for flag, (to, field) in flags.items():
        assert out[field]["to"] == to and out[field]["note"] == BRIDGE_UNSTATED_NOTE, flag
    assert not [c for c in out.values() if c.get("note") == BRIDGE_NOT_IN_FILES]


def test_leaving_megatron_fsdp_names_bridges_fields() -> None:
    """The override's best plan leaves Megatron-FSDP: its checkpoint format, sharding strategy and FSDP switch are
    Megatron-Bridge's fields at values they take (a QA run listed `- --ckpt-format fsdp_dtensor` and the two
    `--megatron-fsdp-*-dtype` flags in Megatron-LM's spelling, and `ddp.data_parallel_sharding_strategy null`)."""
    # priced without Megatron-Core's DDP buffer passes, the best plan leaves Megatron-FSDP for the distributed
    # optimizer (with the file's three, Megatron-FSDP's ZeRO-2 stays ahead by a few milliseconds)
    result = CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(OVERRIDE), "--model", "llama3-8b",
                                       "--cluster", "dgx-h100", "--gpus", "8", "--grad-buffer-passes", "0", "--json"])
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    assert out["best"]["layout"]["zero_stage"] < 2
    changes = {c["argument"]: c for c in out["changes"]}
    assert not [a for a in changes if a.startswith("--")], list(changes)
    assert changes["checkpoint.ckpt_format"]["to"] == "torch_dist"
    assert changes["ddp.data_parallel_sharding_strategy"]["to"] == "no_shard"
    assert changes["dist.use_megatron_fsdp"]["to"] == changes["ddp.use_megatron_fsdp"]["to"] == "false"


def test_a_stated_fsdp_checkpoint_format_goes_back_to_torch_dist() -> None:
    changes = [{"argument": "--ckpt-format", "from": "fsdp_dtensor", "to": None},
               {"argument": "--megatron-fsdp-main-grads-dtype", "from": "fp32", "to": None}]
    out = {c["argument"]: c for c in bridge_changes(changes, {"checkpoint.ckpt_format": "fsdp_dtensor"})}
    assert out == {"checkpoint.ckpt_format": {"argument": "checkpoint.ckpt_format", "from": "fsdp_dtensor",
                                              "to": "torch_dist"}}


def test_a_full_iteration_graph_scope_the_files_leave_out_is_marked() -> None:
    """The scope Megatron-Bridge's full-iteration graph needs beside cuda_graph_impl local is, as the impl is, a field
    the override leaves to its recipe: both changes say so."""
    changes = [{"argument": "--cuda-graph-impl", "from": None, "to": "full_iteration"}]
    out = {c["argument"]: c for c in bridge_changes(changes, {"train.global_batch_size": "8"})}
    assert out["model.cuda_graph_impl"]["to"] == "local"
    assert out["model.cuda_graph_scope"]["to"] == "[full_iteration]"
    assert out["model.cuda_graph_scope"]["note"] == out["model.cuda_graph_impl"]["note"] == BRIDGE_UNSTATED_NOTE
    stated = {"model.cuda_graph_scope": "[attn]", "model.cuda_graph_impl": "none"}
    out = {c["argument"]: c for c in bridge_changes(changes, stated)}
    assert out["model.cuda_graph_scope"]["from"] == "[attn]" and "note" not in out["model.cuda_graph_scope"]
