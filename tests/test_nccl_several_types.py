"""nccl-tests `-d all` / `-o all`: one run that times the whole size range once per data type, then per reduction
op (NVIDIA/nccl-tests src/all_reduce.cu AllReduceRunTest loops `for type: for op: TimeTest(...)`, each TimeTest
over every size), so every size comes back under another type or op.  A user trial's `-d all` output was told it
held "two runs in one file ... give each run in its own file", which one run cannot do; the error now says what
the file holds and how to rerun it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from placement.calibration.nccl_tests import read_nccl_tests
from placement.errors import InputError

REAL = Path(__file__).parent / "data" / "nccl" / "h100-nvls-1node-all_reduce_perf.txt"
ROW = re.compile(r"^\s*\d+\s+\d+\s+double\s+sum\s")


def _again(tmp_path: Path, repl: tuple[str, str]) -> Path:
    """The real one-node all_reduce_perf output with its rows printed a second time, `repl` applied to them (as the
    next type's or op's block would print them), before its closing lines."""
    lines = REAL.read_text(encoding="utf-8").splitlines()
    rows = [n for n, line in enumerate(lines) if ROW.match(line)]
    block = [lines[n].replace(*repl) for n in rows]
    out = tmp_path / "all_reduce_perf.txt"
    out.write_text("\n".join(lines[:rows[-1] + 1] + block + lines[rows[-1] + 1:]) + "\n", encoding="utf-8")
    return out


@pytest.mark.parametrize(("repl", "kind"), [(("double     sum", " float     sum"), "float sum"),
                                            (("double     sum", "double    prod"), "double prod")])
def test_a_run_of_several_types_or_ops_is_named_with_the_rerun(tmp_path: Path, repl: tuple[str, str],
                                                               kind: str) -> None:
    first = next(n for n, line in enumerate(REAL.read_text().splitlines(), 1) if ROW.match(line))
    with pytest.raises(InputError) as err:
        read_nccl_tests(_again(tmp_path, repl))
    msg = str(err.value)
    assert f"size 33554432 again as {kind} (first on line {first} as double sum)" in msg
    assert "-d all" in msg and "-o all" in msg and "-d bfloat16 -o sum" in msg
    assert "two runs" not in msg


def test_the_same_size_of_the_same_type_again_is_still_a_second_run(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"size 33554432 again \(first on line .*two runs in one file"):
        read_nccl_tests(_again(tmp_path, ("double", "double")))


def test_the_real_file_alone_still_reads() -> None:
    assert len(read_nccl_tests(REAL).rows) == 10
