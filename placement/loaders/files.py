"""Reading a user's file: one place that turns every read failure into an InputError."""

from __future__ import annotations

from pathlib import Path

from placement.errors import InputError


def read_text(path: Path, what: str, expected: str) -> str:
    """The UTF-8 text of `path`; a failure names the file, the reason and what was `expected`."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{what} `{path}` cannot be read ({err}); {expected}.") from err
