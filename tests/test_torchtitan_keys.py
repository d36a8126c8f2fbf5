"""torchtitan keys the audit does not know are never dropped silently: torchtitan refuses a TOML key or a flag that
is no field of its config (ConfigManager._dict_to_dataclass "Invalid field names", tyro's unknown-flag exit), so a
sure typo of a known key is an error naming the file, line, key and the key meant (exit 2), and any other unknown key
(an experiment's or extension's section, a key of a version not read) is a warning finding and `layout.unknown_keys`.
The known keys are readers/torchtitan_keys.py, generated from torchtitan by benchmarks/torchtitan_known_keys.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.audit.readers.common import typo_of
from placement.audit.readers.torchtitan_keys import KEYS
from placement.cli import main
from placement.errors import InputError

DATA = Path(__file__).parent / "data" / "audit" / "torchtitan"
TT_8B = DATA / "llama3_8b.toml"
CORRECT = [DATA / "llama3_8b.toml", DATA / "llama3_70b.toml", DATA / "llama3_405b.toml"]
"""torchtitan's own TOML files, every key a JobConfig field at their commit (tests/data/audit/README.md)."""
AUDIT_8B = ["--reproducible", "audit", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8"]


def _script(tmp_path: Path, flags: str) -> Path:
    path = tmp_path / "run.sh"
    path.write_text(f"torchrun --nproc_per_node 8 -m torchtitan.train --job.config_file llama3_8b.toml {flags}\n")
    return path


def _cli(*args: str) -> object:
    return CliRunner().invoke(main, [*AUDIT_8B, *args])


@pytest.mark.parametrize(("flag", "meant"), [
    ("--parallelism.tensor_paralel_degree 2", "--parallelism.tensor_parallel_degree"),
    ("--parallelism.context_parallel_degre 2", "--parallelism.context_parallel_degree"),
    ("--training.local_batch_sise 4", "--training.local_batch_size"),
    ("--parallelism.tensor-paralel-degree 2", "--parallelism.tensor-parallel-degree"),  # tyro's dashed spelling
    ("--paralelism.tensor_parallel_degree 2", "--parallelism.tensor_parallel_degree"),  # a misspelled section
])
def test_a_misspelled_flag_is_an_error_naming_the_key_meant(tmp_path: Path, flag: str, meant: str) -> None:
    """The user trial: each of these was read as the default (tp 1, cp 1, micro-batch 1) and audited, exit 0."""
    script = _script(tmp_path, flag)
    raw = flag.split()[0]
    with pytest.raises(InputError, match=re.escape(
            f"{script}:1: torchrun --nproc_per_node 8 -m torchtitan.train --job.config_file llama3_8b.toml {flag}: "
            f"unknown key {raw}; did you mean {meant}? No torchtitan version read has this key")):
        parse_launch([TT_8B, script])
    got = _cli("--launch", str(TT_8B), "--launch", str(script))
    assert got.exit_code == 2 and "Traceback" not in got.output
    assert f"did you mean {meant}?" in got.stderr and "correct the spelling" in got.stderr


def test_a_misspelled_toml_key_is_an_error_naming_its_line(tmp_path: Path) -> None:
    text = TT_8B.read_text()
    assert "\ntensor_parallel_degree = 1\n" in text
    path = tmp_path / "llama3_8b.toml"
    path.write_text(text.replace("\ntensor_parallel_degree = 1\n", "\ntensor_paralel_degree = 2\n"))
    number = path.read_text().splitlines().index("tensor_paralel_degree = 2") + 1
    with pytest.raises(InputError, match=re.escape(
            f"{path}:{number}: tensor_paralel_degree = 2: unknown key parallelism.tensor_paralel_degree; did you "
            f"mean parallelism.tensor_parallel_degree? No torchtitan version read has this key")):
        parse_launch([path])
    got = _cli("--launch", str(path))
    assert got.exit_code == 2 and "Traceback" not in got.output
    assert "did you mean parallelism.tensor_parallel_degree?" in got.stderr


def test_a_toml_key_with_dashes_is_refused_as_torchtitan_refuses_it(tmp_path: Path) -> None:
    """tyro reads `--a.b-c` as b_c, but torchtitan's TOML reader takes keys as written."""
    path = tmp_path / "llama3_8b.toml"
    path.write_text(TT_8B.read_text().replace("\ntensor_parallel_degree = 1\n", "\ntensor-parallel-degree = 2\n"))
    with pytest.raises(InputError, match=re.escape("unknown key parallelism.tensor-parallel-degree; did you mean "
                                                   "parallelism.tensor_parallel_degree? (torchtitan reads a TOML key "
                                                   "as written")):
        parse_launch([path])


def test_every_typo_is_named_at_once(tmp_path: Path) -> None:
    script = _script(tmp_path, "--parallelism.tensor_paralel_degree 2 --training.local_batch_sise 4")
    with pytest.raises(InputError, match=r"did you mean --parallelism\.tensor_parallel_degree\?; .* did you mean "
                                         r"--training\.local_batch_size\? No torchtitan version read has these keys"):
        parse_launch([TT_8B, script])


@pytest.mark.parametrize("path", CORRECT)
def test_torchtitans_own_toml_files_state_only_known_keys(path: Path) -> None:
    assert parse_launch([path]).unknown_keys == ()


def test_correct_flags_in_both_spellings_are_read(tmp_path: Path) -> None:
    script = _script(tmp_path, "--parallelism.tensor-parallel-degree 2 --parallelism.context_parallel_degree 2 "
                               "--training.local-batch-size 4 --activation-checkpoint.mode full "
                               "--parallelism.no-enable-async-tensor-parallel")
    lay = parse_launch([TT_8B, script])
    assert (lay.tp, lay.cp, lay.micro_batch_size, lay.unknown_keys) == (2, 2, 4, ())
    assert lay.sources["recompute"].startswith(str(script))


def test_a_0_3_0_line_with_a_typo_is_refused_before_its_named_config(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text("torchrun --nproc_per_node 8 -m torchtitan.train --module llama3 --config llama3_8b "
                    "--parallelism.tensor-paralel-degree 2\n")
    with pytest.raises(InputError, match=r"did you mean --parallelism\.tensor-parallel-degree\?"):
        parse_launch([path])


def test_an_unknown_key_that_is_no_typo_is_a_warning(tmp_path: Path) -> None:
    """A section torchtitan's config does not have (an experiment's or an extension's) and a key no version read
    has: reported with its file, line and nearest key, and priced without them, never an error."""
    path = tmp_path / "llama3_8b.toml"
    text = TT_8B.read_text() + "\n[my_experiment]\nwarmup_ratio = 0.1\n"
    text = text.replace("\ntensor_parallel_degree = 1\n", "\ntensor_parallel_degree = 1\nsequence_parallel = true\n")
    path.write_text(text)
    lines = text.splitlines()
    got = {k.key: k for k in parse_launch([path]).unknown_keys}
    assert sorted(got) == ["my_experiment.warmup_ratio", "parallelism.sequence_parallel"]
    for k in got.values():
        assert k.file == str(path) and lines[k.line - 1].startswith(k.key.split(".")[-1] + " =")
    assert got["parallelism.sequence_parallel"].suggestion == "parallelism.enable_sequence_parallel"
    result = _cli("--launch", str(path), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [k["key"] for k in data["layout"]["unknown_keys"]] == ["parallelism.sequence_parallel",
                                                                   "my_experiment.warmup_ratio"]
    found = [f for f in data["findings"] if f["kind"] == "unknown_config_key"]
    assert len(found) == 2 and all(f["severity"] == "warning" and f["cost_s"] == 0.0 for f in found)
    number = lines.index("sequence_parallel = true") + 1
    assert found[0]["message"].startswith(f"{path}:{number}: parallelism.sequence_parallel is no torchtitan key (")
    assert "torchtitan refuses a key it does not know" in found[0]["message"]
    assert found[0]["message"].endswith("priced without it; the nearest torchtitan key is "
                                        "parallelism.enable_sequence_parallel")
    clean = json.loads(_cli("--launch", str(TT_8B), "--json").stdout)
    assert clean["layout"]["unknown_keys"] == [] and clean["estimate"]["step_time_s"] == data["estimate"]["step_time_s"]


def test_a_custom_config_module_makes_a_typo_a_warning(tmp_path: Path) -> None:
    """0.2.x's job.custom_config_module extends JobConfig with fields the audit cannot read: a near miss may be one."""
    script = _script(tmp_path, "--job.custom_config_module my.ext --parallelism.tensor_paralel_degree 2")
    (k,) = parse_launch([TT_8B, script]).unknown_keys
    assert (k.key, k.suggestion, k.line) == ("--parallelism.tensor_paralel_degree",
                                             "parallelism.tensor_parallel_degree", 1)


def test_the_deepseek_16b_toml_key_torchtitan_dropped_is_reported() -> None:
    """deepseek_v3_16b.toml at 00f785af states [float8] moe_fqns, which its JobConfig spells moe_fqns_prototype:
    torchtitan then dropped it, and refuses it since eadca483 (#1644; the file was fixed by 4256f756)."""
    (k,) = parse_launch([DATA / "deepseek_v3_16b.toml"]).unknown_keys
    assert k.key == "float8.moe_fqns"


@pytest.mark.parametrize(("key", "meant"), [
    ("parallelism.tensor_paralel_degree", "parallelism.tensor_parallel_degree"),
    ("Training.Local_Batch_Size", "training.local_batch_size"),
    ("paralelism.pipeline_parallel_degree", "parallelism.pipeline_parallel_degree"),
    # no sure typos: a word added or dropped, or a section moved
    ("parallelism.sequence_parallel", None), ("float8.moe_fqn", None), ("parallelism.tensor_parallel", None),
])
def test_what_is_taken_for_a_typo(key: str, meant: str | None) -> None:
    assert typo_of(key, KEYS) == meant


def test_the_key_table_spans_the_versions_read() -> None:
    assert KEYS["parallelism.tensor_parallel_degree"] == ("0.1.0", "0.2.0", "0.2.1", "0.2.2", "0.3.0")
    assert KEYS["parallelism.enable_sequence_parallel"] == ("0.3.0",)
    assert KEYS["training.dataloader.num_workers"] == ("0.2.1", "0.2.2")  # a nested section
    assert "dataloader.dataset" in KEYS  # 0.3.0: HuggingFaceTextDataLoader.Config, a subclass of the field's type
    assert "model_spec" not in KEYS  # tyro.conf.Suppress
    assert KEYS["validation.enabled"][0].count("..") == 1  # main between releases only: "first..last"


MIRROR = Path("/work/.mirror/pytorch+torchtitan/repo")
WHEEL = Path("/tmp/tt/x")


@pytest.mark.skipif(not (MIRROR.is_dir() and (WHEEL / "torchtitan" / "trainer.py").is_file()),
                    reason="needs a torchtitan git clone and the unpacked 0.3.0 wheel")
def test_the_key_table_is_what_the_generator_reads_from_torchtitan(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("torchtitan_known_keys", Path(__file__).parents[1] /
                                                  "benchmarks" / "torchtitan_known_keys.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "torchtitan_keys.py"
    wheel = WHEEL.parent / "torchtitan-0.3.0-py3-none-any.whl"
    module.main(str(MIRROR), str(WHEEL), str(wheel) if wheel.is_file() else None, out)
    committed = Path(__file__).parents[1] / "placement" / "audit" / "readers" / "torchtitan_keys.py"
    assert out.read_text() == committed.read_text()
