"""Turn a pydantic ValidationError into the one-paragraph message an InputError carries.

Pydantic reports each failure as a dict with `loc` (the field path), `input` (the offending value),
`msg` and `type` (https://docs.pydantic.dev/2.14/errors/validation_errors/).  We render every failure
as ``SOURCE: field `a.b` = VALUE: MESSAGE`` and join them into one paragraph, so the user sees the file,
the field, the value and what to change, without a traceback.
"""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

_VALUE_ERROR_PREFIX = "Value error, "
"""Pydantic prepends this to the text of a ValueError raised inside a validator; our messages stand alone."""

_FIXES = {
    "extra_forbidden": "it is not a field of this schema: remove it or correct its spelling",
    "missing": "add it",
}
"""A fix for the error types whose pydantic message says what is wrong but not what to do."""


def format_validation_error(err: ValidationError, source: str) -> str:
    """One paragraph naming `source`, each failing field, its value and the message.

    >>> from placement.specs import ModelSpec
    >>> try:
    ...     ModelSpec(name="m", num_layers=0, hidden_size=8, ffn_hidden_size=8,
    ...               num_attention_heads=2, vocab_size=8)
    ... except ValidationError as e:
    ...     print(format_validation_error(e, "m.yaml"))
    m.yaml: field `num_layers` = 0: Input should be greater than or equal to 1.
    """
    errors = err.errors(include_url=False)

    def inside(error: Any) -> bool:  # a list's too_short that counts only its items which failed on their own
        loc = tuple(error["loc"])
        return error["type"] == "too_short" and any(
            len(e["loc"]) > len(loc) and tuple(e["loc"][:len(loc)]) == loc for e in errors)

    schema = _schema_named(err.title)
    return " ".join(_format_one(error, source, schema) for error in errors if not inside(error))


def _schema_named(title: str) -> type[BaseModel] | None:
    """The pydantic model a ValidationError's title names (its class name), among placement's own schemas."""
    from placement.specs._base import Frozen

    seen, todo = [], [Frozen]
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo += cls.__subclasses__()
    found = [c for c in seen if c.__name__ == title and c.__module__.startswith("placement.")]
    return found[0] if len(found) == 1 else None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (itself, or inside Optional / tuple / list / dict), if one."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _fields_at(schema: type[BaseModel] | None, loc: tuple) -> list[str]:
    """The field names of the mapping at `loc` (a path of field names and list indices) under `schema`."""
    model = schema
    for part in loc:
        if model is None:
            return []
        if isinstance(part, int):
            continue  # an item of a list or tuple: the item's model is the field's
        field = model.model_fields.get(part)
        model = _model_in(field.annotation) if field is not None else None
    return list(model.model_fields) if model is not None else []


def _did_you_mean(error: Any, schema: type[BaseModel] | None) -> str:
    """`did you mean `x`?` for an unknown field spelled close to a field of its mapping (a user trial: a sweep's
    `oversubscripton` was refused without the name it missed, while a misspelled model name got one)."""
    loc = tuple(error["loc"])
    if error["type"] != "extra_forbidden" or not loc or not isinstance(loc[-1], str):
        return ""
    fields = _fields_at(schema, loc[:-1])
    alias = HF_NAMES.get(loc[-1])
    if alias is not None and alias in fields:  # a HuggingFace config.json key in a model YAML
        return f"; did you mean `{alias}`? (`{loc[-1]}` is config.json's name for it)"
    if alias is not None and alias.split(".")[0] in fields:  # one of a section's (`moe:`)
        section, name = alias.split(".")
        return f"; did you mean `{name}` under `{section}:`? (`{loc[-1]}` is config.json's name for it)"
    close = difflib.get_close_matches(loc[-1], fields, n=1, cutoff=0.8)
    return f"; did you mean `{close[0]}`?" if close else ""


HF_NAMES = {"num_key_value_heads": "num_kv_heads", "rope_theta": "rope_base", "num_hidden_layers": "num_layers",
            "intermediate_size": "ffn_hidden_size", "tie_word_embeddings": "tied_embeddings",
            "rms_norm_eps": "norm_epsilon", "layer_norm_eps": "norm_epsilon", "layer_norm_epsilon": "norm_epsilon",
            "partial_rotary_factor": "rotary_percent", "rotary_pct": "rotary_percent",
            "num_local_experts": "moe.num_experts", "n_routed_experts": "moe.num_experts",
            "num_experts_per_tok": "moe.top_k", "moe_intermediate_size": "moe.expert_ffn_hidden_size"}
"""HuggingFace config.json keys -> the model YAML field of the same meaning (a user trial's model YAML with
`num_key_value_heads` and `rope_theta` was told only to remove them, and `rope_theta` gone left Megatron's 10000)."""


def _format_one(error: Any, source: str, schema: type[BaseModel] | None = None) -> str:
    """``SOURCE: field `a.b` = VALUE: MESSAGE.`` for one pydantic error dict."""
    message = _message(error)
    hint = _did_you_mean(error, schema)
    if hint:
        message = message.rstrip(".") + hint
    path = ".".join(str(part) for part in error["loc"])
    if not path:
        return f"{source}: {message}"
    if error["type"] == "missing":
        return f"{source}: field `{path}` is missing: {message}"
    value = error.get("input")
    if isinstance(value, (dict, list, tuple, BaseModel)):
        # A whole sub-mapping (e.g. `moe` failing its own cross-field check): the message names the values.
        return f"{source}: field `{path}`: {message}"
    return f"{source}: field `{path}` = {value!r}: {message}"


def _message(error: Any) -> str:
    """Pydantic's message without its "Value error, " prefix, with a fix where we know one, ending in a period."""
    message = str(error["msg"]).removeprefix(_VALUE_ERROR_PREFIX)
    ctx = error.get("ctx") or {}
    if error["type"] == "too_short" and "min_length" in ctx and "actual_length" in ctx:
        # pydantic's "Tuple should have at least 1 item after validation, not 0" (a user trial: jargon)
        least = ctx["min_length"]
        message = f"needs at least {least} item{'s' if least != 1 else ''}, got {ctx['actual_length']}: add some"
    fix = _FIXES.get(error["type"])
    if fix:
        message = f"{message.rstrip('.')} ({fix})"
    return message if message.endswith(".") else f"{message}."
