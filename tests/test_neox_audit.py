"""The audit of a GPT-NeoX config speaks what GPT-NeoX can take, on real configs (tests/data/audit/neox/):

- the change list: no key that does nothing in the best plan (sequence_parallel under model_parallel_size 1, the
  checkpointing keys without checkpoint_activations), the config's own value for a key the launched plan left
  idle, and the GPT-NeoX version a key needs where the config's keys do not show that its version has it;
- the best plan and the memory_headroom_recompute finding: only recompute GPT-NeoX's keys state (none or full;
  no selective recompute), and no sequence parallelism for a config older than sequence_parallel;
- unknown keys: GPT-NeoX refuses a config with a key that is no NeoXArgs field, so a sure typo is an error, and any
  other unknown key is a warning finding and `layout.unknown_keys`;
- the MLP width GPT-NeoX builds, as the config's version builds it: mlp_multiple_of (adbf5d6f, default 1) or, before
  it, ParallelMLP's multiple_of 256 (0d4bdb96), LLaMAParallelMLP (mlp_type llama) and the older geglu rules; where the
  keys leave the version open, the 256 rule assumed, and said;
- the unfused_attention finding of a GPT-NeoX config: attention type "flash" dated by the config's keys (efd5911d
  added it, with flash-attn 0.2.2; 8903a969 moved it to flash-attn 2), an upgrade where they date it older.
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
from placement.audit.readers.neox import flash_remedy, typo_of, version_takes
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
    path = _written(tmp_path, NEOX_20B.read_text().replace('"seq_length": 2048,', '"seq_length": 8192,')
                     .replace('"max_position_embeddings": 2048,', '"max_position_embeddings": 8192,'))
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
                                               "suggestion": "warmup", "megatron": False,
                                               "deepspeed": False}]
    (f,) = [f for f in data["findings"] if f["kind"] == "unknown_config_key"]
    assert set(f) >= FINDING_KEYS and f["severity"] == "warning" and f["cost_s"] == 0.0
    assert f["message"].startswith(f"{path}:{number}: warmup_iters is no GPT-NeoX key (the NeoXArgs fields of "
                                   f"EleutherAI/gpt-neox from 2021-04 to ")
    assert "GPT-NeoX refuses a config with a key it does not know" in f["message"]
    assert f["message"].endswith("priced without it; the nearest GPT-NeoX key is warmup")
    assert "[warning] unknown_config_key (not priced)" in report
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


# -- 4. the MLP width GPT-NeoX builds -------------------------------------------------------------------------------

LLAMA_LIKE = """{
  "pipe_parallel_size": 1,
  "model_parallel_size": 1,
  "num_layers": 32,
  "hidden_size": 4096,
  "num_attention_heads": 32,
  "seq_length": 4096,
  "train_micro_batch_size_per_gpu": 1,
  "gradient_accumulation_steps": 1,
  "activation": "swiglu",
EXTRA}
"""
"""A Llama-7B-shaped GPT-NeoX config whose keys date nothing (all in GPT-NeoX since 2021) but swiglu (0d4bdb96,
2024-09-06): 4 x 4096 = 16384, two thirds for the gated pair, 5461 per branch before rounding."""


def _llama_like(tmp_path: Path, *extra: str) -> Path:
    return _written(tmp_path, LLAMA_LIKE.replace("EXTRA", "".join(f"  {x},\n" for x in extra)), "llama.yml")


@pytest.mark.parametrize(("extra", "width", "said"), [
    # stated: GPT-NeoX adbf5d6f or later, its multiple (configs/llama2/7B.yml: 32768 x 2/3 // 2 = 10922 -> 11008)
    (['"intermediate_size": 32768', '"mlp_multiple_of": 256'], 11008,
     "intermediate_size 32768; swiglu is gated: int(32768 x 2/3) = 21845 for the pair, 10922 per branch, rounded up "
     "to a multiple of 256 (linear1's pair to 512): 11008 (GPT-NeoX adbf5d6f (2024-09-10) or later, which takes "
     "mlp_multiple_of"),
    (['"intermediate_size": 33024', '"mlp_multiple_of": 1'], 11008, "GPT-NeoX adbf5d6f (2024-09-10) or later, which "
                                                                     "takes mlp_multiple_of"),
    # use_bias_in_mlp came with adbf5d6f: mlp_multiple_of's default 1, no rounding (the old rule gave 5632)
    (['"use_bias_in_mlp": false'], 5461, "5461 per branch: 5461 (GPT-NeoX adbf5d6f (2024-09-10) or later, "
                                         "mlp_multiple_of's default 1; the config's keys date its GPT-NeoX adbf5d6f "
                                         "(2024-09-10) or later, by use_bias_in_mlp"),
    # mlp_type is last in c1ae1d77 (2024-09-09), swiglu first in 0d4bdb96: ParallelMLP's multiple_of 256
    (['"mlp_type": "regular"'], 5632, "rounded up to a multiple of 256 (linear1's pair to 512): 5632 (GPT-NeoX "
                                      "0d4bdb96 (2024-09-06) to adbf5d6f (2024-09-10), ParallelMLP's multiple_of 256; "
                                      "the config's keys date its GPT-NeoX"),
])
def test_the_mlp_width_is_what_the_configs_gpt_neox_builds(tmp_path: Path, extra, width, said) -> None:
    lay = parse_launch([_llama_like(tmp_path, *extra)])
    assert lay.ffn_hidden_size == width
    assert said in lay.sources["ffn_hidden_size"], lay.sources["ffn_hidden_size"]
    assert "assumed" not in lay.sources["ffn_hidden_size"] and not [x for x in lay.ignored if "ffn_hidden_size" in x]


def test_an_mlp_width_the_keys_leave_open_is_the_256_rule_and_says_what_else_gpt_neox_builds(tmp_path: Path) -> None:
    """No key dates the config after 0d4bdb96: GPT-NeoX 0d4bdb96 to adbf5d6f rounds the branch to 256 (5632), one
    from adbf5d6f takes mlp_multiple_of, default 1 (5461).  The 256 rule is assumed, and the evidence and a note say
    the other width and that the keys leave the version open."""
    path = _llama_like(tmp_path)
    lay = parse_launch([path])
    assert version_takes("mlp_multiple_of", lay.config_keys) is None
    assert lay.ffn_hidden_size == 5632
    where = lay.sources["ffn_hidden_size"]
    assert "5632 (assumed: GPT-NeoX 0d4bdb96 (2024-09-06) to adbf5d6f (2024-09-10), ParallelMLP's multiple_of 256; " \
           "GPT-NeoX adbf5d6f (2024-09-10) or later builds 5461;" in where, where
    assert "which leaves the version open: state mlp_multiple_of to decide it" in where
    (note,) = [x for x in lay.ignored if "ffn_hidden_size" in x]
    assert note.startswith("ffn_hidden_size 5632 assumed (GPT-NeoX 0d4bdb96 (2024-09-06) to adbf5d6f (2024-09-10), "
                           "ParallelMLP's multiple_of 256): GPT-NeoX adbf5d6f (2024-09-10) or later builds 5461")
    # audited against a model of the other width: the refusal names both, with their versions
    model = _written(tmp_path, "name: neox-llama\nnum_layers: 32\nhidden_size: 4096\nffn_hidden_size: 5461\n"
                               "num_attention_heads: 32\nvocab_size: 32000\n", "model.yaml")
    got = CliRunner().invoke(main, ["audit", "--model", str(model), "--cluster", "dgx-a100-80g", "--gpus", "8",
                                    "--launch", str(path)])
    assert got.exit_code == 2 and "ffn_hidden_size = 5632" in got.stderr and "or later builds 5461" in got.stderr
    # against the assumed width it runs, and the readable report carries the note
    model.write_text(model.read_text().replace("5461", "5632"))
    got = CliRunner().invoke(main, ["--reproducible", "audit", "--model", str(model), "--cluster", "dgx-a100-80g",
                                    "--gpus", "8", "--launch", str(path)])
    assert got.exit_code in (0, 1), got.output
    assert f"  - {note}" in got.stdout


def test_an_old_llama_config_is_read_as_llama_parallel_mlp(tmp_path: Path) -> None:
    """configs/llama/7B.yml before 0d4bdb96 (mlp_type llama, activation silu): LLaMAParallelMLP's int(8/3 x 4096)
    rounded up to 256, 11008; mlp_type is last in c1ae1d77, and 0d4bdb96 to adbf5d6f, which ignore it, build a plain
    4 x hidden silu MLP (16384): said, and 11008 assumed."""
    text = LLAMA_LIKE.replace('"activation": "swiglu",', '"activation": "silu",')
    path = _written(tmp_path, text.replace("EXTRA", '  "use_bias_in_norms": false,\n  "mlp_type": "llama",\n'),
                    "llama.yml")
    lay = parse_launch([path])
    assert lay.ffn_hidden_size == 11008
    where = lay.sources["ffn_hidden_size"]
    assert "mlp_type llama: LLaMAParallelMLP's int(2 x 4096 x 4/3) = 10922, rounded up to a multiple of 256: 11008" \
           in where
    assert "GPT-NeoX 0d4bdb96 (2024-09-06) to adbf5d6f (2024-09-10) builds 16384" in where
    assert [x for x in lay.ignored if "ffn_hidden_size 11008 assumed" in x]


def test_a_geglu_config_of_the_20b_release_is_read_with_its_eras_rule(tmp_path: Path) -> None:
    """The 20B release config's keys (save_interval, last 2022-12-10) date it before 038b0114 (2023-04-03), where
    geglu's branch was int(4 x 2/3 x hidden): 16384 at 6144, not the 8192 of the later rule."""
    text = RELEASE_20B.read_text().replace('"hidden-size": 6144,', '"hidden-size": 6144,\n  "activation": "geglu",', 1)
    lay = parse_launch([_written(tmp_path, text)])
    assert lay.ffn_hidden_size == 16384
    assert "geglu: int(4 x 2/3 x 6144) = 16384 per branch: 16384 (GPT-NeoX d2ef139b (2021-05-20) to 038b0114 " \
           "(2023-04-03);" in lay.sources["ffn_hidden_size"]


def test_an_mlp_gpt_neox_cannot_chain_is_an_error_with_the_fix(tmp_path: Path) -> None:
    """configs/llama2/7B.yml's intermediate_size 32768 without its mlp_multiple_of 256, in a GPT-NeoX from adbf5d6f:
    linear1 int(32768 x 2/3) = 21845 rounded up to 2 is 21846, linear2 10922, and the gate's halves are 10923."""
    path = _llama_like(tmp_path, '"intermediate_size": 32768', '"use_bias_in_mlp": false')
    with pytest.raises(InputError, match=re.escape(
            "GPT-NeoX adbf5d6f (2024-09-10) or later builds linear1 21846 wide and linear2 10922 (its gate halves "
            "linear1 into two of 10923), which ParallelMLP's forward cannot chain")) as err:
        parse_launch([path])
    assert "3 x 10922 = 32766 builds 10922" in str(err.value) and "mlp_multiple_of 256" in str(err.value)


# -- 5. flash attention in the config's GPT-NeoX --------------------------------------------------------------------


def _unfused(data: dict) -> str:
    (f,) = [f for f in data["findings"] if f["kind"] == "unfused_attention"]
    return f["message"]


def test_unfused_attention_dates_flash_by_the_configs_keys(tmp_path: Path) -> None:
    """20B.yml dates its GPT-NeoX after 8903a969 (flash-attn 2): a config change.  The 20B release config's keys
    date it before 8903a969: its "flash" is flash-attn 0.2.2 at best, so the flash-attn 2 priced is an upgrade.  With
    slurm_comment (last in 0accac61, 2022-12-05) it predates "flash" itself (efd5911d, 2022-12-10): flash is not
    available in that version."""
    data, _ = _audit(NEOX_20B, "gpt-neox-a100-40g", 96)
    assert ('a fused kernel, attention_config [[["flash"], NUM_LAYERS]] (the flash-attn 2 package, GPT-NeoX 8903a969 '
            "(2023-09-20) or later: the config's keys date its GPT-NeoX 3d8fec02 (2024-01-26) or later, by "
            "layernorm_fusion), saves") in _unfused(data)
    data, text = _audit(RELEASE_20B, "gpt-neox-a100-40g", 96)
    message = _unfused(data)
    assert "the fused kernel priced here, the flash-attn 2 package, needs an upgrade: the config's keys date its " \
           "GPT-NeoX d0e5eb10 (2021-09-29) or later, by output_layer_parallelism and 0535bfbb (2022-12-10) or " \
           "earlier, by save_interval" in message
    assert "flash-attn 0.2.2 (FlashAttention-1, from efd5911d (2022-12-10)" in message
    assert re.search(r"GPT-NeoX 8903a969 \(2023-09-20\) or later \(one without save_interval, which it no longer "
                     r'takes\), then attention_config \[\[\["flash"\], NUM_LAYERS\]\], saves \d+\.\d{3} s per step$',
                     message), message
    assert "unfused_attention" in text and "package, needs an upgrade: the config's keys date" in " ".join(text.split())
    older = RELEASE_20B.read_text().replace('"hidden-size": 6144,', '"hidden-size": 6144,\n  "slurm_comment": "x",', 1)
    data, _ = _audit(_written(tmp_path, older), "gpt-neox-a100-40g", 96)
    message = _unfused(data)
    assert "flash attention is not available in the config's GPT-NeoX: the config's keys date its GPT-NeoX 191d72f8 " \
           "(2022-09-20) or later, by slurm_comment and 0accac61 (2022-12-05) or earlier, by slurm_comment, and " \
           'attention type "flash" came with efd5911d (2022-12-10' in message
    assert "an upgrade to GPT-NeoX 8903a969 (2023-09-20) or later (one without slurm_comment" in message


@pytest.mark.parametrize(("stated", "start"), [
    ({"pipe_parallel_size", "model_parallel_size"},
     'a fused kernel, attention_config [[["flash"], NUM_LAYERS]] (GPT-NeoX 8903a969 (2023-09-20) or later for the '
     "flash-attn 2 package priced here"),
    ({"pipe_parallel_size", "layernorm_fusion"}, "a fused kernel, attention_config"),
    ({"pipe_parallel_size", "save_interval"}, "the fused kernel priced here, the flash-attn 2 package, needs an "
                                              "upgrade"),
    ({"pipe_parallel_size", "slurm_comment"}, "flash attention is not available in the config's GPT-NeoX"),
])
def test_the_flash_remedy_of_each_version_window(stated: set[str], start: str) -> None:
    remedy = flash_remedy(stated)
    assert remedy.startswith(start), remedy
    assert ("which leaves the version open" in remedy) is (stated == {"pipe_parallel_size", "model_parallel_size"})


def test_a_flash_config_is_dated_as_it_is_read(tmp_path: Path) -> None:
    """The release config with attention type flash: priced as FlashAttention-2, which its keys date it before (a
    note says so); with a key last in 2022-12-05 no GPT-NeoX runs it (flash came 2022-12-10): an error."""
    text = RELEASE_20B.read_text().replace('"hidden-size": 6144,', '"hidden-size": 6144,\n  "attention_config": '
                                                                   '[[["flash"], 44]],', 1)
    lay = parse_launch([_written(tmp_path, text)])
    assert lay.recipe["attention_kernel"] == "flash2"
    (note,) = [x for x in lay.ignored if x.startswith("attention type flash")]
    assert 'priced as FlashAttention-2, but GPT-NeoX efd5911d (2022-12-10) to 8903a969 (2023-09-20) runs "flash" ' \
           "with flash-attn 0.2.2, FlashAttention-1" in note
    older = text.replace('"hidden-size": 6144,', '"hidden-size": 6144,\n  "slurm_comment": "x",', 1)
    with pytest.raises(InputError, match=re.escape('attention type "flash" came with GPT-NeoX efd5911d (2022-12-10), '
                                                   "but the config's keys date its GPT-NeoX")):
        parse_launch([_written(tmp_path, older)])
    # a config of a GPT-NeoX with flash-attn 2 gets no note
    assert not [x for x in parse_launch([LLEMMA_7B]).ignored if x.startswith("attention type flash")]


GQA_70B = """{
  "pipe_parallel_size": 4, "model_parallel_size": 8, "sequence_parallel": true,
  "num_layers": 80, "hidden_size": 8192, "intermediate_size": 86016, "num_attention_heads": 64, "num_kv_heads": 8,
  "seq_length": 4096, "max_position_embeddings": 4096, "pos_emb": "rotary", "rotary_pct": 1,
  "rotary_emb_base": 500000, "no_weight_tying": true, "gpt_j_residual": false, "norm": "rmsnorm",
  "attention_config": [[["flash"], 80]], "use_bias_in_norms": false, "use_bias_in_attn_linear": false,
  "activation": "swiglu", "mlp_multiple_of": 256,
  "zero_optimization": {"stage": 1}, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
  "checkpoint_activations": true, "checkpoint_num_layers": 1,
  "bf16": {"enabled": true},
}
"""


def test_the_best_plan_splits_the_kv_heads_whole_as_gpt_neox_must(tmp_path):
    """GPT-NeoX divides the KV heads over model parallelism (megatron/model/transformer.py:332-334, no cloning): a
    user trial's best plan asked for model_parallel_size 16 on 8 KV heads, which GPT-NeoX cannot build."""
    cfg = tmp_path / "70B.yml"
    cfg.write_text(GQA_70B)
    hosts = tmp_path / "hostfile"
    hosts.write_text("".join(f"node{i:02d} slots=8\n" for i in range(64)))
    result = CliRunner().invoke(main, ["audit", "--launch", str(cfg), "--launch", str(hosts), "--model",
                                       "llama3-70b", "--cluster", "dgx-h100", "--gpus", "512", "--json"])
    assert result.exit_code in (0, 1), result.output
    best = json.loads(result.stdout)["best"]["layout"]
    assert 8 % best["tp"] == 0, best


def test_partition_activations_says_what_it_changes_and_that_it_is_not_priced(tmp_path: Path) -> None:
    """`partition_activations: true` was listed bare among the ignored keys (a user trial, Pythia 12B at TP 4): it
    says that the checkpointed inputs are split over the TP ranks and gathered in the recompute, neither priced."""
    text = NEOX_20B.read_text()
    assert '"partition_activations": false' in text
    path = _written(tmp_path, re.sub(r'"partition[-_]activations": \w+', '"partition_activations": true', text))
    data, _ = _audit(path, "gpt-neox-a100-40g", 96)
    said = [x for x in data["layout"]["ignored"] if x.startswith("partition_activations: true")]
    assert said and "all-gathers it again in the recompute" in said[0] and "not priced" in said[0]
