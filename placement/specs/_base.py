"""The base every input schema shares: frozen, unknown keys are an error (a YAML typo must not vanish), and
a float is finite (YAML's `.inf` and `.nan` are no measurement, and `inf` would reach --json as `Infinity`,
which is not JSON)."""

import math
import re
import types
import typing

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)


def _scalar_kinds(annotation: object) -> set[type]:
    """The scalar types a field takes (`int | None` -> {int}); empty for anything else (str, enums, models)."""
    args = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) \
        else (annotation,)
    kinds = {a for a in args if a is not type(None)}
    return kinds if kinds and kinds <= {int, float, bool} else set()


class StrictScalars(Frozen):
    """A spec read from a YAML file the user writes (model, cluster, accelerator): a number or a flag is never
    coerced from another type.  Pydantic's lax mode reads `num_layers: true` as 1 layer, `gpus_per_node: "8"` as
    8 and `tied_embeddings: "yes"` as True; here each is an error naming the field.  A float field takes a number
    PyYAML left as text (`450.0e9`, see _DECIMAL); a whole float such as `4096.0` still passes as an int."""

    @pydantic.field_validator("*", mode="before")
    @classmethod
    def _no_coercion(cls, value: object, info: pydantic.ValidationInfo) -> object:
        kinds = _scalar_kinds(cls.model_fields[info.field_name].annotation)
        if not kinds:
            return value
        want = " or ".join(_KIND_NAMES[k] for k in (int, float, bool) if k in kinds)
        if isinstance(value, bool) and bool not in kinds:
            raise ValueError(f"{want} expected, not true/false: write the number")
        if isinstance(value, str) and not (float in kinds and _DECIMAL.fullmatch(value.strip())):
            # quotes are the fix only where the text is a number (`"8"`); other text is no number at all (a user
            # trial's `--set budget=abc` was told to drop quotes it never wrote)
            suffixed = _SUFFIXED.fullmatch(value.strip())
            if suffixed:  # `15T`, `40k`: a user trial was told only "not the text"
                number = float(suffixed.group(1)) * _SUFFIX[suffixed.group(2).upper()]
                raise ValueError(f"{want} expected, not the text {value.strip()!r}: write it in full, {number:.6g}")
            # `96e9` for an integer: PyYAML reads an exponent without a dot as text
            if _DECIMAL.fullmatch(value.strip()) and "e" in value.lower():
                number = float(value.strip())
                if not math.isfinite(number) or abs(number) >= 1e18:
                    # `1e400` is inf and `8e40` has no digits worth writing (a QA run was told "write it out in
                    # full, inf"): past any count a field here takes
                    raise ValueError(f"{want} expected, not the text {value.strip()!r}, which is past 1e18, more "
                                     f"than any count this field takes: check it for a typo")
                if not number.is_integer():
                    raise ValueError(f"{want} expected, not the text {value.strip()!r}, which is {number:g}, not a "
                                     f"whole number: write the whole number meant")
                raise ValueError(f"{want} expected, not the text {value.strip()!r}: write it out in full, "
                                 f"{int(number)}")
            if _RATIO.fullmatch(value.strip()):  # `2:1`, which YAML 1.1 would have read as 121
                raise ValueError(f"{want} expected, not the ratio {value.strip()!r}: write it as one number, a / b "
                                 f"(2:1 is 2.0, 1:1 is 1.0)")
            from placement.loaders.files import load_scalar

            try:  # what the text is without its quotes
                unquoted = load_scalar(value) if value.strip() else None
            except yaml.YAMLError:  # text YAML cannot read unquoted (`a: b: c`) is no number either
                unquoted = value
            literal = isinstance(unquoted, (int, float)) and not isinstance(unquoted, bool) and unquoted == unquoted
            literal = literal or (bool in kinds and isinstance(unquoted, bool))
            raise ValueError(f"{want} expected, not a string: write it without quotes" if literal
                             else f"{want} expected, not the text {value!r}")
        if kinds == {bool} and value is not None and not isinstance(value, bool):
            raise ValueError("true or false expected, not a number")
        return value


_SUFFIXED = re.compile(r"(\d+(?:\.\d+)?)\s*([kKmMgGbBtTpP])")
"""A number with a magnitude suffix (15T, 40k, 1.5M)."""
_SUFFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9, "T": 1e12, "P": 1e15}
_RATIO = re.compile(r"\d+(\.\d+)?\s*:\s*\d+(\.\d+)?")
"""A ratio written a:b (oversubscription 2:1)."""
_DECIMAL = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
"""A number as YAML 1.2 writes it: PyYAML (YAML 1.1) reads `450.0e9`, with no sign on the exponent, as a string, so
a float field takes this text; nothing else a string holds (`"yes"`, `"8"` for an integer) is coerced."""
_KIND_NAMES = {int: "an integer", float: "a number", bool: "true or false"}
