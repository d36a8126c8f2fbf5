"""Reading a user's file: one place that turns every read failure into an InputError."""

from __future__ import annotations

import sys
from pathlib import Path

from placement.errors import InputError


def read_text(path: Path, what: str, expected: str) -> str:
    """The UTF-8 text of `path`; a failure names the file, the reason and what was `expected`."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{what} `{path}` cannot be read ({err}); {expected}.") from err


def json_limit_problem(err: ValueError | RecursionError) -> str:
    """Why Python's json reader stopped on text that is not a syntax error: nesting past the recursion limit,
    or an integer past `sys.get_int_max_str_digits()` digits (CPython >= 3.11 refuses to convert it)."""
    if isinstance(err, RecursionError):
        return (
            "the JSON nests arrays or objects deeper than the reader can follow (Python's recursion limit, "
            f"{sys.getrecursionlimit()}): look for unclosed or repeated brackets"
        )
    if "digits" in str(err):
        return (
            f"a JSON integer has more than {sys.get_int_max_str_digits()} digits, more than Python converts: "
            "no setting needs that many, fix the number"
        )
    return f"the JSON cannot be read ({err})"
