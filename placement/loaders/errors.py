"""Turn a pydantic ValidationError into the one-paragraph message an InputError carries.

Pydantic reports each failure as a dict with `loc` (the field path), `input` (the offending value),
`msg` and `type` (https://docs.pydantic.dev/2.14/errors/validation_errors/).  We render every failure
as ``SOURCE: field `a.b` = VALUE: MESSAGE`` and join them into one paragraph, so the user sees the file,
the field, the value and what to change, without a traceback.
"""

from __future__ import annotations

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

    return " ".join(_format_one(error, source) for error in errors if not inside(error))


def _format_one(error: Any, source: str) -> str:
    """``SOURCE: field `a.b` = VALUE: MESSAGE.`` for one pydantic error dict."""
    message = _message(error)
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
    fix = _FIXES.get(error["type"])
    if fix:
        message = f"{message.rstrip('.')} ({fix})"
    return message if message.endswith(".") else f"{message}."
