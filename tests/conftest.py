"""Test collection: the framework checks in tests/verify need the heavy `verify` extra and run with
`make verify` (PLACEMENT_VERIFY=1); `make test` runs everything else."""

import os

collect_ignore = [] if os.environ.get("PLACEMENT_VERIFY") else ["verify"]


import pytest  # noqa: E402


@pytest.fixture
def mean_speed_gpus(monkeypatch):
    """Every catalog accelerator with `speed_variability` 0: each GPU at the mean speed, for tests that pin the
    seconds of one term of the step (the slowest-GPU term scales the compute it paces)."""
    import placement.catalog as catalog

    read = catalog.read_yaml

    def flat(path, schema, what):
        spec = read(path, schema, what)
        return spec.model_copy(update={"speed_variability": 0.0}) if what == "accelerator" else spec

    monkeypatch.setattr(catalog, "read_yaml", flat)
