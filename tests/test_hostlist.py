"""SLURM hostlist expressions -> host names in written order, and the --nodelist @file form."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet
from hypothesis import example, given, settings
from hypothesis import strategies as st

from placement.errors import InputError
from placement.loaders.hostlist import MAX_HOSTS, compress_hostlist, expand_hostlist, read_nodelist

EXPANSIONS = {
    "gpu[001-004,010],login1": ["gpu001", "gpu002", "gpu003", "gpu004", "gpu010", "login1"],
    # Written order inside one bracket (ClusterShell's NodeSet would sort these to n1, n2, n3).
    "n[3,1-2]": ["n3", "n1", "n2"],
    # Written order across components (NodeSet would give a-node first).
    "z-node,a-node": ["z-node", "a-node"],
    "gpu[09-11],gpu[01-02]": ["gpu09", "gpu10", "gpu11", "gpu01", "gpu02"],
    # Cartesian product, first bracket outermost; padding kept per bracket.
    "a[1-2]b[03-04]": ["a1b03", "a1b04", "a2b03", "a2b04"],
    "rack[1-2]-node[1-2]-ib": ["rack1-node1-ib", "rack1-node2-ib", "rack2-node1-ib", "rack2-node2-ib"],
    "n[08-10]": ["n08", "n09", "n10"],
    "n[8-10]": ["n8", "n9", "n10"],
    "login1": ["login1"],
    "  gpu[1-2]  ": ["gpu1", "gpu2"],
    "[1-3]": ["1", "2", "3"],
}


@pytest.mark.parametrize(("expr", "hosts"), EXPANSIONS.items(), ids=list(EXPANSIONS))
def test_expands_in_written_order(expr: str, hosts: list[str]) -> None:
    assert expand_hostlist(expr) == hosts
    # Same hosts as ClusterShell, which only orders them differently.
    assert sorted(hosts) == sorted(NodeSet(expr.strip()))


def test_digits_before_a_bracket_are_literal_text() -> None:
    """SLURM concatenates prefix and number: n1[0-10] is n10..n19, n110.  ClusterShell's NodeSet instead
    reads it as n[10-110] (101 hosts), one more reason the expansion does not hand it whole expressions."""
    assert expand_hostlist("n1[0-10]") == [f"n1{i}" for i in range(11)]
    assert len(NodeSet("n1[0-10]")) == 101


def test_large_allocation_keeps_order_and_padding() -> None:
    hosts = expand_hostlist("gpu[0129-0192],gpu[0001-0037]")
    assert len(hosts) == 64 + 37
    assert hosts[0] == "gpu0129"
    assert hosts[63] == "gpu0192"
    assert hosts[64] == "gpu0001"
    assert hosts[-1] == "gpu0037"


@example(2, 9, 91)  # n[09-100]
@given(st.integers(1, 3), st.integers(0, 99), st.integers(0, 1200))
def test_a_padded_range_that_runs_into_more_digits_expands_as_slurm_prints_it(width, low, span) -> None:
    """SLURM takes a range's width from its low end (hostlist.c: width = strlen(lo), printed "%0*lu"), so it writes
    n[09-100] for n09 .. n99, n100 into SLURM_JOB_NODELIST; a user trial's real allocation was refused as a
    padding mismatch with a fix (rename the hosts) no user can make."""
    lo, hi = f"{low:0{width}d}", f"{low + span:0{width}d}"  # as SLURM prints both ends: hi wider only past 10^width
    hosts = expand_hostlist(f"n[{lo}-{hi}]")
    assert hosts == [f"n{n:0{width}d}" for n in range(low, low + span + 1)]
    assert expand_hostlist(compress_hostlist(hosts)) == hosts


MALFORMED = {
    "empty": ("", "hostlist: the hostlist expression is empty; expected comma-separated host names"),
    "blank": ("   ", "hostlist: the hostlist expression is empty"),
    "unclosed": ("gpu[001-004", "hostlist: `gpu[001-004` has an unclosed `[`; expected comma-separated host names"),
    "stray close": ("gpu001]", "hostlist: `gpu001]` closes a bracket that was never opened at position 7"),
    "nested": ("n[1[2]]", "hostlist: `n[1[2]]` opens a bracket inside another at position 4; brackets do not nest"),
    "descending": (
        "n[5-3]",
        "hostlist: `n[5-3]` has the descending range `5-3` in `n[5-3]`; write it low to high, `3-5`.",
    ),
    "adjacent brackets": (
        "n[1-2][3]",
        "hostlist: `n[1-2][3]` has two brackets with nothing between them in `n[1-2][3]`; separate them with text",
    ),
    "empty bracket": ("n[]", "hostlist: `n[]` has an empty bracket `[]` in `n[]`"),
    "double comma": ("a,,b", "hostlist: `a,,b` has an empty component (a leading, trailing or doubled comma)"),
    "trailing comma": ("a,b,", "hostlist: `a,b,` has an empty component"),
    "step": (
        "n[1-9/2]",
        "hostlist: `n[1-9/2]` has `1-9/2` inside the brackets of `n[1-9/2]`; expected a number or a lo-hi range",
    ),
    "letters": ("n[a-c]", "hostlist: `n[a-c]` has `a-c` inside the brackets of `n[a-c]`"),
    "padding": (
        "n[001-3]",
        "hostlist: `n[001-3]` has the range `001-3` in `n[001-3]` that cannot be expanded (padding length mismatch",
    ),
    "space": (
        "gpu1 gpu2",
        "hostlist: `gpu1 gpu2` contains whitespace at position 5; separate hosts with commas, not spaces",
    ),
    "huge": (
        "n[0-99999999]",
        f"hostlist: `n[0-99999999]` expands to more than {MAX_HOSTS:,} hosts (range `0-99999999`)",
    ),
    "huge product": ("a[0-2047]b[0-2047]", f"hostlist: `a[0-2047]b[0-2047]` expands to more than {MAX_HOSTS:,} hosts"),
    "duplicate across components": (
        "gpu[1-3],gpu2",
        "hostlist: `gpu[1-3],gpu2` names host `gpu2` twice (in `gpu[1-3]` and in `gpu2`); list each host once.",
    ),
    "duplicate in a bracket": (
        "n[1,2,1]",
        "hostlist: `n[1,2,1]` names host `n1` twice (in `n[1,2,1]`); list each host once.",
    ),
}


@pytest.mark.parametrize(("expr", "message"), MALFORMED.values(), ids=list(MALFORMED))
def test_malformed_expression_is_input_error(expr: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        expand_hostlist(expr)


def test_error_names_the_source() -> None:
    with pytest.raises(InputError, match=re.escape("job.yaml: hosts: `n[5-3]` has the descending range")):
        expand_hostlist("n[5-3]", source="job.yaml: hosts")


# --- read_nodelist ---------------------------------------------------------------------------------


def test_nodelist_argument_is_an_expression() -> None:
    assert read_nodelist("gpu[2,1]") == ["gpu2", "gpu1"]
    with pytest.raises(InputError, match=re.escape("nodelist: `gpu[2,1` has an unclosed `[`")):
        read_nodelist("gpu[2,1")


def test_nodelist_file(tmp_path: Path) -> None:
    path = tmp_path / "hosts.txt"
    path.write_text(
        "# allocation for job 4242 (scontrol show hostnames order)\n"
        "gpu0129\n"
        "\n"
        "gpu[0130-0132]   # rest of rack 4\n"
        "   # an indented comment\n"
        "gpu[0001-0002],gpu0010\n"
    )
    assert read_nodelist(f"@{path}") == ["gpu0129", "gpu0130", "gpu0131", "gpu0132", "gpu0001", "gpu0002", "gpu0010"]


def test_nodelist_file_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "hosts.txt"
    path.write_text("gpu0001\n# comment\ngpu[0002-0004\n")
    with pytest.raises(InputError, match=re.escape(f"{path}:3: `gpu[0002-0004` has an unclosed `[`; expected")):
        read_nodelist(f"@{path}")


def test_nodelist_file_duplicate_across_lines(tmp_path: Path) -> None:
    path = tmp_path / "hosts.txt"
    path.write_text("gpu[0001-0004]\n\ngpu0003\n")
    with pytest.raises(
        InputError, match=re.escape(f"{path}:3: host `gpu0003` is already listed on line 1; list each host once.")
    ):
        read_nodelist(f"@{path}")


def test_nodelist_file_without_hosts(tmp_path: Path) -> None:
    path = tmp_path / "hosts.txt"
    path.write_text("# nothing yet\n\n")
    with pytest.raises(
        InputError, match=re.escape(f"nodelist file `{path}` lists no hosts (only blank lines or comments)")
    ):
        read_nodelist(f"@{path}")


def test_nodelist_file_missing(tmp_path: Path) -> None:
    path = tmp_path / "absent.txt"
    with pytest.raises(InputError, match=re.escape(f"nodelist file `{path}` cannot be read (")):
        read_nodelist(f"@{path}")


# --- property ---------------------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab0123[]-,", max_size=16))
def test_expand_hostlist_raises_only_input_error(expr: str) -> None:
    try:
        hosts = expand_hostlist(expr)
    except InputError:
        return
    assert hosts
    assert len(set(hosts)) == len(hosts)
    assert all(isinstance(host, str) and host and not set(host) & set("[],") for host in hosts)
