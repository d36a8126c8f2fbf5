"""The audit of a GPT-NeoX config speaks what GPT-NeoX can take, on real configs (tests/data/audit/neox/):

- the change list: no key that does nothing in the best plan (sequence_parallel under model_parallel_size 1, the
  checkpointing keys without checkpoint_activations), the config's own value for a key the launched plan left
  idle, and the GPT-NeoX version a key needs where the config's keys do not show that its version has it;
- the best plan and the memory_headroom_recompute finding: only recompute GPT-NeoX's keys state (none or full;
  no selective recompute), and no sequence parallelism for a config older than sequence_parallel;
- unknown keys: GPT-NeoX refuses a config with a key that is no NeoXArgs field, so a sure typo is an error, and any
  other unknown key is a warning finding and `layout.unknown_keys`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from placement.audit.changes import NOT_IN_FILES, _neox_changes
from placement.audit.launch import parse_launch
from placement.audit.readers.neox import typo_of, version_takes
from placement.audit.readers.neox_keys import KEYS
from placement.cli import main
from placement.errors import InputError

DATA = Path(__file__).parent / "data" / "audit" / "neox"
NEOX_20B = DATA / "20B.yml"
RELEASE_20B = DATA / "20B-c560814b.yml"
"""configs/20B.yml as the 20B release published it: `-` in its keys and `save-interval`, renamed in 2022-12."""
LLEMMA_7B = DATA / "llemma-7B.yml"
"""configs/llemma/7B.yml, as GPT-NeoX ships it: decay_lr_to and warmup_iters are no GPT-NeoX version's keys."""
FINDING_KEYS = {"severity", "kind", "message", "groups", "cost_s"}


def _audit(path: Path, cluster: str, gpus: int, *extra: str) -> tuple[dict, str]:
    """(the JSON, the readable report) of `placement audit` of `path` as gpt-neox-20b."""
    args = ["--reproducible", "audit", "--model", "gpt-neox-20b", "--cluster", cluster, "--gpus", str(gpus),
            "--launch", str(path), *extra]
    got = CliRunner().invoke(main, [*args, "--json"])
    assert got.exit_code in (0, 1), got.output
    text = CliRunner().invoke(main, args)
    assert text.exit_code == got.exit_code, text.output
    return json.loads(got.stdout), text.stdout


def _changes(data: dict) -> dict[str, dict]:
    return {c["argument"]: c for c in data["changes"]}


def _change_lines(report: str) -> list[str]:
    """The `-` and `+` lines of the readable report's change list."""
    return [x for x in report.split("changes to the launch:")[-1].splitlines() if x.startswith(("- ", "+ "))]


def _written(tmp_path: Path, text: str, name: str = "20B.yml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- 1. the change list --------------------------------------------------------------------------------------------


def test_a_best_plan_without_tp_leaves_sequence_parallel_and_idle_keys_alone() -> None:
    """20B.yml (tp 2, pp 4, checkpointed) on 64 MI300X: the best plan has tp 1 and no recompute.  sequence_parallel
    does nothing there (GPT-NeoX: "no effect when model_parallel_size is 1") and the file does not state it, and
    checkpoint_num_layers / synchronize_each_layer do nothing without checkpoint_activations: no line for any of
    them, and no `-` line without its `+`."""
    data, text = _audit(NEOX_20B, "mi300x", 64)
    best = data["best"]["layout"]
    assert best["tp"] == 1 and best["recompute"] == "none"
    changes = _changes(data)
    assert changes["model_parallel_size"] == {"argument": "model_parallel_size", "from": "2", "to": "1"}
    assert changes["checkpoint_activations"]["to"] == "false"
    for idle in ("sequence_parallel", "checkpoint_num_layers", "synchronize_each_layer"):
        assert idle not in changes, changes[idle]
        assert not [x for x in _change_lines(text) if x.split()[1] == idle], text
    assert all(c["to"] is not None for c in data["changes"]), data["changes"]


def test_a_key_the_launched_plan_left_idle_is_compared_as_the_config_states_it(tmp_path: Path) -> None:
    """20B.yml at model_parallel_size 1 (pp 4) on 96 A100-40GB: the best plan has tp > 1 with sequence parallelism.
    Without the key in the file, it is a key to add (from None, no `-` line); with `sequence_parallel: true` already
    in the file, which did nothing at tp 1, there is nothing to change."""
    text = NEOX_20B.read_text().replace('"model_parallel_size": 2,', '"model_parallel_size": 1,')
    data, report = _audit(_written(tmp_path, text), "gpt-neox-a100-40g", 96)
    assert data["best"]["layout"]["tp"] > 1 and data["best"]["layout"]["sequence_parallel"]
    sp = _changes(data)["sequence_parallel"]
    assert sp["from"] is None and sp["to"] == "true" and "note" not in sp
    lines = _change_lines(report)
    assert "+ sequence_parallel true" in [x.split("    #")[0] for x in lines]
    assert not [x for x in lines if x.startswith("- sequence_parallel")]
    stated = text.replace('"model_parallel_size": 1,', '"model_parallel_size": 1,\n  "sequence_parallel": true,')
    data, report = _audit(_written(tmp_path, stated), "gpt-neox-a100-40g", 96)
    assert data["best"]["layout"]["sequence_parallel"]
    assert "sequence_parallel" not in _changes(data) and "sequence_parallel" not in "".join(_change_lines(report))
    assert "sequence_parallel true with model_parallel_size 1 has no effect in GPT-NeoX" in report


@pytest.mark.parametrize(("a", "b", "stated", "expected"), [
    # the best plan does not checkpoint: the chunk and the syncs stay as the file has them
    ({"checkpoint_activations": "true", "checkpoint_num_layers": "2", "synchronize_each_layer": "true"},
     {"checkpoint_activations": "false"}, {"checkpoint_num_layers": "2", "synchronize_each_layer": "true"},
     [{"argument": "checkpoint_activations", "from": "true", "to": "false"}]),
    # the launched job did not checkpoint, the file keeps checkpoint_num_layers 2 from before: it becomes 1
    ({"checkpoint_activations": "false"}, {"checkpoint_activations": "true", "checkpoint_num_layers": "1",
                                           "synchronize_each_layer": "false"},
     {"checkpoint_activations": "false", "checkpoint_num_layers": "2"},
     [{"argument": "checkpoint_activations", "from": "false", "to": "true"},
      {"argument": "checkpoint_num_layers", "from": "2", "to": "1"}]),
    # GPT-NeoX's default (1, false) is what the best plan runs: nothing to write
    ({"checkpoint_activations": "false"}, {"checkpoint_activations": "true", "checkpoint_num_layers": "1",
                                           "synchronize_each_layer": "false"}, {},
     [{"argument": "checkpoint_activations", "from": "false", "to": "true"}]),
    # pipe_parallel_size 0 (no PipelineModule) is one stage: the file's 0, not placement's 1, is the launched value
    ({"pipe_parallel_size": "1"}, {"pipe_parallel_size": "2"}, {"pipe_parallel_size": "0"},
     [{"argument": "pipe_parallel_size", "from": "0", "to": "2"}]),
])
def test_gpt_neox_changes_leave_idle_keys_and_read_the_configs_own_values(a, b, stated, expected) -> None:
    assert _neox_changes(a, b, stated) == expected


def test_sequence_parallel_says_which_gpt_neox_takes_it_where_the_config_does_not_tell() -> None:
    """20B.yml's newest key (layernorm_fusion, 2024-01) predates sequence_parallel (8b43196f, 2024-08-23): the `+`
    line says which GPT-NeoX takes it and what the plan costs without it (here: it does not fit)."""
    data, text = _audit(NEOX_20B, "gpt-neox-a100-40g", 96)
    sp = _changes(data)["sequence_parallel"]
    assert sp["to"] == "true" and sp["note"] == NOT_IN_FILES
    assert sp["requires"].startswith("GPT-NeoX 8b43196f (2024-08-23) or later: an older one has no sequence_parallel "
                                     "and refuses the config")
    assert "3d8fec02 (2024-01-26) or later, by layernorm_fusion" in sp["requires"]
    assert re.search(r"without it the best plan takes \d+\.\d{3} s per step and does not fit \(\d+\.\d of "
                     r"\d+\.\d GiB\)", sp["requires"]), sp["requires"]
    (line,) = [x for x in text.splitlines() if x.startswith("+ sequence_parallel")]
    assert line == f"+ sequence_parallel true    # {sp['requires']}"
    # the other keys are in every GPT-NeoX version: no requirement
    assert [c["argument"] for c in data["changes"] if "requires" in c] == ["sequence_parallel"]


def test_a_config_older_than_sequence_parallel_gets_a_plan_without_it() -> None:
    """The 20B release config (2022-02) states save-interval, last in GPT-NeoX 0535bfbb of 2022-12-10: its
    GPT-NeoX predates sequence_parallel, so the best plan runs without it and the change list never writes it.
    Its `-` spelled keys are GPT-NeoX's own: none is unknown."""
    lay = parse_launch([RELEASE_20B])
    assert lay.unknown_keys == () and "save_interval" in lay.config_keys
    assert version_takes("sequence_parallel", lay.config_keys) is False
    data, text = _audit(RELEASE_20B, "gpt-neox-a100-40g", 96)
    assert not data["best"]["layout"]["sequence_parallel"] and data["best"]["layout"]["tp"] > 1
    assert "sequence_parallel" not in _changes(data) and "sequence_parallel" not in "".join(_change_lines(text))
    assert data["changes_note"].endswith("the best plan runs without sequence parallelism: the config's keys date "
                                         "its GPT-NeoX before 8b43196f (2024-08-23), which added sequence_parallel "
                                         "(save_interval is last in 0535bfbb of 2022-12-10)")
    assert [f for f in data["findings"] if f["kind"] == "unknown_config_key"] == []


# -- 2. recompute: what GPT-NeoX's keys state ---------------------------------------------------------------------


def test_idle_memory_finding_never_suggests_selective_recompute_to_gpt_neox() -> None:
    """20B.yml on 64 A100-80GB: peak 28 % of the GPU with every layer recomputed; no recompute does not fit, and
    selective recompute, which would, is no setting of GPT-NeoX: an info finding says so and counts no saving."""
    data, text = _audit(NEOX_20B, "dgx-a100-80g", 64)
    (f,) = [f for f in data["findings"] if f["kind"] == "memory_headroom_recompute"]
    assert set(f) >= FINDING_KEYS
    assert f["severity"] == "info" and f["cost_s"] == 0.0
    assert "checkpoint_activations: false does not fit" in f["message"]
    assert "GPT-NeoX cannot express it" in f["message"] and "no saving is counted" in f["message"]
    assert "recompute selective fits" not in f["message"]
    saved = float(re.search(r"would fit \(\d+\.\d GiB\) and save (\d+\.\d+) s per step", f["message"]).group(1))
    assert saved > 1.0
    assert "[info] memory_headroom_recompute (0.000 s/step)" in text


def test_idle_memory_finding_names_checkpoint_activations_false_where_it_fits() -> None:
    data, _ = _audit(NEOX_20B, "dgx-h200", 64)
    (f,) = [f for f in data["findings"] if f["kind"] == "memory_headroom_recompute"]
    assert f["cost_s"] > 1.0 and f["severity"] == "error"
    assert re.search(r"checkpoint_activations: false \(recompute none\) fits \(\d+\.\d GiB\) and saves "
                     rf"{f['cost_s']:.3f} s per step", f["message"]), f["message"]


def test_the_best_plan_of_a_gpt_neox_job_recomputes_whole_layers_or_nothing(tmp_path: Path) -> None:
    """20B.yml at 8192 tokens on 32 A100-40GB: left free, the search would take selective recompute, which the
    change list could only write as checkpoint_activations false.  The best plan checkpoints every layer, which
    the config already does: no checkpointing line."""
    path = _written(tmp_path, NEOX_20B.read_text().replace('"seq_length": 2048,', '"seq_length": 8192,'))
    data, _ = _audit(path, "gpt-neox-a100-40g", 32)
    assert data["best"]["layout"]["recompute"] == "full"
    assert "checkpoint_activations" not in _changes(data)


# -- 3. keys GPT-NeoX does not take ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "typo", "meant"), [
    ('"pipe_parallel_size": 4,', '"pipe_paralel_size": 4,', "pipe_parallel_size"),
    ('"checkpoint_activations": true,', '"checkpoint-activation": true,', "checkpoint-activations"),
    ('"train_iters": 150000,', '"Train_Iters": 150000,', "train_iters"),
])
def test_a_typo_of_a_gpt_neox_key_is_an_error_naming_it(tmp_path: Path, line: str, typo: str, meant: str) -> None:
    text = NEOX_20B.read_text()
    number = text.splitlines().index(f"  {line}") + 1
    path = _written(tmp_path, text.replace(line, typo))
    raw = typo.split('"')[1]
    with pytest.raises(InputError, match=re.escape(f"{path}:{number}: {typo}: unknown key {raw}; did you mean "
                                                   f"{meant}? No GPT-NeoX version has this key")):
        parse_launch([path])
    got = CliRunner().invoke(main, ["audit", "--model", "gpt-neox-20b", "--cluster", "gpt-neox-a100-40g", "--gpus",
                                    "96", "--launch", str(path)])
    assert got.exit_code == 2 and "Traceback" not in got.output
    assert f"did you mean {meant}?" in got.stderr and "correct the spelling" in got.stderr


def test_every_typo_is_named_at_once(tmp_path: Path) -> None:
    text = NEOX_20B.read_text().replace('"num_layers": 44,', '"num_layer": 44,').replace(
        '"hidden_size": 6144,', '"hiden_size": 6144,')
    path = _written(tmp_path, text)
    with pytest.raises(InputError) as err:
        parse_launch([path])
    assert str(err.value).startswith(f'{path}:20: "num_layer": 44,: unknown key num_layer; did you mean num_layers?; '
                                     f'{path}:21: "hiden_size": 6144,: unknown key hiden_size; did you mean '
                                     f'hidden_size? No GPT-NeoX version has these keys')


@pytest.mark.parametrize(("key", "meant"), [
    ("pipe-paralel-size", "pipe_parallel_size"), ("gradient_acumulation_steps", "gradient_accumulation_steps"),
    ("wandb_projekt", "wandb_project"), ("Num_Kv_Heads", "num_kv_heads"),
    # not sure typos: a changed number names another key (adam_beta1 / adam_beta2 were both keys), a word added
    # or dropped may too (gpt_j_residual / gptj_residual), and a key far from every known one is no typo
    ("adam_beta3", None), ("gptjresidual", None), ("warmup_iters", None), ("decay_lr_to", None), ("fp8", None),
])
def test_what_is_taken_for_a_typo(key: str, meant: str | None) -> None:
    assert typo_of(key) == meant


def test_a_key_no_gpt_neox_has_is_a_warning_with_its_line_and_the_nearest_key(tmp_path: Path) -> None:
    """Llemma's 7B config, as GPT-NeoX ships it, states two keys that no GPT-NeoX version has: stock GPT-NeoX
    refuses it.  Each is reported with its file, line and the nearest GPT-NeoX key, and the job is priced without
    it."""
    lay = parse_launch([LLEMMA_7B])
    lines = LLEMMA_7B.read_text().splitlines()
    got = {k.key: k for k in lay.unknown_keys}
    assert sorted(got) == ["decay_lr_to", "warmup_iters"]
    for k in got.values():
        assert k.file == str(LLEMMA_7B) and lines[k.line - 1].strip().startswith(f'"{k.key}":')
    assert got["warmup_iters"].suggestion == "warmup"
    # audited (in 20B.yml, whose model the catalog has): a warning finding and layout.unknown_keys
    text = NEOX_20B.read_text().replace('"warmup": 0.01,', '"warmup": 0.01,\n  "warmup_iters": 500,')
    path = _written(tmp_path, text)
    number = text.splitlines().index('  "warmup_iters": 500,') + 1
    data, report = _audit(path, "gpt-neox-a100-40g", 96)
    assert data["layout"]["unknown_keys"] == [{"key": "warmup_iters", "file": str(path), "line": number,
                                               "suggestion": "warmup"}]
    (f,) = [f for f in data["findings"] if f["kind"] == "unknown_config_key"]
    assert set(f) >= FINDING_KEYS and f["severity"] == "warning" and f["cost_s"] == 0.0
    assert f["message"].startswith(f"{path}:{number}: warmup_iters is no GPT-NeoX key (the NeoXArgs fields of "
                                   f"EleutherAI/gpt-neox from 2021-04 to ")
    assert "GPT-NeoX refuses a config with a key it does not know" in f["message"]
    assert f["message"].endswith("priced without it; the nearest GPT-NeoX key is warmup")
    assert "[warning] unknown_config_key (0.000 s/step)" in report
    clean, _ = _audit(NEOX_20B, "gpt-neox-a100-40g", 96)
    assert clean["layout"]["unknown_keys"] == [] and [f["kind"] for f in clean["findings"]] == [
        f["kind"] for f in data["findings"] if f["kind"] != "unknown_config_key"]
    assert clean["estimate"]["step_time_s"] == data["estimate"]["step_time_s"]


@pytest.mark.parametrize("path", [NEOX_20B, RELEASE_20B])
def test_the_shipped_20b_configs_state_only_gpt_neox_keys(path: Path) -> None:
    """Both spellings of the 20B config (`_` today, `-` at the release) are read key by key as GPT-NeoX reads them."""
    keys = [str(k).replace("-", "_") for k in yaml.safe_load(path.read_text())]
    assert keys and all(k in KEYS for k in keys)
    assert parse_launch([path]).unknown_keys == ()


def test_the_key_table_records_when_keys_came_and_went() -> None:
    """neox_keys.KEYS as read from GPT-NeoX's history: sequence_parallel added by 8b43196f (#1257), save_interval
    last in 0535bfbb before its rename to checkpoint_factor (8d1c5c88), both spellings of the residual key."""
    assert KEYS["sequence_parallel"] == ("8b43196f", None)
    assert KEYS["save_interval"] == ("4a6b8536", "0535bfbb")
    assert KEYS["checkpoint_factor"] == ("8d1c5c88", None)
    assert KEYS["gpt_j_residual"][1] is None and KEYS["gptj_residual"][1] is not None
    assert {"checkpoint_activations", "checkpoint_num_layers", "partition_activations", "checkpoint_in_cpu",
            "contiguous_checkpointing", "synchronize_each_layer"} <= set(KEYS)
    assert not [k for k in KEYS if "granularity" in k or k.startswith(("recompute_", "selective"))]


MIRROR = Path("/work/.mirror/EleutherAI+gpt-neox/repo")


@pytest.mark.skipif(not MIRROR.is_dir(), reason="needs a GPT-NeoX git clone")
def test_the_key_table_is_what_the_generator_reads_from_gpt_neox(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("neox_known_keys", Path(__file__).parents[1] / "benchmarks" /
                                                  "neox_known_keys.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "neox_keys.py"
    module.main(str(MIRROR), out)
    committed = Path(__file__).parents[1] / "placement" / "audit" / "readers" / "neox_keys.py"
    assert out.read_text() == committed.read_text()


@pytest.mark.parametrize(("key", "stated", "takes"), [
    # keys the dataclasses had when they reached GPT-NeoX's main line (52bd29b0, 2021-04-26) are in every version
    ("train_micro_batch_size_per_gpu", {"pipe_parallel_size", "model_parallel_size"}, True),
    ("sequence_parallel", {"pipe_parallel_size", "model_parallel_size"}, None),
    ("sequence_parallel", {"pipe_parallel_size", "use_bias_in_mlp"}, True),  # use_bias_in_mlp: 2024-09-10
    ("sequence_parallel", {"pipe_parallel_size", "save_interval"}, False),  # save_interval: last 2022-12-10
    ("sequence_parallel", {"sequence_parallel"}, True),
])
def test_what_a_configs_keys_say_of_its_gpt_neox(key: str, stated: set[str], takes: bool | None) -> None:
    assert version_takes(key, stated) is takes


def test_the_change_list_names_each_key_as_the_config_spells_it() -> None:
    """GPT-NeoX reads `-` as `_` and takes a key written both ways without complaint, so a change in the other
    spelling than the config's might add a second line GPT-NeoX does not take: each key as the file writes it."""
    data, _ = _audit(DATA / "20B-c560814b.yml", "gpt-neox-a100-40g", 96)
    names = {c["argument"] for c in data["changes"]}
    assert "checkpoint-activations" in names and "checkpoint_activations" not in names  # line 67 spells it so
    assert "train_micro_batch_size_per_gpu" in names  # and line 61 so
