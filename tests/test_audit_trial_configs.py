"""A user trial audited torchtitan TOML configs (llama3 70B with pp 4 and cp 2 on torchtitan's pipeline defaults):
the launched split was priced as placement's, the change list started torchtitan's defaults from placement's
spelling (hiding a first/last_stage_less_layers change the best plan needs), and a TOML of which nothing is read
was priced as a job of defaults.  Each test fails without its fix."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

LLAMA3_70B = Path(__file__).parent / "data" / "audit" / "torchtitan" / "llama3_70b.toml"


def _pp_toml(tmp_path: Path) -> Path:
    """torchtitan's llama3_70b.toml with pp 4 and cp 2 at torchtitan's pipeline defaults (no layers_per_stage,
    first/last_stage_less_layers 1, schedule 1F1B)."""
    text = LLAMA3_70B.read_text()
    for line in ("pipeline_parallel_degree = 1\n", "context_parallel_degree = 1\n"):
        assert line in text
    assert "pipeline_parallel_layers_per_stage" not in text and "stage_less_layers" not in text
    path = tmp_path / "llama3_70b_pp4_cp2.toml"
    path.write_text(text.replace("pipeline_parallel_degree = 1\n", "pipeline_parallel_degree = 4\n")
                    .replace("context_parallel_degree = 1\n", "context_parallel_degree = 2\n"))
    return path


def _audit(*argv: str):
    return CliRunner().invoke(main, ["--reproducible", "audit", *argv])


def test_the_launched_pipeline_is_priced_with_torchtitans_split(tmp_path: Path) -> None:
    """80 layers + the embedding's and the output's weight of 1 each over 4 stages: 82 = 4 x 20 + 2, the first two
    stages one more, the first and the last one fewer: 20/21/20/19 (generate_llm_fqn_per_model_part)."""
    out = _audit("--launch", str(_pp_toml(tmp_path)), "--model", "llama3-70b", "--gpus", "256", "--json")
    assert out.exit_code in (0, 1), out.output[-1500:]
    data = json.loads(out.stdout)
    assert data["estimate"]["layout"]["rank_layers"] == [20, 21, 20, 19]
    assert "20/21/20/19 per stage" in data["estimate"]["recipe_sources"]["pipeline_layout"]
    # the best plan searches its own split: the launched one is no recipe choice to keep
    assert data["best"]["recipe"]["pipeline_layout"] is None


def test_a_change_from_a_torchtitan_default_starts_from_it(tmp_path: Path) -> None:
    """The best plan (pp 8, vpp 10, layers_per_stage 1) needs first/last_stage_less_layers 0: the files leave them
    at torchtitan's 1, which with layers_per_stage 1 gives 82 stages that torchtitan refuses over pp 8."""
    out = _audit("--launch", str(_pp_toml(tmp_path)), "--model", "llama3-70b", "--gpus", "256", "--json")
    changes = {c["argument"]: c for c in json.loads(out.stdout)["changes"]}
    stage = changes.get("parallelism.pipeline_parallel_layers_per_stage")
    if stage is not None and stage["to"] == "1":
        for key in ("first", "last"):
            change = changes[f"parallelism.pipeline_parallel_{key}_stage_less_layers"]
            assert change["from"] == "1" and change["to"] == "0"
            assert change["note"] == "not in the launch files: torchtitan's default"
    schedule = changes["parallelism.pipeline_parallel_schedule"]
    assert schedule["from"] == '"1F1B"'


def test_a_toml_of_which_nothing_is_read_is_an_error(tmp_path: Path) -> None:
    for name, text in (("empty.toml", ""), ("other.toml", "[foo]\nbar = 1\n")):
        path = tmp_path / name
        path.write_text(text)
        out = _audit("--launch", str(path), "--model", "llama3-8b", "--gpus", "64")
        assert out.exit_code == 2
        assert f"{path}: no torchtitan key read" in out.output and "Traceback" not in out.output


MAXTEXT_SCRIPT = ("#!/bin/bash\npython3 -m maxtext.trainers.pre_train.train "
                  "${MAXTEXT_CONFIGS_DIR:-$PWD/src/maxtext/configs}/models/llama3.1_405b.yml run_name=x "
                  "base_config=base.yml per_device_batch_size=1 max_target_length=8192 dcn_fsdp_parallelism=128 "
                  "ici_fsdp_parallelism=8 remat_policy=full\n")
MAXTEXT_MODEL = ("# model config for llama3.1-405b (MaxText configs/models/llama3.1-405b.yml)\nbase_emb_dim: 16384\n"
                 "base_num_query_heads: 128\nbase_num_kv_heads: 8\nbase_num_decoder_layers: {layers}\n"
                 "base_mlp_dim: 53248\nhead_dim: 128\nvocab_size: 128256\ndecoder_block: \"llama2\"\n")


def test_a_maxtext_model_config_is_read_and_its_shape_checked(tmp_path: Path) -> None:
    """MaxText's GPU recipe scripts train a model config (configs/models/<name>.yml, decoder_block and base_* keys,
    no parallelism): the audit asked for it, then refused it as no MaxText config; a 70B one beside --model
    llama3-405b would have been priced as the 405B."""
    script = tmp_path / "128vm.sh"
    script.write_text(MAXTEXT_SCRIPT)
    model = tmp_path / "llama3.1_405b.yml"
    model.write_text(MAXTEXT_MODEL.format(layers=126))
    out = _audit("--launch", str(script), "--launch", str(model), "--model", "llama3-405b", "--gpus", "1024")
    assert out.exit_code in (0, 1), out.output[-800:]
    assert "audit of a maxtext launch" in out.stdout
    model.write_text(MAXTEXT_MODEL.format(layers=80))
    out = _audit("--launch", str(script), "--launch", str(model), "--model", "llama3-405b", "--gpus", "1024")
    assert out.exit_code == 2 and "num_layers = 80" in out.output and "base_num_decoder_layers: 80" in out.output
