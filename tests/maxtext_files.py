"""A MaxText job's launch material written for a test: its config YAML and, where given, the launch script with
the train command's key=value overrides, read as the audit reads them (tests/test_audit_launch.py,
tests/test_maxtext_refusals.py)."""

from __future__ import annotations

from pathlib import Path

from placement.audit.launch import LaunchLayout, parse_launch


def maxtext_launch(tmp_path: Path, config: str, script: str | None = None) -> LaunchLayout:
    cfg = tmp_path / "cfg.yml"
    cfg.write_text(config)
    files = [cfg]
    if script is not None:
        files.append(tmp_path / "run.sh")
        files[-1].write_text(script)
    return parse_launch(files)
