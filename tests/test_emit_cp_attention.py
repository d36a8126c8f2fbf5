"""Context parallelism as DeepSpeed's and MaxText's files run it, not as Transformer Engine's attention would: their
headers re-price the files without TE's context-parallel refusals (a ring beside a sliding window, sinks beside
anything but a2a), which are Megatron-Core's (cost.rules.Facts.cp_refused)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from placement.cli import main

MODELS = Path(__file__).resolve().parents[1] / "models"
TE_REFUSALS = ("Transformer Engine runs context parallelism", "Transformer Engine refuses ring")


def _llama_with(tmp_path: Path, name: str, extra: str) -> str:
    """Llama 3 8B with `extra` model keys: a model whose MaxText config (llama3-8b) runs no sinks or window."""
    text = (MODELS / "llama3-8b.yaml").read_text().replace("name: llama3-8b", f"name: {name}", 1)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text + extra)
    return str(path)


def _evaluate(model: str, cp_comm_type: str, emit: str, out: Path):
    return CliRunner().invoke(main, ["evaluate", "--model", model, "--cluster", "dgx-h100", "--gpus", "16",
                                     "--seq-len", "16384", "--global-batch", "32", "--tp", "1", "--zero", "1",
                                     "--recompute", "full", "--cp", "2", "--cp-comm-type", cp_comm_type,
                                     "--emit", emit, "--out", str(out)])


def test_a_deepspeed_file_of_gpt_oss_at_cp_is_not_refused_for_transformer_engines_sinks_rule(tmp_path: Path) -> None:
    """GPT-OSS at cp 2 under a2a, which TE runs beside its sinks: the DeepSpeed files' context axis is the model
    code's (no attention of DeepSpeed's own), so they are written and priced (a QA run: exit 2, told to pass the
    --cp-comm-type a2a it had passed, and no deepspeed.sh)."""
    result = CliRunner().invoke(main, ["evaluate", "--model", "gpt-oss-120b", "--cluster", "dgx-h100", "--gpus", "64",
                                       "--seq-len", "32768", "--global-batch", "64", "--tp", "1", "--ep", "8",
                                       "--zero", "1", "--recompute", "full", "--cp", "2", "--cp-comm-type", "a2a",
                                       "--emit", "deepspeed", "--out", str(tmp_path)])
    assert result.exit_code != 2, result.output
    assert not any(t in result.output for t in TE_REFUSALS)
    assert "this file runs cp_comm_type p2p (not a2a)" in (tmp_path / "deepspeed.sh").read_text()


def test_a_deepspeed_file_of_a_sliding_window_model_is_priced_beside_its_ring(tmp_path: Path) -> None:
    """A sliding-window model planned with all-gather CP (which TE runs beside a window): DeepSpeed's files run the
    model code's ring, re-priced as p2p, which TE's window rule does not govern."""
    model = _llama_with(tmp_path, "llama-window", "sliding_window: 4096\nsliding_window_layers: 16\n")
    result = _evaluate(model, "all_gather", "deepspeed", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert not any(t in result.output for t in TE_REFUSALS)
    assert "this file runs cp_comm_type p2p (not all_gather)" in (tmp_path / "out" / "deepspeed.sh").read_text()


def test_a_maxtext_file_is_not_refused_for_transformer_engines_sinks_rule(tmp_path: Path) -> None:
    """A sinks model planned at cp 2 with a2a: maxtext.yml names llama3-8b, whose attention (MaxText's own, under
    context_parallel_strategy all_gather) runs no sinks, and is re-priced as that all-gather."""
    model = _llama_with(tmp_path, "llama-sinks", "attention_sinks: true\n")
    result = _evaluate(model, "a2a", "maxtext", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert not any(t in result.output for t in TE_REFUSALS)
    assert "cp_comm_type all_gather (not a2a)" in (tmp_path / "out" / "maxtext.yml").read_text()
