"""Edited copies of the launch files the audit tests read."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def replaced(text: str, pairs: Iterable[tuple[str, str]], unique: bool = False) -> str:
    """`text` with each (old, new) replaced everywhere, in order; each old must be there (exactly once where
    `unique`), so an edit that no longer matches its file fails the test rather than testing the unedited file."""
    for old, new in pairs:
        assert (text.count(old) == 1) if unique else (old in text), old
        text = text.replace(old, new)
    return text


def edited_copy(source: Path, tmp_path: Path, pairs: Iterable[tuple[str, str]]) -> Path:
    """`source` with `pairs` replaced (`replaced`), written under tmp_path by the same name."""
    out = tmp_path / source.name
    out.write_text(replaced(source.read_text(), pairs))
    return out
