"""The base every input schema shares: frozen, and unknown keys are an error (a YAML typo must not vanish)."""

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
