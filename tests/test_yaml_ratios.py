"""YAML 1.1 reads an unquoted `a:b` as a base-60 number: a user trial's `oversubscription: 1:1` was priced as a 61:1
network (Mixtral on 1,024 H100: 3.3 days where 1:1 gives 2.3), and `--set oversubscription=2:1` as 121, refused as
"less than or equal to 64" with no word of the parsing.  placement's own YAML reads them as the text they look like,
and a ratio where a number is expected is refused with the number to write."""

from __future__ import annotations

import yaml
from click.testing import CliRunner

from placement.cli import main
from placement.loaders.files import load_scalar

STUDY = """name: e
designs:
  - name: H100
    cluster: dgx-h100
    gpus: 1024
    capex_per_gpu: 40000
    power_per_gpu_w: 1400
    oversubscription: {ratio}
workloads:
  - {{name: w, model: mixtral-8x7b, seq_len: 4096, global_batch: 1024, tokens: 1.0e12}}
"""


def test_base_60_numbers_are_text_and_plain_numbers_stay_numbers():
    assert yaml.safe_load("1:1") == 61  # what PyYAML does, and placement's loader does not
    assert [load_scalar(t) for t in ("1:1", "2:1", "190:20:30")] == ["1:1", "2:1", "190:20:30"]
    assert [load_scalar(t) for t in ("61", "2.0", "0x10", "1.0e+5", "-3")] == [61, 2.0, 16, 100000.0, -3]


def test_a_ratio_in_a_sweep_file_or_a_set_value_is_refused_with_the_number_to_write(tmp_path):
    (tmp_path / "s.yaml").write_text(STUDY.format(ratio="1:1"))
    result = CliRunner().invoke(main, ["sweep", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o1")])
    assert result.exit_code == 2 and "not the ratio '1:1'" in result.output and "1:1 is 1.0" in result.output
    (tmp_path / "ok.yaml").write_text(STUDY.format(ratio="2.0"))
    result = CliRunner().invoke(main, ["sweep", str(tmp_path / "ok.yaml"), "--out", str(tmp_path / "o2"), "--set",
                                       "oversubscription=2:1"])
    assert result.exit_code == 2 and "not the ratio '2:1'" in result.output and "121" not in result.output


def test_a_ratio_in_a_cluster_file_is_refused(tmp_path):
    from pathlib import Path

    text = (Path(__file__).parent.parent / "hardware" / "clusters" / "dgx-h100.yaml").read_text()
    assert "oversubscription: 1.0" in text or "oversubscription: 1" in text
    bad = text.replace("oversubscription: 1.0", "oversubscription: 2:1", 1) if "oversubscription: 1.0" in text \
        else text.replace("oversubscription: 1", "oversubscription: 2:1", 1)
    (tmp_path / "c.yaml").write_text(bad)
    result = CliRunner().invoke(main, ["evaluate", "--model", "llama3-8b", "--cluster", str(tmp_path / "c.yaml"),
                                       "--gpus", "8", "--tp", "8"])
    assert result.exit_code == 2 and "not the ratio '2:1'" in result.output
