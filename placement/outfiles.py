"""Output folders and files: checked before any work, written atomically.

`check_out_dir` runs before a command plans anything: an `--out` that is a file, that lies under a file, that
cannot be created or written, or where an output name is already a folder, is bad input named with its path
and the problem, never a crash after minutes of work.  Every file is written to a temporary file in its own
folder and renamed over its name (`os.replace`, atomic on one file system), so a run stopped half-way leaves
each output either whole and old, or whole and new.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from placement.errors import InputError


def check_out_dir(path: str | Path, names: Iterable[str] = (), flag: str = "--out",
                  for_file: Path | None = None) -> Path:
    """The output folder, created if missing; an InputError naming the path and the problem otherwise (`for_file`:
    the folder of that output file, which the messages name)."""
    fix = (f"give {flag} a folder you can write (it is created if missing)" if for_file is None
           else f"give {flag} a file in a folder you can write")
    if for_file is not None:
        flag = f"{flag} {for_file}: its folder"
    if not str(path).strip():
        raise InputError(f"{flag} '': an empty folder name; {fix} (`.` for the current one)")
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise InputError(f"{flag} {out}: exists and is not a folder; {fix}")
    parent = next((p for p in out.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise InputError(f"{flag} {out}: {parent} is a file, so nothing can be created under it; {fix}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"{flag} {out}: cannot create it ({err.strerror or err}); {fix}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {out}: not writable by this user; {fix}")
    try:  # the permission bits are not the whole story (/proc, /sys, a read-only mount, root): try a file
        fd, probe = tempfile.mkstemp(prefix=".placement-probe.", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise InputError(f"{flag} {out}: no file can be written in it ({err.strerror or err}); {fix}") from None
    for name in names:
        target = out / name
        if target.is_dir():
            raise InputError(f"{flag} {out}: the output {target} is a folder; remove it or give another {flag}")
    return out


def check_out_file(path: str | Path, flag: str) -> Path:
    """An output file's path, its folder created if missing; an InputError naming the path otherwise."""
    out = Path(path)
    if out.is_dir():
        raise InputError(f"{flag} {out}: is a folder; give a file name")
    check_out_dir(out.parent if str(out.parent) else ".", flag=flag, for_file=out)
    return out


def _umask() -> int:
    """The process's umask (os.umask sets it to read it; it is set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` to write to; renamed over `path` when the block ends without an error,
    removed when it raises."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:  # a folder the checks let through that refuses files after all
        raise InputError(f"{path}: cannot write it ({err.strerror or err}); give an output path you can write") \
            from None
    os.close(fd)
    try:
        yield Path(tmp)
        # mkstemp makes the file private (0600); give it the mode a plain write would (an existing file's, else
        # 0666 less the umask), so a launch script or report is as readable as the user's other files (a user trial:
        # teammates on a shared cluster could not read any file placement wrote)
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: str | Path, text: str) -> Path:
    """Write `text` to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def checked_dump(value: object) -> str:
    """JSON of `value` with a SHA-256 of its canonical form, for cache entries (`checked_load`)."""
    body = json.dumps(value, sort_keys=True)
    return json.dumps({"sha256": hashlib.sha256(body.encode()).hexdigest(), "value": value}, sort_keys=True)


def checked_load(text: str) -> object | None:
    """The value `checked_dump` wrote, or None when the text is not such an entry or its checksum is wrong
    (truncated, edited or reshaped)."""
    try:
        entry = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(entry, dict) or set(entry) != {"sha256", "value"}:
        return None
    body = json.dumps(entry["value"], sort_keys=True)
    return entry["value"] if hashlib.sha256(body.encode()).hexdigest() == entry["sha256"] else None
