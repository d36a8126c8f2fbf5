"""Test collection: the framework checks in tests/verify need the heavy `verify` extra and run with
`make verify` (PLACEMENT_VERIFY=1); `make test` runs everything else."""

import os

collect_ignore = [] if os.environ.get("PLACEMENT_VERIFY") else ["verify"]
