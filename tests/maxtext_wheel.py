"""The installed MaxText 0.2.5 wheel's own files (`make verify` installs it without its dependencies), read by the
tests that check what the MaxText emitter says of them; skipped where the wheel is absent."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
import yaml


def wheel_text(path: str) -> str:
    """maxtext/`path` of the installed wheel."""
    try:
        dist = importlib.metadata.distribution("maxtext")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the maxtext 0.2.5 wheel is not installed (make verify installs it)")
    assert dist.version == "0.2.5"
    return Path(dist.locate_file(f"maxtext/{path}")).read_text()


def wheel_config(name: str) -> dict:
    """configs/models/<name>.yml of the wheel."""
    return yaml.safe_load(wheel_text(f"configs/models/{name}.yml"))
