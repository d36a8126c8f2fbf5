"""MaxText validates its merged config with pydantic in lax mode (MaxTextConfig has no strict setting,
configs/types.py:2979), so text in a typed field is converted as pydantic converts it, and the audit reads it so: a QA
run found `ici_fsdp_parallelism: "8"` refused as "must be a whole number, got '8'" where MaxText runs fsdp 8,
`scan_layers: "no"` read as scan on (a full recompute under remat_policy none) where MaxText runs it off (no
recompute), and `scan_layers: "maybe"`, which pydantic refuses, priced as a job that runs."""

from __future__ import annotations

from pathlib import Path

from tests.test_maxtext_omegaconf_values import audited, maxtext_audit

JOB = 'base_config: "base.yml"\nhardware: "gpu"\nmodel_name: "llama3-8b"\nper_device_batch_size: 1\n'


def _audit(tmp_path: Path, extra: str):
    return maxtext_audit(tmp_path, "job.yml", JOB + extra)


def _layout(tmp_path: Path, extra: str) -> dict:
    out = audited(_audit(tmp_path, extra))
    return {**out["layout"], "seq_len": out["estimate"]["seq_len"]}


def test_text_in_an_int_field_is_the_number(tmp_path: Path) -> None:
    quoted = _layout(tmp_path, 'ici_fsdp_parallelism: "8"\nmax_target_length: "4096"\n')
    plain = _layout(tmp_path, "ici_fsdp_parallelism: 8\nmax_target_length: 4096\n")
    assert (quoted["dp_shard"], quoted["seq_len"]) == (plain["dp_shard"], plain["seq_len"]) == (8, 4096)


def test_text_in_a_bool_field_is_pydantics_bool(tmp_path: Path) -> None:
    for word, recompute in (('"no"', "none"), ('"off"', "none"), ('"0"', "none"), ('"yes"', "full"), ("0", "none")):
        got = _layout(tmp_path, f'ici_fsdp_parallelism: 8\nremat_policy: "none"\nscan_layers: {word}\n')
        assert got["recompute"] == recompute, word


def test_text_pydantic_refuses_in_a_bool_field_does_not_start(tmp_path: Path) -> None:
    got = _audit(tmp_path, 'ici_fsdp_parallelism: 8\nscan_layers: "maybe"\n')
    assert got.exit_code == 2 and "Traceback" not in got.output
    assert "scan_layers 'maybe'" in got.output and "write scan_layers: true or scan_layers: false" in got.output
