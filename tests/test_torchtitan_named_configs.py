"""torchtitan 0.3.0's named configs (`--module M --config F`), read from a table of what each config function of
models/*/config_registry.py sets (torchtitan_configs.CONFIGS, generated statically by
benchmarks/torchtitan_named_configs.py), under the line's flags, with 0.3.0's dataclass defaults for the rest; the
change list's `activation-checkpoint:MODE` subcommand in the form the command line takes; and the best plan's CUDA
graphs as torchtitan 0.3.0 runs them (captured without PP and EP, trainer.py:179-210 and 613-614).

From a user trial: llama3_8b's ordinary line (no TP/PP/CP/EP degrees, no seq_len, no subcommand) was refused with
the claim that its config sets them; the change list printed `activation-checkpoint none`, which tyro refuses; and
it added --training.disable_cuda_graphs while the best plan's source said graphs were on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.audit.readers.torchtitan_configs import CONFIGS, DEFAULTS
from placement.cli import main
from placement.errors import InputError

WHEEL = Path("/tmp/trial/tt/src")
"""An unpacked torchtitan 0.3.0 wheel, where the machine has one (the table's regeneration test)."""
HEAD = "NNODES=2\ntorchrun --nnodes $NNODES --nproc_per_node 8 -m torchtitan.train --module llama3 --config {config} "
PLAIN_8B = ("--parallelism.data_parallel_replicate_degree 2 --parallelism.data_parallel_shard_degree 8 "
            "--training.local_batch_size 2 --compile.enable\n")
"""The trial's tt030.sh: a normal 0.3.0 line that leaves degrees, seq_len and checkpointing to llama3_8b."""
STATED_8B = ("--parallelism.data_parallel_replicate_degree 2 --parallelism.data_parallel_shard_degree 8 "
             "--parallelism.tensor_parallel_degree 1 --parallelism.pipeline_parallel_degree 1 "
             "--parallelism.context_parallel_degree 1 --parallelism.expert_parallel_degree 1 "
             "--training.local_batch_size 2 --training.seq_len 8192 --compile.enable activation-checkpoint:selective\n")
"""The trial's tt030b.sh."""


def _script(tmp_path: Path, config: str, flags: str) -> Path:
    path = tmp_path / "run.sh"
    path.write_text(HEAD.format(config=config) + flags)
    return path


def _audit(path: Path, model: str = "llama3-8b", gpus: str = "16", json_out: bool = True):
    return CliRunner().invoke(main, ["--reproducible", "audit", "--launch", str(path), "--model", model, "--gpus",
                                     gpus, *(["--json"] if json_out else [])])


def test_a_line_that_leaves_keys_to_llama3_8b_reads_them_from_its_config(tmp_path) -> None:
    """llama3_8b sets local_batch_size 1, seq_len 8192 and SelectiveAC (models/llama3/config_registry.py:203-211) and
    no parallel degree: the degrees are ParallelismConfig's defaults (config/configs.py), each with its source."""
    lay = parse_launch([_script(tmp_path, "llama3_8b", PLAIN_8B)])
    assert (lay.tp, lay.pp, lay.cp, lay.ep, lay.seq_len, lay.recompute) == (1, 1, 1, 1, 8192, "selective")
    assert lay.sources["tp"] == ("torchtitan 0.3.0 default parallelism.tensor_parallel_degree = 1 "
                                 "(config/configs.py:157; --config llama3_8b leaves it)")
    assert lay.sources["seq_len"] == ("torchtitan 0.3.0 models/llama3/config_registry.py:204 llama3_8b: "
                                      "training.seq_len = 8192")
    assert "config_registry.py:211 llama3_8b" in lay.sources["recompute"]
    assert lay.local_batch == 2 and str(tmp_path / "run.sh") in lay.sources["local_batch"]  # the line wins


def test_llama3_70b_runs_tp_8_and_full_checkpointing_from_its_config(tmp_path) -> None:
    lay = parse_launch([_script(tmp_path, "llama3_70b", "--training.seq_len 4096\n")])
    assert (lay.tp, lay.seq_len, lay.local_batch, lay.recompute) == (8, 4096, 8, "full")
    assert lay.sources["tp"].startswith("torchtitan 0.3.0 models/llama3/config_registry.py:284 llama3_70b: "
                                        "parallelism.tensor_parallel_degree = 8")
    assert parse_launch([_script(tmp_path, "llama3_70b", "--parallelism.tensor_parallel_degree 4\n")]).tp == 4


def test_a_config_that_calls_another_names_both(tmp_path) -> None:
    """llama3_8b_mxfp8 calls llama3_8b and replaces compile (CompileConfig(enable=True, components=["model"])) and the
    model spec (MXFP8LinearConverter over every linear layer, the LM head too: read as fp8 with fp8_recipe mxfp8,
    the 16-bit inputs torchao's MXFP8Linear saves and the converted head, each with its source)."""
    lay = parse_launch([_script(tmp_path, "llama3_8b_mxfp8", "\n")])
    assert lay.sources["seq_len"].endswith("llama3_8b: training.seq_len = 8192 (--config llama3_8b_mxfp8 calls "
                                           "llama3_8b)")
    assert any(x.startswith("compile.enable: torch.compile of the model (") for x in lay.ignored)
    assert not any("MXFP8" in x for x in lay.ignored)
    assert lay.precision == "fp8" and "config_registry.py:250 llama3_8b_mxfp8" in lay.sources["precision"]
    assert (lay.recipe["fp8_recipe"], lay.recipe["fp8_lm_head"], lay.recipe["fp8_saves_16bit_inputs"]) == (
        "mxfp8", True, True)
    assert "mxfp8_linear.py:108" in lay.sources["recipe.fp8_saves_16bit_inputs"]
    assert "lm_head" in lay.sources["recipe.fp8_lm_head"]


def test_float8_and_graphs_off_come_from_deepseek_v3_671b_float8(tmp_path) -> None:
    path = tmp_path / "run.sh"
    path.write_text("torchrun --nnodes 32 --nproc_per_node 8 -m torchtitan.train --module deepseek_v3 "
                    "--config deepseek_v3_671b_float8 --parallelism.pipeline_parallel_degree 8\n")
    lay = parse_launch([path])
    assert lay.precision == "fp8" and "Float8LinearConverter" in lay.sources["precision"]
    assert (lay.ep, lay.seq_len, lay.local_batch) == (2, 4096, 4)
    assert lay.sources["recipe.cuda_graphs"].endswith("deepseek_v3_671b: training.disable_cuda_graphs = True "
                                                      "(--config deepseek_v3_671b_float8 calls deepseek_v3_671b)")
    assert any(x.startswith("compile.enable: torch.compile of the loss (") for x in lay.ignored)


def test_a_config_its_module_does_not_define_is_an_error_naming_its_configs(tmp_path) -> None:
    path = _script(tmp_path, "llama3_8bb", PLAIN_8B)
    with pytest.raises(InputError, match=r"has no config 'llama3_8bb'") as err:
        parse_launch([path])
    assert "llama3_8b, " in str(err.value) and "--config" in str(err.value)
    result = _audit(path, json_out=False)
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_a_module_without_a_table_must_state_what_the_audit_prices(tmp_path) -> None:
    path = tmp_path / "run.sh"
    path.write_text("torchrun --nproc_per_node 8 -m torchtitan.train --module my_models --config mine "
                    "--training.local_batch_size 2\n")
    with pytest.raises(InputError, match=r"named configs of torchtitan 0\.3\.0's own models") as err:
        parse_launch([path])
    assert "--parallelism.tensor_parallel_degree N" in str(err.value)


def test_the_table_is_what_the_generator_reads_from_the_wheel(tmp_path) -> None:
    if not (WHEEL / "torchtitan" / "models").is_dir():
        pytest.skip("no unpacked torchtitan 0.3.0 wheel on this machine")
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "gen", Path(__file__).parents[1] / "benchmarks" / "torchtitan_named_configs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    out = tmp_path / "configs.py"
    gen.main(str(WHEEL), None, out)
    namespace: dict = {}
    exec(out.read_text(), namespace)
    assert namespace["CONFIGS"] == CONFIGS and namespace["DEFAULTS"] == DEFAULTS


def test_the_emitters_config_facts_agree_with_the_table() -> None:
    """emit.torchtitan's FP8_CONFIGS, MXFP8_CONFIGS, CONFIG_RECIPE and COMPILE state what the configs' functions
    set: Float8 converters in the Float8 twins, the MXFP8 one in the MXFP8 twins (which inherit their model's
    batch, sequence and checkpointing: only converters and compile differ), and compile on where they turn it on."""
    from placement.emit.torchtitan import COMPILE, CONFIG_RECIPE, FP8_CONFIGS, MODELS, MXFP8_CONFIGS, loss_compiled

    assert set(CONFIG_RECIPE) <= set(MXFP8_CONFIGS.values()) | {c for cfgs in CONFIGS.values() for c in cfgs
                                                                 if loss_compiled(c)[0]}
    for module, config in MODELS.values():
        for name in {config, FP8_CONFIGS.get(config, config), MXFP8_CONFIGS.get(config, config)}:
            facts = CONFIGS[module][name]
            converters = facts.get("model.converters", ((),))[0]
            assert any(c.startswith("Float8") for c in converters) == (name in FP8_CONFIGS.values()), name
            assert (converters == ("MXFP8LinearConverter",)) == (name in MXFP8_CONFIGS.values()), name
            on = facts.get("compile.enable", DEFAULTS["compile.enable"])[0]
            assert (COMPILE[name] != "off") == on, name
            # the loss runs eagerly (the capability row) unless the config compiles it (its CONFIG_RECIPE row)
            parts = facts.get("compile.components", DEFAULTS["compile.components"])[0]
            eager = dict((f, v) for f, v, _ in CONFIG_RECIPE.get(name, ())).get("loss_eager_float32", True)
            assert eager == (not (on and "loss" in parts)), name
        twin = MXFP8_CONFIGS.get(config)
        if twin is not None:
            own = {k: v[0] for k, v in CONFIGS[module][twin].items() if v[1] == twin}
            assert set(own) == {"model.converters", "model.flavor", "compile.enable", "compile.components"}, own


def test_the_change_list_writes_the_checkpointing_subcommand_as_the_line_takes_it(tmp_path) -> None:
    path = _script(tmp_path, "llama3_8b", STATED_8B)
    data = json.loads(_audit(path).stdout)
    change = next(c for c in data["changes"] if c["argument"] == "activation-checkpoint")
    assert (change["from_arg"], change["to_arg"]) == ("activation-checkpoint:selective", "activation-checkpoint:none")
    text = _audit(path, json_out=False).output
    assert "- activation-checkpoint:selective\n" in text and "+ activation-checkpoint:none\n" in text
    assert "activation-checkpoint selective" not in text


def test_the_best_plan_runs_cuda_graphs_as_torchtitan_does(tmp_path) -> None:
    """The best plan (pp 1, ep 1) is priced with the graph torchtitan 0.3.0 captures by default, and the change list
    does not turn it off; its source says so."""
    data = json.loads(_audit(_script(tmp_path, "llama3_8b", STATED_8B)).stdout)
    best = data["best"]
    assert (best["layout"]["pp"], best["layout"]["ep"], best["recipe"]["cuda_graphs"]) == (1, 1, "full")
    assert best["recipe_sources"]["cuda_graphs"].startswith("searched as torchtitan 0.3.0 runs them")
    assert not [c for c in data["changes"] if c["argument"] == "--training.disable_cuda_graphs"]


def test_a_toml_that_compiles_only_the_loss_says_so(tmp_path) -> None:
    """torchtitan v0.2.2's deepseek_v3_671b.toml sets compile.components = ["loss"]: the note said "torch.compile of
    the model" (a user trial); torchtitan compiles the model only where "model" is among them."""
    from placement.audit.launch import parse_launch

    path = tmp_path / "job.toml"
    path.write_text('[model]\nname = "deepseek_v3"\nflavor = "671B"\n[compile]\nenable = true\n'
                    'components = ["loss"]\n')
    notes = [x for x in parse_launch([path], "torchtitan").ignored if x.startswith("compile.enable")]
    assert notes and notes[0].startswith("compile.enable: torch.compile of the loss (")
