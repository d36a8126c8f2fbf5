"""`placement calibrate` and `validate --runs` after a user trial on real inputs: nccl-tests outputs before 2.13.4
(no `Group` in the rank lines, no root column) and with several 0-byte rows are read, a row cut short is named as
such from its table's header, a Megatron log's intervals with skipped or NaN iterations are no step measurement,
and a measured layout that breaks a rule is told the rule, not "does not fit in memory"."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from synthetic_calibration import TRUTH, write_log

from placement.calibration.nccl_tests import read_nccl_tests
from placement.calibration.steps import read_steps
from placement.cli import main
from placement.errors import InputError

NCCL = Path(__file__).parent / "data" / "nccl"
OLD = NCCL / "a100-40g-1node-old-format-all_reduce_perf.txt"
ZEROS = NCCL / "b200-2node-1gpu-all_gather_perf.txt"
NEW = NCCL / "h100-nvls-1node-all_gather_perf.txt"


def test_an_output_before_nccl_tests_2_13_4_is_read() -> None:
    run = read_nccl_tests(OLD)
    assert run.ranks == 8 and run.hosts == ("localhost",) and run.gpu.startswith("A100")
    biggest = max(run.rows, key=lambda r: r.size_bytes)
    assert biggest.size_bytes == 8589934592 and biggest.busbw_bytes_per_s == pytest.approx(235.26e9)  # 12 columns


def test_zero_byte_rows_are_skipped_not_taken_for_a_second_run() -> None:
    run = read_nccl_tests(ZEROS)
    assert run.ranks == 2 and len(run.hosts) == 2
    assert min(r.size_bytes for r in run.rows) == 32
    assert all(r.size_bytes > 0 for r in run.rows)


def test_a_row_cut_short_is_named_from_its_tables_header(tmp_path: Path) -> None:
    lines = NEW.read_text().splitlines()
    last = max(i for i, x in enumerate(lines) if x.split() and x.split()[0].isdigit())
    lines[last] = " ".join(lines[last].split()[:-1])  # its last #wrong cut: 12 columns in a 13-column table
    cut = tmp_path / "all_gather_perf.txt"
    cut.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"a result row with 12 columns, where its table's header has 13.*cut"):
        read_nccl_tests(cut)


def _log(tmp_path: Path, bad: dict[int, str]) -> Path:
    path = write_log(tmp_path / "megatron.log", 8, 2, 2, 64, 4096, TRUTH, np.random.default_rng(0), 0.0)
    lines = path.read_text().splitlines()
    rows = [i for i, x in enumerate(lines) if "elapsed time per iteration" in x]
    for k, what in bad.items():
        i = rows[k]
        if what == "skipped":
            lines[i] = lines[i].replace("number of skipped iterations:   0", "number of skipped iterations:   1")
        else:
            lines[i] = lines[i].replace("lm loss: 1.000000E+01", "lm loss: nan").replace(
                "number of nan iterations:   0", "number of nan iterations:   1")
        lines[i] = lines[i].replace("elapsed time per iteration (ms): ", "elapsed time per iteration (ms): 9")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_intervals_with_skipped_or_nan_iterations_are_left_out_and_said(tmp_path: Path) -> None:
    clean = read_steps(_log(tmp_path, {}), "dgx-h100")[0].run.published_step_time_s
    (step,) = read_steps(_log(tmp_path, {3: "skipped", 5: "nan"}), "dgx-h100")
    assert step.run.published_step_time_s == pytest.approx(clean, rel=0.01)  # the slowed intervals are not in it
    assert "2 logged interval(s) with skipped or NaN iterations left out" in step.run.citation


def test_a_log_of_only_skipped_iterations_is_an_error(tmp_path: Path) -> None:
    path = _log(tmp_path, {k: "skipped" for k in range(10)})
    with pytest.raises(InputError, match=r"0 usable .*10 logged interval\(s\) with skipped or NaN"):
        read_steps(path, "dgx-h100")


def test_a_micro_batch_that_does_not_divide_is_told_the_rule(tmp_path: Path) -> None:
    steps = tmp_path / "steps.yaml"
    steps.write_text("- id: mbs3\n  model: llama3-8b\n  num_gpus: 8\n  seq_len: 2048\n  global_batch: 128\n"
                     "  layout: {tp: 8, pp: 1, cp: 1, dp: 1, micro_batch_size: 3, recompute: full}\n"
                     "  step_time_s: 9.0\n")
    out = CliRunner().invoke(main, ["calibrate", "--steps", str(steps), "--cluster", "dgx-h100", "--gpus", "8",
                                    "--out", str(tmp_path / "p.yaml")])
    assert out.exit_code == 2 and "not a multiple of dp (1) * micro-batch (3)" in out.stderr
    assert "does not fit in memory" not in out.stderr
    shown = CliRunner().invoke(main, ["validate", "--runs", str(steps), "--cluster", "dgx-h100"])
    # "no price", not "no fit": the run breaks a rule, it is not over memory (a user trial read "no fit" as memory)
    assert "no price: mbs3: global batch 128 is not a multiple of dp (1) * micro-batch (3)" in shown.stdout
    assert "no fit" not in shown.stdout


TWO_NODE = NCCL / "h100-2node-all_reduce_perf.txt"  # hosts bm-h100-01 and bm-h100-02


def _fit_on(tmp_path: Path, conf: str, nodelist: str) -> dict:
    import json

    topo = tmp_path / "topology.conf"
    topo.write_text(conf)
    out = CliRunner().invoke(main, ["calibrate", "--nccl", str(TWO_NODE), "--slurm-topology", str(topo), "--nodelist",
                                    nodelist, "--node-type", "dgx-h100", "--oversubscription", "4", "--json",
                                    "--out", str(tmp_path / "p.yaml")])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_a_run_is_priced_on_the_allocations_own_switches(tmp_path: Path) -> None:
    """--slurm-topology and --nodelist were read but each nccl-tests file priced as the design's regular layout: a
    run whose two hosts sit under two leaves of a 4:1 spine fitted the same constants as under one leaf.  Now it
    is priced across the spine, and a run on hosts outside the allocation is said to be priced otherwise."""
    one = _fit_on(tmp_path, "SwitchName=leaf1 Nodes=bm-h100-[01-04]\n", "bm-h100-[01-04]")
    two = _fit_on(tmp_path, "SwitchName=leaf1 Nodes=bm-h100-[01,03]\nSwitchName=leaf2 Nodes=bm-h100-[02,04]\n"
                            "SwitchName=spine Switches=leaf[1-2]\n", "bm-h100-[01-04]")
    # across the 4:1 spine the same file is priced slower before any fit: the largest rows twice as long
    ratio = two["measurements"][-1]["before"] / one["measurements"][-1]["before"]
    assert ratio == pytest.approx(2.0, rel=0.1)
    away = _fit_on(tmp_path, "SwitchName=leaf1 Nodes=zz-[01-04]\n", "zz-[01-04]")
    assert any("not in the allocation given" in w and "bm-h100-01" in w for w in away["warnings"])


def test_an_all_gather_output_before_2_13_without_a_redop_column_is_read(tmp_path: Path) -> None:
    """nccl-tests before 2.13 print no redop column for all_gather and sendrecv (11 columns): the header says so; a
    review found such a file called cut."""
    lines = OLD.read_text().splitlines()
    out = []
    for line in lines:
        tok = line.split()
        if tok[:1] == ["#"] and "redop" in tok:
            line = line.replace(" redop", "")
        elif len(tok) == 12 and tok[0].isdigit():
            # the all_reduce rows as all_gather prints them: no redop, and busbw = algbw x (n-1)/n on its 8 ranks
            # (not all_reduce's 2(n-1)/n: the columns must agree, or the file is another test's output)
            row = tok[:3] + tok[4:]
            for k in (4, 8):
                row[k + 1] = f"{float(row[k]) * 7 / 8:.2f}"
            line = "  ".join(row)
        out.append(line)
    path = tmp_path / "all_gather_perf.txt"
    path.write_text("\n".join(out) + "\n")
    run = read_nccl_tests(path)
    algbw = max(float(x.split()[4]) for x in out if x.split()[:1] and x.split()[0].isdigit())
    assert run.op == "all_gather"
    assert max(r.busbw_bytes_per_s for r in run.rows) == pytest.approx(algbw * 7 / 8 * 1e9, rel=1e-3)


@pytest.mark.parametrize("kind", ["quick_geglu", "squared_relu"])
def test_a_megatron_logs_activation_is_its_models(tmp_path: Path, kind: str) -> None:
    """A log of a --quick-geglu (GPT-OSS) or --squared-relu job: its model was read as GeLU, and the audit's MLP check
    then refused the log's own model."""
    path = _log(tmp_path, {})
    text = []
    for line in path.read_text().splitlines():
        if line.strip().startswith("swiglu "):
            line = line.replace("True", "False")
        if line.strip().startswith(kind + " "):
            line = line.replace("False", "True")
        text.append(line)
    path.write_text("\n".join(text) + "\n")
    (step,) = read_steps(path, "dgx-h100")
    assert step.model.ffn_kind.value == kind


def test_a_partly_stated_layout_is_told_its_real_dp(tmp_path: Path) -> None:
    """A run that leaves dp to the GPU count: the rule it breaks was quoted with dp 1 (Layout's default)."""
    steps = tmp_path / "steps.yaml"
    steps.write_text("- id: partial\n  model: llama3-8b\n  num_gpus: 64\n  seq_len: 4096\n  global_batch: 64\n"
                     "  layout: {tp: 8, pp: 4, micro_batch_size: 3}\n  step_time_s: 2.0\n")
    shown = CliRunner().invoke(main, ["validate", "--runs", str(steps), "--cluster", "dgx-h100"])
    assert "not a multiple of dp (2) * micro-batch (3) = 6" in shown.stdout


def test_rows_whose_columns_contradict_each_other_are_refused(tmp_path: Path) -> None:
    """A user trial: an 8-node all_reduce output with its times converted to milliseconds was fitted (errors of
    118,414 %, a constant kept at a standard error 220 times its value), and the same output with its header renamed
    all_gather_perf fitted as an all-gather.  nccl-tests prints algbw = size / time (us) and busbw = algbw x the
    test's factor, so either edit shows in the row."""
    source = NCCL / "h100-2node-all_reduce_perf-ring.txt"
    lines = source.read_text().splitlines()
    assert read_nccl_tests(source).op == "all_reduce"  # the output as printed is read
    ms = []
    for line in lines:
        tok = line.split()
        if len(tok) >= 12 and tok[0].isdigit() and tok[1].isdigit() and int(tok[0]) >= 1 << 20:
            time_at = len(tok) - 8  # out-of-place time: 8 columns before the row's end (time algbw busbw #wrong x 2)
            tok[time_at] = f"{float(tok[time_at]) / 1000:.3f}"
            line = "  ".join(tok)
        ms.append(line)
    (tmp_path / "all_reduce_perf-ms.txt").write_text("\n".join(ms) + "\n")
    with pytest.raises(InputError, match=r"but the row's algbw is .* GB/s: nccl-tests prints algbw = size / time with "
                                         r"the time in microseconds, so the time column was converted or edited"):
        read_nccl_tests(tmp_path / "all_reduce_perf-ms.txt")
    renamed = tmp_path / "renamed.txt"  # its header names the test, so the redop column is not what tells
    renamed.write_text("# Collective test starting: all_gather_perf\n" + source.read_text())
    with pytest.raises(InputError, match=r"busbw / algbw is 1\.\d+, where all_gather_perf on 16 ranks prints 0\.938 "
                                         r"\(all_reduce_perf prints 1\.\d+\): the file is another test's output"):
        read_nccl_tests(renamed)


@pytest.mark.parametrize("value", ["nan", "inf", "-nan"])
def test_a_row_that_measured_nothing_is_named_so(tmp_path: Path, value: str) -> None:
    """A user trial: a row with a `nan` time was refused as cut ("a result row with 13 columns, where its table's
    header has 13")."""
    text = (NCCL / "h100-2node-all_reduce_perf-ring.txt").read_text()
    row = next(x for x in text.splitlines() if x.split()[:1] == ["4294967296"])
    tok = row.split()
    tok[5] = value
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(text.replace(row, "  ".join(tok)))
    with pytest.raises(InputError, match=rf"line \d+: {value} where a time or bandwidth is printed, not a finite "
                                         r"number"):
        read_nccl_tests(path)


@pytest.mark.parametrize(("text", "found"), [("[]\n", "found an empty list"), ("", "found nothing (an empty file)"),
                                             ("42\n", "found int '42'")])
def test_a_step_file_with_no_runs_says_what_it_found(tmp_path: Path, text: str, found: str) -> None:
    """A review: an empty step YAML was told "found list", the type of what it held, not that it held nothing."""
    steps = tmp_path / "steps.yaml"
    steps.write_text(text)
    with pytest.raises(InputError, match=rf"expected a list of measured runs .*; {re.escape(found)}: a file from which "
                                         rf"nothing is read fits nothing"):
        read_steps(steps, "dgx-h100")


def test_a_unit_slip_in_a_measured_run_is_left_out_of_validates_summary(tmp_path: Path) -> None:
    """A user trial: `validate --runs` averaged a 2,050 s step (milliseconds written as seconds) in at -99.9 %, exit
    0 and no word, where `calibrate` refuses the same file.  It stays in the table, named, and out of the summary."""
    import json

    steps = tmp_path / "steps.yaml"
    run = ("  model: llama3-8b\n  num_gpus: 8\n  seq_len: 2048\n  global_batch: 128\n"
           "  layout: {tp: 1, pp: 1, cp: 1, dp: 8, micro_batch_size: 1, recompute: none}\n")
    steps.write_text(f"- id: slip\n{run}  step_time_s: 2050\n- id: ok\n{run}  step_time_s: 2.0\n")
    shown = CliRunner().invoke(main, ["validate", "--runs", str(steps), "--cluster", "dgx-h100"])
    assert shown.exit_code == 0, shown.output
    assert "left out of the summary: slip: measured 2050 s is" in shown.stdout and "check the unit" in shown.stdout
    assert "over 1 runs" in shown.stdout
    doc = json.loads(CliRunner().invoke(main, ["validate", "--runs", str(steps), "--cluster", "dgx-h100",
                                               "--json"]).stdout)
    assert doc["summary"]["default"]["runs"] == 1 and doc["summary"]["default"]["left_out"] == ["slip"]
    assert {r["id"]: r["left_out_reason"] is not None for r in doc["runs"]} == {"slip": True, "ok": False}


def test_a_log_whose_world_size_contradicts_its_layout_is_told_a_fix_it_can_take(tmp_path: Path) -> None:
    """A user trial's log with world_size 16 and tp 3 was told "give the GPU count the job ran on (--gpus)", a
    flag `validate` does not have and `calibrate` takes for the cluster's size."""
    log = write_log(tmp_path / "run.log", 16, 1, 1, 64, 8192, TRUTH, np.random.default_rng(0), 0.0)
    text = log.read_text()
    log.write_text(re.sub(r"(tensor_model_parallel_size \.+ )1", r"\g<1>3", text))
    shown = CliRunner().invoke(main, ["validate", "--runs", str(log), "--cluster", "dgx-h100"])
    assert shown.exit_code == 2
    assert "the log's world_size 16" in shown.stderr and "--gpus" not in shown.stderr
