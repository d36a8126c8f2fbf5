"""GPT-NeoX-style models.  A parallel residual (GPT-J, GPT-NeoX `gpt_j_residual`) sums the attention and MLP
outputs before one TP all-reduce: one forward all-reduce per layer instead of two, the backward's two unchanged.
Priced where the files run it (GPT-NeoX's configs, DeepSpeed with the user's model code); Megatron-Core's,
torchtitan's and MaxText's own layers run the model in sequence, and their plans, files and audits price that.
Their RoPE on part of each head is stated to Megatron."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from placement.calibration.validate import load_runs, predict
from placement.catalog import load_model
from placement.cli import main

NEOX = Path(__file__).parent / "data" / "audit" / "neox" / "20B.yml"
ROW = {r.id: r for r in load_runs()}["gpt-neox-20b-96xa100"]
JOB = ["--model", "gpt-neox-20b", "--cluster", "gpt-neox-a100-40g", "--gpus", "96"]
LAYOUT = ["--tp", "2", "--pp", "4", "--mbs", "4", "--recompute", "full", "--zero", "1", "--no-sequence-parallel"]


def _cli(*args: str) -> dict:
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_the_neox_row_runs_its_parallel_residual_with_four_tp_all_reduces_per_layer(tmp_path: Path) -> None:
    """GPT-NeoX-20B under full recompute: 1 forward + 1 recomputed forward + 2 backward all-reduces per layer
    against 2 + 2 + 2 in sequence, so its TP time is 4/6 of the sequential model's and the row's step shorter by
    the difference, and by the bubble's share of it: (32 + 4 - 1) / 32 micro-batch times (nothing overlaps TP)."""
    model = load_model(ROW.model)
    assert model.parallel_residual
    sequential_model = model.model_copy(update={"parallel_residual": False})
    saved = predict(ROW, model=sequential_model).predicted_step_time_s - predict(ROW).predicted_step_time_s
    yaml = tmp_path / "sequential.yaml"
    yaml.write_text(json.dumps(sequential_model.model_dump(mode="json")))  # JSON is YAML
    row = ["--gpus", "96", "--cluster", "gpt-neox-a100-40g", *LAYOUT, "--global-batch", "1536",
           "--attention-kernel", "unfused", "--grad-accumulation", "autograd", "--no-dp-overlap",
           "--grad-all-reduce", "--pipeline-grads-whole", "--pipeline-p2p-blocking", "--no-cpu-affinity"]
    tp_par = _cli("evaluate", "--model", "gpt-neox-20b", *row)["breakdown"]["tp"]
    tp_seq = _cli("evaluate", "--model", str(yaml), *row)["breakdown"]["tp"]
    assert tp_par == pytest.approx(tp_seq * 4 / 6, rel=1e-4)
    assert saved == pytest.approx((tp_seq - tp_par) * (32 + 4 - 1) / 32, rel=1e-3) and saved > 0.2


def test_plans_say_where_the_residual_comes_from_and_frameworks_price_what_their_layers_run() -> None:
    own = _cli("evaluate", *JOB, *LAYOUT)
    assert own["model_features"] == {"parallel_residual": {"value": True, "source": "model gpt-neox-20b"}}
    megatron = _cli("evaluate", *JOB, *LAYOUT, "--framework", "megatron")
    feature = megatron["model_features"]["parallel_residual"]
    assert feature["value"] is False and feature["source"].startswith("--framework megatron: Megatron-Core 0.19.2")
    assert megatron["breakdown"]["tp"] == pytest.approx(own["breakdown"]["tp"] * 6 / 4, rel=1e-4)
    # DeepSpeed runs the user's model code (GPT-NeoX's own layers): the model as it is
    deepspeed = _cli("evaluate", *JOB, *LAYOUT, "--framework", "deepspeed")
    assert deepspeed["model_features"]["parallel_residual"]["value"] is True
    # a model without one carries no feature line
    assert _cli("evaluate", "--model", "llama3-8b", "--gpus", "8")["model_features"] is None


def test_a_megatron_file_for_a_parallel_residual_plan_prices_its_sequential_layers(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["evaluate", *JOB, "--tp", "2", "--pp", "4", "--mbs", "1", "--out", str(out),
                                       "--emit", "megatron,deepspeed"])
    assert result.exit_code == 0, result.output
    # the file states the plan's gradient-buffer passes (3: --no-check-for-nan-in-loss-and-grad), a Megatron choice
    sequential = _cli("evaluate", *JOB, "--tp", "2", "--pp", "4", "--mbs", "1", "--framework", "megatron",
                      "--grad-buffer-passes", "3")
    header = (out / "megatron.sh").read_text()
    assert "this file runs attention, then the MLP (not the model's parallel residual" in header
    assert f"{sequential['step_time_s']:.3f} s/step" in header
    assert "parallel residual" not in (out / "deepspeed.sh").read_text()


@pytest.mark.parametrize("value", ["true", "false", None])
def test_the_audit_reads_gpt_j_residual_from_a_neox_config(tmp_path: Path, value: str | None) -> None:
    text = NEOX.read_text()
    assert '"gpt_j_residual": true,' in text
    path = tmp_path / "20B.yml"
    path.write_text(text.replace('"gpt_j_residual": true,', "" if value is None else f'"gpt_j_residual": {value},'))
    got = _cli("audit", *JOB, "--launch", str(path))["estimate"]
    feature = got["model_features"]["parallel_residual"]
    assert feature["value"] is (value == "true")
    if value is None:  # GPT-NeoX's default, said as such
        assert feature["source"].endswith("no gpt_j_residual (GPT-NeoX's default: false)")
    else:
        assert feature["source"].endswith(f'"gpt_j_residual": {value},')


def test_a_megatron_audit_of_a_parallel_residual_model_prices_megatrons_layers(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nnodes 12 --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 2 "
                      "--pipeline-model-parallel-size 4 --num-layers 44 --hidden-size 6144 --num-attention-heads 64 "
                      "--seq-length 2048 --micro-batch-size 4 --global-batch-size 1536 --bf16\n")
    got = _cli("audit", *JOB, "--launch", str(script))["estimate"]
    feature = got["model_features"]["parallel_residual"]
    assert feature["value"] is False and feature["source"].startswith("megatron: Megatron-Core 0.19.2")


def test_gpt_neox_rope_on_a_quarter_of_each_head_is_stated_to_megatron(tmp_path: Path) -> None:
    """GPT-NeoX-20B rotates 24 of each head's 96 dimensions (configs/20B.yml rotary_pct 0.25): the Megatron file
    says so (`--rotary-percent`, which megatron-core parses: tests/verify/test_megatron.py), and a share of RoPE on
    a model without RoPE is refused by name."""
    from placement.errors import InputError
    from placement.specs.model import ModelSpec

    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["evaluate", *JOB, "--tp", "2", "--pp", "4", "--mbs", "1", "--out", str(out),
                                       "--emit", "megatron"])
    assert result.exit_code == 0, result.output
    text = (out / "megatron.sh").read_text()
    assert "--position-embedding-type rope --rotary-base 10000 --rotary-percent 0.25" in text
    assert "--position-embedding-type\n" not in text and "not in the model spec: --position" not in text
    spec = load_model("gpt-neox-20b").model_dump() | {"position_embedding": "learned"}
    with pytest.raises((ValueError, InputError), match=r"rotary_percent .* set position_embedding: rope"):
        ModelSpec.model_validate(spec)


def test_files_for_the_users_model_code_run_the_parallel_residual_a_framework_plan_priced_without(
        tmp_path: Path) -> None:
    """Planned for Megatron (sequential layers), the DeepSpeed and device-mesh files still run the user's model code:
    with the parallel residual, priced as such beside the plan's number; Megatron's file runs the plan."""
    out = tmp_path / "out"
    args = ["evaluate", *JOB, "--tp", "2", "--pp", "4", "--mbs", "1", "--framework", "megatron"]
    result = CliRunner().invoke(main, [*args, "--out", str(out), "--emit", "megatron,deepspeed,devicemesh"])
    assert result.exit_code == 0, result.output
    # the model's own layers, with the Megatron plan's gradient-buffer passes (4), which a mesh leaves to your code
    own = _cli("evaluate", *JOB, "--tp", "2", "--pp", "4", "--mbs", "1", "--grad-buffer-passes", "4")
    assert "parallel residual" not in (out / "megatron.sh").read_text()
    for name in ("deepspeed.sh", "device_mesh.py"):
        text = (out / name).read_text()
        assert "the model's parallel residual (its own model code), not attention then the MLP" in text
    mesh = (out / "device_mesh.py").read_text()
    assert f"this file runs the model's parallel residual (its own model code), not attention then the MLP: " \
           f"{own['step_time_s']:.3f} s/step" in mesh


@pytest.mark.parametrize(("launch", "feature"), [("megatron", False), ("neox-default", False), ("neox", True)])
def test_the_audits_best_files_run_the_model_as_the_job_does(tmp_path: Path, launch: str, feature: bool) -> None:
    """The audit's best plan is priced with the model as the launch files run it, and so are its files: no line
    saying they run another model than the one priced."""
    if launch == "megatron":
        path = tmp_path / "train.sh"
        path.write_text("torchrun --nnodes 12 --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 2 "
                        "--pipeline-model-parallel-size 4 --num-layers 44 --hidden-size 6144 "
                        "--num-attention-heads 64 --seq-length 2048 --micro-batch-size 4 --global-batch-size 1536 "
                        "--bf16\n")
    else:
        path = tmp_path / "20B.yml"
        text = NEOX.read_text()
        path.write_text(text if launch == "neox" else text.replace('"gpt_j_residual": true,', ""))
    out = tmp_path / "out"
    got = _cli("audit", *JOB, "--launch", str(path), "--out", str(out))
    assert got["best"]["model_features"]["parallel_residual"]["value"] is feature
    if launch != "megatron":  # GPT-NeoX runs deepy.py on its own config: that config back, no program of placement's
        assert not (out / "deepspeed.sh").exists() and (out / "hostfile").exists()
        assert (out / "20B.yml").read_text().count("gpt_j_residual: true") == int(feature)
        return
    written = (out / "megatron.sh").read_text()
    assert "not the model's parallel residual" not in written
    assert "the model's parallel residual (its own" not in written
