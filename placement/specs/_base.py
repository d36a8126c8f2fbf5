"""The base every input schema shares: frozen, unknown keys are an error (a YAML typo must not vanish), and
a float is finite (YAML's `.inf` and `.nan` are no measurement, and `inf` would reach --json as `Infinity`,
which is not JSON)."""

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)
