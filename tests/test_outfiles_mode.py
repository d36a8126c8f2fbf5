"""Files placement writes get the mode a plain write gives (0666 less the umask, or the replaced file's own): they were
written through mkstemp, 0600, which teammates on a shared cluster could not read (a user trial)."""

from __future__ import annotations

import os
import stat

from placement.outfiles import write_atomic


def test_a_written_file_has_the_umasks_mode(tmp_path) -> None:
    old = os.umask(0o022)
    try:
        path = write_atomic(tmp_path / "megatron.sh", "echo hi\n")
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        path.chmod(0o750)
        write_atomic(path, "echo again\n")  # replacing a file keeps its mode
        assert stat.S_IMODE(path.stat().st_mode) == 0o750
    finally:
        os.umask(old)
