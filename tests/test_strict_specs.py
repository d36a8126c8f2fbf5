"""Model, cluster and accelerator YAML: a number or a flag is never coerced from another type (lax pydantic read
`num_layers: true` as one layer), and a bandwidth outside 1e6..1e15 B/s is a unit slip, named as one."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from placement.catalog import load_cluster
from placement.cli import main
from placement.errors import InputError

MODEL = {"name": "m", "num_layers": 32, "hidden_size": 4096, "ffn_hidden_size": 14336, "num_attention_heads": 32,
         "vocab_size": 128256}


def _cluster() -> dict:
    return load_cluster("dgx-h100").model_dump(mode="json")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("num_layers", True, "field `num_layers` = True: an integer expected, not true/false: write the number."),
    ("tied_embeddings", "yes", "field `tied_embeddings` = 'yes': true or false expected, not a string: write it "
                               "without quotes."),
    ("tied_embeddings", 1, "field `tied_embeddings` = 1: true or false expected, not a number."),
    ("hidden_size", "4096", "field `hidden_size` = '4096': an integer expected, not a string"),
    # text YAML cannot read unquoted is no number either (reading it to choose the advice must not stop the check)
    ("hidden_size", "a: b: c", "field `hidden_size` = 'a: b: c': an integer expected, not the text 'a: b: c'"),
    # PyYAML reads an exponent without a dot as text: written out where it is a count, not as "inf" (a QA run was told
    # "write it out in full, inf" for 1e400) or "8e+40"
    ("hidden_size", "96e2", "an integer expected, not the text '96e2': write it out in full, 9600."),
    ("hidden_size", "1e400", "not the text '1e400', which is past 1e18, more than any count this field takes: check "
                             "it for a typo."),
    ("hidden_size", "8e40", "not the text '8e40', which is past 1e18"),
    ("hidden_size", "25e-1", "not the text '25e-1', which is 2.5, not a whole number: write the whole number meant."),
])
def test_a_model_yaml_value_of_the_wrong_type_is_named(tmp_path: Path, field: str, value: object,
                                                       message: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({**MODEL, field: value}))
    res = CliRunner().invoke(main, ["show", "model", str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert message in res.output.replace("\n", " ")


@pytest.mark.parametrize(("change", "message"), [
    ({"gpus_per_node": "8"}, "field `gpus_per_node` = '8': an integer expected, not a string"),
    ({"nic_bandwidth_bytes_per_s": 50}, "field `nic_bandwidth_bytes_per_s` = 50: 50 B/s is outside 1e+06 to 1e+15 "
                                        "bytes per second, a unit slip"),
])
def test_a_cluster_yaml_slip_is_named(tmp_path: Path, change: dict, message: str) -> None:
    """`nic_bandwidth_bytes_per_s: 50` (GB/s meant) planned a 56,255,500 s step."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**_cluster(), **change}))
    res = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", str(path), "--gpus", "8"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert message in res.output.replace("\n", " ")


def test_a_number_pyyaml_leaves_as_text_still_reads_as_a_float(tmp_path: Path) -> None:
    """PyYAML reads `450.0e9` (no exponent sign) as a string; the catalogs write bandwidths so."""
    text = yaml.safe_dump(_cluster()).replace("nic_bandwidth_bytes_per_s: 50000000000.0",
                                              "nic_bandwidth_bytes_per_s: 50.0e9")
    assert "50.0e9" in text
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert load_cluster(str(path)).nic_bandwidth_bytes_per_s == 50e9
    # no quotes to drop: the text is no number (a user trial's `--set budget=abc` was told to drop quotes)
    with pytest.raises(InputError, match=re.escape("= 'fast': a number expected, not the text 'fast'")):
        path.write_text(text.replace("50.0e9", "fast"))
        load_cluster(str(path))


def test_a_cluster_naming_an_accelerator_file_that_is_not_there_is_told_where_it_looked(tmp_path: Path) -> None:
    """A cluster's `accelerator` takes a catalog name or an accelerator YAML's path (read relative to the cluster
    file): a path to nothing names the cluster file, the field, the path it looked at, and the catalog names."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**_cluster(), "accelerator": "acc.yaml"}))
    res = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", str(path), "--gpus", "8"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    out = res.output.replace("\n", " ")
    assert f"{path}: field `accelerator` = 'acc.yaml': no accelerator file at {tmp_path / 'acc.yaml'}" in out
    assert "relative to the cluster file" in out and "h100-sxm" in out
    # a name that is neither a catalog part nor a path is told both ways
    path.write_text(yaml.safe_dump({**_cluster(), "accelerator": "h20"}))
    res = CliRunner().invoke(main, ["plan", "--model", "llama3-8b", "--cluster", str(path), "--gpus", "8"])
    assert res.exit_code == 2
    out = res.output.replace("\n", " ")
    assert f"{path}: field `accelerator` = 'h20': no accelerator of that name; known accelerators: " in out
    assert "or give the path of an accelerator YAML of your own, relative to the cluster file" in out


def test_a_path_that_is_no_yaml_file_is_said_to_be_one(tmp_path: Path) -> None:
    """A user trial: `show model /dev/null` was told "no model of that name ... or give a path to a YAML file", about
    a path.  A path is read as a file (a device or a pipe too: `<(...)` works, /dev/null is empty), a folder is said to
    be one, a path to nothing is no such file (a Hub name too, which is not fetched), and a name is looked up."""
    from placement.catalog import load_model

    with pytest.raises(InputError, match=r"/dev/null: a model file must be a YAML mapping of fields, got nothing"):
        load_model("/dev/null")
    with pytest.raises(InputError, match=re.escape(f"--cluster {str(tmp_path)!r} is a folder, not a cluster file")):
        load_cluster(str(tmp_path))
    with pytest.raises(InputError, match=r"'meta-llama/Llama-3-8B': no such file; .*config\.json .*a catalog name"):
        load_model("meta-llama/Llama-3-8B")
    with pytest.raises(InputError, match=r"no model of that name; did you mean llama3-8b\?"):
        load_model("llama3-8bb")
    fifo = tmp_path / "model.pipe"
    os.mkfifo(fifo)
    text = (Path(__file__).parent.parent / "models" / "llama3-8b.yaml").read_text()
    writer = threading.Thread(target=fifo.write_text, args=(text,))
    writer.start()
    assert load_model(str(fifo)).name == "llama3-8b"
    writer.join()
