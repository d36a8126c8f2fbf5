"""The recipe a Megatron-Bridge ConfigContainer YAML states, read as Megatron-Bridge runs it: the dispatcher,
recompute modules, CUDA graphs, FP8 recipe and parameters, overlaps and fusions, with a mixed_precision section's
fields over the model's and a comm_overlap section's set values over both.  Before, only the layout, batch,
precision, gradient width and DP overlap were read and the rest priced at Megatron-LM's defaults (a user trial:
GPT-OSS 120B priced with the allgather dispatcher and core_attn recompute its file does not run).

Expected values come from the YAML itself (yaml.safe_load), not from the reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from placement.audit.launch import parse_launch
from placement.cli import main
from placement.errors import InputError

BR = Path(__file__).parent / "data" / "audit" / "bridge"
OSS = BR / "gpt_oss_120b_pretrain_h100_fp8_mx_v1.yaml"
L70 = BR / "llama3_70b_sft_gb200_fp8_mx_v1.yaml"


def _cfg(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_the_moe_recipe_of_the_file_is_read_with_its_lines() -> None:
    cfg, lay = _cfg(OSS), parse_launch([OSS])
    model = cfg["model"]
    assert lay.recipe["moe_dispatcher"] == model["moe_token_dispatcher_type"] == "alltoall"
    assert tuple(lay.recipe["recompute_modules"]) == tuple(model["recompute_modules"])
    assert lay.recipe["moe_fusions"] is model["moe_permute_fusion"]
    assert lay.recipe["cross_entropy_fusion"] is model["cross_entropy_loss_fusion"]
    assert lay.recipe["tp_comm_overlap"] is model["tp_comm_overlap"]
    assert "moe_token_dispatcher_type: alltoall" in lay.sources["recipe.moe_dispatcher"]
    # force-balanced routing is a benchmark setting, priced as it runs (as the Megatron-LM flag): balanced
    assert model["moe_router_force_load_balancing"] is True
    assert lay.recipe["routing_imbalance"] == 1.0
    assert "moe_router_force_load_balancing: true" in lay.sources["recipe.routing_imbalance"]
    assert not any(n.startswith("moe_router_force_load_balancing") for n in lay.ignored)


def test_mixed_precision_overwrites_the_models_fp8_fields() -> None:
    """model.fp8_recipe is delayed and model.fp8_param false, but Megatron-Bridge copies the mixed_precision
    section's mxfp8 and fp8_param true over them (update_config_with_precision_overrides)."""
    cfg, lay = _cfg(L70), parse_launch([L70])
    mp, model = cfg["mixed_precision"], cfg["model"]
    assert (model["fp8_recipe"], mp["fp8_recipe"]) == ("delayed", "mxfp8")
    assert (model["fp8_param"], mp["fp8_param"]) == (False, True)
    assert lay.precision == "fp8"
    assert lay.recipe["fp8_recipe"] == "mxfp8" and lay.recipe["fp8_params"] is True
    assert "fp8_recipe: mxfp8" in lay.sources["recipe.fp8_recipe"]
    # cuda_graph_impl transformer_engine with scope [mlp]: per-layer graphs, the recipe's partial
    assert model["cuda_graph_impl"] == "transformer_engine" and model["cuda_graph_scope"] == ["mlp"]
    assert lay.recipe["cuda_graphs"] == "partial"


@pytest.mark.parametrize(("text", "fp8", "recipe", "params"), [
    ("mixed_precision: bf16_with_mxfp8_mixed\n", "fp8", "mxfp8", True),
    ("mixed_precision: bf16_with_fp8_delayed_scaling_mixed\n", "fp8", "tensorwise", True),
    ("mixed_precision: bf16_with_fp8_subchannel_scaling_mixed\n", "fp8", "blockwise", False),
    ("mixed_precision: bf16_with_fp8_current_scaling_mixed\n", "fp8", "tensorwise", True),
    # a section whose fp8 is null overwrites the model's: a BF16 run
    ("model:\n  fp8: hybrid\nmixed_precision:\n  fp8: null\n  bf16: true\n", "bf16", None, None),
    ("model:\n  fp8: hybrid\n  fp8_recipe: blockwise\n", "fp8", "blockwise", None),
])
def test_named_and_section_fp8_recipes(tmp_path: Path, text: str, fp8: str, recipe, params) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(("model:\n  tensor_model_parallel_size: 2\n" + text) if not text.startswith("model:")
                    else text + "  tensor_model_parallel_size: 2\n", encoding="utf-8")
    lay = parse_launch([path])
    assert lay.precision == fp8
    assert lay.recipe.get("fp8_recipe") == recipe and lay.recipe.get("fp8_params") == params


def test_a_comm_overlap_section_decides_the_overlaps(tmp_path: Path) -> None:
    """Megatron-Bridge's CommOverlapConfig starts each overlap off and takes the section's set values over it,
    whatever the model section says (comm_overlap.py _get_model_comm_overlap_cfgs, _override_user_cfgs,
    _apply_cfgs); TP overlap needs TP 2 and sequence parallelism."""
    path = tmp_path / "cfg.yaml"
    # a saved ConfigContainer (its model has a _target_): each section is whole, a field it leaves out its default
    path.write_text("model:\n  _target_: megatron.bridge.models.Llama3ModelProvider\n  tensor_model_parallel_size: 2\n"
                    "  sequence_parallel: true\n  tp_comm_overlap: false\n"
                    "  delay_wgrad_compute: true\ncomm_overlap:\n  tp_comm_overlap: true\n"
                    "  delay_wgrad_compute: null\n", encoding="utf-8")
    lay = parse_launch([path])
    assert lay.recipe["tp_comm_overlap"] is True
    assert lay.sources["recipe.tp_comm_overlap"].endswith(":8: tp_comm_overlap: true")
    # the section's null is off, not the model's true
    assert lay.recipe["delay_wgrad"] is False and "_get_model_comm_overlap_cfgs" in lay.sources["recipe.delay_wgrad"]
    path.write_text("model:\n  _target_: x\n  tensor_model_parallel_size: 2\n  sequence_parallel: false\n"
                    "comm_overlap:\n  tp_comm_overlap: true\n", encoding="utf-8")
    assert parse_launch([path]).recipe["tp_comm_overlap"] is False  # no sequence parallelism: Bridge turns it off
    path.write_text("model:\n  tensor_model_parallel_size: 2\n  delay_wgrad_compute: true\n", encoding="utf-8")
    assert parse_launch([path]).recipe["delay_wgrad"] is True  # no section: the model's


def test_the_distributed_optimizer_overlaps_dp_under_a_comm_overlap_section() -> None:
    """The 70B SFT file: ddp.overlap_grad_reduce false, comm_overlap.overlap_grad_reduce null, the distributed
    optimizer on: Megatron-Bridge turns the overlap on when DP > 1 (comm_overlap.py _get_optimizer_overlap_cfgs)."""
    cfg, lay = _cfg(L70), parse_launch([L70])
    assert cfg["ddp"]["overlap_grad_reduce"] is False and cfg["comm_overlap"]["overlap_grad_reduce"] is None
    assert cfg["ddp"]["use_distributed_optimizer"] is True
    assert lay.recipe["dp_overlap"] is True and "_get_optimizer_overlap_cfgs" in lay.sources["recipe.dp_overlap"]


@pytest.mark.parametrize(("text", "precision", "params"), [
    # the section leaves fp8 out: its default None overwrites the model's hybrid (a BF16 run)
    ("model:\n  fp8: hybrid\n  fp8_recipe: blockwise\nmixed_precision:\n  bf16: true\n", "bf16", None),
    # fp8_param_gather is set after fp8_param: it decides
    ("mixed_precision:\n  fp8: hybrid\n  fp8_param: true\n  fp8_param_gather: false\n", "fp8", False),
])
def test_a_mixed_precision_section_copies_its_defaults_too(tmp_path: Path, text: str, precision: str, params) -> None:
    path = tmp_path / "cfg.yaml"
    tp = "model:\n  _target_: x\n  tensor_model_parallel_size: 2\n"  # a saved ConfigContainer: sections whole
    path.write_text(text.replace("model:\n", tp) if text.startswith("model:") else tp + text, encoding="utf-8")
    lay = parse_launch([path])
    assert lay.precision == precision and lay.recipe.get("fp8_params") == params


def test_named_recipes_as_megatron_bridge_takes_them(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("model:\n  tensor_model_parallel_size: 2\nmixed_precision: bf16-with-mxfp8-mixed\n",
                    encoding="utf-8")
    assert parse_launch([path]).recipe["fp8_recipe"] == "mxfp8"  # a hyphenated name, as get_mixed_precision_config
    path.write_text("model:\n  tensor_model_parallel_size: 2\nmixed_precision: bf16_with_fp8_current_scaling_mixed\n",
                    encoding="utf-8")
    lay = parse_launch([path])
    assert lay.recipe["fp8_recipe"] == "tensorwise" and any("first and last 1" in n for n in lay.ignored)
    path.write_text("model:\n  tensor_model_parallel_size: 2\nmixed_precision: bf16_with_fp9_mixed\n", encoding="utf-8")
    with pytest.raises(InputError, match="is no Megatron-Bridge recipe"):
        parse_launch([path])


def test_a_dispatcher_megatron_does_not_have_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("model:\n  num_moe_experts: 8\n  moe_token_dispatcher_type: ring\n", encoding="utf-8")
    with pytest.raises(InputError, match="moe_token_dispatcher_type must be alltoall, allgather or flex, got 'ring'"):
        parse_launch([path])


def test_the_audit_prices_what_the_file_runs() -> None:
    """The 70B SFT file keeps FP8 parameters (1 byte) under MXFP8: the weights priced are the FP8 copy, so the audit's
    memory falls against the same layout priced at Megatron's defaults."""
    common = ["--model", "llama3-70b", "--cluster", "gb200-nvl72", "--gpus", "32"]
    out = CliRunner().invoke(main, ["audit", "--launch", str(L70), *common, "--json"])
    assert out.exit_code in (0, 1), out.output
    audited = json.loads(out.stdout)["estimate"]
    assert audited["recipe"]["fp8_params"] is True and audited["recipe"]["fp8_recipe"] == "mxfp8"
    lay = audited["layout"]
    plain = CliRunner().invoke(main, ["evaluate", *common, "--seq-len", "4096", "--global-batch", "32",
                                      "--precision", "fp8", "--tp", str(lay["tp"]), "--pp", str(lay["pp"]),
                                      "--vpp", str(lay["vpp"]), "--mbs", str(lay["micro_batch_size"]), "--zero", "1",
                                      "--json"])
    assert plain.exit_code == 0, plain.output
    assert audited["memory"]["weights_bytes"] < json.loads(plain.stdout)["memory"]["weights_bytes"]


def _flat(cfg: dict) -> dict[str, object]:
    return {f"{section}.{k}": v for section, table in cfg.items() if isinstance(table, dict) for k, v in table.items()}


def _yaml_word(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


@pytest.mark.parametrize(("path", "common"), [
    (L70, ["--model", "llama3-70b", "--cluster", "gb200-nvl72", "--gpus", "32"]),
    (OSS, ["--model", "gpt-oss-120b", "--cluster", "dgx-h100", "--gpus", "64"]),
])
def test_the_change_list_speaks_the_configs_own_keys(path: Path, common: list[str]) -> None:
    """Each change names a `section.key` the YAML states, its launched value as the YAML has it; no change repeats
    what the YAML already states, and the global batch the YAML states is not reported as left to the framework."""
    out = CliRunner().invoke(main, ["audit", "--launch", str(path), *common, "--json"])
    assert out.exit_code in (0, 1), out.output
    changes = json.loads(out.stdout)["changes"]
    flat = _flat(_cfg(path))
    assert changes
    for c in changes:
        if c["argument"].startswith("--"):  # no field of the flag's name in the config: said so
            assert "states no field of this name" in c["note"]
            continue
        if c["argument"].startswith("env "):  # the launcher's environment, said so
            assert "not a config field" in c["note"] or "not in the launch files" in c["note"], c
            continue
        assert c["argument"] in flat, c
        assert c["from"] == _yaml_word(flat[c["argument"]]) and c["to"] != c["from"], c
    assert not any("global" in c["argument"] for c in changes)
    named = {c["argument"] for c in changes}
    # both copies of a field Megatron-Bridge keeps twice change together
    for field in ("use_distributed_optimizer", "use_megatron_fsdp"):
        sides = {k for k in named if k.endswith(f".{field}")}
        assert not sides or sides == {k for k in flat if k.endswith(f".{field}")}


def test_the_change_list_writes_a_full_iteration_graph_in_the_configs_api() -> None:
    """The 70B file has no cuda_graph_modules (the older megatron-core API): a full-iteration graph is impl local
    with scope [full_iteration], as Megatron-Bridge's set_full_iteration_cuda_graph writes it; a dtype field is
    written as the YAML spells dtypes."""
    out = CliRunner().invoke(main, ["audit", "--launch", str(L70), "--model", "llama3-70b", "--cluster", "gb200-nvl72",
                                    "--gpus", "32", "--json"])
    changes = {c["argument"]: c for c in json.loads(out.stdout)["changes"]}
    assert "model.cuda_graph_modules" not in _flat(_cfg(L70))
    assert changes["model.cuda_graph_impl"]["to"] == "local"  # the best plan graphs the whole iteration
    assert changes["model.cuda_graph_scope"]["to"] == "[full_iteration]"
    dtypes = [c for k, c in changes.items() if k.endswith("_dtype")]
    assert all(c["to"].startswith("{_call_: false, _target_: torch.") for c in dtypes)


def test_a_model_sequence_other_than_the_finetuning_datasets_does_not_start(tmp_path) -> None:
    """Megatron-Bridge asserts model.seq_length equals the dataset's (`dataset.seq_length` of a finetuning config,
    ConfigContainer.validate): an SFT config of model 16384 and dataset 4096 was priced at 16384 with no word."""
    from placement.audit.launch import parse_launch
    from placement.errors import InputError

    path = tmp_path / "sft.yaml"
    path.write_text("model:\n  tensor_model_parallel_size: 1\n  seq_length: 16384\ndataset:\n  seq_length: 4096\n"
                    "train:\n  micro_batch_size: 1\n  global_batch_size: 8\n")
    with pytest.raises(InputError, match=r"Megatron-Bridge asserts model\.seq_length equals the dataset's"):
        parse_launch([path])
    path.write_text(path.read_text().replace("seq_length: 4096", "seq_length: 16384"))
    assert parse_launch([path]).seq_len == 16384


def test_a_saved_sections_fp4_is_said_as_not_priced(tmp_path: Path) -> None:
    """A user trial: a saved NVFP4 config (its mixed_precision section's fp4: e2m1, fp4_recipe: nvfp4) was read as
    plain BF16 with nothing said; a recipe name that means NVFP4 was already said."""
    text = OSS.read_text(encoding="utf-8")
    assert "  fp4: null\n  fp4_recipe: nvfp4\n" in text
    path = tmp_path / "nvfp4.yaml"
    path.write_text(text.replace("  fp4: null\n  fp4_recipe: nvfp4\n", "  fp4: e2m1\n  fp4_recipe: nvfp4\n", 1))
    said = [x for x in parse_launch([path]).ignored if x.startswith("mixed_precision fp4")]
    assert said and "e2m1 (nvfp4): FP4 GEMMs, not modelled: priced as bf16" in said[0]
    assert not any(x.startswith("mixed_precision fp4") for x in parse_launch([OSS]).ignored)  # fp4: null


def test_a_pipeline_layout_written_as_a_list_is_read_and_priced(tmp_path: Path) -> None:
    """Megatron-Bridge writes DeepSeek-V3's layout as a list of stages, each a list of layer names
    (recipes/deepseek/deepseek_v3.py), which Megatron-Core takes too; a user trial's saved config was refused, its
    list parsed as text ("unknown characters '[', ']'")."""
    from placement.audit.readers.megatron import layout_text

    stages = [["embedding", "decoder", "decoder"], ["decoder", "decoder"], ["decoder", "mtp", "loss"]]
    assert layout_text(stages, "x") == "Ett|tt|tmL"
    assert layout_text("Et*2|tt|tmL", "x") == "Et*2|tt|tmL"
    with pytest.raises(InputError, match="names encoder, which placement does not price"):
        layout_text([["encoder", "decoder"]], "x")
    cfg = _cfg(L70)
    cfg["model"]["pipeline_model_parallel_size"] = 2
    cfg["model"]["virtual_pipeline_model_parallel_size"] = None
    half = cfg["model"]["num_layers"] // 2
    cfg["model"]["pipeline_model_parallel_layout"] = [["embedding", *["decoder"] * half],
                                                     [*["decoder"] * half, "loss"]]
    path = tmp_path / "listed.yaml"
    path.write_text(yaml.safe_dump(cfg))
    lay = parse_launch([path])
    assert lay.recipe["pipeline_layout"] == f"E{'t' * half}|{'t' * half}L"
    assert (lay.first_stage_layers, lay.last_stage_layers) == (half, half)


def test_packed_sequences_keep_the_best_plan_at_micro_batch_1() -> None:
    """Megatron-Bridge refuses a micro-batch above 1 with packed sequences (training/config.py:1194-1212); a user
    trial's audit of a packed SFT config proposed micro-batch 2."""
    lay = parse_launch([L70])
    assert lay.micro_batch_one and "packed sequences" in lay.micro_batch_one
    res = CliRunner().invoke(main, ["audit", "--launch", str(L70), "--model", "llama3-70b", "--cluster", "gb200-nvl72",
                                    "--gpus", "32", "--json"])
    assert res.exit_code in (0, 1), res.output
    best = json.loads(res.stdout)["best"]
    assert best["layout"]["micro_batch_size"] == 1
    assert parse_launch([OSS]).micro_batch_one is None  # no packing


def test_a_comm_overlap_section_overlaps_an_interleaved_pipelines_transfers(tmp_path: Path) -> None:
    """Megatron-Bridge's comm_overlap section turns overlap_p2p_comm on whenever there are virtual stages
    (training/comm_overlap.py); a config without the section runs the model's field, megatron-core's default off."""
    cfg = _cfg(L70)
    assert cfg["model"]["virtual_pipeline_model_parallel_size"] > 1 and "comm_overlap" in cfg
    lay = parse_launch([L70])
    assert lay.recipe["pp_comm_overlap"] is True and "comm_overlap" in lay.sources["recipe.pp_comm_overlap"]
    del cfg["comm_overlap"]
    bare = tmp_path / "no_comm_overlap.yaml"
    bare.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    lay = parse_launch([bare])
    assert lay.recipe["pp_comm_overlap"] is False
    assert "overlap_p2p_comm: false" in lay.sources["recipe.pp_comm_overlap"]  # the model's own field
    del cfg["model"]["overlap_p2p_comm"]
    bare.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    lay = parse_launch([bare])
    assert lay.recipe["pp_comm_overlap"] is False
    assert "ModelParallelConfig.overlap_p2p_comm, default False" in lay.sources["recipe.pp_comm_overlap"]


def test_a_comm_overlap_section_that_turns_the_pipeline_overlap_off_wins(tmp_path: Path) -> None:
    """_override_user_cfgs puts the section's own overlap_p2p_comm over the vp > 1 default (a review)."""
    cfg = _cfg(L70)
    cfg["comm_overlap"]["overlap_p2p_comm"] = False
    path = tmp_path / "off.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    lay = parse_launch([path])
    assert lay.recipe["pp_comm_overlap"] is False
    assert "overlap_p2p_comm: false" in lay.sources["recipe.pp_comm_overlap"]


@pytest.mark.parametrize(("section", "field", "written", "truth"), [
    ("model", "sequence_parallel", '"false"', "true"),
    ("model", "tp_comm_overlap", '"true"', "true"),
    ("comm_overlap", "tp_comm_overlap", "1", "true"),
    ("ddp", "use_distributed_optimizer", '"no"', "true"),
    ("mixed_precision", "fp8_param_gather", '""', "false"),
])
def test_a_boolean_field_written_as_text_or_a_number_is_refused(tmp_path: Path, section: str, field: str,
                                                                written: str, truth: str) -> None:
    """Megatron-Bridge merges its YAML into an untyped OmegaConf config and passes `"false"` on as a string, which
    Megatron-Core's `if` takes as true: reading it as false, or as unset (the reader did both: bool("false") for
    sequence_parallel, nothing for tp_comm_overlap), priced a job that does not run.  The refusal names the line,
    the key, the value, how an `if` reads it and the fix; the same field unquoted is read."""
    head = "model:\n  tensor_model_parallel_size: 2\n  seq_length: 4096\n"
    body = f"{section}:\n  {field}: {written}\n"
    path = tmp_path / "cfg.yaml"
    path.write_text(head + body if section != "model" else head + f"  {field}: {written}\n", encoding="utf-8")
    value = yaml.safe_load(path.read_text(encoding="utf-8"))[section][field]
    assert not isinstance(value, bool)
    with pytest.raises(InputError) as err:
        parse_launch([path])
    text = str(err.value)
    line = path.read_text(encoding="utf-8").splitlines().index(f"  {field}: {written}") + 1
    assert f"{path}:{line}: {field}: {written}: {section}.{field} is {value!r}" in text
    assert f"takes as {truth}" in text and f"write {field} as true or false, unquoted" in text
    out = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "llama3-70b", "--cluster", "dgx-h100",
                                    "--gpus", "64"])
    assert out.exit_code == 2 and "Traceback" not in out.output and f"{section}.{field}" in out.output
    # the same field as a YAML boolean is read (sequence_parallel true keeps the TP overlap fields alive)
    unquoted = "false" if truth == "false" else "true"
    path.write_text((head + "  sequence_parallel: true\n" if field != "sequence_parallel" else head)
                    + (f"  {field}: {unquoted}\n" if section == "model" else body.replace(written, unquoted)),
                    encoding="utf-8")
    parse_launch([path])


def test_every_boolean_key_the_bridge_reader_tests_is_checked() -> None:
    """Each `section.field` the reader takes as a boolean (an isinstance(..., bool) or truth test in its source) is
    in the set the check covers, so a new one cannot be read past the refusal."""
    import re

    from placement.audit.readers import megatron
    source = Path(megatron.__file__).read_text(encoding="utf-8")
    bridge = source[source.index("def bridge_settings"):source.index("def hydra_overrides")]
    tested = set(re.findall(r'keys(?:\.get\(|\[)"([a-z_]+\.[a-z_0-9]+)"', bridge))
    tested |= {f"model.{n}" for n in re.findall(r'_bridge_value\(keys, "([a-z_0-9]+)"\)', bridge)}
    not_bool = {"model.virtual_pipeline_model_parallel_size", "model.recompute_granularity", "model.num_moe_experts",
                "model.pipeline_model_parallel_layout", "ddp.data_parallel_sharding_strategy",
                "dataset.packed_sequence_specs", "model.fp8", "model.fp8_recipe", "model.fp4", "model.fp4_recipe",
                "model.recompute_modules", "model.mtp_num_layers", "model.moe_token_dispatcher_type",
                "model.moe_flex_dispatcher_backend", "model.moe_expert_capacity_factor", "model.cuda_graph_impl",
                "model.cuda_graph_scope", "model.cuda_graph_modules", "model.seq_length",
                "model.num_layers_at_start_in_bf16", "model.num_layers_at_end_in_bf16", "ddp.bucket_size",
                "comm_overlap.bucket_size", "model.experimental_attention_variant", "checkpoint.ckpt_format",
                "ddp.megatron_fsdp_version"}
    assert tested - not_bool <= megatron.BRIDGE_BOOL_KEYS, sorted(tested - not_bool - megatron.BRIDGE_BOOL_KEYS)


def test_overrides_merge_into_the_recipes_sections(tmp_path: Path) -> None:
    """Hydra overrides (and an override YAML) merge into the recipe's own sections (training/utils/omegaconf_utils.py
    OmegaConf.merge): a comm_overlap override of one field leaves the recipe's others, which placement does not see.
    A user trial: `comm_overlap.overlap_p2p_comm=false` over a recipe whose CommOverlapConfig turns TP overlap on was
    read as TP overlap off, and the change list advised turning it on."""
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node=8 --nnodes=4 scripts/training/run_recipe.py --recipe "
                      "llama3_70b_pretrain_32gpu_h100_bf16_config model.tensor_model_parallel_size=4 "
                      "model.pipeline_model_parallel_size=4 model.virtual_pipeline_model_parallel_size=5 "
                      "model.sequence_parallel=true train.global_batch_size=512 train.micro_batch_size=1 "
                      "ddp.use_distributed_optimizer=true comm_overlap.overlap_p2p_comm=false\n", encoding="utf-8")
    lay = parse_launch([script])
    assert lay.recipe["pp_comm_overlap"] is False  # what the override sets
    for field in ("tp_comm_overlap", "dp_overlap", "param_gather_overlap", "align_param_gather"):
        assert field not in lay.recipe, field  # left to the recipe: not read as off, nor as a section default


def test_either_configs_param_gather_overlap_turns_both_on(tmp_path: Path) -> None:
    """_validate_and_sync_distributed_optimizer_settings: optimizer.overlap_param_gather true beside ddp's false is
    on in both (a user trial: read as off, with a finding and a change to turn it on)."""
    path = tmp_path / "cfg.yaml"
    path.write_text("model:\n  _target_: x\n  tensor_model_parallel_size: 2\nddp:\n  use_distributed_optimizer: false\n"
                    "  overlap_grad_reduce: true\n  overlap_param_gather: false\noptimizer:\n"
                    "  use_distributed_optimizer: true\n  overlap_param_gather: true\n", encoding="utf-8")
    lay = parse_launch([path])
    assert lay.zero_stage == 1 and lay.recipe["param_gather_overlap"] is True
    assert "_validate_and_sync_distributed_optimizer_settings" in lay.sources["recipe.param_gather_overlap"]


@pytest.mark.parametrize("flags", ["-sl 8192 -mb 1 -gb 128 -tp 4 -pp 2 -cp 1",
                                   "--seq_length 8192 --micro_batch_size 1 --global_batch_size=128 "
                                   "--tensor_model_parallel_size 4 --pipeline_model_parallel_size 2",
                                   "-tp 4 -pp 2 -mb 1 -gb 128 model.seq_length=4096 dataset.seq_length=8192"])
def test_run_recipe_convenience_flags_are_its_overrides(tmp_path: Path, flags: str) -> None:
    """scripts/training/run_recipe.py turns -tp/-pp/-gb/-mb/-sl (and their long forms) into ConfigContainer overrides
    and sets the model's sequence to the dataset's before validation; a user trial's were dropped (tp 1, the
    recipe's batch) or refused ("--seq_length expects one value"; model and dataset sequences "do not start")."""
    script = tmp_path / "run.sh"
    script.write_text(f"torchrun --nproc_per_node=8 --nnodes=2 scripts/training/run_recipe.py --model llama3_70b "
                      f"--mode pretrain {flags} model.sequence_parallel=true\n", encoding="utf-8")
    lay = parse_launch([script])
    assert (lay.framework, lay.tp, lay.pp, lay.micro_batch_size, lay.global_batch, lay.seq_len) == (
        "megatron", 4, 2, 1, 128, 8192)
    assert "run.sh:1" in lay.sources["tp"]


MXFP8_SECTION = ("model:\n  _target_: x\n  tensor_model_parallel_size: 2\nmixed_precision:\n  _target_: y\n"
                 "  fp8: hybrid\n  fp8_recipe: mxfp8\n  fp8_param_gather: true\n")


def test_mxfp8_weight_gathers_need_the_gradient_buffer_reused(tmp_path: Path) -> None:
    """ConfigContainer.validate asserts reuse_grad_buf_for_mxfp8_param_ag under fp8_param_gather with mxfp8 and no
    Megatron-FSDP; a saved section that leaves it out has MixedPrecisionConfig's False: a job that does not start
    (a user trial: priced at 11.0 s)."""
    path = tmp_path / "cfg.yaml"
    path.write_text(MXFP8_SECTION, encoding="utf-8")
    with pytest.raises(InputError, match="reuse_grad_buf_for_mxfp8_param_ag must be set to True"):
        parse_launch([path])
    path.write_text(MXFP8_SECTION + "  reuse_grad_buf_for_mxfp8_param_ag: true\n", encoding="utf-8")
    assert parse_launch([path]).recipe["fp8_recipe"] == "mxfp8"


def test_a_sections_bf16_first_and_last_layers_are_said(tmp_path: Path) -> None:
    """Bridge's fp8-cs recipes save first_last_layers_bf16 with 2 layers at each end in their mixed_precision section,
    which the step prices as FP8: said among what is not modelled, as the named recipes' are."""
    path = tmp_path / "cfg.yaml"
    path.write_text("model:\n  _target_: x\n  tensor_model_parallel_size: 2\nmixed_precision:\n  fp8: hybrid\n"
                    "  fp8_recipe: tensorwise\n  first_last_layers_bf16: true\n  num_layers_at_start_in_bf16: 2\n"
                    "  num_layers_at_end_in_bf16: 2\n", encoding="utf-8")
    lay = parse_launch([path])
    (note,) = [n for n in lay.ignored if n.startswith("first_last_layers_bf16")]
    assert "first 2 and last 2" in note and "priced as FP8" in note
    assert "cfg.yaml:7: first_last_layers_bf16: true" in note


@pytest.mark.parametrize(("section", "field", "written"), [
    ("model", "tensor_model_parallel_size", '"2"'),
    ("model", "pipeline_model_parallel_size", "'1'"),
    ("train", "global_batch_size", '"64"'),
])
def test_a_degree_or_batch_written_as_text_is_refused(tmp_path: Path, section: str, field: str, written: str) -> None:
    """A QA run: `tensor_model_parallel_size: "2"` was priced at tp 2, but Megatron-Bridge passes the string on as
    written (its YAML merge is untyped) and its data-parallel size fails on it (training/config.py:1019-1027: "2" * 1
    * 1 is "2", and world_size % "2" a TypeError): the job does not start.  Unquoted, the same value is read."""
    rows = {"model": {"tensor_model_parallel_size": "2", "pipeline_model_parallel_size": "1", "seq_length": "4096"},
            "train": {"global_batch_size": "64", "micro_batch_size": "1"}}
    rows[section][field] = written
    path = tmp_path / "cfg.yaml"
    path.write_text("".join(f"{s}:\n" + "".join(f"  {k}: {v}\n" for k, v in kv.items()) for s, kv in rows.items()),
                    encoding="utf-8")
    assert isinstance(yaml.safe_load(path.read_text(encoding="utf-8"))[section][field], str)
    out = CliRunner().invoke(main, ["audit", "--launch", str(path), "--model", "llama3-70b", "--cluster", "dgx-h100",
                                    "--gpus", "64"])
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    line = path.read_text(encoding="utf-8").splitlines().index(f"  {field}: {written}") + 1
    assert f"{path}:{line}: {field}: {written}: {section}.{field} is " in out.output
    bare = written.strip("\"'")
    assert "does not start" in out.output and f"write {field}: {bare} unquoted" in out.output
    path.write_text(path.read_text(encoding="utf-8").replace(f"{field}: {written}", f"{field}: {bare}"),
                    encoding="utf-8")
    assert parse_launch([path]) is not None


@pytest.mark.parametrize("word", ["no", "off", "yes", "On"])
def test_a_hydra_override_of_yes_or_no_is_a_string_as_hydra_reads_it(tmp_path: Path, word: str) -> None:
    """A QA run: run_recipe.py's `model.sequence_parallel=no` was priced as sequence parallelism off (PyYAML's YAML 1.1
    reads no as false), but Hydra's override grammar types only true and false as booleans (OverrideLexer.g4 BOOL),
    so Megatron-Bridge passes "no" on and Megatron-Core's `if` takes it as true.  It is refused as the same word in
    a YAML string is; true and false, in any case, are read."""
    script = tmp_path / "run.sh"
    line = ("torchrun --nproc_per_node 8 scripts/training/run_recipe.py --recipe llama3_8b_pretrain_config "
            "model.tensor_model_parallel_size=2 train.global_batch_size=64 model.sequence_parallel={}\n")
    script.write_text(line.format(word), encoding="utf-8")
    out = CliRunner().invoke(main, ["audit", "--launch", str(script), "--model", "llama3-8b", "--gpus", "8"])
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    assert f"model.sequence_parallel is {word!r}, a string, which an `if` test takes as true" in out.output
    for spelled, truth in (("False", False), ("TRUE", True)):
        script.write_text(line.format(spelled), encoding="utf-8")
        assert parse_launch([script]).sequence_parallel is truth
