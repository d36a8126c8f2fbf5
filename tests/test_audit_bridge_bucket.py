"""A best plan's gradient bucket (Megatron-LM `--ddp-bucket-size`, megatron-core DistributedDataParallelConfig
.bucket_size) in a Megatron-Bridge config's own field: `comm_overlap.bucket_size`, which CommOverlapConfig writes
over the DDP config's with the distributed optimizer (Megatron-Bridge training/comm_overlap.py setup, _apply_cfgs),
else `ddp.bucket_size`.  A review: the DeepSeek-V3 H100 dump's change list added `--ddp-bucket-size 134217728` in
Megatron-LM's spelling, noting that the config "states no field of this name", beside its two bucket_size lines."""

from __future__ import annotations

from placement.audit.changes import BRIDGE_NOT_IN_FILES, bridge_changes
from tests.megatron_scripts import BRIDGE_DSV3, audit_json

BUCKET = {"argument": "--ddp-bucket-size", "from": None, "to": "134217728"}


def test_the_dsv3_dumps_bucket_change_names_its_comm_overlap_field() -> None:
    text = BRIDGE_DSV3.read_text()
    assert text.count("  bucket_size: null\n") == 2  # comm_overlap's and ddp's
    out = audit_json(BRIDGE_DSV3, "deepseek-v3", "1024")
    assert out["best"]["recipe"]["dp_overlap"] is True  # the plan writes a bucket size only with the overlap
    assert not [c for c in out["changes"] if c["argument"] == "--ddp-bucket-size"]
    (bucket,) = [c for c in out["changes"] if c["argument"].endswith(".bucket_size")]
    assert bucket["argument"] == "comm_overlap.bucket_size"
    assert bucket["from"] == "null" and bucket["to"] == str(out["best"]["recipe"]["ddp_bucket_params"])
    assert bucket.get("note") != BRIDGE_NOT_IN_FILES


def test_without_the_comm_overlap_section_the_ddp_field_holds_it() -> None:
    stated = {"ddp.bucket_size": "null", "ddp.use_distributed_optimizer": "true"}
    assert bridge_changes([dict(BUCKET)], stated) == [{"argument": "ddp.bucket_size", "from": "null",
                                                       "to": "134217728"}]


def test_without_the_distributed_optimizer_comm_overlaps_bucket_does_not_reach_ddp() -> None:
    stated = {"comm_overlap.bucket_size": "null", "ddp.bucket_size": "null", "ddp.use_distributed_optimizer": "false",
              "optimizer.use_distributed_optimizer": "false"}
    assert [c["argument"] for c in bridge_changes([dict(BUCKET)], stated)] == ["ddp.bucket_size"]
    on = {**stated, "ddp.use_distributed_optimizer": "true", "optimizer.use_distributed_optimizer": "true"}
    assert [c["argument"] for c in bridge_changes([dict(BUCKET)], on)] == ["comm_overlap.bucket_size"]
    # a plan that turns the distributed optimizer off moves the size to the DDP config
    off = [{"argument": "--use-distributed-optimizer", "from": "true", "to": None}, dict(BUCKET)]
    assert "ddp.bucket_size" in [c["argument"] for c in bridge_changes(off, on)]
